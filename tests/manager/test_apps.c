/* manager: session apps through the core interface (core.h) on a real
 * manager in host mode, with a fake in-process agent whose image declares
 * service ports: the secret in the start's spec, the list of apps, a link
 * on the app's host with the proxy's port, what a redeem answers, another
 * user's answer, and the proxy's route list, which a long poll sees go
 * when the session is removed. Then the proxy's settings that
 * manager_open refuses.
 *
 * Nothing here asserts on time: waits are bounded polls on the state. */
#include "manager/core.h"
#include "testlib.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#define GiB (1LL << 30)

/* ---------- the fake agent ---------- */

static struct {
	pthread_mutex_t mu;
	json_t *last_spec;
} fake = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int f_start(void *ctx, json_t *spec, char cid[RT_ID_MAX], char app_endpoint[AGENT_APP_ENDPOINT_MAX],
		   struct agent_start_times *times, struct terr *err)
{
	(void)times;
	(void)ctx;
	(void)err;
	pthread_mutex_lock(&fake.mu);
	json_decref(fake.last_spec);
	fake.last_spec = json_deep_copy(spec);
	pthread_mutex_unlock(&fake.mu);
	snprintf(cid, RT_ID_MAX, "fake-%.20s", json_string_value(json_object_get(spec, "id")));
	snprintf(app_endpoint, AGENT_APP_ENDPOINT_MAX, "10.0.0.7:32801");
	return 0;
}
static int f_destroy(void *ctx, const char *session_id, const char *cid, struct terr *err)
{
	(void)ctx;
	(void)session_id;
	(void)cid;
	(void)err;
	return 0;
}
static int f_exec(void *ctx, const char *cid, json_t *command, int timeout_s, struct pump **out, struct terr *err)
{
	(void)ctx;
	(void)cid;
	(void)command;
	(void)timeout_s;
	(void)out;
	return terr_set(err, ENOSYS, "no exec here");
}
static int f_logs(void *ctx, const char *cid, int tail, bool follow, struct pump **out, struct terr *err)
{
	(void)ctx;
	(void)cid;
	(void)tail;
	(void)follow;
	(void)out;
	return terr_set(err, ENOSYS, "no logs here");
}
static int f_image_exists(void *ctx, const char *ref, bool *exists, struct terr *err)
{
	(void)ctx;
	(void)err;
	*exists = !strcmp(ref, "apps:1");
	return 0;
}
static json_t *node_images(void)
{
	return json_pack("[{s:s,s:[s],s:I,s:{s:s}}]", "id", "sha256:1", "tags", "apps:1", "size", (json_int_t)1000,
			 "labels", "ai.backend.service-ports", "jupyter:http:8081,my_board:preopen:6006");
}
static int f_images(void *ctx, json_t **images, struct terr *err)
{
	(void)ctx;
	(void)err;
	*images = node_images();
	return 0;
}
static int f_image_remove(void *ctx, const char *ref, struct terr *err)
{
	(void)ctx;
	return terr_set(err, ENOENT, "no image %s", ref);
}
static void f_release(void *ctx)
{
	(void)ctx;
}
static const struct agent_link_ops fake_link = {
	"fake", f_start, f_destroy, f_exec, f_logs, f_image_exists, f_images, f_image_remove, NULL, NULL,
	f_release,
};

/* ---------- helpers ---------- */

static char data_dir[] = "/tmp/tessera-apps-XXXXXX";
static struct manager *mgr;
static struct user_rec alice, bob;

static int make_user(const char *email, struct user_rec *out)
{
	json_t *reply = NULL;
	struct terr err = {0};
	if (mgr_user_create(mgr, email, "a password", false, "test", &reply, &err) < 0) {
		FAILF("creating %s: %s", email, err.msg);
		return -1;
	}
	const char *ak = json_string_value(json_object_get(json_object_get(reply, "user"), "access_key"));
	int rc = ak ? mgr_user_by_access_key(mgr, ak, out) : -1;
	json_decref(reply);
	return rc;
}

static const char *str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static bool wait_running(const char *ref)
{
	for (int waited = 0; waited < 20000; waited += 5) {
		json_t *o = NULL;
		struct terr err = {0};
		bool ok = mgr_session_get(mgr, &alice, ref, -1, &o, &err) == 0 && !strcmp(str(o, "status"), "RUNNING");
		json_decref(o);
		if (ok)
			return true;
		usleep(5000);
	}
	return false;
}

static const char *token_of(const char *url)
{
	const char *t = url ? strstr(url, "token=") : NULL;
	return t ? t + 6 : "";
}

struct poll_arg {
	int64_t since;
	json_t *reply;
	int rc;
};

static void *poll_main(void *p)
{
	struct poll_arg *a = p;
	a->rc = mgr_proxy_routes(mgr, a->since, 30, &a->reply);
	return NULL;
}

/* ---------- tests ---------- */

TEST(apps_in_host_mode)
{
	struct terr err = {0};
	json_t *desc = json_pack("{s:s,s:s,s:{s:I,s:I},s:[],s:[],s:o}", "id", "node-1", "version", "test", "capacity",
				 "cpu_milli", (json_int_t)8000, "mem", (json_int_t)(8 * GiB), "containers", "gpus",
				 "images", node_images());
	CHECK_INT(mgr_agent_register(mgr, desc, &fake_link, NULL, true, NULL, &err), 0);
	json_decref(desc);

	struct create_request cr = {.image = "apps:1", .name = "nb", .count = 1,
				    .req = {.cpu_m = 1000, .mem = 256LL << 20}};
	json_t *arr = NULL;
	CHECK_INT(mgr_sessions_create(mgr, &alice, &cr, &arr, &err), 0);
	char sid[STORE_ID_MAX] = "";
	util_strlcpy(sid, str(json_array_get(arr, 0), "id") ?: "", sizeof(sid));
	char *created = json_dumps(arr, JSON_COMPACT);
	CHECK(created && !strstr(created, "secret"));
	free(created);
	json_decref(arr);
	CHECK(wait_running("nb"));

	/* The agent was given a secret. */
	pthread_mutex_lock(&fake.mu);
	char secret[80] = "";
	util_strlcpy(secret, str(fake.last_spec, "app_secret") ?: "", sizeof(secret));
	pthread_mutex_unlock(&fake.mu);
	CHECK_INT((int)strlen(secret), 64);

	json_t *apps = NULL;
	CHECK_INT(mgr_session_apps(mgr, &alice, "nb", &apps, &err), 0);
	char *text = json_dumps(apps, JSON_COMPACT);
	CHECK_STR(text, "[{\"name\":\"terminal\",\"protocol\":\"pty\",\"port\":null},"
			"{\"name\":\"jupyter\",\"protocol\":\"http\",\"port\":8081},"
			"{\"name\":\"my_board\",\"protocol\":\"preopen\",\"port\":6006}]");
	free(text);
	json_decref(apps);
	CHECK_INT(mgr_session_apps(mgr, &bob, "nb", &apps, &err), -ENOENT);

	/* A link on the app's host, with the proxy's port. */
	json_t *o = NULL;
	CHECK_INT(mgr_session_app_open(mgr, &alice, "nb", "my_board", &o, &err), 0);
	char want[256];
	snprintf(want, sizeof(want), "https://my-board.%.8s.apps.example.org:8443/__tessera/setup?token=", sid);
	CHECK(o && !strncmp(str(o, "url") ?: "", want, strlen(want)));
	CHECK_STR(str(o, "app"), "my_board");
	char token[80];
	util_strlcpy(token, token_of(str(o, "url")), sizeof(token));
	json_decref(o);
	CHECK_INT((int)strlen(token), 64);
	err = (struct terr){0};
	CHECK_INT(mgr_session_app_open(mgr, &bob, "nb", "my_board", &o, &err), -ENOENT);
	CHECK_INT(mgr_session_app_open(mgr, &bob, sid, "my_board", &o, &err), -ENOENT);
	err = (struct terr){0};
	CHECK_INT(mgr_session_app_open(mgr, &alice, "nb", "nosuch", &o, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "its apps: terminal, jupyter, my_board");
	err = (struct terr){0};
	CHECK_INT(mgr_session_app_open(mgr, &alice, "nb", "7611", &o, &err), -EINVAL);

	json_t *r = NULL;
	CHECK_INT(mgr_proxy_redeem(mgr, token, &r, &err), 0);
	snprintf(want, sizeof(want), "my-board.%.8s.apps.example.org", sid);
	CHECK_STR(str(r, "host"), want);
	CHECK(json_object_get(r, "port") == NULL);
	CHECK_STR(str(r, "user"), "alice@example.org");
	CHECK_STR(str(r, "user_id"), alice.id);
	CHECK_STR(str(r, "session_id"), sid);
	CHECK_STR(str(r, "session"), "nb");
	CHECK_STR(str(r, "app"), "my_board");
	CHECK_STR(str(r, "target"), "app:my_board");
	CHECK_STR(str(r, "endpoint"), "10.0.0.7:32801");
	CHECK_STR(str(r, "secret"), secret);
	json_decref(r);
	err = (struct terr){0};
	CHECK_INT(mgr_proxy_redeem(mgr, token, &r, &err), -EACCES);
	CHECK_CONTAINS(err.msg, "already used");

	/* A port, in host mode: port-N. */
	CHECK_INT(mgr_session_app_open(mgr, &alice, "nb", "8888", &o, &err), 0);
	snprintf(want, sizeof(want), "https://port-8888.%.8s.apps.example.org:8443/", sid);
	CHECK(o && !strncmp(str(o, "url") ?: "", want, strlen(want)));
	json_decref(o);

	/* The routes, and a long poll that sees them go. */
	json_t *routes = NULL;
	CHECK_INT(mgr_proxy_routes(mgr, -1, 0, &routes), 0);
	CHECK_INT((int)json_array_size(json_object_get(routes, "routes")), 2);
	json_t *first = json_array_get(json_object_get(routes, "routes"), 0);
	CHECK_STR(str(first, "secret"), secret);
	CHECK_STR(str(first, "user_id"), alice.id);
	int64_t gen = json_integer_value(json_object_get(routes, "generation"));
	json_decref(routes);
	/* Unchanged: a zero-second poll answers the same generation. */
	CHECK_INT(mgr_proxy_routes(mgr, gen, 0, &routes), 0);
	CHECK(json_integer_value(json_object_get(routes, "generation")) == gen);
	json_decref(routes);
	struct poll_arg pa = {.since = gen};
	pthread_t t;
	CHECK_INT(pthread_create(&t, NULL, poll_main, &pa), 0);
	json_t *del = NULL;
	CHECK_INT(mgr_session_delete(mgr, &alice, "nb", &del, &err), 0);
	json_decref(del);
	pthread_join(t, NULL);
	CHECK_INT(pa.rc, 0);
	CHECK(json_integer_value(json_object_get(pa.reply, "generation")) != gen);
	CHECK_INT((int)json_array_size(json_object_get(pa.reply, "routes")), 0);
	json_decref(pa.reply);
	err = (struct terr){0};
	CHECK_INT(mgr_session_app_open(mgr, &alice, "nb", "jupyter", &o, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "RUNNING");
}

/* The proxy's settings are checked when the manager opens. */
TEST(bad_proxy_settings)
{
	static const struct {
		const char *url, *range, *domain, *says;
	} cases[] = {
		{"http://127.0.0.1:8080", NULL, NULL, "wsproxy_url must have no port"},
		{"127.0.0.1", NULL, NULL, "wsproxy_url"},
		{NULL, "10300-10205", NULL, "wsproxy_port_range"},
		{NULL, NULL, "bad_domain", "wsproxy_domain"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char dir[] = "/tmp/tessera-apps-bad-XXXXXX";
		if (!mkdtemp(dir))
			continue;
		struct manager_config cfg = {.data_dir = dir, .listen = "127.0.0.1:0", .wsproxy_url = cases[i].url,
					     .wsproxy_port_range = cases[i].range, .wsproxy_domain = cases[i].domain};
		struct manager *m = NULL;
		struct terr err = {0};
		CHECK_INT(manager_open(&m, &cfg, &err), -EINVAL);
		CHECK_CONTAINS(err.msg, cases[i].says);
		rmdir(dir);
	}
}

int main(void)
{
	log_set_level(LOG_WARN);
	if (!mkdtemp(data_dir)) {
		perror("mkdtemp");
		return 1;
	}
	struct manager_config cfg = {.data_dir = data_dir, .listen = "127.0.0.1:0", .dispatch_workers = 2,
				     .wsproxy_url = "https://apps.example.org:8443", .wsproxy_domain = "example.org"};
	struct terr err = {0};
	if (manager_open(&mgr, &cfg, &err) < 0) {
		FAILF("manager_open: %s", err.msg);
		return testlib_done();
	}
	if (make_user("alice@example.org", &alice) < 0 || make_user("bob@example.org", &bob) < 0)
		return testlib_done();
	RUN(apps_in_host_mode);
	RUN(bad_proxy_settings);
	manager_close(mgr);
	json_decref(fake.last_spec);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", data_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", data_dir);
	return testlib_done();
}
