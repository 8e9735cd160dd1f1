/* agent/oomwatch.c: where a process's memory cgroup counts OOM kills, on
 * cgroup v1, v2 and hybrid hosts (from the text of /proc/PID/cgroup and
 * /proc/self/mountinfo), the count in memory.events and
 * memory.oom_control, and a read through this process's own /proc. */
#include "agent/oomwatch.h"
#include "testlib.h"

#include <stdlib.h>
#include <unistd.h>

/* Docker 20.10 with cgroupfs on cgroup v1 (this development machine). */
static const char v1_cgroup[] =
	"12:pids:/docker/abc\n"
	"4:memory:/docker/abc\n"
	"1:cpu,cpuacct:/docker/abc\n"
	"0::/docker/abc\n";
static const char v1_mounts[] =
	"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
	"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
	"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
	"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

/* systemd's driver on cgroup v2 (Debian 12's default). */
static const char v2_cgroup[] = "0::/system.slice/docker-abc.scope\n";
static const char v2_mounts[] =
	"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
	"30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
	"rw,nsdelegate,memory_recursiveprot\n";

TEST(count_files)
{
	char out[512];
	struct terr err = {0};
	CHECK_INT(oomwatch_count_file(v1_cgroup, v1_mounts, out, sizeof(out), &err), 0);
	CHECK_STR(out, "/sys/fs/cgroup/memory/docker/abc/memory.oom_control");
	CHECK_INT(oomwatch_count_file(v2_cgroup, v2_mounts, out, sizeof(out), &err), 0);
	CHECK_STR(out, "/sys/fs/cgroup/system.slice/docker-abc.scope/memory.events");
	/* The memory controller shares a hierarchy with others. */
	CHECK_INT(oomwatch_count_file("7:cpu,memory:/docker/x\n",
				      "35 31 0:32 / /cg/mem rw - cgroup cgroup rw,cpu,memory\n", out, sizeof(out),
				      &err), 0);
	CHECK_STR(out, "/cg/mem/docker/x/memory.oom_control");
	/* A mount of part of the hierarchy (an agent in a container). */
	CHECK_INT(oomwatch_count_file("4:memory:/outer/docker/x\n",
				      "35 31 0:32 /outer /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", out,
				      sizeof(out), &err), 0);
	CHECK_STR(out, "/sys/fs/cgroup/memory/docker/x/memory.oom_control");
	CHECK_INT(oomwatch_count_file("4:memory:/elsewhere/x\n",
				      "35 31 0:32 /outer /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", out,
				      sizeof(out), &err), -ENOENT);
	/* The root cgroup itself. */
	CHECK_INT(oomwatch_count_file("0::/\n", v2_mounts, out, sizeof(out), &err), 0);
	CHECK_STR(out, "/sys/fs/cgroup/memory.events");
	/* No memory cgroup, or no mount of it. */
	CHECK_INT(oomwatch_count_file("1:cpu:/x\n", v1_mounts, out, sizeof(out), &err), -ENOENT);
	CHECK_INT(oomwatch_count_file(v1_cgroup, v2_mounts, out, sizeof(out), &err), -ENOENT);
	CHECK_INT(oomwatch_count_file(v2_cgroup, "", out, sizeof(out), &err), -ENOENT);
	CHECK_INT(oomwatch_count_file("", v1_mounts, out, sizeof(out), &err), -ENOENT);
	/* Too small a buffer is refused, not cut. */
	char tiny[16];
	CHECK(oomwatch_count_file(v1_cgroup, v1_mounts, tiny, sizeof(tiny), &err) < 0);
}

TEST(counts)
{
	int64_t n = -1;
	CHECK_INT(oomwatch_parse_count("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", &n), 0);
	CHECK_INT(n, 3);
	CHECK_INT(oomwatch_parse_count("low 0\nhigh 0\nmax 12\noom 4\noom_kill 2\noom_group_kill 0\n", &n), 0);
	CHECK_INT(n, 2);
	/* oom_kill_disable and oom_group_kill are other lines */
	CHECK_INT(oomwatch_parse_count("oom_kill_disable 1\noom_group_kill 5\n", &n), -ENOENT);
	CHECK_INT(oomwatch_parse_count("", &n), -ENOENT);
	CHECK_INT(oomwatch_parse_count("oom_kill 0", &n), 0);
	CHECK_INT(n, 0);
}

/* This process's own memory cgroup, where the host has one. */
TEST(reads_its_own_cgroup)
{
	char path[512] = "";
	int64_t n = -1;
	struct terr err = {0};
	int rc = oomwatch_read(getpid(), path, sizeof(path), &n, &err);
	if (rc == -ENOENT) {
		printf("# no memory cgroup count here: %s\n", err.msg);
		return;
	}
	CHECK_INT(rc, 0);
	CHECK(n >= 0);
	CHECK(path[0] == '/');
	/* the path is kept: the next read does not need the pid */
	CHECK_INT(oomwatch_read(0, path, sizeof(path), &n, &err), 0);
}

int main(void)
{
	RUN(count_files);
	RUN(counts);
	RUN(reads_its_own_cgroup);
	return testlib_done();
}
