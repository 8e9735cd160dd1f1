/* Percent-decoding of request targets (common/urldecode.h). */
#include "common/urldecode.h"

#include <stdlib.h>
#include <string.h>

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

char *urldecode(const char *s, size_t n, bool query, size_t *out_n)
{
	char *out = malloc(n + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		int hi, lo;
		if (s[i] == '%' && i + 2 < n && (hi = hexval(s[i + 1])) >= 0 && (lo = hexval(s[i + 2])) >= 0) {
			*o++ = (char)(hi * 16 + lo);
			i += 2;
		} else if (s[i] == '%' && !query) {
			free(out);
			return NULL;
		} else {
			*o++ = query && s[i] == '+' ? ' ' : s[i];
		}
	}
	*o = '\0';
	*out_n = (size_t)(o - out);
	return out;
}

/* 1 when s[0..n) decodes to bytes holding a NUL, 0 when not, -ENOMEM. */
static int decodes_to_nul(const char *s, size_t n)
{
	size_t len;
	/* Decoded as a query is: a '%' that is no escape stays, so "%%00"
	 * still counts as the NUL that a lenient reader would make of it. */
	char *d = urldecode(s, n, true, &len);
	if (!d)
		return -ENOMEM;
	int nul = memchr(d, '\0', len) != NULL;
	free(d);
	return nul;
}

int urldecode_check_target(const char *target, struct terr *err)
{
	size_t plen = strcspn(target, "?");
	int rc = decodes_to_nul(target, plen);
	if (rc < 0)
		return terr_set(err, ENOMEM, "out of memory");
	if (rc)
		return terr_set(err, EINVAL, "the path holds a NUL byte (%%00), which no name or path may contain");
	if (!target[plen])
		return 0;
	/* Arguments are separated by '&' and named up to their first '='. */
	for (const char *a = target + plen + 1;;) {
		size_t alen = strcspn(a, "&");
		size_t klen = strcspn(a, "=&");
		rc = decodes_to_nul(a, alen);
		if (rc < 0)
			return terr_set(err, ENOMEM, "out of memory");
		if (rc) {
			/* The name as far as it can be said (up to a NUL of its own). */
			size_t dlen;
			char *key = urldecode(a, klen, true, &dlen);
			if (!key)
				return terr_set(err, ENOMEM, "out of memory");
			terr_set(err, EINVAL, "the query argument '%.40s' holds a NUL byte (%%00), which no name "
				 "or path may contain", key);
			free(key);
			return -EINVAL;
		}
		if (!a[alen])
			return 0;
		a += alen + 1;
	}
}
