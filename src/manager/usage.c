/* Live usage in the manager (docs/api.md, "Usage statistics"): the agents'
 * rounds of samples (the "stats" event of the in-process agent, the
 * "stats" member of a remote agent's heartbeat) go into the usage history
 * (usage_store.h), the sessions' and nodes' latest figures, and the idle
 * policy (docs/admin.md, "Idle sessions"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/stats.h"
#include "common/jsonutil.h"
#include "common/log.h"
#include "common/util.h"
#include "manager/state.h"

static void redis_outcome(void *arg, int rc, const struct terr *err)
{
	mgr_redis_outcome(arg, rc, err);
}

int mgr_usage_open(struct manager *m, struct terr *err)
{
	int64_t retention_s = m->cfg.stats_retention_s > 0 ? m->cfg.stats_retention_s : MGR_STATS_RETENTION_S;
	if (m->redis) {
		/* Where the production issue puts live statistics: the history
		 * outlives a restart of this manager. One log line per outage
		 * for every use of Redis (mgr_redis_outcome). */
		m->usage_ops = &usage_store_redis_ops;
		return usage_store_redis_open(&m->usage, m->redis, retention_s * 1000, STATS_INTERVAL_MS, redis_outcome,
					      m, err);
	}
	m->usage_ops = &usage_store_memory_ops;
	return m->usage_ops->open(&m->usage, retention_s * 1000, STATS_INTERVAL_MS, err);
}

void mgr_usage_close(struct manager *m)
{
	if (m->usage)
		m->usage_ops->close(m->usage);
	m->usage = NULL;
}

int64_t mgr_usage_retention_s(const struct manager *m)
{
	return m->cfg.stats_retention_s > 0 ? m->cfg.stats_retention_s : MGR_STATS_RETENTION_S;
}

/* A number of a sample, 0 when absent or not a number. */
static double num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : 0;
}

static int64_t inum(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) ? json_integer_value(v) : json_is_real(v) ? (int64_t)json_real_value(v) : 0;
}

/* The idle policy of s's owner: timeout (0: none) and CPU threshold. */
static void idle_policy(struct manager *m, const struct msession *s, int64_t *timeout_s, int64_t *cpu_pct)
{
	const struct user_rec *owner = mgr_find_user(m, s->rec.owner_id);
	*timeout_s = owner ? mgr_user_policy_limit(m, owner->email, "idle_timeout_s", 0) : 0;
	*cpu_pct = owner ? mgr_user_policy_limit(m, owner->email, "idle_cpu_pct", MGR_IDLE_CPU_PCT) : MGR_IDLE_CPU_PCT;
}

/* "30 min", "90 s" */
static void duration_words(int64_t s, char *buf, size_t n)
{
	if (s >= 3600 && s % 3600 == 0)
		snprintf(buf, n, "%lld h", (long long)(s / 3600));
	else if (s >= 60 && s % 60 == 0)
		snprintf(buf, n, "%lld min", (long long)(s / 60));
	else
		snprintf(buf, n, "%lld s", (long long)s);
}

/* A session's sample decides whether it is idle: no app connection, no
 * exec running, CPU (and every GPU) under the threshold. A GPU whose use
 * is not measured (real GPUs, docs/api.md) counts as busy: an unknown is
 * never a reason to end someone's work. Ends it once idle for the
 * timeout. */
static void idle_update(struct manager *m, struct msession *s, const struct usage_sample *u, int app_conns,
			int64_t now)
{
	int64_t timeout_s, thr;
	idle_policy(m, s, &timeout_s, &thr);
	bool busy = app_conns > 0 || s->execs_running > 0 || u->cpu_pct >= (double)thr;
	for (int d = 0; d < u->n_gpus && !busy; d++)
		busy = u->gpus[d].util_pct < 0 || u->gpus[d].util_pct >= (double)thr;
	if (busy || timeout_s <= 0) {
		s->idle_since_ms = 0;
		return;
	}
	if (!s->idle_since_ms) {
		/* Idle from this sample on, or from the end of the last exec
		 * when that was later. */
		s->idle_since_ms = now > s->last_exec_ms ? now : s->last_exec_ms;
		return;
	}
	if (now - s->idle_since_ms < timeout_s * 1000 || s->rec.status != SS_RUNNING)
		return;
	/* A cluster session is idle when all its containers are, for the
	 * timeout since the last of them became so; it ends whole, from its
	 * main (mgr_cluster_follow ends the others). */
	if (mgr_session_is_cluster(s)) {
		if (mgr_session_is_sub(s) || !s->cl_main)
			return;
		for (int64_t i = 1; i < s->rec.cluster_size; i++) {
			const struct msession *o = mgr_cluster_member(s, i);
			if (o && (!o->idle_since_ms || now - o->idle_since_ms < timeout_s * 1000))
				return;
		}
	}
	char dur[32];
	duration_words(timeout_s, dur, sizeof(dur));
	snprintf(s->end_reason, sizeof(s->end_reason), "idle for %s: no app connection, no exec, CPU under %lld %%%s",
		 dur, (long long)thr, u->n_gpus ? ", GPU under the same" : "");
	mgr_set_status(m, s, SS_TERMINATING, "%s; terminating", s->end_reason);
	mgr_enqueue_destroy(m, s);
}

/* The sample of one session from its JSON (the agent's, validated here:
 * a remote agent's body is input like any other). */
static bool sample_parse(json_t *o, int64_t t, struct usage_sample *u)
{
	memset(u, 0, sizeof(*u));
	u->t = t;
	u->cpu_cores = num(o, "cpu_cores");
	u->cpu_pct = num(o, "cpu_pct");
	u->mem_bytes = inum(o, "mem_bytes");
	u->mem_limit_bytes = inum(o, "mem_limit_bytes");
	u->net_rx = inum(o, "net_rx_bytes");
	u->net_tx = inum(o, "net_tx_bytes");
	u->blk_read = inum(o, "blk_read_bytes");
	u->blk_write = inum(o, "blk_write_bytes");
	if (!isfinite(u->cpu_cores) || !isfinite(u->cpu_pct) || u->cpu_cores < 0 || u->cpu_pct < 0 ||
	    u->mem_bytes < 0 || u->mem_limit_bytes < 0)
		return false;
	size_t i;
	json_t *g;
	json_array_foreach(json_object_get(o, "gpus"), i, g) {
		if (u->n_gpus >= USAGE_MAX_GPUS)
			break;
		const char *uuid = json_string_value(json_object_get(g, "uuid"));
		if (!uuid || strlen(uuid) >= sizeof(u->gpus[0].uuid))
			return false;
		struct usage_gpu *d = &u->gpus[u->n_gpus++];
		util_strlcpy(d->uuid, uuid, sizeof(d->uuid));
		json_t *util = json_object_get(g, "util_pct");
		d->util_pct = json_is_number(util) ? json_number_value(util) : -1;
		if (!isfinite(d->util_pct))
			d->util_pct = -1;
		d->mem_bytes = inum(g, "mem_bytes");
		d->mem_limit_bytes = inum(g, "mem_limit_bytes");
	}
	return true;
}

/* The summary the sessions' list shows. */
static void summary_set(struct msession *s, const struct usage_sample *u)
{
	/* The session's kept JSON shows these ("usage", "idle"): rendered
	 * again at the next request. */
	mgr_session_changed(s);
	s->usage_t = u->t;
	s->usage_cpu_pct = u->cpu_pct;
	s->usage_mem_pct = u->mem_limit_bytes > 0 ? (double)u->mem_bytes * 100.0 / (double)u->mem_limit_bytes : 0;
	double sum = 0;
	int known = 0;
	for (int d = 0; d < u->n_gpus; d++)
		if (u->gpus[d].util_pct >= 0) {
			sum += u->gpus[d].util_pct;
			known++;
		}
	s->usage_gpu_pct = known ? sum / known : -1;
}

/* The samples of one round, gathered under the manager's lock and pushed
 * after it: a push may be a round trip to Redis. */
struct round {
	size_t n, cap;
	char (*ids)[64];
	struct usage_sample *s;
};

static bool round_add(struct round *r, const char *id, const struct usage_sample *u)
{
	if (r->n == r->cap) {
		size_t nc = r->cap ? r->cap * 2 : 16;
		char (*ids)[64] = realloc(r->ids, nc * sizeof(*ids));
		if (ids)
			r->ids = ids;
		struct usage_sample *s = ids ? realloc(r->s, nc * sizeof(*s)) : NULL;
		if (s)
			r->s = s;
		if (!ids || !s)
			return false;
		r->cap = nc;
	}
	util_strlcpy(r->ids[r->n], id, sizeof(r->ids[0]));
	r->s[r->n++] = *u;
	return true;
}

void mgr_usage_event(struct manager *m, const char *agent_id, json_t *ev)
{
	json_t *samples = json_object_get(ev, "samples");
	if (!json_is_array(samples))
		return;
	int64_t now = util_now_ms();
	int period = (int)inum(ev, "period_ms");
	struct round round = {0};
	pthread_mutex_lock(&m->mu);
	struct magent *a = mgr_find_agent(m, agent_id);
	if (!a || !a->alive) {
		pthread_mutex_unlock(&m->mu);
		return;
	}
	/* The manager's clock stamps the samples: agents' clocks may differ,
	 * and a history must grow in time. */
	if (period >= 100 && period <= 3600000)
		a->stats_period_ms = period;
	json_t *node = json_object_get(ev, "node");
	a->usage_t = now;
	a->usage_cpu = num(node, "cpu_cores");
	a->usage_mem = inum(node, "mem_bytes");
	size_t i;
	json_t *g;
	json_array_foreach(json_object_get(node, "gpus"), i, g) {
		struct mgpu *d = mgr_agent_gpu(a, json_string_value(json_object_get(g, "uuid")) ?: "");
		if (!d)
			continue;
		json_t *util = json_object_get(g, "util_pct");
		d->util_pct = json_is_number(util) ? json_number_value(util) : -1;
		d->mem_used = inum(g, "mem_used_bytes");
	}
	json_t *o;
	bool lost = false;
	json_array_foreach(samples, i, o) {
		const char *sid = json_string_value(json_object_get(o, "session_id"));
		const char *cid = json_string_value(json_object_get(o, "container_id"));
		struct msession *s = sid ? mgr_find_session(m, sid) : NULL;
		if (!s || s->rec.status != SS_RUNNING || strcmp(s->rec.agent_id, agent_id) ||
		    (cid && s->rec.container_id[0] && strcmp(cid, s->rec.container_id)))
			continue;
		struct usage_sample u;
		if (!sample_parse(o, now, &u))
			continue;
		if (!lost && !round_add(&round, s->rec.id, &u)) {
			lost = true;
			log_warn("manager", "usage of agent %s's round not kept: out of memory", agent_id);
		}
		summary_set(s, &u);
		idle_update(m, s, &u, (int)inum(o, "app_conns"), now);
	}
	pthread_mutex_unlock(&m->mu);
	/* The round's sessions rendered again now, a few at a time under
	 * the lock: the first list request or stream after the round would
	 * otherwise render them all in one hold of the lock (1,000 sessions:
	 * milliseconds every request waits). Only then are the streams woken:
	 * live figures are news for them (the UI's bars). */
	for (size_t k = 0; k < round.n; k += MGR_RENDER_BATCH)
		mgr_sessions_render(m, (const char (*)[64])round.ids + k,
				    round.n - k < MGR_RENDER_BATCH ? round.n - k : MGR_RENDER_BATCH);
	pthread_mutex_lock(&m->mu);
	m->version++;
	pthread_cond_broadcast(&m->changed);
	pthread_mutex_unlock(&m->mu);
	/* Into the history, the whole round at once (one round trip to
	 * Redis), with the manager's lock released. */
	const char **ids = round.n ? malloc(round.n * sizeof(*ids)) : NULL;
	if (ids) {
		for (size_t k = 0; k < round.n; k++)
			ids[k] = round.ids[k];
		struct terr err = {0};
		if (m->usage_ops->push_round(m->usage, round.n, ids, round.s, &err) < 0)
			log_warn("manager", "usage of agent %s's sessions not kept: %s", agent_id, err.msg);
	} else if (round.n) {
		log_warn("manager", "usage of agent %s's round not kept: out of memory", agent_id);
	}
	free(ids);
	free(round.ids);
	free(round.s);
}

void mgr_usage_left_running(struct manager *m, struct msession *s)
{
	(void)m;
	/* The history stays for the detail page of an ended session until
	 * it ages out (mgr_usage_sweep); the live figures go. */
	s->usage_t = 0;
	s->idle_since_ms = 0;
	mgr_session_changed(s);
}

void mgr_usage_sweep(struct manager *m)
{
	m->usage_ops->expire(m->usage, util_now_ms());
}

void mgr_usage_exec(struct manager *m, const char *session_id, int delta)
{
	struct msession *s = mgr_find_session(m, session_id);
	if (!s)
		return;
	s->execs_running += delta;
	if (s->execs_running < 0)
		s->execs_running = 0;
	/* A running exec is activity; its end starts the idle clock anew. */
	s->idle_since_ms = 0;
	s->last_exec_ms = util_now_ms();
	mgr_session_changed(s);   /* its "idle" deadline */
}

void mgr_usage_session_json(struct manager *m, const struct msession *s, json_t *o)
{
	if (s->rec.status != SS_RUNNING)
		return;
	if (s->usage_t)
		json_object_set_new(o, "usage", json_pack("{s:f,s:f,s:o,s:I}", "cpu_pct", s->usage_cpu_pct, "mem_pct",
							  s->usage_mem_pct, "gpu_pct",
							  s->usage_gpu_pct >= 0 ? json_real(s->usage_gpu_pct) : json_null(),
							  "t", (json_int_t)s->usage_t));
	int64_t timeout_s, thr;
	idle_policy(m, s, &timeout_s, &thr);
	if (timeout_s > 0)
		json_object_set_new(o, "idle", json_pack("{s:I,s:o}", "timeout_s", (json_int_t)timeout_s, "deadline",
							 s->idle_since_ms ? json_integer(s->idle_since_ms + timeout_s * 1000)
									  : json_null()));
}

void mgr_usage_node_json(struct manager *m, const struct magent *a, json_t *o)
{
	(void)m;
	if (a->usage_t && a->alive)
		json_object_set_new(o, "usage", json_pack("{s:f,s:I,s:I}", "cpu_cores", a->usage_cpu, "mem_bytes",
							  (json_int_t)a->usage_mem, "t", (json_int_t)a->usage_t));
	json_t *gpus = json_object_get(o, "gpus");
	for (int i = 0; i < a->n_gpus && i < (int)json_array_size(gpus); i++) {
		json_t *g = json_array_get(gpus, (size_t)i);
		bool live = a->usage_t && a->alive;
		json_object_set_new(g, "util_pct", live && a->gpus[i].util_pct >= 0 ? json_real(a->gpus[i].util_pct)
										    : json_null());
		json_object_set_new(g, "mem_used_bytes", live ? json_integer(a->gpus[i].mem_used) : json_null());
	}
}

/* A sample as the API shows it, with each device's index and share from
 * the session's allocation. */
static json_t *sample_json(const struct mshare *shares, int n_shares, const struct usage_sample *u)
{
	json_t *gpus = json_array();
	for (int d = 0; d < u->n_gpus; d++) {
		const struct usage_gpu *g = &u->gpus[d];
		int index = -1;
		int64_t share_m = 0;
		for (int k = 0; k < n_shares; k++)
			if (!strcmp(shares[k].uuid, g->uuid)) {
				index = shares[k].index;
				share_m = shares[k].fgpu_m;
			}
		json_array_append_new(gpus, json_pack("{s:i,s:s,s:o,s:o,s:I,s:I}", "index", index, "uuid", g->uuid,
						      "share", jsonutil_milli(share_m), "util_pct",
						      g->util_pct >= 0 ? json_real(g->util_pct) : json_null(), "mem_bytes",
						      (json_int_t)g->mem_bytes, "mem_limit_bytes",
						      (json_int_t)g->mem_limit_bytes));
	}
	return json_pack("{s:I,s:f,s:f,s:I,s:I,s:o,s:I,s:I,s:I,s:I}", "t", (json_int_t)u->t, "cpu_cores", u->cpu_cores,
			 "cpu_pct", u->cpu_pct, "mem_bytes", (json_int_t)u->mem_bytes, "mem_limit_bytes",
			 (json_int_t)u->mem_limit_bytes, "gpus", gpus, "net_rx_bytes", (json_int_t)u->net_rx,
			 "net_tx_bytes", (json_int_t)u->net_tx, "blk_read_bytes", (json_int_t)u->blk_read,
			 "blk_write_bytes", (json_int_t)u->blk_write);
}

int mgr_session_stats(struct manager *m, const struct user_rec *u, const char *ref, int64_t since_ms,
		      json_t **out, struct terr *err)
{
	/* What the answer needs of the session, copied under the lock; the
	 * history is read after it (from Redis: a round trip). */
	char name[sizeof(((struct msession *)0)->rec.name)], id[sizeof(((struct msession *)0)->rec.id)];
	struct mshare shares[MGR_MAX_GPUS];
	int n_shares, period_ms;
	bool live;
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_resolve_session(m, ref, u);
	if (!s) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "no session named or with id '%s'", ref);
	}
	util_strlcpy(name, s->rec.name, sizeof(name));
	util_strlcpy(id, s->rec.id, sizeof(id));
	n_shares = s->n_shares;
	memcpy(shares, s->shares, sizeof(shares));
	live = s->rec.status == SS_RUNNING && s->usage_t;
	struct magent *a = s->rec.agent_id[0] ? mgr_find_agent(m, s->rec.agent_id) : NULL;
	period_ms = a && a->stats_period_ms ? a->stats_period_ms : STATS_INTERVAL_MS;
	pthread_mutex_unlock(&m->mu);

	struct usage_sample *hist = NULL;
	size_t n = 0;
	int rc = m->usage_ops->since(m->usage, id, since_ms, &hist, &n, err);
	if (rc < 0)
		return rc;
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, sample_json(shares, n_shares, &hist[i]));
	json_t *current = json_null();
	if (live) {
		/* The newest sample: the history's last when it reaches that
		 * far (no second read), else the store's. */
		struct usage_sample last;
		if (n > 0)
			current = sample_json(shares, n_shares, &hist[n - 1]);
		else if (m->usage_ops->last(m->usage, id, &last) == 0)
			current = sample_json(shares, n_shares, &last);
	}
	*out = json_pack("{s:s,s:s,s:i,s:I,s:o,s:o}", "session", name, "id", id, "period_ms", period_ms,
			 "retention_s", (json_int_t)mgr_usage_retention_s(m), "current", current, "history", arr);
	free(hist);
	return *out ? 0 : terr_set(err, ENOMEM, "out of memory");
}
