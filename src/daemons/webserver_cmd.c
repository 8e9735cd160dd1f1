/* tessera webserver --config FILE: the web UI for browsers (src/web/, the
 * UI itself in ui/), relaying the manager's API; it waits for a stop
 * signal once it serves. */
#include <signal.h>
#include <stdio.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/sdnotify.h"
#include "daemons/daemons.h"
#include "daemons/internal.h"
#include "web/webserver.h"

int cmd_webserver(int argc, char **argv)
{
	int rc;
	const char *path = daemon_config_path(argc, argv, "webserver", NULL, &rc, NULL);
	if (!path && rc >= 0)
		return rc;
	static const char *const known[] = {"listen", "manager", "web_secret", "cluster_secret", "ui_dir",
					    "tls_cert", "tls_key", "login_ttl_s", "redis", NULL};
	struct conf c = {0};
	if (daemon_read_config("webserver", path, known, &c) < 0)
		return 1;
	const char *secret = conf_get(&c, "web_secret") ? conf_get(&c, "web_secret") : conf_get(&c, "cluster_secret");
	struct web_config wc = {
		.listen = conf_get(&c, "listen") ? conf_get(&c, "listen") : "0.0.0.0:8080",
		.manager = conf_get(&c, "manager"),
		.web_secret = secret,
		.ui_dir = conf_get(&c, "ui_dir"),
		.tls_cert = conf_get(&c, "tls_cert"),
		.tls_key = conf_get(&c, "tls_key"),
		.login_ttl_s = daemon_conf_int(&c, "login_ttl_s", 12 * 3600),
		.redis_url = conf_get(&c, "redis"),
	};
	struct terr err = {0};
	sigset_t stop;
	daemon_block_stop_signals(&stop);
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
	int sig = daemon_serve_until_signal("stopping", &stop, NULL);
	log_info("webserver", "signal %d: stopping", sig);
	web_stop(w);
	conf_free(&c);
	return 0;
}