/* The runner's app port protocol: the TESSERA-APP/1 line (parsed by
 * common/apphello.c), the secret, the terminal's request head and query. */
#include "runner/proto.h"
#include "testlib.h"

#define S64 "0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcdef"

static int hello(const char *line, struct apphello *h, struct terr *err)
{
	return apphello_parse(line, strlen(line), h, err);
}

TEST(find_line)
{
	size_t len, used;
	CHECK_INT(proto_find_line("TESSERA-APP/1 x", 15, &len, &used), 0);
	CHECK_INT(proto_find_line("abc\r\nGET /", 10, &len, &used), 1);
	CHECK_INT(len, 3);
	CHECK_INT(used, 5);
	CHECK_INT(proto_find_line("abc\nrest", 8, &len, &used), 1);
	CHECK_INT(len, 3);
	CHECK_INT(used, 4);
	CHECK_INT(proto_find_line("\r\n", 2, &len, &used), 1);
	CHECK_INT(len, 0);
	char big[PROTO_LINE_MAX + 10];
	memset(big, 'a', sizeof(big));
	CHECK_INT(proto_find_line(big, PROTO_LINE_MAX - 1, &len, &used), 0);
	CHECK_INT(proto_find_line(big, PROTO_LINE_MAX, &len, &used), -EMSGSIZE);
	CHECK_INT(proto_find_line(big, sizeof(big), &len, &used), -EMSGSIZE);
	big[PROTO_LINE_MAX - 1] = '\n';
	CHECK_INT(proto_find_line(big, sizeof(big), &len, &used), 1);
	CHECK_INT(used, PROTO_LINE_MAX);
}

TEST(hello_parses_targets)
{
	struct apphello h;
	struct terr err = {0};
	CHECK_INT(hello("TESSERA-APP/1 " S64 " app:jupyter", &h, &err), 0);
	CHECK_STR(h.secret, S64);
	CHECK(!h.is_port);
	CHECK_STR(h.app, "jupyter");
	CHECK_INT(hello("TESSERA-APP/1 " S64 " app:terminal", &h, &err), 0);
	CHECK_STR(h.app, "terminal");
	CHECK_INT(hello("TESSERA-APP/1 " S64 " port:5000", &h, &err), 0);
	CHECK(h.is_port);
	CHECK_INT(h.port, 5000);
	CHECK_INT(hello("TESSERA-APP/1 " S64 " port:65535", &h, &err), 0);
	CHECK_INT(hello("TESSERA-APP/1 " S64 " port:1", &h, &err), 0);
}

TEST(hello_refuses)
{
	static const struct { const char *line, *msg; } bad[] = {
		{"", "expected \"TESSERA-APP/1"},
		{"GET / HTTP/1.1", "expected \"TESSERA-APP/1"},
		{"TESSERA-APP/2 " S64 " app:x", "expected \"TESSERA-APP/1"},
		{"tessera-app/1 " S64 " app:x", "expected \"TESSERA-APP/1"},
		{"TESSERA-APP/1 " S64, "the secret must be 64 hex"},
		{"TESSERA-APP/1 abc app:x", "the secret must be 64 hex"},
		{"TESSERA-APP/1 " S64 "0 app:x", "the secret must be 64 hex"},
		{"TESSERA-APP/1 g123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcdef app:x",
		 "the secret must be 64 hex"},
		{"TESSERA-APP/1 " S64 " ", "the target must be app:NAME or port:N"},
		{"TESSERA-APP/1 " S64 " app:", "the target must be"},
		{"TESSERA-APP/1 " S64 " jupyter", "the target must be"},
		{"TESSERA-APP/1 " S64 " app:a b", "is not an app name"},
		{"TESSERA-APP/1 " S64 " app:../x", "is not an app name"},
		{"TESSERA-APP/1 " S64 "  app:x", "the target must be"},
		{"TESSERA-APP/1 " S64 " port:", "the target must be"},
		{"TESSERA-APP/1 " S64 " port:0", "from 1 to 65535"},
		{"TESSERA-APP/1 " S64 " port:65536", "from 1 to 65535"},
		{"TESSERA-APP/1 " S64 " port:99999999999999999999", "from 1 to 65535"},
		{"TESSERA-APP/1 " S64 " port:-1", "from 1 to 65535"},
		{"TESSERA-APP/1 " S64 " port:80x", "from 1 to 65535"},
		{"TESSERA-APP/1 " S64 " port:7611", "port 7611 is the runner's own"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct apphello h;
		struct terr err = {0};
		if (hello(bad[i].line, &h, &err) != -EINVAL)
			FAILF("\"%s\" was taken", bad[i].line);
		CHECK_CONTAINS(err.msg, bad[i].msg);
	}
	/* A NUL inside the line is not a name character either. */
	struct apphello h;
	struct terr err = {0};
	const char line[] = "TESSERA-APP/1 " S64 " app:ju\0x";
	CHECK_INT(apphello_parse(line, sizeof(line) - 1, &h, &err), -EINVAL);
}

TEST(secret)
{
	char a[] = S64, b[] = S64;
	CHECK(proto_secret_equal(a, b));
	b[63] = '0';
	CHECK(!proto_secret_equal(a, b));
	b[63] = a[63];
	b[0] = '1';
	CHECK(!proto_secret_equal(a, b));
	char out[PROTO_SECRET_LEN + 1];
	struct terr err = {0};
	CHECK_INT(proto_parse_secret(S64 "\n", 65, out, &err), 0);
	CHECK_STR(out, S64);
	CHECK_INT(proto_parse_secret(S64, 64, out, &err), 0);
	CHECK_INT(proto_parse_secret(S64 "\r\n", 66, out, &err), 0);
	CHECK_INT(proto_parse_secret(S64 "\n\n", 66, out, &err), -EINVAL);
	CHECK_INT(proto_parse_secret(S64 "0", 65, out, &err), -EINVAL);
	CHECK_INT(proto_parse_secret("", 0, out, &err), -EINVAL);
	CHECK_INT(proto_parse_secret(" " S64, 65, out, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "64 hex characters");
}

TEST(http_head)
{
	static const char req[] =
		"GET /ws?term=t1&cols=120&rows=40 HTTP/1.1\r\n"
		"Host: x\r\n"
		"upgrade: WebSocket\r\n"
		"Connection: keep-alive, Upgrade\r\n"
		"Sec-WebSocket-Key:  dGhlIHNhbXBsZSBub25jZQ==  \r\n"
		"Sec-WebSocket-Version: 13\r\n"
		"\r\n"
		"extra";
	size_t used;
	CHECK_INT(proto_find_head(req, sizeof(req) - 1, &used), 1);
	CHECK_INT(used, sizeof(req) - 1 - 5);
	CHECK_INT(proto_find_head(req, 20, &used), 0);
	struct proto_http_req r;
	struct terr err = {0};
	CHECK_INT(proto_parse_http_head(req, used, &r, &err), 0);
	CHECK_STR(r.method, "GET");
	CHECK_STR(r.path, "/ws");
	CHECK_STR(r.query, "term=t1&cols=120&rows=40");
	CHECK(r.upgrade_websocket);
	CHECK(r.connection_upgrade);
	CHECK_STR(r.ws_key, "dGhlIHNhbXBsZSBub25jZQ==");
	CHECK_STR(r.ws_version, "13");

	static const char plain[] = "POST /x HTTP/1.0\r\nConnection: close\r\n\r\n";
	CHECK_INT(proto_parse_http_head(plain, sizeof(plain) - 1, &r, &err), 0);
	CHECK_STR(r.path, "/x");
	CHECK_STR(r.query, "");
	CHECK(!r.upgrade_websocket && !r.connection_upgrade && !r.ws_key[0]);

	CHECK_INT(proto_parse_http_head("GET /\r\n\r\n", 9, &r, &err), -EINVAL);
	CHECK_INT(proto_parse_http_head("garbage\r\n\r\n", 11, &r, &err), -EINVAL);
	CHECK_INT(proto_parse_http_head("GET  HTTP/1.1\r\n\r\n", 17, &r, &err), -EINVAL);
	CHECK_INT(proto_parse_http_head("GET / SPDY/3\r\n\r\n", 16, &r, &err), -EINVAL);
	char big[PROTO_HEAD_MAX + 1];
	memset(big, 'a', sizeof(big));
	CHECK_INT(proto_find_head(big, sizeof(big), &used), -EMSGSIZE);
}

TEST(term_query)
{
	struct proto_term_query q;
	struct terr err = {0};
	CHECK_INT(proto_parse_term_query("", &q, &err), 0);
	CHECK_STR(q.term, "main");
	CHECK_INT(q.cols, 0);
	CHECK_INT(proto_parse_term_query("term=new&cols=80&rows=24", &q, &err), 0);
	CHECK_STR(q.term, "new");
	CHECK_INT(q.cols, 80);
	CHECK_INT(q.rows, 24);
	CHECK_INT(proto_parse_term_query("x=1&term=a_B-9", &q, &err), 0);
	CHECK_STR(q.term, "a_B-9");
	CHECK_INT(proto_parse_term_query("term=a%2Db", &q, &err), 0);
	CHECK_STR(q.term, "a-b");
	CHECK_INT(proto_parse_term_query("term=", &q, &err), -EINVAL);
	CHECK_INT(proto_parse_term_query("term=a/b", &q, &err), -EINVAL);
	CHECK_INT(proto_parse_term_query("term=a%2Fb", &q, &err), -EINVAL);
	CHECK_INT(proto_parse_term_query("term=0123456789012345678901234567890123", &q, &err), -EINVAL);
	CHECK_INT(proto_parse_term_query("term=01234567890123456789012345678901", &q, &err), 0);
	CHECK_INT(proto_parse_term_query("cols=0", &q, &err), -EINVAL);
	CHECK_INT(proto_parse_term_query("cols=10001", &q, &err), -EINVAL);
	CHECK_INT(proto_parse_term_query("rows=abc", &q, &err), -EINVAL);
	CHECK_INT(proto_parse_term_query("rows=", &q, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "rows must be a number");
	char v[8];
	CHECK_INT(proto_query_get("a=1&b=x+y%21", "b", v, sizeof(v)), 1);
	CHECK_STR(v, "x y!");
	CHECK_INT(proto_query_get("ab=1", "a", v, sizeof(v)), 0);
	CHECK_INT(proto_query_get("a", "a", v, sizeof(v)), 1);
	CHECK_STR(v, "");
	CHECK_INT(proto_query_get("a=123456789", "a", v, sizeof(v)), -EINVAL);
	/* A NUL from %00 would cut the value short: "main%00x" is no "main". */
	CHECK_INT(proto_query_get("a=x%00y", "a", v, sizeof(v)), -EINVAL);
	CHECK_INT(proto_parse_term_query("term=main%00x", &q, &err), -EINVAL);
	/* Numbers are digits only: no sign, no spaces (strtol takes both). */
	CHECK_INT(proto_parse_term_query("cols=%2B80", &q, &err), -EINVAL);
	CHECK_INT(proto_parse_term_query("cols=+80", &q, &err), -EINVAL);
	CHECK_INT(proto_parse_term_query("rows=%2024", &q, &err), -EINVAL);
	CHECK_INT(proto_parse_term_query("rows=24%20", &q, &err), -EINVAL);
}

int main(void)
{
	RUN(find_line);
	RUN(hello_parses_targets);
	RUN(hello_refuses);
	RUN(secret);
	RUN(http_head);
	RUN(term_query);
	return testlib_done();
}
