/* The daemon verbs: each parses its options or config file, starts the
 * components (manager, agent, webserver, app proxy, registry) and waits
 * for a stop signal. Same contract as the client verbs of cli/cli.h:
 * argv starts at the verb, the return value is the exit code. */
#ifndef TESSERA_DAEMONS_DAEMONS_H
#define TESSERA_DAEMONS_DAEMONS_H

/* tessera server: manager, local agent, API, web UI and app proxy in one
 * process (single machine). */
int cmd_server(int argc, char **argv);
/* tessera manager|agent|webserver|wsproxy --config FILE (cluster mode). */
int cmd_manager(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_webserver(int argc, char **argv);
int cmd_wsproxy(int argc, char **argv);

#endif
