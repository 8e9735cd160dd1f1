/* manager: the image catalog through the core interface (core.h) on a real
 * manager with one fake in-process agent whose images carry labels:
 * families, frameworks and minimums read from the labels, an image without
 * labels, one with bad labels (listed with a warning, no minimum), a
 * private image (tessera.owner) that only its owner and admins list and
 * launch while everyone else gets the error of a missing image, a hidden
 * one (ai.backend.features private), aliases kept across a restart, the
 * agent's images-changed event, and removal with its permissions. */
#include "manager/core.h"
#include "testlib.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#define GiB (1LL << 30)
#define MiB (1LL << 20)

static struct {
	pthread_mutex_t mu;
	json_t *images;        /* what the fake node holds */
	int removes;
	char removed[256];
} fake = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int f_start(void *ctx, json_t *spec, char cid[RT_ID_MAX], char app_endpoint[AGENT_APP_ENDPOINT_MAX],
		        struct agent_start_times *times, struct terr *err)
{
	(void)times;
	(void)ctx;
	snprintf(app_endpoint, AGENT_APP_ENDPOINT_MAX, "127.0.0.1:49999");
	(void)spec;
	(void)err;
	util_strlcpy(cid, "c0ffee", RT_ID_MAX);
	return 0;
}
static int f_destroy(void *ctx, const char *sid, const char *cid, struct terr *err)
{
	(void)ctx; (void)sid; (void)cid; (void)err;
	return 0;
}
static int f_exec(void *ctx, const char *cid, json_t *cmd, int t, struct pump **out, struct terr *err)
{
	(void)ctx; (void)cid; (void)cmd; (void)t; (void)out;
	return terr_set(err, ENOSYS, "fake");
}
static int f_logs(void *ctx, const char *cid, int tail, bool follow, struct pump **out, struct terr *err)
{
	(void)ctx; (void)cid; (void)tail; (void)follow; (void)out;
	return terr_set(err, ENOSYS, "fake");
}
static int f_image_exists(void *ctx, const char *ref, bool *exists, struct terr *err)
{
	(void)ctx; (void)ref; (void)err;
	*exists = false;
	return 0;
}
static int f_images(void *ctx, json_t **images, struct terr *err)
{
	(void)ctx;
	(void)err;
	pthread_mutex_lock(&fake.mu);
	*images = json_deep_copy(fake.images);
	pthread_mutex_unlock(&fake.mu);
	return 0;
}
static int f_image_remove(void *ctx, const char *ref, struct terr *err)
{
	(void)ctx;
	(void)err;
	pthread_mutex_lock(&fake.mu);
	fake.removes++;
	util_strlcpy(fake.removed, ref, sizeof(fake.removed));
	/* The node forgets every image with that tag. */
	size_t i;
	json_t *img;
	json_t *keep = json_array();
	json_array_foreach(fake.images, i, img) {
		const char *t = json_string_value(json_array_get(json_object_get(img, "tags"), 0));
		if (!t || strcmp(t, ref))
			json_array_append(keep, img);
	}
	json_decref(fake.images);
	fake.images = keep;
	pthread_mutex_unlock(&fake.mu);
	return 0;
}
static void f_release(void *ctx)
{
	(void)ctx;
}
static const struct agent_link_ops fake_link = {
	"fake", f_start, f_destroy, f_exec, f_logs, f_image_exists, f_images, f_image_remove, NULL, NULL,
	f_release,
};

static json_t *image(const char *tag, json_t *labels)
{
	return json_pack("{s:s,s:[s],s:I,s:o}", "id", "sha256:1", "tags", tag, "size", (json_int_t)123456789,
			 "labels", labels ? labels : json_object());
}

static char data_dir[] = "/tmp/tessera-images-XXXXXX";
static struct manager *mgr;
static struct user_rec alice, bob, root;

static struct manager *open_manager(void)
{
	struct manager_config cfg = {.data_dir = data_dir, .listen = "127.0.0.1:0", .dispatch_workers = 1};
	struct manager *m = NULL;
	struct terr err = {0};
	if (manager_open(&m, &cfg, &err) < 0)
		FAILF("manager_open(%s): %s", data_dir, err.msg);
	return m;
}

static int register_fake(void)
{
	pthread_mutex_lock(&fake.mu);
	json_t *desc = json_pack("{s:s,s:s,s:{s:I,s:I},s:[],s:[],s:O}", "id", "node-1", "version", "test",
				 "capacity", "cpu_milli", (json_int_t)8000, "mem", (json_int_t)(8 * GiB), "containers",
				 "gpus", "images", fake.images);
	pthread_mutex_unlock(&fake.mu);
	struct terr err = {0};
	int rc = mgr_agent_register(mgr, desc, &fake_link, NULL, true, NULL, &err);
	if (rc < 0)
		FAILF("register: %s", err.msg);
	json_decref(desc);
	return rc;
}

static int make_user(const char *email, bool admin, struct user_rec *out)
{
	json_t *reply = NULL;
	struct terr err = {0};
	if (mgr_user_create(mgr, email, "a password", admin, "test", &reply, &err) < 0) {
		FAILF("creating %s: %s", email, err.msg);
		return -1;
	}
	const char *ak = json_string_value(json_object_get(json_object_get(reply, "user"), "access_key"));
	int rc = ak ? mgr_user_by_access_key(mgr, ak, out) : -1;
	json_decref(reply);
	return rc;
}

/* The entry of ref in u's list (new reference) or NULL. */
static json_t *listed(const struct user_rec *u, bool all, const char *ref)
{
	json_t *arr = mgr_images_list(mgr, u, all), *found = NULL;
	size_t i;
	json_t *e;
	json_array_foreach(arr, i, e)
		if (!strcmp(json_string_value(json_object_get(e, "ref")), ref))
			found = json_incref(e);
	json_decref(arr);
	return found;
}

static const char *str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* Creates one session; 0 or the error code with err filled. */
static int create(const struct user_rec *u, const char *img, int64_t cpu_m, int64_t mem, const char *name,
		  struct terr *err, char *image_out)
{
	struct create_request cr = {.image = img, .name = name, .count = 1, .req = {.cpu_m = cpu_m, .mem = mem}};
	json_t *arr = NULL;
	memset(err, 0, sizeof(*err));
	int rc = mgr_sessions_create(mgr, u, &cr, &arr, err);
	if (rc == 0 && image_out)
		util_strlcpy(image_out, str(json_array_get(arr, 0), "image"), 256);
	json_decref(arr);
	return rc < 0 ? err->code : 0;
}

/* The message with every occurrence of `name` replaced by "X". */
static void masked(const char *msg, const char *name, char *out, size_t n)
{
	size_t k = 0, len = strlen(name);
	for (const char *p = msg; *p && k + 2 < n;) {
		if (!strncmp(p, name, len)) {
			out[k++] = 'X';
			p += len;
		} else {
			out[k++] = *p++;
		}
	}
	out[k] = '\0';
}

TEST(labels_read)
{
	json_t *e = listed(&alice, false, "tessera/python-ml:3.11-torch1.13");
	CHECK(e != NULL);
	if (!e)
		return;
	CHECK_STR(str(e, "family"), "python-ml");
	CHECK_STR(str(e, "title"), "Python ML");
	CHECK_STR(str(e, "name"), "tessera/python-ml");
	CHECK_STR(str(e, "tag"), "3.11-torch1.13");
	CHECK_STR(str(e, "base_distro"), "debian12");
	CHECK_STR(str(e, "visibility"), "public");
	json_t *fw = json_object_get(e, "frameworks");
	CHECK_INT(json_array_size(fw), 2);
	CHECK_STR(str(json_array_get(fw, 1), "name"), "torch");
	CHECK_STR(str(json_array_get(fw, 1), "version"), "1.13.1");
	json_t *min = json_object_get(e, "min");
	CHECK(json_number_value(json_object_get(min, "cpu")) == 1.0);
	CHECK_INT(json_integer_value(json_object_get(min, "mem")), GiB);
	json_t *sp = json_array_get(json_object_get(e, "service_ports"), 0);
	CHECK_STR(str(sp, "name"), "jupyter");
	CHECK_INT(json_integer_value(json_array_get(json_object_get(sp, "ports"), 0)), 8081);
	CHECK_STR(json_string_value(json_array_get(json_object_get(e, "nodes"), 0)), "node-1");
	CHECK(json_is_null(json_object_get(e, "owner")));
	/* A CPU image has no CUDA version: no "cuda" at all. */
	CHECK(json_object_get(e, "cuda") == NULL);
	json_decref(e);
	/* A CUDA build says which (tessera.cuda), for the launcher's mark. */
	e = listed(&alice, false, "tessera/python-ml:3.13-torch2.6-cuda12.4");
	CHECK(e != NULL);
	if (!e)
		return;
	CHECK_STR(str(e, "cuda"), "12.4");
	CHECK_STR(str(e, "family"), "python-ml");
	CHECK(json_object_get(e, "warning") == NULL);
	json_decref(e);
}

TEST(unlabelled_image)
{
	json_t *e = listed(&bob, false, "busybox:latest");
	CHECK(e != NULL);
	CHECK_STR(str(e, "family"), "busybox");
	CHECK_STR(str(e, "title"), "busybox");
	CHECK_INT(json_array_size(json_object_get(e, "frameworks")), 0);
	CHECK(json_number_value(json_object_get(json_object_get(e, "min"), "cpu")) == 0.0);
	CHECK(json_object_get(e, "warning") == NULL);
	json_decref(e);
	struct terr err;
	/* Docker Hub's long form names the same image. */
	CHECK_INT(create(&bob, "docker.io/library/busybox", 100, 64 * MiB, "plain", &err, NULL), 0);
}

TEST(bad_labels_listed_without_minimum)
{
	json_t *e = listed(&alice, false, "odd:1");
	CHECK(e != NULL);
	CHECK_CONTAINS(str(e, "warning"), "ai.backend.resource.min.mem");
	CHECK_CONTAINS(str(e, "warning"), "ai.backend.service-ports");
	CHECK_CONTAINS(str(e, "warning"), "tessera.cuda 'twelve' is not a CUDA version");
	CHECK(json_object_get(e, "cuda") == NULL);
	CHECK(json_number_value(json_object_get(json_object_get(e, "min"), "cpu")) == 0.0);
	json_decref(e);
	struct terr err;
	CHECK_INT(create(&alice, "odd:1", 100, 64 * MiB, "odd", &err, NULL), 0);
}

TEST(minimum_refused)
{
	struct terr err;
	CHECK_INT(create(&alice, "tessera/python-ml:3.11-torch1.13", 500, 256 * MiB, "small", &err, NULL), ERANGE);
	CHECK_STR(err.msg, "tessera/python-ml:3.11-torch1.13 needs at least 1 CPU and 1 GiB memory; "
			   "asked for 0.5 CPU and 256 MiB memory");
	CHECK_INT(create(&alice, "tessera/python-ml:3.11-torch1.13", 1000, GiB, "enough", &err, NULL), 0);
}

TEST(private_image)
{
	/* the owner and admins list it, with the owner's email */
	json_t *e = listed(&alice, false, "me/private:v1");
	CHECK(e != NULL);
	CHECK_STR(str(e, "visibility"), "private");
	CHECK_STR(str(e, "owner"), "alice@example.org");
	json_decref(e);
	e = listed(&root, false, "me/private:v1");
	CHECK(e != NULL);
	json_decref(e);
	/* anyone else does not, even asking for all */
	CHECK(listed(&bob, true, "me/private:v1") == NULL);
	struct terr err, missing;
	CHECK_INT(create(&alice, "me/private:v1", 100, 64 * MiB, "mine", &err, NULL), 0);
	CHECK_INT(create(&bob, "me/private:v1", 100, 64 * MiB, "theirs", &err, NULL), EINVAL);
	CHECK_INT(create(&bob, "me/nosuch:v1", 100, 64 * MiB, "theirs", &missing, NULL), EINVAL);
	/* the same words as for an image that exists nowhere */
	char a[512], b[512];
	masked(err.msg, "me/private:v1", a, sizeof(a));
	masked(missing.msg, "me/nosuch:v1", b, sizeof(b));
	CHECK_STR(a, b);
	/* nor can bob remove it: it does not exist for him either */
	json_t *reply = NULL;
	struct terr rerr = {0}, rmissing = {0};
	CHECK_INT(mgr_image_remove(mgr, &bob, "me/private:v1", &reply, &rerr), -ENOENT);
	CHECK_INT(mgr_image_remove(mgr, &bob, "me/nosuch:v1", &reply, &rmissing), -ENOENT);
	masked(rerr.msg, "me/private:v1", a, sizeof(a));
	masked(rmissing.msg, "me/nosuch:v1", b, sizeof(b));
	CHECK_STR(a, b);
}

TEST(hidden_image)
{
	CHECK(listed(&alice, false, "tools:1") == NULL);
	CHECK(listed(&alice, true, "tools:1") == NULL);
	json_t *e = listed(&root, true, "tools:1");
	CHECK(e != NULL);
	CHECK_STR(str(e, "visibility"), "hidden");
	json_decref(e);
	CHECK(listed(&root, false, "tools:1") == NULL);
	/* hidden from the lists, not from launching by name */
	struct terr err;
	CHECK_INT(create(&alice, "tools:1", 100, 64 * MiB, "tools", &err, NULL), 0);
}

TEST(aliases)
{
	struct terr err = {0};
	CHECK_INT(mgr_image_alias(mgr, "pytorch", "tessera/python-ml:3.11-torch1.13", &err), 0);
	CHECK_INT(mgr_image_alias(mgr, "Bad Alias", "busybox", &err), -EINVAL);
	json_t *e = listed(&alice, false, "tessera/python-ml:3.11-torch1.13");
	CHECK_STR(json_string_value(json_array_get(json_object_get(e, "aliases"), 0)), "pytorch");
	json_decref(e);
	char img[256] = "";
	CHECK_INT(create(&alice, "pytorch", 1000, GiB, "aliased", &err, img), 0);
	CHECK_STR(img, "tessera/python-ml:3.11-torch1.13");
	/* the alias's image keeps its minimum */
	CHECK_INT(create(&alice, "pytorch", 100, GiB, "aliased-small", &err, NULL), ERANGE);
	CHECK_CONTAINS(err.msg, "needs at least 1 CPU");

	/* kept across a restart */
	manager_close(mgr);
	mgr = open_manager();
	if (!mgr)
		return;
	json_t *al = mgr_image_aliases(mgr);
	CHECK_STR(str(al, "pytorch"), "tessera/python-ml:3.11-torch1.13");
	json_decref(al);
	register_fake();
	CHECK_INT(mgr_image_dealias(mgr, "pytorch", &err), 0);
	CHECK_INT(mgr_image_dealias(mgr, "pytorch", &err), -ENOENT);
	CHECK_INT(create(&alice, "pytorch", 1000, GiB, "aliased-2", &err, NULL), EINVAL);
	CHECK_CONTAINS(err.msg, "not present on any node");
}

TEST(images_changed_event)
{
	CHECK(listed(&alice, false, "fresh:1") == NULL);
	pthread_mutex_lock(&fake.mu);
	json_array_append_new(fake.images, image("fresh:1", NULL));
	json_t *ev = json_pack("{s:s,s:O}", "event", "images", "images", fake.images);
	pthread_mutex_unlock(&fake.mu);
	mgr_agent_event(mgr, "node-1", ev);
	json_decref(ev);
	json_t *e = listed(&alice, false, "fresh:1");
	CHECK(e != NULL);
	json_decref(e);
	/* a list too large to send: the manager asks the node itself */
	pthread_mutex_lock(&fake.mu);
	json_array_append_new(fake.images, image("big:1", NULL));
	pthread_mutex_unlock(&fake.mu);
	ev = json_pack("{s:s,s:n}", "event", "images", "images");
	mgr_agent_event(mgr, "node-1", ev);
	json_decref(ev);
	e = listed(&alice, false, "big:1");
	CHECK(e != NULL);
	json_decref(e);
	/* and rescan finds what the node has without an event */
	pthread_mutex_lock(&fake.mu);
	json_array_append_new(fake.images, image("later:1", NULL));
	pthread_mutex_unlock(&fake.mu);
	json_t *reply = NULL;
	struct terr err = {0};
	CHECK_INT(mgr_images_rescan(mgr, &reply, &err), 0);
	CHECK_INT(json_integer_value(json_object_get(reply, "nodes")), 1);
	json_decref(reply);
	e = listed(&alice, false, "later:1");
	CHECK(e != NULL);
	json_decref(e);
}

TEST(removal)
{
	json_t *reply = NULL;
	struct terr err = {0};
	/* a public image: admins only */
	CHECK_INT(mgr_image_remove(mgr, &bob, "fresh:1", &reply, &err), -EPERM);
	/* one a session uses: refused */
	CHECK_INT(create(&alice, "later:1", 100, 64 * MiB, "user-of-later", &err, NULL), 0);
	CHECK_INT(mgr_image_remove(mgr, &root, "later:1", &reply, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "user-of-later");
	CHECK_INT(mgr_image_remove(mgr, &root, "fresh:1", &reply, &err), 0);
	CHECK_STR(json_string_value(json_array_get(json_object_get(reply, "nodes"), 0)), "node-1");
	json_decref(reply);
	CHECK_STR(fake.removed, "fresh:1");
	CHECK(listed(&root, true, "fresh:1") == NULL);
	/* the owner removes a private image of theirs */
	pthread_mutex_lock(&fake.mu);
	json_array_append_new(fake.images, image("me/scratch:v1", json_pack("{s:s}", "tessera.owner", bob.id)));
	pthread_mutex_unlock(&fake.mu);
	CHECK_INT(mgr_images_rescan(mgr, &reply, &err), 0);
	json_decref(reply);
	CHECK_INT(mgr_image_remove(mgr, &bob, "me/scratch:v1", &reply, &err), 0);
	json_decref(reply);
	CHECK(listed(&bob, false, "me/scratch:v1") == NULL);
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
	log_set_level(LOG_WARN);
	if (!mkdtemp(data_dir)) {
		perror("mkdtemp");
		return 1;
	}
	mgr = open_manager();
	if (!mgr || make_user("alice@example.org", false, &alice) < 0 || make_user("bob@example.org", false, &bob) < 0 ||
	    make_user("root@example.org", true, &root) < 0)
		return testlib_done();
	fake.images = json_array();
	json_array_append_new(fake.images, image("tessera/python-ml:3.11-torch1.13",
		json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "ai.backend.kernelspec", "1",
			  "ai.backend.base-distro", "debian12", "ai.backend.resource.min.cpu", "1",
			  "ai.backend.resource.min.mem", "1g", "ai.backend.service-ports",
			  "jupyter:http:8081,mlflow-ui:preopen:5000", "tessera.family", "python-ml",
			  "tessera.title", "Python ML", "tessera.frameworks", "python=3.11.2,torch=1.13.1")));
	json_array_append_new(fake.images, image("tessera/python-ml:3.13-torch2.6-cuda12.4",
		json_pack("{s:s,s:s,s:s,s:s}", "ai.backend.kernelspec", "1", "tessera.family", "python-ml",
			  "tessera.frameworks", "python=3.13.5,torch=2.6.0", "tessera.cuda", "12.4")));
	json_array_append_new(fake.images, image("busybox:latest", NULL));
	json_array_append_new(fake.images, image("odd:1",
		json_pack("{s:s,s:s,s:s,s:s}", "ai.backend.resource.min.cpu", "2", "ai.backend.resource.min.mem", "lots",
			  "ai.backend.service-ports", "ssh:tcp:22", "tessera.cuda", "twelve")));
	json_array_append_new(fake.images, image("me/private:v1", json_pack("{s:s}", "tessera.owner", alice.id)));
	json_array_append_new(fake.images, image("tools:1", json_pack("{s:s}", "ai.backend.features", "batch private")));
	if (register_fake() < 0)
		return testlib_done();
	RUN(labels_read);
	RUN(unlabelled_image);
	RUN(bad_labels_listed_without_minimum);
	RUN(minimum_refused);
	RUN(private_image);
	RUN(hidden_image);
	RUN(aliases);
	RUN(images_changed_event);
	RUN(removal);
	manager_close(mgr);
	json_decref(fake.images);
	remove_tree(data_dir);
	return testlib_done();
}
