/* agent/session_spec.h, the one codec of the session spec: what the
 * manager writes the agent reads back field for field; a spec read and
 * written again is the same JSON; and each bad spec is refused with the
 * message the agent has always given, checks against the node included
 * (its devices, its storage hosts) in their old order. */
#include <string.h>

#include "agent/session_spec.h"
#include "testlib.h"

#define SECRET "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* A node with two devices of 8 GiB and one folder directory it binds. */
static int64_t fake_memory(void *ctx, const char *uuid)
{
	(void)ctx;
	return uuid && (!strcmp(uuid, "GPU-a") || !strcmp(uuid, "GPU-b")) ? (int64_t)8 << 30 : -1;
}

static int fake_source(void *ctx, const char *source, struct terr *err)
{
	(void)ctx;
	if (!strcmp(source, "/srv/folders/f1") || !strcmp(source, "/srv/folders/f2"))
		return 0;
	return terr_set(err, EPERM, "%.200s is not a folder on a storage host this node declares (storage_hosts)",
			source);
}

static const struct session_spec_node node = {
	.id = "n1", .n_gpus = 2, .device_memory = fake_memory, .mount_source = fake_source,
};

TEST(round_trip)
{
	json_t *env = json_pack("{s:s,s:s}", "A", "1", "B", "two words");
	const struct session_spec_gpu gpus[] = {
		{.index = 0, .uuid = "GPU-a", .fgpu_m = 500, .memory_limit = (int64_t)4 << 30, .sm_limit_percent = 50},
		{.index = 1, .uuid = "GPU-b", .fgpu_m = 1000, .memory_limit = (int64_t)8 << 30, .sm_limit_percent = 100},
	};
	const struct session_spec_mount mounts[] = {
		{"/srv/folders/f1", "/home/work/data", false},
		{"/srv/folders/f2", "/home/work/.config", true},
	};
	struct session_spec in = {
		.id = "s1", .name = "train", .image = "python:3.11", .owner = "a@example.com", .owner_id = "u1",
		.startup = "python train.py", .app_secret = SECRET, .root = false, .batch = true,
		.cpu_m = 2000, .mem = (int64_t)4 << 30, .fgpu_m = 1500, .env = env,
		.gpus = gpus, .n_gpus = 2, .mounts = mounts, .n_mounts = 2,
	};
	json_t *j = session_spec_to_json(&in);
	CHECK(j != NULL);
	struct session_spec out;
	struct terr err = {0};
	CHECK_INT(session_spec_from_json(j, &node, &out, &err), 0);
	CHECK_STR(out.id, "s1");
	CHECK_STR(out.name, "train");
	CHECK_STR(out.image, "python:3.11");
	CHECK_STR(out.owner, "a@example.com");
	CHECK_STR(out.owner_id, "u1");
	CHECK_STR(out.startup, "python train.py");
	CHECK_STR(out.app_secret, SECRET);
	CHECK(!out.root);
	CHECK(out.batch);
	CHECK_INT(out.cpu_m, 2000);
	CHECK_INT(out.mem, (int64_t)4 << 30);
	CHECK_INT(out.fgpu_m, 1500);
	CHECK(json_equal(out.env, env));
	CHECK_INT(out.n_gpus, 2);
	for (size_t i = 0; i < 2 && out.n_gpus == 2; i++) {
		CHECK_INT(out.gpus[i].index, gpus[i].index);
		CHECK_STR(out.gpus[i].uuid, gpus[i].uuid);
		CHECK_INT(out.gpus[i].fgpu_m, gpus[i].fgpu_m);
		CHECK_INT(out.gpus[i].memory_limit, gpus[i].memory_limit);
		CHECK_INT(out.gpus[i].sm_limit_percent, gpus[i].sm_limit_percent);
	}
	CHECK_INT(out.n_mounts, 2);
	for (size_t i = 0; i < 2 && out.n_mounts == 2; i++) {
		CHECK_STR(out.mounts[i].source, mounts[i].source);
		CHECK_STR(out.mounts[i].target, mounts[i].target);
		CHECK_INT(out.mounts[i].readonly, mounts[i].readonly);
	}
	/* Written again, it is the same JSON. */
	json_t *again = session_spec_to_json(&out);
	CHECK(json_equal(again, j));
	json_decref(again);
	json_decref(j);
	json_decref(env);
}

/* What the manager has always sent for an interactive session without
 * GPUs, folders or apps, and what an older manager sent: read as before,
 * and the optional members stay out when written. */
TEST(minimal_and_older)
{
	struct session_spec in = {.id = "s2", .name = "x", .image = "alpine", .owner = "", .owner_id = "u1"};
	json_t *j = session_spec_to_json(&in);
	json_t *want = json_pack("{s:s,s:s,s:s,s:s,s:b,s:s,s:{s:I,s:I,s:I},s:o,s:n,s:[]}", "id", "s2", "name", "x",
				 "owner", "", "owner_id", "u1", "root", 0, "image", "alpine", "resources",
				 "cpu_milli", (json_int_t)0, "mem", (json_int_t)0, "fgpu_milli", (json_int_t)0,
				 "env", json_object(), "startup_command", "gpus");
	CHECK(json_equal(j, want));
	json_decref(want);
	json_decref(j);

	j = json_pack("{s:s,s:s,s:s,s:{}}", "id", "s3", "name", "y", "image", "alpine", "resources");
	struct session_spec out;
	struct terr err = {0};
	CHECK_INT(session_spec_from_json(j, &node, &out, &err), 0);
	CHECK(out.owner == NULL && out.owner_id == NULL && out.app_secret == NULL && out.startup == NULL);
	CHECK(out.env == NULL && out.n_gpus == 0 && out.n_mounts == 0 && !out.batch && !out.root);
	json_decref(j);
}

static const struct {
	const char *spec;   /* JSON */
	const char *msg;    /* the whole message */
	bool no_node;       /* read without a node */
} bad[] = {
	{"{}", "session spec needs id, name, image and resources", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":[]}", "session spec needs id, name, image and resources", false},
	{"{\"id\":1,\"name\":\"n\",\"image\":\"i\",\"resources\":{}}", "session spec needs id, name, image and resources", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{},\"mounts\":{}}",
	 "mounts must be an array of at most 16 folders", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{},\"mounts\":[{\"source\":\"/srv/folders/f1\"}]}",
	 "mounts[0] needs source, target and a boolean readonly", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{},\"mounts\":[{\"source\":\"/srv/folders/f1\","
	 "\"target\":\"/home/work/d\",\"readonly\":1}]}",
	 "mounts[0] needs source, target and a boolean readonly", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{},\"mounts\":[{\"source\":\"/etc\","
	 "\"target\":\"/home/work/d\"}]}",
	 "mounts[0]: /etc is not a folder on a storage host this node declares (storage_hosts)", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"\",\"resources\":{}}", "image must be 1 to 255 characters", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{},\"owner\":3}",
	 "owner and startup_command must be strings", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{},\"startup_command\":[]}",
	 "owner and startup_command must be strings", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{},\"owner_id\":\"a/b\"}",
	 "owner_id must be a user id (letters, digits, '.', '_', '-')", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{},\"root\":\"yes\"}", "root must be true or false", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{},\"app_secret\":\"ABC\"}",
	 "app_secret must be 64 lower-case hex characters", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{\"mem\":-1}}",
	 "resources.mem must be an integer of 0 or more", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{\"cpu_milli\":1.5}}",
	 "resources.cpu_milli must be an integer of 0 or more", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{},\"batch\":true}",
	 "a batch session needs a startup_command", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{\"cpu_milli\":9223372036854775807}}",
	 "resources.cpu_milli is too large", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{},\"env\":[]}", "env must be an object of strings", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{},\"env\":{\"A=B\":\"x\"}}",
	 "env variable 'A=B' needs a name without '=' and a string value", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{},\"env\":{\"A\":1}}",
	 "env variable 'A' needs a name without '=' and a string value", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{\"fgpu_milli\":1000},\"gpus\":{}}",
	 "gpus must be an array", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{\"fgpu_milli\":1000},\"gpus\":[{},{},{}]}",
	 "the session asks for 3 GPUs; node n1 has 2", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{},\"gpus\":[{\"uuid\":\"GPU-a\"}]}",
	 "a session with gpus needs resources.fgpu_milli above 0", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{\"fgpu_milli\":1000},\"gpus\":[{\"uuid\":\"GPU-z\"}]}",
	 "device GPU-z is not on node n1", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{\"fgpu_milli\":1000},\"gpus\":[{}]}",
	 "device (no uuid) is not on node n1", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{\"fgpu_milli\":1000},\"gpus\":[{}]}",
	 "gpus[0] needs a uuid", true},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{\"fgpu_milli\":2000},\"gpus\":["
	 "{\"uuid\":\"GPU-a\",\"memory_limit\":1},{\"uuid\":\"GPU-a\",\"memory_limit\":1}]}",
	 "device GPU-a is listed twice", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{\"fgpu_milli\":1000},\"gpus\":["
	 "{\"uuid\":\"GPU-a\",\"memory_limit\":8589934593}]}",
	 "gpus[0].memory_limit must be 1 to 8589934592 bytes (the device's memory)", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{\"fgpu_milli\":1000},\"gpus\":["
	 "{\"uuid\":\"GPU-a\",\"memory_limit\":1,\"sm_limit_percent\":0}]}",
	 "gpus[0].sm_limit_percent must be an integer from 1 to 100", false},
	{"{\"id\":\"s\",\"name\":\"n\",\"image\":\"i\",\"resources\":{\"fgpu_milli\":1000},\"gpus\":["
	 "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}]}",
	 "the session asks for 17 GPUs; at most 16", true},
};

TEST(bad_specs)
{
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *j = json_loads(bad[i].spec, 0, NULL);
		CHECK(j != NULL);
		struct session_spec out;
		struct terr err = {0};
		CHECK_INT(session_spec_from_json(j, bad[i].no_node ? NULL : &node, &out, &err), -EINVAL);
		CHECK_STR(err.msg, bad[i].msg);
		json_decref(j);
	}
	/* A bad id or name says what the name check says. */
	json_t *j = json_pack("{s:s,s:s,s:s,s:{}}", "id", "../x", "name", "n", "image", "i", "resources");
	struct session_spec out;
	struct terr err = {0};
	CHECK_INT(session_spec_from_json(j, &node, &out, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "session id");
	json_decref(j);
	/* 257 variables. */
	json_t *env = json_object();
	for (int i = 0; i < 257; i++) {
		char k[16];
		snprintf(k, sizeof(k), "V%d", i);
		json_object_set_new(env, k, json_string("x"));
	}
	j = json_pack("{s:s,s:s,s:s,s:{},s:o}", "id", "s", "name", "n", "image", "i", "resources", "env", env);
	CHECK_INT(session_spec_from_json(j, &node, &out, &err), -EINVAL);
	CHECK_STR(err.msg, "env has 257 variables; at most 256");
	json_decref(j);
}

/* A cluster session's container: its part read back as written, and
 * each bad value refused before it becomes a host name, a network's
 * name or a key file. */
TEST(cluster_part)
{
	struct session_spec in = {
		.id = "s1", .name = "dist", .image = "img", .cpu_m = 1000, .mem = 1 << 28,
		.cluster = {.session = "main0", .host = "sub1", .mode = "multi-node", .hosts = "main1,sub1",
			    .size = 2, .rank = 1, .ssh_key = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n",
			    .ssh_pub = "ssh-ed25519 AAAA c"},
	};
	json_t *j = session_spec_to_json(&in);
	struct session_spec out;
	struct terr err = {0};
	CHECK_INT(session_spec_from_json(j, &node, &out, &err), 0);
	CHECK_STR(out.cluster.session, "main0");
	CHECK_STR(out.cluster.host, "sub1");
	CHECK_STR(out.cluster.mode, "multi-node");
	CHECK_STR(out.cluster.hosts, "main1,sub1");
	CHECK_INT(out.cluster.size, 2);
	CHECK_INT(out.cluster.rank, 1);
	CHECK_STR(out.cluster.ssh_pub, "ssh-ed25519 AAAA c");
	json_t *again = session_spec_to_json(&out);
	CHECK(json_equal(j, again));
	json_decref(again);
	static const struct {
		const char *key, *value;
		const char *msg;
	} bad[] = {
		{"host", "Sub1", "cluster.host must be 2 to 12 lower-case letters and digits"},
		{"host", "sub3", "cluster.hosts must name the 2 containers, cluster.host among them"},
		{"hosts", "main1,sub1,sub2", "cluster.hosts must name the 2 containers, cluster.host among them"},
		{"hosts", "main1,,sub1", "cluster.hosts must be host names separated by commas"},
		{"hosts", "main1;rm,sub1", "cluster.hosts must be host names separated by commas"},
		{"mode", "both", "cluster.mode must be single-node or multi-node"},
		{"session", "../x", NULL},
		{"ssh_pub", "ssh-rsa AAAA", "cluster.ssh_key and ssh_pub must be an OpenSSH Ed25519 key pair"},
		{"ssh_pub", "ssh-ed25519 A\nB", "cluster.ssh_key and ssh_pub must be an OpenSSH Ed25519 key pair"},
		{"ssh_key", "not a key", "cluster.ssh_key and ssh_pub must be an OpenSSH Ed25519 key pair"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *b = json_deep_copy(j);
		json_object_set_new(json_object_get(b, "cluster"), bad[i].key, json_string(bad[i].value));
		memset(&err, 0, sizeof(err));
		CHECK_INT(session_spec_from_json(b, &node, &out, &err), -EINVAL);
		if (bad[i].msg)
			CHECK_STR(err.msg, bad[i].msg);
		json_decref(b);
	}
	json_t *b = json_deep_copy(j);
	json_object_set_new(json_object_get(b, "cluster"), "rank", json_integer(2));
	CHECK_INT(session_spec_from_json(b, &node, &out, &err), -EINVAL);
	CHECK_STR(err.msg, "cluster.size must be 2 to 16 and cluster.rank below it");
	json_decref(b);
	json_decref(j);
	/* Without a cluster part: none (an ordinary session, an older manager). */
	in.cluster = (struct session_spec_cluster){0};
	j = session_spec_to_json(&in);
	CHECK(json_object_get(j, "cluster") == NULL);
	CHECK_INT(session_spec_from_json(j, &node, &out, &err), 0);
	CHECK(out.cluster.host == NULL);
	json_decref(j);
}

int main(void)
{
	RUN(round_trip);
	RUN(cluster_part);
	RUN(minimal_and_older);
	RUN(bad_specs);
	return testlib_done();
}
