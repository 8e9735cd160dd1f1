/* Prometheus text exposition (metrics.h). */
#include "common/metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static void put(struct metrics_text *t, const char *s, size_t n)
{
	if (t->oom)
		return;
	if (t->len + n + 1 > t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 4096;
		while (nc < t->len + n + 1)
			nc *= 2;
		char *g = realloc(t->buf, nc);
		if (!g) {
			t->oom = true;
			return;
		}
		t->buf = g;
		t->cap = nc;
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = '\0';
}

static void puts_(struct metrics_text *t, const char *s)
{
	put(t, s, strlen(s));
}

static void putf(struct metrics_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct metrics_text *t, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		put(t, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* A HELP text escapes \ and newline; a label value " too. */
static void put_escaped(struct metrics_text *t, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			puts_(t, "\\\\");
		else if (*s == '\n')
			puts_(t, "\\n");
		else if (quote && *s == '"')
			puts_(t, "\\\"");
		else
			put(t, s, 1);
	}
}

void metrics_family(struct metrics_text *t, const char *name, const char *type, const char *help)
{
	if (!strcmp(t->family, name))
		return;
	util_strlcpy(t->family, name, sizeof(t->family));
	putf(t, "# HELP %s ", name);
	put_escaped(t, help, false);
	putf(t, "\n# TYPE %s %s\n", name, type);
}

static void put_value(struct metrics_text *t, double v)
{
	if (isnan(v))
		puts_(t, "NaN");
	else if (isinf(v))
		puts_(t, v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 1e15)
		putf(t, "%.0f", v);
	else
		putf(t, "%.15g", v);
}

static void put_labels(struct metrics_text *t, const char *const *labels, const char *extra_k, const char *extra_v)
{
	bool any = (labels && labels[0]) || extra_k;
	if (!any)
		return;
	puts_(t, "{");
	bool first = true;
	for (int i = 0; labels && labels[i] && labels[i + 1]; i += 2) {
		putf(t, "%s%s=\"", first ? "" : ",", labels[i]);
		put_escaped(t, labels[i + 1], true);
		puts_(t, "\"");
		first = false;
	}
	if (extra_k) {
		putf(t, "%s%s=\"", first ? "" : ",", extra_k);
		put_escaped(t, extra_v, true);
		puts_(t, "\"");
	}
	puts_(t, "}");
}

void metrics_sample(struct metrics_text *t, const char *name, const char *const *labels, double value)
{
	puts_(t, name);
	put_labels(t, labels, NULL, NULL);
	puts_(t, " ");
	put_value(t, value);
	puts_(t, "\n");
}

void metrics_hist_init(struct metrics_hist *h, const double *bounds, int n)
{
	memset(h, 0, sizeof(*h));
	h->bounds = bounds;
	h->n = n > METRICS_HIST_MAX_BUCKETS ? METRICS_HIST_MAX_BUCKETS : n;
}

void metrics_hist_observe(struct metrics_hist *h, double v)
{
	int i = 0;
	while (i < h->n && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->sum += v;
	h->count++;
}

void metrics_hist_write(struct metrics_text *t, const char *name, const char *const *labels,
			const struct metrics_hist *h)
{
	char n[160], le[64];
	uint64_t cum = 0;
	snprintf(n, sizeof(n), "%s_bucket", name);
	for (int i = 0; i <= h->n; i++) {
		cum += h->counts[i];
		if (i < h->n)
			snprintf(le, sizeof(le), "%.10g", h->bounds[i]);
		else
			snprintf(le, sizeof(le), "+Inf");
		puts_(t, n);
		put_labels(t, labels, "le", le);
		putf(t, " %llu\n", (unsigned long long)cum);
	}
	snprintf(n, sizeof(n), "%s_sum", name);
	metrics_sample(t, n, labels, h->sum);
	snprintf(n, sizeof(n), "%s_count", name);
	metrics_sample(t, n, labels, (double)h->count);
}

char *metrics_text_take(struct metrics_text *t)
{
	char *s = t->oom ? NULL : t->buf ? t->buf : strdup("");
	if (t->oom)
		free(t->buf);
	memset(t, 0, sizeof(*t));
	return s;
}

void metrics_text_free(struct metrics_text *t)
{
	free(t->buf);
	memset(t, 0, sizeof(*t));
}
