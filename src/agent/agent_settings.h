/* The agent's settings, defined once. agent.conf (`tessera agent`) and the
 * flags of `tessera server` (src/daemons/) are both read through this
 * table, so a setting has one name, one default, one range and one
 * validation wherever it is given. A flag is the key with '-' for '_'
 * (`gpu_usage_interval_ms` -> `--gpu-usage-interval-ms`); `id` keeps the
 * flag it always had, `--node-id`. Settings that only a separate agent
 * daemon has (the manager to register with, its own RPC address, its data
 * directory) are not flags of `tessera server`. */
#ifndef TESSERA_AGENT_AGENT_SETTINGS_H
#define TESSERA_AGENT_AGENT_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"
#include "agent/stats.h"
#include "common/conf.h"
#include "common/err.h"

/* What `tessera agent` runs with: the node's settings for agent_open, and
 * the uplink's and RPC server's. Text values are borrowed from where they
 * were read (the conf, argv) or are the table's defaults. */
struct agent_settings {
	struct agent_config agent;
	const char *manager;        /* the manager's API URL */
	const char *cluster_secret;
	const char *listen;         /* the RPC server's address */
	const char *advertise_url;  /* how the manager reaches it */
	const char *etcd;           /* etcd's client URL: cluster settings followed there */
};

enum agent_setting_type {
	AGENT_SETTING_TEXT,      /* const char *, as written */
	AGENT_SETTING_SIZE,      /* int64_t bytes (units_parse_size) */
	AGENT_SETTING_CORES,     /* int64_t milli-cores, > 0 (units_parse_milli) */
	AGENT_SETTING_INT,       /* int, min..max */
	AGENT_SETTING_OVERHEAD,  /* const char *: "auto" or a size */
	AGENT_SETTING_SECCOMP,   /* const char *: "tessera" or "default" */
	AGENT_SETTING_APP_PUBLISH, /* const char *: "yes" or "no" */
	AGENT_SETTING_PIDS,      /* int64_t: "auto" (0) or a number min..max */
};

/* flags of a setting */
#define AGENT_SETTING_FLAG 1      /* also a flag of `tessera server` */
#define AGENT_SETTING_REQUIRED 2  /* agent.conf must set it */

/* X(key, flag, type, field, default, min, max, flags, metavar, help):
 * field is a member of struct agent_settings; default is the text a user
 * would write (NULL: none, the help says what happens then); min and max
 * bound AGENT_SETTING_INT. */
#define AGENT_SETTINGS(X) \
	X(id, "node-id", TEXT, agent.id, "local", 0, 0, AGENT_SETTING_FLAG | AGENT_SETTING_REQUIRED, "ID", \
	  "node id, unique in the cluster (letters, digits, '.', '_', '-')") \
	X(manager, NULL, TEXT, manager, NULL, 0, 0, AGENT_SETTING_REQUIRED, "URL", \
	  "the manager's API URL, e.g. http://10.0.0.1:8090") \
	X(cluster_secret, NULL, TEXT, cluster_secret, NULL, 0, 0, AGENT_SETTING_REQUIRED, "SECRET", \
	  "the secret shared with the manager") \
	X(listen, NULL, TEXT, listen, "0.0.0.0:8091", 0, 0, 0, "ADDR:PORT", \
	  "where the agent's RPC server listens") \
	X(advertise_url, NULL, TEXT, advertise_url, NULL, 0, 0, AGENT_SETTING_REQUIRED, "URL", \
	  "the http:// URL the manager uses to reach the RPC server") \
	X(etcd, NULL, TEXT, etcd, NULL, 0, 0, 0, "URL", \
	  "etcd's client URL, http://HOST:PORT: the agents' cluster settings (log_max_size, log_max_files) are followed there") \
	X(docker_socket, "docker-socket", TEXT, agent.runtime_endpoint, NULL, 0, 0, AGENT_SETTING_FLAG, "URL", \
	  "Docker Engine API endpoint (default unix:///var/run/docker.sock)") \
	X(cpu, "cpu", CORES, agent.cpu_m, NULL, 0, 0, AGENT_SETTING_FLAG, "N", \
	  "CPU cores offered to sessions, fractions allowed (default: all online CPUs)") \
	X(mem, "mem", SIZE, agent.mem, NULL, 0, 0, AGENT_SETTING_FLAG, "SIZE", \
	  "memory offered to sessions (default: all memory minus the reserve)") \
	X(mem_reserve, "mem-reserve", SIZE, agent.mem_reserve, "512MiB", 0, 0, AGENT_SETTING_FLAG, "SIZE", \
	  "memory kept for the host") \
	X(runner_path, "runner-path", TEXT, agent.runner_path, NULL, 0, 0, AGENT_SETTING_FLAG, "PATH", \
	  "the runner mounted into containers (default: found beside tessera)") \
	X(data_dir, NULL, TEXT, agent.data_dir, "/var/lib/tessera-agent", 0, 0, 0, "DIR", \
	  "per-session files of GPU sessions") \
	X(mock_gpus, "mock-gpus", TEXT, agent.mock_gpus, NULL, 0, 0, AGENT_SETTING_FLAG, "SPEC", \
	  "simulated GPUs COUNTxMEM[:SMS],... (e.g. 1x8GiB, 2x80GiB:132)") \
	X(gpu_context_overhead, "gpu-context-overhead", OVERHEAD, agent.gpu_context_overhead, "auto", 0, 0, \
	  AGENT_SETTING_FLAG, "auto|SIZE", \
	  "device memory a CUDA context takes, counted in GPU shares: auto (measured), a size, 0") \
	X(gpu_usage_interval_ms, "gpu-usage-interval-ms", INT, agent.gpu_usage_interval_ms, \
	  AGENT_SETTINGS_STR(GPU_USAGE_INTERVAL_MS), 100, 60000, AGENT_SETTING_FLAG, "MS", \
	  "how often GPU sessions are charged the driver's memory beyond the fGPU count") \
	X(stats_interval_ms, "stats-interval-ms", INT, agent.stats_interval_ms, \
	  AGENT_SETTINGS_STR(STATS_INTERVAL_MS), 100, 3600000, AGENT_SETTING_FLAG, "MS", \
	  "how often every session's live usage (CPU, memory, GPU, network, block I/O) is sampled and sent") \
	X(log_max_size, "log-max-size", SIZE, agent.log_max_size, "100MiB", 0, 0, AGENT_SETTING_FLAG, "SIZE", \
	  "each session's log (its output) is kept to this size in all, the oldest dropped; 0: no cap") \
	X(log_max_files, "log-max-files", INT, agent.log_max_files, "5", 2, 100, AGENT_SETTING_FLAG, "N", \
	  "files the log of a session rotates through (log_max_size / N each)") \
	X(storage_hosts, "storage-hosts", TEXT, agent.storage_hosts, NULL, 0, 0, AGENT_SETTING_FLAG, "NAME:PATH,...", \
	  "storage hosts of users' folders, as the manager's storage_hosts (tessera server: default local:DATA_DIR/folders)") \
	X(seccomp, "seccomp", SECCOMP, agent.seccomp, "tessera", 0, 0, AGENT_SETTING_FLAG, "tessera|default", \
	  "sessions' system call filter: tessera (Docker's default profile, and no btrfs subvolumes, which would escape folder quotas) or default (Docker's own)") \
	X(pids_limit, "pids-limit", PIDS, agent.pids_limit, "auto", AGENT_PIDS_LIMIT_MIN, AGENT_PIDS_LIMIT_MAX, \
	  AGENT_SETTING_FLAG, "auto|N", \
	  "processes and threads one session may have: auto (" AGENT_SETTINGS_STR(AGENT_PIDS_PER_CPU) \
	  " per CPU core of the session, at least " AGENT_SETTINGS_STR(AGENT_PIDS_MIN) ") or a number for every session") \
	X(app_host, "app-host", TEXT, agent.app_host, NULL, 0, 0, AGENT_SETTING_FLAG, "IP", \
	  "IP address each session's app port is published on, for the app proxy (default: the host of listen)") \
	X(app_publish, "app-publish", APP_PUBLISH, agent.app_publish, NULL, 0, 0, AGENT_SETTING_FLAG, "yes|no", \
	  "publish each session's app port on app_host for an app proxy on another host (yes: tessera agent's default), or not: the proxy on this node reaches the container's address (no: tessera server's default; no docker-proxy, a faster start)") \
	X(sandboxes, "sandboxes", APP_PUBLISH, agent.sandboxes, "yes", 0, 0, AGENT_SETTING_FLAG, "yes|no", \
	  "keep a spare sandbox per user's network whose network namespace the user's next session joins, so its start sets up no network (yes), or set up each session's own (no)")

#define AGENT_SETTINGS_STR(x) AGENT_SETTINGS_STR_(x)
#define AGENT_SETTINGS_STR_(x) #x

struct agent_setting {
	const char *key;
	const char *flag;      /* `tessera server --FLAG`; NULL: agent.conf only */
	enum agent_setting_type type;
	size_t offset;         /* of the value in struct agent_settings */
	const char *def;       /* NULL: no default */
	long long min, max;    /* AGENT_SETTING_INT */
	int flags;             /* AGENT_SETTING_* */
	const char *metavar;   /* the value in help: N, SIZE, URL */
	const char *help;
};

extern const struct agent_setting agent_settings_table[];
extern const size_t agent_settings_count;

/* Fills s with every setting's default. */
void agent_settings_init(struct agent_settings *s);
/* The setting with this agent.conf key, or NULL. */
const struct agent_setting *agent_setting_find(const char *key);
/* The one validation: parses value into s. name is how an error names
 * the setting ("cpu" in agent.conf, "--cpu" on the command line). value is
 * borrowed by text settings and must outlive s. */
int agent_setting_set(struct agent_settings *s, const struct agent_setting *d, const char *value,
		      const char *name, struct terr *err);
/* agent.conf: every key of c set in s (borrowing c's values, so c must
 * outlive s); an unknown key, a bad value or a missing required key is an
 * error naming path and, where there is one, the line. */
int agent_settings_from_conf(struct agent_settings *s, const struct conf *c, const char *path,
			     struct terr *err);
/* gpu_context_overhead's value: "auto" (or NULL or empty) gives *bytes = -1,
 * else a size >= 0. Used by the table and by agent_open, so both accept
 * the same values. name as for agent_setting_set. */
int agent_settings_parse_overhead(const char *v, int64_t *bytes, const char *name, struct terr *err);
/* seccomp's value: "tessera" (or NULL or empty) gives *docker_default =
 * false, "default" true. Used the same way by the table and agent_open. */
int agent_settings_parse_seccomp(const char *v, bool *docker_default, const char *name, struct terr *err);
/* app_publish's value: "yes" gives *publish = true, "no" false, NULL or
 * empty dflt. The same way by the table and agent_open. */
int agent_settings_parse_app_publish(const char *v, bool dflt, bool *publish, const char *name, struct terr *err);

#endif
