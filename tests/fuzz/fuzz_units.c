/* Fuzz target: units_parse_size, units_parse_milli and units_parse_whole
 * (the input is one NUL-terminated string; every parser sees it).
 * Formatting what parsed must not crash either. */
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
	/* Whole numbers: digits only, within the bound, and the digits' value. */
	uint64_t w;
	if (units_parse_whole(s, 1000000, &w) == 0) {
		if (w > 1000000 || !*s)
			abort();
		uint64_t again = 0;
		for (const char *p = s; *p; p++) {
			if (*p < '0' || *p > '9')
				abort();
			again = again * 10 + (uint64_t)(*p - '0');
			if (again > 1000000)
				abort();
		}
		if (again != w)
			abort();
	}
	free(s);
	return 0;
}
