#include "agent/agent.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "common/log.h"
#include "common/units.h"
#include "common/util.h"

struct agent {
	char id[64];
	const struct runtime_ops *rt_ops;
	struct runtime *rt;
	char runtime_desc[128];
	char runner_path[PATH_MAX];
	struct res capacity;
	int64_t pids_limit;

	pthread_t watcher;
	bool watching;
	volatile int stop;
	agent_event_fn on_event;
	void *event_ud;
};

/* The runner is built beside the tessera binary; an installed layout keeps
 * it in /usr/lib/tessera. */
static int find_runner(char *out, size_t n, struct terr *err)
{
	char dir[PATH_MAX];
	if (util_exe_dir(dir, sizeof(dir), err) < 0)
		return -err->code;
	const char *candidates[] = {"%s/tessera-runner", "%s/../lib/tessera/tessera-runner"};
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), candidates[i], dir) >= (int)sizeof(path))
			continue;
		if (access(path, X_OK) == 0)
			return realpath(path, out) ? 0 : terr_set(err, errno, "cannot resolve %s", path);
	}
	if (access("/usr/lib/tessera/tessera-runner", X_OK) == 0)
		return util_strlcpy(out, "/usr/lib/tessera/tessera-runner", n);
	return terr_set(err, ENOENT,
			"cannot find tessera-runner beside %s or in /usr/lib/tessera; build it or set runner_path",
			dir);
}

int agent_open(struct agent **out, const struct agent_config *cfg, struct terr *err)
{
	struct agent *a = calloc(1, sizeof(*a));
	if (!a)
		return terr_set(err, ENOMEM, "out of memory");
	util_strlcpy(a->id, cfg->id ? cfg->id : "local", sizeof(a->id));
	a->rt_ops = &runtime_docker_ops;
	a->pids_limit = cfg->pids_limit > 0 ? cfg->pids_limit : 4096;

	int rc;
	if (cfg->runner_path)
		rc = realpath(cfg->runner_path, a->runner_path)
			? 0 : terr_set(err, ENOENT, "runner_path %s does not exist", cfg->runner_path);
	else
		rc = find_runner(a->runner_path, sizeof(a->runner_path), err);
	if (rc < 0)
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
	free(a);
	return rc;
}

void agent_close(struct agent *a)
{
	if (!a)
		return;
	if (a->watching) {
		a->stop = 1;
		pthread_join(a->watcher, NULL);
	}
	a->rt_ops->close(a->rt);
	free(a);
}

const char *agent_id(const struct agent *a)
{
	return a->id;
}

struct res agent_capacity(const struct agent *a)
{
	return a->capacity;
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
		if (!list[i].session_id[0])
			continue;
		json_array_append_new(arr, json_pack("{s:s,s:s,s:b,s:i,s:b,s:s}",
			"session_id", list[i].session_id, "container_id", list[i].id,
			"running", list[i].running, "exit_code", list[i].exit_code,
			"oom_killed", list[i].oom_killed, "state", list[i].state));
	}
	free(list);
	*out = arr;
	return 0;
}

int agent_describe(struct agent *a, json_t **out, struct terr *err)
{
	json_t *containers;
	int rc = agent_list_containers(a, &containers, err);
	if (rc < 0)
		return rc;
	*out = json_pack("{s:s,s:s,s:o,s:s,s:o}", "id", a->id, "version", TESSERA_VERSION,
			 "capacity", res_to_wire(&a->capacity), "runtime", a->runtime_desc,
			 "containers", containers);
	return 0;
}

/* Container names must be unique on the host; the session id makes them so
 * and the name makes `docker ps` readable. */
static void container_name(const char *name, const char *id, char *buf, size_t n)
{
	snprintf(buf, n, "tessera-%s-%.8s", name, id);
}

int agent_start_session(struct agent *a, json_t *spec, char cid[RT_ID_MAX], struct terr *err)
{
	const char *id = json_string_value(json_object_get(spec, "id"));
	const char *name = json_string_value(json_object_get(spec, "name"));
	const char *image = json_string_value(json_object_get(spec, "image"));
	const char *owner = json_string_value(json_object_get(spec, "owner"));
	const char *startup = json_string_value(json_object_get(spec, "startup_command"));
	json_t *res = json_object_get(spec, "resources");
	json_t *env = json_object_get(spec, "env");
	if (!id || !name || !image || !json_is_object(res))
		return terr_set(err, EINVAL, "session spec needs id, name, image and resources");
	int64_t cpu_m = json_integer_value(json_object_get(res, "cpu_milli"));
	int64_t mem = json_integer_value(json_object_get(res, "mem"));

	/* Environment: the user's, then ours (ours win; the API refuses
	 * user variables starting with TESSERA_). */
	size_t n_env = json_is_object(env) ? json_object_size(env) : 0;
	char **envv = calloc(n_env + 4, sizeof(char *));
	size_t k = 0;
	if (!envv)
		return terr_set(err, ENOMEM, "out of memory");
	if (n_env) {
		const char *key;
		json_t *val;
		json_object_foreach(env, key, val) {
			if (asprintf(&envv[k], "%s=%s", key, json_string_value(val) ? json_string_value(val) : "") < 0)
				envv[k] = NULL;
			else
				k++;
		}
	}
	if (asprintf(&envv[k], "TESSERA_SESSION_ID=%s", id) >= 0) k++;
	if (asprintf(&envv[k], "TESSERA_SESSION_NAME=%s", name) >= 0) k++;
	envv[k] = NULL;

	const char *entry_plain[] = {AGENT_RUNNER_TARGET, NULL};
	const char *entry_cmd[] = {AGENT_RUNNER_TARGET, "--", "/bin/sh", "-c", startup, NULL};
	struct rt_label labels[] = {
		{AGENT_LABEL_SESSION, id}, {AGENT_LABEL_AGENT, a->id},
		{AGENT_LABEL_NAME, name}, {AGENT_LABEL_OWNER, owner ? owner : ""},
	};
	struct rt_mount mounts[] = {{a->runner_path, AGENT_RUNNER_TARGET, true}};
	char cname[160];
	container_name(name, id, cname, sizeof(cname));
	struct rt_container_spec cs = {
		.name = cname,
		.image = image,
		.entrypoint = startup && *startup ? entry_cmd : entry_plain,
		.cmd = NULL,
		.env = (const char *const *)envv,
		.labels = labels,
		.n_labels = sizeof(labels) / sizeof(labels[0]),
		.mounts = mounts,
		.n_mounts = 1,
		.hostname = name,
		.nano_cpus = cpu_m * 1000000,
		.memory_bytes = mem,
		.pids_limit = a->pids_limit,
	};
	int rc = a->rt_ops->create(a->rt, &cs, cid, err);
	if (rc == -EEXIST) {
		/* A container of this session survived an earlier attempt (the
		 * manager died mid-start): replace it rather than fail. */
		struct terr ignored;
		a->rt_ops->remove(a->rt, cname, &ignored);
		rc = a->rt_ops->create(a->rt, &cs, cid, err);
	}
	for (size_t i = 0; i < k; i++)
		free(envv[i]);
	free(envv);
	if (rc < 0)
		return rc;
	rc = a->rt_ops->start(a->rt, cid, err);
	if (rc < 0) {
		struct terr ignored;
		a->rt_ops->remove(a->rt, cid, &ignored);
		return rc;
	}
	return 0;
}

int agent_destroy_session(struct agent *a, const char *session_id, const char *container_id,
			  struct terr *err)
{
	if (container_id && *container_id) {
		int rc = a->rt_ops->remove(a->rt, container_id, err);
		return rc == -ENOENT ? 0 : rc;
	}
	/* No container id recorded (the start never reported back): find it by
	 * its session label. */
	struct rt_container_info *list = NULL;
	size_t n = 0;
	int rc = a->rt_ops->list(a->rt, AGENT_LABEL_SESSION, session_id, &list, &n, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = a->rt_ops->remove(a->rt, list[i].id, err);
		if (rc == -ENOENT)
			rc = 0;
	}
	free(list);
	return rc;
}

int agent_exec(struct agent *a, const char *container_id, const char *const *argv,
	       struct rt_exec_result *out, struct terr *err)
{
	return a->rt_ops->exec(a->rt, container_id, argv, NULL, AGENT_EXEC_MAX_OUTPUT, out, err);
}

int agent_logs(struct agent *a, const char *container_id, int tail, char **out, size_t *len,
	       struct terr *err)
{
	return a->rt_ops->logs(a->rt, container_id, tail, out, len, err);
}

int agent_image_exists(struct agent *a, const char *ref, bool *exists, struct terr *err)
{
	return a->rt_ops->image_exists(a->rt, ref, exists, err);
}

/* Words for why a container ended, for status_info. */
static void death_reason(const struct rt_container_info *info, char *buf, size_t n)
{
	if (info->oom_killed)
		snprintf(buf, n, "container was OOM-killed (exceeded its memory limit), exit code %d",
			 info->exit_code);
	else if (info->error[0])
		snprintf(buf, n, "container ended with exit code %d: %s", info->exit_code, info->error);
	else
		snprintf(buf, n, "container ended by itself with exit code %d", info->exit_code);
}

static int on_runtime_event(const struct rt_event *ev, void *ud)
{
	struct agent *a = ud;
	if (strcmp(ev->action, "die") != 0 || !ev->session_id[0])
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

static void *watch_main(void *arg)
{
	struct agent *a = arg;
	while (!a->stop) {
		struct terr err = {0};
		int rc = a->rt_ops->watch(a->rt, AGENT_LABEL_AGENT, a->id, on_runtime_event, a, &a->stop, &err);
		if (a->stop)
			break;
		if (rc < 0)
			log_warn("agent", "event stream from the runtime failed, retrying: %s", err.msg);
		/* The stream ended; reconnect after a pause so a dead dockerd
		 * is not hammered. */
		for (int i = 0; i < 10 && !a->stop; i++)
			usleep(100 * 1000);
	}
	return NULL;
}

int agent_watch_start(struct agent *a, agent_event_fn fn, void *ud, struct terr *err)
{
	a->on_event = fn;
	a->event_ud = ud;
	if (pthread_create(&a->watcher, NULL, watch_main, a) != 0)
		return terr_set(err, EAGAIN, "cannot start the container watcher thread");
	a->watching = true;
	return 0;
}
