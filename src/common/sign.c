/* Request signing (common/sign.h) over OpenSSL 3 libcrypto, using only the
 * non-deprecated one-shot APIs (EVP_Q_mac, EVP_Digest). */
#include "common/sign.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const sign_days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const sign_months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
					  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

static void sign_hex(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

void sign_format_date(time_t t, char *buf, size_t n)
{
	struct tm tm;
	/* Not strftime: its day and month names follow the locale. */
	if (!gmtime_r(&t, &tm)) {
		if (n)
			buf[0] = '\0';
		return;
	}
	snprintf(buf, n, "%s, %02d %s %04d %02d:%02d:%02d GMT", sign_days[tm.tm_wday],
		 tm.tm_mday, sign_months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour,
		 tm.tm_min, tm.tm_sec);
}

static int sign_digits(const char *p, int n)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)p[i]))
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	return v;
}

int sign_parse_date(const char *date, time_t *out, struct terr *err)
{
	/* "Sun, 22 Nov 2026 08:40:00 GMT": fixed layout, 29 characters. */
	static const char layout[] = "Ddd, DD Mmm YYYY HH:MM:SS GMT";
	if (!date || strlen(date) != sizeof(layout) - 1)
		goto bad;
	int wday = -1, mon = -1;
	for (int i = 0; i < 7; i++)
		if (!memcmp(date, sign_days[i], 3))
			wday = i;
	for (int i = 0; i < 12; i++)
		if (!memcmp(date + 8, sign_months[i], 3))
			mon = i;
	if (wday < 0 || mon < 0 || memcmp(date + 3, ", ", 2) || date[7] != ' ' ||
	    date[11] != ' ' || date[16] != ' ' || date[19] != ':' || date[22] != ':' ||
	    strcmp(date + 25, " GMT"))
		goto bad;
	int mday = sign_digits(date + 5, 2), year = sign_digits(date + 12, 4);
	int hour = sign_digits(date + 17, 2), min = sign_digits(date + 20, 2);
	int sec = sign_digits(date + 23, 2);
	/* Leap second 60 is refused: time_t cannot say it, and no clock
	 * that signs requests produces it. */
	if (mday < 1 || year < 1970 || hour < 0 || hour > 23 || min < 0 || min > 59 ||
	    sec < 0 || sec > 59)
		goto bad;
	struct tm tm = {.tm_year = year - 1900, .tm_mon = mon, .tm_mday = mday,
			.tm_hour = hour, .tm_min = min, .tm_sec = sec};
	time_t t = timegm(&tm);
	struct tm back;
	/* timegm normalizes "31 Feb"; a round trip catches it, and the day
	 * name must be the one of that date. */
	if (t == (time_t)-1 || !gmtime_r(&t, &back) || back.tm_mday != mday ||
	    back.tm_mon != mon || back.tm_wday != wday)
		goto bad;
	*out = t;
	return 0;
bad:
	return terr_set(err, EINVAL,
			"invalid Date '%.40s': expected an IMF-fixdate like 'Sun, 22 Nov 2026 08:40:00 GMT'",
			date ? date : "");
}

void sign_sha256_hex(const void *data, size_t len, char out[SIGN_HEX_LEN + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (!EVP_Digest(data ? data : "", len, md, &mdlen, EVP_sha256(), NULL) ||
	    mdlen != 32) {
		/* Only on a broken libcrypto; an empty string never matches
		 * a real signature, so verification fails closed. */
		out[0] = '\0';
		return;
	}
	sign_hex(md, 32, out);
}

static int sign_hmac(const void *key, size_t klen, const void *data, size_t dlen,
		     unsigned char out[32], struct terr *err)
{
	size_t outlen = 0;
	if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, klen, data, dlen, out,
		       32, &outlen) || outlen != 32)
		return terr_set(err, EIO, "HMAC-SHA256 failed in libcrypto");
	return 0;
}

/* The signature over a body known by its hex SHA-256 (body_hash). */
static int sign_compute_hashed(const char *secret, const char *method, const char *path_query,
			       const char *date, const char *host, const char *body_hash,
			       char out[SIGN_HEX_LEN + 1], struct terr *err);

int sign_compute(const char *secret, const char *method, const char *path_query,
		 const char *date, const char *host, const void *body,
		 size_t body_len, char out[SIGN_HEX_LEN + 1], struct terr *err)
{
	char body_hash[SIGN_HEX_LEN + 1];
	sign_sha256_hex(body, body ? body_len : 0, body_hash);
	return sign_compute_hashed(secret, method, path_query, date, host, body_hash, out, err);
}

static int sign_compute_hashed(const char *secret, const char *method, const char *path_query,
			       const char *date, const char *host, const char *body_hash,
			       char out[SIGN_HEX_LEN + 1], struct terr *err)
{
	time_t t;
	int r = sign_parse_date(date, &t, err);
	if (r < 0)
		return r;
	struct tm tm;
	gmtime_r(&t, &tm);
	char day[16];
	snprintf(day, sizeof(day), "%04d%02d%02d", (tm.tm_year + 1900) % 10000,
		 (tm.tm_mon + 1) % 100, tm.tm_mday % 100);

	unsigned char key[32], mac[32];
	r = sign_hmac(secret, strlen(secret), day, strlen(day), key, err);
	if (r < 0)
		return r;

	size_t mlen = strlen(method);
	size_t len = mlen + strlen(path_query) + strlen(date) + strlen(host) +
		     SIGN_HEX_LEN + 5;
	char *msg = malloc(len);
	if (!msg)
		return terr_set(err, ENOMEM, "out of memory");
	size_t o = 0;
	for (size_t i = 0; i < mlen; i++)
		msg[o++] = (char)toupper((unsigned char)method[i]);
	o += (size_t)snprintf(msg + o, len - o, "\n%s\n%s\n%s\n%s", path_query, date,
			      host, body_hash);
	r = sign_hmac(key, sizeof(key), msg, o, mac, err);
	OPENSSL_cleanse(key, sizeof(key));
	free(msg);
	if (r < 0)
		return r;
	sign_hex(mac, sizeof(mac), out);
	return 0;
}

int sign_authorization(const char *access_key, const char *secret,
		       const char *method, const char *path_query,
		       const char *date, const char *host, const void *body,
		       size_t body_len, char *out, size_t n, struct terr *err)
{
	char body_hash[SIGN_HEX_LEN + 1];
	sign_sha256_hex(body, body ? body_len : 0, body_hash);
	return sign_authorization_hashed(access_key, secret, method, path_query, date, host, body_hash, out, n,
					 err);
}

int sign_authorization_hashed(const char *access_key, const char *secret, const char *method,
			      const char *path_query, const char *date, const char *host,
			      const char *body_hash, char *out, size_t n, struct terr *err)
{
	if (!access_key[0] || strpbrk(access_key, " ,\t\r\n"))
		return terr_set(err, EINVAL,
				"access key '%.64s' is empty or contains spaces or commas",
				access_key);
	char sig[SIGN_HEX_LEN + 1];
	int r = sign_compute_hashed(secret, method, path_query, date, host, body_hash, sig, err);
	if (r < 0)
		return r;
	int w = snprintf(out, n, SIGN_SCHEME " Credential=%s, Signature=%s", access_key,
			 sig);
	if (w < 0 || (size_t)w >= n)
		return terr_set(err, ENOBUFS, "authorization header buffer too small");
	return 0;
}

/* Reads "Name=value" at *pp up to ',' or the end; trims spaces. */
static int sign_read_param(const char **pp, const char **name, size_t *nlen,
			   const char **val, size_t *vlen)
{
	const char *p = *pp;
	while (*p == ' ')
		p++;
	*name = p;
	while (*p && *p != '=' && *p != ',' && *p != ' ')
		p++;
	*nlen = (size_t)(p - *name);
	if (*p != '=' || *nlen == 0)
		return -1;
	p++;
	*val = p;
	while (*p && *p != ',' && *p != ' ')
		p++;
	*vlen = (size_t)(p - *val);
	while (*p == ' ')
		p++;
	if (*p == ',')
		p++;
	else if (*p)
		return -1;
	*pp = p;
	return 0;
}

int sign_parse_authorization(const char *header, char *access_key,
			     size_t ak_len, char sig[SIGN_HEX_LEN + 1],
			     struct terr *err)
{
	static const char expected[] =
		"expected '" SIGN_SCHEME " Credential=<access key>, Signature=<hex>'";
	if (!header || !*header)
		return terr_set(err, EACCES, "missing Authorization header: requests must be signed (%s)",
				expected);
	size_t slen = strlen(SIGN_SCHEME);
	if (strncmp(header, SIGN_SCHEME, slen) || header[slen] != ' ') {
		size_t w = strcspn(header, " ");
		return terr_set(err, EACCES,
				"unsupported authorization scheme '%.*s': %s",
				(int)(w > 40 ? 40 : w), header, expected);
	}
	const char *p = header + slen, *cred = NULL, *sg = NULL;
	size_t cred_len = 0, sg_len = 0;
	while (*p == ' ')
		p++;
	while (*p) {
		const char *name, *val;
		size_t nlen, vlen;
		if (sign_read_param(&p, &name, &nlen, &val, &vlen) < 0)
			return terr_set(err, EACCES, "malformed Authorization header: %s",
					expected);
		if (nlen == 10 && !memcmp(name, "Credential", 10) && !cred) {
			cred = val;
			cred_len = vlen;
		} else if (nlen == 9 && !memcmp(name, "Signature", 9) && !sg) {
			sg = val;
			sg_len = vlen;
		} else {
			return terr_set(err, EACCES,
					"malformed Authorization header: unexpected or repeated '%.*s' (%s)",
					(int)(nlen > 40 ? 40 : nlen), name, expected);
		}
	}
	if (!cred || !cred_len)
		return terr_set(err, EACCES, "malformed Authorization header: no Credential (%s)",
				expected);
	if (!sg)
		return terr_set(err, EACCES, "malformed Authorization header: no Signature (%s)",
				expected);
	if (sg_len != SIGN_HEX_LEN)
		return terr_set(err, EACCES,
				"malformed Authorization header: Signature must be %d hex digits",
				SIGN_HEX_LEN);
	for (size_t i = 0; i < sg_len; i++)
		if (!isxdigit((unsigned char)sg[i]))
			return terr_set(err, EACCES,
					"malformed Authorization header: Signature must be %d hex digits",
					SIGN_HEX_LEN);
	if (cred_len >= ak_len)
		return terr_set(err, EACCES,
				"malformed Authorization header: Credential too long");
	memcpy(access_key, cred, cred_len);
	access_key[cred_len] = '\0';
	for (size_t i = 0; i < SIGN_HEX_LEN; i++)
		sig[i] = (char)tolower((unsigned char)sg[i]);
	sig[SIGN_HEX_LEN] = '\0';
	return 0;
}

int sign_verify(const char *secret, const char *sig_hex, const char *method,
		const char *path_query, const char *date, const char *host,
		const void *body, size_t body_len, time_t now,
		struct terr *err)
{
	char body_hash[SIGN_HEX_LEN + 1];
	sign_sha256_hex(body, body ? body_len : 0, body_hash);
	return sign_verify_hashed(secret, sig_hex, method, path_query, date, host, body_hash, now, err);
}

int sign_verify_hashed(const char *secret, const char *sig_hex, const char *method,
		       const char *path_query, const char *date, const char *host,
		       const char *body_hash, time_t now, struct terr *err)
{
	if (!body_hash || strlen(body_hash) != SIGN_HEX_LEN)
		return terr_set(err, EACCES, "the body's SHA-256 must be 64 hex digits");
	char lhash[SIGN_HEX_LEN + 1];
	for (size_t i = 0; i <= SIGN_HEX_LEN; i++) {
		lhash[i] = (char)tolower((unsigned char)body_hash[i]);
		if (i < SIGN_HEX_LEN && !isxdigit((unsigned char)lhash[i]))
			return terr_set(err, EACCES, "the body's SHA-256 must be 64 hex digits");
	}
	time_t t;
	if (!date || !*date)
		return terr_set(err, EACCES, "missing Date header: signed requests need one");
	struct terr inner = {0};
	if (sign_parse_date(date, &t, &inner) < 0)
		return terr_set(err, EACCES, "%s", inner.msg);
	long long skew = (long long)t - (long long)now;
	long long abs_skew = skew < 0 ? -skew : skew;
	if (abs_skew > SIGN_MAX_SKEW_S)
		return terr_set(err, EACCES,
				"request Date is %lldm%02llds %s the server's clock (at most %d minutes allowed): fix the client's clock",
				abs_skew / 60, abs_skew % 60, skew < 0 ? "behind" : "ahead of",
				SIGN_MAX_SKEW_S / 60);
	char expect[SIGN_HEX_LEN + 1];
	int r = sign_compute_hashed(secret, method, path_query, date, host, lhash, expect, &inner);
	if (r < 0)
		return terr_set(err, r == -ENOMEM ? ENOMEM : EACCES, "%s", inner.msg);
	char lower[SIGN_HEX_LEN + 1];
	size_t n = sig_hex ? strlen(sig_hex) : 0;
	if (n != SIGN_HEX_LEN)
		return terr_set(err, EACCES, "signature does not match (wrong length)");
	for (size_t i = 0; i <= SIGN_HEX_LEN; i++)
		lower[i] = (char)tolower((unsigned char)sig_hex[i]);
	if (!sign_equal(expect, lower))
		return terr_set(err, EACCES,
				"signature does not match: wrong secret key, or the request was changed in transit");
	return 0;
}

int sign_random_hex(size_t nbytes, char *out, size_t n, struct terr *err)
{
	if (nbytes == 0 || nbytes > 1024 || n < 2 * nbytes + 1)
		return terr_set(err, EINVAL, "random token: bad size %zu for a %zu-byte buffer",
				nbytes, n);
	unsigned char buf[1024];
	if (RAND_bytes(buf, (int)nbytes) != 1)
		return terr_set(err, EIO, "cannot get random bytes from libcrypto");
	sign_hex(buf, nbytes, out);
	OPENSSL_cleanse(buf, nbytes);
	return 0;
}

bool sign_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	/* The length is not secret (signatures are fixed-size); the bytes are. */
	if (la != lb)
		return false;
	return CRYPTO_memcmp(a, b, la) == 0;
}
