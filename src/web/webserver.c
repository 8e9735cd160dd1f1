/* The webserver (web/webserver.h) on the project's HTTP server layer
 * (common/httpd.c): a route table, with what a browser needs on top of the
 * JSON API: security headers on every response, cookies, static files and
 * a streamed relay for server-sent events. */
#include "web/webserver.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "common/httpc.h"
#include "common/httpd.h"
#include "common/log.h"
#include "common/pump.h"
#include "common/redis.h"
#include "common/sign.h"
#include "common/util.h"

#define WEB_MAX_BODY (1u << 20)
#define WEB_CONNS_PER_ADDR 256
#define WEB_MAX_LOGINS 10000
/* The login cookie's name; under TLS with the __Host- prefix, which a
 * browser accepts only from a secure origin, with Path=/ and no Domain:
 * no other host (an app on a sibling name among them) can set or
 * overwrite it. */
#define COOKIE_NAME "tessera_session"
#define COOKIE_NAME_TLS "__Host-tessera_session"
#define TOKEN_BYTES 32

struct login {
	char token_hash[SIGN_HEX_LEN + 1];  /* sha256 of the cookie value */
	char csrf[2 * TOKEN_BYTES + 1];
	char access_key[64];
	char secret_key[128];
	json_t *user;                       /* {"id","email","is_admin",...} */
	int64_t expires_ms;
};

struct login_store_ops;

struct web {
	struct httpd *httpd;
	const struct login_store_ops *store;   /* login_mem_ops or login_redis_ops */
	struct redis_client *redis;            /* with login_redis_ops */
	char listen[128];
	char manager[256];
	char manager_host[256];             /* Host header / signing host */
	char web_secret[256];
	char ui_dir[PATH_MAX];
	char url[300];
	bool tls;
	int port;
	int64_t ttl_ms;
	pthread_mutex_t mu;                    /* the table (login_mem_ops) */
	struct login *logins;
	size_t n_logins;
	/* Where session apps are served, as the manager's last login
	 * answer said (apps_origin_set): a Host there is refused. */
	pthread_mutex_t apps_mu;
	char apps_host[256];                   /* port mode */
	char apps_domain[300];                 /* host mode: "apps.DOMAIN" */
};

/* ---------- small helpers ---------- */

/* On every response, errors and the event stream included. */
static const struct httpd_header security_headers[] = {
	{"X-Content-Type-Options", "nosniff"},
	{"X-Frame-Options", "DENY"},
	{"Referrer-Policy", "same-origin"},
	{"Content-Security-Policy",
	 "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
	 "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"},
};

static bool is_write(const char *method)
{
	return strcmp(method, "GET") && strcmp(method, "HEAD") && strcmp(method, "OPTIONS");
}

/* A browser sends Origin on cross-site requests; it must be this site. */
static bool origin_ok(struct web *w, const struct httpd_req *req)
{
	const char *origin = httpd_header(req, "Origin");
	const char *host = httpd_header(req, "Host");
	if (!origin)
		return true;
	if (!host)
		return false;
	char expect[320];
	snprintf(expect, sizeof(expect), "%s://%s", w->tls ? "https" : "http", host);
	return !strcmp(origin, expect);
}

/* ---------- where login sessions are kept ----------
 *
 * One small interface, two stores: the table in this process's memory
 * (the default) and Redis (web_config.redis_url), where every webserver
 * on the same Redis finds the logins of the others. Logins are looked up
 * by the SHA-256 of the cookie's value, so the store never holds a
 * cookie a browser could replay. */
struct login_store_ops {
	/* Whether logins can be made now; 0 or an error (503). */
	int (*ready)(struct web *w, struct terr *err);
	/* 1 and *out when found (out->user the caller's own copy), 0 when
	 * not (or expired), negative when the store cannot be asked. token:
	 * the cookie's value, token_hash its SHA-256. */
	int (*find)(struct web *w, const char *token, const char *token_hash, struct login *out, struct terr *err);
	/* Keeps a copy of l (l->user stays the caller's), for the cookie
	 * token whose hash is l->token_hash. */
	int (*add)(struct web *w, const char *token, const struct login *l, struct terr *err);
	int (*drop)(struct web *w, const char *token_hash, struct terr *err);
};

/* In memory. Called with mu held: drops expired logins. */
static void expire_logins(struct web *w, int64_t now)
{
	size_t k = 0;
	for (size_t i = 0; i < w->n_logins; i++) {
		if (w->logins[i].expires_ms <= now) {
			json_decref(w->logins[i].user);
			continue;
		}
		w->logins[k++] = w->logins[i];
	}
	w->n_logins = k;
}

static int mem_ready(struct web *w, struct terr *err)
{
	(void)w;
	(void)err;
	return 0;
}

/* out->user is the caller's own copy (json_decref it), not a reference
 * to the table's: a jansson value whose reference count two threads
 * change is a data race (json_decref reads the count without an atomic),
 * so the table's values are only touched under mu and each request
 * thread gets a value of its own. */
static int mem_find(struct web *w, const char *token, const char *h, struct login *out, struct terr *err)
{
	(void)token;
	int found = 0;
	pthread_mutex_lock(&w->mu);
	expire_logins(w, util_now_ms());
	for (size_t i = 0; i < w->n_logins; i++) {
		if (sign_equal(w->logins[i].token_hash, h)) {
			*out = w->logins[i];
			out->user = json_deep_copy(w->logins[i].user);
			found = out->user ? 1 : terr_set(err, ENOMEM, "out of memory");
			break;
		}
	}
	pthread_mutex_unlock(&w->mu);
	return found;
}

static int mem_add(struct web *w, const char *token, const struct login *l, struct terr *err)
{
	(void)token;
	struct login copy = *l;
	if (!(copy.user = json_deep_copy(l->user)))
		return terr_set(err, ENOMEM, "out of memory");
	pthread_mutex_lock(&w->mu);
	expire_logins(w, util_now_ms());
	bool full = w->n_logins >= WEB_MAX_LOGINS;
	if (!full)
		w->logins[w->n_logins++] = copy;
	pthread_mutex_unlock(&w->mu);
	if (full) {
		json_decref(copy.user);
		return terr_set(err, EAGAIN, "too many people are logged in; try again later");
	}
	return 0;
}

static int mem_drop(struct web *w, const char *h, struct terr *err)
{
	(void)err;
	pthread_mutex_lock(&w->mu);
	for (size_t i = 0; i < w->n_logins; i++) {
		if (sign_equal(w->logins[i].token_hash, h)) {
			json_decref(w->logins[i].user);
			w->logins[i] = w->logins[--w->n_logins];
			break;
		}
	}
	pthread_mutex_unlock(&w->mu);
	return 0;
}

static const struct login_store_ops login_mem_ops = {mem_ready, mem_find, mem_add, mem_drop};

/* In Redis: key "tessera:login:HASH", the login's fields as JSON,
 * sealed (AES-256-GCM) with a key derived from the cookie's value, which
 * Redis never sees: whoever reads Redis finds no keypair to sign with,
 * only records that the browsers holding the cookies can open. The
 * record expires with the login. */
static void login_key(const char *h, char *out, size_t n)
{
	snprintf(out, n, REDIS_PREFIX "login:%s", h);
}

#define SEAL_NONCE 12
#define SEAL_TAG 16

/* The sealing key of a cookie token: HMAC-SHA256(token, label), so it
 * is neither the token nor its hash (the record's name). */
static void seal_key(const char *token, unsigned char key[32])
{
	static const char label[] = "tessera webserver login record v1";
	unsigned int len = 32;
	HMAC(EVP_sha256(), token, (int)strlen(token), (const unsigned char *)label, sizeof(label) - 1, key, &len);
}

/* "v1." + hex(nonce | ciphertext | tag) of plain; the token's hash is
 * authenticated with it, so a record cannot be moved to another name.
 * NULL on failure; malloc'd, the caller's. */
static char *seal(const char *token, const char *h, const char *plain, size_t len)
{
	unsigned char key[32], *buf = malloc(SEAL_NONCE + len + SEAL_TAG);
	char *out = malloc(3 + 2 * (SEAL_NONCE + len + SEAL_TAG) + 1);
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int n = 0, fin = 0;
	bool ok = buf && out && c && RAND_bytes(buf, SEAL_NONCE) == 1;
	seal_key(token, key);
	ok = ok && EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, buf) == 1 &&
	     EVP_EncryptUpdate(c, NULL, &n, (const unsigned char *)h, (int)strlen(h)) == 1 &&
	     EVP_EncryptUpdate(c, buf + SEAL_NONCE, &n, (const unsigned char *)plain, (int)len) == 1 &&
	     EVP_EncryptFinal_ex(c, buf + SEAL_NONCE + n, &fin) == 1 &&
	     EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, SEAL_TAG, buf + SEAL_NONCE + len) == 1;
	EVP_CIPHER_CTX_free(c);
	OPENSSL_cleanse(key, sizeof(key));
	if (ok) {
		memcpy(out, "v1.", 3);
		for (size_t i = 0; i < SEAL_NONCE + len + SEAL_TAG; i++)
			snprintf(out + 3 + 2 * i, 3, "%02x", buf[i]);
	}
	free(buf);
	if (!ok) {
		free(out);
		return NULL;
	}
	return out;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* seal's inverse: the plain text (NUL-terminated, malloc'd), or NULL when
 * the record is not one sealed for this token and name. */
static char *unseal(const char *token, const char *h, const char *rec)
{
	size_t hl = strlen(rec);
	if (hl < 3 || strncmp(rec, "v1.", 3) || (hl - 3) % 2 || (hl - 3) / 2 < SEAL_NONCE + SEAL_TAG)
		return NULL;
	size_t blen = (hl - 3) / 2, len = blen - SEAL_NONCE - SEAL_TAG;
	unsigned char *buf = malloc(blen), key[32];
	char *plain = malloc(len + 1);
	bool ok = buf && plain;
	for (size_t i = 0; ok && i < blen; i++) {
		int a = hexval(rec[3 + 2 * i]), b = hexval(rec[4 + 2 * i]);
		ok = a >= 0 && b >= 0;
		if (ok)
			buf[i] = (unsigned char)(a << 4 | b);
	}
	EVP_CIPHER_CTX *c = ok ? EVP_CIPHER_CTX_new() : NULL;
	int n = 0, fin = 0;
	seal_key(token, key);
	ok = ok && c && EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, buf) == 1 &&
	     EVP_DecryptUpdate(c, NULL, &n, (const unsigned char *)h, (int)strlen(h)) == 1 &&
	     EVP_DecryptUpdate(c, (unsigned char *)plain, &n, buf + SEAL_NONCE, (int)len) == 1 &&
	     EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, SEAL_TAG, buf + SEAL_NONCE + len) == 1 &&
	     EVP_DecryptFinal_ex(c, (unsigned char *)plain + n, &fin) == 1;
	EVP_CIPHER_CTX_free(c);
	OPENSSL_cleanse(key, sizeof(key));
	free(buf);
	if (!ok) {
		free(plain);
		return NULL;
	}
	plain[len] = '\0';
	return plain;
}

/* Any failure to reach Redis becomes the one message people see. */
static int store_down(struct web *w, const struct terr *cause, struct terr *err)
{
	log_warn("webserver", "login store: %s", cause->msg);
	return terr_set(err, EAGAIN, "login store (Redis at %s) unavailable; try again shortly", redis_addr(w->redis));
}

static int redis_ready(struct web *w, struct terr *err)
{
	struct terr e = {0};
	return redis_ping(w->redis, &e) < 0 ? store_down(w, &e, err) : 0;
}

static int redis_find(struct web *w, const char *token, const char *h, struct login *out, struct terr *err)
{
	char key[SIGN_HEX_LEN + 32], *val = NULL;
	struct terr e = {0};
	login_key(h, key, sizeof(key));
	int rc = redis_get(w->redis, key, &val, NULL, &e);
	if (rc < 0)
		return store_down(w, &e, err);
	if (rc == 0)
		return 0;
	char *plain = unseal(token, h, val);
	free(val);
	json_t *o = plain ? json_loads(plain, 0, NULL) : NULL;
	if (plain)
		OPENSSL_cleanse(plain, strlen(plain));
	free(plain);
	const char *csrf = json_string_value(json_object_get(o, "csrf"));
	const char *ak = json_string_value(json_object_get(o, "access_key"));
	const char *sk = json_string_value(json_object_get(o, "secret_key"));
	json_t *user = json_object_get(o, "user");
	json_int_t exp = json_integer_value(json_object_get(o, "expires_ms"));
	/* Something else wrote the key, or a login past its time: none. */
	if (!csrf || !ak || !sk || !json_is_object(user) || exp <= util_now_ms()) {
		json_decref(o);
		return 0;
	}
	memset(out, 0, sizeof(*out));
	util_strlcpy(out->token_hash, h, sizeof(out->token_hash));
	util_strlcpy(out->csrf, csrf, sizeof(out->csrf));
	util_strlcpy(out->access_key, ak, sizeof(out->access_key));
	util_strlcpy(out->secret_key, sk, sizeof(out->secret_key));
	out->user = json_incref(user);
	out->expires_ms = exp;
	json_decref(o);
	return 1;
}

static int redis_add(struct web *w, const char *token, const struct login *l, struct terr *err)
{
	json_t *o = json_pack("{s:s,s:s,s:s,s:O,s:I}", "csrf", l->csrf, "access_key", l->access_key, "secret_key",
			      l->secret_key, "user", l->user, "expires_ms", (json_int_t)l->expires_ms);
	char *plain = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	char *text = plain ? seal(token, l->token_hash, plain, strlen(plain)) : NULL;
	if (plain)
		OPENSSL_cleanse(plain, strlen(plain));
	free(plain);
	if (!text)
		return terr_set(err, ENOMEM, "cannot seal the login record (out of memory)");
	char key[SIGN_HEX_LEN + 32];
	struct terr e = {0};
	login_key(l->token_hash, key, sizeof(key));
	int64_t ttl = l->expires_ms - util_now_ms();
	int rc = redis_set(w->redis, key, text, strlen(text), ttl > 0 ? ttl : 1, &e);
	free(text);
	return rc < 0 ? store_down(w, &e, err) : 0;
}

static int redis_drop(struct web *w, const char *h, struct terr *err)
{
	char key[SIGN_HEX_LEN + 32];
	struct terr e = {0};
	login_key(h, key, sizeof(key));
	return redis_del(w->redis, key, &e) < 0 ? store_down(w, &e, err) : 0;
}

static const struct login_store_ops login_redis_ops = {redis_ready, redis_find, redis_add, redis_drop};

/* ---------- login sessions ---------- */

static const char *cookie_name(const struct web *w)
{
	return w->tls ? COOKIE_NAME_TLS : COOKIE_NAME;
}

static void cookie_value(const struct web *w, const struct httpd_req *req, char *out, size_t n)
{
	out[0] = '\0';
	const char *v = httpd_cookie(req, cookie_name(w));
	if (v && strlen(v) == 2 * TOKEN_BYTES)
		util_strlcpy(out, v, n);
}

/* ---------- the apps' origin ----------
 *
 * A browser sends a host's cookies to every port of it. Were the web UI
 * reached on the host session apps are served on, its login cookie
 * would go to every app that user opens (a user's app could then act as
 * whoever opens its link). The manager says where apps are (its login
 * answer's "apps"); a login, and every logged-in request, on that host
 * is refused, naming the fix. */

/* The host name of a Host header value: no port, no brackets, lower
 * case; "" when there is none. */
static void host_name_of(const char *host, char *out, size_t n)
{
	out[0] = '\0';
	if (!host || !n)
		return;
	size_t len;
	if (host[0] == '[') {
		const char *e = strchr(host, ']');
		if (!e)
			return;
		host++;
		len = (size_t)(e - host);
	} else {
		len = strcspn(host, ":");
	}
	if (len >= n)
		return;
	for (size_t i = 0; i < len; i++)
		out[i] = (char)tolower((unsigned char)host[i]);
	out[len] = '\0';
}

static void apps_origin_set(struct web *w, json_t *apps)
{
	const char *host = json_string_value(json_object_get(apps, "host"));
	const char *domain = json_string_value(json_object_get(apps, "domain"));
	pthread_mutex_lock(&w->apps_mu);
	host_name_of(host ? host : "", w->apps_host, sizeof(w->apps_host));
	if (host && host[0] != '[' && strchr(host, ':'))  /* an IPv6 address, bare */
		util_strlcpy(w->apps_host, host, sizeof(w->apps_host));
	host_name_of(domain ? domain : "", w->apps_domain, sizeof(w->apps_domain));
	pthread_mutex_unlock(&w->apps_mu);
}

/* Whether req came to the host session apps are served on; the reason,
 * for a person, into why. */
static bool on_apps_host(struct web *w, const struct httpd_req *req, char *why, size_t n)
{
	char name[256];
	host_name_of(httpd_header(req, "Host"), name, sizeof(name));
	if (!name[0])
		return false;
	pthread_mutex_lock(&w->apps_mu);
	size_t nl = strlen(name), dl = strlen(w->apps_domain);
	bool clash = (w->apps_host[0] && !strcmp(name, w->apps_host)) ||
		     (dl && (!strcmp(name, w->apps_domain) ||
			     (nl > dl && name[nl - dl - 1] == '.' && !strcmp(name + nl - dl, w->apps_domain))));
	pthread_mutex_unlock(&w->apps_mu);
	if (clash)
		snprintf(why, n,
			 "this web UI was opened on %s, where session apps are served: the browser would send your "
			 "login to every app. Open the web UI on its own address; admins: give the app proxy an "
			 "address or domain of its own (wsproxy_url, wsproxy_domain; docs/security.md)",
			 name);
	return clash;
}

/* The caller's login: 1 and *out (out->user the caller's, json_decref
 * it), 0 when none, negative when the store cannot be asked. */
static int find_login(struct web *w, const struct httpd_req *req, struct login *out, struct terr *err)
{
	char tok[2 * TOKEN_BYTES + 1], h[SIGN_HEX_LEN + 1];
	cookie_value(w, req, tok, sizeof(tok));
	if (!tok[0])
		return 0;
	sign_sha256_hex(tok, strlen(tok), h);
	return w->store->find(w, tok, h, out, err);
}

/* find_login, answering 401 (message msg) or 503 itself; true when
 * found. */
static bool need_login(struct web *w, const struct httpd_req *req, struct httpd_resp *resp, struct login *out,
		       const char *msg)
{
	struct terr err = {0};
	char why[600];
	if (on_apps_host(w, req, why, sizeof(why))) {
		httpd_error(resp, 421, "misdirected", "%s", why);
		return false;
	}
	int rc = find_login(w, req, out, &err);
	if (rc < 0)
		httpd_error_terr(resp, &err);
	else if (rc == 0)
		httpd_error(resp, 401, "unauthenticated", "%s", msg);
	return rc > 0;
}

static int drop_login(struct web *w, const struct httpd_req *req, struct terr *err)
{
	char tok[2 * TOKEN_BYTES + 1], h[SIGN_HEX_LEN + 1];
	cookie_value(w, req, tok, sizeof(tok));
	if (!tok[0])
		return 0;
	sign_sha256_hex(tok, strlen(tok), h);
	return w->store->drop(w, h, err);
}

static void make_cookie(struct web *w, const char *value, int64_t max_age_s, char *out, size_t n)
{
	snprintf(out, n, "%s=%s; Path=/; Max-Age=%lld; HttpOnly; SameSite=Strict%s", cookie_name(w), value,
		 (long long)max_age_s, w->tls ? "; Secure" : "");
}

/* ---------- calls to the manager ---------- */

/* Sends METHOD path (with query) to the manager, signed with the given
 * keypair (or, when access_key is NULL, with the extra headers only).
 * Any HTTP status is a success here. */
static int manager_call(struct web *w, const char *method, const char *path, const char *ak,
			const char *sk, const char *const *extra, const char *body, size_t body_len,
			struct httpc_response *resp, int (*on_data)(const char *, size_t, void *),
			int (*on_status)(long, const char *, void *), void *ud, const atomic_bool *cancel,
			long timeout_ms, struct terr *err)
{
	char url[4096 + 300];
	if (snprintf(url, sizeof(url), "%s%s", w->manager, path) >= (int)sizeof(url))
		return terr_set(err, E2BIG, "request target too long");
	char date[64], auth[512] = "";
	sign_format_date(time(NULL), date, sizeof(date));
	if (ak) {
		int rc = sign_authorization(ak, sk, method, path, date, w->manager_host, body, body_len, auth,
					    sizeof(auth), err);
		if (rc < 0)
			return rc;
	}
	char h_date[96], h_host[300], h_auth[560];
	snprintf(h_date, sizeof(h_date), "Date: %s", date);
	snprintf(h_host, sizeof(h_host), "Host: %s", w->manager_host);
	snprintf(h_auth, sizeof(h_auth), "Authorization: %s", auth);
	/* X-Tessera-Via: the manager's About page tells from it that a
	 * webserver relays (GET /v1/about). */
	const char *headers[13] = {h_date, h_host, "Content-Type: application/json", "X-Tessera-Via: webserver"};
	size_t nh = 4;
	if (ak)
		headers[nh++] = h_auth;
	for (size_t i = 0; extra && extra[i] && nh < 12; i++)
		headers[nh++] = extra[i];
	headers[nh] = NULL;
	struct httpc_request req = {
		.method = method, .url = url, .headers = headers, .body = body, .body_len = body_len,
		.timeout_ms = timeout_ms, .on_data = on_data, .on_status = on_status, .ud = ud, .cancel = cancel,
	};
	return httpc_do(&req, resp, err);
}

/* ---------- /auth ---------- */

static void web_login(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct web *w = ctx;
	const char *ct = httpd_header(req, "Content-Type");
	if (!ct || strncmp(ct, "application/json", 16)) {
		httpd_error(resp, 415, "invalid_argument", "send the login as application/json");
		return;
	}
	json_error_t jerr;
	json_t *in = json_loadb(req->body, req->body_len, 0, &jerr);
	const char *email = json_string_value(json_object_get(in, "email"));
	const char *password = json_string_value(json_object_get(in, "password"));
	if (!email || !*email || !password || !*password) {
		json_decref(in);
		httpd_error(resp, 400, "invalid_argument", "enter your email and your password");
		return;
	}
	struct terr err = {0};
	/* Before the password is checked: a login that could not be kept
	 * would count against the person's rate limit for nothing. */
	if (w->store->ready(w, &err) < 0) {
		json_decref(in);
		httpd_error_terr(resp, &err);
		return;
	}
	json_t *fwd = json_pack("{s:s,s:s}", "email", email, "password", password);
	json_decref(in);
	char *fbody = json_dumps(fwd, JSON_COMPACT);
	json_decref(fwd);
	char addr[INET6_ADDRSTRLEN + 1], h_secret[320], h_addr[96];
	httpd_peer_addr(req, addr, sizeof(addr));
	snprintf(h_secret, sizeof(h_secret), "X-Tessera-Web-Secret: %s", w->web_secret);
	snprintf(h_addr, sizeof(h_addr), "X-Tessera-Client-Addr: %s", addr);
	const char *extra[] = {h_secret, h_addr, NULL};
	struct httpc_response mresp = {0};
	int rc = manager_call(w, "POST", "/v1/auth/login", NULL, NULL, extra, fbody, fbody ? strlen(fbody) : 0,
			      &mresp, NULL, NULL, NULL, NULL, 30000, &err);
	free(fbody);
	if (rc < 0) {
		httpc_response_free(&mresp);
		httpd_error(resp, 503, "unavailable", "cannot reach the manager: %s", err.msg);
		return;
	}
	json_t *out = mresp.len ? json_loadb(mresp.body, mresp.len, 0, &jerr) : NULL;
	long status = mresp.status;
	httpc_response_free(&mresp);
	if (status != 200) {
		/* The manager's words (wrong password, rate limited, disabled). */
		if (!json_is_object(json_object_get(out, "error"))) {
			json_decref(out);
			httpd_error(resp, 502, "internal", "the manager answered HTTP %ld to a login", status);
			return;
		}
		httpd_json(resp, (int)status, out);
		return;
	}
	apps_origin_set(w, json_object_get(out, "apps"));
	char why[600];
	if (on_apps_host(w, req, why, sizeof(why))) {
		json_decref(out);
		log_warn("web", "a login refused: %s", why);
		httpd_error(resp, 421, "misdirected", "%s", why);
		return;
	}
	const char *ak = json_string_value(json_object_get(out, "access_key"));
	const char *sk = json_string_value(json_object_get(out, "secret_key"));
	json_t *user = json_object_get(out, "user");
	if (!ak || !sk || !json_is_object(user)) {
		json_decref(out);
		httpd_error(resp, 502, "internal", "the manager's login answer lacks the keypair");
		return;
	}
	struct login l = {0};
	char token[2 * TOKEN_BYTES + 1];
	if (sign_random_hex(TOKEN_BYTES, token, sizeof(token), &err) < 0 ||
	    sign_random_hex(TOKEN_BYTES, l.csrf, sizeof(l.csrf), &err) < 0) {
		json_decref(out);
		httpd_error(resp, 500, "internal", "%s", err.msg);
		return;
	}
	sign_sha256_hex(token, strlen(token), l.token_hash);
	util_strlcpy(l.access_key, ak, sizeof(l.access_key));
	util_strlcpy(l.secret_key, sk, sizeof(l.secret_key));
	/* The store keeps its own copy; reply keeps user. */
	l.user = user;
	l.expires_ms = util_now_ms() + w->ttl_ms;
	json_t *reply = json_pack("{s:O,s:s}", "user", user, "csrf_token", l.csrf);
	if (!reply) {
		json_decref(out);
		httpd_error(resp, 500, "internal", "out of memory");
		return;
	}
	rc = w->store->add(w, token, &l, &err);
	json_decref(out);
	if (rc < 0) {
		json_decref(reply);
		httpd_error_terr(resp, &err);
		return;
	}
	log_info("web", "%s logged in from %s", json_string_value(json_object_get(user, "email")), addr);
	char cookie[256];
	make_cookie(w, token, w->ttl_ms / 1000, cookie, sizeof(cookie));
	httpd_json(resp, 200, reply);
	httpd_resp_header(resp, "Set-Cookie", cookie);
}

static bool csrf_ok(const struct httpd_req *req, const struct login *l)
{
	const char *t = httpd_header(req, "X-CSRF-Token");
	return t && sign_equal(t, l->csrf);
}

static void web_me(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct login l;
	if (!need_login(ctx, req, resp, &l, "you are not logged in"))
		return;
	httpd_json(resp, 200, json_pack("{s:O,s:s}", "user", l.user, "csrf_token", l.csrf));
	json_decref(l.user);
}

static void web_logout(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct web *w = ctx;
	struct login l;
	if (!need_login(w, req, resp, &l, "you are not logged in"))
		return;
	struct terr err = {0};
	if (!csrf_ok(req, &l)) {
		httpd_error(resp, 403, "forbidden", "missing or wrong CSRF token; reload the page");
	} else if (drop_login(w, req, &err) < 0) {
		httpd_error_terr(resp, &err);
	} else {
		char cookie[256];
		make_cookie(w, "", 0, cookie, sizeof(cookie));
		httpd_json(resp, 200, json_object());
		httpd_resp_header(resp, "Set-Cookie", cookie);
	}
	json_decref(l.user);
}

/* ---------- the relay ---------- */

/* Streaming relay of GET /v1/events: a thread reads the manager's stream
 * into one end of a socket pair; httpd's stream callback reads the other. */
struct stream {
	struct web *w;
	struct login login;
	char path[1024];
	int fds[2];
	/* Set by stream_free (libmicrohttpd's thread) to end stream_main's
	 * transfer. Relaxed loads and stores: it carries no data, and
	 * stream_free joins the thread before it frees anything. */
	atomic_bool cancel;
	pthread_t thread;
	/* Anything that is not an event stream (an error from the manager)
	 * is collected and sent as one `event: relay_error`. */
	int mode;            /* 0 unknown, 1 passing through, 2 collecting an error */
	char errbuf[2048];
	size_t errlen;
};

static int stream_write(int fd, const char *data, size_t len)
{
	while (len) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
		if (n <= 0)
			return -1;
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

static int stream_on_data(const char *data, size_t len, void *ud)
{
	struct stream *s = ud;
	if (atomic_load_explicit(&s->cancel, memory_order_relaxed))
		return 1;
	if (s->mode == 0) {
		size_t i = 0;
		while (i < len && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r'))
			i++;
		if (i == len)
			return 0;
		s->mode = data[i] == '{' ? 2 : 1;
	}
	if (s->mode == 2) {
		size_t room = sizeof(s->errbuf) - 1 - s->errlen;
		size_t k = len < room ? len : room;
		memcpy(s->errbuf + s->errlen, data, k);
		s->errlen += k;
		return 0;
	}
	return stream_write(s->fds[1], data, len) < 0;
}

static void *stream_main(void *arg)
{
	struct stream *s = arg;
	struct httpc_response resp = {0};
	struct terr err = {0};
	const char *extra[] = {"Accept: text/event-stream", NULL};
	int rc = manager_call(s->w, "GET", s->path, s->login.access_key, s->login.secret_key, extra, NULL, 0,
			      &resp, stream_on_data, NULL, s, &s->cancel, 0, &err);
	if (!atomic_load_explicit(&s->cancel, memory_order_relaxed) &&
	    (rc < 0 || s->mode == 2 || resp.status != 200)) {
		json_t *e;
		if (rc < 0) {
			e = json_pack("{s:i,s:{s:s,s:s}}", "status", 503, "error", "code", "unavailable", "message", err.msg);
		} else {
			s->errbuf[s->errlen] = '\0';
			e = json_loads(s->errbuf, 0, NULL);
			if (!e)
				e = json_pack("{s:{s:s,s:s}}", "error", "code", "internal", "message",
					      "the manager's event stream ended");
			json_object_set_new(e, "status", json_integer(resp.status));
		}
		char *line = json_dumps(e, JSON_COMPACT);
		json_decref(e);
		if (line) {
			stream_write(s->fds[1], "event: relay_error\ndata: ", 25);
			stream_write(s->fds[1], line, strlen(line));
			stream_write(s->fds[1], "\n\n", 2);
			free(line);
		}
	}
	httpc_response_free(&resp);
	shutdown(s->fds[1], SHUT_WR);
	return NULL;
}

static long stream_read(void *cls, char *buf, size_t max)
{
	struct stream *s = cls;
	ssize_t n = recv(s->fds[0], buf, max, 0);
	if (n > 0)
		return (long)n;
	return n == 0 ? HTTPD_STREAM_END : HTTPD_STREAM_ERROR;
}

static void stream_free(void *cls)
{
	struct stream *s = cls;
	atomic_store_explicit(&s->cancel, true, memory_order_relaxed);
	shutdown(s->fds[0], SHUT_RDWR);
	pthread_join(s->thread, NULL);
	close(s->fds[0]);
	close(s->fds[1]);
	json_decref(s->login.user);
	free(s);
}

/* Takes the reference to l->user. */
static void relay_stream(struct web *w, struct httpd_resp *resp, struct login *l, const char *path)
{
	struct stream *s = calloc(1, sizeof(*s));
	if (!s || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s->fds) < 0) {
		free(s);
		json_decref(l->user);
		httpd_error(resp, 500, "internal", "cannot open an event stream");
		return;
	}
	atomic_init(&s->cancel, false);
	s->w = w;
	s->login = *l;   /* takes the user reference */
	util_strlcpy(s->path, path, sizeof(s->path));
	if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
		close(s->fds[0]);
		close(s->fds[1]);
		json_decref(s->login.user);
		free(s);
		httpd_error(resp, 500, "internal", "cannot start an event stream");
		return;
	}
	resp->status = 200;
	resp->stream = stream_read;
	resp->stream_cls = s;
	resp->stream_free = stream_free;
	resp->stream_type = "text/event-stream";
	httpd_resp_header(resp, "X-Accel-Buffering", "no");
}

/* Relay of a session's logs and exec output, which are streams of any
 * length: a pump's thread (common/pump.h) reads the manager's answer as
 * it comes and the browser's connection takes it from the pump, so the
 * webserver holds no more than the pump's buffer and reads no faster
 * than the browser. The answer's status and Content-Type are the
 * manager's (its errors are JSON as usual). */
struct byte_relay {
	struct web *w;
	struct login login;      /* owns the user reference */
	char method[8];
	char path[1024];
	char *body;
	size_t body_len;
	long status;
	char ctype[128];
	long long length;        /* the manager's Content-Length, -1 when none */
	struct httpc_response *resp;
	struct pump *p;
};

static void byte_relay_free(void *ud)
{
	struct byte_relay *r = ud;
	json_decref(r->login.user);
	free(r->body);
	free(r);
}

static int byte_relay_status(long status, const char *content_type, void *ud)
{
	struct byte_relay *r = ud;
	r->status = status;
	r->length = r->resp ? r->resp->content_length : -1;
	util_strlcpy(r->ctype, content_type && *content_type ? content_type : "application/octet-stream",
		     sizeof(r->ctype));
	pump_ready(r->p);
	return 0;
}

static int byte_relay_data(const char *data, size_t len, void *ud)
{
	struct byte_relay *r = ud;
	return pump_write(r->p, data, len) < 0;
}

static int byte_relay_run(struct pump *p, void *ud, struct terr *err)
{
	struct byte_relay *r = ud;
	r->p = p;
	struct httpc_response resp = {0};
	r->resp = &resp;
	const char *extra[] = {"Accept: */*", NULL};
	int rc = manager_call(r->w, r->method, r->path, r->login.access_key, r->login.secret_key, extra, r->body,
			      r->body_len, &resp, byte_relay_data, byte_relay_status, r, pump_cancel_flag(p), 0, err);
	r->resp = NULL;
	httpc_response_free(&resp);
	return rc;
}

/* GET /v1/folders/X/download (path without the /api prefix): a file of
 * any size. */
static bool is_download(const char *method, const char *path)
{
	if (strcmp(method, "GET") || strncmp(path, "/v1/folders/", 12) != 0)
		return false;
	const char *name = path + 12, *slash = strchr(name, '/');
	return slash && slash != name && !strncmp(slash, "/download", 9) && (slash[9] == '\0' || slash[9] == '?');
}

/* GET .../sessions/X/logs and POST .../sessions/X/exec (path without
 * the /api prefix), and folder downloads. */
static bool is_byte_stream(const char *method, const char *path)
{
	if (is_download(method, path))
		return true;
	if (strncmp(path, "/v1/sessions/", 13) != 0)
		return false;
	const char *name = path + 13, *slash = strchr(name, '/');
	if (!slash || slash == name)
		return false;
	const char *verb = !strcmp(method, "GET") ? "/logs" : !strcmp(method, "POST") ? "/exec" : NULL;
	return verb && !strncmp(slash, verb, 5) && (slash[5] == '\0' || slash[5] == '?');
}

/* Content-Disposition for a download of ?path=...: the file's last name,
 * percent-encoded (RFC 5987 filename*), so the browser saves it under its
 * own name whatever bytes it has. */
static void download_disposition(const struct httpd_req *req, char *out, size_t n)
{
	const char *p = httpd_query(req, "path");
	const char *base = p ? strrchr(p, '/') : NULL;
	base = base ? base + 1 : p;
	if (!base || !*base)
		base = "download";
	size_t k = (size_t)snprintf(out, n, "attachment; filename*=UTF-8''");
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *c = (const unsigned char *)base; *c && k + 4 < n; c++) {
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		    strchr(".-_~", *c)) {
			out[k++] = (char)*c;
		} else {
			out[k++] = '%';
			out[k++] = hex[*c >> 4];
			out[k++] = hex[*c & 15];
		}
	}
	out[k] = '\0';
}

/* Takes the reference to l->user. */
static void relay_bytes(struct web *w, struct httpd_req *req, struct httpd_resp *resp, struct login *l,
			const char *path)
{
	struct byte_relay *r = calloc(1, sizeof(*r));
	if (!r || (req->body_len && !(r->body = malloc(req->body_len)))) {
		free(r);
		json_decref(l->user);
		httpd_error(resp, 500, "internal", "out of memory");
		return;
	}
	r->w = w;
	r->login = *l;   /* takes the user reference */
	util_strlcpy(r->method, req->method, sizeof(r->method));
	util_strlcpy(r->path, path, sizeof(r->path));
	if (req->body_len)
		memcpy(r->body, req->body, req->body_len);
	r->body_len = req->body_len;
	r->length = -1;
	struct pump *p;
	struct terr err = {0};
	if (pump_start(&p, 0, byte_relay_run, r, byte_relay_free, &err) < 0) {
		httpd_error(resp, 500, "internal", "%s", err.msg);
		return;
	}
	if (pump_wait_ready(p, &err) < 0 || r->status < 100) {
		pump_close(p);
		httpd_error(resp, 503, "unavailable", "cannot reach the manager: %s",
			    err.msg[0] ? err.msg : "no answer");
		return;
	}
	long status = r->status;
	long long length = r->length;
	pump_respond(p, req, resp, (int)status, r->ctype, NULL, NULL);
	/* A download keeps its length, so the browser shows how far it is
	 * (and knows a cut one is incomplete), and is saved as a file. */
	if (resp->stream && is_download(req->method, path) && status == 200) {
		if (length >= 0) {
			resp->stream_sized = 1;
			resp->stream_size = (unsigned long long)length;
		}
		char disp[1024];
		download_disposition(req, disp, sizeof(disp));
		httpd_resp_header(resp, "Content-Disposition", disp);
	}
}

/* PUT /api/v1/folders/{name}/upload: a body of any size, relayed as it
 * comes. The route streams its body (HTTPD_ROUTE_STREAM_BODY): httpd hands
 * the pieces to upload_write in the browser connection's thread, which
 * writes them into a socket pair; a thread of the relay reads the other
 * end as libcurl asks for the request body of its PUT to the manager. The
 * socket pair's buffer is all that is held, and a browser is read no
 * faster than the manager takes the bytes. The browser computed the body's
 * SHA-256 (X-Tessera-Content-SHA256); the webserver signs with it, and the
 * manager checks the bytes against it (docs/api.md, "Authentication"). */
#define UPLOAD_STALL_S 120

struct upload_relay {
	struct web *w;
	struct login login;      /* owns the user reference */
	char path[4096];
	char hash[SIGN_HEX_LEN + 1];
	long long len;           /* the browser's Content-Length */
	long long sent;          /* bytes libcurl took so far */
	int fds[2];              /* [1] written by the sink, [0] read by the thread */
	pthread_t thread;
	bool joined;
	atomic_bool cancel;      /* the browser went away: abort the PUT */
	/* The manager's answer, collected by upload_on_status/_on_data: a
	 * manager that answers before the end of the body (409, 413) may close
	 * the connection while libcurl still sends, which libcurl reports as a
	 * send failure after the answer came; the answer is what counts. */
	long status;
	char ctype[128];
	char body[16384];
	size_t body_len;
	int rc;
	struct terr err;
};

static int upload_on_status(long status, const char *content_type, void *ud)
{
	struct upload_relay *u = ud;
	u->status = status;
	util_strlcpy(u->ctype, content_type && *content_type ? content_type : "application/json", sizeof(u->ctype));
	return 0;
}

/* The manager's answer to an upload is a small JSON object; more than the
 * buffer holds is cut (and is no answer of the API). */
static int upload_on_data(const char *data, size_t len, void *ud)
{
	struct upload_relay *u = ud;
	size_t room = sizeof(u->body) - u->body_len;
	size_t k = len < room ? len : room;
	memcpy(u->body + u->body_len, data, k);
	u->body_len += k;
	return 0;
}

static long upload_read_body(char *buf, size_t max, void *ud)
{
	struct upload_relay *u = ud;
	for (;;) {
		ssize_t n = recv(u->fds[0], buf, max, 0);
		if (n > 0) {
			u->sent += n;
			return (long)n;
		}
		if (n < 0 && errno == EINTR)
			continue;
		/* The end of the pipe: a complete body only when all its bytes
		 * came and the browser did not go away; else the PUT is cut,
		 * so the manager keeps nothing of it. */
		if (n == 0 && u->sent == u->len && !atomic_load_explicit(&u->cancel, memory_order_relaxed))
			return 0;
		return -1;
	}
}

static void *upload_main(void *arg)
{
	struct upload_relay *u = arg;
	char url[4096 + 300], date[64], auth[512];
	if (snprintf(url, sizeof(url), "%s%s", u->w->manager, u->path) >= (int)sizeof(url)) {
		u->rc = terr_set(&u->err, E2BIG, "request target too long");
		goto out;
	}
	sign_format_date(time(NULL), date, sizeof(date));
	u->rc = sign_authorization_hashed(u->login.access_key, u->login.secret_key, "PUT", u->path, date,
					  u->w->manager_host, u->hash, auth, sizeof(auth), &u->err);
	if (u->rc < 0)
		goto out;
	char h_date[96], h_host[300], h_auth[560], h_sha[128];
	snprintf(h_date, sizeof(h_date), "Date: %s", date);
	snprintf(h_host, sizeof(h_host), "Host: %s", u->w->manager_host);
	snprintf(h_auth, sizeof(h_auth), "Authorization: %s", auth);
	snprintf(h_sha, sizeof(h_sha), "X-Tessera-Content-SHA256: %s", u->hash);
	const char *headers[] = {h_date, h_host, h_auth, h_sha, "Content-Type: application/octet-stream",
				 "Accept: application/json", NULL};
	struct httpc_request req = {
		.method = "PUT", .url = url, .headers = headers, .read_body = upload_read_body,
		.read_body_len = u->len, .ud = u, .cancel = &u->cancel,
		.on_status = upload_on_status, .on_data = upload_on_data, .expect_continue = 1,
	};
	struct httpc_response resp = {0};
	u->rc = httpc_do(&req, &resp, &u->err);
	httpc_response_free(&resp);
	/* An answer that came before a send failure is the manager's word. */
	if (u->rc < 0 && u->status >= 200 && !atomic_load_explicit(&u->cancel, memory_order_relaxed))
		u->rc = 0;
out:
	/* The manager answered (perhaps before all the body, a 409 or 413):
	 * a sink still writing gets EPIPE and answers with this. */
	shutdown(u->fds[0], SHUT_RDWR);
	return NULL;
}

static void upload_join(struct upload_relay *u)
{
	if (!u->joined) {
		pthread_join(u->thread, NULL);
		u->joined = true;
	}
}

static void upload_free(struct upload_relay *u)
{
	close(u->fds[0]);
	close(u->fds[1]);
	json_decref(u->login.user);
	free(u);
}

/* The manager's answer (its status and JSON), or why there is none. */
static void upload_answer(struct upload_relay *u, struct httpd_resp *resp)
{
	if (u->rc < 0)
		httpd_error(resp, 503, "unavailable", "cannot reach the manager: %s", u->err.msg);
	else if (u->status < 200)
		httpd_error(resp, 502, "internal", "the manager gave no answer to the upload");
	else
		httpd_bytes(resp, (int)u->status, u->ctype, u->body, u->body_len);
}

static int upload_write(void *cls, const char *data, size_t len, struct httpd_resp *resp)
{
	struct upload_relay *u = cls;
	int e = 0;
	while (len) {
		ssize_t n = send(u->fds[1], data, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			e = n < 0 ? errno : EPIPE;
			break;
		}
		data += n;
		len -= (size_t)n;
	}
	if (!len)
		return 0;
	if (e == EAGAIN || e == EWOULDBLOCK) {
		/* The manager took nothing for UPLOAD_STALL_S: give up the PUT
		 * (libcurl sees the cancel within a second) rather than hold
		 * this thread for ever. */
		atomic_store_explicit(&u->cancel, true, memory_order_relaxed);
		shutdown(u->fds[0], SHUT_RDWR);
		upload_join(u);
		httpd_error(resp, 504, "unavailable",
			    "the manager took no data of the upload for %d s; try again", UPLOAD_STALL_S);
		return -1;
	}
	/* The thread closed its end: the manager has answered already. */
	upload_join(u);
	upload_answer(u, resp);
	return -1;
}

static void upload_end(void *cls, int complete, struct httpd_resp *resp)
{
	struct upload_relay *u = cls;
	if (complete) {
		shutdown(u->fds[1], SHUT_WR);
		upload_join(u);
		upload_answer(u, resp);
	} else {
		atomic_store_explicit(&u->cancel, true, memory_order_relaxed);
		shutdown(u->fds[1], SHUT_RDWR);
		shutdown(u->fds[0], SHUT_RDWR);
		upload_join(u);
	}
	upload_free(u);
}

static bool is_hex64(const char *s)
{
	if (!s || strlen(s) != SIGN_HEX_LEN)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F')))
			return false;
	return true;
}

static void web_upload(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct web *w = ctx;
	struct login l;
	if (!need_login(w, req, resp, &l, "you are not logged in (or your login expired)"))
		return;
	if (!csrf_ok(req, &l)) {
		json_decref(l.user);
		httpd_error(resp, 403, "forbidden", "missing or wrong CSRF token; reload the page");
		return;
	}
	const char *hash = httpd_header(req, "X-Tessera-Content-SHA256");
	if (!is_hex64(hash)) {
		json_decref(l.user);
		httpd_error(resp, 400, "invalid_argument",
			    "an upload needs X-Tessera-Content-SHA256: the hex SHA-256 of its body (docs/api.md)");
		return;
	}
	const char *cl = httpd_header(req, "Content-Length");
	char *end = NULL;
	long long len = cl ? strtoll(cl, &end, 10) : -1;
	if (!cl || !*cl || *end || len < 0) {
		json_decref(l.user);
		httpd_error(resp, 411, "invalid_argument", "an upload needs a Content-Length");
		return;
	}
	struct upload_relay *u = calloc(1, sizeof(*u));
	if (!u || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, u->fds) < 0) {
		free(u);
		json_decref(l.user);
		httpd_error(resp, 500, "internal", "cannot relay the upload: out of resources");
		return;
	}
	/* A manager that stops taking the bytes must not hold the browser's
	 * connection thread for ever (upload_write). */
	struct timeval stall = {.tv_sec = UPLOAD_STALL_S};
	setsockopt(u->fds[1], SOL_SOCKET, SO_SNDTIMEO, &stall, sizeof(stall));
	u->w = w;
	u->login = l;   /* takes the user reference */
	util_strlcpy(u->path, req->target + 4, sizeof(u->path));   /* "/api/v1/..." -> "/v1/..." */
	util_strlcpy(u->hash, hash, sizeof(u->hash));
	u->len = len;
	atomic_init(&u->cancel, false);
	if (pthread_create(&u->thread, NULL, upload_main, u) != 0) {
		u->joined = true;
		upload_free(u);
		httpd_error(resp, 500, "internal", "cannot start the upload relay");
		return;
	}
	httpd_req_sink(req, upload_write, upload_end, u);
}

/* POST /v1/keypairs/{key}/rotate: a key the user replaces on the
 * Credentials page, whose new secret is theirs to copy as a new key's
 * (never the main key, which the manager refuses to rotate). */
static bool is_rotate(const char *path)
{
	if (strncmp(path, "/v1/keypairs/", 13))
		return false;
	const char *slash = strchr(path + 13, '/');
	return slash && slash > path + 13 && !strcmp(slash, "/rotate");
}

/* ANY /api/v1/{*rest}: the manager's /v1/{rest}, query included. */
static void web_relay(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct web *w = ctx;
	struct login l;
	if (!need_login(w, req, resp, &l, "you are not logged in (or your login expired)"))
		return;
	const char *path = req->target + 4;   /* "/api/v1/..." -> "/v1/..." */
	if (is_write(req->method) && !csrf_ok(req, &l)) {
		httpd_error(resp, 403, "forbidden", "missing or wrong CSRF token; reload the page");
		goto out;
	}
	if (!strncmp(path, "/v1/auth/login", 14) || !strncmp(path, "/v1/agents", 10)) {
		httpd_error(resp, 404, "not_found", "no such route through the webserver");
		goto out;
	}
	if (!strcmp(req->method, "GET") && (!strcmp(path, "/v1/events") || !strncmp(path, "/v1/events?", 11))) {
		relay_stream(w, resp, &l, path);
		return;
	}
	if (is_byte_stream(req->method, path)) {
		relay_bytes(w, req, resp, &l, path);
		return;
	}
	struct httpc_response mresp = {0};
	struct terr err = {0};
	const char *extra[] = {"Accept: application/json", NULL};
	int rc = manager_call(w, req->method, path, l.access_key, l.secret_key, extra,
			      req->body_len ? req->body : NULL, req->body_len, &mresp, NULL, NULL, NULL, NULL, 330000, &err);
	if (rc < 0) {
		httpc_response_free(&mresp);
		httpd_error(resp, 503, "unavailable", "cannot reach the manager: %s", err.msg);
		goto out;
	}
	char *body = mresp.body;
	size_t len = mresp.len;
	json_t *o = NULL;
	/* A keypair's secret (POST /v1/users answers one) never goes to a
	 * browser: the webserver alone signs. The one exception is a key the
	 * user makes for themselves on the Credentials page (POST
	 * /v1/keypairs): it is for their CLI, shown once, and never the key
	 * the webserver signs with (that one is made at account creation or
	 * by a revocation, whose answers carry no secret). */
	bool own_new_key = !strcmp(req->method, "POST") && (!strcmp(path, "/v1/keypairs") ||
							     !strncmp(path, "/v1/keypairs?", 13) || is_rotate(path));
	if (body && !own_new_key && strstr(body, "\"secret_key\"")) {
		o = json_loadb(body, len, 0, NULL);
		if (json_is_object(o) && json_object_del(o, "secret_key") == 0) {
			body = json_dumps(o, JSON_COMPACT);
			len = body ? strlen(body) : 0;
		} else {
			json_decref(o);
			o = NULL;
		}
	}
	httpd_bytes(resp, (int)mresp.status, mresp.content_type[0] ? mresp.content_type : "application/json",
		    body, len);
	if (o) {
		free(body);
		json_decref(o);
	}
	httpc_response_free(&mresp);
out:
	json_decref(l.user);
}

/* ANY /api/{*rest} that is not /api/v1/. */
static void web_api_unknown(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	httpd_error(resp, 404, "not_found", "no such route: %s", req->path);
}

/* ---------- static files ---------- */

static const char *content_type(const char *path)
{
	static const struct { const char *ext, *type; } types[] = {
		{".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
		{".css", "text/css; charset=utf-8"}, {".svg", "image/svg+xml"}, {".png", "image/png"},
		{".ico", "image/x-icon"}, {".json", "application/json"}, {".woff2", "font/woff2"},
		{".map", "application/json"}, {".txt", "text/plain; charset=utf-8"},
	};
	const char *dot = strrchr(path, '.');
	for (size_t i = 0; dot && i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(dot, types[i].ext))
			return types[i].type;
	return "application/octet-stream";
}

static bool safe_path(const char *p)
{
	if (p[0] != '/' || strstr(p, "..") || strstr(p, "//"))
		return false;
	for (const char *c = p; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		      *c == '/' || *c == '.' || *c == '-' || *c == '_'))
			return false;
	return true;
}

/* GET|HEAD anything else: a file of the UI, else index.html. */
static void web_file(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct web *w = ctx;
	const char *url = req->path;
	char path[PATH_MAX + 256];
	const char *rel = url;
	struct stat sb;
	if (!safe_path(url) || !strcmp(url, "/"))
		rel = "/index.html";
	snprintf(path, sizeof(path), "%s%s", w->ui_dir, rel);
	if (stat(path, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		if (!strncmp(url, "/assets/", 8)) {
			httpd_error(resp, 404, "not_found", "no such file: %s", url);
			return;
		}
		/* Client-side routes (/sessions, /admin) get the app. */
		snprintf(path, sizeof(path), "%s/index.html", w->ui_dir);
		rel = "/index.html";
	}
	char *data = NULL;
	size_t len = 0;
	if (util_read_file(path, &data, &len, NULL) < 0) {
		httpd_error(resp, 404, "not_found",
			    "the UI is not built or not found in %s; run 'make build' or set ui_dir", w->ui_dir);
		return;
	}
	if (httpd_bytes(resp, 200, content_type(rel), data, len) == 0)
		/* Vite puts a content hash in every asset name. */
		httpd_resp_header(resp, "Cache-Control",
				  !strncmp(rel, "/assets/", 8) ? "public, max-age=31536000, immutable" : "no-cache");
	free(data);
}

/* ---------- dispatch ---------- */

/* Runs before every handler: a state-changing request from another site is
 * refused whatever it targets. */
static int web_check_origin(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (is_write(req->method) && !origin_ok(ctx, req)) {
		httpd_error(resp, 403, "forbidden", "cross-site request refused");
		return -EACCES;
	}
	return 0;
}

/* First match wins. */
static const struct httpd_route web_routes[] = {
	{"PUT", "/api/v1/folders/{name}/upload", web_upload, HTTPD_ROUTE_STREAM_BODY},
	{"*", "/api/v1/{*rest}", web_relay, 0},
	{"*", "/api/{*rest}", web_api_unknown, 0},
	{"POST", "/auth/login", web_login, 0},
	{"GET", "/auth/me", web_me, 0},
	{"POST", "/auth/logout", web_logout, 0},
	{"GET", "/{*path}", web_file, 0},
	{"HEAD", "/{*path}", web_file, 0},
};

/* ---------- start/stop ---------- */

static int find_ui(char *out, size_t n, struct terr *err)
{
	return util_find_ui_dir("index.html", out, n, err);
}

int web_start(const struct web_config *cfg, struct web **out, struct terr *err)
{
	int rc;
	if (!cfg->manager || strncmp(cfg->manager, "http://", 7))
		return terr_set(err, EINVAL, "manager must be an http:// URL (e.g. http://127.0.0.1:8090)");
	if (!cfg->web_secret || strlen(cfg->web_secret) < 16)
		return terr_set(err, EINVAL, "web_secret (the manager's cluster_secret) must be 16 characters or more");
	if (!cfg->tls_cert != !cfg->tls_key)
		return terr_set(err, EINVAL, "tls_cert and tls_key go together");
	char host[64];
	int port;
	const char *listen = cfg->listen ? cfg->listen : "127.0.0.1:8080";
	if ((rc = httpd_parse_listen(listen, host, sizeof(host), &port, err)) < 0)
		return rc;
	struct in_addr ia;
	if (!strcmp(host, "localhost"))
		strcpy(host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &ia) != 1)
		return terr_set(err, EINVAL, "listen address '%s' is not an IPv4 address", host);
	struct web *w = calloc(1, sizeof(*w));
	if (!w)
		return terr_set(err, ENOMEM, "out of memory");
	w->logins = calloc(WEB_MAX_LOGINS, sizeof(*w->logins));
	pthread_mutex_init(&w->mu, NULL);
	pthread_mutex_init(&w->apps_mu, NULL);
	util_strlcpy(w->listen, listen, sizeof(w->listen));
	util_strlcpy(w->manager, cfg->manager, sizeof(w->manager));
	size_t ml = strlen(w->manager);
	while (ml && w->manager[ml - 1] == '/')
		w->manager[--ml] = '\0';
	const char *mh = w->manager + 7;
	if (strchr(mh, '/')) {
		rc = terr_set(err, EINVAL, "manager URL must be http://HOST:PORT without a path");
		goto fail;
	}
	util_strlcpy(w->manager_host, mh, sizeof(w->manager_host));
	util_strlcpy(w->web_secret, cfg->web_secret, sizeof(w->web_secret));
	w->ttl_ms = (int64_t)(cfg->login_ttl_s > 0 ? cfg->login_ttl_s : 12 * 3600) * 1000;
	w->store = &login_mem_ops;
	if (cfg->redis_url && *cfg->redis_url) {
		if ((rc = redis_open(cfg->redis_url, &w->redis, err)) < 0) {
			terr_prefix(err, "redis");
			goto fail;
		}
		w->store = &login_redis_ops;
		struct terr e = {0};
		if (redis_ping(w->redis, &e) < 0)
			log_warn("webserver", "%s; logins will fail until it answers", e.msg);
		else
			log_info("webserver", "login sessions are kept in Redis at %s", redis_addr(w->redis));
	}
	if (!w->logins) {
		rc = terr_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	if (cfg->ui_dir)
		rc = util_strlcpy(w->ui_dir, cfg->ui_dir, sizeof(w->ui_dir)) < 0
			     ? terr_set(err, ENAMETOOLONG, "ui_dir too long") : 0;
	else
		rc = find_ui(w->ui_dir, sizeof(w->ui_dir), err);
	if (rc < 0)
		goto fail;
	struct httpd_config hc = {
		.listen = listen,
		.routes = web_routes,
		.n_routes = sizeof(web_routes) / sizeof(web_routes[0]),
		.ctx = w,
		.max_body = WEB_MAX_BODY,
		.authenticate = web_check_origin,
		.headers = security_headers,
		.n_headers = sizeof(security_headers) / sizeof(security_headers[0]),
		.timeout_s = 120,
		/* Browsers keep a few connections per site; many users behind
		 * one NAT address share this cap. Unfinished requests have their
		 * own, smaller cap per address (common/httpd.h). */
		.per_addr_limit = WEB_CONNS_PER_ADDR,
	};
	char *cert = NULL, *key = NULL;
	if (cfg->tls_cert) {
		size_t len;
		if ((rc = util_read_file(cfg->tls_cert, &cert, &len, err)) < 0 ||
		    (rc = util_read_file(cfg->tls_key, &key, &len, err)) < 0) {
			free(cert);
			goto fail;
		}
		hc.tls_cert_pem = cert;
		hc.tls_key_pem = key;
		w->tls = true;
	}
	rc = httpd_start(&hc, &w->httpd, err);
	free(cert);
	free(key);
	if (rc < 0)
		goto fail;
	w->port = httpd_port(w->httpd);
	snprintf(w->url, sizeof(w->url), "%s://%s:%d/", w->tls ? "https" : "http",
		 strcmp(host, "0.0.0.0") ? host : "127.0.0.1", w->port);
	*out = w;
	return 0;
fail:
	web_stop(w);
	return rc;
}

int web_port(const struct web *w)
{
	return w->port;
}

const char *web_url(const struct web *w)
{
	return w->url;
}

void web_stop(struct web *w)
{
	if (!w)
		return;
	httpd_stop(w->httpd);
	for (size_t i = 0; i < w->n_logins; i++)
		json_decref(w->logins[i].user);
	free(w->logins);
	redis_close(w->redis);
	pthread_mutex_destroy(&w->mu);
	pthread_mutex_destroy(&w->apps_mu);
	free(w);
}
