/* The app route format (approute_msg.h). */
#include "common/approute_msg.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

json_t *approute_msg_to_json(const struct approute_msg *m)
{
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "session_id", m->session_id, "app", m->app, "target",
			      m->target, "endpoint", m->endpoint, "secret", m->secret, "user_id", m->user, "owner_id",
			      m->owner);
	if (o && m->port)
		json_object_set_new(o, "port", json_integer(m->port));
	else if (o)
		json_object_set_new(o, "host", json_string(m->host));
	if (o && m->email)
		json_object_set_new(o, "user", json_string(m->email));
	if (o && m->session_name)
		json_object_set_new(o, "session", json_string(m->session_name));
	return o;
}

static int get_str(json_t *o, const char *k, char *out, size_t n, bool required, struct terr *err)
{
	json_t *v = json_object_get(o, k);
	out[0] = '\0';
	if (!v || json_is_null(v)) {
		if (required)
			return terr_set(err, EINVAL, "route: \"%s\" is missing", k);
		return 0;
	}
	if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) >= n)
		return terr_set(err, EINVAL, "route: \"%s\" must be a string of 1 to %zu characters", k, n - 1);
	const char *s = json_string_value(v);
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c <= 0x20 || *c == 0x7f || *c == '|')
			return terr_set(err, EINVAL, "route: \"%s\" holds a character it may not", k);
	memcpy(out, s, json_string_length(v) + 1);
	return 0;
}

int approute_msg_from_json(json_t *o, bool with_user, struct approute_msg *r, struct terr *err)
{
	int rc;
	memset(r, 0, sizeof(*r));
	if (!json_is_object(o))
		return terr_set(err, EINVAL, "route: not an object");
	/* The user's id names them in the cookie (an email can change);
	 * "user" alone does too. */
	if ((rc = get_str(o, "user_id", r->user, sizeof(r->user), false, err)) < 0 ||
	    (!r->user[0] && (rc = get_str(o, "user", r->user, sizeof(r->user), with_user, err)) < 0) ||
	    (rc = get_str(o, "session_id", r->session_id, sizeof(r->session_id), true, err)) < 0 ||
	    (rc = get_str(o, "app", r->app, sizeof(r->app), false, err)) < 0 ||
	    (rc = get_str(o, "target", r->target, sizeof(r->target), true, err)) < 0 ||
	    (rc = get_str(o, "endpoint", r->endpoint, sizeof(r->endpoint), true, err)) < 0 ||
	    (rc = get_str(o, "secret", r->secret, sizeof(r->secret), true, err)) < 0 ||
	    (rc = get_str(o, "host", r->host, sizeof(r->host), false, err)) < 0 ||
	    (rc = get_str(o, "owner_id", r->owner, sizeof(r->owner), false, err)) < 0)
		return rc;
	if (!r->owner[0])
		memcpy(r->owner, r->user, sizeof(r->owner));
	if (strncmp(r->target, "app:", 4) && strncmp(r->target, "port:", 5))
		return terr_set(err, EINVAL, "route: target '%s' is neither app:NAME nor port:N", r->target);
	json_t *p = json_object_get(o, "port");
	if (p && !json_is_null(p)) {
		if (!json_is_integer(p) || json_integer_value(p) < 0 || json_integer_value(p) > 65535)
			return terr_set(err, EINVAL, "route: \"port\" must be an integer from 0 to 65535");
		r->port = (int)json_integer_value(p);
	}
	if (!r->port && !r->host[0])
		return terr_set(err, EINVAL, "route: neither \"port\" nor \"host\" is set");
	for (char *c = r->host; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	return 0;
}

static json_t *ids_json(char *const *ids, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_string(ids[i]));
	return a;
}

json_t *approute_list_to_json(const struct approute_list *l)
{
	json_t *routes = json_array();
	for (size_t i = 0; routes && i < l->n; i++)
		json_array_append_new(routes, approute_msg_to_json(&l->r[i]));
	return json_pack("{s:I,s:o,s:o,s:o}", "generation", (json_int_t)l->generation, "routes", routes, "admins",
			 ids_json(l->admins, l->n_admins), "disabled", ids_json(l->disabled, l->n_disabled));
}

/* doc's key (an array of user ids, or absent: none) into *out. */
static int parse_ids(json_t *doc, const char *key, char ***out, size_t *n, struct terr *err)
{
	json_t *arr = json_object_get(doc, key), *v;
	*out = NULL;
	*n = 0;
	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return terr_set(err, EINVAL, "routes: \"%s\" must be an array of user ids", key);
	if (!json_array_size(arr))
		return 0;
	*out = calloc(json_array_size(arr), sizeof(**out));
	if (!*out)
		return terr_set(err, ENOMEM, "out of memory");
	size_t i;
	json_array_foreach(arr, i, v) {
		const char *id = json_string_value(v);
		if (!id || !*id || strlen(id) >= 128)
			return terr_set(err, EINVAL, "routes: \"%s\"[%zu] must be a user id", key, i);
		if (!((*out)[i] = strdup(id)))
			return terr_set(err, ENOMEM, "out of memory");
		(*n)++;
	}
	return 0;
}

int approute_list_from_json(json_t *doc, struct approute_list *out, struct terr *err)
{
	memset(out, 0, sizeof(*out));
	json_t *gen = json_object_get(doc, "generation"), *arr = json_object_get(doc, "routes");
	if (!json_is_integer(gen) || json_integer_value(gen) < 0)
		return terr_set(err, EINVAL, "routes: \"generation\" must be a non-negative integer");
	if (!json_is_array(arr))
		return terr_set(err, EINVAL, "routes: \"routes\" must be an array");
	out->generation = (uint64_t)json_integer_value(gen);
	int irc;
	if ((irc = parse_ids(doc, "admins", &out->admins, &out->n_admins, err)) < 0 ||
	    (irc = parse_ids(doc, "disabled", &out->disabled, &out->n_disabled, err)) < 0) {
		approute_list_free(out);
		return irc;
	}
	size_t n = json_array_size(arr);
	if (n) {
		out->r = calloc(n, sizeof(*out->r));
		if (!out->r) {
			approute_list_free(out);
			return terr_set(err, ENOMEM, "out of memory");
		}
	}
	for (size_t i = 0; i < n; i++) {
		int rc = approute_msg_from_json(json_array_get(arr, i), false, &out->r[i], err);
		if (rc < 0) {
			terr_prefix(err, "routes[%zu]", i);
			approute_list_free(out);
			return rc;
		}
		out->n++;
	}
	return 0;
}

static void free_ids(char ***ids, size_t *n)
{
	for (size_t i = 0; *ids && i < *n; i++)
		free((*ids)[i]);
	free(*ids);
	*ids = NULL;
	*n = 0;
}

void approute_list_free(struct approute_list *l)
{
	free(l->r);
	l->r = NULL;
	l->n = 0;
	free_ids(&l->admins, &l->n_admins);
	free_ids(&l->disabled, &l->n_disabled);
}
