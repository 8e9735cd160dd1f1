/* Users' networks: each user's sessions on a node share a Docker network
 * of their own, made at their first start and kept for the next. */
#include "agent/internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

/* ---- users' networks ------------------------------------------------- */

/* The network of a user's sessions on this node's Docker:
 * AGENT_NETWORK_PREFIX, the user's id (16 characters: unique enough among
 * one cluster's users), '-', the cluster's (8), so that installations
 * sharing a Docker keep apart. */
void agent_network_name(const char *cluster, const char *owner_id, char *buf, size_t n)
{
	snprintf(buf, n, AGENT_NETWORK_PREFIX "%.16s%s%.8s", owner_id, cluster[0] ? "-" : "", cluster);
}

void agent_cluster_network_name(const char *cluster, const char *session_id, char *buf, size_t n)
{
	snprintf(buf, n, AGENT_CLUSTER_NETWORK_PREFIX "%.16s%s%.8s", session_id, cluster[0] ? "-" : "", cluster);
}

/* Counts a start on network name (delta +1) or its end (-1). */
void agent_net_use(struct agent *a, const char *name, int delta)
{
	pthread_mutex_lock(&a->net_mu);
	struct net_use *u = NULL;
	for (size_t i = 0; i < a->n_net_uses && !u; i++)
		if (!strcmp(a->net_uses[i].name, name))
			u = &a->net_uses[i];
	if (!u && delta > 0) {
		struct net_use *grown = realloc(a->net_uses, (a->n_net_uses + 1) * sizeof(*grown));
		if (grown) {
			a->net_uses = grown;
			u = &grown[a->n_net_uses++];
			util_strlcpy(u->name, name, sizeof(u->name));
			u->starts = 0;
		}
	}
	if (u) {
		u->starts += delta;
		if (u->starts <= 0)
			*u = a->net_uses[--a->n_net_uses];
	}
	pthread_mutex_unlock(&a->net_mu);
}

/* Whether network name is known to exist (net_mu held). */
static struct net_known *net_known_find(struct agent *a, const char *name)
{
	for (size_t i = 0; i < a->n_net_known; i++)
		if (!strcmp(a->net_known[i].name, name))
			return &a->net_known[i];
	return NULL;
}

/* Forgets network name: the next start of its user ensures it again.
 * Whether it was known. */
bool agent_net_forget(struct agent *a, const char *name)
{
	pthread_mutex_lock(&a->net_mu);
	struct net_known *k = net_known_find(a, name);
	if (k)
		*k = a->net_known[--a->n_net_known];
	pthread_mutex_unlock(&a->net_mu);
	return k != NULL;
}

/* When Docker has no address pool left for a new network: removes this
 * installation's users' networks that no running container and no start
 * of this agent uses (Docker refuses those with running containers:
 * -EBUSY), and says whether it removed any. A user's network is kept
 * after their last session only for the speed of their next start, so
 * an idle one gives way to a user who has none (net_mu held). */
static bool network_reclaim(struct agent *a, const char *cluster, const char *keep)
{
	char **names = NULL;
	size_t n = 0;
	struct terr err = {0};
	if (!cluster[0] || !a->rt_ops->network_list || !a->rt_ops->network_remove ||
	    a->rt_ops->network_list(a->rt, AGENT_LABEL_CLUSTER, cluster, &names, &n, &err) < 0)
		return false;
	/* The spare sandboxes keep their networks in use: they go first
	 * (made again at their users' next starts). */
	agent_sandbox_drop_all(a);
	int removed = 0;
	for (size_t i = 0; i < n; i++) {
		bool in_use = !strcmp(names[i], keep) ||
			      strncmp(names[i], AGENT_NETWORK_PREFIX, strlen(AGENT_NETWORK_PREFIX)) != 0;
		for (size_t k = 0; k < a->n_net_uses && !in_use; k++)
			in_use = !strcmp(a->net_uses[k].name, names[i]);
		if (!in_use && a->rt_ops->network_remove(a->rt, names[i], &err) == 0) {
			struct net_known *kn = net_known_find(a, names[i]);
			if (kn)
				*kn = a->net_known[--a->n_net_known];
			removed++;
		}
		free(names[i]);
	}
	free(names);
	if (removed)
		agent_firewall_sweep(a);
	if (removed)
		log_info("agent", "Docker had no address pool left for network %s: removed %d idle users' network%s",
			 keep, removed, removed == 1 ? "" : "s");
	return removed > 0;
}

/* Makes the user's network unless it is known to exist or exists.
 * *asked: whether Docker was asked. */
int agent_network_ensure(struct agent *a, const char *name, const char *driver, const char *cluster,
			 const char *owner_id, bool *asked, struct terr *err)
{
	struct rt_label labels[] = {
		{AGENT_LABEL_OWNER_ID, owner_id},
		{AGENT_LABEL_CLUSTER, cluster},   /* last: left out while unknown */
	};
	struct rt_network_spec ns = {
		.name = name, .driver = driver, .labels = labels,
		.n_labels = sizeof(labels) / sizeof(labels[0]) - (cluster[0] ? 0 : 1),
	};
	/* One at a time: Docker's duplicate check is not atomic, and two
	 * starts of one user would otherwise make two networks of one name. */
	pthread_mutex_lock(&a->net_mu);
	*asked = false;
	int rc = 0;
	if (!net_known_find(a, name)) {
		*asked = true;
		rc = a->rt_ops->network_ensure(a->rt, &ns, err);
		if (rc < 0 && rc != -EEXIST && strstr(err->msg, "pool") && network_reclaim(a, cluster, name))
			rc = a->rt_ops->network_ensure(a->rt, &ns, err);
		struct net_known *grown = rc == 0 ? realloc(a->net_known, (a->n_net_known + 1) * sizeof(*grown)) : NULL;
		if (grown) {
			a->net_known = grown;
			util_strlcpy(grown[a->n_net_known++].name, name, sizeof(grown->name));
		}
	}
	pthread_mutex_unlock(&a->net_mu);
	/* Made or first found by this agent: its drop rules go in before any
	 * container is on it (agent_firewall.c). */
	if (rc == 0 && *asked)
		agent_firewall_isolate_network(a, name);
	if (rc < 0 && driver && !strcmp(driver, "overlay"))
		return terr_prefix(err, "cannot make the session's network across nodes (a multi-node cluster "
				   "session needs the nodes' Docker engines in one swarm: docs/admin.md, \"Cluster "
				   "sessions\")");
	return rc < 0 ? terr_prefix(err, "cannot make the network of the session%s", driver ? "" : "'s owner") : 0;
}

/* A failure worth another ensure and try: the network named at create is
 * gone (another agent on this Docker removed it between our ensure and our
 * start), or has a twin (another agent made it at the same moment as we
 * did: Docker's duplicate check is not atomic), which ensure removes. */
bool agent_network_retry(int rc, const struct terr *err)
{
	return rc < 0 && strstr(err->msg, "network") &&
	       (rc == -ENOENT || strstr(err->msg, "ambiguous"));
}
