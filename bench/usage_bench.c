/* usage-bench: the cost of live usage (docs/architecture.md,
 * "Performance").
 *
 * 1. The agent's collection: CPU time per session per sample of reading a
 *    session's files with the collector (agent/stats.c: pread of the
 *    kept-open cgroup and /proc files, parsing; its app connections every
 *    30 s) and making its JSON sample, as the stats thread does each
 *    round. The Docker list the thread asks for once a round (not per
 *    session) is dockerd's time, not counted here. Measured on N copies of this
 *    host's own cgroup files (the bench process's: real kernel files, what
 *    a session's cost) and on N fake cgroup directories on tmpfs (the
 *    parsing alone). Goal: at most 0.1 % of a core per session at a 5 s
 *    period, i.e. 5 ms of CPU per session per sample.
 * 2. The manager's memory for one hour of history at 5 s of 1,000 sessions
 *    (manager/usage_store/usage_store.c, the in-memory rings), as the
 *    store counts it and as the C library's heap grew. Goal: at most
 *    64 MiB.
 *
 * 3. The same history in Redis (manager/usage_store/usage_store_redis.c,
 *    production mode), on a redis-server started here (Debian's, a free port, a
 *    temporary directory, nothing saved): the wall time of one agent
 *    round of 100 sessions pushed (one pipelined round trip), per session
 *    per sample, and the manager's CPU time in it, beside the memory
 *    store's push; the hour of 1,000 sessions as Redis counts it
 *    (used_memory); a detail page's read of a session's hour. Skipped
 *    when redis-server is not installed.
 *
 * Usage: usage-bench [SESSIONS] (default 100 for 1., 1000 for 2.). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <malloc.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/stats.h"
#include "common/redis.h"
#include "common/util.h"
#include "manager/usage_store/usage_store.h"

/* The memory store's push, in µs, for the Redis section to show beside
 * its own (1 GPU). */
static double mem_push_us = -1;

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Rounds over cgs 5 s apart on the collector's clock (so app
 * connections are counted every sixth, STATS_CONN_CHECK_NS, as in the
 * agent), each reading every session and making its sample as the agent
 * does; CPU seconds per session per sample. */
static int64_t fake_clock = 1;

static double collect(struct stats_cg *cgs, int n, int rounds)
{
	double t0 = cpu_s();
	for (int r = 0; r < rounds; r++) {
		fake_clock += 5000000000LL;
		json_t *samples = json_array();
		for (int i = 0; i < n; i++) {
			struct stats_reading rd;
			struct terr err = {0};
			if (stats_cg_read(&cgs[i], fake_clock, 7611, &rd, &err) < 0) {
				fprintf(stderr, "usage-bench: read: %s\n", err.msg);
				exit(1);
			}
			json_array_append_new(samples, json_pack("{s:s,s:s,s:f,s:f,s:I,s:I,s:[],s:I,s:I,s:I,s:I,s:i}",
				"session_id", "0123456789abcdef0123456789abcdef", "container_id", "c0ffee",
				"cpu_cores", rd.cpu_cores, "cpu_pct", rd.cpu_cores * 100, "mem_bytes", (json_int_t)rd.mem_bytes,
				"mem_limit_bytes", (json_int_t)rd.mem_limit, "gpus", "net_rx_bytes", (json_int_t)rd.net_rx,
				"net_tx_bytes", (json_int_t)rd.net_tx, "blk_read_bytes", (json_int_t)rd.blk_read,
				"blk_write_bytes", (json_int_t)rd.blk_write, "app_conns", rd.app_conns));
		}
		/* The round's event goes to the manager as JSON text. */
		char *text = json_dumps(samples, JSON_COMPACT);
		free(text);
		json_decref(samples);
	}
	return (cpu_s() - t0) / rounds / n;
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	fputs(text, f);
	fclose(f);
}

static void row(const char *what, double per_sample_s)
{
	/* Share of one core at a 5 s period. */
	double pct = per_sample_s / 5.0 * 100.0;
	printf("%-44s %10.1f us %10.4f %%   %s\n", what, per_sample_s * 1e6, pct,
	       pct <= 0.1 ? "meets the goal (<= 0.1 %)" : "MISSES the goal (<= 0.1 %)");
}

static void bench_collection(int n)
{
	printf("agent collection, %d sessions (CPU per session per sample; share of a core at 5 s)\n", n);
	printf("%-44s %13s %12s\n", "", "per sample", "of a core");
	struct stats_cg *cgs = calloc((size_t)n, sizeof(*cgs));
	struct terr err = {0};
	/* Real kernel files: this process's own cgroup, opened n times. */
	int real = 0;
	for (; real < n; real++)
		if (stats_cg_open(&cgs[real], "/proc", (int)getpid(), NULL, &err) < 0)
			break;
	if (real == n) {
		collect(cgs, n, 2);   /* warm */
		row("this host's cgroup files (real kernel files)", collect(cgs, n, 24));
	} else {
		printf("%-44s skipped: %s\n", "this host's cgroup files", err.msg);
	}
	for (int i = 0; i < real; i++)
		stats_cg_close(&cgs[i]);
	/* Fake cgroup v2 directories of the size a session's files have. */
	char root[] = "/tmp/tessera-usage-bench.XXXXXX";
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		exit(1);
	}
	char cmd[4096], mi[1200], dir[1100];
	snprintf(mi, sizeof(mi), "%s/mountinfo", root);
	FILE *f = fopen(mi, "w");
	fprintf(f, "30 22 0:26 / %s/cg rw - cgroup2 cgroup2 rw\n", root);
	fclose(f);
	for (int i = 0; i < n; i++) {
		snprintf(dir, sizeof(dir), "%s/cg/s%d", root, i);
		snprintf(cmd, sizeof(cmd), "mkdir -p %s %s/proc/%d/net", dir, root, 1000 + i);
		if (system(cmd) != 0)
			exit(1);
		write_file(dir, "cpu.stat", "usage_usec 123456789\nuser_usec 100000000\nsystem_usec 23456789\n"
			   "nr_periods 1000\nnr_throttled 10\nthrottled_usec 12345\n");
		write_file(dir, "cpu.max", "100000 100000\n");
		write_file(dir, "memory.current", "104857600\n");
		write_file(dir, "memory.max", "268435456\n");
		write_file(dir, "memory.stat",
			   "anon 62914560\nfile 41943040\nkernel 1048576\nkernel_stack 65536\npagetables 131072\n"
			   "sec_pagetables 0\npercpu 0\nsock 0\nvmalloc 0\nshmem 0\nzswap 0\nzswapped 0\nfile_mapped 0\n"
			   "file_dirty 0\nfile_writeback 0\nswapcached 0\nanon_thp 0\nfile_thp 0\nshmem_thp 0\n"
			   "inactive_anon 62914560\nactive_anon 0\ninactive_file 31457280\nactive_file 10485760\n"
			   "unevictable 0\nslab_reclaimable 0\nslab_unreclaimable 0\nslab 0\nworkingset_refault_anon 0\n"
			   "workingset_refault_file 0\nworkingset_activate_anon 0\nworkingset_activate_file 0\n"
			   "workingset_restore_anon 0\nworkingset_restore_file 0\nworkingset_nodereclaim 0\npgscan 0\n"
			   "pgsteal 0\npgscan_kswapd 0\npgscan_direct 0\npgsteal_kswapd 0\npgsteal_direct 0\npgfault 100\n"
			   "pgmajfault 0\npgrefill 0\npgactivate 0\npgdeactivate 0\npglazyfree 0\npglazyfreed 0\n"
			   "zswpin 0\nzswpout 0\nthp_fault_alloc 0\nthp_collapse_alloc 0\n");
		write_file(dir, "io.stat", "8:0 rbytes=1048576 wbytes=2097152 rios=10 wios=20 dbytes=0 dios=0\n");
		char pdir[1200], text[300];
		snprintf(pdir, sizeof(pdir), "%s/proc/%d", root, 1000 + i);
		snprintf(text, sizeof(text), "0::/s%d\n", i);
		write_file(pdir, "cgroup", text);
		strcat(pdir, "/net");
		write_file(pdir, "dev", "Inter-|   Receive\n face |bytes\n    lo: 1 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0\n"
					"  eth0: 12345 17 0 0 0 0 0 0 6789 11 0 0 0 0 0 0\n");
		write_file(pdir, "tcp", "  sl  local_address rem_address   st\n"
					"   0: 0200110A:1DBB 0100110A:C350 01 00000000:00000000 00:00000000 00000000 0 0 1 1\n");
		write_file(pdir, "tcp6", "  sl  local_address remote_address st\n");
		char proc[1100];
		snprintf(proc, sizeof(proc), "%s/proc", root);
		if (stats_cg_open(&cgs[i], proc, 1000 + i, mi, &err) < 0) {
			fprintf(stderr, "usage-bench: %s\n", err.msg);
			exit(1);
		}
	}
	collect(cgs, n, 2);
	row("fake cgroup v2 files on tmpfs (parsing)", collect(cgs, n, 48));
	for (int i = 0; i < n; i++)
		stats_cg_close(&cgs[i]);
	free(cgs);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (system(cmd) != 0)
		fprintf(stderr, "usage-bench: could not remove %s\n", root);
}

static void bench_history(int n, int ngpu)
{
	const struct usage_store_ops *o = &usage_store_memory_ops;
	struct usage_store *st = NULL;
	struct terr err = {0};
	struct mallinfo2 before = mallinfo2();
	if (o->open(&st, 3600 * 1000, 5000, &err) < 0) {
		fprintf(stderr, "usage-bench: %s\n", err.msg);
		exit(1);
	}
	struct usage_sample s;
	memset(&s, 0, sizeof(s));
	s.mem_limit_bytes = 1 << 30;
	s.n_gpus = ngpu;
	for (int d = 0; d < ngpu; d++) {
		snprintf(s.gpus[d].uuid, sizeof(s.gpus[d].uuid), "GPU-00000000-0000-0000-0000-00000000000%d", d);
		s.gpus[d].mem_limit_bytes = 4LL << 30;
	}
	char id[40];
	double t0 = cpu_s();
	/* 721 samples (an hour at 5 s and one), so every ring is full. */
	for (int k = 0; k <= 720; k++) {
		for (int i = 0; i < n; i++) {
			snprintf(id, sizeof(id), "%032x", i);
			s.t = 1700000000000LL + (int64_t)k * 5000;
			s.cpu_cores = 0.5;
			s.cpu_pct = 50;
			s.mem_bytes = (int64_t)k * 4096;
			s.net_rx = s.net_tx = k;
			for (int d = 0; d < ngpu; d++) {
				s.gpus[d].util_pct = 25;
				s.gpus[d].mem_bytes = k;
			}
			if (o->push(st, id, &s, &err) < 0) {
				fprintf(stderr, "usage-bench: %s\n", err.msg);
				exit(1);
			}
		}
	}
	double push_us = (cpu_s() - t0) / (721.0 * n) * 1e6;
	struct mallinfo2 after = mallinfo2();
	double counted = (double)o->memory(st) / (1 << 20);
	double heap = (double)(after.uordblks + after.hblkhd - before.uordblks - before.hblkhd) / (1 << 20);
	/* A detail page's read: the whole hour of one session. */
	struct usage_sample *h = NULL;
	size_t got = 0;
	t0 = cpu_s();
	for (int r = 0; r < 100; r++) {
		snprintf(id, sizeof(id), "%032x", r % n);
		o->since(st, id, 0, &h, &got, &err);
		free(h);
	}
	double read_ms = (cpu_s() - t0) / 100 * 1e3;
	char what[64];
	snprintf(what, sizeof(what), "%d sessions, %d GPU%s each", n, ngpu, ngpu == 1 ? "" : "s");
	printf("%-26s %9.1f MiB %9.1f MiB  %5.2f us/push  %6.2f ms/hour read  %s\n", what, counted, heap, push_us,
	       read_ms, heap <= 64 && counted <= 64 ? "meets the goal (<= 64 MiB)" : "MISSES the goal (<= 64 MiB)");
	if (ngpu == 1)
		mem_push_us = push_us;
	o->close(st);
}

static double wall_s(void)
{
	return (double)util_mono_ms() / 1e3;
}

/* Redis' used_memory, in bytes (-1 when it cannot be read). */
static double redis_used(struct redis_client *c)
{
	const char *argv[] = {"INFO", "memory"};
	char *info = NULL;
	double v = -1;
	if (redis_command(c, 2, argv, NULL, NULL, &info, NULL) == 1 && info) {
		const char *p = strstr(info, "used_memory:");
		if (p)
			v = strtod(p + 12, NULL);
	}
	free(info);
	return v;
}

static void bench_redis(void)
{
	printf("\nmanager history in Redis (production mode): rounds of 100 sessions, 1 GPU each\n");
	if (system("command -v redis-server >/dev/null 2>&1") != 0) {
		printf("skipped: redis-server is not installed (scripts/bootstrap installs it)\n");
		return;
	}
	char dir[] = "/tmp/tessera-usage-bench.XXXXXX";
	if (!mkdtemp(dir)) {
		perror("usage-bench: mkdtemp");
		return;
	}
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	bind(fd, (struct sockaddr *)&a, sizeof(a));
	getsockname(fd, (struct sockaddr *)&a, &alen);
	close(fd);
	char port[16], url[64];
	snprintf(port, sizeof(port), "%d", ntohs(a.sin_port));
	snprintf(url, sizeof(url), "redis://127.0.0.1:%s", port);
	pid_t pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		dup2(devnull, 2);
		execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly",
		       "no", "--dir", dir, "--daemonize", "no", (char *)NULL);
		_exit(127);
	}
	struct redis_client *c = NULL;
	struct usage_store *st = NULL;
	struct terr err = {0};
	const struct usage_store_ops *o = &usage_store_redis_ops;
	bool up = false;
	if (redis_open(url, &c, &err) == 0)
		for (int i = 0; i < 100 && !up; i++)
			if (!(up = redis_ping(c, NULL) == 0))
				usleep(100 * 1000);
	if (!up || usage_store_redis_open(&st, c, 3600 * 1000, 5000, NULL, NULL, &err) < 0) {
		printf("skipped: redis-server did not answer %s\n", err.msg);
		goto out;
	}
	enum { ROUND = 100 };
	static struct usage_sample s[ROUND];
	static char idbuf[10 * ROUND][40];
	const char *ids[ROUND];
	for (int i = 0; i < 10 * ROUND; i++)
		snprintf(idbuf[i], sizeof(idbuf[i]), "%032x", i);
	for (int i = 0; i < ROUND; i++) {
		memset(&s[i], 0, sizeof(s[i]));
		s[i].mem_limit_bytes = 1 << 30;
		s[i].n_gpus = 1;
		snprintf(s[i].gpus[0].uuid, sizeof(s[i].gpus[0].uuid), "GPU-00000000-0000-0000-0000-00000000000%d", i % 8);
		s[i].gpus[0].mem_limit_bytes = 4LL << 30;
	}
	/* An hour at 5 s (721 samples) of 1,000 sessions: ten agents' rounds
	 * of 100 each time; rounds 100 to 299 of the first agent timed. */
	double used0 = redis_used(c), wall = 0, cpu = 0;
	int timed = 0;
	for (int k = 0; k <= 720; k++) {
		for (int ag = 0; ag < 10; ag++) {
			for (int i = 0; i < ROUND; i++) {
				ids[i] = idbuf[ag * ROUND + i];
				s[i].t = 1700000000000LL + (int64_t)k * 5000;
				s[i].cpu_cores = 0.5 + (double)(k % 10) / 100;
				s[i].cpu_pct = 50;
				s[i].mem_bytes = 100000000 + (int64_t)k * 4096;
				s[i].net_rx = s[i].net_tx = (int64_t)k * 1500;
				s[i].blk_read = (int64_t)k * 4096;
				s[i].gpus[0].util_pct = 25 + k % 50;
				s[i].gpus[0].mem_bytes = 1000000 + k;
			}
			bool time_it = ag == 0 && k >= 100 && k < 300;
			double w0 = time_it ? wall_s() : 0, c0 = time_it ? cpu_s() : 0;
			if (o->push_round(st, ROUND, ids, s, &err) < 0) {
				printf("usage-bench: push: %s\n", err.msg);
				goto out;
			}
			if (time_it) {
				wall += wall_s() - w0;
				cpu += cpu_s() - c0;
				timed++;
			}
		}
	}
	double used = redis_used(c) - used0;
	struct usage_sample *h = NULL;
	size_t got = 0;
	double r0 = wall_s();
	for (int r = 0; r < 50; r++) {
		o->since(st, idbuf[r], 0, &h, &got, &err);
		free(h);
	}
	double read_ms = (wall_s() - r0) / 50 * 1e3;
	printf("%-26s %9.1f us  (manager CPU %.1f us; memory store %.2f us per push)\n", "per session per sample",
	       wall / timed / ROUND * 1e6, cpu / timed / ROUND * 1e6, mem_push_us);
	printf("%-26s %9.2f ms\n", "one round of 100", wall / timed * 1e3);
	printf("%-26s %9.1f MiB in Redis (used_memory), %zu samples read back in %.2f ms\n",
	       "an hour of 1,000 sessions", used / (1 << 20), got, read_ms);
out:
	if (st)
		o->close(st);
	redis_close(c);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "usage-bench: could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;
	if (n <= 0 || n > 100000) {
		fprintf(stderr, "usage: usage-bench [SESSIONS]\n");
		return 2;
	}
	bench_collection(n);
	printf("\nmanager history: one hour at 5 s (721 samples a session), in memory\n");
	printf("%-26s %13s %13s\n", "", "as counted", "heap grew");
	bench_history(1000, 0);
	bench_history(1000, 1);
	bench_redis();
	return 0;
}
