/* The pending queue as the API shows it (docs/scheduling.md, "The queue
 * and its history"): the PENDING sessions in the order the last pass
 * tried them, each with its priority and why it waits; one session's
 * scheduling history (qhist.h); and an admin's move of a waiting session,
 * which is a change of its priority, the one thing that orders the queue
 * across every queue policy (the policy orders only within a priority
 * level: sched.h). */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "manager/state.h"

#define PRIORITY_MAX 100   /* validate.c's bound for a create's priority */

/* A waiting session's line in the queue (under the lock). */
static json_t *entry_json(struct manager *m, const struct msession *s)
{
	const struct user_rec *owner = mgr_find_user(m, s->rec.owner_id);
	const struct mproject *p = mgr_find_project(m, s->rec.project_id);
	return json_pack("{s:s,s:s,s:s,s:s,s:o,s:I,s:s,s:o,s:o,s:s,s:o,s:I,s:I}",
		"id", s->rec.id, "name", s->rec.name, "owner", owner ? owner->email : "",
		"status", session_status_name(s->rec.status),
		"position", s->queue_pos ? json_integer((json_int_t)s->queue_pos) : json_null(),
		"priority", (json_int_t)s->rec.priority, "reason", s->rec.status_info,
		"resources", mgr_res_json(&s->rec.req),
		"project", p ? json_string(p->rec.name) : json_null(),
		"group", s->rec.resource_group[0] ? s->rec.resource_group : MGR_DEFAULT_GROUP,
		"created_at", mgr_time_json(s->rec.created_ms),
		"passes", (json_int_t)(s->qhist ? s->qhist->passes : 0),
		"containers", (json_int_t)(s->rec.cluster_size > 1 ? s->rec.cluster_size : 1));
}

static int by_position(const void *x, const void *y)
{
	const struct msession *a = *(const struct msession *const *)x, *b = *(const struct msession *const *)y;
	/* Those no pass has looked at yet come last, oldest first. */
	if (!a->queue_pos != !b->queue_pos)
		return a->queue_pos ? -1 : 1;
	if (a->queue_pos != b->queue_pos)
		return a->queue_pos < b->queue_pos ? -1 : 1;
	return a->rec.seq < b->rec.seq ? -1 : a->rec.seq > b->rec.seq;
}

json_t *mgr_queue_json(struct manager *m, const struct user_rec *u)
{
	pthread_mutex_lock(&m->mu);
	struct msession **q = calloc(m->n_sessions + 1, sizeof(*q));
	size_t n = 0, total = 0;
	for (size_t i = 0; q && i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		if (s->rec.status != SS_PENDING || mgr_session_is_sub(s))
			continue;
		total++;
		if (mgr_session_visible(m, u, s))
			q[n++] = s;
	}
	json_t *arr = json_array();
	if (q) {
		qsort(q, n, sizeof(*q), by_position);
		for (size_t i = 0; i < n; i++)
			json_array_append_new(arr, entry_json(m, q[i]));
	}
	free(q);
	/* The whole queue's length, so that a user who sees only their own
	 * entries knows how many wait in all (not whose). */
	json_t *o = json_pack("{s:s,s:I,s:o}", "queue_policy", m->settings.queue->name, "pending",
			      (json_int_t)total, "sessions", arr);
	pthread_mutex_unlock(&m->mu);
	return o;
}

int mgr_session_scheduling(struct manager *m, const struct user_rec *u, const char *ref, json_t **out,
			   struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_resolve_session(m, ref, u);
	if (s && s->cl_main && s->cl_main != s)
		s = s->cl_main;   /* a cluster session waits as one, its main */
	if (!s) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "no session named or with id '%s' (tessera session ls lists yours)", ref);
	}
	json_t *o = entry_json(m, s);
	if (s->rec.status != SS_PENDING)
		json_object_set(o, "reason", json_null());
	json_t *hist = json_array();
	for (size_t i = 0; s->qhist && i < s->qhist->n; i++) {
		const struct qhist_entry *e = &s->qhist->e[i];
		json_array_append_new(hist, json_pack("{s:s,s:o,s:o,s:I}", "reason", e->reason, "first",
						      mgr_time_json(e->first_ms), "last", mgr_time_json(e->last_ms),
						      "passes", (json_int_t)e->passes));
	}
	json_object_set_new(o, "history", hist);
	json_object_set_new(o, "history_max", json_integer(QHIST_MAX));
	pthread_mutex_unlock(&m->mu);
	*out = o;
	return 0;
}

int mgr_queue_move(struct manager *m, const struct user_rec *u, const char *ref, int priority, bool top,
		   json_t **out, struct terr *err)
{
	if (!u->is_admin)
		return terr_set(err, EPERM, "only an admin may move sessions in the queue");
	if (!top && (priority < 0 || priority > PRIORITY_MAX))
		return terr_set(err, EINVAL, "priority must be an integer from 0 to %d (higher starts first)",
				PRIORITY_MAX);
	pthread_mutex_lock(&m->mu);
	int rc = 0;
	struct msession *s = mgr_resolve_session(m, ref, u);
	if (s && s->cl_main && s->cl_main != s)
		s = s->cl_main;
	if (!s) {
		rc = terr_set(err, ENOENT, "no session named or with id '%s' (tessera queue ls lists the queue)", ref);
		goto out;
	}
	if (s->rec.status != SS_PENDING) {
		rc = terr_set(err, EBUSY, "session %s is %s, not waiting in the queue: only a PENDING session can be "
			      "moved", s->rec.name, session_status_name(s->rec.status));
		goto out;
	}
	int64_t old = s->rec.priority, want = priority;
	if (top) {
		/* Ahead of every other waiting session: one priority above the
		 * highest of theirs (the order within a level is the queue
		 * policy's, which no move overrides). */
		int64_t highest = -1;
		for (size_t i = 0; i < m->n_sessions; i++) {
			const struct msession *o = m->sessions[i];
			if (o != s && o->rec.status == SS_PENDING && !mgr_session_is_sub(o) && o->rec.priority > highest)
				highest = o->rec.priority;
		}
		want = highest < old ? old : highest + 1;
		if (want > PRIORITY_MAX) {
			rc = terr_set(err, ERANGE, "cannot move %s to the front: other sessions wait at the highest "
				      "priority (%d); lower theirs first (tessera queue move NAME --priority N)",
				      s->rec.name, PRIORITY_MAX);
			goto out;
		}
	}
	if (want != old) {
		s->rec.priority = want;
		/* For a cluster session, its containers' records say the same. */
		for (int64_t c = 1; s->cl_members && c < s->rec.cluster_size; c++)
			if (s->cl_members[c]) {
				s->cl_members[c]->rec.priority = want;
				mgr_persist(m, s->cl_members[c]);
			}
		/* Stored (mgr_session_note persists the record) and in its
		 * status history, as any change an admin makes to it. */
		mgr_session_note(m, s, "priority changed from %lld to %lld by %s%s", (long long)old,
				 (long long)want, u->email, top ? " (moved to the front of the queue)" : "");
		mgr_wake_scheduler(m);
		log_info("manager", "session %s: priority %lld -> %lld by %s", s->rec.name, (long long)old,
			 (long long)want, u->email);
	}
	*out = entry_json(m, s);
	json_object_set_new(*out, "previous_priority", json_integer(old));
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}
