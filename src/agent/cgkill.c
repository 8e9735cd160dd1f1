/* Killing a container's processes through its cgroups (cgkill.h). */
#include "agent/cgkill.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/stats.h"
#include "common/util.h"

/* Whether the last component of path holds id. */
static bool named_for(const char *path, const char *id)
{
	const char *last = strrchr(path, '/');
	return id && *id && strstr(last ? last + 1 : path, id) != NULL;
}

/* One hierarchy's directory for the container into out ("" when left
 * out); *why says why it was left out. controller NULL: v2. */
static void pick(const char *proc_cgroup, const char *mountinfo, const char *self_cgroup, const char *container_id,
		 const char *controller, char *out, const char **why)
{
	char path[CGKILL_PATH_MAX], self[CGKILL_PATH_MAX];
	bool v2 = false, self_v2 = false, dir_v2 = false;
	out[0] = '\0';
	/* controller "freezer" on a v2-only host gives the v2 line: that
	 * one is the v2 pick's, not the freezer's. */
	if (!stats_cgroup_path(proc_cgroup, controller, path, sizeof(path), &v2) || v2 != (controller == NULL))
		return;
	if (!strcmp(path, "/")) {
		*why = "it is the root cgroup";
		return;
	}
	if (!named_for(path, container_id)) {
		*why = "its cgroup is not named for the container (its pid is another process's now)";
		return;
	}
	if (self_cgroup && stats_cgroup_path(self_cgroup, controller, self, sizeof(self), &self_v2) && self_v2 == v2) {
		size_t pl = strlen(path);
		if (!strncmp(self, path, pl) && (self[pl] == '\0' || self[pl] == '/')) {
			*why = "its cgroup holds the agent itself";
			return;
		}
	}
	struct terr e = {0};
	if (stats_cgroup_dir(proc_cgroup, mountinfo, controller, out, CGKILL_PATH_MAX, &dir_v2, &e) < 0 ||
	    dir_v2 != v2) {
		out[0] = '\0';
		*why = "its hierarchy is not mounted here";
	}
}

int cgkill_find(const char *proc_cgroup, const char *mountinfo, const char *self_cgroup,
		const char *container_id, struct cgkill_target *t, struct terr *err)
{
	const char *why = "it is in no cgroup v2 or v1 freezer hierarchy";
	pick(proc_cgroup, mountinfo, self_cgroup, container_id, NULL, t->v2, &why);
	pick(proc_cgroup, mountinfo, self_cgroup, container_id, "freezer", t->freezer, &why);
	if (!t->v2[0] && !t->freezer[0])
		return terr_set(err, ENOENT, "no cgroup of container %.12s to kill: %s", container_id ? container_id : "",
				why);
	return 0;
}

int cgkill_layout(const char *mountinfo, const char *self_cgroup, const char *container_id, int driver,
		  struct cgkill_target *t, struct terr *err)
{
	size_t n = container_id ? strlen(container_id) : 0;
	if (n != 64 || strspn(container_id, "0123456789abcdef") != 64)
		return terr_set(err, EINVAL, "'%s' is not a full container id", container_id ? container_id : "");
	if (driver < 0 || driver > 1)
		return terr_set(err, EINVAL, "no cgroup driver %d", driver);
	/* As the container's /proc/PID/cgroup would name them. */
	char text[512];
	if (driver == 0)
		snprintf(text, sizeof(text), "1:freezer:/docker/%s\n0::/docker/%s\n", container_id, container_id);
	else
		snprintf(text, sizeof(text), "1:freezer:/system.slice/docker-%s.scope\n0::/system.slice/docker-%s.scope\n",
			 container_id, container_id);
	return cgkill_find(text, mountinfo, self_cgroup, container_id, t, err);
}

/* ---- acting on the directories ------------------------------------------ */

static int write_value(const char *dir, const char *file, const char *value)
{
	char path[CGKILL_PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, value, strlen(value));
	int e = errno;
	close(fd);
	return w == (ssize_t)strlen(value) ? 0 : -(w < 0 ? e : EIO);
}

static char *read_text(const char *dir, const char *file)
{
	char path[CGKILL_PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	char *text = NULL;
	size_t len;
	struct terr e = {0};
	return util_read_file(path, &text, &len, &e) == 0 ? text : NULL;
}

/* The pids of cgroup.procs; *n of them. NULL (n 0) when it cannot be read. */
static int *read_pids(const char *dir, size_t *n)
{
	*n = 0;
	char *text = read_text(dir, "cgroup.procs");
	if (!text)
		return NULL;
	size_t cap = 16;
	int *pids = malloc(cap * sizeof(int));
	for (char *p = text; pids && *p;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		if (*n == cap) {
			int *more = realloc(pids, (cap *= 2) * sizeof(int));
			if (!more)
				break;
			pids = more;
		}
		pids[(*n)++] = (int)v;
		p = end;
		while (*p == '\n')
			p++;
	}
	free(text);
	return pids;
}

static int count_procs(const char *dir)
{
	size_t n;
	free(read_pids(dir, &n));
	return (int)n;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Freeze, SIGKILL each process, thaw. v1: freezer.state FROZEN/THAWED;
 * v2 (a kernel without cgroup.kill): cgroup.freeze 1/0. A process that is
 * not frozen yet (the freeze waits for each to leave the kernel) can
 * still fork: the passes go on while they find processes not signalled
 * yet. The thaw lets the frozen ones take their SIGKILL. */
static int freeze_kill_thaw(const char *dir, bool v1, struct cgkill_report *r, struct terr *err)
{
	const char *file = v1 ? "freezer.state" : "cgroup.freeze";
	int rc = write_value(dir, file, v1 ? "FROZEN" : "1");
	if (rc < 0)
		return terr_set(err, -rc, "cannot freeze %s: %s", dir, strerror(-rc));
	/* Up to a second for the freeze to take; past it the passes below
	 * still signal every process they find. */
	for (int i = 0; i < 100; i++) {
		char *st = read_text(dir, v1 ? "freezer.state" : "cgroup.events");
		bool frozen = st && (v1 ? !strncmp(st, "FROZEN", 6) : strstr(st, "frozen 1") != NULL);
		free(st);
		if (frozen)
			break;
		sleep_ms(10);
	}
	int *done = NULL;
	size_t n_done = 0, cap = 0;
	pid_t self = getpid();
	for (int pass = 0; pass < 32; pass++) {
		size_t n;
		int *pids = read_pids(dir, &n);
		size_t fresh = 0;
		for (size_t i = 0; i < n; i++) {
			int pid = pids[i];
			bool seen = pid <= 1 || pid == self;
			for (size_t k = 0; k < n_done && !seen; k++)
				seen = done[k] == pid;
			if (seen)
				continue;
			if (n_done == cap) {
				int *more = realloc(done, (cap = cap ? cap * 2 : 64) * sizeof(int));
				if (!more)
					break;
				done = more;
			}
			done[n_done++] = pid;
			fresh++;
			if (kill(pid, SIGKILL) == 0)
				r->signalled++;
		}
		free(pids);
		if (!fresh)
			break;
	}
	free(done);
	r->used_freezer = true;
	rc = write_value(dir, file, v1 ? "THAWED" : "0");
	if (rc < 0)
		return terr_set(err, -rc, "cannot thaw %s: %s", dir, strerror(-rc));
	return 0;
}

int cgkill_kill(const struct cgkill_target *t, struct cgkill_report *r, struct terr *err)
{
	memset(r, 0, sizeof(*r));
	int rc = 0;
	struct terr e2 = {0};
	r->found = count_procs(t->v2[0] ? t->v2 : t->freezer);
	if (t->v2[0]) {
		int w = write_value(t->v2, "cgroup.kill", "1");
		if (w == 0)
			r->used_kill = true;
		else if (w == -ENOENT && !t->freezer[0])
			rc = freeze_kill_thaw(t->v2, false, r, err);   /* before Linux 5.14 */
		else if (w != -ENOENT)
			rc = terr_set(err, -w, "cannot write %s/cgroup.kill: %s", t->v2, strerror(-w));
	}
	if (t->freezer[0]) {
		int f = freeze_kill_thaw(t->freezer, true, r, rc < 0 ? &e2 : err);
		if (rc == 0)
			rc = f;
	}
	return rc;
}

int cgkill_container(int pid, const char *container_id, struct cgkill_report *r, struct terr *err)
{
	char *mi = NULL, *self = NULL, *pcg = NULL;
	size_t len;
	memset(r, 0, sizeof(*r));
	int rc = util_read_file("/proc/self/mountinfo", &mi, &len, err);
	if (rc < 0)
		return rc;
	struct terr ignored = {0};
	if (util_read_file("/proc/self/cgroup", &self, &len, &ignored) < 0)
		self = NULL;
	struct cgkill_target t = {{0}, {0}};
	rc = -ENOENT;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/%d/cgroup", pid);
	bool by_pid = pid > 0 && util_read_file(proc, &pcg, &len, &ignored) == 0;
	if (by_pid)
		rc = cgkill_find(pcg, mi, self, container_id, &t, err);
	/* No pid, or it is gone or another's: where the drivers put it. */
	for (int driver = 0; rc < 0 && driver < 2; driver++) {
		struct cgkill_target c = {{0}, {0}};
		if (cgkill_layout(mi, self, container_id, driver, &c, &ignored) < 0)
			continue;
		if (c.v2[0] && access(c.v2, F_OK) != 0)
			c.v2[0] = '\0';
		if (c.freezer[0] && access(c.freezer, F_OK) != 0)
			c.freezer[0] = '\0';
		if (c.v2[0] || c.freezer[0]) {
			t = c;
			rc = 0;
		}
	}
	/* The pid's answer says more (e.g. that the cgroup holds the
	 * agent) than that the layout had nothing. */
	if (rc < 0 && !by_pid)
		rc = terr_set(err, ENOENT, "no cgroup of container %.12s is left on this host",
			      container_id ? container_id : "");
	if (rc == 0)
		rc = cgkill_kill(&t, r, err);
	free(mi);
	free(self);
	free(pcg);
	return rc;
}
