/* Request signing: known-answer vectors computed independently with the
 * openssl command line, date handling, skew, tampering, header parsing. */
#include <ctype.h>

#include "common/sign.h"
#include "testlib.h"

#define DATE "Sun, 22 Nov 2026 08:40:00 GMT"
#define HOST "127.0.0.1:8090"
#define BODY "{\"image\":\"x\"}"

/* signing key = HMAC-SHA256("s3cr3t", "20261122"):
 *   printf '%s' 20261122 | openssl dgst -sha256 -mac HMAC -macopt key:s3cr3t
 *   -> 569fb39c7301e4088efedccdc3f4b386b54fe71ffd8dde41d5c35b9c5d2db174
 * body hash: printf '%s' '{"image":"x"}' | openssl dgst -sha256
 *   -> ae2690ffaf7c3254793a5ce8a566b7dd320298a3a5581031a0c417661749fdd2
 * signature:
 *   printf 'POST\n/v1/sessions\nSun, 22 Nov 2026 08:40:00 GMT\n127.0.0.1:8090\nae2690ffaf7c3254793a5ce8a566b7dd320298a3a5581031a0c417661749fdd2' \
 *     | openssl dgst -sha256 -mac HMAC -macopt hexkey:569fb39c7301e4088efedccdc3f4b386b54fe71ffd8dde41d5c35b9c5d2db174 */
#define KAT_POST "93672900864c700c73a193f7db129ea20de96dad43d6214bbb29c04fb3a7e89f"
/* Same key, GET /v1/sessions?all=1 without body (hash of ""):
 *   printf 'GET\n/v1/sessions?all=1\nSun, 22 Nov 2026 08:40:00 GMT\n127.0.0.1:8090\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' \
 *     | openssl dgst -sha256 -mac HMAC -macopt hexkey:569fb39c7301e4088efedccdc3f4b386b54fe71ffd8dde41d5c35b9c5d2db174 */
#define KAT_GET "7043869fba019a13423d56ea7436a9d715da7b881f5195e68b44c9dcd6acd35e"

static time_t kat_time(void)
{
	time_t t;
	CHECK_INT(sign_parse_date(DATE, &t, NULL), 0);
	return t;
}

TEST(known_answers)
{
	char sig[SIGN_HEX_LEN + 1];
	struct terr err = {0};
	CHECK_INT(sign_compute("s3cr3t", "POST", "/v1/sessions", DATE, HOST, BODY,
			       strlen(BODY), sig, &err), 0);
	CHECK_STR(sig, KAT_POST);
	CHECK_INT(sign_compute("s3cr3t", "GET", "/v1/sessions?all=1", DATE, HOST, NULL, 0,
			       sig, &err), 0);
	CHECK_STR(sig, KAT_GET);
	/* Method is upper-cased before signing. */
	CHECK_INT(sign_compute("s3cr3t", "get", "/v1/sessions?all=1", DATE, HOST, "", 0,
			       sig, &err), 0);
	CHECK_STR(sig, KAT_GET);

	char hash[SIGN_HEX_LEN + 1];
	sign_sha256_hex("", 0, hash);
	CHECK_STR(hash, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	sign_sha256_hex(BODY, strlen(BODY), hash);
	CHECK_STR(hash, "ae2690ffaf7c3254793a5ce8a566b7dd320298a3a5581031a0c417661749fdd2");

	char auth[256];
	CHECK_INT(sign_authorization("AK", "s3cr3t", "POST", "/v1/sessions", DATE, HOST, BODY,
				     strlen(BODY), auth, sizeof(auth), &err), 0);
	CHECK_STR(auth, "TESSERA-HMAC-SHA256 Credential=AK, Signature=" KAT_POST);
	CHECK_INT(sign_authorization("AK", "s3cr3t", "POST", "/v1/sessions", DATE, HOST, BODY,
				     strlen(BODY), auth, 40, &err), -ENOBUFS);
	CHECK_INT(sign_authorization("A K", "s3cr3t", "POST", "/", DATE, HOST, NULL, 0,
				     auth, sizeof(auth), &err), -EINVAL);
	CHECK_INT(sign_compute("s3cr3t", "GET", "/", "yesterday", HOST, NULL, 0, sig, &err),
		  -EINVAL);
}

TEST(dates)
{
	char buf[64];
	time_t t = kat_time();
	CHECK_INT(t, 1795336800);  /* date -u -d '2026-11-22 08:40:00' +%s */
	sign_format_date(t, buf, sizeof(buf));
	CHECK_STR(buf, DATE);
	sign_format_date(0, buf, sizeof(buf));
	CHECK_STR(buf, "Thu, 01 Jan 1970 00:00:00 GMT");
	time_t back;
	CHECK_INT(sign_parse_date("Thu, 29 Feb 2024 23:59:59 GMT", &back, NULL), 0);
	sign_format_date(back, buf, sizeof(buf));
	CHECK_STR(buf, "Thu, 29 Feb 2024 23:59:59 GMT");

	static const char *const bad[] = {
		"", "Sun, 22 Nov 2026 08:40:00", "Sun, 22 Nov 2026 08:40:00 UTC",
		"Mon, 22 Nov 2026 08:40:00 GMT",   /* wrong weekday */
		"Sun, 31 Feb 2026 08:40:00 GMT",   /* no such day */
		"Sun, 22 Nov 2026 24:40:00 GMT", "Sun, 22 Nov 2026 08:60:00 GMT",
		"Sun, 22 Nov 2026 08:00:60 GMT",   /* leap second: found by fuzz_sign */
		"Sun, 22 Xyz 2026 08:40:00 GMT", "Sun,  2 Nov 2026 08:40:00 GMT",
		"Sunday, 22-Nov-26 08:40:00 GMT", "2026-11-22T08:40:00Z",
		"Sun, 22 Nov 2026 08:40:00 GMT ", "Sun, 00 Nov 2026 08:40:00 GMT",
		"Sun, 22 Nov 1969 08:40:00 GMT", "Sun, 2a Nov 2026 08:40:00 GMT",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct terr err = {0};
		testlib_checks++;
		if (sign_parse_date(bad[i], &back, &err) != -EINVAL)
			FAILF("accepted date \"%s\"", bad[i]);
		else if (!strstr(err.msg, "IMF-fixdate"))
			FAILF("unhelpful message \"%s\"", err.msg);
	}
	CHECK_INT(sign_parse_date(NULL, &back, NULL), -EINVAL);
}

static int verify_at(time_t now, const char *sig, const char *method, const char *path,
		     const char *host, const char *body, struct terr *err)
{
	return sign_verify("s3cr3t", sig, method, path, DATE, host, body,
			   body ? strlen(body) : 0, now, err);
}

TEST(verify_and_skew)
{
	time_t t = kat_time();
	struct terr err = {0};
	CHECK_INT(verify_at(t, KAT_POST, "POST", "/v1/sessions", HOST, BODY, &err), 0);
	/* Upper-case hex from another client is the same signature. */
	char upper[SIGN_HEX_LEN + 1];
	for (int i = 0; i <= SIGN_HEX_LEN; i++)
		upper[i] = (char)(KAT_POST[i] >= 'a' && KAT_POST[i] <= 'f' ? KAT_POST[i] - 32
									 : KAT_POST[i]);
	CHECK_INT(verify_at(t, upper, "POST", "/v1/sessions", HOST, BODY, &err), 0);

	CHECK_INT(verify_at(t + 14 * 60, KAT_POST, "POST", "/v1/sessions", HOST, BODY, &err), 0);
	CHECK_INT(verify_at(t - 14 * 60, KAT_POST, "POST", "/v1/sessions", HOST, BODY, &err), 0);
	CHECK_INT(verify_at(t + 16 * 60, KAT_POST, "POST", "/v1/sessions", HOST, BODY, &err),
		  -EACCES);
	CHECK_CONTAINS(err.msg, "16m00s behind");
	CHECK_CONTAINS(err.msg, "clock");
	CHECK_INT(verify_at(t - 16 * 60, KAT_POST, "POST", "/v1/sessions", HOST, BODY, &err),
		  -EACCES);
	CHECK_CONTAINS(err.msg, "ahead of");
}

TEST(tampering_refused)
{
	time_t t = kat_time();
	struct terr err = {0};
	CHECK_INT(verify_at(t, KAT_POST, "POST", "/v1/sessions?all=1", HOST, BODY, &err), -EACCES);
	CHECK_CONTAINS(err.msg, "signature does not match");
	CHECK_INT(verify_at(t, KAT_POST, "POST", "/v1/sessions", HOST, "{\"image\":\"y\"}", &err),
		  -EACCES);
	CHECK_INT(verify_at(t, KAT_POST, "POST", "/v1/sessions", "evil:8090", BODY, &err), -EACCES);
	CHECK_INT(verify_at(t, KAT_POST, "PUT", "/v1/sessions", HOST, BODY, &err), -EACCES);
	CHECK_INT(verify_at(t, KAT_POST, "POST", "/v1/sessions", HOST, NULL, &err), -EACCES);
	CHECK_INT(sign_verify("other", KAT_POST, "POST", "/v1/sessions", DATE, HOST, BODY,
			      strlen(BODY), t, &err), -EACCES);
	/* A date changed in transit changes the signed string. */
	CHECK_INT(sign_verify("s3cr3t", KAT_POST, "POST", "/v1/sessions",
			      "Sun, 22 Nov 2026 08:40:01 GMT", HOST, BODY, strlen(BODY), t, &err),
		  -EACCES);
	CHECK_INT(verify_at(t, "abc", "POST", "/v1/sessions", HOST, BODY, &err), -EACCES);
	CHECK_INT(sign_verify("s3cr3t", KAT_POST, "POST", "/v1/sessions", "", HOST, BODY,
			      strlen(BODY), t, &err), -EACCES);
	CHECK_CONTAINS(err.msg, "Date");
	CHECK_INT(sign_verify("s3cr3t", KAT_POST, "POST", "/v1/sessions", "garbage", HOST, BODY,
			      strlen(BODY), t, &err), -EACCES);
	CHECK_INT(err.code, EACCES);
}

/* A streamed body signed by its hash: the same signature as the body's,
 * any other hash refused, malformed hashes refused. */
TEST(hashed_bodies)
{
	static const char body[] = "{\"image\":\"python\"}";
	char hash[SIGN_HEX_LEN + 1], sig[SIGN_HEX_LEN + 1], other[SIGN_HEX_LEN + 1];
	struct terr err = {0};
	sign_sha256_hex(body, strlen(body), hash);
	CHECK_INT(sign_compute("s3cr3t", "PUT", "/v1/x", DATE, HOST, body, strlen(body), sig, &err), 0);
	time_t now = kat_time();
	CHECK_INT(sign_verify_hashed("s3cr3t", sig, "PUT", "/v1/x", DATE, HOST, hash, now, &err), 0);
	char upper[SIGN_HEX_LEN + 1];
	for (int i = 0; i <= SIGN_HEX_LEN; i++)
		upper[i] = (char)toupper((unsigned char)hash[i]);
	CHECK_INT(sign_verify_hashed("s3cr3t", sig, "PUT", "/v1/x", DATE, HOST, upper, now, &err), 0);
	sign_sha256_hex("other", 5, other);
	CHECK_INT(sign_verify_hashed("s3cr3t", sig, "PUT", "/v1/x", DATE, HOST, other, now, &err), -EACCES);
	CHECK_INT(sign_verify_hashed("s3cr3t", sig, "PUT", "/v1/x", DATE, HOST, "abc", now, &err), -EACCES);
	CHECK_CONTAINS(err.msg, "64 hex digits");
	CHECK_INT(sign_verify_hashed("s3cr3t", sig, "PUT", "/v1/x", DATE, HOST, NULL, now, &err), -EACCES);
	char bad[SIGN_HEX_LEN + 1];
	memcpy(bad, hash, sizeof(bad));
	bad[10] = 'g';
	CHECK_INT(sign_verify_hashed("s3cr3t", sig, "PUT", "/v1/x", DATE, HOST, bad, now, &err), -EACCES);
	/* The header built from the hash is the one built from the body. */
	char a1[600], a2[600];
	CHECK_INT(sign_authorization("ak", "s3cr3t", "PUT", "/v1/x", DATE, HOST, body, strlen(body), a1,
				     sizeof(a1), &err), 0);
	CHECK_INT(sign_authorization_hashed("ak", "s3cr3t", "PUT", "/v1/x", DATE, HOST, hash, a2, sizeof(a2),
					    &err), 0);
	CHECK_STR(a1, a2);
}

TEST(parse_authorization)
{
	char ak[64], sig[SIGN_HEX_LEN + 1];
	struct terr err = {0};
	CHECK_INT(sign_parse_authorization("TESSERA-HMAC-SHA256 Credential=AK1, Signature=" KAT_POST,
					   ak, sizeof(ak), sig, &err), 0);
	CHECK_STR(ak, "AK1");
	CHECK_STR(sig, KAT_POST);
	CHECK_INT(sign_parse_authorization("TESSERA-HMAC-SHA256  Signature=" KAT_POST ",Credential=agent:n1",
					   ak, sizeof(ak), sig, &err), 0);
	CHECK_STR(ak, "agent:n1");

	static const struct { const char *h, *why; } bad[] = {
		{"", "missing Authorization"},
		{"Basic dXNlcjpwYXNz", "unsupported authorization scheme 'Basic'"},
		{"TESSERA-HMAC-SHA256", "unsupported"},
		{"TESSERA-HMAC-SHA256X Credential=a, Signature=" KAT_POST, "unsupported"},
		{"TESSERA-HMAC-SHA256 ", "no Credential"},
		{"TESSERA-HMAC-SHA256 Credential=AK", "no Signature"},
		{"TESSERA-HMAC-SHA256 Signature=" KAT_POST, "no Credential"},
		{"TESSERA-HMAC-SHA256 Credential=, Signature=" KAT_POST, "no Credential"},
		{"TESSERA-HMAC-SHA256 Credential=AK, Signature=abc", "64 hex digits"},
		{"TESSERA-HMAC-SHA256 Credential=AK, Signature="
		 "zz672900864c700c73a193f7db129ea20de96dad43d6214bbb29c04fb3a7e89f", "hex digits"},
		{"TESSERA-HMAC-SHA256 Credential=AK, Credential=B, Signature=" KAT_POST, "repeated"},
		{"TESSERA-HMAC-SHA256 Credential=AK, Region=x, Signature=" KAT_POST, "'Region'"},
		{"TESSERA-HMAC-SHA256 Credential=A K, Signature=" KAT_POST, "malformed"},
		{"TESSERA-HMAC-SHA256 Credential AK, Signature=" KAT_POST, "malformed"},
		{"TESSERA-HMAC-SHA256 Credential=0123456789012345678901234567890123456789"
		 "0123456789012345678901234567890123456789, Signature=" KAT_POST, "too long"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		testlib_checks++;
		int r = sign_parse_authorization(bad[i].h, ak, sizeof(ak), sig, &err);
		if (r != -EACCES)
			FAILF("header \"%s\" gave %d", bad[i].h, r);
		else if (!strstr(err.msg, bad[i].why))
			FAILF("header \"%s\": message \"%s\" lacks \"%s\"", bad[i].h, err.msg,
			      bad[i].why);
	}
	CHECK_INT(sign_parse_authorization(NULL, ak, sizeof(ak), sig, &err), -EACCES);
}

TEST(random_and_equal)
{
	char a[65], b[65];
	struct terr err = {0};
	CHECK_INT(sign_random_hex(32, a, sizeof(a), &err), 0);
	CHECK_INT(strlen(a), 64);
	CHECK_INT(strspn(a, "0123456789abcdef"), 64);
	CHECK_INT(sign_random_hex(32, b, sizeof(b), &err), 0);
	CHECK(!sign_equal(a, b));
	CHECK(sign_equal(a, a));
	CHECK(!sign_equal("abc", "abcd"));
	CHECK(sign_equal("", ""));
	CHECK_INT(sign_random_hex(32, a, 64, &err), -EINVAL);
	CHECK_INT(sign_random_hex(0, a, sizeof(a), &err), -EINVAL);
}

int main(void)
{
	RUN(known_answers);
	RUN(dates);
	RUN(verify_and_skew);
	RUN(tampering_refused);
	RUN(hashed_bodies);
	RUN(parse_authorization);
	RUN(random_and_equal);
	return testlib_done();
}
