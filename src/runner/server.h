/* The runner's app port (docs/apps.md, "The runner's app port"): TCP
 * 7611 on every address of the container. Each connection's first line
 * names the session's secret and a target; the answer is OK (then the
 * connection is the app's: relayed to 127.0.0.1:PORT, or the terminal),
 * STARTING or ERROR.
 *
 * Module state is global (one runner). */
#ifndef TESSERA_RUNNER_SERVER_H
#define TESSERA_RUNNER_SERVER_H

#include <stdbool.h>

#include "common/err.h"
#include "runner/loop.h"
#include "runner/proto.h"

#define SERVER_SECRET_FILE "/run/tessera/app-secret"
/* A connection proves itself with its first line, which the proxy sends
 * at once: until then it is unauthenticated, and it gets SERVER_HELLO_MS
 * from its accept (not from its last byte) to say the line. At most
 * SERVER_MAX_HELLO wait at a time; a newcomer past that closes the one
 * that has waited longest, so a flood of slow connections pushes out its
 * own, never the proxy's, which say their line and move on. Connections
 * past their line (relays, terminals, the app's port being dialled) are
 * not counted here. */
#define SERVER_HELLO_MS 5000
#define SERVER_MAX_HELLO 256
/* A terminal connection's HTTP upgrade request, after its line. */
#define SERVER_TERM_HEAD_MS 10000

/* Reads the secret file (before the runner drops its privileges: the file
 * is root's, mode 0400). Absent: *have false, and every connection is
 * answered that apps are not enabled. -errno (said in err) when it exists
 * but cannot be used; then too no secret is known. */
int server_read_secret(const char *path, char out[PROTO_SECRET_LEN + 1], bool *have, struct terr *err);

/* Listens on port (0.0.0.0 and, where there is IPv6, ::) with the given
 * secret (NULL: apps not enabled). */
int server_start(struct rl_loop *l, int port, const char *secret, struct terr *err);

/* Stops listening (the session stops); what is connected goes on. */
void server_stop(void);

#endif
