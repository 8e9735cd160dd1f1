/* The admin dashboard's aggregation (src/manager/dashboard.c): capacity
 * per GPU model and node, sessions by status, the busiest users and the
 * recent failures, from a snapshot written here by hand. */
#include "manager/dashboard.h"
#include "testlib.h"

#include <string.h>

#define GIB (1024LL * 1024 * 1024)
#define HOUR (3600LL * 1000)
#define NOW (1800000000000LL)

static const struct dash_gpu gpus_a[] = {
	{"Mock H100", 80 * GIB, 2000, 1500},
	{"Mock H100", 80 * GIB, 2000, 0},
	{"Mock A100", 40 * GIB, 2000, 500},
};
static const struct dash_gpu gpus_b[] = {
	{"Mock H100", 80 * GIB, 2000, 2000},
};
static const struct dash_gpu gpus_lost[] = {
	{"Mock H100", 80 * GIB, 2000, 0},
};

static const struct dash_node nodes[] = {
	{"node-a", true, false, "default", {16000, 64 * GIB, 6000}, {4000, 8 * GIB, 2000}, 3, gpus_a, 3},
	/* Drained: its free room is no one's to take. */
	{"node-b", true, true, "big", {8000, 32 * GIB, 2000}, {2000, 4 * GIB, 2000}, 1, gpus_b, 1},
	/* LOST: counted in no total, listed with its status. */
	{"node-c", false, false, "default", {8000, 32 * GIB, 2000}, {0, 0, 0}, 0, gpus_lost, 1},
};

static const struct dash_session sessions[] = {
	{"s1", "train", "ann@x.org", SS_RUNNING, "", {2000, 4 * GIB, 1500}, false, 0},
	{"s2", "infer", "bob@x.org", SS_RUNNING, "", {1000, 2 * GIB, 2000}, false, 0},
	/* bob's cluster session: its sub adds to what he holds, not to his
	 * count of sessions. */
	{"s3", "dist", "bob@x.org", SS_RUNNING, "", {1000, 2 * GIB, 500}, false, 0},
	{"s3s", "dist", "bob@x.org", SS_RUNNING, "", {1000, 2 * GIB, 0}, true, 0},
	/* PENDING holds nothing, however much it asks. */
	{"s4", "wait", "cy@x.org", SS_PENDING, "no node has room", {64000, 256 * GIB, 8000}, false, 0},
	{"s5", "broke", "ann@x.org", SS_ERROR, "start failed: image not found", {1000, GIB, 0}, false, NOW - 2 * HOUR},
	{"s6", "older", "ann@x.org", SS_ERROR, "container died (exit 1)", {1000, GIB, 0}, false, NOW - 1 * HOUR},
	/* Ended ERROR two days ago: not recent. */
	{"s7", "ancient", "ann@x.org", SS_ERROR, "long ago", {1000, GIB, 0}, false, NOW - 48 * HOUR},
	{"s8", "gone", "cy@x.org", SS_LOST, "node node-c lost: no heartbeat for 6 s", {1000, GIB, 0}, false, 0},
	{"s9", "done", "cy@x.org", SS_TERMINATED, "", {1000, GIB, 0}, false, NOW - 3 * HOUR},
	{"s10", "done2", "cy@x.org", SS_TERMINATED, "", {1000, GIB, 0}, false, NOW - 30 * HOUR},
};

static json_t *build(size_t top, size_t fails)
{
	struct dash_input in = {
		.nodes = nodes, .n_nodes = 3, .sessions = sessions, .n_sessions = sizeof(sessions) / sizeof(sessions[0]),
		.now_ms = NOW, .window_ms = 24 * HOUR, .top_users = top, .max_failures = fails,
	};
	return dash_aggregate(&in);
}

static double num(json_t *o, const char *a, const char *b)
{
	json_t *v = json_object_get(o, a);
	if (b)
		v = json_object_get(v, b);
	return json_number_value(v);
}

TEST(totals)
{
	json_t *d = build(10, 20);
	CHECK(d != NULL);
	json_t *t = json_object_get(d, "totals");
	CHECK_INT((int)json_integer_value(json_object_get(t, "nodes")), 3);
	CHECK_INT((int)json_integer_value(json_object_get(t, "nodes_alive")), 2);
	/* Alive nodes only: a and b. */
	CHECK(num(t, "capacity", "cpu") == 24.0);
	CHECK(num(t, "capacity", "fgpu") == 8.0);
	CHECK(num(t, "used", "fgpu") == 4.0);
	/* Free: node-a only (node-b drained): 12 CPU, 56 GiB, 4 fGPU. */
	CHECK(num(t, "free", "cpu") == 12.0);
	CHECK_INT((int)(json_integer_value(json_object_get(json_object_get(t, "free"), "mem")) / GIB), 56);
	CHECK(num(t, "free", "fgpu") == 4.0);
	CHECK_INT((int)json_integer_value(json_object_get(d, "window_s")), 86400);
	json_decref(d);
}

TEST(per_model)
{
	json_t *d = build(10, 20);
	json_t *models = json_object_get(d, "gpu_models");
	CHECK_INT((int)json_array_size(models), 2);
	json_t *h = json_array_get(models, 0), *a = json_array_get(models, 1);
	CHECK_STR(json_string_value(json_object_get(h, "model")), "Mock H100");
	/* The LOST node's H100 is not counted: 3 devices on 2 nodes. */
	CHECK_INT((int)json_integer_value(json_object_get(h, "devices")), 3);
	CHECK_INT((int)json_integer_value(json_object_get(h, "nodes")), 2);
	CHECK(num(h, "fgpu_capacity", NULL) == 6.0);
	CHECK(num(h, "fgpu_used", NULL) == 3.5);
	CHECK(num(h, "fgpu_free", NULL) == 2.5);
	CHECK_STR(json_string_value(json_object_get(a, "model")), "Mock A100");
	CHECK(num(a, "fgpu_free", NULL) == 1.5);
	json_decref(d);
}

TEST(per_node)
{
	json_t *d = build(10, 20);
	json_t *ns = json_object_get(d, "nodes");
	CHECK_INT((int)json_array_size(ns), 3);
	json_t *a = json_array_get(ns, 0), *b = json_array_get(ns, 1), *c = json_array_get(ns, 2);
	CHECK_STR(json_string_value(json_object_get(a, "status")), "ALIVE");
	CHECK(json_is_true(json_object_get(a, "schedulable")));
	CHECK(num(a, "free", "cpu") == 12.0);
	/* node-a's GPUs by model: 2 x H100 (1.5 of 4 used), 1 x A100. */
	json_t *g = json_object_get(a, "gpus");
	CHECK_INT((int)json_array_size(g), 2);
	CHECK_INT((int)json_integer_value(json_object_get(json_array_get(g, 0), "count")), 2);
	CHECK(num(json_array_get(g, 0), "fgpu_used", NULL) == 1.5);
	CHECK(num(json_array_get(g, 0), "fgpu_capacity", NULL) == 4.0);
	CHECK(json_object_get(json_array_get(g, 0), "fgpu_used_m") == NULL);
	CHECK(json_is_false(json_object_get(b, "schedulable")));
	CHECK_STR(json_string_value(json_object_get(b, "group")), "big");
	CHECK_STR(json_string_value(json_object_get(c, "status")), "LOST");
	json_decref(d);
}

TEST(by_status)
{
	json_t *d = build(10, 20);
	json_t *bs = json_object_get(json_object_get(d, "sessions"), "by_status");
	/* s1, s2, s3 (its sub not counted). */
	CHECK_INT((int)json_integer_value(json_object_get(bs, "RUNNING")), 3);
	CHECK_INT((int)json_integer_value(json_object_get(bs, "PENDING")), 1);
	CHECK_INT((int)json_integer_value(json_object_get(bs, "LOST")), 1);
	/* Final ones within the day only: s5, s6; s9. */
	CHECK_INT((int)json_integer_value(json_object_get(bs, "ERROR")), 2);
	CHECK_INT((int)json_integer_value(json_object_get(bs, "TERMINATED")), 1);
	/* Every status named, those without a session too. */
	CHECK_INT((int)json_integer_value(json_object_get(bs, "CANCELLED")), 0);
	CHECK_INT((int)json_object_size(bs), SS__COUNT);
	json_decref(d);
}

TEST(top_users)
{
	json_t *d = build(10, 20);
	json_t *u = json_object_get(d, "top_users");
	/* Users who hold something now: cy for s8 alone (LOST still holds
	 * its room: its node may come back; PENDING holds nothing). */
	CHECK_INT((int)json_array_size(u), 3);
	json_t *first = json_array_get(u, 0);
	/* bob: 2 + 0.5 fGPU beats ann's 1.5. */
	CHECK_STR(json_string_value(json_object_get(first, "email")), "bob@x.org");
	CHECK_INT((int)json_integer_value(json_object_get(first, "sessions")), 2);
	CHECK(num(first, "held", "fgpu") == 2.5);
	CHECK(num(first, "held", "cpu") == 3.0);
	CHECK_STR(json_string_value(json_object_get(json_array_get(u, 1), "email")), "ann@x.org");
	CHECK(num(json_array_get(u, 1), "held", "cpu") == 2.0);
	CHECK_STR(json_string_value(json_object_get(json_array_get(u, 2), "email")), "cy@x.org");
	CHECK(num(json_array_get(u, 2), "held", "fgpu") == 0.0);
	json_decref(d);
	/* At most top_users of them. */
	d = build(1, 20);
	CHECK_INT((int)json_array_size(json_object_get(d, "top_users")), 1);
	json_decref(d);
}

TEST(failures)
{
	json_t *d = build(10, 20);
	json_t *f = json_object_get(d, "failures");
	/* LOST first, then ERROR newest first; not the one of two days ago. */
	CHECK_INT((int)json_array_size(f), 3);
	CHECK_STR(json_string_value(json_object_get(json_array_get(f, 0), "id")), "s8");
	CHECK(json_is_null(json_object_get(json_array_get(f, 0), "at")));
	CHECK_STR(json_string_value(json_object_get(json_array_get(f, 1), "id")), "s6");
	CHECK_STR(json_string_value(json_object_get(json_array_get(f, 1), "status_info")), "container died (exit 1)");
	CHECK_STR(json_string_value(json_object_get(json_array_get(f, 1), "owner")), "ann@x.org");
	CHECK(json_is_string(json_object_get(json_array_get(f, 1), "at")));
	CHECK_STR(json_string_value(json_object_get(json_array_get(f, 2), "id")), "s5");
	json_decref(d);
	d = build(10, 2);
	CHECK_INT((int)json_array_size(json_object_get(d, "failures")), 2);
	json_decref(d);
}

TEST(empty)
{
	struct dash_input in = {.now_ms = NOW, .window_ms = 24 * HOUR, .top_users = 10, .max_failures = 20};
	json_t *d = dash_aggregate(&in);
	CHECK(d != NULL);
	CHECK_INT((int)json_array_size(json_object_get(d, "nodes")), 0);
	CHECK_INT((int)json_array_size(json_object_get(d, "gpu_models")), 0);
	CHECK_INT((int)json_array_size(json_object_get(d, "top_users")), 0);
	CHECK(num(json_object_get(d, "totals"), "capacity", "cpu") == 0.0);
	json_decref(d);
}

int main(void)
{
	RUN(totals);
	RUN(per_model);
	RUN(per_node);
	RUN(by_status);
	RUN(top_users);
	RUN(failures);
	RUN(empty);
	return testlib_done();
}
