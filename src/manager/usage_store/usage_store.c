/* The in-memory backend of the usage history (usage_store.h): one ring
 * buffer per session, compact. A sample takes 56 bytes plus 10 per GPU:
 * the CPU rate and percent as 32-bit integers (milli-cores, hundredths of
 * a percent), a GPU's utilisation in hundredths of a percent in 16 bits,
 * the device UUIDs and limits once per ring, not per sample. An hour at
 * 5 s of 1,000 sessions is about 40 MB (bench/usage_bench.c measures it). */
#include "manager/usage_store/usage_store.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"
#include "common/util.h"

#define UTIL_UNKNOWN 0xFFFFu
/* A ring never holds more than this many samples, whatever the period. */
#define RING_MAX 100000

struct point {
	int64_t t, mem, net_rx, net_tx, blk_read, blk_write;
	int32_t cpu_mc;          /* milli-cores */
	int32_t cpu_pct_c;       /* hundredths of a percent */
};

struct ring {
	char id[64];             /* the strmap key */
	size_t slot;             /* index in store.rings */
	int cap, head, count;    /* head: where the next sample goes */
	int ndev;
	int64_t mem_limit;
	struct { char uuid[64]; int64_t limit; } *dev;
	struct point *pts;
	uint16_t *gutil;         /* cap * ndev */
	int64_t *gmem;           /* cap * ndev */
};

struct usage_store {
	pthread_mutex_t mu;
	int64_t retention_ms, period_ms;
	struct strmap by_id;
	struct ring **rings;
	size_t n_rings, cap_rings;
};

static int mem_open(struct usage_store **out, int64_t retention_ms, int64_t period_ms, struct terr *err)
{
	if (retention_ms <= 0 || period_ms <= 0)
		return terr_set(err, EINVAL, "usage history: retention and period must be positive");
	struct usage_store *st = calloc(1, sizeof(*st));
	if (!st)
		return terr_set(err, ENOMEM, "out of memory");
	pthread_mutex_init(&st->mu, NULL);
	st->retention_ms = retention_ms;
	st->period_ms = period_ms;
	*out = st;
	return 0;
}

static void ring_free(struct ring *r)
{
	if (!r)
		return;
	free(r->dev);
	free(r->pts);
	free(r->gutil);
	free(r->gmem);
	free(r);
}

static void ring_remove(struct usage_store *st, struct ring *r)
{
	strmap_del(&st->by_id, r->id);
	st->rings[r->slot] = st->rings[--st->n_rings];
	st->rings[r->slot]->slot = r->slot;
	ring_free(r);
}

static void mem_close(struct usage_store *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n_rings; i++)
		ring_free(st->rings[i]);
	free(st->rings);
	strmap_free(&st->by_id);
	pthread_mutex_destroy(&st->mu);
	free(st);
}

/* A ring sized for the store's retention and period, for samples of ndev
 * devices. */
static struct ring *ring_new(struct usage_store *st, const char *id, const struct usage_sample *s)
{
	struct ring *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	util_strlcpy(r->id, id, sizeof(r->id));
	int64_t cap = st->retention_ms / st->period_ms + 1;
	r->cap = (int)(cap < 2 ? 2 : cap > RING_MAX ? RING_MAX : cap);
	r->ndev = s->n_gpus;
	r->mem_limit = s->mem_limit_bytes;
	r->pts = malloc((size_t)r->cap * sizeof(*r->pts));
	if (r->ndev > 0) {
		r->dev = calloc((size_t)r->ndev, sizeof(*r->dev));
		r->gutil = malloc((size_t)r->cap * (size_t)r->ndev * sizeof(*r->gutil));
		r->gmem = malloc((size_t)r->cap * (size_t)r->ndev * sizeof(*r->gmem));
	}
	if (!r->pts || (r->ndev > 0 && (!r->dev || !r->gutil || !r->gmem))) {
		ring_free(r);
		return NULL;
	}
	for (int d = 0; d < r->ndev; d++) {
		util_strlcpy(r->dev[d].uuid, s->gpus[d].uuid, sizeof(r->dev[d].uuid));
		r->dev[d].limit = s->gpus[d].mem_limit_bytes;
	}
	return r;
}

/* Whether the sample has the ring's devices, so it fits its layout. */
static bool ring_fits(const struct ring *r, const struct usage_sample *s)
{
	if (s->n_gpus != r->ndev)
		return false;
	for (int d = 0; d < r->ndev; d++)
		if (strcmp(r->dev[d].uuid, s->gpus[d].uuid))
			return false;
	return true;
}

static int32_t clamp32(double v)
{
	return v > 2e9 ? 2000000000 : v < -2e9 ? -2000000000 : (int32_t)(v + (v < 0 ? -0.5 : 0.5));
}

static int mem_push(struct usage_store *st, const char *session_id, const struct usage_sample *s, struct terr *err);

static int mem_push_round(struct usage_store *st, size_t n, const char *const *ids, const struct usage_sample *s,
			  struct terr *err)
{
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		struct terr e = {0};
		if (mem_push(st, ids[i], &s[i], &e) < 0 && rc == 0) {
			rc = -e.code;
			if (err)
				*err = e;
		}
	}
	return rc;
}

static int mem_push(struct usage_store *st, const char *session_id, const struct usage_sample *s, struct terr *err)
{
	if (s->n_gpus < 0 || s->n_gpus > USAGE_MAX_GPUS)
		return terr_set(err, EINVAL, "a sample has %d GPUs; at most %d", s->n_gpus, USAGE_MAX_GPUS);
	pthread_mutex_lock(&st->mu);
	struct ring *r = strmap_get(&st->by_id, session_id);
	if (r && !ring_fits(r, s)) {
		/* Another layout (a session's devices do not change; this is
		 * a session restarted elsewhere): start again. */
		ring_remove(st, r);
		r = NULL;
	}
	if (r && r->count > 0 && s->t <= r->pts[(r->head + r->cap - 1) % r->cap].t) {
		/* Older than or as old as the newest: a repeat. */
		pthread_mutex_unlock(&st->mu);
		return 0;
	}
	if (!r) {
		if (st->n_rings == st->cap_rings) {
			size_t nc = st->cap_rings ? st->cap_rings * 2 : 64;
			struct ring **g = realloc(st->rings, nc * sizeof(*g));
			if (!g)
				goto oom;
			st->rings = g;
			st->cap_rings = nc;
		}
		if (!(r = ring_new(st, session_id, s)))
			goto oom;
		if (strmap_put(&st->by_id, r->id, r) < 0) {
			ring_free(r);
			goto oom;
		}
		r->slot = st->n_rings;
		st->rings[st->n_rings++] = r;
	}
	struct point *p = &r->pts[r->head];
	p->t = s->t;
	p->mem = s->mem_bytes;
	p->net_rx = s->net_rx;
	p->net_tx = s->net_tx;
	p->blk_read = s->blk_read;
	p->blk_write = s->blk_write;
	p->cpu_mc = clamp32(s->cpu_cores * 1000.0);
	p->cpu_pct_c = clamp32(s->cpu_pct * 100.0);
	r->mem_limit = s->mem_limit_bytes;
	for (int d = 0; d < r->ndev; d++) {
		double u = s->gpus[d].util_pct;
		r->gutil[r->head * r->ndev + d] = u < 0 ? UTIL_UNKNOWN : (uint16_t)(u > 100 ? 10000 : u * 100.0 + 0.5);
		r->gmem[r->head * r->ndev + d] = s->gpus[d].mem_bytes;
	}
	r->head = (r->head + 1) % r->cap;
	if (r->count < r->cap)
		r->count++;
	pthread_mutex_unlock(&st->mu);
	return 0;
oom:
	pthread_mutex_unlock(&st->mu);
	return terr_set(err, ENOMEM, "out of memory");
}

/* The i-th oldest sample of r into out. */
static void ring_get(const struct ring *r, int i, struct usage_sample *out)
{
	int k = (r->head - r->count + i + r->cap) % r->cap;
	const struct point *p = &r->pts[k];
	out->t = p->t;
	out->cpu_cores = p->cpu_mc / 1000.0;
	out->cpu_pct = p->cpu_pct_c / 100.0;
	out->mem_bytes = p->mem;
	out->mem_limit_bytes = r->mem_limit;
	out->net_rx = p->net_rx;
	out->net_tx = p->net_tx;
	out->blk_read = p->blk_read;
	out->blk_write = p->blk_write;
	out->n_gpus = r->ndev;
	for (int d = 0; d < r->ndev; d++) {
		struct usage_gpu *g = &out->gpus[d];
		memcpy(g->uuid, r->dev[d].uuid, sizeof(g->uuid));
		uint16_t u = r->gutil[k * r->ndev + d];
		g->util_pct = u == UTIL_UNKNOWN ? -1 : u / 100.0;
		g->mem_bytes = r->gmem[k * r->ndev + d];
		g->mem_limit_bytes = r->dev[d].limit;
	}
}

static int mem_since(struct usage_store *st, const char *session_id, int64_t since_ms, struct usage_sample **out,
		     size_t *n, struct terr *err)
{
	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&st->mu);
	struct ring *r = strmap_get(&st->by_id, session_id);
	if (!r || r->count == 0) {
		pthread_mutex_unlock(&st->mu);
		return 0;
	}
	/* Binary search for the first sample after since_ms: times grow
	 * along the ring. */
	int lo = 0, hi = r->count;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (r->pts[(r->head - r->count + mid + r->cap) % r->cap].t > since_ms)
			hi = mid;
		else
			lo = mid + 1;
	}
	int k = r->count - lo;
	if (k > 0) {
		*out = malloc((size_t)k * sizeof(**out));
		if (!*out) {
			pthread_mutex_unlock(&st->mu);
			return terr_set(err, ENOMEM, "out of memory");
		}
		for (int i = 0; i < k; i++)
			ring_get(r, lo + i, &(*out)[i]);
		*n = (size_t)k;
	}
	pthread_mutex_unlock(&st->mu);
	return 0;
}

static int mem_last(struct usage_store *st, const char *session_id, struct usage_sample *out)
{
	pthread_mutex_lock(&st->mu);
	struct ring *r = strmap_get(&st->by_id, session_id);
	int rc = r && r->count > 0 ? 0 : -ENOENT;
	if (rc == 0)
		ring_get(r, r->count - 1, out);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

static void mem_drop(struct usage_store *st, const char *session_id)
{
	pthread_mutex_lock(&st->mu);
	struct ring *r = strmap_get(&st->by_id, session_id);
	if (r)
		ring_remove(st, r);
	pthread_mutex_unlock(&st->mu);
}

static void mem_expire(struct usage_store *st, int64_t now_ms)
{
	pthread_mutex_lock(&st->mu);
	for (size_t i = 0; i < st->n_rings;) {
		struct ring *r = st->rings[i];
		if (r->count == 0 || r->pts[(r->head + r->cap - 1) % r->cap].t < now_ms - st->retention_ms)
			ring_remove(st, r);   /* moves the last ring into slot i */
		else
			i++;
	}
	pthread_mutex_unlock(&st->mu);
}

static size_t mem_memory(struct usage_store *st)
{
	pthread_mutex_lock(&st->mu);
	size_t total = sizeof(*st) + st->cap_rings * sizeof(*st->rings) + st->by_id.cap * sizeof(*st->by_id.slots);
	for (size_t i = 0; i < st->n_rings; i++) {
		const struct ring *r = st->rings[i];
		total += sizeof(*r) + (size_t)r->cap * sizeof(*r->pts) +
			 (size_t)r->ndev * (sizeof(*r->dev) + (size_t)r->cap * (sizeof(*r->gutil) + sizeof(*r->gmem)));
	}
	pthread_mutex_unlock(&st->mu);
	return total;
}

const struct usage_store_ops usage_store_memory_ops = {
	.name = "memory",
	.open = mem_open,
	.close = mem_close,
	.push = mem_push,
	.push_round = mem_push_round,
	.since = mem_since,
	.last = mem_last,
	.drop = mem_drop,
	.expire = mem_expire,
	.memory = mem_memory,
};
