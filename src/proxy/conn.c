/* The browser's side of the app proxy (internal.h): a connection, its
 * phases, its writes and timers, and the check of each request. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "proxy/appcookie.h"
#include "proxy/internal.h"

/* ---------- connection lifetime ---------- */


static void addr_release(struct proxy *p, struct addr_count *ac)
{
	if (!ac || --ac->n)
		return;
	for (size_t i = 0; i < p->addrs.n; i++)
		if (p->addrs.v[i] == ac) {
			p->addrs.v[i] = p->addrs.v[--p->addrs.n];
			break;
		}
	free(ac);
}

static struct addr_count *addr_acquire(struct proxy *p, const char *addr)
{
	for (size_t i = 0; i < p->addrs.n; i++)
		if (!strcmp(p->addrs.v[i]->addr, addr)) {
			if (p->addrs.v[i]->n >= p->per_addr)
				return NULL;
			p->addrs.v[i]->n++;
			return p->addrs.v[i];
		}
	if (p->addrs.n == p->addrs.cap) {
		size_t cap = p->addrs.cap ? p->addrs.cap * 2 : 64;
		struct addr_count **nv = realloc(p->addrs.v, cap * sizeof(*nv));
		if (!nv)
			return NULL;
		p->addrs.v = nv;
		p->addrs.cap = cap;
	}
	struct addr_count *ac = calloc(1, sizeof(*ac));
	if (!ac)
		return NULL;
	util_strlcpy(ac->addr, addr, sizeof(ac->addr));
	ac->n = 1;
	p->addrs.v[p->addrs.n++] = ac;
	return ac;
}

void conn_maybe_free(struct conn *c)
{
	if (c->handles || c->works)
		return;
	struct proxy *p = c->p;
	if (c->prev)
		c->prev->next = c->next;
	else
		p->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	__atomic_sub_fetch(&p->n_conns, 1, __ATOMIC_RELAXED);
	addr_release(p, c->ac);
	reqparse_free(&c->rp);
	free(c->in);
	free(c->deferred);
	free(c);
}

static void on_conn_handle_closed(uv_handle_t *h)
{
	struct conn *c = h->data;
	c->handles--;
	conn_maybe_free(c);
}

/* Closes both ends now; queued writes are dropped. */
void conn_close(struct conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	up_close(c);
	uv_close((uv_handle_t *)&c->client, on_conn_handle_closed);
	uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
}

static void on_finish_shutdown(uv_shutdown_t *req, int status)
{
	(void)status;
	struct conn *c = req->data;
	free(req);
	conn_close(c);
}

/* Closes once what is queued to the browser is written. */
void conn_finish(struct conn *c)
{
	if (c->closing || c->finishing)
		return;
	c->finishing = true;
	uv_read_stop((uv_stream_t *)&c->client);
	c->reading = false;
	up_close(c);
	uv_shutdown_t *req = malloc(sizeof(*req));
	if (!req || uv_shutdown(req, (uv_stream_t *)&c->client, on_finish_shutdown) < 0) {
		free(req);
		conn_close(c);
		return;
	}
	req->data = c;
}

/* ---------- writing ---------- */

struct wreq {
	uv_write_t w;
	struct conn *c;
	char *buf;
	size_t len;
	bool to_client;
};

static void note_queued(struct conn *c)
{
	size_t q = c->q_client > c->q_up ? c->q_client : c->q_up;
	if (q > c->p->peak_queued)
		__atomic_store_n(&c->p->peak_queued, q, __ATOMIC_RELAXED);
}


void conn_free_shutdown(uv_shutdown_t *req, int status)
{
	(void)status;
	free(req);
}

static void free_handle_data(uv_handle_t *h)
{
	free(h->data);
}

static void on_written(uv_write_t *w, int status)
{
	struct wreq *r = (struct wreq *)w;
	struct conn *c = r->c;
	bool to_client = r->to_client;
	if (to_client)
		c->q_client -= r->len;
	else
		c->q_up -= r->len;
	free(r->buf);
	free(r);
	if (c->closing)
		return;
	if (status < 0) {
		conn_close(c);
		return;
	}
	if (to_client && c->close_after && c->q_client == 0) {
		conn_finish(c);
		return;
	}
	up_resume(c);
	conn_process(c);
}

/* Queues buf (owned, freed once written) to the browser or the runner. */
void conn_write(struct conn *c, bool to_client, char *buf, size_t len)
{
	uv_stream_t *s = to_client ? (uv_stream_t *)&c->client : (uv_stream_t *)&c->up->tcp;
	struct wreq *r = malloc(sizeof(*r));
	if (!r) {
		free(buf);
		conn_close(c);
		return;
	}
	r->c = c;
	r->buf = buf;
	r->len = len;
	r->to_client = to_client;
	uv_buf_t b = uv_buf_init(buf, (unsigned)len);
	if (to_client)
		c->q_client += len;
	else
		c->q_up += len;
	note_queued(c);
	if (uv_write(&r->w, s, &b, 1, on_written) < 0) {
		if (to_client)
			c->q_client -= len;
		else
			c->q_up -= len;
		free(buf);
		free(r);
		conn_close(c);
	}
}

void conn_write_copy(struct conn *c, bool to_client, const char *data, size_t len)
{
	if (!len)
		return;
	char *b = malloc(len);
	if (!b) {
		conn_close(c);
		return;
	}
	memcpy(b, data, len);
	conn_write(c, to_client, b, len);
}

void conn_alloc_chunk(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	(void)suggested;
	buf->base = malloc(READ_CHUNK);
	buf->len = buf->base ? READ_CHUNK : 0;
}

/* After the proxy answered a request itself: its body (if any) is
 * skipped, and a request that upgrades or asks to close ends the
 * connection. */
void conn_answered(struct conn *c)
{
	if (c->rp.req.upgrade || c->rp.req.close || c->client_eof)
		c->close_after = true;
	c->phase = PH_DISCARD;
	if (c->close_after && c->q_client == 0)
		conn_finish(c);
}

/* Refuses the current request: at once when no runner connection is
 * busy; else after the runner's answers to the requests before it
 * (DRAIN). */
void conn_refuse(struct conn *c, int status, const char *title, const char *text)
{
	if (c->up && c->up->open && !c->up->eof) {
		size_t len = 0;
		char *body = pages_html(status, title, text, false, &len);
		char *b = NULL;
		int n = body ? asprintf(&b,
					"HTTP/1.1 %d %s\r\nContent-Type: text/html; charset=utf-8\r\n"
					"Content-Length: %zu\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n%s",
					status, pages_reason(status), len, body)
			     : -1;
		free(body);
		if (n < 0) {
			conn_close(c);
			return;
		}
		c->deferred = b;
		c->deferred_len = (size_t)n;
		c->phase = PH_DRAIN;
		uv_shutdown_t *req = malloc(sizeof(*req));
		if (!req || uv_shutdown(req, (uv_stream_t *)&c->up->tcp, conn_free_shutdown) < 0) {
			free(req);
			conn_close(c);
		}
		conn_update_reading(c);
		return;
	}
	pages_respond(c, status, NULL, title, text, false, c->rp.req.upgrade);
	conn_answered(c);
}

/* ---------- timers ---------- */

static void on_timer(uv_timer_t *t)
{
	struct conn *c = t->data;
	if (c->phase == PH_WAIT && c->up && !c->up->open) {
		up_close(c);
		pages_respond(c, 502, NULL, "App unreachable",
			      "The session's runner does not answer: the session may be stopping, or its node is down.",
			      false, true);
		conn_answered(c);
		return;
	}
	if (c->head_timer && c->phase == PH_HEAD && !(c->up && c->q_client)) {
		pages_respond(c, 408, NULL, "Request timeout", "The request was not complete within 10 seconds.",
			      false, true);
		if (c->q_client == 0)
			conn_finish(c);
		return;
	}
	conn_close(c);
}

/* RAW: none (TCP keepalive finds dead peers); an unfinished head: 10 s
 * from its first byte; else 120 s since the last byte either way. */
void conn_arm_timer(struct conn *c)
{
	if (c->closing || c->retry_wait)
		return;
	if (c->phase == PH_RAW) {
		uv_timer_stop(&c->timer);
		return;
	}
	if (c->phase == PH_HEAD && reqparse_head_started(&c->rp)) {
		if (!c->head_timer) {
			c->head_timer = true;
			uv_timer_start(&c->timer, on_timer, HEAD_TIMEOUT_MS, 0);
		}
		return;
	}
	c->head_timer = false;
	bool awaiting = c->phase == PH_WAIT && c->up && !c->up->open;
	uv_timer_start(&c->timer, on_timer, awaiting ? UP_ANSWER_TIMEOUT_MS : IDLE_TIMEOUT_MS, 0);
}

/* ---------- a request ---------- */

static bool path_is(const char *target, const char *path)
{
	size_t n = strlen(path);
	return !strncmp(target, path, n) && (target[n] == '\0' || target[n] == '?');
}

void conn_cookie_name(struct conn *c, char *out, size_t n)
{
	if (c->p->domain)
		snprintf(out, n, COOKIE_PREFIX);
	else
		snprintf(out, n, COOKIE_PREFIX "_%d", c->l->port);
}

static void handle_request(struct conn *c)
{
	struct proxy *p = c->p;
	const struct reqp_request *rq = &c->rp.req;
	const char *host = reqparse_header(rq, "Host");
	/* Which route the request is on. */
	char key[400];
	if (p->domain) {
		routes_host_name(host, key, sizeof(key));
		if (!key[0]) {
			conn_refuse(c, 400, "Bad request", "The request has no valid Host header.");
			return;
		}
	} else {
		if (p->public_host) {
			char name[300];
			routes_host_name(host, name, sizeof(name));
			if (strcasecmp(name, p->public_host)) {
				conn_refuse(c, 400, "Bad request", "This address does not serve Tessera's apps.");
				return;
			}
		}
		snprintf(key, sizeof(key), "%d", c->l->port);
	}
	if (c->route_key[0] && strcmp(c->route_key, key) && c->up) {
		conn_refuse(c, 400, "Bad request", "One connection serves one app.");
		return;
	}
	util_strlcpy(c->route_key, key, sizeof(c->route_key));

	if (path_is(rq->target, "/__tessera/setup")) {
		/* A link opened on a connection that served the app before:
		 * the runner's connection goes, the cookie is renewed. */
		mpoll_redeem(c);
		return;
	}

	/* The cookie of this very route. */
	char name[64], value[APPCOOKIE_MAX];
	conn_cookie_name(c, name, sizeof(name));
	int rc = appcookie_find(reqparse_header(rq, "Cookie"), name, value, sizeof(value));
	if (rc < 0) {
		conn_refuse(c, 403, "Sign-in needed",
			    "No access to this app yet: open the app from Tessera's session list or with "
			    "`tessera session app SESSION APP`.");
		return;
	}
	struct appcookie ck;
	struct terr err = {0};
	rc = appcookie_verify(p->secret, value, key, (int64_t)time(NULL), &ck, &err);
	if (rc == -EKEYEXPIRED) {
		conn_refuse(c, 403, "Access expired",
			    "Your access to this app expired (it lasts 12 hours): open the app again from Tessera's "
			    "session list or `tessera session app`.");
		return;
	}
	if (rc == -EXDEV) {
		conn_refuse(c, 403, "Another app's access",
			    "This browser's access is for another app: open this app from Tessera's session list or "
			    "`tessera session app`.");
		return;
	}
	if (rc < 0) {
		conn_refuse(c, 403, "Access not valid",
			    "The access cookie is not valid: open the app again from Tessera's session list or "
			    "`tessera session app`.");
		return;
	}
	const struct proxy_route *r = p->domain ? routes_by_host(&p->table, key) : routes_by_port(&p->table, c->l->port);
	if (!r || strcmp(r->session_id, ck.session_id) || strcmp(r->target, ck.target)) {
		conn_refuse(c, 403, "Session ended",
			    "The session of this app has ended, or the app was closed: start or open it again in "
			    "Tessera.");
		return;
	}
	/* Checked on every request against the manager's latest word, so a
	 * disabled account's cookie (12 hours) stops at once. */
	if (!routes_user_allowed(&p->table, r, ck.user)) {
		conn_refuse(c, 403, "Access revoked",
			    "This account may no longer open this app: it was disabled, or the session is not its own. "
			    "Ask an administrator.");
		return;
	}
	/* Passed. */
	bool same = c->bound && !strcmp(c->b.session_id, r->session_id) && !strcmp(c->b.target, r->target) &&
		    !strcmp(c->b.endpoint, r->endpoint) && !strcmp(c->b.user, ck.user);
	if (!same && c->up) {
		/* The route changed under a kept-alive connection. */
		conn_refuse(c, 403, "Session ended", "The app this connection was for is gone: reload the page.");
		return;
	}
	c->bound = true;
	util_strlcpy(c->b.user, ck.user, sizeof(c->b.user));
	util_strlcpy(c->b.session_id, r->session_id, sizeof(c->b.session_id));
	util_strlcpy(c->b.target, r->target, sizeof(c->b.target));
	util_strlcpy(c->b.endpoint, r->endpoint, sizeof(c->b.endpoint));
	util_strlcpy(c->b.secret, r->secret, sizeof(c->b.secret));
	c->b.addr = r->addr;
	c->b.addr_len = r->addr_len;
	util_strlcpy(c->b.direct, r->direct, sizeof(c->b.direct));
	c->b.direct_addr = r->direct_addr;
	c->b.direct_len = r->direct_len;
	if (!same) {
		c->direct_off = false;
		c->app_direct_off = false;
	}
	/* CONNECT: a byte tunnel to the app (what `tessera session
	 * ssh-proxy` opens to the sshd app): never to the terminal, whose
	 * runner side speaks HTTP, and always on a runner connection of its
	 * own. */
	if (rq->connect) {
		if (!strcmp(r->target, "app:terminal")) {
			conn_refuse(c, 400, "Bad request", "The terminal is not reached by CONNECT: open it in a browser.");
			return;
		}
		if (c->up)
			up_close(c);
		c->up_tries = 0;
		up_connect(c);
		return;
	}
	if (!strcmp(r->target, "app:terminal") && !path_is(rq->target, "/ws")) {
		if (c->up) {
			/* Served by the proxy while the runner still answers an
			 * earlier request: wait for it as a refusal does. */
			conn_refuse(c, 409, "Busy", "Reload the page.");
			return;
		}
		pages_serve_static(c);
		return;
	}
	if (c->up && c->up->open && !c->up->eof) {
		up_forward_head(c);
		return;
	}
	if (c->up)
		up_close(c);
	c->up_tries = 0;
	up_connect(c);
}

/* ---------- the browser's side ---------- */

static void on_client_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

void conn_update_reading(struct conn *c)
{
	if (c->closing || c->finishing || c->client_eof)
		return;
	/* Towards the browser, only an HTTP exchange's answers pile up from
	 * what the browser sends; after an upgrade the two directions are
	 * independent, and pausing the browser's side on the other one's
	 * queue only slows a stream that flows both ways (a WebSocket echo). */
	bool want = c->phase != PH_WAIT && c->phase != PH_DRAIN && c->q_up < PROXY_HIGH_WATER &&
		    (c->phase == PH_RAW || c->q_client < PROXY_HIGH_WATER) && !c->close_after;
	if (want && c->in_len > c->in_off) {
		/* Bytes already here come first. */
		want = false;
	}
	if (want == c->reading)
		return;
	c->reading = want;
	if (want)
		uv_read_start((uv_stream_t *)&c->client, conn_alloc_chunk, on_client_read);
	else
		uv_read_stop((uv_stream_t *)&c->client);
}

/* Handles the client bytes held in c->in as far as the phase allows. */
void conn_process(struct conn *c)
{
	while (!c->closing && !c->finishing && c->in_off < c->in_len) {
		if (c->phase == PH_WAIT || c->phase == PH_DRAIN || c->close_after)
			break;
		if ((c->phase == PH_BODY || c->phase == PH_RAW) && c->q_up >= PROXY_HIGH_WATER)
			break;
		if (c->phase == PH_HEAD && c->q_client >= PROXY_HIGH_WATER)
			break;
		size_t used = 0;
		const char *d = c->in + c->in_off;
		size_t len = c->in_len - c->in_off;
		enum reqp_event ev = reqparse_feed(&c->rp, d, len, &used);
		if (c->rp.in_body && used && (c->phase == PH_BODY || c->phase == PH_RAW) && c->up) {
			if (c->in_off == 0 && used == c->in_len) {
				/* The whole buffer goes on as it is. */
				char *whole = c->in;
				c->in = NULL;
				c->in_len = 0;
				conn_write(c, false, whole, used);
				used = 0;
			} else {
				conn_write_copy(c, false, d, used);
			}
		}
		c->in_off += used;
		if (ev == REQP_ERROR) {
			log_debug(COMP, "bad request: %s", c->rp.why);
			pages_respond(c, c->rp.status, NULL, pages_reason(c->rp.status), c->rp.why, false, true);
			c->in_off = c->in_len;
			if (c->up)
				up_close(c);
			break;
		}
		if (ev == REQP_HEAD) {
			c->head_timer = false;
			c->phase = PH_HEAD;
			handle_request(c);
		} else if (ev == REQP_END) {
			if (c->phase == PH_BODY || c->phase == PH_DISCARD)
				c->phase = PH_HEAD;
		}
	}
	if (c->in_off >= c->in_len) {
		free(c->in);
		c->in = NULL;
		c->in_len = c->in_off = 0;
	}
	if (!c->closing) {
		conn_arm_timer(c);
		if (c->client_eof && !c->finishing && c->phase != PH_WAIT && c->phase != PH_DRAIN) {
			/* The browser is done sending: the runner is told so and
			 * its answer still goes back; with no runner, the
			 * connection ends once our bytes are out. */
			if (c->up && c->up->open && !c->up->eof) {
				uv_shutdown_t *req = malloc(sizeof(*req));
				if (!req || uv_shutdown(req, (uv_stream_t *)&c->up->tcp, conn_free_shutdown) < 0)
					free(req);
			} else if (c->q_client == 0 || c->close_after) {
				conn_finish(c);
			} else {
				c->close_after = true;
			}
		}
		conn_update_reading(c);
	}
}

static void on_client_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct conn *c = s->data;
	if (n == 0) {
		free(buf->base);
		return;
	}
	if (n < 0) {
		free(buf->base);
		if (n != UV_EOF) {
			conn_close(c);
			return;
		}
		c->client_eof = true;
		c->reading = false;
		uv_read_stop(s);
		if (c->phase == PH_RAW) {
			if (!c->up || c->up->eof) {
				conn_finish(c);
				return;
			}
			uv_shutdown_t *req = malloc(sizeof(*req));
			if (!req || uv_shutdown(req, (uv_stream_t *)&c->up->tcp, conn_free_shutdown) < 0) {
				free(req);
				conn_close(c);
			}
			return;
		}
		conn_process(c);
		return;
	}
	if (c->in_off >= c->in_len) {
		free(c->in);
		c->in = buf->base;
		c->in_len = (size_t)n;
		c->in_off = 0;
	} else {
		char *nb = realloc(c->in, c->in_len - c->in_off + (size_t)n);
		if (!nb) {
			free(buf->base);
			conn_close(c);
			return;
		}
		memmove(nb, nb + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off;
		c->in_off = 0;
		c->in = nb;
		memcpy(c->in + c->in_len, buf->base, (size_t)n);
		c->in_len += (size_t)n;
		free(buf->base);
	}
	if (c->phase == PH_RAW)
		;
	else
		conn_arm_timer(c);
	conn_process(c);
}

void conn_on_accept(uv_stream_t *server, int status)
{
	struct listener *l = server->data;
	struct proxy *p = l->p;
	if (status < 0)
		return;
	struct conn *c = calloc(1, sizeof(*c));
	if (!c)
		return;
	uv_tcp_init(&p->loop, &c->client);
	if (uv_accept(server, (uv_stream_t *)&c->client) < 0) {
		c->client.data = c;
		uv_close((uv_handle_t *)&c->client, free_handle_data);
		return;
	}
	struct sockaddr_storage ss;
	int sl = sizeof(ss);
	char addr[64] = "unknown";
	if (uv_tcp_getpeername(&c->client, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET)
			uv_ip4_name((struct sockaddr_in *)&ss, addr, sizeof(addr));
		else if (ss.ss_family == AF_INET6)
			uv_ip6_name((struct sockaddr_in6 *)&ss, addr, sizeof(addr));
	}
	struct addr_count *ac = p->n_conns < p->max_conns ? addr_acquire(p, addr) : NULL;
	if (!ac) {
		log_debug(COMP, "connection from %s refused: too many connections", addr);
		c->client.data = c;
		uv_close((uv_handle_t *)&c->client, free_handle_data);
		return;
	}
	c->p = p;
	c->l = l;
	c->ac = ac;
	c->client.data = c;
	uv_timer_init(&p->loop, &c->timer);
	c->timer.data = c;
	c->handles = 2;
	reqparse_init(&c->rp);
	c->next = p->conns;
	if (p->conns)
		p->conns->prev = c;
	p->conns = c;
	__atomic_add_fetch(&p->n_conns, 1, __ATOMIC_RELAXED);
	uv_tcp_nodelay(&c->client, 1);
	uv_tcp_keepalive(&c->client, 1, 60);
	conn_arm_timer(c);
	conn_update_reading(c);
}
