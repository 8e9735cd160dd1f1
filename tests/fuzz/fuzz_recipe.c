/* Fuzz target: recipe_parse over arbitrary bytes (embedded NULs
 * included); what parses must give a canonical form and a full hash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "imagebuild/recipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct recipe r;
	struct terr err;
	if (recipe_parse((const char *)data, size, "fuzz.recipe", &r, &err) == 0) {
		char *c = recipe_canonical(&r);
		if (!c || strlen(r.hash) != RECIPE_HASH_HEX || !r.name || !r.tag || !r.suite || !r.n_packages)
			abort();
		free(c);
		for (size_t i = 0; i < r.n_packages; i++) {
			char v[64];
			recipe_upstream_version(r.packages[i], v, sizeof(v));
		}
		recipe_free(&r);
	} else if (strncmp(err.msg, "fuzz.recipe", 11) != 0 && strcmp(err.msg, "out of memory") != 0) {
		abort();   /* every parse error names the recipe */
	}
	return 0;
}
