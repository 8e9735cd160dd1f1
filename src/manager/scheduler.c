/* The scheduler thread: event-driven passes that place PENDING sessions
 * (docs/architecture.md, "The scheduler"). A pass snapshots the queue, the
 * agents with their devices and the users under the lock, asks sched_plan
 * (src/sched/) where each goes, and commits the placements in one store
 * transaction, each with a start job for the dispatch workers. */
#include <stdlib.h>
#include <stdint.h>
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
		if (!session_status_ending(s->rec.status) || s->destroy_queued || s->start_inflight)
			continue;
		struct magent *a = mgr_find_agent(m, s->rec.agent_id);
		if (a && !a->alive)
			continue;
		mgr_enqueue_destroy(m, s);
	}
}

/* What a pass plans over: the PENDING queue, the agents with their
 * devices, the users, the projects and their members, the sessions that
 * hold resources (preemption's candidates) and the resource groups,
 * copied under the lock. A launch estimate adds hypothetical requests at
 * the end of the queue. */
struct snapshot {
	size_t k;                         /* requests */
	struct sched_request *reqs;
	struct msession **pend;           /* NULL for a hypothetical request */
	struct sched_world w;
	struct sched_device *devs;
	struct sched_running *running;
	struct msession **run_sess;       /* the session of each running entry */
	const char **groups;
	struct sched_placement *out;
	char (*reasons)[SCHED_REASON_MAX];
	struct sched_eviction *evictions;
	struct sched_params params;
	struct strmap project_ix, member_ix, agent_ix, user_ix;   /* id -> index + 1 */
};

static void snapshot_free(struct snapshot *sn)
{
	free(sn->reqs);
	free(sn->pend);
	free(sn->w.agents);
	free(sn->devs);
	free(sn->w.users);
	free(sn->w.projects);
	free(sn->w.members);
	free(sn->running);
	free(sn->run_sess);
	free(sn->groups);
	free(sn->out);
	free(sn->reasons);
	free(sn->evictions);
	strmap_free(&sn->project_ix);
	strmap_free(&sn->member_ix);
	strmap_free(&sn->agent_ix);
	strmap_free(&sn->user_ix);
}

/* Index of a resource group's name in the pass's list, added when new
 * (names borrowed from the manager's state, alive while mu is held); -1
 * past SCHED_MAX_GROUPS (projects' allowed groups are a 64-bit mask). */
#define SCHED_MAX_GROUPS 64
static ssize_t group_index(struct snapshot *sn, const char *name)
{
	for (size_t i = 0; i < sn->w.n_groups; i++)
		if (!strcmp(sn->groups[i], name))
			return (ssize_t)i;
	if (sn->w.n_groups == SCHED_MAX_GROUPS)
		return -1;
	sn->groups[sn->w.n_groups] = name;
	return (ssize_t)sn->w.n_groups++;
}

static size_t index_of(const struct strmap *ix, const char *key)
{
	return (size_t)(uintptr_t)strmap_get(ix, key);   /* index + 1; 0: none */
}

/* "PROJECT_ID:USER_ID", a membership's id (member_rec.id), into out: a
 * copy rather than snprintf, as a pass makes one per session. */
static void member_key(const char *project_id, const char *user_id, char out[2 * STORE_ID_MAX])
{
	size_t a = strnlen(project_id, STORE_ID_MAX - 1), b = strnlen(user_id, STORE_ID_MAX - 1);
	memcpy(out, project_id, a);
	out[a] = ':';
	memcpy(out + a + 1, user_id, b);
	out[a + 1 + b] = '\0';
}

/* The project's allowed groups as a mask over the pass's groups. */
static uint64_t groups_mask(struct snapshot *sn, const struct mproject *p)
{
	if (!p->rec.groups[0])
		return 0;
	uint64_t mask = 0;
	char buf[sizeof(p->rec.groups)];
	util_strlcpy(buf, p->rec.groups, sizeof(buf));
	char *save = NULL;
	for (char *g = strtok_r(buf, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
		/* A name for the group list must outlive buf: the project's
		 * own text is matched back to its stored spelling. */
		for (size_t i = 0; i < sn->w.n_groups; i++)
			if (!strcmp(sn->groups[i], g))
				mask |= 1ull << i;
	}
	/* None of its groups has a node or a session: a bit no agent has,
	 * so that "0 = every group" does not open them all. */
	return mask ? mask : 1ull << 63;
}

/* Whether every container of s's cluster session waits (all PENDING):
 * a session whose containers are not all there is not placed. */
static bool cluster_waits_whole(const struct msession *s)
{
	for (int64_t i = 1; i < s->rec.cluster_size; i++) {
		const struct msession *o = mgr_cluster_member(s, i);
		if (!o || o->rec.status != SS_PENDING)
			return false;
	}
	return true;
}

/* The record a placement is for: the request's session, or the member
 * of its cluster session that the placement names. */
static struct msession *placed_session(struct msession **pend, const struct sched_placement *pl)
{
	struct msession *s = pend[pl->request];
	return pl->member > 0 ? mgr_cluster_member(s, pl->member) : s;
}

/* Fills sn from the manager's state, with n_extra requests like tmpl
 * (owner, resources, project, group, priority) appended after every queued
 * one. Returns false on no memory or when there is nothing to plan (with
 * need_queue; without it, a world with no request is still built, for the
 * fair-share figures). Called with mu held. */
static bool snapshot_build(struct manager *m, struct snapshot *sn, const struct session_rec *tmpl, size_t n_extra,
			   bool need_queue)
{
	memset(sn, 0, sizeof(*sn));
	/* Preemption's candidates: preemptible RUNNING sessions, and those
	 * being ended (their room is coming free). The others are never a
	 * victim, and leaving them out keeps a pass over tens of thousands of
	 * sessions from copying them all. */
	size_t n_pending = n_extra, n_holding = 0;
	for (size_t i = 0; i < m->n_sessions; i++) {
		const struct msession *s = m->sessions[i];
		n_pending += s->rec.status == SS_PENDING;
		n_holding += (s->rec.preemptible && s->rec.status == SS_RUNNING) || session_status_ending(s->rec.status);
	}
	if (n_pending == 0 && need_queue)
		return false;
	/* Placements: one per container, a cluster session's all in one
	 * pass (its subs are counted in n_pending; the new ones of an
	 * estimate are n_extra gangs). */
	int64_t tmpl_gang = tmpl && tmpl->cluster_size > 1 ? tmpl->cluster_size : 1;
	size_t n_out = n_pending + n_extra * (size_t)(tmpl_gang - 1);
	size_t na = m->n_agents, nu = m->n_users, np = m->n_projects, nm = m->n_members;
	struct sched_world *w = &sn->w;
	sn->reqs = calloc(n_pending + 1, sizeof(*sn->reqs));
	sn->pend = calloc(n_pending + 1, sizeof(*sn->pend));
	w->agents = calloc(na + 1, sizeof(*w->agents));
	sn->devs = calloc(na * MGR_MAX_GPUS + 1, sizeof(*sn->devs));
	w->users = calloc(nu + 1, sizeof(*w->users));
	w->projects = calloc(np + 1, sizeof(*w->projects));
	w->members = calloc(nm + 1, sizeof(*w->members));
	sn->running = calloc(n_holding + 1, sizeof(*sn->running));
	sn->run_sess = calloc(n_holding + 1, sizeof(*sn->run_sess));
	sn->groups = calloc(SCHED_MAX_GROUPS, sizeof(*sn->groups));
	sn->out = calloc(n_out + 1, sizeof(*sn->out));
	sn->reasons = calloc(n_pending + 1, SCHED_REASON_MAX);
	sn->evictions = calloc(n_holding + 1, sizeof(*sn->evictions));
	if (!sn->reqs || !sn->pend || !w->agents || !sn->devs || !w->users || !w->projects || !w->members ||
	    !sn->running || !sn->run_sess || !sn->groups || !sn->out || !sn->reasons || !sn->evictions)
		return false;
	w->group_names = sn->groups;
	int64_t per_dev = mgr_per_device_m(m);
	w->n_users = nu;
	for (size_t u = 0; u < nu; u++) {
		if (strmap_put(&sn->user_ix, m->users[u].id, (void *)(uintptr_t)(u + 1)) < 0)
			return false;
		w->users[u].id = m->users[u].id;
		mgr_user_policy(m, m->users[u].email, &w->users[u].max_sessions, &w->users[u].max);
	}
	/* The resource groups: the default first, then the nodes', the
	 * sessions' and the projects' (a group no node is in yet still has
	 * an index, for reasons and masks). */
	group_index(sn, MGR_DEFAULT_GROUP);
	w->n_agents = na;
	for (size_t i = 0; i < na; i++) {
		struct magent *a = m->agents[i];
		struct sched_agent *sa = &w->agents[i];
		ssize_t g = group_index(sn, mgr_node_group(m, a->rec.id));
		sa->id = a->rec.id;
		sa->group = g < 0 ? SIZE_MAX : (size_t)g;
		sa->alive = a->alive;
		sa->drained = mgr_node_drained(m, a->rec.id) || g < 0;
		sa->capacity = a->rec.capacity;
		sa->free = a->rec.capacity;
		res_sub(&sa->free, &a->used);
		sa->devs = &sn->devs[i * MGR_MAX_GPUS];
		sa->n_devs = (size_t)a->n_gpus;
		for (int d = 0; d < a->n_gpus; d++)
			sa->devs[d].free_m = per_dev > a->gpus[d].used_m ? per_dev - a->gpus[d].used_m : 0;
		if (strmap_put(&sn->agent_ix, a->rec.id, (void *)(uintptr_t)(i + 1)) < 0)
			return false;
	}
	w->n_projects = np;
	for (size_t i = 0; i < np; i++) {
		struct mproject *p = m->projects[i];
		struct sched_project *sp = &w->projects[i];
		sp->id = p->rec.id;
		sp->name = p->rec.name;
		sp->max = p->rec.max;
		sp->max_sessions = p->rec.max_sessions;
		sp->weight = (double)p->rec.weight_milli / 1000.0;
		sp->usage = p->usage;
		if (strmap_put(&sn->project_ix, p->rec.id, (void *)(uintptr_t)(i + 1)) < 0)
			return false;
	}
	w->n_members = nm;
	for (size_t i = 0; i < nm; i++) {
		struct mmember *mb = m->members[i];
		struct sched_member *sm = &w->members[i];
		sm->project = index_of(&sn->project_ix, mb->rec.project_id) - 1;
		sm->user = 0;
		for (size_t u = 0; u < nu; u++)
			if (!strcmp(m->users[u].id, mb->rec.user_id))
				sm->user = u;
		sm->weight = (double)mb->rec.weight_milli / 1000.0;
		sm->usage = mb->usage;
		if (strmap_put(&sn->member_ix, mb->rec.id, (void *)(uintptr_t)(i + 1)) < 0)
			return false;
	}
	int64_t now = util_now_ms();
	size_t k = 0, nr = 0;
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		bool holds = session_status_holds(s->rec.status);
		if (!holds && s->rec.status != SS_PENDING)
			continue;
		/* Its owner's, project's and membership's indexes, looked up
		 * once per change of those lists (ix_gen), not at every pass. */
		if (s->ix_gen != m->ix_gen) {
			char mkey[sizeof(((struct member_rec *)0)->id)];
			member_key(s->rec.project_id, s->rec.owner_id, mkey);
			s->ix_user = index_of(&sn->user_ix, s->rec.owner_id);
			s->ix_project = index_of(&sn->project_ix, s->rec.project_id);
			s->ix_member = index_of(&sn->member_ix, mkey);
			s->ix_gen = m->ix_gen;
		}
		size_t u = s->ix_user, pj = s->ix_project, mb = s->ix_member;
		if (!u--)
			continue;   /* owner removed: only ended sessions are left of them */
		ssize_t g = s->rec.resource_group[0] && strcmp(s->rec.resource_group, MGR_DEFAULT_GROUP)
				    ? group_index(sn, s->rec.resource_group) : 0;
		/* A cluster session is one session, of all its containers'
		 * resources. */
		bool sub = mgr_session_is_sub(s);
		if (holds) {
			res_add(&w->users[u].used, &s->rec.req);
			w->users[u].sessions += !sub;
			if (pj) {
				res_add(&w->projects[pj - 1].used, &s->rec.req);
				w->projects[pj - 1].sessions += !sub;
			}
			if (mb)
				res_add(&w->members[mb - 1].used, &s->rec.req);
			if (!pj || !mb || !((s->rec.preemptible && s->rec.status == SS_RUNNING) ||
					     session_status_ending(s->rec.status)))
				continue;   /* never a victim (see n_holding) */
			size_t ag = index_of(&sn->agent_ix, s->rec.agent_id);
			if (!ag)
				continue;
			struct sched_running *r = &sn->running[nr];
			r->session_id = s->rec.id;
			r->name = s->rec.name;
			r->agent = ag - 1;
			r->req = s->rec.req;
			r->n_shares = (size_t)s->n_shares;
			for (int d = 0; d < s->n_shares && d < SCHED_MAX_DEVICES; d++) {
				r->shares[d].device = (size_t)s->shares[d].index;
				r->shares[d].fgpu_m = s->shares[d].fgpu_m;
			}
			r->user = u;
			r->project = pj - 1;
			r->member = mb - 1;
			r->priority = (int)s->rec.priority;
			/* Only a RUNNING session is a victim: one on its way up
			 * is left to start, a LOST one may not be reachable. */
			r->preemptible = s->rec.preemptible && s->rec.status == SS_RUNNING;
			int64_t since = s->running_since_ms ? s->running_since_ms : s->rec.started_ms;
			r->runtime_ms = since && now > since ? now - since : 0;
			r->ending = session_status_ending(s->rec.status);
			sn->run_sess[nr++] = s;
			continue;
		}
		if (!pj || !mb || g < 0)
			continue;   /* cannot happen: every session has a project its owner is in */
		/* Not before its start time (starts_at): the safety pass, once
		 * a second, takes it in once the time has come. Its status_info
		 * says so from its creation. */
		if (s->rec.starts_at_ms > now)
			continue;
		/* A cluster session waits as one request, its main's: a gang
		 * of its containers, all of them waiting. */
		if (sub || !cluster_waits_whole(s))
			continue;
		sn->pend[k] = s;
		struct sched_request *rq = &sn->reqs[k++];
		rq->session_id = s->rec.id;
		rq->name = s->rec.name;
		rq->req = s->rec.req;
		rq->user = u;
		rq->project = pj - 1;
		rq->member = mb - 1;
		rq->group = (size_t)g;
		rq->priority = (int)s->rec.priority;
		rq->seq = s->rec.seq;
		rq->failed_passes = s->failed_passes;
		rq->gang = (int)s->rec.cluster_size;
		rq->gang_single_node = !strcmp(s->rec.cluster_mode, STORE_CLUSTER_SINGLE_NODE);
	}
	w->running = sn->running;
	w->n_running = nr;
	for (size_t e = 0; tmpl && e < n_extra; e++) {
		size_t u = index_of(&sn->user_ix, tmpl->owner_id);
		size_t pj = index_of(&sn->project_ix, tmpl->project_id);
		char mkey[sizeof(((struct member_rec *)0)->id)];
		member_key(tmpl->project_id, tmpl->owner_id, mkey);
		size_t mb = index_of(&sn->member_ix, mkey);
		ssize_t g = group_index(sn, tmpl->resource_group[0] ? tmpl->resource_group : MGR_DEFAULT_GROUP);
		if (!u-- || !pj || !mb || g < 0)
			return false;   /* cannot happen: the caller is a member */
		struct sched_request *rq = &sn->reqs[k++];
		rq->session_id = "";
		rq->name = "the new session";
		rq->req = tmpl->req;
		rq->user = u;
		rq->project = pj - 1;
		rq->member = mb - 1;
		rq->group = (size_t)g;
		rq->priority = (int)tmpl->priority;
		rq->seq = m->next_seq + (int64_t)e;
		rq->gang = (int)tmpl_gang;
		rq->gang_single_node = !strcmp(tmpl->cluster_mode, STORE_CLUSTER_SINGLE_NODE);
	}
	sn->k = k;
	/* Last, once every group a node or session names has its index. */
	for (size_t i = 0; i < np; i++)
		w->projects[i].groups = groups_mask(sn, m->projects[i]);
	sn->params = (struct sched_params){
		.selector = m->settings.selector,
		.queue = m->settings.queue,
		.per_device_m = per_dev,
		.quantum_m = m->settings.fgpu_quantum_m,
		.fifo_skip_after = m->settings.fifo_skip_after,
		.preempt = m->settings.preemption,
		.preempt_min_runtime_ms = m->settings.preemption_min_runtime_s * 1000,
	};
	return k > 0 || !need_queue;
}

/* The queue view's figures after a pass (queue.c): each session's place
 * among those left waiting, in the order the pass tried them, and the
 * pass in its scheduling history, why it waits or where it was placed.
 * order NULL (no memory): the places stay as they were. */
static void queue_note_pass(struct msession **pend, size_t k, char (*reasons)[SCHED_REASON_MAX],
			    const size_t *order)
{
	int64_t now = util_now_ms();
	size_t *by_order = order ? calloc(k, sizeof(*by_order)) : NULL;
	for (size_t i = 0; by_order && i < k; i++)
		if (order[i] > 0 && order[i] <= k)
			by_order[order[i] - 1] = i + 1;
	size_t pos = 0;
	for (size_t o = 0; by_order && o < k; o++) {
		if (!by_order[o])
			continue;
		struct msession *s = pend[by_order[o] - 1];
		s->queue_pos = s->rec.status == SS_PENDING ? ++pos : 0;
	}
	free(by_order);
	for (size_t i = 0; i < k; i++) {
		struct msession *s = pend[i];
		const char *why = s->rec.status == SS_PENDING ? reasons[i] : s->rec.status_info;
		if (!why[0])
			why = "waiting to be scheduled";
		if (qhist_note(&s->qhist, why, now) < 0)
			log_warn("manager", "no memory for the scheduling history of %s", s->rec.name);
	}
}

/* One scheduling pass over the snapshot of the queue, the agents (with
 * their devices) and the users; decisions are committed in one
 * transaction. Called with mu held. */
static void schedule_pass(struct manager *m)
{
	struct snapshot sn;
	size_t *order = NULL;
	if (!snapshot_build(m, &sn, NULL, 0, true))
		goto done;
	size_t k = sn.k;
	struct msession **pend = sn.pend;
	char (*reasons)[SCHED_REASON_MAX] = sn.reasons;
	order = calloc(k, sizeof(*order));
	struct sched_result res = {.reasons = reasons, .blocked_head = -1, .evictions = sn.evictions,
				   .order = order};
	size_t placed = sched_plan(&sn.params, &sn.w, sn.reqs, k, sn.out, &res);
	ssize_t blocked = res.blocked_head;
	/* Victims first: their containers go while the placements are
	 * stored (each preemption is its own status change, stored as it is
	 * made). */
	for (size_t i = 0; i < res.n_evictions; i++) {
		struct msession *v = sn.run_sess[res.evictions[i].running];
		if (v->rec.status == SS_RUNNING)
			mgr_session_preempt(m, v, res.evictions[i].why);
	}

	struct terr err = {0};
	/* A placement is only made when it can be stored: one a restart
	 * would not find would be placed again, and started twice. */
	if (placed && m->so->begin(m->store, &err) < 0) {
		log_error("manager", "cannot store scheduling decisions: %s", err.msg);
		goto done;
	}
	bool txn = placed > 0;
	for (size_t i = 0; i < placed; i++) {
		struct msession *s = placed_session(pend, &sn.out[i]);
		struct magent *a = m->agents[sn.out[i].agent];
		if (!s)
			continue;   /* cannot happen: cluster_waits_whole saw them all */
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
		/* A cluster session's containers wait for the same reason. */
		for (int64_t c = 1; s->cl_members && c < s->rec.cluster_size; c++)
			if (s->cl_members[c] && s->cl_members[c]->rec.status == SS_PENDING)
				util_strlcpy(s->cl_members[c]->rec.status_info, reasons[i],
					     sizeof(s->cl_members[c]->rec.status_info));
	}
	if (changed) {
		m->version++;
		pthread_cond_broadcast(&m->changed);
	}
	queue_note_pass(pend, k, reasons, order);
	if (txn && m->so->commit(m->store, &err) < 0) {
		log_error("manager", "cannot commit scheduling decisions: %s", err.msg);
		m->so->rollback(m->store);
		/* Nothing of them is stored (the database went away during
		 * the pass): they are undone, and their start jobs, which find
		 * the sessions PENDING again, do nothing. */
		for (size_t i = 0; i < placed; i++) {
			struct msession *s = placed_session(pend, &sn.out[i]);
			if (!s || s->rec.status != SS_SCHEDULED)
				continue;
			mgr_set_status(m, s, SS_PENDING, "waiting to be scheduled (the placement could not be stored)");
			s->rec.agent_id[0] = '\0';
			s->n_shares = 0;
			mgr_shares_to_json(s);
			m->placements--;
		}
	}
done:
	free(order);
	snapshot_free(&sn);
}

bool mgr_sched_estimate(struct manager *m, const struct session_rec *tmpl, int64_t count, char *why, size_t n)
{
	/* The same plan a pass would make now, with the new sessions queued
	 * last: they fit now when every one of them is placed. Nothing is
	 * committed. */
	struct snapshot sn;
	memset(&sn, 0, sizeof(sn));
	why[0] = '\0';
	if (count < 1 || !snapshot_build(m, &sn, tmpl, (size_t)count, true)) {
		snapshot_free(&sn);
		snprintf(why, n, "cannot estimate now (out of memory)");
		return false;
	}
	size_t first_new = sn.k - (size_t)count;
	struct sched_result res = {.reasons = sn.reasons, .blocked_head = -1};
	sn.params.preempt = false;   /* an estimate preempts nothing */
	size_t placed = sched_plan(&sn.params, &sn.w, sn.reqs, sn.k, sn.out, &res);
	bool *done = calloc((size_t)count, sizeof(bool));
	size_t n_new = 0;
	for (size_t i = 0; done && i < placed; i++) {
		if (sn.out[i].request >= first_new && sn.out[i].member == 0) {
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
			mgr_fairshare_tick(m);
			mgr_batch_timeouts(m);
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

/* The usage of a project or member as JSON: resource-seconds decayed. */
static json_t *usage_json(const struct sched_usage *u)
{
	return json_pack("{s:f,s:f,s:f}", "cpu_s", u->cpu_s, "mem_gib_s", u->mem_s, "fgpu_s", u->fgpu_s);
}

json_t *mgr_fairshare_json(struct manager *m, const struct user_rec *u)
{
	pthread_mutex_lock(&m->mu);
	struct snapshot sn;
	json_t *out = NULL;
	struct sched_share *ps = NULL, *ms = NULL;
	if (!snapshot_build(m, &sn, NULL, 0, false))
		goto done;
	ps = calloc(sn.w.n_projects + 1, sizeof(*ps));
	ms = calloc(sn.w.n_members + 1, sizeof(*ms));
	if (!ps || !ms)
		goto done;
	sched_fairshare_projects(&sn.w, ps);
	json_t *projects = json_array();
	for (size_t i = 0; i < sn.w.n_projects; i++) {
		const struct mproject *p = m->projects[i];
		/* Admins see every project; others those they are in. */
		if (!u->is_admin && !mgr_find_member(m, p->rec.id, u->id))
			continue;
		sched_fairshare_members(&sn.w, i, ms);
		json_t *users = json_array();
		for (size_t k = 0; k < sn.w.n_members; k++) {
			if (sn.w.members[k].project != i)
				continue;
			const struct user_rec *mu = mgr_find_user(m, m->members[k]->rec.user_id);
			json_array_append_new(users, json_pack("{s:s,s:f,s:f,s:o,s:f,s:f,s:I}",
				"email", mu ? mu->email : m->members[k]->rec.user_id, "weight", sn.w.members[k].weight,
				"target", ms[k].target, "usage", usage_json(&sn.w.members[k].usage),
				"usage_share", ms[k].usage_share, "current_share", ms[k].current_share,
				"rank", (json_int_t)ms[k].rank));
		}
		json_array_append_new(projects, json_pack("{s:s,s:b,s:f,s:f,s:o,s:f,s:f,s:I,s:o}",
			"name", p->rec.name, "personal", p->rec.personal, "weight", sn.w.projects[i].weight,
			"target", ps[i].target, "usage", usage_json(&sn.w.projects[i].usage),
			"usage_share", ps[i].usage_share, "current_share", ps[i].current_share,
			"rank", (json_int_t)ps[i].rank, "users", users));
	}
	out = json_pack("{s:s,s:I,s:b,s:I,s:o}", "queue_policy", m->settings.queue->name,
			"half_life_s", (json_int_t)m->settings.fairshare_half_life_s,
			"preemption", m->settings.preemption,
			"preemption_min_runtime_s", (json_int_t)m->settings.preemption_min_runtime_s,
			"projects", projects);
done:
	free(ps);
	free(ms);
	snapshot_free(&sn);
	pthread_mutex_unlock(&m->mu);
	return out;
}
