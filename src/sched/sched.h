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
	size_t group;         /* its resource group: index into the world's groups */
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

/* Usage over time, decayed (sched_usage_charge): resource-seconds of what
 * was held, each kind on its own, so that fair share can take the
 * dominant one. */
struct sched_usage {
	double cpu_s;         /* CPU-seconds (cores x s) */
	double mem_s;         /* GiB-seconds */
	double fgpu_s;        /* fGPU-seconds */
};

/* A project (team): its quota, enforced beside each user's policy, and
 * its fair-share weight and usage. */
struct sched_project {
	const char *id;
	const char *name;     /* for wait reasons */
	struct res used;      /* held by its placed sessions */
	int64_t sessions;     /* placed, not ended */
	int64_t max_sessions; /* quota; 0 = no limit */
	struct res max;       /* quota; 0 = no limit per kind */
	double weight;        /* fair-share weight, > 0 */
	struct sched_usage usage;
	uint64_t groups;      /* resource groups allowed, bit g = group g;
	                       * 0 = every group */
};

/* A user within a project, for fair share between the project's users. */
struct sched_member {
	size_t project, user;
	double weight;        /* > 0 */
	struct sched_usage usage;
	struct res used;      /* held by its placed sessions */
};

struct sched_request {
	const char *session_id;
	const char *name;
	struct res req;
	size_t user;          /* index into users */
	size_t project;       /* index into projects */
	size_t member;        /* index into members */
	size_t group;         /* the resource group it may run in */
	int priority;         /* higher first; 0 by default */
	int64_t seq;          /* creation order */
	int failed_passes;    /* passes it waited at the head of the queue */
	/* A cluster session: gang containers of req each, placed all in one
	 * pass or none (docs/scheduling.md, "Cluster sessions (gangs)"). */
	int gang;              /* containers; 0 or 1: an ordinary one-container request */
	bool gang_single_node; /* all containers on one agent (cluster_mode single-node) */
};

/* A session holding resources (SCHEDULED or RUNNING): what preemption
 * may end to make room. */
struct sched_running {
	const char *session_id;
	const char *name;
	size_t agent;
	struct res req;
	size_t n_shares;
	struct sched_gpu_share shares[SCHED_MAX_DEVICES];
	size_t user, project, member;
	int priority;
	bool preemptible;
	int64_t runtime_ms;   /* how long it has run; a victim needs at least
	                       * the params' preempt_min_runtime_ms */
	bool ending;          /* already being ended (an earlier pass's victim,
	                       * or deleted): its room is coming free, so a
	                       * waiting request may count on it (and wait for
	                       * it, holding that room) at no cost; never
	                       * reported as an eviction again */
};

/* A session the pass wants ended so that a waiting request can start:
 * victims of one request are on one agent. */
struct sched_eviction {
	size_t running;       /* index into the world's running */
	size_t request;       /* the request it makes room for */
	char why[SCHED_REASON_MAX];   /* for the victim's history, in words */
};

struct sched_placement {
	size_t request;
	int member;           /* 0 .. gang-1: which container (0 for an ordinary request) */
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
struct sched_world;

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
	/* Next request to try among the untried (tried[i] false); -1 when
	 * none. sched_plan calls it with one priority level at a time (reqs
	 * is then that level's requests, in creation order), and marks the
	 * request it returns tried before the next call. state: what start
	 * made for this level, or NULL. */
	ssize_t (*next)(const struct sched_request *reqs, size_t n, const bool *tried,
			const struct sched_world *w, void *state);
	/* Optional (NULL for a policy that keeps nothing between calls): made
	 * once per level before the first next and freed by stop after the
	 * last, so that a policy can keep its order instead of rescanning the
	 * queue at every call. NULL from start on no memory: next then gets
	 * NULL and must still answer. */
	void *(*start)(const struct sched_request *reqs, size_t n, const struct sched_world *w);
	void (*stop)(void *state);
};

/* Best fit: the device (or node, for multi-device and CPU-only requests)
 * left with the least free that still fits. */
extern const struct sched_selector_ops sched_concentrated;
/* The opposite: the most free first, spreading load. */
extern const struct sched_selector_ops sched_dispersed;
extern const struct sched_queue_ops sched_fifo;
extern const struct sched_queue_ops sched_lifo;
extern const struct sched_queue_ops sched_drf;
/* Fair share over time: projects by their weighted dominant share of
 * decayed usage and what they hold now, then users within the project
 * the same way (docs/scheduling.md). */
extern const struct sched_queue_ops sched_fairshare;

const struct sched_selector_ops *sched_selector_find(const char *name);
const struct sched_queue_ops *sched_queue_find(const char *name);

/* Everything a pass plans over. Agents', users', projects' and members'
 * free/used are updated as it places. n_projects may be 0 (no projects:
 * requests' project and member are then ignored), as may n_members and
 * n_running. */
struct sched_world {
	struct sched_agent *agents;
	size_t n_agents;
	struct sched_user *users;
	size_t n_users;
	struct sched_project *projects;
	size_t n_projects;
	struct sched_member *members;
	size_t n_members;
	const struct sched_running *running;
	size_t n_running;
	const char *const *group_names;   /* [n_groups], for wait reasons */
	size_t n_groups;
};

struct sched_params {
	const struct sched_selector_ops *selector;
	const struct sched_queue_ops *queue;
	int64_t per_device_m;         /* fGPU of one device, in milli */
	int64_t quantum_m;            /* fGPU step; 0 = 10 (0.01). Divides 1000. */
	int fifo_skip_after;          /* >0: a blocking head that failed this many
	                               * passes lets later requests pass */
	bool preempt;                 /* plan evictions (sched_plan's evictions) */
	int64_t preempt_min_runtime_ms;   /* a victim has run at least this long */
};

/* The outcome of one pass besides its placements. */
struct sched_result {
	char (*reasons)[SCHED_REASON_MAX];   /* [n_reqs] or NULL: why each request
	                                      * left waiting waits, in words */
	ssize_t blocked_head;                /* the request that blocked the
	                                      * queue, or -1 */
	struct sched_eviction *evictions;    /* [n_running] or NULL: filled when
	                                      * params.preempt */
	size_t n_evictions;
	size_t *order;                       /* [n_reqs] or NULL: each request's
	                                      * place in the order the pass tried
	                                      * them (1 = first; 0: not tried),
	                                      * the queue's positions */
};

/* Plans one pass. reqs must be in creation order. Requests go by priority
 * (higher first), then in the queue policy's order. A request is placed
 * only on an alive, undrained agent of its group, within its user's policy
 * and its project's quota. Fills out[] (capacity: the sum over requests of
 * max(1, gang), see below) and returns the number of placements. res (may
 * be NULL) gets the reasons, the blocking head and, with params.preempt,
 * the evictions: for a request that fits
 * nowhere, the fewest and cheapest running sessions on one agent whose end
 * would make room for it, each preemptible, run at least
 * preempt_min_runtime_ms, and either of lower priority or of a project
 * over its fair share while the request's project is under its own (on
 * current shares, the targets among the projects that hold or ask for
 * something in this pass; running sessions already ending count as
 * coming free, at no cost, and are not reported again). The room they
 * free is held for that request for the rest of the pass, and the request
 * is not placed in it then: its reason says it waits for them, and it
 * does not block a fifo or lifo queue. A request its project may not run in its group, or over its
 * user's policy or its project's quota, waits without blocking and never
 * preempts. With more than one group the node reasons name the group.
 *
 * A gang (request.gang > 1) yields gang placements (members 0..gang-1,
 * consecutive in out[]) or none, so out[] must hold the sum over requests
 * of max(1, gang). It counts as one session and gang x req against
 * policies and quotas, never preempts, and, when it does not fit, holds
 * the agents it would start on for the rest of the pass (no later request
 * is placed there) instead of blocking a fifo or lifo queue. */
size_t sched_plan(const struct sched_params *p, struct sched_world *w,
		  const struct sched_request *reqs, size_t n_reqs,
		  struct sched_placement *out, struct sched_result *res);

/* Decays u by dt_s seconds of half-life half_life_s (<= 0: no decay) and
 * charges what req held over those seconds. */
void sched_usage_charge(struct sched_usage *u, const struct res *req, double dt_s, double half_life_s);

/* Fair-share figures of projects (like Slurm's sshare): each one's target
 * share (its weight over the sum of weights), its share of the decayed
 * usage (dominant resource), its current share of the alive capacity
 * (dominant resource), all in 0..1, and its rank in the fair-share order
 * (1 = next served). Arrays have w->n_projects entries. */
struct sched_share {
	double target, usage_share, current_share;
	size_t rank;
};
void sched_fairshare_projects(const struct sched_world *w, struct sched_share *out);
/* The same for the members of a project, among themselves. out has
 * w->n_members entries; those of other projects are left untouched. */
void sched_fairshare_members(const struct sched_world *w, size_t project, struct sched_share *out);

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

/* The same for a gang of n containers of req each (n <= 1: as
 * sched_satisfiable): one agent that could hold all n when single_node,
 * else agents that together could, each counted empty. For refusing at
 * creation a cluster session that could never start. */
bool sched_gang_satisfiable(const struct sched_agent *agents, size_t n_agents, const struct res *req, int n,
			    bool single_node, int64_t per_device_m);

#endif
