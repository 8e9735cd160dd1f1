/* The route table (proxy/routes.h): parsing the manager's answers and
 * routing by port and by Host. */
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "proxy/routes.h"
#include "testlib.h"

static const char *doc_text =
	"{\"generation\": 7, \"routes\": ["
	"{\"session_id\": \"s1\", \"app\": \"jupyter\", \"target\": \"app:jupyter\", \"endpoint\": \"127.0.0.1:32768\","
	" \"secret\": \"aa\", \"port\": 10205},"
	"{\"session_id\": \"s2\", \"app\": \"terminal\", \"target\": \"app:terminal\", \"endpoint\": \"127.0.0.1:32769\","
	" \"secret\": \"bb\", \"port\": 10206},"
	"{\"session_id\": \"s3\", \"app\": \"port-8888\", \"target\": \"port:8888\", \"endpoint\": \"[::1]:1\","
	" \"secret\": \"cc\", \"host\": \"Port-8888.ABCD1234.apps.example.org\"}]}";

TEST(routes_by_port_and_host)
{
	json_error_t je;
	json_t *doc = json_loads(doc_text, 0, &je);
	struct route_table t;
	struct terr err = {0};
	CHECK_INT(routes_parse(doc, &t, &err), 0);
	CHECK_INT(t.n, 3);
	CHECK_INT(t.generation, 7);
	const struct proxy_route *r = routes_by_port(&t, 10206);
	CHECK(r && !strcmp(r->session_id, "s2"));
	CHECK(routes_by_port(&t, 10207) == NULL);
	r = routes_by_host(&t, "port-8888.abcd1234.apps.EXAMPLE.org:10200");
	CHECK(r && !strcmp(r->target, "port:8888"));
	CHECK(routes_by_host(&t, "jupyter.abcd1234.apps.example.org") == NULL);
	CHECK(routes_by_host(&t, NULL) == NULL);
	CHECK(routes_by_host(&t, "evil/..") == NULL);
	/* Host-mode routes are not served by port. */
	CHECK(routes_by_port(&t, 0) == NULL);
	routes_free(&t);
	json_decref(doc);
}

TEST(redeemed_route_added_once)
{
	json_error_t je;
	json_t *doc = json_loads(doc_text, 0, &je);
	struct route_table t;
	struct terr err = {0};
	routes_parse(doc, &t, &err);
	json_t *one = json_loads("{\"user\": \"u\", \"session_id\": \"s9\", \"target\": \"app:x\","
				 " \"endpoint\": \"localhost:5\", \"secret\": \"dd\", \"port\": 10210}", 0, &je);
	struct proxy_route r;
	CHECK_INT(routes_parse_one(one, true, &r, &err), 0);
	CHECK_STR(r.user, "u");
	json_t *both = json_loads("{\"user\": \"a@b.c\", \"user_id\": \"U7\", \"session_id\": \"s9\", \"target\": \"app:x\","
				  " \"endpoint\": \"127.0.0.1:5\", \"secret\": \"dd\", \"port\": 10211}", 0, &je);
	struct proxy_route r2;
	CHECK_INT(routes_parse_one(both, true, &r2, &err), 0);
	CHECK_STR(r2.user, "U7");
	json_decref(both);
	CHECK_INT(routes_add(&t, &r), 0);
	CHECK_INT(routes_add(&t, &r), 0);
	CHECK_INT(t.n, 4);
	CHECK(routes_by_port(&t, 10210) != NULL);
	routes_free(&t);
	json_decref(one);
	json_decref(doc);
}

static int parse_err(const char *text)
{
	json_error_t je;
	json_t *o = json_loads(text, 0, &je);
	struct proxy_route r;
	struct terr err = {0};
	int rc = routes_parse_one(o, true, &r, &err);
	json_decref(o);
	return rc;
}

static int parse_ep(const char *ep, struct proxy_route *r, struct terr *err)
{
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i}", "session_id", "s", "target", "app:x", "endpoint", ep, "secret",
			      "aa", "port", 10205);
	int rc = routes_parse_one(o, false, r, err);
	json_decref(o);
	return rc;
}

/* The endpoint's direct part (issue 30, docs/apps.md "The direct path"):
 * resolved only for this host's netns key, never by name. */
TEST(direct_path_parsed_for_this_host_only)
{
	char key[UTIL_NETNS_KEY_LEN + 1], ep[200];
	util_netns_key(key);
	CHECK_INT((int)strlen(key), UTIL_NETNS_KEY_LEN);
	struct proxy_route r;
	struct terr err = {0};
	snprintf(ep, sizeof(ep), "127.0.0.1:32768,172.18.0.5:7611@%s", key);
	CHECK_INT(parse_ep(ep, &r, &err), 0);
	CHECK_STR(r.direct, "172.18.0.5:7611");
	CHECK_INT((int)r.direct_len, (int)sizeof(struct sockaddr_in));
	CHECK_INT(ntohs(((struct sockaddr_in *)&r.addr)->sin_port), 32768);
	CHECK_INT(ntohs(((struct sockaddr_in *)&r.direct_addr)->sin_port), 7611);
	snprintf(ep, sizeof(ep), "127.0.0.1:32768,[fd00::5]:7611@%s", key);
	CHECK_INT(parse_ep(ep, &r, &err), 0);
	CHECK_STR(r.direct, "[fd00::5]:7611");
	CHECK_INT((int)r.direct_len, (int)sizeof(struct sockaddr_in6));
	/* Another host's: kept in the text, not dialled. */
	CHECK_INT(parse_ep("127.0.0.1:32768,172.18.0.5:7611@0123456789abcdef", &r, &err), 0);
	CHECK_STR(r.direct, "");
	CHECK_INT((int)r.direct_len, 0);
	CHECK_INT(parse_ep("127.0.0.1:32768", &r, &err), 0);
	CHECK_INT((int)r.direct_len, 0);
	/* Malformed. */
	CHECK_INT(parse_ep("127.0.0.1:32768,172.18.0.5:7611", &r, &err), -EINVAL);
	CHECK(strstr(err.msg, "IP:PORT@KEY") != NULL);
	CHECK_INT(parse_ep("127.0.0.1:32768,172.18.0.5:7611@abc", &r, &err), -EINVAL);
	snprintf(ep, sizeof(ep), "127.0.0.1:32768,localhost:7611@%s", key);
	CHECK_INT(parse_ep(ep, &r, &err), -EINVAL);
	CHECK(strstr(err.msg, "not numeric") != NULL);
	snprintf(ep, sizeof(ep), "127.0.0.1:32768,172.18.0.5:x@%s", key);
	CHECK_INT(parse_ep(ep, &r, &err), -EINVAL);
}

TEST(bad_routes_refused)
{
	CHECK_INT(parse_err("{\"session_id\": \"s\", \"target\": \"app:x\", \"endpoint\": \"127.0.0.1:5\","
			    " \"secret\": \"dd\", \"port\": 1}"), -EINVAL);  /* no user */
	CHECK_INT(parse_err("{\"user\": \"u\", \"session_id\": \"s\", \"target\": \"x\", \"endpoint\": \"127.0.0.1:5\","
			    " \"secret\": \"dd\", \"port\": 1}"), -EINVAL);
	CHECK_INT(parse_err("{\"user\": \"u\", \"session_id\": \"s\", \"target\": \"app:x\", \"endpoint\": \"127.0.0.1\","
			    " \"secret\": \"dd\", \"port\": 1}"), -EINVAL);
	CHECK_INT(parse_err("{\"user\": \"u\", \"session_id\": \"s\", \"target\": \"app:x\", \"endpoint\": \"127.0.0.1:5\","
			    " \"secret\": \"dd\"}"), -EINVAL);  /* no port nor host */
	CHECK_INT(parse_err("{\"user\": \"u\", \"session_id\": \"s|t\", \"target\": \"app:x\", \"endpoint\": \"127.0.0.1:5\","
			    " \"secret\": \"dd\", \"port\": 1}"), -EINVAL);
	CHECK_INT(parse_err("{\"user\": \"u\", \"session_id\": \"s\", \"target\": \"app:x\", \"endpoint\": \"127.0.0.1:5\","
			    " \"secret\": \"dd\", \"port\": 70000}"), -EINVAL);
	json_error_t je;
	json_t *doc = json_loads("{\"generation\": 1, \"routes\": [{}]}", 0, &je);
	struct route_table t;
	struct terr err = {0};
	CHECK_INT(routes_parse(doc, &t, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "routes[0]");
	json_decref(doc);
	doc = json_loads("{\"routes\": []}", 0, &je);
	CHECK_INT(routes_parse(doc, &t, &err), -EINVAL);
	json_decref(doc);
}

int main(void)
{
	RUN(routes_by_port_and_host);
	RUN(redeemed_route_added_once);
	RUN(bad_routes_refused);
	RUN(direct_path_parsed_for_this_host_only);
	return testlib_done();
}
