/* HTTP server for the manager's and agents' APIs, over libmicrohttpd
 * (thread per connection, so a long-poll or an exec never blocks others).
 * Routes are a table of {method, pattern, handler, flags}; patterns take
 * `{name}` segments that arrive as req->params in order. Bodies are
 * collected up to max_body (larger gets 413 before the handler runs). */
#ifndef TESSERA_COMMON_HTTPD_H
#define TESSERA_COMMON_HTTPD_H

#include <stddef.h>
#include <jansson.h>

#include "common/err.h"

#define HTTPD_MAX_PARAMS 4

struct MHD_Connection;
struct httpd;

struct httpd_req {
	const char *method;
	const char *path;       /* decoded path, no query */
	const char *target;     /* request target exactly as sent (for signing) */
	const char *body;       /* NUL-terminated, body_len bytes */
	size_t body_len;
	const char *params[HTTPD_MAX_PARAMS];  /* decoded {segments} */
	int route_flags;
	void *auth;             /* set by the authenticate hook */
	struct MHD_Connection *conn;
};

/* Streaming body: called for more bytes as the client takes them; may
 * block (each connection has its own thread). Returns bytes written to buf
 * (> 0), or HTTPD_STREAM_END. */
#define HTTPD_STREAM_END (-1)
typedef long (*httpd_stream_fn)(void *cls, char *buf, size_t max);

struct httpd_resp {
	int status;
	json_t *json;           /* owned; sent when set */
	char *text;             /* owned; sent as text/plain when set and no json */
	httpd_stream_fn stream; /* when set: a streamed body of stream_type */
	void *stream_cls;       /* freed with stream_free when the stream ends */
	void (*stream_free)(void *cls);
	const char *stream_type;
};

typedef void (*httpd_handler)(void *ctx, struct httpd_req *req,
			      struct httpd_resp *resp);

struct httpd_route {
	const char *method;
	const char *pattern;    /* "/v1/sessions/{ref}/exec" */
	httpd_handler fn;
	int flags;              /* passed to the authenticate hook */
};

struct httpd_config {
	const char *listen;     /* "127.0.0.1:8090", "0.0.0.0:0" (0 = any free port) */
	const struct httpd_route *routes;
	size_t n_routes;
	void *ctx;              /* given to handlers and the hook */
	size_t max_body;
	/* Runs before the handler; returns 0 to go on, or fills resp with an
	 * error and returns negative. May set req->auth. */
	int (*authenticate)(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
};

int httpd_start(const struct httpd_config *cfg, struct httpd **out, struct terr *err);
/* The port actually bound (useful with port 0). */
int httpd_port(const struct httpd *h);
/* Stops accepting and waits for running handlers; frees h. */
void httpd_stop(struct httpd *h);

/* Header value or NULL (case-insensitive name). */
const char *httpd_header(const struct httpd_req *req, const char *name);
/* Query argument (decoded) or NULL. */
const char *httpd_query(const struct httpd_req *req, const char *name);

/* Response helpers. httpd_json steals `body`. */
void httpd_json(struct httpd_resp *resp, int status, json_t *body);
void httpd_error(struct httpd_resp *resp, int status, const char *code,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Maps err->code to status and code (EINVAL 400, EACCES 401, EPERM 403,
 * ENOENT 404, EEXIST/EBUSY 409, E2BIG 413, EDOM 422, EAGAIN/ECONNREFUSED
 * 503, else 500) and uses err->msg. */
void httpd_error_terr(struct httpd_resp *resp, const struct terr *err);

/* "ADDR:PORT" -> parts; -EINVAL with a message otherwise. */
int httpd_parse_listen(const char *listen, char *host, size_t host_n, int *port,
		       struct terr *err);

#endif
