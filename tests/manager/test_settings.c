/* manager/settings.c: cluster settings on a real manager (manager_open on
 * a temporary data dir, no agent, not serving): validation of every key
 * with messages naming it, policies, persistence across a reopen, and
 * mgr_user_policy's fallback to policy.default; manager.conf's keys that
 * are settings too (storage_hosts, registry_url, wsproxy_*): their checks,
 * manager.conf's value while unset, and a storage host that holds folders
 * kept; the announcement's checks. */
#include "manager/core.h"
#include "manager/state.h"
#include "manager/manager.h"
#include "testlib.h"

#include <jansson.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GiB (1LL << 30)

static char data_dir[] = "/tmp/tessera-settings-XXXXXX";

static struct manager *open_manager(void)
{
	struct manager_config cfg = {.data_dir = data_dir, .listen = "127.0.0.1:0",
				     .dispatch_workers = 1};
	struct manager *m = NULL;
	struct terr err = {0};
	int rc = manager_open(&m, &cfg, &err);
	if (rc < 0)
		FAILF("manager_open(%s): %s", data_dir, err.msg);
	return m;
}

/* mgr_settings_set under the lock; takes the reference to v. */
static int set(struct manager *m, const char *key, json_t *v, struct terr *err)
{
	memset(err, 0, sizeof(*err));
	pthread_mutex_lock(&m->mu);
	int rc = mgr_settings_set(m, key, v, err);
	pthread_mutex_unlock(&m->mu);
	json_decref(v);
	return rc;
}

static json_t *settings(struct manager *m)
{
	pthread_mutex_lock(&m->mu);
	json_t *s = mgr_settings_json(m);
	pthread_mutex_unlock(&m->mu);
	return s;
}

/* Expects key=value (JSON text) to be refused with a message naming `names`. */
static void refused(struct manager *m, const char *key, const char *text, const char *names, int line)
{
	json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
	if (!v) {
		FAILF("line %d: bad JSON in the test: %s", line, text);
		return;
	}
	json_t *before = settings(m);
	struct terr err;
	int rc = set(m, key, v, &err);
	testlib_checks++;
	if (rc >= 0 || err.code == 0 || !strstr(err.msg, names))
		FAILF("line %d: %s = %s gave %d '%s', expected a refusal naming '%s'", line, key, text,
		      rc, err.msg, names);
	/* a refused value changes nothing */
	json_t *after = settings(m);
	testlib_checks++;
	if (!json_equal(before, after)) {
		char *a = json_dumps(before, JSON_COMPACT), *b = json_dumps(after, JSON_COMPACT);
		FAILF("line %d: refused %s = %s changed the settings from %s to %s", line, key, text, a, b);
		free(a);
		free(b);
	}
	json_decref(before);
	json_decref(after);
}
#define REFUSED(m, key, text, names) refused((m), (key), (text), (names), __LINE__)

static void accepted(struct manager *m, const char *key, const char *text, int line)
{
	json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
	struct terr err;
	int rc = v ? set(m, key, v, &err) : -1;
	testlib_checks++;
	if (rc < 0)
		FAILF("line %d: %s = %s refused: %s", line, key, text, err.msg);
}
#define ACCEPTED(m, key, text) accepted((m), (key), (text), __LINE__)

static int64_t get_int(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

static const char *get_str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* ---------- tests ---------- */

static struct manager *mgr;

TEST(defaults)
{
	json_t *s = settings(mgr);
	CHECK(s != NULL);
	CHECK_INT(get_int(s, "fgpu_per_device"), 1);
	CHECK(json_number_value(json_object_get(s, "fgpu_quantum")) == 0.01);
	CHECK_STR(get_str(s, "queue_policy"), "fifo");
	CHECK_STR(get_str(s, "selector"), "concentrated");
	CHECK_INT(get_int(s, "fifo_skip_after"), 0);
	CHECK(json_is_object(json_object_get(s, "policies")));
	CHECK_INT(json_object_size(json_object_get(s, "policies")), 0);
	json_decref(s);
	CHECK_INT(mgr_per_device_m(mgr), 1000);
}

TEST(fgpu_per_device)
{
	REFUSED(mgr, "fgpu_per_device", "0", "fgpu_per_device");
	REFUSED(mgr, "fgpu_per_device", "101", "fgpu_per_device");
	REFUSED(mgr, "fgpu_per_device", "-2", "fgpu_per_device");
	REFUSED(mgr, "fgpu_per_device", "\"x\"", "fgpu_per_device");
	REFUSED(mgr, "fgpu_per_device", "\"2\"", "fgpu_per_device");
	REFUSED(mgr, "fgpu_per_device", "1.5", "fgpu_per_device");
	REFUSED(mgr, "fgpu_per_device", "null", "fgpu_per_device");
	ACCEPTED(mgr, "fgpu_per_device", "2");
	json_t *s = settings(mgr);
	CHECK_INT(get_int(s, "fgpu_per_device"), 2);
	json_decref(s);
	pthread_mutex_lock(&mgr->mu);
	CHECK_INT(mgr_per_device_m(mgr), 2000);
	pthread_mutex_unlock(&mgr->mu);
	/* the bounds themselves */
	ACCEPTED(mgr, "fgpu_per_device", "100");
	ACCEPTED(mgr, "fgpu_per_device", "1");
	ACCEPTED(mgr, "fgpu_per_device", "2");
	/* still 2 after a refusal */
	REFUSED(mgr, "fgpu_per_device", "0", "fgpu_per_device");
	s = settings(mgr);
	CHECK_INT(get_int(s, "fgpu_per_device"), 2);
	json_decref(s);
}

TEST(fgpu_quantum)
{
	REFUSED(mgr, "fgpu_quantum", "0.03", "fgpu_quantum");     /* does not divide 1 */
	REFUSED(mgr, "fgpu_quantum", "0", "fgpu_quantum");
	REFUSED(mgr, "fgpu_quantum", "1.5", "fgpu_quantum");
	REFUSED(mgr, "fgpu_quantum", "2", "fgpu_quantum");
	REFUSED(mgr, "fgpu_quantum", "0.0001", "fgpu_quantum");
	REFUSED(mgr, "fgpu_quantum", "-0.05", "fgpu_quantum");
	REFUSED(mgr, "fgpu_quantum", "\"abc\"", "fgpu_quantum");
	REFUSED(mgr, "fgpu_quantum", "[0.05]", "fgpu_quantum");
	/* null is not a quantum either (jsonutil_get_milli leaves the
	 * output untouched for null: it must not be read then) */
	REFUSED(mgr, "fgpu_quantum", "null", "fgpu_quantum");
	ACCEPTED(mgr, "fgpu_quantum", "0.05");
	json_t *s = settings(mgr);
	CHECK(json_number_value(json_object_get(s, "fgpu_quantum")) == 0.05);
	json_decref(s);
	pthread_mutex_lock(&mgr->mu);
	CHECK_INT(mgr->settings.fgpu_quantum_m, 50);
	pthread_mutex_unlock(&mgr->mu);
	ACCEPTED(mgr, "fgpu_quantum", "1");
	ACCEPTED(mgr, "fgpu_quantum", "0.001");
	ACCEPTED(mgr, "fgpu_quantum", "\"0.25\"");
	ACCEPTED(mgr, "fgpu_quantum", "0.05");
}

TEST(queue_policy_and_selector)
{
	REFUSED(mgr, "queue_policy", "\"bogus\"", "queue_policy");
	REFUSED(mgr, "queue_policy", "\"FIFO\"", "queue_policy");
	REFUSED(mgr, "queue_policy", "1", "queue_policy");
	REFUSED(mgr, "queue_policy", "null", "queue_policy");
	ACCEPTED(mgr, "queue_policy", "\"lifo\"");
	ACCEPTED(mgr, "queue_policy", "\"drf\"");
	REFUSED(mgr, "selector", "\"bogus\"", "selector");
	REFUSED(mgr, "selector", "\"fifo\"", "selector");
	REFUSED(mgr, "selector", "{}", "selector");
	ACCEPTED(mgr, "selector", "\"dispersed\"");
	json_t *s = settings(mgr);
	CHECK_STR(get_str(s, "queue_policy"), "drf");
	CHECK_STR(get_str(s, "selector"), "dispersed");
	json_decref(s);
	pthread_mutex_lock(&mgr->mu);
	CHECK(mgr->settings.queue == &sched_drf);
	CHECK(mgr->settings.selector == &sched_dispersed);
	pthread_mutex_unlock(&mgr->mu);
}

TEST(fifo_skip_after)
{
	REFUSED(mgr, "fifo_skip_after", "-1", "fifo_skip_after");
	REFUSED(mgr, "fifo_skip_after", "1000001", "fifo_skip_after");
	REFUSED(mgr, "fifo_skip_after", "\"3\"", "fifo_skip_after");
	REFUSED(mgr, "fifo_skip_after", "2.5", "fifo_skip_after");
	ACCEPTED(mgr, "fifo_skip_after", "0");
	ACCEPTED(mgr, "fifo_skip_after", "1000000");
	ACCEPTED(mgr, "fifo_skip_after", "3");
	json_t *s = settings(mgr);
	CHECK_INT(get_int(s, "fifo_skip_after"), 3);
	json_decref(s);
}

/* The banner's line (docs/admin.md, "Announcements"): one line, at most
 * MGR_ANNOUNCEMENT_MAX bytes; kept across a reopen; "" and null clear it. */
TEST(announcement)
{
	json_t *s = settings(mgr);
	CHECK_STR(get_str(s, "announcement"), "");
	json_decref(s);
	REFUSED(mgr, "announcement", "42", "announcement must be a string");
	REFUSED(mgr, "announcement", "\"two\\nlines\"", "one line");
	REFUSED(mgr, "announcement", "\"a tab\\there\"", "one line");
	REFUSED(mgr, "announcement", "\"esc \\u001b[31m\"", "one line");
	char text[MGR_ANNOUNCEMENT_MAX + 8];
	memset(text, 'x', sizeof(text));
	text[MGR_ANNOUNCEMENT_MAX + 1] = '\0';
	struct terr err;
	CHECK(set(mgr, "announcement", json_stringn("nul \0 cut", 9), &err) < 0);
	CHECK(set(mgr, "announcement", json_string(text), &err) < 0);
	CHECK_CONTAINS(err.msg, "at most 500");
	text[MGR_ANNOUNCEMENT_MAX] = '\0';
	CHECK_INT(set(mgr, "announcement", json_string(text), &err), 0);
	ACCEPTED(mgr, "announcement", "\"Maintenance on Friday 18:00-20:00 \\u00e9t\\u00e9\"");
	manager_close(mgr);
	mgr = open_manager();
	if (!mgr)
		return;
	s = settings(mgr);
	CHECK_STR(get_str(s, "announcement"), "Maintenance on Friday 18:00-20:00 \u00e9t\u00e9");
	json_decref(s);
	ACCEPTED(mgr, "announcement", "null");
	s = settings(mgr);
	CHECK_STR(get_str(s, "announcement"), "");
	json_decref(s);
}

TEST(unknown_keys)
{
	REFUSED(mgr, "bogus", "1", "bogus");
	REFUSED(mgr, "policy.", "{}", "policy.");
	REFUSED(mgr, "policies", "{}", "policies");
	REFUSED(mgr, "", "1", "unknown setting");
	struct terr err;
	CHECK(set(mgr, "bogus", json_integer(1), &err) < 0);
	CHECK_INT(err.code, ENOENT);
}

TEST(policies)
{
	REFUSED(mgr, "policy.default", "{\"max_bogus\": 1}", "policy.default");
	REFUSED(mgr, "policy.default", "{\"max_bogus\": 1}", "max_bogus");
	REFUSED(mgr, "policy.default", "{\"max_sessions\": 1, \"max_gpu\": 1}", "max_gpu");
	REFUSED(mgr, "policy.default", "\"x\"", "policy.default");
	REFUSED(mgr, "policy.default", "[1]", "policy.default");
	REFUSED(mgr, "policy.default", "{\"max_sessions\": -1}", "max_sessions");
	REFUSED(mgr, "policy.default", "{\"max_sessions\": \"two\"}", "max_sessions");
	REFUSED(mgr, "policy.default", "{\"max_cpu\": \"abc\"}", "max_cpu");
	REFUSED(mgr, "policy.default", "{\"max_cpu\": -1}", "max_cpu");
	REFUSED(mgr, "policy.default", "{\"max_fgpu\": 0.0001}", "max_fgpu");
	REFUSED(mgr, "policy.default", "{\"max_mem\": \"lots\"}", "max_mem");
	REFUSED(mgr, "policy.default", "{\"max_mem\": \"  8g\"}", "spaces");   /* the amount alone */
	REFUSED(mgr, "policy.default", "{\"max_cpu\": \"4 \"}", "max_cpu");
	REFUSED(mgr, "policy.a@b", "{\"max_mem\": -5}", "max_mem");
	REFUSED(mgr, "policy.a@b", "{\"nope\": 1}", "policy.a@b");
	REFUSED(mgr, "policy.a@b", "{\"allow_root\": 1}", "allow_root must be true or false");
	REFUSED(mgr, "policy.a@b", "{\"allow_root\": \"yes\"}", "allow_root must be true or false");

	ACCEPTED(mgr, "policy.default", "{\"max_sessions\": 2, \"max_cpu\": 4, \"max_mem\": \"8g\", \"max_fgpu\": 1.5}");
	ACCEPTED(mgr, "policy.x@y", "{\"max_sessions\": 1}");
	ACCEPTED(mgr, "policy.empty@y", "{}");
	/* a null limit is no limit, as mgr_user_policy reads it. (parse_policy
	 * compares an uninitialized `dummy` here, as jsonutil_get_int leaves it
	 * untouched for null; valgrind shows it.) */
	ACCEPTED(mgr, "policy.nulls@y", "{\"max_sessions\": null, \"max_cpu\": null}");
	ACCEPTED(mgr, "policy.nulls@y", "null");
	json_t *s = settings(mgr);
	json_t *pol = json_object_get(s, "policies");
	CHECK(json_object_get(pol, "default") != NULL);
	CHECK_INT(get_int(json_object_get(pol, "x@y"), "max_sessions"), 1);
	CHECK(json_object_get(pol, "empty@y") != NULL);
	json_decref(s);

	/* null removes one user's policy, and removing an absent one is fine */
	ACCEPTED(mgr, "policy.x@y", "null");
	ACCEPTED(mgr, "policy.empty@y", "null");
	ACCEPTED(mgr, "policy.never@y", "null");
	s = settings(mgr);
	pol = json_object_get(s, "policies");
	CHECK(json_object_get(pol, "x@y") == NULL);
	CHECK(json_object_get(pol, "empty@y") == NULL);
	CHECK(json_object_get(pol, "default") != NULL);
	CHECK_INT(json_object_size(pol), 1);
	json_decref(s);

	/* The key names a user by email, or is "default": one that names no
	 * possible user is refused, not stored as a policy that never
	 * applies (policy.%ff once answered 200 and dropped it). */
	REFUSED(mgr, "policy.\xff", "{\"max_sessions\": 1}", "neither 'default' nor a valid email");
	REFUSED(mgr, "policy.a@\xff\xfe", "{\"max_sessions\": 1}", "valid UTF-8");
	REFUSED(mgr, "policy.nobody", "{\"max_sessions\": 1}", "neither 'default' nor a valid email");
	REFUSED(mgr, "policy.a@b@c", "{\"max_sessions\": 1}", "policy.<email>");
	REFUSED(mgr, "policy.a b@c", "null", "policy.<email>");
	/* Emails are kept lower-cased, as users' are, so the policy applies. */
	ACCEPTED(mgr, "policy.Mixed@Case.Org", "{\"max_sessions\": 3}");
	s = settings(mgr);
	pol = json_object_get(s, "policies");
	CHECK_INT(get_int(json_object_get(pol, "mixed@case.org"), "max_sessions"), 3);
	CHECK(json_object_get(pol, "Mixed@Case.Org") == NULL);
	json_decref(s);
	ACCEPTED(mgr, "policy.MIXED@case.org", "null");

	/* a user of their own for the reopen test */
	ACCEPTED(mgr, "policy.own@y", "{\"max_fgpu\": 0.5}");
}

TEST(user_policy_fallback)
{
	int64_t max_sessions = -1;
	struct res max;
	pthread_mutex_lock(&mgr->mu);
	/* no policy of their own: policy.default */
	mgr_user_policy(mgr, "alice@example.com", &max_sessions, &max);
	CHECK_INT(max_sessions, 2);
	CHECK_INT(max.cpu_m, 4000);
	CHECK_INT(max.mem, 8 * GiB);
	CHECK_INT(max.fgpu_m, 1500);
	/* their own replaces the default as a whole */
	mgr_user_policy(mgr, "own@y", &max_sessions, &max);
	CHECK_INT(max_sessions, 0);
	CHECK_INT(max.cpu_m, 0);
	CHECK_INT(max.mem, 0);
	CHECK_INT(max.fgpu_m, 500);
	/* A policy an earlier version stored with spaces around an amount
	 * still limits: read as it was written, never as no limit. */
	json_object_set_new(mgr->settings.policies, "old@y",
			    json_pack("{s:s,s:s,s:s}", "max_mem", " 1g", "max_cpu", "2 ", "max_fgpu", " 0.5"));
	mgr_user_policy(mgr, "old@y", &max_sessions, &max);
	CHECK_INT(max.mem, 1 * GiB);
	CHECK_INT(max.cpu_m, 2000);
	CHECK_INT(max.fgpu_m, 500);
	json_object_del(mgr->settings.policies, "old@y");
	/* root: false unless a policy says so, the user's own first */
	CHECK(!mgr_user_allow_root(mgr, "alice@example.com"));
	CHECK(!mgr_user_allow_root(mgr, "own@y"));
	pthread_mutex_unlock(&mgr->mu);
	struct terr err = {0};
	json_t *v = json_pack("{s:b}", "allow_root", 1);
	CHECK_INT(mgr_config_set(mgr, "policy.root@y", v, NULL, &err), 0);
	json_decref(v);
	pthread_mutex_lock(&mgr->mu);
	CHECK(mgr_user_allow_root(mgr, "root@y"));
	CHECK(!mgr_user_allow_root(mgr, "alice@example.com"));
	pthread_mutex_unlock(&mgr->mu);
}

TEST(persistence)
{
	json_t *before = settings(mgr);
	manager_close(mgr);
	mgr = open_manager();
	CHECK(mgr != NULL);
	if (!mgr) {
		json_decref(before);
		return;
	}
	json_t *after = settings(mgr);
	CHECK(json_equal(before, after));
	CHECK_INT(get_int(after, "fgpu_per_device"), 2);
	CHECK(json_number_value(json_object_get(after, "fgpu_quantum")) == 0.05);
	CHECK_STR(get_str(after, "queue_policy"), "drf");
	CHECK_STR(get_str(after, "selector"), "dispersed");
	CHECK_INT(get_int(after, "fifo_skip_after"), 3);
	json_t *pol = json_object_get(after, "policies");
	CHECK(json_object_get(pol, "default") != NULL);
	CHECK(json_object_get(pol, "own@y") != NULL);
	CHECK(json_object_get(pol, "x@y") == NULL);
	json_decref(before);
	json_decref(after);

	int64_t max_sessions;
	struct res max;
	pthread_mutex_lock(&mgr->mu);
	CHECK_INT(mgr_per_device_m(mgr), 2000);
	CHECK(mgr->settings.queue == &sched_drf);
	CHECK_INT(mgr->settings.fgpu_quantum_m, 50);
	mgr_user_policy(mgr, "bob@example.com", &max_sessions, &max);
	CHECK_INT(max_sessions, 2);
	CHECK_INT(max.mem, 8 * GiB);
	pthread_mutex_unlock(&mgr->mu);

	/* removing the default: no limits for anyone without their own */
	ACCEPTED(mgr, "policy.default", "null");
	manager_close(mgr);
	mgr = open_manager();
	if (!mgr)
		return;
	pthread_mutex_lock(&mgr->mu);
	mgr_user_policy(mgr, "bob@example.com", &max_sessions, &max);
	CHECK_INT(max_sessions, 0);
	CHECK_INT(max.cpu_m + max.mem + max.fgpu_m, 0);
	mgr_user_policy(mgr, "own@y", &max_sessions, &max);
	CHECK_INT(max.fgpu_m, 500);
	pthread_mutex_unlock(&mgr->mu);
}

static void remove_tree(const char *dir)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}


/* ---------- manager.conf's keys as settings ---------- */

static const char *in_force(json_t *s, const char *key)
{
	return json_string_value(json_object_get(json_object_get(s, "in_force"), key));
}

TEST(conf_keys_checked)
{
	/* each refused as manager.conf refuses it, naming the key */
	REFUSED(mgr, "storage_hosts", "5", "storage_hosts");
	REFUSED(mgr, "storage_hosts", "\"\"", "storage_hosts");
	REFUSED(mgr, "storage_hosts", "\"nopath\"", "storage_hosts");
	REFUSED(mgr, "storage_hosts", "\"a:relative/dir\"", "storage_hosts");
	REFUSED(mgr, "storage_hosts", "\"a:/srv/x,a:/srv/y\"", "declared twice");
	REFUSED(mgr, "storage_hosts", "\"r:/\"", "root directory");
	REFUSED(mgr, "storage_hosts", "\"a:/srv/../etc\"", "'..'");
	REFUSED(mgr, "registry_url", "7", "registry_url");
	REFUSED(mgr, "registry_url", "\"http://bad host:5000\"", "registry_url");
	REFUSED(mgr, "wsproxy_url", "\"ftp://apps.example\"", "wsproxy_url");
	REFUSED(mgr, "wsproxy_url", "\"\"", "wsproxy_url");
	REFUSED(mgr, "wsproxy_url", "true", "wsproxy_url");
	REFUSED(mgr, "wsproxy_port_range", "\"10300-10205\"", "wsproxy_port_range");
	REFUSED(mgr, "wsproxy_port_range", "\"abc\"", "wsproxy_port_range");
	REFUSED(mgr, "wsproxy_port_range", "\"0-10\"", "wsproxy_port_range");
	REFUSED(mgr, "wsproxy_domain", "\"bad_domain!\"", "wsproxy_domain");
	/* a port on wsproxy_url only in host mode, as manager.conf */
	REFUSED(mgr, "wsproxy_url", "\"http://apps.example:8080\"", "must have no port");

	ACCEPTED(mgr, "registry_url", "\"http://127.0.0.1:5999\"");
	char host[256], base[300];
	mgr_registry_get(mgr, host, sizeof(host), base, sizeof(base));
	CHECK_STR(host, "127.0.0.1:5999");
	CHECK_STR(base, "http://127.0.0.1:5999");
	ACCEPTED(mgr, "registry_url", "\"\"");   /* none, whatever manager.conf says */
	mgr_registry_get(mgr, host, sizeof(host), base, sizeof(base));
	CHECK_STR(host, "");
	ACCEPTED(mgr, "registry_url", "null");

	ACCEPTED(mgr, "wsproxy_url", "\"https://apps.example\"");
	ACCEPTED(mgr, "wsproxy_port_range", "\"20000-20010\"");
	pthread_mutex_lock(&mgr->mu);
	CHECK_STR(mgr->apps_scheme, "https");
	CHECK_STR(mgr->apps_host, "apps.example");
	CHECK_INT(mgr->apps.lo, 20000);
	CHECK_INT(mgr->apps.hi, 20010);
	pthread_mutex_unlock(&mgr->mu);
	/* host mode: a port on the URL is fine */
	ACCEPTED(mgr, "wsproxy_domain", "\"example.org\"");
	ACCEPTED(mgr, "wsproxy_url", "\"http://apps.example:8080\"");
	ACCEPTED(mgr, "wsproxy_url", "null");
	ACCEPTED(mgr, "wsproxy_domain", "null");

	/* a proxy that said it serves 10205-10300 in port mode: a range
	 * outside it, or a domain, is refused */
	mgr_apps_proxy_serves(mgr, 10205, 10300, NULL);
	REFUSED(mgr, "wsproxy_port_range", "\"20000-20010\"", "10205-10300");
	REFUSED(mgr, "wsproxy_domain", "\"example.org\"", "port mode");
	ACCEPTED(mgr, "wsproxy_port_range", "\"10210-10220\"");
	ACCEPTED(mgr, "wsproxy_port_range", "null");
	pthread_mutex_lock(&mgr->mu);
	CHECK_INT(mgr->apps.lo, 10205);
	CHECK_INT(mgr->apps.hi, 10300);
	mgr->proxy_known = false;
	pthread_mutex_unlock(&mgr->mu);

	/* in the flat form (backups), null while unset */
	json_t *flat = mgr_config_flat(mgr);
	CHECK(json_is_null(json_object_get(flat, "storage_hosts")));
	CHECK(json_is_null(json_object_get(flat, "registry_url")));
	CHECK(json_is_null(json_object_get(flat, "wsproxy_domain")));
	json_decref(flat);
}

/* A manager.conf with the keys: its values while the settings are unset,
 * the settings' once set (kept across a restart), its own again at null. */
TEST(conf_keys_precedence)
{
	char dir[] = "/tmp/tessera-settings-conf-XXXXXX";
	if (!mkdtemp(dir)) {
		FAILF("mkdtemp: %s", strerror(errno));
		return;
	}
	char hosts[200];
	snprintf(hosts, sizeof(hosts), "conf:%s/conf", dir);
	struct manager_config cfg = {.data_dir = dir, .listen = "127.0.0.1:0", .dispatch_workers = 1,
				     .registry_url = "http://127.0.0.1:5000", .storage_hosts = hosts,
				     .wsproxy_url = "http://apps.conf"};
	struct manager *m = NULL;
	struct terr err = {0};
	CHECK_INT(manager_open(&m, &cfg, &err), 0);
	if (!m)
		return;
	json_t *s = settings(m);
	CHECK(json_is_null(json_object_get(s, "registry_url")));
	CHECK_STR(in_force(s, "registry_url"), "http://127.0.0.1:5000");
	CHECK_STR(in_force(s, "storage_hosts"), hosts);
	json_decref(s);
	ACCEPTED(m, "registry_url", "\"http://127.0.0.1:6000\"");
	ACCEPTED(m, "wsproxy_url", "\"http://apps.set\"");
	manager_close(m);
	m = NULL;
	CHECK_INT(manager_open(&m, &cfg, &err), 0);
	if (!m)
		return;
	char host[256];
	mgr_registry_get(m, host, sizeof(host), NULL, 0);
	CHECK_STR(host, "127.0.0.1:6000");   /* the setting wins over manager.conf */
	pthread_mutex_lock(&m->mu);
	CHECK_STR(m->apps_host, "apps.set");
	pthread_mutex_unlock(&m->mu);
	ACCEPTED(m, "registry_url", "null");
	mgr_registry_get(m, host, sizeof(host), NULL, 0);
	CHECK_STR(host, "127.0.0.1:5000");   /* manager.conf's again */
	s = settings(m);
	CHECK_STR(in_force(s, "registry_url"), "http://127.0.0.1:5000");
	json_decref(s);
	manager_close(m);
	remove_tree(dir);
}

TEST(storage_hosts_at_run_time)
{
	struct user_rec admin;
	CHECK_INT(mgr_admin_user(mgr, &admin), 0);
	char spec[1000], def[300], newdir[300];
	snprintf(def, sizeof(def), "local:%s/folders", data_dir);
	snprintf(newdir, sizeof(newdir), "%s/new", data_dir);
	snprintf(spec, sizeof(spec), "\"%s,new:%s\"", def, newdir);
	struct terr err = {0};
	json_t *out = NULL;
	/* no host "new" yet */
	CHECK_INT(mgr_folder_create(mgr, &admin, "f1", "new", 0, &out, &err), -ENOENT);
	ACCEPTED(mgr, "storage_hosts", spec);
	struct stat st;
	CHECK(stat(newdir, &st) == 0 && S_ISDIR(st.st_mode));   /* made at once */
	memset(&err, 0, sizeof(err));
	CHECK_INT(mgr_folder_create(mgr, &admin, "f1", "new", 0, &out, &err), 0);
	CHECK_STR(json_string_value(json_object_get(out, "host")), "new");
	json_decref(out);
	/* dropping or moving it is refused, naming the folder */
	char only[320];
	snprintf(only, sizeof(only), "\"%s\"", def);
	REFUSED(mgr, "storage_hosts", only, "f1");
	snprintf(spec, sizeof(spec), "\"%s,new:%s/elsewhere\"", def, data_dir);
	REFUSED(mgr, "storage_hosts", spec, "storage host new holds 1 folder");
	REFUSED(mgr, "storage_hosts", "null", "f1");   /* manager.conf's: local alone */
	/* in the trash it still holds it */
	memset(&err, 0, sizeof(err));
	CHECK_INT(mgr_folder_delete(mgr, &admin, "f1", false, &err), 0);
	REFUSED(mgr, "storage_hosts", only, "in the trash");
	/* the default host may change order: the first is the default */
	snprintf(spec, sizeof(spec), "\"new:%s,%s\"", newdir, def);
	ACCEPTED(mgr, "storage_hosts", spec);
	memset(&err, 0, sizeof(err));
	CHECK_INT(mgr_folder_create(mgr, &admin, "f2", NULL, 0, &out, &err), 0);
	CHECK_STR(json_string_value(json_object_get(out, "host")), "new");
	json_decref(out);
}

int main(void)
{
	if (!mkdtemp(data_dir)) {
		perror("mkdtemp");
		return 1;
	}
	mgr = open_manager();
	if (!mgr)
		return testlib_done();
	RUN(defaults);
	RUN(fgpu_per_device);
	RUN(fgpu_quantum);
	RUN(queue_policy_and_selector);
	RUN(fifo_skip_after);
	RUN(unknown_keys);
	RUN(announcement);
	RUN(policies);
	RUN(user_policy_fallback);
	RUN(persistence);
	RUN(conf_keys_checked);
	RUN(conf_keys_precedence);
	RUN(storage_hosts_at_run_time);
	manager_close(mgr);
	remove_tree(data_dir);
	return testlib_done();
}
