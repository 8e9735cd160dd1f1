/* The nouns' dispatcher: a verb gets argv from itself on; --help lists
 * the verbs from the table; a missing or unknown verb is a usage error
 * (exit 2) with the noun's own message. Output is captured by pointing
 * stdout and stderr at temporary files. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "testlib.h"

static int got_argc;
static char *got_argv0, *got_argv1;

static int verb_run(int argc, char **argv)
{
	got_argc = argc;
	got_argv0 = argv[0];
	got_argv1 = argc > 1 ? argv[1] : NULL;
	return 7;
}

static const struct cli_verb verbs[] = {
	{"make", verb_run, "make THING", "make a thing", "", "THING"},
	{"hidden", verb_run, NULL, NULL, "", ""},
};

static const struct cli_noun listed = {
	.name = "thing", .verbs = verbs, .n_verbs = CLI_NVERBS(verbs),
	.usage = "usage: tessera thing <command>\n", .usage_end = "end\n",
	.missing = "missing command", .help_verb = true,
};

/* A noun whose usage text describes its verbs itself. */
static const struct cli_verb terse_verbs[] = {
	{"make", verb_run, NULL, NULL, "", ""},
};

static const struct cli_noun terse = {
	.name = "terse", .verbs = terse_verbs, .n_verbs = CLI_NVERBS(terse_verbs),
	.usage = "usage: tessera terse make\n", .unknown = "expected 'make'",
};

struct captured {
	int rc;
	char out[1024], err[1024];
};

static void slurp(FILE *f, char *buf, size_t n)
{
	rewind(f);
	size_t got = fread(buf, 1, n - 1, f);
	buf[got] = '\0';
	fclose(f);
}

/* Runs cli_dispatch(noun, argv) with its stdout and stderr captured. */
static struct captured run(const struct cli_noun *noun, int argc, char **argv)
{
	struct captured c = {0};
	FILE *o = tmpfile(), *e = tmpfile();
	fflush(stdout);
	fflush(stderr);
	int so = dup(1), se = dup(2);
	dup2(fileno(o), 1);
	dup2(fileno(e), 2);
	c.rc = cli_dispatch(noun, argc, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(so, 1);
	dup2(se, 2);
	close(so);
	close(se);
	slurp(o, c.out, sizeof(c.out));
	slurp(e, c.err, sizeof(c.err));
	return c;
}

TEST(a_verb_gets_argv_from_itself_on)
{
	char *argv[] = {"thing", "make", "x", NULL};
	struct captured c = run(&listed, 3, argv);
	CHECK_INT(c.rc, 7);
	CHECK_INT(got_argc, 2);
	CHECK_STR(got_argv0, "make");
	CHECK_STR(got_argv1, "x");
	char *argv2[] = {"thing", "hidden", NULL};
	CHECK_INT(run(&listed, 2, argv2).rc, 7);
	CHECK_STR(got_argv0, "hidden");
}

TEST(help_lists_the_verbs_with_a_synopsis)
{
	static const char *const helps[] = {"--help", "-h", "help"};
	for (int i = 0; i < 3; i++) {
		char *argv[] = {"thing", (char *)helps[i], NULL};
		struct captured c = run(&listed, 2, argv);
		CHECK_INT(c.rc, CLI_EXIT_OK);
		CHECK_STR(c.out, "usage: tessera thing <command>\n"
				 "  make THING               make a thing\n"
				 "end\n");
		CHECK_STR(c.err, "");
	}
}

TEST(missing_and_unknown_verbs_are_usage_errors)
{
	char *argv[] = {"thing", "bogus", NULL};
	struct captured c = run(&listed, 1, argv);
	CHECK_INT(c.rc, CLI_EXIT_USAGE);
	CHECK_STR(c.err, "tessera: missing command; run 'tessera thing --help'\n");
	c = run(&listed, 2, argv);
	CHECK_INT(c.rc, CLI_EXIT_USAGE);
	CHECK_STR(c.err, "tessera: unknown command 'bogus'; run 'tessera thing --help'\n");
	CHECK_STR(c.out, "");
}

TEST(a_noun_may_say_its_own_messages)
{
	char *argv[] = {"terse", "help", NULL};
	struct captured c = run(&terse, 1, argv);   /* no verb: the usage, on stderr */
	CHECK_INT(c.rc, CLI_EXIT_USAGE);
	CHECK_STR(c.err, "usage: tessera terse make\n");
	CHECK_STR(c.out, "");
	c = run(&terse, 2, argv);                   /* "help" is no verb of this noun */
	CHECK_INT(c.rc, CLI_EXIT_USAGE);
	CHECK_STR(c.err, "tessera: expected 'make'; run 'tessera terse --help'\n");
}

int main(void)
{
	RUN(a_verb_gets_argv_from_itself_on);
	RUN(help_lists_the_verbs_with_a_synopsis);
	RUN(missing_and_unknown_verbs_are_usage_errors);
	RUN(a_noun_may_say_its_own_messages);
	return testlib_done();
}
