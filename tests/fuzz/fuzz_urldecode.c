/* Fuzz target: the HTTP server layer's percent-decoding (common/
 * urldecode.c), which stands between a request target and every handler.
 * The input up to its first NUL is a request target, as libmicrohttpd
 * hands it over; the whole input is also decoded as bytes. Aborts when:
 *  - the target check refuses without a message, or refuses what holds no
 *    "%00", or lets through what does (a "%00" always decodes to a NUL,
 *    whatever precedes it: a '%' that starts no escape is kept and the
 *    scan goes on at the next byte, and '%' is no hex digit);
 *  - a decoded length is wrong: each escape takes 3 bytes to 1;
 *  - a path decoding fails where every '%' starts an escape, or succeeds
 *    where one does not;
 *  - encoding the decoded bytes back (every byte as %XX) and decoding
 *    again does not give the same bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/urldecode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	char *target = malloc(size + 1);
	if (!target)
		return 0;
	memcpy(target, data, size);
	target[size] = '\0';
	struct terr err = {0};
	int rc = urldecode_check_target(target, &err);
	if (rc < 0 && rc != -ENOMEM && (rc != -EINVAL || !err.msg[0]))
		abort();
	if (rc != -ENOMEM && (rc == -EINVAL) != (strstr(target, "%00") != NULL))
		abort();
	free(target);

	size_t escapes = 0;
	bool all_escapes = true;
	for (size_t i = 0; i < size; i++) {
		if (s[i] != '%')
			continue;
		if (i + 2 < size && hex(s[i + 1]) && hex(s[i + 2])) {
			escapes++;
			i += 2;
		} else {
			all_escapes = false;
		}
	}
	size_t n;
	char *q = urldecode(s, size, true, &n);
	if (!q)
		return 0;   /* out of memory */
	if (n != size - 2 * escapes || q[n] != '\0')
		abort();
	size_t pn;
	char *p = urldecode(s, size, false, &pn);
	if ((p != NULL) != all_escapes)
		abort();
	if (p && pn != n)
		abort();
	free(p);
	/* Back to text and again. */
	char *enc = malloc(3 * n + 1);
	if (enc) {
		for (size_t i = 0; i < n; i++)
			snprintf(enc + 3 * i, 4, "%%%02X", (unsigned char)q[i]);
		size_t bn;
		char *back = urldecode(enc, 3 * n, false, &bn);
		if (back && (bn != n || memcmp(back, q, n)))
			abort();
		free(back);
		free(enc);
	}
	free(q);
	return 0;
}
