/* manager: sessions through the core interface (core.h) on a real manager
 * (store on a temporary data dir, scheduler thread, dispatch workers, not
 * serving HTTP) with one fake in-process agent behind struct
 * agent_link_ops: the placement check's refusals, the seed scenario (a node
 * of 2 fGPU, three sessions of 1 fGPU: two RUNNING, one PENDING; deleting
 * one starts the third), deletion with the container's removal and the
 * resources released, a failed start, exec and logs, the change stream,
 * and a restart that keeps the sessions and reconciles them with the
 * agent's containers.
 *
 * Nothing here asserts on time: waits are bounded polls on the state. */
#include "manager/core.h"
#include "manager/state.h"
#include "testlib.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "common/frames.h"
#include "common/log.h"
#include "common/util.h"

#define GiB (1LL << 30)
#define WAIT_MS 20000      /* bound of every wait for a state */

/* ---------- the fake agent ---------- */

/* What the manager asked of it. Its calls come from the dispatch workers
 * and from the test's thread: one mutex. The fake lives through every
 * case: the ids of its first FAKE_KEPT starts and removals are kept. */
#define FAKE_KEPT 256
static struct fake {
	pthread_mutex_t mu;
	int starts, destroys, image_checks, releases;
	char started[FAKE_KEPT][STORE_ID_MAX];      /* session ids, in start order */
	char destroyed[FAKE_KEPT][STORE_ID_MAX];
	char destroyed_cid[FAKE_KEPT][RT_ID_MAX];
	json_t *last_spec;                   /* the last start's spec */
	json_t *containers;                  /* {"session id": "container id"}: running */
} fake = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const char *const fake_images[] = {"busybox:latest", "broken:1", NULL};

static int f_start(void *ctx, json_t *spec, char cid[RT_ID_MAX], char app_endpoint[AGENT_APP_ENDPOINT_MAX],
		        struct agent_start_times *times, struct terr *err)
{
	/* As a node that timed its start says (dispatch.c turns them into
	 * history lines). */
	*times = (struct agent_start_times){.total_ms = 3, .create_ms = 1, .start_ms = 1, .port_ms = 1};
	(void)ctx;
	snprintf(app_endpoint, AGENT_APP_ENDPOINT_MAX, "127.0.0.1:49999");
	const char *id = json_string_value(json_object_get(spec, "id"));
	const char *image = json_string_value(json_object_get(spec, "image"));
	if (image && !strcmp(image, "broken:1"))
		return terr_set(err, EIO, "the fake runtime cannot start broken:1");
	pthread_mutex_lock(&fake.mu);
	if (fake.starts < FAKE_KEPT)
		util_strlcpy(fake.started[fake.starts], id ? id : "", STORE_ID_MAX);
	fake.starts++;
	json_decref(fake.last_spec);
	fake.last_spec = json_deep_copy(spec);
	snprintf(cid, RT_ID_MAX, "fake-%.20s", id ? id : "");
	json_object_set_new(fake.containers, id ? id : "", json_string(cid));
	pthread_mutex_unlock(&fake.mu);
	return 0;
}

static int f_destroy(void *ctx, const char *session_id, const char *cid, struct terr *err)
{
	(void)ctx;
	(void)err;
	pthread_mutex_lock(&fake.mu);
	if (fake.destroys < FAKE_KEPT) {
		util_strlcpy(fake.destroyed[fake.destroys], session_id, STORE_ID_MAX);
		util_strlcpy(fake.destroyed_cid[fake.destroys], cid ? cid : "", RT_ID_MAX);
	}
	fake.destroys++;
	json_object_del(fake.containers, session_id);
	pthread_mutex_unlock(&fake.mu);
	return 0;
}

/* A pump that sends fixed bytes (the fake agent's output). */
struct fixed_bytes {
	char *data;
	size_t len;
};

static void fixed_free(void *ud)
{
	struct fixed_bytes *f = ud;
	free(f->data);
	free(f);
}

static int fixed_produce(struct pump *p, void *ud, struct terr *err)
{
	(void)err;
	struct fixed_bytes *f = ud;
	pump_ready(p);
	pump_write(p, f->data, f->len);
	return 0;
}

static int fixed_pump(const void *data, size_t len, struct pump **out, struct terr *err)
{
	struct fixed_bytes *f = calloc(1, sizeof(*f));
	if (!f || !(f->data = malloc(len ? len : 1))) {
		free(f);
		return terr_set(err, ENOMEM, "out of memory");
	}
	memcpy(f->data, data, len);
	f->len = len;
	return pump_start(out, 0, fixed_produce, f, fixed_free, err);
}

/* stdout: the container id, stderr: the command's first word, exit code:
 * the timeout it was given. */
static int f_exec(void *ctx, const char *cid, json_t *command, int timeout_s, struct pump **out,
		  struct terr *err)
{
	(void)ctx;
	const char *word = json_string_value(json_array_get(command, 0)) ?: "";
	unsigned char buf[512];
	size_t n = 0;
	frames_header(buf, FRAME_STDOUT, (uint32_t)strlen(cid));
	memcpy(buf + FRAMES_HEADER, cid, strlen(cid));
	n = FRAMES_HEADER + strlen(cid);
	frames_header(buf + n, FRAME_STDERR, (uint32_t)strlen(word));
	memcpy(buf + n + FRAMES_HEADER, word, strlen(word));
	n += FRAMES_HEADER + strlen(word);
	frames_exit(buf + n, timeout_s);
	n += FRAMES_HEADER + 4;
	return fixed_pump(buf, n, out, err);
}

static int f_logs(void *ctx, const char *cid, int tail, bool follow, struct pump **out, struct terr *err)
{
	(void)ctx;
	char text[256];
	snprintf(text, sizeof(text), "logs of %s, tail %d, follow %d\n", cid, tail, follow);
	return fixed_pump(text, strlen(text), out, err);
}

/* A whole log stream as a string (malloc'd). */
static char *read_all(struct pump *p)
{
	char *buf = calloc(1, 4096);
	size_t len = 0;
	long n;
	while (buf && len < 4095 && (n = pump_read(p, buf + len, 4095 - len, -1)) > 0)
		len += (size_t)n;
	return buf;
}

static int f_image_exists(void *ctx, const char *ref, bool *exists, struct terr *err)
{
	(void)ctx;
	(void)err;
	pthread_mutex_lock(&fake.mu);
	fake.image_checks++;
	pthread_mutex_unlock(&fake.mu);
	*exists = false;
	for (int i = 0; fake_images[i]; i++)
		*exists = *exists || !strcmp(ref, fake_images[i]);
	return 0;
}

/* As an agent of an earlier version answers: "repo:tag" strings. Counted
 * with the image checks: both are the manager asking the node. */
static int f_images(void *ctx, json_t **refs, struct terr *err)
{
	(void)ctx;
	(void)err;
	pthread_mutex_lock(&fake.mu);
	fake.image_checks++;
	pthread_mutex_unlock(&fake.mu);
	*refs = json_array();
	for (int i = 0; fake_images[i]; i++)
		json_array_append_new(*refs, json_string(fake_images[i]));
	return 0;
}

static void f_release(void *ctx)
{
	(void)ctx;
	pthread_mutex_lock(&fake.mu);
	fake.releases++;
	pthread_mutex_unlock(&fake.mu);
}

static int f_image_remove(void *ctx, const char *ref, struct terr *err)
{
	(void)ctx;
	return terr_set(err, ENOENT, "the fake node has no image %s to remove", ref);
}

static const struct agent_link_ops fake_link = {
	"fake", f_start, f_destroy, f_exec, f_logs, f_image_exists, f_images, f_image_remove, NULL, NULL,
	f_release,
};

static int fake_count(const int *counter)
{
	pthread_mutex_lock(&fake.mu);
	int n = *counter;
	pthread_mutex_unlock(&fake.mu);
	return n;
}

/* Whether the fake was asked to start (or destroy) this session. */
static bool fake_did(char (*list)[STORE_ID_MAX], const int *counter, const char *id)
{
	bool found = false;
	pthread_mutex_lock(&fake.mu);
	for (int i = 0; i < *counter && i < FAKE_KEPT; i++)
		found = found || !strcmp(list[i], id);
	pthread_mutex_unlock(&fake.mu);
	return found;
}

/* One node: 8 CPU, 8 GiB, one GPU of 16 GiB and 100 SMs; `containers`
 * (taken) as the agent reports them at registration. */
static int register_fake(struct manager *m, json_t *containers, struct terr *err)
{
	json_t *desc = json_pack("{s:s,s:s,s:{s:I,s:I},s:o,s:[{s:i,s:s,s:s,s:I,s:i}],s:b}", "id", "fake-1",
				 "version", "test", "capacity", "cpu_milli", (json_int_t)8000, "mem", (json_int_t)(8 * GiB),
				 "containers", containers, "gpus", "index", 0, "uuid", "GPU-fake-0", "name", "Fake GPU",
				 "memory", (json_int_t)(16 * GiB), "sms", 100, "mock_gpus", true);
	memset(err, 0, sizeof(*err));
	/* local: never LOST, so a slow test run cannot lose it. */
	int rc = mgr_agent_register(m, desc, &fake_link, NULL, true, NULL, err);
	json_decref(desc);
	return rc;
}

/* ---------- helpers ---------- */

static char data_dir[] = "/tmp/tessera-sessions-XXXXXX";
static struct manager *mgr;
static struct user_rec alice, bob;

static struct manager *open_manager(void)
{
	struct manager_config cfg = {.data_dir = data_dir, .listen = "127.0.0.1:0", .dispatch_workers = 2};
	struct manager *m = NULL;
	struct terr err = {0};
	if (manager_open(&m, &cfg, &err) < 0)
		FAILF("manager_open(%s): %s", data_dir, err.msg);
	return m;
}

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
	if (rc < 0)
		FAILF("%s not found by its access key", email);
	return rc;
}

/* A create request as validate_create_request leaves it. */
static struct create_request request(const char *image, const char *name, int count, int64_t cpu_m, int64_t fgpu_m)
{
	return (struct create_request){.image = image, .name = name, .count = count,
				       .req = {.cpu_m = cpu_m, .mem = 256LL << 20, .fgpu_m = fgpu_m}};
}

/* Creates; returns the JSON array or NULL (err filled). */
static json_t *create(const struct user_rec *u, struct create_request cr, struct terr *err)
{
	json_t *arr = NULL;
	memset(err, 0, sizeof(*err));
	if (mgr_sessions_create(mgr, u, &cr, &arr, err) < 0)
		return NULL;
	return arr;
}

static void refused(struct create_request cr, int code, const char *says, int line)
{
	struct terr err;
	json_t *arr = create(&alice, cr, &err);
	testlib_checks++;
	if (arr || err.code != code || !strstr(err.msg, says))
		FAILF("line %d: create %s gave %s, code %d '%s'; expected code %d saying '%s'", line, cr.image,
		      arr ? "sessions" : "none", err.code, err.msg, code, says);
	json_decref(arr);
}
#define REFUSED(cr, code, says) refused((cr), (code), (says), __LINE__)

/* The session's JSON now (new reference), or NULL. */
static json_t *get(const struct user_rec *u, const char *ref)
{
	json_t *o = NULL;
	struct terr err = {0};
	if (mgr_session_get(mgr, u, ref, -1, &o, &err) < 0)
		return NULL;
	return o;
}

static const char *str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* Polls until the session has the status; false (and a failure) when it
 * does not within WAIT_MS. */
static bool wait_status(const char *ref, const char *status, int line)
{
	char last[32] = "(none)";
	for (int waited = 0; waited < WAIT_MS; waited += 5) {
		json_t *o = get(&alice, ref);
		bool ok = o && !strcmp(str(o, "status"), status);
		if (o)
			util_strlcpy(last, str(o, "status"), sizeof(last));
		json_decref(o);
		if (ok)
			return true;
		usleep(5000);
	}
	FAILF("line %d: session %s is %s, never %s", line, ref, last, status);
	return false;
}
#define WAIT_STATUS(ref, st) wait_status((ref), (st), __LINE__)

/* The id of the session named `name` (copied to out). */
static void id_of(const char *name, char out[STORE_ID_MAX])
{
	json_t *o = get(&alice, name);
	util_strlcpy(out, o ? str(o, "id") : "", STORE_ID_MAX);
	json_decref(o);
}

static json_t *node(void)
{
	json_t *nodes = mgr_nodes_list(mgr);
	json_t *n = json_incref(json_array_get(nodes, 0));
	json_decref(nodes);
	return n;
}

/* The node's used fGPU (in milli) by its totals and by its device. */
static void check_used(int64_t cpu_m, int64_t fgpu_m, int sessions, int line)
{
	json_t *n = node();
	json_t *used = json_object_get(n, "used");
	double cpu = json_number_value(json_object_get(used, "cpu"));
	double fgpu = json_number_value(json_object_get(used, "fgpu"));
	double dev = json_number_value(json_object_get(json_array_get(json_object_get(n, "gpus"), 0), "fgpu_used"));
	int ns = (int)json_integer_value(json_object_get(n, "sessions"));
	testlib_checks++;
	if ((int64_t)(cpu * 1000 + 0.5) != cpu_m || (int64_t)(fgpu * 1000 + 0.5) != fgpu_m ||
	    (int64_t)(dev * 1000 + 0.5) != fgpu_m || ns != sessions)
		FAILF("line %d: node uses cpu %g, fgpu %g (device %g), %d sessions; expected %lld m, %lld m, %d",
		      line, cpu, fgpu, dev, ns, (long long)cpu_m, (long long)fgpu_m, sessions);
	json_decref(n);
}
#define CHECK_USED(cpu_m, fgpu_m, n) check_used((cpu_m), (fgpu_m), (n), __LINE__)

/* The kept renderings (mgr_sessions_page, mgr_session_get_text) agree
 * with JSON built afresh (mgr_sessions_list, mgr_session_get) for every
 * session of u: run after each test, so that every change the tests make
 * to sessions rendered by the run before must have dropped the kept
 * text. */
static int kept_json_differs(const struct user_rec *u, int line, bool report)
{
	struct session_query q = {.all = true};
	char *body = NULL;
	size_t len = 0;
	struct terr err = {0};
	int differs = 0;
	if (report)
		testlib_checks++;
	if (mgr_sessions_page(mgr, u, &q, &body, &len, &err) < 0) {
		if (report)
			FAILF("line %d: mgr_sessions_page: %s", line, err.msg);
		return 1;
	}
	json_t *page = json_loadb(body, len, 0, NULL);
	free(body);
	json_t *fresh = mgr_sessions_list(mgr, u, true);
	if (report)
		testlib_checks++;
	if ((!json_equal(json_object_get(page, "sessions"), fresh) || json_object_get(page, "continue")) &&
	    ++differs && report) {
		char *a = json_dumps(page, JSON_COMPACT), *b = json_dumps(fresh, JSON_COMPACT);
		FAILF("line %d: the kept list differs from a fresh one:\n kept  %s\n fresh %s", line, a, b);
		free(a);
		free(b);
	}
	/* Newest first (order=newest), two at a time: the same sessions in
	 * the reverse order, each once, the last page without a token. */
	json_t *rev = json_array();
	struct session_query nq = {.all = true, .newest = true, .limit = 2};
	for (int pages = 0; pages < 1000; pages++) {
		if (mgr_sessions_page(mgr, u, &nq, &body, &len, &err) < 0)
			break;
		json_t *pg = json_loadb(body, len, 0, NULL);
		free(body);
		json_array_extend(rev, json_object_get(pg, "sessions"));
		const char *tok = json_string_value(json_object_get(pg, "continue"));
		struct session_query_in in = {.all = "1", .order = "newest", .limit = "2", .cont = tok};
		bool go_on = tok && validate_session_query(&in, &nq, &err) == 0;
		json_decref(pg);
		if (!go_on)
			break;
	}
	size_t nf = json_array_size(fresh);
	bool same = json_array_size(rev) == nf;
	for (size_t k = 0; same && k < nf; k++)
		same = json_equal(json_array_get(rev, k), json_array_get(fresh, nf - 1 - k));
	if (report)
		testlib_checks++;
	if (!same && ++differs && report)
		FAILF("line %d: the newest-first pages (%zu sessions) are not the list reversed (%zu)", line,
		      json_array_size(rev), nf);
	json_decref(rev);
	size_t i;
	json_t *s;
	json_array_foreach(fresh, i, s) {
		const char *id = json_string_value(json_object_get(s, "id"));
		json_t *one = NULL;
		char *text = NULL;
		if (report)
			testlib_checks++;
		if (mgr_session_get(mgr, u, id, -1, &one, &err) < 0 ||
		    mgr_session_get_text(mgr, u, id, -1, &text, &len, &err) < 0) {
			if (report)
				FAILF("line %d: get %s: %s", line, id, err.msg);
			differs++;
			json_decref(one);
			free(text);
			continue;
		}
		json_t *kept = json_loadb(text, len, 0, NULL);
		if (!json_equal(kept, one) && ++differs && report) {
			char *a = json_dumps(kept, JSON_COMPACT), *b = json_dumps(one, JSON_COMPACT);
			FAILF("line %d: the kept session %s differs from a fresh one:\n kept  %s\n fresh %s", line, id, a,
			      b);
			free(a);
			free(b);
		}
		json_decref(kept);
		json_decref(one);
		free(text);
	}
	json_decref(page);
	json_decref(fresh);
	return differs;
}

/* The dispatch workers may still be ending a session the test asked to
 * remove: the kept and the fresh rendering are then taken on either side
 * of that change. A kept text that was not dropped stays wrong however
 * long one waits, so the check is tried again for up to 5 s and fails
 * when no try agreed. */
static void check_kept_json(const struct user_rec *u, int line)
{
	int i = 0;
	while (i < 250 && kept_json_differs(u, line, false)) {
		usleep(20 * 1000);
		i++;
	}
	/* Reported when it never agreed: a try that agreed may be followed
	 * by a worker's change between the kept and the fresh rendering. */
	if (i == 250)
		kept_json_differs(u, line, true);
	else
		testlib_checks++;
}

/* A test, then the kept renderings checked for both users. */
#define RUN_KEPT(name) do { \
	RUN(name); \
	check_kept_json(&alice, __LINE__); \
	check_kept_json(&bob, __LINE__); \
} while (0)

/* ---------- tests ---------- */

TEST(refused_without_a_node)
{
	REFUSED(request("busybox:latest", "early", 1, 1000, 0), EAGAIN, "no node has registered yet");
	json_t *list = mgr_sessions_list(mgr, &alice, true);
	CHECK_INT(json_array_size(list), 0);
	json_decref(list);
}

TEST(register_and_settings)
{
	struct terr err;
	CHECK_INT(register_fake(mgr, json_array(), &err), 0);
	/* 1 GPU = 2 fGPU, as in the seed scenario */
	json_t *v = json_integer(2), *settings = NULL;
	CHECK_INT(mgr_config_set(mgr, "fgpu_per_device", v, &settings, &err), 0);
	json_decref(v);
	CHECK_INT(json_integer_value(json_object_get(settings, "fgpu_per_device")), 2);
	json_decref(settings);
	json_t *n = node();
	CHECK_STR(str(n, "id"), "fake-1");
	CHECK_STR(str(n, "status"), "ALIVE");
	CHECK(json_number_value(json_object_get(json_object_get(n, "capacity"), "fgpu")) == 2);
	json_decref(n);
	/* an unknown setting, through the same interface */
	v = json_integer(1);
	CHECK_INT(mgr_config_set(mgr, "bogus", v, NULL, &err), -ENOENT);
	json_decref(v);
}

TEST(placement_check)
{
	int checks = fake_count(&fake.image_checks);
	REFUSED(request("nosuch:1", "x", 1, 1000, 0), EINVAL, "not present on any node");
	CHECK(fake_count(&fake.image_checks) > checks);
	REFUSED(request("busybox:latest", "x", 1, 1000, 3000), EDOM, "no node could ever hold");
	REFUSED(request("busybox:latest", "x", 1, 9000, 0), EDOM, "no node could ever hold");
	REFUSED(request("busybox:latest", "x", 1, 1000, 5), EINVAL, "quantum");
	/* nothing was made, nothing started */
	json_t *list = mgr_sessions_list(mgr, &alice, true);
	CHECK_INT(json_array_size(list), 0);
	json_decref(list);
	CHECK_INT(fake_count(&fake.starts), 0);
	/* the image list comes from the alive node */
	json_t *images = mgr_images_list(mgr, &alice, false);
	CHECK_INT(json_array_size(images), 2);
	CHECK_STR(str(json_array_get(images, 0), "ref"), "busybox:latest");
	CHECK_STR(json_string_value(json_array_get(json_object_get(json_array_get(images, 0), "nodes"), 0)), "fake-1");
	json_decref(images);
}

static char q1[STORE_ID_MAX], q2[STORE_ID_MAX], q3[STORE_ID_MAX];

TEST(two_running_one_pending)
{
	struct terr err;
	json_t *arr = create(&alice, request("busybox:latest", "q", 3, 1000, 1000), &err);
	CHECK(arr != NULL);
	if (!arr) {
		FAILF("create: %s", err.msg);
		return;
	}
	CHECK_INT(json_array_size(arr), 3);
	CHECK_STR(str(json_array_get(arr, 0), "name"), "q-1");
	CHECK_STR(str(json_array_get(arr, 2), "name"), "q-3");
	CHECK_STR(str(json_array_get(arr, 0), "status"), "PENDING");
	CHECK_STR(str(json_array_get(arr, 0), "owner"), "alice@example.org");
	json_decref(arr);
	id_of("q-1", q1);
	id_of("q-2", q2);
	id_of("q-3", q3);
	/* fifo: the first two fit on the 2 fGPU device, the third waits */
	WAIT_STATUS("q-1", "RUNNING");
	WAIT_STATUS("q-2", "RUNNING");
	json_t *o = get(&alice, "q-3");
	CHECK_STR(str(o, "status"), "PENDING");
	CHECK_CONTAINS(str(o, "status_info"), "GPU");
	json_decref(o);
	CHECK_INT(fake_count(&fake.starts), 2);
	CHECK(fake_did(fake.started, &fake.starts, q1));
	CHECK(fake_did(fake.started, &fake.starts, q2));
	CHECK(!fake_did(fake.started, &fake.starts, q3));
	CHECK_USED(2000, 2000, 2);

	/* what the agent was asked to start: half the device */
	pthread_mutex_lock(&fake.mu);
	json_t *g = json_array_get(json_object_get(fake.last_spec, "gpus"), 0);
	CHECK_STR(str(g, "uuid"), "GPU-fake-0");
	CHECK_INT(json_integer_value(json_object_get(g, "fgpu_milli")), 1000);
	CHECK_INT(json_integer_value(json_object_get(g, "memory_limit")), 8 * GiB);
	CHECK_INT(json_integer_value(json_object_get(g, "sm_limit_percent")), 50);
	CHECK_STR(str(fake.last_spec, "owner"), "alice@example.org");
	pthread_mutex_unlock(&fake.mu);

	/* the session as the API shows it: its node, container and share */
	o = get(&alice, "q-1");
	CHECK_STR(str(o, "agent"), "fake-1");
	CHECK(!strncmp(str(o, "container_id") ?: "", "fake-", 5));
	CHECK_INT(json_array_size(json_object_get(o, "gpus")), 1);
	CHECK(json_array_size(json_object_get(o, "status_history")) >= 4);  /* PENDING..RUNNING */
	json_decref(o);

	/* a second active session by the same name is refused */
	REFUSED(request("busybox:latest", "q-2", 1, 1000, 0), EEXIST, "active session named q-2");
}

TEST(other_users)
{
	/* bob sees none of alice's sessions, by list, name or id */
	json_t *list = mgr_sessions_list(mgr, &bob, true);
	CHECK_INT(json_array_size(list), 0);
	json_decref(list);
	CHECK(get(&bob, "q-1") == NULL);
	CHECK(get(&bob, q1) == NULL);
	json_t *o = NULL;
	struct terr err = {0};
	CHECK_INT(mgr_session_delete(mgr, &bob, "q-1", &o, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "no session named or with id 'q-1'");
	o = get(&alice, "q-1");
	CHECK_STR(str(o, "status"), "RUNNING");
	json_decref(o);
}

TEST(exec_and_logs)
{
	json_t *cmd = json_pack("[s,s]", "echo", "hi");
	struct pump *p = NULL;
	struct mgr_exec_slot *slot = NULL;
	struct rt_exec_result result = {0};
	struct terr err = {0};
	CHECK_INT(mgr_session_exec(mgr, &alice, "q-1", cmd, 7, &p, &slot, &err), 0);
	CHECK_INT(rt_exec_collect(p, 1024, &result, &err), 0);
	pump_close(p);
	mgr_exec_release(slot);
	CHECK(!strncmp(result.out ?: "", "fake-", 5));
	CHECK_STR(result.err, "echo");
	CHECK_INT(result.exit_code, 7);
	rt_exec_result_free(&result);
	/* not RUNNING: refused before the agent is asked */
	CHECK_INT(mgr_session_exec(mgr, &alice, "q-3", cmd, 7, &p, &slot, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "session q-3 is PENDING; it must be RUNNING");
	CHECK(p == NULL && slot == NULL);
	CHECK_INT(mgr_session_exec(mgr, &alice, "nope", cmd, 7, &p, &slot, &err), -ENOENT);
	char *logs = NULL, *kept = NULL;
	CHECK_INT(mgr_session_logs(mgr, &alice, q2, 5, true, &p, &kept, &err), 0);
	logs = read_all(p);
	pump_close(p);
	CHECK_CONTAINS(logs, "tail 5, follow 1");
	free(logs);
	p = NULL;
	CHECK_INT(mgr_session_logs(mgr, &alice, "q-3", 0, false, &p, &kept, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "has no container");
	CHECK(p == NULL);

	/* Concurrent execs per user: MGR_DEFAULT_MAX_EXECS, then the policy's. */
	struct pump *ps[MGR_DEFAULT_MAX_EXECS + 1];
	struct mgr_exec_slot *slots[MGR_DEFAULT_MAX_EXECS + 1];
	for (int i = 0; i < MGR_DEFAULT_MAX_EXECS; i++)
		CHECK_INT(mgr_session_exec(mgr, &alice, "q-1", cmd, 7, &ps[i], &slots[i], &err), 0);
	CHECK_INT(mgr_session_exec(mgr, &alice, "q-1", cmd, 7, &p, &slot, &err), -EUSERS);
	CHECK_CONTAINS(err.msg, "max_concurrent_execs");
	/* Another user's are their own. */
	CHECK_INT(mgr_session_exec(mgr, &bob, "q-1", cmd, 7, &p, &slot, &err), -ENOENT);
	pump_close(ps[0]);
	mgr_exec_release(slots[0]);
	CHECK_INT(mgr_session_exec(mgr, &alice, "q-1", cmd, 7, &ps[0], &slots[0], &err), 0);
	json_t *pol = json_pack("{s:i}", "max_concurrent_execs", MGR_DEFAULT_MAX_EXECS + 1);
	CHECK_INT(mgr_config_set(mgr, "policy.default", pol, NULL, &err), 0);
	json_decref(pol);
	CHECK_INT(mgr_session_exec(mgr, &alice, "q-1", cmd, 7, &ps[MGR_DEFAULT_MAX_EXECS],
				   &slots[MGR_DEFAULT_MAX_EXECS], &err), 0);
	CHECK_INT(mgr_session_exec(mgr, &alice, "q-1", cmd, 7, &p, &slot, &err), -EUSERS);
	pol = json_pack("{s:i}", "max_concurrent_execs", -1);
	CHECK_INT(mgr_config_set(mgr, "policy.default", pol, NULL, &err), -EINVAL);
	json_decref(pol);
	CHECK_INT(mgr_config_set(mgr, "policy.default", json_null(), NULL, &err), 0);
	for (int i = 0; i <= MGR_DEFAULT_MAX_EXECS; i++) {
		pump_close(ps[i]);
		mgr_exec_release(slots[i]);
	}
	json_decref(cmd);
}

TEST(delete_advances_the_queue)
{
	json_t *o = NULL;
	struct terr err = {0};
	CHECK_INT(mgr_session_delete(mgr, &alice, "q-1", &o, &err), 0);
	/* answered before the container is gone */
	CHECK_STR(str(o, "status"), "TERMINATING");
	json_decref(o);
	WAIT_STATUS("q-1", "TERMINATED");
	CHECK(fake_did(fake.destroyed, &fake.destroys, q1));
	pthread_mutex_lock(&fake.mu);
	char want[RT_ID_MAX];
	snprintf(want, sizeof(want), "fake-%.20s", q1);
	CHECK_STR(fake.destroyed_cid[0], want);
	pthread_mutex_unlock(&fake.mu);
	/* its share went to the third */
	WAIT_STATUS("q-3", "RUNNING");
	CHECK(fake_did(fake.started, &fake.starts, q3));
	CHECK_INT(fake_count(&fake.starts), 3);
	CHECK_USED(2000, 2000, 2);
	o = get(&alice, "q-1");
	CHECK(json_is_null(json_object_get(o, "container_id")));
	json_decref(o);
	/* the list hides ended sessions unless asked for all */
	json_t *list = mgr_sessions_list(mgr, &alice, false);
	CHECK_INT(json_array_size(list), 2);
	json_decref(list);
	list = mgr_sessions_list(mgr, &alice, true);
	CHECK_INT(json_array_size(list), 3);
	json_decref(list);
	/* deleting an ended session changes nothing */
	CHECK_INT(mgr_session_delete(mgr, &alice, q1, &o, &err), 0);
	CHECK_STR(str(o, "status"), "TERMINATED");
	json_decref(o);
}

TEST(delete_pending)
{
	struct terr err;
	json_t *arr = create(&alice, request("busybox:latest", "waiter", 1, 1000, 1000), &err);
	CHECK(arr != NULL);
	json_decref(arr);
	int starts = fake_count(&fake.starts), destroys = fake_count(&fake.destroys);
	json_t *o = NULL;
	CHECK_INT(mgr_session_delete(mgr, &alice, "waiter", &o, &err), 0);
	CHECK_STR(str(o, "status"), "CANCELLED");
	CHECK_CONTAINS(str(o, "status_info"), "cancelled by alice@example.org");
	json_decref(o);
	CHECK_INT(fake_count(&fake.starts), starts);
	CHECK_INT(fake_count(&fake.destroys), destroys);
	CHECK_USED(2000, 2000, 2);
}

/* The queue (queue.c): two waiting sessions by their place in the last
 * pass's order, each pass in their history, an admin's move ahead (a
 * priority), what a move refuses, and the history freed at the end. */
static json_t *queue_entry(const struct user_rec *u, const char *name)
{
	json_t *q = mgr_queue_json(mgr, u), *e, *found = NULL;
	size_t i;
	json_array_foreach(json_object_get(q, "sessions"), i, e)
		if (!strcmp(str(e, "name"), name))
			found = json_incref(e);
	json_decref(q);
	return found;
}

static int64_t position(const char *name)
{
	json_t *e = queue_entry(&alice, name);
	int64_t p = e ? json_integer_value(json_object_get(e, "position")) : -1;
	json_decref(e);
	return p;
}

/* Waits (up to 10 s) until name is at position want: passes run on
 * their own, every second at the least. */
static bool wait_position(const char *name, int64_t want)
{
	for (int i = 0; i < 1000 && position(name) != want; i++)
		usleep(10000);
	return position(name) == want;
}

TEST(queue_positions_history_and_moves)
{
	struct user_rec admin = alice;
	admin.is_admin = true;
	struct terr err;
	json_t *arr = create(&alice, request("busybox:latest", "w1", 1, 1000, 1000), &err);
	json_decref(arr);
	arr = create(&alice, request("busybox:latest", "w2", 1, 1000, 1000), &err);
	json_decref(arr);
	CHECK(wait_position("w1", 1));
	CHECK(wait_position("w2", 2));
	json_t *e = queue_entry(&alice, "w2");
	CHECK_CONTAINS(str(e, "reason"), "queued behind w1");
	CHECK_INT(json_integer_value(json_object_get(e, "priority")), 0);
	json_decref(e);
	/* bob sees none of alice's, but how many wait */
	json_t *q = mgr_queue_json(mgr, &bob);
	CHECK_INT(json_array_size(json_object_get(q, "sessions")), 0);
	CHECK_INT(json_integer_value(json_object_get(q, "pending")), 2);
	json_decref(q);

	json_t *h = NULL;
	CHECK_INT(mgr_session_scheduling(mgr, &alice, "w2", &h, &err), 0);
	json_t *hist = json_object_get(h, "history");
	CHECK(json_array_size(hist) >= 1);
	CHECK_CONTAINS(str(json_array_get(hist, json_array_size(hist) - 1), "reason"), "queued behind w1");
	CHECK(json_integer_value(json_object_get(h, "passes")) >= 1);
	json_decref(h);
	CHECK_INT(mgr_session_scheduling(mgr, &bob, "w2", &h, &err), -ENOENT);

	/* moves: admins only, a PENDING session only, 0..100 */
	json_t *o = NULL;
	CHECK_INT(mgr_queue_move(mgr, &alice, "w2", 0, true, &o, &err), -EPERM);
	CHECK_INT(mgr_queue_move(mgr, &admin, "w2", 101, false, &o, &err), -EINVAL);
	CHECK_INT(mgr_queue_move(mgr, &admin, "q-2", 0, true, &o, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "not waiting in the queue");
	CHECK_INT(mgr_queue_move(mgr, &admin, "w2", 0, true, &o, &err), 0);
	CHECK_INT(json_integer_value(json_object_get(o, "priority")), 1);
	CHECK_INT(json_integer_value(json_object_get(o, "previous_priority")), 0);
	json_decref(o);
	CHECK(wait_position("w2", 1));
	CHECK(wait_position("w1", 2));
	o = get(&alice, "w2");
	CHECK_INT(json_integer_value(json_object_get(o, "priority")), 1);   /* stored on the session */
	json_decref(o);
	/* at the top already: --top changes nothing */
	CHECK_INT(mgr_queue_move(mgr, &admin, "w2", 0, true, &o, &err), 0);
	CHECK_INT(json_integer_value(json_object_get(o, "priority")), 1);
	json_decref(o);
	/* nothing above 100: the front cannot be reached past a 100 */
	CHECK_INT(mgr_queue_move(mgr, &admin, "w1", 100, false, &o, &err), 0);
	json_decref(o);
	CHECK_INT(mgr_queue_move(mgr, &admin, "w2", 0, true, &o, &err), -ERANGE);
	CHECK_CONTAINS(err.msg, "highest priority (100)");

	CHECK_INT(mgr_session_delete(mgr, &alice, "w1", &o, &err), 0);
	json_decref(o);
	CHECK_INT(mgr_session_delete(mgr, &alice, "w2", &o, &err), 0);
	json_decref(o);
	/* an ended session's history is given back */
	CHECK_INT(mgr_session_scheduling(mgr, &alice, "w2", &h, &err), 0);
	CHECK_INT(json_array_size(json_object_get(h, "history")), 0);
	CHECK(json_is_null(json_object_get(h, "position")));
	json_decref(h);
}

TEST(failed_start)
{
	struct terr err;
	/* CPU only: there is room for it beside the two GPU sessions */
	json_t *arr = create(&alice, request("broken:1", "broken", 1, 500, 0), &err);
	CHECK(arr != NULL);
	json_decref(arr);
	WAIT_STATUS("broken", "ERROR");
	json_t *o = get(&alice, "broken");
	CHECK_CONTAINS(str(o, "status_info"), "could not start on node fake-1");
	CHECK_CONTAINS(str(o, "status_info"), "cannot start broken:1");
	json_decref(o);
	/* an ERROR session holds nothing */
	CHECK_USED(2000, 2000, 2);
}

TEST(restart_keeps_sessions)
{
	json_t *before = mgr_sessions_list(mgr, &alice, true);
	int releases = fake_count(&fake.releases);
	manager_close(mgr);
	CHECK(fake_count(&fake.releases) > releases);
	mgr = open_manager();
	if (!mgr) {
		json_decref(before);
		return;
	}
	/* the same sessions, the same statuses, the node not back yet */
	json_t *after = mgr_sessions_list(mgr, &alice, true);
	CHECK_INT(json_array_size(after), json_array_size(before));
	for (size_t i = 0; i < json_array_size(before) && i < json_array_size(after); i++) {
		CHECK_STR(str(json_array_get(after, i), "id"), str(json_array_get(before, i), "id"));
		CHECK_STR(str(json_array_get(after, i), "status"), str(json_array_get(before, i), "status"));
	}
	json_decref(before);
	json_decref(after);
	json_t *n = node();
	CHECK_STR(str(n, "status"), "LOST");
	json_decref(n);
	/* the users too: alice's key still finds her */
	struct user_rec again;
	CHECK_INT(mgr_user_by_access_key(mgr, alice.access_key, &again), 0);
	CHECK_STR(again.email, "alice@example.org");
	/* while no node is alive, a create is queued (the image checked when
	 * it starts), saying what it waits for; cancelled here */
	{
		struct terr cerr = {0};
		json_t *queued = create(&alice, request("busybox:latest", "x", 1, 100, 0), &cerr);
		CHECK(queued != NULL);
		json_decref(queued);
		json_t *x = NULL;
		for (int i = 0; i < 500; i++) {   /* the scheduler's pass says why */
			json_decref(x);
			x = get(&alice, "x");
			if (x && strstr(str(x, "status_info"), "no node is alive"))
				break;
			usleep(10000);
		}
		CHECK_STR(str(x, "status"), "PENDING");
		CHECK_CONTAINS(str(x, "status_info"), "no node is alive");
		json_decref(x);
		json_t *gone = NULL;
		CHECK_INT(mgr_session_delete(mgr, &alice, "x", &gone, &cerr), 0);
		json_decref(gone);
	}

	/* The agent comes back with q-2's and late's containers; q-3's
	 * vanished meanwhile. */
	pthread_mutex_lock(&fake.mu);
	json_t *containers = json_array();
	const char *sid;
	json_t *cid;
	json_object_foreach(fake.containers, sid, cid) {
		if (!strcmp(sid, q3))
			continue;
		json_array_append_new(containers, json_pack("{s:s,s:O,s:b}", "session_id", sid, "container_id", cid,
							    "running", true));
	}
	pthread_mutex_unlock(&fake.mu);
	struct terr err;
	CHECK_INT(json_array_size(containers), 2);
	CHECK_INT(register_fake(mgr, containers, &err), 0);
	json_t *o = get(&alice, "q-2");
	CHECK_STR(str(o, "status"), "RUNNING");
	CHECK_INT(json_array_size(json_object_get(o, "gpus")), 1);
	json_decref(o);
	o = get(&alice, "q-3");
	CHECK_STR(str(o, "status"), "ERROR");
	CHECK_CONTAINS(str(o, "status_info"), "vanished while node fake-1 was away");
	json_decref(o);
	/* q-2 and late hold what they held; q-3's share is free again */
	CHECK_USED(1100, 1000, 2);
	json_t *arr = create(&alice, request("busybox:latest", "after", 1, 1000, 1000), &err);
	CHECK(arr != NULL);
	json_decref(arr);
	WAIT_STATUS("after", "RUNNING");
	CHECK_USED(2100, 2000, 3);
}

/* Root sessions only where the owner's policy allows them; the start
 * spec says who the processes are and whose network they join. */
TEST(root_needs_the_policy)
{
	struct create_request cr = request("busybox:latest", "r1", 1, 100, 0);
	cr.root = true;
	REFUSED(cr, EPERM, "your policy does not allow sessions that run as root");
	struct terr err = {0};
	json_t *v = json_pack("{s:b}", "allow_root", 1);
	CHECK_INT(mgr_config_set(mgr, "policy.alice@example.org", v, NULL, &err), 0);
	json_decref(v);
	json_t *arr = create(&alice, cr, &err);
	CHECK(arr != NULL);
	CHECK(json_is_true(json_object_get(json_array_get(arr, 0), "root")));
	json_decref(arr);
	WAIT_STATUS("r1", "RUNNING");
	pthread_mutex_lock(&fake.mu);
	CHECK(json_is_true(json_object_get(fake.last_spec, "root")));
	CHECK_STR(str(fake.last_spec, "owner_id"), alice.id);
	pthread_mutex_unlock(&fake.mu);

	/* bob's policy (the default) does not allow it */
	arr = create(&bob, cr, &err);
	CHECK(arr == NULL && err.code == EPERM);
	json_decref(arr);
	/* and without root, a session says so */
	cr = request("busybox:latest", "w1", 1, 100, 0);
	arr = create(&alice, cr, &err);
	CHECK(arr && json_is_false(json_object_get(json_array_get(arr, 0), "root")));
	json_decref(arr);
	WAIT_STATUS("w1", "RUNNING");
	pthread_mutex_lock(&fake.mu);
	CHECK(json_is_false(json_object_get(fake.last_spec, "root")));
	pthread_mutex_unlock(&fake.mu);
}

/* ---------- names, owners, batch sessions, OOM kills ---------- */

static struct user_rec root_user;

static json_t *get_as(const struct user_rec *u, const char *ref)
{
	json_t *o = NULL;
	struct terr err = {0};
	if (mgr_session_get(mgr, u, ref, -1, &o, &err) < 0)
		return NULL;
	return o;
}

/* A session of u named name, CPU only (room beside the GPU ones), RUNNING
 * on the fake; its id into id. */
static bool running_session(const struct user_rec *u, const char *name, const char *batch_cmd,
			    char id[STORE_ID_MAX], int line)
{
	struct create_request cr = request("busybox:latest", name, 1, 100, 0);
	cr.startup_command = batch_cmd;
	cr.batch = batch_cmd != NULL;
	struct terr err;
	json_t *arr = create(u, cr, &err);
	if (!arr) {
		FAILF("line %d: create %s: %s", line, name, err.msg);
		return false;
	}
	util_strlcpy(id, str(json_array_get(arr, 0), "id") ?: "", STORE_ID_MAX);
	json_decref(arr);
	for (int waited = 0; waited < WAIT_MS; waited += 5) {
		json_t *o = get_as(u, id);
		bool ok = o && !strcmp(str(o, "status"), "RUNNING");
		json_decref(o);
		if (ok)
			return true;
		usleep(5000);
	}
	FAILF("line %d: %s never RUNNING", line, name);
	return false;
}
#define RUNNING_SESSION(u, name, batch, id) running_session((u), (name), (batch), (id), __LINE__)

/* What the agent reports for a session's container. */
static void agent_event(const char *id, json_t *event)
{
	char cid[RT_ID_MAX];
	snprintf(cid, sizeof(cid), "fake-%.20s", id);
	json_object_set_new(event, "session_id", json_string(id));
	json_object_set_new(event, "container_id", json_string(cid));
	mgr_agent_event(mgr, "fake-1", event);
	json_decref(event);
}

static int history_len(json_t *o)
{
	return (int)json_array_size(json_object_get(o, "status_history"));
}

/* A cluster session (docs/user-guide.md, "Distributed training"): one
 * record per container, created and placed together, listed once with
 * its containers, RUNNING with all of them, their specs naming the
 * session's hosts and SSH key, a container reached as NAME/sub1, and one
 * container's death ending the session ERROR, naming it. */
TEST(cluster_sessions)
{
	struct terr err;
	struct create_request cr = request("busybox:latest", "cl", 1, 500, 0);
	cr.cluster_size = 3;
	cr.cluster_mode = STORE_CLUSTER_SINGLE_NODE;
	/* a single-node gang no node could ever hold: 3 x 4 CPU on 8 */
	struct create_request big = cr;
	big.req.cpu_m = 4000;
	REFUSED(big, EDOM, "no node could ever hold 3 containers");
	int starts_before = fake_count(&fake.starts);
	json_t *arr = create(&alice, cr, &err);
	CHECK(arr != NULL);
	if (!arr) {
		FAILF("create: %s", err.msg);
		return;
	}
	CHECK_INT(json_array_size(arr), 1);   /* one session */
	json_t *first = json_array_get(arr, 0);
	CHECK_INT(json_integer_value(json_object_get(first, "cluster_size")), 3);
	CHECK_INT(json_array_size(json_object_get(first, "containers")), 3);
	json_decref(arr);
	if (!WAIT_STATUS("cl", "RUNNING"))
		return;
	CHECK_INT(fake_count(&fake.starts) - starts_before, 3);
	json_t *o = get(&alice, "cl");
	json_t *cs = json_object_get(o, "containers");
	const char *names[] = {"main1", "sub1", "sub2"};
	char sub1_id[STORE_ID_MAX] = "";
	for (size_t i = 0; i < 3; i++) {
		json_t *c = json_array_get(cs, i);
		CHECK_STR(str(c, "name"), names[i]);
		CHECK_STR(str(c, "status"), "RUNNING");
		CHECK_STR(str(c, "agent"), "fake-1");
		CHECK(str(c, "container_id") != NULL);
		if (i == 1)
			util_strlcpy(sub1_id, str(c, "id") ?: "", sizeof(sub1_id));
	}
	CHECK_STR(str(json_array_get(cs, 0), "id"), str(o, "id"));
	/* listed once */
	json_t *list = mgr_sessions_list(mgr, &alice, false);
	int listed = 0;
	size_t i;
	json_t *x;
	json_array_foreach(list, i, x)
		listed += !strcmp(str(x, "name"), "cl");
	CHECK_INT(listed, 1);
	json_decref(list);
	/* a container by NAME/CONTAINER; a sub's own id is the session */
	json_t *sub = get(&alice, "cl/sub1");
	CHECK_STR(sub ? str(sub, "id") : NULL, sub1_id);
	json_decref(sub);
	CHECK(get(&alice, "cl/sub7") == NULL);
	json_t *by_sub_id = get(&alice, sub1_id);
	CHECK_STR(by_sub_id ? str(by_sub_id, "id") : NULL, str(o, "id"));
	json_decref(by_sub_id);
	/* the last start's spec: its host among the session's, the key */
	pthread_mutex_lock(&fake.mu);
	json_t *cl = json_object_get(fake.last_spec, "cluster");
	CHECK_STR(str(cl, "hosts"), "main1,sub1,sub2");
	CHECK_INT(json_integer_value(json_object_get(cl, "size")), 3);
	CHECK_STR(str(cl, "mode"), "single-node");
	CHECK_STR(str(cl, "session"), str(o, "id"));
	CHECK(!strncmp(str(cl, "ssh_key") ?: "", "-----BEGIN OPENSSH PRIVATE KEY-----\n", 36));
	CHECK(!strncmp(str(cl, "ssh_pub") ?: "", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI", 37));
	pthread_mutex_unlock(&fake.mu);
	/* commit is refused */
	json_t *commit = NULL;
	CHECK(mgr_session_commit(mgr, &alice, "cl", NULL, NULL, &commit, &err) < 0);
	CHECK_CONTAINS(err.msg, "cannot be committed");
	json_decref(commit);
	json_decref(o);

	/* sub1's container dies: the session ends ERROR, naming it; the
	 * others' containers are removed */
	int destroys_before = fake_count(&fake.destroys);
	agent_event(sub1_id, json_pack("{s:s,s:i,s:b}", "event", "died", "exit_code", 137, "oom_killed", 0));
	if (!WAIT_STATUS("cl", "ERROR") || !WAIT_STATUS("cl/sub2", "TERMINATED"))
		return;
	o = get(&alice, "cl");
	CHECK_CONTAINS(str(o, "status_info"), "container sub1 on node fake-1 ended");
	cs = json_object_get(o, "containers");
	CHECK_STR(str(json_array_get(cs, 1), "status"), "ERROR");
	CHECK_STR(str(json_array_get(cs, 2), "status"), "TERMINATED");
	json_decref(o);
	CHECK(fake_count(&fake.destroys) - destroys_before >= 2);
	/* removing it removes the failed container kept for its logs */
	json_t *gone = NULL;
	CHECK_INT(mgr_session_delete(mgr, &alice, "cl", &gone, &err), 0);
	json_decref(gone);
	for (int w = 0; w < WAIT_MS && !fake_did(fake.destroyed, &fake.destroys, sub1_id); w += 5)
		usleep(5000);
	CHECK(fake_did(fake.destroyed, &fake.destroys, sub1_id));
}

/* The session's SSH key in OpenSSH's formats: ssh-keygen (when this
 * machine has it: openssh-client) derives from the private key file the
 * same public key line; a bad seed is refused. */
TEST(cluster_ssh_key)
{
	char key[1024], pub[256];
	const char *seed = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
	CHECK_INT(mgr_cluster_ssh_keys(seed, key, sizeof(key), pub, sizeof(pub)), 0);
	CHECK_INT(mgr_cluster_ssh_keys("zz", key, sizeof(key), pub, sizeof(pub)), -EINVAL);
	CHECK_INT(mgr_cluster_ssh_keys(seed, key, 64, pub, sizeof(pub)), -ENOMEM);
	CHECK_INT(mgr_cluster_ssh_keys(seed, key, sizeof(key), pub, sizeof(pub)), 0);
	CHECK(!strncmp(key, "-----BEGIN OPENSSH PRIVATE KEY-----\n", 36));
	CHECK_CONTAINS(key, "\n-----END OPENSSH PRIVATE KEY-----\n");
	/* RFC 8032's first test vector has this seed's neighbour; the
	 * public key of seed 00..1f is fixed: derived twice, the same. */
	char pub2[256], key2[1024];
	CHECK_INT(mgr_cluster_ssh_keys(seed, key2, sizeof(key2), pub2, sizeof(pub2)), 0);
	CHECK_STR(pub2, pub);
	if (access("/usr/bin/ssh-keygen", X_OK) < 0) {
		printf("skip ssh-keygen's check: no /usr/bin/ssh-keygen (openssh-client)\n");
		return;
	}
	char path[] = "/tmp/tessera-key-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, key, strlen(key)) == (ssize_t)strlen(key));
	close(fd);
	char cmd[128], got[512] = "";
	snprintf(cmd, sizeof(cmd), "/usr/bin/ssh-keygen -y -f %s 2>&1", path);
	FILE *p = popen(cmd, "r");
	if (p) {
		if (!fgets(got, sizeof(got), p))
			got[0] = '\0';
		pclose(p);
	}
	unlink(path);
	/* "ssh-ed25519 BASE64 [comment]": the key itself must agree. */
	char *sp = strchr(pub + 12, ' ');
	size_t keylen = sp ? (size_t)(sp - pub) : strlen(pub);
	testlib_checks++;
	if (strncmp(got, pub, keylen))
		FAILF("ssh-keygen -y says '%s', expected '%.*s'", got, (int)keylen, pub);
}

TEST(names_resolve_among_the_callers_own)
{
	json_t *reply = NULL;
	struct terr err = {0};
	CHECK_INT(mgr_user_create(mgr, "root@example.org", "a password", true, "test", &reply, &err), 0);
	const char *ak = json_string_value(json_object_get(json_object_get(reply, "user"), "access_key"));
	CHECK_INT(mgr_user_by_access_key(mgr, ak ? ak : "", &root_user), 0);
	json_decref(reply);
	CHECK(root_user.is_admin);

	char mine[STORE_ID_MAX], hers[STORE_ID_MAX], only_hers[STORE_ID_MAX];
	/* The other user's is the newer one: newest-wins alone would pick it. */
	if (!RUNNING_SESSION(&root_user, "shared", NULL, mine) || !RUNNING_SESSION(&alice, "shared", NULL, hers) ||
	    !RUNNING_SESSION(&alice, "hers-only", NULL, only_hers))
		return;
	/* The admin's name is the admin's own session, whatever the order
	 * of creation; another user's by that name is not reached by it. */
	json_t *o = get_as(&root_user, "shared");
	CHECK_STR(str(o, "id"), mine);
	json_decref(o);
	CHECK(get_as(&root_user, "hers-only") == NULL);
	json_t *d = NULL;
	CHECK_INT(mgr_session_delete(mgr, &root_user, "shared", &d, &err), 0);
	CHECK_STR(str(d, "id"), mine);
	json_decref(d);
	o = get_as(&alice, hers);
	CHECK_STR(str(o, "status"), "RUNNING");
	json_decref(o);
	/* By id an admin reaches anyone's session. */
	o = get_as(&root_user, only_hers);
	CHECK_STR(str(o, "name"), "hers-only");
	json_decref(o);
	/* By name with the owner given (?owner=EMAIL). */
	char id[STORE_ID_MAX] = "";
	CHECK_INT(mgr_session_lookup(mgr, &root_user, "shared", "alice@example.org", id, &err), 0);
	CHECK_STR(id, hers);
	CHECK_INT(mgr_session_lookup(mgr, &root_user, "hers-only", "alice@example.org", id, &err), 0);
	CHECK_STR(id, only_hers);
	CHECK_INT(mgr_session_lookup(mgr, &root_user, "shared", "nobody@example.org", id, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "no user with email nobody@example.org");
	CHECK_INT(mgr_session_lookup(mgr, &root_user, "nope", "alice@example.org", id, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "alice@example.org has no session named or with id 'nope'");
	/* Not an admin: only their own email is allowed as the owner. */
	CHECK_INT(mgr_session_lookup(mgr, &bob, "shared", "alice@example.org", id, &err), -EPERM);
	CHECK_INT(mgr_session_lookup(mgr, &alice, "shared", "alice@example.org", id, &err), 0);
	CHECK_STR(id, hers);
	/* A user's session ids are not another user's by name either. */
	CHECK(get_as(&bob, hers) == NULL);
	CHECK_INT(mgr_session_delete(mgr, &alice, "shared", &d, &err), 0);
	json_decref(d);
	CHECK_INT(mgr_session_delete(mgr, &alice, "hers-only", &d, &err), 0);
	json_decref(d);
}

TEST(batch_sessions_end_with_their_command)
{
	char ok_id[STORE_ID_MAX], bad_id[STORE_ID_MAX], oom_id[STORE_ID_MAX];
	if (!RUNNING_SESSION(&alice, "job-ok", "true", ok_id))
		return;
	pthread_mutex_lock(&fake.mu);
	CHECK(json_is_true(json_object_get(fake.last_spec, "batch")));
	CHECK_STR(json_string_value(json_object_get(fake.last_spec, "startup_command")), "true");
	pthread_mutex_unlock(&fake.mu);
	json_t *o = get(&alice, "job-ok");
	CHECK_STR(str(o, "type"), "batch");
	json_decref(o);
	agent_event(ok_id, json_pack("{s:s,s:i,s:b,s:s}", "event", "died", "exit_code", 0, "oom_killed", 0,
				     "reason", "container ended by itself with exit code 0"));
	o = get(&alice, "job-ok");
	CHECK_STR(str(o, "status"), "TERMINATED");
	CHECK_INT(json_integer_value(json_object_get(o, "exit_code")), 0);
	CHECK_CONTAINS(str(o, "status_info"), "batch command finished (exit code 0)");
	json_decref(o);
	/* Its container is kept for its logs until the session is removed
	 * (asked by its id: an earlier test's late removal may still move
	 * the fake's count). */
	CHECK(!fake_did(fake.destroyed, &fake.destroys, ok_id));
	struct pump *logs = NULL;
	char *kept = NULL;
	struct terr err = {0};
	CHECK_INT(mgr_session_logs(mgr, &alice, "job-ok", 0, false, &logs, &kept, &err), 0);
	pump_close(logs);
	json_t *d = NULL;
	CHECK_INT(mgr_session_delete(mgr, &alice, "job-ok", &d, &err), 0);
	CHECK_STR(str(d, "status"), "TERMINATED");
	CHECK(json_is_true(json_object_get(d, "removed")));
	json_decref(d);
	/* Waited for by its id: another session's late removal (the log is
	 * read first, so removals take longer) also moves the count. */
	for (int waited = 0; waited < WAIT_MS && !fake_did(fake.destroyed, &fake.destroys, ok_id); waited += 5)
		usleep(5000);
	CHECK(fake_did(fake.destroyed, &fake.destroys, ok_id));
	/* The last of its log was read before the container went, and is
	 * what its logs answer now (the last `tail` lines of it). */
	int rc = -1;
	for (int waited = 0; waited < WAIT_MS; waited += 5) {
		logs = NULL;
		rc = mgr_session_logs(mgr, &alice, "job-ok", 1, false, &logs, &kept, &err);
		pump_close(logs);
		if (rc < 0 || kept)
			break;
		usleep(5000);
	}
	CHECK_INT(rc, 0);
	char want[128];
	snprintf(want, sizeof(want), "logs of fake-%.20s, tail 200, follow 0\n", ok_id);
	CHECK_STR(kept ? kept : "(none)", want);
	free(kept);
	kept = NULL;

	/* A non-zero code: ERROR with it. */
	if (!RUNNING_SESSION(&alice, "job-bad", "exit 3", bad_id))
		return;
	agent_event(bad_id, json_pack("{s:s,s:i,s:b}", "event", "died", "exit_code", 3, "oom_killed", 0));
	o = get(&alice, "job-bad");
	CHECK_STR(str(o, "status"), "ERROR");
	CHECK_INT(json_integer_value(json_object_get(o, "exit_code")), 3);
	CHECK_CONTAINS(str(o, "status_info"), "batch command failed with exit code 3");
	json_decref(o);

	/* OOM-killed: ERROR saying so, whichever report comes first. */
	if (!RUNNING_SESSION(&alice, "job-oom", "hog", oom_id))
		return;
	agent_event(oom_id, json_pack("{s:s,s:i,s:b}", "event", "died", "exit_code", 137, "oom_killed", 1));
	agent_event(oom_id, json_pack("{s:s,s:i}", "event", "oom", "oom_kills", 1));
	o = get(&alice, "job-oom");
	CHECK_STR(str(o, "status"), "ERROR");
	CHECK_INT(json_integer_value(json_object_get(o, "exit_code")), 137);
	CHECK_CONTAINS(str(o, "status_info"), "batch command was OOM-killed (a process exceeded the 256 MiB "
					      "memory limit), exit code 137");
	CHECK_INT(json_integer_value(json_object_get(o, "oom_kills")), 1);
	json_decref(o);

	/* An interactive session's end is an ERROR, whatever its code. */
	char inter[STORE_ID_MAX];
	if (!RUNNING_SESSION(&alice, "inter", NULL, inter))
		return;
	agent_event(inter, json_pack("{s:s,s:i,s:b,s:s}", "event", "died", "exit_code", 0, "oom_killed", 0,
				     "reason", "container ended by itself with exit code 0"));
	o = get(&alice, "inter");
	CHECK_STR(str(o, "status"), "ERROR");
	CHECK_STR(str(o, "type"), "interactive");
	json_decref(o);
}

TEST(oom_kills_are_reported_and_the_session_stays)
{
	char id[STORE_ID_MAX];
	if (!RUNNING_SESSION(&alice, "hog", NULL, id))
		return;
	json_t *o = get(&alice, "hog");
	int hist = history_len(o);
	json_decref(o);
	agent_event(id, json_pack("{s:s,s:i}", "event", "oom", "oom_kills", 1));
	o = get(&alice, "hog");
	CHECK_STR(str(o, "status"), "RUNNING");
	CHECK_STR(str(o, "status_info"), "a process was killed for exceeding the 256 MiB memory limit");
	CHECK_INT(json_integer_value(json_object_get(o, "oom_kills")), 1);
	CHECK_INT(history_len(o), hist + 1);
	json_t *last = json_array_get(json_object_get(o, "status_history"), (size_t)hist);
	CHECK_STR(str(last, "status"), "RUNNING");
	CHECK_STR(str(last, "info"), "a process was killed for exceeding the 256 MiB memory limit");
	json_decref(o);
	/* The count is the cgroup's total: a repeated report adds nothing. */
	agent_event(id, json_pack("{s:s,s:i}", "event", "oom", "oom_kills", 1));
	o = get(&alice, "hog");
	CHECK_INT(history_len(o), hist + 1);
	json_decref(o);
	/* Kills within MGR_OOM_NOTE_WINDOW_MS of that line are counted, not
	 * written: a fork bomb under its memory limit wrote a line per
	 * second before (issue 27). */
	for (int k = 3; k <= 185; k++)
		agent_event(id, json_pack("{s:s,s:i}", "event", "oom", "oom_kills", k));
	o = get(&alice, "hog");
	CHECK_STR(str(o, "status"), "RUNNING");
	CHECK_STR(str(o, "status_info"),
		  "184 processes were killed for exceeding the 256 MiB memory limit (185 in all) so far");
	CHECK_INT(json_integer_value(json_object_get(o, "oom_kills")), 185);
	CHECK_INT(history_len(o), hist + 1);
	json_decref(o);
	/* Another agent cannot speak for it. */
	json_t *ev = json_pack("{s:s,s:s,s:i}", "session_id", id, "event", "oom", "oom_kills", 900);
	mgr_agent_event(mgr, "elsewhere", ev);
	json_decref(ev);
	o = get(&alice, "hog");
	CHECK_INT(json_integer_value(json_object_get(o, "oom_kills")), 185);
	json_decref(o);
	/* Past the window, the next kill writes one line for all held. */
	pthread_mutex_lock(&mgr->mu);
	struct msession *s = mgr_find_session(mgr, id);
	if (s)
		s->oom_noted_ms -= MGR_OOM_NOTE_WINDOW_MS;
	pthread_mutex_unlock(&mgr->mu);
	agent_event(id, json_pack("{s:s,s:i}", "event", "oom", "oom_kills", 186));
	agent_event(id, json_pack("{s:s,s:i}", "event", "oom", "oom_kills", 190));
	o = get(&alice, "hog");
	CHECK_INT(history_len(o), hist + 2);
	last = json_array_get(json_object_get(o, "status_history"), (size_t)hist + 1);
	CHECK_STR(str(last, "info"), "185 processes were killed for exceeding the 256 MiB memory limit (186 in all)");
	json_decref(o);
	/* Its end writes those still held, then the end itself. */
	json_t *d = NULL;
	struct terr err = {0};
	CHECK_INT(mgr_session_delete(mgr, &alice, "hog", &d, &err), 0);
	json_decref(d);
	WAIT_STATUS(id, "TERMINATED");
	o = get(&alice, id);
	json_t *h = json_object_get(o, "status_history");
	size_t n = json_array_size(h);
	CHECK(n >= (size_t)hist + 4);
	bool told = false;
	for (size_t i = (size_t)hist + 2; i < n; i++)
		told = told || !strcmp(str(json_array_get(h, i), "info"),
				       "4 processes were killed for exceeding the 256 MiB memory limit (190 in all)");
	CHECK(told);
	CHECK_STR(str(json_array_get(h, n - 1), "status"), "TERMINATED");
	json_decref(o);
}

/* A container that a registration reports ended by a signal while its
 * node was away says it was killed, and by what (issue 27: a container
 * killed from outside read as one that ended). */
TEST(a_container_killed_while_away_says_so)
{
	char id[STORE_ID_MAX];
	if (!RUNNING_SESSION(&alice, "shot", NULL, id))
		return;
	json_t *o = get(&alice, "shot");
	bool here = !strcmp(str(o, "agent") ?: "", "fake-1");
	json_decref(o);
	if (!here) {
		FAILF("shot is not on fake-1");
		return;
	}
	pthread_mutex_lock(&fake.mu);
	json_t *containers = json_array();
	const char *sid;
	json_t *cid;
	json_object_foreach(fake.containers, sid, cid) {
		bool shot = !strcmp(sid, id);
		json_array_append_new(containers, json_pack("{s:s,s:O,s:b,s:i,s:b}", "session_id", sid, "container_id",
							    cid, "running", !shot, "exit_code", shot ? 137 : 0,
							    "oom_killed", false));
	}
	pthread_mutex_unlock(&fake.mu);
	struct terr err;
	CHECK_INT(register_fake(mgr, containers, &err), 0);
	o = get(&alice, "shot");
	CHECK_STR(str(o, "status"), "ERROR");
	CHECK_STR(str(o, "status_info"), "container was killed by SIGKILL from outside the session (docker kill or "
					 "kill -9 on its node) while node fake-1 was away (exit code 137)");
	json_decref(o);
}

/* A session's history keeps at most MGR_SESSION_NOTES_MAX lines without a
 * change of status, the last saying so; status changes are always kept. */
TEST(a_history_keeps_a_bounded_number_of_notes)
{
	char id[STORE_ID_MAX];
	if (!RUNNING_SESSION(&alice, "noisy", NULL, id))
		return;
	json_t *o = get(&alice, "noisy");
	int hist = history_len(o);
	json_decref(o);
	for (int i = 0; i < MGR_SESSION_NOTES_MAX + 30; i++) {
		pthread_mutex_lock(&mgr->mu);
		struct msession *s = mgr_find_session(mgr, id);
		if (s)
			mgr_session_note(mgr, s, "note %d", i);
		pthread_mutex_unlock(&mgr->mu);
	}
	o = get(&alice, "noisy");
	CHECK_INT(history_len(o), hist + MGR_SESSION_NOTES_MAX);
	CHECK_STR(str(o, "status_info"), "note 49");
	json_t *last = json_array_get(json_object_get(o, "status_history"), (size_t)hist + MGR_SESSION_NOTES_MAX - 1);
	CHECK_STR(str(last, "info"), "note 19 (the last such line this history keeps)");
	json_decref(o);
	json_t *d = NULL;
	struct terr err = {0};
	CHECK_INT(mgr_session_delete(mgr, &alice, "noisy", &d, &err), 0);
	json_decref(d);
	WAIT_STATUS(id, "TERMINATED");
	o = get(&alice, id);
	CHECK_INT(history_len(o), hist + MGR_SESSION_NOTES_MAX + 2);   /* TERMINATING, TERMINATED */
	json_decref(o);
}

TEST(removed_error_sessions_leave_the_list)
{
	struct terr err;
	json_t *arr = create(&alice, request("broken:1", "broken-2", 1, 100, 0), &err);
	CHECK(arr != NULL);
	json_decref(arr);
	WAIT_STATUS("broken-2", "ERROR");
	bool listed = false;
	json_t *list = mgr_sessions_list(mgr, &alice, false);
	for (size_t i = 0; i < json_array_size(list); i++)
		listed = listed || !strcmp(str(json_array_get(list, i), "name"), "broken-2");
	json_decref(list);
	CHECK(listed);
	json_t *d = NULL;
	CHECK_INT(mgr_session_delete(mgr, &alice, "broken-2", &d, &err), 0);
	CHECK_STR(str(d, "status"), "ERROR");
	json_decref(d);
	listed = false;
	list = mgr_sessions_list(mgr, &alice, false);
	for (size_t i = 0; i < json_array_size(list); i++)
		listed = listed || !strcmp(str(json_array_get(list, i), "name"), "broken-2");
	json_decref(list);
	CHECK(!listed);
	listed = false;
	list = mgr_sessions_list(mgr, &alice, true);
	for (size_t i = 0; i < json_array_size(list); i++)
		listed = listed || !strcmp(str(json_array_get(list, i), "name"), "broken-2");
	json_decref(list);
	CHECK(listed);
}

static void remove_tree(const char *dir)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}


/* ---------- live usage (usage.c) ---------- */

/* A round of the fake agent's samples: {"event":"stats","samples":[...],
 * "node":{...}} with one sample of session id (CPU percent pct, an app
 * connection or none, one GPU figure when gpu_util >= -1: -1 unknown). */
static void stats_round(const char *agent, const char *id, double pct, int conns, double gpu_util)
{
	char cid[RT_ID_MAX];
	snprintf(cid, sizeof(cid), "fake-%.20s", id);
	json_t *gpus = json_array();
	if (gpu_util >= -1)
		json_array_append_new(gpus, json_pack("{s:s,s:o,s:I,s:I}", "uuid", "GPU-fake-0", "util_pct",
						      gpu_util >= 0 ? json_real(gpu_util) : json_null(), "mem_bytes",
						      (json_int_t)GiB, "mem_limit_bytes", (json_int_t)(8 * GiB)));
	json_t *ev = json_pack("{s:s,s:i,s:[{s:s,s:s,s:f,s:f,s:I,s:I,s:o,s:I,s:I,s:I,s:I,s:i}],"
			       "s:{s:f,s:I,s:[{s:s,s:f,s:I}]}}",
			       "event", "stats", "period_ms", 500, "samples", "session_id", id, "container_id", cid,
			       "cpu_cores", pct / 1000.0, "cpu_pct", pct, "mem_bytes", (json_int_t)(64 << 20),
			       "mem_limit_bytes", (json_int_t)(256 << 20), "gpus", gpus, "net_rx_bytes", (json_int_t)10,
			       "net_tx_bytes", (json_int_t)20, "blk_read_bytes", (json_int_t)30, "blk_write_bytes",
			       (json_int_t)40, "app_conns", conns,
			       "node", "cpu_cores", 1.5, "mem_bytes", (json_int_t)(1 * GiB), "gpus", "uuid", "GPU-fake-0",
			       "util_pct", 42.0, "mem_used_bytes", (json_int_t)(3 * GiB));
	mgr_agent_event(mgr, agent, ev);
	json_decref(ev);
}

static json_t *stats_of(const char *ref, int64_t since)
{
	json_t *o = NULL;
	struct terr err = {0};
	if (mgr_session_stats(mgr, &alice, ref, since, &o, &err) < 0)
		FAILF("stats of %s: %s", ref, err.msg);
	return o;
}

/* ---------- the event stream ---------- */

/* The next message of u's stream (parsed), NULL when none came in wait_s. */
static json_t *stream_next(const struct user_rec *u, struct mgr_stream *st, int wait_s)
{
	char *body = NULL;
	size_t len = 0;
	testlib_checks++;
	int rc = mgr_stream_next(mgr, u, st, wait_s, &body, &len);
	if (rc < 0) {
		FAILF("mgr_stream_next: %s", strerror(-rc));
		return NULL;
	}
	json_t *o = body ? json_loadb(body, len, 0, NULL) : NULL;
	if (body && !json_is_object(o))
		FAILF("a stream message that is not a JSON object: %.200s", body);
	free(body);
	return o;
}

/* A stream's view: each message's parts replace the view's. */
static void view_apply(json_t *view, json_t *msg)
{
	const char *k;
	json_t *v;
	json_object_foreach(msg, k, v)
		json_object_set(view, k, v);
}

/* The view agrees with JSON built afresh: the sessions with the list's,
 * the nodes with GET /v1/nodes's (for a user without the live figures). */
static void check_view_fresh(const struct user_rec *u, json_t *view, int line)
{
	json_t *sessions = mgr_sessions_list(mgr, u, false);
	json_t *nodes = mgr_nodes_list(mgr);
	size_t i;
	json_t *n, *g;
	json_array_foreach(nodes, i, n) {
		if (u->is_admin)
			continue;
		json_object_del(n, "usage");
		json_object_del(n, "last_heartbeat");
		size_t j;
		json_array_foreach(json_object_get(n, "gpus"), j, g) {
			json_object_del(g, "util_pct");
			json_object_del(g, "mem_used_bytes");
		}
	}
	testlib_checks += 2;
	json_t *pairs[2][2] = {{json_object_get(view, "sessions"), sessions}, {json_object_get(view, "nodes"), nodes}};
	for (int k = 0; k < 2; k++)
		if (!json_equal(pairs[k][0], pairs[k][1])) {
			char *a = json_dumps(pairs[k][0], JSON_COMPACT), *b = json_dumps(pairs[k][1], JSON_COMPACT);
			FAILF("line %d: the stream's %s differ from fresh ones:\n stream %s\n fresh  %s", line,
			      k ? "nodes" : "sessions", a, b);
			free(a);
			free(b);
		}
	json_decref(sessions);
	json_decref(nodes);
}
#define CHECK_VIEW_FRESH(u, view) check_view_fresh((u), (view), __LINE__)

/* Reads u's stream until it has been quiet for a second (the dispatch
 * workers' changes after a create are over). */
static void stream_drain(const struct user_rec *u, struct mgr_stream *st, json_t *view)
{
	json_t *msg;
	for (int i = 0; i < 100 && (msg = stream_next(u, st, 1)); i++) {
		view_apply(view, msg);
		json_decref(msg);
	}
}

static json_t *session_in(json_t *sessions, const char *name)
{
	size_t i;
	json_t *s;
	json_array_foreach(sessions, i, s)
		if (!strcmp(str(s, "name"), name))
			return s;
	return NULL;
}

TEST(change_stream)
{
	struct user_rec root = alice;
	root.is_admin = true;
	const struct user_rec *users[] = {&alice, &bob, &root};
	struct mgr_stream st[3];
	json_t *view[3];
	for (int k = 0; k < 3; k++) {
		memset(&st[k], 0, sizeof(st[k]));
		st[k].seen = MGR_STATE_UNSEEN;
		view[k] = json_object();
	}
	/* The first message at once, with both parts. */
	json_t *msg = stream_next(&alice, &st[0], 5);
	CHECK(msg != NULL);
	CHECK(st[0].seen != MGR_STATE_UNSEEN);
	/* listed sessions only: q-2, q-3 and the ERROR one */
	CHECK_INT(json_array_size(json_object_get(msg, "sessions")), 3);
	CHECK_INT(json_array_size(json_object_get(msg, "nodes")), 1);
	/* a user's nodes without their live figures */
	CHECK(json_object_get(json_array_get(json_object_get(msg, "nodes"), 0), "last_heartbeat") == NULL);
	view_apply(view[0], msg);
	json_decref(msg);
	CHECK_VIEW_FRESH(&alice, view[0]);
	/* bob's view has none of them; an admin's has all, and the heartbeat */
	msg = stream_next(&bob, &st[1], 5);
	CHECK_INT(json_array_size(json_object_get(msg, "sessions")), 0);
	view_apply(view[1], msg);
	json_decref(msg);
	msg = stream_next(&root, &st[2], 5);
	CHECK(json_array_size(json_object_get(msg, "sessions")) >= 3);
	CHECK(json_object_get(json_array_get(json_object_get(msg, "nodes"), 0), "last_heartbeat") != NULL);
	view_apply(view[2], msg);
	json_decref(msg);
	CHECK_VIEW_FRESH(&bob, view[1]);
	CHECK_VIEW_FRESH(&root, view[2]);

	/* a change wakes a waiting reader with the new state */
	struct terr err;
	json_t *arr = create(&alice, request("busybox:latest", "late", 1, 100, 0), &err);
	CHECK(arr != NULL);
	json_decref(arr);
	msg = stream_next(&alice, &st[0], 5);
	CHECK(msg != NULL && session_in(json_object_get(msg, "sessions"), "late") != NULL);
	view_apply(view[0], msg);
	json_decref(msg);
	WAIT_STATUS("late", "RUNNING");
	CHECK_USED(2100, 2000, 3);
	for (int k = 0; k < 3; k++) {
		stream_drain(users[k], &st[k], view[k]);
		CHECK_VIEW_FRESH(users[k], view[k]);
	}
	json_t *late = session_in(json_object_get(view[0], "sessions"), "late");
	CHECK(late != NULL && !strcmp(str(late, "status"), "RUNNING"));

	/* A stats round of alice's session: news for alice (its usage, not
	 * the nodes' view) and for an admin (both); bob sees nothing of it
	 * and is sent nothing. */
	char id[STORE_ID_MAX];
	id_of("late", id);
	stats_round("fake-1", id, 37.0, 0, -2);
	msg = stream_next(&bob, &st[1], 1);
	CHECK(msg == NULL);
	json_decref(msg);
	msg = stream_next(&alice, &st[0], 5);
	CHECK(msg != NULL && json_object_get(msg, "sessions") != NULL && json_object_get(msg, "nodes") == NULL);
	late = session_in(json_object_get(msg, "sessions"), "late");
	CHECK(late != NULL && json_number_value(json_object_get(json_object_get(late, "usage"), "cpu_pct")) == 37.0);
	view_apply(view[0], msg);
	json_decref(msg);
	msg = stream_next(&root, &st[2], 5);
	CHECK(msg != NULL && json_object_get(msg, "sessions") != NULL && json_object_get(msg, "nodes") != NULL);
	CHECK(json_object_get(json_array_get(json_object_get(msg, "nodes"), 0), "usage") != NULL);
	view_apply(view[2], msg);
	json_decref(msg);
	CHECK_VIEW_FRESH(&alice, view[0]);
	CHECK_VIEW_FRESH(&root, view[2]);
	/* ... and after it, alice has nothing new either */
	msg = stream_next(&alice, &st[0], 1);
	CHECK(msg == NULL);
	json_decref(msg);
	for (int k = 0; k < 3; k++) {
		mgr_stream_free(&st[k]);
		json_decref(view[k]);
	}
}

/* ---------- the start's breakdown ---------- */

TEST(start_breakdown_from_the_history)
{
	/* Before it ran: none. */
	struct history_rec h[] = {
		{.status = SS_PENDING, .info = "created", .at_ms = 1000},
		{.status = SS_SCHEDULED, .info = "placed on node n1", .at_ms = 1040},
		{.status = SS_PREPARING, .info = "creating the container on node n1", .at_ms = 1045},
		{.status = SS_PREPARING, .info = "pulling img from the registry onto node n1", .at_ms = 1050},
		{.status = SS_PREPARING, .info = "pulled img; creating the container on node n1", .at_ms = 3050},
		{.status = SS_RUNNING, .info = "running on node n1", .at_ms = 3500},
		{.status = SS_LOST, .info = "node n1 lost", .at_ms = 9000},
		{.status = SS_RUNNING, .info = "re-adopted", .at_ms = 9500},
	};
	json_t *b = mgr_start_breakdown(h, 3);
	CHECK(json_is_null(b));
	json_decref(b);
	/* The first start only; the pull apart from the container. */
	b = mgr_start_breakdown(h, sizeof(h) / sizeof(h[0]));
	char *text = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	CHECK_STR(text, "{\"phases\":[{\"ms\":40,\"phase\":\"queue\"},{\"ms\":5,\"phase\":\"dispatch\"},"
			"{\"ms\":455,\"phase\":\"container\"},{\"ms\":2000,\"phase\":\"image\"}],"
			"\"total_ms\":2500}");
	free(text);
	json_decref(b);
	/* The node said where its time went: the container phase split at
	 * the lines dispatch.c writes from its times. */
	struct history_rec timed[] = {
		{.status = SS_PENDING, .info = "created", .at_ms = 1000},
		{.status = SS_SCHEDULED, .info = "placed on node n1", .at_ms = 1002},
		{.status = SS_PREPARING, .info = "creating the container on node n1", .at_ms = 1003},
		{.status = SS_PREPARING, .info = MGR_LINE_CREATED "n1 (image 0 ms, network 0 ms, Docker's create 20 ms)",
		 .at_ms = 1030},
		{.status = SS_PREPARING, .info = MGR_LINE_STARTED "n1 (Docker's start 300 ms)", .at_ms = 1330},
		{.status = SS_RUNNING, .info = "running on node n1", .at_ms = 1332},
	};
	b = mgr_start_breakdown(timed, sizeof(timed) / sizeof(timed[0]));
	text = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	CHECK_STR(text, "{\"phases\":[{\"ms\":2,\"phase\":\"queue\"},{\"ms\":1,\"phase\":\"dispatch\"},"
			"{\"ms\":27,\"phase\":\"create\"},{\"ms\":300,\"phase\":\"start\"},"
			"{\"ms\":2,\"phase\":\"app port\"}],\"total_ms\":332}");
	free(text);
	json_decref(b);
	/* A session that ran: its answer has the breakdown, its list entry not. */
	json_t *o = get(&alice, "late");
	json_t *sb = json_object_get(o, "start_breakdown");
	CHECK(json_is_object(sb));
	CHECK_STR(str(json_array_get(json_object_get(sb, "phases"), 0), "phase"), "queue");
	/* Its node timed the start: the container phase comes split. */
	bool split = false;
	size_t k;
	json_t *ph;
	json_array_foreach(json_object_get(sb, "phases"), k, ph)
		split = split || !strcmp(str(ph, "phase"), "start");
	CHECK(split);
	json_int_t sum = 0;
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(sb, "phases"), i, p)
		sum += json_integer_value(json_object_get(p, "ms"));
	CHECK_INT((int)sum, (int)json_integer_value(json_object_get(sb, "total_ms")));
	json_decref(o);
}

TEST(usage_samples_history_and_the_idle_policy)
{
	struct terr err;
	/* The GPU free: the earlier tests' sessions go. */
	const struct user_rec *users[] = {&alice, &bob};
	for (int k = 0; k < 2; k++) {
		json_t *list = mgr_sessions_list(mgr, users[k], false);
		for (size_t i = 0; i < json_array_size(list); i++) {
			json_t *d = NULL;
			if (mgr_session_delete(mgr, users[k], str(json_array_get(list, i), "id"), &d, &err) == 0)
				json_decref(d);
		}
		json_decref(list);
	}
	bool free_gpu = false;
	for (int waited = 0; waited < WAIT_MS && !free_gpu; waited += 5) {
		json_t *n = node();
		free_gpu = json_number_value(json_object_get(json_array_get(json_object_get(n, "gpus"), 0), "fgpu_used")) == 0;
		json_decref(n);
		if (!free_gpu)
			usleep(5000);
	}
	CHECK(free_gpu);
	json_t *arr = create(&alice, request("busybox:latest", "gpuuse", 1, 100, 500), &err);
	CHECK(arr != NULL);
	json_decref(arr);
	if (!WAIT_STATUS("gpuuse", "RUNNING")) {
		json_t *w = get(&alice, "gpuuse");
		FAILF("waits: %s", w ? str(w, "status_info") : "?");
		json_decref(w);
		return;
	}
	char id[STORE_ID_MAX];
	id_of("gpuuse", id);
	/* No sample yet: no usage, current null, an empty history. */
	json_t *o = get(&alice, "gpuuse");
	CHECK(json_object_get(o, "usage") == NULL);
	CHECK(json_object_get(o, "idle") == NULL);   /* no policy with a timeout */
	json_decref(o);
	o = stats_of("gpuuse", 0);
	CHECK(json_is_null(json_object_get(o, "current")));
	CHECK_INT((int)json_array_size(json_object_get(o, "history")), 0);
	CHECK_INT((int)json_integer_value(json_object_get(o, "retention_s")), 3600);
	json_decref(o);

	for (int i = 0; i < 3; i++) {
		stats_round("fake-1", id, 50.0, 0, 25.0);
		usleep(2000);   /* the manager's clock stamps them: distinct times */
	}
	o = stats_of("gpuuse", 0);
	json_t *cur = json_object_get(o, "current");
	CHECK_INT((int)json_array_size(json_object_get(o, "history")), 3);
	CHECK_INT((int)json_integer_value(json_object_get(o, "period_ms")), 500);
	CHECK_STR(str(o, "session"), "gpuuse");
	CHECK(json_number_value(json_object_get(cur, "cpu_pct")) == 50.0);
	CHECK_INT((int)json_integer_value(json_object_get(cur, "mem_limit_bytes")), 256 << 20);
	CHECK_INT((int)json_integer_value(json_object_get(cur, "blk_write_bytes")), 40);
	json_t *g = json_array_get(json_object_get(cur, "gpus"), 0);
	CHECK_STR(str(g, "uuid"), "GPU-fake-0");
	CHECK_INT((int)json_integer_value(json_object_get(g, "index")), 0);
	CHECK(json_number_value(json_object_get(g, "share")) == 0.5);   /* its allocation, from the manager */
	CHECK(json_number_value(json_object_get(g, "util_pct")) == 25.0);
	/* since: only what is newer. */
	int64_t t1 = json_integer_value(json_object_get(json_array_get(json_object_get(o, "history"), 0), "t"));
	json_decref(o);
	o = stats_of("gpuuse", t1);
	CHECK_INT((int)json_array_size(json_object_get(o, "history")), 2);
	json_decref(o);
	/* The summary on the session and the node's live figures. */
	o = get(&alice, "gpuuse");
	json_t *u = json_object_get(o, "usage");
	CHECK(json_number_value(json_object_get(u, "cpu_pct")) == 50.0);
	CHECK(json_number_value(json_object_get(u, "mem_pct")) == 25.0);
	CHECK(json_number_value(json_object_get(u, "gpu_pct")) == 25.0);
	json_decref(o);
	json_t *n = node();
	CHECK(json_number_value(json_object_get(json_object_get(n, "usage"), "cpu_cores")) == 1.5);
	json_t *ng = json_array_get(json_object_get(n, "gpus"), 0);
	CHECK(json_number_value(json_object_get(ng, "util_pct")) == 42.0);
	CHECK_INT((int)(json_integer_value(json_object_get(ng, "mem_used_bytes")) / GiB), 3);
	json_decref(n);
	/* Another agent cannot speak for it; a bad sample is dropped. */
	stats_round("elsewhere", id, 99.0, 0, 99.0);
	json_t *bad = json_pack("{s:s,s:[{s:s,s:f,s:f}]}", "event", "stats", "samples", "session_id", id,
				"cpu_cores", -1.0, "cpu_pct", 5.0);
	mgr_agent_event(mgr, "fake-1", bad);
	json_decref(bad);
	o = stats_of("gpuuse", 0);
	CHECK_INT((int)json_array_size(json_object_get(o, "history")), 3);
	json_decref(o);

	/* The idle policy: 1 s under 5 %, no app connection, no exec. */
	json_t *settings = NULL;
	json_t *pol = json_pack("{s:i,s:i}", "idle_timeout_s", 1, "idle_cpu_pct", 5);
	CHECK_INT(mgr_config_set(mgr, "policy.default", pol, &settings, &err), 0);
	json_decref(pol);
	json_decref(settings);
	o = get(&alice, "gpuuse");
	CHECK_INT((int)json_integer_value(json_object_get(json_object_get(o, "idle"), "timeout_s")), 1);
	CHECK(json_is_null(json_object_get(json_object_get(o, "idle"), "deadline")));
	json_decref(o);
	/* Busy GPU, an app connection, an unknown GPU figure: never idle. */
	stats_round("fake-1", id, 1.0, 0, 25.0);
	stats_round("fake-1", id, 1.0, 1, 0.0);
	stats_round("fake-1", id, 1.0, 0, -1);
	o = get(&alice, "gpuuse");
	CHECK(json_is_null(json_object_get(json_object_get(o, "idle"), "deadline")));
	json_decref(o);
	/* Idle: a deadline, then the end, saying why. */
	stats_round("fake-1", id, 1.0, 0, 0.0);
	o = get(&alice, "gpuuse");
	CHECK(json_is_integer(json_object_get(json_object_get(o, "idle"), "deadline")));
	json_decref(o);
	bool ended = false;
	for (int waited = 0; waited < WAIT_MS && !ended; waited += 50) {
		usleep(50000);
		stats_round("fake-1", id, 1.0, 0, 0.0);
		o = get(&alice, "gpuuse");
		ended = strcmp(str(o, "status"), "RUNNING") != 0;
		json_decref(o);
	}
	CHECK(ended);
	WAIT_STATUS("gpuuse", "TERMINATED");
	o = get(&alice, "gpuuse");
	CHECK_STR(str(o, "status_info"), "terminated: idle for 1 s: no app connection, no exec, CPU under 5 %, "
		  "GPU under the same; container removed");
	CHECK(json_object_get(o, "usage") == NULL);
	json_decref(o);
	/* Its history stays for the detail page; current is gone. */
	o = stats_of("gpuuse", 0);
	CHECK(json_is_null(json_object_get(o, "current")));
	CHECK(json_array_size(json_object_get(o, "history")) >= 3);
	json_decref(o);
	settings = NULL;
	pol = json_object();
	CHECK_INT(mgr_config_set(mgr, "policy.default", pol, &settings, &err), 0);
	json_decref(pol);
	json_decref(settings);
	/* Bad policy values are refused in words. */
	pol = json_pack("{s:f}", "idle_cpu_pct", 2.5);
	CHECK(mgr_config_set(mgr, "policy.default", pol, NULL, &err) < 0);
	CHECK_CONTAINS(err.msg, "idle_cpu_pct must be a whole percent from 0 to 100");
	json_decref(pol);
	CHECK(mgr_session_stats(mgr, &bob, id, 0, &o, &err) < 0);   /* not bob's */
	CHECK_INT(err.code, ENOENT);
}


/* ---------- a node LOST and back ---------- */

/* A second, remote node (so it can be LOST) with 32 CPU and no GPU:
 * sessions asking for more CPU than fake-1 has land there. `containers`
 * taken, as at registration. */
static int register_far(json_t *containers, struct terr *err)
{
	json_t *desc = json_pack("{s:s,s:s,s:{s:I,s:I},s:o,s:[]}", "id", "fake-far", "version", "test", "capacity",
				 "cpu_milli", (json_int_t)32000, "mem", (json_int_t)(8 * GiB), "containers", containers,
				 "gpus");
	memset(err, 0, sizeof(*err));
	int rc = mgr_agent_register(mgr, desc, &fake_link, NULL, false, NULL, err);
	json_decref(desc);
	return rc;
}

/* fake-far's heartbeats stop: its last one is made older than the limit
 * and the safety pass runs, so nothing here waits on a clock. */
static void far_goes_silent(void)
{
	pthread_mutex_lock(&mgr->mu);
	struct magent *a = mgr_find_agent(mgr, "fake-far");
	if (a)
		a->last_seen_mono -= 3600 * 1000;
	mgr_mark_lost_agents(mgr);
	pthread_mutex_unlock(&mgr->mu);
}

/* fake-far's containers as the fake runs them, as a registration lists them. */
static json_t *far_containers(const char *only_sid)
{
	json_t *arr = json_array();
	pthread_mutex_lock(&fake.mu);
	json_t *cid = json_object_get(fake.containers, only_sid);
	if (cid)
		json_array_append_new(arr, json_pack("{s:s,s:O,s:b}", "session_id", only_sid, "container_id", cid,
						     "running", true));
	pthread_mutex_unlock(&fake.mu);
	return arr;
}

static double far_used_cpu(void)
{
	json_t *nodes = mgr_nodes_list(mgr);
	double cpu = -1;
	size_t i;
	json_t *n;
	json_array_foreach(nodes, i, n)
		if (!strcmp(str(n, "id"), "fake-far"))
			cpu = json_number_value(json_object_get(json_object_get(n, "used"), "cpu"));
	json_decref(nodes);
	return cpu;
}

static const char *last_history_info(json_t *o)
{
	json_t *h = json_object_get(o, "status_history");
	return str(json_array_get(h, json_array_size(h) - 1), "info");
}

TEST(sessions_of_a_lost_node)
{
	struct terr err;
	CHECK_INT(register_far(json_array(), &err), 0);
	json_t *arr = create(&alice, request("busybox:latest", "far", 1, 16000, 0), &err);
	CHECK(arr != NULL);
	json_decref(arr);
	if (!WAIT_STATUS("far", "RUNNING"))
		return;
	char sid[STORE_ID_MAX];
	id_of("far", sid);
	json_t *o = get(&alice, "far");
	CHECK_STR(str(o, "agent"), "fake-far");
	char cid[RT_ID_MAX];
	util_strlcpy(cid, str(o, "container_id") ?: "", sizeof(cid));
	json_decref(o);

	/* The node stops answering: its RUNNING session is LOST and still
	 * holds its share (the container may well run on). */
	far_goes_silent();
	o = get(&alice, "far");
	CHECK_STR(str(o, "status"), "LOST");
	CHECK_CONTAINS(str(o, "status_info"), "node fake-far lost: no heartbeat for");
	json_decref(o);
	CHECK(far_used_cpu() == 16.0);
	char *metrics = mgr_metrics_text(mgr);
	CHECK_CONTAINS(metrics, "tessera_sessions{status=\"LOST\"} 1");
	free(metrics);
	/* its heartbeats are refused until it registers again */
	json_t *reply = NULL;
	memset(&err, 0, sizeof(err));
	CHECK_INT(mgr_agent_heartbeat(mgr, "fake-far", NULL, &reply, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "register again");
	/* nothing new is placed on it meanwhile: a second such session waits */
	arr = create(&alice, request("busybox:latest", "far-wait", 1, 16000, 0), &err);
	CHECK(arr != NULL);
	json_decref(arr);
	WAIT_STATUS("far-wait", "PENDING");

	/* It comes back with the container: re-adopted RUNNING, same container. */
	CHECK_INT(register_far(far_containers(sid), &err), 0);
	o = get(&alice, "far");
	CHECK_STR(str(o, "status"), "RUNNING");
	CHECK_STR(str(o, "container_id"), cid);
	CHECK_CONTAINS(last_history_info(o), "re-adopted");
	json_decref(o);
	WAIT_STATUS("far-wait", "RUNNING");
	CHECK(far_used_cpu() == 32.0);
	struct terr derr = {0};
	json_t *gone = NULL;
	CHECK_INT(mgr_session_delete(mgr, &alice, "far-wait", &gone, &derr), 0);
	json_decref(gone);
	WAIT_STATUS("far-wait", "TERMINATED");

	/* LOST again, and the manager restarts meanwhile: still LOST after it. */
	far_goes_silent();
	WAIT_STATUS("far", "LOST");
	manager_close(mgr);
	mgr = open_manager();
	if (!mgr)
		return;
	o = get(&alice, "far");
	CHECK_STR(str(o, "status"), "LOST");
	json_decref(o);
	CHECK_INT(register_far(far_containers(sid), &err), 0);
	o = get(&alice, "far");
	CHECK_STR(str(o, "status"), "RUNNING");
	CHECK_STR(str(o, "container_id"), cid);
	json_decref(o);

	/* LOST, then back without the container: ended as a container that
	 * vanished while its node was away, and its share is free. */
	far_goes_silent();
	WAIT_STATUS("far", "LOST");
	CHECK_INT(register_far(json_array(), &err), 0);
	o = get(&alice, "far");
	CHECK_STR(str(o, "status"), "ERROR");
	CHECK_CONTAINS(str(o, "status_info"), "vanished while node fake-far was away");
	json_decref(o);
	CHECK(far_used_cpu() == 0.0);
}

int main(void)
{
	log_set_level(LOG_WARN);
	if (!mkdtemp(data_dir)) {
		perror("mkdtemp");
		return 1;
	}
	fake.containers = json_object();
	mgr = open_manager();
	if (!mgr || make_user("alice@example.org", &alice) < 0 || make_user("bob@example.org", &bob) < 0)
		return testlib_done();
	RUN_KEPT(refused_without_a_node);
	RUN_KEPT(register_and_settings);
	RUN_KEPT(placement_check);
	RUN_KEPT(two_running_one_pending);
	RUN_KEPT(other_users);
	RUN_KEPT(exec_and_logs);
	RUN_KEPT(delete_advances_the_queue);
	RUN_KEPT(delete_pending);
	RUN_KEPT(queue_positions_history_and_moves);
	RUN_KEPT(failed_start);
	RUN_KEPT(cluster_sessions);
	RUN_KEPT(cluster_ssh_key);
	RUN_KEPT(change_stream);
	RUN_KEPT(start_breakdown_from_the_history);
	RUN_KEPT(restart_keeps_sessions);
	RUN_KEPT(names_resolve_among_the_callers_own);
	RUN_KEPT(batch_sessions_end_with_their_command);
	RUN_KEPT(oom_kills_are_reported_and_the_session_stays);
	RUN_KEPT(a_history_keeps_a_bounded_number_of_notes);
	RUN_KEPT(a_container_killed_while_away_says_so);
	RUN_KEPT(removed_error_sessions_leave_the_list);
	RUN_KEPT(root_needs_the_policy);
	RUN_KEPT(usage_samples_history_and_the_idle_policy);
	RUN_KEPT(sessions_of_a_lost_node);
	manager_close(mgr);
	json_decref(fake.last_spec);
	json_decref(fake.containers);
	remove_tree(data_dir);
	return testlib_done();
}
