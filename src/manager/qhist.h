/* A waiting session's scheduling history (docs/scheduling.md, "The queue
 * and its history"): the last QHIST_MAX distinct reasons the scheduler's
 * passes gave for not starting it, each with when it was first and last
 * given and by how many passes. In memory only (like the wait reason in
 * status_info, recomputed every pass): a restart begins it again, and the
 * store's schema is untouched. */
#ifndef TESSERA_MANAGER_QHIST_H
#define TESSERA_MANAGER_QHIST_H

#include <stddef.h>
#include <stdint.h>

#include "sched/sched.h"

#define QHIST_MAX 20

struct qhist_entry {
	char reason[SCHED_REASON_MAX];
	int64_t first_ms, last_ms;
	uint64_t passes;
};

/* Grown as distinct reasons come (most sessions see one or two), up to
 * QHIST_MAX; entries in the order first seen. */
struct qhist {
	size_t n, cap;
	uint64_t passes;          /* every pass that looked at it */
	struct qhist_entry *e;
};

/* Records one pass's reason at now_ms: the entry of the same words gets
 * the pass, a new reason a new entry (the one given longest ago dropped
 * when QHIST_MAX are kept). *h is allocated on first use. -ENOMEM
 * leaves the history as it was. */
int qhist_note(struct qhist **h, const char *reason, int64_t now_ms);
void qhist_free(struct qhist **h);

#endif
