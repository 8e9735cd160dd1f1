/* Session apps (docs/apps.md, "The manager"): a session's list of apps,
 * opening one (its route and a one-time token), and what the proxy asks:
 * redeeming a token and the live routes. The rules of routes and tokens
 * are approutes.c's; this file ties them to sessions, under the lock. */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/approute_msg.h"
#include "common/jsonutil.h"
#include "common/log.h"
#include "common/util.h"
#include "manager/state.h"

#define TERMINAL_APP "terminal"
/* The store's key for the open routes and remembered tokens, so that a
 * restarted manager (or a standby taking over) serves them on. */
#define APPS_KEY "app_routes"

/* The proxy's addresses parsed: url, range and domain (NULL or "": the
 * default), each checked and then together. */
struct apps_base {
	char scheme[8];
	char host[256];
	int port;
	int lo, hi;
	char domain[256];
};

static int parse_base(const char *url, const char *range, const char *domain, struct apps_base *b, struct terr *err)
{
	if (!url || !*url)
		url = APPROUTES_DEFAULT_URL;
	if (!range || !*range)
		range = APPROUTES_DEFAULT_RANGE;
	if (!domain)
		domain = "";
	if (util_parse_port_range(range, &b->lo, &b->hi, err) < 0)
		return terr_prefix(err, "wsproxy_port_range");
	if (*domain && approutes_check_domain(domain, err) < 0)
		return terr_prefix(err, "wsproxy_domain");
	if (strlen(domain) >= sizeof(b->domain))
		return terr_set(err, EINVAL, "wsproxy_domain is too long");
	util_strlcpy(b->domain, domain, sizeof(b->domain));
	if (approutes_parse_base(url, b->scheme, sizeof(b->scheme), b->host, sizeof(b->host), &b->port, err) < 0)
		return terr_prefix(err, "wsproxy_url");
	if (!*domain && b->port)
		return terr_set(err, EINVAL, "wsproxy_url must have no port (each app gets a port of "
				"wsproxy_port_range, appended to it), not '%.80s'", url);
	return 0;
}

int mgr_apps_open(struct manager *m, struct terr *err)
{
	const struct manager_config *c = &m->cfg;
	struct apps_base b;
	if (parse_base(c->wsproxy_url, c->wsproxy_port_range, c->wsproxy_domain, &b, err) < 0)
		return -EINVAL;
	util_strlcpy(m->apps_scheme, b.scheme, sizeof(m->apps_scheme));
	util_strlcpy(m->apps_host, b.host, sizeof(m->apps_host));
	m->apps_base_port = b.port;
	approutes_init(&m->apps, b.lo, b.hi, b.domain);
	/* Not 0 after each start: a proxy that polls with the generation of
	 * a previous run of the manager gets the routes at once. */
	m->apps.generation = (uint64_t)util_now_ms();
	return 0;
}

int mgr_apps_check(struct manager *m, const char *url, const char *range, const char *domain, struct terr *err)
{
	struct apps_base b;
	if (parse_base(url, range, domain, &b, err) < 0)
		return -EINVAL;
	if (!m->proxy_known)
		return 0;   /* no proxy has said yet what it serves */
	if (m->proxy_domain[0] && strcmp(b.domain, m->proxy_domain))
		return terr_set(err, EINVAL, "the app proxy serves host mode on the domain %s (its wsproxy.conf's domain): "
				"wsproxy_domain must be %s", m->proxy_domain, m->proxy_domain);
	if (!m->proxy_domain[0] && b.domain[0])
		return terr_set(err, EINVAL, "the app proxy serves port mode (ports %d-%d, its wsproxy.conf's port_range), "
				"not a domain: wsproxy_domain must be empty while it does", m->proxy_lo, m->proxy_hi);
	if (!b.domain[0] && (b.lo < m->proxy_lo || b.hi > m->proxy_hi))
		return terr_set(err, EINVAL, "wsproxy_port_range %d-%d: the app proxy serves ports %d-%d only (its "
				"wsproxy.conf's port_range); give a range within them", b.lo, b.hi, m->proxy_lo, m->proxy_hi);
	return 0;
}

void mgr_apps_apply(struct manager *m)
{
	struct apps_base b;
	struct terr e = {0};
	if (parse_base(mgr_conf_value(m, "wsproxy_url"), mgr_conf_value(m, "wsproxy_port_range"),
		       mgr_conf_value(m, "wsproxy_domain"), &b, &e) < 0) {
		/* Each value was checked alone; a bad pair can only come from
		 * etcdctl or from two managers' changes crossing. */
		log_warn("manager", "app links stay on %s://%s: %s", m->apps_scheme, m->apps_host, e.msg);
		return;
	}
	bool same = !strcmp(m->apps_scheme, b.scheme) && !strcmp(m->apps_host, b.host) && m->apps_base_port == b.port &&
		    m->apps.lo == b.lo && m->apps.hi == b.hi && !strcmp(m->apps.domain, b.domain);
	if (same)
		return;
	util_strlcpy(m->apps_scheme, b.scheme, sizeof(m->apps_scheme));
	util_strlcpy(m->apps_host, b.host, sizeof(m->apps_host));
	m->apps_base_port = b.port;
	/* Routes open already keep their port (or host) until their session
	 * leaves RUNNING: the proxy serves them still. New ones come from the
	 * new range. */
	m->apps.lo = b.lo;
	m->apps.hi = b.hi;
	util_strlcpy(m->apps.domain, b.domain, sizeof(m->apps.domain));
	if (b.domain[0])
		log_info("manager", "app links from now on: %s://APP.SESSION.apps.%s", b.scheme, b.domain);
	else
		log_info("manager", "app links from now on: %s://%s on ports %d-%d", b.scheme, b.host, b.lo, b.hi);
}

void mgr_apps_proxy_serves(struct manager *m, int lo, int hi, const char *domain)
{
	domain = domain ? domain : "";
	pthread_mutex_lock(&m->mu);
	if (m->proxy_known && m->proxy_lo == lo && m->proxy_hi == hi && !strcmp(m->proxy_domain, domain)) {
		pthread_mutex_unlock(&m->mu);
		return;
	}
	m->proxy_known = true;
	m->proxy_lo = lo;
	m->proxy_hi = hi;
	util_strlcpy(m->proxy_domain, domain, sizeof(m->proxy_domain));
	if (*domain)
		log_info("manager", "the app proxy serves host mode on the domain %s", domain);
	else
		log_info("manager", "the app proxy serves ports %d-%d", lo, hi);
	struct terr e = {0};
	if (mgr_apps_check(m, mgr_conf_value(m, "wsproxy_url"), mgr_conf_value(m, "wsproxy_port_range"),
			   mgr_conf_value(m, "wsproxy_domain"), &e) < 0)
		log_warn("manager", "the app proxy and this manager disagree: %s", e.msg);
	pthread_mutex_unlock(&m->mu);
}

/* Saves the routes and tokens (under mu). A failure is logged: the apps
 * work on, and only a restart would forget them. */
static void apps_persist(struct manager *m)
{
	if (!m->so || !m->store)
		return;
	json_t *doc = approutes_to_json(&m->apps);
	char *text = jsonutil_dump(doc);
	json_decref(doc);
	struct terr err = {0};
	if (!text || m->so->kv_set(m->store, APPS_KEY, text, &err) < 0)
		log_warn("manager", "cannot save the open app routes (a restart would close them): %s",
			 text ? err.msg : "out of memory");
	free(text);
}

void mgr_apps_load(struct manager *m)
{
	char *text = NULL;
	struct terr e = {0};
	if (m->so->kv_get(m->store, APPS_KEY, &text, &e) < 0)
		return;   /* none saved */
	json_t *doc = json_loads(text, 0, NULL);
	free(text);
	size_t added = approutes_load_json(&m->apps, doc, util_now_ms());
	json_decref(doc);
	/* Only the routes of sessions that may still serve them: RUNNING, or
	 * LOST until their node is back (then RUNNING, or ended and dropped). */
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		if (s->rec.status != SS_RUNNING && s->rec.status != SS_LOST)
			approutes_drop_session(&m->apps, s->rec.id);
	}
	for (size_t i = 0; i < m->apps.n;) {
		if (!mgr_find_session(m, m->apps.r[i].session_id))
			approutes_drop_session(&m->apps, m->apps.r[i].session_id);
		else
			i++;
	}
	if (added)
		log_info("manager", "%zu open app routes kept from before the restart", m->apps.n);
}

void mgr_apps_free(struct manager *m)
{
	approutes_free(&m->apps);
}

void mgr_apps_set_endpoint(struct manager *m, struct msession *s, const char *endpoint)
{
	if (!endpoint || strlen(endpoint) >= sizeof(s->rec.app_endpoint))
		endpoint = "";
	if (!strcmp(s->rec.app_endpoint, endpoint))
		return;
	util_strlcpy(s->rec.app_endpoint, endpoint, sizeof(s->rec.app_endpoint));
	for (size_t i = 0; i < m->apps.n; i++) {
		if (!strcmp(m->apps.r[i].session_id, s->rec.id)) {
			m->apps.generation++;
			pthread_cond_broadcast(&m->changed);
			break;
		}
	}
}

void mgr_apps_left_running(struct manager *m, struct msession *s)
{
	s->rec.app_endpoint[0] = '\0';
	if (approutes_drop_session(&m->apps, s->rec.id)) {
		apps_persist(m);
		pthread_cond_broadcast(&m->changed);
	}
}

/* ---------- a session's apps ---------- */

/* The URL of a route, with the token's setup path when token is given,
 * else its root. */
static void route_url(const struct manager *m, const struct approute *r, const char *token, char *buf, size_t n)
{
	char port[16] = "";
	int p = r->port ? r->port : m->apps_base_port;
	if (p)
		snprintf(port, sizeof(port), ":%d", p);
	snprintf(buf, n, "%s://%s%s/%s%s", m->apps_scheme, r->port ? m->apps_host : r->host, port,
		 token ? "__tessera/setup?token=" : "", token ? token : "");
}

/* What an SSH client needs to log in to s's sshd app (`tessera session
 * ssh-config`): the session's user and its host key, which the printed
 * block pins. null for a session made before sessions had SSH keys. */
static json_t *ssh_json(const struct msession *s)
{
	const struct msession *seeded = mgr_session_is_cluster(s) && s->cl_main ? s->cl_main : s;
	char key[1024], pub[256];
	if (!seeded->rec.cluster_ssh_seed[0] ||
	    mgr_cluster_ssh_keys(seeded->rec.cluster_ssh_seed, key, sizeof(key), pub, sizeof(pub)) < 0)
		return json_null();
	OPENSSL_cleanse(key, sizeof(key));
	char alias[48];
	snprintf(alias, sizeof(alias), "tessera-%.12s", s->rec.id);
	return json_pack("{s:s,s:s,s:s}", "user", s->rec.run_as_root ? "root" : "work", "host_key", pub, "host_alias",
			 alias);
}

/* The apps of s, in order: terminal, then its image's service ports
 * that are apps (img_service_port_is_app: what the agent gives the
 * runner; an image's own "terminal" is the built-in one). */
static json_t *apps_json(struct manager *m, const struct msession *s)
{
	struct img_service_port ports[IMG_MAX_SERVICE_PORTS];
	size_t n = 0;
	mgr_image_service_ports(m, s->rec.image, ports, IMG_MAX_SERVICE_PORTS, &n);
	json_t *arr = json_array();
	json_array_append_new(arr, json_pack("{s:s,s:s,s:n}", "name", TERMINAL_APP, "protocol", "pty", "port"));
	for (size_t i = 0; i < n; i++) {
		if (!img_service_port_is_app(&ports[i]))
			continue;
		json_array_append_new(arr, json_pack("{s:s,s:s,s:i}", "name", ports[i].name, "protocol",
						     ports[i].protocol, "port", ports[i].ports[0]));
	}
	/* Its preopen ports (asked at create): each an app named port-N,
	 * opened as `POST .../apps/N` opens that port. */
	for (const char *p = s->rec.preopen_ports; *p;) {
		long port = strtol(p, NULL, 10);
		char name[APPROUTES_APP_MAX];
		snprintf(name, sizeof(name), "port-%ld", port);
		json_array_append_new(arr, json_pack("{s:s,s:s,s:i,s:b}", "name", name, "protocol", "http", "port",
						     (int)port, "preopen", 1));
		p += strcspn(p, ",");
		p += *p == ',';
	}
	/* The open ones: where their route is. */
	size_t i;
	json_t *a;
	json_array_foreach(arr, i, a) {
		if (!strcmp(json_string_value(json_object_get(a, "name")), "sshd"))
			json_object_set_new(a, "ssh", ssh_json(s));
		char target[APPROUTES_TARGET_MAX], url[600];
		if (json_is_true(json_object_get(a, "preopen")))
			snprintf(target, sizeof(target), "port:%d", (int)json_integer_value(json_object_get(a, "port")));
		else
			snprintf(target, sizeof(target), "app:%s", json_string_value(json_object_get(a, "name")));
		const struct approute *r = approutes_find(&m->apps, s->rec.id, target);
		if (r) {
			route_url(m, r, NULL, url, sizeof(url));
			json_object_set_new(a, "url", json_string(url));
		}
	}
	return arr;
}

static int no_session(const char *ref, struct terr *err)
{
	return terr_set(err, ENOENT, "no session named or with id '%s'", ref);
}

int mgr_session_apps(struct manager *m, const struct user_rec *u, const char *ref, json_t **apps,
		     struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_resolve_session(m, ref, u);
	json_t *o = s ? apps_json(m, s) : NULL;
	pthread_mutex_unlock(&m->mu);
	if (!s)
		return no_session(ref, err);
	*apps = o;
	return 0;
}

/* "terminal, jupyter" into buf. */
static void app_names(json_t *apps, char *buf, size_t n)
{
	size_t i, len = 0;
	json_t *a;
	buf[0] = '\0';
	json_array_foreach(apps, i, a) {
		int w = snprintf(buf + len, n - len, "%s%s", i ? ", " : "", json_string_value(json_object_get(a, "name")));
		if (w < 0 || (size_t)w >= n - len)
			break;
		len += (size_t)w;
	}
}

int mgr_session_app_open(struct manager *m, const struct user_rec *u, const char *ref, const char *app,
			 json_t **reply, struct terr *err)
{
	int port;
	char name[APPROUTES_APP_MAX], target[APPROUTES_TARGET_MAX];
	int rc = approutes_parse_app(app, &port, name, target, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_resolve_session(m, ref, u);
	if (!s) {
		pthread_mutex_unlock(&m->mu);
		return no_session(ref, err);
	}
	if (!mgr_session_enterable(u, s)) {
		pthread_mutex_unlock(&m->mu);
		return mgr_not_enterable(s, err);
	}
	if (!port) {
		json_t *apps = apps_json(m, s);
		bool listed = false;
		size_t i;
		json_t *a;
		json_array_foreach(apps, i, a) {
			if (strcmp(json_string_value(json_object_get(a, "name")), name))
				continue;
			listed = true;
			/* A preopen port's app is that port, as a number
			 * names it. */
			if (json_is_true(json_object_get(a, "preopen"))) {
				port = (int)json_integer_value(json_object_get(a, "port"));
				snprintf(target, sizeof(target), "port:%d", port);
			}
		}
		if (!listed) {
			char names[512];
			app_names(apps, names, sizeof(names));
			rc = terr_set(err, EINVAL, "session %s has no app '%s' (its apps: %s); name one of them or "
				      "give a port number", s->rec.name, name, names);
		}
		json_decref(apps);
	}
	if (rc == 0 && s->rec.status != SS_RUNNING)
		rc = terr_set(err, EBUSY, "session %s is %s: its apps open once it is RUNNING", s->rec.name,
			      session_status_name(s->rec.status));
	else if (rc == 0 && !s->rec.app_endpoint[0])
		rc = terr_set(err, EBUSY, "session %s has no app port (its container was made by an older agent); "
			      "start a new session to use apps", s->rec.name);
	const struct approute *r = NULL;
	char token[APPROUTES_TOKEN_HEX + 1];
	if (rc == 0 && (rc = approutes_open(&m->apps, s->rec.id, name, target, &r, err)) == 0)
		rc = approutes_token_issue(&m->apps, u->id, s->rec.id, name, target, util_now_ms(), token, err);
	if (rc == 0) {
		char url[700];
		route_url(m, r, token, url, sizeof(url));
		*reply = json_pack("{s:s,s:s,s:i}", "app", name, "url", url, "expires_in",
				   APPROUTES_TOKEN_TTL_MS / 1000);
		char where[APPROUTES_HOST_MAX + 16];
		if (r->port)
			snprintf(where, sizeof(where), "port %d", r->port);
		else
			snprintf(where, sizeof(where), "host %s", r->host);
		log_info("manager", "app %s of session %s (%.8s) opened by %s on %s", name, s->rec.name, s->rec.id,
			 u->email, where);
		apps_persist(m);
		pthread_cond_broadcast(&m->changed);
	}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

json_t *mgr_apps_origin(struct manager *m)
{
	pthread_mutex_lock(&m->mu);
	json_t *o;
	if (m->apps.domain[0]) {
		char d[300];
		snprintf(d, sizeof(d), "apps.%s", m->apps.domain);
		o = json_pack("{s:s}", "domain", d);
	} else {
		o = json_pack("{s:s}", "host", m->apps_host);
	}
	pthread_mutex_unlock(&m->mu);
	return o;
}

/* ---------- for the proxy ---------- */

/* What the proxy is sent of route r of session s (common/approute_msg.h,
 * the format the proxy reads with), for its owner. */
static void route_msg(const struct approute *r, const struct msession *s, struct approute_msg *out)
{
	memset(out, 0, sizeof(*out));
	util_strlcpy(out->session_id, s->rec.id, sizeof(out->session_id));
	util_strlcpy(out->app, r->app, sizeof(out->app));
	util_strlcpy(out->target, r->target, sizeof(out->target));
	util_strlcpy(out->endpoint, s->rec.app_endpoint, sizeof(out->endpoint));
	util_strlcpy(out->secret, s->rec.app_secret, sizeof(out->secret));
	util_strlcpy(out->user, s->rec.owner_id, sizeof(out->user));
	util_strlcpy(out->owner, s->rec.owner_id, sizeof(out->owner));
	out->port = r->port;
	util_strlcpy(out->host, r->host, sizeof(out->host));
}

int mgr_proxy_redeem(struct manager *m, const char *token, json_t **reply, struct terr *err)
{
	struct apptoken t;
	pthread_mutex_lock(&m->mu);
	int rc = approutes_token_redeem(&m->apps, token, util_now_ms(), &t, err);
	struct msession *s = rc == 0 ? mgr_find_session(m, t.session_id) : NULL;
	const struct approute *r = s ? approutes_find(&m->apps, t.session_id, t.target) : NULL;
	const struct user_rec *u = rc == 0 ? mgr_find_user(m, t.user_id) : NULL;
	if (rc == 0 && (!s || s->rec.status != SS_RUNNING || !r || !s->rec.app_endpoint[0]))
		rc = terr_set(err, EACCES, "the session of this link is no longer running");
	else if (rc == 0 && (!u || u->disabled))
		rc = terr_set(err, EACCES, "the user this link was made for is disabled or gone");
	if (rc == 0) {
		/* The route, for the link's user. */
		struct approute_msg msg;
		route_msg(r, s, &msg);
		util_strlcpy(msg.user, u->id, sizeof(msg.user));
		msg.email = u->email;
		msg.session_name = s->rec.name;
		*reply = approute_msg_to_json(&msg);
		log_info("manager", "app link of %s for %s of session %s redeemed", u->email, t.app, s->rec.name);
	}
	if (rc == 0 || err->code == EACCES)
		apps_persist(m);   /* the token is used up (or was forgotten) */
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int mgr_proxy_routes(struct manager *m, int64_t since, int wait_s, json_t **reply)
{
	pthread_mutex_lock(&m->mu);
	if (since >= 0) {
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += wait_s;
		while (!m->stopping && m->apps.generation == (uint64_t)since &&
		       pthread_cond_timedwait(&m->changed, &m->mu, &dl) == 0)
			;
	}
	if (m->stopping) {
		pthread_mutex_unlock(&m->mu);
		return -ECANCELED;
	}
	struct approute_list l = {.generation = m->apps.generation};
	l.r = calloc(m->apps.n ? m->apps.n : 1, sizeof(*l.r));
	l.admins = calloc(m->n_users ? m->n_users : 1, sizeof(*l.admins));
	l.disabled = calloc(m->n_users ? m->n_users : 1, sizeof(*l.disabled));
	for (size_t i = 0; l.r && i < m->apps.n; i++) {
		const struct approute *r = &m->apps.r[i];
		struct msession *s = mgr_find_session(m, r->session_id);
		if (s && s->rec.status == SS_RUNNING && s->rec.app_endpoint[0])
			route_msg(r, s, &l.r[l.n++]);
	}
	/* Who may use routes besides their sessions' owners, and who may use
	 * none: the proxy checks each request's cookie against these. The
	 * ids are borrowed from the users. */
	for (size_t i = 0; l.admins && l.disabled && i < m->n_users; i++) {
		struct user_rec *u = &m->users[i];
		if (u->disabled)
			l.disabled[l.n_disabled++] = u->id;
		else if (u->is_admin)
			l.admins[l.n_admins++] = u->id;
	}
	*reply = l.r && l.admins && l.disabled ? approute_list_to_json(&l) : NULL;
	free(l.r);
	free(l.admins);
	free(l.disabled);
	pthread_mutex_unlock(&m->mu);
	return 0;
}

void mgr_apps_users_changed(struct manager *m)
{
	m->apps.generation++;
	pthread_cond_broadcast(&m->changed);
}
