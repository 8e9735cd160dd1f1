#include "runner/loop.h"

#include <errno.h>
#include <poll.h>
#include <time.h>

int64_t rl_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rl_init(struct rl_watch *w, int fd, rl_cb cb, void *data)
{
	w->fd = fd;
	w->events = 0;
	w->deadline = 0;
	w->cb = cb;
	w->data = data;
	w->slot = -1;
}

int rl_add(struct rl_loop *l, struct rl_watch *w)
{
	if (w->slot >= 0)
		return 0;
	if (l->n >= RL_MAX_WATCHES)
		return -ENOSPC;
	w->slot = l->n;
	l->w[l->n++] = w;
	return 0;
}

void rl_del(struct rl_loop *l, struct rl_watch *w)
{
	if (w->slot < 0)
		return;
	l->w[w->slot] = 0;
	w->slot = -1;
}

/* Squeezes out the empty slots (only between rounds). */
static void rl_compact(struct rl_loop *l)
{
	int k = 0;
	for (int i = 0; i < l->n; i++) {
		if (!l->w[i])
			continue;
		l->w[k] = l->w[i];
		l->w[k]->slot = k;
		k++;
	}
	l->n = k;
}

int rl_run_once(struct rl_loop *l, int timeout_ms)
{
	static struct pollfd pfd[RL_MAX_WATCHES];
	static int idx[RL_MAX_WATCHES];
	rl_compact(l);
	int n = l->n, np = 0;
	int64_t now = rl_now_ms();
	for (int i = 0; i < n; i++) {
		struct rl_watch *w = l->w[i];
		if (w->deadline) {
			int64_t left = w->deadline - now;
			if (left < 0)
				left = 0;
			if (timeout_ms < 0 || left < timeout_ms)
				timeout_ms = (int)(left > 3600000 ? 3600000 : left);
		}
		if (w->fd >= 0 && w->events) {
			pfd[np] = (struct pollfd){ .fd = w->fd, .events = w->events };
			idx[np++] = i;
		}
	}
	int pr = poll(pfd, (nfds_t)np, timeout_ms);
	if (pr < 0 && errno != EINTR)
		return -errno;
	if (pr < 0)
		return 0;
	for (int k = 0; k < np; k++) {
		struct rl_watch *w = l->w[idx[k]];
		/* Deleted during this round, or its fd changed meanwhile. */
		if (!w || !pfd[k].revents || w->fd != pfd[k].fd)
			continue;
		w->cb(w, pfd[k].revents);
	}
	now = rl_now_ms();
	for (int i = 0; i < n; i++) {
		struct rl_watch *w = l->w[i];
		if (w && w->deadline && w->deadline <= now) {
			w->deadline = 0;
			w->cb(w, 0);
		}
	}
	return 0;
}
