/* Failed-attempt limiter for password logins: counts failures per key
 * (a client address, or an account and an address together) in a window and refuses further
 * attempts once a key reaches the limit, until the window has passed.
 * Thread-safe; fixed-size table (the oldest entries are reused), so a flood
 * of distinct keys cannot grow memory. */
#ifndef TESSERA_AUTH_RATELIMIT_H
#define TESSERA_AUTH_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

struct ratelimit;
struct redis_client;

/* max_failures within window_ms; NULL on out of memory. */
struct ratelimit *ratelimit_new(int max_failures, int64_t window_ms);
void ratelimit_free(struct ratelimit *rl);

/* Keeps the counts in Redis (common/redis.h) rather than in rl's table,
 * so that every manager on that Redis shares them and they outlive a
 * restart: key "tessera:ratelimit:NAME:" + the SHA-256 of the key, an
 * INCR whose expiry is set at the first failure (the same fixed window as
 * the table's). Whenever Redis cannot be reached the table counts
 * instead, so an outage never lifts the limit; the counts move back to
 * Redis by themselves when it answers again. c stays the caller's and
 * must outlive rl; name is copied (up to 31 bytes). */
void ratelimit_use_redis(struct ratelimit *rl, struct redis_client *c, const char *name);

/* 0 when key may try now, else milliseconds until it may (now_ms: any
 * monotonic clock). */
int64_t ratelimit_check(struct ratelimit *rl, const char *key, int64_t now_ms);
void ratelimit_fail(struct ratelimit *rl, const char *key, int64_t now_ms);
/* A success forgets the key's failures. */
void ratelimit_reset(struct ratelimit *rl, const char *key);

/* The same for a key of two parts, such as an account and a client
 * address: each pair is counted on its own, so failures for one account
 * from one address lock that pair only, and the account's owner from
 * another address still gets in. Each part is used up to
 * RATELIMIT_PART_MAX bytes; two pairs never share a count unless both
 * their parts agree that far. */
#define RATELIMIT_PART_MAX 255
int64_t ratelimit_check_pair(struct ratelimit *rl, const char *a, const char *b, int64_t now_ms);
void ratelimit_fail_pair(struct ratelimit *rl, const char *a, const char *b, int64_t now_ms);
void ratelimit_reset_pair(struct ratelimit *rl, const char *a, const char *b);

#endif
