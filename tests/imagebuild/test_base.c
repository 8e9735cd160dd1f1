/* The kept base's pure parts (imagebuild/build.h, "the kept base"): the
 * key and the archive's name, the decision whether a build uses a kept
 * base, the age limit's values. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "imagebuild/build.h"
#include "testlib.h"

#define DEB "http://deb.debian.org/debian"

TEST(key_text_and_name)
{
	char key[1200], name[128];
	CHECK_INT(img_base_key_text("bookworm", "minbase", "amd64", DEB, key, sizeof(key)), 0);
	CHECK_STR(key, "suite bookworm\nvariant minbase\narch amd64\nmirror " DEB "\n");
	CHECK_INT(img_base_name("bookworm", "minbase", "amd64", DEB, name, sizeof(name)), 0);
	/* The first 12 hex digits of sha256sum of the key's text: the
	 * archive's name can be told from outside (the e2e test does). */
	CHECK_STR(name, "minbase-amd64-7a24c79701ed.tar.zst");
}

/* Each part of the key changes the name; the same key gives the same. */
TEST(every_part_of_the_key_counts)
{
	char a[128], b[128];
	img_base_name("bookworm", "minbase", "amd64", DEB, a, sizeof(a));
	img_base_name("bookworm", "minbase", "amd64", DEB, b, sizeof(b));
	CHECK_STR(a, b);
	static const char *const other[][4] = {
		{"trixie", "minbase", "amd64", DEB},
		{"bookworm", "buildd", "amd64", DEB},
		{"bookworm", "minbase", "arm64", DEB},
		{"bookworm", "minbase", "amd64", "http://mirror.example/debian"},
		{"bookworm", "minbase", "amd64", "https://deb.debian.org/debian"},
	};
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		CHECK_INT(img_base_name(other[i][0], other[i][1], other[i][2], other[i][3], b, sizeof(b)), 0);
		if (!strcmp(a, b))
			FAILF("same name for %s %s %s %s", other[i][0], other[i][1], other[i][2], other[i][3]);
	}
}

TEST(bad_parts_are_refused)
{
	char name[128];
	CHECK_INT(img_base_name("bookworm", "minbase", "", DEB, name, sizeof(name)), -EINVAL);
	CHECK_STR(name, "");
	CHECK_INT(img_base_name("bookworm", "minbase", "../x", DEB, name, sizeof(name)), -EINVAL);
	CHECK_INT(img_base_name("bookworm", "minbase", "AMD64", DEB, name, sizeof(name)), -EINVAL);
	CHECK_INT(img_base_name("bookworm", "min/base", "amd64", DEB, name, sizeof(name)), -EINVAL);
	CHECK_INT(img_base_name("bookworm", "minbase", "amd64", "http://a b", name, sizeof(name)), -EINVAL);
	CHECK_INT(img_base_name("bookworm", "minbase", "amd64", "http://a\nsuite x", name, sizeof(name)), -EINVAL);
	CHECK_INT(img_base_name("", "minbase", "amd64", DEB, name, sizeof(name)), -EINVAL);
	CHECK_INT(img_base_name("bookworm", "minbase", "amd64", NULL, name, sizeof(name)), -EINVAL);
	CHECK_INT(img_base_name("bookworm", "minbase", "amd64", DEB, name, 10), -ENAMETOOLONG);
	CHECK_STR(name, "");
}

TEST(age_decides)
{
	const int64_t now = 1800000000, day = 86400;
	CHECK_INT(img_base_decide(false, 0, now, 0, false), IMG_BASE_NONE);
	CHECK_INT(img_base_decide(true, now - 60, now, 0, false), IMG_BASE_USE);
	/* The default limit is 7 days; exactly 7 days old is still used. */
	CHECK_INT(img_base_decide(true, now - 7 * day, now, 0, false), IMG_BASE_USE);
	CHECK_INT(img_base_decide(true, now - 7 * day - 1, now, 0, false), IMG_BASE_OLD);
	CHECK_INT(img_base_decide(true, now - 2 * day, now, 1, false), IMG_BASE_OLD);
	CHECK_INT(img_base_decide(true, now - 20 * day, now, 30, false), IMG_BASE_USE);
	/* --fresh-base wins over everything. */
	CHECK_INT(img_base_decide(true, now - 60, now, 0, true), IMG_BASE_FRESH);
	CHECK_INT(img_base_decide(false, 0, now, 0, true), IMG_BASE_FRESH);
	/* A little ahead is a clock's rounding; far ahead, a clock set back. */
	CHECK_INT(img_base_decide(true, now + 30, now, 0, false), IMG_BASE_USE);
	CHECK_INT(img_base_decide(true, now + day, now, 0, false), IMG_BASE_FUTURE);
	CHECK(img_base_reason(IMG_BASE_USE) == NULL);
	CHECK_STR(img_base_reason(IMG_BASE_NONE), "no kept base");
	CHECK_STR(img_base_reason(IMG_BASE_FRESH), "--fresh-base");
}

TEST(max_age_values)
{
	int d = 0;
	CHECK_INT(img_base_parse_max_age("7", &d), 0);
	CHECK_INT(d, 7);
	CHECK_INT(img_base_parse_max_age("3650", &d), 0);
	CHECK_INT(d, 3650);
	static const char *const bad[] = {"", "0", "3651", "-1", "7d", " 7", "1.5", "99999", "abc"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		d = 42;
		if (img_base_parse_max_age(bad[i], &d) != -EINVAL || d != 42)
			FAILF("'%s' taken as a number of days", bad[i]);
	}
	CHECK_INT(img_base_parse_max_age(NULL, &d), -EINVAL);
}

TEST(date)
{
	char buf[64];
	img_base_date(1800000000, buf, sizeof(buf));
	CHECK_STR(buf, "2027-01-15 08:00 UTC");
}

int main(void)
{
	RUN(key_text_and_name);
	RUN(every_part_of_the_key_counts);
	RUN(bad_parts_are_refused);
	RUN(age_decides);
	RUN(max_age_values);
	RUN(date);
	return testlib_done();
}
