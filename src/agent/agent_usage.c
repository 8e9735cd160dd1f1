/* The measuring threads that agent_watch_start starts: what the driver
 * holds beyond the sessions' accounting (agent_usage_main), OOM kills
 * (agent_oom_main) and every session's live usage (agent_stats_main). */
#include "agent/internal.h"
#include "agent/oomwatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/units.h"
#include "common/util.h"
#include "gpuabi/conf.h"
#include "gpuabi/fgpu_contract.h"
#include "gpuabi/procinfo.h"
#include "gpu/gpu_usage.h"
#include "gpu/mock/mockspec.h"
#include "gpuabi/region.h"

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
	if (agent_session_dir(a, c->session_id, dir, sizeof(dir)) < 0)
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
			agent_session_dir(a, list[i].session_id, dir, sizeof(dir));
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

void *agent_usage_main(void *arg)
{
	struct agent *a = arg;
	while (!agent_stopping(a)) {
		usage_round(a);
		/* Slept in steps so that agent_close does not wait a round. */
		for (int left = a->usage_interval_ms; left > 0 && !agent_stopping(a); left -= 100)
			usleep((left < 100 ? left : 100) * 1000);
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

void *agent_oom_main(void *arg)
{
	struct agent *a = arg;
	while (!agent_stopping(a)) {
		atomic_store_explicit(&a->oom_poke, false, memory_order_relaxed);
		oom_round(a);
		/* In steps, so that a Docker `oom` event or agent_close does
		 * not wait out the period. */
		for (int left = a->oom_interval_ms; left > 0 && !agent_stopping(a) &&
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
	if (agent_session_dir(a, e->session_id, dir, sizeof(dir)) < 0)
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
			const struct gpu_device *g = agent_node_device(a, conf.dev[d].uuid);
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

void *agent_stats_main(void *arg)
{
	struct agent *a = arg;
	while (!agent_stopping(a)) {
		stats_round(a);
		for (int left = a->stats_interval_ms; left > 0 && !agent_stopping(a); left -= 100)
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
