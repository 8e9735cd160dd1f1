/* Resource presets (src/manager/presets.c): what a body may say
 * (preset_parse, preset_name_check), and the manager's calls on a real
 * manager on a temporary data dir: the three defaults of a new install,
 * admins only for changes, a name taken, a missing one, and persistence
 * across a reopen. The API and CLI end to end: tests/e2e/test_presets.sh. */
#include "manager/core.h"
#include "manager/presets.h"
#include "testlib.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "manager/manager.h"

static json_t *body(const char *text)
{
	json_t *b = json_loads(text, 0, NULL);
	if (!b)
		FAILF("bad JSON in the test: %s", text);
	return b;
}

/* Parses text as a create (or, with r set beforehand, a change) and
 * returns the rc; err's message for the caller to check. */
static int parse(const char *text, bool create, struct preset_rec *r, struct terr *err)
{
	json_t *b = body(text);
	memset(err, 0, sizeof(*err));
	int rc = preset_parse(b, create, r, err);
	json_decref(b);
	return rc;
}

#define BAD(text, create, needle) do { \
		struct preset_rec r_ = {.name = "x", .res = {1000, 1 << 30, 0}}; \
		struct terr e_; \
		CHECK_INT(parse(text, create, &r_, &e_), -EINVAL); \
		if (!strstr(e_.msg, needle)) \
			FAILF("%s: message '%s' lacks '%s'", text, e_.msg, needle); \
	} while (0)

TEST(names)
{
	struct terr err = {0};
	CHECK_INT(preset_name_check("Small", &err), 0);
	CHECK_INT(preset_name_check("One GPU", &err), 0);
	CHECK_INT(preset_name_check("h100.big_2-x", &err), 0);
	CHECK_INT(preset_name_check("", &err), -EINVAL);
	CHECK_INT(preset_name_check(" lead", &err), -EINVAL);
	CHECK_INT(preset_name_check("trail ", &err), -EINVAL);
	CHECK_INT(preset_name_check("a/b", &err), -EINVAL);
	CHECK_INT(preset_name_check("caf\xc3\xa9", &err), -EINVAL);
	char longer[80];
	memset(longer, 'a', 64);
	longer[64] = '\0';
	CHECK_INT(preset_name_check(longer, &err), -EINVAL);
	longer[63] = '\0';
	CHECK_INT(preset_name_check(longer, &err), 0);
}

TEST(parse_create)
{
	struct preset_rec r = {0};
	struct terr err;
	CHECK_INT(parse("{\"name\":\"Large\",\"resources\":{\"cpu\":8,\"mem\":\"32g\",\"fgpu\":\"0.5\"},\"group\":\"h100\"}",
			true, &r, &err), 0);
	CHECK_STR(r.name, "Large");
	CHECK_INT(r.res.cpu_m, 8000);
	CHECK_INT(r.res.mem, 32LL << 30);
	CHECK_INT(r.res.fgpu_m, 500);
	CHECK_STR(r.resource_group, "h100");
	memset(&r, 0, sizeof(r));
	CHECK_INT(parse("{\"name\":\"cpu only\",\"resources\":{\"cpu\":\"0.25\",\"mem\":268435456},\"group\":null}",
			true, &r, &err), 0);
	CHECK_INT(r.res.fgpu_m, 0);
	CHECK_STR(r.resource_group, "");

	BAD("{\"resources\":{\"cpu\":1,\"mem\":\"1g\"}}", true, "name is required");
	BAD("{\"name\":\"x\"}", true, "resources is required");
	BAD("{\"name\":\"x\",\"resources\":{\"mem\":\"1g\"}}", true, "resources.cpu is required");
	BAD("{\"name\":\"x\",\"resources\":{\"cpu\":1}}", true, "resources.mem is required");
	BAD("{\"name\":\"x\",\"resources\":{\"cpu\":0,\"mem\":\"1g\"}}", true, "resources.cpu must be 0.01 to 1024");
	BAD("{\"name\":\"x\",\"resources\":{\"cpu\":2000,\"mem\":\"1g\"}}", true, "resources.cpu");
	BAD("{\"name\":\"x\",\"resources\":{\"cpu\":-1,\"mem\":\"1g\"}}", true, "resources.cpu");
	BAD("{\"name\":\"x\",\"resources\":{\"cpu\":1,\"mem\":\"1k\"}}", true, "resources.mem must be 6 MiB");
	BAD("{\"name\":\"x\",\"resources\":{\"cpu\":1,\"mem\":\"lots\"}}", true, "resources.mem");
	BAD("{\"name\":\"x\",\"resources\":{\"cpu\":1,\"mem\":\"1g\",\"fgpu\":2000}}", true, "resources.fgpu");
	BAD("{\"name\":\"x\",\"resources\":{\"cpu\":1,\"mem\":\"1g\",\"gpu\":1}}", true, "unknown resource 'gpu'");
	BAD("{\"name\":\"x\",\"resources\":[1]}", true, "resources must be an object");
	BAD("{\"name\":\"x\",\"resources\":{\"cpu\":1,\"mem\":\"1g\"},\"color\":\"red\"}", true, "unknown field 'color'");
	BAD("{\"name\":\"x\",\"resources\":{\"cpu\":1,\"mem\":\"1g\"},\"group\":5}", true, "group must be");
	BAD("{\"name\":\"x\",\"resources\":{\"cpu\":1,\"mem\":\"1g\"},\"group\":\"a b\"}", true, "group");
	BAD("{\"name\":\"a/b\",\"resources\":{\"cpu\":1,\"mem\":\"1g\"}}", true, "preset name");
	BAD("{\"name\":7,\"resources\":{\"cpu\":1,\"mem\":\"1g\"}}", true, "name");
	BAD("[]", true, "JSON object");
}

TEST(parse_change)
{
	struct preset_rec r = {.name = "Small", .res = {1000, 2LL << 30, 0}, .resource_group = "a100"};
	struct terr err;
	CHECK_INT(parse("{\"resources\":{\"fgpu\":1}}", false, &r, &err), 0);
	CHECK_INT(r.res.cpu_m, 1000);        /* the others stay */
	CHECK_INT(r.res.mem, 2LL << 30);
	CHECK_INT(r.res.fgpu_m, 1000);
	CHECK_STR(r.resource_group, "a100");
	CHECK_INT(parse("{\"group\":null}", false, &r, &err), 0);
	CHECK_STR(r.resource_group, "");
	CHECK_INT(parse("{}", false, &r, &err), 0);
	CHECK_STR(r.name, "Small");
	BAD("{\"name\":\"Big\"}", false, "cannot be changed");
	BAD("{\"resources\":{\"cpu\":0}}", false, "resources.cpu");
}

TEST(json_shape)
{
	struct preset_rec r = {.name = "One GPU", .res = {2000, 8LL << 30, 1500}, .created_ms = 1};
	json_t *o = preset_json(&r);
	CHECK_STR(json_string_value(json_object_get(o, "name")), "One GPU");
	json_t *res = json_object_get(o, "resources");
	CHECK_INT(json_integer_value(json_object_get(res, "cpu")), 2);
	CHECK_INT(json_integer_value(json_object_get(res, "mem")), 8LL << 30);
	CHECK(json_real_value(json_object_get(res, "fgpu")) == 1.5);
	CHECK(json_is_null(json_object_get(o, "group")));
	json_decref(o);
}

static char data_dir[] = "/tmp/tessera-presets-XXXXXX";

static struct manager *open_manager(void)
{
	struct manager_config cfg = {.data_dir = data_dir, .listen = "127.0.0.1:0", .dispatch_workers = 1};
	struct manager *m = NULL;
	struct terr err = {0};
	if (manager_open(&m, &cfg, &err) < 0)
		FAILF("manager_open(%s): %s", data_dir, err.msg);
	return m;
}

static json_t *named(json_t *list, const char *name)
{
	size_t i;
	json_t *p;
	json_array_foreach(list, i, p)
		if (!strcmp(json_string_value(json_object_get(p, "name")), name))
			return p;
	return NULL;
}

TEST(manager_presets)
{
	if (!mkdtemp(data_dir))
		FAILF("mkdtemp failed");
	struct manager *m = open_manager();
	if (!m)
		return;
	json_t *list = mgr_presets_list(m);
	CHECK_INT(json_array_size(list), 3);
	CHECK_STR(json_string_value(json_object_get(json_array_get(list, 0), "name")), "Small");
	json_decref(list);

	struct user_rec admin = {.id = "a", .email = "admin@x", .is_admin = true};
	struct user_rec user = {.id = "u", .email = "u@x"};
	struct terr err = {0};
	json_t *out = NULL, *b = body("{\"name\":\"Large\",\"resources\":{\"cpu\":8,\"mem\":\"32g\"},\"group\":\"h100\"}");
	CHECK_INT(mgr_preset_create(m, &user, b, &out, &err), -EPERM);
	CHECK_INT(mgr_preset_create(m, &admin, b, &out, &err), 0);
	json_decref(out);
	memset(&err, 0, sizeof(err));
	CHECK_INT(mgr_preset_create(m, &admin, b, &out, &err), -EEXIST);
	CHECK(strstr(err.msg, "a preset named Large exists") != NULL);
	json_decref(b);

	b = body("{\"resources\":{\"fgpu\":2}}");
	CHECK_INT(mgr_preset_update(m, &user, "Large", b, &out, &err), -EPERM);
	CHECK_INT(mgr_preset_update(m, &admin, "Huge", b, &out, &err), -ENOENT);
	CHECK_INT(mgr_preset_update(m, &admin, "Large", b, &out, &err), 0);
	json_decref(out);
	json_decref(b);
	CHECK_INT(mgr_preset_delete(m, &user, "Medium", &err), -EPERM);
	CHECK_INT(mgr_preset_delete(m, &admin, "Medium", &err), 0);
	CHECK_INT(mgr_preset_delete(m, &admin, "Medium", &err), -ENOENT);
	manager_close(m);

	/* What was changed is what a restart finds. */
	m = open_manager();
	if (!m)
		return;
	list = mgr_presets_list(m);
	CHECK_INT(json_array_size(list), 3);
	CHECK(named(list, "Medium") == NULL);
	json_t *large = named(list, "Large");
	CHECK(large != NULL);
	if (large) {
		CHECK_INT(json_integer_value(json_object_get(json_object_get(large, "resources"), "fgpu")), 2);
		CHECK_INT(json_integer_value(json_object_get(json_object_get(large, "resources"), "cpu")), 8);
		CHECK_STR(json_string_value(json_object_get(large, "group")), "h100");
	}
	json_decref(list);
	manager_close(m);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", data_dir);
	if (system(cmd) != 0)
		FAILF("cannot remove %s", data_dir);
}

int main(void)
{
	log_set_level(LOG_WARN);
	RUN(names);
	RUN(parse_create);
	RUN(parse_change);
	RUN(json_shape);
	RUN(manager_presets);
	return testlib_done();
}
