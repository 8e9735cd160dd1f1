/* Fuzz target: sign_parse_authorization and sign_parse_date, the two
 * parsers that see untrusted request headers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/sign.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	struct terr err;
	char ak[64], sig[SIGN_HEX_LEN + 1];
	if (sign_parse_authorization(s, ak, sizeof(ak), sig, &err) == 0) {
		if (strlen(sig) != SIGN_HEX_LEN || strlen(ak) >= sizeof(ak) || !ak[0])
			abort();
	}
	time_t t;
	if (sign_parse_date(s, &t, &err) == 0) {
		/* An accepted date formats back to exactly the input. */
		char buf[64];
		sign_format_date(t, buf, sizeof(buf));
		if (strcmp(buf, s) != 0)
			abort();
	}
	free(s);
	return 0;
}
