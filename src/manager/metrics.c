/* The manager's Prometheus metrics (docs/admin.md, "Metrics"). Labels
 * hold route templates, statuses, node ids, never a secret, an email or a
 * raw path: a path carries session names, which are users' words, and
 * would make a new series for every one. */
#include <stdlib.h>
#include <string.h>

#include "common/metrics.h"
#include "common/util.h"
#include "manager/http/internal.h"
#include "manager/state.h"

/* Seconds: API requests answer in milliseconds, a few take seconds (a
 * pull's start, an image rescan). */
static const double api_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
/* A session waits from nothing to hours for room. */
static const double pending_bounds[] = {0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400};
/* A pass plans in microseconds to milliseconds (bench/sched_bench.c). */
static const double pass_bounds[] = {0.00001, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1};

#define NB(a) ((int)(sizeof(a) / sizeof((a)[0])))

int mgr_metrics_open(struct manager *m, struct terr *err)
{
	m->api_metrics = calloc(manager_n_routes + 1, sizeof(*m->api_metrics));
	if (!m->api_metrics)
		return terr_set(err, ENOMEM, "out of memory");
	pthread_mutex_init(&m->api_mu, NULL);
	for (size_t i = 0; i <= manager_n_routes; i++)
		metrics_hist_init(&m->api_metrics[i].latency, api_bounds, NB(api_bounds));
	metrics_hist_init(&m->pending_hist, pending_bounds, NB(pending_bounds));
	metrics_hist_init(&m->pass_hist, pass_bounds, NB(pass_bounds));
	return 0;
}

void mgr_metrics_close(struct manager *m)
{
	if (!m->api_metrics)
		return;
	pthread_mutex_destroy(&m->api_mu);
	free(m->api_metrics);
	m->api_metrics = NULL;
}

void mgr_metrics_observe(void *ctx, const struct httpd_route *route, const char *method, int status,
			 double seconds)
{
	(void)method;
	struct manager *m = ctx;
	/* The route's index in the one table; past it: no route matched. */
	size_t i = route ? (size_t)(route - manager_routes) : manager_n_routes;
	if (i > manager_n_routes)
		i = manager_n_routes;
	pthread_mutex_lock(&m->api_mu);
	struct mroute_metrics *r = &m->api_metrics[i];
	int k = 0;
	while (k < r->n_st && r->st[k].status != status)
		k++;
	if (k == r->n_st && r->n_st < (int)(sizeof(r->st) / sizeof(r->st[0]))) {
		r->st[k].status = status;
		r->st[k].n = 0;
		r->n_st++;
	}
	if (k < r->n_st)
		r->st[k].n++;
	metrics_hist_observe(&r->latency, seconds);
	pthread_mutex_unlock(&m->api_mu);
}

void mgr_metrics_pass(struct manager *m, double seconds)
{
	metrics_hist_observe(&m->pass_hist, seconds);
}

char *mgr_metrics_text(struct manager *m)
{
	struct metrics_text t = {0};
	pthread_mutex_lock(&m->mu);
	int64_t by_status[SS__COUNT] = {0};
	for (size_t i = 0; i < m->n_sessions; i++)
		if ((int)m->sessions[i]->rec.status >= 0 && m->sessions[i]->rec.status < SS__COUNT &&
		    !mgr_session_is_sub(m->sessions[i]))
			by_status[m->sessions[i]->rec.status]++;
	metrics_family(&t, "tessera_sessions", "gauge", "Sessions known to the manager, by status.");
	for (int st = 0; st < SS__COUNT; st++) {
		const char *l[] = {"status", session_status_name((enum session_status)st), NULL};
		metrics_sample(&t, "tessera_sessions", l, (double)by_status[st]);
	}
	metrics_family(&t, "tessera_queue_length", "gauge", "Sessions waiting to be placed (PENDING).");
	metrics_sample(&t, "tessera_queue_length", NULL, (double)by_status[SS_PENDING]);
	metrics_family(&t, "tessera_pending_seconds", "histogram",
		       "Time sessions spent PENDING before the scheduler placed them.");
	metrics_hist_write(&t, "tessera_pending_seconds", NULL, &m->pending_hist);
	metrics_family(&t, "tessera_placements_total", "counter", "Sessions placed by the scheduler since start.");
	metrics_sample(&t, "tessera_placements_total", NULL, (double)m->placements);
	metrics_family(&t, "tessera_schedule_pass_seconds", "histogram", "Time one scheduling pass took.");
	metrics_hist_write(&t, "tessera_schedule_pass_seconds", NULL, &m->pass_hist);
	int alive = 0, lost = 0;
	int64_t now = util_now_ms();
	metrics_family(&t, "tessera_agent_heartbeat_age_seconds", "gauge",
		       "Seconds since each node's agent was last heard from.");
	for (size_t i = 0; i < m->n_agents; i++) {
		const struct magent *a = m->agents[i];
		a->alive ? alive++ : lost++;
		const char *l[] = {"node", a->rec.id, NULL};
		/* The in-process agent needs no heartbeat: always 0. */
		double age = a->local ? 0 : a->rec.last_seen_ms ? (double)(now - a->rec.last_seen_ms) / 1000.0 : -1;
		metrics_sample(&t, "tessera_agent_heartbeat_age_seconds", l, age);
	}
	metrics_family(&t, "tessera_agents", "gauge", "Nodes' agents by status.");
	const char *la[] = {"status", "ALIVE", NULL}, *ll[] = {"status", "LOST", NULL};
	metrics_sample(&t, "tessera_agents", la, alive);
	metrics_sample(&t, "tessera_agents", ll, lost);
	pthread_mutex_unlock(&m->mu);

	pthread_mutex_lock(&m->api_mu);
	metrics_family(&t, "tessera_api_requests_total", "counter",
		       "API requests answered, by route template, method and status.");
	for (size_t i = 0; i <= manager_n_routes; i++) {
		const struct mroute_metrics *r = &m->api_metrics[i];
		const char *route = i < manager_n_routes ? manager_routes[i].pattern : "unmatched";
		const char *method = i < manager_n_routes ? manager_routes[i].method : "any";
		for (int k = 0; k < r->n_st; k++) {
			char code[16];
			snprintf(code, sizeof(code), "%d", r->st[k].status);
			const char *l[] = {"route", route, "method", method, "status", code, NULL};
			metrics_sample(&t, "tessera_api_requests_total", l, (double)r->st[k].n);
		}
	}
	metrics_family(&t, "tessera_api_request_seconds", "histogram",
		       "Time from a complete request to the handler's answer, by route template and method.");
	for (size_t i = 0; i <= manager_n_routes; i++) {
		const struct mroute_metrics *r = &m->api_metrics[i];
		if (!r->latency.count)
			continue;
		const char *l[] = {"route", i < manager_n_routes ? manager_routes[i].pattern : "unmatched", "method",
				   i < manager_n_routes ? manager_routes[i].method : "any", NULL};
		metrics_hist_write(&t, "tessera_api_request_seconds", l, &r->latency);
	}
	pthread_mutex_unlock(&m->api_mu);
	/* tessera server: its in-process agent has no port of its own. The
	 * agent outlives the manager's serving (link_local_ops' ctx). */
	pthread_mutex_lock(&m->mu);
	struct agent *local = NULL;
	for (size_t i = 0; i < m->n_agents && !local; i++)
		if (m->agents[i]->link == &link_local_ops)
			local = m->agents[i]->link_ctx;
	pthread_mutex_unlock(&m->mu);
	if (local)
		agent_metrics_write(local, &t);
	return metrics_text_take(&t);
}
