/* WebSocket client connection and the proxy's setup GET (wsconn.h). */
#include "common/wsconn.h"

#include <ctype.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* What an error page's body is read up to, to say why in one line. */
#define WSCONN_MAX_BODY 16384

/* ---- URLs ---- */

static bool wsconn_clean(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			return false;
	return true;
}

int wsconn_parse_url(const char *url, struct wsconn_url *u, struct terr *err)
{
	memset(u, 0, sizeof(*u));
	if (strncasecmp(url, "http://", 7) != 0)
		return terr_set(err, EINVAL, "the app URL '%.200s' is not an http:// URL", url);
	if (!wsconn_clean(url))
		return terr_set(err, EINVAL, "the app URL has blanks or control characters in it");
	const char *auth = url + 7;
	size_t alen = strcspn(auth, "/?#");
	if (!alen || alen >= sizeof(u->authority))
		return terr_set(err, EINVAL, "the app URL '%.200s' has no usable host", url);
	memcpy(u->authority, auth, alen);
	if (memchr(u->authority, '@', alen))
		return terr_set(err, EINVAL, "the app URL must not carry a user name");
	const char *port = NULL;
	size_t hlen;
	if (u->authority[0] == '[') {
		const char *close = strchr(u->authority, ']');
		if (!close || close == u->authority + 1)
			return terr_set(err, EINVAL, "the app URL's IPv6 address is not closed by ']'");
		hlen = (size_t)(close - u->authority - 1);
		if (hlen >= sizeof(u->host))
			return terr_set(err, EINVAL, "the app URL's host is too long");
		memcpy(u->host, u->authority + 1, hlen);
		if (close[1] == ':')
			port = close + 2;
		else if (close[1])
			return terr_set(err, EINVAL, "the app URL has something after its IPv6 address");
	} else {
		const char *colon = strchr(u->authority, ':');
		hlen = colon ? (size_t)(colon - u->authority) : alen;
		if (!hlen)
			return terr_set(err, EINVAL, "the app URL has no host");
		if (hlen >= sizeof(u->host))
			return terr_set(err, EINVAL, "the app URL's host is too long");
		memcpy(u->host, u->authority, hlen);
		if (colon)
			port = colon + 1;
	}
	if (port) {
		char *end;
		long p = strtol(port, &end, 10);
		if (!isdigit((unsigned char)*port) || *end || p < 1 || p > 65535)
			return terr_set(err, EINVAL, "the app URL's port '%s' is not a number from 1 to 65535", port);
		snprintf(u->port, sizeof(u->port), "%ld", p);
	} else {
		strcpy(u->port, "80");
	}
	const char *rest = auth + alen;
	size_t rlen = strcspn(rest, "#");  /* a fragment never goes to the server */
	if (rlen + 2 > sizeof(u->path))
		return terr_set(err, EINVAL, "the app URL is too long");
	if (!rlen || rest[0] != '/') {
		u->path[0] = '/';
		memcpy(u->path + 1, rest, rlen);
	} else {
		memcpy(u->path, rest, rlen);
	}
	return 0;
}

/* ---- response heads ---- */

size_t wsconn_head_len(const char *buf, size_t n)
{
	for (size_t i = 3; i < n; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
			return i + 1;
	return 0;
}

int wsconn_head_status(const char *head, size_t len, struct terr *err)
{
	/* "HTTP/1.x SSS" */
	if (len < 12 || strncmp(head, "HTTP/1.", 7) != 0 || head[8] != ' ' || !isdigit((unsigned char)head[9]) ||
	    !isdigit((unsigned char)head[10]) || !isdigit((unsigned char)head[11]) ||
	    (len > 12 && head[12] != ' ' && head[12] != '\r'))
		return terr_set(err, EPROTO, "the server did not answer with HTTP");
	return (head[9] - '0') * 100 + (head[10] - '0') * 10 + (head[11] - '0');
}

int wsconn_head_header(const char *head, size_t len, const char *name, unsigned index, char *out,
		       size_t n)
{
	size_t nlen = strlen(name);
	const char *p = memchr(head, '\n', len), *end = head + len;
	while (p && p + 1 < end) {
		const char *line = p + 1;
		const char *eol = memchr(line, '\n', (size_t)(end - line));
		if (!eol)
			eol = end;
		if ((size_t)(eol - line) > nlen && !strncasecmp(line, name, nlen) && line[nlen] == ':') {
			if (index-- == 0) {
				const char *v = line + nlen + 1, *ve = eol;
				while (v < ve && (*v == ' ' || *v == '\t'))
					v++;
				while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
					ve--;
				size_t vlen = (size_t)(ve - v);
				if (n) {
					size_t k = vlen < n - 1 ? vlen : n - 1;
					memcpy(out, v, k);
					out[k] = '\0';
				}
				return (int)vlen;
			}
		}
		p = eol < end ? eol : NULL;
	}
	if (n)
		out[0] = '\0';
	return -ENOENT;
}

int wsconn_setup_cookie(const char *head, size_t len, char **cookie, struct terr *err)
{
	char v[4096];
	*cookie = NULL;
	for (unsigned i = 0;; i++) {
		int vlen = wsconn_head_header(head, len, "Set-Cookie", i, v, sizeof(v));
		if (vlen < 0)
			break;
		if ((size_t)vlen >= sizeof(v) || strncmp(v, "tessera_app", 11) != 0)
			continue;
		size_t pair = strcspn(v, ";");
		while (pair && (v[pair - 1] == ' ' || v[pair - 1] == '\t'))
			pair--;
		const char *eq = memchr(v, '=', pair);
		if (!eq || eq == v + pair - 1)
			continue;
		/* Sent back as is in a Cookie header: no blanks or control
		 * bytes (RFC 6265 4.1.1 allows none). */
		size_t k = 0;
		while (k < pair && (unsigned char)v[k] > ' ' && v[k] != 0x7f)
			k++;
		if (k < pair)
			continue;
		*cookie = strndup(v, pair);
		if (!*cookie)
			return terr_set(err, ENOMEM, "out of memory");
		return 0;
	}
	return terr_set(err, ENOENT, "the proxy's answer set no app cookie");
}

static const char *wsconn_find_ci(const char *s, const char *end, const char *needle)
{
	size_t n = strlen(needle);
	for (; s + n <= end; s++)
		if (!strncasecmp(s, needle, n))
			return s;
	return NULL;
}

void wsconn_page_text(const char *body, size_t len, char *out, size_t n)
{
	if (!n)
		return;
	const char *p = body, *end = body + len;
	/* The title repeats what the body says; skip the head. */
	const char *b = wsconn_find_ci(p, end, "<body");
	if (b)
		p = b;
	size_t o = 0;
	bool blank = true, cut = false;
	while (p < end) {
		char ch = *p;
		if (ch == '<') {
			bool skip_all = !strncasecmp(p, "<script", 7) || !strncasecmp(p, "<style", 6);
			const char *gt = memchr(p, '>', (size_t)(end - p));
			if (!gt)
				break;
			if (skip_all) {
				const char *close = wsconn_find_ci(gt, end, "</");
				gt = close ? memchr(close, '>', (size_t)(end - close)) : NULL;
				if (!gt)
					break;
			}
			p = gt + 1;
			ch = ' ';
		} else if (ch == '&') {
			static const struct { const char *name; char ch; } ents[] = {
				{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&#39;", '\''},
				{"&apos;", '\''}, {"&nbsp;", ' '},
			};
			size_t k;
			for (k = 0; k < sizeof(ents) / sizeof(ents[0]); k++) {
				size_t el = strlen(ents[k].name);
				if ((size_t)(end - p) >= el && !strncmp(p, ents[k].name, el)) {
					ch = ents[k].ch;
					p += el;
					break;
				}
			}
			if (k == sizeof(ents) / sizeof(ents[0]))
				p++;
		} else {
			p++;
		}
		if ((unsigned char)ch < ' ' || ch == 0x7f)
			ch = ' ';
		if (ch == ' ') {
			if (blank)
				continue;
			blank = true;
		} else {
			blank = false;
		}
		if (o + 1 >= n) {
			cut = true;
			break;
		}
		out[o++] = ch;
	}
	while (o && out[o - 1] == ' ')
		o--;
	if (cut && n > 4) {
		if (o > n - 4)
			o = n - 4;
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}

/* ---- the handshake ---- */

int wsconn_build_request(const char *authority, const char *path, const char *key, const char *cookie,
			 char **out, struct terr *err)
{
	*out = NULL;
	const char *parts[] = {authority, path, key, cookie};
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		if (parts[i] && strpbrk(parts[i], "\r\n"))
			return terr_set(err, EINVAL, "a line break in the WebSocket request's values");
	char *s = NULL;
	if (asprintf(&s,
		     "GET %s HTTP/1.1\r\n"
		     "Host: %s\r\n"
		     "Upgrade: websocket\r\n"
		     "Connection: Upgrade\r\n"
		     "Sec-WebSocket-Key: %s\r\n"
		     "Sec-WebSocket-Version: 13\r\n"
		     /* What a browser on the app's own page sends: a proxy
		      * that refuses cross-site upgrades lets it through. */
		     "Origin: http://%s\r\n"
		     "User-Agent: tessera-cli\r\n"
		     "%s%s%s"
		     "\r\n",
		     path, authority, key, authority, cookie ? "Cookie: " : "", cookie ? cookie : "",
		     cookie ? "\r\n" : "") < 0)
		return terr_set(err, ENOMEM, "out of memory");
	*out = s;
	return 0;
}

/* Whether the comma-separated header value list has token (any case). */
static bool wsconn_has_token(const char *list, const char *token)
{
	size_t tl = strlen(token);
	const char *p = list;
	while (*p) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		size_t l = strcspn(p, ",");
		size_t k = l;
		while (k && (p[k - 1] == ' ' || p[k - 1] == '\t'))
			k--;
		if (k == tl && !strncasecmp(p, token, tl))
			return true;
		p += l;
	}
	return false;
}

int wsconn_check_response(const char *head, size_t len, const char *key, int *status, struct terr *err)
{
	*status = 0;
	int st = wsconn_head_status(head, len, err);
	if (st < 0)
		return st;
	*status = st;
	if (st != 101)
		return terr_set(err, EPROTO, "the server answered %d, not 101 Switching Protocols", st);
	char v[256];
	if (wsconn_head_header(head, len, "Upgrade", 0, v, sizeof(v)) < 0 || strcasecmp(v, "websocket"))
		return terr_set(err, EPROTO, "the server's 101 answer does not upgrade to websocket");
	if (wsconn_head_header(head, len, "Connection", 0, v, sizeof(v)) < 0 || !wsconn_has_token(v, "upgrade"))
		return terr_set(err, EPROTO, "the server's 101 answer has no 'Connection: Upgrade'");
	char want[WS_ACCEPT_LEN + 1];
	int r = ws_accept_key(key, want, err);
	if (r < 0)
		return r;
	if (wsconn_head_header(head, len, "Sec-WebSocket-Accept", 0, v, sizeof(v)) < 0)
		return terr_set(err, EPROTO, "the server's 101 answer has no Sec-WebSocket-Accept");
	if (strcmp(v, want))
		return terr_set(err, EPROTO, "the server's Sec-WebSocket-Accept does not match the key sent");
	return 0;
}

/* ---- frames ---- */

size_t wsconn_encode(uint8_t *out, enum ws_opcode op, const void *payload, size_t len, const uint8_t mask[4])
{
	size_t h = ws_write_header(out, true, op, len, mask);
	if (len)
		memcpy(out + h, payload, len);
	ws_mask(out + h, len, mask, 0);
	return h + len;
}

void wsconn_reader_init(struct wsconn_reader *r, uint64_t max_msg)
{
	memset(r, 0, sizeof(*r));
	r->max_msg = max_msg;
}

void wsconn_reader_free(struct wsconn_reader *r)
{
	free(r->buf);
	free(r->msg);
	memset(r, 0, sizeof(*r));
}

static int wsconn_grow(uint8_t **buf, size_t *cap, size_t need, struct terr *err)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap : 4096;
	while (nc < need)
		nc *= 2;
	uint8_t *nb = realloc(*buf, nc);
	if (!nb)
		return terr_set(err, ENOMEM, "out of memory");
	*buf = nb;
	*cap = nc;
	return 0;
}

int wsconn_reader_feed(struct wsconn_reader *r, const void *data, size_t n, struct terr *err)
{
	if (!n)
		return 0;
	/* Drop what was consumed first, so the buffer holds one frame or so. */
	if (r->off) {
		memmove(r->buf, r->buf + r->off, r->len - r->off);
		r->len -= r->off;
		r->off = 0;
	}
	int e = wsconn_grow(&r->buf, &r->cap, r->len + n, err);
	if (e < 0)
		return e;
	memcpy(r->buf + r->len, data, n);
	r->len += n;
	return 0;
}

int wsconn_reader_next(struct wsconn_reader *r, struct wsconn_msg *m, struct terr *err)
{
	for (;;) {
		struct ws_frame f;
		const uint8_t *p = r->buf + r->off;
		size_t avail = r->len - r->off;
		int h = ws_parse_header(p, avail, false, r->max_msg, &f, err);
		if (h <= 0)
			return h;
		if (avail - (size_t)h < f.len)
			return 0;
		const uint8_t *payload = p + h;
		size_t plen = (size_t)f.len;
		if (f.opcode == WS_OP_CLOSE || f.opcode == WS_OP_PING || f.opcode == WS_OP_PONG) {
			/* Copied: the buffer moves when more is fed, and a control
			 * frame may sit between a data message's fragments. */
			memcpy(r->ctrl, payload, plen);
			r->off += (size_t)h + plen;
			m->opcode = f.opcode;
			m->data = r->ctrl;
			m->len = plen;
			return 1;
		}
		if (f.opcode == WS_OP_CONT) {
			if (!r->in_msg)
				return terr_set(err, EPROTO, "a continuation frame with no message begun");
		} else {
			if (r->in_msg)
				return terr_set(err, EPROTO, "a new message inside a fragmented one");
			r->in_msg = true;
			r->msg_op = f.opcode;
			r->msg_len = 0;
		}
		if ((uint64_t)r->msg_len + plen > r->max_msg)
			return terr_set(err, EMSGSIZE, "a message over %llu bytes", (unsigned long long)r->max_msg);
		int e = wsconn_grow(&r->msg, &r->msg_cap, r->msg_len + plen + 1, err);
		if (e < 0)
			return e;
		if (plen)
			memcpy(r->msg + r->msg_len, payload, plen);
		r->msg_len += plen;
		r->off += (size_t)h + plen;
		if (f.fin) {
			r->in_msg = false;
			m->opcode = r->msg_op;
			m->data = r->msg;
			m->len = r->msg_len;
			return 1;
		}
	}
}

void wsconn_close_info(const uint8_t *data, size_t len, int *code, char *reason, size_t n)
{
	if (len < 2) {
		*code = 1005;
		if (n)
			reason[0] = '\0';
		return;
	}
	*code = data[0] << 8 | data[1];
	if (!n)
		return;
	size_t k = len - 2 < n - 1 ? len - 2 : n - 1;
	memcpy(reason, data + 2, k);
	reason[k] = '\0';
}

/* ---- sockets ---- */

static long wsconn_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until deadline (ms, monotonic). 0 when ready,
 * -ETIMEDOUT, -errno. */
static int wsconn_wait(int fd, short events, long deadline)
{
	for (;;) {
		long left = deadline - wsconn_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd = {.fd = fd, .events = events};
		int r = poll(&pfd, 1, (int)(left > 60000 ? 60000 : left));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

/* A connected TCP socket (blocking) to host:port. */
static int wsconn_connect(const char *host, const char *port, long deadline, int *fd_out, struct terr *err)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
	int g = getaddrinfo(host, port, &hints, &res);
	if (g)
		return terr_set(err, EHOSTUNREACH, "cannot resolve %s: %s", host, gai_strerror(g));
	int last = ECONNREFUSED;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
		if (fd < 0) {
			last = errno;
			continue;
		}
		int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
		if (r < 0 && errno == EINPROGRESS) {
			r = wsconn_wait(fd, POLLOUT, deadline);
			if (r == 0) {
				int soerr = 0;
				socklen_t sl = sizeof(soerr);
				if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
					soerr = errno;
				r = soerr ? -soerr : 0;
			}
			if (r < 0)
				errno = -r;
		}
		if (r == 0) {
			/* Back to blocking: callers poll before they read. */
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
			int one = 1;
			/* Keystrokes go out as they are typed. */
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			freeaddrinfo(res);
			*fd_out = fd;
			return 0;
		}
		last = errno;
		close(fd);
	}
	freeaddrinfo(res);
	return terr_set(err, last, "cannot connect to %s port %s: %s", host, port, strerror(last));
}

static int wsconn_send_all(int fd, const void *data, size_t n, struct terr *err)
{
	const char *p = data;
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return terr_set(err, errno, "cannot send to the server: %s", strerror(errno));
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads until the head is whole: *buf (malloc'd) holds *len bytes, the
 * head being its first *head_len. */
static int wsconn_read_head(int fd, long deadline, char **buf, size_t *len, size_t *head_len, struct terr *err)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap + 1);
	if (!b)
		return terr_set(err, ENOMEM, "out of memory");
	for (;;) {
		size_t hl = wsconn_head_len(b, n);
		if (hl) {
			b[n] = '\0';
			*buf = b;
			*len = n;
			*head_len = hl;
			return 0;
		}
		if (n >= WSCONN_MAX_HEAD) {
			free(b);
			return terr_set(err, EPROTO, "the server's answer has a head over %d bytes", WSCONN_MAX_HEAD);
		}
		if (n == cap) {
			char *nb = realloc(b, cap * 2 + 1);
			if (!nb) {
				free(b);
				return terr_set(err, ENOMEM, "out of memory");
			}
			b = nb;
			cap *= 2;
		}
		int w = wsconn_wait(fd, POLLIN, deadline);
		if (w < 0) {
			free(b);
			return terr_set(err, -w, "no answer from the server: %s", strerror(-w));
		}
		ssize_t r = recv(fd, b + n, cap - n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? errno : ECONNRESET;
			free(b);
			return terr_set(err, e, "the server closed the connection before answering%s%s",
					r < 0 ? ": " : "", r < 0 ? strerror(e) : "");
		}
		n += (size_t)r;
	}
}

long wsconn_dechunk(const char *in, size_t n, char *out, size_t cap, bool *complete)
{
	size_t i = 0, o = 0;
	*complete = false;
	for (;;) {
		/* A size line: hex digits, maybe ";ext", CRLF. */
		const char *lf = memchr(in + i, '\n', n - i);
		if (!lf)
			return (long)o;
		/* Parsed by hand: the bytes are not NUL-terminated. */
		const char *q = in + i;
		size_t size = 0, digits = 0;
		for (; q < lf; q++, digits++) {
			int d = *q >= '0' && *q <= '9' ? *q - '0'
				: (*q | 0x20) >= 'a' && (*q | 0x20) <= 'f' ? (*q | 0x20) - 'a' + 10 : -1;
			if (d < 0)
				break;
			if (size > (SIZE_MAX >> 4))
				return -1;
			size = size << 4 | (size_t)d;
		}
		if (!digits || (*q != '\r' && *q != ';' && *q != '\n'))
			return -1;
		i = (size_t)(lf - in) + 1;
		if (size == 0) {
			/* The last chunk; trailers, if any, are not wanted. */
			*complete = true;
			return (long)o;
		}
		size_t take = n - i < size ? n - i : size;
		size_t room = cap > o ? cap - o : 0;
		memcpy(out + o, in + i, take < room ? take : room);
		o += take < room ? take : room;
		if (take < size)
			return (long)o;
		i += size;
		/* The chunk's CRLF. */
		if (n - i < 2)
			return (long)o;
		if (in[i] != '\r' || in[i + 1] != '\n')
			return -1;
		i += 2;
	}
}

/* Reads the body after a head: what is already in extra[0..n) and more
 * up to Content-Length (when given), the last chunk (chunked) or the end
 * of the stream, at most WSCONN_MAX_BODY bytes. Returns a NUL-terminated
 * malloc'd copy (decoded when chunked), or NULL when out of memory. A
 * read that fails or times out ends the body. */
static char *wsconn_read_body(int fd, const char *head, size_t head_len, const char *extra, size_t n,
			      long deadline)
{
	char cl[32];
	long want = WSCONN_MAX_BODY;
	bool chunked = wsconn_head_header(head, head_len, "Transfer-Encoding", 0, cl, sizeof(cl)) >= 0 &&
		       strcasestr(cl, "chunked");
	if (!chunked && wsconn_head_header(head, head_len, "Content-Length", 0, cl, sizeof(cl)) >= 0) {
		char *end;
		long v = strtol(cl, &end, 10);
		if (!*end && v >= 0 && v < want)
			want = v;
	}
	char *b = malloc(WSCONN_MAX_BODY + 1), *text = chunked ? malloc(WSCONN_MAX_BODY + 1) : NULL;
	if (!b || (chunked && !text)) {
		free(b);
		free(text);
		return NULL;
	}
	size_t got = n < (size_t)want ? n : (size_t)want;
	memcpy(b, extra, got);
	bool complete = false;
	long dec = 0;
	for (;;) {
		if (chunked) {
			dec = wsconn_dechunk(b, got, text, WSCONN_MAX_BODY, &complete);
			if (dec < 0 || complete)
				break;
		}
		if (got >= (size_t)want || wsconn_wait(fd, POLLIN, deadline) < 0)
			break;
		ssize_t r = recv(fd, b + got, (size_t)want - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (chunked) {
		free(b);
		b = text;
		got = dec < 0 ? 0 : (size_t)dec;
	}
	b[got] = '\0';
	return b;
}

int wsconn_open(struct wsconn *c, const struct wsconn_url *u, const char *cookie, long timeout_ms,
		int *status, struct terr *err)
{
	c->fd = -1;
	wsconn_reader_init(&c->rd, 16u << 20);
	*status = 0;
	long deadline = wsconn_now_ms() + timeout_ms;
	char key[25], *req = NULL, *buf = NULL;
	size_t len = 0, hl = 0;
	int fd = -1;
	int r = ws_client_key(key, err);
	if (r < 0)
		return r;
	if ((r = wsconn_build_request(u->authority, u->path, key, cookie, &req, err)) < 0)
		return r;
	if ((r = wsconn_connect(u->host, u->port, deadline, &fd, err)) < 0)
		goto fail;
	if ((r = wsconn_send_all(fd, req, strlen(req), err)) < 0 ||
	    (r = wsconn_read_head(fd, deadline, &buf, &len, &hl, err)) < 0)
		goto fail;
	if ((r = wsconn_check_response(buf, hl, key, status, err)) < 0) {
		if (*status && *status != 101) {
			/* The proxy's page says why (no cookie, starting...). */
			char *body = wsconn_read_body(fd, buf, hl, buf + hl, len - hl, deadline);
			char text[300];
			wsconn_page_text(body ? body : "", body ? strlen(body) : 0, text, sizeof(text));
			free(body);
			r = terr_set(err, EPROTO, "%d%s%s", *status, text[0] ? ": " : "", text);
		}
		goto fail;
	}
	if ((r = wsconn_reader_feed(&c->rd, buf + hl, len - hl, err)) < 0)
		goto fail;
	free(buf);
	free(req);
	c->fd = fd;
	return 0;
fail:
	free(buf);
	free(req);
	if (fd >= 0)
		close(fd);
	wsconn_reader_free(&c->rd);
	return r;
}

int wsconn_send(struct wsconn *c, enum ws_opcode op, const void *payload, size_t len, struct terr *err)
{
	uint8_t mask[4];
	/* RFC 6455 5.3: a fresh unpredictable mask per frame. */
	if (getrandom(mask, sizeof(mask), 0) != (ssize_t)sizeof(mask))
		return terr_set(err, errno ? errno : EIO, "no random bytes for the frame's mask");
	uint8_t small[WS_MAX_HEADER + 512];
	uint8_t *out = len <= 512 ? small : malloc(WS_MAX_HEADER + len);
	if (!out)
		return terr_set(err, ENOMEM, "out of memory");
	size_t n = wsconn_encode(out, op, payload, len, mask);
	int r = wsconn_send_all(c->fd, out, n, err);
	if (out != small)
		free(out);
	return r;
}

int wsconn_recv(struct wsconn *c, struct terr *err)
{
	uint8_t buf[16384];
	ssize_t r;
	do
		r = recv(c->fd, buf, sizeof(buf), 0);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return -EAGAIN;
		return terr_set(err, errno, "cannot read from the server: %s", strerror(errno));
	}
	if (r == 0)
		return 0;
	int e = wsconn_reader_feed(&c->rd, buf, (size_t)r, err);
	return e < 0 ? e : (int)r;
}

void wsconn_close(struct wsconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	wsconn_reader_free(&c->rd);
}

int wsconn_http_get(const struct wsconn_url *u, long timeout_ms, int *status, char **head, char **body,
		    struct terr *err)
{
	*status = 0;
	*head = *body = NULL;
	if (strpbrk(u->authority, "\r\n") || strpbrk(u->path, "\r\n"))
		return terr_set(err, EINVAL, "a line break in the URL");
	long deadline = wsconn_now_ms() + timeout_ms;
	char *req = NULL, *buf = NULL;
	size_t len = 0, hl = 0;
	int fd = -1, r;
	if (asprintf(&req,
		     "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: tessera-cli\r\nAccept: */*\r\n"
		     "Connection: close\r\n\r\n",
		     u->path, u->authority) < 0)
		return terr_set(err, ENOMEM, "out of memory");
	if ((r = wsconn_connect(u->host, u->port, deadline, &fd, err)) < 0 ||
	    (r = wsconn_send_all(fd, req, strlen(req), err)) < 0 ||
	    (r = wsconn_read_head(fd, deadline, &buf, &len, &hl, err)) < 0)
		goto out;
	if ((r = wsconn_head_status(buf, hl, err)) < 0)
		goto out;
	*status = r;
	r = 0;
	*body = wsconn_read_body(fd, buf, hl, buf + hl, len - hl, deadline);
	*head = strndup(buf, hl);
	if (!*body || !*head) {
		free(*body);
		free(*head);
		*head = *body = NULL;
		r = terr_set(err, ENOMEM, "out of memory");
	}
out:
	free(req);
	free(buf);
	if (fd >= 0)
		close(fd);
	return r;
}

int wsconn_http_connect(const struct wsconn_url *u, const char *target, const char *cookie, long timeout_ms,
			int *fd_out, char **extra, size_t *n_extra, int *status, struct terr *err)
{
	*status = 0;
	*fd_out = -1;
	*extra = NULL;
	*n_extra = 0;
	if (strpbrk(u->authority, "\r\n") || strpbrk(target, "\r\n ") || (cookie && strpbrk(cookie, "\r\n")))
		return terr_set(err, EINVAL, "a line break in the request");
	long deadline = wsconn_now_ms() + timeout_ms;
	char *req = NULL, *buf = NULL;
	size_t len = 0, hl = 0;
	int fd = -1, r;
	if (asprintf(&req, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: tessera-cli\r\n%s%s%s\r\n", target,
		     u->authority, cookie ? "Cookie: " : "", cookie ? cookie : "", cookie ? "\r\n" : "") < 0)
		return terr_set(err, ENOMEM, "out of memory");
	if ((r = wsconn_connect(u->host, u->port, deadline, &fd, err)) < 0 ||
	    (r = wsconn_send_all(fd, req, strlen(req), err)) < 0 ||
	    (r = wsconn_read_head(fd, deadline, &buf, &len, &hl, err)) < 0 ||
	    (r = wsconn_head_status(buf, hl, err)) < 0)
		goto out;
	*status = r;
	if (r != 200) {
		/* The proxy's page says why (no cookie, starting...). */
		char *body = wsconn_read_body(fd, buf, hl, buf + hl, len - hl, deadline);
		char text[300];
		wsconn_page_text(body ? body : "", body ? strlen(body) : 0, text, sizeof(text));
		free(body);
		r = terr_set(err, EPROTO, "%d%s%s", *status, text[0] ? ": " : "", text);
		goto out;
	}
	/* What came after the head is the tunnel's already. */
	*n_extra = len - hl;
	memmove(buf, buf + hl, *n_extra);
	*extra = buf;
	buf = NULL;
	*fd_out = fd;
	fd = -1;
	r = 0;
out:
	free(req);
	free(buf);
	if (fd >= 0)
		close(fd);
	return r;
}
