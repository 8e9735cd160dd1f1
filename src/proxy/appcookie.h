/* The app cookie (docs/apps.md, "The proxy"): what a redeemed link leaves
 * in the browser, checked on every request of a route.
 *
 * Value: base64url(PAYLOAD) "." hex(HMAC-SHA256(cluster secret,
 * "tessera-app-cookie|" PAYLOAD)), PAYLOAD being
 * "1|USER|SESSION_ID|TARGET|ROUTE|EXPIRY": version 1, the user who
 * redeemed, the session, its target (app:NAME or port:N), the route (the
 * proxy's port in decimal, or the host in host mode) and the expiry
 * (Unix seconds). No field may hold '|'. The prefix keeps a cookie from
 * ever being a valid signature of anything else made with the same
 * secret (API requests, agents' RPCs). */
#ifndef TESSERA_PROXY_APPCOOKIE_H
#define TESSERA_PROXY_APPCOOKIE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define APPCOOKIE_TTL_S (12 * 3600)
#define APPCOOKIE_MAX 1400

struct appcookie {
	char user[128];
	char session_id[128];
	char target[96];
	char route[400];
	int64_t expires;      /* Unix seconds */
};

/* Writes the signed value of c into out (n >= APPCOOKIE_MAX). EINVAL
 * when a field is empty, too long or holds '|' or a control character. */
int appcookie_sign(const char *secret, const struct appcookie *c, char *out, size_t n, struct terr *err);

/* Checks value for route at now (Unix seconds) and fills *out. Errors:
 * EACCES malformed or bad signature (tampered, or signed with another
 * secret); EKEYEXPIRED expired; EXDEV valid but for another route. On
 * EXDEV and EKEYEXPIRED *out is filled too. */
int appcookie_verify(const char *secret, const char *value, const char *route, int64_t now,
		     struct appcookie *out, struct terr *err);

/* The value of cookie `name` in a Cookie header (NULL: none) into out;
 * -ENOENT when absent, -E2BIG when longer than n - 1. */
int appcookie_find(const char *cookie_header, const char *name, char *out, size_t n);

#endif
