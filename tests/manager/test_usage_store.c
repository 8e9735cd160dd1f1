/* manager/usage_store/usage_store.c, the in-memory usage history: a ring
 * per session that keeps retention / period samples, oldest first, read since a time;
 * repeats and older samples ignored; GPUs' figures with an unknown
 * utilisation; a session whose devices changed starts again; expiry,
 * drop, and the memory it reports. */
#include "manager/usage_store/usage_store.h"
#include "testlib.h"

#include <stdlib.h>
#include <string.h>

static struct usage_sample sample(int64_t t, int ngpu)
{
	struct usage_sample s;
	memset(&s, 0, sizeof(s));
	s.t = t;
	s.cpu_cores = 0.5 + (double)(t % 7) / 1000.0;
	s.cpu_pct = 50.25;
	s.mem_bytes = t * 10;
	s.mem_limit_bytes = 1 << 30;
	s.net_rx = t * 2;
	s.net_tx = t * 3;
	s.blk_read = 7;
	s.blk_write = 9;
	s.n_gpus = ngpu;
	for (int d = 0; d < ngpu; d++) {
		snprintf(s.gpus[d].uuid, sizeof(s.gpus[d].uuid), "GPU-%d", d);
		s.gpus[d].util_pct = d == 0 ? 25.5 : -1;
		s.gpus[d].mem_bytes = t + d;
		s.gpus[d].mem_limit_bytes = 4LL << 30;
	}
	return s;
}

TEST(ring)
{
	const struct usage_store_ops *o = &usage_store_memory_ops;
	struct usage_store *st = NULL;
	struct terr err = {0};
	/* 10 s at 1 s: 11 samples. */
	CHECK_INT(o->open(&st, 10000, 1000, &err), 0);
	for (int i = 1; i <= 30; i++) {
		struct usage_sample s = sample(i * 1000, 2);
		CHECK_INT(o->push(st, "s1", &s, &err), 0);
	}
	struct usage_sample *h = NULL;
	size_t n = 0;
	CHECK_INT(o->since(st, "s1", 0, &h, &n, &err), 0);
	CHECK_INT((int)n, 11);
	CHECK_INT((int)h[0].t, 20000);
	CHECK_INT((int)h[10].t, 30000);
	CHECK_INT((int)h[10].mem_bytes, 300000);
	CHECK_INT((int)h[10].net_tx, 90000);
	CHECK_INT((int)h[10].mem_limit_bytes, 1 << 30);
	CHECK(h[10].cpu_pct > 50.24 && h[10].cpu_pct < 50.26);
	CHECK(h[10].cpu_cores > 0.5045 && h[10].cpu_cores < 0.5055);   /* 30000 % 7 = 5: 0.505 */
	CHECK_INT(h[10].n_gpus, 2);
	CHECK_STR(h[10].gpus[1].uuid, "GPU-1");
	CHECK(h[10].gpus[0].util_pct > 25.49 && h[10].gpus[0].util_pct < 25.51);
	CHECK(h[10].gpus[1].util_pct < 0);   /* unknown stays unknown */
	CHECK_INT((int)h[10].gpus[1].mem_bytes, 30001);
	free(h);
	/* Since a time: strictly after it. */
	CHECK_INT(o->since(st, "s1", 27000, &h, &n, &err), 0);
	CHECK_INT((int)n, 3);
	CHECK_INT((int)h[0].t, 28000);
	free(h);
	CHECK_INT(o->since(st, "s1", 30000, &h, &n, &err), 0);
	CHECK_INT((int)n, 0);
	CHECK(h == NULL);
	CHECK_INT(o->since(st, "nobody", 0, &h, &n, &err), 0);
	CHECK_INT((int)n, 0);
	/* A repeat or an older sample is ignored. */
	struct usage_sample old = sample(25000, 2);
	CHECK_INT(o->push(st, "s1", &old, &err), 0);
	struct usage_sample last;
	CHECK_INT(o->last(st, "s1", &last), 0);
	CHECK_INT((int)last.t, 30000);
	CHECK_INT(o->last(st, "nobody", &last), -ENOENT);
	/* Other devices (the session started again elsewhere): a new ring. */
	struct usage_sample one = sample(31000, 1);
	CHECK_INT(o->push(st, "s1", &one, &err), 0);
	CHECK_INT(o->since(st, "s1", 0, &h, &n, &err), 0);
	CHECK_INT((int)n, 1);
	CHECK_INT(h[0].n_gpus, 1);
	free(h);
	/* Too many GPUs is refused. */
	struct usage_sample bad = sample(32000, 0);
	bad.n_gpus = USAGE_MAX_GPUS + 1;
	CHECK_INT(o->push(st, "s1", &bad, &err), -EINVAL);
	/* Expiry: s2's newest sample is older than the retention. */
	struct usage_sample s2 = sample(1000, 0);
	CHECK_INT(o->push(st, "s2", &s2, &err), 0);
	size_t before = o->memory(st);
	o->expire(st, 31000);
	CHECK_INT(o->last(st, "s2", &last), -ENOENT);
	CHECK_INT(o->last(st, "s1", &last), 0);
	CHECK(o->memory(st) < before);
	o->drop(st, "s1");
	CHECK_INT(o->last(st, "s1", &last), -ENOENT);
	o->close(st);
}

TEST(many_sessions)
{
	/* Rings are found by id among many, and removing one in the middle
	 * (expire swaps the last into its place) keeps the others. */
	const struct usage_store_ops *o = &usage_store_memory_ops;
	struct usage_store *st = NULL;
	struct terr err = {0};
	CHECK_INT(o->open(&st, 3600000, 5000, &err), 0);
	char id[32];
	for (int i = 0; i < 200; i++) {
		snprintf(id, sizeof(id), "sess-%d", i);
		struct usage_sample s = sample(i % 2 ? 100000 : 1000, 0);
		CHECK_INT(o->push(st, id, &s, &err), 0);
	}
	o->expire(st, 3601000 + 50000);   /* the even ones' sample is too old */
	int kept = 0;
	for (int i = 0; i < 200; i++) {
		struct usage_sample last;
		snprintf(id, sizeof(id), "sess-%d", i);
		if (o->last(st, id, &last) == 0) {
			kept++;
			CHECK(i % 2 == 1);
		}
	}
	CHECK_INT(kept, 100);
	/* 721 samples of 56 bytes each per ring, and a little more. */
	size_t mem = o->memory(st);
	CHECK(mem >= 100 * 721 * 56 && mem < 100 * 721 * 56 * 2);
	o->close(st);
}

int main(void)
{
	RUN(ring);
	RUN(many_sessions);
	return testlib_done();
}
