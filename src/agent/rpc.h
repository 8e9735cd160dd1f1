/* The HTTP face of an agent daemon: the routes the manager calls
 * (docs/api.md, "Cluster-internal routes"), signed with the cluster secret
 * under the credential "manager". */
#ifndef TESSERA_AGENT_RPC_H
#define TESSERA_AGENT_RPC_H

#include "agent/agent.h"
#include "common/httpd.h"

/* Serves a on listen ("0.0.0.0:8091"); *out is stopped with httpd_stop.
 * The secret is borrowed and must outlive the server. */
int agent_rpc_start(struct agent *a, const char *listen, const char *cluster_secret,
		    struct httpd **out, struct terr *err);

#endif
