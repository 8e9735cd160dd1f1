/* Tests of common/ws.h: the hand-written SHA-1 against OpenSSL's, the
 * RFC 6455 handshake example, and frame headers both ways. */
#include <errno.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

#include "common/ws.h"
#include "testlib.h"

TEST(sha1_matches_openssl)
{
	/* Every length around the padding boundaries (55, 56, 63, 64...). */
	uint8_t data[300];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 131 + 7);
	for (size_t n = 0; n <= sizeof(data); n++) {
		uint8_t mine[20], theirs[20];
		ws_sha1(data, n, mine);
		SHA1(data, n, theirs);
		if (memcmp(mine, theirs, 20))
			FAILF("SHA-1 of %zu bytes differs from OpenSSL's", n);
	}
}

TEST(accept_key_of_the_rfc_example)
{
	char out[WS_ACCEPT_LEN + 1];
	struct terr err = {0};
	CHECK_INT(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out, &err), 0);
	CHECK_STR(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

TEST(accept_key_refuses_what_is_not_16_bytes)
{
	char out[WS_ACCEPT_LEN + 1];
	struct terr err = {0};
	CHECK_INT(ws_accept_key("short", out, &err), -EINVAL);
	CHECK_INT(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ=", out, &err), -EINVAL);
	CHECK_INT(ws_accept_key("dGhlIHNhbXBsZSBub25j!Q==", out, &err), -EINVAL);
	CHECK_INT(ws_accept_key(NULL, out, &err), -EINVAL);
	CHECK(strstr(err.msg, "Sec-WebSocket-Key") != NULL);
}

TEST(client_key_is_accepted_by_the_server_side)
{
	char key[25], out[WS_ACCEPT_LEN + 1];
	struct terr err = {0};
	CHECK_INT(ws_client_key(key, &err), 0);
	CHECK_INT(strlen(key), 24);
	CHECK_INT(ws_accept_key(key, out, &err), 0);
}

static void roundtrip(uint64_t len, bool masked)
{
	uint8_t hdr[WS_MAX_HEADER];
	uint8_t mask[4] = {1, 2, 3, 4};
	size_t hl = ws_write_header(hdr, true, WS_OP_BINARY, len, masked ? mask : NULL);
	struct ws_frame f;
	struct terr err = {0};
	/* Every prefix shorter than the header asks for more. */
	for (size_t i = 0; i < hl; i++)
		if (ws_parse_header(hdr, i, masked, UINT64_MAX >> 1, &f, &err) != 0)
			FAILF("a %zu-byte prefix of a %zu-byte header did not ask for more", i, hl);
	CHECK_INT(ws_parse_header(hdr, hl, masked, UINT64_MAX >> 1, &f, &err), (int)hl);
	CHECK(f.len == len);
	CHECK(f.fin);
	CHECK_INT(f.opcode, WS_OP_BINARY);
	CHECK(f.masked == masked);
	if (masked)
		CHECK(!memcmp(f.mask, mask, 4));
}

TEST(headers_round_trip_at_every_length_form)
{
	uint64_t lens[] = {0, 1, 125, 126, 127, 65535, 65536, 1ull << 40};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		roundtrip(lens[i], false);
		roundtrip(lens[i], true);
	}
}

TEST(protocol_errors_are_refused)
{
	struct ws_frame f;
	struct terr err = {0};
	uint8_t rsv[] = {0xC2, 0x80, 0, 0, 0, 0};
	CHECK_INT(ws_parse_header(rsv, sizeof(rsv), true, 1000, &f, &err), -EPROTO);
	uint8_t op[] = {0x83, 0x80, 0, 0, 0, 0};
	CHECK_INT(ws_parse_header(op, sizeof(op), true, 1000, &f, &err), -EPROTO);
	uint8_t unmasked[] = {0x82, 0x00};
	CHECK_INT(ws_parse_header(unmasked, sizeof(unmasked), true, 1000, &f, &err), -EPROTO);
	uint8_t masked[] = {0x82, 0x80, 0, 0, 0, 0};
	CHECK_INT(ws_parse_header(masked, sizeof(masked), false, 1000, &f, &err), -EPROTO);
	uint8_t frag_ping[] = {0x09, 0x80, 0, 0, 0, 0};
	CHECK_INT(ws_parse_header(frag_ping, sizeof(frag_ping), true, 1000, &f, &err), -EPROTO);
	uint8_t long_close[] = {0x88, 0xFE, 0x00, 0x7E, 0, 0, 0, 0};
	CHECK_INT(ws_parse_header(long_close, sizeof(long_close), true, 1000, &f, &err), -EPROTO);
	uint8_t top_bit[] = {0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0};
	CHECK_INT(ws_parse_header(top_bit, sizeof(top_bit), true, UINT64_MAX, &f, &err), -EPROTO);
	uint8_t big[] = {0x82, 0xFE, 0x10, 0x00, 0, 0, 0, 0};
	CHECK_INT(ws_parse_header(big, sizeof(big), true, 1000, &f, &err), -EMSGSIZE);
	CHECK(strstr(err.msg, "4096") != NULL);
}

TEST(masking_in_pieces_equals_masking_at_once)
{
	uint8_t mask[4] = {0xde, 0xad, 0xbe, 0xef};
	uint8_t a[11] = "hello world", b[11];
	memcpy(b, a, sizeof(a));
	ws_mask(a, sizeof(a), mask, 0);
	ws_mask(b, 3, mask, 0);
	ws_mask(b + 3, 5, mask, 3);
	ws_mask(b + 8, 3, mask, 8);
	CHECK(!memcmp(a, b, sizeof(a)));
	ws_mask(a, sizeof(a), mask, 0);
	CHECK(!memcmp(a, "hello world", 11));
}

int main(void)
{
	RUN(sha1_matches_openssl);
	RUN(accept_key_of_the_rfc_example);
	RUN(accept_key_refuses_what_is_not_16_bytes);
	RUN(client_key_is_accepted_by_the_server_side);
	RUN(headers_round_trip_at_every_length_form);
	RUN(protocol_errors_are_refused);
	RUN(masking_in_pieces_equals_masking_at_once);
	return testlib_done();
}
