/* The resource presets' routes (docs/api.md, "Resource presets"):
 * translate requests to the core's preset calls (core.h). No state, no
 * lock here. */
#include "manager/http/internal.h"

void api_preset_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	static const char *const known[] = {NULL};
	const char *bad = httpd_query_unknown(req, known);
	if (bad) {
		httpd_error(resp, 400, "invalid_argument", "unknown query parameter '%.64s' (this route takes none)", bad);
		return;
	}
	httpd_json(resp, 200, json_pack("{s:o}", "presets", mgr_presets_list(ctx)));
}

void api_preset_create(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	struct terr err = {0};
	json_t *out = NULL;
	int rc = mgr_preset_create(ctx, caller(req), body, &out, &err);
	api_answer(resp, rc, 201, rc < 0 ? NULL : json_pack("{s:o}", "preset", out), &err);
	json_decref(body);
}

void api_preset_update(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	struct terr err = {0};
	json_t *out = NULL;
	int rc = mgr_preset_update(ctx, caller(req), req->params[0], body, &out, &err);
	api_answer(resp, rc, 200, rc < 0 ? NULL : json_pack("{s:o}", "preset", out), &err);
	json_decref(body);
}

void api_preset_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	int rc = mgr_preset_delete(ctx, caller(req), req->params[0], &err);
	api_answer(resp, rc, 200, rc < 0 ? NULL : json_pack("{s:s}", "removed", req->params[0]), &err);
}
