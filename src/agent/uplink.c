#include "agent/uplink.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/agent.h"
#include "agent/stats.h"
#include "common/apiclient.h"
#include "common/log.h"
#include "common/util.h"

struct uplink {
	struct uplink_config cfg;
	struct api_client client;
	char credential[96];
	char events_path[160];
	char heartbeat_path[160];
	pthread_t thread;
	bool running;           /* the thread was started and not joined */
	int interval_ms;        /* heartbeat interval; the manager's at registration */
	pthread_mutex_t mu;     /* guards what follows */
	pthread_cond_t cv;      /* signalled by uplink_stop and at go */
	bool go;                /* set by uplink_start once the uplink may call out */
	bool stopping;
	bool registered;
	json_t *pending;        /* array of events not yet taken by the manager */
	/* The last round of live usage not yet sent (agent/stats.h): sent
	 * with the next heartbeat, which goes at once. A newer round replaces
	 * it: usage is not worth a queue, unlike events. */
	json_t *stats;
};

static int describe_agent(void *ctx, json_t **out, struct terr *err)
{
	return agent_describe(ctx, out, err);
}

void uplink_event(void *ud, const char *agent_id, json_t *event)
{
	(void)agent_id;
	struct uplink *u = ud;
	/* A copy, not a reference: the watcher thread drops its reference
	 * after this call, and jansson's release-only decrement does not
	 * order that thread's last use before the uplink thread's free of the
	 * shared object (a data race under ThreadSanitizer). The copy is
	 * handed over under the mutex. */
	json_t *copy = json_deep_copy(event);
	if (!copy)
		return;
	const char *kind = json_string_value(json_object_get(event, "event"));
	pthread_mutex_lock(&u->mu);
	if (kind && !strcmp(kind, AGENT_EVENT_STATS)) {
		json_decref(u->stats);
		u->stats = copy;
	} else {
		json_array_append_new(u->pending, copy);
	}
	pthread_mutex_unlock(&u->mu);
}

/* Sleeps ms or until uplink_stop; true when stopping. */
static bool uplink_wait(struct uplink *u, int ms)
{
	struct timespec until;
	util_deadline_ms(&until, ms);
	pthread_mutex_lock(&u->mu);
	while (!u->stopping && pthread_cond_timedwait(&u->cv, &u->mu, &until) == 0)
		;
	bool stop = u->stopping;
	pthread_mutex_unlock(&u->mu);
	return stop;
}

static void set_registered(struct uplink *u, bool v)
{
	pthread_mutex_lock(&u->mu);
	u->registered = v;
	pthread_mutex_unlock(&u->mu);
}

static int uplink_register(struct uplink *u, struct terr *err)
{
	json_t *desc = NULL, *reply = NULL;
	int rc = u->cfg.describe(u->cfg.ctx, &desc, err);
	if (rc < 0)
		return rc;
	json_object_set_new(desc, "url", json_string(u->cfg.advertise_url));
	rc = api_call(&u->client, "POST", "/v1/agents/register", desc, 15000, &reply, NULL, err);
	json_decref(desc);
	if (rc == 0) {
		int iv = (int)json_integer_value(json_object_get(reply, "heartbeat_interval_ms"));
		if (iv > 0)
			u->interval_ms = iv;
		/* The manager's cluster id, for the containers' labels. */
		if (u->cfg.agent)
			agent_set_cluster_id(u->cfg.agent, json_string_value(json_object_get(reply, "cluster_id")));
	}
	json_decref(reply);
	return rc;
}

/* Sends the queued events in order; the first the manager does not take
 * and all after it go back to the head of the queue, before any queued
 * meanwhile. */
static void uplink_send_events(struct uplink *u)
{
	pthread_mutex_lock(&u->mu);
	json_t *batch = u->pending;
	u->pending = json_array();
	pthread_mutex_unlock(&u->mu);
	size_t i;
	json_t *ev;
	struct terr err = {0};
	json_array_foreach(batch, i, ev) {
		if (api_call(&u->client, "POST", u->events_path, ev, 10000, NULL, NULL, &err) < 0) {
			log_warn("agent", "cannot report an event (kept for retry): %s", err.msg);
			pthread_mutex_lock(&u->mu);
			json_t *keep = json_array();
			for (size_t k = i; k < json_array_size(batch); k++)
				json_array_append(keep, json_array_get(batch, k));
			json_array_extend(keep, u->pending);
			json_decref(u->pending);
			u->pending = keep;
			pthread_mutex_unlock(&u->mu);
			break;
		}
	}
	json_decref(batch);
}

static void *uplink_main(void *arg)
{
	struct uplink *u = arg;
	int retry_ms = u->cfg.retry_ms > 0 ? u->cfg.retry_ms : 1000;
	int poll_ms = u->cfg.poll_ms > 0 ? u->cfg.poll_ms : 200;
	bool registered = false;
	int64_t next_beat = 0;
	struct terr err = {0};
	pthread_mutex_lock(&u->mu);
	while (!u->go && !u->stopping)
		pthread_cond_wait(&u->cv, &u->mu);
	bool stop = u->stopping;
	pthread_mutex_unlock(&u->mu);
	if (stop)
		return NULL;
	for (bool first = true;; first = false) {
		/* Register at once; afterwards wake often enough to send events
		 * promptly, and retry a failed registration every retry_ms. */
		if (!first && uplink_wait(u, registered ? poll_ms : retry_ms))
			break;
		int64_t now = util_mono_ms();
		if (!registered) {
			if (uplink_register(u, &err) == 0) {
				registered = true;
				set_registered(u, true);
				next_beat = now + u->interval_ms;
				log_info("agent", "registered with %s", u->cfg.manager);
			} else {
				log_warn("agent", "cannot register with the manager (retrying): %s", err.msg);
			}
			continue;
		}
		/* Events first: they free resources for others. */
		uplink_send_events(u);
		pthread_mutex_lock(&u->mu);
		json_t *stats = u->stats;
		u->stats = NULL;
		pthread_mutex_unlock(&u->mu);
		if (now < next_beat && !stats)
			continue;
		next_beat = now + u->interval_ms;
		json_t *body = json_object(), *reply = NULL;
		if (stats)
			json_object_set_new(body, "stats", stats);
		long status = 0;
		if (api_call(&u->client, "POST", u->heartbeat_path, body, 10000, &reply, &status, &err) < 0) {
			log_warn("agent", "heartbeat failed: %s", err.msg);
			if (status == 404) {
				/* The manager wants a fresh registration. */
				registered = false;
				set_registered(u, false);
			}
		}
		json_decref(body);
		json_decref(reply);
	}
	return NULL;
}

int uplink_start(struct uplink **out, const struct uplink_config *cfg, struct terr *err)
{
	if (!cfg->manager || !cfg->cluster_secret || !cfg->agent_id || !cfg->advertise_url ||
	    (!cfg->describe && !cfg->agent))
		return terr_set(err, EINVAL, "uplink: manager, cluster_secret, agent_id, advertise_url "
				"and an agent or a describe function are required");
	struct uplink *u = calloc(1, sizeof(*u));
	if (!u)
		return terr_set(err, ENOMEM, "out of memory");
	u->cfg = *cfg;
	if (!u->cfg.describe) {
		u->cfg.describe = describe_agent;
		u->cfg.ctx = cfg->agent;
	}
	u->interval_ms = 2000;
	snprintf(u->credential, sizeof(u->credential), "agent:%s", cfg->agent_id);
	snprintf(u->events_path, sizeof(u->events_path), "/v1/agents/%s/events", cfg->agent_id);
	snprintf(u->heartbeat_path, sizeof(u->heartbeat_path), "/v1/agents/%s/heartbeat", cfg->agent_id);
	u->client = (struct api_client){.endpoint = cfg->manager, .access_key = u->credential,
					.secret_key = cfg->cluster_secret};
	pthread_mutex_init(&u->mu, NULL);
	util_cond_init_mono(&u->cv);
	u->pending = json_array();
	if (!u->pending) {
		uplink_free(u);
		return terr_set(err, ENOMEM, "out of memory");
	}
	if (pthread_create(&u->thread, NULL, uplink_main, u) != 0) {
		uplink_free(u);
		return terr_set(err, EAGAIN, "cannot start the uplink thread");
	}
	u->running = true;
	/* The watcher before the first registration; and the thread before
	 * the watcher, so that once the watcher holds u nothing can fail and
	 * free it. */
	int rc = cfg->agent ? agent_watch_start(cfg->agent, uplink_event, u, err) : 0;
	if (rc < 0) {
		uplink_free(u);
		return rc;
	}
	pthread_mutex_lock(&u->mu);
	u->go = true;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	*out = u;
	return 0;
}

void uplink_stop(struct uplink *u)
{
	if (!u || !u->running)
		return;
	pthread_mutex_lock(&u->mu);
	u->stopping = true;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	pthread_join(u->thread, NULL);
	u->running = false;
}

void uplink_free(struct uplink *u)
{
	if (!u)
		return;
	uplink_stop(u);
	json_decref(u->pending);
	json_decref(u->stats);
	pthread_cond_destroy(&u->cv);
	pthread_mutex_destroy(&u->mu);
	free(u);
}

bool uplink_registered(struct uplink *u)
{
	pthread_mutex_lock(&u->mu);
	bool r = u->registered;
	pthread_mutex_unlock(&u->mu);
	return r;
}

size_t uplink_pending(struct uplink *u)
{
	pthread_mutex_lock(&u->mu);
	size_t n = json_array_size(u->pending);
	pthread_mutex_unlock(&u->mu);
	return n;
}
