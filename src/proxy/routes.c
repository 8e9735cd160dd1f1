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

#include "common/approute_msg.h"
#include "common/util.h"

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

/* The published HOST:PORT, when there is one (empty before the ',' of a
 * node whose app_publish is no); the direct ",IP:PORT@KEY" only when it
 * is numeric and KEY is ours. A direct part for another host is kept in
 * the endpoint text but never dialled: there IP may be anyone's. A route
 * with neither usable here stays in the table (one bad route must not
 * refuse the others): its requests get a page that says why. */
static int resolve(struct proxy_route *r, struct terr *err)
{
	const char *comma = strchr(r->endpoint, ',');
	size_t plen = comma ? (size_t)(comma - r->endpoint) : strlen(r->endpoint);
	int rc = plen || !comma ? resolve_ep(r->endpoint, plen, &r->addr, &r->addr_len, err) : 0;
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

/* The message's fields into a route of the table (same names). */
static void from_msg(const struct approute_msg *m, struct proxy_route *r)
{
	memset(r, 0, sizeof(*r));
	memcpy(r->user, m->user, sizeof(r->user));
	memcpy(r->owner, m->owner, sizeof(r->owner));
	memcpy(r->session_id, m->session_id, sizeof(r->session_id));
	memcpy(r->app, m->app, sizeof(r->app));
	memcpy(r->target, m->target, sizeof(r->target));
	memcpy(r->endpoint, m->endpoint, sizeof(r->endpoint));
	memcpy(r->secret, m->secret, sizeof(r->secret));
	r->port = m->port;
	memcpy(r->host, m->host, sizeof(r->host));
}

int routes_parse_one(json_t *o, bool with_user, struct proxy_route *r, struct terr *err)
{
	struct approute_msg m;
	memset(r, 0, sizeof(*r));
	int rc = approute_msg_from_json(o, with_user, &m, err);
	if (rc < 0)
		return rc;
	from_msg(&m, r);
	return resolve(r, err);
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
	struct approute_list l;
	int rc = approute_list_from_json(doc, &l, err);
	if (rc < 0)
		return rc;
	/* The ids pass to the table as they are. */
	out->generation = l.generation;
	out->admins = l.admins;
	out->n_admins = l.n_admins;
	out->disabled = l.disabled;
	out->n_disabled = l.n_disabled;
	l.admins = l.disabled = NULL;
	l.n_admins = l.n_disabled = 0;
	if (l.n && !(out->r = calloc(l.n, sizeof(*out->r)))) {
		approute_list_free(&l);
		routes_free(out);
		return terr_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < l.n; i++) {
		from_msg(&l.r[i], &out->r[i]);
		if ((rc = resolve(&out->r[i], err)) < 0) {
			terr_prefix(err, "routes[%zu]", i);
			approute_list_free(&l);
			routes_free(out);
			return rc;
		}
		out->n++;
	}
	approute_list_free(&l);
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
