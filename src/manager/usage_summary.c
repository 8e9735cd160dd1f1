/* Usage per day and per user or project (usage_summary.h): the query's
 * checks, the sums, and the JSON and CSV of the answer. */
#include "manager/usage_summary.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Days since 1970-01-01 of a civil date (proleptic Gregorian): the
 * calendar's arithmetic without timegm, which reads the environment. */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int *y, int *m, int *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = (int)(yoe + era * 400 + (*m <= 2));
}

static bool leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int usum_parse_day(const char *s, int64_t *ms, struct terr *err)
{
	static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool shape = strlen(s) == 10 && s[4] == '-' && s[7] == '-';
	for (int i = 0; shape && i < 10; i++)
		shape = i == 4 || i == 7 || (s[i] >= '0' && s[i] <= '9');
	if (!shape)
		return terr_set(err, EINVAL, "'%.40s' is not a date: give YYYY-MM-DD (UTC), e.g. 2026-11-01", s);
	int y = atoi(s), m = atoi(s + 5), d = atoi(s + 8);
	if (y < 1970 || m < 1 || m > 12 || d < 1 || d > mdays[m - 1] + (m == 2 && leap(y)))
		return terr_set(err, EINVAL, "'%.40s' is not a date of the calendar (from 1970 on)", s);
	*ms = days_from_civil(y, m, d) * USUM_DAY_MS;
	return 0;
}

void usum_format_day(int64_t ms, char *out, size_t n)
{
	int64_t z = ms >= 0 ? ms / USUM_DAY_MS : -((-ms + USUM_DAY_MS - 1) / USUM_DAY_MS);
	int y, m, d;
	civil_from_days(z, &y, &m, &d);
	snprintf(out, n, "%04d-%02d-%02d", y, m, d);
}

/* A filter's value: a name without control characters, at most
 * USUM_KEY_MAX - 1 bytes (the store's names are shorter). */
static int filter_copy(const char *name, const char *v, char *out, struct terr *err)
{
	size_t len = strlen(v);
	if (len == 0 || len >= USUM_KEY_MAX)
		return terr_set(err, EINVAL, "%s must be 1 to %d characters", name, USUM_KEY_MAX - 1);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			return terr_set(err, EINVAL, "%s must not hold control characters", name);
	memcpy(out, v, len + 1);
	return 0;
}

int usum_query_parse(const struct usum_query_in *in, int64_t now_ms, struct usum_query *q, struct terr *err)
{
	memset(q, 0, sizeof(*q));
	int64_t to_day = now_ms / USUM_DAY_MS * USUM_DAY_MS;
	if (in->to && usum_parse_day(in->to, &to_day, err) < 0)
		return terr_prefix(err, "to");
	int64_t from_day = to_day - (USUM_DEFAULT_DAYS - 1) * USUM_DAY_MS;
	if (in->from && usum_parse_day(in->from, &from_day, err) < 0)
		return terr_prefix(err, "from");
	if (from_day > to_day)
		return terr_set(err, EINVAL, "from (%s) is after to (%s)", in->from ? in->from : "default",
				in->to ? in->to : "today");
	if ((to_day - from_day) / USUM_DAY_MS + 1 > USUM_MAX_DAYS)
		return terr_set(err, EINVAL, "the window from %s to %s is longer than %d days: ask for less at once",
				in->from ? in->from : "default", in->to ? in->to : "today", USUM_MAX_DAYS);
	q->from_ms = from_day;
	q->to_ms = to_day + USUM_DAY_MS;
	if (!in->by || !strcmp(in->by, "user"))
		q->by = USUM_BY_USER;
	else if (!strcmp(in->by, "project"))
		q->by = USUM_BY_PROJECT;
	else
		return terr_set(err, EINVAL, "by must be user or project (not '%.40s')", in->by);
	if (!in->format || !strcmp(in->format, "json"))
		q->format = USUM_JSON;
	else if (!strcmp(in->format, "csv"))
		q->format = USUM_CSV;
	else
		return terr_set(err, EINVAL, "format must be json or csv (not '%.40s')", in->format);
	if (in->user && filter_copy("user", in->user, q->user, err) < 0)
		return -err->code;
	if (in->project && filter_copy("project", in->project, q->project, err) < 0)
		return -err->code;
	return 0;
}

/* Per key, a cell per day of the window, made on first use. */
struct cell {
	double cpu_h, mem_gib_h, fgpu_h;
	int64_t started;
};
struct keyed {
	const char *key;
	struct cell *days;
};

static int by_key(const void *a, const void *b)
{
	return strcmp(((const struct keyed *)a)->key, ((const struct keyed *)b)->key);
}

static void keys_free(struct keyed *keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(keys[i].days);
	free(keys);
}

int usum_compute(const struct usum_session *s, size_t n, const struct usum_query *q, int64_t now_ms,
		 struct usum_row **rows, size_t *n_rows, struct terr *err)
{
	*rows = NULL;
	*n_rows = 0;
	size_t n_days = (size_t)((q->to_ms - q->from_ms) / USUM_DAY_MS);
	struct keyed *keys = NULL;
	size_t n_keys = 0, cap_keys = 0;
	for (size_t i = 0; i < n; i++) {
		const struct usum_session *x = &s[i];
		if (!x->started_ms)
			continue;
		const char *key = q->by == USUM_BY_USER ? x->user : x->project;
		key = key ? key : "";
		/* Held from its first start to its end, or to now. */
		int64_t a = x->started_ms, b = x->ended_ms ? x->ended_ms : now_ms;
		bool start_in = x->counts_start && a >= q->from_ms && a < q->to_ms;
		if (a < q->from_ms)
			a = q->from_ms;
		if (b > q->to_ms)
			b = q->to_ms;
		if (b <= a && !start_in)
			continue;
		size_t k = 0;
		while (k < n_keys && strcmp(keys[k].key, key))
			k++;
		if (k == n_keys) {
			if (n_keys == cap_keys) {
				size_t nc = cap_keys ? cap_keys * 2 : 16;
				struct keyed *nk = realloc(keys, nc * sizeof(*nk));
				if (!nk)
					goto oom;
				keys = nk;
				cap_keys = nc;
			}
			keys[n_keys].key = key;
			if (!(keys[n_keys].days = calloc(n_days, sizeof(struct cell))))
				goto oom;
			n_keys++;
		}
		struct cell *days = keys[k].days;
		if (start_in)
			days[(x->started_ms - q->from_ms) / USUM_DAY_MS].started++;
		/* Each day's part of [a, b). */
		for (int64_t t = a; t < b;) {
			size_t d = (size_t)((t - q->from_ms) / USUM_DAY_MS);
			int64_t day_end = q->from_ms + (int64_t)(d + 1) * USUM_DAY_MS;
			int64_t until = b < day_end ? b : day_end;
			double h = (double)(until - t) / 3600000.0;
			days[d].cpu_h += (double)x->cpu_m / 1000.0 * h;
			days[d].mem_gib_h += (double)x->mem / (1024.0 * 1024.0 * 1024.0) * h;
			days[d].fgpu_h += (double)x->fgpu_m / 1000.0 * h;
			t = until;
		}
	}
	if (n_keys > 1)
		qsort(keys, n_keys, sizeof(*keys), by_key);
	size_t total = 0;
	for (size_t k = 0; k < n_keys; k++)
		for (size_t d = 0; d < n_days; d++) {
			const struct cell *c = &keys[k].days[d];
			total += c->cpu_h > 0 || c->mem_gib_h > 0 || c->fgpu_h > 0 || c->started > 0;
		}
	if (total) {
		if (!(*rows = calloc(total, sizeof(**rows))))
			goto oom;
		size_t r = 0;
		for (size_t d = 0; d < n_days; d++)
			for (size_t k = 0; k < n_keys; k++) {
				const struct cell *c = &keys[k].days[d];
				if (!(c->cpu_h > 0 || c->mem_gib_h > 0 || c->fgpu_h > 0 || c->started > 0))
					continue;
				struct usum_row *row = &(*rows)[r++];
				row->day_ms = q->from_ms + (int64_t)d * USUM_DAY_MS;
				snprintf(row->key, sizeof(row->key), "%s", keys[k].key);
				row->cpu_h = c->cpu_h;
				row->mem_gib_h = c->mem_gib_h;
				row->fgpu_h = c->fgpu_h;
				row->started = c->started;
			}
		*n_rows = r;
	}
	keys_free(keys, n_keys);
	return 0;
oom:
	keys_free(keys, n_keys);
	return terr_set(err, ENOMEM, "out of memory");
}

/* Hours to four decimals (0.36 s): finer than the times' own worth, and
 * a session of seconds still shows. */
static json_t *hours(double h)
{
	return json_real((double)(int64_t)(h * 10000.0 + 0.5) / 10000.0);
}

static json_t *figures(const char *keyname, const char *key, double cpu, double mem, double fgpu, int64_t started)
{
	json_t *o = json_pack("{s:o,s:o,s:o,s:I}", "cpu_hours", hours(cpu), "mem_gib_hours", hours(mem),
			      "fgpu_hours", hours(fgpu), "sessions_started", (json_int_t)started);
	if (o && keyname)
		json_object_set_new(o, keyname, json_string(key));
	return o;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

json_t *usum_json(const struct usum_query *q, const struct usum_row *rows, size_t n)
{
	const char *kn = q->by == USUM_BY_USER ? "user" : "project";
	char from[16], to[16];
	usum_format_day(q->from_ms, from, sizeof(from));
	usum_format_day(q->to_ms - USUM_DAY_MS, to, sizeof(to));
	json_t *arr = json_array(), *totals = json_array();
	double all[3] = {0};
	int64_t all_started = 0;
	/* The keys in the rows, for the totals per key in key order. */
	const char **seen = calloc(n ? n : 1, sizeof(*seen));
	size_t n_seen = 0;
	if (!arr || !totals || !seen) {
		json_decref(arr);
		json_decref(totals);
		free(seen);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		char day[16];
		usum_format_day(rows[i].day_ms, day, sizeof(day));
		json_t *o = figures(kn, rows[i].key, rows[i].cpu_h, rows[i].mem_gib_h, rows[i].fgpu_h, rows[i].started);
		if (o)
			json_object_set_new(o, "day", json_string(day));
		json_array_append_new(arr, o);
		all[0] += rows[i].cpu_h;
		all[1] += rows[i].mem_gib_h;
		all[2] += rows[i].fgpu_h;
		all_started += rows[i].started;
		size_t k = 0;
		while (k < n_seen && strcmp(seen[k], rows[i].key))
			k++;
		if (k == n_seen)
			seen[n_seen++] = rows[i].key;
	}
	qsort(seen, n_seen, sizeof(*seen), str_cmp);
	for (size_t k = 0; k < n_seen; k++) {
		double t[3] = {0};
		int64_t st = 0;
		for (size_t i = 0; i < n; i++)
			if (!strcmp(rows[i].key, seen[k])) {
				t[0] += rows[i].cpu_h;
				t[1] += rows[i].mem_gib_h;
				t[2] += rows[i].fgpu_h;
				st += rows[i].started;
			}
		json_array_append_new(totals, figures(kn, seen[k], t[0], t[1], t[2], st));
	}
	free(seen);
	return json_pack("{s:s,s:s,s:s,s:o,s:o,s:o}", "from", from, "to", to, "by", kn, "rows", arr, "totals", totals,
			 "total", figures(NULL, NULL, all[0], all[1], all[2], all_started));
}

/* A CSV field: quoted when it holds a quote, comma or line break (a
 * project's or user's name never should, but a file must stay whole). */
static void csv_field(FILE *f, const char *v)
{
	if (!strpbrk(v, "\",\r\n")) {
		fputs(v, f);
		return;
	}
	fputc('"', f);
	for (; *v; v++) {
		if (*v == '"')
			fputc('"', f);
		fputc(*v, f);
	}
	fputc('"', f);
}

char *usum_csv(const struct usum_query *q, const struct usum_row *rows, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	fprintf(f, "day,%s,cpu_hours,mem_gib_hours,fgpu_hours,sessions_started\r\n",
		q->by == USUM_BY_USER ? "user" : "project");
	for (size_t i = 0; i < n; i++) {
		char day[16];
		usum_format_day(rows[i].day_ms, day, sizeof(day));
		fprintf(f, "%s,", day);
		csv_field(f, rows[i].key);
		fprintf(f, ",%.4f,%.4f,%.4f,%lld\r\n", rows[i].cpu_h, rows[i].mem_gib_h, rows[i].fgpu_h,
			(long long)rows[i].started);
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
