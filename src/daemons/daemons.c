/* What the daemon verbs share (daemons/internal.h): the stop signals and
 * the loop that waits for them, a manager standby's wait, the data dir's
 * lock, the config file and the usage lines. The verbs themselves are one
 * file each: server_cmd.c, manager_cmd.c, agent_cmd.c, webserver_cmd.c,
 * wsproxy_cmd.c. */
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/pidlock.h"
#include "common/sdnotify.h"
#include "common/util.h"
#include "daemons/internal.h"
#include "manager/manager.h"

int daemon_fail(const char *verb, const struct terr *err)
{
	fprintf(stderr, "tessera %s: %s\n", verb, err->msg);
	return 1;
}

void daemon_block_stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static int wait_signal(const sigset_t *set, int timeout_ms)
{
	struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
	return sigtimedwait(set, NULL, &ts);
}

int daemon_serve_until_signal(const char *status, const sigset_t *set, struct manager *m)
{
	int sig;
	while ((sig = wait_signal(set, sdnotify_loop_ms(1000))) < 0) {
		if (m && manager_fenced(m))
			break;
		sdnotify_watchdog();
	}
	sdnotify_stopping(status);
	return sig;
}

/* manager_config.standby_wait: a second's wait for a stop signal. A
 * standby is a started service doing what it should (waiting to take
 * over): under Type=notify it says READY=1 now, or systemd would kill it
 * after TimeoutStartSec; its STATUS= line says it is a standby, and the
 * READY=1 sent once it is active replaces that line. While the database
 * cannot be reached it is not ready (systemd's start timeout and
 * Restart=on-failure answer for that). */
bool daemon_standby_wait(void *ud, const char *standby_on)
{
	struct daemon_standby *c = ud;
	if (standby_on && !c->told) {
		char status[512];
		snprintf(status, sizeof(status), "standby: waiting for the active manager on %s", standby_on);
		sdnotify_ready(status);
		c->told = true;
	}
	if (c->told)
		sdnotify_watchdog();   /* a ready service with WatchdogSec= pings it */
	return wait_signal(c->stop, sdnotify_loop_ms(1000)) >= 0;
}

/* Locks the data dir for this process (common/pidlock.h): two managers
 * on one database would overwrite each other's state. The lock holds
 * until the process exits; a crashed holder's lock goes with it. */
int daemon_lock_data_dir(const char *verb, const char *data_dir, const char *hint)
{
	struct terr err = {0};
	char path[PATH_MAX + 32];
	if (util_mkdir_p(data_dir, 0700, &err) < 0)
		return daemon_fail(verb, &err), -1;
	snprintf(path, sizeof(path), "%s/tessera.lock", data_dir);
	long holder = 0;
	int fd = pidlock_acquire(path, &holder, &err);
	if (fd == -EBUSY) {
		char who[48] = "another process";
		if (holder)
			snprintf(who, sizeof(who), "process %ld", holder);
		fprintf(stderr, "tessera %s: data dir %s is in use by %s (another tessera daemon); %s\n", verb,
			data_dir, who, hint);
		return -1;
	}
	if (fd < 0)
		return daemon_fail(verb, &err), -1;
	return fd;  /* kept open (and locked) for the life of the process */
}

void daemon_usage_line(FILE *f, const char *name, const char *metavar, const char *help, const char *note)
{
	char left[64];
	snprintf(left, sizeof(left), "%s%s%s", name, metavar ? " " : "", metavar ? metavar : "");
	if (strlen(left) > 18)
		fprintf(f, "  %s\n  %-18s  %s", left, "", help);
	else
		fprintf(f, "  %-18s  %s", left, help);
	if (note)
		fprintf(f, " (%s)", note);
	fputc('\n', f);
}

int daemon_read_config(const char *verb, const char *path, const char *const *known, struct conf *c)
{
	struct terr err = {0};
	if (!path) {
		fprintf(stderr, "tessera %s: --config FILE is required (examples in configs/)\n", verb);
		return -1;
	}
	if (conf_load(path, c, &err) < 0 || (known && conf_check_keys(c, known, path, &err) < 0)) {
		conf_free(c);
		daemon_fail(verb, &err);
		return -1;
	}
	return 0;
}

const char *daemon_config_path(int argc, char **argv, const char *verb, void (*more_help)(void), int *rc,
			       bool *migrate_only)
{
	static const struct option all_opts[] = {
		{"config", required_argument, NULL, 'c'}, {"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'}, {"migrate-only", no_argument, NULL, 'M'}, {0},
	};
	static const struct option plain_opts[] = {
		{"config", required_argument, NULL, 'c'}, {"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'}, {0},
	};
	const struct option *opts = migrate_only ? all_opts : plain_opts;
	const char *path = NULL;
	int c;
	optind = 1;
	*rc = -1;
	while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': path = optarg; break;
		case 'v': log_set_level(LOG_DEBUG); break;
		case 'M': *migrate_only = true; break;
		case 'h':
			printf("usage: tessera %s --config FILE [--verbose]%s\n(see configs/%s.conf)\n", verb,
			       migrate_only ? " [--migrate-only]" : "", verb);
			if (more_help)
				more_help();
			*rc = 0;
			return NULL;
		default:
			*rc = 2;
			return NULL;
		}
	}
	return path;
}

int daemon_conf_int(const struct conf *c, const char *key, int def)
{
	const char *v = conf_get(c, key);
	return v ? atoi(v) : def;
}
