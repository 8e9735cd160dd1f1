/* Resource presets (presets.h): their checks and JSON, and the manager's
 * list of them, loaded from the store at open and written through on each
 * change, as projects are. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/util.h"
#include "manager/presets.h"
#include "manager/state.h"
#include "manager/validate.h"

#define PRESET_MAX_FGPU_M (1024 * 1000)

int preset_name_check(const char *name, struct terr *err)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n >= STORE_NAME_MAX)
		return terr_set(err, EINVAL, "a preset's name must be 1 to %d characters", STORE_NAME_MAX - 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!isascii(c) || !(isalnum(c) || c == ' ' || c == '-' || c == '_' || c == '.') ||
		    (i == 0 && !isalnum(c)))
			return terr_set(err, EINVAL, "preset name '%.64s': use letters, digits, spaces, '-', '_' and '.', "
					"starting with a letter or digit", name);
	}
	if (name[n - 1] == ' ')
		return terr_set(err, EINVAL, "preset name '%.64s' must not end with a space", name);
	return 0;
}

static int check_fields(json_t *body, bool create, struct terr *err)
{
	const char *key;
	json_t *val;
	json_object_foreach(body, key, val) {
		if ((create && !strcmp(key, "name")) || !strcmp(key, "resources") || !strcmp(key, "group"))
			continue;
		if (!create && !strcmp(key, "name"))
			return terr_set(err, EINVAL, "a preset's name cannot be changed: remove it and create "
					"another (known fields: resources, group)");
		return terr_set(err, EINVAL, "unknown field '%s' (known: %sresources, group)", key,
				create ? "name, " : "");
	}
	return 0;
}

static int read_resources(json_t *res, struct res *out, struct terr *err)
{
	if (!json_is_object(res))
		return terr_set(err, EINVAL, "resources must be an object like {\"cpu\": 4, \"mem\": \"8g\", \"fgpu\": 1}");
	const char *key;
	json_t *val;
	json_object_foreach(res, key, val) {
		if (strcmp(key, "cpu") && strcmp(key, "mem") && strcmp(key, "fgpu"))
			return terr_set(err, EINVAL, "unknown resource '%s' (known: cpu, mem, fgpu)", key);
	}
	if (jsonutil_get_milli(res, "cpu", "resources.cpu", &out->cpu_m, NULL, err) < 0 ||
	    jsonutil_get_size(res, "mem", "resources.mem", &out->mem, NULL, err) < 0 ||
	    jsonutil_get_milli(res, "fgpu", "resources.fgpu", &out->fgpu_m, NULL, err) < 0)
		return -EINVAL;
	return 0;
}

int preset_parse(json_t *body, bool create, struct preset_rec *r, struct terr *err)
{
	if (!json_is_object(body))
		return terr_set(err, EINVAL, "request body must be a JSON object");
	if (check_fields(body, create, err) < 0)
		return -EINVAL;
	if (create) {
		const char *name = NULL;
		if (jsonutil_get_string(body, "name", "name", &name, NULL, err) < 0)
			return -EINVAL;
		if (!name)
			return terr_set(err, EINVAL, "name is required (e.g. \"name\": \"Large\")");
		if (preset_name_check(name, err) < 0)
			return -EINVAL;
		util_strlcpy(r->name, name, sizeof(r->name));
	}
	json_t *res = json_object_get(body, "resources");
	if (create && !res)
		return terr_set(err, EINVAL, "resources is required (e.g. \"resources\": {\"cpu\": 4, \"mem\": \"8g\"})");
	if (res) {
		struct res v = create ? (struct res){0} : r->res;
		if (read_resources(res, &v, err) < 0)
			return -EINVAL;
		if (create && !json_object_get(res, "cpu"))
			return terr_set(err, EINVAL, "resources.cpu is required");
		if (create && !json_object_get(res, "mem"))
			return terr_set(err, EINVAL, "resources.mem is required");
		if (v.cpu_m < VALIDATE_MIN_CPU_M || v.cpu_m > VALIDATE_MAX_CPU_M)
			return terr_set(err, EINVAL, "resources.cpu must be 0.01 to 1024");
		if (v.mem < VALIDATE_MIN_MEM || v.mem > VALIDATE_MAX_MEM)
			return terr_set(err, EINVAL, "resources.mem must be 6 MiB to 16 TiB");
		if (v.fgpu_m < 0 || v.fgpu_m > PRESET_MAX_FGPU_M)
			return terr_set(err, EINVAL, "resources.fgpu must be 0 to 1024");
		r->res = v;
	}
	json_t *g = json_object_get(body, "group");
	if (g && !json_is_null(g)) {
		if (!json_is_string(g))
			return terr_set(err, EINVAL, "group must be a resource group's name, or null for every group");
		const char *name = json_string_value(g);
		if (*name && mgr_group_name_check(name, err) < 0)
			return terr_prefix(err, "group");
		util_strlcpy(r->resource_group, name, sizeof(r->resource_group));
	} else if (g) {
		r->resource_group[0] = '\0';
	}
	return 0;
}

json_t *preset_json(const struct preset_rec *p)
{
	return json_pack("{s:s,s:o,s:o,s:o}", "name", p->name, "resources", mgr_res_json(&p->res), "group",
			 p->resource_group[0] ? json_string(p->resource_group) : json_null(), "created_at",
			 mgr_time_json(p->created_ms));
}

/* ---------- the manager's list ---------- */

static int load_one(void *ud, const struct preset_rec *p)
{
	struct manager *m = ud;
	if (m->n_presets == PRESETS_MAX)
		return 0;   /* more than any admin made through the API */
	m->presets[m->n_presets++] = *p;
	return 0;
}

int mgr_presets_load(struct manager *m, struct terr *err)
{
	m->presets = calloc(PRESETS_MAX, sizeof(*m->presets));
	if (!m->presets)
		return terr_set(err, ENOMEM, "out of memory");
	m->n_presets = 0;
	return m->so->preset_load_all(m->store, load_one, m, err);
}

void mgr_presets_free(struct manager *m)
{
	free(m->presets);
	m->presets = NULL;
	m->n_presets = 0;
}

static struct preset_rec *find(struct manager *m, const char *name)
{
	for (size_t i = 0; i < m->n_presets; i++)
		if (!strcmp(m->presets[i].name, name))
			return &m->presets[i];
	return NULL;
}

json_t *mgr_presets_list(struct manager *m)
{
	json_t *arr = json_array();
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n_presets; i++)
		json_array_append_new(arr, preset_json(&m->presets[i]));
	pthread_mutex_unlock(&m->mu);
	return arr;
}

int mgr_preset_create(struct manager *m, const struct user_rec *by, json_t *body, json_t **out, struct terr *err)
{
	if (!by->is_admin)
		return terr_set(err, EPERM, "only an admin may create presets");
	struct preset_rec r = {.created_ms = util_now_ms()};
	if (preset_parse(body, true, &r, err) < 0)
		return -EINVAL;
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	if (find(m, r.name))
		rc = terr_set(err, EEXIST, "a preset named %s exists (tessera preset set changes it)", r.name);
	else if (m->n_presets == PRESETS_MAX)
		rc = terr_set(err, EBUSY, "there are %d presets already, the most there may be: remove one first",
			      PRESETS_MAX);
	else if ((rc = m->so->preset_put(m->store, &r, err)) == 0) {
		m->presets[m->n_presets++] = r;
		*out = preset_json(&r);
		log_info("manager", "%s created preset %s", by->email, r.name);
	}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int mgr_preset_update(struct manager *m, const struct user_rec *by, const char *name, json_t *body, json_t **out,
		      struct terr *err)
{
	if (!by->is_admin)
		return terr_set(err, EPERM, "only an admin may change presets");
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	struct preset_rec *p = find(m, name);
	struct preset_rec r;
	if (!p)
		rc = terr_set(err, ENOENT, "no preset named '%.64s' (tessera preset ls lists them)", name);
	else if ((r = *p, rc = preset_parse(body, false, &r, err)) < 0)
		rc = -EINVAL;
	else if ((rc = m->so->preset_put(m->store, &r, err)) == 0) {
		*p = r;
		*out = preset_json(p);
		log_info("manager", "%s changed preset %s", by->email, name);
	}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int mgr_preset_delete(struct manager *m, const struct user_rec *by, const char *name, struct terr *err)
{
	if (!by->is_admin)
		return terr_set(err, EPERM, "only an admin may remove presets");
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	struct preset_rec *p = find(m, name);
	if (!p)
		rc = terr_set(err, ENOENT, "no preset named '%.64s' (tessera preset ls lists them)", name);
	else if ((rc = m->so->preset_delete(m->store, name, err)) == 0) {
		log_info("manager", "%s removed preset %s", by->email, name);
		size_t i = (size_t)(p - m->presets);
		memmove(p, p + 1, (m->n_presets - i - 1) * sizeof(*p));
		m->n_presets--;
	}
	pthread_mutex_unlock(&m->mu);
	return rc;
}
