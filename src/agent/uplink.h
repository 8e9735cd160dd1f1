/* An agent daemon's uplink to the manager (`tessera agent`; the agent of
 * `tessera server` is attached in-process instead): a thread that
 * registers with the manager, retrying until it answers; then sends the
 * container-died events queued by the agent's watcher (an event the
 * manager does not take is kept and sent again, in order); and sends a
 * heartbeat every interval the manager gave at registration. A heartbeat
 * answered 404 (the manager restarted, or declared the agent LOST) makes
 * it register again, which reconciles the node's containers. Calls are
 * signed with the cluster secret under the credential "agent:<id>". */
#ifndef TESSERA_AGENT_UPLINK_H
#define TESSERA_AGENT_UPLINK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

struct uplink;

struct agent;

struct uplink_config {
	const char *manager;         /* the manager's API URL */
	const char *cluster_secret;
	const char *agent_id;
	const char *advertise_url;   /* sent as "url": where the manager reaches the agent's RPC */
	/* The agent whose watcher feeds the queue: uplink_start starts the
	 * watcher (agent_watch_start with uplink_event) before the first
	 * registration, so no container that ends after the registration's
	 * list of containers goes unreported. NULL: events only come from
	 * uplink_event calls. */
	struct agent *agent;
	/* The registration body without "url" (new reference). NULL:
	 * agent_describe of agent. */
	int (*describe)(void *ctx, json_t **out, struct terr *err);
	void *ctx;
	int retry_ms;  /* between registration attempts; 0: 1000 */
	int poll_ms;   /* how often queued events go out; 0: 200 */
};

/* Starts the uplink thread; the first registration is tried at once. The
 * strings of cfg, the agent and ctx are borrowed and must outlive the
 * uplink. */
int uplink_start(struct uplink **out, const struct uplink_config *cfg, struct terr *err);

/* Queues an event for the manager (an agent_event_fn, agent/agent.h; ud
 * is the uplink). event is borrowed (the queue keeps a deep copy).
 * Callable from any thread until uplink_free. */
void uplink_event(void *ud, const char *agent_id, json_t *event);

/* Ends the thread and waits for it (a call in flight finishes first, at
 * most its timeout). Events queued afterwards are kept, not sent. */
void uplink_stop(struct uplink *u);
/* Frees u (stopping it first if need be). With cfg.agent, only after
 * agent_close: the agent's watcher calls into the uplink until then.
 * NULL is a no-op. */
void uplink_free(struct uplink *u);

/* Whether the last registration holds (no 404 heartbeat since). */
bool uplink_registered(struct uplink *u);
/* Events waiting to be sent. */
size_t uplink_pending(struct uplink *u);

#endif
