/* agent/uplink.c against a small fake manager (common/httpd on 127.0.0.1)
 * that checks every call is signed as agent:<id> with the cluster secret.
 * The uplink registers, retrying while the manager is down; sends queued
 * events in order and keeps them while the manager does not take them
 * (an error answer, or no answer at all); sends heartbeats at the interval
 * the manager gave; and registers again when a heartbeat is answered 404.
 * Waits poll for a state with a deadline; nothing asserts on timing. */
#include "agent/uplink.h"
#include "common/httpc.h"
#include "common/httpd.h"
#include "common/sign.h"
#include "common/util.h"
#include "testlib.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SECRET "0123456789abcdef0123456789abcdef"
#define AGENT_ID "n-uplink"

static struct {
	pthread_mutex_t mu;
	int registers, heartbeats, event_posts, describes, bad_signatures;
	char url[128];            /* "url" of the last registration */
	char described_id[64];    /* "id" of the last registration */
	json_t *events;           /* bodies taken, in order */
	bool events_fail;         /* answer events 500 */
	int heartbeat_404;        /* answer this many heartbeats 404 */
} fm = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int fm_authenticate(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	const char *authz = httpd_header(req, "Authorization"), *date = httpd_header(req, "Date");
	const char *host = httpd_header(req, "Host");
	char ak[128], sig[SIGN_HEX_LEN + 1];
	struct terr err = {0};
	if (!authz || !date || !host || sign_parse_authorization(authz, ak, sizeof(ak), sig, &err) < 0 ||
	    strcmp(ak, "agent:" AGENT_ID) != 0 ||
	    sign_verify(SECRET, sig, req->method, req->target, date, host, req->body, req->body_len, time(NULL),
			&err) < 0) {
		pthread_mutex_lock(&fm.mu);
		fm.bad_signatures++;
		pthread_mutex_unlock(&fm.mu);
		httpd_error(resp, 401, "unauthenticated", "bad signature");
		return -1;
	}
	return 0;
}

static void fm_register(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	json_t *b = json_loadb(req->body, req->body_len, 0, NULL);
	pthread_mutex_lock(&fm.mu);
	fm.registers++;
	snprintf(fm.url, sizeof(fm.url), "%s", json_string_value(json_object_get(b, "url")) ?: "");
	snprintf(fm.described_id, sizeof(fm.described_id), "%s",
		 json_string_value(json_object_get(b, "id")) ?: "");
	pthread_mutex_unlock(&fm.mu);
	json_decref(b);
	httpd_json(resp, 200, json_pack("{s:i}", "heartbeat_interval_ms", 30));
}

static void fm_heartbeat(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	pthread_mutex_lock(&fm.mu);
	bool gone = fm.heartbeat_404 > 0 && strcmp(req->params[0], AGENT_ID) == 0;
	if (gone)
		fm.heartbeat_404--;
	else
		fm.heartbeats++;
	pthread_mutex_unlock(&fm.mu);
	if (gone)
		httpd_error(resp, 404, "not_found", "no agent %s", req->params[0]);
	else
		httpd_json(resp, 200, json_object());
}

static void fm_events(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	json_t *b = json_loadb(req->body, req->body_len, 0, NULL);
	pthread_mutex_lock(&fm.mu);
	fm.event_posts++;
	bool fail = fm.events_fail || strcmp(req->params[0], AGENT_ID) != 0;
	if (!fail)
		json_array_append(fm.events, b);
	pthread_mutex_unlock(&fm.mu);
	json_decref(b);
	if (fail)
		httpd_error(resp, 500, "internal", "not now");
	else
		httpd_json(resp, 200, json_object());
}

static const struct httpd_route fm_routes[] = {
	{"POST", "/v1/agents/register", fm_register, 0},
	{"POST", "/v1/agents/{id}/heartbeat", fm_heartbeat, 0},
	{"POST", "/v1/agents/{id}/events", fm_events, 0},
};

static struct httpd *fm_start(int port)
{
	char listen[32];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	struct httpd_config cfg = {.listen = listen, .routes = fm_routes,
				   .n_routes = sizeof(fm_routes) / sizeof(fm_routes[0]),
				   .max_body = 1 << 20, .authenticate = fm_authenticate};
	struct httpd *h = NULL;
	struct terr err = {0};
	if (httpd_start(&cfg, &h, &err) < 0)
		FAILF("fake manager on %s: %s", listen, err.msg);
	return h;
}

static int fake_describe(void *ctx, json_t **out, struct terr *err)
{
	(void)ctx;
	(void)err;
	pthread_mutex_lock(&fm.mu);
	fm.describes++;
	pthread_mutex_unlock(&fm.mu);
	*out = json_pack("{s:s,s:[]}", "id", AGENT_ID, "containers");
	return 0;
}

static int get(int *field)
{
	pthread_mutex_lock(&fm.mu);
	int v = *field;
	pthread_mutex_unlock(&fm.mu);
	return v;
}

static size_t events_taken(void)
{
	pthread_mutex_lock(&fm.mu);
	size_t n = json_array_size(fm.events);
	pthread_mutex_unlock(&fm.mu);
	return n;
}

/* Polls cond for up to 10 s. */
#define WAIT_FOR(cond) ({ \
	int64_t until_ = util_mono_ms() + 10000; \
	while (!(cond) && util_mono_ms() < until_) \
		usleep(5000); \
	(cond); \
})

static void send_event(struct uplink *u, int n)
{
	json_t *ev = json_pack("{s:s,s:s,s:i}", "session_id", "s", "event", "died", "n", n);
	uplink_event(u, AGENT_ID, ev);
	json_decref(ev);
}

/* The events the manager took are n = 1..count, each once, in order. */
static bool events_in_order(int count)
{
	pthread_mutex_lock(&fm.mu);
	bool ok = json_array_size(fm.events) == (size_t)count;
	for (int i = 0; ok && i < count; i++)
		ok = json_integer_value(json_object_get(json_array_get(fm.events, (size_t)i), "n")) == i + 1;
	pthread_mutex_unlock(&fm.mu);
	return ok;
}

TEST(uplink)
{
	/* A port nobody listens on: the manager is down at first. */
	struct httpd *h = fm_start(0);
	if (!h)
		return;
	int port = httpd_port(h);
	httpd_stop(h);
	char manager[64];
	snprintf(manager, sizeof(manager), "http://127.0.0.1:%d", port);
	struct uplink_config cfg = {
		.manager = manager, .cluster_secret = SECRET, .agent_id = AGENT_ID,
		.advertise_url = "http://127.0.0.1:9/rpc-here", .describe = fake_describe,
		.retry_ms = 20, .poll_ms = 10,
	};
	struct uplink *u = NULL;
	struct terr err = {0};
	CHECK_INT(uplink_start(&u, &cfg, &err), 0);
	if (!u)
		return;

	/* Down: it keeps trying, and is not registered. */
	CHECK(WAIT_FOR(get(&fm.describes) >= 3));
	CHECK(!uplink_registered(u));
	send_event(u, 1);   /* queued before any registration */
	CHECK_INT(uplink_pending(u), 1);

	/* Up: it registers, with its description and its RPC URL. */
	h = fm_start(port);
	CHECK(WAIT_FOR(uplink_registered(u)));
	CHECK(get(&fm.registers) >= 1);
	pthread_mutex_lock(&fm.mu);
	CHECK_STR(fm.url, "http://127.0.0.1:9/rpc-here");
	CHECK_STR(fm.described_id, AGENT_ID);
	pthread_mutex_unlock(&fm.mu);

	/* Heartbeats at the manager's interval; the queued event goes out. */
	CHECK(WAIT_FOR(get(&fm.heartbeats) >= 3));
	CHECK(WAIT_FOR(events_taken() == 1));
	send_event(u, 2);
	send_event(u, 3);
	CHECK(WAIT_FOR(events_taken() == 3));
	CHECK(events_in_order(3));
	CHECK_INT(uplink_pending(u), 0);

	/* The manager refuses events: they are kept and tried again. */
	pthread_mutex_lock(&fm.mu);
	fm.events_fail = true;
	int posts = fm.event_posts;
	pthread_mutex_unlock(&fm.mu);
	send_event(u, 4);
	send_event(u, 5);
	CHECK(WAIT_FOR(get(&fm.event_posts) >= posts + 3));
	CHECK(WAIT_FOR(uplink_pending(u) == 2));  /* not while a refused send is in flight */
	CHECK_INT(events_taken(), 3);

	/* The manager goes away: no answer at all; the events stay queued,
	 * and one more arrives meanwhile. */
	httpd_stop(h);
	int beats = get(&fm.heartbeats);
	usleep(200000);   /* several poll rounds without a manager */
	send_event(u, 6);
	CHECK(WAIT_FOR(uplink_pending(u) == 3));
	CHECK_INT(get(&fm.heartbeats), beats);

	/* Back and taking events: all of them arrive, once each, in order. */
	pthread_mutex_lock(&fm.mu);
	fm.events_fail = false;
	pthread_mutex_unlock(&fm.mu);
	h = fm_start(port);
	CHECK(WAIT_FOR(events_taken() == 6));
	CHECK(events_in_order(6));
	CHECK_INT(uplink_pending(u), 0);

	/* A heartbeat answered 404 (a restarted manager forgot the agent):
	 * it registers again. */
	int regs = get(&fm.registers);
	pthread_mutex_lock(&fm.mu);
	fm.heartbeat_404 = 1;
	pthread_mutex_unlock(&fm.mu);
	CHECK(WAIT_FOR(get(&fm.registers) > regs));
	CHECK(WAIT_FOR(uplink_registered(u)));
	beats = get(&fm.heartbeats);
	CHECK(WAIT_FOR(get(&fm.heartbeats) > beats));
	CHECK_INT(get(&fm.bad_signatures), 0);

	/* Stopping ends the thread; what is queued afterwards stays. */
	uplink_stop(u);
	send_event(u, 7);
	CHECK_INT(uplink_pending(u), 1);
	uplink_free(u);
	httpd_stop(h);
}

TEST(stops_while_manager_down)
{
	struct httpd *h = fm_start(0);
	if (!h)
		return;
	int port = httpd_port(h);
	httpd_stop(h);
	char manager[64];
	snprintf(manager, sizeof(manager), "http://127.0.0.1:%d", port);
	struct uplink_config cfg = {
		.manager = manager, .cluster_secret = SECRET, .agent_id = AGENT_ID,
		.advertise_url = "http://127.0.0.1:9", .describe = fake_describe,
	};
	struct uplink *u = NULL;
	struct terr err = {0};
	int before = get(&fm.describes);
	CHECK_INT(uplink_start(&u, &cfg, &err), 0);
	CHECK(WAIT_FOR(get(&fm.describes) > before));
	uplink_stop(u);   /* in its 1 s retry wait: returns without it */
	CHECK(!uplink_registered(u));
	uplink_free(u);

	/* Missing settings are refused. */
	cfg.describe = NULL;
	CHECK_INT(uplink_start(&u, &cfg, &err), -EINVAL);
}

int main(void)
{
	httpc_global_init();
	fm.events = json_array();
	RUN(uplink);
	RUN(stops_while_manager_down);
	json_decref(fm.events);
	return testlib_done();
}
