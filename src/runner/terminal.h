/* The web terminal (docs/apps.md, "The terminal protocol"): shells on
 * PTYs served over WebSocket by the runner itself.
 *
 * A connection that asked for `app:terminal` and was answered OK comes
 * here with the bytes that followed its line: an HTTP request for `/ws`
 * with a WebSocket upgrade (anything else is answered 404 or 400 and
 * closed). Shells named by `term=ID` outlive their connections and keep
 * their last TERM_RING bytes of output to replay on the next attach; a
 * named shell may have several connections at once (each gets all the
 * output; the slowest one paces the shell). `term=new` is a shell of the
 * connection's own, hung up (SIGHUP to its group, SIGKILL 5 s later) when
 * the connection ends.
 *
 * Module state is global (one runner). */
#ifndef TESSERA_RUNNER_TERMINAL_H
#define TESSERA_RUNNER_TERMINAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "runner/loop.h"

#define TERM_RING (64 * 1024)
#define TERM_MAX_SHELLS 32
#define TERM_MAX_CONNS 64

void term_init(struct rl_loop *l);

/* Takes a connection (fd, non-blocking) after its OK line: `early` holds
 * the n bytes that came after the line. Closes fd when it cannot take it. */
void term_accept(int fd, const char *early, size_t n, int64_t head_deadline);

/* A child ended: true when it was a shell (then handled). */
bool term_child_exited(pid_t pid, int status);

/* The session stops: every shell is hung up. */
void term_stop(void);

#endif
