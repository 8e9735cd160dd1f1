/* Resource amounts (common/units.h). Everything is integer arithmetic with
 * overflow checks: strtod would accept "1e3", "inf" and round 0.1. */
#include "common/units.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Parsed "123.456": integer part and the fraction scaled to thousandths. */
struct units_decimal {
	int64_t whole;
	int64_t milli;   /* 0..999 */
	int frac_digits; /* 0..3 */
};

/* Reads [0-9]+(\.[0-9]{1,3})? at *pp and advances *pp. Returns 0, -EINVAL
 * for malformed input (what names the reason) or -ERANGE on overflow. */
static int units_read_decimal(const char **pp, struct units_decimal *d,
			      const char **what)
{
	const char *p = *pp;
	memset(d, 0, sizeof(*d));
	if (!isdigit((unsigned char)*p)) {
		*what = *p == '-' ? "negative amounts are not allowed"
				  : "expected a number";
		return -EINVAL;
	}
	while (isdigit((unsigned char)*p)) {
		if (__builtin_mul_overflow(d->whole, 10, &d->whole) ||
		    __builtin_add_overflow(d->whole, *p - '0', &d->whole)) {
			*what = "number too large";
			return -ERANGE;
		}
		p++;
	}
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p)) {
			*what = "expected digits after '.'";
			return -EINVAL;
		}
		int64_t scale = 100;
		while (isdigit((unsigned char)*p)) {
			if (++d->frac_digits > 3) {
				*what = "at most 3 decimals are allowed";
				return -EINVAL;
			}
			d->milli += (*p - '0') * scale;
			scale /= 10;
			p++;
		}
	}
	*pp = p;
	return 0;
}

static const char *units_skip_space(const char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

struct units_suffix {
	const char *name;
	int shift;  /* multiplier 2^shift */
};

/* Powers of 1024 whatever the spelling, as `docker run -m` reads them. */
static const struct units_suffix units_suffixes[] = {
	{"b", 0},
	{"k", 10}, {"kb", 10}, {"kib", 10},
	{"m", 20}, {"mb", 20}, {"mib", 20},
	{"g", 30}, {"gb", 30}, {"gib", 30},
	{"t", 40}, {"tb", 40}, {"tib", 40},
};

int units_parse_size(const char *s, int64_t *bytes, struct terr *err)
{
	if (!s)
		return terr_set(err, EINVAL, "missing size");
	const char *p = units_skip_space(s), *what = NULL;
	struct units_decimal d;
	int r = units_read_decimal(&p, &d, &what);
	if (r < 0)
		goto bad;
	p = units_skip_space(p);

	const char *suffix = p;
	size_t slen = 0;
	while (isalpha((unsigned char)suffix[slen]))
		slen++;
	if (*units_skip_space(suffix + slen) != '\0') {
		what = "unexpected characters";
		r = -EINVAL;
		goto bad;
	}
	int shift = 0;
	if (slen) {
		size_t i, n = sizeof(units_suffixes) / sizeof(units_suffixes[0]);
		for (i = 0; i < n; i++)
			if (strlen(units_suffixes[i].name) == slen &&
			    !strncasecmp(units_suffixes[i].name, suffix, slen))
				break;
		if (i == n) {
			what = "unknown unit (use b, k, m, g or t, optionally with b/ib)";
			r = -EINVAL;
			goto bad;
		}
		shift = units_suffixes[i].shift;
	}
	if (shift == 0 && d.milli) {
		what = "a byte count cannot have decimals";
		r = -EINVAL;
		goto bad;
	}
	int64_t whole;
	if (d.whole > (INT64_MAX >> shift)) {
		what = "size too large";
		r = -ERANGE;
		goto bad;
	}
	whole = d.whole << shift;
	/* Fractions of a unit round down to whole bytes: 0.001k is 1 byte. */
	int64_t frac = (d.milli << shift) / 1000;
	if (__builtin_add_overflow(whole, frac, &whole)) {
		what = "size too large";
		r = -ERANGE;
		goto bad;
	}
	*bytes = whole;
	return 0;
bad:
	return terr_set(err, r, "invalid size '%s': %s (e.g. 268435456, 256m, 1g, 512MiB, 1.5GiB)",
			s, what);
}

void units_format_size(int64_t bytes, char *buf, size_t n)
{
	static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	const char *sign = "";
	uint64_t v;
	if (bytes < 0) {
		sign = "-";
		v = (uint64_t)0 - (uint64_t)bytes;
	} else {
		v = (uint64_t)bytes;
	}
	int u = 0;
	while (u < 6 && v >= ((uint64_t)1 << (10 * (u + 1))))
		u++;
	if (u == 0) {
		snprintf(buf, n, "%s%" PRIu64 " B", sign, v);
		return;
	}
	uint64_t unit = (uint64_t)1 << (10 * u);
	uint64_t whole = v / unit, rem = v % unit;
	/* Tenths rounded half up; rem * 10 cannot overflow since rem < 2^60. */
	uint64_t tenths = (rem * 10 + unit / 2) / unit;
	if (tenths == 10) {
		whole++;
		tenths = 0;
		if (whole == 1024 && u < 6) {
			u++;
			whole = 1;
		}
	}
	if (tenths)
		snprintf(buf, n, "%s%" PRIu64 ".%" PRIu64 " %s", sign, whole, tenths, names[u]);
	else
		snprintf(buf, n, "%s%" PRIu64 " %s", sign, whole, names[u]);
}

int units_parse_milli(const char *s, int64_t *milli, struct terr *err)
{
	if (!s)
		return terr_set(err, EINVAL, "missing amount");
	const char *p = units_skip_space(s), *what = NULL;
	struct units_decimal d;
	int r = units_read_decimal(&p, &d, &what);
	if (r < 0)
		goto bad;
	if (*units_skip_space(p) != '\0') {
		what = "unexpected characters";
		r = -EINVAL;
		goto bad;
	}
	int64_t v;
	if (__builtin_mul_overflow(d.whole, 1000, &v) ||
	    __builtin_add_overflow(v, d.milli, &v)) {
		what = "number too large";
		r = -ERANGE;
		goto bad;
	}
	*milli = v;
	return 0;
bad:
	return terr_set(err, r, "invalid amount '%s': %s (expected a decimal with at most 3 decimals, e.g. 0.5 or 2)",
			s, what);
}

void units_format_milli(int64_t milli, char *buf, size_t n)
{
	const char *sign = "";
	uint64_t v;
	if (milli < 0) {
		sign = "-";
		v = (uint64_t)0 - (uint64_t)milli;
	} else {
		v = (uint64_t)milli;
	}
	uint64_t whole = v / 1000, frac = v % 1000;
	if (!frac) {
		snprintf(buf, n, "%s%" PRIu64, sign, whole);
		return;
	}
	char digits[4];
	snprintf(digits, sizeof(digits), "%03u", (unsigned)frac);
	/* Trailing zeros carry no information: 0.500 -> 0.5. */
	for (int i = 2; i > 0 && digits[i] == '0'; i--)
		digits[i] = '\0';
	snprintf(buf, n, "%s%" PRIu64 ".%s", sign, whole, digits);
}

int units_parse_whole(const char *s, uint64_t max, uint64_t *out)
{
	if (!s || !*s)
		return -EINVAL;
	uint64_t v = 0;
	bool over = false;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		if (!over && (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10))
			over = true;
		else if (!over)
			v = v * 10 + (uint64_t)(*p - '0');
	}
	if (over || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}
