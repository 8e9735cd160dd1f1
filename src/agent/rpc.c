#include "agent/rpc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/apiclient.h"
#include "common/frames.h"
#include "common/pump.h"
#include "common/jsonutil.h"
#include "common/metrics.h"
#include "common/sign.h"

struct rpc_ctx {
	struct agent *agent;
	const char *secret;
};

/* Routes of this flag need no signature: GET /metrics, which Prometheus
 * scrapes; the agent's port is cluster-internal and the metrics hold no
 * secret (docs/admin.md, "Metrics"). */
#define RPC_OPEN 1

static int rpc_authenticate(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct rpc_ctx *rc = ctx;
	if (req->route_flags & RPC_OPEN)
		return 0;
	const char *authz = httpd_header(req, "Authorization");
	const char *date = httpd_header(req, "Date");
	const char *host = httpd_header(req, "Host");
	char ak[128], sig[SIGN_HEX_LEN + 1];
	struct terr err = {0};
	if (!authz || !date || !host) {
		httpd_error(resp, 401, "unauthenticated", "agent RPC must be signed by the manager");
		return -1;
	}
	if (sign_parse_authorization(authz, ak, sizeof(ak), sig, &err) < 0 ||
	    strcmp(ak, "manager") != 0 ||
	    sign_verify(rc->secret, sig, req->method, req->target, date, host, req->body, req->body_len,
			time(NULL), &err) < 0) {
		httpd_error(resp, 401, "unauthenticated", "agent RPC refused: %s",
			    err.msg[0] ? err.msg : "credential must be 'manager'");
		return -1;
	}
	return 0;
}

/* The body as the manager's API parses its own (jsonutil_parse_body). */
static json_t *parse(struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	json_t *b = jsonutil_parse_body(req->body, req->body_len, JSONUTIL_BODY_MAX_DEPTH, &err);
	if (!b)
		httpd_error_terr(resp, &err);
	return b;
}

static void rpc_start(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct rpc_ctx *rc = ctx;
	json_t *spec = parse(req, resp);
	if (!spec)
		return;
	char cid[RT_ID_MAX], endpoint[AGENT_APP_ENDPOINT_MAX];
	struct agent_start_times t;
	struct terr err = {0};
	if (agent_start_session_timed(rc->agent, spec, cid, endpoint, &t, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 201, json_pack("{s:s,s:s,s:{s:I,s:I,s:I,s:I,s:I,s:I}}", "container_id", cid,
						"app_endpoint", endpoint, "times", "total_ms", (json_int_t)t.total_ms,
						"image_ms", (json_int_t)t.image_ms, "network_ms", (json_int_t)t.network_ms,
						"create_ms", (json_int_t)t.create_ms, "start_ms", (json_int_t)t.start_ms,
						"port_ms", (json_int_t)t.port_ms));
	json_decref(spec);
}

static void rpc_destroy(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct rpc_ctx *rc = ctx;
	struct terr err = {0};
	if (agent_destroy_session(rc->agent, req->params[0], httpd_query(req, "container_id"), &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 200, json_object());
}

/* The command's output is streamed (common/frames.h) as Docker gives it,
 * never held whole here. */
static void rpc_exec(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct rpc_ctx *rc = ctx;
	json_t *body = parse(req, resp);
	if (!body)
		return;
	json_t *cmd = json_object_get(body, "command");
	size_t n = json_array_size(cmd);
	const char **argv = calloc(n + 1, sizeof(char *));
	bool ok = argv && n > 0;
	for (size_t i = 0; ok && i < n; i++)
		ok = (argv[i] = json_string_value(json_array_get(cmd, i))) != NULL;
	if (!ok) {
		httpd_error(resp, 400, "invalid_argument", "command must be a non-empty array of strings");
	} else {
		struct pump *p = NULL;
		struct terr err = {0};
		json_t *tmo = json_object_get(body, "timeout_s");
		int timeout_s = json_is_integer(tmo) && json_integer_value(tmo) > 0 &&
					json_integer_value(tmo) <= 86400
				? (int)json_integer_value(tmo) : 0;
		if (agent_exec_stream(rc->agent, req->params[0], argv, timeout_s, &p, &err) < 0)
			httpd_error_terr(resp, &err);
		else
			pump_respond(p, req, resp, 200, FRAMES_CONTENT_TYPE, NULL, NULL);
	}
	free(argv);
	json_decref(body);
}

static void rpc_logs(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct rpc_ctx *rc = ctx;
	const char *t = httpd_query(req, "tail");
	const char *f = httpd_query(req, "follow");
	struct pump *p = NULL;
	struct terr err = {0};
	if (agent_logs_stream(rc->agent, req->params[0], t ? atoi(t) : 0, f && !strcmp(f, "1"), &p, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		pump_respond(p, req, resp, 200, "text/plain; charset=utf-8", NULL, NULL);
}

static void rpc_image(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct rpc_ctx *rc = ctx;
	bool exists = false;
	struct terr err = {0};
	if (agent_image_exists(rc->agent, req->params[0], &exists, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 200, json_pack("{s:b}", "exists", exists));
}

static void rpc_images(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)req;
	struct rpc_ctx *rc = ctx;
	json_t *refs = NULL;
	struct terr err = {0};
	if (agent_images(rc->agent, &refs, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 200, json_pack("{s:o}", "images", refs));
}

static void rpc_image_remove(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct rpc_ctx *rc = ctx;
	struct terr err = {0};
	if (agent_image_remove(rc->agent, req->params[0], &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 200, json_object());
}

static void rpc_commit(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct rpc_ctx *rc = ctx;
	json_t *body = parse(req, resp);
	if (!body)
		return;
	json_object_set_new(body, "container_id", json_string(req->params[0]));
	json_t *out = NULL;
	struct terr err = {0};
	if (agent_commit(rc->agent, body, &out, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 201, out);
	json_decref(body);
}

/* The pull's progress goes through the agent's event path (the uplink),
 * keyed by the caller's "key": this call answers once it is done. */
static void rpc_pull(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct rpc_ctx *rc = ctx;
	json_t *body = parse(req, resp);
	if (!body)
		return;
	struct terr err = {0};
	if (agent_pull(rc->agent, json_string_value(json_object_get(body, "ref")),
		       json_string_value(json_object_get(body, "registry")),
		       json_string_value(json_object_get(body, "key")), NULL, NULL, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 200, json_object());
	json_decref(body);
}

static void rpc_metrics(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)req;
	struct rpc_ctx *rc = ctx;
	struct metrics_text t = {0};
	agent_metrics_write(rc->agent, &t);
	char *text = metrics_text_take(&t);
	if (!text) {
		httpd_error(resp, 500, "internal", "out of memory");
		return;
	}
	httpd_bytes(resp, 200, METRICS_CONTENT_TYPE, text, strlen(text));
	free(text);
}

static const struct httpd_route rpc_routes[] = {
#define RPC_ROUTE(name, handler, method, pattern) {method, pattern, rpc_##handler, 0},
	AGENT_RPC_ROUTES(RPC_ROUTE)
#undef RPC_ROUTE
	{"GET", "/metrics", rpc_metrics, RPC_OPEN},
};

static const struct {
	const char *method, *pattern;
} rpc_defs[AGENT_RPC_COUNT] = {
#define RPC_DEF(name, handler, method, pattern) [AGENT_RPC_##name] = {method, pattern},
	AGENT_RPC_ROUTES(RPC_DEF)
#undef RPC_DEF
};

const char *agent_rpc_method(enum agent_rpc rpc)
{
	return rpc_defs[rpc].method;
}

int agent_rpc_path(enum agent_rpc rpc, const char *arg, const char *query, char *buf, size_t n,
		   struct terr *err)
{
	const char *pattern = rpc_defs[rpc].pattern;
	const char *open = strchr(pattern, '{'), *close = open ? strchr(open, '}') : NULL;
	char *escaped = NULL;
	int len;
	if (open && close) {
		if (!(escaped = api_escape(arg ? arg : "")))
			return terr_set(err, ENOMEM, "out of memory");
		len = snprintf(buf, n, "%.*s%s%s%s%s", (int)(open - pattern), pattern, escaped, close + 1,
			       query ? "?" : "", query ? query : "");
	} else {
		len = snprintf(buf, n, "%s%s%s", pattern, query ? "?" : "", query ? query : "");
	}
	free(escaped);
	if (len < 0 || (size_t)len >= n)
		return terr_set(err, ENAMETOOLONG, "agent RPC path for '%.64s' is too long", arg ? arg : "");
	return 0;
}

int agent_rpc_start(struct agent *a, const char *listen, const char *cluster_secret,
		    struct httpd **out, struct terr *err)
{
	/* Lives as long as the process: the daemon never restarts its server. */
	static struct rpc_ctx ctx;
	ctx.agent = a;
	ctx.secret = cluster_secret;
	struct httpd_config hc = {
		.listen = listen,
		.routes = rpc_routes,
		.n_routes = sizeof(rpc_routes) / sizeof(rpc_routes[0]),
		.ctx = &ctx,
		.max_body = 1 << 20,
		.authenticate = rpc_authenticate,
	};
	return httpd_start(&hc, out, err);
}
