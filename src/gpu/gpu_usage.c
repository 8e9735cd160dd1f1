#include "gpu/gpu_usage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuabi/procinfo.h"

/* The innermost pid of pid (last field of NSpid); 0: unknown. */
static pid_t innermost_pid(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	pid_t inner = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6) != 0)
			continue;
		char *save = NULL;
		for (char *tok = strtok_r(line + 6, " \t\n", &save); tok;
		     tok = strtok_r(NULL, " \t\n", &save))
			inner = (pid_t)atoi(tok);
		break;
	}
	fclose(f);
	return inner;
}

bool gpu_usage_map_host_pid(int32_t driver_pid, void *ud, pid_t *ns_pid, uint64_t *start)
{
	pid_t init = *(const pid_t *)ud;
	uint64_t ns = fgpu_proc_pid_ns(init);
	if (driver_pid <= 0 || ns == 0 || fgpu_proc_pid_ns(driver_pid) != ns)
		return false;
	pid_t inner = innermost_pid(driver_pid);
	if (inner <= 0)
		return false;
	*ns_pid = inner;
	/* The same count of ticks since boot from any PID namespace. */
	*start = fgpu_proc_start_time(driver_pid);
	return true;
}

bool gpu_usage_map_same_pid(int32_t driver_pid, void *ud, pid_t *ns_pid, uint64_t *start)
{
	(void)ud;
	if (driver_pid <= 0)
		return false;
	*ns_pid = driver_pid;
	*start = 0;
	return true;
}

int gpu_usage_open_region(struct fgpu_region_handle *h, const char *path, struct terr *err)
{
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return terr_set(err, errno, "open %s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return terr_set(err, EINVAL, "%s is not a regular file", path);
	}
	return fgpu_region_observe_fd(h, fd, path, err);
}

static const struct fgpu_region_proc *find_proc(const struct fgpu_region_proc *p, int n, pid_t pid,
						uint64_t start)
{
	for (int i = 0; i < n; i++)
		if (p[i].pid == pid && (!start || !p[i].start || p[i].start == start))
			return &p[i];
	return NULL;
}

int gpu_usage_apply(struct fgpu_region_handle *h, const char uuids[][96], int ndev,
		    const struct fgpu_region_proc *before, int n_before,
		    const struct gpu_process_usage *drv, int n_drv, gpu_usage_pid_map map,
		    void *map_ud)
{
	/* The driver's figures per (session pid, device), mapped once. */
	struct mapped {
		pid_t pid;
		uint64_t start;
		int dev;
		int64_t bytes;
	};
	struct mapped *m = n_drv > 0 ? calloc((size_t)n_drv, sizeof(*m)) : NULL;
	int nm = 0;
	for (int i = 0; i < n_drv && m; i++) {
		int d = -1;
		for (int k = 0; k < ndev && d < 0; k++)
			if (!strcasecmp(uuids[k], drv[i].uuid))
				d = k;
		pid_t pid;
		uint64_t start;
		if (d < 0 || !map(drv[i].pid, map_ud, &pid, &start))
			continue;
		m[nm++] = (struct mapped){pid, start, d, drv[i].bytes};
	}
	static const int max_now = FGPU_REGION_SLOTS;
	struct fgpu_region_proc *now = calloc(max_now, sizeof(*now));
	int changed = 0;
	if (!now || (n_drv > 0 && !m)) {
		free(now);
		free(m);
		return 0;
	}
	int n_now = fgpu_region_processes(h, now, max_now);
	if (n_now > max_now)
		n_now = max_now;
	for (int i = 0; i < n_now; i++) {
		const struct fgpu_region_proc *p = &now[i], *was = find_proc(before, n_before, p->pid, p->start);
		for (int d = 0; d < ndev && d < FGPU_MAX_DEVICES; d++) {
			int64_t held = 0;
			for (int k = 0; k < nm; k++)
				if (m[k].dev == d && m[k].pid == p->pid &&
				    (!m[k].start || !p->start || m[k].start == p->start))
					held += m[k].bytes;
			int64_t accounted = p->used[d];
			if (was && was->used[d] > accounted)
				accounted = was->used[d];
			int64_t untracked = held > accounted ? held - accounted : 0;
			if (untracked != p->untracked[d] &&
			    fgpu_region_set_untracked(h, p->pid, p->start, d, untracked) == 0)
				changed++;
		}
	}
	free(now);
	free(m);
	return changed;
}
