/* The TESSERA-APP/1 line (apphello.h). */
#include "common/apphello.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

bool apphello_valid_name(const char *s, size_t len)
{
	if (len == 0 || len >= APPHELLO_NAME_MAX || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!isalnum(c) && c != '_' && c != '.' && c != '-')
			return false;
	}
	return true;
}

int apphello_format(char *out, size_t n, const char *secret, const char *target)
{
	int len = snprintf(out, n, APPHELLO_MAGIC " %s %s\r\n", secret, target);
	if (len < 0 || (size_t)len >= n || len > APPHELLO_LINE_MAX)
		return -ENAMETOOLONG;
	return len;
}

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

int apphello_parse(const char *line, size_t len, struct apphello *h, struct terr *err)
{
	static const char magic[] = APPHELLO_MAGIC " ";
	const size_t ml = sizeof(magic) - 1;
	memset(h, 0, sizeof(*h));
	if (len < ml || memcmp(line, magic, ml) != 0)
		return terr_set(err, EINVAL, "expected \"TESSERA-APP/1 SECRET TARGET\"");
	const char *s = line + ml, *end = line + len;
	const char *sp = memchr(s, ' ', (size_t)(end - s));
	if (!sp || sp - s != APPHELLO_SECRET_LEN || !is_hex(s, APPHELLO_SECRET_LEN))
		return terr_set(err, EINVAL, "the secret must be %d hex characters", APPHELLO_SECRET_LEN);
	memcpy(h->secret, s, APPHELLO_SECRET_LEN);
	return apphello_parse_target(sp + 1, (size_t)(end - sp - 1), h, err);
}

int apphello_parse_target(const char *t, size_t tl, struct apphello *h, struct terr *err)
{
	h->is_port = false;
	h->app[0] = '\0';
	h->port = 0;
	if (tl > 4 && !memcmp(t, "app:", 4)) {
		if (!apphello_valid_name(t + 4, tl - 4))
			return terr_set(err, EINVAL, "\"%.*s\" is not an app name", (int)(tl - 4 > 64 ? 64 : tl - 4),
					t + 4);
		memcpy(h->app, t + 4, tl - 4);
		h->app[tl - 4] = '\0';
		return 0;
	}
	if (tl > 5 && !memcmp(t, "port:", 5)) {
		long port = 0;
		for (size_t i = 5; i < tl; i++) {
			if (!isdigit((unsigned char)t[i]) || port > 65535 || i > 10)
				return terr_set(err, EINVAL, "the port must be a number from 1 to 65535");
			port = port * 10 + (t[i] - '0');
		}
		if (port < 1 || port > 65535)
			return terr_set(err, EINVAL, "the port must be a number from 1 to 65535");
		if (port == APPHELLO_RUNNER_PORT)
			return terr_set(err, EINVAL, "port %d is the runner's own", APPHELLO_RUNNER_PORT);
		h->is_port = true;
		h->port = (int)port;
		return 0;
	}
	return terr_set(err, EINVAL, "the target must be app:NAME or port:N");
}
