/* Fuzz target: Docker stream demultiplexer (src/runtime/docker_demux.c).
 * The first two bytes pick the cap, merge mode and how the rest is cut into
 * pieces; invariants are checked with abort() so the fuzzer sees them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/docker_demux.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t cap = data[0] & 0x7f;
	bool merge = data[0] & 0x80;
	size_t step = 1 + data[1] % 13;
	data += 2;
	size -= 2;

	struct docker_demux d;
	docker_demux_init(&d, cap ? cap : SIZE_MAX, merge);
	size_t fed = 0;
	while (fed < size) {
		size_t k = size - fed < step ? size - fed : step;
		int r = docker_demux_feed(&d, data + fed, k);
		if (r != 0 && r != d.error)
			abort();
		fed += k;
	}
	docker_demux_finish(&d);
	for (int i = 0; i < 2; i++) {
		if (d.out[i].len > d.cap || d.out[i].len > size)
			abort();
		if (d.out[i].data && d.out[i].data[d.out[i].len] != '\0')
			abort();
	}
	if (merge && d.out[1].len)
		abort();
	char *s;
	size_t n;
	if (docker_demux_take(&d, 0, &s, &n) == 0) {
		if (strlen(s) > n)
			abort();
		free(s);
	}
	docker_demux_free(&d);
	return 0;
}
