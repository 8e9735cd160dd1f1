/* Fuzz target: img_ref_parse (references come from users). The input is
 * one NUL-terminated string. What parses has a canonical form that parses
 * again to itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "images/labels.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	struct img_ref r;
	struct terr err;
	if (img_ref_parse(s, &r, &err) == 0) {
		char canon[320], again[320], name[320];
		img_ref_format(&r, canon, sizeof(canon));
		img_ref_name(&r, name, sizeof(name));
		/* "x/library/y" style paths stay as typed; the canonical text
		 * of a valid reference parses, and is its own canonical form,
		 * unless adding ":latest" pushed it past the length limit. */
		if (strlen(canon) <= 255) {
			if (img_ref_canonical(canon, again, sizeof(again), &err) != 0 || strcmp(canon, again) != 0)
				abort();
		}
		if (!r.path[0])
			abort();
	}
	free(s);
	return 0;
}
