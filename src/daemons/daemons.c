/* The daemon verbs: `tessera server` (everything in one process),
 * `tessera manager --config FILE` and `tessera agent --config FILE`. They
 * parse options, start the components and wait for SIGINT/SIGTERM; running
 * containers are left running on exit (restart safety). */
#include <arpa/inet.h>
#include <ctype.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/agent_settings.h"
#include "agent/etcdfollow.h"
#include "agent/rpc.h"
#include "agent/uplink.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/pidlock.h"
#include "common/redis.h"
#include "common/sdnotify.h"
#include "common/sign.h"
#include "common/util.h"
#include "daemons/daemons.h"
#include "manager/approutes.h"
#include "manager/manager.h"
#include "proxy/proxy.h"
#include "registry/registry.h"
#include "web/webserver.h"

static int fail(const char *verb, const struct terr *err)
{
	fprintf(stderr, "tessera %s: %s\n", verb, err->msg);
	return 1;
}

/* Blocks the stop signals in every thread so the main thread alone takes
 * them with sigtimedwait. */
static void block_stop_signals(sigset_t *set)
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

/* The daemons' main loop once they serve: waits for a stop signal, pinging
 * systemd's watchdog meanwhile (a no-op without WatchdogSec=; the ping says
 * the process is scheduled and its main thread not stuck, the serving
 * threads answer for themselves through Restart=on-failure), then tells
 * systemd it is stopping, with status as its STATUS= line. With a manager
 * m, it also returns when another manager became the active one on the
 * shared database (manager_fenced). Returns the signal, or -1 when
 * fenced. */
static int serve_until_signal(const char *status, const sigset_t *set, struct manager *m)
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

/* What standby_wait needs: the stop signals, and whether systemd was
 * told of the standby already. */
struct standby_ctx {
	const sigset_t *stop;
	bool told;
};

/* manager_config.standby_wait: a second's wait for a stop signal. A
 * standby is a started service doing what it should (waiting to take
 * over): under Type=notify it says READY=1 now, or systemd would kill it
 * after TimeoutStartSec; its STATUS= line says it is a standby, and the
 * READY=1 sent once it is active replaces that line. While the database
 * cannot be reached it is not ready (systemd's start timeout and
 * Restart=on-failure answer for that). */
static bool standby_wait(void *ud, const char *standby_on)
{
	struct standby_ctx *c = ud;
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
static int lock_data_dir(const char *verb, const char *data_dir, const char *hint)
{
	struct terr err = {0};
	char path[PATH_MAX + 32];
	if (util_mkdir_p(data_dir, 0700, &err) < 0)
		return fail(verb, &err), -1;
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
		return fail(verb, &err), -1;
	return fd;  /* kept open (and locked) for the life of the process */
}

/* "--cpu": how an error names a setting given as a flag. */
static void flag_name(const struct agent_setting *d, char *buf, size_t n)
{
	snprintf(buf, n, "--%s", d->flag);
}

/* One option line of a usage text: the name and its value, then the help
 * (on the next line when the name is long) and the note in parentheses. */
static void usage_line(FILE *f, const char *name, const char *metavar, const char *help,
		       const char *note)
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

/* ---------- tessera server ---------- */

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
	usage_line(f, "--data-dir", "DIR", "state (SQLite) and admin.conf (default ~/.local/share/tessera)", NULL);
	usage_line(f, "--port", "PORT", "API port on 127.0.0.1 (default 8090)", NULL);
	usage_line(f, "--listen", "ADDR:PORT", "API address, e.g. 0.0.0.0:8090", NULL);
	usage_line(f, "--selector", "NAME", "concentrated (default) or dispersed", NULL);
	usage_line(f, "--fgpu-per-device", "N", "fGPU one physical GPU counts as (cluster setting, default 1)", NULL);
	usage_line(f, "--web-port", "PORT", "web UI port on the API's address (default 8080; 0 = any free port)", NULL);
	usage_line(f, "--registry", "none|auto|URL",
		   "the cluster registry: auto runs docker-registry on a loopback port, data under DATA_DIR/registry "
		   "(default auto)", NULL);
	usage_line(f, "--app-ports", "A-B", "ports the app proxy gives opened session apps (default "
		   APPROUTES_DEFAULT_RANGE ")", NULL);
	usage_line(f, "--app-address", "ADDR",
		   "the app proxy's own IP address, never the web UI's (default 127.0.0.2 when the API is on "
		   "127.0.0.1 or a wildcard; required with another --listen address)", NULL);
	usage_line(f, "--stats-retention-s", "S", "how long sessions' usage history is kept (default 3600)", NULL);
	usage_line(f, "--store", "URI", "the database: postgresql://USER@HOST:PORT/DB (default SQLite in the data dir)",
		   NULL);
	usage_line(f, "--redis", "URL", "Redis for heartbeats, login limits and the usage history: "
		   "redis://HOST:PORT/DB (default: this process's memory)", NULL);
	usage_line(f, "--verbose", NULL, "debug logging", NULL);
	fprintf(f, "The local agent (agent.conf's settings as flags, docs/admin.md):\n");
	for (size_t i = 0; i < agent_settings_count; i++) {
		const struct agent_setting *d = &agent_settings_table[i];
		char name[64];
		if (!(d->flags & AGENT_SETTING_FLAG))
			continue;
		flag_name(d, name, sizeof(name));
		char note[96];
		snprintf(note, sizeof(note), "default %s", d->def ? d->def : "");
		usage_line(f, name, d->metavar, d->help, d->def ? note : NULL);
	}
}

int cmd_server(int argc, char **argv)
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

	char data_dir[PATH_MAX] = "", listen_buf[128] = "";
	const char *home = getenv("HOME");
	if (home && *home)
		snprintf(data_dir, sizeof(data_dir), "%s/.local/share/tessera", home);
	else
		snprintf(data_dir, sizeof(data_dir), "/var/lib/tessera");
	struct agent_settings as;
	agent_settings_init(&as);
	struct agent_config acfg;
	struct manager_config mcfg = {0};
	snprintf(listen_buf, sizeof(listen_buf), "127.0.0.1:8090");
	long web_port_opt = 8080;
	const char *registry_opt = "auto";
	const char *app_address = NULL;
	int app_lo = PROXY_DEFAULT_RANGE_LO, app_hi = PROXY_DEFAULT_RANGE_HI;
	int c, ret = 2;
	struct terr err = {0};
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': util_strlcpy(data_dir, optarg, sizeof(data_dir)); break;
		case 'p': {
			char *end;
			long p = strtol(optarg, &end, 10);
			if (*end || p < 0 || p > 65535) {
				fprintf(stderr, "tessera server: --port must be 0..65535\n");
				goto out_opts;
			}
			snprintf(listen_buf, sizeof(listen_buf), "127.0.0.1:%ld", p);
			break;
		}
		case 'l': util_strlcpy(listen_buf, optarg, sizeof(listen_buf)); break;
		case 's': mcfg.selector = optarg; break;
		case 'f': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > 100) {
				fprintf(stderr, "tessera server: --fgpu-per-device must be an integer from 1 to 100\n");
				goto out_opts;
			}
			mcfg.fgpu_per_device = (int)v;
			break;
		}
		case 'W': {
			char *end;
			web_port_opt = strtol(optarg, &end, 10);
			if (*end || web_port_opt < 0 || web_port_opt > 65535) {
				fprintf(stderr, "tessera server: --web-port must be 0..65535\n");
				goto out_opts;
			}
			break;
		}
		case 'R': registry_opt = optarg; break;
		case 'T': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || v < 60 || v > 86400) {
				fprintf(stderr, "tessera server: --stats-retention-s must be an integer from 60 to 86400\n");
				goto out_opts;
			}
			mcfg.stats_retention_s = (int)v;
			break;
		}
		case 'S': mcfg.store = optarg; break;
		case 'r': {
			/* The URL checked here, so a typo is one line before
			 * anything starts. */
			struct redis_client *rc;
			if (redis_open(optarg, &rc, &err) < 0) {
				fprintf(stderr, "tessera server: --redis: %s\n", err.msg);
				goto out_opts;
			}
			redis_close(rc);
			mcfg.redis_url = optarg;
			break;
		}
		case 'A':
			if (util_parse_port_range(optarg, &app_lo, &app_hi, &err) < 0) {
				fprintf(stderr, "tessera server: --app-ports: %s\n", err.msg);
				goto out_opts;
			}
			mcfg.wsproxy_port_range = optarg;
			break;
		case 'a': app_address = optarg; break;
		case 'v': log_set_level(LOG_DEBUG); break;
		case 'h': server_usage(stdout); ret = 0; goto out_opts;
		default:
			if (c >= SETTING_OPT && (size_t)(c - SETTING_OPT) < agent_settings_count) {
				const struct agent_setting *d = &agent_settings_table[c - SETTING_OPT];
				char name[64];
				flag_name(d, name, sizeof(name));
				if (agent_setting_set(&as, d, optarg, name, &err) < 0) {
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
	opts = NULL;
	if (optind < argc) {
		fprintf(stderr, "tessera server: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	char host[64];
	int port;
	if (httpd_parse_listen(listen_buf, host, sizeof(host), &port, &err) < 0)
		return fail("server", &err);
	if (strcmp(registry_opt, "none") && strcmp(registry_opt, "auto")) {
		char rhost[256], rbase[300];
		if (registry_parse_url(registry_opt, rhost, sizeof(rhost), rbase, sizeof(rbase), &err) < 0) {
			fprintf(stderr, "tessera server: --registry must be none, auto or a URL: %s\n", err.msg);
			return 2;
		}
		mcfg.registry_url = registry_opt;
	}
	if (lock_data_dir("server", data_dir, "stop it, or give this one another --data-dir") < 0)
		return 1;

	sigset_t stop;
	block_stop_signals(&stop);
	mcfg.data_dir = data_dir;
	mcfg.listen = listen_buf;
	/* Session apps on one machine: the proxy answers on an address of
	 * its own, never the web UI's: a browser sends a host's cookies to
	 * every port of it, so an app on the web UI's address would receive
	 * the login of whoever opens it (docs/security.md, "App links and
	 * the login cookie"). The agent publishes sessions' runner ports on
	 * the API's host unless --app-host says otherwise. */
	char apps_ip[64];
	if (server_app_address(host, app_address, apps_ip, sizeof(apps_ip), &err) < 0) {
		fprintf(stderr, "tessera server: %s\n", err.msg);
		return 2;
	}
	char proxy_url[96];
	snprintf(proxy_url, sizeof(proxy_url), strchr(apps_ip, ':') ? "http://[%s]" : "http://%s", apps_ip);
	mcfg.wsproxy_url = proxy_url;
	if (!as.agent.app_host)
		as.agent.app_host = host;
	acfg = as.agent;
	char agent_dir[PATH_MAX + 16];
	snprintf(agent_dir, sizeof(agent_dir), "%s/agent", data_dir);
	acfg.data_dir = agent_dir;
	/* One machine: the manager's storage hosts are the agent's. */
	char storage_buf[PATH_MAX + 32];
	if (!acfg.storage_hosts || !*acfg.storage_hosts) {
		/* Absolute, as storage hosts must be: --data-dir may be relative
		 * (it exists by now: lock_data_dir made it). */
		char abs_dir[PATH_MAX];
		snprintf(storage_buf, sizeof(storage_buf), "local:%s/folders",
			 realpath(data_dir, abs_dir) ? abs_dir : data_dir);
		acfg.storage_hosts = storage_buf;
	}
	mcfg.storage_hosts = acfg.storage_hosts;
	/* The in-process webserver proves itself to the manager's password
	 * login with the cluster secret; without one configured, a random one
	 * that only this process knows. */
	char web_secret[65];
	if (!mcfg.cluster_secret) {
		if (sign_random_hex(32, web_secret, sizeof(web_secret), &err) < 0)
			return fail("server", &err);
		mcfg.cluster_secret = web_secret;
	}
	/* The registry child, supervised; without the package, "auto" runs
	 * without a registry (sessions start from local images only). */
	struct registry_proc *registry = NULL;
	if (!strcmp(registry_opt, "auto")) {
		char rdir[PATH_MAX + 16];
		snprintf(rdir, sizeof(rdir), "%s/registry", data_dir);
		if (registry_proc_start(rdir, NULL, &registry, &err) < 0)
			log_warn("server", "no cluster registry: %s", err.msg);
		else
			mcfg.registry_url = registry_proc_host(registry);
	}
	struct manager *m = NULL;
	struct agent *a = NULL;
	struct standby_ctx sctx = {.stop = &stop};
	mcfg.standby_wait = standby_wait;
	mcfg.standby_ud = &sctx;
	if (manager_open(&m, &mcfg, &err) < 0) {
		registry_proc_stop(registry);
		return fail("server", &err);
	}
	if (agent_open(&a, &acfg, &err) < 0 || manager_attach_local_agent(m, a, &err) < 0) {
		manager_close(m);
		agent_close(a);
		registry_proc_stop(registry);
		return fail("server", &err);
	}
	char admin_conf[PATH_MAX + 32];
	if (manager_serve(m, admin_conf, sizeof(admin_conf), &err) < 0) {
		manager_close(m);
		agent_close(a);
		registry_proc_stop(registry);
		return fail("server", &err);
	}
	log_info("server", "serving the API on %s", manager_endpoint(m));
	struct web *web = NULL;
	if (server_start_web(host, web_port_opt, manager_endpoint(m), mcfg.cluster_secret, admin_conf, mcfg.redis_url,
			     &web) < 0) {
		manager_close(m);
		agent_close(a);
		registry_proc_stop(registry);
		return 1;
	}
	struct proxy *apps = NULL;
	if (server_start_proxy(apps_ip, manager_endpoint(m), mcfg.cluster_secret, app_lo, app_hi, &apps) < 0) {
		web_stop(web);
		manager_close(m);
		agent_close(a);
		registry_proc_stop(registry);
		return 1;
	}
	/* A command that works as printed: `tessera` when PATH finds this
	 * binary, else its absolute path (build/tessera is not on PATH). */
	char self[PATH_MAX];
	if (util_self_command("tessera", self, sizeof(self), &err) < 0)
		util_strlcpy(self, "tessera", sizeof(self));
	printf("Tessera is ready.\n  API:         %s\n  Admin login: %s\n"
	       "  Try:         TESSERA_CONFIG=%s %s session ls\n",
	       manager_endpoint(m), admin_conf, admin_conf, self);
	if (web)
		printf("  Web UI:      %s (email and password in %s)\n", web_url(web), admin_conf);
	if (apps)
		printf("  Apps:        %s, ports %d-%d (session apps, on an address of their own)\n", proxy_url, app_lo,
		       app_hi);
	fflush(stdout);
	/* Ready once the API, the web UI and the app proxy all listen. */
	sdnotify_ready(web ? "serving the API and the web UI" : "serving the API");
	int sig = serve_until_signal("stopping; sessions keep running", &stop, m);
	if (sig < 0)
		log_error("server", "another manager became the active one on the database: stopping");
	else
		log_info("server", "signal %d: stopping (sessions keep running)", sig);
	proxy_stop(apps);
	web_stop(web);
	/* The in-process agent's watchers report to the manager: stopped
	 * first, so that none calls into a manager being freed (a Docker
	 * event during the stop would otherwise lock a freed mutex). */
	agent_watch_stop(a);
	manager_close(m);
	agent_close(a);
	registry_proc_stop(registry);
	return 0;
out_opts:
	free(opts);
	return ret;
}

/* ---------- tessera manager ---------- */

/* known: the keys allowed, or NULL when the caller checks them itself. */
static int read_config(const char *verb, const char *path, const char *const *known,
		       struct conf *c)
{
	struct terr err = {0};
	if (!path) {
		fprintf(stderr, "tessera %s: --config FILE is required (examples in configs/)\n", verb);
		return -1;
	}
	if (conf_load(path, c, &err) < 0 || (known && conf_check_keys(c, known, path, &err) < 0)) {
		conf_free(c);
		fail(verb, &err);
		return -1;
	}
	return 0;
}

/* more_help (may be NULL) adds to the --help text. */
/* migrate_only (NULL: the verb has no such option) is set by --migrate-only. */
static const char *config_path(int argc, char **argv, const char *verb, void (*more_help)(void), int *rc,
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

static int conf_int(const struct conf *c, const char *key, int def)
{
	const char *v = conf_get(c, key);
	return v ? atoi(v) : def;
}

int cmd_manager(int argc, char **argv)
{
	int rc;
	bool migrate_only = false;
	const char *path = config_path(argc, argv, "manager", NULL, &rc, &migrate_only);
	if (!path && rc >= 0)
		return rc;
	static const char *const known[] = {"listen", "data_dir", "cluster_secret", "heartbeat_interval_ms",
					    "lost_after_heartbeats", "selector", "dispatch_workers",
					    "fgpu_per_device", "registry_url", "wsproxy_url", "wsproxy_port_range",
					    "wsproxy_domain", "storage_hosts", "stats_retention_s", "metrics_token", "etcd", "store", "redis", NULL};
	struct conf c = {0};
	if (read_config("manager", path, known, &c) < 0)
		return 1;
	struct manager_config mcfg = {
		.listen = conf_get(&c, "listen") ? conf_get(&c, "listen") : "0.0.0.0:8090",
		.data_dir = conf_get(&c, "data_dir") ? conf_get(&c, "data_dir") : "/var/lib/tessera",
		.cluster_secret = conf_get(&c, "cluster_secret"),
		.heartbeat_interval_ms = conf_int(&c, "heartbeat_interval_ms", 2000),
		.lost_after_heartbeats = conf_int(&c, "lost_after_heartbeats", 3),
		.selector = conf_get(&c, "selector"),
		.dispatch_workers = conf_int(&c, "dispatch_workers", 4),
		.fgpu_per_device = conf_int(&c, "fgpu_per_device", 0),
		.registry_url = conf_get(&c, "registry_url"),
		.wsproxy_url = conf_get(&c, "wsproxy_url"),
		.wsproxy_port_range = conf_get(&c, "wsproxy_port_range"),
		.wsproxy_domain = conf_get(&c, "wsproxy_domain"),
		.storage_hosts = conf_get(&c, "storage_hosts"),
		.stats_retention_s = conf_int(&c, "stats_retention_s", 3600),
		.metrics_token = conf_get(&c, "metrics_token"),
		.etcd = conf_get(&c, "etcd"),
		.store = conf_get(&c, "store"),
		.redis_url = conf_get(&c, "redis"),
	};
	struct terr err = {0};
	if (migrate_only) {
		/* SQLite's file is the data dir's: not under a running manager. */
		if (!store_setting_is_pg(mcfg.store) &&
		    lock_data_dir("manager", mcfg.data_dir, "stop it before --migrate-only") < 0) {
			conf_free(&c);
			return 1;
		}
		int version = 0;
		char where[512];
		rc = manager_migrate_only(&mcfg, &version, where, sizeof(where), &err);
		conf_free(&c);
		if (rc < 0)
			return fail("manager", &err);
		printf("%s: schema at version %d\n", where, version);
		return 0;
	}
	if (mcfg.stats_retention_s < 60 || mcfg.stats_retention_s > 86400) {
		conf_free(&c);
		fprintf(stderr, "tessera manager: %s: stats_retention_s must be an integer from 60 to 86400\n", path);
		return 1;
	}
	if (!mcfg.cluster_secret || strlen(mcfg.cluster_secret) < 16) {
		conf_free(&c);
		fprintf(stderr, "tessera manager: %s: cluster_secret must be set, 16 characters or more "
			"(e.g. from 'openssl rand -hex 32')\n", path);
		return 1;
	}
	if (lock_data_dir("manager", mcfg.data_dir, "stop it, or set another data_dir") < 0) {
		conf_free(&c);
		return 1;
	}
	sigset_t stop;
	block_stop_signals(&stop);
	struct standby_ctx sctx = {.stop = &stop};
	mcfg.standby_wait = standby_wait;
	mcfg.standby_ud = &sctx;
	struct manager *m = NULL;
	char admin_conf[PATH_MAX + 32];
	if (manager_open(&m, &mcfg, &err) < 0 || manager_serve(m, admin_conf, sizeof(admin_conf), &err) < 0) {
		manager_close(m);
		conf_free(&c);
		return fail("manager", &err);
	}
	log_info("manager", "serving the API on %s; admin credentials in %s", mcfg.listen, admin_conf);
	char status[160];
	snprintf(status, sizeof(status), "serving the API on %s", mcfg.listen);
	sdnotify_ready(status);
	int sig = serve_until_signal("stopping", &stop, m);
	if (sig < 0) {
		/* Its state is older than the active one's: exit for a
		 * restart (systemd's Restart=on-failure) as a standby. */
		log_error("manager", "another manager became the active one on the database: stopping");
		manager_close(m);
		conf_free(&c);
		return 1;
	}
	log_info("manager", "signal %d: stopping", sig);
	manager_close(m);
	conf_free(&c);
	return 0;
}

/* ---------- tessera agent ---------- */

/* The keys of agent.conf, from the settings table. */
static void agent_keys_help(void)
{
	printf("Keys of FILE:\n");
	for (size_t i = 0; i < agent_settings_count; i++) {
		const struct agent_setting *d = &agent_settings_table[i];
		char note[96];
		snprintf(note, sizeof(note), "default %s", d->def ? d->def : "");
		usage_line(stdout, d->key, NULL, d->help,
			   d->flags & AGENT_SETTING_REQUIRED ? "required" : d->def ? note : NULL);
	}
}

int cmd_agent(int argc, char **argv)
{
	int rc;
	const char *path = config_path(argc, argv, "agent", agent_keys_help, &rc, NULL);
	if (!path && rc >= 0)
		return rc;
	struct conf c = {0};
	if (read_config("agent", path, NULL, &c) < 0)
		return 1;
	struct agent_settings as;
	agent_settings_init(&as);
	struct terr err = {0};
	int ret = 1;
	if (agent_settings_from_conf(&as, &c, path, &err) < 0) {
		fail("agent", &err);
		goto out_conf;
	}
	/* Session apps: published on the RPC address's host unless app_host
	 * says otherwise; on a wildcard, reported as the host the manager
	 * reaches the agent at. */
	char listen_host[64], report_host[256] = "";
	int listen_port;
	if (!as.agent.app_host && httpd_parse_listen(as.listen, listen_host, sizeof(listen_host), &listen_port, &err) == 0)
		as.agent.app_host = listen_host;
	const char *adv = as.advertise_url && !strncmp(as.advertise_url, "http://", 7) ? as.advertise_url + 7 : NULL;
	if (adv) {
		size_t hl = strcspn(adv, adv[0] == '[' ? "]" : ":/");
		if (adv[0] == '[')
			adv++, hl = hl ? hl - 1 : 0;
		if (hl && hl < sizeof(report_host))
			memcpy(report_host, adv, hl), report_host[hl] = '\0';
		as.agent.app_report_host = report_host;
	}

	/* One agent per data dir: its sessions' fGPU limits and turn files
	 * live there, and two agents would take each other's. */
	if (as.agent.data_dir && *as.agent.data_dir) {
		/* 0755 as agent_open makes it (lock_data_dir's is 0700). */
		if (util_mkdir_p(as.agent.data_dir, 0755, &err) < 0) {
			fail("agent", &err);
			goto out_conf;
		}
		if (lock_data_dir("agent", as.agent.data_dir, "stop it, or set another data_dir") < 0)
			goto out_conf;
	}

	sigset_t stop;
	block_stop_signals(&stop);
	struct agent *a = NULL;
	struct httpd *http = NULL;
	struct uplink *up = NULL;
	if (agent_open(&a, &as.agent, &err) < 0 || agent_rpc_start(a, as.listen, as.cluster_secret, &http, &err) < 0) {
		fail("agent", &err);
		agent_close(a);
		goto out_conf;
	}
	struct uplink_config ucfg = {
		.manager = as.manager,
		.cluster_secret = as.cluster_secret,
		.agent_id = as.agent.id,
		.advertise_url = as.advertise_url,
		.agent = a,
	};
	struct agent_etcd *follower = NULL;
	if ((as.etcd && agent_etcd_start(&follower, a, as.etcd, &err) < 0) || uplink_start(&up, &ucfg, &err) < 0) {
		fail("agent", &err);
		agent_etcd_stop(follower);
		httpd_stop(http);
		agent_close(a);
		goto out_conf;
	}
	log_info("agent", "agent %s serving RPC on %s, manager %s", as.agent.id, as.listen, as.manager);
	/* Ready once its RPC server listens; registering with the manager is
	 * the uplink's business, retried for as long as it takes, so a
	 * manager that is down does not hold the agent's start. */
	char status[320];
	snprintf(status, sizeof(status), "agent %s serving RPC on %s", as.agent.id, as.listen);
	sdnotify_ready(status);
	int sig = serve_until_signal("stopping; sessions keep running", &stop, NULL);
	log_info("agent", "signal %d: stopping (sessions keep running)", sig);
	/* The uplink's queue outlives the agent's watcher, which feeds it. */
	uplink_stop(up);
	agent_etcd_stop(follower);
	httpd_stop(http);
	agent_close(a);
	uplink_free(up);
	ret = 0;
out_conf:
	conf_free(&c);
	return ret;
}

/* ---------- tessera wsproxy ---------- */

int cmd_wsproxy(int argc, char **argv)
{
	int rc;
	const char *path = config_path(argc, argv, "wsproxy", NULL, &rc, NULL);
	if (!path && rc >= 0)
		return rc;
	static const char *const known[] = {"manager", "cluster_secret", "port_range", "bind", "domain", "listen",
					    "public_host", "ui_dir", "max_connections", "max_connections_per_addr",
					    NULL};
	struct conf c = {0};
	if (read_config("wsproxy", path, known, &c) < 0)
		return 1;
	struct terr err = {0};
	int ret = 1;
	struct proxy_config pc = {
		.manager = conf_get(&c, "manager"),
		.cluster_secret = conf_get(&c, "cluster_secret"),
		.bind = conf_get(&c, "bind"),
		.domain = conf_get(&c, "domain"),
		.public_host = conf_get(&c, "public_host"),
		.ui_dir = conf_get(&c, "ui_dir"),
		.port_lo = PROXY_DEFAULT_RANGE_LO,
		.port_hi = PROXY_DEFAULT_RANGE_HI,
	};
	char ui_dir[PATH_MAX];
	if (!pc.manager || strncmp(pc.manager, "http", 4)) {
		fprintf(stderr, "tessera wsproxy: %s: manager must be the manager's URL, e.g. http://10.0.0.1:8090\n", path);
		goto out;
	}
	if (!pc.cluster_secret || strlen(pc.cluster_secret) < 16) {
		fprintf(stderr, "tessera wsproxy: %s: cluster_secret must be the manager's, 16 characters or more\n", path);
		goto out;
	}
	if (pc.domain) {
		if (conf_get(&c, "port_range") || conf_get(&c, "bind")) {
			fprintf(stderr, "tessera wsproxy: %s: with domain (host mode) set listen = ADDR:PORT, "
				"not port_range or bind\n", path);
			goto out;
		}
		char host[64];
		int port;
		if (httpd_parse_listen(conf_get(&c, "listen") ? conf_get(&c, "listen") : "0.0.0.0:10200", host,
				       sizeof(host), &port, &err) < 0) {
			fprintf(stderr, "tessera wsproxy: %s: listen: %s\n", path, err.msg);
			goto out;
		}
		pc.listen_port = port;
		pc.bind = strdupa(host);
		for (const char *d = pc.domain; *d; d++)
			if (!(isalnum((unsigned char)*d) || *d == '-' || *d == '.')) {
				fprintf(stderr, "tessera wsproxy: %s: domain '%s' is not a DNS name\n", path, pc.domain);
				goto out;
			}
	} else {
		if (conf_get(&c, "listen")) {
			fprintf(stderr, "tessera wsproxy: %s: listen is for host mode (with domain); "
				"port mode takes port_range and bind\n", path);
			goto out;
		}
		if (conf_get(&c, "port_range") &&
		    util_parse_port_range(conf_get(&c, "port_range"), &pc.port_lo, &pc.port_hi, &err) < 0) {
			fprintf(stderr, "tessera wsproxy: %s: %s\n", path, err.msg);
			goto out;
		}
	}
	const char *mc = conf_get(&c, "max_connections"), *mpa = conf_get(&c, "max_connections_per_addr");
	char *end;
	if (mc) {
		long v = strtol(mc, &end, 10);
		if (*end || v < 1 || v > 1000000) {
			fprintf(stderr, "tessera wsproxy: %s: max_connections must be 1..1000000\n", path);
			goto out;
		}
		pc.max_conns = (unsigned)v;
	}
	if (mpa) {
		long v = strtol(mpa, &end, 10);
		if (*end || v < 1 || v > 1000000) {
			fprintf(stderr, "tessera wsproxy: %s: max_connections_per_addr must be 1..1000000\n", path);
			goto out;
		}
		pc.per_addr_limit = (unsigned)v;
	}
	if (!pc.ui_dir) {
		if (proxy_find_ui_dir(ui_dir, sizeof(ui_dir), &err) < 0)
			log_warn("wsproxy", "the terminal page will answer 404: %s", err.msg);
		else
			pc.ui_dir = ui_dir;
	}
	sigset_t stop;
	block_stop_signals(&stop);
	struct proxy *px = NULL;
	if (proxy_start(&pc, &px, &err) < 0) {
		fprintf(stderr, "tessera wsproxy: %s: %s\n", path, err.msg);
		goto out;
	}
	sdnotify_ready("serving session apps");
	int sig = serve_until_signal("stopping", &stop, NULL);
	log_info("wsproxy", "signal %d: stopping", sig);
	proxy_stop(px);
	ret = 0;
out:
	conf_free(&c);
	return ret;
}

/* ---------- tessera webserver ---------- */

int cmd_webserver(int argc, char **argv)
{
	int rc;
	const char *path = config_path(argc, argv, "webserver", NULL, &rc, NULL);
	if (!path && rc >= 0)
		return rc;
	static const char *const known[] = {"listen", "manager", "web_secret", "cluster_secret", "ui_dir",
					    "tls_cert", "tls_key", "login_ttl_s", "redis", NULL};
	struct conf c = {0};
	if (read_config("webserver", path, known, &c) < 0)
		return 1;
	const char *secret = conf_get(&c, "web_secret") ? conf_get(&c, "web_secret") : conf_get(&c, "cluster_secret");
	struct web_config wc = {
		.listen = conf_get(&c, "listen") ? conf_get(&c, "listen") : "0.0.0.0:8080",
		.manager = conf_get(&c, "manager"),
		.web_secret = secret,
		.ui_dir = conf_get(&c, "ui_dir"),
		.tls_cert = conf_get(&c, "tls_cert"),
		.tls_key = conf_get(&c, "tls_key"),
		.login_ttl_s = conf_int(&c, "login_ttl_s", 12 * 3600),
		.redis_url = conf_get(&c, "redis"),
	};
	struct terr err = {0};
	sigset_t stop;
	block_stop_signals(&stop);
	struct web *w = NULL;
	if (web_start(&wc, &w, &err) < 0) {
		conf_free(&c);
		fprintf(stderr, "tessera webserver: %s: %s\n", path, err.msg);
		return 1;
	}
	log_info("webserver", "serving the web UI on %s (manager %s)", web_url(w), wc.manager);
	char status[320];
	snprintf(status, sizeof(status), "serving the web UI on %s", web_url(w));
	sdnotify_ready(status);
	int sig = serve_until_signal("stopping", &stop, NULL);
	log_info("webserver", "signal %d: stopping", sig);
	web_stop(w);
	conf_free(&c);
	return 0;
}
