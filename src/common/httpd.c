#include "common/httpd.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/jsonutil.h"
#include "common/urldecode.h"
#include "common/util.h"

/* A connection as the flood limits see it (see "Connection limits"
 * below). Owned by httpd: made when MHD accepts the connection, freed when
 * MHD closes it; fields below `h` are guarded by h->lock. */
struct conn_track {
	struct httpd *h;
	struct conn_track *prev, *next;   /* in h's waiting list while waiting */
	int fd;
	int family;                       /* AF_INET or AF_INET6; 0: unknown */
	unsigned char addr[16];           /* the client's address */
	int64_t since_ms;                 /* start of the current wait */
	bool waiting;                     /* no complete request yet */
	bool cut;                         /* shut down by the limits */
};

struct httpd {
	struct MHD_Daemon *daemon;
	struct httpd_config cfg;
	int port;
	char *tls_cert, *tls_key;   /* copies of the PEM text, for MHD */
	/* The connection limits' state; the list is oldest wait first. */
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct conn_track *wait_head, *wait_tail;
	unsigned n_waiting;
	unsigned max_waiting;       /* over all addresses */
	int64_t header_timeout_ms;
	bool stopping;
	bool reaper_running;
	pthread_t reaper;
};

static void conn_active(struct MHD_Connection *conn);
static void conn_waiting(struct MHD_Connection *conn, bool again);

/* One response header, in the order added. */
struct httpd_resp_headers {
	struct httpd_resp_headers *next;
	char *name;
	char *value;
};

/* Per-request state, created by the URI log callback (the first thing MHD
 * tells us about a request, and the only place the raw target is seen). */
struct conn_state {
	char *target;
	char *body;
	size_t len, cap;
	int too_large;
	int headers_seen;       /* MHD's first call carries headers only */
	char *params[HTTPD_MAX_PARAMS];
	/* A streamed body (HTTPD_ROUTE_STREAM_BODY): its sink until end is
	 * called; answered: a response went out before the body. */
	httpd_sink_write_fn sink_write;
	httpd_sink_end_fn sink_end;
	void *sink_cls;
	int streaming, sink_failed, answered;
	struct httpd_resp sink_err;
};

void httpd_req_sink(struct httpd_req *req, httpd_sink_write_fn write, httpd_sink_end_fn end, void *cls)
{
	req->sink_write = write;
	req->sink_end = end;
	req->sink_cls = cls;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	(void)cls;
	(void)conn;
	struct conn_state *st = calloc(1, sizeof(*st));
	if (st)
		st->target = strdup(uri ? uri : "/");
	return st;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)toe;
	/* The response is done: a kept-alive connection waits for its next
	 * request under the same limits as a new one. */
	conn_waiting(conn, true);
	struct conn_state *st = *con_cls;
	if (!st)
		return;
	/* A streamed body that never ended (the client went away). */
	if (st->sink_end && st->sink_cls)
		st->sink_end(st->sink_cls, 0, NULL);
	httpd_resp_free(&st->sink_err);
	free(st->target);
	free(st->body);
	for (int i = 0; i < HTTPD_MAX_PARAMS; i++)
		free(st->params[i]);
	free(st);
	*con_cls = NULL;
}

/* Percent-decodes the path segment [s, s+n) into a new string; NULL on a
 * bad escape or a NUL byte (which request_precheck refuses before any
 * route is matched: this is the second line). */
static char *decode_segment(const char *s, size_t n)
{
	size_t len;
	char *out = urldecode(s, n, false, &len);
	if (out && strlen(out) != len) {
		free(out);
		return NULL;
	}
	return out;
}

/* Matches the raw path (no query) against a pattern; on success fills
 * params with decoded copies. Returns 1 on match, 0 otherwise. */
static int match_route(const char *pattern, const char *path, char **params)
{
	int np = 0;
	const char *p = pattern, *s = path;
	for (;;) {
		if (p[0] == '{' && p[1] == '*') {
			/* A catch-all ends the pattern: it takes the rest, even none. */
			if (np >= HTTPD_MAX_PARAMS || !(params[np] = decode_segment(s, strlen(s))))
				goto fail;
			return 1;
		}
		if (!*p || !*s)
			break;
		if (*p == '{') {
			const char *pe = strchr(p, '}');
			const char *se = strchr(s, '/');
			if (!pe)
				return 0;
			if (!se)
				se = s + strlen(s);
			if (se == s || np >= HTTPD_MAX_PARAMS)
				goto fail;
			params[np] = decode_segment(s, (size_t)(se - s));
			if (!params[np])
				goto fail;
			np++;
			p = pe + 1;
			s = se;
			continue;
		}
		if (*p != *s)
			goto fail;
		p++;
		s++;
	}
	if (*p == '\0' && (*s == '\0' || (s[0] == '/' && s[1] == '\0')))
		return 1;
fail:
	for (int i = 0; i < np; i++) {
		free(params[i]);
		params[i] = NULL;
	}
	return 0;
}

/* Whether every decoded {param} is valid UTF-8 (jansson's check). */
static bool params_utf8(char *const *params)
{
	for (int i = 0; i < HTTPD_MAX_PARAMS && params[i]; i++) {
		json_t *s = json_string(params[i]);
		json_decref(s);
		if (!s)
			return false;
	}
	return true;
}

struct stream_ctx {
	httpd_stream_fn fn;
	void *cls;
	void (*free_fn)(void *cls);
};

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct stream_ctx *sc = cls;
	long n = sc->fn(sc->cls, buf, max);
	if (n > 0)
		return (ssize_t)n;
	return n == HTTPD_STREAM_ERROR ? (ssize_t)MHD_CONTENT_READER_END_WITH_ERROR
				       : (ssize_t)MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_done(void *cls)
{
	struct stream_ctx *sc = cls;
	if (sc->free_fn)
		sc->free_fn(sc->cls);
	free(sc);
}

static int resp_has_header(const struct httpd_resp *resp, const char *name)
{
	for (const struct httpd_resp_headers *hd = resp->headers; hd; hd = hd->next)
		if (!strcasecmp(hd->name, name))
			return 1;
	return 0;
}

/* Headers in this order: the server's defaults, Content-Type and
 * Cache-Control (each unless the response sets that name), the
 * response's own. Then queues r and drops our reference. */
static enum MHD_Result queue(struct httpd *h, struct MHD_Connection *conn, struct httpd_resp *resp,
			     struct MHD_Response *r, const char *ctype)
{
	for (size_t i = 0; i < h->cfg.n_headers; i++)
		if (!resp_has_header(resp, h->cfg.headers[i].name))
			MHD_add_response_header(r, h->cfg.headers[i].name, h->cfg.headers[i].value);
	if (!resp_has_header(resp, "Content-Type"))
		MHD_add_response_header(r, "Content-Type", ctype);
	if (!resp_has_header(resp, "Cache-Control"))
		MHD_add_response_header(r, "Cache-Control", "no-store");
	for (const struct httpd_resp_headers *hd = resp->headers; hd; hd = hd->next)
		MHD_add_response_header(r, hd->name, hd->value);
	enum MHD_Result ret = MHD_queue_response(conn, (unsigned)resp->status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result send_stream(struct httpd *h, struct MHD_Connection *conn, struct httpd_resp *resp)
{
	struct stream_ctx *sc = calloc(1, sizeof(*sc));
	if (!sc)
		return MHD_NO;
	sc->fn = resp->stream;
	sc->cls = resp->stream_cls;
	sc->free_fn = resp->stream_free;
	resp->stream_cls = NULL;   /* owned by the stream now */
	struct MHD_Response *r = MHD_create_response_from_callback(
		resp->stream_sized ? (uint64_t)resp->stream_size : MHD_SIZE_UNKNOWN, 64 * 1024, stream_reader, sc,
		stream_done);
	if (!r) {
		stream_done(sc);
		return MHD_NO;
	}
	return queue(h, conn, resp, r, resp->stream_type ? resp->stream_type : "application/octet-stream");
}

static enum MHD_Result send_resp(struct httpd *h, struct MHD_Connection *conn, struct httpd_resp *resp)
{
	if (resp->stream)
		return send_stream(h, conn, resp);
	char *body = NULL;
	size_t len = 0;
	const char *ctype = "application/json";
	if (resp->json) {
		body = jsonutil_dump(resp->json);
		if (body) {
			size_t l = strlen(body);
			char *nl = realloc(body, l + 2);
			if (nl) {
				body = nl;
				body[l] = '\n';
				body[l + 1] = '\0';
			}
			len = strlen(body);
		}
	} else if (resp->bytes) {
		body = resp->bytes;
		len = resp->bytes_len;
		resp->bytes = NULL;
		ctype = resp->bytes_type ? resp->bytes_type : "application/octet-stream";
	} else if (resp->text) {
		body = resp->text;
		resp->text = NULL;
		len = strlen(body);
		ctype = "text/plain; charset=utf-8";
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body ? body : (char *)"",
		body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	return queue(h, conn, resp, r, ctype);
}

static void free_headers(struct httpd_resp *resp)
{
	for (struct httpd_resp_headers *hd = resp->headers, *next; hd; hd = next) {
		next = hd->next;
		free(hd->name);
		free(hd->value);
		free(hd);
	}
	resp->headers = NULL;
}

void httpd_resp_free(struct httpd_resp *resp)
{
	json_decref(resp->json);
	free(resp->text);
	free(resp->bytes);
	free(resp->bytes_type);
	if (resp->stream_cls && resp->stream_free)
		resp->stream_free(resp->stream_cls);
	free_headers(resp);
	memset(resp, 0, sizeof(*resp));
}

/* Out of memory while building a response: none of it goes out (a cookie
 * or a cache header meant for the real answer must not ride on a 500). */
static int resp_oom(struct httpd_resp *resp)
{
	free_headers(resp);
	httpd_error(resp, 500, "internal", "out of memory");
	return -ENOMEM;
}

/* The route of a request whose body is streamed, looked up once its
 * headers are in: authenticated and its handler run now, which answers at
 * once (sent before the body: an error) or sets the body's sink. Other
 * requests go on to have their body collected. */
static enum MHD_Result stream_begin(struct httpd *h, struct MHD_Connection *conn, struct conn_state *st,
				    const char *method)
{
	size_t plen = strcspn(st->target, "?");
	char *rawpath = strndup(st->target, plen);
	if (!rawpath)
		return MHD_NO;
	const struct httpd_route *found = NULL;
	for (size_t i = 0; i < h->cfg.n_routes && !found; i++) {
		const struct httpd_route *rt = &h->cfg.routes[i];
		char *params[HTTPD_MAX_PARAMS] = {0};
		if (!match_route(rt->pattern, rawpath, params))
			continue;
		if (strcmp(rt->method, "*") == 0 || strcmp(rt->method, method) == 0) {
			/* The first route that matches wins, as for other requests. */
			if (rt->flags & HTTPD_ROUTE_STREAM_BODY) {
				found = rt;
				memcpy(st->params, params, sizeof(params));
				break;
			}
			for (int k = 0; k < HTTPD_MAX_PARAMS; k++)
				free(params[k]);
			break;
		}
		for (int k = 0; k < HTTPD_MAX_PARAMS; k++)
			free(params[k]);
	}
	if (!found) {
		free(rawpath);
		return MHD_YES;
	}
	char *decoded_path = decode_segment(rawpath, strlen(rawpath));
	free(rawpath);
	struct httpd_resp resp = {0};
	struct httpd_req req = {
		.method = method,
		.path = decoded_path ? decoded_path : "",
		.target = st->target,
		.body = "",
		.body_len = 0,
		.route_flags = found->flags,
		.conn = conn,
		.body_streamed = 1,
	};
	for (int i = 0; i < HTTPD_MAX_PARAMS; i++)
		req.params[i] = st->params[i];
	if (!params_utf8(st->params))
		httpd_error(&resp, 400, "invalid_argument", "a path segment is not valid UTF-8");
	else if (!h->cfg.authenticate || h->cfg.authenticate(h->cfg.ctx, &req, &resp) == 0)
		found->fn(h->cfg.ctx, &req, &resp);
	free(decoded_path);
	free(req.auth);
	if (!resp.status && req.sink_write && req.sink_end) {
		st->sink_write = req.sink_write;
		st->sink_end = req.sink_end;
		st->sink_cls = req.sink_cls;
		st->streaming = 1;
		return MHD_YES;
	}
	if (req.sink_end)
		req.sink_end(req.sink_cls, 0, NULL);
	if (!resp.status)
		httpd_error(&resp, 500, "internal", "handler gave no response");
	st->answered = 1;
	conn_active(conn);
	enum MHD_Result ret = send_resp(h, conn, &resp);
	httpd_resp_free(&resp);
	return ret;
}

/* ---------- Checks before routing ----------
 * What no route may see is refused with 400 as soon as the headers are
 * in: before routing, the authenticate hook and any handler, so the answer
 * is the same signed or not, and nothing acts on a request read wrong.
 *  - A path or query argument that decodes to a NUL byte (urldecode.h):
 *    checked on the target as sent, and on libmicrohttpd's own decoded
 *    arguments by their sizes, as they are what httpd_query hands out.
 *  - Framing that two readers could take differently (RFC 9112, 6.3):
 *    Content-Length headers that differ (libmicrohttpd would take the
 *    first and say nothing; a proxy in front could take the last), or
 *    Content-Length beside Transfer-Encoding. The connection closes after
 *    the answer: where the body ends is not known. */
struct precheck {
	const char *nul_arg;    /* a query argument's name, whose name or value holds a NUL */
	const char *cl;         /* the first Content-Length */
	bool cl_differ, te;
};

static enum MHD_Result precheck_arg(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
				    const char *value, size_t value_size)
{
	(void)kind;
	struct precheck *pc = cls;
	if (strlen(key) != key_size || (value && strlen(value) != value_size)) {
		pc->nul_arg = key;
		return MHD_NO;
	}
	return MHD_YES;
}

static enum MHD_Result precheck_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
				       const char *value, size_t value_size)
{
	(void)kind;
	(void)key_size;
	(void)value_size;
	struct precheck *pc = cls;
	if (!strcasecmp(key, "Content-Length")) {
		const char *v = value ? value : "";
		if (pc->cl && strcmp(pc->cl, v))
			pc->cl_differ = true;
		if (!pc->cl)
			pc->cl = v;
	} else if (!strcasecmp(key, "Transfer-Encoding")) {
		pc->te = true;
	}
	return MHD_YES;
}

/* 0, or fills resp with the error (400; 500 out of memory) and returns -1. */
static int request_precheck(struct MHD_Connection *conn, const char *target, struct httpd_resp *resp)
{
	struct terr err = {0};
	if (urldecode_check_target(target, &err) < 0) {
		httpd_error_terr(resp, &err);
		return -1;
	}
	struct precheck pc = {0};
	MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, precheck_arg, &pc);
	if (pc.nul_arg) {
		httpd_error(resp, 400, "invalid_argument",
			    "the query argument '%.40s' holds a NUL byte (%%00), which no name or path may contain",
			    pc.nul_arg);
		return -1;
	}
	MHD_get_connection_values_n(conn, MHD_HEADER_KIND, precheck_header, &pc);
	if (pc.cl_differ || (pc.cl && pc.te)) {
		httpd_error(resp, 400, "invalid_argument", "%s: where the body ends is ambiguous (RFC 9112, 6.3)",
			    pc.cl_differ ? "two Content-Length headers that differ"
					 : "Content-Length beside Transfer-Encoding");
		httpd_resp_header(resp, "Connection", "close");
		return -1;
	}
	return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
				  const char *url, const char *method,
				  const char *version, const char *upload_data,
				  size_t *upload_size, void **con_cls)
{
	(void)url;
	(void)version;
	struct httpd *h = cls;
	struct conn_state *st = *con_cls;
	if (!st)
		return MHD_NO;  /* allocation failed in on_uri */

	if (!st->headers_seen) {
		st->headers_seen = 1;
		conn_waiting(conn, false);   /* the headers are in: the body's turn */
		struct httpd_resp presp = {0};
		if (request_precheck(conn, st->target, &presp) < 0) {
			st->answered = 1;
			conn_active(conn);
			enum MHD_Result pret = send_resp(h, conn, &presp);
			httpd_resp_free(&presp);
			return pret;
		}
		return stream_begin(h, conn, st, method);
	}
	if (st->answered) {
		/* Answered before the body: what still comes is dropped. */
		*upload_size = 0;
		return MHD_YES;
	}
	if (st->streaming) {
		if (*upload_size) {
			conn_waiting(conn, false);
			if (!st->sink_failed &&
			    st->sink_write(st->sink_cls, upload_data, *upload_size, &st->sink_err) < 0) {
				st->sink_failed = 1;
				st->sink_end(st->sink_cls, 0, NULL);
				st->sink_cls = NULL;
			}
			*upload_size = 0;
			return MHD_YES;
		}
		conn_active(conn);
		struct httpd_resp sresp = {0};
		if (st->sink_failed) {
			sresp = st->sink_err;
			memset(&st->sink_err, 0, sizeof(st->sink_err));
		} else {
			void *cls = st->sink_cls;
			st->sink_cls = NULL;
			st->sink_end(cls, 1, &sresp);
		}
		st->streaming = 0;
		if (!sresp.status)
			httpd_error(&sresp, 500, "internal", "handler gave no response");
		enum MHD_Result sret = send_resp(h, conn, &sresp);
		httpd_resp_free(&sresp);
		return sret;
	}
	if (*upload_size) {
		conn_waiting(conn, false);
		/* Collect the body; past the limit keep draining but remember. */
		if (!st->too_large) {
			if (st->len + *upload_size > h->cfg.max_body) {
				st->too_large = 1;
			} else {
				if (st->len + *upload_size + 1 > st->cap) {
					size_t ncap = st->cap ? st->cap : 4096;
					while (ncap < st->len + *upload_size + 1)
						ncap *= 2;
					char *nb = realloc(st->body, ncap);
					if (!nb)
						return MHD_NO;
					st->body = nb;
					st->cap = ncap;
				}
				memcpy(st->body + st->len, upload_data, *upload_size);
				st->len += *upload_size;
				st->body[st->len] = '\0';
			}
		}
		*upload_size = 0;
		return MHD_YES;
	}
	conn_active(conn);

	struct httpd_resp resp = {0};
	const struct httpd_route *found = NULL;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (st->too_large) {
		httpd_error(&resp, 413, "too_large", "request body is larger than %zu bytes",
			    h->cfg.max_body);
		goto send;
	}

	/* The raw target decides routing; split off the query. */
	size_t plen = strcspn(st->target, "?");
	char *rawpath = strndup(st->target, plen);
	if (!rawpath)
		return MHD_NO;
	int path_matched = 0;
	for (size_t i = 0; i < h->cfg.n_routes; i++) {
		const struct httpd_route *rt = &h->cfg.routes[i];
		char *params[HTTPD_MAX_PARAMS] = {0};
		if (!match_route(rt->pattern, rawpath, params))
			continue;
		if (strcmp(rt->method, "*") != 0 && strcmp(rt->method, method) != 0) {
			path_matched = 1;
			for (int k = 0; k < HTTPD_MAX_PARAMS; k++)
				free(params[k]);
			continue;
		}
		found = rt;
		memcpy(st->params, params, sizeof(params));
		break;
	}
	char *decoded_path = decode_segment(rawpath, strlen(rawpath));
	free(rawpath);
	if (found && !params_utf8(st->params)) {
		/* Names and ids are text: a segment that is not UTF-8 names
		 * nothing, and could not be said back in a JSON message. */
		httpd_error(&resp, 400, "invalid_argument", "a path segment is not valid UTF-8");
		free(decoded_path);
		goto send;
	}
	if (!found) {
		if (path_matched)
			httpd_error(&resp, 405, "method_not_allowed", "%s is not allowed on %s", method,
				    decoded_path ? decoded_path : "this path");
		else
			httpd_error(&resp, 404, "not_found", "no such route: %s %s", method,
				    decoded_path ? decoded_path : "?");
		free(decoded_path);
		goto send;
	}

	struct httpd_req req = {
		.method = method,
		.path = decoded_path ? decoded_path : "",
		.target = st->target,
		.body = st->body ? st->body : "",
		.body_len = st->len,
		.route_flags = found->flags,
		.conn = conn,
	};
	for (int i = 0; i < HTTPD_MAX_PARAMS; i++)
		req.params[i] = st->params[i];
	if (!h->cfg.authenticate || h->cfg.authenticate(h->cfg.ctx, &req, &resp) == 0) {
		found->fn(h->cfg.ctx, &req, &resp);
		if (!resp.status)
			httpd_error(&resp, 500, "internal", "handler gave no response");
	}
	free(decoded_path);
	free(req.auth);
send:;
	if (h->cfg.observe) {
		/* Until the handler answered: a streamed body (logs, events)
		 * counts its start, not its life. */
		struct timespec t1;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		h->cfg.observe(h->cfg.ctx, found, method, resp.status,
			       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	}
	enum MHD_Result ret = send_resp(h, conn, &resp);
	httpd_resp_free(&resp);
	return ret;
}

int httpd_parse_listen(const char *listen, char *host, size_t host_n, int *port,
		       struct terr *err)
{
	const char *colon = listen ? strrchr(listen, ':') : NULL;
	if (!colon || colon == listen || (size_t)(colon - listen) >= host_n)
		return terr_set(err, EINVAL, "listen address '%s' is not ADDR:PORT (e.g. 127.0.0.1:8090)",
				listen ? listen : "");
	char *end;
	long p = strtol(colon + 1, &end, 10);
	if (*end || end == colon + 1 || p < 0 || p > 65535)
		return terr_set(err, EINVAL, "listen port in '%s' must be 0..65535", listen);
	memcpy(host, listen, (size_t)(colon - listen));
	host[colon - listen] = '\0';
	*port = (int)p;
	return 0;
}

/* The listening socket, opened here rather than by libmicrohttpd so that a
 * port in use is told apart from other failures. SO_REUSEADDR lets a
 * restarted daemon bind while its old connections linger in TIME_WAIT; on
 * Linux it never lets two sockets listen on one port. SO_REUSEPORT, which
 * would, is left off: with it a second server on a taken port would start
 * and the kernel would split the connections between the two. */
static int listen_socket(const struct sockaddr_in *sa, const char *host, int port, struct terr *err)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return terr_set(err, errno, "cannot open a socket: %s", strerror(errno));
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0 || listen(fd, SOMAXCONN) < 0) {
		int e = errno;
		close(fd);
		if (e == EADDRINUSE)
			return terr_set(err, EADDRINUSE, "port %d on %s is in use by another process", port, host);
		if (e == EADDRNOTAVAIL)
			return terr_set(err, EADDRNOTAVAIL, "cannot listen on %s:%d: no such address on this host",
					host, port);
		return terr_set(err, e, "cannot listen on %s:%d: %s", host, port, strerror(e));
	}
	return fd;
}

/* ---------- Connection limits ----------
 * A connection that has not yet delivered a complete request (a new one,
 * or a kept-alive one between requests) is "waiting". Waiting connections
 * cost a thread each and prove nothing about their client, so they are
 * what a flood is made of (connections that never finish their headers):
 *  - each must complete its request head within header_timeout_s of being
 *    accepted (or of its previous response), and each body chunk must
 *    follow the last within that time; the reaper thread cuts the rest;
 *  - at most HTTPD_WAITING_PER_ADDR per client address and max_conns / 2
 *    in all: a connection over either cap cuts the oldest waiting one (of
 *    that address, or of all), so a flood pushes out its own connections
 *    instead of refusing newcomers, and a client that sends its request
 *    at once (the CLI, the webserver's relays, a browser) is served even
 *    from the flooding address;
 *  - once a request is complete the connection is "active" and only MHD's
 *    idle timeout (timeout_s) applies, so long polls and streams
 *    (GET /v1/events, logs --follow) keep working.
 * "Cutting" is shutdown(2) of the socket: MHD's connection thread sees the
 * end of the stream and closes it itself. MHD reports a connection closed
 * (conn_notify) before it closes the descriptor, and both run under
 * h->lock with the cutting, so a descriptor is never cut after reuse.
 * Active connections are bounded by max_conns and, when set, by
 * per_addr_limit (MHD's own per-address cap, which refuses). */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wait_unlink(struct httpd *h, struct conn_track *t)
{
	if (!t->waiting)
		return;
	if (t->prev)
		t->prev->next = t->next;
	else
		h->wait_head = t->next;
	if (t->next)
		t->next->prev = t->prev;
	else
		h->wait_tail = t->prev;
	t->prev = t->next = NULL;
	t->waiting = false;
	h->n_waiting--;
}

static void wait_append(struct httpd *h, struct conn_track *t)
{
	t->since_ms = now_ms();
	t->prev = h->wait_tail;
	t->next = NULL;
	if (h->wait_tail)
		h->wait_tail->next = t;
	else
		h->wait_head = t;
	h->wait_tail = t;
	t->waiting = true;
	h->n_waiting++;
}

/* Under h->lock. */
static void conn_cut(struct httpd *h, struct conn_track *t)
{
	wait_unlink(h, t);
	t->cut = true;
	shutdown(t->fd, SHUT_RDWR);
}

static bool same_addr(const struct conn_track *a, const struct conn_track *b)
{
	return a->family && a->family == b->family &&
	       !memcmp(a->addr, b->addr, a->family == AF_INET ? 4 : 16);
}

static struct conn_track *conn_track_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

/* The connection's request is complete: no more header deadline. */
static void conn_active(struct MHD_Connection *conn)
{
	struct conn_track *t = conn_track_of(conn);
	if (!t)
		return;
	pthread_mutex_lock(&t->h->lock);
	wait_unlink(t->h, t);
	pthread_mutex_unlock(&t->h->lock);
}

/* again: a response is done and the connection waits for the next request
 * (its deadline starts now). Otherwise: a waiting connection made
 * progress (headers complete, a body chunk), which restarts its clock. */
static void conn_waiting(struct MHD_Connection *conn, bool again)
{
	struct conn_track *t = conn_track_of(conn);
	if (!t)
		return;
	struct httpd *h = t->h;
	pthread_mutex_lock(&h->lock);
	if (!t->cut && (again || t->waiting)) {
		wait_unlink(h, t);
		wait_append(h, t);
	}
	pthread_mutex_unlock(&h->lock);
}

static void conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
			enum MHD_ConnectionNotificationCode code)
{
	struct httpd *h = cls;
	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		struct conn_track *t = *socket_context;
		if (!t)
			return;
		pthread_mutex_lock(&h->lock);
		wait_unlink(h, t);
		pthread_mutex_unlock(&h->lock);
		free(t);
		*socket_context = NULL;
		return;
	}
	struct conn_track *t = calloc(1, sizeof(*t));
	if (!t)
		return;   /* untracked: only MHD's own limits apply to it */
	t->h = h;
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	t->fd = ci ? ci->connect_fd : -1;
	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	if (sa && sa->sa_family == AF_INET) {
		t->family = AF_INET;
		memcpy(t->addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa && sa->sa_family == AF_INET6) {
		t->family = AF_INET6;
		memcpy(t->addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
	if (t->fd < 0) {
		free(t);
		return;
	}
	pthread_mutex_lock(&h->lock);
	wait_append(h, t);
	unsigned same = 0;
	for (struct conn_track *o = h->wait_tail; o; o = o->prev)
		if (same_addr(o, t))
			same++;
	/* Oldest first: the newcomer is last, so it is never its own victim. */
	for (struct conn_track *o = h->wait_head, *next; o && same > HTTPD_WAITING_PER_ADDR; o = next) {
		next = o->next;
		if (o != t && same_addr(o, t)) {
			conn_cut(h, o);
			same--;
		}
	}
	while (h->n_waiting > h->max_waiting && h->wait_head != t)
		conn_cut(h, h->wait_head);
	pthread_mutex_unlock(&h->lock);
	*socket_context = t;
}

/* Cuts waiting connections past their deadline, once a second. */
static void *reaper_main(void *arg)
{
	struct httpd *h = arg;
	pthread_mutex_lock(&h->lock);
	while (!h->stopping) {
		int64_t now = now_ms();
		while (h->wait_head && now - h->wait_head->since_ms >= h->header_timeout_ms)
			conn_cut(h, h->wait_head);
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += 1;
		pthread_cond_timedwait(&h->wake, &h->lock, &until);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Each connection holds a descriptor and a thread: the default cap on
 * connections is a quarter of the descriptors the process may open (the
 * rest are for the store, Docker, other servers in the process), at most
 * HTTPD_MAX_CONNS. Once per process the soft limit on descriptors is
 * raised to the hard one, as an unprivileged process may; select(2),
 * which cannot take descriptors past FD_SETSIZE, is not used (MHD_USE_POLL). */
static unsigned conn_limit(unsigned asked)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, raise_nofile);
	struct rlimit rl;
	rlim_t nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
	rlim_t fit = nofile == RLIM_INFINITY ? HTTPD_MAX_CONNS : nofile / 4;
	rlim_t n = asked ? asked : HTTPD_MAX_CONNS;
	if (n > fit)
		n = fit;
	return n < 16 ? 16 : (unsigned)n;
}

int httpd_start(const struct httpd_config *cfg, struct httpd **out, struct terr *err)
{
	char host[64];
	int port;
	if (httpd_parse_listen(cfg->listen, host, sizeof(host), &port, err) < 0)
		return -EINVAL;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (!strcmp(host, "localhost"))
		strcpy(host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return terr_set(err, EINVAL, "listen address '%s' is not an IPv4 address", host);
	if (!cfg->tls_cert_pem != !cfg->tls_key_pem)
		return terr_set(err, EINVAL, "a TLS certificate and its key go together");
	bool tls = cfg->tls_cert_pem != NULL;
	if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
		return terr_set(err, ENOTSUP, "this libmicrohttpd has no TLS support");
	struct httpd *h = calloc(1, sizeof(*h));
	if (!h)
		return terr_set(err, ENOMEM, "out of memory");
	h->cfg = *cfg;
	pthread_mutex_init(&h->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->wake, &ca);
	pthread_condattr_destroy(&ca);
	unsigned max_conns = conn_limit(cfg->max_conns);
	h->max_waiting = max_conns / 2;
	h->header_timeout_ms = (int64_t)(cfg->header_timeout_s ? cfg->header_timeout_s : HTTPD_HEADER_TIMEOUT_S) * 1000;
	/* A thread per connection, so that a handler may block (a long poll,
	 * an exec) without holding up others; which is also why MHD's
	 * epoll and thread-pool modes, which share a thread among
	 * connections, are not used. */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
	if (tls) {
		h->tls_cert = strdup(cfg->tls_cert_pem);
		h->tls_key = strdup(cfg->tls_key_pem);
		if (!h->tls_cert || !h->tls_key) {
			httpd_stop(h);
			return terr_set(err, ENOMEM, "out of memory");
		}
		flags |= MHD_USE_TLS;
	}
	int fd = listen_socket(&sa, host, port, err);
	if (fd < 0) {
		httpd_stop(h);
		return fd;
	}
	struct sockaddr_in bound;
	socklen_t blen = sizeof(bound);
	h->port = getsockname(fd, (struct sockaddr *)&bound, &blen) == 0 ? ntohs(bound.sin_port) : port;
	/* From here the daemon owns fd: it closes it when it stops, and when
	 * it fails to start. Without TLS the option list ends before the
	 * certificate options. */
	h->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h,
		MHD_OPTION_LISTEN_SOCKET, fd,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, h,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
		MHD_OPTION_CONNECTION_TIMEOUT, cfg->timeout_s ? cfg->timeout_s : 600u,
		MHD_OPTION_NOTIFY_CONNECTION, conn_notify, h,
		MHD_OPTION_CONNECTION_LIMIT, max_conns,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, cfg->per_addr_limit,
		tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, h->tls_cert,
		MHD_OPTION_HTTPS_MEM_KEY, h->tls_key,
		MHD_OPTION_END);
	if (!h->daemon) {
		httpd_stop(h);
		return terr_set(err, EIO, "cannot serve on %s%s", cfg->listen,
				tls ? ": a bad TLS certificate or key?" : "");
	}
	if (pthread_create(&h->reaper, NULL, reaper_main, h) != 0) {
		httpd_stop(h);
		return terr_set(err, EAGAIN, "cannot start a thread");
	}
	h->reaper_running = true;
	*out = h;
	return 0;
}

int httpd_port(const struct httpd *h)
{
	return h->port;
}

void httpd_stop(struct httpd *h)
{
	if (!h)
		return;
	if (h->reaper_running) {
		pthread_mutex_lock(&h->lock);
		h->stopping = true;
		pthread_cond_signal(&h->wake);
		pthread_mutex_unlock(&h->lock);
		pthread_join(h->reaper, NULL);
	}
	if (h->daemon)
		MHD_stop_daemon(h->daemon);
	pthread_cond_destroy(&h->wake);
	pthread_mutex_destroy(&h->lock);
	free(h->tls_cert);
	free(h->tls_key);
	free(h);
}

const char *httpd_header(const struct httpd_req *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *httpd_query(const struct httpd_req *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

struct unknown_arg {
	const char *const *known;
	const char *found;
};

static enum MHD_Result find_unknown(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	(void)value;
	struct unknown_arg *u = cls;
	for (size_t i = 0; u->known[i]; i++)
		if (!strcmp(u->known[i], key))
			return MHD_YES;
	u->found = key;
	return MHD_NO;
}

const char *httpd_query_unknown(const struct httpd_req *req, const char *const *known)
{
	struct unknown_arg u = {known, NULL};
	MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, find_unknown, &u);
	return u.found;
}

const char *httpd_cookie(const struct httpd_req *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_COOKIE_KIND, name);
}

const char *httpd_peer_addr(const struct httpd_req *req, char *buf, size_t n)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	const char *ok = NULL;
	if (sa && sa->sa_family == AF_INET)
		ok = inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)n);
	else if (sa && sa->sa_family == AF_INET6)
		ok = inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)n);
	if (!ok)
		util_strlcpy(buf, "unknown", n);
	return buf;
}

void httpd_json(struct httpd_resp *resp, int status, json_t *body)
{
	json_decref(resp->json);
	free(resp->bytes);
	resp->bytes = NULL;
	resp->json = body;
	resp->status = status;
}

int httpd_bytes(struct httpd_resp *resp, int status, const char *ctype, const void *buf, size_t len)
{
	char *copy = malloc(len + 1);
	if (!copy)
		return resp_oom(resp);
	if (len)
		memcpy(copy, buf, len);
	copy[len] = '\0';
	return httpd_bytes_take(resp, status, ctype, copy, len);
}

int httpd_bytes_take(struct httpd_resp *resp, int status, const char *ctype, char *copy, size_t len)
{
	char *type = strdup(ctype ? ctype : "application/octet-stream");
	if (!type) {
		free(copy);
		return resp_oom(resp);
	}
	json_decref(resp->json);
	resp->json = NULL;
	free(resp->text);
	resp->text = NULL;
	free(resp->bytes);
	free(resp->bytes_type);
	resp->bytes = copy;
	resp->bytes_len = len;
	resp->bytes_type = type;
	resp->status = status;
	return 0;
}

int httpd_resp_header(struct httpd_resp *resp, const char *name, const char *value)
{
	struct httpd_resp_headers *hd = calloc(1, sizeof(*hd));
	if (hd) {
		hd->name = strdup(name);
		hd->value = strdup(value);
	}
	if (!hd || !hd->name || !hd->value) {
		if (hd) {
			free(hd->name);
			free(hd->value);
			free(hd);
		}
		return resp_oom(resp);
	}
	struct httpd_resp_headers **tail = &resp->headers;
	while (*tail)
		tail = &(*tail)->next;
	*tail = hd;
	return 0;
}

void httpd_error(struct httpd_resp *resp, int status, const char *code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* A message may quote what the client sent (a path, a name): bytes
	 * that are not UTF-8 become U+FFFD, or the body would be empty. */
	httpd_json(resp, status, json_pack("{s:{s:s,s:o}}", "error", "code", code, "message",
					   jsonutil_string_lossy(msg, strlen(msg))));
}

void httpd_error_terr(struct httpd_resp *resp, const struct terr *err)
{
	int status = 500;
	const char *code = "internal";
	switch (err->code) {
	case EINVAL: case ERANGE: case ENAMETOOLONG: status = 400; code = "invalid_argument"; break;
	case EACCES: status = 401; code = "unauthenticated"; break;
	case EPERM: status = 403; code = "forbidden"; break;
	case ENOENT: status = 404; code = "not_found"; break;
	case EEXIST: case EBUSY: case EALREADY: status = 409; code = "conflict"; break;
	case E2BIG: status = 413; code = "too_large"; break;
	case EDOM: status = 422; code = "unsatisfiable"; break;
	case EAGAIN: case ECONNREFUSED: case ETIMEDOUT: case EHOSTUNREACH: status = 503; code = "unavailable"; break;
	default: break;
	}
	httpd_error(resp, status, code, "%s", err->msg[0] ? err->msg : "internal error");
}
