/* `key = value` configuration files (admin.conf, client.conf, the daemon
 * configs under configs/). '#' starts a comment line; blank lines are
 * ignored; keys are [a-z0-9_.-]+; values run to end of line, trimmed; a
 * value may be wrapped in double quotes. A repeated key is an error. */
#ifndef TESSERA_COMMON_CONF_H
#define TESSERA_COMMON_CONF_H

#include <stddef.h>
#include <sys/types.h>

#include "common/err.h"

struct conf_item {
	char *key;
	char *value;
	int line;
};

struct conf {
	struct conf_item *items;
	size_t n;
};

/* Parses text into out (owned by caller; release with conf_free). Errors
 * name the line: "line 3: expected 'key = value'". */
int conf_parse(const char *text, size_t len, struct conf *out, struct terr *err);
/* Reads and parses a file; errors name the path. */
int conf_load(const char *path, struct conf *out, struct terr *err);
/* Value of key, or NULL. Borrowed from c. */
const char *conf_get(const struct conf *c, const char *key);
/* Fails with a message naming the file, the key and the line when a key is
 * not in `known` (NULL-terminated): catches typos in configs. */
int conf_check_keys(const struct conf *c, const char *const *known,
		    const char *path, struct terr *err);
void conf_free(struct conf *c);

/* Writes n `key = value` lines atomically (temp file + rename) with the given
 * mode, creating or replacing path. */
int conf_write(const char *path, mode_t mode, const char *const *keys,
	       const char *const *values, size_t n, struct terr *err);

#endif
