/* Placement planning: pure functions over snapshots, no locks, no I/O, so
 * policies are unit-testable and the manager stays in charge of state.
 * Agent selectors and queue policies are ops tables (docs/architecture.md,
 * "Ops tables").
 *
 * fGPU: every device of an agent offers `per_device_m` milli-fGPU (the
 * admin's fgpu_per_device x 1000). A request no larger than one device
 * lands on a single device; a larger one takes whole free devices plus at
 * most one partial device. All amounts are integers. */
#ifndef TESSERA_SCHED_SCHED_H
#define TESSERA_SCHED_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/model.h"

#define SCHED_REASON_MAX 256
#define SCHED_MAX_DEVICES 16

struct sched_device {
	int64_t free_m;       /* milli-fGPU free on this device */
};

struct sched_agent {
	const char *id;
	bool alive;
	bool drained;         /* unschedulable (admin's drain): nothing new is
	                       * placed on it; what runs there keeps running */
	struct res capacity;  /* fgpu_m = n_devices x per_device_m */
	struct res free;      /* updated by the planner as it places */
	struct sched_device *devs;  /* updated as it places; may be NULL when n_devs 0 */
	size_t n_devs;
};

/* A share of one device. */
struct sched_gpu_share {
	size_t device;        /* index into the agent's devs */
	int64_t fgpu_m;
};

struct sched_user {
	const char *id;
	struct res used;      /* held by the user's placed sessions */
	int64_t sessions;     /* placed, not ended */
	/* Per-user policy; 0 = no limit. */
	int64_t max_sessions;
	struct res max;
};

struct sched_request {
	const char *session_id;
	const char *name;
	struct res req;
	size_t user;          /* index into users */
	int64_t seq;          /* creation order */
	int failed_passes;    /* passes it waited at the head of the queue */
};

struct sched_placement {
	size_t request;
	size_t agent;
	size_t n_shares;
	struct sched_gpu_share shares[SCHED_MAX_DEVICES];
};

/* Free-capacity buckets over the agents of one pass, so choosing a node
 * walks buckets instead of scanning every agent: devices by free fGPU (in
 * quantum steps), agents by their count of fully free devices and by their
 * scarcer free fraction of CPU and memory. Built by sched_plan; selectors
 * search it. */
struct sched_index;

/* Chooses among agents that can hold the request: fills shares and returns
 * the agent index, or -1. */
struct sched_selector_ops {
	const char *name;
	ssize_t (*select)(struct sched_index *ix, const struct res *req,
			  struct sched_gpu_share *shares, size_t *n_shares);
};

/* Orders the queue and says whether a request that does not fit blocks
 * those behind it. */
struct sched_queue_ops {
	const char *name;
	bool blocking;
	/* Next request to try among the untried (tried[i] false); -1 when none. */
	ssize_t (*next)(const struct sched_request *reqs, size_t n, const bool *tried,
			const struct sched_user *users, const struct sched_agent *agents,
			size_t n_agents);
};

/* Best fit: the device (or node, for multi-device and CPU-only requests)
 * left with the least free that still fits. */
extern const struct sched_selector_ops sched_concentrated;
/* The opposite: the most free first, spreading load. */
extern const struct sched_selector_ops sched_dispersed;
extern const struct sched_queue_ops sched_fifo;
extern const struct sched_queue_ops sched_lifo;
extern const struct sched_queue_ops sched_drf;

const struct sched_selector_ops *sched_selector_find(const char *name);
const struct sched_queue_ops *sched_queue_find(const char *name);

struct sched_params {
	const struct sched_selector_ops *selector;
	const struct sched_queue_ops *queue;
	int64_t per_device_m;         /* fGPU of one device, in milli */
	int64_t quantum_m;            /* fGPU step; 0 = 10 (0.01). Divides 1000. */
	int fifo_skip_after;          /* >0: a blocking head that failed this many
	                               * passes lets later requests pass */
};

/* Plans one pass. reqs must be in creation order. Fills out[] (capacity
 * n_reqs), returns the number of placements; updates agents' and users'
 * free/used as it goes. reasons (n_reqs entries, may be NULL) gets, for
 * every request left waiting, why in words; blocked_head (may be NULL) gets
 * the index of the request that blocked the queue, or -1. */
size_t sched_plan(const struct sched_params *p, struct sched_agent *agents, size_t n_agents,
		  struct sched_user *users, const struct sched_request *reqs, size_t n_reqs,
		  struct sched_placement *out, char (*reasons)[SCHED_REASON_MAX],
		  ssize_t *blocked_head);

/* Device shares for want_m on these devices, or false when they cannot
 * hold it. pack: partial share on the fullest device that fits, else the
 * emptiest. shares may be NULL (fit test only). */
bool sched_gpu_fit(const struct sched_device *devs, size_t n, int64_t want_m,
		   int64_t per_device_m, bool pack, struct sched_gpu_share *shares,
		   size_t *n_shares);

/* True when some agent (alive or not) could ever hold req, counting its
 * devices as all free. */
bool sched_satisfiable(const struct sched_agent *agents, size_t n, const struct res *req,
		       int64_t per_device_m);

#endif
