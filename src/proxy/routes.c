/* Route table parsing and lookup (routes.h). */
#include "proxy/routes.h"

#include <ctype.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"

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

/* "HOST:PORT" or "[V6]:PORT" (ep, len bytes), resolved numerically
 * first, else by name, into *addr. */
static int resolve_ep(const char *ep, size_t len, struct sockaddr_storage *addr, socklen_t *addr_len,
		      struct terr *err)
{
	char buf[300], host[300];
	if (len >= sizeof(buf))
		return terr_set(err, EINVAL, "route: endpoint is too long");
	memcpy(buf, ep, len);
	buf[len] = '\0';
	const char *colon = strrchr(buf, ':');
	if (!colon || colon == buf || !colon[1])
		return terr_set(err, EINVAL, "route: endpoint '%s' is not HOST:PORT", buf);
	size_t hl = (size_t)(colon - buf);
	const char *h = buf;
	if (*h == '[' && hl >= 2 && h[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	memcpy(host, h, hl);
	host[hl] = '\0';
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end || port < 1 || port > 65535)
		return terr_set(err, EINVAL, "route: endpoint '%s' has no valid port", buf);
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	int g = getaddrinfo(host, colon + 1, &hints, &ai);
	if (g || !ai)
		return terr_set(err, EHOSTUNREACH, "route: cannot resolve the endpoint '%s': %s", buf,
				gai_strerror(g));
	memcpy(addr, ai->ai_addr, ai->ai_addrlen);
	*addr_len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static char own_key[UTIL_NETNS_KEY_LEN + 1];
static void key_init(void)
{
	util_netns_key(own_key);
}

/* The published HOST:PORT always; the direct ",IP:PORT@KEY" only when it
 * is numeric and KEY is ours. A direct part for another host is kept in
 * the endpoint text but never dialled: there IP may be anyone's. */
static int resolve(struct proxy_route *r, struct terr *err)
{
	const char *comma = strchr(r->endpoint, ',');
	size_t plen = comma ? (size_t)(comma - r->endpoint) : strlen(r->endpoint);
	int rc = resolve_ep(r->endpoint, plen, &r->addr, &r->addr_len, err);
	if (rc < 0 || !comma)
		return rc;
	const char *d = comma + 1, *at = strrchr(d, '@');
	if (!at || at == d || strlen(at + 1) != UTIL_NETNS_KEY_LEN || strchr(d, ',') ||
	    (size_t)(at - d) >= sizeof(r->direct))
		return terr_set(err, EINVAL, "route: endpoint '%s': the part after ',' is not IP:PORT@KEY", r->endpoint);
	pthread_once(&key_once, key_init);
	if (!own_key[0] || strcmp(at + 1, own_key))
		return 0;
	memcpy(r->direct, d, (size_t)(at - d));
	r->direct[at - d] = '\0';
	/* Numeric only: a name would be resolved where it means something
	 * else. */
	char host[80];
	util_strlcpy(host, r->direct[0] == '[' ? r->direct + 1 : r->direct, sizeof(host));
	char *c = strrchr(host, ':');
	if (c)
		*c = '\0';
	if (host[0] && host[strlen(host) - 1] == ']')
		host[strlen(host) - 1] = '\0';
	unsigned char tmp[16];
	if (inet_pton(AF_INET, host, tmp) != 1 && inet_pton(AF_INET6, host, tmp) != 1)
		return terr_set(err, EINVAL, "route: endpoint '%s': the direct address is not numeric", r->endpoint);
	return resolve_ep(r->direct, strlen(r->direct), &r->direct_addr, &r->direct_len, err);
}

int routes_parse_one(json_t *o, bool with_user, struct proxy_route *r, struct terr *err)
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
		util_strlcpy(r->owner, r->user, sizeof(r->owner));
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
	return resolve(r, err);
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

static bool has_id(char *const *ids, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(ids[i], id))
			return true;
	return false;
}

bool routes_user_allowed(const struct route_table *t, const struct proxy_route *r, const char *user_id)
{
	if (!user_id || !*user_id || has_id(t->disabled, t->n_disabled, user_id))
		return false;
	return !strcmp(r->owner, user_id) || has_id(t->admins, t->n_admins, user_id);
}

int routes_parse(json_t *doc, struct route_table *out, struct terr *err)
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
		routes_free(out);
		return irc;
	}
	size_t n = json_array_size(arr);
	if (n) {
		out->r = calloc(n, sizeof(*out->r));
		if (!out->r)
			return terr_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		int rc = routes_parse_one(json_array_get(arr, i), false, &out->r[i], err);
		if (rc < 0) {
			terr_prefix(err, "routes[%zu]", i);
			routes_free(out);
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

void routes_free(struct route_table *t)
{
	free(t->r);
	t->r = NULL;
	t->n = 0;
	free_ids(&t->admins, &t->n_admins);
	free_ids(&t->disabled, &t->n_disabled);
}

const struct proxy_route *routes_by_port(const struct route_table *t, int port)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->r[i].port == port && !t->r[i].host[0])
			return &t->r[i];
	return NULL;
}

void routes_host_name(const char *h, char *out, size_t n)
{
	out[0] = '\0';
	if (!h)
		return;
	size_t len = strcspn(h, ":");
	if (!len || len >= n)
		return;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)h[i];
		if (!isalnum(c) && c != '-' && c != '.') {
			out[0] = '\0';
			return;
		}
		out[i] = (char)tolower(c);
	}
	out[len] = '\0';
}

const struct proxy_route *routes_by_host(const struct route_table *t, const char *host_header)
{
	char name[384];
	routes_host_name(host_header, name, sizeof(name));
	if (!name[0])
		return NULL;
	for (size_t i = 0; i < t->n; i++)
		if (t->r[i].host[0] && !strcmp(t->r[i].host, name))
			return &t->r[i];
	return NULL;
}

int routes_add(struct route_table *t, const struct proxy_route *r)
{
	if (r->host[0] ? routes_by_host(t, r->host) != NULL : routes_by_port(t, r->port) != NULL)
		return 0;
	struct proxy_route *nr = realloc(t->r, (t->n + 1) * sizeof(*nr));
	if (!nr)
		return -ENOMEM;
	t->r = nr;
	t->r[t->n++] = *r;
	return 0;
}
