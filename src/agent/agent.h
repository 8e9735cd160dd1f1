/* The agent: one per node. Turns session specs into containers through a
 * runtime (runtime/runtime.h), reports containers that end by themselves,
 * and describes its node. Used in-process by `tessera server` and behind
 * the RPC server of `tessera agent` (agent/rpc.c). Thread-safe. */
#ifndef TESSERA_AGENT_AGENT_H
#define TESSERA_AGENT_AGENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/model.h"
#include "runtime/runtime.h"

struct agent;

/* Session apps (docs/apps.md, "The runner's app port"). */
#define AGENT_APP_PORT 7611
#define AGENT_APP_SECRET_PATH "/run/tessera/app-secret"
#define AGENT_APP_SECRET_HEX 64
#define AGENT_APP_ENDPOINT_MAX 96

struct agent_config {
	const char *id;               /* node id, e.g. "local" or the hostname */
	const char *runtime_endpoint; /* NULL: the runtime's default socket */
	const char *runner_path;      /* NULL: tessera-runner beside the binary */
	int64_t cpu_m;                /* 0: all online CPUs */
	int64_t mem;                  /* 0: all memory minus mem_reserve */
	int64_t mem_reserve;          /* kept for the host */
	int64_t pids_limit;           /* per container; 0: auto (agent_pids_limit) */
	/* Each session's log (what Docker keeps of its output): at most
	 * log_max_size bytes in log_max_files rotating files, the oldest
	 * dropped; log_max_size 0: no cap. log_max_files < 2: 5. */
	int64_t log_max_size;
	int log_max_files;
	const char *data_dir;         /* per-session files (fGPU limits); required for GPUs */
	const char *mock_gpus;        /* "COUNTxMEM[:SMS],...": mock devices instead of NVML */
	const char *nvml_lib_dir;     /* NULL: the loader's search path */
	/* Device memory a CUDA context takes, counted in every process's
	 * share: NULL or "auto" measures it at start (tessera-gpu-probe),
	 * else a size ("0" turns the counting off). */
	const char *gpu_context_overhead;
	/* How often the driver's per-process figures are charged to the
	 * sessions (gpu/gpu_usage.h); 0: GPU_USAGE_INTERVAL_MS. */
	int gpu_usage_interval_ms;
	/* How often running sessions' OOM kills are counted (oomwatch.h);
	 * 0: AGENT_OOM_INTERVAL_MS; < 0: not at all (a test of the usage
	 * thread that counts the runtime's inspects). */
	int oom_interval_ms;
	/* How often every running session's live usage is sampled and sent
	 * (agent/stats.h); 0: STATS_INTERVAL_MS; < 0: not at all. */
	int stats_interval_ms;
	/* Where the files mounted into sessions (runner, fGPU library, mock
	 * driver, gpu-info, probe) are looked for: a build tree's root or a
	 * prefix's bin directory. NULL: the directory of the running binary. */
	const char *asset_dir;
	/* Session apps (docs/apps.md): the IP address of this node that
	 * each container's app port (AGENT_APP_PORT) is published on, at a
	 * port Docker picks; NULL: 127.0.0.1. A wildcard (0.0.0.0, ::)
	 * publishes on every address, and app_report_host (NULL: 127.0.0.1)
	 * is then the host reported in app_endpoint. */
	const char *app_host;
	const char *app_report_host;
	/* "no": the app port is not published at all; the app proxy must run
	 * on this node (in its network namespace), where it reaches the
	 * container's address (docs/admin.md, "How the proxy reaches a
	 * session's runner"): no docker-proxy, and a start Docker makes
	 * faster. NULL or "yes": published on app_host. */
	const char *app_publish;
	/* "yes" (NULL: yes) or "no": whether a spare sandbox is kept per
	 * user's network for their next start to join (agent_sandbox.c). */
	const char *sandboxes;
	/* Storage hosts of users' folders as the manager declares them
	 * ("NAME:PATH[,...]", docs/admin.md "Storage"): a session's mount
	 * must be a folder directory directly under one of these paths. NULL
	 * or "": folder mounts are refused. */
	const char *storage_hosts;
	/* Sessions' system call filter: NULL or "tessera": Docker's default
	 * profile without the ioctls that make btrfs subvolumes and
	 * snapshots (runtime/docker_seccomp.h); "default": Docker's own. */
	const char *seccomp;
	/* The container runtime; NULL: Docker (runtime_docker_ops). Tests
	 * put one of their own here. */
	const struct runtime_ops *runtime;
};

/* Called from the watcher thread when a session's container ends by
 * itself. event (borrowed): {"session_id","event":"died","exit_code",
 * "oom_killed","reason"}; from the OOM thread when the count of processes
 * the kernel killed in a running session's container for passing its
 * memory limit grew: {"session_id","container_id","event":"oom",
 * "oom_kills": total so far} (oomwatch.h). Two threads: a callee must be
 * thread-safe. A callee that keeps it past the call for another
 * thread keeps a json_deep_copy, not a reference: jansson's reference
 * counts do not order the watcher's last use before another thread's free. */
typedef void (*agent_event_fn)(void *ud, const char *agent_id, json_t *event);

int agent_open(struct agent **out, const struct agent_config *cfg, struct terr *err);
/* Stops the watcher; leaves every container running (restart safety). */
void agent_close(struct agent *a);

const char *agent_id(const struct agent *a);
struct res agent_capacity(const struct agent *a);

/* {"id","version","capacity":{"cpu_milli","mem","fgpu_milli"},
 *  "runtime":"docker 20.10.24 (API 1.41)","containers":[...],
 *  "gpus":[{"index","uuid","name","memory","sms"}],"mock_gpus":bool,
 *  "images":[...] as agent_images lists them} (new ref). */
int agent_describe(struct agent *a, json_t **out, struct terr *err);
/* [{"session_id","container_id","running","exit_code","oom_killed","state",
 *   "cluster_id","app_endpoint"}]: the agent's own containers
 * (agent_set_cluster_id); cluster_id is "" for those made before
 * containers carried it; app_endpoint "HOST:PORT" where a running
 * container's app port is published, "" when it has none (made by an
 * older agent) or is not running. */
int agent_list_containers(struct agent *a, json_t **out, struct terr *err);

/* spec (borrowed): {"id","name","owner","owner_id","root","image",
 * "resources":{"cpu_milli","mem","fgpu_milli"},"env":{...},"startup_command",
 * "gpus":[{"index","uuid","fgpu_milli","memory_limit","sm_limit_percent"}],
 * "app_secret"}, read by session_spec_from_json (agent/session_spec.h,
 * whose writer the manager uses). With app_secret (64 hex characters; absent from an
 * older manager: then the session has no apps), the container gets it
 * read-only at AGENT_APP_SECRET_PATH, its app port published on app_host,
 * and the runner the image's ai.backend.service-ports as --apps; the
 * published HOST:PORT goes into app_endpoint (may be NULL; "" without
 * apps).
 * Creates and starts the container, with only its devices and the fGPU
 * limits of its shares, on its owner's network (made when missing and
 * kept afterwards; the default network when the spec has no owner_id, as
 * from an older manager), running as AGENT_WORK_USER unless "root" is
 * true; cid gets its id. */
/* Words for a container whose PID 1 (the runner) was ended by a signal,
 * from its exit code 128+N: "killed by SIGKILL from outside the session
 * (...)" or "killed by SIGSEGV (signal 11)"; false for another code. */
bool agent_signal_words(int exit_code, char *buf, size_t n);
int agent_start_session(struct agent *a, json_t *spec, char cid[RT_ID_MAX],
			char app_endpoint[AGENT_APP_ENDPOINT_MAX], struct terr *err);
/* Where a successful start's time went on the node, in milliseconds of
 * the agent's monotonic clock: total_ms from the spec's arrival; of it,
 * the image's facts, the user's network, Docker's create and start of
 * the container, and reading where the runner's app port was published.
 * The manager turns them into the start's breakdown (docs/api.md,
 * "start_breakdown"); the rest of total_ms is the start's planning. */
struct agent_start_times {
	int64_t total_ms, image_ms, network_ms, create_ms, start_ms, port_ms;
};
/* agent_start_session, with the times into *times (zeroed on failure). */
int agent_start_session_timed(struct agent *a, json_t *spec, char cid[RT_ID_MAX],
			      char app_endpoint[AGENT_APP_ENDPOINT_MAX], struct agent_start_times *times,
			      struct terr *err);
/* Removes the session's container (found by id, else by label); its
 * owner's network stays, for their next session. Absent is success. A running container is first
 * killed through the runtime, and when that has not stopped it within
 * AGENT_KILL_WAIT_MS, through its cgroups (agent/cgkill.h; counted in
 * agent_cgroup_kill_counts). */
int agent_destroy_session(struct agent *a, const char *session_id,
			  const char *container_id, struct terr *err);
#define AGENT_KILL_WAIT_MS 5000
/* Removals whose container the agent killed through its cgroups, and
 * those where that failed too (any thread). */
void agent_cgroup_kill_counts(struct agent *a, int64_t *kills, int64_t *failures);
/* The spare sandboxes ready now, and the sessions started in one since
 * the agent opened (docs/architecture.md, "Sandboxes"; any thread). */
void agent_sandbox_counts(struct agent *a, int64_t *spares, int64_t *joined);
/* Starts argv in the container, as the user its session runs as (label
 * AGENT_LABEL_RUN_AS) and in that user's working directory; *out (the
 * caller pump_closes it) streams its output in the frames of
 * common/frames.h, stdout and stderr apart and byte for byte, then its
 * exit code. timeout_s > 0: the command is stopped past that many
 * seconds (SIGTERM, then SIGKILL; exit code 124
 * and a line on stderr), through the runner mounted in every session. */
int agent_exec_stream(struct agent *a, const char *container_id, const char *const *argv,
		      int timeout_s, struct pump **out, struct terr *err);
/* The container's log as a byte stream (runtime_ops.logs_stream): the
 * last `tail` lines (0: all), and with follow what comes until the
 * container ends. *out: the caller pump_closes it. */
int agent_logs_stream(struct agent *a, const char *container_id, int tail, bool follow,
		      struct pump **out, struct terr *err);
int agent_image_exists(struct agent *a, const char *ref, bool *exists, struct terr *err);
/* *images (new ref): the node's images as the runtime lists them,
 * [{"id","tags":["repo:tag",...],"size","labels":{...}}]. */
int agent_images(struct agent *a, json_t **images, struct terr *err);
/* Removes one reference of an image from the node (image rm); -ENOENT
 * when the node has none by that name. */
int agent_image_remove(struct agent *a, const char *ref, struct terr *err);

/* Commits a session's container into a new image (session commit).
 * req (borrowed): {"container_id","ref","labels":{...},"source_image",
 * "registry"}: the container's filesystem becomes image ref, with labels
 * added to those it carries; its variables are source_image's (when that
 * is still on the node), not the session's. With "registry" ("host:port",
 * may be absent), the image is then pushed there as registry/ref (that
 * second reference is removed afterwards). *result (new ref): {"ref",
 * "pushed","push_error" (when the push failed: the commit still stands)}. */
int agent_commit(struct agent *a, json_t *req, json_t **result, struct terr *err);

/* Progress of agent_pull: bytes transferred and known total (0 while
 * unknown) of ref, with the caller's key (borrowed). */
typedef void (*agent_progress_fn)(void *ud, const char *key, const char *ref, int64_t current,
				  int64_t total);
/* Pulls registry/ref from registry ("host:port") and tags it ref, so
 * sessions name it as everywhere else. Progress is reported at most about
 * once a second and once at the end: to fn, or, when fn is NULL and key is
 * not empty, through the event callback (agent_watch_start) as
 * {"event":"progress","session_id":key,"ref","current","total"}. An image
 * the registry lacks is -ENOENT; the registry's message is in err. */
int agent_pull(struct agent *a, const char *ref, const char *registry, const char *key,
	       agent_progress_fn fn, void *ud, struct terr *err);

/* The identity of the installation the agent serves (the manager's
 * cluster id; copied). Its containers are labelled with it, and it lists,
 * reports and charges only the containers that carry it, so that servers
 * sharing one Docker (each with an agent of the same id, "local" by
 * default) leave each other's containers alone. A container without the
 * label, made before containers carried it, counts as the agent's when
 * its agent label matches (nothing is lost on upgrade). NULL or "": not
 * known yet, every container with the agent's label counts. Any thread. */
void agent_set_cluster_id(struct agent *a, const char *cluster_id);

/* Cluster-wide settings that agents apply at run time, without a restart
 * (docs/admin.md, "Settings and per-user policies"): set with `tessera
 * config set`, they override agent.conf's value of the same name on every
 * node; null goes back to agent.conf's. They reach an agent from etcd
 * (agent.conf's etcd) or, in `tessera server`, from its manager. */
#define AGENT_CLUSTER_KEYS "log_max_size, log_max_files"
bool agent_cluster_key(const char *key);
/* The one check of such a value (value borrowed; NULL or null is valid:
 * unset). *out (may be NULL) gets the number, -1 for unset. ENOENT for a
 * key that is not one of them. */
int agent_cluster_check(const char *key, json_t *value, int64_t *out, struct terr *err);
/* Checks and applies one (value borrowed; NULL or null: agent.conf's
 * value): containers created from now on get it. Thread-safe. */
int agent_cluster_set(struct agent *a, const char *key, json_t *value, struct terr *err);

/* Replaces the storage hosts folders are bound from (hosts copied).
 * Only `tessera server` calls it, handing its in-process agent the
 * manager's storage_hosts setting as it changes: a separate agent binds
 * from agent.conf's storage_hosts alone, the boundary its machine's admin
 * sets (docs/admin.md, "Storage hosts as a cluster setting"). Thread-safe. */
void agent_set_storage_hosts(struct agent *a, const struct model_storage_host *hosts, size_t n);

/* Starts the watcher threads: one reports containers that end by
 * themselves, the other every change of the node's images as
 * {"event":"images","images":[...]} (agent_images' list); and the OOM
 * thread reporting OOM kills (every AGENT_OOM_INTERVAL_MS, and at once on
 * Docker's `oom` event). */
int agent_watch_start(struct agent *a, agent_event_fn fn, void *ud, struct terr *err);
/* Stops and joins those threads: after it returns the agent calls fn no
 * more (a Docker event arriving meanwhile is dropped). tessera server
 * calls it before closing the manager that fn reports to; agent_close
 * calls it too. No-op when they are not running. */
void agent_watch_stop(struct agent *a);

/* The last round of live usage (the "stats" event the watcher callback
 * got, agent/stats.h), new reference, NULL before the first. Any thread. */
json_t *agent_stats_last(struct agent *a);
int agent_stats_interval_ms(const struct agent *a);
/* The agent's metrics (agent_metrics.c) appended to t: the last round's
 * per-session and per-GPU gauges. */
struct metrics_text;
void agent_metrics_write(struct agent *a, struct metrics_text *t);

/* A session's pids limit (processes and threads), agent.conf pids_limit:
 * a fixed number for every session, or 0 ("auto"): AGENT_PIDS_PER_CPU
 * per CPU core the session was given, at least AGENT_PIDS_MIN, and for a
 * session without a CPU limit what the node's offered cores give. So the
 * sessions of a node hold together about AGENT_PIDS_PER_CPU processes
 * per core it offers (plus the floor of the smallest), and a fork bomb in
 * a small session stops at a few hundred, not at thousands that starve
 * the host and Docker (docs/admin.md, "Session isolation"). */
#define AGENT_PIDS_PER_CPU 512
#define AGENT_PIDS_MIN 256
#define AGENT_PIDS_LIMIT_MIN 16
#define AGENT_PIDS_LIMIT_MAX 4194304
int64_t agent_pids_limit(int64_t setting, int64_t session_cpu_m, int64_t node_cpu_m);

#define AGENT_OOM_INTERVAL_MS 1000
#define AGENT_RUNNER_TARGET "/opt/tessera/bin/tessera-runner"
/* Login shells (the terminal app, `session shell`, `bash -l`) run
 * /etc/profile, which in Debian's and Alpine's images sets PATH anew and
 * so drops the platform's tools; it sources the .sh files of
 * /etc/profile.d after that, and this one puts them back
 * (write_profile in agent.c). */
#define AGENT_PROFILE_TARGET "/etc/profile.d/tessera.sh"
#define AGENT_LABEL_SESSION "tessera.session"
#define AGENT_LABEL_AGENT "tessera.agent"
#define AGENT_LABEL_NAME "tessera.name"
#define AGENT_LABEL_OWNER "tessera.owner"
#define AGENT_LABEL_CLUSTER "tessera.cluster"
/* The event that carries the node's images after they changed; "images"
 * is null when the list could not be made or is larger than
 * AGENT_IMAGES_INLINE_MAX bytes, and so at registration: the manager
 * then fetches it (GET /rpc/v1/images). */
#define AGENT_EVENT_IMAGES "images"
#define AGENT_IMAGES_INLINE_MAX (256u << 10)
/* "UID:GID" the session's processes run as; absent on containers made
 * before sessions ran as a user of their own (those run as root). */
#define AGENT_LABEL_RUN_AS "tessera.run_as"
/* On a user's network: whose it is (the user's id). */
#define AGENT_LABEL_OWNER_ID "tessera.owner_id"
/* Sandboxes (agent_sandbox.c): the container's role ("sandbox"); on a
 * session's container, the sandbox whose network namespace it joined
 * and that sandbox's address. */
#define AGENT_LABEL_ROLE "tessera.role"
#define AGENT_LABEL_SANDBOX "tessera.sandbox"
#define AGENT_LABEL_SANDBOX_IP "tessera.sandbox_ip"
/* ... and where the sandbox's app port is published, when it is:
 * "PRIVATE=HOST:PORT" (Docker reports none for the container that
 * joined it). */
#define AGENT_LABEL_SANDBOX_PUBLISHED "tessera.sandbox_published"
/* The sandboxes' image (no file of its own: the runner is bound in) and
 * the first part of their names. */
#define AGENT_SANDBOX_IMAGE "tessera-sandbox:1"
#define AGENT_SANDBOX_PREFIX "tessera-sandbox"

/* Who a session's processes are unless its owner may and asks to be root:
 * the images' `work` user, made at start by the runner when an image has
 * none (src/runner/runner.c). */
#define AGENT_WORK_UID_GID "1000:1000"
#define AGENT_WORK_HOME "/home/work"
/* Folder mounts one session may have (the plan's 48 mounts hold them
 * beside the agent's own). */
#define AGENT_MAX_FOLDER_MOUNTS 16
/* A user's network on a node: this prefix, up to 16 characters of the
 * user's id, '-', up to 8 of the cluster id. */
#define AGENT_NETWORK_PREFIX "tessera-u-"
/* A cluster session's network (its containers', and only theirs): this
 * prefix, 16 characters of the session's (its main's) id, '-', up to 8
 * of the cluster id. A bridge for single-node, an overlay of Docker's
 * swarm mode for multi-node. Removed with the session's last container
 * on the node. */
#define AGENT_CLUSTER_NETWORK_PREFIX "tessera-c-"
/* Where a cluster session's SSH key pair is mounted for the runner
 * (src/runner/cluster.h's CLUSTER_SSH_DIR). */
#define AGENT_CLUSTER_SSH_TARGET "/run/tessera/ssh"
/* The port torch.distributed's rendezvous listens on in main1 unless
 * the session's env says otherwise (PyTorch's own default). */
#define AGENT_CLUSTER_MASTER_PORT "29500"
/* A round of live usage (agent/stats.h), from the stats thread every
 * stats_interval_ms: {"event":"stats","t","period_ms","samples":[{
 * "session_id","container_id","cpu_cores","cpu_pct","mem_bytes",
 * "mem_limit_bytes","gpus":[{"uuid","util_pct","mem_bytes",
 * "mem_limit_bytes"}],"net_rx_bytes","net_tx_bytes","blk_read_bytes",
 * "blk_write_bytes","app_conns"}],"node":{"cpu_cores","mem_bytes",
 * "gpus":[{"uuid","util_pct","mem_used_bytes"}]}}; util_pct null where
 * not measured. */
#define AGENT_EVENT_STATS "stats"
/* A pull's progress event (agent_pull), beside the died events. */
#define AGENT_EVENT_PROGRESS "progress"

#endif
