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
			mgr_mark_lost_agents(m);
			retry_stuck_terminations(m);
			mgr_folders_purge_trash(m);
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

int mgr_scheduler_start(struct manager *m, struct terr *err)
{
	if (pthread_create(&m->sched_thread, NULL, sched_main, m) != 0)
		return terr_set(err, EAGAIN, "cannot start the scheduler thread");
	m->threads_started = true;
	return 0;
}
