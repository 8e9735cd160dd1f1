/* A small Redis client over hiredis, for what Tessera keeps in Redis when
 * `redis = redis://...` is set (docs/admin.md, "Production: Redis"):
 * agents' heartbeats, webserver login sessions, login rate-limit counters
 * (and, through the generic list helpers below, anything else that can be
 * rebuilt, such as samples of live usage).
 *
 * One client is shared by every thread of a daemon: it keeps a small pool
 * of connections, each used by one thread at a time. A connection that
 * fails is dropped and a new one is made on the next command, so the
 * client recovers by itself when Redis comes back. While Redis cannot be
 * reached, commands fail at once (for a second after each failed
 * connect) rather than each waiting for a connect timeout.
 *
 * Errors (struct terr): ECONNREFUSED, ETIMEDOUT or EHOSTUNREACH when Redis
 * cannot be reached or does not answer (the message names "Redis at
 * HOST:PORT"), EPROTO when Redis answers an error (its words), EINVAL for
 * a bad URL. Keys are the caller's; every user prefixes its keys with
 * "tessera:" (REDIS_PREFIX) so one Redis can serve other programs too. */
#ifndef TESSERA_COMMON_REDIS_H
#define TESSERA_COMMON_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define REDIS_PREFIX "tessera:"

struct redis_client;

/* Parses url ("redis://HOST[:PORT][/DB]", "redis://:PASSWORD@HOST:PORT/DB"
 * or "redis://USER:PASSWORD@HOST:PORT/DB"; port 6379 and database 0 by
 * default) and makes the client. It does not connect: a daemon starts
 * while Redis is down and uses it once it is up. *out is the caller's
 * (redis_close). */
int redis_open(const char *url, struct redis_client **out, struct terr *err);
/* Closes every connection and frees c (NULL is fine). */
void redis_close(struct redis_client *c);
/* "HOST:PORT", for messages. Borrowed from c. */
const char *redis_addr(const struct redis_client *c);

/* PING: 0 when Redis answers. */
int redis_ping(struct redis_client *c, struct terr *err);

/* SET key value, with PX ttl_ms when ttl_ms > 0. */
int redis_set(struct redis_client *c, const char *key, const void *val, size_t len, int64_t ttl_ms,
	      struct terr *err);
/* GET key: 1 and *val (a NUL-terminated malloc'd copy, the caller's) and
 * *len when found, 0 and *val NULL when missing. */
int redis_get(struct redis_client *c, const char *key, char **val, size_t *len, struct terr *err);
/* DEL key: the number of keys removed (0 or 1). */
int redis_del(struct redis_client *c, const char *key, struct terr *err);
/* PTTL key into *ttl_ms: -2 when the key is missing, -1 when it has no
 * expiry. */
int redis_pttl(struct redis_client *c, const char *key, int64_t *ttl_ms, struct terr *err);
/* INCR key and, when the key has no expiry, PEXPIRE it window_ms: a
 * fixed window that starts at the first increment (one round trip, two
 * at the first). *count is the new value, *ttl_ms what is left of the
 * window. */
int redis_incr_window(struct redis_client *c, const char *key, int64_t window_ms, int64_t *count,
		      int64_t *ttl_ms, struct terr *err);

/* Lists, for series of samples: RPUSH value, then LTRIM to the last
 * max_len entries and, when ttl_ms > 0, PEXPIRE the list ttl_ms, in one
 * round trip. */
int redis_list_push_trim(struct redis_client *c, const char *key, const void *val, size_t len,
			 long max_len, int64_t ttl_ms, struct terr *err);
/* LRANGE key start stop (negative: from the end): *items is a malloc'd
 * array of *n malloc'd NUL-terminated strings, the caller's (free each
 * and the array; redis_strings_free does). */
int redis_list_range(struct redis_client *c, const char *key, long start, long stop, char ***items,
		     size_t *n, struct terr *err);
void redis_strings_free(char **items, size_t n);

/* Pipelines: n commands sent in one round trip (a round of samples of
 * many sessions costs one round trip, not one each). argv[0..argc) with
 * lengths (NULL lens: NUL-terminated strings); borrowed for the call. */
struct redis_cmd {
	int argc;
	const char **argv;
	const size_t *lens;
};
/* 0 when every command ran; the first error reply is EPROTO with Redis'
 * words (the commands after it still ran: Redis runs each on its own).
 * A connection error means some, none or all ran: callers repeat only
 * what is harmless to repeat. */
int redis_pipeline(struct redis_client *c, const struct redis_cmd *cmds, int n, struct terr *err);

/* Any command, for what the helpers above do not cover: argv[0..argc)
 * with lengths (NULL lens: NUL-terminated strings). The reply is
 * converted: an integer into *integer (when not NULL), a string or
 * status into *str (malloc'd, the caller's; when not NULL), nil leaves
 * both untouched and returns 0; else 1. An error reply is EPROTO. */
int redis_command(struct redis_client *c, int argc, const char **argv, const size_t *lens, int64_t *integer,
		  char **str, struct terr *err);

#endif
