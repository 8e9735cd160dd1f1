/* jansson helpers for API bodies: typed field access with messages that
 * name the field, and exact printing of milli-unit amounts. */
#ifndef TESSERA_COMMON_JSONUTIL_H
#define TESSERA_COMMON_JSONUTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "common/err.h"

/* Flags for every json_dumps in the project: compact, and reals printed
 * with 15 significant digits: 0.1 prints as 0.1, and any milli amount up
 * to 10^12 prints exactly. */
#define JSONUTIL_DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

/* A milli-unit amount as a JSON number: integer when whole, else a real
 * that prints exactly (at most 3 decimals). New reference. */
json_t *jsonutil_milli(int64_t milli);

/* Reads obj[field] when present. *present (may be NULL) says whether it
 * was; absent leaves *out untouched and returns 0. Wrong types or values
 * give -EINVAL naming `what` (e.g. "resources.cpu"). */
int jsonutil_get_string(json_t *obj, const char *field, const char *what,
			const char **out, bool *present, struct terr *err);
/* Number or decimal string -> milli-units (3 decimals at most). A string
 * (here and in jsonutil_get_size) is the amount alone: spaces before or
 * after it, or a NUL in it, are refused. */
int jsonutil_get_milli(json_t *obj, const char *field, const char *what,
		       int64_t *out, bool *present, struct terr *err);
/* Integer bytes or a size string ("256m") -> bytes. */
int jsonutil_get_size(json_t *obj, const char *field, const char *what,
		      int64_t *out, bool *present, struct terr *err);
/* The same for an amount this program stored itself after checking it
 * (a policy): spaces around a string are taken, as the versions before
 * the exact check took them when it was written, so a limit set then
 * still holds rather than reading as none. */
int jsonutil_get_milli_stored(json_t *obj, const char *field, const char *what,
			      int64_t *out, bool *present, struct terr *err);
int jsonutil_get_size_stored(json_t *obj, const char *field, const char *what,
			     int64_t *out, bool *present, struct terr *err);
int jsonutil_get_int(json_t *obj, const char *field, const char *what,
		     int64_t *out, bool *present, struct terr *err);

/* json_dumps with JSONUTIL_DUMP_FLAGS; caller frees. */
char *jsonutil_dump(const json_t *v);

/* How deep request bodies may nest: the deepest body in use (an agent's
 * registration: object > array > object) has 3 levels. */
#define JSONUTIL_BODY_MAX_DEPTH 32

/* Parses an HTTP request body, the one way every server of the project
 * does: it must be a JSON object, without a key twice (two values for one
 * field would make which one counts a parser's choice), nested at most
 * max_depth levels (the top object is level 1; 0: jansson's own limit).
 * buf need not be NUL-terminated; NULL with len 0 is an empty body.
 * Returns a new reference, or NULL with err set to EINVAL and a message
 * starting "request body". */
json_t *jsonutil_parse_body(const char *buf, size_t len, size_t max_depth, struct terr *err);

#endif

#ifndef TESSERA_COMMON_JSONUTIL_LOSSY
#define TESSERA_COMMON_JSONUTIL_LOSSY
/* A JSON string from arbitrary bytes: invalid UTF-8 sequences become
 * U+FFFD, so command output never breaks the response. New reference. */
json_t *jsonutil_string_lossy(const char *buf, size_t len);
#endif
