/* A real etcd (Debian's etcd-server) for a unit test: started on free
 * ports with its data in a temporary directory, stopped and removed by
 * testetcd_stop. Header-only, like testlib.h. */
#ifndef TESSERA_TESTETCD_H
#define TESSERA_TESTETCD_H

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/etcd.h"

struct testetcd {
	char dir[64];
	char endpoint[64];
	int client_port, peer_port;
	pid_t pid;
};

static int testetcd_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return ntohs(a.sin_port);
}

/* Starts etcd (again, on the same ports and data, when t->pid was
 * stopped with testetcd_kill) and waits until it answers; 0 or -1. */
static int testetcd_run(struct testetcd *t)
{
	char client[64], peer[64], data[96], log[96], cluster[96];
	snprintf(client, sizeof(client), "http://127.0.0.1:%d", t->client_port);
	snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", t->peer_port);
	snprintf(cluster, sizeof(cluster), "test=%s", peer);
	snprintf(data, sizeof(data), "%s/data", t->dir);
	snprintf(log, sizeof(log), "%s/etcd.log", t->dir);
	/* Set once: threads of the test read it while etcd restarts. */
	if (!t->endpoint[0])
		snprintf(t->endpoint, sizeof(t->endpoint), "%s", client);
	t->pid = fork();
	if (t->pid < 0)
		return -1;
	if (t->pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execlp("etcd", "etcd", "--name", "test", "--data-dir", data, "--listen-client-urls", client,
		       "--advertise-client-urls", client, "--listen-peer-urls", peer,
		       "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster, (char *)NULL);
		_exit(127);
	}
	return 0;
}

static int testetcd_wait(struct testetcd *t)
{
	for (int i = 0; i < 300; i++) {   /* up to 30 s on a busy machine */
		struct etcd_kv *kvs;
		size_t n;
		struct terr err = {0};
		if (etcd_range(t->endpoint, "probe", false, &kvs, &n, NULL, &err) == 0) {
			etcd_kvs_free(kvs, n);
			return 0;
		}
		int st;
		if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
			fprintf(stderr, "etcd exited; see %s/etcd.log\n", t->dir);
			t->pid = 0;
			return -1;
		}
		struct timespec ts = {0, 100000000L};
		nanosleep(&ts, NULL);
	}
	return -1;
}

/* Stops etcd, keeping its data (testetcd_start_again starts it again). */
static void testetcd_kill(struct testetcd *t)
{
	if (t->pid > 0) {
		kill(t->pid, SIGTERM);
		waitpid(t->pid, NULL, 0);
		t->pid = 0;
	}
}

static int testetcd_start_again(struct testetcd *t)
{
	return testetcd_run(t) < 0 ? -1 : testetcd_wait(t);
}

static int testetcd_start(struct testetcd *t)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->dir, sizeof(t->dir), "/tmp/tessera-etcd-XXXXXX");
	if (!mkdtemp(t->dir))
		return -1;
	t->client_port = testetcd_free_port();
	t->peer_port = testetcd_free_port();
	if (t->client_port <= 0 || t->peer_port <= 0 || t->client_port == t->peer_port)
		return -1;
	return testetcd_start_again(t);
}

static void testetcd_stop(struct testetcd *t)
{
	testetcd_kill(t);
	if (t->dir[0]) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", t->dir);
	}
}

#endif
