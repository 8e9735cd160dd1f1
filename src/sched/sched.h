/* Placement planning: pure functions over snapshots, no locks, no I/O, so
 * the policies are unit-testable and the manager stays in charge of state.
 * Agent selectors are an ops table (DESIGN.md). */
#ifndef TESSERA_SCHED_SCHED_H
#define TESSERA_SCHED_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/model.h"

#define SCHED_REASON_MAX 256

struct sched_agent {
	const char *id;
	bool alive;
	struct res capacity;
	struct res free;      /* updated by sched_plan as it places */
};

struct sched_request {
	const char *session_id;
	const char *name;
	struct res req;
};

struct sched_placement {
	size_t request;       /* index into the requests */
	size_t agent;         /* index into the agents */
};

/* Picks the agent for one request among those that fit; -1 when none. */
struct sched_selector_ops {
	const char *name;
	ssize_t (*select)(const struct sched_agent *agents, size_t n,
			  const struct res *req);
};

extern const struct sched_selector_ops sched_concentrated;  /* best fit */
extern const struct sched_selector_ops sched_dispersed;     /* most free */

/* Finds a selector by name; NULL when unknown. */
const struct sched_selector_ops *sched_selector_find(const char *name);

/* Plans placements for `reqs` (already in queue order) first in, first out:
 * places requests in order while they fit, stops at the first that does
 * not (no one jumps the queue). Fills out[] (capacity n_reqs) and returns
 * the number of placements. reasons (n_reqs entries, may be NULL) gets,
 * for every request left waiting, why it waits. */
size_t sched_plan_fifo(const struct sched_selector_ops *sel,
		       struct sched_agent *agents, size_t n_agents,
		       const struct sched_request *reqs, size_t n_reqs,
		       struct sched_placement *out,
		       char (*reasons)[SCHED_REASON_MAX]);

/* True when some agent (alive or not) could ever hold req. */
bool sched_satisfiable(const struct sched_agent *agents, size_t n,
		       const struct res *req);

#endif
