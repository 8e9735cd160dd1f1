/* Fuzz target: a session spec as an agent reads it (POST /rpc/v1/sessions,
 * parsed by jsonutil_parse_body as the agent's RPC server does, then
 * session_spec_from_json against a node of two devices that binds one
 * folder directory). What it accepts is within its bounds, and written
 * again and read back it is accepted with the same fields. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/session_spec.h"
#include "common/jsonutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DEV_MEM ((int64_t)8 << 30)

static int64_t device_memory(void *ctx, const char *uuid)
{
	(void)ctx;
	return uuid && (!strcmp(uuid, "GPU-a") || !strcmp(uuid, "GPU-b")) ? DEV_MEM : -1;
}

static int mount_source(void *ctx, const char *source, struct terr *err)
{
	(void)ctx;
	return strcmp(source, "/srv/folders/f1") ? terr_set(err, EPERM, "not a folder") : 0;
}

static const struct session_spec_node node = {
	.id = "n1", .n_gpus = 2, .device_memory = device_memory, .mount_source = mount_source,
};

static void check_bounds(const struct session_spec *s)
{
	if (!s->id || !s->name || !s->image || !*s->image || strlen(s->image) > 255 || s->cpu_m < 0 ||
	    s->mem < 0 || s->fgpu_m < 0 || s->n_gpus > 2 || s->n_mounts > AGENT_MAX_FOLDER_MOUNTS ||
	    (s->n_gpus && s->fgpu_m <= 0) || (s->batch && (!s->startup || !*s->startup)) ||
	    (s->app_secret && strlen(s->app_secret) != AGENT_APP_SECRET_HEX) ||
	    json_object_size(s->env) > SESSION_SPEC_MAX_ENV)
		abort();
	for (size_t i = 0; i < s->n_gpus; i++)
		if (!s->gpus[i].uuid || s->gpus[i].memory_limit < 1 || s->gpus[i].memory_limit > DEV_MEM ||
		    s->gpus[i].sm_limit_percent < 0 || s->gpus[i].sm_limit_percent > 100)
			abort();
	for (size_t i = 0; i < s->n_mounts; i++)
		if (!s->mounts[i].source || !s->mounts[i].target)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct terr err = {0};
	json_t *body = jsonutil_parse_body((const char *)data, size, JSONUTIL_BODY_MAX_DEPTH, &err);
	if (!body)
		return 0;
	struct session_spec s;
	if (session_spec_from_json(body, &node, &s, &err) < 0) {
		if (!err.msg[0])
			abort();   /* every refusal says why */
		json_decref(body);
		return 0;
	}
	check_bounds(&s);
	/* What was accepted, written again, reads back the same. */
	json_t *again = session_spec_to_json(&s);
	struct session_spec t;
	struct terr err2 = {0};
	if (!again || session_spec_from_json(again, &node, &t, &err2) < 0)
		abort();
	if (strcmp(s.id, t.id) || strcmp(s.name, t.name) || strcmp(s.image, t.image) || s.root != t.root ||
	    s.batch != t.batch || s.cpu_m != t.cpu_m || s.mem != t.mem || s.fgpu_m != t.fgpu_m ||
	    s.n_gpus != t.n_gpus || s.n_mounts != t.n_mounts || !!s.app_secret != !!t.app_secret ||
	    !!s.owner_id != !!t.owner_id || (s.env && !json_equal(s.env, t.env)))
		abort();
	for (size_t i = 0; i < s.n_gpus; i++)
		if (strcmp(s.gpus[i].uuid, t.gpus[i].uuid) || s.gpus[i].memory_limit != t.gpus[i].memory_limit ||
		    s.gpus[i].sm_limit_percent != t.gpus[i].sm_limit_percent)
			abort();
	for (size_t i = 0; i < s.n_mounts; i++)
		if (strcmp(s.mounts[i].source, t.mounts[i].source) || strcmp(s.mounts[i].target, t.mounts[i].target) ||
		    s.mounts[i].readonly != t.mounts[i].readonly)
			abort();
	json_decref(again);
	json_decref(body);
	return 0;
}
