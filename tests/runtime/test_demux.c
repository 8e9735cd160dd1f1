/* Docker stream demultiplexer: frames split anywhere, caps, bad input. */
#include <errno.h>
#include <stdlib.h>

#include "runtime/docker_demux.h"
#include "testlib.h"

/* Appends one frame [stream,0,0,0,size BE] + payload to buf at *len. */
static void frame(unsigned char *buf, size_t *len, int stream, const char *s, size_t n)
{
	buf[(*len)++] = (unsigned char)stream;
	buf[(*len)++] = 0;
	buf[(*len)++] = 0;
	buf[(*len)++] = 0;
	buf[(*len)++] = (unsigned char)(n >> 24);
	buf[(*len)++] = (unsigned char)(n >> 16);
	buf[(*len)++] = (unsigned char)(n >> 8);
	buf[(*len)++] = (unsigned char)n;
	memcpy(buf + *len, s, n);
	*len += n;
}

static unsigned char sample[256];
static size_t sample_len;
static size_t sample_bounds[8];   /* offsets where a frame ends */
static size_t n_bounds;

static void build_sample(void)
{
	sample_len = n_bounds = 0;
	frame(sample, &sample_len, 1, "hello ", 6);
	sample_bounds[n_bounds++] = sample_len;
	frame(sample, &sample_len, 2, "oops\n", 5);
	sample_bounds[n_bounds++] = sample_len;
	frame(sample, &sample_len, 1, "", 0);            /* empty frames are legal */
	sample_bounds[n_bounds++] = sample_len;
	frame(sample, &sample_len, 1, "world\n", 6);
	sample_bounds[n_bounds++] = sample_len;
	frame(sample, &sample_len, 0, "in", 2);          /* stdin echo: counts as stdout */
	sample_bounds[n_bounds++] = sample_len;
}

static void take_both(struct docker_demux *d, char **o, size_t *ol, char **e, size_t *el)
{
	CHECK_INT(docker_demux_take(d, 0, o, ol), 0);
	CHECK_INT(docker_demux_take(d, 1, e, el), 0);
}

TEST(split_at_every_boundary)
{
	build_sample();
	for (size_t cut = 0; cut <= sample_len; cut++) {
		struct docker_demux d;
		docker_demux_init(&d, 1024, false);
		CHECK_INT(docker_demux_feed(&d, sample, cut), 0);
		CHECK_INT(docker_demux_feed(&d, sample + cut, sample_len - cut), 0);
		CHECK_INT(docker_demux_finish(&d), 0);
		char *o, *e;
		size_t ol, el;
		take_both(&d, &o, &ol, &e, &el);
		CHECK_STR(o, "hello world\nin");
		CHECK_INT(ol, 14);
		CHECK_STR(e, "oops\n");
		CHECK_INT(el, 5);
		free(o);
		free(e);
		docker_demux_free(&d);
	}
}

TEST(one_byte_at_a_time_and_three_pieces)
{
	build_sample();
	struct docker_demux d;
	docker_demux_init(&d, 1024, false);
	for (size_t i = 0; i < sample_len; i++)
		CHECK_INT(docker_demux_feed(&d, sample + i, 1), 0);
	CHECK_INT(docker_demux_finish(&d), 0);
	CHECK_STR(d.out[0].data, "hello world\nin");
	CHECK_STR(d.out[1].data, "oops\n");
	docker_demux_free(&d);

	/* Every pair of cut points. */
	int bad = 0;
	for (size_t a = 0; a <= sample_len; a++)
		for (size_t b = a; b <= sample_len; b++) {
			docker_demux_init(&d, 1024, false);
			docker_demux_feed(&d, sample, a);
			docker_demux_feed(&d, sample + a, b - a);
			docker_demux_feed(&d, sample + b, sample_len - b);
			if (docker_demux_finish(&d) != 0 ||
			    strcmp(d.out[0].data, "hello world\nin") != 0 ||
			    strcmp(d.out[1].data, "oops\n") != 0)
				bad++;
			docker_demux_free(&d);
		}
	CHECK_INT(bad, 0);
}

TEST(merge_keeps_arrival_order)
{
	build_sample();
	struct docker_demux d;
	docker_demux_init(&d, 1024, true);
	CHECK_INT(docker_demux_feed(&d, sample, sample_len), 0);
	CHECK_INT(docker_demux_finish(&d), 0);
	char *o, *e;
	size_t ol, el;
	take_both(&d, &o, &ol, &e, &el);
	CHECK_STR(o, "hello oops\nworld\nin");
	CHECK_STR(e, "");
	CHECK_INT(el, 0);
	free(o);
	free(e);
	docker_demux_free(&d);
}

TEST(caps_cut_each_stream_and_keep_reading)
{
	build_sample();
	struct docker_demux d;
	docker_demux_init(&d, 3, false);
	for (size_t i = 0; i < sample_len; i++)
		CHECK_INT(docker_demux_feed(&d, sample + i, 1), 0);
	CHECK_INT(docker_demux_finish(&d), 0);
	CHECK_STR(d.out[0].data, "hel");
	CHECK(d.out[0].truncated);
	CHECK_STR(d.out[1].data, "oop");
	CHECK(d.out[1].truncated);
	docker_demux_free(&d);

	/* Exactly at the cap is not truncated. */
	docker_demux_init(&d, 5, false);
	CHECK_INT(docker_demux_feed(&d, sample, sample_bounds[1]), 0);
	CHECK_STR(d.out[1].data, "oops\n");
	CHECK(!d.out[1].truncated);
	docker_demux_free(&d);

	/* Cap 0: nothing kept, take still gives "" */
	docker_demux_init(&d, 0, false);
	CHECK_INT(docker_demux_feed(&d, sample, sample_len), 0);
	CHECK_INT(docker_demux_finish(&d), 0);
	char *o, *e;
	size_t ol = 99, el = 99;
	take_both(&d, &o, &ol, &e, &el);
	CHECK_STR(o, "");
	CHECK_STR(e, "");
	CHECK_INT(ol + el, 0);
	CHECK(d.out[0].truncated);
	free(o);
	free(e);
	docker_demux_free(&d);
}

TEST(large_frame_in_chunks)
{
	size_t n = 70000;
	unsigned char *buf = malloc(n + 8);
	char *payload = malloc(n);
	for (size_t i = 0; i < n; i++)
		payload[i] = (char)('a' + i % 26);
	size_t len = 0;
	frame(buf, &len, 2, payload, n);
	struct docker_demux d;
	docker_demux_init(&d, 1 << 20, false);
	for (size_t off = 0; off < len; off += 4093) {
		size_t k = len - off < 4093 ? len - off : 4093;
		CHECK_INT(docker_demux_feed(&d, buf + off, k), 0);
	}
	CHECK_INT(docker_demux_finish(&d), 0);
	CHECK_INT(d.out[1].len, n);
	CHECK(memcmp(d.out[1].data, payload, n) == 0);
	CHECK_INT(d.out[0].len, 0);
	docker_demux_free(&d);
	free(buf);
	free(payload);
}

TEST(truncated_input_is_reported)
{
	build_sample();
	for (size_t cut = 0; cut <= sample_len; cut++) {
		bool boundary = cut == 0;
		for (size_t i = 0; i < n_bounds; i++)
			boundary |= sample_bounds[i] == cut;
		struct docker_demux d;
		docker_demux_init(&d, 1024, false);
		CHECK_INT(docker_demux_feed(&d, sample, cut), 0);
		CHECK_INT(docker_demux_finish(&d), boundary ? 0 : -EPROTO);
		docker_demux_free(&d);
	}
	/* What arrived of a cut payload is kept. */
	struct docker_demux d;
	docker_demux_init(&d, 1024, false);
	docker_demux_feed(&d, sample, 8 + 3);
	CHECK_INT(docker_demux_finish(&d), -EPROTO);
	CHECK_STR(d.out[0].data, "hel");
	docker_demux_free(&d);
}

TEST(bad_headers_fail_and_stick)
{
	struct docker_demux d;
	/* A raw (TTY) stream: text where a header should be. */
	docker_demux_init(&d, 1024, false);
	CHECK_INT(docker_demux_feed(&d, "hello world\n", 12), -EPROTO);
	CHECK_INT(docker_demux_feed(&d, "x", 1), -EPROTO);
	CHECK_INT(docker_demux_finish(&d), -EPROTO);
	docker_demux_free(&d);

	/* Stream 3 does not exist. */
	unsigned char h1[] = { 3, 0, 0, 0, 0, 0, 0, 1, 'x' };
	docker_demux_init(&d, 1024, false);
	CHECK_INT(docker_demux_feed(&d, h1, sizeof(h1)), -EPROTO);
	docker_demux_free(&d);

	/* Non-zero padding. */
	unsigned char h2[] = { 1, 0, 7, 0, 0, 0, 0, 1, 'x' };
	docker_demux_init(&d, 1024, false);
	CHECK_INT(docker_demux_feed(&d, h2, 4), 0);   /* not yet a whole header */
	CHECK_INT(docker_demux_feed(&d, h2 + 4, sizeof(h2) - 4), -EPROTO);
	docker_demux_free(&d);
}

TEST(random_input_never_crashes)
{
	/* A poor man's fuzz run; the real fuzzer drives the same three calls. */
	unsigned seed = 12345;
	unsigned char buf[512];
	for (int round = 0; round < 2000; round++) {
		size_t len = 0, want = (size_t)(rand_r(&seed) % sizeof(buf));
		while (len < want) {
			/* Mostly plausible headers with small sizes, some noise. */
			if (rand_r(&seed) % 4 && len + 8 <= want) {
				unsigned char h[8] = { (unsigned char)(rand_r(&seed) % 3), 0, 0, 0, 0, 0, 0,
						       (unsigned char)(rand_r(&seed) % 40) };
				memcpy(buf + len, h, 8);
				len += 8;
			} else {
				buf[len++] = (unsigned char)rand_r(&seed);
			}
		}
		struct docker_demux d;
		docker_demux_init(&d, (size_t)(rand_r(&seed) % 64), rand_r(&seed) % 2);
		size_t off = 0;
		while (off < len) {
			size_t k = 1 + (size_t)(rand_r(&seed) % 17);
			if (k > len - off)
				k = len - off;
			docker_demux_feed(&d, buf + off, k);
			off += k;
		}
		docker_demux_finish(&d);
		CHECK(d.out[0].len <= d.cap && d.out[1].len <= d.cap);
		docker_demux_free(&d);
	}
}

int main(void)
{
	RUN(split_at_every_boundary);
	RUN(one_byte_at_a_time_and_three_pieces);
	RUN(merge_keeps_arrival_order);
	RUN(caps_cut_each_stream_and_keep_reading);
	RUN(large_frame_in_chunks);
	RUN(truncated_input_is_reported);
	RUN(bad_headers_fail_and_stick);
	RUN(random_input_never_crashes);
	return testlib_done();
}
