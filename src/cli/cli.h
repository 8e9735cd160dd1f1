/* Entry points of the `tessera` verbs. Each gets argv starting at the verb
 * itself (argv[0] == "session"), prints, and returns the process exit code:
 * 0 on success; on failure one line on stderr and non-zero. */
#ifndef TESSERA_CLI_CLI_H
#define TESSERA_CLI_CLI_H

#include <stdbool.h>
#include <stddef.h>

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

#endif
