/* Demultiplexer for Docker's multiplexed stdout/stderr stream.
 *
 * When a container or exec has no TTY, Docker sends its output (logs,
 * attached exec) as frames: an 8-byte header [stream, 0, 0, 0, size as
 * uint32 big-endian] followed by `size` payload bytes; stream is 0 stdin,
 * 1 stdout, 2 stderr. Frames arrive cut anywhere by the transport, so the
 * decoder keeps its state between calls to docker_demux_feed and may be fed
 * one byte at a time.
 *
 * Pure: no I/O, no globals; memory only through malloc/realloc. This makes
 * it a fuzz target as is: init, feed(data, size), finish, free. */
#ifndef TESSERA_RUNTIME_DOCKER_DEMUX_H
#define TESSERA_RUNTIME_DOCKER_DEMUX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One output buffer. data is NUL-terminated whenever non-NULL; owned by the
 * demuxer until taken with docker_demux_take. */
struct docker_demux_buf {
	char *data;
	size_t len;
	size_t alloc;
	bool truncated;    /* bytes beyond the cap were dropped */
};

struct docker_demux {
	unsigned char hdr[8];
	size_t hdr_have;         /* header bytes collected so far */
	uint32_t left;           /* payload bytes still due in this frame */
	unsigned char stream;    /* stream of the current frame */
	bool merge;              /* everything into out[0], in arrival order */
	size_t cap;              /* per buffer, bytes kept at most */
	int error;               /* sticky: -EPROTO or -ENOMEM once failed */
	struct docker_demux_buf out[2];   /* [0] stdout, [1] stderr */
};

/* merge: stdout and stderr go into out[0] interleaved as written (logs);
 * otherwise stdout into out[0], stderr into out[1] (exec). cap: bytes kept
 * per buffer; the rest is read and dropped, marking the buffer truncated.
 * Stdin frames (stream 0, sent only for TTY-less attach echoes) count as
 * stdout. */
void docker_demux_init(struct docker_demux *d, size_t cap, bool merge);

/* Consumes len bytes. Returns 0, or a negative errno that stays set:
 * -EPROTO for a header that is not a Docker frame header (a bad stream
 * byte or non-zero padding, e.g. a TTY raw stream), -ENOMEM. */
int docker_demux_feed(struct docker_demux *d, const void *data, size_t len);

/* Call at end of input. Returns 0 when the input ended on a frame boundary,
 * -EPROTO when it stopped inside a header or a payload (what arrived of
 * that payload is kept), or the sticky error. */
int docker_demux_finish(const struct docker_demux *d);

/* Moves buffer i (0 or 1) to the caller: *out becomes a malloc'd
 * NUL-terminated string (never NULL on success, "" when empty) that the
 * caller frees; the demuxer's buffer is left empty. -ENOMEM on failure. */
int docker_demux_take(struct docker_demux *d, int i, char **out, size_t *len);

/* Frees what the demuxer still owns; d may be reused after init. */
void docker_demux_free(struct docker_demux *d);

#endif
