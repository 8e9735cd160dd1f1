/* The runner's app port (src/runner/server.c) in this process, its loop
 * turned here between steps: a connection that has not said its line
 * within SERVER_HELLO_MS is answered and closed however slowly it drips;
 * past SERVER_MAX_HELLO connections waiting on their line, a newcomer
 * closes the one that has waited longest (not itself), so a flood of idle
 * connections never keeps the proxy's connection out; and a connection
 * past its line (relayed to the app) is never closed for newcomers.
 * Waits are bounded polls for an outcome, never assertions on time. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "runner/loop.h"
#include "runner/server.h"
#include "testlib.h"

#define SECRET "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define FLOOD (SERVER_MAX_HELLO + 44)

static struct rl_loop loop;
static int runner_port;

static int64_t now_ms(void)
{
	return rl_now_ms();
}

/* Turns the runner's loop for about ms (rounds of at most 10 ms). */
static void turn(int ms)
{
	int64_t until = now_ms() + ms;
	do
		rl_run_once(&loop, 10);
	while (now_ms() < until);
}

static int listen_any(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		FAILF("listen: %s", strerror(errno));
		return -1;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

/* A client of the runner's port, non-blocking once connected. */
static int dial(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)runner_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		FAILF("connect: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

/* 1: the runner closed fd (EOF or reset, whatever it said first, which
 * goes to buf when given); 0: still open with nothing more to read. */
static int closed(int fd, char *buf, size_t n)
{
	size_t k = 0;
	for (;;) {
		char tmp[512];
		ssize_t r = recv(fd, tmp, sizeof(tmp), 0);
		if (r > 0) {
			if (buf && k + 1 < n) {
				size_t c = (size_t)r < n - 1 - k ? (size_t)r : n - 1 - k;
				memcpy(buf + k, tmp, c);
				k += c;
				buf[k] = '\0';
			}
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EINTR))
			return 1;
		return 0;
	}
}

/* Reads from fd (turning the loop) until buf holds want or the peer
 * closes or about 30 s pass. */
static bool read_until(int fd, char *buf, size_t n, const char *want)
{
	size_t k = strlen(buf);
	for (int64_t end = now_ms() + 30000; now_ms() < end;) {
		turn(5);
		ssize_t r = recv(fd, buf + k, n - 1 - k, 0);
		if (r > 0) {
			k += (size_t)r;
			buf[k] = '\0';
			if (strstr(buf, want))
				return true;
		} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
			return strstr(buf, want) != NULL;
		}
	}
	return false;
}

static int accept_app(int lfd)
{
	for (int64_t end = now_ms() + 30000; now_ms() < end;) {
		turn(5);
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0)
			return fd;
	}
	return -1;
}

/* FLOOD idle connections, in order: 32 at a time, each batch taken by
 * the runner before the next comes (the kernel's queue never holds more
 * than 32), so the first is the oldest. */
static int open_flood(int *fds)
{
	for (int i = 0; i < FLOOD; i++) {
		if ((fds[i] = dial()) < 0)
			return -1;
		if (i % 32 == 31 || i == FLOOD - 1)
			turn(30);
	}
	turn(100);
	return 0;
}

/* A line said one byte at a time gets no more time than one never said:
 * it is answered that no line came, and closed. */
TEST(hello_deadline_from_the_accept)
{
	int fd = dial();
	if (fd < 0)
		return;
	const char *slow = "TESSERA-APP/1 " SECRET;
	char buf[512] = "";
	bool ended = false;
	for (size_t i = 0; !ended && i < strlen(slow); i++) {
		if (send(fd, slow + i, 1, MSG_NOSIGNAL) != 1)
			break;
		turn(400);
		ended = closed(fd, buf, sizeof(buf));
	}
	CHECK(ended || read_until(fd, buf, sizeof(buf), "\n"));
	CHECK_CONTAINS(buf, "ERROR no TESSERA-APP/1 line within");
	close(fd);
}

TEST(a_flood_pushes_out_its_own)
{
	int app_port, app_l = listen_any(&app_port);
	if (app_l < 0)
		return;
	static int flood[FLOOD];
	if (open_flood(flood) < 0)
		return;
	int open_old = 0, closed_new = 0;
	for (int i = 0; i < FLOOD; i++) {
		int c = closed(flood[i], NULL, 0);
		if (i < FLOOD - SERVER_MAX_HELLO)
			open_old += !c;
		else
			closed_new += c;
	}
	/* The 44 oldest went for the newest, who all wait. */
	CHECK_INT(open_old, 0);
	CHECK_INT(closed_new, 0);

	/* The proxy's connection, while the flood holds every place: served. */
	int fd = dial();
	if (fd < 0)
		return;
	char line[256];
	snprintf(line, sizeof(line), "TESSERA-APP/1 %s port:%d\r\n", SECRET, app_port);
	CHECK(send(fd, line, strlen(line), MSG_NOSIGNAL) == (ssize_t)strlen(line));
	int app = accept_app(app_l);
	CHECK(app >= 0);
	char buf[512] = "";
	CHECK(read_until(fd, buf, sizeof(buf), "OK\r\n"));
	CHECK_STR(buf, "OK\r\n");
	if (app < 0) {
		close(fd);
		return;
	}
	CHECK(send(app, "hello\n", 6, MSG_NOSIGNAL) == 6);
	buf[0] = '\0';
	CHECK(read_until(fd, buf, sizeof(buf), "hello\n"));

	/* Once relayed it no longer waits on a line: a second flood as
	 * large closes only the waiting ones, never it. */
	static int flood2[FLOOD];
	if (open_flood(flood2) < 0)
		return;
	CHECK(!closed(fd, NULL, 0));
	CHECK(send(fd, "ping\n", 5, MSG_NOSIGNAL) == 5);
	char got[64] = "";
	CHECK(read_until(app, got, sizeof(got), "ping\n"));
	CHECK(send(app, "pong\n", 5, MSG_NOSIGNAL) == 5);
	buf[0] = '\0';
	CHECK(read_until(fd, buf, sizeof(buf), "pong\n"));
	for (int i = 0; i < FLOOD; i++) {
		close(flood[i]);
		close(flood2[i]);
	}
	close(fd);
	close(app);
	close(app_l);
}

int main(void)
{
	/* The floods hold some 900 descriptors here and in the runner. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* A free port for the runner: bound, noted, let go. */
	int probe = listen_any(&runner_port);
	if (probe < 0)
		return testlib_done();
	close(probe);
	struct terr err = {0};
	if (server_start(&loop, runner_port, SECRET, &err) < 0) {
		fprintf(stderr, "server_start: %s\n", err.msg);
		return 1;
	}
	RUN(hello_deadline_from_the_accept);
	RUN(a_flood_pushes_out_its_own);
	server_stop();
	return testlib_done();
}
