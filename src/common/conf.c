/* `key = value` files (common/conf.h). Hand-written: the format is a dozen
 * lines of grammar and no Debian library parses exactly it (INI parsers add
 * sections, escapes and inline comments we do not want). */
#include "common/conf.h"

#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int conf_key_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '.' || c == '-';
}

static int conf_add(struct conf *c, const char *key, size_t klen,
		    const char *val, size_t vlen, int line, struct terr *err)
{
	struct conf_item *items = realloc(c->items, (c->n + 1) * sizeof(*items));
	if (!items)
		return terr_set(err, ENOMEM, "out of memory");
	c->items = items;
	char *k = strndup(key, klen), *v = malloc(vlen + 1);
	if (!k || !v) {
		free(k);
		free(v);
		return terr_set(err, ENOMEM, "out of memory");
	}
	memcpy(v, val, vlen);
	v[vlen] = '\0';
	c->items[c->n++] = (struct conf_item){.key = k, .value = v, .line = line};
	return 0;
}

/* Unquotes "..." (src[0] is the quote) into dst (at least len bytes):
 * \" and \\ are the only escapes, so that conf_write can round-trip any
 * one-line value. Returns 0, or -1 with *why set. */
static int conf_unquote(const char *src, size_t len, char *dst, size_t *dlen,
			const char **why)
{
	size_t o = 0, i = 1;
	while (i < len) {
		if (src[i] == '\\' && i + 1 < len &&
		    (src[i + 1] == '"' || src[i + 1] == '\\')) {
			dst[o++] = src[i + 1];
			i += 2;
		} else if (src[i] == '"') {
			if (i != len - 1) {
				*why = "text after the closing quote";
				return -1;
			}
			*dlen = o;
			return 0;
		} else {
			dst[o++] = src[i++];
		}
	}
	*why = "unterminated quoted value";
	return -1;
}

static int conf_parse_line(struct conf *out, const char *p, size_t len,
			   int lineno, struct terr *err)
{
	while (len && isspace((unsigned char)*p)) {
		p++;
		len--;
	}
	while (len && isspace((unsigned char)p[len - 1]))
		len--;
	if (len == 0 || *p == '#')
		return 0;

	size_t k = 0;
	while (k < len && conf_key_char((unsigned char)p[k]))
		k++;
	size_t e = k;
	while (e < len && (p[e] == ' ' || p[e] == '\t'))
		e++;
	if (k == 0 || e >= len || p[e] != '=') {
		const char *eq = memchr(p, '=', len);
		if (eq && eq > p) {
			int klen = (int)(eq - p);
			while (klen && isspace((unsigned char)p[klen - 1]))
				klen--;
			if (klen > 64)
				klen = 64;
			return terr_set(err, EINVAL,
					"line %d: invalid key '%.*s': keys are lower-case letters, digits, '_', '.' and '-'",
					lineno, klen, p);
		}
		return terr_set(err, EINVAL, "line %d: expected 'key = value'", lineno);
	}
	for (size_t i = 0; i < out->n; i++)
		if (strlen(out->items[i].key) == k && !memcmp(out->items[i].key, p, k))
			return terr_set(err, EINVAL,
					"line %d: duplicate key '%s' (first set on line %d)",
					lineno, out->items[i].key, out->items[i].line);

	const char *v = p + e + 1;
	size_t vlen = len - e - 1;
	while (vlen && isspace((unsigned char)*v)) {
		v++;
		vlen--;
	}
	if (vlen && *v == '"') {
		char *tmp = malloc(vlen);
		if (!tmp)
			return terr_set(err, ENOMEM, "out of memory");
		size_t tlen;
		const char *why = NULL;
		if (conf_unquote(v, vlen, tmp, &tlen, &why) < 0) {
			free(tmp);
			return terr_set(err, EINVAL, "line %d: %s", lineno, why);
		}
		int r = conf_add(out, p, k, tmp, tlen, lineno, err);
		free(tmp);
		return r;
	}
	return conf_add(out, p, k, v, vlen, lineno, err);
}

int conf_parse(const char *text, size_t len, struct conf *out, struct terr *err)
{
	memset(out, 0, sizeof(*out));
	int lineno = 0;
	size_t pos = 0;
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - text) : len;
		lineno++;
		if (memchr(text + pos, '\0', end - pos)) {
			conf_free(out);
			return terr_set(err, EINVAL, "line %d: unexpected NUL byte (not a text file?)",
					lineno);
		}
		int r = conf_parse_line(out, text + pos, end - pos, lineno, err);
		if (r < 0) {
			conf_free(out);
			return r;
		}
		pos = end + 1;
	}
	return 0;
}

int conf_load(const char *path, struct conf *out, struct terr *err)
{
	memset(out, 0, sizeof(*out));
	FILE *f = fopen(path, "re");
	if (!f)
		return terr_set(err, errno, "cannot read %s: %s", path, strerror(errno));
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 8192;
			/* Configs are small; a huge file is a mistake. */
			if (cap > (16u << 20)) {
				free(buf);
				fclose(f);
				return terr_set(err, EFBIG, "%s: file too large for a config", path);
			}
			char *nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return terr_set(err, ENOMEM, "out of memory");
			}
			buf = nb;
		}
		size_t r = fread(buf + len, 1, cap - len, f);
		len += r;
		if (r == 0)
			break;
	}
	int failed = ferror(f);
	int saved = errno;
	fclose(f);
	if (failed) {
		free(buf);
		return terr_set(err, saved ? saved : EIO, "cannot read %s: %s", path,
				strerror(saved ? saved : EIO));
	}
	int r = conf_parse(buf ? buf : "", len, out, err);
	free(buf);
	if (r < 0)
		return terr_prefix(err, "%s", path);
	return 0;
}

const char *conf_get(const struct conf *c, const char *key)
{
	for (size_t i = 0; c && i < c->n; i++)
		if (!strcmp(c->items[i].key, key))
			return c->items[i].value;
	return NULL;
}

int conf_check_keys(const struct conf *c, const char *const *known,
		    const char *path, struct terr *err)
{
	for (size_t i = 0; i < c->n; i++) {
		int ok = 0;
		for (const char *const *k = known; k && *k; k++)
			if (!strcmp(*k, c->items[i].key)) {
				ok = 1;
				break;
			}
		if (!ok)
			return terr_set(err, EINVAL, "%s: line %d: unknown key '%s'",
					path ? path : "config", c->items[i].line,
					c->items[i].key);
	}
	return 0;
}

void conf_free(struct conf *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->items[i].key);
		free(c->items[i].value);
	}
	free(c->items);
	c->items = NULL;
	c->n = 0;
}

/* Writes one value, quoted when reading it back unquoted would change it. */
static int conf_put_value(FILE *f, const char *v)
{
	size_t len = strlen(v);
	int quote = len && (isspace((unsigned char)v[0]) ||
			    isspace((unsigned char)v[len - 1]) || v[0] == '"');
	if (!quote)
		return fputs(v, f) < 0 ? -1 : 0;
	if (fputc('"', f) == EOF)
		return -1;
	for (const char *p = v; *p; p++) {
		if ((*p == '"' || *p == '\\') && fputc('\\', f) == EOF)
			return -1;
		if (fputc(*p, f) == EOF)
			return -1;
	}
	return fputc('"', f) == EOF ? -1 : 0;
}

int conf_write(const char *path, mode_t mode, const char *const *keys,
	       const char *const *values, size_t n, struct terr *err)
{
	for (size_t i = 0; i < n; i++) {
		if (!keys[i][0])
			return terr_set(err, EINVAL, "empty config key");
		for (const char *p = keys[i]; *p; p++)
			if (!conf_key_char((unsigned char)*p))
				return terr_set(err, EINVAL, "invalid config key '%s'", keys[i]);
		if (strpbrk(values[i], "\r\n"))
			return terr_set(err, EINVAL, "value of '%s' must be one line", keys[i]);
	}

	size_t plen = strlen(path);
	char *tmp = malloc(plen + sizeof(".tmp.XXXXXX"));
	if (!tmp)
		return terr_set(err, ENOMEM, "out of memory");
	memcpy(tmp, path, plen);
	memcpy(tmp + plen, ".tmp.XXXXXX", sizeof(".tmp.XXXXXX"));

	/* Temp file in the same directory + rename: readers see the old or
	 * the new file, never half of one. mkstemp creates it 0600, so the
	 * secrets are never readable by others even before the fchmod. */
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		free(tmp);
		return terr_set(err, e, "cannot create a file next to %s: %s", path,
				strerror(e));
	}
	int e = 0;
	if (fchmod(fd, mode) < 0)
		e = errno;
	FILE *f = e ? NULL : fdopen(fd, "w");
	if (!e && !f)
		e = errno;
	for (size_t i = 0; !e && i < n; i++) {
		if (fprintf(f, "%s = ", keys[i]) < 0 || conf_put_value(f, values[i]) < 0 ||
		    fputc('\n', f) == EOF)
			e = errno ? errno : EIO;
	}
	if (!e && fflush(f) != 0)
		e = errno ? errno : EIO;
	if (!e && fsync(fd) < 0)
		e = errno;
	if (f) {
		if (fclose(f) != 0 && !e)
			e = errno ? errno : EIO;
	} else {
		close(fd);
	}
	if (!e && rename(tmp, path) < 0)
		e = errno;
	if (e) {
		unlink(tmp);
		free(tmp);
		return terr_set(err, e, "cannot write %s: %s", path, strerror(e));
	}
	/* The rename itself reaches the disk with the directory: without
	 * this a power loss could bring back the old file (or none) after
	 * the caller went on as if the new one were there. */
	char *slash = strrchr(tmp, '/');
	if (slash)
		*(slash == tmp ? slash + 1 : slash) = '\0';
	int dfd = open(slash ? tmp : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	free(tmp);
	return 0;
}
