/* Usage over time for GET /v1/usage/summary (docs/api.md, "Usage
 * summary"): allocated CPU-, memory-GiB- and fGPU-hours and sessions
 * started, per UTC day and per user or project, from the sessions' stored
 * times and resource requests. Pure: no manager, no lock, no store; the
 * manager copies what it needs out of its sessions (usage_report.c) and
 * hands it here, so that the arithmetic is unit-tested on its own
 * (tests/manager/test_usage_summary.c).
 *
 * "Hours" are allocated, not measured: a session holds what it asked for
 * from its first RUNNING until it ended (or now, while it has not), busy
 * or idle, each container of a cluster session counted. */
#ifndef TESSERA_MANAGER_USAGE_SUMMARY_H
#define TESSERA_MANAGER_USAGE_SUMMARY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define USUM_DAY_MS 86400000LL
/* The longest window one answer covers, in days. */
#define USUM_MAX_DAYS 366
/* The default window when from is not given: this many days up to to. */
#define USUM_DEFAULT_DAYS 30
#define USUM_KEY_MAX 256

enum usum_by { USUM_BY_USER, USUM_BY_PROJECT };
enum usum_format { USUM_JSON, USUM_CSV };

/* A request's query, validated. from_ms and to_ms are UTC midnights:
 * [from_ms, to_ms) covers the days from..to, both included. user and
 * project: filters ("" none). */
struct usum_query {
	int64_t from_ms, to_ms;
	enum usum_by by;
	enum usum_format format;
	char user[USUM_KEY_MAX];
	char project[USUM_KEY_MAX];
};

/* The query's words as they came (NULL: absent). */
struct usum_query_in {
	const char *from, *to, *by, *format, *user, *project;
};

/* Validates in into q: dates YYYY-MM-DD (UTC), from <= to, at most
 * USUM_MAX_DAYS days; to defaults to the day of now_ms, from to
 * USUM_DEFAULT_DAYS days up to to; by user (default) or project; format
 * json (default) or csv. EINVAL with words naming the parameter. */
int usum_query_parse(const struct usum_query_in *in, int64_t now_ms, struct usum_query *q, struct terr *err);

/* "YYYY-MM-DD" (UTC) into the ms of its midnight; EINVAL otherwise. */
int usum_parse_day(const char *s, int64_t *ms, struct terr *err);
/* The UTC day of ms as "YYYY-MM-DD" (out: 11 bytes at least). */
void usum_format_day(int64_t ms, char *out, size_t n);

/* One session (or one container of a cluster session) as the summary
 * sees it. started_ms 0: it never ran (it allocated nothing); ended_ms 0:
 * it still holds its resources (counted up to now). counts_start: it is a
 * session as users see it (not a cluster session's sub-container), and is
 * counted in sessions_started on the day it first ran. */
struct usum_session {
	const char *user;      /* owner's email */
	const char *project;   /* project's name */
	int64_t started_ms, ended_ms;
	int64_t cpu_m, mem, fgpu_m;
	bool counts_start;
};

/* One (day, user or project) with something in it. */
struct usum_row {
	int64_t day_ms;
	char key[USUM_KEY_MAX];
	double cpu_h, mem_gib_h, fgpu_h;
	int64_t started;
};

/* Sums s[0..n) per day of q's window and per q->by, each session's
 * allocation clipped to the window and to now_ms: *rows (malloc'd, the
 * caller frees; NULL when none) by day, then key, only rows with
 * something in them. ENOMEM. */
int usum_compute(const struct usum_session *s, size_t n, const struct usum_query *q, int64_t now_ms,
		 struct usum_row **rows, size_t *n_rows, struct terr *err);

/* The answer's JSON: {"from","to","by","rows":[{"day","user"|"project",
 * "cpu_hours","mem_gib_hours","fgpu_hours","sessions_started"}],
 * "totals":[{"user"|"project", ...}] (per key, sorted), "total":{...}}.
 * New reference, NULL when out of memory. */
json_t *usum_json(const struct usum_query *q, const struct usum_row *rows, size_t n);

/* The same rows as CSV text (RFC 4180, "\r\n" line ends): a header
 * "day,user|project,cpu_hours,mem_gib_hours,fgpu_hours,sessions_started"
 * and a line per row. malloc'd, NULL when out of memory. */
char *usum_csv(const struct usum_query *q, const struct usum_row *rows, size_t n);

#endif
