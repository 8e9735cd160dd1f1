/* The history of sessions' live usage (docs/api.md, "Usage statistics"),
 * behind an ops table: samples pushed as agents report them, read back
 * since a time. The one backend today keeps a ring buffer per session in
 * memory (usage_store_memory_ops, `tessera server` and the manager); a
 * Redis backend (production mode, where live statistics belong) is a
 * second table of the same shape.
 *
 * A history keeps retention_ms of samples: older ones are dropped as new
 * ones come, and a history whose newest sample is older than that (its
 * session ended an hour ago) is freed by expire. Thread-safe: each
 * backend locks for itself, so callers may hold their own locks (the
 * manager's mutex is always taken first).
 *
 * Ownership: samples are copied in and out; *out of since is malloc'd,
 * the caller frees it. */
#ifndef TESSERA_MANAGER_USAGE_STORE_H
#define TESSERA_MANAGER_USAGE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define USAGE_MAX_GPUS 16

struct usage_gpu {
	char uuid[64];
	double util_pct;          /* < 0: unknown (null in JSON) */
	int64_t mem_bytes, mem_limit_bytes;
};

/* One sample, as the API shows it (less the device index and share, which
 * the manager knows from the session's allocation). */
struct usage_sample {
	int64_t t;                /* Unix ms */
	double cpu_cores, cpu_pct;
	int64_t mem_bytes, mem_limit_bytes;
	int64_t net_rx, net_tx, blk_read, blk_write;
	int n_gpus;
	struct usage_gpu gpus[USAGE_MAX_GPUS];
};

struct usage_store;

struct usage_store_ops {
	const char *name;
	/* retention_ms: how much history to keep; period_ms: the expected
	 * period, which sizes a memory ring (retention / period samples). */
	int (*open)(struct usage_store **out, int64_t retention_ms, int64_t period_ms, struct terr *err);
	void (*close)(struct usage_store *st);
	int (*push)(struct usage_store *st, const char *session_id, const struct usage_sample *s,
		    struct terr *err);
	/* The samples of session_id with t > since_ms, oldest first (*n 0
	 * and *out NULL when none). */
	int (*since)(struct usage_store *st, const char *session_id, int64_t since_ms,
		     struct usage_sample **out, size_t *n, struct terr *err);
	/* The newest sample; -ENOENT when none. */
	int (*last)(struct usage_store *st, const char *session_id, struct usage_sample *out);
	/* Forgets a session's history. */
	void (*drop)(struct usage_store *st, const char *session_id);
	/* Frees the histories whose newest sample is older than
	 * now_ms - retention. */
	void (*expire)(struct usage_store *st, int64_t now_ms);
	/* Bytes the store holds (0 where another process holds them). */
	size_t (*memory)(struct usage_store *st);
};

extern const struct usage_store_ops usage_store_memory_ops;

#endif
