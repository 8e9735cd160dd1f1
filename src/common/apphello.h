/* The `TESSERA-APP/1 <secret> <target>` line (docs/apps.md, "The runner's
 * app port"): the first line on every connection to a session runner's
 * app port. One codec for both sides: the app proxy writes it
 * (proxy/upstream.c) and the runner parses it (runner/server.c).
 *
 * The C library only (and err.c): it is compiled into the static runner
 * and into libtessera-base. Unit-tested in tests/common/test_apphello.c
 * (the round trip) and tests/runner/test_proto.c (what is refused);
 * fuzzed by tests/fuzz/fuzz_runner_proto.c. */
#ifndef TESSERA_COMMON_APPHELLO_H
#define TESSERA_COMMON_APPHELLO_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

#define APPHELLO_MAGIC "TESSERA-APP/1"
#define APPHELLO_LINE_MAX 1024     /* a line, \r\n included */
#define APPHELLO_SECRET_LEN 64     /* hex characters */
#define APPHELLO_NAME_MAX 64       /* an app's name, with the NUL */
#define APPHELLO_RUNNER_PORT 7611  /* the runner's own port: never a target */

struct apphello {
	char secret[APPHELLO_SECRET_LEN + 1];
	bool is_port;                  /* port:N, else app:NAME */
	char app[APPHELLO_NAME_MAX];   /* app:NAME */
	int port;                      /* port:N */
};

/* Whether s[0..len) is an app name: [A-Za-z0-9_.-], 1 to 63 characters,
 * not starting with '.' or '-'. */
bool apphello_valid_name(const char *s, size_t len);

/* The line for secret and target ("app:NAME" or "port:N"), \r\n included,
 * into out (n bytes, NUL-terminated): its length, or -ENAMETOOLONG when
 * it does not fit n or APPHELLO_LINE_MAX. Not checked here: the runner
 * answers a line it refuses with what is wrong, which the proxy shows. */
int apphello_format(char *out, size_t n, const char *secret, const char *target);

/* Parses the line (without its \r\n): `TESSERA-APP/1 SECRET TARGET`,
 * SECRET 64 hex characters, TARGET `app:NAME` or `port:N` (1-65535, not
 * 7611). -EINVAL with a message for anything else. */
int apphello_parse(const char *line, size_t len, struct apphello *h, struct terr *err);
/* Its TARGET part alone, t[0..tl): fills is_port and app or port of h
 * (not its secret); -EINVAL with a message as above. */
int apphello_parse_target(const char *t, size_t tl, struct apphello *h, struct terr *err);

#endif
