/* `tessera image`: the noun's table. Each verb lives in its own file
 * (image_build.c: building images from recipes). */
#include "cli/cli.h"

static const struct cli_verb image_verbs[] = {
	{"build", cmd_image_build, "build RECIPE...",
	 "build images from recipes on this machine (root; docs/images.md)"},
};

static const struct cli_noun image_noun = {
	.name = "image",
	.verbs = image_verbs,
	.n_verbs = CLI_NVERBS(image_verbs),
	.usage = "usage: tessera image <command> [options]\n\ncommands:\n",
	.usage_end = "\nRun 'tessera image <command> --help'.\n",
	.missing = "missing command",
	.help_verb = true,
};

int cmd_image(int argc, char **argv)
{
	return cli_dispatch(&image_noun, argc, argv);
}
