/* units_parse_size / units_parse_milli and their formatters. */
#include "common/units.h"
#include "testlib.h"

static int64_t size_ok(const char *s)
{
	int64_t v = -1;
	struct terr err = {0};
	if (units_parse_size(s, &v, &err) < 0)
		FAILF("units_parse_size(\"%s\") failed: %s", s, err.msg);
	return v;
}

static void size_bad(const char *s, const char *why)
{
	int64_t v = 12345;
	struct terr err = {0};
	int r = units_parse_size(s, &v, &err);
	testlib_checks++;
	if (r >= 0)
		FAILF("units_parse_size(\"%s\") accepted (%lld)", s, (long long)v);
	else if (!strstr(err.msg, why))
		FAILF("units_parse_size(\"%s\"): message \"%s\" lacks \"%s\"", s, err.msg, why);
	CHECK_INT(v, 12345); /* untouched on failure */
}

TEST(size_plain_bytes)
{
	CHECK_INT(size_ok("0"), 0);
	CHECK_INT(size_ok("1048576"), 1048576);
	CHECK_INT(size_ok("512b"), 512);
	CHECK_INT(size_ok("512 B"), 512);
	CHECK_INT(size_ok("  42  "), 42);
	CHECK_INT(size_ok("9223372036854775807"), INT64_MAX);
}

TEST(size_suffixes_all_binary)
{
	static const char *const k[] = {"k", "K", "kb", "KB", "kib", "KiB", "KIB"};
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		char buf[32];
		snprintf(buf, sizeof(buf), "2%s", k[i]);
		CHECK_INT(size_ok(buf), 2048);
	}
	CHECK_INT(size_ok("256m"), 256LL << 20);
	CHECK_INT(size_ok("256mb"), 256LL << 20);
	CHECK_INT(size_ok("512MiB"), 512LL << 20);
	CHECK_INT(size_ok("1g"), 1LL << 30);
	CHECK_INT(size_ok("1G"), 1LL << 30);
	CHECK_INT(size_ok("1gb"), 1LL << 30);
	CHECK_INT(size_ok("1.5GiB"), 3LL << 29);
	CHECK_INT(size_ok("1.5 GiB"), 3LL << 29);
	CHECK_INT(size_ok("2t"), 2LL << 40);
	CHECK_INT(size_ok("16TiB"), 16LL << 40);
	CHECK_INT(size_ok("0.25k"), 256);
	CHECK_INT(size_ok("0.001k"), 1);      /* rounds down to whole bytes */
	CHECK_INT(size_ok("1.125m"), 1179648);
}

TEST(size_rejections)
{
	size_bad("", "expected a number");
	size_bad("   ", "expected a number");
	size_bad("-1", "negative");
	size_bad("-1g", "negative");
	size_bad("1.2.3", "unexpected");
	size_bad("1e3", "unexpected");
	size_bad("12x", "unknown unit");
	size_bad("12 mm", "unknown unit");
	size_bad("1.", "after '.'");
	size_bad(".5g", "expected a number");
	size_bad("1.2345g", "at most 3 decimals");
	size_bad("1.5", "decimals");
	size_bad("1.5b", "decimals");
	size_bad("9223372036854775808", "too large");
	size_bad("99999999999999999999999", "too large");
	size_bad("8388608t", "too large");
	size_bad("1g extra", "unexpected");
	size_bad("0x10", "unexpected");
	size_bad("+5", "expected a number");
	struct terr err = {0};
	int64_t v;
	CHECK_INT(units_parse_size("12x", &v, &err), -EINVAL);
	CHECK_INT(err.code, EINVAL);
	CHECK_CONTAINS(err.msg, "invalid size '12x'");
	CHECK_INT(units_parse_size("99999999999999999999999", &v, &err), -ERANGE);
	CHECK_INT(units_parse_size(NULL, &v, NULL), -EINVAL);
}

TEST(size_format)
{
	char b[32];
	units_format_size(0, b, sizeof(b));
	CHECK_STR(b, "0 B");
	units_format_size(512, b, sizeof(b));
	CHECK_STR(b, "512 B");
	units_format_size(1023, b, sizeof(b));
	CHECK_STR(b, "1023 B");
	units_format_size(1024, b, sizeof(b));
	CHECK_STR(b, "1 KiB");
	units_format_size(256LL << 20, b, sizeof(b));
	CHECK_STR(b, "256 MiB");
	units_format_size(3LL << 29, b, sizeof(b));
	CHECK_STR(b, "1.5 GiB");
	units_format_size(24000000000LL, b, sizeof(b));
	CHECK_STR(b, "22.4 GiB");
	units_format_size((1LL << 30) - 1, b, sizeof(b)); /* 1023.99.. MiB rounds up a unit */
	CHECK_STR(b, "1 GiB");
	units_format_size(16LL << 40, b, sizeof(b));
	CHECK_STR(b, "16 TiB");
	units_format_size(INT64_MAX, b, sizeof(b));
	CHECK_STR(b, "8 EiB");
	units_format_size(-2048, b, sizeof(b));
	CHECK_STR(b, "-2 KiB");
	/* Round trip of what people type. */
	units_format_size(size_ok("1.5GiB"), b, sizeof(b));
	CHECK_STR(b, "1.5 GiB");
}

static int64_t milli_ok(const char *s)
{
	int64_t v = -1;
	struct terr err = {0};
	if (units_parse_milli(s, &v, &err) < 0)
		FAILF("units_parse_milli(\"%s\") failed: %s", s, err.msg);
	return v;
}

static void milli_bad(const char *s, const char *why)
{
	int64_t v = 777;
	struct terr err = {0};
	testlib_checks++;
	if (units_parse_milli(s, &v, &err) >= 0)
		FAILF("units_parse_milli(\"%s\") accepted (%lld)", s, (long long)v);
	else if (!strstr(err.msg, why))
		FAILF("units_parse_milli(\"%s\"): message \"%s\" lacks \"%s\"", s, err.msg, why);
	CHECK_INT(v, 777);
}

TEST(milli_parse)
{
	CHECK_INT(milli_ok("0"), 0);
	CHECK_INT(milli_ok("0.5"), 500);
	CHECK_INT(milli_ok("2"), 2000);
	CHECK_INT(milli_ok("0.125"), 125);
	CHECK_INT(milli_ok("0.05"), 50);
	CHECK_INT(milli_ok("1.0"), 1000);
	CHECK_INT(milli_ok("1024"), 1024000);
	CHECK_INT(milli_ok(" 3.25 "), 3250);
	CHECK_INT(milli_ok("0.4") * 2 <= 1000 && milli_ok("0.4") * 3 > 1000, 1);
	milli_bad("", "expected a number");
	milli_bad("-0.5", "negative");
	milli_bad("1.2.3", "unexpected");
	milli_bad("1e3", "unexpected");
	milli_bad("12x", "unexpected");
	milli_bad("0.1234", "at most 3 decimals");
	milli_bad("1.", "after '.'");
	milli_bad("9223372036854775807", "too large");
	milli_bad("99999999999999999999", "too large");
	milli_bad("inf", "expected a number");
	milli_bad("nan", "expected a number");
	CHECK_INT(units_parse_milli("x", &(int64_t){0}, NULL), -EINVAL);
}

TEST(milli_format)
{
	char b[32];
	units_format_milli(500, b, sizeof(b));
	CHECK_STR(b, "0.5");
	units_format_milli(2000, b, sizeof(b));
	CHECK_STR(b, "2");
	units_format_milli(125, b, sizeof(b));
	CHECK_STR(b, "0.125");
	units_format_milli(1050, b, sizeof(b));
	CHECK_STR(b, "1.05");
	units_format_milli(1, b, sizeof(b));
	CHECK_STR(b, "0.001");
	units_format_milli(0, b, sizeof(b));
	CHECK_STR(b, "0");
	units_format_milli(-500, b, sizeof(b));
	CHECK_STR(b, "-0.5");
	units_format_milli(INT64_MIN, b, sizeof(b));
	CHECK_STR(b, "-9223372036854775.808");
}

/* Whole numbers of query arguments: digits only (strtol would take
 * spaces, a sign and "0x" before them). */
TEST(whole_numbers)
{
	uint64_t v = 7;
	CHECK_INT(units_parse_whole("0", 10, &v), 0);
	CHECK_INT(v, 0);
	CHECK_INT(units_parse_whole("42", 42, &v), 0);
	CHECK_INT(v, 42);
	CHECK_INT(units_parse_whole("0042", 100, &v), 0);
	CHECK_INT(v, 42);
	CHECK_INT(units_parse_whole("18446744073709551615", UINT64_MAX, &v), 0);
	CHECK(v == UINT64_MAX);
	v = 7;
	static const char *const bad[] = {"", " 5", "5 ", "+5", "-5", "\t5", "0x10", "5x", "1e3", "1.0", "\n5"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		testlib_checks++;
		if (units_parse_whole(bad[i], 1000, &v) != -EINVAL)
			FAILF("'%s' was taken as a number", bad[i]);
	}
	CHECK_INT(units_parse_whole(NULL, 1000, &v), -EINVAL);
	CHECK_INT(units_parse_whole("43", 42, &v), -ERANGE);
	CHECK_INT(units_parse_whole("18446744073709551616", UINT64_MAX, &v), -ERANGE);
	CHECK_INT(units_parse_whole("99999999999999999999999", 5, &v), -ERANGE);
	CHECK_INT(v, 7);
}

int main(void)
{
	RUN(size_plain_bytes);
	RUN(size_suffixes_all_binary);
	RUN(size_rejections);
	RUN(size_format);
	RUN(milli_parse);
	RUN(milli_format);
	RUN(whole_numbers);
	return testlib_done();
}
