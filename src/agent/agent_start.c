/* A session's start: its spec checked, its container planned
 * (environment, mounts, GPUs, app secret) and made on its owner's
 * network; and its removal (agent_start_session, agent_destroy_session). */
#include "agent/internal.h"
#include "agent/cgkill.h"
#include "agent/session_spec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/model.h"
#include "common/units.h"
#include "common/util.h"
#include "gpuabi/fgpu_contract.h"

/* A spec can list every device of a node. */
_Static_assert(SESSION_SPEC_MAX_GPUS >= GPU_MAX_DEVICES, "session_spec.h holds too few devices");

int64_t agent_pids_limit(int64_t setting, int64_t session_cpu_m, int64_t node_cpu_m)
{
	if (setting > 0)
		return setting;
	int64_t cpu_m = session_cpu_m > 0 ? session_cpu_m : node_cpu_m;
	/* Rounded up, so that a fraction of a core still counts. */
	int64_t n = cpu_m > 0 && cpu_m <= AGENT_PIDS_LIMIT_MAX ? (cpu_m * AGENT_PIDS_PER_CPU + 999) / 1000
							       : AGENT_PIDS_LIMIT_MAX;
	if (n < AGENT_PIDS_MIN)
		n = AGENT_PIDS_MIN;
	return n > AGENT_PIDS_LIMIT_MAX ? AGENT_PIDS_LIMIT_MAX : n;
}

/* Container names must be unique on the host; the session id makes them so
 * and the name makes `docker ps` readable. */
static void container_name(const char *name, const char *id, char *buf, size_t n)
{
	snprintf(buf, n, "tessera-%s-%.8s", name, id);
}

/* What goes into one container: grows as features add to it and owns
 * every string it holds. */
struct plan {
	char *env[256 + 16];
	size_t n_env;
	/* The agent's own (runner, gpu-info, profile, the GPU files, the
	 * app secret; on real GPUs the driver's files, about 20 in all) and
	 * AGENT_MAX_FOLDER_MOUNTS folders. */
	struct rt_mount mounts[48];
	size_t n_mounts;
	bool mounts_overflow;         /* one did not fit: the start is refused */
	const char *devices[GPU_MAX_DEVICES + 8];
	size_t n_devices;
	char *owned[128];
	size_t n_owned;
};

static char *plan_keep(struct plan *p, char *s)
{
	if (s && p->n_owned < sizeof(p->owned) / sizeof(p->owned[0]))
		p->owned[p->n_owned++] = s;
	else if (s) {
		free(s);
		s = NULL;
	}
	return s;
}

static void plan_env(struct plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void plan_env(struct plan *p, const char *fmt, ...)
{
	char *v = NULL;
	va_list ap;
	va_start(ap, fmt);
	int r = vasprintf(&v, fmt, ap);
	va_end(ap);
	if (r >= 0 && p->n_env < sizeof(p->env) / sizeof(p->env[0]) - 1)
		p->env[p->n_env++] = plan_keep(p, v);
	else if (r >= 0)
		free(v);
}

static void plan_mount(struct plan *p, const char *src, const char *dst, bool ro)
{
	if (p->n_mounts < sizeof(p->mounts) / sizeof(p->mounts[0]))
		p->mounts[p->n_mounts++] = (struct rt_mount){src, dst, ro};
	else
		p->mounts_overflow = true;
}

static void plan_free(struct plan *p)
{
	for (size_t i = 0; i < p->n_owned; i++)
		free(p->owned[i]);
}

int agent_write_file(const char *path, const char *text, mode_t mode, struct terr *err)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return terr_set(err, errno, "cannot write %s: %s", path, strerror(errno));
	fputs(text, f);
	fchmod(fileno(f), mode);
	if (fclose(f) != 0)
		return terr_set(err, EIO, "cannot write %s", path);
	return 0;
}

int agent_session_dir(const struct agent *a, const char *sid, char *buf, size_t n)
{
	return snprintf(buf, n, "%s/sessions/%s", a->data_dir, sid) < (int)n ? 0 : -ENAMETOOLONG;
}

/* The node's device with that UUID; NULL when there is none. */
const struct gpu_device *agent_node_device(const struct agent *a, const char *uuid)
{
	for (int k = 0; uuid && k < a->gpus.n; k++)
		if (!strcmp(a->gpus.dev[k].uuid, uuid))
			return &a->gpus.dev[k];
	return NULL;
}

/* GPU session: the per-session files (limits, preload, shared region,
 * mock spec) and every mount and device the fGPU contract names
 * (gpuabi/fgpu_contract.h). gpus has passed check_spec: its devices are
 * the node's, each once. */
static int plan_gpus(struct agent *a, struct plan *p, const char *sid, const struct session_spec_gpu *gpus,
		     size_t n, int64_t fgpu_m, struct terr *err)
{
	char dir[PATH_MAX], path[PATH_MAX + 64];
	int rc;
	if (agent_session_dir(a, sid, dir, sizeof(dir)) < 0)
		return terr_set(err, ENAMETOOLONG, "data_dir path too long");
	if ((rc = util_mkdir_p(dir, 0755, err)) < 0)
		return rc;
	char uuids[GPU_MAX_DEVICES * 64] = "";
	char fgpu[32];
	units_format_milli(fgpu_m, fgpu, sizeof(fgpu));
	char *conf = NULL;
	size_t conf_len = 0;
	FILE *cf = open_memstream(&conf, &conf_len);
	if (!cf)
		return terr_set(err, ENOMEM, "out of memory");
	fprintf(cf, "# fGPU limits of session %s (written by the agent)\n%s = %d\n%s = %s\n%s = %zu\n",
		sid, FGPU_KEY_VERSION, FGPU_CONF_VERSION, FGPU_KEY_FGPU, fgpu, FGPU_KEY_DEVICES, n);
	int64_t sm = 100, min_mem = INT64_MAX, ctx_overhead = 0;
	for (size_t i = 0; i < n; i++) {
		const char *uuid = gpus[i].uuid;
		int64_t mem = gpus[i].memory_limit;
		int64_t pct = gpus[i].sm_limit_percent;
		const struct gpu_device *dev = agent_node_device(a, uuid);   /* check_spec found it */
		char key[64];
		snprintf(key, sizeof(key), FGPU_KEY_DEVICE_FMT_UUID, (int)i);
		fprintf(cf, "%s = %s\n", key, dev->uuid);
		snprintf(key, sizeof(key), FGPU_KEY_DEVICE_FMT_LIMIT, (int)i);
		fprintf(cf, "%s = %lld\n", key, (long long)mem);
		/* Each device its own compute share: a session holding whole
		 * devices and part of another is paced on that part only. */
		snprintf(key, sizeof(key), FGPU_KEY_DEVICE_FMT_SM, (int)i);
		if (pct < 1 || pct > 100)
			pct = 100;   /* not given: the whole device's compute */
		fprintf(cf, "%s = %lld\n", key, (long long)pct);
		/* The session-wide figure (and TESSERA_GPU_SM_LIMIT, which can
		 * only tighten) stays the one device's share, or 100 for
		 * several, so that whole devices are never throttled. */
		if (n == 1)
			sm = pct;
		if (mem < min_mem)
			min_mem = mem;
		if (dev->context_overhead > ctx_overhead)
			ctx_overhead = dev->context_overhead;
		if (i)
			strcat(uuids, ",");
		strcat(uuids, dev->uuid);
		if (!a->gpus.mock) {
			char node[64];
			snprintf(node, sizeof(node), "/dev/nvidia%d", dev->minor);
			p->devices[p->n_devices++] = plan_keep(p, strdup(node));
		}
	}
	fprintf(cf, "%s = %lld\n", FGPU_KEY_SM_LIMIT, (long long)sm);
	/* One figure for all of the session's devices: the largest. */
	fprintf(cf, "%s = %lld\n", FGPU_KEY_CTX_OVERHEAD, (long long)ctx_overhead);
	fclose(cf);
	snprintf(path, sizeof(path), "%s/fgpu.conf", dir);
	rc = agent_write_file(path, conf ? conf : "", 0644, err);
	free(conf);
	if (rc < 0)
		return rc;
	plan_mount(p, plan_keep(p, strdup(path)), FGPU_CONF_PATH, true);
	snprintf(path, sizeof(path), "%s/ld.so.preload", dir);
	if ((rc = agent_write_file(path, FGPU_LIB_PATH "\n", 0644, err)) < 0)
		return rc;
	plan_mount(p, plan_keep(p, strdup(path)), FGPU_PRELOAD_PATH, true);
	plan_mount(p, a->shim_path, FGPU_LIB_PATH, true);
	/* The shared accounting region: writable by every process of the
	 * container, whatever user it runs as. */
	snprintf(path, sizeof(path), "%s/run", dir);
	if ((rc = util_mkdir_p(path, 0777, err)) < 0)
		return rc;
	chmod(path, 01777);
	plan_mount(p, plan_keep(p, strdup(path)), FGPU_RUN_DIR, false);
	/* The node's GPU turns, the same for every session: read-only, as
	 * no tenant may change what the others lock. */
	plan_mount(p, a->turn_dir, FGPU_TURN_DIR, true);

	if (a->gpus.mock) {
		/* The mock driver sees the host's spec but only this session's
		 * devices, as a container sees only its device nodes. */
		char spec[sizeof(a->gpus.mock_spec) + sizeof(uuids) + 32];
		if (snprintf(spec, sizeof(spec), "%s\nvisible = %s\n", a->gpus.mock_spec, uuids) >= (int)sizeof(spec))
			return terr_set(err, ENAMETOOLONG, "mock GPU spec too long");
		snprintf(path, sizeof(path), "%s/mock-gpus", dir);
		if ((rc = agent_write_file(path, spec, 0644, err)) < 0)
			return rc;
		plan_mount(p, plan_keep(p, strdup(path)), FGPU_MOCK_SPEC_PATH, true);
		plan_mount(p, a->mock_cuda_path, FGPU_MOCK_CUDA_PATH, true);
		plan_mount(p, a->mock_nvml_path, FGPU_MOCK_NVML_PATH, true);
		if (a->mock_smi_path[0])
			plan_mount(p, a->mock_smi_path, FGPU_MOCK_SMI_PATH, true);
		snprintf(path, sizeof(path), "%s/mock-state", dir);
		if ((rc = util_mkdir_p(path, 0777, err)) < 0)
			return rc;
		chmod(path, 01777);
		plan_mount(p, plan_keep(p, strdup(path)), FGPU_MOCK_STATE_DIR, false);
	} else {
		static const char *const ctl[] = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"};
		for (size_t i = 0; i < sizeof(ctl) / sizeof(ctl[0]); i++)
			if (access(ctl[i], F_OK) == 0)
				p->devices[p->n_devices++] = ctl[i];
		for (size_t i = 0; i < a->n_driver_files; i++) {
			char target[PATH_MAX];
			if (gpu_driver_target(a->driver_files[i], target, sizeof(target)))
				plan_mount(p, a->driver_files[i], plan_keep(p, strdup(target)), true);
		}
	}
	plan_env(p, "NVIDIA_VISIBLE_DEVICES=%s", uuids);
	plan_env(p, "CUDA_VISIBLE_DEVICES=%s", uuids);
	plan_env(p, "%s=%s", FGPU_ENV_FGPU, fgpu);
	plan_env(p, "%s=%lld", FGPU_ENV_MEMORY_LIMIT, (long long)min_mem);
	plan_env(p, "%s=%lld", FGPU_ENV_SM_LIMIT, (long long)sm);
	return 0;
}

/* PATH of the image with the platform's tools appended, so gpu-info works
 * in `exec` too (docker exec does not go through the runner). */
static void plan_path(struct plan *p, const struct image_seen *img)
{
	const char *path = img->path ? img->path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	plan_env(p, "PATH=%s:%s", path, FGPU_BIN_DIR);
}

/* A folder mount's source must be a folder's own directory on a
 * declared storage host: HOSTPATH/ID, a real directory reached without
 * symlinks, never the host's trash nor anything else of this machine. */
static int check_mount_source(const struct agent *a, const char *src, struct terr *err)
{
	char real[PATH_MAX];
	if (!realpath(src, real))
		return terr_set(err, errno == ENOENT ? ENOENT : EINVAL, "folder directory %.200s: %s", src, strerror(errno));
	if (strcmp(real, src))
		return terr_set(err, EINVAL, "folder directory %.200s is not a plain path (symlinks or '..')", src);
	bool declared = false;
	pthread_mutex_lock((pthread_mutex_t *)&a->storage_mu);
	for (size_t i = 0; i < a->n_storage && !declared; i++) {
		size_t hl = strlen(a->storage[i].path);
		const char *rest = src + hl;
		declared = !strncmp(src, a->storage[i].path, hl) && rest[0] == '/' && rest[1] && rest[1] != '.' &&
			   !strchr(rest + 1, '/');
	}
	pthread_mutex_unlock((pthread_mutex_t *)&a->storage_mu);
	if (declared) {
		struct stat st;
		if (stat(src, &st) < 0 || !S_ISDIR(st.st_mode))
			return terr_set(err, EINVAL, "folder directory %.200s is not a directory", src);
		return 0;
	}
	return terr_set(err, EPERM, "%.200s is not a folder on a storage host this node declares (storage_hosts)", src);
}

static int64_t node_device_memory(void *ctx, const char *uuid)
{
	const struct gpu_device *dev = agent_node_device(ctx, uuid);
	return dev ? dev->memory : -1;
}

static int node_mount_source(void *ctx, const char *source, struct terr *err)
{
	return check_mount_source(ctx, source, err);
}

/* The spec read by the one codec (session_spec.h), checked against this
 * node: its devices and its storage hosts. */
static int check_spec(const struct agent *a, json_t *spec, struct session_spec *out, struct terr *err)
{
	const struct session_spec_node node = {
		.id = a->id, .n_gpus = a->gpus.n, .device_memory = node_device_memory,
		.mount_source = node_mount_source, .ctx = (void *)a,
	};
	return session_spec_from_json(spec, &node, out, err);
}

/* The session's app secret in a file of its own under data_dir, mode
 * 0400 and root's, made anew (a file left by an interrupted start is
 * replaced, never reused with other permissions); mounted read-only at
 * AGENT_APP_SECRET_PATH for the runner, which reads it before it drops
 * to the work user. */
static int plan_app_secret(struct agent *a, struct plan *p, const char *sid, const char *secret,
			   struct terr *err)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	int rc;
	if (!a->data_dir[0])
		return terr_set(err, EINVAL, "the agent has no data_dir to keep the session's app secret in");
	if (agent_session_dir(a, sid, dir, sizeof(dir)) < 0)
		return terr_set(err, ENAMETOOLONG, "data_dir path too long");
	if ((rc = util_mkdir_p(dir, 0755, err)) < 0)
		return rc;
	snprintf(path, sizeof(path), "%s/app-secret", dir);
	if (unlink(path) < 0 && errno != ENOENT)
		return terr_set(err, errno, "cannot replace %s: %s", path, strerror(errno));
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
	if (fd < 0)
		return terr_set(err, errno, "cannot write %s: %s", path, strerror(errno));
	size_t len = strlen(secret);
	bool ok = write(fd, secret, len) == (ssize_t)len;
	/* Root's when the agent runs as root (it does on a node); another
	 * agent's user still leaves it 0400, unreadable to others. */
	if (ok && geteuid() == 0 && fchown(fd, 0, 0) < 0)
		ok = false;
	if (close(fd) < 0 || !ok) {
		unlink(path);
		return terr_set(err, EIO, "cannot write %s", path);
	}
	plan_mount(p, plan_keep(p, strdup(path)), AGENT_APP_SECRET_PATH, true);
	return 0;
}

/* The session's SSH files in its directory, mounted read-only at
 * AGENT_CLUSTER_SSH_TARGET (src/runner/cluster.h): the session's key
 * pair (its sshd's host key, and a cluster session's containers' key to
 * each other) and the sshd's authorized keys (the session's own public
 * key, then the owner's). The private key is the session's user's, 0400:
 * their sshd and ssh use it where it is, so no copy of it is ever in the
 * home, which a commit keeps in the image. */
static int plan_session_ssh(struct agent *a, struct plan *p, const char *sid, const char *key, const char *pub,
			    const char *owner_keys, bool root, struct terr *err)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	char *authorized = NULL;
	if (asprintf(&authorized, "%s\n%s", pub, owner_keys ? owner_keys : "") < 0)
		return terr_set(err, ENOMEM, "out of memory");
	if (!(authorized = plan_keep(p, authorized)))
		return terr_set(err, ENOMEM, "out of memory");
	/* AGENT_WORK_UID_GID's numbers, or root's. */
	uid_t uid = root ? 0 : 1000;
	gid_t gid = root ? 0 : 1000;
	int rc;
	if (!a->data_dir[0])
		return terr_set(err, EINVAL, "the agent has no data_dir to keep the session's SSH key in");
	if (agent_session_dir(a, sid, dir, sizeof(dir)) < 0 || strlen(dir) + 16 >= sizeof(dir))
		return terr_set(err, ENAMETOOLONG, "data_dir path too long");
	strcat(dir, "/ssh");
	if ((rc = util_mkdir_p(dir, 0755, err)) < 0)
		return rc;
	const struct { const char *name, *text; mode_t mode; bool users; } files[] = {
		{"id_ed25519", key, 0400, true}, {"id_ed25519.pub", pub, 0444, false},
		{"authorized_keys", authorized, 0444, false},
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
		if (unlink(path) < 0 && errno != ENOENT)
			return terr_set(err, errno, "cannot replace %s: %s", path, strerror(errno));
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, files[i].mode);
		if (fd < 0)
			return terr_set(err, errno, "cannot write %s: %s", path, strerror(errno));
		size_t len = strlen(files[i].text);
		bool ok = write(fd, files[i].text, len) == (ssize_t)len;
		if (ok && geteuid() == 0 && fchown(fd, files[i].users ? uid : 0, files[i].users ? gid : 0) < 0)
			ok = false;
		if (close(fd) < 0 || !ok) {
			unlink(path);
			return terr_set(err, EIO, "cannot write %s", path);
		}
	}
	plan_mount(p, plan_keep(p, strdup(dir)), AGENT_CLUSTER_SSH_TARGET, true);
	return 0;
}

/* The variables of a cluster session's container: Tessera's, and those
 * torch.distributed's env:// rendezvous (and torchrun) read, each of the
 * latter only where the session's own env does not set it. One process
 * per container: LOCAL_RANK 0, RANK the container's place. */
static void plan_cluster_env(struct plan *p, const struct session_spec_cluster *c, json_t *env)
{
	const char *role = strncmp(c->host, "main", 4) ? "sub" : "main";
	plan_env(p, "TESSERA_CLUSTER_SIZE=%lld", (long long)c->size);
	plan_env(p, "TESSERA_CLUSTER_MODE=%s", c->mode);
	plan_env(p, "TESSERA_CLUSTER_ROLE=%s", role);
	plan_env(p, "TESSERA_CLUSTER_IDX=%s", c->host + strlen(role));
	plan_env(p, "TESSERA_CLUSTER_HOST=%s", c->host);
	plan_env(p, "TESSERA_CLUSTER_HOSTS=%s", c->hosts);
	plan_env(p, "TESSERA_CLUSTER_RANK=%lld", (long long)c->rank);
	if (!json_object_get(env, "MASTER_ADDR"))
		plan_env(p, "MASTER_ADDR=main1");
	if (!json_object_get(env, "MASTER_PORT"))
		plan_env(p, "MASTER_PORT=" AGENT_CLUSTER_MASTER_PORT);
	if (!json_object_get(env, "WORLD_SIZE"))
		plan_env(p, "WORLD_SIZE=%lld", (long long)c->size);
	if (!json_object_get(env, "RANK"))
		plan_env(p, "RANK=%lld", (long long)c->rank);
	if (!json_object_get(env, "LOCAL_RANK"))
		plan_env(p, "LOCAL_RANK=0");
}

/* Reads back where Docker published the app port of the started
 * container cid. A runtime that published nothing leaves it "". */
static void read_app_endpoint(struct agent *a, const char *cid, char app_endpoint[AGENT_APP_ENDPOINT_MAX])
{
	struct rt_container_info info;
	struct terr err = {0};
	if (a->rt_ops->inspect(a->rt, cid, &info, &err) < 0) {
		log_warn("agent", "cannot read the app port of %.12s: %s", cid, err.msg);
		return;
	}
	agent_app_endpoint_of(a, &info, app_endpoint, AGENT_APP_ENDPOINT_MAX);
}

/* Milliseconds since *t, and *t moved to now: the steps of a start, for
 * its log line. */
static int64_t lap_ms(int64_t *t)
{
	int64_t now = util_mono_ms(), d = now - *t;
	*t = now;
	return d;
}

/* Tracks a start of session sid: its slot, or -1 when all are taken. */
static int start_track(struct agent *a, const char *sid)
{
	int slot = -1;
	pthread_mutex_lock(&a->starts_mu);
	for (int i = 0; i < AGENT_STARTS_MAX && slot < 0; i++)
		if (!a->starts[i].sid[0]) {
			slot = i;
			util_strlcpy(a->starts[i].sid, sid, sizeof(a->starts[i].sid));
			a->starts[i].cancelled = false;
		}
	pthread_mutex_unlock(&a->starts_mu);
	return slot;
}

/* Whether the start in slot was cancelled meanwhile; forgets it when
 * done. */
static bool start_cancelled(struct agent *a, int slot, bool done)
{
	if (slot < 0)
		return false;
	pthread_mutex_lock(&a->starts_mu);
	bool c = a->starts[slot].cancelled;
	if (done)
		a->starts[slot].sid[0] = '\0';
	pthread_mutex_unlock(&a->starts_mu);
	return c;
}

/* A removal of sid: any start of it under way is cancelled. */
static void starts_cancel(struct agent *a, const char *sid)
{
	pthread_mutex_lock(&a->starts_mu);
	for (int i = 0; i < AGENT_STARTS_MAX; i++)
		if (a->starts[i].sid[0] && !strcmp(a->starts[i].sid, sid))
			a->starts[i].cancelled = true;
	pthread_mutex_unlock(&a->starts_mu);
}

void agent_starts_json(struct agent *a, json_t *arr)
{
	char cluster[64];
	agent_cluster_id_copy(a, cluster);
	pthread_mutex_lock(&a->starts_mu);
	for (int i = 0; i < AGENT_STARTS_MAX; i++) {
		if (!a->starts[i].sid[0])
			continue;
		bool listed = false;
		size_t k;
		json_t *c;
		json_array_foreach(arr, k, c)
			listed = listed || !strcmp(json_string_value(json_object_get(c, "session_id")) ?: "",
						   a->starts[i].sid);
		if (!listed)
			json_array_append_new(arr, json_pack("{s:s,s:b,s:s,s:b,s:i,s:b,s:s,s:s,s:s}", "session_id",
							     a->starts[i].sid, "starting", 1, "container_id", "",
							     "running", 0, "exit_code", 0, "oom_killed", 0, "state",
							     "starting", "cluster_id", cluster, "app_endpoint", ""));
	}
	pthread_mutex_unlock(&a->starts_mu);
}

/* Creates the container; when one of its name survived an earlier
 * attempt (the manager died mid-start), replaces it rather than fail. */
static int create_replacing(struct agent *a, const struct rt_container_spec *cs, char cid[RT_ID_MAX],
			    struct terr *err)
{
	int rc = a->rt_ops->create(a->rt, cs, cid, err);
	if (rc != -EEXIST)
		return rc;
	struct terr ignored;
	struct rt_container_info old = {0};
	if (a->rt_ops->inspect(a->rt, cs->name, &old, &ignored) == 0) {
		pthread_mutex_lock(&a->replaced_mu);
		util_strlcpy(a->replaced[a->n_replaced++ % 8], old.id, RT_ID_MAX);
		pthread_mutex_unlock(&a->replaced_mu);
	}
	a->rt_ops->remove(a->rt, cs->name, &ignored);
	return a->rt_ops->create(a->rt, cs, cid, err);
}

/* Creates and starts the container (removed again when its start
 * fails), adding the time of each to *ms_create and *ms_start (from *t,
 * moved on). */
static int create_and_start(struct agent *a, const struct rt_container_spec *cs, char cid[RT_ID_MAX], int64_t *t,
			    int64_t *ms_create, int64_t *ms_start, struct terr *err)
{
	int rc = create_replacing(a, cs, cid, err);
	*ms_create += lap_ms(t);
	if (rc == 0 && (rc = a->rt_ops->start(a->rt, cid, err)) < 0) {
		struct terr ignored;
		a->rt_ops->remove(a->rt, cid, &ignored);
	}
	*ms_start += lap_ms(t);
	return rc;
}

/* A container that joins a sandbox shares the sandbox's /etc/hosts and
 * /etc/hostname, which name the sandbox: the session gets files of its
 * own, with its name at the sandbox's address, as Docker writes them for
 * a container on a network (Docker leaves those paths to a mount). */
static int plan_sandbox_files(struct agent *a, struct plan *p, const char *sid, const char *name, const char *ip,
			      struct terr *err)
{
	char dir[PATH_MAX], path[PATH_MAX + 32], text[1024];
	int rc;
	if (agent_session_dir(a, sid, dir, sizeof(dir)) < 0)
		return terr_set(err, ENAMETOOLONG, "data_dir path too long");
	if ((rc = util_mkdir_p(dir, 0755, err)) < 0)
		return rc;
	snprintf(text, sizeof(text),
		 "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n"
		 "ff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n%s\t%s\n",
		 ip, name);
	snprintf(path, sizeof(path), "%s/hosts", dir);
	if ((rc = agent_write_file(path, text, 0644, err)) < 0)
		return rc;
	plan_mount(p, plan_keep(p, strdup(path)), "/etc/hosts", false);
	snprintf(text, sizeof(text), "%s\n", name);
	snprintf(path, sizeof(path), "%s/hostname", dir);
	if ((rc = agent_write_file(path, text, 0644, err)) < 0)
		return rc;
	plan_mount(p, plan_keep(p, strdup(path)), "/etc/hostname", false);
	return 0;
}

int agent_start_session(struct agent *a, json_t *spec, char cid[RT_ID_MAX],
			char app_endpoint[AGENT_APP_ENDPOINT_MAX], struct terr *err)
{
	return agent_start_session_timed(a, spec, cid, app_endpoint, NULL, err);
}

int agent_start_session_timed(struct agent *a, json_t *spec, char cid[RT_ID_MAX],
			      char app_endpoint[AGENT_APP_ENDPOINT_MAX], struct agent_start_times *times,
			      struct terr *err)
{
	int64_t t0 = util_mono_ms(), t = t0;
	if (times)
		memset(times, 0, sizeof(*times));
	int64_t ms_image, ms_net = 0, ms_create = 0, ms_start = 0, ms_port = 0;
	bool img_kept = false, net_asked = false;
	struct image_seen img = {0};
	if (app_endpoint)
		app_endpoint[0] = '\0';
	struct session_spec sp;
	int rc = check_spec(a, spec, &sp, err);
	if (rc < 0)
		return rc;
	int slot = start_track(a, sp.id);
	const char *id = sp.id, *name = sp.name, *image = sp.image, *owner = sp.owner, *startup = sp.startup;
	json_t *env = sp.env;
	int64_t cpu_m = sp.cpu_m, mem = sp.mem, fgpu_m = sp.fgpu_m;

	struct plan p = {0};
	/* Environment: the user's, then ours (the API refuses user variables
	 * starting with TESSERA_). */
	const char *key;
	json_t *val;
	json_object_foreach(env, key, val) {
		if (p.n_env >= 256)
			break;
		plan_env(&p, "%s=%s", key, json_string_value(val) ? json_string_value(val) : "");
	}
	plan_env(&p, "TESSERA_SESSION_ID=%s", id);
	plan_env(&p, "TESSERA_SESSION_NAME=%s", name);
	/* docker exec takes the container's environment: HOME holds there
	 * too, not only under the runner. The user's own HOME wins. */
	if (!sp.root && !json_object_get(env, "HOME"))
		plan_env(&p, "HOME=%s", AGENT_WORK_HOME);
	const struct session_spec_cluster *cl = sp.cluster.host ? &sp.cluster : NULL;
	if (cl)
		plan_cluster_env(&p, cl, env);
	/* An image that cannot be looked at leaves the image's defaults: the
	 * create below says what is wrong with it. */
	struct terr ierr = {0};
	if (agent_image_facts(a, image, &img, &img_kept, &ierr) < 0)
		memset(&img, 0, sizeof(img));
	ms_image = lap_ms(&t);
	plan_path(&p, &img);
	plan_mount(&p, a->runner_path, AGENT_RUNNER_TARGET, true);
	if (a->gpu_info_path[0])
		plan_mount(&p, a->gpu_info_path, FGPU_GPU_INFO_PATH, true);
	if (a->profile_path[0])
		plan_mount(&p, a->profile_path, AGENT_PROFILE_TARGET, true);
	/* The user's folders (checked by check_spec). Docker makes a missing
	 * target and its parents (as root) before the runner starts; the
	 * runner gives /home/work back to the work user. */
	for (size_t i = 0; i < sp.n_mounts; i++)
		plan_mount(&p, sp.mounts[i].source, sp.mounts[i].target, sp.mounts[i].readonly);
	if (sp.n_gpus > 0 && (rc = plan_gpus(a, &p, id, sp.gpus, sp.n_gpus, fgpu_m, err)) < 0)
		goto out;
	if (sp.app_secret && (rc = plan_app_secret(a, &p, id, sp.app_secret, err)) < 0)
		goto out;
	/* From the ssh part, or from the cluster part of a manager that
	 * sends only that one. */
	if (sp.ssh.key) {
		if ((rc = plan_session_ssh(a, &p, id, sp.ssh.key, sp.ssh.pub, sp.ssh.authorized_keys, sp.root, err)) < 0)
			goto out;
	} else if (cl && cl->ssh_key && (rc = plan_session_ssh(a, &p, id, cl->ssh_key, cl->ssh_pub, "", sp.root, err)) < 0) {
		goto out;
	}
	const char *apps = sp.app_secret ? img.apps : NULL;
	/* Each user's sessions on a network of their own: Docker keeps
	 * bridge networks apart, so no session reaches another user's. A
	 * cluster session's containers on one of the session's own, where
	 * each finds the others by their host names (main1, sub1...). */
	char cluster[64], net[96] = "";
	agent_cluster_id_copy(a, cluster);
	bool own_net = (sp.owner_id || cl) && a->rt_ops->network_ensure;
	const char *driver = cl && !strcmp(cl->mode, "multi-node") ? "overlay" : NULL;
	if (own_net && cl)
		agent_cluster_network_name(cluster, cl->session, net, sizeof(net));
	else if (own_net)
		agent_network_name(cluster, sp.owner_id, net, sizeof(net));
	/* On the user's network through their spare sandbox, when there is
	 * one (agent_sandbox.c): not for a cluster session (its network and
	 * names are its own), nor for a name the kernel would not take as a
	 * host name. */
	bool sbx_ok = own_net && !cl && strlen(name) < 64 && agent_sandbox_usable(a);
	char sbx_id[RT_ID_MAX] = "", sbx_ip[64] = "", sbx_pub[128] = "";
	size_t mounts_plain = p.n_mounts;
	bool sandboxed = sbx_ok && agent_sandbox_take(a, net, sbx_id, sbx_ip, sbx_pub);
	if (sandboxed && (rc = plan_sandbox_files(a, &p, id, name, sbx_ip, err)) < 0) {
		agent_sandbox_remove(a, sbx_id);
		goto out;
	}
	if (p.mounts_overflow) {
		rc = terr_set(err, E2BIG, "the session needs more than %zu mounts", sizeof(p.mounts) / sizeof(p.mounts[0]));
		if (sandboxed)   /* taken, and now no session's */
			agent_sandbox_remove(a, sbx_id);
		goto out;
	}
	p.env[p.n_env] = NULL;
	p.devices[p.n_devices] = NULL;

	/* The runner starts as root (to give images without a work user
	 * one), then drops to it for good, before anything of the session
	 * runs (src/runner/runner.c). */
	const char *run_as = sp.root ? "0:0" : AGENT_WORK_UID_GID;
	/* runner --user U:G [--apps SPEC] [--batch] [-- /bin/sh -c CMD]. A
	 * batch session's runner exits with its command's status, which
	 * ends the container and so the session (agent.h). */
	const char *entry[16];
	size_t ne = 0;
	entry[ne++] = AGENT_RUNNER_TARGET;
	/* In a sandbox the agent sets the host name once the container
	 * runs; the runner waits for it (and, should the start fall back
	 * to the container's own network, where Docker set it, finds it). */
	if (sandboxed) {
		entry[ne++] = "--hostname";
		entry[ne++] = name;
	}
	entry[ne++] = "--user";
	entry[ne++] = run_as;
	if (apps) {
		entry[ne++] = "--apps";
		entry[ne++] = apps;
	}
	if (sp.batch)
		entry[ne++] = "--batch";
	if (sp.batch || (startup && *startup)) {
		entry[ne++] = "--";
		entry[ne++] = "/bin/sh";
		entry[ne++] = "-c";
		entry[ne++] = startup;
	}
	entry[ne] = NULL;
	struct rt_label labels[8] = {
		{AGENT_LABEL_SESSION, id}, {AGENT_LABEL_AGENT, a->id},
		{AGENT_LABEL_NAME, name}, {AGENT_LABEL_OWNER, owner ? owner : ""},
		{AGENT_LABEL_RUN_AS, run_as},
	};
	size_t n_labels = 5;
	if (cluster[0])   /* left out while unknown */
		labels[n_labels++] = (struct rt_label){AGENT_LABEL_CLUSTER, cluster};
	size_t labels_plain = n_labels;
	if (sandboxed) {
		labels[n_labels++] = (struct rt_label){AGENT_LABEL_SANDBOX, sbx_id};
		labels[n_labels++] = (struct rt_label){AGENT_LABEL_SANDBOX_IP, sbx_ip};
		if (sbx_pub[0])
			labels[n_labels++] = (struct rt_label){AGENT_LABEL_SANDBOX_PUBLISHED, sbx_pub};
	}
	char cname[160];
	container_name(name, id, cname, sizeof(cname));
	struct rt_container_spec cs = {
		.name = cname,
		.image = image,
		.entrypoint = entry,
		.cmd = NULL,
		.env = (const char *const *)p.env,
		.labels = labels,
		.n_labels = n_labels,
		.mounts = p.mounts,
		.n_mounts = p.n_mounts,
		.devices = p.n_devices ? p.devices : NULL,
		.hostname = cl ? cl->host : name,
		.nano_cpus = cpu_m * 1000000,
		.memory_bytes = mem,
		.pids_limit = agent_pids_limit(a->pids_limit, cpu_m, a->capacity.cpu_m),
		.log_max_size = atomic_load(&a->log_max_size),
		.log_max_files = atomic_load(&a->log_max_files),
		.network = own_net ? net : NULL,
		.network_alias = own_net && cl ? cl->host : NULL,
		.netns_of = sandboxed ? sbx_id : NULL,
		/* Only the runner's app port, only on app_host, and only
		 * where a proxy on another host may need it (app_publish);
		 * none for a session without a secret (an older manager's). */
		.publish_port = sp.app_secret && a->app_publish ? AGENT_APP_PORT : 0,
		.publish_host = a->app_host,
		.seccomp_default = a->seccomp_default,
	};
	if (own_net)
		agent_net_use(a, net, +1);
	/* Into the sandbox's namespace: its network is ready, so the
	 * create and start set up none. One that cannot be joined (it
	 * ended meanwhile) goes, and the start sets up the container's own
	 * network as below. */
	bool joined = false;
	if (sandboxed) {
		lap_ms(&t);
		rc = create_and_start(a, &cs, cid, &t, &ms_create, &ms_start, err);
		joined = rc == 0;
		if (joined) {
			atomic_fetch_add(&a->sbx_joined, 1);
		} else {
			log_info("agent", "session %s cannot join sandbox %.12s (%s): it gets a network of its own", id,
				 sbx_id, err->msg);
			agent_sandbox_remove(a, sbx_id);
			cs.netns_of = NULL;
			cs.n_labels = labels_plain;
			cs.n_mounts = p.n_mounts = mounts_plain;
			*err = (struct terr){0};
		}
	}
	/* Three tries at most: again when the network vanished or was
	 * doubled meanwhile. The network is made once and kept (known to
	 * this agent: no call to Docker); when it vanished, the create
	 * says so and it is made again. The create joins the container
	 * to it (NetworkMode): no connect of its own. */
	for (int attempt = 0; attempt < 3 && !joined; attempt++) {
		bool asked = false;
		lap_ms(&t);
		if (own_net && (rc = agent_network_ensure(a, net, driver, cluster, sp.owner_id, &asked, err)) < 0)
			break;
		net_asked |= asked;
		ms_net += lap_ms(&t);
		rc = create_and_start(a, &cs, cid, &t, &ms_create, &ms_start, err);
		if (!own_net || !agent_network_retry(rc, err))
			break;
		agent_net_forget(a, net);
	}
	if (own_net)
		agent_net_use(a, net, -1);
	if (rc == 0 && start_cancelled(a, slot, false)) {
		/* Removed while it started (the manager that asked is gone, and
		 * the one after it was told to remove the session): no
		 * container may outlive that. */
		struct terr ignored = {0};
		a->rt_ops->remove(a->rt, cid, &ignored);
		if (joined)
			agent_sandbox_remove(a, sbx_id);
		rc = terr_set(err, ECANCELED, "session %s was removed while it started", id);
	}
	if (rc == 0 && joined) {
		/* The host name, which the runner waits for; and the app
		 * port's address (the sandbox's, from the labels) from the
		 * same look. */
		struct rt_container_info info;
		struct terr ierr = {0};
		int irc = a->rt_ops->inspect(a->rt, cid, &info, &ierr);
		if (irc == 0 && info.pid > 0)
			irc = agent_sandbox_set_hostname(info.pid, name, &ierr);
		if (irc < 0) {
			/* An agent that cannot (not root, or not on the node's
			 * process view) makes its sessions wait: no more
			 * sandboxes. */
			log_warn("agent", "session %s: cannot set its host name in its sandbox (%s); sandboxes are "
				 "turned off", id, ierr.msg);
			atomic_store(&a->sbx_on, false);
		} else if (sp.app_secret && app_endpoint) {
			agent_app_endpoint_of(a, &info, app_endpoint, AGENT_APP_ENDPOINT_MAX);
		}
		ms_port = lap_ms(&t);
	} else if (rc == 0 && sp.app_secret && app_endpoint) {
		read_app_endpoint(a, cid, app_endpoint);
		ms_port = lap_ms(&t);
	}
	/* The user's next start finds a spare again. */
	if (rc == 0 && sbx_ok)
		agent_sandbox_want(a, net, sp.owner_id);
	/* Where a start's time went (bench/session-start.sh reads it). */
	if (rc == 0)
		log_info("agent",
			 "session %s started in %lld ms: image %lld ms (%s), network %lld ms (%s), create %lld ms, "
			 "start %lld ms, app port %lld ms",
			 id, (long long)(util_mono_ms() - t0), (long long)ms_image, img_kept ? "kept" : "looked at",
			 (long long)ms_net, joined ? "sandbox" : !own_net ? "none" : net_asked ? "asked Docker" : "kept",
			 (long long)ms_create, (long long)ms_start, (long long)ms_port);
	if (rc == 0 && times)
		*times = (struct agent_start_times){
			.total_ms = util_mono_ms() - t0, .image_ms = ms_image, .network_ms = ms_net,
			.create_ms = ms_create, .start_ms = ms_start, .port_ms = ms_port,
		};
out:
	start_cancelled(a, slot, true);
	agent_image_seen_free(&img);
	plan_free(&p);
	return rc;
}

/* The per-session files go with the container. */
static void remove_session_dir(struct agent *a, const char *sid)
{
	if (!a->data_dir[0] || !sid || !*sid || strchr(sid, '/') || strstr(sid, ".."))
		return;
	char dir[PATH_MAX];
	if (agent_session_dir(a, sid, dir, sizeof(dir)) < 0)
		return;
	util_remove_tree(dir);
}

/* Stops a container before its removal: Docker's SIGKILL, and when Docker
 * has not stopped it within AGENT_KILL_WAIT_MS, its cgroups killed here
 * (cgkill.h). A fork bomb in a session of 0.5 CPU kept Docker's kill
 * from finishing for 12 minutes (issue 27); the kernel does it at once.
 * pid: its init on the host, from an inspect made before the kill (after
 * a kill that hangs, Docker answers no inspect either); 0 when unknown.
 * The removal goes on either way: once the processes are gone, Docker's
 * own kill ends and the removal with it. */
static void stop_container(struct agent *a, const char *session_id, const char *cid, int pid)
{
	if (!a->rt_ops->kill)
		return;
	struct terr kerr = {0};
	int rc = a->rt_ops->kill(a->rt, cid, AGENT_KILL_WAIT_MS, &kerr);
	if (rc == 0 || rc == -ENOENT)
		return;
	struct cgkill_report r;
	struct terr cerr = {0};
	int c = cgkill_container(pid, cid, &r, &cerr);
	if (c == 0) {
		atomic_fetch_add(&a->cgroup_kills, 1);
		log_warn("agent",
			 "session %s: Docker did not stop container %.12s within %d s (%s); killed its cgroup "
			 "directly (%s%s%s): %d processes",
			 session_id, cid, AGENT_KILL_WAIT_MS / 1000, kerr.msg, r.used_kill ? "cgroup.kill" : "",
			 r.used_kill && r.used_freezer ? ", " : "", r.used_freezer ? "freeze, SIGKILL, thaw" : "",
			 r.found);
	} else if (c == -ENOENT) {
		log_info("agent", "session %s: Docker did not stop container %.12s within %d s (%s): %s", session_id,
			 cid, AGENT_KILL_WAIT_MS / 1000, kerr.msg, cerr.msg);
	} else {
		atomic_fetch_add(&a->cgroup_kill_failures, 1);
		log_error("agent",
			  "session %s: Docker did not stop container %.12s within %d s (%s), nor could its cgroup be "
			  "killed: %s",
			  session_id, cid, AGENT_KILL_WAIT_MS / 1000, kerr.msg, cerr.msg);
	}
}

void agent_cgroup_kill_counts(struct agent *a, int64_t *kills, int64_t *failures)
{
	*kills = atomic_load(&a->cgroup_kills);
	*failures = atomic_load(&a->cgroup_kill_failures);
}

/* A cluster session's network goes with its last container on this node
 * (Docker refuses while another is attached: that one's end removes it). */
static void cluster_network_release(struct agent *a, const char *network)
{
	if (strncmp(network, AGENT_CLUSTER_NETWORK_PREFIX, strlen(AGENT_CLUSTER_NETWORK_PREFIX)) ||
	    !a->rt_ops->network_remove)
		return;
	struct terr err = {0};
	int rc = a->rt_ops->network_remove(a->rt, network, &err);
	if (rc == 0 || rc == -ENOENT)
		agent_net_forget(a, network);
	else if (rc != -EBUSY)
		log_warn("agent", "cannot remove network %s: %s", network, err.msg);
}

int agent_destroy_session(struct agent *a, const char *session_id, const char *container_id,
			  struct terr *err)
{
	struct rt_container_info info;
	struct terr ignored = {0};
	if (session_id && *session_id)
		starts_cancel(a, session_id);
	if (container_id && *container_id) {
		/* Whether and as which pid it runs, for the kill. (Its
		 * network stays, for the user's next session.) */
		int irc = a->rt_ops->inspect(a->rt, container_id, &info, &ignored);
		bool known = irc == 0;
		if (known ? info.running : irc != -ENOENT)
			stop_container(a, session_id, container_id, known ? info.pid : 0);
		int rc = a->rt_ops->remove(a->rt, container_id, err);
		if (rc == -ENOENT)
			rc = 0;
		if (rc == 0)
			remove_session_dir(a, session_id);
		if (rc == 0 && known)
			cluster_network_release(a, info.network);
		/* Its sandbox with it (the watcher would too, on the
		 * container's destroy: this is sooner). */
		if (rc == 0 && known)
			agent_sandbox_remove(a, info.sandbox);
		return rc;
	}
	/* No container id recorded (the start never reported back): find it by
	 * its session label. */
	struct rt_container_info *list = NULL;
	size_t n = 0;
	int rc = a->rt_ops->list(a->rt, AGENT_LABEL_SESSION, session_id, &list, &n, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (!agent_owns(a, list[i].cluster_id))
			continue;
		if (list[i].running)
			stop_container(a, session_id, list[i].id, 0);
		rc = a->rt_ops->remove(a->rt, list[i].id, err);
		if (rc == -ENOENT)
			rc = 0;
		if (rc == 0) {
			cluster_network_release(a, list[i].network);
			agent_sandbox_remove(a, list[i].sandbox);
		}
	}
	free(list);
	if (rc == 0)
		remove_session_dir(a, session_id);
	return rc;
}
