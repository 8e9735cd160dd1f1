/* Reader of Docker's streamed JSON progress: the body of an image pull
 * (POST /images/create) and of a push (POST /images/{name}/push).
 *
 * Docker sends one JSON object per line while it works, e.g.
 *   {"status":"Downloading","progressDetail":{"current":1024,"total":4096},"id":"a1b2c3"}
 *   {"status":"Pull complete","progressDetail":{},"id":"a1b2c3"}
 *   {"error":"manifest unknown","errorDetail":{"message":"manifest unknown"}}
 * with HTTP status 200 even when the transfer fails half-way: a failure is
 * a line with "error". This reader sums the layers' byte counts (what a
 * person reads as "412 of 980 MB") and keeps the first error.
 *
 * Pure: no I/O, no globals, memory through malloc only; lines arrive cut
 * anywhere and may be fed a byte at a time. The stream comes from a
 * registry through dockerd, so it is external input: a fuzz target
 * (tests/runtime/fuzz_progress.c). */
#ifndef TESSERA_RUNTIME_DOCKER_PROGRESS_H
#define TESSERA_RUNTIME_DOCKER_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Layers followed at most; more (no real image has them) are summed into
 * the last slot's neighbours: they are ignored. */
#define DOCKER_PROGRESS_MAX_LAYERS 256
/* A longer line is not Docker talking: it is skipped. */
#define DOCKER_PROGRESS_LINE_MAX (64u << 10)

struct docker_progress_layer {
	char id[72];
	int64_t current;   /* bytes of this layer transferred */
	int64_t total;     /* its size, 0 while unknown */
	bool done;
};

struct docker_progress {
	struct docker_progress_layer layers[DOCKER_PROGRESS_MAX_LAYERS];
	size_t n_layers;
	char *line;        /* the line being collected */
	size_t len, alloc;
	bool skipping;     /* inside an oversized line */
	char error[512];   /* the first error line's message, "" if none */
	char status[128];  /* the last status line without a layer (e.g. "Digest: ...") */
	int lines;         /* JSON lines read */
};

void docker_progress_init(struct docker_progress *p);
/* Consumes len bytes; complete lines are read as they end. Returns 0 or
 * -ENOMEM (then the rest is ignored). */
int docker_progress_feed(struct docker_progress *p, const char *data, size_t len);
/* Reads a last line that has no newline. */
void docker_progress_finish(struct docker_progress *p);
/* Bytes transferred and known total, summed over the layers; a finished
 * layer counts whole. */
void docker_progress_sum(const struct docker_progress *p, int64_t *current, int64_t *total);
void docker_progress_free(struct docker_progress *p);

#endif
