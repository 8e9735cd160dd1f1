/* `tessera image ...`: the noun's verbs, one table. Each verb lives in
 * its own file (image_build.c: building images from recipes; image_pull.c:
 * pulling from the cluster registry). */
#include "cli/cli.h"
#include "cli/image_cmd.h"

static const struct cli_verb image_verbs[] = {
	{"build", cmd_image_build, "build RECIPE...",
	 "build images from recipes on this machine (root; docs/images.md)"},
	{"pull", cli_image_pull, "pull IMAGE [--node NODE]", "pull an image from the cluster registry onto the nodes"},
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
