/* Percent-decoding of request targets for the HTTP server layer
 * (common/httpd.c), on its own so that it is fuzzed on its own
 * (tests/fuzz/fuzz_urldecode.c). Pure: no I/O.
 *
 * Handlers get decoded path segments and query arguments as C strings. A
 * NUL byte decoded from %00 would end such a string early: `?path=
 * keep%00.tmp&recursive=1` would remove the directory `keep`. No name or
 * path of the API may hold a NUL, so a target that decodes to one is
 * refused whole (400) before routing, authentication and any handler. */
#ifndef TESSERA_COMMON_URLDECODE_H
#define TESSERA_COMMON_URLDECODE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/* Decodes s[0..n) into a new NUL-terminated string, its decoded length in
 * *out_n (the bytes may hold NULs: callers that need a C string compare
 * *out_n with strlen). Each %XX becomes its byte. In a query ('query'
 * true) '+' becomes a space and a '%' not followed by two hex digits stays
 * as it is, as libmicrohttpd reads query arguments; in a path such a '%'
 * is an error. NULL on that error or when out of memory. */
char *urldecode(const char *s, size_t n, bool query, size_t *out_n);

/* Checks a request target as sent ("/path?a=1&b=2", no fragment): 0, or
 * -EINVAL with a message naming the part (the path, or the query
 * argument) that decodes to a NUL byte. Bad escapes in the path are not
 * this check's business (routing answers 404 for them). */
int urldecode_check_target(const char *target, struct terr *err);

#endif
