/* OOM kill counts from a container's memory cgroup (oomwatch.h). */
#include "agent/oomwatch.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/stats.h"
#include "common/util.h"

int oomwatch_count_file(const char *proc_cgroup, const char *mountinfo, char *out, size_t n, struct terr *err)
{
	/* The memory cgroup's directory, found as the usage collector finds
	 * its cgroups (v1's memory hierarchy wins over v2's "0::" line). */
	char dir[4096];
	bool v2 = false;
	int rc = stats_cgroup_dir(proc_cgroup, mountinfo, "memory", dir, sizeof(dir), &v2, err);
	if (rc < 0)
		return rc == -ENAMETOOLONG ? terr_set(err, ENAMETOOLONG, "cgroup path too long") : rc;
	if (snprintf(out, n, "%s%s", dir, v2 ? "/memory.events" : "/memory.oom_control") >= (int)n)
		return terr_set(err, ENAMETOOLONG, "cgroup path too long");
	return 0;
}

int oomwatch_parse_count(const char *text, int64_t *count)
{
	for (const char *line = text; line && *line;) {
		long long v;
		char tail;
		if (sscanf(line, "oom_kill %lld%c", &v, &tail) >= 1 && v >= 0) {
			*count = v;
			return 0;
		}
		const char *nl = strchr(line, '\n');
		line = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

int oomwatch_read(int pid, char *path, size_t n, int64_t *count, struct terr *err)
{
	int rc;
	if (!path[0]) {
		char proc[64], *cg = NULL, *mi = NULL;
		size_t len;
		snprintf(proc, sizeof(proc), "/proc/%d/cgroup", pid);
		if ((rc = util_read_file(proc, &cg, &len, err)) < 0 ||
		    (rc = util_read_file("/proc/self/mountinfo", &mi, &len, err)) < 0) {
			free(cg);
			return rc;
		}
		rc = oomwatch_count_file(cg, mi, path, n, err);
		free(cg);
		free(mi);
		if (rc < 0) {
			path[0] = '\0';
			return rc;
		}
	}
	char *text = NULL;
	size_t len;
	if ((rc = util_read_file(path, &text, &len, err)) < 0)
		return rc;
	rc = oomwatch_parse_count(text, count);
	free(text);
	if (rc < 0)
		return terr_set(err, ENOENT, "%s has no oom_kill count (Linux 4.13 or later counts kills)", path);
	return 0;
}
