/* GET /v1/usage/summary's core (docs/api.md, "Usage summary"): which
 * sessions the caller may count, copied out under the lock; the sums
 * themselves are usage_summary.c's, done after the lock is let go. The
 * sessions' records already keep when each first ran and ended and what
 * it asked for, so no new store data is needed. */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "manager/state.h"
#include "manager/usage_summary.h"

/* One session's copy: the strings usum_session points at. */
struct copied {
	struct usum_session s;
	char user[256];
	char project[STORE_NAME_MAX];
};

int mgr_usage_summary(struct manager *m, const struct user_rec *u, const struct usum_query *q,
		      struct usum_row **rows, size_t *n_rows, struct terr *err)
{
	/* Others' usage is an admin's: a user sees their own only. */
	if (q->user[0] && !u->is_admin && strcmp(q->user, u->email))
		return terr_set(err, EPERM, "only an admin may see another user's usage (leave out user to see your "
				"own)");
	pthread_mutex_lock(&m->mu);
	const struct user_rec *only = u->is_admin ? NULL : u;
	if (q->user[0] && !(only = mgr_find_user_by_email(m, q->user))) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "no user with email %s", q->user);
	}
	const struct mproject *project = q->project[0] ? mgr_find_project_by_name(m, q->project) : NULL;
	/* A project the caller is not in reads as a missing one. */
	if (q->project[0] && (!project || mgr_project_role(m, project, u) == ROLE_NONE)) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "no project named '%s' (tessera project ls lists yours)", q->project);
	}
	struct copied *c = calloc(m->n_sessions ? m->n_sessions : 1, sizeof(*c));
	if (!c) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOMEM, "out of memory");
	}
	size_t n = 0;
	for (size_t i = 0; i < m->n_sessions; i++) {
		const struct msession *s = m->sessions[i];
		if (!s->rec.started_ms || (only && strcmp(s->rec.owner_id, only->id)) ||
		    (project && strcmp(s->rec.project_id, project->rec.id)))
			continue;
		/* Ended before the window, or first ran after it: nothing in it. */
		if ((s->rec.terminated_ms && s->rec.terminated_ms < q->from_ms) || s->rec.started_ms >= q->to_ms)
			continue;
		const struct user_rec *owner = mgr_find_user(m, s->rec.owner_id);
		const struct mproject *p = mgr_find_project(m, s->rec.project_id);
		struct copied *x = &c[n++];
		util_strlcpy(x->user, owner ? owner->email : "(removed user)", sizeof(x->user));
		util_strlcpy(x->project, p ? p->rec.name : "(no project)", sizeof(x->project));
		x->s = (struct usum_session){
			.started_ms = s->rec.started_ms, .ended_ms = s->rec.terminated_ms, .cpu_m = s->rec.req.cpu_m,
			.mem = s->rec.req.mem, .fgpu_m = s->rec.req.fgpu_m, .counts_start = !mgr_session_is_sub(s),
		};
	}
	pthread_mutex_unlock(&m->mu);
	struct usum_session *list = malloc((n ? n : 1) * sizeof(*list));
	int rc = list ? 0 : terr_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; list && i < n; i++) {
		list[i] = c[i].s;
		list[i].user = c[i].user;
		list[i].project = c[i].project;
	}
	if (list)
		rc = usum_compute(list, n, q, util_now_ms(), rows, n_rows, err);
	free(list);
	free(c);
	return rc;
}
