/* tessera wsproxy: the app proxy (docs/apps.md, "The proxy"). One libuv
 * event loop in a thread of its own relays browsers' HTTP and WebSocket
 * traffic to session runners' app port; a second thread long-polls the
 * manager for the route table. Used by `tessera wsproxy` and inside
 * `tessera server`. */
#ifndef TESSERA_PROXY_PROXY_H
#define TESSERA_PROXY_PROXY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define PROXY_DEFAULT_RANGE_LO 10205
#define PROXY_DEFAULT_RANGE_HI 10300
#define PROXY_MAX_CONNS 10000
#define PROXY_CONNS_PER_ADDR 256
/* A side's queued bytes past which the other side is not read. */
#define PROXY_HIGH_WATER (1024 * 1024)

struct proxy_config {
	/* http://HOST:PORT of the manager. NULL: no route polling and no
	 * redeeming (routes come from proxy_set_routes; tests). */
	const char *manager;
	const char *cluster_secret;   /* signs RPCs and cookies; 16+ chars */
	const char *bind;             /* listening address; NULL: 0.0.0.0 */
	int port_lo, port_hi;         /* port mode: the range */
	const char *domain;           /* host mode when set */
	int listen_port;              /* host mode: the one port (0: any) */
	/* Port mode: when set, a request whose Host is not this name is
	 * refused (a DNS-rebinding guard). */
	const char *public_host;
	const char *ui_dir;           /* terminal.html and assets/; NULL: none */
	unsigned max_conns;           /* 0: PROXY_MAX_CONNS */
	unsigned per_addr_limit;      /* 0: PROXY_CONNS_PER_ADDR */
};

struct proxy;

/* Binds the listeners (a port of the range that cannot be bound is logged
 * and skipped; none at all is EADDRINUSE) and starts the threads. The
 * config's strings are copied. */
int proxy_start(const struct proxy_config *cfg, struct proxy **out, struct terr *err);
/* Closes every connection and listener, joins the threads, frees p. */
void proxy_stop(struct proxy *p);

/* The ports listened on, up to n into ports; returns how many there are. */
size_t proxy_ports(const struct proxy *p, int *ports, size_t n);

struct proxy_stats {
	size_t conns;                 /* open browser connections */
	size_t peak_queued;           /* most bytes ever queued on one side */
	uint64_t routes_generation;
};
void proxy_get_stats(struct proxy *p, struct proxy_stats *st);

/* Replaces the route table with doc ({"generation", "routes"}, borrowed)
 * and returns once the loop applied it (connections of routes that went
 * are closed by then). What the manager poller calls; tests call it to
 * inject routes. EINVAL when doc does not parse. */
int proxy_set_routes(struct proxy *p, json_t *doc, struct terr *err);

/* The UI build to serve the terminal page from: beside the binary
 * (ui/www, ../share/tessera/ui), else /usr/share/tessera/ui. ENOENT when
 * none is there. */
int proxy_find_ui_dir(char *out, size_t n, struct terr *err);

#endif
