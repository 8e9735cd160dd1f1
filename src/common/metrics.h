/* Prometheus metrics in the text exposition format 0.0.4 (docs/admin.md,
 * "Metrics"): a text builder that writes each family's # HELP and # TYPE
 * lines once, then its samples, with label values escaped; and a
 * histogram with fixed buckets. The manager and the agent each render
 * their /metrics with it. Hand-written: the format is a few lines of
 * text, and no Debian C library writes it.
 *
 * Ownership: a struct metrics_text owns its buffer (metrics_text_take
 * hands it over, or metrics_text_free frees it). A histogram is the
 * caller's, with bounds it keeps alive; it does not lock: its owner
 * does. */
#ifndef TESSERA_COMMON_METRICS_H
#define TESSERA_COMMON_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define METRICS_HIST_MAX_BUCKETS 16

struct metrics_text {
	char *buf;
	size_t len, cap;
	bool oom;              /* an append failed: the text is unusable */
	char family[128];      /* the family whose header was written last */
};

/* Starts a family: "# HELP name help" and "# TYPE name type" (type:
 * counter, gauge, histogram), once per name. */
void metrics_family(struct metrics_text *t, const char *name, const char *type, const char *help);
/* One sample: name{k1="v1",...} value. labels: NULL or pairs of key and
 * value ending with NULL; values are escaped (\\, \", \n). A value that is
 * not finite is written as NaN, +Inf or -Inf. */
void metrics_sample(struct metrics_text *t, const char *name, const char *const *labels, double value);

struct metrics_hist {
	const double *bounds;  /* upper bounds, increasing; +Inf is implied */
	int n;
	uint64_t counts[METRICS_HIST_MAX_BUCKETS + 1];   /* not cumulative */
	double sum;
	uint64_t count;
};

void metrics_hist_init(struct metrics_hist *h, const double *bounds, int n);
void metrics_hist_observe(struct metrics_hist *h, double v);
/* The histogram's _bucket (cumulative, with le), _sum and _count samples
 * under name (the family must have been started as a histogram). */
void metrics_hist_write(struct metrics_text *t, const char *name, const char *const *labels,
			const struct metrics_hist *h);

/* The text (NUL-terminated, malloc'd; NULL when out of memory); t is
 * empty afterwards. */
char *metrics_text_take(struct metrics_text *t);
void metrics_text_free(struct metrics_text *t);

#endif
