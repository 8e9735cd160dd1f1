/* manager/validate.c: image references, env, and the whole
 * create request (defaults, amounts, limits), with messages naming the
 * field. */
#include "manager/validate.h"
#include "testlib.h"

#include <stdlib.h>

static void image_refused(const char *ref, int line)
{
	struct terr err = {0};
	int rc = validate_image_ref(ref, &err);
	testlib_checks++;
	if (rc != -EINVAL || err.code != EINVAL || !strstr(err.msg, "image"))
		FAILF("line %d: image '%s' gave %d '%s', expected -EINVAL naming the image",
		      line, ref, rc, err.msg);
}
static void image_accepted(const char *ref, int line)
{
	struct terr err = {0};
	int rc = validate_image_ref(ref, &err);
	testlib_checks++;
	if (rc != 0)
		FAILF("line %d: image '%s' refused: %s", line, ref, err.msg);
}
#define IMAGE_BAD(r) image_refused((r), __LINE__)
#define IMAGE_OK(r) image_accepted((r), __LINE__)

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

TEST(image_refs)
{
	IMAGE_OK("busybox");
	IMAGE_OK("busybox:1.36");
	IMAGE_OK("library/python:3.11-slim");
	IMAGE_OK("registry.example.com:5000/team/img:tag");
	IMAGE_OK("localhost/x");
	IMAGE_OK("localhost:5000/x:1");
	IMAGE_OK("img@sha256:" HEX64);
	IMAGE_OK("img:tag@sha256:" HEX64);
	IMAGE_OK("a/b_c.d-e:tag");
	IMAGE_OK("tessera-test:e2e-1");
	IMAGE_OK("img:TAG_1.x");

	char tag128[200], tag129[200], long256[300], long255[300];
	snprintf(tag128, sizeof(tag128), "img:%0128d", 0);
	snprintf(tag129, sizeof(tag129), "img:%0129d", 0);
	IMAGE_OK(tag128);
	IMAGE_BAD(tag129);
	memset(long255, 'a', 255);
	long255[255] = '\0';
	IMAGE_OK(long255);
	memset(long256, 'a', 256);
	long256[256] = '\0';
	IMAGE_BAD(long256);

	IMAGE_BAD("");
	IMAGE_BAD("UPPER");
	IMAGE_BAD("Busybox:1");
	IMAGE_BAD("a//b");
	IMAGE_BAD("a/");
	IMAGE_BAD("/a");
	IMAGE_BAD("-a");
	IMAGE_BAD("a-");
	IMAGE_BAD("img:");
	IMAGE_BAD("img:-x");
	IMAGE_BAD("img:.x");
	IMAGE_BAD("img:a b");
	IMAGE_BAD("img:a:b");
	IMAGE_BAD("img@sha256:short");
	IMAGE_BAD("img@sha256:" HEX64 "0");
	IMAGE_BAD("img@md5:" HEX64);
	IMAGE_BAD("img@sha256:" "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg");
	IMAGE_BAD("a b");
	IMAGE_BAD("a\xc3\xa9");
	IMAGE_BAD(":tag");

	struct terr err = {0};
	CHECK(validate_image_ref("img:", &err) < 0);
	CHECK_CONTAINS(err.msg, "tag");
	CHECK(validate_image_ref("img@sha256:short", &err) < 0);
	CHECK_CONTAINS(err.msg, "sha256");
}

static json_t *parse(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
	if (!v)
		FAILF("bad test JSON %s: %s", text, je.text);
	return v;
}

static void env_refused(const char *text, const char *needle, int line)
{
	json_t *env = parse(text);
	struct terr err = {0};
	int rc = validate_env(env, &err);
	testlib_checks++;
	if (rc != -EINVAL || !strstr(err.msg, "env") || !strstr(err.msg, needle))
		FAILF("line %d: env %s gave %d '%s', expected -EINVAL with 'env' and '%s'",
		      line, text, rc, err.msg, needle);
	json_decref(env);
}
#define ENV_BAD(t, n) env_refused((t), (n), __LINE__)

TEST(env_rules)
{
	json_t *env = parse("{\"A\":\"1\",\"_x1\":\"\",\"PATH_2\":\"v w\"}");
	CHECK_INT(validate_env(env, NULL), 0);
	json_decref(env);
	env = parse("{}");
	CHECK_INT(validate_env(env, NULL), 0);
	json_decref(env);

	ENV_BAD("{\"TESSERA_X\":\"1\"}", "TESSERA_");
	ENV_BAD("{\"TESSERA_\":\"1\"}", "reserved");
	ENV_BAD("{\"1A\":\"1\"}", "1A");
	ENV_BAD("{\"A-B\":\"1\"}", "A-B");
	ENV_BAD("{\"A B\":\"1\"}", "A B");
	ENV_BAD("{\"\":\"1\"}", "name");
	ENV_BAD("{\"A\xc3\xa9\":\"1\"}", "name");
	ENV_BAD("{\"A\":5}", "'A' must be a string");
	ENV_BAD("{\"A\":null}", "must be a string");
	ENV_BAD("{\"A\":true}", "must be a string");
	ENV_BAD("{\"A\":[\"x\"]}", "must be a string");
	ENV_BAD("[\"A=1\"]", "object");
	ENV_BAD("\"A=1\"", "object");

	/* NUL inside a value */
	env = json_object();
	json_object_set_new(env, "A", json_stringn("a\0b", 3));
	struct terr err = {0};
	CHECK_INT(validate_env(env, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "NUL");
	json_decref(env);

	/* at most VALIDATE_MAX_ENV variables */
	env = json_object();
	char k[32];
	for (int i = 0; i < VALIDATE_MAX_ENV; i++) {
		snprintf(k, sizeof(k), "V%d", i);
		json_object_set_new(env, k, json_string("x"));
	}
	CHECK_INT(validate_env(env, NULL), 0);
	json_object_set_new(env, "ONE_MORE", json_string("x"));
	CHECK_INT(validate_env(env, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "env");
	CHECK_CONTAINS(err.msg, "128");
	json_decref(env);

	/* values up to VALIDATE_MAX_ENV_VALUE bytes */
	char *big = malloc(VALIDATE_MAX_ENV_VALUE + 2);
	memset(big, 'v', VALIDATE_MAX_ENV_VALUE + 1);
	big[VALIDATE_MAX_ENV_VALUE] = '\0';
	env = json_object();
	json_object_set_new(env, "BIG", json_string(big));
	CHECK_INT(validate_env(env, NULL), 0);
	big[VALIDATE_MAX_ENV_VALUE] = 'v';
	big[VALIDATE_MAX_ENV_VALUE + 1] = '\0';
	json_object_set_new(env, "BIG", json_string(big));
	CHECK_INT(validate_env(env, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "env value of 'BIG'");
	json_decref(env);
	free(big);

	/* names of more than 255 characters */
	char longname[300];
	memset(longname, 'N', 256);
	longname[256] = '\0';
	env = json_object();
	json_object_set_new(env, longname, json_string("x"));
	CHECK_INT(validate_env(env, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "env name");
	json_decref(env);
}

/* Parses text, validates, expects success; fills *out; body returned for
 * the borrowed strings (caller decrefs). */
static json_t *create_ok(const char *text, struct create_request *out, int line)
{
	json_t *body = parse(text);
	struct terr err = {0};
	int rc = validate_create_request(body, out, &err);
	testlib_checks++;
	if (rc != 0)
		FAILF("line %d: %s refused: %s", line, text, err.msg);
	return body;
}

static void create_refused(const char *text, const char *needle, int line)
{
	json_t *body = parse(text);
	struct terr err = {0};
	struct create_request out;
	int rc = validate_create_request(body, &out, &err);
	testlib_checks++;
	if (rc != -EINVAL || err.code != EINVAL || !strstr(err.msg, needle))
		FAILF("line %d: %s gave %d '%s', expected -EINVAL with '%s'", line, text, rc,
		      err.msg, needle);
	json_decref(body);
}
#define CREATE_BAD(t, n) create_refused((t), (n), __LINE__)

/* cpu given as JSON text -> expected milli-cores */
static void cpu_is(const char *cpu, int64_t milli, int line)
{
	char text[256];
	snprintf(text, sizeof(text), "{\"image\":\"busybox\",\"resources\":{\"cpu\":%s}}", cpu);
	struct create_request r;
	json_t *b = create_ok(text, &r, line);
	testlib_checks++;
	if (r.req.cpu_m != milli)
		FAILF("line %d: cpu %s gave %lld milli, expected %lld", line, cpu,
		      (long long)r.req.cpu_m, (long long)milli);
	json_decref(b);
}
#define CPU_IS(c, m) cpu_is((c), (m), __LINE__)

static void mem_is(const char *mem, int64_t bytes, int line)
{
	char text[256];
	snprintf(text, sizeof(text), "{\"image\":\"busybox\",\"resources\":{\"mem\":%s}}", mem);
	struct create_request r;
	json_t *b = create_ok(text, &r, line);
	testlib_checks++;
	if (r.req.mem != bytes)
		FAILF("line %d: mem %s gave %lld, expected %lld", line, mem, (long long)r.req.mem,
		      (long long)bytes);
	json_decref(b);
}
#define MEM_IS(m, b) mem_is((m), (b), __LINE__)

TEST(create_defaults)
{
	struct create_request r;
	json_t *b = create_ok("{\"image\":\"busybox\"}", &r, __LINE__);
	CHECK_STR(r.image, "busybox");
	CHECK(r.name == NULL);
	CHECK_INT(r.count, 1);
	CHECK_INT(r.req.cpu_m, 1000);
	CHECK_INT(r.req.mem, 256LL << 20);
	CHECK_INT(r.req.fgpu_m, 0);
	CHECK(r.env == NULL);
	CHECK(r.startup_command == NULL);
	CHECK(!r.root);
	json_decref(b);

	/* nulls count as absent */
	b = create_ok("{\"image\":\"busybox\",\"name\":null,\"count\":null,\"resources\":null,"
		      "\"env\":null,\"startup_command\":null}", &r, __LINE__);
	CHECK(r.name == NULL);
	CHECK_INT(r.count, 1);
	CHECK_INT(r.req.cpu_m, 1000);
	CHECK(r.env == NULL);
	json_decref(b);

	b = create_ok("{\"image\":\"python:3.11\",\"name\":\"job\",\"count\":3,"
		      "\"resources\":{\"cpu\":2,\"mem\":\"1g\",\"fgpu\":0.5},"
		      "\"env\":{\"K\":\"V\"},\"startup_command\":\"python3 -V\",\"root\":true}", &r, __LINE__);
	CHECK_STR(r.image, "python:3.11");
	CHECK_STR(r.name, "job");
	CHECK_INT(r.count, 3);
	CHECK_INT(r.req.cpu_m, 2000);
	CHECK_INT(r.req.mem, 1LL << 30);
	CHECK_INT(r.req.fgpu_m, 500);
	CHECK(r.env != NULL);
	CHECK_STR(r.env ? json_string_value(json_object_get(r.env, "K")) : NULL, "V");
	CHECK_STR(r.startup_command, "python3 -V");
	CHECK(r.root);
	json_decref(b);
}

TEST(create_cpu)
{
	CPU_IS("0.5", 500);
	CPU_IS("\"0.5\"", 500);
	CPU_IS("2", 2000);
	CPU_IS("2.0", 2000);
	CPU_IS("0.1", 100);
	CPU_IS("0.01", 10);
	CPU_IS("\"0.01\"", 10);
	CPU_IS("0.125", 125);
	CPU_IS("1024", 1024000);
	CPU_IS("\"1024\"", 1024000);

	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":-1}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":-0.5}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":\"-0.5\"}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":0}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":0.0}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":\"0\"}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":0.005}}", "0.01");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":0.009}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":0.1234}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":\"0.1234\"}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":1025}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":1024.001}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":1e300}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":\"abc\"}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":\"\"}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":true}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":[1]}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"fgpu\":-1}}", "resources.fgpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"fgpu\":0.0001}}", "resources.fgpu");
}

TEST(create_mem)
{
	MEM_IS("\"256m\"", 256LL << 20);
	MEM_IS("\"1GiB\"", 1LL << 30);
	MEM_IS("1073741824", 1LL << 30);
	MEM_IS("6291456", 6LL << 20);       /* exactly the minimum */
	MEM_IS("\"16t\"", 16LL << 40);      /* exactly the maximum */

	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"mem\":6291455}}", "resources.mem");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"mem\":\"5m\"}}", "6 MiB");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"mem\":0}}", "resources.mem");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"mem\":-5}}", "resources.mem");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"mem\":\"12x\"}}", "resources.mem");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"mem\":\"-1g\"}}", "resources.mem");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"mem\":\"17t\"}}", "16 TiB");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"mem\":17592186044417}}", "resources.mem");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"mem\":1.5}}", "resources.mem");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"mem\":{}}}", "resources.mem");
	/* Exactly the amount: no spaces around it, no NUL ending it early
	 * (units.c skips spaces for conf files and flags; issue 27). */
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"mem\":\"  1g\"}}", "resources.mem");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"mem\":\"1g \"}}", "spaces");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"mem\":\"\\t1g\"}}", "resources.mem");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":\" 1\"}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":\"1\\n\"}}", "resources.cpu");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"fgpu\":\" 0.5\"}}", "resources.fgpu");
	MEM_IS("\"1 g\"", 1LL << 30);   /* a space between number and unit is fine */
}

TEST(create_count_and_name)
{
	struct create_request r;
	json_t *b = create_ok("{\"image\":\"busybox\",\"count\":100}", &r, __LINE__);
	CHECK_INT(r.count, 100);
	json_decref(b);

	CREATE_BAD("{\"image\":\"busybox\",\"count\":0}", "count");
	CREATE_BAD("{\"image\":\"busybox\",\"count\":101}", "count");
	CREATE_BAD("{\"image\":\"busybox\",\"count\":-1}", "count");
	CREATE_BAD("{\"image\":\"busybox\",\"count\":\"2\"}", "count");
	CREATE_BAD("{\"image\":\"busybox\",\"count\":1.5}", "count");

	char name61[62], name62[63], text[256];
	memset(name61, 'n', 61);
	name61[61] = '\0';
	memset(name62, 'n', 62);
	name62[62] = '\0';
	/* 61 + "-2" = 63: fits */
	snprintf(text, sizeof(text), "{\"image\":\"busybox\",\"name\":\"%s\",\"count\":2}", name61);
	b = create_ok(text, &r, __LINE__);
	json_decref(b);
	/* 61 + "-10" = 64: too long */
	snprintf(text, sizeof(text), "{\"image\":\"busybox\",\"name\":\"%s\",\"count\":10}", name61);
	CREATE_BAD(text, "name");
	/* 62 + "-2" = 64 */
	snprintf(text, sizeof(text), "{\"image\":\"busybox\",\"name\":\"%s\",\"count\":2}", name62);
	CREATE_BAD(text, "count suffix");
	/* 62 alone is fine with count 1 */
	snprintf(text, sizeof(text), "{\"image\":\"busybox\",\"name\":\"%s\"}", name62);
	b = create_ok(text, &r, __LINE__);
	json_decref(b);

	CREATE_BAD("{\"image\":\"busybox\",\"name\":\"-bad\"}", "name");
	CREATE_BAD("{\"image\":\"busybox\",\"name\":\"\"}", "name");
	CREATE_BAD("{\"image\":\"busybox\",\"name\":5}", "name");
}

TEST(create_fields)
{
	CREATE_BAD("{\"image\":\"busybox\",\"foo\":1}", "unknown field 'foo'");
	CREATE_BAD("{\"image\":\"busybox\",\"Image\":\"x\"}", "unknown field 'Image'");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"gpu\":1}}", "unknown resource 'gpu'");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":{\"cpu\":1,\"disk\":\"1g\"}}", "disk");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":[1]}", "resources");
	CREATE_BAD("{\"image\":\"busybox\",\"resources\":\"1 cpu\"}", "resources");
	CREATE_BAD("{}", "image");
	CREATE_BAD("{\"name\":\"x\"}", "image is required");
	CREATE_BAD("{\"image\":null}", "image");
	CREATE_BAD("{\"image\":5}", "image");
	CREATE_BAD("{\"image\":\"\"}", "image");
	CREATE_BAD("{\"image\":\"UPPER\"}", "image");
	CREATE_BAD("[]", "object");
	CREATE_BAD("\"busybox\"", "object");
	CREATE_BAD("{\"image\":\"busybox\",\"env\":{\"TESSERA_ID\":\"x\"}}", "TESSERA_");
	CREATE_BAD("{\"image\":\"busybox\",\"env\":[\"A=1\"]}", "env");
	CREATE_BAD("{\"image\":\"busybox\",\"startup_command\":5}", "startup_command");
	CREATE_BAD("{\"image\":\"busybox\",\"root\":\"yes\"}", "root must be true or false");
	CREATE_BAD("{\"image\":\"busybox\",\"root\":1}", "root must be true or false");

	char *text = malloc(VALIDATE_MAX_COMMAND + 128);
	int n = snprintf(text, 64, "{\"image\":\"busybox\",\"startup_command\":\"");
	memset(text + n, 'c', VALIDATE_MAX_COMMAND);
	snprintf(text + n + VALIDATE_MAX_COMMAND, 8, "\"}");
	struct create_request r;
	json_t *b = create_ok(text, &r, __LINE__);
	CHECK_INT(strlen(r.startup_command), VALIDATE_MAX_COMMAND);
	json_decref(b);
	memset(text + n, 'c', VALIDATE_MAX_COMMAND + 1);
	snprintf(text + n + VALIDATE_MAX_COMMAND + 1, 8, "\"}");
	CREATE_BAD(text, "startup_command");
	free(text);

	/* type: interactive (the default) or batch, which needs a command */
	b = create_ok("{\"image\":\"busybox\",\"type\":\"batch\",\"startup_command\":\"exit 3\"}", &r, __LINE__);
	CHECK(r.batch);
	json_decref(b);
	b = create_ok("{\"image\":\"busybox\",\"type\":\"interactive\"}", &r, __LINE__);
	CHECK(!r.batch);
	json_decref(b);
	b = create_ok("{\"image\":\"busybox\"}", &r, __LINE__);
	CHECK(!r.batch);
	json_decref(b);
	CREATE_BAD("{\"image\":\"busybox\",\"type\":\"batch\"}", "a batch session needs a startup_command");
	CREATE_BAD("{\"image\":\"busybox\",\"type\":\"batch\",\"startup_command\":\"\"}", "startup_command");
	CREATE_BAD("{\"image\":\"busybox\",\"type\":\"BATCH\",\"startup_command\":\"x\"}", "type must be");
	CREATE_BAD("{\"image\":\"busybox\",\"type\":1}", "type");
}

/* The full launcher's fields: starts_at (RFC 3339), batch_timeout (batch
 * sessions only) and preopen_ports. */
TEST(create_launcher_fields)
{
	struct create_request r;
	json_t *b = create_ok("{\"image\":\"busybox\",\"starts_at\":\"2027-01-02T03:04:05Z\"}", &r, __LINE__);
	CHECK_INT(r.starts_at_ms, 1798859045000LL);
	json_decref(b);
	b = create_ok("{\"image\":\"busybox\",\"starts_at\":\"2027-01-02T04:04:05.250+01:00\"}", &r, __LINE__);
	CHECK_INT(r.starts_at_ms, 1798859045250LL);
	json_decref(b);
	b = create_ok("{\"image\":\"busybox\",\"starts_at\":\"2020-01-01T00:00Z\"}", &r, __LINE__);
	CHECK_INT(r.starts_at_ms, 1577836800000LL);   /* past: as soon as it fits */
	json_decref(b);
	b = create_ok("{\"image\":\"busybox\"}", &r, __LINE__);
	CHECK_INT(r.starts_at_ms, 0);
	CHECK_INT(r.batch_timeout_s, 0);
	CHECK_STR(r.preopen_ports, "");
	json_decref(b);
	CREATE_BAD("{\"image\":\"busybox\",\"starts_at\":\"tomorrow\"}", "starts_at must be a time like");
	CREATE_BAD("{\"image\":\"busybox\",\"starts_at\":\"2027-02-31T00:00:00Z\"}", "starts_at must be a time");
	CREATE_BAD("{\"image\":\"busybox\",\"starts_at\":\"2027-01-02T03:04:05\"}", "with Z or an offset");
	CREATE_BAD("{\"image\":\"busybox\",\"starts_at\":\"2027-01-02T25:04:05Z\"}", "starts_at");
	CREATE_BAD("{\"image\":\"busybox\",\"starts_at\":\"2027-01-02T03:04:05.1234Z\"}", "starts_at");
	CREATE_BAD("{\"image\":\"busybox\",\"starts_at\":\"2999-01-01T00:00:00Z\"}", "more than a year ahead");
	CREATE_BAD("{\"image\":\"busybox\",\"starts_at\":1700000000}", "starts_at");

	b = create_ok("{\"image\":\"busybox\",\"type\":\"batch\",\"startup_command\":\"sleep 9\",\"batch_timeout\":60}",
		      &r, __LINE__);
	CHECK_INT(r.batch_timeout_s, 60);
	json_decref(b);
	CREATE_BAD("{\"image\":\"busybox\",\"batch_timeout\":60}", "batch_timeout is for batch sessions");
	CREATE_BAD("{\"image\":\"busybox\",\"type\":\"batch\",\"startup_command\":\"x\",\"batch_timeout\":0}",
		   "batch_timeout must be whole seconds");
	CREATE_BAD("{\"image\":\"busybox\",\"type\":\"batch\",\"startup_command\":\"x\",\"batch_timeout\":2592001}",
		   "batch_timeout");
	CREATE_BAD("{\"image\":\"busybox\",\"type\":\"batch\",\"startup_command\":\"x\",\"batch_timeout\":\"1h\"}",
		   "batch_timeout");

	b = create_ok("{\"image\":\"busybox\",\"preopen_ports\":[8080,6006]}", &r, __LINE__);
	CHECK_STR(r.preopen_ports, "8080,6006");
	json_decref(b);
	b = create_ok("{\"image\":\"busybox\",\"preopen_ports\":[]}", &r, __LINE__);
	CHECK_STR(r.preopen_ports, "");
	json_decref(b);
	CREATE_BAD("{\"image\":\"busybox\",\"preopen_ports\":[7611]}", "runner's own");
	CREATE_BAD("{\"image\":\"busybox\",\"preopen_ports\":[0]}", "preopen_ports[0]");
	CREATE_BAD("{\"image\":\"busybox\",\"preopen_ports\":[80,65536]}", "preopen_ports[1]");
	CREATE_BAD("{\"image\":\"busybox\",\"preopen_ports\":[\"80\"]}", "preopen_ports[0]");
	CREATE_BAD("{\"image\":\"busybox\",\"preopen_ports\":[80,80]}", "given twice");
	CREATE_BAD("{\"image\":\"busybox\",\"preopen_ports\":8080}", "array of port numbers");
	CREATE_BAD("{\"image\":\"busybox\",\"preopen_ports\":[1,2,3,4,5,6,7,8,9]}", "at most 8");
}

TEST(create_mounts)
{
	struct create_request r;
	json_t *b = create_ok("{\"image\":\"busybox\",\"mounts\":[\"data\",\".local:/opt/l:ro\"]}", &r, __LINE__);
	CHECK_INT((int)r.n_mounts, 2);
	CHECK_STR(r.mounts[0].name, "data");
	CHECK_STR(r.mounts[0].target, "/home/work/data");
	CHECK(!r.mounts[0].ro);
	CHECK_STR(r.mounts[1].target, "/opt/l");
	CHECK(r.mounts[1].ro);
	json_decref(b);
	b = create_ok("{\"image\":\"busybox\",\"mounts\":null}", &r, __LINE__);
	CHECK_INT((int)r.n_mounts, 0);
	json_decref(b);
	CREATE_BAD("{\"image\":\"busybox\",\"mounts\":\"data\"}", "mounts must be an array");
	CREATE_BAD("{\"image\":\"busybox\",\"mounts\":[1]}", "mounts[0] must be a string");
	CREATE_BAD("{\"image\":\"busybox\",\"mounts\":[\"../x\"]}", "may contain only");
	CREATE_BAD("{\"image\":\"busybox\",\"mounts\":[\"a:/proc/x\"]}", "system directory");
	CREATE_BAD("{\"image\":\"busybox\",\"mounts\":[\"a:/home/work\"]}", "home");
	CREATE_BAD("{\"image\":\"busybox\",\"mounts\":[\"a\",\"b:/home/work/a\"]}", "two folders at /home/work/a");
	CREATE_BAD("{\"image\":\"busybox\",\"mounts\":[\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
		   "\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\"]}", "at most 16");
	/* cluster sessions */
	b = create_ok("{\"image\":\"busybox\"}", &r, __LINE__);
	CHECK_INT(r.cluster_size, 1);
	CHECK_STR(r.cluster_mode, "single-node");
	json_decref(b);
	b = create_ok("{\"image\":\"busybox\",\"cluster_size\":16,\"cluster_mode\":\"multi-node\"}", &r, __LINE__);
	CHECK_INT(r.cluster_size, 16);
	CHECK_STR(r.cluster_mode, "multi-node");
	json_decref(b);
	CREATE_BAD("{\"image\":\"busybox\",\"cluster_size\":0}", "cluster_size must be 1 to 16");
	CREATE_BAD("{\"image\":\"busybox\",\"cluster_size\":17}", "cluster_size must be 1 to 16");
	CREATE_BAD("{\"image\":\"busybox\",\"cluster_size\":\"2\"}", "cluster_size");
	CREATE_BAD("{\"image\":\"busybox\",\"cluster_mode\":\"both\"}", "cluster_mode must be");
	CREATE_BAD("{\"image\":\"busybox\",\"cluster_mode\":1}", "cluster_mode");
	CREATE_BAD("{\"image\":\"busybox\",\"cluster_size\":2,\"preemptible\":true}", "cannot be preemptible");
	CREATE_BAD("{\"image\":\"busybox\",\"cluster_size\":16,\"count\":7}", "count x cluster_size must be at most 100");
}

TEST(policy_keys)
{
	char out[256];
	struct terr err = {0};
	CHECK_INT(validate_policy_key("default", out, sizeof(out), &err), 0);
	CHECK_STR(out, "default");
	CHECK_INT(validate_policy_key("Bob@Example.org", out, sizeof(out), &err), 0);
	CHECK_STR(out, "bob@example.org");
	const char *bad[] = {"", "\xff", "Default", "nobody", "a@b@c", "x\xff@y.org", "a b@c"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		int rc = validate_policy_key(bad[i], out, sizeof(out), &err);
		testlib_checks++;
		if (rc != -EINVAL || !strstr(err.msg, "neither 'default' nor a valid email"))
			FAILF("policy key '%s' gave %d '%s', expected a refusal", bad[i], rc, err.msg);
	}
}

TEST(emails)
{
	char out[256];
	struct terr err = {0};
	CHECK_INT(validate_email("Alice@Example.ORG", out, sizeof(out), &err), 0);
	CHECK_STR(out, "alice@example.org");
	CHECK_INT(validate_email("a@b", out, sizeof(out), &err), 0);
	CHECK_STR(out, "a@b");
	const char *bad[] = {"", "ab", "alice", "@example.org", "alice@", "a@b@c", "al ice@x.org",
			     "\"a\"@x.org", "a,b@x.org", "a<b@x.org", "a\\b@x.org", "a\tb@x.org", "a\x7f@x.org",
			     "a@\xff.org", "\xc3@x.org"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		int rc = validate_email(bad[i], out, sizeof(out), &err);
		testlib_checks++;
		if (rc != -EINVAL || !strstr(err.msg, "email"))
			FAILF("email '%s' gave %d '%s', expected a refusal", bad[i], rc, err.msg);
	}
	CHECK_INT(validate_email(NULL, out, sizeof(out), &err), -EINVAL);
	/* at most 254 characters, and never past the output buffer */
	char long_[300];
	memset(long_, 'a', sizeof(long_));
	memcpy(long_ + 251, "@x.o", 5);   /* 255 characters */
	CHECK_INT(validate_email(long_, out, sizeof(out), &err), -EINVAL);
	memcpy(long_ + 250, "@x.o", 5);   /* 254 */
	CHECK_INT(validate_email(long_, out, sizeof(out), &err), 0);
	char small[8];
	CHECK_INT(validate_email("abc@x.org", small, sizeof(small), &err), -EINVAL);
}

/* GET /v1/sessions' query: every parameter checked, tokens bound to
 * their filters and only taken as made. */
TEST(session_queries)
{
	struct session_query q;
	struct terr err = {0};
	struct session_query_in none = {0};
	CHECK_INT(validate_session_query(&none, &q, &err), 0);
	CHECK(!q.all && !q.status_mask && !q.owner_email[0] && q.limit == 0 && q.after_seq == 0);

	struct session_query_in in = {.all = "true", .status = "pending,Running", .owner = "Bob@Example.org",
				      .limit = "100"};
	CHECK_INT(validate_session_query(&in, &q, &err), 0);
	CHECK(q.all);
	CHECK_INT(q.status_mask, (1u << SS_PENDING) | (1u << SS_RUNNING));
	CHECK_STR(q.owner_email, "bob@example.org");
	CHECK_INT(q.limit, 100);

	/* A token carries the position; the same filters take it back. */
	char tok[VALIDATE_TOKEN_MAX];
	validate_session_token(&q, 4242, tok);
	in.cont = tok;
	in.limit = "5";   /* the limit may change from page to page */
	CHECK_INT(validate_session_query(&in, &q, &err), 0);
	CHECK_INT(q.after_seq, 4242);
	/* ...other filters do not. */
	struct session_query_in other = in;
	other.status = "PENDING";
	CHECK_INT(validate_session_query(&other, &q, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "other filters");
	other = in;
	other.owner = NULL;
	CHECK_INT(validate_session_query(&other, &q, &err), -EINVAL);
	other = in;
	other.all = NULL;
	CHECK_INT(validate_session_query(&other, &q, &err), -EINVAL);

	/* Tokens altered, or not made here. */
	char bad[VALIDATE_TOKEN_MAX + 8];
	const char *forms[] = {"", "abc", "s1.", "s1.10", "s2.10.00000000", "s1.-10.00000000", "s1. 10.00000000",
			       "s1.0x10.00000000", "s1.10.0000000", "s1.10.000000000", "s1.10.00000000x",
			       "s1.ffffffffffffffff.00000000", NULL};
	for (int i = 0; forms[i]; i++) {
		struct session_query_in t = {.cont = forms[i]};
		memset(&err, 0, sizeof(err));
		testlib_checks++;
		if (validate_session_query(&t, &q, &err) != -EINVAL || !strstr(err.msg, "continue"))
			FAILF("token '%s' was taken (%s)", forms[i], err.msg);
	}
	snprintf(bad, sizeof(bad), "%sX", tok);
	in.cont = bad;
	CHECK_INT(validate_session_query(&in, &q, &err), -EINVAL);

	/* Every other parameter, each refusal naming it. */
	struct {
		struct session_query_in in;
		const char *names;
	} refused[] = {
		{{.all = "yes"}, "all"},
		{{.status = ""}, "status"},
		{{.status = "PENDING,"}, "status"},
		{{.status = ",PENDING"}, "status"},
		{{.status = "DONE"}, "unknown status 'DONE'"},
		{{.status = "PENDINGPENDINGPENDINGPENDINGPENDING"}, "status"},
		{{.owner = "bob"}, "owner"},
		{{.owner = ""}, "owner"},
		{{.limit = "0"}, "limit"},
		{{.limit = "1001"}, "limit"},
		{{.limit = "-1"}, "limit"},
		{{.limit = ""}, "limit"},
		{{.limit = "10x"}, "limit"},
		{{.limit = "99999999999999999999"}, "limit"},
		/* strtol takes spaces and a sign before the digits. */
		{{.limit = " 5"}, "limit"},
		{{.limit = "+5"}, "limit"},
		{{.limit = "\t5"}, "limit"},
		{{.limit = "5 "}, "limit"},
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		memset(&err, 0, sizeof(err));
		testlib_checks++;
		if (validate_session_query(&refused[i].in, &q, &err) != -EINVAL || !strstr(err.msg, refused[i].names))
			FAILF("case %zu: got '%s', expected a refusal naming '%s'", i, err.msg, refused[i].names);
	}
	/* order: oldest (the default) or newest; a token is bound to it. */
	struct session_query_in ord = {.order = "newest", .limit = "3"};
	CHECK_INT(validate_session_query(&ord, &q, &err), 0);
	CHECK(q.newest);
	validate_session_token(&q, 77, tok);
	ord.cont = tok;
	CHECK_INT(validate_session_query(&ord, &q, &err), 0);
	CHECK_INT(q.after_seq, 77);
	ord.order = "oldest";
	CHECK_INT(validate_session_query(&ord, &q, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "other filters");
	ord = (struct session_query_in){.order = "oldest"};
	CHECK_INT(validate_session_query(&ord, &q, &err), 0);
	CHECK(!q.newest);
	ord.order = "desc";
	CHECK_INT(validate_session_query(&ord, &q, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "order must be oldest or newest");
	struct session_query_in max = {.limit = "1000"};
	CHECK_INT(validate_session_query(&max, &q, &err), 0);
	CHECK_INT(q.limit, 1000);
}

int main(void)
{
	RUN(image_refs);
	RUN(env_rules);
	RUN(create_defaults);
	RUN(create_cpu);
	RUN(create_mem);
	RUN(create_count_and_name);
	RUN(create_fields);
	RUN(create_mounts);
	RUN(create_launcher_fields);
	RUN(emails);
	RUN(policy_keys);
	RUN(session_queries);
	return testlib_done();
}
