/* The webserver (`tessera webserver`, and inside `tessera server`): serves
 * the built UI, logs people in with email and password, and relays the
 * manager's API for the logged-in user, signing each call server-side with
 * that user's keypair, so no secret ever reaches the browser.
 *
 * Routes (docs/api.md, "Webserver"):
 *   POST /auth/login   {"email","password"} -> cookie + {"user","csrf_token"}
 *   GET  /auth/me      -> {"user","csrf_token"} or 401
 *   POST /auth/logout  (CSRF) -> cookie cleared
 *   ANY  /api/v1/...   relayed to the manager's /v1/... (CSRF on writes);
 *                      GET /api/v1/events is streamed (server-sent events)
 *   GET  anything else: a file of the UI, else index.html (client routes)
 *
 * Login sessions live in memory (a restart logs everyone out), or in
 * Redis with web_config.redis_url: then every webserver on that Redis
 * shares them, they outlive a restart, and while Redis cannot be reached
 * logins and logged-in requests are answered 503 ("login store (Redis at
 * HOST:PORT) unavailable; try again shortly"). The cookie
 * is HttpOnly, SameSite=Strict, Secure on TLS. Every state-changing request
 * must carry the login's CSRF token in X-CSRF-Token; a cross-site Origin is
 * refused. */
#ifndef TESSERA_WEB_WEBSERVER_H
#define TESSERA_WEB_WEBSERVER_H

#include "common/err.h"

struct web;

struct web_config {
	const char *listen;      /* "127.0.0.1:8080"; port 0 = any free port */
	const char *manager;     /* "http://127.0.0.1:8090" */
	const char *web_secret;  /* the manager's cluster secret (password login) */
	const char *ui_dir;      /* NULL: <dir of the binary>/ui/www, then
	                          * <dir of the binary>/../share/tessera/ui,
	                          * then /usr/share/tessera/ui */
	const char *tls_cert;    /* PEM files; both or neither */
	const char *tls_key;
	int login_ttl_s;         /* login session lifetime; default 12 h */
	/* "redis://[:PASSWORD@]HOST:PORT/DB": login sessions are kept in
	 * Redis, shared by every webserver on it (a logout on one ends the
	 * login on all). NULL or "": in this process's memory. */
	const char *redis_url;
};

/* Starts serving (own threads). On failure nothing is left running. */
int web_start(const struct web_config *cfg, struct web **out, struct terr *err);
/* The bound port, and the URL people open ("http://127.0.0.1:8080/"). */
int web_port(const struct web *w);
const char *web_url(const struct web *w);
/* Stops and frees (NULL is fine). */
void web_stop(struct web *w);

#endif
