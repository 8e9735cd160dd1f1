#include "agent/agent.h"
#include "agent/agent_settings.h"
#include "agent/cgkill.h"
#include "agent/oomwatch.h"
#include "agent/stats.h"

#include <limits.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "common/conf.h"
#include "common/frames.h"
#include "common/jsonutil.h"
#include "common/log.h"
#include "common/model.h"
#include "common/units.h"
#include "common/util.h"
#include "gpuabi/conf.h"
#include "gpuabi/fgpu_contract.h"
#include "gpuabi/procinfo.h"
#include "gpu/gpu.h"
#include "gpu/gpu_usage.h"
#include "gpu/mock/mockspec.h"
#include "gpuabi/region.h"
#include "images/labels.h"

/* A running container's init, as the runtime last reported it: the
 * usage thread asks the runtime again only when that process is gone
 * (the container restarted, or ended). */
struct usage_init {
	char id[RT_ID_MAX];
	int pid;
	uint64_t start;               /* fgpu_proc_start_time of pid */
	bool seen;                    /* listed in the current round */
};

struct agent {
	char id[64];
	/* The installation it serves (agent_set_cluster_id); "" until known.
	 * Set by the uplink or the in-process manager while the watcher and
	 * usage threads read it: under cluster_mu. */
	pthread_mutex_t cluster_mu;
	char cluster_id[64];
	/* Containers this agent replaced itself (a start interrupted by the
	 * manager's death, made again): their deaths are no news for the
	 * session, whose new container runs. The last few, under
	 * replaced_mu (the start and the watcher thread). */
	pthread_mutex_t replaced_mu;
	char replaced[8][RT_ID_MAX];
	unsigned n_replaced;
	const struct runtime_ops *rt_ops;
	struct runtime *rt;
	char runtime_desc[128];
	char asset_dir[PATH_MAX];     /* "" : the running binary's directory */
	/* The storage hosts folders are bound from: agent.conf's, fixed for
	 * a separate agent (its own security boundary); in `tessera server`
	 * the manager's, replaced at run time (agent_set_storage_hosts), hence
	 * under storage_mu. */
	pthread_mutex_t storage_mu;
	struct model_storage_host storage[MODEL_MAX_STORAGE_HOSTS];
	size_t n_storage;
	char runner_path[PATH_MAX];
	struct res capacity;
	int64_t pids_limit;
	/* Docker's own seccomp profile for sessions rather than Tessera's
	 * (agent_config.seccomp); set at open. */
	bool seccomp_default;
	/* The log cap of new containers: agent.conf's values, or the
	 * cluster's settings of the same names (agent_cluster_set) while
	 * set; changed by the thread that follows the cluster's settings
	 * while sessions start, hence atomic. */
	_Atomic int64_t log_max_size;       /* 0: no cap */
	_Atomic int log_max_files;
	int64_t conf_log_max_size;
	int conf_log_max_files;
	char data_dir[PATH_MAX];
	/* Session apps: the address containers' app ports are published on,
	 * and the host reported for them when that is a wildcard. */
	char app_host[64];
	char app_report_host[256];
	struct gpu_inventory gpus;
	char **driver_files;          /* real GPUs: host files to bind read-only */
	size_t n_driver_files;
	/* Files mounted into sessions; empty when not found (then the feature
	 * that needs them is refused with a message). */
	char shim_path[PATH_MAX];
	char gpu_info_path[PATH_MAX];
	char profile_path[PATH_MAX];  /* AGENT_PROFILE_TARGET's file (write_profile) */
	char mock_smi_path[PATH_MAX]; /* mock GPUs: the mock driver's nvidia-smi */
	char mock_cuda_path[PATH_MAX];
	char mock_nvml_path[PATH_MAX];
	/* tessera-gpu-probe and the directory of the driver it loads ("":
	 * the loader's path); probe empty when not found. */
	char probe_path[PATH_MAX];
	char probe_lib_dir[PATH_MAX];
	char turn_dir[PATH_MAX];         /* the GPUs' turn files (fgpu/turn.h) */

	pthread_t watcher;
	bool watching;
	pthread_t image_watcher;      /* reports changes of the node's images */
	bool watching_images;
	pthread_t usage_thread;       /* charges what the driver holds (gpu_usage.h) */
	bool usage_running;
	int usage_interval_ms;
	struct usage_init *usage_inits; /* real GPUs: containers' init pids, known */
	size_t n_usage_inits;
	char usage_warned[600];       /* the usage thread's last warning, and when */
	int64_t usage_warned_ms;
	/* Set by agent_close to end the watcher and usage threads, which
	 * read it in their loops (and the runtime's watch, once a second).
	 * Relaxed: it carries no data; agent_close joins the threads before
	 * it frees what they use. False as calloc leaves it. */
	atomic_bool stop;
	agent_event_fn on_event;
	void *event_ud;
	/* Users' networks with a start under way on this agent, and how many:
	 * a destroy leaves those networks alone (net_mu). */
	pthread_mutex_t net_mu;
	struct net_use { char name[96]; int starts; } *net_uses;
	size_t n_net_uses;
	/* Users' networks this agent made or found, kept after their last
	 * session so that the next start asks Docker nothing about them;
	 * forgotten when Docker reports one removed or a create says it is
	 * gone, and then made again (net_mu). */
	struct net_known { char name[96]; } *net_known;
	size_t n_net_known;

	/* What starts need of each image (its PATH, the runner's --apps),
	 * kept by reference while the image event stream is followed
	 * (img_live), and all forgotten at any image event or when that
	 * stream ends: a pull or tag may have moved any reference. img_gen
	 * counts those, so that a look begun before one is not kept. Under
	 * img_mu. */
	pthread_mutex_t img_mu;
	struct image_seen *img_seen;
	size_t n_img_seen;
	uint64_t img_gen, img_tick;
	bool img_live;

	/* The OOM thread (oom_main): each running session's memory cgroup
	 * kill count, as last reported. Only that thread touches the table;
	 * the watcher pokes it when Docker reports an `oom` (relaxed: a
	 * hint to read now, no data). */
	pthread_t oom_thread;
	bool oom_running;
	int oom_interval_ms;          /* < 0: no OOM thread */
	atomic_bool oom_poke;
	struct oom_seen *oom_seen;
	size_t n_oom_seen;

	/* Removals that Docker did not stop in time and the agent ended by
	 * killing the container's cgroups (cgkill.h), and those where that
	 * failed too: the metrics tessera_agent_cgroup_kills_total and
	 * _failures_total. */
	_Atomic int64_t cgroup_kills, cgroup_kill_failures;

	/* The stats thread (stats_main): every stats_interval_ms, each
	 * running session's usage (stats.h), sent as one "stats" event.
	 * Only that thread touches stats_seen; the last round's event is
	 * kept under stats_mu for the agent's /metrics (agent_stats_last). */
	pthread_t stats_thread;
	bool stats_running;
	int stats_interval_ms;        /* < 0: no stats thread */
	struct stats_seen *stats_seen;
	size_t n_stats_seen;
	pthread_mutex_t stats_mu;
	json_t *stats_last;
};

/* One image as starts need it (agent.img_seen). */
struct image_seen {
	char ref[256];
	char id[RT_ID_MAX];
	char *path;                   /* its PATH; NULL: it sets none */
	char *apps;                   /* the runner's --apps; NULL: no apps */
	uint64_t used;                /* img_tick when last used: the oldest goes first */
};

/* Images kept at most (a node runs sessions of a few images). */
#define AGENT_IMAGES_KEPT 64

/* One running container the stats thread follows. */
struct stats_seen {
	char id[RT_ID_MAX];
	char session_id[64];
	int pid;
	uint64_t start;               /* of its init, against pid reuse */
	struct stats_cg cg;
	bool open;                    /* cg is open */
	bool failed;                  /* cannot be read: not tried again (logged) */
	bool seen;
	/* Its GPUs (from its fgpu.conf), read once. */
	bool gpus_read;
	int ndev;
	struct { char uuid[64]; int host_index; int64_t limit; } dev[STATS_MAX_GPUS];
	int gpu_fd;                   /* mock: its state file; real: its fGPU region; -1 */
	uint64_t busy_prev[STATS_MAX_GPUS];
	int64_t busy_prev_mono_ns;    /* 0: none yet */
};

/* One running container the OOM thread follows. */
struct oom_seen {
	char id[RT_ID_MAX];
	char path[512];               /* its count's file; "" until found */
	int64_t kills;                /* the count last reported */
	bool failed;                  /* cannot be read: not tried again (logged) */
	bool seen;                    /* listed in the current round */
};

/* Files the agent mounts into containers are built beside the tessera
 * binary (build tree: at `build_rel` under it); an installed layout keeps
 * them in /usr/lib/tessera. */
static int find_asset(const struct agent *a, const char *name, const char *build_rel, char *out, size_t n,
		      struct terr *err)
{
	char dir[PATH_MAX];
	if (a->asset_dir[0])
		util_strlcpy(dir, a->asset_dir, sizeof(dir));
	else if (util_exe_dir(dir, sizeof(dir), err) < 0)
		return -err->code;
	const char *candidates[] = {"%s/%s", "%s/../lib/tessera/%s"};
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), candidates[i], dir, i == 0 ? build_rel : name) >= (int)sizeof(path))
			continue;
		if (access(path, R_OK) == 0)
			return realpath(path, out) ? 0 : terr_set(err, errno, "cannot resolve %s", path);
	}
	char installed[PATH_MAX];
	snprintf(installed, sizeof(installed), "/usr/lib/tessera/%s", name);
	if (access(installed, R_OK) == 0)
		return util_strlcpy(out, installed, n);
	return terr_set(err, ENOENT, "cannot find %s beside %s or in /usr/lib/tessera; build it (make build)",
			name, dir);
}

static int find_runner(const struct agent *a, char *out, size_t n, struct terr *err)
{
	return find_asset(a, "tessera-runner", "tessera-runner", out, n, err);
}

/* What a CUDA context costs on each device: the fGPU library counts it
 * in every process's share (fgpu_contract.h: context_overhead). Measured
 * by default, in a process of its own; a failed measurement leaves 0 and
 * a warning, since sessions still work without it. */
static int setup_context_overhead(struct agent *a, const struct agent_config *cfg, struct terr *err)
{
	int64_t bytes;
	if (agent_settings_parse_overhead(cfg->gpu_context_overhead, &bytes, "gpu_context_overhead", err) < 0)
		return -EINVAL;
	if (bytes >= 0) {
		for (int i = 0; i < a->gpus.n; i++)
			a->gpus.dev[i].context_overhead = bytes;
		return 0;
	}
	struct terr perr = {0};
	if (!a->probe_path[0]) {
		log_warn("agent", "context overhead not measured (%s not found): contexts are not counted in GPU shares",
			 FGPU_GPU_PROBE_NAME);
		return 0;
	}
	if (util_mkdir_p(a->data_dir, 0755, &perr) < 0 ||
	    gpu_probe_context_overhead(&a->gpus, a->probe_path,
				       a->probe_lib_dir[0] ? a->probe_lib_dir : NULL, a->data_dir,
				       30000, &perr) < 0) {
		log_warn("agent", "context overhead not measured (%s): contexts are not counted in GPU shares",
			 perr.msg);
		return 0;
	}
	for (int i = 0; i < a->gpus.n; i++)
		log_info("agent", "GPU %d (%s): a CUDA context takes %lld MiB%s", i, a->gpus.dev[i].uuid,
			 (long long)(a->gpus.dev[i].context_overhead >> 20),
			 a->gpus.dev[i].context_overhead ? "" : " (not measurable here)");
	return 0;
}

/* The file every session gets at AGENT_PROFILE_TARGET: appends the
 * platform's tools to PATH where a login shell's /etc/profile has set it
 * without them. Plain sh, as every image's shell reads it. Written anew
 * at each start (by rename, so a running session keeps the file it has);
 * without a data_dir sessions go without it. */
static int write_file(const char *path, const char *text, mode_t mode, struct terr *err);

static void write_profile(struct agent *a)
{
	if (!a->data_dir[0])
		return;
	char path[PATH_MAX], tmp[PATH_MAX + 16];
	struct terr err = {0};
	if (snprintf(path, sizeof(path), "%s/profile-tessera.sh", a->data_dir) >= (int)sizeof(path))
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (util_mkdir_p(a->data_dir, 0755, &err) < 0 ||
	    write_file(tmp, "# Tessera: the platform's tools (gpu-info; nvidia-smi on mock GPUs) stay on\n"
		       "# PATH in login shells, whose /etc/profile sets PATH without them.\n"
		       "case \":$PATH:\" in\n"
		       "*:" FGPU_BIN_DIR ":*) ;;\n"
		       "*) PATH=\"${PATH:+$PATH:}" FGPU_BIN_DIR "\"; export PATH ;;\n"
		       "esac\n", 0644, &err) < 0 || rename(tmp, path) < 0) {
		log_warn("agent", "login shells in sessions will lack %s on PATH: cannot write %s: %s",
			 FGPU_BIN_DIR, path, err.msg[0] ? err.msg : strerror(errno));
		unlink(tmp);
		return;
	}
	util_strlcpy(a->profile_path, path, sizeof(a->profile_path));
}

/* GPU devices and the files GPU sessions need. */
static int setup_gpus(struct agent *a, const struct agent_config *cfg, struct terr *err)
{
	int rc;
	if (cfg->mock_gpus && *cfg->mock_gpus)
		rc = gpu_inventory_mock(cfg->mock_gpus, &a->gpus, err);
	else
		rc = gpu_inventory_nvml(cfg->nvml_lib_dir, &a->gpus, err);
	if (rc < 0)
		return rc;
	struct terr ignored = {0};
	if (find_asset(a, FGPU_GPU_INFO_NAME, "src/gpu/" FGPU_GPU_INFO_NAME, a->gpu_info_path,
		       sizeof(a->gpu_info_path), &ignored) < 0)
		log_warn("agent", "gpu-info not found; sessions will not have it: %s", ignored.msg);
	if (a->gpus.n == 0)
		return 0;
	if (!cfg->data_dir)
		return terr_set(err, EINVAL, "an agent with GPUs needs a data_dir for the sessions' fGPU limits");
	if ((rc = find_asset(a, FGPU_LIB_NAME, "src/fgpu/" FGPU_LIB_NAME, a->shim_path, sizeof(a->shim_path), err)) < 0)
		return terr_prefix(err, "the fGPU library is required on GPU nodes");
	if (a->gpus.mock) {
		if ((rc = find_asset(a, FGPU_MOCK_CUDA_NAME, "src/gpu/" FGPU_MOCK_CUDA_NAME, a->mock_cuda_path,
				     sizeof(a->mock_cuda_path), err)) < 0 ||
		    (rc = find_asset(a, FGPU_MOCK_NVML_NAME, "src/gpu/" FGPU_MOCK_NVML_NAME, a->mock_nvml_path,
				     sizeof(a->mock_nvml_path), err)) < 0)
			return terr_prefix(err, "the mock GPU driver is required with mock GPUs");
		struct terr smi_err = {0};
		if (find_asset(a, FGPU_MOCK_SMI_NAME, "src/gpu/" FGPU_MOCK_SMI_NAME, a->mock_smi_path,
			       sizeof(a->mock_smi_path), &smi_err) < 0)
			log_warn("agent", "the mock driver's nvidia-smi not found; mock GPU sessions will not have it: %s",
				 smi_err.msg);
	} else if ((rc = gpu_driver_files(&a->driver_files, &a->n_driver_files, err)) < 0) {
		return rc;
	}
	struct terr perr = {0};
	if (find_asset(a, FGPU_GPU_PROBE_NAME, "src/gpu/" FGPU_GPU_PROBE_NAME, a->probe_path,
		       sizeof(a->probe_path), &perr) < 0) {
		log_warn("agent", "%s; what the driver holds beyond the fGPU library's accounting "
			 "will not be charged to sessions", perr.msg);
		a->probe_path[0] = '\0';
	}
	if (a->gpus.mock) {
		util_strlcpy(a->probe_lib_dir, a->mock_cuda_path, sizeof(a->probe_lib_dir));
		char *slash = strrchr(a->probe_lib_dir, '/');
		if (slash)
			*slash = '\0';
	} else if (cfg->nvml_lib_dir) {
		util_strlcpy(a->probe_lib_dir, cfg->nvml_lib_dir, sizeof(a->probe_lib_dir));
	}
	log_info("agent", "%d %sGPU(s): %s (%lld MiB)%s", a->gpus.n, a->gpus.mock ? "mock " : "",
		 a->gpus.dev[0].name, (long long)(a->gpus.dev[0].memory >> 20), a->gpus.n > 1 ? ", ..." : "");
	return setup_context_overhead(a, cfg, err);
}

/* The GPU turn files (fgpu/turn.h): two empty files per device, named by
 * its UUID, in one directory that every GPU session mounts read-only, so
 * that the sessions sharing a GPU take turns at it. They are never written;
 * their locks live in the kernel. */
static int setup_turn_files(struct agent *a, struct terr *err)
{
	if (snprintf(a->turn_dir, sizeof(a->turn_dir), "%s/gpu-turns", a->data_dir) >= (int)sizeof(a->turn_dir))
		return terr_set(err, ENAMETOOLONG, "data_dir path too long");
	int rc = util_mkdir_p(a->turn_dir, 0755, err);
	if (rc < 0)
		return rc;
	for (int i = 0; i < a->gpus.n; i++)
		for (int w = 0; w < 2; w++) {
			char path[PATH_MAX + 128];
			snprintf(path, sizeof(path), "%s/%s%s", a->turn_dir, a->gpus.dev[i].uuid,
				 w ? FGPU_TURN_WAIT_SUFFIX : "");
			int fd = open(path, O_CREAT | O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0444);
			if (fd < 0)
				return terr_set(err, errno, "cannot create %s: %s", path, strerror(errno));
			close(fd);
		}
	return 0;
}

/* Docker publishes on an IP address only, so app_host must be one; a
 * name would fail each start instead of the agent's. */
static int app_hosts_setup(struct agent *a, const struct agent_config *cfg, struct terr *err)
{
	const char *host = cfg->app_host && *cfg->app_host ? cfg->app_host : "127.0.0.1";
	unsigned char buf[sizeof(struct in6_addr)];
	if (!strcmp(host, "localhost"))
		host = "127.0.0.1";
	if (strlen(host) >= sizeof(a->app_host) ||
	    (inet_pton(AF_INET, host, buf) != 1 && inet_pton(AF_INET6, host, buf) != 1))
		return terr_set(err, EINVAL, "app_host must be an IP address of this node (the one the app proxy "
				"reaches sessions on, e.g. 127.0.0.1 or 10.0.0.5), not '%.80s'", host);
	util_strlcpy(a->app_host, host, sizeof(a->app_host));
	const char *report = cfg->app_report_host && *cfg->app_report_host ? cfg->app_report_host : "127.0.0.1";
	util_strlcpy(a->app_report_host, report, sizeof(a->app_report_host));
	return 0;
}

/* "HOST:PORT" where a container's app port is published, "" when it is
 * not (made by an older agent, or not running). When the container has
 * an address on its network, ",IP:PORT@KEY" follows: the app port
 * straight over the bridge, for a proxy whose util_netns_key is KEY (on
 * this host, in this network namespace) to use without the published
 * port's userland proxy (docs/apps.md, "The direct path"). Left off when
 * it would not fit: the published port alone still works. */
static void app_endpoint_of(const struct agent *a, const struct rt_container_info *c, char *buf, size_t n)
{
	buf[0] = '\0';
	if (!c->running || c->published_private != AGENT_APP_PORT || c->published_port <= 0)
		return;
	const char *h = c->published_host[0] ? c->published_host : a->app_host;
	if (!strcmp(h, "0.0.0.0") || !strcmp(h, "::"))
		h = a->app_report_host;
	int len = snprintf(buf, n, strchr(h, ':') ? "[%s]:%d" : "%s:%d", h, c->published_port);
	char key[UTIL_NETNS_KEY_LEN + 1];
	util_netns_key(key);
	if (!c->ip[0] || !key[0] || len < 0 || (size_t)len >= n)
		return;
	int more = snprintf(buf + len, n - (size_t)len, strchr(c->ip, ':') ? ",[%s]:%d@%s" : ",%s:%d@%s", c->ip,
			    AGENT_APP_PORT, key);
	if (more < 0 || (size_t)more >= n - (size_t)len)
		buf[len] = '\0';
}

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

static void images_forget(struct agent *a);

int agent_open(struct agent **out, const struct agent_config *cfg, struct terr *err)
{
	struct agent *a = calloc(1, sizeof(*a));
	if (!a)
		return terr_set(err, ENOMEM, "out of memory");
	util_strlcpy(a->id, cfg->id ? cfg->id : "local", sizeof(a->id));
	pthread_mutex_init(&a->cluster_mu, NULL);
	pthread_mutex_init(&a->replaced_mu, NULL);
	pthread_mutex_init(&a->net_mu, NULL);
	pthread_mutex_init(&a->img_mu, NULL);
	a->rt_ops = cfg->runtime ? cfg->runtime : &runtime_docker_ops;
	if (agent_settings_parse_seccomp(cfg->seccomp, &a->seccomp_default, "seccomp", err) < 0) {
		free(a);
		return -EINVAL;
	}
	if (cfg->asset_dir)
		util_strlcpy(a->asset_dir, cfg->asset_dir, sizeof(a->asset_dir));
	a->usage_interval_ms = cfg->gpu_usage_interval_ms > 0 ? cfg->gpu_usage_interval_ms : GPU_USAGE_INTERVAL_MS;
	a->pids_limit = cfg->pids_limit > 0 ? cfg->pids_limit : 0;
	a->conf_log_max_size = cfg->log_max_size > 0 ? cfg->log_max_size : 0;
	a->conf_log_max_files = cfg->log_max_files >= 2 ? cfg->log_max_files : 5;
	atomic_store(&a->log_max_size, a->conf_log_max_size);
	atomic_store(&a->log_max_files, a->conf_log_max_files);
	a->oom_interval_ms = cfg->oom_interval_ms ? cfg->oom_interval_ms : AGENT_OOM_INTERVAL_MS;
	a->stats_interval_ms = cfg->stats_interval_ms ? cfg->stats_interval_ms : STATS_INTERVAL_MS;
	pthread_mutex_init(&a->stats_mu, NULL);
	pthread_mutex_init(&a->storage_mu, NULL);
	if (cfg->storage_hosts && *cfg->storage_hosts &&
	    model_storage_hosts_parse(cfg->storage_hosts, a->storage, MODEL_MAX_STORAGE_HOSTS, &a->n_storage, err) < 0) {
		free(a);
		return -EINVAL;
	}

	int rc;
	if (cfg->runner_path)
		rc = realpath(cfg->runner_path, a->runner_path)
			? 0 : terr_set(err, ENOENT, "runner_path %s does not exist", cfg->runner_path);
	else
		rc = find_runner(a, a->runner_path, sizeof(a->runner_path), err);
	if (rc < 0)
		goto fail;

	if (cfg->data_dir)
		util_strlcpy(a->data_dir, cfg->data_dir, sizeof(a->data_dir));
	write_profile(a);
	if ((rc = app_hosts_setup(a, cfg, err)) < 0)
		goto fail;
	if ((rc = setup_gpus(a, cfg, err)) < 0 || (a->gpus.n > 0 && (rc = setup_turn_files(a, err)) < 0))
		goto fail;
	if ((rc = a->rt_ops->open(&a->rt, cfg->runtime_endpoint, err)) < 0)
		goto fail;
	char api[16], server[64];
	if ((rc = a->rt_ops->version(a->rt, api, sizeof(api), server, sizeof(server), err)) < 0) {
		terr_prefix(err, "container runtime not reachable (is dockerd running?)");
		goto fail;
	}
	snprintf(a->runtime_desc, sizeof(a->runtime_desc), "%s %s (API %s)", a->rt_ops->name, server, api);

	struct sysinfo si;
	sysinfo(&si);
	int64_t total_mem = (int64_t)si.totalram * si.mem_unit;
	a->capacity.cpu_m = cfg->cpu_m > 0 ? cfg->cpu_m : (int64_t)sysconf(_SC_NPROCESSORS_ONLN) * 1000;
	a->capacity.mem = cfg->mem > 0 ? cfg->mem : total_mem - cfg->mem_reserve;
	if (a->capacity.mem <= 0) {
		rc = terr_set(err, EINVAL, "mem_reserve leaves no memory for sessions (host has %lld bytes)",
			      (long long)total_mem);
		goto fail;
	}
	*out = a;
	return 0;
fail:
	if (a->rt)
		a->rt_ops->close(a->rt);
	for (size_t i = 0; i < a->n_driver_files; i++)
		free(a->driver_files[i]);
	free(a->driver_files);
	pthread_mutex_destroy(&a->cluster_mu);
	pthread_mutex_destroy(&a->replaced_mu);
	pthread_mutex_destroy(&a->net_mu);
	pthread_mutex_destroy(&a->img_mu);
	pthread_mutex_destroy(&a->stats_mu);
	pthread_mutex_destroy(&a->storage_mu);
	free(a);
	return rc;
}

void agent_watch_stop(struct agent *a)
{
	if (!a)
		return;
	atomic_store_explicit(&a->stop, true, memory_order_relaxed);
	if (a->watching)
		pthread_join(a->watcher, NULL);
	if (a->watching_images)
		pthread_join(a->image_watcher, NULL);
	if (a->usage_running)
		pthread_join(a->usage_thread, NULL);
	if (a->oom_running)
		pthread_join(a->oom_thread, NULL);
	if (a->stats_running)
		pthread_join(a->stats_thread, NULL);
	a->watching = a->watching_images = a->usage_running = a->oom_running = a->stats_running = false;
}

void agent_close(struct agent *a)
{
	if (!a)
		return;
	agent_watch_stop(a);
	for (size_t i = 0; i < a->n_stats_seen; i++) {
		stats_cg_close(&a->stats_seen[i].cg);
		if (a->stats_seen[i].gpu_fd >= 0)
			close(a->stats_seen[i].gpu_fd);
	}
	free(a->stats_seen);
	json_decref(a->stats_last);
	pthread_mutex_destroy(&a->stats_mu);
	pthread_mutex_destroy(&a->storage_mu);
	free(a->oom_seen);
	free(a->usage_inits);
	a->rt_ops->close(a->rt);
	for (size_t i = 0; i < a->n_driver_files; i++)
		free(a->driver_files[i]);
	free(a->driver_files);
	free(a->net_uses);
	free(a->net_known);
	images_forget(a);
	free(a->img_seen);
	pthread_mutex_destroy(&a->cluster_mu);
	pthread_mutex_destroy(&a->replaced_mu);
	pthread_mutex_destroy(&a->net_mu);
	pthread_mutex_destroy(&a->img_mu);
	free(a);
}

const char *agent_id(const struct agent *a)
{
	return a->id;
}

int agent_cluster_check(const char *key, json_t *value, int64_t *out, struct terr *err)
{
	int64_t n = 0;
	if (!value || json_is_null(value)) {
		if (out)
			*out = -1;
		return 0;
	}
	if (!strcmp(key, "log_max_size")) {
		json_t *wrap = json_pack("{s:O}", "v", value);
		int rc = wrap ? jsonutil_get_size(wrap, "v", "log_max_size", &n, NULL, err) : -ENOMEM;
		json_decref(wrap);
		if (rc < 0 || n < 0)
			return terr_set(err, EINVAL, "log_max_size must be a size such as 100MiB (0: no cap), or null "
					"for each node's agent.conf value");
	} else if (!strcmp(key, "log_max_files")) {
		if (!json_is_integer(value) || (n = json_integer_value(value)) < 2 || n > 100)
			return terr_set(err, EINVAL, "log_max_files must be an integer from 2 to 100, or null for "
					"each node's agent.conf value");
	} else {
		return terr_set(err, ENOENT, "'%s' is not a setting of agents (known: " AGENT_CLUSTER_KEYS ")", key);
	}
	if (out)
		*out = n;
	return 0;
}

bool agent_cluster_key(const char *key)
{
	return !strcmp(key, "log_max_size") || !strcmp(key, "log_max_files");
}

void agent_set_storage_hosts(struct agent *a, const struct model_storage_host *hosts, size_t n)
{
	if (n > MODEL_MAX_STORAGE_HOSTS)
		n = MODEL_MAX_STORAGE_HOSTS;
	pthread_mutex_lock(&a->storage_mu);
	memcpy(a->storage, hosts, n * sizeof(*hosts));
	a->n_storage = n;
	pthread_mutex_unlock(&a->storage_mu);
}

int agent_cluster_set(struct agent *a, const char *key, json_t *value, struct terr *err)
{
	int64_t n;
	int rc = agent_cluster_check(key, value, &n, err);
	if (rc < 0)
		return rc;
	bool size = !strcmp(key, "log_max_size");
	int64_t was = size ? atomic_load(&a->log_max_size) : atomic_load(&a->log_max_files);
	if (n < 0)
		n = size ? a->conf_log_max_size : a->conf_log_max_files;
	if (size)
		atomic_store(&a->log_max_size, n);
	else
		atomic_store(&a->log_max_files, (int)n);
	if (was != n)
		log_info("agent", "cluster setting %s applied: %lld (was %lld)%s; sessions started from now on get it",
			 key, (long long)n, (long long)was, json_is_null(value) || !value ? ", agent.conf's value" : "");
	return 0;
}

struct res agent_capacity(const struct agent *a)
{
	return a->capacity;
}

void agent_set_cluster_id(struct agent *a, const char *cluster_id)
{
	if (!cluster_id)
		return;
	pthread_mutex_lock(&a->cluster_mu);
	if (strcmp(a->cluster_id, cluster_id) != 0) {
		util_strlcpy(a->cluster_id, cluster_id, sizeof(a->cluster_id));
		log_info("agent", "serving cluster %s", cluster_id);
	}
	pthread_mutex_unlock(&a->cluster_mu);
}

static void cluster_id_copy(struct agent *a, char out[64])
{
	pthread_mutex_lock(&a->cluster_mu);
	memcpy(out, a->cluster_id, 64);
	pthread_mutex_unlock(&a->cluster_mu);
}

/* Whether a container with this tessera.cluster label (its agent label
 * already matched) is the agent's own: another installation's containers
 * are not, those made before the label existed are. */
static bool agent_owns(struct agent *a, const char *cluster_label)
{
	char mine[64];
	cluster_id_copy(a, mine);
	return !mine[0] || !cluster_label[0] || !strcmp(mine, cluster_label);
}

static json_t *res_to_wire(const struct res *r)
{
	return json_pack("{s:I,s:I,s:I}", "cpu_milli", (json_int_t)r->cpu_m, "mem", (json_int_t)r->mem,
			 "fgpu_milli", (json_int_t)r->fgpu_m);
}

int agent_list_containers(struct agent *a, json_t **out, struct terr *err)
{
	struct rt_container_info *list = NULL;
	size_t n = 0;
	int rc = a->rt_ops->list(a->rt, AGENT_LABEL_AGENT, a->id, &list, &n, err);
	if (rc < 0)
		return rc;
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		if (!list[i].session_id[0] || !agent_owns(a, list[i].cluster_id))
			continue;
		char ep[AGENT_APP_ENDPOINT_MAX];
		app_endpoint_of(a, &list[i], ep, sizeof(ep));
		json_array_append_new(arr, json_pack("{s:s,s:s,s:b,s:i,s:b,s:s,s:s,s:s}",
			"session_id", list[i].session_id, "container_id", list[i].id,
			"running", list[i].running, "exit_code", list[i].exit_code,
			"oom_killed", list[i].oom_killed, "state", list[i].state,
			"cluster_id", list[i].cluster_id, "app_endpoint", ep));
	}
	free(list);
	*out = arr;
	return 0;
}

/* The manager takes bodies of up to 1 MiB; a list of images larger than
 * a quarter of that (hundreds of images with many labels) is not sent
 * inline but fetched by the manager over the RPC route. Takes images
 * (may be NULL); returns it, or JSON null in its place. */
static json_t *images_inline(json_t *images)
{
	char *text = images ? json_dumps(images, JSON_COMPACT) : NULL;
	size_t len = text ? strlen(text) : 0;
	free(text);
	if (images && len <= AGENT_IMAGES_INLINE_MAX)
		return images;
	if (images)
		log_info("agent", "the image list (%zu bytes) is left for the manager to fetch", len);
	json_decref(images);
	return json_null();
}

int agent_describe(struct agent *a, json_t **out, struct terr *err)
{
	json_t *containers;
	int rc = agent_list_containers(a, &containers, err);
	if (rc < 0)
		return rc;
	/* The node's images for the manager's catalog; a runtime that cannot
	 * list them, or a list too large to send, leaves them out: the
	 * manager then asks for them itself. */
	json_t *images = NULL;
	struct terr ierr = {0};
	if (a->rt_ops->image_list(a->rt, &images, &ierr) < 0)
		log_warn("agent", "listing images: %s", ierr.msg);
	images = images_inline(images);
	json_t *gpus = json_array();
	for (int i = 0; i < a->gpus.n; i++) {
		const struct gpu_device *d = &a->gpus.dev[i];
		json_array_append_new(gpus, json_pack("{s:i,s:s,s:s,s:I,s:i,s:I}", "index", d->index, "uuid", d->uuid,
						      "name", d->name, "memory", (json_int_t)d->memory, "sms", d->sms,
						      "context_overhead", (json_int_t)d->context_overhead));
	}
	*out = json_pack("{s:s,s:s,s:o,s:s,s:o,s:o,s:b,s:s,s:o}", "id", a->id, "version", TESSERA_VERSION,
			 "capacity", res_to_wire(&a->capacity), "runtime", a->runtime_desc,
			 "containers", containers, "gpus", gpus, "mock_gpus", a->gpus.mock,
			 "gpu_driver", a->gpus.driver_version, "images", images);
	return 0;
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

static int write_file(const char *path, const char *text, mode_t mode, struct terr *err)
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

static int session_dir(const struct agent *a, const char *sid, char *buf, size_t n)
{
	return snprintf(buf, n, "%s/sessions/%s", a->data_dir, sid) < (int)n ? 0 : -ENAMETOOLONG;
}

/* The node's device with that UUID; NULL when there is none. */
static const struct gpu_device *node_device(const struct agent *a, const char *uuid)
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
static int plan_gpus(struct agent *a, struct plan *p, const char *sid, json_t *gpus, int64_t fgpu_m,
		     struct terr *err)
{
	char dir[PATH_MAX], path[PATH_MAX + 64];
	int rc;
	if (session_dir(a, sid, dir, sizeof(dir)) < 0)
		return terr_set(err, ENAMETOOLONG, "data_dir path too long");
	if ((rc = util_mkdir_p(dir, 0755, err)) < 0)
		return rc;
	size_t n = json_array_size(gpus);
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
		json_t *g = json_array_get(gpus, i);
		const char *uuid = json_string_value(json_object_get(g, "uuid"));
		int64_t mem = json_integer_value(json_object_get(g, "memory_limit"));
		int64_t pct = json_integer_value(json_object_get(g, "sm_limit_percent"));
		const struct gpu_device *dev = node_device(a, uuid);   /* check_spec found it */
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
	rc = write_file(path, conf ? conf : "", 0644, err);
	free(conf);
	if (rc < 0)
		return rc;
	plan_mount(p, plan_keep(p, strdup(path)), FGPU_CONF_PATH, true);
	snprintf(path, sizeof(path), "%s/ld.so.preload", dir);
	if ((rc = write_file(path, FGPU_LIB_PATH "\n", 0644, err)) < 0)
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
		if ((rc = write_file(path, spec, 0644, err)) < 0)
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

/* ---- images: what a start needs of one, kept ------------------------- */

static void image_seen_free(struct image_seen *e)
{
	free(e->path);
	free(e->apps);
	e->path = e->apps = NULL;
}

/* Forgets every image kept (img_mu held or no other thread running). */
static void images_forget_locked(struct agent *a)
{
	for (size_t i = 0; i < a->n_img_seen; i++)
		image_seen_free(&a->img_seen[i]);
	a->n_img_seen = 0;
	a->img_gen++;
}

static void images_forget(struct agent *a)
{
	pthread_mutex_lock(&a->img_mu);
	images_forget_locked(a);
	pthread_mutex_unlock(&a->img_mu);
}

/* The runner's --apps for the image's ai.backend.service-ports, when it
 * has a valid one: its entries that are apps, each with its first port
 * (img_service_ports_runner_spec: Backend.AI's pty and internal entries
 * and port lists are not for the runner). Caller frees; NULL when none.
 * A label that does not parse is left out with a warning (once per
 * look at the image, as it is kept): the session still starts, with the
 * terminal only. */
static char *image_apps(const char *image, char **labels, size_t n)
{
	char *spec = NULL;
	struct terr err = {0};
	size_t klen = strlen(IMG_LABEL_SERVICE_PORTS);
	for (size_t i = 0; i < n && !spec; i++) {
		if (strncmp(labels[i], IMG_LABEL_SERVICE_PORTS, klen) || labels[i][klen] != '=')
			continue;
		struct img_service_port ports[IMG_MAX_SERVICE_PORTS];
		size_t np = 0;
		const char *v = labels[i] + klen + 1;
		if (*v && img_service_ports_parse(v, ports, IMG_MAX_SERVICE_PORTS, &np, &err) == 0)
			img_service_ports_runner_spec(ports, np, &spec, &err);
		else if (*v)
			log_warn("agent", "image %s: %s is not used: %s", image, IMG_LABEL_SERVICE_PORTS, err.msg);
	}
	return spec;
}

/* Asks the runtime what a start needs of image ref (one inspect with
 * image_config, else image_env and image_labels) into *e. */
static int image_look(struct agent *a, const char *ref, struct image_seen *e, struct terr *err)
{
	struct rt_image_config c = {0};
	int rc;
	if (a->rt_ops->image_config) {
		rc = a->rt_ops->image_config(a->rt, ref, &c, err);
	} else {
		rc = a->rt_ops->image_env(a->rt, ref, &c.env, &c.n_env, err);
		struct terr ignored = {0};
		if (rc == 0 && a->rt_ops->image_labels &&
		    a->rt_ops->image_labels(a->rt, ref, &c.labels, &c.n_labels, &ignored) < 0)
			c.labels = NULL, c.n_labels = 0;
	}
	if (rc < 0)
		return rc;
	memset(e, 0, sizeof(*e));
	util_strlcpy(e->ref, ref, sizeof(e->ref));
	util_strlcpy(e->id, c.id, sizeof(e->id));
	for (size_t i = 0; i < c.n_env && !e->path; i++)
		if (!strncmp(c.env[i], "PATH=", 5))
			e->path = strdup(c.env[i] + 5);
	e->apps = image_apps(ref, c.labels, c.n_labels);
	rt_image_config_free(&c);
	return 0;
}

static char *strdup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* What a start needs of image ref: from what is kept when it is (no
 * call to the runtime), else from a look, then kept. *out owns copies
 * (image_seen_free); *kept says which. -ENOENT when there is no such
 * image. Kept only while the image stream is followed: its events are
 * what says a reference moved. (The stream is counted as followed from
 * the moment it is asked for; an image changed in the milliseconds
 * before Docker starts sending it would be missed: only at an agent's
 * start or a reconnect, when next to nothing is kept.) */
static int image_facts(struct agent *a, const char *ref, struct image_seen *out, bool *kept, struct terr *err)
{
	*kept = false;
	pthread_mutex_lock(&a->img_mu);
	for (size_t i = 0; a->img_live && i < a->n_img_seen; i++) {
		struct image_seen *e = &a->img_seen[i];
		if (strcmp(e->ref, ref))
			continue;
		e->used = ++a->img_tick;
		*out = *e;
		out->path = strdup_or_null(e->path);
		out->apps = strdup_or_null(e->apps);
		pthread_mutex_unlock(&a->img_mu);
		*kept = true;
		return 0;
	}
	uint64_t gen = a->img_gen;
	pthread_mutex_unlock(&a->img_mu);

	int rc = image_look(a, ref, out, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&a->img_mu);
	if (a->img_live && gen == a->img_gen) {
		if (!a->img_seen)
			a->img_seen = calloc(AGENT_IMAGES_KEPT, sizeof(*a->img_seen));
		struct image_seen *slot = NULL;
		if (a->img_seen && a->n_img_seen < AGENT_IMAGES_KEPT) {
			slot = &a->img_seen[a->n_img_seen++];
		} else if (a->img_seen) {
			slot = &a->img_seen[0];
			for (size_t i = 1; i < a->n_img_seen; i++)
				if (a->img_seen[i].used < slot->used)
					slot = &a->img_seen[i];
			image_seen_free(slot);
		}
		if (slot) {
			*slot = *out;
			slot->path = strdup_or_null(out->path);
			slot->apps = strdup_or_null(out->apps);
			slot->used = ++a->img_tick;
		}
	}
	pthread_mutex_unlock(&a->img_mu);
	return 0;
}

/* PATH of the image with the platform's tools appended, so gpu-info works
 * in `exec` too (docker exec does not go through the runner). */
static void plan_path(struct plan *p, const struct image_seen *img)
{
	const char *path = img->path ? img->path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	plan_env(p, "PATH=%s:%s", path, FGPU_BIN_DIR);
}

/* A session spec, read by check_spec; strings borrow from the JSON. */
struct session_spec {
	const char *id, *name, *image, *owner, *startup;   /* owner, startup: may be NULL */
	const char *owner_id;                              /* may be NULL: no network of its own */
	const char *app_secret;                            /* may be NULL: no apps (older manager) */
	bool root;                                         /* run as root (the owner's policy allows it) */
	bool batch;                                        /* ends with startup */
	json_t *env, *gpus;                                /* borrowed; may be NULL */
	json_t *mounts;                                    /* borrowed; checked by check_mounts */
	int64_t cpu_m, mem, fgpu_m;
};

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

static int check_mounts(const struct agent *a, json_t *mounts, struct terr *err)
{
	if (!mounts || json_is_null(mounts))
		return 0;
	if (!json_is_array(mounts) || json_array_size(mounts) > AGENT_MAX_FOLDER_MOUNTS)
		return terr_set(err, EINVAL, "mounts must be an array of at most %d folders", AGENT_MAX_FOLDER_MOUNTS);
	size_t i;
	json_t *x;
	json_array_foreach(mounts, i, x) {
		const char *src = json_string_value(json_object_get(x, "source"));
		const char *dst = json_string_value(json_object_get(x, "target"));
		json_t *ro = json_object_get(x, "readonly");
		if (!src || !dst || (ro && !json_is_boolean(ro)))
			return terr_set(err, EINVAL, "mounts[%zu] needs source, target and a boolean readonly", i);
		int rc = model_validate_mount_target(dst, err);
		if (rc == 0)
			rc = check_mount_source(a, src, err);
		if (rc < 0)
			return terr_prefix(err, "mounts[%zu]", i);
	}
	return 0;
}

/* The manager validated the request the spec comes from; the agent still
 * checks what it turns into paths, limits and buffers, since a spec can
 * also come from any holder of the cluster secret or an older manager. */
static int check_spec(const struct agent *a, json_t *spec, struct session_spec *out, struct terr *err)
{
	const char *id = json_string_value(json_object_get(spec, "id"));
	const char *name = json_string_value(json_object_get(spec, "name"));
	const char *image = json_string_value(json_object_get(spec, "image"));
	json_t *res = json_object_get(spec, "resources");
	json_t *env = json_object_get(spec, "env");
	json_t *gpus = json_object_get(spec, "gpus");
	json_t *startup = json_object_get(spec, "startup_command");
	json_t *owner = json_object_get(spec, "owner");
	json_t *owner_id = json_object_get(spec, "owner_id");
	json_t *root = json_object_get(spec, "root");
	*out = (struct session_spec){
		.id = id, .name = name, .image = image, .owner = json_string_value(owner),
		.owner_id = json_string_value(owner_id), .root = json_is_true(root),
		.startup = json_string_value(startup), .env = env, .gpus = gpus,
		.cpu_m = json_integer_value(json_object_get(res, "cpu_milli")),
		.mem = json_integer_value(json_object_get(res, "mem")),
		.fgpu_m = json_integer_value(json_object_get(res, "fgpu_milli")),
		.batch = json_is_true(json_object_get(spec, "batch")),
		.app_secret = json_string_value(json_object_get(spec, "app_secret")),
	};
	if (!id || !name || !image || !json_is_object(res))
		return terr_set(err, EINVAL, "session spec needs id, name, image and resources");
	out->mounts = json_object_get(spec, "mounts");
	if (check_mounts(a, out->mounts, err) < 0)
		return -EINVAL;
	/* The id names the session's directory under data_dir. */
	if (model_validate_name(id, "session id", err) < 0 || model_validate_name(name, "session name", err) < 0)
		return -EINVAL;
	if (!*image || strlen(image) > 255)
		return terr_set(err, EINVAL, "image must be 1 to 255 characters");
	if ((owner && !json_is_string(owner) && !json_is_null(owner)) ||
	    (startup && !json_is_string(startup) && !json_is_null(startup)))
		return terr_set(err, EINVAL, "owner and startup_command must be strings");
	/* The owner's id names their network. */
	if (owner_id && !json_is_null(owner_id) &&
	    (!out->owner_id || model_validate_name(out->owner_id, "owner_id", err) < 0))
		return terr_set(err, EINVAL, "owner_id must be a user id (letters, digits, '.', '_', '-')");
	if (root && !json_is_boolean(root))
		return terr_set(err, EINVAL, "root must be true or false");
	json_t *secret = json_object_get(spec, "app_secret");
	bool secret_ok = !secret || json_is_null(secret);
	if (out->app_secret && strlen(out->app_secret) == AGENT_APP_SECRET_HEX) {
		secret_ok = true;
		for (const char *c = out->app_secret; *c; c++)
			secret_ok &= (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f');
	}
	if (!secret_ok)
		return terr_set(err, EINVAL, "app_secret must be %d lower-case hex characters", AGENT_APP_SECRET_HEX);
	static const char *const amounts[] = {"cpu_milli", "mem", "fgpu_milli"};
	for (size_t i = 0; i < sizeof(amounts) / sizeof(amounts[0]); i++) {
		json_t *v = json_object_get(res, amounts[i]);
		if (v && (!json_is_integer(v) || json_integer_value(v) < 0))
			return terr_set(err, EINVAL, "resources.%s must be an integer of 0 or more", amounts[i]);
	}
	if (out->batch && (!out->startup || !*out->startup))
		return terr_set(err, EINVAL, "a batch session needs a startup_command");
	if (out->cpu_m > INT64_MAX / 1000000)
		return terr_set(err, EINVAL, "resources.cpu_milli is too large");
	if (env && !json_is_object(env))
		return terr_set(err, EINVAL, "env must be an object of strings");
	if (json_object_size(env) > 256)
		return terr_set(err, EINVAL, "env has %zu variables; at most 256", json_object_size(env));
	const char *key;
	json_t *val;
	json_object_foreach(env, key, val) {
		if (!*key || strchr(key, '=') || !json_is_string(val))
			return terr_set(err, EINVAL, "env variable '%.80s' needs a name without '=' and a string value",
					key);
	}
	if (!gpus || json_is_null(gpus))
		return 0;
	if (!json_is_array(gpus))
		return terr_set(err, EINVAL, "gpus must be an array");
	size_t n = json_array_size(gpus);
	if (n > (size_t)a->gpus.n)
		return terr_set(err, EINVAL, "the session asks for %zu GPUs; node %s has %d", n, a->id, a->gpus.n);
	if (n > 0 && out->fgpu_m <= 0)
		return terr_set(err, EINVAL, "a session with gpus needs resources.fgpu_milli above 0");
	for (size_t i = 0; i < n; i++) {
		json_t *g = json_array_get(gpus, i);
		const char *uuid = json_string_value(json_object_get(g, "uuid"));
		json_t *mem = json_object_get(g, "memory_limit"), *pct = json_object_get(g, "sm_limit_percent");
		const struct gpu_device *dev = node_device(a, uuid);
		if (!dev)
			return terr_set(err, EINVAL, "device %.80s is not on node %s", uuid ? uuid : "(no uuid)", a->id);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(uuid, json_string_value(json_object_get(json_array_get(gpus, j), "uuid")) ?: ""))
				return terr_set(err, EINVAL, "device %s is listed twice", uuid);
		if (!json_is_integer(mem) || json_integer_value(mem) <= 0 || json_integer_value(mem) > dev->memory)
			return terr_set(err, EINVAL, "gpus[%zu].memory_limit must be 1 to %lld bytes (the device's memory)",
					i, (long long)dev->memory);
		if (pct && (!json_is_integer(pct) || json_integer_value(pct) < 1 || json_integer_value(pct) > 100))
			return terr_set(err, EINVAL, "gpus[%zu].sm_limit_percent must be an integer from 1 to 100", i);
	}
	return 0;
}


/* ---- users' networks ------------------------------------------------- */

/* The network of a user's sessions on this node's Docker:
 * AGENT_NETWORK_PREFIX, the user's id (16 characters: unique enough among
 * one cluster's users), '-', the cluster's (8), so that installations
 * sharing a Docker keep apart. */
static void network_name(const char *cluster, const char *owner_id, char *buf, size_t n)
{
	snprintf(buf, n, AGENT_NETWORK_PREFIX "%.16s%s%.8s", owner_id, cluster[0] ? "-" : "", cluster);
}

/* Counts a start on network name (delta +1) or its end (-1). */
static void net_use(struct agent *a, const char *name, int delta)
{
	pthread_mutex_lock(&a->net_mu);
	struct net_use *u = NULL;
	for (size_t i = 0; i < a->n_net_uses && !u; i++)
		if (!strcmp(a->net_uses[i].name, name))
			u = &a->net_uses[i];
	if (!u && delta > 0) {
		struct net_use *grown = realloc(a->net_uses, (a->n_net_uses + 1) * sizeof(*grown));
		if (grown) {
			a->net_uses = grown;
			u = &grown[a->n_net_uses++];
			util_strlcpy(u->name, name, sizeof(u->name));
			u->starts = 0;
		}
	}
	if (u) {
		u->starts += delta;
		if (u->starts <= 0)
			*u = a->net_uses[--a->n_net_uses];
	}
	pthread_mutex_unlock(&a->net_mu);
}

/* Whether network name is known to exist (net_mu held). */
static struct net_known *net_known_find(struct agent *a, const char *name)
{
	for (size_t i = 0; i < a->n_net_known; i++)
		if (!strcmp(a->net_known[i].name, name))
			return &a->net_known[i];
	return NULL;
}

/* Forgets network name: the next start of its user ensures it again. */
static void net_forget(struct agent *a, const char *name)
{
	pthread_mutex_lock(&a->net_mu);
	struct net_known *k = net_known_find(a, name);
	if (k)
		*k = a->net_known[--a->n_net_known];
	pthread_mutex_unlock(&a->net_mu);
}

/* When Docker has no address pool left for a new network: removes this
 * installation's users' networks that no running container and no start
 * of this agent uses (Docker refuses those with running containers:
 * -EBUSY), and says whether it removed any. A user's network is kept
 * after their last session only for the speed of their next start, so
 * an idle one gives way to a user who has none (net_mu held). */
static bool network_reclaim(struct agent *a, const char *cluster, const char *keep)
{
	char **names = NULL;
	size_t n = 0;
	struct terr err = {0};
	if (!cluster[0] || !a->rt_ops->network_list || !a->rt_ops->network_remove ||
	    a->rt_ops->network_list(a->rt, AGENT_LABEL_CLUSTER, cluster, &names, &n, &err) < 0)
		return false;
	int removed = 0;
	for (size_t i = 0; i < n; i++) {
		bool in_use = !strcmp(names[i], keep) ||
			      strncmp(names[i], AGENT_NETWORK_PREFIX, strlen(AGENT_NETWORK_PREFIX)) != 0;
		for (size_t k = 0; k < a->n_net_uses && !in_use; k++)
			in_use = !strcmp(a->net_uses[k].name, names[i]);
		if (!in_use && a->rt_ops->network_remove(a->rt, names[i], &err) == 0) {
			struct net_known *kn = net_known_find(a, names[i]);
			if (kn)
				*kn = a->net_known[--a->n_net_known];
			removed++;
		}
		free(names[i]);
	}
	free(names);
	if (removed)
		log_info("agent", "Docker had no address pool left for network %s: removed %d idle users' network%s",
			 keep, removed, removed == 1 ? "" : "s");
	return removed > 0;
}

/* Makes the user's network unless it is known to exist or exists.
 * *asked: whether Docker was asked. */
static int network_ensure(struct agent *a, const char *name, const char *cluster, const char *owner_id,
			  bool *asked, struct terr *err)
{
	struct rt_label labels[] = {
		{AGENT_LABEL_OWNER_ID, owner_id},
		{AGENT_LABEL_CLUSTER, cluster},   /* last: left out while unknown */
	};
	struct rt_network_spec ns = {
		.name = name, .labels = labels,
		.n_labels = sizeof(labels) / sizeof(labels[0]) - (cluster[0] ? 0 : 1),
	};
	/* One at a time: Docker's duplicate check is not atomic, and two
	 * starts of one user would otherwise make two networks of one name. */
	pthread_mutex_lock(&a->net_mu);
	*asked = false;
	int rc = 0;
	if (!net_known_find(a, name)) {
		*asked = true;
		rc = a->rt_ops->network_ensure(a->rt, &ns, err);
		if (rc < 0 && rc != -EEXIST && strstr(err->msg, "pool") && network_reclaim(a, cluster, name))
			rc = a->rt_ops->network_ensure(a->rt, &ns, err);
		struct net_known *grown = rc == 0 ? realloc(a->net_known, (a->n_net_known + 1) * sizeof(*grown)) : NULL;
		if (grown) {
			a->net_known = grown;
			util_strlcpy(grown[a->n_net_known++].name, name, sizeof(grown->name));
		}
	}
	pthread_mutex_unlock(&a->net_mu);
	return rc < 0 ? terr_prefix(err, "cannot make the network of the session's owner") : 0;
}

/* A failure worth another ensure and try: the network named at create is
 * gone (another agent on this Docker removed it between our ensure and our
 * start), or has a twin (another agent made it at the same moment as we
 * did: Docker's duplicate check is not atomic), which ensure removes. */
static bool network_retry(int rc, const struct terr *err)
{
	return rc < 0 && strstr(err->msg, "network") &&
	       (rc == -ENOENT || strstr(err->msg, "ambiguous"));
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
	if (session_dir(a, sid, dir, sizeof(dir)) < 0)
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
	app_endpoint_of(a, &info, app_endpoint, AGENT_APP_ENDPOINT_MAX);
}

/* Milliseconds since *t, and *t moved to now: the steps of a start, for
 * its log line. */
static int64_t lap_ms(int64_t *t)
{
	int64_t now = util_mono_ms(), d = now - *t;
	*t = now;
	return d;
}

int agent_start_session(struct agent *a, json_t *spec, char cid[RT_ID_MAX],
			char app_endpoint[AGENT_APP_ENDPOINT_MAX], struct terr *err)
{
	int64_t t0 = util_mono_ms(), t = t0;
	int64_t ms_image, ms_net = 0, ms_create = 0, ms_start = 0, ms_port = 0;
	bool img_kept = false, net_asked = false;
	struct image_seen img = {0};
	if (app_endpoint)
		app_endpoint[0] = '\0';
	struct session_spec sp;
	int rc = check_spec(a, spec, &sp, err);
	if (rc < 0)
		return rc;
	const char *id = sp.id, *name = sp.name, *image = sp.image, *owner = sp.owner, *startup = sp.startup;
	json_t *env = sp.env, *gpus = sp.gpus;
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
	/* An image that cannot be looked at leaves the image's defaults: the
	 * create below says what is wrong with it. */
	struct terr ierr = {0};
	if (image_facts(a, image, &img, &img_kept, &ierr) < 0)
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
	size_t mi;
	json_t *mx;
	json_array_foreach(sp.mounts, mi, mx)
		plan_mount(&p, json_string_value(json_object_get(mx, "source")),
			   json_string_value(json_object_get(mx, "target")), json_is_true(json_object_get(mx, "readonly")));
	if (json_array_size(gpus) > 0 && (rc = plan_gpus(a, &p, id, gpus, fgpu_m, err)) < 0)
		goto out;
	if (sp.app_secret && (rc = plan_app_secret(a, &p, id, sp.app_secret, err)) < 0)
		goto out;
	const char *apps = sp.app_secret ? img.apps : NULL;
	if (p.mounts_overflow) {
		rc = terr_set(err, E2BIG, "the session needs more than %zu mounts", sizeof(p.mounts) / sizeof(p.mounts[0]));
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
	char cluster[64];
	cluster_id_copy(a, cluster);
	struct rt_label labels[] = {
		{AGENT_LABEL_SESSION, id}, {AGENT_LABEL_AGENT, a->id},
		{AGENT_LABEL_NAME, name}, {AGENT_LABEL_OWNER, owner ? owner : ""},
		{AGENT_LABEL_RUN_AS, run_as},
		{AGENT_LABEL_CLUSTER, cluster},   /* last: left out while unknown */
	};
	char cname[160], net[96] = "";
	container_name(name, id, cname, sizeof(cname));
	/* Each user's sessions on a network of their own: Docker keeps
	 * bridge networks apart, so no session reaches another user's. */
	bool own_net = sp.owner_id && a->rt_ops->network_ensure;
	if (own_net)
		network_name(cluster, sp.owner_id, net, sizeof(net));
	struct rt_container_spec cs = {
		.name = cname,
		.image = image,
		.entrypoint = entry,
		.cmd = NULL,
		.env = (const char *const *)p.env,
		.labels = labels,
		.n_labels = sizeof(labels) / sizeof(labels[0]) - (cluster[0] ? 0 : 1),
		.mounts = p.mounts,
		.n_mounts = p.n_mounts,
		.devices = p.n_devices ? p.devices : NULL,
		.hostname = name,
		.nano_cpus = cpu_m * 1000000,
		.memory_bytes = mem,
		.pids_limit = agent_pids_limit(a->pids_limit, cpu_m, a->capacity.cpu_m),
		.log_max_size = atomic_load(&a->log_max_size),
		.log_max_files = atomic_load(&a->log_max_files),
		.network = own_net ? net : NULL,
		/* Only the runner's app port, only on app_host; none for a
		 * session without a secret (an older manager's). */
		.publish_port = sp.app_secret ? AGENT_APP_PORT : 0,
		.publish_host = a->app_host,
		.seccomp_default = a->seccomp_default,
	};
	if (own_net)
		net_use(a, net, +1);
	/* Three tries at most: again when the network vanished or was
	 * doubled meanwhile. The network is made once and kept (known to
	 * this agent: no call to Docker); when it vanished, the create
	 * says so and it is made again. The create joins the container
	 * to it (NetworkMode): no connect of its own. */
	for (int attempt = 0; attempt < 3; attempt++) {
		bool asked = false;
		lap_ms(&t);
		if (own_net && (rc = network_ensure(a, net, cluster, sp.owner_id, &asked, err)) < 0)
			break;
		net_asked |= asked;
		ms_net += lap_ms(&t);
		rc = a->rt_ops->create(a->rt, &cs, cid, err);
		if (rc == -EEXIST) {
			/* A container of this session survived an earlier attempt (the
			 * manager died mid-start): replace it rather than fail. */
			struct terr ignored;
			struct rt_container_info old = {0};
			if (a->rt_ops->inspect(a->rt, cname, &old, &ignored) == 0) {
				pthread_mutex_lock(&a->replaced_mu);
				util_strlcpy(a->replaced[a->n_replaced++ % 8], old.id, RT_ID_MAX);
				pthread_mutex_unlock(&a->replaced_mu);
			}
			a->rt_ops->remove(a->rt, cname, &ignored);
			rc = a->rt_ops->create(a->rt, &cs, cid, err);
		}
		ms_create += lap_ms(&t);
		if (rc == 0 && (rc = a->rt_ops->start(a->rt, cid, err)) < 0) {
			struct terr ignored;
			a->rt_ops->remove(a->rt, cid, &ignored);
		}
		ms_start += lap_ms(&t);
		if (!own_net || !network_retry(rc, err))
			break;
		net_forget(a, net);
	}
	if (own_net)
		net_use(a, net, -1);
	if (rc == 0 && sp.app_secret && app_endpoint) {
		read_app_endpoint(a, cid, app_endpoint);
		ms_port = lap_ms(&t);
	}
	/* Where a start's time went (bench/session-start.sh reads it). */
	if (rc == 0)
		log_info("agent",
			 "session %s started in %lld ms: image %lld ms (%s), network %lld ms (%s), create %lld ms, "
			 "start %lld ms, app port %lld ms",
			 id, (long long)(util_mono_ms() - t0), (long long)ms_image, img_kept ? "kept" : "looked at",
			 (long long)ms_net, !own_net ? "none" : net_asked ? "asked Docker" : "kept",
			 (long long)ms_create, (long long)ms_start, (long long)ms_port);
out:
	image_seen_free(&img);
	plan_free(&p);
	return rc;
}

/* The per-session files go with the container. */
static void remove_session_dir(struct agent *a, const char *sid)
{
	if (!a->data_dir[0] || !sid || !*sid || strchr(sid, '/') || strstr(sid, ".."))
		return;
	char dir[PATH_MAX];
	if (session_dir(a, sid, dir, sizeof(dir)) < 0)
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

int agent_destroy_session(struct agent *a, const char *session_id, const char *container_id,
			  struct terr *err)
{
	struct rt_container_info info;
	struct terr ignored = {0};
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
	}
	free(list);
	if (rc == 0)
		remove_session_dir(a, session_id);
	return rc;
}

/* A container started before the runner knew --timeout still has the old
 * binary mounted (a bind mount keeps the old file): it answers a wrapped
 * command with its usage and exit code 2, and the command is then run as
 * before, without the limit. That answer is known only at its end, so
 * the wrapped command's stderr is held back while it could still be it:
 * until stdout says anything, more than RETRY_HOLD bytes came, or it
 * ended. Everything else passes through, re-framed as it came. */
#define RETRY_HOLD 1024

struct exec_retry {
	struct agent *a;
	char cid[RT_ID_MAX];
	char **argv;             /* the plain command, copied, NULL-terminated */
	char user[32];            /* the user it runs as, "" for the container's */
	struct pump *inner;      /* the stream being read */
	struct pump *out;
	struct frames_decoder dec;
	char held[RETRY_HOLD];
	size_t held_len;
	bool deciding;           /* stderr is held back */
	bool old_runner;
	bool write_failed;
};

static void exec_retry_free(void *ud)
{
	struct exec_retry *r = ud;
	pump_close(r->inner);
	for (size_t i = 0; r->argv && r->argv[i]; i++)
		free(r->argv[i]);
	free(r->argv);
	free(r);
}

static int retry_put(struct exec_retry *r, enum frame_type type, const void *data, size_t len)
{
	unsigned char hdr[FRAMES_HEADER];
	frames_header(hdr, type, (uint32_t)len);
	if (pump_write(r->out, hdr, sizeof(hdr)) < 0 || pump_write(r->out, data, len) < 0) {
		r->write_failed = true;
		return 1;
	}
	return 0;
}

static int retry_release(struct exec_retry *r)
{
	r->deciding = false;
	return r->held_len ? retry_put(r, FRAME_STDERR, r->held, r->held_len) : 0;
}

static int retry_data(void *ud, enum frame_type type, const char *data, size_t len)
{
	struct exec_retry *r = ud;
	if (r->deciding && type == FRAME_STDERR && r->held_len + len <= sizeof(r->held)) {
		memcpy(r->held + r->held_len, data, len);
		r->held_len += len;
		return 0;
	}
	if (r->deciding && retry_release(r))
		return 1;
	return retry_put(r, type, data, len);
}

static int retry_end(void *ud, bool exited, int32_t code, const char *error)
{
	struct exec_retry *r = ud;
	if (r->deciding && exited && code == 2 &&
	    memmem(r->held, r->held_len, "usage: tessera-runner", 21) &&
	    !memmem(r->held, r->held_len, "--timeout SECONDS", 17)) {
		r->old_runner = true;
		return 0;
	}
	if (r->deciding && retry_release(r))
		return 1;
	if (exited) {
		unsigned char fr[FRAMES_HEADER + 4];
		frames_exit(fr, code);
		if (pump_write(r->out, fr, sizeof(fr)) < 0)
			r->write_failed = true;
		return r->write_failed;
	}
	return retry_put(r, FRAME_ERROR, error, strlen(error));
}

/* Reads r->inner into fn (decoder or plain copy) until it ends; waits in
 * steps so that a reader who left is noticed. 0 at its end, else the
 * error. */
static int retry_pass(struct exec_retry *r, bool decode, struct terr *err)
{
	char buf[16384];
	for (;;) {
		long n = pump_read(r->inner, buf, sizeof(buf), 500);
		if (n == -ETIMEDOUT) {
			if (atomic_load_explicit(pump_cancel_flag(r->out), memory_order_relaxed))
				return terr_set(err, ECANCELED, "exec: the reader went away");
			continue;
		}
		if (n < 0) {
			*err = *pump_error(r->inner);
			return -(err->code ? err->code : EIO);
		}
		if (n == 0)
			return 0;
		if (decode ? frames_feed(&r->dec, buf, (size_t)n) < 0 : pump_write(r->out, buf, (size_t)n) < 0)
			break;
	}
	if (r->write_failed || !decode)
		return terr_set(err, ECANCELED, "exec: the reader went away");
	return 0;   /* the decoder refused the stream: judged by the caller */
}

static int exec_retry_produce(struct pump *p, void *ud, struct terr *err)
{
	struct exec_retry *r = ud;
	r->out = p;
	pump_ready(p);
	int rc = retry_pass(r, true, err);
	if (rc < 0)
		return rc;
	if (!r->old_runner) {
		if (frames_finish(&r->dec) < 0) {
			static const char msg[] = "exec: the command's output stream was cut short";
			retry_put(r, FRAME_ERROR, msg, sizeof(msg) - 1);
		}
		return 0;
	}
	pump_close(r->inner);
	r->inner = NULL;
	struct terr e = {0};
	if (r->a->rt_ops->exec_stream(r->a->rt, r->cid, (const char *const *)r->argv, NULL,
				      r->user[0] ? r->user : NULL, r->user[0] ? AGENT_WORK_HOME : NULL,
				      &r->inner, &e) < 0) {
		retry_put(r, FRAME_ERROR, e.msg, strlen(e.msg));
		return 0;
	}
	return retry_pass(r, false, err);
}

int agent_exec_stream(struct agent *a, const char *container_id, const char *const *argv,
		      int timeout_s, struct pump **out, struct terr *err)
{
	*out = NULL;
	/* As the session's own user, from its container's label (set at
	 * create, out of the session's reach); a container without it, made
	 * before sessions had a user, runs everything as root. */
	struct rt_container_info info;
	int rc = a->rt_ops->inspect(a->rt, container_id, &info, err);
	if (rc < 0)
		return rc;
	const char *user = NULL, *workdir = NULL;
	if (info.run_as[0] && strcmp(info.run_as, "0:0") != 0) {
		user = info.run_as;
		workdir = AGENT_WORK_HOME;
	}
	if (timeout_s <= 0)
		return a->rt_ops->exec_stream(a->rt, container_id, argv, NULL, user, workdir, out, err);
	/* docker exec cannot stop what it started: the runner (in every
	 * session, on PATH or not) runs the command and stops it in time. */
	size_t n = 0;
	while (argv[n])
		n++;
	struct exec_retry *r = calloc(1, sizeof(*r));
	const char **wrapped = calloc(n + 5, sizeof(char *));
	if (r)
		r->argv = calloc(n + 1, sizeof(char *));
	bool ok = r && wrapped && r->argv;
	for (size_t i = 0; ok && i < n; i++)
		ok = (r->argv[i] = strdup(argv[i])) != NULL;
	if (!ok) {
		free(wrapped);
		if (r)
			exec_retry_free(r);
		return terr_set(err, ENOMEM, "out of memory");
	}
	r->a = a;
	util_strlcpy(r->cid, container_id, sizeof(r->cid));
	if (user)
		util_strlcpy(r->user, user, sizeof(r->user));
	r->deciding = true;
	frames_decoder_init(&r->dec, &(struct frames_sink){.on_data = retry_data, .on_end = retry_end, .ud = r});
	char secs[16];
	snprintf(secs, sizeof(secs), "%d", timeout_s);
	wrapped[0] = AGENT_RUNNER_TARGET;
	wrapped[1] = "--timeout";
	wrapped[2] = secs;
	wrapped[3] = "--";
	memcpy(wrapped + 4, argv, n * sizeof(char *));
	rc = a->rt_ops->exec_stream(a->rt, container_id, wrapped, NULL, user, workdir, &r->inner, err);
	free(wrapped);
	if (rc < 0) {
		exec_retry_free(r);
		return rc;
	}
	return pump_start(out, 0, exec_retry_produce, r, exec_retry_free, err);
}

int agent_logs_stream(struct agent *a, const char *container_id, int tail, bool follow,
		      struct pump **out, struct terr *err)
{
	return a->rt_ops->logs_stream(a->rt, container_id, tail, follow, out, err);
}

/* The manager asks this before each start (to pull what is missing):
 * answered from the images kept for starts, and a look at one that is
 * not kept keeps it for the start that follows. */
int agent_image_exists(struct agent *a, const char *ref, bool *exists, struct terr *err)
{
	struct image_seen img;
	bool kept;
	int rc = image_facts(a, ref, &img, &kept, err);
	*exists = rc == 0;
	if (rc == 0)
		image_seen_free(&img);
	else if (rc != -ENOENT)
		return a->rt_ops->image_exists(a->rt, ref, exists, err);
	return 0;
}

int agent_images(struct agent *a, json_t **images, struct terr *err)
{
	return a->rt_ops->image_list(a->rt, images, err);
}

int agent_image_remove(struct agent *a, const char *ref, struct terr *err)
{
	if (!a->rt_ops->image_remove)
		return terr_set(err, ENOSYS, "the container runtime of node %s cannot remove images", a->id);
	return a->rt_ops->image_remove(a->rt, ref, err);
}

bool agent_signal_words(int exit_code, char *buf, size_t n)
{
	/* 128+N: the runner, PID 1, ended by signal N. It handles TERM, INT,
	 * HUP, QUIT, USR1 and USR2 itself and exits 0 after TERM; and a
	 * process in its PID namespace cannot signal it unless it handles
	 * the signal: a SIGKILL came from the node (docker kill, kill -9 as
	 * root), since an OOM kill of it sets the OOM flag instead. */
	if (exit_code <= 128 || exit_code > 128 + 64)
		return false;
	int sig = exit_code - 128;
	const char *abbrev = sigabbrev_np(sig);
	char name[32];
	if (abbrev)
		snprintf(name, sizeof(name), "SIG%s", abbrev);
	else
		snprintf(name, sizeof(name), "signal %d", sig);
	if (sig == SIGKILL)
		snprintf(buf, n, "killed by %s from outside the session (docker kill or kill -9 on its node)", name);
	else if (abbrev)
		snprintf(buf, n, "killed by %s (signal %d)", name, sig);
	else
		snprintf(buf, n, "killed by %s", name);
	return true;
}

/* Words for why a container ended, for status_info. */
static void death_reason(const struct rt_container_info *info, char *buf, size_t n)
{
	char killed[128];
	if (info->oom_killed)
		snprintf(buf, n, "container was OOM-killed (exceeded its memory limit), exit code %d",
			 info->exit_code);
	else if (info->error[0])
		snprintf(buf, n, "container ended with exit code %d: %s", info->exit_code, info->error);
	else if (agent_signal_words(info->exit_code, killed, sizeof(killed)))
		snprintf(buf, n, "container was %s, exit code %d", killed, info->exit_code);
	else
		snprintf(buf, n, "container ended by itself with exit code %d", info->exit_code);
}

static int on_runtime_event(const struct rt_event *ev, void *ud)
{
	struct agent *a = ud;
	if (!strcmp(ev->action, "oom")) {
		/* Counted by the OOM thread, which reads the cgroup now. */
		atomic_store_explicit(&a->oom_poke, true, memory_order_relaxed);
		return 0;
	}
	if (strcmp(ev->action, "die") != 0 || !ev->session_id[0] || !agent_owns(a, ev->cluster_id))
		return 0;
	bool replaced = false;
	pthread_mutex_lock(&a->replaced_mu);
	for (unsigned i = 0; i < 8 && !replaced; i++)
		replaced = a->replaced[i][0] && !strcmp(a->replaced[i], ev->container_id);
	pthread_mutex_unlock(&a->replaced_mu);
	if (replaced)
		return 0;
	struct rt_container_info info = {0};
	struct terr err = {0};
	bool oom = false;
	int code = ev->exit_code;
	char reason[300];
	if (a->rt_ops->inspect(a->rt, ev->container_id, &info, &err) == 0) {
		oom = info.oom_killed;
		code = info.exit_code;
		death_reason(&info, reason, sizeof(reason));
	} else {
		/* Removed already (a deliberate destroy): the manager ignores
		 * deaths of sessions it is terminating. */
		snprintf(reason, sizeof(reason), "container ended with exit code %d", code);
	}
	json_t *event = json_pack("{s:s,s:s,s:s,s:i,s:b,s:s}", "session_id", ev->session_id,
				  "container_id", ev->container_id, "event", "died",
				  "exit_code", code, "oom_killed", oom, "reason", reason);
	if (a->on_event)
		a->on_event(a->event_ud, a->id, event);
	json_decref(event);
	return 0;
}

static bool stopping(const struct agent *a)
{
	return atomic_load_explicit(&a->stop, memory_order_relaxed);
}

static void *watch_main(void *arg)
{
	struct agent *a = arg;
	while (!stopping(a)) {
		struct terr err = {0};
		int rc = a->rt_ops->watch(a->rt, AGENT_LABEL_AGENT, a->id, on_runtime_event, a, &a->stop, &err);
		if (stopping(a))
			break;
		if (rc < 0)
			log_warn("agent", "event stream from the runtime failed, retrying: %s", err.msg);
		/* The stream ended; reconnect after a pause so a dead dockerd
		 * is not hammered. */
		for (int i = 0; i < 10 && !stopping(a); i++)
			usleep(100 * 1000);
	}
	return NULL;
}

/* ---- what the driver holds beyond the sessions' accounting ---------- */

/* The host pid of a running container's init. A real driver names host
 * pids, and the session's are told by its init's PID namespace, which the
 * runtime's list does not give: the runtime is asked once per container
 * and start of its init, not every round. 0 when it cannot be had. */
static int usage_init_pid(struct agent *a, const char *cid)
{
	struct usage_init *e = NULL;
	for (size_t i = 0; i < a->n_usage_inits && !e; i++)
		if (!strcmp(a->usage_inits[i].id, cid))
			e = &a->usage_inits[i];
	if (e && fgpu_proc_alive(e->pid, e->start)) {
		e->seen = true;
		return e->pid;
	}
	struct rt_container_info info;
	struct terr err = {0};
	if (a->rt_ops->inspect(a->rt, cid, &info, &err) < 0 || info.pid <= 0)
		return 0;
	uint64_t start = fgpu_proc_start_time(info.pid);
	if (!e && start) {
		/* Without a start time a pid could be reused unseen: not kept. */
		struct usage_init *grown = realloc(a->usage_inits, (a->n_usage_inits + 1) * sizeof(*grown));
		if (grown) {
			a->usage_inits = grown;
			e = &grown[a->n_usage_inits++];
			util_strlcpy(e->id, cid, sizeof(e->id));
		}
	}
	if (e) {
		e->pid = start ? info.pid : 0;
		e->start = start;
		e->seen = true;
	}
	return info.pid;
}

/* Forgets the containers a round did not list (the usage thread's). */
static void usage_inits_prune(struct agent *a)
{
	size_t kept = 0;
	for (size_t i = 0; i < a->n_usage_inits; i++) {
		if (a->usage_inits[i].seen && a->usage_inits[i].pid > 0) {
			a->usage_inits[kept] = a->usage_inits[i];
			a->usage_inits[kept++].seen = false;
		}
	}
	a->n_usage_inits = kept;
}

/* tessera-gpu-probe --charge arguments for one running GPU session (its
 * region, its init's host pid or 0 for the mock, its devices), appended to
 * args (each malloc'd); false when it has no GPU or no region yet. */
static bool usage_session_args(struct agent *a, const struct rt_container_info *c, char **args)
{
	char dir[PATH_MAX + 80], path[PATH_MAX + 160], *text = NULL;
	size_t len = 0;
	struct terr err = {0};
	if (session_dir(a, c->session_id, dir, sizeof(dir)) < 0)
		return false;
	snprintf(path, sizeof(path), "%s/fgpu.conf", dir);
	struct fgpu_conf conf;
	if (util_read_file(path, &text, &len, &err) < 0)
		return false;
	int rc = fgpu_conf_parse(text, &conf, &err);
	free(text);
	snprintf(path, sizeof(path), "%s/run/" FGPU_REGION_NAME, dir);
	if (rc < 0 || conf.ndev <= 0 || access(path, F_OK) != 0)
		return false;
	int init = 0;
	if (!a->gpus.mock && (init = usage_init_pid(a, c->id)) <= 0)
		return false;
	char uuids[FGPU_MAX_DEVICES * 97] = "";
	for (int d = 0; d < conf.ndev; d++) {
		if (d)
			strcat(uuids, ",");
		strcat(uuids, conf.dev[d].uuid);
	}
	args[0] = strdup(path);
	args[2] = strdup(uuids);
	if (asprintf(&args[1], "%d", init) < 0)
		args[1] = NULL;   /* asprintf leaves it undefined on failure */
	if (!args[0] || !args[1] || !args[2]) {
		for (int i = 0; i < 3; i++) {
			free(args[i]);
			args[i] = NULL;
		}
		return false;
	}
	return true;
}

/* A failure that repeats every round is logged once, then every 10
 * minutes while it lasts. Only the usage thread calls this. */
static void usage_warn(struct agent *a, const char *msg)
{
	int64_t now = util_mono_ms();
	if (strcmp(msg, a->usage_warned) == 0 && now - a->usage_warned_ms < 600000)
		return;
	util_strlcpy(a->usage_warned, msg, sizeof(a->usage_warned));
	a->usage_warned_ms = now;
	log_warn("agent", "%s", msg);
}

/* Runs the probe's charge and logs what it reports as failed. */
static void usage_charge(struct agent *a, const char *spec, const char *state, char **args, int n)
{
	char out[16384], msg[600];
	struct terr err = {0};
	if (gpu_charge_sessions(a->probe_path, a->probe_lib_dir[0] ? a->probe_lib_dir : NULL, spec,
				state, args, n, 5000, out, sizeof(out), &err) < 0) {
		snprintf(msg, sizeof(msg), "cannot charge GPU sessions what the driver holds: %s", err.msg);
		usage_warn(a, msg);
		return;
	}
	for (char *save = NULL, *line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		if (strstr(line, " error: ")) {
			snprintf(msg, sizeof(msg), "GPU usage of a session: %s", line);
			usage_warn(a, msg);
		}
}

/* One round over the node's running GPU sessions. */
static void usage_round(struct agent *a)
{
	struct rt_container_info *list = NULL;
	size_t n = 0;
	struct terr err = {0};
	if (a->rt_ops->list(a->rt, AGENT_LABEL_AGENT, a->id, &list, &n, &err) < 0) {
		log_debug("agent", "GPU usage round skipped: %s", err.msg);
		return;
	}
	char **args = n ? calloc(3 * n, sizeof(char *)) : NULL;
	int na = 0;
	for (size_t i = 0; args && i < n; i++) {
		if (!list[i].running || !list[i].session_id[0] || !agent_owns(a, list[i].cluster_id) ||
		    !usage_session_args(a, &list[i], args + na))
			continue;
		if (a->gpus.mock) {
			/* Each mock session has its own devices and usage file. */
			char dir[PATH_MAX + 80], spec[PATH_MAX + 128], state[PATH_MAX + 128];
			session_dir(a, list[i].session_id, dir, sizeof(dir));
			snprintf(spec, sizeof(spec), "%s/mock-gpus", dir);
			snprintf(state, sizeof(state), "%s/mock-state/gpus.state", dir);
			if (access(state, F_OK) == 0)
				usage_charge(a, spec, state, args + na, 3);
		}
		na += 3;
	}
	/* A real driver lists every process of the node at once. */
	if (na > 0 && !a->gpus.mock)
		usage_charge(a, NULL, NULL, args, na);
	for (int i = 0; i < na; i++)
		free(args[i]);
	free(args);
	free(list);
	usage_inits_prune(a);
}

static void *usage_main(void *arg)
{
	struct agent *a = arg;
	while (!stopping(a)) {
		usage_round(a);
		/* Slept in steps so that agent_close does not wait a round. */
		for (int left = a->usage_interval_ms; left > 0 && !stopping(a); left -= 100)
			usleep((left < 100 ? left : 100) * 1000);
	}
	return NULL;
}

/* Sends the node's images as an event: {"event":"images","images":[...]}. */
static void report_images(struct agent *a)
{
	json_t *images = NULL;
	struct terr err = {0};
	if (a->rt_ops->image_list(a->rt, &images, &err) < 0)
		log_warn("agent", "listing images after a change: %s", err.msg);
	json_t *event = json_pack("{s:s,s:o}", "event", AGENT_EVENT_IMAGES, "images", images_inline(images));
	if (event && a->on_event)
		a->on_event(a->event_ud, a->id, event);
	json_decref(event);
}

static int on_image_event(const struct rt_event *ev, void *ud)
{
	struct agent *a = ud;
	if (ev->image) {
		images_forget(a);
		report_images(a);
	} else if (ev->network && !strcmp(ev->action, "destroy")) {
		net_forget(a, ev->network_name);
	}
	return 0;
}

static void *image_watch_main(void *arg)
{
	struct agent *a = arg;
	bool first = true;
	while (!stopping(a)) {
		/* Changes while the stream was down are sent as one list. */
		if (!first)
			report_images(a);
		first = false;
		struct terr err = {0};
		/* Images are kept for starts only while their events come;
		 * networks are known again from the next start of each user
		 * (their removals were not seen while the stream was down). */
		pthread_mutex_lock(&a->img_mu);
		a->img_live = a->rt_ops->watch_images != NULL;
		images_forget_locked(a);
		pthread_mutex_unlock(&a->img_mu);
		pthread_mutex_lock(&a->net_mu);
		a->n_net_known = 0;
		pthread_mutex_unlock(&a->net_mu);
		int rc = a->rt_ops->watch_images ? a->rt_ops->watch_images(a->rt, on_image_event, a, &a->stop, &err) : 0;
		pthread_mutex_lock(&a->img_mu);
		a->img_live = false;
		images_forget_locked(a);
		pthread_mutex_unlock(&a->img_mu);
		if (stopping(a) || !a->rt_ops->watch_images)
			break;
		if (rc < 0)
			log_warn("agent", "image event stream from the runtime failed, retrying: %s", err.msg);
		for (int i = 0; i < 10 && !stopping(a); i++)
			usleep(100 * 1000);
	}
	return NULL;
}

/* ---- processes killed for passing the memory limit (oomwatch.h) ---- */

static struct oom_seen *oom_entry(struct agent *a, const char *cid)
{
	for (size_t i = 0; i < a->n_oom_seen; i++)
		if (!strcmp(a->oom_seen[i].id, cid))
			return &a->oom_seen[i];
	struct oom_seen *grown = realloc(a->oom_seen, (a->n_oom_seen + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	a->oom_seen = grown;
	struct oom_seen *e = &grown[a->n_oom_seen++];
	memset(e, 0, sizeof(*e));
	util_strlcpy(e->id, cid, sizeof(e->id));
	return e;
}

/* Reads one running container's count; reports it when it grew. The
 * first sight reports a count above 0 too: the manager keeps the count
 * it last heard and ignores what it knew already (an agent restart). */
static void oom_check(struct agent *a, const struct rt_container_info *c)
{
	struct oom_seen *e = oom_entry(a, c->id);
	if (!e)
		return;
	e->seen = true;
	if (e->failed)
		return;
	struct terr err = {0};
	int64_t count = 0;
	int pid = 0;
	if (!e->path[0]) {
		struct rt_container_info info;
		if (a->rt_ops->inspect(a->rt, c->id, &info, &err) < 0 || info.pid <= 0)
			return;
		pid = info.pid;
	}
	if (oomwatch_read(pid, e->path, sizeof(e->path), &count, &err) < 0) {
		/* Its cgroup does not change while it runs: once is enough. */
		log_warn("agent", "cannot count OOM kills of session %s: %s", c->session_id, err.msg);
		e->failed = true;
		return;
	}
	if (count <= e->kills)
		return;
	e->kills = count;
	log_info("agent", "session %s: %lld process(es) killed for exceeding its memory limit so far",
		 c->session_id, (long long)count);
	json_t *event = json_pack("{s:s,s:s,s:s,s:I}", "session_id", c->session_id, "container_id", c->id,
				  "event", "oom", "oom_kills", (json_int_t)count);
	if (event && a->on_event)
		a->on_event(a->event_ud, a->id, event);
	json_decref(event);
}

static void oom_round(struct agent *a)
{
	struct rt_container_info *list = NULL;
	size_t n = 0;
	struct terr err = {0};
	if (a->rt_ops->list(a->rt, AGENT_LABEL_AGENT, a->id, &list, &n, &err) < 0) {
		log_debug("agent", "OOM round skipped: %s", err.msg);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (list[i].running && list[i].session_id[0] && agent_owns(a, list[i].cluster_id))
			oom_check(a, &list[i]);
	free(list);
	/* Forget the containers no longer running. */
	size_t kept = 0;
	for (size_t i = 0; i < a->n_oom_seen; i++) {
		if (!a->oom_seen[i].seen)
			continue;
		a->oom_seen[kept] = a->oom_seen[i];
		a->oom_seen[kept++].seen = false;
	}
	a->n_oom_seen = kept;
}

static void *oom_main(void *arg)
{
	struct agent *a = arg;
	while (!stopping(a)) {
		atomic_store_explicit(&a->oom_poke, false, memory_order_relaxed);
		oom_round(a);
		/* In steps, so that a Docker `oom` event or agent_close does
		 * not wait out the period. */
		for (int left = a->oom_interval_ms; left > 0 && !stopping(a) &&
		     !atomic_load_explicit(&a->oom_poke, memory_order_relaxed); left -= 100)
			usleep((left < 100 ? left : 100) * 1000);
	}
	return NULL;
}

/* ---- live usage (stats.h) ---- */

static struct stats_seen *stats_entry(struct agent *a, const char *cid)
{
	for (size_t i = 0; i < a->n_stats_seen; i++)
		if (!strcmp(a->stats_seen[i].id, cid))
			return &a->stats_seen[i];
	struct stats_seen *grown = realloc(a->stats_seen, (a->n_stats_seen + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	a->stats_seen = grown;
	struct stats_seen *e = &grown[a->n_stats_seen++];
	memset(e, 0, sizeof(*e));
	e->gpu_fd = -1;
	e->cg.fd_cpu = e->cg.fd_mem = e->cg.fd_memstat = e->cg.fd_io = e->cg.fd_net = -1;
	e->cg.fd_tcp = e->cg.fd_tcp6 = -1;
	util_strlcpy(e->id, cid, sizeof(e->id));
	return e;
}

/* A regular file in a directory the container may write, opened without
 * following a link and without blocking on a FIFO put in its place. */
static int open_session_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The session's devices from its fgpu.conf, and the file their usage is
 * read from: the mock driver's state (what its processes hold and the
 * kernel time they ran), or on real GPUs the fGPU region (what the fGPU
 * library accounts for them, with what the driver holds beyond it). */
static void stats_gpus_setup(struct agent *a, struct stats_seen *e)
{
	char dir[PATH_MAX + 80], path[PATH_MAX + 160], *text = NULL;
	size_t len;
	struct terr err = {0};
	if (e->gpu_fd < 0 && e->gpus_read && e->ndev > 0) {
		/* The file appears with the session's first GPU process. */
	} else if (e->gpus_read) {
		return;
	}
	if (session_dir(a, e->session_id, dir, sizeof(dir)) < 0)
		return;
	if (!e->gpus_read) {
		e->gpus_read = true;
		snprintf(path, sizeof(path), "%s/fgpu.conf", dir);
		struct fgpu_conf conf;
		if (util_read_file(path, &text, &len, &err) < 0)
			return;
		int rc = fgpu_conf_parse(text, &conf, &err);
		free(text);
		if (rc < 0)
			return;
		for (int d = 0; d < conf.ndev && e->ndev < STATS_MAX_GPUS; d++) {
			const struct gpu_device *g = node_device(a, conf.dev[d].uuid);
			if (!g)
				continue;
			util_strlcpy(e->dev[e->ndev].uuid, conf.dev[d].uuid, sizeof(e->dev[0].uuid));
			e->dev[e->ndev].host_index = g->index;
			e->dev[e->ndev].limit = conf.dev[d].memory_limit;
			e->ndev++;
		}
	}
	if (e->ndev == 0)
		return;
	if (a->gpus.mock)
		snprintf(path, sizeof(path), "%s/mock-state/gpus.state", dir);
	else
		snprintf(path, sizeof(path), "%s/run/" FGPU_REGION_NAME, dir);
	e->gpu_fd = open_session_file(path);
}

/* The session's GPU figures: [{"uuid","util_pct","mem_bytes",
 * "mem_limit_bytes"}]; adds them to the node's per-device sums. */
static json_t *stats_gpus_json(struct agent *a, struct stats_seen *e, int64_t mono_ns, int64_t node_mem[],
			       double node_util[])
{
	stats_gpus_setup(a, e);
	if (e->ndev == 0)
		return json_array();
	int64_t used[STATS_MAX_GPUS] = {0};
	uint64_t busy[STATS_MAX_GPUS] = {0};
	bool have = false, have_busy = false;
	if (e->gpu_fd >= 0 && a->gpus.mock) {
		have = have_busy = mock_usage_read_fd(e->gpu_fd, used, busy) == 0;
	} else if (e->gpu_fd >= 0) {
		/* The region's totals, by the session's device order. */
		struct fgpu_region head;
		size_t need = offsetof(struct fgpu_region, total) + sizeof(head.total);
		if (pread(e->gpu_fd, &head, need, 0) == (ssize_t)need && head.magic == FGPU_REGION_MAGIC &&
		    head.version == FGPU_REGION_VERSION) {
			for (int d = 0; d < e->ndev && d < FGPU_MAX_DEVICES; d++)
				used[e->dev[d].host_index] = head.total[d];
			have = true;
		}
	}
	json_t *arr = json_array();
	double dt = e->busy_prev_mono_ns ? (double)(mono_ns - e->busy_prev_mono_ns) : 0;
	for (int d = 0; d < e->ndev; d++) {
		int hi = e->dev[d].host_index;
		if (hi < 0 || hi >= STATS_MAX_GPUS)
			continue;
		json_t *util = json_null();
		if (have_busy && dt > 0) {
			/* The mock's kernels run on a simulated clock: a
			 * session launching faster than its kernels would run
			 * shows the device full, not more. */
			double u = (double)(busy[hi] - e->busy_prev[hi]) / dt * 100.0;
			u = u < 0 ? 0 : u > 100 ? 100 : u;
			util = json_real(u);
			node_util[hi] += u;
		} else if (have_busy) {
			util = json_real(0);
		}
		int64_t mem = have && used[hi] > 0 ? used[hi] : 0;
		node_mem[hi] += mem;
		json_array_append_new(arr, json_pack("{s:s,s:o,s:I,s:I}", "uuid", e->dev[d].uuid, "util_pct", util,
						     "mem_bytes", (json_int_t)mem, "mem_limit_bytes",
						     (json_int_t)e->dev[d].limit));
	}
	if (have_busy) {
		memcpy(e->busy_prev, busy, sizeof(busy));
		e->busy_prev_mono_ns = mono_ns;
	}
	return arr;
}

/* One running container's sample, or NULL (not readable yet, or not at
 * all: then logged once). */
static json_t *stats_sample(struct agent *a, const struct rt_container_info *c, int64_t mono_ns, int64_t node_mem[],
			    double node_util[], double *node_cpu, int64_t *node_memory)
{
	struct stats_seen *e = stats_entry(a, c->id);
	if (!e)
		return NULL;
	e->seen = true;
	if (e->failed)
		return NULL;
	struct terr err = {0};
	if (e->open && !fgpu_proc_alive(e->pid, e->start)) {
		/* Its init is gone (a restart): open again. */
		stats_cg_close(&e->cg);
		e->open = false;
	}
	if (!e->open) {
		struct rt_container_info info;
		if (a->rt_ops->inspect(a->rt, c->id, &info, &err) < 0 || info.pid <= 0)
			return NULL;
		util_strlcpy(e->session_id, c->session_id, sizeof(e->session_id));
		e->pid = info.pid;
		e->start = fgpu_proc_start_time(info.pid);
		if (stats_cg_open(&e->cg, "/proc", info.pid, NULL, &err) < 0) {
			log_warn("agent", "cannot read the usage of session %s: %s", c->session_id, err.msg);
			e->failed = true;
			return NULL;
		}
		e->open = true;
	}
	struct stats_reading r;
	if (stats_cg_read(&e->cg, mono_ns, AGENT_APP_PORT, &r, &err) < 0) {
		log_warn("agent", "cannot read the usage of session %s: %s", c->session_id, err.msg);
		stats_cg_close(&e->cg);
		e->open = false;
		e->failed = true;
		return NULL;
	}
	json_t *gpus = stats_gpus_json(a, e, mono_ns, node_mem, node_util);
	if (r.cpu_cores < 0) {
		/* The first reading only starts the rate. */
		json_decref(gpus);
		return NULL;
	}
	int64_t alloc_m = r.cpu_limit_m > 0 ? r.cpu_limit_m : a->capacity.cpu_m;
	*node_cpu += r.cpu_cores;
	*node_memory += r.mem_bytes;
	return json_pack("{s:s,s:s,s:f,s:f,s:I,s:I,s:o,s:I,s:I,s:I,s:I,s:i}", "session_id", c->session_id,
			 "container_id", c->id, "cpu_cores", r.cpu_cores,
			 "cpu_pct", alloc_m > 0 ? r.cpu_cores * 100000.0 / (double)alloc_m : 0.0,
			 "mem_bytes", (json_int_t)r.mem_bytes, "mem_limit_bytes", (json_int_t)r.mem_limit, "gpus", gpus,
			 "net_rx_bytes", (json_int_t)r.net_rx, "net_tx_bytes", (json_int_t)r.net_tx,
			 "blk_read_bytes", (json_int_t)r.blk_read, "blk_write_bytes", (json_int_t)r.blk_write,
			 "app_conns", r.app_conns);
}

/* One round: every running session's sample, as one event
 * {"event":"stats","t","period_ms","samples":[...],"node":{"cpu_cores",
 * "mem_bytes","gpus":[{"uuid","util_pct","mem_used_bytes"}]}}. */
static void stats_round(struct agent *a)
{
	struct rt_container_info *list = NULL;
	size_t n = 0;
	struct terr err = {0};
	if (a->rt_ops->list(a->rt, AGENT_LABEL_AGENT, a->id, &list, &n, &err) < 0) {
		log_debug("agent", "stats round skipped: %s", err.msg);
		return;
	}
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t mono_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	int64_t node_mem[STATS_MAX_GPUS] = {0};
	double node_util[STATS_MAX_GPUS] = {0}, cpu = 0;
	int64_t memory = 0;
	json_t *samples = json_array();
	for (size_t i = 0; i < n; i++) {
		if (!list[i].running || !list[i].session_id[0] || !agent_owns(a, list[i].cluster_id))
			continue;
		json_t *smp = stats_sample(a, &list[i], mono_ns, node_mem, node_util, &cpu, &memory);
		if (smp)
			json_array_append_new(samples, smp);
	}
	free(list);
	/* Forget the containers no longer running. */
	size_t kept = 0;
	for (size_t i = 0; i < a->n_stats_seen; i++) {
		if (!a->stats_seen[i].seen) {
			stats_cg_close(&a->stats_seen[i].cg);
			if (a->stats_seen[i].gpu_fd >= 0)
				close(a->stats_seen[i].gpu_fd);
			continue;
		}
		a->stats_seen[kept] = a->stats_seen[i];
		a->stats_seen[kept++].seen = false;
	}
	a->n_stats_seen = kept;
	json_t *gpus = json_array();
	for (int d = 0; d < a->gpus.n; d++) {
		int hi = a->gpus.dev[d].index;
		bool ok = hi >= 0 && hi < STATS_MAX_GPUS;
		/* Real GPUs: utilisation is not measured yet (docs/api.md). */
		json_array_append_new(gpus, json_pack("{s:s,s:o,s:I}", "uuid", a->gpus.dev[d].uuid, "util_pct",
						      ok && a->gpus.mock ? json_real(node_util[hi] > 100 ? 100 : node_util[hi])
									 : json_null(),
						      "mem_used_bytes", (json_int_t)(ok ? node_mem[hi] : 0)));
	}
	json_t *event = json_pack("{s:s,s:I,s:i,s:o,s:{s:f,s:I,s:o}}", "event", AGENT_EVENT_STATS, "t",
				  (json_int_t)util_now_ms(), "period_ms", a->stats_interval_ms, "samples", samples,
				  "node", "cpu_cores", cpu, "mem_bytes", (json_int_t)memory, "gpus", gpus);
	if (!event)
		return;
	pthread_mutex_lock(&a->stats_mu);
	json_decref(a->stats_last);
	a->stats_last = json_deep_copy(event);
	pthread_mutex_unlock(&a->stats_mu);
	if (a->on_event)
		a->on_event(a->event_ud, a->id, event);
	json_decref(event);
}

static void *stats_main(void *arg)
{
	struct agent *a = arg;
	while (!stopping(a)) {
		stats_round(a);
		for (int left = a->stats_interval_ms; left > 0 && !stopping(a); left -= 100)
			usleep((left < 100 ? left : 100) * 1000);
	}
	return NULL;
}

json_t *agent_stats_last(struct agent *a)
{
	pthread_mutex_lock(&a->stats_mu);
	json_t *o = a->stats_last ? json_deep_copy(a->stats_last) : NULL;
	pthread_mutex_unlock(&a->stats_mu);
	return o;
}

int agent_stats_interval_ms(const struct agent *a)
{
	return a->stats_interval_ms;
}

int agent_watch_start(struct agent *a, agent_event_fn fn, void *ud, struct terr *err)
{
	a->on_event = fn;
	a->event_ud = ud;
	if (pthread_create(&a->watcher, NULL, watch_main, a) != 0)
		return terr_set(err, EAGAIN, "cannot start the container watcher thread");
	a->watching = true;
	if (pthread_create(&a->image_watcher, NULL, image_watch_main, a) == 0)
		a->watching_images = true;
	else
		log_warn("agent", "cannot start the image watcher thread: image changes reach the "
			 "manager only at registration and on 'tessera image rescan'");
	if (a->oom_interval_ms < 0)
		log_info("agent", "OOM kills are not counted (oom_interval_ms < 0)");
	else if (pthread_create(&a->oom_thread, NULL, oom_main, a) == 0)
		a->oom_running = true;
	else
		log_warn("agent", "cannot start the OOM thread: processes killed for exceeding a session's "
			 "memory limit will not be reported");
	if (a->stats_interval_ms < 0)
		log_info("agent", "live usage is not collected (stats_interval_ms < 0)");
	else if (pthread_create(&a->stats_thread, NULL, stats_main, a) == 0)
		a->stats_running = true;
	else
		log_warn("agent", "cannot start the stats thread: sessions' live usage will not be reported");
	if (a->gpus.n > 0 && a->probe_path[0]) {
		if (pthread_create(&a->usage_thread, NULL, usage_main, a) == 0)
			a->usage_running = true;
		else
			log_warn("agent", "cannot start the GPU usage thread: what the driver holds "
				 "beyond the fGPU library's accounting will not be charged");
	}
	return 0;
}

/* ---- images: commit, push, pull ---- */

/* "host:port/ref" into buf; -ENAMETOOLONG. */
static int registry_ref(const char *registry, const char *ref, char *buf, size_t n, struct terr *err)
{
	int len = snprintf(buf, n, "%s/%s", registry, ref);
	if (len < 0 || (size_t)len >= n)
		return terr_set(err, ENAMETOOLONG, "image name %s/%s is too long", registry, ref);
	return 0;
}

/* Whether the image ref on this node carries tessera.owner = owner (a
 * private image of that user's; false when owner is NULL or "", or when
 * the labels cannot be read). */
static bool image_owned_by(struct agent *a, const char *ref, const char *owner)
{
	char **sl = NULL;
	size_t n = 0;
	struct terr ignored = {0};
	if (!owner || !*owner || !a->rt_ops->image_labels ||
	    a->rt_ops->image_labels(a->rt, ref, &sl, &n, &ignored) < 0)
		return false;
	size_t klen = strlen(IMG_LABEL_OWNER);
	bool mine = false;
	for (size_t i = 0; i < n; i++) {
		if (!strncmp(sl[i], IMG_LABEL_OWNER, klen) && sl[i][klen] == '=' && !strcmp(sl[i] + klen + 1, owner))
			mine = true;
		free(sl[i]);
	}
	free(sl);
	return mine;
}

int agent_commit(struct agent *a, json_t *req, json_t **result, struct terr *err)
{
	const char *cid = json_string_value(json_object_get(req, "container_id"));
	const char *ref = json_string_value(json_object_get(req, "ref"));
	const char *source = json_string_value(json_object_get(req, "source_image"));
	const char *registry = json_string_value(json_object_get(req, "registry"));
	json_t *labels = json_object_get(req, "labels");
	if (!cid || !*cid || !ref || !*ref || strlen(ref) > 255 || (labels && !json_is_object(labels)))
		return terr_set(err, EINVAL, "a commit needs container_id, ref (at most 255 characters) and labels as an object");
	/* Docker's commit moves an existing tag to the new image. The
	 * manager names commits into the owner's namespace only; here, on
	 * the node, a ref that exists already is refused unless it is a
	 * private image of the same owner, so a commit never takes over a
	 * public image or another user's (docs/images.md, "Private images"). */
	const char *owner = json_string_value(json_object_get(labels, IMG_LABEL_OWNER));
	bool exists = false;
	if (a->rt_ops->image_exists(a->rt, ref, &exists, err) < 0)
		return terr_prefix(err, "cannot tell whether image %s exists on this node", ref);
	if (exists && !image_owned_by(a, ref, owner))
		return terr_set(err, EEXIST, "image %s exists on this node and is not a private image of this "
				"session's owner; a commit does not move it", ref);
	size_t nl = json_object_size(labels), k = 0;
	struct rt_label *lv = calloc(nl + 5, sizeof(*lv));
	if (!lv)
		return terr_set(err, ENOMEM, "out of memory");
	const char *key;
	json_t *val;
	json_object_foreach(labels, key, val) {
		if (json_is_string(val))
			lv[k++] = (struct rt_label){key, json_string_value(val)};
	}
	/* Docker keeps the container's own labels on the image; those that
	 * name this session's container are emptied (Docker cannot drop
	 * them): the image's source is in tessera.source.*. */
	static const char *const own[] = {AGENT_LABEL_SESSION, AGENT_LABEL_AGENT, AGENT_LABEL_NAME, AGENT_LABEL_CLUSTER};
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (!json_object_get(labels, own[i]))
			lv[k++] = (struct rt_label){own[i], ""};
	/* The session's variables (its id, its devices, fGPU limits) are
	 * not the image's: the source image's are put back. */
	char **env = NULL;
	size_t n_env = 0;
	struct terr ignored = {0};
	if (!source || a->rt_ops->image_env(a->rt, source, &env, &n_env, &ignored) < 0) {
		env = NULL;
		n_env = 0;
	}
	/* image_env counts its strings; commit takes them NULL-terminated. */
	char **envz = env ? realloc(env, (n_env + 1) * sizeof(*env)) : NULL;
	if (envz) {
		env = envz;
		env[n_env] = NULL;
	} else if (env) {
		for (size_t i = 0; i < n_env; i++)
			free(env[i]);
		free(env);
		env = NULL;
		n_env = 0;
	}
	/* "private" joins the source image's features (Backend.AI's label:
	 * words separated by spaces or commas), whose other words stay. */
	char features[1024] = "";
	for (size_t i = 0; i < k; i++) {
		if (strcmp(lv[i].key, "ai.backend.features"))
			continue;
		char **sl = NULL;
		size_t n_sl = 0;
		if (source && a->rt_ops->image_labels &&
		    a->rt_ops->image_labels(a->rt, source, &sl, &n_sl, &ignored) == 0) {
			for (size_t j = 0; j < n_sl; j++)
				if (!strncmp(sl[j], "ai.backend.features=", 20) && sl[j][20] &&
				    !strstr(sl[j] + 20, lv[i].value))
					snprintf(features, sizeof(features), "%s %s", sl[j] + 20, lv[i].value);
			for (size_t j = 0; j < n_sl; j++)
				free(sl[j]);
			free(sl);
		}
		if (features[0])
			lv[i].value = features;
	}
	int rc = a->rt_ops->commit(a->rt, cid, ref, lv, k, env && n_env ? (const char *const *)env : NULL, err);
	for (size_t i = 0; i < n_env; i++)
		free(env[i]);
	free(env);
	free(lv);
	if (rc < 0)
		return rc;
	json_t *out = json_pack("{s:s,s:b}", "ref", ref, "pushed", 0);
	if (registry && *registry && (!a->rt_ops->tag || !a->rt_ops->push || !a->rt_ops->image_remove)) {
		json_object_set_new(out, "push_error", json_string("this node's container runtime cannot push images"));
	} else if (registry && *registry) {
		char rref[600];
		struct terr perr = {0};
		if (registry_ref(registry, ref, rref, sizeof(rref), &perr) == 0 &&
		    a->rt_ops->tag(a->rt, ref, rref, &perr) == 0) {
			int prc = a->rt_ops->push(a->rt, rref, NULL, NULL, &perr);
			a->rt_ops->image_remove(a->rt, rref, &ignored);
			if (prc == 0)
				json_object_set_new(out, "pushed", json_true());
		}
		if (perr.code)
			json_object_set_new(out, "push_error", json_string(perr.msg));
	}
	*result = out;
	return 0;
}

struct pull_ctx {
	struct agent *a;
	const char *key, *ref;
	agent_progress_fn fn;
	void *ud;
	int64_t last_ms;
	int64_t cur, total;
};

static void pull_report(struct pull_ctx *p)
{
	if (p->fn) {
		p->fn(p->ud, p->key, p->ref, p->cur, p->total);
	} else if (p->key && *p->key && p->a->on_event) {
		json_t *ev = json_pack("{s:s,s:s,s:s,s:I,s:I}", "event", AGENT_EVENT_PROGRESS,
				       "session_id", p->key, "ref", p->ref, "current", (json_int_t)p->cur,
				       "total", (json_int_t)p->total);
		p->a->on_event(p->a->event_ud, p->a->id, ev);
		json_decref(ev);
	}
}

static void pull_progress(void *ud, int64_t current, int64_t total)
{
	struct pull_ctx *p = ud;
	p->cur = current;
	p->total = total;
	/* At most about once a second: a pull reports every few kilobytes. */
	int64_t now = util_mono_ms();
	if (now - p->last_ms < 1000)
		return;
	p->last_ms = now;
	pull_report(p);
}

int agent_pull(struct agent *a, const char *ref, const char *registry, const char *key,
	       agent_progress_fn fn, void *ud, struct terr *err)
{
	if (!ref || !*ref || strlen(ref) > 255)
		return terr_set(err, EINVAL, "image must be 1 to 255 characters");
	if (!registry || !*registry)
		return terr_set(err, ENOENT, "image %s is not on node %s and the cluster has no registry", ref, a->id);
	if (!a->rt_ops->pull || !a->rt_ops->tag || !a->rt_ops->image_remove)
		return terr_set(err, ENOSYS, "the container runtime of node %s cannot pull images", a->id);
	char rref[600];
	int rc = registry_ref(registry, ref, rref, sizeof(rref), err);
	if (rc < 0)
		return rc;
	struct pull_ctx p = {.a = a, .key = key, .ref = ref, .fn = fn, .ud = ud, .last_ms = util_mono_ms()};
	pull_report(&p);   /* "pulling" is seen at once, before any byte */
	rc = a->rt_ops->pull(a->rt, rref, pull_progress, &p, err);
	if (rc < 0)
		return rc;
	pull_report(&p);
	rc = a->rt_ops->tag(a->rt, rref, ref, err);
	struct terr ignored;
	a->rt_ops->image_remove(a->rt, rref, &ignored);
	return rc;
}
