/* Fuzz target: Docker's streamed JSON progress (src/runtime/docker_progress.c),
 * external input (a registry's answers through dockerd). The first byte
 * picks how the rest is cut into pieces; invariants are checked with
 * abort() so the fuzzer sees them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/docker_progress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t step = 1 + data[0] % 17;
	data++;
	size--;
	struct docker_progress *p = malloc(sizeof(*p));
	if (!p)
		return 0;
	docker_progress_init(p);
	for (size_t fed = 0; fed < size;) {
		size_t k = size - fed < step ? size - fed : step;
		if (docker_progress_feed(p, (const char *)data + fed, k) < 0)
			break;
		fed += k;
	}
	docker_progress_finish(p);
	int64_t cur, total;
	docker_progress_sum(p, &cur, &total);
	if (cur < 0 || total < 0 || cur > total || p->n_layers > DOCKER_PROGRESS_MAX_LAYERS ||
	    strnlen(p->error, sizeof(p->error)) == sizeof(p->error))
		abort();
	docker_progress_free(p);
	free(p);
	return 0;
}
