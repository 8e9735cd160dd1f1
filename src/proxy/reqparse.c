/* Incremental HTTP/1.x request framing (reqparse.h). Strict where a lax
 * reading could let two parties see different request boundaries (request
 * smuggling): differing Content-Lengths, Content-Length beside
 * Transfer-Encoding, folded headers, a space before a header's colon and
 * control characters are all refused. */
#include "proxy/reqparse.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REQP_MAX_TRAILER_LINE 8192
#define REQP_MAX_CHUNK_EXT 4096

void reqparse_init(struct reqparse *p)
{
	memset(p, 0, sizeof(*p));
	p->state = REQP_S_HEAD;
}

static void drop_head(struct reqparse *p)
{
	free(p->head);
	free(p->raw_head);
	p->head = p->raw_head = NULL;
	p->head_len = p->head_cap = p->done_len = 0;
}

void reqparse_free(struct reqparse *p)
{
	drop_head(p);
}

static enum reqp_event fail(struct reqparse *p, int status, const char *why)
{
	p->state = REQP_S_ERROR;
	p->status = status;
	p->why = why;
	return REQP_ERROR;
}

static bool is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool has_token(const char *list, const char *token)
{
	size_t tl = strlen(token);
	const char *s = list;
	while (*s) {
		while (*s == ' ' || *s == '\t' || *s == ',')
			s++;
		const char *e = s;
		while (*e && *e != ',')
			e++;
		const char *te = e;
		while (te > s && (te[-1] == ' ' || te[-1] == '\t'))
			te--;
		if ((size_t)(te - s) == tl && !strncasecmp(s, token, tl))
			return true;
		s = e;
	}
	return false;
}

/* The last coding of a Transfer-Encoding list must be chunked. */
static bool last_is_chunked(const char *v)
{
	const char *last = strrchr(v, ',');
	last = last ? last + 1 : v;
	while (*last == ' ' || *last == '\t')
		last++;
	size_t n = strlen(last);
	while (n && (last[n - 1] == ' ' || last[n - 1] == '\t'))
		n--;
	return n == 7 && !strncasecmp(last, "chunked", 7);
}

/* Parses p->head (a NUL-terminated copy of the head) in place. */
static enum reqp_event parse_head(struct reqparse *p)
{
	struct reqp_request *r = &p->req;
	memset(r, 0, sizeof(*r));
	char *s = p->head;
	char *eol = strchr(s, '\n');
	if (!eol)
		return fail(p, 400, "malformed request line");
	/* Request line: METHOD SP TARGET SP HTTP/1.x */
	char *line_end = eol;
	if (line_end > s && line_end[-1] == '\r')
		line_end--;
	*line_end = '\0';
	char *sp1 = strchr(s, ' ');
	if (!sp1 || sp1 == s)
		return fail(p, 400, "malformed request line");
	for (char *c = s; c < sp1; c++)
		if (!is_tchar((unsigned char)*c))
			return fail(p, 400, "malformed method");
	*sp1 = '\0';
	char *target = sp1 + 1;
	char *sp2 = strchr(target, ' ');
	if (!sp2 || sp2 == target)
		return fail(p, 400, "malformed request line");
	*sp2 = '\0';
	for (char *c = target; *c; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c == 0x7f)
			return fail(p, 400, "malformed request target");
	const char *ver = sp2 + 1;
	if (strncmp(ver, "HTTP/1.", 7) || ver[7] < '0' || ver[7] > '9' || ver[8])
		return fail(p, 505, "only HTTP/1.x is served");
	r->method = s;
	r->target = target;
	r->minor = ver[7] - '0';
	bool have_cl = false, keep_alive = false;
	const char *te = NULL;
	s = eol + 1;
	while (*s && *s != '\r' && *s != '\n') {
		eol = strchr(s, '\n');
		if (!eol)
			return fail(p, 400, "malformed header");
		line_end = eol;
		if (line_end > s && line_end[-1] == '\r')
			line_end--;
		*line_end = '\0';
		if (*s == ' ' || *s == '\t')
			return fail(p, 400, "folded header lines are not accepted");
		char *colon = strchr(s, ':');
		if (!colon || colon == s)
			return fail(p, 400, "malformed header");
		for (char *c = s; c < colon; c++)
			if (!is_tchar((unsigned char)*c))
				return fail(p, 400, "malformed header name");
		*colon = '\0';
		char *v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		char *ve = v + strlen(v);
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		*ve = '\0';
		for (char *c = v; *c; c++)
			if (((unsigned char)*c < 0x20 && *c != '\t') || (unsigned char)*c == 0x7f)
				return fail(p, 400, "control character in a header value");
		if (r->n_headers >= REQP_MAX_HEADERS)
			return fail(p, 431, "too many header fields");
		r->names[r->n_headers] = s;
		r->values[r->n_headers++] = v;
		if (!strcasecmp(s, "Content-Length")) {
			if (!*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 18)
				return fail(p, 400, "malformed Content-Length");
			uint64_t n = strtoull(v, NULL, 10);
			if (have_cl && n != r->content_length)
				return fail(p, 400, "conflicting Content-Length headers");
			have_cl = true;
			r->content_length = n;
		} else if (!strcasecmp(s, "Transfer-Encoding")) {
			if (te)
				return fail(p, 400, "repeated Transfer-Encoding header");
			te = v;
		} else if (!strcasecmp(s, "Connection")) {
			if (has_token(v, "close"))
				r->close = true;
			if (has_token(v, "keep-alive"))
				keep_alive = true;
		} else if (!strcasecmp(s, "Upgrade")) {
			r->upgrade = true;
		}
		s = eol + 1;
	}
	if (te) {
		if (have_cl)
			return fail(p, 400, "Content-Length and Transfer-Encoding together");
		if (!last_is_chunked(te))
			return fail(p, 501, "only the chunked transfer coding is understood");
		r->chunked = true;
	}
	if (r->minor == 0 && !keep_alive)
		r->close = true;
	/* CONNECT: after its head the bytes are the tunnel's, as after an
	 * upgrade; it has no body whatever its headers say. */
	if (!strcmp(r->method, "CONNECT")) {
		r->connect = r->upgrade = true;
		r->chunked = false;
		r->content_length = 0;
	}
	return REQP_HEAD;
}

/* After a head: where its body (if any) begins. */
static void enter_body(struct reqparse *p)
{
	if (p->req.upgrade)
		p->state = REQP_S_RAW;
	else if (p->req.chunked) {
		p->state = REQP_S_CHUNK_SIZE;
		p->remaining = 0;
	} else {
		p->state = REQP_S_LENGTH;
		p->remaining = p->req.content_length;
	}
}

static bool head_done(const char *b, size_t n)
{
	return (n >= 2 && b[n - 1] == '\n' && b[n - 2] == '\n') ||
	       (n >= 4 && !memcmp(b + n - 4, "\r\n\r\n", 4)) ||
	       (n >= 3 && !memcmp(b + n - 3, "\n\r\n", 3));
}

static enum reqp_event feed_head(struct reqparse *p, const char *data, size_t len, size_t *used)
{
	p->in_body = false;
	size_t i = 0;
	/* Empty lines before a request line are ignored (RFC 9112, 2.2). */
	while (p->head_len == 0 && i < len && (data[i] == '\r' || data[i] == '\n'))
		i++;
	if (i == len) {
		*used = i;
		return REQP_MORE;
	}
	if (p->head_len == 0) {
		/* A new head: the previous request's buffers go. */
		drop_head(p);
	}
	for (; i < len; i++) {
		if (p->head_len >= REQP_MAX_HEAD) {
			*used = i;
			return fail(p, 431, "request head larger than 16 KiB");
		}
		if (p->head_len == p->head_cap) {
			size_t cap = p->head_cap ? p->head_cap * 2 : 1024;
			if (cap > REQP_MAX_HEAD)
				cap = REQP_MAX_HEAD;
			char *nb = realloc(p->raw_head, cap);
			if (!nb) {
				*used = i;
				return fail(p, 503, "out of memory");
			}
			p->raw_head = nb;
			p->head_cap = cap;
		}
		char c = data[i];
		if (c == '\0') {
			*used = i;
			return fail(p, 400, "NUL byte in a request head");
		}
		p->raw_head[p->head_len++] = c;
		if (c == '\n' && head_done(p->raw_head, p->head_len)) {
			*used = i + 1;
			p->done_len = p->head_len;
			p->head = malloc(p->head_len + 1);
			if (!p->head)
				return fail(p, 503, "out of memory");
			memcpy(p->head, p->raw_head, p->head_len);
			p->head[p->head_len] = '\0';
			enum reqp_event ev = parse_head(p);
			if (ev == REQP_HEAD)
				enter_body(p);
			return ev;
		}
	}
	*used = len;
	return REQP_MORE;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The end of a request: the next byte starts a new head. */
static enum reqp_event end_request(struct reqparse *p, size_t i, size_t *used)
{
	*used = i;
	p->state = REQP_S_HEAD;
	p->head_len = 0;
	return REQP_END;
}

enum reqp_event reqparse_feed(struct reqparse *p, const char *data, size_t len, size_t *used)
{
	*used = 0;
	switch (p->state) {
	case REQP_S_ERROR:
		return REQP_ERROR;
	case REQP_S_HEAD:
		return feed_head(p, data, len, used);
	case REQP_S_RAW:
		p->in_body = true;
		*used = len;
		return REQP_MORE;
	case REQP_S_LENGTH:
		p->in_body = true;
		if (p->remaining == 0)
			return end_request(p, 0, used);
		if (len >= p->remaining) {
			size_t n = (size_t)p->remaining;
			p->remaining = 0;
			return end_request(p, n, used);
		}
		p->remaining -= len;
		*used = len;
		return REQP_MORE;
	default:
		break;
	}
	/* Chunked body: every byte is forwarded, framing included. */
	p->in_body = true;
	size_t i = 0;
	while (i < len) {
		char c = data[i];
		switch (p->state) {
		case REQP_S_CHUNK_SIZE: {
			int v = hexval(c);
			if (v >= 0) {
				if (p->remaining >> 58) {
					*used = i;
					return fail(p, 400, "chunk size too large");
				}
				p->remaining = p->remaining * 16 + (uint64_t)v;
				p->trailer_len++;
				i++;
				break;
			}
			if (p->trailer_len == 0) {
				*used = i;
				return fail(p, 400, "malformed chunk size");
			}
			p->trailer_len = 0;
			if (c == ';' || c == ' ' || c == '\t')
				p->state = REQP_S_CHUNK_EXT;
			else if (c == '\r')
				p->state = REQP_S_CHUNK_SIZE_LF;
			else if (c == '\n')
				goto size_done;
			else {
				*used = i;
				return fail(p, 400, "malformed chunk size");
			}
			i++;
			break;
		}
		case REQP_S_CHUNK_EXT:
			if (c == '\r')
				p->state = REQP_S_CHUNK_SIZE_LF;
			else if (c == '\n')
				goto size_done;
			else if (++p->trailer_len > REQP_MAX_CHUNK_EXT || ((unsigned char)c < 0x20 && c != '\t')) {
				*used = i;
				return fail(p, 400, "malformed chunk extension");
			}
			i++;
			break;
		case REQP_S_CHUNK_SIZE_LF:
			if (c != '\n') {
				*used = i;
				return fail(p, 400, "malformed chunk size line");
			}
		size_done:
			i++;
			p->trailer_len = 0;
			p->state = p->remaining ? REQP_S_CHUNK_DATA : REQP_S_TRAILER;
			break;
		case REQP_S_CHUNK_DATA: {
			size_t n = len - i;
			if (n > p->remaining)
				n = (size_t)p->remaining;
			i += n;
			p->remaining -= n;
			if (!p->remaining)
				p->state = REQP_S_CHUNK_CR;
			break;
		}
		case REQP_S_CHUNK_CR:
			if (c == '\r') {
				p->state = REQP_S_CHUNK_LF;
				i++;
				break;
			}
			/* a bare LF ends the chunk too */
			__attribute__((fallthrough));
		case REQP_S_CHUNK_LF:
			if (c != '\n') {
				*used = i;
				return fail(p, 400, "chunk data longer than its size");
			}
			i++;
			p->state = REQP_S_CHUNK_SIZE;
			break;
		case REQP_S_TRAILER:
			/* At the start of a trailer line: an empty line ends. */
			if (c == '\r') {
				p->state = REQP_S_TRAILER_LF;
				i++;
				break;
			}
			if (c == '\n')
				return end_request(p, i + 1, used);
			p->state = REQP_S_TRAILER_LINE;
			p->trailer_len = 0;
			break;
		case REQP_S_TRAILER_LF:
			if (c != '\n') {
				*used = i;
				return fail(p, 400, "malformed chunked trailer");
			}
			return end_request(p, i + 1, used);
		case REQP_S_TRAILER_LINE:
			if (c == '\n')
				p->state = REQP_S_TRAILER;
			else if (++p->trailer_len > REQP_MAX_TRAILER_LINE || c == '\0') {
				*used = i;
				return fail(p, 400, "malformed chunked trailer");
			}
			i++;
			break;
		default:
			*used = i;
			return fail(p, 500, "internal parser state");
		}
	}
	*used = len;
	return REQP_MORE;
}

const char *reqparse_head_bytes(const struct reqparse *p, size_t *len)
{
	*len = p->head ? p->done_len : 0;
	return p->raw_head;
}

const char *reqparse_header(const struct reqp_request *r, const char *name)
{
	for (size_t i = 0; i < r->n_headers; i++)
		if (!strcasecmp(r->names[i], name))
			return r->values[i];
	return NULL;
}

void reqparse_release_head(struct reqparse *p)
{
	if (p->state == REQP_S_HEAD)
		return;  /* a head in progress keeps its bytes */
	drop_head(p);
	p->req.method = p->req.target = NULL;
	p->req.n_headers = 0;
}

bool reqparse_head_started(const struct reqparse *p)
{
	return p->state == REQP_S_HEAD && p->head_len > 0;
}

/* Whether a cookie pair (name=value, or a bare name) is one of
 * Tessera's own: its name begins with one of the prefixes. */
static bool own_cookie(const char *pair, size_t n)
{
	static const char *const prefixes[] = {REQPARSE_OWN_COOKIE_PREFIXES};
	for (size_t k = 0; k < sizeof(prefixes) / sizeof(prefixes[0]); k++) {
		size_t pl = strlen(prefixes[k]);
		if (n >= pl && !memcmp(pair, prefixes[k], pl))
			return true;
	}
	return false;
}

/* One Cookie line's value without Tessera's own pairs; *kept how many
 * pairs remained. */
static size_t strip_pairs(const char *v, size_t n, char *out, int *kept)
{
	size_t o = 0, i = 0;
	*kept = 0;
	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ';'))
			i++;
		size_t s = i;
		while (i < n && v[i] != ';')
			i++;
		size_t e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e == s)
			continue;
		if (own_cookie(v + s, e - s))
			continue;
		if (*kept) {
			memcpy(out + o, "; ", 2);
			o += 2;
		}
		memcpy(out + o, v + s, e - s);
		o += e - s;
		(*kept)++;
	}
	return o;
}

size_t reqparse_strip_cookies(const char *head, size_t len, char *out)
{
	size_t o = 0, i = 0;
	while (i < len) {
		const char *nl = memchr(head + i, '\n', len - i);
		size_t le = nl ? (size_t)(nl - head) + 1 : len;
		const char *line = head + i;
		size_t ll = le - i;
		if (ll > 7 && !strncasecmp(line, "Cookie:", 7) && i > 0 && memmem(line, ll, "tessera_", 8)) {
			size_t ve = ll;
			while (ve > 7 && (line[ve - 1] == '\n' || line[ve - 1] == '\r'))
				ve--;
			/* "Cookie: a=1; b=2" rebuilt from its pairs, with the
			 * line's own ending. */
			size_t start = o;
			memcpy(out + o, "Cookie: ", 8);
			o += 8;
			int kept;
			o += strip_pairs(line + 7, ve - 7, out + o, &kept);
			if (!kept)
				o = start;
			else {
				memcpy(out + o, line + ve, ll - ve);
				o += ll - ve;
			}
		} else {
			memcpy(out + o, line, ll);
			o += ll;
		}
		i = le;
	}
	return o;
}
