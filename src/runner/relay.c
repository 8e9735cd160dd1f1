#include "runner/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A direction's bytes: data[] holds what was given at the start (the OK
 * line, the bytes after the client's line), then every byte read when
 * the direction has no pipe. With a pipe (the usual case) the bytes go
 * socket -> pipe -> socket by splice(2), never copied to user space:
 * nothing after the line is looked at. */
struct relay_dir {
	char data[RELAY_BUF];
	size_t off, len;
	int pipe[2];     /* -1: none (pipe2 failed: the copy path) */
	size_t plen;     /* bytes in the pipe */
	size_t pcap;     /* the pipe's capacity */
	bool eof;        /* the source ended: shut the sink's write side once drained */
	bool shut;       /* done that */
};

struct relay_side {
	struct rl_watch w;
	struct relay *r;
	struct relay_dir *in;    /* bytes read from this side */
	struct relay_dir *out;   /* bytes to write to this side */
};

struct relay {
	struct rl_loop *loop;
	struct relay_side a, b;
	struct relay_dir a2b, b2a;
};

static int relay_n;

int relay_count(void)
{
	return relay_n;
}

static void dir_close(struct relay_dir *d)
{
	for (int i = 0; i < 2; i++)
		if (d->pipe[i] >= 0)
			close(d->pipe[i]);
}

static void relay_end(struct relay *r)
{
	rl_del(r->loop, &r->a.w);
	rl_del(r->loop, &r->b.w);
	close(r->a.w.fd);
	close(r->b.w.fd);
	dir_close(&r->a2b);
	dir_close(&r->b2a);
	free(r);
	relay_n--;
}

static bool dir_room(const struct relay_dir *d)
{
	return d->pipe[0] >= 0 ? d->plen < d->pcap : d->len < RELAY_BUF;
}

static void relay_wishes(struct relay_side *s)
{
	short ev = 0;
	if (!s->in->eof && dir_room(s->in))
		ev |= POLLIN;
	if (s->out->len || s->out->plen)
		ev |= POLLOUT;
	s->w.events = ev;
}

/* Returns false when the side failed (the relay must end). */
static bool relay_flush(struct relay_side *s)
{
	struct relay_dir *d = s->out;
	while (d->len) {
		ssize_t w = send(s->w.fd, d->data + d->off, d->len, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK;
		}
		d->off += (size_t)w;
		d->len -= (size_t)w;
	}
	d->off = 0;
	while (d->plen) {
		ssize_t w = splice(d->pipe[0], NULL, s->w.fd, NULL, d->plen, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK;
		}
		d->plen -= (size_t)w;
	}
	if (d->eof && !d->shut) {
		d->shut = true;
		shutdown(s->w.fd, SHUT_WR);
	}
	return true;
}

static bool relay_fill(struct relay_side *s)
{
	struct relay_dir *d = s->in;
	if (d->pipe[0] >= 0) {
		if (d->eof || d->plen >= d->pcap)
			return true;
		ssize_t n = splice(s->w.fd, NULL, d->pipe[1], NULL, d->pcap - d->plen, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
		if (n == 0)
			d->eof = true;
		d->plen += (size_t)n;
		return true;
	}
	if (d->off && d->off + d->len == RELAY_BUF) {
		memmove(d->data, d->data + d->off, d->len);
		d->off = 0;
	}
	size_t room = RELAY_BUF - d->off - d->len;
	if (!room || d->eof)
		return true;
	ssize_t n = read(s->w.fd, d->data + d->off + d->len, room);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
	if (n == 0)
		d->eof = true;
	d->len += (size_t)n;
	return true;
}

static void relay_cb(struct rl_watch *w, short revents)
{
	struct relay_side *s = w->data;
	struct relay *r = s->r;
	struct relay_side *other = s == &r->a ? &r->b : &r->a;
	if (revents & (POLLIN | POLLHUP | POLLERR))
		if (!relay_fill(s)) {
			relay_end(r);
			return;
		}
	/* An error on a side we only write to shows as POLLERR too. */
	if ((revents & POLLERR) && !(revents & POLLIN) && s->out->len) {
		relay_end(r);
		return;
	}
	if (!relay_flush(s) || !relay_flush(other)) {
		relay_end(r);
		return;
	}
	if (r->a2b.shut && r->b2a.shut) {
		relay_end(r);
		return;
	}
	relay_wishes(&r->a);
	relay_wishes(&r->b);
	/* A side hung up (POLLHUP) with nothing left to read or write from
	 * it would wake us forever: once both directions ended, end. */
}

/* Bytes a direction's pipe holds: 256 KiB, four of the default 64, so a
 * large answer moves in fewer wake-ups (the runner polls; each wake-up
 * costs a poll over its connections). */
#define RELAY_PIPE_SIZE (256 * 1024)

/* The pipe of a direction; none (the copy path) when the runner is out
 * of descriptors. */
static void dir_pipe(struct relay_dir *d)
{
	if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
		d->pipe[0] = d->pipe[1] = -1;
		return;
	}
	int sz = fcntl(d->pipe[1], F_SETPIPE_SZ, RELAY_PIPE_SIZE);
	if (sz < 0)
		sz = fcntl(d->pipe[1], F_GETPIPE_SZ);
	d->pcap = sz > 0 ? (size_t)sz : 65536;
}

int relay_start(struct rl_loop *l, int fd_a, int fd_b, const void *to_a, size_t na,
		const void *to_b, size_t nb, struct terr *err)
{
	struct relay *r = calloc(1, sizeof(*r));
	if (!r || na > RELAY_BUF || nb > RELAY_BUF) {
		free(r);
		close(fd_a);
		close(fd_b);
		return terr_set(err, ENOMEM, "out of memory");
	}
	r->loop = l;
	dir_pipe(&r->a2b);
	dir_pipe(&r->b2a);
	rl_init(&r->a.w, fd_a, relay_cb, &r->a);
	rl_init(&r->b.w, fd_b, relay_cb, &r->b);
	r->a.r = r->b.r = r;
	r->a.in = &r->a2b;
	r->a.out = &r->b2a;
	r->b.in = &r->b2a;
	r->b.out = &r->a2b;
	memcpy(r->b2a.data, to_a, na);
	r->b2a.len = na;
	memcpy(r->a2b.data, to_b, nb);
	r->a2b.len = nb;
	relay_n++;
	if (rl_add(l, &r->a.w) < 0 || rl_add(l, &r->b.w) < 0) {
		relay_end(r);
		return terr_set(err, ENOSPC, "too many connections");
	}
	relay_wishes(&r->a);
	relay_wishes(&r->b);
	return 0;
}

static int linger_count;

struct lingerer {
	struct rl_watch w;
	struct rl_loop *loop;
};

static void linger_cb(struct rl_watch *w, short revents)
{
	struct lingerer *g = w->data;
	if (revents) {
		char buf[4096];
		ssize_t n = read(w->fd, buf, sizeof(buf));
		if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
			return;
	}
	rl_del(g->loop, w);
	close(w->fd);
	free(g);
	linger_count--;
}

void relay_linger(struct rl_loop *l, int fd)
{
	shutdown(fd, SHUT_WR);
	/* Lingering costs a slot of the loop for up to RELAY_LINGER_MS, and
	 * the answers that linger are mostly refusals of connections that
	 * proved nothing: past RELAY_MAX_LINGER the answer goes out without
	 * waiting, so a flood of bad lines cannot fill the loop that the
	 * proxy's relays need. */
	struct lingerer *g = linger_count < RELAY_MAX_LINGER ? calloc(1, sizeof(*g)) : NULL;
	if (!g) {
		close(fd);
		return;
	}
	g->loop = l;
	rl_init(&g->w, fd, linger_cb, g);
	g->w.events = POLLIN;
	g->w.deadline = rl_now_ms() + RELAY_LINGER_MS;
	if (rl_add(l, &g->w) < 0) {
		close(fd);
		free(g);
		return;
	}
	linger_count++;
}
