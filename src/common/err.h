/* The one error contract (docs/architecture.md, "Errors").
 *
 * A fallible function returns 0 (or a non-negative count) on success and a
 * negative errno-style value on failure, after filling the caller's
 * `struct terr` with that code and a message a person can act on. Library
 * code never prints or exits; only main() does. */
#ifndef TESSERA_COMMON_ERR_H
#define TESSERA_COMMON_ERR_H

#include <errno.h>

#define TERR_MSG_MAX 512

struct terr {
	int code;                  /* positive errno value, 0 when clear */
	char msg[TERR_MSG_MAX];
};

/* Fills err (may be NULL) and returns -code. */
int terr_set(struct terr *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to the message already in err; returns -err->code. */
int terr_prefix(struct terr *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

void terr_clear(struct terr *err);

#endif
