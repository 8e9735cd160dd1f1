/* manager/usage_summary.c: the query's checks (dates, window, by, format,
 * filters), the allocated hours split at UTC midnights and clipped to the
 * window and to now, sessions started counted once on the day they first
 * ran, grouping by user or project, and the JSON and CSV answers. */
#include "manager/usage_summary.h"
#include "testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define H 3600000LL
#define GIB (1024LL * 1024 * 1024)

static int64_t day(const char *s)
{
	int64_t ms = 0;
	struct terr err = {0};
	if (usum_parse_day(s, &ms, &err) < 0)
		FAILF("%s: %s", s, err.msg);
	return ms;
}

static bool near(double a, double b)
{
	return fabs(a - b) < 1e-9;
}

TEST(parse_day)
{
	struct terr err = {0};
	int64_t ms;
	CHECK_INT(usum_parse_day("1970-01-01", &ms, &err), 0);
	CHECK_INT(ms, 0);
	CHECK_INT(usum_parse_day("2026-11-29", &ms, &err), 0);
	CHECK_INT(ms, 1795910400000LL);
	CHECK_INT(usum_parse_day("2024-02-29", &ms, &err), 0);
	char out[16];
	usum_format_day(ms + 5 * H, out, sizeof(out));
	CHECK_STR(out, "2024-02-29");
	CHECK_INT(usum_parse_day("2023-02-29", &ms, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "not a date of the calendar");
	CHECK_INT(usum_parse_day("2026-13-01", &ms, &err), -EINVAL);
	CHECK_INT(usum_parse_day("26-11-01", &ms, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "YYYY-MM-DD");
	CHECK_INT(usum_parse_day("2026-11-01T00:00", &ms, &err), -EINVAL);
	CHECK_INT(usum_parse_day("", &ms, &err), -EINVAL);
}

TEST(query)
{
	struct usum_query q;
	struct terr err = {0};
	int64_t now = day("2026-11-29") + 10 * H;
	struct usum_query_in in = {0};
	CHECK_INT(usum_query_parse(&in, now, &q, &err), 0);
	CHECK_INT(q.to_ms, day("2026-11-30"));
	CHECK_INT(q.from_ms, day("2026-10-31"));   /* 30 days, today included */
	CHECK_INT(q.by, USUM_BY_USER);
	CHECK_INT(q.format, USUM_JSON);
	in = (struct usum_query_in){.from = "2026-11-01", .to = "2026-11-03", .by = "project", .format = "csv",
				    .user = "a@x", .project = "team"};
	CHECK_INT(usum_query_parse(&in, now, &q, &err), 0);
	CHECK_INT(q.from_ms, day("2026-11-01"));
	CHECK_INT(q.to_ms, day("2026-11-04"));
	CHECK_INT(q.by, USUM_BY_PROJECT);
	CHECK_INT(q.format, USUM_CSV);
	CHECK_STR(q.user, "a@x");
	CHECK_STR(q.project, "team");

	in = (struct usum_query_in){.from = "2026-11-05", .to = "2026-11-03"};
	CHECK_INT(usum_query_parse(&in, now, &q, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "from (2026-11-05) is after to (2026-11-03)");
	in = (struct usum_query_in){.from = "2020-01-01", .to = "2026-11-03"};
	CHECK_INT(usum_query_parse(&in, now, &q, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "longer than 366 days");
	in = (struct usum_query_in){.from = "yesterday"};
	CHECK_INT(usum_query_parse(&in, now, &q, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "from: 'yesterday' is not a date");
	in = (struct usum_query_in){.to = "2026-02-30"};
	CHECK_INT(usum_query_parse(&in, now, &q, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "to: ");
	in = (struct usum_query_in){.by = "day"};
	CHECK_INT(usum_query_parse(&in, now, &q, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "by must be user or project");
	in = (struct usum_query_in){.format = "xml"};
	CHECK_INT(usum_query_parse(&in, now, &q, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "format must be json or csv");
	in = (struct usum_query_in){.user = ""};
	CHECK_INT(usum_query_parse(&in, now, &q, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "user must be 1 to");
	in = (struct usum_query_in){.project = "a\nb"};
	CHECK_INT(usum_query_parse(&in, now, &q, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "project must not hold control characters");
	/* The longest window is allowed. */
	in = (struct usum_query_in){.from = "2025-01-01", .to = "2026-01-01"};
	CHECK_INT(usum_query_parse(&in, now, &q, &err), 0);
}

static struct usum_query window(const char *from, const char *to, enum usum_by by)
{
	struct usum_query q;
	struct terr err = {0};
	struct usum_query_in in = {.from = from, .to = to, .by = by == USUM_BY_USER ? "user" : "project"};
	if (usum_query_parse(&in, day("2026-12-01"), &q, &err) < 0)
		FAILF("%s", err.msg);
	return q;
}

TEST(split_and_clip)
{
	/* Nov 1 20:00 to Nov 3 02:00 with 2 CPU, 4 GiB, 0.5 fGPU: 4 h on
	 * the 1st, 24 h on the 2nd, 2 h on the 3rd; the window Nov 2..3
	 * keeps 24 h and 2 h, and the start falls before it. */
	struct usum_session s[] = {
		{.user = "a@x", .project = "p1", .started_ms = day("2026-11-01") + 20 * H,
		 .ended_ms = day("2026-11-03") + 2 * H, .cpu_m = 2000, .mem = 4 * GIB, .fgpu_m = 500,
		 .counts_start = true},
	};
	struct usum_query q = window("2026-11-01", "2026-11-05", USUM_BY_USER);
	struct usum_row *rows = NULL;
	size_t n = 0;
	struct terr err = {0};
	CHECK_INT(usum_compute(s, 1, &q, day("2026-12-01"), &rows, &n, &err), 0);
	CHECK_INT((int)n, 3);
	CHECK_INT(rows[0].day_ms, day("2026-11-01"));
	CHECK(near(rows[0].cpu_h, 8));
	CHECK(near(rows[0].mem_gib_h, 16));
	CHECK(near(rows[0].fgpu_h, 2));
	CHECK_INT(rows[0].started, 1);
	CHECK(near(rows[1].cpu_h, 48));
	CHECK_INT(rows[1].started, 0);
	CHECK(near(rows[2].cpu_h, 4));
	CHECK_STR(rows[2].key, "a@x");
	free(rows);

	q = window("2026-11-02", "2026-11-03", USUM_BY_USER);
	CHECK_INT(usum_compute(s, 1, &q, day("2026-12-01"), &rows, &n, &err), 0);
	CHECK_INT((int)n, 2);
	CHECK(near(rows[0].cpu_h, 48));
	CHECK_INT(rows[0].started, 0);
	CHECK(near(rows[1].fgpu_h, 1));
	free(rows);

	/* A window after it: nothing. */
	q = window("2026-11-10", "2026-11-11", USUM_BY_USER);
	CHECK_INT(usum_compute(s, 1, &q, day("2026-12-01"), &rows, &n, &err), 0);
	CHECK_INT((int)n, 0);
	CHECK(rows == NULL);
}

TEST(running_and_never_ran)
{
	/* One still running (counted to now: Nov 2 06:00), one that never
	 * ran (cancelled while pending), a sub-container that adds hours
	 * but no start. */
	struct usum_session s[] = {
		{.user = "a@x", .project = "p", .started_ms = day("2026-11-02"), .cpu_m = 1000, .mem = GIB,
		 .counts_start = true},
		{.user = "a@x", .project = "p", .cpu_m = 8000, .counts_start = true},
		{.user = "a@x", .project = "p", .started_ms = day("2026-11-02"), .cpu_m = 1000, .mem = GIB,
		 .counts_start = false},
	};
	struct usum_query q = window("2026-11-01", "2026-11-03", USUM_BY_USER);
	struct usum_row *rows = NULL;
	size_t n = 0;
	struct terr err = {0};
	CHECK_INT(usum_compute(s, 3, &q, day("2026-11-02") + 6 * H, &rows, &n, &err), 0);
	CHECK_INT((int)n, 1);
	CHECK_INT(rows[0].day_ms, day("2026-11-02"));
	CHECK(near(rows[0].cpu_h, 12));
	CHECK(near(rows[0].mem_gib_h, 12));
	CHECK_INT(rows[0].started, 1);
	free(rows);
}

TEST(group_json_csv)
{
	struct usum_session s[] = {
		{.user = "b@x", .project = "team", .started_ms = day("2026-11-01") + H, .ended_ms = day("2026-11-01") + 3 * H,
		 .cpu_m = 500, .mem = GIB / 2, .counts_start = true},
		{.user = "a@x", .project = "team", .started_ms = day("2026-11-01"), .ended_ms = day("2026-11-01") + H,
		 .cpu_m = 1000, .mem = GIB, .fgpu_m = 250, .counts_start = true},
		{.user = "a@x", .project = "x,\"y\"", .started_ms = day("2026-11-02"),
		 .ended_ms = day("2026-11-02") + H, .cpu_m = 1000, .counts_start = true},
	};
	struct usum_query q = window("2026-11-01", "2026-11-02", USUM_BY_USER);
	struct usum_row *rows = NULL;
	size_t n = 0;
	struct terr err = {0};
	CHECK_INT(usum_compute(s, 3, &q, day("2026-12-01"), &rows, &n, &err), 0);
	CHECK_INT((int)n, 3);
	/* By day, then key. */
	CHECK_STR(rows[0].key, "a@x");
	CHECK_STR(rows[1].key, "b@x");
	CHECK(near(rows[1].cpu_h, 1));
	CHECK_STR(rows[2].key, "a@x");
	json_t *j = usum_json(&q, rows, n);
	CHECK(j != NULL);
	char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	CHECK_CONTAINS(text, "\"from\":\"2026-11-01\"");
	CHECK_CONTAINS(text, "\"to\":\"2026-11-02\"");
	CHECK_CONTAINS(text, "\"by\":\"user\"");
	CHECK_CONTAINS(text, "{\"cpu_hours\":1.0,\"day\":\"2026-11-01\",\"fgpu_hours\":0.25,\"mem_gib_hours\":1.0,"
			     "\"sessions_started\":1,\"user\":\"a@x\"}");
	/* Totals per user: a@x 2 CPU-hours over the two days. */
	CHECK_CONTAINS(text, "\"totals\":[{\"cpu_hours\":2.0,\"fgpu_hours\":0.25,\"mem_gib_hours\":1.0,"
			     "\"sessions_started\":2,\"user\":\"a@x\"}");
	CHECK_CONTAINS(text, "\"total\":{\"cpu_hours\":3.0,");
	free(text);
	json_decref(j);
	free(rows);

	q = window("2026-11-01", "2026-11-02", USUM_BY_PROJECT);
	CHECK_INT(usum_compute(s, 3, &q, day("2026-12-01"), &rows, &n, &err), 0);
	CHECK_INT((int)n, 2);
	CHECK_STR(rows[0].key, "team");
	CHECK(near(rows[0].cpu_h, 2));
	CHECK_INT(rows[0].started, 2);
	char *csv = usum_csv(&q, rows, n);
	CHECK_STR(csv, "day,project,cpu_hours,mem_gib_hours,fgpu_hours,sessions_started\r\n"
		       "2026-11-01,team,2.0000,2.0000,0.2500,2\r\n"
		       "2026-11-02,\"x,\"\"y\"\"\",1.0000,0.0000,0.0000,1\r\n");
	free(csv);
	free(rows);

	/* No rows: the header alone, and empty arrays. */
	csv = usum_csv(&q, NULL, 0);
	CHECK_STR(csv, "day,project,cpu_hours,mem_gib_hours,fgpu_hours,sessions_started\r\n");
	free(csv);
	j = usum_json(&q, NULL, 0);
	CHECK(j && json_array_size(json_object_get(j, "rows")) == 0);
	json_decref(j);
}

int main(void)
{
	RUN(parse_day);
	RUN(query);
	RUN(split_and_clip);
	RUN(running_and_never_ran);
	RUN(group_json_csv);
	return testlib_done();
}
