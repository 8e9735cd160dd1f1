#include "runner/appdef.h"

#include <ctype.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool appdef_valid_name(const char *s, size_t len)
{
	return apphello_valid_name(s, len);
}

const char *appdef_proto_name(enum app_proto p)
{
	return p == APP_HTTP ? "http" : p == APP_TCP ? "tcp" : "preopen";
}

static size_t trim(const char **s, size_t len)
{
	while (len && isspace((unsigned char)**s)) {
		(*s)++;
		len--;
	}
	while (len && isspace((unsigned char)(*s)[len - 1]))
		len--;
	return len;
}

/* One `name:proto:port` entry of len bytes at e. */
static int parse_entry(const char *e, size_t len, struct app_decl *d, struct terr *err)
{
	const char *c1 = memchr(e, ':', len);
	const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - e)) : NULL;
	if (!c2)
		return terr_set(err, EINVAL, "\"%.*s\" is not name:protocol:port", (int)len, e);
	size_t nl = (size_t)(c1 - e), pl = (size_t)(c2 - c1 - 1), ql = len - (size_t)(c2 + 1 - e);
	if (!appdef_valid_name(e, nl))
		return terr_set(err, EINVAL, "\"%.*s\": the name must be 1 to %d of A-Z a-z 0-9 _ . - "
				"(not starting with . or -)", (int)len, e, APP_NAME_MAX - 1);
	if (nl == 8 && !memcmp(e, "terminal", 8))
		return terr_set(err, EINVAL, "\"%.*s\": terminal is the runner's own app", (int)len, e);
	memcpy(d->name, e, nl);
	d->name[nl] = '\0';
	const char *p = c1 + 1;
	if (pl == 4 && !memcmp(p, "http", 4))
		d->proto = APP_HTTP;
	else if (pl == 3 && !memcmp(p, "tcp", 3))
		d->proto = APP_TCP;
	else if (pl == 7 && !memcmp(p, "preopen", 7))
		d->proto = APP_PREOPEN;
	else
		return terr_set(err, EINVAL, "\"%.*s\": the protocol must be http, tcp or preopen",
				(int)len, e);
	long port = 0;
	const char *q = c2 + 1;
	for (size_t i = 0; i < ql; i++) {
		if (!isdigit((unsigned char)q[i]) || port > 65535)
			return terr_set(err, EINVAL, "\"%.*s\": the port must be a number from 1 to 65535",
					(int)len, e);
		port = port * 10 + (q[i] - '0');
	}
	if (ql == 0 || port < 1 || port > 65535)
		return terr_set(err, EINVAL, "\"%.*s\": the port must be a number from 1 to 65535",
				(int)len, e);
	if (port == APP_RUNNER_PORT)
		return terr_set(err, EINVAL, "\"%.*s\": port %d is the runner's own", (int)len, e,
				APP_RUNNER_PORT);
	d->port = (int)port;
	return 0;
}

int appdef_parse_spec(const char *spec, struct app_decl *out, size_t max, size_t *n,
		      struct terr *err)
{
	*n = 0;
	const char *s = spec ? spec : "";
	for (;;) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		const char *e = s;
		len = trim(&e, len);
		if (len == 0) {
			/* An empty spec is no apps; an empty entry among others is a typo. */
			if (comma || *n)
				return terr_set(err, EINVAL, "an empty entry in the app list \"%s\"", spec);
		} else {
			if (*n >= max)
				return terr_set(err, EINVAL, "more than %zu apps", max);
			struct app_decl d;
			int rc = parse_entry(e, len, &d, err);
			if (rc < 0)
				return rc;
			for (size_t i = 0; i < *n; i++) {
				if (!strcmp(out[i].name, d.name))
					return terr_set(err, EINVAL, "app %s is declared twice", d.name);
				if (out[i].port == d.port)
					return terr_set(err, EINVAL, "apps %s and %s both use port %d",
							out[i].name, d.name, d.port);
			}
			out[(*n)++] = d;
		}
		if (!comma)
			return 0;
		s = comma + 1;
	}
}

int appdef_subst(const char *s, int port, char **out, struct terr *err)
{
	static const char ph[] = "{ports[0]}";
	char num[16];
	int numlen = snprintf(num, sizeof(num), "%d", port);
	size_t cap = strlen(s) + 1, count = 0;
	for (const char *p = s; (p = strchr(p, '{')); p++) {
		if (!strncmp(p, ph, sizeof(ph) - 1)) {
			count++;
			continue;
		}
		const char *close = strchr(p, '}');
		return terr_set(err, EINVAL, "\"%s\": the placeholder %.*s is not supported (only %s)", s,
				close ? (int)(close - p + 1) : (int)strlen(p), p, ph);
	}
	cap += count * (size_t)numlen;
	char *r = malloc(cap), *w = r;
	if (!r)
		return terr_set(err, ENOMEM, "out of memory");
	for (const char *p = s; *p;) {
		if (!strncmp(p, ph, sizeof(ph) - 1)) {
			memcpy(w, num, (size_t)numlen);
			w += numlen;
			p += sizeof(ph) - 1;
		} else {
			*w++ = *p++;
		}
	}
	*w = '\0';
	*out = r;
	return 0;
}

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

void appdef_service_free(struct app_service *s)
{
	free_strv(s->argv);
	free_strv(s->env);
	for (size_t i = 0; i < s->n_prestart; i++) {
		free(s->prestart[i].filename);
		free(s->prestart[i].body);
		free_strv(s->prestart[i].argv);
	}
	free(s->prestart);
	memset(s, 0, sizeof(*s));
}

/* A JSON array of strings (what: for messages) into a NULL-terminated
 * vector with placeholders substituted. */
static int strv_from_json(json_t *a, const char *what, int port, char ***out, struct terr *err)
{
	if (!json_is_array(a) || json_array_size(a) == 0)
		return terr_set(err, EINVAL, "%s must be a non-empty array of strings", what);
	if (json_array_size(a) > 256)
		return terr_set(err, EINVAL, "%s has more than 256 words", what);
	size_t n = json_array_size(a);
	char **v = calloc(n + 1, sizeof(*v));
	if (!v)
		return terr_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const char *s = json_string_value(json_array_get(a, i));
		int rc = s ? appdef_subst(s, port, &v[i], err)
			   : terr_set(err, EINVAL, "%s[%zu] is not a string", what, i);
		if (rc < 0) {
			free_strv(v);
			return rc;
		}
	}
	*out = v;
	return 0;
}

static int parse_action(json_t *a, size_t i, int port, struct app_action *act, struct terr *err)
{
	const char *kind = json_string_value(json_object_get(a, "action"));
	json_t *args = json_object_get(a, "args");
	if (!json_is_object(args))
		args = a;   /* the arguments beside "action" */
	if (!kind)
		return terr_set(err, EINVAL, "prestart[%zu] has no \"action\"", i);
	if (!strcmp(kind, "run_command")) {
		act->kind = APP_ACT_RUN;
		char what[64];
		snprintf(what, sizeof(what), "prestart[%zu].command", i);
		return strv_from_json(json_object_get(args, "command"), what, port, &act->argv, err);
	}
	if (strcmp(kind, "write_file") != 0)
		return terr_set(err, EINVAL, "prestart[%zu]: the action \"%s\" is not supported "
				"(write_file and run_command are)", i, kind);
	act->kind = APP_ACT_WRITE_FILE;
	act->mode = 0644;
	const char *fn = json_string_value(json_object_get(args, "filename"));
	if (!fn || !*fn)
		return terr_set(err, EINVAL, "prestart[%zu]: write_file needs a \"filename\"", i);
	int rc = appdef_subst(fn, port, &act->filename, err);
	if (rc < 0)
		return rc;
	json_t *body = json_object_get(args, "body");
	/* Joined first, then substituted as one string. */
	size_t total = 1;
	if (json_is_string(body)) {
		total += json_string_length(body);
	} else if (json_is_array(body)) {
		for (size_t k = 0; k < json_array_size(body); k++) {
			json_t *s = json_array_get(body, k);
			if (!json_is_string(s))
				return terr_set(err, EINVAL, "prestart[%zu].body[%zu] is not a string", i, k);
			total += json_string_length(s);
		}
	} else if (body) {
		return terr_set(err, EINVAL, "prestart[%zu].body must be a string or an array of strings", i);
	}
	char *joined = calloc(1, total);
	if (!joined)
		return terr_set(err, ENOMEM, "out of memory");
	if (json_is_string(body)) {
		strcpy(joined, json_string_value(body));
	} else if (json_is_array(body)) {
		for (size_t k = 0; k < json_array_size(body); k++)
			strcat(joined, json_string_value(json_array_get(body, k)));
	}
	rc = appdef_subst(joined, port, &act->body, err);
	free(joined);
	if (rc < 0)
		return rc;
	json_t *mode = json_object_get(args, "mode");
	if (json_is_integer(mode)) {
		json_int_t m = json_integer_value(mode);
		if (m < 0 || m > 07777)
			return terr_set(err, EINVAL, "prestart[%zu].mode must be a file mode", i);
		act->mode = (unsigned)m;
	} else if (json_is_string(mode)) {
		char *end;
		unsigned long m = strtoul(json_string_value(mode), &end, 8);
		if (*end || !*json_string_value(mode) || m > 07777)
			return terr_set(err, EINVAL, "prestart[%zu].mode must be an octal mode like \"0755\"", i);
		act->mode = (unsigned)m;
	} else if (mode) {
		return terr_set(err, EINVAL, "prestart[%zu].mode must be an octal mode like \"0755\"", i);
	}
	act->append = json_is_true(json_object_get(args, "append"));
	return 0;
}

static int parse_service(json_t *root, int port, struct app_service *out, struct terr *err)
{
	if (!json_is_object(root))
		return terr_set(err, EINVAL, "not a JSON object");
	int rc = strv_from_json(json_object_get(root, "command"), "command", port, &out->argv, err);
	if (rc < 0)
		return rc;
	json_t *env = json_object_get(root, "env");
	if (env && !json_is_object(env))
		return terr_set(err, EINVAL, "env must be an object of strings");
	size_t ne = env ? json_object_size(env) : 0;
	out->env = calloc(ne + 1, sizeof(*out->env));
	if (!out->env)
		return terr_set(err, ENOMEM, "out of memory");
	size_t k = 0;
	const char *key;
	json_t *val;
	json_object_foreach(env, key, val) {
		if (!json_is_string(val))
			return terr_set(err, EINVAL, "env.%s is not a string", key);
		if (!*key || strchr(key, '='))
			return terr_set(err, EINVAL, "env has a bad name \"%s\"", key);
		char *v;
		if ((rc = appdef_subst(json_string_value(val), port, &v, err)) < 0)
			return rc;
		size_t len = strlen(key) + strlen(v) + 2;
		out->env[k] = malloc(len);
		if (!out->env[k]) {
			free(v);
			return terr_set(err, ENOMEM, "out of memory");
		}
		snprintf(out->env[k++], len, "%s=%s", key, v);
		free(v);
	}
	json_t *pre = json_object_get(root, "prestart");
	if (pre && !json_is_array(pre))
		return terr_set(err, EINVAL, "prestart must be an array of actions");
	size_t np = pre ? json_array_size(pre) : 0;
	if (np > 64)
		return terr_set(err, EINVAL, "prestart has more than 64 actions");
	if (np) {
		out->prestart = calloc(np, sizeof(*out->prestart));
		if (!out->prestart)
			return terr_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < np; i++) {
		json_t *a = json_array_get(pre, i);
		if (!json_is_object(a))
			return terr_set(err, EINVAL, "prestart[%zu] is not an object", i);
		out->n_prestart = i + 1;
		if ((rc = parse_action(a, i, port, &out->prestart[i], err)) < 0)
			return rc;
	}
	return 0;
}

int appdef_parse_service(const char *json, size_t len, int port, struct app_service *out,
			 struct terr *err)
{
	memset(out, 0, sizeof(*out));
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return terr_set(err, EINVAL, "not valid JSON (line %d: %s)", je.line, je.text);
	int rc = parse_service(root, port, out, err);
	json_decref(root);
	if (rc < 0)
		appdef_service_free(out);
	return rc;
}

int appdef_builtin_jupyter(bool have_jupyter, int port, struct app_service *out, struct terr *err)
{
	char portarg[32];
	snprintf(portarg, sizeof(portarg), "--port=%d", port);
	const char *tail[] = {
		"--no-browser", "--ip=127.0.0.1", portarg, "--NotebookApp.token=",
		"--NotebookApp.password=", "--NotebookApp.allow_remote_access=True",
		"--NotebookApp.open_browser=False",
	};
	const char *head_j[] = {"jupyter", "notebook"};
	const char *head_p[] = {"python3", "-m", "notebook"};
	const char **head = have_jupyter ? head_j : head_p;
	size_t nh = have_jupyter ? 2 : 3, nt = sizeof(tail) / sizeof(tail[0]);
	memset(out, 0, sizeof(*out));
	out->argv = calloc(nh + nt + 1, sizeof(char *));
	out->env = calloc(1, sizeof(char *));
	if (!out->argv || !out->env)
		goto oom;
	for (size_t i = 0; i < nh + nt; i++)
		if (!(out->argv[i] = strdup(i < nh ? head[i] : tail[i - nh])))
			goto oom;
	return 0;
oom:
	appdef_service_free(out);
	return terr_set(err, ENOMEM, "out of memory");
}

int appdef_builtin_sshd(const char *sshd, const char *config, int port, struct app_service *out, struct terr *err)
{
	char portarg[16];
	snprintf(portarg, sizeof(portarg), "%d", port);
	/* -D: a child of the runner, supervised as any app; -e: its errors
	 * in the session's log; -p: the declared port over the file's. */
	const char *argv[] = {sshd, "-D", "-e", "-f", config, "-p", portarg};
	size_t n = sizeof(argv) / sizeof(argv[0]);
	memset(out, 0, sizeof(*out));
	out->argv = calloc(n + 1, sizeof(char *));
	out->env = calloc(1, sizeof(char *));
	if (!out->argv || !out->env)
		goto oom;
	for (size_t i = 0; i < n; i++)
		if (!(out->argv[i] = strdup(argv[i])))
			goto oom;
	return 0;
oom:
	appdef_service_free(out);
	return terr_set(err, ENOMEM, "out of memory");
}
