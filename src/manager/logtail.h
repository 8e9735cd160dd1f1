/* The last of an ended session's log (docs/api.md, "GET
 * /v1/sessions/{ref}/logs"): read from its container just before the
 * container is removed, tidied (logtail_tidy) and kept in the store's
 * session_logs table, so that a finished session's page and `tessera
 * session logs` still show how it ended. */
#ifndef TESSERA_MANAGER_LOGTAIL_H
#define TESSERA_MANAGER_LOGTAIL_H

#include <stddef.h>

/* Lines read from a container before it is removed. */
#define LOGTAIL_LINES 200

/* The last max_lines lines of raw[0..n) (a last line without its
 * newline counts), made storable: each byte that is not part of valid
 * UTF-8, and each NUL, becomes U+FFFD, so PostgreSQL's text takes it.
 * The result is at most max_bytes long: older whole lines are dropped
 * first, and a single longer line keeps its end, cut at a character's
 * start. malloc'd; NULL when out of memory. */
char *logtail_tidy(const char *raw, size_t n, int max_lines, size_t max_bytes);

/* The last `lines` lines of text (all when lines <= 0), pointing into it. */
const char *logtail_last_lines(const char *text, int lines);

#endif
