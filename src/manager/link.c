#include "manager/link.h"

#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/rpc.h"
#include "common/apiclient.h"

/* ---- in-process agent ---- */

static int local_start(void *ctx, json_t *spec, char cid[RT_ID_MAX], char app_endpoint[AGENT_APP_ENDPOINT_MAX],
		       struct agent_start_times *times, struct terr *err)
{
	return agent_start_session_timed(ctx, spec, cid, app_endpoint, times, err);
}

static int local_destroy(void *ctx, const char *sid, const char *cid, struct terr *err)
{
	return agent_destroy_session(ctx, sid, cid, err);
}

static int local_exec(void *ctx, const char *cid, json_t *command, int timeout_s,
		      struct pump **out, struct terr *err)
{
	size_t n = json_array_size(command);
	const char **argv = calloc(n + 1, sizeof(char *));
	if (!argv)
		return terr_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		argv[i] = json_string_value(json_array_get(command, i));
	int rc = agent_exec_stream(ctx, cid, argv, timeout_s, out, err);
	free(argv);
	return rc;
}

static int local_logs(void *ctx, const char *cid, int tail, bool follow, struct pump **out,
		      struct terr *err)
{
	return agent_logs_stream(ctx, cid, tail, follow, out, err);
}

static int local_image_exists(void *ctx, const char *ref, bool *exists, struct terr *err)
{
	return agent_image_exists(ctx, ref, exists, err);
}

static int local_images(void *ctx, json_t **refs, struct terr *err)
{
	return agent_images(ctx, refs, err);
}

static int local_image_remove(void *ctx, const char *ref, struct terr *err)
{
	return agent_image_remove(ctx, ref, err);
}

static int local_commit(void *ctx, json_t *req, json_t **result, struct terr *err)
{
	return agent_commit(ctx, req, result, err);
}

static int local_pull(void *ctx, const char *ref, const char *registry, const char *key,
		      agent_progress_fn fn, void *ud, struct terr *err)
{
	return agent_pull(ctx, ref, registry, key, fn, ud, err);
}

static void local_release(void *ctx)
{
	(void)ctx;  /* the agent belongs to whoever attached it */
}

const struct agent_link_ops link_local_ops = {
	.name = "inproc",
	.start = local_start,
	.destroy = local_destroy,
	.exec = local_exec,
	.logs = local_logs,
	.image_exists = local_image_exists,
	.images = local_images,
	.image_remove = local_image_remove,
	.commit = local_commit,
	.pull = local_pull,
	.release = local_release,
};

/* ---- remote agent over signed HTTP ---- */

struct remote_link {
	char *url;
	char *secret;
};

void *link_remote_new(const char *url, const char *cluster_secret)
{
	struct remote_link *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->url = strdup(url);
	l->secret = strdup(cluster_secret ? cluster_secret : "");
	if (!l->url || !l->secret) {
		free(l->url);
		free(l->secret);
		free(l);
		return NULL;
	}
	return l;
}

/* Calls one of the agent's RPC routes (agent/rpc.h): arg fills its {param}
 * segment, query (already encoded) follows a "?". */
static int remote_call(struct remote_link *l, enum agent_rpc rpc, const char *arg, const char *query,
		       json_t *body, long timeout_ms, json_t **out, struct terr *err)
{
	char path[1024];
	if (agent_rpc_path(rpc, arg, query, path, sizeof(path), err) < 0)
		return terr_prefix(err, "agent at %s", l->url);
	struct api_client c = {.endpoint = l->url, .access_key = "manager", .secret_key = l->secret};
	json_t *resp = NULL;
	int rc = api_call(&c, agent_rpc_method(rpc), path, body, timeout_ms, &resp, NULL, err);
	if (rc < 0)
		return terr_prefix(err, "agent at %s", l->url);
	if (out)
		*out = resp;
	else
		json_decref(resp);
	return 0;
}

static int remote_start(void *ctx, json_t *spec, char cid[RT_ID_MAX], char app_endpoint[AGENT_APP_ENDPOINT_MAX],
			struct agent_start_times *times, struct terr *err)
{
	json_t *resp = NULL;
	memset(times, 0, sizeof(*times));
	int rc = remote_call(ctx, AGENT_RPC_START, NULL, NULL, spec, 120000, &resp, err);
	if (rc < 0)
		return rc;
	const char *id = json_string_value(json_object_get(resp, "container_id"));
	if (!id) {
		json_decref(resp);
		return terr_set(err, EIO, "agent answered a start without a container_id");
	}
	snprintf(cid, RT_ID_MAX, "%s", id);
	/* An older agent answers no app_endpoint: the session has no apps. */
	const char *ep = json_string_value(json_object_get(resp, "app_endpoint"));
	snprintf(app_endpoint, AGENT_APP_ENDPOINT_MAX, "%s", ep && strlen(ep) < AGENT_APP_ENDPOINT_MAX ? ep : "");
	/* An older agent's answer has no times; a figure that is not a
	 * whole number of milliseconds from 0 to 10 minutes is left at 0. */
	json_t *t = json_object_get(resp, "times");
	int64_t *const fields[] = {&times->total_ms, &times->image_ms, &times->network_ms,
				   &times->create_ms, &times->start_ms, &times->port_ms};
	static const char *const names[] = {"total_ms", "image_ms", "network_ms", "create_ms", "start_ms", "port_ms"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		json_t *v = json_object_get(t, names[i]);
		if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= 600000)
			*fields[i] = json_integer_value(v);
	}
	json_decref(resp);
	return 0;
}

static int remote_destroy(void *ctx, const char *sid, const char *cid, struct terr *err)
{
	char *ecid = api_escape(cid ? cid : "");
	if (!ecid)
		return terr_set(err, ENOMEM, "out of memory");
	char query[512];
	int len = snprintf(query, sizeof(query), "container_id=%s", ecid);
	free(ecid);
	if (len < 0 || (size_t)len >= sizeof(query))
		return terr_set(err, ENAMETOOLONG, "container id is too long");
	return remote_call(ctx, AGENT_RPC_DESTROY, sid, query, NULL, 60000, NULL, err);
}

/* A streamed RPC call (exec, logs): a pump's thread reads the agent's
 * answer as it comes, and the stream counts as open once the agent
 * answered 200, so its refusals stay errors of the call. The job owns
 * copies of all it needs: it may outlive a re-registration's link. */
struct remote_stream {
	char *url, *secret;
	char path[1024];
	json_t *body;
	long timeout_ms;
	struct pump *p;
};

static void remote_stream_free(void *ud)
{
	struct remote_stream *rs = ud;
	free(rs->url);
	free(rs->secret);
	json_decref(rs->body);
	free(rs);
}

static int remote_stream_open(const char *content_type, void *ud)
{
	(void)content_type;
	struct remote_stream *rs = ud;
	pump_ready(rs->p);
	return 0;
}

static int remote_stream_data(const char *data, size_t len, void *ud)
{
	struct remote_stream *rs = ud;
	return pump_write(rs->p, data, len) < 0;
}

static int remote_stream_run(struct pump *p, void *ud, struct terr *err)
{
	struct remote_stream *rs = ud;
	rs->p = p;
	struct api_client c = {.endpoint = rs->url, .access_key = "manager", .secret_key = rs->secret};
	int rc = api_stream(&c, rs->body ? "POST" : "GET", rs->path, rs->body, rs->timeout_ms, "*/*",
			    remote_stream_open, remote_stream_data, rs, pump_cancel_flag(p), NULL, err);
	return rc < 0 ? terr_prefix(err, "agent at %s", rs->url) : 0;
}

static int remote_stream_start(struct remote_link *l, enum agent_rpc rpc, const char *cid, const char *query,
			       json_t *body, long timeout_ms, struct pump **out, struct terr *err)
{
	*out = NULL;
	struct remote_stream *rs = calloc(1, sizeof(*rs));
	if (!rs)
		return terr_set(err, ENOMEM, "out of memory");
	rs->url = strdup(l->url);
	rs->secret = strdup(l->secret);
	rs->body = body ? json_incref(body) : NULL;
	rs->timeout_ms = timeout_ms;
	if (!rs->url || !rs->secret) {
		remote_stream_free(rs);
		return terr_set(err, ENOMEM, "out of memory");
	}
	if (agent_rpc_path(rpc, cid, query, rs->path, sizeof(rs->path), err) < 0) {
		remote_stream_free(rs);
		return terr_prefix(err, "agent at %s", l->url);
	}
	struct pump *p;
	int rc = pump_start(&p, 0, remote_stream_run, rs, remote_stream_free, err);
	if (rc < 0)
		return rc;
	rc = pump_wait_ready(p, err);
	if (rc < 0) {
		pump_close(p);
		return rc;
	}
	*out = p;
	return 0;
}

static int remote_exec(void *ctx, const char *cid, json_t *command, int timeout_s, struct pump **out,
		       struct terr *err)
{
	json_t *body = json_pack("{s:O,s:i}", "command", command, "timeout_s", timeout_s);
	if (!body)
		return terr_set(err, ENOMEM, "out of memory");
	/* No transfer timeout: the runner stops the command at timeout_s,
	 * and the client may take its output slowly. */
	int rc = remote_stream_start(ctx, AGENT_RPC_EXEC, cid, NULL, body, 0, out, err);
	json_decref(body);
	return rc;
}

static int remote_logs(void *ctx, const char *cid, int tail, bool follow, struct pump **out,
		       struct terr *err)
{
	char query[48];
	snprintf(query, sizeof(query), "tail=%d&follow=%d", tail, follow ? 1 : 0);
	return remote_stream_start(ctx, AGENT_RPC_LOGS, cid, query, NULL, 0, out, err);
}

static int remote_image_exists(void *ctx, const char *ref, bool *exists, struct terr *err)
{
	json_t *resp = NULL;
	int rc = remote_call(ctx, AGENT_RPC_IMAGE, ref, NULL, NULL, 15000, &resp, err);
	if (rc < 0)
		return rc;
	*exists = json_is_true(json_object_get(resp, "exists"));
	json_decref(resp);
	return 0;
}

static int remote_images(void *ctx, json_t **refs, struct terr *err)
{
	json_t *resp = NULL;
	int rc = remote_call(ctx, AGENT_RPC_IMAGES, NULL, NULL, NULL, 15000, &resp, err);
	if (rc < 0)
		return rc;
	*refs = json_incref(json_object_get(resp, "images"));
	json_decref(resp);
	if (!*refs)
		*refs = json_array();
	return 0;
}

static int remote_image_remove(void *ctx, const char *ref, struct terr *err)
{
	json_t *resp = NULL;
	int rc = remote_call(ctx, AGENT_RPC_IMAGE_REMOVE, ref, NULL, NULL, 60000, &resp, err);
	json_decref(resp);
	return rc;
}

/* A commit writes the whole filesystem and a push sends it: minutes for
 * a large image. */
#define LINK_IMAGE_TIMEOUT_MS (30L * 60 * 1000)

static int remote_commit(void *ctx, json_t *req, json_t **result, struct terr *err)
{
	const char *cid = json_string_value(json_object_get(req, "container_id"));
	return remote_call(ctx, AGENT_RPC_COMMIT, cid ? cid : "", NULL, req, LINK_IMAGE_TIMEOUT_MS, result, err);
}

static int remote_pull(void *ctx, const char *ref, const char *registry, const char *key,
		       agent_progress_fn fn, void *ud, struct terr *err)
{
	(void)fn;
	(void)ud;
	json_t *body = json_pack("{s:s,s:s,s:s}", "ref", ref, "registry", registry ? registry : "",
				 "key", key ? key : "");
	int rc = remote_call(ctx, AGENT_RPC_PULL, NULL, NULL, body, LINK_IMAGE_TIMEOUT_MS, NULL, err);
	json_decref(body);
	return rc;
}

static void remote_release(void *ctx)
{
	struct remote_link *l = ctx;
	if (!l)
		return;
	free(l->url);
	free(l->secret);
	free(l);
}

const struct agent_link_ops link_remote_ops = {
	.name = "http",
	.start = remote_start,
	.destroy = remote_destroy,
	.exec = remote_exec,
	.logs = remote_logs,
	.image_exists = remote_image_exists,
	.images = remote_images,
	.image_remove = remote_image_remove,
	.commit = remote_commit,
	.pull = remote_pull,
	.release = remote_release,
};
