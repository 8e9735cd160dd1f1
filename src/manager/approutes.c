/* Session apps' routes and tokens (approutes.h). */
#include "manager/approutes.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sign.h"
#include "common/util.h"

/* ---------- configuration ---------- */

static int parse_port(const char *s, const char *end, int *out)
{
	if (s == end || end - s > 5)
		return -1;
	int v = 0;
	for (const char *p = s; p < end; p++) {
		if (!isdigit((unsigned char)*p))
			return -1;
		v = v * 10 + (*p - '0');
	}
	*out = v;
	return 0;
}

int approutes_check_domain(const char *s, struct terr *err)
{
	size_t n = s ? strlen(s) : 0;
	bool ok = n > 0 && n <= 253;
	size_t label = 0;
	for (size_t i = 0; ok && i <= n; i++) {
		char c = s[i];
		if (c == '.' || c == '\0') {
			ok = label > 0 && label <= 63 && s[i - 1] != '-';
			label = 0;
		} else if (isalnum((unsigned char)c) || (c == '-' && label > 0)) {
			label++;
		} else {
			ok = false;
		}
	}
	if (!ok)
		return terr_set(err, EINVAL, "domain must be a DNS name such as example.org (labels of letters, "
				"digits and '-', dot-separated), not '%.80s'", s ? s : "");
	return 0;
}

int approutes_parse_base(const char *s, char *scheme, size_t scheme_n, char *host, size_t host_n, int *port,
			 struct terr *err)
{
	const char *rest = NULL;
	if (s && !strncmp(s, "http://", 7)) {
		util_strlcpy(scheme, "http", scheme_n);
		rest = s + 7;
	} else if (s && !strncmp(s, "https://", 8)) {
		util_strlcpy(scheme, "https", scheme_n);
		rest = s + 8;
	}
	if (!rest)
		return terr_set(err, EINVAL, "the proxy's URL must start with http:// or https:// (e.g. "
				"http://127.0.0.1), not '%.80s'", s ? s : "");
	size_t len = strlen(rest);
	if (len && rest[len - 1] == '/')
		len--;
	const char *colon = NULL;
	/* [v6]:port or host:port */
	const char *hend = rest + len;
	if (rest[0] == '[') {
		const char *close = memchr(rest, ']', len);
		if (!close)
			goto bad;
		hend = close + 1;
		if (hend < rest + len && *hend == ':')
			colon = hend;
		else if (hend != rest + len)
			goto bad;
	} else {
		colon = memchr(rest, ':', len);
		if (colon)
			hend = colon;
	}
	*port = 0;
	if (colon && (parse_port(colon + 1, rest + len, port) < 0 || *port < 1 || *port > 65535))
		goto bad;
	size_t hl = (size_t)(hend - rest);
	if (hl == 0 || hl >= host_n)
		goto bad;
	for (size_t i = 0; i < hl; i++)
		if (!isalnum((unsigned char)rest[i]) && !strchr(".-[]:", rest[i]))
			goto bad;
	memcpy(host, rest, hl);
	host[hl] = '\0';
	return 0;
bad:
	return terr_set(err, EINVAL, "the proxy's URL must be http://HOST or http://HOST:PORT with no path, "
			"not '%.80s'", s);
}

/* ---------- routes ---------- */

void approutes_init(struct approutes *r, int lo, int hi, const char *domain)
{
	memset(r, 0, sizeof(*r));
	r->lo = lo;
	r->hi = hi;
	util_strlcpy(r->domain, domain ? domain : "", sizeof(r->domain));
}

void approutes_free(struct approutes *r)
{
	free(r->r);
	free(r->t);
	r->r = NULL;
	r->t = NULL;
	r->n = r->cap = r->n_tokens = r->cap_tokens = 0;
}

int approutes_parse_app(const char *s, int *port, char app[APPROUTES_APP_MAX], char target[APPROUTES_TARGET_MAX],
			struct terr *err)
{
	size_t n = s ? strlen(s) : 0;
	bool digits = n > 0;
	for (size_t i = 0; i < n; i++)
		digits &= isdigit((unsigned char)s[i]) != 0;
	*port = 0;
	if (digits) {
		long v = n <= 6 ? strtol(s, NULL, 10) : 0;
		if (v < 1 || v > 65535 || v == APPROUTES_RUNNER_PORT)
			return terr_set(err, EINVAL, "port must be 1 to 65535 and not %d (the runner's own), not %.20s",
					APPROUTES_RUNNER_PORT, s);
		*port = (int)v;
		snprintf(app, APPROUTES_APP_MAX, "port-%ld", v);
		snprintf(target, APPROUTES_TARGET_MAX, "port:%ld", v);
		return 0;
	}
	bool ok = n > 0 && n <= 64;
	for (size_t i = 0; ok && i < n; i++)
		ok = isalnum((unsigned char)s[i]) || strchr("_.-", s[i]);
	if (!ok)
		return terr_set(err, EINVAL, "app must be an app's name (letters, digits, '_', '.', '-'; 64 at most) "
				"or a port number, not '%.80s'", s ? s : "");
	util_strlcpy(app, s, APPROUTES_APP_MAX);
	snprintf(target, APPROUTES_TARGET_MAX, "app:%s", s);
	return 0;
}

const struct approute *approutes_find(const struct approutes *r, const char *session_id, const char *target)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->r[i].session_id, session_id) && !strcmp(r->r[i].target, target))
			return &r->r[i];
	return NULL;
}

static bool port_taken(const struct approutes *r, int port)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->r[i].port == port)
			return true;
	return false;
}

int approutes_open(struct approutes *r, const char *session_id, const char *app, const char *target,
		   const struct approute **out, struct terr *err)
{
	const struct approute *have = approutes_find(r, session_id, target);
	if (have) {
		*out = have;
		return 0;
	}
	struct approute nr = {0};
	util_strlcpy(nr.session_id, session_id, sizeof(nr.session_id));
	util_strlcpy(nr.app, app, sizeof(nr.app));
	util_strlcpy(nr.target, target, sizeof(nr.target));
	if (r->domain[0]) {
		/* A DNS label: the app's name in lower case, '_' and '.' as '-'
		 * (a '.' would make a deeper name the wildcard does not cover). */
		char label[APPROUTES_APP_MAX];
		size_t i;
		for (i = 0; app[i] && i < sizeof(label) - 1; i++)
			label[i] = app[i] == '_' || app[i] == '.' ? '-' : (char)tolower((unsigned char)app[i]);
		label[i] = '\0';
		snprintf(nr.host, sizeof(nr.host), "%s.%.8s.apps.%s", label, session_id, r->domain);
	} else {
		for (int p = r->lo; p <= r->hi && !nr.port; p++)
			if (!port_taken(r, p))
				nr.port = p;
		if (!nr.port)
			return terr_set(err, EBUSY, "all %d app ports are in use; close sessions or widen wsproxy "
					"port range", r->hi - r->lo + 1);
	}
	if (r->n == r->cap) {
		size_t ncap = r->cap ? r->cap * 2 : 16;
		struct approute *g = realloc(r->r, ncap * sizeof(*g));
		if (!g)
			return terr_set(err, ENOMEM, "out of memory");
		r->r = g;
		r->cap = ncap;
	}
	r->r[r->n] = nr;
	*out = &r->r[r->n++];
	r->generation++;
	return 0;
}

size_t approutes_drop_session(struct approutes *r, const char *session_id)
{
	size_t removed = 0;
	for (size_t i = 0; i < r->n;) {
		if (!strcmp(r->r[i].session_id, session_id)) {
			r->r[i] = r->r[--r->n];
			removed++;
		} else {
			i++;
		}
	}
	/* Its tokens are kept, marked used, so that a late click says why. */
	for (size_t i = 0; i < r->n_tokens; i++)
		if (!strcmp(r->t[i].session_id, session_id))
			r->t[i].used = true;
	if (removed)
		r->generation++;
	return removed;
}

/* ---------- tokens ---------- */

static void tokens_prune(struct approutes *r, int64_t now_ms)
{
	for (size_t i = 0; i < r->n_tokens;) {
		if (now_ms - r->t[i].made_ms > APPROUTES_TOKEN_KEEP_MS || now_ms < r->t[i].made_ms - 60000)
			r->t[i] = r->t[--r->n_tokens];
		else
			i++;
	}
}

int approutes_token_issue(struct approutes *r, const char *user_id, const char *session_id, const char *app,
			  const char *target, int64_t now_ms, char token[APPROUTES_TOKEN_HEX + 1],
			  struct terr *err)
{
	tokens_prune(r, now_ms);
	if (r->n_tokens >= APPROUTES_MAX_TOKENS)
		return terr_set(err, EAGAIN, "too many app links were made in the last minutes; try again shortly");
	if (r->n_tokens == r->cap_tokens) {
		size_t ncap = r->cap_tokens ? r->cap_tokens * 2 : 16;
		struct apptoken *g = realloc(r->t, ncap * sizeof(*g));
		if (!g)
			return terr_set(err, ENOMEM, "out of memory");
		r->t = g;
		r->cap_tokens = ncap;
	}
	int rc = sign_random_hex(APPROUTES_TOKEN_HEX / 2, token, APPROUTES_TOKEN_HEX + 1, err);
	if (rc < 0)
		return rc;
	struct apptoken *t = &r->t[r->n_tokens++];
	memset(t, 0, sizeof(*t));
	sign_sha256_hex(token, strlen(token), t->hash);
	util_strlcpy(t->user_id, user_id, sizeof(t->user_id));
	util_strlcpy(t->session_id, session_id, sizeof(t->session_id));
	util_strlcpy(t->app, app, sizeof(t->app));
	util_strlcpy(t->target, target, sizeof(t->target));
	t->made_ms = now_ms;
	t->expires_ms = now_ms + APPROUTES_TOKEN_TTL_MS;
	return 0;
}

int approutes_token_redeem(struct approutes *r, const char *token, int64_t now_ms, struct apptoken *out,
			   struct terr *err)
{
	tokens_prune(r, now_ms);
	size_t n = token ? strlen(token) : 0;
	bool hex = n == APPROUTES_TOKEN_HEX;
	for (size_t i = 0; hex && i < n; i++)
		hex = isxdigit((unsigned char)token[i]) != 0;
	if (hex) {
		char hash[APPROUTES_TOKEN_HEX + 1];
		sign_sha256_hex(token, n, hash);
		for (size_t i = 0; i < r->n_tokens; i++) {
			struct apptoken *t = &r->t[i];
			if (!sign_equal(t->hash, hash))
				continue;
			if (t->used)
				return terr_set(err, EACCES, "this link was already used; open the app again for a new one");
			if (now_ms >= t->expires_ms)
				return terr_set(err, EACCES, "this link expired (links are valid %d s); open the app "
						"again for a new one", APPROUTES_TOKEN_TTL_MS / 1000);
			t->used = true;
			*out = *t;
			return 0;
		}
	}
	return terr_set(err, EACCES, "this link is not valid; open the app again for a new one");
}

/* ---------- across restarts ---------- */

json_t *approutes_to_json(const struct approutes *r)
{
	json_t *routes = json_array(), *tokens = json_array();
	for (size_t i = 0; i < r->n; i++) {
		const struct approute *a = &r->r[i];
		json_t *o = json_pack("{s:s,s:s,s:s}", "session_id", a->session_id, "app", a->app, "target", a->target);
		if (a->port)
			json_object_set_new(o, "port", json_integer(a->port));
		else
			json_object_set_new(o, "host", json_string(a->host));
		json_array_append_new(routes, o);
	}
	for (size_t i = 0; i < r->n_tokens; i++) {
		const struct apptoken *t = &r->t[i];
		json_array_append_new(tokens, json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:b}", "hash", t->hash, "user_id",
							t->user_id, "session_id", t->session_id, "app", t->app,
							"target", t->target, "made_ms", (json_int_t)t->made_ms,
							"expires_ms", (json_int_t)t->expires_ms, "used", t->used));
	}
	return json_pack("{s:o,s:o}", "routes", routes, "tokens", tokens);
}

/* doc's string key into dst (n bytes): false when missing, empty or too
 * long. */
static bool take_str(json_t *o, const char *key, char *dst, size_t n)
{
	const char *v = json_string_value(json_object_get(o, key));
	return v && *v && util_strlcpy(dst, v, n) == 0;
}

size_t approutes_load_json(struct approutes *r, json_t *doc, int64_t now_ms)
{
	size_t added = 0, i;
	json_t *o;
	json_array_foreach(json_object_get(doc, "routes"), i, o) {
		struct approute nr = {0};
		json_t *port = json_object_get(o, "port");
		if (!take_str(o, "session_id", nr.session_id, sizeof(nr.session_id)) ||
		    !take_str(o, "app", nr.app, sizeof(nr.app)) || !take_str(o, "target", nr.target, sizeof(nr.target)))
			continue;
		if (json_is_integer(port) && json_integer_value(port) > 0 && json_integer_value(port) <= 65535)
			nr.port = (int)json_integer_value(port);
		else if (!take_str(o, "host", nr.host, sizeof(nr.host)))
			continue;
		if (approutes_find(r, nr.session_id, nr.target) || (nr.port && port_taken(r, nr.port)))
			continue;
		bool host_taken = false;
		for (size_t k = 0; !nr.port && k < r->n; k++)
			host_taken |= !strcmp(r->r[k].host, nr.host);
		if (host_taken)
			continue;
		if (r->n == r->cap) {
			size_t ncap = r->cap ? r->cap * 2 : 16;
			struct approute *g = realloc(r->r, ncap * sizeof(*g));
			if (!g)
				break;
			r->r = g;
			r->cap = ncap;
		}
		r->r[r->n++] = nr;
		added++;
	}
	if (added)
		r->generation++;
	json_array_foreach(json_object_get(doc, "tokens"), i, o) {
		struct apptoken t = {0};
		json_t *made = json_object_get(o, "made_ms"), *exp = json_object_get(o, "expires_ms");
		if (!take_str(o, "hash", t.hash, sizeof(t.hash)) || strlen(t.hash) != APPROUTES_TOKEN_HEX ||
		    !take_str(o, "user_id", t.user_id, sizeof(t.user_id)) ||
		    !take_str(o, "session_id", t.session_id, sizeof(t.session_id)) ||
		    !take_str(o, "app", t.app, sizeof(t.app)) || !take_str(o, "target", t.target, sizeof(t.target)) ||
		    !json_is_integer(made) || !json_is_integer(exp))
			continue;
		t.made_ms = json_integer_value(made);
		t.expires_ms = json_integer_value(exp);
		t.used = json_is_true(json_object_get(o, "used"));
		if (now_ms - t.made_ms > APPROUTES_TOKEN_KEEP_MS || r->n_tokens >= APPROUTES_MAX_TOKENS)
			continue;
		if (r->n_tokens == r->cap_tokens) {
			size_t ncap = r->cap_tokens ? r->cap_tokens * 2 : 16;
			struct apptoken *g = realloc(r->t, ncap * sizeof(*g));
			if (!g)
				break;
			r->t = g;
			r->cap_tokens = ncap;
		}
		r->t[r->n_tokens++] = t;
	}
	return added;
}
