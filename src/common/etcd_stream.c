/* common/etcd_stream.h */
#include "common/etcd_stream.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *etcd_b64_encode(const void *data, size_t len)
{
	size_t out_len = 4 * ((len + 2) / 3);
	char *out = malloc(out_len + 1);
	if (!out)
		return NULL;
	EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	out[out_len] = '\0';
	return out;
}

char *etcd_b64_decode(const char *text, size_t *len)
{
	size_t n = strlen(text);
	if (n % 4)
		return NULL;
	char *out = malloc(n / 4 * 3 + 1);
	if (!out)
		return NULL;
	int got = n ? EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)text, (int)n) : 0;
	if (got < 0) {
		free(out);
		return NULL;
	}
	/* EVP_DecodeBlock counts the padding as zero bytes. */
	if (n && text[n - 1] == '=')
		got--;
	if (n > 1 && text[n - 2] == '=')
		got--;
	out[got] = '\0';
	if (len)
		*len = (size_t)got;
	return out;
}

int64_t etcd_i64(json_t *v)
{
	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	return 0;
}

/* Fills kv from the gateway's {"key", "value", "mod_revision"}. */
int etcd_kv_from_json(json_t *o, struct etcd_kv *kv)
{
	const char *k = json_string_value(json_object_get(o, "key"));
	const char *v = json_string_value(json_object_get(o, "value"));
	kv->key = etcd_b64_decode(k ? k : "", NULL);
	kv->value = etcd_b64_decode(v ? v : "", &kv->value_len);
	kv->mod_revision = etcd_i64(json_object_get(o, "mod_revision"));
	if (!kv->key || !kv->value) {
		free(kv->key);
		free(kv->value);
		kv->key = kv->value = NULL;
		return -EIO;
	}
	return 0;
}

/* One message of the stream: {"result": {...}} or {"error": {...}}. */
static int stream_message(struct etcd_stream *w, json_t *msg)
{
	json_t *res = json_object_get(msg, "result");
	if (!res) {
		json_t *e = json_object_get(msg, "error");
		const char *m = json_string_value(json_object_get(e, "message"));
		snprintf(w->error, sizeof(w->error), "the watch failed: %.150s", m ? m : "no reason given");
		return 1;
	}
	if (json_is_true(json_object_get(res, "created")) && !w->created) {
		w->created = true;
		if (w->on_created)
			w->on_created(w->created_ud);
	}
	int64_t compact = etcd_i64(json_object_get(res, "compact_revision"));
	if (json_is_true(json_object_get(res, "canceled"))) {
		if (compact > 0)
			w->compacted = true;
		const char *why = json_string_value(json_object_get(res, "cancel_reason"));
		snprintf(w->error, sizeof(w->error), "etcd cancelled the watch%s%.150s", why ? ": " : "",
			 why ? why : compact > 0 ? " (the revisions to resume from were compacted)" : "");
		return 1;
	}
	size_t i;
	json_t *ev;
	json_array_foreach(json_object_get(res, "events"), i, ev) {
		struct etcd_kv kv = {0};
		if (etcd_kv_from_json(json_object_get(ev, "kv"), &kv) < 0)
			continue;
		const char *type = json_string_value(json_object_get(ev, "type"));
		struct etcd_event e = {
			.type = type && !strcmp(type, "DELETE") ? ETCD_EVENT_DELETE : ETCD_EVENT_PUT,
			.key = kv.key, .revision = kv.mod_revision,
		};
		if (e.type == ETCD_EVENT_PUT) {
			e.value = kv.value;
			e.value_len = kv.value_len;
		}
		w->fn(&e, w->ud);
		/* A revision at INT64_MAX (a broken or hostile gateway's) must
		 * not overflow: the watch stays at the last one there is. */
		if (kv.mod_revision >= w->next_rev)
			w->next_rev = kv.mod_revision < INT64_MAX ? kv.mod_revision + 1 : INT64_MAX;
		free(kv.key);
		free(kv.value);
	}
	return 0;
}

int etcd_stream_feed(struct etcd_stream *w, const char *data, size_t len)
{
	if (w->len + len + 1 > w->cap) {
		size_t cap = (w->len + len + 1) * 2;
		char *b = realloc(w->buf, cap);
		if (!b) {
			snprintf(w->error, sizeof(w->error), "out of memory");
			return 1;
		}
		w->buf = b;
		w->cap = cap;
	}
	memcpy(w->buf + w->len, data, len);
	w->len += len;
	size_t start = 0;
	char *nl;
	while ((nl = memchr(w->buf + start, '\n', w->len - start))) {
		size_t line = (size_t)(nl - (w->buf + start));
		json_t *msg = line ? json_loadb(w->buf + start, line, 0, NULL) : NULL;
		start += line + 1;
		int stop = json_is_object(msg) ? stream_message(w, msg) : 0;
		json_decref(msg);
		if (stop) {
			w->len = 0;
			return 1;
		}
	}
	memmove(w->buf, w->buf + start, w->len - start);
	w->len -= start;
	return 0;
}

void etcd_stream_restart(struct etcd_stream *s)
{
	s->len = 0;
	s->created = false;
	s->error[0] = '\0';
}

void etcd_stream_free(struct etcd_stream *s)
{
	free(s->buf);
	s->buf = NULL;
	s->len = s->cap = 0;
}
