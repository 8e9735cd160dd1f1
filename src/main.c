/* tessera: one binary, one command table. main() only parses the verb and
 * dispatches; every verb lives in its component (cli/ the client's,
 * daemons/ the daemons'). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/httpc.h"
#include "daemons/daemons.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

#define TESSERA_COMMANDS(X) \
	X("server",  cmd_server,  "run manager, local agent and API in one process (single machine)") \
	X("manager", cmd_manager, "run the manager daemon (--config FILE)") \
	X("agent",   cmd_agent,   "run an agent daemon (--config FILE)") \
	X("webserver", cmd_webserver, "run the web UI and login server (--config FILE)") \
	X("wsproxy", cmd_wsproxy, "run the app proxy: browsers to session apps (--config FILE)") \
	X("login",   cmd_login,   "store an endpoint and keypair in ~/.config/tessera/client.conf") \
	X("session", cmd_session, "create, list, inspect, remove sessions; logs; exec") \
	X("folder",  cmd_folder,  "data folders: create, list, share, remove, restore; mounted into sessions") \
	X("node",    cmd_node,    "list nodes (agents) with capacity and usage; drain; resource groups") \
	X("project", cmd_project, "projects (teams): quotas, members, resource groups") \
	X("fairshare", cmd_fairshare, "each project's and user's fair share: weight, target, usage, rank") \
	X("image",   cmd_image,   "list, build, pull, alias and remove images; rescan the nodes' images") \
	X("config",  cmd_config,  "read or change cluster settings (fGPU per device, queue policy, ...)") \
	X("user",    cmd_user,    "users (administrators): create, list, change, remove; reset a password") \
	X("key",     cmd_key,     "your API keys: create, list, revoke") \
	X("admin",   cmd_admin,   "back up and restore the manager's store; reset the admin's password (on its host)")

#define AS_ENTRY(name, fn, summary) {name, fn, summary},
static const struct command commands[] = {TESSERA_COMMANDS(AS_ENTRY)};

static void usage(FILE *out)
{
	fprintf(out, "usage: tessera <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
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
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "tessera: unknown command '%s'; run 'tessera --help'\n", argv[1]);
	return 2;
}
