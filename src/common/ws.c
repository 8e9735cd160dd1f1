/* WebSocket frame headers and handshake key (ws.h). libc only. */
#include "common/ws.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

/* ---------- SHA-1 (FIPS 180-4, section 6.1) ---------- */

/* By hand because the runner is static against libc alone: OpenSSL's
 * static libcrypto would add megabytes and NSS-calling objects to every
 * container's PID 1 for 20 bytes of handshake. tests/common/test_ws.c
 * checks it against OpenSSL's SHA-1. */

struct sha1_ctx {
	uint32_t h[5];
	uint64_t total;       /* bytes hashed so far */
	uint8_t block[64];
	size_t used;          /* bytes in block */
};

static uint32_t rol32(uint32_t x, unsigned n)
{
	return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const uint8_t b[64])
{
	uint32_t w[80];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
		       (uint32_t)b[4 * i + 2] << 8 | (uint32_t)b[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol32(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
	for (int i = 0; i < 80; i++) {
		uint32_t f, k;
		if (i < 20) {
			f = (bb & c) | (~bb & d);
			k = 0x5A827999;
		} else if (i < 40) {
			f = bb ^ c ^ d;
			k = 0x6ED9EBA1;
		} else if (i < 60) {
			f = (bb & c) | (bb & d) | (c & d);
			k = 0x8F1BBCDC;
		} else {
			f = bb ^ c ^ d;
			k = 0xCA62C1D6;
		}
		uint32_t t = rol32(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = rol32(bb, 30);
		bb = a;
		a = t;
	}
	h[0] += a;
	h[1] += bb;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

static void sha1_update(struct sha1_ctx *s, const uint8_t *p, size_t n)
{
	s->total += n;
	while (n) {
		size_t take = 64 - s->used < n ? 64 - s->used : n;
		memcpy(s->block + s->used, p, take);
		s->used += take;
		p += take;
		n -= take;
		if (s->used == 64) {
			sha1_block(s->h, s->block);
			s->used = 0;
		}
	}
}

void ws_sha1(const void *data, size_t n, uint8_t out[20])
{
	struct sha1_ctx s = {
		.h = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0},
	};
	sha1_update(&s, data, n);
	uint64_t bits = s.total * 8;
	uint8_t pad = 0x80;
	sha1_update(&s, &pad, 1);
	pad = 0;
	while (s.used != 56)
		sha1_update(&s, &pad, 1);
	uint8_t len[8];
	for (int i = 0; i < 8; i++)
		len[i] = (uint8_t)(bits >> (56 - 8 * i));
	sha1_update(&s, len, 8);
	for (int i = 0; i < 5; i++) {
		out[4 * i] = (uint8_t)(s.h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(s.h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(s.h[i] >> 8);
		out[4 * i + 3] = (uint8_t)s.h[i];
	}
}

/* ---------- base64 (RFC 4648, with padding) ---------- */

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* out holds 4 * ceil(n / 3) + 1 bytes. */
static void b64_encode(const uint8_t *in, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < n)
			v |= in[i + 2];
		out[o++] = b64_alphabet[(v >> 18) & 63];
		out[o++] = b64_alphabet[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? b64_alphabet[v & 63] : '=';
	}
	out[o] = '\0';
}

static bool b64_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '+' || c == '/';
}

/* ---------- handshake ---------- */

int ws_accept_key(const char *key, char out[WS_ACCEPT_LEN + 1], struct terr *err)
{
	/* RFC 6455 4.1: the key is 16 random bytes in base64, so 22
	 * characters of the alphabet and "==". */
	if (!key || strlen(key) != 24 || key[22] != '=' || key[23] != '=')
		return terr_set(err, EINVAL, "Sec-WebSocket-Key must be 16 bytes in base64 (24 characters)");
	for (int i = 0; i < 22; i++)
		if (!b64_char(key[i]))
			return terr_set(err, EINVAL, "Sec-WebSocket-Key must be 16 bytes in base64 (24 characters)");
	char buf[24 + sizeof(WS_GUID)];
	memcpy(buf, key, 24);
	memcpy(buf + 24, WS_GUID, sizeof(WS_GUID) - 1);
	uint8_t digest[20];
	ws_sha1(buf, 24 + sizeof(WS_GUID) - 1, digest);
	b64_encode(digest, sizeof(digest), out);
	return 0;
}

int ws_client_key(char out[25], struct terr *err)
{
	uint8_t raw[16];
	size_t got = 0;
	while (got < sizeof(raw)) {
		ssize_t r = getrandom(raw + got, sizeof(raw) - got, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return terr_set(err, errno, "no random bytes for the WebSocket key: %s", strerror(errno));
		}
		got += (size_t)r;
	}
	b64_encode(raw, sizeof(raw), out);
	return 0;
}

/* ---------- frames (RFC 6455 5.2) ---------- */

static bool opcode_known(unsigned op)
{
	return op == WS_OP_CONT || op == WS_OP_TEXT || op == WS_OP_BINARY || op == WS_OP_CLOSE ||
	       op == WS_OP_PING || op == WS_OP_PONG;
}

int ws_parse_header(const uint8_t *buf, size_t n, bool want_masked, uint64_t max_len,
		    struct ws_frame *f, struct terr *err)
{
	if (n < 2)
		return 0;
	unsigned op = buf[0] & 0x0F;
	if (buf[0] & 0x70)
		return terr_set(err, EPROTO, "WebSocket frame with reserved bits set (no extension was agreed)");
	if (!opcode_known(op))
		return terr_set(err, EPROTO, "WebSocket frame with unknown opcode 0x%x", op);
	bool fin = buf[0] & 0x80;
	bool masked = buf[1] & 0x80;
	if (masked != want_masked)
		return terr_set(err, EPROTO, want_masked ? "a client's WebSocket frames must be masked"
							 : "a server's WebSocket frames must not be masked");
	uint64_t len = buf[1] & 0x7F;
	size_t hl = 2;
	if (len == 126) {
		if (n < 4)
			return 0;
		len = (uint64_t)buf[2] << 8 | buf[3];
		hl = 4;
	} else if (len == 127) {
		if (n < 10)
			return 0;
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | buf[2 + i];
		if (len >> 63)
			return terr_set(err, EPROTO, "WebSocket frame length with its top bit set");
		hl = 10;
	}
	if (op & 0x8) {
		if (!fin)
			return terr_set(err, EPROTO, "fragmented WebSocket control frame");
		if (len > WS_CONTROL_MAX)
			return terr_set(err, EPROTO, "WebSocket control frame longer than 125 bytes");
	}
	if (len > max_len)
		return terr_set(err, EMSGSIZE, "WebSocket frame of %llu bytes is over the limit of %llu",
				(unsigned long long)len, (unsigned long long)max_len);
	if (masked) {
		if (n < hl + 4)
			return 0;
		memcpy(f->mask, buf + hl, 4);
		hl += 4;
	} else {
		memset(f->mask, 0, sizeof(f->mask));
	}
	f->fin = fin;
	f->opcode = (enum ws_opcode)op;
	f->masked = masked;
	f->len = len;
	f->header_len = hl;
	return (int)hl;
}

void ws_mask(uint8_t *data, size_t n, const uint8_t mask[4], uint64_t offset)
{
	for (size_t i = 0; i < n; i++)
		data[i] ^= mask[(offset + i) & 3];
}

size_t ws_write_header(uint8_t *out, bool fin, enum ws_opcode opcode, uint64_t len,
		       const uint8_t *mask)
{
	size_t hl = 2;
	out[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0F));
	uint8_t mbit = mask ? 0x80 : 0;
	if (len < 126) {
		out[1] = (uint8_t)(mbit | len);
	} else if (len <= 0xFFFF) {
		out[1] = mbit | 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		hl = 4;
	} else {
		out[1] = mbit | 127;
		for (int i = 0; i < 8; i++)
			out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
		hl = 10;
	}
	if (mask) {
		memcpy(out + hl, mask, 4);
		hl += 4;
	}
	return hl;
}
