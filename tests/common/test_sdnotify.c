/* sdnotify: what a daemon tells systemd arrives on NOTIFY_SOCKET as
 * systemd expects it, nothing is sent without the variable, and the
 * watchdog is pinged only when the unit has one (WATCHDOG_USEC for this
 * very process). The test is systemd's side: a unix datagram socket. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/sdnotify.h"
#include "testlib.h"

static int sock = -1;
static char path[108];

static void listen_at(void)
{
	snprintf(path, sizeof(path), "/tmp/tessera-sdnotify-%ld.sock", (long)getpid());
	unlink(path);
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (sock < 0 || bind(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("bind");
		exit(1);
	}
}

/* The next datagram, or "" when none is waiting. */
static const char *next_msg(void)
{
	static char buf[1024];
	ssize_t n = recv(sock, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

TEST(nothing_without_notify_socket)
{
	unsetenv("NOTIFY_SOCKET");
	sdnotify_ready("ignored");
	sdnotify_status("ignored %d", 1);
	sdnotify_stopping("ignored");
	CHECK_STR(next_msg(), "");
}

TEST(ready_status_stopping)
{
	setenv("NOTIFY_SOCKET", path, 1);
	sdnotify_ready("serving the API on 127.0.0.1:8090");
	CHECK_STR(next_msg(), "READY=1\nSTATUS=serving the API on 127.0.0.1:8090");
	sdnotify_ready(NULL);
	CHECK_STR(next_msg(), "READY=1");
	sdnotify_status("%d sessions", 3);
	CHECK_STR(next_msg(), "STATUS=3 sessions");
	sdnotify_stopping("stopping");
	CHECK_STR(next_msg(), "STOPPING=1\nSTATUS=stopping");
	CHECK_STR(next_msg(), "");
}

TEST(a_socket_nobody_listens_on_is_harmless)
{
	setenv("NOTIFY_SOCKET", "/tmp/tessera-sdnotify-nobody/none.sock", 1);
	sdnotify_ready("x");
	sdnotify_watchdog();
	CHECK_INT(sdnotify_loop_ms(1000), 1000);
}

TEST(watchdog_only_when_the_unit_has_one)
{
	setenv("NOTIFY_SOCKET", path, 1);
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	CHECK_INT(sdnotify_watchdog_ms(), 0);
	CHECK_INT(sdnotify_loop_ms(1000), 1000);
	sdnotify_watchdog();
	CHECK_STR(next_msg(), "");

	char pid[32];
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	setenv("WATCHDOG_USEC", "600000", 1);
	setenv("WATCHDOG_PID", pid, 1);
	CHECK_INT(sdnotify_watchdog_ms(), 600);
	/* Pinged at half the period when that is shorter than the loop's. */
	CHECK_INT(sdnotify_loop_ms(1000), 300);
	CHECK_INT(sdnotify_loop_ms(200), 200);
	sdnotify_watchdog();
	CHECK_STR(next_msg(), "WATCHDOG=1");

	/* Another process's watchdog (a child that inherited the
	 * environment) is not ours to ping. */
	setenv("WATCHDOG_PID", "1", 1);
	CHECK_INT(sdnotify_watchdog_ms(), 0);
	sdnotify_watchdog();
	CHECK_STR(next_msg(), "");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}

int main(void)
{
	listen_at();
	RUN(nothing_without_notify_socket);
	RUN(ready_status_stopping);
	RUN(a_socket_nobody_listens_on_is_harmless);
	RUN(watchdog_only_when_the_unit_has_one);
	close(sock);
	unlink(path);
	return testlib_done();
}
