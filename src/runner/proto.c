#include "runner/proto.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int proto_find_line(const char *buf, size_t n, size_t *line_len, size_t *used)
{
	const char *nl = memchr(buf, '\n', n < PROTO_LINE_MAX ? n : PROTO_LINE_MAX);
	if (!nl)
		return n >= PROTO_LINE_MAX ? -EMSGSIZE : 0;
	size_t len = (size_t)(nl - buf);
	*used = len + 1;
	if (len && buf[len - 1] == '\r')
		len--;
	*line_len = len;
	return 1;
}

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

bool proto_secret_equal(const char *a, const char *b)
{
	/* volatile: the compiler may not stop at the first difference. */
	volatile unsigned char diff = 0;
	for (size_t i = 0; i < PROTO_SECRET_LEN; i++)
		diff |= (unsigned char)a[i] ^ (unsigned char)b[i];
	return diff == 0;
}

int proto_parse_secret(const char *buf, size_t n, char out[PROTO_SECRET_LEN + 1], struct terr *err)
{
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n > 0 && buf[n - 1] == '\r')
		n--;
	if (n != PROTO_SECRET_LEN || !is_hex(buf, n))
		return terr_set(err, EINVAL, "the app secret must be %d hex characters", PROTO_SECRET_LEN);
	memcpy(out, buf, PROTO_SECRET_LEN);
	out[PROTO_SECRET_LEN] = '\0';
	return 0;
}

int proto_find_head(const char *buf, size_t n, size_t *used)
{
	size_t lim = n < PROTO_HEAD_MAX ? n : PROTO_HEAD_MAX;
	for (size_t i = 0; i + 1 < lim; i++) {
		/* \r\n\r\n, or \n\n from a lax client */
		if (buf[i] == '\n' && buf[i + 1] == '\n') {
			*used = i + 2;
			return 1;
		}
		if (i + 3 < lim && !memcmp(buf + i, "\r\n\r\n", 4)) {
			*used = i + 4;
			return 1;
		}
	}
	return n >= PROTO_HEAD_MAX ? -EMSGSIZE : 0;
}

/* Copies s[0..n) trimmed of blanks into out (cut to fit). */
static void copy_trim(char *out, size_t cap, const char *s, size_t n)
{
	while (n && (*s == ' ' || *s == '\t')) {
		s++;
		n--;
	}
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		n--;
	if (n >= cap)
		n = cap - 1;
	memcpy(out, s, n);
	out[n] = '\0';
}

/* Whether the comma-separated list value holds token (any case). */
static bool has_token(const char *v, size_t n, const char *token)
{
	size_t tl = strlen(token);
	const char *end = v + n;
	while (v < end) {
		const char *comma = memchr(v, ',', (size_t)(end - v));
		const char *e = comma ? comma : end;
		const char *s = v;
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		const char *t = e;
		while (t > s && (t[-1] == ' ' || t[-1] == '\t' || t[-1] == '\r'))
			t--;
		if ((size_t)(t - s) == tl && !strncasecmp(s, token, tl))
			return true;
		v = comma ? comma + 1 : end;
	}
	return false;
}

int proto_parse_http_head(const char *buf, size_t n, struct proto_http_req *r, struct terr *err)
{
	memset(r, 0, sizeof(*r));
	const char *end = buf + n;
	const char *eol = memchr(buf, '\n', n);
	if (!eol)
		return terr_set(err, EINVAL, "no request line");
	const char *sp1 = memchr(buf, ' ', (size_t)(eol - buf));
	const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
	if (!sp1 || !sp2 || sp1 == buf || (size_t)(sp1 - buf) >= sizeof(r->method) ||
	    (size_t)(eol - sp2 - 1) < 8 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0)
		return terr_set(err, EINVAL, "not an HTTP/1 request line");
	memcpy(r->method, buf, (size_t)(sp1 - buf));
	const char *target = sp1 + 1;
	size_t tl = (size_t)(sp2 - target);
	const char *q = memchr(target, '?', tl);
	size_t pl = q ? (size_t)(q - target) : tl;
	if (pl == 0 || pl >= sizeof(r->path) || (q && tl - pl - 1 >= sizeof(r->query)))
		return terr_set(err, EINVAL, "the request target is too long");
	memcpy(r->path, target, pl);
	if (q)
		memcpy(r->query, q + 1, tl - pl - 1);
	for (const char *l = eol + 1; l < end;) {
		const char *le = memchr(l, '\n', (size_t)(end - l));
		if (!le)
			le = end;
		const char *colon = memchr(l, ':', (size_t)(le - l));
		if (colon) {
			size_t kl = (size_t)(colon - l);
			const char *v = colon + 1;
			size_t vl = (size_t)(le - v);
			if (kl == 7 && !strncasecmp(l, "Upgrade", 7))
				r->upgrade_websocket |= has_token(v, vl, "websocket");
			else if (kl == 10 && !strncasecmp(l, "Connection", 10))
				r->connection_upgrade |= has_token(v, vl, "upgrade");
			else if (kl == 17 && !strncasecmp(l, "Sec-WebSocket-Key", 17))
				copy_trim(r->ws_key, sizeof(r->ws_key), v, vl);
			else if (kl == 21 && !strncasecmp(l, "Sec-WebSocket-Version", 21))
				copy_trim(r->ws_version, sizeof(r->ws_version), v, vl);
		}
		l = le + 1;
	}
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int proto_query_get(const char *query, const char *key, char *out, size_t n)
{
	size_t kl = strlen(key);
	for (const char *p = query; p && *p;) {
		const char *amp = strchr(p, '&');
		const char *e = amp ? amp : p + strlen(p);
		if ((size_t)(e - p) >= kl && !strncmp(p, key, kl) && (p[kl] == '=' || p + kl == e)) {
			const char *v = p[kl] == '=' ? p + kl + 1 : e;
			size_t k = 0;
			while (v < e) {
				char c = *v++;
				if (c == '+') {
					c = ' ';
				} else if (c == '%' && e - v >= 2 && hexval(v[0]) >= 0 && hexval(v[1]) >= 0) {
					c = (char)(hexval(v[0]) * 16 + hexval(v[1]));
					v += 2;
				}
				/* A NUL from %00 would end the value early: "main%00x"
				 * is not the terminal "main". */
				if (k + 1 >= n || c == '\0')
					return -EINVAL;
				out[k++] = c;
			}
			out[k] = '\0';
			return 1;
		}
		p = amp ? amp + 1 : NULL;
	}
	return 0;
}

static int query_int(const char *query, const char *key, int *out, struct terr *err)
{
	char v[16];
	int rc = proto_query_get(query, key, v, sizeof(v));
	*out = 0;
	if (rc == 0)
		return 0;
	/* Digits only: strtol would take spaces and a sign before them. */
	char *end;
	long x = rc > 0 && strspn(v, "0123456789") == strlen(v) ? strtol(v, &end, 10) : 0;
	if (rc < 0 || !*v || x < 1 || x > 10000)
		return terr_set(err, EINVAL, "%s must be a number from 1 to 10000", key);
	*out = (int)x;
	return 0;
}

int proto_parse_term_query(const char *query, struct proto_term_query *q, struct terr *err)
{
	memset(q, 0, sizeof(*q));
	int rc = proto_query_get(query, "term", q->term, sizeof(q->term));
	if (rc < 0)
		return terr_set(err, EINVAL, "term must be 1 to %d of A-Z a-z 0-9 _ -", PROTO_TERM_ID_MAX);
	if (rc == 0)
		strcpy(q->term, "main");
	size_t len = strlen(q->term);
	bool ok = len > 0;
	for (size_t i = 0; i < len; i++)
		ok &= isalnum((unsigned char)q->term[i]) || q->term[i] == '_' || q->term[i] == '-';
	if (!ok)
		return terr_set(err, EINVAL, "term must be 1 to %d of A-Z a-z 0-9 _ -", PROTO_TERM_ID_MAX);
	if ((rc = query_int(query, "cols", &q->cols, err)) < 0)
		return rc;
	return query_int(query, "rows", &q->rows, err);
}
