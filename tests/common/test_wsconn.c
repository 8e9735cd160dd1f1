/* The CLI's WebSocket client (src/common/wsconn.c): URLs, the handshake
 * request and the check of its answer (a good and a bad accept key),
 * messages read from bytes (fragmented, with control frames between the
 * fragments, fed a byte at a time), frames it sends as a server reads
 * them; then wsconn_open and wsconn_http_get against a small server on a
 * loopback socket, run in a thread of this test. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/wsconn.h"
#include "common/ws.h"
#include "testlib.h"

/* RFC 6455 1.3's example. */
#define RFC_KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define RFC_ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

static bool starts_with(const char *s, const char *prefix)
{
	return s && !strncmp(s, prefix, strlen(prefix));
}

TEST(parses_app_urls)
{
	struct wsconn_url u;
	struct terr err = {0};
	CHECK_INT(wsconn_parse_url("http://127.0.0.1:10205/__tessera/setup?token=ab12", &u, &err), 0);
	CHECK_STR(u.host, "127.0.0.1");
	CHECK_STR(u.port, "10205");
	CHECK_STR(u.authority, "127.0.0.1:10205");
	CHECK_STR(u.path, "/__tessera/setup?token=ab12");
	CHECK_INT(wsconn_parse_url("http://terminal.s1.apps.example.org/__tessera/setup?token=x#frag", &u, &err), 0);
	CHECK_STR(u.host, "terminal.s1.apps.example.org");
	CHECK_STR(u.port, "80");
	CHECK_STR(u.path, "/__tessera/setup?token=x");
	CHECK_INT(wsconn_parse_url("http://[::1]:8080", &u, &err), 0);
	CHECK_STR(u.host, "::1");
	CHECK_STR(u.authority, "[::1]:8080");
	CHECK_STR(u.path, "/");
	CHECK_INT(wsconn_parse_url("http://h:1?q", &u, &err), 0);
	CHECK_STR(u.path, "/?q");
	const char *bad[] = {"https://h/x", "ftp://h", "http://", "http:///x", "http://h:0/", "http://h:65536/",
			     "http://h:x/", "http://u@h/", "http://h/a b", "http://[::1/", "http://h:/"};
	/* A host longer than the host buffer but within the authority's. */
	char long_host[300] = "http://";
	memset(long_host + 7, 'h', 262);
	CHECK_INT(wsconn_parse_url(long_host, &u, &err), -EINVAL);
	strcat(long_host, ":80");
	CHECK_INT(wsconn_parse_url(long_host, &u, &err), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = wsconn_parse_url(bad[i], &u, &err);
		if (r != -EINVAL)
			FAILF("'%s' gave %d, expected -EINVAL", bad[i], r);
		CHECK(err.msg[0] != '\0');
	}
}

TEST(builds_the_upgrade_request)
{
	char *req = NULL;
	struct terr err = {0};
	CHECK_INT(wsconn_build_request("127.0.0.1:10207", "/ws?term=new&cols=100&rows=30", RFC_KEY,
				       "tessera_app_10207=v.sig", &req, &err), 0);
	CHECK(starts_with(req, "GET /ws?term=new&cols=100&rows=30 HTTP/1.1\r\n"));
	CHECK_CONTAINS(req, "\r\nHost: 127.0.0.1:10207\r\n");
	CHECK_CONTAINS(req, "\r\nUpgrade: websocket\r\n");
	CHECK_CONTAINS(req, "\r\nConnection: Upgrade\r\n");
	CHECK_CONTAINS(req, "\r\nSec-WebSocket-Key: " RFC_KEY "\r\n");
	CHECK_CONTAINS(req, "\r\nSec-WebSocket-Version: 13\r\n");
	CHECK_CONTAINS(req, "\r\nOrigin: http://127.0.0.1:10207\r\n");
	CHECK_CONTAINS(req, "\r\nCookie: tessera_app_10207=v.sig\r\n");
	size_t n = strlen(req);
	CHECK(n > 4 && !strcmp(req + n - 4, "\r\n\r\n"));
	CHECK_INT(wsconn_head_len(req, n), n);  /* one head, ended once */
	free(req);
	CHECK_INT(wsconn_build_request("h", "/ws", RFC_KEY, NULL, &req, &err), 0);
	CHECK(req && !strstr(req, "Cookie"));
	free(req);
	req = NULL;
	CHECK_INT(wsconn_build_request("h", "/ws", RFC_KEY, "a=b\r\nX-Evil: 1", &req, &err), -EINVAL);
	CHECK(req == NULL);
}

TEST(checks_the_answer)
{
	struct terr err = {0};
	int status = -1;
	const char *good = "HTTP/1.1 101 Switching Protocols\r\n"
			   "upgrade: WebSocket\r\n"
			   "Connection: keep-alive, Upgrade\r\n"
			   "Sec-WebSocket-Accept:   " RFC_ACCEPT "  \r\n\r\n";
	CHECK_INT(wsconn_check_response(good, strlen(good), RFC_KEY, &status, &err), 0);
	CHECK_INT(status, 101);

	const char *wrong_key = "HTTP/1.1 101 Switching Protocols\r\n"
				"Upgrade: websocket\r\nConnection: Upgrade\r\n"
				"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOp=\r\n\r\n";
	CHECK_INT(wsconn_check_response(wrong_key, strlen(wrong_key), RFC_KEY, &status, &err), -EPROTO);
	CHECK_CONTAINS(err.msg, "Sec-WebSocket-Accept does not match");

	const char *no_key = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
	CHECK_INT(wsconn_check_response(no_key, strlen(no_key), RFC_KEY, &status, &err), -EPROTO);
	CHECK_CONTAINS(err.msg, "no Sec-WebSocket-Accept");

	const char *no_upgrade = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
				 "Sec-WebSocket-Accept: " RFC_ACCEPT "\r\n\r\n";
	CHECK_INT(wsconn_check_response(no_upgrade, strlen(no_upgrade), RFC_KEY, &status, &err), -EPROTO);

	const char *no_conn = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgraded\r\n"
			      "Sec-WebSocket-Accept: " RFC_ACCEPT "\r\n\r\n";
	CHECK_INT(wsconn_check_response(no_conn, strlen(no_conn), RFC_KEY, &status, &err), -EPROTO);

	const char *starting = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";
	CHECK_INT(wsconn_check_response(starting, strlen(starting), RFC_KEY, &status, &err), -EPROTO);
	CHECK_INT(status, 503);

	const char *junk = "SSH-2.0-OpenSSH\r\n\r\n";
	CHECK_INT(wsconn_check_response(junk, strlen(junk), RFC_KEY, &status, &err), -EPROTO);
	CHECK_INT(status, 0);
}

TEST(reads_heads_and_cookies)
{
	const char *head = "HTTP/1.1 302 Found\r\n"
			   "Set-Cookie: other=1; Path=/\r\n"
			   "Location: /\r\n"
			   "set-cookie: tessera_app_10205=dXNlcg.c2ln ; HttpOnly; SameSite=Strict; Path=/\r\n"
			   "\r\nbody";
	size_t hl = wsconn_head_len(head, strlen(head));
	CHECK_INT(hl, strlen(head) - 4);
	CHECK_INT(wsconn_head_len(head, hl - 1), 0);
	struct terr err = {0};
	CHECK_INT(wsconn_head_status(head, hl, &err), 302);
	char v[64];
	CHECK_INT(wsconn_head_header(head, hl, "location", 0, v, sizeof(v)), 1);
	CHECK_STR(v, "/");
	CHECK_INT(wsconn_head_header(head, hl, "Set-Cookie", 1, v, 8), (int)strlen("tessera_app_10205=dXNlcg.c2ln ; HttpOnly; SameSite=Strict; Path=/"));
	CHECK_STR(v, "tessera");  /* cut to the buffer */
	CHECK_INT(wsconn_head_header(head, hl, "Set-Cookie", 2, v, sizeof(v)), -ENOENT);
	CHECK_INT(wsconn_head_header(head, hl, "Set", 0, v, sizeof(v)), -ENOENT);  /* names match whole */
	char *cookie = NULL;
	CHECK_INT(wsconn_setup_cookie(head, hl, &cookie, &err), 0);
	CHECK_STR(cookie, "tessera_app_10205=dXNlcg.c2ln");
	free(cookie);

	const char *host_mode = "HTTP/1.1 302 Found\r\nSet-Cookie: tessera_app=abc\r\n\r\n";
	CHECK_INT(wsconn_setup_cookie(host_mode, strlen(host_mode), &cookie, &err), 0);
	CHECK_STR(cookie, "tessera_app=abc");
	free(cookie);

	const char *none = "HTTP/1.1 302 Found\r\nSet-Cookie: session=abc\r\nSet-Cookie: tessera_app_1=\r\n\r\n";
	CHECK_INT(wsconn_setup_cookie(none, strlen(none), &cookie, &err), -ENOENT);
	CHECK(cookie == NULL);

	CHECK_INT(wsconn_head_status("HTTP/1.1 20 OK\r\n\r\n", 18, &err), -EPROTO);
	CHECK_INT(wsconn_head_status("HTTP/1.0 403\r\n\r\n", 16, &err), 403);
}

TEST(summarises_error_pages)
{
	char out[80];
	const char *page = "<!doctype html><html><head><title>Forbidden</title><style>p{color:red}</style></head>"
			   "<body>\n<h1>403 &amp; no</h1>\n  <p>This   link was already used &lt;once&gt;.</p>"
			   "<script>var x = 1 < 2;</script></body></html>";
	wsconn_page_text(page, strlen(page), out, sizeof(out));
	CHECK_STR(out, "403 & no This link was already used <once>.");
	wsconn_page_text("plain\ntext", 10, out, sizeof(out));
	CHECK_STR(out, "plain text");
	char small[12];
	wsconn_page_text("a long line of text", 19, small, sizeof(small));
	CHECK_STR(small, "a long l...");
	wsconn_page_text("", 0, out, sizeof(out));
	CHECK_STR(out, "");
}

TEST(decodes_chunked_bodies)
{
	const char *in = "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n";
	char out[64];
	bool complete;
	size_t n = strlen(in);
	CHECK_INT(wsconn_dechunk(in, n, out, sizeof(out), &complete), 12);
	CHECK(complete);
	CHECK(!memcmp(out, "hello, world", 12));
	/* Cut anywhere: what is whole so far, not complete. */
	for (size_t cut = 0; cut < n - 3; cut++) {
		long r = wsconn_dechunk(in, cut, out, sizeof(out), &complete);
		if (r < 0 || r > 12 || complete)
			FAILF("cut at %zu: %ld, complete %d", cut, r, complete);
	}
	CHECK_INT(wsconn_dechunk(in, n, out, 4, &complete), 4);  /* kept to cap */
	CHECK(complete);
	CHECK_INT(wsconn_dechunk("zz\r\nab\r\n", 9, out, sizeof(out), &complete), -1);
	CHECK_INT(wsconn_dechunk("2\r\nabX\r\n", 9, out, sizeof(out), &complete), -1);
}

/* A server's (unmasked) frame into out: its length. */
static size_t server_frame(uint8_t *out, bool fin, enum ws_opcode op, const char *payload, size_t len)
{
	size_t h = ws_write_header(out, fin, op, len, NULL);
	memcpy(out + h, payload, len);
	return h + len;
}

TEST(reads_messages_from_bytes)
{
	uint8_t buf[70000];
	size_t n = 0;
	/* A binary message in three fragments, with a ping and a pong in
	 * between; a text message; a 60000-byte one (a 16-bit length); a
	 * close with "exit 3". */
	n += server_frame(buf + n, false, WS_OP_BINARY, "hel", 3);
	n += server_frame(buf + n, true, WS_OP_PING, "p1", 2);
	n += server_frame(buf + n, false, WS_OP_CONT, "lo ", 3);
	n += server_frame(buf + n, true, WS_OP_PONG, "", 0);
	n += server_frame(buf + n, true, WS_OP_CONT, "world", 5);
	n += server_frame(buf + n, true, WS_OP_TEXT, "\xc3\xa9t\xc3\xa9", 6);
	static char big[60000];
	memset(big, 'x', sizeof(big));
	n += server_frame(buf + n, true, WS_OP_BINARY, big, sizeof(big));
	n += server_frame(buf + n, true, WS_OP_CLOSE, "\x03\xe8" "exit 3", 8);

	/* Whole, then a byte at a time: the same messages. */
	for (int bytewise = 0; bytewise < 2; bytewise++) {
		struct wsconn_reader r;
		struct terr err = {0};
		wsconn_reader_init(&r, 1 << 20);
		struct wsconn_msg m;
		int got[6] = {0};
		size_t fed = 0;
		int k = 0;
		while (k < 6) {
			int res = wsconn_reader_next(&r, &m, &err);
			if (res < 0) {
				FAILF("reader error: %s", err.msg);
				break;
			}
			if (res == 0) {
				if (fed == n) {
					FAILF("bytes ran out after %d messages", k);
					break;
				}
				size_t step = bytewise ? 1 : n;
				CHECK_INT(wsconn_reader_feed(&r, buf + fed, step, &err), 0);
				fed += step;
				continue;
			}
			got[k] = 1;
			switch (k) {
			case 0:
				CHECK_INT(m.opcode, WS_OP_PING);
				CHECK(m.len == 2 && !memcmp(m.data, "p1", 2));
				break;
			case 1:
				CHECK_INT(m.opcode, WS_OP_PONG);
				CHECK_INT(m.len, 0);
				break;
			case 2:
				CHECK_INT(m.opcode, WS_OP_BINARY);
				CHECK(m.len == 11 && !memcmp(m.data, "hello world", 11));
				break;
			case 3:
				CHECK_INT(m.opcode, WS_OP_TEXT);
				CHECK(m.len == 6 && !memcmp(m.data, "\xc3\xa9t\xc3\xa9", 6));
				break;
			case 4:
				CHECK_INT(m.opcode, WS_OP_BINARY);
				CHECK(m.len == sizeof(big) && !memcmp(m.data, big, sizeof(big)));
				break;
			case 5: {
				CHECK_INT(m.opcode, WS_OP_CLOSE);
				int code;
				char reason[WS_CONTROL_MAX];
				wsconn_close_info(m.data, m.len, &code, reason, sizeof(reason));
				CHECK_INT(code, 1000);
				CHECK_STR(reason, "exit 3");
				break;
			}
			}
			k++;
		}
		CHECK_INT(k, 6);
		CHECK(got[5]);
		CHECK_INT(fed, n);
		CHECK_INT(wsconn_reader_next(&r, &m, &err), 0);
		wsconn_reader_free(&r);
	}
}

TEST(refuses_bad_frames)
{
	struct terr err = {0};
	struct wsconn_msg m;
	uint8_t buf[64];
	struct wsconn_reader r;

	/* A continuation with no message begun. */
	wsconn_reader_init(&r, 1024);
	size_t n = server_frame(buf, true, WS_OP_CONT, "x", 1);
	wsconn_reader_feed(&r, buf, n, &err);
	CHECK_INT(wsconn_reader_next(&r, &m, &err), -EPROTO);
	wsconn_reader_free(&r);

	/* A new message inside a fragmented one. */
	wsconn_reader_init(&r, 1024);
	n = server_frame(buf, false, WS_OP_TEXT, "a", 1);
	n += server_frame(buf + n, true, WS_OP_BINARY, "b", 1);
	wsconn_reader_feed(&r, buf, n, &err);
	CHECK_INT(wsconn_reader_next(&r, &m, &err), -EPROTO);
	wsconn_reader_free(&r);

	/* A masked frame: servers never send one. */
	wsconn_reader_init(&r, 1024);
	static const uint8_t mask[4] = {1, 2, 3, 4};
	n = wsconn_encode(buf, WS_OP_BINARY, "abc", 3, mask);
	wsconn_reader_feed(&r, buf, n, &err);
	CHECK_INT(wsconn_reader_next(&r, &m, &err), -EPROTO);
	wsconn_reader_free(&r);

	/* Fragments adding up to more than the limit. */
	wsconn_reader_init(&r, 4);
	n = server_frame(buf, false, WS_OP_BINARY, "abc", 3);
	n += server_frame(buf + n, true, WS_OP_CONT, "de", 2);
	wsconn_reader_feed(&r, buf, n, &err);
	CHECK_INT(wsconn_reader_next(&r, &m, &err), -EMSGSIZE);
	wsconn_reader_free(&r);

	/* A close frame without a code. */
	int code;
	char reason[8];
	wsconn_close_info(NULL, 0, &code, reason, sizeof(reason));
	CHECK_INT(code, 1005);
	CHECK_STR(reason, "");
}

TEST(encodes_masked_frames)
{
	static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
	uint8_t out[WS_MAX_HEADER + 300];
	uint8_t payload[300];
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)i;
	size_t lens[] = {0, 5, 125, 126, 300};
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		size_t n = wsconn_encode(out, WS_OP_BINARY, payload, lens[k], mask);
		struct ws_frame f;
		struct terr err = {0};
		int h = ws_parse_header(out, n, true, 1 << 20, &f, &err);
		CHECK(h > 0);
		CHECK(f.fin && f.masked && f.opcode == WS_OP_BINARY);
		CHECK_INT(f.len, lens[k]);
		CHECK_INT((size_t)h + lens[k], n);
		CHECK(!memcmp(f.mask, mask, 4));
		if (lens[k] >= 5)
			CHECK(memcmp(out + h, payload, 5) != 0);  /* masked on the wire */
		ws_mask(out + h, lens[k], f.mask, 0);
		CHECK(!memcmp(out + h, payload, lens[k]));
	}
	/* RFC 6455 5.7: "Hello" masked with 37 fa 21 3d. */
	size_t n = wsconn_encode(out, WS_OP_TEXT, "Hello", 5, mask);
	static const uint8_t rfc[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58};
	CHECK_INT(n, sizeof(rfc));
	CHECK(!memcmp(out, rfc, sizeof(rfc)));
}

/* ---- against a loopback server ---- */

struct fake_server {
	int lfd;
	int mode;            /* what it answers: see fake_serve */
	char request[4096];  /* the head it got */
	uint8_t frame[256];  /* the first frame it got after the upgrade, unmasked */
	size_t frame_len;
};

static int fake_listen(struct fake_server *s, char port[6])
{
	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s->lfd, 4) < 0 ||
	    getsockname(s->lfd, (struct sockaddr *)&a, &al) < 0)
		return -1;
	snprintf(port, 6, "%u", ntohs(a.sin_port));
	return 0;
}

static void write_str(int fd, const char *s)
{
	if (write(fd, s, strlen(s)) < 0)
		return;
}

/* mode 0: a good upgrade, then a binary frame "hi", then reads the
 * client's first frame, then close "exit 7". mode 1: an upgrade with a
 * wrong accept key. mode 2: 403 with an HTML page. mode 3: the setup's
 * 302 with the cookie. mode 4: 503 with a chunked page, the connection
 * kept open until the client closes it. mode 5: a CONNECT's 200 with the
 * tunnel's first bytes in the same write, then echoes a line. */
static void *fake_serve(void *arg)
{
	struct fake_server *s = arg;
	int fd = accept(s->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	size_t n = 0;
	while (n < sizeof(s->request) - 1 && !wsconn_head_len(s->request, n)) {
		ssize_t r = read(fd, s->request + n, sizeof(s->request) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	s->request[n] = '\0';
	char key[64] = "", accept_key[WS_ACCEPT_LEN + 1] = "";
	wsconn_head_header(s->request, n, "Sec-WebSocket-Key", 0, key, sizeof(key));
	ws_accept_key(key, accept_key, NULL);
	char resp[512];
	if (s->mode == 0 || s->mode == 1) {
		if (s->mode == 1)
			accept_key[0] = accept_key[0] == 'A' ? 'B' : 'A';
		snprintf(resp, sizeof(resp),
			 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
			 "Sec-WebSocket-Accept: %s\r\n\r\n",
			 accept_key);
		/* The first frame in the same write as the head: the client
		 * must keep what follows the head. */
		uint8_t f[16];
		size_t fl = server_frame(f, true, WS_OP_BINARY, "hi", 2);
		size_t rl = strlen(resp);
		memcpy(resp + rl, f, fl);
		if (write(fd, resp, rl + fl) < 0)
			goto out;
		if (s->mode == 0) {
			uint8_t b[256];
			size_t got = 0;
			struct ws_frame wf;
			int h = 0;
			while (got < sizeof(b)) {
				ssize_t r = read(fd, b + got, sizeof(b) - got);
				if (r <= 0)
					break;
				got += (size_t)r;
				h = ws_parse_header(b, got, true, 200, &wf, NULL);
				if (h < 0 || (h > 0 && got >= h + wf.len))
					break;
			}
			if (h > 0 && got >= h + wf.len) {
				ws_mask(b + h, wf.len, wf.mask, 0);
				memcpy(s->frame, b + h, wf.len);
				s->frame_len = wf.len;
			}
			size_t cl = server_frame(f, true, WS_OP_CLOSE, "\x03\xe8" "exit 7", 8);
			if (write(fd, f, cl) < 0)
				goto out;
		}
	} else if (s->mode == 2) {
		const char *page = "<html><head><title>Forbidden</title></head><body><p>This link was already used.</p></body></html>";
		snprintf(resp, sizeof(resp), "HTTP/1.1 403 Forbidden\r\nContent-Type: text/html\r\nContent-Length: %zu\r\n\r\n%s",
			 strlen(page), page);
		write_str(fd, resp);
	} else if (s->mode == 4) {
		write_str(fd, "HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n"
			      "9\r\n<p>starti\r\n13\r\nng jupyter: waiting\r\n4\r\n</p>\r\n0\r\n\r\n");
		char b[64];
		while (read(fd, b, sizeof(b)) > 0)
			;
	} else if (s->mode == 5) {
		write_str(fd, "HTTP/1.1 200 Connection established\r\n\r\nSSH-2.0-fake\r\n");
		char b[64];
		ssize_t r = read(fd, b, sizeof(b));
		if (r > 0 && write(fd, b, (size_t)r) < 0)
			goto out;
	} else {
		write_str(fd, "HTTP/1.1 302 Found\r\nLocation: /\r\n"
			      "Set-Cookie: tessera_app_1234=val.sig; HttpOnly; SameSite=Strict; Path=/\r\n"
			      "Content-Length: 0\r\n\r\n");
	}
out:
	close(fd);
	return NULL;
}

static int fake_url(struct wsconn_url *u, const char *port, const char *path)
{
	char url[128];
	snprintf(url, sizeof(url), "http://127.0.0.1:%s%s", port, path);
	return wsconn_parse_url(url, u, NULL);
}

TEST(talks_to_a_server)
{
	struct fake_server s = {.mode = 0};
	char port[6];
	CHECK_INT(fake_listen(&s, port), 0);
	pthread_t th;
	pthread_create(&th, NULL, fake_serve, &s);
	struct wsconn_url u;
	CHECK_INT(fake_url(&u, port, "/ws?term=new&cols=80&rows=24"), 0);
	struct wsconn c;
	struct terr err = {0};
	int status = -1;
	int r = wsconn_open(&c, &u, "tessera_app_1=v", 10000, &status, &err);
	CHECK_INT(r, 0);
	if (r == 0) {
		struct wsconn_msg m;
		/* "hi" came with the head: there before any recv. */
		CHECK_INT(wsconn_reader_next(&c.rd, &m, &err), 1);
		CHECK(m.opcode == WS_OP_BINARY && m.len == 2 && !memcmp(m.data, "hi", 2));
		CHECK_INT(wsconn_send(&c, WS_OP_BINARY, "\x00ls\r", 4, &err), 0);
		int got = 0;
		while ((r = wsconn_reader_next(&c.rd, &m, &err)) == 0 && wsconn_recv(&c, &err) > 0)
			;
		got = r;
		CHECK_INT(got, 1);
		CHECK_INT(m.opcode, WS_OP_CLOSE);
		int code;
		char reason[32];
		wsconn_close_info(m.data, m.len, &code, reason, sizeof(reason));
		CHECK_STR(reason, "exit 7");
		CHECK_INT(wsconn_recv(&c, &err), 0);  /* then the end of the stream */
		wsconn_close(&c);
	}
	pthread_join(th, NULL);
	CHECK(starts_with(s.request, "GET /ws?term=new&cols=80&rows=24 HTTP/1.1\r\n"));
	CHECK_CONTAINS(s.request, "Cookie: tessera_app_1=v\r\n");
	char host[64];
	snprintf(host, sizeof(host), "Host: 127.0.0.1:%s\r\n", port);
	CHECK_CONTAINS(s.request, host);
	CHECK(s.frame_len == 4 && !memcmp(s.frame, "\x00ls\r", 4));
	close(s.lfd);
}

TEST(refuses_a_wrong_accept_and_reports_a_refusal)
{
	for (int mode = 1; mode <= 4; mode += mode == 2 ? 2 : 1) {
		struct fake_server s = {.mode = mode};
		char port[6];
		CHECK_INT(fake_listen(&s, port), 0);
		pthread_t th;
		pthread_create(&th, NULL, fake_serve, &s);
		struct wsconn_url u;
		fake_url(&u, port, "/ws");
		struct wsconn c;
		struct terr err = {0};
		int status = -1;
		CHECK_INT(wsconn_open(&c, &u, NULL, 10000, &status, &err), -EPROTO);
		if (mode == 1) {
			CHECK_INT(status, 101);
			CHECK_CONTAINS(err.msg, "does not match");
		} else if (mode == 2) {
			CHECK_INT(status, 403);
			CHECK_STR(err.msg, "403: This link was already used.");
		} else {
			CHECK_INT(status, 503);
			CHECK_STR(err.msg, "503: starting jupyter: waiting");
		}
		pthread_join(th, NULL);
		close(s.lfd);
	}
}

TEST(gets_the_setup_cookie)
{
	struct fake_server s = {.mode = 3};
	char port[6];
	CHECK_INT(fake_listen(&s, port), 0);
	pthread_t th;
	pthread_create(&th, NULL, fake_serve, &s);
	struct wsconn_url u;
	fake_url(&u, port, "/__tessera/setup?token=00ff");
	int status = 0;
	char *head = NULL, *body = NULL, *cookie = NULL;
	struct terr err = {0};
	CHECK_INT(wsconn_http_get(&u, 10000, &status, &head, &body, &err), 0);
	CHECK_INT(status, 302);
	CHECK_STR(body, "");
	CHECK_INT(wsconn_setup_cookie(head, strlen(head), &cookie, &err), 0);
	CHECK_STR(cookie, "tessera_app_1234=val.sig");
	pthread_join(th, NULL);
	CHECK(starts_with(s.request, "GET /__tessera/setup?token=00ff HTTP/1.1\r\n"));
	free(head);
	free(body);
	free(cookie);
	close(s.lfd);

	/* Nothing listens there any more. */
	CHECK(wsconn_http_get(&u, 10000, &status, &head, &body, &err) < 0);
	CHECK_CONTAINS(err.msg, "cannot connect to 127.0.0.1");
}

TEST(opens_a_tunnel)
{
	struct fake_server s = {.mode = 5};
	char port[6];
	CHECK_INT(fake_listen(&s, port), 0);
	pthread_t th;
	pthread_create(&th, NULL, fake_serve, &s);
	struct wsconn_url u;
	fake_url(&u, port, "/");
	int fd = -1, status = 0;
	char *extra = NULL;
	size_t n = 0;
	struct terr err = {0};
	CHECK_INT(wsconn_http_connect(&u, "sshd", "tessera_app_1=v", 10000, &fd, &extra, &n, &status, &err), 0);
	CHECK_INT(status, 200);
	/* The tunnel's first bytes came with the answer: kept, not lost. */
	CHECK_INT((int)n, 14);
	CHECK(extra && !memcmp(extra, "SSH-2.0-fake\r\n", 14));
	write_str(fd, "ping\n");
	char b[16] = "";
	CHECK_INT((int)read(fd, b, sizeof(b) - 1), 5);
	CHECK_STR(b, "ping\n");
	close(fd);
	free(extra);
	pthread_join(th, NULL);
	CHECK(starts_with(s.request, "CONNECT sshd HTTP/1.1\r\n"));
	CHECK(strstr(s.request, "\r\nCookie: tessera_app_1=v\r\n") != NULL);
	close(s.lfd);

	/* A refusal: its status and its page's words, no socket. */
	struct fake_server r = {.mode = 4};
	CHECK_INT(fake_listen(&r, port), 0);
	pthread_create(&th, NULL, fake_serve, &r);
	fake_url(&u, port, "/");
	CHECK(wsconn_http_connect(&u, "sshd", NULL, 10000, &fd, &extra, &n, &status, &err) < 0);
	CHECK_INT(status, 503);
	CHECK_INT(fd, -1);
	CHECK_CONTAINS(err.msg, "starting jupyter: waiting");
	pthread_join(th, NULL);
	close(r.lfd);
	/* A line break cannot get into the request. */
	CHECK_INT(wsconn_http_connect(&u, "ss\r\nhd", NULL, 10000, &fd, &extra, &n, &status, &err), -EINVAL);
}

int main(void)
{
	RUN(parses_app_urls);
	RUN(builds_the_upgrade_request);
	RUN(checks_the_answer);
	RUN(reads_heads_and_cookies);
	RUN(summarises_error_pages);
	RUN(decodes_chunked_bodies);
	RUN(reads_messages_from_bytes);
	RUN(refuses_bad_frames);
	RUN(encodes_masked_frames);
	RUN(talks_to_a_server);
	RUN(refuses_a_wrong_accept_and_reports_a_refusal);
	RUN(gets_the_setup_cookie);
	RUN(opens_a_tunnel);
	return testlib_done();
}
