/* The webserver (web/webserver.h) over libmicrohttpd, thread per
 * connection like the API server (common/httpd.c), but with what a browser
 * needs that the JSON API server does not: cookies, static files and a
 * streamed relay for server-sent events. */
#include "web/webserver.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/httpc.h"
#include "common/httpd.h"
#include "common/log.h"
#include "common/sign.h"
#include "common/util.h"

#define WEB_MAX_BODY (1u << 20)
#define WEB_MAX_LOGINS 10000
#define COOKIE_NAME "tessera_session"
#define TOKEN_BYTES 32

struct login {
	char token_hash[SIGN_HEX_LEN + 1];  /* sha256 of the cookie value */
	char csrf[2 * TOKEN_BYTES + 1];
	char access_key[64];
	char secret_key[128];
	json_t *user;                       /* {"id","email","is_admin",...} */
	int64_t expires_ms;
};

struct web {
	struct MHD_Daemon *daemon;
	char listen[128];
	char manager[256];
	char manager_host[256];             /* Host header / signing host */
	char web_secret[256];
	char ui_dir[PATH_MAX];
	char url[300];
	bool tls;
	char *tls_cert_pem, *tls_key_pem;
	int port;
	int64_t ttl_ms;
	pthread_mutex_t mu;
	struct login *logins;
	size_t n_logins;
};

/* Per request: raw target (for the relay) and the collected body. */
struct req_state {
	char *target;
	char *body;
	size_t len;
	bool too_large;
	bool started;
};

/* ---------- small helpers ---------- */

static void add_common_headers(struct MHD_Response *r)
{
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "X-Frame-Options", "DENY");
	MHD_add_response_header(r, "Referrer-Policy", "same-origin");
	MHD_add_response_header(r, "Content-Security-Policy",
		"default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
		"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
}

static enum MHD_Result send_buf(struct MHD_Connection *conn, unsigned status, const char *ctype,
				char *body, size_t len, const char *cookie)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body ? body : (char *)"",
		body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	add_common_headers(r);
	MHD_add_response_header(r, "Content-Type", ctype);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	if (cookie)
		MHD_add_response_header(r, "Set-Cookie", cookie);
	enum MHD_Result ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *conn, unsigned status, json_t *o, const char *cookie)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return send_buf(conn, status, "application/json", s, s ? strlen(s) : 0, cookie);
}

static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status, const char *code,
				  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status, const char *code,
				  const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return send_json(conn, status, json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg), NULL);
}

static const char *header(struct MHD_Connection *conn, const char *name)
{
	return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

static void client_addr(struct MHD_Connection *conn, char *out, size_t n)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	util_strlcpy(out, "unknown", n);
	if (!ci || !ci->client_addr)
		return;
	const struct sockaddr *sa = ci->client_addr;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)n);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, (socklen_t)n);
}

static bool is_write(const char *method)
{
	return strcmp(method, "GET") && strcmp(method, "HEAD") && strcmp(method, "OPTIONS");
}

/* A browser sends Origin on cross-site requests; it must be this site. */
static bool origin_ok(struct web *w, struct MHD_Connection *conn)
{
	const char *origin = header(conn, "Origin");
	const char *host = header(conn, "Host");
	if (!origin)
		return true;
	if (!host)
		return false;
	char expect[320];
	snprintf(expect, sizeof(expect), "%s://%s", w->tls ? "https" : "http", host);
	return !strcmp(origin, expect);
}

/* ---------- login sessions ---------- */

static void cookie_value(struct MHD_Connection *conn, char *out, size_t n)
{
	out[0] = '\0';
	const char *v = MHD_lookup_connection_value(conn, MHD_COOKIE_KIND, COOKIE_NAME);
	if (v && strlen(v) == 2 * TOKEN_BYTES)
		util_strlcpy(out, v, n);
}

/* Called with mu held: drops expired logins. */
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

/* Copies the caller's login (user gets a new reference); false if none. */
static bool find_login(struct web *w, struct MHD_Connection *conn, struct login *out)
{
	char tok[2 * TOKEN_BYTES + 1], h[SIGN_HEX_LEN + 1];
	cookie_value(conn, tok, sizeof(tok));
	if (!tok[0])
		return false;
	sign_sha256_hex(tok, strlen(tok), h);
	bool found = false;
	pthread_mutex_lock(&w->mu);
	expire_logins(w, util_now_ms());
	for (size_t i = 0; i < w->n_logins && !found; i++) {
		if (sign_equal(w->logins[i].token_hash, h)) {
			*out = w->logins[i];
			json_incref(out->user);
			found = true;
		}
	}
	pthread_mutex_unlock(&w->mu);
	return found;
}

static void drop_login(struct web *w, struct MHD_Connection *conn)
{
	char tok[2 * TOKEN_BYTES + 1], h[SIGN_HEX_LEN + 1];
	cookie_value(conn, tok, sizeof(tok));
	if (!tok[0])
		return;
	sign_sha256_hex(tok, strlen(tok), h);
	pthread_mutex_lock(&w->mu);
	for (size_t i = 0; i < w->n_logins; i++) {
		if (sign_equal(w->logins[i].token_hash, h)) {
			json_decref(w->logins[i].user);
			w->logins[i] = w->logins[--w->n_logins];
			break;
		}
	}
	pthread_mutex_unlock(&w->mu);
}

static void make_cookie(struct web *w, const char *value, int64_t max_age_s, char *out, size_t n)
{
	snprintf(out, n, COOKIE_NAME "=%s; Path=/; Max-Age=%lld; HttpOnly; SameSite=Strict%s", value,
		 (long long)max_age_s, w->tls ? "; Secure" : "");
}

/* ---------- calls to the manager ---------- */

/* Sends METHOD path (with query) to the manager, signed with the given
 * keypair (or, when access_key is NULL, with the extra headers only).
 * Any HTTP status is a success here. */
static int manager_call(struct web *w, const char *method, const char *path, const char *ak,
			const char *sk, const char *const *extra, const char *body, size_t body_len,
			struct httpc_response *resp, int (*on_data)(const char *, size_t, void *), void *ud,
			volatile int *cancel, long timeout_ms, struct terr *err)
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
	const char *headers[12] = {h_date, h_host, "Content-Type: application/json"};
	size_t nh = 3;
	if (ak)
		headers[nh++] = h_auth;
	for (size_t i = 0; extra && extra[i] && nh < 11; i++)
		headers[nh++] = extra[i];
	headers[nh] = NULL;
	struct httpc_request req = {
		.method = method, .url = url, .headers = headers, .body = body, .body_len = body_len,
		.timeout_ms = timeout_ms, .on_data = on_data, .ud = ud, .cancel = cancel,
	};
	return httpc_do(&req, resp, err);
}

/* ---------- /auth ---------- */

static enum MHD_Result do_login(struct web *w, struct MHD_Connection *conn, struct req_state *st)
{
	const char *ct = header(conn, "Content-Type");
	if (!ct || strncmp(ct, "application/json", 16))
		return send_error(conn, 415, "invalid_argument", "send the login as application/json");
	json_error_t jerr;
	json_t *in = json_loadb(st->body ? st->body : "", st->len, 0, &jerr);
	const char *email = json_string_value(json_object_get(in, "email"));
	const char *password = json_string_value(json_object_get(in, "password"));
	if (!email || !*email || !password || !*password) {
		json_decref(in);
		return send_error(conn, 400, "invalid_argument", "enter your email and your password");
	}
	json_t *fwd = json_pack("{s:s,s:s}", "email", email, "password", password);
	json_decref(in);
	char *fbody = json_dumps(fwd, JSON_COMPACT);
	json_decref(fwd);
	char addr[INET6_ADDRSTRLEN + 1], h_secret[320], h_addr[96];
	client_addr(conn, addr, sizeof(addr));
	snprintf(h_secret, sizeof(h_secret), "X-Tessera-Web-Secret: %s", w->web_secret);
	snprintf(h_addr, sizeof(h_addr), "X-Tessera-Client-Addr: %s", addr);
	const char *extra[] = {h_secret, h_addr, NULL};
	struct httpc_response resp = {0};
	struct terr err = {0};
	int rc = manager_call(w, "POST", "/v1/auth/login", NULL, NULL, extra, fbody, fbody ? strlen(fbody) : 0,
			      &resp, NULL, NULL, NULL, 30000, &err);
	free(fbody);
	if (rc < 0) {
		httpc_response_free(&resp);
		return send_error(conn, 503, "unavailable", "cannot reach the manager: %s", err.msg);
	}
	json_t *out = resp.len ? json_loadb(resp.body, resp.len, 0, &jerr) : NULL;
	long status = resp.status;
	httpc_response_free(&resp);
	if (status != 200) {
		/* The manager's words (wrong password, rate limited, disabled). */
		if (!json_is_object(json_object_get(out, "error"))) {
			json_decref(out);
			return send_error(conn, 502, "internal", "the manager answered HTTP %ld to a login", status);
		}
		return send_json(conn, (unsigned)status, out, NULL);
	}
	const char *ak = json_string_value(json_object_get(out, "access_key"));
	const char *sk = json_string_value(json_object_get(out, "secret_key"));
	json_t *user = json_object_get(out, "user");
	if (!ak || !sk || !json_is_object(user)) {
		json_decref(out);
		return send_error(conn, 502, "internal", "the manager's login answer lacks the keypair");
	}
	struct login l = {0};
	char token[2 * TOKEN_BYTES + 1];
	if (sign_random_hex(TOKEN_BYTES, token, sizeof(token), &err) < 0 ||
	    sign_random_hex(TOKEN_BYTES, l.csrf, sizeof(l.csrf), &err) < 0) {
		json_decref(out);
		return send_error(conn, 500, "internal", "%s", err.msg);
	}
	sign_sha256_hex(token, strlen(token), l.token_hash);
	util_strlcpy(l.access_key, ak, sizeof(l.access_key));
	util_strlcpy(l.secret_key, sk, sizeof(l.secret_key));
	l.user = json_incref(user);
	l.expires_ms = util_now_ms() + w->ttl_ms;
	json_t *reply = json_pack("{s:O,s:s}", "user", user, "csrf_token", l.csrf);
	json_decref(out);
	pthread_mutex_lock(&w->mu);
	expire_logins(w, util_now_ms());
	bool full = w->n_logins >= WEB_MAX_LOGINS;
	if (!full)
		w->logins[w->n_logins++] = l;
	pthread_mutex_unlock(&w->mu);
	if (full) {
		json_decref(l.user);
		json_decref(reply);
		return send_error(conn, 503, "unavailable", "too many people are logged in; try again later");
	}
	log_info("web", "%s logged in from %s", json_string_value(json_object_get(user, "email")), addr);
	char cookie[256];
	make_cookie(w, token, w->ttl_ms / 1000, cookie, sizeof(cookie));
	return send_json(conn, 200, reply, cookie);
}

static bool csrf_ok(struct MHD_Connection *conn, const struct login *l)
{
	const char *t = header(conn, "X-CSRF-Token");
	return t && sign_equal(t, l->csrf);
}

/* ---------- the relay ---------- */

/* Streaming relay of GET /v1/events: a thread reads the manager's stream
 * into one end of a socket pair; MHD's reader callback reads the other. */
struct stream {
	struct web *w;
	struct login login;
	char path[1024];
	int fds[2];
	volatile int cancel;
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
	if (s->cancel)
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
			      &resp, stream_on_data, s, &s->cancel, 0, &err);
	if (!s->cancel && (rc < 0 || s->mode == 2 || resp.status != 200)) {
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

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct stream *s = cls;
	ssize_t n = recv(s->fds[0], buf, max, 0);
	if (n > 0)
		return n;
	return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void stream_free(void *cls)
{
	struct stream *s = cls;
	s->cancel = 1;
	shutdown(s->fds[0], SHUT_RDWR);
	pthread_join(s->thread, NULL);
	close(s->fds[0]);
	close(s->fds[1]);
	json_decref(s->login.user);
	free(s);
}

static enum MHD_Result relay_stream(struct web *w, struct MHD_Connection *conn, struct login *l,
				    const char *path)
{
	struct stream *s = calloc(1, sizeof(*s));
	if (!s || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s->fds) < 0) {
		free(s);
		json_decref(l->user);
		return send_error(conn, 500, "internal", "cannot open an event stream");
	}
	s->w = w;
	s->login = *l;   /* takes the user reference */
	util_strlcpy(s->path, path, sizeof(s->path));
	if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
		close(s->fds[0]);
		close(s->fds[1]);
		json_decref(s->login.user);
		free(s);
		return send_error(conn, 500, "internal", "cannot start an event stream");
	}
	struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s,
								   stream_free);
	if (!r) {
		stream_free(s);
		return MHD_NO;
	}
	add_common_headers(r);
	MHD_add_response_header(r, "Content-Type", "text/event-stream");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Accel-Buffering", "no");
	enum MHD_Result ret = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result relay(struct web *w, struct MHD_Connection *conn, const char *method,
			     struct req_state *st)
{
	struct login l;
	if (!find_login(w, conn, &l))
		return send_error(conn, 401, "unauthenticated", "you are not logged in (or your login expired)");
	const char *path = st->target + 4;   /* "/api/v1/..." -> "/v1/..." */
	enum MHD_Result ret;
	if (is_write(method) && !csrf_ok(conn, &l)) {
		ret = send_error(conn, 403, "forbidden", "missing or wrong CSRF token; reload the page");
		goto out;
	}
	if (!strncmp(path, "/v1/auth/login", 14) || !strncmp(path, "/v1/agents", 10)) {
		ret = send_error(conn, 404, "not_found", "no such route through the webserver");
		goto out;
	}
	if (!strcmp(method, "GET") && (!strcmp(path, "/v1/events") || !strncmp(path, "/v1/events?", 11)))
		return relay_stream(w, conn, &l, path);
	struct httpc_response resp = {0};
	struct terr err = {0};
	const char *extra[] = {"Accept: application/json", NULL};
	int rc = manager_call(w, method, path, l.access_key, l.secret_key, extra, st->body, st->len, &resp, NULL,
			      NULL, NULL, 330000, &err);
	if (rc < 0) {
		httpc_response_free(&resp);
		ret = send_error(conn, 503, "unavailable", "cannot reach the manager: %s", err.msg);
		goto out;
	}
	char *body = resp.body;
	size_t len = resp.len;
	resp.body = NULL;
	/* A keypair's secret (POST /v1/users answers one) never goes to a
	 * browser: the webserver alone signs. */
	if (body && strstr(body, "\"secret_key\"")) {
		json_t *o = json_loadb(body, len, 0, NULL);
		if (json_is_object(o) && json_object_del(o, "secret_key") == 0) {
			free(body);
			body = json_dumps(o, JSON_COMPACT);
			len = body ? strlen(body) : 0;
		}
		json_decref(o);
	}
	ret = send_buf(conn, (unsigned)resp.status, resp.content_type[0] ? resp.content_type : "application/json",
		       body, len, NULL);
	httpc_response_free(&resp);
out:
	json_decref(l.user);
	return ret;
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

static enum MHD_Result serve_file(struct web *w, struct MHD_Connection *conn, const char *url)
{
	char path[PATH_MAX + 256];
	const char *rel = url;
	struct stat sb;
	bool spa = false;
	if (!safe_path(url) || !strcmp(url, "/"))
		rel = "/index.html";
	snprintf(path, sizeof(path), "%s%s", w->ui_dir, rel);
	if (stat(path, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		if (!strncmp(url, "/assets/", 8))
			return send_error(conn, 404, "not_found", "no such file: %s", url);
		/* Client-side routes (/sessions, /admin) get the app. */
		snprintf(path, sizeof(path), "%s/index.html", w->ui_dir);
		rel = "/index.html";
		spa = true;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) < 0) {
		if (fd >= 0)
			close(fd);
		return send_error(conn, 404, "not_found",
				  "the UI is not built or not found in %s; run 'make build' or set ui_dir", w->ui_dir);
	}
	struct MHD_Response *r = MHD_create_response_from_fd((uint64_t)sb.st_size, fd);
	if (!r) {
		close(fd);
		return MHD_NO;
	}
	add_common_headers(r);
	MHD_add_response_header(r, "Content-Type", content_type(rel));
	/* Vite puts a content hash in every asset name. */
	MHD_add_response_header(r, "Cache-Control",
				!strncmp(rel, "/assets/", 8) ? "public, max-age=31536000, immutable" : "no-cache");
	(void)spa;
	enum MHD_Result ret = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return ret;
}

/* ---------- dispatch ---------- */

static enum MHD_Result route(struct web *w, struct MHD_Connection *conn, const char *url, const char *method,
			     struct req_state *st)
{
	if (st->too_large)
		return send_error(conn, 413, "too_large", "request body over %u bytes", WEB_MAX_BODY);
	if (is_write(method) && !origin_ok(w, conn))
		return send_error(conn, 403, "forbidden", "cross-site request refused");
	if (!strncmp(url, "/api/", 5)) {
		if (strncmp(st->target, "/api/v1/", 8))
			return send_error(conn, 404, "not_found", "no such route: %s", url);
		return relay(w, conn, method, st);
	}
	if (!strcmp(url, "/auth/login")) {
		if (strcmp(method, "POST"))
			return send_error(conn, 405, "method_not_allowed", "use POST");
		return do_login(w, conn, st);
	}
	if (!strcmp(url, "/auth/me") || !strcmp(url, "/auth/logout")) {
		struct login l;
		if (!find_login(w, conn, &l))
			return send_error(conn, 401, "unauthenticated", "you are not logged in");
		enum MHD_Result ret;
		if (!strcmp(url, "/auth/me")) {
			ret = send_json(conn, 200, json_pack("{s:O,s:s}", "user", l.user, "csrf_token", l.csrf), NULL);
		} else if (strcmp(method, "POST")) {
			ret = send_error(conn, 405, "method_not_allowed", "use POST");
		} else if (!csrf_ok(conn, &l)) {
			ret = send_error(conn, 403, "forbidden", "missing or wrong CSRF token; reload the page");
		} else {
			drop_login(w, conn);
			char cookie[256];
			make_cookie(w, "", 0, cookie, sizeof(cookie));
			ret = send_json(conn, 200, json_object(), cookie);
		}
		json_decref(l.user);
		return ret;
	}
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return send_error(conn, 405, "method_not_allowed", "%s is not allowed on %s", method, url);
	return serve_file(w, conn, url);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	(void)cls;
	(void)conn;
	struct req_state *st = calloc(1, sizeof(*st));
	if (st)
		st->target = strdup(uri ? uri : "/");
	return st;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)conn;
	(void)toe;
	struct req_state *st = *con_cls;
	if (!st)
		return;
	free(st->target);
	free(st->body);
	free(st);
	*con_cls = NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	(void)version;
	struct web *w = cls;
	struct req_state *st = *con_cls;
	if (!st || !st->target)
		return MHD_NO;
	if (!st->started) {   /* the first call carries the headers only */
		st->started = true;
		return MHD_YES;
	}
	if (*upload_size) {
		if (st->len + *upload_size > WEB_MAX_BODY) {
			st->too_large = true;
		} else if (!st->too_large) {
			char *nb = realloc(st->body, st->len + *upload_size + 1);
			if (!nb)
				return MHD_NO;
			st->body = nb;
			memcpy(st->body + st->len, upload, *upload_size);
			st->len += *upload_size;
			st->body[st->len] = '\0';
		}
		*upload_size = 0;
		return MHD_YES;
	}
	return route(w, conn, url, method, st);
}

/* ---------- start/stop ---------- */

static int find_ui(char *out, size_t n, struct terr *err)
{
	char dir[PATH_MAX];
	if (util_exe_dir(dir, sizeof(dir), err) < 0)
		return -err->code;
	const char *candidates[] = {"%s/ui/www", "%s/../share/tessera/ui"};
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		char path[PATH_MAX + 64];
		snprintf(path, sizeof(path), candidates[i], dir);
		char probe[PATH_MAX + 80];
		snprintf(probe, sizeof(probe), "%s/index.html", path);
		if (access(probe, R_OK) == 0 && realpath(path, out))
			return 0;
	}
	if (access("/usr/share/tessera/ui/index.html", R_OK) == 0)
		return util_strlcpy(out, "/usr/share/tessera/ui", n);
	return terr_set(err, ENOENT, "cannot find the built UI beside %s or in /usr/share/tessera/ui; "
			"run 'make build' or set ui_dir", dir);
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
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (!strcmp(host, "localhost"))
		strcpy(host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return terr_set(err, EINVAL, "listen address '%s' is not an IPv4 address", host);
	struct web *w = calloc(1, sizeof(*w));
	if (!w)
		return terr_set(err, ENOMEM, "out of memory");
	w->logins = calloc(WEB_MAX_LOGINS, sizeof(*w->logins));
	pthread_mutex_init(&w->mu, NULL);
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
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
	if (cfg->tls_cert) {
		size_t len;
		if ((rc = util_read_file(cfg->tls_cert, &w->tls_cert_pem, &len, err)) < 0 ||
		    (rc = util_read_file(cfg->tls_key, &w->tls_key_pem, &len, err)) < 0)
			goto fail;
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			rc = terr_set(err, ENOTSUP, "this libmicrohttpd has no TLS support");
			goto fail;
		}
		w->tls = true;
		flags |= MHD_USE_TLS;
	}
	w->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, w,
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, w,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, w,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
		MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
		w->tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, w->tls_cert_pem,
		MHD_OPTION_HTTPS_MEM_KEY, w->tls_key_pem,
		MHD_OPTION_END);
	if (!w->daemon) {
		rc = terr_set(err, EADDRINUSE, "cannot listen on %s: address in use, not available, or bad TLS files",
			      listen);
		goto fail;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(w->daemon, MHD_DAEMON_INFO_BIND_PORT);
	w->port = info ? info->port : port;
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
	if (w->daemon)
		MHD_stop_daemon(w->daemon);
	for (size_t i = 0; i < w->n_logins; i++)
		json_decref(w->logins[i].user);
	free(w->logins);
	free(w->tls_cert_pem);
	free(w->tls_key_pem);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
