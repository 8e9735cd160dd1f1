/* Fuzz target: what the CLI's session shell reads from the app proxy and
 * the runner (src/common/wsconn.h). The first byte picks the parser:
 *   0: a stream of server frames, fed in pieces (the second byte sets the
 *      piece size) to the message reader;
 *   1: an HTTP answer's head and body: the upgrade check, the setup's
 *      cookie, the error page's one-line text;
 *   2: a chunked body;
 *   3: an app URL.
 * Besides crashes, a result outside the contract aborts: a message over
 * the reader's limit or with a wrong opcode, a summary that is not one
 * line within its buffer, more decoded bytes than room, a URL taken apart
 * into a port outside 1..65535 or a path not starting with '/'. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/wsconn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MSG 4096

static void fuzz_reader(const uint8_t *p, size_t n)
{
	if (!n)
		return;
	size_t piece = (size_t)p[0] % 64 + 1;
	p++;
	n--;
	struct wsconn_reader r;
	struct terr err = {0};
	wsconn_reader_init(&r, MAX_MSG);
	size_t fed = 0;
	for (;;) {
		struct wsconn_msg m;
		int res = wsconn_reader_next(&r, &m, &err);
		if (res < 0) {
			if (!err.msg[0])
				abort();  /* a refusal says why */
			break;
		}
		if (res == 1) {
			if (m.len > MAX_MSG)
				abort();
			if (m.opcode != WS_OP_TEXT && m.opcode != WS_OP_BINARY && m.opcode != WS_OP_CLOSE &&
			    m.opcode != WS_OP_PING && m.opcode != WS_OP_PONG)
				abort();
			if (m.opcode & 0x8) {
				if (m.len > WS_CONTROL_MAX)
					abort();
				if (m.opcode == WS_OP_CLOSE) {
					int code;
					char reason[WS_CONTROL_MAX];
					wsconn_close_info(m.data, m.len, &code, reason, sizeof(reason));
					if (strlen(reason) >= sizeof(reason) || code < 0 || code > 65535)
						abort();
				}
			}
			continue;
		}
		if (fed == n)
			break;
		size_t k = n - fed < piece ? n - fed : piece;
		if (wsconn_reader_feed(&r, p + fed, k, &err) < 0)
			break;
		fed += k;
	}
	wsconn_reader_free(&r);
}

static void fuzz_answer(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		abort();
	memcpy(s, p, n);
	s[n] = '\0';
	size_t hl = wsconn_head_len(s, n);
	if (hl > n)
		abort();
	size_t head = hl ? hl : n;
	struct terr err = {0};
	int status = -1;
	/* The RFC's example key: the check runs to its end on a good answer. */
	int r = wsconn_check_response(s, head, "dGhlIHNhbXBsZSBub25jZQ==", &status, &err);
	if ((r == 0 && status != 101) || (r < 0 && !err.msg[0]) || status < 0 || status > 999)
		abort();
	char *cookie = NULL;
	if (wsconn_setup_cookie(s, head, &cookie, &err) == 0) {
		if (!cookie || strncmp(cookie, "tessera_app", 11) || !strchr(cookie, '=') || strpbrk(cookie, "\r\n;"))
			abort();
	}
	free(cookie);
	char text[64];
	wsconn_page_text(s + head, n - head, text, sizeof(text));
	size_t tl = strlen(text);
	if (tl >= sizeof(text))
		abort();
	for (size_t i = 0; i < tl; i++)
		if ((unsigned char)text[i] < ' ')
			abort();
	free(s);
}

static void fuzz_chunks(const uint8_t *p, size_t n)
{
	char out[128];
	bool complete;
	long r = wsconn_dechunk((const char *)p, n, out, sizeof(out), &complete);
	if (r > (long)sizeof(out) || r > (long)n)
		abort();
}

static void fuzz_url(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		abort();
	memcpy(s, p, n);
	s[n] = '\0';
	struct wsconn_url u;
	struct terr err = {0};
	if (wsconn_parse_url(s, &u, &err) == 0) {
		long port = strtol(u.port, NULL, 10);
		if (port < 1 || port > 65535 || u.path[0] != '/' || !u.host[0] || strpbrk(u.path, " \r\n"))
			abort();
	} else if (!err.msg[0]) {
		abort();
	}
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 4) {
	case 0: fuzz_reader(data + 1, size - 1); break;
	case 1: fuzz_answer(data + 1, size - 1); break;
	case 2: fuzz_chunks(data + 1, size - 1); break;
	default: fuzz_url(data + 1, size - 1); break;
	}
	return 0;
}
