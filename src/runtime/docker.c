/* The Docker Engine API runtime (runtime.h), over Docker's unix socket.
 *
 * Every call is one HTTP request through httpc (one curl handle per call),
 * so the only state kept is what open() negotiated, never written after:
 * the ops are safe to call from several threads at once.
 *
 * API reference: https://docs.docker.com/engine/api/v1.41/ (the version
 * Debian 12's docker.io speaks). */
#include "runtime/runtime.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <jansson.h>

#include "common/httpc.h"
#include "common/frames.h"
#include "common/units.h"
#include "runtime/docker_progress.h"
#include "runtime/docker_seccomp.h"

#define DOCKER_DEFAULT_SOCKET "/var/run/docker.sock"
/* Newest API version this file was written against, and the oldest that has
 * everything it uses (exec and events filters as used here, Mounts, PidsLimit
 * as a pointer: 1.40 = Docker 19.03). */
#define DOCKER_API_MAX_MAJOR 1
#define DOCKER_API_MAX_MINOR 45
#define DOCKER_API_MIN_MAJOR 1
#define DOCKER_API_MIN_MINOR 40

/* Short calls get a bound so a wedged daemon cannot hang an agent thread
 * forever; commit, exec, logs and events run as long as they need. */
#define DOCKER_TIMEOUT_MS 120000L
#define DOCKER_VERSION_TIMEOUT_MS 10000L
/* How much of an error body is kept from a streamed call. */
#define DOCKER_ERRBODY_CAP 4096
/* One event is a few hundred bytes; a longer line is not Docker talking. */
#define DOCKER_EVENT_LINE_MAX (1u << 20)

struct runtime {
	char *socket;          /* unix socket path, NULL for TCP */
	char *base;            /* "http://docker" or "http://host:port" */
	char *where;           /* for messages: the socket path or host:port */
	char api[16];          /* negotiated, e.g. "1.41" */
	char server[64];       /* engine version, e.g. "20.10.24+dfsg1" */
	/* "seccomp=<profile>" for HostConfig.SecurityOpt: the sessions'
	 * profile (docker_seccomp.h), built once here rather than at each
	 * create. */
	char *seccomp_opt;
};

static void freep(void *p) { free(*(void **)p); }
#define autofree __attribute__((cleanup(freep)))
static void jsonp_decref(json_t **j) { if (*j) json_decref(*j); }
#define autojson __attribute__((cleanup(jsonp_decref)))

static void copy_str(char *dst, size_t n, const char *src)
{
	if (n == 0)
		return;
	snprintf(dst, n, "%s", src ? src : "");
}

/* Percent-encodes s for a URL. keep_path leaves '/', ':' and '@' alone so
 * image references ("reg:5000/repo:tag@sha256:...") stay readable in paths,
 * as Docker's own client sends them. Returns malloc'd or NULL. */
static char *url_escape(const char *s, bool keep_path)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(n * 3 + 1), *o = out;
	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' ||
		    (keep_path && (*p == '/' || *p == ':' || *p == '@'))) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}

/* "1.41" -> 1041; -1 when not "<int>.<int>". */
static long api_parse(const char *v)
{
	char *end;
	if (!v || !isdigit((unsigned char)*v))
		return -1;
	long major = strtol(v, &end, 10);
	if (*end != '.' || !isdigit((unsigned char)end[1]))
		return -1;
	long minor = strtol(end + 1, &end, 10);
	if (*end || major > 100 || minor > 999)
		return -1;
	return major * 1000 + minor;
}

/* ---- requests ---------------------------------------------------------- */

/* One request. path starts with '/'; versioned prefixes "/v<api>". body
 * (may be NULL) is sent as JSON. Returns 0 with resp filled (any HTTP
 * status), or a negative errno for a transport failure, with err saying
 * what was being done and where Docker was looked for. */
static int dk_do_h(const struct runtime *rt, const char *method, bool versioned,
		   const char *path, const json_t *body, long timeout_ms,
		   int (*on_data)(const char *, size_t, void *), void *ud,
		   const atomic_bool *cancel, const char *extra_header,
		   struct httpc_response *resp, const char *what, struct terr *err)
{
	autofree char *url = NULL;
	autofree char *payload = NULL;
	int n = versioned ? asprintf(&url, "%s/v%s%s", rt->base, rt->api, path)
			  : asprintf(&url, "%s%s", rt->base, path);
	if (n < 0) {
		url = NULL;
		return terr_set(err, ENOMEM, "%s: out of memory", what);
	}
	const char *json_headers[] = {
		"Content-Type: application/json", extra_header, NULL,
	};
	struct httpc_request req = {
		.method = method,
		.url = url,
		.unix_socket = rt->socket,
		.timeout_ms = timeout_ms,
		.on_data = on_data,
		.ud = ud,
		.cancel = cancel,
	};
	if (body) {
		payload = json_dumps(body, JSON_COMPACT);
		if (!payload)
			return terr_set(err, ENOMEM, "%s: out of memory", what);
		req.body = payload;
		req.body_len = strlen(payload);
	}
	/* Also on body-less POSTs: curl would label them form-urlencoded,
	 * which Docker refuses on endpoints that take an optional JSON body
	 * (POST /commit: "Content-Type ... must be 'application/json'"). */
	if (body || strcmp(method, "POST") == 0)
		req.headers = json_headers;
	memset(resp, 0, sizeof(*resp));
	int r = httpc_do(&req, resp, err);
	if (r < 0) {
		httpc_response_free(resp);
		return terr_prefix(err, "%s: Docker at %s", what, rt->where);
	}
	return 0;
}

static int dk_do(const struct runtime *rt, const char *method, bool versioned,
		 const char *path, const json_t *body, long timeout_ms,
		 int (*on_data)(const char *, size_t, void *), void *ud,
		 const atomic_bool *cancel, struct httpc_response *resp,
		 const char *what, struct terr *err)
{
	return dk_do_h(rt, method, versioned, path, body, timeout_ms, on_data, ud, cancel, NULL,
		       resp, what, err);
}

/* Turns a non-success answer into the error contract: Docker explains
 * itself in {"message": "..."}, which is what a person needs to read. */
static int dk_fail_body(long status, const char *body, size_t len,
			const char *what, struct terr *err)
{
	char msg[TERR_MSG_MAX / 2];
	msg[0] = '\0';
	if (body && len) {
		json_t *j = json_loadb(body, len, 0, NULL);
		json_t *m = j ? json_object_get(j, "message") : NULL;
		if (json_is_string(m)) {
			copy_str(msg, sizeof(msg), json_string_value(m));
		} else {
			/* Not JSON (a proxy in between, an old daemon): show
			 * the start of the text, on one line. */
			size_t k = 0;
			for (size_t i = 0; i < len && k + 1 < sizeof(msg); i++)
				msg[k++] = (body[i] == '\n' || body[i] == '\r') ? ' ' : body[i];
			while (k > 0 && msg[k - 1] == ' ')
				k--;
			msg[k] = '\0';
		}
		if (j)
			json_decref(j);
	}
	if (!msg[0])
		snprintf(msg, sizeof(msg), "Docker answered HTTP %ld", status);
	int code;
	switch (status) {
	case 404: code = ENOENT; break;
	case 409: code = EEXIST; break;
	case 400: code = EINVAL; break;
	default: code = EIO; break;
	}
	return terr_set(err, code, "%s: %s", what, msg);
}

static int dk_fail(const struct httpc_response *resp, const char *what,
		   struct terr *err)
{
	return dk_fail_body(resp->status, resp->body, resp->len, what, err);
}

/* Parses a successful JSON answer; NULL (with err) when it is not JSON. */
static json_t *dk_json(const struct httpc_response *resp, const char *what,
		       struct terr *err)
{
	json_error_t je;
	json_t *j = resp->body ? json_loadb(resp->body, resp->len, 0, &je) : NULL;
	if (!j)
		terr_set(err, EPROTO, "%s: Docker sent a reply that is not JSON (%s)",
			 what, resp->body ? je.text : "empty body");
	return j;
}

/* The usual shape of a call whose answer is JSON: send it, refuse any
 * status but 200/201 with Docker's own message, parse the body. *out is a
 * new reference. */
static int dk_call_json(const struct runtime *rt, const char *method, const char *path,
			const json_t *body, const char *what, json_t **out, struct terr *err)
{
	struct httpc_response resp;
	*out = NULL;
	int r = dk_do(rt, method, true, path, body, DOCKER_TIMEOUT_MS, NULL, NULL, NULL,
		      &resp, what, err);
	if (r < 0)
		return r;
	if (resp.status != 200 && resp.status != 201) {
		r = dk_fail(&resp, what, err);
		httpc_response_free(&resp);
		return r;
	}
	*out = dk_json(&resp, what, err);
	httpc_response_free(&resp);
	return *out ? 0 : -EPROTO;
}

static const char *jstr(json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	return s ? s : "";
}

/* NetworkSettings.Networks[network].IPAddress, else the first network's
 * address (inspect and list carry the same object). */
static void network_ip(json_t *ns, const char *network, char *out, size_t n)
{
	json_t *nets = json_object_get(ns, "Networks");
	const char *ip = jstr(json_object_get(nets, network), "IPAddress");
	if (!*ip) {
		const char *k;
		json_t *v;
		json_object_foreach(nets, k, v) {
			ip = jstr(v, "IPAddress");
			if (*ip)
				break;
		}
	}
	copy_str(out, n, ip);
}

/* ---- open / close / version -------------------------------------------- */

static void docker_close(struct runtime *rt)
{
	if (!rt)
		return;
	free(rt->socket);
	free(rt->base);
	free(rt->where);
	free(rt->seccomp_opt);
	free(rt);
}

/* endpoint: NULL (default socket), "unix:///path", or "tcp://host:port"
 * (no TLS: for a daemon reached through an SSH tunnel or on loopback). */
static int parse_endpoint(struct runtime *rt, const char *endpoint,
			  struct terr *err)
{
	if (!endpoint || !*endpoint)
		endpoint = "unix://" DOCKER_DEFAULT_SOCKET;
	if (strncmp(endpoint, "unix://", 7) == 0) {
		const char *path = endpoint + 7;
		if (*path != '/')
			return terr_set(err, EINVAL,
					"Docker endpoint \"%s\": a unix endpoint needs an absolute path, e.g. unix:///var/run/docker.sock",
					endpoint);
		rt->socket = strdup(path);
		rt->where = strdup(path);
		rt->base = strdup("http://docker");
	} else if (strncmp(endpoint, "tcp://", 6) == 0 ||
		   strncmp(endpoint, "http://", 7) == 0) {
		const char *host = strstr(endpoint, "://") + 3;
		size_t n = strcspn(host, "/");
		if (n == 0)
			return terr_set(err, EINVAL, "Docker endpoint \"%s\": no host", endpoint);
		rt->where = strndup(host, n);
		if (rt->where && asprintf(&rt->base, "http://%s", rt->where) < 0)
			rt->base = NULL;
	} else {
		return terr_set(err, EINVAL,
				"Docker endpoint \"%s\": expected unix:///path or tcp://host:port",
				endpoint);
	}
	if (!rt->where || !rt->base)
		return terr_set(err, ENOMEM, "Docker endpoint: out of memory");
	return 0;
}

static int docker_open(struct runtime **out, const char *endpoint,
		       struct terr *err)
{
	*out = NULL;
	struct runtime *rt = calloc(1, sizeof(*rt));
	if (!rt)
		return terr_set(err, ENOMEM, "open Docker runtime: out of memory");
	int r = parse_endpoint(rt, endpoint, err);
	if (r < 0)
		goto fail;
	json_t *profile = docker_seccomp_profile();
	char *text = profile ? json_dumps(profile, JSON_COMPACT) : NULL;
	json_decref(profile);
	if (!text || asprintf(&rt->seccomp_opt, "seccomp=%s", text) < 0) {
		rt->seccomp_opt = NULL;
		free(text);
		r = terr_set(err, ENOMEM, "open Docker runtime: out of memory");
		goto fail;
	}
	free(text);

	/* /version is the one path that works unversioned on every daemon. */
	struct httpc_response resp;
	r = dk_do(rt, "GET", false, "/version", NULL, DOCKER_VERSION_TIMEOUT_MS,
		  NULL, NULL, NULL, &resp, "ask Docker for its version", err);
	if (r < 0) {
		/* The usual first-run problem: say what to check. */
		if (err) {
			char why[TERR_MSG_MAX];
			memcpy(why, err->msg, sizeof(why));
			terr_set(err, -r, "%s (is dockerd running, and may this user use its socket?)",
				 why);
		}
		goto fail;
	}
	if (resp.status != 200) {
		r = dk_fail(&resp, "ask Docker for its version", err);
		httpc_response_free(&resp);
		goto fail;
	}
	json_t *v = dk_json(&resp, "ask Docker for its version", err);
	httpc_response_free(&resp);
	if (!v) {
		r = -EPROTO;
		goto fail;
	}
	const char *api = jstr(v, "ApiVersion");
	long have = api_parse(api);
	copy_str(rt->server, sizeof(rt->server), jstr(v, "Version"));
	if (have < 0) {
		r = terr_set(err, EPROTO, "Docker at %s reported no usable API version (\"%s\")",
			     rt->where, api);
	} else if (have < DOCKER_API_MIN_MAJOR * 1000 + DOCKER_API_MIN_MINOR) {
		r = terr_set(err, ENOTSUP,
			     "Docker at %s speaks Engine API %s (Docker %s); Tessera needs API %d.%d or newer (Docker 19.03+): upgrade Docker",
			     rt->where, api, rt->server[0] ? rt->server : "unknown",
			     DOCKER_API_MIN_MAJOR, DOCKER_API_MIN_MINOR);
	} else {
		/* Talk the older of the two: the server understands it and we
		 * know its shapes. */
		long use = have;
		if (use > DOCKER_API_MAX_MAJOR * 1000 + DOCKER_API_MAX_MINOR)
			use = DOCKER_API_MAX_MAJOR * 1000 + DOCKER_API_MAX_MINOR;
		snprintf(rt->api, sizeof(rt->api), "%ld.%ld", use / 1000, use % 1000);
		r = 0;
	}
	json_decref(v);
	if (r < 0)
		goto fail;
	*out = rt;
	return 0;
fail:
	docker_close(rt);
	return r;
}

static int docker_version(struct runtime *rt, char *api, size_t api_n,
			  char *server, size_t server_n, struct terr *err)
{
	(void)err;
	if (api)
		copy_str(api, api_n, rt->api);
	if (server)
		copy_str(server, server_n, rt->server);
	return 0;
}

/* ---- images ------------------------------------------------------------ */

static int docker_image_exists(struct runtime *rt, const char *ref,
			       bool *exists, struct terr *err)
{
	autofree char *eref = url_escape(ref, true);
	autofree char *path = NULL;
	if (!eref || asprintf(&path, "/images/%s/json", eref) < 0)
		return terr_set(err, ENOMEM, "inspect image: out of memory");
	struct httpc_response resp;
	int r = dk_do(rt, "GET", true, path, NULL, DOCKER_TIMEOUT_MS, NULL, NULL,
		      NULL, &resp, "inspect image", err);
	if (r < 0)
		return r;
	if (resp.status == 200 || resp.status == 404) {
		*exists = resp.status == 200;
		r = 0;
	} else {
		r = dk_fail(&resp, "inspect image", err);
	}
	httpc_response_free(&resp);
	return r;
}

/* Config.Env ("K=V" already) and Config.Labels (an object, written
 * "K=V") of an image, and its id, from one inspect. */
static int docker_image_config(struct runtime *rt, const char *ref, struct rt_image_config *out,
			       struct terr *err)
{
	memset(out, 0, sizeof(*out));
	autofree char *eref = url_escape(ref, true);
	autofree char *path = NULL;
	if (!eref || asprintf(&path, "/images/%s/json", eref) < 0)
		return terr_set(err, ENOMEM, "inspect image: out of memory");
	json_t *root = NULL;
	int r = dk_call_json(rt, "GET", path, NULL, "inspect image", &root, err);
	if (r < 0)
		return r;
	json_t *cfg = json_object_get(root, "Config");
	json_t *arr = json_object_get(cfg, "Env"), *obj = json_object_get(cfg, "Labels");
	copy_str(out->id, sizeof(out->id), jstr(root, "Id"));
	out->env = calloc(json_array_size(arr) + 1, sizeof(char *));
	out->labels = calloc(json_object_size(obj) + 1, sizeof(char *));
	if (!out->env || !out->labels) {
		json_decref(root);
		rt_image_config_free(out);
		return terr_set(err, ENOMEM, "inspect image: out of memory");
	}
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v) {
		if (json_is_string(v) && asprintf(&out->labels[out->n_labels], "%s=%s", key, json_string_value(v)) >= 0)
			out->n_labels++;
	}
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const char *e = json_string_value(json_array_get(arr, i));
		if (e && (out->env[out->n_env] = strdup(e)))
			out->n_env++;
	}
	json_decref(root);
	return 0;
}

void rt_image_config_free(struct rt_image_config *c)
{
	for (size_t i = 0; c->env && i < c->n_env; i++)
		free(c->env[i]);
	for (size_t i = 0; c->labels && i < c->n_labels; i++)
		free(c->labels[i]);
	free(c->env);
	free(c->labels);
	memset(c, 0, sizeof(*c));
}

/* One half of image_config, handed over as a plain array. */
static int image_config_strings(struct runtime *rt, const char *ref, bool labels, char ***out_v,
				size_t *n, struct terr *err)
{
	struct rt_image_config c;
	int r = docker_image_config(rt, ref, &c, err);
	if (r < 0)
		return r;
	if (labels) {
		*out_v = c.labels;
		*n = c.n_labels;
		c.labels = NULL;
		c.n_labels = 0;
	} else {
		*out_v = c.env;
		*n = c.n_env;
		c.env = NULL;
		c.n_env = 0;
	}
	rt_image_config_free(&c);
	return 0;
}

static int docker_image_env(struct runtime *rt, const char *ref, char ***env,
			    size_t *n, struct terr *err)
{
	return image_config_strings(rt, ref, false, env, n, err);
}

static int docker_image_labels(struct runtime *rt, const char *ref, char ***labels,
			       size_t *n, struct terr *err)
{
	return image_config_strings(rt, ref, true, labels, n, err);
}

static int docker_image_list(struct runtime *rt, json_t **images, struct terr *err)
{
	*images = NULL;
	autojson json_t *arr = NULL;
	int r = dk_call_json(rt, "GET", "/images/json", NULL, "list images", &arr, err);
	if (r < 0)
		return r;
	if (!json_is_array(arr))
		return terr_set(err, EPROTO, "list images: Docker sent no list");
	json_t *out = json_array();
	size_t i, k;
	json_t *img, *tag;
	json_array_foreach(arr, i, img) {
		json_t *tags = json_array();
		json_array_foreach(json_object_get(img, "RepoTags"), k, tag) {
			const char *t = json_string_value(tag);
			/* Dangling images carry "<none>:<none>": not launchable. */
			if (t && strcmp(t, "<none>:<none>") != 0)
				json_array_append_new(tags, json_string(t));
		}
		/* Images of the platform's own parts, not for sessions: the
		 * sandboxes' (tessera.role=sandbox). */
		if (!json_array_size(tags) ||
		    json_string_value(json_object_get(json_object_get(img, "Labels"), "tessera.role"))) {
			json_decref(tags);
			continue;
		}
		/* Labels: strings only (Docker's are), anything else dropped. */
		json_t *labels = json_object();
		const char *key;
		json_t *v;
		json_object_foreach(json_object_get(img, "Labels"), key, v)
			if (json_is_string(v))
				json_object_set(labels, key, v);
		json_t *digests = json_array();
		json_array_foreach(json_object_get(img, "RepoDigests"), k, tag)
			if (json_is_string(tag) && !strstr(json_string_value(tag), "<none>"))
				json_array_append(digests, tag);
		json_t *size = json_object_get(img, "Size");
		json_array_append_new(out, json_pack("{s:s,s:o,s:o,s:I,s:o}", "id", jstr(img, "Id"), "tags", tags,
						     "digests", digests,
						     "size", (json_int_t)(json_is_integer(size) ? json_integer_value(size) : 0),
						     "labels", labels));
	}
	*images = out;
	return 0;
}

/* ---- create ------------------------------------------------------------ */

static json_t *str_array(const char *const *v)
{
	json_t *a = json_array();
	for (; a && v && *v; v++)
		json_array_append_new(a, json_string(*v));
	return a;
}

/* Capabilities of Docker's default set that a research session has no use
 * for, dropped to shrink what a compromised or careless session can do:
 *   NET_RAW     raw/packet sockets: ARP/DNS spoofing of neighbours on the
 *               bridge (ping in the image loses ICMP; sessions don't need it)
 *   MKNOD       creating device nodes (GPU nodes are passed in explicitly)
 *   AUDIT_WRITE writing to the host's kernel audit log
 *   SYS_CHROOT  chroot, a building block of container escapes
 *   SETFCAP     setting file capabilities on binaries (would survive a commit
 *               into a private image and be handed to its next user)
 *   SETPCAP     changing capability sets of other threads/bounding set
 * Kept: CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETUID, SETGID,
 * NET_BIND_SERVICE: pip/apt as root in the session need them. */
static const char *const docker_cap_drop[] = {
	"NET_RAW", "MKNOD", "AUDIT_WRITE", "SYS_CHROOT", "SETFCAP", "SETPCAP", NULL,
};

/* Builds the POST /containers/create body (new reference, NULL on ENOMEM).
 * seccomp_opt: the SecurityOpt entry of the sessions' seccomp profile,
 * left out when the spec asks for Docker's default.
 * Tests check it through the fake daemon, which records what it got. */
static json_t *create_body(const struct rt_container_spec *spec, const char *seccomp_opt)
{
	json_t *b = json_object();
	json_t *hc = json_object();
	json_t *labels = json_object();
	json_t *mounts = json_array();
	json_t *devices = json_array();
	if (!b || !hc || !labels || !mounts || !devices)
		goto oom;

	json_object_set_new(b, "Image", json_string(spec->image));
	if (spec->entrypoint)
		json_object_set_new(b, "Entrypoint", str_array(spec->entrypoint));
	/* An explicit empty Cmd: with our Entrypoint (the runner), Docker would
	 * otherwise append the image's CMD as the runner's arguments. */
	json_object_set_new(b, "Cmd", str_array(spec->cmd));
	json_object_set_new(b, "Env", str_array(spec->env));
	/* A container that joins another's namespace has that one's host
	 * name: Docker refuses one of its own. */
	if (spec->hostname && !spec->netns_of)
		json_object_set_new(b, "Hostname", json_string(spec->hostname));
	for (size_t i = 0; i < spec->n_labels; i++)
		json_object_set_new(labels, spec->labels[i].key,
				    json_string(spec->labels[i].value ? spec->labels[i].value : ""));
	json_object_set(b, "Labels", labels);
	json_object_set_new(b, "Tty", json_false());
	json_object_set_new(b, "OpenStdin", json_false());
	json_object_set_new(b, "AttachStdin", json_false());
	json_object_set_new(b, "AttachStdout", json_false());
	json_object_set_new(b, "AttachStderr", json_false());

	/* Mounts rather than Binds: Binds silently create a missing source
	 * directory (root-owned, empty), hiding a wrong path; Mounts fail with
	 * "bind source path does not exist", and take paths containing ':'. */
	for (size_t i = 0; i < spec->n_mounts; i++) {
		json_t *m = json_object();
		if (!m)
			goto oom;
		json_object_set_new(m, "Type", json_string("bind"));
		json_object_set_new(m, "Source", json_string(spec->mounts[i].source));
		json_object_set_new(m, "Target", json_string(spec->mounts[i].target));
		json_object_set_new(m, "ReadOnly", json_boolean(spec->mounts[i].readonly));
		json_array_append_new(mounts, m);
	}
	json_object_set(hc, "Mounts", mounts);
	for (const char *const *d = spec->devices; d && *d; d++) {
		json_t *dev = json_pack("{s:s, s:s, s:s}", "PathOnHost", *d,
					"PathInContainer", *d, "CgroupPermissions", "rwm");
		if (!dev)
			goto oom;
		json_array_append_new(devices, dev);
	}
	json_object_set(hc, "Devices", devices);
	if (spec->nano_cpus > 0)
		json_object_set_new(hc, "NanoCpus", json_integer(spec->nano_cpus));
	if (spec->memory_bytes > 0) {
		json_object_set_new(hc, "Memory", json_integer(spec->memory_bytes));
		/* MemorySwap is memory+swap: equal means no swap, so a session
		 * over its limit is OOM-killed instead of thrashing the host. */
		json_object_set_new(hc, "MemorySwap", json_integer(spec->memory_bytes));
	}
	if (spec->pids_limit > 0)
		json_object_set_new(hc, "PidsLimit", json_integer(spec->pids_limit));
	/* setuid binaries in arbitrary images must not gain privileges. The
	 * seccomp profile is Docker's default but for the ioctls that make
	 * btrfs subvolumes, which would escape the folders' quotas
	 * (docker_seccomp.h); it replaces Docker's default whole. */
	json_object_set_new(hc, "SecurityOpt",
			    str_array((const char *const[]){ "no-new-privileges",
							     spec->seccomp_default ? NULL : seccomp_opt, NULL }));
	json_object_set_new(hc, "CapDrop", str_array(docker_cap_drop));
	/* A capped log (docs/admin.md, "Session logs"): json-file, whose
	 * rotated files logs_notice reads, whatever the daemon's default
	 * driver. max-size is per file, in bytes. */
	if (spec->log_max_size > 0 && spec->log_max_files >= 2) {
		char size[32], files[16];
		snprintf(size, sizeof(size), "%" PRId64, spec->log_max_size / spec->log_max_files);
		snprintf(files, sizeof(files), "%d", spec->log_max_files);
		json_object_set_new(hc, "LogConfig", json_pack("{s:s, s:{s:s, s:s}}", "Type", "json-file", "Config",
								"max-size", size, "max-file", files));
	}
	/* Our runner is PID 1; Docker's tini would sit in front of it. */
	json_object_set_new(hc, "Init", json_false());
	/* The agent decides when a session's container goes away (and commit
	 * needs it after it stopped); restarts are the scheduler's call. */
	json_object_set_new(hc, "AutoRemove", json_false());
	json_object_set_new(hc, "RestartPolicy", json_pack("{s:s}", "Name", "no"));
	/* At create, a container joins exactly one network: the one named
	 * here, so it is never on the default bridge beside other users'. */
	if (spec->netns_of) {
		autofree char *mode = NULL;
		if (asprintf(&mode, "container:%s", spec->netns_of) < 0) {
			mode = NULL;
			goto oom;
		}
		json_object_set_new(hc, "NetworkMode", json_string(mode));
	} else if (spec->network) {
		json_object_set_new(hc, "NetworkMode", json_string(spec->network));
	}
	if (!spec->netns_of && spec->network && spec->network_alias)
		json_object_set_new(b, "NetworkingConfig",
				    json_pack("{s:{s:{s:[s]}}}", "EndpointsConfig", spec->network, "Aliases",
					      spec->network_alias));
	/* The one published port: HostPort "" lets Docker pick a free one,
	 * read back from inspect once the container started. */
	if (spec->publish_port > 0 && !spec->netns_of) {
		char key[24];
		snprintf(key, sizeof(key), "%d/tcp", spec->publish_port);
		json_object_set_new(b, "ExposedPorts", json_pack("{s:{}}", key));
		json_object_set_new(hc, "PortBindings", json_pack("{s:[{s:s,s:s}]}", key, "HostIp",
								   spec->publish_host ? spec->publish_host : "127.0.0.1",
								   "HostPort", ""));
	}
	json_object_set(b, "HostConfig", hc);

	json_decref(hc);
	json_decref(labels);
	json_decref(mounts);
	json_decref(devices);
	return b;
oom:
	json_decref(b);
	json_decref(hc);
	json_decref(labels);
	json_decref(mounts);
	json_decref(devices);
	return NULL;
}

static int docker_create(struct runtime *rt, const struct rt_container_spec *spec,
			 char id[RT_ID_MAX], struct terr *err)
{
	id[0] = '\0';
	if (!spec->image || !*spec->image)
		return terr_set(err, EINVAL, "create container: no image given");
	autojson json_t *body = create_body(spec, rt->seccomp_opt);
	autofree char *path = NULL;
	autofree char *ename = spec->name ? url_escape(spec->name, false) : NULL;
	if (!body || (spec->name && !ename))
		return terr_set(err, ENOMEM, "create container: out of memory");
	if (asprintf(&path, "/containers/create%s%s", ename ? "?name=" : "",
		     ename ? ename : "") < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "create container: out of memory");
	}
	autojson json_t *j = NULL;
	int r = dk_call_json(rt, "POST", path, body, "create container", &j, err);
	if (r < 0)
		return r;
	const char *cid = jstr(j, "Id");
	if (!*cid || strlen(cid) >= RT_ID_MAX)
		return terr_set(err, EPROTO, "create container: Docker returned no usable Id");
	copy_str(id, RT_ID_MAX, cid);
	return 0;
}

/* ---- start / remove / inspect / list ----------------------------------- */

/* Sends a body-less request on /containers/<id><suffix> and accepts the
 * listed success codes. */
static int container_call(struct runtime *rt, const char *method,
			  const char *id, const char *suffix, const long ok[],
			  const char *what, struct terr *err)
{
	autofree char *eid = url_escape(id, false);
	autofree char *path = NULL;
	if (!eid || asprintf(&path, "/containers/%s%s", eid, suffix) < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "%s: out of memory", what);
	}
	struct httpc_response resp;
	int r = dk_do(rt, method, true, path, NULL, DOCKER_TIMEOUT_MS, NULL, NULL,
		      NULL, &resp, what, err);
	if (r < 0)
		return r;
	r = -1;
	for (const long *s = ok; *s; s++)
		if (resp.status == *s)
			r = 0;
	if (r)
		r = dk_fail(&resp, what, err);
	httpc_response_free(&resp);
	return r;
}

static int docker_start(struct runtime *rt, const char *id, struct terr *err)
{
	/* 304: already running, which is what the caller wanted. */
	return container_call(rt, "POST", id, "/start", (const long[]){ 204, 304, 200, 0 },
			      "start container", err);
}

static int docker_remove(struct runtime *rt, const char *id, struct terr *err)
{
	/* force kills it first; v removes its anonymous volumes with it. */
	return container_call(rt, "DELETE", id, "?force=1&v=1", (const long[]){ 204, 200, 0 },
			      "remove container", err);
}

static int docker_kill(struct runtime *rt, const char *id, long timeout_ms, struct terr *err)
{
	autofree char *eid = url_escape(id, false);
	autofree char *path = NULL;
	if (!eid || asprintf(&path, "/containers/%s/kill?signal=KILL", eid) < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "kill container: out of memory");
	}
	/* Docker answers a SIGKILL once the container has stopped (it waits
	 * for the exit, then kills PID 1 directly and waits again), so the
	 * answer within the timeout is what the caller waits for. */
	struct httpc_response resp;
	int r = dk_do(rt, "POST", true, path, NULL, timeout_ms, NULL, NULL, NULL, &resp, "kill container", err);
	if (r < 0)
		return r;
	/* 409: not running, which is what the caller wanted. */
	r = resp.status == 204 || resp.status == 200 || resp.status == 409 ? 0 : dk_fail(&resp, "kill container", err);
	httpc_response_free(&resp);
	return r;
}

static void labels_to_info(json_t *labels, struct rt_container_info *out)
{
	copy_str(out->session_id, sizeof(out->session_id), jstr(labels, "tessera.session"));
	copy_str(out->agent_id, sizeof(out->agent_id), jstr(labels, "tessera.agent"));
	copy_str(out->cluster_id, sizeof(out->cluster_id), jstr(labels, "tessera.cluster"));
	copy_str(out->run_as, sizeof(out->run_as), jstr(labels, "tessera.run_as"));
	copy_str(out->sandbox, sizeof(out->sandbox), jstr(labels, "tessera.sandbox"));
}

/* The address of a running container: on its network, or for one that
 * joined another's namespace ("container:ID"), that one's, from its
 * label (Docker reports none for it). */
static void container_ip(json_t *settings, json_t *labels, const char *network, char *ip, size_t n)
{
	if (!strncmp(network, "container:", 10))
		copy_str(ip, n, jstr(labels, "tessera.sandbox_ip"));
	else
		network_ip(settings, network, ip, n);
}

/* The same for its published port: "PRIVATE=HOST:PORT" from the label of
 * a container in another's namespace (the host may be an IPv6 address:
 * the port follows the last colon). */
static void sandbox_published(json_t *labels, const char *network, struct rt_container_info *out)
{
	const char *v = jstr(labels, "tessera.sandbox_published");
	const char *eq = strchr(v, '='), *colon = strrchr(v, ':');
	if (strncmp(network, "container:", 10) || !eq || !colon || colon < eq)
		return;
	int priv = atoi(v), port = atoi(colon + 1);
	size_t hl = (size_t)(colon - eq - 1);
	if (priv <= 0 || port <= 0 || hl >= sizeof(out->published_host))
		return;
	out->published_private = priv;
	out->published_port = port;
	memcpy(out->published_host, eq + 1, hl);
	out->published_host[hl] = '\0';
}

static int docker_inspect(struct runtime *rt, const char *id,
			  struct rt_container_info *out, struct terr *err)
{
	memset(out, 0, sizeof(*out));
	autofree char *eid = url_escape(id, false);
	autofree char *path = NULL;
	if (!eid || asprintf(&path, "/containers/%s/json", eid) < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "inspect container: out of memory");
	}
	autojson json_t *j = NULL;
	int r = dk_call_json(rt, "GET", path, NULL, "inspect container", &j, err);
	if (r < 0)
		return r;
	json_t *st = json_object_get(j, "State");
	json_t *cfg = json_object_get(j, "Config");
	copy_str(out->id, sizeof(out->id), jstr(j, "Id"));
	const char *name = jstr(j, "Name");
	copy_str(out->name, sizeof(out->name), name[0] == '/' ? name + 1 : name);
	/* Config.Image is the reference it was created from; top-level Image
	 * is only the digest. */
	copy_str(out->image, sizeof(out->image), jstr(cfg, "Image"));
	copy_str(out->state, sizeof(out->state), jstr(st, "Status"));
	out->running = json_is_true(json_object_get(st, "Running"));
	out->oom_killed = json_is_true(json_object_get(st, "OOMKilled"));
	out->exit_code = (int)json_integer_value(json_object_get(st, "ExitCode"));
	out->pid = out->running ? (int)json_integer_value(json_object_get(st, "Pid")) : 0;
	copy_str(out->error, sizeof(out->error), jstr(st, "Error"));
	labels_to_info(json_object_get(cfg, "Labels"), out);
	copy_str(out->network, sizeof(out->network), jstr(json_object_get(j, "HostConfig"), "NetworkMode"));
	/* NetworkSettings.Ports: {"7611/tcp": [{"HostIp","HostPort"}], ...},
	 * a binding null for a port exposed but not published. */
	const char *key;
	json_t *binds;
	json_object_foreach(json_object_get(json_object_get(j, "NetworkSettings"), "Ports"), key, binds) {
		int priv = 0, pub = 0;
		char proto[8] = "";
		json_t *b0 = json_array_get(binds, 0);
		if (out->published_port || sscanf(key, "%d/%7s", &priv, proto) != 2 || strcmp(proto, "tcp") || !b0)
			continue;
		pub = atoi(jstr(b0, "HostPort"));
		if (priv > 0 && pub > 0) {
			out->published_private = priv;
			out->published_port = pub;
			copy_str(out->published_host, sizeof(out->published_host), jstr(b0, "HostIp"));
		}
	}
	if (out->running) {
		container_ip(json_object_get(j, "NetworkSettings"), json_object_get(cfg, "Labels"), out->network,
			     out->ip, sizeof(out->ip));
		sandbox_published(json_object_get(cfg, "Labels"), out->network, out);
	}
	return 0;
}

static json_t *label_filter(const char *key, const char *value)
{
	autofree char *kv = NULL;
	if (value ? asprintf(&kv, "%s=%s", key, value) < 0 : !(kv = strdup(key)))
		return NULL;
	return json_pack("{s:[s]}", "label", kv);
}

/* PREFIX followed by the URL-escaped filter on label KEY=VALUE: the path
 * of a list call; NULL when out of memory. */
static char *label_filter_path(const char *prefix, const char *key, const char *value)
{
	autojson json_t *filters = label_filter(key, value);
	autofree char *fjson = filters ? json_dumps(filters, JSON_COMPACT) : NULL;
	autofree char *ef = fjson ? url_escape(fjson, false) : NULL;
	char *path = NULL;
	if (!ef || asprintf(&path, "%s%s", prefix, ef) < 0)
		return NULL;
	return path;
}

static int docker_list(struct runtime *rt, const char *label_key,
		       const char *label_value, struct rt_container_info **out,
		       size_t *n, struct terr *err)
{
	*out = NULL;
	*n = 0;
	autofree char *path = label_filter_path("/containers/json?all=1&filters=", label_key, label_value);
	if (!path)
		return terr_set(err, ENOMEM, "list containers: out of memory");
	autojson json_t *arr = NULL;
	int r = dk_call_json(rt, "GET", path, NULL, "list containers", &arr, err);
	if (r < 0)
		return r;
	if (!json_is_array(arr))
		return terr_set(err, EPROTO, "list containers: Docker sent no list");
	size_t count = json_array_size(arr), i;
	struct rt_container_info *v = calloc(count ? count : 1, sizeof(*v));
	if (!v)
		return terr_set(err, ENOMEM, "list containers: out of memory");
	json_t *c;
	json_array_foreach(arr, i, c) {
		struct rt_container_info *o = &v[i];
		copy_str(o->id, sizeof(o->id), jstr(c, "Id"));
		const char *name = json_string_value(json_array_get(json_object_get(c, "Names"), 0));
		copy_str(o->name, sizeof(o->name), name && name[0] == '/' ? name + 1 : name);
		copy_str(o->image, sizeof(o->image), jstr(c, "Image"));
		copy_str(o->state, sizeof(o->state), jstr(c, "State"));
		o->running = strcmp(o->state, "running") == 0;
		/* The list has no exit code field; its Status text carries it
		 * ("Exited (3) 2 minutes ago"). Inspect has the full story. */
		int code;
		if (sscanf(jstr(c, "Status"), "Exited (%d)", &code) == 1)
			o->exit_code = code;
		labels_to_info(json_object_get(c, "Labels"), o);
		copy_str(o->network, sizeof(o->network), jstr(json_object_get(c, "HostConfig"), "NetworkMode"));
		/* Ports: [{"IP","PrivatePort","PublicPort","Type"}], the
		 * published ones with a PublicPort. */
		size_t k;
		json_t *pt;
		json_array_foreach(json_object_get(c, "Ports"), k, pt) {
			int pub = (int)json_integer_value(json_object_get(pt, "PublicPort"));
			if (o->published_port || pub <= 0 || strcmp(jstr(pt, "Type"), "tcp"))
				continue;
			o->published_private = (int)json_integer_value(json_object_get(pt, "PrivatePort"));
			o->published_port = pub;
			copy_str(o->published_host, sizeof(o->published_host), jstr(pt, "IP"));
		}
		if (o->running) {
			container_ip(json_object_get(c, "NetworkSettings"), json_object_get(c, "Labels"), o->network,
				     o->ip, sizeof(o->ip));
			sandbox_published(json_object_get(c, "Labels"), o->network, o);
		}
	}
	*out = v;
	*n = count;
	return 0;
}

/* ---- streamed output: exec and logs ------------------------------------ */

/* The exec and logs streams run in a pump's thread (common/pump.h): the
 * Docker call's write callback decodes Docker's frames and writes into
 * the pump, waiting while it is full, so nothing here reads faster than
 * the client takes the bytes and no more than the pump's buffer is held. */
struct dk_stream {
	struct runtime *rt;      /* outlives the stream: the agent closes it last */
	struct pump *pump;
	char path[512];
	bool exec;               /* re-framed for exec, raw bytes for logs */
	char eid[RT_ID_MAX];
	char notice[256];        /* logs: the line sent first, may be empty */
	struct frames_decoder dec;
	long status;
	bool cancelled;          /* the reader went away */
	char errbody[DOCKER_ERRBODY_CAP];
	size_t errlen;
};

static int dk_stream_payload(void *ud, enum frame_type type, const char *data, size_t len)
{
	struct dk_stream *s = ud;
	if (s->exec) {
		unsigned char hdr[FRAMES_HEADER];
		frames_header(hdr, type, (uint32_t)len);
		if (pump_write(s->pump, hdr, sizeof(hdr)) < 0) {
			s->cancelled = true;
			return 1;
		}
	}
	if (pump_write(s->pump, data, len) < 0) {
		s->cancelled = true;
		return 1;
	}
	return 0;
}

static int dk_stream_status(long status, const char *content_type, void *ud)
{
	(void)content_type;
	struct dk_stream *s = ud;
	s->status = status;
	return 0;
}

static int dk_stream_data(const char *data, size_t len, void *ud)
{
	struct dk_stream *s = ud;
	if (s->status != 200) {
		/* An error body is not framed: kept for the message. */
		size_t k = sizeof(s->errbody) - 1 - s->errlen;
		if (k > len)
			k = len;
		memcpy(s->errbody + s->errlen, data, k);
		s->errlen += k;
		return 0;
	}
	/* A stream that is not framed (a TTY container) ends the transfer;
	 * frames_finish reports it. */
	return frames_feed(&s->dec, data, len) < 0;
}

/* Runs the Docker call of a stream; 0 when its body was read to a frame
 * boundary, else negative with err (also -ECANCELED when the reader left). */
static int dk_stream_run(struct dk_stream *s, const char *method, const json_t *body, const char *what,
			 struct terr *err)
{
	struct frames_sink sink = {.on_data = dk_stream_payload, .ud = s};
	frames_decoder_init_docker(&s->dec, &sink);
	struct httpc_response resp;
	autofree char *url = NULL;
	autofree char *payload = body ? json_dumps(body, JSON_COMPACT) : NULL;
	if (asprintf(&url, "%s/v%s%s", s->rt->base, s->rt->api, s->path) < 0) {
		url = NULL;
		return terr_set(err, ENOMEM, "%s: out of memory", what);
	}
	static const char *const json_headers[] = {"Content-Type: application/json", NULL};
	struct httpc_request req = {
		.method = method,
		.url = url,
		.unix_socket = s->rt->socket,
		.headers = strcmp(method, "POST") == 0 ? json_headers : NULL,
		.body = payload,
		.body_len = payload ? strlen(payload) : 0,
		.on_data = dk_stream_data,
		.on_status = dk_stream_status,
		.ud = s,
		.cancel = pump_cancel_flag(s->pump),
	};
	int r = httpc_do(&req, &resp, err);
	httpc_response_free(&resp);
	if (s->cancelled || r == -ECANCELED)
		return terr_set(err, ECANCELED, "%s: the reader went away", what);
	if (r < 0)
		return terr_prefix(err, "%s: Docker at %s", what, s->rt->where);
	if (s->status != 200)
		return dk_fail_body(s->status, s->errbody, s->errlen, what, err);
	if (frames_finish(&s->dec) < 0)
		return terr_set(err, EPROTO,
				"%s: Docker's output stream is not in the multiplexed format (a TTY container?) or was cut short",
				what);
	return 0;
}

void rt_exec_result_free(struct rt_exec_result *r)
{
	if (!r)
		return;
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
	r->out_len = r->err_len = 0;
}

static int exec_create(struct runtime *rt, const char *id,
		       const char *const *argv, const char *const *env,
		       const char *user, const char *workdir,
		       char eid[RT_ID_MAX], struct terr *err)
{
	autofree char *ecid = url_escape(id, false);
	autofree char *path = NULL;
	autojson json_t *body = json_object();
	if (!ecid || !body || asprintf(&path, "/containers/%s/exec", ecid) < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "exec: out of memory");
	}
	json_object_set_new(body, "AttachStdin", json_false());
	json_object_set_new(body, "AttachStdout", json_true());
	json_object_set_new(body, "AttachStderr", json_true());
	json_object_set_new(body, "Tty", json_false());
	json_object_set_new(body, "Cmd", str_array(argv));
	if (env)
		json_object_set_new(body, "Env", str_array(env));
	if (user)
		json_object_set_new(body, "User", json_string(user));
	if (workdir)
		json_object_set_new(body, "WorkingDir", json_string(workdir));
	autojson json_t *j = NULL;
	int r = dk_call_json(rt, "POST", path, body, "exec in container", &j, err);
	if (r < 0)
		return r;
	const char *s = jstr(j, "Id");
	if (!*s || strlen(s) >= RT_ID_MAX)
		return terr_set(err, EPROTO, "exec in container: Docker returned no usable exec Id");
	copy_str(eid, RT_ID_MAX, s);
	return 0;
}

/* The attach stream ends when the process closes its output, which can be a
 * moment before Docker records the exit code; Docker's CLI polls the same
 * way. */
static int exec_exit_code(struct runtime *rt, const char *eid, int *code,
			  struct terr *err)
{
	autofree char *path = NULL;
	if (asprintf(&path, "/exec/%s/json", eid) < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "exec: out of memory");
	}
	for (int attempt = 0;; attempt++) {
		json_t *j = NULL;
		int r = dk_call_json(rt, "GET", path, NULL, "inspect exec", &j, err);
		if (r < 0)
			return r;
		bool running = json_is_true(json_object_get(j, "Running"));
		json_t *ec = json_object_get(j, "ExitCode");
		bool known = json_is_integer(ec);
		*code = known ? (int)json_integer_value(ec) : -1;
		json_decref(j);
		if (!running && known)
			return 0;
		if (attempt >= 200)   /* ~2 s */
			return terr_set(err, ETIMEDOUT,
					"inspect exec: output ended but Docker still reports the process running");
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	}
}

/* The exec stream's producer: the output re-framed, then the exit frame,
 * or an error frame saying why there is none. */
static int exec_produce(struct pump *p, void *ud, struct terr *err)
{
	struct dk_stream *s = ud;
	s->pump = p;
	pump_ready(p);
	autojson json_t *body = json_pack("{s:b, s:b}", "Detach", 0, "Tty", 0);
	struct terr e = {0};
	int code = -1;
	int r = body ? dk_stream_run(s, "POST", body, "run exec", &e) : terr_set(&e, ENOMEM, "out of memory");
	if (r == -ECANCELED)
		return terr_set(err, ECANCELED, "%s", e.msg);
	if (r == 0)
		r = exec_exit_code(s->rt, s->eid, &code, &e);
	if (r == 0) {
		unsigned char fr[FRAMES_HEADER + 4];
		frames_exit(fr, code);
		pump_write(p, fr, sizeof(fr));
	} else {
		size_t n = strlen(e.msg);
		unsigned char hdr[FRAMES_HEADER];
		frames_header(hdr, FRAME_ERROR, (uint32_t)n);
		if (pump_write(p, hdr, sizeof(hdr)) == 0)
			pump_write(p, e.msg, n);
	}
	return 0;
}

static int docker_exec_stream(struct runtime *rt, const char *id, const char *const *argv,
			      const char *const *env, const char *user, const char *workdir,
			      struct pump **out, struct terr *err)
{
	*out = NULL;
	if (!argv || !argv[0])
		return terr_set(err, EINVAL, "exec in container: empty command");
	struct dk_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return terr_set(err, ENOMEM, "exec: out of memory");
	s->rt = rt;
	s->exec = true;
	int r = exec_create(rt, id, argv, env, user, workdir, s->eid, err);
	if (r < 0) {
		free(s);
		return r;
	}
	snprintf(s->path, sizeof(s->path), "/exec/%s/start", s->eid);
	return pump_start(out, 0, exec_produce, s, free, err);
}

struct exec_collect {
	char *bufs[2];           /* stdout, stderr: cap + 1 bytes each */
	size_t lens[2], cap;
	bool ended, exited;
	int code;
	char error[TERR_MSG_MAX];
};

static int collect_data(void *ud, enum frame_type type, const char *data, size_t len)
{
	struct exec_collect *c = ud;
	int i = type == FRAME_STDERR;
	size_t keep = c->lens[i] + len <= c->cap ? len : c->cap - c->lens[i];
	memcpy(c->bufs[i] + c->lens[i], data, keep);
	c->lens[i] += keep;
	return 0;
}

static int collect_end(void *ud, bool exited, int32_t code, const char *error)
{
	struct exec_collect *c = ud;
	c->ended = true;
	c->exited = exited;
	c->code = code;
	if (error)
		copy_str(c->error, sizeof(c->error), error);
	return 0;
}

int rt_exec_collect(struct pump *p, size_t max_output, struct rt_exec_result *out, struct terr *err)
{
	memset(out, 0, sizeof(*out));
	out->exit_code = -1;
	struct exec_collect c = {
		.bufs = {calloc(1, max_output + 1), calloc(1, max_output + 1)},
		.cap = max_output,
	};
	struct frames_decoder d;
	frames_decoder_init(&d, &(struct frames_sink){.on_data = collect_data, .on_end = collect_end, .ud = &c});
	int rc = 0;
	char chunk[16384];
	if (!c.bufs[0] || !c.bufs[1]) {
		rc = terr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (;;) {
		long n = pump_read(p, chunk, sizeof(chunk), -1);
		if (n < 0) {
			const struct terr *pe = pump_error(p);
			rc = terr_set(err, pe->code ? pe->code : EIO, "%s", pe->msg);
			goto out;
		}
		if (n == 0 || frames_feed(&d, chunk, (size_t)n) < 0)
			break;
	}
	if (frames_finish(&d) < 0) {
		rc = terr_set(err, EPROTO, "exec: the output stream is not in Tessera's frames or was cut short");
	} else if (!c.exited) {
		rc = terr_set(err, EIO, "%s", c.error[0] ? c.error : "exec: the command's outcome is unknown");
	} else {
		out->exit_code = c.code;
		out->out = c.bufs[0];
		out->out_len = c.lens[0];
		out->err = c.bufs[1];
		out->err_len = c.lens[1];
		c.bufs[0] = c.bufs[1] = NULL;
	}
out:
	free(c.bufs[0]);
	free(c.bufs[1]);
	return rc;
}

/* "2026-11-24T15:56:04.123456789Z" (Docker's times, always UTC) into
 * *ts; false when it is not that. */
static bool parse_docker_time(const char *s, struct timespec *ts)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	int used = 0;
	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
		   &tm.tm_min, &tm.tm_sec, &used) != 6 || tm.tm_year < 1971)
		return false;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	ts->tv_sec = timegm(&tm);
	ts->tv_nsec = 0;
	const char *f = s + used;
	if (*f == '.') {
		long scale = 100000000L;
		for (f++; isdigit((unsigned char)*f); f++, scale /= 10)
			ts->tv_nsec += (*f - '0') * scale;
	}
	return true;
}

/* A json-file size option ("20971520", "20m", "1g") in bytes; 0 if none. */
static int64_t log_opt_size(const char *v)
{
	int64_t bytes = 0;
	return v && *v && units_parse_size(v, &bytes, NULL) == 0 ? bytes : 0;
}

/* The line a log stream starts with when rotation dropped the log's start
 * (empty when it did not, or when that cannot be told), from Docker's
 * inspect j of the container. The json-file driver writes LogPath and,
 * once it rotated, keeps LogPath.1 .. LogPath.(max-file - 1), dropping the
 * oldest at the next rotation. A file keeps its inode, and so its birth
 * time, through the renames, and the first file is made when the
 * container starts. So the log's start is gone exactly when the oldest
 * file that can exist, LogPath.(max-file - 1), was born after the
 * container started. Where the birth time cannot be read (a filesystem
 * without one) that file's existence says only that output may have been
 * dropped; where Docker's directory cannot be read at all (another host,
 * no permission) nothing is said. */
static void logs_notice(json_t *j, char *out, size_t n)
{
	out[0] = '\0';
	json_t *lc = json_object_get(json_object_get(j, "HostConfig"), "LogConfig");
	json_t *opts = json_object_get(lc, "Config");
	const char *log_path = jstr(j, "LogPath");
	long max_file = atol(jstr(opts, "max-file"));
	int64_t max_size = log_opt_size(jstr(opts, "max-size"));
	if (strcmp(jstr(lc, "Type"), "json-file") != 0 || !*log_path || max_file < 2 || max_size <= 0)
		return;
	char oldest[4096];
	if (snprintf(oldest, sizeof(oldest), "%s.%ld", log_path, max_file - 1) >= (int)sizeof(oldest))
		return;
	struct statx stx;
	if (statx(AT_FDCWD, oldest, 0, STATX_BTIME, &stx) != 0)
		return;
	struct timespec started;
	bool known = (stx.stx_mask & STATX_BTIME) &&
		     parse_docker_time(jstr(json_object_get(j, "State"), "StartedAt"), &started);
	if (known && (stx.stx_btime.tv_sec < started.tv_sec ||
		      (stx.stx_btime.tv_sec == started.tv_sec && stx.stx_btime.tv_nsec <= started.tv_nsec)))
		return;
	char total[32], each[32];
	units_format_size(max_size * max_file, total, sizeof(total));
	units_format_size(max_size, each, sizeof(each));
	snprintf(out, n, "%s: this session's log is capped at %s (%ld files of %s), the oldest are dropped\n",
		 known ? RT_LOGS_DROPPED : "[tessera] earlier output may have been dropped", total, max_file, each);
}

static int logs_produce(struct pump *p, void *ud, struct terr *err)
{
	struct dk_stream *s = ud;
	s->pump = p;
	pump_ready(p);
	if (s->notice[0] && pump_write(p, s->notice, strlen(s->notice)) < 0)
		return terr_set(err, ECANCELED, "read container logs: the reader went away");
	return dk_stream_run(s, "GET", NULL, "read container logs", err);
}

static int docker_logs_stream(struct runtime *rt, const char *id, int tail, bool follow, struct pump **out,
			      struct terr *err)
{
	*out = NULL;
	autofree char *eid = url_escape(id, false);
	autofree char *path = NULL;
	if (!eid || asprintf(&path, "/containers/%s/json", eid) < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "read container logs: out of memory");
	}
	/* Inspect first: an unknown container is an error of the call, not
	 * a cut stream, and the notice needs the log's files. */
	autojson json_t *j = NULL;
	int r = dk_call_json(rt, "GET", path, NULL, "read container logs", &j, err);
	if (r < 0)
		return r;
	struct dk_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return terr_set(err, ENOMEM, "read container logs: out of memory");
	s->rt = rt;
	if (tail <= 0)
		logs_notice(j, s->notice, sizeof(s->notice));
	char tailbuf[24];
	/* Docker reads tail=0 as "no lines"; ours means all. */
	if (tail > 0)
		snprintf(tailbuf, sizeof(tailbuf), "%d", tail);
	else
		snprintf(tailbuf, sizeof(tailbuf), "all");
	snprintf(s->path, sizeof(s->path), "/containers/%s/logs?stdout=1&stderr=1&tail=%s&follow=%d", eid,
		 tailbuf, follow ? 1 : 0);
	return pump_start(out, 0, logs_produce, s, free, err);
}

/* ---- commit, tag, push, pull ------------------------------------------- */

/* Splits "reg:5000/repo:tag" into repo and tag: the tag follows the last
 * ':' after the last '/' (a ':' before it is a registry port); "latest"
 * when there is none. Digests are refused. *repo and *tag malloc'd. */
static int split_ref(const char *ref, char **repo, char **tag, const char *what, struct terr *err)
{
	*repo = *tag = NULL;
	if (!ref || !*ref || strchr(ref, '@'))
		return terr_set(err, EINVAL, "%s: \"%s\" is not an image name of the form repo[:tag]",
				what, ref ? ref : "");
	const char *slash = strrchr(ref, '/');
	const char *colon = strrchr(ref, ':');
	if (colon && slash && colon < slash)
		colon = NULL;
	*repo = colon ? strndup(ref, (size_t)(colon - ref)) : strdup(ref);
	*tag = strdup(colon ? colon + 1 : "latest");
	if (!*repo || !*tag) {
		free(*repo);
		free(*tag);
		*repo = *tag = NULL;
		return terr_set(err, ENOMEM, "%s: out of memory", what);
	}
	if (!**repo || !**tag) {
		free(*repo);
		free(*tag);
		*repo = *tag = NULL;
		return terr_set(err, EINVAL, "%s: \"%s\" has an empty repository or tag", what, ref);
	}
	return 0;
}

/* The body of POST /commit: a container config whose fields Docker merges
 * over the container's own (labels and variables of other names are kept). */
static json_t *commit_config(const struct rt_label *labels, size_t n_labels, const char *const *env)
{
	json_t *cfg = json_object(), *l = json_object();
	for (size_t i = 0; i < n_labels; i++)
		json_object_set_new(l, labels[i].key, json_string(labels[i].value ? labels[i].value : ""));
	json_object_set_new(cfg, "Labels", l);
	if (env)
		json_object_set_new(cfg, "Env", str_array(env));
	return cfg;
}

static int docker_commit(struct runtime *rt, const char *id, const char *ref,
			 const struct rt_label *labels, size_t n_labels,
			 const char *const *env, struct terr *err)
{
	autofree char *repo = NULL;
	autofree char *tag = NULL;
	int r = split_ref(ref, &repo, &tag, "commit container", err);
	if (r < 0)
		return r;
	autofree char *ecid = url_escape(id, false);
	autofree char *erepo = url_escape(repo, false);
	autofree char *etag = url_escape(tag, false);
	autofree char *path = NULL;
	if (!ecid || !erepo || !etag ||
	    asprintf(&path, "/commit?container=%s&repo=%s&tag=%s&pause=true", ecid, erepo, etag) < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "commit container: out of memory");
	}
	autojson json_t *cfg = (labels && n_labels) || env ? commit_config(labels, n_labels, env) : NULL;
	struct httpc_response resp;
	r = dk_do(rt, "POST", true, path, cfg, 0, NULL, NULL, NULL, &resp,
		  "commit container", err);
	if (r < 0)
		return r;
	if (resp.status != 201 && resp.status != 200)
		r = dk_fail(&resp, "commit container", err);
	httpc_response_free(&resp);
	return r;
}

static int docker_tag(struct runtime *rt, const char *src, const char *dst, struct terr *err)
{
	autofree char *repo = NULL;
	autofree char *tag = NULL;
	int r = split_ref(dst, &repo, &tag, "tag image", err);
	if (r < 0)
		return r;
	autofree char *esrc = url_escape(src, true);
	autofree char *erepo = url_escape(repo, false);
	autofree char *etag = url_escape(tag, false);
	autofree char *path = NULL;
	if (!esrc || !erepo || !etag ||
	    asprintf(&path, "/images/%s/tag?repo=%s&tag=%s", esrc, erepo, etag) < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "tag image: out of memory");
	}
	struct httpc_response resp;
	r = dk_do(rt, "POST", true, path, NULL, DOCKER_TIMEOUT_MS, NULL, NULL, NULL, &resp,
		  "tag image", err);
	if (r < 0)
		return r;
	if (resp.status != 201 && resp.status != 200)
		r = dk_fail(&resp, "tag image", err);
	httpc_response_free(&resp);
	return r;
}

static int docker_image_remove(struct runtime *rt, const char *ref, struct terr *err)
{
	autofree char *eref = url_escape(ref, true);
	autofree char *path = NULL;
	if (!eref || asprintf(&path, "/images/%s?noprune=false", eref) < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "remove image: out of memory");
	}
	struct httpc_response resp;
	int r = dk_do(rt, "DELETE", true, path, NULL, DOCKER_TIMEOUT_MS, NULL, NULL, NULL, &resp,
		      "remove image", err);
	if (r < 0)
		return r;
	if (resp.status != 200)
		r = dk_fail(&resp, "remove image", err);
	httpc_response_free(&resp);
	return r;
}

struct transfer_ctx {
	struct docker_progress prog;
	rt_progress_cb cb;
	void *ud;
	int64_t last_cur, last_total;
	char errbody[DOCKER_ERRBODY_CAP];
	size_t errlen;
};

static int transfer_on_data(const char *data, size_t len, void *ud)
{
	struct transfer_ctx *t = ud;
	size_t k = sizeof(t->errbody) - 1 - t->errlen;
	if (k > len)
		k = len;
	memcpy(t->errbody + t->errlen, data, k);
	t->errlen += k;
	if (docker_progress_feed(&t->prog, data, len) < 0)
		return 1;
	int64_t cur, total;
	docker_progress_sum(&t->prog, &cur, &total);
	if (t->cb && (cur != t->last_cur || total != t->last_total)) {
		t->last_cur = cur;
		t->last_total = total;
		t->cb(t->ud, cur, total);
	}
	return 0;
}

/* A pull or push: the request, then its streamed lines. what: for
 * messages ("pull image reg/x:1"). */
static int transfer(struct runtime *rt, const char *path, const char *what,
		    rt_progress_cb cb, void *ud, struct terr *err)
{
	struct transfer_ctx *t = calloc(1, sizeof(*t));
	if (!t)
		return terr_set(err, ENOMEM, "%s: out of memory", what);
	docker_progress_init(&t->prog);
	t->cb = cb;
	t->ud = ud;
	/* No credentials: the cluster registry is open to the cluster's
	 * hosts; Docker still wants the header on a push ("{}"). */
	struct httpc_response resp;
	int r = dk_do_h(rt, "POST", true, path, NULL, 0, transfer_on_data, t, NULL,
			"X-Registry-Auth: e30=", &resp, what, err);
	if (r == 0) {
		docker_progress_finish(&t->prog);
		if (resp.status != 200)
			r = dk_fail_body(resp.status, t->errbody, t->errlen, what, err);
		else if (t->prog.error[0])
			r = terr_set(err, strstr(t->prog.error, "not found") || strstr(t->prog.error, "unknown")
					    ? ENOENT : EIO, "%s: %s", what, t->prog.error);
		httpc_response_free(&resp);
	}
	docker_progress_free(&t->prog);
	free(t);
	return r;
}

static int docker_push(struct runtime *rt, const char *ref, rt_progress_cb cb, void *ud,
		       struct terr *err)
{
	autofree char *repo = NULL;
	autofree char *tag = NULL;
	autofree char *what = NULL;
	if (asprintf(&what, "push image %s", ref ? ref : "") < 0) {
		what = NULL;
		return terr_set(err, ENOMEM, "push image: out of memory");
	}
	int r = split_ref(ref, &repo, &tag, what, err);
	if (r < 0)
		return r;
	autofree char *erepo = url_escape(repo, true);
	autofree char *etag = url_escape(tag, false);
	autofree char *path = NULL;
	if (!erepo || !etag || asprintf(&path, "/images/%s/push?tag=%s", erepo, etag) < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "%s: out of memory", what);
	}
	return transfer(rt, path, what, cb, ud, err);
}

static int docker_pull(struct runtime *rt, const char *ref, rt_progress_cb cb, void *ud,
		       struct terr *err)
{
	autofree char *repo = NULL;
	autofree char *tag = NULL;
	autofree char *what = NULL;
	if (asprintf(&what, "pull image %s", ref ? ref : "") < 0) {
		what = NULL;
		return terr_set(err, ENOMEM, "pull image: out of memory");
	}
	int r = split_ref(ref, &repo, &tag, what, err);
	if (r < 0)
		return r;
	autofree char *erepo = url_escape(repo, false);
	autofree char *etag = url_escape(tag, false);
	autofree char *path = NULL;
	if (!erepo || !etag || asprintf(&path, "/images/create?fromImage=%s&tag=%s", erepo, etag) < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "%s: out of memory", what);
	}
	return transfer(rt, path, what, cb, ud, err);
}

/* ---- events ------------------------------------------------------------ */

struct watch_ctx {
	rt_event_cb cb;
	void *ud;
	char *line;
	size_t len, alloc;
	bool stopped_by_cb;
	bool bad_line;
	char errbody[DOCKER_ERRBODY_CAP];
	size_t errlen;
};

/* One line of the events stream: a JSON object per event. Lines that are
 * not (an error body) are ignored here and judged by the status later. */
static int watch_line(struct watch_ctx *w, const char *p, size_t n)
{
	json_t *j = json_loadb(p, n, 0, NULL);
	if (!j)
		return 0;
	struct rt_event ev;
	memset(&ev, 0, sizeof(ev));
	json_t *actor = json_object_get(j, "Actor");
	json_t *attrs = json_object_get(actor, "Attributes");
	const char *action = jstr(j, "Action");
	if (!*action)
		action = jstr(j, "status");
	const char *cid = jstr(actor, "ID");
	if (!*cid)
		cid = jstr(j, "id");
	const char *type = jstr(j, "Type");
	int r = 0;
	if (*action && !strcmp(type, "image")) {
		ev.image = true;
		copy_str(ev.action, sizeof(ev.action), action);
		r = w->cb(&ev, w->ud);
	} else if (*action && !strcmp(type, "network")) {
		ev.network = true;
		copy_str(ev.action, sizeof(ev.action), action);
		copy_str(ev.network_name, sizeof(ev.network_name), jstr(attrs, "name"));
		r = w->cb(&ev, w->ud);
	} else if (*action && *cid && (!*type || strcmp(type, "container") == 0)) {
		copy_str(ev.action, sizeof(ev.action), action);
		copy_str(ev.container_id, sizeof(ev.container_id), cid);
		copy_str(ev.session_id, sizeof(ev.session_id), jstr(attrs, "tessera.session"));
		copy_str(ev.cluster_id, sizeof(ev.cluster_id), jstr(attrs, "tessera.cluster"));
		copy_str(ev.sandbox, sizeof(ev.sandbox), jstr(attrs, "tessera.sandbox"));
		const char *code = json_string_value(json_object_get(attrs, "exitCode"));
		ev.exit_code = code && *code ? atoi(code) : -1;
		r = w->cb(&ev, w->ud);
	}
	json_decref(j);
	return r;
}

static int watch_on_data(const char *data, size_t len, void *ud)
{
	struct watch_ctx *w = ud;
	size_t k = sizeof(w->errbody) - 1 - w->errlen;
	if (k > len)
		k = len;
	memcpy(w->errbody + w->errlen, data, k);
	w->errlen += k;
	for (size_t i = 0; i < len; i++) {
		if (data[i] == '\n') {
			if (w->len && watch_line(w, w->line, w->len)) {
				w->stopped_by_cb = true;
				return 1;
			}
			w->len = 0;
			continue;
		}
		if (w->len + 1 >= w->alloc) {
			if (w->alloc >= DOCKER_EVENT_LINE_MAX) {
				w->bad_line = true;
				return 1;
			}
			size_t na = w->alloc ? w->alloc * 2 : 1024;
			char *nl = realloc(w->line, na);
			if (!nl) {
				w->bad_line = true;
				return 1;
			}
			w->line = nl;
			w->alloc = na;
		}
		w->line[w->len++] = data[i];
	}
	return 0;
}

/* Follows Docker's event stream with these filters (borrowed) until *stop,
 * the callback or a failure ends it. */
static int watch_stream(struct runtime *rt, json_t *filters, rt_event_cb cb, void *ud,
			const atomic_bool *stop, const char *what, struct terr *err)
{
	autofree char *fjson = filters ? json_dumps(filters, JSON_COMPACT) : NULL;
	autofree char *ef = fjson ? url_escape(fjson, false) : NULL;
	autofree char *path = NULL;
	struct watch_ctx *w = calloc(1, sizeof(*w));
	if (!w || !ef || asprintf(&path, "/events?filters=%s", ef) < 0) {
		path = NULL;
		free(w);
		return terr_set(err, ENOMEM, "%s: out of memory", what);
	}
	w->cb = cb;
	w->ud = ud;
	struct httpc_response resp;
	struct terr local;
	terr_clear(&local);
	int r = dk_do(rt, "GET", true, path, NULL, 0, watch_on_data, w, stop, &resp,
		      what, &local);
	long status = r == 0 ? resp.status : 0;
	if (r == 0)
		httpc_response_free(&resp);
	/* Relaxed, as httpc reads it: the flag carries no data. */
	if ((stop && atomic_load_explicit(stop, memory_order_relaxed)) || w->stopped_by_cb) {
		r = 0;   /* asked to stop: however the transfer ended is fine */
	} else if (r < 0) {
		if (err)
			*err = local;
	} else if (status != 200) {
		r = dk_fail_body(status, w->errbody, w->errlen, what, err);
	} else if (w->bad_line) {
		r = terr_set(err, EPROTO, "%s: Docker sent an oversized event line", what);
	} else {
		r = terr_set(err, EIO, "%s: Docker at %s closed the event stream", what,
			     rt->where);
	}
	free(w->line);
	free(w);
	return r;
}

static int docker_watch(struct runtime *rt, const char *label_key,
			const char *label_value, rt_event_cb cb, void *ud,
			const atomic_bool *stop, struct terr *err)
{
	autojson json_t *filters = json_pack("{s:[s], s:[s,s,s,s]}", "type", "container",
					     "event", "die", "oom", "start", "destroy");
	if (filters && label_key) {
		json_t *lf = label_filter(label_key, label_value);
		if (lf)
			json_object_update(filters, lf);
		json_decref(lf);
	}
	if (!filters)
		return terr_set(err, ENOMEM, "watch container events: out of memory");
	return watch_stream(rt, filters, cb, ud, stop, "watch container events", err);
}

/* A stream of its own: Docker ANDs the filters of different keys, so the
 * containers' label filter would drop every image event. The values of
 * one key are ORed: images' actions and networks' "destroy" (no image
 * event is called that, and no network event any of the others). */
static int docker_watch_images(struct runtime *rt, rt_event_cb cb, void *ud, const atomic_bool *stop,
			       struct terr *err)
{
	autojson json_t *filters = json_pack("{s:[s,s], s:[s,s,s,s,s,s,s]}", "type", "image", "network", "event",
					     "pull", "tag", "untag", "delete", "import", "load", "destroy");
	if (!filters)
		return terr_set(err, ENOMEM, "watch image events: out of memory");
	return watch_stream(rt, filters, cb, ud, stop, "watch image events", err);
}

/* ---- networks ------------------------------------------------------------ */

/* Whether network j carries every label of spec with the same value. */
static bool network_labels_match(json_t *j, const struct rt_network_spec *spec)
{
	json_t *labels = json_object_get(j, "Labels");
	for (size_t i = 0; i < spec->n_labels; i++) {
		const char *want = spec->labels[i].value ? spec->labels[i].value : "";
		if (strcmp(jstr(labels, spec->labels[i].key), want) != 0)
			return false;
	}
	return true;
}

/* Whether RFC 3339 stamp a (one daemon's "Created") is before b. Not as
 * text: Go trims the fraction's trailing zeros, so "...00.1234567Z" sorts
 * after "...00.12345678Z" though it is earlier. The seconds compare as
 * text (one daemon, one offset), then the fractions as nanoseconds. */
static long stamp_fraction_ns(const char *stamp)
{
	long ns = 0;
	int digits = 0;
	const char *p = strlen(stamp) > 19 ? stamp + 19 : "";
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (digits < 9) {
				ns = ns * 10 + (*p - '0');
				digits++;
			}
	for (; digits < 9; digits++)
		ns *= 10;
	return ns;
}

static bool stamp_before(const char *a, const char *b)
{
	int c = strncmp(a, b, 19);
	return c ? c < 0 : stamp_fraction_ns(a) < stamp_fraction_ns(b);
}

/* Two networks of one name (Docker's duplicate check is not atomic: two
 * agents on one Docker that make a user's network at the same moment
 * make one each). Creates by that name then fail at start as
 * "ambiguous", so no container joins a twin made after it started; one
 * that started before the twin existed is on the older. So the newest go
 * first until one is left, and one that cannot go (a container on it) is
 * passed over for the next; one already gone (the other agent removed
 * it) counts as gone. */
static int network_dedup(struct runtime *rt, const char *name, struct terr *err)
{
	autojson json_t *filters = json_pack("{s:{s:b}}", "name", name, 1);
	autofree char *fjson = filters ? json_dumps(filters, JSON_COMPACT) : NULL;
	autofree char *ef = fjson ? url_escape(fjson, false) : NULL;
	autofree char *path = NULL;
	if (!ef || asprintf(&path, "/networks?filters=%s", ef) < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "list networks: out of memory");
	}
	autojson json_t *arr = NULL;
	int r = dk_call_json(rt, "GET", path, NULL, "list networks", &arr, err);
	if (r < 0)
		return r;
	/* The name filter matches substrings: exact names only, newest first. */
	json_t *twins[64];
	size_t n_twins = 0, i;
	json_t *n;
	json_array_foreach(arr, i, n) {
		if (strcmp(jstr(n, "Name"), name) != 0 || n_twins == sizeof(twins) / sizeof(twins[0]))
			continue;
		size_t at = n_twins++;
		while (at > 0 && stamp_before(jstr(twins[at - 1], "Created"), jstr(n, "Created"))) {
			twins[at] = twins[at - 1];
			at--;
		}
		twins[at] = n;
	}
	size_t left = n_twins;
	for (i = 0; i < n_twins && left > 1; i++) {
		autofree char *del = NULL;
		struct httpc_response resp;
		struct terr ignored = {0};
		if (asprintf(&del, "/networks/%s", jstr(twins[i], "Id")) < 0) {
			del = NULL;
			continue;
		}
		if (dk_do(rt, "DELETE", true, del, NULL, DOCKER_TIMEOUT_MS, NULL, NULL, NULL, &resp, "remove network",
			  &ignored) < 0)
			continue;
		if (resp.status == 204 || resp.status == 200 || resp.status == 404)
			left--;
		httpc_response_free(&resp);
	}
	return 0;
}

/* GET /networks/<name> into *j (the caller frees). */
static int network_inspect(struct runtime *rt, const char *name, json_t **j, struct terr *err)
{
	autofree char *ename = url_escape(name, false);
	autofree char *path = NULL;
	if (!ename || asprintf(&path, "/networks/%s", ename) < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "inspect network: out of memory");
	}
	return dk_call_json(rt, "GET", path, NULL, "inspect network", j, err);
}

/* GET /networks/<name>: 0 and *found; a network of that name that is not
 * the spec's (other labels) is -EEXIST. */
static int network_check(struct runtime *rt, const struct rt_network_spec *spec, bool *found,
			 struct terr *err)
{
	autojson json_t *j = NULL;
	int r = network_inspect(rt, spec->name, &j, err);
	if (r < 0 && err && strstr(err->msg, "ambiguous") && network_dedup(rt, spec->name, err) == 0)
		r = network_inspect(rt, spec->name, &j, err);
	*found = r == 0;
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	/* Docker also matches an id prefix: the name must be the network's. */
	if (strcmp(jstr(j, "Name"), spec->name) != 0) {
		*found = false;
		return 0;
	}
	if (!network_labels_match(j, spec))
		return terr_set(err, EEXIST, "network %s exists but is not this installation's "
				"(its labels differ); remove or rename it", spec->name);
	return 0;
}

static int docker_network_ensure(struct runtime *rt, const struct rt_network_spec *spec,
				 struct terr *err)
{
	bool found = false;
	int r = network_check(rt, spec, &found, err);
	if (r < 0 || found)
		return r;
	autojson json_t *labels = json_object();
	/* Containers on one user's network reach each other (inter-container
	 * communication on); Docker's isolation chains keep every bridge
	 * network from every other. Not internal: sessions reach the outside
	 * through the host's NAT. CheckDuplicate: without it Docker 20.10
	 * makes a second network of the same name. */
	bool overlay = spec->driver && !strcmp(spec->driver, "overlay");
	autojson json_t *body = overlay
		/* Attachable: containers started by the engine itself (not
		 * swarm services) may join it, on every host of the swarm. */
		? json_pack("{s:s, s:s, s:b, s:b, s:b}", "Name", spec->name, "Driver", "overlay", "CheckDuplicate", 1,
			    "Internal", 0, "Attachable", 1)
		: json_pack("{s:s, s:s, s:b, s:b, s:{s:s}}", "Name", spec->name, "Driver", "bridge", "CheckDuplicate", 1,
			    "Internal", 0, "Options", "com.docker.network.bridge.enable_icc", "true");
	if (!labels || !body)
		return terr_set(err, ENOMEM, "create network: out of memory");
	for (size_t i = 0; i < spec->n_labels; i++)
		json_object_set_new(labels, spec->labels[i].key,
				    json_string(spec->labels[i].value ? spec->labels[i].value : ""));
	json_object_set(body, "Labels", labels);
	autojson json_t *j = NULL;
	r = dk_call_json(rt, "POST", "/networks/create", body, "create network", &j, err);
	/* A swarm answers a name another agent made a moment ago (a
	 * multi-node cluster session's containers start at once on several
	 * nodes) with a 500 that says so, not a 409. */
	if (r < 0 && r != -EEXIST && err && strstr(err->msg, "name conflicts with an existing object"))
		r = -EEXIST;
	if (r == -EEXIST) {
		/* Made meanwhile by another start (or another agent on this
		 * Docker): fine if it is ours. */
		r = network_check(rt, spec, &found, err);
		if (r == 0 && !found)
			r = terr_set(err, EEXIST, "create network %s: Docker says it exists but cannot show it",
				     spec->name);
	} else if (r == 0 && !overlay) {
		/* Two agents on one Docker making a user's network at the same
		 * moment can both pass its duplicate check (it is not atomic):
		 * the oldest of the twins is kept at once, while neither has a
		 * container, rather than when one is found ambiguous later with
		 * containers on both, when neither can go. */
		struct terr ignored = {0};
		network_dedup(rt, spec->name, &ignored);
	}
	return r;
}

static int docker_network_remove(struct runtime *rt, const char *name, struct terr *err)
{
	autofree char *ename = url_escape(name, false);
	autofree char *path = NULL;
	if (!ename || asprintf(&path, "/networks/%s", ename) < 0) {
		path = NULL;
		return terr_set(err, ENOMEM, "remove network: out of memory");
	}
	struct httpc_response resp;
	int r = dk_do(rt, "DELETE", true, path, NULL, DOCKER_TIMEOUT_MS, NULL, NULL, NULL,
		      &resp, "remove network", err);
	if (r < 0)
		return r;
	if (resp.status == 204 || resp.status == 200)
		r = 0;
	else {
		r = dk_fail(&resp, "remove network", err);
		/* "has active endpoints": running containers still use it; a
		 * swarm's overlay says "is in use by task" (and a 500). */
		if (resp.status == 403 || resp.status == 409 || (err && strstr(err->msg, "in use by"))) {
			if (err)
				err->code = EBUSY;
			r = -EBUSY;
		}
	}
	httpc_response_free(&resp);
	return r;
}

static int docker_network_list(struct runtime *rt, const char *label_key, const char *label_value, char ***names,
			       size_t *n, struct terr *err)
{
	*names = NULL;
	*n = 0;
	autofree char *path = label_filter_path("/networks?filters=", label_key, label_value);
	if (!path)
		return terr_set(err, ENOMEM, "list networks: out of memory");
	autojson json_t *arr = NULL;
	int r = dk_call_json(rt, "GET", path, NULL, "list networks", &arr, err);
	if (r < 0)
		return r;
	char **v = calloc(json_array_size(arr) + 1, sizeof(char *));
	if (!v)
		return terr_set(err, ENOMEM, "list networks: out of memory");
	size_t i, k = 0;
	json_t *x;
	json_array_foreach(arr, i, x) {
		if (*jstr(x, "Name") && (v[k] = strdup(jstr(x, "Name"))))
			k++;
	}
	*names = v;
	*n = k;
	return 0;
}

static int docker_network_bridge(struct runtime *rt, const char *name, char *buf, size_t n, struct terr *err)
{
	buf[0] = '\0';
	autojson json_t *j = NULL;
	int r = network_inspect(rt, name, &j, err);
	if (r < 0)
		return r;
	if (strcmp(jstr(j, "Driver"), "bridge") != 0)
		return 0;
	const char *own = jstr(json_object_get(j, "Options"), "com.docker.network.bridge.name");
	const char *id = jstr(j, "Id");
	if (own[0])
		snprintf(buf, n, "%s", own);
	else if (strlen(id) >= 12)
		snprintf(buf, n, "br-%.12s", id);
	else
		return terr_set(err, EPROTO, "inspect network %s: Docker gave no id", name);
	return 0;
}

/* POST /images/create?fromSrc=- with the tar as the body: Docker answers
 * 200 and a stream of JSON lines, an error among them when the tar is
 * refused. */
static int docker_image_import(struct runtime *rt, const char *ref, const struct rt_label *label, const void *tar,
			       size_t len, struct terr *err)
{
	const char *colon = strrchr(ref, ':');
	if (!colon || colon == ref || !colon[1] || strchr(colon, '/'))
		return terr_set(err, EINVAL, "import image: %s is not REPO:TAG", ref);
	autofree char *repo = strndup(ref, (size_t)(colon - ref));
	autofree char *erepo = repo ? url_escape(repo, false) : NULL;
	autofree char *etag = url_escape(colon + 1, false);
	/* The label as a Dockerfile line: `changes=LABEL key=value`. */
	autofree char *change = NULL;
	if (label && asprintf(&change, "LABEL %s=%s", label->key, label->value) < 0)
		change = NULL;
	autofree char *echange = change ? url_escape(change, false) : NULL;
	autofree char *url = NULL;
	if (!erepo || !etag || (label && !echange) ||
	    asprintf(&url, "%s/v%s/images/create?fromSrc=-&repo=%s&tag=%s%s%s", rt->base, rt->api, erepo, etag,
		     echange ? "&changes=" : "", echange ? echange : "") < 0) {
		url = NULL;
		return terr_set(err, ENOMEM, "import image: out of memory");
	}
	const char *headers[] = {"Content-Type: application/x-tar", NULL};
	struct httpc_request req = {
		.method = "POST",
		.url = url,
		.unix_socket = rt->socket,
		.headers = headers,
		.body = tar,
		.body_len = len,
		.timeout_ms = DOCKER_TIMEOUT_MS,
	};
	struct httpc_response resp;
	memset(&resp, 0, sizeof(resp));
	if (httpc_do(&req, &resp, err) < 0) {
		httpc_response_free(&resp);
		return terr_prefix(err, "import image %s: Docker at %s", ref, rt->where);
	}
	int r = 0;
	if (resp.status != 200) {
		r = dk_fail(&resp, "import image", err);
	} else if (resp.body) {
		/* A refusal comes as an error line in the 200 stream, as a
		 * pull's does: the same reader finds it. */
		struct docker_progress *prog = malloc(sizeof(*prog));
		if (!prog) {
			r = terr_set(err, ENOMEM, "import image: out of memory");
		} else {
			docker_progress_init(prog);
			docker_progress_feed(prog, resp.body, resp.len);
			docker_progress_finish(prog);
			if (prog->error[0])
				r = terr_set(err, EPROTO, "import image %s: %s", ref, prog->error);
			docker_progress_free(prog);
			free(prog);
		}
	}
	httpc_response_free(&resp);
	return r;
}

const struct runtime_ops runtime_docker_ops = {
	.name = "docker",
	.open = docker_open,
	.close = docker_close,
	.version = docker_version,
	.image_exists = docker_image_exists,
	.image_env = docker_image_env,
	.image_labels = docker_image_labels,
	.image_config = docker_image_config,
	.image_list = docker_image_list,
	.create = docker_create,
	.start = docker_start,
	.remove = docker_remove,
	.kill = docker_kill,
	.inspect = docker_inspect,
	.list = docker_list,
	.exec_stream = docker_exec_stream,
	.logs_stream = docker_logs_stream,
	.commit = docker_commit,
	.tag = docker_tag,
	.image_remove = docker_image_remove,
	.push = docker_push,
	.pull = docker_pull,
	.watch = docker_watch,
	.watch_images = docker_watch_images,
	.network_ensure = docker_network_ensure,
	.network_bridge = docker_network_bridge,
	.network_remove = docker_network_remove,
	.network_list = docker_network_list,
	.image_import = docker_image_import,
};
