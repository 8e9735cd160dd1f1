/* How the manager reaches an agent: an ops table with an in-process
 * implementation (ctx = struct agent *) and an HTTP one (signed RPC to
 * `tessera agent`). The manager calls these without holding its lock. */
#ifndef TESSERA_MANAGER_LINK_H
#define TESSERA_MANAGER_LINK_H

#include <jansson.h>
#include <stdbool.h>

#include "common/err.h"
#include "agent/agent.h"
#include "runtime/runtime.h"

struct agent_link_ops {
	const char *name;
	int (*start)(void *ctx, json_t *spec, char cid[RT_ID_MAX], struct terr *err);
	int (*destroy)(void *ctx, const char *session_id, const char *cid, struct terr *err);
	/* *result (new ref): {"exit_code","stdout","stderr"} */
	int (*exec)(void *ctx, const char *cid, json_t *command, int timeout_s,
		    json_t **result, struct terr *err);
	/* *out malloc'd, caller frees */
	int (*logs)(void *ctx, const char *cid, int tail, char **out, struct terr *err);
	int (*image_exists)(void *ctx, const char *ref, bool *exists, struct terr *err);
	/* *images (new ref): [{"id","tags","size","labels"}] (agent_images);
	 * an agent of an earlier version answers "repo:tag" strings. */
	int (*images)(void *ctx, json_t **images, struct terr *err);
	/* Removes one reference of an image from the node; -ENOENT when it
	 * has none. */
	int (*image_remove)(void *ctx, const char *ref, struct terr *err);
	/* Commits a container into an image: req (borrowed) as agent_commit
	 * takes it, *result (new ref) as it answers. */
	int (*commit)(void *ctx, json_t *req, json_t **result, struct terr *err);
	/* Pulls ref from registry ("host:port") onto the node (agent_pull).
	 * Progress reaches fn (in-process) or comes back through the agent's
	 * events keyed by key (remote; fn is then not called). */
	int (*pull)(void *ctx, const char *ref, const char *registry, const char *key,
		    agent_progress_fn fn, void *ud, struct terr *err);
	void (*release)(void *ctx);
};

extern const struct agent_link_ops link_local_ops;
extern const struct agent_link_ops link_remote_ops;

/* ctx for link_remote_ops; copies its arguments. NULL on allocation failure. */
void *link_remote_new(const char *url, const char *cluster_secret);

#endif
