/* agent/agent.c against a container runtime written here: what a session
 * spec turns into (mounts, devices, environment, limits, the fGPU files),
 * specs refused before anything is made, removal, the recovery paths of
 * a start, and the GPU usage thread asking the runtime for a container's
 * init once per start of it.
 *
 * The runtime is the agent's seam (runtime/runtime.h): Docker's own
 * protocol is tested in tests/runtime/test_docker.c, end to end in
 * tests/e2e. The GPUs are the project's mock driver, as mock devices and,
 * for the real-driver path, through NVML from the mock's directory.
 *
 * Environment (set by tests/agent/meson.build):
 *   TESSERA_TEST_BUILD_ROOT    the build tree (the agent's asset_dir)
 *   TESSERA_TEST_MOCK_LIB_DIR  the directory of the mock driver
 *   TESSERA_MOCK_GPUS          the devices NVML shows there */
#include "agent/agent.h"
#include "common/util.h"
#include "gpuabi/conf.h"
#include "gpuabi/fgpu_contract.h"
#include "testlib.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GiB (1LL << 30)
#define MiB (1LL << 20)

/* ---- the runtime -------------------------------------------------------- */

#define FAKE_MAX 16

struct fake_container {
	char id[RT_ID_MAX];
	char name[128];
	char image[256];
	char session_id[64];
	char agent_id[64];
	char cluster_id[64];
	bool running;
	int pid;
	/* What the agent asked for, copied. */
	char env[64][512];
	int n_env;
	struct { char src[4200], dst[512]; bool ro; } mounts[32];
	int n_mounts;
	char devices[24][64];
	int n_devices;
	char entry[8][256];
	int n_entry;
	int64_t nano_cpus, memory, pids_limit;
};

static struct {
	pthread_mutex_t mu;
	struct fake_container c[FAKE_MAX];
	int n;
	int next_id;
	int creates, starts, removes, inspects, lists;
	int init_pid;          /* the pid a started container's init gets */
	struct rt_event events[8];   /* queued for the watcher (fake_event) */
	int n_events;
} fake = {.mu = PTHREAD_MUTEX_INITIALIZER};

static struct fake_container *fake_find(const char *id_or_name)
{
	for (int i = 0; i < fake.n; i++)
		if (!strcmp(fake.c[i].id, id_or_name) || !strcmp(fake.c[i].name, id_or_name))
			return &fake.c[i];
	return NULL;
}

static void fake_reset(void)
{
	pthread_mutex_lock(&fake.mu);
	fake.n = 0;
	fake.creates = fake.starts = fake.removes = fake.inspects = fake.lists = 0;
	fake.n_events = 0;
	fake.init_pid = getpid();
	pthread_mutex_unlock(&fake.mu);
}

static int f_open(struct runtime **out, const char *endpoint, struct terr *err)
{
	(void)endpoint;
	(void)err;
	*out = (struct runtime *)&fake;
	return 0;
}

static void f_close(struct runtime *rt)
{
	(void)rt;
}

static int f_version(struct runtime *rt, char *api, size_t api_n, char *server, size_t server_n,
		     struct terr *err)
{
	(void)rt;
	(void)err;
	snprintf(api, api_n, "1.41");
	snprintf(server, server_n, "0.1-test");
	return 0;
}

static int f_image_exists(struct runtime *rt, const char *ref, bool *exists, struct terr *err)
{
	(void)rt;
	(void)err;
	*exists = strcmp(ref, "nosuch:latest") != 0;
	return 0;
}

/* Every image sets PATH, as Debian's do; the agent appends its tools. */
static int f_image_env(struct runtime *rt, const char *ref, char ***env, size_t *n, struct terr *err)
{
	(void)rt;
	(void)ref;
	(void)err;
	*env = calloc(2, sizeof(char *));
	(*env)[0] = strdup("PATH=/image/bin:/bin");
	(*env)[1] = strdup("LANG=C.UTF-8");
	*n = 2;
	return 0;
}

static int f_image_list(struct runtime *rt, json_t **images, struct terr *err)
{
	(void)rt;
	(void)err;
	*images = json_array();
	return 0;
}

static int f_image_remove(struct runtime *rt, const char *ref, struct terr *err)
{
	(void)rt;
	return terr_set(err, ENOENT, "no image %s", ref);
}

static int f_create(struct runtime *rt, const struct rt_container_spec *s, char id[RT_ID_MAX], struct terr *err)
{
	(void)rt;
	pthread_mutex_lock(&fake.mu);
	fake.creates++;
	int rc = 0;
	if (!strcmp(s->image, "nosuch:latest")) {
		rc = terr_set(err, ENOENT, "No such image: nosuch:latest");
	} else if (fake_find(s->name)) {
		rc = terr_set(err, EEXIST, "Conflict. The container name \"/%s\" is already in use", s->name);
	} else if (fake.n == FAKE_MAX) {
		rc = terr_set(err, ENOSPC, "the test runtime is full");
	} else {
		struct fake_container *c = &fake.c[fake.n++];
		memset(c, 0, sizeof(*c));
		snprintf(c->id, sizeof(c->id), "c%04d", ++fake.next_id);
		snprintf(c->name, sizeof(c->name), "%s", s->name);
		snprintf(c->image, sizeof(c->image), "%s", s->image);
		for (size_t i = 0; i < s->n_labels; i++) {
			if (!strcmp(s->labels[i].key, AGENT_LABEL_SESSION))
				snprintf(c->session_id, sizeof(c->session_id), "%s", s->labels[i].value);
			if (!strcmp(s->labels[i].key, AGENT_LABEL_AGENT))
				snprintf(c->agent_id, sizeof(c->agent_id), "%s", s->labels[i].value);
			if (!strcmp(s->labels[i].key, AGENT_LABEL_CLUSTER))
				snprintf(c->cluster_id, sizeof(c->cluster_id), "%s", s->labels[i].value);
		}
		for (int i = 0; s->env && s->env[i] && c->n_env < 64; i++)
			snprintf(c->env[c->n_env++], sizeof(c->env[0]), "%s", s->env[i]);
		for (size_t i = 0; i < s->n_mounts && c->n_mounts < 32; i++, c->n_mounts++) {
			snprintf(c->mounts[i].src, sizeof(c->mounts[i].src), "%s", s->mounts[i].source);
			snprintf(c->mounts[i].dst, sizeof(c->mounts[i].dst), "%s", s->mounts[i].target);
			c->mounts[i].ro = s->mounts[i].readonly;
		}
		for (int i = 0; s->devices && s->devices[i] && c->n_devices < 24; i++)
			snprintf(c->devices[c->n_devices++], sizeof(c->devices[0]), "%s", s->devices[i]);
		for (int i = 0; s->entrypoint && s->entrypoint[i] && c->n_entry < 8; i++)
			snprintf(c->entry[c->n_entry++], sizeof(c->entry[0]), "%s", s->entrypoint[i]);
		c->nano_cpus = s->nano_cpus;
		c->memory = s->memory_bytes;
		c->pids_limit = s->pids_limit;
		snprintf(id, RT_ID_MAX, "%s", c->id);
	}
	pthread_mutex_unlock(&fake.mu);
	return rc;
}

static int f_start(struct runtime *rt, const char *id, struct terr *err)
{
	(void)rt;
	pthread_mutex_lock(&fake.mu);
	fake.starts++;
	struct fake_container *c = fake_find(id);
	int rc = 0;
	if (!c)
		rc = terr_set(err, ENOENT, "No such container: %s", id);
	else if (!strcmp(c->image, "broken:latest"))
		rc = terr_set(err, EIO, "OCI runtime create failed: exec: no such file");
	else {
		c->running = true;
		c->pid = fake.init_pid;
	}
	pthread_mutex_unlock(&fake.mu);
	return rc;
}

static int f_remove(struct runtime *rt, const char *id, struct terr *err)
{
	(void)rt;
	pthread_mutex_lock(&fake.mu);
	fake.removes++;
	struct fake_container *c = fake_find(id);
	int rc = 0;
	if (!c)
		rc = terr_set(err, ENOENT, "No such container: %s", id);
	else
		*c = fake.c[--fake.n];
	pthread_mutex_unlock(&fake.mu);
	return rc;
}

static void fake_info(const struct fake_container *c, struct rt_container_info *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%s", c->id);
	memcpy(out->name, c->name, sizeof(out->name));
	snprintf(out->image, sizeof(out->image), "%s", c->image);
	snprintf(out->state, sizeof(out->state), "%s", c->running ? "running" : "created");
	out->running = c->running;
	out->pid = c->running ? c->pid : 0;
	snprintf(out->session_id, sizeof(out->session_id), "%s", c->session_id);
	snprintf(out->agent_id, sizeof(out->agent_id), "%s", c->agent_id);
	snprintf(out->cluster_id, sizeof(out->cluster_id), "%s", c->cluster_id);
}

static int f_inspect(struct runtime *rt, const char *id, struct rt_container_info *out, struct terr *err)
{
	(void)rt;
	pthread_mutex_lock(&fake.mu);
	fake.inspects++;
	struct fake_container *c = fake_find(id);
	int rc = 0;
	if (c)
		fake_info(c, out);
	else
		rc = terr_set(err, ENOENT, "No such container: %s", id);
	pthread_mutex_unlock(&fake.mu);
	return rc;
}

/* As Docker's list: no init pid. */
static int f_list(struct runtime *rt, const char *key, const char *value, struct rt_container_info **out,
		  size_t *n, struct terr *err)
{
	(void)rt;
	(void)err;
	pthread_mutex_lock(&fake.mu);
	fake.lists++;
	*out = calloc(FAKE_MAX, sizeof(**out));
	*n = 0;
	for (int i = 0; i < fake.n; i++) {
		const struct fake_container *c = &fake.c[i];
		const char *have = !strcmp(key, AGENT_LABEL_AGENT) ? c->agent_id
				   : !strcmp(key, AGENT_LABEL_SESSION) ? c->session_id : "";
		if (strcmp(have, value) != 0)
			continue;
		fake_info(c, &(*out)[*n]);
		(*out)[(*n)++].pid = 0;
	}
	pthread_mutex_unlock(&fake.mu);
	return 0;
}

static int f_exec(struct runtime *rt, const char *id, const char *const *argv, const char *const *env,
		  size_t max_output, struct rt_exec_result *out, struct terr *err)
{
	(void)rt;
	(void)id;
	(void)argv;
	(void)env;
	(void)max_output;
	(void)out;
	return terr_set(err, ENOSYS, "exec is not part of these tests");
}

static int f_logs(struct runtime *rt, const char *id, int tail, char **out, size_t *len, struct terr *err)
{
	(void)rt;
	(void)id;
	(void)tail;
	(void)out;
	(void)len;
	return terr_set(err, ENOSYS, "logs are not part of these tests");
}

static int f_commit(struct runtime *rt, const char *id, const char *ref, struct terr *err)
{
	(void)rt;
	(void)id;
	(void)ref;
	return terr_set(err, ENOSYS, "commit is not part of these tests");
}

/* Holds the stream open, as Docker's does, until the agent stops; sends
 * the events the test queued (fake_event). */
static int f_watch(struct runtime *rt, const char *key, const char *value, rt_event_cb cb, void *ud,
		   const atomic_bool *stop, struct terr *err)
{
	(void)rt;
	(void)key;
	(void)value;
	(void)err;
	while (!atomic_load_explicit(stop, memory_order_relaxed)) {
		struct rt_event evs[8];
		pthread_mutex_lock(&fake.mu);
		int n = fake.n_events;
		memcpy(evs, fake.events, sizeof(evs));
		fake.n_events = 0;
		pthread_mutex_unlock(&fake.mu);
		for (int i = 0; i < n; i++)
			cb(&evs[i], ud);
		usleep(10 * 1000);
	}
	return 0;
}

static const struct runtime_ops fake_ops = {
	.name = "test-runtime", .open = f_open, .close = f_close, .version = f_version,
	.image_exists = f_image_exists, .image_env = f_image_env, .image_list = f_image_list, .image_remove = f_image_remove,
	.create = f_create, .start = f_start, .remove = f_remove, .inspect = f_inspect,
	.list = f_list, .exec = f_exec, .logs = f_logs, .commit = f_commit, .watch = f_watch,
};

/* ---- helpers ------------------------------------------------------------ */

/* A container made by someone else (another installation, or this one
 * before containers carried its id), as Docker would list it. */
static void fake_add(const char *id, const char *session, const char *agent, const char *cluster)
{
	pthread_mutex_lock(&fake.mu);
	struct fake_container *c = &fake.c[fake.n++];
	memset(c, 0, sizeof(*c));
	snprintf(c->id, sizeof(c->id), "%s", id);
	snprintf(c->name, sizeof(c->name), "tessera-%s", session);
	snprintf(c->image, sizeof(c->image), "busybox:latest");
	snprintf(c->session_id, sizeof(c->session_id), "%s", session);
	snprintf(c->agent_id, sizeof(c->agent_id), "%s", agent);
	snprintf(c->cluster_id, sizeof(c->cluster_id), "%s", cluster);
	c->running = true;
	pthread_mutex_unlock(&fake.mu);
}

/* Queues a "die" event of a container for the watcher. */
static void fake_event(const char *cid, const char *session, const char *cluster)
{
	pthread_mutex_lock(&fake.mu);
	struct rt_event *e = &fake.events[fake.n_events++];
	memset(e, 0, sizeof(*e));
	snprintf(e->container_id, sizeof(e->container_id), "%s", cid);
	snprintf(e->action, sizeof(e->action), "die");
	snprintf(e->session_id, sizeof(e->session_id), "%s", session);
	snprintf(e->cluster_id, sizeof(e->cluster_id), "%s", cluster);
	e->exit_code = 1;
	pthread_mutex_unlock(&fake.mu);
}

static char data_dir[64];

static bool exists(const char *fmt, const char *arg)
{
	char path[512];
	snprintf(path, sizeof(path), fmt, data_dir, arg);
	return access(path, F_OK) == 0;
}

static char *slurp(const char *fmt, const char *arg)
{
	char path[512];
	snprintf(path, sizeof(path), fmt, data_dir, arg);
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	static char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* A mock-GPU agent (1 device of 8 GiB) on the test runtime. */
static struct agent *open_mock_agent(void)
{
	struct agent_config cfg = {
		.id = "node-a", .cpu_m = 4000, .mem = 8 * GiB, .data_dir = data_dir,
		.mock_gpus = "1x8GiB:100", .gpu_context_overhead = "0",
		.asset_dir = getenv("TESSERA_TEST_BUILD_ROOT"), .runtime = &fake_ops,
	};
	struct agent *a = NULL;
	struct terr err = {0};
	if (agent_open(&a, &cfg, &err) < 0)
		FAILF("agent_open: %s", err.msg);
	return a;
}

static const char *device_uuid(struct agent *a, int i)
{
	static char uuid[64];
	json_t *d = NULL;
	struct terr err = {0};
	uuid[0] = '\0';
	if (agent_describe(a, &d, &err) == 0)
		snprintf(uuid, sizeof(uuid), "%s",
			 json_string_value(json_object_get(json_array_get(json_object_get(d, "gpus"), i), "uuid")) ?: "");
	json_decref(d);
	return uuid;
}

/* A spec as the manager sends it; gpu_mem 0: no GPU. */
static json_t *spec_for(const char *id, const char *uuid, int64_t gpu_mem, int sm_pct)
{
	json_t *spec = json_pack("{s:s,s:s,s:s,s:s,s:{s:I,s:I,s:I},s:{s:s},s:n}", "id", id, "name", "nb1",
				 "owner", "alice", "image", "busybox:latest", "resources", "cpu_milli",
				 (json_int_t)1500, "mem", (json_int_t)(64 * MiB), "fgpu_milli",
				 (json_int_t)(gpu_mem ? 500 : 0), "env", "A", "1", "startup_command");
	if (gpu_mem) {
		json_t *g = json_pack("{s:i,s:s,s:I,s:I}", "index", 0, "uuid", uuid, "fgpu_milli",
				      (json_int_t)500, "memory_limit", (json_int_t)gpu_mem);
		if (sm_pct)
			json_object_set_new(g, "sm_limit_percent", json_integer(sm_pct));
		json_object_set_new(spec, "gpus", json_pack("[o]", g));
	}
	return spec;
}

static const char *env_of(const struct fake_container *c, const char *name)
{
	size_t n = strlen(name);
	for (int i = 0; i < c->n_env; i++)
		if (!strncmp(c->env[i], name, n) && c->env[i][n] == '=')
			return c->env[i] + n + 1;
	return NULL;
}

static int mount_at(const struct fake_container *c, const char *dst)
{
	for (int i = 0; i < c->n_mounts; i++)
		if (!strcmp(c->mounts[i].dst, dst))
			return i;
	return -1;
}

/* ---- tests -------------------------------------------------------------- */

TEST(describes_its_node_and_mock_gpus)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	json_t *d = NULL;
	struct terr err = {0};
	CHECK_INT(agent_describe(a, &d, &err), 0);
	CHECK_STR(json_string_value(json_object_get(d, "id")), "node-a");
	CHECK_STR(json_string_value(json_object_get(d, "runtime")), "test-runtime 0.1-test (API 1.41)");
	CHECK(json_is_true(json_object_get(d, "mock_gpus")));
	json_t *cap = json_object_get(d, "capacity");
	CHECK_INT(json_integer_value(json_object_get(cap, "cpu_milli")), 4000);
	CHECK_INT(json_integer_value(json_object_get(cap, "mem")), 8 * GiB);
	json_t *gpus = json_object_get(d, "gpus");
	CHECK_INT(json_array_size(gpus), 1);
	CHECK_INT(json_integer_value(json_object_get(json_array_get(gpus, 0), "memory")), 8 * GiB);
	CHECK_INT(json_integer_value(json_object_get(json_array_get(gpus, 0), "sms")), 100);
	CHECK_INT(json_array_size(json_object_get(d, "containers")), 0);
	json_decref(d);
	agent_close(a);
}

TEST(a_gpu_session_gets_its_share_and_the_fgpu_files)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	const char *uuid = device_uuid(a, 0);
	char uuid_copy[64];
	snprintf(uuid_copy, sizeof(uuid_copy), "%s", uuid);
	json_t *spec = spec_for("s1", uuid_copy, 2 * GiB, 25);
	char cid[RT_ID_MAX];
	struct terr err = {0};
	CHECK_INT(agent_start_session(a, spec, cid, &err), 0);
	json_decref(spec);
	struct fake_container *c = fake_find(cid);
	CHECK(c && c->running);
	if (!c) {
		agent_close(a);
		return;
	}
	CHECK_STR(c->name, "tessera-nb1-s1");
	CHECK_STR(c->session_id, "s1");
	CHECK_STR(c->agent_id, "node-a");
	CHECK_INT(c->nano_cpus, 1500000000LL);
	CHECK_INT(c->memory, 64 * MiB);
	CHECK_INT(c->pids_limit, 4096);
	CHECK_STR(c->entry[0], AGENT_RUNNER_TARGET);
	CHECK_INT(c->n_entry, 1);

	/* The user's variables, the session's, the image's PATH with the
	 * platform's tools after it, and the share. */
	CHECK_STR(env_of(c, "A"), "1");
	CHECK_STR(env_of(c, "TESSERA_SESSION_ID"), "s1");
	CHECK_STR(env_of(c, "PATH"), "/image/bin:/bin:" FGPU_BIN_DIR);
	CHECK_STR(env_of(c, "CUDA_VISIBLE_DEVICES"), uuid_copy);
	CHECK_STR(env_of(c, FGPU_ENV_MEMORY_LIMIT), "2147483648");
	CHECK_STR(env_of(c, FGPU_ENV_SM_LIMIT), "25");
	CHECK_STR(env_of(c, FGPU_ENV_FGPU), "0.5");

	/* The contract's mounts: limits and preload read-only, the region's
	 * directory writable, the library, the node's GPU turns and the mock
	 * driver read-only. */
	static const struct { const char *dst; bool ro; } want[] = {
		{AGENT_RUNNER_TARGET, true}, {FGPU_GPU_INFO_PATH, true}, {FGPU_CONF_PATH, true},
		{FGPU_PRELOAD_PATH, true}, {FGPU_LIB_PATH, true}, {FGPU_RUN_DIR, false},
		{FGPU_MOCK_SPEC_PATH, true}, {FGPU_MOCK_CUDA_PATH, true}, {FGPU_MOCK_NVML_PATH, true},
		{FGPU_MOCK_STATE_DIR, false}, {FGPU_TURN_DIR, true},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int m = mount_at(c, want[i].dst);
		if (m < 0) {
			FAILF("no mount at %s", want[i].dst);
			continue;
		}
		CHECK_INT(c->mounts[m].ro, want[i].ro);
		CHECK(access(c->mounts[m].src, F_OK) == 0);
	}
	/* Mock devices have no device nodes. */
	CHECK_INT(c->n_devices, 0);

	/* The limits file the library reads, whatever the environment says. */
	char *text = slurp("%s/sessions/%s/fgpu.conf", "s1");
	struct fgpu_conf conf;
	CHECK(text && fgpu_conf_parse(text, &conf, &err) == 0);
	if (text) {
		CHECK_INT(conf.ndev, 1);
		CHECK_STR(conf.dev[0].uuid, uuid_copy);
		CHECK_INT(conf.dev[0].memory_limit, 2 * GiB);
		CHECK_INT(conf.dev[0].sm_limit_percent, 25);
	}
	CHECK_STR(slurp("%s/sessions/%s/ld.so.preload", "s1"), FGPU_LIB_PATH "\n");
	/* The mock driver in the container sees only the session's device. */
	char want_visible[128];
	snprintf(want_visible, sizeof(want_visible), "visible = %s\n", uuid_copy);
	CHECK_CONTAINS(slurp("%s/sessions/%s/mock-gpus", "s1"), want_visible);
	struct stat st;
	char run[256];
	snprintf(run, sizeof(run), "%s/sessions/s1/run", data_dir);
	CHECK(stat(run, &st) == 0 && (st.st_mode & 07777) == 01777);
	/* The GPU's two turn files, in the node's directory every session
	 * mounts (not the session's own). */
	int tm = mount_at(c, FGPU_TURN_DIR);
	if (tm >= 0) {
		char turn[4300];
		snprintf(turn, sizeof(turn), "%s/%s", c->mounts[tm].src, uuid_copy);
		CHECK(stat(turn, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0);
		snprintf(turn, sizeof(turn), "%s/%s" FGPU_TURN_WAIT_SUFFIX, c->mounts[tm].src, uuid_copy);
		CHECK(stat(turn, &st) == 0 && S_ISREG(st.st_mode));
		CHECK(strstr(c->mounts[tm].src, "/sessions/") == NULL);
	}

	json_t *list = NULL;
	CHECK_INT(agent_list_containers(a, &list, &err), 0);
	CHECK_INT(json_array_size(list), 1);
	CHECK_STR(json_string_value(json_object_get(json_array_get(list, 0), "session_id")), "s1");
	CHECK(json_is_true(json_object_get(json_array_get(list, 0), "running")));
	json_decref(list);

	/* Removal takes the container and the session's files. */
	CHECK_INT(agent_destroy_session(a, "s1", cid, &err), 0);
	CHECK(!fake_find(cid));
	CHECK(!exists("%s/sessions/%s", "s1"));
	/* Absent is success. */
	CHECK_INT(agent_destroy_session(a, "s1", cid, &err), 0);
	agent_close(a);
}

TEST(a_share_without_a_compute_limit_gets_the_whole_device)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	char uuid[64];
	snprintf(uuid, sizeof(uuid), "%s", device_uuid(a, 0));
	json_t *spec = spec_for("s2", uuid, 1 * GiB, 0);
	char cid[RT_ID_MAX];
	struct terr err = {0};
	CHECK_INT(agent_start_session(a, spec, cid, &err), 0);
	json_decref(spec);
	struct fake_container *c = fake_find(cid);
	CHECK(c && env_of(c, FGPU_ENV_SM_LIMIT) && !strcmp(env_of(c, FGPU_ENV_SM_LIMIT), "100"));
	char *text = slurp("%s/sessions/%s/fgpu.conf", "s2");
	struct fgpu_conf conf;
	CHECK(text && fgpu_conf_parse(text, &conf, &err) == 0);
	if (text) {
		CHECK_INT(conf.dev[0].sm_limit_percent, 100);
		CHECK_INT(conf.sm_limit_percent, 100);
	}
	CHECK_INT(agent_destroy_session(a, "s2", NULL, &err), 0);
	CHECK(!fake_find(cid));
	CHECK(!exists("%s/sessions/%s", "s2"));
	agent_close(a);
}

TEST(a_cpu_session_has_no_gpu_parts)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	json_t *spec = spec_for("s3", NULL, 0, 0);
	json_object_set_new(spec, "startup_command", json_string("echo hi"));
	char cid[RT_ID_MAX];
	struct terr err = {0};
	CHECK_INT(agent_start_session(a, spec, cid, &err), 0);
	json_decref(spec);
	struct fake_container *c = fake_find(cid);
	CHECK(c != NULL);
	if (c) {
		CHECK(mount_at(c, FGPU_PRELOAD_PATH) < 0);
		CHECK(mount_at(c, FGPU_CONF_PATH) < 0);
		CHECK(env_of(c, FGPU_ENV_MEMORY_LIMIT) == NULL);
		CHECK(env_of(c, "CUDA_VISIBLE_DEVICES") == NULL);
		/* The startup command runs under the runner. */
		CHECK_INT(c->n_entry, 5);
		CHECK_STR(c->entry[1], "--");
		CHECK_STR(c->entry[4], "echo hi");
	}
	CHECK(!exists("%s/sessions/%s", "s3"));
	agent_close(a);
}

/* Each spec is refused with a message naming what is wrong, and nothing
 * is created: no container, no session directory. */
TEST(bad_specs_are_refused_before_anything_is_made)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	char uuid[64];
	snprintf(uuid, sizeof(uuid), "%s", device_uuid(a, 0));
	static const struct { const char *what, *patch, *msg; } cases[] = {
		{"no image", "{\"image\":null}", "needs id, name, image and resources"},
		{"a path as id", "{\"id\":\"../../etc\"}", "session id '../../etc' must start with a letter or digit"},
		{"an id too long",
		 "{\"id\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", "session id must be 1 to 63 characters (got 64)"},
		{"a name with a space", "{\"name\":\"my nb\"}", "session name 'my nb' may contain only"},
		{"an empty image", "{\"image\":\"\"}", "image must be 1 to 255"},
		{"negative memory", "{\"resources\":{\"cpu_milli\":1000,\"mem\":-1}}", "resources.mem must be"},
		{"cpu as a string", "{\"resources\":{\"cpu_milli\":\"1\",\"mem\":1}}", "resources.cpu_milli must be"},
		{"huge cpu", "{\"resources\":{\"cpu_milli\":9223372036854775807}}", "cpu_milli is too large"},
		{"env not an object", "{\"env\":[\"A=1\"]}", "env must be an object"},
		{"env value a number", "{\"env\":{\"A\":1}}", "env variable 'A' needs"},
		{"env name with =", "{\"env\":{\"A=B\":\"1\"}}", "env variable 'A=B' needs"},
		{"startup_command a number", "{\"startup_command\":5}", "must be strings"},
		{"gpus not an array", "{\"gpus\":{}}", "gpus must be an array"},
		{"an unknown device", "{\"gpus\":[{\"uuid\":\"GPU-nope\",\"memory_limit\":1}]}",
		 "device GPU-nope is not on node node-a"},
		{"a device without uuid", "{\"gpus\":[{\"memory_limit\":1}]}", "device (no uuid) is not on node"},
		{"more devices than the node", "{\"gpus\":[{\"uuid\":\"@\",\"memory_limit\":1},{\"uuid\":\"@\",\"memory_limit\":1}]}",
		 "asks for 2 GPUs; node node-a has 1"},
		{"no memory limit", "{\"gpus\":[{\"uuid\":\"@\"}]}", "gpus[0].memory_limit must be 1 to 8589934592"},
		{"a limit beyond the device", "{\"gpus\":[{\"uuid\":\"@\",\"memory_limit\":8589934593}]}",
		 "memory_limit must be"},
		{"an SM limit of 0", "{\"gpus\":[{\"uuid\":\"@\",\"memory_limit\":1,\"sm_limit_percent\":0}]}",
		 "sm_limit_percent must be an integer from 1 to 100"},
		{"an SM limit of 101", "{\"gpus\":[{\"uuid\":\"@\",\"memory_limit\":1,\"sm_limit_percent\":101}]}",
		 "sm_limit_percent must be"},
		{"gpus without fgpu", "{\"resources\":{\"cpu_milli\":1},\"gpus\":[{\"uuid\":\"@\",\"memory_limit\":1}]}",
		 "needs resources.fgpu_milli above 0"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *spec = spec_for("bad1", NULL, 0, 0);
		json_object_set_new(json_object_get(spec, "resources"), "fgpu_milli", json_integer(500));
		/* "@" stands for the node's device. */
		char patch[1024], *at;
		snprintf(patch, sizeof(patch), "%s", cases[i].patch);
		while ((at = strchr(patch, '@'))) {
			char rest[1024];
			snprintf(rest, sizeof(rest), "%s", at + 1);
			snprintf(at, sizeof(patch) - (size_t)(at - patch), "%s%s", uuid, rest);
		}
		json_error_t jerr;
		json_t *p = json_loads(patch, 0, &jerr);
		if (!p) {
			FAILF("%s: bad patch: %s", cases[i].what, jerr.text);
			json_decref(spec);
			continue;
		}
		json_object_update(spec, p);
		json_decref(p);
		char cid[RT_ID_MAX];
		struct terr err = {0};
		int rc = agent_start_session(a, spec, cid, &err);
		json_decref(spec);
		if (rc != -EINVAL || !strstr(err.msg, cases[i].msg))
			FAILF("%s: rc %d, message \"%s\"; expected -EINVAL and \"%s\"", cases[i].what, rc, err.msg,
			      cases[i].msg);
		testlib_checks++;
	}
	CHECK_INT(fake.creates, 0);
	CHECK(!exists("%s/sessions/%s", "bad1"));
	/* A GPU session on a node without GPUs is refused too: NVML (the
	 * mock's, without devices) finds none. */
	struct agent_config cfg = {.id = "cpu-node", .cpu_m = 1000, .mem = GiB, .data_dir = data_dir,
				   .asset_dir = getenv("TESSERA_TEST_BUILD_ROOT"), .runtime = &fake_ops,
				   .nvml_lib_dir = getenv("TESSERA_TEST_MOCK_LIB_DIR")};
	struct agent *cpu = NULL;
	struct terr err = {0};
	char *spec_env = strdup(getenv("TESSERA_MOCK_GPUS") ?: "");
	unsetenv("TESSERA_MOCK_GPUS");
	CHECK_INT(agent_open(&cpu, &cfg, &err), 0);
	setenv("TESSERA_MOCK_GPUS", spec_env, 1);
	free(spec_env);
	if (cpu) {
		json_t *spec = spec_for("gpu-on-cpu", uuid, GiB, 50);
		char cid[RT_ID_MAX];
		CHECK_INT(agent_start_session(cpu, spec, cid, &err), -EINVAL);
		CHECK_CONTAINS(err.msg, "node cpu-node has 0");
		json_decref(spec);
		agent_close(cpu);
	}
	CHECK_INT(fake.creates, 0);
	agent_close(a);
}

/* The manager died mid-start: the container of the first attempt is
 * still there under the session's name. */
TEST(a_leftover_container_of_the_session_is_replaced)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	json_t *spec = spec_for("s4", NULL, 0, 0);
	char first[RT_ID_MAX], second[RT_ID_MAX];
	struct terr err = {0};
	CHECK_INT(agent_start_session(a, spec, first, &err), 0);
	CHECK_INT(agent_start_session(a, spec, second, &err), 0);
	json_decref(spec);
	CHECK(strcmp(first, second) != 0);
	CHECK(!fake_find(first));
	CHECK(fake_find(second) != NULL);
	CHECK_INT(fake.n, 1);
	CHECK_INT(agent_destroy_session(a, "s4", second, &err), 0);
	agent_close(a);
}

TEST(a_container_that_cannot_start_is_removed)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	json_t *spec = spec_for("s5", NULL, 0, 0);
	json_object_set_new(spec, "image", json_string("broken:latest"));
	char cid[RT_ID_MAX];
	struct terr err = {0};
	CHECK(agent_start_session(a, spec, cid, &err) < 0);
	CHECK_CONTAINS(err.msg, "OCI runtime create failed");
	CHECK_INT(fake.creates, 1);
	CHECK_INT(fake.n, 0);
	/* An image that does not exist: the runtime's message comes through. */
	json_object_set_new(spec, "image", json_string("nosuch:latest"));
	CHECK_INT(agent_start_session(a, spec, cid, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "No such image");
	CHECK_INT(fake.n, 0);
	json_decref(spec);
	agent_close(a);
}

/* ---- the usage thread on the real-driver path --------------------------- */

static pid_t sleeper(void)
{
	pid_t p = fork();
	if (p == 0) {
		for (;;)
			pause();
	}
	return p;
}

/* Waits (up to a minute: a loaded machine is slow, never wrong) until
 * the usage thread has listed the containers `rounds` more times. */
static bool wait_rounds(int rounds)
{
	pthread_mutex_lock(&fake.mu);
	int until = fake.lists + rounds;
	pthread_mutex_unlock(&fake.mu);
	for (int i = 0; i < 6000; i++) {
		pthread_mutex_lock(&fake.mu);
		int now = fake.lists;
		pthread_mutex_unlock(&fake.mu);
		if (now >= until)
			return true;
		usleep(10 * 1000);
	}
	return false;
}

static int inspects(void)
{
	pthread_mutex_lock(&fake.mu);
	int n = fake.inspects;
	pthread_mutex_unlock(&fake.mu);
	return n;
}

static void on_event(void *ud, const char *agent_id, json_t *event)
{
	(void)ud;
	(void)agent_id;
	(void)event;
}

/* Docker's list has no pids, so the agent inspects a GPU session's
 * container for its init: once per start of that init, not every round. */
TEST(the_usage_thread_inspects_a_container_once_per_start_of_its_init)
{
	fake_reset();
	const char *lib = getenv("TESSERA_TEST_MOCK_LIB_DIR");
	struct agent_config cfg = {
		.id = "node-r", .cpu_m = 4000, .mem = 8 * GiB, .data_dir = data_dir,
		.nvml_lib_dir = lib, .gpu_context_overhead = "0", .gpu_usage_interval_ms = 100,
		.asset_dir = getenv("TESSERA_TEST_BUILD_ROOT"), .runtime = &fake_ops,
		/* The OOM thread inspects each container once too: this
		 * counts the usage thread's inspects alone. */
		.oom_interval_ms = -1,
	};
	struct agent *a = NULL;
	struct terr err = {0};
	if (agent_open(&a, &cfg, &err) < 0) {
		FAILF("agent_open: %s", err.msg);
		return;
	}
	json_t *d = NULL;
	CHECK_INT(agent_describe(a, &d, &err), 0);
	CHECK(json_is_false(json_object_get(d, "mock_gpus")));
	json_decref(d);
	char uuid[64];
	snprintf(uuid, sizeof(uuid), "%s", device_uuid(a, 0));

	pid_t first = sleeper();
	pthread_mutex_lock(&fake.mu);
	fake.init_pid = first;
	pthread_mutex_unlock(&fake.mu);
	json_t *spec = spec_for("r1", uuid, GiB, 50);
	char cid[RT_ID_MAX];
	CHECK_INT(agent_start_session(a, spec, cid, &err), 0);
	json_decref(spec);
	/* Real devices come as their nodes. */
	struct fake_container *c = fake_find(cid);
	CHECK(c && c->n_devices >= 1 && !strncmp(c->devices[0], "/dev/nvidia", 11));
	/* The region appears once a process of the session uses CUDA. */
	char region[512];
	snprintf(region, sizeof(region), "%s/sessions/r1/run/" FGPU_REGION_NAME, data_dir);
	FILE *f = fopen(region, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);

	CHECK_INT(agent_watch_start(a, on_event, NULL, &err), 0);
	CHECK(wait_rounds(4));
	CHECK_INT(inspects(), 1);

	/* The container restarts: its init is another process. */
	pid_t second = sleeper();
	pthread_mutex_lock(&fake.mu);
	fake.init_pid = second;
	if ((c = fake_find(cid)))
		c->pid = second;
	pthread_mutex_unlock(&fake.mu);
	kill(first, SIGKILL);
	waitpid(first, NULL, 0);
	CHECK(wait_rounds(4));
	CHECK_INT(inspects(), 2);

	/* Gone from the list, it is forgotten; a new start is asked again. */
	CHECK_INT(agent_destroy_session(a, "r1", cid, &err), 0);
	CHECK(wait_rounds(2));
	spec = spec_for("r1", uuid, GiB, 50);
	CHECK_INT(agent_start_session(a, spec, cid, &err), 0);
	json_decref(spec);
	f = fopen(region, "w");
	if (f)
		fclose(f);
	CHECK(wait_rounds(3));
	CHECK_INT(inspects(), 3);

	agent_close(a);
	kill(second, SIGKILL);
	waitpid(second, NULL, 0);
}

/* The sessions whose deaths the agent reported, in order. */
static struct {
	pthread_mutex_t mu;
	char sessions[8][64];
	int n;
} died = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void record_death(void *ud, const char *agent_id, json_t *event)
{
	(void)ud;
	(void)agent_id;
	pthread_mutex_lock(&died.mu);
	if (died.n < 8)
		snprintf(died.sessions[died.n++], sizeof(died.sessions[0]), "%s",
			 json_string_value(json_object_get(event, "session_id")) ?: "");
	pthread_mutex_unlock(&died.mu);
}

/* Sessions listed by agent_list_containers, comma-separated in order. */
static const char *listed(struct agent *a)
{
	static char out[600];
	json_t *arr = NULL;
	struct terr err = {0};
	out[0] = '\0';
	if (agent_list_containers(a, &arr, &err) < 0) {
		snprintf(out, sizeof(out), "error: %s", err.msg);
		return out;
	}
	size_t i;
	json_t *c;
	json_array_foreach(arr, i, c) {
		size_t len = strlen(out);
		snprintf(out + len, sizeof(out) - len, "%s%s", i ? "," : "",
			 json_string_value(json_object_get(c, "session_id")));
	}
	json_decref(arr);
	return out;
}

/* Two installations on one Docker, with agents of the same id: each keeps
 * to its own containers, and to those made before containers carried the
 * installation's id. */
TEST(containers_of_another_installation_are_left_alone)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	fake_add("c-mine", "m1", "node-a", "k-mine");
	fake_add("c-old", "o1", "node-a", "");
	fake_add("c-theirs", "t1", "node-a", "k-other");
	fake_add("c-elsewhere", "e1", "node-b", "k-mine");

	/* Before it knows its installation, every container of its id. */
	CHECK_STR(listed(a), "m1,o1,t1");
	agent_set_cluster_id(a, "k-mine");
	CHECK_STR(listed(a), "m1,o1");
	json_t *arr = NULL;
	struct terr err = {0};
	CHECK_INT(agent_list_containers(a, &arr, &err), 0);
	CHECK_STR(json_string_value(json_object_get(json_array_get(arr, 0), "cluster_id")), "k-mine");
	CHECK_STR(json_string_value(json_object_get(json_array_get(arr, 1), "cluster_id")), "");
	json_decref(arr);
	json_t *d = NULL;
	CHECK_INT(agent_describe(a, &d, &err), 0);
	CHECK_INT(json_array_size(json_object_get(d, "containers")), 2);
	json_decref(d);

	/* What it starts carries the installation's id beside its own. */
	json_t *spec = spec_for("s9", NULL, 0, 0);
	char cid[RT_ID_MAX];
	CHECK_INT(agent_start_session(a, spec, cid, &err), 0);
	json_decref(spec);
	struct fake_container *c = fake_find(cid);
	CHECK(c != NULL);
	if (c) {
		CHECK_STR(c->cluster_id, "k-mine");
		CHECK_STR(c->agent_id, "node-a");
	}
	CHECK_STR(listed(a), "m1,o1,s9");

	/* A removal by session label does not reach another installation's. */
	CHECK_INT(agent_destroy_session(a, "t1", NULL, &err), 0);
	CHECK(fake_find("c-theirs") != NULL);
	CHECK_INT(agent_destroy_session(a, "o1", NULL, &err), 0);
	CHECK(fake_find("c-old") == NULL);

	/* Deaths: only its own are reported. */
	CHECK_INT(agent_watch_start(a, record_death, NULL, &err), 0);
	fake_event("c-theirs", "t1", "k-other");
	fake_event("c-mine", "m1", "k-mine");
	fake_event("c-gone", "o2", "");
	bool seen = false;
	for (int i = 0; i < 6000 && !seen; i++) {
		pthread_mutex_lock(&died.mu);
		seen = died.n >= 2;
		pthread_mutex_unlock(&died.mu);
		if (!seen)
			usleep(10 * 1000);
	}
	agent_close(a);
	CHECK_INT(died.n, 2);
	CHECK_STR(died.sessions[0], "m1");
	CHECK_STR(died.sessions[1], "o2");
}

int main(void)
{
	snprintf(data_dir, sizeof(data_dir), "/tmp/tessera-agent-test.XXXXXX");
	if (!mkdtemp(data_dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(describes_its_node_and_mock_gpus);
	RUN(a_gpu_session_gets_its_share_and_the_fgpu_files);
	RUN(a_share_without_a_compute_limit_gets_the_whole_device);
	RUN(a_cpu_session_has_no_gpu_parts);
	RUN(bad_specs_are_refused_before_anything_is_made);
	RUN(a_leftover_container_of_the_session_is_replaced);
	RUN(a_container_that_cannot_start_is_removed);
	RUN(the_usage_thread_inspects_a_container_once_per_start_of_its_init);
	RUN(containers_of_another_installation_are_left_alone);
	util_remove_tree(data_dir);
	return testlib_done();
}
