/* Fuzz target: WebSocket frame headers (common/ws.h), which the runner
 * reads from browsers and the CLI reads from the runner. The first byte
 * picks the side (masked frames wanted or not); the rest is a stream of
 * frames walked header by header: whatever the bytes, a header must lie
 * inside what was given, a control frame's payload is at most 125 bytes,
 * and unmasking a payload in two pieces equals unmasking it at once. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool want_masked = data[0] & 1;
	const uint8_t *p = data + 1;
	size_t n = size - 1;
	while (n) {
		struct ws_frame f;
		struct terr err = {0};
		int hl = ws_parse_header(p, n, want_masked, 1 << 20, &f, &err);
		if (hl <= 0)
			break;
		if ((size_t)hl > n || (size_t)hl != f.header_len || f.masked != want_masked)
			abort();
		if ((f.opcode & 0x8) && (f.len > WS_CONTROL_MAX || !f.fin))
			abort();
		p += hl;
		n -= (size_t)hl;
		size_t take = f.len < n ? (size_t)f.len : n;
		if (f.masked && take) {
			uint8_t *a = malloc(take), *b = malloc(take);
			if (!a || !b)
				abort();
			memcpy(a, p, take);
			memcpy(b, p, take);
			ws_mask(a, take, f.mask, 0);
			size_t half = take / 2;
			ws_mask(b, half, f.mask, 0);
			ws_mask(b + half, take - half, f.mask, half);
			if (memcmp(a, b, take))
				abort();
			free(a);
			free(b);
		}
		p += take;
		n -= take;
	}
	uint8_t key_out[WS_ACCEPT_LEN + 1];
	char key[25];
	if (size >= 24) {
		memcpy(key, data + size - 24, 24);
		key[24] = '\0';
		struct terr err = {0};
		if (ws_accept_key(key, (char *)key_out, &err) == 0 && strlen((char *)key_out) != WS_ACCEPT_LEN)
			abort();
	}
	return 0;
}
