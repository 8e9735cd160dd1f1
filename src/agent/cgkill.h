/* Killing a session container's processes through its cgroups, for when
 * Docker does not stop it (issue 27: a fork bomb in a session of 0.5 CPU
 * kept `docker kill` and `docker rm -f` from finishing for 12 minutes,
 * until its cgroup was frozen and its processes killed from the host).
 * agent_destroy_session asks Docker first and comes here only when
 * Docker has not stopped the container within AGENT_KILL_WAIT_MS; Docker
 * then sees its processes gone and removes the container as usual.
 *
 * Both cgroup versions, as the host runs them:
 * - v2 (and the unified hierarchy of a hybrid host, where Docker's runc
 *   puts containers too): `cgroup.kill` (Linux 5.14), which SIGKILLs every
 *   process of the cgroup and its descendants, forks racing it included;
 *   on an older kernel, `cgroup.freeze`, SIGKILL to each process, thaw;
 * - v1: the freezer hierarchy: freeze (no process runs or forks any more),
 *   SIGKILL every process in cgroup.procs, thaw, when they die.
 * On a hybrid host both run: the freezer's pass also thaws a container
 * that someone froze (a frozen process takes its SIGKILL only when
 * thawed).
 *
 * The cgroups are found from the container's init (/proc/PID/cgroup, as
 * the usage collector finds them: the cgroupfs and the systemd drivers
 * look alike there), or, when Docker could not say the pid, from the
 * places Docker's two cgroup drivers put a container (docker/ID,
 * system.slice/docker-ID.scope). Never a hierarchy's root, and never a
 * cgroup that holds the agent itself.
 *
 * Two layers, as stats.h: the finding is pure functions over the text of
 * /proc files (tests/agent/test_cgkill.c runs them on v1, v2 and hybrid
 * fixtures); the killing works on the directories it is given. */
#ifndef TESSERA_AGENT_CGKILL_H
#define TESSERA_AGENT_CGKILL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

#define CGKILL_PATH_MAX 4096

/* The directories to act on; "" where there is none. */
struct cgkill_target {
	char v2[CGKILL_PATH_MAX];       /* the cgroup in the v2 (unified) hierarchy */
	char freezer[CGKILL_PATH_MAX];  /* the cgroup in the v1 freezer hierarchy */
};

/* From proc_cgroup (the text of the container's /proc/PID/cgroup),
 * mountinfo (/proc/self/mountinfo) and self_cgroup (/proc/self/cgroup,
 * the agent's own; may be NULL): the container's v2 and v1 freezer
 * directories. Left out ("" in t): a cgroup that is its hierarchy's root,
 * that is or holds the agent's own, or whose last path component does not
 * hold container_id (both of Docker's drivers name the container's cgroup
 * after its id; another cgroup means the pid is no longer the container's
 * init but another process that got its number). -ENOENT when neither is
 * left, with err saying why. */
int cgkill_find(const char *proc_cgroup, const char *mountinfo, const char *self_cgroup,
		const char *container_id, struct cgkill_target *t, struct terr *err);

/* Where Docker's cgroup driver `driver` (0: cgroupfs, "docker/ID"; 1:
 * systemd, "system.slice/docker-ID.scope") puts container_id (Docker's
 * full id, 64 hex digits), under the mounts of mountinfo, with the same
 * checks as cgkill_find. -EINVAL for an id that is not a full one or a
 * driver out of range, -ENOENT as above. The directories may not exist:
 * the caller looks. */
int cgkill_layout(const char *mountinfo, const char *self_cgroup, const char *container_id, int driver,
		  struct cgkill_target *t, struct terr *err);

/* What cgkill_kill did. */
struct cgkill_report {
	bool used_kill;      /* wrote cgroup.kill */
	bool used_freezer;   /* froze, killed and thawed (v1, or v2 without cgroup.kill) */
	int found;           /* processes in the cgroups when it began */
	int signalled;       /* SIGKILLs sent one by one (the freezer passes) */
};

/* Kills every process in t's cgroups (as the header says). Pids the
 * agent cannot see (0 in cgroup.procs: the agent in another PID
 * namespace), 1 and its own are skipped. 0 when every step it took
 * worked, else the first error (it still takes the other steps: a thaw
 * is never skipped after a freeze). */
int cgkill_kill(const struct cgkill_target *t, struct cgkill_report *r, struct terr *err);

/* The whole of it for a container: its cgroups found through pid (its
 * init on the host; <= 0 when not known) or else through the drivers'
 * layout for container_id (whichever directories exist), then killed.
 * -ENOENT when no cgroup of it is found (it is gone already). */
int cgkill_container(int pid, const char *container_id, struct cgkill_report *r, struct terr *err);

#endif
