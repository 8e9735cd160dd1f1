/* The project's one HTTP server layer, over libmicrohttpd (thread per
 * connection, so a long-poll or an exec never blocks others): the manager's
 * and agents' APIs and the webserver.
 * Routes are a table of {method, pattern, handler, flags}; patterns take
 * `{name}` segments that arrive as req->params in order, and may end in
 * `{*name}`, which takes the rest of the path (slashes included, possibly
 * empty). Method "*" is any method. The first route that matches wins.
 * Bodies are collected up to max_body (larger gets 413 before the handler
 * runs), except on routes flagged HTTPD_ROUTE_STREAM_BODY, whose handler
 * runs as soon as the headers are in and takes the body piece by piece
 * through a sink (httpd_req_sink): uploads of any size. Optional: headers
 * on every response, and HTTPS.
 * Before routing, the hook and any handler (httpd.c, "Checks before
 * routing"): a path or query argument that decodes to a NUL byte gets 400,
 * so req->params, req->path and httpd_query never hold a name cut short. */
#ifndef TESSERA_COMMON_HTTPD_H
#define TESSERA_COMMON_HTTPD_H

#include <stddef.h>
#include <jansson.h>

#include "common/err.h"

#define HTTPD_MAX_PARAMS 4
#define HTTPD_HEADER_TIMEOUT_S 10
#define HTTPD_WAITING_PER_ADDR 32
#define HTTPD_MAX_CONNS 4096

struct MHD_Connection;
struct httpd;
struct httpd_resp;

/* Route flag (with the hook's own flags): the body is streamed to a sink
 * the handler sets, not collected. */
#define HTTPD_ROUTE_STREAM_BODY 0x10000

/* A streamed body's sink. write: the next len bytes; 0 to go on, or
 * negative after filling resp with the error (the rest of the body is
 * read and dropped, then that error is the answer; end is called with
 * complete 0 at once). end: complete 1 when the whole body arrived, with
 * resp to fill with the answer; complete 0 (resp NULL) when the body will
 * not be complete (an error, the connection cut): drop what was written.
 * end is called exactly once and frees cls. */
typedef int (*httpd_sink_write_fn)(void *cls, const char *data, size_t len, struct httpd_resp *resp);
typedef void (*httpd_sink_end_fn)(void *cls, int complete, struct httpd_resp *resp);

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
	/* Routes flagged HTTPD_ROUTE_STREAM_BODY: body_streamed is 1, body is
	 * empty, and the handler either answers at once or sets a sink. */
	int body_streamed;
	httpd_sink_write_fn sink_write;
	httpd_sink_end_fn sink_end;
	void *sink_cls;
};

/* Sets the sink of a streamed body (the handler's answer then comes from
 * end). cls is owned by the sink from here on. */
void httpd_req_sink(struct httpd_req *req, httpd_sink_write_fn write, httpd_sink_end_fn end, void *cls);

/* Streaming body: called for more bytes as the client takes them; may
 * block (each connection has its own thread). Returns bytes written to buf
 * (> 0), HTTPD_STREAM_END, or HTTPD_STREAM_ERROR (the connection is cut
 * without a proper end, so the client sees the body is incomplete). */
#define HTTPD_STREAM_END (-1)
#define HTTPD_STREAM_ERROR (-2)
typedef long (*httpd_stream_fn)(void *cls, char *buf, size_t max);

struct httpd_header {
	const char *name;
	const char *value;
};

struct httpd_resp_headers;     /* owned list, filled by httpd_resp_header */

/* The body sent is the first set of: stream, json, bytes, text. */
struct httpd_resp {
	int status;
	json_t *json;           /* owned; sent when set */
	char *text;             /* owned; sent as text/plain when set and no json */
	httpd_stream_fn stream; /* when set: a streamed body of stream_type */
	void *stream_cls;       /* freed with stream_free when the stream ends */
	void (*stream_free)(void *cls);
	const char *stream_type;
	int stream_sized;       /* the stream's length is known: Content-Length */
	unsigned long long stream_size;
	char *bytes;            /* owned; set with httpd_bytes */
	size_t bytes_len;
	char *bytes_type;       /* owned */
	struct httpd_resp_headers *headers;
};

typedef void (*httpd_handler)(void *ctx, struct httpd_req *req,
			      struct httpd_resp *resp);

struct httpd_route {
	const char *method;     /* "GET", "POST"..., or "*": any method */
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
	/* Sent with every response (errors and streams too) unless the
	 * response sets the same name itself. */
	const struct httpd_header *headers;
	size_t n_headers;
	unsigned timeout_s;     /* idle timeout of a connection whose request
				 * is complete (a long poll, a stream); 0 = 600 */
	/* Flood limits (httpd.c, "Connection limits"): a connection must
	 * deliver a complete request within header_timeout_s (0 =
	 * HTTPD_HEADER_TIMEOUT_S) of being accepted or of its previous
	 * response; at most HTTPD_WAITING_PER_ADDR such waiting connections
	 * per client address and max_conns / 2 in all (the oldest is cut for
	 * a newcomer). max_conns caps all connections (0 = HTTPD_MAX_CONNS;
	 * never more than a quarter of RLIMIT_NOFILE); per_addr_limit, when
	 * not 0, caps all connections of one client address (refused past
	 * it). */
	unsigned header_timeout_s;
	unsigned max_conns;
	unsigned per_addr_limit;
	/* PEM text of the certificate chain and its key: both, to serve HTTPS
	 * instead of HTTP, or neither. */
	const char *tls_cert_pem;
	const char *tls_key_pem;
	/* Optional, for metrics: called once per answered request (not the
	 * streamed-body routes) from its connection's thread, with the route
	 * that matched (NULL: none), the status and the seconds from the
	 * complete request to the handler's answer. */
	void (*observe)(void *ctx, const struct httpd_route *route, const char *method, int status,
			double seconds);
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
/* The name of the first query argument not in known (NULL-terminated),
 * or NULL when every one is known. Borrowed from req. */
const char *httpd_query_unknown(const struct httpd_req *req, const char *const *known);
/* Value of the request's cookie `name` or NULL. */
const char *httpd_cookie(const struct httpd_req *req, const char *name);
/* The client's IP address as text into buf ("unknown" when not known);
 * returns buf. INET6_ADDRSTRLEN bytes are always enough. */
const char *httpd_peer_addr(const struct httpd_req *req, char *buf, size_t n);

/* Response helpers. httpd_json steals `body`. */
void httpd_json(struct httpd_resp *resp, int status, json_t *body);
void httpd_error(struct httpd_resp *resp, int status, const char *code,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Maps err->code to status and code (EINVAL 400, EACCES 401, EPERM 403,
 * ENOENT 404, EEXIST/EBUSY 409, E2BIG 413, EDOM 422, EAGAIN/ECONNREFUSED
 * 503, else 500) and uses err->msg. */
void httpd_error_terr(struct httpd_resp *resp, const struct terr *err);
/* A body of raw bytes (copied) with its Content-Type (copied). */
int httpd_bytes(struct httpd_resp *resp, int status, const char *ctype, const void *buf,
		size_t len);
/* The same, taking buf (malloc'd; freed by httpd, also on failure)
 * instead of copying it: for large bodies already built. */
int httpd_bytes_take(struct httpd_resp *resp, int status, const char *ctype, char *buf, size_t len);
/* Adds a response header (both strings copied; a name may repeat, e.g.
 * Set-Cookie). Content-Type and Cache-Control set here replace httpd's own
 * (application/json or text/plain, and no-store), and any name set here
 * replaces the server's default of that name.
 * httpd_bytes and httpd_resp_header return 0, or -ENOMEM after turning the
 * response into a 500 error, so a half-built response never goes out. */
int httpd_resp_header(struct httpd_resp *resp, const char *name, const char *value);
/* Frees what a response owns (httpd does it after sending; for responses
 * built and never sent) and zeroes it. */
void httpd_resp_free(struct httpd_resp *resp);

/* "ADDR:PORT" -> parts; -EINVAL with a message otherwise. */
int httpd_parse_listen(const char *listen, char *host, size_t host_n, int *port,
		       struct terr *err);

#endif
