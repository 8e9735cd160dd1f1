/* The folders' routes (docs/api.md, "Folders"): translate requests to
 * the core's folder calls (core.h). No state, no lock here. */
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"
#include "common/units.h"
#include "manager/http/internal.h"
#include "manager/validate.h"

static bool query_flag(struct httpd_req *req, const char *name)
{
	const char *v = httpd_query(req, name);
	return v && (!strcmp(v, "1") || !strcmp(v, "true"));
}

void api_folder_create(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	static const char *const known[] = {"name", "host", "quota", "project", "members", NULL};
	struct terr err = {0};
	const char *name = NULL, *host = NULL, *project = NULL, *members = NULL;
	bool has_name = false, has_quota = false;
	int64_t quota = -1;
	json_t *out = NULL;
	int rc = api_check_fields(body, known, "name, host, quota, project, members", &err);
	if (rc == 0)
		rc = jsonutil_get_string(body, "name", "name", &name, &has_name, &err);
	if (rc == 0 && !has_name)
		rc = terr_set(&err, EINVAL, "name is required");
	if (rc == 0)
		rc = jsonutil_get_string(body, "host", "host", &host, NULL, &err);
	if (rc == 0)
		rc = jsonutil_get_size(body, "quota", "quota", &quota, &has_quota, &err);
	if (rc == 0)
		rc = jsonutil_get_string(body, "project", "project", &project, NULL, &err);
	if (rc == 0)
		rc = jsonutil_get_string(body, "members", "members", &members, NULL, &err);
	if (rc == 0 && has_quota && quota < 0)
		rc = terr_set(&err, EINVAL, "quota must be a size of 0 (none) or more");
	if (rc == 0)
		rc = mgr_folder_create_in(ctx, caller(req), name, host, has_quota ? quota : -1, project, members, &out,
					  &err);
	api_answer(resp, rc, 201, out, &err);
	json_decref(body);
}

void api_folder_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	httpd_json(resp, 200, json_pack("{s:o}", "folders",
					mgr_folders_list(ctx, caller(req), query_flag(req, "all"), query_flag(req, "trash"))));
}

void api_folder_get(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	json_t *out = NULL;
	int rc = mgr_folder_get(ctx, caller(req), req->params[0], &out, &err);
	api_answer(resp, rc, 200, out, &err);
}

void api_folder_update(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	static const char *const known[] = {"name", "quota", NULL};
	struct terr err = {0};
	const char *name = NULL;
	bool has_name = false, has_quota = false;
	int64_t quota = -1;
	json_t *out = NULL;
	int rc = api_check_fields(body, known, "name, quota", &err);
	if (rc == 0)
		rc = jsonutil_get_string(body, "name", "name", &name, &has_name, &err);
	if (rc == 0)
		rc = jsonutil_get_size(body, "quota", "quota", &quota, &has_quota, &err);
	if (rc == 0 && has_quota && quota < 0)
		rc = terr_set(&err, EINVAL, "quota must be a size of 0 (none) or more");
	if (rc == 0 && has_name)
		rc = mgr_folder_name_check(name, &err);
	if (rc == 0 && !has_name && !has_quota)
		rc = terr_set(&err, EINVAL, "name (the folder's new name) or quota is required");
	/* The quota first: it names the folder by its current name. */
	const char *folder = req->params[0];
	if (rc == 0 && has_quota)
		rc = mgr_folder_set_quota(ctx, caller(req), folder, quota, &out, &err);
	if (rc == 0 && has_name) {
		json_decref(out);
		out = NULL;
		rc = mgr_folder_rename(ctx, caller(req), folder, name, &out, &err);
	}
	api_answer(resp, rc, 200, out, &err);
	json_decref(body);
}

void api_folder_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	int rc = mgr_folder_delete(ctx, caller(req), req->params[0], query_flag(req, "force"), &err);
	api_answer(resp, rc, 200, json_object(), &err);
}

void api_folder_restore(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	json_t *out = NULL;
	int rc = mgr_folder_restore(ctx, caller(req), req->params[0], &out, &err);
	api_answer(resp, rc, 200, out, &err);
}

void api_folder_share(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	static const char *const known[] = {"email", "permission", "force", NULL};
	struct terr err = {0};
	const char *email = NULL, *perm = "ro";
	bool has = false;
	char norm[256];
	json_t *out = NULL;
	json_t *force = json_object_get(body, "force");
	int rc = api_check_fields(body, known, "email, permission, force", &err);
	if (rc == 0 && force && !json_is_boolean(force))
		rc = terr_set(&err, EINVAL, "force must be true or false");
	if (rc == 0)
		rc = jsonutil_get_string(body, "email", "email", &email, &has, &err);
	if (rc == 0 && !has)
		rc = terr_set(&err, EINVAL, "email is required");
	if (rc == 0)
		rc = validate_email(email, norm, sizeof(norm), &err);
	if (rc == 0)
		rc = jsonutil_get_string(body, "permission", "permission", &perm, NULL, &err);
	if (rc == 0)
		rc = mgr_folder_share(ctx, caller(req), req->params[0], norm, perm, json_is_true(force), &out, &err);
	api_answer(resp, rc, 200, out, &err);
	json_decref(body);
}

void api_folder_unshare(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	char norm[256];
	json_t *out = NULL;
	int rc = validate_email(req->params[1], norm, sizeof(norm), &err);
	if (rc == 0)
		rc = mgr_folder_unshare(ctx, caller(req), req->params[0], norm, query_flag(req, "force"), &out, &err);
	api_answer(resp, rc, 200, out, &err);
}
