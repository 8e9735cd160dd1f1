#include "runner/terminal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "common/ws.h"
#include "runner/apps.h"
#include "runner/log.h"
#include "runner/proto.h"
#include "runner/relay.h"

#define TERM_READ_CHUNK (16 * 1024)
#define TERM_IN_BUF (64 * 1024)
#define TERM_FRAME_MAX (64 * 1024)               /* a client frame's payload */
#define TERM_RBUF (TERM_FRAME_MAX + WS_MAX_HEADER)
#define TERM_OBUF (256 * 1024)
#define TERM_KILL_AFTER_MS 5000
#define TERM_CONNS_PER_SHELL 8
/* Output room kept free of the shell's output: a close frame always fits. */
#define TERM_RESERVE 256
#define TERM_STALL_MS 30000

struct term;

enum tconn_stage { TC_HEAD, TC_WS, TC_CLOSING };
enum tconn_msg { TM_NONE, TM_INPUT, TM_IGNORE };

struct tconn {
	struct rl_watch w;
	enum tconn_stage stage;
	char rbuf[TERM_RBUF];
	size_t rlen;
	char *obuf;
	size_t ooff, olen;
	struct term *t;
	enum tconn_msg msg;      /* what continuation frames of the message are */
};

struct term {
	char id[PROTO_TERM_ID_MAX + 1];
	bool ephemeral;          /* term=new */
	pid_t pid;               /* the shell; 0 once reaped */
	int status;              /* its exit status once reaped */
	struct rl_watch w;       /* the PTY master */
	struct rl_watch timer;   /* SIGKILL after a hang-up */
	bool hung_up;
	char ring[TERM_RING];    /* the last output, circular from ring_start */
	size_t ring_start, ring_len;
	char in[TERM_IN_BUF];    /* input not yet taken by the PTY */
	size_t in_len;
	struct tconn *conns[TERM_CONNS_PER_SHELL];
	int nconns;
	struct term *next;
};

static struct rl_loop *term_loop;
static struct term *terms;
static int term_nshells, term_nconns;

void term_init(struct rl_loop *l)
{
	term_loop = l;
}

/* ---- connections ------------------------------------------------------- */

static size_t tconn_room(const struct tconn *c)
{
	return TERM_OBUF - c->olen;
}

static void tconn_queue(struct tconn *c, const void *data, size_t n)
{
	if (n > tconn_room(c))
		return;   /* callers check the room first; never reached */
	if (c->ooff + c->olen + n > TERM_OBUF) {
		memmove(c->obuf, c->obuf + c->ooff, c->olen);
		c->ooff = 0;
	}
	memcpy(c->obuf + c->ooff + c->olen, data, n);
	c->olen += n;
}

static void tconn_frame(struct tconn *c, enum ws_opcode op, const void *data, size_t n)
{
	uint8_t h[WS_MAX_HEADER];
	size_t hl = ws_write_header(h, true, op, n, NULL);
	if (hl + n > tconn_room(c))
		return;
	tconn_queue(c, h, hl);
	tconn_queue(c, data, n);
}

static void term_detach(struct term *t, struct tconn *c);
static void tconn_frames(struct tconn *c);
static void term_wishes(struct term *t);

static void tconn_free(struct tconn *c, bool linger)
{
	if (c->t)
		term_detach(c->t, c);
	rl_del(term_loop, &c->w);
	if (linger)
		relay_linger(term_loop, c->w.fd);
	else
		close(c->w.fd);
	free(c->obuf);
	free(c);
	term_nconns--;
}

/* A close frame (code, reason), then the connection ends once it is out. */
static void tconn_close(struct tconn *c, unsigned code, const char *reason)
{
	if (c->stage == TC_WS) {
		uint8_t p[WS_CONTROL_MAX];
		size_t rl = strlen(reason);
		if (rl > WS_CONTROL_MAX - 2)
			rl = WS_CONTROL_MAX - 2;
		p[0] = (uint8_t)(code >> 8);
		p[1] = (uint8_t)code;
		memcpy(p + 2, reason, rl);
		tconn_frame(c, WS_OP_CLOSE, p, rl + 2);
	}
	c->stage = TC_CLOSING;
	c->w.deadline = rl_now_ms() + RELAY_LINGER_MS;
	if (c->t)
		term_detach(c->t, c);
}

static void tconn_wishes(struct tconn *c)
{
	short ev = 0;
	if (c->olen)
		ev |= POLLOUT;
	if (c->stage != TC_CLOSING && c->rlen < sizeof(c->rbuf) &&
	    (!c->t || c->t->in_len < TERM_IN_BUF))
		ev |= POLLIN;
	c->w.events = ev;
}

static void tconn_http(struct tconn *c, const char *status, const char *body)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf),
			 "HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
			 status, strlen(body), body);
	tconn_queue(c, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
	c->stage = TC_CLOSING;
	c->w.deadline = rl_now_ms() + RELAY_LINGER_MS;
}

/* ---- shells ------------------------------------------------------------ */

static struct term *term_find(const char *id)
{
	for (struct term *t = terms; t; t = t->next)
		if (!t->ephemeral && !strcmp(t->id, id))
			return t;
	return NULL;
}

static void term_resize(struct term *t, int cols, int rows)
{
	if (cols < 1 || rows < 1 || t->w.fd < 0)
		return;
	struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
	ioctl(t->w.fd, TIOCSWINSZ, &ws);
}

static void term_hangup(struct term *t)
{
	if (t->hung_up || t->pid <= 0)
		return;
	t->hung_up = true;
	kill(-t->pid, SIGHUP);
	kill(-t->pid, SIGCONT);
	t->timer.deadline = rl_now_ms() + TERM_KILL_AFTER_MS;
	rl_add(term_loop, &t->timer);
}

/* Forgets a shell: its connections get `exit N` (when reaped) and end. */
static void term_free(struct term *t)
{
	char reason[32];
	snprintf(reason, sizeof(reason), "exit %d", t->status);
	while (t->nconns) {
		struct tconn *c = t->conns[0];
		tconn_close(c, 1000, reason);   /* detaches */
		tconn_wishes(c);
	}
	if (t->pid > 0)
		kill(-t->pid, SIGKILL);
	rl_del(term_loop, &t->w);
	rl_del(term_loop, &t->timer);
	if (t->w.fd >= 0)
		close(t->w.fd);
	for (struct term **p = &terms; *p; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			break;
		}
	free(t);
	term_nshells--;
}

static void term_detach(struct term *t, struct tconn *c)
{
	for (int i = 0; i < t->nconns; i++)
		if (t->conns[i] == c) {
			t->conns[i] = t->conns[--t->nconns];
			break;
		}
	c->t = NULL;
	if (t->ephemeral && t->nconns == 0)
		term_hangup(t);
	term_wishes(t);
}

static void ring_add(struct term *t, const char *data, size_t n)
{
	if (n >= TERM_RING) {
		data += n - TERM_RING;
		n = TERM_RING;
	}
	for (size_t i = 0; i < n;) {
		size_t end = (t->ring_start + t->ring_len) % TERM_RING;
		size_t chunk = TERM_RING - end < n - i ? TERM_RING - end : n - i;
		memcpy(t->ring + end, data + i, chunk);
		i += chunk;
		t->ring_len += chunk;
		if (t->ring_len > TERM_RING) {
			t->ring_start = (t->ring_start + t->ring_len - TERM_RING) % TERM_RING;
			t->ring_len = TERM_RING;
		}
	}
}

/* Reads the PTY only while every connection has room for what a read
 * may bring: the slowest connection paces the shell. */
static void term_wishes(struct term *t)
{
	short ev = 0;
	bool room = true;
	int64_t now = rl_now_ms();
	for (int i = 0; i < t->nconns; i++) {
		struct tconn *c = t->conns[i];
		bool full = tconn_room(c) < TERM_READ_CHUNK + WS_MAX_HEADER + TERM_RESERVE;
		room &= !full;
		/* A connection that takes nothing for TERM_STALL_MS (a peer gone
		 * without a word) would hold the shell for every other one. */
		if (!full)
			c->w.deadline = 0;
		else if (!c->w.deadline)
			c->w.deadline = now + TERM_STALL_MS;
	}
	if (room)
		ev |= POLLIN;
	if (t->in_len)
		ev |= POLLOUT;
	t->w.events = t->w.fd >= 0 ? ev : 0;
	for (int i = 0; i < t->nconns; i++)
		tconn_wishes(t->conns[i]);
}

/* Reads what the PTY has. Returns false when it has hung up (EIO: every
 * holder of the terminal's other side is gone). */
static bool term_read(struct term *t)
{
	char buf[TERM_READ_CHUNK];
	for (;;) {
		for (int i = 0; i < t->nconns; i++)
			if (tconn_room(t->conns[i]) < sizeof(buf) + WS_MAX_HEADER + TERM_RESERVE)
				return true;
		ssize_t n = read(t->w.fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0)
			return false;
		ring_add(t, buf, (size_t)n);
		for (int i = 0; i < t->nconns; i++)
			tconn_frame(t->conns[i], WS_OP_BINARY, buf, (size_t)n);
	}
}

static void term_write(struct term *t)
{
	while (t->in_len) {
		ssize_t w = write(t->w.fd, t->in, t->in_len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		memmove(t->in, t->in + w, t->in_len - (size_t)w);
		t->in_len -= (size_t)w;
	}
}

static void term_pty_cb(struct rl_watch *w, short revents)
{
	struct term *t = w->data;
	if (revents & POLLOUT) {
		term_write(t);
		/* Frames that waited for room in the shell's input. */
		struct tconn *cs[TERM_CONNS_PER_SHELL];
		int n = t->nconns;
		memcpy(cs, t->conns, sizeof(cs[0]) * (size_t)n);
		for (int i = 0; i < n; i++)
			if (cs[i]->rlen && cs[i]->stage == TC_WS) {
				tconn_frames(cs[i]);
				tconn_wishes(cs[i]);
			}
	}
	if (revents & (POLLIN | POLLHUP | POLLERR)) {
		if (!term_read(t)) {
			/* The shell and all it started closed the terminal. Ended
			 * once reaped; until then nothing more to read. */
			if (t->pid == 0) {
				term_free(t);
				return;
			}
			rl_del(term_loop, w);
		}
	}
	term_wishes(t);
}

static void term_timer_cb(struct rl_watch *w, short revents)
{
	(void)revents;
	struct term *t = w->data;
	rl_del(term_loop, w);
	if (t->pid > 0)
		kill(-t->pid, SIGKILL);
}

bool term_child_exited(pid_t pid, int status)
{
	for (struct term *t = terms; t; t = t->next) {
		if (t->pid != pid || pid <= 0)
			continue;
		t->status = WIFEXITED(status) ? WEXITSTATUS(status)
			  : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		/* What it left on the terminal is hung up, as a kernel does for
		 * a session leader's exit; then its last output is passed on. */
		kill(-pid, SIGHUP);
		t->pid = 0;
		if (t->w.slot >= 0)
			term_read(t);
		term_free(t);
		return true;
	}
	return false;
}

static struct term *term_spawn(const char *id, bool ephemeral, int cols, int rows, struct terr *err)
{
	if (term_nshells >= TERM_MAX_SHELLS) {
		terr_set(err, EMFILE, "this session has %d terminals open already", TERM_MAX_SHELLS);
		return NULL;
	}
	struct term *t = calloc(1, sizeof(*t));
	if (!t) {
		terr_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	char name[128];
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, name, sizeof(name)) != 0) {
		terr_set(err, errno, "cannot open a pseudo-terminal: %s", strerror(errno));
		if (m >= 0)
			close(m);
		free(t);
		return NULL;
	}
	struct winsize ws = { .ws_row = (unsigned short)(rows > 0 ? rows : 24),
			      .ws_col = (unsigned short)(cols > 0 ? cols : 80) };
	ioctl(m, TIOCSWINSZ, &ws);
	const char *shell = access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/bin/sh";
	pid_t pid = fork();
	if (pid == 0) {
		/* A session of its own with the PTY as its controlling terminal:
		 * job control and ^C work, and a hang-up reaches it all. */
		setsid();
		int s = open(name, O_RDWR);
		if (s < 0)
			_exit(127);
		ioctl(s, TIOCSCTTY, 0);
		dup2(s, STDIN_FILENO);
		dup2(s, STDOUT_FILENO);
		dup2(s, STDERR_FILENO);
		if (s > STDERR_FILENO)
			close(s);
		sigprocmask(SIG_SETMASK, apps_child_mask(), NULL);
		if (chdir(APPS_HOME) < 0 && chdir("/") < 0)
			_exit(127);
		setenv("TERM", "xterm-256color", 1);
		if (!getenv("HOME"))
			setenv("HOME", APPS_HOME, 1);
		char *argv[] = {(char *)shell, (char *)"-l", NULL};
		execv(shell, argv);
		dprintf(STDERR_FILENO, "cannot run %s: %s\r\n", shell, strerror(errno));
		_exit(127);
	}
	if (pid < 0) {
		terr_set(err, errno, "cannot start a shell: %s", strerror(errno));
		close(m);
		free(t);
		return NULL;
	}
	fcntl(m, F_SETFL, O_NONBLOCK);
	snprintf(t->id, sizeof(t->id), "%s", id);
	t->ephemeral = ephemeral;
	t->pid = pid;
	rl_init(&t->w, m, term_pty_cb, t);
	rl_init(&t->timer, -1, term_timer_cb, t);
	t->next = terms;
	terms = t;
	term_nshells++;
	if (rl_add(term_loop, &t->w) < 0) {
		t->status = 1;
		term_free(t);   /* kills the shell; reaped as any orphan */
		terr_set(err, ENOSPC, "the runner has too many connections");
		return NULL;
	}
	runner_log("tessera-runner: terminal %s: started %s (pid %d)", ephemeral ? "(own)" : id, shell,
		   (int)pid);
	return t;
}

/* ---- the WebSocket ----------------------------------------------------- */

static void tconn_input(struct tconn *c, const uint8_t *p, size_t n)
{
	struct term *t = c->t;
	if (!t || n > TERM_IN_BUF - t->in_len)
		return;   /* checked before the frame was taken */
	memcpy(t->in + t->in_len, p, n);
	t->in_len += n;
	term_write(t);
}

/* Handles one whole frame. Returns false when the connection closes. */
static bool tconn_on_frame(struct tconn *c, const struct ws_frame *f, uint8_t *p)
{
	size_t n = (size_t)f->len;
	switch (f->opcode) {
	case WS_OP_TEXT:
		tconn_input(c, p, n);
		c->msg = f->fin ? TM_NONE : TM_INPUT;
		return true;
	case WS_OP_BINARY:
		if (n >= 1 && p[0] == 0x01) {
			if (n >= 5 && c->t)
				term_resize(c->t, (p[1] << 8) | p[2], (p[3] << 8) | p[4]);
			c->msg = f->fin ? TM_NONE : TM_IGNORE;
			return true;
		}
		if (n >= 1 && p[0] == 0x00)
			tconn_input(c, p + 1, n - 1);
		else
			tconn_input(c, p, n);
		c->msg = f->fin ? TM_NONE : TM_INPUT;
		return true;
	case WS_OP_CONT:
		if (c->msg == TM_INPUT)
			tconn_input(c, p, n);
		if (f->fin)
			c->msg = TM_NONE;
		return true;
	case WS_OP_PING:
		tconn_frame(c, WS_OP_PONG, p, n);
		return true;
	case WS_OP_PONG:
		return true;
	case WS_OP_CLOSE: {
		/* The peer's code echoed, as RFC 6455 5.5.1 asks. */
		unsigned code = n >= 2 ? (unsigned)((p[0] << 8) | p[1]) : 1000;
		/* Codes no endpoint may send (RFC 6455 7.4) are answered 1000. */
		if (code < 1000 || code == 1005 || code == 1006 || code == 1015 || code >= 5000)
			code = 1000;
		tconn_close(c, code, "");
		return false;
	}
	}
	return true;
}

/* Takes the whole frames in rbuf, as far as the shell's input has room. */
static void tconn_frames(struct tconn *c)
{
	size_t off = 0;
	while (c->stage == TC_WS && off < c->rlen) {
		struct ws_frame f;
		struct terr err = {0};
		int rc = ws_parse_header((uint8_t *)c->rbuf + off, c->rlen - off, true, TERM_FRAME_MAX, &f, &err);
		if (rc < 0) {
			tconn_close(c, rc == -EMSGSIZE ? 1009 : 1002, err.msg);
			break;
		}
		if (rc == 0 || c->rlen - off < f.header_len + f.len)
			break;
		bool input = f.opcode == WS_OP_TEXT || f.opcode == WS_OP_BINARY || f.opcode == WS_OP_CONT;
		if (input && c->t && f.len > TERM_IN_BUF - c->t->in_len)
			break;   /* waits for the shell to take its input */
		if (!input && tconn_room(c) < f.len + WS_MAX_HEADER + 2)
			break;   /* a pong or close needs room out */
		uint8_t *p = (uint8_t *)c->rbuf + off + f.header_len;
		ws_mask(p, (size_t)f.len, f.mask, 0);
		off += f.header_len + (size_t)f.len;
		if (!tconn_on_frame(c, &f, p))
			break;
	}
	memmove(c->rbuf, c->rbuf + off, c->rlen - off);
	c->rlen -= off;
}

/* The request head is whole: answer it, and attach to a shell. */
static void tconn_upgrade(struct tconn *c, size_t used)
{
	struct proto_http_req req;
	struct proto_term_query q;
	struct terr err = {0};
	char accept[WS_ACCEPT_LEN + 1];
	if (proto_parse_http_head(c->rbuf, used, &req, &err) < 0) {
		tconn_http(c, "400 Bad Request", "not an HTTP request\n");
		return;
	}
	if (strcmp(req.path, "/ws") != 0) {
		tconn_http(c, "404 Not Found", "the terminal is served on /ws\n");
		return;
	}
	if (strcmp(req.method, "GET") != 0 || !req.upgrade_websocket || !req.connection_upgrade ||
	    ws_accept_key(req.ws_key, accept, &err) < 0) {
		tconn_http(c, "400 Bad Request", "/ws takes a WebSocket upgrade (GET, Upgrade: websocket, "
			   "a Sec-WebSocket-Key)\n");
		return;
	}
	if (strcmp(req.ws_version, "13") != 0) {
		static const char r426[] = "HTTP/1.1 426 Upgrade Required\r\nSec-WebSocket-Version: 13\r\n"
					   "Content-Length: 0\r\nConnection: close\r\n\r\n";
		tconn_queue(c, r426, sizeof(r426) - 1);
		c->stage = TC_CLOSING;
		return;
	}
	if (proto_parse_term_query(req.query, &q, &err) < 0) {
		char body[600];
		snprintf(body, sizeof(body), "%s\n", err.msg);
		tconn_http(c, "400 Bad Request", body);
		return;
	}
	bool own = !strcmp(q.term, "new");
	struct term *t = own ? NULL : term_find(q.term);
	if (t && t->nconns >= TERM_CONNS_PER_SHELL) {
		tconn_http(c, "503 Service Unavailable", "this terminal has too many connections\n");
		return;
	}
	bool fresh = !t;
	if (!t && !(t = term_spawn(q.term, own, q.cols, q.rows, &err))) {
		char body[600];
		snprintf(body, sizeof(body), "%s\n", err.msg);
		tconn_http(c, "503 Service Unavailable", body);
		return;
	}
	char resp[256];
	int n = snprintf(resp, sizeof(resp),
			 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			 "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", accept);
	tconn_queue(c, resp, (size_t)n);
	c->stage = TC_WS;
	memmove(c->rbuf, c->rbuf + used, c->rlen - used);
	c->rlen -= used;
	c->w.deadline = 0;
	c->t = t;
	t->conns[t->nconns++] = c;
	if (!fresh) {
		/* What the shell wrote before, in order, then what comes. */
		char chunk[TERM_READ_CHUNK];
		for (size_t done = 0; done < t->ring_len;) {
			size_t k = t->ring_len - done < sizeof(chunk) ? t->ring_len - done : sizeof(chunk);
			for (size_t i = 0; i < k; i++)
				chunk[i] = t->ring[(t->ring_start + done + i) % TERM_RING];
			tconn_frame(c, WS_OP_BINARY, chunk, k);
			done += k;
		}
		if (q.cols && q.rows)
			term_resize(t, q.cols, q.rows);
	}
}

/* What the bytes read so far call for; then the connection's wishes. */
static void tconn_step(struct tconn *c)
{
	if (c->stage == TC_HEAD) {
		size_t used;
		int rc = proto_find_head(c->rbuf, c->rlen, &used);
		if (rc < 0)
			tconn_http(c, "431 Request Header Fields Too Large", "the request head is too long\n");
		else if (rc > 0)
			tconn_upgrade(c, used);
	}
	if (c->stage == TC_WS)
		tconn_frames(c);
	if (c->stage == TC_CLOSING && !c->olen) {
		tconn_free(c, true);
		return;
	}
	if (c->t)
		term_wishes(c->t);
	else
		tconn_wishes(c);
}

static void tconn_cb(struct rl_watch *w, short revents)
{
	struct tconn *c = w->data;
	if (!revents) {
		/* No whole request in time, a close that could not go out, or
		 * output not taken for TERM_STALL_MS. */
		if (c->stage == TC_WS)
			runner_log("tessera-runner: terminal %s: dropping a connection that took no output "
				   "for %d s", c->t ? c->t->id : "?", TERM_STALL_MS / 1000);
		tconn_free(c, false);   /* the shell reads again once detached */
		return;
	}
	if (revents & POLLOUT) {
		while (c->olen) {
			ssize_t n = send(w->fd, c->obuf + c->ooff, c->olen, MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno == EAGAIN)
				break;
			if (n <= 0) {
				tconn_free(c, false);
				return;
			}
			c->ooff += (size_t)n;
			c->olen -= (size_t)n;
		}
		if (!c->olen)
			c->ooff = 0;
	}
	if ((revents & (POLLIN | POLLHUP | POLLERR)) && c->stage != TC_CLOSING) {
		ssize_t n = read(w->fd, c->rbuf + c->rlen, sizeof(c->rbuf) - c->rlen);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			/* nothing yet */
		} else if (n <= 0) {
			tconn_free(c, false);
			return;
		} else {
			c->rlen += (size_t)n;
		}
	} else if ((revents & (POLLHUP | POLLERR)) && !(revents & POLLOUT)) {
		tconn_free(c, false);   /* closing, and the peer is gone */
		return;
	}
	tconn_step(c);
}

void term_accept(int fd, const char *early, size_t n, int64_t head_deadline)
{
	struct tconn *c = term_nconns < TERM_MAX_CONNS ? calloc(1, sizeof(*c)) : NULL;
	char *obuf = c ? malloc(TERM_OBUF) : NULL;
	if (!c || !obuf || n > sizeof(c->rbuf)) {
		runner_log("tessera-runner: terminal: refused a connection (%d open)", term_nconns);
		free(c);
		free(obuf);
		close(fd);
		return;
	}
	c->obuf = obuf;
	memcpy(c->rbuf, early, n);
	c->rlen = n;
	rl_init(&c->w, fd, tconn_cb, c);
	c->w.deadline = head_deadline;
	term_nconns++;
	if (rl_add(term_loop, &c->w) < 0) {
		tconn_free(c, false);
		return;
	}
	/* The head may be here already. */
	tconn_step(c);
}

void term_stop(void)
{
	for (struct term *t = terms; t; t = t->next)
		term_hangup(t);
}
