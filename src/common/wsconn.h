/* A WebSocket client over a plain TCP socket, for `tessera session shell`
 * (docs/apps.md, "The terminal protocol"), and the one-shot HTTP GET that
 * redeems an app URL's token for the proxy's cookie.
 *
 * Written on the socket rather than with libcurl: the CLI needs the
 * redirect's Set-Cookie without following it, and a connection it can
 * poll together with stdin; libcurl's WebSocket support is too recent for
 * the distributions we build on. Frames come from common/ws.h.
 *
 * The pure pieces (URL, request, response head, frame reader, frame
 * encoding) take buffers and touch no socket, so tests/common/test_wsconn.c
 * checks them byte for byte; wsconn_open / wsconn_http_get do the I/O. */
#ifndef TESSERA_COMMON_WSCONN_H
#define TESSERA_COMMON_WSCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/ws.h"

/* Longest response head (status line and headers) read before giving up:
 * the proxy's answers have a handful of headers. */
#define WSCONN_MAX_HEAD 16384

/* ---- URLs ---- */

/* An "http://HOST[:PORT]/PATH?QUERY" URL taken apart. */
struct wsconn_url {
	char host[256];      /* a name, an IPv4 address or an IPv6 one without [] */
	char port[6];        /* "80" when the URL has none */
	char authority[272]; /* HOST[:PORT] as the URL wrote it, for Host: and Origin: */
	char path[2048];     /* "/..." with the query; "/" when the URL has none */
};

/* Parses url; only http:// is accepted (the proxy's app URLs, docs/apps.md).
 * -EINVAL with a message for anything else (another scheme, no host, a
 * port that is not 1..65535, parts too long, spaces or control bytes). */
int wsconn_parse_url(const char *url, struct wsconn_url *u, struct terr *err);

/* ---- HTTP response heads ---- */

/* Length of the head in buf[0..n) including its final CRLF CRLF, or 0
 * while it is incomplete. */
size_t wsconn_head_len(const char *buf, size_t n);

/* The status code of a head ("HTTP/1.1 101 ..."); -EPROTO when the first
 * line is not an HTTP status line. */
int wsconn_head_status(const char *head, size_t len, struct terr *err);

/* Value of the first header `name` (case-insensitive) in the head, with
 * blanks around it trimmed, copied into out (cut at n-1 bytes); `index`
 * picks the index-th such header (0 first), for Set-Cookie. Returns the
 * value's full length, or -ENOENT when there is no such header. */
int wsconn_head_header(const char *head, size_t len, const char *name, unsigned index, char *out,
		       size_t n);

/* The cookie a proxy's setup answer sets: the `NAME=VALUE` part of the
 * first Set-Cookie whose name starts with "tessera_app" (docs/apps.md:
 * tessera_app_<PORT>, or tessera_app in host mode), malloc'd into *cookie
 * (caller frees). -ENOENT when the answer sets none. */
int wsconn_setup_cookie(const char *head, size_t len, char **cookie, struct terr *err);

/* A readable one-line summary of an HTML or text error page: tags
 * dropped, entities &amp; &lt; &gt; &quot; &#39; decoded, blanks
 * collapsed, cut to n-1 bytes (with "..." when cut). The <title> and
 * <head> are skipped when there is a body. */
void wsconn_page_text(const char *body, size_t len, char *out, size_t n);

/* Decodes a chunked body (RFC 9112 7.1) from in[0..n) into out (at most
 * cap bytes kept). Returns the decoded length so far, with *complete set
 * once the last (zero-size) chunk is in; -1 when the bytes are not
 * chunked encoding. */
long wsconn_dechunk(const char *in, size_t n, char *out, size_t cap, bool *complete);

/* ---- the handshake ---- */

/* The upgrade request for path (with its query) on authority (the Host
 * header; Origin is http://authority), with key (ws_client_key) and a
 * Cookie header when cookie is not NULL. malloc'd into *out. -EINVAL when
 * a value would break the request (CR, LF). */
int wsconn_build_request(const char *authority, const char *path, const char *key, const char *cookie,
			 char **out, struct terr *err);

/* Checks the server's answer head to the upgrade request sent with key:
 * status 101, `Upgrade: websocket`, `Connection` naming upgrade and the
 * right Sec-WebSocket-Accept. *status gets the status (0 when none could
 * be read). Returns 0 when upgraded; -EPROTO with a message otherwise
 * (also for a status other than 101, which the caller may read in
 * *status to say more). */
int wsconn_check_response(const char *head, size_t len, const char *key, int *status, struct terr *err);

/* ---- frames ---- */

/* One frame to send, masked as a client's must be: header and masked
 * payload into out, which holds at least WS_MAX_HEADER + len bytes.
 * Returns the frame's length. mask: 4 bytes (random in real use). */
size_t wsconn_encode(uint8_t *out, enum ws_opcode op, const void *payload, size_t len, const uint8_t mask[4]);

/* A message read: a data message (text or binary, its fragments joined)
 * or a control frame (ping, pong, close), which may arrive between the
 * fragments of a data message. data points into the reader and is valid
 * until the next wsconn_reader_* call. */
struct wsconn_msg {
	enum ws_opcode opcode;   /* WS_OP_TEXT, _BINARY, _CLOSE, _PING, _PONG */
	const uint8_t *data;
	size_t len;
};

/* Bytes from the server, cut into messages. Server frames must be
 * unmasked (RFC 6455 5.1); a message longer than max_msg is refused. */
struct wsconn_reader {
	uint8_t *buf;        /* received bytes not yet consumed; owned */
	size_t len, cap;
	size_t off;          /* start of the unconsumed bytes in buf */
	uint8_t *msg;        /* the data message being assembled; owned */
	size_t msg_len, msg_cap;
	enum ws_opcode msg_op;
	bool in_msg;         /* a first fragment came, its last has not */
	uint8_t ctrl[WS_CONTROL_MAX];
	uint64_t max_msg;
};

void wsconn_reader_init(struct wsconn_reader *r, uint64_t max_msg);
void wsconn_reader_free(struct wsconn_reader *r);

/* Appends n received bytes. -ENOMEM. */
int wsconn_reader_feed(struct wsconn_reader *r, const void *data, size_t n, struct terr *err);

/* Takes the next whole message from the bytes fed so far.
 * RET: 1 with *m filled; 0 when more bytes are needed; -EPROTO (a frame
 * ws_parse_header refuses, a continuation with no message begun, a new
 * data frame inside a fragmented message), -EMSGSIZE or -ENOMEM with a
 * message. After an error the reader is unusable (the connection must
 * be dropped). */
int wsconn_reader_next(struct wsconn_reader *r, struct wsconn_msg *m, struct terr *err);

/* A close frame's payload: its status code (1005 when it has none, as
 * RFC 6455 7.1.5 says) and reason (NUL-terminated, cut to n-1 bytes). */
void wsconn_close_info(const uint8_t *data, size_t len, int *code, char *reason, size_t n);

/* ---- connections ---- */

struct wsconn {
	int fd;                 /* -1 when closed */
	struct wsconn_reader rd;
};

/* Connects to u's host and port and upgrades the connection for u->path
 * (the path with its query, as in the URL). cookie: a "NAME=VALUE" Cookie
 * header value, or NULL. timeout_ms bounds the connect and the handshake.
 * On success (0) c is open: bytes that followed the answer's head are
 * already in c->rd. On failure c is closed and *status holds the HTTP
 * status when the server answered with one other than 101 (0 otherwise),
 * with err saying why: for a status, the text of its page (body read up
 * to 16 KiB). */
int wsconn_open(struct wsconn *c, const struct wsconn_url *u, const char *cookie, long timeout_ms,
		int *status, struct terr *err);

/* Sends one frame (masked with a fresh random mask). Blocks until it is
 * written. -errno when the connection failed (EPIPE: closed). */
int wsconn_send(struct wsconn *c, enum ws_opcode op, const void *payload, size_t len, struct terr *err);

/* Reads what the socket has (one recv) into c->rd. Returns the number of
 * bytes read, 0 at end of stream, -errno on failure (-EAGAIN: nothing
 * there on a non-blocking socket). */
int wsconn_recv(struct wsconn *c, struct terr *err);

void wsconn_close(struct wsconn *c);

/* GET u->path on u's host and port with Connection: close, without
 * following a redirect. On 0: *status, *head (the response head,
 * NUL-terminated) and *body (at most 16 KiB of it, NUL-terminated), both
 * malloc'd (caller frees). timeout_ms bounds the whole exchange. */
int wsconn_http_get(const struct wsconn_url *u, long timeout_ms, int *status, char **head, char **body,
		    struct terr *err);

/* Asks u's host and port for a tunnel: `CONNECT target HTTP/1.1` with
 * cookie ("NAME=VALUE", or NULL); timeout_ms bounds the connect and the
 * answer. On 200: 0, the connected socket in *fd_out (blocking) and the
 * bytes that followed the answer's head, already the tunnel's, in
 * *extra (malloc'd, *n_extra of them). Otherwise *status holds the HTTP
 * status when the server answered with one (0 otherwise) and err says
 * why: for a status, the text of its page. */
int wsconn_http_connect(const struct wsconn_url *u, const char *target, const char *cookie, long timeout_ms,
			int *fd_out, char **extra, size_t *n_extra, int *status, struct terr *err);

#endif
