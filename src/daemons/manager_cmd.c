/* tessera manager --config FILE: the manager of a cluster (API,
 * scheduler, state) on its host. Read the config file, then either
 * migrate the store and exit (--migrate-only) or start the manager and
 * wait for a stop signal (or for another manager to become the active
 * one on the shared database). */
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/sdnotify.h"
#include "daemons/daemons.h"
#include "daemons/internal.h"
#include "manager/manager.h"
#include "store/store.h"

/* manager.conf into mcfg, whose strings point into c. Returns -1 to go
 * on, or the exit code when the command line or the file says to stop. */
static int manager_parse(int argc, char **argv, struct conf *c, struct manager_config *mcfg, const char **path,
			 bool *migrate_only)
{
	int rc;
	*path = daemon_config_path(argc, argv, "manager", NULL, &rc, migrate_only);
	if (!*path && rc >= 0)
		return rc;
	static const char *const known[] = {"listen", "data_dir", "cluster_secret", "heartbeat_interval_ms",
					    "lost_after_heartbeats", "selector", "dispatch_workers",
					    "fgpu_per_device", "registry_url", "wsproxy_url", "wsproxy_port_range",
					    "wsproxy_domain", "storage_hosts", "stats_retention_s", "metrics_token", "etcd", "store", "redis", NULL};
	if (daemon_read_config("manager", *path, known, c) < 0)
		return 1;
	*mcfg = (struct manager_config){
		.listen = conf_get(c, "listen") ? conf_get(c, "listen") : "0.0.0.0:8090",
		.data_dir = conf_get(c, "data_dir") ? conf_get(c, "data_dir") : "/var/lib/tessera",
		.cluster_secret = conf_get(c, "cluster_secret"),
		.heartbeat_interval_ms = daemon_conf_int(c, "heartbeat_interval_ms", 2000),
		.lost_after_heartbeats = daemon_conf_int(c, "lost_after_heartbeats", 3),
		.selector = conf_get(c, "selector"),
		.dispatch_workers = daemon_conf_int(c, "dispatch_workers", 4),
		.fgpu_per_device = daemon_conf_int(c, "fgpu_per_device", 0),
		.registry_url = conf_get(c, "registry_url"),
		.wsproxy_url = conf_get(c, "wsproxy_url"),
		.wsproxy_port_range = conf_get(c, "wsproxy_port_range"),
		.wsproxy_domain = conf_get(c, "wsproxy_domain"),
		.storage_hosts = conf_get(c, "storage_hosts"),
		.stats_retention_s = daemon_conf_int(c, "stats_retention_s", 3600),
		.metrics_token = conf_get(c, "metrics_token"),
		.etcd = conf_get(c, "etcd"),
		.store = conf_get(c, "store"),
		.redis_url = conf_get(c, "redis"),
	};
	return -1;
}

/* --migrate-only: the store's schema brought to this version, nothing
 * started. Returns the exit code. */
static int manager_migrate(const struct manager_config *mcfg)
{
	struct terr err = {0};
	/* SQLite's file is the data dir's: not under a running manager. */
	if (!store_setting_is_pg(mcfg->store) &&
	    daemon_lock_data_dir("manager", mcfg->data_dir, "stop it before --migrate-only") < 0)
		return 1;
	int version = 0;
	char where[512];
	if (manager_migrate_only(mcfg, &version, where, sizeof(where), &err) < 0)
		return daemon_fail("manager", &err);
	printf("%s: schema at version %d\n", where, version);
	return 0;
}

/* The settings only a serving manager needs checked, the data dir's
 * lock, then the manager opened and serving. Returns 0, or the exit code
 * after printing why. */
static int manager_start(const char *path, struct manager_config *mcfg, sigset_t *stop,
			 struct daemon_standby *standby, struct manager **m)
{
	struct terr err = {0};
	if (mcfg->stats_retention_s < 60 || mcfg->stats_retention_s > 86400) {
		fprintf(stderr, "tessera manager: %s: stats_retention_s must be an integer from 60 to 86400\n", path);
		return 1;
	}
	if (!mcfg->cluster_secret || strlen(mcfg->cluster_secret) < 16) {
		fprintf(stderr, "tessera manager: %s: cluster_secret must be set, 16 characters or more "
			"(e.g. from 'openssl rand -hex 32')\n", path);
		return 1;
	}
	if (daemon_lock_data_dir("manager", mcfg->data_dir, "stop it, or set another data_dir") < 0)
		return 1;
	daemon_block_stop_signals(stop);
	*standby = (struct daemon_standby){.stop = stop};
	mcfg->standby_wait = daemon_standby_wait;
	mcfg->standby_ud = standby;
	char admin_conf[PATH_MAX + 32];
	if (manager_open(m, mcfg, &err) < 0 || manager_serve(*m, admin_conf, sizeof(admin_conf), &err) < 0) {
		manager_close(*m);
		*m = NULL;
		return daemon_fail("manager", &err);
	}
	log_info("manager", "serving the API on %s; admin credentials in %s", mcfg->listen, admin_conf);
	char status[160];
	snprintf(status, sizeof(status), "serving the API on %s", mcfg->listen);
	sdnotify_ready(status);
	return 0;
}

/* Serves until a stop signal, then closes the manager. Returns the exit
 * code. */
static int manager_wait(struct manager *m, const sigset_t *stop)
{
	int sig = daemon_serve_until_signal("stopping", stop, m);
	if (sig < 0) {
		/* Its state is older than the active one's: exit for a
		 * restart (systemd's Restart=on-failure) as a standby. */
		log_error("manager", "another manager became the active one on the database: stopping");
		manager_close(m);
		return 1;
	}
	log_info("manager", "signal %d: stopping", sig);
	manager_close(m);
	return 0;
}

int cmd_manager(int argc, char **argv)
{
	struct conf c = {0};
	struct manager_config mcfg;
	const char *path;
	bool migrate_only = false;
	int rc = manager_parse(argc, argv, &c, &mcfg, &path, &migrate_only);
	if (rc >= 0)
		return rc;   /* nothing loaded, or freed by daemon_read_config */
	if (migrate_only) {
		rc = manager_migrate(&mcfg);
	} else {
		sigset_t stop;
		struct daemon_standby standby;
		struct manager *m = NULL;
		rc = manager_start(path, &mcfg, &stop, &standby, &m);
		if (rc == 0)
			rc = manager_wait(m, &stop);
	}
	conf_free(&c);
	return rc;
}
