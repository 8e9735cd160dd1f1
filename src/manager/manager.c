/* Manager core: the live state (sessions, agents, users) in memory under
 * one mutex, written through to the store on every change; the scheduler
 * thread; the dispatch workers that talk to agents; agent registration and
 * reconciliation after restarts. */
#include "manager/manager.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/conf.h"
#include "common/jsonutil.h"
#include "common/log.h"
#include "common/sign.h"
#include "common/util.h"
#include "manager/internal.h"
#include "manager/validate.h"
#include "auth/pwhash.h"

#define ADMIN_EMAIL "admin@tessera.local"
#define SAFETY_PASS_MS 1000

/* ---------- lookups ---------- */

struct msession *mgr_find_session(struct manager *m, const char *id)
{
	return strmap_get(&m->session_by_id, id);
}

struct msession *mgr_resolve_session(struct manager *m, const char *ref, const struct user_rec *user)
{
	struct msession *active = NULL, *any = NULL;
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		if (!user->is_admin && strcmp(s->rec.owner_id, user->id))
			continue;
		if (!strcmp(s->rec.id, ref))
			return s;
		if (strcmp(s->rec.name, ref))
			continue;
		/* Newest wins: later sessions come later in seq order. */
		any = s;
		if (!session_status_final(s->rec.status))
			active = s;
	}
	return active ? active : any;
}

struct magent *mgr_find_agent(struct manager *m, const char *id)
{
	return strmap_get(&m->agent_by_id, id);
}

const struct user_rec *mgr_find_user(struct manager *m, const char *id)
{
	for (size_t i = 0; i < m->n_users; i++)
		if (!strcmp(m->users[i].id, id))
			return &m->users[i];
	return NULL;
}

const struct user_rec *mgr_find_user_by_key(struct manager *m, const char *access_key)
{
	for (size_t i = 0; i < m->n_users; i++)
		if (!strcmp(m->users[i].access_key, access_key))
			return &m->users[i];
	return NULL;
}

/* ---------- fGPU ---------- */

int64_t mgr_per_device_m(const struct manager *m)
{
	return m->settings.fgpu_per_device * 1000;
}

void mgr_shares_to_json(struct msession *s)
{
	free(s->rec.alloc_json);
	s->rec.alloc_json = NULL;
	if (s->n_shares == 0)
		return;
	json_t *arr = json_array();
	for (int i = 0; i < s->n_shares; i++)
		json_array_append_new(arr, json_pack("{s:i,s:s,s:I}", "index", s->shares[i].index,
						     "uuid", s->shares[i].uuid, "fgpu_milli",
						     (json_int_t)s->shares[i].fgpu_m));
	s->rec.alloc_json = jsonutil_dump(arr);
	json_decref(arr);
}

void mgr_shares_from_json(struct msession *s)
{
	s->n_shares = 0;
	json_t *arr = s->rec.alloc_json ? json_loads(s->rec.alloc_json, 0, NULL) : NULL;
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v) {
		if (s->n_shares >= MGR_MAX_GPUS)
			break;
		struct mshare *sh = &s->shares[s->n_shares++];
		sh->index = (int)json_integer_value(json_object_get(v, "index"));
		util_strlcpy(sh->uuid, json_string_value(json_object_get(v, "uuid")) ?: "", sizeof(sh->uuid));
		sh->fgpu_m = json_integer_value(json_object_get(v, "fgpu_milli"));
	}
	json_decref(arr);
}

static struct mgpu *agent_gpu(struct magent *a, const char *uuid)
{
	for (int i = 0; i < a->n_gpus; i++)
		if (!strcmp(a->gpus[i].uuid, uuid))
			return &a->gpus[i];
	return NULL;
}

/* Moves a session's device shares in or out of its agent's devices. */
static void shares_move(struct magent *a, const struct msession *s, int sign)
{
	for (int i = 0; i < s->n_shares; i++) {
		struct mgpu *g = agent_gpu(a, s->shares[i].uuid);
		if (g)
			g->used_m += sign * s->shares[i].fgpu_m;
	}
}

void mgr_apply_fgpu_setting(struct manager *m)
{
	for (size_t i = 0; i < m->n_agents; i++) {
		struct magent *a = m->agents[i];
		a->rec.capacity.fgpu_m = (int64_t)a->n_gpus * mgr_per_device_m(m);
	}
}

/* ---------- state changes ---------- */

void mgr_persist(struct manager *m, struct msession *s)
{
	struct terr err = {0};
	if (m->so->session_put(m->store, &s->rec, &err) < 0)
		log_error("manager", "cannot save session %s: %s", s->rec.name, err.msg);
}

void mgr_wake_scheduler(struct manager *m)
{
	m->sched_dirty = true;
	pthread_cond_signal(&m->wake);
}

void mgr_set_status(struct manager *m, struct msession *s, enum session_status st, const char *fmt, ...)
{
	enum session_status old = s->rec.status;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->rec.status_info, sizeof(s->rec.status_info), fmt, ap);
	va_end(ap);
	s->rec.status = st;
	int64_t now = util_now_ms();
	if (st == SS_RUNNING && !s->rec.started_ms)
		s->rec.started_ms = now;
	if (session_status_final(st) && !s->rec.terminated_ms)
		s->rec.terminated_ms = now;

	/* Resources follow the state: held from placement until the container
	 * is gone. The one place that moves them. */
	struct magent *a = s->rec.agent_id[0] ? mgr_find_agent(m, s->rec.agent_id) : NULL;
	if (a && !session_status_holds(old) && session_status_holds(st)) {
		res_add(&a->used, &s->rec.req);
		shares_move(a, s, +1);
		a->n_sessions++;
	} else if (a && session_status_holds(old) && !session_status_holds(st)) {
		res_sub(&a->used, &s->rec.req);
		shares_move(a, s, -1);
		a->n_sessions--;
		mgr_wake_scheduler(m);
	}
	m->version++;

	mgr_persist(m, s);
	if (old != st) {
		struct history_rec h = {.status = st, .at_ms = now};
		util_strlcpy(h.info, s->rec.status_info, sizeof(h.info));
		struct terr err = {0};
		if (m->so->history_add(m->store, s->rec.id, &h, &err) < 0)
			log_error("manager", "cannot save history of %s: %s", s->rec.name, err.msg);
		log_info("manager", "session %s (%.8s): %s -> %s: %s", s->rec.name, s->rec.id,
			 session_status_name(old), session_status_name(st), s->rec.status_info);
	}
	pthread_cond_broadcast(&m->changed);
}

void mgr_enqueue(struct manager *m, enum job_type type, const char *session_id)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j) {
		log_error("manager", "out of memory queueing a job for %s", session_id);
		return;
	}
	j->type = type;
	util_strlcpy(j->session_id, session_id, sizeof(j->session_id));
	if (m->jobs_tail)
		m->jobs_tail->next = j;
	else
		m->jobs_head = j;
	m->jobs_tail = j;
	pthread_cond_signal(&m->jobs_cv);
}

static int append_session(struct manager *m, struct msession *s)
{
	if (m->n_sessions == m->cap_sessions) {
		size_t ncap = m->cap_sessions ? m->cap_sessions * 2 : 64;
		struct msession **n = realloc(m->sessions, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		m->sessions = n;
		m->cap_sessions = ncap;
	}
	if (strmap_put(&m->session_by_id, s->rec.id, s) < 0)
		return -ENOMEM;
	m->sessions[m->n_sessions++] = s;
	return 0;
}

int mgr_add_sessions(struct manager *m, struct msession **news, size_t n, struct terr *err)
{
	int rc = m->so->begin(m->store, err);
	if (rc < 0)
		return rc;
	int64_t now = util_now_ms();
	for (size_t i = 0; i < n; i++) {
		struct msession *s = news[i];
		s->rec.seq = m->next_seq + (int64_t)i;
		s->rec.status = SS_PENDING;
		s->rec.created_ms = now;
		util_strlcpy(s->rec.status_info, "waiting to be scheduled", sizeof(s->rec.status_info));
		struct history_rec h = {.status = SS_PENDING, .at_ms = now};
		util_strlcpy(h.info, "created", sizeof(h.info));
		if ((rc = m->so->session_put(m->store, &s->rec, err)) < 0 ||
		    (rc = m->so->history_add(m->store, s->rec.id, &h, err)) < 0) {
			m->so->rollback(m->store);
			return rc;
		}
	}
	if ((rc = m->so->commit(m->store, err)) < 0) {
		m->so->rollback(m->store);
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		if (append_session(m, news[i]) < 0)
			return terr_set(err, ENOMEM, "out of memory");
		log_info("manager", "session %s (%.8s) created PENDING", news[i]->rec.name, news[i]->rec.id);
	}
	m->next_seq += (int64_t)n;
	mgr_wake_scheduler(m);
	pthread_cond_broadcast(&m->changed);
	return 0;
}

void mgr_delete_session(struct manager *m, struct msession *s, const char *by)
{
	switch (s->rec.status) {
	case SS_PENDING:
		mgr_set_status(m, s, SS_CANCELLED, "cancelled by %s while waiting", by);
		mgr_wake_scheduler(m);  /* the queue head may have changed */
		break;
	case SS_SCHEDULED:
	case SS_PREPARING:
	case SS_RUNNING:
		mgr_set_status(m, s, SS_TERMINATING, "terminating on request of %s", by);
		if (!s->destroy_queued) {
			s->destroy_queued = true;
			mgr_enqueue(m, JOB_DESTROY, s->rec.id);
		}
		break;
	case SS_ERROR:
		/* An ended container is kept for its logs; removing the session
		 * removes it. */
		if (s->rec.container_id[0] && !s->destroy_queued) {
			s->destroy_queued = true;
			mgr_enqueue(m, JOB_DESTROY, s->rec.id);
		}
		break;
	default:
		break;
	}
}

/* ---------- scheduler ---------- */

static void mark_lost_agents(struct manager *m)
{
	int64_t now = util_mono_ms();
	int64_t limit = (int64_t)m->cfg.heartbeat_interval_ms * m->cfg.lost_after_heartbeats;
	for (size_t i = 0; i < m->n_agents; i++) {
		struct magent *a = m->agents[i];
		if (a->local || !a->alive || now - a->last_seen_mono <= limit)
			continue;
		a->alive = false;
		log_warn("manager", "agent %s is LOST: no heartbeat for %lld ms", a->rec.id,
			 (long long)(now - a->last_seen_mono));
		mgr_wake_scheduler(m);
	}
}

/* Retries destroys that failed earlier (agent unreachable at the time). */
static void retry_stuck_terminations(struct manager *m)
{
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		if (s->rec.status != SS_TERMINATING || s->destroy_queued || s->start_inflight)
			continue;
		struct magent *a = mgr_find_agent(m, s->rec.agent_id);
		if (a && !a->alive)
			continue;
		s->destroy_queued = true;
		mgr_enqueue(m, JOB_DESTROY, s->rec.id);
	}
}

/* One scheduling pass over the snapshot of the queue, the agents (with
 * their devices) and the users; decisions are committed in one
 * transaction. Called with mu held. */
static void schedule_pass(struct manager *m)
{
	size_t n_pending = 0;
	for (size_t i = 0; i < m->n_sessions; i++)
		n_pending += m->sessions[i]->rec.status == SS_PENDING;
	if (n_pending == 0)
		return;
	size_t na = m->n_agents, nu = m->n_users;
	struct sched_request *reqs = calloc(n_pending, sizeof(*reqs));
	struct msession **pend = calloc(n_pending, sizeof(*pend));
	struct sched_agent *ags = calloc(na ? na : 1, sizeof(*ags));
	struct sched_device *devs = calloc(na ? na * MGR_MAX_GPUS : 1, sizeof(*devs));
	struct sched_user *users = calloc(nu ? nu : 1, sizeof(*users));
	struct sched_placement *out = calloc(n_pending, sizeof(*out));
	char (*reasons)[SCHED_REASON_MAX] = calloc(n_pending, SCHED_REASON_MAX);
	if (!reqs || !pend || !ags || !devs || !users || !out || !reasons)
		goto done;
	int64_t per_dev = mgr_per_device_m(m);
	for (size_t u = 0; u < nu; u++) {
		users[u].id = m->users[u].id;
		mgr_user_policy(m, m->users[u].email, &users[u].max_sessions, &users[u].max);
	}
	size_t k = 0;
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		size_t u = 0;
		while (u < nu && strcmp(m->users[u].id, s->rec.owner_id))
			u++;
		if (u == nu)
			continue;   /* owner gone: cannot happen, users are never deleted */
		if (session_status_holds(s->rec.status)) {
			res_add(&users[u].used, &s->rec.req);
			users[u].sessions++;
		}
		if (s->rec.status != SS_PENDING)
			continue;
		pend[k] = s;
		reqs[k].session_id = s->rec.id;
		reqs[k].name = s->rec.name;
		reqs[k].req = s->rec.req;
		reqs[k].user = u;
		reqs[k].seq = s->rec.seq;
		reqs[k].failed_passes = s->failed_passes;
		k++;
	}
	for (size_t i = 0; i < na; i++) {
		struct magent *a = m->agents[i];
		ags[i].id = a->rec.id;
		ags[i].alive = a->alive;
		ags[i].capacity = a->rec.capacity;
		ags[i].free = a->rec.capacity;
		res_sub(&ags[i].free, &a->used);
		ags[i].devs = &devs[i * MGR_MAX_GPUS];
		ags[i].n_devs = (size_t)a->n_gpus;
		for (int d = 0; d < a->n_gpus; d++)
			ags[i].devs[d].free_m = per_dev - a->gpus[d].used_m;
	}
	struct sched_params params = {
		.selector = m->settings.selector,
		.queue = m->settings.queue,
		.per_device_m = per_dev,
		.quantum_m = m->settings.fgpu_quantum_m,
		.fifo_skip_after = m->settings.fifo_skip_after,
	};
	ssize_t blocked = -1;
	size_t placed = sched_plan(&params, ags, na, users, reqs, k, out, reasons, &blocked);

	struct terr err = {0};
	bool txn = m->so->begin(m->store, &err) == 0;
	for (size_t i = 0; i < placed; i++) {
		struct msession *s = pend[out[i].request];
		struct magent *a = m->agents[out[i].agent];
		s->n_shares = 0;
		for (size_t d = 0; d < out[i].n_shares; d++) {
			struct mshare *sh = &s->shares[s->n_shares++];
			sh->index = (int)out[i].shares[d].device;
			util_strlcpy(sh->uuid, a->gpus[sh->index].uuid, sizeof(sh->uuid));
			sh->fgpu_m = out[i].shares[d].fgpu_m;
		}
		mgr_shares_to_json(s);
		s->failed_passes = 0;
		util_strlcpy(s->rec.agent_id, a->rec.id, sizeof(s->rec.agent_id));
		mgr_set_status(m, s, SS_SCHEDULED, "placed on node %s", a->rec.id);
		mgr_enqueue(m, JOB_START, s->rec.id);
		m->placements++;
	}
	if (blocked >= 0)
		pend[blocked]->failed_passes++;
	/* Why each waits: recomputed every pass, so kept in memory only (the
	 * store has the status; a restart recomputes the words). Writing them
	 * would rewrite the whole queue whenever its head changes. */
	bool changed = false;
	for (size_t i = 0; i < k; i++) {
		struct msession *s = pend[i];
		if (s->rec.status != SS_PENDING || !reasons[i][0] || !strcmp(s->rec.status_info, reasons[i]))
			continue;
		util_strlcpy(s->rec.status_info, reasons[i], sizeof(s->rec.status_info));
		changed = true;
	}
	if (changed) {
		m->version++;
		pthread_cond_broadcast(&m->changed);
	}
	if (txn && m->so->commit(m->store, &err) < 0) {
		log_error("manager", "cannot commit scheduling decisions: %s", err.msg);
		m->so->rollback(m->store);
	}
done:
	free(reqs);
	free(pend);
	free(ags);
	free(devs);
	free(users);
	free(out);
	free(reasons);
}

static void *sched_main(void *arg)
{
	struct manager *m = arg;
	pthread_mutex_lock(&m->mu);
	while (!m->stopping) {
		if (!m->sched_dirty) {
			/* Event-driven: woken by creates, ends and agent changes.
			 * The timeout is only a safety pass (LOST agents, retries). */
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += SAFETY_PASS_MS / 1000;
			pthread_cond_timedwait(&m->wake, &m->mu, &ts);
			if (m->stopping)
				break;
		}
		/* On elapsed time, not on a quiet wait: a busy cluster wakes the
		 * scheduler more often than once a second. */
		int64_t now = util_mono_ms();
		if (now - m->last_safety_mono >= SAFETY_PASS_MS) {
			m->last_safety_mono = now;
			mark_lost_agents(m);
			retry_stuck_terminations(m);
		}
		m->sched_dirty = false;
		m->in_pass = true;
		int64_t t0 = util_mono_ms();
		uint64_t before = m->placements;
		schedule_pass(m);
		m->in_pass = false;
		if (m->placements != before) {
			m->last_pass_ms = util_mono_ms() - t0;
			m->last_pass_placed = m->placements - before;
		}
	}
	pthread_mutex_unlock(&m->mu);
	return NULL;
}

/* ---------- dispatch ---------- */

static json_t *session_spec(struct manager *m, struct msession *s)
{
	const struct user_rec *owner = mgr_find_user(m, s->rec.owner_id);
	json_t *env = s->rec.env_json ? json_loads(s->rec.env_json, 0, NULL) : NULL;
	json_t *spec = json_pack("{s:s,s:s,s:s,s:s,s:{s:I,s:I,s:I},s:o,s:s?}",
		"id", s->rec.id, "name", s->rec.name, "owner", owner ? owner->email : "",
		"image", s->rec.image,
		"resources", "cpu_milli", (json_int_t)s->rec.req.cpu_m, "mem", (json_int_t)s->rec.req.mem,
		"fgpu_milli", (json_int_t)s->rec.req.fgpu_m,
		"env", env ? env : json_object(),
		"startup_command", s->rec.startup_command);
	/* The device shares, with the limits each implies: memory and SMs in
	 * proportion to the share of the device. */
	struct magent *a = mgr_find_agent(m, s->rec.agent_id);
	int64_t per_dev = mgr_per_device_m(m);
	json_t *gpus = json_array();
	for (int i = 0; a && i < s->n_shares; i++) {
		struct mgpu *g = agent_gpu(a, s->shares[i].uuid);
		int64_t mem = g ? (int64_t)((__int128)g->memory * s->shares[i].fgpu_m / per_dev) : 0;
		int64_t sm = s->shares[i].fgpu_m * 100 / per_dev;
		json_array_append_new(gpus, json_pack("{s:i,s:s,s:I,s:I,s:I}", "index", s->shares[i].index,
			"uuid", s->shares[i].uuid, "fgpu_milli", (json_int_t)s->shares[i].fgpu_m,
			"memory_limit", (json_int_t)mem, "sm_limit_percent", (json_int_t)(sm < 1 ? 1 : sm > 100 ? 100 : sm)));
	}
	json_object_set_new(spec, "gpus", gpus);
	return spec;
}

static void run_start(struct manager *m, const char *sid)
{
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_find_session(m, sid);
	if (!s || s->rec.status != SS_SCHEDULED) {
		pthread_mutex_unlock(&m->mu);
		return;
	}
	struct magent *a = mgr_find_agent(m, s->rec.agent_id);
	if (!a) {
		mgr_set_status(m, s, SS_ERROR, "node %s is no longer registered", s->rec.agent_id);
		pthread_mutex_unlock(&m->mu);
		return;
	}
	mgr_set_status(m, s, SS_PREPARING, "creating the container on node %s", a->rec.id);
	json_t *spec = session_spec(m, s);
	const struct agent_link_ops *link = a->link;
	void *ctx = a->link_ctx;
	char agent_name[STORE_NAME_MAX];
	util_strlcpy(agent_name, a->rec.id, sizeof(agent_name));
	s->start_inflight = true;
	pthread_mutex_unlock(&m->mu);

	char cid[RT_ID_MAX] = "";
	struct terr err = {0};
	int rc = link->start(ctx, spec, cid, &err);
	json_decref(spec);

	pthread_mutex_lock(&m->mu);
	s->start_inflight = false;
	if (rc == 0)
		util_strlcpy(s->rec.container_id, cid, sizeof(s->rec.container_id));
	if (s->rec.status == SS_TERMINATING) {
		/* Deleted while starting: now that the container is known,
		 * remove it. */
		if (!s->destroy_queued) {
			s->destroy_queued = true;
			mgr_enqueue(m, JOB_DESTROY, s->rec.id);
		}
	} else if (s->rec.status == SS_PREPARING) {
		if (rc == 0)
			mgr_set_status(m, s, SS_RUNNING, "running on node %s", agent_name);
		else
			mgr_set_status(m, s, SS_ERROR, "could not start on node %s: %s", agent_name, err.msg);
	}
	pthread_mutex_unlock(&m->mu);
}

static void run_destroy(struct manager *m, const char *sid)
{
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_find_session(m, sid);
	if (!s) {
		pthread_mutex_unlock(&m->mu);
		return;
	}
	if (s->start_inflight) {
		/* The start's completion queues this again with the container id. */
		s->destroy_queued = false;
		pthread_mutex_unlock(&m->mu);
		return;
	}
	struct magent *a = mgr_find_agent(m, s->rec.agent_id);
	if (!a) {
		if (s->rec.status == SS_TERMINATING)
			mgr_set_status(m, s, SS_TERMINATED, "terminated (node %s is gone)", s->rec.agent_id);
		s->destroy_queued = false;
		pthread_mutex_unlock(&m->mu);
		return;
	}
	if (!a->alive) {
		/* Not now: a call to a dead node would hold a dispatcher for its
		 * whole timeout. Its re-registration reconciles this session. */
		s->destroy_queued = false;
		if (s->rec.status == SS_TERMINATING) {
			snprintf(s->rec.status_info, sizeof(s->rec.status_info),
				 "terminating: node %s is LOST; the container is removed when it returns", a->rec.id);
			mgr_persist(m, s);
		}
		pthread_mutex_unlock(&m->mu);
		return;
	}
	const struct agent_link_ops *link = a->link;
	void *ctx = a->link_ctx;
	char cid[RT_ID_MAX];
	util_strlcpy(cid, s->rec.container_id, sizeof(cid));
	pthread_mutex_unlock(&m->mu);

	struct terr err = {0};
	int rc = link->destroy(ctx, sid, cid, &err);

	pthread_mutex_lock(&m->mu);
	s->destroy_queued = false;
	if (rc < 0) {
		log_warn("manager", "removing the container of %s failed (will retry): %s", s->rec.name, err.msg);
		if (s->rec.status == SS_TERMINATING) {
			snprintf(s->rec.status_info, sizeof(s->rec.status_info),
				 "terminating: could not remove the container yet (%.300s); retrying", err.msg);
			mgr_persist(m, s);
		}
	} else {
		s->rec.container_id[0] = '\0';
		if (s->rec.status == SS_TERMINATING)
			mgr_set_status(m, s, SS_TERMINATED, "terminated on request; container removed");
		else
			mgr_persist(m, s);
	}
	pthread_mutex_unlock(&m->mu);
}

static void *worker_main(void *arg)
{
	struct manager *m = arg;
	pthread_mutex_lock(&m->mu);
	for (;;) {
		while (!m->jobs_head && !m->stopping)
			pthread_cond_wait(&m->jobs_cv, &m->mu);
		if (m->stopping)
			break;
		struct job *j = m->jobs_head;
		m->jobs_head = j->next;
		if (!m->jobs_head)
			m->jobs_tail = NULL;
		pthread_mutex_unlock(&m->mu);
		if (j->type == JOB_START)
			run_start(m, j->session_id);
		else
			run_destroy(m, j->session_id);
		free(j);
		pthread_mutex_lock(&m->mu);
	}
	pthread_mutex_unlock(&m->mu);
	return NULL;
}

/* ---------- agents ---------- */

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

/* After an agent (re)joins: make the store and its containers agree.
 * Called with mu held. */
static void reconcile(struct manager *m, struct magent *a, json_t *containers)
{
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		if (strcmp(s->rec.agent_id, a->rec.id) || s->start_inflight)
			continue;
		json_t *c = find_container(containers, s->rec.id);
		bool running = c && json_is_true(json_object_get(c, "running"));
		const char *cid = c ? json_string_value(json_object_get(c, "container_id")) : NULL;
		switch (s->rec.status) {
		case SS_SCHEDULED:
		case SS_PREPARING:
			if (running) {
				util_strlcpy(s->rec.container_id, cid, sizeof(s->rec.container_id));
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
		case SS_RUNNING:
			if (running) {
				util_strlcpy(s->rec.container_id, cid, sizeof(s->rec.container_id));
				mgr_persist(m, s);
			} else if (c) {
				s->rec.has_exit_code = true;
				s->rec.exit_code = (int)json_integer_value(json_object_get(c, "exit_code"));
				mgr_set_status(m, s, SS_ERROR, "container %s while node %s was away (exit code %d)",
					       json_is_true(json_object_get(c, "oom_killed")) ? "was OOM-killed" : "ended",
					       a->rec.id, s->rec.exit_code);
			} else {
				s->rec.container_id[0] = '\0';
				mgr_set_status(m, s, SS_ERROR, "container vanished while node %s was away", a->rec.id);
			}
			break;
		case SS_TERMINATING:
			if (c && !s->destroy_queued) {
				s->destroy_queued = true;
				mgr_enqueue(m, JOB_DESTROY, s->rec.id);
			} else if (!c) {
				mgr_set_status(m, s, SS_TERMINATED, "terminated; container gone");
			}
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
		if (s && (!session_status_final(s->rec.status) || s->rec.status == SS_ERROR))
			continue;
		if (!s) {
			log_warn("manager", "container of unknown session %s on %s: left alone", sid, a->rec.id);
			continue;
		}
		if (!s->destroy_queued) {
			util_strlcpy(s->rec.container_id,
				     json_string_value(json_object_get(c, "container_id")) ?: "",
				     sizeof(s->rec.container_id));
			s->destroy_queued = true;
			mgr_enqueue(m, JOB_DESTROY, s->rec.id);
		}
	}
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

	pthread_mutex_lock(&m->mu);
	struct magent *a = mgr_find_agent(m, id);
	if (!a) {
		a = calloc(1, sizeof(*a));
		if (!a || append_agent(m, a) < 0) {
			free(a);
			pthread_mutex_unlock(&m->mu);
			return terr_set(err, ENOMEM, "out of memory");
		}
		util_strlcpy(a->rec.id, id, sizeof(a->rec.id));
		a->rec.registered_ms = util_now_ms();
		if (index_agent(m, a) < 0) {
			pthread_mutex_unlock(&m->mu);
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
	for (size_t si = 0; si < m->n_sessions; si++) {
		struct msession *s = m->sessions[si];
		if (!strcmp(s->rec.agent_id, a->rec.id) && session_status_holds(s->rec.status))
			shares_move(a, s, +1);
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
	pthread_mutex_unlock(&m->mu);
	if (reply)
		*reply = json_pack("{s:i}", "heartbeat_interval_ms", m->cfg.heartbeat_interval_ms);
	return 0;
}

int mgr_agent_heartbeat(struct manager *m, const char *agent_id, json_t *body, json_t **reply,
			struct terr *err)
{
	(void)body;
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
	a->rec.last_seen_ms = util_now_ms();
	pthread_mutex_unlock(&m->mu);
	*reply = json_pack("{s:i}", "heartbeat_interval_ms", m->cfg.heartbeat_interval_ms);
	return 0;
}

void mgr_agent_event(struct manager *m, const char *agent_id, json_t *event)
{
	const char *sid = json_string_value(json_object_get(event, "session_id"));
	const char *cid = json_string_value(json_object_get(event, "container_id"));
	const char *reason = json_string_value(json_object_get(event, "reason"));
	if (!sid)
		return;
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_find_session(m, sid);
	if (s && !strcmp(s->rec.agent_id, agent_id) &&
	    (s->rec.status == SS_RUNNING || s->rec.status == SS_PREPARING) &&
	    (!cid || !s->rec.container_id[0] || !strcmp(cid, s->rec.container_id))) {
		s->rec.has_exit_code = true;
		s->rec.exit_code = (int)json_integer_value(json_object_get(event, "exit_code"));
		mgr_set_status(m, s, SS_ERROR, "%s", reason ? reason : "container ended by itself");
	}
	pthread_mutex_unlock(&m->mu);
}

/* ---------- startup ---------- */

static int load_user(void *ud, const struct user_rec *u)
{
	struct manager *m = ud;
	struct user_rec *n = realloc(m->users, (m->n_users + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	m->users = n;
	m->users[m->n_users++] = *u;
	return 0;
}

static int load_session(void *ud, const struct session_rec *r)
{
	struct manager *m = ud;
	struct msession *s = calloc(1, sizeof(*s));
	if (!s || session_rec_copy(&s->rec, r) < 0 || append_session(m, s) < 0) {
		if (s)
			session_rec_clear(&s->rec);
		free(s);
		return -ENOMEM;
	}
	return 0;
}

static int load_agent(void *ud, const struct agent_rec *r)
{
	struct manager *m = ud;
	struct magent *a = calloc(1, sizeof(*a));
	if (!a || append_agent(m, a) < 0) {
		free(a);
		return -ENOMEM;
	}
	a->rec = *r;
	a->alive = false;   /* until it registers again */
	return index_agent(m, a);
}

static int create_admin(struct manager *m, struct terr *err)
{
	struct user_rec u = {0};
	int rc;
	char ak[24];
	if ((rc = util_new_id(u.id, err)) < 0 || (rc = sign_random_hex(9, ak, sizeof(ak), err)) < 0 ||
	    (rc = sign_random_hex(20, u.secret_key, sizeof(u.secret_key), err)) < 0)
		return rc;
	for (char *p = ak; *p; p++)
		if (*p >= 'a' && *p <= 'f')
			*p = (char)(*p - 'a' + 'A');
	snprintf(u.access_key, sizeof(u.access_key), "TK%s", ak);
	util_strlcpy(u.email, ADMIN_EMAIL, sizeof(u.email));
	u.is_admin = true;
	u.created_ms = util_now_ms();
	/* A generated web password: only its argon2id hash is stored; the plain
	 * one goes to admin.conf once (manager_serve). */
	if ((rc = pwhash_generate(m->first_password, sizeof(m->first_password), err)) < 0 ||
	    (rc = pwhash_hash(m->first_password, u.password_hash, sizeof(u.password_hash), err)) < 0)
		return rc;
	if ((rc = m->so->user_put(m->store, &u, err)) < 0)
		return rc;
	log_info("manager", "first start: created admin user %s with access key %s", u.email, u.access_key);
	return load_user(m, &u);
}

int manager_open(struct manager **out, const struct manager_config *cfg, struct terr *err)
{
	struct manager *m = calloc(1, sizeof(*m));
	if (!m)
		return terr_set(err, ENOMEM, "out of memory");
	m->cfg = *cfg;
	if (m->cfg.heartbeat_interval_ms <= 0)
		m->cfg.heartbeat_interval_ms = 2000;
	if (m->cfg.lost_after_heartbeats <= 0)
		m->cfg.lost_after_heartbeats = 3;
	if (m->cfg.dispatch_workers <= 0)
		m->cfg.dispatch_workers = 4;
	if (cfg->selector && !sched_selector_find(cfg->selector)) {
		free(m);
		return terr_set(err, EINVAL, "unknown agent selector '%s' (known: concentrated, dispersed)", cfg->selector);
	}
	util_strlcpy(m->data_dir, cfg->data_dir, sizeof(m->data_dir));
	m->cfg.data_dir = m->data_dir;
	pthread_mutex_init(&m->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->wake, &ca);
	pthread_cond_init(&m->changed, &ca);
	pthread_cond_init(&m->jobs_cv, &ca);
	pthread_condattr_destroy(&ca);

	int rc;
	if ((rc = util_mkdir_p(m->data_dir, 0700, err)) < 0)
		goto fail;
	char db[4200];
	snprintf(db, sizeof(db), "%s/tessera.db", m->data_dir);
	m->so = &store_sqlite_ops;
	if ((rc = m->so->open(&m->store, db, err)) < 0)
		goto fail;
	if ((rc = m->so->user_load_all(m->store, load_user, m, err)) < 0 ||
	    (rc = m->so->session_load_all(m->store, load_session, m, err)) < 0 ||
	    (rc = m->so->agent_load_all(m->store, load_agent, m, err)) < 0 ||
	    (rc = m->so->session_max_seq(m->store, &m->next_seq, err)) < 0)
		goto fail;
	m->next_seq++;
	if (m->n_users == 0 && (rc = create_admin(m, err)) < 0)
		goto fail;
	if ((rc = mgr_settings_load(m, err)) < 0)
		goto fail;
	if (cfg->selector) {
		json_t *v = json_string(cfg->selector);
		rc = mgr_settings_set(m, "selector", v, err);
		json_decref(v);
		if (rc < 0)
			goto fail;
	}
	if (cfg->fgpu_per_device > 0) {
		json_t *v = json_integer(cfg->fgpu_per_device);
		rc = mgr_settings_set(m, "fgpu_per_device", v, err);
		json_decref(v);
		if (rc < 0)
			goto fail;
	}
	for (size_t i = 0; i < m->n_sessions; i++)
		mgr_shares_from_json(m->sessions[i]);
	/* Resources held by sessions loaded from the store. */
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		struct magent *a = s->rec.agent_id[0] ? mgr_find_agent(m, s->rec.agent_id) : NULL;
		if (a && session_status_holds(s->rec.status)) {
			res_add(&a->used, &s->rec.req);
			a->n_sessions++;
		}
	}
	log_info("manager", "state loaded from %s: %zu sessions, %zu agents, %zu users", db,
		 m->n_sessions, m->n_agents, m->n_users);

	m->workers = calloc((size_t)m->cfg.dispatch_workers, sizeof(pthread_t));
	if (!m->workers) {
		rc = terr_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	for (int i = 0; i < m->cfg.dispatch_workers; i++) {
		if (pthread_create(&m->workers[i], NULL, worker_main, m) != 0) {
			rc = terr_set(err, EAGAIN, "cannot start dispatcher threads");
			m->n_workers = i;
			goto fail_threads;
		}
		m->n_workers = i + 1;
	}
	if (pthread_create(&m->sched_thread, NULL, sched_main, m) != 0) {
		rc = terr_set(err, EAGAIN, "cannot start the scheduler thread");
		goto fail_threads;
	}
	m->threads_started = true;
	*out = m;
	return 0;
fail_threads:
	pthread_mutex_lock(&m->mu);
	m->stopping = true;
	pthread_cond_broadcast(&m->jobs_cv);
	pthread_mutex_unlock(&m->mu);
	for (int i = 0; i < m->n_workers; i++)
		pthread_join(m->workers[i], NULL);
	m->n_workers = 0;
fail:
	manager_close(m);
	return rc;
}

static void local_agent_event(void *ud, const char *agent_id, json_t *event)
{
	mgr_agent_event(ud, agent_id, event);
}

int manager_attach_local_agent(struct manager *m, struct agent *a, struct terr *err)
{
	json_t *desc;
	int rc = agent_describe(a, &desc, err);
	if (rc < 0)
		return rc;
	rc = mgr_agent_register(m, desc, &link_local_ops, a, true, NULL, err);
	json_decref(desc);
	if (rc < 0)
		return rc;
	return agent_watch_start(a, local_agent_event, m, err);
}

int manager_serve(struct manager *m, char *admin_conf_path, size_t n, struct terr *err)
{
	struct httpd_config hc = {
		.listen = m->cfg.listen,
		.routes = manager_routes,
		.n_routes = manager_n_routes,
		.ctx = m,
		.max_body = 1 << 20,
		.authenticate = api_authenticate,
	};
	int rc = httpd_start(&hc, &m->http, err);
	if (rc < 0)
		return rc;
	char host[64];
	int port;
	httpd_parse_listen(m->cfg.listen, host, sizeof(host), &port, NULL);
	if (!strcmp(host, "0.0.0.0"))
		strcpy(host, "127.0.0.1");
	snprintf(m->endpoint, sizeof(m->endpoint), "http://%s:%d", host, httpd_port(m->http));

	const struct user_rec *admin = NULL;
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n_users; i++)
		if (m->users[i].is_admin && !m->users[i].disabled) {
			admin = &m->users[i];
			break;
		}
	struct user_rec copy = admin ? *admin : (struct user_rec){0};
	pthread_mutex_unlock(&m->mu);
	snprintf(admin_conf_path, n, "%s/admin.conf", m->data_dir);
	if (admin) {
		/* The plain admin password exists only in admin.conf: new on first
		 * start, else kept from the file being replaced. */
		struct conf old = {0};
		const char *password = m->first_password[0] ? m->first_password : NULL;
		if (!password && conf_load(admin_conf_path, &old, NULL) == 0 &&
		    conf_get(&old, "email") && !strcmp(conf_get(&old, "email"), copy.email))
			password = conf_get(&old, "password");
		const char *keys[] = {"endpoint", "access_key", "secret_key", "email", "password"};
		const char *vals[] = {m->endpoint, copy.access_key, copy.secret_key, copy.email, password};
		rc = conf_write(admin_conf_path, 0600, keys, vals, password ? 5 : 4, err);
		conf_free(&old);
		if (rc < 0)
			return rc;
	}
	return 0;
}

const char *manager_endpoint(const struct manager *m)
{
	return m->endpoint;
}

void manager_close(struct manager *m)
{
	if (!m)
		return;
	/* Stopping first: long polls and event streams see it and end, so
	 * the HTTP server can stop without waiting for them. */
	pthread_mutex_lock(&m->mu);
	m->stopping = true;
	pthread_cond_broadcast(&m->wake);
	pthread_cond_broadcast(&m->jobs_cv);
	pthread_cond_broadcast(&m->changed);
	pthread_mutex_unlock(&m->mu);
	httpd_stop(m->http);
	m->http = NULL;
	if (m->threads_started)
		pthread_join(m->sched_thread, NULL);
	for (int i = 0; i < m->n_workers; i++)
		pthread_join(m->workers[i], NULL);
	free(m->workers);
	for (struct job *j = m->jobs_head, *next; j; j = next) {
		next = j->next;
		free(j);
	}
	for (size_t i = 0; i < m->n_sessions; i++) {
		session_rec_clear(&m->sessions[i]->rec);
		free(m->sessions[i]);
	}
	free(m->sessions);
	strmap_free(&m->session_by_id);
	strmap_free(&m->agent_by_id);
	for (size_t i = 0; i < m->n_agents; i++) {
		if (m->agents[i]->link)
			m->agents[i]->link->release(m->agents[i]->link_ctx);
		free(m->agents[i]);
	}
	for (struct retired_link *r = m->retired, *next; r; r = next) {
		next = r->next;
		r->ops->release(r->ctx);
		free(r);
	}
	free(m->agents);
	free(m->users);
	mgr_settings_free(m);
	if (m->store)
		m->so->close(m->store);
	pthread_mutex_destroy(&m->mu);
	pthread_cond_destroy(&m->wake);
	pthread_cond_destroy(&m->changed);
	pthread_cond_destroy(&m->jobs_cv);
	free(m);
}
