/* The proxy's request framing (proxy/reqparse.h). */
#include <stdlib.h>
#include <string.h>

#include "proxy/reqparse.h"
#include "testlib.h"

/* Feeds s in pieces of `step` bytes; records the events in order as a
 * string (H head, E end, X error), the body bytes seen, and each head's
 * target separated by spaces. */
struct run {
	char events[64];
	char targets[256];
	char body[1024];
	int status;
};

static void feed(const char *s, size_t len, size_t step, struct run *r)
{
	struct reqparse p;
	reqparse_init(&p);
	memset(r, 0, sizeof(*r));
	size_t off = 0, ne = 0, nb = 0;
	while (off < len) {
		size_t n = len - off < step ? len - off : step, used = 0;
		enum reqp_event ev = reqparse_feed(&p, s + off, n, &used);
		if (p.in_body && used && nb + used < sizeof(r->body)) {
			memcpy(r->body + nb, s + off, used);
			nb += used;
		}
		off += used;
		if (ev == REQP_HEAD) {
			r->events[ne++] = 'H';
			strcat(r->targets, p.req.target);
			strcat(r->targets, " ");
		} else if (ev == REQP_END) {
			r->events[ne++] = 'E';
		} else if (ev == REQP_ERROR) {
			r->events[ne++] = 'X';
			r->status = p.status;
			break;
		}
	}
	/* A request without a body ends at the next call. */
	if (p.state == REQP_S_LENGTH && p.remaining == 0) {
		size_t used;
		if (reqparse_feed(&p, "", 0, &used) == REQP_END)
			r->events[ne++] = 'E';
	}
	reqparse_free(&p);
}

TEST(pipelined_requests_each_seen)
{
	const char *s = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
			"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
			"GET /c?q=1 HTTP/1.1\r\nHost: x\r\n\r\n";
	for (size_t step = 1; step <= strlen(s); step += step < 8 ? 1 : 13) {
		struct run r;
		feed(s, strlen(s), step, &r);
		CHECK_STR(r.events, "HEHEHE");
		CHECK_STR(r.targets, "/a /b /c?q=1 ");
		CHECK_STR(r.body, "hello");
	}
}

TEST(chunked_body_framed)
{
	const char *s = "POST /up HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
			"5;name=v\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n"
			"GET /next HTTP/1.1\r\n\r\n";
	for (size_t step = 1; step < 40; step++) {
		struct run r;
		feed(s, strlen(s), step, &r);
		CHECK_STR(r.events, "HEHE");
		CHECK_STR(r.targets, "/up /next ");
		/* Chunk framing is forwarded as it came. */
		CHECK_STR(r.body, "5;name=v\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n");
	}
}

TEST(header_fields_parsed)
{
	const char *s = "GET /ws HTTP/1.1\r\nHost: app:10205\r\nUpgrade: websocket\r\n"
			"Connection: keep-alive, Upgrade\r\nCookie:  a=1  \r\n\r\nRAW BYTES";
	struct reqparse p;
	reqparse_init(&p);
	size_t used;
	CHECK_INT(reqparse_feed(&p, s, strlen(s), &used), REQP_HEAD);
	CHECK_INT(used, strlen(s) - strlen("RAW BYTES"));
	CHECK_STR(p.req.method, "GET");
	CHECK_STR(reqparse_header(&p.req, "host"), "app:10205");
	CHECK_STR(reqparse_header(&p.req, "COOKIE"), "a=1");
	CHECK(p.req.upgrade);
	CHECK(!p.req.close);
	size_t hl;
	const char *h = reqparse_head_bytes(&p, &hl);
	CHECK_INT(hl, used);
	CHECK(!memcmp(h, s, hl));
	/* After an upgrade every byte is raw. */
	CHECK_INT(reqparse_feed(&p, "RAW BYTES", 9, &used), REQP_MORE);
	CHECK_INT(used, 9);
	CHECK(p.in_body);
	reqparse_free(&p);
}

/* CONNECT (tessera session ssh-proxy's tunnel): raw after its head,
 * whatever Content-Length it claims; a GET is not one. */
TEST(connect_is_a_tunnel)
{
	const char *s = "CONNECT sshd HTTP/1.1\r\nHost: 127.0.0.2:10205\r\nContent-Length: 4\r\n\r\nSSH-2.0-x";
	struct reqparse p;
	reqparse_init(&p);
	size_t used;
	CHECK_INT(reqparse_feed(&p, s, strlen(s), &used), REQP_HEAD);
	CHECK_STR(p.req.method, "CONNECT");
	CHECK_STR(p.req.target, "sshd");
	CHECK(p.req.connect);
	CHECK(p.req.upgrade);
	CHECK_INT((int)p.req.content_length, 0);
	CHECK_INT(reqparse_feed(&p, "SSH-2.0-x", 9, &used), REQP_MORE);
	CHECK_INT(used, 9);
	CHECK(p.in_body);
	reqparse_free(&p);
	reqparse_init(&p);
	const char *g = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
	CHECK_INT(reqparse_feed(&p, g, strlen(g), &used), REQP_HEAD);
	CHECK(!p.req.connect);
	CHECK(!p.req.upgrade);
	reqparse_free(&p);
}

TEST(http10_closes)
{
	struct reqparse p;
	reqparse_init(&p);
	size_t used;
	const char *s = "GET / HTTP/1.0\r\n\r\n";
	CHECK_INT(reqparse_feed(&p, s, strlen(s), &used), REQP_HEAD);
	CHECK(p.req.close);
	reqparse_free(&p);
}

static int error_of(const char *s, size_t len)
{
	struct run r;
	feed(s, len, len, &r);
	return strchr(r.events, 'X') ? r.status : 0;
}

TEST(oversize_head_refused)
{
	size_t n = REQP_MAX_HEAD + 100;
	char *s = malloc(n + 1);
	strcpy(s, "GET / HTTP/1.1\r\nX-Big: ");
	memset(s + strlen(s), 'a', n - strlen(s));
	s[n] = '\0';
	CHECK_INT(error_of(s, n), 431);
	/* Just under the limit passes. */
	size_t m = REQP_MAX_HEAD - 4;
	strcpy(s, "GET / HTTP/1.1\r\nX-Big: ");
	memset(s + strlen(s), 'a', m - strlen(s));
	memcpy(s + m, "\r\n\r\n", 4);
	CHECK_INT(error_of(s, REQP_MAX_HEAD), 0);
	free(s);
}

TEST(bad_syntax_refused)
{
	CHECK_INT(error_of("GET /\r\n\r\n", 9), 400);
	CHECK_INT(error_of("GET / HTTP/2.0\r\n\r\n", 18), 505);
	CHECK_INT(error_of("G(T / HTTP/1.1\r\n\r\n", 18), 400);
	CHECK_INT(error_of("GET  HTTP/1.1\r\n\r\n", 17), 400);
	const char *folded = "GET / HTTP/1.1\r\nA: 1\r\n  2\r\n\r\n";
	CHECK_INT(error_of(folded, strlen(folded)), 400);
	const char *space = "GET / HTTP/1.1\r\nHost : x\r\n\r\n";
	CHECK_INT(error_of(space, strlen(space)), 400);
	const char *cl2 = "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
	CHECK_INT(error_of(cl2, strlen(cl2)), 400);
	const char *clte = "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
	CHECK_INT(error_of(clte, strlen(clte)), 400);
	const char *te = "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n";
	CHECK_INT(error_of(te, strlen(te)), 501);
	const char *clbad = "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n";
	CHECK_INT(error_of(clbad, strlen(clbad)), 400);
	const char *badchunk = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
	CHECK_INT(error_of(badchunk, strlen(badchunk)), 400);
	const char *longchunk = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n";
	CHECK_INT(error_of(longchunk, strlen(longchunk)), 400);
	const char *huge = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n";
	CHECK_INT(error_of(huge, strlen(huge)), 400);
	const char nul[] = "GET / HTTP/1.1\r\nA: \0\r\n\r\n";
	CHECK_INT(error_of(nul, sizeof(nul) - 1), 400);
	const char *ctl = "GET / HTTP/1.1\r\nA: b\x01" "c\r\n\r\n";
	CHECK_INT(error_of(ctl, strlen(ctl)), 400);
}

TEST(cookies_stripped)
{
	const char *h = "GET / HTTP/1.1\r\nHost: x\r\nCookie: a=1; tessera_app_10205=SECRET; b=2\r\n"
			"cookie: tessera_app=x\r\nCookie: c=3\r\n\r\n";
	char out[512];
	size_t n = reqparse_strip_cookies(h, strlen(h), out);
	out[n] = '\0';
	CHECK_STR(out, "GET / HTTP/1.1\r\nHost: x\r\nCookie: a=1; b=2\r\nCookie: c=3\r\n\r\n");
	/* Nothing to strip: the same bytes. */
	const char *plain = "GET / HTTP/1.1\r\nCookie:a=1;b=2\r\n\r\n";
	n = reqparse_strip_cookies(plain, strlen(plain), out);
	out[n] = '\0';
	CHECK_STR(out, plain);
}

/* The web UI's login on the same host as an app (issue 27): its cookie,
 * under either name, never reaches the app; cookies that merely contain
 * the word stay. */
TEST(login_cookie_stripped)
{
	const char *h = "GET / HTTP/1.1\r\nHost: x\r\n"
			"Cookie: tessera_session=LOGIN; theme=dark; __Host-tessera_session=LOGIN2; "
			"__Secure-tessera_x=1; my_tessera_pref=keep; tessera_app_10205=A\r\n\r\n";
	char out[512];
	size_t n = reqparse_strip_cookies(h, strlen(h), out);
	out[n] = '\0';
	CHECK_STR(out, "GET / HTTP/1.1\r\nHost: x\r\nCookie: theme=dark; my_tessera_pref=keep\r\n\r\n");
	CHECK(!strstr(out, "LOGIN"));
	/* A line of Tessera's cookies only goes whole. */
	const char *only = "GET / HTTP/1.1\r\nCookie: tessera_session=LOGIN\r\nHost: x\r\n\r\n";
	n = reqparse_strip_cookies(only, strlen(only), out);
	out[n] = '\0';
	CHECK_STR(out, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
}

int main(void)
{
	RUN(pipelined_requests_each_seen);
	RUN(chunked_body_framed);
	RUN(header_fields_parsed);
	RUN(http10_closes);
	RUN(oversize_head_refused);
	RUN(bad_syntax_refused);
	RUN(cookies_stripped);
	RUN(login_cookie_stripped);
	RUN(connect_is_a_tunnel);
	return testlib_done();
}
