/* Users and password login on the manager's HTTP API (docs/api.md, "Users"):
 *  - POST /v1/auth/login: email + password -> the user's keypair. Only the
 *    webserver may call it: it proves itself with the cluster secret in
 *    X-Tessera-Web-Secret, so the route is no password oracle for anyone
 *    else. Failures are rate-limited per account and client address
 *    together, and per client address (the webserver passes the
 *    browser's address in X-Tessera-Client-Addr): someone who knows an
 *    email locks out their own address, not the account's owner. The
 *    counts are the manager's (mgr_login_limits): in Redis when it has
 *    one, so every manager on it shares them.
 *  - GET/POST /v1/users, GET/PATCH/DELETE /v1/users/{id}: admin only;
 *    POST /v1/users/{id}/password: admins for anyone, every user for
 *    their own with their current password.
 *  - GET/POST /v1/keypairs, DELETE /v1/keypairs/{access_key}: a user's
 *    own API keys (admins may revoke anyone's).
 * Translation only, as in api.c: the users themselves are the core's
 * (users.c). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/sign.h"
#include "common/util.h"
#include "manager/http/internal.h"
#include "auth/ratelimit.h"

/* ---------- POST /v1/auth/login ---------- */

void api_auth_login(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	struct ratelimit *fail_by_pair, *fail_by_addr;
	mgr_login_limits(m, &fail_by_pair, &fail_by_addr);
	const char *secret = httpd_header(req, "X-Tessera-Web-Secret");
	const char *cluster_secret = mgr_cluster_secret(m);
	if (!cluster_secret || !*cluster_secret || !secret || !sign_equal(secret, cluster_secret)) {
		httpd_error(resp, 403, "forbidden",
			    "password login is only for the webserver (it signs in with the cluster secret); "
			    "API clients use their access key and secret key");
		return;
	}
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	const char *email_in = json_string_value(json_object_get(body, "email"));
	const char *password = json_string_value(json_object_get(body, "password"));
	const char *addr = httpd_header(req, "X-Tessera-Client-Addr");
	char email[256], addr_key[160];
	struct terr err = {0};
	snprintf(addr_key, sizeof(addr_key), "addr:%.128s", addr && *addr ? addr : "unknown");
	if (!email_in || !password || !*password) {
		httpd_error(resp, 400, "invalid_argument", "email and password are required");
		goto out;
	}
	if (validate_email(email_in, email, sizeof(email), &err) < 0) {
		httpd_error_terr(resp, &err);
		goto out;
	}
	int64_t now = util_mono_ms();
	int64_t wait = ratelimit_check_pair(fail_by_pair, email, addr_key, now);
	int64_t wait_addr = ratelimit_check(fail_by_addr, addr_key, now);
	if (wait_addr > wait)
		wait = wait_addr;
	if (wait > 0) {
		httpd_error(resp, 429, "rate_limited",
			    "too many failed logins; try again in %lld seconds", (long long)(wait + 999) / 1000);
		goto out;
	}
	struct user_rec u;
	if (mgr_user_login(m, email, password, &u, &err) < 0) {
		/* A right password for a disabled account is no failed guess. */
		if (err.code == EACCES) {
			ratelimit_fail_pair(fail_by_pair, email, addr_key, now);
			ratelimit_fail(fail_by_addr, addr_key, now);
			log_info("manager", "failed login for %s from %s", email, addr && *addr ? addr : "unknown");
		}
		httpd_error_terr(resp, &err);
		goto out;
	}
	ratelimit_reset_pair(fail_by_pair, email, addr_key);
	/* "apps": where session apps are served, which the webserver must
	 * not be (it refuses logins on that host: docs/security.md). */
	httpd_json(resp, 200, json_pack("{s:o,s:s,s:s,s:o}", "user", mgr_user_json(&u), "access_key", u.access_key,
					"secret_key", u.secret_key, "apps", mgr_apps_origin(m)));
out:
	json_decref(body);
}

/* ---------- users (admin) ---------- */

static bool require_admin(struct httpd_req *req, struct httpd_resp *resp)
{
	if (caller(req)->is_admin)
		return true;
	httpd_error(resp, 403, "forbidden", "only administrators may manage users");
	return false;
}

void api_user_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (!require_admin(req, resp))
		return;
	httpd_json(resp, 200, json_pack("{s:o}", "users", mgr_users_list(ctx)));
}

static int check_fields(json_t *body, const char *const *allowed, struct terr *err)
{
	const char *k;
	json_t *v;
	json_object_foreach(body, k, v) {
		bool known = false;
		for (size_t i = 0; allowed[i]; i++)
			known = known || !strcmp(k, allowed[i]);
		if (!known)
			return terr_set(err, EINVAL, "unknown field '%.64s'", k);
	}
	return 0;
}

void api_user_create(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (!require_admin(req, resp))
		return;
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	static const char *const allowed[] = {"email", "password", "is_admin", NULL};
	struct terr err = {0};
	char email[256];
	json_t *pw = json_object_get(body, "password"), *adm = json_object_get(body, "is_admin");
	if (check_fields(body, allowed, &err) < 0 ||
	    validate_email(json_string_value(json_object_get(body, "email")), email, sizeof(email), &err) < 0) {
		httpd_error_terr(resp, &err);
		goto out;
	}
	if (pw && !json_is_null(pw) && !json_is_string(pw)) {
		httpd_error(resp, 400, "invalid_argument", "password must be a string");
		goto out;
	}
	if (adm && !json_is_null(adm) && !json_is_boolean(adm)) {
		httpd_error(resp, 400, "invalid_argument", "is_admin must be true or false");
		goto out;
	}
	json_t *reply = NULL;
	if (mgr_user_create(ctx, email, json_string_value(pw), json_is_true(adm), caller(req)->email, &reply, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 201, reply);
out:
	json_decref(body);
}

/* Whether {id} (an id or an email) names the caller. */
static bool is_self(const struct user_rec *u, const char *ref)
{
	return !strcmp(ref, u->id) || !strcasecmp(ref, u->email);
}

void api_user_update(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (!require_admin(req, resp))
		return;
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	static const char *const allowed[] = {"disabled", "password", "is_admin", NULL};
	struct terr err = {0};
	json_t *dis = json_object_get(body, "disabled"), *pw = json_object_get(body, "password");
	json_t *adm = json_object_get(body, "is_admin");
	if (check_fields(body, allowed, &err) < 0) {
		httpd_error_terr(resp, &err);
		goto out;
	}
	if (dis && !json_is_boolean(dis)) {
		httpd_error(resp, 400, "invalid_argument", "disabled must be true or false");
		goto out;
	}
	if (adm && !json_is_boolean(adm)) {
		httpd_error(resp, 400, "invalid_argument", "is_admin must be true or false");
		goto out;
	}
	if (pw && !json_is_string(pw)) {
		httpd_error(resp, 400, "invalid_argument", "password must be a string");
		goto out;
	}
	/* One's own password takes the current one, admins' too. */
	if (pw && is_self(caller(req), req->params[0])) {
		httpd_error(resp, 400, "invalid_argument",
			    "to change your own password give your current one: POST /v1/users/{id}/password with "
			    "old_password (the Credentials page, tessera user passwd)");
		goto out;
	}
	if (!dis && !pw && !adm) {
		httpd_error(resp, 400, "invalid_argument", "nothing to change: give disabled, is_admin and/or password");
		goto out;
	}
	json_t *user = NULL;
	if (mgr_user_update(ctx, req->params[0], dis ? json_is_true(dis) : -1, adm ? json_is_true(adm) : -1,
			    json_string_value(pw), caller(req), &user, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 200, json_pack("{s:o}", "user", user));
out:
	json_decref(body);
}

void api_user_get(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (!require_admin(req, resp))
		return;
	struct terr err = {0};
	json_t *out = NULL;
	if (mgr_user_get(ctx, req->params[0], &out, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 200, out);
}

void api_user_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (!require_admin(req, resp))
		return;
	struct terr err = {0};
	json_t *reply = NULL;
	if (mgr_user_remove(ctx, req->params[0], caller(req), &reply, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 200, reply);
}

/* POST /v1/users/{id}/password {"password"?, "old_password"?}. A user's
 * own password (id or email the caller's, admins too): "old_password"
 * the current one and "password" the new, both required; wrong guesses
 * are counted by the login limiter under (the account's email,
 * "password-change"), so a browser left logged in is no oracle for the
 * password. Anyone
 * else's: admins only ("password" absent: one is generated). A user who
 * is not an admin gets the same answer for another user as for no one. */
static void own_password(void *ctx, struct httpd_req *req, struct httpd_resp *resp, json_t *body)
{
	struct ratelimit *fail_by_pair, *fail_by_addr;
	mgr_login_limits(ctx, &fail_by_pair, &fail_by_addr);
	const struct user_rec *me = caller(req);
	json_t *old = json_object_get(body, "old_password"), *pw = json_object_get(body, "password"), *reply = NULL;
	struct terr err = {0};
	if (!json_is_string(old) || !json_string_length(old)) {
		httpd_error(resp, 400, "invalid_argument",
			    "to change your own password give your current one as old_password, and the new one as password");
		return;
	}
	if (!json_is_string(pw) || !json_string_length(pw)) {
		httpd_error(resp, 400, "invalid_argument", "password (the new one) must be a non-empty string");
		return;
	}
	int64_t now = util_mono_ms();
	int64_t wait = ratelimit_check_pair(fail_by_pair, me->email, "password-change", now);
	if (wait > 0) {
		httpd_error(resp, 429, "rate_limited", "too many wrong current passwords; try again in %lld seconds",
			    (long long)(wait + 999) / 1000);
		return;
	}
	if (mgr_user_change_own_password(ctx, me, json_string_value(old), json_string_value(pw), &reply, &err) < 0) {
		if (err.code == EPERM) {
			ratelimit_fail_pair(fail_by_pair, me->email, "password-change", now);
			log_info("manager", "%s gave a wrong current password to change it", me->email);
		}
		httpd_error_terr(resp, &err);
		return;
	}
	ratelimit_reset_pair(fail_by_pair, me->email, "password-change");
	log_info("manager", "%s changed their password", me->email);
	httpd_json(resp, 200, reply);
}

void api_user_password(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = req->body_len ? api_parse_body(req, resp) : json_object();
	if (!body)
		return;
	static const char *const allowed[] = {"password", "old_password", NULL};
	struct terr err = {0};
	json_t *pw = json_object_get(body, "password"), *reply = NULL;
	if (check_fields(body, allowed, &err) < 0)
		httpd_error_terr(resp, &err);
	else if (is_self(caller(req), req->params[0]))
		own_password(ctx, req, resp, body);
	else if (!caller(req)->is_admin)
		httpd_error(resp, 403, "forbidden", "only administrators may set another user's password");
	else if (json_object_get(body, "old_password"))
		httpd_error(resp, 400, "invalid_argument",
			    "old_password is for changing your own password; another user's is set without it");
	else if (pw && !json_is_null(pw) && !json_is_string(pw))
		httpd_error(resp, 400, "invalid_argument", "password must be a string");
	else if (mgr_user_set_password(ctx, req->params[0], json_string_value(pw), caller(req), &reply, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 200, reply);
	json_decref(body);
}

/* ---------- API keys (every user, their own) ---------- */

void api_key_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	httpd_json(resp, 200, mgr_keys_list(ctx, caller(req)));
}

/* A key's label: what its owner calls it, shown in lists. */
static int check_label(json_t *v, struct terr *err)
{
	if (!v || json_is_null(v))
		return 0;
	const char *l = json_string_value(v);
	if (!l)
		return terr_set(err, EINVAL, "label must be a string");
	if (strlen(l) >= STORE_NAME_MAX)
		return terr_set(err, EINVAL, "label is %zu bytes; at most %d", strlen(l), STORE_NAME_MAX - 1);
	for (const unsigned char *p = (const unsigned char *)l; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return terr_set(err, EINVAL, "label must not hold control characters");
	return 0;
}

void api_key_create(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = req->body_len ? api_parse_body(req, resp) : json_object();
	if (!body)
		return;
	static const char *const allowed[] = {"label", NULL};
	struct terr err = {0};
	json_t *label = json_object_get(body, "label"), *reply = NULL;
	if (check_fields(body, allowed, &err) < 0 || check_label(label, &err) < 0 ||
	    mgr_key_create(ctx, caller(req), json_string_value(label), &reply, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 201, reply);
	json_decref(body);
}

void api_key_revoke(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	json_t *reply = NULL;
	if (mgr_key_revoke(ctx, caller(req), req->params[0], &reply, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 200, reply);
}

/* ---------- SSH public keys (every user, their own) ---------- */

void api_sshkey_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	httpd_json(resp, 200, mgr_sshkeys_list(ctx, caller(req)));
}

void api_sshkey_add(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	static const char *const allowed[] = {"key", NULL};
	struct terr err = {0};
	json_t *key = json_object_get(body, "key"), *reply = NULL;
	if (check_fields(body, allowed, &err) < 0)
		httpd_error_terr(resp, &err);
	else if (!json_is_string(key))
		httpd_error(resp, 400, "invalid_argument",
			    "key must be a public key line as a string, e.g. the contents of ~/.ssh/id_ed25519.pub");
	else if (mgr_sshkey_add(ctx, caller(req), json_string_value(key), &reply, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 201, reply);
	json_decref(body);
}

void api_sshkey_remove(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	json_t *reply = NULL;
	if (mgr_sshkey_remove(ctx, caller(req), req->params[0], &reply, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 200, json_pack("{s:o}", "removed", reply));
}
