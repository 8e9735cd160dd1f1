/* How the manager reaches an agent: an ops table with an in-process
 * implementation (ctx = struct agent *) and an HTTP one (signed RPC to
 * `tessera agent`). The manager calls these without holding its lock. */
#ifndef TESSERA_MANAGER_LINK_H
#define TESSERA_MANAGER_LINK_H

#include <jansson.h>
#include <stdbool.h>

#include "common/err.h"
#include "common/pump.h"
#include "agent/agent.h"
#include "runtime/runtime.h"

struct agent_link_ops {
	const char *name;
	/* Creates and starts the session's container: its id into cid,
	 * where its app port is published ("HOST:PORT", "" for none) into
	 * app_endpoint, and where the node's time went into *times (all
	 * zero from an agent that does not say). */
	int (*start)(void *ctx, json_t *spec, char cid[RT_ID_MAX], char app_endpoint[AGENT_APP_ENDPOINT_MAX],
		     struct agent_start_times *times, struct terr *err);
	int (*destroy)(void *ctx, const char *session_id, const char *cid, struct terr *err);
	/* Starts command (borrowed array of strings); *out streams its
	 * output in the frames of common/frames.h (agent_exec_stream). What
	 * fails before the command runs is returned here. The caller
	 * pump_closes *out. */
	int (*exec)(void *ctx, const char *cid, json_t *command, int timeout_s,
		    struct pump **out, struct terr *err);
	/* The container's log as a byte stream (agent_logs_stream); the
	 * caller pump_closes *out. */
	int (*logs)(void *ctx, const char *cid, int tail, bool follow, struct pump **out,
		    struct terr *err);
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
