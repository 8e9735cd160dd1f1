/* The pending queue's routes (docs/api.md, "The queue"): translate
 * requests to queue.c's calls (core.h). No state, no lock here. */
#include <stdlib.h>
#include <string.h>

#include "manager/http/internal.h"

void api_queue_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	static const char *const known[] = {NULL};
	const char *bad = httpd_query_unknown(req, known);
	if (bad) {
		httpd_error(resp, 400, "invalid_argument", "unknown query parameter '%.64s' (GET /v1/queue takes none)",
			    bad);
		return;
	}
	json_t *o = mgr_queue_json(ctx, caller(req));
	if (!o)
		httpd_error(resp, 500, "internal", "out of memory");
	else
		httpd_json(resp, 200, o);
}

void api_session_scheduling(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	json_t *out = NULL;
	int rc = mgr_session_scheduling(ctx, caller(req), req->params[0], &out, &err);
	api_answer(resp, rc, 200, out, &err);
}

/* {"priority": N} or {"top": true}: exactly one. */
void api_queue_move(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	static const char *const known[] = {"priority", "top", NULL};
	struct terr err = {0};
	json_t *out = NULL;
	int rc = api_check_fields(body, known, "priority, top", &err);
	json_t *prio = json_object_get(body, "priority"), *top = json_object_get(body, "top");
	if (rc == 0 && !!prio == !!top)
		rc = terr_set(&err, EINVAL, "give one of priority (0..100) or top (true): {\"priority\": 10} or "
			      "{\"top\": true}");
	else if (rc == 0 && prio && (!json_is_integer(prio) || json_integer_value(prio) < 0 ||
				     json_integer_value(prio) > 100))
		rc = terr_set(&err, EINVAL, "priority must be an integer from 0 to 100 (higher starts first)");
	else if (rc == 0 && top && !json_is_true(top))
		rc = terr_set(&err, EINVAL, "top must be true (to set a priority, give priority instead)");
	if (rc == 0)
		rc = mgr_queue_move(ctx, caller(req), req->params[0], prio ? (int)json_integer_value(prio) : 0,
				    top != NULL, &out, &err);
	api_answer(resp, rc, 200, out, &err);
	json_decref(body);
}
