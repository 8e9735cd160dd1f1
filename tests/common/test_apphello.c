/* common/apphello.c: the TESSERA-APP/1 line as the proxy writes it
 * (apphello_format) reads back as the runner parses it (apphello_parse).
 * What the parser refuses is tests/runner/test_proto.c. */
#include <string.h>

#include "common/apphello.h"
#include "testlib.h"

#define S64 "0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcdef"

/* Formats, checks the line's end, parses it back without its \r\n. */
static int round_trip(const char *secret, const char *target, struct apphello *h, struct terr *err)
{
	char line[APPHELLO_LINE_MAX + 1];
	int n = apphello_format(line, sizeof(line), secret, target);
	if (n < 2 || line[n - 2] != '\r' || line[n - 1] != '\n' || (size_t)n != strlen(line))
		return -1000;
	return apphello_parse(line, (size_t)n - 2, h, err);
}

TEST(app_target_round_trips)
{
	struct apphello h;
	struct terr err = {0};
	CHECK_INT(round_trip(S64, "app:jupyter", &h, &err), 0);
	CHECK_STR(h.secret, S64);
	CHECK(!h.is_port);
	CHECK_STR(h.app, "jupyter");
	CHECK_INT(round_trip(S64, "app:terminal", &h, &err), 0);
	CHECK_STR(h.app, "terminal");
	/* The longest name. */
	char target[80] = "app:";
	memset(target + 4, 'a', APPHELLO_NAME_MAX - 1);
	target[4 + APPHELLO_NAME_MAX - 1] = '\0';
	CHECK_INT(round_trip(S64, target, &h, &err), 0);
	CHECK_STR(h.app, target + 4);
}

TEST(port_target_round_trips)
{
	struct apphello h;
	struct terr err = {0};
	CHECK_INT(round_trip(S64, "port:8888", &h, &err), 0);
	CHECK(h.is_port);
	CHECK_INT(h.port, 8888);
	CHECK_STR(h.secret, S64);
	CHECK_INT(round_trip(S64, "port:1", &h, &err), 0);
	CHECK_INT(h.port, 1);
	CHECK_INT(round_trip(S64, "port:65535", &h, &err), 0);
	CHECK_INT(h.port, 65535);
}

TEST(format_writes_the_exact_line)
{
	char line[APPHELLO_LINE_MAX + 1];
	CHECK_INT(apphello_format(line, sizeof(line), S64, "port:5000"), 14 + 64 + 1 + 9 + 2);
	CHECK_STR(line, "TESSERA-APP/1 " S64 " port:5000\r\n");
	char small[20];
	CHECK_INT(apphello_format(small, sizeof(small), S64, "app:x"), -ENAMETOOLONG);
}

/* What the parser refuses the formatter still writes (the runner's answer
 * says what is wrong): a bad secret or target does not round trip. */
TEST(what_is_refused_does_not_round_trip)
{
	struct apphello h;
	struct terr err = {0};
	CHECK_INT(round_trip("abc", "app:x", &h, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "the secret must be 64 hex");
	CHECK_INT(round_trip(S64, "port:7611", &h, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "the runner's own");
	CHECK_INT(round_trip(S64, "app:../x", &h, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "is not an app name");
}

TEST(valid_names)
{
	CHECK(apphello_valid_name("jupyter", 7));
	CHECK(apphello_valid_name("a_b.c-d9", 8));
	CHECK(!apphello_valid_name("", 0));
	CHECK(!apphello_valid_name(".x", 2));
	CHECK(!apphello_valid_name("-x", 2));
	CHECK(!apphello_valid_name("a b", 3));
}

int main(void)
{
	RUN(app_target_round_trips);
	RUN(port_target_round_trips);
	RUN(format_writes_the_exact_line);
	RUN(what_is_refused_does_not_round_trip);
	RUN(valid_names);
	return testlib_done();
}
