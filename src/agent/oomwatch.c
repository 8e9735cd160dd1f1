/* OOM kill counts from a container's memory cgroup (oomwatch.h). */
#include "agent/oomwatch.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* Whether the comma-separated list [s, s+n) holds word. */
static bool list_has(const char *s, size_t n, const char *word)
{
	size_t wl = strlen(word);
	const char *end = s + n;
	while (s < end) {
		const char *comma = memchr(s, ',', (size_t)(end - s));
		size_t len = comma ? (size_t)(comma - s) : (size_t)(end - s);
		if (len == wl && !memcmp(s, word, wl))
			return true;
		s += len + 1;
	}
	return false;
}

/* The memory cgroup's path from /proc/PID/cgroup ("ID:CONTROLLERS:PATH"
 * lines) into out; *v2 tells which version it came from. */
static bool cgroup_path(const char *text, char *out, size_t n, bool *v2)
{
	bool found_v2 = false;
	char v2_path[4096] = "";
	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		const char *c1 = memchr(line, ':', len);
		const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
		if (c2) {
			size_t plen = len - (size_t)(c2 + 1 - line);
			if (list_has(c1 + 1, (size_t)(c2 - c1 - 1), "memory")) {
				if (plen >= n)
					return false;
				memcpy(out, c2 + 1, plen);
				out[plen] = '\0';
				*v2 = false;
				return true;
			}
			if (c2 == c1 + 1 && c1 - line == 1 && line[0] == '0' && plen < sizeof(v2_path)) {
				memcpy(v2_path, c2 + 1, plen);
				v2_path[plen] = '\0';
				found_v2 = true;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	if (!found_v2 || strlen(v2_path) >= n)
		return false;
	strcpy(out, v2_path);
	*v2 = true;
	return true;
}

/* The mount of the memory hierarchy in /proc/self/mountinfo: its root
 * in the hierarchy and its mount point. Fields: ID PARENT MAJ:MIN ROOT
 * MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS. */
static bool memory_mount(const char *mountinfo, bool v2, char *root, char *point, size_t n)
{
	for (const char *line = mountinfo; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[4096];
		if (len < sizeof(buf)) {
			memcpy(buf, line, len);
			buf[len] = '\0';
			char *sep = strstr(buf, " - ");
			char r[4096], p[4096], fstype[64], super[1024] = "";
			if (sep && sscanf(buf, "%*s %*s %*s %4095s %4095s", r, p) == 2 &&
			    sscanf(sep + 3, "%63s %*s %1023s", fstype, super) >= 1) {
				bool match = v2 ? !strcmp(fstype, "cgroup2")
						: !strcmp(fstype, "cgroup") && list_has(super, strlen(super), "memory");
				if (match && strlen(r) < n && strlen(p) < n) {
					strcpy(root, r);
					strcpy(point, p);
					return true;
				}
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return false;
}

int oomwatch_count_file(const char *proc_cgroup, const char *mountinfo, char *out, size_t n, struct terr *err)
{
	char path[4096], root[4096], point[4096];
	bool v2 = false;
	if (!cgroup_path(proc_cgroup, path, sizeof(path), &v2))
		return terr_set(err, ENOENT, "the process is in no memory cgroup");
	if (!memory_mount(mountinfo, v2, root, point, sizeof(root)))
		return terr_set(err, ENOENT, "no cgroup%s mount %sfound", v2 ? "2" : "",
				v2 ? "" : "of the memory controller ");
	/* The path is seen from the hierarchy's root; the mount may show a
	 * part of it only (its root), under its mount point. */
	const char *rel = path;
	size_t rl = strlen(root);
	if (strcmp(root, "/") != 0) {
		if (strncmp(path, root, rl) != 0 || (path[rl] != '/' && path[rl] != '\0'))
			return terr_set(err, ENOENT, "cgroup %s is outside the mounted part %s", path, root);
		rel = path + rl;
	}
	if (snprintf(out, n, "%s%s%s", point, !strcmp(rel, "/") ? "" : rel,
		     v2 ? "/memory.events" : "/memory.oom_control") >= (int)n)
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
