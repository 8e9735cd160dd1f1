/* A bounded byte pipe between a producer thread and one reader: how a
 * session's logs and exec output travel from Docker (or an agent) to an
 * HTTP response without ever being held whole in memory.
 *
 * The producer is a function run in a thread of its own; it writes with
 * pump_write, which blocks while the pipe holds `cap` bytes, so a producer
 * never reads from its source faster than the reader takes the bytes
 * (backpressure: libcurl stops reading Docker's socket while its write
 * callback waits here). The reader takes bytes with pump_read, e.g. from
 * an httpd stream callback, and ends with pump_close, which cancels the
 * producer (its pump_write returns -ECANCELED, pump_cancel_flag() turns
 * true for httpc) and joins its thread.
 *
 * The producer may say the stream is open (pump_ready) before writing;
 * the opener waits for that with pump_wait_ready, so an error known before
 * the first byte (a 404 from the far end) becomes an ordinary error of the
 * open call instead of a cut stream. */
#ifndef TESSERA_COMMON_PUMP_H
#define TESSERA_COMMON_PUMP_H

#include <stdatomic.h>
#include <stddef.h>

#include "common/err.h"

struct pump;

/* The producer's body, run in the pump's thread. Returns 0 when the
 * stream ended well, or negative with err filled (the reader then sees
 * an error end). ud is the producer's. */
typedef int (*pump_fn)(struct pump *p, void *ud, struct terr *err);

/* Bytes a pump holds at most unless told otherwise. */
#define PUMP_DEFAULT_CAP (64u * 1024u)

/* Starts fn(p, ud) in a new thread. The pump owns ud from then on (also
 * on failure) and frees it with ud_free (may be NULL) after the thread
 * ended, in pump_close. cap: bytes buffered at most (0: the default). */
int pump_start(struct pump **out, size_t cap, pump_fn fn, void *ud, void (*ud_free)(void *ud),
	       struct terr *err);

/* Producer: appends len bytes, waiting while the pipe is full. 0, or
 * -ECANCELED once the reader has closed (stop producing then). */
int pump_write(struct pump *p, const void *data, size_t len);
/* Producer: the stream is open; pump_wait_ready returns 0 from now on. */
void pump_ready(struct pump *p);
/* Set once the reader closed the pump: for httpc's `cancel`. */
const atomic_bool *pump_cancel_flag(struct pump *p);

/* Reader: waits until the producer called pump_ready (0) or ended before
 * doing so (its error, or 0 when it ended well without data). */
int pump_wait_ready(struct pump *p, struct terr *err);
/* Reader: up to max bytes into buf, waiting for some. Returns the count
 * (> 0); 0 at the end of a stream that ended well; -1 when the producer
 * failed (pump_error says why). timeout_ms >= 0: returns -ETIMEDOUT when
 * no byte came in that time (the caller may check its client and call
 * again); < 0 waits as long as it takes. */
long pump_read(struct pump *p, char *buf, size_t max, int timeout_ms);
/* The producer's error after pump_read returned -1. */
const struct terr *pump_error(struct pump *p);
/* Reader: cancels the producer, joins its thread, frees everything. NULL
 * is fine. */
void pump_close(struct pump *p);

/* ---- as an HTTP response (pump_http.c) ---- */

struct httpd_req;
struct httpd_resp;

/* Answers resp with p's bytes as a streamed body of type ctype and the
 * given status; the response owns p from then on and closes it when the
 * body ended or its client left, then calls on_close(close_ud) (may be
 * NULL). While no byte comes it checks every second whether req's client
 * is still connected, so a follower of a quiet log does not keep a
 * thread after its client has gone. A producer failing midway cuts the
 * body short (no proper end of the chunked body), which the client sees. */
void pump_respond(struct pump *p, struct httpd_req *req, struct httpd_resp *resp, int status,
		  const char *ctype, void (*on_close)(void *close_ud), void *close_ud);

#endif
