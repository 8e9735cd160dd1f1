/* The app proxy (proxy.h, docs/apps.md "The proxy").
 *
 * Threads: the loop thread runs every socket; the poller thread long-polls
 * the manager for routes and hands each table to the loop (uv_async); a
 * token's redemption, a blocking HTTP call, runs on libuv's thread pool
 * (uv_queue_work). Only the loop thread touches connections and the table
 * it serves from.
 *
 * A browser connection goes through phases: HEAD (reading a request
 * head), WAIT (the head is complete and waits for the runner's answer
 * line or a redemption; the client is not read), BODY (the request was
 * forwarded, its body follows to the runner as received), DISCARD (the
 * proxy answered the request itself and skips its body), RAW (after an
 * Upgrade: bytes both ways as they are), DRAIN (a request failed its check
 * while the runner still answers earlier ones: the runner's side is shut
 * for writing and the refusal goes out after its last byte). Responses are
 * never parsed: the runner's bytes go to the browser as they come. */
#include "proxy/proxy.h"

#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "common/apiclient.h"
#include "common/log.h"
#include "common/util.h"
#include "proxy/appcookie.h"
#include "proxy/reqparse.h"
#include "proxy/routes.h"

#define COMP "wsproxy"
/* Bytes read at a time from either side (allocated per read, freed once
 * written: an idle connection holds none). 256 KiB rather than 64: fewer
 * reads and writes per byte of a large download (bench/apps-proxy.sh;
 * on a loaded 2-core machine the gain was within the noise). */
#define READ_CHUNK (256 * 1024)
#define HEAD_TIMEOUT_MS 10000
#define IDLE_TIMEOUT_MS 120000
/* A runner that does not accept nor answer its line within this. */
#define UP_ANSWER_TIMEOUT_MS 15000
#define UPLINE_MAX 1024
/* A runner connection refused, or closed before its answer line: tried
 * again after 50 ms, doubling to 1 s, this many times (about 6 s in all).
 * A session is RUNNING once its container started, a moment before its
 * runner listens; in that moment Docker's userland proxy accepts on the
 * published port and then closes, which a browser must not see as a 502
 * (issue 28: `session shell` right after `create --wait` failed so). */
#define UP_RETRIES 9
#define UP_RETRY_FIRST_MS 50
#define UP_RETRY_MAX_MS 1000
#define STATIC_MAX (32 * 1024 * 1024)
#define COOKIE_PREFIX "tessera_app"
#define ROUTES_POLL_S 30

enum phase { PH_HEAD, PH_WAIT, PH_BODY, PH_DISCARD, PH_RAW, PH_DRAIN };

struct listener {
	uv_tcp_t tcp;
	struct proxy *p;
	int port;
	bool bound;              /* else its handle was closed at start */
};

struct conn;

/* One connection to a runner; freed in its close callback. */
struct upstream {
	uv_tcp_t tcp;
	uv_connect_t creq;
	struct conn *c;          /* NULL once the connection let it go */
	char line[UPLINE_MAX + 2];
	size_t line_len;
	bool open;               /* answered OK */
	bool eof;                /* the runner closed its side */
	bool reading;
	bool direct;             /* dialled the container's address */
};

/* Where a connection's passing requests go: the route they were checked
 * against. */
struct binding {
	char user[128];          /* the app cookie's user */
	char session_id[128];
	char target[96];
	char endpoint[300];
	char secret[65];
	struct sockaddr_storage addr;
	socklen_t addr_len;
	char direct[80];         /* the route's direct path, when usable here */
	struct sockaddr_storage direct_addr;
	socklen_t direct_len;
};

struct addr_count {
	char addr[64];
	unsigned n;
};

struct conn {
	struct proxy *p;
	struct listener *l;
	uv_tcp_t client;
	uv_timer_t timer;
	int handles;             /* handles of this conn not yet closed */
	int works;               /* redemptions in flight */
	bool closing;
	struct conn *prev, *next;
	struct addr_count *ac;
	enum phase phase;
	struct reqparse rp;
	char *in;                /* client bytes not yet handled */
	size_t in_len, in_off;
	bool reading;
	bool client_eof;
	bool close_after;        /* finish once what is queued is written */
	bool finishing;
	bool head_timer;
	char route_key[400];     /* port in decimal, or the host */
	bool bound;
	struct binding b;
	struct upstream *up;
	size_t q_client, q_up;   /* bytes queued to each side */
	char *deferred;          /* DRAIN: the answer to send after the runner's */
	size_t deferred_len;
	bool req_upgrade;
	int up_tries;            /* runner connections tried again for this request */
	bool retry_wait;         /* the timer counts down to the next try */
	bool direct_off;         /* this request's direct try failed: published port */
};

/* Direct paths that did not answer (unreachable, timed out): skipped
 * for DIRECT_BAD_MS, so only the first connection pays the wait. */
#define DIRECT_BAD_SLOTS 32
#define DIRECT_BAD_MS 30000
/* SYNs sent to a direct address before giving up on it: 1 retransmit,
 * about 3 s, rather than the kernel's 2 minutes. */
#define DIRECT_SYNCNT 1
struct direct_bad {
	char ep[80];
	uint64_t until;          /* uv_now */
};

struct proxy {
	uv_loop_t loop;
	pthread_t loop_thread, poll_thread;
	bool loop_started, poll_started;
	uv_async_t stop_async, routes_async;
	struct listener *ls;     /* one per port tried; n_ls bound */
	size_t n_tried, n_ls;
	struct conn *conns;
	size_t n_conns;
	struct strmap_lite {
		struct addr_count **v;
		size_t n, cap;
	} addrs;
	struct route_table table;  /* loop thread only */
	/* Handing tables to the loop. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct route_table *pending;
	uint64_t seq_sent, seq_applied;
	atomic_bool stopping;
	size_t peak_queued;
	uint64_t generation;       /* of the table, for proxy_get_stats */
	struct direct_bad dbad[DIRECT_BAD_SLOTS];  /* loop thread only */
	size_t dbad_next;
	/* Config, copied. */
	char *manager, *secret, *domain, *public_host, *ui_dir, *bind;
	int port_lo, port_hi;      /* port mode's range, told to the manager */
	unsigned max_conns, per_addr;
	struct api_client api;
};

/* ---------- small helpers ---------- */

static void html_escape(const char *s, char *out, size_t n)
{
	size_t o = 0;
	for (; *s && o + 7 < n; s++) {
		const char *r = NULL;
		switch (*s) {
		case '<': r = "&lt;"; break;
		case '>': r = "&gt;"; break;
		case '&': r = "&amp;"; break;
		case '"': r = "&quot;"; break;
		case '\'': r = "&#39;"; break;
		default: break;
		}
		if (r) {
			size_t rl = strlen(r);
			memcpy(out + o, r, rl);
			o += rl;
		} else {
			out[o++] = *s;
		}
	}
	out[o] = '\0';
}

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 302: return "Found";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

/* ---------- connection lifetime ---------- */

static void conn_update_reading(struct conn *c);
static void conn_process(struct conn *c);
static void up_close(struct conn *c);

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

static void conn_maybe_free(struct conn *c)
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
static void conn_close(struct conn *c)
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
static void conn_finish(struct conn *c)
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

static void up_update_reading(struct conn *c);
static void up_resume(struct conn *c);

static void free_shutdown(uv_shutdown_t *req, int status)
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
static void conn_write(struct conn *c, bool to_client, char *buf, size_t len)
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

static void conn_write_copy(struct conn *c, bool to_client, const char *data, size_t len)
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

/* A complete response of the proxy's own to the browser. extra: more
 * header lines, each ending in \r\n (may be NULL). */
static void respond_raw(struct conn *c, int status, const char *extra, const char *ctype, const char *body,
			size_t blen, bool close)
{
	size_t cap = 512 + (extra ? strlen(extra) : 0) + blen;
	char *b = malloc(cap);
	if (!b) {
		conn_close(c);
		return;
	}
	int n = snprintf(b, cap,
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n%s%s\r\n",
			 status, reason(status), ctype, blen, extra ? extra : "",
			 close ? "Connection: close\r\n" : "");
	memcpy(b + n, body, blen);
	conn_write(c, true, b, (size_t)n + blen);
	if (close)
		c->close_after = true;
}

/* An HTML page saying what happened. refresh: reloads itself each second. */
static char *page(int status, const char *title, const char *text, bool refresh, size_t *len)
{
	char t[512], x[2600];
	html_escape(title, t, sizeof(t));
	html_escape(text, x, sizeof(x));
	char *b = NULL;
	int n = asprintf(&b,
			 "<!doctype html>\n<html><head><meta charset=\"utf-8\">%s<title>%d %s</title>"
			 "<style>body{font-family:system-ui,sans-serif;max-width:40em;margin:4em auto;padding:0 1em;"
			 "color:#222}p{line-height:1.5}code{background:#eee;padding:0 .2em}</style></head>\n"
			 "<body><h1>%s</h1><p>%s</p>%s</body></html>\n",
			 refresh ? "<meta http-equiv=\"refresh\" content=\"1\">" : "", status, t, t, x,
			 refresh ? "<p><small>This page reloads itself every second.</small></p>" : "");
	if (n < 0)
		return NULL;
	*len = (size_t)n;
	return b;
}

static void respond_page(struct conn *c, int status, const char *extra, const char *title, const char *text,
			 bool refresh, bool close)
{
	size_t len = 0;
	char *b = page(status, title, text, refresh, &len);
	if (!b) {
		conn_close(c);
		return;
	}
	respond_raw(c, status, extra, "text/html; charset=utf-8", b, len, close);
	free(b);
}

/* After the proxy answered a request itself: its body (if any) is
 * skipped, and a request that upgrades or asks to close ends the
 * connection. */
static void answered(struct conn *c)
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
static void refuse(struct conn *c, int status, const char *title, const char *text)
{
	if (c->up && c->up->open && !c->up->eof) {
		size_t len = 0;
		char *body = page(status, title, text, false, &len);
		char *b = NULL;
		int n = body ? asprintf(&b,
					"HTTP/1.1 %d %s\r\nContent-Type: text/html; charset=utf-8\r\n"
					"Content-Length: %zu\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n%s",
					status, reason(status), len, body)
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
		if (!req || uv_shutdown(req, (uv_stream_t *)&c->up->tcp, free_shutdown) < 0) {
			free(req);
			conn_close(c);
		}
		conn_update_reading(c);
		return;
	}
	respond_page(c, status, NULL, title, text, false, c->rp.req.upgrade);
	answered(c);
}

/* ---------- timers ---------- */

static void on_timer(uv_timer_t *t)
{
	struct conn *c = t->data;
	if (c->phase == PH_WAIT && c->up && !c->up->open) {
		up_close(c);
		respond_page(c, 502, NULL, "App unreachable",
			     "The session's runner does not answer: the session may be stopping, or its node is down.",
			     false, true);
		answered(c);
		return;
	}
	if (c->head_timer && c->phase == PH_HEAD && !(c->up && c->q_client)) {
		respond_page(c, 408, NULL, "Request timeout", "The request was not complete within 10 seconds.",
			     false, true);
		if (c->q_client == 0)
			conn_finish(c);
		return;
	}
	conn_close(c);
}

/* RAW: none (TCP keepalive finds dead peers); an unfinished head: 10 s
 * from its first byte; else 120 s since the last byte either way. */
static void arm_timer(struct conn *c)
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

static void up_close(struct conn *c)
{
	struct upstream *u = c->up;
	if (!u)
		return;
	c->up = NULL;
	uv_close((uv_handle_t *)&u->tcp, on_up_closed);
}

static void up_update_reading(struct conn *c)
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

static void alloc_chunk(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	(void)suggested;
	buf->base = malloc(READ_CHUNK);
	buf->len = buf->base ? READ_CHUNK : 0;
}

static void on_up_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
static void up_connect(struct conn *c);

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
		uv_read_start((uv_stream_t *)&u->tcp, alloc_chunk, on_up_read);
	}
}

/* up_update_reading only stops; restarting needs the callbacks. */
static void up_resume(struct conn *c)
{
	if (c->up && c->up->open && !c->up->reading)
		up_start_reading(c);
}

static void forward_head(struct conn *c)
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
	arm_timer(c);
}

static void up_answered(struct conn *c, const char *line)
{
	struct upstream *u = c->up;
	c->up_tries = 0;
	if (!strcmp(line, "OK")) {
		u->open = true;
		forward_head(c);
		up_start_reading(c);
		conn_update_reading(c);
		conn_process(c);
		return;
	}
	up_close(c);
	if (!strncmp(line, "STARTING", 8)) {
		const char *text = line[8] == ' ' ? line + 9 : "the app is starting";
		respond_page(c, 503, "Retry-After: 1\r\n", "Starting...", text, true, c->rp.req.upgrade);
	} else {
		const char *text = !strncmp(line, "ERROR ", 6) ? line + 6 : line;
		char msg[1200];
		snprintf(msg, sizeof(msg), "The app cannot be reached: %s", text);
		respond_page(c, 502, NULL, "App error", msg, false, c->rp.req.upgrade);
	}
	answered(c);
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
			respond_page(c, 502, NULL, "App error",
				     "The session's runner closed the connection without an answer.", false,
				     c->rp.req.upgrade);
			answered(c);
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
			if (!req || uv_shutdown(req, (uv_stream_t *)&c->client, free_shutdown) < 0) {
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
	arm_timer(c);
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
				respond_page(c, 502, NULL, "App error", "The session's runner answered with garbage.", false,
					     c->rp.req.upgrade);
				answered(c);
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

static void on_up_connected(uv_connect_t *req, int status)
{
	struct upstream *u = req->data;
	struct conn *c = u->c;
	if (!c || c->closing || c->up != u)
		return;
	if (status < 0 && u->direct && status != UV_ECANCELED) {
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
		respond_page(c, 502, NULL, "App unreachable",
			     "The session's runner does not answer: the session may be stopping, or its node is down.",
			     false, c->rp.req.upgrade);
		answered(c);
		conn_update_reading(c);
		conn_process(c);
		return;
	}
	uv_tcp_nodelay(&u->tcp, 1);
	uv_tcp_keepalive(&u->tcp, 1, 60);
	char *hello = NULL;
	int n = asprintf(&hello, "TESSERA-APP/1 %s %s\r\n", c->b.secret, c->b.target);
	if (n < 0) {
		conn_close(c);
		return;
	}
	conn_write(c, false, hello, (size_t)n);
	u->reading = true;
	uv_read_start((uv_stream_t *)&u->tcp, alloc_chunk, on_up_read);
}

static void up_connect(struct conn *c)
{
	struct upstream *u = calloc(1, sizeof(*u));
	if (!u) {
		conn_close(c);
		return;
	}
	u->c = c;
	/* The container's address when the route has one usable here: no
	 * userland proxy between (docs/apps.md, "The direct path"). */
	u->direct = c->b.direct_len && !c->direct_off && !direct_is_bad(c->p, c->b.direct);
	const struct sockaddr *to = (const struct sockaddr *)(u->direct ? &c->b.direct_addr : &c->b.addr);
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
	arm_timer(c);
	int rc = uv_tcp_connect(&u->creq, &u->tcp, to, on_up_connected);
	if (rc < 0 && u->direct) {
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
		respond_page(c, 502, NULL, "App unreachable", "The session's runner does not answer.", false,
			     c->rp.req.upgrade);
		answered(c);
	}
}

/* ---------- serving the terminal page ---------- */

static const char *ctype_of(const char *path)
{
	const char *dot = strrchr(path, '.');
	static const char *const map[][2] = {
		{".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
		{".mjs", "text/javascript; charset=utf-8"}, {".css", "text/css; charset=utf-8"},
		{".json", "application/json"}, {".svg", "image/svg+xml"}, {".png", "image/png"},
		{".ico", "image/x-icon"}, {".woff2", "font/woff2"}, {".woff", "font/woff"},
		{".map", "application/json"}, {".txt", "text/plain; charset=utf-8"},
	};
	for (size_t i = 0; dot && i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(dot, map[i][0]))
			return map[i][1];
	return "application/octet-stream";
}

/* Files are small (the page and its bundle) and local: read on the loop. */
static void serve_static(struct conn *c)
{
	const char *t = c->rp.req.target;
	char path[512];
	size_t pl = strcspn(t, "?#");
	if (strcmp(c->rp.req.method, "GET") && strcmp(c->rp.req.method, "HEAD")) {
		respond_page(c, 405, "Allow: GET, HEAD\r\n", "Method not allowed", "The terminal page is read only.",
			     false, false);
		answered(c);
		return;
	}
	if (pl == 0 || pl >= sizeof(path) - 16 || t[0] != '/') {
		respond_page(c, 404, NULL, "Not found", "No such file.", false, false);
		answered(c);
		return;
	}
	memcpy(path, t, pl);
	path[pl] = '\0';
	if (!strcmp(path, "/"))
		strcpy(path, "/terminal.html");
	/* Only plain names: no "..", no hidden files, no escapes. */
	bool ok = true;
	for (const char *s = path; *s; s++)
		if (!(isalnum((unsigned char)*s) || strchr("/._-", *s)) || (s[0] == '/' && s[1] == '.'))
			ok = false;
	char file[PATH_MAX + 600];
	struct stat st;
	int fd = -1;
	if (ok && c->p->ui_dir) {
		snprintf(file, sizeof(file), "%s%s", c->p->ui_dir, path);
		fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	}
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > STATIC_MAX) {
		if (fd >= 0)
			close(fd);
		const char *why = !c->p->ui_dir ? "This proxy has no ui_dir: the terminal page is not installed."
			: !strcmp(path, "/terminal.html") ? "The terminal page (terminal.html) is not in the UI build."
							  : "No such file.";
		respond_page(c, 404, NULL, "Not found", why, false, false);
		answered(c);
		return;
	}
	bool head = !strcmp(c->rp.req.method, "HEAD");
	size_t len = (size_t)st.st_size;
	char *body = malloc(len ? len : 1);
	size_t got = 0;
	while (body && got < len) {
		ssize_t r = read(fd, body + got, len - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (!body || got != len) {
		free(body);
		respond_page(c, 500, NULL, "Error", "The file could not be read.", false, false);
		answered(c);
		return;
	}
	const char *ct = ctype_of(path);
	/* The webserver's policy, with the page's own WebSocket spelled out
	 * (not every browser counts ws: of the same origin as 'self'), and
	 * inline scripts allowed: terminal.html is built self-contained, its
	 * script inlined (docs/apps.md, "The UI"). */
	const char *host = reqparse_header(&c->rp.req, "Host");
	char ws[600] = "";
	if (host && strlen(host) < 256 && strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") ==
					   strlen(host))
		snprintf(ws, sizeof(ws), " ws://%s wss://%s", host, host);
	char extra[1024];
	snprintf(extra, sizeof(extra),
		 "Referrer-Policy: no-referrer\r\nX-Frame-Options: DENY\r\n"
		 "Content-Security-Policy: default-src 'self'; img-src 'self' data:; script-src 'self' 'unsafe-inline'; "
		 "style-src 'self' 'unsafe-inline'; connect-src 'self'%s; frame-ancestors 'none'; base-uri 'none'; form-action 'self'\r\n",
		 ws);
	if (head) {
		char *b = NULL;
		int n = asprintf(&b, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n", ct, len);
		if (n > 0)
			conn_write(c, true, b, (size_t)n);
	} else {
		respond_raw(c, 200, extra, ct, body, len, false);
	}
	free(body);
	answered(c);
}

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

static void cookie_name(struct conn *c, char *out, size_t n)
{
	if (c->p->domain)
		snprintf(out, n, COOKIE_PREFIX);
	else
		snprintf(out, n, COOKIE_PREFIX "_%d", c->l->port);
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
			respond_page(c, 502, NULL, "Cannot reach Tessera", msg, false, false);
		} else {
			char msg[800];
			snprintf(msg, sizeof(msg),
				 "This link cannot be used: %s. Open the app again from Tessera's session list or "
				 "`tessera session app`; each link works once, within a minute.",
				 r->err.msg);
			respond_page(c, 403, NULL, "Link not valid", msg, false, false);
		}
		free(r);
		answered(c);
		conn_update_reading(c);
		conn_process(c);
		return;
	}
	bool same = p->domain ? !strcmp(r->route.host, c->route_key) : (r->route.port == c->l->port);
	if (!same) {
		respond_page(c, 403, NULL, "Wrong address",
			     "This link is for another app's address: open the app again from Tessera's session list.",
			     false, false);
		free(r);
		answered(c);
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
		respond_page(c, 502, NULL, "Error", err.msg, false, false);
	} else {
		cookie_name(c, name, sizeof(name));
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
		respond_page(c, 302, extra, "Opening the app", "Opening the app...", false, false);
		log_info(COMP, "user %s opened %s of session %s on %s", ck.user, ck.target, ck.session_id, ck.route);
	}
	free(r);
	answered(c);
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

/* ---------- a request ---------- */

static bool path_is(const char *target, const char *path)
{
	size_t n = strlen(path);
	return !strncmp(target, path, n) && (target[n] == '\0' || target[n] == '?');
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
			refuse(c, 400, "Bad request", "The request has no valid Host header.");
			return;
		}
	} else {
		if (p->public_host) {
			char name[300];
			routes_host_name(host, name, sizeof(name));
			if (strcasecmp(name, p->public_host)) {
				refuse(c, 400, "Bad request", "This address does not serve Tessera's apps.");
				return;
			}
		}
		snprintf(key, sizeof(key), "%d", c->l->port);
	}
	if (c->route_key[0] && strcmp(c->route_key, key) && c->up) {
		refuse(c, 400, "Bad request", "One connection serves one app.");
		return;
	}
	util_strlcpy(c->route_key, key, sizeof(c->route_key));

	if (path_is(rq->target, "/__tessera/setup")) {
		/* A link opened on a connection that served the app before:
		 * the runner's connection goes, the cookie is renewed. */
		up_close(c);
		struct redeem *r = calloc(1, sizeof(*r));
		if (!r || !setup_token(rq->target, r->token, sizeof(r->token))) {
			free(r);
			refuse(c, 403, "Link not valid",
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
		return;
	}

	/* The cookie of this very route. */
	char name[64], value[APPCOOKIE_MAX];
	cookie_name(c, name, sizeof(name));
	int rc = appcookie_find(reqparse_header(rq, "Cookie"), name, value, sizeof(value));
	if (rc < 0) {
		refuse(c, 403, "Sign-in needed",
		       "No access to this app yet: open the app from Tessera's session list or with "
		       "`tessera session app SESSION APP`.");
		return;
	}
	struct appcookie ck;
	struct terr err = {0};
	rc = appcookie_verify(p->secret, value, key, (int64_t)time(NULL), &ck, &err);
	if (rc == -EKEYEXPIRED) {
		refuse(c, 403, "Access expired",
		       "Your access to this app expired (it lasts 12 hours): open the app again from Tessera's "
		       "session list or `tessera session app`.");
		return;
	}
	if (rc == -EXDEV) {
		refuse(c, 403, "Another app's access",
		       "This browser's access is for another app: open this app from Tessera's session list or "
		       "`tessera session app`.");
		return;
	}
	if (rc < 0) {
		refuse(c, 403, "Access not valid",
		       "The access cookie is not valid: open the app again from Tessera's session list or "
		       "`tessera session app`.");
		return;
	}
	const struct proxy_route *r = p->domain ? routes_by_host(&p->table, key) : routes_by_port(&p->table, c->l->port);
	if (!r || strcmp(r->session_id, ck.session_id) || strcmp(r->target, ck.target)) {
		refuse(c, 403, "Session ended",
		       "The session of this app has ended, or the app was closed: start or open it again in Tessera.");
		return;
	}
	/* Checked on every request against the manager's latest word, so a
	 * disabled account's cookie (12 hours) stops at once. */
	if (!routes_user_allowed(&p->table, r, ck.user)) {
		refuse(c, 403, "Access revoked",
		       "This account may no longer open this app: it was disabled, or the session is not its own. "
		       "Ask an administrator.");
		return;
	}
	/* Passed. */
	bool same = c->bound && !strcmp(c->b.session_id, r->session_id) && !strcmp(c->b.target, r->target) &&
		    !strcmp(c->b.endpoint, r->endpoint) && !strcmp(c->b.user, ck.user);
	if (!same && c->up) {
		/* The route changed under a kept-alive connection. */
		refuse(c, 403, "Session ended", "The app this connection was for is gone: reload the page.");
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
	if (!same)
		c->direct_off = false;
	if (!strcmp(r->target, "app:terminal") && !path_is(rq->target, "/ws")) {
		if (c->up) {
			/* Served by the proxy while the runner still answers an
			 * earlier request: wait for it as a refusal does. */
			refuse(c, 409, "Busy", "Reload the page.");
			return;
		}
		serve_static(c);
		return;
	}
	if (c->up && c->up->open && !c->up->eof) {
		forward_head(c);
		return;
	}
	if (c->up)
		up_close(c);
	c->up_tries = 0;
	up_connect(c);
}

/* ---------- the browser's side ---------- */

static void on_client_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void conn_update_reading(struct conn *c)
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
		uv_read_start((uv_stream_t *)&c->client, alloc_chunk, on_client_read);
	else
		uv_read_stop((uv_stream_t *)&c->client);
}

/* Handles the client bytes held in c->in as far as the phase allows. */
static void conn_process(struct conn *c)
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
			respond_page(c, c->rp.status, NULL, reason(c->rp.status), c->rp.why, false, true);
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
		arm_timer(c);
		if (c->client_eof && !c->finishing && c->phase != PH_WAIT && c->phase != PH_DRAIN) {
			/* The browser is done sending: the runner is told so and
			 * its answer still goes back; with no runner, the
			 * connection ends once our bytes are out. */
			if (c->up && c->up->open && !c->up->eof) {
				uv_shutdown_t *req = malloc(sizeof(*req));
				if (!req || uv_shutdown(req, (uv_stream_t *)&c->up->tcp, free_shutdown) < 0)
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
			if (!req || uv_shutdown(req, (uv_stream_t *)&c->up->tcp, free_shutdown) < 0) {
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
		arm_timer(c);
	conn_process(c);
}

static void on_accept(uv_stream_t *server, int status)
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
	arm_timer(c);
	conn_update_reading(c);
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

static void on_routes(uv_async_t *a)
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
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&p->mu);
	if (!atomic_load(&p->stopping))
		pthread_cond_timedwait(&p->cv, &p->mu, &ts);
	pthread_mutex_unlock(&p->mu);
}

static void *poll_main(void *arg)
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
	    (rc = uv_listen((uv_stream_t *)&l->tcp, 511, on_accept)) < 0) {
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
	pthread_cond_init(&p->cv, NULL);
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
	uv_async_init(&p->loop, &p->routes_async, on_routes);
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
		if (pthread_create(&p->poll_thread, NULL, poll_main, p) == 0)
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
