/* The exec output frames (common/frames.h): streams cut anywhere, bytes
 * kept as they are, trailers, and what is not the format. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/frames.h"
#include "testlib.h"

/* What a decoder handed on. */
struct seen {
	char out[256], err[256];
	size_t out_len, err_len;
	int calls;
	bool ended, exited;
	int32_t code;
	char error[FRAMES_MAX_TRAILER + 1];
	int stop_after;        /* > 0: on_data asks to stop on that call */
};

static int on_data(void *ud, enum frame_type type, const char *data, size_t len)
{
	struct seen *s = ud;
	char *buf = type == FRAME_STDERR ? s->err : s->out;
	size_t *n = type == FRAME_STDERR ? &s->err_len : &s->out_len;
	if (*n + len <= sizeof(s->out)) {
		memcpy(buf + *n, data, len);
		*n += len;
	}
	return ++s->calls == s->stop_after;
}

static int on_end(void *ud, bool exited, int32_t code, const char *error)
{
	struct seen *s = ud;
	s->ended = true;
	s->exited = exited;
	s->code = code;
	if (error)
		snprintf(s->error, sizeof(s->error), "%s", error);
	return 0;
}

static void start(struct frames_decoder *d, struct seen *s)
{
	memset(s, 0, sizeof(*s));
	frames_decoder_init(d, &(struct frames_sink){.on_data = on_data, .on_end = on_end, .ud = s});
}

static size_t put(unsigned char *buf, size_t at, enum frame_type type, const void *data, size_t len)
{
	frames_header(buf + at, type, (uint32_t)len);
	memcpy(buf + at + FRAMES_HEADER, data, len);
	return at + FRAMES_HEADER + len;
}

/* stdout "a\0b", stderr "\xff\xfe", an empty frame, stdout "c", exit -3. */
static size_t sample(unsigned char *buf)
{
	size_t n = put(buf, 0, FRAME_STDOUT, "a\0b", 3);
	n = put(buf, n, FRAME_STDERR, "\xff\xfe", 2);
	n = put(buf, n, FRAME_STDOUT, "", 0);
	n = put(buf, n, FRAME_STDOUT, "c", 1);
	frames_exit(buf + n, -3);
	return n + FRAMES_HEADER + 4;
}

TEST(bytes_and_exit_code_whatever_the_cuts)
{
	unsigned char buf[128];
	size_t len = sample(buf);
	/* Every piece size from 1 byte to all at once. */
	for (size_t piece = 1; piece <= len; piece++) {
		struct frames_decoder d;
		struct seen s;
		start(&d, &s);
		for (size_t at = 0; at < len; at += piece)
			CHECK_INT(frames_feed(&d, buf + at, at + piece > len ? len - at : piece), 0);
		CHECK_INT(frames_finish(&d), 0);
		CHECK_INT((int)s.out_len, 4);
		CHECK(memcmp(s.out, "a\0bc", 4) == 0);
		CHECK_INT((int)s.err_len, 2);
		CHECK(memcmp(s.err, "\xff\xfe", 2) == 0);
		CHECK(s.ended && s.exited);
		CHECK_INT(s.code, -3);
	}
}

TEST(error_trailer)
{
	unsigned char buf[128];
	size_t n = put(buf, 0, FRAME_STDOUT, "x", 1);
	n = put(buf, n, FRAME_ERROR, "container gone", 14);
	struct frames_decoder d;
	struct seen s;
	start(&d, &s);
	CHECK_INT(frames_feed(&d, buf, n), 0);
	CHECK_INT(frames_finish(&d), 0);
	CHECK(s.ended && !s.exited);
	CHECK_STR(s.error, "container gone");
	/* An empty error text is an end too. */
	start(&d, &s);
	frames_header(buf, FRAME_ERROR, 0);
	CHECK_INT(frames_feed(&d, buf, FRAMES_HEADER), 0);
	CHECK_INT(frames_finish(&d), 0);
	CHECK(s.ended && !s.exited);
}

TEST(cut_short_is_not_an_end)
{
	unsigned char buf[128];
	size_t len = sample(buf);
	for (size_t cut = 0; cut < len; cut++) {
		struct frames_decoder d;
		struct seen s;
		start(&d, &s);
		CHECK_INT(frames_feed(&d, buf, cut), 0);
		CHECK_INT(frames_finish(&d), -EPROTO);
		CHECK(!s.ended);
	}
}

TEST(refuses_what_is_not_frames)
{
	struct frames_decoder d;
	struct seen s;
	unsigned char buf[64];
	/* Unknown type, Docker's stdin type, non-zero padding. */
	static const unsigned char bad[][8] = {
		{5, 0, 0, 0, 0, 0, 0, 1}, {0, 0, 0, 0, 0, 0, 0, 1}, {1, 0, 1, 0, 0, 0, 0, 1},
		{'{', '"', 'e', 'r', 'r', 'o', 'r', '"'},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		start(&d, &s);
		CHECK_INT(frames_feed(&d, bad[i], 8), -EPROTO);
		CHECK_INT(frames_feed(&d, "x", 1), -EPROTO);   /* sticky */
		CHECK_INT(frames_finish(&d), -EPROTO);
	}
	/* Oversized data and trailers, an exit code of the wrong size. */
	start(&d, &s);
	frames_header(buf, FRAME_STDOUT, FRAMES_MAX_DATA + 1);
	CHECK_INT(frames_feed(&d, buf, FRAMES_HEADER), -EPROTO);
	start(&d, &s);
	frames_header(buf, FRAME_ERROR, FRAMES_MAX_TRAILER + 1);
	CHECK_INT(frames_feed(&d, buf, FRAMES_HEADER), -EPROTO);
	start(&d, &s);
	frames_header(buf, FRAME_EXIT, 3);
	CHECK_INT(frames_feed(&d, buf, FRAMES_HEADER), -EPROTO);
	/* Nothing may follow the trailer. */
	start(&d, &s);
	frames_exit(buf, 0);
	buf[12] = 1;
	CHECK_INT(frames_feed(&d, buf, 13), -EPROTO);
	CHECK(s.ended);
}

TEST(a_callback_stops_it)
{
	unsigned char buf[128];
	size_t len = sample(buf);
	struct frames_decoder d;
	struct seen s;
	start(&d, &s);
	s.stop_after = 1;
	CHECK_INT(frames_feed(&d, buf, len), -ECANCELED);
	CHECK_INT(s.calls, 1);
	CHECK(!s.ended);
}

TEST(dockers_own_stream)
{
	/* Type 0 (stdin) counts as stdout, frames may be large, no trailer:
	 * the end of input at a frame boundary is the end. */
	unsigned char buf[128];
	size_t n = put(buf, 0, FRAME_STDOUT, "out", 3);
	n = put(buf, n, FRAME_STDERR, "err", 3);
	n = put(buf, n, 0, "in", 2);
	struct frames_decoder d;
	struct seen s;
	memset(&s, 0, sizeof(s));
	frames_decoder_init_docker(&d, &(struct frames_sink){.on_data = on_data, .ud = &s});
	CHECK_INT(frames_feed(&d, buf, n), 0);
	CHECK_INT(frames_finish(&d), 0);
	CHECK_INT((int)s.out_len, 5);
	CHECK(memcmp(s.out, "outin", 5) == 0);
	CHECK_INT((int)s.err_len, 3);
	frames_decoder_init_docker(&d, &(struct frames_sink){.on_data = on_data, .ud = &s});
	CHECK_INT(frames_feed(&d, buf, n - 1), 0);
	CHECK_INT(frames_finish(&d), -EPROTO);
	frames_header(buf, FRAME_EXIT, 4);
	frames_decoder_init_docker(&d, &(struct frames_sink){.on_data = on_data, .ud = &s});
	CHECK_INT(frames_feed(&d, buf, FRAMES_HEADER), -EPROTO);
	/* A TTY's raw bytes are not frames. */
	frames_decoder_init_docker(&d, &(struct frames_sink){.on_data = on_data, .ud = &s});
	CHECK_INT(frames_feed(&d, "hello, world\n", 13), -EPROTO);
}

int main(void)
{
	RUN(bytes_and_exit_code_whatever_the_cuts);
	RUN(error_trailer);
	RUN(cut_short_is_not_an_end);
	RUN(refuses_what_is_not_frames);
	RUN(a_callback_stops_it);
	RUN(dockers_own_stream);
	return testlib_done();
}
