/* Tidying of a container's log before it is kept (logtail.h). Pure. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manager/logtail.h"

/* The length of the valid UTF-8 sequence at p (1 to 4 bytes, of the n
 * left), or 0 when the byte there does not start one (or is NUL). */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	if (c == 0)
		return 0;
	if (c < 0x80)
		return 1;
	size_t len;
	uint32_t cp;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	/* Overlong forms, UTF-16 surrogates and what lies past U+10FFFF. */
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static const char replacement[] = "\xef\xbf\xbd";   /* U+FFFD */

const char *logtail_last_lines(const char *text, int lines)
{
	if (lines <= 0)
		return text;
	size_t n = strlen(text);
	/* A final newline ends the last line; it does not start another. */
	size_t end = n && text[n - 1] == '\n' ? n - 1 : n;
	int seen = 0;
	for (size_t i = end; i > 0; i--) {
		if (text[i - 1] == '\n' && ++seen == lines)
			return text + i;
	}
	return text;
}

char *logtail_tidy(const char *raw, size_t n, int max_lines, size_t max_bytes)
{
	/* Only the last max_lines lines matter: find where they start in
	 * the raw bytes before the (at most 3x larger) repair. */
	size_t start = 0;
	if (max_lines > 0) {
		size_t end = n && raw[n - 1] == '\n' ? n - 1 : n;
		int seen = 0;
		for (size_t i = end; i > 0; i--) {
			if (raw[i - 1] == '\n' && ++seen == max_lines) {
				start = i;
				break;
			}
		}
	}
	/* Repair what is kept, from its end, never more than max_bytes
	 * plus one character's room. */
	size_t cap = (n - start) * 3 + 1;
	char *out = malloc(cap);
	if (!out)
		return NULL;
	size_t k = 0;
	const unsigned char *p = (const unsigned char *)raw;
	for (size_t i = start; i < n;) {
		size_t len = utf8_len(p + i, n - i);
		if (len) {
			memcpy(out + k, p + i, len);
			k += len;
			i += len;
		} else {
			memcpy(out + k, replacement, 3);
			k += 3;
			i++;
		}
	}
	out[k] = '\0';
	if (k <= max_bytes)
		return out;
	/* Too long: drop the oldest whole lines until it fits; a last line
	 * longer than max_bytes keeps its end from a character's start. */
	size_t from = k - max_bytes;
	const char *nl = memchr(out + from - 1, '\n', k - (from - 1));
	if (nl && (size_t)(nl + 1 - out) < k) {
		from = (size_t)(nl + 1 - out);
	} else {
		while (from < k && ((unsigned char)out[from] & 0xc0) == 0x80)
			from++;
	}
	memmove(out, out + from, k - from + 1);
	return out;
}
