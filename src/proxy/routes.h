/* The proxy's route table (docs/apps.md, "The manager"): what
 * GET /v1/proxy/routes and POST /v1/proxy/redeem return, parsed and
 * checked, and looked up by port (port mode) or Host (host mode). Pure
 * but for name resolution of endpoints (routes_parse runs off the event
 * loop). The format itself, which the manager writes with too, is
 * common/approute_msg.h; this adds resolving and the lookups. */
#ifndef TESSERA_PROXY_ROUTES_H
#define TESSERA_PROXY_ROUTES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/err.h"

struct proxy_route {
	char user[128];           /* who the token was for: "user_id", else "user" */
	char owner[128];          /* the session's owner: "owner_id", else user */
	char session_id[128];
	char app[80];
	char target[96];          /* app:NAME or port:N */
	char endpoint[300];       /* HOST:PORT of the session's runner app port */
	char secret[65];          /* the session's app secret, 64 hex */
	int port;                 /* port mode; 0 in host mode */
	char host[384];           /* host mode, lower case; "" in port mode */
	struct sockaddr_storage addr;  /* endpoint's published HOST:PORT resolved */
	socklen_t addr_len;            /* 0: not published (its node's app_publish is no) */
	/* The endpoint's ",IP:PORT@KEY" (docs/apps.md, "The direct path"),
	 * resolved when KEY is this process's util_netns_key; direct_len 0
	 * when there is none or it is for another host or namespace. */
	char direct[80];
	struct sockaddr_storage direct_addr;
	socklen_t direct_len;
};

struct route_table {
	struct proxy_route *r;    /* owned */
	size_t n;
	uint64_t generation;
	/* Who besides a session's owner may use its routes (the enabled
	 * admins), and who may use none (disabled accounts): user ids, the
	 * answer's "admins" and "disabled"; owned. */
	char **admins, **disabled;
	size_t n_admins, n_disabled;
};

/* One route object into *out, endpoint resolved. The endpoint is
 * "HOST:PORT" (the runner's published app port), optionally followed by
 * ",IP:PORT@KEY" (its container's address, for a proxy with that netns
 * key). EINVAL naming the field
 * that is missing or wrong. with_user: "user_id" or "user" required (redeem). */
int routes_parse_one(json_t *obj, bool with_user, struct proxy_route *out, struct terr *err);
/* {"generation": N, "routes": [...]} into *out (owned; routes_free). A
 * route that does not parse is an error for the whole answer. */
int routes_parse(json_t *doc, struct route_table *out, struct terr *err);
void routes_free(struct route_table *t);

/* Lookups; borrowed from t. routes_by_host takes a Host header value
 * (a port after the name is ignored; case-insensitive). */
const struct proxy_route *routes_by_port(const struct route_table *t, int port);
const struct proxy_route *routes_by_host(const struct route_table *t, const char *host_header);
/* The host part of a Host header, lower case, into out; "" when it is
 * malformed or too long. */
void routes_host_name(const char *host_header, char *out, size_t n);

/* Whether user_id (an app cookie's user) may use route r now: not a
 * disabled account, and the session's owner or an admin. The proxy asks
 * on every request, so a disabled user's cookie stops working at once. */
bool routes_user_allowed(const struct route_table *t, const struct proxy_route *r, const char *user_id);

/* Adds (a copy of) r unless t has a route for its port or host already;
 * -ENOMEM. */
int routes_add(struct route_table *t, const struct proxy_route *r);

#endif
