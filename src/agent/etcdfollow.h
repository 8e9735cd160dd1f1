/* An agent following the cluster settings in etcd (agent.conf's etcd):
 * the agents' keys under ETCD_CONFIG_PREFIX (log_max_size, log_max_files)
 * are applied with agent_cluster_set when the agent starts and whenever
 * they change, without a restart. Agents read etcd themselves rather than
 * through the manager: docs/architecture.md, "Cluster configuration". */
#ifndef TESSERA_AGENT_ETCDFOLLOW_H
#define TESSERA_AGENT_ETCDFOLLOW_H

#include "agent/agent.h"
#include "common/err.h"

struct agent_etcd;

/* Starts the follower's thread (endpoint and a borrowed: they must
 * outlive it). While etcd cannot be reached the agent keeps what it has
 * (agent.conf's values at first) and retries every second. */
int agent_etcd_start(struct agent_etcd **out, struct agent *a, const char *endpoint, struct terr *err);
/* Stops and frees it (NULL: no-op). */
void agent_etcd_stop(struct agent_etcd *f);

#endif
