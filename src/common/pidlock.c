#include "common/pidlock.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* The pid in the file, 0 when it has none (a holder between its flock and
 * its write). */
static long read_holder(int fd)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	long pid = strtol(buf, NULL, 10);
	return pid > 0 ? pid : 0;
}

int pidlock_acquire(const char *path, long *holder, struct terr *err)
{
	if (holder)
		*holder = 0;
	/* O_CLOEXEC: a child (the GPU probe) must not keep the lock alive. */
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return terr_set(err, errno, "cannot open %s: %s", path, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		if (e == EWOULDBLOCK) {
			long pid = read_holder(fd);
			close(fd);
			if (holder)
				*holder = pid;
			if (pid)
				return terr_set(err, EBUSY, "%s is held by process %ld", path, pid);
			return terr_set(err, EBUSY, "%s is held by another process", path);
		}
		close(fd);
		return terr_set(err, e, "cannot lock %s: %s", path, strerror(e));
	}
	char buf[32];
	int len = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)len, 0) != len) {
		int e = errno;
		close(fd);
		return terr_set(err, e, "cannot write %s: %s", path, strerror(e));
	}
	return fd;
}

void pidlock_release(int fd)
{
	if (fd >= 0)
		close(fd);
}
