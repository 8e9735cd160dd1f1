/* GPU turns (turn.h). Plain file locks; nothing here knows CUDA. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "fgpu/turn.h"

uint64_t fgpu_turn_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void turn_sleep(uint64_t ns)
{
	struct timespec ts = { 0, (long)ns };
	nanosleep(&ts, NULL);
}

static int flock_retry(int fd, int op)
{
	int rc;
	while ((rc = flock(fd, op)) != 0 && errno == EINTR)
		;
	return rc;
}

/* The waiter's mark: a shared lock on the ".wait" file through its own
 * open file description (dropped with it when the process dies). It can
 * fail for the instant a holder looks (below); the caller tries again. */
static bool mark_waiting(const struct fgpu_turn *t, bool on)
{
	return flock_retry(t->wait_fd, on ? LOCK_SH | LOCK_NB : LOCK_UN) == 0;
}

bool fgpu_turn_others_wait(const struct fgpu_turn *t)
{
	if (t->wait_fd < 0)
		return false;
	/* Exclusive fails while anyone else holds it shared; when it
	 * succeeds, let go at once. */
	if (flock_retry(t->wait_fd, LOCK_EX | LOCK_NB) == 0) {
		flock_retry(t->wait_fd, LOCK_UN);
		return false;
	}
	return errno == EWOULDBLOCK;
}

bool fgpu_turn_open(struct fgpu_turn *t, const char *dir, const char *uuid)
{
	if (t->opened)
		return t->fd >= 0;
	t->opened = true;
	char path[512], wait_path[520];
	if (!dir || !*dir || !uuid || !*uuid || strchr(uuid, '/') ||
	    snprintf(path, sizeof(path), "%s/%s", dir, uuid) >= (int)sizeof(path))
		return false;
	snprintf(wait_path, sizeof(wait_path), "%s%s", path, FGPU_TURN_WAIT_SUFFIX);
	t->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	t->wait_fd = open(wait_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (t->fd < 0 || t->wait_fd < 0) {
		if (t->fd >= 0)
			close(t->fd);
		if (t->wait_fd >= 0)
			close(t->wait_fd);
		t->fd = t->wait_fd = -1;
		return false;
	}
	return true;
}

static bool try_lock(struct fgpu_turn *t)
{
	if (flock_retry(t->fd, LOCK_EX | LOCK_NB) != 0)
		return false;
	t->held = true;
	t->since = t->checked = fgpu_turn_now();
	return true;
}

bool fgpu_turn_take(struct fgpu_turn *t, uint64_t patience_ns)
{
	if (t->fd < 0)
		return false;
	if (t->held)
		return true;
	bool defer = t->gave;
	t->gave = false;
	if (!(defer && fgpu_turn_others_wait(t)) && try_lock(t))
		return true;
	uint64_t start = fgpu_turn_now();
	if (start < t->impatient_until)
		return false;
	/* Poll: a lock that has a waiter's mark on it is handed over within
	 * the poll step. Short steps first (a turn changes hands every
	 * quantum), longer ones once the holder is slow to give it up. */
	bool marked = false, got = false;
	for (;;) {
		uint64_t waited = fgpu_turn_now() - start;
		if (defer && fgpu_turn_others_wait(t)) {
			/* Those already waiting go first: this process, which
			 * has just given the turn up, does not compete yet. */
		} else {
			if (!marked)
				marked = mark_waiting(t, true);
			if (try_lock(t)) {
				got = true;
				break;
			}
			defer = false;
		}
		if (waited >= patience_ns)
			break;
		turn_sleep(waited < 2000000ULL ? 20000ULL : 50000ULL);
	}
	if (marked)
		mark_waiting(t, false);
	if (!got)
		t->impatient_until = fgpu_turn_now() + FGPU_TURN_IMPATIENT_NS;
	return got;
}

bool fgpu_turn_due(struct fgpu_turn *t)
{
	if (!t->held)
		return false;
	uint64_t now = fgpu_turn_now();
	uint64_t quantum = t->quantum ? t->quantum : FGPU_TURN_QUANTUM_NS;
	if (now - t->since < quantum || now - t->checked < FGPU_TURN_RECHECK_NS)
		return false;
	t->checked = now;
	return fgpu_turn_others_wait(t);
}

void fgpu_turn_give(struct fgpu_turn *t)
{
	if (!t->held)
		return;
	flock_retry(t->fd, LOCK_UN);
	t->held = false;
	t->gave = true;
}

void fgpu_turn_forget(struct fgpu_turn *t)
{
	if (t->fd >= 0)
		close(t->fd);
	if (t->wait_fd >= 0)
		close(t->wait_fd);
	*t = (struct fgpu_turn)FGPU_TURN_INIT;
}
