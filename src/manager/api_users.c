/* Users and password login on the manager (docs/api.md, "Users"):
 *  - POST /v1/auth/login: email + password -> the user's keypair. Only the
 *    webserver may call it: it proves itself with the cluster secret in
 *    X-Tessera-Web-Secret, so the route is no password oracle for anyone
 *    else. Failures are rate-limited per email and per client address (the
 *    webserver passes the browser's address in X-Tessera-Client-Addr).
 *  - GET/POST /v1/users, PATCH /v1/users/{id}: admin only.
 * Users live in m->users (under m->mu) and are written through
 * m->so->user_put. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/sign.h"
#include "common/util.h"
#include "manager/internal.h"
#include "auth/pwhash.h"
#include "auth/ratelimit.h"

#define LOGIN_MAX_FAILURES 5
#define LOGIN_WINDOW_MS (15 * 60 * 1000)

static pthread_once_t limits_once = PTHREAD_ONCE_INIT;
static struct ratelimit *fail_by_email, *fail_by_addr;

static void limits_init(void)
{
	fail_by_email = ratelimit_new(LOGIN_MAX_FAILURES, LOGIN_WINDOW_MS);
	/* An address may try a few emails (a shared lab NAT), not hundreds. */
	fail_by_addr = ratelimit_new(4 * LOGIN_MAX_FAILURES, LOGIN_WINDOW_MS);
}

static const struct user_rec *me(struct httpd_req *req)
{
	return &((struct auth_info *)req->auth)->user;
}

static json_t *body_json(struct httpd_req *req, struct httpd_resp *resp)
{
	json_error_t jerr;
	json_t *body = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
	if (!body || !json_is_object(body)) {
		httpd_error(resp, 400, "invalid_argument", "request body must be a JSON object%s%s",
			    body ? "" : ": ", body ? "" : jerr.text);
		json_decref(body);
		return NULL;
	}
	return body;
}

json_t *mgr_user_json(const struct user_rec *u)
{
	char at[40] = "";
	if (u->created_ms)
		util_format_time_ms(u->created_ms, at, sizeof(at));
	return json_pack("{s:s,s:s,s:b,s:b,s:s,s:s}", "id", u->id, "email", u->email, "is_admin", u->is_admin,
			 "disabled", u->disabled, "access_key", u->access_key, "created_at", at);
}

/* Called with mu held. */
static struct user_rec *find_by_email(struct manager *m, const char *email)
{
	for (size_t i = 0; i < m->n_users; i++)
		if (!strcasecmp(m->users[i].email, email))
			return &m->users[i];
	return NULL;
}

/* Checks and lower-cases an email address into out. */
static int check_email(const char *email, char *out, size_t n, struct terr *err)
{
	size_t len = email ? strlen(email) : 0;
	const char *at = email ? strchr(email, '@') : NULL;
	if (len < 3 || len > 254 || len >= n || !at || at == email || !at[1] || strchr(at + 1, '@'))
		return terr_set(err, EINVAL, "email must look like name@example.org (at most 254 characters)");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)email[i];
		if (c <= 0x20 || c == 0x7f || c == '"' || c == '<' || c == '>' || c == '\\' || c == ',')
			return terr_set(err, EINVAL, "email must not contain spaces, quotes, commas or control characters");
		out[i] = (char)tolower(c);
	}
	out[len] = '\0';
	return 0;
}

int mgr_new_keypair(struct user_rec *u, struct terr *err)
{
	char ak[24];
	int rc;
	if ((rc = sign_random_hex(9, ak, sizeof(ak), err)) < 0 ||
	    (rc = sign_random_hex(20, u->secret_key, sizeof(u->secret_key), err)) < 0)
		return rc;
	for (char *p = ak; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	snprintf(u->access_key, sizeof(u->access_key), "TK%s", ak);
	return 0;
}

/* ---------- POST /v1/auth/login ---------- */

void api_auth_login(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	pthread_once(&limits_once, limits_init);
	const char *secret = httpd_header(req, "X-Tessera-Web-Secret");
	if (!m->cfg.cluster_secret || !*m->cfg.cluster_secret || !secret ||
	    !sign_equal(secret, m->cfg.cluster_secret)) {
		httpd_error(resp, 403, "forbidden",
			    "password login is only for the webserver (it signs in with the cluster secret); "
			    "API clients use their access key and secret key");
		return;
	}
	if (!fail_by_email || !fail_by_addr) {
		httpd_error(resp, 500, "internal", "out of memory");
		return;
	}
	json_t *body = body_json(req, resp);
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
	if (check_email(email_in, email, sizeof(email), &err) < 0) {
		httpd_error_terr(resp, &err);
		goto out;
	}
	int64_t now = util_mono_ms();
	int64_t wait = ratelimit_check(fail_by_email, email, now);
	int64_t wait_addr = ratelimit_check(fail_by_addr, addr_key, now);
	if (wait_addr > wait)
		wait = wait_addr;
	if (wait > 0) {
		httpd_error(resp, 429, "rate_limited",
			    "too many failed logins; try again in %lld seconds", (long long)(wait + 999) / 1000);
		goto out;
	}
	pthread_mutex_lock(&m->mu);
	const struct user_rec *found = find_by_email(m, email);
	struct user_rec u = found ? *found : (struct user_rec){0};
	pthread_mutex_unlock(&m->mu);
	/* Verify outside the lock (argon2id takes tens of milliseconds). */
	bool ok = found && u.password_hash[0] && pwhash_verify(u.password_hash, password);
	if (!ok) {
		ratelimit_fail(fail_by_email, email, now);
		ratelimit_fail(fail_by_addr, addr_key, now);
		log_info("manager", "failed login for %s from %s", email, addr && *addr ? addr : "unknown");
		httpd_error(resp, 401, "unauthenticated", "wrong email or password");
		goto out;
	}
	if (u.disabled) {
		httpd_error(resp, 403, "forbidden", "the account %s is disabled; ask an administrator", u.email);
		goto out;
	}
	ratelimit_reset(fail_by_email, email);
	httpd_json(resp, 200, json_pack("{s:o,s:s,s:s}", "user", mgr_user_json(&u), "access_key", u.access_key,
					"secret_key", u.secret_key));
out:
	json_decref(body);
}

/* ---------- users (admin) ---------- */

static bool require_admin(struct httpd_req *req, struct httpd_resp *resp)
{
	if (me(req)->is_admin)
		return true;
	httpd_error(resp, 403, "forbidden", "only administrators may manage users");
	return false;
}

void api_user_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	if (!require_admin(req, resp))
		return;
	json_t *arr = json_array();
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n_users; i++)
		json_array_append_new(arr, mgr_user_json(&m->users[i]));
	pthread_mutex_unlock(&m->mu);
	httpd_json(resp, 200, json_pack("{s:o}", "users", arr));
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
	struct manager *m = ctx;
	if (!require_admin(req, resp))
		return;
	json_t *body = body_json(req, resp);
	if (!body)
		return;
	static const char *const allowed[] = {"email", "password", "is_admin", NULL};
	struct terr err = {0};
	struct user_rec u = {0};
	char generated[32] = "";
	json_t *pw = json_object_get(body, "password"), *adm = json_object_get(body, "is_admin");
	if (check_fields(body, allowed, &err) < 0 ||
	    check_email(json_string_value(json_object_get(body, "email")), u.email, sizeof(u.email), &err) < 0) {
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
	const char *plain = json_string_value(pw);
	if (!plain) {
		if (pwhash_generate(generated, sizeof(generated), &err) < 0) {
			httpd_error_terr(resp, &err);
			goto out;
		}
		plain = generated;
	}
	u.is_admin = json_is_true(adm);
	u.created_ms = util_now_ms();
	if (pwhash_hash(plain, u.password_hash, sizeof(u.password_hash), &err) < 0 ||
	    util_new_id(u.id, &err) < 0 || mgr_new_keypair(&u, &err) < 0) {
		httpd_error_terr(resp, &err);
		goto out;
	}
	pthread_mutex_lock(&m->mu);
	if (find_by_email(m, u.email)) {
		pthread_mutex_unlock(&m->mu);
		httpd_error(resp, 409, "conflict", "a user with email %s already exists", u.email);
		goto out;
	}
	struct user_rec *grown = realloc(m->users, (m->n_users + 1) * sizeof(*grown));
	if (!grown) {
		pthread_mutex_unlock(&m->mu);
		httpd_error(resp, 500, "internal", "out of memory");
		goto out;
	}
	m->users = grown;
	if (m->so->user_put(m->store, &u, &err) < 0) {
		pthread_mutex_unlock(&m->mu);
		httpd_error_terr(resp, &err);
		goto out;
	}
	m->users[m->n_users++] = u;
	pthread_mutex_unlock(&m->mu);
	log_info("manager", "%s created user %s%s", me(req)->email, u.email, u.is_admin ? " (admin)" : "");
	json_t *reply = json_pack("{s:o,s:s}", "user", mgr_user_json(&u), "secret_key", u.secret_key);
	if (generated[0])
		json_object_set_new(reply, "password", json_string(generated));
	httpd_json(resp, 201, reply);
out:
	json_decref(body);
}

void api_user_update(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct manager *m = ctx;
	if (!require_admin(req, resp))
		return;
	json_t *body = body_json(req, resp);
	if (!body)
		return;
	static const char *const allowed[] = {"disabled", "password", NULL};
	struct terr err = {0};
	json_t *dis = json_object_get(body, "disabled"), *pw = json_object_get(body, "password");
	char hash[PWHASH_ENCODED_MAX] = "";
	if (check_fields(body, allowed, &err) < 0) {
		httpd_error_terr(resp, &err);
		goto out;
	}
	if (dis && !json_is_boolean(dis)) {
		httpd_error(resp, 400, "invalid_argument", "disabled must be true or false");
		goto out;
	}
	if (pw && !json_is_string(pw)) {
		httpd_error(resp, 400, "invalid_argument", "password must be a string");
		goto out;
	}
	if (!dis && !pw) {
		httpd_error(resp, 400, "invalid_argument", "nothing to change: give disabled and/or password");
		goto out;
	}
	if (pw && pwhash_hash(json_string_value(pw), hash, sizeof(hash), &err) < 0) {
		httpd_error_terr(resp, &err);
		goto out;
	}
	pthread_mutex_lock(&m->mu);
	struct user_rec *u = NULL;
	for (size_t i = 0; i < m->n_users && !u; i++)
		if (!strcmp(m->users[i].id, req->params[0]) || !strcasecmp(m->users[i].email, req->params[0]))
			u = &m->users[i];
	if (!u) {
		pthread_mutex_unlock(&m->mu);
		httpd_error(resp, 404, "not_found", "no user with id or email '%s'", req->params[0]);
		goto out;
	}
	if (json_is_true(dis) && !strcmp(u->id, me(req)->id)) {
		pthread_mutex_unlock(&m->mu);
		httpd_error(resp, 409, "conflict", "you cannot disable your own account");
		goto out;
	}
	struct user_rec next = *u;
	if (dis)
		next.disabled = json_is_true(dis);
	if (pw)
		util_strlcpy(next.password_hash, hash, sizeof(next.password_hash));
	if (m->so->user_put(m->store, &next, &err) < 0) {
		pthread_mutex_unlock(&m->mu);
		httpd_error_terr(resp, &err);
		goto out;
	}
	*u = next;
	json_t *uj = mgr_user_json(u);
	pthread_mutex_unlock(&m->mu);
	log_info("manager", "%s updated user %s%s%s", me(req)->email, next.email,
		 dis ? (next.disabled ? " (disabled)" : " (enabled)") : "", pw ? " (password reset)" : "");
	httpd_json(resp, 200, json_pack("{s:o}", "user", uj));
out:
	json_decref(body);
}
