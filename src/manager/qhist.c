/* A waiting session's scheduling history: see qhist.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "manager/qhist.h"

int qhist_note(struct qhist **hp, const char *reason, int64_t now_ms)
{
	struct qhist *h = *hp;
	if (!h && !(h = *hp = calloc(1, sizeof(*h))))
		return -ENOMEM;
	/* Compared as kept: words cut at the size match their next pass. */
	char cut[SCHED_REASON_MAX];
	util_strlcpy(cut, reason, sizeof(cut));
	for (size_t i = 0; i < h->n; i++) {
		if (strcmp(h->e[i].reason, cut))
			continue;
		/* The same words again, often every pass for hours: one
		 * entry, so that the history keeps what changed. */
		h->e[i].last_ms = now_ms;
		h->e[i].passes++;
		h->passes++;
		return 0;
	}
	if (h->n == h->cap && h->cap < QHIST_MAX) {
		size_t ncap = h->cap ? h->cap * 2 : 2;
		if (ncap > QHIST_MAX)
			ncap = QHIST_MAX;
		struct qhist_entry *ne = realloc(h->e, ncap * sizeof(*ne));
		if (!ne)
			return -ENOMEM;
		h->e = ne;
		h->cap = ncap;
	}
	if (h->n == h->cap) {
		/* Full: the reason given longest ago goes, the others keep
		 * their order. */
		size_t old = 0;
		for (size_t i = 1; i < h->n; i++)
			if (h->e[i].last_ms < h->e[old].last_ms)
				old = i;
		memmove(&h->e[old], &h->e[old + 1], (h->n - old - 1) * sizeof(*h->e));
		h->n--;
	}
	struct qhist_entry *e = &h->e[h->n++];
	memcpy(e->reason, cut, sizeof(e->reason));
	e->first_ms = e->last_ms = now_ms;
	e->passes = 1;
	h->passes++;
	return 0;
}

void qhist_free(struct qhist **h)
{
	if (!*h)
		return;
	free((*h)->e);
	free(*h);
	*h = NULL;
}
