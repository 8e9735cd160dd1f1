/* Fuzz target: conf_parse over arbitrary bytes (embedded NULs included). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct conf c;
	struct terr err;
	if (conf_parse((const char *)data, size, &c, &err) == 0) {
		for (size_t i = 0; i < c.n; i++)
			if (conf_get(&c, c.items[i].key) != c.items[i].value)
				abort();  /* duplicates must have been refused */
		static const char *const known[] = {"endpoint", NULL};
		conf_check_keys(&c, known, "fuzz", &err);
		conf_free(&c);
	}
	return 0;
}
