/* build/bench/proxy-idle: the app proxy's memory per idle WebSocket
 * (bench/apps-proxy.sh runs it; docs/architecture.md, "Performance").
 *
 * The proxy (src/proxy, the code of `tessera wsproxy`) runs in this
 * process with one route injected (no manager), its per-address cap
 * raised so that one client address may open them all. A child process
 * is both the browsers and a stand-in runner: for each connection it
 * connects to the proxy, sends a WebSocket upgrade with the route's
 * cookie, accepts the proxy's connection on its own port, answers the
 * TESSERA-APP/1 line with OK and the upgrade with 101, and reads the 101
 * through the proxy. The connections then stay open and idle. A session's
 * real runner cannot be the far end here: its poll loop holds at most
 * 1024 descriptors, so one session takes about 500 relayed connections.
 *
 * Measured: this process's resident memory (VmRSS) once the proxy serves
 * one connection, and again with N connections open; the difference over
 * N is the proxy's user-space memory per idle upgraded connection (both
 * of its sockets). The kernel's socket memory is printed beside it from
 * /proc/net/sockstat (TCP pages, all sockets of the machine: the client's,
 * the stand-in's and the proxy's).
 *
 *   proxy-idle [N]      (default 10000; fewer when the open files limit
 *                        allows fewer: it prints how many)
 *
 * Prints "key value" lines for the script to read. Exit 1 when it could
 * not set up or a connection failed. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/err.h"
#include "proxy/appcookie.h"
#include "proxy/proxy.h"

#define SECRET "bench-proxy-idle-cluster-secret-0123456789"
#define APP_SECRET "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			v = atol(line + 6);
	if (f)
		fclose(f);
	return v;
}

static long tcp_mem_pages(void)
{
	FILE *f = fopen("/proc/net/sockstat", "r");
	char line[256];
	long v = -1;
	while (f && fgets(line, sizeof(line), f)) {
		char *m = strstr(line, " mem ");
		if (!strncmp(line, "TCP:", 4) && m)
			v = atol(m + 5);
	}
	if (f)
		fclose(f);
	return v;
}

static int listen_any(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 4096) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0)
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

static int free_port(void)
{
	int port = 0, fd = listen_any(&port);
	if (fd >= 0)
		close(fd);
	return fd >= 0 ? port : -1;
}

/* Reads from fd until `end` has been seen; 0, or -1 on EOF/error. Reads
 * whole chunks: nothing follows what is awaited here until it is answered
 * (the proxy sends its request only after OK). */
static int read_until(int fd, const char *end, char *buf, size_t n)
{
	size_t got = 0;
	buf[0] = 0;
	while (got + 1 < n) {
		ssize_t r = read(fd, buf + got, n - 1 - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
		buf[got] = 0;
		if (strstr(buf, end))
			return 0;
	}
	return -1;
}

static int write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w <= 0)
			return -1;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The browsers, in a child: open n upgraded connections one after the
 * other, then wait to be killed. Tell the parent how many through `out`. */
static void browsers(int proxy_port, const char *cookie, int n, int out)
{
	char req[4096], buf[8192];
	int len = snprintf(req, sizeof(req),
			   "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
			   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
			   "Cookie: tessera_app_%d=%s\r\n\r\n",
			   proxy_port, proxy_port, cookie);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)proxy_port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int done = 0;
	for (; done < n; done++) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0 || write_all(c, req, (size_t)len) < 0) {
			fprintf(stderr, "proxy-idle: connection %d to the proxy: %s\n", done + 1, strerror(errno));
			break;
		}
		if (read_until(c, "\r\n\r\n", buf, sizeof(buf)) < 0 || strncmp(buf, "HTTP/1.1 101", 12)) {
			fprintf(stderr, "proxy-idle: connection %d: no 101 through the proxy: %.200s\n", done + 1, buf);
			break;
		}
	}
	if (write(out, &done, sizeof(done)) != sizeof(done))
		_exit(1);
	pause();
	_exit(0);
}

/* The stand-in runner, in another child (each child holds one descriptor
 * per connection: the machine's open files limit may allow no more):
 * answers the line with OK and the upgrade with 101, and keeps the
 * connections. */
static void standin_runner(int standin, int n)
{
	char buf[8192];
	const char *ok101 = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
			    "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
	for (int i = 0; i < n; i++) {
		int r = accept(standin, NULL, NULL);
		if (r < 0 || read_until(r, "\n", buf, sizeof(buf)) < 0 ||
		    strncmp(buf, "TESSERA-APP/1 " APP_SECRET " app:ws", 14 + 64 + 7) ||
		    write_all(r, "OK\r\n", 4) < 0 || read_until(r, "\r\n\r\n", buf, sizeof(buf)) < 0 ||
		    write_all(r, ok101, strlen(ok101)) < 0) {
			fprintf(stderr, "proxy-idle: connection %d: the proxy's side failed\n", i + 1);
			break;
		}
	}
	pause();
	_exit(0);
}

/* Opens n connections; returns how many were upgraded. *kids: the two
 * children, for the caller to kill. */
static int open_conns(int pport, int standin, const char *cookie, int n, pid_t kids[2])
{
	int pipefd[2], got = 0;
	if (pipe(pipefd) < 0)
		return 0;
	kids[0] = fork();
	if (kids[0] == 0)
		standin_runner(standin, n);
	kids[1] = fork();
	if (kids[1] == 0)
		browsers(pport, cookie, n, pipefd[1]);
	if (read(pipefd[0], &got, sizeof(got)) != sizeof(got))
		got = 0;
	close(pipefd[0]);
	close(pipefd[1]);
	return got;
}

static void kill_kids(pid_t kids[2])
{
	for (int i = 0; i < 2; i++)
		if (kids[i] > 0) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
		}
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000;
	if (n < 1 || n > 1000000) {
		fprintf(stderr, "usage: proxy-idle [CONNECTIONS 1-1000000]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	/* The proxy holds two descriptors per connection; each child one.
	 * Raise the soft limit to the hard one (raising the hard one needs
	 * CAP_SYS_RESOURCE); fewer connections than asked when it is short. */
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	getrlimit(RLIMIT_NOFILE, &rl);
	int asked = n;
	/* What the proxy allows itself (proxy_start): (limit - 128) / 2. */
	if ((rlim_t)n * 2 + 128 > rl.rlim_cur)
		n = (int)((rl.rlim_cur - 128) / 2);
	printf("asked %d\n", asked);
	printf("open_files_limit %lu\n", (unsigned long)rl.rlim_cur);
	int sport = 0, standin = listen_any(&sport);
	int pport = free_port();
	if (standin < 0 || pport < 0) {
		fprintf(stderr, "proxy-idle: no free port\n");
		return 1;
	}
	struct proxy_config cfg = {.cluster_secret = SECRET, .bind = "127.0.0.1", .port_lo = pport, .port_hi = pport,
				   .max_conns = (unsigned)n + 16, .per_addr_limit = (unsigned)n + 16};
	struct proxy *p = NULL;
	struct terr err = {0};
	if (proxy_start(&cfg, &p, &err) < 0) {
		fprintf(stderr, "proxy-idle: %s\n", err.msg);
		return 1;
	}
	char ep[64];
	snprintf(ep, sizeof(ep), "127.0.0.1:%d", sport);
	json_t *doc = json_pack("{s:i, s:[{s:s, s:s, s:s, s:s, s:s, s:i}]}", "generation", 1, "routes", "session_id",
				"bench", "app", "ws", "target", "app:ws", "endpoint", ep, "secret", APP_SECRET, "port",
				pport);
	if (proxy_set_routes(p, doc, &err) < 0) {
		fprintf(stderr, "proxy-idle: %s\n", err.msg);
		return 1;
	}
	json_decref(doc);
	struct appcookie c = {.expires = time(NULL) + 3600};
	strcpy(c.user, "bench");
	strcpy(c.session_id, "bench");
	strcpy(c.target, "app:ws");
	snprintf(c.route, sizeof(c.route), "%d", pport);
	char cookie[APPCOOKIE_MAX];
	if (appcookie_sign(SECRET, &c, cookie, sizeof(cookie), &err) < 0) {
		fprintf(stderr, "proxy-idle: %s\n", err.msg);
		return 1;
	}

	/* One connection first, so that what serving costs once (the loop's
	 * first allocations, the route's first use) is in the baseline. */
	pid_t kids[2] = {0, 0};
	if (open_conns(pport, standin, cookie, 1, kids) != 1) {
		fprintf(stderr, "proxy-idle: the first connection failed\n");
		kill_kids(kids);
		return 1;
	}
	kill_kids(kids);
	struct proxy_stats st;
	for (int i = 0; i < 500; i++) {  /* until the proxy saw it close */
		proxy_get_stats(p, &st);
		if (st.conns == 0)
			break;
		usleep(10000);
	}
	usleep(200000);
	long rss0 = rss_kib(), mem0 = tcp_mem_pages();

	int got = open_conns(pport, standin, cookie, n, kids);
	usleep(500000);  /* idle */
	proxy_get_stats(p, &st);
	long rss1 = rss_kib(), mem1 = tcp_mem_pages();
	long page = sysconf(_SC_PAGESIZE);
	printf("connections %d\n", got);
	printf("proxy_conns %zu\n", st.conns);
	printf("rss_before_kib %ld\n", rss0);
	printf("rss_after_kib %ld\n", rss1);
	if (got > 0)
		printf("bytes_per_conn %.0f\n", (double)(rss1 - rss0) * 1024.0 / got);
	if (got > 0 && mem0 >= 0 && mem1 >= 0)
		printf("kernel_tcp_bytes_per_conn_all_sockets %.0f\n", (double)(mem1 - mem0) * page / got);
	kill_kids(kids);
	proxy_stop(p);
	return got == n ? 0 : 1;
}
