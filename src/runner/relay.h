/* Bytes both ways between two sockets (a connection on the app port and
 * the app's own), non-blocking in the runner's loop.
 *
 * Each direction has a bounded buffer (RELAY_BUF bytes): a side is read
 * only while the buffer toward the other has room, so a slow reader slows
 * the writer down instead of the runner's memory growing. An end of stream
 * on one side is passed on as a half-close (shutdown SHUT_WR) once what
 * was read before it is written; the relay ends, closing both sockets
 * together, when both directions are done or either side fails.
 *
 * The bytes move by splice(2) through a pipe per direction (RELAY_BUF
 * is then only the first bytes given to relay_start): four descriptors
 * more per connection, not polled. A runner out of descriptors relays
 * that connection by read/send through the buffers instead. */
#ifndef TESSERA_RUNNER_RELAY_H
#define TESSERA_RUNNER_RELAY_H

#include <stddef.h>

#include "common/err.h"
#include "runner/loop.h"

#define RELAY_BUF (64 * 1024)

/* Starts relaying between fd_a and fd_b (both non-blocking; the relay owns
 * them from now on, and closes them even when it fails to start). to_a and
 * to_b (may be empty) are written to each side first: the `OK` line, the
 * bytes that came after the line. Frees itself when done. */
int relay_start(struct rl_loop *l, int fd_a, int fd_b, const void *to_a, size_t na,
		const void *to_b, size_t nb, struct terr *err);

/* How many relays run (for the connection limit). */
int relay_count(void);

/* Ends a connection politely: shuts its write side (what was written
 * before is delivered: closing with unread input would reset it and could
 * lose the last answer), then reads and drops what comes until the peer
 * closes or RELAY_LINGER_MS pass, then closes fd; at once when
 * RELAY_MAX_LINGER already linger. Takes fd. */
#define RELAY_LINGER_MS 3000
#define RELAY_MAX_LINGER 64   /* past it, closed at once */
void relay_linger(struct rl_loop *l, int fd);

#endif

