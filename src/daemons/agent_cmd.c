/* tessera agent --config FILE: a node's agent in a cluster. Read
 * agent.conf through the settings table (agent/agent_settings.h), then
 * start the agent, its RPC server, its follower of the cluster settings
 * in etcd and its uplink to the manager, and wait for a stop signal;
 * running containers are left running on exit (restart safety). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/agent_settings.h"
#include "agent/etcdfollow.h"
#include "agent/rpc.h"
#include "agent/uplink.h"
#include "common/conf.h"
#include "common/httpd.h"
#include "common/log.h"
#include "common/sdnotify.h"
#include "common/util.h"
#include "daemons/daemons.h"
#include "daemons/internal.h"

/* A running agent daemon: its settings (strings in the config file or
 * the buffers here) and what it started. */
struct agent_daemon {
	struct agent_settings as;
	char listen_host[64], report_host[256];
	sigset_t stop;
	struct agent *a;
	struct httpd *http;
	struct uplink *up;
	struct agent_etcd *follower;
};

/* The keys of agent.conf, from the settings table. */
static void agent_keys_help(void)
{
	printf("Keys of FILE:\n");
	for (size_t i = 0; i < agent_settings_count; i++) {
		const struct agent_setting *d = &agent_settings_table[i];
		char note[96];
		snprintf(note, sizeof(note), "default %s", d->def ? d->def : "");
		daemon_usage_line(stdout, d->key, NULL, d->help,
				  d->flags & AGENT_SETTING_REQUIRED ? "required" : d->def ? note : NULL);
	}
}

/* agent.conf into d->as, its strings pointing into c. Returns -1 to go
 * on, or the exit code. */
static int agent_parse(int argc, char **argv, struct conf *c, struct agent_daemon *d)
{
	int rc;
	const char *path = daemon_config_path(argc, argv, "agent", agent_keys_help, &rc, NULL);
	if (!path && rc >= 0)
		return rc;
	if (daemon_read_config("agent", path, NULL, c) < 0)
		return 1;
	agent_settings_init(&d->as);
	struct terr err = {0};
	if (agent_settings_from_conf(&d->as, c, path, &err) < 0)
		return daemon_fail("agent", &err);
	/* Session apps: published on the RPC address's host unless app_host
	 * says otherwise; on a wildcard, reported as the host the manager
	 * reaches the agent at. */
	int listen_port;
	if (!d->as.agent.app_host &&
	    httpd_parse_listen(d->as.listen, d->listen_host, sizeof(d->listen_host), &listen_port, &err) == 0)
		d->as.agent.app_host = d->listen_host;
	const char *adv = d->as.advertise_url && !strncmp(d->as.advertise_url, "http://", 7) ?
		d->as.advertise_url + 7 : NULL;
	if (adv) {
		size_t hl = strcspn(adv, adv[0] == '[' ? "]" : ":/");
		if (adv[0] == '[')
			adv++, hl = hl ? hl - 1 : 0;
		if (hl && hl < sizeof(d->report_host))
			memcpy(d->report_host, adv, hl), d->report_host[hl] = '\0';
		d->as.agent.app_report_host = d->report_host;
	}
	return -1;
}

/* The data dir's lock, then the agent, its RPC server, the etcd follower
 * and the uplink. Returns 0, or the exit code after printing why (and
 * stopping what had started). */
static int agent_start(struct agent_daemon *d)
{
	struct agent_settings *as = &d->as;
	struct terr err = {0};
	/* One agent per data dir: its sessions' fGPU limits and turn files
	 * live there, and two agents would take each other's. */
	if (as->agent.data_dir && *as->agent.data_dir) {
		/* 0755 as agent_open makes it (daemon_lock_data_dir's is 0700). */
		if (util_mkdir_p(as->agent.data_dir, 0755, &err) < 0)
			return daemon_fail("agent", &err);
		if (daemon_lock_data_dir("agent", as->agent.data_dir, "stop it, or set another data_dir") < 0)
			return 1;
	}

	daemon_block_stop_signals(&d->stop);
	if (agent_open(&d->a, &as->agent, &err) < 0 ||
	    agent_rpc_start(d->a, as->listen, as->cluster_secret, &d->http, &err) < 0) {
		daemon_fail("agent", &err);
		agent_close(d->a);
		return 1;
	}
	struct uplink_config ucfg = {
		.manager = as->manager,
		.cluster_secret = as->cluster_secret,
		.agent_id = as->agent.id,
		.advertise_url = as->advertise_url,
		.agent = d->a,
	};
	if ((as->etcd && agent_etcd_start(&d->follower, d->a, as->etcd, &err) < 0) ||
	    uplink_start(&d->up, &ucfg, &err) < 0) {
		daemon_fail("agent", &err);
		agent_etcd_stop(d->follower);
		httpd_stop(d->http);
		agent_close(d->a);
		return 1;
	}
	log_info("agent", "agent %s serving RPC on %s, manager %s", as->agent.id, as->listen, as->manager);
	/* Ready once its RPC server listens; registering with the manager is
	 * the uplink's business, retried for as long as it takes, so a
	 * manager that is down does not hold the agent's start. */
	char status[320];
	snprintf(status, sizeof(status), "agent %s serving RPC on %s", as->agent.id, as->listen);
	sdnotify_ready(status);
	return 0;
}

/* Serves until a stop signal, then stops what agent_start started. */
static void agent_wait(struct agent_daemon *d)
{
	int sig = daemon_serve_until_signal("stopping; sessions keep running", &d->stop, NULL);
	log_info("agent", "signal %d: stopping (sessions keep running)", sig);
	/* The uplink's queue outlives the agent's watcher, which feeds it. */
	uplink_stop(d->up);
	agent_etcd_stop(d->follower);
	httpd_stop(d->http);
	agent_close(d->a);
	uplink_free(d->up);
}

int cmd_agent(int argc, char **argv)
{
	struct conf c = {0};
	struct agent_daemon d = {0};
	int rc = agent_parse(argc, argv, &c, &d);
	if (rc < 0 && (rc = agent_start(&d)) == 0)
		agent_wait(&d);
	conf_free(&c);
	return rc;
}
