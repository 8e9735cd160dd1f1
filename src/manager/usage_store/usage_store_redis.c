/* The Redis backend of the usage history (usage_store.h; docs/admin.md,
 * "Production: Redis"): a list per session, "tessera:usage:SESSION_ID",
 * one entry per sample, oldest first.
 *
 * A sample is kept as a line of packed text, not as the API's JSON: the
 * API's form carries key names, each GPU's index and share (which the
 * manager adds from the session's allocation when it answers) and floats
 * printed in full, some 350 bytes for a one-GPU sample against about 120
 * here; and text (not binary) keeps the entries readable with redis-cli
 * and free of NUL bytes. Figures are kept as the memory backend keeps
 * them (milli-cores, hundredths of a percent), so both answer alike:
 *
 *   T CPU_MC CPU_PCT_C MEM MEM_LIMIT NET_RX NET_TX BLK_READ BLK_WRITE NGPU
 *     then per GPU: UUID UTIL_C (-1 unknown) MEM MEM_LIMIT
 *
 * each number in decimal, the UUID with bytes up to space, '%' and DEL
 * written %XX. Each sample carries its GPUs' UUIDs, so an entry decodes
 * on its own: no second key to keep in step.
 *
 * A push is RPUSH, LTRIM to retention / period + 1 entries (the memory
 * ring's size) and PEXPIRE retention, so a list whose session stopped
 * pushing goes away by itself once it has aged out; an agent's round of
 * samples is one pipelined round trip for all its sessions.
 *
 * Redis down: the samples go to a memory store inside this one, and the
 * next push of a session that Redis takes writes what memory kept of it
 * first (the samples kept of a session that ended meanwhile stay in
 * memory until they expire). Reads merge both while memory holds any,
 * and answer from memory alone while Redis does not answer. A sample
 * written twice (a pipeline cut in the middle, then written again) is
 * read once: times grow along a history. */
#include "manager/usage_store/usage_store.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/redis.h"
#include "common/util.h"

#define KEY_PREFIX REDIS_PREFIX "usage:"
/* The longest packed sample: ten numbers, then per GPU a UUID of up to 63
 * bytes, each escaped to 3, and three numbers; 21 bytes a number. */
#define SAMPLE_TEXT_MAX (11 * 21 + USAGE_MAX_GPUS * (63 * 3 + 4 * 21) + 1)

/* This file's store. mem is the memory backend's store (the fallback),
 * only ever handed to usage_store_memory_ops, never looked into here. */
struct usage_store {
	struct redis_client *rc;       /* borrowed */
	int64_t retention_ms;
	long max_len;
	struct usage_store *mem;
	usage_redis_outcome_fn outcome;
	void *outcome_arg;
	atomic_bool down;              /* the last Redis call failed */
	/* Until when memory may hold samples (the last one kept there plus
	 * the retention): 0 while it holds none. */
	_Atomic int64_t kept_until_ms;
};

#define MEM (&usage_store_memory_ops)

/* ---------- the packed text ---------- */

static int put(char *buf, size_t len, size_t *at, const char *fmt, long long v)
{
	int w = snprintf(buf + *at, len - *at, fmt, v);
	if (w < 0 || (size_t)w >= len - *at)
		return -ENOSPC;
	*at += (size_t)w;
	return 0;
}

static int32_t round32(double v)
{
	return v > 2e9 ? 2000000000 : v < -2e9 ? -2000000000 : (int32_t)(v + (v < 0 ? -0.5 : 0.5));
}

int usage_sample_encode(const struct usage_sample *s, char *buf, size_t len)
{
	if (s->n_gpus < 0 || s->n_gpus > USAGE_MAX_GPUS || len == 0)
		return -EINVAL;
	size_t at = 0;
	const long long head[] = {s->t, round32(s->cpu_cores * 1000.0), round32(s->cpu_pct * 100.0), s->mem_bytes,
				  s->mem_limit_bytes, s->net_rx, s->net_tx, s->blk_read, s->blk_write, s->n_gpus};
	for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++)
		if (put(buf, len, &at, i ? " %lld" : "%lld", head[i]) < 0)
			return -ENOSPC;
	for (int d = 0; d < s->n_gpus; d++) {
		const struct usage_gpu *g = &s->gpus[d];
		if (at + 2 >= len)
			return -ENOSPC;
		buf[at++] = ' ';
		size_t ul = strnlen(g->uuid, sizeof(g->uuid));
		if (ul == 0) {
			/* An empty UUID still takes a field. */
			if (at + 4 >= len)
				return -ENOSPC;
			memcpy(buf + at, "%00", 3);   /* never a real UUID byte: decoded as empty */
			at += 3;
		}
		for (size_t k = 0; k < ul; k++) {
			unsigned char ch = (unsigned char)g->uuid[k];
			if (at + 4 >= len)
				return -ENOSPC;
			if (ch <= ' ' || ch == '%' || ch == 0x7f)
				at += (size_t)snprintf(buf + at, len - at, "%%%02X", ch);
			else
				buf[at++] = (char)ch;
		}
		double u = g->util_pct;
		long long uc = u < 0 ? -1 : u > 100 ? 10000 : (long long)(u * 100.0 + 0.5);
		if (put(buf, len, &at, " %lld", uc) < 0 || put(buf, len, &at, " %lld", g->mem_bytes) < 0 ||
		    put(buf, len, &at, " %lld", g->mem_limit_bytes) < 0)
			return -ENOSPC;
	}
	buf[at] = '\0';
	return (int)at;
}

/* The next space-separated number of *p. */
static bool num(const char **p, long long lo, long long hi, long long *v)
{
	if (**p != ' ')
		return false;
	(*p)++;
	if (!(**p >= '0' && **p <= '9') && **p != '-')
		return false;   /* strtoll would skip spaces */
	char *end;
	errno = 0;
	*v = strtoll(*p, &end, 10);
	if (end == *p || errno || *v < lo || *v > hi || (*end && *end != ' '))
		return false;
	*p = end;
	return true;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int usage_sample_decode(const char *text, struct usage_sample *s)
{
	memset(s, 0, sizeof(*s));
	const char *p = text;
	long long v[10];
	const long long big = 9000000000000000000LL;
	for (int i = 0; i < 10; i++) {
		if (i == 0) {
			char *end;
			errno = 0;
			v[0] = strtoll(p, &end, 10);
			if (!(*p >= '0' && *p <= '9') || end == p || errno || v[0] < 0 || *end != ' ')
				return -EINVAL;
			p = end;
		} else if (!num(&p, i == 1 || i == 2 ? -2000000000LL : 0, i == 9 ? USAGE_MAX_GPUS : big, &v[i])) {
			return -EINVAL;
		}
	}
	s->t = v[0];
	s->cpu_cores = (double)v[1] / 1000.0;
	s->cpu_pct = (double)v[2] / 100.0;
	s->mem_bytes = v[3];
	s->mem_limit_bytes = v[4];
	s->net_rx = v[5];
	s->net_tx = v[6];
	s->blk_read = v[7];
	s->blk_write = v[8];
	s->n_gpus = (int)v[9];
	for (int d = 0; d < s->n_gpus; d++) {
		struct usage_gpu *g = &s->gpus[d];
		if (*p++ != ' ')
			return -EINVAL;
		size_t ul = 0;
		while (*p && *p != ' ') {
			char ch = *p;
			if (ch == '%') {
				int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
				if (lo < 0)
					return -EINVAL;
				ch = (char)(hi * 16 + lo);
				p += 3;
			} else {
				p++;
			}
			if (ch == '\0')
				continue;   /* the empty UUID's mark */
			if (ul + 1 >= sizeof(g->uuid))
				return -EINVAL;
			g->uuid[ul++] = ch;
		}
		long long uc, gm, gl;
		if (!num(&p, -1, 10000, &uc) || !num(&p, 0, big, &gm) || !num(&p, 0, big, &gl))
			return -EINVAL;
		g->util_pct = uc < 0 ? -1 : (double)uc / 100.0;
		g->mem_bytes = gm;
		g->mem_limit_bytes = gl;
	}
	return *p ? -EINVAL : 0;
}

/* ---------- the store ---------- */

static void key_of(const char *session_id, char *key, size_t len)
{
	snprintf(key, len, KEY_PREFIX "%s", session_id);
}

/* Each Redis call's result, for one log line per outage. */
static void outcome(struct usage_store *st, int rc, const struct terr *err)
{
	bool was_down = atomic_exchange(&st->down, rc < 0);
	if (st->outcome)
		st->outcome(st->outcome_arg, rc, err);
	else if (rc < 0 && !was_down)
		log_warn("usage", "%s; sessions' usage samples are kept in memory until it answers",
			 err && err->msg[0] ? err->msg : "Redis does not answer");
	else if (rc >= 0 && was_down)
		log_info("usage", "Redis at %s answers again; usage samples go there again", redis_addr(st->rc));
}

static bool kept_in_memory(struct usage_store *st)
{
	int64_t until = atomic_load(&st->kept_until_ms);
	if (until && util_now_ms() >= until) {
		/* Everything kept then has aged out by now. */
		atomic_compare_exchange_strong(&st->kept_until_ms, &until, 0);
		return false;
	}
	return until != 0;
}

int usage_store_redis_open(struct usage_store **out, struct redis_client *rc, int64_t retention_ms,
			   int64_t period_ms, usage_redis_outcome_fn outcome_fn, void *arg, struct terr *err)
{
	if (!rc)
		return terr_set(err, EINVAL, "usage history in Redis: no Redis client");
	struct usage_store *st = calloc(1, sizeof(*st));
	if (!st)
		return terr_set(err, ENOMEM, "out of memory");
	int r = MEM->open(&st->mem, retention_ms, period_ms, err);
	if (r < 0) {
		free(st);
		return r;
	}
	st->rc = rc;
	st->retention_ms = retention_ms;
	int64_t cap = retention_ms / period_ms + 1;
	st->max_len = (long)(cap < 2 ? 2 : cap > 100000 ? 100000 : cap);   /* the memory ring's size */
	st->outcome = outcome_fn;
	st->outcome_arg = arg;
	*out = st;
	return 0;
}

static void rd_close(struct usage_store *st)
{
	if (!st)
		return;
	MEM->close(st->mem);
	free(st);
}

/* A growing text buffer of a round's packed samples, referred to by
 * offset until it stops growing. */
struct tbuf {
	char *p;
	size_t len, cap;
};

static int tbuf_add(struct tbuf *b, const struct usage_sample *s, size_t *off, size_t *len)
{
	if (b->cap - b->len < SAMPLE_TEXT_MAX) {
		size_t nc = b->cap ? b->cap * 2 : 64 * 1024;
		while (nc - b->len < SAMPLE_TEXT_MAX)
			nc *= 2;
		char *g = realloc(b->p, nc);
		if (!g)
			return -ENOMEM;
		b->p = g;
		b->cap = nc;
	}
	int w = usage_sample_encode(s, b->p + b->len, b->cap - b->len);
	if (w < 0)
		return w;
	*off = b->len;
	*len = (size_t)w;
	b->len += (size_t)w + 1;
	return 0;
}

/* What a session's RPUSH carries: where its values start in the round's
 * value list, and how many. */
struct push_plan {
	size_t first, count;
};

static int rd_push_round(struct usage_store *st, size_t n, const char *const *ids, const struct usage_sample *s,
			 struct terr *err)
{
	if (n == 0)
		return 0;
	bool kept = kept_in_memory(st);
	if (kept && atomic_load(&st->down)) {
		/* Still down? Asked first (at no cost while the client waits
		 * to reconnect), so that memory's samples are copied out for
		 * writing only when Redis may take them. */
		struct terr e = {0};
		int r = redis_ping(st->rc, &e);
		outcome(st, r, &e);
		if (r < 0) {
			atomic_store(&st->kept_until_ms, util_now_ms() + st->retention_ms);
			return MEM->push_round(st->mem, n, ids, s, err);
		}
	}
	char ttl[32], from[32];
	snprintf(ttl, sizeof(ttl), "%lld", (long long)st->retention_ms);
	snprintf(from, sizeof(from), "%ld", -st->max_len);
	struct tbuf tb = {0};
	char (*keys)[128] = calloc(n, sizeof(*keys));
	struct push_plan *plan = calloc(n, sizeof(*plan));
	size_t nvals = 0, capvals = n;
	size_t *voff = malloc(capvals * sizeof(*voff)), *vlen = malloc(capvals * sizeof(*vlen));
	struct redis_cmd *cmds = calloc(3 * n, sizeof(*cmds));
	const char **argv = NULL;
	size_t *lens = NULL;
	int rc = 0;
	if (!keys || !plan || !voff || !vlen || !cmds) {
		rc = terr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		key_of(ids[i], keys[i], sizeof(keys[i]));
		plan[i].first = nvals;
		/* What memory kept of this session while Redis was down goes
		 * first, so the list stays in time order. */
		struct usage_sample *old = NULL;
		size_t n_old = 0;
		if (kept)
			MEM->since(st->mem, ids[i], 0, &old, &n_old, NULL);
		for (size_t k = 0; k <= n_old; k++) {
			const struct usage_sample *x = k < n_old ? &old[k] : &s[i];
			if (k < n_old && old[k].t >= s[i].t)
				continue;
			if (nvals == capvals) {
				capvals *= 2;
				size_t *a = realloc(voff, capvals * sizeof(*voff));
				if (a)
					voff = a;
				size_t *b = a ? realloc(vlen, capvals * sizeof(*vlen)) : NULL;
				if (b)
					vlen = b;
				if (!a || !b) {
					free(old);
					rc = terr_set(err, ENOMEM, "out of memory");
					goto out;
				}
			}
			int r = tbuf_add(&tb, x, &voff[nvals], &vlen[nvals]);
			if (r < 0) {
				free(old);
				rc = terr_set(err, -r, "a usage sample of session %s cannot be packed", ids[i]);
				goto out;
			}
			nvals++;
		}
		free(old);
		plan[i].count = nvals - plan[i].first;
	}
	/* Every command's arguments in one array: per session RPUSH KEY
	 * VALUES..., LTRIM KEY -MAX -1, PEXPIRE KEY TTL. */
	size_t nargs = 2 * n + nvals + 8 * n;
	argv = malloc(nargs * sizeof(*argv));
	lens = malloc(nargs * sizeof(*lens));
	if (!argv || !lens) {
		rc = terr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	size_t a = 0;
	int nc = 0;
	for (size_t i = 0; i < n; i++) {
		size_t kl = strlen(keys[i]);
		size_t start = a;
		argv[a] = "RPUSH", lens[a++] = 5;
		argv[a] = keys[i], lens[a++] = kl;
		for (size_t k = 0; k < plan[i].count; k++) {
			argv[a] = tb.p + voff[plan[i].first + k];
			lens[a++] = vlen[plan[i].first + k];
		}
		cmds[nc++] = (struct redis_cmd){(int)(a - start), argv + start, lens + start};
		start = a;
		argv[a] = "LTRIM", lens[a++] = 5;
		argv[a] = keys[i], lens[a++] = kl;
		argv[a] = from, lens[a++] = strlen(from);
		argv[a] = "-1", lens[a++] = 2;
		cmds[nc++] = (struct redis_cmd){4, argv + start, lens + start};
		start = a;
		argv[a] = "PEXPIRE", lens[a++] = 7;
		argv[a] = keys[i], lens[a++] = kl;
		argv[a] = ttl, lens[a++] = strlen(ttl);
		cmds[nc++] = (struct redis_cmd){3, argv + start, lens + start};
	}
	struct terr e = {0};
	int r = redis_pipeline(st->rc, cmds, nc, &e);
	outcome(st, r, &e);
	if (r == 0) {
		if (kept)
			for (size_t i = 0; i < n; i++)
				MEM->drop(st->mem, ids[i]);
	} else {
		/* Kept in memory meanwhile: the API answers with them, and
		 * they are written to Redis once it takes samples again. */
		atomic_store(&st->kept_until_ms, util_now_ms() + st->retention_ms);
		rc = MEM->push_round(st->mem, n, ids, s, err);
	}
out:
	free(tb.p);
	free(keys);
	free(plan);
	free(voff);
	free(vlen);
	free(cmds);
	free(argv);
	free(lens);
	return rc;
}

static int rd_push(struct usage_store *st, const char *session_id, const struct usage_sample *s, struct terr *err)
{
	return rd_push_round(st, 1, &session_id, s, err);
}

/* Entries into samples with t > since_ms, in time order, each time once. */
static int decode_list(char **items, size_t n_items, int64_t since_ms, struct usage_sample **out, size_t *n,
		       struct terr *err)
{
	*out = NULL;
	*n = 0;
	if (n_items == 0)
		return 0;
	struct usage_sample *h = malloc(n_items * sizeof(*h));
	if (!h)
		return terr_set(err, ENOMEM, "out of memory");
	size_t k = 0;
	int64_t newest = since_ms;
	for (size_t i = 0; i < n_items; i++) {
		/* An entry that is no sample (written by something else) is
		 * skipped; so are repeats. */
		if (usage_sample_decode(items[i], &h[k]) == 0 && h[k].t > newest)
			newest = h[k++].t;
	}
	if (k == 0) {
		free(h);
		return 0;
	}
	*out = h;
	*n = k;
	return 0;
}

/* a and b (each in time order) into one, each time once; frees both. */
static int merge(struct usage_sample *a, size_t na, struct usage_sample *b, size_t nb, struct usage_sample **out,
		 size_t *n, struct terr *err)
{
	if (nb == 0 || na == 0) {
		*out = na ? a : b;
		*n = na ? na : nb;
		free(na ? b : a);
		return 0;
	}
	struct usage_sample *m = malloc((na + nb) * sizeof(*m));
	if (!m) {
		free(a);
		free(b);
		return terr_set(err, ENOMEM, "out of memory");
	}
	size_t i = 0, j = 0, k = 0;
	while (i < na || j < nb) {
		const struct usage_sample *x = j >= nb || (i < na && a[i].t <= b[j].t) ? &a[i++] : &b[j++];
		if (k == 0 || x->t > m[k - 1].t)
			m[k++] = *x;
	}
	free(a);
	free(b);
	*out = m;
	*n = k;
	return 0;
}

static int rd_since(struct usage_store *st, const char *session_id, int64_t since_ms, struct usage_sample **out,
		    size_t *n, struct terr *err)
{
	*out = NULL;
	*n = 0;
	char key[128];
	key_of(session_id, key, sizeof(key));
	char **items = NULL;
	size_t n_items = 0;
	struct terr e = {0};
	/* A poll for what came since a recent time (the detail page's, each
	 * period) reads the tail only: as many entries as that time could
	 * hold at the shortest period an agent samples at (100 ms), then the
	 * whole list if the tail's first entry is not old enough. */
	int64_t span = since_ms > 0 ? util_now_ms() - since_ms : -1;
	long tail = span >= 0 && span / 100 + 2 < st->max_len ? (long)(span / 100 + 2) : 0;
	int r = redis_list_range(st->rc, key, tail ? -tail : 0, -1, &items, &n_items, &e);
	if (r == 0 && tail && n_items == (size_t)tail) {
		struct usage_sample first;
		if (usage_sample_decode(items[0], &first) < 0 || first.t > since_ms) {
			redis_strings_free(items, n_items);
			items = NULL;
			n_items = 0;
			r = redis_list_range(st->rc, key, 0, -1, &items, &n_items, &e);
		}
	}
	outcome(st, r, &e);
	if (r < 0)   /* the API answers with what memory has */
		return MEM->since(st->mem, session_id, since_ms, out, n, err);
	struct usage_sample *h = NULL;
	size_t nh = 0;
	r = decode_list(items, n_items, since_ms, &h, &nh, err);
	redis_strings_free(items, n_items);
	if (r < 0 || !kept_in_memory(st)) {
		*out = h;
		*n = nh;
		return r;
	}
	struct usage_sample *m = NULL;
	size_t nm = 0;
	if ((r = MEM->since(st->mem, session_id, since_ms, &m, &nm, err)) < 0) {
		free(h);
		return r;
	}
	return merge(h, nh, m, nm, out, n, err);
}

static int rd_last(struct usage_store *st, const char *session_id, struct usage_sample *out)
{
	char key[128];
	key_of(session_id, key, sizeof(key));
	char **items = NULL;
	size_t n_items = 0;
	struct terr e = {0};
	int r = redis_list_range(st->rc, key, -1, -1, &items, &n_items, &e);
	outcome(st, r, &e);
	if (r < 0)
		return MEM->last(st->mem, session_id, out);
	r = n_items == 1 && usage_sample_decode(items[0], out) == 0 ? 0 : -ENOENT;
	redis_strings_free(items, n_items);
	struct usage_sample m;
	if (kept_in_memory(st) && MEM->last(st->mem, session_id, &m) == 0 && (r < 0 || m.t > out->t)) {
		*out = m;
		r = 0;
	}
	return r;
}

static void rd_drop(struct usage_store *st, const char *session_id)
{
	char key[128];
	key_of(session_id, key, sizeof(key));
	struct terr e = {0};
	/* Where Redis does not answer, the list expires by itself. */
	outcome(st, redis_del(st->rc, key, &e), &e);
	MEM->drop(st->mem, session_id);
}

static void rd_expire(struct usage_store *st, int64_t now_ms)
{
	/* Redis expires the lists itself (PEXPIRE at each push). */
	MEM->expire(st->mem, now_ms);
}

static size_t rd_memory(struct usage_store *st)
{
	/* Redis' memory is Redis'; this process holds only the fallback. */
	return sizeof(*st) + MEM->memory(st->mem);
}

const struct usage_store_ops usage_store_redis_ops = {
	.name = "redis",
	.open = NULL,
	.close = rd_close,
	.push = rd_push,
	.push_round = rd_push_round,
	.since = rd_since,
	.last = rd_last,
	.drop = rd_drop,
	.expire = rd_expire,
	.memory = rd_memory,
};
