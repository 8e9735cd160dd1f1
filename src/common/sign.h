/* Request signing (docs/api.md, "Authentication").
 *
 * Every API request carries
 *   Date: <IMF-fixdate, e.g. "Sun, 22 Nov 2026 08:40:00 GMT">
 *   Authorization: TESSERA-HMAC-SHA256 Credential=<access key>, Signature=<hex>
 * The signature is
 *   key = HMAC-SHA256(secret_key, "YYYYMMDD" of the Date)
 *   sig = hex(HMAC-SHA256(key, METHOD "\n" PATH_WITH_QUERY "\n" DATE "\n"
 *                              HOST "\n" hex(SHA256(body))))
 * METHOD upper-case, PATH_WITH_QUERY exactly as sent on the request line,
 * HOST the Host header value, body empty for none. A request is accepted
 * within SIGN_MAX_SKEW_S of server time. Daemons sign their RPCs the same
 * way with credential "agent:<id>" / "manager" and the cluster secret. */
#ifndef TESSERA_COMMON_SIGN_H
#define TESSERA_COMMON_SIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "common/err.h"

#define SIGN_SCHEME "TESSERA-HMAC-SHA256"
#define SIGN_MAX_SKEW_S (15 * 60)
#define SIGN_HEX_LEN 64

/* IMF-fixdate of t into buf (>= 32 bytes). */
void sign_format_date(time_t t, char *buf, size_t n);
/* Parses an IMF-fixdate; -EINVAL on anything else. */
int sign_parse_date(const char *date, time_t *out, struct terr *err);

/* Computes the hex signature (SIGN_HEX_LEN chars + NUL into out). */
int sign_compute(const char *secret, const char *method, const char *path_query,
		 const char *date, const char *host, const void *body,
		 size_t body_len, char out[SIGN_HEX_LEN + 1], struct terr *err);

/* Builds the full Authorization header value into out. */
int sign_authorization(const char *access_key, const char *secret,
		       const char *method, const char *path_query,
		       const char *date, const char *host, const void *body,
		       size_t body_len, char *out, size_t n, struct terr *err);

/* sign_authorization for a body known by its hex SHA-256 (a streamed
 * upload). */
int sign_authorization_hashed(const char *access_key, const char *secret, const char *method,
			      const char *path_query, const char *date, const char *host,
			      const char *body_hash, char *out, size_t n, struct terr *err);

/* Splits an Authorization header value. -EACCES with a clear message when
 * malformed or of another scheme. */
int sign_parse_authorization(const char *header, char *access_key,
			     size_t ak_len, char sig[SIGN_HEX_LEN + 1],
			     struct terr *err);

/* Full server-side check: date within skew of now, signature matches
 * (constant-time compare). -EACCES with a message otherwise. */
int sign_verify(const char *secret, const char *sig_hex, const char *method,
		const char *path_query, const char *date, const char *host,
		const void *body, size_t body_len, time_t now,
		struct terr *err);

/* sign_verify for a body known by its hex SHA-256 only (a streamed upload:
 * the client says it in a header, the server checks the bytes against it
 * once they have all come). */
int sign_verify_hashed(const char *secret, const char *sig_hex, const char *method,
		       const char *path_query, const char *date, const char *host,
		       const char *body_hash, time_t now, struct terr *err);

/* Random URL-safe token of `nbytes` random bytes, hex-encoded into out
 * (2*nbytes+1). Used for access/secret keys, ids, cluster secrets. */
int sign_random_hex(size_t nbytes, char *out, size_t n, struct terr *err);

/* hex(SHA-256(data)) into out (65 bytes). */
void sign_sha256_hex(const void *data, size_t len, char out[SIGN_HEX_LEN + 1]);

/* Constant-time string equality. */
bool sign_equal(const char *a, const char *b);

#endif
