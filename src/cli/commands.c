/* The command table of `tessera`: main() dispatches on it and lists it in
 * --help, and the completion scripts and the manual page (completion.c)
 * are made from it and from each noun's table of verbs, so that a command,
 * verb or option added here or there is completed and documented without
 * more ado. */
#include <string.h>

#include "cli/cli.h"
#include "daemons/daemons.h"

#define DAEMON_OPTS "--config=FILE --verbose"

const struct cli_command cli_commands[] = {
	{"server", cmd_server, "run manager, local agent and API in one process (single machine)", NULL,
	 "--data-dir=DIR --port=PORT --listen=ADDR:PORT --selector=concentrated|dispersed --verbose "
	 "--web-port=PORT --fgpu-per-device=N --registry=none|auto|URL --app-ports=A-B --app-address=ADDR "
	 "--stats-retention-s=S --store=URI --redis=URL",
	 "", true},
	{"manager", cmd_manager, "run the manager daemon (--config FILE)", NULL, DAEMON_OPTS " --migrate-only", "",
	 false},
	{"agent", cmd_agent, "run an agent daemon (--config FILE)", NULL, DAEMON_OPTS, "", false},
	{"webserver", cmd_webserver, "run the web UI and login server (--config FILE)", NULL, DAEMON_OPTS, "", false},
	{"wsproxy", cmd_wsproxy, "run the app proxy: browsers to session apps (--config FILE)", NULL, DAEMON_OPTS,
	 "", false},
	{"login", cmd_login, "store an endpoint and keypair in ~/.config/tessera/client.conf", NULL,
	 "--endpoint=URL --access-key=AK --secret-key=SK", "", false},
	{"session", cmd_session, "create, list, inspect, remove sessions; logs; exec", &cli_session_noun, NULL, NULL,
	 false},
	{"folder", cmd_folder, "data folders: create, list, share, remove, restore; mounted into sessions",
	 &cli_folder_noun, NULL, NULL, false},
	{"node", cmd_node, "list nodes (agents) with capacity and usage; drain; resource groups", &cli_node_noun,
	 NULL, NULL, false},
	{"project", cmd_project, "projects (teams): quotas, members, resource groups", &cli_project_noun, NULL, NULL,
	 false},
	{"preset", cmd_preset, "resource presets the launcher offers: list; create, change, remove (admins)",
	 &cli_preset_noun, NULL, NULL, false},
	{"fairshare", cmd_fairshare, "each project's and user's fair share: weight, target, usage, rank", NULL,
	 "--json", "", false},
	{"queue", cmd_queue, "the pending queue: positions, why each waits, history; move or cancel (admins)",
	 &cli_queue_noun, NULL, NULL, false},
	{"usage", cmd_usage, "usage over time: CPU-, memory- and fGPU-hours per day, user or project",
	 &cli_usage_noun, NULL, NULL, false},
	{"image", cmd_image, "list, build, pull, alias and remove images; rescan the nodes' images", &cli_image_noun,
	 NULL, NULL, false},
	{"config", cmd_config, "read or change cluster settings (fGPU per device, queue policy, ...)",
	 &cli_config_noun, NULL, NULL, false},
	{"user", cmd_user, "users (administrators): create, list, change, remove; reset a password", &cli_user_noun,
	 NULL, NULL, false},
	{"key", cmd_key, "your API keys: create, list, revoke", &cli_key_noun, NULL, NULL, false},
	{"admin", cmd_admin,
	 "back up and restore the manager's store; reset the admin's password (on its host)", &cli_admin_noun,
	 NULL, NULL, false},
	{"dashboard", cmd_dashboard, "the cluster at a glance (administrators): capacity, sessions, busiest users, "
	 "failures", NULL, "--json", "", false},
	{"about", cmd_about, "versions and the health of the cluster's components", NULL, "--json", "", false},
	{"completion", cmd_completion, "print a bash or zsh completion script (docs/user-guide.md)", NULL, "",
	 "bash|zsh", false},
	{"manpage", cmd_manpage, "print the tessera(1) manual page (troff)", NULL, "", "", false},
	/* What the completion scripts run for names from the server. */
	{"__complete", cmd_complete_names, NULL, NULL, "", "sessions|images|folders|nodes", false},
};
const size_t cli_n_commands = sizeof(cli_commands) / sizeof(cli_commands[0]);

const struct cli_noun *const cli_subnouns[] = {&cli_user_keys_noun};
const size_t cli_n_subnouns = sizeof(cli_subnouns) / sizeof(cli_subnouns[0]);

const struct cli_command *cli_command_find(const char *name)
{
	for (size_t i = 0; i < cli_n_commands; i++)
		if (!strcmp(cli_commands[i].name, name))
			return &cli_commands[i];
	return NULL;
}
