/* The app proxy and the manager (internal.h): the poller thread that
 * long-polls the route table, applying a table on the loop, and token
 * redemption on libuv's thread pool. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "proxy/appcookie.h"
#include "proxy/internal.h"

/* ---------- redeeming a token ---------- */

struct redeem {
	uv_work_t w;
	struct conn *c;
	char token[160];
	int rc;
	long status;
	struct terr err;
	struct proxy_route route;
};

static void redeem_work(uv_work_t *w)
{
	struct redeem *r = w->data;
	struct proxy *p = r->c->p;
	if (!p->manager) {
		r->rc = terr_set(&r->err, ENOTCONN, "this proxy has no manager to redeem links with");
		return;
	}
	json_t *body = json_pack("{s:s}", "token", r->token), *out = NULL;
	r->rc = api_call(&p->api, "POST", "/v1/proxy/redeem", body, 15000, &out, &r->status, &r->err);
	json_decref(body);
	if (r->rc >= 0) {
		r->rc = routes_parse_one(out, true, &r->route, &r->err);
		if (r->rc < 0)
			terr_prefix(&r->err, "the manager's answer");
	}
	json_decref(out);
}

static void redeem_done(uv_work_t *w, int status)
{
	struct redeem *r = w->data;
	struct conn *c = r->c;
	c->works--;
	if (c->closing || status < 0) {
		free(r);
		conn_maybe_free(c);
		return;
	}
	struct proxy *p = c->p;
	if (r->rc < 0) {
		if (r->status == 0 || r->status >= 500 || r->rc == -ENOTCONN) {
			log_warn(COMP, "redeeming a link: %s", r->err.msg);
			char msg[800];
			snprintf(msg, sizeof(msg), "The link could not be checked: %s. Try again in a moment.", r->err.msg);
			pages_respond(c, 502, NULL, "Cannot reach Tessera", msg, false, false);
		} else {
			char msg[800];
			snprintf(msg, sizeof(msg),
				 "This link cannot be used: %s. Open the app again from Tessera's session list or "
				 "`tessera session app`; each link works once, within a minute.",
				 r->err.msg);
			pages_respond(c, 403, NULL, "Link not valid", msg, false, false);
		}
		free(r);
		conn_answered(c);
		conn_update_reading(c);
		conn_process(c);
		return;
	}
	bool same = p->domain ? !strcmp(r->route.host, c->route_key) : (r->route.port == c->l->port);
	if (!same) {
		pages_respond(c, 403, NULL, "Wrong address",
			      "This link is for another app's address: open the app again from Tessera's session list.",
			      false, false);
		free(r);
		conn_answered(c);
		conn_update_reading(c);
		conn_process(c);
		return;
	}
	/* The manager's answer is the route: serve it now even if the long
	 * poll has not brought it yet. */
	if (routes_add(&p->table, &r->route) < 0)
		log_warn(COMP, "out of memory adding a route");
	struct appcookie ck = {.expires = (int64_t)time(NULL) + APPCOOKIE_TTL_S};
	util_strlcpy(ck.user, r->route.user, sizeof(ck.user));
	util_strlcpy(ck.session_id, r->route.session_id, sizeof(ck.session_id));
	util_strlcpy(ck.target, r->route.target, sizeof(ck.target));
	util_strlcpy(ck.route, c->route_key, sizeof(ck.route));
	char value[APPCOOKIE_MAX], name[64];
	struct terr err = {0};
	if (appcookie_sign(p->secret, &ck, value, sizeof(value), &err) < 0) {
		pages_respond(c, 502, NULL, "Error", err.msg, false, false);
	} else {
		conn_cookie_name(c, name, sizeof(name));
		char extra[APPCOOKIE_MAX + 200];
		/* Lax, not Strict: the link is opened from another site (the
		 * web UI, on an address of its own, or a message), and a
		 * browser keeps a Strict cookie from every request of a
		 * navigation another site started, this redirect's GET / too:
		 * the app would answer "Sign-in needed". Lax still keeps it
		 * from other sites' frames, scripts and form posts. */
		snprintf(extra, sizeof(extra),
			 "Set-Cookie: %s=%s; Max-Age=%d; Path=/; HttpOnly; SameSite=Lax\r\nLocation: /\r\n", name,
			 value, APPCOOKIE_TTL_S);
		pages_respond(c, 302, extra, "Opening the app", "Opening the app...", false, false);
		log_info(COMP, "user %s opened %s of session %s on %s", ck.user, ck.target, ck.session_id, ck.route);
	}
	free(r);
	conn_answered(c);
	conn_update_reading(c);
	conn_process(c);
}

/* The token of /__tessera/setup?token=T, hex only. */
static bool setup_token(const char *target, char *out, size_t n)
{
	const char *q = strchr(target, '?');
	if (!q)
		return false;
	for (const char *s = q + 1; *s;) {
		const char *e = s + strcspn(s, "&");
		if (!strncmp(s, "token=", 6)) {
			size_t len = (size_t)(e - s - 6);
			if (!len || len >= n)
				return false;
			for (size_t i = 0; i < len; i++)
				if (!isxdigit((unsigned char)s[6 + i]))
					return false;
			memcpy(out, s + 6, len);
			out[len] = '\0';
			return true;
		}
		s = *e ? e + 1 : e;
	}
	return false;
}

/* Queues the redemption of a setup link's token (its answer in
 * redeem_done), or refuses a link without one. */
void mpoll_redeem(struct conn *c)
{
	struct proxy *p = c->p;
	const struct reqp_request *rq = &c->rp.req;
	up_close(c);
	struct redeem *r = calloc(1, sizeof(*r));
	if (!r || !setup_token(rq->target, r->token, sizeof(r->token))) {
		free(r);
		conn_refuse(c, 403, "Link not valid",
			    "This link has no valid token: open the app from Tessera's session list or "
			    "`tessera session app`.");
		return;
	}
	r->c = c;
	r->w.data = r;
	c->works++;
	c->phase = PH_WAIT;
	if (uv_queue_work(&p->loop, &r->w, redeem_work, redeem_done) < 0) {
		c->works--;
		free(r);
		conn_close(c);
	}
}

/* ---------- routes ---------- */

/* A connection whose route went (or now serves another session or app) is
 * closed. */
static bool binding_live(const struct proxy *p, const struct conn *c)
{
	const struct proxy_route *r = p->domain ? routes_by_host(&p->table, c->route_key)
						: routes_by_port(&p->table, c->l->port);
	return r && !strcmp(r->session_id, c->b.session_id) && !strcmp(r->target, c->b.target) &&
	       !strcmp(r->endpoint, c->b.endpoint) && routes_user_allowed(&p->table, r, c->b.user);
}

void mpoll_on_routes(uv_async_t *a)
{
	struct proxy *p = a->data;
	pthread_mutex_lock(&p->mu);
	struct route_table *t = p->pending;
	p->pending = NULL;
	uint64_t seq = p->seq_sent;
	pthread_mutex_unlock(&p->mu);
	if (t) {
		routes_free(&p->table);
		p->table = *t;
		free(t);
		__atomic_store_n(&p->generation, p->table.generation, __ATOMIC_RELAXED);
		size_t closed = 0;
		for (struct conn *c = p->conns, *next; c; c = next) {
			next = c->next;
			if (c->bound && !c->closing && !binding_live(p, c)) {
				conn_close(c);
				closed++;
			}
		}
		log_debug(COMP, "routes generation %" PRIu64 ": %zu routes, %zu connections closed",
			  p->table.generation, p->table.n, closed);
	}
	pthread_mutex_lock(&p->mu);
	p->seq_applied = seq;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

int proxy_set_routes(struct proxy *p, json_t *doc, struct terr *err)
{
	struct route_table *t = calloc(1, sizeof(*t));
	if (!t)
		return terr_set(err, ENOMEM, "out of memory");
	int rc = routes_parse(doc, t, err);
	if (rc < 0) {
		free(t);
		return rc;
	}
	pthread_mutex_lock(&p->mu);
	if (p->pending) {
		routes_free(p->pending);
		free(p->pending);
	}
	p->pending = t;
	uint64_t seq = ++p->seq_sent;
	uv_async_send(&p->routes_async);
	while (p->seq_applied < seq && !atomic_load(&p->stopping))
		pthread_cond_wait(&p->cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

/* ---------- the manager poller ---------- */

struct body_buf {
	char *d;
	size_t n;
};

static int collect(const char *data, size_t len, void *ud)
{
	struct body_buf *b = ud;
	if (b->n + len > 64 * 1024 * 1024)
		return 1;
	char *nd = realloc(b->d, b->n + len + 1);
	if (!nd)
		return 1;
	memcpy(nd + b->n, data, len);
	b->n += len;
	nd[b->n] = '\0';
	b->d = nd;
	return 0;
}

static void poll_sleep(struct proxy *p, int ms)
{
	struct timespec ts;
	util_deadline_ms(&ts, ms);
	pthread_mutex_lock(&p->mu);
	if (!atomic_load(&p->stopping))
		pthread_cond_timedwait(&p->cv, &p->mu, &ts);
	pthread_mutex_unlock(&p->mu);
}

void *mpoll_main(void *arg)
{
	struct proxy *p = arg;
	uint64_t since = 0;
	bool failing = false;
	while (!atomic_load(&p->stopping)) {
		/* What this proxy serves goes with each poll, so that the
		 * manager refuses wsproxy_* settings it would not serve. A
		 * domain is DNS labels (checked at start): nothing to escape. */
		char path[512];
		if (p->domain)
			snprintf(path, sizeof(path), "/v1/proxy/routes?since=%" PRIu64 "&timeout_s=%d&domain=%s", since,
				 ROUTES_POLL_S, p->domain);
		else
			snprintf(path, sizeof(path), "/v1/proxy/routes?since=%" PRIu64 "&timeout_s=%d&ports=%d-%d", since,
				 ROUTES_POLL_S, p->port_lo, p->port_hi);
		struct body_buf b = {0};
		struct terr err = {0};
		long status = 0;
		int rc = api_stream(&p->api, "GET", path, NULL, (ROUTES_POLL_S + 15) * 1000L, "application/json", NULL,
				    collect, &b, &p->stopping, &status, &err);
		if (atomic_load(&p->stopping)) {
			free(b.d);
			break;
		}
		json_t *doc = NULL;
		if (rc >= 0) {
			json_error_t je;
			doc = b.d ? json_loads(b.d, 0, &je) : NULL;
			if (!doc)
				rc = terr_set(&err, EPROTO, "the manager's route list is not JSON");
		}
		free(b.d);
		if (rc >= 0 && proxy_set_routes(p, doc, &err) >= 0) {
			json_t *g = json_object_get(doc, "generation");
			since = (uint64_t)json_integer_value(g);
			if (failing)
				log_info(COMP, "routes from the manager again (generation %" PRIu64 ")", since);
			failing = false;
			json_decref(doc);
			continue;
		}
		json_decref(doc);
		if (!failing)
			log_warn(COMP, "cannot get the app routes from %s: %s (retrying every 2 s)", p->manager, err.msg);
		failing = true;
		poll_sleep(p, 2000);
	}
	return NULL;
}
