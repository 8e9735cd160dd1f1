/* Aligned tables, ages, fGPU and the session/node views. */
#include "cli/table.h"
#include "cli/views.h"
#include "testlib.h"

#include <stdlib.h>

static char *render(const struct cli_table *t)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	cli_table_print(t, f);
	fclose(f);
	return text;
}

TEST(alignment)
{
	static const char *const hdr[] = {"name", "status", "info"};
	struct cli_table *t = cli_table_new(3, hdr);
	const char *r1[] = {"a", "RUNNING", "ok"};
	const char *r2[] = {"longer-name", "PENDING", NULL};
	const char *r3[] = {"ü-é", "X", "last"};  /* 3 characters, 5 bytes */
	CHECK_INT(cli_table_add(t, r1), 0);
	CHECK_INT(cli_table_add(t, r2), 0);
	CHECK_INT(cli_table_add(t, r3), 0);
	char *out = render(t);
	CHECK_STR(out,
		  "NAME         STATUS   INFO\n"
		  "a            RUNNING  ok\n"
		  "longer-name  PENDING  -\n"
		  "ü-é          X        last\n");
	free(out);
	cli_table_free(t);

	/* Header only; header wider than the cells. */
	static const char *const h2[] = {"id", "sessions"};
	t = cli_table_new(2, h2);
	out = render(t);
	CHECK_STR(out, "ID  SESSIONS\n");
	free(out);
	const char *r[] = {"n", "1"};
	cli_table_add(t, r);
	out = render(t);
	CHECK_STR(out, "ID  SESSIONS\nn   1\n");
	free(out);
	cli_table_free(t);
}

TEST(ages)
{
	char b[16];
	static const struct { long long s; const char *want; } cases[] = {
		{-5, "0s"}, {0, "0s"}, {5, "5s"}, {59, "59s"}, {60, "1m"}, {180, "3m"},
		{3599, "59m"}, {3600, "1h"}, {7200, "2h"}, {86399, "23h"}, {86400, "1d"},
		{4 * 86400 + 5, "4d"}, {400LL * 86400, "400d"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cli_format_age(cases[i].s, b, sizeof(b));
		CHECK_STR(b, cases[i].want);
	}
}

TEST(fgpu_and_shorten)
{
	char b[64];
	cli_format_fgpu(0, b, sizeof(b));
	CHECK_STR(b, "-");
	cli_format_fgpu(500, b, sizeof(b));
	CHECK_STR(b, "0.5 fGPU");
	cli_format_fgpu(2000, b, sizeof(b));
	CHECK_STR(b, "2 fGPU");
	cli_format_fgpu(125, b, sizeof(b));
	CHECK_STR(b, "0.125 fGPU");

	cli_shorten("short", 60, b, sizeof(b));
	CHECK_STR(b, "short");
	cli_shorten("0123456789abcdef", 10, b, sizeof(b));
	CHECK_STR(b, "0123456...");
	cli_shorten("0123456789", 10, b, sizeof(b));
	CHECK_STR(b, "0123456789");
	cli_shorten("two\nlines", 60, b, sizeof(b));
	CHECK_STR(b, "two lines");
	cli_shorten("éééééééééééé", 5, b, sizeof(b));
	CHECK_STR(b, "éé...");
	cli_shorten(NULL, 5, b, sizeof(b));
	CHECK_STR(b, "");
}

TEST(session_view)
{
	json_t *list = json_loads(
		"[{\"id\":\"1\",\"name\":\"job-1\",\"status\":\"RUNNING\",\"image\":\"img:1\","
		"\"status_info\":\"running on node local\",\"agent\":\"local\","
		"\"resources\":{\"cpu\":0.5,\"mem\":268435456,\"fgpu\":0.5},"
		"\"created_at\":\"2026-11-22T08:40:00.123Z\"},"
		"{\"id\":\"2\",\"name\":\"job-2\",\"status\":\"PENDING\",\"image\":\"img:1\","
		"\"status_info\":\"waiting for a node with 1 CPU and 256 MiB free, and the queue ahead of it to drain first\","
		"\"agent\":null,\"resources\":{\"cpu\":1,\"mem\":1610612736,\"fgpu\":0},"
		"\"created_at\":\"2026-11-20T08:40:00Z\"}]", 0, NULL);
	CHECK(list != NULL);
	time_t now = 1795336800 + 5;  /* 2026-11-22T08:40:05Z */
	struct cli_table *t = cli_session_table(list, now);
	char *out = render(t);
	CHECK_STR(out,
		  "NAME   STATUS   IMAGE  CPU  MEM      FGPU      NODE   AGE  INFO\n"
		  "job-1  RUNNING  img:1  0.5  256 MiB  0.5 fGPU  local  5s   running on node local\n"
		  "job-2  PENDING  img:1  1    1.5 GiB  -         -      2d   "
		  "waiting for a node with 1 CPU and 256 MiB free, and the q...\n");
	free(out);
	cli_table_free(t);
	json_decref(list);
}

/* An admin's list of two owners' sessions, one of them batch. */
TEST(session_view_with_owners_and_types)
{
	json_t *list = json_loads(
		"[{\"id\":\"1\",\"name\":\"web\",\"owner\":\"admin@x.org\",\"status\":\"RUNNING\","
		"\"type\":\"interactive\",\"image\":\"img:1\",\"status_info\":\"running\",\"agent\":\"local\","
		"\"resources\":{\"cpu\":1,\"mem\":268435456,\"fgpu\":0},\"created_at\":\"2026-11-22T08:40:00Z\"},"
		"{\"id\":\"2\",\"name\":\"job\",\"owner\":\"bob@x.org\",\"status\":\"ERROR\","
		"\"type\":\"batch\",\"image\":\"img:1\",\"status_info\":\"batch command failed with exit code 3\","
		"\"agent\":\"local\",\"resources\":{\"cpu\":1,\"mem\":268435456,\"fgpu\":0},"
		"\"created_at\":\"2026-11-22T08:40:00Z\"}]", 0, NULL);
	CHECK(list != NULL);
	time_t now = 1795336800 + 5;
	struct cli_table *t = cli_session_table(list, now);
	char *out = render(t);
	CHECK_STR(out,
		  "NAME  OWNER        STATUS   TYPE         IMAGE  CPU  MEM      FGPU  NODE   AGE  INFO\n"
		  "web   admin@x.org  RUNNING  interactive  img:1  1    256 MiB  -     local  5s   running\n"
		  "job   bob@x.org    ERROR    batch        img:1  1    256 MiB  -     local  5s   "
		  "batch command failed with exit code 3\n");
	free(out);
	cli_table_free(t);
	json_decref(list);
}

TEST(node_view)
{
	json_t *list = json_loads(
		"[{\"id\":\"local\",\"status\":\"ALIVE\",\"capacity\":{\"cpu\":2,\"mem\":24000000000,\"fgpu\":2},"
		"\"used\":{\"cpu\":1.5,\"mem\":268435456,\"fgpu\":0.5},\"sessions\":2,"
		"\"usage\":{\"cpu_cores\":1.25,\"mem_bytes\":134217728,\"t\":1},"
		"\"gpus\":[{\"index\":0,\"fgpu_capacity\":1,\"fgpu_used\":0.5},"
		"{\"index\":1,\"fgpu_capacity\":1,\"fgpu_used\":0}]},"
		"{\"id\":\"cpu-only\",\"status\":\"LOST\",\"capacity\":{\"cpu\":4,\"mem\":1073741824,\"fgpu\":0},"
		"\"used\":{\"cpu\":0,\"mem\":0,\"fgpu\":0},\"sessions\":0,\"gpus\":[]}]", 0, NULL);
	struct cli_table *t = cli_node_table(list);
	char *out = render(t);
	CHECK_STR(out,
		  "ID        STATUS  CPU    MEM               FGPU   SESSIONS  GPUS           CPU USE  MEM USE\n"
		  "local     ALIVE   1.5/2  256 MiB/22.4 GiB  0.5/2  2         0:0.5/1 1:0/1  1.25     128 MiB\n"
		  "cpu-only  LOST    0/4    0 B/1 GiB         0/0    0         -              -        -\n");
	free(out);
	cli_table_free(t);
	json_decref(list);
}

int main(void)
{
	RUN(alignment);
	RUN(ages);
	RUN(fgpu_and_shorten);
	RUN(session_view);
	RUN(session_view_with_owners_and_types);
	RUN(node_view);
	return testlib_done();
}
