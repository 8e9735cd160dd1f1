/* The manager's state and its life cycle: manager_open loads the state
 * from the store and starts the scheduler and the dispatch workers;
 * manager_serve starts the HTTP API (api.c) and writes admin.conf;
 * manager_close stops it all. Here too: the one place that changes a
 * session's status (mgr_set_status, which moves resources with it), the
 * device shares, and the change counter that long polls and event streams
 * wait on. The state itself is in state.h; sessions.c, agents.c, users.c,
 * settings.c, scheduler.c and dispatch.c work on it by concern. */
#include "manager/manager.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/ratelimit.h"
#include "common/conf.h"
#include "common/redis.h"
#include "common/jsonutil.h"
#include "common/etcd.h"
#include "common/log.h"
#include "common/sign.h"
#include "common/util.h"
#include "manager/http/internal.h"
#include "manager/state.h"
#include "store/migrate.h"

/* ---------- rendering ---------- */

json_t *mgr_res_json(const struct res *r)
{
	return json_pack("{s:o,s:I,s:o}", "cpu", jsonutil_milli(r->cpu_m), "mem", (json_int_t)r->mem,
			 "fgpu", jsonutil_milli(r->fgpu_m));
}

json_t *mgr_time_json(int64_t ms)
{
	if (!ms)
		return json_null();
	char buf[40];
	util_format_time_ms(ms, buf, sizeof(buf));
	return json_string(buf);
}

/* ---------- fGPU ---------- */

int64_t mgr_per_device_m(const struct manager *m)
{
	return m->settings.fgpu_per_device * 1000;
}

void mgr_shares_to_json(struct msession *s)
{
	free(s->rec.alloc_json);
	s->rec.alloc_json = NULL;
	if (s->n_shares == 0)
		return;
	json_t *arr = json_array();
	for (int i = 0; i < s->n_shares; i++) {
		json_t *o = json_pack("{s:i,s:s,s:I}", "index", s->shares[i].index, "uuid", s->shares[i].uuid,
				      "fgpu_milli", (json_int_t)s->shares[i].fgpu_m);
		if (s->shares[i].per_dev_m > 0)
			json_object_set_new(o, "per_device_milli", json_integer(s->shares[i].per_dev_m));
		json_array_append_new(arr, o);
	}
	s->rec.alloc_json = jsonutil_dump(arr);
	json_decref(arr);
}

void mgr_shares_from_json(struct msession *s)
{
	s->n_shares = 0;
	json_t *arr = s->rec.alloc_json ? json_loads(s->rec.alloc_json, 0, NULL) : NULL;
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v) {
		if (s->n_shares >= MGR_MAX_GPUS)
			break;
		struct mshare *sh = &s->shares[s->n_shares++];
		sh->index = (int)json_integer_value(json_object_get(v, "index"));
		util_strlcpy(sh->uuid, json_string_value(json_object_get(v, "uuid")) ?: "", sizeof(sh->uuid));
		sh->fgpu_m = json_integer_value(json_object_get(v, "fgpu_milli"));
		sh->per_dev_m = json_integer_value(json_object_get(v, "per_device_milli"));
	}
	json_decref(arr);
}

int64_t mgr_share_now_m(const struct manager *m, const struct mshare *sh)
{
	int64_t now = mgr_per_device_m(m);
	if (sh->per_dev_m <= 0 || sh->per_dev_m == now)
		return sh->fgpu_m;
	/* fgpu_m / per_dev_m of the device, in today's unit, rounded up: a
	 * running session keeps its physical share, and the node counts it
	 * at least whole. */
	return (int64_t)(((__int128)sh->fgpu_m * now + sh->per_dev_m - 1) / sh->per_dev_m);
}

int64_t mgr_session_fgpu_now_m(const struct manager *m, const struct msession *s)
{
	if (s->n_shares == 0)
		return s->rec.req.fgpu_m;   /* not placed yet: as asked */
	int64_t sum = 0;
	for (int i = 0; i < s->n_shares; i++)
		sum += mgr_share_now_m(m, &s->shares[i]);
	return sum;
}

/* Moves a session's device shares in or out of its agent's devices. */
void mgr_shares_move(const struct manager *m, struct magent *a, const struct msession *s, int sign)
{
	for (int i = 0; i < s->n_shares; i++) {
		struct mgpu *g = mgr_agent_gpu(a, s->shares[i].uuid);
		if (g)
			g->used_m += sign * mgr_share_now_m(m, &s->shares[i]);
	}
}

void mgr_held_move(const struct manager *m, struct magent *a, const struct msession *s, int sign)
{
	struct res held = s->rec.req;
	held.fgpu_m = mgr_session_fgpu_now_m(m, s);
	if (sign > 0)
		res_add(&a->used, &held);
	else
		res_sub(&a->used, &held);
	mgr_shares_move(m, a, s, sign);
}

/* ---------- state changes ---------- */

void mgr_persist(struct manager *m, struct msession *s)
{
	mgr_session_changed(s);
	struct terr err = {0};
	if (m->so->session_put(m->store, &s->rec, &err) < 0)
		log_error("manager", "cannot save session %s: %s", s->rec.name, err.msg);
}

void mgr_wake_scheduler(struct manager *m)
{
	m->sched_dirty = true;
	pthread_cond_signal(&m->wake);
}

void mgr_set_status(struct manager *m, struct msession *s, enum session_status st, const char *fmt, ...)
{
	enum session_status old = s->rec.status;
	/* Kills held back by the OOM lines' window go into the history
	 * before its end does. */
	if (session_status_final(st) && !session_status_final(old))
		mgr_oom_flush(m, s);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->rec.status_info, sizeof(s->rec.status_info), fmt, ap);
	va_end(ap);
	s->rec.status = st;
	int64_t now = util_now_ms();
	if (old == SS_PENDING && st == SS_SCHEDULED && s->rec.created_ms && now >= s->rec.created_ms)
		metrics_hist_observe(&m->pending_hist, (double)(now - s->rec.created_ms) / 1000.0);
	if (st == SS_RUNNING && !s->rec.started_ms)
		s->rec.started_ms = now;
	if (st == SS_RUNNING && old != SS_RUNNING)
		s->running_since_ms = now;
	if (session_status_final(st) && !s->rec.terminated_ms)
		s->rec.terminated_ms = now;
	/* Its scheduling history is for while it waits and just after it
	 * started; an ended session's memory is given back. */
	if (session_status_final(st))
		qhist_free(&s->qhist);
	if (st != SS_PENDING)
		s->queue_pos = 0;

	/* Resources follow the state: held from placement until the container
	 * is gone. The one place that moves them. */
	struct magent *a = s->rec.agent_id[0] ? mgr_find_agent(m, s->rec.agent_id) : NULL;
	if (a && !session_status_holds(old) && session_status_holds(st)) {
		mgr_held_move(m, a, s, +1);
		a->n_sessions++;
	} else if (a && session_status_holds(old) && !session_status_holds(st)) {
		mgr_held_move(m, a, s, -1);
		a->n_sessions--;
		mgr_wake_scheduler(m);
	}
	m->version++;
	/* Its app routes go when it leaves RUNNING (docs/apps.md), but for
	 * LOST: a node back in time gives the session, and its users' open
	 * links and cookies, back (the proxy serves RUNNING sessions only). */
	if ((old == SS_RUNNING || old == SS_LOST) && st != SS_RUNNING && st != SS_LOST)
		mgr_apps_left_running(m, s);
	if (old == SS_RUNNING && st != SS_RUNNING)
		mgr_usage_left_running(m, s);

	mgr_persist(m, s);
	if (old != st) {
		struct history_rec h = {.status = st, .at_ms = now};
		util_strlcpy(h.info, s->rec.status_info, sizeof(h.info));
		struct terr err = {0};
		if (m->so->history_add(m->store, s->rec.id, &h, &err) < 0)
			log_error("manager", "cannot save history of %s: %s", s->rec.name, err.msg);
		log_info("manager", "session %s (%.8s): %s -> %s: %s", s->rec.name, s->rec.id,
			 session_status_name(old), session_status_name(st), s->rec.status_info);
		/* One container of a cluster session ending ends the others. */
		mgr_cluster_follow(m, s, old);
	}
	pthread_cond_broadcast(&m->changed);
}

/* ---------- startup ---------- */

static int load_user(void *ud, const struct user_rec *u)
{
	return mgr_user_load(ud, u);
}

static int load_key(void *ud, const struct keypair_rec *k)
{
	return mgr_key_load(ud, k);
}

static int load_session(void *ud, const struct session_rec *r)
{
	struct manager *m = ud;
	struct msession *s = calloc(1, sizeof(*s));
	if (s) {
		/* Its history's notes are counted when one is next added; its
		 * OOM kills so far were told before the restart. */
		s->notes = -1;
		s->oom_noted = r->oom_kills;
	}
	if (!s || session_rec_copy(&s->rec, r) < 0 || mgr_session_append(m, s) < 0) {
		if (s)
			session_rec_clear(&s->rec);
		free(s);
		return -ENOMEM;
	}
	return 0;
}

static int load_agent(void *ud, const struct agent_rec *r)
{
	return mgr_agent_load(ud, r);
}

/* This installation's id: made at first start, kept in the store (a
 * backup restores it with the sessions it names). A JSON string, as the
 * settings beside it are JSON. */
static int load_cluster_id(struct manager *m, struct terr *err)
{
	char *text = NULL;
	struct terr e = {0};
	int rc = m->so->kv_get(m->store, "cluster_id", &text, &e);
	if (rc == 0) {
		json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
		free(text);
		rc = json_is_string(v) && json_string_length(v) > 0 && json_string_length(v) < sizeof(m->cluster_id)
			? util_strlcpy(m->cluster_id, json_string_value(v), sizeof(m->cluster_id))
			: terr_set(err, EINVAL, "the stored cluster_id is not a string of 1 to %zu characters",
				   sizeof(m->cluster_id) - 1);
		json_decref(v);
		return rc < 0 ? rc : 0;
	}
	if (rc != -ENOENT) {
		*err = e;
		return rc;
	}
	char id[UTIL_ID_LEN + 1], stored[UTIL_ID_LEN + 3];
	if ((rc = util_new_id(id, err)) < 0)
		return rc;
	snprintf(stored, sizeof(stored), "\"%s\"", id);
	if ((rc = m->so->kv_set(m->store, "cluster_id", stored, err)) < 0)
		return rc;
	util_strlcpy(m->cluster_id, id, sizeof(m->cluster_id));
	log_info("manager", "first start: this installation is cluster %s", id);
	return 0;
}

/* Failed password logins: LOGIN_MAX_FAILURES per account and client
 * address within the window; an address may try a few emails (a shared
 * lab NAT), not hundreds. A limit per email alone would let anyone who
 * knew an email lock its owner out; guessing one account from many
 * addresses is bounded by the per-address limit and by the cost of each
 * argon2id check. */
#define LOGIN_MAX_FAILURES 5
#define LOGIN_WINDOW_MS (15 * 60 * 1000)

void mgr_login_limits(struct manager *m, struct ratelimit **pair, struct ratelimit **addr)
{
	*pair = m->login_fail_pair;
	*addr = m->login_fail_addr;
}

void mgr_redis_outcome(struct manager *m, int rc, const struct terr *err)
{
	bool was_down = atomic_exchange(&m->redis_down, rc < 0);
	if (rc < 0 && !was_down)
		log_warn("manager",
			 "%s; heartbeats, login limits and usage samples are kept in this manager's memory until it answers",
			 err && err->msg[0] ? err->msg : "Redis does not answer");
	else if (rc >= 0 && was_down)
		log_info("manager", "Redis at %s answers again", redis_addr(m->redis));
}

/* Redis, when configured: the client (it connects on first use, so the
 * manager starts while Redis is down), the limiters counting there, and
 * what Redis remembers of the agents' heartbeats. */
static int open_redis(struct manager *m, struct terr *err)
{
	m->login_fail_pair = ratelimit_new(LOGIN_MAX_FAILURES, LOGIN_WINDOW_MS);
	m->login_fail_addr = ratelimit_new(4 * LOGIN_MAX_FAILURES, LOGIN_WINDOW_MS);
	if (!m->login_fail_pair || !m->login_fail_addr)
		return terr_set(err, ENOMEM, "out of memory");
	if (!m->cfg.redis_url || !*m->cfg.redis_url)
		return 0;
	int rc = redis_open(m->cfg.redis_url, &m->redis, err);
	if (rc < 0)
		return terr_prefix(err, "redis");
	ratelimit_use_redis(m->login_fail_pair, m->redis, "login-pair");
	ratelimit_use_redis(m->login_fail_addr, m->redis, "login-addr");
	/* The usage history moves to Redis (opened in memory at first:
	 * nothing was pushed yet). */
	mgr_usage_close(m);
	if ((rc = mgr_usage_open(m, err)) < 0)
		return rc;
	struct terr e = {0};
	rc = redis_ping(m->redis, &e);
	mgr_redis_outcome(m, rc, &e);
	if (rc == -EACCES)
		return terr_set(err, EACCES, "%s (check the password in the redis URL)", e.msg);
	if (rc == 0)
		log_info("manager", "Redis at %s: heartbeats, login limits and usage history are kept there",
			 redis_addr(m->redis));
	mgr_agents_heartbeats_from_redis(m);
	return 0;
}

int manager_open(struct manager **out, const struct manager_config *cfg, struct terr *err)
{
	struct manager *m = calloc(1, sizeof(*m));
	if (!m)
		return terr_set(err, ENOMEM, "out of memory");
	m->ix_gen = 1;   /* sessions start at 0: their indexes are looked up */
	m->opened_ms = util_now_ms();
	m->cfg = *cfg;
	if (m->cfg.heartbeat_interval_ms <= 0)
		m->cfg.heartbeat_interval_ms = 2000;
	if (m->cfg.lost_after_heartbeats <= 0)
		m->cfg.lost_after_heartbeats = 3;
	if (m->cfg.dispatch_workers <= 0)
		m->cfg.dispatch_workers = 4;
	if (cfg->selector && !sched_selector_find(cfg->selector)) {
		free(m);
		return terr_set(err, EINVAL, "unknown agent selector '%s' (known: concentrated, dispersed)", cfg->selector);
	}
	if (cfg->etcd && etcd_check_endpoint(cfg->etcd, err) < 0) {
		free(m);
		return -EINVAL;
	}
	util_strlcpy(m->data_dir, cfg->data_dir, sizeof(m->data_dir));
	m->cfg.data_dir = m->data_dir;
	int arc = mgr_apps_open(m, err);
	if (arc < 0) {
		free(m);
		return arc;
	}
	if ((arc = mgr_usage_open(m, err)) < 0 || (arc = mgr_metrics_open(m, err)) < 0) {
		mgr_usage_close(m);
		mgr_apps_free(m);
		free(m);
		return arc;
	}
	pthread_mutex_init(&m->mu, NULL);
	pthread_mutex_init(&m->reg_mu, NULL);
	pthread_rwlock_init(&m->users_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->wake, &ca);
	pthread_cond_init(&m->changed, &ca);
	pthread_cond_init(&m->jobs_cv, &ca);
	pthread_condattr_destroy(&ca);

	int rc;
	if ((rc = util_mkdir_p(m->data_dir, 0700, err)) < 0)
		goto fail;
	if ((rc = store_open(cfg->store, m->data_dir, &m->so, &m->store, m->store_where, sizeof(m->store_where),
			     err)) < 0)
		goto fail;
	/* One active manager per database: wait here as a standby while
	 * another is (store.h, lead), before reading anything. */
	if (m->so->lead && (rc = m->so->lead(m->store, cfg->standby_wait, cfg->standby_ud, err)) < 0)
		goto fail;
	if (m->so->health)
		m->so->health(m->store, false, &m->store_epoch);
	m->store_ok = true;
	if ((rc = m->so->user_load_all(m->store, load_user, m, err)) < 0 ||
	    (rc = m->so->keypair_load_all(m->store, load_key, m, err)) < 0 ||
	    (rc = mgr_keys_check_main(m, err)) < 0 ||
	    (rc = m->so->session_load_all(m->store, load_session, m, err)) < 0 ||
	    (rc = m->so->agent_load_all(m->store, load_agent, m, err)) < 0 ||
	    (rc = m->so->session_max_seq(m->store, &m->next_seq, err)) < 0)
		goto fail;
	m->next_seq++;
	if (m->n_users == 0 && (rc = mgr_create_admin(m, err)) < 0)
		goto fail;
	if ((rc = load_cluster_id(m, err)) < 0)
		goto fail;
	if ((rc = mgr_settings_load(m, err)) < 0 || (rc = mgr_commits_load(m, err)) < 0 ||
	    (rc = mgr_folders_load(m, err)) < 0)
		goto fail;
	/* The wsproxy_* settings over manager.conf's, checked at open; then
	 * the apps open before a restart. */
	mgr_apps_apply(m);
	mgr_apps_load(m);
	if ((rc = mgr_images_load(m, err)) < 0 || (rc = mgr_drain_load(m, err)) < 0 ||
	    (rc = mgr_node_groups_load(m, err)) < 0 || (rc = mgr_projects_load(m, err)) < 0 ||
	    (rc = mgr_presets_load(m, err)) < 0)
		goto fail;
	mgr_fairshare_load(m);
	if ((rc = open_redis(m, err)) < 0)
		goto fail;
	if (cfg->selector) {
		json_t *v = json_string(cfg->selector);
		rc = mgr_settings_set(m, "selector", v, err);
		json_decref(v);
		if (rc < 0)
			goto fail;
	}
	if (cfg->fgpu_per_device > 0) {
		json_t *v = json_integer(cfg->fgpu_per_device);
		rc = mgr_settings_set(m, "fgpu_per_device", v, err);
		json_decref(v);
		if (rc < 0)
			goto fail;
	}
	if ((rc = mgr_settings_follow(m, err)) < 0)
		goto fail;
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		mgr_shares_from_json(s);
		/* Sessions queued by an earlier version, not started yet, get
		 * their app secret now, so they start with apps. */
		if (!s->rec.app_secret[0] &&
		    (s->rec.status == SS_PENDING || s->rec.status == SS_SCHEDULED || s->rec.status == SS_PREPARING) &&
		    sign_random_hex(32, s->rec.app_secret, sizeof(s->rec.app_secret), NULL) == 0)
			mgr_persist(m, s);
	}
	/* Resources held by sessions loaded from the store (the devices'
	 * shares once each agent registers and says what devices it has). */
	mgr_recount_held(m);
	log_info("manager", "state loaded from %s: %zu sessions, %zu agents, %zu users", m->store_where,
		 m->n_sessions, m->n_agents, m->n_users);

	/* On failure manager_close stops and joins what was started. */
	if ((rc = mgr_dispatch_start(m, err)) < 0 || (rc = mgr_scheduler_start(m, err)) < 0)
		goto fail;
	*out = m;
	return 0;
fail:
	manager_close(m);
	return rc;
}

int manager_serve(struct manager *m, char *admin_conf_path, size_t n, struct terr *err)
{
	struct httpd_config hc = {
		.listen = m->cfg.listen,
		.routes = manager_routes,
		.n_routes = manager_n_routes,
		.ctx = m,
		.max_body = 1 << 20,
		.authenticate = api_authenticate,
		.observe = mgr_metrics_observe,
	};
	int rc = httpd_start(&hc, &m->http, err);
	if (rc < 0)
		return rc;
	char host[64];
	int port;
	httpd_parse_listen(m->cfg.listen, host, sizeof(host), &port, NULL);
	if (!strcmp(host, "0.0.0.0"))
		strcpy(host, "127.0.0.1");
	snprintf(m->endpoint, sizeof(m->endpoint), "http://%s:%d", host, httpd_port(m->http));

	snprintf(admin_conf_path, n, "%s/admin.conf", m->data_dir);
	return mgr_admin_conf_update(m, admin_conf_path, err);
}

int manager_migrate_only(const struct manager_config *cfg, int *version, char *where, size_t n,
			 struct terr *err)
{
	const struct store_ops *so;
	struct store *s = NULL;
	int rc = util_mkdir_p(cfg->data_dir, 0700, err);
	if (rc < 0 || (rc = store_open(cfg->store, cfg->data_dir, &so, &s, where, n, err)) < 0)
		return rc;
	so->close(s);
	*version = store_schema_latest();
	return 0;
}

bool manager_fenced(struct manager *m)
{
	return atomic_load(&m->store_fenced);
}

/* Writes every session and agent again, in one transaction: after a
 * reconnection the writes made while the database was unreachable (a
 * status change, an agent's heartbeat) may be missing, and memory is the
 * truth while this manager is the active one. Called with mu held. */
static int store_resync(struct manager *m, struct terr *err)
{
	int rc = m->so->begin(m->store, err);
	for (size_t i = 0; rc == 0 && i < m->n_sessions; i++)
		rc = m->so->session_put(m->store, &m->sessions[i]->rec, err);
	for (size_t i = 0; rc == 0 && i < m->n_agents; i++)
		rc = m->so->agent_put(m->store, &m->agents[i]->rec, err);
	if (rc == 0)
		rc = m->so->commit(m->store, err);
	else
		m->so->rollback(m->store);
	return rc;
}

bool mgr_store_check(struct manager *m)
{
	if (!m->so->health)
		return true;
	uint64_t epoch = 0;
	/* Connecting can take seconds: not under the lock. */
	pthread_mutex_unlock(&m->mu);
	enum store_health h = m->so->health(m->store, true, &epoch);
	pthread_mutex_lock(&m->mu);
	if (h == STORE_FENCED) {
		m->store_ok = false;
		m->store_fenced = true;
		return false;
	}
	if (h != STORE_UP) {
		m->store_ok = false;
		return false;
	}
	if (epoch != m->store_epoch) {
		struct terr err = {0};
		if (store_resync(m, &err) < 0) {
			log_warn("manager", "cannot write the state again after the reconnection: %s", err.msg);
			m->store_ok = false;
			return false;
		}
		log_info("manager", "state written again to %s after the reconnection: %zu sessions, %zu agents",
			 m->store_where, m->n_sessions, m->n_agents);
		m->store_epoch = epoch;
		mgr_wake_scheduler(m);
	}
	m->store_ok = true;
	return true;
}

bool mgr_store_available(struct manager *m)
{
	if (!atomic_load(&m->store_ok))
		return false;
	return !m->so->health || m->so->health(m->store, false, NULL) == STORE_UP;
}

const char *mgr_store_where(const struct manager *m)
{
	return m->store_where;
}

const char *manager_endpoint(const struct manager *m)
{
	return m->endpoint;
}

const char *mgr_cluster_secret(const struct manager *m)
{
	return m->cfg.cluster_secret;
}

const char *mgr_metrics_token(const struct manager *m)
{
	return m->cfg.metrics_token;
}

void manager_close(struct manager *m)
{
	if (!m)
		return;
	/* Stopping first: long polls and event streams see it and end, so
	 * the HTTP server can stop without waiting for them. */
	pthread_mutex_lock(&m->mu);
	m->stopping = true;
	pthread_cond_broadcast(&m->wake);
	pthread_cond_broadcast(&m->jobs_cv);
	pthread_cond_broadcast(&m->changed);
	/* An in-process agent's threads call into the manager (events,
	 * usage rounds): they end before anything is freed. */
	struct agent *locals[8];
	size_t n_locals = 0;
	for (size_t i = 0; i < m->n_agents && n_locals < 8; i++)
		if (m->agents[i]->link == &link_local_ops && m->agents[i]->link_ctx)
			locals[n_locals++] = m->agents[i]->link_ctx;
	pthread_mutex_unlock(&m->mu);
	for (size_t i = 0; i < n_locals; i++)
		agent_watch_stop(locals[i]);
	httpd_stop(m->http);
	m->http = NULL;
	mgr_settings_unfollow(m);
	if (m->threads_started)
		pthread_join(m->sched_thread, NULL);
	mgr_dispatch_join(m);
	/* The last minute of fair-share usage, unless another manager took
	 * the store over (its usage is the one that counts then). */
	if (m->store && m->fs_saved_mono && m->store_ok && !m->store_fenced)
		mgr_fairshare_save(m);
	for (size_t i = 0; i < m->n_sessions; i++) {
		session_rec_clear(&m->sessions[i]->rec);
		mgr_session_texts_free(m->sessions[i]);
		free(m->sessions[i]->cl_members);
		qhist_free(&m->sessions[i]->qhist);
		free(m->sessions[i]);
	}
	free(m->sessions);
	for (int i = 0; i < 2; i++)
		mtext_unref(m->nodes_text[i]);
	strmap_free(&m->session_by_id);
	strmap_free(&m->session_by_name);
	strmap_free(&m->agent_by_id);
	mgr_images_free(m);
	for (size_t i = 0; i < m->n_agents; i++) {
		if (m->agents[i]->link)
			m->agents[i]->link->release(m->agents[i]->link_ctx);
		free(m->agents[i]);
	}
	for (struct retired_link *r = m->retired, *next; r; r = next) {
		next = r->next;
		r->ops->release(r->ctx);
		free(r);
	}
	free(m->agents);
	free(m->users);
	for (size_t i = 0; i < m->n_keys; i++)
		explicit_bzero(m->keys[i].secret_key, sizeof(m->keys[i].secret_key));
	free(m->keys);
	mgr_settings_free(m);
	mgr_drain_free(m);
	mgr_node_groups_free(m);
	mgr_projects_free(m);
	mgr_presets_free(m);
	mgr_folders_free(m);
	/* Emptied as execs end; anything left belongs to no stream now. */
	while (m->exec_counts) {
		struct mexec_count *c = m->exec_counts;
		m->exec_counts = c->next;
		free(c);
	}
	mgr_commits_free(m);
	mgr_apps_free(m);
	mgr_usage_close(m);
	mgr_metrics_close(m);
	if (m->store)
		m->so->close(m->store);
	ratelimit_free(m->login_fail_pair);
	ratelimit_free(m->login_fail_addr);
	redis_close(m->redis);
	pthread_mutex_destroy(&m->mu);
	pthread_mutex_destroy(&m->reg_mu);
	pthread_rwlock_destroy(&m->users_mu);
	pthread_cond_destroy(&m->wake);
	pthread_cond_destroy(&m->changed);
	pthread_cond_destroy(&m->jobs_cv);
	free(m);
}

