/* tessera wsproxy --config FILE: the app proxy of a cluster (src/proxy/,
 * docs/apps.md), relaying browsers to session apps. Read wsproxy.conf in
 * port mode (port_range, bind) or host mode (domain, listen), then start
 * the proxy and wait for a stop signal. */
#include <ctype.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/httpd.h"
#include "common/log.h"
#include "common/sdnotify.h"
#include "common/util.h"
#include "daemons/daemons.h"
#include "daemons/internal.h"
#include "proxy/proxy.h"

/* The proxy's configuration, its strings in the config file or the
 * buffers here. */
struct wsproxy_opts {
	const char *path;       /* the config file */
	struct proxy_config pc;
	char bind[64];
	char ui_dir[PATH_MAX];
};

/* A connection limit of the file (key), 1..1000000, into *out; unset
 * leaves *out. -1 after printing why. */
static int wsproxy_limit(const struct conf *c, const char *path, const char *key, unsigned *out)
{
	const char *s = conf_get(c, key);
	if (!s)
		return 0;
	char *end;
	long v = strtol(s, &end, 10);
	if (*end || v < 1 || v > 1000000) {
		fprintf(stderr, "tessera wsproxy: %s: %s must be 1..1000000\n", path, key);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

/* wsproxy.conf into o, checked. Returns -1 to go on, or the exit code. */
static int wsproxy_parse(int argc, char **argv, struct conf *c, struct wsproxy_opts *o)
{
	int rc;
	const char *path = o->path = daemon_config_path(argc, argv, "wsproxy", NULL, &rc, NULL);
	if (!path && rc >= 0)
		return rc;
	static const char *const known[] = {"manager", "cluster_secret", "port_range", "bind", "domain", "listen",
					    "public_host", "ui_dir", "max_connections", "max_connections_per_addr",
					    NULL};
	if (daemon_read_config("wsproxy", path, known, c) < 0)
		return 1;
	struct terr err = {0};
	struct proxy_config *pc = &o->pc;
	*pc = (struct proxy_config){
		.manager = conf_get(c, "manager"),
		.cluster_secret = conf_get(c, "cluster_secret"),
		.bind = conf_get(c, "bind"),
		.domain = conf_get(c, "domain"),
		.public_host = conf_get(c, "public_host"),
		.ui_dir = conf_get(c, "ui_dir"),
		.port_lo = PROXY_DEFAULT_RANGE_LO,
		.port_hi = PROXY_DEFAULT_RANGE_HI,
	};
	if (!pc->manager || strncmp(pc->manager, "http", 4)) {
		fprintf(stderr, "tessera wsproxy: %s: manager must be the manager's URL, e.g. http://10.0.0.1:8090\n", path);
		return 1;
	}
	if (!pc->cluster_secret || strlen(pc->cluster_secret) < 16) {
		fprintf(stderr, "tessera wsproxy: %s: cluster_secret must be the manager's, 16 characters or more\n", path);
		return 1;
	}
	if (pc->domain) {
		if (conf_get(c, "port_range") || conf_get(c, "bind")) {
			fprintf(stderr, "tessera wsproxy: %s: with domain (host mode) set listen = ADDR:PORT, "
				"not port_range or bind\n", path);
			return 1;
		}
		int port;
		if (httpd_parse_listen(conf_get(c, "listen") ? conf_get(c, "listen") : "0.0.0.0:10200", o->bind,
				       sizeof(o->bind), &port, &err) < 0) {
			fprintf(stderr, "tessera wsproxy: %s: listen: %s\n", path, err.msg);
			return 1;
		}
		pc->listen_port = port;
		pc->bind = o->bind;
		for (const char *d = pc->domain; *d; d++)
			if (!(isalnum((unsigned char)*d) || *d == '-' || *d == '.')) {
				fprintf(stderr, "tessera wsproxy: %s: domain '%s' is not a DNS name\n", path, pc->domain);
				return 1;
			}
	} else {
		if (conf_get(c, "listen")) {
			fprintf(stderr, "tessera wsproxy: %s: listen is for host mode (with domain); "
				"port mode takes port_range and bind\n", path);
			return 1;
		}
		if (conf_get(c, "port_range") &&
		    util_parse_port_range(conf_get(c, "port_range"), &pc->port_lo, &pc->port_hi, &err) < 0) {
			fprintf(stderr, "tessera wsproxy: %s: %s\n", path, err.msg);
			return 1;
		}
	}
	if (wsproxy_limit(c, path, "max_connections", &pc->max_conns) < 0 ||
	    wsproxy_limit(c, path, "max_connections_per_addr", &pc->per_addr_limit) < 0)
		return 1;
	if (!pc->ui_dir) {
		if (proxy_find_ui_dir(o->ui_dir, sizeof(o->ui_dir), &err) < 0)
			log_warn("wsproxy", "the terminal page will answer 404: %s", err.msg);
		else
			pc->ui_dir = o->ui_dir;
	}
	return -1;
}

/* Starts the proxy and serves until a stop signal. Returns the exit
 * code. */
static int wsproxy_run(const struct wsproxy_opts *o)
{
	sigset_t stop;
	daemon_block_stop_signals(&stop);
	struct proxy *px = NULL;
	struct terr err = {0};
	if (proxy_start(&o->pc, &px, &err) < 0) {
		fprintf(stderr, "tessera wsproxy: %s: %s\n", o->path, err.msg);
		return 1;
	}
	sdnotify_ready("serving session apps");
	int sig = daemon_serve_until_signal("stopping", &stop, NULL);
	log_info("wsproxy", "signal %d: stopping", sig);
	proxy_stop(px);
	return 0;
}

int cmd_wsproxy(int argc, char **argv)
{
	struct conf c = {0};
	struct wsproxy_opts o;
	int rc = wsproxy_parse(argc, argv, &c, &o);
	if (rc < 0)
		rc = wsproxy_run(&o);
	conf_free(&c);
	return rc;
}
