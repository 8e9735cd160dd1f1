/* A mock agent link for the benchmarks that run a real manager in process
 * (sched-bench, events-bench): starts succeed at once with a container id
 * made of the session's, nothing runs, and what needs a real node (exec,
 * logs, image removal) answers ENOSYS. */
#ifndef TESSERA_BENCH_MOCK_LINK_H
#define TESSERA_BENCH_MOCK_LINK_H

#include <errno.h>
#include <stdio.h>

#include "manager/state.h"

static int mock_start(void *ctx, json_t *spec, char cid[RT_ID_MAX], char app_endpoint[AGENT_APP_ENDPOINT_MAX],
		      struct agent_start_times *times, struct terr *err)
{
	(void)times;
	(void)ctx;
	(void)err;
	snprintf(app_endpoint, AGENT_APP_ENDPOINT_MAX, "127.0.0.1:49999");
	snprintf(cid, RT_ID_MAX, "mock-%.24s", json_string_value(json_object_get(spec, "id")));
	return 0;
}
static int mock_destroy(void *ctx, const char *sid, const char *cid, struct terr *err)
{
	(void)ctx; (void)sid; (void)cid; (void)err;
	return 0;
}
static int mock_exec(void *ctx, const char *cid, json_t *cmd, int t, struct pump **r, struct terr *err)
{
	(void)ctx; (void)cid; (void)cmd; (void)t; (void)r;
	return terr_set(err, ENOSYS, "mock agent");
}
static int mock_logs(void *ctx, const char *cid, int tail, bool follow, struct pump **out, struct terr *err)
{
	(void)ctx; (void)cid; (void)tail; (void)follow; (void)out;
	return terr_set(err, ENOSYS, "mock agent");
}
static int mock_image_exists(void *ctx, const char *ref, bool *exists, struct terr *err)
{
	(void)ctx; (void)ref; (void)err;
	*exists = true;
	return 0;
}
static int mock_images(void *ctx, json_t **refs, struct terr *err)
{
	(void)ctx; (void)err;
	*refs = json_array();
	return 0;
}
static void mock_release(void *ctx)
{
	(void)ctx;
}
static int mock_image_remove(void *ctx, const char *ref, struct terr *err)
{
	(void)ctx; (void)ref;
	return terr_set(err, ENOSYS, "mock agent");
}
static const struct agent_link_ops mock_link = {
	"mock", mock_start, mock_destroy, mock_exec, mock_logs, mock_image_exists, mock_images, mock_image_remove,
	NULL, NULL, mock_release,
};

#endif
