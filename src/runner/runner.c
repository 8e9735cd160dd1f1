/* tessera-runner: PID 1 of every session container.
 *
 *   tessera-runner [--user UID:GID] [--apps SPEC] [--app-port N] [--app-secret FILE]
 *                  [-- CMD ARGS...]
 *   tessera-runner [--user UID:GID] [--apps SPEC] --batch -- CMD ARGS...
 *   tessera-runner --timeout SECONDS -- CMD ARGS...
 *
 * (Options of the first two forms in any order.)
 *
 * With --user (UID not 0) it first gives the image a `work` user of that
 * UID and GID when it has none (a line in /etc/passwd and /etc/group, and
 * /home/work owned by it), then drops to it for good (setgroups, setgid,
 * setuid) before anything else runs: the session's processes are never
 * root, and neither is the runner from then on. It works in /home/work.
 *
 * --batch is a batch session's PID 1: as the first form, but once CMD
 * ends the runner exits with its status (128+N when signal N ended it), so
 * the container, and with it the session, ends with the command; what CMD
 * left running dies with the container's PID namespace.
 *
 * The third form is how the agent runs `session exec` commands: CMD runs
 * in its own process group and the runner exits with its status; past
 * SECONDS the group gets SIGTERM, then SIGKILL after 2 s, and the runner
 * exits with 124 (as coreutils' timeout does) after saying so on stderr.
 * SIGTERM/SIGINT/SIGHUP to the runner are passed on to the group.
 *
 * Bind-mounted read-only into the container and made its entrypoint, so any
 * image (busybox or a full distribution) stays up as a session until the
 * agent destroys it, whatever the image's own CMD does. It
 *   - starts CMD (if given) as a child in its own process group, logs how it
 *     ended, and keeps running either way;
 *   - reaps every zombie: orphans are re-parented to PID 1, and a PID 1 that
 *     does not wait() fills the process table (the session's PidsLimit);
 *   - forwards SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to the process
 *     groups of its children; after SIGTERM or SIGINT it exits once they
 *     have ended, SIGKILLing what remains after TESSERA_RUNNER_GRACE_S
 *     seconds (default 10).
 *
 * Built static against libc only (the image may have no dynamic loader or
 * a different libc), and makes no NSS calls (no user/host lookups), which a
 * static glibc could only do by loading shared objects at run time.
 * Written by hand rather than using tini/dumb-init: those are not in every
 * image, and this one also has to stay up after its command exits.
 *
 * Signals are taken synchronously through a signalfd; the loop blocks in
 * poll() (with a timeout only while a grace period runs, or a connection
 * or restart waits on a deadline) and reaps with waitpid(-1, WNOHANG), so
 * it never spins.
 *
 * It also serves the session's apps (docs/apps.md): on TCP 7611 when it
 * is PID 1 (--app-port N elsewhere, 0 for none), every connection starts
 * with `TESSERA-APP/1 SECRET TARGET`; the secret is read from
 * /run/tessera/app-secret BEFORE the drop to `work` (the file is root's,
 * and a process that changed its uid is not dumpable, so the session's
 * processes can read neither it nor this one's memory). The apps declared
 * by --apps (the image's ai.backend.service-ports) are started on first
 * use from /etc/backend.ai/service-defs/NAME.json or the built-in jupyter,
 * as the work user, and restarted when they die; connections to them are
 * relayed; `app:terminal` is a WebSocket to shells on PTYs served here.
 * All of it runs in this one loop (loop.h), non-blocking: server.c (the
 * port and the line), apps.c, relay.c, terminal.c; proto.c and appdef.c
 * hold the pure parsing, unit-tested in tests/runner/. Reaped children
 * that are apps or shells are handed to apps.c and terminal.c. SIGPIPE is
 * blocked: a peer gone mid-write is an error return, never our end. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "runner/appdef.h"
#include "runner/apps.h"
#include "runner/cluster.h"
#include "runner/log.h"
#include "runner/loop.h"
#include "runner/server.h"
#include "runner/terminal.h"

#define RUNNER_DEFAULT_GRACE_MS 10000
#define RUNNER_MAX_GROUPS 256

static const int runner_forwarded[] = {
	SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
};

struct runner {
	pid_t cmd_pid;           /* startup command, 0 when none or ended */
	bool batch;              /* exit with the command (--batch) */
	int cmd_status;          /* exit status for --batch, once it ended */
	pid_t cmd_pgid;          /* its process group, kept after it ends */
	bool stopping;           /* SIGTERM/SIGINT received */
	bool killed;             /* grace ran out, SIGKILL sent */
	int64_t deadline_ms;     /* end of the grace period */
	int64_t grace_ms;
	/* A SIGCHLD came since the last reap. Reaping only then, not at
	 * every turn of the loop: a relayed download turns it once per
	 * segment, and a waitpid each time was a quarter of its system
	 * calls (issue 30). */
	bool reap;
};

static int64_t runner_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* TESSERA_RUNNER_GRACE_S: seconds, fractions allowed ("0.5"). */
static int64_t runner_grace_ms(void)
{
	const char *s = getenv("TESSERA_RUNNER_GRACE_S");
	if (!s || !*s)
		return RUNNER_DEFAULT_GRACE_MS;
	char *end;
	double v = strtod(s, &end);
	if (*end || !(v >= 0) || v > 86400) {
		runner_log("tessera-runner: ignoring TESSERA_RUNNER_GRACE_S=\"%s\" "
			   "(want seconds, 0 to 86400); using %d", s,
			   RUNNER_DEFAULT_GRACE_MS / 1000);
		return RUNNER_DEFAULT_GRACE_MS;
	}
	return (int64_t)(v * 1000);
}

/* Reads pid's parent and process group from /proc/<pid>/stat:
 * "pid (comm) state ppid pgrp ...", comm may hold spaces and parentheses. */
static bool runner_stat(pid_t pid, pid_t *ppid, pid_t *pgrp)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	int pp, pg;
	if (!p || sscanf(p + 1, " %*c %d %d", &pp, &pg) != 2)
		return false;
	*ppid = pp;
	*pgrp = pg;
	return true;
}

/* Sends sig to the process group of every direct child (re-parented
 * orphans included), found by scanning /proc for our pid as parent: works
 * on any kernel config, and only runs when a signal arrives. A child still
 * in the runner's own group is signalled alone, never that group: it may
 * hold the runner's own parent when it is not PID 1 (tests, by hand). */
static void runner_forward(const struct runner *r, int sig)
{
	pid_t groups[RUNNER_MAX_GROUPS];
	size_t n = 0;
	pid_t self = getpid(), self_pgid = getpgrp();
	/* The startup command's group even if /proc is missing; only while it
	 * is unreaped, so its pid cannot have been reused. */
	if (r->cmd_pid > 0)
		groups[n++] = r->cmd_pgid;

	DIR *d = opendir("/proc");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0 || de->d_name[0] == '0')
			continue;
		pid_t ppid, pg;
		if (!runner_stat((pid_t)pid, &ppid, &pg) || ppid != self)
			continue;
		if (pg == self_pgid) {
			kill((pid_t)pid, sig);
			continue;
		}
		bool seen = false;
		for (size_t i = 0; i < n; i++)
			seen |= groups[i] == pg;
		if (!seen && n < RUNNER_MAX_GROUPS)
			groups[n++] = pg;
		else if (!seen)
			kill(-pg, sig);
	}
	if (d)
		closedir(d);
	for (size_t i = 0; i < n; i++)
		if (kill(-groups[i], sig) < 0 && errno != ESRCH)
			runner_log("tessera-runner: cannot signal process group %d: %s",
				   (int)groups[i], strerror(errno));
	/* As PID 1 of the container's namespace, SIGKILL on the way out goes
	 * to everything left (docker exec'd shells too): kill(-1) from PID 1
	 * of a namespace reaches exactly that namespace. */
	if (sig == SIGKILL && self == 1)
		kill(-1, SIGKILL);
}

/* Reaps everything that has ended. Returns true when no child is left. */
static bool runner_reap(struct runner *r)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid == 0)
			return false;
		if (pid < 0)
			return errno == ECHILD;
		if (pid != r->cmd_pid) {
			/* An app or a shell: theirs to handle; else an orphan. */
			if (!apps_child_exited(pid, status))
				term_child_exited(pid, status);
			continue;
		}
		r->cmd_pid = 0;
		if (WIFEXITED(status)) {
			r->cmd_status = WEXITSTATUS(status);
			runner_log("tessera-runner: startup command exited with status %d",
				   WEXITSTATUS(status));
		} else if (WIFSIGNALED(status)) {
			r->cmd_status = 128 + WTERMSIG(status);
			runner_log("tessera-runner: startup command killed by signal %d",
				   WTERMSIG(status));
		}
	}
}

static pid_t runner_spawn(char **argv, const sigset_t *orig_mask)
{
	pid_t pid = fork();
	if (pid < 0) {
		runner_log("tessera-runner: cannot start %s: %s", argv[0], strerror(errno));
		return -1;
	}
	if (pid == 0) {
		/* Own group, so a signal to it reaches the command's whole
		 * pipeline and never the runner. */
		setpgid(0, 0);
		sigprocmask(SIG_SETMASK, orig_mask, NULL);
		execvp(argv[0], argv);
		runner_log("tessera-runner: cannot run %s: %s", argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	/* Also from the parent: a signal forwarded before the child ran
	 * setpgid must still find the group. */
	setpgid(pid, pid);
	return pid;
}

/* ---- the session's user --------------------------------------------------- */

#define RUNNER_WORK_NAME "work"
#define RUNNER_WORK_HOME "/home/work"
#define RUNNER_ACCOUNTS_MAX (4 << 20)

/* Whether the account file (passwd or group: "name:x:id:...") has a line
 * whose name is `name` (*has_name) or whose id is `id` (*has_id), and
 * whether it ends in a newline. false when it cannot be read (absent:
 * *absent). */
static bool runner_accounts_scan(const char *path, const char *name, unsigned id, bool *has_name,
				 bool *has_id, bool *ends_nl, bool *absent)
{
	*has_name = *has_id = *absent = false;
	*ends_nl = true;
	FILE *f = fopen(path, "re");
	if (!f) {
		*absent = errno == ENOENT;
		return false;
	}
	char line[4096];
	size_t total = 0;
	while (fgets(line, sizeof(line), f) && total < RUNNER_ACCOUNTS_MAX) {
		size_t n = strlen(line);
		total += n;
		*ends_nl = n > 0 && line[n - 1] == '\n';
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c1)
			continue;
		if ((size_t)(c1 - line) == strlen(name) && !strncmp(line, name, strlen(name)))
			*has_name = true;
		char *end;
		if (c2 && c2[1] >= '0' && c2[1] <= '9' && strtoul(c2 + 1, &end, 10) == id && *end == ':')
			*has_id = true;
	}
	fclose(f);
	return true;
}

/* Appends `entry` (one line) to the account file unless it names the id
 * or the name already; creates the file, after `first` (a root line),
 * when the image has none. Failures are said and survived: the session
 * still runs as the id, only without a name. */
static void runner_accounts_add(const char *path, const char *what, unsigned id, const char *first,
				const char *entry)
{
	bool has_name, has_id, ends_nl, absent;
	if (!runner_accounts_scan(path, RUNNER_WORK_NAME, id, &has_name, &has_id, &ends_nl, &absent) &&
	    !absent) {
		runner_log("tessera-runner: cannot read %s: %s", path, strerror(errno));
		return;
	}
	if (has_id)
		return;
	if (has_name) {
		runner_log("tessera-runner: %s has a %s \"" RUNNER_WORK_NAME "\" with another id; "
			   "running as %u without a name", path, what, id);
		return;
	}
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "%s%s%s", absent ? first : "", ends_nl ? "" : "\n", entry);
	if (fd < 0 || write(fd, buf, (size_t)n) != n)
		runner_log("tessera-runner: cannot add the %s " RUNNER_WORK_NAME " to %s: %s", what, path,
			   strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* Whether path is a mount point now, from /proc/self/mountinfo (its
 * fifth field, with the kernel's octal escapes undone). */
static bool runner_is_mount_point(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char line[8192];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *field = line;
		for (int i = 0; i < 4 && field; i++) {
			field = strchr(field, ' ');
			if (field)
				field++;
		}
		if (!field)
			continue;
		char mp[4096];
		size_t n = 0;
		for (const char *c = field; *c && *c != ' ' && n + 1 < sizeof(mp); c++) {
			if (c[0] == '\\' && c[1] >= '0' && c[1] <= '3' && c[2] >= '0' && c[2] <= '7' &&
			    c[3] >= '0' && c[3] <= '7') {
				mp[n++] = (char)((c[1] - '0') * 64 + (c[2] - '0') * 8 + (c[3] - '0'));
				c += 3;
			} else {
				mp[n++] = *c;
			}
		}
		mp[n] = '\0';
		found = !strcmp(mp, path);
	}
	fclose(f);
	return found;
}

/* A session converted into an image (docker commit) leaves in it the
 * empty, root-owned directories Docker made in /home/work for the folders
 * mounted there (/home/work/.local, /home/work/data): in a session of that
 * image without those folders the work user could not use them (pip
 * install --user into a root-owned ~/.local fails). Such a directory,
 * empty and not a mount point now, is given to the user, as the home
 * itself is. */
static void runner_give_mount_leftovers(const char *home, unsigned uid, unsigned gid)
{
	DIR *d = opendir(home);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char path[4096];
		struct stat st;
		if (snprintf(path, sizeof(path), "%s/%s", home, e->d_name) >= (int)sizeof(path) ||
		    lstat(path, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 || st.st_nlink > 2)
			continue;
		DIR *sub = opendir(path);
		if (!sub)
			continue;
		bool empty = true;
		struct dirent *se;
		while (empty && (se = readdir(sub)))
			empty = !strcmp(se->d_name, ".") || !strcmp(se->d_name, "..");
		closedir(sub);
		if (empty && !runner_is_mount_point(path) && chown(path, uid, gid) < 0)
			runner_log("tessera-runner: cannot give %s to %u:%u: %s", path, uid, gid, strerror(errno));
	}
	closedir(d);
}

/* Gives the image a work user of uid:gid unless it has one, and its home;
 * then drops to it for good. `root` is "" in a container (the image's
 * root), a directory in tests. Returns false when the drop fails: then
 * nothing of the session may run. */
static bool runner_become_user(const char *root, unsigned uid, unsigned gid)
{
	if (getuid() != 0) {
		if (getuid() == uid && getgid() == gid)
			return true;
		runner_log("tessera-runner: asked to run as %u:%u but started as %u, not root", uid, gid,
			   (unsigned)getuid());
		return false;
	}
	char path[4096], entry[256];
	snprintf(path, sizeof(path), "%s/etc", root);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		runner_log("tessera-runner: cannot make %s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/etc/passwd", root);
	snprintf(entry, sizeof(entry), RUNNER_WORK_NAME ":x:%u:%u::" RUNNER_WORK_HOME ":/bin/sh\n", uid, gid);
	runner_accounts_add(path, "user", uid, "root:x:0:0:root:/root:/bin/sh\n", entry);
	snprintf(path, sizeof(path), "%s/etc/group", root);
	snprintf(entry, sizeof(entry), RUNNER_WORK_NAME ":x:%u:\n", gid);
	runner_accounts_add(path, "group", gid, "root:x:0:\n", entry);

	/* The home: made and given to the user when the image has none; an
	 * image's own (the images' recipes make it) is left as it is. */
	char home[4096];
	snprintf(path, sizeof(path), "%s/home", root);
	snprintf(home, sizeof(home), "%s" RUNNER_WORK_HOME, root);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		runner_log("tessera-runner: cannot make %s: %s", path, strerror(errno));
	struct stat hst;
	if (mkdir(home, 0755) == 0) {
		if (chown(home, uid, gid) < 0)
			runner_log("tessera-runner: cannot give %s to %u:%u: %s", home, uid, gid, strerror(errno));
	} else if (errno != EEXIST) {
		runner_log("tessera-runner: cannot make %s: %s", home, strerror(errno));
	} else if (uid != 0 && lstat(home, &hst) == 0 && S_ISDIR(hst.st_mode) && hst.st_uid == 0) {
		/* A root-owned home is the one Docker made for a folder mounted
		 * below it (/home/work/.local): the work user's home must stay
		 * its own. Only the directory itself: what is under it is the
		 * mounted folders'. */
		if (chown(home, uid, gid) < 0)
			runner_log("tessera-runner: cannot give %s to %u:%u: %s", home, uid, gid, strerror(errno));
	}
	if (uid != 0)
		runner_give_mount_leftovers(home, uid, gid);

	gid_t g = gid;
	if (setgroups(1, &g) < 0 || setgid(gid) < 0 || setuid(uid) < 0) {
		runner_log("tessera-runner: cannot become %u:%u: %s", uid, gid, strerror(errno));
		return false;
	}
	/* For good: no way back to root (setuid from root drops every id). */
	if (getuid() != uid || geteuid() != uid || getgid() != gid || getegid() != gid || setuid(0) == 0) {
		runner_log("tessera-runner: still privileged after dropping to %u:%u", uid, gid);
		return false;
	}
	if (chdir(home) < 0) {
		runner_log("tessera-runner: cannot work in %s: %s", home, strerror(errno));
		if (chdir("/") < 0)
			return false;
	}
	/* HOME=/root is what Docker gives the root user it started us as;
	 * one the session set itself is kept. */
	const char *h = getenv("HOME");
	if (!h || !*h || !strcmp(h, "/root"))
		setenv("HOME", home, 1);
	return true;
}

/* "UID:GID" as two numbers below 2^31. */
static bool runner_parse_ids(const char *s, unsigned *uid, unsigned *gid)
{
	char *end;
	if (!s || *s < '0' || *s > '9')
		return false;
	unsigned long u = strtoul(s, &end, 10);
	if (*end != ':' || end[1] < '0' || end[1] > '9')
		return false;
	unsigned long g = strtoul(end + 1, &end, 10);
	if (*end || u > 0x7fffffffUL || g > 0x7fffffffUL)
		return false;
	*uid = (unsigned)u;
	*gid = (unsigned)g;
	return true;
}

static void runner_usage(void)
{
	runner_log("usage: tessera-runner [--user UID:GID] [--apps SPEC] [--app-port N] [-- CMD ARGS...]\n"
		   "       tessera-runner [--user UID:GID] [--apps SPEC] --batch -- CMD ARGS...\n"
		   "       tessera-runner --timeout SECONDS -- CMD ARGS...\n"
		   "       tessera-runner --hold\n"
		   "PID 1 of a Tessera session: runs CMD, reaps zombies, forwards signals,\n"
		   "and stays up until SIGTERM (grace TESSERA_RUNNER_GRACE_S, default 10 s).\n"
		   "With --user: gives the image a work user of UID:GID if it has none and\n"
		   "drops to it before anything runs (UID 0: stays root).\n"
		   "With --batch: exits with CMD's status once it ends.\n"
		   "With --apps: the session's apps, name:proto:port,... (docs/apps.md), served\n"
		   "on the app port (7611 as PID 1; --app-port N elsewhere, 0 for none),\n"
		   "the secret read from --app-secret FILE (default " SERVER_SECRET_FILE ").\n"
		   "With --hostname NAME: waits (at most 5 s) until the host name is NAME,\n"
		   "which the agent sets from outside, before anything else.\n"
		   "With --timeout: runs CMD, exits with its status, stops it past SECONDS (124).\n"
		   "With --hold: only holds its namespaces (a sandbox), until SIGTERM or SIGKILL.");
}

#define RUNNER_TIMEOUT_KILL_MS 2000
#define RUNNER_TIMED_OUT 124

/* `--timeout`: CMD in its own group, its exit status as ours. */
static int runner_run_with_timeout(char **cmd, int64_t timeout_ms)
{
	sigset_t mask, orig;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, &orig) < 0)
		return 125;
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		return 125;
	pid_t pid = runner_spawn(cmd, &orig);
	if (pid < 0)
		return 126;
	int64_t deadline = runner_now_ms() + timeout_ms;
	bool timed_out = false, killed = false;
	for (;;) {
		int status;
		pid_t got = waitpid(pid, &status, WNOHANG);
		if (got == pid) {
			if (timed_out) {
				runner_log("tessera: the command ran past its %lld s timeout and was stopped",
					   (long long)(timeout_ms / 1000));
				return RUNNER_TIMED_OUT;
			}
			if (WIFEXITED(status))
				return WEXITSTATUS(status);
			return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		}
		int64_t left = deadline - runner_now_ms();
		if (left <= 0) {
			if (!timed_out) {
				timed_out = true;
				kill(-pid, SIGTERM);
				deadline = runner_now_ms() + RUNNER_TIMEOUT_KILL_MS;
			} else if (!killed) {
				killed = true;
				kill(-pid, SIGKILL);
				deadline = runner_now_ms() + 60000;
			}
			continue;
		}
		struct pollfd pfd = { sfd, POLLIN, 0 };
		if (poll(&pfd, 1, left > 1000 ? 1000 : (int)left) > 0) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				if (si.ssi_signo != SIGCHLD)
					kill(-pid, (int)si.ssi_signo);
		}
	}
}

struct runner_opts {
	const char *fs_root;     /* --fs-root DIR: tests make the work user there */
	const char *user;        /* --user UID:GID */
	bool batch;
	const char *apps;        /* --apps SPEC */
	int app_port;            /* --app-port N; -1: 7611 when PID 1, else none */
	const char *app_secret;  /* --app-secret FILE (tests); else SERVER_SECRET_FILE */
	const char *hostname;    /* --hostname NAME: wait for it */
	char **cmd;
};

/* Options in any order, then `-- CMD ARGS...` or CMD ARGS... Returns -1
 * for usage errors, 1 for --help, 0 otherwise. */
static int runner_parse_opts(int argc, char **argv, struct runner_opts *o)
{
	*o = (struct runner_opts){ .fs_root = "", .app_port = -1 };
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		bool has_val = i + 1 < argc;
		if (!strcmp(a, "--")) {
			if (i + 1 < argc)
				o->cmd = argv + i + 1;
			break;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			return 1;
		} else if (!strcmp(a, "--batch")) {
			o->batch = true;
		} else if (!strcmp(a, "--fs-root") && has_val) {
			o->fs_root = argv[++i];
		} else if (!strcmp(a, "--user") && has_val) {
			o->user = argv[++i];
		} else if (!strcmp(a, "--apps") && has_val) {
			o->apps = argv[++i];
		} else if (!strcmp(a, "--app-secret") && has_val) {
			o->app_secret = argv[++i];
		} else if (!strcmp(a, "--hostname") && has_val) {
			o->hostname = argv[++i];
		} else if (!strcmp(a, "--app-port") && has_val) {
			char *end;
			long p = strtol(argv[++i], &end, 10);
			if (*end || !*argv[i] || p < 0 || p > 65535)
				return -1;
			o->app_port = (int)p;
		} else if (a[0] == '-') {
			return -1;
		} else {
			o->cmd = argv + i;
			break;
		}
	}
	/* --batch runs a command: `--batch -- CMD`. */
	if (o->batch && (i >= argc || strcmp(argv[i], "--") != 0 || !o->cmd))
		return -1;
	return 0;
}

static struct runner *runner_self;
static sigset_t runner_orig_mask;

static void runner_signal_cb(struct rl_watch *w, short revents)
{
	(void)revents;
	struct runner *r = runner_self;
	struct signalfd_siginfo si;
	while (read(w->fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		int sig = (int)si.ssi_signo;
		if (sig == SIGCHLD) {
			r->reap = true;   /* reaped at the top of the loop */
			continue;
		}
		runner_forward(r, sig);
		if ((sig == SIGTERM || sig == SIGINT) && !r->stopping) {
			r->stopping = true;
			r->deadline_ms = runner_now_ms() + r->grace_ms;
			/* No new apps or connections; shells (which an
			 * interactive shell's SIGTERM does not end) hung up. */
			server_stop();
			apps_stop();
			term_stop();
		}
	}
}

/* A sandbox's PID 1 (docs/architecture.md, "Sandboxes"): a process that
 * only holds the container's network namespace for a session's container
 * to join. It reaps what may be re-parented to it and ends on SIGTERM,
 * SIGINT or SIGHUP (PID 1 of a namespace gets no default action). */
static int runner_hold(void)
{
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return 1;
	for (;;) {
		int sig = 0;
		if (sigwait(&mask, &sig) != 0)
			continue;
		if (sig != SIGCHLD)
			return 0;
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
}

/* In a container that joined a sandbox's network namespace, Docker gave
 * it the sandbox's host name; the agent sets the session's from outside
 * right after the start. Waiting for it here keeps the session's own
 * commands from seeing the sandbox's. Gives up after 5 s (an agent that
 * cannot set it logged why): the session still runs. */
static void runner_wait_hostname(const char *name)
{
	for (int i = 0; i < 2500; i++) {
		struct utsname u;
		if (uname(&u) == 0 && !strcmp(u.nodename, name))
			return;
		nanosleep(&(struct timespec){ .tv_nsec = 2 * 1000 * 1000 }, NULL);
	}
	runner_log("tessera-runner: the host name is not %s after 5 s; going on", name);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--hold") == 0)
		return runner_hold();
	if (argc > 1 && strcmp(argv[1], "--timeout") == 0) {
		char *end = NULL;
		double secs = argc > 2 ? strtod(argv[2], &end) : 0;
		if (argc < 5 || *end || !(secs > 0) || secs > 86400 || strcmp(argv[3], "--") != 0) {
			runner_usage();
			return 2;
		}
		return runner_run_with_timeout(argv + 4, (int64_t)(secs * 1000));
	}
	struct runner_opts o;
	int prc = runner_parse_opts(argc, argv, &o);
	if (prc != 0) {
		runner_usage();
		return prc > 0 ? 0 : 2;
	}
	unsigned uid = 0, gid = 0;
	if (o.user && !runner_parse_ids(o.user, &uid, &gid)) {
		runner_usage();
		return 2;
	}
	if (o.hostname)
		runner_wait_hostname(o.hostname);
	struct app_decl decls[APP_MAX];
	size_t ndecls = 0;
	struct terr err = {0};
	if (o.apps && appdef_parse_spec(o.apps, decls, APP_MAX, &ndecls, &err) < 0) {
		runner_log("tessera-runner: ignoring the apps \"%s\": %s", o.apps, err.msg);
		ndecls = 0;
	}
	/* The secret is root's: read before the drop, and never again. */
	char secret[PROTO_SECRET_LEN + 1];
	bool have_secret = false;
	if (server_read_secret(o.app_secret ? o.app_secret : SERVER_SECRET_FILE, secret, &have_secret, &err) < 0)
		runner_log("tessera-runner: apps are not enabled: %s", err.msg);
	/* The session's SSH files (cluster.h). Only as PID 1: run by hand,
	 * the runner is no session's. */
	static struct cluster_ssh ssh;
	if (getpid() == 1)
		cluster_ssh_read(CLUSTER_SSH_DIR, &ssh);
	if (o.user && uid != 0 && !runner_become_user(o.fs_root, uid, gid))
		return 1;
	char **cmd = o.cmd;

	struct runner r = { .grace_ms = runner_grace_ms(), .batch = o.batch };
	runner_self = &r;

	sigset_t mask, orig;
	sigemptyset(&mask);
	for (size_t i = 0; i < sizeof(runner_forwarded) / sizeof(runner_forwarded[0]); i++)
		sigaddset(&mask, runner_forwarded[i]);
	sigaddset(&mask, SIGCHLD);
	/* A peer gone mid-write is an error return, never the runner's end. */
	sigaddset(&mask, SIGPIPE);
	if (sigprocmask(SIG_BLOCK, &mask, &orig) < 0) {
		runner_log("tessera-runner: sigprocmask: %s", strerror(errno));
		return 1;
	}
	runner_orig_mask = orig;
	sigdelset(&mask, SIGPIPE);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		runner_log("tessera-runner: signalfd: %s", strerror(errno));
		return 1;
	}
	/* Outside a PID namespace (tests, or someone running it by hand),
	 * become the reaper of our descendants so orphans still come to us. */
	if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		runner_log("tessera-runner: PR_SET_CHILD_SUBREAPER: %s", strerror(errno));

	static struct rl_loop loop;
	struct rl_watch sw;
	rl_init(&sw, sfd, runner_signal_cb, NULL);
	sw.events = POLLIN;
	rl_add(&loop, &sw);
	apps_init(&loop, decls, ndecls, &orig);
	term_init(&loop);
	/* The app port: in a container the runner is PID 1; run by hand or
	 * in tests it listens only when told a port. */
	int port = o.app_port >= 0 ? o.app_port : getpid() == 1 ? APP_RUNNER_PORT : 0;
	if (port && server_start(&loop, port, have_secret ? secret : NULL, &err) < 0)
		runner_log("tessera-runner: no apps: %s", err.msg);
	explicit_bzero(secret, sizeof(secret));
	/* sshd before the command: an MPI launcher in the startup command
	 * finds the other containers' up as soon as they are. */
	if (ssh.have) {
		const char *home = getenv("HOME"), *hosts = getenv("TESSERA_CLUSTER_HOSTS");
		cluster_ssh_start(&ssh, home && *home ? home : "/", hosts ? hosts : "", uid == 0, &orig);
	}

	if (cmd) {
		pid_t pid = runner_spawn(cmd, &orig);
		if (pid > 0)
			r.cmd_pid = r.cmd_pgid = pid;
		else if (r.batch)
			return 127;
	}

	r.reap = true;
	for (;;) {
		/* While stopping, every turn: children re-parented to us
		 * after a kill count too. */
		bool none_left = false;
		if (r.reap || r.stopping) {
			r.reap = false;
			none_left = runner_reap(&r);
		}
		if (r.batch && r.cmd_pid == 0)
			return r.cmd_status;
		if (r.stopping && none_left)
			return 0;

		int timeout = -1;
		if (r.stopping) {
			int64_t left = r.deadline_ms - runner_now_ms();
			if (left <= 0) {
				if (!r.killed)
					runner_log("tessera-runner: grace period over, killing what is left");
				runner_forward(&r, SIGKILL);
				r.killed = true;
				/* Again each second: a killed parent's children
				 * (in groups of their own) are re-parented to us
				 * only now, and must not outlive the session. */
				r.deadline_ms = runner_now_ms() + 1000;
				timeout = 1000;
			} else {
				timeout = left > 60000 ? 60000 : (int)left;
			}
		}
		int rc = rl_run_once(&loop, timeout);
		if (rc < 0) {
			runner_log("tessera-runner: poll: %s", strerror(-rc));
			return 1;
		}
	}
}
