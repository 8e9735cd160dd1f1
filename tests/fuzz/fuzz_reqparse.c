/* Fuzz target: the proxy's request framing (proxy/reqparse.h), which reads
 * what browsers send. The input is fed in pieces whose sizes come from its
 * first byte, and the same input whole: whatever the bytes, the parser must
 * not crash, must use no byte twice nor more than it was given, must keep
 * heads within REQP_MAX_HEAD, and must find the same events both ways (the
 * framing may not depend on how the bytes arrive). Cookie stripping of
 * every complete head must not grow past its stated bound. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/reqparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Events as a small signature: heads, ends, error status. */
struct tally {
	unsigned heads, ends, errors;
	uint64_t body;
};

static void run(const uint8_t *data, size_t size, size_t step, struct tally *t)
{
	struct reqparse p;
	reqparse_init(&p);
	memset(t, 0, sizeof(*t));
	size_t off = 0;
	while (off < size) {
		size_t n = size - off < step ? size - off : step;
		size_t used = 0;
		enum reqp_event ev = reqparse_feed(&p, (const char *)data + off, n, &used);
		if (used > n)
			abort();
		if (p.in_body)
			t->body += used;
		off += used;
		if (ev == REQP_ERROR) {
			t->errors++;
			break;
		}
		if (ev == REQP_HEAD) {
			t->heads++;
			size_t hl;
			const char *h = reqparse_head_bytes(&p, &hl);
			if (!h || hl > REQP_MAX_HEAD)
				abort();
			char *out = malloc(2 * hl + 16);
			if (!out)
				abort();
			size_t ol = reqparse_strip_cookies(h, hl, out);
			if (ol > 2 * hl + 16)
				abort();
			free(out);
			if (!p.req.method || !p.req.target)
				abort();
		} else if (ev == REQP_END) {
			t->ends++;
		} else if (used == 0 && n > 0) {
			abort();  /* REQP_MORE must make progress */
		}
	}
	reqparse_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t step = (size_t)data[0] % 17 + 1;
	struct tally a, b;
	run(data + 1, size - 1, step, &a);
	run(data + 1, size - 1, size, &b);
	if (a.heads != b.heads || a.ends != b.ends || a.errors != b.errors || a.body != b.body)
		abort();
	return 0;
}
