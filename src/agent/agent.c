/* The agent's open and close (its assets, GPUs, app hosts, the runtime),
 * its settings at run time and what it tells the manager of its node
 * (agent.h). The rest of the agent is in the agent_*.c files beside it,
 * which share struct agent through internal.h. */
#include "agent/internal.h"
#include "agent/agent_settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <fcntl.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/util.h"
#include "gpuabi/fgpu_contract.h"
#include "gpu/gpu_usage.h"

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
	    agent_write_file(tmp, "# Tessera: the platform's tools (gpu-info; nvidia-smi on mock GPUs) stay on\n"
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
void agent_app_endpoint_of(const struct agent *a, const struct rt_container_info *c, char *buf, size_t n)
{
	buf[0] = '\0';
	if (!c->running)
		return;
	/* Published (app_publish, or a container started while it was on):
	 * "HOST:PORT" first. Not published: the direct part alone, which
	 * only a proxy on this node can use. */
	bool published = c->published_private == AGENT_APP_PORT && c->published_port > 0;
	if (!published && a->app_publish)
		return;
	int len = 0;
	if (published) {
		const char *h = c->published_host[0] ? c->published_host : a->app_host;
		if (!strcmp(h, "0.0.0.0") || !strcmp(h, "::"))
			h = a->app_report_host;
		len = snprintf(buf, n, strchr(h, ':') ? "[%s]:%d" : "%s:%d", h, c->published_port);
	}
	char key[UTIL_NETNS_KEY_LEN + 1];
	util_netns_key(key);
	if (!c->ip[0] || !key[0] || len < 0 || (size_t)len >= n)
		return;
	int more = snprintf(buf + len, n - (size_t)len, strchr(c->ip, ':') ? ",[%s]:%d@%s" : ",%s:%d@%s", c->ip,
			    AGENT_APP_PORT, key);
	if (more < 0 || (size_t)more >= n - (size_t)len)
		buf[len] = '\0';
}

int agent_open(struct agent **out, const struct agent_config *cfg, struct terr *err)
{
	struct agent *a = calloc(1, sizeof(*a));
	if (!a)
		return terr_set(err, ENOMEM, "out of memory");
	util_strlcpy(a->id, cfg->id ? cfg->id : "local", sizeof(a->id));
	pthread_mutex_init(&a->cluster_mu, NULL);
	pthread_mutex_init(&a->replaced_mu, NULL);
	pthread_mutex_init(&a->net_mu, NULL);
	pthread_mutex_init(&a->fw_mu, NULL);
	pthread_mutex_init(&a->img_mu, NULL);
	pthread_mutex_init(&a->starts_mu, NULL);
	pthread_mutex_init(&a->sbx_mu, NULL);
	pthread_cond_init(&a->sbx_cv, NULL);
	a->rt_ops = cfg->runtime ? cfg->runtime : &runtime_docker_ops;
	bool sandboxes = true;
	if (agent_settings_parse_app_publish(cfg->app_publish, true, &a->app_publish, "app_publish", err) < 0 ||
	    agent_settings_parse_app_publish(cfg->sandboxes, true, &sandboxes, "sandboxes", err) < 0 ||
	    agent_settings_parse_seccomp(cfg->seccomp, &a->seccomp_default, "seccomp", err) < 0) {
		free(a);
		return -EINVAL;
	}
	/* A session's host name in a sandbox is set in its UTS namespace,
	 * which only root on the node may enter. */
	if (sandboxes && geteuid() != 0) {
		log_info("agent", "sandboxes are off: the agent does not run as root, and a session that joins one "
			 "gets its host name from the agent (docs/architecture.md, \"Sandboxes\")");
		sandboxes = false;
	}
	atomic_store(&a->sbx_on, sandboxes);
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
	if (a->rt_ops->network_bridge)
		agent_firewall_init(a);

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
	pthread_mutex_destroy(&a->fw_mu);
	pthread_mutex_destroy(&a->img_mu);
	pthread_mutex_destroy(&a->starts_mu);
	pthread_mutex_destroy(&a->stats_mu);
	pthread_mutex_destroy(&a->storage_mu);
	pthread_mutex_destroy(&a->sbx_mu);
	pthread_cond_destroy(&a->sbx_cv);
	free(a);
	return rc;
}

void agent_close(struct agent *a)
{
	if (!a)
		return;
	agent_watch_stop(a);
	/* The spares go (a new agent makes its own); sandboxes that
	 * sessions joined stay with them. */
	agent_sandbox_stop(a);
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
	agent_images_forget(a);
	free(a->img_seen);
	pthread_mutex_destroy(&a->cluster_mu);
	pthread_mutex_destroy(&a->replaced_mu);
	pthread_mutex_destroy(&a->net_mu);
	pthread_mutex_destroy(&a->fw_mu);
	pthread_mutex_destroy(&a->img_mu);
	pthread_mutex_destroy(&a->starts_mu);
	pthread_mutex_destroy(&a->sbx_mu);
	pthread_cond_destroy(&a->sbx_cv);
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

void agent_cluster_id_copy(struct agent *a, char out[64])
{
	pthread_mutex_lock(&a->cluster_mu);
	memcpy(out, a->cluster_id, 64);
	pthread_mutex_unlock(&a->cluster_mu);
}

/* Whether a container with this tessera.cluster label (its agent label
 * already matched) is the agent's own: another installation's containers
 * are not, those made before the label existed are. */
bool agent_owns(struct agent *a, const char *cluster_label)
{
	char mine[64];
	agent_cluster_id_copy(a, mine);
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
		agent_app_endpoint_of(a, &list[i], ep, sizeof(ep));
		json_array_append_new(arr, json_pack("{s:s,s:s,s:b,s:i,s:b,s:s,s:s,s:s}",
			"session_id", list[i].session_id, "container_id", list[i].id,
			"running", list[i].running, "exit_code", list[i].exit_code,
			"oom_killed", list[i].oom_killed, "state", list[i].state,
			"cluster_id", list[i].cluster_id, "app_endpoint", ep));
	}
	free(list);
	agent_starts_json(a, arr);
	*out = arr;
	return 0;
}

/* The manager takes bodies of up to 1 MiB; a list of images larger than
 * a quarter of that (hundreds of images with many labels) is not sent
 * inline but fetched by the manager over the RPC route. Takes images
 * (may be NULL); returns it, or JSON null in its place. */
json_t *agent_images_inline(json_t *images)
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
	images = agent_images_inline(images);
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
