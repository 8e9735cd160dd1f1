/* The manager's HTTP API (docs/api.md): one route table, handlers that
 * validate, take the manager lock briefly, and answer JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/units.h"
#include "common/sign.h"
#include "common/util.h"
#include "manager/internal.h"
#include "manager/validate.h"

/* Who may call a route. AUTH_PUBLIC routes (password login) check their
 * callers themselves. */
enum route_auth { AUTH_PUBLIC = 0, AUTH_USER = 1, AUTH_CLUSTER = 2 };

/* ---------- authentication ---------- */

int api_authenticate(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	if (req->route_flags == AUTH_PUBLIC)
		return 0;
	const char *authz = httpd_header(req, "Authorization");
	const char *date = httpd_header(req, "Date");
	const char *host = httpd_header(req, "Host");
	if (!authz || !date || !host) {
		httpd_error(resp, 401, "unauthenticated",
			    "request is not signed: it needs Date, Host and Authorization headers (docs/api.md)");
		return -1;
	}
	char ak[128], sig[SIGN_HEX_LEN + 1];
	struct terr err = {0};
	if (sign_parse_authorization(authz, ak, sizeof(ak), sig, &err) < 0) {
		httpd_error(resp, 401, "unauthenticated", "%s", err.msg);
		return -1;
	}
	struct auth_info *ai = calloc(1, sizeof(*ai));
	if (!ai) {
		httpd_error(resp, 500, "internal", "out of memory");
		return -1;
	}
	char secret[256] = "";
	if (req->route_flags & AUTH_CLUSTER) {
		/* Cluster routes: credential "agent:<id>", keyed by the secret
		 * shared by the manager and its agents. */
		if (strncmp(ak, "agent:", 6) != 0 || !m->cfg.cluster_secret || !*m->cfg.cluster_secret) {
			free(ai);
			httpd_error(resp, 403, "forbidden", "this route is for agents signing with the cluster secret");
			return -1;
		}
		ai->cluster = true;
		util_strlcpy(ai->agent_id, ak + 6, sizeof(ai->agent_id));
		util_strlcpy(secret, m->cfg.cluster_secret, sizeof(secret));
	} else {
		pthread_mutex_lock(&m->mu);
		const struct user_rec *u = mgr_find_user_by_key(m, ak);
		if (u)
			ai->user = *u;
		pthread_mutex_unlock(&m->mu);
		if (!u) {
			free(ai);
			httpd_error(resp, 401, "unauthenticated", "unknown access key %s", ak);
			return -1;
		}
		if (ai->user.disabled) {
			httpd_error(resp, 403, "forbidden", "user %s is disabled", ai->user.email);
			free(ai);
			return -1;
		}
		util_strlcpy(secret, ai->user.secret_key, sizeof(secret));
	}
	if (sign_verify(secret, sig, req->method, req->target, date, host, req->body, req->body_len,
			time(NULL), &err) < 0) {
		free(ai);
		httpd_error(resp, 401, "unauthenticated", "%s", err.msg);
		return -1;
	}
	req->auth = ai;
	return 0;
}

static const struct user_rec *caller(struct httpd_req *req)
{
	return &((struct auth_info *)req->auth)->user;
}

/* ---------- rendering ---------- */

static json_t *res_json(const struct res *r)
{
	return json_pack("{s:o,s:I,s:o}", "cpu", jsonutil_milli(r->cpu_m), "mem", (json_int_t)r->mem,
			 "fgpu", jsonutil_milli(r->fgpu_m));
}

static json_t *time_json(int64_t ms)
{
	if (!ms)
		return json_null();
	char buf[40];
	util_format_time_ms(ms, buf, sizeof(buf));
	return json_string(buf);
}

/* Called with mu held. */
static json_t *session_json_base(struct manager *m, const struct msession *s)
{
	const struct user_rec *owner = mgr_find_user(m, s->rec.owner_id);
	json_t *env = s->rec.env_json ? json_loads(s->rec.env_json, 0, NULL) : NULL;
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		"id", s->rec.id, "name", s->rec.name, "owner", owner ? owner->email : "",
		"image", s->rec.image, "status", session_status_name(s->rec.status),
		"status_info", s->rec.status_info,
		"agent", s->rec.agent_id[0] ? json_string(s->rec.agent_id) : json_null(),
		"container_id", s->rec.container_id[0] ? json_string(s->rec.container_id) : json_null(),
		"resources", res_json(&s->rec.req),
		"env", env ? env : json_object(),
		"startup_command", s->rec.startup_command ? json_string(s->rec.startup_command) : json_null(),
		"exit_code", s->rec.has_exit_code ? json_integer(s->rec.exit_code) : json_null(),
		"created_at", time_json(s->rec.created_ms),
		"started_at", time_json(s->rec.started_ms),
		"terminated_at", time_json(s->rec.terminated_ms));
}

/* Adds the device shares: "gpus": [{"index","uuid","fgpu"}]. */
static json_t *session_json(struct manager *m, const struct msession *s)
{
	json_t *o = session_json_base(m, s);
	json_t *gpus = json_array();
	for (int i = 0; i < s->n_shares; i++)
		json_array_append_new(gpus, json_pack("{s:i,s:s,s:o}", "index", s->shares[i].index,
						      "uuid", s->shares[i].uuid, "fgpu", jsonutil_milli(s->shares[i].fgpu_m)));
	json_object_set_new(o, "gpus", gpus);
	return o;
}

static json_t *session_json_with_history(struct manager *m, const struct msession *s)
{
	json_t *o = session_json(m, s);
	struct history_rec *h = NULL;
	size_t n = 0;
	struct terr err = {0};
	json_t *arr = json_array();
	if (m->so->history_get(m->store, s->rec.id, &h, &n, &err) == 0) {
		for (size_t i = 0; i < n; i++)
			json_array_append_new(arr, json_pack("{s:s,s:o,s:s}", "status", session_status_name(h[i].status),
							     "at", time_json(h[i].at_ms), "info", h[i].info));
		free(h);
	}
	json_object_set_new(o, "status_history", arr);
	return o;
}

json_t *api_parse_body(struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	json_t *body = jsonutil_parse_body(req->body, req->body_len, JSONUTIL_BODY_MAX_DEPTH, &err);
	if (!body)
		httpd_error_terr(resp, &err);
	return body;
}

/* ---------- routes: users ---------- */

static void api_whoami(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	const struct user_rec *u = caller(req);
	httpd_json(resp, 200, json_pack("{s:{s:s,s:s,s:b,s:s}}", "user", "id", u->id, "email", u->email,
					"is_admin", u->is_admin, "access_key", u->access_key));
}

/* ---------- routes: sessions ---------- */

static bool name_in_use(struct manager *m, const char *owner, const char *name)
{
	for (size_t i = 0; i < m->n_sessions; i++) {
		const struct msession *s = m->sessions[i];
		if (!session_status_final(s->rec.status) && !strcmp(s->rec.owner_id, owner) &&
		    !strcmp(s->rec.name, name))
			return true;
	}
	return false;
}

/* Checks, without the lock, that some alive node can run the image and that
 * some node could ever hold the request. */
static int check_placeable(struct manager *m, const struct create_request *cr, struct terr *err)
{
	struct probe { const struct agent_link_ops *link; void *ctx; char id[STORE_NAME_MAX]; } *probes = NULL;
	size_t n = 0;
	bool fits_somewhere = false, any_agent = false;
	pthread_mutex_lock(&m->mu);
	int64_t quantum = m->settings.fgpu_quantum_m, per_dev = mgr_per_device_m(m);
	if (cr->req.fgpu_m % quantum) {
		char q[32];
		units_format_milli(quantum, q, sizeof(q));
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, EINVAL, "resources.fgpu must be a multiple of the fGPU quantum %s", q);
	}
	probes = calloc(m->n_agents ? m->n_agents : 1, sizeof(*probes));
	for (size_t i = 0; probes && i < m->n_agents; i++) {
		struct magent *a = m->agents[i];
		any_agent = true;
		/* Satisfiable counts the devices all free: only their number matters. */
		struct sched_agent sa = {.capacity = a->rec.capacity, .n_devs = (size_t)a->n_gpus};
		if (sched_satisfiable(&sa, 1, &cr->req, per_dev))
			fits_somewhere = true;
		if (a->alive && a->link) {
			probes[n].link = a->link;
			probes[n].ctx = a->link_ctx;
			util_strlcpy(probes[n].id, a->rec.id, sizeof(probes[n].id));
			n++;
		}
	}
	pthread_mutex_unlock(&m->mu);
	if (!probes)
		return terr_set(err, ENOMEM, "out of memory");
	int rc = 0;
	char need[96];
	res_describe(&cr->req, need, sizeof(need));
	if (!any_agent) {
		rc = terr_set(err, EAGAIN, "no node has registered yet; start an agent first");
	} else if (!fits_somewhere) {
		rc = terr_set(err, EDOM, "no node could ever hold %s per session%s; ask for less (see 'tessera node ls')", need,
			      cr->req.fgpu_m ? " (fGPU must fit on one node's devices)" : "");
	} else if (n == 0) {
		rc = terr_set(err, EAGAIN, "no node is alive right now; check the agents ('tessera node ls')");
	} else {
		bool found = false;
		struct terr last = {0};
		for (size_t i = 0; i < n && !found; i++) {
			bool exists = false;
			if (probes[i].link->image_exists(probes[i].ctx, cr->image, &exists, &last) == 0 && exists)
				found = true;
		}
		if (!found)
			rc = last.code ? terr_set(err, EAGAIN, "cannot check image %s: %s", cr->image, last.msg)
				       : terr_set(err, EINVAL,
						  "image %s is not present on any node; pull or build it there first (docker pull %s)",
						  cr->image, cr->image);
	}
	free(probes);
	return rc;
}

static void api_session_create(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	const struct user_rec *u = caller(req);
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	struct create_request cr;
	struct terr err = {0};
	struct msession **news = NULL;
	size_t made = 0;
	if (validate_create_request(body, &cr, &err) < 0 || check_placeable(m, &cr, &err) < 0) {
		httpd_error_terr(resp, &err);
		goto out;
	}
	news = calloc((size_t)cr.count, sizeof(*news));
	char base[STORE_NAME_MAX];
	if (cr.name) {
		util_strlcpy(base, cr.name, sizeof(base));
	} else {
		char rnd[8];
		sign_random_hex(3, rnd, sizeof(rnd), NULL);
		snprintf(base, sizeof(base), "s-%s", rnd);
	}
	char *env_text = cr.env ? jsonutil_dump(cr.env) : NULL;
	for (; news && made < (size_t)cr.count; made++) {
		struct msession *s = calloc(1, sizeof(*s));
		if (!s)
			break;
		news[made] = s;
		util_new_id(s->rec.id, NULL);
		if (cr.count > 1) {
			/* validate_create_request checked that NAME-COUNT fits. */
			if (snprintf(s->rec.name, sizeof(s->rec.name), "%s-%zu", base, made + 1) >= (int)sizeof(s->rec.name))
				break;
		} else
			util_strlcpy(s->rec.name, base, sizeof(s->rec.name));
		util_strlcpy(s->rec.owner_id, u->id, sizeof(s->rec.owner_id));
		util_strlcpy(s->rec.image, cr.image, sizeof(s->rec.image));
		s->rec.req = cr.req;
		s->rec.env_json = env_text ? strdup(env_text) : NULL;
		s->rec.startup_command = cr.startup_command ? strdup(cr.startup_command) : NULL;
	}
	free(env_text);
	if (!news || made < (size_t)cr.count) {
		httpd_error(resp, 500, "internal", "out of memory");
		goto out;
	}
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < made; i++) {
		if (name_in_use(m, u->id, news[i]->rec.name)) {
			pthread_mutex_unlock(&m->mu);
			httpd_error(resp, 409, "conflict",
				    "you already have an active session named %s; remove it or choose another name",
				    news[i]->rec.name);
			goto out;
		}
	}
	if (mgr_add_sessions(m, news, made, &err) < 0) {
		pthread_mutex_unlock(&m->mu);
		httpd_error_terr(resp, &err);
		goto out;
	}
	json_t *arr = json_array();
	for (size_t i = 0; i < made; i++)
		json_array_append_new(arr, session_json(m, news[i]));
	pthread_mutex_unlock(&m->mu);
	httpd_json(resp, 201, json_pack("{s:o}", "sessions", arr));
	free(news);
	news = NULL;
	made = 0;
out:
	for (size_t i = 0; i < made; i++) {
		if (!news[i])
			continue;
		session_rec_clear(&news[i]->rec);
		free(news[i]);
	}
	free(news);
	json_decref(body);
}

static void api_session_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	const struct user_rec *u = caller(req);
	const char *all = httpd_query(req, "all");
	bool show_all = all && (!strcmp(all, "1") || !strcmp(all, "true"));
	json_t *arr = json_array();
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n_sessions; i++) {
		const struct msession *s = m->sessions[i];
		if (!u->is_admin && strcmp(s->rec.owner_id, u->id))
			continue;
		if (!show_all && !session_status_listed(s->rec.status))
			continue;
		json_array_append_new(arr, session_json(m, s));
	}
	pthread_mutex_unlock(&m->mu);
	httpd_json(resp, 200, json_pack("{s:o}", "sessions", arr));
}

static bool settled(enum session_status st)
{
	return st != SS_PENDING && st != SS_SCHEDULED && st != SS_PREPARING;
}

static void api_session_get(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	const struct user_rec *u = caller(req);
	const char *wait = httpd_query(req, "wait");
	const char *tmo = httpd_query(req, "timeout_s");
	long timeout_s = 30;
	if (tmo) {
		char *end;
		timeout_s = strtol(tmo, &end, 10);
		if (*end || timeout_s < 0 || timeout_s > 300) {
			httpd_error(resp, 400, "invalid_argument", "timeout_s must be 0 to 300");
			return;
		}
	}
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_resolve_session(m, req->params[0], u);
	if (s && wait && strcmp(wait, "0")) {
		/* Long poll: sleep on the change signal until it settles. */
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += timeout_s;
		while (!settled(s->rec.status) && !m->stopping &&
		       pthread_cond_timedwait(&m->changed, &m->mu, &dl) == 0)
			;
	}
	json_t *o = s ? session_json_with_history(m, s) : NULL;
	pthread_mutex_unlock(&m->mu);
	if (!o)
		httpd_error(resp, 404, "not_found", "no session named or with id '%s'", req->params[0]);
	else
		httpd_json(resp, 200, o);
}

static void api_session_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	const struct user_rec *u = caller(req);
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_resolve_session(m, req->params[0], u);
	json_t *o = NULL;
	if (s) {
		mgr_delete_session(m, s, u->email);
		o = session_json(m, s);
	}
	pthread_mutex_unlock(&m->mu);
	if (!o)
		httpd_error(resp, 404, "not_found", "no session named or with id '%s'", req->params[0]);
	else
		httpd_json(resp, 200, o);
}

/* Finds the session's agent link and container; fills resp on failure. */
static int session_target(struct manager *m, struct httpd_req *req, struct httpd_resp *resp,
			  bool need_running, const struct agent_link_ops **link, void **lctx,
			  char cid[RT_ID_MAX])
{
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_resolve_session(m, req->params[0], caller(req));
	if (!s) {
		pthread_mutex_unlock(&m->mu);
		httpd_error(resp, 404, "not_found", "no session named or with id '%s'", req->params[0]);
		return -1;
	}
	struct magent *a = mgr_find_agent(m, s->rec.agent_id);
	if ((need_running && s->rec.status != SS_RUNNING) || !s->rec.container_id[0] || !a || !a->link) {
		httpd_error(resp, 409, "conflict", "session %s is %s%s", s->rec.name,
			    session_status_name(s->rec.status),
			    need_running ? "; it must be RUNNING" : " and has no container");
		pthread_mutex_unlock(&m->mu);
		return -1;
	}
	if (!a->alive) {
		httpd_error(resp, 503, "unavailable", "node %s of session %s is LOST", a->rec.id, s->rec.name);
		pthread_mutex_unlock(&m->mu);
		return -1;
	}
	*link = a->link;
	*lctx = a->link_ctx;
	util_strlcpy(cid, s->rec.container_id, RT_ID_MAX);
	pthread_mutex_unlock(&m->mu);
	return 0;
}

static void api_session_logs(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	const char *tail_s = httpd_query(req, "tail");
	long tail = 0;
	if (tail_s) {
		char *end;
		tail = strtol(tail_s, &end, 10);
		if (*end || tail < 0 || tail > 1000000) {
			httpd_error(resp, 400, "invalid_argument", "tail must be 0 to 1000000 lines");
			return;
		}
	}
	const struct agent_link_ops *link;
	void *lctx;
	char cid[RT_ID_MAX];
	if (session_target(m, req, resp, false, &link, &lctx, cid) < 0)
		return;
	char *logs = NULL;
	struct terr err = {0};
	if (link->logs(lctx, cid, (int)tail, &logs, &err) < 0) {
		httpd_error_terr(resp, &err);
		return;
	}
	httpd_json(resp, 200, json_pack("{s:o}", "logs", jsonutil_string_lossy(logs, strlen(logs))));
	free(logs);
}

static void api_session_exec(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	json_t *cmd = json_object_get(body, "command");
	int64_t timeout_s = 600;
	struct terr err = {0};
	if (!json_is_array(cmd) || json_array_size(cmd) == 0 || json_array_size(cmd) > VALIDATE_MAX_EXEC_ARGS) {
		httpd_error(resp, 400, "invalid_argument", "command must be a non-empty array of at most %d strings",
			    VALIDATE_MAX_EXEC_ARGS);
		goto out;
	}
	size_t i;
	json_t *v;
	json_array_foreach(cmd, i, v) {
		if (!json_is_string(v)) {
			httpd_error(resp, 400, "invalid_argument", "command[%zu] must be a string", i);
			goto out;
		}
	}
	if (jsonutil_get_int(body, "timeout_s", "timeout_s", &timeout_s, NULL, &err) < 0 ||
	    timeout_s < 1 || timeout_s > 3600) {
		httpd_error(resp, 400, "invalid_argument", "timeout_s must be an integer from 1 to 3600");
		goto out;
	}
	const struct agent_link_ops *link;
	void *lctx;
	char cid[RT_ID_MAX];
	if (session_target(m, req, resp, true, &link, &lctx, cid) < 0)
		goto out;
	json_t *result = NULL;
	if (link->exec(lctx, cid, cmd, (int)timeout_s, &result, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 200, result);
out:
	json_decref(body);
}

/* ---------- routes: nodes ---------- */

/* Called with mu held. */
static json_t *node_json(struct manager *m, const struct magent *a)
{
	int64_t per_dev = mgr_per_device_m(m);
	json_t *gpus = json_array();
	for (int i = 0; i < a->n_gpus; i++)
		json_array_append_new(gpus, json_pack("{s:i,s:s,s:s,s:I,s:i,s:I,s:o,s:o}", "index", i,
			"uuid", a->gpus[i].uuid, "name", a->gpus[i].name, "memory", (json_int_t)a->gpus[i].memory,
			"sms", a->gpus[i].sms, "context_overhead", (json_int_t)a->gpus[i].context_overhead,
			"fgpu_capacity", jsonutil_milli(per_dev), "fgpu_used", jsonutil_milli(a->gpus[i].used_m)));
	return json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:i,s:o,s:o,s:b}",
		"id", a->rec.id, "status", a->alive ? "ALIVE" : "LOST", "url", a->rec.url,
		"version", a->rec.version, "capacity", res_json(&a->rec.capacity),
		"used", res_json(&a->used), "sessions", a->n_sessions,
		"last_heartbeat", time_json(a->rec.last_seen_ms), "gpus", gpus, "mock_gpus", a->mock_gpus);
}

static json_t *nodes_json(struct manager *m)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < m->n_agents; i++)
		json_array_append_new(arr, node_json(m, m->agents[i]));
	return arr;
}

static void api_node_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)req;
	struct manager *m = ctx;
	pthread_mutex_lock(&m->mu);
	json_t *arr = nodes_json(m);
	pthread_mutex_unlock(&m->mu);
	httpd_json(resp, 200, json_pack("{s:o}", "nodes", arr));
}

/* ---------- routes: settings ---------- */

static void api_config_get(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)req;
	struct manager *m = ctx;
	pthread_mutex_lock(&m->mu);
	json_t *o = mgr_settings_json(m);
	pthread_mutex_unlock(&m->mu);
	httpd_json(resp, 200, o);
}

static void api_config_set(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	if (!caller(req)->is_admin) {
		httpd_error(resp, 403, "forbidden", "only an admin may change cluster settings");
		return;
	}
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	json_t *value = json_object_get(body, "value");
	struct terr err = {0};
	if (!value) {
		httpd_error(resp, 400, "invalid_argument", "body must be {\"value\": ...}");
	} else {
		pthread_mutex_lock(&m->mu);
		int rc = mgr_settings_set(m, req->params[0], value, &err);
		json_t *o = rc == 0 ? mgr_settings_json(m) : NULL;
		pthread_mutex_unlock(&m->mu);
		if (rc < 0)
			httpd_error_terr(resp, &err);
		else
			httpd_json(resp, 200, o);
	}
	json_decref(body);
}

/* ---------- routes: images ---------- */

static void api_image_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)req;
	struct manager *m = ctx;
	struct probe { const struct agent_link_ops *link; void *ctx; char id[STORE_NAME_MAX]; } *probes;
	size_t n = 0;
	pthread_mutex_lock(&m->mu);
	probes = calloc(m->n_agents ? m->n_agents : 1, sizeof(*probes));
	for (size_t i = 0; probes && i < m->n_agents; i++) {
		struct magent *a = m->agents[i];
		if (!a->alive || !a->link)
			continue;
		probes[n].link = a->link;
		probes[n].ctx = a->link_ctx;
		util_strlcpy(probes[n].id, a->rec.id, sizeof(probes[n].id));
		n++;
	}
	pthread_mutex_unlock(&m->mu);
	/* {"ref": ["node", ...]} gathered from every alive node. */
	json_t *by_ref = json_object();
	for (size_t i = 0; probes && i < n; i++) {
		json_t *refs = NULL;
		struct terr err = {0};
		if (probes[i].link->images(probes[i].ctx, &refs, &err) < 0) {
			log_warn("manager", "listing images on %s: %s", probes[i].id, err.msg);
			continue;
		}
		size_t k;
		json_t *r;
		json_array_foreach(refs, k, r) {
			const char *ref = json_string_value(r);
			if (!ref || !strcmp(ref, "<none>:<none>"))
				continue;
			json_t *nodes = json_object_get(by_ref, ref);
			if (!nodes) {
				nodes = json_array();
				json_object_set_new(by_ref, ref, nodes);
			}
			json_array_append_new(nodes, json_string(probes[i].id));
		}
		json_decref(refs);
	}
	free(probes);
	json_t *arr = json_array();
	const char *ref;
	json_t *nodes;
	json_object_foreach(by_ref, ref, nodes)
		json_array_append_new(arr, json_pack("{s:s,s:O}", "ref", ref, "nodes", nodes));
	json_decref(by_ref);
	httpd_json(resp, 200, json_pack("{s:o}", "images", arr));
}

/* ---------- routes: live events ---------- */

/* One event stream: whenever anything visible changes, the whole state
 * the caller may see, coalesced; a keepalive comment when idle. */
struct event_stream {
	struct manager *m;
	struct user_rec user;
	uint64_t seen;
	bool first;
	char *buf;
	size_t len, off;
};

static json_t *visible_state(struct manager *m, const struct user_rec *u)
{
	json_t *sessions = json_array();
	for (size_t i = 0; i < m->n_sessions; i++) {
		const struct msession *s = m->sessions[i];
		if ((u->is_admin || !strcmp(s->rec.owner_id, u->id)) && session_status_listed(s->rec.status))
			json_array_append_new(sessions, session_json(m, s));
	}
	return json_pack("{s:o,s:o}", "sessions", sessions, "nodes", nodes_json(m));
}

static long event_stream_read(void *cls, char *out, size_t max)
{
	struct event_stream *es = cls;
	if (es->off >= es->len) {
		free(es->buf);
		es->buf = NULL;
		es->len = es->off = 0;
		struct manager *m = es->m;
		pthread_mutex_lock(&m->mu);
		if (!es->first) {
			struct timespec dl;
			clock_gettime(CLOCK_MONOTONIC, &dl);
			dl.tv_sec += 15;
			while (!m->stopping && m->version == es->seen &&
			       pthread_cond_timedwait(&m->changed, &m->mu, &dl) == 0)
				;
		}
		if (m->stopping) {
			pthread_mutex_unlock(&m->mu);
			return HTTPD_STREAM_END;
		}
		if (es->first || m->version != es->seen) {
			es->first = false;
			es->seen = m->version;
			json_t *state = visible_state(m, &es->user);
			pthread_mutex_unlock(&m->mu);
			char *text = jsonutil_dump(state);
			json_decref(state);
			if (!text || asprintf(&es->buf, "event: state\ndata: %s\n\n", text) < 0)
				es->buf = NULL;
			free(text);
		} else {
			pthread_mutex_unlock(&m->mu);
			es->buf = strdup(": keepalive\n\n");
		}
		if (!es->buf)
			return HTTPD_STREAM_END;
		es->len = strlen(es->buf);
	}
	size_t n = es->len - es->off < max ? es->len - es->off : max;
	memcpy(out, es->buf + es->off, n);
	es->off += n;
	return (long)n;
}

static void event_stream_free(void *cls)
{
	struct event_stream *es = cls;
	free(es->buf);
	free(es);
}

static void api_events(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct event_stream *es = calloc(1, sizeof(*es));
	if (!es) {
		httpd_error(resp, 500, "internal", "out of memory");
		return;
	}
	es->m = ctx;
	es->user = *caller(req);
	es->first = true;
	resp->status = 200;
	resp->stream = event_stream_read;
	resp->stream_cls = es;
	resp->stream_free = event_stream_free;
	resp->stream_type = "text/event-stream";
}

/* ---------- routes: agents (cluster secret) ---------- */

static void api_agent_register(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	struct auth_info *ai = req->auth;
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	const char *id = json_string_value(json_object_get(body, "id"));
	const char *url = json_string_value(json_object_get(body, "url"));
	struct terr err = {0};
	json_t *reply = NULL;
	if (!id || strcmp(id, ai->agent_id)) {
		httpd_error(resp, 403, "forbidden", "agent credential %s does not match the id in the body", ai->agent_id);
	} else if (!url || strncmp(url, "http://", 7)) {
		httpd_error(resp, 400, "invalid_argument", "agent url must be an http:// URL the manager can reach");
	} else {
		void *lctx = link_remote_new(url, m->cfg.cluster_secret);
		if (!lctx)
			httpd_error(resp, 500, "internal", "out of memory");
		else if (mgr_agent_register(m, body, &link_remote_ops, lctx, false, &reply, &err) < 0) {
			link_remote_ops.release(lctx);
			httpd_error_terr(resp, &err);
		} else
			httpd_json(resp, 200, reply);
	}
	json_decref(body);
}

static void api_agent_heartbeat(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	struct auth_info *ai = req->auth;
	if (strcmp(req->params[0], ai->agent_id)) {
		httpd_error(resp, 403, "forbidden", "agent %s may not speak for %s", ai->agent_id, req->params[0]);
		return;
	}
	json_t *reply = NULL;
	struct terr err = {0};
	if (mgr_agent_heartbeat(m, ai->agent_id, NULL, &reply, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 200, reply);
}

static void api_agent_event(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	struct auth_info *ai = req->auth;
	if (strcmp(req->params[0], ai->agent_id)) {
		httpd_error(resp, 403, "forbidden", "agent %s may not speak for %s", ai->agent_id, req->params[0]);
		return;
	}
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	if (!json_is_string(json_object_get(body, "session_id"))) {
		httpd_error(resp, 400, "invalid_argument", "event needs a session_id");
	} else {
		mgr_agent_event(m, ai->agent_id, body);
		httpd_json(resp, 200, json_object());
	}
	json_decref(body);
}

/* One table: every route of the manager, with who may call it. */
const struct httpd_route manager_routes[] = {
	{"GET", "/v1/auth/whoami", api_whoami, AUTH_USER},
	{"POST", "/v1/sessions", api_session_create, AUTH_USER},
	{"GET", "/v1/sessions", api_session_list, AUTH_USER},
	{"GET", "/v1/sessions/{ref}", api_session_get, AUTH_USER},
	{"DELETE", "/v1/sessions/{ref}", api_session_delete, AUTH_USER},
	{"GET", "/v1/sessions/{ref}/logs", api_session_logs, AUTH_USER},
	{"POST", "/v1/sessions/{ref}/exec", api_session_exec, AUTH_USER},
	{"GET", "/v1/nodes", api_node_list, AUTH_USER},
	{"GET", "/v1/images", api_image_list, AUTH_USER},
	{"GET", "/v1/config", api_config_get, AUTH_USER},
	{"PUT", "/v1/config/{key}", api_config_set, AUTH_USER},
	{"GET", "/v1/events", api_events, AUTH_USER},
	{"POST", "/v1/auth/login", api_auth_login, AUTH_PUBLIC},
	{"GET", "/v1/users", api_user_list, AUTH_USER},
	{"POST", "/v1/users", api_user_create, AUTH_USER},
	{"PATCH", "/v1/users/{id}", api_user_update, AUTH_USER},
	{"POST", "/v1/agents/register", api_agent_register, AUTH_CLUSTER},
	{"POST", "/v1/agents/{id}/heartbeat", api_agent_heartbeat, AUTH_CLUSTER},
	{"POST", "/v1/agents/{id}/events", api_agent_event, AUTH_CLUSTER},
};
const size_t manager_n_routes = sizeof(manager_routes) / sizeof(manager_routes[0]);
