/* The app route format (docs/apps.md, "The manager"): what the manager's
 * GET /v1/proxy/routes and POST /v1/proxy/redeem answer and the app proxy
 * reads. One codec for both sides: the manager writes with it
 * (manager/apps.c), the proxy reads with it (proxy/routes.c, which then
 * resolves the endpoints and serves the table). Jansson and the C library
 * only. The round trip is unit-tested in tests/common/test_approute_msg.c;
 * the reader is fuzzed by tests/fuzz/fuzz_approute.c.
 *
 * A route: {"session_id", "app", "target", "endpoint", "secret",
 * "user_id", "owner_id", and "port" (port mode) or "host" (host mode)}.
 * A redeem answer is the route of the link with "user_id" the link's
 * user, plus "user" (their email) and "session" (its name) for people
 * reading it. The list: {"generation", "routes", "admins", "disabled"}. */
#ifndef TESSERA_COMMON_APPROUTE_MSG_H
#define TESSERA_COMMON_APPROUTE_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/err.h"

struct approute_msg {
	char user[128];           /* "user_id", else "user": the owner in the list, the link's user in a redeem answer */
	char owner[128];          /* the session's owner: "owner_id", else user */
	char session_id[128];
	char app[80];             /* may be "" */
	char target[96];          /* app:NAME or port:N */
	char endpoint[300];       /* HOST:PORT[,IP:PORT@KEY] of the runner's app port */
	char secret[65];          /* the session's app secret, 64 hex */
	int port;                 /* port mode; 0 in host mode */
	char host[384];           /* host mode (read in lower case); "" in port mode */
	/* Written in a redeem answer ("user", "session") when not NULL; never
	 * read back (NULL after approute_msg_from_json). */
	const char *email, *session_name;
};

/* A new object, or NULL (out of memory). "port" when port is set, else
 * "host". */
json_t *approute_msg_to_json(const struct approute_msg *m);
/* One route object into *out: every string 1 to its size - 1 characters
 * with no blank, control character or '|'; target app: or port:; port
 * 0-65535; port or host set. EINVAL naming the field. with_user: "user_id"
 * or "user" required (a redeem answer). */
int approute_msg_from_json(json_t *obj, bool with_user, struct approute_msg *out, struct terr *err);

struct approute_list {
	uint64_t generation;
	struct approute_msg *r;
	size_t n;
	/* Who besides a session's owner may use its routes (the enabled
	 * admins), and who may use none (disabled accounts): user ids. */
	char **admins, **disabled;
	size_t n_admins, n_disabled;
};

/* A new object, or NULL (out of memory). Only reads l. */
json_t *approute_list_to_json(const struct approute_list *l);
/* The list into *out (owned: approute_list_free); a route that does not
 * parse is an error for the whole list ("routes[I]: ..."). EINVAL,
 * ENOMEM. */
int approute_list_from_json(json_t *doc, struct approute_list *out, struct terr *err);
/* Frees what approute_list_from_json made. */
void approute_list_free(struct approute_list *l);

#endif
