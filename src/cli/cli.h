/* Entry points of the `tessera` verbs. Each gets argv starting at the verb
 * itself (argv[0] == "session"), prints, and returns the process exit code:
 * 0 on success; on failure one line on stderr and non-zero. */
#ifndef TESSERA_CLI_CLI_H
#define TESSERA_CLI_CLI_H

/* Client verbs (cli/). */
int cmd_login(int argc, char **argv);
int cmd_session(int argc, char **argv);
int cmd_node(int argc, char **argv);
int cmd_config(int argc, char **argv);

/* Daemons (cli/daemons.c): parse options, then run manager/agent code. */
int cmd_server(int argc, char **argv);
int cmd_manager(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_webserver(int argc, char **argv);

#endif
