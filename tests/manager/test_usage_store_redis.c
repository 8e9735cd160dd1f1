/* manager/usage_store/usage_store_redis.c, the usage history in Redis,
 * against a real redis-server (Debian's, started here on a free port in a temporary
 * directory, nothing saved): the packed text both ways (odd UUIDs, unknown
 * utilisation, text that is no sample); push, since, last; the list
 * trimmed to retention / period and expiring after the retention; a round
 * of 100 sessions; the history outliving the store (a manager restart);
 * entries that are no sample or repeats read past. Redis stopped: pushes
 * kept in memory, reads answer from there, one failure reported per
 * outage; Redis started again (empty): what memory kept is written there
 * first. Without redis-server installed, only the packing runs. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/redis.h"
#include "common/util.h"
#include "manager/usage_store/usage_store.h"
#include "testlib.h"

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	bind(fd, (struct sockaddr *)&a, sizeof(a));
	getsockname(fd, (struct sockaddr *)&a, &len);
	close(fd);
	return ntohs(a.sin_port);
}

static char dir[] = "/tmp/tessera-test-usage-redis.XXXXXX";
static pid_t server = -1;
static int port;
static struct redis_client *cli;

/* redis-server on port; waits until it answers. */
static bool start_server(void)
{
	char portbuf[16];
	snprintf(portbuf, sizeof(portbuf), "%d", port);
	server = fork();
	if (server == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		dup2(devnull, 2);
		execlp("redis-server", "redis-server", "--port", portbuf, "--bind", "127.0.0.1", "--save", "",
		       "--appendonly", "no", "--dir", dir, "--daemonize", "no", (char *)NULL);
		_exit(127);
	}
	char url[64];
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
	struct redis_client *c;
	if (redis_open(url, &c, NULL) < 0)
		return false;
	bool up = false;
	for (int i = 0; i < 100 && !up; i++) {
		up = redis_ping(c, NULL) == 0;
		if (!up)
			usleep(100 * 1000);
	}
	redis_close(c);
	return up;
}

static void stop_server(void)
{
	if (server > 0) {
		kill(server, SIGTERM);
		waitpid(server, NULL, 0);
		server = -1;
	}
}

static struct usage_sample sample(int64_t t, int ngpu)
{
	struct usage_sample s;
	memset(&s, 0, sizeof(s));
	s.t = t;
	s.cpu_cores = 0.5 + (double)(t % 7) / 1000.0;
	s.cpu_pct = 50.25;
	s.mem_bytes = t * 10;
	s.mem_limit_bytes = 1 << 30;
	s.net_rx = t * 2;
	s.net_tx = t * 3;
	s.blk_read = 7;
	s.blk_write = 9;
	s.n_gpus = ngpu;
	for (int d = 0; d < ngpu; d++) {
		snprintf(s.gpus[d].uuid, sizeof(s.gpus[d].uuid), "GPU-%d", d);
		s.gpus[d].util_pct = d == 0 ? 25.5 : -1;
		s.gpus[d].mem_bytes = t + d;
		s.gpus[d].mem_limit_bytes = 4LL << 30;
	}
	return s;
}

static int64_t llen(const char *key)
{
	const char *argv[] = {"LLEN", key};
	int64_t n = -1;
	redis_command(cli, 2, argv, NULL, &n, NULL, NULL);
	return n;
}

/* Failures reported by the store, and how many outages (ok to failed). */
static int outages, fails;
static bool was_down;
static void on_outcome(void *arg, int rc, const struct terr *err)
{
	(void)arg;
	(void)err;
	if (rc < 0) {
		fails++;
		if (!was_down)
			outages++;
	}
	was_down = rc < 0;
}

TEST(packing)
{
	struct usage_sample s = sample(1700000000123LL, 3), d;
	/* A UUID with what the text form escapes, and an empty one. */
	util_strlcpy(s.gpus[1].uuid, "GPU 1%x\t", sizeof(s.gpus[1].uuid));
	s.gpus[2].uuid[0] = '\0';
	s.gpus[2].util_pct = 100.0;
	char buf[8192];
	int n = usage_sample_encode(&s, buf, sizeof(buf));
	CHECK(n > 0 && (size_t)n == strlen(buf));
	CHECK(!strchr(buf, '\t'));
	CHECK_INT(usage_sample_decode(buf, &d), 0);
	CHECK_INT(d.t, s.t);
	CHECK(d.cpu_cores > 0.5045 && d.cpu_cores < 0.5055);
	CHECK(d.cpu_pct > 50.24 && d.cpu_pct < 50.26);
	CHECK_INT(d.mem_bytes, s.mem_bytes);
	CHECK_INT(d.mem_limit_bytes, 1 << 30);
	CHECK_INT(d.net_rx, s.net_rx);
	CHECK_INT(d.net_tx, s.net_tx);
	CHECK_INT(d.blk_read, 7);
	CHECK_INT(d.blk_write, 9);
	CHECK_INT(d.n_gpus, 3);
	CHECK_STR(d.gpus[0].uuid, "GPU-0");
	CHECK_STR(d.gpus[1].uuid, "GPU 1%x\t");
	CHECK_STR(d.gpus[2].uuid, "");
	CHECK(d.gpus[0].util_pct > 25.49 && d.gpus[0].util_pct < 25.51);
	CHECK(d.gpus[1].util_pct < 0);
	CHECK(d.gpus[2].util_pct > 99.99);
	CHECK_INT(d.gpus[1].mem_bytes, s.gpus[1].mem_bytes);
	CHECK_INT(d.gpus[2].mem_limit_bytes, 4LL << 30);
	/* Every GPU at its longest fits the buffer the store uses. */
	struct usage_sample big = sample(1, USAGE_MAX_GPUS);
	for (int g = 0; g < USAGE_MAX_GPUS; g++)
		memset(big.gpus[g].uuid, '%', sizeof(big.gpus[g].uuid) - 1);
	CHECK(usage_sample_encode(&big, buf, sizeof(buf)) > 0);
	CHECK_INT(usage_sample_decode(buf, &d), 0);
	CHECK_INT((int)strlen(d.gpus[15].uuid), 63);
	CHECK_INT(usage_sample_encode(&s, buf, 10), -ENOSPC);
	/* Text that is no sample. */
	const char *bad[] = {"", "x", "1 2 3", "1 2 3 4 5 6 7 8 9 0 extra", "1 2 3 4 5 6 7 8 9 1",
			     "1 2 3 4 5 6 7 8 9 1 GPU 20000 1 1", "1 2 3 4 5 6 7 8 9 1 G%Z1 1 1 1", "-5 2 3 4 5 6 7 8 9 0", " 1 2 3 4 5 6 7 8 9 0",
			     "1 2 3 4 5 6 7 8 9 17", "1  2 3 4 5 6 7 8 9 0", NULL};
	for (int i = 0; bad[i]; i++)
		if (usage_sample_decode(bad[i], &d) != -EINVAL)
			FAILF("'%s' decoded", bad[i]);
	CHECK_INT(usage_sample_decode("1 2 3 4 5 6 7 8 9 0", &d), 0);
}

TEST(push_since_last)
{
	const struct usage_store_ops *o = &usage_store_redis_ops;
	struct usage_store *st = NULL;
	struct terr err = {0};
	/* 10 s at 1 s: 11 samples. */
	CHECK_INT(usage_store_redis_open(&st, cli, 10000, 1000, on_outcome, NULL, &err), 0);
	int64_t base = util_now_ms() - 30000;
	for (int i = 1; i <= 30; i++) {
		struct usage_sample s = sample(base + i * 1000, 2);
		CHECK_INT(o->push(st, "s1", &s, &err), 0);
	}
	CHECK_INT(llen("tessera:usage:s1"), 11);
	int64_t ttl = 0;
	CHECK_INT(redis_pttl(cli, "tessera:usage:s1", &ttl, &err), 0);
	CHECK(ttl > 0 && ttl <= 10000);
	struct usage_sample *h = NULL;
	size_t n = 0;
	CHECK_INT(o->since(st, "s1", 0, &h, &n, &err), 0);
	CHECK_INT((int)n, 11);
	if (n == 11) {
		CHECK_INT(h[0].t, base + 20000);
		CHECK_INT(h[10].t, base + 30000);
		CHECK_INT(h[10].mem_bytes, (base + 30000) * 10);
		CHECK_INT(h[10].n_gpus, 2);
		CHECK_STR(h[10].gpus[1].uuid, "GPU-1");
		CHECK(h[10].gpus[1].util_pct < 0);
	}
	free(h);
	CHECK_INT(o->since(st, "s1", base + 25000, &h, &n, &err), 0);
	CHECK_INT((int)n, 5);
	CHECK(n && h[0].t == base + 26000);
	free(h);
	struct usage_sample last;
	CHECK_INT(o->last(st, "s1", &last), 0);
	CHECK_INT(last.t, base + 30000);
	CHECK_INT(o->last(st, "nobody", &last), -ENOENT);
	CHECK_INT(o->since(st, "nobody", 0, &h, &n, &err), 0);
	CHECK_INT((int)n, 0);
	CHECK(h == NULL);

	/* Entries that are no sample, and repeats, are read past. */
	const char *junk[] = {"RPUSH", "tessera:usage:s1", "not a sample"};
	CHECK_INT(redis_command(cli, 3, junk, NULL, NULL, NULL, &err), 1);
	char text[512];
	struct usage_sample again = sample(base + 30000, 2);
	usage_sample_encode(&again, text, sizeof(text));
	const char *dup[] = {"RPUSH", "tessera:usage:s1", text};
	CHECK_INT(redis_command(cli, 3, dup, NULL, NULL, NULL, &err), 1);
	CHECK_INT(o->since(st, "s1", 0, &h, &n, &err), 0);
	CHECK_INT((int)n, 11);
	free(h);

	/* A round of 100 sessions, one sample each. */
	const char *ids[100];
	char idbuf[100][40];
	struct usage_sample round[100];
	for (int i = 0; i < 100; i++) {
		snprintf(idbuf[i], sizeof(idbuf[i]), "r%03d", i);
		ids[i] = idbuf[i];
		round[i] = sample(base + 40000 + i, i % 3);
	}
	CHECK_INT(o->push_round(st, 100, ids, round, &err), 0);
	int ok = 0;
	for (int i = 0; i < 100; i++) {
		if (o->since(st, ids[i], 0, &h, &n, &err) == 0 && n == 1 && h[0].t == base + 40000 + i &&
		    h[0].n_gpus == i % 3)
			ok++;
		free(h);
	}
	CHECK_INT(ok, 100);

	/* The history outlives the store: a manager restarted reads it. */
	o->close(st);
	CHECK_INT(usage_store_redis_open(&st, cli, 10000, 1000, on_outcome, NULL, &err), 0);
	CHECK_INT(o->since(st, "s1", 0, &h, &n, &err), 0);
	CHECK_INT((int)n, 11);
	free(h);
	o->drop(st, "s1");
	CHECK_INT(llen("tessera:usage:s1"), 0);
	CHECK_INT(outages, 0);
	o->close(st);
}

/* A read since a recent time takes the list's tail, or the whole list
 * when the tail does not reach back that far. */
TEST(since_recent)
{
	const struct usage_store_ops *o = &usage_store_redis_ops;
	struct usage_store *st = NULL;
	struct terr err = {0};
	CHECK_INT(usage_store_redis_open(&st, cli, 600000, 100, on_outcome, NULL, &err), 0);
	int64_t now = util_now_ms();
	/* Every 500 ms for 100 s; then, denser than any agent samples, every
	 * 10 ms for the last 3 s. */
	for (int i = 0; i < 200; i++) {
		struct usage_sample s = sample(now - 103000 + i * 500, 0);
		CHECK_INT(o->push(st, "tail", &s, &err), 0);
	}
	for (int i = 0; i < 300; i++) {
		struct usage_sample s = sample(now - 3000 + i * 10, 0);
		CHECK_INT(o->push(st, "tail", &s, &err), 0);
	}
	struct usage_sample *h = NULL;
	size_t n = 0;
	CHECK_INT(o->since(st, "tail", now - 1000, &h, &n, &err), 0);
	CHECK_INT((int)n, 99);   /* now - 990 ... now - 10 */
	CHECK(n && h[0].t == now - 990 && h[n - 1].t == now - 10);
	free(h);
	CHECK_INT(o->since(st, "tail", now - 20000, &h, &n, &err), 0);
	CHECK_INT((int)n, 300 + 33);   /* the dense 300, and every 500 ms from now - 19500 to now - 3500 */
	free(h);
	/* Sparse samples only: the tail reaches back far enough. */
	for (int i = 0; i < 200; i++) {
		struct usage_sample s = sample(now - 99500 + i * 500, 0);
		CHECK_INT(o->push(st, "sparse", &s, &err), 0);
	}
	CHECK_INT(o->since(st, "sparse", now - 5000, &h, &n, &err), 0);
	CHECK_INT((int)n, 10);
	CHECK(n == 10 && h[0].t == now - 4500 && h[9].t == now);
	free(h);
	o->drop(st, "sparse");
	CHECK_INT(o->since(st, "tail", now + 5000, &h, &n, &err), 0);
	CHECK_INT((int)n, 0);
	o->drop(st, "tail");
	o->close(st);
}

TEST(expires)
{
	const struct usage_store_ops *o = &usage_store_redis_ops;
	struct usage_store *st = NULL;
	struct terr err = {0};
	/* Retention 300 ms: the list goes once its session stops pushing. */
	CHECK_INT(usage_store_redis_open(&st, cli, 300, 100, on_outcome, NULL, &err), 0);
	struct usage_sample s = sample(util_now_ms(), 0);
	CHECK_INT(o->push(st, "short", &s, &err), 0);
	CHECK_INT(llen("tessera:usage:short"), 1);
	int64_t left = 0;
	for (int i = 0; i < 100; i++) {
		if (redis_pttl(cli, "tessera:usage:short", &left, &err) == 0 && left == -2)
			break;
		usleep(50 * 1000);
	}
	CHECK_INT(left, -2);
	struct usage_sample *h = NULL;
	size_t n = 9;
	CHECK_INT(o->since(st, "short", 0, &h, &n, &err), 0);
	CHECK_INT((int)n, 0);
	o->close(st);
}

TEST(redis_down_then_up)
{
	const struct usage_store_ops *o = &usage_store_redis_ops;
	struct usage_store *st = NULL;
	struct terr err = {0};
	CHECK_INT(usage_store_redis_open(&st, cli, 60000, 1000, on_outcome, NULL, &err), 0);
	int64_t base = util_now_ms() - 10000;
	struct usage_sample s = sample(base, 1);
	CHECK_INT(o->push(st, "d1", &s, &err), 0);
	stop_server();
	int fails0 = fails;
	/* Pushes while Redis is down are kept in memory, and succeed. */
	for (int i = 1; i <= 3; i++) {
		s = sample(base + i * 1000, 1);
		CHECK_INT(o->push(st, "d1", &s, &err), 0);
	}
	CHECK(fails > fails0);
	CHECK_INT(outages, 1);
	/* Reads answer from memory. */
	struct usage_sample *h = NULL;
	size_t n = 0;
	CHECK_INT(o->since(st, "d1", 0, &h, &n, &err), 0);
	CHECK_INT((int)n, 3);
	CHECK(n == 3 && h[0].t == base + 1000 && h[2].t == base + 3000);
	free(h);
	struct usage_sample last;
	CHECK_INT(o->last(st, "d1", &last), 0);
	CHECK_INT(last.t, base + 3000);
	CHECK_INT(outages, 1);   /* still the same outage */

	/* Redis back, empty (nothing was saved): the next push writes what
	 * memory kept first, then its own. The client waits a second after
	 * a failed connect before it tries again. */
	CHECK(start_server());
	int tries = 0;
	int64_t len = 0;
	for (int i = 4; i < 40 && len < 2; i++, tries++) {
		s = sample(base + i * 1000, 1);
		CHECK_INT(o->push(st, "d1", &s, &err), 0);
		len = llen("tessera:usage:d1");
		if (len < 2)
			usleep(100 * 1000);
	}
	CHECK(len >= 4);   /* the three kept, then one or more pushed */
	CHECK_INT(o->since(st, "d1", 0, &h, &n, &err), 0);
	CHECK_INT((int64_t)n, len);
	CHECK(n >= 4 && h[0].t == base + 1000);
	bool ordered = true;
	for (size_t i = 1; i < n; i++)
		ordered = ordered && h[i].t > h[i - 1].t;
	CHECK(ordered);
	free(h);
	CHECK(!was_down);
	CHECK_INT(outages, 1);
	o->close(st);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	RUN(packing);
	if (system("command -v redis-server >/dev/null 2>&1") != 0 || !mkdtemp(dir)) {
		printf("skip: redis-server is not installed\n");
		return testlib_done();
	}
	port = free_port();
	if (!start_server()) {
		FAILF("cannot start redis-server");
		return testlib_done();
	}
	char url[64];
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/1", port);
	if (redis_open(url, &cli, NULL) == 0) {
		RUN(push_since_last);
		RUN(since_recent);
		RUN(expires);
		RUN(redis_down_then_up);
		redis_close(cli);
	}
	stop_server();
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("could not remove %s\n", dir);
	return testlib_done();
}
