/* Failed-attempt limiter for password logins: counts failures per key
 * (an email, a client address) in a sliding window and refuses further
 * attempts once a key reaches the limit, until the window has passed.
 * Thread-safe; fixed-size table (the oldest entries are reused), so a flood
 * of distinct keys cannot grow memory. */
#ifndef TESSERA_AUTH_RATELIMIT_H
#define TESSERA_AUTH_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

struct ratelimit;

/* max_failures within window_ms; NULL on out of memory. */
struct ratelimit *ratelimit_new(int max_failures, int64_t window_ms);
void ratelimit_free(struct ratelimit *rl);

/* 0 when key may try now, else milliseconds until it may (now_ms: any
 * monotonic clock). */
int64_t ratelimit_check(struct ratelimit *rl, const char *key, int64_t now_ms);
void ratelimit_fail(struct ratelimit *rl, const char *key, int64_t now_ms);
/* A success forgets the key's failures. */
void ratelimit_reset(struct ratelimit *rl, const char *key);

#endif
