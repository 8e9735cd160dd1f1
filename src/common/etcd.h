/* A client of etcd's v3 JSON gateway (etcd 3.4: POST /v3/kv/range,
 * /v3/kv/put, /v3/kv/deleterange, /v3/kv/txn, /v3/watch) over libcurl.
 * Keys and values travel base64-encoded in JSON, as the gateway wants.
 * Debian has no C client of etcd's gRPC API, and the gateway is a few HTTP
 * calls, so it is written here.
 *
 * endpoint is "http://HOST:PORT" (no trailing path). Every function is
 * thread-safe: each call has its own connection. */
#ifndef TESSERA_COMMON_ETCD_H
#define TESSERA_COMMON_ETCD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Where in etcd Tessera's cluster settings are: one key per setting,
 * ETCD_CONFIG_PREFIX + "fgpu_per_device", + "policy.alice@example.com",
 * each holding the setting's JSON value (manager/settings.c writes them;
 * managers and agents follow them). */
#define ETCD_CONFIG_PREFIX "/tessera/config/"

struct etcd_kv {
	char *key;            /* NUL-terminated, owned */
	char *value;          /* NUL-terminated (values may hold NULs too: len), owned */
	size_t value_len;
	int64_t mod_revision;
};

/* Checks endpoint's form: http://HOST:PORT. */
int etcd_check_endpoint(const char *endpoint, struct terr *err);

/* The key (prefix false) or every key starting with key (prefix true; ""
 * is all). On success *kvs (owned, free with etcd_kvs_free) holds *n
 * pairs sorted by key and *revision (may be NULL) the store's revision the
 * answer was read at. */
int etcd_range(const char *endpoint, const char *key, bool prefix, struct etcd_kv **kvs, size_t *n,
	       int64_t *revision, struct terr *err);
void etcd_kvs_free(struct etcd_kv *kvs, size_t n);

int etcd_put(const char *endpoint, const char *key, const char *value, size_t value_len, struct terr *err);

/* Deletes key, or every key under it (prefix); *deleted (may be NULL)
 * gets how many went. */
int etcd_delete(const char *endpoint, const char *key, bool prefix, int64_t *deleted, struct terr *err);

/* One transaction: when clear_prefix is not NULL, every key under it is
 * deleted first; then keys[i] is set to values[i] (a NULL value deletes
 * that key). All or nothing. */
int etcd_txn(const char *endpoint, const char *clear_prefix, const char *const *keys,
	     const char *const *values, size_t n, struct terr *err);

enum etcd_event_type {
	ETCD_EVENT_PUT,
	ETCD_EVENT_DELETE,
	/* The watch could not resume where it was (the revisions it missed
	 * were compacted): what follows is every key under the prefix, as
	 * PUT events, then ETCD_EVENT_SYNCED; a key absent from them was
	 * deleted meanwhile. */
	ETCD_EVENT_RESET,
	ETCD_EVENT_SYNCED,
};

struct etcd_event {
	enum etcd_event_type type;
	const char *key;     /* borrowed for the callback's duration; NULL for RESET and SYNCED */
	const char *value;   /* PUT: NUL-terminated; DELETE: NULL */
	size_t value_len;
	int64_t revision;
};

typedef void (*etcd_watch_fn)(const struct etcd_event *ev, void *ud);
/* Called each time the watch connects (connected true, once etcd has
 * accepted the watch) or loses its connection (false, with why), so that
 * the owner can log the transitions. May be NULL. */
typedef void (*etcd_state_fn)(bool connected, const char *why, void *ud);

/* Watches every key under prefix from start_revision (the revision after
 * a range's answer: what changed since), calling fn for each change in
 * order. Blocks until *cancel becomes true (checked about once a second),
 * then returns 0. A lost connection (etcd stopped, restarted, network) is
 * retried every retry_ms (0: 1000) and the watch resumes after the last
 * revision it delivered, so no change is missed or given twice; when that
 * revision has been compacted, it starts again with ETCD_EVENT_RESET, the
 * whole prefix and ETCD_EVENT_SYNCED.
 * Never returns an error while cancel is false: every failure is a retry,
 * reported through state. */
int etcd_watch(const char *endpoint, const char *prefix, int64_t start_revision, int retry_ms,
	       etcd_watch_fn fn, etcd_state_fn state, void *ud, const atomic_bool *cancel);

/* Base64 (standard alphabet, padded), as the gateway's bytes fields use.
 * Return malloc'd NUL-terminated strings (owned by the caller) or NULL
 * (out of memory; for decode also malformed input). */
char *etcd_b64_encode(const void *data, size_t len);
char *etcd_b64_decode(const char *text, size_t *len);

#endif
