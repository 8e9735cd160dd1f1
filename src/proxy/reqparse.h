/* Incremental HTTP/1.x request framing for the app proxy (docs/apps.md,
 * "The proxy"). Pure: no I/O, no allocation beyond the head buffer.
 *
 * Written by hand because the proxy must see each request of a kept-alive
 * connection (to check its cookie) while forwarding every byte exactly as
 * the browser sent it; a full HTTP library would rewrite the message.
 *
 * Feed bytes as they arrive. A request head (request line and headers, at
 * most REQP_MAX_HEAD bytes) is collected into p->head; when complete,
 * reqparse_feed returns REQP_HEAD and the parsed fields are in p->req.
 * Then the body follows by Content-Length or chunked encoding: its bytes
 * (chunk framing included) are consumed as they are and reported as body
 * bytes, to be forwarded unchanged; REQP_END marks the request's last
 * byte, and the next call starts the next request's head. A request with
 * an Upgrade header (a WebSocket handshake) makes the parser stop after
 * its head: every later byte is REQP_RAW. */
#ifndef TESSERA_PROXY_REQPARSE_H
#define TESSERA_PROXY_REQPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REQP_MAX_HEAD 16384
#define REQP_MAX_HEADERS 100

enum reqp_event {
	REQP_MORE,   /* all input used, the current part goes on */
	REQP_HEAD,   /* a head is complete (p->req, p->head); input after it unused */
	REQP_END,    /* the request's last body byte was used */
	REQP_ERROR,  /* malformed: p->status (400, 431, 501) and p->why */
};

enum reqp_state {
	REQP_S_HEAD, REQP_S_LENGTH, REQP_S_CHUNK_SIZE, REQP_S_CHUNK_EXT, REQP_S_CHUNK_SIZE_LF,
	REQP_S_CHUNK_DATA, REQP_S_CHUNK_CR, REQP_S_CHUNK_LF, REQP_S_TRAILER, REQP_S_TRAILER_LF,
	REQP_S_TRAILER_LINE, REQP_S_RAW, REQP_S_ERROR,
};

/* Offsets into p->head of a parsed head; strings are NUL-terminated in
 * place of the CR that ended them, so p->head is no longer the bytes
 * received: reqparse_head_bytes gives those back. */
struct reqp_request {
	const char *method;
	const char *target;       /* as sent: "/path?query" */
	int minor;                /* HTTP/1.<minor> */
	size_t n_headers;
	const char *names[REQP_MAX_HEADERS];
	const char *values[REQP_MAX_HEADERS];  /* trimmed */
	bool chunked;
	bool upgrade;             /* an Upgrade header or CONNECT: bytes are raw after the head */
	bool connect;             /* CONNECT: a tunnel to the app's port (docs/apps.md) */
	bool close;               /* Connection: close, or HTTP/1.0 without keep-alive */
	uint64_t content_length;
};

struct reqparse {
	enum reqp_state state;
	char *head;               /* owned, grows to REQP_MAX_HEAD + 1 */
	char *raw_head;           /* owned: the head's bytes as received */
	size_t head_len, head_cap;
	size_t done_len;          /* length of the last complete head */
	uint64_t remaining;       /* body bytes of the current length or chunk */
	unsigned trailer_len;     /* bytes in the current trailer line */
	bool in_body;             /* the bytes the last call used were body bytes */
	struct reqp_request req;
	int status;               /* on REQP_ERROR */
	const char *why;          /* on REQP_ERROR, static text */
};

void reqparse_init(struct reqparse *p);
/* Frees the head buffers; p can be reused after reqparse_init. */
void reqparse_free(struct reqparse *p);

/* Consumes a prefix of data[0..len) and says what it completed; *used
 * gets how many bytes were taken. After REQP_HEAD the caller reads p->req
 * and p->head (valid until the next call), then calls again with the rest.
 * p->in_body tells whether the used bytes belong to a body (forward them)
 * or to a head (held in p->head until REQP_HEAD). In REQP_S_RAW every
 * byte is used and reported as body (in_body true). */
enum reqp_event reqparse_feed(struct reqparse *p, const char *data, size_t len, size_t *used);

/* The head as received (request line to the empty line), after
 * REQP_HEAD; *len its length. Borrowed from p. */
const char *reqparse_head_bytes(const struct reqparse *p, size_t *len);

/* A header's value (first of that name, case-insensitive) or NULL. */
const char *reqparse_header(const struct reqp_request *r, const char *name);

/* Frees the last head's buffers once the caller is done with it (an
 * upgraded connection may stay open for hours): p->req keeps its flags
 * and lengths, its strings become NULL. */
void reqparse_release_head(struct reqparse *p);

/* True while a request's head has begun but is not complete. */
bool reqparse_head_started(const struct reqparse *p);

/* The names Tessera's own cookies begin with: the web UI's login
 * (tessera_session, __Host-tessera_session under TLS) and the proxy's
 * app cookies (tessera_app*). Each contains "tessera_". */
#define REQPARSE_OWN_COOKIE_PREFIXES "tessera_", "__Host-tessera_", "__Secure-tessera_"

/* Copies a head as received (head[0..len)) into out (2 * len + 16
 * bytes) without Tessera's own cookies (REQPARSE_OWN_COOKIE_PREFIXES),
 * dropping a Cookie line left empty; the rest is byte for byte the same.
 * Returns the new length. No cookie of Tessera's reaches an app: a
 * browser sends a host's cookies to every port of it, so an app served
 * on the web UI's host would otherwise receive the user's login, and in
 * port mode every other app's cookie, and could replay them (docs/
 * security.md, "App links and the login cookie"). */
size_t reqparse_strip_cookies(const char *head, size_t len, char *out);

#endif
