/* WebSocket (RFC 6455): frame headers and the handshake's accept key.
 *
 * libc only: the static runner (src/runner) serves the terminal with it,
 * the CLI's `session shell` is a client with it. Written here rather than
 * taken from libwebsockets, whose own event loop and connection handling
 * neither of them can use; a frame header is a few bytes.
 *
 * Server frames are sent unmasked, client frames masked (RFC 6455 5.3). */
#ifndef TESSERA_COMMON_WS_H
#define TESSERA_COMMON_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

enum ws_opcode {
	WS_OP_CONT = 0x0,
	WS_OP_TEXT = 0x1,
	WS_OP_BINARY = 0x2,
	WS_OP_CLOSE = 0x8,
	WS_OP_PING = 0x9,
	WS_OP_PONG = 0xA,
};

#define WS_MAX_HEADER 14          /* 2 + 8 (length) + 4 (mask) */
#define WS_ACCEPT_LEN 28          /* base64 of a SHA-1 */
#define WS_CONTROL_MAX 125        /* payload limit of a control frame */

struct ws_frame {
	bool fin;
	enum ws_opcode opcode;
	bool masked;
	uint8_t mask[4];
	uint64_t len;        /* payload length */
	size_t header_len;   /* bytes of header before the payload */
};

/* Reads a frame header from buf[0..n).
 * RET: the header's length (> 0, also in f->header_len) when it is whole;
 *      0 when more bytes are needed; -EPROTO with a message in err for a
 *      frame no peer may send: reserved bits set, an unknown opcode, a
 *      control frame fragmented or longer than 125 bytes, a 64-bit length
 *      with its top bit set, a payload over max_len (-EMSGSIZE), or
 *      masking other than `want_masked` says (a server gets masked frames
 *      only, a client unmasked only). */
int ws_parse_header(const uint8_t *buf, size_t n, bool want_masked, uint64_t max_len,
		    struct ws_frame *f, struct terr *err);

/* XORs data[0..n) with the mask, data being the payload from byte
 * `offset` on (so a payload can be unmasked in pieces as it arrives). */
void ws_mask(uint8_t *data, size_t n, const uint8_t mask[4], uint64_t offset);

/* Writes a frame header for a payload of len bytes into out (at least
 * WS_MAX_HEADER bytes); mask is NULL for a server's frame, 4 bytes for a
 * client's (the caller then masks the payload with ws_mask, offset 0).
 * RET: the header's length. */
size_t ws_write_header(uint8_t *out, bool fin, enum ws_opcode opcode, uint64_t len,
		       const uint8_t *mask);

/* The Sec-WebSocket-Accept value for a Sec-WebSocket-Key: base64 of
 * SHA-1(key + the RFC's GUID), NUL-terminated into out. -EINVAL when key
 * is not 24 characters of base64 (16 bytes encoded). */
int ws_accept_key(const char *key, char out[WS_ACCEPT_LEN + 1], struct terr *err);

/* A fresh Sec-WebSocket-Key (16 random bytes, base64) into out, for a
 * client. -errno when no randomness could be had. */
int ws_client_key(char out[25], struct terr *err);

/* SHA-1 (FIPS 180-4) of data, into out. Only for the handshake above, which
 * the RFC fixes to SHA-1; not for anything that needs a secure hash. */
void ws_sha1(const void *data, size_t n, uint8_t out[20]);

#endif
