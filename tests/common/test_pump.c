/* The bounded pipe (common/pump.h): bytes in order, the buffer bound
 * holds (the producer waits for the reader), errors before and after the
 * stream opened, and closing early stops the producer. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/pump.h"
#include "testlib.h"

static void nap(void)
{
	nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
}

struct job {
	size_t total;          /* bytes to write, in pieces of `piece` */
	size_t piece;
	int fail_before_ready; /* return an error before pump_ready */
	int fail_after;        /* return an error after writing */
	atomic_size_t written; /* bytes pump_write took so far */
	atomic_int cancelled;  /* pump_write said -ECANCELED */
};

static int produce(struct pump *p, void *ud, struct terr *err)
{
	struct job *j = ud;
	if (j->fail_before_ready)
		return terr_set(err, ENOENT, "no such container: gone");
	pump_ready(p);
	char buf[4096];
	for (size_t done = 0; done < j->total;) {
		size_t k = j->total - done < j->piece ? j->total - done : j->piece;
		for (size_t i = 0; i < k; i++)
			buf[i] = (char)((done + i) % 251);
		if (pump_write(p, buf, k) < 0) {
			atomic_store(&j->cancelled, 1);
			return terr_set(err, ECANCELED, "reader left");
		}
		done += k;
		atomic_store(&j->written, done);
	}
	if (j->fail_after)
		return terr_set(err, EIO, "the stream broke");
	return 0;
}

TEST(bytes_arrive_in_order)
{
	static struct job j = {.total = 1000000, .piece = 3000};
	struct pump *p;
	struct terr err = {0};
	CHECK_INT(pump_start(&p, 1024, produce, &j, NULL, &err), 0);
	CHECK_INT(pump_wait_ready(p, &err), 0);
	size_t got = 0;
	bool in_order = true;
	char buf[777];
	for (long n; (n = pump_read(p, buf, sizeof(buf), -1)) > 0;) {
		for (long i = 0; i < n; i++)
			in_order = in_order && buf[i] == (char)((got + (size_t)i) % 251);
		got += (size_t)n;
	}
	CHECK(in_order);
	CHECK_INT((long)got, 1000000);
	CHECK_INT((int)pump_read(p, buf, sizeof(buf), -1), 0);
	pump_close(p);
}

TEST(the_producer_waits_for_the_reader)
{
	static struct job j = {.total = 100000, .piece = 100};
	struct pump *p;
	struct terr err = {0};
	CHECK_INT(pump_start(&p, 1000, produce, &j, NULL, &err), 0);
	/* Nothing read: the producer stops once the buffer is full. It is
	 * given time to get there (and past, were it not bounded). */
	for (int i = 0; i < 500 && atomic_load(&j.written) < 1000; i++)
		nap();
	for (int i = 0; i < 20; i++)
		nap();
	CHECK_INT((long)atomic_load(&j.written), 1000);
	/* Closing early cancels it. */
	pump_close(p);
	CHECK_INT(atomic_load(&j.cancelled), 1);
}

TEST(errors_before_and_after_the_open)
{
	static struct job before = {.fail_before_ready = 1};
	struct pump *p;
	struct terr err = {0};
	CHECK_INT(pump_start(&p, 0, produce, &before, NULL, &err), 0);
	CHECK_INT(pump_wait_ready(p, &err), -ENOENT);
	CHECK_STR(err.msg, "no such container: gone");
	pump_close(p);

	static struct job after = {.total = 10, .piece = 10, .fail_after = 1};
	terr_clear(&err);
	CHECK_INT(pump_start(&p, 0, produce, &after, NULL, &err), 0);
	CHECK_INT(pump_wait_ready(p, &err), 0);
	char buf[64];
	CHECK_INT((int)pump_read(p, buf, sizeof(buf), -1), 10);
	CHECK_INT((int)pump_read(p, buf, sizeof(buf), -1), -1);
	CHECK_STR(pump_error(p)->msg, "the stream broke");
	pump_close(p);
}

static int slow(struct pump *p, void *ud, struct terr *err)
{
	(void)ud;
	(void)err;
	pump_ready(p);
	/* Writes nothing until the reader leaves. */
	while (!atomic_load_explicit(pump_cancel_flag(p), memory_order_relaxed))
		nap();
	return 0;
}

static int freed;
static void count_free(void *ud)
{
	(void)ud;
	freed++;
}

TEST(a_read_times_out_and_close_ends_a_quiet_producer)
{
	struct pump *p;
	struct terr err = {0};
	CHECK_INT(pump_start(&p, 0, slow, NULL, count_free, &err), 0);
	char buf[8];
	CHECK_INT((int)pump_read(p, buf, sizeof(buf), 20), -ETIMEDOUT);
	pump_close(p);
	CHECK_INT(freed, 1);
}

int main(void)
{
	RUN(bytes_arrive_in_order);
	RUN(the_producer_waits_for_the_reader);
	RUN(errors_before_and_after_the_open);
	RUN(a_read_times_out_and_close_ends_a_quiet_producer);
	return testlib_done();
}
