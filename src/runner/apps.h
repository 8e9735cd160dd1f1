/* The session's declared apps, started and kept running by the runner
 * (docs/apps.md, "Apps in the runner").
 *
 * An http or tcp app is started the first time a connection asks for it
 * and finds its port closed, then supervised: restarted when it dies,
 * after 1 s, doubling to 30 s while it keeps dying before anyone reached
 * it. It runs as the runner's user (the session's work user after the
 * drop), in /home/work, with the runner's environment (the session's) plus
 * its definition's `env`, in a process group of its own; its stdout and
 * stderr go to the runner's stdout, each line prefixed with `[NAME] `.
 * preopen apps are never started.
 *
 * Module state is global: there is one runner and one list of apps. */
#ifndef TESSERA_RUNNER_APPS_H
#define TESSERA_RUNNER_APPS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "runner/appdef.h"
#include "runner/loop.h"

#define APPS_SERVICE_DEFS "/etc/backend.ai/service-defs"
#define APPS_HOME "/home/work"

/* Takes the declared apps (copied) and the signal mask children start
 * with. */
void apps_init(struct rl_loop *l, const struct app_decl *decls, size_t n, const sigset_t *child_mask);

/* The i-th declared app, NULL past the last. */
const struct app_decl *apps_nth(int i);

/* The declared app of that name, NULL when none. */
const struct app_decl *apps_find(const char *name);

/* The app's port did not answer: has it started (when it is not running
 * or waiting to be restarted). Returns 0 with the STARTING text in msg, or
 * -1 with the ERROR text (the app keeps failing, or cannot be started). */
int apps_want(const struct app_decl *d, char *msg, size_t n);

/* The app's port answered: it counts as having come up. */
void apps_reached(const struct app_decl *d);

/* A child ended: true when it was an app (then handled). */
bool apps_child_exited(pid_t pid, int status);

/* The session stops: no more starts and restarts. */
void apps_stop(void);

/* The signal mask children start with (the runner's own blocks the
 * signals its signalfd takes); terminal.c's shells use it too. */
const sigset_t *apps_child_mask(void);

#endif
