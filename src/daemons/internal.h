/* What the daemon verbs share (daemons.c): the stop signals and the loop
 * that waits for them with systemd's notifications, a manager standby's
 * wait, the data dir's lock, the config file and the usage lines. Private
 * to src/daemons/. */
#ifndef TESSERA_DAEMONS_INTERNAL_H
#define TESSERA_DAEMONS_INTERNAL_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/conf.h"
#include "common/err.h"

struct manager;

/* "tessera VERB: message" on stderr; returns 1, the exit code. */
int daemon_fail(const char *verb, const struct terr *err);

/* Blocks the stop signals in every thread so the main thread alone takes
 * them with sigtimedwait. */
void daemon_block_stop_signals(sigset_t *set);

/* The daemons' main loop once they serve: waits for a stop signal, pinging
 * systemd's watchdog meanwhile (a no-op without WatchdogSec=; the ping says
 * the process is scheduled and its main thread not stuck, the serving
 * threads answer for themselves through Restart=on-failure), then tells
 * systemd it is stopping, with status as its STATUS= line. With a manager
 * m, it also returns when another manager became the active one on the
 * shared database (manager_fenced). Returns the signal, or -1 when
 * fenced. */
int daemon_serve_until_signal(const char *status, const sigset_t *set, struct manager *m);

/* What daemon_standby_wait needs: the stop signals, and whether systemd
 * was told of the standby already. */
struct daemon_standby {
	const sigset_t *stop;
	bool told;
};

/* manager_config.standby_wait (ud: a struct daemon_standby): a second's
 * wait for a stop signal. */
bool daemon_standby_wait(void *ud, const char *standby_on);

/* Locks the data dir for this process (common/pidlock.h); hint ends the
 * message when another process holds it. Returns the lock's fd, kept
 * open for the life of the process, or -1 after printing why. */
int daemon_lock_data_dir(const char *verb, const char *data_dir, const char *hint);

/* One option line of a usage text: the name and its value, then the help
 * (on the next line when the name is long) and the note in parentheses. */
void daemon_usage_line(FILE *f, const char *name, const char *metavar, const char *help, const char *note);

/* The --config FILE of `tessera VERB`. NULL with *rc the exit code when
 * the command line says to stop (--help: 0, a bad option: 2), or with *rc
 * -1 when no --config was given (daemon_read_config says so). more_help
 * (may be NULL) adds to the --help text; migrate_only (NULL: the verb has
 * no such option) is set by --migrate-only. */
const char *daemon_config_path(int argc, char **argv, const char *verb, void (*more_help)(void), int *rc,
			       bool *migrate_only);

/* Loads the config file into c, its keys checked against known (NULL when
 * the caller checks them itself). -1 after printing why. */
int daemon_read_config(const char *verb, const char *path, const char *const *known, struct conf *c);

/* The integer value of key, def when it is not set. */
int daemon_conf_int(const struct conf *c, const char *key, int def);

#endif
