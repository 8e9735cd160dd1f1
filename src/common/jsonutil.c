#include "common/jsonutil.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/units.h"

json_t *jsonutil_milli(int64_t milli)
{
	if (milli % 1000 == 0)
		return json_integer(milli / 1000);
	/* milli/1000.0 is the closest double to the decimal; printed with 10
	 * significant digits it reads back as exactly that decimal. */
	return json_real((double)milli / 1000.0);
}

static int absent(bool *present)
{
	if (present)
		*present = false;
	return 0;
}

int jsonutil_get_string(json_t *obj, const char *field, const char *what,
			const char **out, bool *present, struct terr *err)
{
	json_t *v = json_object_get(obj, field);
	if (!v || json_is_null(v))
		return absent(present);
	if (!json_is_string(v))
		return terr_set(err, EINVAL, "%s must be a string", what);
	*out = json_string_value(v);
	if (present)
		*present = true;
	return 0;
}

/* An amount given as a JSON string must be the amount exactly, as the CLI
 * and the web UI send it: units.c skips spaces around a number (for conf
 * files and flags), and reads a C string, which a NUL would end early, so
 * "  1g" and "1g\u0000x" would otherwise pass for "1g". A space between
 * the number and its unit ("1 g") stays fine. */
static int amount_text(json_t *v, const char *what, const char *example, struct terr *err)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	if (memchr(s, '\0', n))
		return terr_set(err, EINVAL, "%s holds a NUL byte; give the amount alone (e.g. %s)", what, example);
	if (n && (isspace((unsigned char)s[0]) || isspace((unsigned char)s[n - 1])))
		return terr_set(err, EINVAL, "%s: '%.40s' has spaces before or after it; give the amount alone (e.g. %s)",
				what, s, example);
	return 0;
}

static int get_milli(json_t *obj, const char *field, const char *what, int64_t *out, bool *present, bool exact,
		     struct terr *err)
{
	json_t *v = json_object_get(obj, field);
	if (!v || json_is_null(v))
		return absent(present);
	char buf[64];
	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);
		if (i < 0)
			return terr_set(err, EINVAL, "%s must not be negative (got %" JSON_INTEGER_FORMAT ")", what, i);
		if (i > INT64_MAX / 1000)
			return terr_set(err, EINVAL, "%s is too large", what);
		*out = (int64_t)i * 1000;
	} else if (json_is_real(v)) {
		double d = json_real_value(v);
		if (!isfinite(d) || d < 0)
			return terr_set(err, EINVAL, "%s must be a non-negative number", what);
		if (d > 1e12)
			return terr_set(err, EINVAL, "%s is too large", what);
		/* Go through the decimal text so 0.1 is exactly 100 milli and
		 * four decimals are refused, as in a string. */
		snprintf(buf, sizeof(buf), "%.10g", d);
		if (units_parse_milli(buf, out, err) < 0)
			return terr_prefix(err, "%s", what);
	} else if (json_is_string(v)) {
		if (exact && amount_text(v, what, "\"0.5\"", err) < 0)
			return -EINVAL;
		if (units_parse_milli(json_string_value(v), out, err) < 0)
			return terr_prefix(err, "%s", what);
	} else {
		return terr_set(err, EINVAL, "%s must be a number like 0.5", what);
	}
	if (present)
		*present = true;
	return 0;
}

static int get_size(json_t *obj, const char *field, const char *what, int64_t *out, bool *present, bool exact,
		    struct terr *err)
{
	json_t *v = json_object_get(obj, field);
	if (!v || json_is_null(v))
		return absent(present);
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0)
			return terr_set(err, EINVAL, "%s must not be negative", what);
		*out = json_integer_value(v);
	} else if (json_is_string(v)) {
		if (exact && amount_text(v, what, "\"256m\" or \"1g\"", err) < 0)
			return -EINVAL;
		if (units_parse_size(json_string_value(v), out, err) < 0)
			return terr_prefix(err, "%s", what);
	} else {
		return terr_set(err, EINVAL, "%s must be bytes or a size like \"256m\" or \"1GiB\"", what);
	}
	if (present)
		*present = true;
	return 0;
}

int jsonutil_get_milli(json_t *obj, const char *field, const char *what, int64_t *out, bool *present,
		       struct terr *err)
{
	return get_milli(obj, field, what, out, present, true, err);
}

int jsonutil_get_size(json_t *obj, const char *field, const char *what, int64_t *out, bool *present,
		      struct terr *err)
{
	return get_size(obj, field, what, out, present, true, err);
}

int jsonutil_get_milli_stored(json_t *obj, const char *field, const char *what, int64_t *out, bool *present,
			      struct terr *err)
{
	return get_milli(obj, field, what, out, present, false, err);
}

int jsonutil_get_size_stored(json_t *obj, const char *field, const char *what, int64_t *out, bool *present,
			     struct terr *err)
{
	return get_size(obj, field, what, out, present, false, err);
}

int jsonutil_get_int(json_t *obj, const char *field, const char *what,
		     int64_t *out, bool *present, struct terr *err)
{
	json_t *v = json_object_get(obj, field);
	if (!v || json_is_null(v))
		return absent(present);
	if (!json_is_integer(v))
		return terr_set(err, EINVAL, "%s must be an integer", what);
	*out = json_integer_value(v);
	if (present)
		*present = true;
	return 0;
}

char *jsonutil_dump(const json_t *v)
{
	return json_dumps(v, JSONUTIL_DUMP_FLAGS);
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when invalid. */
/* Whether v nests deeper than max levels, counting v's own as `level`. */
static bool nests_deeper(json_t *v, size_t level, size_t max)
{
	if (!json_is_object(v) && !json_is_array(v))
		return false;
	if (level > max)
		return true;
	if (json_is_array(v)) {
		size_t i;
		json_t *x;
		json_array_foreach(v, i, x)
			if (nests_deeper(x, level + 1, max))
				return true;
	} else {
		const char *k;
		json_t *x;
		json_object_foreach(v, k, x)
			if (nests_deeper(x, level + 1, max))
				return true;
	}
	return false;
}

json_t *jsonutil_parse_body(const char *buf, size_t len, size_t max_depth, struct terr *err)
{
	json_error_t jerr;
	json_t *v = json_loadb(buf ? buf : "", buf ? len : 0, JSON_REJECT_DUPLICATES, &jerr);
	if (!v) {
		terr_set(err, EINVAL, "request body is not valid JSON: %s (line %d, column %d)", jerr.text,
			 jerr.line, jerr.column);
		return NULL;
	}
	if (!json_is_object(v)) {
		json_decref(v);
		terr_set(err, EINVAL, "request body must be a JSON object");
		return NULL;
	}
	if (max_depth && nests_deeper(v, 1, max_depth)) {
		json_decref(v);
		terr_set(err, EINVAL, "request body nests deeper than %zu levels", max_depth);
		return NULL;
	}
	return v;
}

static size_t utf8_seq_len(const unsigned char *p, size_t left)
{
	unsigned char c = p[0];
	size_t n;
	uint32_t cp;
	if (c < 0x80) return 1;
	if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; }
	else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; }
	else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; }
	else return 0;
	if (n > left) return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80) return 0;
		cp = (cp << 6) | (p[i] & 0x3F);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		return 0;
	return n;
}

json_t *jsonutil_string_lossy(const char *buf, size_t len)
{
	if (!buf)
		return json_string("");
	char *out = malloc(len * 3 + 1), *o = out;
	if (!out)
		return NULL;
	const unsigned char *p = (const unsigned char *)buf;
	size_t i = 0;
	while (i < len) {
		size_t n = utf8_seq_len(p + i, len - i);
		if (n == 0 || (n == 1 && p[i] == 0)) {
			/* U+FFFD for bytes that are not UTF-8, and for NUL, which
			 * jansson strings cannot hold. */
			*o++ = (char)0xEF; *o++ = (char)0xBF; *o++ = (char)0xBD;
			i++;
			continue;
		}
		memcpy(o, p + i, n);
		o += n;
		i += n;
	}
	json_t *s = json_stringn(out, (size_t)(o - out));
	free(out);
	return s;
}
