/* The webserver against a real manager (no agent needed): static files,
 * password login, cookie attributes, the signed relay, CSRF and Origin
 * checks, the manager's login route guard and rate limit, users admin,
 * logout. Responses are read from a raw socket so headers can be checked. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "common/conf.h"
#include "common/httpc.h"
#include "common/sign.h"
#include "common/util.h"
#include "manager/manager.h"
#include "testlib.h"
#include "web/webserver.h"

#define SECRET "0123456789abcdef0123456789abcdef"

static struct manager *mgr;
static struct web *web;
static int web_port_n, mgr_port_n;
static char admin_password[64];
static char tmpdir[] = "/tmp/tessera-test-web.XXXXXX";

struct reply {
	int status;
	char *head;   /* status line + headers */
	char *body;
};

static void reply_free(struct reply *r)
{
	free(r->head);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/* The Host header http() sends when set; else 127.0.0.1:PORT. */
static const char *host_override;

/* One HTTP/1.1 request with Connection: close; extra is "Name: v\r\n"... */
static struct reply http(int port, const char *method, const char *path, const char *extra, const char *body)
{
	struct reply r = {0};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return r;
	}
	char *req = NULL;
	size_t blen = body ? strlen(body) : 0;
	char host[300];
	if (host_override)
		snprintf(host, sizeof(host), "%s", host_override);
	else
		snprintf(host, sizeof(host), "127.0.0.1:%d", port);
	int n = asprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%sContent-Length: %zu\r\n\r\n%s",
			 method, path, host, extra ? extra : "", blen, body ? body : "");
	if (n > 0 && write(fd, req, (size_t)n) != n)
		n = -1;
	free(req);
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 8192;
			buf = realloc(buf, cap);
		}
		ssize_t k = read(fd, buf + len, cap - len - 1);
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	close(fd);
	if (!buf)
		return r;
	buf[len] = '\0';
	char *sep = strstr(buf, "\r\n\r\n");
	if (sep) {
		*sep = '\0';
		r.body = strdup(sep + 4);
	}
	r.head = buf;
	sscanf(buf, "HTTP/1.%*d %d", &r.status);
	return r;
}

/* Value of a response header (first match), into out. */
static const char *hdr(const struct reply *r, const char *name, char *out, size_t n)
{
	out[0] = '\0';
	size_t nl = strlen(name);
	for (const char *p = r->head; p && (p = strstr(p, "\r\n")); ) {
		p += 2;
		if (!strncasecmp(p, name, nl) && p[nl] == ':') {
			const char *v = p + nl + 1;
			while (*v == ' ')
				v++;
			size_t k = strcspn(v, "\r\n");
			snprintf(out, n, "%.*s", (int)k, v);
			return out;
		}
	}
	return NULL;
}

/* Logs in; fills cookie header line ("Cookie: ...\r\n") and CSRF token. */
static int login(const char *email, const char *password, char *cookie, size_t cn, char *csrf, size_t tn)
{
	char body[512];
	snprintf(body, sizeof(body), "{\"email\":\"%s\",\"password\":\"%s\"}", email, password);
	struct reply r = http(web_port_n, "POST", "/auth/login", "Content-Type: application/json\r\n", body);
	int status = r.status;
	char sc[512];
	if (status == 200 && hdr(&r, "Set-Cookie", sc, sizeof(sc))) {
		snprintf(cookie, cn, "Cookie: %.*s\r\n", (int)strcspn(sc, ";"), sc);
		json_t *j = json_loads(r.body, 0, NULL);
		snprintf(csrf, tn, "%s", json_string_value(json_object_get(j, "csrf_token")));
		json_decref(j);
	}
	reply_free(&r);
	return status;
}

TEST(serves_the_ui_with_security_headers)
{
	char v[512];
	struct reply r = http(web_port_n, "GET", "/", NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECK_CONTAINS(hdr(&r, "Content-Type", v, sizeof(v)), "text/html");
	CHECK_CONTAINS(hdr(&r, "Content-Security-Policy", v, sizeof(v)), "default-src 'self'");
	CHECK_STR(hdr(&r, "X-Frame-Options", v, sizeof(v)), "DENY");
	CHECK_CONTAINS(r.body, "<title>t</title>");
	reply_free(&r);
	r = http(web_port_n, "GET", "/sessions", NULL, NULL);   /* a client route */
	CHECK_INT(r.status, 200);
	CHECK_CONTAINS(r.body, "<title>t</title>");
	reply_free(&r);
	r = http(web_port_n, "GET", "/assets/app.js", NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECK_CONTAINS(hdr(&r, "Content-Type", v, sizeof(v)), "text/javascript");
	CHECK_CONTAINS(hdr(&r, "Cache-Control", v, sizeof(v)), "immutable");
	reply_free(&r);
	r = http(web_port_n, "GET", "/assets/nope.js", NULL, NULL);
	CHECK_INT(r.status, 404);
	reply_free(&r);
	r = http(web_port_n, "GET", "/assets/../../../etc/passwd", NULL, NULL);
	CHECK(!r.body || !strstr(r.body, "root:"));
	reply_free(&r);
}

TEST(login_sets_a_strict_httponly_cookie)
{
	char body[256], v[512];
	snprintf(body, sizeof(body), "{\"email\":\"Admin@Tessera.local\",\"password\":\"%s\"}", admin_password);
	struct reply r = http(web_port_n, "POST", "/auth/login", "Content-Type: application/json\r\n", body);
	CHECK_INT(r.status, 200);
	CHECK(hdr(&r, "Set-Cookie", v, sizeof(v)) != NULL);
	CHECK_CONTAINS(v, "tessera_session=");
	CHECK_CONTAINS(v, "HttpOnly");
	CHECK_CONTAINS(v, "SameSite=Strict");
	CHECK_CONTAINS(v, "Path=/");
	CHECK(!strstr(v, "Secure"));   /* plain HTTP here */
	CHECK_CONTAINS(r.body, "\"csrf_token\"");
	CHECK_CONTAINS(r.body, "admin@tessera.local");
	CHECK(!strstr(r.body, "secret_key"));
	reply_free(&r);
}

/* The web UI reached on the host session apps are served on (the
 * manager's wsproxy_url, here its default 127.0.0.2): a login there would
 * leave a cookie the browser sends to every app, so it is refused, and a
 * login made elsewhere is not served there either. */
TEST(no_login_on_the_apps_host)
{
	char body[256], v[512], cookie[600], csrf[128];
	snprintf(body, sizeof(body), "{\"email\":\"admin@tessera.local\",\"password\":\"%s\"}", admin_password);
	char apps_host[64];
	snprintf(apps_host, sizeof(apps_host), "127.0.0.2:%d", web_port_n);
	host_override = apps_host;
	struct reply r = http(web_port_n, "POST", "/auth/login", "Content-Type: application/json\r\n", body);
	host_override = NULL;
	CHECK_INT(r.status, 421);
	CHECK(hdr(&r, "Set-Cookie", v, sizeof(v)) == NULL);
	CHECK_CONTAINS(r.body, "where session apps are served");
	CHECK_CONTAINS(r.body, "wsproxy_url");
	reply_free(&r);
	/* Upper case and no port are the same host. */
	host_override = "127.0.0.2";
	r = http(web_port_n, "POST", "/auth/login", "Content-Type: application/json\r\n", body);
	host_override = NULL;
	CHECK_INT(r.status, 421);
	reply_free(&r);
	CHECK_INT(login("admin@tessera.local", admin_password, cookie, sizeof(cookie), csrf, sizeof(csrf)), 200);
	host_override = apps_host;
	r = http(web_port_n, "GET", "/auth/me", cookie, NULL);
	host_override = NULL;
	CHECK_INT(r.status, 421);
	reply_free(&r);
	r = http(web_port_n, "GET", "/auth/me", cookie, NULL);
	CHECK_INT(r.status, 200);
	reply_free(&r);
}

TEST(wrong_or_malformed_logins_are_refused)
{
	char v[512];
	struct reply r = http(web_port_n, "POST", "/auth/login", "Content-Type: application/json\r\n",
			      "{\"email\":\"admin@tessera.local\",\"password\":\"wrong-password\"}");
	CHECK_INT(r.status, 401);
	CHECK_CONTAINS(r.body, "wrong email or password");
	CHECK(hdr(&r, "Set-Cookie", v, sizeof(v)) == NULL);
	reply_free(&r);
	r = http(web_port_n, "POST", "/auth/login", "Content-Type: application/json\r\n",
		 "{\"email\":\"nobody@example.org\",\"password\":\"whatever1\"}");
	CHECK_INT(r.status, 401);
	CHECK_CONTAINS(r.body, "wrong email or password");   /* same words: no user oracle */
	reply_free(&r);
	/* A cross-site form cannot send JSON: form-encoded logins are refused. */
	r = http(web_port_n, "POST", "/auth/login", "Content-Type: application/x-www-form-urlencoded\r\n",
		 "email=a&password=b");
	CHECK_INT(r.status, 415);
	reply_free(&r);
	r = http(web_port_n, "POST", "/auth/login", "Content-Type: application/json\r\n", "{}");
	CHECK_INT(r.status, 400);
	reply_free(&r);
}

TEST(manager_login_route_needs_the_web_secret)
{
	const char *body = "{\"email\":\"admin@tessera.local\",\"password\":\"x\"}";
	struct reply r = http(mgr_port_n, "POST", "/v1/auth/login", "Content-Type: application/json\r\n", body);
	CHECK_INT(r.status, 403);
	reply_free(&r);
	r = http(mgr_port_n, "POST", "/v1/auth/login",
		 "Content-Type: application/json\r\nX-Tessera-Web-Secret: not-the-secret-at-all\r\n", body);
	CHECK_INT(r.status, 403);
	reply_free(&r);
	char extra[256], good[256];
	snprintf(extra, sizeof(extra), "Content-Type: application/json\r\nX-Tessera-Web-Secret: %s\r\n", SECRET);
	snprintf(good, sizeof(good), "{\"email\":\"admin@tessera.local\",\"password\":\"%s\"}", admin_password);
	r = http(mgr_port_n, "POST", "/v1/auth/login", extra, good);
	CHECK_INT(r.status, 200);
	CHECK_CONTAINS(r.body, "\"secret_key\"");
	reply_free(&r);
}

TEST(relay_signs_for_the_logged_in_user)
{
	char cookie[256], csrf[80];
	CHECK_INT(login("admin@tessera.local", admin_password, cookie, sizeof(cookie), csrf, sizeof(csrf)), 200);
	struct reply r = http(web_port_n, "GET", "/api/v1/auth/whoami", cookie, NULL);
	CHECK_INT(r.status, 200);
	CHECK_CONTAINS(r.body, "admin@tessera.local");
	reply_free(&r);
	r = http(web_port_n, "GET", "/api/v1/sessions?all=1", cookie, NULL);   /* query kept in the signature */
	CHECK_INT(r.status, 200);
	CHECK_CONTAINS(r.body, "\"sessions\"");
	reply_free(&r);
	r = http(web_port_n, "GET", "/api/v1/auth/whoami", NULL, NULL);
	CHECK_INT(r.status, 401);
	reply_free(&r);
	r = http(web_port_n, "GET", "/api/v1/auth/whoami", "Cookie: tessera_session=0000000000000000000000000000000000000000000000000000000000000000\r\n", NULL);
	CHECK_INT(r.status, 401);
	reply_free(&r);
	/* Cluster routes are not reachable through the webserver. */
	r = http(web_port_n, "GET", "/api/v1/agents/x/heartbeat", cookie, NULL);
	CHECK_INT(r.status, 404);
	reply_free(&r);
}

/* One login used by several connections at once, as a browser's tabs do:
 * each request thread reads the login table and the user it holds (under
 * ThreadSanitizer, suite tsan, this is where sharing them would show). */
struct burst {
	pthread_t th;
	const char *cookie;
	int ok, failed;
};

static void *burst_main(void *arg)
{
	struct burst *b = arg;
	for (int i = 0; i < 10; i++) {
		struct reply r = http(web_port_n, "GET", i % 2 ? "/auth/me" : "/api/v1/auth/whoami", b->cookie, NULL);
		if (r.status == 200 && r.body && strstr(r.body, "admin@tessera.local"))
			b->ok++;
		else
			b->failed++;
		reply_free(&r);
	}
	return NULL;
}

TEST(one_login_serves_concurrent_requests)
{
	char cookie[256], csrf[80];
	CHECK_INT(login("admin@tessera.local", admin_password, cookie, sizeof(cookie), csrf, sizeof(csrf)), 200);
	struct burst b[4];
	for (int i = 0; i < 4; i++) {
		b[i] = (struct burst){.cookie = cookie};
		CHECK_INT(pthread_create(&b[i].th, NULL, burst_main, &b[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(b[i].th, NULL);
		CHECK_INT(b[i].ok, 10);
		CHECK_INT(b[i].failed, 0);
	}
}

TEST(writes_need_the_csrf_token_and_same_origin)
{
	char cookie[256], csrf[80], extra[512];
	CHECK_INT(login("admin@tessera.local", admin_password, cookie, sizeof(cookie), csrf, sizeof(csrf)), 200);
	const char *body = "{\"email\":\"carol@example.org\"}";
	snprintf(extra, sizeof(extra), "%sContent-Type: application/json\r\n", cookie);
	struct reply r = http(web_port_n, "POST", "/api/v1/users", extra, body);
	CHECK_INT(r.status, 403);
	CHECK_CONTAINS(r.body, "CSRF");
	reply_free(&r);
	snprintf(extra, sizeof(extra), "%sContent-Type: application/json\r\nX-CSRF-Token: %s\r\nOrigin: http://evil.example\r\n",
		 cookie, csrf);
	r = http(web_port_n, "POST", "/api/v1/users", extra, body);
	CHECK_INT(r.status, 403);
	CHECK_CONTAINS(r.body, "cross-site");
	reply_free(&r);
	snprintf(extra, sizeof(extra), "%sContent-Type: application/json\r\nX-CSRF-Token: %s\r\nOrigin: http://127.0.0.1:%d\r\n",
		 cookie, csrf, web_port_n);
	r = http(web_port_n, "POST", "/api/v1/users", extra, body);
	CHECK_INT(r.status, 201);
	CHECK_CONTAINS(r.body, "\"password\"");         /* generated, shown once */
	CHECK(r.body && !strstr(r.body, "secret_key"));  /* never to a browser */
	reply_free(&r);
}

/* Logs and exec are relayed as streams; the manager's status, type and
 * error body come through as they are (the streams themselves: e2e). */
TEST(logs_and_exec_are_relayed_with_the_managers_answer)
{
	char cookie[256], csrf[80], extra[512];
	CHECK_INT(login("admin@tessera.local", admin_password, cookie, sizeof(cookie), csrf, sizeof(csrf)), 200);
	struct reply r = http(web_port_n, "GET", "/api/v1/sessions/nope/logs?tail=5&follow=1", cookie, NULL);
	CHECK_INT(r.status, 404);
	CHECK_CONTAINS(r.body, "no session named or with id 'nope'");
	char v[128];
	CHECK_CONTAINS(hdr(&r, "Content-Type", v, sizeof(v)) ?: "", "application/json");
	reply_free(&r);
	r = http(web_port_n, "GET", "/api/v1/sessions/nope/logs?tail=x", cookie, NULL);
	CHECK_INT(r.status, 400);
	CHECK_CONTAINS(r.body, "tail must be");
	reply_free(&r);
	snprintf(extra, sizeof(extra), "%sContent-Type: application/json\r\nX-CSRF-Token: %s\r\nOrigin: http://127.0.0.1:%d\r\n",
		 cookie, csrf, web_port_n);
	r = http(web_port_n, "POST", "/api/v1/sessions/nope/exec", extra, "{\"command\":[\"true\"]}");
	CHECK_INT(r.status, 404);
	CHECK_CONTAINS(r.body, "no session named or with id 'nope'");
	reply_free(&r);
	r = http(web_port_n, "POST", "/api/v1/sessions/nope/exec", extra, "{\"command\":[]}");
	CHECK_INT(r.status, 400);
	CHECK_CONTAINS(r.body, "command must be");
	reply_free(&r);
	/* A write still needs the CSRF token. */
	snprintf(extra, sizeof(extra), "%sContent-Type: application/json\r\n", cookie);
	r = http(web_port_n, "POST", "/api/v1/sessions/nope/exec", extra, "{\"command\":[\"true\"]}");
	CHECK_INT(r.status, 403);
	reply_free(&r);
}

TEST(users_admin_validates_and_is_admin_only)
{
	char cookie[256], csrf[80], extra[512];
	CHECK_INT(login("admin@tessera.local", admin_password, cookie, sizeof(cookie), csrf, sizeof(csrf)), 200);
	snprintf(extra, sizeof(extra), "%sContent-Type: application/json\r\nX-CSRF-Token: %s\r\n", cookie, csrf);
	struct reply r = http(web_port_n, "POST", "/api/v1/users", extra, "{\"email\":\"not-an-email\"}");
	CHECK_INT(r.status, 400);
	CHECK_CONTAINS(r.body, "email");
	reply_free(&r);
	r = http(web_port_n, "POST", "/api/v1/users", extra, "{\"email\":\"dave@example.org\",\"password\":\"short\"}");
	CHECK_INT(r.status, 400);
	CHECK_CONTAINS(r.body, "8 to 256");
	reply_free(&r);
	r = http(web_port_n, "POST", "/api/v1/users", extra, "{\"email\":\"dave@example.org\",\"password\":\"dave-pass-1\",\"x\":1}");
	CHECK_INT(r.status, 400);
	CHECK_CONTAINS(r.body, "unknown field");
	reply_free(&r);
	r = http(web_port_n, "POST", "/api/v1/users", extra, "{\"email\":\"dave@example.org\",\"password\":\"dave-pass-1\"}");
	CHECK_INT(r.status, 201);
	json_t *j = json_loads(r.body, 0, NULL);
	char id[64];
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(json_object_get(j, "user"), "id")));
	json_decref(j);
	reply_free(&r);
	r = http(web_port_n, "POST", "/api/v1/users", extra, "{\"email\":\"DAVE@example.org\"}");
	CHECK_INT(r.status, 409);
	reply_free(&r);

	/* dave is no admin. */
	char dcookie[256], dcsrf[80];
	CHECK_INT(login("dave@example.org", "dave-pass-1", dcookie, sizeof(dcookie), dcsrf, sizeof(dcsrf)), 200);
	r = http(web_port_n, "GET", "/api/v1/users", dcookie, NULL);
	CHECK_INT(r.status, 403);
	reply_free(&r);

	/* Reset dave's password, then disable him. */
	char path[128];
	snprintf(path, sizeof(path), "/api/v1/users/%s", id);
	r = http(web_port_n, "PATCH", path, extra, "{\"password\":\"dave-pass-2\"}");
	CHECK_INT(r.status, 200);
	reply_free(&r);
	CHECK_INT(login("dave@example.org", "dave-pass-1", dcookie, sizeof(dcookie), dcsrf, sizeof(dcsrf)), 401);
	CHECK_INT(login("dave@example.org", "dave-pass-2", dcookie, sizeof(dcookie), dcsrf, sizeof(dcsrf)), 200);
	r = http(web_port_n, "PATCH", path, extra, "{\"disabled\":\"yes\"}");
	CHECK_INT(r.status, 400);
	reply_free(&r);
	r = http(web_port_n, "PATCH", path, extra, "{\"disabled\":true}");
	CHECK_INT(r.status, 200);
	reply_free(&r);
	CHECK_INT(login("dave@example.org", "dave-pass-2", dcookie, sizeof(dcookie), dcsrf, sizeof(dcsrf)), 403);
	r = http(web_port_n, "PATCH", "/api/v1/users/nobody", extra, "{\"disabled\":true}");
	CHECK_INT(r.status, 404);
	reply_free(&r);
}

TEST(failed_logins_are_rate_limited_per_email)
{
	char cookie[256], csrf[80], extra[512];
	CHECK_INT(login("admin@tessera.local", admin_password, cookie, sizeof(cookie), csrf, sizeof(csrf)), 200);
	snprintf(extra, sizeof(extra), "%sContent-Type: application/json\r\nX-CSRF-Token: %s\r\n", cookie, csrf);
	struct reply r = http(web_port_n, "POST", "/api/v1/users", extra,
			      "{\"email\":\"erin@example.org\",\"password\":\"erin-pass-1\"}");
	CHECK_INT(r.status, 201);
	reply_free(&r);
	for (int i = 0; i < 5; i++)
		CHECK_INT(login("erin@example.org", "wrong-pass", cookie, sizeof(cookie), csrf, sizeof(csrf)), 401);
	/* Even the right password now waits. */
	r = http(web_port_n, "POST", "/auth/login", "Content-Type: application/json\r\n",
		 "{\"email\":\"erin@example.org\",\"password\":\"erin-pass-1\"}");
	CHECK_INT(r.status, 429);
	CHECK_CONTAINS(r.body, "too many failed logins");
	reply_free(&r);
}

/* The lock is per account and address: failures from an attacker's
 * address lock that address out of the account, and the owner still
 * gets in from theirs (the webserver names the browser's address in
 * X-Tessera-Client-Addr; here the manager's route is called as it does). */
TEST(a_login_lock_holds_one_address_not_the_account)
{
	char cookie[256], csrf[80], extra[512];
	CHECK_INT(login("admin@tessera.local", admin_password, cookie, sizeof(cookie), csrf, sizeof(csrf)), 200);
	snprintf(extra, sizeof(extra), "%sContent-Type: application/json\r\nX-CSRF-Token: %s\r\n", cookie, csrf);
	struct reply r = http(web_port_n, "POST", "/api/v1/users", extra,
			      "{\"email\":\"fay@example.org\",\"password\":\"fay-pass-1\"}");
	CHECK_INT(r.status, 201);
	reply_free(&r);
	char attacker[256], owner[256];
	snprintf(attacker, sizeof(attacker), "Content-Type: application/json\r\nX-Tessera-Web-Secret: %s\r\n"
		 "X-Tessera-Client-Addr: 203.0.113.66\r\n", SECRET);
	snprintf(owner, sizeof(owner), "Content-Type: application/json\r\nX-Tessera-Web-Secret: %s\r\n"
		 "X-Tessera-Client-Addr: 198.51.100.7\r\n", SECRET);
	const char *wrong = "{\"email\":\"fay@example.org\",\"password\":\"guess\"}";
	const char *right = "{\"email\":\"fay@example.org\",\"password\":\"fay-pass-1\"}";
	for (int i = 0; i < 5; i++) {
		r = http(mgr_port_n, "POST", "/v1/auth/login", attacker, wrong);
		CHECK_INT(r.status, 401);
		reply_free(&r);
	}
	r = http(mgr_port_n, "POST", "/v1/auth/login", attacker, right);
	CHECK_INT(r.status, 429);
	reply_free(&r);
	/* The owner, from their own address. */
	r = http(mgr_port_n, "POST", "/v1/auth/login", owner, right);
	CHECK_INT(r.status, 200);
	CHECK_CONTAINS(r.body, "\"secret_key\"");
	reply_free(&r);
	/* The attacker's address is still locked for that account. */
	r = http(mgr_port_n, "POST", "/v1/auth/login", attacker, right);
	CHECK_INT(r.status, 429);
	reply_free(&r);
}

TEST(logout_ends_the_login)
{
	char cookie[256], csrf[80], extra[512], v[512];
	CHECK_INT(login("admin@tessera.local", admin_password, cookie, sizeof(cookie), csrf, sizeof(csrf)), 200);
	struct reply r = http(web_port_n, "GET", "/auth/me", cookie, NULL);
	CHECK_INT(r.status, 200);
	CHECK_CONTAINS(r.body, csrf);
	reply_free(&r);
	r = http(web_port_n, "POST", "/auth/logout", cookie, NULL);
	CHECK_INT(r.status, 403);   /* no CSRF token */
	reply_free(&r);
	snprintf(extra, sizeof(extra), "%sX-CSRF-Token: %s\r\n", cookie, csrf);
	r = http(web_port_n, "POST", "/auth/logout", extra, NULL);
	CHECK_INT(r.status, 200);
	CHECK_CONTAINS(hdr(&r, "Set-Cookie", v, sizeof(v)), "Max-Age=0");
	reply_free(&r);
	r = http(web_port_n, "GET", "/api/v1/auth/whoami", cookie, NULL);
	CHECK_INT(r.status, 401);
	reply_free(&r);
}

/* Folder uploads go through the webserver as a stream (any size, not
 * the 1 MiB of other bodies), signed with the SHA-256 the browser sends;
 * downloads come back with their length and file name; the manager's
 * refusals come through in its words; a cut upload leaves nothing. */
TEST(folder_uploads_and_downloads_are_streamed_through_the_relay)
{
	char cookie[256], csrf[80], extra[1024], v[512], hash[SIGN_HEX_LEN + 1];
	CHECK_INT(login("admin@tessera.local", admin_password, cookie, sizeof(cookie), csrf, sizeof(csrf)), 200);
	snprintf(extra, sizeof(extra), "%sX-CSRF-Token: %s\r\nContent-Type: application/json\r\n", cookie, csrf);
	struct reply r = http(web_port_n, "POST", "/api/v1/folders", extra, "{\"name\":\"up\"}");
	CHECK_INT(r.status, 201);
	reply_free(&r);
	/* 3 MiB: three times the limit of a collected body. */
	size_t n = 3u << 20;
	char *data = malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		data[i] = (char)('a' + (i * 7 + i / 4096) % 26);
	data[n] = '\0';
	sign_sha256_hex(data, n, hash);
	snprintf(extra, sizeof(extra), "%sX-CSRF-Token: %s\r\nX-Tessera-Content-SHA256: %s\r\n", cookie, csrf, hash);
	r = http(web_port_n, "PUT", "/api/v1/folders/up/upload?path=big.txt", extra, data);
	CHECK_INT(r.status, 201);
	CHECK_CONTAINS(r.body, hash);
	reply_free(&r);
	r = http(web_port_n, "GET", "/api/v1/folders/up/download?path=big.txt", cookie, NULL);
	CHECK_INT(r.status, 200);
	CHECK_STR(hdr(&r, "Content-Length", v, sizeof(v)), "3145728");
	CHECK_STR(hdr(&r, "Content-Disposition", v, sizeof(v)), "attachment; filename*=UTF-8''big.txt");
	CHECK(r.body && strlen(r.body) == n && !memcmp(r.body, data, n));
	reply_free(&r);
	/* An empty file is a file too. */
	sign_sha256_hex("", 0, hash);
	snprintf(extra, sizeof(extra), "%sX-CSRF-Token: %s\r\nX-Tessera-Content-SHA256: %s\r\n", cookie, csrf, hash);
	r = http(web_port_n, "PUT", "/api/v1/folders/up/upload?path=empty.txt", extra, "");
	CHECK_INT(r.status, 201);
	reply_free(&r);
	r = http(web_port_n, "GET", "/api/v1/folders/up/download?path=empty.txt", cookie, NULL);
	CHECK_INT(r.status, 200);
	CHECK_STR(hdr(&r, "Content-Length", v, sizeof(v)), "0");
	reply_free(&r);
	sign_sha256_hex(data, n, hash);
	snprintf(extra, sizeof(extra), "%sX-CSRF-Token: %s\r\nX-Tessera-Content-SHA256: %s\r\n", cookie, csrf, hash);
	/* Refused from the headers: the manager's 409 and words. */
	r = http(web_port_n, "PUT", "/api/v1/folders/up/upload?path=big.txt", extra, data);
	CHECK_INT(r.status, 409);
	CHECK_CONTAINS(r.body, "already exists");
	reply_free(&r);
	/* Bytes that are not what the hash says: 400, nothing written. */
	data[10] ^= 1;
	r = http(web_port_n, "PUT", "/api/v1/folders/up/upload?path=changed.txt", extra, data);
	CHECK_INT(r.status, 400);
	CHECK_CONTAINS(r.body, "SHA-256");
	reply_free(&r);
	/* No hash, a malformed one, no CSRF token. */
	snprintf(extra, sizeof(extra), "%sX-CSRF-Token: %s\r\n", cookie, csrf);
	r = http(web_port_n, "PUT", "/api/v1/folders/up/upload?path=x.txt", extra, "x");
	CHECK_INT(r.status, 400);
	reply_free(&r);
	snprintf(extra, sizeof(extra), "%sX-CSRF-Token: %s\r\nX-Tessera-Content-SHA256: xyz\r\n", cookie, csrf);
	r = http(web_port_n, "PUT", "/api/v1/folders/up/upload?path=x.txt", extra, "x");
	CHECK_INT(r.status, 400);
	reply_free(&r);
	snprintf(extra, sizeof(extra), "%sX-Tessera-Content-SHA256: %s\r\n", cookie, hash);
	r = http(web_port_n, "PUT", "/api/v1/folders/up/upload?path=x.txt", extra, data);
	CHECK_INT(r.status, 403);
	reply_free(&r);
	/* A browser that leaves half-way: the manager keeps nothing. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)web_port_n)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	char *head = NULL;
	int hl = asprintf(&head, "PUT /api/v1/folders/up/upload?path=cut.txt HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s"
			  "X-CSRF-Token: %s\r\nX-Tessera-Content-SHA256: %s\r\nContent-Length: %zu\r\n\r\n",
			  web_port_n, cookie, csrf, hash, n);
	CHECK(hl > 0 && write(fd, head, (size_t)hl) == hl);
	CHECK(write(fd, data, n / 2) > 0);
	free(head);
	close(fd);
	/* Waits for the state (the partial file gone), not for a time. */
	bool clean = false;
	for (int i = 0; i < 200 && !clean; i++) {
		r = http(web_port_n, "GET", "/api/v1/folders/up/files", cookie, NULL);
		json_t *j = json_loads(r.body ? r.body : "", 0, NULL);
		clean = r.status == 200 && json_array_size(json_object_get(j, "entries")) == 2;
		json_decref(j);
		reply_free(&r);
		if (!clean)
			usleep(50000);
	}
	CHECK(clean);
	free(data);
}

static int setup(void)
{
	struct terr err = {0};
	if (!mkdtemp(tmpdir))
		return -1;
	char path[256];
	snprintf(path, sizeof(path), "%s/ui/assets", tmpdir);
	if (util_mkdir_p(path, 0700, &err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/ui/index.html", tmpdir);
	FILE *f = fopen(path, "w");
	fputs("<!doctype html><title>t</title>", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/ui/assets/app.js", tmpdir);
	f = fopen(path, "w");
	fputs("console.log(1)", f);
	fclose(f);
	char data[256];
	snprintf(data, sizeof(data), "%s/data", tmpdir);
	struct manager_config mc = {.data_dir = data, .listen = "127.0.0.1:0", .cluster_secret = SECRET};
	char admin_conf[4200];
	if (manager_open(&mgr, &mc, &err) < 0 || manager_serve(mgr, admin_conf, sizeof(admin_conf), &err) < 0) {
		fprintf(stderr, "manager: %s\n", err.msg);
		return -1;
	}
	struct conf c = {0};
	if (conf_load(admin_conf, &c, &err) < 0 || !conf_get(&c, "password")) {
		fprintf(stderr, "admin.conf has no password\n");
		return -1;
	}
	snprintf(admin_password, sizeof(admin_password), "%s", conf_get(&c, "password"));
	conf_free(&c);
	const char *ep = manager_endpoint(mgr);
	mgr_port_n = atoi(strrchr(ep, ':') + 1);
	char ui[256];
	snprintf(ui, sizeof(ui), "%s/ui", tmpdir);
	struct web_config wc = {.listen = "127.0.0.1:0", .manager = ep, .web_secret = SECRET, .ui_dir = ui};
	if (web_start(&wc, &web, &err) < 0) {
		fprintf(stderr, "web: %s\n", err.msg);
		return -1;
	}
	web_port_n = web_port(web);
	return 0;
}

int main(void)
{
	httpc_global_init();
	if (setup() < 0) {
		printf("FAIL setup\n");
		return 1;
	}
	RUN(serves_the_ui_with_security_headers);
	RUN(login_sets_a_strict_httponly_cookie);
	RUN(no_login_on_the_apps_host);
	RUN(wrong_or_malformed_logins_are_refused);
	RUN(manager_login_route_needs_the_web_secret);
	RUN(relay_signs_for_the_logged_in_user);
	RUN(one_login_serves_concurrent_requests);
	RUN(writes_need_the_csrf_token_and_same_origin);
	RUN(logs_and_exec_are_relayed_with_the_managers_answer);
	RUN(users_admin_validates_and_is_admin_only);
	RUN(failed_logins_are_rate_limited_per_email);
	RUN(a_login_lock_holds_one_address_not_the_account);
	RUN(folder_uploads_and_downloads_are_streamed_through_the_relay);
	RUN(logout_ends_the_login);
	web_stop(web);
	manager_close(mgr);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return testlib_done();
}
