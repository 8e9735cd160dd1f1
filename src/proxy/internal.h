/* The app proxy's insides, private to src/proxy/'s proxy.c (start, stop,
 * listeners), conn.c (the browser's side and its phases), upstream.c (the
 * runner's side), pages.c (the proxy's own answers: error pages and the
 * terminal page) and manager_poll.c (the route table from the manager and
 * token redemption); docs/architecture.md, "The app proxy".
 *
 * Threads: the loop thread runs every socket; the poller thread long-polls
 * the manager for routes and hands each table to the loop (uv_async); a
 * token's redemption, a blocking HTTP call, runs on libuv's thread pool
 * (uv_queue_work). Only the loop thread touches connections and the table
 * it serves from: every function here but mpoll_main runs on it.
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
#ifndef TESSERA_PROXY_INTERNAL_H
#define TESSERA_PROXY_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <uv.h>

#include "common/apiclient.h"
#include "proxy/proxy.h"
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
	bool app_direct;         /* dialled a port app at it, no runner between */
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
	bool app_direct_off;     /* this request's try of the app's own port failed */
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
/* A port app that did not take a connection at the container's address
 * (it listens on the container's loopback only): the runner's way for
 * APP_DIRECT_OFF_MS, so only the first connection pays the refusal. */
#define APP_DIRECT_SLOTS 64
#define APP_DIRECT_OFF_MS 5000
struct app_direct_off {
	char ep[80];
	int port;
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
	struct app_direct_off aoff[APP_DIRECT_SLOTS];  /* loop thread only */
	size_t aoff_next;
	/* Config, copied. */
	char *manager, *secret, *domain, *public_host, *ui_dir, *bind;
	int port_lo, port_hi;      /* port mode's range, told to the manager */
	unsigned max_conns, per_addr;
	struct api_client api;
};

/* ---------- conn.c: the browser's side ---------- */

void conn_on_accept(uv_stream_t *server, int status);
/* Handles the client bytes held in c->in as far as the phase allows. */
void conn_process(struct conn *c);
void conn_update_reading(struct conn *c);
void conn_arm_timer(struct conn *c);
void conn_maybe_free(struct conn *c);
/* Closes both ends now; queued writes are dropped. */
void conn_close(struct conn *c);
/* Closes once what is queued to the browser is written. */
void conn_finish(struct conn *c);
/* Queues buf (owned, freed once written) to the browser or the runner. */
void conn_write(struct conn *c, bool to_client, char *buf, size_t len);
void conn_write_copy(struct conn *c, bool to_client, const char *data, size_t len);
/* After the proxy answered a request itself: its body (if any) is
 * skipped, and a request that upgrades or asks to close ends the
 * connection. */
void conn_answered(struct conn *c);
/* Refuses the current request: at once when no runner connection is
 * busy; else after the runner's answers to the requests before it
 * (DRAIN). */
void conn_refuse(struct conn *c, int status, const char *title, const char *text);
void conn_cookie_name(struct conn *c, char *out, size_t n);
void conn_alloc_chunk(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void conn_free_shutdown(uv_shutdown_t *req, int status);

/* ---------- upstream.c: the runner's side ---------- */

void up_connect(struct conn *c);
void up_close(struct conn *c);
void up_update_reading(struct conn *c);
/* up_update_reading only stops; restarting needs the callbacks. */
void up_resume(struct conn *c);
void up_forward_head(struct conn *c);

/* ---------- pages.c: the proxy's own answers ---------- */

const char *pages_reason(int status);
/* A complete response of the proxy's own to the browser. extra: more
 * header lines, each ending in \r\n (may be NULL). */
void pages_respond_raw(struct conn *c, int status, const char *extra, const char *ctype, const char *body,
		       size_t blen, bool close);
/* An HTML page saying what happened. refresh: reloads itself each second. */
char *pages_html(int status, const char *title, const char *text, bool refresh, size_t *len);
void pages_respond(struct conn *c, int status, const char *extra, const char *title, const char *text,
		   bool refresh, bool close);
/* The terminal page and its assets from ui_dir. */
void pages_serve_static(struct conn *c);

/* ---------- manager_poll.c: routes and tokens from the manager ---------- */

/* The poller thread's body. */
void *mpoll_main(void *arg);
/* routes_async's callback: applies the pending table. */
void mpoll_on_routes(uv_async_t *a);
/* Queues the redemption of a setup link's token (its answer in
 * redeem_done), or refuses a link without one. */
void mpoll_redeem(struct conn *c);

#endif
