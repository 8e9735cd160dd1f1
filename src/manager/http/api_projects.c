/* The projects' and fair share's routes (docs/api.md, "Projects" and
 * "Fair share"): translate requests to the core's project calls
 * (core.h). No state, no lock here. */
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"
#include "manager/http/internal.h"

void api_project_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	static const char *const known[] = {"all", NULL};
	const char *bad = httpd_query_unknown(req, known);
	bool all = false;
	if (bad) {
		httpd_error(resp, 400, "invalid_argument", "unknown query parameter '%.64s' (known: all)", bad);
		return;
	}
	if (!api_query_flag(req, resp, "all", &all))
		return;
	httpd_json(resp, 200, json_pack("{s:o}", "projects", mgr_projects_list(ctx, caller(req), all)));
}

static const char *const settable[] = {"description", "weight", "quota", "groups", NULL};
#define SETTABLE "description, weight, quota, groups"

void api_project_create(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	static const char *const known[] = {"name", "description", "weight", "quota", "groups", NULL};
	struct terr err = {0};
	json_t *out = NULL;
	int rc = api_check_fields(body, known, "name, " SETTABLE, &err);
	if (rc == 0)
		rc = mgr_project_create(ctx, caller(req), body, &out, &err);
	api_answer(resp, rc, 201, rc < 0 ? NULL : json_pack("{s:o}", "project", out), &err);
	json_decref(body);
}

void api_project_get(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	json_t *out = NULL;
	int rc = mgr_project_get(ctx, caller(req), req->params[0], &out, &err);
	api_answer(resp, rc, 200, rc < 0 ? NULL : json_pack("{s:o}", "project", out), &err);
}

void api_project_update(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	struct terr err = {0};
	json_t *out = NULL;
	int rc = api_check_fields(body, settable, SETTABLE, &err);
	if (rc == 0)
		rc = mgr_project_update(ctx, caller(req), req->params[0], body, &out, &err);
	api_answer(resp, rc, 200, rc < 0 ? NULL : json_pack("{s:o}", "project", out), &err);
	json_decref(body);
}

void api_project_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	int rc = mgr_project_delete(ctx, caller(req), req->params[0], &err);
	api_answer(resp, rc, 200, rc < 0 ? NULL : json_pack("{s:s}", "removed", req->params[0]), &err);
}

/* PUT /v1/projects/{name}/members/{email} {"role": "member"|"manager",
 * "weight": W}: adds the user, or changes their role or weight. */
void api_project_member_put(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	static const char *const known[] = {"role", "weight", NULL};
	struct terr err = {0};
	json_t *out = NULL;
	const char *role = NULL;
	int64_t weight = 0;
	bool has_weight = false;
	int rc = api_check_fields(body, known, "role, weight", &err);
	if (rc == 0)
		rc = jsonutil_get_string(body, "role", "role", &role, NULL, &err);
	if (rc == 0)
		rc = jsonutil_get_milli(body, "weight", "weight", &weight, &has_weight, &err);
	if (rc == 0 && has_weight && weight <= 0)
		rc = terr_set(&err, EINVAL, "weight must be above 0");
	if (rc == 0)
		rc = mgr_project_member_set(ctx, caller(req), req->params[0], req->params[1], role, weight, &out, &err);
	api_answer(resp, rc, 200, rc < 0 ? NULL : json_pack("{s:o}", "project", out), &err);
	json_decref(body);
}

void api_project_member_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	json_t *out = NULL;
	int rc = mgr_project_member_remove(ctx, caller(req), req->params[0], req->params[1], &out, &err);
	api_answer(resp, rc, 200, rc < 0 ? NULL : json_pack("{s:o}", "project", out), &err);
}

void api_fairshare(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *o = mgr_fairshare_json(ctx, caller(req));
	if (!o)
		httpd_error(resp, 500, "internal", "out of memory");
	else
		httpd_json(resp, 200, o);
}
