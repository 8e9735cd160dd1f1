/* common/redis.c: the URL, a Redis that is down, every helper against a
 * real redis-server (Debian's, started here on a free port in a temporary
 * directory, nothing saved), a password, recovery after a restart of
 * Redis; and auth/ratelimit.c counting in Redis, falling back to memory
 * while Redis is down. Without redis-server installed, only the first
 * two run. */
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

#include "auth/ratelimit.h"
#include "common/redis.h"
#include "common/util.h"
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

static char dir[] = "/tmp/tessera-test-redis.XXXXXX";
static pid_t server = -1;

/* redis-server on port (with a password when pass is not NULL); waits
 * until it answers. false when it cannot be started. */
static bool start_server(int port, const char *pass)
{
	char portbuf[16];
	snprintf(portbuf, sizeof(portbuf), "%d", port);
	server = fork();
	if (server == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		dup2(devnull, 2);
		const char *argv[16] = {"redis-server", "--port", portbuf, "--bind", "127.0.0.1", "--save", "",
					"--appendonly", "no", "--dir", dir, "--daemonize", "no"};
		int n = 13;
		if (pass) {
			argv[n++] = "--requirepass";
			argv[n++] = pass;
		}
		argv[n] = NULL;
		execvp("redis-server", (char *const *)argv);
		_exit(127);
	}
	char url[128];
	snprintf(url, sizeof(url), "redis://%s%s%s127.0.0.1:%d", pass ? ":" : "", pass ? pass : "", pass ? "@" : "",
		 port);
	struct redis_client *c;
	if (redis_open(url, &c, NULL) < 0)
		return false;
	bool up = false;
	for (int i = 0; i < 100 && !up; i++) {
		up = redis_ping(c, NULL) == 0;
		if (!up)
			usleep(100 * 1000);   /* the client waits a second after a failed connect */
		int st;
		if (waitpid(server, &st, WNOHANG) == server) {
			server = -1;
			break;
		}
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

TEST(urls)
{
	struct redis_client *c;
	struct terr err = {0};
	CHECK_INT(redis_open("redis://10.0.0.5:6380/2", &c, &err), 0);
	CHECK_STR(redis_addr(c), "10.0.0.5:6380");
	redis_close(c);
	CHECK_INT(redis_open("redis://cache.lab", &c, &err), 0);
	CHECK_STR(redis_addr(c), "cache.lab:6379");
	redis_close(c);
	CHECK_INT(redis_open("redis://:s3cret@127.0.0.1:7000/0", &c, &err), 0);
	CHECK_STR(redis_addr(c), "127.0.0.1:7000");
	redis_close(c);
	CHECK_INT(redis_open("redis://tessera:s3cret@127.0.0.1:7000/1", &c, &err), 0);
	redis_close(c);
	const char *bad[] = {"http://127.0.0.1:6379", "", "redis://", "redis://:6379", "redis://h:0", "redis://h:99999",
			     "redis://h:12x", "redis://h:1/db", "redis://h:1/-1", "redis://pass@h:1",
			     "redis://:@h:1", NULL};
	for (int i = 0; bad[i]; i++) {
		memset(&err, 0, sizeof(err));
		CHECK_INT(redis_open(bad[i], &c, &err), -EINVAL);
		CHECK_CONTAINS(err.msg, "redis");
	}
	CHECK_INT(redis_open(NULL, &c, &err), -EINVAL);
}

TEST(down)
{
	char url[64];
	int port = free_port();
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
	struct redis_client *c;
	struct terr err = {0};
	CHECK_INT(redis_open(url, &c, &err), 0);
	int rc = redis_set(c, "tessera:test", "v", 1, 0, &err);
	CHECK_INT(rc, -ECONNREFUSED);
	char addr[64];
	snprintf(addr, sizeof(addr), "Redis at 127.0.0.1:%d", port);
	CHECK_CONTAINS(err.msg, addr);
	/* The next call within a second fails at once with the same words. */
	memset(&err, 0, sizeof(err));
	int64_t t0 = util_mono_ms();
	char *val = NULL;
	CHECK(redis_get(c, "tessera:test", &val, NULL, &err) < 0);
	CHECK(util_mono_ms() - t0 < 500);
	CHECK_CONTAINS(err.msg, addr);
	CHECK(val == NULL);
	redis_close(c);
}

static struct redis_client *cli;
static int port;

TEST(commands)
{
	struct terr err = {0};
	CHECK_INT(redis_ping(cli, &err), 0);
	CHECK_INT(redis_set(cli, "tessera:test:a", "one\0two", 7, 0, &err), 0);
	char *val = NULL;
	size_t len = 0;
	CHECK_INT(redis_get(cli, "tessera:test:a", &val, &len, &err), 1);
	CHECK_INT(len, 7);
	CHECK(val && !memcmp(val, "one\0two", 7));
	free(val);
	int64_t ttl = 0;
	CHECK_INT(redis_pttl(cli, "tessera:test:a", &ttl, &err), 0);
	CHECK_INT(ttl, -1);
	CHECK_INT(redis_set(cli, "tessera:test:a", "x", 1, 60000, &err), 0);
	CHECK_INT(redis_pttl(cli, "tessera:test:a", &ttl, &err), 0);
	CHECK(ttl > 50000 && ttl <= 60000);
	CHECK_INT(redis_del(cli, "tessera:test:a", &err), 1);
	CHECK_INT(redis_del(cli, "tessera:test:a", &err), 0);
	CHECK_INT(redis_get(cli, "tessera:test:a", &val, &len, &err), 0);
	CHECK(val == NULL);
	CHECK_INT(redis_pttl(cli, "tessera:test:a", &ttl, &err), 0);
	CHECK_INT(ttl, -2);

	/* The window starts at the first increment and is not moved by later ones. */
	int64_t count = 0;
	CHECK_INT(redis_incr_window(cli, "tessera:test:w", 30000, &count, &ttl, &err), 0);
	CHECK_INT(count, 1);
	CHECK(ttl > 25000 && ttl <= 30000);
	CHECK_INT(redis_incr_window(cli, "tessera:test:w", 90000, &count, &ttl, &err), 0);
	CHECK_INT(count, 2);
	CHECK(ttl <= 30000);
	/* A count left without expiry (a crash between INCR and PEXPIRE)
	 * gets one at its next increment. */
	CHECK_INT(redis_set(cli, "tessera:test:w2", "4", 1, 0, &err), 0);
	CHECK_INT(redis_incr_window(cli, "tessera:test:w2", 30000, &count, &ttl, &err), 0);
	CHECK_INT(count, 5);
	CHECK_INT(redis_pttl(cli, "tessera:test:w2", &ttl, &err), 0);
	CHECK(ttl > 25000 && ttl <= 30000);

	/* Lists for series of samples: the last max_len kept, in order. */
	for (int i = 0; i < 7; i++) {
		char s[8];
		int n = snprintf(s, sizeof(s), "s%d", i);
		CHECK_INT(redis_list_push_trim(cli, "tessera:test:l", s, (size_t)n, 5, 60000, &err), 0);
	}
	char **items = NULL;
	size_t n = 0;
	CHECK_INT(redis_list_range(cli, "tessera:test:l", 0, -1, &items, &n, &err), 0);
	CHECK_INT(n, 5);
	if (n == 5) {
		CHECK_STR(items[0], "s2");
		CHECK_STR(items[4], "s6");
	}
	redis_strings_free(items, n);
	CHECK_INT(redis_list_range(cli, "tessera:test:none", 0, -1, &items, &n, &err), 0);
	CHECK_INT(n, 0);
	redis_strings_free(items, n);

	/* Any command; Redis' own error words come back as EPROTO. */
	const char *argv[] = {"HSET", "tessera:test:h", "f", "v"};
	int64_t integer = 0;
	CHECK_INT(redis_command(cli, 4, argv, NULL, &integer, NULL, &err), 1);
	CHECK_INT(integer, 1);
	memset(&err, 0, sizeof(err));
	CHECK_INT(redis_get(cli, "tessera:test:h", &val, &len, &err), -EPROTO);
	CHECK_CONTAINS(err.msg, "WRONGTYPE");
	const char *bogus[] = {"NOSUCHCOMMAND"};
	CHECK_INT(redis_command(cli, 1, bogus, NULL, NULL, NULL, &err), -EPROTO);
	/* The connection is still good after an error reply. */
	CHECK_INT(redis_ping(cli, &err), 0);
}

/* Redis restarted: pooled connections are closed; the next command is
 * sent again on a new one, not failed. */
TEST(recovers)
{
	struct terr err = {0};
	CHECK_INT(redis_set(cli, "tessera:test:r", "1", 1, 0, &err), 0);
	stop_server();
	memset(&err, 0, sizeof(err));
	CHECK(redis_ping(cli, &err) < 0);
	CHECK_CONTAINS(err.msg, "Redis at 127.0.0.1:");
	if (!start_server(port, NULL)) {
		FAILF("cannot restart redis-server");
		return;
	}
	/* Within the second after the failed connect the client still says
	 * it is down; then it connects again by itself. */
	int rc = -1;
	for (int i = 0; i < 30 && rc < 0; i++) {
		rc = redis_ping(cli, &err);
		if (rc < 0)
			usleep(100 * 1000);
	}
	CHECK_INT(rc, 0);
	char *val = NULL;
	CHECK_INT(redis_get(cli, "tessera:test:r", &val, NULL, &err), 0);   /* nothing was saved */
	free(val);
}

TEST(ratelimit_in_redis)
{
	struct ratelimit *a = ratelimit_new(3, 60000), *b = ratelimit_new(3, 60000);
	ratelimit_use_redis(a, cli, "test");
	ratelimit_use_redis(b, cli, "test");
	int64_t now = util_mono_ms();
	CHECK_INT(ratelimit_check_pair(a, "x@lab", "addr:1", now), 0);
	ratelimit_fail_pair(a, "x@lab", "addr:1", now);
	ratelimit_fail_pair(b, "x@lab", "addr:1", now);
	CHECK_INT(ratelimit_check_pair(b, "x@lab", "addr:1", now), 0);
	ratelimit_fail_pair(a, "x@lab", "addr:1", now);
	/* Three failures between the two: both refuse, for the window. */
	int64_t w = ratelimit_check_pair(b, "x@lab", "addr:1", now);
	CHECK(w > 50000 && w <= 60000);
	CHECK(ratelimit_check_pair(a, "x@lab", "addr:1", now) > 0);
	CHECK_INT(ratelimit_check_pair(a, "x@lab", "addr:2", now), 0);
	ratelimit_reset_pair(b, "x@lab", "addr:1");
	CHECK_INT(ratelimit_check_pair(a, "x@lab", "addr:1", now), 0);

	/* Redis down: the table counts, so the limit holds. */
	stop_server();
	for (int i = 0; i < 3; i++)
		ratelimit_fail(a, "addr:9", now);
	CHECK(ratelimit_check(a, "addr:9", now) > 0);
	CHECK_INT(ratelimit_check(a, "addr:8", now), 0);
	ratelimit_free(a);
	ratelimit_free(b);
	start_server(port, NULL);
}

TEST(password)
{
	stop_server();
	int p = free_port();
	if (!start_server(p, "pw-of-test")) {
		FAILF("cannot start redis-server with a password");
		return;
	}
	char url[128];
	struct redis_client *c;
	struct terr err = {0};
	snprintf(url, sizeof(url), "redis://:wrong@127.0.0.1:%d/1", p);
	CHECK_INT(redis_open(url, &c, &err), 0);
	CHECK_INT(redis_ping(c, &err), -EACCES);
	CHECK_CONTAINS(err.msg, "AUTH");
	redis_close(c);
	snprintf(url, sizeof(url), "redis://:pw-of-test@127.0.0.1:%d/1", p);
	CHECK_INT(redis_open(url, &c, &err), 0);
	CHECK_INT(redis_set(c, "tessera:test:db1", "1", 1, 0, &err), 0);
	redis_close(c);
	/* Database 1 was selected: database 0 has no such key. */
	snprintf(url, sizeof(url), "redis://:pw-of-test@127.0.0.1:%d", p);
	CHECK_INT(redis_open(url, &c, &err), 0);
	char *val = NULL;
	CHECK_INT(redis_get(c, "tessera:test:db1", &val, NULL, &err), 0);
	free(val);
	redis_close(c);
	stop_server();
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	RUN(urls);
	RUN(down);
	if (system("command -v redis-server >/dev/null 2>&1") != 0 || !mkdtemp(dir)) {
		printf("skip: redis-server is not installed\n");
		return testlib_done();
	}
	port = free_port();
	if (!start_server(port, NULL)) {
		FAILF("cannot start redis-server");
		return testlib_done();
	}
	char url[64];
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/2", port);
	if (redis_open(url, &cli, NULL) == 0) {
		RUN(commands);
		RUN(recovers);
		RUN(ratelimit_in_redis);
		redis_close(cli);
	}
	RUN(password);
	stop_server();
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("could not remove %s\n", dir);
	return testlib_done();
}
