#include "manager/validate.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/jsonutil.h"
#include "common/units.h"
#include "images/labels.h"
#include "manager/approutes.h"

/* Docker's reference grammar is parsed in one place (images/labels.c),
 * which the catalog also uses to put references in canonical form. */
int validate_image_ref(const char *ref, struct terr *err)
{
	return img_ref_parse(ref, NULL, err);
}

int validate_env(json_t *env, struct terr *err)
{
	if (!json_is_object(env))
		return terr_set(err, EINVAL, "env must be an object of NAME: \"value\" pairs");
	if (json_object_size(env) > VALIDATE_MAX_ENV)
		return terr_set(err, EINVAL, "env has more than %d variables", VALIDATE_MAX_ENV);
	const char *key;
	json_t *val;
	json_object_foreach(env, key, val) {
		if (!*key || !(isalpha((unsigned char)key[0]) || key[0] == '_'))
			return terr_set(err, EINVAL, "env name '%s' must start with a letter or '_'", key);
		for (const char *p = key; *p; p++)
			if (!(isalnum((unsigned char)*p) || *p == '_') || !isascii((unsigned char)*p))
				return terr_set(err, EINVAL, "env name '%s' may contain only letters, digits and '_'", key);
		if (strlen(key) > 255)
			return terr_set(err, EINVAL, "env name '%.32s...' is longer than 255 characters", key);
		if (!strncmp(key, "TESSERA_", 8))
			return terr_set(err, EINVAL, "env name '%s' is reserved (TESSERA_ variables are set by the platform)", key);
		if (!json_is_string(val))
			return terr_set(err, EINVAL, "env value of '%s' must be a string", key);
		if (json_string_length(val) > VALIDATE_MAX_ENV_VALUE)
			return terr_set(err, EINVAL, "env value of '%s' is longer than %d bytes", key, VALIDATE_MAX_ENV_VALUE);
		if (memchr(json_string_value(val), '\0', json_string_length(val)))
			return terr_set(err, EINVAL, "env value of '%s' contains a NUL byte", key);
	}
	return 0;
}

int validate_email(const char *email, char *out, size_t n, struct terr *err)
{
	size_t len = email ? strlen(email) : 0;
	const char *at = email ? strchr(email, '@') : NULL;
	if (len < 3 || len > 254 || len >= n || !at || at == email || !at[1] || strchr(at + 1, '@'))
		return terr_set(err, EINVAL, "email must look like name@example.org (at most 254 characters)");
	/* jansson's own check: an email becomes a JSON key and string. */
	json_t *as_json = json_stringn(email, len);
	json_decref(as_json);
	if (!as_json)
		return terr_set(err, EINVAL, "email must be valid UTF-8");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)email[i];
		if (c <= 0x20 || c == 0x7f || c == '"' || c == '<' || c == '>' || c == '\\' || c == ',')
			return terr_set(err, EINVAL, "email must not contain spaces, quotes, commas or control characters");
		out[i] = (char)tolower(c);
	}
	out[len] = '\0';
	return 0;
}

/* n digits of p as a number; -1 when one is not a digit. */
static int digits(const char *p, int n)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	return v;
}

int validate_time(const char *text, const char *what, int64_t *ms, struct terr *err)
{
	const char *p = text;
	int Y = digits(p, 4), M = -1, D = -1, h = -1, mi = -1, sec = 0, frac = 0;
	if (Y >= 0 && p[4] == '-' && (M = digits(p + 5, 2)) >= 0 && p[7] == '-' && (D = digits(p + 8, 2)) >= 0 &&
	    (p[10] == 'T' || p[10] == 't' || p[10] == ' ') && (h = digits(p + 11, 2)) >= 0 && p[13] == ':' &&
	    (mi = digits(p + 14, 2)) >= 0) {
		p += 16;
		if (*p == ':') {
			if ((sec = digits(p + 1, 2)) < 0)
				goto bad;
			p += 3;
			if (*p == '.') {
				int n = 0, scale = 100;
				for (p++; *p >= '0' && *p <= '9'; p++, n++) {
					frac += (*p - '0') * scale;
					scale /= 10;
				}
				if (n == 0 || n > 3)
					goto bad;
			}
		}
	} else {
		goto bad;
	}
	int off_min = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh = digits(p + 1, 2), om = oh >= 0 && p[3] == ':' ? digits(p + 4, 2) : -1;
		if (oh < 0 || om < 0 || oh > 23 || om > 59)
			goto bad;
		off_min = (oh * 60 + om) * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		goto bad;
	}
	if (*p || Y < 1970 || M < 1 || M > 12 || D < 1 || h > 23 || mi > 59 || sec > 59)
		goto bad;
	struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = mi, .tm_sec = sec};
	time_t t = timegm(&tm);
	/* timegm normalizes 31 Feb into March: the day must come back. */
	if (t == (time_t)-1 || tm.tm_mday != D || tm.tm_mon != M - 1)
		goto bad;
	*ms = ((int64_t)t - (int64_t)off_min * 60) * 1000 + frac;
	return 0;
bad:
	return terr_set(err, EINVAL, "%s must be a time like 2026-11-29T07:00:00Z (RFC 3339, with Z or an offset "
			"such as +01:00), not '%.40s'", what, text);
}

/* starts_at, batch_timeout and preopen_ports (docs/api.md, "POST
 * /v1/sessions"). */
static int launcher_fields(json_t *body, struct create_request *out, struct terr *err)
{
	const char *at = NULL;
	bool present;
	if (jsonutil_get_string(body, "starts_at", "starts_at", &at, NULL, err) < 0)
		return -EINVAL;
	if (at) {
		if (validate_time(at, "starts_at", &out->starts_at_ms, err) < 0)
			return -EINVAL;
		/* time(): this file links alone into the fuzz targets. */
		if (out->starts_at_ms - (int64_t)time(NULL) * 1000 > VALIDATE_MAX_STARTS_AHEAD_MS)
			return terr_set(err, EINVAL, "starts_at is more than a year ahead ('%.40s')", at);
	}
	if (jsonutil_get_int(body, "batch_timeout", "batch_timeout", &out->batch_timeout_s, &present, err) < 0)
		return -EINVAL;
	if (present && (out->batch_timeout_s < 1 || out->batch_timeout_s > VALIDATE_MAX_BATCH_TIMEOUT_S))
		return terr_set(err, EINVAL, "batch_timeout must be whole seconds from 1 to %lld (30 days), or absent "
				"for no limit", VALIDATE_MAX_BATCH_TIMEOUT_S);
	if (present && !out->batch)
		return terr_set(err, EINVAL, "batch_timeout is for batch sessions (\"type\": \"batch\"); an interactive "
				"session runs until it is ended or its owner's idle_timeout_s");
	json_t *ports = json_object_get(body, "preopen_ports");
	if (!ports || json_is_null(ports))
		return 0;
	if (!json_is_array(ports))
		return terr_set(err, EINVAL, "preopen_ports must be an array of port numbers, like [8080, 6006]");
	if (json_array_size(ports) > VALIDATE_MAX_PREOPEN)
		return terr_set(err, EINVAL, "preopen_ports: at most %d ports", VALIDATE_MAX_PREOPEN);
	size_t i, len = 0;
	json_t *x;
	int seen[VALIDATE_MAX_PREOPEN];
	json_array_foreach(ports, i, x) {
		json_int_t v = json_is_integer(x) ? json_integer_value(x) : 0;
		if (v < 1 || v > 65535 || v == APPROUTES_RUNNER_PORT)
			return terr_set(err, EINVAL, "preopen_ports[%zu] must be a port number from 1 to 65535, not %d "
					"(the runner's own)", i, APPROUTES_RUNNER_PORT);
		for (size_t j = 0; j < i; j++)
			if (seen[j] == (int)v)
				return terr_set(err, EINVAL, "preopen_ports: port %d is given twice", (int)v);
		seen[i] = (int)v;
		len += (size_t)snprintf(out->preopen_ports + len, sizeof(out->preopen_ports) - len, "%s%d",
					i ? "," : "", (int)v);
	}
	return 0;
}

int validate_create_request(json_t *body, struct create_request *out, struct terr *err)
{
	if (!json_is_object(body))
		return terr_set(err, EINVAL, "request body must be a JSON object");
	static const char *const known[] = {"image", "name", "count", "resources", "env", "startup_command", "type",
					    "root", "mounts", "project", "group", "priority", "preemptible",
					    "cluster_size", "cluster_mode", "starts_at", "batch_timeout", "preopen_ports",
					    NULL};
	const char *key;
	json_t *val;
	json_object_foreach(body, key, val) {
		int ok = 0;
		for (int i = 0; known[i]; i++)
			ok |= !strcmp(key, known[i]);
		if (!ok)
			return terr_set(err, EINVAL, "unknown field '%s' (known: image, name, count, resources, env, "
					"startup_command, type, root, mounts, project, group, priority, preemptible, "
					"cluster_size, cluster_mode, starts_at, batch_timeout, preopen_ports)", key);
	}
	memset(out, 0, sizeof(*out));
	out->count = 1;
	out->req.cpu_m = 1000;
	out->req.mem = 256LL << 20;
	bool present;
	if (jsonutil_get_string(body, "image", "image", &out->image, &present, err) < 0)
		return -EINVAL;
	if (!present)
		return terr_set(err, EINVAL, "image is required (e.g. \"image\": \"python:3.11\")");
	if (validate_image_ref(out->image, err) < 0)
		return -EINVAL;
	if (jsonutil_get_string(body, "name", "name", &out->name, &present, err) < 0)
		return -EINVAL;
	if (present && model_validate_name(out->name, "name", err) < 0)
		return -EINVAL;
	if (jsonutil_get_int(body, "count", "count", &out->count, NULL, err) < 0)
		return -EINVAL;
	if (out->count < 1 || out->count > VALIDATE_MAX_COUNT)
		return terr_set(err, EINVAL, "count must be 1 to %d (got %lld)", VALIDATE_MAX_COUNT, (long long)out->count);
	if (out->name && out->count > 1) {
		/* NAME-K must still be a valid name. */
		char longest[80];
		snprintf(longest, sizeof(longest), "%s-%lld", out->name, (long long)out->count);
		if (model_validate_name(longest, "name with its count suffix", err) < 0)
			return -EINVAL;
	}
	json_t *res = json_object_get(body, "resources");
	if (res && !json_is_null(res)) {
		if (!json_is_object(res))
			return terr_set(err, EINVAL, "resources must be an object like {\"cpu\": 1, \"mem\": \"1g\"}");
		json_object_foreach(res, key, val) {
			if (strcmp(key, "cpu") && strcmp(key, "mem") && strcmp(key, "fgpu"))
				return terr_set(err, EINVAL, "unknown resource '%s' (known: cpu, mem, fgpu)", key);
		}
		if (jsonutil_get_milli(res, "cpu", "resources.cpu", &out->req.cpu_m, NULL, err) < 0)
			return -EINVAL;
		if (jsonutil_get_size(res, "mem", "resources.mem", &out->req.mem, NULL, err) < 0)
			return -EINVAL;
		if (jsonutil_get_milli(res, "fgpu", "resources.fgpu", &out->req.fgpu_m, NULL, err) < 0)
			return -EINVAL;
	}
	if (out->req.cpu_m <= 0)
		return terr_set(err, EINVAL, "resources.cpu must be greater than 0");
	if (out->req.cpu_m < VALIDATE_MIN_CPU_M)
		return terr_set(err, EINVAL, "resources.cpu must be at least 0.01 (the kernel's smallest CPU quota)");
	if (out->req.cpu_m > VALIDATE_MAX_CPU_M)
		return terr_set(err, EINVAL, "resources.cpu must be at most 1024");
	if (out->req.mem < VALIDATE_MIN_MEM)
		return terr_set(err, EINVAL, "resources.mem must be at least 6 MiB");
	if (out->req.mem > VALIDATE_MAX_MEM)
		return terr_set(err, EINVAL, "resources.mem must be at most 16 TiB");
	json_t *env = json_object_get(body, "env");
	if (env && !json_is_null(env)) {
		if (validate_env(env, err) < 0)
			return -EINVAL;
		out->env = env;
	}
	if (jsonutil_get_string(body, "startup_command", "startup_command", &out->startup_command, &present, err) < 0)
		return -EINVAL;
	if (present && strlen(out->startup_command) > VALIDATE_MAX_COMMAND)
		return terr_set(err, EINVAL, "startup_command is longer than %d bytes", VALIDATE_MAX_COMMAND);
	const char *type = NULL;
	if (jsonutil_get_string(body, "type", "type", &type, &present, err) < 0)
		return -EINVAL;
	if (present && strcmp(type, STORE_TYPE_INTERACTIVE) && strcmp(type, STORE_TYPE_BATCH))
		return terr_set(err, EINVAL, "type must be \"interactive\" or \"batch\"");
	out->batch = present && !strcmp(type, STORE_TYPE_BATCH);
	/* A batch session is its command: it ends when the command does. */
	if (out->batch && (!out->startup_command || !*out->startup_command))
		return terr_set(err, EINVAL, "a batch session needs a startup_command (the command it runs to its end)");
	json_t *root = json_object_get(body, "root");
	if (root && !json_is_null(root) && !json_is_boolean(root))
		return terr_set(err, EINVAL, "root must be true or false");
	out->root = json_is_true(root);
	if (jsonutil_get_string(body, "project", "project", &out->project, NULL, err) < 0 ||
	    jsonutil_get_string(body, "group", "group", &out->group, NULL, err) < 0 ||
	    jsonutil_get_int(body, "priority", "priority", &out->priority, NULL, err) < 0)
		return -EINVAL;
	if (out->project && (!*out->project || strlen(out->project) >= STORE_NAME_MAX))
		return terr_set(err, EINVAL, "project must be a project's name");
	if (out->group && (!*out->group || strlen(out->group) >= STORE_NAME_MAX))
		return terr_set(err, EINVAL, "group must be a resource group's name");
	if (out->priority < 0 || out->priority > 100)
		return terr_set(err, EINVAL, "priority must be an integer from 0 to 100 (higher starts first)");
	json_t *pre = json_object_get(body, "preemptible");
	if (pre && !json_is_null(pre) && !json_is_boolean(pre))
		return terr_set(err, EINVAL, "preemptible must be true or false");
	if (json_is_boolean(pre))
		out->preemptible = json_is_true(pre) ? VALIDATE_PREEMPT_YES : VALIDATE_PREEMPT_NO;
	/* A cluster session (docs/user-guide.md, "Distributed training"):
	 * cluster_size containers, each with the resources above. */
	out->cluster_size = 1;
	out->cluster_mode = STORE_CLUSTER_SINGLE_NODE;
	if (jsonutil_get_int(body, "cluster_size", "cluster_size", &out->cluster_size, NULL, err) < 0 ||
	    jsonutil_get_string(body, "cluster_mode", "cluster_mode", &out->cluster_mode, NULL, err) < 0)
		return -EINVAL;
	if (out->cluster_size < 1 || out->cluster_size > VALIDATE_MAX_CLUSTER)
		return terr_set(err, EINVAL, "cluster_size must be 1 to %d containers (got %lld)", VALIDATE_MAX_CLUSTER,
				(long long)out->cluster_size);
	if (strcmp(out->cluster_mode, STORE_CLUSTER_SINGLE_NODE) && strcmp(out->cluster_mode, STORE_CLUSTER_MULTI_NODE))
		return terr_set(err, EINVAL, "cluster_mode must be \"single-node\" (every container on one node) or "
				"\"multi-node\" (across nodes)");
	if (out->cluster_size > 1 && out->preemptible == VALIDATE_PREEMPT_YES)
		return terr_set(err, EINVAL, "a cluster session (cluster_size above 1) cannot be preemptible");
	if (out->count * out->cluster_size > VALIDATE_MAX_COUNT)
		return terr_set(err, EINVAL, "count x cluster_size must be at most %d containers (got %lld)",
				VALIDATE_MAX_COUNT, (long long)(out->count * out->cluster_size));
	if (launcher_fields(body, out, err) < 0)
		return -EINVAL;
	json_t *mounts = json_object_get(body, "mounts");
	if (mounts && !json_is_null(mounts)) {
		if (!json_is_array(mounts))
			return terr_set(err, EINVAL, "mounts must be an array of \"NAME[:PATH][:ro]\" strings");
		if (json_array_size(mounts) > VALIDATE_MAX_MOUNTS)
			return terr_set(err, EINVAL, "mounts: at most %d folders", VALIDATE_MAX_MOUNTS);
		size_t i;
		json_t *x;
		json_array_foreach(mounts, i, x) {
			struct model_mount *mm = &out->mounts[i];
			if (!json_is_string(x))
				return terr_set(err, EINVAL, "mounts[%zu] must be a string \"NAME[:PATH][:ro]\"", i);
			if (model_parse_mount_spec(json_string_value(x), mm, err) < 0)
				return -EINVAL;
			if (!mm->target[0])
				model_default_mount_target(mm->name, mm->target, sizeof(mm->target));
			for (size_t j = 0; j < i; j++)
				if (!strcmp(out->mounts[j].target, mm->target))
					return terr_set(err, EINVAL, "mounts: two folders at %s", mm->target);
			out->n_mounts = i + 1;
		}
	}
	return 0;
}

int validate_policy_key(const char *key, char *out, size_t n, struct terr *err)
{
	if (!strcmp(key, "default")) {
		if (n <= strlen(key))
			return terr_set(err, ENAMETOOLONG, "policy key too long");
		strcpy(out, key);
		return 0;
	}
	if (validate_email(key, out, n, err) < 0)
		return terr_prefix(err, "policy.<email>: '%.80s' is neither 'default' nor a valid email", key);
	return 0;
}

/* ---------- GET /v1/sessions' query ---------- */

/* What a continue token is bound to: the filters (not the limit, which
 * may change from page to page), FNV-1a over their values. */
static uint32_t query_fingerprint(const struct session_query *q)
{
	uint32_t h = 2166136261u;
	char buf[400];
	int n = q->project[0] ? snprintf(buf, sizeof(buf), "%d|%u|%s|%s", q->all, q->status_mask, q->owner_email,
					  q->project)
			      : snprintf(buf, sizeof(buf), "%d|%u|%s", q->all, q->status_mask, q->owner_email);
	/* Newest first only adds to the text: the tokens of oldest-first
	 * pages stay what they were. */
	if (q->newest && n > 0 && n < (int)sizeof(buf) - 2) {
		buf[n++] = '|';
		buf[n++] = 'n';
	}
	for (int i = 0; i < n && i < (int)sizeof(buf); i++) {
		h ^= (unsigned char)buf[i];
		h *= 16777619u;
	}
	return h;
}

void validate_session_token(const struct session_query *q, int64_t last_seq, char out[VALIDATE_TOKEN_MAX])
{
	/* "s1" the format's version, the position, the filters' fingerprint. */
	snprintf(out, VALIDATE_TOKEN_MAX, "s1.%llx.%08x", (unsigned long long)last_seq, query_fingerprint(q));
}

static int parse_status_list(const char *text, unsigned *mask, struct terr *err)
{
	char known[256] = "";
	for (int st = 0; st < SS__COUNT; st++) {
		if (st)
			strcat(known, ", ");
		strcat(known, session_status_name((enum session_status)st));
	}
	*mask = 0;
	const char *p = text;
	for (;;) {
		size_t len = strcspn(p, ",");
		char name[32];
		if (len == 0 || len >= sizeof(name))
			return terr_set(err, EINVAL, "status: give one status or a comma list of them (known: %s)", known);
		for (size_t i = 0; i < len; i++)
			name[i] = (char)toupper((unsigned char)p[i]);
		name[len] = '\0';
		int st = session_status_parse(name);
		if (st < 0)
			return terr_set(err, EINVAL, "status: unknown status '%.*s' (known: %s)", (int)len, p, known);
		*mask |= 1u << st;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

int validate_session_query(const struct session_query_in *in, struct session_query *out, struct terr *err)
{
	memset(out, 0, sizeof(*out));
	if (in->all) {
		if (!strcmp(in->all, "1") || !strcmp(in->all, "true"))
			out->all = true;
		else if (strcmp(in->all, "0") && strcmp(in->all, "false"))
			return terr_set(err, EINVAL, "all must be 1 or 0 (true or false)");
	}
	if (in->status && parse_status_list(in->status, &out->status_mask, err) < 0)
		return -EINVAL;
	if (in->owner && validate_email(in->owner, out->owner_email, sizeof(out->owner_email), err) < 0)
		return terr_prefix(err, "owner");
	if (in->project) {
		if (!*in->project || strlen(in->project) >= sizeof(out->project))
			return terr_set(err, EINVAL, "project must be a project's name");
		strcpy(out->project, in->project);
	}
	if (in->limit) {
		/* Digits only: strtol would take " 5" and "+5". */
		uint64_t v;
		if (units_parse_whole(in->limit, VALIDATE_MAX_LIST_LIMIT, &v) < 0 || v < 1)
			return terr_set(err, EINVAL, "limit must be a whole number from 1 to %d (got '%.40s')",
					VALIDATE_MAX_LIST_LIMIT, in->limit);
		out->limit = (long)v;
	}
	if (in->order) {
		if (!strcmp(in->order, "newest"))
			out->newest = true;
		else if (strcmp(in->order, "oldest"))
			return terr_set(err, EINVAL, "order must be oldest or newest (got '%.40s')", in->order);
	}
	if (in->cont) {
		unsigned long long seq;
		unsigned fp;
		int used = 0;
		if (strlen(in->cont) >= VALIDATE_TOKEN_MAX ||
		    sscanf(in->cont, "s1.%llx.%8x%n", &seq, &fp, &used) != 2 || in->cont[used] || seq > INT64_MAX)
			return terr_set(err, EINVAL, "continue: not a token this server gave; "
					"use the \"continue\" value of the previous page as it is");
		/* Only the exact text this server makes (sscanf would take
		 * spaces, signs and 0x too). */
		char again[VALIDATE_TOKEN_MAX];
		snprintf(again, sizeof(again), "s1.%llx.%08x", seq, fp);
		if (strcmp(again, in->cont))
			return terr_set(err, EINVAL, "continue: not a token this server gave; "
					"use the \"continue\" value of the previous page as it is");
		if (fp != query_fingerprint(out))
			return terr_set(err, EINVAL, "continue: the token belongs to a query with other filters "
					"(status, owner, project, all, order); repeat them as they were, or start again without continue");
		out->after_seq = (int64_t)seq;
	}
	return 0;
}
