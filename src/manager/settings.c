/* Cluster settings, changed at run time with `tessera config set` and kept
 * in the store's settings table as JSON values:
 *   fgpu_per_device   fGPU one physical GPU counts as (integer, 1..100)
 *   fgpu_quantum      smallest fGPU step a request may use (0.001..1)
 *   queue_policy      fifo | lifo | drf | fairshare
 *   fairshare_half_life_s
 *                     seconds in which fair-share usage halves (0 = it
 *                     never decays; default 604800, a week)
 *   preemption        true | false: the scheduler may end preemptible
 *                     sessions to make room (default true)
 *   preemption_min_runtime_s
 *                     no session is preempted before it ran this long
 *                     (default 300)
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
 *                     (default 5; docs/admin.md, "Idle sessions"),
 *                     "max_priority" (default 0), "preemptible_batch"
 *                     (default true), "preemptible_interactive"
 *                     (default false), "on_preempt" ("requeue", the
 *                     default, or "end"; docs/scheduling.md)}
 *   policy.<email>    the same, for one user (overrides the default)
 *   announcement      a line admins post for every logged-in user, shown
 *                     as a banner on every page of the web UI (""/null:
 *                     none; 1..MGR_ANNOUNCEMENT_MAX bytes, no control
 *                     characters); every user reads it
 *   log_max_size, log_max_files
 *                     agents' settings of the same names, for every
 *                     node (agent_cluster_check; null: agent.conf's)
 *   storage_hosts, registry_url, wsproxy_url, wsproxy_port_range,
 *   wsproxy_domain    manager.conf's keys of the same names, checked as
 *                     manager.conf's are (null: manager.conf's; the
 *                     storage hosts' folders and the proxy's ports are
 *                     checked against the manager's state, check_state)
 * Without etcd they are rows of the store's settings table (the policies
 * together, under "policies"); with etcd (manager.conf's etcd) each is
 * the key ETCD_CONFIG_PREFIX + KEY of etcd, followed by a watch so that
 * a change made through any manager (or with etcdctl) is applied here
 * without a restart (docs/architecture.md, "Cluster configuration").
 * mgr_config_get, mgr_config_set and mgr_config_put (core.h) take the
 * lock; the rest is called with it held, or works on a struct msettings
 * of its own. */
#include <stdlib.h>
#include <string.h>

#include "common/etcd.h"
#include "common/jsonutil.h"
#include "common/log.h"
#include "common/units.h"
#include "common/util.h"
#include "manager/state.h"
#include "registry/registry.h"

/* The scalar settings, each a row of the store (policies are one row). */
static const char *const scalar_keys[] = {"fgpu_per_device", "fgpu_quantum", "queue_policy", "selector",
					  "fifo_skip_after", "folder_trash_days", "log_max_size", "log_max_files",
					  "storage_hosts", "registry_url", "wsproxy_url", "wsproxy_port_range",
					  "wsproxy_domain", "fairshare_half_life_s", "preemption",
					  "preemption_min_runtime_s", "announcement", NULL};

static const char *const conf_keys[] = {"storage_hosts", "registry_url", "wsproxy_url", "wsproxy_port_range",
					"wsproxy_domain"};
#define N_CONF_KEYS (sizeof(conf_keys) / sizeof(conf_keys[0]))

bool mgr_conf_key(const char *key)
{
	for (size_t i = 0; i < N_CONF_KEYS; i++)
		if (!strcmp(conf_keys[i], key))
			return true;
	return false;
}

/* manager.conf's value of such a key (may be NULL). */
static const char *conf_file_value(const struct manager *m, const char *key)
{
	const struct manager_config *c = &m->cfg;
	if (!strcmp(key, "storage_hosts"))
		return c->storage_hosts;
	if (!strcmp(key, "registry_url"))
		return c->registry_url;
	if (!strcmp(key, "wsproxy_url"))
		return c->wsproxy_url;
	if (!strcmp(key, "wsproxy_port_range"))
		return c->wsproxy_port_range;
	if (!strcmp(key, "wsproxy_domain"))
		return c->wsproxy_domain;
	return NULL;
}

const char *mgr_conf_value(struct manager *m, const char *key)
{
	json_t *v = m->settings.conf ? json_object_get(m->settings.conf, key) : NULL;
	return v ? json_string_value(v) : conf_file_value(m, key);
}

/* What an unset or empty value means, for in_force (buf: n bytes, for
 * the one that is made). */
static const char *conf_default(const struct manager *m, const char *key, char *buf, size_t n)
{
	if (!strcmp(key, "storage_hosts")) {
		snprintf(buf, n, "local:%s/folders", m->data_dir);
		return buf;
	}
	if (!strcmp(key, "wsproxy_url"))
		return APPROUTES_DEFAULT_URL;
	if (!strcmp(key, "wsproxy_port_range"))
		return APPROUTES_DEFAULT_RANGE;
	return "";   /* registry_url: none; wsproxy_domain: port mode */
}

/* The check of one such value alone, as manager.conf's is checked. */
static int check_conf(const char *key, const char *s, struct terr *err)
{
	if (!strcmp(key, "storage_hosts")) {
		struct model_storage_host hosts[MGR_MAX_STORAGE_HOSTS];
		size_t n = 0;
		return model_storage_hosts_parse(s, hosts, MGR_MAX_STORAGE_HOSTS, &n, err) < 0 ? -EINVAL : 0;
	}
	if (!strcmp(key, "registry_url")) {
		char host[256], base[300];
		/* "": no registry, whatever manager.conf says. */
		if (*s && registry_parse_url(s, host, sizeof(host), base, sizeof(base), err) < 0)
			return terr_prefix(err, "registry_url");
		return 0;
	}
	if (!strcmp(key, "wsproxy_url")) {
		char scheme[8], host[256];
		int port;
		if (!*s)
			return terr_set(err, EINVAL, "wsproxy_url must be http://HOST or https://HOST, or null for "
					"manager.conf's");
		if (approutes_parse_base(s, scheme, sizeof(scheme), host, sizeof(host), &port, err) < 0)
			return terr_prefix(err, "wsproxy_url");
		return 0;
	}
	if (!strcmp(key, "wsproxy_port_range")) {
		int lo, hi;
		if (util_parse_port_range(s, &lo, &hi, err) < 0)
			return terr_prefix(err, "wsproxy_port_range");
		return 0;
	}
	/* wsproxy_domain; "": port mode. */
	if (*s && approutes_check_domain(s, err) < 0)
		return terr_prefix(err, "wsproxy_domain");
	return 0;
}

static void settings_defaults(struct msettings *st)
{
	st->fgpu_per_device = 1;
	st->fgpu_quantum_m = 10;
	st->queue = &sched_fifo;
	st->selector = &sched_concentrated;
	st->fifo_skip_after = 0;
	st->folder_trash_days = MGR_DEFAULT_FOLDER_TRASH_DAYS;
	st->fairshare_half_life_s = 7 * 86400;
	st->preemption = true;
	st->preemption_min_runtime_s = 300;
	st->announcement[0] = '\0';
	st->policies = json_object();
	st->agent = json_object();
	st->conf = json_object();
}

static void settings_clear(struct msettings *st)
{
	json_decref(st->policies);
	json_decref(st->agent);
	json_decref(st->conf);
	st->policies = st->agent = st->conf = NULL;
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
		else if (!strcmp(k, "allow_root") || !strcmp(k, "preemptible_batch") ||
			 !strcmp(k, "preemptible_interactive"))
			rc = json_is_boolean(x) ? 0 : terr_set(err, EINVAL, "%s.%s must be true or false", key, k);
		else if (!strcmp(k, "max_priority"))
			rc = json_is_integer(x) && json_integer_value(x) >= 0 && json_integer_value(x) <= MGR_MAX_PRIORITY
				? 0 : terr_set(err, EINVAL, "%s.max_priority must be an integer from 0 to %d", key,
					       MGR_MAX_PRIORITY);
		else if (!strcmp(k, "on_preempt"))
			rc = json_is_string(x) && (!strcmp(json_string_value(x), "requeue") ||
						   !strcmp(json_string_value(x), "end"))
				? 0 : terr_set(err, EINVAL, "%s.on_preempt must be \"requeue\" or \"end\"", key);
		else
			rc = terr_set(err, EINVAL, "%s: unknown limit '%s' (known: max_sessions, max_cpu, max_mem, max_fgpu, "
				      "max_concurrent_execs, allow_root, max_private_images, max_folders, max_folder_bytes, "
				      "idle_timeout_s, idle_cpu_pct, max_priority, preemptible_batch, "
				      "preemptible_interactive, on_preempt)",
				      key, k);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The one check of a setting, applied to st when valid (value borrowed;
 * st keeps copies, never the caller's objects: the settings are changed
 * under the manager lock by API threads and the etcd watch while callers
 * release their values outside it, and jansson's reference counts are
 * not shared safely between threads).
 * Whether a value is valid never depends on st, so a check alone is an
 * apply to a scratch struct (check_one). null is valid for the keys that
 * can be unset (policy.*, the agents'). */
static int apply_to(struct msettings *st, const char *key, json_t *value, struct terr *err)
{
	int64_t n;
	if (!strcmp(key, "fgpu_per_device")) {
		if (!json_is_integer(value) || (n = json_integer_value(value)) < 1 || n > 100)
			return terr_set(err, EINVAL, "fgpu_per_device must be an integer from 1 to 100");
		st->fgpu_per_device = n;
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
			return terr_set(err, EINVAL, "queue_policy must be fifo, lifo, drf or fairshare");
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
	} else if (!strcmp(key, "fairshare_half_life_s")) {
		if (!json_is_integer(value) || (n = json_integer_value(value)) < 0 || n > 366 * 86400)
			return terr_set(err, EINVAL, "fairshare_half_life_s must be whole seconds from 0 (usage never "
					"decays) to 31622400 (a year)");
		st->fairshare_half_life_s = n;
	} else if (!strcmp(key, "preemption")) {
		if (!json_is_boolean(value))
			return terr_set(err, EINVAL, "preemption must be true or false");
		st->preemption = json_is_true(value);
	} else if (!strcmp(key, "preemption_min_runtime_s")) {
		if (!json_is_integer(value) || (n = json_integer_value(value)) < 0 || n > 30 * 86400)
			return terr_set(err, EINVAL, "preemption_min_runtime_s must be whole seconds from 0 to 2592000 "
					"(30 days)");
		st->preemption_min_runtime_s = n;
	} else if (!strcmp(key, "announcement")) {
		if (json_is_null(value)) {
			st->announcement[0] = '\0';
			return 0;
		}
		const char *t = json_string_value(value);
		if (!t)
			return terr_set(err, EINVAL, "announcement must be a string (\"\" or null: none)");
		size_t n = strlen(t);
		if (n > MGR_ANNOUNCEMENT_MAX)
			return terr_set(err, EINVAL, "announcement is %zu bytes; at most %d", n, MGR_ANNOUNCEMENT_MAX);
		/* One line in a banner: a newline or a terminal's escape would
		 * show as nothing or as garbage, and a NUL would cut it. */
		for (const unsigned char *p = (const unsigned char *)t; *p; p++)
			if (*p < 0x20 || *p == 0x7f)
				return terr_set(err, EINVAL, "announcement must be one line without control characters");
		if (json_string_length(value) != n)
			return terr_set(err, EINVAL, "announcement must not hold a NUL character");
		memcpy(st->announcement, t, n + 1);
	} else if (agent_cluster_key(key)) {
		if (agent_cluster_check(key, value, NULL, err) < 0)
			return -EINVAL;
		if (json_is_null(value))
			json_object_del(st->agent, key);
		else if (json_object_set_new(st->agent, key, json_deep_copy(value)) < 0)
			return terr_set(err, ENOMEM, "out of memory");
	} else if (mgr_conf_key(key)) {
		if (json_is_null(value)) {
			json_object_del(st->conf, key);
			return 0;
		}
		if (!json_is_string(value))
			return terr_set(err, EINVAL, "%s must be a string, as in manager.conf, or null for manager.conf's",
					key);
		if (check_conf(key, json_string_value(value), err) < 0)
			return -EINVAL;
		if (json_object_set_new(st->conf, key, json_string(json_string_value(value))) < 0)
			return terr_set(err, ENOMEM, "out of memory");
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
			if (json_object_set_new(st->policies, who, json_deep_copy(value)) < 0)
				return terr_set(err, ENOMEM, "out of memory");
		}
	} else {
		return terr_set(err, ENOENT,
				"unknown setting '%s' (known: fgpu_per_device, fgpu_quantum, queue_policy, selector, "
				"fifo_skip_after, folder_trash_days, fairshare_half_life_s, preemption, "
				"preemption_min_runtime_s, announcement, " AGENT_CLUSTER_KEYS ", " MGR_CONF_KEYS
				", policy.default, policy.<email>)",
				key);
	}
	return 0;
}

static int check_one(const char *key, json_t *value, struct terr *err)
{
	struct msettings scratch;
	settings_defaults(&scratch);
	int rc = apply_to(&scratch, key, value, err);
	settings_clear(&scratch);
	return rc;
}

int mgr_settings_check_flat(json_t *flat, struct terr *err)
{
	if (!json_is_object(flat))
		return terr_set(err, EINVAL, "settings must be a JSON object of setting -> value, "
				"as 'tessera config get --prefix \"\"' prints");
	const char *k;
	json_t *v;
	json_object_foreach(flat, k, v) {
		int rc = check_one(k, v, err);
		if (rc < 0)
			/* Most messages begin with the key already. */
			return rc == -ENOENT || (err && !strncmp(err->msg, k, strlen(k))) ? rc : terr_prefix(err, "%s", k);
	}
	return 0;
}

/* The value key would have in force with changes applied ({key: value},
 * null: manager.conf's). */
static const char *value_with(struct manager *m, json_t *changes, const char *key)
{
	json_t *v = json_object_get(changes, key);
	if (!v)
		return mgr_conf_value(m, key);
	return json_is_null(v) ? conf_file_value(m, key) : json_string_value(v);
}

/* What a valid change must also fit, in the manager's state (under mu):
 * storage hosts that hold folders stay, the proxy serves the addresses.
 * changes: {key: value}, each checked already. */
static int check_state(struct manager *m, json_t *changes, struct terr *err)
{
	if (json_object_get(changes, "storage_hosts") &&
	    mgr_folders_hosts_check(m, value_with(m, changes, "storage_hosts"), err) < 0)
		return -EINVAL;
	if ((json_object_get(changes, "wsproxy_url") || json_object_get(changes, "wsproxy_port_range") ||
	     json_object_get(changes, "wsproxy_domain")) &&
	    mgr_apps_check(m, value_with(m, changes, "wsproxy_url"), value_with(m, changes, "wsproxy_port_range"),
			   value_with(m, changes, "wsproxy_domain"), err) < 0)
		return -EINVAL;
	return 0;
}

static int check_state_one(struct manager *m, const char *key, json_t *value, struct terr *err)
{
	if (!mgr_conf_key(key))
		return 0;
	json_t *changes = json_pack("{s:O}", key, value);
	int rc = changes ? check_state(m, changes, err) : terr_set(err, ENOMEM, "out of memory");
	json_decref(changes);
	return rc;
}

static void fairshare_keys_set(json_t *o, const struct msettings *st)
{
	json_object_set_new(o, "fairshare_half_life_s", json_integer(st->fairshare_half_life_s));
	json_object_set_new(o, "preemption", json_boolean(st->preemption));
	json_object_set_new(o, "preemption_min_runtime_s", json_integer(st->preemption_min_runtime_s));
	json_object_set_new(o, "announcement", json_string(st->announcement));
}

static json_t *flat_of(const struct msettings *st)
{
	json_t *o = json_pack("{s:I,s:o,s:s,s:s,s:i,s:i}",
		"fgpu_per_device", (json_int_t)st->fgpu_per_device,
		"fgpu_quantum", jsonutil_milli(st->fgpu_quantum_m),
		"queue_policy", st->queue->name, "selector", st->selector->name,
		"fifo_skip_after", st->fifo_skip_after, "folder_trash_days", st->folder_trash_days);
	if (!o)
		return NULL;
	fairshare_keys_set(o, st);
	static const char *const agent_keys[] = {"log_max_size", "log_max_files"};
	for (size_t i = 0; i < 2; i++) {
		json_t *v = json_object_get(st->agent, agent_keys[i]);
		json_object_set_new(o, agent_keys[i], v ? json_deep_copy(v) : json_null());
	}
	for (size_t i = 0; i < N_CONF_KEYS; i++) {
		json_t *v = json_object_get(st->conf, conf_keys[i]);
		json_object_set_new(o, conf_keys[i], v ? json_deep_copy(v) : json_null());
	}
	const char *who;
	json_t *p;
	json_object_foreach(st->policies, who, p) {
		char key[300];
		snprintf(key, sizeof(key), "policy.%s", who);
		json_object_set_new(o, key, json_deep_copy(p));
	}
	return o;
}

/* Loads what the store holds into st (defaults where it holds nothing). */
static int load_store(const struct store_ops *so, struct store *store, struct msettings *st, struct terr *err)
{
	for (int i = 0; scalar_keys[i]; i++) {
		char *text = NULL;
		struct terr e = {0};
		if (so->kv_get(store, scalar_keys[i], &text, &e) < 0)
			continue;   /* unset: default */
		json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
		free(text);
		if (!v || apply_to(st, scalar_keys[i], v, err) < 0) {
			json_decref(v);
			return terr_prefix(err, "stored setting %s", scalar_keys[i]);
		}
		json_decref(v);
	}
	char *pol = NULL;
	struct terr e = {0};
	if (so->kv_get(store, "policies", &pol, &e) == 0) {
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

int mgr_settings_export_store(const struct store_ops *so, struct store *store, json_t **flat, struct terr *err)
{
	struct msettings st;
	settings_defaults(&st);
	int rc = load_store(so, store, &st, err);
	if (rc == 0 && !(*flat = flat_of(&st)))
		rc = terr_set(err, ENOMEM, "out of memory");
	settings_clear(&st);
	return rc;
}

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

/* etcd's key of a setting (n >= 320). */
static void etcd_key(char *buf, size_t n, const char *key)
{
	snprintf(buf, n, "%s%s", ETCD_CONFIG_PREFIX, key);
}

/* What follows a change of key in m->settings, however it came. */
static void after_change(struct manager *m, const char *key)
{
	bool all = !strcmp(key, "*");
	if (!strcmp(key, "fgpu_per_device") || all)
		mgr_apply_fgpu_setting(m);
	if (!strcmp(key, "storage_hosts") || all)
		mgr_folders_hosts_apply(m);
	if (!strcmp(key, "registry_url") || all)
		mgr_registry_apply(m);
	if (!strncmp(key, "wsproxy_", 8) || all)
		mgr_apps_apply(m);
	if (m->local_agent) {
		static const char *const agent_keys[] = {"log_max_size", "log_max_files"};
		for (size_t i = 0; i < 2; i++)
			if (!strcmp(key, "*") || !strcmp(key, agent_keys[i])) {
				struct terr e = {0};
				agent_cluster_set(m->local_agent, agent_keys[i],
						  json_object_get(m->settings.agent, agent_keys[i]), &e);
			}
	}
	m->version++;
	mgr_wake_scheduler(m);
	pthread_cond_broadcast(&m->changed);
}

/* Writes key = value (checked) to etcd; null deletes it. Needs no lock:
 * callers make it without the manager lock where they can (an etcd that
 * does not answer must not hold up the scheduler for its timeout). Two
 * changes racing may be applied here in another order than etcd saw
 * them; the watch then applies them again in etcd's order, so every
 * manager ends with what etcd holds. */
static int persist_etcd(struct manager *m, const char *key, json_t *value, struct terr *err)
{
	char k[320];
	etcd_key(k, sizeof(k), key);
	if (json_is_null(value))
		return etcd_delete(m->cfg.etcd, k, false, NULL, err);
	char *text = json_dumps(value, JSONUTIL_DUMP_FLAGS | JSON_ENCODE_ANY);
	if (!text)
		return terr_set(err, ENOMEM, "out of memory");
	int rc = etcd_put(m->cfg.etcd, k, text, strlen(text), err);
	free(text);
	return rc;
}

/* Persists key = value (checked) where settings live: etcd or the store. */
static int persist(struct manager *m, const char *key, json_t *value, struct terr *err)
{
	if (m->cfg.etcd)
		return persist_etcd(m, key, value, err);
	/* Policies are kept together, as one object. */
	if (!strncmp(key, "policy.", 7))
		return store_setting(m, "policies", m->settings.policies, err);
	return store_setting(m, key, value, err);
}

int mgr_settings_set(struct manager *m, const char *key, json_t *value, struct terr *err)
{
	int rc = check_one(key, value, err);
	if (rc < 0 || (rc = check_state_one(m, key, value, err)) < 0)
		return rc;
	if (m->cfg.etcd && (rc = persist(m, key, value, err)) < 0)
		return rc;
	if ((rc = apply_to(&m->settings, key, value, err)) < 0)
		return rc;
	if (!m->cfg.etcd && (rc = persist(m, key, value, err)) < 0)
		return rc;
	log_info("manager", "setting %s changed", key);
	after_change(m, key);
	return 0;
}

static int load_etcd(struct manager *m, struct terr *err)
{
	struct etcd_kv *kvs;
	size_t n;
	int rc = etcd_range(m->cfg.etcd, ETCD_CONFIG_PREFIX, true, &kvs, &n, &m->etcd_rev, err);
	if (rc < 0)
		return terr_prefix(err, "reading the cluster settings");
	for (size_t i = 0; i < n; i++) {
		const char *key = kvs[i].key + strlen(ETCD_CONFIG_PREFIX);
		json_t *v = json_loadb(kvs[i].value, kvs[i].value_len, JSON_DECODE_ANY, NULL);
		struct terr e = {0};
		if (!v)
			log_warn("manager", "etcd key %s is not JSON: ignored", kvs[i].key);
		else if (apply_to(&m->settings, key, v, &e) < 0)
			log_warn("manager", "etcd key %s ignored: %s", kvs[i].key, e.msg);
		json_decref(v);
	}
	etcd_kvs_free(kvs, n);
	log_info("manager", "cluster settings read from etcd at %s (%zu keys under %s, revision %lld)",
		 m->cfg.etcd, n, ETCD_CONFIG_PREFIX, (long long)m->etcd_rev);
	return 0;
}

int mgr_settings_load(struct manager *m, struct terr *err)
{
	settings_defaults(&m->settings);
	if (m->cfg.etcd)
		return load_etcd(m, err);
	return load_store(m->so, m->store, &m->settings, err);
}

/* ---------- following etcd ---------- */

/* A change seen in etcd, made by this manager, another, or etcdctl. */
static void on_etcd_event(const struct etcd_event *ev, void *ud)
{
	struct manager *m = ud;
	pthread_mutex_lock(&m->mu);
	if (ev->type == ETCD_EVENT_RESET && !m->etcd_resync && (m->etcd_resync = calloc(1, sizeof(*m->etcd_resync)))) {
		/* What follows is everything there is: gathered from defaults
		 * aside, and swapped in at SYNCED, so that no scheduling pass
		 * sees the defaults meanwhile. */
		settings_defaults(m->etcd_resync);
		pthread_mutex_unlock(&m->mu);
		return;
	}
	if (ev->type == ETCD_EVENT_RESET || ev->type == ETCD_EVENT_SYNCED) {
		if (ev->type == ETCD_EVENT_SYNCED && m->etcd_resync) {
			settings_clear(&m->settings);
			m->settings = *m->etcd_resync;
			free(m->etcd_resync);
			m->etcd_resync = NULL;
			log_warn("manager", "etcd: the watch resumed past compacted revisions; settings read again "
				 "(revision %lld)", (long long)ev->revision);
			after_change(m, "*");
		}
		pthread_mutex_unlock(&m->mu);
		return;
	}
	struct msettings *st = m->etcd_resync ? m->etcd_resync : &m->settings;
	const char *key = ev->key + strlen(ETCD_CONFIG_PREFIX);
	json_t *v = ev->type == ETCD_EVENT_PUT ? json_loadb(ev->value, ev->value_len, JSON_DECODE_ANY, NULL) : NULL;
	struct terr e = {0};
	int rc;
	if (ev->type == ETCD_EVENT_DELETE && (!strncmp(key, "policy.", 7) || agent_cluster_key(key) ||
					      mgr_conf_key(key))) {
		rc = apply_to(st, key, json_null(), &e);
	} else if (ev->type == ETCD_EVENT_DELETE) {
		/* A deleted scalar setting is back to its default. */
		struct msettings d;
		settings_defaults(&d);
		json_t *flat = flat_of(&d);
		rc = apply_to(st, key, json_object_get(flat, key), &e);
		json_decref(flat);
		settings_clear(&d);
	} else {
		rc = v ? apply_to(st, key, v, &e) : terr_set(&e, EINVAL, "not JSON");
	}
	json_decref(v);
	if (rc < 0) {
		log_warn("manager", "etcd key %s (revision %lld) ignored: %s", ev->key, (long long)ev->revision, e.msg);
	} else if (!m->etcd_resync) {
		log_info("manager", "setting %s applied from etcd (revision %lld)", key, (long long)ev->revision);
		after_change(m, key);
	}
	pthread_mutex_unlock(&m->mu);
}

static void on_etcd_state(bool up, const char *why, void *ud)
{
	struct manager *m = ud;
	atomic_store(&m->etcd_down, !up);
	if (up)
		log_info("manager", "watching the cluster settings in etcd at %s", m->cfg.etcd);
	else
		log_warn("manager", "etcd at %s: %s; settings stay as they are, retrying every second", m->cfg.etcd, why);
}

static void *etcd_thread(void *arg)
{
	struct manager *m = arg;
	etcd_watch(m->cfg.etcd, ETCD_CONFIG_PREFIX, m->etcd_rev + 1, 1000, on_etcd_event, on_etcd_state, m,
		   &m->etcd_cancel);
	return NULL;
}

int mgr_settings_follow(struct manager *m, struct terr *err)
{
	if (!m->cfg.etcd)
		return 0;
	int rc = pthread_create(&m->etcd_thread, NULL, etcd_thread, m);
	if (rc)
		return terr_set(err, rc, "cannot start the etcd watch thread");
	m->etcd_started = true;
	return 0;
}

void mgr_settings_unfollow(struct manager *m)
{
	if (!m->etcd_started)
		return;
	atomic_store(&m->etcd_cancel, true);
	pthread_join(m->etcd_thread, NULL);
	m->etcd_started = false;
	if (m->etcd_resync) {   /* cancelled in the middle of a resync */
		settings_clear(m->etcd_resync);
		free(m->etcd_resync);
		m->etcd_resync = NULL;
	}
}

json_t *mgr_settings_json(struct manager *m)
{
	struct msettings *st = &m->settings;
	/* Copies: the answer is used outside the lock (see apply_to). */
	json_t *o = json_pack("{s:I,s:o,s:s,s:s,s:i,s:i,s:o}",
		"fgpu_per_device", (json_int_t)st->fgpu_per_device,
		"fgpu_quantum", jsonutil_milli(st->fgpu_quantum_m),
		"queue_policy", st->queue->name, "selector", st->selector->name,
		"fifo_skip_after", st->fifo_skip_after,
		"folder_trash_days", st->folder_trash_days, "policies", json_deep_copy(st->policies));
	if (o)
		fairshare_keys_set(o, st);
	json_t *lms = json_object_get(st->agent, "log_max_size"), *lmf = json_object_get(st->agent, "log_max_files");
	if (o) {
		json_object_set_new(o, "log_max_size", lms ? json_deep_copy(lms) : json_null());
		json_object_set_new(o, "log_max_files", lmf ? json_deep_copy(lmf) : json_null());
		/* The setting (null: unset) and, apart, the value in force. */
		json_t *eff = json_object();
		for (size_t i = 0; i < N_CONF_KEYS; i++) {
			json_t *v = json_object_get(st->conf, conf_keys[i]);
			const char *e = mgr_conf_value(m, conf_keys[i]);
			json_object_set_new(o, conf_keys[i], v ? json_deep_copy(v) : json_null());
			char def[sizeof(m->data_dir) + 16];
			json_object_set_new(eff, conf_keys[i],
					    json_string(e && *e ? e : conf_default(m, conf_keys[i], def, sizeof(def))));
		}
		json_object_set_new(o, "in_force", eff);
	}
	return o;
}

void mgr_settings_attach_local(struct manager *m, struct agent *a)
{
	pthread_mutex_lock(&m->mu);
	m->local_agent = a;
	after_change(m, "*");
	pthread_mutex_unlock(&m->mu);
}

json_t *mgr_settings_flat(struct manager *m)
{
	return flat_of(&m->settings);
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
	jsonutil_get_milli_stored(p, "max_cpu", "max_cpu", &max->cpu_m, NULL, NULL);
	jsonutil_get_size_stored(p, "max_mem", "max_mem", &max->mem, NULL, NULL);
	jsonutil_get_milli_stored(p, "max_fgpu", "max_fgpu", &max->fgpu_m, NULL, NULL);
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

bool mgr_user_policy_bool(struct manager *m, const char *email, const char *key, bool def)
{
	json_t *p = json_object_get(m->settings.policies, email);
	/* The user's own policy wins only where it sets the key. */
	if (!p || !json_object_get(p, key))
		p = json_object_get(m->settings.policies, "default");
	json_t *x = p ? json_object_get(p, key) : NULL;
	return json_is_boolean(x) ? json_is_true(x) : def;
}

const char *mgr_user_on_preempt(struct manager *m, const char *email)
{
	json_t *p = json_object_get(m->settings.policies, email);
	if (!p || !json_object_get(p, "on_preempt"))
		p = json_object_get(m->settings.policies, "default");
	const char *v = p ? json_string_value(json_object_get(p, "on_preempt")) : NULL;
	return v && !strcmp(v, "end") ? "end" : "requeue";
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
		jsonutil_get_size_stored(p, key, key, &v, NULL, NULL);
	return v;
}

void mgr_settings_free(struct manager *m)
{
	settings_clear(&m->settings);
}

json_t *mgr_config_get(struct manager *m)
{
	pthread_mutex_lock(&m->mu);
	json_t *o = mgr_settings_json(m);
	pthread_mutex_unlock(&m->mu);
	return o;
}

/* Applies a value already checked and written to etcd. */
static void apply_written(struct manager *m, const char *key, json_t *value)
{
	struct terr e = {0};
	if (apply_to(&m->settings, key, value, &e) < 0) {   /* checked: only out of memory */
		log_warn("manager", "setting %s: %s", key, e.msg);
		return;
	}
	log_info("manager", "setting %s changed", key);
	after_change(m, key);
}

int mgr_config_set(struct manager *m, const char *key, json_t *value, json_t **settings, struct terr *err)
{
	int rc;
	if (m->cfg.etcd) {
		if ((rc = check_one(key, value, err)) < 0)
			return rc;
		pthread_mutex_lock(&m->mu);
		rc = check_state_one(m, key, value, err);
		pthread_mutex_unlock(&m->mu);
		if (rc < 0 || (rc = persist_etcd(m, key, value, err)) < 0)
			return rc;
		pthread_mutex_lock(&m->mu);
		apply_written(m, key, value);
		if (settings)
			*settings = mgr_settings_json(m);
		pthread_mutex_unlock(&m->mu);
		return 0;
	}
	pthread_mutex_lock(&m->mu);
	rc = mgr_settings_set(m, key, value, err);
	if (rc == 0 && settings)
		*settings = mgr_settings_json(m);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

json_t *mgr_config_flat(struct manager *m)
{
	pthread_mutex_lock(&m->mu);
	json_t *o = mgr_settings_flat(m);
	pthread_mutex_unlock(&m->mu);
	return o;
}

int mgr_config_put(struct manager *m, json_t *flat, struct terr *err)
{
	/* Everything is checked before anything is written. */
	int rc = mgr_settings_check_flat(flat, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->mu);
	rc = check_state(m, flat, err);
	pthread_mutex_unlock(&m->mu);
	if (rc < 0)
		return rc;
	size_t n = json_object_size(flat), i = 0;
	const char **keys = calloc(n ? n : 1, sizeof(*keys)), **texts = calloc(n ? n : 1, sizeof(*texts));
	char **owned = calloc(n ? n : 1, sizeof(*owned));
	const char *k;
	json_t *v;
	if (!keys || !texts || !owned) {
		rc = terr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	if (m->cfg.etcd) {
		/* One transaction: all of them or none; without the lock, as
		 * persist_etcd. */
		json_object_foreach(flat, k, v) {
			char ek[320];
			etcd_key(ek, sizeof(ek), k);
			owned[i] = strdup(ek);
			char *text = json_is_null(v) ? NULL : json_dumps(v, JSONUTIL_DUMP_FLAGS | JSON_ENCODE_ANY);
			if (!owned[i] || (!json_is_null(v) && !text)) {
				free(text);
				rc = terr_set(err, ENOMEM, "out of memory");
				break;
			}
			keys[i] = owned[i];
			texts[i] = text;
			i++;
		}
		if (rc == 0)
			rc = etcd_txn(m->cfg.etcd, NULL, keys, texts, i, err);
		for (size_t j = 0; j < i; j++)
			free((char *)texts[j]);
	}
	pthread_mutex_lock(&m->mu);
	if (rc == 0) {
		bool policies = false;
		json_object_foreach(flat, k, v) {
			apply_to(&m->settings, k, v, err);   /* checked above */
			if (m->cfg.etcd)
				continue;
			if (!strncmp(k, "policy.", 7))
				policies = true;
			else if ((rc = store_setting(m, k, v, err)) < 0)
				break;
		}
		if (rc == 0 && policies && !m->cfg.etcd)
			rc = store_setting(m, "policies", m->settings.policies, err);
		log_info("manager", "%zu settings changed at once", n);
		after_change(m, "*");
	}
	pthread_mutex_unlock(&m->mu);
out:
	for (size_t j = 0; owned && j < n; j++)
		free(owned[j]);
	free(owned);
	free(keys);
	free(texts);
	return rc;
}
