/* manager/logtail.c: what is kept of an ended session's log is its last
 * lines, valid UTF-8 without NUL bytes (so PostgreSQL's text takes it),
 * and at most the size asked for, cut at a line or a character. */
#include <stdlib.h>
#include <string.h>

#include "manager/logtail.h"
#include "testlib.h"

static char *tidy(const char *raw, int lines, size_t max)
{
	return logtail_tidy(raw, strlen(raw), lines, max);
}

TEST(keeps_the_last_lines)
{
	char *t = tidy("one\ntwo\nthree\nfour\n", 2, 1000);
	CHECK_STR(t, "three\nfour\n");
	free(t);
	/* A last line without its newline is a line. */
	t = tidy("one\ntwo\nthree", 2, 1000);
	CHECK_STR(t, "two\nthree");
	free(t);
	/* Fewer lines than asked: all of them. */
	t = tidy("only\n", 200, 1000);
	CHECK_STR(t, "only\n");
	free(t);
	t = tidy("", 200, 1000);
	CHECK_STR(t, "");
	free(t);
}

TEST(repairs_what_is_not_utf8)
{
	/* NUL, a lone continuation byte, a cut sequence, an overlong '/',
	 * a surrogate: each byte of them one U+FFFD; valid text kept. */
	static const char raw[] = "a\0b\x80" "c\xe2\x82" "\n\xc0\xaf \xed\xa0\x80 \xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80\n";
	char *t = logtail_tidy(raw, sizeof(raw) - 1, 10, 1000);
	CHECK_STR(t, "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd\n"
		     "\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80\n");
	free(t);
}

TEST(cut_to_size_at_a_line_or_a_character)
{
	/* Whole older lines go first. */
	char *t = tidy("aaaa\nbbbb\ncccc\n", 0, 9);
	CHECK_STR(t, "cccc\n");
	free(t);
	t = tidy("aaaa\nbbbb\ncccc\n", 0, 10);
	CHECK_STR(t, "bbbb\ncccc\n");
	free(t);
	/* One line longer than the room keeps its end, from a character's
	 * start: "é" is two bytes and is not split. */
	t = tidy("x\xc3\xa9\xc3\xa9\xc3\xa9\n", 0, 4);
	CHECK_STR(t, "\xc3\xa9\n");
	free(t);
	CHECK(strlen(t = tidy("0123456789abcdef", 0, 5)) <= 5);
	CHECK_STR(t, "bcdef");
	free(t);
}

TEST(last_lines_of_kept_text)
{
	const char *text = "one\ntwo\nthree\n";
	CHECK_STR(logtail_last_lines(text, 0), text);
	CHECK_STR(logtail_last_lines(text, 1), "three\n");
	CHECK_STR(logtail_last_lines(text, 2), "two\nthree\n");
	CHECK_STR(logtail_last_lines(text, 9), text);
	CHECK_STR(logtail_last_lines("a\nb", 1), "b");
	CHECK_STR(logtail_last_lines("", 3), "");
}

int main(void)
{
	RUN(keeps_the_last_lines);
	RUN(repairs_what_is_not_utf8);
	RUN(cut_to_size_at_a_line_or_a_character);
	RUN(last_lines_of_kept_text);
	return testlib_done();
}
