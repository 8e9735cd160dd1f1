/* The scheduler thread: event-driven passes that place PENDING sessions
 * (docs/architecture.md, "The scheduler"). A pass snapshots the queue, the
 * agents with their devices and the users under the lock, asks sched_plan
 * (src/sched/) where each goes, and commits the placements in one store
 * transaction, each with a start job for the dispatch workers. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "manager/state.h"

#define SAFETY_PASS_MS 1000

static void retry_stuck_terminations(struct manager *m)
{
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		if (s->rec.status != SS_TERMINATING || s->destroy_queued || s->start_inflight)
			continue;
		struct magent *a = mgr_find_agent(m, s->rec.agent_id);
		if (a && !a->alive)
			continue;
		mgr_enqueue_destroy(m, s);
	}
}

/* What a pass plans over: the PENDING queue, the agents with their
 * devices and the users, copied under the lock. A launch estimate adds
 * hypothetical requests at the end of the queue. */
struct snapshot {
	size_t k, na, nu;                 /* requests, agents, users */
	struct sched_request *reqs;
	struct msession **pend;           /* NULL for a hypothetical request */
	struct sched_agent *ags;
	struct sched_device *devs;
	struct sched_user *users;
	struct sched_placement *out;
	char (*reasons)[SCHED_REASON_MAX];
	struct sched_params params;
};

static void snapshot_free(struct snapshot *sn)
{
	free(sn->reqs);
	free(sn->pend);
	free(sn->ags);
	free(sn->devs);
	free(sn->users);
	free(sn->out);
	free(sn->reasons);
}

/* Fills sn from the manager's state, with n_extra requests of extra for
 * the user extra_owner appended (after every queued one). Returns false on
 * no memory or when there is nothing to plan. Called with mu held. */
static bool snapshot_build(struct manager *m, struct snapshot *sn, const char *extra_owner,
			   const struct res *extra, size_t n_extra)
{
	memset(sn, 0, sizeof(*sn));
	size_t n_pending = n_extra;
	for (size_t i = 0; i < m->n_sessions; i++)
		n_pending += m->sessions[i]->rec.status == SS_PENDING;
	if (n_pending == 0)
		return false;
	size_t na = m->n_agents, nu = m->n_users;
	sn->na = na;
	sn->nu = nu;
	sn->reqs = calloc(n_pending, sizeof(*sn->reqs));
	sn->pend = calloc(n_pending, sizeof(*sn->pend));
	sn->ags = calloc(na ? na : 1, sizeof(*sn->ags));
	sn->devs = calloc(na ? na * MGR_MAX_GPUS : 1, sizeof(*sn->devs));
	sn->users = calloc(nu ? nu : 1, sizeof(*sn->users));
	sn->out = calloc(n_pending, sizeof(*sn->out));
	sn->reasons = calloc(n_pending, SCHED_REASON_MAX);
	if (!sn->reqs || !sn->pend || !sn->ags || !sn->devs || !sn->users || !sn->out || !sn->reasons)
		return false;
	int64_t per_dev = mgr_per_device_m(m);
	for (size_t u = 0; u < nu; u++) {
		sn->users[u].id = m->users[u].id;
		mgr_user_policy(m, m->users[u].email, &sn->users[u].max_sessions, &sn->users[u].max);
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
			res_add(&sn->users[u].used, &s->rec.req);
			sn->users[u].sessions++;
		}
		if (s->rec.status != SS_PENDING)
			continue;
		sn->pend[k] = s;
		sn->reqs[k].session_id = s->rec.id;
		sn->reqs[k].name = s->rec.name;
		sn->reqs[k].req = s->rec.req;
		sn->reqs[k].user = u;
		sn->reqs[k].seq = s->rec.seq;
		sn->reqs[k].failed_passes = s->failed_passes;
		k++;
	}
	size_t owner = 0;
	while (n_extra && owner < nu && strcmp(m->users[owner].id, extra_owner))
		owner++;
	if (n_extra && owner == nu)
		return false;   /* cannot happen: the caller is a user */
	for (size_t e = 0; e < n_extra; e++, k++) {
		sn->reqs[k].session_id = "";
		sn->reqs[k].name = "the new session";
		sn->reqs[k].req = *extra;
		sn->reqs[k].user = owner;
		sn->reqs[k].seq = m->next_seq + (int64_t)e;
	}
	sn->k = k;
	for (size_t i = 0; i < na; i++) {
		struct magent *a = m->agents[i];
		struct sched_agent *sa = &sn->ags[i];
		sa->id = a->rec.id;
		sa->alive = a->alive;
		sa->drained = mgr_node_drained(m, a->rec.id);
		sa->capacity = a->rec.capacity;
		sa->free = a->rec.capacity;
		res_sub(&sa->free, &a->used);
		sa->devs = &sn->devs[i * MGR_MAX_GPUS];
		sa->n_devs = (size_t)a->n_gpus;
		for (int d = 0; d < a->n_gpus; d++)
			sa->devs[d].free_m = per_dev > a->gpus[d].used_m ? per_dev - a->gpus[d].used_m : 0;
	}
	sn->params = (struct sched_params){
		.selector = m->settings.selector,
		.queue = m->settings.queue,
		.per_device_m = per_dev,
		.quantum_m = m->settings.fgpu_quantum_m,
		.fifo_skip_after = m->settings.fifo_skip_after,
	};
	return k > 0;
}

/* One scheduling pass over the snapshot of the queue, the agents (with
 * their devices) and the users; decisions are committed in one
 * transaction. Called with mu held. */
static void schedule_pass(struct manager *m)
{
	struct snapshot sn;
	if (!snapshot_build(m, &sn, NULL, NULL, 0))
		goto done;
	size_t k = sn.k;
	struct msession **pend = sn.pend;
	char (*reasons)[SCHED_REASON_MAX] = sn.reasons;
	struct sched_world w = {.agents = sn.ags, .n_agents = sn.na, .users = sn.users, .n_users = sn.nu};
	struct sched_result res = {.reasons = reasons, .blocked_head = -1};
	size_t placed = sched_plan(&sn.params, &w, sn.reqs, k, sn.out, &res);
	ssize_t blocked = res.blocked_head;

	struct terr err = {0};
	/* A placement is only made when it can be stored: one a restart
	 * would not find would be placed again, and started twice. */
	if (placed && m->so->begin(m->store, &err) < 0) {
		log_error("manager", "cannot store scheduling decisions: %s", err.msg);
		goto done;
	}
	bool txn = placed > 0;
	for (size_t i = 0; i < placed; i++) {
		struct msession *s = pend[sn.out[i].request];
		struct magent *a = m->agents[sn.out[i].agent];
		s->n_shares = 0;
		for (size_t d = 0; d < sn.out[i].n_shares; d++) {
			struct mshare *sh = &s->shares[s->n_shares++];
			sh->index = (int)sn.out[i].shares[d].device;
			util_strlcpy(sh->uuid, a->gpus[sh->index].uuid, sizeof(sh->uuid));
			sh->fgpu_m = sn.out[i].shares[d].fgpu_m;
			sh->per_dev_m = mgr_per_device_m(m);
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
		mgr_session_changed(s);
		changed = true;
	}
	if (changed) {
		m->version++;
		pthread_cond_broadcast(&m->changed);
	}
	if (txn && m->so->commit(m->store, &err) < 0) {
		log_error("manager", "cannot commit scheduling decisions: %s", err.msg);
		m->so->rollback(m->store);
		/* Nothing of them is stored (the database went away during
		 * the pass): they are undone, and their start jobs, which find
		 * the sessions PENDING again, do nothing. */
		for (size_t i = 0; i < placed; i++) {
			struct msession *s = pend[sn.out[i].request];
			if (s->rec.status != SS_SCHEDULED)
				continue;
			mgr_set_status(m, s, SS_PENDING, "waiting to be scheduled (the placement could not be stored)");
			s->rec.agent_id[0] = '\0';
			s->n_shares = 0;
			mgr_shares_to_json(s);
			m->placements--;
		}
	}
done:
	snapshot_free(&sn);
}

bool mgr_sched_estimate(struct manager *m, const char *owner_id, const struct res *req, int64_t count,
			char *why, size_t n)
{
	/* The same plan a pass would make now, with the new sessions queued
	 * last: they fit now when every one of them is placed. Nothing is
	 * committed. */
	struct snapshot sn;
	memset(&sn, 0, sizeof(sn));
	why[0] = '\0';
	if (count < 1 || !snapshot_build(m, &sn, owner_id, req, (size_t)count)) {
		snapshot_free(&sn);
		snprintf(why, n, "cannot estimate now (out of memory)");
		return false;
	}
	size_t first_new = sn.k - (size_t)count;
	struct sched_world w = {.agents = sn.ags, .n_agents = sn.na, .users = sn.users, .n_users = sn.nu};
	struct sched_result res = {.reasons = sn.reasons, .blocked_head = -1};
	size_t placed = sched_plan(&sn.params, &w, sn.reqs, sn.k, sn.out, &res);
	bool *done = calloc((size_t)count, sizeof(bool));
	size_t n_new = 0;
	for (size_t i = 0; done && i < placed; i++) {
		if (sn.out[i].request >= first_new) {
			done[sn.out[i].request - first_new] = true;
			n_new++;
		}
	}
	bool fits = done && n_new == (size_t)count;
	for (size_t e = 0; done && !fits && e < (size_t)count; e++) {
		if (done[e])
			continue;
		const char *r = sn.reasons[first_new + e];
		if (count > 1)
			snprintf(why, n, "%zu of the %lld would start now; the others wait: %s", n_new, (long long)count,
				 *r ? r : "would wait");
		else
			snprintf(why, n, "%s", *r ? r : "it would wait");
		break;
	}
	if (!done)
		snprintf(why, n, "cannot estimate now (out of memory)");
	free(done);
	snapshot_free(&sn);
	return fits;
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
			mgr_mark_lost_agents(m);
			retry_stuck_terminations(m);
			mgr_folders_purge_trash(m);
			mgr_usage_sweep(m);
		}
		/* Nothing is placed while the store is unreachable (or not yet
		 * written again after it came back): a placement must be
		 * stored before its start job runs. */
		if (!mgr_store_check(m) || m->stopping)
			continue;
		m->sched_dirty = false;
		m->in_pass = true;
		int64_t t0 = util_mono_ms();
		struct timespec p0, p1;
		clock_gettime(CLOCK_MONOTONIC, &p0);
		uint64_t before = m->placements;
		schedule_pass(m);
		m->in_pass = false;
		clock_gettime(CLOCK_MONOTONIC, &p1);
		mgr_metrics_pass(m, (double)(p1.tv_sec - p0.tv_sec) + (double)(p1.tv_nsec - p0.tv_nsec) / 1e9);
		if (m->placements != before) {
			m->last_pass_ms = util_mono_ms() - t0;
			m->last_pass_placed = m->placements - before;
		}
	}
	pthread_mutex_unlock(&m->mu);
	return NULL;
}

int mgr_scheduler_start(struct manager *m, struct terr *err)
{
	if (pthread_create(&m->sched_thread, NULL, sched_main, m) != 0)
		return terr_set(err, EAGAIN, "cannot start the scheduler thread");
	m->threads_started = true;
	return 0;
}
