/* The app cookie (proxy/appcookie.h): signed, bound to its route, and
 * expiring. */
#include <string.h>

#include "proxy/appcookie.h"
#include "testlib.h"

#define SECRET "0123456789abcdef0123456789abcdef"

static void make(struct appcookie *c, const char *route, int64_t expires)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->user, "u-1");
	strcpy(c->session_id, "s-abc");
	strcpy(c->target, "app:jupyter");
	strcpy(c->route, route);
	c->expires = expires;
}

TEST(signed_value_verifies)
{
	struct appcookie c, got;
	char v[APPCOOKIE_MAX];
	struct terr err = {0};
	make(&c, "10205", 2000);
	CHECK_INT(appcookie_sign(SECRET, &c, v, sizeof(v), &err), 0);
	CHECK(!strpbrk(v, " ;,\"\\"));
	CHECK_INT(appcookie_verify(SECRET, v, "10205", 1000, &got, &err), 0);
	CHECK_STR(got.user, "u-1");
	CHECK_STR(got.session_id, "s-abc");
	CHECK_STR(got.target, "app:jupyter");
	CHECK_INT(got.expires, 2000);
}

TEST(tampered_refused)
{
	struct appcookie c, got;
	char v[APPCOOKIE_MAX];
	struct terr err = {0};
	make(&c, "10205", 2000);
	appcookie_sign(SECRET, &c, v, sizeof(v), &err);
	/* Another payload with the old signature. */
	struct appcookie other = c;
	strcpy(other.session_id, "s-xyz");
	char v2[APPCOOKIE_MAX];
	appcookie_sign(SECRET, &other, v2, sizeof(v2), &err);
	char forged[2 * APPCOOKIE_MAX];
	snprintf(forged, sizeof(forged), "%.*s%s", (int)(strchr(v2, '.') - v2), v2, strchr(v, '.'));
	CHECK_INT(appcookie_verify(SECRET, forged, "10205", 1000, &got, &err), -EACCES);
	/* A flipped signature character. */
	char flip[APPCOOKIE_MAX];
	strcpy(flip, v);
	char *last = flip + strlen(flip) - 1;
	*last = *last == '0' ? '1' : '0';
	CHECK_INT(appcookie_verify(SECRET, flip, "10205", 1000, &got, &err), -EACCES);
	/* Another cluster's secret. */
	CHECK_INT(appcookie_verify("another-secret-of-16+", v, "10205", 1000, &got, &err), -EACCES);
	CHECK_INT(appcookie_verify(SECRET, "garbage", "10205", 1000, &got, &err), -EACCES);
	CHECK_INT(appcookie_verify(SECRET, "", "10205", 1000, &got, &err), -EACCES);
}

TEST(expired_refused)
{
	struct appcookie c, got;
	char v[APPCOOKIE_MAX];
	struct terr err = {0};
	make(&c, "10205", 2000);
	appcookie_sign(SECRET, &c, v, sizeof(v), &err);
	CHECK_INT(appcookie_verify(SECRET, v, "10205", 2000, &got, &err), -EKEYEXPIRED);
	CHECK_INT(appcookie_verify(SECRET, v, "10205", 1999, &got, &err), 0);
}

TEST(other_route_refused)
{
	struct appcookie c, got;
	char v[APPCOOKIE_MAX];
	struct terr err = {0};
	make(&c, "10205", 2000);
	appcookie_sign(SECRET, &c, v, sizeof(v), &err);
	CHECK_INT(appcookie_verify(SECRET, v, "10206", 1000, &got, &err), -EXDEV);
	make(&c, "jupyter.abcd1234.apps.example.org", 2000);
	appcookie_sign(SECRET, &c, v, sizeof(v), &err);
	CHECK_INT(appcookie_verify(SECRET, v, "jupyter.abcd1234.apps.example.org", 1000, &got, &err), 0);
	CHECK_INT(appcookie_verify(SECRET, v, "terminal.abcd1234.apps.example.org", 1000, &got, &err), -EXDEV);
}

TEST(bad_fields_not_signed)
{
	struct appcookie c;
	char v[APPCOOKIE_MAX];
	struct terr err = {0};
	make(&c, "10205", 2000);
	strcpy(c.user, "a|b");
	CHECK_INT(appcookie_sign(SECRET, &c, v, sizeof(v), &err), -EINVAL);
	make(&c, "", 2000);
	CHECK_INT(appcookie_sign(SECRET, &c, v, sizeof(v), &err), -EINVAL);
}

TEST(cookie_found_in_header)
{
	char v[64];
	CHECK_INT(appcookie_find("a=1; tessera_app_10205=xyz; tessera_app=h", "tessera_app_10205", v, sizeof(v)), 0);
	CHECK_STR(v, "xyz");
	CHECK_INT(appcookie_find("a=1; tessera_app_10205=xyz; tessera_app=h", "tessera_app", v, sizeof(v)), 0);
	CHECK_STR(v, "h");
	CHECK_INT(appcookie_find("tessera_app_102050=1", "tessera_app_10205", v, sizeof(v)), -ENOENT);
	CHECK_INT(appcookie_find(NULL, "x", v, sizeof(v)), -ENOENT);
	CHECK_INT(appcookie_find("x=\"q\"", "x", v, sizeof(v)), 0);
	CHECK_STR(v, "q");
}

int main(void)
{
	RUN(signed_value_verifies);
	RUN(tampered_refused);
	RUN(expired_refused);
	RUN(other_route_refused);
	RUN(bad_fields_not_signed);
	RUN(cookie_found_in_header);
	return testlib_done();
}
