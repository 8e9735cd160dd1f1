#include "runner/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runner/apps.h"
#include "runner/log.h"
#include "runner/relay.h"
#include "runner/terminal.h"

#define SERVER_CONNECT_MS 5000
#define SERVER_BACKLOG 1024

enum sconn_stage { SC_HELLO, SC_CONNECTING };

struct sconn {
	struct rl_watch w;          /* the client */
	struct rl_watch aw;         /* the app's port, while connecting */
	enum sconn_stage stage;
	/* In the list of connections still on their line (SC_HELLO), oldest
	 * first: who goes when a newcomer finds SERVER_MAX_HELLO waiting. */
	struct sconn *prev, *next;
	bool waiting;
	char buf[PROTO_LINE_MAX];
	size_t len;                 /* bytes in buf */
	size_t used;                /* of which the line, once whole */
	const struct app_decl *decl;/* the app asked for, NULL for port:N */
	int port;
};

static struct rl_loop *srv_loop;
static struct rl_watch srv_listen;
static char srv_secret[PROTO_SECRET_LEN + 1];
static bool srv_have_secret;
static struct sconn *srv_wait_head, *srv_wait_tail;   /* on their line, oldest first */
static int srv_nwaiting;
static unsigned long srv_evicted;                     /* closed for newcomers, for the log */
static bool srv_listening;

int server_read_secret(const char *path, char out[PROTO_SECRET_LEN + 1], bool *have, struct terr *err)
{
	*have = false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return terr_set(err, errno, "cannot read %s: %s", path, strerror(errno));
	char buf[256];
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0)
		return terr_set(err, errno, "cannot read %s: %s", path, strerror(errno));
	int rc = proto_parse_secret(buf, (size_t)n, out, err);
	/* Not kept on the stack for a core dump to find. */
	explicit_bzero(buf, sizeof(buf));
	if (rc < 0)
		return terr_prefix(err, "%s", path);
	*have = true;
	return 0;
}

/* The line is said (or the connection goes): it no longer waits. */
static void sconn_unwait(struct sconn *c)
{
	if (!c->waiting)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		srv_wait_head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		srv_wait_tail = c->prev;
	c->prev = c->next = NULL;
	c->waiting = false;
	srv_nwaiting--;
}

static void sconn_wait(struct sconn *c)
{
	c->prev = srv_wait_tail;
	c->next = NULL;
	if (srv_wait_tail)
		srv_wait_tail->next = c;
	else
		srv_wait_head = c;
	srv_wait_tail = c;
	c->waiting = true;
	srv_nwaiting++;
}

static void sconn_free(struct sconn *c, bool close_client)
{
	sconn_unwait(c);
	rl_del(srv_loop, &c->w);
	rl_del(srv_loop, &c->aw);
	if (c->aw.fd >= 0)
		close(c->aw.fd);
	if (close_client)
		close(c->w.fd);
	free(c);
}

static void sconn_cb(struct rl_watch *w, short revents);

/* Closes the connection that has waited longest on its line, for a
 * newcomer: no answer (it has proved nothing, and the runner spends
 * nothing more on it). Bytes that already came on it are read first, as
 * they may finish its line: a client that said its line at once (the
 * proxy) is never taken for an idle one only because the loop had not
 * read it yet; one that is still short of a line after them goes. false
 * when none waits. */
static bool sconn_evict_oldest(void)
{
	struct sconn *c;
	for (;;) {
		if (!(c = srv_wait_head))
			return false;
		int pending = 0;
		if (ioctl(c->w.fd, FIONREAD, &pending) < 0 || pending <= 0)
			break;
		sconn_cb(&c->w, POLLIN);
		/* Still the head: still waiting, short of a line. Otherwise it
		 * said its line (or went), and the next oldest is looked at;
		 * nothing joins the list at its head meanwhile. */
		if (srv_wait_head == c)
			break;
	}
	sconn_free(c, true);
	/* Once per power of two: a flood says so in the session's log
	 * without filling it. */
	srv_evicted++;
	if ((srv_evicted & (srv_evicted - 1)) == 0)
		runner_log("tessera-runner: app port: %lu connections closed so far for not saying their "
			   "first line before newer ones (a flood of slow connections?)", srv_evicted);
	return true;
}

/* Answers one line (STARTING or ERROR) and ends the connection. A fresh
 * socket's send buffer takes a line: no waiting to write it. */
static void sconn_answer(struct sconn *c, const char *word, const char *text)
{
	char line[PROTO_LINE_MAX];
	int n = snprintf(line, sizeof(line), "%s %.*s\r\n", word, (int)(sizeof(line) - strlen(word) - 4), text);
	/* A message may quote what the peer sent: no control bytes may break the line. */
	for (int i = 0; i < n - 2; i++)
		if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			line[i] = '?';
	ssize_t w = send(c->w.fd, line, (size_t)n, MSG_NOSIGNAL);
	(void)w;
	relay_linger(srv_loop, c->w.fd);
	sconn_free(c, false);
}

/* The app's port took the connection: OK, and relay. */
static void sconn_connected(struct sconn *c)
{
	int afd = c->aw.fd, cfd = c->w.fd;
	c->aw.fd = -1;
	if (c->decl)
		apps_reached(c->decl);
	const char *early = c->buf + c->used;
	size_t n = c->len - c->used;
	char copy[PROTO_LINE_MAX];
	memcpy(copy, early, n);
	sconn_free(c, false);
	struct terr err = {0};
	if (relay_start(srv_loop, cfd, afd, "OK\r\n", 4, copy, n, &err) < 0)
		runner_log("tessera-runner: app connection dropped: %s", err.msg);
}

/* The app's port refused: why, and what happens now. */
static void sconn_refused(struct sconn *c)
{
	char msg[PROTO_LINE_MAX - 16];
	if (!c->decl) {
		snprintf(msg, sizeof(msg), "nothing listens on port %d yet: start your server there, "
			 "e.g. mlflow ui --host 0.0.0.0 --port %d", c->port, c->port);
		sconn_answer(c, "STARTING", msg);
		return;
	}
	int rc = apps_want(c->decl, msg, sizeof(msg));
	sconn_answer(c, rc < 0 ? "ERROR" : "STARTING", msg);
}

static void sconn_app_cb(struct rl_watch *w, short revents)
{
	struct sconn *c = w->data;
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	if (!revents || getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
		sconn_refused(c);
		return;
	}
	sconn_connected(c);
}

static void sconn_connect(struct sconn *c, int port)
{
	c->port = port;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		sconn_answer(c, "ERROR", "the runner cannot open a socket");
		return;
	}
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c->aw.fd = fd;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		sconn_connected(c);
		return;
	}
	if (errno != EINPROGRESS) {
		sconn_refused(c);
		return;
	}
	c->stage = SC_CONNECTING;
	c->w.events = 0;
	c->w.deadline = 0;
	c->aw.events = POLLOUT;
	c->aw.deadline = rl_now_ms() + SERVER_CONNECT_MS;
	if (rl_add(srv_loop, &c->aw) < 0)
		sconn_answer(c, "ERROR", "the runner has too many connections");
}

static void sconn_apps_list(char *out, size_t n)
{
	size_t k = (size_t)snprintf(out, n, "terminal");
	for (int i = 0; i < APP_MAX && k < n; i++) {
		const struct app_decl *d = apps_nth(i);
		if (!d)
			break;
		k += (size_t)snprintf(out + k, n - k, ", %s", d->name);
	}
}

/* The line is whole: check it and go where it says. */
static void sconn_hello(struct sconn *c, size_t line_len)
{
	struct apphello h;
	struct terr err = {0};
	/* Said: whatever comes of it, the connection no longer waits to. */
	sconn_unwait(c);
	if (!srv_have_secret) {
		sconn_answer(c, "ERROR", "apps are not enabled for this session");
		return;
	}
	if (apphello_parse(c->buf, line_len, &h, &err) < 0) {
		sconn_answer(c, "ERROR", err.msg);
		return;
	}
	bool good = proto_secret_equal(h.secret, srv_secret);
	explicit_bzero(h.secret, sizeof(h.secret));
	explicit_bzero(c->buf, line_len);
	if (!good) {
		sconn_answer(c, "ERROR", "wrong secret for this session");
		return;
	}
	if (h.is_port) {
		sconn_connect(c, h.port);
		return;
	}
	if (!strcmp(h.app, "terminal")) {
		int fd = c->w.fd;
		char early[PROTO_LINE_MAX];
		size_t n = c->len - c->used;
		memcpy(early, c->buf + c->used, n);
		sconn_free(c, false);
		ssize_t w = send(fd, "OK\r\n", 4, MSG_NOSIGNAL);
		if (w != 4) {
			close(fd);
			return;
		}
		term_accept(fd, early, n, rl_now_ms() + SERVER_TERM_HEAD_MS);
		return;
	}
	c->decl = apps_find(h.app);
	if (!c->decl) {
		char list[512], msg[700];
		sconn_apps_list(list, sizeof(list));
		snprintf(msg, sizeof(msg), "this session has no app %s (its apps: %s)", h.app, list);
		sconn_answer(c, "ERROR", msg);
		return;
	}
	sconn_connect(c, c->decl->port);
}

static void sconn_cb(struct rl_watch *w, short revents)
{
	struct sconn *c = w->data;
	/* Read ahead of its turn (sconn_evict_oldest) and past its line
	 * since: what else this round's poll saw for it is not for here. */
	if (c->stage != SC_HELLO)
		return;
	if (!revents) {
		char msg[64];
		snprintf(msg, sizeof(msg), "no TESSERA-APP/1 line within %d s", SERVER_HELLO_MS / 1000);
		sconn_answer(c, "ERROR", msg);
		return;
	}
	ssize_t n = read(w->fd, c->buf + c->len, sizeof(c->buf) - c->len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		sconn_free(c, true);
		return;
	}
	c->len += (size_t)n;
	size_t line_len;
	int rc = proto_find_line(c->buf, c->len, &line_len, &c->used);
	if (rc < 0)
		sconn_answer(c, "ERROR", "the first line is over 1024 bytes");
	else if (rc > 0)
		sconn_hello(c, line_len);
}

/* New connections are always taken: when SERVER_MAX_HELLO already wait
 * on their line (or the loop or the descriptors are full), the one that
 * has waited longest is closed for the newcomer. Refusing newcomers
 * instead, as the runner once did, let 600 slow connections keep the
 * proxy's out (its app answered 502). */
static void server_accept_cb(struct rl_watch *w, short revents)
{
	(void)revents;
	for (int k = 0; k < 64; k++) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) &&
		    sconn_evict_oldest())
			continue;   /* a descriptor is free again: try anew */
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				runner_log("tessera-runner: app port: accept: %s", strerror(errno));
			return;
		}
		while (srv_nwaiting >= SERVER_MAX_HELLO && sconn_evict_oldest())
			;
		struct sconn *c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		rl_init(&c->w, fd, sconn_cb, c);
		rl_init(&c->aw, -1, sconn_app_cb, c);
		c->w.events = POLLIN;
		/* From the accept, not from the last byte: a line said one byte
		 * at a time gets no more time than one never said. */
		c->w.deadline = rl_now_ms() + SERVER_HELLO_MS;
		sconn_wait(c);
		/* A full loop is full of what has said its line (the waiting
		 * ones are at most SERVER_MAX_HELLO of its RL_MAX_WATCHES), and
		 * slots freed now come back only next round: the newcomer goes. */
		if (rl_add(srv_loop, &c->w) < 0)
			sconn_free(c, true);
	}
}

static int server_listen(int family, int port, struct terr *err)
{
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return terr_set(err, errno, "socket: %s", strerror(errno));
	int one = 1, zero = 0;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	int rc;
	if (family == AF_INET6) {
		/* Both families on the one socket. */
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
					   .sin6_addr = IN6ADDR_ANY_INIT };
		rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	} else {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
		rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	}
	/* A deep queue: the loop takes 64 a round, and a burst of a flood
	 * must not make the kernel drop the proxy's connection before the
	 * runner sees it. */
	if (rc < 0 || listen(fd, SERVER_BACKLOG) < 0) {
		rc = terr_set(err, errno, "cannot listen on port %d: %s", port, strerror(errno));
		close(fd);
		return rc;
	}
	return fd;
}

int server_start(struct rl_loop *l, int port, const char *secret, struct terr *err)
{
	srv_loop = l;
	srv_have_secret = secret != NULL;
	if (secret)
		memcpy(srv_secret, secret, sizeof(srv_secret));
	struct terr e6 = {0};
	int fd = server_listen(AF_INET6, port, &e6);
	if (fd < 0)
		fd = server_listen(AF_INET, port, err);
	if (fd < 0)
		return fd;
	rl_init(&srv_listen, fd, server_accept_cb, NULL);
	srv_listen.events = POLLIN;
	int rc = rl_add(l, &srv_listen);
	if (rc < 0) {
		close(fd);
		return terr_set(err, -rc, "the runner's loop is full");
	}
	srv_listening = true;
	return 0;
}

void server_stop(void)
{
	if (!srv_listening)
		return;
	srv_listening = false;
	rl_del(srv_loop, &srv_listen);
	close(srv_listen.fd);
}
