#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int terr_set(struct terr *err, int code, const char *fmt, ...)
{
	if (code < 0)
		code = -code;
	if (code == 0)
		code = EIO;
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
		err->code = code;
	}
	return -code;
}

int terr_prefix(struct terr *err, const char *fmt, ...)
{
	if (!err)
		return -EIO;
	char prefix[TERR_MSG_MAX], old[TERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	/* Joined in a buffer big enough for both, then cut to fit. */
	char joined[2 * TERR_MSG_MAX + 2];
	snprintf(joined, sizeof(joined), "%s: %s", prefix, old);
	memcpy(err->msg, joined, sizeof(err->msg) - 1);
	err->msg[sizeof(err->msg) - 1] = '\0';
	if (err->code == 0)
		err->code = EIO;
	return -err->code;
}

void terr_clear(struct terr *err)
{
	if (err) {
		err->code = 0;
		err->msg[0] = '\0';
	}
}
