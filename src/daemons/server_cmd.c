/* tessera server: the single-machine mode. One process runs the manager,
 * one in-process agent, the API, the web UI, the app proxy and the
 * cluster registry (a child process). cmd_server is three steps:
 * server_parse reads the command line, server_start locks the data dir
 * and starts the components in order, server_wait serves until a stop
 * signal and stops them; running containers are left running on exit
 * (restart safety). */
#include <arpa/inet.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/agent_settings.h"
#include "common/conf.h"
#include "common/httpd.h"
#include "common/log.h"
#include "common/redis.h"
#include "common/sdnotify.h"
#include "common/sign.h"
#include "common/util.h"
#include "daemons/daemons.h"
#include "daemons/internal.h"
#include "manager/approutes.h"
#include "manager/manager.h"
#include "proxy/proxy.h"
#include "registry/registry.h"
#include "web/webserver.h"

/* What the command line asks for. Strings point into argv or the buffers
 * here. */
struct server_opts {
	char data_dir[PATH_MAX];
	char listen[128];
	char host[64];             /* listen's address */
	long web_port;
	const char *registry;      /* none, auto or a URL */
	const char *app_address;   /* --app-address, or NULL */
	int app_lo, app_hi;        /* --app-ports */
	struct agent_settings as;  /* the local agent's flags */
	struct manager_config mcfg;
};

/* The running server: what it started, and the buffers its components'
 * configurations point into, which live as long as they do. */
struct server {
	sigset_t stop;
	struct daemon_standby standby;
	char apps_ip[64];          /* the app proxy's address */
	char proxy_url[96];
	char agent_dir[PATH_MAX + 16];
	char storage_hosts[PATH_MAX + 32];
	char web_secret[65];
	char admin_conf[PATH_MAX + 32];
	struct agent_config acfg;
	struct registry_proc *registry;
	struct manager *m;
	struct agent *a;
	struct web *web;
	struct proxy *apps;
};

/* "--cpu": how an error names a setting given as a flag. */
static void flag_name(const struct agent_setting *d, char *buf, size_t n)
{
	snprintf(buf, n, "--%s", d->flag);
}


/* Adds (or replaces) web_url in admin.conf. */
static int admin_conf_set_web_url(const char *path, const char *url, struct terr *err)
{
	struct conf c = {0};
	int rc = conf_load(path, &c, err);
	if (rc < 0)
		return rc;
	const char **keys = calloc(c.n + 1, sizeof(*keys)), **vals = calloc(c.n + 1, sizeof(*vals));
	size_t n = 0;
	if (!keys || !vals) {
		rc = terr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < c.n; i++) {
		if (!strcmp(c.items[i].key, "web_url"))
			continue;
		keys[n] = c.items[i].key;
		vals[n++] = c.items[i].value;
	}
	keys[n] = "web_url";
	vals[n++] = url;
	rc = conf_write(path, 0600, keys, vals, n, err);
out:
	free(keys);
	free(vals);
	conf_free(&c);
	return rc;
}

/* The webserver inside `tessera server`, on the API's address. The UI is
 * a convenience there: when it is not built the server runs on and says
 * why. A port in use stops the server (-1): serving beside whatever holds
 * it would send users to the other one. */
static int server_start_web(const char *host, long port, const char *manager, const char *secret,
			    const char *admin_conf, const char *redis_url, struct web **out)
{
	char listen[96];
	snprintf(listen, sizeof(listen), "%s:%ld", host, port);
	/* With --redis, logins are kept there as a webserver's are. */
	struct web_config wc = {.listen = listen, .manager = manager, .web_secret = secret, .redis_url = redis_url};
	struct terr err = {0};
	*out = NULL;
	if (web_start(&wc, out, &err) < 0) {
		if (err.code == EADDRINUSE) {
			fprintf(stderr, "tessera server: web UI: %s (choose another with --web-port; 0 picks a free one)\n",
				err.msg);
			return -1;
		}
		log_warn("server", "web UI not started: %s", err.msg);
		return 0;
	}
	if (admin_conf_set_web_url(admin_conf, web_url(*out), &err) < 0)
		log_warn("server", "cannot add web_url to %s: %s", admin_conf, err.msg);
	log_info("server", "serving the web UI on %s", web_url(*out));
	return 0;
}

/* The app proxy inside `tessera server`, on the API's address. Sessions
 * and the API work without it, so most failures are a warning; but a port
 * of its range in use stops the server (-1), as the web UI's does: the
 * manager hands out every port of the range, and a link to a port another
 * process holds would take the user, token and all, there. */
static int server_start_proxy(const char *host, const char *manager, const char *secret, int lo, int hi,
			      struct proxy **out)
{
	char ui_dir[PATH_MAX];
	struct terr err = {0};
	struct proxy_config pc = {.manager = manager, .cluster_secret = secret, .bind = host, .port_lo = lo,
				  .port_hi = hi};
	if (proxy_find_ui_dir(ui_dir, sizeof(ui_dir), &err) == 0)
		pc.ui_dir = ui_dir;
	*out = NULL;
	if (proxy_start(&pc, out, &err) < 0) {
		if (err.code == EADDRINUSE) {
			fprintf(stderr, "tessera server: app proxy: %s (choose another range with --app-ports, "
				"e.g. --app-ports 20205-20300)\n", err.msg);
			return -1;
		}
		log_warn("server", "app proxy not started (session apps cannot be opened): %s", err.msg);
	}
	return 0;
}

/* The app proxy's address for `tessera server`, into out: --app-address
 * when given (an IP address other than the API's), else 127.0.0.2 for an
 * API on an IPv4 loopback address or a wildcard (127.0.0.3 when the API
 * itself is on 127.0.0.2). Every 127/8 address answers on Linux's
 * loopback with no set-up, and a browser keeps cookies apart per host
 * name or address, so the web UI's login never goes to an app. Another
 * API address has no such twin: EINVAL, asking for --app-address. */
static int server_app_address(const char *api_host, const char *given, char *out, size_t n, struct terr *err)
{
	struct in6_addr a6;
	struct in_addr a4;
	if (given) {
		if (inet_pton(AF_INET, given, &a4) != 1 && inet_pton(AF_INET6, given, &a6) != 1)
			return terr_set(err, EINVAL, "--app-address must be an IP address of this machine, not '%.80s'",
					given);
		if (!strcmp(given, "0.0.0.0") || !strcmp(given, "::"))
			return terr_set(err, EINVAL, "--app-address must be one address that browsers open apps on, "
					"not the wildcard %s", given);
		if (!strcmp(given, api_host))
			return terr_set(err, EINVAL, "--app-address %s is the API's and the web UI's address: apps "
					"need another one, or the browser sends the web UI's login to every app "
					"(docs/security.md)", given);
		return util_strlcpy(out, given, n) < 0 ? terr_set(err, EINVAL, "--app-address is too long") : 0;
	}
	bool wildcard = !strcmp(api_host, "0.0.0.0") || !strcmp(api_host, "::") || !*api_host;
	if (wildcard || (inet_pton(AF_INET, api_host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127)) {
		util_strlcpy(out, strcmp(api_host, "127.0.0.2") ? "127.0.0.2" : "127.0.0.3", n);
		return 0;
	}
	return terr_set(err, EINVAL, "--listen %s: give session apps an address of their own with --app-address ADDR "
			"(another address of this machine that browsers reach); on the web UI's address the browser "
			"would send its login to every app (docs/security.md)", api_host);
}

static void server_usage(FILE *f)
{
	fprintf(f,
		"usage: tessera server [--data-dir DIR] [--port PORT | --listen ADDR:PORT]\n"
		"                      [--cpu N] [--mem SIZE] [--mem-reserve SIZE] [--selector NAME] ...\n"
		"Runs the manager, one local agent (Docker) and the API in one process.\n");
	daemon_usage_line(f, "--data-dir", "DIR", "state (SQLite) and admin.conf (default ~/.local/share/tessera)", NULL);
	daemon_usage_line(f, "--port", "PORT", "API port on 127.0.0.1 (default 8090)", NULL);
	daemon_usage_line(f, "--listen", "ADDR:PORT", "API address, e.g. 0.0.0.0:8090", NULL);
	daemon_usage_line(f, "--selector", "NAME", "concentrated (default) or dispersed", NULL);
	daemon_usage_line(f, "--fgpu-per-device", "N", "fGPU one physical GPU counts as (cluster setting, default 1)", NULL);
	daemon_usage_line(f, "--web-port", "PORT", "web UI port on the API's address (default 8080; 0 = any free port)", NULL);
	daemon_usage_line(f, "--registry", "none|auto|URL",
			  "the cluster registry: auto runs docker-registry on a loopback port, data under DATA_DIR/registry "
			  "(default auto)", NULL);
	daemon_usage_line(f, "--app-ports", "A-B", "ports the app proxy gives opened session apps (default "
			  APPROUTES_DEFAULT_RANGE ")", NULL);
	daemon_usage_line(f, "--app-address", "ADDR",
			  "the app proxy's own IP address, never the web UI's (default 127.0.0.2 when the API is on "
			  "127.0.0.1 or a wildcard; required with another --listen address)", NULL);
	daemon_usage_line(f, "--stats-retention-s", "S", "how long sessions' usage history is kept (default 3600)", NULL);
	daemon_usage_line(f, "--store", "URI", "the database: postgresql://USER@HOST:PORT/DB (default SQLite in the data dir)",
			  NULL);
	daemon_usage_line(f, "--redis", "URL", "Redis for heartbeats, login limits and the usage history: "
			  "redis://HOST:PORT/DB (default: this process's memory)", NULL);
	daemon_usage_line(f, "--verbose", NULL, "debug logging", NULL);
	fprintf(f, "The local agent (agent.conf's settings as flags, docs/admin.md):\n");
	for (size_t i = 0; i < agent_settings_count; i++) {
		const struct agent_setting *d = &agent_settings_table[i];
		char name[64];
		if (!(d->flags & AGENT_SETTING_FLAG))
			continue;
		flag_name(d, name, sizeof(name));
		char note[96];
		snprintf(note, sizeof(note), "default %s", d->def ? d->def : "");
		daemon_usage_line(f, name, d->metavar, d->help, d->def ? note : NULL);
	}
}

/* The command line into o. Returns -1 to go on, or the exit code: 0
 * after --help, 2 for a bad option (1 when out of memory or the listen
 * address is bad). */
static int server_parse(int argc, char **argv, struct server_opts *o)
{
	/* The server's own options, then one per agent setting that is a
	 * flag (agent/agent_settings.h), whose val is 1000 + its index. */
	enum { SETTING_OPT = 1000 };
	static const struct option own_opts[] = {
		{"data-dir", required_argument, NULL, 'd'}, {"port", required_argument, NULL, 'p'},
		{"listen", required_argument, NULL, 'l'},
		{"selector", required_argument, NULL, 's'}, {"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"web-port", required_argument, NULL, 'W'},
		{"fgpu-per-device", required_argument, NULL, 'f'},
		{"registry", required_argument, NULL, 'R'},
		{"app-ports", required_argument, NULL, 'A'},
		{"app-address", required_argument, NULL, 'a'},
		{"stats-retention-s", required_argument, NULL, 'T'},
		{"store", required_argument, NULL, 'S'},
		{"redis", required_argument, NULL, 'r'},
	};
	size_t n_own = sizeof(own_opts) / sizeof(own_opts[0]);
	struct option *opts = calloc(n_own + agent_settings_count + 1, sizeof(*opts));
	if (!opts) {
		fprintf(stderr, "tessera server: out of memory\n");
		return 1;
	}
	memcpy(opts, own_opts, sizeof(own_opts));
	size_t n_opts = n_own;
	for (size_t i = 0; i < agent_settings_count; i++)
		if (agent_settings_table[i].flags & AGENT_SETTING_FLAG)
			opts[n_opts++] = (struct option){agent_settings_table[i].flag, required_argument, NULL,
							 SETTING_OPT + (int)i};

	struct manager_config *mcfg = &o->mcfg;
	const char *home = getenv("HOME");
	if (home && *home)
		snprintf(o->data_dir, sizeof(o->data_dir), "%s/.local/share/tessera", home);
	else
		snprintf(o->data_dir, sizeof(o->data_dir), "/var/lib/tessera");
	agent_settings_init(&o->as);
	*mcfg = (struct manager_config){0};
	snprintf(o->listen, sizeof(o->listen), "127.0.0.1:8090");
	o->web_port = 8080;
	o->registry = "auto";
	o->app_address = NULL;
	o->app_lo = PROXY_DEFAULT_RANGE_LO;
	o->app_hi = PROXY_DEFAULT_RANGE_HI;
	int c, ret = 2;
	struct terr err = {0};
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': util_strlcpy(o->data_dir, optarg, sizeof(o->data_dir)); break;
		case 'p': {
			char *end;
			long p = strtol(optarg, &end, 10);
			if (*end || p < 0 || p > 65535) {
				fprintf(stderr, "tessera server: --port must be 0..65535\n");
				goto out_opts;
			}
			snprintf(o->listen, sizeof(o->listen), "127.0.0.1:%ld", p);
			break;
		}
		case 'l': util_strlcpy(o->listen, optarg, sizeof(o->listen)); break;
		case 's': mcfg->selector = optarg; break;
		case 'f': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > 100) {
				fprintf(stderr, "tessera server: --fgpu-per-device must be an integer from 1 to 100\n");
				goto out_opts;
			}
			mcfg->fgpu_per_device = (int)v;
			break;
		}
		case 'W': {
			char *end;
			o->web_port = strtol(optarg, &end, 10);
			if (*end || o->web_port < 0 || o->web_port > 65535) {
				fprintf(stderr, "tessera server: --web-port must be 0..65535\n");
				goto out_opts;
			}
			break;
		}
		case 'R': o->registry = optarg; break;
		case 'T': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || v < 60 || v > 86400) {
				fprintf(stderr, "tessera server: --stats-retention-s must be an integer from 60 to 86400\n");
				goto out_opts;
			}
			mcfg->stats_retention_s = (int)v;
			break;
		}
		case 'S': mcfg->store = optarg; break;
		case 'r': {
			/* The URL checked here, so a typo is one line before
			 * anything starts. */
			struct redis_client *rc;
			if (redis_open(optarg, &rc, &err) < 0) {
				fprintf(stderr, "tessera server: --redis: %s\n", err.msg);
				goto out_opts;
			}
			redis_close(rc);
			mcfg->redis_url = optarg;
			break;
		}
		case 'A':
			if (util_parse_port_range(optarg, &o->app_lo, &o->app_hi, &err) < 0) {
				fprintf(stderr, "tessera server: --app-ports: %s\n", err.msg);
				goto out_opts;
			}
			mcfg->wsproxy_port_range = optarg;
			break;
		case 'a': o->app_address = optarg; break;
		case 'v': log_set_level(LOG_DEBUG); break;
		case 'h': server_usage(stdout); ret = 0; goto out_opts;
		default:
			if (c >= SETTING_OPT && (size_t)(c - SETTING_OPT) < agent_settings_count) {
				const struct agent_setting *d = &agent_settings_table[c - SETTING_OPT];
				char name[64];
				flag_name(d, name, sizeof(name));
				if (agent_setting_set(&o->as, d, optarg, name, &err) < 0) {
					fprintf(stderr, "tessera server: %s\n", err.msg);
					goto out_opts;
				}
				break;
			}
			server_usage(stderr);
			goto out_opts;
		}
	}
	free(opts);
	if (optind < argc) {
		fprintf(stderr, "tessera server: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	int port;
	if (httpd_parse_listen(o->listen, o->host, sizeof(o->host), &port, &err) < 0)
		return daemon_fail("server", &err);
	if (strcmp(o->registry, "none") && strcmp(o->registry, "auto")) {
		char rhost[256], rbase[300];
		if (registry_parse_url(o->registry, rhost, sizeof(rhost), rbase, sizeof(rbase), &err) < 0) {
			fprintf(stderr, "tessera server: --registry must be none, auto or a URL: %s\n", err.msg);
			return 2;
		}
		mcfg->registry_url = o->registry;
	}
	return -1;
out_opts:
	free(opts);
	return ret;
}

/* Stops what server_start started, the app proxy first and the registry
 * last; NULLs are skipped. */
static void server_stop(struct server *s)
{
	proxy_stop(s->apps);
	web_stop(s->web);
	/* The in-process agent's watchers report to the manager: stopped
	 * first, so that none calls into a manager being freed (a Docker
	 * event during the stop would otherwise lock a freed mutex). */
	agent_watch_stop(s->a);
	manager_close(s->m);
	agent_close(s->a);
	registry_proc_stop(s->registry);
}

/* The components' configurations from o, into s and o->mcfg: the app
 * proxy's address, the local agent's, the storage hosts, the cluster
 * secret. Returns 0, or the exit code after printing why. */
static int server_configure(struct server_opts *o, struct server *s)
{
	struct manager_config *mcfg = &o->mcfg;
	struct terr err = {0};
	mcfg->data_dir = o->data_dir;
	mcfg->listen = o->listen;
	/* Session apps on one machine: the proxy answers on an address of
	 * its own, never the web UI's: a browser sends a host's cookies to
	 * every port of it, so an app on the web UI's address would receive
	 * the login of whoever opens it (docs/security.md, "App links and
	 * the login cookie"). The agent publishes sessions' runner ports on
	 * the API's host unless --app-host says otherwise. */
	if (server_app_address(o->host, o->app_address, s->apps_ip, sizeof(s->apps_ip), &err) < 0) {
		fprintf(stderr, "tessera server: %s\n", err.msg);
		return 2;
	}
	snprintf(s->proxy_url, sizeof(s->proxy_url), strchr(s->apps_ip, ':') ? "http://[%s]" : "http://%s",
		 s->apps_ip);
	mcfg->wsproxy_url = s->proxy_url;
	if (!o->as.agent.app_host)
		o->as.agent.app_host = o->host;
	/* The app proxy runs in this process, on the sessions' node: it
	 * reaches each container's address, so nothing is published (no
	 * docker-proxy, a faster start) unless --app-publish yes asks for
	 * it, for a proxy elsewhere. */
	if (!o->as.agent.app_publish)
		o->as.agent.app_publish = "no";
	s->acfg = o->as.agent;
	snprintf(s->agent_dir, sizeof(s->agent_dir), "%s/agent", o->data_dir);
	s->acfg.data_dir = s->agent_dir;
	/* One machine: the manager's storage hosts are the agent's. */
	if (!s->acfg.storage_hosts || !*s->acfg.storage_hosts) {
		/* Absolute, as storage hosts must be: --data-dir may be relative
		 * (it exists by now: daemon_lock_data_dir made it). */
		char abs_dir[PATH_MAX];
		snprintf(s->storage_hosts, sizeof(s->storage_hosts), "local:%s/folders",
			 realpath(o->data_dir, abs_dir) ? abs_dir : o->data_dir);
		s->acfg.storage_hosts = s->storage_hosts;
	}
	mcfg->storage_hosts = s->acfg.storage_hosts;
	/* The in-process webserver proves itself to the manager's password
	 * login with the cluster secret; without one configured, a random one
	 * that only this process knows. */
	if (!mcfg->cluster_secret) {
		if (sign_random_hex(32, s->web_secret, sizeof(s->web_secret), &err) < 0)
			return daemon_fail("server", &err);
		mcfg->cluster_secret = s->web_secret;
	}
	return 0;
}

/* Locks the data dir, then starts the registry, the manager with its
 * local agent and API, the web UI and the app proxy, in that order, and
 * says it is ready. Returns 0, or the exit code after printing why (and
 * stopping what had started). */
static int server_start(struct server_opts *o, struct server *s)
{
	struct manager_config *mcfg = &o->mcfg;
	struct terr err = {0};
	if (daemon_lock_data_dir("server", o->data_dir, "stop it, or give this one another --data-dir") < 0)
		return 1;
	daemon_block_stop_signals(&s->stop);
	int rc = server_configure(o, s);
	if (rc)
		return rc;
	/* The registry child, supervised; without the package, "auto" runs
	 * without a registry (sessions start from local images only). */
	if (!strcmp(o->registry, "auto")) {
		char rdir[PATH_MAX + 16];
		snprintf(rdir, sizeof(rdir), "%s/registry", o->data_dir);
		if (registry_proc_start(rdir, NULL, &s->registry, &err) < 0)
			log_warn("server", "no cluster registry: %s", err.msg);
		else
			mcfg->registry_url = registry_proc_host(s->registry);
	}
	s->standby = (struct daemon_standby){.stop = &s->stop};
	mcfg->standby_wait = daemon_standby_wait;
	mcfg->standby_ud = &s->standby;
	if (manager_open(&s->m, mcfg, &err) < 0 || agent_open(&s->a, &s->acfg, &err) < 0 ||
	    manager_attach_local_agent(s->m, s->a, &err) < 0 ||
	    manager_serve(s->m, s->admin_conf, sizeof(s->admin_conf), &err) < 0) {
		server_stop(s);
		return daemon_fail("server", &err);
	}
	log_info("server", "serving the API on %s", manager_endpoint(s->m));
	if (server_start_web(o->host, o->web_port, manager_endpoint(s->m), mcfg->cluster_secret, s->admin_conf,
			     mcfg->redis_url, &s->web) < 0 ||
	    server_start_proxy(s->apps_ip, manager_endpoint(s->m), mcfg->cluster_secret, o->app_lo, o->app_hi,
			       &s->apps) < 0) {
		server_stop(s);
		return 1;
	}
	/* A command that works as printed: `tessera` when PATH finds this
	 * binary, else its absolute path (build/tessera is not on PATH). */
	char self[PATH_MAX];
	if (util_self_command("tessera", self, sizeof(self), &err) < 0)
		util_strlcpy(self, "tessera", sizeof(self));
	printf("Tessera is ready.\n  API:         %s\n  Admin login: %s\n"
	       "  Try:         TESSERA_CONFIG=%s %s session ls\n",
	       manager_endpoint(s->m), s->admin_conf, s->admin_conf, self);
	if (s->web)
		printf("  Web UI:      %s (email and password in %s)\n", web_url(s->web), s->admin_conf);
	if (s->apps)
		printf("  Apps:        %s, ports %d-%d (session apps, on an address of their own)\n", s->proxy_url,
		       o->app_lo, o->app_hi);
	fflush(stdout);
	/* Ready once the API, the web UI and the app proxy all listen. */
	sdnotify_ready(s->web ? "serving the API and the web UI" : "serving the API");
	return 0;
}

/* Serves until a stop signal (or until another manager became the active
 * one on the database), then stops everything. */
static void server_wait(struct server *s)
{
	int sig = daemon_serve_until_signal("stopping; sessions keep running", &s->stop, s->m);
	if (sig < 0)
		log_error("server", "another manager became the active one on the database: stopping");
	else
		log_info("server", "signal %d: stopping (sessions keep running)", sig);
	server_stop(s);
}

int cmd_server(int argc, char **argv)
{
	/* Both outlive the components, whose configurations point into them. */
	struct server_opts o;
	struct server s = {0};
	int rc = server_parse(argc, argv, &o);
	if (rc >= 0)
		return rc;
	if ((rc = server_start(&o, &s)) != 0)
		return rc;
	server_wait(&s);
	return 0;
}
