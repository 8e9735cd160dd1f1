/* Signed JSON calls to a Tessera API endpoint: used by the CLI, by agents
 * calling the manager and by the manager calling agents. */
#ifndef TESSERA_COMMON_APICLIENT_H
#define TESSERA_COMMON_APICLIENT_H

#include <jansson.h>
#include <stdatomic.h>

#include "common/err.h"

struct api_client {
	const char *endpoint;    /* "http://127.0.0.1:8090", no trailing slash needed */
	const char *access_key;  /* credential */
	const char *secret_key;
};

/* Sends METHOD path_query (e.g. "/v1/sessions?all=1") with body (borrowed,
 * may be NULL) as JSON, signed per common/sign.h. On 2xx stores the parsed
 * response (new reference, or NULL for an empty body) in *out. On another
 * status returns a negative errno mapped from it (400 -EINVAL, 401/403
 * -EACCES, 404 -ENOENT, 409 -EEXIST, 413 -E2BIG, 429 -EUSERS, 503 -EAGAIN,
 * else -EIO) and
 * err->msg is the server's error message. *status gets the HTTP status (0
 * on transport failure); status may be NULL. */
int api_call(const struct api_client *c, const char *method,
	     const char *path_query, json_t *body, long timeout_ms,
	     json_t **out, long *status, struct terr *err);

/* Like api_call, for answers that are streams (logs, exec): a 2xx
 * answer's body is not parsed but handed to on_data as it arrives, after
 * on_open (may be NULL) got its Content-Type as soon as the status was in.
 * Another status is an error as with api_call (its body, read up to
 * 16 KiB, gives the message); on_data never sees it. A callback returning
 * non-zero stops the transfer (then 0 is returned). accept: the Accept
 * header's value. timeout_ms: 0 for none. cancel: as httpc's. A 2xx
 * stream cut short is -EIO. */
int api_stream(const struct api_client *c, const char *method, const char *path_query, json_t *body,
	       long timeout_ms, const char *accept, int (*on_open)(const char *content_type, void *ud),
	       int (*on_data)(const char *data, size_t len, void *ud), void *ud, const atomic_bool *cancel,
	       long *status, struct terr *err);

/* Sends a body of len bytes read by read_body (as httpc's) as it goes,
 * signed by its hex SHA-256 body_sha256 (also sent as the
 * X-Tessera-Content-SHA256 header, which the server checks the bytes
 * against). Answers and errors as api_call's; no timeout. */
int api_upload(const struct api_client *c, const char *method, const char *path_query,
	       long (*read_body)(char *buf, size_t max, void *ud), void *ud, long long len,
	       const char *body_sha256, json_t **out, struct terr *err);

/* Percent-encodes s for use as one path segment or query value (RFC 3986
 * unreserved kept). Returns a malloc'd string (caller frees) or NULL. */
char *api_escape(const char *s);

#endif
