/* What the agent's files share (agent.c, agent_start.c, agent_network.c,
 * agent_exec.c, agent_images.c, agent_watch.c, agent_usage.c): struct
 * agent, which the callers' threads and the agent's own (the container
 * and image watchers, the usage, OOM and stats threads) use, each field
 * saying what guards it; and the functions one file calls in another.
 * Private to src/agent/: agent.h is the agent's interface. */
#ifndef TESSERA_AGENT_INTERNAL_H
#define TESSERA_AGENT_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/agent_firewall.h"
#include "agent/agent.h"
#include "agent/stats.h"
#include "common/model.h"
#include "gpu/gpu.h"
#include "runtime/runtime.h"

/* A running container's init, as the runtime last reported it: the
 * usage thread asks the runtime again only when that process is gone
 * (the container restarted, or ended). */
struct usage_init {
	char id[RT_ID_MAX];
	int pid;
	uint64_t start;               /* fgpu_proc_start_time of pid */
	bool seen;                    /* listed in the current round */
};
/* Starts one agent tracks at once (more start untracked, as before). */
#define AGENT_STARTS_MAX 64

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
	/* agent_config.app_publish: whether sessions' app ports are
	 * published on app_host; set at open. */
	bool app_publish;
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
	/* Drop rules between users' bridges (agent_firewall.c): fw_on when
	 * the agent may change iptables; fw_mu orders its changes. */
	bool fw_on;
	pthread_mutex_t fw_mu;

	/* What starts need of each image (its PATH, the runner's --apps),
	 * kept by reference while the image event stream is followed
	 * (img_live), and all forgotten at any image event or when that
	 * stream ends: a pull or tag may have moved any reference. img_gen
	 * counts those, so that a look begun before one is not kept. Under
	 * img_mu. */
	/* Starts under way (agent_start_session_timed), by session id: a
	 * removal that comes while one runs (a manager that restarted and
	 * forgot the start, then was told to remove the session) marks it
	 * cancelled, and the start removes the container it made rather
	 * than leave it to no session. The agent's container list names
	 * them too (agent_starts_json). Under starts_mu. */
	pthread_mutex_t starts_mu;
	struct start_inflight {
		char sid[64];
		bool cancelled;
	} starts[AGENT_STARTS_MAX];

	pthread_mutex_t img_mu;
	struct image_seen *img_seen;
	size_t n_img_seen;
	uint64_t img_gen, img_tick;
	bool img_live;

	/* The OOM thread (agent_oom_main): each running session's memory cgroup
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

	/* The stats thread (agent_stats_main): every stats_interval_ms, each
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

	/* Sandboxes (agent_sandbox.c): sbx_on from agent_config.sandboxes
	 * (set at open); the spares ready, at most one per network, and the
	 * networks the sandbox thread is to make one for, under sbx_mu. */
	atomic_bool sbx_on;
	pthread_mutex_t sbx_mu;
	pthread_cond_t sbx_cv;
	struct sandbox_spare {
		char net[96];
		char id[RT_ID_MAX];
		char ip[64];
		/* Where its app port is published ("PRIVATE=HOST:PORT", the
		 * label of its sessions' containers), "" when not. */
		char published[128];
		int64_t made_ms;       /* util_mono_ms */
	} *sbx_spares;
	size_t n_sbx_spares;
	struct sandbox_want { char net[96]; char owner_id[64]; } *sbx_wants;
	size_t n_sbx_wants;
	bool sbx_stop;
	_Atomic int64_t sbx_joined;   /* starts that joined one */
	bool sbx_image_ok;            /* only the sandbox thread */
	pthread_t sbx_thread;
	bool sbx_running;
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

/* ---- agent.c ---- */
void agent_app_endpoint_of(const struct agent *a, const struct rt_container_info *c, char *buf, size_t n);
void agent_cluster_id_copy(struct agent *a, char out[64]);
bool agent_owns(struct agent *a, const char *cluster_label);
json_t *agent_images_inline(json_t *images);

/* ---- agent_start.c ---- */
int agent_write_file(const char *path, const char *text, mode_t mode, struct terr *err);
int agent_session_dir(const struct agent *a, const char *sid, char *buf, size_t n);
const struct gpu_device *agent_node_device(const struct agent *a, const char *uuid);

/* ---- agent_network.c ---- */
void agent_network_name(const char *cluster, const char *owner_id, char *buf, size_t n);
void agent_net_use(struct agent *a, const char *name, int delta);
bool agent_net_forget(struct agent *a, const char *name);
/* A cluster session's network on this node (AGENT_CLUSTER_NETWORK_PREFIX). */
void agent_cluster_network_name(const char *cluster, const char *session_id, char *buf, size_t n);
/* driver: NULL for a bridge, "overlay" for a multi-node cluster session's. */
int agent_network_ensure(struct agent *a, const char *name, const char *driver, const char *cluster,
			 const char *owner_id,
		   bool *asked, struct terr *err);
bool agent_network_retry(int rc, const struct terr *err);

/* ---- agent_sandbox.c ---- */
/* Whether starts may join sandboxes: the setting, and what they need
 * (a runtime that imports images and makes networks, a data_dir for the
 * session's hosts file). The caller checks clusters. */
bool agent_sandbox_usable(const struct agent *a);
/* Takes the spare of network net, if there is one: its id, address and
 * published app port (sandbox_spare.published). */
bool agent_sandbox_take(struct agent *a, const char *net, char id[RT_ID_MAX], char ip[64], char published[128]);
/* Asks the sandbox thread for a spare on net (of user owner_id) unless
 * one is ready or asked for. */
void agent_sandbox_want(struct agent *a, const char *net, const char *owner_id);
/* A container of the agent's that is no session's died: when it is a
 * spare (Docker restarted, someone stopped it), it leaves the table and
 * is removed. */
void agent_sandbox_forget(struct agent *a, const char *id);
void agent_sandbox_remove(struct agent *a, const char *id);
void agent_sandbox_drop_all(struct agent *a);
int agent_sandbox_set_hostname(int pid, const char *name, struct terr *err);
void agent_sandbox_start(struct agent *a);
void agent_sandbox_stop(struct agent *a);

/* ---- agent_firewall.c (agent_firewall.h: the chain, the parser) ---- */
/* Says at the start whether rules can be kept (root, iptables). */
void agent_firewall_init(struct agent *a);
/* Adds the drop rules of bridge (a network device), unless there; 0, or
 * -1 after logging why not. */
int agent_firewall_isolate(struct agent *a, const char *bridge);
/* The same for a network by name (its bridge asked of the runtime; none
 * for a network of another driver). */
int agent_firewall_isolate_network(struct agent *a, const char *network);
/* Removes the rules of bridges that no longer exist. */
void agent_firewall_sweep(struct agent *a);
/* The same, then adds the rules of every user's network on the node. */
void agent_firewall_sweep_all(struct agent *a);

/* ---- agent_images.c ---- */
void agent_image_seen_free(struct image_seen *e);
/* agent_start.c: the starts under way as container-list entries
 * {"session_id", "starting": true, "container_id": "", "running": false,
 * ...}, appended to arr for those it does not list yet. */
void agent_starts_json(struct agent *a, json_t *arr);
void agent_images_forget_locked(struct agent *a);
void agent_images_forget(struct agent *a);
int agent_image_facts(struct agent *a, const char *ref, struct image_seen *out, bool *kept, struct terr *err);

/* ---- agent_watch.c ---- */
bool agent_stopping(const struct agent *a);

/* ---- agent_usage.c: the thread bodies agent_watch_start starts ---- */
void *agent_usage_main(void *arg);
void *agent_oom_main(void *arg);
void *agent_stats_main(void *arg);

#endif
