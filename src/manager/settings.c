/* Cluster settings, changed at run time with `tessera config set` and kept
 * in the store's settings table as JSON values:
 *   fgpu_per_device   fGPU one physical GPU counts as (integer, 1..100)
 *   fgpu_quantum      smallest fGPU step a request may use (0.001..1)
 *   queue_policy      fifo | lifo | drf
 *   selector          concentrated | dispersed
 *   fifo_skip_after   passes a blocked head waits before later ones may
 *                     pass it (0 = never)
 *   folder_trash_days days a removed folder stays in its host's trash
 *                     before it is purged (integer 0..3650, default 7)
 *   policy.default    {"max_sessions","max_cpu","max_mem","max_fgpu",
 *                     "max_concurrent_execs" (default 4), "allow_root",
 *                     "max_private_images" (default 10, 0 = none),
 *                     "max_folders" (default 20, 0 = none),
 *                     "max_folder_bytes" (a size; cap and default of a
 *                     folder's quota, 0 = none),
 *                     "idle_timeout_s" (0 = none), "idle_cpu_pct"
 *                     (default 5; docs/admin.md, "Idle sessions")}
 *   policy.<email>    the same, for one user (overrides the default)
 * mgr_config_get and mgr_config_set (core.h) take the lock; the rest is
 * called with it held. */
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/units.h"
#include "manager/state.h"

static int store_setting(struct manager *m, const char *key, json_t *value, struct terr *err)
{
	/* Settings are often bare numbers or strings: ENCODE_ANY. */
	char *text = json_dumps(value, JSONUTIL_DUMP_FLAGS | JSON_ENCODE_ANY);
	if (!text)
		return terr_set(err, ENOMEM, "out of memory");
	int rc = m->so->kv_set(m->store, key, text, err);
	free(text);
	return rc;
}

static int parse_policy(json_t *v, const char *key, struct terr *err)
{
	if (!json_is_object(v))
		return terr_set(err, EINVAL, "%s must be an object like {\"max_sessions\": 2, \"max_fgpu\": 1}", key);
	const char *k;
	json_t *x;
	json_object_foreach(v, k, x) {
		int64_t dummy = 0;   /* null leaves it untouched: no limit */
		int rc;
		if (!strcmp(k, "max_sessions") || !strcmp(k, "max_concurrent_execs") ||
		    !strcmp(k, "max_private_images") || !strcmp(k, "max_folders"))
			rc = jsonutil_get_int(v, k, k, &dummy, NULL, err) < 0 || dummy < 0
				? terr_set(err, EINVAL, "%s.%s must be a non-negative integer", key, k) : 0;
		else if (!strcmp(k, "max_cpu") || !strcmp(k, "max_fgpu"))
			rc = jsonutil_get_milli(v, k, k, &dummy, NULL, err);
		else if (!strcmp(k, "max_mem") || !strcmp(k, "max_folder_bytes"))
			rc = jsonutil_get_size(v, k, k, &dummy, NULL, err);
		else if (!strcmp(k, "idle_timeout_s"))
			rc = json_is_integer(x) && json_integer_value(x) >= 0 && json_integer_value(x) <= 30 * 86400 ? 0
				: terr_set(err, EINVAL, "%s.idle_timeout_s must be whole seconds from 0 (no timeout) to "
					   "2592000 (30 days)", key);
		else if (!strcmp(k, "idle_cpu_pct"))
			rc = json_is_integer(x) && json_integer_value(x) >= 0 && json_integer_value(x) <= 100 ? 0
				: terr_set(err, EINVAL, "%s.idle_cpu_pct must be a whole percent from 0 to 100", key);
		else if (!strcmp(k, "allow_root"))
			rc = json_is_boolean(x) ? 0 : terr_set(err, EINVAL, "%s.allow_root must be true or false", key);
		else
			rc = terr_set(err, EINVAL, "%s: unknown limit '%s' (known: max_sessions, max_cpu, max_mem, max_fgpu, "
				      "max_concurrent_execs, allow_root, max_private_images, max_folders, max_folder_bytes, "
				      "idle_timeout_s, idle_cpu_pct)",
				      key, k);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Applies a validated value to m->settings (no storing). */
static int apply(struct manager *m, const char *key, json_t *value, struct terr *err)
{
	struct msettings *st = &m->settings;
	int64_t n;
	if (!strcmp(key, "fgpu_per_device")) {
		if (!json_is_integer(value) || (n = json_integer_value(value)) < 1 || n > 100)
			return terr_set(err, EINVAL, "fgpu_per_device must be an integer from 1 to 100");
		st->fgpu_per_device = n;
		mgr_apply_fgpu_setting(m);
	} else if (!strcmp(key, "fgpu_quantum")) {
		json_t *wrap = json_pack("{s:O}", "v", value);
		bool present = false;
		int rc = jsonutil_get_milli(wrap, "v", "fgpu_quantum", &n, &present, err);
		json_decref(wrap);
		if (rc < 0)
			return rc;
		if (!present)
			return terr_set(err, EINVAL, "fgpu_quantum must be a number such as 0.01");
		if (n < 1 || n > 1000 || 1000 % n != 0)
			return terr_set(err, EINVAL, "fgpu_quantum must divide 1 exactly, from 0.001 to 1 (e.g. 0.01, 0.05, 0.25)");
		st->fgpu_quantum_m = n;
	} else if (!strcmp(key, "queue_policy")) {
		const struct sched_queue_ops *q = json_is_string(value) ? sched_queue_find(json_string_value(value)) : NULL;
		if (!q)
			return terr_set(err, EINVAL, "queue_policy must be fifo, lifo or drf");
		st->queue = q;
	} else if (!strcmp(key, "selector")) {
		const struct sched_selector_ops *sel = json_is_string(value) ? sched_selector_find(json_string_value(value)) : NULL;
		if (!sel)
			return terr_set(err, EINVAL, "selector must be concentrated or dispersed");
		st->selector = sel;
	} else if (!strcmp(key, "fifo_skip_after")) {
		if (!json_is_integer(value) || (n = json_integer_value(value)) < 0 || n > 1000000)
			return terr_set(err, EINVAL, "fifo_skip_after must be an integer from 0 (never) to 1000000");
		st->fifo_skip_after = (int)n;
	} else if (!strcmp(key, "folder_trash_days")) {
		if (!json_is_integer(value) || (n = json_integer_value(value)) < 0 || n > 3650)
			return terr_set(err, EINVAL, "folder_trash_days must be an integer from 0 to 3650");
		st->folder_trash_days = (int)n;
	} else if (!strncmp(key, "policy.", 7)) {
		/* The key names whom the policy limits; a key no user can have
		 * (policy.%ff, policy.nobody) would be a policy that never
		 * applies, so it is refused rather than stored. */
		char who[256];
		if (validate_policy_key(key + 7, who, sizeof(who), err) < 0)
			return -EINVAL;
		if (json_is_null(value)) {
			json_object_del(st->policies, who);
		} else {
			if (parse_policy(value, key, err) < 0)
				return -EINVAL;
			if (json_object_set(st->policies, who, value) < 0)
				return terr_set(err, ENOMEM, "out of memory");
		}
	} else {
		return terr_set(err, ENOENT,
				"unknown setting '%s' (known: fgpu_per_device, fgpu_quantum, queue_policy, selector, "
				"fifo_skip_after, folder_trash_days, policy.default, policy.<email>)", key);
	}
	return 0;
}

int mgr_settings_set(struct manager *m, const char *key, json_t *value, struct terr *err)
{
	int rc = apply(m, key, value, err);
	if (rc < 0)
		return rc;
	/* Policies are kept together, as one object. */
	if (!strncmp(key, "policy.", 7))
		rc = store_setting(m, "policies", m->settings.policies, err);
	else
		rc = store_setting(m, key, value, err);
	if (rc < 0)
		return rc;
	log_info("manager", "setting %s changed", key);
	m->version++;
	mgr_wake_scheduler(m);
	pthread_cond_broadcast(&m->changed);
	return 0;
}

static const char *const known_keys[] = {"fgpu_per_device", "fgpu_quantum", "queue_policy", "selector",
					 "fifo_skip_after", "folder_trash_days", NULL};

int mgr_settings_load(struct manager *m, struct terr *err)
{
	struct msettings *st = &m->settings;
	st->fgpu_per_device = 1;
	st->fgpu_quantum_m = 10;
	st->queue = &sched_fifo;
	st->selector = &sched_concentrated;
	st->fifo_skip_after = 0;
	st->folder_trash_days = MGR_DEFAULT_FOLDER_TRASH_DAYS;
	st->policies = json_object();
	for (int i = 0; known_keys[i]; i++) {
		char *text = NULL;
		struct terr e = {0};
		if (m->so->kv_get(m->store, known_keys[i], &text, &e) < 0)
			continue;   /* unset: default */
		json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
		free(text);
		if (!v || apply(m, known_keys[i], v, err) < 0) {
			json_decref(v);
			return terr_prefix(err, "stored setting %s", known_keys[i]);
		}
		json_decref(v);
	}
	char *pol = NULL;
	struct terr e = {0};
	if (m->so->kv_get(m->store, "policies", &pol, &e) == 0) {
		json_t *v = json_loads(pol, 0, NULL);
		free(pol);
		if (json_is_object(v)) {
			json_decref(st->policies);
			st->policies = v;
		} else {
			json_decref(v);
		}
	}
	return 0;
}

json_t *mgr_settings_json(struct manager *m)
{
	struct msettings *st = &m->settings;
	return json_pack("{s:I,s:o,s:s,s:s,s:i,s:i,s:O}",
		"fgpu_per_device", (json_int_t)st->fgpu_per_device,
		"fgpu_quantum", jsonutil_milli(st->fgpu_quantum_m),
		"queue_policy", st->queue->name, "selector", st->selector->name,
		"fifo_skip_after", st->fifo_skip_after,
		"folder_trash_days", st->folder_trash_days, "policies", st->policies);
}

void mgr_user_policy(struct manager *m, const char *email, int64_t *max_sessions, struct res *max)
{
	json_t *p = json_object_get(m->settings.policies, email);
	if (!p)
		p = json_object_get(m->settings.policies, "default");
	*max_sessions = 0;
	memset(max, 0, sizeof(*max));
	if (!p)
		return;
	jsonutil_get_int(p, "max_sessions", "max_sessions", max_sessions, NULL, NULL);
	jsonutil_get_milli(p, "max_cpu", "max_cpu", &max->cpu_m, NULL, NULL);
	jsonutil_get_size(p, "max_mem", "max_mem", &max->mem, NULL, NULL);
	jsonutil_get_milli(p, "max_fgpu", "max_fgpu", &max->fgpu_m, NULL, NULL);
}

int64_t mgr_user_max_execs(struct manager *m, const char *email)
{
	json_t *p = json_object_get(m->settings.policies, email);
	if (!p)
		p = json_object_get(m->settings.policies, "default");
	int64_t n = MGR_DEFAULT_MAX_EXECS;
	bool present = false;
	if (p && jsonutil_get_int(p, "max_concurrent_execs", "max_concurrent_execs", &n, &present, NULL) == 0 &&
	    present)
		return n;
	return MGR_DEFAULT_MAX_EXECS;
}

bool mgr_user_allow_root(struct manager *m, const char *email)
{
	json_t *p = json_object_get(m->settings.policies, email);
	if (!p)
		p = json_object_get(m->settings.policies, "default");
	return json_is_true(json_object_get(p, "allow_root"));
}

int64_t mgr_user_max_private_images(struct manager *m, const char *email)
{
	int64_t v = MGR_DEFAULT_MAX_PRIVATE_IMAGES;
	json_t *p = json_object_get(m->settings.policies, email);
	/* The user's own policy wins only where it sets the key. */
	if (!p || !json_object_get(p, "max_private_images"))
		p = json_object_get(m->settings.policies, "default");
	if (p && json_object_get(p, "max_private_images"))
		jsonutil_get_int(p, "max_private_images", "max_private_images", &v, NULL, NULL);
	return v;
}

int64_t mgr_user_policy_limit(struct manager *m, const char *email, const char *key, int64_t def)
{
	int64_t v = def;
	json_t *p = json_object_get(m->settings.policies, email);
	/* The user's own policy wins only where it sets the key. */
	if (!p || !json_object_get(p, key))
		p = json_object_get(m->settings.policies, "default");
	json_t *x = p ? json_object_get(p, key) : NULL;
	if (json_is_integer(x))
		v = json_integer_value(x);
	else if (x)
		jsonutil_get_size(p, key, key, &v, NULL, NULL);
	return v;
}

void mgr_settings_free(struct manager *m)
{
	json_decref(m->settings.policies);
	m->settings.policies = NULL;
}

json_t *mgr_config_get(struct manager *m)
{
	pthread_mutex_lock(&m->mu);
	json_t *o = mgr_settings_json(m);
	pthread_mutex_unlock(&m->mu);
	return o;
}

int mgr_config_set(struct manager *m, const char *key, json_t *value, json_t **settings, struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	int rc = mgr_settings_set(m, key, value, err);
	if (rc == 0 && settings)
		*settings = mgr_settings_json(m);
	pthread_mutex_unlock(&m->mu);
	return rc;
}
