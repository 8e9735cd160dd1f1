/* Counting the processes the kernel killed in a container for passing its
 * memory limit. A kill of any process but the container's first ends
 * nothing that Docker reports as a death, and Docker's own `oom` event may
 * stand for several kills at once: the container's memory cgroup counts
 * every one of them (`oom_kill` in cgroup v2's memory.events, and in
 * cgroup v1's memory.oom_control since Linux 4.13). The agent's OOM thread
 * (agent_usage.c) reads the count of each running session once a second, and
 * at once when Docker reports an `oom`, and tells the manager the total
 * when it grows. Pure functions over text, so that both cgroup versions
 * are tested on any machine. */
#ifndef TESSERA_AGENT_OOMWATCH_H
#define TESSERA_AGENT_OOMWATCH_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* The file holding the OOM kill count of the cgroup a process is in:
 * proc_cgroup is the text of /proc/PID/cgroup, mountinfo that of
 * /proc/self/mountinfo (both borrowed). cgroup v1 (a line naming the
 * memory controller) wins over v2's "0::" line, which a hybrid host also
 * has, without the memory controller. Writes the path to out (n bytes);
 * -ENOENT when no memory cgroup or no mount of it is found. */
int oomwatch_count_file(const char *proc_cgroup, const char *mountinfo, char *out, size_t n,
			struct terr *err);

/* The count in the text of memory.events or memory.oom_control (its
 * "oom_kill N" line); -ENOENT when it has none (a kernel older than
 * 4.13 on cgroup v1 does not count). */
int oomwatch_parse_count(const char *text, int64_t *count);

/* Reads the count of the process pid's memory cgroup: finds the file
 * (through /proc) and parses it. path (n bytes) caches the file: when it
 * is "" it is looked up and kept there; the caller keeps it per
 * container. */
int oomwatch_read(int pid, char *path, size_t n, int64_t *count, struct terr *err);

#endif
