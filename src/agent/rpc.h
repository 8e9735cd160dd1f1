/* The HTTP face of an agent daemon: the routes the manager calls
 * (docs/api.md, "Cluster-internal routes"), signed with the cluster secret
 * under the credential "manager". */
#ifndef TESSERA_AGENT_RPC_H
#define TESSERA_AGENT_RPC_H

#include <stddef.h>

#include "agent/agent.h"
#include "common/httpd.h"

/* The RPC routes, defined once: X(NAME, handler, method, pattern). The
 * agent's route table (rpc.c, handler rpc_<handler>) and the manager's
 * link (manager/link.c, through agent_rpc_path) are both expanded from
 * it, so a route cannot be renamed on one side only. A pattern has at
 * most one {param} segment. */
#define AGENT_RPC_ROUTES(X) \
	X(IMAGES, images, "GET", "/rpc/v1/images") \
	X(START, start, "POST", "/rpc/v1/sessions") \
	X(DESTROY, destroy, "DELETE", "/rpc/v1/sessions/{id}") \
	X(EXEC, exec, "POST", "/rpc/v1/containers/{cid}/exec") \
	X(LOGS, logs, "GET", "/rpc/v1/containers/{cid}/logs") \
	X(IMAGE, image, "GET", "/rpc/v1/images/{ref}") \
	X(IMAGE_REMOVE, image_remove, "DELETE", "/rpc/v1/images/{ref}") \
	X(COMMIT, commit, "POST", "/rpc/v1/containers/{cid}/commit") \
	X(PULL, pull, "POST", "/rpc/v1/pulls")

enum agent_rpc {
#define AGENT_RPC_ENUM(name, handler, method, pattern) AGENT_RPC_##name,
	AGENT_RPC_ROUTES(AGENT_RPC_ENUM)
#undef AGENT_RPC_ENUM
	AGENT_RPC_COUNT
};

/* The route's method ("GET", "POST", "DELETE"). */
const char *agent_rpc_method(enum agent_rpc rpc);
/* The route's path into buf: its pattern with the {param} segment
 * replaced by arg, percent-encoded (arg is ignored by a route without
 * one); then "?" and query when query is not NULL (the caller encodes
 * it). -ENAMETOOLONG when buf is too small, -ENOMEM. */
int agent_rpc_path(enum agent_rpc rpc, const char *arg, const char *query, char *buf, size_t n,
		   struct terr *err);

/* Serves a on listen ("0.0.0.0:8091"); *out is stopped with httpd_stop.
 * The secret is borrowed and must outlive the server. */
int agent_rpc_start(struct agent *a, const char *listen, const char *cluster_secret,
		    struct httpd **out, struct terr *err);

#endif
