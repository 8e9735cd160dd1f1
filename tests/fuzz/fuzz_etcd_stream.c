/* Fuzz target: etcd's watch stream (src/common/etcd_stream.c), JSON lines
 * from the network, cut anywhere. The first byte picks how the rest is
 * cut into pieces; invariants are checked with abort() so the fuzzer sees
 * them: every PUT has a key and a NUL-terminated value, every DELETE a key,
 * revisions only grow, and the error is a terminated string. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/etcd_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_event(const struct etcd_event *ev, void *ud)
{
	size_t *n = ud;
	(*n)++;
	if (!ev->key || (ev->type == ETCD_EVENT_PUT && (!ev->value || ev->value[ev->value_len] != '\0')) ||
	    (ev->type == ETCD_EVENT_DELETE && ev->value))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t step = 1 + data[0] % 23;
	data++;
	size--;
	size_t events = 0;
	struct etcd_stream s = {.fn = on_event, .ud = &events};
	int64_t last = 0;
	for (size_t fed = 0; fed < size;) {
		size_t k = size - fed < step ? size - fed : step;
		int stop = etcd_stream_feed(&s, (const char *)data + fed, k);
		if (s.next_rev < last || strnlen(s.error, sizeof(s.error)) == sizeof(s.error))
			abort();
		last = s.next_rev;
		fed += k;
		if (stop) {
			if (!s.error[0])
				abort();
			etcd_stream_restart(&s);
		}
	}
	etcd_stream_free(&s);
	return 0;
}
