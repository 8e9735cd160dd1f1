/* Fuzz target: units_parse_size and units_parse_milli (the input is one
 * NUL-terminated string; both parsers see it). Formatting what parsed must
 * not crash either. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/units.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	struct terr err;
	int64_t v;
	char buf[64];
	if (units_parse_size(s, &v, &err) == 0) {
		if (v < 0)
			abort();
		units_format_size(v, buf, sizeof(buf));
	}
	if (units_parse_milli(s, &v, &err) == 0) {
		if (v < 0)
			abort();
		units_format_milli(v, buf, sizeof(buf));
		/* Formatting then parsing gives the same amount back. */
		int64_t back;
		if (units_parse_milli(buf, &back, &err) != 0 || back != v)
			abort();
	}
	free(s);
	return 0;
}
