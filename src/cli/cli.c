/* The nouns' dispatcher: every `tessera NOUN VERB` goes through one table
 * per noun (session_cmd.c, node_cmd.c, config_cmd.c), from which both the
 * dispatch and the list of verbs in the noun's --help come. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#include "cli/client.h"

static void cli_noun_usage(const struct cli_noun *noun, FILE *f)
{
	fputs(noun->usage, f);
	for (size_t i = 0; i < noun->n_verbs; i++)
		if (noun->verbs[i].synopsis)
			fprintf(f, "  %-24s %s\n", noun->verbs[i].synopsis, noun->verbs[i].help);
	if (noun->usage_end)
		fputs(noun->usage_end, f);
}

int cli_dispatch(const struct cli_noun *noun, int argc, char **argv)
{
	if (argc < 2) {
		if (noun->missing)
			return cli_usage_fail(noun->name, "%s", noun->missing);
		cli_noun_usage(noun, stderr);
		return CLI_EXIT_USAGE;
	}
	const char *verb = argv[1];
	if (!strcmp(verb, "--help") || !strcmp(verb, "-h") ||
	    (noun->help_verb && !strcmp(verb, "help"))) {
		cli_noun_usage(noun, stdout);
		return CLI_EXIT_OK;
	}
	for (size_t i = 0; i < noun->n_verbs; i++)
		if (!strcmp(verb, noun->verbs[i].name))
			return noun->verbs[i].run(argc - 1, argv + 1);
	if (noun->unknown)
		return cli_usage_fail(noun->name, "%s", noun->unknown);
	return cli_usage_fail(noun->name, "unknown command '%s'", verb);
}
