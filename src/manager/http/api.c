/* The manager's HTTP API (docs/api.md): one route table and handlers that
 * translate. Each parses and validates its request (validate.h), calls the
 * manager's core (core.h) with plain values, and answers its JSON with a
 * status, or its error through httpd_error_terr. No state, no lock here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/frames.h"
#include "common/jsonutil.h"
#include "common/metrics.h"
#include "common/pump.h"
#include "common/sign.h"
#include "common/units.h"
#include "common/util.h"
#include "manager/approutes.h"
#include "manager/http/internal.h"
#include "manager/validate.h"

/* Who may call a route. AUTH_PUBLIC routes (password login) check their
 * callers themselves. */
enum route_auth { AUTH_PUBLIC = 0, AUTH_USER = 1, AUTH_CLUSTER = 2, AUTH_PROXY = 4 };

/* The credential the app proxy signs with, keyed by the cluster secret. */
#define PROXY_CREDENTIAL "wsproxy"
/* A session reference with its container: "REF/sub1" (session_ref). */
#define API_REF_MAX (STORE_NAME_MAX + STORE_ID_MAX + 16)

/* ---------- authentication ---------- */

int api_authenticate(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	const char *cluster_secret = mgr_cluster_secret(m);
	if ((req->route_flags & ~HTTPD_ROUTE_STREAM_BODY) == AUTH_PUBLIC)
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
	if (req->route_flags & AUTH_PROXY) {
		/* The app proxy's routes: credential "wsproxy", the cluster
		 * secret; neither a user nor an agent may call them. */
		if (strcmp(ak, PROXY_CREDENTIAL) != 0 || !cluster_secret || !*cluster_secret) {
			free(ai);
			httpd_error(resp, 403, "forbidden", "this route is for the app proxy (credential %s, signed with the "
				    "cluster secret)", PROXY_CREDENTIAL);
			return -1;
		}
		ai->cluster = true;
		util_strlcpy(ai->agent_id, PROXY_CREDENTIAL, sizeof(ai->agent_id));
		util_strlcpy(secret, cluster_secret, sizeof(secret));
	} else if (req->route_flags & AUTH_CLUSTER) {
		/* Cluster routes: credential "agent:<id>", keyed by the secret
		 * shared by the manager and its agents. */
		if (strncmp(ak, "agent:", 6) != 0 || !cluster_secret || !*cluster_secret) {
			free(ai);
			httpd_error(resp, 403, "forbidden", "this route is for agents signing with the cluster secret");
			return -1;
		}
		ai->cluster = true;
		util_strlcpy(ai->agent_id, ak + 6, sizeof(ai->agent_id));
		util_strlcpy(secret, cluster_secret, sizeof(secret));
	} else {
		if (mgr_user_by_access_key(m, ak, &ai->user) < 0) {
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
		/* For the About page: the webserver marks what it relays. */
		if (httpd_header(req, "X-Tessera-Via"))
			mgr_webserver_seen(m);
	}
	/* A streamed body (an upload) is signed by its SHA-256, which the
	 * client sends as a header and the route checks the bytes against. */
	const char *body_hash = req->body_streamed ? httpd_header(req, "X-Tessera-Content-SHA256") : NULL;
	if (req->body_streamed && !body_hash) {
		free(ai);
		httpd_error(resp, 401, "unauthenticated",
			    "an upload needs an X-Tessera-Content-SHA256 header: the body's SHA-256, which the "
			    "signature covers (docs/api.md, \"Authentication\")");
		return -1;
	}
	if ((req->body_streamed
	     ? sign_verify_hashed(secret, sig, req->method, req->target, date, host, body_hash, time(NULL), &err)
	     : sign_verify(secret, sig, req->method, req->target, date, host, req->body, req->body_len,
			   time(NULL), &err)) < 0) {
		free(ai);
		httpd_error(resp, 401, "unauthenticated", "%s", err.msg);
		return -1;
	}
	/* While the database is unreachable a user's change cannot be
	 * stored: refused before it is made (nothing acknowledged is then
	 * lost). Reads are answered from memory; agents' and the proxy's
	 * calls go on (their effects are written again at reconnection). */
	if (!ai->cluster && strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0 &&
	    !mgr_store_available(m)) {
		free(ai);
		httpd_error(resp, 503, "unavailable",
			    "the database is unavailable (%s unreachable): nothing was changed; try again when it "
			    "is back", mgr_store_where(m));
		return -1;
	}
	req->auth = ai;
	return 0;
}

json_t *api_parse_body(struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	json_t *body = jsonutil_parse_body(req->body, req->body_len, JSONUTIL_BODY_MAX_DEPTH, &err);
	if (!body)
		httpd_error_terr(resp, &err);
	return body;
}

int api_check_fields(json_t *body, const char *const *known, const char *list, struct terr *err)
{
	if (!json_is_object(body))
		return terr_set(err, EINVAL, "the body must be a JSON object");
	const char *k;
	json_t *v;
	json_object_foreach(body, k, v) {
		bool ok = false;
		for (int i = 0; known[i] && !ok; i++)
			ok = !strcmp(known[i], k);
		if (!ok)
			return terr_set(err, EINVAL, "unknown field '%s' (known: %s)", k, list);
	}
	return 0;
}

static bool is_admin(struct httpd_req *req)
{
	return caller(req)->is_admin;
}

/* For the admins' routes: false after answering 403 "only an admin may
 * <what>". */
static bool admin_only(struct httpd_req *req, struct httpd_resp *resp, const char *what)
{
	if (is_admin(req))
		return true;
	httpd_error(resp, 403, "forbidden", "only an admin may %s", what);
	return false;
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

/* A boolean query parameter (1/true or 0/false, absent = false) into
 * *out; false after answering 400. */
bool api_query_flag(struct httpd_req *req, struct httpd_resp *resp, const char *name, bool *out)
{
	const char *v = httpd_query(req, name);
	*out = false;
	if (!v)
		return true;
	if (!strcmp(v, "1") || !strcmp(v, "true")) {
		*out = true;
		return true;
	}
	if (!strcmp(v, "0") || !strcmp(v, "false"))
		return true;
	httpd_error(resp, 400, "invalid_argument", "%s must be 1 or 0", name);
	return false;
}

static void api_session_create(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	struct create_request cr;
	struct terr err = {0};
	json_t *sessions = NULL;
	bool dry_run = false;
	if (!api_query_flag(req, resp, "dry_run", &dry_run))
		goto out;
	if (validate_create_request(body, &cr, &err) < 0) {
		httpd_error_terr(resp, &err);
		goto out;
	}
	cr.dry_run = dry_run;
	if (mgr_sessions_create(ctx, caller(req), &cr, &sessions, &err) < 0)
		httpd_error_terr(resp, &err);
	else if (dry_run)
		httpd_json(resp, 200, sessions);
	else
		httpd_json(resp, 201, json_pack("{s:o}", "sessions", sessions));
out:
	json_decref(body);
}

/* GET /v1/sessions[?status=A,B][&owner=EMAIL][&all=1][&order=newest][&limit=N[&continue=TOKEN]]
 * (docs/api.md, "List sessions"): without limit, every session at once
 * as before pagination. */
static void api_session_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	static const char *const known[] = {"all", "status", "owner", "limit", "continue", "project", "order", NULL};
	const char *bad = httpd_query_unknown(req, known);
	if (bad) {
		httpd_error(resp, 400, "invalid_argument",
			    "unknown query parameter '%.64s' (known: all, status, owner, project, limit, continue, order)", bad);
		return;
	}
	struct session_query_in in = {
		.all = httpd_query(req, "all"), .status = httpd_query(req, "status"), .owner = httpd_query(req, "owner"),
		.limit = httpd_query(req, "limit"), .cont = httpd_query(req, "continue"),
		.project = httpd_query(req, "project"), .order = httpd_query(req, "order"),
	};
	struct session_query q;
	struct terr err = {0};
	char *body = NULL;
	size_t len = 0;
	if (validate_session_query(&in, &q, &err) < 0 || mgr_sessions_page(ctx, caller(req), &q, &body, &len, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_bytes_take(resp, 200, "application/json", body, len);
}

void api_answer(struct httpd_resp *resp, int rc, int status, json_t *o, const struct terr *err)
{
	if (rc < 0)
		httpd_error_terr(resp, err);
	else
		httpd_json(resp, status, o);
}

/* The session a /v1/sessions/{ref}... request names: the path's ref, an
 * id or one of the caller's own names; with ?owner=EMAIL, a name among
 * that user's sessions (admins), as its id in buf. With ?container=NAME
 * (main1, sub1...: one container of a cluster session), "REF/NAME" in
 * buf, which mgr_resolve_session reads. NULL after an error answer. */
static const char *session_ref(void *ctx, struct httpd_req *req, struct httpd_resp *resp, char buf[API_REF_MAX])
{
	const char *owner = httpd_query(req, "owner"), *container = httpd_query(req, "container");
	const char *ref = req->params[0];
	struct terr err = {0};
	if (container && (strlen(container) < 2 || strlen(container) > 12 ||
			  strspn(container, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(container))) {
		httpd_error(resp, 400, "invalid_argument", "container must name one of the session's containers "
			    "(main1, sub1, ...; tessera session info lists them)");
		return NULL;
	}
	if (owner) {
		char email[256];
		if (validate_email(owner, email, sizeof(email), &err) < 0 ||
		    mgr_session_lookup(ctx, caller(req), ref, email, buf, &err) < 0) {
			if (err.code == EINVAL)
				terr_prefix(&err, "owner");
			httpd_error_terr(resp, &err);
			return NULL;
		}
		ref = buf;
	}
	if (!container)
		return ref;
	if (strchr(ref, '/')) {
		httpd_error(resp, 400, "invalid_argument", "give the container once: in the path or as ?container=");
		return NULL;
	}
	char whole[API_REF_MAX];
	snprintf(whole, sizeof(whole), "%s/%s", ref, container);
	memcpy(buf, whole, sizeof(whole));
	return buf;
}

/* A long poll's timeout_s (0 to max seconds, default def) into *out;
 * false after answering 400. */
static bool query_timeout(struct httpd_req *req, struct httpd_resp *resp, long def, long max, int *out)
{
	const char *tmo = httpd_query(req, "timeout_s");
	long v = def;
	if (tmo) {
		uint64_t u;
		if (units_parse_whole(tmo, (uint64_t)max, &u) < 0) {
			httpd_error(resp, 400, "invalid_argument", "timeout_s must be 0 to %ld", max);
			return false;
		}
		v = (long)u;
	}
	*out = (int)v;
	return true;
}

/* ?wait=1[&timeout_s=N] of the routes that can wait for a change: *wait_s
 * the seconds to wait (default 30, at most 300), -1 without wait. false
 * after answering 400. */
static bool query_wait(struct httpd_req *req, struct httpd_resp *resp, int *wait_s)
{
	const char *wait = httpd_query(req, "wait");
	int timeout_s;
	if (!query_timeout(req, resp, 30, 300, &timeout_s))
		return false;
	*wait_s = wait && strcmp(wait, "0") ? timeout_s : -1;
	return true;
}

static void api_session_get(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	int wait_s;
	if (!query_wait(req, resp, &wait_s))
		return;
	char idbuf[API_REF_MAX];
	const char *ref = session_ref(ctx, req, resp, idbuf);
	if (!ref)
		return;
	char *body = NULL;
	size_t len = 0;
	struct terr err = {0};
	if (mgr_session_get_text(ctx, caller(req), ref, wait_s, &body, &len, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_bytes_take(resp, 200, "application/json", body, len);
}

static void api_session_stats(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	const char *since_s = httpd_query(req, "since");
	long long since = 0;
	if (since_s) {
		uint64_t u;
		if (units_parse_whole(since_s, INT64_MAX, &u) < 0) {
			httpd_error(resp, 400, "invalid_argument", "since must be a time in Unix milliseconds (an integer of 0 or more)");
			return;
		}
		since = (long long)u;
	}
	char idbuf[API_REF_MAX];
	const char *ref = session_ref(ctx, req, resp, idbuf);
	if (!ref)
		return;
	json_t *o = NULL;
	struct terr err = {0};
	int rc = mgr_session_stats(ctx, caller(req), ref, since, &o, &err);
	api_answer(resp, rc, 200, o, &err);
}

static void api_session_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (httpd_query(req, "container") || strchr(req->params[0], '/')) {
		httpd_error(resp, 400, "invalid_argument", "a cluster session is removed whole: leave out container");
		return;
	}
	char idbuf[API_REF_MAX];
	const char *ref = session_ref(ctx, req, resp, idbuf);
	if (!ref)
		return;
	json_t *o = NULL;
	struct terr err = {0};
	int rc = mgr_session_delete(ctx, caller(req), ref, &o, &err);
	api_answer(resp, rc, 200, o, &err);
}

/* The log is streamed as the agent sends it (text/plain, stdout and
 * stderr interleaved), never read whole into the manager. */
static void api_session_logs(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	const char *tail_s = httpd_query(req, "tail");
	const char *follow_s = httpd_query(req, "follow");
	long tail = 0;
	if (tail_s) {
		uint64_t u;
		if (units_parse_whole(tail_s, 1000000, &u) < 0) {
			httpd_error(resp, 400, "invalid_argument", "tail must be 0 to 1000000 lines");
			return;
		}
		tail = (long)u;
	}
	bool follow = false;
	if (follow_s) {
		if (strcmp(follow_s, "0") && strcmp(follow_s, "1") && strcmp(follow_s, "true") &&
		    strcmp(follow_s, "false")) {
			httpd_error(resp, 400, "invalid_argument", "follow must be 1 or 0");
			return;
		}
		follow = !strcmp(follow_s, "1") || !strcmp(follow_s, "true");
	}
	char idbuf[API_REF_MAX];
	const char *ref = session_ref(ctx, req, resp, idbuf);
	if (!ref)
		return;
	struct pump *p = NULL;
	char *kept = NULL;
	struct terr err = {0};
	if (mgr_session_logs(ctx, caller(req), ref, (int)tail, follow, &p, &kept, &err) < 0)
		httpd_error_terr(resp, &err);
	else if (kept)
		/* An ended session's: the last of its log, kept when its
		 * container was removed. */
		httpd_bytes_take(resp, 200, "text/plain; charset=utf-8", kept, strlen(kept));
	else
		pump_respond(p, req, resp, 200, "text/plain; charset=utf-8", NULL, NULL);
}

/* The output is streamed in frames (common/frames.h, docs/api.md "Exec
 * output stream"); the exec holds one of its user's slots until the
 * stream is closed. */
static void api_session_exec(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
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
	char idbuf[API_REF_MAX];
	const char *ref = session_ref(ctx, req, resp, idbuf);
	if (!ref)
		goto out;
	struct pump *p = NULL;
	struct mgr_exec_slot *slot = NULL;
	int rc = mgr_session_exec(ctx, caller(req), ref, cmd, (int)timeout_s, &p, &slot, &err);
	if (rc == -EUSERS)
		httpd_error(resp, 429, "too_many_execs", "%s", err.msg);
	else if (rc < 0)
		httpd_error_terr(resp, &err);
	else
		pump_respond(p, req, resp, 200, FRAMES_CONTENT_TYPE, mgr_exec_release, slot);
out:
	json_decref(body);
}

/* ---------- routes: nodes ---------- */

static void api_node_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)req;
	httpd_json(resp, 200, json_pack("{s:o}", "nodes", mgr_nodes_list(ctx)));
}

/* PATCH /v1/nodes/{id} {"schedulable": bool} and/or {"group": NAME}
 * (admins): drain or undrain, put in a resource group. */
static void api_node_update(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (!admin_only(req, resp, "drain or undrain a node or change its resource group"))
		return;
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	static const char *const known[] = {"schedulable", "group", NULL};
	json_t *v = json_object_get(body, "schedulable"), *g = json_object_get(body, "group");
	struct terr err = {0};
	if (api_check_fields(body, known, "schedulable, group", &err) < 0 || json_object_size(body) == 0 ||
	    (v && !json_is_boolean(v)) || (g && !json_is_string(g))) {
		httpd_error(resp, 400, "invalid_argument",
			    "body must be {\"schedulable\": false} (drain: no new sessions on the node), "
			    "{\"schedulable\": true} (undrain) and/or {\"group\": \"NAME\"} (its resource group)");
	} else if (g && mgr_group_name_check(json_string_value(g), &err) < 0) {
		httpd_error_terr(resp, &err);
	} else {
		json_t *o = NULL;
		int rc = g ? mgr_node_set_group(ctx, req->params[0], json_string_value(g), &o, &err) : 0;
		if (rc == 0 && v) {
			json_decref(o);
			o = NULL;
			rc = mgr_node_set_schedulable(ctx, req->params[0], json_is_true(v), &o, &err);
		}
		api_answer(resp, rc, 200, rc < 0 ? NULL : json_pack("{s:o}", "node", o), &err);
	}
	json_decref(body);
}

/* ---------- routes: resources ---------- */

static void api_resources(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	httpd_json(resp, 200, mgr_resources(ctx, caller(req)));
}

/* ---------- routes: settings ---------- */

/* The settings a user who is not an admin reads: what the web UI's
 * launch dialog (the fGPU step) and data page (the trash's days) show
 * them, the announcement every page's banner shows them, and, as
 * policy.default and policy.<their email>, their own limits. The rest
 * (storage hosts' paths, the registry's and the app proxy's addresses,
 * the scheduler's and agents' settings) is the admins'
 * (docs/security.md). */
static const char *const user_settings[] = {"fgpu_per_device", "fgpu_quantum", "folder_trash_days", "announcement",
					    NULL};

static bool user_setting(const char *key, const char *email)
{
	for (size_t i = 0; user_settings[i]; i++)
		if (!strcmp(key, user_settings[i]))
			return true;
	return !strncmp(key, "policy.", 7) && (!strcmp(key + 7, "default") || !strcmp(key + 7, email));
}

/* ?flat=1: {"fgpu_per_device": 1, ..., "policy.default": {...}}, the form
 * `tessera config get --prefix` prints and put-json takes. */
static void api_config_get_flat(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *o = mgr_config_flat(ctx);
	if (o && !is_admin(req)) {
		const char *k;
		json_t *v;
		void *tmp;
		json_object_foreach_safe(o, tmp, k, v) {
			if (!user_setting(k, caller(req)->email))
				json_object_del(o, k);
		}
	}
	if (!o)
		httpd_error(resp, 500, "internal", "out of memory");
	else
		httpd_json(resp, 200, o);
}

static void api_config_get(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	const char *flat = httpd_query(req, "flat");
	if (flat && (!strcmp(flat, "1") || !strcmp(flat, "true"))) {
		api_config_get_flat(ctx, req, resp);
		return;
	}
	json_t *o = mgr_config_get(ctx);
	if (o && !is_admin(req)) {
		const char *k;
		json_t *v;
		void *tmp;
		json_object_foreach_safe(o, tmp, k, v) {
			if (strcmp(k, "policies") && !user_setting(k, ""))
				json_object_del(o, k);
		}
	}
	/* Policies are keyed by email: a user who is not an admin sees the
	 * default and their own, not who else has an account. */
	json_t *pol = json_object_get(o, "policies");
	if (o && pol && !is_admin(req)) {
		json_t *mine = json_object();
		json_t *d = json_object_get(pol, "default"), *own = json_object_get(pol, caller(req)->email);
		if (mine && d)
			json_object_set(mine, "default", d);
		if (mine && own)
			json_object_set(mine, caller(req)->email, own);
		if (!mine || json_object_set_new(o, "policies", mine) < 0) {
			json_decref(o);
			httpd_error(resp, 500, "internal", "out of memory");
			return;
		}
	}
	httpd_json(resp, 200, o);
}

static void api_config_set(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (!admin_only(req, resp, "change cluster settings"))
		return;
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	json_t *value = json_object_get(body, "value");
	if (!value) {
		httpd_error(resp, 400, "invalid_argument", "body must be {\"value\": ...}");
	} else {
		json_t *o = NULL;
		struct terr err = {0};
		int rc = mgr_config_set(ctx, req->params[0], value, &o, &err);
		api_answer(resp, rc, 200, o, &err);
	}
	json_decref(body);
}

/* put-json: {"settings": {KEY: value, ...}}, all checked before any is set. */
static void api_config_put(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (!admin_only(req, resp, "change cluster settings"))
		return;
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	json_t *flat = json_object_get(body, "settings");
	if (!json_is_object(flat) || json_object_size(body) != 1) {
		httpd_error(resp, 400, "invalid_argument", "body must be {\"settings\": {KEY: value, ...}}");
	} else {
		struct terr err = {0};
		int rc = mgr_config_put(ctx, flat, &err);
		/* An unknown key in a file is a bad request, not a missing route. */
		if (rc == -ENOENT)
			rc = -(err.code = EINVAL);
		api_answer(resp, rc, 200, rc == 0 ? mgr_config_flat(ctx) : NULL, &err);
	}
	json_decref(body);
}

/* ---------- routes: images ---------- */

static void api_image_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	const char *all = httpd_query(req, "all");
	bool show_all = all && (!strcmp(all, "1") || !strcmp(all, "true"));
	json_t *images = mgr_images_list(ctx, caller(req), show_all);
	mgr_commits_annotate(ctx, images);
	/* Private images being committed, or whose commit failed. */
	json_t *commits = mgr_commits_json(ctx, caller(req));
	json_array_extend(images, commits);
	json_decref(commits);
	httpd_json(resp, 200, json_pack("{s:o}", "images", images));
}

static void api_image_rescan(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (!admin_only(req, resp, "rescan the nodes' images"))
		return;
	json_t *o = NULL;
	struct terr err = {0};
	int rc = mgr_images_rescan(ctx, &o, &err);
	api_answer(resp, rc, 200, o, &err);
}

static void api_image_remove(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *o = NULL;
	struct terr err = {0};
	int rc = validate_image_ref(req->params[0], &err);
	if (rc == 0)
		rc = mgr_image_remove(ctx, caller(req), req->params[0], &o, &err);
	api_answer(resp, rc, 200, o, &err);
}

static void api_image_aliases(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)req;
	httpd_json(resp, 200, json_pack("{s:o}", "aliases", mgr_image_aliases(ctx)));
}

static void api_image_alias_set(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (!admin_only(req, resp, "set image aliases"))
		return;
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	const char *image = json_string_value(json_object_get(body, "image"));
	if (!image || json_object_size(body) != 1) {
		httpd_error(resp, 400, "invalid_argument", "body must be {\"image\": \"IMAGE\"}");
	} else {
		struct terr err = {0};
		int rc = mgr_image_alias(ctx, req->params[0], image, &err);
		api_answer(resp, rc, 200, rc < 0 ? NULL : json_pack("{s:s,s:s}", "alias", req->params[0], "image", image), &err);
	}
	json_decref(body);
}

static void api_image_alias_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (!admin_only(req, resp, "remove image aliases"))
		return;
	struct terr err = {0};
	int rc = mgr_image_dealias(ctx, req->params[0], &err);
	api_answer(resp, rc, 200, rc < 0 ? NULL : json_pack("{s:s}", "alias", req->params[0]), &err);
}

/* ---------- routes: private images and pulls ---------- */

/* An optional string member; false (answered) when present but not a
 * string. */
static bool opt_string(json_t *body, const char *key, const char **out, struct httpd_resp *resp)
{
	json_t *v = json_object_get(body, key);
	*out = NULL;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_string(v)) {
		httpd_error(resp, 400, "invalid_argument", "%s must be a string", key);
		return false;
	}
	*out = json_string_value(v);
	return true;
}

static void api_session_commit(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = req->body_len ? api_parse_body(req, resp) : json_object();
	if (!body)
		return;
	const char *name, *tag, *ref;
	char idbuf[API_REF_MAX];
	if (opt_string(body, "name", &name, resp) && opt_string(body, "tag", &tag, resp) &&
	    (ref = session_ref(ctx, req, resp, idbuf))) {
		json_t *o = NULL;
		struct terr err = {0};
		int rc = mgr_session_commit(ctx, caller(req), ref, name, tag, &o, &err);
		api_answer(resp, rc, 202, rc < 0 ? NULL : json_pack("{s:o}", "commit", o), &err);
	}
	json_decref(body);
}

static void api_commit_get(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	int wait_s;
	if (!query_wait(req, resp, &wait_s))
		return;
	json_t *o = NULL;
	struct terr err = {0};
	int rc = mgr_commit_get(ctx, caller(req), req->params[0], wait_s, &o, &err);
	api_answer(resp, rc, 200, rc < 0 ? NULL : json_pack("{s:o}", "commit", o), &err);
}

static void api_image_pull(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	const char *image, *node;
	if (opt_string(body, "image", &image, resp) && opt_string(body, "node", &node, resp)) {
		json_t *o = NULL;
		struct terr err = {0};
		int rc = image ? mgr_image_pull(ctx, caller(req), image, node, &o, &err)
			       : terr_set(&err, EINVAL, "image is required");
		api_answer(resp, rc, 202, rc < 0 ? NULL : json_pack("{s:o}", "pull", o), &err);
	}
	json_decref(body);
}

static void api_image_pull_get(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *o = NULL;
	struct terr err = {0};
	int rc = mgr_image_pull_get(ctx, caller(req), req->params[0], &o, &err);
	api_answer(resp, rc, 200, rc < 0 ? NULL : json_pack("{s:o}", "pull", o), &err);
}

/* ---------- routes: live events ---------- */

/* One event stream: whenever anything the caller sees changes, the parts
 * that changed (sessions, nodes), built from the kept texts that every
 * stream and the list API share; a keepalive comment when idle. */
struct event_stream {
	struct manager *m;
	struct user_rec user;
	struct mgr_stream st;
	char *buf;
	size_t len, off;
};

#define EVENT_KEEPALIVE_S 15

static long event_stream_read(void *cls, char *out, size_t max)
{
	struct event_stream *es = cls;
	if (es->off >= es->len) {
		free(es->buf);
		es->buf = NULL;
		es->len = es->off = 0;
		char *text = NULL;
		size_t len = 0;
		if (mgr_stream_next(es->m, &es->user, &es->st, EVENT_KEEPALIVE_S, &text, &len) < 0)
			return HTTPD_STREAM_END;
		static const char head[] = "event: state\ndata: ", tail[] = "\n\n";
		if (text) {
			es->buf = malloc(sizeof(head) - 1 + len + sizeof(tail));
			if (es->buf) {
				memcpy(es->buf, head, sizeof(head) - 1);
				memcpy(es->buf + sizeof(head) - 1, text, len);
				memcpy(es->buf + sizeof(head) - 1 + len, tail, sizeof(tail));
			}
			free(text);
		} else {
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
	mgr_stream_free(&es->st);
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
	es->st.seen = MGR_STATE_UNSEEN;
	resp->status = 200;
	resp->stream = event_stream_read;
	resp->stream_cls = es;
	resp->stream_free = event_stream_free;
	resp->stream_type = "text/event-stream";
}

/* ---------- routes: session apps (docs/apps.md) ---------- */

static void api_session_apps(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	char idbuf[API_REF_MAX];
	const char *ref = session_ref(ctx, req, resp, idbuf);
	if (!ref)
		return;
	json_t *apps = NULL;
	struct terr err = {0};
	int rc = mgr_session_apps(ctx, caller(req), ref, &apps, &err);
	api_answer(resp, rc, 200, rc < 0 ? NULL : json_pack("{s:o}", "apps", apps), &err);
}

/* No body: the app is in the path. */
static void api_session_app_open(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	char idbuf[API_REF_MAX];
	const char *ref = session_ref(ctx, req, resp, idbuf);
	if (!ref)
		return;
	json_t *o = NULL;
	struct terr err = {0};
	int rc = mgr_session_app_open(ctx, caller(req), ref, req->params[1], &o, &err);
	api_answer(resp, rc, 200, o, &err);
}

static void api_proxy_redeem(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	const char *token = json_string_value(json_object_get(body, "token"));
	if (!token || json_object_size(body) != 1) {
		httpd_error(resp, 400, "invalid_argument", "body must be {\"token\": \"TOKEN\"}");
	} else {
		json_t *o = NULL;
		struct terr err = {0};
		int rc = mgr_proxy_redeem(ctx, token, &o, &err);
		/* A refused link is the proxy's 403 page, with why. */
		if (rc == -EACCES)
			httpd_error(resp, 403, "forbidden", "%s", err.msg);
		else
			api_answer(resp, rc, 200, o, &err);
	}
	json_decref(body);
}

static void api_proxy_routes(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	const char *since_s = httpd_query(req, "since");
	long long since = -1;
	int timeout_s;
	if (since_s) {
		uint64_t u;
		if (units_parse_whole(since_s, INT64_MAX, &u) < 0) {
			httpd_error(resp, 400, "invalid_argument", "since must be a generation (an integer of 0 or more)");
			return;
		}
		since = (long long)u;
	}
	if (!query_timeout(req, resp, 30, 60, &timeout_s))
		return;
	/* What the proxy serves (proxies before this gave nothing). */
	const char *ports = httpd_query(req, "ports"), *domain = httpd_query(req, "domain");
	int lo, hi;
	struct terr e = {0};
	if (domain && *domain && approutes_check_domain(domain, &e) == 0)
		mgr_apps_proxy_serves(ctx, 0, 0, domain);
	else if (ports && util_parse_port_range(ports, &lo, &hi, &e) == 0)
		mgr_apps_proxy_serves(ctx, lo, hi, NULL);
	json_t *o = NULL;
	mgr_proxy_poll(ctx, true);   /* the About page's "app proxy" */
	int rc = mgr_proxy_routes(ctx, since, timeout_s, &o);
	mgr_proxy_poll(ctx, false);
	if (rc < 0)
		httpd_error(resp, 503, "unavailable", "the manager is stopping");
	else
		httpd_json(resp, 200, o);
}

/* ---------- routes: agents (cluster secret) ---------- */

static void api_agent_register(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct auth_info *ai = req->auth;
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	const char *id = json_string_value(json_object_get(body, "id"));
	if (!id || strcmp(id, ai->agent_id)) {
		httpd_error(resp, 403, "forbidden", "agent credential %s does not match the id in the body", ai->agent_id);
	} else {
		json_t *reply = NULL;
		struct terr err = {0};
		int rc = mgr_agent_register_remote(ctx, body, &reply, &err);
		api_answer(resp, rc, 200, reply, &err);
	}
	json_decref(body);
}

static void api_agent_heartbeat(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct auth_info *ai = req->auth;
	if (strcmp(req->params[0], ai->agent_id)) {
		httpd_error(resp, 403, "forbidden", "agent %s may not speak for %s", ai->agent_id, req->params[0]);
		return;
	}
	/* An empty body is a bare heartbeat (older agents send {}). */
	json_t *body = req->body_len ? api_parse_body(req, resp) : json_object();
	if (!body)
		return;
	json_t *stats = json_object_get(body, "stats");
	if (stats && !json_is_object(stats)) {
		httpd_error(resp, 400, "invalid_argument", "a heartbeat's stats must be an object");
		json_decref(body);
		return;
	}
	json_t *reply = NULL;
	struct terr err = {0};
	int rc = mgr_agent_heartbeat(ctx, ai->agent_id, stats, &reply, &err);
	json_decref(body);
	api_answer(resp, rc, 200, reply, &err);
}

static void api_agent_event(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct auth_info *ai = req->auth;
	if (strcmp(req->params[0], ai->agent_id)) {
		httpd_error(resp, 403, "forbidden", "agent %s may not speak for %s", ai->agent_id, req->params[0]);
		return;
	}
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	const char *kind = json_string_value(json_object_get(body, "event"));
	bool images = kind && !strcmp(kind, AGENT_EVENT_IMAGES);
	json_t *list = json_object_get(body, "images");
	if (images ? list && !json_is_array(list) && !json_is_null(list) : !json_is_string(json_object_get(body, "session_id"))) {
		httpd_error(resp, 400, "invalid_argument", images ? "an images event's images must be an array or null"
								   : "event needs a session_id");
	} else {
		mgr_agent_event(ctx, ai->agent_id, body);
		httpd_json(resp, 200, json_object());
	}
	json_decref(body);
}

/* ---------- metrics ---------- */

/* Prometheus scrapes without the API's signatures: open, or with
 * metrics_token set, "Authorization: Bearer TOKEN" (docs/admin.md,
 * "Metrics"). Nothing in it is a secret. */
static void api_metrics(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	const char *token = mgr_metrics_token(ctx);
	if (token && *token) {
		const char *authz = httpd_header(req, "Authorization");
		if (!authz || strncmp(authz, "Bearer ", 7) != 0 || !sign_equal(authz + 7, token)) {
			httpd_error(resp, 401, "unauthenticated",
				    "/metrics needs \"Authorization: Bearer TOKEN\" with the manager's metrics_token");
			return;
		}
	}
	char *text = mgr_metrics_text(ctx);
	if (!text) {
		httpd_error(resp, 500, "internal", "out of memory");
		return;
	}
	httpd_bytes(resp, 200, METRICS_CONTENT_TYPE, text, strlen(text));
	free(text);
}

/* One table: every route of the manager, with who may call it. */
const struct httpd_route manager_routes[] = {
	{"GET", "/v1/auth/whoami", api_whoami, AUTH_USER},
	{"POST", "/v1/sessions", api_session_create, AUTH_USER},
	{"GET", "/v1/sessions", api_session_list, AUTH_USER},
	{"GET", "/v1/sessions/{ref}", api_session_get, AUTH_USER},
	{"DELETE", "/v1/sessions/{ref}", api_session_delete, AUTH_USER},
	{"GET", "/v1/sessions/{ref}/logs", api_session_logs, AUTH_USER},
	{"GET", "/v1/sessions/{ref}/stats", api_session_stats, AUTH_USER},
	{"POST", "/v1/sessions/{ref}/exec", api_session_exec, AUTH_USER},
	{"GET", "/v1/sessions/{ref}/scheduling", api_session_scheduling, AUTH_USER},
	{"GET", "/v1/queue", api_queue_list, AUTH_USER},
	{"POST", "/v1/queue/{ref}/move", api_queue_move, AUTH_USER},
	{"GET", "/v1/nodes", api_node_list, AUTH_USER},
	{"PATCH", "/v1/nodes/{id}", api_node_update, AUTH_USER},
	{"GET", "/v1/resources", api_resources, AUTH_USER},
	{"GET", "/v1/projects", api_project_list, AUTH_USER},
	{"POST", "/v1/projects", api_project_create, AUTH_USER},
	{"GET", "/v1/projects/{name}", api_project_get, AUTH_USER},
	{"PATCH", "/v1/projects/{name}", api_project_update, AUTH_USER},
	{"DELETE", "/v1/projects/{name}", api_project_delete, AUTH_USER},
	{"PUT", "/v1/projects/{name}/members/{email}", api_project_member_put, AUTH_USER},
	{"DELETE", "/v1/projects/{name}/members/{email}", api_project_member_delete, AUTH_USER},
	{"GET", "/v1/fairshare", api_fairshare, AUTH_USER},
	{"GET", "/v1/presets", api_preset_list, AUTH_USER},
	{"POST", "/v1/presets", api_preset_create, AUTH_USER},
	{"PATCH", "/v1/presets/{name}", api_preset_update, AUTH_USER},
	{"DELETE", "/v1/presets/{name}", api_preset_delete, AUTH_USER},
	{"GET", "/v1/usage/summary", api_usage_summary, AUTH_USER},
	{"POST", "/v1/sessions/{ref}/commit", api_session_commit, AUTH_USER},
	{"GET", "/v1/sessions/{ref}/apps", api_session_apps, AUTH_USER},
	{"POST", "/v1/sessions/{ref}/apps/{app}", api_session_app_open, AUTH_USER},
	{"POST", "/v1/proxy/redeem", api_proxy_redeem, AUTH_PROXY},
	{"GET", "/v1/proxy/routes", api_proxy_routes, AUTH_PROXY},
	{"GET", "/v1/commits/{id}", api_commit_get, AUTH_USER},
	{"GET", "/v1/images", api_image_list, AUTH_USER},
	{"POST", "/v1/images/rescan", api_image_rescan, AUTH_USER},
	{"GET", "/v1/images/aliases", api_image_aliases, AUTH_USER},
	{"PUT", "/v1/images/aliases/{alias}", api_image_alias_set, AUTH_USER},
	{"DELETE", "/v1/images/aliases/{alias}", api_image_alias_delete, AUTH_USER},
	{"DELETE", "/v1/images/{ref}", api_image_remove, AUTH_USER},
	{"POST", "/v1/images/pull", api_image_pull, AUTH_USER},
	{"GET", "/v1/images/pulls/{id}", api_image_pull_get, AUTH_USER},
	{"GET", "/v1/config", api_config_get, AUTH_USER},
	{"PUT", "/v1/config/{key}", api_config_set, AUTH_USER},
	{"PUT", "/v1/config", api_config_put, AUTH_USER},
	{"GET", "/v1/events", api_events, AUTH_USER},
	{"POST", "/v1/auth/login", api_auth_login, AUTH_PUBLIC},
	{"GET", "/v1/users", api_user_list, AUTH_USER},
	{"POST", "/v1/users", api_user_create, AUTH_USER},
	{"GET", "/v1/users/{id}", api_user_get, AUTH_USER},
	{"PATCH", "/v1/users/{id}", api_user_update, AUTH_USER},
	{"DELETE", "/v1/users/{id}", api_user_delete, AUTH_USER},
	{"POST", "/v1/users/{id}/password", api_user_password, AUTH_USER},
	{"GET", "/v1/keypairs", api_key_list, AUTH_USER},
	{"POST", "/v1/keypairs", api_key_create, AUTH_USER},
	{"DELETE", "/v1/keypairs/{key}", api_key_revoke, AUTH_USER},
	{"GET", "/v1/ssh-keys", api_sshkey_list, AUTH_USER},
	{"POST", "/v1/ssh-keys", api_sshkey_add, AUTH_USER},
	{"DELETE", "/v1/ssh-keys/{id}", api_sshkey_remove, AUTH_USER},
	{"POST", "/v1/folders", api_folder_create, AUTH_USER},
	{"GET", "/v1/folders", api_folder_list, AUTH_USER},
	{"GET", "/v1/folders/{name}", api_folder_get, AUTH_USER},
	{"PATCH", "/v1/folders/{name}", api_folder_update, AUTH_USER},
	{"DELETE", "/v1/folders/{name}", api_folder_delete, AUTH_USER},
	{"POST", "/v1/folders/{name}/restore", api_folder_restore, AUTH_USER},
	{"POST", "/v1/folders/{name}/shares", api_folder_share, AUTH_USER},
	{"DELETE", "/v1/folders/{name}/shares/{email}", api_folder_unshare, AUTH_USER},
	{"GET", "/v1/folders/{name}/files", api_folder_files, AUTH_USER},
	{"DELETE", "/v1/folders/{name}/files", api_folder_file_delete, AUTH_USER},
	{"GET", "/v1/folders/{name}/download", api_folder_download, AUTH_USER},
	{"PUT", "/v1/folders/{name}/upload", api_folder_upload, AUTH_USER | HTTPD_ROUTE_STREAM_BODY},
	{"POST", "/v1/folders/{name}/mkdir", api_folder_mkdir, AUTH_USER},
	{"POST", "/v1/folders/{name}/mv", api_folder_move, AUTH_USER},
	{"POST", "/v1/agents/register", api_agent_register, AUTH_CLUSTER},
	{"POST", "/v1/agents/{id}/heartbeat", api_agent_heartbeat, AUTH_CLUSTER},
	{"POST", "/v1/agents/{id}/events", api_agent_event, AUTH_CLUSTER},
	{"GET", "/metrics", api_metrics, AUTH_PUBLIC},
	{"GET", "/v1/dashboard", api_dashboard, AUTH_USER},
	{"GET", "/v1/about", api_about, AUTH_USER},
	{"POST", "/v1/keypairs/{key}/rotate", api_key_rotate, AUTH_USER},
};
const size_t manager_n_routes = sizeof(manager_routes) / sizeof(manager_routes[0]);
