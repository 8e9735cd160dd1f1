/* Draining nodes and the caller's resource summary (docs/api.md, "Nodes"
 * and "Resources").
 *
 * A drained node is one the admin marked unschedulable: the scheduler
 * places nothing new on it (sched_agent.drained), its sessions keep
 * running. The set of drained node ids is kept in the store's settings
 * table under "unschedulable_nodes" (a JSON array) so that a restart keeps
 * it; it is not a `config set` key because it names nodes, not policy.
 * Functions ending in _locked are called with m->mu held; the others take
 * it. */
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "manager/state.h"

#define DRAINED_KEY "unschedulable_nodes"
#define GROUPS_KEY "node_groups"

/* The JSON value kept under key, or a new empty one when it is unset,
 * unreadable or not of the kind is_kind accepts (a broken value must not
 * keep the manager from starting); NULL only when out of memory. */
static json_t *kv_json_load(struct manager *m, const char *key, int (*is_kind)(const json_t *),
			    json_t *(*make_empty)(void))
{
	char *text = NULL;
	struct terr e = {0};
	json_t *v = NULL;
	if (m->so->kv_get(m->store, key, &text, &e) == 0) {
		v = json_loads(text, 0, NULL);
		free(text);
	}
	if (!is_kind(v)) {
		json_decref(v);
		v = make_empty();
	}
	return v;
}

static int is_array(const json_t *v)
{
	return json_is_array(v);
}

static int is_object(const json_t *v)
{
	return json_is_object(v);
}

int mgr_drain_load(struct manager *m, struct terr *err)
{
	/* Unset or unreadable: no node is drained. */
	m->drained_nodes = kv_json_load(m, DRAINED_KEY, is_array, json_array);
	return m->drained_nodes ? 0 : terr_set(err, ENOMEM, "out of memory");
}

void mgr_drain_free(struct manager *m)
{
	json_decref(m->drained_nodes);
	m->drained_nodes = NULL;
}

/* Index of id in the drained list, or -1. */
static ssize_t drained_index(const struct manager *m, const char *id)
{
	size_t i;
	json_t *v;
	json_array_foreach(m->drained_nodes, i, v)
		if (json_is_string(v) && !strcmp(json_string_value(v), id))
			return (ssize_t)i;
	return -1;
}

bool mgr_node_drained(const struct manager *m, const char *id)
{
	return m->drained_nodes && drained_index(m, id) >= 0;
}

/* Node id as the node list shows it (new reference), NULL on no memory. */
static json_t *node_as_listed(struct manager *m, const char *id)
{
	json_t *all = mgr_nodes_json(m), *node = NULL;
	size_t i;
	json_t *v;
	json_array_foreach(all, i, v) {
		const char *vid = json_string_value(json_object_get(v, "id"));
		if (vid && !strcmp(vid, id)) {
			node = json_incref(v);
			break;
		}
	}
	json_decref(all);
	return node;
}

int mgr_node_set_schedulable(struct manager *m, const char *id, bool schedulable, json_t **node,
			     struct terr *err)
{
	*node = NULL;
	pthread_mutex_lock(&m->mu);
	struct magent *a = mgr_find_agent(m, id);
	int rc = 0;
	if (!a) {
		rc = terr_set(err, ENOENT, "no node with id '%s' (see 'tessera node ls')", id);
		goto out;
	}
	ssize_t at = drained_index(m, id);
	if ((at < 0) != schedulable) {
		/* A change: apply it in memory, store the whole list, undo on a
		 * store failure so that memory and store agree. */
		if (schedulable)
			json_array_remove(m->drained_nodes, (size_t)at);
		else if (json_array_append_new(m->drained_nodes, json_string(id)) < 0) {
			rc = terr_set(err, ENOMEM, "out of memory");
			goto out;
		}
		char *text = json_dumps(m->drained_nodes, JSONUTIL_DUMP_FLAGS);
		rc = text ? m->so->kv_set(m->store, DRAINED_KEY, text, err) : terr_set(err, ENOMEM, "out of memory");
		free(text);
		if (rc < 0) {
			if (schedulable)
				json_array_insert_new(m->drained_nodes, (size_t)at, json_string(id));
			else
				json_array_remove(m->drained_nodes, json_array_size(m->drained_nodes) - 1);
			goto out;
		}
		log_info("manager", "node %s %s", id, schedulable ? "is schedulable again" : "drained: no new sessions");
		m->version++;
		mgr_wake_scheduler(m);
		pthread_cond_broadcast(&m->changed);
	}
	if (!(*node = node_as_listed(m, id)))
		rc = terr_set(err, ENOMEM, "out of memory");
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* A limit of the policy as JSON: null when 0 (no limit). */
static json_t *limit_json(int64_t v, bool milli)
{
	if (v <= 0)
		return json_null();
	return milli ? jsonutil_milli(v) : json_integer(v);
}

json_t *mgr_resources(struct manager *m, const struct user_rec *u)
{
	pthread_mutex_lock(&m->mu);
	int64_t max_sessions = 0;
	struct res max = {0}, used = {0}, capacity = {0}, free_ = {0};
	mgr_user_policy(m, u->email, &max_sessions, &max);
	int64_t n_used = 0;
	for (size_t i = 0; i < m->n_sessions; i++) {
		const struct msession *s = m->sessions[i];
		if (strcmp(s->rec.owner_id, u->id) || session_status_final(s->rec.status))
			continue;
		n_used += !mgr_session_is_sub(s);   /* a cluster session is one session */
		res_add(&used, &s->rec.req);
	}
	/* Capacity: the alive nodes. Free: what new sessions can get, on the
	 * alive nodes that are not drained. */
	int64_t per_dev = mgr_per_device_m(m), largest_dev = 0;
	struct res largest_node = {0};
	for (size_t i = 0; i < m->n_agents; i++) {
		const struct magent *a = m->agents[i];
		if (!a->alive)
			continue;
		res_add(&capacity, &a->rec.capacity);
		if (mgr_node_drained(m, a->rec.id))
			continue;
		struct res f = a->rec.capacity;
		res_sub(&f, &a->used);
		if (f.cpu_m < 0) f.cpu_m = 0;
		if (f.mem < 0) f.mem = 0;
		if (f.fgpu_m < 0) f.fgpu_m = 0;
		res_add(&free_, &f);
		if (f.cpu_m > largest_node.cpu_m) largest_node.cpu_m = f.cpu_m;
		if (f.mem > largest_node.mem) largest_node.mem = f.mem;
		for (int d = 0; d < a->n_gpus; d++)
			if (per_dev - a->gpus[d].used_m > largest_dev)
				largest_dev = per_dev - a->gpus[d].used_m;
	}
	/* allow_root too: the launch dialog turns its root option off, with
	 * the reason, rather than let a launch fail with 403. */
	json_t *o = json_pack("{s:{s:o,s:o,s:o,s:o,s:b},s:{s:I,s:o,s:I,s:o},s:{s:o,s:o,s:o,s:{s:o,s:I}}}",
		"policy", "max_sessions", limit_json(max_sessions, false), "max_cpu", limit_json(max.cpu_m, true),
		"max_mem", limit_json(max.mem, false), "max_fgpu", limit_json(max.fgpu_m, true),
		"allow_root", mgr_user_allow_root(m, u->email),
		"used", "sessions", (json_int_t)n_used, "cpu", jsonutil_milli(used.cpu_m), "mem", (json_int_t)used.mem,
		"fgpu", jsonutil_milli(used.fgpu_m),
		"cluster", "capacity", mgr_res_json(&capacity), "free", mgr_res_json(&free_),
		"largest_fgpu_free_on_one_device", jsonutil_milli(largest_dev),
		"largest_free_on_one_node", "cpu", jsonutil_milli(largest_node.cpu_m), "mem", (json_int_t)largest_node.mem);
	/* The caller's projects, with their quotas and what they hold, for
	 * the resource panel's project bars (docs/scheduling.md). */
	json_t *projects = json_array();
	for (size_t i = 0; o && i < m->n_projects; i++) {
		const struct mproject *p = m->projects[i];
		if (!mgr_find_member(m, p->rec.id, u->id))
			continue;
		json_t *pj = mgr_project_json(m, p, u);
		json_array_append_new(projects, json_pack("{s:O,s:O,s:O,s:O,s:O}", "name", json_object_get(pj, "name"),
							  "personal", json_object_get(pj, "personal"),
							  "quota", json_object_get(pj, "quota"),
							  "used", json_object_get(pj, "used"),
							  "my_role", json_object_get(pj, "my_role")));
		json_decref(pj);
	}
	json_object_set_new(o, "projects", projects);
	pthread_mutex_unlock(&m->mu);
	return o;
}

/* ---------- resource groups ---------- */

int mgr_node_groups_load(struct manager *m, struct terr *err)
{
	/* Unset or unreadable: every node in the default group. */
	m->node_groups = kv_json_load(m, GROUPS_KEY, is_object, json_object);
	return m->node_groups ? 0 : terr_set(err, ENOMEM, "out of memory");
}

void mgr_node_groups_free(struct manager *m)
{
	json_decref(m->node_groups);
	m->node_groups = NULL;
}

const char *mgr_node_group(const struct manager *m, const char *id)
{
	const char *g = m->node_groups ? json_string_value(json_object_get(m->node_groups, id)) : NULL;
	return g ? g : MGR_DEFAULT_GROUP;
}

int mgr_node_set_group(struct manager *m, const char *id, const char *group, json_t **node, struct terr *err)
{
	*node = NULL;
	pthread_mutex_lock(&m->mu);
	struct magent *a = mgr_find_agent(m, id);
	int rc = 0;
	if (!a) {
		rc = terr_set(err, ENOENT, "no node with id '%s' (see 'tessera node ls')", id);
		goto out;
	}
	/* Kept as a copy to put back if the store refuses the change. */
	json_t *before = json_deep_copy(m->node_groups);
	if (!before) {
		rc = terr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	if (!strcmp(group, MGR_DEFAULT_GROUP))
		json_object_del(m->node_groups, id);
	else
		json_object_set_new(m->node_groups, id, json_string(group));
	char *text = json_dumps(m->node_groups, JSONUTIL_DUMP_FLAGS | JSON_SORT_KEYS);
	rc = text ? m->so->kv_set(m->store, GROUPS_KEY, text, err) : terr_set(err, ENOMEM, "out of memory");
	free(text);
	if (rc < 0) {
		json_decref(m->node_groups);
		m->node_groups = before;
		goto out;
	}
	json_decref(before);
	log_info("manager", "node %s is in resource group %s", id, group);
	m->version++;
	mgr_wake_scheduler(m);
	pthread_cond_broadcast(&m->changed);
	if (!(*node = node_as_listed(m, id)))
		rc = terr_set(err, ENOMEM, "out of memory");
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}
