/* tessera-runner as a process: zombies reaped, signals forwarded, stays up
 * after its command, grace period. Usage: test_runner /path/to/tessera-runner
 *
 * Run outside a PID namespace, the runner makes itself a child subreaper,
 * so orphans come to it exactly as they would to PID 1. Waits here are
 * bounded polls for a state to be reached (never assertions on how fast). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

static const char *runner_path;
static char dir[64];

static void msleep(int ms)
{
	nanosleep(&(struct timespec){ .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L }, NULL);
}

static void path_in(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

/* Reads a whole small file; "" when missing. */
static void slurp(const char *name, char *buf, size_t n)
{
	char p[128];
	path_in(p, sizeof(p), name);
	buf[0] = '\0';
	FILE *f = fopen(p, "r");
	if (!f)
		return;
	size_t k = fread(buf, 1, n - 1, f);
	buf[k] = '\0';
	fclose(f);
}

static bool wait_contains(const char *name, const char *needle, int timeout_ms)
{
	char buf[4096];
	for (int t = 0; t < timeout_ms; t += 10) {
		slurp(name, buf, sizeof(buf));
		if (strstr(buf, needle))
			return true;
		msleep(10);
	}
	return false;
}

/* Has pid blocked SIGTERM yet (the runner's signal setup is done)? */
static bool wait_signals_ready(pid_t pid)
{
	char p[64], line[256];
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	for (int t = 0; t < 5000; t += 5) {
		FILE *f = fopen(p, "r");
		if (!f)
			return false;
		unsigned long long blk = 0;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "SigBlk: %llx", &blk) == 1)
				break;
		fclose(f);
		if (blk & (1ULL << (SIGTERM - 1)))
			return true;
		msleep(5);
	}
	return false;
}

/* Starts the runner with args, stderr to <dir>/<log>. grace may be NULL. */
static pid_t spawn(const char *grace, const char *log, const char *const *args)
{
	char lp[128];
	path_in(lp, sizeof(lp), log);
	pid_t pid = fork();
	if (pid == 0) {
		if (grace)
			setenv("TESSERA_RUNNER_GRACE_S", grace, 1);
		else
			unsetenv("TESSERA_RUNNER_GRACE_S");
		if (!freopen(lp, "w", stderr))
			_exit(120);
		const char *argv[16] = { runner_path };
		for (int i = 0; args && args[i] && i < 14; i++)
			argv[i + 1] = args[i];
		execv(runner_path, (char *const *)argv);
		_exit(121);
	}
	if (pid > 0 && !wait_signals_ready(pid))
		FAILF("runner %d never set up its signals", (int)pid);
	return pid;
}

/* Waits up to timeout_ms for pid to exit; true with *status when it did. */
static bool wait_exit(pid_t pid, int timeout_ms, int *status)
{
	for (int t = 0; t < timeout_ms; t += 10) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return true;
		if (r < 0)
			return false;
		msleep(10);
	}
	return false;
}

static bool alive(pid_t pid)
{
	int st;
	return waitpid(pid, &st, WNOHANG) == 0;
}

static void finish(pid_t pid)
{
	int st;
	kill(pid, SIGTERM);
	if (!wait_exit(pid, 15000, &st)) {
		FAILF("runner did not exit after SIGTERM");
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
}

/* State letter of a process from /proc/<pid>/stat, 0 when it is gone. */
static char proc_state(pid_t pid)
{
	char p[64], buf[512];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(p, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *c = strrchr(buf, ')');
	return c && c[1] == ' ' ? c[2] : '?';
}

static pid_t proc_ppid(pid_t pid)
{
	char p[64], line[256];
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	FILE *f = fopen(p, "r");
	int pp = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "PPid: %d", &pp) == 1)
			break;
	fclose(f);
	return pp;
}

TEST(reaps_orphaned_zombies)
{
	/* Five sleeps orphaned by the subshells that started them: they end
	 * up children of the runner, and must not stay zombies. */
	char script[512];
	snprintf(script, sizeof(script),
		 "for i in 1 2 3 4 5; do (sleep 0.3 & echo $! >> %s/orphans); done; "
		 "echo done > %s/spawned", dir, dir);
	const char *args[] = { "--", "sh", "-c", script, NULL };
	pid_t r = spawn(NULL, "reap.log", args);
	CHECK(wait_contains("spawned", "done", 5000));
	char buf[256];
	slurp("orphans", buf, sizeof(buf));
	int pids[5], n = 0;
	for (char *p = buf, *e; n < 5; p = e) {
		long v = strtol(p, &e, 10);
		if (e == p)
			break;
		pids[n++] = (int)v;
	}
	CHECK_INT(n, 5);
	int adopted = 0, gone = 0;
	for (int i = 0; i < n; i++) {
		pid_t pp = proc_ppid(pids[i]);
		adopted += pp == r || pp == -1;   /* -1: already reaped */
	}
	CHECK_INT(adopted, n);
	for (int t = 0; t < 5000 && gone < n; t += 20) {
		gone = 0;
		for (int i = 0; i < n; i++)
			gone += proc_state(pids[i]) == 0;
		msleep(20);
	}
	CHECK_INT(gone, n);   /* a zombie would stay in /proc as 'Z' */
	CHECK(alive(r));
	finish(r);
}

TEST(forwards_sigterm_and_exits)
{
	char script[512];
	snprintf(script, sizeof(script),
		 "trap 'echo term > %s/got; exit 0' TERM; echo ready > %s/ready; "
		 "while :; do sleep 0.05; done", dir, dir);
	const char *args[] = { "--", "sh", "-c", script, NULL };
	pid_t r = spawn(NULL, "term.log", args);
	CHECK(wait_contains("ready", "ready", 5000));
	kill(r, SIGTERM);
	int st = -1;
	CHECK(wait_exit(r, 10000, &st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	char buf[64];
	slurp("got", buf, sizeof(buf));
	CHECK_STR(buf, "term\n");
	CHECK(wait_contains("term.log", "startup command exited with status 0", 1000));
}

TEST(forwards_sigusr1_and_keeps_running)
{
	char script[512];
	snprintf(script, sizeof(script),
		 "trap 'echo usr1 >> %s/usr1' USR1; echo ready > %s/ready1; "
		 "while :; do sleep 0.05; done", dir, dir);
	const char *args[] = { "--", "sh", "-c", script, NULL };
	pid_t r = spawn(NULL, "usr1.log", args);
	CHECK(wait_contains("ready1", "ready", 5000));
	kill(r, SIGUSR1);
	CHECK(wait_contains("usr1", "usr1", 5000));
	CHECK(alive(r));
	finish(r);
}

TEST(keeps_running_after_command_exits)
{
	const char *args[] = { "--", "sh", "-c", "echo from-cmd >&2; exit 3", NULL };
	pid_t r = spawn(NULL, "exit.log", args);
	CHECK(wait_contains("exit.log", "tessera-runner: startup command exited with status 3", 5000));
	CHECK(wait_contains("exit.log", "from-cmd", 1000));
	msleep(200);
	CHECK(alive(r));
	int st = -1;
	kill(r, SIGTERM);
	CHECK(wait_exit(r, 10000, &st));   /* nothing left to wait for */
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	const char *args2[] = { "--", "sh", "-c", "kill -9 $$", NULL };
	r = spawn(NULL, "kill.log", args2);
	CHECK(wait_contains("kill.log", "tessera-runner: startup command killed by signal 9", 5000));
	CHECK(alive(r));
	finish(r);

	/* A command that cannot run is reported, and the session stays up. */
	const char *args3[] = { "--", "/nonexistent/cmd", NULL };
	r = spawn(NULL, "enoent.log", args3);
	CHECK(wait_contains("enoent.log", "startup command exited with status 127", 5000));
	CHECK(wait_contains("enoent.log", "cannot run /nonexistent/cmd", 1000));
	CHECK(alive(r));
	finish(r);
}

TEST(without_command_just_waits)
{
	pid_t r = spawn(NULL, "idle.log", NULL);
	msleep(200);
	CHECK(alive(r));
	int st = -1;
	kill(r, SIGINT);
	CHECK(wait_exit(r, 10000, &st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	const char *bad[] = { "-x", NULL };
	pid_t pid = fork();
	if (pid == 0) {
		if (!freopen("/dev/null", "w", stderr))
			_exit(120);
		execl(runner_path, runner_path, bad[0], (char *)NULL);
		_exit(121);
	}
	CHECK(wait_exit(pid, 5000, &st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
}

TEST(kills_after_grace_period)
{
	/* The command and its sleeps ignore SIGTERM (ignored dispositions are
	 * inherited across exec). */
	char script[512];
	/* Plus a grandchild in a session (and group) of its own, which only
	 * becomes the runner's child once its parent has been killed. */
	snprintf(script, sizeof(script),
		 "trap '' TERM; setsid sh -c 'echo $$ > %s/grandchild; "
		 "while :; do sleep 0.05; done' & "
		 "echo $$ > %s/stubborn; while :; do sleep 0.05; done", dir, dir);
	const char *args[] = { "--", "sh", "-c", script, NULL };
	pid_t r = spawn("1", "grace.log", args);
	CHECK(wait_contains("stubborn", "\n", 5000));
	CHECK(wait_contains("grandchild", "\n", 5000));
	char buf[64];
	slurp("grandchild", buf, sizeof(buf));
	pid_t grandchild = (pid_t)atoi(buf);
	slurp("stubborn", buf, sizeof(buf));
	pid_t child = (pid_t)atoi(buf);
	CHECK(child > 0);
	kill(r, SIGTERM);
	msleep(300);
	/* Within the grace period: still waiting for the child. */
	CHECK(alive(r));
	CHECK(child > 0 && kill(child, 0) == 0);
	int st = -1;
	bool exited = wait_exit(r, 15000, &st);
	CHECK(exited);
	if (!exited) {   /* leave nothing behind on failure */
		kill(r, SIGKILL);
		waitpid(r, &st, 0);
		if (grandchild > 0)
			kill(grandchild, SIGKILL);
		if (child > 0)
			kill(child, SIGKILL);
		return;
	}
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(wait_contains("grace.log", "grace period over", 1000));
	CHECK(wait_contains("grace.log", "killed by signal 9", 1000));
	/* The runner reaped it before leaving. */
	CHECK(child > 0 && kill(child, 0) == -1 && errno == ESRCH);
	CHECK(grandchild > 0 && kill(grandchild, 0) == -1 && errno == ESRCH);
}

/* `--timeout`: how the agent runs `session exec` commands. */
TEST(timeout_mode_passes_the_exit_status)
{
	const char *args[] = { "--timeout", "30", "--", "sh", "-c", "exit 3", NULL };
	pid_t r = spawn(NULL, "t1.log", args);
	int st = -1;
	CHECK(wait_exit(r, 15000, &st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3);
	/* a bad timeout is a usage error (it exits before any set-up) */
	r = fork();
	if (r == 0) {
		if (!freopen("/dev/null", "w", stderr))
			_exit(120);
		execl(runner_path, runner_path, "--timeout", "0", "--", "true", (char *)NULL);
		_exit(121);
	}
	CHECK(wait_exit(r, 15000, &st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
}

TEST(timeout_mode_stops_a_command_that_runs_too_long)
{
	/* It ignores SIGTERM, so only the SIGKILL after it ends it. */
	char script[256];
	snprintf(script, sizeof(script),
		 "trap '' TERM; echo $$ > %s/long; while :; do sleep 0.05; done", dir);
	const char *args[] = { "--timeout", "1", "--", "sh", "-c", script, NULL };
	pid_t r = spawn(NULL, "t3.log", args);
	CHECK(wait_contains("long", "\n", 5000));
	char buf[64];
	slurp("long", buf, sizeof(buf));
	pid_t child = (pid_t)atoi(buf);
	int st = -1;
	bool exited = wait_exit(r, 20000, &st);
	CHECK(exited);
	if (!exited) {
		kill(r, SIGKILL);
		waitpid(r, &st, 0);
		if (child > 0)
			kill(child, SIGKILL);
		return;
	}
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 124);
	CHECK(wait_contains("t3.log", "ran past its 1 s timeout", 1000));
	CHECK(child > 0 && kill(child, 0) == -1 && errno == ESRCH);
}

/* Writes text to <dir>/<name>, making its directories. */
static void put(const char *name, const char *text)
{
	char p[256], cmd[400];
	path_in(p, sizeof(p), name);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", p);
	if (system(cmd) != 0)
		FAILF("cannot make the directory of %s", p);
	FILE *f = fopen(p, "w");
	if (!f) {
		FAILF("cannot write %s", p);
		return;
	}
	fputs(text, f);
	fclose(f);
}

/* --user in an image without a work user: one is added (passwd, group,
 * home owned by it), and the command runs as it, in its home; an image
 * that has one is left as it is. Needs root, as the runner has in a
 * container. */
TEST(user_mode_makes_the_work_user_and_drops_to_it)
{
	if (getuid() != 0) {
		printf("# skipped: needs root\n");
		return;
	}
	chmod(dir, 0755);   /* the dropped command must reach its home */
	setenv("HOME", "/root", 1);   /* as Docker sets it for the root user */
	const char *cmd = "id -u > out; id -g >> out; pwd >> out; echo \"$HOME\" >> out; "
			  "cat /proc/self/status | grep -E '^(Uid|CapEff)' >> out";
	char root[128], home[160], want[512];
	path_in(root, sizeof(root), "img1");
	snprintf(home, sizeof(home), "%s/home/work", root);
	put("img1/etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false");
	put("img1/etc/group", "root:x:0:\n");
	const char *args[] = { "--fs-root", root, "--user", "1000:1000", "--", "sh", "-c", cmd, NULL };
	pid_t r = spawn(NULL, "user1.log", args);
	CHECK(wait_contains("img1/home/work/out", "CapEff", 5000));
	char buf[4096];
	slurp("img1/home/work/out", buf, sizeof(buf));
	snprintf(want, sizeof(want), "1000\n1000\n%s\n%s\nUid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n",
		 home, home);
	CHECK_STR(buf, want);
	slurp("img1/etc/passwd", buf, sizeof(buf));
	CHECK_STR(buf, "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n"
		       "work:x:1000:1000::/home/work:/bin/sh\n");
	slurp("img1/etc/group", buf, sizeof(buf));
	CHECK_STR(buf, "root:x:0:\nwork:x:1000:\n");
	struct stat st;
	CHECK(stat(home, &st) == 0 && st.st_uid == 1000 && st.st_gid == 1000);
	/* The runner itself is no longer root either. */
	char status[64], line[256];
	snprintf(status, sizeof(status), "/proc/%d/status", (int)r);
	FILE *f = fopen(status, "r");
	bool dropped = false;
	while (f && fgets(line, sizeof(line), f))
		dropped |= !strcmp(line, "Uid:\t1000\t1000\t1000\t1000\n");
	if (f)
		fclose(f);
	CHECK(dropped);
	finish(r);

	/* An image with its own work user (another name for 1000 too) and
	 * home: files untouched. */
	const char *passwd = "root:x:0:0:root:/root:/bin/sh\nwork:x:1000:1000:Work:/home/work:/bin/bash\n";
	put("img2/etc/passwd", passwd);
	put("img2/etc/group", "root:x:0:\nusers:x:1000:\n");
	put("img2/home/work/.profile", "");
	path_in(root, sizeof(root), "img2");
	snprintf(home, sizeof(home), "%s/home/work", root);
	if (chown(home, 1000, 1000) < 0)
		FAILF("chown %s", home);
	const char *args2[] = { "--fs-root", root, "--user", "1000:1000", "--", "sh", "-c", "id -u > out", NULL };
	r = spawn(NULL, "user2.log", args2);
	CHECK(wait_contains("img2/home/work/out", "1000", 5000));
	slurp("img2/etc/passwd", buf, sizeof(buf));
	CHECK_STR(buf, passwd);
	slurp("img2/etc/group", buf, sizeof(buf));
	CHECK_STR(buf, "root:x:0:\nusers:x:1000:\n");
	finish(r);

	/* An image without account files gets them; uid 0 stays root. */
	put("img3/tmp/.keep", "");
	path_in(root, sizeof(root), "img3");
	const char *args3[] = { "--fs-root", root, "--user", "0:0", "--", "sh", "-c", "id -u > /proc/self/fd/2", NULL };
	r = spawn(NULL, "user3.log", args3);
	CHECK(wait_contains("user3.log", "0\n", 5000));
	finish(r);
	const char *args4[] = { "--fs-root", root, "--user", "1000:1000", NULL };
	r = spawn(NULL, "user4.log", args4);
	CHECK(wait_contains("img3/etc/passwd", "work:x:1000:1000::/home/work:/bin/sh\n", 5000));
	slurp("img3/etc/passwd", buf, sizeof(buf));
	CHECK_STR(buf, "root:x:0:0:root:/root:/bin/sh\nwork:x:1000:1000::/home/work:/bin/sh\n");
	finish(r);

	/* A malformed id is refused before anything runs. */
	const char *args5[] = { "--user", "work", "--", "true", NULL };
	pid_t p = fork();
	if (p == 0) {
		const char *argv[8] = { runner_path };
		for (int i = 0; args5[i]; i++)
			argv[i + 1] = args5[i];
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 2);
		execv(runner_path, (char *const *)argv);
		_exit(121);
	}
	int status_code = 0;
	CHECK(wait_exit(p, 5000, &status_code) && WIFEXITED(status_code) && WEXITSTATUS(status_code) == 2);
}

/* `--batch`: a batch session's PID 1 ends with its command. */
TEST(batch_mode_exits_with_the_command)
{
	const char *args[] = { "--batch", "--", "sh", "-c", "echo from-batch >&2; exit 3", NULL };
	pid_t r = spawn(NULL, "b1.log", args);
	int st = -1;
	CHECK(wait_exit(r, 15000, &st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3);
	CHECK(wait_contains("b1.log", "from-batch", 1000));

	const char *args2[] = { "--batch", "--", "sh", "-c", "true", NULL };
	r = spawn(NULL, "b2.log", args2);
	CHECK(wait_exit(r, 15000, &st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	/* Killed by a signal: 128 + its number, as a shell reports it. */
	const char *args3[] = { "--batch", "--", "sh", "-c", "kill -9 $$", NULL };
	r = spawn(NULL, "b3.log", args3);
	CHECK(wait_exit(r, 15000, &st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 137);

	/* --batch without a command is a usage error. */
	r = fork();
	if (r == 0) {
		if (!freopen("/dev/null", "w", stderr))
			_exit(120);
		execl(runner_path, runner_path, "--batch", (char *)NULL);
		_exit(121);
	}
	CHECK(wait_exit(r, 15000, &st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
}

int main(int argc, char **argv)
{
	runner_path = argc > 1 ? argv[1] : getenv("TESSERA_RUNNER");
	if (!runner_path || access(runner_path, X_OK) != 0) {
		fprintf(stderr, "usage: %s /path/to/tessera-runner\n", argv[0]);
		return 1;
	}
	snprintf(dir, sizeof(dir), "/tmp/tessera-runner-test-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(reaps_orphaned_zombies);
	RUN(forwards_sigterm_and_exits);
	RUN(forwards_sigusr1_and_keeps_running);
	RUN(keeps_running_after_command_exits);
	RUN(without_command_just_waits);
	RUN(kills_after_grace_period);
	RUN(timeout_mode_passes_the_exit_status);
	RUN(timeout_mode_stops_a_command_that_runs_too_long);
	RUN(user_mode_makes_the_work_user_and_drops_to_it);
	RUN(batch_mode_exits_with_the_command);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return testlib_done();
}
