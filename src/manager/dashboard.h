/* The admin dashboard's figures (GET /v1/dashboard, `tessera admin
 * dashboard`; docs/api.md, "Dashboard"): free and used capacity per GPU
 * model and per node, sessions by status, the users who hold the most,
 * and the recent failures. Pure: dash_aggregate reads a snapshot that
 * the manager takes under its lock (overview.c, mgr_dashboard) and
 * answers JSON, so its unit test (tests/manager/test_dashboard.c) needs
 * no manager. */
#ifndef TESSERA_MANAGER_DASHBOARD_H
#define TESSERA_MANAGER_DASHBOARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/model.h"

/* One GPU device of a node. cap_m, used_m: milli-fGPU. */
struct dash_gpu {
	const char *model;      /* as the node reports it: "NVIDIA H100 80GB HBM3" */
	int64_t memory;         /* bytes */
	int64_t cap_m, used_m;
};

struct dash_node {
	const char *id;
	bool alive;             /* LOST otherwise */
	bool drained;           /* no new sessions (PATCH /v1/nodes) */
	const char *group;      /* its resource group */
	struct res capacity, used;
	int sessions;           /* containers placed on it */
	const struct dash_gpu *gpus;
	int n_gpus;
};

struct dash_session {
	const char *id, *name;
	const char *owner;      /* the owner's email; NULL: unknown (or not looked up) */
	enum session_status status;
	const char *status_info;
	struct res req;
	/* A container of a cluster session other than its first: its
	 * resources count for the owner, the session is counted once. */
	bool sub;
	int64_t ended_ms;       /* when it reached a final status; 0: not */
};

struct dash_input {
	const struct dash_node *nodes;
	size_t n_nodes;
	const struct dash_session *sessions;
	size_t n_sessions;
	int64_t now_ms;
	int64_t window_ms;      /* "recent": ended at most this long ago */
	size_t top_users;       /* the most users listed */
	size_t max_failures;    /* the most failures listed */
};

/* The dashboard ({"generated_at", "window_s", "totals", "gpu_models",
 * "nodes", "sessions", "top_users", "failures"}; docs/api.md), new
 * reference; NULL when out of memory.
 *  - totals: capacity of the alive nodes, what is allocated on them, and
 *    what new sessions can still get (alive and not drained).
 *  - gpu_models: per model name (and memory), the devices, their nodes
 *    and fGPU capacity, used and free, on alive nodes.
 *  - sessions.by_status: every status; the final ones (TERMINATED,
 *    CANCELLED, ERROR) only those that ended within the window.
 *  - top_users: by what their sessions hold now (fGPU, then CPU, then
 *    memory), only users who hold something.
 *  - failures: LOST sessions (their node stopped answering), then those
 *    that ended ERROR within the window, newest first, with their
 *    status_info. */
json_t *dash_aggregate(const struct dash_input *in);

#endif
