/* The parts of the etcd client that read what etcd sends (common/etcd.c
 * uses them; the fuzz target tests/fuzz/fuzz_etcd_stream.c feeds them):
 * base64, a key-value of the gateway's JSON, and the watch's answer, a
 * stream of JSON messages one per line, cut anywhere by the network. */
#ifndef TESSERA_COMMON_ETCD_STREAM_H
#define TESSERA_COMMON_ETCD_STREAM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/etcd.h"

/* A 64-bit field of the gateway: a JSON string of digits (or a number). */
int64_t etcd_i64(json_t *v);
/* Fills kv (owned strings; free both) from {"key", "value",
 * "mod_revision"}; -EIO when key or value is not base64. */
int etcd_kv_from_json(json_t *o, struct etcd_kv *kv);

/* One watch connection's answer. The caller sets fn, ud, on_created,
 * created_ud and next_rev; feed updates the rest. */
struct etcd_stream {
	etcd_watch_fn fn;
	void *ud;
	/* Called once etcd accepted the watch, with created_ud; may be NULL. */
	void (*on_created)(void *created_ud);
	void *created_ud;
	int64_t next_rev;               /* the revision after the last event delivered */
	bool created;
	bool compacted;                 /* cancelled: next_rev was compacted */
	char error[200];                /* why the stream must end, when it must */
	char *buf;                      /* an unfinished line (owned) */
	size_t len, cap;
};

/* Feeds received bytes, delivering each complete message's events through
 * fn in order. Returns 1 when the stream must end (error says why: an
 * error message, a cancelled watch, out of memory), else 0. A line that is
 * not a JSON object is skipped. */
int etcd_stream_feed(struct etcd_stream *s, const char *data, size_t len);
/* Before a new connection: forgets the partial line, created and error. */
void etcd_stream_restart(struct etcd_stream *s);
void etcd_stream_free(struct etcd_stream *s);

#endif
