/* The history of sessions' live usage (docs/api.md, "Usage statistics"),
 * behind an ops table: samples pushed as agents report them, read back
 * since a time. Two backends: a ring buffer per session in memory
 * (usage_store_memory_ops, the default), and a list per session in Redis
 * (usage_store_redis_ops, with `redis = ...`: production mode, where live
 * statistics belong; the history outlives a manager restart).
 *
 * A history keeps retention_ms of samples: older ones are dropped as new
 * ones come, and a history whose newest sample is older than that (its
 * session ended an hour ago) is freed by expire. Thread-safe: each
 * backend locks for itself, so callers may hold their own locks (the
 * manager's mutex is always taken first).
 *
 * Ownership: samples are copied in and out; *out of since is malloc'd,
 * the caller frees it. */
#ifndef TESSERA_MANAGER_USAGE_STORE_USAGE_STORE_H
#define TESSERA_MANAGER_USAGE_STORE_USAGE_STORE_H

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
	/* One agent round: n samples of n different sessions (ids[i] for
	 * s[i]) at once; for Redis one round trip for all. Callers hold no
	 * lock of theirs across it (a round trip may wait on the network).
	 * Returns the first failure (the other samples are kept all the
	 * same); a backend that kept the samples elsewhere meanwhile (Redis
	 * down) returns 0. */
	int (*push_round)(struct usage_store *st, size_t n, const char *const *ids, const struct usage_sample *s,
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

/* The Redis backend (usage_store_redis.c). Its ops' open is NULL: it is
 * opened with usage_store_redis_open on a client the caller keeps (and
 * closes after the store). While Redis does not answer, samples go to a
 * memory store inside it and are written to Redis when it answers again;
 * reads answer from what it has. outcome, when not NULL, is told of each
 * Redis call's result (rc < 0: failed) so its owner logs one line per
 * outage for all its uses of Redis; without one the store logs its own. */
struct redis_client;
typedef void (*usage_redis_outcome_fn)(void *arg, int rc, const struct terr *err);
int usage_store_redis_open(struct usage_store **out, struct redis_client *rc, int64_t retention_ms,
			   int64_t period_ms, usage_redis_outcome_fn outcome, void *arg, struct terr *err);
extern const struct usage_store_ops usage_store_redis_ops;

/* A sample in the Redis backend's packed text (exported for its tests and
 * the benchmark): returns the length written into buf (at most len - 1,
 * NUL-terminated), or -ENOSPC. decode: 0, or -EINVAL for text that is not
 * a sample. */
int usage_sample_encode(const struct usage_sample *s, char *buf, size_t len);
int usage_sample_decode(const char *text, struct usage_sample *s);

#endif
