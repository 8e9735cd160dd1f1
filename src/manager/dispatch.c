/* The dispatch workers: the slow calls to agents (start and destroy a
 * container, hundreds of milliseconds on Docker), taken from one FIFO job
 * list by `dispatch_workers` threads, each call made without the manager
 * lock (docs/architecture.md, "Dispatch workers"). */
#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/session_spec.h"
#include "common/log.h"
#include "common/pump.h"
#include "common/util.h"
#include "manager/logtail.h"
#include "manager/state.h"

void mgr_enqueue(struct manager *m, enum job_type type, const char *session_id)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j) {
		log_error("manager", "out of memory queueing a job for %s", session_id);
		return;
	}
	j->type = type;
	util_strlcpy(j->session_id, session_id, sizeof(j->session_id));
	if (m->jobs_tail)
		m->jobs_tail->next = j;
	else
		m->jobs_head = j;
	m->jobs_tail = j;
	pthread_cond_signal(&m->jobs_cv);
}

void mgr_enqueue_destroy(struct manager *m, struct msession *s)
{
	if (s->destroy_queued)
		return;
	s->destroy_queued = true;
	mgr_enqueue(m, JOB_DESTROY, s->rec.id);
}

/* The start spec of s, in the one codec that the agent reads
 * (agent/session_spec.h). */
static json_t *session_spec(struct manager *m, struct msession *s)
{
	const struct user_rec *owner = mgr_find_user(m, s->rec.owner_id);
	json_t *env = s->rec.env_json ? json_loads(s->rec.env_json, 0, NULL) : NULL;
	/* owner_id names the user's network on the node; root says who the
	 * session's processes are (the policy was checked at create). */
	struct session_spec spec = {
		.id = s->rec.id, .name = s->rec.name, .owner = owner ? owner->email : "",
		.owner_id = s->rec.owner_id, .root = s->rec.run_as_root, .image = s->rec.image,
		.cpu_m = s->rec.req.cpu_m, .mem = s->rec.req.mem, .fgpu_m = s->rec.req.fgpu_m,
		.env = env, .startup = s->rec.startup_command,
		/* Session apps: the runner's secret (an older session has none,
		 * and then no apps). */
		.app_secret = s->rec.app_secret[0] ? s->rec.app_secret : NULL,
		/* A batch container ends with its command (agent.h). */
		.batch = mgr_session_is_batch(s),
	};
	/* The device shares, with the limits each implies: memory and SMs in
	 * proportion to the share of the device. */
	struct magent *a = mgr_find_agent(m, s->rec.agent_id);
	int64_t per_dev = mgr_per_device_m(m);
	struct session_spec_gpu gpus[MGR_MAX_GPUS];
	for (int i = 0; a && i < s->n_shares; i++) {
		struct mgpu *g = mgr_agent_gpu(a, s->shares[i].uuid);
		/* Of the unit it was placed in: its physical part of the device. */
		int64_t unit = s->shares[i].per_dev_m > 0 ? s->shares[i].per_dev_m : per_dev;
		int64_t mem = g ? (int64_t)((__int128)g->memory * s->shares[i].fgpu_m / unit) : 0;
		int64_t sm = s->shares[i].fgpu_m * 100 / unit;
		gpus[spec.n_gpus++] = (struct session_spec_gpu){
			.index = s->shares[i].index, .uuid = s->shares[i].uuid, .fgpu_m = s->shares[i].fgpu_m,
			.memory_limit = mem, .sm_limit_percent = (int)(sm < 1 ? 1 : sm > 100 ? 100 : sm),
		};
	}
	spec.gpus = gpus;
	/* Its folders (docs/folders.md): host directories under a storage
	 * host, which the agent checks again before it binds them. All of
	 * them, even past what an agent takes: the agent refuses those. */
	json_t *recorded = s->rec.mounts_json ? json_loads(s->rec.mounts_json, 0, NULL) : NULL;
	size_t n_recorded = json_array_size(recorded);
	struct session_spec_mount *mounts = n_recorded ? calloc(n_recorded, sizeof(*mounts)) : NULL;
	if (n_recorded && !mounts) {
		/* Out of memory: no spec, rather than one without its folders. */
		json_decref(recorded);
		json_decref(env);
		return NULL;
	}
	size_t i;
	json_t *x;
	json_array_foreach(recorded, i, x) {
		json_t *source = json_object_get(x, "source"), *target = json_object_get(x, "target");
		json_t *ro = json_object_get(x, "ro");
		/* A record that lacks one of the three is left out, as it always
		 * was; one of the wrong type goes without source and target, and
		 * the agent refuses the start: never a read-write mount for want
		 * of a boolean "ro". */
		if (!source || !target || !ro)
			continue;
		bool ok = json_is_boolean(ro);
		mounts[spec.n_mounts++] = (struct session_spec_mount){
			ok ? json_string_value(source) : NULL, ok ? json_string_value(target) : NULL, json_is_true(ro),
		};
	}
	spec.mounts = mounts;
	/* SSH into it: the session's key pair (a cluster's main holds its
	 * seed), made once here, and the owner's public keys as they are now
	 * (docs/user-guide.md, "Working from your own machine"). */
	const struct msession *main = s->cl_main;
	const struct msession *seeded = mgr_session_is_cluster(s) ? main : s;
	char key[1024], pub[256];
	bool have_key = seeded && seeded->rec.cluster_ssh_seed[0] &&
			mgr_cluster_ssh_keys(seeded->rec.cluster_ssh_seed, key, sizeof(key), pub, sizeof(pub)) == 0;
	if (have_key)
		spec.ssh = (struct session_spec_ssh){.key = key, .pub = pub,
						     .authorized_keys = owner ? owner->ssh_keys : ""};
	/* A cluster session's container: its host name, the session's hosts
	 * and the same key, its containers' to each other (docs/user-guide.md,
	 * "Distributed training"). */
	char host[24], hosts[MGR_CLUSTER_MAX * 8];
	if (mgr_session_is_cluster(s) && main) {
		mgr_cluster_name(s, host, sizeof(host));
		mgr_cluster_hosts(main, hosts, sizeof(hosts));
		spec.cluster = (struct session_spec_cluster){
			.session = main->rec.id, .host = host, .mode = s->rec.cluster_mode, .hosts = hosts,
			.size = s->rec.cluster_size, .rank = mgr_session_is_sub(s) ? s->rec.cluster_idx : 0,
			.ssh_key = have_key ? key : NULL, .ssh_pub = have_key ? pub : NULL,
		};
	}
	json_t *out = session_spec_to_json(&spec);
	OPENSSL_cleanse(key, sizeof(key));
	free(mounts);
	json_decref(recorded);
	json_decref(env);
	return out;
}

/* Where the node's part of a start went, as two PREPARING lines of the
 * history before RUNNING (mgr_start_breakdown splits the container phase
 * at them): the container created, and started. The node's times are
 * its own clock's durations; they are placed back from the answer's
 * arrival (so the first stretch also holds the request's way there and
 * the answer's way back), never before the request was sent. An agent
 * that gave no times adds no line. */
static void note_node_times(struct manager *m, struct msession *s, const char *agent_name,
			    const struct agent_start_times *t, int64_t asked_at, int64_t answered_at)
{
	if (t->total_ms <= 0)
		return;
	int64_t started = answered_at - t->port_ms;
	int64_t created = started - t->start_ms;
	if (created < asked_at)
		created = asked_at;
	if (started < created)
		started = created;
	char line[sizeof(s->rec.status_info)];
	snprintf(line, sizeof(line), MGR_LINE_CREATED "%s (image %" PRId64 " ms, network %" PRId64
		 " ms, Docker's create %" PRId64 " ms)", agent_name, t->image_ms, t->network_ms, t->create_ms);
	mgr_session_note_past(m, s, created, line);
	snprintf(line, sizeof(line), MGR_LINE_STARTED "%s (Docker's start %" PRId64 " ms)", agent_name,
		 t->start_ms);
	mgr_session_note_past(m, s, started, line);
}

static void run_start(struct manager *m, const char *sid)
{
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_find_session(m, sid);
	if (!s || s->rec.status != SS_SCHEDULED) {
		pthread_mutex_unlock(&m->mu);
		return;
	}
	struct magent *a = mgr_find_agent(m, s->rec.agent_id);
	if (!a) {
		mgr_set_status(m, s, SS_ERROR, "node %s is no longer registered", s->rec.agent_id);
		pthread_mutex_unlock(&m->mu);
		return;
	}
	mgr_set_status(m, s, SS_PREPARING, "creating the container on node %s", a->rec.id);
	json_t *spec = session_spec(m, s);
	const struct agent_link_ops *link = a->link;
	void *ctx = a->link_ctx;
	char agent_name[STORE_NAME_MAX], image[sizeof(s->rec.image)];
	util_strlcpy(agent_name, a->rec.id, sizeof(agent_name));
	util_strlcpy(image, s->rec.image, sizeof(image));
	s->start_inflight = true;
	pthread_mutex_unlock(&m->mu);

	char cid[RT_ID_MAX] = "", endpoint[AGENT_APP_ENDPOINT_MAX] = "";
	struct agent_start_times times = {0};
	struct terr err = {0};
	/* An image the node lacks comes from the cluster registry first. */
	int rc = mgr_pull_for_start(m, sid, link, ctx, agent_name, image, &err);
	int64_t asked_at = util_now_ms();
	if (rc == 0)
		rc = link->start(ctx, spec, cid, endpoint, &times, &err);
	int64_t answered_at = util_now_ms();
	json_decref(spec);

	pthread_mutex_lock(&m->mu);
	s->start_inflight = false;
	if (rc == 0)
		util_strlcpy(s->rec.container_id, cid, sizeof(s->rec.container_id));
	if (session_status_ending(s->rec.status)) {
		/* Deleted while starting: now that the container is known,
		 * remove it. */
		mgr_enqueue_destroy(m, s);
	} else if (s->rec.status == SS_PREPARING) {
		if (rc == 0) {
			mgr_apps_set_endpoint(m, s, endpoint);
			note_node_times(m, s, agent_name, &times, asked_at, answered_at);
			/* RUNNING; a cluster session's containers once all run. */
			mgr_cluster_started(m, s, agent_name);
		}
		else
			mgr_set_status(m, s, SS_ERROR, "could not start on node %s: %s", agent_name, err.msg);
	}
	pthread_mutex_unlock(&m->mu);
}

/* Keeps the last LOGTAIL_LINES lines of the container's log with the
 * session (manager/logtail.h) before the container goes: called without
 * mu. A log that cannot be read is logged and left: removing the
 * container matters more. */
static void keep_log_tail(struct manager *m, const struct agent_link_ops *link, void *ctx, const char *sid,
			  const char *cid)
{
	struct pump *p = NULL;
	struct terr err = {0};
	if (link->logs(ctx, cid, LOGTAIL_LINES, false, &p, &err) < 0) {
		log_warn("manager", "cannot read the log of session %.8s before removing its container: %s", sid,
			 err.msg);
		return;
	}
	/* 200 lines are seldom more than a few KiB; a log of long lines
	 * keeps its last RAW_MAX bytes, of which logtail_tidy keeps the
	 * last STORE_LOG_TAIL_MAX. */
	enum { RAW_MAX = 4 * STORE_LOG_TAIL_MAX };
	char *buf = malloc(2 * RAW_MAX);
	size_t n = 0;
	long got = 0;
	while (buf && (got = pump_read(p, buf + n, 2 * RAW_MAX - n, 5000)) > 0) {
		n += (size_t)got;
		if (n == 2 * RAW_MAX) {
			memmove(buf, buf + RAW_MAX, RAW_MAX);
			n = RAW_MAX;
		}
	}
	if (got < 0)
		log_warn("manager", "the log of session %.8s could not be read to its end before removing its "
			 "container (%s); keeping what came", sid,
			 got == -ETIMEDOUT ? "no data for 5 s" : pump_error(p)->msg);
	pump_close(p);
	char *text = buf ? logtail_tidy(buf, n, LOGTAIL_LINES, STORE_LOG_TAIL_MAX) : NULL;
	free(buf);
	if (!text) {
		log_warn("manager", "out of memory keeping the log of session %.8s", sid);
		return;
	}
	struct log_tail_rec l = {.text = text, .saved_ms = util_now_ms()};
	util_strlcpy(l.session_id, sid, sizeof(l.session_id));
	pthread_mutex_lock(&m->mu);
	if (m->so->log_tail_put(m->store, &l, &err) < 0)
		log_warn("manager", "cannot save the log of session %.8s: %s", sid, err.msg);
	pthread_mutex_unlock(&m->mu);
	free(text);
}

static void run_destroy(struct manager *m, const char *sid)
{
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_find_session(m, sid);
	if (!s) {
		pthread_mutex_unlock(&m->mu);
		return;
	}
	if (s->start_inflight) {
		/* The start's completion queues this again with the container id. */
		s->destroy_queued = false;
		pthread_mutex_unlock(&m->mu);
		return;
	}
	struct magent *a = mgr_find_agent(m, s->rec.agent_id);
	if (!a) {
		if (s->rec.status == SS_TERMINATING)
			mgr_set_status(m, s, SS_TERMINATED, "terminated (node %s is gone)", s->rec.agent_id);
		else if (s->rec.status == SS_PREEMPTED)
			mgr_session_preempt_done(m, s);
		s->destroy_queued = false;
		pthread_mutex_unlock(&m->mu);
		return;
	}
	if (!a->alive) {
		/* Not now: a call to a dead node would hold a dispatcher for its
		 * whole timeout. Its re-registration reconciles this session. */
		s->destroy_queued = false;
		if (session_status_ending(s->rec.status)) {
			snprintf(s->rec.status_info, sizeof(s->rec.status_info),
				 "%s: node %s is LOST; the container is removed when it returns",
				 s->rec.status == SS_PREEMPTED ? "preempted" : "terminating", a->rec.id);
			mgr_persist(m, s);
		}
		pthread_mutex_unlock(&m->mu);
		return;
	}
	const struct agent_link_ops *link = a->link;
	void *ctx = a->link_ctx;
	char cid[RT_ID_MAX];
	util_strlcpy(cid, s->rec.container_id, sizeof(cid));
	pthread_mutex_unlock(&m->mu);

	struct terr err = {0};
	/* A link that reads no logs (some tests' stand-ins) keeps none. */
	if (cid[0] && link->logs)
		keep_log_tail(m, link, ctx, sid, cid);
	int rc = link->destroy(ctx, sid, cid, &err);

	pthread_mutex_lock(&m->mu);
	s->destroy_queued = false;
	if (rc < 0) {
		log_warn("manager", "removing the container of %s failed (will retry): %s", s->rec.name, err.msg);
		if (session_status_ending(s->rec.status)) {
			snprintf(s->rec.status_info, sizeof(s->rec.status_info),
				 "%s: could not remove the container yet (%.300s); retrying",
				 s->rec.status == SS_PREEMPTED ? "preempted" : "terminating", err.msg);
			mgr_persist(m, s);
		}
	} else {
		s->rec.container_id[0] = '\0';
		if (s->rec.status == SS_TERMINATING && s->cl_error[0])
			/* A cluster session ended by one container's failure. */
			mgr_set_status(m, s, SS_ERROR, "%s", s->cl_error);
		else if (s->rec.status == SS_TERMINATING && s->end_reason[0])
			mgr_set_status(m, s, SS_TERMINATED, "terminated: %s; container removed", s->end_reason);
		else if (s->rec.status == SS_TERMINATING)
			mgr_set_status(m, s, SS_TERMINATED, "terminated on request; container removed");
		else if (s->rec.status == SS_PREEMPTED)
			mgr_session_preempt_done(m, s);
		else
			mgr_persist(m, s);
	}
	pthread_mutex_unlock(&m->mu);
}

static void *worker_main(void *arg)
{
	struct manager *m = arg;
	pthread_mutex_lock(&m->mu);
	for (;;) {
		while (!m->jobs_head && !m->stopping)
			pthread_cond_wait(&m->jobs_cv, &m->mu);
		if (m->stopping)
			break;
		struct job *j = m->jobs_head;
		m->jobs_head = j->next;
		if (!m->jobs_head)
			m->jobs_tail = NULL;
		pthread_mutex_unlock(&m->mu);
		switch (j->type) {
		case JOB_START: run_start(m, j->session_id); break;
		case JOB_DESTROY: run_destroy(m, j->session_id); break;
		case JOB_COMMIT: mgr_run_commit(m, j->session_id); break;
		case JOB_PULL: mgr_run_pull(m, j->session_id); break;
		}
		free(j);
		pthread_mutex_lock(&m->mu);
	}
	pthread_mutex_unlock(&m->mu);
	return NULL;
}

int mgr_dispatch_start(struct manager *m, struct terr *err)
{
	m->workers = calloc((size_t)m->cfg.dispatch_workers, sizeof(pthread_t));
	if (!m->workers)
		return terr_set(err, ENOMEM, "out of memory");
	for (int i = 0; i < m->cfg.dispatch_workers; i++) {
		if (pthread_create(&m->workers[i], NULL, worker_main, m) != 0)
			return terr_set(err, EAGAIN, "cannot start dispatcher threads");
		m->n_workers = i + 1;
	}
	return 0;
}

void mgr_dispatch_join(struct manager *m)
{
	for (int i = 0; i < m->n_workers; i++)
		pthread_join(m->workers[i], NULL);
	m->n_workers = 0;
	free(m->workers);
	m->workers = NULL;
	for (struct job *j = m->jobs_head, *next; j; j = next) {
		next = j->next;
		free(j);
	}
	m->jobs_head = m->jobs_tail = NULL;
}
