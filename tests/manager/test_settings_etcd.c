/* Cluster settings as whole files and in etcd: mgr_settings_check_flat
 * (what put-json and admin restore accept), mgr_config_put on the store
 * (all or nothing; the flat form round-trips), and two managers sharing a
 * real etcd started here: a change made through one is applied by the
 * other through its watch, also after etcd stopped and started again. */
#include "common/etcd.h"
#include "common/httpc.h"
#include "manager/manager.h"
#include "manager/state.h"
#include "testetcd.h"
#include "testlib.h"

#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

static struct testetcd etcd;

static struct manager *open_manager(const char *dir, const char *etcd_url)
{
	struct manager_config cfg = {.data_dir = dir, .listen = "127.0.0.1:0", .dispatch_workers = 1,
				     .etcd = etcd_url};
	struct manager *m = NULL;
	struct terr err = {0};
	if (manager_open(&m, &cfg, &err) < 0)
		FAILF("manager_open(%s): %s", dir, err.msg);
	return m;
}

static json_t *parse(const char *text)
{
	json_t *v = json_loads(text, 0, NULL);
	if (!v)
		FAILF("bad JSON in the test: %s", text);
	return v;
}

/* check_flat refuses text, naming want. */
static void refused(const char *text, const char *want)
{
	json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
	struct terr err = {0};
	testlib_checks++;
	if (mgr_settings_check_flat(v, &err) == 0)
		FAILF("accepted %s", text);
	else if (!strstr(err.msg, want) || strchr(err.msg, '\n'))
		FAILF("%s: message '%s' does not name '%s' on one line", text, err.msg, want);
	json_decref(v);
}

TEST(check_flat)
{
	struct terr err = {0};
	json_t *good = parse("{\"fgpu_per_device\": 2, \"fgpu_quantum\": 0.05, \"queue_policy\": \"drf\","
			     " \"selector\": \"dispersed\", \"fifo_skip_after\": 3, \"folder_trash_days\": 1,"
			     " \"log_max_size\": \"10MiB\", \"log_max_files\": null,"
			     " \"policy.default\": {\"max_sessions\": 2}, \"policy.bob@example.com\": null}");
	CHECK_INT(mgr_settings_check_flat(good, &err), 0);
	json_decref(good);
	json_t *empty = json_object();
	CHECK_INT(mgr_settings_check_flat(empty, &err), 0);
	json_decref(empty);
	refused("[1, 2]", "JSON object");
	refused("\"fifo\"", "JSON object");
	refused("{\"fgpu_per_device\": 0}", "fgpu_per_device");
	refused("{\"queue_policy\": \"fifo\", \"nope\": 1}", "unknown setting 'nope'");
	refused("{\"policy.default\": {\"max_sessions\": -1}}", "max_sessions");
	refused("{\"policy.default\": {\"bogus\": 1}}", "unknown limit 'bogus'");
	refused("{\"policy.not-an-email\": {}}", "policy.not-an-email");
	refused("{\"log_max_files\": 1}", "log_max_files");
	refused("{\"log_max_size\": \"lots\"}", "log_max_size");
	refused("{\"fgpu_quantum\": 0.3}", "fgpu_quantum");
	refused("{\"fgpu_per_device\": null}", "fgpu_per_device");
}

static char *dump(json_t *v)
{
	return json_dumps(v, JSON_SORT_KEYS | JSON_COMPACT);
}

TEST(put_on_the_store_is_all_or_nothing_and_round_trips)
{
	char dir[] = "/tmp/tessera-setflat-XXXXXX";
	if (!mkdtemp(dir)) {
		FAILF("mkdtemp");
		return;
	}
	struct manager *m = open_manager(dir, NULL);
	if (!m)
		return;
	struct terr err = {0};
	json_t *before = mgr_config_flat(m);
	json_t *bad = parse("{\"queue_policy\": \"drf\", \"policy.default\": {\"max_sessions\": 1},"
			    " \"fgpu_per_device\": 500}");
	CHECK(mgr_config_put(m, bad, &err) < 0);
	CHECK_CONTAINS(err.msg, "fgpu_per_device");
	json_decref(bad);
	json_t *after = mgr_config_flat(m);
	char *b = dump(before), *a = dump(after);
	CHECK_STR(a, b);   /* nothing changed, not even the valid keys */
	free(b);
	free(a);
	json_decref(after);
	json_decref(before);

	json_t *file = parse("{\"queue_policy\": \"lifo\", \"fgpu_per_device\": 4, \"log_max_files\": 7,"
			     " \"policy.default\": {\"max_fgpu\": 2}, \"policy.ann@example.com\": {\"max_sessions\": 9}}");
	CHECK_INT(mgr_config_put(m, file, &err), 0);
	json_decref(file);
	json_t *saved = mgr_config_flat(m);
	manager_close(m);
	/* What get prints is what the store keeps, and put-json takes it
	 * back unchanged. */
	m = open_manager(dir, NULL);
	if (!m)
		return;
	json_t *reread = mgr_config_flat(m);
	char *s1 = dump(saved), *s2 = dump(reread);
	CHECK_STR(s2, s1);
	CHECK_CONTAINS(s1, "\"policy.ann@example.com\":{\"max_sessions\":9}");
	CHECK_CONTAINS(s1, "\"queue_policy\":\"lifo\"");
	CHECK_CONTAINS(s1, "\"log_max_files\":7");
	CHECK_INT(mgr_config_put(m, reread, &err), 0);
	json_t *again = mgr_config_flat(m);
	char *s3 = dump(again);
	CHECK_STR(s3, s1);
	free(s1);
	free(s2);
	free(s3);
	json_decref(again);
	json_decref(reread);
	json_decref(saved);
	/* The export of a store (admin backup) is the same form. */
	json_t *exported = NULL;
	pthread_mutex_lock(&m->mu);
	CHECK_INT(mgr_settings_export_store(m->so, m->store, &exported, &err), 0);
	pthread_mutex_unlock(&m->mu);
	CHECK_INT(json_integer_value(json_object_get(exported, "fgpu_per_device")), 4);
	json_decref(exported);
	manager_close(m);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK_INT(system(cmd), 0);
}

/* Waits (the condition is checked, not the time) until m's setting key,
 * printed as compact JSON, is want ("absent": not there). */
static bool wait_setting(struct manager *m, const char *key, const char *want)
{
	for (int i = 0; i < 300; i++) {
		json_t *f = mgr_config_flat(m);
		json_t *v = json_object_get(f, key);
		char *t = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("absent");
		bool ok = t && !strcmp(t, want);
		free(t);
		json_decref(f);
		if (ok)
			return true;
		usleep(100000);
	}
	FAILF("setting %s never became %s", key, want);
	return false;
}

static void set_one(struct manager *m, const char *key, const char *text)
{
	json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
	struct terr err = {0};
	int rc = mgr_config_set(m, key, v, NULL, &err);
	if (rc < 0)
		FAILF("config set %s %s: %s", key, text, err.msg);
	json_decref(v);
}

TEST(two_managers_follow_etcd)
{
	char d1[] = "/tmp/tessera-setetcd1-XXXXXX", d2[] = "/tmp/tessera-setetcd2-XXXXXX";
	if (!mkdtemp(d1) || !mkdtemp(d2)) {
		FAILF("mkdtemp");
		return;
	}
	struct manager *m1 = open_manager(d1, etcd.endpoint), *m2 = open_manager(d2, etcd.endpoint);
	if (!m1 || !m2) {
		manager_close(m1);
		manager_close(m2);
		return;
	}
	struct terr err = {0};
	set_one(m1, "queue_policy", "\"drf\"");
	set_one(m1, "policy.zed@example.com", "{\"max_sessions\": 3}");
	CHECK(wait_setting(m2, "queue_policy", "\"drf\""));
	CHECK(wait_setting(m2, "policy.zed@example.com", "{\"max_sessions\":3}"));
	/* etcd has them, one key each, as JSON. */
	struct etcd_kv *kvs;
	size_t n;
	CHECK_INT(etcd_range(etcd.endpoint, ETCD_CONFIG_PREFIX "queue_policy", false, &kvs, &n, NULL, &err), 0);
	CHECK_INT(n, 1);
	if (n == 1)
		CHECK_STR(kvs[0].value, "\"drf\"");
	etcd_kvs_free(kvs, n);
	/* A change made with etcdctl (here its gateway) is applied too. */
	CHECK_INT(etcd_put(etcd.endpoint, ETCD_CONFIG_PREFIX "fgpu_per_device", "3", 1, &err), 0);
	CHECK(wait_setting(m1, "fgpu_per_device", "3"));
	CHECK(wait_setting(m2, "fgpu_per_device", "3"));
	/* A removal (null) is a deletion in etcd, seen by both. */
	set_one(m2, "policy.zed@example.com", "null");
	CHECK(wait_setting(m1, "policy.zed@example.com", "absent"));
	/* A bad value written past the API is logged and ignored. */
	CHECK_INT(etcd_put(etcd.endpoint, ETCD_CONFIG_PREFIX "fgpu_per_device", "1000", 4, &err), 0);
	set_one(m2, "fifo_skip_after", "5");
	CHECK(wait_setting(m1, "fifo_skip_after", "5"));
	CHECK(wait_setting(m1, "fgpu_per_device", "3"));

	/* put-json with a bad file writes nothing to etcd. */
	int64_t rev_before = 0, rev_after = 0;
	CHECK_INT(etcd_range(etcd.endpoint, ETCD_CONFIG_PREFIX, true, &kvs, &n, &rev_before, &err), 0);
	etcd_kvs_free(kvs, n);
	json_t *bad = parse("{\"selector\": \"dispersed\", \"folder_trash_days\": -1}");
	CHECK(mgr_config_put(m1, bad, &err) < 0);
	CHECK_CONTAINS(err.msg, "folder_trash_days");
	json_decref(bad);
	CHECK_INT(etcd_range(etcd.endpoint, ETCD_CONFIG_PREFIX, true, &kvs, &n, &rev_after, &err), 0);
	etcd_kvs_free(kvs, n);
	CHECK_INT(rev_after, rev_before);
	json_t *good = parse("{\"selector\": \"dispersed\", \"log_max_size\": \"1MiB\"}");
	CHECK_INT(mgr_config_put(m1, good, &err), 0);
	json_decref(good);
	CHECK(wait_setting(m2, "selector", "\"dispersed\""));
	CHECK(wait_setting(m2, "log_max_size", "\"1MiB\""));

	/* manager.conf's keys as settings: a storage host added through m1
	 * is a host of m2 (its directory made there); the registry too; a
	 * deletion gives manager.conf's value (none here) back. */
	char hosts[300], want[320], newdir[200];
	snprintf(newdir, sizeof(newdir), "%s/new", d1);
	snprintf(hosts, sizeof(hosts), "\"local:%s/folders,new:%s\"", d2, newdir);
	set_one(m1, "storage_hosts", hosts);
	snprintf(want, sizeof(want), "%s", hosts);
	CHECK(wait_setting(m2, "storage_hosts", want));
	pthread_mutex_lock(&m2->mu);
	CHECK_INT(m2->n_hosts, 2);
	if (m2->n_hosts == 2)
		CHECK_STR(m2->hosts[1].path, newdir);
	pthread_mutex_unlock(&m2->mu);
	CHECK(access(newdir, F_OK) == 0);
	set_one(m1, "registry_url", "\"http://127.0.0.1:5999\"");
	CHECK(wait_setting(m2, "registry_url", "\"http://127.0.0.1:5999\""));
	char reg[256];
	mgr_registry_get(m2, reg, sizeof(reg), NULL, 0);
	CHECK_STR(reg, "127.0.0.1:5999");
	set_one(m1, "registry_url", "null");
	CHECK(wait_setting(m2, "registry_url", "null"));
	mgr_registry_get(m2, reg, sizeof(reg), NULL, 0);
	CHECK_STR(reg, "");
	/* a bad one written past the API is ignored */
	CHECK_INT(etcd_put(etcd.endpoint, ETCD_CONFIG_PREFIX "storage_hosts", "\"x:rel\"", 7, &err), 0);
	set_one(m1, "fifo_skip_after", "6");
	CHECK(wait_setting(m2, "fifo_skip_after", "6"));
	CHECK(wait_setting(m2, "storage_hosts", want));

	/* etcd stops and starts: both watches resume by themselves. */
	testetcd_kill(&etcd);
	CHECK_INT(testetcd_start_again(&etcd), 0);
	set_one(m1, "fifo_skip_after", "9");
	CHECK(wait_setting(m2, "fifo_skip_after", "9"));

	/* A restarted manager reads them from etcd, not from its store. */
	manager_close(m2);
	m2 = open_manager(d2, etcd.endpoint);
	if (m2) {
		CHECK(wait_setting(m2, "fifo_skip_after", "9"));
		CHECK(wait_setting(m2, "queue_policy", "\"drf\""));
	}
	manager_close(m1);
	manager_close(m2);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", d1, d2);
	CHECK_INT(system(cmd), 0);
}

TEST(manager_without_etcd_does_not_start)
{
	char dir[] = "/tmp/tessera-setnoetcd-XXXXXX";
	if (!mkdtemp(dir))
		return;
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", testetcd_free_port());
	struct manager_config cfg = {.data_dir = dir, .listen = "127.0.0.1:0", .dispatch_workers = 1, .etcd = url};
	struct manager *m = NULL;
	struct terr err = {0};
	CHECK(manager_open(&m, &cfg, &err) < 0);
	CHECK_CONTAINS(err.msg, "etcd at http://127.0.0.1:");
	cfg.etcd = "127.0.0.1:2379";
	CHECK_INT(manager_open(&m, &cfg, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "http://HOST:PORT");
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK_INT(system(cmd), 0);
}

int main(void)
{
	httpc_global_init();
	RUN(check_flat);
	RUN(put_on_the_store_is_all_or_nothing_and_round_trips);
	RUN(manager_without_etcd_does_not_start);
	if (testetcd_start(&etcd) < 0) {
		fprintf(stderr, "could not start etcd (Debian's etcd-server)\n");
		testetcd_stop(&etcd);
		return 1;
	}
	RUN(two_managers_follow_etcd);
	testetcd_stop(&etcd);
	return testlib_done();
}
