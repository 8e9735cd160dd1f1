/* The runner's event loop: poll(2) over a set of watches.
 *
 * A watch is owned by its caller (embedded in a connection, an app, a
 * terminal) and registered with rl_add; the loop only points at it. A
 * watch has an fd (or -1), the poll events wanted, and optionally a
 * deadline; its callback gets the poll revents, or 0 when the deadline
 * passed. rl_del may be called at any time, from any callback: the slot is
 * emptied at once and reused only at the next rl_run_once, so a watch that
 * was deleted (and freed) during a round is never called in that round.
 *
 * poll() rather than epoll: the runner serves a handful of connections, and
 * the arrays are rebuilt each round from the watches' current wishes, so
 * no registration goes stale. */
#ifndef TESSERA_RUNNER_LOOP_H
#define TESSERA_RUNNER_LOOP_H

#include <stdbool.h>
#include <stdint.h>

struct rl_watch;
typedef void (*rl_cb)(struct rl_watch *w, short revents);

struct rl_watch {
	int fd;              /* -1: a timer only */
	short events;        /* POLLIN/POLLOUT wanted now; 0: not polled */
	int64_t deadline;    /* monotonic ms; 0: none */
	rl_cb cb;
	void *data;
	int slot;            /* the loop's, -1 when not registered */
};

#define RL_MAX_WATCHES 1024

struct rl_loop {
	struct rl_watch *w[RL_MAX_WATCHES];
	int n;
};

int64_t rl_now_ms(void);

/* Sets up w (not yet registered). */
void rl_init(struct rl_watch *w, int fd, rl_cb cb, void *data);

/* Registers w. -ENOSPC when the loop is full (the caller refuses the
 * connection or the shell). Registering a registered watch is a no-op. */
int rl_add(struct rl_loop *l, struct rl_watch *w);

/* Unregisters w (no-op when it is not). */
void rl_del(struct rl_loop *l, struct rl_watch *w);

/* One round: polls for at most timeout_ms (-1: no limit but the watches'
 * deadlines), then calls back every watch that is ready or past its
 * deadline. Returns -errno when poll fails other than by EINTR. */
int rl_run_once(struct rl_loop *l, int timeout_ms);

#endif
