/* agent/rpc.h's route list, from both ends: every path the manager's link
 * builds with agent_rpc_path, sent with agent_rpc_method, reaches the
 * route of the same name in a server whose table is expanded from the
 * same AGENT_RPC_ROUTES, and its {param} arrives decoded as it was given
 * (slashes, spaces, '?' and '%' included). */
#include "agent/rpc.h"
#include "common/apiclient.h"
#include "common/httpc.h"
#include "testlib.h"

/* One handler per route: answers which route it is and what it got. */
#define ECHO_HANDLER(name, handler, method, pattern) \
	static void echo_##handler(void *ctx, struct httpd_req *req, struct httpd_resp *resp) \
	{ \
		(void)ctx; \
		httpd_json(resp, 200, json_pack("{s:s,s:s?,s:s?}", "route", #name, "param", req->params[0], \
						"tail", httpd_query(req, "tail"))); \
	}
AGENT_RPC_ROUTES(ECHO_HANDLER)
#undef ECHO_HANDLER

static const struct httpd_route routes[] = {
#define ROUTE(name, handler, method, pattern) {method, pattern, echo_##handler, 0},
	AGENT_RPC_ROUTES(ROUTE)
#undef ROUTE
};

static const char *const names[] = {
#define NAME(name, handler, method, pattern) [AGENT_RPC_##name] = #name,
	AGENT_RPC_ROUTES(NAME)
#undef NAME
};

TEST(paths)
{
	char buf[256];
	struct terr err = {0};
	CHECK_INT(agent_rpc_path(AGENT_RPC_IMAGES, NULL, NULL, buf, sizeof(buf), &err), 0);
	CHECK_STR(buf, "/rpc/v1/images");
	CHECK_STR(agent_rpc_method(AGENT_RPC_IMAGES), "GET");
	CHECK_INT(agent_rpc_path(AGENT_RPC_DESTROY, "s 1/x", "container_id=abc", buf, sizeof(buf), &err), 0);
	CHECK_STR(buf, "/rpc/v1/sessions/s%201%2Fx?container_id=abc");
	CHECK_STR(agent_rpc_method(AGENT_RPC_DESTROY), "DELETE");
	CHECK_INT(agent_rpc_path(AGENT_RPC_EXEC, "c1", NULL, buf, sizeof(buf), &err), 0);
	CHECK_STR(buf, "/rpc/v1/containers/c1/exec");
	CHECK_INT(agent_rpc_path(AGENT_RPC_IMAGE, "repo/img:tag", NULL, buf, sizeof(buf), &err), 0);
	CHECK_STR(buf, "/rpc/v1/images/repo%2Fimg%3Atag");
	CHECK_INT(agent_rpc_path(AGENT_RPC_EXEC, "c1", NULL, buf, 12, &err), -ENAMETOOLONG);
}

TEST(both_ends_agree)
{
	struct httpd_config cfg = {.listen = "127.0.0.1:0", .routes = routes,
				   .n_routes = sizeof(routes) / sizeof(routes[0]), .max_body = 4096};
	struct httpd *h = NULL;
	struct terr err = {0};
	CHECK_INT(httpd_start(&cfg, &h, &err), 0);
	if (!h)
		return;
	char endpoint[64];
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", httpd_port(h));
	struct api_client c = {.endpoint = endpoint, .access_key = "manager", .secret_key = "s"};
	const char *arg = "a b/c?d%e";
	for (int r = 0; r < AGENT_RPC_COUNT; r++) {
		char path[256];
		CHECK_INT(agent_rpc_path(r, arg, "tail=7", path, sizeof(path), &err), 0);
		json_t *body = strcmp(agent_rpc_method(r), "POST") ? NULL : json_object();
		json_t *out = NULL;
		if (api_call(&c, agent_rpc_method(r), path, body, 5000, &out, NULL, &err) < 0) {
			FAILF("%s %s: %s", agent_rpc_method(r), path, err.msg);
		} else {
			CHECK_STR(json_string_value(json_object_get(out, "route")), names[r]);
			CHECK_STR(json_string_value(json_object_get(out, "tail")), "7");
			const char *param = json_string_value(json_object_get(out, "param"));
			if (param)
				CHECK_STR(param, arg);
		}
		json_decref(body);
		json_decref(out);
	}
	httpd_stop(h);
}

int main(void)
{
	httpc_global_init();
	RUN(paths);
	RUN(both_ends_agree);
	return testlib_done();
}
