/* tessera: one binary. main() only parses the verb and dispatches on the
 * command table (src/cli/commands.c); every verb lives in its component
 * (cli/ the client's, daemons/ the daemons'). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/httpc.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: tessera <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < cli_n_commands; i++)
		if (cli_commands[i].summary)
			fprintf(out, "  %-10s %s\n", cli_commands[i].name, cli_commands[i].summary);
	fprintf(out, "\nrun 'tessera <command> --help' for a command's options\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("tessera %s\n", TESSERA_VERSION);
		return 0;
	}
	httpc_global_init();
	const struct cli_command *cmd = cli_command_find(argv[1]);
	if (cmd)
		return cmd->run(argc - 1, argv + 1);
	fprintf(stderr, "tessera: unknown command '%s'; run 'tessera --help'\n", argv[1]);
	return 2;
}
