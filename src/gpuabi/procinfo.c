#include "gpuabi/procinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint64_t fgpu_proc_start_time(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm (field 2) may contain spaces and parentheses: count fields
	 * after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	/* p now points before field 3; starttime is field 22. */
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return 0;
	}
	uint64_t v = 0;
	for (p++; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	return v;
}

bool fgpu_proc_alive(pid_t pid, uint64_t start)
{
	if (pid <= 0)
		return false;
	if (kill(pid, 0) != 0 && errno != EPERM)
		return false;
	if (start != 0) {
		uint64_t now = fgpu_proc_start_time(pid);
		if (now != 0 && now != start)
			return false;
	}
	/* A zombie still answers kill(); its GPU memory is already gone. */
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = '\0';
			char *p = strrchr(buf, ')');
			if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
				return false;
		}
	}
	return true;
}

uint64_t fgpu_proc_pid_ns(pid_t pid)
{
	char path[64], link[64];
	if (pid > 0)
		snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/ns/pid");
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return 0;
	link[n] = '\0';
	const char *br = strchr(link, '[');   /* "pid:[4026531836]" */
	return br ? strtoull(br + 1, NULL, 10) : 0;
}
