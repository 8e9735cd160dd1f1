/* The Redis client (common/redis.h) over hiredis' blocking API: a pool of
 * connections guarded by one mutex, each connection used by one thread at
 * a time, commands sent as argument vectors (no format strings, so keys
 * and values are never interpreted). */
#include "common/redis.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "common/util.h"

/* Daemons call Redis from a few threads at once (API handlers, the
 * scheduler); more connections than that only cost Redis memory. */
#define REDIS_POOL 8
/* A connect to a local or LAN Redis takes well under a millisecond; one
 * that takes a second is a Redis that is down or unreachable. */
#define REDIS_CONNECT_TIMEOUT_MS 1000
/* A command answers in microseconds; two seconds means a stuck Redis. */
#define REDIS_COMMAND_TIMEOUT_MS 2000
/* After a failed connect, fail at once for this long: a login answered
 * 503 quickly beats one that waits a second for the same answer. */
#define REDIS_RETRY_AFTER_MS 1000

struct redis_client {
	char host[256];
	int port;
	int db;
	char user[128];
	char pass[256];
	char addr[300];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	redisContext *idle[REDIS_POOL];
	int n_idle;
	int n_total;              /* idle + in use + being connected */
	int64_t down_until_ms;    /* monotonic; 0 when the last connect worked */
	struct terr down_err;     /* why, while down_until_ms is ahead */
};


/* ---------- the URL ---------- */

static int parse_url(struct redis_client *c, const char *url, struct terr *err)
{
	if (!url || strncmp(url, "redis://", 8))
		return terr_set(err, EINVAL, "redis must be a redis://HOST:PORT/DB URL (got '%s')", url ? url : "");
	const char *p = url + 8;
	const char *at = strrchr(p, '@');
	if (at) {
		const char *colon = memchr(p, ':', (size_t)(at - p));
		if (!colon)
			return terr_set(err, EINVAL, "redis URL: the credentials go as :PASSWORD@ or USER:PASSWORD@");
		size_t ul = (size_t)(colon - p), pl = (size_t)(at - colon - 1);
		if (ul >= sizeof(c->user) || pl >= sizeof(c->pass) || !pl)
			return terr_set(err, EINVAL, "redis URL: empty or too long user or password");
		memcpy(c->user, p, ul);
		memcpy(c->pass, colon + 1, pl);
		p = at + 1;
	}
	const char *end = p + strcspn(p, "/");
	const char *colon = memchr(p, ':', (size_t)(end - p));
	const char *hend = colon ? colon : end;
	if (hend == p || (size_t)(hend - p) >= sizeof(c->host))
		return terr_set(err, EINVAL, "redis URL '%s' names no host", url);
	memcpy(c->host, p, (size_t)(hend - p));
	c->port = 6379;
	if (colon) {
		char *e;
		long v = strtol(colon + 1, &e, 10);
		if (e != end || colon + 1 == end || v < 1 || v > 65535)
			return terr_set(err, EINVAL, "redis URL '%s': the port must be 1 to 65535", url);
		c->port = (int)v;
	}
	if (*end == '/' && end[1]) {
		char *e;
		long v = strtol(end + 1, &e, 10);
		if (*e || v < 0 || v > INT_MAX)
			return terr_set(err, EINVAL, "redis URL '%s': the database must be a number (0, 1...)", url);
		c->db = (int)v;
	}
	snprintf(c->addr, sizeof(c->addr), "%s:%d", c->host, c->port);
	return 0;
}

int redis_open(const char *url, struct redis_client **out, struct terr *err)
{
	struct redis_client *c = calloc(1, sizeof(*c));
	if (!c)
		return terr_set(err, ENOMEM, "out of memory");
	int rc = parse_url(c, url, err);
	if (rc < 0) {
		free(c);
		return rc;
	}
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	*out = c;
	return 0;
}

void redis_close(struct redis_client *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n_idle; i++)
		redisFree(c->idle[i]);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

const char *redis_addr(const struct redis_client *c)
{
	return c->addr;
}

/* ---------- connections ---------- */

/* The code of a connection's failure: all of them mean "cannot reach
 * Redis now" to callers (503), told apart only for the message. */
static int conn_code(const redisContext *ctx)
{
	if (ctx->err == REDIS_ERR_IO && (errno == ECONNREFUSED || errno == ETIMEDOUT || errno == EHOSTUNREACH))
		return errno;
	if (ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EINPROGRESS))
		return ETIMEDOUT;
	return ECONNREFUSED;
}

static int conn_error(struct redis_client *c, const redisContext *ctx, struct terr *err)
{
	if (!ctx)
		return terr_set(err, ENOMEM, "Redis at %s: out of memory", c->addr);
	int code = conn_code(ctx);
	const char *why = ctx->err == REDIS_ERR_EOF ? "connection closed" : ctx->errstr;
	if (code == ETIMEDOUT && ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EINPROGRESS))
		why = "no answer in time";
	return terr_set(err, code, "Redis at %s: %s", c->addr, why[0] ? why : "connection failed");
}

static struct timeval tv_ms(int ms)
{
	return (struct timeval){.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
}

/* A reply of kind error into err (EPROTO, Redis' words); frees it. */
static int reply_error(struct redis_client *c, redisReply *r, const char *what, struct terr *err)
{
	int rc = terr_set(err, EPROTO, "Redis at %s: %s: %.*s", c->addr, what, r ? (int)r->len : 0,
			  r && r->str ? r->str : "no answer");
	freeReplyObject(r);
	return rc;
}

/* A new connection, authenticated and on the right database. */
static int conn_new(struct redis_client *c, redisContext **out, struct terr *err)
{
	redisContext *ctx = redisConnectWithTimeout(c->host, c->port, tv_ms(REDIS_CONNECT_TIMEOUT_MS));
	if (!ctx || ctx->err) {
		int rc = conn_error(c, ctx, err);
		if (ctx)
			redisFree(ctx);
		return rc;
	}
	redisSetTimeout(ctx, tv_ms(REDIS_COMMAND_TIMEOUT_MS));
	redisEnableKeepAlive(ctx);
	redisReply *r;
	if (c->pass[0]) {
		if (c->user[0])
			r = redisCommand(ctx, "AUTH %s %s", c->user, c->pass);
		else
			r = redisCommand(ctx, "AUTH %s", c->pass);
		if (!r) {
			int rc = conn_error(c, ctx, err);
			redisFree(ctx);
			return rc;
		}
		if (r->type == REDIS_REPLY_ERROR) {
			/* A wrong password is no outage: EACCES, with Redis' words. */
			int rc = terr_set(err, EACCES, "Redis at %s: AUTH: %.*s", c->addr, (int)r->len, r->str);
			freeReplyObject(r);
			redisFree(ctx);
			return rc;
		}
		freeReplyObject(r);
	}
	if (c->db) {
		r = redisCommand(ctx, "SELECT %d", c->db);
		if (!r || r->type == REDIS_REPLY_ERROR) {
			int rc = r ? reply_error(c, r, "SELECT", err) : conn_error(c, ctx, err);
			redisFree(ctx);
			return rc;
		}
		freeReplyObject(r);
	}
	*out = ctx;
	return 0;
}

/* A connection for this thread: an idle one (*reused true), a new one,
 * or, when the pool is all in use, the next one given back. */
static int conn_take(struct redis_client *c, redisContext **out, bool *reused, struct terr *err)
{
	pthread_mutex_lock(&c->mu);
	for (;;) {
		if (c->n_idle) {
			*out = c->idle[--c->n_idle];
			*reused = true;
			pthread_mutex_unlock(&c->mu);
			return 0;
		}
		if (c->down_until_ms && util_mono_ms() < c->down_until_ms) {
			if (err)
				*err = c->down_err;
			int code = c->down_err.code;
			pthread_mutex_unlock(&c->mu);
			return -code;
		}
		if (c->n_total < REDIS_POOL)
			break;
		pthread_cond_wait(&c->cv, &c->mu);
	}
	c->n_total++;
	pthread_mutex_unlock(&c->mu);
	*reused = false;
	struct terr cerr = {0};
	int rc = conn_new(c, out, &cerr);
	pthread_mutex_lock(&c->mu);
	if (rc < 0) {
		c->n_total--;
		if (cerr.code != EACCES && cerr.code != EPROTO) {
			c->down_until_ms = util_mono_ms() + REDIS_RETRY_AFTER_MS;
			c->down_err = cerr;
		}
		pthread_cond_signal(&c->cv);
	} else {
		c->down_until_ms = 0;
	}
	pthread_mutex_unlock(&c->mu);
	if (rc < 0 && err)
		*err = cerr;
	return rc;
}

/* Gives a connection back; a broken one (ok false) is closed. */
static void conn_give(struct redis_client *c, redisContext *ctx, bool ok)
{
	pthread_mutex_lock(&c->mu);
	if (ok) {
		c->idle[c->n_idle++] = ctx;
	} else {
		redisFree(ctx);
		c->n_total--;
	}
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/* Sends n commands in one round trip and reads their n replies into
 * replies (the caller frees each with freeReplyObject). An error reply
 * is left to the caller. A connection from the pool that turns out to be
 * closed (Redis restarted since it was last used) is replaced once: the
 * commands were then never run. */
static int run(struct redis_client *c, const struct redis_cmd *cmds, int n, redisReply **replies, struct terr *err)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		redisContext *ctx;
		bool reused;
		int rc = conn_take(c, &ctx, &reused, err);
		if (rc < 0)
			return rc;
		for (int i = 0; i < n; i++)
			redisAppendCommandArgv(ctx, cmds[i].argc, cmds[i].argv, cmds[i].lens);
		int got = 0;
		for (; got < n; got++) {
			void *r = NULL;
			if (redisGetReply(ctx, &r) != REDIS_OK)
				break;
			replies[got] = r;
		}
		if (got == n) {
			conn_give(c, ctx, true);
			return 0;
		}
		for (int i = 0; i < got; i++)
			freeReplyObject(replies[i]);
		bool closed = ctx->err == REDIS_ERR_EOF || (ctx->err == REDIS_ERR_IO && (errno == ECONNRESET || errno == EPIPE));
		rc = conn_error(c, ctx, err);
		conn_give(c, ctx, false);
		if (!(reused && got == 0 && closed))
			return rc;
	}
	return terr_set(err, ECONNREFUSED, "Redis at %s: connection closed", c->addr);
}

static int run1(struct redis_client *c, int argc, const char **argv, const size_t *lens, redisReply **reply,
		struct terr *err)
{
	struct redis_cmd cmd = {argc, argv, lens};
	return run(c, &cmd, 1, reply, err);
}

/* ---------- commands ---------- */

int redis_ping(struct redis_client *c, struct terr *err)
{
	const char *argv[] = {"PING"};
	redisReply *r;
	int rc = run1(c, 1, argv, NULL, &r, err);
	if (rc < 0)
		return rc;
	if (r->type == REDIS_REPLY_ERROR)
		return reply_error(c, r, "PING", err);
	freeReplyObject(r);
	return 0;
}

int redis_set(struct redis_client *c, const char *key, const void *val, size_t len, int64_t ttl_ms,
	      struct terr *err)
{
	char ttl[32];
	snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
	const char *argv[] = {"SET", key, val, "PX", ttl};
	size_t lens[] = {3, strlen(key), len, 2, strlen(ttl)};
	redisReply *r;
	int rc = run1(c, ttl_ms > 0 ? 5 : 3, argv, lens, &r, err);
	if (rc < 0)
		return rc;
	if (r->type == REDIS_REPLY_ERROR)
		return reply_error(c, r, "SET", err);
	freeReplyObject(r);
	return 0;
}

int redis_get(struct redis_client *c, const char *key, char **val, size_t *len, struct terr *err)
{
	const char *argv[] = {"GET", key};
	redisReply *r;
	*val = NULL;
	int rc = run1(c, 2, argv, NULL, &r, err);
	if (rc < 0)
		return rc;
	if (r->type == REDIS_REPLY_ERROR)
		return reply_error(c, r, "GET", err);
	if (r->type != REDIS_REPLY_STRING) {
		freeReplyObject(r);
		return 0;
	}
	*val = malloc(r->len + 1);
	if (!*val) {
		freeReplyObject(r);
		return terr_set(err, ENOMEM, "out of memory");
	}
	memcpy(*val, r->str, r->len);
	(*val)[r->len] = '\0';
	if (len)
		*len = r->len;
	freeReplyObject(r);
	return 1;
}

int redis_command(struct redis_client *c, int argc, const char **argv, const size_t *lens, int64_t *integer,
		  char **str, struct terr *err)
{
	redisReply *r;
	int rc = run1(c, argc, argv, lens, &r, err);
	if (rc < 0)
		return rc;
	switch (r->type) {
	case REDIS_REPLY_ERROR:
		return reply_error(c, r, argv[0], err);
	case REDIS_REPLY_INTEGER:
		if (integer)
			*integer = r->integer;
		rc = 1;
		break;
	case REDIS_REPLY_STRING:
	case REDIS_REPLY_STATUS:
		if (str && !(*str = strndup(r->str, r->len))) {
			freeReplyObject(r);
			return terr_set(err, ENOMEM, "out of memory");
		}
		rc = 1;
		break;
	case REDIS_REPLY_NIL:
		rc = 0;
		break;
	default:
		rc = 1;
	}
	freeReplyObject(r);
	return rc;
}

int redis_del(struct redis_client *c, const char *key, struct terr *err)
{
	const char *argv[] = {"DEL", key};
	int64_t n = 0;
	int rc = redis_command(c, 2, argv, NULL, &n, NULL, err);
	return rc < 0 ? rc : (int)n;
}

int redis_pttl(struct redis_client *c, const char *key, int64_t *ttl_ms, struct terr *err)
{
	const char *argv[] = {"PTTL", key};
	int rc = redis_command(c, 2, argv, NULL, ttl_ms, NULL, err);
	return rc < 0 ? rc : 0;
}

int redis_incr_window(struct redis_client *c, const char *key, int64_t window_ms, int64_t *count,
		      int64_t *ttl_ms, struct terr *err)
{
	/* INCR and PTTL in one round trip; the expiry is set only when the
	 * key has none (-1): at its first increment, or after one whose
	 * PEXPIRE never came (a crash between the two). PEXPIRE's NX option
	 * would do it in one, but only from Redis 7. */
	const char *incr[] = {"INCR", key};
	const char *pttl[] = {"PTTL", key};
	struct redis_cmd cmds[] = {{2, incr, NULL}, {2, pttl, NULL}};
	redisReply *r[2];
	int rc = run(c, cmds, 2, r, err);
	if (rc < 0)
		return rc;
	for (int i = 0; i < 2 && rc == 0; i++)
		if (r[i]->type != REDIS_REPLY_INTEGER)
			rc = r[i]->type == REDIS_REPLY_ERROR
				     ? terr_set(err, EPROTO, "Redis at %s: %s: %.*s", c->addr, cmds[i].argv[0],
						(int)r[i]->len, r[i]->str)
				     : terr_set(err, EPROTO, "Redis at %s: %s: unexpected answer", c->addr,
						cmds[i].argv[0]);
	int64_t n = rc == 0 ? r[0]->integer : 0, ttl = rc == 0 ? r[1]->integer : 0;
	freeReplyObject(r[0]);
	freeReplyObject(r[1]);
	if (rc < 0)
		return rc;
	if (ttl == -1) {
		char win[32];
		snprintf(win, sizeof(win), "%lld", (long long)window_ms);
		const char *exp[] = {"PEXPIRE", key, win};
		if ((rc = redis_command(c, 3, exp, NULL, NULL, NULL, err)) < 0)
			return rc;
		ttl = window_ms;
	}
	*count = n;
	if (ttl_ms)
		*ttl_ms = ttl;
	return 0;
}

int redis_list_push_trim(struct redis_client *c, const char *key, const void *val, size_t len,
			 long max_len, int64_t ttl_ms, struct terr *err)
{
	char from[32], ttl[32];
	snprintf(from, sizeof(from), "%ld", max_len > 0 ? -max_len : 0);
	snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
	const char *push[] = {"RPUSH", key, val};
	size_t push_lens[] = {5, strlen(key), len};
	const char *trim[] = {"LTRIM", key, from, "-1"};
	const char *exp[] = {"PEXPIRE", key, ttl};
	struct redis_cmd cmds[3] = {{3, push, push_lens}};
	int n = 1;
	if (max_len > 0)
		cmds[n++] = (struct redis_cmd){4, trim, NULL};
	if (ttl_ms > 0)
		cmds[n++] = (struct redis_cmd){3, exp, NULL};
	redisReply *r[3];
	int rc = run(c, cmds, n, r, err);
	if (rc < 0)
		return rc;
	for (int i = 0; i < n; i++) {
		if (rc == 0 && r[i]->type == REDIS_REPLY_ERROR)
			rc = terr_set(err, EPROTO, "Redis at %s: %s: %.*s", c->addr, cmds[i].argv[0], (int)r[i]->len,
				      r[i]->str);
		freeReplyObject(r[i]);
	}
	return rc;
}

int redis_pipeline(struct redis_client *c, const struct redis_cmd *cmds, int n, struct terr *err)
{
	if (n <= 0)
		return 0;
	redisReply **r = malloc((size_t)n * sizeof(*r));
	if (!r)
		return terr_set(err, ENOMEM, "out of memory");
	int rc = run(c, cmds, n, r, err);
	if (rc < 0) {
		free(r);
		return rc;
	}
	for (int i = 0; i < n; i++) {
		if (rc == 0 && r[i]->type == REDIS_REPLY_ERROR)
			rc = terr_set(err, EPROTO, "Redis at %s: %s: %.*s", c->addr, cmds[i].argv[0], (int)r[i]->len,
				      r[i]->str);
		freeReplyObject(r[i]);
	}
	free(r);
	return rc;
}

void redis_strings_free(char **items, size_t n)
{
	for (size_t i = 0; items && i < n; i++)
		free(items[i]);
	free(items);
}

int redis_list_range(struct redis_client *c, const char *key, long start, long stop, char ***items,
		     size_t *n, struct terr *err)
{
	char a[32], b[32];
	snprintf(a, sizeof(a), "%ld", start);
	snprintf(b, sizeof(b), "%ld", stop);
	const char *argv[] = {"LRANGE", key, a, b};
	redisReply *r;
	*items = NULL;
	*n = 0;
	int rc = run1(c, 4, argv, NULL, &r, err);
	if (rc < 0)
		return rc;
	if (r->type == REDIS_REPLY_ERROR)
		return reply_error(c, r, "LRANGE", err);
	if (r->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(r);
		return terr_set(err, EPROTO, "Redis at %s: LRANGE: unexpected answer", c->addr);
	}
	char **out = calloc(r->elements ? r->elements : 1, sizeof(*out));
	if (!out) {
		freeReplyObject(r);
		return terr_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i];
		out[i] = strndup(e->str ? e->str : "", e->str ? e->len : 0);
		if (!out[i]) {
			redis_strings_free(out, i);
			freeReplyObject(r);
			return terr_set(err, ENOMEM, "out of memory");
		}
	}
	*items = out;
	*n = r->elements;
	freeReplyObject(r);
	return 0;
}
