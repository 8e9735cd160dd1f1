/* manager: private images and the cluster registry through the core
 * interface (core.h), on a real manager with one fake in-process agent
 * behind struct agent_link_ops (as test_sessions.c) and a fake registry
 * (a small HTTP server answering GET /v2/<name>/tags/list):
 *   - a commit's state machine: committing -> ready, or failed with the
 *     agent's reason; the labels asked for; the default name; who may;
 *   - the per-user limit max_private_images;
 *   - a private image is no image for another user (same words);
 *   - an image on no node but in the registry is placed, pulled before
 *     the start with its progress in status_info and a line in the
 *     history; a failed pull puts the session in ERROR with its message;
 *   - `image rm` of a private image gives its slot back (the catalog).
 *
 * Nothing here asserts on time: waits are bounded polls on the state. */
#include "manager/core.h"
#include "testlib.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "common/httpd.h"
#include "common/log.h"
#include "common/util.h"
#include "store/store.h"

#define WAIT_MS 20000

/* ---------- the fake agent ---------- */

static struct fake {
	pthread_mutex_t mu;
	json_t *images;        /* refs on the node */
	json_t *last_commit;   /* the last commit request */
	int pulls;
	char pull_info[512];   /* the session's status_info seen during a pull */
	json_t *containers;
} fake = {.mu = PTHREAD_MUTEX_INITIALIZER};

static struct manager *mgr;
static struct user_rec alice, bob, admin;

static bool fake_has(const char *ref)
{
	bool has = false;
	size_t i;
	json_t *v;
	pthread_mutex_lock(&fake.mu);
	json_array_foreach(fake.images, i, v)
		has = has || !strcmp(json_string_value(v), ref);
	pthread_mutex_unlock(&fake.mu);
	return has;
}

static int f_start(void *ctx, json_t *spec, char cid[RT_ID_MAX], char app_endpoint[AGENT_APP_ENDPOINT_MAX],
		   struct agent_start_times *times, struct terr *err)
{
	(void)times;
	(void)ctx;
	app_endpoint[0] = '\0';
	const char *image = json_string_value(json_object_get(spec, "image"));
	if (!fake_has(image))
		return terr_set(err, ENOENT, "no such image %s on the fake node", image);
	snprintf(cid, RT_ID_MAX, "c-%.20s", json_string_value(json_object_get(spec, "id")));
	return 0;
}

static int f_destroy(void *ctx, const char *sid, const char *cid, struct terr *err)
{
	(void)ctx;
	(void)sid;
	(void)cid;
	(void)err;
	return 0;
}

static int f_exec(void *ctx, const char *cid, json_t *command, int timeout_s, struct pump **out,
		  struct terr *err)
{
	(void)ctx, (void)cid, (void)command, (void)timeout_s, (void)out;
	return terr_set(err, ENOSYS, "not here");
}

static int f_logs(void *ctx, const char *cid, int tail, bool follow, struct pump **out, struct terr *err)
{
	(void)ctx, (void)cid, (void)tail, (void)follow, (void)out;
	return terr_set(err, ENOSYS, "not here");
}

static int f_image_exists(void *ctx, const char *ref, bool *exists, struct terr *err)
{
	(void)ctx;
	(void)err;
	*exists = fake_has(ref);
	return 0;
}

static int f_images(void *ctx, json_t **refs, struct terr *err)
{
	(void)ctx;
	(void)err;
	pthread_mutex_lock(&fake.mu);
	*refs = json_deep_copy(fake.images);
	pthread_mutex_unlock(&fake.mu);
	return 0;
}

/* A ref with "fail" in it fails as a full disk would. */
static int f_commit(void *ctx, json_t *req, json_t **result, struct terr *err)
{
	(void)ctx;
	const char *ref = json_string_value(json_object_get(req, "ref"));
	pthread_mutex_lock(&fake.mu);
	json_decref(fake.last_commit);
	fake.last_commit = json_deep_copy(req);
	pthread_mutex_unlock(&fake.mu);
	if (strstr(ref, "fail"))
		return terr_set(err, EIO, "commit container: write /var/lib/docker: no space left on device");
	pthread_mutex_lock(&fake.mu);
	json_array_append_new(fake.images, json_string(ref));
	pthread_mutex_unlock(&fake.mu);
	*result = json_pack("{s:s,s:b}", "ref", ref, "pushed", 1);
	return 0;
}

/* "shared:1" comes in two steps of progress; anything else is not in the
 * (fake) registry's storage. */
static int f_pull(void *ctx, const char *ref, const char *registry, const char *key, agent_progress_fn fn,
		  void *ud, struct terr *err)
{
	(void)ctx;
	pthread_mutex_lock(&fake.mu);
	fake.pulls++;
	pthread_mutex_unlock(&fake.mu);
	if (!registry || !*registry)
		return terr_set(err, EINVAL, "no registry given");
	if (strcmp(ref, "shared:1"))
		return terr_set(err, ENOENT, "pull image %s/%s: manifest unknown: manifest unknown", registry, ref);
	fn(ud, key, ref, 412000000, 980000000);
	/* Called without the manager's lock: the session can be read. */
	json_t *s = NULL;
	struct terr e = {0};
	if (mgr_session_get(mgr, &admin, key, -1, &s, &e) == 0) {
		pthread_mutex_lock(&fake.mu);
		util_strlcpy(fake.pull_info, json_string_value(json_object_get(s, "status_info")) ?: "",
			     sizeof(fake.pull_info));
		pthread_mutex_unlock(&fake.mu);
		json_decref(s);
	}
	fn(ud, key, ref, 980000000, 980000000);
	pthread_mutex_lock(&fake.mu);
	json_array_append_new(fake.images, json_string(ref));
	pthread_mutex_unlock(&fake.mu);
	return 0;
}

static int f_image_remove(void *ctx, const char *ref, struct terr *err)
{
	(void)ctx;
	size_t i;
	json_t *v;
	pthread_mutex_lock(&fake.mu);
	json_array_foreach(fake.images, i, v) {
		if (!strcmp(json_string_value(v), ref)) {
			json_array_remove(fake.images, i);
			pthread_mutex_unlock(&fake.mu);
			return 0;
		}
	}
	pthread_mutex_unlock(&fake.mu);
	return terr_set(err, ENOENT, "no such image: %s", ref);
}

static void f_release(void *ctx)
{
	(void)ctx;
}

static const struct agent_link_ops fake_link = {
	.name = "fake", .start = f_start, .destroy = f_destroy, .exec = f_exec, .logs = f_logs,
	.image_exists = f_image_exists, .images = f_images, .image_remove = f_image_remove, .commit = f_commit,
	.pull = f_pull,
	.release = f_release,
};

/* ---------- the fake registry ---------- */

/* Holds "shared:1" and "gone:1" (whose pull fails: its blobs are gone). */
static void reg_tags(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	const char *name = req->params[0];
	if (!strcmp(name, "shared") || !strcmp(name, "gone"))
		httpd_json(resp, 200, json_pack("{s:s,s:[s]}", "name", name, "tags", "1"));
	else
		httpd_error(resp, 404, "NAME_UNKNOWN", "repository name not known to registry");
}

static const struct httpd_route reg_routes[] = {
	{"GET", "/v2/{name}/tags/list", reg_tags, 0},
};

/* ---------- helpers ---------- */

static char data_dir[] = "/tmp/tessera-commits-XXXXXX";

static struct manager_config cfg;

/* The manager on data_dir, with the fake agent registered. */
static int open_manager(void)
{
	struct terr err = {0};
	if (manager_open(&mgr, &cfg, &err) < 0) {
		FAILF("manager_open: %s", err.msg);
		return -1;
	}
	json_t *desc = json_pack("{s:s,s:s,s:{s:I,s:I},s:[],s:[],s:b}", "id", "fake-1", "version", "test",
				 "capacity", "cpu_milli", (json_int_t)8000, "mem", (json_int_t)(8LL << 30),
				 "containers", "gpus", "mock_gpus", true);
	int rc = mgr_agent_register(mgr, desc, &fake_link, NULL, true, NULL, &err);
	json_decref(desc);
	if (rc < 0)
		FAILF("register: %s", err.msg);
	return rc;
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
	return rc;
}

static const char *str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static json_t *get(const struct user_rec *u, const char *ref)
{
	json_t *o = NULL;
	struct terr err = {0};
	if (mgr_session_get(mgr, u, ref, -1, &o, &err) < 0)
		return NULL;
	return o;
}

static bool wait_status(const struct user_rec *u, const char *ref, const char *status, int line)
{
	char last[32] = "(none)";
	for (int waited = 0; waited < WAIT_MS; waited += 5) {
		json_t *o = get(u, ref);
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
#define WAIT_STATUS(u, ref, st) wait_status((u), (ref), (st), __LINE__)

static int create(const struct user_rec *u, const char *image, const char *name, struct terr *err)
{
	struct create_request cr = {.image = image, .name = name, .count = 1,
				    .req = {.cpu_m = 1000, .mem = 256LL << 20}};
	json_t *arr = NULL;
	memset(err, 0, sizeof(*err));
	int rc = mgr_sessions_create(mgr, u, &cr, &arr, err);
	json_decref(arr);
	return rc;
}

/* Commits and waits for the result; the final commit JSON or NULL. */
static json_t *commit_wait(const struct user_rec *u, const char *session, const char *name, const char *tag,
			   struct terr *err)
{
	json_t *c = NULL;
	memset(err, 0, sizeof(*err));
	if (mgr_session_commit(mgr, u, session, name, tag, &c, err) < 0)
		return NULL;
	CHECK_STR(str(c, "status"), "committing");
	char id[64];
	util_strlcpy(id, str(c, "id"), sizeof(id));
	json_decref(c);
	c = NULL;
	if (mgr_commit_get(mgr, u, id, WAIT_MS / 1000, &c, err) < 0)
		return NULL;
	return c;
}

/* "tessera-private/<local part>-<12 hex of the id>/": where u's private
 * images live. */
static const char *ns_of(const struct user_rec *u)
{
	static char buf[4][128];
	static int k;
	char *b = buf[k++ % 4];
	snprintf(b, sizeof(buf[0]), "tessera-private/%.*s-%.12s/", (int)(strchr(u->email, '@') - u->email), u->email,
		 u->id);
	return b;
}

static bool starts_with(const char *s, const char *prefix)
{
	return s && !strncmp(s, prefix, strlen(prefix));
}

static const char *label(const char *key)
{
	return json_string_value(json_object_get(json_object_get(fake.last_commit, "labels"), key));
}

/* ---------- tests ---------- */

TEST(commit_becomes_ready)
{
	struct terr err;
	CHECK_INT(create(&alice, "busybox:latest", "work.1", &err), 0);
	WAIT_STATUS(&alice, "work.1", "RUNNING");
	json_t *s = get(&alice, "work.1");
	CHECK(json_is_null(json_object_get(s, "last_commit")));
	json_t *c = commit_wait(&alice, "work.1", NULL, NULL, &err);
	CHECK(c != NULL);
	CHECK_STR(str(c, "status"), "ready");
	/* The default name: the owner's namespace (local part and id) and
	 * the session's name, as Docker's grammar takes them; the tag is the
	 * time. */
	char want[256];
	snprintf(want, sizeof(want), "%swork-1:", ns_of(&alice));
	CHECK(starts_with(str(c, "ref"), want));
	CHECK_STR(str(c, "owner"), "alice@example.com");
	CHECK_STR(str(c, "visibility"), "private");
	CHECK(json_is_true(json_object_get(c, "in_registry")));
	CHECK_STR(str(fake.last_commit, "container_id"), str(s, "container_id"));
	CHECK_STR(str(fake.last_commit, "source_image"), "busybox:latest");
	CHECK_STR(label("tessera.owner"), alice.id);
	CHECK_STR(label("tessera.source.session"), str(s, "id"));
	CHECK_STR(label("tessera.source.image"), "busybox:latest");
	CHECK_STR(label("ai.backend.features"), "private");
	CHECK(label("tessera.committed") && strlen(label("tessera.committed")) >= 20);
	CHECK(str(fake.last_commit, "registry") && *str(fake.last_commit, "registry"));
	json_decref(s);
	/* session info shows it */
	s = get(&alice, "work.1");
	CHECK_STR(str(json_object_get(s, "last_commit"), "status"), "ready");
	CHECK_STR(str(json_object_get(s, "last_commit"), "ref"), str(c, "ref"));
	json_decref(s);
	/* ready images are the agents' to list: not in the commits' entries */
	json_t *l = mgr_commits_json(mgr, &alice);
	CHECK_INT(json_array_size(l), 0);
	json_decref(l);
	json_decref(c);
}

TEST(who_may_commit)
{
	struct terr err;
	json_t *c = NULL;
	CHECK_INT(create(&bob, "busybox:latest", "bobs", &err), 0);
	WAIT_STATUS(&bob, "bobs", "RUNNING");
	/* Another user: the session does not exist for them. */
	CHECK_INT(mgr_session_commit(mgr, &alice, "bobs", NULL, NULL, &c, &err), -ENOENT);
	/* An admin may (by id: a name is among the caller's own sessions);
	 * the image is the owner's. */
	CHECK_INT(mgr_session_commit(mgr, &admin, "bobs", NULL, NULL, &c, &err), -ENOENT);
	json_t *bs = get(&bob, "bobs");
	char bobs_id[64];
	util_strlcpy(bobs_id, str(bs, "id") ?: "", sizeof(bobs_id));
	json_decref(bs);
	c = commit_wait(&admin, bobs_id, NULL, "v1", &err);
	CHECK_STR(str(c, "status"), "ready");
	char want[256];
	snprintf(want, sizeof(want), "%sbobs:v1", ns_of(&bob));
	CHECK_STR(str(c, "ref"), want);
	CHECK_STR(str(c, "owner"), "bob@example.com");
	CHECK_STR(str(c, "committed_by"), admin.email);
	CHECK_STR(label("tessera.owner"), bob.id);
	json_decref(c);
	/* The same image twice is refused. */
	c = NULL;
	CHECK_INT(mgr_session_commit(mgr, &bob, "bobs", NULL, "v1", &c, &err), -EEXIST);
	/* A name goes under the owner's namespace, whoever commits: a public
	 * image's name ("busybox") names no public image then. */
	c = commit_wait(&admin, bobs_id, "busybox", "latest", &err);
	snprintf(want, sizeof(want), "%sbusybox:latest", ns_of(&bob));
	CHECK_STR(str(c, "ref"), want);
	CHECK_STR(str(fake.last_commit, "ref"), want);
	json_decref(c);
	/* ... and the full name in it is taken as it is. */
	snprintf(want, sizeof(want), "%sown", ns_of(&bob));
	c = commit_wait(&bob, "bobs", want, "v1", &err);
	CHECK_STR(str(c, "status"), "ready");
	CHECK(starts_with(str(c, "ref"), want));
	json_decref(c);
	c = NULL;
	/* Another user's namespace, or one of nobody, is refused. */
	snprintf(want, sizeof(want), "%swork-1", ns_of(&alice));
	CHECK_INT(mgr_session_commit(mgr, &bob, "bobs", want, "v9", &c, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "is not among the private images of bob@example.com");
	CHECK_CONTAINS(err.msg, ns_of(&bob));
	CHECK_INT(mgr_session_commit(mgr, &bob, "bobs", "tessera-private/bob/bobs", "v9", &c, &err), -EINVAL);
	CHECK_INT(mgr_session_commit(mgr, &admin, bobs_id, "tessera-private/admin/x", "v9", &c, &err), -EINVAL);
	/* Bad names and tags. */
	CHECK_INT(mgr_session_commit(mgr, &bob, "bobs", "Upper/Case", NULL, &c, &err), -EINVAL);
	CHECK_INT(mgr_session_commit(mgr, &bob, "bobs", "reg.example:5000/x", NULL, &c, &err), -EINVAL);
	CHECK_INT(mgr_session_commit(mgr, &bob, "bobs", "x:tag", NULL, &c, &err), -EINVAL);
	CHECK_INT(mgr_session_commit(mgr, &bob, "bobs", NULL, "-bad", &c, &err), -EINVAL);
	/* Only a RUNNING session. */
	json_t *d = NULL;
	CHECK_INT(mgr_session_delete(mgr, &bob, "bobs", &d, &err), 0);
	json_decref(d);
	WAIT_STATUS(&bob, "bobs", "TERMINATED");
	CHECK_INT(mgr_session_commit(mgr, &bob, "bobs", NULL, "v2", &c, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "only a RUNNING session");
}

TEST(commit_fails_with_the_reason)
{
	struct terr err;
	json_t *c = commit_wait(&alice, "work.1", "alice/fail", "x", &err);
	CHECK_STR(str(c, "status"), "failed");
	CHECK_CONTAINS(str(c, "error"), "no space left on device");
	json_decref(c);
	/* Listed for its owner and admins with its reason, not for others. */
	json_t *l = mgr_commits_json(mgr, &alice);
	CHECK_INT(json_array_size(l), 1);
	CHECK_STR(str(json_array_get(l, 0), "status"), "failed");
	char want[256];
	snprintf(want, sizeof(want), "%salice/fail:x", ns_of(&alice));
	CHECK_STR(str(json_array_get(l, 0), "ref"), want);
	json_decref(l);
	l = mgr_commits_json(mgr, &bob);
	CHECK_INT(json_array_size(l), 0);
	json_decref(l);
	l = mgr_commits_json(mgr, &admin);
	CHECK_INT(json_array_size(l), 1);
	json_decref(l);
	json_t *s = get(&alice, "work.1");
	CHECK_STR(str(json_object_get(s, "last_commit"), "status"), "failed");
	json_decref(s);
}

TEST(private_image_limit)
{
	struct terr err;
	json_t *v = json_pack("{s:i}", "max_private_images", 2);
	CHECK_INT(mgr_config_set(mgr, "policy.default", v, NULL, &err), 0);
	json_decref(v);
	/* alice has one ready image (the failed one does not count). */
	json_t *c = commit_wait(&alice, "work.1", NULL, "second", &err);
	CHECK_STR(str(c, "status"), "ready");
	json_decref(c);
	c = NULL;
	CHECK_INT(mgr_session_commit(mgr, &alice, "work.1", NULL, "third", &c, &err), -EPERM);
	CHECK_CONTAINS(err.msg, "max_private_images");
	CHECK_CONTAINS(err.msg, "has 2 private images");
	/* A user's own policy raises it. */
	v = json_pack("{s:i}", "max_private_images", 3);
	CHECK_INT(mgr_config_set(mgr, "policy.alice@example.com", v, NULL, &err), 0);
	json_decref(v);
	c = commit_wait(&alice, "work.1", NULL, "third", &err);
	CHECK_STR(str(c, "status"), "ready");
	/* A removed image no longer counts. */
	CHECK_INT(mgr_commit_forget(mgr, str(c, "ref")), 0);
	CHECK_INT(mgr_commit_forget(mgr, str(c, "ref")), -ENOENT);
	json_decref(c);
	v = json_pack("{s:i}", "max_private_images", -1);
	CHECK_INT(mgr_config_set(mgr, "policy.default", v, NULL, &err), -EINVAL);
	json_decref(v);
}

TEST(private_image_is_no_image_for_others)
{
	struct terr err, missing;
	json_t *s = get(&alice, "work.1");
	const char *ref = str(json_object_get(s, "last_commit"), "ref");
	CHECK(ref && fake_has(ref));
	/* bob: the words of an image that exists nowhere. */
	CHECK_INT(create(&bob, ref, "peek", &err), -EINVAL);
	CHECK_INT(create(&bob, "nosuch:1", "peek", &missing), -EINVAL);
	char expect[512];
	snprintf(expect, sizeof(expect), "image %s is not present on any node", ref);
	CHECK_CONTAINS(err.msg, expect);
	CHECK_CONTAINS(missing.msg, "image nosuch:1 is not present on any node");
	/* the owner launches it like any image */
	CHECK_INT(create(&alice, ref, "again", &err), 0);
	WAIT_STATUS(&alice, "again", "RUNNING");
	/* a pull of it is refused to bob in the same way as a missing one */
	json_t *p = NULL;
	CHECK_INT(mgr_image_pull(mgr, &bob, ref, NULL, &p, &err), -ENOENT);
	CHECK_INT(mgr_image_pull(mgr, &bob, "nosuch:1", NULL, &p, &missing), -ENOENT);
	json_decref(s);
}

TEST(pull_before_start)
{
	struct terr err;
	CHECK(!fake_has("shared:1"));
	CHECK_INT(create(&bob, "shared:1", "pulled", &err), 0);
	WAIT_STATUS(&bob, "pulled", "RUNNING");
	CHECK(fake_has("shared:1"));
	CHECK_STR(fake.pull_info, "pulling shared:1: 412 of 980 MB");
	json_t *s = get(&bob, "pulled");
	bool pulling = false;
	size_t i;
	json_t *h;
	json_array_foreach(json_object_get(s, "status_history"), i, h)
		pulling = pulling || (!strcmp(str(h, "status"), "PREPARING") && strstr(str(h, "info"), "pulling shared:1"));
	CHECK(pulling);
	json_decref(s);
	/* On the node now: the next start pulls nothing. */
	int pulls = fake.pulls;
	CHECK_INT(create(&bob, "shared:1", "pulled2", &err), 0);
	WAIT_STATUS(&bob, "pulled2", "RUNNING");
	CHECK_INT(fake.pulls, pulls);
}

TEST(failed_pull_is_an_error)
{
	struct terr err;
	CHECK_INT(create(&bob, "gone:1", "broken", &err), 0);
	WAIT_STATUS(&bob, "broken", "ERROR");
	json_t *s = get(&bob, "broken");
	CHECK_CONTAINS(str(s, "status_info"), "could not pull gone:1 from the registry");
	CHECK_CONTAINS(str(s, "status_info"), "manifest unknown");
	json_decref(s);
}

TEST(image_pull_job)
{
	struct terr err;
	json_t *p = NULL;
	CHECK_INT(mgr_image_pull(mgr, &bob, "gone:1", "fake-1", &p, &err), 0);
	char id[64];
	util_strlcpy(id, str(p, "id"), sizeof(id));
	json_decref(p);
	bool done = false;
	for (int waited = 0; waited < WAIT_MS && !done; waited += 5) {
		p = NULL;
		CHECK_INT(mgr_image_pull_get(mgr, &bob, id, &p, &err), 0);
		done = json_is_true(json_object_get(p, "done"));
		if (done) {
			json_t *n = json_array_get(json_object_get(p, "nodes"), 0);
			CHECK_STR(str(n, "node"), "fake-1");
			CHECK_STR(str(n, "status"), "failed");
			CHECK_CONTAINS(str(n, "error"), "manifest unknown");
		}
		json_decref(p);
		usleep(5000);
	}
	CHECK(done);
	CHECK_INT(mgr_image_pull_get(mgr, &alice, id, &p, &err), -ENOENT);
	CHECK_INT(mgr_image_pull(mgr, &bob, "shared:1", "nosuch-node", &p, &err), -ENOENT);
}

/* `image rm` of a private image (images.c) gives its slot back; the
 * catalog lists it as its owner's with what the commit knows, and to
 * another user it is missing there too. */
TEST(image_rm_frees_a_private_image_slot)
{
	struct terr err, missing;
	json_t *v = json_pack("{s:i}", "max_private_images", 2);
	CHECK_INT(mgr_config_set(mgr, "policy.alice@example.com", v, NULL, &err), 0);
	json_decref(v);
	json_t *c = NULL;
	CHECK_INT(mgr_session_commit(mgr, &alice, "work.1", NULL, "fourth", &c, &err), -EPERM);
	/* The first one (its tag a time): "second" runs as session "again". */
	json_t *l = mgr_images_list(mgr, &alice, false), *e, *found = NULL;
	mgr_commits_annotate(mgr, l);
	size_t i;
	char want[256];
	snprintf(want, sizeof(want), "%swork-1:2", ns_of(&alice));
	json_array_foreach(l, i, e)
		if (starts_with(str(e, "ref"), want))
			found = e;
	CHECK(found);
	char first[256];
	util_strlcpy(first, found ? str(found, "ref") : "", sizeof(first));
	CHECK(fake_has(first));
	CHECK_STR(str(found, "owner"), "alice@example.com");
	CHECK_STR(str(found, "visibility"), "private");
	CHECK_STR(str(found, "status"), "ready");
	CHECK(json_is_true(json_object_get(found, "in_registry")));
	CHECK_STR(str(found, "source_session"), "work.1");
	const char *at = str(found, "committed_at");   /* when it was made, an RFC 3339 time */
	CHECK(at && strlen(at) >= 20 && at[4] == '-' && at[strlen(at) - 1] == 'Z');
	json_decref(l);
	l = mgr_images_list(mgr, &bob, false);
	json_array_foreach(l, i, e)
		CHECK(strcmp(str(e, "ref"), first) != 0);
	json_decref(l);
	json_t *reply = NULL;
	char expect[512];
	snprintf(expect, sizeof(expect), "no image %s on any node", first);
	CHECK_INT(mgr_image_remove(mgr, &bob, first, &reply, &err), -ENOENT);
	CHECK_INT(mgr_image_remove(mgr, &bob, "nosuch:1", &reply, &missing), -ENOENT);
	CHECK_CONTAINS(err.msg, expect);
	CHECK_CONTAINS(missing.msg, "no image nosuch:1 on any node");
	CHECK_INT(mgr_image_remove(mgr, &alice, first, &reply, &err), 0);
	CHECK(!fake_has(first));
	json_decref(reply);
	c = commit_wait(&alice, "work.1", NULL, "fourth", &err);
	CHECK_STR(str(c, "status"), "ready");
	json_decref(c);
}

/* Before issue 27 a commit could take any name, and its record said
 * whose the image was where the image's labels did not. A record of such
 * a commit onto a public name ("busybox:latest", by bob) outlives the
 * admin's re-tag of the public image: the catalog must list that image
 * as public, and others must launch it. */
TEST(an_old_record_of_a_public_name_keeps_it_public)
{
	struct terr err = {0};
	manager_close(mgr);
	mgr = NULL;
	const struct store_ops *so = NULL;
	struct store *st = NULL;
	char where[256], *text = NULL;
	CHECK_INT(store_open(NULL, data_dir, &so, &st, where, sizeof(where), &err), 0);
	if (!st)
		return;
	CHECK_INT(so->kv_get(st, "commits", &text, &err), 0);
	json_t *arr = text ? json_loads(text, 0, NULL) : NULL;
	free(text);
	json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:b,s:I,s:I}", "id",
					     "0123456789abcdef0123456789abcdef", "ref", "busybox:latest", "owner_id",
					     bob.id, "session_id", "0", "session_name", "bobs", "source_image",
					     "busybox:latest", "agent_id", "fake-1", "by", "bob@example.com", "status",
					     "ready", "pushed", 0, "created_ms", (json_int_t)1, "finished_ms",
					     (json_int_t)2));
	text = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	CHECK_INT(so->kv_set(st, "commits", text ? text : "[]", &err), 0);
	free(text);
	so->close(st);
	if (open_manager() < 0)
		return;
	const struct user_rec *who[] = {&alice, &bob, &admin};
	for (size_t k = 0; k < 3; k++) {
		json_t *l = mgr_images_list(mgr, who[k], false), *e, *found = NULL;
		size_t i;
		json_array_foreach(l, i, e)
			if (!strcmp(str(e, "ref"), "busybox:latest"))
				found = e;
		CHECK(found != NULL);
		CHECK_STR(str(found, "visibility"), "public");
		CHECK(json_is_null(json_object_get(found, "owner")));
		json_decref(l);
	}
	CHECK_INT(create(&alice, "busybox:latest", "after-retag", &err), 0);
	WAIT_STATUS(&alice, "after-retag", "RUNNING");
}

int main(void)
{
	log_set_level(LOG_WARN);
	if (!mkdtemp(data_dir)) {
		perror("mkdtemp");
		return 1;
	}
	fake.images = json_pack("[s]", "busybox:latest");
	struct httpd *reg = NULL;
	struct terr err = {0};
	struct httpd_config hc = {.listen = "127.0.0.1:0", .routes = reg_routes, .n_routes = 1};
	if (httpd_start(&hc, &reg, &err) < 0) {
		fprintf(stderr, "fake registry: %s\n", err.msg);
		return 1;
	}
	char reg_url[64];
	snprintf(reg_url, sizeof(reg_url), "http://127.0.0.1:%d", httpd_port(reg));
	cfg = (struct manager_config){.data_dir = data_dir, .listen = "127.0.0.1:0", .dispatch_workers = 2,
				      .registry_url = reg_url};
	if (open_manager() < 0)
		return 1;
	if (make_user("alice@example.com", &alice) < 0 || make_user("bob@example.com", &bob) < 0)
		return 1;
	/* the first admin, made at first start */
	json_t *users = mgr_users_list(mgr);
	size_t i;
	json_t *u;
	json_array_foreach(users, i, u)
		if (json_is_true(json_object_get(u, "is_admin")))
			mgr_user_by_access_key(mgr, str(u, "access_key"), &admin);
	json_decref(users);
	CHECK(admin.is_admin);

	RUN(commit_becomes_ready);
	RUN(who_may_commit);
	RUN(commit_fails_with_the_reason);
	RUN(private_image_limit);
	RUN(private_image_is_no_image_for_others);
	RUN(pull_before_start);
	RUN(failed_pull_is_an_error);
	RUN(image_pull_job);
	RUN(image_rm_frees_a_private_image_slot);
	RUN(an_old_record_of_a_public_name_keeps_it_public);

	manager_close(mgr);
	httpd_stop(reg);
	json_decref(fake.images);
	json_decref(fake.last_commit);
	json_decref(fake.containers);
	util_remove_tree(data_dir);
	return testlib_done();
}
