/* manager/approutes.c: the proxy's settings, what {app} may be, route
 * allocation (one port per session and target, kept, freed with the
 * session, refused when the range is full; hosts in host mode), and
 * tokens (single use, expiry, bound to what they were made for, only
 * their hash kept). */
#include "common/util.h"
#include "manager/approutes.h"
#include "testlib.h"

#include <stdlib.h>

#include "common/sign.h"

#define SID_A "aaaaaaaa11112222333344445555"
#define SID_B "bbbbbbbb11112222333344445555"

TEST(settings)
{
	struct terr err = {0};
	int lo, hi;
	CHECK_INT(util_parse_port_range("10205-10300", &lo, &hi, &err), 0);
	CHECK_INT(lo, 10205);
	CHECK_INT(hi, 10300);
	CHECK_INT(util_parse_port_range("8000-8000", &lo, &hi, &err), 0);
	static const char *const bad_ranges[] = {"", "10300-10205", "0-10", "1-65536", "a-b", "100", "-5",
						 "5-", "1-2-3", "99999999-100000000", " 1-2"};
	for (size_t i = 0; i < sizeof(bad_ranges) / sizeof(bad_ranges[0]); i++) {
		err = (struct terr){0};
		CHECK_INT(util_parse_port_range(bad_ranges[i], &lo, &hi, &err), -EINVAL);
		CHECK_CONTAINS(err.msg, "FIRST-LAST");
	}
	CHECK_INT(approutes_check_domain("example.org", &err), 0);
	CHECK_INT(approutes_check_domain("a-b.c1.example", &err), 0);
	static const char *const bad_domains[] = {"", ".org", "a..b", "-a.org", "a-.org", "a_b.org", "a.org/x",
						  "a.org:80"};
	for (size_t i = 0; i < sizeof(bad_domains) / sizeof(bad_domains[0]); i++)
		CHECK_INT(approutes_check_domain(bad_domains[i], &err), -EINVAL);
	char scheme[8], host[64];
	int port;
	CHECK_INT(approutes_parse_base("http://127.0.0.1", scheme, sizeof(scheme), host, sizeof(host), &port, &err), 0);
	CHECK_STR(scheme, "http");
	CHECK_STR(host, "127.0.0.1");
	CHECK_INT(port, 0);
	CHECK_INT(approutes_parse_base("https://apps.example.org:8443/", scheme, sizeof(scheme), host, sizeof(host),
				       &port, &err), 0);
	CHECK_STR(scheme, "https");
	CHECK_STR(host, "apps.example.org");
	CHECK_INT(port, 8443);
	CHECK_INT(approutes_parse_base("http://[::1]:80", scheme, sizeof(scheme), host, sizeof(host), &port, &err), 0);
	CHECK_STR(host, "[::1]");
	static const char *const bad_bases[] = {"127.0.0.1", "ftp://x", "http://", "http://x:0", "http://x:99999",
						"http://x/path", "http://a b", "http://x:8a"};
	for (size_t i = 0; i < sizeof(bad_bases) / sizeof(bad_bases[0]); i++) {
		err = (struct terr){0};
		CHECK_INT(approutes_parse_base(bad_bases[i], scheme, sizeof(scheme), host, sizeof(host), &port, &err),
			  -EINVAL);
		CHECK_CONTAINS(err.msg, "proxy's URL");
	}
}

TEST(app_names)
{
	struct terr err = {0};
	int port;
	char app[APPROUTES_APP_MAX], target[APPROUTES_TARGET_MAX];
	CHECK_INT(approutes_parse_app("jupyter", &port, app, target, &err), 0);
	CHECK_INT(port, 0);
	CHECK_STR(app, "jupyter");
	CHECK_STR(target, "app:jupyter");
	CHECK_INT(approutes_parse_app("8888", &port, app, target, &err), 0);
	CHECK_INT(port, 8888);
	CHECK_STR(app, "port-8888");
	CHECK_STR(target, "port:8888");
	CHECK_INT(approutes_parse_app("1", &port, app, target, &err), 0);
	CHECK_INT(approutes_parse_app("65535", &port, app, target, &err), 0);
	static const char *const bad_ports[] = {"0", "7611", "65536", "70000", "00000000000000000080"};
	for (size_t i = 0; i < sizeof(bad_ports) / sizeof(bad_ports[0]); i++) {
		err = (struct terr){0};
		CHECK_INT(approutes_parse_app(bad_ports[i], &port, app, target, &err), -EINVAL);
		CHECK_CONTAINS(err.msg, "port must be 1 to 65535 and not 7611");
	}
	static const char *const bad_names[] = {"", "a b", "../x", "x/y", "café",
		"a123456789012345678901234567890123456789012345678901234567890123456789"};
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		err = (struct terr){0};
		CHECK_INT(approutes_parse_app(bad_names[i], &port, app, target, &err), -EINVAL);
		CHECK_CONTAINS(err.msg, "app must be");
	}
}

TEST(port_routes)
{
	struct approutes r;
	struct terr err = {0};
	approutes_init(&r, 10205, 10207, NULL);
	const struct approute *a1, *a2, *again;
	uint64_t g0 = r.generation;
	CHECK_INT(approutes_open(&r, SID_A, "terminal", "app:terminal", &a1, &err), 0);
	CHECK_INT(a1->port, 10205);
	CHECK_STR(a1->host, "");
	CHECK(r.generation != g0);
	int p1 = a1->port;
	/* The same (session, target) keeps its port, without a change. */
	uint64_t g1 = r.generation;
	CHECK_INT(approutes_open(&r, SID_A, "terminal", "app:terminal", &again, &err), 0);
	CHECK_INT(again->port, p1);
	CHECK(r.generation == g1);
	CHECK_INT(approutes_open(&r, SID_A, "jupyter", "app:jupyter", &a2, &err), 0);
	CHECK_INT(a2->port, 10206);
	CHECK_INT(approutes_open(&r, SID_B, "terminal", "app:terminal", &a2, &err), 0);
	CHECK_INT(a2->port, 10207);
	/* Full: three ports, three routes. */
	err = (struct terr){0};
	CHECK_INT(approutes_open(&r, SID_B, "port-8888", "port:8888", &a2, &err), -EBUSY);
	CHECK_STR(err.msg, "all 3 app ports are in use; close sessions or widen wsproxy port range");
	CHECK(approutes_find(&r, SID_B, "port:8888") == NULL);
	/* A's session ends: its two ports come free, B's stays. */
	uint64_t g2 = r.generation;
	CHECK_INT((int)approutes_drop_session(&r, SID_A), 2);
	CHECK(r.generation != g2);
	CHECK(approutes_find(&r, SID_A, "app:terminal") == NULL);
	CHECK(approutes_find(&r, SID_B, "app:terminal") != NULL);
	CHECK_INT(approutes_find(&r, SID_B, "app:terminal")->port, 10207);
	uint64_t g3 = r.generation;
	CHECK_INT((int)approutes_drop_session(&r, SID_A), 0);
	CHECK(r.generation == g3);
	CHECK_INT(approutes_open(&r, SID_B, "port-8888", "port:8888", &a2, &err), 0);
	CHECK_INT(a2->port, 10205);
	CHECK_STR(a2->target, "port:8888");
	CHECK_STR(a2->app, "port-8888");
	approutes_free(&r);
}

TEST(host_routes)
{
	struct approutes r;
	struct terr err = {0};
	approutes_init(&r, 10205, 10205, "example.org");
	const struct approute *a;
	CHECK_INT(approutes_open(&r, SID_A, "jupyter", "app:jupyter", &a, &err), 0);
	CHECK_INT(a->port, 0);
	CHECK_STR(a->host, "jupyter.aaaaaaaa.apps.example.org");
	/* Hosts are not limited by the range. */
	CHECK_INT(approutes_open(&r, SID_A, "port-8888", "port:8888", &a, &err), 0);
	CHECK_STR(a->host, "port-8888.aaaaaaaa.apps.example.org");
	CHECK_INT(approutes_open(&r, SID_B, "My_App.x", "app:My_App.x", &a, &err), 0);
	CHECK_STR(a->host, "my-app-x.bbbbbbbb.apps.example.org");
	approutes_free(&r);
}

TEST(tokens)
{
	struct approutes r;
	struct terr err = {0};
	approutes_init(&r, 10205, 10300, NULL);
	char t1[APPROUTES_TOKEN_HEX + 1], t2[APPROUTES_TOKEN_HEX + 1];
	int64_t now = 1000000;
	CHECK_INT(approutes_token_issue(&r, "user-a", SID_A, "jupyter", "app:jupyter", now, t1, &err), 0);
	CHECK_INT((int)strlen(t1), 64);
	CHECK_INT(approutes_token_issue(&r, "user-a", SID_A, "jupyter", "app:jupyter", now, t2, &err), 0);
	CHECK(strcmp(t1, t2) != 0);
	/* Only the hash is kept. */
	char h[SIGN_HEX_LEN + 1];
	sign_sha256_hex(t1, strlen(t1), h);
	for (size_t i = 0; i < r.n_tokens; i++)
		CHECK(strstr((const char *)&r.t[i], t1) == NULL);
	CHECK_STR(r.t[0].hash, h);

	struct apptoken out;
	CHECK_INT(approutes_token_redeem(&r, t1, now + 59999, &out, &err), 0);
	CHECK_STR(out.user_id, "user-a");
	CHECK_STR(out.session_id, SID_A);
	CHECK_STR(out.app, "jupyter");
	CHECK_STR(out.target, "app:jupyter");
	/* Single use. */
	err = (struct terr){0};
	CHECK_INT(approutes_token_redeem(&r, t1, now + 59999, &out, &err), -EACCES);
	CHECK_CONTAINS(err.msg, "this link was already used");
	/* 60 s. */
	err = (struct terr){0};
	CHECK_INT(approutes_token_redeem(&r, t2, now + 60000, &out, &err), -EACCES);
	CHECK_CONTAINS(err.msg, "this link expired");
	/* Unknown, malformed, and one token changed by a character. */
	static const char *const unknown[] = {"", "x", "0000000000000000000000000000000000000000000000000000000000000000",
					      "zz"};
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		err = (struct terr){0};
		CHECK_INT(approutes_token_redeem(&r, unknown[i], now, &out, &err), -EACCES);
		CHECK_CONTAINS(err.msg, "this link is not valid");
	}
	CHECK_INT(approutes_token_redeem(&r, NULL, now, &out, &err), -EACCES);
	char t3[APPROUTES_TOKEN_HEX + 1];
	CHECK_INT(approutes_token_issue(&r, "user-b", SID_B, "port-8888", "port:8888", now, t3, &err), 0);
	char tampered[APPROUTES_TOKEN_HEX + 1];
	memcpy(tampered, t3, sizeof(tampered));
	tampered[10] = tampered[10] == 'a' ? 'b' : 'a';
	err = (struct terr){0};
	CHECK_INT(approutes_token_redeem(&r, tampered, now, &out, &err), -EACCES);
	CHECK_CONTAINS(err.msg, "not valid");
	/* A session that leaves RUNNING takes its unused tokens with it. */
	approutes_drop_session(&r, SID_B);
	err = (struct terr){0};
	CHECK_INT(approutes_token_redeem(&r, t3, now, &out, &err), -EACCES);
	CHECK_CONTAINS(err.msg, "already used");
	/* Forgotten after APPROUTES_TOKEN_KEEP_MS: then unknown. */
	err = (struct terr){0};
	CHECK_INT(approutes_token_redeem(&r, t2, now + APPROUTES_TOKEN_KEEP_MS + 1, &out, &err), -EACCES);
	CHECK_CONTAINS(err.msg, "not valid");
	CHECK_INT((int)r.n_tokens, 0);
	approutes_free(&r);
}

TEST(token_limit)
{
	struct approutes r;
	struct terr err = {0};
	approutes_init(&r, 10205, 10300, NULL);
	char t[APPROUTES_TOKEN_HEX + 1];
	int64_t now = 5000000;
	int made = 0;
	while (made <= APPROUTES_MAX_TOKENS && approutes_token_issue(&r, "u", SID_A, "terminal", "app:terminal", now,
								     t, &err) == 0)
		made++;
	CHECK_INT(made, APPROUTES_MAX_TOKENS);
	CHECK_INT(err.code, EAGAIN);
	/* Old ones age out, and new ones can be made again. */
	CHECK_INT(approutes_token_issue(&r, "u", SID_A, "terminal", "app:terminal", now + APPROUTES_TOKEN_KEEP_MS + 1,
					t, &err), 0);
	CHECK_INT((int)r.n_tokens, 1);
	approutes_free(&r);
}

/* What a restarted manager reads back: the routes on their ports (even
 * outside a new range), the tokens with their state, never a token. */
TEST(restart_keeps_routes_and_tokens)
{
	struct approutes r, back;
	struct terr err = {0};
	approutes_init(&r, 10205, 10300, NULL);
	const struct approute *out;
	CHECK_INT(approutes_open(&r, SID_A, "terminal", "app:terminal", &out, &err), 0);
	CHECK_INT(approutes_open(&r, SID_A, "port-8888", "port:8888", &out, &err), 0);
	char t1[APPROUTES_TOKEN_HEX + 1], t2[APPROUTES_TOKEN_HEX + 1];
	int64_t now = 1000000;
	CHECK_INT(approutes_token_issue(&r, "user-a", SID_A, "terminal", "app:terminal", now, t1, &err), 0);
	CHECK_INT(approutes_token_issue(&r, "user-a", SID_A, "port-8888", "port:8888", now, t2, &err), 0);
	struct apptoken used;
	CHECK_INT(approutes_token_redeem(&r, t1, now + 10, &used, &err), 0);
	json_t *doc = approutes_to_json(&r);
	char *text = json_dumps(doc, 0);
	CHECK(text && !strstr(text, t1) && !strstr(text, t2));
	free(text);
	approutes_init(&back, 20000, 20010, NULL);
	CHECK_INT((int)approutes_load_json(&back, doc, now + 1000), 2);
	CHECK_INT(approutes_find(&back, SID_A, "port:8888")->port, 10206);
	CHECK_INT(approutes_token_redeem(&back, t2, now + 2000, &used, &err), 0);
	CHECK_STR(used.target, "port:8888");
	CHECK_INT(approutes_token_redeem(&back, t1, now + 2000, &used, &err), -EACCES);
	CHECK_CONTAINS(err.msg, "already used");
	/* Loaded twice: nothing doubles. */
	CHECK_INT((int)approutes_load_json(&back, doc, now + 1000), 0);
	CHECK_INT((int)back.n, 2);
	/* Tokens past their memory are not brought back. */
	struct approutes late;
	approutes_init(&late, 10205, 10300, NULL);
	approutes_load_json(&late, doc, now + APPROUTES_TOKEN_KEEP_MS + 1);
	CHECK_INT((int)late.n_tokens, 0);
	json_decref(doc);
	approutes_free(&r);
	approutes_free(&back);
	approutes_free(&late);
}

int main(void)
{
	RUN(settings);
	RUN(app_names);
	RUN(port_routes);
	RUN(host_routes);
	RUN(tokens);
	RUN(token_limit);
	RUN(restart_keeps_routes_and_tokens);
	return testlib_done();
}
