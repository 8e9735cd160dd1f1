/* manager/qhist.c: a waiting session's scheduling history keeps distinct
 * reasons with their first and last time and pass counts, at most
 * QHIST_MAX of them, dropping the one given longest ago. */
#include <stdio.h>
#include <string.h>

#include "manager/qhist.h"
#include "testlib.h"

TEST(same_reason_counts_passes)
{
	struct qhist *h = NULL;
	CHECK_INT(qhist_note(&h, "needs 1 CPU", 100), 0);
	CHECK_INT(qhist_note(&h, "needs 1 CPU", 200), 0);
	CHECK_INT(qhist_note(&h, "queued behind a", 300), 0);
	CHECK_INT(qhist_note(&h, "needs 1 CPU", 400), 0);
	CHECK_INT(h->n, 2);
	CHECK_INT(h->passes, 4);
	CHECK_STR(h->e[0].reason, "needs 1 CPU");
	CHECK_INT(h->e[0].first_ms, 100);
	CHECK_INT(h->e[0].last_ms, 400);
	CHECK_INT(h->e[0].passes, 3);
	CHECK_STR(h->e[1].reason, "queued behind a");
	CHECK_INT(h->e[1].passes, 1);
	CHECK_INT(h->e[1].first_ms, 300);
	qhist_free(&h);
	CHECK(h == NULL);
	qhist_free(&h);   /* twice is harmless */
}

TEST(full_ring_drops_the_stalest)
{
	struct qhist *h = NULL;
	char r[64];
	for (int i = 0; i < QHIST_MAX; i++) {
		snprintf(r, sizeof(r), "reason %d", i);
		CHECK_INT(qhist_note(&h, r, 1000 + i), 0);
	}
	CHECK_INT(h->n, QHIST_MAX);
	/* reason 0 is given again: now reason 1 is the stalest */
	CHECK_INT(qhist_note(&h, "reason 0", 5000), 0);
	CHECK_INT(qhist_note(&h, "a new one", 6000), 0);
	CHECK_INT(h->n, QHIST_MAX);
	CHECK_STR(h->e[0].reason, "reason 0");
	CHECK_INT(h->e[0].passes, 2);
	CHECK_STR(h->e[1].reason, "reason 2");
	CHECK_STR(h->e[QHIST_MAX - 1].reason, "a new one");
	CHECK_INT(h->passes, QHIST_MAX + 2);
	for (size_t i = 0; i < h->n; i++)
		CHECK(strcmp(h->e[i].reason, "reason 1") != 0);
	qhist_free(&h);
}

TEST(long_reason_is_cut_not_overrun)
{
	struct qhist *h = NULL;
	char big[SCHED_REASON_MAX * 2];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK_INT(qhist_note(&h, big, 1), 0);
	CHECK_INT(strlen(h->e[0].reason), SCHED_REASON_MAX - 1);
	CHECK_INT(qhist_note(&h, big, 2), 0);   /* the same words, one entry */
	CHECK_INT(h->n, 1);
	CHECK_INT(h->e[0].passes, 2);
	qhist_free(&h);
}

int main(void)
{
	RUN(same_reason_counts_passes);
	RUN(full_ring_drops_the_stalest);
	RUN(long_reason_is_cut_not_overrun);
	return testlib_done();
}
