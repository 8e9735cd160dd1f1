/* The framed byte stream of `session exec` (docs/api.md, "Exec output
 * stream"): how a command's stdout and stderr travel apart, byte for
 * byte, followed by its exit code, through the agent's RPC, the manager's
 * API and the webserver to the client.
 *
 * The frame is Docker's multiplexed-stream frame, extended with two
 * trailer types: an 8-byte header [type, 0, 0, 0, length as uint32
 * big-endian] and `length` payload bytes.
 *   type 1  stdout bytes              type 2  stderr bytes
 *   type 3  exit: 4 bytes, the exit code as int32 big-endian (the last frame)
 *   type 4  error: UTF-8 text saying why the command's outcome is unknown
 *           (the last frame; e.g. the container went away)
 * A stream ends after exactly one exit or error frame. Data frames carry
 * at most FRAMES_MAX_DATA bytes, trailers at most FRAMES_MAX_TRAILER.
 *
 * The decoder is pure (no I/O, no allocation: trailers are collected in
 * its own buffer, data is handed on in the pieces it arrives in), so it is
 * a fuzz target as is (tests/fuzz/fuzz_frames.c). */
#ifndef TESSERA_COMMON_FRAMES_H
#define TESSERA_COMMON_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum frame_type {
	FRAME_STDOUT = 1,
	FRAME_STDERR = 2,
	FRAME_EXIT = 3,
	FRAME_ERROR = 4,
};

#define FRAMES_HEADER 8
#define FRAMES_MAX_DATA (1u << 20)
#define FRAMES_MAX_TRAILER 4096u
#define FRAMES_CONTENT_TYPE "application/vnd.tessera.frames"

/* The header of a frame of type and length into out. */
void frames_header(unsigned char out[FRAMES_HEADER], enum frame_type type, uint32_t len);
/* An exit frame (header and payload, 12 bytes) into out. */
void frames_exit(unsigned char out[FRAMES_HEADER + 4], int32_t code);

/* What the decoder hands on. on_data gets the payload of stdout/stderr
 * frames as it arrives (a frame may come in several pieces, never two
 * frames in one call); on_end gets the trailer: the exit code, or the
 * error text (NUL-terminated, borrowed for the call). Non-zero from a
 * callback stops the decoder (frames_feed returns -ECANCELED). */
struct frames_sink {
	int (*on_data)(void *ud, enum frame_type type, const char *data, size_t len);
	int (*on_end)(void *ud, bool exited, int32_t exit_code, const char *error);
	void *ud;
};

struct frames_decoder {
	struct frames_sink sink;
	unsigned char hdr[FRAMES_HEADER];
	size_t hdr_have;
	uint32_t left;             /* payload bytes still due in this frame */
	unsigned char type;        /* of the current frame */
	char trailer[FRAMES_MAX_TRAILER + 1];
	size_t trailer_len;
	bool done;                 /* the trailer came: nothing may follow */
	bool docker;               /* Docker's own stream (frames_decoder_init_docker) */
	int error;                 /* sticky: -EPROTO, -ECANCELED */
};

void frames_decoder_init(struct frames_decoder *d, const struct frames_sink *sink);
/* A decoder of Docker's multiplexed stream itself (attached exec, logs),
 * which the runtime turns into ours: types 0 (stdin, counted as stdout),
 * 1 and 2 only, of any length, no trailer; frames_finish is 0 at any
 * frame boundary. */
void frames_decoder_init_docker(struct frames_decoder *d, const struct frames_sink *sink);
/* Consumes len bytes. 0, or a negative errno that stays: -EPROTO for
 * bytes that are not this format (a bad type, non-zero padding, an
 * oversized frame, a wrong exit payload, anything after the trailer),
 * -ECANCELED when a callback asked to stop. */
int frames_feed(struct frames_decoder *d, const void *data, size_t len);
/* At the end of input: 0 when the stream ended with its trailer, -EPROTO
 * when it stopped before (cut short), or the sticky error. */
int frames_finish(const struct frames_decoder *d);

#endif
