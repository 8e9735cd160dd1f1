/* Fuzz target: the exec output frames' decoder (common/frames.h), which
 * reads what comes from the network (the CLI from the manager, and in
 * Docker's mode the runtime from Docker). The input is fed in pieces whose
 * sizes come from its first byte, in both modes; whatever the bytes, the
 * decoder must not crash, must hand on no more payload than it was given,
 * and must end at most once. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/frames.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct tally {
	size_t payload;
	int ends;
};

static int on_data(void *ud, enum frame_type type, const char *data, size_t len)
{
	struct tally *t = ud;
	if (type != FRAME_STDOUT && type != FRAME_STDERR)
		abort();
	if (len && !data)
		abort();
	t->payload += len;
	return 0;
}

static int on_end(void *ud, bool exited, int32_t code, const char *error)
{
	(void)code;
	struct tally *t = ud;
	if (!exited && !error)
		abort();
	if (error && strlen(error) > FRAMES_MAX_TRAILER)
		abort();
	t->ends++;
	return 0;
}

static void run(const uint8_t *data, size_t size, size_t piece, int docker)
{
	struct tally t = {0};
	struct frames_decoder d;
	struct frames_sink sink = {.on_data = on_data, .on_end = on_end, .ud = &t};
	if (docker)
		frames_decoder_init_docker(&d, &sink);
	else
		frames_decoder_init(&d, &sink);
	for (size_t at = 0; at < size; at += piece)
		if (frames_feed(&d, data + at, at + piece > size ? size - at : piece) < 0)
			break;
	int r = frames_finish(&d);
	if (t.payload > size || t.ends > 1 || (docker && t.ends))
		abort();
	if (!docker && r == 0 && t.ends != 1)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	size_t piece = (size_t)(data[0] % 17) + 1;
	run(data + 1, size - 1, piece, 0);
	run(data + 1, size - 1, size, 0);
	run(data + 1, size - 1, piece, 1);
	return 0;
}
