/* manager/settings.c: cluster settings on a real manager (manager_open on
 * a temporary data dir, no agent, not serving): validation of every key
 * with messages naming it, policies, persistence across a reopen, and
 * mgr_user_policy's fallback to policy.default. */
#include "manager/state.h"
#include "manager/manager.h"
#include "testlib.h"

#include <jansson.h>
#include <stdlib.h>
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
	RUN(policies);
	RUN(user_policy_fallback);
	RUN(persistence);
	manager_close(mgr);
	remove_tree(data_dir);
	return testlib_done();
}
