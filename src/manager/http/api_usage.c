/* GET /v1/usage/summary (docs/api.md, "Usage summary"): allocated CPU-,
 * memory- and fGPU-hours and sessions started per day and per user or
 * project, as JSON or CSV. Parses and checks the query (usage_summary.h),
 * asks the core (usage_report.c) and renders the answer. */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "manager/http/internal.h"
#include "manager/usage_summary.h"

void api_usage_summary(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	static const char *const known[] = {"from", "to", "by", "user", "project", "format", NULL};
	const char *bad = httpd_query_unknown(req, known);
	if (bad) {
		httpd_error(resp, 400, "invalid_argument",
			    "unknown query parameter '%.64s' (known: from, to, by, user, project, format)", bad);
		return;
	}
	struct usum_query_in in = {
		.from = httpd_query(req, "from"), .to = httpd_query(req, "to"), .by = httpd_query(req, "by"),
		.format = httpd_query(req, "format"), .user = httpd_query(req, "user"),
		.project = httpd_query(req, "project"),
	};
	struct usum_query q;
	struct terr err = {0};
	struct usum_row *rows = NULL;
	size_t n = 0;
	if (usum_query_parse(&in, util_now_ms(), &q, &err) < 0 ||
	    mgr_usage_summary(ctx, caller(req), &q, &rows, &n, &err) < 0) {
		httpd_error_terr(resp, &err);
		return;
	}
	if (q.format == USUM_CSV) {
		char *csv = usum_csv(&q, rows, n);
		if (!csv)
			httpd_error(resp, 500, "internal", "out of memory");
		else
			httpd_bytes_take(resp, 200, "text/csv; charset=utf-8", csv, strlen(csv));
	} else {
		json_t *o = usum_json(&q, rows, n);
		if (!o)
			httpd_error(resp, 500, "internal", "out of memory");
		else
			httpd_json(resp, 200, o);
	}
	free(rows);
}
