/* The manager: API, session state machine, scheduler loop, agent registry.
 * One instance per cluster; `tessera server` runs it with one in-process
 * agent, `tessera manager` with remote agents that register over HTTP. */
#ifndef TESSERA_MANAGER_MANAGER_H
#define TESSERA_MANAGER_MANAGER_H

#include <jansson.h>

#include "common/err.h"
#include "store/store.h"

struct manager;
/* The in-process agent of manager_attach_local_agent (agent/agent.h):
 * declared, not included, so what includes this header (the daemons, the
 * CLI's admin verbs, tests) does not take in the agent's interface. */
struct agent;

struct manager_config {
	const char *data_dir;          /* holds tessera.db and admin.conf */
	const char *listen;            /* "127.0.0.1:8090" */
	const char *cluster_secret;    /* NULL: remote agents refused */
	int heartbeat_interval_ms;     /* told to agents; default 2000 */
	int lost_after_heartbeats;     /* default 3 */
	const char *selector;          /* "concentrated" (default) or "dispersed" */
	int dispatch_workers;          /* default 4 */
	int fgpu_per_device;           /* >0: set the cluster setting at start */
	/* The cluster registry agents push committed images to and pull
	 * from: "http://host:port" or "host:port"; NULL or "": none. */
	const char *registry_url;
	/* Session apps (docs/apps.md): the proxy's public base URL
	 * ("http://HOST", NULL: http://127.0.0.1; in port mode the route's
	 * port is appended, so it has none), its port range ("A-B", NULL:
	 * 10205-10300) and, for host mode, its domain (NULL or "": port
	 * mode; apps are then APP.SESSIONID8.apps.DOMAIN). */
	const char *wsproxy_url;
	const char *wsproxy_port_range;
	const char *wsproxy_domain;
	/* Storage hosts of users' folders (docs/admin.md, "Storage"):
	 * "NAME:PATH[,NAME:PATH...]", the first the default; NULL or "":
	 * local:DATA_DIR/folders. */
	const char *storage_hosts;
	/* How long sessions' usage history is kept (docs/admin.md, "Live
	 * usage"); 0: 3600 s. */
	int stats_retention_s;
	/* When set, GET /metrics needs "Authorization: Bearer TOKEN"; NULL
	 * or "": open (docs/admin.md, "Metrics"). */
	const char *metrics_token;
	/* etcd's client URL, "http://HOST:PORT": the cluster settings live
	 * there, under ETCD_CONFIG_PREFIX (common/etcd.h), instead of in the store, and are
	 * followed; NULL: in the store. */
	const char *etcd;
	/* The database (store.h, store_open): NULL or "": SQLite in
	 * data_dir; "postgresql://USER@HOST:PORT/DB": PostgreSQL. */
	const char *store;
	/* On a shared database (PostgreSQL) one manager is active at a time:
	 * manager_open waits as a standby while another is, calling
	 * standby_wait(standby_ud, standby_on) between tries (true: give up,
	 * -ECANCELED; standby_on as store_wait_fn says); NULL: -EBUSY at once. */
	bool (*standby_wait)(void *ud, const char *standby_on);
	void *standby_ud;
	/* Redis for what can be rebuilt (docs/admin.md, "Production:
	 * Redis"): "redis://[:PASSWORD@]HOST:PORT/DB"; NULL or "": agents'
	 * heartbeats and the login rate limits stay in this process's
	 * memory. */
	const char *redis_url;
};


/* Checks a flat object of settings {KEY: value} as PUT /v1/config/{key}
 * checks each, without a manager (put-json, admin restore): the first
 * unknown key or bad value is an error naming it. */
int mgr_settings_check_flat(json_t *flat, struct terr *err);
/* The settings a store holds, as a flat object (*flat new ref; defaults
 * for what it does not hold). */
int mgr_settings_export_store(const struct store_ops *so, struct store *store, json_t **flat, struct terr *err);

/* Opens the store in data_dir (creating the admin user on first start),
 * loads state and starts the scheduler and dispatchers. Not yet serving. */
int manager_open(struct manager **out, const struct manager_config *cfg, struct terr *err);

/* Registers an in-process agent (single-machine mode) and reconciles its
 * containers with the store, as a remote agent's registration does. */
int manager_attach_local_agent(struct manager *m, struct agent *a, struct terr *err);

/* Starts the HTTP API; writes admin.conf (0600) once listening and stores
 * its path in admin_conf_path (>= 4096 bytes). */
int manager_serve(struct manager *m, char *admin_conf_path, size_t n, struct terr *err);

/* Brings the configured store's schema to this version (the migrations
 * manager_open also runs) and closes it: `tessera manager --migrate-only`.
 * *version gets the schema's version. */
int manager_migrate_only(const struct manager_config *cfg, int *version, char *where, size_t n,
			 struct terr *err);

/* tessera admin reset-admin, on the manager's host with no manager
 * running: sets an admin's password straight in the store. */
struct reset_admin {
	const char *email;      /* NULL: admin@tessera.local, else the first admin */
	const char *password;   /* NULL: one is generated */
	bool new_key;           /* a new main key; the admin's other keys are revoked */
};
struct reset_admin_result {
	struct user_rec user;   /* as stored: its main key, email */
	char generated_password[32];   /* "" when one was given */
	size_t revoked_keys;
	bool created;           /* there was no admin: one was made */
	char where[512];        /* the store, as messages name it */
};
/* Opens the store cfg names (SQLite in data_dir, or cfg->store), refuses
 * (-EBUSY) while a manager is active on a shared one (the caller holds
 * the data dir's lock for SQLite), and sets the admin's password
 * (enabling the account and its admin role), its new key when asked. A
 * user that is not there: -ENOENT. The store is closed again. */
int manager_reset_admin(const struct manager_config *cfg, const struct reset_admin *ra,
			struct reset_admin_result *res, struct terr *err);
/* Writes admin.conf (0600, whole or not at all) for admin: endpoint,
 * keypair (its main key), email, and password when not NULL. */
int mgr_admin_conf_write(const char *path, const char *endpoint, const struct user_rec *admin,
			 const char *password, struct terr *err);

/* True once another manager became the active one on the shared database
 * while this one had lost it: the daemon must stop (its state is stale). */
bool manager_fenced(struct manager *m);

/* The URL the API is served on ("http://127.0.0.1:8090"). */
const char *manager_endpoint(const struct manager *m);

/* Stops serving and the threads; containers keep running. */
void manager_close(struct manager *m);

#endif
