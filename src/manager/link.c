#include "manager/link.h"

#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "common/apiclient.h"

/* ---- in-process agent ---- */

static int local_start(void *ctx, json_t *spec, char cid[RT_ID_MAX], struct terr *err)
{
	return agent_start_session(ctx, spec, cid, err);
}

static int local_destroy(void *ctx, const char *sid, const char *cid, struct terr *err)
{
	return agent_destroy_session(ctx, sid, cid, err);
}

static int local_exec(void *ctx, const char *cid, json_t *command, int timeout_s,
		      json_t **result, struct terr *err)
{
	size_t n = json_array_size(command);
	const char **argv = calloc(n + 1, sizeof(char *));
	if (!argv)
		return terr_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		argv[i] = json_string_value(json_array_get(command, i));
	struct rt_exec_result r = {0};
	int rc = agent_exec(ctx, cid, argv, timeout_s, &r, err);
	free(argv);
	if (rc < 0)
		return rc;
	*result = agent_exec_result_json(&r);
	rt_exec_result_free(&r);
	return 0;
}

static int local_logs(void *ctx, const char *cid, int tail, char **out, struct terr *err)
{
	size_t len;
	return agent_logs(ctx, cid, tail, out, &len, err);
}

static int local_image_exists(void *ctx, const char *ref, bool *exists, struct terr *err)
{
	return agent_image_exists(ctx, ref, exists, err);
}

static int local_images(void *ctx, json_t **refs, struct terr *err)
{
	return agent_images(ctx, refs, err);
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

static int remote_call(struct remote_link *l, const char *method, const char *path, json_t *body,
		       long timeout_ms, json_t **out, struct terr *err)
{
	struct api_client c = {.endpoint = l->url, .access_key = "manager", .secret_key = l->secret};
	json_t *resp = NULL;
	int rc = api_call(&c, method, path, body, timeout_ms, &resp, NULL, err);
	if (rc < 0)
		return terr_prefix(err, "agent at %s", l->url);
	if (out)
		*out = resp;
	else
		json_decref(resp);
	return 0;
}

static int remote_start(void *ctx, json_t *spec, char cid[RT_ID_MAX], struct terr *err)
{
	json_t *resp = NULL;
	int rc = remote_call(ctx, "POST", "/rpc/v1/sessions", spec, 120000, &resp, err);
	if (rc < 0)
		return rc;
	const char *id = json_string_value(json_object_get(resp, "container_id"));
	if (!id) {
		json_decref(resp);
		return terr_set(err, EIO, "agent answered a start without a container_id");
	}
	snprintf(cid, RT_ID_MAX, "%s", id);
	json_decref(resp);
	return 0;
}

static int remote_destroy(void *ctx, const char *sid, const char *cid, struct terr *err)
{
	char *esid = api_escape(sid), *ecid = api_escape(cid ? cid : "");
	char path[512];
	snprintf(path, sizeof(path), "/rpc/v1/sessions/%s?container_id=%s", esid ? esid : "", ecid ? ecid : "");
	free(esid);
	free(ecid);
	return remote_call(ctx, "DELETE", path, NULL, 60000, NULL, err);
}

static int remote_exec(void *ctx, const char *cid, json_t *command, int timeout_s,
		       json_t **result, struct terr *err)
{
	char *ecid = api_escape(cid);
	char path[256];
	snprintf(path, sizeof(path), "/rpc/v1/containers/%s/exec", ecid ? ecid : "");
	free(ecid);
	json_t *body = json_pack("{s:O,s:i}", "command", command, "timeout_s", timeout_s);
	int rc = remote_call(ctx, "POST", path, body, (long)(timeout_s + 10) * 1000, result, err);
	json_decref(body);
	return rc;
}

static int remote_logs(void *ctx, const char *cid, int tail, char **out, struct terr *err)
{
	char *ecid = api_escape(cid);
	char path[256];
	snprintf(path, sizeof(path), "/rpc/v1/containers/%s/logs?tail=%d", ecid ? ecid : "", tail);
	free(ecid);
	json_t *resp = NULL;
	int rc = remote_call(ctx, "GET", path, NULL, 60000, &resp, err);
	if (rc < 0)
		return rc;
	const char *logs = json_string_value(json_object_get(resp, "logs"));
	*out = strdup(logs ? logs : "");
	json_decref(resp);
	return *out ? 0 : terr_set(err, ENOMEM, "out of memory");
}

static int remote_image_exists(void *ctx, const char *ref, bool *exists, struct terr *err)
{
	char *eref = api_escape(ref);
	char path[600];
	snprintf(path, sizeof(path), "/rpc/v1/images/%s", eref ? eref : "");
	free(eref);
	json_t *resp = NULL;
	int rc = remote_call(ctx, "GET", path, NULL, 15000, &resp, err);
	if (rc < 0)
		return rc;
	*exists = json_is_true(json_object_get(resp, "exists"));
	json_decref(resp);
	return 0;
}

static int remote_images(void *ctx, json_t **refs, struct terr *err)
{
	json_t *resp = NULL;
	int rc = remote_call(ctx, "GET", "/rpc/v1/images", NULL, 15000, &resp, err);
	if (rc < 0)
		return rc;
	*refs = json_incref(json_object_get(resp, "images"));
	json_decref(resp);
	if (!*refs)
		*refs = json_array();
	return 0;
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
	.release = remote_release,
};
