/* common/metrics.c: the Prometheus text a writer makes, exactly (HELP and
 * TYPE once per family, label escaping, special values, a histogram's
 * cumulative buckets), and that text through the strict parser of the
 * end-to-end tests (tests/e2e/promparse.py) when python3 is there. */
#include "common/metrics.h"
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs promparse.py on text: 0 when it parses. */
static int promparse(const char *text)
{
	const char *py = getenv("TESSERA_TEST_PROMPARSE");
	if (!py || access(py, R_OK) != 0 || system("python3 -c '' 2>/dev/null") != 0)
		return 0;   /* no parser here: the exact checks still ran */
	char path[] = "/tmp/tessera-test-metrics.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "python3 '%s' '%s' >/dev/null", py, path);
	int rc = n == (ssize_t)strlen(text) ? system(cmd) : -1;
	unlink(path);
	return rc;
}

TEST(families_and_labels)
{
	struct metrics_text t = {0};
	metrics_family(&t, "x_sessions", "gauge", "Sessions, by status.\nSecond line \\ too.");
	const char *l1[] = {"status", "RUNNING", NULL};
	const char *l2[] = {"status", "a\"b\\c\nd", "node", "n1", NULL};
	metrics_sample(&t, "x_sessions", l1, 3);
	metrics_family(&t, "x_sessions", "gauge", "again: not written twice");
	metrics_sample(&t, "x_sessions", l2, 0.5);
	metrics_family(&t, "x_total", "counter", "A counter.");
	metrics_sample(&t, "x_total", NULL, 12345678901.0);
	metrics_family(&t, "x_odd", "gauge", "Special values.");
	const char *a[] = {"v", "nan", NULL}, *b[] = {"v", "inf", NULL}, *c[] = {"v", "-inf", NULL};
	metrics_sample(&t, "x_odd", a, NAN);
	metrics_sample(&t, "x_odd", b, INFINITY);
	metrics_sample(&t, "x_odd", c, -INFINITY);
	char *text = metrics_text_take(&t);
	CHECK_STR(text,
		  "# HELP x_sessions Sessions, by status.\\nSecond line \\\\ too.\n"
		  "# TYPE x_sessions gauge\n"
		  "x_sessions{status=\"RUNNING\"} 3\n"
		  "x_sessions{status=\"a\\\"b\\\\c\\nd\",node=\"n1\"} 0.5\n"
		  "# HELP x_total A counter.\n"
		  "# TYPE x_total counter\n"
		  "x_total 12345678901\n"
		  "# HELP x_odd Special values.\n"
		  "# TYPE x_odd gauge\n"
		  "x_odd{v=\"nan\"} NaN\n"
		  "x_odd{v=\"inf\"} +Inf\n"
		  "x_odd{v=\"-inf\"} -Inf\n");
	CHECK_INT(promparse(text), 0);
	free(text);
	CHECK(t.buf == NULL);
}

TEST(histograms)
{
	static const double bounds[] = {0.1, 1, 10};
	struct metrics_hist h;
	metrics_hist_init(&h, bounds, 3);
	metrics_hist_observe(&h, 0.05);
	metrics_hist_observe(&h, 0.1);   /* le is inclusive */
	metrics_hist_observe(&h, 5);
	metrics_hist_observe(&h, 50);
	struct metrics_text t = {0};
	metrics_family(&t, "x_seconds", "histogram", "Durations.");
	const char *l[] = {"route", "/v1/sessions/{ref}", NULL};
	metrics_hist_write(&t, "x_seconds", l, &h);
	char *text = metrics_text_take(&t);
	CHECK_STR(text,
		  "# HELP x_seconds Durations.\n"
		  "# TYPE x_seconds histogram\n"
		  "x_seconds_bucket{route=\"/v1/sessions/{ref}\",le=\"0.1\"} 2\n"
		  "x_seconds_bucket{route=\"/v1/sessions/{ref}\",le=\"1\"} 2\n"
		  "x_seconds_bucket{route=\"/v1/sessions/{ref}\",le=\"10\"} 3\n"
		  "x_seconds_bucket{route=\"/v1/sessions/{ref}\",le=\"+Inf\"} 4\n"
		  "x_seconds_sum{route=\"/v1/sessions/{ref}\"} 55.15\n"
		  "x_seconds_count{route=\"/v1/sessions/{ref}\"} 4\n");
	CHECK_INT(promparse(text), 0);
	free(text);
	/* Unlabelled, empty. */
	metrics_hist_init(&h, bounds, 3);
	metrics_family(&t, "y_seconds", "histogram", "Nothing yet.");
	metrics_hist_write(&t, "y_seconds", NULL, &h);
	text = metrics_text_take(&t);
	CHECK_CONTAINS(text, "y_seconds_bucket{le=\"+Inf\"} 0\ny_seconds_sum 0\ny_seconds_count 0\n");
	CHECK_INT(promparse(text), 0);
	free(text);
}

TEST(the_parser_is_strict)
{
	/* The checks above mean something only if the parser refuses bad
	 * text: a sample before its TYPE, a family split in two, a bad
	 * escape, buckets that shrink. */
	if (!getenv("TESSERA_TEST_PROMPARSE"))
		return;
	CHECK(promparse("x 1\n# TYPE x gauge\n") != 0);
	CHECK(promparse("# TYPE x gauge\nx 1\n# TYPE y gauge\ny 1\nx{a=\"b\"} 2\n") != 0);
	CHECK(promparse("# TYPE x gauge\nx{a=\"\\q\"} 1\n") != 0);
	CHECK(promparse("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n") != 0);
	CHECK(promparse("# TYPE x counter\nx -1\n") != 0);
	CHECK(promparse("# TYPE x gauge\nx 1") != 0);
	CHECK(promparse("# TYPE x gauge\nx 1\n") == 0);
}

int main(void)
{
	RUN(families_and_labels);
	RUN(histograms);
	RUN(the_parser_is_strict);
	return testlib_done();
}
