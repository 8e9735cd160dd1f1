/* The runner's app port protocol (docs/apps.md, "The runner's app port"):
 * finding the `TESSERA-APP/1 <secret> <target>` line (parsed by
 * common/apphello.h, the codec the proxy writes it with), the secret's
 * comparison, and the HTTP request head the terminal's WebSocket upgrade
 * comes in.
 *
 * Pure functions, unit-tested in tests/runner/test_proto.c. */
#ifndef TESSERA_RUNNER_PROTO_H
#define TESSERA_RUNNER_PROTO_H

#include <stdbool.h>
#include <stddef.h>

#include "common/apphello.h"
#include "common/err.h"
#include "runner/appdef.h"

#define PROTO_LINE_MAX APPHELLO_LINE_MAX      /* a line, \r\n included */
#define PROTO_SECRET_LEN APPHELLO_SECRET_LEN  /* hex characters */
#define PROTO_HEAD_MAX 8192      /* an HTTP request head */
#define PROTO_TERM_ID_MAX 32

/* Looks for the end of the line in buf[0..n): its length without \r\n in
 * *line_len and the bytes taken with \r\n in *used. Returns 1 when a line
 * is whole, 0 when more bytes are needed, -EMSGSIZE when PROTO_LINE_MAX
 * bytes hold no line end. A bare \n ends a line too. */
int proto_find_line(const char *buf, size_t n, size_t *line_len, size_t *used);

/* a and b, each PROTO_SECRET_LEN characters, equal? In time that does not
 * depend on where they differ. */
bool proto_secret_equal(const char *a, const char *b);

/* Reads a secret file's content: 64 hex characters, one trailing newline
 * allowed. -EINVAL otherwise. */
int proto_parse_secret(const char *buf, size_t n, char out[PROTO_SECRET_LEN + 1], struct terr *err);

struct proto_http_req {
	char method[16];
	char path[256];              /* without the query */
	char query[1024];
	bool upgrade_websocket;      /* Upgrade: websocket */
	bool connection_upgrade;     /* Connection: ..., upgrade */
	char ws_key[64];             /* Sec-WebSocket-Key, "" when absent */
	char ws_version[8];          /* Sec-WebSocket-Version */
};

/* Finds the end of a request head (\r\n\r\n) in buf[0..n): 1 and its
 * length with the blank line in *used; 0 when more bytes are needed;
 * -EMSGSIZE past PROTO_HEAD_MAX. */
int proto_find_head(const char *buf, size_t n, size_t *used);

/* Parses a request head (the request line and headers). -EINVAL for what
 * is not an HTTP/1.x request. */
int proto_parse_http_head(const char *buf, size_t n, struct proto_http_req *r, struct terr *err);

/* The value of key in a query string (a=1&b=2), %XX and + decoded, into
 * out. 1 when present, 0 when absent, -EINVAL when too long for out or
 * when it decodes to a NUL byte (%00). */
int proto_query_get(const char *query, const char *key, char *out, size_t n);

struct proto_term_query {
	char term[PROTO_TERM_ID_MAX + 1];  /* "new" for a shell of its own */
	int cols, rows;                    /* 0 when not given */
};

/* term (default main; [A-Za-z0-9_-]{1,32}), cols and rows (1-10000). */
int proto_parse_term_query(const char *query, struct proto_term_query *q, struct terr *err);

#endif
