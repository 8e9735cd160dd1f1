/* agent/cgkill.c: which cgroups of a container the agent kills when Docker
 * does not stop it, on cgroup v1, v2 and hybrid hosts with Docker's
 * cgroupfs and systemd drivers (from the text of /proc/PID/cgroup and
 * /proc/self/mountinfo), the places it never touches (a hierarchy's
 * root, the agent's own cgroup and those above it, a cgroup not named
 * for the container); and the kill itself on directories made here,
 * with processes of this test listed in them: cgroup.kill written, the
 * freezer's freeze, SIGKILLs and thaw, pids 0, 1 and the agent's own
 * never signalled. */
#include "agent/cgkill.h"
#include "testlib.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ID2 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

/* Docker 20.10, cgroupfs driver, a hybrid host (this development
 * machine): v1 controllers and the unified hierarchy beside them, which
 * runc puts the container in too. */
static const char hybrid_cgroup[] =
	"9:name=systemd:/docker/" ID "\n"
	"8:pids:/docker/" ID "\n"
	"6:freezer:/docker/" ID "\n"
	"4:memory:/docker/" ID "\n"
	"1:cpu:/docker/" ID "\n"
	"0::/docker/" ID "\n";
static const char hybrid_mounts[] =
	"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
	"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
	"37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
	"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
/* The agent itself, at the root of each (a process on the host). */
static const char host_self[] = "6:freezer:/\n4:memory:/\n0::/\n";

/* v1 only: no unified mount, and the "0::" line at the root. */
static const char v1_cgroup[] = "6:freezer:/docker/" ID "\n4:memory:/docker/" ID "\n0::/\n";
static const char v1_mounts[] =
	"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
	"37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
	"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";

/* systemd's driver on cgroup v2 (Debian 12's default). */
static const char v2_cgroup[] = "0::/system.slice/docker-" ID ".scope\n";
static const char v2_mounts[] =
	"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
	"30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
	"rw,nsdelegate,memory_recursiveprot\n";

TEST(finds_the_container_cgroups)
{
	struct cgkill_target t;
	struct terr err = {0};
	CHECK_INT(cgkill_find(hybrid_cgroup, hybrid_mounts, host_self, ID, &t, &err), 0);
	CHECK_STR(t.v2, "/sys/fs/cgroup/unified/docker/" ID);
	CHECK_STR(t.freezer, "/sys/fs/cgroup/freezer/docker/" ID);

	CHECK_INT(cgkill_find(v1_cgroup, v1_mounts, host_self, ID, &t, &err), 0);
	CHECK_STR(t.v2, "");
	CHECK_STR(t.freezer, "/sys/fs/cgroup/freezer/docker/" ID);

	CHECK_INT(cgkill_find(v2_cgroup, v2_mounts, "0::/system.slice/tessera-agent.service\n", ID, &t, &err), 0);
	CHECK_STR(t.v2, "/sys/fs/cgroup/system.slice/docker-" ID ".scope");
	CHECK_STR(t.freezer, "");

	/* No self known: the same. */
	CHECK_INT(cgkill_find(v2_cgroup, v2_mounts, NULL, ID, &t, &err), 0);
	CHECK_STR(t.v2, "/sys/fs/cgroup/system.slice/docker-" ID ".scope");

	/* A freezer sharing its hierarchy with other controllers, and a
	 * mount of part of a hierarchy (an agent in a container). */
	CHECK_INT(cgkill_find("5:cpu,freezer:/outer/docker/" ID "\n0::/\n",
			      "37 31 0:34 /outer /sys/fs/cgroup/freezer rw - cgroup cgroup rw,cpu,freezer\n", NULL,
			      ID, &t, &err), 0);
	CHECK_STR(t.freezer, "/sys/fs/cgroup/freezer/docker/" ID);
	/* A cgroup-parent of the admin's: the leaf still carries the id. */
	CHECK_INT(cgkill_find("0::/sessions.slice/docker-" ID ".scope\n", v2_mounts, NULL, ID, &t, &err), 0);
	CHECK_STR(t.v2, "/sys/fs/cgroup/sessions.slice/docker-" ID ".scope");
}

TEST(never_a_root_the_agent_s_own_or_another_s)
{
	struct cgkill_target t;
	struct terr err = {0};
	/* A process at the roots (the pid is a host process now). */
	CHECK_INT(cgkill_find(host_self, hybrid_mounts, NULL, ID, &t, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "root cgroup");
	CHECK_STR(t.v2, "");
	CHECK_STR(t.freezer, "");

	/* The agent in the container's cgroup, or below it. */
	CHECK_INT(cgkill_find(v2_cgroup, v2_mounts, v2_cgroup, ID, &t, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "holds the agent itself");
	CHECK_INT(cgkill_find(v2_cgroup, v2_mounts, "0::/system.slice/docker-" ID ".scope/agent\n", ID, &t, &err),
		  -ENOENT);
	CHECK_CONTAINS(err.msg, "holds the agent itself");
	/* ... but a sibling whose name starts alike is not "below". */
	CHECK_INT(cgkill_find(v2_cgroup, v2_mounts, "0::/system.slice/docker-" ID ".scope2\n", ID, &t, &err), 0);
	/* Hybrid: the agent in the freezer cgroup only: v2 kept, freezer not. */
	CHECK_INT(cgkill_find(hybrid_cgroup, hybrid_mounts, "6:freezer:/docker/" ID "\n0::/\n", ID, &t, &err), 0);
	CHECK_STR(t.v2, "/sys/fs/cgroup/unified/docker/" ID);
	CHECK_STR(t.freezer, "");

	/* The pid was reused by a process of another container. */
	CHECK_INT(cgkill_find(hybrid_cgroup, hybrid_mounts, host_self, ID2, &t, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "not named for the container");
	CHECK_INT(cgkill_find(hybrid_cgroup, hybrid_mounts, host_self, "", &t, &err), -ENOENT);
	CHECK_INT(cgkill_find(hybrid_cgroup, hybrid_mounts, host_self, NULL, &t, &err), -ENOENT);
	/* The id in a parent only, not in the leaf. */
	CHECK_INT(cgkill_find("0::/docker-" ID ".scope/sub\n", v2_mounts, NULL, ID, &t, &err), -ENOENT);

	/* No mount of the hierarchy, or no cgroup at all. */
	CHECK_INT(cgkill_find(v1_cgroup, v2_mounts, NULL, ID, &t, &err), -ENOENT);
	CHECK_INT(cgkill_find(v2_cgroup, "", NULL, ID, &t, &err), -ENOENT);
	CHECK_INT(cgkill_find("", hybrid_mounts, NULL, ID, &t, &err), -ENOENT);
	/* A v2-only host's line is no freezer. */
	CHECK_INT(cgkill_find(v2_cgroup, v2_mounts, NULL, ID, &t, &err), 0);
	CHECK_STR(t.freezer, "");
}

TEST(the_drivers_layout)
{
	struct cgkill_target t;
	struct terr err = {0};
	CHECK_INT(cgkill_layout(hybrid_mounts, host_self, ID, 0, &t, &err), 0);
	CHECK_STR(t.v2, "/sys/fs/cgroup/unified/docker/" ID);
	CHECK_STR(t.freezer, "/sys/fs/cgroup/freezer/docker/" ID);
	CHECK_INT(cgkill_layout(hybrid_mounts, host_self, ID, 1, &t, &err), 0);
	CHECK_STR(t.v2, "/sys/fs/cgroup/unified/system.slice/docker-" ID ".scope");
	CHECK_STR(t.freezer, "/sys/fs/cgroup/freezer/system.slice/docker-" ID ".scope");
	CHECK_INT(cgkill_layout(v2_mounts, NULL, ID, 1, &t, &err), 0);
	CHECK_STR(t.v2, "/sys/fs/cgroup/system.slice/docker-" ID ".scope");
	CHECK_STR(t.freezer, "");
	CHECK_INT(cgkill_layout(v1_mounts, NULL, ID, 0, &t, &err), 0);
	CHECK_STR(t.v2, "");
	CHECK_STR(t.freezer, "/sys/fs/cgroup/freezer/docker/" ID);
	/* Only a full id, never a prefix or a path. */
	const char *bad[] = {"", "0123456789ab", "../../..", ID "0", "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
			     "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde/"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_INT(cgkill_layout(hybrid_mounts, NULL, bad[i], 0, &t, &err), -EINVAL);
	CHECK_INT(cgkill_layout(hybrid_mounts, NULL, NULL, 0, &t, &err), -EINVAL);
	CHECK_INT(cgkill_layout(hybrid_mounts, NULL, ID, 2, &t, &err), -EINVAL);
}

/* ---- the kill, on directories of the test's own ------------------------- */

static char base[64];

static void put(const char *dir, const char *file, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	FILE *f = fopen(path, "w");
	if (!f) {
		FAILF("cannot write %s", path);
		return;
	}
	fputs(text, f);
	fclose(f);
}

static char *get(const char *dir, const char *file)
{
	static char buf[256];
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	buf[0] = '\0';
	FILE *f = fopen(path, "r");
	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = '\0';
		fclose(f);
	}
	return buf;
}

/* A child that waits to be killed. */
static pid_t sleeper(void)
{
	pid_t p = fork();
	if (p == 0) {
		for (;;)
			pause();
	}
	return p;
}

/* Whether child p was ended by SIGKILL (it is reaped). */
static bool killed(pid_t p)
{
	int st = 0;
	if (waitpid(p, &st, 0) != p)
		return false;
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

TEST(v1_freezer_freezes_kills_and_thaws)
{
	char dir[128];
	snprintf(dir, sizeof(dir), "%s/freezer", base);
	mkdir(dir, 0700);
	pid_t a = sleeper(), b = sleeper();
	char procs[128];
	/* 0 (a process outside the agent's PID namespace), 1 and the test
	 * itself are listed too, and must be left alone. */
	snprintf(procs, sizeof(procs), "0\n1\n%d\n%d\n%d\n", (int)getpid(), (int)a, (int)b);
	put(dir, "cgroup.procs", procs);
	put(dir, "freezer.state", "");
	struct cgkill_target t = {"", ""};
	snprintf(t.freezer, sizeof(t.freezer), "%s", dir);
	struct cgkill_report r;
	struct terr err = {0};
	CHECK_INT(cgkill_kill(&t, &r, &err), 0);
	CHECK(r.used_freezer);
	CHECK(!r.used_kill);
	CHECK_INT(r.found, 5);
	CHECK_INT(r.signalled, 2);
	CHECK_STR(get(dir, "freezer.state"), "THAWED");
	CHECK(killed(a));
	CHECK(killed(b));
}

TEST(v2_writes_cgroup_kill)
{
	char dir[128];
	snprintf(dir, sizeof(dir), "%s/v2", base);
	mkdir(dir, 0700);
	put(dir, "cgroup.procs", "101\n102\n103\n");
	put(dir, "cgroup.kill", "");
	struct cgkill_target t = {"", ""};
	snprintf(t.v2, sizeof(t.v2), "%s", dir);
	struct cgkill_report r;
	struct terr err = {0};
	CHECK_INT(cgkill_kill(&t, &r, &err), 0);
	CHECK(r.used_kill);
	CHECK(!r.used_freezer);
	CHECK_INT(r.found, 3);
	CHECK_INT(r.signalled, 0);   /* the kernel does it */
	CHECK_STR(get(dir, "cgroup.kill"), "1");
}

/* Linux before 5.14: no cgroup.kill; cgroup.freeze, kill, thaw. */
TEST(v2_without_cgroup_kill_freezes)
{
	char dir[128];
	snprintf(dir, sizeof(dir), "%s/v2old", base);
	mkdir(dir, 0700);
	pid_t a = sleeper();
	char procs[64];
	snprintf(procs, sizeof(procs), "%d\n", (int)a);
	put(dir, "cgroup.procs", procs);
	put(dir, "cgroup.freeze", "");
	put(dir, "cgroup.events", "populated 1\nfrozen 1\n");
	struct cgkill_target t = {"", ""};
	snprintf(t.v2, sizeof(t.v2), "%s", dir);
	struct cgkill_report r;
	struct terr err = {0};
	CHECK_INT(cgkill_kill(&t, &r, &err), 0);
	CHECK(!r.used_kill);
	CHECK(r.used_freezer);
	CHECK_INT(r.signalled, 1);
	CHECK_STR(get(dir, "cgroup.freeze"), "0");
	CHECK(killed(a));
}

/* Hybrid: cgroup.kill, then the freezer's pass, which thaws. */
TEST(hybrid_does_both)
{
	char v2[128], fz[128];
	snprintf(v2, sizeof(v2), "%s/h2", base);
	snprintf(fz, sizeof(fz), "%s/h1", base);
	mkdir(v2, 0700);
	mkdir(fz, 0700);
	pid_t a = sleeper();
	char procs[64];
	snprintf(procs, sizeof(procs), "%d\n", (int)a);
	put(v2, "cgroup.procs", procs);
	put(v2, "cgroup.kill", "");
	put(fz, "cgroup.procs", procs);
	put(fz, "freezer.state", "");
	struct cgkill_target t;
	snprintf(t.v2, sizeof(t.v2), "%s", v2);
	snprintf(t.freezer, sizeof(t.freezer), "%s", fz);
	struct cgkill_report r;
	struct terr err = {0};
	CHECK_INT(cgkill_kill(&t, &r, &err), 0);
	CHECK(r.used_kill && r.used_freezer);
	CHECK_INT(r.found, 1);
	CHECK_STR(get(v2, "cgroup.kill"), "1");
	CHECK_STR(get(fz, "freezer.state"), "THAWED");
	CHECK(killed(a));
}

TEST(a_cgroup_that_cannot_be_written_is_an_error)
{
	struct cgkill_target t = {"", ""};
	snprintf(t.freezer, sizeof(t.freezer), "%s/absent", base);
	struct cgkill_report r;
	struct terr err = {0};
	CHECK_INT(cgkill_kill(&t, &r, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "cannot freeze");
}

/* Through this process's own /proc: its own cgroups are never the
 * container's (the roots on a host, the agent's own in a container), so
 * nothing is killed and this test lives on to say so. */
TEST(never_its_own_through_proc)
{
	struct cgkill_report r;
	struct terr err = {0};
	CHECK(cgkill_container(getpid(), ID, &r, &err) < 0);
	CHECK_INT(r.found, 0);
	CHECK(cgkill_container(0, ID, &r, &err) < 0);
	CHECK(cgkill_container(0, "not-an-id", &r, &err) < 0);
}

int main(void)
{
	snprintf(base, sizeof(base), "/tmp/tessera-cgkill-XXXXXX");
	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(finds_the_container_cgroups);
	RUN(never_a_root_the_agent_s_own_or_another_s);
	RUN(the_drivers_layout);
	RUN(v1_freezer_freezes_kills_and_thaws);
	RUN(v2_writes_cgroup_kill);
	RUN(v2_without_cgroup_kill_freezes);
	RUN(hybrid_does_both);
	RUN(a_cgroup_that_cannot_be_written_is_an_error);
	RUN(never_its_own_through_proc);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", base);
	return testlib_done();
}
