/* The daemon verbs: `tessera server` (everything in one process),
 * `tessera manager --config FILE` and `tessera agent --config FILE`. They
 * parse options, start the components and wait for SIGINT/SIGTERM; running
 * containers are left running on exit (restart safety). */
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
#include "agent/rpc.h"
#include "cli/cli.h"
#include "common/apiclient.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/sign.h"
#include "common/units.h"
#include "common/util.h"
#include "manager/manager.h"
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

static int parse_size_opt(const char *verb, const char *opt, const char *v, int64_t *out)
{
	struct terr err = {0};
	if (units_parse_size(v, out, &err) < 0) {
		fprintf(stderr, "tessera %s: %s: %s\n", verb, opt, err.msg);
		return -1;
	}
	return 0;
}

static int parse_milli_opt(const char *verb, const char *opt, const char *v, int64_t *out)
{
	struct terr err = {0};
	if (units_parse_milli(v, out, &err) < 0 || *out <= 0) {
		fprintf(stderr, "tessera %s: %s must be a positive number like 2 or 0.5\n", verb, opt);
		return -1;
	}
	return 0;
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
 * a convenience there: when it cannot start (port taken, UI not built) the
 * server runs on and says why. */
static struct web *server_start_web(const char *host, long port, const char *manager, const char *secret,
				    const char *admin_conf)
{
	char listen[96];
	snprintf(listen, sizeof(listen), "%s:%ld", host, port);
	struct web_config wc = {.listen = listen, .manager = manager, .web_secret = secret};
	struct web *w = NULL;
	struct terr err = {0};
	if (web_start(&wc, &w, &err) < 0) {
		log_warn("server", "web UI not started: %s", err.msg);
		return NULL;
	}
	if (admin_conf_set_web_url(admin_conf, web_url(w), &err) < 0)
		log_warn("server", "cannot add web_url to %s: %s", admin_conf, err.msg);
	log_info("server", "serving the web UI on %s", web_url(w));
	return w;
}

static void server_usage(FILE *f)
{
	fprintf(f,
		"usage: tessera server [--data-dir DIR] [--port PORT | --listen ADDR:PORT]\n"
		"                      [--cpu N] [--mem SIZE] [--mem-reserve SIZE] [--selector NAME]\n"
		"Runs the manager, one local agent (Docker) and the API in one process.\n"
		"  --data-dir DIR      state (SQLite) and admin.conf (default ~/.local/share/tessera)\n"
		"  --port PORT         API port on 127.0.0.1 (default 8090)\n"
		"  --listen ADDR:PORT  API address, e.g. 0.0.0.0:8090\n"
		"  --cpu N             CPU cores offered to sessions (default: all)\n"
		"  --mem SIZE          memory offered (default: all minus --mem-reserve)\n"
		"  --mem-reserve SIZE  memory kept for the host (default 512MiB)\n"
		"  --selector NAME     concentrated (default) or dispersed\n"
		"  --node-id ID        id of the local node (default \"local\")\n"
		"  --mock-gpus SPEC    simulated GPUs COUNTxMEM[:SMS],... (e.g. 1x8GiB, 2x80GiB:132)\n"
		"  --fgpu-per-device N fGPU one physical GPU counts as (cluster setting, default 1)\n"
		"  --gpu-context-overhead auto|SIZE\n"
		"                      device memory a CUDA context takes, counted in GPU shares\n"
		"                      (default auto: measured at start)\n"
		"  --web-port PORT     web UI port on the API's address (default 8080; 0 = any free port)\n"
		"  --verbose           debug logging\n");
}

int cmd_server(int argc, char **argv)
{
	static const struct option opts[] = {
		{"data-dir", required_argument, NULL, 'd'}, {"port", required_argument, NULL, 'p'},
		{"listen", required_argument, NULL, 'l'}, {"cpu", required_argument, NULL, 'c'},
		{"mem", required_argument, NULL, 'm'}, {"mem-reserve", required_argument, NULL, 'r'},
		{"selector", required_argument, NULL, 's'}, {"verbose", no_argument, NULL, 'v'},
		{"node-id", required_argument, NULL, 'n'}, {"help", no_argument, NULL, 'h'},
		{"web-port", required_argument, NULL, 'W'},
		{"mock-gpus", required_argument, NULL, 'g'}, {"fgpu-per-device", required_argument, NULL, 'f'},
		{"gpu-context-overhead", required_argument, NULL, 'O'},
		{0},
	};
	char data_dir[PATH_MAX] = "", listen_buf[128] = "";
	const char *home = getenv("HOME");
	if (home && *home)
		snprintf(data_dir, sizeof(data_dir), "%s/.local/share/tessera", home);
	else
		snprintf(data_dir, sizeof(data_dir), "/var/lib/tessera");
	struct agent_config acfg = {.id = "local", .mem_reserve = 512LL << 20};
	struct manager_config mcfg = {0};
	snprintf(listen_buf, sizeof(listen_buf), "127.0.0.1:8090");
	long web_port_opt = 8080;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': util_strlcpy(data_dir, optarg, sizeof(data_dir)); break;
		case 'p': {
			char *end;
			long p = strtol(optarg, &end, 10);
			if (*end || p < 0 || p > 65535) {
				fprintf(stderr, "tessera server: --port must be 0..65535\n");
				return 2;
			}
			snprintf(listen_buf, sizeof(listen_buf), "127.0.0.1:%ld", p);
			break;
		}
		case 'l': util_strlcpy(listen_buf, optarg, sizeof(listen_buf)); break;
		case 'c': if (parse_milli_opt("server", "--cpu", optarg, &acfg.cpu_m) < 0) return 2; break;
		case 'm': if (parse_size_opt("server", "--mem", optarg, &acfg.mem) < 0) return 2; break;
		case 'r': if (parse_size_opt("server", "--mem-reserve", optarg, &acfg.mem_reserve) < 0) return 2; break;
		case 's': mcfg.selector = optarg; break;
		case 'n': acfg.id = optarg; break;
		case 'g': acfg.mock_gpus = optarg; break;
		case 'O': {
			int64_t bytes;
			if (strcmp(optarg, "auto") != 0 &&
			    (units_parse_size(optarg, &bytes, NULL) < 0 || bytes < 0)) {
				fprintf(stderr, "tessera server: --gpu-context-overhead must be auto or a size such as 512MiB, not '%s'\n",
					optarg);
				return 2;
			}
			acfg.gpu_context_overhead = optarg;
			break;
		}
		case 'f': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > 100) {
				fprintf(stderr, "tessera server: --fgpu-per-device must be an integer from 1 to 100\n");
				return 2;
			}
			mcfg.fgpu_per_device = (int)v;
			break;
		}
		case 'W': {
			char *end;
			web_port_opt = strtol(optarg, &end, 10);
			if (*end || web_port_opt < 0 || web_port_opt > 65535) {
				fprintf(stderr, "tessera server: --web-port must be 0..65535\n");
				return 2;
			}
			break;
		}
		case 'v': log_set_level(LOG_DEBUG); break;
		case 'h': server_usage(stdout); return 0;
		default: server_usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tessera server: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	char host[64];
	int port;
	struct terr err = {0};
	if (httpd_parse_listen(listen_buf, host, sizeof(host), &port, &err) < 0)
		return fail("server", &err);

	sigset_t stop;
	block_stop_signals(&stop);
	mcfg.data_dir = data_dir;
	mcfg.listen = listen_buf;
	char agent_dir[PATH_MAX + 16];
	snprintf(agent_dir, sizeof(agent_dir), "%s/agent", data_dir);
	acfg.data_dir = agent_dir;
	/* The in-process webserver proves itself to the manager's password
	 * login with the cluster secret; without one configured, a random one
	 * that only this process knows. */
	char web_secret[65];
	if (!mcfg.cluster_secret) {
		if (sign_random_hex(32, web_secret, sizeof(web_secret), &err) < 0)
			return fail("server", &err);
		mcfg.cluster_secret = web_secret;
	}
	struct manager *m = NULL;
	struct agent *a = NULL;
	if (manager_open(&m, &mcfg, &err) < 0)
		return fail("server", &err);
	if (agent_open(&a, &acfg, &err) < 0 || manager_attach_local_agent(m, a, &err) < 0) {
		manager_close(m);
		agent_close(a);
		return fail("server", &err);
	}
	char admin_conf[PATH_MAX + 32];
	if (manager_serve(m, admin_conf, sizeof(admin_conf), &err) < 0) {
		manager_close(m);
		agent_close(a);
		return fail("server", &err);
	}
	log_info("server", "serving the API on %s", manager_endpoint(m));
	struct web *web = server_start_web(host, web_port_opt, manager_endpoint(m), mcfg.cluster_secret, admin_conf);
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
	fflush(stdout);
	int sig;
	while ((sig = wait_signal(&stop, 1000)) < 0)
		;
	log_info("server", "signal %d: stopping (sessions keep running)", sig);
	web_stop(web);
	manager_close(m);
	agent_close(a);
	return 0;
}

/* ---------- tessera manager ---------- */

static int read_config(const char *verb, const char *path, const char *const *known,
		       struct conf *c)
{
	struct terr err = {0};
	if (!path) {
		fprintf(stderr, "tessera %s: --config FILE is required (examples in configs/)\n", verb);
		return -1;
	}
	if (conf_load(path, c, &err) < 0 || conf_check_keys(c, known, path, &err) < 0) {
		conf_free(c);
		fail(verb, &err);
		return -1;
	}
	return 0;
}

static const char *config_path(int argc, char **argv, const char *verb, int *rc)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'}, {"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'}, {0},
	};
	const char *path = NULL;
	int c;
	optind = 1;
	*rc = -1;
	while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': path = optarg; break;
		case 'v': log_set_level(LOG_DEBUG); break;
		case 'h':
			printf("usage: tessera %s --config FILE [--verbose]\n(see configs/%s.conf)\n", verb, verb);
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
	const char *path = config_path(argc, argv, "manager", &rc);
	if (!path && rc >= 0)
		return rc;
	static const char *const known[] = {"listen", "data_dir", "cluster_secret", "heartbeat_interval_ms",
					    "lost_after_heartbeats", "selector", "dispatch_workers",
					    "fgpu_per_device", NULL};
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
	};
	struct terr err = {0};
	if (!mcfg.cluster_secret || strlen(mcfg.cluster_secret) < 16) {
		conf_free(&c);
		fprintf(stderr, "tessera manager: %s: cluster_secret must be set, 16 characters or more "
			"(e.g. from 'openssl rand -hex 32')\n", path);
		return 1;
	}
	sigset_t stop;
	block_stop_signals(&stop);
	struct manager *m = NULL;
	char admin_conf[PATH_MAX + 32];
	if (manager_open(&m, &mcfg, &err) < 0 || manager_serve(m, admin_conf, sizeof(admin_conf), &err) < 0) {
		manager_close(m);
		conf_free(&c);
		return fail("manager", &err);
	}
	log_info("manager", "serving the API on %s; admin credentials in %s", mcfg.listen, admin_conf);
	int sig;
	while ((sig = wait_signal(&stop, 1000)) < 0)
		;
	log_info("manager", "signal %d: stopping", sig);
	manager_close(m);
	conf_free(&c);
	return 0;
}

/* ---------- tessera agent ---------- */

/* Events from the watcher thread wait here until the main loop sends
 * them, so a manager that is briefly away loses none. */
struct event_queue {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	json_t *pending;  /* array */
};

static void queue_event(void *ud, const char *agent_id, json_t *event)
{
	(void)agent_id;
	struct event_queue *q = ud;
	/* A copy, not a reference: the watcher thread drops its reference
	 * after this call, and jansson's release-only decrement does not
	 * order that thread's last use before the main loop's free of the
	 * shared object (a data race under ThreadSanitizer). The copy is
	 * handed over under the mutex. */
	json_t *copy = json_deep_copy(event);
	if (!copy)
		return;
	pthread_mutex_lock(&q->mu);
	json_array_append_new(q->pending, copy);
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

static int agent_register(struct agent *a, const struct api_client *mc, const char *url,
			  int *interval_ms, struct terr *err)
{
	json_t *desc = NULL, *reply = NULL;
	int rc = agent_describe(a, &desc, err);
	if (rc < 0)
		return rc;
	json_object_set_new(desc, "url", json_string(url));
	rc = api_call(mc, "POST", "/v1/agents/register", desc, 15000, &reply, NULL, err);
	json_decref(desc);
	if (rc == 0) {
		int iv = (int)json_integer_value(json_object_get(reply, "heartbeat_interval_ms"));
		if (iv > 0)
			*interval_ms = iv;
		/* The manager's cluster id, for the containers' labels. */
		agent_set_cluster_id(a, json_string_value(json_object_get(reply, "cluster_id")));
	}
	json_decref(reply);
	return rc;
}

int cmd_agent(int argc, char **argv)
{
	int rc;
	const char *path = config_path(argc, argv, "agent", &rc);
	if (!path && rc >= 0)
		return rc;
	static const char *const known[] = {"id", "manager", "cluster_secret", "listen", "advertise_url",
					    "docker_socket", "cpu", "mem", "mem_reserve", "runner_path",
					    "data_dir", "mock_gpus", "gpu_context_overhead", "gpu_usage_interval_ms",
					    NULL};
	struct conf c = {0};
	if (read_config("agent", path, known, &c) < 0)
		return 1;
	const char *id = conf_get(&c, "id"), *manager = conf_get(&c, "manager");
	const char *secret = conf_get(&c, "cluster_secret");
	const char *listen = conf_get(&c, "listen") ? conf_get(&c, "listen") : "0.0.0.0:8091";
	const char *advertise = conf_get(&c, "advertise_url");
	struct agent_config acfg = {.id = id, .runtime_endpoint = conf_get(&c, "docker_socket"),
				    .runner_path = conf_get(&c, "runner_path"), .mem_reserve = 512LL << 20,
				    .data_dir = conf_get(&c, "data_dir") ? conf_get(&c, "data_dir") : "/var/lib/tessera-agent",
				    .mock_gpus = conf_get(&c, "mock_gpus"),
				    .gpu_context_overhead = conf_get(&c, "gpu_context_overhead")};
	struct terr err = {0};
	int ret = 1;
	if (!id || !manager || !secret || !advertise) {
		fprintf(stderr, "tessera agent: %s: id, manager, cluster_secret and advertise_url are required\n", path);
		goto out_conf;
	}
	if ((conf_get(&c, "cpu") && parse_milli_opt("agent", "cpu", conf_get(&c, "cpu"), &acfg.cpu_m) < 0) ||
	    (conf_get(&c, "mem") && parse_size_opt("agent", "mem", conf_get(&c, "mem"), &acfg.mem) < 0) ||
	    (conf_get(&c, "mem_reserve") &&
	     parse_size_opt("agent", "mem_reserve", conf_get(&c, "mem_reserve"), &acfg.mem_reserve) < 0))
		goto out_conf;
	const char *usage_iv = conf_get(&c, "gpu_usage_interval_ms");
	if (usage_iv) {
		char *end;
		long v = strtol(usage_iv, &end, 10);
		if (end == usage_iv || *end || v < 100 || v > 60000) {
			fprintf(stderr, "tessera agent: %s: gpu_usage_interval_ms must be an integer from 100 to 60000, not '%s'\n",
				path, usage_iv);
			goto out_conf;
		}
		acfg.gpu_usage_interval_ms = (int)v;
	}

	sigset_t stop;
	block_stop_signals(&stop);
	struct agent *a = NULL;
	struct httpd *http = NULL;
	if (agent_open(&a, &acfg, &err) < 0 || agent_rpc_start(a, listen, secret, &http, &err) < 0) {
		fail("agent", &err);
		agent_close(a);
		goto out_conf;
	}
	char credential[80];
	snprintf(credential, sizeof(credential), "agent:%s", id);
	struct api_client mc = {.endpoint = manager, .access_key = credential, .secret_key = secret};
	struct event_queue q = {.pending = json_array()};
	pthread_mutex_init(&q.mu, NULL);
	pthread_cond_init(&q.cv, NULL);
	if (agent_watch_start(a, queue_event, &q, &err) < 0) {
		fail("agent", &err);
		httpd_stop(http);
		agent_close(a);
		goto out_conf;
	}
	log_info("agent", "agent %s serving RPC on %s, manager %s", id, listen, manager);

	bool registered = false;
	int interval_ms = 2000;
	int64_t next_beat = 0;
	for (bool first = true;; first = false) {
		/* Register at once; afterwards wake often enough to send events
		 * promptly, and retry a failed registration every second. */
		if (!first && wait_signal(&stop, registered ? 200 : 1000) >= 0)
			break;
		int64_t now = util_mono_ms();
		if (!registered) {
			if (agent_register(a, &mc, advertise, &interval_ms, &err) == 0) {
				registered = true;
				next_beat = now + interval_ms;
				log_info("agent", "registered with %s", manager);
			} else {
				log_warn("agent", "cannot register with the manager (retrying): %s", err.msg);
			}
			continue;
		}
		/* Send queued events first: they free resources for others. */
		pthread_mutex_lock(&q.mu);
		json_t *batch = q.pending;
		q.pending = json_array();
		pthread_mutex_unlock(&q.mu);
		size_t i;
		json_t *ev;
		char epath[160];
		snprintf(epath, sizeof(epath), "/v1/agents/%s/events", id);
		json_array_foreach(batch, i, ev) {
			if (api_call(&mc, "POST", epath, ev, 10000, NULL, NULL, &err) < 0) {
				log_warn("agent", "cannot report an event (kept for retry): %s", err.msg);
				pthread_mutex_lock(&q.mu);
				for (size_t k = i; k < json_array_size(batch); k++)
					json_array_append(q.pending, json_array_get(batch, k));
				pthread_mutex_unlock(&q.mu);
				break;
			}
		}
		json_decref(batch);
		if (now < next_beat)
			continue;
		next_beat = now + interval_ms;
		char hpath[160];
		snprintf(hpath, sizeof(hpath), "/v1/agents/%s/heartbeat", id);
		json_t *body = json_object(), *reply = NULL;
		long status = 0;
		if (api_call(&mc, "POST", hpath, body, 10000, &reply, &status, &err) < 0) {
			log_warn("agent", "heartbeat failed: %s", err.msg);
			if (status == 404)
				registered = false;  /* the manager wants a fresh registration */
		}
		json_decref(body);
		json_decref(reply);
	}
	log_info("agent", "stopping (sessions keep running)");
	httpd_stop(http);
	agent_close(a);
	json_decref(q.pending);
	ret = 0;
out_conf:
	conf_free(&c);
	return ret;
}

/* ---------- tessera webserver ---------- */

int cmd_webserver(int argc, char **argv)
{
	int rc;
	const char *path = config_path(argc, argv, "webserver", &rc);
	if (!path && rc >= 0)
		return rc;
	static const char *const known[] = {"listen", "manager", "web_secret", "cluster_secret", "ui_dir",
					    "tls_cert", "tls_key", "login_ttl_s", NULL};
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
	int sig;
	while ((sig = wait_signal(&stop, 1000)) < 0)
		;
	log_info("webserver", "signal %d: stopping", sig);
	web_stop(w);
	conf_free(&c);
	return 0;
}
