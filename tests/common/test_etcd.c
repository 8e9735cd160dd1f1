/* The etcd v3 JSON gateway client against a real etcd started here:
 * base64, range/put/delete/txn, and the watch: events in order, resumed
 * after etcd stops and starts again without losing or repeating one, and
 * a RESET when the revision to resume from was compacted. */
#include "common/etcd.h"
#include "common/httpc.h"
#include "testetcd.h"
#include "testlib.h"

#include <pthread.h>
#include <stdatomic.h>

static struct testetcd etcd;

TEST(base64_round_trips)
{
	const char *samples[] = {"", "a", "ab", "abc", "abcd", "/tessera/config/policy.a@b.c", "{\"x\": [1, 2]}"};
	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
		char *e = etcd_b64_encode(samples[i], strlen(samples[i]));
		size_t n = 99;
		char *d = e ? etcd_b64_decode(e, &n) : NULL;
		CHECK_STR(d, samples[i]);
		CHECK_INT(n, strlen(samples[i]));
		free(e);
		free(d);
	}
	char *e = etcd_b64_encode("foo", 3);
	CHECK_STR(e, "Zm9v");
	free(e);
	CHECK(etcd_b64_decode("Zm9", NULL) == NULL);     /* not a multiple of 4 */
	CHECK(etcd_b64_decode("Zm!v", NULL) == NULL);    /* not base64 */
}

TEST(checks_endpoints)
{
	struct terr err = {0};
	CHECK_INT(etcd_check_endpoint("http://127.0.0.1:2379", &err), 0);
	CHECK_INT(etcd_check_endpoint("127.0.0.1:2379", &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "http://HOST:PORT");
	CHECK_INT(etcd_check_endpoint("http://host:1/v3", &err), -EINVAL);
	CHECK_INT(etcd_check_endpoint("http://host", &err), -EINVAL);
}

TEST(puts_ranges_and_deletes)
{
	struct terr err = {0};
	const char *ep = etcd.endpoint;
	CHECK_INT(etcd_put(ep, "/t/a", "1", 1, &err), 0);
	CHECK_INT(etcd_put(ep, "/t/b", "{\"x\": 2}", 8, &err), 0);
	CHECK_INT(etcd_put(ep, "/t/bb", "", 0, &err), 0);
	CHECK_INT(etcd_put(ep, "/u/a", "other", 5, &err), 0);
	struct etcd_kv *kvs;
	size_t n;
	int64_t rev = 0;
	CHECK_INT(etcd_range(ep, "/t/", true, &kvs, &n, &rev, &err), 0);
	CHECK_INT(n, 3);
	CHECK(rev > 0);
	if (n == 3) {
		CHECK_STR(kvs[0].key, "/t/a");
		CHECK_STR(kvs[0].value, "1");
		CHECK_STR(kvs[1].key, "/t/b");
		CHECK_STR(kvs[1].value, "{\"x\": 2}");
		CHECK_STR(kvs[2].value, "");
		CHECK_INT(kvs[2].value_len, 0);
	}
	etcd_kvs_free(kvs, n);
	/* One key, not its prefix. */
	CHECK_INT(etcd_range(ep, "/t/b", false, &kvs, &n, NULL, &err), 0);
	CHECK_INT(n, 1);
	etcd_kvs_free(kvs, n);
	/* "" with prefix is every key. */
	CHECK_INT(etcd_range(ep, "", true, &kvs, &n, NULL, &err), 0);
	CHECK(n >= 4);
	etcd_kvs_free(kvs, n);
	int64_t deleted = 0;
	CHECK_INT(etcd_delete(ep, "/t/", true, &deleted, &err), 0);
	CHECK_INT(deleted, 3);
	CHECK_INT(etcd_range(ep, "/t/", true, &kvs, &n, NULL, &err), 0);
	CHECK_INT(n, 0);
	etcd_kvs_free(kvs, n);
	CHECK_INT(etcd_range(ep, "/u/a", false, &kvs, &n, NULL, &err), 0);
	CHECK_INT(n, 1);
	etcd_kvs_free(kvs, n);
}

TEST(txn_replaces_a_prefix_at_once)
{
	struct terr err = {0};
	const char *ep = etcd.endpoint;
	CHECK_INT(etcd_put(ep, "/x/old", "1", 1, &err), 0);
	CHECK_INT(etcd_put(ep, "/x/keep", "1", 1, &err), 0);
	const char *keys[] = {"/x/keep", "/x/new", "/x/gone"};
	const char *values[] = {"2", "3", NULL};
	CHECK_INT(etcd_txn(ep, "/x/", keys, values, 3, &err), 0);
	struct etcd_kv *kvs;
	size_t n;
	CHECK_INT(etcd_range(ep, "/x/", true, &kvs, &n, NULL, &err), 0);
	CHECK_INT(n, 2);
	if (n == 2) {
		CHECK_STR(kvs[0].key, "/x/keep");
		CHECK_STR(kvs[0].value, "2");
		CHECK_STR(kvs[1].key, "/x/new");
	}
	etcd_kvs_free(kvs, n);
}

TEST(refused_connection_is_an_error)
{
	struct terr err = {0};
	struct etcd_kv *kvs;
	size_t n;
	char ep[64];
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", testetcd_free_port());
	CHECK(etcd_range(ep, "k", false, &kvs, &n, NULL, &err) < 0);
	CHECK_CONTAINS(err.msg, "etcd at http://127.0.0.1:");
}

/* ---------- watch ---------- */

struct seen {
	pthread_mutex_t mu;
	char log[4096];      /* "PUT k=v;DELETE k;RESET;" */
	int ups, downs;
	int64_t last_rev;
	atomic_bool cancel;
	int64_t start;
	const char *prefix;
};

static void on_event(const struct etcd_event *ev, void *ud)
{
	struct seen *s = ud;
	pthread_mutex_lock(&s->mu);
	size_t l = strlen(s->log);
	if (ev->type == ETCD_EVENT_PUT)
		snprintf(s->log + l, sizeof(s->log) - l, "PUT %s=%s;", ev->key, ev->value);
	else if (ev->type == ETCD_EVENT_DELETE)
		snprintf(s->log + l, sizeof(s->log) - l, "DELETE %s;", ev->key);
	else if (ev->type == ETCD_EVENT_RESET)
		snprintf(s->log + l, sizeof(s->log) - l, "RESET;");
	else
		snprintf(s->log + l, sizeof(s->log) - l, "SYNCED;");
	s->last_rev = ev->revision;
	pthread_mutex_unlock(&s->mu);
}

static void on_state(bool up, const char *why, void *ud)
{
	struct seen *s = ud;
	pthread_mutex_lock(&s->mu);
	if (up)
		s->ups++;
	else
		s->downs++;
	pthread_mutex_unlock(&s->mu);
	(void)why;
}

static void *watch_thread(void *arg)
{
	struct seen *s = arg;
	etcd_watch(etcd.endpoint, s->prefix, s->start, 100, on_event, on_state, s, &s->cancel);
	return NULL;
}

/* Waits (up to 30 s; the condition, not the time, is what is checked)
 * until the log contains want. */
static bool wait_log(struct seen *s, const char *want)
{
	for (int i = 0; i < 300; i++) {
		pthread_mutex_lock(&s->mu);
		bool ok = strstr(s->log, want) != NULL;
		pthread_mutex_unlock(&s->mu);
		if (ok)
			return true;
		struct timespec ts = {0, 100000000L};
		nanosleep(&ts, NULL);
	}
	return false;
}

static bool wait_ups(struct seen *s, int n)
{
	for (int i = 0; i < 300; i++) {
		pthread_mutex_lock(&s->mu);
		bool ok = s->ups >= n;
		pthread_mutex_unlock(&s->mu);
		if (ok)
			return true;
		struct timespec ts = {0, 100000000L};
		nanosleep(&ts, NULL);
	}
	return false;
}

static int count(const char *hay, const char *needle)
{
	int c = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		c++;
	return c;
}

TEST(watch_delivers_changes_and_resumes_after_a_restart)
{
	struct terr err = {0};
	const char *ep = etcd.endpoint;
	struct etcd_kv *kvs;
	size_t n;
	int64_t rev = 0;
	CHECK_INT(etcd_put(ep, "/w/before", "0", 1, &err), 0);
	CHECK_INT(etcd_range(ep, "/w/", true, &kvs, &n, &rev, &err), 0);
	etcd_kvs_free(kvs, n);
	static struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER, .prefix = "/w/"};
	s.start = rev + 1;
	pthread_t th;
	pthread_create(&th, NULL, watch_thread, &s);
	CHECK(wait_ups(&s, 1));
	CHECK_INT(etcd_put(ep, "/w/a", "1", 1, &err), 0);
	CHECK_INT(etcd_put(ep, "/other", "x", 1, &err), 0);   /* outside the prefix */
	CHECK_INT(etcd_put(ep, "/w/a", "2", 1, &err), 0);
	CHECK_INT(etcd_delete(ep, "/w/a", false, NULL, &err), 0);
	CHECK(wait_log(&s, "DELETE /w/a;"));
	pthread_mutex_lock(&s.mu);
	CHECK_STR(s.log, "PUT /w/a=1;PUT /w/a=2;DELETE /w/a;");
	pthread_mutex_unlock(&s.mu);

	/* etcd stops and starts again: the watch reconnects by itself and
	 * goes on after the last revision it gave, without repeating it. */
	testetcd_kill(&etcd);
	CHECK_INT(testetcd_start_again(&etcd), 0);
	CHECK(wait_ups(&s, 2));
	CHECK_INT(etcd_put(ep, "/w/b", "3", 1, &err), 0);
	CHECK(wait_log(&s, "PUT /w/b=3;"));
	pthread_mutex_lock(&s.mu);
	CHECK_STR(s.log, "PUT /w/a=1;PUT /w/a=2;DELETE /w/a;PUT /w/b=3;");
	CHECK(s.downs >= 1);
	pthread_mutex_unlock(&s.mu);

	atomic_store(&s.cancel, true);
	pthread_join(th, NULL);
	CHECK(strstr(s.log, "/before") == NULL);
}

TEST(watch_from_a_compacted_revision_starts_with_a_reset)
{
	struct terr err = {0};
	const char *ep = etcd.endpoint;
	CHECK_INT(etcd_put(ep, "/c/k", "1", 1, &err), 0);
	CHECK_INT(etcd_put(ep, "/c/k", "2", 1, &err), 0);
	struct etcd_kv *kvs;
	size_t n;
	int64_t rev = 0;
	CHECK_INT(etcd_range(ep, "/c/", true, &kvs, &n, &rev, &err), 0);
	etcd_kvs_free(kvs, n);
	/* Compact everything up to now through the gateway. */
	char url[128], body[64];
	snprintf(url, sizeof(url), "%s/v3/kv/compaction", ep);
	snprintf(body, sizeof(body), "{\"revision\": \"%lld\", \"physical\": true}", (long long)rev);
	struct httpc_request req = {.method = "POST", .url = url, .body = body, .body_len = strlen(body),
				    .timeout_ms = 10000};
	struct httpc_response resp = {0};
	CHECK_INT(httpc_do(&req, &resp, &err), 0);
	CHECK_INT(resp.status, 200);
	httpc_response_free(&resp);

	static struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER, .prefix = "/c/"};
	s.start = 2;   /* long gone */
	pthread_t th;
	pthread_create(&th, NULL, watch_thread, &s);
	CHECK(wait_log(&s, "RESET;PUT /c/k=2;SYNCED;"));
	CHECK(wait_ups(&s, 1));
	CHECK_INT(etcd_put(ep, "/c/k", "3", 1, &err), 0);
	CHECK(wait_log(&s, "PUT /c/k=3;"));
	atomic_store(&s.cancel, true);
	pthread_join(th, NULL);
	CHECK_INT(count(s.log, "RESET;"), 1);
	CHECK_INT(count(s.log, "PUT /c/k=2;"), 1);
}

int main(void)
{
	httpc_global_init();
	RUN(base64_round_trips);
	RUN(checks_endpoints);
	if (testetcd_start(&etcd) < 0) {
		fprintf(stderr, "could not start etcd (Debian's etcd-server)\n");
		testetcd_stop(&etcd);
		return 1;
	}
	RUN(puts_ranges_and_deletes);
	RUN(txn_replaces_a_prefix_at_once);
	RUN(refused_connection_is_an_error);
	RUN(watch_delivers_changes_and_resumes_after_a_restart);
	RUN(watch_from_a_compacted_revision_starts_with_a_reset);
	testetcd_stop(&etcd);
	return testlib_done();
}
