/* Sessions: the list in creation order with its id index, creation with
 * the placement check, deletion, the long poll, and the calls that reach a
 * session's container (logs, exec). Status changes themselves go through
 * mgr_set_status (manager.c); the scheduler (scheduler.c) and the dispatch
 * workers (dispatch.c) move sessions on from PENDING. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/sign.h"
#include "common/units.h"
#include "common/util.h"
#include "manager/logtail.h"
#include "manager/state.h"

/* ---------- the list ---------- */

struct msession *mgr_find_session(struct manager *m, const char *id)
{
	return strmap_get(&m->session_by_id, id);
}

static void name_key(const char *owner_id, const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s\x1f%s", owner_id, name);
}

/* By id, or by name among owner_id's sessions: the newest active one of
 * that name, else the newest ended one (session_by_name says why that
 * is the newest of the name). An id wins over a name. */
static struct msession *resolve_among(struct manager *m, const char *ref, const char *owner_id,
				      const struct user_rec *viewer)
{
	struct msession *s = strmap_get(&m->session_by_id, ref);
	/* A cluster session's sub by its own id is the session. */
	if (s && s->cl_main)
		s = s->cl_main;
	if (s && (viewer ? mgr_session_visible(m, viewer, s) : !strcmp(s->rec.owner_id, owner_id)))
		return s;
	char key[sizeof(s->name_key)];
	name_key(owner_id, ref, key, sizeof(key));
	return strmap_get(&m->session_by_name, key);
}

struct msession *mgr_resolve_session(struct manager *m, const char *ref, const struct user_rec *user)
{
	/* "REF/CONTAINER": one container of a cluster session (main1,
	 * sub1...); names and ids have no '/'. */
	const char *slash = strchr(ref, '/');
	if (slash) {
		char base[STORE_NAME_MAX + STORE_ID_MAX];
		if ((size_t)(slash - ref) >= sizeof(base))
			return NULL;
		memcpy(base, ref, (size_t)(slash - ref));
		base[slash - ref] = '\0';
		struct msession *s = resolve_among(m, base, user->id, user);
		return s ? mgr_cluster_find(s, slash + 1) : NULL;
	}
	/* A name is the caller's own, admins included: an admin whose
	 * session shares its name with another user's must not reach the
	 * other one by it. An admin (or a project's manager) reaches anyone's
	 * (anyone's in the project) by id, or by name with the owner given
	 * (mgr_session_lookup). */
	return resolve_among(m, ref, user->id, user);
}

int mgr_session_lookup(struct manager *m, const struct user_rec *u, const char *ref, const char *owner_email,
		       char id[STORE_ID_MAX], struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	const struct user_rec *owner = NULL;
	for (size_t i = 0; i < m->n_users && !owner; i++)
		if (!strcmp(m->users[i].email, owner_email))
			owner = &m->users[i];
	struct msession *s = owner ? resolve_among(m, ref, owner->id, NULL) : NULL;
	/* Another user's session: an admin's to reach, or a manager's of
	 * its project; to anyone else, it does not exist (a user who manages
	 * no project learns nothing of others' session names). */
	if (!u->is_admin && strcmp(owner_email, u->email)) {
		if (!mgr_manages_a_project(m, u)) {
			pthread_mutex_unlock(&m->mu);
			return terr_set(err, EPERM, "only an admin or a project's manager may act on another user's "
					"sessions");
		}
		if (s && !mgr_session_visible(m, u, s))
			s = NULL;
	}
	if (s)
		util_strlcpy(id, s->rec.id, STORE_ID_MAX);
	pthread_mutex_unlock(&m->mu);
	if (!owner)
		return terr_set(err, ENOENT, "no user with email %s", owner_email);
	if (!s)
		return terr_set(err, ENOENT, "%s has no session named or with id '%s'", owner_email, ref);
	return 0;
}

int mgr_session_append(struct manager *m, struct msession *s)
{
	if (m->n_sessions == m->cap_sessions) {
		size_t ncap = m->cap_sessions ? m->cap_sessions * 2 : 64;
		struct msession **n = realloc(m->sessions, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		m->sessions = n;
		m->cap_sessions = ncap;
	}
	name_key(s->rec.owner_id, s->rec.name, s->name_key, sizeof(s->name_key));
	if (mgr_cluster_link(m, s) < 0)
		return -ENOMEM;
	if (strmap_put(&m->session_by_id, s->rec.id, s) < 0)
		return -ENOMEM;
	/* Appended in sequence order: the newest of a name replaces the
	 * older one. A cluster session's subs share its name: the name is
	 * its main's. */
	if (!mgr_session_is_sub(s) && strmap_put(&m->session_by_name, s->name_key, s) < 0) {
		strmap_del(&m->session_by_id, s->rec.id);
		return -ENOMEM;
	}
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
		/* Every session is in a project and a group: a caller that
		 * gave none (the benchmarks, white-box tests) gets its owner's
		 * personal project and the default group, as a create without
		 * --project by a user in no team does. */
		const struct mproject *own = s->rec.project_id[0] ? NULL : mgr_personal_project(m, s->rec.owner_id);
		if (own)
			util_strlcpy(s->rec.project_id, own->rec.id, sizeof(s->rec.project_id));
		if (!s->rec.resource_group[0])
			util_strlcpy(s->rec.resource_group, MGR_DEFAULT_GROUP, sizeof(s->rec.resource_group));
		s->rec.seq = m->next_seq + (int64_t)i;
		s->rec.status = SS_PENDING;
		s->rec.created_ms = now;
		util_strlcpy(s->rec.status_info, "waiting to be scheduled", sizeof(s->rec.status_info));
		if (s->rec.starts_at_ms > now) {
			/* The scheduler leaves it out of its passes until then
			 * (scheduler.c), so nothing else writes its reason. */
			char at[40];
			util_format_time_ms(s->rec.starts_at_ms, at, sizeof(at));
			snprintf(s->rec.status_info, sizeof(s->rec.status_info), "waiting for its start time, %s", at);
		}
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
		if (mgr_session_append(m, news[i]) < 0) {
			/* Those appended are the manager's now: not the caller's
			 * to free. */
			for (size_t k = 0; k < i; k++)
				news[k] = NULL;
			return terr_set(err, ENOMEM, "out of memory");
		}
		log_info("manager", "session %s (%.8s) created PENDING", news[i]->rec.name, news[i]->rec.id);
	}
	m->next_seq += (int64_t)n;
	mgr_wake_scheduler(m);
	pthread_cond_broadcast(&m->changed);
	return 0;
}

void mgr_session_preempt(struct manager *m, struct msession *s, const char *why)
{
	s->rec.preemptions++;
	mgr_set_status(m, s, SS_PREEMPTED, "%s", why);
	mgr_enqueue_destroy(m, s);
}

void mgr_session_preempt_done(struct manager *m, struct msession *s)
{
	const struct user_rec *owner = mgr_find_user(m, s->rec.owner_id);
	if (owner && !strcmp(mgr_user_on_preempt(m, owner->email), "end")) {
		mgr_set_status(m, s, SS_TERMINATED, "ended after preemption (its owner's policy: on_preempt end)");
		return;
	}
	/* Back in the queue, where it started: its place (seq) is kept, so
	 * it goes before sessions created after it. mgr_set_status frees
	 * what it held on its node, by its agent and shares; they are
	 * cleared after. */
	mgr_set_status(m, s, SS_PENDING, "requeued after preemption %lld; waiting to be scheduled",
		       (long long)s->rec.preemptions);
	s->rec.agent_id[0] = '\0';
	s->rec.container_id[0] = '\0';
	s->rec.app_endpoint[0] = '\0';
	s->rec.has_exit_code = false;
	s->n_shares = 0;
	mgr_shares_to_json(s);
	s->failed_passes = 0;
	mgr_persist(m, s);
	mgr_wake_scheduler(m);
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
	case SS_LOST:
	case SS_PREEMPTED:
		mgr_set_status(m, s, SS_TERMINATING, "terminating on request of %s", by);
		mgr_enqueue_destroy(m, s);
		break;
	case SS_TERMINATED:
		if (!mgr_session_is_batch(s))
			break;   /* its container is gone already */
		/* fall through */
	case SS_ERROR:
		/* An ended container (ERROR, or a batch session's that
		 * finished) is kept for its logs; removing the session removes
		 * it, and the session leaves the list as TERMINATED ones do. */
		if (s->rec.container_id[0])
			mgr_enqueue_destroy(m, s);
		if (!s->rec.removed) {
			s->rec.removed = true;
			mgr_persist(m, s);
			m->version++;
			pthread_cond_broadcast(&m->changed);
			log_info("manager", "session %s (%.8s) removed by %s", s->rec.name, s->rec.id, by);
		}
		break;
	default:
		break;
	}
	/* A cluster session's other containers: the main's change has ended
	 * those still up (mgr_cluster_follow); those already ended keep
	 * their containers for their logs until now. */
	for (int64_t i = 1; s->cl_members && i < s->rec.cluster_size; i++)
		if (s->cl_members[i] && s->cl_members[i] != s)
			mgr_delete_session(m, s->cl_members[i], by);
}

/* Lines of s's stored history without a change of status (one store
 * read, once per session loaded at start). */
static int count_notes(struct manager *m, const struct msession *s)
{
	struct history_rec *h = NULL;
	size_t n = 0;
	struct terr err = {0};
	if (m->so->history_get(m->store, s->rec.id, &h, &n, &err) < 0)
		return -1;
	int notes = 0;
	for (size_t i = 1; i < n; i++)
		notes += h[i].status == h[i - 1].status;
	free(h);
	return notes;
}

void mgr_session_note(struct manager *m, struct msession *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->rec.status_info, sizeof(s->rec.status_info), fmt, ap);
	va_end(ap);
	m->version++;
	mgr_persist(m, s);
	if (s->notes < 0)
		s->notes = count_notes(m, s);
	/* Capped, so that no event repeated for days grows a session's
	 * history without end; status changes are always written. */
	if (s->notes >= 0 && s->notes < MGR_SESSION_NOTES_MAX) {
		struct history_rec h = {.status = s->rec.status, .at_ms = util_now_ms()};
		util_strlcpy(h.info, s->rec.status_info, sizeof(h.info));
		/* A note cut at the end loses only words. */
		if (s->notes + 1 == MGR_SESSION_NOTES_MAX)
			strncat(h.info, " (the last such line this history keeps)", sizeof(h.info) - strlen(h.info) - 1);
		struct terr err = {0};
		if (m->so->history_add(m->store, s->rec.id, &h, &err) < 0)
			log_error("manager", "cannot save history of %s: %s", s->rec.name, err.msg);
		else
			s->notes++;
	}
	log_info("manager", "session %s (%.8s): %s: %s", s->rec.name, s->rec.id,
		 session_status_name(s->rec.status), s->rec.status_info);
	pthread_cond_broadcast(&m->changed);
}

void mgr_session_note_past(struct manager *m, struct msession *s, int64_t at_ms, const char *info)
{
	/* Not counted against the cap: a start writes a few, once. */
	struct history_rec h = {.status = s->rec.status, .at_ms = at_ms};
	util_strlcpy(h.info, info, sizeof(h.info));
	struct terr err = {0};
	if (m->so->history_add(m->store, s->rec.id, &h, &err) < 0)
		log_error("manager", "cannot save history of %s: %s", s->rec.name, err.msg);
}

/* ---------- rendering ---------- */

static json_t *session_json_base(struct manager *m, const struct msession *s)
{
	const struct user_rec *owner = mgr_find_user(m, s->rec.owner_id);
	json_t *env = s->rec.env_json ? json_loads(s->rec.env_json, 0, NULL) : NULL;
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:b}",
		"id", s->rec.id, "name", s->rec.name, "owner", owner ? owner->email : "",
		"image", s->rec.image, "status", session_status_name(s->rec.status),
		"status_info", s->rec.status_info,
		"agent", s->rec.agent_id[0] ? json_string(s->rec.agent_id) : json_null(),
		"container_id", s->rec.container_id[0] ? json_string(s->rec.container_id) : json_null(),
		"resources", mgr_res_json(&s->rec.req),
		"env", env ? env : json_object(),
		"startup_command", s->rec.startup_command ? json_string(s->rec.startup_command) : json_null(),
		"exit_code", s->rec.has_exit_code ? json_integer(s->rec.exit_code) : json_null(),
		"created_at", mgr_time_json(s->rec.created_ms),
		"started_at", mgr_time_json(s->rec.started_ms),
		"terminated_at", mgr_time_json(s->rec.terminated_ms),
		"root", s->rec.run_as_root);
}

/* type, oom_kills and removed, on top of session_json_base. */
static void session_json_more(const struct msession *s, json_t *o)
{
	json_object_set_new(o, "type", json_string(mgr_session_is_batch(s) ? STORE_TYPE_BATCH
									   : STORE_TYPE_INTERACTIVE));
	json_object_set_new(o, "oom_kills", json_integer(s->rec.oom_kills));
	json_object_set_new(o, "removed", json_boolean(s->rec.removed));
}

/* Adds the device shares: "gpus": [{"index","uuid","fgpu"}]. */
json_t *mgr_session_json(struct manager *m, const struct msession *s)
{
	json_t *o = session_json_base(m, s);
	session_json_more(s, o);
	json_t *gpus = json_array();
	for (int i = 0; i < s->n_shares; i++)
		json_array_append_new(gpus, json_pack("{s:i,s:s,s:o}", "index", s->shares[i].index,
						      "uuid", s->shares[i].uuid, "fgpu", jsonutil_milli(s->shares[i].fgpu_m)));
	json_object_set_new(o, "gpus", gpus);
	/* docs/scheduling.md: its project (by name), resource group,
	 * priority, preemptibility and the times it was preempted. */
	const struct mproject *p = mgr_find_project(m, s->rec.project_id);
	json_object_set_new(o, "project", p ? json_string(p->rec.name) : json_null());
	json_object_set_new(o, "group", json_string(s->rec.resource_group[0] ? s->rec.resource_group
									       : MGR_DEFAULT_GROUP));
	json_object_set_new(o, "priority", json_integer(s->rec.priority));
	json_object_set_new(o, "preemptible", json_boolean(s->rec.preemptible));
	json_object_set_new(o, "preemptions", json_integer(s->rec.preemptions));
	/* The full launcher's choices (docs/api.md, "POST /v1/sessions"). */
	json_object_set_new(o, "starts_at", mgr_time_json(s->rec.starts_at_ms));
	json_object_set_new(o, "batch_timeout", s->rec.batch_timeout_s ? json_integer(s->rec.batch_timeout_s)
								       : json_null());
	json_t *ports = json_array();
	for (const char *p = s->rec.preopen_ports; *p;) {
		json_array_append_new(ports, json_integer(strtol(p, NULL, 10)));
		p += strcspn(p, ",");
		p += *p == ',';
	}
	json_object_set_new(o, "preopen_ports", ports);
	/* Its folders, without their host paths (which are the admin's). */
	json_t *recorded = s->rec.mounts_json ? json_loads(s->rec.mounts_json, 0, NULL) : NULL;
	json_t *mounts = json_array();
	size_t i;
	json_t *x;
	json_array_foreach(recorded, i, x)
		json_array_append_new(mounts, json_pack("{s:O,s:O,s:O,s:O}", "folder", json_object_get(x, "name"),
							"path", json_object_get(x, "target"), "ro", json_object_get(x, "ro"),
							"automount", json_object_get(x, "auto")));
	json_decref(recorded);
	json_object_set_new(o, "mounts", mounts);
	mgr_usage_session_json(m, s, o);
	/* Its containers (docs/api.md): main1 alone for most sessions. */
	json_object_set_new(o, "cluster_size", json_integer(s->rec.cluster_size));
	json_object_set_new(o, "cluster_mode", json_string(s->rec.cluster_mode));
	json_object_set_new(o, "containers", mgr_cluster_containers_json(m, s));
	return o;
}

/* Where a start's time went, from the status history h (in order): each
 * stretch between two lines up to the first RUNNING is counted to the
 * phase of the line that began it: PENDING the queue (waiting for a node
 * and being placed), SCHEDULED the dispatch (placed, until a dispatcher
 * asks the node), PREPARING the image pull (its "pulling" line, until its
 * "pulled" one) or the container (the node creating and starting it,
 * split below where the node said how long each step took).
 * {"total_ms", "phases": [{"phase", "ms"}, ...]} in the order they came;
 * null before the session first ran. */
json_t *mgr_start_breakdown(const struct history_rec *h, size_t n)
{
	size_t run = 0;
	while (run < n && h[run].status != SS_RUNNING)
		run++;
	if (run == n || run == 0)
		return json_null();
	/* "container" is the node's whole part where it did not say how it
	 * went (an older agent); with its times it is "create" (the start's
	 * planning, the image's facts, the user's network, Docker's create:
	 * up to MGR_LINE_CREATED), "start" (Docker's start, up to
	 * MGR_LINE_STARTED) and "app port" (reading where the runner's app
	 * port was published, up to RUNNING). */
	static const char *const names[] = {"queue", "dispatch", "image", "container", "other",
					    "create", "start", "app port"};
	int64_t ms[8] = {0};
	int order[8], n_order = 0;
	for (size_t i = 0; i < run; i++) {
		int k = h[i].status == SS_PENDING     ? 0
			: h[i].status == SS_SCHEDULED ? 1
			: h[i].status != SS_PREPARING ? 4
			: !strncmp(h[i].info, "pulling ", 8) ? 2
			: !strncmp(h[i].info, MGR_LINE_CREATED, strlen(MGR_LINE_CREATED)) ? 6
			: !strncmp(h[i].info, MGR_LINE_STARTED, strlen(MGR_LINE_STARTED)) ? 7
			: !strncmp(h[i + 1].info, MGR_LINE_CREATED, strlen(MGR_LINE_CREATED)) ? 5
											       : 3;
		int64_t d = h[i + 1].at_ms - h[i].at_ms;
		bool seen = false;
		for (int j = 0; j < n_order; j++)
			seen = seen || order[j] == k;
		if (!seen)
			order[n_order++] = k;
		ms[k] += d > 0 ? d : 0;
	}
	json_t *phases = json_array();
	for (int j = 0; j < n_order; j++)
		json_array_append_new(phases, json_pack("{s:s,s:I}", "phase", names[order[j]], "ms",
							(json_int_t)ms[order[j]]));
	int64_t total = h[run].at_ms - h[0].at_ms;
	return json_pack("{s:I,s:o}", "total_ms", (json_int_t)(total > 0 ? total : 0), "phases", phases);
}

static json_t *session_json_with_history(struct manager *m, const struct msession *s)
{
	json_t *o = mgr_session_json(m, s);
	struct history_rec *h = NULL;
	size_t n = 0;
	struct terr err = {0};
	json_t *arr = json_array();
	if (m->so->history_get(m->store, s->rec.id, &h, &n, &err) == 0) {
		for (size_t i = 0; i < n; i++)
			json_array_append_new(arr, json_pack("{s:s,s:o,s:s}", "status", session_status_name(h[i].status),
							     "at", mgr_time_json(h[i].at_ms), "info", h[i].info));
	} else {
		n = 0;
	}
	json_object_set_new(o, "status_history", arr);
	json_object_set_new(o, "start_breakdown", mgr_start_breakdown(h, n));
	free(h);
	json_object_set_new(o, "last_commit", mgr_commit_last_json(m, s->rec.id));
	return o;
}

json_t *mgr_sessions_visible_json(struct manager *m, const struct user_rec *u, bool all)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < m->n_sessions; i++) {
		const struct msession *s = m->sessions[i];
		if (!mgr_session_visible(m, u, s) || mgr_session_is_sub(s))
			continue;
		if (!all && (!session_status_listed(s->rec.status) || s->rec.removed))
			continue;
		json_array_append_new(arr, mgr_session_json(m, s));
	}
	return arr;
}

/* ---------- rendered once: the cached JSON ---------- */

/* s's list JSON, rendered into its cache when absent (borrowed: m->mu
 * held), NULL when out of memory. A rendering equal to the text the last
 * change dropped keeps that one: same bytes, same pointer. */
static struct mtext *kept_text(struct manager *m, struct msession *s)
{
	if (!s->json) {
		json_t *o = mgr_session_json(m, s);
		char *text = o ? jsonutil_dump(o) : NULL;
		json_decref(o);
		struct mtext *prev = s->json_prev;
		s->json_prev = NULL;
		if (text && prev && strlen(text) == prev->len && !memcmp(text, prev->s, prev->len)) {
			free(text);
			s->json = prev;
		} else {
			mtext_unref(prev);
			s->json = mtext_new(text);
		}
	}
	return s->json;
}

void mgr_sessions_render(struct manager *m, const char (*ids)[64], size_t n)
{
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < n; i++) {
		struct msession *s = mgr_find_session(m, ids[i]);
		if (s)
			kept_text(m, s);
	}
	pthread_mutex_unlock(&m->mu);
}

/* The same, a new reference (mtext_unref it, with or without the lock). */
static struct mtext *kept_json(struct manager *m, struct msession *s)
{
	return mtext_ref(kept_text(m, s));
}

/* The same with the status history (one store query, once per change). */
static struct mtext *kept_json_full(struct manager *m, struct msession *s)
{
	if (!s->json_full) {
		json_t *o = mgr_session_json(m, s);
		struct history_rec *h = NULL;
		size_t n = 0;
		struct terr err = {0};
		json_t *arr = json_array();
		if (m->so->history_get(m->store, s->rec.id, &h, &n, &err) == 0) {
			for (size_t i = 0; i < n; i++)
				json_array_append_new(arr, json_pack("{s:s,s:o,s:s}", "status",
								     session_status_name(h[i].status), "at",
								     mgr_time_json(h[i].at_ms), "info", h[i].info));
		} else {
			/* Shown without its history until the session next
			 * changes: a store that cannot be read is in the log. */
			log_error("manager", "cannot read the history of %s: %s", s->rec.name, err.msg);
			n = 0;
		}
		json_object_set_new(o, "status_history", arr);
		json_object_set_new(o, "start_breakdown", mgr_start_breakdown(h, n));
		free(h);
		s->json_full = o ? mtext_new(jsonutil_dump(o)) : NULL;
		json_decref(o);
	}
	return mtext_ref(s->json_full);
}

/* A growing text buffer; on out of memory it stays failed (ok false). */
struct textbuf {
	char *p;
	size_t len, cap;
	bool ok;
};

static void tb_add(struct textbuf *b, const char *s, size_t n)
{
	if (!b->ok)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->ok = false;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void tb_str(struct textbuf *b, const char *s)
{
	tb_add(b, s, strlen(s));
}

/* Whether s is in the page's filters (its owner is checked apart). */
static bool query_wants(const struct session_query *q, const struct msession *s)
{
	if (mgr_session_is_sub(s))
		return false;   /* a container of its main's session */
	if (q->status_mask)
		return (q->status_mask & (1u << s->rec.status)) && (q->all || !s->rec.removed);
	return q->all || (session_status_listed(s->rec.status) && !s->rec.removed);
}

int mgr_sessions_page(struct manager *m, const struct user_rec *u, const struct session_query *q, char **body,
		      size_t *len, struct terr *err)
{
	char owner_id[STORE_ID_MAX] = "";
	pthread_mutex_lock(&m->mu);
	/* A project the caller is not in reads as a missing one. */
	const struct mproject *project = q->project[0] ? mgr_find_project_by_name(m, q->project) : NULL;
	if (q->project[0] && (!project || mgr_project_role(m, project, u) == ROLE_NONE)) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "no project named '%s' (tessera project ls lists yours)", q->project);
	}
	if (q->owner_email[0] && !u->is_admin && strcmp(q->owner_email, u->email) && !mgr_manages_a_project(m, u)) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, EPERM, "only an admin or a project's manager may list another user's sessions");
	}
	if (q->owner_email[0]) {
		const struct user_rec *o = mgr_find_user_by_email(m, q->owner_email);
		if (!o) {
			pthread_mutex_unlock(&m->mu);
			return terr_set(err, ENOENT, "no user with email %s", q->owner_email);
		}
		util_strlcpy(owner_id, o->id, sizeof(owner_id));
	}
	/* Sessions are in sequence order: the page starts after the token's
	 * (oldest first), or below it (newest first: lo is then where the
	 * token's session is, the walk going down from lo - 1). */
	size_t lo = 0, hi = m->n_sessions;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->sessions[mid]->rec.seq <= q->after_seq - (q->newest ? 1 : 0))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (q->newest && !q->after_seq)
		lo = m->n_sessions;
	/* Under the lock only the choice and a reference to each text; the
	 * copying is done after. */
	size_t left = q->newest ? lo : m->n_sessions - lo;
	size_t cap = q->limit ? (size_t)q->limit : left;
	struct mtext **texts = malloc((cap ? cap : 1) * sizeof(*texts));
	size_t n = 0;
	int64_t last_seq = 0;
	bool more = false, oom = !texts;
	for (size_t k = 0; k < left && !oom; k++) {
		struct msession *s = m->sessions[q->newest ? lo - 1 - k : lo + k];
		if ((owner_id[0] && strcmp(s->rec.owner_id, owner_id)) || !query_wants(q, s) ||
		    !mgr_session_visible(m, u, s) || (project && strcmp(s->rec.project_id, project->rec.id)))
			continue;
		if (n == cap) {
			more = true;
			break;
		}
		if (!(texts[n] = kept_json(m, s))) {
			oom = true;
			break;
		}
		n++;
		last_seq = s->rec.seq;
	}
	pthread_mutex_unlock(&m->mu);
	struct textbuf b = {.ok = !oom};
	size_t want = 64;
	for (size_t i = 0; i < n; i++)
		want += texts[i]->len + 1;
	if (b.ok && (b.p = malloc(want)))
		b.cap = want;
	tb_str(&b, "{\"sessions\":[");
	for (size_t i = 0; i < n; i++) {
		if (i)
			tb_add(&b, ",", 1);
		tb_add(&b, texts[i]->s, texts[i]->len);
		mtext_unref(texts[i]);
	}
	free(texts);
	tb_str(&b, "]");
	if (more) {
		char token[VALIDATE_TOKEN_MAX];
		validate_session_token(q, last_seq, token);
		tb_str(&b, ",\"continue\":\"");
		tb_str(&b, token);
		tb_str(&b, "\"");
	}
	tb_str(&b, "}\n");
	if (!b.ok) {
		free(b.p);
		return terr_set(err, ENOMEM, "out of memory");
	}
	*body = b.p;
	*len = b.len;
	return 0;
}

/* ---------- the event stream ---------- */

/* Whether u's stream shows s: the list API's default view. */
static bool stream_shows(struct manager *m, const struct user_rec *u, const struct msession *s)
{
	return mgr_session_visible(m, u, s) && session_status_listed(s->rec.status) && !s->rec.removed &&
	       !mgr_session_is_sub(s);
}

void mgr_stream_free(struct mgr_stream *st)
{
	for (size_t i = 0; i < st->n_sent; i++)
		mtext_unref(st->sent[i]);
	free(st->sent);
	mtext_unref(st->nodes);
	st->sent = NULL;
	st->n_sent = 0;
	st->nodes = NULL;
}

int mgr_stream_next(struct manager *m, const struct user_rec *u, struct mgr_stream *st, int wait_s, char **body,
		    size_t *len)
{
	*body = NULL;
	*len = 0;
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += wait_s;
	struct mtext **texts = NULL, *nodes = NULL;
	size_t n = 0;
	bool sessions_changed = false, nodes_changed = false;
	pthread_mutex_lock(&m->mu);
	for (;;) {
		bool first = st->seen == MGR_STATE_UNSEEN;
		while (!first && !m->stopping && m->version == st->seen &&
		       pthread_cond_timedwait(&m->changed, &m->mu, &dl) == 0)
			;
		if (m->stopping) {
			pthread_mutex_unlock(&m->mu);
			return -ECANCELED;
		}
		if (m->version == st->seen) {
			pthread_mutex_unlock(&m->mu);
			return 0;   /* waited wait_s: no change */
		}
		st->seen = m->version;
		/* What changed for u: its sessions' kept texts (each rendered
		 * once per change, whoever asks first) against those it was
		 * sent, by pointer; and the nodes' view. No rendering per
		 * stream, no copy under the lock. */
		n = 0;
		sessions_changed = first;
		for (size_t i = 0; i < m->n_sessions; i++) {
			struct msession *s = m->sessions[i];
			if (!stream_shows(m, u, s))
				continue;
			struct mtext *t = kept_text(m, s);
			if (!t) {
				pthread_mutex_unlock(&m->mu);
				return -ENOMEM;
			}
			if (n >= st->n_sent || st->sent[n] != t)
				sessions_changed = true;
			n++;
		}
		sessions_changed = sessions_changed || n != st->n_sent;
		nodes = mgr_nodes_kept(m, u->is_admin);
		if (!nodes) {
			pthread_mutex_unlock(&m->mu);
			return -ENOMEM;
		}
		nodes_changed = first || nodes != st->nodes;
		if (sessions_changed || nodes_changed)
			break;
		/* A change u does not see (another user's session, a stats
		 * round on a node without its sessions): nothing to send. */
		mtext_unref(nodes);
		nodes = NULL;
	}
	if (sessions_changed) {
		texts = malloc((n ? n : 1) * sizeof(*texts));
		if (!texts) {
			pthread_mutex_unlock(&m->mu);
			mtext_unref(nodes);
			return -ENOMEM;
		}
		size_t k = 0;
		for (size_t i = 0; i < m->n_sessions && k < n; i++)
			if (stream_shows(m, u, m->sessions[i]))
				texts[k++] = mtext_ref(m->sessions[i]->json);
	}
	pthread_mutex_unlock(&m->mu);

	struct textbuf b = {.ok = true};
	size_t want = 64 + (nodes_changed ? nodes->len : 0);
	for (size_t i = 0; sessions_changed && i < n; i++)
		want += texts[i]->len + 1;
	if ((b.p = malloc(want)))
		b.cap = want;
	tb_str(&b, "{");
	if (sessions_changed) {
		tb_str(&b, "\"sessions\":[");
		for (size_t i = 0; i < n; i++) {
			if (i)
				tb_add(&b, ",", 1);
			tb_add(&b, texts[i]->s, texts[i]->len);
		}
		tb_str(&b, "]");
	}
	if (nodes_changed) {
		tb_str(&b, sessions_changed ? ",\"nodes\":" : "\"nodes\":");
		tb_add(&b, nodes->s, nodes->len);
	}
	tb_str(&b, "}");
	/* What it was sent is what the next call compares with. */
	if (sessions_changed) {
		for (size_t i = 0; i < st->n_sent; i++)
			mtext_unref(st->sent[i]);
		free(st->sent);
		st->sent = texts;
		st->n_sent = n;
	}
	mtext_unref(st->nodes);
	st->nodes = nodes;
	if (!b.ok) {
		free(b.p);
		return -ENOMEM;
	}
	*body = b.p;
	*len = b.len;
	return 0;
}

/* ---------- creation ---------- */

static bool name_in_use(struct manager *m, const char *owner, const char *name)
{
	for (size_t i = 0; i < m->n_sessions; i++) {
		const struct msession *s = m->sessions[i];
		if (!session_status_final(s->rec.status) && !mgr_session_is_sub(s) && !strcmp(s->rec.owner_id, owner) &&
		    !strcmp(s->rec.name, name))
			return true;
	}
	return false;
}

/* Checks that the request is a multiple of the quantum, that some node
 * could ever hold it and that some alive node (or the cluster registry)
 * has the image, which owner may launch, with a minimum the request meets
 * (images.c, from the catalog, without the lock; a private image of
 * someone else is answered as a missing one there, the one place that
 * decides). image gets the image to record: an alias resolved, else the
 * name as typed. */
static int check_placeable(struct manager *m, const struct user_rec *owner, const struct create_request *cr,
			   char *image, size_t image_n, struct terr *err)
{
	bool fits_somewhere = false, any_agent = false, any_alive = false;
	/* A caller that set no mode (the benchmarks, white-box tests): one
	 * node, as the API's default. */
	bool single_node = !cr->cluster_mode || !strcmp(cr->cluster_mode, STORE_CLUSTER_SINGLE_NODE);
	pthread_mutex_lock(&m->mu);
	int64_t quantum = m->settings.fgpu_quantum_m, per_dev = mgr_per_device_m(m);
	if (cr->req.fgpu_m % quantum) {
		char q[32];
		units_format_milli(quantum, q, sizeof(q));
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, EINVAL, "resources.fgpu must be a multiple of the fGPU quantum %s", q);
	}
	/* Satisfiable counts the devices all free: only their number matters. */
	struct sched_agent *sa = calloc(m->n_agents + 1, sizeof(*sa));
	if (!sa) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < m->n_agents; i++) {
		struct magent *a = m->agents[i];
		any_agent = true;
		sa[i] = (struct sched_agent){.capacity = a->rec.capacity, .n_devs = (size_t)a->n_gpus};
		if (a->alive && a->link)
			any_alive = true;
	}
	/* A cluster session: its containers on one node (single-node), or
	 * on nodes that together could hold them. */
	fits_somewhere = sched_gang_satisfiable(sa, m->n_agents, &cr->req, (int)cr->cluster_size, single_node, per_dev);
	free(sa);
	pthread_mutex_unlock(&m->mu);
	char need[96];
	res_describe(&cr->req, need, sizeof(need));
	if (!any_agent)
		return terr_set(err, EAGAIN, "no node has registered yet; start an agent first");
	if (!fits_somewhere && cr->cluster_size > 1 && single_node)
		return terr_set(err, EDOM, "no node could ever hold %lld containers of %s; ask for less, or for "
				"cluster_mode multi-node (see 'tessera node ls')", (long long)cr->cluster_size, need);
	if (!fits_somewhere && cr->cluster_size > 1)
		return terr_set(err, EDOM, "the nodes could never hold %lld containers of %s together; ask for less "
				"(see 'tessera node ls')", (long long)cr->cluster_size, need);
	if (!fits_somewhere)
		return terr_set(err, EDOM, "no node could ever hold %s per %s%s; ask for less (see 'tessera node ls')", need,
				cr->cluster_size > 1 ? "container" : "session",
				cr->req.fgpu_m ? " (fGPU must fit on one node's devices)" : "");
	int rc = mgr_image_check(m, owner, cr->image, &cr->req, image, image_n, err);
	if (rc < 0 && !any_alive && err->code != ERANGE) {
		/* No node to ask about the image (a manager restarted before
		 * its agents register again, a node down for a moment): the
		 * session is queued, PENDING "waiting for a node", and its
		 * image checked when it starts. Below an image's known minimum
		 * (ERANGE) is refused all the same. */
		log_info("manager", "image %s not checked now: no node is alive (%s)", image, err->msg);
		return 0;
	}
	return rc;
}

static void free_news(struct msession **news, size_t n)
{
	for (size_t i = 0; news && i < n; i++) {
		if (!news[i])
			continue;
		session_rec_clear(&news[i]->rec);
		free(news[i]);
	}
	free(news);
}

/* The records of a create request: NAME, or NAME-1..NAME-COUNT for a
 * count, with a generated NAME when none is given. */
static struct msession **new_records(const struct user_rec *owner, const struct create_request *cr,
				     const char *image, struct terr *err)
{
	size_t size = (size_t)(cr->cluster_size > 1 ? cr->cluster_size : 1), total = (size_t)cr->count * size;
	struct msession **news = calloc(total, sizeof(*news));
	if (!news) {
		terr_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	char base[STORE_NAME_MAX];
	if (cr->name) {
		util_strlcpy(base, cr->name, sizeof(base));
	} else {
		char rnd[8];
		sign_random_hex(3, rnd, sizeof(rnd), NULL);
		snprintf(base, sizeof(base), "s-%s", rnd);
	}
	char *env_text = cr->env ? jsonutil_dump(cr->env) : NULL;
	size_t made = 0;
	/* A cluster session's records in order: main1, then sub1... (the
	 * main is appended first: clusters.c links the subs to it). */
	for (; made < total; made++) {
		struct msession *s = calloc(1, sizeof(*s));
		if (!s)
			break;
		news[made] = s;
		util_new_id(s->rec.id, NULL);
		size_t nth = made / size, member = made % size;
		if (cr->count > 1) {
			/* validate_create_request checked that NAME-COUNT fits. */
			if (snprintf(s->rec.name, sizeof(s->rec.name), "%s-%zu", base, nth + 1) >= (int)sizeof(s->rec.name))
				break;
		} else
			util_strlcpy(s->rec.name, base, sizeof(s->rec.name));
		s->rec.cluster_size = (int64_t)size;
		util_strlcpy(s->rec.cluster_mode, cr->cluster_mode ? cr->cluster_mode : STORE_CLUSTER_SINGLE_NODE,
			     sizeof(s->rec.cluster_mode));
		util_strlcpy(s->rec.cluster_role, member ? STORE_CLUSTER_SUB : STORE_CLUSTER_MAIN,
			     sizeof(s->rec.cluster_role));
		s->rec.cluster_idx = member ? (int64_t)member : 1;
		if (member)
			util_strlcpy(s->rec.cluster_main, news[made - member]->rec.id, sizeof(s->rec.cluster_main));
		/* The session's SSH key (its sshd's host key, and its
		 * containers' key to each other): every session's, for
		 * `tessera session ssh` (docs/user-guide.md). */
		else if (mgr_cluster_new_seed(s->rec.cluster_ssh_seed, err) < 0)
			break;
		util_strlcpy(s->rec.owner_id, owner->id, sizeof(s->rec.owner_id));
		util_strlcpy(s->rec.image, image, sizeof(s->rec.image));
		s->rec.req = cr->req;
		s->rec.env_json = env_text ? strdup(env_text) : NULL;
		s->rec.startup_command = cr->startup_command ? strdup(cr->startup_command) : NULL;
		util_strlcpy(s->rec.type, cr->batch ? STORE_TYPE_BATCH : STORE_TYPE_INTERACTIVE, sizeof(s->rec.type));
		s->rec.run_as_root = cr->root;
		s->rec.starts_at_ms = cr->starts_at_ms;
		s->rec.batch_timeout_s = cr->batch_timeout_s;
		util_strlcpy(s->rec.preopen_ports, cr->preopen_ports, sizeof(s->rec.preopen_ports));
		/* Its app secret (docs/apps.md): for its runner and the proxy. */
		if (sign_random_hex(32, s->rec.app_secret, sizeof(s->rec.app_secret), err) < 0)
			break;
	}
	free(env_text);
	if (made < total) {
		free_news(news, total);
		terr_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	return news;
}

/* The project, resource group, priority and preemptibility of the new
 * sessions (docs/scheduling.md), checked against the project and the
 * owner's policy. mu held. */
static int apply_project(struct manager *m, const struct user_rec *owner, const struct create_request *cr,
			 struct msession **news, size_t n, struct terr *err)
{
	struct mproject *p;
	int rc = mgr_project_choose(m, owner, cr->project, &p, err);
	if (rc < 0)
		return rc;
	const char *group = cr->group ? cr->group : MGR_DEFAULT_GROUP;
	if ((rc = mgr_group_name_check(group, err)) < 0)
		return rc;
	if (!mgr_project_allows_group(p, group))
		return terr_set(err, EPERM, "project %s may not use resource group %s (it may use: %s)", p->rec.name,
				group, p->rec.groups);
	int64_t max_priority = mgr_user_policy_limit(m, owner->email, "max_priority", 0);
	if (cr->priority > max_priority && !owner->is_admin)
		return terr_set(err, EPERM, "your policy allows priorities up to %lld (its max_priority; an admin can "
				"raise it: tessera config set policy.%s '{\"max_priority\": 10}')",
				(long long)max_priority, owner->email);
	bool def = cr->batch ? mgr_user_policy_bool(m, owner->email, "preemptible_batch", true)
			     : mgr_user_policy_bool(m, owner->email, "preemptible_interactive", false);
	/* Volunteering a session for preemption is always allowed; keeping
	 * one out of it where the policy makes it preemptible is an admin's
	 * call. */
	if (cr->preemptible == VALIDATE_PREEMPT_NO && def && !owner->is_admin)
		return terr_set(err, EPERM, "your policy makes %s sessions preemptible (its preemptible_%s); an admin "
				"can change that", cr->batch ? "batch" : "interactive",
				cr->batch ? "batch" : "interactive");
	bool preemptible = cr->preemptible == VALIDATE_PREEMPT_DEFAULT ? def : cr->preemptible == VALIDATE_PREEMPT_YES;
	/* A cluster session is never preempted: ending one container would
	 * end the whole session, and the planner's victims are single
	 * containers (docs/scheduling.md, "Cluster sessions (gangs)"). */
	if (cr->cluster_size > 1)
		preemptible = false;
	for (size_t i = 0; i < n; i++) {
		util_strlcpy(news[i]->rec.project_id, p->rec.id, sizeof(news[i]->rec.project_id));
		util_strlcpy(news[i]->rec.resource_group, group, sizeof(news[i]->rec.resource_group));
		news[i]->rec.priority = cr->priority;
		news[i]->rec.preemptible = preemptible;
	}
	return 0;
}

int mgr_sessions_create(struct manager *m, const struct user_rec *owner, const struct create_request *cr,
			json_t **sessions, struct terr *err)
{
	char image[sizeof(((struct session_rec *)0)->image)];
	int rc = check_placeable(m, owner, cr, image, sizeof(image), err);
	if (rc < 0)
		return rc;
	size_t n = (size_t)cr->count * (size_t)(cr->cluster_size > 1 ? cr->cluster_size : 1);
	struct msession **news = new_records(owner, cr, image, err);
	if (!news)
		return -ENOMEM;
	pthread_mutex_lock(&m->mu);
	if (cr->root && !mgr_user_allow_root(m, owner->email)) {
		pthread_mutex_unlock(&m->mu);
		free_news(news, n);
		return terr_set(err, EPERM, "your policy does not allow sessions that run as root; sessions run as "
				"the image's work user (uid 1000). An admin can allow it: tessera config set "
				"policy.%s '{\"allow_root\": true}'", owner->email);
	}
	if ((rc = apply_project(m, owner, cr, news, n, err)) < 0) {
		pthread_mutex_unlock(&m->mu);
		free_news(news, n);
		return rc;
	}
	char *mounts = NULL;
	if ((rc = mgr_folders_mounts_json(m, owner, cr, &mounts, err)) < 0) {
		pthread_mutex_unlock(&m->mu);
		free_news(news, n);
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		if (mounts && !(news[i]->rec.mounts_json = strdup(mounts))) {
			free(mounts);
			pthread_mutex_unlock(&m->mu);
			free_news(news, n);
			return terr_set(err, ENOMEM, "out of memory");
		}
	}
	free(mounts);
	for (size_t i = 0; i < n; i++) {
		if (name_in_use(m, owner->id, news[i]->rec.name)) {
			pthread_mutex_unlock(&m->mu);
			rc = terr_set(err, EEXIST,
				      "you already have an active session named %s; remove it or choose another name",
				      news[i]->rec.name);
			free_news(news, n);
			return rc;
		}
	}
	if (cr->dry_run) {
		/* Validated like a create; the estimate replaces the sessions. */
		char why[SCHED_REASON_MAX + 64];
		bool fits;
		if (cr->starts_at_ms > util_now_ms()) {
			char at[40];
			util_format_time_ms(cr->starts_at_ms, at, sizeof(at));
			snprintf(why, sizeof(why), "it waits for its start time, %s (starts_at)", at);
			fits = false;
		} else
			fits = mgr_sched_estimate(m, &news[0]->rec, cr->count, why, sizeof(why));
		pthread_mutex_unlock(&m->mu);
		free_news(news, n);
		*sessions = json_pack("{s:b,s:s?}", "fits_now", fits, "reason", fits ? NULL : why);
		return *sessions ? 0 : terr_set(err, ENOMEM, "out of memory");
	}
	if ((rc = mgr_add_sessions(m, news, n, err)) < 0) {
		pthread_mutex_unlock(&m->mu);
		free_news(news, n);
		return rc;
	}
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		if (!mgr_session_is_sub(news[i]))
			json_array_append_new(arr, mgr_session_json(m, news[i]));
	pthread_mutex_unlock(&m->mu);
	free(news);   /* the records are the manager's now */
	*sessions = arr;
	return 0;
}

/* ---------- batch timeouts ---------- */

void mgr_batch_timeouts(struct manager *m)
{
	int64_t now = util_now_ms();
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		if (s->rec.status != SS_RUNNING || !s->rec.batch_timeout_s || !mgr_session_is_batch(s) ||
		    mgr_session_is_sub(s))
			continue;
		/* Since it last began to run: a preempted session that was
		 * queued again gets its whole time anew. */
		int64_t since = s->running_since_ms ? s->running_since_ms : s->rec.started_ms;
		if (!since || now - since < s->rec.batch_timeout_s * 1000)
			continue;
		/* Ended as a failure (its command did not finish): the final
		 * ERROR says why once the container is gone (run_destroy), and
		 * a cluster session's other containers follow its main. */
		snprintf(s->cl_error, sizeof(s->cl_error), "batch timeout: the command ran past its %llds "
			 "(batch_timeout) and was ended", (long long)s->rec.batch_timeout_s);
		mgr_set_status(m, s, SS_TERMINATING, "batch timeout: ran past its %llds (batch_timeout); terminating",
			       (long long)s->rec.batch_timeout_s);
		mgr_enqueue_destroy(m, s);
	}
}

/* ---------- queries and deletion ---------- */

json_t *mgr_sessions_list(struct manager *m, const struct user_rec *u, bool all)
{
	pthread_mutex_lock(&m->mu);
	json_t *arr = mgr_sessions_visible_json(m, u, all);
	pthread_mutex_unlock(&m->mu);
	return arr;
}

static int no_session(const char *ref, struct terr *err)
{
	/* "REF/CONTAINER" (mgr_resolve_session): say which part is missing
	 * is not known here, so name both. */
	const char *slash = strchr(ref, '/');
	if (slash)
		return terr_set(err, ENOENT, "no session named or with id '%.*s' with a container %s (tessera session "
				"info %.*s lists its containers: main1, sub1, ...)", (int)(slash - ref), ref, slash + 1,
				(int)(slash - ref), ref);
	return terr_set(err, ENOENT, "no session named or with id '%s'", ref);
}

/* What a long poll waits for: an interactive session to be running (or
 * to have failed), a batch session to have ended. */
static bool settled(const struct msession *s)
{
	enum session_status st = s->rec.status;
	if (mgr_session_is_batch(s))
		return session_status_final(st);
	return st != SS_PENDING && st != SS_SCHEDULED && st != SS_PREPARING;
}

int mgr_session_get(struct manager *m, const struct user_rec *u, const char *ref, int wait_s,
		    json_t **session, struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_resolve_session(m, ref, u);
	if (s && wait_s >= 0) {
		/* Long poll: sleep on the change signal until it settles. */
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += wait_s;
		while (!settled(s) && !m->stopping &&
		       pthread_cond_timedwait(&m->changed, &m->mu, &dl) == 0)
			;
	}
	json_t *o = s ? session_json_with_history(m, s) : NULL;
	pthread_mutex_unlock(&m->mu);
	if (!o)
		return no_session(ref, err);
	*session = o;
	return 0;
}

int mgr_session_get_text(struct manager *m, const struct user_rec *u, const char *ref, int wait_s, char **body,
			 size_t *len, struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_resolve_session(m, ref, u);
	if (s && wait_s >= 0) {
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += wait_s;
		while (!settled(s) && !m->stopping &&
		       pthread_cond_timedwait(&m->changed, &m->mu, &dl) == 0)
			;
	}
	if (!s) {
		pthread_mutex_unlock(&m->mu);
		return no_session(ref, err);
	}
	struct mtext *full = kept_json_full(m, s);
	json_t *lc = mgr_commit_last_json(m, s->rec.id);
	pthread_mutex_unlock(&m->mu);
	/* A new object, or jansson's null (whose count is never changed):
	 * this thread's alone. */
	char *lct = lc ? json_dumps(lc, JSONUTIL_DUMP_FLAGS | JSON_ENCODE_ANY) : NULL;
	json_decref(lc);
	/* The kept object without its closing brace, then last_commit. */
	struct textbuf b = {.ok = full && full->len >= 2 && lct};
	if (b.ok) {
		if ((b.p = malloc(full->len + strlen(lct) + 32)))
			b.cap = full->len + strlen(lct) + 32;
		tb_add(&b, full->s, full->len - 1);
		tb_str(&b, ",\"last_commit\":");
		tb_str(&b, lct);
		tb_str(&b, "}\n");
	}
	mtext_unref(full);
	free(lct);
	if (!b.ok) {
		free(b.p);
		return terr_set(err, ENOMEM, "out of memory");
	}
	*body = b.p;
	*len = b.len;
	return 0;
}

int mgr_session_delete(struct manager *m, const struct user_rec *u, const char *ref, json_t **session,
		       struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_resolve_session(m, ref, u);
	json_t *o = NULL;
	if (s) {
		mgr_delete_session(m, s, u->email);
		o = mgr_session_json(m, s);
	}
	pthread_mutex_unlock(&m->mu);
	if (!o)
		return no_session(ref, err);
	*session = o;
	return 0;
}

/* ---------- the session's container ---------- */

/* Copies what reaching the session's container takes, under the lock, so
 * that the call itself runs without it. */
static int session_target(struct manager *m, const struct user_rec *u, const char *ref, bool need_running,
			  const struct agent_link_ops **link, void **lctx, char cid[RT_ID_MAX], char *sid,
			  struct terr *err)
{
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_resolve_session(m, ref, u);
	struct magent *a = s ? mgr_find_agent(m, s->rec.agent_id) : NULL;
	if (!s) {
		rc = no_session(ref, err);
	} else if (need_running && !mgr_session_enterable(u, s)) {
		rc = mgr_not_enterable(s, err);
	} else if ((need_running && s->rec.status != SS_RUNNING) || !s->rec.container_id[0] || !a) {
		rc = terr_set(err, EBUSY, "session %s is %s%s", s->rec.name, session_status_name(s->rec.status),
			      need_running ? "; it must be RUNNING" : " and has no container");
	} else if (!a->link) {
		/* Loaded at start; its agent has not registered again yet. */
		rc = terr_set(err, EAGAIN, "node %s of session %s has not registered with the manager since it "
			      "started; try again when it has", a->rec.id, s->rec.name);
	} else if (!a->alive) {
		rc = terr_set(err, EAGAIN, "node %s of session %s is LOST", a->rec.id, s->rec.name);
	} else {
		*link = a->link;
		*lctx = a->link_ctx;
		util_strlcpy(cid, s->rec.container_id, RT_ID_MAX);
		if (sid)
			util_strlcpy(sid, s->rec.id, STORE_ID_MAX);
	}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* The log kept when s's container was removed (dispatch.c), its last
 * tail lines into *kept; -EBUSY saying why there is none. With mu held. */
static int kept_log(struct manager *m, const struct msession *s, int tail, char **kept, struct terr *err)
{
	struct log_tail_rec l = {0};
	struct terr serr = {0};
	int rc = m->so->log_tail_get(m->store, s->rec.id, &l, &serr);
	if (rc == -ENOENT && s->rec.status == SS_CANCELLED)
		return terr_set(err, EBUSY, "session %s was CANCELLED before it ran; it has no log", s->rec.name);
	if (rc == -ENOENT)
		return terr_set(err, EBUSY, "session %s is %s and its container was removed; no log was kept for it",
				s->rec.name, session_status_name(s->rec.status));
	if (rc < 0)
		return terr_set(err, serr.code, "%s", serr.msg);
	*kept = strdup(logtail_last_lines(l.text, tail));
	free(l.text);
	return *kept ? 0 : terr_set(err, ENOMEM, "out of memory");
}

int mgr_session_logs(struct manager *m, const struct user_rec *u, const char *ref, int tail, bool follow,
		     struct pump **out, char **kept, struct terr *err)
{
	*out = NULL;
	*kept = NULL;
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_resolve_session(m, ref, u);
	if (s && session_status_final(s->rec.status) && !s->rec.container_id[0]) {
		int rc = kept_log(m, s, tail, kept, err);
		pthread_mutex_unlock(&m->mu);
		return rc;
	}
	pthread_mutex_unlock(&m->mu);
	const struct agent_link_ops *link;
	void *lctx;
	char cid[RT_ID_MAX];
	int rc = session_target(m, u, ref, false, &link, &lctx, cid, NULL, err);
	if (rc < 0)
		return rc;
	return link->logs(lctx, cid, tail, follow, out, err);
}

struct mgr_exec_slot {
	struct manager *m;
	char user_id[STORE_ID_MAX];
	char session_id[STORE_ID_MAX];   /* its exec counts as activity (usage.c) */
};

/* Takes one of u's exec slots (with mu held); EUSERS when none is left. */
static int exec_slot_take(struct manager *m, const struct user_rec *u, struct terr *err)
{
	struct mexec_count *c = m->exec_counts;
	while (c && strcmp(c->user_id, u->id) != 0)
		c = c->next;
	int64_t max = mgr_user_max_execs(m, u->email);
	if (c && max > 0 && c->n >= max)
		return terr_set(err, EUSERS,
				"%s already runs %d commands in sessions at once, the most the policy allows "
				"(max_concurrent_execs); wait for one to end",
				u->email, c->n);
	if (!c) {
		if (!(c = calloc(1, sizeof(*c))))
			return terr_set(err, ENOMEM, "out of memory");
		util_strlcpy(c->user_id, u->id, sizeof(c->user_id));
		c->next = m->exec_counts;
		m->exec_counts = c;
	}
	c->n++;
	return 0;
}

void mgr_exec_release(void *slot)
{
	struct mgr_exec_slot *sl = slot;
	if (!sl)
		return;
	struct manager *m = sl->m;
	pthread_mutex_lock(&m->mu);
	mgr_usage_exec(m, sl->session_id, -1);
	for (struct mexec_count **pc = &m->exec_counts; *pc; pc = &(*pc)->next) {
		if (strcmp((*pc)->user_id, sl->user_id) != 0)
			continue;
		if (--(*pc)->n <= 0) {
			struct mexec_count *dead = *pc;
			*pc = dead->next;
			free(dead);
		}
		break;
	}
	pthread_mutex_unlock(&m->mu);
	free(sl);
}

int mgr_session_exec(struct manager *m, const struct user_rec *u, const char *ref, json_t *command,
		     int timeout_s, struct pump **out, struct mgr_exec_slot **slot, struct terr *err)
{
	const struct agent_link_ops *link;
	void *lctx;
	char cid[RT_ID_MAX];
	*out = NULL;
	*slot = NULL;
	char sid[STORE_ID_MAX] = "";
	int rc = session_target(m, u, ref, true, &link, &lctx, cid, sid, err);
	if (rc < 0)
		return rc;
	struct mgr_exec_slot *sl = calloc(1, sizeof(*sl));
	if (!sl)
		return terr_set(err, ENOMEM, "out of memory");
	sl->m = m;
	util_strlcpy(sl->user_id, u->id, sizeof(sl->user_id));
	util_strlcpy(sl->session_id, sid, sizeof(sl->session_id));
	pthread_mutex_lock(&m->mu);
	rc = exec_slot_take(m, u, err);
	if (rc == 0)
		mgr_usage_exec(m, sid, +1);
	pthread_mutex_unlock(&m->mu);
	if (rc < 0) {
		free(sl);
		return rc;
	}
	rc = link->exec(lctx, cid, command, timeout_s, out, err);
	if (rc < 0) {
		mgr_exec_release(sl);
		return rc;
	}
	*slot = sl;
	return 0;
}
