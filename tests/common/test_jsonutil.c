/* common/jsonutil.c: exact printing of milli amounts, typed field access
 * with messages naming the field, lossy UTF-8 strings. */
#include "common/jsonutil.h"
#include "testlib.h"

#include <stdlib.h>

/* Dumps jsonutil_milli(m) inside an array (scalars need JSON_ENCODE_ANY). */
static void milli_prints(int64_t m, const char *want, int line)
{
	json_t *v = jsonutil_milli(m);
	json_t *arr = json_array();
	json_array_append_new(arr, v);
	char *s = json_dumps(arr, JSONUTIL_DUMP_FLAGS);
	char expect[64];
	snprintf(expect, sizeof(expect), "[%s]", want);
	testlib_checks++;
	if (!s || strcmp(s, expect) != 0)
		FAILF("line %d: milli %lld printed %s, expected %s", line, (long long)m,
		      s ? s : "(null)", expect);
	free(s);
	/* and jsonutil_dump prints the same */
	s = jsonutil_dump(arr);
	CHECK_STR(s, expect);
	free(s);
	/* reading it back gives the same milli */
	json_t *obj = json_pack("{s:O}", "v", json_array_get(arr, 0));
	int64_t back = -1;
	CHECK_INT(jsonutil_get_milli(obj, "v", "v", &back, NULL, NULL), 0);
	CHECK_INT(back, m);
	json_decref(obj);
	json_decref(arr);
}
#define MILLI_PRINTS(m, w) milli_prints((m), (w), __LINE__)

TEST(milli_printing)
{
	MILLI_PRINTS(500, "0.5");
	MILLI_PRINTS(100, "0.1");
	MILLI_PRINTS(125, "0.125");
	MILLI_PRINTS(2000, "2");
	MILLI_PRINTS(0, "0");
	MILLI_PRINTS(1, "0.001");
	MILLI_PRINTS(10, "0.01");
	MILLI_PRINTS(334, "0.334");
	MILLI_PRINTS(300, "0.3");
	MILLI_PRINTS(1500, "1.5");
	MILLI_PRINTS(1024001, "1024.001");
	MILLI_PRINTS(999999, "999.999");
	MILLI_PRINTS(1234567, "1234.567");
	MILLI_PRINTS(16000, "16");
	json_t *v = jsonutil_milli(2000);
	CHECK(json_is_integer(v));
	json_decref(v);
	v = jsonutil_milli(500);
	CHECK(json_is_real(v));
	json_decref(v);
}

static json_t *obj(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, 0, &je);
	if (!v)
		FAILF("bad test JSON %s: %s", text, je.text);
	return v;
}

TEST(get_string)
{
	json_t *o = obj("{\"s\":\"hello\",\"n\":5,\"z\":null,\"e\":\"\"}");
	const char *out = "untouched";
	bool present = true;
	struct terr err = {0};
	CHECK_INT(jsonutil_get_string(o, "s", "x.s", &out, &present, &err), 0);
	CHECK_STR(out, "hello");
	CHECK(present);
	CHECK_INT(jsonutil_get_string(o, "e", "x.e", &out, &present, &err), 0);
	CHECK_STR(out, "");
	CHECK(present);
	out = "untouched";
	CHECK_INT(jsonutil_get_string(o, "missing", "x.m", &out, &present, &err), 0);
	CHECK(!present);
	CHECK_STR(out, "untouched");
	present = true;
	CHECK_INT(jsonutil_get_string(o, "z", "x.z", &out, &present, &err), 0);
	CHECK(!present);
	CHECK_STR(out, "untouched");
	CHECK_INT(jsonutil_get_string(o, "missing", "x.m", &out, NULL, &err), 0);
	CHECK_INT(jsonutil_get_string(o, "n", "x.n", &out, &present, &err), -EINVAL);
	CHECK_INT(err.code, EINVAL);
	CHECK_CONTAINS(err.msg, "x.n");
	CHECK_CONTAINS(err.msg, "string");
	CHECK_STR(out, "untouched");
	json_decref(o);
}

TEST(get_int)
{
	json_t *o = obj("{\"i\":42,\"neg\":-3,\"r\":1.5,\"s\":\"4\",\"b\":true,\"z\":null}");
	int64_t v = 7;
	bool present = false;
	struct terr err = {0};
	CHECK_INT(jsonutil_get_int(o, "i", "count", &v, &present, &err), 0);
	CHECK_INT(v, 42);
	CHECK(present);
	CHECK_INT(jsonutil_get_int(o, "neg", "count", &v, &present, &err), 0);
	CHECK_INT(v, -3);
	v = 7;
	CHECK_INT(jsonutil_get_int(o, "nope", "count", &v, &present, &err), 0);
	CHECK(!present);
	CHECK_INT(v, 7);
	present = true;
	CHECK_INT(jsonutil_get_int(o, "z", "count", &v, &present, &err), 0);
	CHECK(!present);
	const char *bad[] = {"r", "s", "b"};
	for (int i = 0; i < 3; i++) {
		memset(&err, 0, sizeof(err));
		CHECK_INT(jsonutil_get_int(o, bad[i], "the.count", &v, &present, &err), -EINVAL);
		CHECK_CONTAINS(err.msg, "the.count");
		CHECK_CONTAINS(err.msg, "integer");
		CHECK_INT(v, 7);
	}
	json_decref(o);
}

TEST(get_milli)
{
	json_t *o = obj("{\"half\":0.5,\"s\":\"0.25\",\"two\":2,\"real2\":2.0,\"tenth\":0.1,"
			"\"zero\":0,\"neg\":-1,\"negr\":-0.5,\"negs\":\"-1\",\"four\":0.1234,"
			"\"fours\":\"0.1234\",\"junk\":\"abc\",\"b\":false,\"arr\":[1],\"z\":null,"
			"\"huge\":1e13,\"hugei\":9223372036854775807,\"exp\":\"1e3\",\"sp\":\" 1.5 \"}");
	int64_t v = 9;
	bool present = false;
	struct terr err = {0};
	CHECK_INT(jsonutil_get_milli(o, "half", "cpu", &v, &present, &err), 0);
	CHECK_INT(v, 500);
	CHECK(present);
	CHECK_INT(jsonutil_get_milli(o, "s", "cpu", &v, NULL, &err), 0);
	CHECK_INT(v, 250);
	CHECK_INT(jsonutil_get_milli(o, "two", "cpu", &v, NULL, &err), 0);
	CHECK_INT(v, 2000);
	CHECK_INT(jsonutil_get_milli(o, "real2", "cpu", &v, NULL, &err), 0);
	CHECK_INT(v, 2000);
	CHECK_INT(jsonutil_get_milli(o, "tenth", "cpu", &v, NULL, &err), 0);
	CHECK_INT(v, 100);
	CHECK_INT(jsonutil_get_milli(o, "zero", "cpu", &v, NULL, &err), 0);
	CHECK_INT(v, 0);
	v = 9;
	CHECK_INT(jsonutil_get_milli(o, "absent", "cpu", &v, &present, &err), 0);
	CHECK(!present);
	CHECK_INT(v, 9);
	present = true;
	CHECK_INT(jsonutil_get_milli(o, "z", "cpu", &v, &present, &err), 0);
	CHECK(!present);
	CHECK_INT(v, 9);
	/* " 1.5 ": the amount exactly, as a person would refuse it elsewhere
	 * (units.c skips spaces for conf files; issue 27). */
	json_object_set_new(o, "nul", json_stringn("1\0x", 3));
	const char *bad[] = {"neg", "negr", "negs", "four", "fours", "junk", "b", "arr",
			     "huge", "hugei", "exp", "sp", "nul"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		int rc = jsonutil_get_milli(o, bad[i], "resources.cpu", &v, &present, &err);
		testlib_checks++;
		if (rc >= 0 || !strstr(err.msg, "resources.cpu"))
			FAILF("field %s: rc %d msg '%s'", bad[i], rc, err.msg);
		CHECK_INT(v, 9);
	}
	json_decref(o);
}

TEST(get_size)
{
	json_t *o = obj("{\"m\":\"256m\",\"g\":\"1GiB\",\"b\":1048576,\"f\":\"1.5g\",\"neg\":-5,"
			"\"x\":\"12x\",\"r\":1.5,\"t\":true,\"z\":null,\"e\":\"\",\"lead\":\"  1g\","
			"\"trail\":\"1g \",\"tab\":\"\\t1g\",\"nl\":\"1g\\n\",\"unit\":\"1 g\"}");
	int64_t v = 3;
	bool present = false;
	struct terr err = {0};
	CHECK_INT(jsonutil_get_size(o, "m", "mem", &v, &present, &err), 0);
	CHECK_INT(v, 256LL << 20);
	CHECK(present);
	CHECK_INT(jsonutil_get_size(o, "g", "mem", &v, NULL, &err), 0);
	CHECK_INT(v, 1LL << 30);
	CHECK_INT(jsonutil_get_size(o, "b", "mem", &v, NULL, &err), 0);
	CHECK_INT(v, 1048576);
	CHECK_INT(jsonutil_get_size(o, "f", "mem", &v, NULL, &err), 0);
	CHECK_INT(v, 3LL << 29);
	v = 3;
	CHECK_INT(jsonutil_get_size(o, "absent", "mem", &v, &present, &err), 0);
	CHECK(!present);
	CHECK_INT(v, 3);
	present = true;
	CHECK_INT(jsonutil_get_size(o, "z", "mem", &v, &present, &err), 0);
	CHECK(!present);
	CHECK_INT(jsonutil_get_size(o, "unit", "mem", &v, NULL, &err), 0);   /* a space before the unit is fine */
	CHECK_INT(v, 1LL << 30);
	v = 3;
	json_object_set_new(o, "nul", json_stringn("1g\0x", 4));
	const char *bad[] = {"neg", "x", "r", "t", "e", "lead", "trail", "tab", "nl", "nul"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		int rc = jsonutil_get_size(o, bad[i], "resources.mem", &v, &present, &err);
		testlib_checks++;
		if (rc >= 0 || !strstr(err.msg, "resources.mem"))
			FAILF("field %s: rc %d msg '%s'", bad[i], rc, err.msg);
		CHECK_INT(v, 3);
	}
	json_decref(o);
}

#define FFFD "\xef\xbf\xbd"

/* lossy(in, inlen) must give exactly `want`. */
static void lossy_is(const char *in, size_t inlen, const char *want, int line)
{
	json_t *s = jsonutil_string_lossy(in, inlen);
	testlib_checks++;
	if (!s) {
		FAILF("line %d: jsonutil_string_lossy returned NULL", line);
		return;
	}
	const char *got = json_string_value(s);
	size_t glen = json_string_length(s);
	if (glen != strlen(want) || memcmp(got, want, glen) != 0) {
		char hex[512] = "";
		for (size_t i = 0; i < glen && i < 150; i++)
			snprintf(hex + strlen(hex), sizeof(hex) - strlen(hex), "%02x ", (unsigned char)got[i]);
		FAILF("line %d: got %s", line, hex);
	}
	json_decref(s);
}
#define LOSSY_IS(in, want) lossy_is((in), sizeof(in) - 1, (want), __LINE__)

TEST(string_lossy)
{
	LOSSY_IS("", "");
	LOSSY_IS("plain ascii\n\t", "plain ascii\n\t");
	LOSSY_IS("h\xc3\xa9llo", "h\xc3\xa9llo");                   /* 2-byte */
	LOSSY_IS("\xe2\x82\xac 5", "\xe2\x82\xac 5");               /* 3-byte: euro */
	LOSSY_IS("\xf0\x9f\x98\x80!", "\xf0\x9f\x98\x80!");          /* 4-byte: emoji */
	LOSSY_IS("\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf");           /* U+10FFFF */
	LOSSY_IS("\xef\xbf\xbd", FFFD);                             /* U+FFFD itself */
	LOSSY_IS("a\xff" "b", "a" FFFD "b");                        /* invalid byte */
	LOSSY_IS("\x80", FFFD);                                     /* lone continuation */
	LOSSY_IS("\xfe\xff", FFFD FFFD);
	LOSSY_IS("\xc0\x80", FFFD FFFD);                            /* overlong NUL */
	LOSSY_IS("\xc1\xbf", FFFD FFFD);                            /* overlong 2-byte */
	LOSSY_IS("\xe0\x80\xaf", FFFD FFFD FFFD);                   /* overlong '/' */
	LOSSY_IS("\xf0\x80\x80\xaf", FFFD FFFD FFFD FFFD);          /* overlong 4-byte */
	LOSSY_IS("\xed\xa0\x80", FFFD FFFD FFFD);                   /* surrogate D800 */
	LOSSY_IS("\xed\xbf\xbf", FFFD FFFD FFFD);                   /* surrogate DFFF */
	LOSSY_IS("\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD);          /* > U+10FFFF */
	LOSSY_IS("\xf5\x80\x80\x80", FFFD FFFD FFFD FFFD);
	LOSSY_IS("x\xc3", "x" FFFD);                                /* truncated at end */
	LOSSY_IS("\xc3(", FFFD "(");                                /* bad continuation */
	LOSSY_IS("a\0b", "a" FFFD "b");                             /* NUL */
	LOSSY_IS("\0", FFFD);
	LOSSY_IS("ok \xe2\x82\xac\xff\xf0\x9f\x98\x80", "ok \xe2\x82\xac" FFFD "\xf0\x9f\x98\x80");

	/* truncated multi-byte sequences at the end: replaced, rest kept */
	json_t *s = jsonutil_string_lossy("ab\xe2\x82", 4);
	CHECK(s != NULL);
	if (s) {
		const char *t = json_string_value(s);
		CHECK(!strncmp(t, "ab" FFFD, 5));
		CHECK(strchr(t, '\x82') == NULL || strstr(t, "\xe2\x82") == NULL);
		json_decref(s);
	}
	/* NULL gives "" */
	s = jsonutil_string_lossy(NULL, 5);
	CHECK_STR(s ? json_string_value(s) : NULL, "");
	json_decref(s);

	/* every single byte value gives a valid JSON string */
	char all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (char)i;
	s = jsonutil_string_lossy(all, sizeof(all));
	CHECK(s != NULL);
	if (s) {
		char *d = json_dumps(s, JSON_ENCODE_ANY);
		CHECK(d != NULL);
		json_t *back = d ? json_loads(d, JSON_DECODE_ANY, NULL) : NULL;
		CHECK(back != NULL);
		json_decref(back);
		free(d);
		json_decref(s);
	}
}

/* Expects text to be refused with a message containing `says`. */
static void body_refused(const char *text, size_t max_depth, const char *says, int line)
{
	struct terr err = {0};
	json_t *v = jsonutil_parse_body(text, text ? strlen(text) : 0, max_depth, &err);
	testlib_checks++;
	if (v || err.code != EINVAL || strncmp(err.msg, "request body", 12) || !strstr(err.msg, says))
		FAILF("line %d: body %s gave %s, code %d, '%s'; expected EINVAL saying '%s'", line,
		      text ? text : "(null)", v ? "a value" : "NULL", err.code, err.msg, says);
	json_decref(v);
}
#define BODY_REFUSED(t, d, says) body_refused((t), (d), (says), __LINE__)

TEST(parse_body)
{
	struct terr err = {0};
	const char *text = "{\"image\":\"busybox\",\"resources\":{\"cpu\":1},\"gpus\":[{\"index\":0}]}";
	json_t *v = jsonutil_parse_body(text, strlen(text), JSONUTIL_BODY_MAX_DEPTH, &err);
	CHECK(v != NULL);
	CHECK_INT(err.code, 0);
	CHECK_STR(json_string_value(json_object_get(v, "image")), "busybox");
	json_decref(v);

	/* not NUL-terminated: only len bytes count */
	char buf[] = "{\"a\":1}GARBAGE";
	v = jsonutil_parse_body(buf, 7, 0, &err);
	CHECK(v != NULL);
	CHECK_INT(json_integer_value(json_object_get(v, "a")), 1);
	json_decref(v);

	/* broken JSON: the parser's words with the position */
	BODY_REFUSED("{\"image\":", 0, "not valid JSON");
	BODY_REFUSED("{\"image\":", 0, "line 1");
	BODY_REFUSED("", 0, "not valid JSON");
	BODY_REFUSED(NULL, 0, "not valid JSON");
	BODY_REFUSED("{} {}", 0, "not valid JSON");
	/* a key twice, at the top or nested, is refused */
	BODY_REFUSED("{\"a\":1,\"a\":2}", 0, "duplicate");
	BODY_REFUSED("{\"a\":1,\"a\":2}", 0, "\"a\"");
	BODY_REFUSED("{\"r\":{\"cpu\":1,\"cpu\":2}}", 0, "duplicate");
	BODY_REFUSED("{\"l\":[{\"x\":1,\"x\":1}]}", 0, "duplicate");
	/* only objects */
	BODY_REFUSED("[1,2]", 0, "must be a JSON object");
	BODY_REFUSED("\"text\"", 0, "not valid JSON");  /* scalars are not even parsed */
	BODY_REFUSED("null", 0, "not valid JSON");

	/* depth: the top object is level 1 */
	v = jsonutil_parse_body("{\"a\":{\"b\":[1]}}", 15, 3, &err);
	CHECK(v != NULL);
	json_decref(v);
	BODY_REFUSED("{\"a\":{\"b\":[1]}}", 2, "deeper than 2 levels");
	BODY_REFUSED("{\"a\":[[[{}]]]}", 4, "deeper than 4");
	v = jsonutil_parse_body("{\"a\":[[[{}]]]}", 14, 5, &err);
	CHECK(v != NULL);
	json_decref(v);
	/* empty containers and scalars add no level beyond their own */
	const char *flat = "{\"a\":[],\"b\":{},\"c\":1}";
	v = jsonutil_parse_body(flat, strlen(flat), 2, &err);
	CHECK(v != NULL);
	json_decref(v);
	BODY_REFUSED("{\"a\":[],\"b\":{},\"c\":1}", 1, "deeper than 1");
	/* 0: only jansson's own limit, so deep bodies pass */
	char nest[300];
	int n = snprintf(nest, sizeof(nest), "{\"a\":");
	for (int i = 0; i < 60; i++)
		nest[n++] = '[';
	for (int i = 0; i < 60; i++)
		nest[n++] = ']';
	nest[n++] = '}';
	nest[n] = '\0';
	v = jsonutil_parse_body(nest, (size_t)n, 0, &err);
	CHECK(v != NULL);
	json_decref(v);
	BODY_REFUSED(nest, JSONUTIL_BODY_MAX_DEPTH, "deeper than 32 levels");
	/* err may be NULL */
	CHECK(jsonutil_parse_body("[", 1, 0, NULL) == NULL);
}

int main(void)
{
	RUN(milli_printing);
	RUN(get_string);
	RUN(get_int);
	RUN(get_milli);
	RUN(get_size);
	RUN(string_lossy);
	RUN(parse_body);
	return testlib_done();
}
