/* A string-keyed hash map of pointers (open addressing, linear probing).
 * Keys are borrowed: they must live as long as their entry (the manager
 * keys sessions and agents by ids stored in the records themselves). */
#ifndef TESSERA_COMMON_STRMAP_H
#define TESSERA_COMMON_STRMAP_H

#include <stddef.h>

struct strmap {
	struct strmap_slot {
		const char *key;   /* NULL = empty; STRMAP_TOMB = deleted */
		void *value;
	} *slots;
	size_t cap;            /* power of two */
	size_t used;           /* live + tombstones */
	size_t live;
};

/* Value for key, or NULL. */
void *strmap_get(const struct strmap *m, const char *key);
/* Inserts or replaces; -ENOMEM on allocation failure. */
int strmap_put(struct strmap *m, const char *key, void *value);
void strmap_del(struct strmap *m, const char *key);
void strmap_free(struct strmap *m);

#endif
