/* Projects (docs/scheduling.md, "Projects"): teams whose members share
 * sessions' visibility, folders and a quota, and between which fair share
 * runs. Every session and folder belongs to one project. Every user has a
 * personal project named after their email, made with the account (or at
 * the first start of a manager that finds an account without one), so a
 * single user needs no project at all.
 *
 * Roles: a project's manager sees and ends the project's sessions and
 * adds or removes its members; a member sees their own sessions and the
 * project's folders. Admins act as managers of every project. Only admins
 * make, change and remove projects. A project a user is not in is, to
 * them, a project that does not exist (the same 404).
 *
 * Functions named mgr_project_* in core.h take m->mu; the others (state.h)
 * are called with it held. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/util.h"
#include "manager/state.h"

/* ---------- lookups (mu held) ---------- */

struct mproject *mgr_find_project(struct manager *m, const char *id)
{
	for (size_t i = 0; i < m->n_projects; i++)
		if (!strcmp(m->projects[i]->rec.id, id))
			return m->projects[i];
	return NULL;
}

struct mproject *mgr_find_project_by_name(struct manager *m, const char *name)
{
	for (size_t i = 0; i < m->n_projects; i++)
		if (!strcmp(m->projects[i]->rec.name, name))
			return m->projects[i];
	return NULL;
}

struct mmember *mgr_find_member(struct manager *m, const char *project_id, const char *user_id)
{
	for (size_t i = 0; i < m->n_members; i++)
		if (!strcmp(m->members[i]->rec.project_id, project_id) && !strcmp(m->members[i]->rec.user_id, user_id))
			return m->members[i];
	return NULL;
}

enum mgr_role mgr_project_role(struct manager *m, const struct mproject *p, const struct user_rec *u)
{
	if (!p)
		return ROLE_NONE;
	if (u->is_admin)
		return ROLE_MANAGER;
	const struct mmember *mb = mgr_find_member(m, p->rec.id, u->id);
	if (!mb)
		return ROLE_NONE;
	return strcmp(mb->rec.role, STORE_ROLE_MANAGER) ? ROLE_MEMBER : ROLE_MANAGER;
}

bool mgr_session_visible(struct manager *m, const struct user_rec *u, const struct msession *s)
{
	if (u->is_admin || !strcmp(s->rec.owner_id, u->id))
		return true;
	return mgr_project_role(m, mgr_find_project(m, s->rec.project_id), u) == ROLE_MANAGER;
}

bool mgr_manages_a_project(struct manager *m, const struct user_rec *u)
{
	for (size_t i = 0; i < m->n_members; i++) {
		const struct mmember *mb = m->members[i];
		if (!strcmp(mb->rec.user_id, u->id) && !strcmp(mb->rec.role, STORE_ROLE_MANAGER)) {
			const struct mproject *p = mgr_find_project(m, mb->rec.project_id);
			if (p && !p->rec.personal)
				return true;
		}
	}
	return false;
}

bool mgr_session_enterable(const struct user_rec *u, const struct msession *s)
{
	return u->is_admin || !strcmp(s->rec.owner_id, u->id);
}

int mgr_not_enterable(const struct msession *s, struct terr *err)
{
	return terr_set(err, EPERM, "only its owner may run commands or open apps in session %s, or commit it; as a "
			"manager of its project you may see and end it", s->rec.name);
}

struct mproject *mgr_personal_project(struct manager *m, const char *user_id)
{
	for (size_t i = 0; i < m->n_projects; i++) {
		struct mproject *p = m->projects[i];
		if (p->rec.personal && mgr_find_member(m, p->rec.id, user_id))
			return p;
	}
	return NULL;
}

/* ---------- changes (mu held) ---------- */

static int projects_append(struct manager *m, struct mproject *p)
{
	struct mproject **n = realloc(m->projects, (m->n_projects + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	m->projects = n;
	m->projects[m->n_projects++] = p;
	m->ix_gen++;
	return 0;
}

static int members_append(struct manager *m, struct mmember *mb)
{
	struct mmember **n = realloc(m->members, (m->n_members + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	m->members = n;
	m->members[m->n_members++] = mb;
	m->ix_gen++;
	return 0;
}

static void member_forget(struct manager *m, struct mmember *mb)
{
	for (size_t i = 0; i < m->n_members; i++) {
		if (m->members[i] == mb) {
			memmove(&m->members[i], &m->members[i + 1], (m->n_members - i - 1) * sizeof(*m->members));
			m->n_members--;
			free(mb);
			m->ix_gen++;
			return;
		}
	}
}

static void member_id(const char *project_id, const char *user_id, char *out, size_t n)
{
	snprintf(out, n, "%s:%s", project_id, user_id);
}

/* Adds (or changes) user's membership of p, stored first. */
static int member_set(struct manager *m, struct mproject *p, const char *user_id, const char *role,
		      int64_t weight_milli, struct terr *err)
{
	struct mmember *mb = mgr_find_member(m, p->rec.id, user_id);
	struct member_rec r = {0};
	if (mb)
		r = mb->rec;
	member_id(p->rec.id, user_id, r.id, sizeof(r.id));
	util_strlcpy(r.project_id, p->rec.id, sizeof(r.project_id));
	util_strlcpy(r.user_id, user_id, sizeof(r.user_id));
	util_strlcpy(r.role, role, sizeof(r.role));
	r.weight_milli = weight_milli;
	if (!mb)
		r.created_ms = util_now_ms();
	int rc = m->so->member_put(m->store, &r, err);
	if (rc < 0)
		return rc;
	if (mb) {
		mb->rec = r;
		return 0;
	}
	mb = calloc(1, sizeof(*mb));
	if (!mb || members_append(m, mb) < 0) {
		free(mb);
		return terr_set(err, ENOMEM, "out of memory");
	}
	mb->rec = r;
	return 0;
}

/* A new project record named name (checked by the caller), stored and
 * kept; *out borrowed. */
static int project_add(struct manager *m, const struct project_rec *tmpl, struct mproject **out, struct terr *err)
{
	struct mproject *p = calloc(1, sizeof(*p));
	if (!p)
		return terr_set(err, ENOMEM, "out of memory");
	p->rec = *tmpl;
	int rc;
	if ((rc = util_new_id(p->rec.id, err)) < 0 || (rc = m->so->project_put(m->store, &p->rec, err)) < 0) {
		free(p);
		return rc;
	}
	if (projects_append(m, p) < 0) {
		free(p);
		return terr_set(err, ENOMEM, "out of memory");
	}
	*out = p;
	return 0;
}

int mgr_personal_project_ensure(struct manager *m, const struct user_rec *u, struct terr *err)
{
	if (mgr_personal_project(m, u->id))
		return 0;
	struct project_rec r = {.personal = true, .weight_milli = 1000, .created_ms = util_now_ms()};
	/* Named after the user: emails are unique among users, and a team
	 * project cannot take an email as its name (mgr_project_name_check). */
	util_strlcpy(r.name, u->email, sizeof(r.name));
	snprintf(r.description, sizeof(r.description), "%.200s's own sessions and folders", u->email);
	struct mproject *clash = mgr_find_project_by_name(m, r.name);
	if (clash) {
		/* A personal project left by a removed user of the same email
		 * (mgr_project_user_removed keeps none; an old one is reused). */
		if (!clash->rec.personal)
			return terr_set(err, EEXIST, "a project named %s exists", r.name);
		return member_set(m, clash, u->id, STORE_ROLE_MANAGER, 1000, err);
	}
	struct mproject *p;
	int rc = project_add(m, &r, &p, err);
	if (rc == 0)
		rc = member_set(m, p, u->id, STORE_ROLE_MANAGER, 1000, err);
	return rc;
}

void mgr_project_user_removed(struct manager *m, const char *user_id)
{
	struct terr err = {0};
	for (size_t i = m->n_members; i-- > 0;) {
		struct mmember *mb = m->members[i];
		if (strcmp(mb->rec.user_id, user_id))
			continue;
		if (m->so->member_delete(m->store, mb->rec.id, &err) < 0)
			log_warn("manager", "cannot forget a removed user's membership: %s", err.msg);
		member_forget(m, mb);
	}
}

/* ---------- loading ---------- */

static int load_project(void *ud, const struct project_rec *r)
{
	struct manager *m = ud;
	struct mproject *p = calloc(1, sizeof(*p));
	if (!p || projects_append(m, p) < 0) {
		free(p);
		return -ENOMEM;
	}
	p->rec = *r;
	if (p->rec.weight_milli <= 0)
		p->rec.weight_milli = 1000;
	return 0;
}

static int load_member(void *ud, const struct member_rec *r)
{
	struct manager *m = ud;
	struct mmember *mb = calloc(1, sizeof(*mb));
	if (!mb || members_append(m, mb) < 0) {
		free(mb);
		return -ENOMEM;
	}
	mb->rec = *r;
	if (mb->rec.weight_milli <= 0)
		mb->rec.weight_milli = 1000;
	return 0;
}

int mgr_projects_load(struct manager *m, struct terr *err)
{
	int rc;
	if ((rc = m->so->project_load_all(m->store, load_project, m, err)) < 0 ||
	    (rc = m->so->member_load_all(m->store, load_member, m, err)) < 0)
		return rc;
	for (size_t i = 0; i < m->n_users; i++)
		if ((rc = mgr_personal_project_ensure(m, &m->users[i], err)) < 0)
			return rc;
	/* What was stored before projects belongs to its owner's personal
	 * project. */
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		if (s->rec.project_id[0])
			continue;
		const struct mproject *p = mgr_personal_project(m, s->rec.owner_id);
		if (!p)
			continue;   /* its owner was removed: it stays in no project */
		util_strlcpy(s->rec.project_id, p->rec.id, sizeof(s->rec.project_id));
		if (!s->rec.resource_group[0])
			util_strlcpy(s->rec.resource_group, MGR_DEFAULT_GROUP, sizeof(s->rec.resource_group));
		if ((rc = m->so->session_put(m->store, &s->rec, err)) < 0)
			return rc;
	}
	return 0;
}

void mgr_projects_free(struct manager *m)
{
	for (size_t i = 0; i < m->n_projects; i++)
		free(m->projects[i]);
	for (size_t i = 0; i < m->n_members; i++)
		free(m->members[i]);
	free(m->projects);
	free(m->members);
	m->projects = NULL;
	m->members = NULL;
	m->n_projects = m->n_members = 0;
}

/* ---------- choosing a session's project ---------- */

int mgr_project_choose(struct manager *m, const struct user_rec *u, const char *name, struct mproject **out,
		       struct terr *err)
{
	if (name && *name) {
		struct mproject *p = mgr_find_project_by_name(m, name);
		/* A project the user is in; admins may use any team project
		 * too, but not another user's personal one. */
		bool member = p && mgr_find_member(m, p->rec.id, u->id);
		if (!p || (!member && !(u->is_admin && !p->rec.personal)))
			return terr_set(err, ENOENT, "no project named '%s' of yours (tessera project ls lists yours)",
					name);
		*out = p;
		return 0;
	}
	/* No name: the one team project the user is in, else their own. */
	struct mproject *team = NULL;
	size_t n_team = 0;
	char names[256] = "";
	size_t len = 0;
	for (size_t i = 0; i < m->n_members; i++) {
		const struct mmember *mb = m->members[i];
		if (strcmp(mb->rec.user_id, u->id))
			continue;
		struct mproject *p = mgr_find_project(m, mb->rec.project_id);
		if (!p || p->rec.personal)
			continue;
		team = p;
		n_team++;
		if (len < sizeof(names))
			len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", n_team > 1 ? ", " : "",
						p->rec.name);
	}
	if (n_team > 1)
		return terr_set(err, EINVAL, "you are in %zu projects (%s): say which one with --project NAME "
				"(\"project\" in the API)", n_team, names);
	*out = team ? team : mgr_personal_project(m, u->id);
	if (!*out)
		return terr_set(err, ENOENT, "you have no project; an admin can add you to one");
	return 0;
}

/* ---------- resource groups ---------- */

bool mgr_project_allows_group(const struct mproject *p, const char *group)
{
	if (!p->rec.groups[0])
		return true;
	size_t gl = strlen(group);
	for (const char *s = p->rec.groups; *s;) {
		const char *e = strchr(s, ',');
		size_t l = e ? (size_t)(e - s) : strlen(s);
		if (l == gl && !strncmp(s, group, l))
			return true;
		if (!e)
			break;
		s = e + 1;
	}
	return false;
}

int mgr_group_name_check(const char *name, struct terr *err)
{
	size_t n = strlen(name);
	if (n == 0 || n >= STORE_NAME_MAX)
		return terr_set(err, EINVAL, "a resource group's name must be 1 to %d characters", STORE_NAME_MAX - 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!(isalnum(c) || c == '-' || c == '_' || c == '.') || (i == 0 && !isalnum(c)))
			return terr_set(err, EINVAL, "resource group '%.64s': use letters, digits, '-', '_' and '.', "
					"starting with a letter or digit", name);
	}
	return 0;
}

/* ---------- JSON ---------- */

static json_t *limit_json(int64_t v, bool milli)
{
	if (v <= 0)
		return json_null();
	return milli ? jsonutil_milli(v) : json_integer(v);
}

/* What p's sessions hold now, and how many of them do. */
static void project_used(struct manager *m, const struct mproject *p, struct res *used, int64_t *n)
{
	*used = (struct res){0};
	*n = 0;
	for (size_t i = 0; i < m->n_sessions; i++) {
		const struct msession *s = m->sessions[i];
		if (strcmp(s->rec.project_id, p->rec.id) || !session_status_holds(s->rec.status))
			continue;
		res_add(used, &s->rec.req);
		*n += !mgr_session_is_sub(s);   /* a cluster session is one session */
	}
}

static json_t *groups_json(const char *groups)
{
	json_t *a = json_array();
	for (const char *s = groups; *s;) {
		const char *e = strchr(s, ',');
		size_t l = e ? (size_t)(e - s) : strlen(s);
		json_array_append_new(a, json_stringn(s, l));
		if (!e)
			break;
		s = e + 1;
	}
	return a;
}

json_t *mgr_project_json(struct manager *m, const struct mproject *p, const struct user_rec *viewer)
{
	struct res used;
	int64_t n_used;
	project_used(m, p, &used, &n_used);
	json_t *members = json_array();
	for (size_t i = 0; i < m->n_members; i++) {
		const struct mmember *mb = m->members[i];
		if (strcmp(mb->rec.project_id, p->rec.id))
			continue;
		const struct user_rec *mu = mgr_find_user(m, mb->rec.user_id);
		json_array_append_new(members, json_pack("{s:s,s:s,s:o}", "email", mu ? mu->email : mb->rec.user_id,
							 "role", mb->rec.role, "weight",
							 jsonutil_milli(mb->rec.weight_milli)));
	}
	enum mgr_role role = mgr_project_role(m, p, viewer);
	const struct mmember *own = mgr_find_member(m, p->rec.id, viewer->id);
	return json_pack("{s:s,s:s,s:s,s:b,s:o,s:{s:o,s:o,s:o,s:o},s:o,s:o,s:{s:o,s:I,s:o,s:I},s:s,s:o}",
			 "id", p->rec.id, "name", p->rec.name, "description", p->rec.description,
			 "personal", p->rec.personal, "weight", jsonutil_milli(p->rec.weight_milli),
			 "quota", "cpu", limit_json(p->rec.max.cpu_m, true), "mem", limit_json(p->rec.max.mem, false),
			 "fgpu", limit_json(p->rec.max.fgpu_m, true), "sessions", limit_json(p->rec.max_sessions, false),
			 "groups", groups_json(p->rec.groups), "members", members,
			 "used", "cpu", jsonutil_milli(used.cpu_m), "mem", (json_int_t)used.mem,
			 "fgpu", jsonutil_milli(used.fgpu_m), "sessions", (json_int_t)n_used,
			 "my_role", own ? own->rec.role : role == ROLE_MANAGER ? "admin" : "none",
			 "created_at", mgr_time_json(p->rec.created_ms));
}

/* ---------- the API's calls (take mu) ---------- */

int mgr_project_name_check(const char *name, struct terr *err)
{
	size_t n = strlen(name);
	if (n == 0 || n >= STORE_NAME_MAX)
		return terr_set(err, EINVAL, "a project's name must be 1 to %d characters", STORE_NAME_MAX - 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!(isalnum(c) || c == '-' || c == '_' || c == '.') || (i == 0 && !isalnum(c)))
			return terr_set(err, EINVAL, "project name '%.64s': use letters, digits, '-', '_' and '.', "
					"starting with a letter or digit", name);
	}
	return 0;
}

json_t *mgr_projects_list(struct manager *m, const struct user_rec *u, bool all)
{
	pthread_mutex_lock(&m->mu);
	json_t *arr = json_array();
	for (size_t i = 0; i < m->n_projects; i++) {
		const struct mproject *p = m->projects[i];
		bool member = mgr_find_member(m, p->rec.id, u->id) != NULL;
		/* Admins see every team project, and other users' personal
		 * ones with all (there is one per user). */
		if (!member && !(u->is_admin && (!p->rec.personal || all)))
			continue;
		json_array_append_new(arr, mgr_project_json(m, p, u));
	}
	pthread_mutex_unlock(&m->mu);
	return arr;
}

/* The project named name as user u may see it, or NULL with err (ENOENT,
 * the same for a missing one and another team's). mu held. */
static struct mproject *visible_project(struct manager *m, const struct user_rec *u, const char *name,
					struct terr *err)
{
	struct mproject *p = mgr_find_project_by_name(m, name);
	if (!p || mgr_project_role(m, p, u) == ROLE_NONE) {
		terr_set(err, ENOENT, "no project named '%s' (tessera project ls lists yours)", name);
		return NULL;
	}
	return p;
}

int mgr_project_get(struct manager *m, const struct user_rec *u, const char *name, json_t **out, struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	struct mproject *p = visible_project(m, u, name, err);
	if (p)
		*out = mgr_project_json(m, p, u);
	pthread_mutex_unlock(&m->mu);
	return p ? 0 : -ENOENT;
}

/* Reads the settable fields of body into r; present ones only. */
static int read_settings(json_t *body, struct project_rec *r, struct terr *err)
{
	const char *desc = NULL;
	int rc;
	bool present = false;
	if ((rc = jsonutil_get_string(body, "description", "description", &desc, NULL, err)) < 0)
		return rc;
	if (desc) {
		if (strlen(desc) >= sizeof(r->description))
			return terr_set(err, EINVAL, "description: at most %zu characters", sizeof(r->description) - 1);
		util_strlcpy(r->description, desc, sizeof(r->description));
	}
	int64_t w = 0;
	if ((rc = jsonutil_get_milli(body, "weight", "weight", &w, &present, err)) < 0)
		return rc;
	if (present) {
		if (w <= 0 || w > 1000000 * 1000LL)
			return terr_set(err, EINVAL, "weight must be above 0 and at most 1000000");
		r->weight_milli = w;
	}
	json_t *q = json_object_get(body, "quota");
	if (q && !json_is_object(q))
		return terr_set(err, EINVAL, "quota must be an object like {\"fgpu\": 2, \"mem\": \"64g\"} (null: no limit)");
	if (q) {
		static const char *const known[] = {"cpu", "mem", "fgpu", "sessions", NULL};
		const char *k;
		json_t *v;
		json_object_foreach(q, k, v) {
			bool ok = false;
			for (int i = 0; known[i]; i++)
				ok |= !strcmp(k, known[i]);
			if (!ok)
				return terr_set(err, EINVAL, "quota: unknown limit '%s' (known: cpu, mem, fgpu, sessions)", k);
		}
		struct { const char *k; int64_t *dst; int kind; } lim[] = {
			{"cpu", &r->max.cpu_m, 0}, {"fgpu", &r->max.fgpu_m, 0}, {"mem", &r->max.mem, 1},
			{"sessions", &r->max_sessions, 2},
		};
		for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
			json_t *v = json_object_get(q, lim[i].k);
			if (!v)
				continue;
			if (json_is_null(v)) {
				*lim[i].dst = 0;
				continue;
			}
			char what[32];
			snprintf(what, sizeof(what), "quota.%s", lim[i].k);
			int64_t x = 0;
			rc = lim[i].kind == 0 ? jsonutil_get_milli(q, lim[i].k, what, &x, NULL, err)
			   : lim[i].kind == 1 ? jsonutil_get_size(q, lim[i].k, what, &x, NULL, err)
			   : jsonutil_get_int(q, lim[i].k, what, &x, NULL, err);
			if (rc < 0)
				return rc;
			if (x < 0)
				return terr_set(err, EINVAL, "%s must not be negative (null or 0: no limit)", what);
			*lim[i].dst = x;
		}
	}
	json_t *g = json_object_get(body, "groups");
	if (g) {
		if (!json_is_array(g) && !json_is_null(g))
			return terr_set(err, EINVAL, "groups must be a list of resource group names ([] or null: all groups)");
		char buf[sizeof(r->groups)] = "";
		size_t len = 0, i;
		json_t *v;
		json_array_foreach(g, i, v) {
			const char *name = json_string_value(v);
			if (!name)
				return terr_set(err, EINVAL, "groups: each must be a resource group's name");
			if ((rc = mgr_group_name_check(name, err)) < 0)
				return rc;
			size_t l = strlen(name);
			if (len + l + 2 > sizeof(buf))
				return terr_set(err, EINVAL, "groups: too many (at most %zu characters in all)", sizeof(buf) - 1);
			if (len)
				buf[len++] = ',';
			memcpy(buf + len, name, l + 1);
			len += l;
		}
		util_strlcpy(r->groups, buf, sizeof(r->groups));
	}
	return 0;
}

int mgr_project_create(struct manager *m, const struct user_rec *by, json_t *body, json_t **out, struct terr *err)
{
	if (!by->is_admin)
		return terr_set(err, EPERM, "only an admin may create projects");
	int rc;
	const char *name = NULL;
	if ((rc = jsonutil_get_string(body, "name", "name", &name, NULL, err)) < 0)
		return rc;
	if (!name)
		return terr_set(err, EINVAL, "name is required");
	if ((rc = mgr_project_name_check(name, err)) < 0)
		return rc;
	struct project_rec r = {.weight_milli = 1000, .created_ms = util_now_ms()};
	util_strlcpy(r.name, name, sizeof(r.name));
	if ((rc = read_settings(body, &r, err)) < 0)
		return rc;
	pthread_mutex_lock(&m->mu);
	struct mproject *p = NULL;
	if (mgr_find_project_by_name(m, name))
		rc = terr_set(err, EEXIST, "a project named %s exists", name);
	else if ((rc = project_add(m, &r, &p, err)) == 0) {
		*out = mgr_project_json(m, p, by);
		log_info("manager", "%s created project %s", by->email, name);
	}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int mgr_project_update(struct manager *m, const struct user_rec *by, const char *name, json_t *body, json_t **out,
		       struct terr *err)
{
	int rc;
	pthread_mutex_lock(&m->mu);
	struct mproject *p = visible_project(m, by, name, err);
	if (!p) {
		rc = -ENOENT;
		goto out;
	}
	if (!by->is_admin) {
		rc = terr_set(err, EPERM, "only an admin may change a project's settings");
		goto out;
	}
	struct project_rec r = p->rec;
	if ((rc = read_settings(body, &r, err)) < 0 ||
	    (rc = m->so->project_put(m->store, &r, err)) < 0)
		goto out;
	p->rec = r;
	*out = mgr_project_json(m, p, by);
	log_info("manager", "%s changed project %s", by->email, name);
	/* A new quota, weight or group list changes what the queue may do. */
	mgr_wake_scheduler(m);
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int mgr_project_delete(struct manager *m, const struct user_rec *by, const char *name, struct terr *err)
{
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	struct mproject *p = visible_project(m, by, name, err);
	if (!p) {
		rc = -ENOENT;
		goto out;
	}
	if (!by->is_admin) {
		rc = terr_set(err, EPERM, "only an admin may remove a project");
		goto out;
	}
	if (p->rec.personal) {
		rc = terr_set(err, EBUSY, "%s is a user's personal project: it goes with the user (tessera user rm)",
			      name);
		goto out;
	}
	size_t live = 0, folders = 0;
	for (size_t i = 0; i < m->n_sessions; i++)
		live += !strcmp(m->sessions[i]->rec.project_id, p->rec.id) &&
			!session_status_final(m->sessions[i]->rec.status);
	for (size_t i = 0; i < m->n_folders; i++)
		folders += !strcmp(m->folders[i]->rec.project_id, p->rec.id) && !m->folders[i]->rec.trashed_ms;
	if (live || folders) {
		rc = terr_set(err, EBUSY, "project %s still has %zu session%s not ended and %zu folder%s: remove them "
			      "first", name, live, live == 1 ? "" : "s", folders, folders == 1 ? "" : "s");
		goto out;
	}
	if ((rc = m->so->project_delete(m->store, p->rec.id, err)) < 0)
		goto out;
	for (size_t i = m->n_members; i-- > 0;)
		if (!strcmp(m->members[i]->rec.project_id, p->rec.id))
			member_forget(m, m->members[i]);
	for (size_t i = 0; i < m->n_projects; i++) {
		if (m->projects[i] == p) {
			memmove(&m->projects[i], &m->projects[i + 1], (m->n_projects - i - 1) * sizeof(*m->projects));
			m->n_projects--;
			m->ix_gen++;
			break;
		}
	}
	free(p);
	log_info("manager", "%s removed project %s", by->email, name);
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int mgr_project_member_set(struct manager *m, const struct user_rec *by, const char *name, const char *email,
			   const char *role, int64_t weight_milli, json_t **out, struct terr *err)
{
	int rc;
	if (role && strcmp(role, STORE_ROLE_MEMBER) && strcmp(role, STORE_ROLE_MANAGER))
		return terr_set(err, EINVAL, "role must be member or manager");
	if (weight_milli < 0 || weight_milli > 1000000 * 1000LL)
		return terr_set(err, EINVAL, "weight must be above 0 and at most 1000000");
	pthread_mutex_lock(&m->mu);
	struct mproject *p = visible_project(m, by, name, err);
	const struct user_rec *u = p ? mgr_find_user_by_email(m, email) : NULL;
	if (!p) {
		rc = -ENOENT;
		goto out;
	}
	if (mgr_project_role(m, p, by) != ROLE_MANAGER) {
		rc = terr_set(err, EPERM, "only the project's managers and admins may change its members");
		goto out;
	}
	if (p->rec.personal) {
		rc = terr_set(err, EINVAL, "%s is a user's personal project: it has no other members", name);
		goto out;
	}
	if (!u) {
		rc = terr_set(err, ENOENT, "no user with email %s", email);
		goto out;
	}
	const struct mmember *old = mgr_find_member(m, p->rec.id, u->id);
	/* Granting the manager role is an admin's or a manager's; a manager
	 * may do it, as Backend.AI's project admins may. */
	if ((rc = member_set(m, p, u->id, role ? role : old ? old->rec.role : STORE_ROLE_MEMBER,
			     weight_milli ? weight_milli : old ? old->rec.weight_milli : 1000, err)) < 0)
		goto out;
	*out = mgr_project_json(m, p, by);
	log_info("manager", "%s %s %s in project %s", by->email, old ? "changed" : "added", email, name);
	m->version++;
	pthread_cond_broadcast(&m->changed);
	mgr_wake_scheduler(m);
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int mgr_project_member_remove(struct manager *m, const struct user_rec *by, const char *name, const char *email,
			      json_t **out, struct terr *err)
{
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	struct mproject *p = visible_project(m, by, name, err);
	const struct user_rec *u = p ? mgr_find_user_by_email(m, email) : NULL;
	struct mmember *mb = u ? mgr_find_member(m, p->rec.id, u->id) : NULL;
	if (!p) {
		rc = -ENOENT;
		goto out;
	}
	if (mgr_project_role(m, p, by) != ROLE_MANAGER) {
		rc = terr_set(err, EPERM, "only the project's managers and admins may change its members");
		goto out;
	}
	if (!mb) {
		rc = terr_set(err, ENOENT, "%s is not a member of project %s", email, name);
		goto out;
	}
	if (p->rec.personal) {
		rc = terr_set(err, EINVAL, "%s is a user's personal project: its owner stays in it", name);
		goto out;
	}
	size_t live = 0;
	for (size_t i = 0; i < m->n_sessions; i++)
		live += !strcmp(m->sessions[i]->rec.project_id, p->rec.id) &&
			!strcmp(m->sessions[i]->rec.owner_id, u->id) && !session_status_final(m->sessions[i]->rec.status);
	if (live) {
		rc = terr_set(err, EBUSY, "%s has %zu session%s in project %s not ended: they end first", email, live,
			      live == 1 ? "" : "s", name);
		goto out;
	}
	if ((rc = m->so->member_delete(m->store, mb->rec.id, err)) < 0)
		goto out;
	member_forget(m, mb);
	*out = mgr_project_json(m, p, by);
	log_info("manager", "%s removed %s from project %s", by->email, email, name);
	m->version++;
	pthread_cond_broadcast(&m->changed);
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}
