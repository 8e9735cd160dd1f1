/* The app proxy on its event loop (proxy/proxy.h), in front of a runner
 * written here (a TCP server speaking the TESSERA-APP/1 line, then HTTP
 * and raw bytes) and a manager written here on common/httpd (signed
 * redeem and routes long-poll, as docs/apps.md has them). Waits are for
 * conditions, with generous limits; nothing asserts on timing. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/httpd.h"
#include "common/sign.h"
#include "common/util.h"
#include "proxy/appcookie.h"
#include "proxy/proxy.h"
#include "testlib.h"

#define SECRET "test-cluster-secret-0123456789"
#define APP_SECRET "5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7"
#define GOOD_TOKEN "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define USED_TOKEN "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define BIG_SIZE (64u * 1024 * 1024)

static int runner_port, dead_port, late_port, direct_port;
static int proxy_ports_[12];
static atomic_int direct_accepted;  /* connections the "container address" took */
static char ui_dir[256];

/* ---------- socket helpers ---------- */

static int connect_to(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	struct timeval tv = {30, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int send_all(int fd, const void *b, size_t n)
{
	const char *p = b;
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int listen_any(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bind(fd, (struct sockaddr *)&a, sizeof(a));
	listen(fd, 64);
	socklen_t l = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &l);
	*port = ntohs(a.sin_port);
	return fd;
}

/* Reads one HTTP response: status, the head (into head), the body by
 * Content-Length (into body, up to cap; the rest counted in *body_len).
 * Returns the status or -1. */
static int read_response(int fd, char *head, size_t head_cap, char *body, size_t cap, size_t *body_len)
{
	size_t hl = 0;
	while (hl + 1 < head_cap) {
		ssize_t r = recv(fd, head + hl, 1, 0);
		if (r <= 0)
			return -1;
		hl++;
		if (hl >= 4 && !memcmp(head + hl - 4, "\r\n\r\n", 4))
			break;
	}
	head[hl] = '\0';
	int status = 0;
	if (sscanf(head, "HTTP/1.1 %d", &status) != 1)
		return -1;
	const char *cl = strcasestr(head, "Content-Length:");
	size_t len = cl ? strtoull(cl + 15, NULL, 10) : 0, got = 0;
	char tmp[65536];
	while (got < len) {
		size_t want = len - got < sizeof(tmp) ? len - got : sizeof(tmp);
		ssize_t r = recv(fd, tmp, want, 0);
		if (r <= 0)
			return -1;
		if (body && got < cap)
			memcpy(body + got, tmp, got + (size_t)r <= cap ? (size_t)r : cap - got);
		got += (size_t)r;
	}
	if (body)
		body[got < cap ? got : cap - 1] = '\0';
	if (body_len)
		*body_len = got;
	return status;
}

/* One request and its response on fd. */
static int roundtrip(int fd, const char *req, char *head, size_t hcap, char *body, size_t bcap)
{
	if (send_all(fd, req, strlen(req)) < 0)
		return -1;
	return read_response(fd, head, hcap, body, bcap, NULL);
}

/* True when the peer closes fd (EOF) before the receive timeout. */
static bool closed_by_peer(int fd)
{
	char b[4096];
	for (;;) {
		ssize_t r = recv(fd, b, sizeof(b), 0);
		if (r == 0)
			return true;
		if (r < 0)
			return false;
	}
}

/* ---------- the runner ---------- */

static void *runner_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char line[1100];
	size_t n = 0;
	while (n + 1 < sizeof(line)) {
		if (recv(fd, line + n, 1, 0) <= 0)
			goto out;
		if (line[n++] == '\n')
			break;
	}
	line[n] = '\0';
	char secret[128], target[128];
	if (sscanf(line, "TESSERA-APP/1 %127s %127s", secret, target) != 2) {
		send_all(fd, "ERROR bad line\r\n", 16);
		goto out;
	}
	if (strcmp(secret, APP_SECRET)) {
		send_all(fd, "ERROR bad secret\r\n", 18);
		goto out;
	}
	if (!strcmp(target, "app:starting")) {
		const char *a = "STARTING starting demo: waiting for port 8081\r\n";
		send_all(fd, a, strlen(a));
		goto out;
	}
	if (strcmp(target, "app:web") && strcmp(target, "app:terminal")) {
		const char *a = "ERROR no app named like that\r\n";
		send_all(fd, a, strlen(a));
		goto out;
	}
	send_all(fd, "OK\r\n", 4);
	/* HTTP: each request answered with what the runner saw. */
	for (;;) {
		char head[8192];
		size_t hl = 0;
		while (hl + 1 < sizeof(head)) {
			if (recv(fd, head + hl, 1, 0) <= 0)
				goto out;
			hl++;
			if (hl >= 4 && !memcmp(head + hl - 4, "\r\n\r\n", 4))
				break;
		}
		head[hl] = '\0';
		char method[16], path[512];
		if (sscanf(head, "%15s %511s", method, path) != 2)
			goto out;
		const char *cookie = strcasestr(head, "\r\nCookie:");
		char cookies[512] = "none";
		if (cookie)
			sscanf(cookie + 9, " %511[^\r]", cookies);
		/* The body: Content-Length or chunked, read whole. */
		char bodyb[4096] = "";
		size_t bl = 0;
		const char *cl = strcasestr(head, "Content-Length:");
		if (cl) {
			size_t len = strtoull(cl + 15, NULL, 10);
			while (bl < len && bl < sizeof(bodyb) - 1) {
				ssize_t r = recv(fd, bodyb + bl, len - bl, 0);
				if (r <= 0)
					goto out;
				bl += (size_t)r;
			}
		} else if (strcasestr(head, "chunked")) {
			/* Until the terminating "0\r\n\r\n" (test bodies are
			 * small and have no trailers). */
			char raw[4096];
			size_t rl = 0;
			while (rl < 5 || memcmp(raw + rl - 5, "0\r\n\r\n", 5)) {
				if (rl + 1 >= sizeof(raw) || recv(fd, raw + rl, 1, 0) <= 0)
					goto out;
				rl++;
			}
			/* Decode. */
			size_t i = 0;
			while (i < rl) {
				size_t sz = strtoul(raw + i, NULL, 16);
				i = (size_t)(strstr(raw + i, "\r\n") - raw) + 2;
				if (!sz)
					break;
				memcpy(bodyb + bl, raw + i, sz);
				bl += sz;
				i += sz + 2;
			}
		}
		bodyb[bl] = '\0';
		if (strcasestr(head, "\r\nUpgrade:")) {
			const char *a = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
			send_all(fd, a, strlen(a));
			/* Echo raw bytes until the proxy closes. */
			char b[4096];
			ssize_t r;
			while ((r = recv(fd, b, sizeof(b), 0)) > 0)
				if (send_all(fd, b, (size_t)r) < 0)
					break;
			/* The browser half-closed: a last word, then close. */
			send_all(fd, "bye", 3);
			goto out;
		}
		if (!strcmp(path, "/big")) {
			char h[128];
			int hn = snprintf(h, sizeof(h), "HTTP/1.1 200 OK\r\nContent-Length: %u\r\n\r\n", BIG_SIZE);
			send_all(fd, h, (size_t)hn);
			static char chunk[65536];
			memset(chunk, 'x', sizeof(chunk));
			for (size_t sent = 0; sent < BIG_SIZE; sent += sizeof(chunk))
				if (send_all(fd, chunk, sizeof(chunk)) < 0)
					goto out;
			continue;
		}
		char resp[8192];
		int rn = snprintf(resp, sizeof(resp), "%s %s %s cookie=%s body=%s", target, method, path, cookies, bodyb);
		char h[128];
		int hn = snprintf(h, sizeof(h), "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", rn);
		send_all(fd, h, (size_t)hn);
		send_all(fd, resp, (size_t)rn);
	}
out:
	close(fd);
	return NULL;
}

static void *runner_main(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			return NULL;
		pthread_t t;
		pthread_create(&t, NULL, runner_conn, (void *)(intptr_t)fd);
		pthread_detach(t);
	}
}

/* A runner behind Docker's userland proxy in the moment after its
 * container started: the published port accepts, and the first
 * connection is closed at once (nothing listens inside yet); then it
 * serves as the runner does. */
static void *late_runner_main(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	int fd = accept(lfd, NULL, NULL);
	if (fd >= 0)
		close(fd);
	return runner_main(arg);
}

/* The same runner at the container's address (the route's direct
 * path), counting the connections it takes. */
static void *direct_runner_main(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			return NULL;
		atomic_fetch_add(&direct_accepted, 1);
		pthread_t t;
		pthread_create(&t, NULL, runner_conn, (void *)(intptr_t)fd);
		pthread_detach(t);
	}
}

/* ---------- the manager ---------- */

static pthread_mutex_t mgr_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mgr_cv = PTHREAD_COND_INITIALIZER;
static json_t *mgr_routes;     /* the routes array served */
static json_t *mgr_users;      /* {"admins": [...], "disabled": [...]} served beside them, or NULL */
static long mgr_gen = 1;

static json_t *route(const char *session, const char *target, int port, const char *endpoint_port_host)
{
	char ep[160];
	snprintf(ep, sizeof(ep), "%s", endpoint_port_host);
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:s}", "session_id", session, "app", target + 4, "target", target,
			 "endpoint", ep, "secret", APP_SECRET, "port", port, "owner_id", "u1");
}

static int mgr_auth(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	char ak[64], sig[SIGN_HEX_LEN + 1];
	struct terr err = {0};
	const char *authz = httpd_header(req, "Authorization"), *date = httpd_header(req, "Date"),
		   *host = httpd_header(req, "Host");
	if (!authz || !date || !host || sign_parse_authorization(authz, ak, sizeof(ak), sig, &err) < 0 ||
	    strcmp(ak, "wsproxy") ||
	    sign_verify(SECRET, sig, req->method, req->target, date, host, req->body, req->body_len, time(NULL),
			&err) < 0) {
		httpd_error(resp, 401, "unauthenticated", "not signed as wsproxy");
		return -1;
	}
	return 0;
}

static void mgr_redeem(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	json_error_t je;
	json_t *b = json_loadb(req->body, req->body_len, 0, &je);
	const char *tok = json_string_value(json_object_get(b, "token"));
	if (tok && !strcmp(tok, GOOD_TOKEN)) {
		char ep[64];
		snprintf(ep, sizeof(ep), "127.0.0.1:%d", runner_port);
		json_t *r = route("s1", "app:web", proxy_ports_[0], ep);
		json_object_set_new(r, "user", json_string("u1"));
		httpd_json(resp, 200, r);
	} else {
		httpd_error(resp, 403, "forbidden", "this link was already used");
	}
	json_decref(b);
}

static void mgr_routes_get(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	const char *since = httpd_query(req, "since");
	long s = since ? atol(since) : 0;
	pthread_mutex_lock(&mgr_mu);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	while (mgr_gen == s && pthread_cond_timedwait(&mgr_cv, &mgr_mu, &ts) == 0)
		;
	json_t *doc = json_pack("{s:i, s:O}", "generation", mgr_gen, "routes", mgr_routes);
	if (mgr_users)
		json_object_update(doc, mgr_users);
	pthread_mutex_unlock(&mgr_mu);
	httpd_json(resp, 200, doc);
}

static const struct httpd_route mgr_api[] = {
	{"POST", "/v1/proxy/redeem", mgr_redeem, 0},
	{"GET", "/v1/proxy/routes", mgr_routes_get, 0},
};

/* Serves routes (stolen) as the next generation and waits until the proxy
 * applied it. */
static void set_routes_users(struct proxy *p, json_t *routes, json_t *users)
{
	pthread_mutex_lock(&mgr_mu);
	json_decref(mgr_routes);
	mgr_routes = routes;
	json_decref(mgr_users);
	mgr_users = users;
	long gen = ++mgr_gen;
	pthread_cond_broadcast(&mgr_cv);
	pthread_mutex_unlock(&mgr_mu);
	for (int i = 0; i < 3000; i++) {
		struct proxy_stats st;
		proxy_get_stats(p, &st);
		if ((long)st.routes_generation >= gen)
			return;
		usleep(10000);
	}
	FAILF("the proxy did not take routes generation %ld", gen);
}

static void set_routes(struct proxy *p, json_t *routes)
{
	set_routes_users(p, routes, NULL);
}

/* ---------- tests ---------- */

static struct proxy *px;
static char cookie_hdr[APPCOOKIE_MAX + 64];

static void make_cookie(char *out, size_t n, int port, const char *session, const char *target, int64_t expires)
{
	struct appcookie c = {.expires = expires};
	strcpy(c.user, "u1");
	strcpy(c.session_id, session);
	strcpy(c.target, target);
	snprintf(c.route, sizeof(c.route), "%d", port);
	char v[APPCOOKIE_MAX];
	struct terr err = {0};
	appcookie_sign(SECRET, &c, v, sizeof(v), &err);
	snprintf(out, n, "Cookie: other=1; tessera_app_%d=%s\r\n", port, v);
}

TEST(no_cookie_refused)
{
	int fd = connect_to(proxy_ports_[0]);
	char head[4096], body[8192];
	CHECK_INT(roundtrip(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", head, sizeof(head), body, sizeof(body)), 403);
	CHECK_CONTAINS(body, "session list");
	CHECK_CONTAINS(head, "text/html");
	close(fd);
}

/* Framing comes before the cookie (RFC 9112, 6.3): two Content-Length
 * headers that differ are 400 and the connection ends, with or without a
 * cookie, never the 403 of a missing one (issue 27, item 9). */
TEST(conflicting_lengths_refused_before_the_cookie)
{
	int fd = connect_to(proxy_ports_[0]);
	char head[4096], body[8192];
	CHECK_INT(roundtrip(fd, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 30\r\n\r\nabc",
			    head, sizeof(head), body, sizeof(body)), 400);
	CHECK_CONTAINS(body, "conflicting Content-Length");
	CHECK(closed_by_peer(fd));
	close(fd);
	fd = connect_to(proxy_ports_[0]);
	CHECK_INT(roundtrip(fd, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
			    head, sizeof(head), body, sizeof(body)), 400);
	CHECK(closed_by_peer(fd));
	close(fd);
}

TEST(setup_sets_cookie)
{
	int fd = connect_to(proxy_ports_[0]);
	char head[4096], body[8192];
	CHECK_INT(roundtrip(fd, "GET /__tessera/setup?token=" GOOD_TOKEN " HTTP/1.1\r\nHost: x\r\n\r\n", head,
			    sizeof(head), body, sizeof(body)), 302);
	char want[64];
	snprintf(want, sizeof(want), "Set-Cookie: tessera_app_%d=", proxy_ports_[0]);
	CHECK_CONTAINS(head, want);
	CHECK_CONTAINS(head, "HttpOnly");
	CHECK_CONTAINS(head, "SameSite=Lax");
	CHECK_CONTAINS(head, "Path=/");
	CHECK_CONTAINS(head, "Location: /\r\n");
	/* The cookie as the browser sends it back. */
	const char *v = strstr(head, want);
	if (v) {
		v += strlen("Set-Cookie: ");
		size_t vl = strcspn(v, ";");
		snprintf(cookie_hdr, sizeof(cookie_hdr), "Cookie: %.*s\r\n", (int)vl, v);
	}
	/* A used link: refused with the manager's reason. */
	CHECK_INT(roundtrip(fd, "GET /__tessera/setup?token=" USED_TOKEN " HTTP/1.1\r\nHost: x\r\n\r\n", head,
			    sizeof(head), body, sizeof(body)), 403);
	CHECK_CONTAINS(body, "already used");
	close(fd);
}

TEST(requests_relayed_and_each_checked)
{
	char req[4096], head[4096], body[8192];
	int fd = connect_to(proxy_ports_[0]);
	snprintf(req, sizeof(req), "GET /hello?x=1 HTTP/1.1\r\nHost: x\r\n%s\r\n", cookie_hdr);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 200);
	CHECK_CONTAINS(body, "app:web GET /hello?x=1");
	/* The proxy's cookie never reaches the app. */
	CHECK(!strstr(body, "tessera_app"));
	/* A second request on the same connection, with a chunked body. */
	snprintf(req, sizeof(req),
		 "POST /form HTTP/1.1\r\nHost: x\r\n%sTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
		 cookie_hdr);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 200);
	CHECK_CONTAINS(body, "app:web POST /form cookie=none body=hello world");
	/* A third without the cookie is refused, and the connection ends. */
	CHECK_INT(roundtrip(fd, "GET /sneaky HTTP/1.1\r\nHost: x\r\n\r\n", head, sizeof(head), body, sizeof(body)), 403);
	CHECK(closed_by_peer(fd));
	close(fd);
	/* Pipelined: both answered, in order. */
	fd = connect_to(proxy_ports_[0]);
	snprintf(req, sizeof(req), "GET /one HTTP/1.1\r\nHost: x\r\n%s\r\nGET /two HTTP/1.1\r\nHost: x\r\n%s\r\n",
		 cookie_hdr, cookie_hdr);
	send_all(fd, req, strlen(req));
	CHECK_INT(read_response(fd, head, sizeof(head), body, sizeof(body), NULL), 200);
	CHECK_CONTAINS(body, "GET /one");
	CHECK_INT(read_response(fd, head, sizeof(head), body, sizeof(body), NULL), 200);
	CHECK_CONTAINS(body, "GET /two");
	close(fd);
}

TEST(bad_cookies_refused)
{
	char req[4096], head[4096], body[8192], ck[APPCOOKIE_MAX + 64];
	int fd = connect_to(proxy_ports_[0]);
	make_cookie(ck, sizeof(ck), proxy_ports_[0], "s1", "app:web", (int64_t)time(NULL) - 10);
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", ck);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 403);
	CHECK_CONTAINS(body, "expired");
	/* Another port's cookie, sent under this port's name. */
	make_cookie(ck, sizeof(ck), proxy_ports_[1], "s1", "app:web", (int64_t)time(NULL) + 100);
	char renamed[APPCOOKIE_MAX + 64];
	char from[32], to[32];
	snprintf(from, sizeof(from), "tessera_app_%d", proxy_ports_[1]);
	snprintf(to, sizeof(to), "tessera_app_%d", proxy_ports_[0]);
	const char *at = strstr(ck, from);
	snprintf(renamed, sizeof(renamed), "%.*s%s%s", (int)(at - ck), ck, to, at + strlen(from));
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", renamed);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 403);
	CHECK_CONTAINS(body, "another app");
	/* A cookie for a session this route no longer serves. */
	make_cookie(ck, sizeof(ck), proxy_ports_[0], "s-old", "app:web", (int64_t)time(NULL) + 100);
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", ck);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 403);
	CHECK_CONTAINS(body, "ended");
	/* Malformed requests end the connection with 400. */
	CHECK_INT(roundtrip(fd, "GET / HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n", head, sizeof(head), body, sizeof(body)),
		  400);
	CHECK(closed_by_peer(fd));
	close(fd);
}

TEST(starting_and_errors)
{
	char req[4096], head[4096], body[8192], ck[APPCOOKIE_MAX + 64];
	int fd = connect_to(proxy_ports_[1]);
	make_cookie(ck, sizeof(ck), proxy_ports_[1], "s2", "app:starting", (int64_t)time(NULL) + 100);
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", ck);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 503);
	CHECK_CONTAINS(head, "Retry-After: 1\r\n");
	CHECK_CONTAINS(body, "http-equiv=\"refresh\" content=\"1\"");
	CHECK_CONTAINS(body, "waiting for port 8081");
	/* The connection stays usable. */
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 503);
	close(fd);
	fd = connect_to(proxy_ports_[2]);
	make_cookie(ck, sizeof(ck), proxy_ports_[2], "s3", "app:nope", (int64_t)time(NULL) + 100);
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", ck);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 502);
	CHECK_CONTAINS(body, "no app named like that");
	close(fd);
	fd = connect_to(proxy_ports_[3]);
	make_cookie(ck, sizeof(ck), proxy_ports_[3], "s4", "app:web", (int64_t)time(NULL) + 100);
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", ck);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 502);
	CHECK_CONTAINS(body, "does not answer");
	close(fd);
}

/* A runner that closes before answering is tried again (issue 28: a
 * shell opened right after the session became RUNNING got a 502). */
TEST(late_runner_tried_again)
{
	char req[4096], head[4096], body[8192], ck[APPCOOKIE_MAX + 64];
	int fd = connect_to(proxy_ports_[5]);
	make_cookie(ck, sizeof(ck), proxy_ports_[5], "s6", "app:web", (int64_t)time(NULL) + 100);
	snprintf(req, sizeof(req), "GET /late HTTP/1.1\r\nHost: x\r\n%s\r\n", ck);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 200);
	CHECK_CONTAINS(body, "GET /late");
	close(fd);
}

static int get_web(int port, const char *session)
{
	char req[4096], head[4096], body[8192], ck[APPCOOKIE_MAX + 64];
	int fd = connect_to(port);
	make_cookie(ck, sizeof(ck), port, session, "app:web", (int64_t)time(NULL) + 100);
	snprintf(req, sizeof(req), "GET /d HTTP/1.1\r\nHost: x\r\n%s\r\n", ck);
	int st = roundtrip(fd, req, head, sizeof(head), body, sizeof(body));
	if (st == 200 && !strstr(body, "GET /d"))
		st = -1;
	close(fd);
	return st;
}

/* Issue 30: the container's address when the route has one for this
 * host (its netns key is ours), the published port when it has none
 * usable: another host's key, or an address that does not answer. */
TEST(direct_path_used_and_fallback)
{
	/* s7: a direct path for this host: taken, twice (both requests). */
	int before = atomic_load(&direct_accepted);
	CHECK_INT(get_web(proxy_ports_[6], "s7"), 200);
	CHECK_INT(get_web(proxy_ports_[6], "s7"), 200);
	CHECK_INT(atomic_load(&direct_accepted) - before, 2);
	/* s8: the same address, another host's key: never dialled. */
	before = atomic_load(&direct_accepted);
	CHECK_INT(get_web(proxy_ports_[7], "s8"), 200);
	CHECK_INT(atomic_load(&direct_accepted), before);
	/* s9: an address nothing answers at (TEST-NET-1, RFC 5737): the
	 * published port, for this request and (remembered) the next. */
	CHECK_INT(get_web(proxy_ports_[8], "s9"), 200);
	CHECK_INT(get_web(proxy_ports_[8], "s9"), 200);
	/* s10: the address refuses (nothing listens there yet): the
	 * published port answers. */
	CHECK_INT(get_web(proxy_ports_[9], "s10"), 200);
	CHECK_INT(atomic_load(&direct_accepted), before);
	/* s11: not published, the direct path on this host: the only way,
	 * and taken. s12: not published, another host's: a 502 that says
	 * only a proxy on the session's node reaches it, and the route table
	 * (every other route of this answer) still taken. */
	CHECK_INT(get_web(proxy_ports_[10], "s11"), 200);
	CHECK_INT(atomic_load(&direct_accepted) - before, 1);
	CHECK_INT(get_web(proxy_ports_[11], "s12"), 502);
	CHECK_INT(get_web(proxy_ports_[0], "s1"), 200);
}

TEST(upgrade_relayed_raw)
{
	char req[4096], head[4096];
	int fd = connect_to(proxy_ports_[0]);
	snprintf(req, sizeof(req), "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n%s\r\n",
		 cookie_hdr);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), NULL, 0), 101);
	const char raw[] = "\x81\x05hello, any bytes \x00\xff";
	send_all(fd, raw, sizeof(raw) - 1);
	char got[64] = "";
	size_t n = 0;
	while (n < sizeof(raw) - 1) {
		ssize_t r = recv(fd, got + n, sizeof(raw) - 1 - n, 0);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	CHECK_INT(n, sizeof(raw) - 1);
	CHECK(!memcmp(got, raw, sizeof(raw) - 1));
	/* Half-close: the browser stops sending, the app's last bytes
	 * still arrive, then the end. */
	shutdown(fd, SHUT_WR);
	n = 0;
	while (n < 3) {
		ssize_t r = recv(fd, got + n, 3 - n, 0);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	CHECK_INT(n, 3);
	CHECK(!memcmp(got, "bye", 3));
	CHECK(closed_by_peer(fd));
	close(fd);
}

TEST(large_response_streams_bounded)
{
	char req[4096], head[4096];
	int fd = connect_to(proxy_ports_[0]);
	snprintf(req, sizeof(req), "GET /big HTTP/1.1\r\nHost: x\r\n%s\r\n", cookie_hdr);
	send_all(fd, req, strlen(req));
	size_t len = 0;
	/* Read slowly at first so the proxy has to hold the runner back. */
	usleep(200000);
	CHECK_INT(read_response(fd, head, sizeof(head), NULL, 0, &len), 200);
	CHECK_INT(len, BIG_SIZE);
	struct proxy_stats st;
	proxy_get_stats(px, &st);
	/* At most the high-water mark plus the reads in flight. */
	CHECK(st.peak_queued <= PROXY_HIGH_WATER + 4 * 65536);
	fprintf(stderr, "peak queued on one side: %zu bytes\n", st.peak_queued);
	close(fd);
}

TEST(terminal_page_served)
{
	char req[4096], head[4096], body[8192], ck[APPCOOKIE_MAX + 64];
	make_cookie(ck, sizeof(ck), proxy_ports_[4], "s5", "app:terminal", (int64_t)time(NULL) + 100);
	int fd = connect_to(proxy_ports_[4]);
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", ck);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 200);
	CHECK_STR(body, "<html>terminal</html>\n");
	CHECK_CONTAINS(head, "Content-Security-Policy: default-src 'self'");
	CHECK_CONTAINS(head, "connect-src 'self' ws://x wss://x;");
	/* terminal.html's script is inlined. */
	CHECK_CONTAINS(head, "script-src 'self' 'unsafe-inline';");
	snprintf(req, sizeof(req), "GET /assets/term.js HTTP/1.1\r\nHost: x\r\n%s\r\n", ck);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 200);
	CHECK_CONTAINS(head, "text/javascript");
	snprintf(req, sizeof(req), "GET /assets/../../etc/passwd HTTP/1.1\r\nHost: x\r\n%s\r\n", ck);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 404);
	snprintf(req, sizeof(req), "GET /missing.js HTTP/1.1\r\nHost: x\r\n%s\r\n", ck);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 404);
	/* Still the cookie check first. */
	CHECK_INT(roundtrip(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", head, sizeof(head), body, sizeof(body)), 403);
	close(fd);
	/* /ws goes to the runner. */
	fd = connect_to(proxy_ports_[4]);
	snprintf(req, sizeof(req), "GET /ws?term=main HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n%s\r\n", ck);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), NULL, 0), 101);
	close(fd);
}

/* CONNECT (the SSH tunnel, docs/apps.md): the cookie is checked first, as
 * for any request, and the terminal is never reached so. */
TEST(connect_checked_and_not_to_the_terminal)
{
	char req[4096], head[4096], body[8192], ck[APPCOOKIE_MAX + 64];
	int fd = connect_to(proxy_ports_[0]);
	CHECK_INT(roundtrip(fd, "CONNECT sshd HTTP/1.1\r\nHost: x\r\n\r\n", head, sizeof(head), body, sizeof(body)), 403);
	close(fd);
	make_cookie(ck, sizeof(ck), proxy_ports_[4], "s5", "app:terminal", (int64_t)time(NULL) + 100);
	fd = connect_to(proxy_ports_[4]);
	snprintf(req, sizeof(req), "CONNECT sshd HTTP/1.1\r\nHost: x\r\n%s\r\n", ck);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 400);
	CHECK_CONTAINS(body, "not reached by CONNECT");
	close(fd);
}

/* A disabled account (issue 27): its open connections end when the
 * manager says so, and its 12-hour cookie opens nothing after; a cookie
 * of a user who does not own the session passes only while that user is
 * an admin. */
TEST(disabled_user_cut_off)
{
	char req[4096], head[4096], body[8192], ep[64];
	snprintf(ep, sizeof(ep), "127.0.0.1:%d", runner_port);
	int fd = connect_to(proxy_ports_[0]);
	snprintf(req, sizeof(req), "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n%s\r\n", cookie_hdr);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), NULL, 0), 101);
	set_routes_users(px, json_pack("[o]", route("s1", "app:web", proxy_ports_[0], ep)),
			 json_pack("{s:[s], s:[]}", "disabled", "u1", "admins"));
	CHECK(closed_by_peer(fd));
	close(fd);
	fd = connect_to(proxy_ports_[0]);
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", cookie_hdr);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 403);
	CHECK_CONTAINS(body, "disabled");
	close(fd);
	/* Enabled again, on a session of u2's: not u1's to open... */
	json_t *other = route("s1", "app:web", proxy_ports_[0], ep);
	json_object_set_new(other, "owner_id", json_string("u2"));
	set_routes_users(px, json_pack("[O]", other), NULL);
	fd = connect_to(proxy_ports_[0]);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 403);
	close(fd);
	/* ... unless u1 is an admin. */
	set_routes_users(px, json_pack("[o]", other), json_pack("{s:[s]}", "admins", "u1"));
	fd = connect_to(proxy_ports_[0]);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 200);
	close(fd);
	set_routes(px, json_pack("[o]", route("s1", "app:web", proxy_ports_[0], ep)));
}

TEST(route_removal_closes)
{
	char req[4096], head[4096];
	int fd = connect_to(proxy_ports_[0]);
	snprintf(req, sizeof(req), "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n%s\r\n", cookie_hdr);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), NULL, 0), 101);
	int fd2 = connect_to(proxy_ports_[0]);
	snprintf(req, sizeof(req), "GET /keep HTTP/1.1\r\nHost: x\r\n%s\r\n", cookie_hdr);
	char body[8192];
	CHECK_INT(roundtrip(fd2, req, head, sizeof(head), body, sizeof(body)), 200);
	/* The session ends: its route goes. */
	set_routes(px, json_array());
	CHECK(closed_by_peer(fd));
	CHECK(closed_by_peer(fd2));
	close(fd);
	close(fd2);
	fd = connect_to(proxy_ports_[0]);
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\n%s\r\n", cookie_hdr);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 403);
	CHECK_CONTAINS(body, "ended");
	close(fd);
}

/* Host mode: one port, routes by Host, routes injected with the test
 * hook (no manager). */
TEST(host_mode_routing)
{
	struct proxy_config pc = {.cluster_secret = SECRET, .bind = "127.0.0.1", .domain = "example.org",
				  .listen_port = 0};
	struct proxy *hp = NULL;
	struct terr err = {0};
	CHECK_INT(proxy_start(&pc, &hp, &err), 0);
	if (!hp)
		return;
	int port;
	proxy_ports(hp, &port, 1);
	char ep[64];
	snprintf(ep, sizeof(ep), "127.0.0.1:%d", runner_port);
	json_t *r = route("s7", "app:web", 0, ep);
	json_object_del(r, "port");
	json_object_set_new(r, "host", json_string("web.s7s7s7s7.apps.example.org"));
	json_t *doc = json_pack("{s:i, s:[o]}", "generation", 3, "routes", r);
	CHECK_INT(proxy_set_routes(hp, doc, &err), 0);
	json_decref(doc);
	struct appcookie c = {.expires = (int64_t)time(NULL) + 100};
	strcpy(c.user, "u1");
	strcpy(c.session_id, "s7");
	strcpy(c.target, "app:web");
	strcpy(c.route, "web.s7s7s7s7.apps.example.org");
	char v[APPCOOKIE_MAX], req[4096], head[4096], body[8192];
	appcookie_sign(SECRET, &c, v, sizeof(v), &err);
	int fd = connect_to(port);
	snprintf(req, sizeof(req), "GET /h HTTP/1.1\r\nHost: WEB.s7s7s7s7.apps.example.org:%d\r\nCookie: tessera_app=%s\r\n\r\n",
		 port, v);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 200);
	CHECK_CONTAINS(body, "app:web GET /h");
	close(fd);
	/* The same cookie on another app's host. */
	fd = connect_to(port);
	snprintf(req, sizeof(req), "GET /h HTTP/1.1\r\nHost: other.s7s7s7s7.apps.example.org\r\nCookie: tessera_app=%s\r\n\r\n",
		 v);
	CHECK_INT(roundtrip(fd, req, head, sizeof(head), body, sizeof(body)), 403);
	CHECK_CONTAINS(body, "another app");
	close(fd);
	/* No manager: a setup link cannot be checked. */
	fd = connect_to(port);
	CHECK_INT(roundtrip(fd, "GET /__tessera/setup?token=" GOOD_TOKEN " HTTP/1.1\r\nHost: web.s7s7s7s7.apps.example.org\r\n\r\n",
			    head, sizeof(head), body, sizeof(body)), 502);
	close(fd);
	proxy_stop(hp);
}

static char busy_murl[64];

/* A port of the range held by someone else stops the proxy with a message
 * naming it: the manager would hand that port out all the same. */
TEST(busy_port_refused)
{
	int busy_port = 0;
	int busy = listen_any(&busy_port);
	struct proxy_config pc = {.manager = busy_murl, .cluster_secret = SECRET, .bind = "127.0.0.1",
				  .port_lo = busy_port, .port_hi = busy_port + 1, .ui_dir = ui_dir};
	struct proxy *bp = NULL;
	struct terr err = {0};
	CHECK_INT(proxy_start(&pc, &bp, &err), -EADDRINUSE);
	CHECK(bp == NULL);
	char want[32];
	snprintf(want, sizeof(want), "port %d ", busy_port);
	CHECK(strstr(err.msg, want) != NULL);
	CHECK(strstr(err.msg, "in use") != NULL);
	close(busy);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	/* The runner, and a port where nothing listens. */
	int rfd = listen_any(&runner_port);
	pthread_t rt;
	pthread_create(&rt, NULL, runner_main, (void *)(intptr_t)rfd);
	int dfd = listen_any(&dead_port);
	close(dfd);
	int lfd = listen_any(&late_port);
	pthread_t lt;
	pthread_create(&lt, NULL, late_runner_main, (void *)(intptr_t)lfd);
	int xfd = listen_any(&direct_port);
	pthread_t xt;
	pthread_create(&xt, NULL, direct_runner_main, (void *)(intptr_t)xfd);
	/* The UI build with a terminal page. */
	snprintf(ui_dir, sizeof(ui_dir), "/tmp/tessera-proxy-test-%d", (int)getpid());
	char path[512];
	snprintf(path, sizeof(path), "%s/assets", ui_dir);
	struct terr err = {0};
	util_mkdir_p(path, 0700, &err);
	snprintf(path, sizeof(path), "%s/terminal.html", ui_dir);
	FILE *f = fopen(path, "w");
	fputs("<html>terminal</html>\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/assets/term.js", ui_dir);
	f = fopen(path, "w");
	fputs("console.log(1)\n", f);
	fclose(f);
	/* The manager. */
	mgr_routes = json_array();
	struct httpd_config hc = {.listen = "127.0.0.1:0", .routes = mgr_api, .n_routes = 2, .max_body = 4096,
				  .authenticate = mgr_auth};
	struct httpd *mgr = NULL;
	if (httpd_start(&hc, &mgr, &err) < 0) {
		fprintf(stderr, "manager: %s\n", err.msg);
		return 1;
	}
	char murl[64];
	snprintf(murl, sizeof(murl), "http://127.0.0.1:%d", httpd_port(mgr));
	snprintf(busy_murl, sizeof(busy_murl), "%s", murl);
	/* The proxy on 16 ports of a range picked at random below the
	 * ephemeral ports; another range when one of them is taken. */
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	int lo = 0;
	for (int tries = 0; tries < 50 && !px; tries++) {
		lo = 20000 + rand() % 12000;
		struct proxy_config pc = {.manager = murl, .cluster_secret = SECRET, .bind = "127.0.0.1",
					  .port_lo = lo, .port_hi = lo + 15, .ui_dir = ui_dir};
		if (proxy_start(&pc, &px, &err) < 0 && err.code != EADDRINUSE) {
			fprintf(stderr, "proxy: %s\n", err.msg);
			return 1;
		}
	}
	if (!px || proxy_ports(px, proxy_ports_, 12) < 12) {
		fprintf(stderr, "no 16 free ports for the proxy\n");
		return 1;
	}
	char ep[64], dead[64], late[64], key[UTIL_NETNS_KEY_LEN + 1];
	snprintf(ep, sizeof(ep), "127.0.0.1:%d", runner_port);
	snprintf(dead, sizeof(dead), "127.0.0.1:%d", dead_port);
	snprintf(late, sizeof(late), "127.0.0.1:%d", late_port);
	util_netns_key(key);
	if (!key[0]) {
		fprintf(stderr, "no netns key (/proc not mounted?)\n");
		return 1;
	}
	/* Published port, then the direct path (docs/apps.md). */
	char direct[160], other_host[160], nowhere[160], refused[160], only_direct[160], only_other[160];
	snprintf(direct, sizeof(direct), "%s,127.0.0.1:%d@%s", ep, direct_port, key);
	snprintf(other_host, sizeof(other_host), "%s,127.0.0.1:%d@%016x", ep, direct_port, 0x5eed);
	snprintf(nowhere, sizeof(nowhere), "%s,192.0.2.1:7611@%s", ep, key);
	snprintf(refused, sizeof(refused), "%s,127.0.0.1:%d@%s", ep, dead_port, key);
	/* Not published (the node's app_publish is no): the direct part only. */
	snprintf(only_direct, sizeof(only_direct), ",127.0.0.1:%d@%s", direct_port, key);
	snprintf(only_other, sizeof(only_other), ",127.0.0.1:%d@%016x", direct_port, 0x5eed);
	set_routes(px, json_pack("[o, o, o, o, o, o, o, o, o, o, o, o]", route("s1", "app:web", proxy_ports_[0], ep),
				 route("s2", "app:starting", proxy_ports_[1], ep),
				 route("s3", "app:nope", proxy_ports_[2], ep), route("s4", "app:web", proxy_ports_[3], dead),
				 route("s5", "app:terminal", proxy_ports_[4], ep),
				 route("s6", "app:web", proxy_ports_[5], late),
				 route("s7", "app:web", proxy_ports_[6], direct),
				 route("s8", "app:web", proxy_ports_[7], other_host),
				 route("s9", "app:web", proxy_ports_[8], nowhere),
				 route("s10", "app:web", proxy_ports_[9], refused),
				 route("s11", "app:web", proxy_ports_[10], only_direct),
				 route("s12", "app:web", proxy_ports_[11], only_other)));
	RUN(busy_port_refused);
	RUN(no_cookie_refused);
	RUN(conflicting_lengths_refused_before_the_cookie);
	RUN(setup_sets_cookie);
	RUN(requests_relayed_and_each_checked);
	RUN(bad_cookies_refused);
	RUN(starting_and_errors);
	RUN(late_runner_tried_again);
	RUN(direct_path_used_and_fallback);
	RUN(upgrade_relayed_raw);
	RUN(large_response_streams_bounded);
	RUN(terminal_page_served);
	RUN(connect_checked_and_not_to_the_terminal);
	RUN(disabled_user_cut_off);
	RUN(route_removal_closes);
	RUN(host_mode_routing);
	proxy_stop(px);
	httpd_stop(mgr);
	json_decref(mgr_routes);
	json_decref(mgr_users);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ui_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", ui_dir);
	return testlib_done();
}
