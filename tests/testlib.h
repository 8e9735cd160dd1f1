/* Minimal unit-test helpers shared by every C test program. Each test file
 * is its own executable (its own process): a crash fails that file only.
 *
 *   TEST(parses_sizes) { CHECK_INT(f(), 3); }
 *   int main(void) { RUN(parses_sizes); return testlib_done(); }
 */
#ifndef TESSERA_TESTLIB_H
#define TESSERA_TESTLIB_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int testlib_failures;
static int testlib_checks;
static const char *testlib_current;

#define TEST(name) static void name(void)

#define RUN(name) do { \
	int before_ = testlib_failures; \
	testlib_current = #name; \
	name(); \
	printf("%s %s\n", testlib_failures == before_ ? "ok  " : "FAIL", #name); \
	fflush(stdout); \
} while (0)

#define FAILF(...) do { \
	testlib_failures++; \
	fprintf(stderr, "%s:%d: in %s: ", __FILE__, __LINE__, testlib_current); \
	fprintf(stderr, __VA_ARGS__); \
	fputc('\n', stderr); \
} while (0)

#define CHECK(cond) do { testlib_checks++; \
	if (!(cond)) FAILF("check failed: %s", #cond); } while (0)

#define CHECK_INT(a, b) do { testlib_checks++; \
	long long a_ = (long long)(a), b_ = (long long)(b); \
	if (a_ != b_) FAILF("%s == %lld, expected %s == %lld", #a, a_, #b, b_); \
} while (0)

#define CHECK_STR(a, b) do { testlib_checks++; \
	const char *a_ = (a), *b_ = (b); \
	if (!a_ || !b_ || strcmp(a_, b_) != 0) \
		FAILF("%s == \"%s\", expected \"%s\"", #a, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
} while (0)

#define CHECK_CONTAINS(hay, needle) do { testlib_checks++; \
	const char *h_ = (hay), *n_ = (needle); \
	if (!h_ || !strstr(h_, n_)) \
		FAILF("\"%s\" does not contain \"%s\"", h_ ? h_ : "(null)", n_); \
} while (0)

static inline int testlib_done(void)
{
	printf("%d checks, %d failed\n", testlib_checks, testlib_failures);
	return testlib_failures ? 1 : 0;
}

#endif
