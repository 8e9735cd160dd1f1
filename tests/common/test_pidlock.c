/* common/pidlock.c: one holder at a time, the holder's pid in the file for
 * the one refused, the lock gone with its holder (a crash, not only a
 * release), and a program started by the holder not keeping it. */
#include "common/pidlock.h"
#include "testlib.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/tessera-test-pidlock.XXXXXX";
static char path[128];

TEST(one_holder)
{
	struct terr err = {0};
	long holder = -1;
	int fd = pidlock_acquire(path, &holder, &err);
	CHECK(fd >= 0);
	CHECK_INT(holder, 0);
	/* A second open file is a second holder, even in one process. */
	CHECK_INT(pidlock_acquire(path, &holder, &err), -EBUSY);
	CHECK_INT(holder, getpid());
	char want[160];
	snprintf(want, sizeof(want), "%s is held by process %ld", path, (long)getpid());
	CHECK_STR(err.msg, want);
	pidlock_release(fd);
	fd = pidlock_acquire(path, NULL, &err);
	CHECK(fd >= 0);
	pidlock_release(fd);
}

/* A child takes the lock, starts a program of its own (which outlives
 * it), and tells the parent through a pipe; the parent is refused with the
 * child's pid; the child is killed, and the lock is free again although
 * the program it started still runs. */
TEST(released_when_the_holder_dies)
{
	int pfd[2];
	if (pipe(pfd) < 0) {
		FAILF("pipe");
		return;
	}
	pid_t child = fork();
	if (child == 0) {
		struct terr e = {0};
		int ok = pidlock_acquire(path, NULL, &e) >= 0;
		/* The write end of this pipe closes when the program is
		 * exec'd: then it no longer has what the child had open. */
		int exec_pipe[2];
		if (pipe2(exec_pipe, O_CLOEXEC) < 0)
			_exit(1);
		pid_t prog = fork();
		if (prog == 0) {
			execlp("sleep", "sleep", "30", (char *)NULL);
			_exit(1);
		}
		close(exec_pipe[1]);
		char c;
		while (read(exec_pipe[0], &c, 1) > 0)
			;
		long msg[2] = {ok, (long)prog};
		if (write(pfd[1], msg, sizeof(msg)) != (ssize_t)sizeof(msg))
			_exit(1);
		pause();
		_exit(0);
	}
	long msg[2] = {0, 0};
	CHECK_INT(read(pfd[0], msg, sizeof(msg)), sizeof(msg));
	CHECK_INT(msg[0], 1);
	struct terr err = {0};
	long holder = 0;
	CHECK_INT(pidlock_acquire(path, &holder, &err), -EBUSY);
	CHECK_INT(holder, child);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	int fd = pidlock_acquire(path, &holder, &err);
	if (fd < 0)
		FAILF("lock still held after its holder died: %s", err.msg);
	pidlock_release(fd);
	if (msg[1] > 0)
		kill((pid_t)msg[1], SIGKILL);
	close(pfd[0]);
	close(pfd[1]);
}

TEST(bad_path)
{
	struct terr err = {0};
	CHECK(pidlock_acquire("/nonexistent-dir/x/lock", NULL, &err) < 0);
	CHECK_CONTAINS(err.msg, "/nonexistent-dir/x/lock");
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/tessera.lock", dir);
	RUN(one_holder);
	RUN(released_when_the_holder_dies);
	RUN(bad_path);
	unlink(path);
	rmdir(dir);
	return testlib_done();
}
