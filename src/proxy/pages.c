/* The proxy's own answers (internal.h): error pages and the terminal page. */
#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proxy/internal.h"

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

const char *pages_reason(int status)
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

/* A complete response of the proxy's own to the browser. extra: more
 * header lines, each ending in \r\n (may be NULL). */
void pages_respond_raw(struct conn *c, int status, const char *extra, const char *ctype, const char *body,
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
			 status, pages_reason(status), ctype, blen, extra ? extra : "",
			 close ? "Connection: close\r\n" : "");
	memcpy(b + n, body, blen);
	conn_write(c, true, b, (size_t)n + blen);
	if (close)
		c->close_after = true;
}

/* An HTML page saying what happened. refresh: reloads itself each second. */
char *pages_html(int status, const char *title, const char *text, bool refresh, size_t *len)
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

void pages_respond(struct conn *c, int status, const char *extra, const char *title, const char *text,
			 bool refresh, bool close)
{
	size_t len = 0;
	char *b = pages_html(status, title, text, refresh, &len);
	if (!b) {
		conn_close(c);
		return;
	}
	pages_respond_raw(c, status, extra, "text/html; charset=utf-8", b, len, close);
	free(b);
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
void pages_serve_static(struct conn *c)
{
	const char *t = c->rp.req.target;
	char path[512];
	size_t pl = strcspn(t, "?#");
	if (strcmp(c->rp.req.method, "GET") && strcmp(c->rp.req.method, "HEAD")) {
		pages_respond(c, 405, "Allow: GET, HEAD\r\n", "Method not allowed", "The terminal page is read only.",
			      false, false);
		conn_answered(c);
		return;
	}
	if (pl == 0 || pl >= sizeof(path) - 16 || t[0] != '/') {
		pages_respond(c, 404, NULL, "Not found", "No such file.", false, false);
		conn_answered(c);
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
		pages_respond(c, 404, NULL, "Not found", why, false, false);
		conn_answered(c);
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
		pages_respond(c, 500, NULL, "Error", "The file could not be read.", false, false);
		conn_answered(c);
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
		pages_respond_raw(c, 200, extra, ct, body, len, false);
	}
	free(body);
	conn_answered(c);
}
