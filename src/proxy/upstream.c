/* The runner's side of the app proxy (internal.h): connecting to a
 * session's runner, its answer line, retries and the direct path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "common/apphello.h"
#include "common/log.h"
#include "common/util.h"
#include "proxy/internal.h"

/* ---------- the runner's side ---------- */

static void on_up_closed(uv_handle_t *h)
{
	struct upstream *u = h->data;
	struct conn *c = u->c;
	free(u);
	if (c) {
		c->handles--;
		conn_maybe_free(c);
	}
}

void up_close(struct conn *c)
{
	struct upstream *u = c->up;
	if (!u)
		return;
	c->up = NULL;
	uv_close((uv_handle_t *)&u->tcp, on_up_closed);
}

void up_update_reading(struct conn *c)
{
	struct upstream *u = c->up;
	if (!u || !u->open || u->eof || c->closing)
		return;
	bool want = c->q_client < PROXY_HIGH_WATER;
	if (want == u->reading)
		return;
	u->reading = want;
	if (!want)
		uv_read_stop((uv_stream_t *)&u->tcp);
}

static void on_up_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void on_retry_timer(uv_timer_t *t)
{
	struct conn *c = t->data;
	c->retry_wait = false;
	if (!c->closing)
		up_connect(c);
}

/* The runner refused or closed before answering: true when another try
 * is scheduled (the request waits for it), false once tries are spent. */
static bool up_retry(struct conn *c, const char *what)
{
	if (c->closing || c->up_tries >= UP_RETRIES)
		return false;
	int delay = UP_RETRY_FIRST_MS << c->up_tries;
	if (delay > UP_RETRY_MAX_MS)
		delay = UP_RETRY_MAX_MS;
	c->up_tries++;
	log_debug(COMP, "runner %s %s: trying again in %d ms (%d of %d)", c->b.endpoint, what, delay, c->up_tries,
		  UP_RETRIES);
	up_close(c);
	c->retry_wait = true;
	uv_timer_start(&c->timer, on_retry_timer, (uint64_t)delay, 0);
	return true;
}

static void up_start_reading(struct conn *c)
{
	struct upstream *u = c->up;
	if (u && !u->reading && !u->eof && c->q_client < PROXY_HIGH_WATER) {
		u->reading = true;
		uv_read_start((uv_stream_t *)&u->tcp, conn_alloc_chunk, on_up_read);
	}
}

/* up_update_reading only stops; restarting needs the callbacks. */
void up_resume(struct conn *c)
{
	if (c->up && c->up->open && !c->up->reading)
		up_start_reading(c);
}

void up_forward_head(struct conn *c)
{
	size_t hl;
	const char *h = reqparse_head_bytes(&c->rp, &hl);
	char *out = malloc(2 * hl + 16);
	if (!out) {
		conn_close(c);
		return;
	}
	size_t ol = reqparse_strip_cookies(h, hl, out);
	conn_write(c, false, out, ol);
	reqparse_release_head(&c->rp);
	c->phase = c->rp.req.upgrade ? PH_RAW : PH_BODY;
	conn_arm_timer(c);
}

static void up_answered(struct conn *c, const char *line)
{
	struct upstream *u = c->up;
	c->up_tries = 0;
	if (!strcmp(line, "OK")) {
		u->open = true;
		if (c->rp.req.connect) {
			/* The tunnel is open (its 200 went out before the app's
			 * first bytes, on_up_read): nothing of the head goes on. */
			reqparse_release_head(&c->rp);
			c->phase = PH_RAW;
			conn_arm_timer(c);
		} else {
			up_forward_head(c);
		}
		up_start_reading(c);
		conn_update_reading(c);
		conn_process(c);
		return;
	}
	up_close(c);
	if (!strncmp(line, "STARTING", 8)) {
		const char *text = line[8] == ' ' ? line + 9 : "the app is starting";
		pages_respond(c, 503, "Retry-After: 1\r\n", "Starting...", text, true, c->rp.req.upgrade);
	} else {
		const char *text = !strncmp(line, "ERROR ", 6) ? line + 6 : line;
		char msg[1200];
		snprintf(msg, sizeof(msg), "The app cannot be reached: %s", text);
		pages_respond(c, 502, NULL, "App error", msg, false, c->rp.req.upgrade);
	}
	conn_answered(c);
	conn_update_reading(c);
	conn_process(c);
}

static void on_up_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct upstream *u = s->data;
	struct conn *c = u->c;
	if (n == 0) {
		free(buf->base);
		return;
	}
	if (!c || c->closing || c->up != u) {
		free(buf->base);
		return;
	}
	if (n < 0) {
		free(buf->base);
		u->eof = true;
		if (!u->open) {
			/* Closed before its answer line. */
			if (up_retry(c, "closed before answering"))
				return;
			up_close(c);
			pages_respond(c, 502, NULL, "App error",
				      "The session's runner closed the connection without an answer.", false,
				      c->rp.req.upgrade);
			conn_answered(c);
			conn_update_reading(c);
			conn_process(c);
			return;
		}
		if (c->phase == PH_RAW) {
			/* Half-close: the browser learns the runner is done
			 * sending and may still send. */
			if (c->client_eof) {
				conn_finish(c);
				return;
			}
			uv_shutdown_t *req = malloc(sizeof(*req));
			if (!req || uv_shutdown(req, (uv_stream_t *)&c->client, conn_free_shutdown) < 0) {
				free(req);
				conn_close(c);
			}
			return;
		}
		if (c->phase == PH_DRAIN && c->deferred) {
			conn_write(c, true, c->deferred, c->deferred_len);
			c->deferred = NULL;
		}
		/* The runner ended an HTTP exchange: the browser's connection
		 * ends with it, once its bytes are out. */
		conn_finish(c);
		return;
	}
	conn_arm_timer(c);
	if (!u->open) {
		/* Collecting the answer line. */
		size_t i = 0;
		for (; i < (size_t)n; i++) {
			char ch = buf->base[i];
			if (ch == '\n')
				break;
			if (u->line_len >= UPLINE_MAX) {
				free(buf->base);
				up_close(c);
				pages_respond(c, 502, NULL, "App error", "The session's runner answered with garbage.", false,
					      c->rp.req.upgrade);
				conn_answered(c);
				conn_update_reading(c);
				conn_process(c);
				return;
			}
			u->line[u->line_len++] = ch;
		}
		if (i == (size_t)n) {
			free(buf->base);
			return;
		}
		if (u->line_len && u->line[u->line_len - 1] == '\r')
			u->line_len--;
		u->line[u->line_len] = '\0';
		char line[UPLINE_MAX + 2];
		memcpy(line, u->line, u->line_len + 1);
		size_t rest = (size_t)n - i - 1;
		bool ok = !strcmp(line, "OK");
		if (ok && c->rp.req.connect) {
			static const char est[] = "HTTP/1.1 200 Connection established\r\n\r\n";
			conn_write_copy(c, true, est, sizeof(est) - 1);
		}
		if (ok && rest)
			conn_write_copy(c, true, buf->base + i + 1, rest);
		free(buf->base);
		up_answered(c, line);
		return;
	}
	conn_write(c, true, buf->base, (size_t)n);
	up_update_reading(c);
}

static bool direct_is_bad(struct proxy *p, const char *ep)
{
	uint64_t now = uv_now(&p->loop);
	for (size_t i = 0; i < DIRECT_BAD_SLOTS; i++)
		if (p->dbad[i].until > now && !strcmp(p->dbad[i].ep, ep))
			return true;
	return false;
}

static void direct_mark_bad(struct proxy *p, const char *ep)
{
	struct direct_bad *d = &p->dbad[p->dbad_next++ % DIRECT_BAD_SLOTS];
	util_strlcpy(d->ep, ep, sizeof(d->ep));
	d->until = uv_now(&p->loop) + DIRECT_BAD_MS;
}

/* ---------- a port app's own port ----------
 * A route to port:N of a session whose container address this proxy can
 * route to first tries N at that address, with no runner between: an app
 * that listens there (on all the container's addresses, as a server for
 * others does) is already reachable at it by everything that reaches the
 * container (its user's other sessions, the node), so the runner's
 * secret check guards nothing more for it, and its bytes skip the
 * runner's second TCP connection. An app on the container's loopback
 * only refuses: the runner's way, as before (docs/apps.md, "The direct
 * path"). The route itself is the manager's, dropped at the session's
 * end, so the address is the session's. */
/* N of a port:N target (the runner's line's own parser), else 0. */
static int target_port(const char *target)
{
	struct apphello h;
	return apphello_parse_target(target, strlen(target), &h, NULL) == 0 && h.is_port ? h.port : 0;
}

static bool app_direct_is_off(struct proxy *p, const char *ep, int port)
{
	uint64_t now = uv_now(&p->loop);
	for (size_t i = 0; i < APP_DIRECT_SLOTS; i++)
		if (p->aoff[i].until > now && p->aoff[i].port == port && !strcmp(p->aoff[i].ep, ep))
			return true;
	return false;
}

static void app_direct_mark_off(struct proxy *p, const char *ep, int port)
{
	struct app_direct_off *d = &p->aoff[p->aoff_next++ % APP_DIRECT_SLOTS];
	util_strlcpy(d->ep, ep, sizeof(d->ep));
	d->port = port;
	d->until = uv_now(&p->loop) + APP_DIRECT_OFF_MS;
}

/* The app took the connection: as the runner's OK. */
static void app_direct_open(struct conn *c)
{
	if (c->rp.req.connect) {
		static const char est[] = "HTTP/1.1 200 Connection established\r\n\r\n";
		conn_write_copy(c, true, est, sizeof(est) - 1);
	}
	up_answered(c, "OK");
}

static void on_up_connected(uv_connect_t *req, int status)
{
	struct upstream *u = req->data;
	struct conn *c = u->c;
	if (!c || c->closing || c->up != u)
		return;
	if (u->app_direct) {
		if (status < 0) {
			log_debug(COMP, "app %s at %s: %s; through the runner", c->b.target, c->b.direct,
				  uv_strerror(status));
			c->app_direct_off = true;
			app_direct_mark_off(c->p, c->b.direct, target_port(c->b.target));
			up_close(c);
			up_connect(c);
			return;
		}
		uv_tcp_nodelay(&u->tcp, 1);
		uv_tcp_keepalive(&u->tcp, 1, 60);
		app_direct_open(c);
		return;
	}
	if (status < 0 && u->direct && status != UV_ECANCELED && c->b.addr_len) {
		/* The container's address did not take the connection: the
		 * published port, at once. Refused means the address answered
		 * (the runner may not listen yet), so only this request falls
		 * back; anything else is remembered for a while. */
		c->direct_off = true;
		if (status != UV_ECONNREFUSED) {
			log_info(COMP, "runner %s: the direct path %s: %s; using the published port", c->b.endpoint,
				 c->b.direct, uv_strerror(status));
			direct_mark_bad(c->p, c->b.direct);
		}
		up_close(c);
		up_connect(c);
		return;
	}
	if (status < 0) {
		log_debug(COMP, "runner %s: %s", c->b.endpoint, uv_strerror(status));
		if (status != UV_ECANCELED && up_retry(c, uv_strerror(status)))
			return;
		up_close(c);
		pages_respond(c, 502, NULL, "App unreachable",
			      "The session's runner does not answer: the session may be stopping, or its node is down.",
			      false, c->rp.req.upgrade);
		conn_answered(c);
		conn_update_reading(c);
		conn_process(c);
		return;
	}
	uv_tcp_nodelay(&u->tcp, 1);
	uv_tcp_keepalive(&u->tcp, 1, 60);
	char *hello = malloc(APPHELLO_LINE_MAX + 1);
	int n = hello ? apphello_format(hello, APPHELLO_LINE_MAX + 1, c->b.secret, c->b.target) : -ENOMEM;
	if (n < 0) {
		free(hello);
		conn_close(c);
		return;
	}
	conn_write(c, false, hello, (size_t)n);
	u->reading = true;
	uv_read_start((uv_stream_t *)&u->tcp, conn_alloc_chunk, on_up_read);
}

void up_connect(struct conn *c)
{
	struct upstream *u = calloc(1, sizeof(*u));
	if (!u) {
		conn_close(c);
		return;
	}
	u->c = c;
	/* The container's address when the route has one usable here: no
	 * userland proxy between (docs/apps.md, "The direct path"); the only
	 * way when the port is not published, whatever happened before. */
	u->direct = c->b.direct_len &&
		    (!c->b.addr_len || (!c->direct_off && !direct_is_bad(c->p, c->b.direct)));
	if (!u->direct && !c->b.addr_len) {
		/* Not published, and this proxy is not on the session's node
		 * (or not in its network namespace). */
		free(u);
		pages_respond(c, 502, NULL, "App unreachable from this proxy",
			      "The session's app port is not published (its node's app_publish is no): only an "
			      "app proxy on the session's node can reach it.",
			      false, c->rp.req.upgrade);
		conn_answered(c);
		return;
	}
	const struct sockaddr *to = (const struct sockaddr *)(u->direct ? &c->b.direct_addr : &c->b.addr);
	int aport = u->direct && !c->app_direct_off ? target_port(c->b.target) : 0;
	struct sockaddr_storage app_addr;
	if (aport && !app_direct_is_off(c->p, c->b.direct, aport)) {
		memcpy(&app_addr, &c->b.direct_addr, sizeof(app_addr));
		if (app_addr.ss_family == AF_INET)
			((struct sockaddr_in *)&app_addr)->sin_port = htons((uint16_t)aport);
		else
			((struct sockaddr_in6 *)&app_addr)->sin6_port = htons((uint16_t)aport);
		to = (const struct sockaddr *)&app_addr;
		u->app_direct = true;
	}
	if (uv_tcp_init_ex(&c->p->loop, &u->tcp, to->sa_family) < 0) {
		free(u);
		conn_close(c);
		return;
	}
	if (u->direct) {
		uv_os_fd_t fd;
		int syn = DIRECT_SYNCNT;
		if (uv_fileno((uv_handle_t *)&u->tcp, &fd) == 0)
			(void)setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &syn, sizeof(syn));
	}
	u->tcp.data = u;
	u->creq.data = u;
	c->up = u;
	c->handles++;
	c->phase = PH_WAIT;
	conn_arm_timer(c);
	int rc = uv_tcp_connect(&u->creq, &u->tcp, to, on_up_connected);
	if (rc < 0 && u->app_direct) {
		c->app_direct_off = true;
		up_close(c);
		up_connect(c);
		return;
	}
	if (rc < 0 && u->direct && c->b.addr_len) {
		/* No route to the container's address from here (an error
		 * connect(2) gives at once): the published port. */
		log_info(COMP, "runner %s: the direct path %s: %s; using the published port", c->b.endpoint,
			 c->b.direct, uv_strerror(rc));
		c->direct_off = true;
		direct_mark_bad(c->p, c->b.direct);
		up_close(c);
		up_connect(c);
		return;
	}
	if (rc < 0) {
		up_close(c);
		pages_respond(c, 502, NULL, "App unreachable", "The session's runner does not answer.", false,
			      c->rp.req.upgrade);
		conn_answered(c);
	}
}
