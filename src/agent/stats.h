/* Live usage of session containers (docs/api.md, "Usage statistics"): CPU,
 * memory, block I/O from the container's cgroups (v1 or v2, whichever the
 * host runs, with the cgroupfs or the systemd driver: the cgroup is found
 * through the container's init, /proc/PID/cgroup, so both drivers look
 * alike), network from its network namespace (/proc/PID/net/dev), and app
 * connections (established TCP connections to the runner's app port, from
 * /proc/PID/net/tcp{,6}), which the idle policy needs.
 *
 * Two layers. The parsers (stats_parse_*, stats_cgroup_dir) are pure
 * functions over the files' text, so both cgroup versions are tested on
 * any host (tests/agent/fixtures/). The collector (struct stats_cg) opens
 * a container's files once and reads them with pread on every sample: a
 * sample costs a few system calls per session, no path lookups.
 *
 * Ownership: a struct stats_cg is the caller's; stats_cg_open fills it,
 * stats_cg_close closes its descriptors. */
#ifndef TESSERA_AGENT_STATS_H
#define TESSERA_AGENT_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define STATS_MAX_GPUS 16
/* agent.conf stats_interval_ms's default. */
#define STATS_INTERVAL_MS 5000

/* ---- pure parsers ---- */

/* The directory of the cgroup that process text proc_cgroup (/proc/PID/
 * cgroup) is in, for controller (v1: "cpuacct", "memory", "blkio"; the
 * v2 unified hierarchy when the host mounts no v1 hierarchy of that
 * controller), under its mount in mountinfo (/proc/self/mountinfo).
 * *v2 tells which it is. -ENOENT when there is none. */
int stats_cgroup_dir(const char *proc_cgroup, const char *mountinfo, const char *controller,
		     char *out, size_t n, bool *v2, struct terr *err);
/* The cgroup's path as proc_cgroup names it ("/docker/ID"), seen from its
 * hierarchy's root, chosen as stats_cgroup_dir chooses. controller NULL,
 * here and in stats_cgroup_dir: the v2 unified hierarchy's, even on a
 * host that mounts v1 hierarchies beside it. false when there is none or
 * it does not fit. */
bool stats_cgroup_path(const char *proc_cgroup, const char *controller, char *out, size_t n, bool *v2);

/* The number a one-value file holds (cpuacct.usage, memory.current,
 * memory.limit_in_bytes); "max" gives -1. -EINVAL when none. */
int stats_parse_value(const char *text, int64_t *v);
/* The value of "KEY N" lines (cpu.stat usage_usec, memory.stat
 * inactive_file); -ENOENT when the key is absent. */
int stats_parse_key(const char *text, const char *key, int64_t *v);
/* cgroup v2 cpu.max ("max 100000", "150000 100000"): *quota -1 when
 * unlimited. */
int stats_parse_cpu_max(const char *text, int64_t *quota, int64_t *period);
/* cgroup v2 io.stat: rbytes and wbytes summed over the devices. */
void stats_parse_io_v2(const char *text, int64_t *read, int64_t *write);
/* cgroup v1 blkio.throttle.io_service_bytes: "MAJ:MIN Read N" and "Write"
 * lines summed over the devices ("Total" lines ignored). */
void stats_parse_blkio_v1(const char *text, int64_t *read, int64_t *write);
/* /proc/PID/net/dev: bytes received and sent on every interface but lo. */
int stats_parse_netdev(const char *text, int64_t *rx, int64_t *tx);
/* The ports a session serves: those of its listening sockets. */
#define STATS_MAX_LISTEN 64
struct stats_ports {
	int n;
	int port[STATS_MAX_LISTEN];
};
/* /proc/PID/net/tcp or tcp6 text: adds the local ports of its LISTEN
 * sockets to ports (each once). */
void stats_listening(const char *text, struct stats_ports *ports);
/* The same text: established connections to one of ports from outside
 * the container (the local address not loopback): what its clients hold,
 * the runner's app port and an app reached at its own port alike; not
 * the runner's own hop to an app on the loopback, nor the session's
 * outgoing connections. */
int stats_count_inbound(const char *text, const struct stats_ports *ports);

/* ---- the collector ---- */

/* One container's open files. */
struct stats_cg {
	bool v2;
	int fd_cpu;          /* v2 cpu.stat; v1 cpuacct.usage */
	int fd_mem;          /* v2 memory.current; v1 memory.usage_in_bytes */
	int fd_memstat;      /* memory.stat */
	int fd_io;           /* v2 io.stat; v1 blkio.throttle.io_service_bytes */
	int fd_net;          /* /proc/PID/net/dev */
	int fd_tcp, fd_tcp6; /* /proc/PID/net/tcp, tcp6 */
	int64_t mem_limit;   /* bytes; 0: none */
	int64_t cpu_limit_m; /* milli-cores from the CFS quota; 0: none */
	int64_t prev_cpu_ns; /* the last reading, for the rate; -1: none yet */
	int64_t prev_mono_ns;
	int conns;           /* app connections at conns_ns (0: never counted) */
	int64_t conns_ns;
};

/* How often app connections are counted. Reading /proc/PID/net/tcp walks
 * the kernel's whole socket hash, whichever namespace asks (about 2 ms on
 * a host with many connections, bench/usage_bench.c): too much for every
 * sample; the idle policy counts in minutes. */
#define STATS_CONN_CHECK_NS (30LL * 1000000000)

/* One reading. cpu_cores is the rate since the previous reading of the
 * same stats_cg (-1 on the first). */
struct stats_reading {
	double cpu_cores;
	int64_t cpu_ns;       /* cumulative */
	int64_t mem_bytes, mem_limit;
	int64_t cpu_limit_m;
	int64_t net_rx, net_tx, blk_read, blk_write;
	int app_conns;        /* established connections to its served ports (stats_count_inbound) */
};

/* Opens the files of the container whose init is host pid (proc_root:
 * "/proc", or a test's copy; mountinfo_path: NULL for
 * /proc/self/mountinfo). On failure nothing stays open. */
int stats_cg_open(struct stats_cg *cg, const char *proc_root, int pid, const char *mountinfo_path,
		  struct terr *err);
/* Reads the files (pread from 0). mono_ns: the caller's clock now.
 * app_port: the runner's app port, 0 when the session has none (then no
 * connection is counted); connections to every port the session serves
 * are counted (stats_count_inbound), at most every STATS_CONN_CHECK_NS
 * (the last count between). */
int stats_cg_read(struct stats_cg *cg, int64_t mono_ns, int app_port, struct stats_reading *out,
		  struct terr *err);
void stats_cg_close(struct stats_cg *cg);

#endif
