/* agent/stats.c: the cgroup and /proc parsers on fixtures of cgroup v1
 * (cgroupfs driver, Docker 20.10, as on this development machine) and v2
 * (systemd driver, Debian 12's default), tests/agent/fixtures/, and the
 * collector reading them through a copy of the fixture tree: CPU rate and
 * limit, memory without the inactive page cache, block I/O, network and
 * the runner's app connections. */
#include "agent/stats.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

static char tmp[256];

/* A copy of fixtures/NAME under tmp, with its mountinfo's ROOT made the
 * copy's path (mount points are absolute). */
static void copy_fixture(const char *name, char *root, size_t n)
{
	const char *dir = getenv("TESSERA_TEST_FIXTURES");
	CHECK(dir != NULL);
	snprintf(root, n, "%s/%s", tmp, name);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "cp -r '%s/%s' '%s' && sed -i 's|ROOT|%s|' '%s/mountinfo'", dir ? dir : "/nonexistent",
		 name, tmp, root, root);
	CHECK_INT(system(cmd), 0);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

TEST(cgroup_dirs)
{
	char out[512];
	bool v2;
	struct terr err = {0};
	const char *v1_cg = "4:memory:/docker/abc\n2:cpuacct:/docker/abc\n1:cpu:/docker/abc\n7:blkio:/docker/abc\n"
			    "0::/docker/abc\n";
	const char *v1_mi = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
			    "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
			    "38 31 0:35 / /sys/fs/cgroup/blkio rw - cgroup cgroup rw,blkio\n"
			    "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
	CHECK_INT(stats_cgroup_dir(v1_cg, v1_mi, "cpuacct", out, sizeof(out), &v2, &err), 0);
	CHECK_STR(out, "/sys/fs/cgroup/cpu,cpuacct/docker/abc");
	CHECK(!v2);
	CHECK_INT(stats_cgroup_dir(v1_cg, v1_mi, "blkio", out, sizeof(out), &v2, &err), 0);
	CHECK_STR(out, "/sys/fs/cgroup/blkio/docker/abc");
	/* A hybrid host: a controller v1 lacks is on the unified hierarchy. */
	CHECK_INT(stats_cgroup_dir(v1_cg, v1_mi, "io", out, sizeof(out), &v2, &err), 0);
	CHECK_STR(out, "/sys/fs/cgroup/unified/docker/abc");
	CHECK(v2);
	const char *v2_cg = "0::/system.slice/docker-abc.scope\n";
	const char *v2_mi = "30 22 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
	CHECK_INT(stats_cgroup_dir(v2_cg, v2_mi, "memory", out, sizeof(out), &v2, &err), 0);
	CHECK_STR(out, "/sys/fs/cgroup/system.slice/docker-abc.scope");
	CHECK(v2);
	/* No line, or no mount of it. */
	CHECK_INT(stats_cgroup_dir("1:cpu:/x\n", v1_mi, "memory", out, sizeof(out), &v2, &err), -ENOENT);
	CHECK_INT(stats_cgroup_dir(v2_cg, "", "memory", out, sizeof(out), &v2, &err), -ENOENT);
	CHECK_INT(stats_cgroup_dir("", "", "memory", out, sizeof(out), &v2, &err), -ENOENT);
	char tiny[8];
	CHECK_INT(stats_cgroup_dir(v2_cg, v2_mi, "memory", tiny, sizeof(tiny), &v2, &err), -ENAMETOOLONG);
}

TEST(parsers)
{
	int64_t v = 0, q = 0, p = 0, r = 0, w = 0;
	CHECK_INT(stats_parse_value("123\n", &v), 0);
	CHECK_INT((int)v, 123);
	CHECK_INT(stats_parse_value("max\n", &v), 0);
	CHECK_INT((int)v, -1);
	CHECK_INT(stats_parse_value("", &v), -EINVAL);
	CHECK_INT(stats_parse_value("12abc", &v), -EINVAL);
	CHECK_INT(stats_parse_key("usage_usec 77\nuser_usec 5\n", "usage_usec", &v), 0);
	CHECK_INT((int)v, 77);
	/* A key is a whole word: inactive_file is not total_inactive_file. */
	CHECK_INT(stats_parse_key("total_inactive_file 9\n", "inactive_file", &v), -ENOENT);
	CHECK_INT(stats_parse_cpu_max("max 100000\n", &q, &p), 0);
	CHECK_INT((int)q, -1);
	CHECK_INT(stats_parse_cpu_max("50000 100000\n", &q, &p), 0);
	CHECK_INT((int)q, 50000);
	CHECK_INT((int)p, 100000);
	CHECK_INT(stats_parse_cpu_max("", &q, &p), -EINVAL);
	stats_parse_io_v2("8:0 rbytes=10 wbytes=20 rios=1\n8:16 rbytes=5 wbytes=0\n", &r, &w);
	CHECK_INT((int)r, 15);
	CHECK_INT((int)w, 20);
	stats_parse_io_v2("", &r, &w);
	CHECK_INT((int)(r + w), 0);
	stats_parse_blkio_v1("8:0 Read 4\n8:0 Write 6\n8:0 Total 10\nTotal 10\n", &r, &w);
	CHECK_INT((int)r, 4);
	CHECK_INT((int)w, 6);
	stats_parse_blkio_v1("garbage\n\n", &r, &w);
	CHECK_INT((int)(r + w), 0);
	CHECK_INT(stats_parse_netdev("header\nheader\n", &r, &w), -EINVAL);
	CHECK_INT(stats_parse_netdev("h\nh\n  lo: 1 0 0 0 0 0 0 0 2 0 0 0 0 0 0 0\n eth0: 3 0 0 0 0 0 0 0 4 0 0 0 0 0 0 0\n"
				     " eth1: 10 0 0 0 0 0 0 0 20 0 0 0 0 0 0 0\n", &r, &w), 0);
	CHECK_INT((int)r, 13);
	CHECK_INT((int)w, 24);
	struct stats_ports none = {0};
	stats_listening("junk\n", &none);
	CHECK_INT(none.n, 0);
	CHECK_INT(stats_count_inbound("junk\n", &none), 0);
}

/* Connections clients hold to what the session serves: established to a
 * listening port from outside (the runner's 7611, an app at its own
 * 8890, over IPv4 and IPv6); not the runner's hop to an app on the
 * loopback (127.0.0.1, ::1, ::ffff:127.0.0.1), not outgoing connections
 * from an ephemeral port, not other states. */
TEST(inbound_connections_to_served_ports)
{
	const char *tcp =
		"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
		"   0: 00000000:1DBB 00000000:0000 0A 0 0 0 0 0 1\n"          /* 0.0.0.0:7611 listens */
		"   1: 00000000:22BA 00000000:0000 0A 0 0 0 0 0 2\n"          /* 0.0.0.0:8890 */
		"   2: 0100007F:22BB 00000000:0000 0A 0 0 0 0 0 3\n"          /* 127.0.0.1:8891 */
		"   3: 0200110A:1DBB 0100110A:C350 01 0 0 0 0 0 4\n"          /* from the node to 7611 */
		"   4: 0200110A:22BA 0100110A:C351 01 0 0 0 0 0 5\n"          /* from the node to 8890 */
		"   5: 0100007F:22BB 0100007F:D000 01 0 0 0 0 0 6\n"          /* the runner to 8891: loopback */
		"   6: 0200110A:9C40 0100110A:1DBB 01 0 0 0 0 0 7\n"          /* outgoing, from 40000 */
		"   7: 0200110A:22BA 0100110A:C352 06 0 0 0 0 0 8\n";         /* TIME_WAIT */
	const char *tcp6 =
		"  sl  local_address                         remote_address                        st\n"
		"   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 0\n" /* [::]:8080 */
		"   1: 0000000000000000FFFF00000200110A:1F90 0000000000000000FFFF00000100110A:C353 01 0\n" /* v4 client */
		"   2: 00000000000000000000000001000000:1F90 00000000000000000000000001000000:C354 01 0\n" /* ::1 */
		"   3: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:C355 01 0\n"; /* mapped lo */
	struct stats_ports ports = {0};
	stats_listening(tcp, &ports);
	stats_listening(tcp6, &ports);
	stats_listening(tcp, &ports);   /* each port once */
	CHECK_INT(ports.n, 4);
	CHECK_INT(stats_count_inbound(tcp, &ports), 2);
	CHECK_INT(stats_count_inbound(tcp6, &ports), 1);
	struct stats_ports only_runner = {.n = 1, .port = {7611}};
	CHECK_INT(stats_count_inbound(tcp, &only_runner), 1);
}

TEST(v1_fixture)
{
	char root[512], proc[600], mi[600], path[800];
	copy_fixture("cgroup-v1", root, sizeof(root));
	snprintf(proc, sizeof(proc), "%s/proc", root);
	snprintf(mi, sizeof(mi), "%s/mountinfo", root);
	struct stats_cg cg;
	struct terr err = {0};
	CHECK_INT(stats_cg_open(&cg, proc, 4242, mi, &err), 0);
	CHECK(!cg.v2);
	CHECK_INT((int)cg.cpu_limit_m, 1500);
	CHECK_INT((int)cg.mem_limit, 268435456);
	struct stats_reading r;
	CHECK_INT(stats_cg_read(&cg, 1000000000, 7611, &r, &err), 0);
	CHECK(r.cpu_cores < 0);   /* the first reading starts the rate */
	CHECK_INT((int)(r.cpu_ns / 1000000), 1500);
	/* usage_in_bytes less total_inactive_file */
	CHECK_INT((int)r.mem_bytes, 52428800 - 12582912);
	CHECK_INT((int)r.blk_read, 5096);
	CHECK_INT((int)r.blk_write, 8192);
	CHECK_INT((int)r.net_rx, 12345);
	CHECK_INT((int)r.net_tx, 6789);
	/* Established to the ports it serves: the app port's client and the
	 * one of an app on all its addresses (not the listeners, not the
	 * TIME_WAIT one, not the outgoing one from another port, not the
	 * runner's to an app on the loopback). */
	CHECK_INT(r.app_conns, 2);
	snprintf(path, sizeof(path), "%s/sys/fs/cgroup/cpuacct/docker/abc/cpuacct.usage", root);
	write_text(path, "2250000000\n");
	CHECK_INT(stats_cg_read(&cg, 2000000000, 7611, &r, &err), 0);
	CHECK(r.cpu_cores > 0.7499 && r.cpu_cores < 0.7501);
	stats_cg_close(&cg);
	CHECK_INT(cg.fd_cpu, -1);
}

TEST(v2_fixture)
{
	char root[512], proc[600], mi[600], path[800];
	copy_fixture("cgroup-v2", root, sizeof(root));
	snprintf(proc, sizeof(proc), "%s/proc", root);
	snprintf(mi, sizeof(mi), "%s/mountinfo", root);
	struct stats_cg cg;
	struct terr err = {0};
	CHECK_INT(stats_cg_open(&cg, proc, 4242, mi, &err), 0);
	CHECK(cg.v2);
	CHECK_INT((int)cg.cpu_limit_m, 2000);
	CHECK_INT((int)cg.mem_limit, 536870912);
	struct stats_reading r;
	CHECK_INT(stats_cg_read(&cg, 5000000000, 0, &r, &err), 0);
	CHECK_INT((int)(r.cpu_ns / 1000000), 2000);
	CHECK_INT((int)r.mem_bytes, 104857600 - 31457280);
	CHECK_INT((int)r.blk_read, 1049088);
	CHECK_INT((int)r.blk_write, 2097152);
	CHECK_INT((int)r.net_rx, 12345);
	CHECK_INT(r.app_conns, 0);   /* not asked for */
	snprintf(path, sizeof(path), "%s/sys/fs/cgroup/system.slice/docker-abc.scope/cpu.stat", root);
	write_text(path, "usage_usec 4000000\nuser_usec 3000000\n");
	CHECK_INT(stats_cg_read(&cg, 7000000000, 0, &r, &err), 0);
	CHECK(r.cpu_cores > 0.999 && r.cpu_cores < 1.001);
	/* A counter that went back (a new cgroup of the same path) reads 0,
	 * never a negative rate. */
	write_text(path, "usage_usec 1000\n");
	CHECK_INT(stats_cg_read(&cg, 8000000000, 0, &r, &err), 0);
	CHECK(r.cpu_cores == 0);
	/* Unlimited memory and CPU give no limit. */
	stats_cg_close(&cg);
	snprintf(path, sizeof(path), "%s/sys/fs/cgroup/system.slice/docker-abc.scope/memory.max", root);
	write_text(path, "max\n");
	snprintf(path, sizeof(path), "%s/sys/fs/cgroup/system.slice/docker-abc.scope/cpu.max", root);
	write_text(path, "max 100000\n");
	CHECK_INT(stats_cg_open(&cg, proc, 4242, mi, &err), 0);
	CHECK_INT((int)cg.mem_limit, 0);
	CHECK_INT((int)cg.cpu_limit_m, 0);
	stats_cg_close(&cg);
	/* A process that is gone. */
	CHECK_INT(stats_cg_open(&cg, proc, 4243, mi, &err), -ENOENT);
}

TEST(own_process)
{
	/* This host's own cgroup, whatever its version: the collector reads
	 * the test process itself. */
	struct stats_cg cg;
	struct terr err = {0};
	int rc = stats_cg_open(&cg, "/proc", (int)getpid(), NULL, &err);
	if (rc < 0) {
		/* A container without cgroup mounts: nothing to read. */
		printf("# skipped: %s\n", err.msg);
		return;
	}
	struct stats_reading r;
	CHECK_INT(stats_cg_read(&cg, 1, 0, &r, &err), 0);
	CHECK(r.cpu_ns > 0);
	CHECK(r.mem_bytes > 0);
	stats_cg_close(&cg);
}

int main(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/tessera-test-stats.XXXXXX");
	if (!mkdtemp(tmp))
		return 1;
	RUN(cgroup_dirs);
	RUN(parsers);
	RUN(inbound_connections_to_served_ports);
	RUN(v1_fixture);
	RUN(v2_fixture);
	RUN(own_process);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		return 1;
	return testlib_done();
}
