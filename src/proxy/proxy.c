/* The app proxy (proxy.h, docs/apps.md "The proxy"): start and stop, the
 * listeners and the loop thread. The rest is in the files internal.h
 * names. */
#include "proxy/proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <netinet/in.h>

#include "common/log.h"
#include "common/util.h"
#include "proxy/internal.h"

/* ---------- start and stop ---------- */

static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h)) {
		uv_close(h, NULL);
	}
}

static void on_stop(uv_async_t *a)
{
	struct proxy *p = a->data;
	for (struct conn *c = p->conns, *next; c; c = next) {
		next = c->next;
		conn_close(c);
	}
	for (size_t i = 0; i < p->n_tried; i++)
		if (p->ls[i].bound && !uv_is_closing((uv_handle_t *)&p->ls[i].tcp))
			uv_close((uv_handle_t *)&p->ls[i].tcp, NULL);
	uv_close((uv_handle_t *)&p->routes_async, NULL);
	uv_close((uv_handle_t *)&p->stop_async, NULL);
}

static void *loop_main(void *arg)
{
	struct proxy *p = arg;
	uv_run(&p->loop, UV_RUN_DEFAULT);
	return NULL;
}

static char *dup_or_null(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

static void proxy_free(struct proxy *p)
{
	routes_free(&p->table);
	if (p->pending) {
		routes_free(p->pending);
		free(p->pending);
	}
	for (size_t i = 0; i < p->addrs.n; i++)
		free(p->addrs.v[i]);
	free(p->addrs.v);
	free(p->ls);
	free(p->manager);
	free(p->secret);
	free(p->domain);
	free(p->public_host);
	free(p->ui_dir);
	free(p->bind);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

static int bind_one(struct proxy *p, struct listener *l, int port, struct terr *err)
{
	struct sockaddr_storage ss;
	const char *host = p->bind ? p->bind : "0.0.0.0";
	if (!strcmp(host, "localhost"))
		host = "127.0.0.1";
	int rc = strchr(host, ':') ? uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss)
				   : uv_ip4_addr(host, port, (struct sockaddr_in *)&ss);
	if (rc < 0)
		return terr_set(err, EINVAL, "bind address '%s' is not an IP address", host);
	uv_tcp_init(&p->loop, &l->tcp);
	l->tcp.data = l;
	l->p = p;
	if ((rc = uv_tcp_bind(&l->tcp, (const struct sockaddr *)&ss, 0)) < 0 ||
	    (rc = uv_listen((uv_stream_t *)&l->tcp, 511, conn_on_accept)) < 0) {
		uv_close((uv_handle_t *)&l->tcp, NULL);
		if (rc == UV_EADDRINUSE)
			return terr_set(err, EADDRINUSE, "port %d on %s is in use by another process", port, host);
		return terr_set(err, -rc, "%s:%d: %s", host, port, uv_strerror(rc));
	}
	struct sockaddr_storage got;
	int gl = sizeof(got);
	uv_tcp_getsockname(&l->tcp, (struct sockaddr *)&got, &gl);
	l->port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
						  : ((struct sockaddr_in *)&got)->sin_port);
	return 0;
}

int proxy_start(const struct proxy_config *cfg, struct proxy **out, struct terr *err)
{
	*out = NULL;
	if (!cfg->cluster_secret || strlen(cfg->cluster_secret) < 16)
		return terr_set(err, EINVAL, "cluster_secret must be set, 16 characters or more");
	if (cfg->manager && strncmp(cfg->manager, "http://", 7) && strncmp(cfg->manager, "https://", 8))
		return terr_set(err, EINVAL, "manager must be an http:// URL (e.g. http://127.0.0.1:8090)");
	if (!cfg->domain) {
		if (cfg->port_lo < 1 || cfg->port_hi < cfg->port_lo || cfg->port_hi > 65535)
			return terr_set(err, EINVAL, "port_range must be A-B with 1 <= A <= B <= 65535");
	} else if (cfg->listen_port < 0 || cfg->listen_port > 65535) {
		return terr_set(err, EINVAL, "listen port must be 0..65535");
	}
	struct proxy *p = calloc(1, sizeof(*p));
	if (!p)
		return terr_set(err, ENOMEM, "out of memory");
	pthread_mutex_init(&p->mu, NULL);
	util_cond_init_mono(&p->cv);
	p->manager = dup_or_null(cfg->manager);
	p->secret = strdup(cfg->cluster_secret);
	p->domain = dup_or_null(cfg->domain);
	p->port_lo = cfg->port_lo;
	p->port_hi = cfg->port_hi;
	p->public_host = dup_or_null(cfg->public_host);
	p->ui_dir = dup_or_null(cfg->ui_dir);
	p->bind = dup_or_null(cfg->bind);
	p->max_conns = cfg->max_conns ? cfg->max_conns : PROXY_MAX_CONNS;
	p->per_addr = cfg->per_addr_limit ? cfg->per_addr_limit : PROXY_CONNS_PER_ADDR;
	/* Each connection holds two descriptors (browser and runner): take
	 * the hard limit, and cap connections to what it allows. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		if (rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
			getrlimit(RLIMIT_NOFILE, &rl);
		}
		rlim_t room = rl.rlim_cur > 256 ? (rl.rlim_cur - 128) / 2 : 64;
		if (room < p->max_conns) {
			log_msg(cfg->max_conns ? LOG_WARN : LOG_INFO, COMP,
				"max connections lowered to %lu by the open files limit (%lu; LimitNOFILE= in the unit, "
				"or ulimit -n)", (unsigned long)room, (unsigned long)rl.rlim_cur);
			p->max_conns = (unsigned)room;
		}
	}
	p->api = (struct api_client){.endpoint = p->manager, .access_key = "wsproxy", .secret_key = p->secret};
	int rc = uv_loop_init(&p->loop);
	if (rc < 0) {
		proxy_free(p);
		return terr_set(err, EIO, "event loop: %s", uv_strerror(rc));
	}
	size_t want = p->domain ? 1 : (size_t)(cfg->port_hi - cfg->port_lo + 1);
	p->ls = calloc(want, sizeof(*p->ls));
	if (!p->ls) {
		uv_loop_close(&p->loop);
		proxy_free(p);
		return terr_set(err, ENOMEM, "out of memory");
	}
	struct terr last = {0};
	/* Every port of the range or none: the manager hands out each port
	 * of its range, so a port held by another process (another server's
	 * proxy, say) would send a user's link, token and all, to it. */
	for (size_t i = 0; i < want; i++) {
		int port = p->domain ? cfg->listen_port : cfg->port_lo + (int)i;
		p->n_tried++;
		if (bind_one(p, &p->ls[i], port, &last) < 0)
			break;
		p->ls[i].bound = true;
		p->n_ls++;
	}
	uv_async_init(&p->loop, &p->stop_async, on_stop);
	p->stop_async.data = p;
	uv_async_init(&p->loop, &p->routes_async, mpoll_on_routes);
	p->routes_async.data = p;
	if (p->n_ls < want) {
		/* Closes the listeners bound so far and the two asyncs. */
		on_stop(&p->stop_async);
		uv_run(&p->loop, UV_RUN_DEFAULT);
		uv_loop_close(&p->loop);
		proxy_free(p);
		return terr_set(err, last.code ? last.code : EADDRINUSE, "%s", last.msg);
	}
	if (pthread_create(&p->loop_thread, NULL, loop_main, p) != 0) {
		on_stop(&p->stop_async);
		uv_run(&p->loop, UV_RUN_DEFAULT);
		uv_loop_close(&p->loop);
		proxy_free(p);
		return terr_set(err, EAGAIN, "cannot start the proxy's thread");
	}
	p->loop_started = true;
	if (p->manager) {
		if (pthread_create(&p->poll_thread, NULL, mpoll_main, p) == 0)
			p->poll_started = true;
		else
			log_warn(COMP, "cannot start the route poller: no routes will be served");
	}
	if (p->domain)
		log_info(COMP, "serving apps on port %d for *.apps.%s", p->ls[0].port, p->domain);
	else
		log_info(COMP, "serving apps on %zu ports of %d-%d", p->n_ls, cfg->port_lo, cfg->port_hi);
	*out = p;
	return 0;
}

void proxy_stop(struct proxy *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->stopping, true);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (p->poll_started)
		pthread_join(p->poll_thread, NULL);
	uv_async_send(&p->stop_async);
	if (p->loop_started)
		pthread_join(p->loop_thread, NULL);
	uv_walk(&p->loop, close_walk, NULL);
	uv_run(&p->loop, UV_RUN_DEFAULT);
	uv_loop_close(&p->loop);
	proxy_free(p);
}

size_t proxy_ports(const struct proxy *p, int *ports, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < p->n_tried; i++)
		if (p->ls[i].bound && k < n)
			ports[k++] = p->ls[i].port;
	return p->n_ls;
}

void proxy_get_stats(struct proxy *p, struct proxy_stats *st)
{
	/* Read from another thread for tests and logs: approximate. */
	st->conns = __atomic_load_n(&p->n_conns, __ATOMIC_RELAXED);
	st->peak_queued = __atomic_load_n(&p->peak_queued, __ATOMIC_RELAXED);
	st->routes_generation = __atomic_load_n(&p->generation, __ATOMIC_RELAXED);
}

int proxy_find_ui_dir(char *out, size_t n, struct terr *err)
{
	return util_find_ui_dir("terminal.html", out, n, err);
}
