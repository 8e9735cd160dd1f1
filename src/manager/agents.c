/* Agents: the registry (registration, heartbeats, LOST detection), the
 * reconciliation of a (re)registered agent's containers with the sessions,
 * container-died events and image-list events, and the view of nodes. The
 * images themselves are the catalog's (images.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/redis.h"
#include "common/units.h"
#include "common/util.h"
#include "manager/state.h"

/* ---------- the registry ---------- */

struct magent *mgr_find_agent(struct manager *m, const char *id)
{
	return strmap_get(&m->agent_by_id, id);
}

struct mgpu *mgr_agent_gpu(struct magent *a, const char *uuid)
{
	for (int i = 0; i < a->n_gpus; i++)
		if (!strcmp(a->gpus[i].uuid, uuid))
			return &a->gpus[i];
	return NULL;
}

static int append_agent(struct manager *m, struct magent *a)
{
	if (m->n_agents == m->cap_agents) {
		size_t ncap = m->cap_agents ? m->cap_agents * 2 : 8;
		struct magent **n = realloc(m->agents, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		m->agents = n;
		m->cap_agents = ncap;
	}
	m->agents[m->n_agents++] = a;
	return 0;
}

/* Indexes an agent once its id is set. */
static int index_agent(struct manager *m, struct magent *a)
{
	return strmap_put(&m->agent_by_id, a->rec.id, a);
}

int mgr_agent_load(struct manager *m, const struct agent_rec *r)
{
	struct magent *a = calloc(1, sizeof(*a));
	if (!a || append_agent(m, a) < 0) {
		free(a);
		return -ENOMEM;
	}
	a->rec = *r;
	a->alive = false;   /* until it registers again */
	a->awaited = true;
	a->last_seen_mono = util_mono_ms();
	return index_agent(m, a);
}

void mgr_apply_fgpu_setting(struct manager *m)
{
	/* Capacity in the new unit; what running sessions hold counted anew
	 * in it from their physical shares (docs/scheduling.md, "Changing
	 * fgpu_per_device"). */
	for (size_t i = 0; i < m->n_agents; i++) {
		struct magent *a = m->agents[i];
		a->rec.capacity.fgpu_m = (int64_t)a->n_gpus * mgr_per_device_m(m);
	}
	mgr_recount_held(m);
	mgr_wake_scheduler(m);
}

void mgr_recount_held(struct manager *m)
{
	for (size_t i = 0; i < m->n_agents; i++) {
		struct magent *a = m->agents[i];
		memset(&a->used, 0, sizeof(a->used));
		a->n_sessions = 0;
		for (int d = 0; d < a->n_gpus; d++)
			a->gpus[d].used_m = 0;
	}
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		struct magent *a = s->rec.agent_id[0] ? mgr_find_agent(m, s->rec.agent_id) : NULL;
		if (!a || !session_status_holds(s->rec.status))
			continue;
		mgr_held_move(m, a, s, +1);
		a->n_sessions++;
	}
}

/* ---------- heartbeats in Redis ---------- */

static int64_t lost_limit_ms(const struct manager *m)
{
	return (int64_t)m->cfg.heartbeat_interval_ms * m->cfg.lost_after_heartbeats;
}

static void hb_key(const char *agent_id, char *out, size_t n)
{
	snprintf(out, n, REDIS_PREFIX "agent:%s:heartbeat", agent_id);
}

/* Called without the lock: the agent's heartbeat (its wall-clock time in
 * ms) in Redis, expiring when the agent would be LOST, so that any
 * manager on this Redis sees it alive. A failure only costs that: the
 * manager's memory still has the heartbeat. */
static void hb_to_redis(struct manager *m, const char *agent_id, int64_t at_ms)
{
	if (!m->redis)
		return;
	char key[STORE_ID_MAX + 64], val[32];
	hb_key(agent_id, key, sizeof(key));
	int len = snprintf(val, sizeof(val), "%lld", (long long)at_ms);
	struct terr e = {0};
	mgr_redis_outcome(m, redis_set(m->redis, key, val, (size_t)len, lost_limit_ms(m), &e), &e);
}

/* Called without the lock: the time of the agent's last heartbeat in
 * Redis (wall clock, ms); 0 when Redis has none (expired: older than the
 * LOST limit), -1 when Redis did not answer. */
static int64_t hb_from_redis(struct manager *m, const char *agent_id)
{
	char key[STORE_ID_MAX + 64], *val = NULL;
	hb_key(agent_id, key, sizeof(key));
	struct terr e = {0};
	int rc = redis_get(m->redis, key, &val, NULL, &e);
	mgr_redis_outcome(m, rc, &e);
	if (rc < 0)
		return -1;
	int64_t at = val ? atoll(val) : 0;
	free(val);
	return at > 0 ? at : 0;
}

void mgr_agents_heartbeats_from_redis(struct manager *m)
{
	if (!m->redis)
		return;
	int64_t now = util_now_ms();
	for (size_t i = 0; i < m->n_agents; i++) {
		struct magent *a = m->agents[i];
		int64_t at = hb_from_redis(m, a->rec.id);
		if (at < 0)
			return;   /* Redis is down: the log said so */
		if (at == 0)
			continue;
		if (at > a->rec.last_seen_ms)
			a->rec.last_seen_ms = at;
		log_info("manager", "agent %s sent a heartbeat %lld ms ago (Redis): alive, waiting for it to register again",
			 a->rec.id, (long long)(now - at));
	}
}

/* The RUNNING sessions of a node that stopped answering: LOST. Their
 * containers may well still run (a network cut), so they keep what they
 * hold; the agent's next registration re-adopts or ends them (reconcile).
 * Sessions on their way (SCHEDULED, PREPARING) and TERMINATING ones keep
 * their status: their job is redone by that same reconciliation. */
static void sessions_lost(struct manager *m, struct magent *a, const char *why)
{
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		if (s->rec.status != SS_RUNNING || s->start_inflight || strcmp(s->rec.agent_id, a->rec.id))
			continue;
		mgr_set_status(m, s, SS_LOST, "node %s lost: %s", a->rec.id, why);
	}
}

void mgr_mark_lost_agents(struct manager *m)
{
	int64_t now = util_mono_ms();
	int64_t limit = lost_limit_ms(m);
	/* The agents this manager heard nothing from in time; with Redis,
	 * those are asked about there first, without the lock: an agent may
	 * be sending its heartbeats to another manager. When Redis does not
	 * answer, this manager's memory decides, as without Redis. */
	if (m->redis) {
		size_t n = 0;
		char (*ids)[STORE_ID_MAX] = calloc(m->n_agents ? m->n_agents : 1, sizeof(*ids));
		for (size_t i = 0; ids && i < m->n_agents; i++) {
			struct magent *a = m->agents[i];
			if (!a->local && (a->alive || a->awaited) && now - a->last_seen_mono > limit)
				util_strlcpy(ids[n++], a->rec.id, sizeof(ids[0]));
		}
		int64_t *at = n ? calloc(n, sizeof(*at)) : NULL;
		if (at) {
			pthread_mutex_unlock(&m->mu);
			for (size_t i = 0; i < n; i++)
				at[i] = hb_from_redis(m, ids[i]);
			pthread_mutex_lock(&m->mu);
			int64_t wall = util_now_ms();
			now = util_mono_ms();
			for (size_t i = 0; i < n; i++) {
				struct magent *a = mgr_find_agent(m, ids[i]);
				if (!a || at[i] <= 0 || at[i] <= a->rec.last_seen_ms)
					continue;
				/* Heard by another manager: as fresh as that. */
				a->rec.last_seen_ms = at[i];
				a->last_seen_mono = now - (wall > at[i] ? wall - at[i] : 0);
			}
		}
		free(at);
		free(ids);
	}
	char why[96];
	for (size_t i = 0; i < m->n_agents; i++) {
		struct magent *a = m->agents[i];
		if (a->local || now - a->last_seen_mono <= limit)
			continue;
		if (a->awaited) {
			a->awaited = false;
			log_warn("manager", "agent %s is LOST: not registered %lld ms after the manager started",
				 a->rec.id, (long long)(now - a->last_seen_mono));
			snprintf(why, sizeof(why), "not registered %lld s after the manager started",
				 (long long)((now - a->last_seen_mono) / 1000));
			sessions_lost(m, a, why);
			continue;
		}
		if (!a->alive)
			continue;
		a->alive = false;
		log_warn("manager", "agent %s is LOST: no heartbeat for %lld ms", a->rec.id,
			 (long long)(now - a->last_seen_mono));
		snprintf(why, sizeof(why), "no heartbeat for %lld s", (long long)((now - a->last_seen_mono + 500) / 1000));
		sessions_lost(m, a, why);
		mgr_wake_scheduler(m);
	}
}

/* ---------- registration and reconciliation ---------- */

static int res_from_wire(json_t *o, struct res *r)
{
	if (!json_is_object(o))
		return -EINVAL;
	r->cpu_m = json_integer_value(json_object_get(o, "cpu_milli"));
	r->mem = json_integer_value(json_object_get(o, "mem"));
	r->fgpu_m = json_integer_value(json_object_get(o, "fgpu_milli"));
	return (r->cpu_m > 0 && r->mem > 0 && r->fgpu_m >= 0) ? 0 : -EINVAL;
}

static json_t *find_container(json_t *containers, const char *session_id)
{
	size_t i;
	json_t *c;
	json_array_foreach(containers, i, c) {
		const char *sid = json_string_value(json_object_get(c, "session_id"));
		if (sid && !strcmp(sid, session_id))
			return c;
	}
	return NULL;
}

/* After an agent (re)joins: make the store and its containers agree. */
static void reconcile(struct manager *m, struct magent *a, json_t *containers)
{
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		if (strcmp(s->rec.agent_id, a->rec.id) || s->start_inflight)
			continue;
		json_t *c = find_container(containers, s->rec.id);
		/* A start still under way on the agent (its answer went to the
		 * manager before this one): only a removal acts on it, which the
		 * agent carries out when the start ends; otherwise as if no
		 * container were there, as before. */
		if (c && json_is_true(json_object_get(c, "starting")) && !session_status_ending(s->rec.status))
			c = NULL;
		bool running = c && json_is_true(json_object_get(c, "running"));
		const char *cid = c ? json_string_value(json_object_get(c, "container_id")) : NULL;
		switch (s->rec.status) {
		case SS_SCHEDULED:
		case SS_PREPARING:
			if (running && mgr_session_is_cluster(s)) {
				/* A cluster session runs once all its containers do. */
				util_strlcpy(s->rec.container_id, cid, sizeof(s->rec.container_id));
				mgr_apps_set_endpoint(m, s, json_string_value(json_object_get(c, "app_endpoint")));
				if (s->rec.status == SS_SCHEDULED)
					mgr_set_status(m, s, SS_PREPARING, "container on node %s adopted after a restart",
						       a->rec.id);
				mgr_cluster_started(m, s, a->rec.id);
			} else if (running) {
				util_strlcpy(s->rec.container_id, cid, sizeof(s->rec.container_id));
				mgr_apps_set_endpoint(m, s, json_string_value(json_object_get(c, "app_endpoint")));
				mgr_set_status(m, s, SS_RUNNING, "running on node %s (adopted after a restart)", a->rec.id);
			} else {
				/* The start never completed: start it again. A
				 * half-made container is replaced by the agent. */
				if (s->rec.status == SS_PREPARING)
					mgr_set_status(m, s, SS_SCHEDULED, "placed on node %s; restarting an interrupted start",
						       a->rec.id);
				mgr_enqueue(m, JOB_START, s->rec.id);
			}
			break;
		case SS_LOST:
			if (running) {
				/* Its node is back and the container ran on. */
				util_strlcpy(s->rec.container_id, cid, sizeof(s->rec.container_id));
				mgr_apps_set_endpoint(m, s, json_string_value(json_object_get(c, "app_endpoint")));
				mgr_set_status(m, s, SS_RUNNING, "re-adopted: node %s is back and the container ran on",
					       a->rec.id);
				break;
			}
			/* It ended (or vanished) while the node was away: as a
			 * RUNNING one's would. */
			/* fall through */
		case SS_RUNNING:
			if (running) {
				util_strlcpy(s->rec.container_id, cid, sizeof(s->rec.container_id));
				/* Docker may have published the app port anew (the
				 * node restarted): the agent says where it is now. */
				mgr_apps_set_endpoint(m, s, json_string_value(json_object_get(c, "app_endpoint")));
				mgr_persist(m, s);
			} else if (c) {
				int code = (int)json_integer_value(json_object_get(c, "exit_code"));
				bool oom = json_is_true(json_object_get(c, "oom_killed"));
				char why[300], killed[128];
				if (!oom && agent_signal_words(code, killed, sizeof(killed)))
					snprintf(why, sizeof(why), "container was %s while node %s was away (exit code %d)",
						 killed, a->rec.id, code);
				else
					snprintf(why, sizeof(why), "container %s while node %s was away (exit code %d)",
						 oom ? "was OOM-killed" : "ended", a->rec.id, code);
				mgr_session_ended(m, s, code, oom, why);
			} else {
				s->rec.container_id[0] = '\0';
				mgr_set_status(m, s, SS_ERROR, "container vanished while node %s was away", a->rec.id);
			}
			break;
		case SS_TERMINATING:
			if (c)
				mgr_enqueue_destroy(m, s);
			else
				mgr_set_status(m, s, SS_TERMINATED, "terminated; container gone");
			break;
		case SS_PREEMPTED:
			if (c)
				mgr_enqueue_destroy(m, s);
			else
				mgr_session_preempt_done(m, s);
			break;
		default:
			break;
		}
	}
	/* Containers of this agent that no live session owns: remove them, so
	 * nothing runs that the cluster does not account for. */
	size_t i;
	json_t *c;
	json_array_foreach(containers, i, c) {
		const char *sid = json_string_value(json_object_get(c, "session_id"));
		if (!sid)
			continue;
		struct msession *s = mgr_find_session(m, sid);
		/* Ended containers are kept for their logs until the session is
		 * removed: ERROR ones, and those of finished batch sessions. */
		if (s && (!session_status_final(s->rec.status) ||
			  ((s->rec.status == SS_ERROR || (s->rec.status == SS_TERMINATED && mgr_session_is_batch(s))) &&
			   !s->rec.removed)))
			continue;
		if (!s) {
			log_warn("manager", "container of unknown session %s on %s: left alone", sid, a->rec.id);
			continue;
		}
		if (!s->destroy_queued) {
			util_strlcpy(s->rec.container_id,
				     json_string_value(json_object_get(c, "container_id")) ?: "",
				     sizeof(s->rec.container_id));
			mgr_enqueue_destroy(m, s);
		}
	}
}

int mgr_agent_register(struct manager *m, json_t *desc, const struct agent_link_ops *link,
		       void *link_ctx, bool local, json_t **reply, struct terr *err)
{
	const char *id = json_string_value(json_object_get(desc, "id"));
	const char *url = json_string_value(json_object_get(desc, "url"));
	const char *version = json_string_value(json_object_get(desc, "version"));
	json_t *containers = json_object_get(desc, "containers");
	struct res cap;
	if (!id)
		return terr_set(err, EINVAL, "agent registration needs an id");
	if (model_validate_name(id, "agent id", err) < 0)
		return -EINVAL;
	json_t *wire_cap = json_object_get(desc, "capacity");
	if (json_is_object(wire_cap) && !json_object_get(wire_cap, "fgpu_milli"))
		json_object_set_new(wire_cap, "fgpu_milli", json_integer(0));
	if (res_from_wire(wire_cap, &cap) < 0)
		return terr_set(err, EINVAL, "agent %s registration needs a positive capacity", id);
	if (!json_is_array(containers))
		return terr_set(err, EINVAL, "agent %s registration needs a containers array", id);

	/* Only this installation's containers, and those made before
	 * containers carried its id: an agent that has not learnt the id yet
	 * (its first registration) lists other installations' too. */
	json_t *ours = json_array();
	if (!ours)
		return terr_set(err, ENOMEM, "out of memory");
	size_t ci;
	json_t *cv;
	json_array_foreach(containers, ci, cv) {
		const char *cluster = json_string_value(json_object_get(cv, "cluster_id"));
		if (!cluster || !*cluster || !strcmp(cluster, m->cluster_id))
			json_array_append(ours, cv);
	}
	containers = ours;

	pthread_mutex_lock(&m->mu);
	struct magent *a = mgr_find_agent(m, id);
	if (!a) {
		a = calloc(1, sizeof(*a));
		if (!a || append_agent(m, a) < 0) {
			free(a);
			pthread_mutex_unlock(&m->mu);
			json_decref(ours);
			return terr_set(err, ENOMEM, "out of memory");
		}
		util_strlcpy(a->rec.id, id, sizeof(a->rec.id));
		a->rec.registered_ms = util_now_ms();
		if (index_agent(m, a) < 0) {
			pthread_mutex_unlock(&m->mu);
			json_decref(ours);
			return terr_set(err, ENOMEM, "out of memory");
		}
	}
	if (a->link && a->link_ctx != link_ctx) {
		struct retired_link *r = calloc(1, sizeof(*r));
		if (r) {
			r->ops = a->link;
			r->ctx = a->link_ctx;
			r->next = m->retired;
			m->retired = r;
		}
	}
	a->link = link;
	a->link_ctx = link_ctx;
	a->local = local;
	a->alive = true;
	a->awaited = false;
	a->last_seen_mono = util_mono_ms();
	a->rec.capacity = cap;
	/* Devices: fGPU capacity follows the cluster setting; usage is what the
	 * sessions placed there hold. */
	a->n_gpus = 0;   /* rebuilt below, usage recounted from the sessions */
	a->mock_gpus = json_is_true(json_object_get(desc, "mock_gpus"));
	size_t gi;
	json_t *gv;
	json_array_foreach(json_object_get(desc, "gpus"), gi, gv) {
		if (a->n_gpus >= MGR_MAX_GPUS)
			break;
		struct mgpu *g = &a->gpus[a->n_gpus++];
		memset(g, 0, sizeof(*g));
		util_strlcpy(g->uuid, json_string_value(json_object_get(gv, "uuid")) ?: "", sizeof(g->uuid));
		util_strlcpy(g->name, json_string_value(json_object_get(gv, "name")) ?: "", sizeof(g->name));
		g->memory = json_integer_value(json_object_get(gv, "memory"));
		g->sms = (int)json_integer_value(json_object_get(gv, "sms"));
		g->context_overhead = json_integer_value(json_object_get(gv, "context_overhead"));
	}
	a->rec.capacity.fgpu_m = (int64_t)a->n_gpus * mgr_per_device_m(m);
	/* Its images (an agent of an earlier version sends none: unknown,
	 * asked when the catalog is read). */
	mgr_agent_set_images(a, json_object_get(desc, "images"));
	for (size_t si = 0; si < m->n_sessions; si++) {
		struct msession *s = m->sessions[si];
		if (!strcmp(s->rec.agent_id, a->rec.id) && session_status_holds(s->rec.status))
			mgr_shares_move(m, a, s, +1);
	}
	util_strlcpy(a->rec.url, url ? url : (local ? "inproc:" : ""), sizeof(a->rec.url));
	util_strlcpy(a->rec.version, version ? version : "", sizeof(a->rec.version));
	a->rec.last_seen_ms = util_now_ms();
	struct terr serr = {0};
	if (m->so->agent_put(m->store, &a->rec, &serr) < 0)
		log_error("manager", "cannot save agent %s: %s", id, serr.msg);
	log_info("manager", "agent %s registered (%s), %zu containers", id, a->rec.url, json_array_size(containers));
	reconcile(m, a, containers);
	mgr_wake_scheduler(m);
	int64_t seen = a->rec.last_seen_ms;
	pthread_mutex_unlock(&m->mu);
	json_decref(ours);
	if (!local)
		hb_to_redis(m, id, seen);
	/* The agent labels what it starts with cluster_id from now on. */
	if (reply)
		*reply = json_pack("{s:i,s:s}", "heartbeat_interval_ms", m->cfg.heartbeat_interval_ms,
				   "cluster_id", m->cluster_id);
	return 0;
}

int mgr_agent_register_remote(struct manager *m, json_t *desc, json_t **reply, struct terr *err)
{
	const char *url = json_string_value(json_object_get(desc, "url"));
	if (!url || strncmp(url, "http://", 7))
		return terr_set(err, EINVAL, "agent url must be an http:// URL the manager can reach");
	void *lctx = link_remote_new(url, m->cfg.cluster_secret);
	if (!lctx)
		return terr_set(err, ENOMEM, "out of memory");
	int rc = mgr_agent_register(m, desc, &link_remote_ops, lctx, false, reply, err);
	if (rc < 0)
		link_remote_ops.release(lctx);
	return rc;
}

int mgr_agent_heartbeat(struct manager *m, const char *agent_id, json_t *stats, json_t **reply, struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	struct magent *a = mgr_find_agent(m, agent_id);
	if (!a || !a->link) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "agent %s is not registered; register first", agent_id);
	}
	if (!a->alive) {
		/* Back from LOST: its containers may have changed meanwhile; it
		 * must register again so they are reconciled. */
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "agent %s was LOST; register again", agent_id);
	}
	a->last_seen_mono = util_mono_ms();
	int64_t at = a->rec.last_seen_ms = util_now_ms();
	pthread_mutex_unlock(&m->mu);
	hb_to_redis(m, agent_id, at);
	/* A round of live usage rides on the heartbeat (agent/uplink.c). */
	if (json_is_object(stats))
		mgr_usage_event(m, agent_id, stats);
	*reply = json_pack("{s:i}", "heartbeat_interval_ms", m->cfg.heartbeat_interval_ms);
	return 0;
}

/* "the 32 MiB memory limit" */
static void mem_limit_words(const struct msession *s, char *buf, size_t n)
{
	char size[32];
	units_format_size(s->rec.req.mem, size, sizeof(size));
	snprintf(buf, n, "the %s memory limit", size);
}

void mgr_session_ended(struct manager *m, struct msession *s, int exit_code, bool oom_killed,
		       const char *reason)
{
	s->rec.has_exit_code = true;
	s->rec.exit_code = exit_code;
	if (!mgr_session_is_batch(s)) {
		mgr_set_status(m, s, SS_ERROR, "%s", reason ? reason : "container ended by itself");
		return;
	}
	/* A batch session is its command: the runner exits with the
	 * command's status (128+N when a signal N ended it). */
	if (exit_code == 0) {
		mgr_set_status(m, s, SS_TERMINATED, "batch command finished (exit code 0)");
		return;
	}
	char limit[64];
	mem_limit_words(s, limit, sizeof(limit));
	bool oom = oom_killed || s->rec.oom_kills > 0;
	if (oom && exit_code == 128 + 9)
		mgr_set_status(m, s, SS_ERROR, "batch command was OOM-killed (a process exceeded %s), exit code %d",
			       limit, exit_code);
	else if (oom)
		mgr_set_status(m, s, SS_ERROR, "batch command failed with exit code %d (a process was OOM-killed "
			       "for exceeding %s)", exit_code, limit);
	else
		mgr_set_status(m, s, SS_ERROR, "batch command failed with exit code %d", exit_code);
}

/* Words for the kills no history line has told yet (rec.oom_kills less
 * oom_noted) into buf; false when there are none. */
static bool oom_words(const struct msession *s, char *buf, size_t n)
{
	int64_t total = s->rec.oom_kills, added = total - s->oom_noted;
	if (added <= 0)
		return false;
	char limit[64], all[48] = "";
	mem_limit_words(s, limit, sizeof(limit));
	if (total > added)
		snprintf(all, sizeof(all), " (%lld in all)", (long long)total);
	if (added == 1)
		snprintf(buf, n, "a process was killed for exceeding %s%s", limit, all);
	else
		snprintf(buf, n, "%lld processes were killed for exceeding %s%s", (long long)added, limit, all);
	return true;
}

void mgr_oom_flush(struct manager *m, struct msession *s)
{
	char words[200];
	if (!oom_words(s, words, sizeof(words)))
		return;
	s->oom_noted = s->rec.oom_kills;
	s->oom_noted_ms = util_mono_ms();
	mgr_session_note(m, s, "%s", words);
}

/* An agent counted OOM kills in a session's container: `total` is its
 * cgroup's count so far, so a repeated or late report adds nothing. The
 * session keeps its status: its main process may well live on. A line
 * in its history at most once per MGR_OOM_NOTE_WINDOW_MS; the kills in
 * between are counted (oom_kills, status_info) and told together by the
 * next line. */
static void session_oom(struct manager *m, struct msession *s, int64_t total)
{
	if (total <= s->rec.oom_kills)
		return;
	s->rec.oom_kills = total;
	int64_t now = util_mono_ms();
	if (!s->oom_noted_ms || now - s->oom_noted_ms >= MGR_OOM_NOTE_WINDOW_MS) {
		mgr_oom_flush(m, s);
		return;
	}
	char words[200];
	oom_words(s, words, sizeof(words));
	snprintf(s->rec.status_info, sizeof(s->rec.status_info), "%s so far", words);
	m->version++;
	mgr_persist(m, s);
	pthread_cond_broadcast(&m->changed);
}

void mgr_agent_event(struct manager *m, const char *agent_id, json_t *event)
{
	const char *kind = json_string_value(json_object_get(event, "event"));
	if (kind && !strcmp(kind, AGENT_EVENT_STATS)) {
		mgr_usage_event(m, agent_id, event);
		return;
	}
	if (kind && !strcmp(kind, AGENT_EVENT_IMAGES)) {
		pthread_mutex_lock(&m->mu);
		struct magent *a = mgr_find_agent(m, agent_id);
		/* Without a list (too large to send): unknown, fetched when the
		 * catalog is next read. */
		if (a)
			mgr_agent_set_images(a, json_object_get(event, "images"));
		pthread_mutex_unlock(&m->mu);
		return;
	}
	const char *sid = json_string_value(json_object_get(event, "session_id"));
	const char *cid = json_string_value(json_object_get(event, "container_id"));
	const char *reason = json_string_value(json_object_get(event, "reason"));
	const char *what = json_string_value(json_object_get(event, "event"));
	if (!sid)
		return;
	if (what && !strcmp(what, AGENT_EVENT_PROGRESS)) {
		mgr_pull_progress_event(m, agent_id, event);
		return;
	}
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_find_session(m, sid);
	bool ours = s && !strcmp(s->rec.agent_id, agent_id) &&
		    (!cid || !s->rec.container_id[0] || !strcmp(cid, s->rec.container_id));
	if (ours && what && !strcmp(what, "oom")) {
		/* Counted while the container lives, ended or not: a batch
		 * command's last kill may arrive just after its death. */
		json_t *n = json_object_get(event, "oom_kills");
		if (!json_is_integer(n)) {
		} else if (session_status_final(s->rec.status)) {
			/* Its end already says why (status_info is kept). */
			if (json_integer_value(n) > s->rec.oom_kills) {
				s->rec.oom_kills = json_integer_value(n);
				mgr_persist(m, s);
			}
		} else if (s->rec.status != SS_PENDING && s->rec.status != SS_CANCELLED) {
			session_oom(m, s, json_integer_value(n));
		}
	} else if (ours && (s->rec.status == SS_RUNNING || s->rec.status == SS_LOST || s->rec.status == SS_PREPARING)) {
		mgr_session_ended(m, s, (int)json_integer_value(json_object_get(event, "exit_code")),
				  json_is_true(json_object_get(event, "oom_killed")), reason);
	}
	pthread_mutex_unlock(&m->mu);
}

static void local_agent_event(void *ud, const char *agent_id, json_t *event)
{
	struct manager *m = ud;
	const char *kind = json_string_value(json_object_get(event, "event"));
	if (kind && !strcmp(kind, AGENT_EVENT_STATS)) {
		/* The in-process agent sends no heartbeats: its stats round,
		 * every stats_interval_ms whether sessions run or not, is its
		 * sign of life, and what last_heartbeat shows for it. */
		pthread_mutex_lock(&m->mu);
		struct magent *a = mgr_find_agent(m, agent_id);
		if (a && a->local) {
			a->rec.last_seen_ms = util_now_ms();
			a->last_seen_mono = util_mono_ms();
		}
		pthread_mutex_unlock(&m->mu);
	}
	mgr_agent_event(m, agent_id, event);
}

int manager_attach_local_agent(struct manager *m, struct agent *a, struct terr *err)
{
	json_t *desc;
	agent_set_cluster_id(a, m->cluster_id);
	mgr_settings_attach_local(m, a);
	int rc = agent_describe(a, &desc, err);
	if (rc < 0)
		return rc;
	rc = mgr_agent_register(m, desc, &link_local_ops, a, true, NULL, err);
	json_decref(desc);
	if (rc < 0)
		return rc;
	return agent_watch_start(a, local_agent_event, m, err);
}

/* ---------- views ---------- */

static json_t *node_json_base(struct manager *m, const struct magent *a)
{
	int64_t per_dev = mgr_per_device_m(m);
	json_t *gpus = json_array();
	for (int i = 0; i < a->n_gpus; i++)
		json_array_append_new(gpus, json_pack("{s:i,s:s,s:s,s:I,s:i,s:I,s:o,s:o}", "index", i,
			"uuid", a->gpus[i].uuid, "name", a->gpus[i].name, "memory", (json_int_t)a->gpus[i].memory,
			"sms", a->gpus[i].sms, "context_overhead", (json_int_t)a->gpus[i].context_overhead,
			"fgpu_capacity", jsonutil_milli(per_dev), "fgpu_used", jsonutil_milli(a->gpus[i].used_m)));
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:i,s:o,s:o,s:b}",
		"id", a->rec.id, "status", a->alive ? "ALIVE" : "LOST", "url", a->rec.url,
		"version", a->rec.version, "capacity", mgr_res_json(&a->rec.capacity),
		"used", mgr_res_json(&a->used), "sessions", a->n_sessions,
		"last_heartbeat", mgr_time_json(a->rec.last_seen_ms), "gpus", gpus, "mock_gpus", a->mock_gpus);
	/* Drained (nodes_admin.c): nothing new is placed on it. */
	json_object_set_new(o, "schedulable", json_boolean(!mgr_node_drained(m, a->rec.id)));
	json_object_set_new(o, "group", json_string(mgr_node_group(m, a->rec.id)));
	return o;
}

static json_t *node_json(struct manager *m, const struct magent *a)
{
	json_t *o = node_json_base(m, a);
	if (o)
		mgr_usage_node_json(m, a, o);
	return o;
}

json_t *mgr_nodes_json(struct manager *m)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < m->n_agents; i++)
		json_array_append_new(arr, node_json(m, m->agents[i]));
	return arr;
}

/* A kept text replaced by a new rendering unless the bytes are the same:
 * then the old text (and pointer) stays, and streams see no change. */
static void keep_text(struct mtext **kept, char *text)
{
	if (text && *kept && strlen(text) == (*kept)->len && !memcmp(text, (*kept)->s, (*kept)->len)) {
		free(text);
		return;
	}
	struct mtext *t = mtext_new(text);
	if (t) {
		mtext_unref(*kept);
		*kept = t;
	}
}

struct mtext *mgr_nodes_kept(struct manager *m, bool admin)
{
	if (m->nodes_text_ver != m->version || !m->nodes_text[0] || !m->nodes_text[1]) {
		/* The users' view has no live figures and no heartbeat times:
		 * a stats round or a heartbeat changes nothing a user's stream
		 * shows, so it is not woken for every round of every node
		 * (admins see the figures on the Nodes page). */
		json_t *users = json_array(), *admins = json_array();
		for (size_t i = 0; i < m->n_agents; i++) {
			json_array_append_new(admins, node_json(m, m->agents[i]));
			json_t *o = node_json_base(m, m->agents[i]);
			json_object_del(o, "last_heartbeat");
			json_array_append_new(users, o);
		}
		keep_text(&m->nodes_text[0], jsonutil_dump(users));
		keep_text(&m->nodes_text[1], jsonutil_dump(admins));
		json_decref(users);
		json_decref(admins);
		m->nodes_text_ver = m->version;
	}
	return mtext_ref(m->nodes_text[admin ? 1 : 0]);
}

json_t *mgr_nodes_list(struct manager *m)
{
	pthread_mutex_lock(&m->mu);
	json_t *arr = mgr_nodes_json(m);
	pthread_mutex_unlock(&m->mu);
	return arr;
}
