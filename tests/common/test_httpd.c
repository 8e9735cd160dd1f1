/* common/httpd.c against real clients on 127.0.0.1: routing with {param}
 * capture and percent-decoding, 404/405/413 with JSON errors, the
 * authenticate hook, the raw target, query arguments, error mapping,
 * bodies that arrive in pieces, response headers and the server's default
 * headers, raw byte bodies, catch-all and any-method routes, cookies, the
 * peer address, streams that end or fail, HTTPS, a port in use, and a
 * flood of connections that never finish their requests. */
#include "common/httpd.h"
#include "common/httpc.h"
#include "common/util.h"
#include "testlib.h"

#include <curl/curl.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_BODY 16384

static atomic_int handler_runs;
static atomic_int auth_freed_checks;
static int port;

struct auth_tok {
	char user[32];
};

static void h_item(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	handler_runs++;
	httpd_json(resp, 200, json_pack("{s:s,s:s?,s:s,s:s}", "id", req->params[0], "x",
					req->params[1], "path", req->path, "method", req->method));
}

static void h_echo(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	handler_runs++;
	resp->status = 201;
	resp->text = malloc(req->body_len + 1);
	memcpy(resp->text, req->body, req->body_len + 1);
}

static void h_target(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	handler_runs++;
	httpd_json(resp, 200, json_pack("{s:s,s:s,s:s?,s:s?,s:s?}", "target", req->target,
					"path", req->path, "q", httpd_query(req, "q"), "x",
					httpd_query(req, "x"), "missing", httpd_query(req, "missing")));
}

static void h_private(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	handler_runs++;
	struct auth_tok *t = req->auth;
	httpd_json(resp, 200, json_pack("{s:s,s:s?}", "user", t ? t->user : "(none)",
					"hdr", httpd_header(req, "x-token")));
}

static const struct { const char *name; int code; } errnos[] = {
	{"EINVAL", EINVAL}, {"ENOENT", ENOENT}, {"EEXIST", EEXIST}, {"EDOM", EDOM},
	{"EAGAIN", EAGAIN}, {"EIO", EIO}, {"EACCES", EACCES}, {"EPERM", EPERM},
	{"E2BIG", E2BIG}, {"EBUSY", EBUSY},
};

static void h_err(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	handler_runs++;
	struct terr err = {0};
	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (!strcmp(errnos[i].name, req->params[0]))
			terr_set(&err, errnos[i].code, "failed with %s", errnos[i].name);
	httpd_error_terr(resp, &err);
}

static void h_silent(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	(void)req;
	(void)resp;
	handler_runs++;
}

static void h_headers(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	(void)req;
	handler_runs++;
	httpd_json(resp, 200, json_pack("{s:b}", "ok", 1));
	httpd_resp_header(resp, "Set-Cookie", "a=1; Path=/");
	httpd_resp_header(resp, "Set-Cookie", "b=2; Path=/");
	httpd_resp_header(resp, "X-Override", "mine");        /* replaces the server's */
	httpd_resp_header(resp, "Cache-Control", "no-cache"); /* replaces no-store */
}

/* 256 bytes 0..255, NULs included, as image/png; ?empty=1 gives none. */
static void h_bytes(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	handler_runs++;
	unsigned char b[256];
	for (int i = 0; i < 256; i++)
		b[i] = (unsigned char)i;
	httpd_json(resp, 500, json_object());   /* replaced by the bytes */
	const char *empty = httpd_query(req, "empty");
	httpd_bytes(resp, 203, "image/png", empty ? NULL : b, empty ? 0 : sizeof(b));
}

static void h_rest(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	handler_runs++;
	httpd_json(resp, 200, json_pack("{s:s,s:s?,s:s?,s:s}", "route", "rest", "a", req->params[0],
					"b", req->params[1], "method", req->method));
}

static void h_any(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	handler_runs++;
	httpd_json(resp, 200, json_pack("{s:s,s:s,s:s}", "route", "any", "rest", req->params[0],
					"method", req->method));
}

static void h_peer(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	handler_runs++;
	char addr[INET6_ADDRSTRLEN], tiny[4];
	httpd_peer_addr(req, addr, sizeof(addr));
	httpd_peer_addr(req, tiny, sizeof(tiny));   /* too small: still a string */
	httpd_json(resp, 200, json_pack("{s:s,s:s,s:s?,s:s?}", "addr", addr, "tiny", tiny,
					"sid", httpd_cookie(req, "sid"), "nope", httpd_cookie(req, "nope")));
}

/* A stream of "part 1\n".."part 3\n", then an end or (?fail=1) an error. */
struct parts {
	int n;
	int fail;
};

static long parts_read(void *cls, char *buf, size_t max)
{
	struct parts *p = cls;
	if (p->n >= 3)
		return p->fail ? HTTPD_STREAM_ERROR : HTTPD_STREAM_END;
	int k = snprintf(buf, max, "part %d\n", ++p->n);
	return k;
}

static void h_stream(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	handler_runs++;
	struct parts *p = calloc(1, sizeof(*p));
	p->fail = httpd_query(req, "fail") != NULL;
	resp->status = 200;
	resp->stream = parts_read;
	resp->stream_cls = p;
	resp->stream_free = free;
	resp->stream_type = "text/event-stream";
	httpd_resp_header(resp, "X-Stream", "yes");
}

#define NEEDS_AUTH 1

/* A streamed body's sink: counts and sums the bytes; ?limit=N refuses a
 * body past N bytes (as a quota does); ?refuse=1 answers before the body. */
static atomic_int sinks_complete, sinks_incomplete;

struct sink {
	size_t n, limit;
	unsigned long sum;
};

static int sink_write(void *cls, const char *data, size_t len, struct httpd_resp *resp)
{
	struct sink *k = cls;
	if (k->limit && k->n + len > k->limit) {
		httpd_error(resp, 413, "too_large", "past the sink's limit of %zu bytes", k->limit);
		return -1;
	}
	for (size_t i = 0; i < len; i++)
		k->sum += (unsigned char)data[i];
	k->n += len;
	return 0;
}

static void sink_end(void *cls, int complete, struct httpd_resp *resp)
{
	struct sink *k = cls;
	if (complete) {
		sinks_complete++;
		httpd_json(resp, 201, json_pack("{s:I,s:I}", "bytes", (json_int_t)k->n, "sum", (json_int_t)k->sum));
	} else {
		sinks_incomplete++;
	}
	free(k);
}

static void h_sink(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	handler_runs++;
	if (!req->body_streamed || req->body_len != 0) {
		httpd_error(resp, 500, "internal", "the body was not streamed");
		return;
	}
	if (httpd_query(req, "refuse")) {
		httpd_error(resp, 403, "forbidden", "refused before the body");
		return;
	}
	struct sink *k = calloc(1, sizeof(*k));
	const char *lim = httpd_query(req, "limit");
	k->limit = lim ? (size_t)atol(lim) : 0;
	httpd_req_sink(req, sink_write, sink_end, k);
}

static int authenticate(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	if (!(req->route_flags & NEEDS_AUTH))
		return 0;
	const char *tok = httpd_header(req, "X-Token");
	if (!tok || strcmp(tok, "good")) {
		httpd_error(resp, 401, "unauthenticated", "bad token %s", tok ? tok : "(none)");
		return -1;
	}
	struct auth_tok *t = calloc(1, sizeof(*t));
	snprintf(t->user, sizeof(t->user), "alice");
	req->auth = t;   /* freed by httpd after the handler (ASan checks) */
	auth_freed_checks++;
	return 0;
}

static const struct httpd_route routes[] = {
	{"GET", "/v1/items/{id}", h_item, 0},
	{"DELETE", "/v1/items/{id}", h_item, 0},
	{"GET", "/v1/items/{id}/sub/{x}", h_item, 0},
	{"POST", "/v1/echo", h_echo, 0},
	{"GET", "/v1/target", h_target, 0},
	{"GET", "/v1/private", h_private, NEEDS_AUTH},
	{"GET", "/v1/err/{name}", h_err, 0},
	{"GET", "/v1/silent", h_silent, 0},
	{"GET", "/v1/headers", h_headers, 0},
	{"GET", "/v1/bytes", h_bytes, 0},
	{"GET", "/v1/stream", h_stream, 0},
	{"GET", "/v1/peer", h_peer, 0},
	{"GET", "/v1/files/{id}/{*rest}", h_rest, 0},
	{"GET", "/v1/files/{*rest}", h_rest, 0},     /* after the longer one: first match wins */
	{"*", "/v1/any/{*rest}", h_any, 0},
	{"PUT", "/v1/sink", h_sink, HTTPD_ROUTE_STREAM_BODY},
	{"PUT", "/v1/private-sink", h_sink, HTTPD_ROUTE_STREAM_BODY | NEEDS_AUTH},
};

static const struct httpd_header default_headers[] = {
	{"X-Default", "on every response"},
	{"X-Override", "server"},
};

struct reply {
	long status;
	char *body;
	json_t *json;
};

static void reply_free(struct reply *r)
{
	free(r->body);
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
}

static struct reply call(const char *method, const char *target, const char *const *headers,
			 const char *body, size_t body_len)
{
	struct reply out = {0};
	char url[512];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, target);
	struct httpc_request req = {.method = method, .url = url, .headers = headers,
				    .body = body, .body_len = body_len, .timeout_ms = 30000};
	struct httpc_response resp = {0};
	struct terr err = {0};
	if (httpc_do(&req, &resp, &err) < 0) {
		FAILF("%s %s: %s", method, target, err.msg);
		return out;
	}
	out.status = resp.status;
	out.body = resp.body ? strdup(resp.body) : strdup("");
	out.json = json_loads(out.body, 0, NULL);
	httpc_response_free(&resp);
	return out;
}

static const char *jstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* {"error":{"code":CODE,"message":...}} and nothing else */
static void check_error_body(const struct reply *r, const char *code, const char *in_msg,
			     int line)
{
	testlib_checks++;
	json_t *e = r->json ? json_object_get(r->json, "error") : NULL;
	if (!e || json_object_size(r->json) != 1 || json_object_size(e) != 2 ||
	    !json_is_string(json_object_get(e, "code")) ||
	    !json_is_string(json_object_get(e, "message")) ||
	    strcmp(jstr(e, "code"), code) != 0 ||
	    (in_msg && !strstr(jstr(e, "message"), in_msg)))
		FAILF("line %d: error body %s, expected code %s with '%s'", line,
		      r->body ? r->body : "(none)", code, in_msg ? in_msg : "");
}
#define CHECK_ERROR_BODY(r, c, m) check_error_body(&(r), (c), (m), __LINE__)

TEST(routing_and_params)
{
	struct reply r = call("GET", "/v1/items/42", NULL, NULL, 0);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "id"), "42");
	CHECK(json_object_get(r.json, "x") && json_is_null(json_object_get(r.json, "x")));
	CHECK_STR(jstr(r.json, "path"), "/v1/items/42");
	CHECK_STR(jstr(r.json, "method"), "GET");
	reply_free(&r);

	r = call("DELETE", "/v1/items/7", NULL, NULL, 0);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "method"), "DELETE");
	CHECK_STR(jstr(r.json, "id"), "7");
	reply_free(&r);

	r = call("GET", "/v1/items/abc/sub/def", NULL, NULL, 0);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "id"), "abc");
	CHECK_STR(jstr(r.json, "x"), "def");
	reply_free(&r);

	/* percent-decoding; %2F stays inside the segment */
	r = call("GET", "/v1/items/a%2Fb/sub/caf%C3%A9%20x", NULL, NULL, 0);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "id"), "a/b");
	CHECK_STR(jstr(r.json, "x"), "caf\xc3\xa9 x");
	CHECK_STR(jstr(r.json, "path"), "/v1/items/a/b/sub/caf\xc3\xa9 x");
	reply_free(&r);

	/* trailing slash */
	r = call("GET", "/v1/items/9/", NULL, NULL, 0);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "id"), "9");
	reply_free(&r);
}

TEST(not_found_and_method)
{
	int before = handler_runs;
	struct reply r = call("GET", "/v1/nope", NULL, NULL, 0);
	CHECK_INT(r.status, 404);
	CHECK_ERROR_BODY(r, "not_found", "/v1/nope");
	reply_free(&r);

	r = call("GET", "/v1/items", NULL, NULL, 0);       /* param missing */
	CHECK_INT(r.status, 404);
	CHECK_ERROR_BODY(r, "not_found", NULL);
	reply_free(&r);

	r = call("GET", "/v1/items//sub/x", NULL, NULL, 0); /* empty param */
	CHECK_INT(r.status, 404);
	reply_free(&r);

	r = call("GET", "/v1/items/1/sub/2/extra", NULL, NULL, 0);
	CHECK_INT(r.status, 404);
	reply_free(&r);

	r = call("POST", "/v1/items/5", NULL, "{}", 2);
	CHECK_INT(r.status, 405);
	CHECK_ERROR_BODY(r, "method_not_allowed", "POST");
	reply_free(&r);

	r = call("GET", "/v1/echo", NULL, NULL, 0);
	CHECK_INT(r.status, 405);
	CHECK_ERROR_BODY(r, "method_not_allowed", NULL);
	reply_free(&r);
	CHECK_INT(handler_runs, before);
}

/* Bytes that are not UTF-8 in a path: a JSON error every time (once an
 * empty 404 or 405, as the message quoting them could not be JSON). */
TEST(invalid_utf8_in_the_path)
{
	int before = handler_runs;
	struct reply r = call("GET", "/v1/items/%ff", NULL, NULL, 0);
	CHECK_INT(r.status, 400);
	CHECK_ERROR_BODY(r, "invalid_argument", "not valid UTF-8");
	reply_free(&r);
	r = call("GET", "/v1/items/ok/sub/%c3%28", NULL, NULL, 0);
	CHECK_INT(r.status, 400);
	CHECK_ERROR_BODY(r, "invalid_argument", "not valid UTF-8");
	reply_free(&r);
	r = call("GET", "/v1/files/a/%fe%ff", NULL, NULL, 0);
	CHECK_INT(r.status, 400);
	CHECK_ERROR_BODY(r, "invalid_argument", "not valid UTF-8");
	reply_free(&r);
	CHECK_INT(handler_runs, before);
	/* No route, or not this method: the path is quoted, U+FFFD for the
	 * bytes that are not UTF-8. */
	r = call("GET", "/v1/nope%ff", NULL, NULL, 0);
	CHECK_INT(r.status, 404);
	CHECK_ERROR_BODY(r, "not_found", "/v1/nope\xef\xbf\xbd");
	reply_free(&r);
	r = call("POST", "/v1/items/%ff", NULL, "{}", 2);
	CHECK_INT(r.status, 405);
	CHECK_ERROR_BODY(r, "method_not_allowed", "\xef\xbf\xbd");
	reply_free(&r);
	CHECK_INT(handler_runs, before);
}

TEST(body_limit)
{
	int before = handler_runs;
	size_t n = MAX_BODY + 1;
	char *big = malloc(n);
	memset(big, 'b', n);
	struct reply r = call("POST", "/v1/echo", NULL, big, n);
	CHECK_INT(r.status, 413);
	CHECK_ERROR_BODY(r, "too_large", NULL);
	reply_free(&r);
	CHECK_INT(handler_runs, before);

	/* exactly max_body is fine */
	r = call("POST", "/v1/echo", NULL, big, MAX_BODY);
	CHECK_INT(r.status, 201);
	CHECK_INT(strlen(r.body ? r.body : ""), MAX_BODY);
	reply_free(&r);
	free(big);

	/* the server still answers */
	r = call("GET", "/v1/items/1", NULL, NULL, 0);
	CHECK_INT(r.status, 200);
	reply_free(&r);
}

TEST(authenticate_hook)
{
	int runs = handler_runs, freed = auth_freed_checks;
	struct reply r = call("GET", "/v1/private", NULL, NULL, 0);
	CHECK_INT(r.status, 401);
	CHECK_ERROR_BODY(r, "unauthenticated", "(none)");
	reply_free(&r);
	const char *bad[] = {"X-Token: bad", NULL};
	r = call("GET", "/v1/private", bad, NULL, 0);
	CHECK_INT(r.status, 401);
	CHECK_ERROR_BODY(r, "unauthenticated", "bad token bad");
	reply_free(&r);
	CHECK_INT(handler_runs, runs);

	const char *good[] = {"X-Token: good", NULL};
	r = call("GET", "/v1/private", good, NULL, 0);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "user"), "alice");
	CHECK_STR(jstr(r.json, "hdr"), "good");   /* header lookup is case-insensitive */
	reply_free(&r);
	CHECK_INT(handler_runs, runs + 1);
	CHECK_INT(auth_freed_checks, freed + 1);

	/* a route without the flag: the hook lets it through, no auth set */
	r = call("GET", "/v1/items/3", NULL, NULL, 0);
	CHECK_INT(r.status, 200);
	reply_free(&r);
}

TEST(raw_target_and_query)
{
	struct reply r = call("GET", "/v1/target?q=a%20b&x=1", NULL, NULL, 0);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "target"), "/v1/target?q=a%20b&x=1");
	CHECK_STR(jstr(r.json, "path"), "/v1/target");
	CHECK_STR(jstr(r.json, "q"), "a b");
	CHECK_STR(jstr(r.json, "x"), "1");
	CHECK(json_is_null(json_object_get(r.json, "missing")));
	reply_free(&r);

	r = call("GET", "/v1/target", NULL, NULL, 0);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "target"), "/v1/target");
	CHECK(json_is_null(json_object_get(r.json, "q")));
	reply_free(&r);

	r = call("GET", "/v1/target?all=1&q=%2Fz", NULL, NULL, 0);
	CHECK_STR(jstr(r.json, "target"), "/v1/target?all=1&q=%2Fz");
	CHECK_STR(jstr(r.json, "q"), "/z");
	reply_free(&r);
}

static char *raw_exchange(const char *head, const char *const *pieces, const size_t *lens,
			  size_t n_pieces);

/* A NUL byte decoded from %00 would cut the C string a handler gets:
 * "keep%00.tmp" would name "keep". Refused with 400 on every route, in a
 * {param}, a catch-all and the query's names and values, before the
 * authenticate hook and before any handler (issue 27). */
TEST(nul_in_path_or_query)
{
	int before = handler_runs;
	static const char *const targets[] = {
		"/v1/items/a%00b", "/v1/items/ok/sub/%00", "/v1/files/a/b%00c", "/v1/files/x%00",
		"/v1/target?q=real%00.txt", "/v1/target?q%00x=1", "/v1/target?x=1&q=%00",
		"/v1/target?q=%%00", "/v1/private?x=%00", "/v1/nope%00",
	};
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		struct reply r = call("GET", targets[i], NULL, NULL, 0);
		testlib_checks++;
		if (r.status != 400)
			FAILF("GET %s: %ld, expected 400", targets[i], r.status);
		CHECK_ERROR_BODY(r, "invalid_argument", "NUL");
		reply_free(&r);
	}
	/* A streamed-body route too, before the hook (no token: 400, not 401). */
	struct reply r = call("PUT", "/v1/private-sink?x=a%00", NULL, "abc", 3);
	CHECK_INT(r.status, 400);
	CHECK_ERROR_BODY(r, "invalid_argument", "NUL");
	reply_free(&r);
	r = call("DELETE", "/v1/items/keep%00.tmp", NULL, NULL, 0);
	CHECK_INT(r.status, 400);
	reply_free(&r);
	CHECK_INT(handler_runs, before);

	/* An escaped percent sign followed by 00 is text, not a NUL. */
	r = call("GET", "/v1/target?q=%2500", NULL, NULL, 0);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "q"), "%00");
	reply_free(&r);
	r = call("GET", "/v1/items/a%2500", NULL, NULL, 0);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "id"), "a%00");
	reply_free(&r);
}

/* Two Content-Length headers that differ: the body's end is ambiguous
 * (RFC 9112, 6.3), so 400 before the hook and the handler, and the
 * connection closed; the same value twice is one length. */
TEST(conflicting_content_length)
{
	int before = handler_runs;
	char head[512];
	snprintf(head, sizeof(head),
		 "POST /v1/echo HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: 3\r\n"
		 "Content-Length: 30\r\nConnection: close\r\n\r\nabc", port);
	char *raw = raw_exchange(head, NULL, NULL, 0);
	CHECK(raw && !strncmp(raw, "HTTP/1.1 400", 12));
	CHECK(raw && strstr(raw, "Content-Length headers that differ"));
	free(raw);
	/* Before authentication: a route that needs it answers 400, not 401. */
	snprintf(head, sizeof(head),
		 "GET /v1/private HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: 0\r\n"
		 "Content-Length: 5\r\nConnection: close\r\n\r\nhello", port);
	raw = raw_exchange(head, NULL, NULL, 0);
	CHECK(raw && !strncmp(raw, "HTTP/1.1 400", 12));
	free(raw);
	snprintf(head, sizeof(head),
		 "PUT /v1/private-sink HTTP/1.1\r\nHost: 127.0.0.1:%d\r\ncontent-length: 2\r\n"
		 "Content-Length: 3\r\nConnection: close\r\n\r\nabc", port);
	raw = raw_exchange(head, NULL, NULL, 0);
	CHECK(raw && !strncmp(raw, "HTTP/1.1 400", 12));
	free(raw);
	CHECK_INT(handler_runs, before);
	/* The same length twice is served. */
	snprintf(head, sizeof(head),
		 "POST /v1/echo HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: 3\r\n"
		 "Content-Length: 3\r\nConnection: close\r\n\r\nabc", port);
	raw = raw_exchange(head, NULL, NULL, 0);
	CHECK(raw && !strncmp(raw, "HTTP/1.1 201", 12));
	free(raw);
}

static void maps(int code, int status, const char *scode, int line)
{
	struct httpd_resp resp = {0};
	struct terr err = {0};
	terr_set(&err, code, "the message %d", code);
	httpd_error_terr(&resp, &err);
	char want[64];
	snprintf(want, sizeof(want), "the message %d", code);
	json_t *e = json_object_get(resp.json, "error");
	testlib_checks++;
	if (resp.status != status || !e || !jstr(e, "code") || strcmp(jstr(e, "code"), scode) ||
	    !jstr(e, "message") || strcmp(jstr(e, "message"), want))
		FAILF("line %d: errno %d gave %d %s, expected %d %s", line, code, resp.status,
		      e && jstr(e, "code") ? jstr(e, "code") : "?", status, scode);
	json_decref(resp.json);
	free(resp.text);
}
#define MAPS(c, s, n) maps((c), (s), (n), __LINE__)

TEST(error_mapping)
{
	MAPS(EINVAL, 400, "invalid_argument");
	MAPS(ENOENT, 404, "not_found");
	MAPS(EEXIST, 409, "conflict");
	MAPS(EBUSY, 409, "conflict");
	MAPS(EDOM, 422, "unsatisfiable");
	MAPS(EAGAIN, 503, "unavailable");
	MAPS(ECONNREFUSED, 503, "unavailable");
	MAPS(EACCES, 401, "unauthenticated");
	MAPS(EPERM, 403, "forbidden");
	MAPS(E2BIG, 413, "too_large");
	MAPS(EIO, 500, "internal");
	MAPS(ENOMEM, 500, "internal");

	/* an empty message still gives one */
	struct httpd_resp resp = {0};
	struct terr err = {.code = EIO};
	httpd_error_terr(&resp, &err);
	CHECK_INT(resp.status, 500);
	CHECK_STR(jstr(json_object_get(resp.json, "error"), "message"), "internal error");
	json_decref(resp.json);

	/* over the wire: status and the exact body shape */
	static const struct { const char *name; int status; const char *code; } wire[] = {
		{"EINVAL", 400, "invalid_argument"}, {"ENOENT", 404, "not_found"},
		{"EEXIST", 409, "conflict"}, {"EDOM", 422, "unsatisfiable"},
		{"EAGAIN", 503, "unavailable"}, {"EIO", 500, "internal"},
	};
	for (size_t i = 0; i < sizeof(wire) / sizeof(wire[0]); i++) {
		char target[64], msg[64];
		snprintf(target, sizeof(target), "/v1/err/%s", wire[i].name);
		snprintf(msg, sizeof(msg), "failed with %s", wire[i].name);
		struct reply r = call("GET", target, NULL, NULL, 0);
		CHECK_INT(r.status, wire[i].status);
		CHECK_ERROR_BODY(r, wire[i].code, msg);
		reply_free(&r);
	}
}

TEST(handler_without_response)
{
	struct reply r = call("GET", "/v1/silent", NULL, NULL, 0);
	CHECK_INT(r.status, 500);
	CHECK_ERROR_BODY(r, "internal", NULL);
	reply_free(&r);
}

/* Raw HTTP over a socket, the body written in small pieces. Returns the
 * whole response (headers and body), malloc'd. */
static char *raw_exchange(const char *head, const char *const *pieces, const size_t *lens,
			  size_t n_pieces)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		FAILF("connect: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (write(fd, head, strlen(head)) != (ssize_t)strlen(head))
		FAILF("short write of the head");
	for (size_t i = 0; i < n_pieces; i++) {
		/* a pause so the pieces arrive as separate reads (not asserted) */
		usleep(2000);
		if (write(fd, pieces[i], lens[i]) != (ssize_t)lens[i])
			FAILF("short write of piece %zu", i);
	}
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	ssize_t got;
	while ((got = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)got;
		if (len + 1 >= cap) {
			cap *= 2;
			buf = realloc(buf, cap);
		}
	}
	buf[len] = '\0';
	close(fd);
	return buf;
}

static void fill_pattern(char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)('a' + (i * 7 + i / 26) % 26);
}

TEST(body_in_chunks)
{
	enum { N = 9000, PIECE = 700 };
	char *body = malloc(N + 1);
	fill_pattern(body, N);
	body[N] = '\0';

	/* Content-Length, body written in pieces */
	char head[256];
	snprintf(head, sizeof(head),
		 "POST /v1/echo HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %d\r\n"
		 "Content-Type: text/plain\r\nConnection: close\r\n\r\n", port, N);
	const char *pieces[N / PIECE + 1];
	size_t lens[N / PIECE + 1], np = 0;
	for (size_t off = 0; off < N; off += PIECE) {
		pieces[np] = body + off;
		lens[np++] = off + PIECE <= N ? PIECE : N - off;
	}
	char *resp = raw_exchange(head, pieces, lens, np);
	CHECK(resp != NULL);
	if (resp) {
		CHECK(!strncmp(resp, "HTTP/1.1 201", 12));
		char *b = strstr(resp, "\r\n\r\n");
		CHECK(b != NULL);
		if (b) {
			CHECK_INT(strlen(b + 4), N);
			CHECK(!strcmp(b + 4, body));
		}
	}
	free(resp);

	/* chunked transfer encoding, each chunk its own write */
	snprintf(head, sizeof(head),
		 "POST /v1/echo HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nTransfer-Encoding: chunked\r\n"
		 "Connection: close\r\n\r\n", port);
	char *cbuf = malloc(N * 2 + 64);
	const char *cp[2 * (N / PIECE + 1) + 1];
	size_t cl[2 * (N / PIECE + 1) + 1], nc = 0, used = 0;
	for (size_t off = 0; off < N; off += PIECE) {
		size_t n = off + PIECE <= N ? PIECE : N - off;
		char *p = cbuf + used;
		int h = sprintf(p, "%zx\r\n", n);
		memcpy(p + h, body + off, n);
		memcpy(p + h + n, "\r\n", 2);
		cp[nc] = p;
		cl[nc++] = (size_t)h + n + 2;
		used += (size_t)h + n + 2;
	}
	cp[nc] = "0\r\n\r\n";
	cl[nc++] = 5;
	resp = raw_exchange(head, cp, cl, nc);
	CHECK(resp != NULL);
	if (resp) {
		CHECK(!strncmp(resp, "HTTP/1.1 201", 12));
		char *b = strstr(resp, "\r\n\r\n");
		CHECK(b != NULL);
		if (b) {
			CHECK_INT(strlen(b + 4), N);
			CHECK(!strcmp(b + 4, body));
		}
	}
	free(resp);
	free(cbuf);

	/* and through httpc in one go, binary-safe up to the NUL */
	struct reply r = call("POST", "/v1/echo", NULL, body, N);
	CHECK_INT(r.status, 201);
	CHECK_STR(r.body, body);
	reply_free(&r);
	free(body);
}

/* A request with Connection: close over a raw socket; returns the whole
 * response (status line, headers, body), malloc'd. */
static char *raw_get(const char *target, const char *extra)
{
	char head[1024];
	snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s\r\n",
		 target, port, extra ? extra : "");
	return raw_exchange(head, NULL, NULL, 0);
}

/* How many times header `name` appears; the first value into out. */
static int header_count(const char *raw, const char *name, char *out, size_t n)
{
	int count = 0;
	size_t nl = strlen(name);
	if (out)
		out[0] = '\0';
	const char *end = raw ? strstr(raw, "\r\n\r\n") : NULL;
	for (const char *p = raw; p && (p = strstr(p, "\r\n")) && p < end; ) {
		p += 2;
		if (!strncasecmp(p, name, nl) && p[nl] == ':') {
			const char *v = p + nl + 1;
			while (*v == ' ')
				v++;
			if (!count++ && out)
				snprintf(out, n, "%.*s", (int)strcspn(v, "\r\n"), v);
		}
	}
	return count;
}

TEST(response_headers)
{
	char v[256];
	char *raw = raw_get("/v1/headers", NULL);
	CHECK(raw && !strncmp(raw, "HTTP/1.1 200", 12));
	CHECK_INT(header_count(raw, "Set-Cookie", v, sizeof(v)), 2);
	CHECK_STR(v, "a=1; Path=/");
	CHECK_CONTAINS(raw, "b=2; Path=/");
	CHECK_INT(header_count(raw, "X-Override", v, sizeof(v)), 1);
	CHECK_STR(v, "mine");
	CHECK_INT(header_count(raw, "Cache-Control", v, sizeof(v)), 1);
	CHECK_STR(v, "no-cache");
	CHECK_INT(header_count(raw, "X-Default", v, sizeof(v)), 1);
	CHECK_STR(v, "on every response");
	CHECK_INT(header_count(raw, "Content-Type", v, sizeof(v)), 1);
	CHECK_STR(v, "application/json");
	free(raw);

	/* the defaults ride on httpd's own errors too, beside its own headers */
	raw = raw_get("/v1/nope", NULL);
	CHECK(raw && !strncmp(raw, "HTTP/1.1 404", 12));
	CHECK_INT(header_count(raw, "X-Default", NULL, 0), 1);
	CHECK_INT(header_count(raw, "X-Override", v, sizeof(v)), 1);
	CHECK_STR(v, "server");
	CHECK_INT(header_count(raw, "Cache-Control", v, sizeof(v)), 1);
	CHECK_STR(v, "no-store");
	free(raw);

	/* a response built and never sent frees what it owns (ASan checks) */
	struct httpd_resp resp = {0};
	CHECK_INT(httpd_resp_header(&resp, "X-A", "1"), 0);
	CHECK_INT(httpd_resp_header(&resp, "X-B", "2"), 0);
	CHECK_INT(httpd_bytes(&resp, 200, "text/plain", "hi", 2), 0);
	httpd_json(&resp, 201, json_object());
	CHECK(resp.bytes == NULL);   /* json replaced the bytes */
	httpd_resp_free(&resp);
	CHECK(resp.headers == NULL && resp.json == NULL && resp.status == 0);
}

TEST(bytes_bodies)
{
	char v[256];
	char *raw = raw_get("/v1/bytes", NULL);
	CHECK(raw && !strncmp(raw, "HTTP/1.1 203", 12));
	CHECK_INT(header_count(raw, "Content-Type", v, sizeof(v)), 1);
	CHECK_STR(v, "image/png");
	CHECK_INT(header_count(raw, "Content-Length", v, sizeof(v)), 1);
	CHECK_STR(v, "256");
	char *b = raw ? strstr(raw, "\r\n\r\n") : NULL;
	CHECK(b != NULL);
	if (b) {
		b += 4;
		int same = 1;
		for (int i = 0; i < 256; i++)
			same &= (unsigned char)b[i] == i;
		CHECK(same);   /* NULs and all */
	}
	free(raw);
	raw = raw_get("/v1/bytes?empty=1", NULL);
	CHECK(raw && !strncmp(raw, "HTTP/1.1 203", 12));
	CHECK_INT(header_count(raw, "Content-Length", v, sizeof(v)), 1);
	CHECK_STR(v, "0");
	free(raw);
}

TEST(catch_all_and_any_method)
{
	struct reply r = call("GET", "/v1/files/x/a/b%20c/d.txt", NULL, NULL, 0);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "a"), "x");
	CHECK_STR(jstr(r.json, "b"), "a/b c/d.txt");
	reply_free(&r);

	r = call("GET", "/v1/files/x/", NULL, NULL, 0);   /* the rest may be empty */
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "a"), "x");
	CHECK_STR(jstr(r.json, "b"), "");
	reply_free(&r);

	r = call("GET", "/v1/files/x", NULL, NULL, 0);    /* {id} then no slash: the shorter route */
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "a"), "x");
	CHECK(json_is_null(json_object_get(r.json, "b")));
	reply_free(&r);

	r = call("GET", "/v1/files/", NULL, NULL, 0);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "a"), "");
	reply_free(&r);

	r = call("GET", "/v1/files", NULL, NULL, 0);      /* the slash before {*rest} is needed */
	CHECK_INT(r.status, 404);
	reply_free(&r);

	r = call("POST", "/v1/files/x/y", NULL, "{}", 2);  /* a catch-all keeps its method */
	CHECK_INT(r.status, 405);
	reply_free(&r);

	static const char *methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE"};
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		r = call(methods[i], "/v1/any/deep/er?q=1", NULL, "{}", 2);
		CHECK_INT(r.status, 200);
		CHECK_STR(jstr(r.json, "route"), "any");
		CHECK_STR(jstr(r.json, "rest"), "deep/er");
		CHECK_STR(jstr(r.json, "method"), methods[i]);
		reply_free(&r);
	}
	r = call("GET", "/v1/any/bad%zzescape", NULL, NULL, 0);
	CHECK_INT(r.status, 404);
	reply_free(&r);
}

TEST(peer_address_and_cookies)
{
	const char *h[] = {"Cookie: sid=abc123; other=x", NULL};
	struct reply r = call("GET", "/v1/peer", h, NULL, 0);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "addr"), "127.0.0.1");
	CHECK_STR(jstr(r.json, "tiny"), "unk");
	CHECK_STR(jstr(r.json, "sid"), "abc123");
	CHECK(json_is_null(json_object_get(r.json, "nope")));
	reply_free(&r);
}

TEST(streams_end_or_fail)
{
	char v[256];
	char *raw = raw_get("/v1/stream", NULL);
	CHECK(raw && !strncmp(raw, "HTTP/1.1 200", 12));
	CHECK_INT(header_count(raw, "Content-Type", v, sizeof(v)), 1);
	CHECK_STR(v, "text/event-stream");
	CHECK_INT(header_count(raw, "X-Stream", NULL, 0), 1);
	CHECK_INT(header_count(raw, "X-Default", NULL, 0), 1);
	CHECK_CONTAINS(raw, "part 1\n");
	CHECK_CONTAINS(raw, "part 3\n");
	CHECK_CONTAINS(raw, "\r\n0\r\n\r\n");   /* the chunked body's proper end */
	free(raw);
	raw = raw_get("/v1/stream?fail=1", NULL);
	CHECK(raw && !strncmp(raw, "HTTP/1.1 200", 12));
	CHECK_CONTAINS(raw, "part 3\n");
	CHECK(raw && !strstr(raw, "\r\n0\r\n\r\n"));   /* cut: no end */
	free(raw);
}

struct gen {
	size_t left;
	unsigned long sum;
};

/* httpc's streamed request body: a pattern, len bytes. */
static long gen_read(char *buf, size_t max, void *ud)
{
	struct gen *g = ud;
	size_t n = g->left < max ? g->left : max;
	for (size_t i = 0; i < n; i++) {
		buf[i] = (char)('a' + (g->left - i) % 26);
		g->sum += (unsigned char)buf[i];
	}
	g->left -= n;
	return (long)n;
}

static struct reply put_streamed(const char *target, size_t len, const char *const *headers, unsigned long *sum)
{
	struct reply out = {0};
	char url[512];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, target);
	struct gen g = {.left = len};
	struct httpc_request req = {.method = "PUT", .url = url, .headers = headers, .read_body = gen_read,
				    .read_body_len = (long long)len, .ud = &g, .timeout_ms = 60000};
	struct httpc_response resp = {0};
	struct terr err = {0};
	if (httpc_do(&req, &resp, &err) < 0) {
		FAILF("PUT %s: %s", target, err.msg);
		return out;
	}
	out.status = resp.status;
	out.body = resp.body ? strdup(resp.body) : strdup("");
	out.json = json_loads(out.body, 0, NULL);
	httpc_response_free(&resp);
	if (sum)
		*sum = g.sum;
	return out;
}

/* Bodies far past max_body reach a streamed route's sink whole; an error
 * from the sink, or an answer before the body, is the response; a body cut
 * off ends the sink as incomplete. */
TEST(streamed_bodies)
{
	enum { BIG = 8 * 1024 * 1024 };
	int complete = sinks_complete, incomplete = sinks_incomplete;
	unsigned long sum = 0;
	struct reply r = put_streamed("/v1/sink", BIG, NULL, &sum);
	CHECK_INT(r.status, 201);
	CHECK_INT(json_integer_value(json_object_get(r.json, "bytes")), BIG);
	CHECK_INT(json_integer_value(json_object_get(r.json, "sum")), (long long)sum);
	CHECK_INT(sinks_complete, complete + 1);
	reply_free(&r);

	r = put_streamed("/v1/sink?limit=100000", BIG, NULL, NULL);
	CHECK_INT(r.status, 413);
	CHECK_ERROR_BODY(r, "too_large", "sink's limit");
	CHECK_INT(sinks_incomplete, incomplete + 1);
	reply_free(&r);

	int before = handler_runs;
	r = put_streamed("/v1/sink?refuse=1", 1000, NULL, NULL);
	CHECK_INT(r.status, 403);
	CHECK_ERROR_BODY(r, "forbidden", "before the body");
	reply_free(&r);

	/* The hook runs first: unauthenticated, the handler never runs. */
	before = handler_runs;
	r = put_streamed("/v1/private-sink", 1000, NULL, NULL);
	CHECK_INT(r.status, 401);
	CHECK_INT(handler_runs, before);
	reply_free(&r);
	const char *tok[] = {"X-Token: good", NULL};
	r = put_streamed("/v1/private-sink", 1000, tok, NULL);
	CHECK_INT(r.status, 201);
	reply_free(&r);

	/* Empty body. */
	r = put_streamed("/v1/sink", 0, NULL, NULL);
	CHECK_INT(r.status, 201);
	CHECK_INT(json_integer_value(json_object_get(r.json, "bytes")), 0);
	reply_free(&r);

	/* Cut off: 1000 of 100000 bytes, then the connection closes. */
	incomplete = sinks_incomplete;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	char head[256], part[1000];
	snprintf(head, sizeof(head), "PUT /v1/sink HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: 100000\r\n\r\n",
		 port);
	memset(part, 'x', sizeof(part));
	CHECK(write(fd, head, strlen(head)) == (ssize_t)strlen(head));
	CHECK(write(fd, part, sizeof(part)) == (ssize_t)sizeof(part));
	close(fd);
	/* The state reached is what is asserted, however long it takes. */
	for (int i = 0; i < 3000 && sinks_incomplete == incomplete; i++)
		usleep(10000);
	CHECK_INT(sinks_incomplete, incomplete + 1);
	CHECK_INT(sinks_complete, complete + 3);

	/* Routes without the flag still collect their body. */
	r = call("POST", "/v1/echo", NULL, "abc", 3);
	CHECK_INT(r.status, 201);
	reply_free(&r);
}

static size_t collect(char *data, size_t size, size_t n, void *ud)
{
	char *buf = ud;
	size_t have = strlen(buf), k = size * n;
	if (have + k < 256) {
		memcpy(buf + have, data, k);
		buf[have + k] = '\0';
	}
	return k;
}

TEST(https)
{
	struct terr err = {0};
	struct httpd *h = NULL;
	struct httpd_config cfg = {.listen = "127.0.0.1:0", .routes = routes, .n_routes = 1,
				   .max_body = 10, .tls_cert_pem = "x"};
	CHECK_INT(httpd_start(&cfg, &h, &err), -EINVAL);   /* a certificate without its key */
	CHECK_CONTAINS(err.msg, "go together");
	CHECK(h == NULL);

	char dir[] = "/tmp/tessera-test-httpd.XXXXXX", cmd[512], path[128];
	if (!mkdtemp(dir)) {
		FAILF("mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
		 "-keyout %s/key.pem -out %s/cert.pem >/dev/null 2>&1", dir, dir);
	if (system(cmd) != 0) {
		printf("skip https: no openssl to make a certificate\n");
	} else {
		char *cert = NULL, *key = NULL;
		size_t len;
		snprintf(path, sizeof(path), "%s/cert.pem", dir);
		CHECK_INT(util_read_file(path, &cert, &len, &err), 0);
		snprintf(path, sizeof(path), "%s/key.pem", dir);
		CHECK_INT(util_read_file(path, &key, &len, &err), 0);
		cfg.tls_cert_pem = cert;
		cfg.tls_key_pem = key;
		cfg.n_routes = sizeof(routes) / sizeof(routes[0]);
		int rc = httpd_start(&cfg, &h, &err);
		free(cert);   /* httpd keeps its own copies */
		free(key);
		CHECK_INT(rc, 0);
		if (rc == 0) {
			char url[128], body[256] = "";
			snprintf(url, sizeof(url), "https://127.0.0.1:%d/v1/items/tls", httpd_port(h));
			CURL *c = curl_easy_init();
			curl_easy_setopt(c, CURLOPT_URL, url);
			curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);   /* self-signed */
			curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
			curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
			curl_easy_setopt(c, CURLOPT_WRITEDATA, (void *)body);
			curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
			CHECK_INT(curl_easy_perform(c), CURLE_OK);
			long status = 0;
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
			CHECK_INT(status, 200);
			CHECK_CONTAINS(body, "\"tls\"");
			/* plain HTTP to the HTTPS port gets no HTTP answer */
			snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/items/tls", httpd_port(h));
			curl_easy_setopt(c, CURLOPT_URL, url);
			body[0] = '\0';
			curl_easy_perform(c);
			status = 0;
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
			CHECK(status != 200);
			curl_easy_cleanup(c);
			httpd_stop(h);
		}
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

TEST(parse_listen)
{
	char host[64];
	int p = -1;
	struct terr err = {0};
	CHECK_INT(httpd_parse_listen("127.0.0.1:8090", host, sizeof(host), &p, &err), 0);
	CHECK_STR(host, "127.0.0.1");
	CHECK_INT(p, 8090);
	CHECK_INT(httpd_parse_listen("0.0.0.0:0", host, sizeof(host), &p, &err), 0);
	CHECK_INT(p, 0);
	CHECK_INT(httpd_parse_listen("8090", host, sizeof(host), &p, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "8090");
	CHECK_INT(httpd_parse_listen(":8090", host, sizeof(host), &p, &err), -EINVAL);
	CHECK_INT(httpd_parse_listen("h:99999", host, sizeof(host), &p, &err), -EINVAL);
	CHECK_INT(httpd_parse_listen("h:x", host, sizeof(host), &p, &err), -EINVAL);
	CHECK_INT(httpd_parse_listen("h:", host, sizeof(host), &p, &err), -EINVAL);

	/* httpd_start refuses what it cannot bind */
	struct httpd_config cfg = {.listen = "not-an-ip:0", .routes = routes, .n_routes = 1,
				   .max_body = 10};
	struct httpd *h = NULL;
	CHECK(httpd_start(&cfg, &h, &err) < 0);
	CHECK(h == NULL);
}

/* A port that another server (or any other socket) listens on is
 * refused with a message naming it, whether asked for on the same address
 * or on all of them; nothing listens twice. Port 0 still picks a free
 * port each time, and a stopped server's port can be taken again at once,
 * even right after it answered a request (restarts). */
TEST(port_in_use)
{
	struct httpd_config cfg = {.listen = "127.0.0.1:0", .routes = routes, .n_routes = 1,
				   .max_body = 10};
	struct httpd *a = NULL, *b = NULL, *c = NULL;
	struct terr err = {0};
	CHECK_INT(httpd_start(&cfg, &a, &err), 0);
	if (!a)
		return;
	int p = httpd_port(a);
	char addr[64], want[96];

	snprintf(addr, sizeof(addr), "127.0.0.1:%d", p);
	cfg.listen = addr;
	CHECK_INT(httpd_start(&cfg, &b, &err), -EADDRINUSE);
	CHECK(b == NULL);
	snprintf(want, sizeof(want), "port %d on 127.0.0.1 is in use by another process", p);
	CHECK_STR(err.msg, want);
	snprintf(addr, sizeof(addr), "0.0.0.0:%d", p);
	CHECK_INT(httpd_start(&cfg, &b, &err), -EADDRINUSE);
	snprintf(want, sizeof(want), "port %d on 0.0.0.0 is in use by another process", p);
	CHECK_STR(err.msg, want);
	snprintf(addr, sizeof(addr), "localhost:%d", p);
	CHECK_INT(httpd_start(&cfg, &b, &err), -EADDRINUSE);
	CHECK(b == NULL);

	/* Port 0: another free port, not a share of the first. */
	cfg.listen = "127.0.0.1:0";
	CHECK_INT(httpd_start(&cfg, &c, &err), 0);
	CHECK(c && httpd_port(c) != p);
	httpd_stop(c);

	/* Any socket holding the port counts, not only ours. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t slen = sizeof(sa);
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 1) == 0 &&
	      getsockname(fd, (struct sockaddr *)&sa, &slen) == 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(sa.sin_port));
	cfg.listen = addr;
	CHECK_INT(httpd_start(&cfg, &c, &err), -EADDRINUSE);
	close(fd);

	/* A restart: a request answered, the server stopped, the same port
	 * taken again by the next one. */
	int saved = port;
	port = p;
	struct reply r = call("GET", "/v1/items/1", NULL, NULL, 0);
	CHECK_INT(r.status, 200);
	reply_free(&r);
	port = saved;
	httpd_stop(a);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", p);
	CHECK_INT(httpd_start(&cfg, &b, &err), 0);
	CHECK(b && httpd_port(b) == p);
	httpd_stop(b);
}

/* ---------- floods ---------- */

/* Under ThreadSanitizer every connection thread costs much more: a
 * smaller flood still fills every cap (32 per address, 256 in all). */
#ifdef __SANITIZE_THREAD__
#define FLOOD_N 400
#else
#define FLOOD_N 2000
#endif

static void h_slow(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	(void)req;
	sleep(3);   /* longer than the flood server's 1 s header timeout */
	httpd_json(resp, 200, json_pack("{s:b}", "slow", 1));
}

static const struct httpd_route flood_routes[] = {
	{"GET", "/v1/items/{id}", h_item, 0},
	{"GET", "/slow", h_slow, 0},
};

/* A connection from src (127.0.0.x) that sends half a request head and
 * then nothing; -1 when the socket could not be made or connected. */
static int half_request(int p, const char *src)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in me = {.sin_family = AF_INET}, to = {.sin_family = AF_INET,
							       .sin_port = htons((uint16_t)p)};
	inet_pton(AF_INET, src, &me.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	struct timeval tv = {.tv_sec = 10};
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	static const char head[] = "GET /v1/items/1 HTTP/1.1\r\nHost: x\r\nX-Slow: ";
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
	    connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0 ||
	    send(fd, head, sizeof(head) - 1, MSG_NOSIGNAL) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* GET target on port p; the status, or -1 when no answer came. */
static long try_get(int p, const char *target)
{
	char url[256];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", p, target);
	struct httpc_request req = {.method = "GET", .url = url, .timeout_ms = 10000};
	struct httpc_response resp = {0};
	struct terr err = {0};
	long status = httpc_do(&req, &resp, &err) < 0 ? -1 : resp.status;
	httpc_response_free(&resp);
	return status;
}

/* A normal request succeeds within a generous deadline (no timing is
 * asserted: a loaded machine may take its time). */
static bool served(int p)
{
	for (int i = 0; i < 60; i++) {
		if (try_get(p, "/v1/items/7") == 200)
			return true;
		sleep(1);
	}
	return false;
}

/* 1 when the server has closed fd (end of stream or reset), 0 if not yet. */
static int closed_by_server(int fd)
{
	char buf[4096];
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
			return 1;
		if (n < 0)
			return 0;
	}
}

/* Waits (generously) until the server closed every fd in fds. */
static int still_open(int *fds, int n)
{
	int open_n = n;
	for (int round = 0; round < 120 && open_n; round++) {
		open_n = 0;
		for (int i = 0; i < n; i++) {
			if (fds[i] < 0)
				continue;
			if (closed_by_server(fds[i])) {
				close(fds[i]);
				fds[i] = -1;
			} else {
				open_n++;
			}
		}
		if (open_n)
			sleep(1);
	}
	return open_n;
}

/* Connections that never finish their request head (no login needed)
 * neither lock others out nor stay: FLOOD_N from one address (the cap per
 * address cuts all but the newest 32 of them), then FLOOD_N spread over
 * 127.0.0.2..127.0.0.50 (the cap on all waiting connections, half of
 * max_conns, cuts the oldest); after each a normal request is served, and
 * the header timeout closes whatever is left. A request that is complete
 * is not cut by the header timeout however long its handler takes, and a
 * kept-alive connection idle after its response is closed like a new one. */
TEST(flood_of_unfinished_requests)
{
	struct httpd_config cfg = {.listen = "127.0.0.1:0", .routes = flood_routes, .n_routes = 2,
				   .max_body = 10, .header_timeout_s = 1, .max_conns = 512};
	struct httpd *h = NULL;
	struct terr err = {0};
	CHECK_INT(httpd_start(&cfg, &h, &err), 0);
	if (!h)
		return;
	int p = httpd_port(h);
	int *fds = calloc(FLOOD_N, sizeof(int));

	int made = 0;
	for (int i = 0; i < FLOOD_N; i++)
		made += (fds[i] = half_request(p, "127.0.0.1")) >= 0;
	printf("# %d of %d unfinished requests connected from 127.0.0.1\n", made, FLOOD_N);
	CHECK(made > 64);
	CHECK(served(p));
	CHECK_INT(still_open(fds, FLOOD_N), 0);

	made = 0;
	for (int i = 0; i < FLOOD_N; i++) {
		char src[32];
		snprintf(src, sizeof(src), "127.0.0.%d", 2 + i % 49);
		made += (fds[i] = half_request(p, src)) >= 0;
	}
	printf("# %d of %d unfinished requests connected from 127.0.0.2..50\n", made, FLOOD_N);
	CHECK(made > 256);   /* past the cap on all waiting connections */
	CHECK(served(p));
	CHECK_INT(still_open(fds, FLOOD_N), 0);

	/* A complete request outlives the header timeout. */
	CHECK_INT(try_get(p, "/slow"), 200);

	/* Kept alive after a response, then idle: closed like a new one. */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	static const char req[] = "GET /v1/items/3 HTTP/1.1\r\nHost: x\r\n\r\n";
	CHECK(connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0 &&
	      send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(req) - 1);
	char got[64] = "";
	struct timeval tv = {.tv_sec = 30};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	CHECK(recv(fd, got, sizeof(got) - 1, 0) > 0);
	CHECK_CONTAINS(got, "HTTP/1.1 200");
	CHECK_INT(still_open(&fd, 1), 0);

	free(fds);
	httpd_stop(h);
}

int main(void)
{
	httpc_global_init();
	struct httpd_config cfg = {
		.listen = "127.0.0.1:0",
		.routes = routes,
		.n_routes = sizeof(routes) / sizeof(routes[0]),
		.ctx = NULL,
		.max_body = MAX_BODY,
		.authenticate = authenticate,
		.headers = default_headers,
		.n_headers = sizeof(default_headers) / sizeof(default_headers[0]),
	};
	struct httpd *h = NULL;
	struct terr err = {0};
	if (httpd_start(&cfg, &h, &err) < 0) {
		fprintf(stderr, "httpd_start: %s\n", err.msg);
		return 1;
	}
	port = httpd_port(h);
	CHECK(port > 0);
	RUN(routing_and_params);
	RUN(not_found_and_method);
	RUN(invalid_utf8_in_the_path);
	RUN(body_limit);
	RUN(authenticate_hook);
	RUN(raw_target_and_query);
	RUN(nul_in_path_or_query);
	RUN(conflicting_content_length);
	RUN(error_mapping);
	RUN(handler_without_response);
	RUN(body_in_chunks);
	RUN(response_headers);
	RUN(bytes_bodies);
	RUN(catch_all_and_any_method);
	RUN(peer_address_and_cookies);
	RUN(streams_end_or_fail);
	RUN(streamed_bodies);
	RUN(https);
	RUN(parse_listen);
	RUN(port_in_use);
	RUN(flood_of_unfinished_requests);
	httpd_stop(h);
	return testlib_done();
}
