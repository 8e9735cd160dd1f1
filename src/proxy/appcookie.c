/* The app cookie: signing and checking (appcookie.h). */
#include "proxy/appcookie.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define APPCOOKIE_CONTEXT "tessera-app-cookie|"

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static size_t b64_encode(const unsigned char *in, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < n)
			v |= in[i + 2];
		out[o++] = b64url[(v >> 18) & 63];
		out[o++] = b64url[(v >> 12) & 63];
		if (i + 1 < n)
			out[o++] = b64url[(v >> 6) & 63];
		if (i + 2 < n)
			out[o++] = b64url[v & 63];
	}
	out[o] = '\0';
	return o;
}

static int b64_val(char c)
{
	const char *p = c ? strchr(b64url, c) : NULL;
	return p ? (int)(p - b64url) : -1;
}

/* -1 on a character outside the alphabet or an impossible length. */
static long b64_decode(const char *in, size_t n, unsigned char *out, size_t cap)
{
	if (n % 4 == 1)
		return -1;
	size_t o = 0;
	for (size_t i = 0; i < n; i += 4) {
		uint32_t v = 0;
		size_t k = n - i < 4 ? n - i : 4;
		for (size_t j = 0; j < 4; j++) {
			int d = j < k ? b64_val(in[i + j]) : 0;
			if (d < 0)
				return -1;
			v = v << 6 | (uint32_t)d;
		}
		size_t bytes = k - 1;
		if (o + bytes > cap)
			return -1;
		out[o++] = (unsigned char)(v >> 16);
		if (bytes > 1)
			out[o++] = (unsigned char)(v >> 8);
		if (bytes > 2)
			out[o++] = (unsigned char)v;
	}
	return (long)o;
}

static void mac_hex(const char *secret, const char *payload, size_t len, char out[65])
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned mlen = 0;
	size_t cl = strlen(APPCOOKIE_CONTEXT);
	unsigned char *msg = malloc(cl + len);
	if (!msg) {
		memset(out, '0', 64);
		out[64] = '\0';
		return;
	}
	memcpy(msg, APPCOOKIE_CONTEXT, cl);
	memcpy(msg + cl, payload, len);
	HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, cl + len, mac, &mlen);
	free(msg);
	for (unsigned i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

static int check_field(const char *what, const char *v, size_t max, struct terr *err)
{
	size_t n = strlen(v);
	if (!n || n >= max)
		return terr_set(err, EINVAL, "app cookie: %s must be 1 to %zu characters", what, max - 1);
	for (const char *c = v; *c; c++)
		if (*c == '|' || (unsigned char)*c < 0x20 || *c == 0x7f)
			return terr_set(err, EINVAL, "app cookie: %s holds a character it may not", what);
	return 0;
}

int appcookie_sign(const char *secret, const struct appcookie *c, char *out, size_t n, struct terr *err)
{
	int rc;
	if ((rc = check_field("user", c->user, sizeof(c->user), err)) < 0 ||
	    (rc = check_field("session", c->session_id, sizeof(c->session_id), err)) < 0 ||
	    (rc = check_field("target", c->target, sizeof(c->target), err)) < 0 ||
	    (rc = check_field("route", c->route, sizeof(c->route), err)) < 0)
		return rc;
	char payload[900];
	int pl = snprintf(payload, sizeof(payload), "1|%s|%s|%s|%s|%" PRId64, c->user, c->session_id, c->target,
			  c->route, c->expires);
	if (pl < 0 || (size_t)pl >= sizeof(payload))
		return terr_set(err, EINVAL, "app cookie: fields too long");
	char enc[1300];
	size_t el = b64_encode((const unsigned char *)payload, (size_t)pl, enc);
	char mac[65];
	mac_hex(secret, payload, (size_t)pl, mac);
	if (el + 1 + 64 + 1 > n)
		return terr_set(err, E2BIG, "app cookie: buffer too small");
	snprintf(out, n, "%s.%s", enc, mac);
	return 0;
}

/* Splits the next '|' field of *s into out. */
static int next_field(char **s, char *out, size_t n)
{
	char *bar = strchr(*s, '|');
	size_t len = bar ? (size_t)(bar - *s) : strlen(*s);
	if (!len || len >= n)
		return -1;
	memcpy(out, *s, len);
	out[len] = '\0';
	*s = bar ? bar + 1 : *s + len;
	return bar ? 1 : 0;
}

int appcookie_verify(const char *secret, const char *value, const char *route, int64_t now,
		     struct appcookie *out, struct terr *err)
{
	memset(out, 0, sizeof(*out));
	const char *dot = strrchr(value, '.');
	if (!dot || strlen(dot + 1) != 64 || (size_t)(dot - value) > 1300)
		return terr_set(err, EACCES, "the app's cookie is malformed");
	char payload[1000];
	long pl = b64_decode(value, (size_t)(dot - value), (unsigned char *)payload, sizeof(payload) - 1);
	if (pl <= 0)
		return terr_set(err, EACCES, "the app's cookie is malformed");
	payload[pl] = '\0';
	char mac[65];
	mac_hex(secret, payload, (size_t)pl, mac);
	if (strlen(payload) != (size_t)pl || CRYPTO_memcmp(mac, dot + 1, 64) != 0)
		return terr_set(err, EACCES, "the app's cookie is not valid (not signed by this cluster)");
	char *s = payload, ver[8], exp[24];
	if (next_field(&s, ver, sizeof(ver)) != 1 || strcmp(ver, "1") ||
	    next_field(&s, out->user, sizeof(out->user)) != 1 ||
	    next_field(&s, out->session_id, sizeof(out->session_id)) != 1 ||
	    next_field(&s, out->target, sizeof(out->target)) != 1 ||
	    next_field(&s, out->route, sizeof(out->route)) != 1 || next_field(&s, exp, sizeof(exp)) != 0)
		return terr_set(err, EACCES, "the app's cookie is of an unknown version");
	char *end;
	out->expires = strtoll(exp, &end, 10);
	if (*end)
		return terr_set(err, EACCES, "the app's cookie is malformed");
	if (strcmp(out->route, route))
		return terr_set(err, EXDEV, "the app's cookie is for another app");
	if (out->expires <= now)
		return terr_set(err, EKEYEXPIRED, "your access to this app expired");
	return 0;
}

int appcookie_find(const char *h, const char *name, char *out, size_t n)
{
	if (!h)
		return -ENOENT;
	size_t nl = strlen(name);
	const char *s = h;
	while (*s) {
		while (*s == ' ' || *s == '\t' || *s == ';')
			s++;
		const char *e = strchr(s, ';');
		if (!e)
			e = s + strlen(s);
		if ((size_t)(e - s) > nl && !strncmp(s, name, nl) && s[nl] == '=') {
			const char *v = s + nl + 1;
			const char *ve = e;
			while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			if (ve - v >= 2 && *v == '"' && ve[-1] == '"') {
				v++;
				ve--;
			}
			if ((size_t)(ve - v) >= n)
				return -E2BIG;
			memcpy(out, v, (size_t)(ve - v));
			out[ve - v] = '\0';
			return 0;
		}
		s = e;
	}
	return -ENOENT;
}
