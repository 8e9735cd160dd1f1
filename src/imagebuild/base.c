/* The kept base's pure parts (imagebuild/build.h, "the kept base"): its
 * key and file name, and whether a build may use it. build.c does the
 * work (debootstrap, tar); this file decides, so that the unit tests can
 * check the decisions without root. */
#include "imagebuild/build.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

/* Variant and architecture go into a file name as they are. */
static bool name_word(const char *s)
{
	if (!s || !*s || strlen(s) > 32)
		return false;
	for (const char *c = s; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
			return false;
	return true;
}

/* The suite and the mirror only go into the key's text (one line each):
 * printable, no spaces. */
static bool text_word(const char *s, size_t max)
{
	if (!s || !*s || strlen(s) > max)
		return false;
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f)
			return false;
	return true;
}

int img_base_key_text(const char *suite, const char *variant, const char *arch, const char *mirror,
		      char *buf, size_t n)
{
	if (n)
		buf[0] = '\0';
	if (!text_word(suite, 64) || !name_word(variant) || !name_word(arch) || !text_word(mirror, 1024))
		return -EINVAL;
	int w = snprintf(buf, n, "suite %s\nvariant %s\narch %s\nmirror %s\n", suite, variant, arch, mirror);
	if (w < 0 || (size_t)w >= n) {
		if (n)
			buf[0] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

int img_base_name(const char *suite, const char *variant, const char *arch, const char *mirror,
		  char *buf, size_t n)
{
	char key[1200];
	if (n)
		buf[0] = '\0';
	int r = img_base_key_text(suite, variant, arch, mirror, key, sizeof(key));
	if (r < 0)
		return r;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (EVP_Digest(key, strlen(key), md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen < 6)
		return -EIO;
	int w = snprintf(buf, n, "%s-%s-%02x%02x%02x%02x%02x%02x.tar.zst", variant, arch, md[0], md[1], md[2],
			 md[3], md[4], md[5]);
	if (w < 0 || (size_t)w >= n) {
		if (n)
			buf[0] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

enum img_base_use img_base_decide(bool exists, int64_t mtime, int64_t now, int max_age_days, bool fresh)
{
	if (fresh)
		return IMG_BASE_FRESH;
	if (!exists)
		return IMG_BASE_NONE;
	int64_t days = max_age_days > 0 ? max_age_days : IMG_DEFAULT_BASE_MAX_AGE_DAYS;
	/* A minute's grace for clocks of file systems that round or run a
	 * little ahead; a base from further in the future means the clock
	 * was set back, and its age cannot be told. */
	if (mtime > now + 60)
		return IMG_BASE_FUTURE;
	if (now - mtime > days * 86400)
		return IMG_BASE_OLD;
	return IMG_BASE_USE;
}

const char *img_base_reason(enum img_base_use u)
{
	switch (u) {
	case IMG_BASE_USE:
		return NULL;
	case IMG_BASE_NONE:
		return "no kept base";
	case IMG_BASE_OLD:
		return "the kept base is older than the limit";
	case IMG_BASE_FUTURE:
		return "the kept base is dated in the future";
	case IMG_BASE_FRESH:
		return "--fresh-base";
	}
	return "?";
}

void img_base_date(int64_t t, char *buf, size_t n)
{
	time_t tt = (time_t)t;
	struct tm tm;
	if (!n)
		return;
	if (!gmtime_r(&tt, &tm) || !strftime(buf, n, "%Y-%m-%d %H:%M UTC", &tm))
		snprintf(buf, n, "?");
}

int img_base_parse_max_age(const char *s, int *days)
{
	if (!s || !*s || strlen(s) > 4)
		return -EINVAL;
	int v = 0;
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9')
			return -EINVAL;
		v = v * 10 + (*c - '0');
	}
	if (v < 1 || v > IMG_MAX_BASE_MAX_AGE_DAYS)
		return -EINVAL;
	*days = v;
	return 0;
}
