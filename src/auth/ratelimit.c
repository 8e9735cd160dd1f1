#include "auth/ratelimit.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/redis.h"
#include "common/sign.h"

#define RL_SLOTS 1024
/* Room for a pair: two parts and the separator. */
#define RL_KEY_MAX (2 * RATELIMIT_PART_MAX + 2)

struct rl_slot {
	char key[RL_KEY_MAX];
	int failures;
	int64_t first_ms;   /* start of the current window */
	int64_t last_ms;    /* for eviction */
};

struct ratelimit {
	pthread_mutex_t mu;
	int max_failures;
	int64_t window_ms;
	struct redis_client *redis;   /* NULL: the table only */
	char name[32];
	struct rl_slot slots[RL_SLOTS];
};

struct ratelimit *ratelimit_new(int max_failures, int64_t window_ms)
{
	struct ratelimit *rl = calloc(1, sizeof(*rl));
	if (!rl)
		return NULL;
	pthread_mutex_init(&rl->mu, NULL);
	rl->max_failures = max_failures;
	rl->window_ms = window_ms;
	return rl;
}

void ratelimit_free(struct ratelimit *rl)
{
	if (!rl)
		return;
	pthread_mutex_destroy(&rl->mu);
	free(rl);
}

void ratelimit_use_redis(struct ratelimit *rl, struct redis_client *c, const char *name)
{
	rl->redis = c;
	snprintf(rl->name, sizeof(rl->name), "%s", name ? name : "");
}

/* The Redis key of a table key: hashed, so that no email or address is
 * stored in clear and every key has one length. */
static void redis_key(const struct ratelimit *rl, const char *key, char *out, size_t n)
{
	char h[SIGN_HEX_LEN + 1];
	sign_sha256_hex(key, strnlen(key, RL_KEY_MAX - 1), h);
	snprintf(out, n, REDIS_PREFIX "ratelimit:%s:%s", rl->name, h);
}

/* Called with mu held. */
static struct rl_slot *find(struct ratelimit *rl, const char *key, int64_t now, bool create)
{
	struct rl_slot *victim = NULL;
	for (int i = 0; i < RL_SLOTS; i++) {
		struct rl_slot *s = &rl->slots[i];
		if (s->key[0] && now - s->first_ms >= rl->window_ms)
			s->key[0] = '\0';   /* expired */
		if (s->key[0] && !strncmp(s->key, key, RL_KEY_MAX - 1))
			return s;
		if (!s->key[0]) {
			if (!victim || victim->key[0])
				victim = s;
		} else if (!victim || (victim->key[0] && s->last_ms < victim->last_ms)) {
			victim = s;
		}
	}
	if (!create)
		return NULL;
	memset(victim, 0, sizeof(*victim));
	strncpy(victim->key, key, RL_KEY_MAX - 1);
	victim->first_ms = now;
	return victim;
}

/* The wait from Redis: 0 or more, or -1 when Redis did not answer. */
static int64_t redis_check(struct ratelimit *rl, const char *key)
{
	char rk[256], *val = NULL;
	redis_key(rl, key, rk, sizeof(rk));
	int found = redis_get(rl->redis, rk, &val, NULL, NULL);
	if (found < 0)
		return -1;
	long long count = val ? atoll(val) : 0;
	free(val);
	if (!found || count < rl->max_failures)
		return 0;
	int64_t ttl;
	if (redis_pttl(rl->redis, rk, &ttl, NULL) < 0)
		return -1;
	/* -1 (no expiry) cannot be after redis_incr_window; be safe. */
	return ttl > 0 ? ttl : ttl == -1 ? rl->window_ms : 0;
}

int64_t ratelimit_check(struct ratelimit *rl, const char *key, int64_t now_ms)
{
	int64_t wait = 0;
	if (rl->redis) {
		int64_t w = redis_check(rl, key);
		if (w > 0)
			return w;
		/* Failures counted in the table during an outage still count. */
	}
	pthread_mutex_lock(&rl->mu);
	struct rl_slot *s = find(rl, key, now_ms, false);
	if (s && s->failures >= rl->max_failures)
		wait = s->first_ms + rl->window_ms - now_ms;
	pthread_mutex_unlock(&rl->mu);
	return wait > 0 ? wait : 0;
}

void ratelimit_fail(struct ratelimit *rl, const char *key, int64_t now_ms)
{
	if (rl->redis) {
		char rk[256];
		int64_t count;
		redis_key(rl, key, rk, sizeof(rk));
		if (redis_incr_window(rl->redis, rk, rl->window_ms, &count, NULL, NULL) == 0)
			return;
	}
	pthread_mutex_lock(&rl->mu);
	struct rl_slot *s = find(rl, key, now_ms, true);
	s->failures++;
	s->last_ms = now_ms;
	pthread_mutex_unlock(&rl->mu);
}

void ratelimit_reset(struct ratelimit *rl, const char *key)
{
	if (rl->redis) {
		char rk[256];
		redis_key(rl, key, rk, sizeof(rk));
		redis_del(rl->redis, rk, NULL);
	}
	pthread_mutex_lock(&rl->mu);
	for (int i = 0; i < RL_SLOTS; i++)
		if (rl->slots[i].key[0] && !strncmp(rl->slots[i].key, key, RL_KEY_MAX - 1))
			rl->slots[i].key[0] = '\0';
	pthread_mutex_unlock(&rl->mu);
}

/* "A\x1fB", each part cut at RATELIMIT_PART_MAX bytes: the unit
 * separator is no byte of an email or an address. */
static void pair_key(char key[RL_KEY_MAX], const char *a, const char *b)
{
	snprintf(key, RL_KEY_MAX, "%.*s\x1f%.*s", RATELIMIT_PART_MAX, a ? a : "", RATELIMIT_PART_MAX, b ? b : "");
}

int64_t ratelimit_check_pair(struct ratelimit *rl, const char *a, const char *b, int64_t now_ms)
{
	char key[RL_KEY_MAX];
	pair_key(key, a, b);
	return ratelimit_check(rl, key, now_ms);
}

void ratelimit_fail_pair(struct ratelimit *rl, const char *a, const char *b, int64_t now_ms)
{
	char key[RL_KEY_MAX];
	pair_key(key, a, b);
	ratelimit_fail(rl, key, now_ms);
}

void ratelimit_reset_pair(struct ratelimit *rl, const char *a, const char *b)
{
	char key[RL_KEY_MAX];
	pair_key(key, a, b);
	ratelimit_reset(rl, key);
}
