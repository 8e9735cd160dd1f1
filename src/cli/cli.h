/* Entry points of the `tessera` verbs. Each gets argv starting at the verb
 * itself (argv[0] == "session"), prints, and returns the process exit code:
 * 0 on success; on failure one line on stderr and non-zero. */
#ifndef TESSERA_CLI_CLI_H
#define TESSERA_CLI_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Client verbs (cli/). */
int cmd_login(int argc, char **argv);
int cmd_session(int argc, char **argv);
int cmd_node(int argc, char **argv);
int cmd_folder(int argc, char **argv);
int cmd_config(int argc, char **argv);
/* tessera user (admins) and tessera key (everyone's own keys): user_cmd.c. */
int cmd_user(int argc, char **argv);
int cmd_key(int argc, char **argv);
/* tessera admin backup|restore|reset-admin (admin_cmd.c): on the manager's host. */
int cmd_admin(int argc, char **argv);
int cmd_image(int argc, char **argv);
/* Verbs of `tessera image`, one file each (image_cmd.c has the table). */
int cmd_image_build(int argc, char **argv);

/* Verbs of `tessera session` on its apps (session_apps.c; session_cmd.c
 * has the table). */
int cmd_session_apps(int argc, char **argv);
int cmd_session_app(int argc, char **argv);
int cmd_session_shell(int argc, char **argv);
/* session_ssh.c: SSH into a session through the app proxy. */
int cmd_session_ssh(int argc, char **argv);
int cmd_session_ssh_config(int argc, char **argv);
int cmd_session_ssh_proxy(int argc, char **argv);
/* `tessera session stats` (session_stats.c). */
int cmd_session_stats(int argc, char **argv);
/* "/v1/sessions/<escaped ref><suffix>", with ?owner= (or &owner= when
 * suffix has a query) when owner is not NULL. malloc'd (caller frees);
 * NULL when out of memory. */
char *cli_session_path(const char *ref, const char *owner, const char *suffix);
/* --container NAME of the verbs that reach one container (exec, logs,
 * shell, app, apps, stats): cli_session_path adds it; NULL: main1. A ref
 * NAME/CONTAINER says the same. */
extern const char *cli_session_container;

/* Verbs of `tessera node` that drain (node_drain.c; node_cmd.c has the
 * table). */
int cmd_node_drain(int argc, char **argv);
int cmd_node_undrain(int argc, char **argv);
int cmd_node_set_group(int argc, char **argv);
/* tessera project (projects and their members) and tessera fairshare
 * (project_cmd.c). */
int cmd_project(int argc, char **argv);
int cmd_fairshare(int argc, char **argv);
/* tessera queue: the pending queue and its history (queue_cmd.c). */
int cmd_queue(int argc, char **argv);
int cmd_preset(int argc, char **argv);
/* overview_cmd.c: tessera dashboard (admins), tessera about */
int cmd_dashboard(int argc, char **argv);
int cmd_about(int argc, char **argv);
/* tessera usage summary (usage_cmd.c): usage over time. */
int cmd_usage(int argc, char **argv);

/* ---- nouns and their verbs (cli.c) ---- */

/* One verb of a noun: `tessera session create ...`. */
struct cli_verb {
	const char *name;
	/* Gets argv from the verb on (argv[0] == "create"); returns the exit
	 * code, as a cmd_* does. */
	int (*run)(int argc, char **argv);
	/* Its line in the noun's --help: synopsis ("create IMAGE [options]")
	 * and what it does. NULL: the noun's usage text describes it. */
	const char *synopsis;
	const char *help;
	/* Its words, for shell completion and the manual page (completion.c),
	 * which know the options from here only. opts: every option besides
	 * --help, space-separated, "--json" or, taking a value, "--owner=EMAIL"
	 * ("" for none). args: its positional words, space-separated, the
	 * last repeating when it ends in "..." ("" for none). A word that is
	 * SESSION, IMAGE, FOLDER or NODE completes to those names from the
	 * server; FILE and DIR to paths; "a|b" to a or b (its lower-case
	 * words); any other word to nothing. NULL: not described, which the
	 * unit test cli_completion refuses. */
	const char *opts;
	const char *args;
};

/* A noun (`tessera session`): its verbs, and what its help and its usage
 * errors say. All strings are static. */
struct cli_noun {
	const char *name;
	const struct cli_verb *verbs;
	size_t n_verbs;
	/* --help (stdout, exit 0): usage, then a line per verb that has a
	 * synopsis, then usage_end (NULL: nothing). */
	const char *usage;
	const char *usage_end;
	/* The usage error when no verb is given; NULL: the --help text on
	 * stderr, exit 2. */
	const char *missing;
	/* The usage error for a verb not in the table; NULL: "unknown command
	 * 'VERB'". */
	const char *unknown;
	/* Whether `tessera NOUN help` is --help too. */
	bool help_verb;
};

/* Runs the verb argv[1] of noun (argv[0] is the noun's name) with argv
 * from the verb on, or prints the noun's help or a usage error (exit 2,
 * "tessera: MESSAGE; run 'tessera NOUN --help'"). Returns the exit code. */
int cli_dispatch(const struct cli_noun *noun, int argc, char **argv);

#define CLI_NVERBS(verbs) (sizeof(verbs) / sizeof((verbs)[0]))

/* The nouns, each in its *_cmd.c. */
extern const struct cli_noun cli_session_noun, cli_folder_noun, cli_image_noun, cli_node_noun,
	cli_project_noun, cli_user_noun, cli_key_noun, cli_config_noun, cli_admin_noun, cli_user_keys_noun,
	cli_queue_noun, cli_preset_noun, cli_usage_noun;

/* ---- the command table (commands.c) ---- */

/* One `tessera COMMAND`: main() dispatches on these, --help lists them,
 * and the completion scripts and the manual page are made from them. */
struct cli_command {
	const char *name;
	int (*run)(int argc, char **argv);
	/* Its line in `tessera --help`; NULL: hidden (__complete). */
	const char *summary;
	/* Its verbs when it is a noun (then opts and args are NULL). */
	const struct cli_noun *noun;
	/* Otherwise its options and positional words, as a verb's. */
	const char *opts;
	const char *args;
	/* It also takes the agent settings that are flags (tessera server:
	 * agent/agent_settings.h's table, each with its metavar). */
	bool agent_flags;
};
extern const struct cli_command cli_commands[];
extern const size_t cli_n_commands;
/* Nouns below a verb of another (`tessera user keys add`): each one's name
 * is the words that lead to it ("user keys"), its verbs completed and
 * documented after that verb. */
extern const struct cli_noun *const cli_subnouns[];
extern const size_t cli_n_subnouns;
/* The command named name, or NULL. */
const struct cli_command *cli_command_find(const char *name);

/* ---- completion scripts and the manual page (completion.c) ---- */

/* `tessera completion bash|zsh`, `tessera manpage`, and the hidden
 * `tessera __complete sessions|images|folders|nodes` the scripts run. */
int cmd_completion(int argc, char **argv);
int cmd_manpage(int argc, char **argv);
int cmd_complete_names(int argc, char **argv);
/* Writes the completion script for shell ("bash" or "zsh") to f: 0, or
 * -1 for another shell. */
int cli_completion_write(FILE *f, const char *shell);
/* Writes the tessera(1) manual page (troff, man macros) to f. */
void cli_manpage_write(FILE *f);

#endif
