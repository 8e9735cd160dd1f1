/* The manager's overviews: the admin dashboard (GET /v1/dashboard: the
 * state's snapshot, aggregated by dashboard.c) and the About page's
 * version and components' health (GET /v1/about). Both take the lock
 * only to copy what they read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"
#include "common/redis.h"
#include "common/util.h"
#include "manager/dashboard.h"
#include "manager/state.h"

/* Ended sessions this recent are the dashboard's "recent failures". */
#define DASH_WINDOW_MS (24LL * 3600 * 1000)
#define DASH_TOP_USERS 10
#define DASH_MAX_FAILURES 20

json_t *mgr_dashboard(struct manager *m)
{
	pthread_mutex_lock(&m->mu);
	int64_t per_dev = mgr_per_device_m(m);
	size_t n_gpus = 0;
	for (size_t i = 0; i < m->n_agents; i++)
		n_gpus += (size_t)m->agents[i]->n_gpus;
	struct dash_node *nodes = calloc(m->n_agents ? m->n_agents : 1, sizeof(*nodes));
	struct dash_gpu *gpus = calloc(n_gpus ? n_gpus : 1, sizeof(*gpus));
	struct dash_session *sessions = calloc(m->n_sessions ? m->n_sessions : 1, sizeof(*sessions));
	json_t *o = NULL;
	if (nodes && gpus && sessions) {
		/* The strings point into the records: the aggregation runs
		 * under the lock, and is one pass over each list. */
		size_t g = 0;
		for (size_t i = 0; i < m->n_agents; i++) {
			const struct magent *a = m->agents[i];
			struct dash_node *nd = &nodes[i];
			nd->id = a->rec.id;
			nd->alive = a->alive;
			nd->drained = mgr_node_drained(m, a->rec.id);
			nd->group = mgr_node_group(m, a->rec.id);
			nd->capacity = a->rec.capacity;
			nd->used = a->used;
			nd->sessions = a->n_sessions;
			nd->gpus = &gpus[g];
			nd->n_gpus = a->n_gpus;
			for (int d = 0; d < a->n_gpus; d++, g++)
				gpus[g] = (struct dash_gpu){.model = a->gpus[d].name, .memory = a->gpus[d].memory,
							    .cap_m = per_dev, .used_m = a->gpus[d].used_m};
		}
		int64_t now = util_now_ms();
		for (size_t i = 0; i < m->n_sessions; i++) {
			const struct msession *s = m->sessions[i];
			/* The owner is shown only for what holds room and for
			 * failures: the history of ended sessions, which grows,
			 * costs no user lookup. */
			bool shown = session_status_holds(s->rec.status) ||
				     (s->rec.status == SS_ERROR && now - s->rec.terminated_ms <= DASH_WINDOW_MS);
			const struct user_rec *u = shown ? mgr_find_user(m, s->rec.owner_id) : NULL;
			sessions[i] = (struct dash_session){
				.id = s->rec.id, .name = s->rec.name, .owner = u ? u->email : NULL,
				.status = s->rec.status, .status_info = s->rec.status_info, .req = s->rec.req,
				.sub = mgr_session_is_sub(s),
				.ended_ms = session_status_final(s->rec.status) ? s->rec.terminated_ms : 0,
			};
		}
		struct dash_input in = {
			.nodes = nodes, .n_nodes = m->n_agents, .sessions = sessions, .n_sessions = m->n_sessions,
			.now_ms = now, .window_ms = DASH_WINDOW_MS, .top_users = DASH_TOP_USERS,
			.max_failures = DASH_MAX_FAILURES,
		};
		o = dash_aggregate(&in);
	}
	pthread_mutex_unlock(&m->mu);
	free(nodes);
	free(gpus);
	free(sessions);
	return o;
}

/* ---------- About: version and health ---------- */

void mgr_proxy_poll(struct manager *m, bool begins)
{
	atomic_fetch_add(&m->proxy_polls, begins ? 1 : -1);
	atomic_store(&m->proxy_seen_ms, util_now_ms());
}

void mgr_webserver_seen(struct manager *m)
{
	atomic_store(&m->web_seen_ms, util_now_ms());
}

/* A component that answers within this long of its last call is up: the
 * proxy polls at least every 60 s (its long poll's timeout). */
#define SEEN_UP_MS (90 * 1000)

static void component(json_t *arr, const char *name, const char *status, const char *detail)
{
	json_array_append_new(arr, json_pack("{s:s,s:s,s:s}", "name", name, "status", status, "detail", detail));
}

static void ago(char *buf, size_t n, int64_t ms)
{
	int64_t s = ms / 1000;
	if (s < 120)
		snprintf(buf, n, "%llds", (long long)s);
	else if (s < 7200)
		snprintf(buf, n, "%lld min", (long long)(s / 60));
	else
		snprintf(buf, n, "%lld h", (long long)(s / 3600));
}

json_t *mgr_about(struct manager *m, bool admin, bool via_webserver)
{
	char d[512], t[32];
	int64_t now = util_now_ms();
	json_t *comps = json_array();
	bool degraded = false;

	snprintf(d, sizeof(d), "tessera %s; answering this request", TESSERA_VERSION);
	component(comps, "manager", "up", d);

	/* The store: an admin learns where it is (as its log lines name it,
	 * without credentials); a user only whether it answers. */
	bool store_up = mgr_store_available(m);
	snprintf(d, sizeof(d), "%s%s%s", m->so->name, admin ? " at " : "", admin ? mgr_store_where(m) : "");
	if (!store_up)
		snprintf(d + strlen(d), sizeof(d) - strlen(d), ": unreachable; changes are refused until it is back");
	component(comps, "store", store_up ? "up" : "down", d);
	degraded |= !store_up;

	if (m->redis) {
		bool down = atomic_load(&m->redis_down);
		snprintf(d, sizeof(d), "%s%s%s", down ? "does not answer; kept in the manager's memory meanwhile" : "answers",
			 admin ? " at " : "", admin ? redis_addr(m->redis) : "");
		component(comps, "redis", down ? "down" : "up", d);
		degraded |= down;
	}
	snprintf(d, sizeof(d), "sessions' usage history in %s", m->usage_ops->name);
	component(comps, "usage history", "up", d);

	if (m->cfg.etcd) {
		bool down = atomic_load(&m->etcd_down);
		snprintf(d, sizeof(d), "%s%s%s", down ? "does not answer; the settings stay as they were" : "watched",
			 admin ? " at " : "", admin ? m->cfg.etcd : "");
		component(comps, "etcd", down ? "down" : "up", d);
		degraded |= down;
	}

	pthread_mutex_lock(&m->mu);
	size_t n = m->n_agents, alive = 0;
	for (size_t i = 0; i < n; i++)
		alive += m->agents[i]->alive;
	bool proxy_known = m->proxy_known;
	pthread_mutex_unlock(&m->mu);
	const char *st = n == 0 ? "down" : alive == n ? "up" : alive ? "degraded" : "down";
	if (n == 0)
		snprintf(d, sizeof(d), "no node has registered");
	else
		snprintf(d, sizeof(d), "%zu of %zu node%s alive%s", alive, n, n == 1 ? "" : "s",
			 alive < n ? " (the others LOST: no heartbeat)" : "");
	component(comps, "agents", st, d);
	degraded |= strcmp(st, "up") != 0;

	int polls = atomic_load(&m->proxy_polls);
	int64_t seen = atomic_load(&m->proxy_seen_ms);
	if (polls > 0 || (seen && now - seen <= SEEN_UP_MS)) {
		component(comps, "app proxy", "up", "polling the manager for app routes");
	} else if (seen) {
		ago(t, sizeof(t), now - seen);
		snprintf(d, sizeof(d), "last polled the manager %s ago", t);
		component(comps, "app proxy", "down", d);
		degraded = true;
	} else {
		component(comps, "app proxy", "unknown",
			  proxy_known ? "not seen since the manager started" : "has not polled this manager since it started");
	}

	int64_t web = atomic_load(&m->web_seen_ms);
	if (via_webserver) {
		component(comps, "webserver", "up", "relayed this request");
	} else if (web && now - web <= SEEN_UP_MS) {
		ago(t, sizeof(t), now - web);
		snprintf(d, sizeof(d), "relayed a request %s ago", t);
		component(comps, "webserver", "up", d);
	} else if (web) {
		/* A webserver nobody uses calls nothing: no proof of an outage. */
		ago(t, sizeof(t), now - web);
		snprintf(d, sizeof(d), "last relayed a request %s ago", t);
		component(comps, "webserver", "unknown", d);
	} else {
		component(comps, "webserver", "unknown", "has relayed no request since the manager started");
	}

	char at[40];
	util_format_time_ms(m->opened_ms, at, sizeof(at));
	return json_pack("{s:s,s:s,s:s,s:I,s:o}", "version", TESSERA_VERSION, "status", degraded ? "degraded" : "ok",
			 "started_at", at, "uptime_s", (json_int_t)((now - m->opened_ms) / 1000), "components", comps);
}
