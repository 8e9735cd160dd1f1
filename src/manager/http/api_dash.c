/* The overviews and self-service routes of issue 35 (docs/api.md):
 *  - GET /v1/dashboard: the admin dashboard (admins only).
 *  - GET /v1/about: the version and the components' health (every
 *    user; addresses only for admins).
 *  - POST /v1/keypairs/{key}/rotate: a user's own key replaced by a new
 *    one with its label.
 * Translation only, as in api.c: the figures are the core's
 * (overview.c, dashboard.c, users.c). */
#include "manager/http/internal.h"

void api_dashboard(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (!caller(req)->is_admin) {
		httpd_error(resp, 403, "forbidden", "only administrators may see the dashboard");
		return;
	}
	json_t *o = mgr_dashboard(ctx);
	if (!o)
		httpd_error(resp, 500, "internal", "out of memory");
	else
		httpd_json(resp, 200, o);
}

void api_about(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *o = mgr_about(ctx, caller(req)->is_admin, httpd_header(req, "X-Tessera-Via") != NULL);
	if (!o)
		httpd_error(resp, 500, "internal", "out of memory");
	else
		httpd_json(resp, 200, o);
}

void api_key_rotate(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	if (req->body_len) {
		json_t *body = api_parse_body(req, resp);
		if (!body)
			return;
		bool empty = json_object_size(body) == 0;
		json_decref(body);
		if (!empty) {
			httpd_error(resp, 400, "invalid_argument", "a rotation takes no fields: the new key keeps the label");
			return;
		}
	}
	struct terr err = {0};
	json_t *reply = NULL;
	if (mgr_key_rotate(ctx, caller(req), req->params[0], &reply, &err) < 0)
		httpd_error_terr(resp, &err);
	else
		httpd_json(resp, 201, reply);
}
