/* manager: data folders through the core interface (core.h) on a real
 * manager (store in a temporary data dir, one fake in-process agent):
 * create and its refusals, what another user sees, shares, the mounts a
 * session's start spec carries (explicit, read-only, automounted
 * dot-folders, an explicit mount of a dot-folder winning over its
 * automount), a refused mount, rm while mounted, trash and restore,
 * mgr_folder_resolve, and a restart that keeps the folders; quota
 * accounting: the policy check, set-quota, uploads' reservations against
 * the free quota (declared sizes, sizes growing as they stream, release,
 * re-measure), and a folder forced out while mounted, which the purge
 * keeps until its sessions have ended.
 *
 * Nothing here asserts on time: waits are bounded polls on the state. */
#include "manager/core.h"
#include "manager/state.h"
#include "testlib.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/units.h"
#include "common/util.h"

#define GiB (1LL << 30)

static struct {
	pthread_mutex_t mu;
	json_t *last_spec;
	int starts;
} fake = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int f_start(void *ctx, json_t *spec, char cid[RT_ID_MAX], char app_endpoint[AGENT_APP_ENDPOINT_MAX],
		   struct agent_start_times *times, struct terr *err)
{
	(void)times;
	(void)ctx;
	(void)err;
	app_endpoint[0] = '\0';
	pthread_mutex_lock(&fake.mu);
	json_decref(fake.last_spec);
	fake.last_spec = json_deep_copy(spec);
	fake.starts++;
	pthread_mutex_unlock(&fake.mu);
	snprintf(cid, RT_ID_MAX, "fake-%.20s", json_string_value(json_object_get(spec, "id")) ?: "");
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

static int f_image_exists(void *ctx, const char *ref, bool *exists, struct terr *err)
{
	(void)ctx;
	(void)err;
	*exists = !strcmp(ref, "busybox:latest");
	return 0;
}

static int f_images(void *ctx, json_t **refs, struct terr *err)
{
	(void)ctx;
	(void)err;
	*refs = json_pack("[s]", "busybox:latest");
	return 0;
}

static void f_release(void *ctx)
{
	(void)ctx;
}

static const struct agent_link_ops fake_link = {
	"fake", f_start, f_destroy, NULL, NULL, f_image_exists, f_images, NULL, NULL, NULL, f_release,
};

static char data_dir[] = "/tmp/tessera-folders-XXXXXX";
static struct manager *mgr;
static struct user_rec alice, bob, carol;

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
	json_t *desc = json_pack("{s:s,s:s,s:{s:I,s:I},s:[],s:[],s:b}", "id", "fake-1", "version", "test",
				 "capacity", "cpu_milli", (json_int_t)8000, "mem", (json_int_t)(8 * GiB),
				 "containers", "gpus", "mock_gpus", true);
	struct terr err = {0};
	int rc = mgr_agent_register(mgr, desc, &fake_link, NULL, true, NULL, &err);
	json_decref(desc);
	return rc;
}

static int make_user(const char *email, struct user_rec *out)
{
	json_t *reply = NULL;
	struct terr err = {0};
	if (mgr_user_create(mgr, email, "a password", false, "test", &reply, &err) < 0)
		return -1;
	const char *ak = json_string_value(json_object_get(json_object_get(reply, "user"), "access_key"));
	int rc = ak ? mgr_user_by_access_key(mgr, ak, out) : -1;
	json_decref(reply);
	return rc;
}

/* Creates a session of u from a JSON body; waits for its start spec and
 * returns its "mounts" (new ref; an empty array when none), or NULL when
 * the create failed (err says why). */
static json_t *start_with(const struct user_rec *u, const char *body_text, struct terr *err)
{
	json_t *body = json_loads(body_text, 0, NULL);
	struct create_request cr;
	json_t *sessions = NULL;
	pthread_mutex_lock(&fake.mu);
	int before = fake.starts;
	pthread_mutex_unlock(&fake.mu);
	int rc = validate_create_request(body, &cr, err);
	if (rc == 0)
		rc = mgr_sessions_create(mgr, u, &cr, &sessions, err);
	json_decref(body);
	json_decref(sessions);
	if (rc < 0)
		return NULL;
	json_t *mounts = NULL;
	for (int i = 0; i < 2000 && !mounts; i++) {
		pthread_mutex_lock(&fake.mu);
		if (fake.starts > before) {
			mounts = json_object_get(fake.last_spec, "mounts");
			mounts = mounts ? json_incref(mounts) : json_array();
		}
		pthread_mutex_unlock(&fake.mu);
		if (!mounts)
			usleep(10000);
	}
	return mounts;
}

/* The mount of the spec with that target, or NULL. */
static json_t *mount_at(json_t *mounts, const char *target)
{
	size_t i;
	json_t *x;
	json_array_foreach(mounts, i, x)
		if (!strcmp(json_string_value(json_object_get(x, "target")) ?: "", target))
			return x;
	return NULL;
}

static char *folder_path_of(const struct user_rec *u, const char *name)
{
	static char path[2048];
	struct terr err = {0};
	if (mgr_folder_resolve(mgr, u, name, false, path, sizeof(path), NULL, &err) < 0)
		return NULL;
	return path;
}

TEST(create_and_visibility)
{
	struct terr err = {0};
	json_t *out = NULL;
	CHECK_INT(mgr_folder_create(mgr, &alice, ".local", NULL, -1, &out, &err), 0);
	CHECK_STR(json_string_value(json_object_get(out, "host")), "local");
	CHECK(json_is_true(json_object_get(out, "automount")));
	json_decref(out);
	CHECK_INT(mgr_folder_create(mgr, &alice, "data", NULL, 1 << 20, &out, &err), 0);
	CHECK_INT((int)json_integer_value(json_object_get(out, "quota_bytes")), 1 << 20);
	json_decref(out);
	CHECK_INT(mgr_folder_create(mgr, &alice, "data", NULL, -1, &out, &err), -EEXIST);
	CHECK_INT(mgr_folder_create(mgr, &alice, "../x", NULL, -1, &out, &err), -EINVAL);
	CHECK_INT(mgr_folder_create(mgr, &alice, "x", "nohost", -1, &out, &err), -ENOENT);
	/* Bob may have his own "data". */
	CHECK_INT(mgr_folder_create(mgr, &bob, "data", NULL, -1, &out, &err), 0);
	json_decref(out);

	char *p = folder_path_of(&alice, "data");
	CHECK(p != NULL);
	struct stat st;
	CHECK(p && stat(p, &st) == 0 && S_ISDIR(st.st_mode));

	/* Carol sees none of them, in the words of a missing folder. */
	json_t *list = mgr_folders_list(mgr, &carol, false, false);
	CHECK_INT((int)json_array_size(list), 0);
	json_decref(list);
	CHECK_INT(mgr_folder_get(mgr, &carol, "data", &out, &err), -ENOENT);
	CHECK_STR(err.msg, "no folder data");
	CHECK_INT(mgr_folder_get(mgr, &carol, ".local", &out, &err), -ENOENT);
	char path[1024];
	CHECK_INT(mgr_folder_resolve(mgr, &carol, "data", false, path, sizeof(path), NULL, &err), -ENOENT);
}

TEST(shares)
{
	struct terr err = {0};
	json_t *out = NULL;
	CHECK_INT(mgr_folder_share(mgr, &alice, "data", "carol@f.test", "ro", false, &out, &err), 0);
	json_decref(out);
	/* An email without an account: answered and listed as any share (the
	 * owner does not learn whether the address has an account); it is the
	 * account's that is made with that email later. */
	CHECK_INT(mgr_folder_share(mgr, &alice, "data", "later@f.test", "rw", false, &out, &err), 0);
	json_t *sw = json_object_get(out, "shared_with");
	CHECK_INT((int)json_array_size(sw), 2);
	CHECK_STR(json_string_value(json_object_get(json_array_get(sw, 1), "email")), "later@f.test");
	json_decref(out);
	struct user_rec later;
	CHECK_INT(make_user("later@f.test", &later), 0);
	char lpath[1024];
	CHECK_INT(mgr_folder_resolve(mgr, &later, "data", true, lpath, sizeof(lpath), NULL, &err), 0);
	CHECK_INT(mgr_folder_unshare(mgr, &alice, "data", "later@f.test", false, &out, &err), 0);
	CHECK_INT((int)json_array_size(json_object_get(out, "shared_with")), 1);
	json_decref(out);
	CHECK_INT(mgr_folder_resolve(mgr, &later, "data", false, lpath, sizeof(lpath), NULL, &err), -ENOENT);
	CHECK_INT(mgr_folder_unshare(mgr, &alice, "data", "nobody@f.test", false, &out, &err), -ENOENT);
	CHECK_STR(err.msg, "folder data is not shared with nobody@f.test");
	CHECK_INT(mgr_folder_share(mgr, &alice, "data", "carol@f.test", "rx", false, &out, &err), -EINVAL);
	json_t *list = mgr_folders_list(mgr, &carol, false, false);
	CHECK_INT((int)json_array_size(list), 1);
	CHECK_STR(json_string_value(json_object_get(json_array_get(list, 0), "permission")), "ro");
	json_decref(list);
	char path[1024];
	int64_t quota = -1;
	CHECK_INT(mgr_folder_resolve(mgr, &carol, "data", false, path, sizeof(path), &quota, &err), 0);
	CHECK_INT((int)quota, 1 << 20);
	CHECK_INT(mgr_folder_resolve(mgr, &carol, "data", true, path, sizeof(path), NULL, &err), -EPERM);
	CHECK_INT(mgr_folder_resolve(mgr, &alice, "data", true, path, sizeof(path), NULL, &err), 0);
	/* A sharee cannot manage it. */
	CHECK_INT(mgr_folder_delete(mgr, &carol, "data", false, &err), -EPERM);
	CHECK_INT(mgr_folder_rename(mgr, &carol, "data", "mine", &out, &err), -EPERM);
}

TEST(mounts_in_the_start_spec)
{
	struct terr err = {0};
	/* Alice: her .local automounted, data where asked. */
	json_t *m = start_with(&alice, "{\"image\":\"busybox:latest\",\"name\":\"a1\",\"mounts\":[\"data:/data\"]}", &err);
	CHECK(m != NULL);
	CHECK_INT((int)json_array_size(m), 2);
	json_t *x = mount_at(m, "/home/work/.local");
	CHECK(x != NULL);
	CHECK(json_is_false(json_object_get(x, "readonly")));
	CHECK_STR(json_string_value(json_object_get(x, "source")), folder_path_of(&alice, ".local"));
	x = mount_at(m, "/data");
	CHECK(x != NULL);
	CHECK_STR(json_string_value(json_object_get(x, "source")), folder_path_of(&alice, "data"));
	json_decref(m);

	/* An explicit mount of .local wins over its automount. */
	m = start_with(&alice, "{\"image\":\"busybox:latest\",\"name\":\"a2\",\"mounts\":[\".local:/opt/l:ro\"]}", &err);
	CHECK_INT((int)json_array_size(m), 1);
	CHECK(mount_at(m, "/opt/l") && json_is_true(json_object_get(mount_at(m, "/opt/l"), "readonly")));
	CHECK(mount_at(m, "/home/work/.local") == NULL);
	json_decref(m);

	/* Carol: alice's data, read-only by its share; no .local of alice's. */
	m = start_with(&carol, "{\"image\":\"busybox:latest\",\"name\":\"c1\",\"mounts\":[\"data\"]}", &err);
	CHECK_INT((int)json_array_size(m), 1);
	x = mount_at(m, "/home/work/data");
	CHECK(x && json_is_true(json_object_get(x, "readonly")));
	json_decref(m);

	/* Bob: his own data (a name is the caller's first); alice's .local
	 * he may not use. */
	m = start_with(&bob, "{\"image\":\"busybox:latest\",\"name\":\"b1\",\"mounts\":[\"data\"]}", &err);
	x = mount_at(m, "/home/work/data");
	CHECK(x && json_is_false(json_object_get(x, "readonly")));
	CHECK_STR(json_string_value(json_object_get(x, "source")), folder_path_of(&bob, "data"));
	json_decref(m);
	m = start_with(&bob, "{\"image\":\"busybox:latest\",\"name\":\"b2\",\"mounts\":[\".local\"]}", &err);
	CHECK(m == NULL);
	CHECK_STR(err.msg, "no folder .local");
	json_decref(m);
}

TEST(rm_restore_rename)
{
	struct terr err = {0};
	json_t *out = NULL;
	/* a1 and a2 mount alice's folders. */
	CHECK_INT(mgr_folder_delete(mgr, &alice, ".local", false, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "a1");
	CHECK_CONTAINS(err.msg, "a2");
	char live[2048];
	util_strlcpy(live, folder_path_of(&alice, ".local"), sizeof(live));
	CHECK_INT(mgr_folder_delete(mgr, &alice, ".local", true, &err), 0);
	struct stat st;
	CHECK(stat(live, &st) < 0);
	CHECK(folder_path_of(&alice, ".local") == NULL);
	json_t *trash = mgr_folders_list(mgr, &alice, false, true);
	CHECK_INT((int)json_array_size(trash), 1);
	json_decref(trash);
	CHECK_INT(mgr_folder_restore(mgr, &alice, ".local", &out, &err), 0);
	json_decref(out);
	CHECK(stat(live, &st) == 0);
	CHECK_INT(mgr_folder_rename(mgr, &alice, ".local", "data", &out, &err), -EEXIST);
	CHECK_INT(mgr_folder_rename(mgr, &alice, ".local", ".cache", &out, &err), 0);
	json_decref(out);
	CHECK(folder_path_of(&alice, ".cache") != NULL);
}

#define MiB (1LL << 20)

static int64_t usage_of_folder(const struct user_rec *u, const char *name)
{
	json_t *out = NULL;
	struct terr err = {0};
	if (mgr_folder_get(mgr, u, name, &out, &err) < 0)
		return -1;
	int64_t v = json_integer_value(json_object_get(out, "usage_bytes"));
	json_decref(out);
	return v;
}

TEST(quota_accounting)
{
	struct terr err = {0};
	int64_t q = -2;
	/* The policy check: -1 takes the default (max_folder_bytes or none). */
	CHECK_INT(mgr_folder_quota_check(-1, 0, &q, &err), 0);
	CHECK_INT(q, 0);
	CHECK_INT(mgr_folder_quota_check(-1, 5 * MiB, &q, &err), 0);
	CHECK_INT(q, 5 * MiB);
	CHECK_INT(mgr_folder_quota_check(5 * MiB, 5 * MiB, &q, &err), 0);
	CHECK_INT(mgr_folder_quota_check(5 * MiB + 1, 5 * MiB, &q, &err), -EPERM);
	CHECK_CONTAINS(err.msg, "max_folder_bytes");
	CHECK_INT(mgr_folder_quota_check(0, 5 * MiB, &q, &err), -EPERM);
	CHECK_INT(mgr_folder_quota_check(7, 0, &q, &err), 0);
	CHECK_INT(q, 7);
	/* Sizes as the CLI and the API read a quota. */
	CHECK_INT(units_parse_size("10m", &q, &err), 0);
	CHECK_INT(q, 10 * MiB);
	CHECK_INT(units_parse_size("1.5GiB", &q, &err), 0);
	CHECK_INT(q, 1536 * MiB);
	CHECK_INT(units_parse_size("0", &q, &err), 0);
	CHECK_INT(q, 0);
	CHECK(units_parse_size("-1m", &q, &err) < 0);
	CHECK(units_parse_size("10x", &q, &err) < 0);
	CHECK(units_parse_size("99999999999t", &q, &err) < 0);
	json_t *body = json_pack("{s:s}", "quota", "3m");
	CHECK_INT(jsonutil_get_size(body, "quota", "quota", &q, NULL, &err), 0);
	CHECK_INT(q, 3 * MiB);
	json_decref(body);

	json_t *out = NULL;
	CHECK_INT(mgr_folder_create(mgr, &alice, "q", NULL, 10 * MiB, &out, &err), 0);
	CHECK_STR(json_string_value(json_object_get(out, "quota_enforced")), "api-only");
	json_decref(out);
	int64_t used = usage_of_folder(&alice, "q");
	CHECK(used >= 0 && used < MiB);
	int64_t free_bytes = 10 * MiB - used;

	/* Declared sizes are held: two that fit together, a third that would
	 * pass the quota with them is refused. */
	char dir[2048];
	struct mgr_upload_hold a, b, c, d;
	CHECK_INT(mgr_folder_upload_begin(mgr, &alice, "q", 6 * MiB, dir, sizeof(dir), &a, &err), 0);
	CHECK_INT(a.bytes, 6 * MiB);
	CHECK_INT(a.quota, 10 * MiB);
	CHECK_STR(dir, folder_path_of(&alice, "q"));
	CHECK_INT(mgr_folder_upload_begin(mgr, &alice, "q", free_bytes - 6 * MiB + 1, dir, sizeof(dir), &b, &err),
		  -EDQUOT);
	CHECK_CONTAINS(err.msg, "quota");
	CHECK_INT(b.bytes, 0);
	CHECK_INT(mgr_folder_upload_begin(mgr, &alice, "q", free_bytes - 6 * MiB, dir, sizeof(dir), &b, &err), 0);
	/* An upload of unknown size holds nothing yet, and cannot grow: all
	 * is held. */
	CHECK_INT(mgr_folder_upload_begin(mgr, &alice, "q", -1, dir, sizeof(dir), &c, &err), 0);
	CHECK_INT(c.bytes, 0);
	CHECK_INT(mgr_folder_upload_grow(mgr, &c, 1, &err), -EDQUOT);
	/* Once a ends (nothing written), its bytes are free again: c grows,
	 * a step beyond what it asked for while there is room, never past it. */
	mgr_folder_upload_end(mgr, &a);
	CHECK_INT(a.bytes, 0);
	CHECK_INT(mgr_folder_upload_grow(mgr, &c, MiB, &err), 0);
	CHECK(c.bytes >= MiB && c.bytes <= 6 * MiB);
	CHECK_INT(mgr_folder_upload_grow(mgr, &c, 6 * MiB, &err), 0);
	CHECK_INT(c.bytes, 6 * MiB);
	CHECK_INT(mgr_folder_upload_grow(mgr, &c, 6 * MiB + 1, &err), -EDQUOT);
	CHECK_INT(mgr_folder_upload_begin(mgr, &alice, "q", 1, dir, sizeof(dir), &d, &err), -EDQUOT);
	mgr_folder_upload_end(mgr, &b);
	mgr_folder_upload_end(mgr, &c);
	mgr_folder_upload_end(mgr, &c); /* twice: no effect */
	/* All given back: the whole free quota again, not one byte more. */
	CHECK_INT(mgr_folder_upload_begin(mgr, &alice, "q", free_bytes + 1, dir, sizeof(dir), &d, &err), -EDQUOT);
	CHECK_INT(mgr_folder_upload_begin(mgr, &alice, "q", free_bytes, dir, sizeof(dir), &d, &err), 0);
	/* What an upload wrote counts once it ends: the usage is measured
	 * again, not taken from the cache. */
	char file[2200];
	snprintf(file, sizeof(file), "%s/four", dir);
	FILE *fp = fopen(file, "w");
	CHECK(fp != NULL);
	static char chunk[1 << 16];
	memset(chunk, 'x', sizeof(chunk));
	for (int i = 0; fp && i < 64; i++)
		fwrite(chunk, 1, sizeof(chunk), fp);
	if (fp)
		fclose(fp);
	mgr_folder_upload_end(mgr, &d);
	CHECK_INT(mgr_folder_upload_begin(mgr, &alice, "q", 7 * MiB, dir, sizeof(dir), &d, &err), -EDQUOT);
	CHECK_INT(mgr_folder_upload_begin(mgr, &alice, "q", 5 * MiB, dir, sizeof(dir), &d, &err), 0);
	mgr_folder_upload_end(mgr, &d);
	CHECK(usage_of_folder(&alice, "q") >= 4 * MiB);

	/* Who may upload: a read-only share may not, an unseen folder is
	 * missing; a folder without a quota holds nothing. */
	CHECK_INT(mgr_folder_share(mgr, &alice, "q", "carol@f.test", "ro", false, &out, &err), 0);
	json_decref(out);
	CHECK_INT(mgr_folder_upload_begin(mgr, &carol, "q", 1, dir, sizeof(dir), &d, &err), -EPERM);
	CHECK_INT(mgr_folder_upload_begin(mgr, &bob, "q", 1, dir, sizeof(dir), &d, &err), -ENOENT);
	CHECK_INT(mgr_folder_create(mgr, &alice, "unlimited", NULL, 0, &out, &err), 0);
	json_decref(out);
	CHECK_INT(mgr_folder_upload_begin(mgr, &alice, "unlimited", 1LL << 50, dir, sizeof(dir), &d, &err), 0);
	CHECK_INT(d.quota, 0);
	CHECK_INT(d.bytes, 0);
	CHECK_INT(mgr_folder_upload_grow(mgr, &d, 1LL << 51, &err), 0);
	mgr_folder_upload_end(mgr, &d);

	/* set-quota: the owner changes it, a sharee may not, a negative is
	 * refused; lowering it below the usage is allowed (then nothing more
	 * fits). */
	CHECK_INT(mgr_folder_set_quota(mgr, &alice, "q", 20 * MiB, &out, &err), 0);
	CHECK_INT(json_integer_value(json_object_get(out, "quota_bytes")), 20 * MiB);
	json_decref(out);
	CHECK_INT(mgr_folder_upload_begin(mgr, &alice, "q", 12 * MiB, dir, sizeof(dir), &d, &err), 0);
	mgr_folder_upload_end(mgr, &d);
	CHECK_INT(mgr_folder_set_quota(mgr, &carol, "q", 30 * MiB, &out, &err), -EPERM);
	CHECK_INT(mgr_folder_set_quota(mgr, &alice, "q", -1, &out, &err), -EINVAL);
	CHECK_INT(mgr_folder_set_quota(mgr, &alice, "nosuch", MiB, &out, &err), -ENOENT);
	CHECK_INT(mgr_folder_set_quota(mgr, &alice, "q", MiB, &out, &err), 0);
	json_decref(out);
	CHECK_INT(mgr_folder_upload_begin(mgr, &alice, "q", 1, dir, sizeof(dir), &d, &err), -EDQUOT);
	CHECK_INT(mgr_folder_set_quota(mgr, &alice, "q", 0, &out, &err), 0);
	json_decref(out);
	CHECK_INT(mgr_folder_upload_begin(mgr, &alice, "q", 1LL << 40, dir, sizeof(dir), &d, &err), 0);
	mgr_folder_upload_end(mgr, &d);
}

static const char *session_status(const char *name)
{
	static char st[32];
	json_t *s = NULL;
	struct terr err = {0};
	st[0] = '\0';
	if (mgr_session_get(mgr, &alice, name, 0, &s, &err) == 0)
		util_strlcpy(st, json_string_value(json_object_get(s, "status")) ?: "", sizeof(st));
	json_decref(s);
	return st;
}

static size_t trashed_count(const struct user_rec *u)
{
	json_t *t = mgr_folders_list(mgr, u, false, true);
	size_t n = json_array_size(t);
	json_decref(t);
	return n;
}

/* rm --force of a mounted folder: the sessions keep it (in the trash)
 * until they end; it can be restored meanwhile; the purge waits for them. */
TEST(forced_rm_while_mounted)
{
	struct terr err = {0};
	json_t *out = NULL, *settings = NULL;
	CHECK_INT(mgr_folder_create(mgr, &alice, "keep", NULL, 0, &out, &err), 0);
	json_decref(out);
	json_t *m = start_with(&alice, "{\"image\":\"busybox:latest\",\"name\":\"a3\",\"mounts\":[\"keep\"]}", &err);
	CHECK(m != NULL);
	json_decref(m);
	CHECK_INT(mgr_folder_get(mgr, &alice, "keep", &out, &err), 0);
	CHECK_STR(json_string_value(json_array_get(json_object_get(out, "mounted_by"), 0)), "a3");
	json_decref(out);
	char live[2048], trashed[2100];
	util_strlcpy(live, folder_path_of(&alice, "keep"), sizeof(live));
	CHECK_INT(mgr_folder_delete(mgr, &alice, "keep", false, &err), -EBUSY);
	CHECK_INT(mgr_folder_delete(mgr, &alice, "keep", true, &err), 0);
	char *slash = strrchr(live, '/');
	snprintf(trashed, sizeof(trashed), "%.*s/.trash%s", (int)(slash - live), live, slash);
	struct stat st;
	CHECK(stat(trashed, &st) == 0);
	/* The trash keeps nothing from now on, but a3 still mounts it. */
	json_t *v = json_integer(0);
	CHECK_INT(mgr_config_set(mgr, "folder_trash_days", v, &settings, &err), 0);
	json_decref(settings);
	pthread_mutex_lock(&mgr->mu);
	mgr_folders_purge_trash(mgr);
	pthread_mutex_unlock(&mgr->mu);
	CHECK(stat(trashed, &st) == 0);
	CHECK_INT((int)trashed_count(&alice), 1);
	/* Restore is allowed while mounted: the same directory comes back. */
	CHECK_INT(mgr_folder_restore(mgr, &alice, "keep", &out, &err), 0);
	json_decref(out);
	CHECK(stat(live, &st) == 0);
	CHECK_INT(mgr_folder_delete(mgr, &alice, "keep", true, &err), 0);
	/* a3 ends: the next purge takes the folder. */
	CHECK_INT(mgr_session_delete(mgr, &alice, "a3", &out, &err), 0);
	json_decref(out);
	for (int i = 0; i < 3000 && strcmp(session_status("a3"), "TERMINATED"); i++)
		usleep(10000);
	CHECK_STR(session_status("a3"), "TERMINATED");
	for (int i = 0; i < 3000 && trashed_count(&alice); i++)
		usleep(10000);
	CHECK_INT((int)trashed_count(&alice), 0);
	CHECK(stat(trashed, &st) < 0);
	json_decref(v);
	v = json_integer(7);
	CHECK_INT(mgr_config_set(mgr, "folder_trash_days", v, &settings, &err), 0);
	json_decref(settings);
	json_decref(v);
}

static const char *status_of(const struct user_rec *u, const char *name)
{
	static char st[32];
	json_t *s = NULL;
	struct terr err = {0};
	st[0] = '\0';
	if (mgr_session_get(mgr, u, name, 0, &s, &err) == 0)
		util_strlcpy(st, json_string_value(json_object_get(s, "status")) ?: "", sizeof(st));
	json_decref(s);
	return st;
}

static bool ends(const struct user_rec *u, const char *name)
{
	for (int i = 0; i < 3000; i++) {
		if (!strcmp(status_of(u, name), "TERMINATED"))
			return true;
		usleep(10000);
	}
	return false;
}

/* A share taken away (or made read-only) while the user's sessions mount
 * the folder (writable): a bind mount outlives the share, so it is
 * refused, counting the sessions (their names are not the owner's to
 * see), unless forced, which ends those sessions and no others. */
TEST(unshare_while_mounted)
{
	struct terr err = {0};
	json_t *out = NULL;
	CHECK_INT(mgr_folder_create(mgr, &alice, "lent", NULL, 0, &out, &err), 0);
	json_decref(out);
	CHECK_INT(mgr_folder_share(mgr, &alice, "lent", "carol@f.test", "rw", false, &out, &err), 0);
	json_decref(out);
	json_t *m = start_with(&carol, "{\"image\":\"busybox:latest\",\"name\":\"c-rw\",\"mounts\":[\"lent\"]}", &err);
	CHECK(m != NULL);
	json_decref(m);
	m = start_with(&carol, "{\"image\":\"busybox:latest\",\"name\":\"c-ro\",\"mounts\":[\"lent:ro\"]}", &err);
	CHECK(m != NULL);
	json_decref(m);
	m = start_with(&carol, "{\"image\":\"busybox:latest\",\"name\":\"c-none\"}", &err);
	json_decref(m);
	/* rw -> ro: the writable mount stands in the way. */
	CHECK_INT(mgr_folder_share(mgr, &alice, "lent", "carol@f.test", "ro", false, &out, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "folder lent is mounted writable by 1 session(s) of carol@f.test");
	CHECK_CONTAINS(err.msg, "force");
	CHECK(!strstr(err.msg, "c-rw"));
	/* Unsharing: both mounts do. Nothing changed meanwhile. */
	CHECK_INT(mgr_folder_unshare(mgr, &alice, "lent", "carol@f.test", false, &out, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "folder lent is mounted by 2 session(s) of carol@f.test");
	char path[1024];
	CHECK_INT(mgr_folder_resolve(mgr, &carol, "lent", true, path, sizeof(path), NULL, &err), 0);
	CHECK_STR(status_of(&carol, "c-rw"), "RUNNING");
	/* Forced rw -> ro ends the writable one only. */
	CHECK_INT(mgr_folder_share(mgr, &alice, "lent", "carol@f.test", "ro", true, &out, &err), 0);
	json_decref(out);
	CHECK(ends(&carol, "c-rw"));
	CHECK_STR(status_of(&carol, "c-ro"), "RUNNING");
	CHECK_INT(mgr_folder_resolve(mgr, &carol, "lent", true, path, sizeof(path), NULL, &err), -EPERM);
	/* Forced unshare ends the read-only one; a session without the
	 * folder keeps running. */
	CHECK_INT(mgr_folder_unshare(mgr, &alice, "lent", "carol@f.test", false, &out, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "1 session(s) of carol@f.test");
	CHECK_INT(mgr_folder_unshare(mgr, &alice, "lent", "carol@f.test", true, &out, &err), 0);
	json_decref(out);
	CHECK(ends(&carol, "c-ro"));
	CHECK_STR(status_of(&carol, "c-none"), "RUNNING");
	CHECK_INT(mgr_folder_resolve(mgr, &carol, "lent", false, path, sizeof(path), NULL, &err), -ENOENT);
	/* Sharing again with nothing mounted needs no force. */
	CHECK_INT(mgr_folder_share(mgr, &alice, "lent", "carol@f.test", "rw", false, &out, &err), 0);
	json_decref(out);
	CHECK_INT(mgr_folder_unshare(mgr, &alice, "lent", "carol@f.test", false, &out, &err), 0);
	json_decref(out);
	CHECK_INT(mgr_session_delete(mgr, &carol, "c-none", &out, &err), 0);
	json_decref(out);
	CHECK(ends(&carol, "c-none"));
	CHECK_INT(mgr_folder_delete(mgr, &alice, "lent", false, &err), 0);
}

/* The policy's max_folders and max_folder_bytes, and folder_trash_days. */
TEST(policy_limits)
{
	struct terr err = {0};
	json_t *out = NULL, *settings = NULL;
	json_t *pol = json_pack("{s:i,s:s}", "max_folders", 2, "max_folder_bytes", "1m");
	CHECK_INT(mgr_config_set(mgr, "policy.bob@f.test", pol, &settings, &err), 0);
	json_decref(pol);
	json_decref(settings);
	/* bob has one folder (data): one more, with the policy's quota. */
	CHECK_INT(mgr_folder_create(mgr, &bob, "second", NULL, -1, &out, &err), 0);
	CHECK_INT((int)json_integer_value(json_object_get(out, "quota_bytes")), 1 << 20);
	json_decref(out);
	CHECK_INT(mgr_folder_create(mgr, &bob, "third", NULL, -1, &out, &err), -EPERM);
	CHECK_CONTAINS(err.msg, "max_folders");
	CHECK_INT(mgr_folder_delete(mgr, &bob, "second", false, &err), 0);
	CHECK_INT(mgr_folder_create(mgr, &bob, "third", NULL, 2 << 20, &out, &err), -EPERM);
	CHECK_CONTAINS(err.msg, "max_folder_bytes");
	CHECK_INT(mgr_folder_create(mgr, &bob, "third", NULL, 0, &out, &err), -EPERM);
	CHECK_INT(mgr_folder_create(mgr, &bob, "third", NULL, 512 << 10, &out, &err), 0);
	json_decref(out);
	/* set-quota is held to the owner's policy too, whoever asks. */
	CHECK_INT(mgr_folder_set_quota(mgr, &bob, "third", 2 << 20, &out, &err), -EPERM);
	CHECK_CONTAINS(err.msg, "max_folder_bytes");
	CHECK_INT(mgr_folder_set_quota(mgr, &bob, "third", 0, &out, &err), -EPERM);
	CHECK_INT(mgr_folder_set_quota(mgr, &bob, "third", 1 << 20, &out, &err), 0);
	json_decref(out);
	json_t *v = json_integer(-1);
	CHECK_INT(mgr_config_set(mgr, "folder_trash_days", v, &settings, &err), -EINVAL);
	json_decref(v);
	/* Its trashed folder is purged by the periodic work once the trash
	 * keeps nothing. */
	char trashed_dir[2048];
	json_t *trash = mgr_folders_list(mgr, &bob, false, true);
	snprintf(trashed_dir, sizeof(trashed_dir), "%s/folders/.trash/%s", data_dir,
		 json_string_value(json_object_get(json_array_get(trash, 0), "id")) ?: "none");
	json_decref(trash);
	struct stat st;
	CHECK(stat(trashed_dir, &st) == 0);
	v = json_integer(0);
	CHECK_INT(mgr_config_set(mgr, "folder_trash_days", v, &settings, &err), 0);
	json_decref(v);
	json_decref(settings);
	size_t left = 1;
	for (int i = 0; i < 3000 && left; i++) {
		trash = mgr_folders_list(mgr, &bob, false, true);
		left = json_array_size(trash);
		json_decref(trash);
		if (left)
			usleep(10000);
	}
	CHECK_INT((int)left, 0);
	CHECK(stat(trashed_dir, &st) < 0);
}

TEST(restart_keeps_folders)
{
	manager_close(mgr);
	mgr = open_manager();
	/* .cache, data, and q and unlimited of quota_accounting. */
	json_t *list = mgr_folders_list(mgr, &alice, false, false);
	CHECK_INT((int)json_array_size(list), 4);
	json_decref(list);
	/* data and q are shared with carol. */
	list = mgr_folders_list(mgr, &carol, false, false);
	CHECK_INT((int)json_array_size(list), 2);
	json_decref(list);
}

int main(void)
{
	log_set_level(LOG_ERROR);
	if (!mkdtemp(data_dir)) {
		perror("mkdtemp");
		return 1;
	}
	mgr = open_manager();
	if (!mgr || register_fake() < 0 || make_user("alice@f.test", &alice) < 0 || make_user("bob@f.test", &bob) < 0 ||
	    make_user("carol@f.test", &carol) < 0) {
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	RUN(create_and_visibility);
	RUN(shares);
	RUN(mounts_in_the_start_spec);
	RUN(rm_restore_rename);
	RUN(quota_accounting);
	RUN(forced_rm_while_mounted);
	RUN(unshare_while_mounted);
	RUN(policy_limits);
	RUN(restart_keeps_folders);
	manager_close(mgr);
	json_decref(fake.last_spec);
	util_remove_tree(data_dir);
	return testlib_done();
}
