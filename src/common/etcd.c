/* etcd's v3 JSON gateway over libcurl (common/etcd.h). The gateway maps
 * the gRPC messages to JSON: bytes fields are base64, int64 fields are
 * strings, and fields at their default value (type PUT = 0, an empty kvs)
 * are left out. */
#include "common/etcd.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/etcd_stream.h"
#include "common/httpc.h"

#define ETCD_TIMEOUT_MS 5000

int etcd_check_endpoint(const char *endpoint, struct terr *err)
{
	if (!endpoint || strncmp(endpoint, "http://", 7) || !endpoint[7] || strchr(endpoint + 7, '/') ||
	    !strchr(endpoint + 7, ':') || strlen(endpoint) > 200)
		return terr_set(err, EINVAL, "etcd must be http://HOST:PORT (etcd's client URL), not '%.80s'",
				endpoint ? endpoint : "");
	return 0;
}

/* The end of the range of every key starting with prefix: prefix with its
 * last byte below 0xff incremented; "\0" (all keys) when there is none. */
static char *prefix_end(const char *prefix, size_t *len)
{
	size_t n = strlen(prefix);
	char *end = malloc(n + 1);
	if (!end)
		return NULL;
	memcpy(end, prefix, n + 1);
	while (n > 0) {
		if ((unsigned char)end[n - 1] < 0xff) {
			end[n - 1]++;
			*len = n;
			return end;
		}
		n--;
	}
	end[0] = '\0';
	*len = 1;
	return end;
}

/* Sets obj[field] to base64 of data; 0 or -ENOMEM. */
static int set_b64(json_t *obj, const char *field, const void *data, size_t len)
{
	char *b = etcd_b64_encode(data, len);
	if (!b || json_object_set_new(obj, field, json_string(b)) < 0) {
		free(b);
		return -ENOMEM;
	}
	free(b);
	return 0;
}

/* Sets key (and range_end for a prefix) of a range-like request. */
static int set_range(json_t *obj, const char *key, bool prefix)
{
	/* Every key is the range from "\0" to "\0": etcd takes an empty key
	 * as no key at all. */
	if (set_b64(obj, "key", prefix && !*key ? "" : key, prefix && !*key ? 1 : strlen(key)) < 0)
		return -ENOMEM;
	if (!prefix)
		return 0;
	size_t n;
	char *end = prefix_end(key, &n);
	int rc = end ? set_b64(obj, "range_end", end, n) : -ENOMEM;
	free(end);
	return rc;
}

/* POSTs body to endpoint+path and parses the answer into *out (owned). */
static int call(const char *endpoint, const char *path, json_t *body, json_t **out, struct terr *err)
{
	char url[320];
	snprintf(url, sizeof(url), "%s%s", endpoint, path);
	char *text = json_dumps(body, JSON_COMPACT);
	if (!text)
		return terr_set(err, ENOMEM, "out of memory");
	static const char *const headers[] = {"Content-Type: application/json", NULL};
	struct httpc_request req = {
		.method = "POST", .url = url, .headers = headers, .body = text, .body_len = strlen(text),
		.timeout_ms = ETCD_TIMEOUT_MS,
	};
	struct httpc_response resp = {0};
	int rc = httpc_do(&req, &resp, err);
	free(text);
	if (rc < 0)
		return terr_prefix(err, "etcd at %s", endpoint);
	json_t *o = json_loadb(resp.body ? resp.body : "", resp.len, 0, NULL);
	if (resp.status != 200) {
		const char *msg = json_string_value(json_object_get(o, "message"));
		if (!msg)
			msg = json_string_value(json_object_get(o, "error"));
		rc = terr_set(err, EIO, "etcd at %s: %s answered %ld: %.200s", endpoint, path, resp.status,
			      msg ? msg : resp.body ? resp.body : "");
		json_decref(o);
		httpc_response_free(&resp);
		return rc;
	}
	httpc_response_free(&resp);
	if (!json_is_object(o)) {
		json_decref(o);
		return terr_set(err, EIO, "etcd at %s: %s answered something that is not JSON (is it etcd's client URL?)",
				endpoint, path);
	}
	*out = o;
	return 0;
}

void etcd_kvs_free(struct etcd_kv *kvs, size_t n)
{
	for (size_t i = 0; kvs && i < n; i++) {
		free(kvs[i].key);
		free(kvs[i].value);
	}
	free(kvs);
}

int etcd_range(const char *endpoint, const char *key, bool prefix, struct etcd_kv **kvs, size_t *n,
	       int64_t *revision, struct terr *err)
{
	*kvs = NULL;
	*n = 0;
	json_t *body = json_object(), *out = NULL;
	if (!body || set_range(body, key, prefix) < 0) {
		json_decref(body);
		return terr_set(err, ENOMEM, "out of memory");
	}
	int rc = call(endpoint, "/v3/kv/range", body, &out, err);
	json_decref(body);
	if (rc < 0)
		return rc;
	json_t *arr = json_object_get(out, "kvs");
	size_t count = json_array_size(arr);
	struct etcd_kv *res = calloc(count ? count : 1, sizeof(*res));
	if (!res) {
		json_decref(out);
		return terr_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < count; i++) {
		if (etcd_kv_from_json(json_array_get(arr, i), &res[i]) < 0) {
			etcd_kvs_free(res, i);
			json_decref(out);
			return terr_set(err, EIO, "etcd at %s: a key or value in the answer is not base64", endpoint);
		}
	}
	if (revision)
		*revision = etcd_i64(json_object_get(json_object_get(out, "header"), "revision"));
	json_decref(out);
	*kvs = res;
	*n = count;
	return 0;
}

int etcd_put(const char *endpoint, const char *key, const char *value, size_t value_len, struct terr *err)
{
	json_t *body = json_object(), *out = NULL;
	if (!body || set_b64(body, "key", key, strlen(key)) < 0 || set_b64(body, "value", value, value_len) < 0) {
		json_decref(body);
		return terr_set(err, ENOMEM, "out of memory");
	}
	int rc = call(endpoint, "/v3/kv/put", body, &out, err);
	json_decref(body);
	json_decref(out);
	return rc;
}

int etcd_delete(const char *endpoint, const char *key, bool prefix, int64_t *deleted, struct terr *err)
{
	json_t *body = json_object(), *out = NULL;
	if (!body || set_range(body, key, prefix) < 0) {
		json_decref(body);
		return terr_set(err, ENOMEM, "out of memory");
	}
	int rc = call(endpoint, "/v3/kv/deleterange", body, &out, err);
	json_decref(body);
	if (rc == 0 && deleted)
		*deleted = etcd_i64(json_object_get(out, "deleted"));
	json_decref(out);
	return rc;
}

static bool in_list(const char *key, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(keys[i], key))
			return true;
	return false;
}

/* A request_put or request_delete_range operation of a txn. */
static json_t *txn_op(const char *key, const char *value)
{
	json_t *req = json_object();
	if (!req)
		return NULL;
	if ((value ? set_b64(req, "key", key, strlen(key)) < 0 || set_b64(req, "value", value, strlen(value)) < 0
		   : set_range(req, key, false) < 0)) {
		json_decref(req);
		return NULL;
	}
	return json_pack("{s:o}", value ? "request_put" : "request_delete_range", req);
}

int etcd_txn(const char *endpoint, const char *clear_prefix, const char *const *keys,
	     const char *const *values, size_t n, struct terr *err)
{
	json_t *ops = json_array();
	if (!ops)
		return terr_set(err, ENOMEM, "out of memory");
	/* etcd refuses a txn whose delete range covers a key it also puts
	 * ("duplicate key given in txn request"): what the prefix holds
	 * beyond the new keys is deleted key by key. */
	if (clear_prefix) {
		struct etcd_kv *kvs;
		size_t nk;
		int rc = etcd_range(endpoint, clear_prefix, true, &kvs, &nk, NULL, err);
		if (rc < 0) {
			json_decref(ops);
			return rc;
		}
		for (size_t i = 0; i < nk; i++)
			if (!in_list(kvs[i].key, keys, n) && json_array_append_new(ops, txn_op(kvs[i].key, NULL)) < 0)
				rc = -ENOMEM;
		etcd_kvs_free(kvs, nk);
		if (rc < 0) {
			json_decref(ops);
			return terr_set(err, ENOMEM, "out of memory");
		}
	}
	for (size_t i = 0; i < n; i++)
		if (json_array_append_new(ops, txn_op(keys[i], values[i])) < 0) {
			json_decref(ops);
			return terr_set(err, ENOMEM, "out of memory");
		}
	json_t *body = json_pack("{s:[],s:o}", "compare", "success", ops), *out = NULL;
	if (!body)
		return terr_set(err, ENOMEM, "out of memory");
	int rc = call(endpoint, "/v3/kv/txn", body, &out, err);
	json_decref(body);
	json_decref(out);
	return rc;
}

/* ---------- watch ---------- */

struct watch_ctx {
	struct etcd_stream st;
	const char *endpoint, *prefix;
	etcd_state_fn state;
	bool connected;
};

static int watch_data(const char *data, size_t len, void *ud)
{
	struct watch_ctx *w = ud;
	return etcd_stream_feed(&w->st, data, len);
}

/* The stream's created hook: reports the connection once per outage. */
static void watch_created(void *ud)
{
	struct watch_ctx *w = ud;
	if (!w->connected && w->state)
		w->state(true, NULL, w->st.ud);
	w->connected = true;
}

static int watch_status(long status, const char *content_type, void *ud)
{
	(void)content_type;
	struct watch_ctx *w = ud;
	if (status != 200) {
		snprintf(w->st.error, sizeof(w->st.error), "POST /v3/watch answered %ld", status);
		return 1;
	}
	return 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* After a compaction: everything under the prefix, as a fresh start. */
static int watch_resync(struct watch_ctx *w, struct terr *err)
{
	struct etcd_kv *kvs;
	size_t n;
	int64_t rev;
	int rc = etcd_range(w->endpoint, w->prefix, true, &kvs, &n, &rev, err);
	if (rc < 0)
		return rc;
	struct etcd_event reset = {.type = ETCD_EVENT_RESET, .revision = rev};
	w->st.fn(&reset, w->st.ud);
	for (size_t i = 0; i < n; i++) {
		struct etcd_event e = {.type = ETCD_EVENT_PUT, .key = kvs[i].key, .value = kvs[i].value,
				       .value_len = kvs[i].value_len, .revision = kvs[i].mod_revision};
		w->st.fn(&e, w->st.ud);
	}
	etcd_kvs_free(kvs, n);
	struct etcd_event synced = {.type = ETCD_EVENT_SYNCED, .revision = rev};
	w->st.fn(&synced, w->st.ud);
	w->st.next_rev = rev + 1;
	return 0;
}

int etcd_watch(const char *endpoint, const char *prefix, int64_t start_revision, int retry_ms,
	       etcd_watch_fn fn, etcd_state_fn state, void *ud, const atomic_bool *cancel)
{
	if (retry_ms <= 0)
		retry_ms = 1000;
	bool reported_down = false;
	struct watch_ctx w = {.endpoint = endpoint, .prefix = prefix, .state = state};
	w.st.fn = fn;
	w.st.ud = ud;
	w.st.on_created = watch_created;
	w.st.created_ud = &w;
	w.st.next_rev = start_revision > 0 ? start_revision : 0;
	char url[320];
	snprintf(url, sizeof(url), "%s/v3/watch", endpoint);
	static const char *const headers[] = {"Content-Type: application/json", NULL};
	while (!atomic_load_explicit(cancel, memory_order_relaxed)) {
		struct terr err = {0};
		etcd_stream_restart(&w.st);
		if (w.st.compacted) {
			if (watch_resync(&w, &err) < 0)
				goto retry;
			w.st.compacted = false;
		}
		json_t *create = json_object(), *body = NULL;
		if (create && set_range(create, prefix, true) == 0) {
			if (w.st.next_rev > 0) {
				char rev[32];
				snprintf(rev, sizeof(rev), "%" PRId64, w.st.next_rev);
				json_object_set_new(create, "start_revision", json_string(rev));
			}
			body = json_pack("{s:O}", "create_request", create);
		}
		json_decref(create);
		char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
		json_decref(body);
		if (!text) {
			snprintf(w.st.error, sizeof(w.st.error), "out of memory");
			goto retry;
		}
		struct httpc_request req = {
			.method = "POST", .url = url, .headers = headers, .body = text, .body_len = strlen(text),
			.on_data = watch_data, .on_status = watch_status, .ud = &w, .cancel = cancel,
		};
		struct httpc_response resp = {0};
		int rc = httpc_do(&req, &resp, &err);
		httpc_response_free(&resp);
		free(text);
		if (atomic_load_explicit(cancel, memory_order_relaxed))
			break;
		if (rc == 0 && !w.st.error[0])
			snprintf(w.st.error, sizeof(w.st.error), "etcd closed the watch");
	retry:
		if (w.connected || !reported_down) {
			if (state)
				state(false, w.st.error[0] ? w.st.error : err.msg, ud);
			reported_down = true;
		}
		w.connected = false;
		for (int slept = 0; slept < retry_ms && !atomic_load_explicit(cancel, memory_order_relaxed); slept += 100)
			sleep_ms(100);
	}
	etcd_stream_free(&w.st);
	return 0;
}
