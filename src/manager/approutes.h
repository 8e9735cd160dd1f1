/* Session apps' routes and one-time tokens (docs/apps.md, "The manager"):
 * the pure part, no lock, no I/O but the random source, so that its rules
 * are unit-tested on their own (tests/manager/test_approutes.c). The
 * manager keeps one struct approutes in its state and calls these with its
 * lock held (apps.c).
 *
 * A route is what the proxy serves one opened app of one session on: a
 * port of the configured range (port mode) or the host
 * APP.SESSIONID8.apps.DOMAIN (host mode). It is kept for that (session,
 * target) until the session leaves RUNNING. Every change of the set bumps
 * the generation the proxy's long poll waits on.
 *
 * A token opens one route for one user: 32 random bytes in hex, valid
 * APPROUTES_TOKEN_TTL_MS, good for one redemption. Only its SHA-256 is
 * kept, so a dump of the manager's memory gives no usable link. */
#ifndef TESSERA_MANAGER_APPROUTES_H
#define TESSERA_MANAGER_APPROUTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/err.h"
#include "store/store.h"

#define APPROUTES_TOKEN_TTL_MS 60000
/* Used and expired tokens are remembered this long after they were made,
 * to tell "already used" and "expired" from an unknown link. */
#define APPROUTES_TOKEN_KEEP_MS (10 * 60 * 1000)
/* Tokens remembered at most (live and remembered ones); past it new ones
 * are refused until old ones age out. */
#define APPROUTES_MAX_TOKENS 8192
#define APPROUTES_TOKEN_HEX 64
/* The runner's own port in every container: never a user's target. */
#define APPROUTES_RUNNER_PORT 7611
#define APPROUTES_DEFAULT_RANGE "10205-10300"
/* wsproxy_url when unset: a loopback address of the apps' own, never the
 * web UI's 127.0.0.1 (a browser would send the UI's login cookie to every
 * app there: docs/security.md, "App links and the login cookie"). */
#define APPROUTES_DEFAULT_URL "http://127.0.0.2"
#define APPROUTES_APP_MAX 72       /* "terminal", "jupyter", "port-8888" */
#define APPROUTES_TARGET_MAX 80    /* "app:NAME" or "port:N" */
#define APPROUTES_HOST_MAX 384

struct approute {
	char session_id[STORE_ID_MAX];
	char app[APPROUTES_APP_MAX];
	char target[APPROUTES_TARGET_MAX];
	int port;                          /* port mode; 0 in host mode */
	char host[APPROUTES_HOST_MAX];     /* host mode; "" in port mode */
};

struct apptoken {
	char hash[APPROUTES_TOKEN_HEX + 1];  /* hex SHA-256 of the token */
	char user_id[STORE_ID_MAX];
	char session_id[STORE_ID_MAX];
	char app[APPROUTES_APP_MAX];
	char target[APPROUTES_TARGET_MAX];
	int64_t made_ms, expires_ms;
	bool used;
};

struct approutes {
	int lo, hi;                        /* the proxy's port range */
	char domain[256];                  /* host mode when not "" */
	struct approute *r;
	size_t n, cap;
	uint64_t generation;
	struct apptoken *t;
	size_t n_tokens, cap_tokens;
};

/* A domain for host mode: DNS labels of [A-Za-z0-9-], dot-separated, 253
 * characters at most; EINVAL otherwise. */
int approutes_check_domain(const char *s, struct terr *err);
/* The proxy's public base "http://HOST[:PORT]" or "https://...", no path:
 * its scheme, host and port (0: none given) apart. EINVAL otherwise. */
int approutes_parse_base(const char *s, char *scheme, size_t scheme_n, char *host, size_t host_n, int *port,
			 struct terr *err);

/* An empty set for range lo..hi and domain (NULL or "": port mode). */
void approutes_init(struct approutes *r, int lo, int hi, const char *domain);
void approutes_free(struct approutes *r);

/* What the user asked to open, {app} of POST /v1/sessions/{s}/apps/{app}:
 * all digits is a port (1-65535, not APPROUTES_RUNNER_PORT): *port set,
 * app "port-N", target "port:N"; else a name (not checked against the
 * session's apps here): *port 0, target "app:NAME". EINVAL with a message
 * for a bad port or a name that is not [A-Za-z0-9_.-]{1,64}. */
int approutes_parse_app(const char *s, int *port, char app[APPROUTES_APP_MAX],
			char target[APPROUTES_TARGET_MAX], struct terr *err);

/* The route of (session_id, target), made when missing: the lowest free
 * port of the range, or the host app.SESSIONID8.apps.DOMAIN. *out points
 * into r (valid until the next change). EBUSY "all N app ports are in
 * use..." when the range is full. */
int approutes_open(struct approutes *r, const char *session_id, const char *app, const char *target,
		   const struct approute **out, struct terr *err);
/* The route of (session_id, target), or NULL. */
const struct approute *approutes_find(const struct approutes *r, const char *session_id, const char *target);
/* Removes a session's routes (it left RUNNING) and its tokens; the number
 * of routes removed. */
size_t approutes_drop_session(struct approutes *r, const char *session_id);

/* Makes a token for user_id to open (session_id, app, target) into token
 * (APPROUTES_TOKEN_HEX + 1 bytes), valid from now_ms for
 * APPROUTES_TOKEN_TTL_MS. EAGAIN when APPROUTES_MAX_TOKENS are remembered. */
int approutes_token_issue(struct approutes *r, const char *user_id, const char *session_id, const char *app,
			  const char *target, int64_t now_ms, char token[APPROUTES_TOKEN_HEX + 1],
			  struct terr *err);
/* Redeems token at now_ms: *out a copy of what it was made for, and it is
 * used up. EACCES "this link was already used", "this link expired" or
 * "this link is not valid" (unknown, or forgotten). */
int approutes_token_redeem(struct approutes *r, const char *token, int64_t now_ms, struct apptoken *out,
			   struct terr *err);

/* What survives a restart of the manager (its store's key "app_routes"):
 * every route, and the tokens still remembered (their hashes, never a
 * token). New reference. */
json_t *approutes_to_json(const struct approutes *r);
/* Adds doc's routes (keeping their ports or hosts, whatever the range is
 * now) and the tokens not yet forgotten at now_ms to r; entries that do
 * not parse, or whose port or host r has already, are skipped. Returns
 * how many routes were added. */
size_t approutes_load_json(struct approutes *r, json_t *doc, int64_t now_ms);

#endif
