#include "common/strmap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char strmap_tomb[] = "";
#define STRMAP_TOMB strmap_tomb

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

static struct strmap_slot *find(const struct strmap *m, const char *key)
{
	if (!m->cap)
		return NULL;
	size_t i = (size_t)hash(key) & (m->cap - 1);
	for (;;) {
		struct strmap_slot *s = &m->slots[i];
		if (!s->key)
			return NULL;
		if (s->key != STRMAP_TOMB && !strcmp(s->key, key))
			return s;
		i = (i + 1) & (m->cap - 1);
	}
}

void *strmap_get(const struct strmap *m, const char *key)
{
	struct strmap_slot *s = find(m, key);
	return s ? s->value : NULL;
}

static int grow(struct strmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64;
	/* Only live entries move: tombstones go away. */
	while (ncap < m->live * 2 + 2)
		ncap *= 2;
	struct strmap_slot *ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		struct strmap_slot *s = &m->slots[i];
		if (!s->key || s->key == STRMAP_TOMB)
			continue;
		size_t j = (size_t)hash(s->key) & (ncap - 1);
		while (ns[j].key)
			j = (j + 1) & (ncap - 1);
		ns[j] = *s;
	}
	free(m->slots);
	m->slots = ns;
	m->cap = ncap;
	m->used = m->live;
	return 0;
}

int strmap_put(struct strmap *m, const char *key, void *value)
{
	struct strmap_slot *s = find(m, key);
	if (s) {
		s->key = key;
		s->value = value;
		return 0;
	}
	/* Keep the load (live + tombstones) under 1/2 for short probes. */
	if ((m->used + 1) * 2 > m->cap && grow(m) < 0)
		return -ENOMEM;
	size_t i = (size_t)hash(key) & (m->cap - 1);
	while (m->slots[i].key && m->slots[i].key != STRMAP_TOMB)
		i = (i + 1) & (m->cap - 1);
	if (!m->slots[i].key)
		m->used++;
	m->slots[i].key = key;
	m->slots[i].value = value;
	m->live++;
	return 0;
}

void strmap_del(struct strmap *m, const char *key)
{
	struct strmap_slot *s = find(m, key);
	if (!s)
		return;
	s->key = STRMAP_TOMB;
	s->value = NULL;
	m->live--;
}

void strmap_free(struct strmap *m)
{
	free(m->slots);
	memset(m, 0, sizeof(*m));
}
