#include "agent/session_spec.h"

#include <string.h>

#include "common/model.h"

json_t *session_spec_to_json(const struct session_spec *s)
{
	json_t *spec = json_pack("{s:s,s:s,s:b,s:s,s:{s:I,s:I,s:I},s:o,s:s?}",
		"id", s->id, "name", s->name, "root", s->root, "image", s->image,
		"resources", "cpu_milli", (json_int_t)s->cpu_m, "mem", (json_int_t)s->mem,
		"fgpu_milli", (json_int_t)s->fgpu_m,
		"env", s->env ? json_incref(s->env) : json_object(),
		"startup_command", s->startup);
	json_t *gpus = json_array();
	if (!spec || !gpus) {
		json_decref(spec);
		json_decref(gpus);
		return NULL;
	}
	if (s->owner)
		json_object_set_new(spec, "owner", json_string(s->owner));
	/* owner_id names the user's network on the node; root says who the
	 * session's processes are (the policy was checked at create). */
	if (s->owner_id)
		json_object_set_new(spec, "owner_id", json_string(s->owner_id));
	/* Session apps: the runner's secret (an older session has none, and
	 * then no apps). */
	if (s->app_secret)
		json_object_set_new(spec, "app_secret", json_string(s->app_secret));
	for (size_t i = 0; i < s->n_gpus; i++) {
		const struct session_spec_gpu *g = &s->gpus[i];
		json_t *o = json_pack("{s:i,s:s?,s:I,s:I}", "index", g->index, "uuid", g->uuid,
				      "fgpu_milli", (json_int_t)g->fgpu_m, "memory_limit", (json_int_t)g->memory_limit);
		if (o && g->sm_limit_percent)
			json_object_set_new(o, "sm_limit_percent", json_integer(g->sm_limit_percent));
		json_array_append_new(gpus, o);
	}
	json_object_set_new(spec, "gpus", gpus);
	/* A batch container ends with its command (agent.h). Left out for an
	 * interactive one, so that an older agent reads the spec as before. */
	if (s->batch)
		json_object_set_new(spec, "batch", json_true());
	/* Its folders (docs/folders.md): host directories under a storage
	 * host, which the agent checks again before it binds them. */
	if (s->n_mounts) {
		json_t *mounts = json_array();
		for (size_t i = 0; mounts && i < s->n_mounts; i++)
			json_array_append_new(mounts, json_pack("{s:s?,s:s?,s:b}", "source", s->mounts[i].source,
								"target", s->mounts[i].target,
								"readonly", s->mounts[i].readonly));
		json_object_set_new(spec, "mounts", mounts);
	}
	const struct session_spec_cluster *c = &s->cluster;
	if (c->host)
		json_object_set_new(spec, "cluster",
				    json_pack("{s:s?,s:s,s:s?,s:s?,s:I,s:I,s:s?,s:s?}", "session", c->session, "host",
					      c->host, "mode", c->mode, "hosts", c->hosts, "size", (json_int_t)c->size,
					      "rank", (json_int_t)c->rank, "ssh_key", c->ssh_key, "ssh_pub", c->ssh_pub));
	const struct session_spec_ssh *k = &s->ssh;
	if (k->key)
		json_object_set_new(spec, "ssh", json_pack("{s:s,s:s?,s:s?}", "key", k->key, "pub", k->pub,
							   "authorized_keys", k->authorized_keys));
	return spec;
}

/* An OpenSSH Ed25519 key pair as the manager writes one. */
static bool ssh_pair_ok(const char *key, const char *pub)
{
	return key && pub && strlen(key) <= 4096 && strlen(pub) <= 1024 && !strncmp(pub, "ssh-ed25519 ", 12) &&
	       !strchr(pub, '\n') && !strncmp(key, "-----BEGIN OPENSSH PRIVATE KEY-----\n", 36);
}

/* A host name of a cluster session: "main1", "sub1"... */
static bool cluster_host_ok(const char *h)
{
	size_t n = h ? strlen(h) : 0;
	if (n < 2 || n > 12)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= '0' && h[i] <= '9')))
			return false;
	return true;
}

/* The cluster part: its host names go into /etc/hosts-like places and
 * the network's name, its key into files, so each is checked. */
static int check_cluster(json_t *c, struct session_spec *out, struct terr *err)
{
	if (!c || json_is_null(c))
		return 0;
	struct session_spec_cluster *k = &out->cluster;
	k->session = json_string_value(json_object_get(c, "session"));
	k->host = json_string_value(json_object_get(c, "host"));
	k->mode = json_string_value(json_object_get(c, "mode"));
	k->hosts = json_string_value(json_object_get(c, "hosts"));
	k->ssh_key = json_string_value(json_object_get(c, "ssh_key"));
	k->ssh_pub = json_string_value(json_object_get(c, "ssh_pub"));
	json_t *size = json_object_get(c, "size"), *rank = json_object_get(c, "rank");
	if (!json_is_object(c) || !k->session || !k->host || !k->mode || !k->hosts || !json_is_integer(size) ||
	    !json_is_integer(rank))
		return terr_set(err, EINVAL, "cluster needs session, host, mode, hosts, size and rank");
	k->size = json_integer_value(size);
	k->rank = json_integer_value(rank);
	if (model_validate_name(k->session, "cluster.session", err) < 0)
		return -EINVAL;
	if (strcmp(k->mode, "single-node") && strcmp(k->mode, "multi-node"))
		return terr_set(err, EINVAL, "cluster.mode must be single-node or multi-node");
	if (k->size < 2 || k->size > SESSION_SPEC_CLUSTER_MAX || k->rank < 0 || k->rank >= k->size)
		return terr_set(err, EINVAL, "cluster.size must be 2 to %d and cluster.rank below it",
				SESSION_SPEC_CLUSTER_MAX);
	if (!cluster_host_ok(k->host))
		return terr_set(err, EINVAL, "cluster.host must be 2 to 12 lower-case letters and digits");
	/* hosts: size names, comma-separated, each a host name, host among them. */
	int64_t n = 0;
	bool own = false;
	char name[16];
	for (const char *p = k->hosts;; p++) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len >= sizeof(name))
			return terr_set(err, EINVAL, "cluster.hosts has a name longer than 12 characters");
		memcpy(name, p, len);
		name[len] = '\0';
		if (!cluster_host_ok(name))
			return terr_set(err, EINVAL, "cluster.hosts must be host names separated by commas");
		own |= !strcmp(name, k->host);
		n++;
		if (!e)
			break;
		p = e;
	}
	if (n != k->size || !own)
		return terr_set(err, EINVAL, "cluster.hosts must name the %lld containers, cluster.host among them",
				(long long)k->size);
	if ((k->ssh_key || k->ssh_pub) && !ssh_pair_ok(k->ssh_key, k->ssh_pub))
		return terr_set(err, EINVAL, "cluster.ssh_key and ssh_pub must be an OpenSSH Ed25519 key pair");
	return 0;
}

/* The SSH part: its files are written for the session's sshd, so the
 * key must be a key pair, and the authorized keys lines of printable
 * text without authorized_keys options (each begins with its type). */
static int check_ssh(json_t *j, struct session_spec *out, struct terr *err)
{
	if (!j || json_is_null(j))
		return 0;
	struct session_spec_ssh *k = &out->ssh;
	k->key = json_string_value(json_object_get(j, "key"));
	k->pub = json_string_value(json_object_get(j, "pub"));
	k->authorized_keys = json_string_value(json_object_get(j, "authorized_keys"));
	if (!json_is_object(j) || !ssh_pair_ok(k->key, k->pub))
		return terr_set(err, EINVAL, "ssh.key and ssh.pub must be an OpenSSH Ed25519 key pair");
	const char *a = k->authorized_keys ? k->authorized_keys : "";
	if (strlen(a) > SESSION_SPEC_SSH_AUTH_MAX)
		return terr_set(err, EINVAL, "ssh.authorized_keys is over %d bytes", SESSION_SPEC_SSH_AUTH_MAX);
	for (const char *line = a; *line;) {
		size_t len = strcspn(line, "\n");
		if (strncmp(line, "ssh-", 4) && strncmp(line, "ecdsa-", 6) && strncmp(line, "sk-", 3))
			return terr_set(err, EINVAL, "ssh.authorized_keys must be public key lines, each beginning "
					"with its type");
		for (size_t i = 0; i < len; i++)
			if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
				return terr_set(err, EINVAL, "ssh.authorized_keys holds a control character");
		line += len + (line[len] == '\n');
	}
	return 0;
}

static int check_mounts(json_t *mounts, const struct session_spec_node *node, struct session_spec *out,
			struct terr *err)
{
	if (!mounts || json_is_null(mounts))
		return 0;
	if (!json_is_array(mounts) || json_array_size(mounts) > AGENT_MAX_FOLDER_MOUNTS)
		return terr_set(err, EINVAL, "mounts must be an array of at most %d folders", AGENT_MAX_FOLDER_MOUNTS);
	size_t i;
	json_t *x;
	json_array_foreach(mounts, i, x) {
		const char *src = json_string_value(json_object_get(x, "source"));
		const char *dst = json_string_value(json_object_get(x, "target"));
		json_t *ro = json_object_get(x, "readonly");
		if (!src || !dst || (ro && !json_is_boolean(ro)))
			return terr_set(err, EINVAL, "mounts[%zu] needs source, target and a boolean readonly", i);
		int rc = model_validate_mount_target(dst, err);
		if (rc == 0 && node && node->mount_source)
			rc = node->mount_source(node->ctx, src, err);
		if (rc < 0)
			return terr_prefix(err, "mounts[%zu]", i);
		out->mount_buf[i] = (struct session_spec_mount){src, dst, json_is_true(ro)};
	}
	out->mounts = out->mount_buf;
	out->n_mounts = json_array_size(mounts);
	return 0;
}

static int check_gpus(json_t *gpus, const struct session_spec_node *node, struct session_spec *out,
		      struct terr *err)
{
	if (!gpus || json_is_null(gpus))
		return 0;
	if (!json_is_array(gpus))
		return terr_set(err, EINVAL, "gpus must be an array");
	size_t n = json_array_size(gpus);
	if (node && n > (size_t)node->n_gpus)
		return terr_set(err, EINVAL, "the session asks for %zu GPUs; node %s has %d", n, node->id, node->n_gpus);
	if (n > SESSION_SPEC_MAX_GPUS)
		return terr_set(err, EINVAL, "the session asks for %zu GPUs; at most %d", n, SESSION_SPEC_MAX_GPUS);
	if (n > 0 && out->fgpu_m <= 0)
		return terr_set(err, EINVAL, "a session with gpus needs resources.fgpu_milli above 0");
	for (size_t i = 0; i < n; i++) {
		json_t *g = json_array_get(gpus, i);
		const char *uuid = json_string_value(json_object_get(g, "uuid"));
		json_t *mem = json_object_get(g, "memory_limit"), *pct = json_object_get(g, "sm_limit_percent");
		int64_t dev_mem = node && node->device_memory ? node->device_memory(node->ctx, uuid) : INT64_MAX;
		if (dev_mem < 0 || !uuid) {
			if (node)
				return terr_set(err, EINVAL, "device %.80s is not on node %s", uuid ? uuid : "(no uuid)",
						node->id);
			return terr_set(err, EINVAL, "gpus[%zu] needs a uuid", i);
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(uuid, out->gpu_buf[j].uuid))
				return terr_set(err, EINVAL, "device %s is listed twice", uuid);
		if (!json_is_integer(mem) || json_integer_value(mem) <= 0 || json_integer_value(mem) > dev_mem)
			return terr_set(err, EINVAL, "gpus[%zu].memory_limit must be 1 to %lld bytes (the device's memory)",
					i, (long long)dev_mem);
		if (pct && (!json_is_integer(pct) || json_integer_value(pct) < 1 || json_integer_value(pct) > 100))
			return terr_set(err, EINVAL, "gpus[%zu].sm_limit_percent must be an integer from 1 to 100", i);
		out->gpu_buf[i] = (struct session_spec_gpu){
			.index = (int)json_integer_value(json_object_get(g, "index")),
			.uuid = uuid,
			.fgpu_m = json_integer_value(json_object_get(g, "fgpu_milli")),
			.memory_limit = json_integer_value(mem),
			.sm_limit_percent = (int)json_integer_value(pct),
		};
	}
	out->gpus = out->gpu_buf;
	out->n_gpus = n;
	return 0;
}

/* The checks, and their order, are those the agent has always made:
 * the same spec gets the same message. */
int session_spec_from_json(json_t *spec, const struct session_spec_node *node, struct session_spec *out,
			   struct terr *err)
{
	const char *id = json_string_value(json_object_get(spec, "id"));
	const char *name = json_string_value(json_object_get(spec, "name"));
	const char *image = json_string_value(json_object_get(spec, "image"));
	json_t *res = json_object_get(spec, "resources");
	json_t *env = json_object_get(spec, "env");
	json_t *gpus = json_object_get(spec, "gpus");
	json_t *startup = json_object_get(spec, "startup_command");
	json_t *owner = json_object_get(spec, "owner");
	json_t *owner_id = json_object_get(spec, "owner_id");
	json_t *root = json_object_get(spec, "root");
	memset(out, 0, sizeof(*out));
	out->id = id;
	out->name = name;
	out->image = image;
	out->owner = json_string_value(owner);
	out->owner_id = json_string_value(owner_id);
	out->root = json_is_true(root);
	out->startup = json_string_value(startup);
	out->env = env;
	out->cpu_m = json_integer_value(json_object_get(res, "cpu_milli"));
	out->mem = json_integer_value(json_object_get(res, "mem"));
	out->fgpu_m = json_integer_value(json_object_get(res, "fgpu_milli"));
	out->batch = json_is_true(json_object_get(spec, "batch"));
	out->app_secret = json_string_value(json_object_get(spec, "app_secret"));
	if (!id || !name || !image || !json_is_object(res))
		return terr_set(err, EINVAL, "session spec needs id, name, image and resources");
	if (check_mounts(json_object_get(spec, "mounts"), node, out, err) < 0)
		return -EINVAL;
	if (check_cluster(json_object_get(spec, "cluster"), out, err) < 0 ||
	    check_ssh(json_object_get(spec, "ssh"), out, err) < 0)
		return -EINVAL;
	/* The id names the session's directory under data_dir. */
	if (model_validate_name(id, "session id", err) < 0 || model_validate_name(name, "session name", err) < 0)
		return -EINVAL;
	if (!*image || strlen(image) > 255)
		return terr_set(err, EINVAL, "image must be 1 to 255 characters");
	if ((owner && !json_is_string(owner) && !json_is_null(owner)) ||
	    (startup && !json_is_string(startup) && !json_is_null(startup)))
		return terr_set(err, EINVAL, "owner and startup_command must be strings");
	/* The owner's id names their network. */
	if (owner_id && !json_is_null(owner_id) &&
	    (!out->owner_id || model_validate_name(out->owner_id, "owner_id", err) < 0))
		return terr_set(err, EINVAL, "owner_id must be a user id (letters, digits, '.', '_', '-')");
	if (root && !json_is_boolean(root))
		return terr_set(err, EINVAL, "root must be true or false");
	json_t *secret = json_object_get(spec, "app_secret");
	bool secret_ok = !secret || json_is_null(secret);
	if (out->app_secret && strlen(out->app_secret) == AGENT_APP_SECRET_HEX) {
		secret_ok = true;
		for (const char *c = out->app_secret; *c; c++)
			secret_ok &= (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f');
	}
	if (!secret_ok)
		return terr_set(err, EINVAL, "app_secret must be %d lower-case hex characters", AGENT_APP_SECRET_HEX);
	static const char *const amounts[] = {"cpu_milli", "mem", "fgpu_milli"};
	for (size_t i = 0; i < sizeof(amounts) / sizeof(amounts[0]); i++) {
		json_t *v = json_object_get(res, amounts[i]);
		if (v && (!json_is_integer(v) || json_integer_value(v) < 0))
			return terr_set(err, EINVAL, "resources.%s must be an integer of 0 or more", amounts[i]);
	}
	if (out->batch && (!out->startup || !*out->startup))
		return terr_set(err, EINVAL, "a batch session needs a startup_command");
	if (out->cpu_m > INT64_MAX / 1000000)
		return terr_set(err, EINVAL, "resources.cpu_milli is too large");
	if (env && !json_is_object(env))
		return terr_set(err, EINVAL, "env must be an object of strings");
	if (json_object_size(env) > SESSION_SPEC_MAX_ENV)
		return terr_set(err, EINVAL, "env has %zu variables; at most %d", json_object_size(env),
				SESSION_SPEC_MAX_ENV);
	const char *key;
	json_t *val;
	json_object_foreach(env, key, val) {
		if (!*key || strchr(key, '=') || !json_is_string(val))
			return terr_set(err, EINVAL, "env variable '%.80s' needs a name without '=' and a string value",
					key);
	}
	return check_gpus(gpus, node, out, err);
}
