/* The exec output stream's frames (common/frames.h). */
#include "common/frames.h"

#include <errno.h>
#include <string.h>

void frames_header(unsigned char out[FRAMES_HEADER], enum frame_type type, uint32_t len)
{
	out[0] = (unsigned char)type;
	out[1] = out[2] = out[3] = 0;
	out[4] = (unsigned char)(len >> 24);
	out[5] = (unsigned char)(len >> 16);
	out[6] = (unsigned char)(len >> 8);
	out[7] = (unsigned char)len;
}

void frames_exit(unsigned char out[FRAMES_HEADER + 4], int32_t code)
{
	uint32_t u = (uint32_t)code;
	frames_header(out, FRAME_EXIT, 4);
	out[8] = (unsigned char)(u >> 24);
	out[9] = (unsigned char)(u >> 16);
	out[10] = (unsigned char)(u >> 8);
	out[11] = (unsigned char)u;
}

void frames_decoder_init(struct frames_decoder *d, const struct frames_sink *sink)
{
	memset(d, 0, sizeof(*d));
	d->sink = *sink;
}

void frames_decoder_init_docker(struct frames_decoder *d, const struct frames_sink *sink)
{
	frames_decoder_init(d, sink);
	d->docker = true;
}

/* A complete header: checks it and starts its frame. */
static int start_frame(struct frames_decoder *d)
{
	const unsigned char *h = d->hdr;
	uint32_t len = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
	if (h[1] || h[2] || h[3])
		return -EPROTO;
	if (d->docker) {
		if (h[0] > FRAME_STDERR)
			return -EPROTO;
		d->type = h[0] == FRAME_STDERR ? FRAME_STDERR : FRAME_STDOUT;
		d->left = len;
		return 0;
	}
	switch (h[0]) {
	case FRAME_STDOUT:
	case FRAME_STDERR:
		if (len > FRAMES_MAX_DATA)
			return -EPROTO;
		break;
	case FRAME_EXIT:
		if (len != 4)
			return -EPROTO;
		break;
	case FRAME_ERROR:
		if (len > FRAMES_MAX_TRAILER)
			return -EPROTO;
		break;
	default:
		return -EPROTO;
	}
	d->type = h[0];
	d->left = len;
	d->trailer_len = 0;
	return 0;
}

/* The trailer is complete: hands it on. */
static int end_stream(struct frames_decoder *d)
{
	d->done = true;
	if (!d->sink.on_end)
		return 0;
	int r;
	if (d->type == FRAME_EXIT) {
		const unsigned char *t = (const unsigned char *)d->trailer;
		uint32_t u = (uint32_t)t[0] << 24 | (uint32_t)t[1] << 16 | (uint32_t)t[2] << 8 | t[3];
		r = d->sink.on_end(d->sink.ud, true, (int32_t)u, NULL);
	} else {
		d->trailer[d->trailer_len] = '\0';
		r = d->sink.on_end(d->sink.ud, false, 0, d->trailer);
	}
	return r ? -ECANCELED : 0;
}

int frames_feed(struct frames_decoder *d, const void *data, size_t len)
{
	const char *p = data;
	while (len && !d->error) {
		if (d->done) {
			d->error = -EPROTO;
			break;
		}
		if (d->hdr_have < FRAMES_HEADER) {
			size_t k = FRAMES_HEADER - d->hdr_have;
			if (k > len)
				k = len;
			memcpy(d->hdr + d->hdr_have, p, k);
			d->hdr_have += k;
			p += k;
			len -= k;
			if (d->hdr_have < FRAMES_HEADER)
				break;
			int r = start_frame(d);
			if (r < 0) {
				d->error = r;
				break;
			}
			/* An empty data frame is legal and says nothing. */
			if (d->left > 0 || d->type == FRAME_STDOUT || d->type == FRAME_STDERR) {
				if (d->left == 0)
					d->hdr_have = 0;
				continue;
			}
			/* An empty error trailer. */
			d->hdr_have = 0;
			d->error = end_stream(d);
			continue;
		}
		size_t k = d->left < len ? d->left : len;
		if (d->type == FRAME_STDOUT || d->type == FRAME_STDERR) {
			if (d->sink.on_data && d->sink.on_data(d->sink.ud, (enum frame_type)d->type, p, k)) {
				d->error = -ECANCELED;
				break;
			}
		} else {
			memcpy(d->trailer + d->trailer_len, p, k);
			d->trailer_len += k;
		}
		p += k;
		len -= k;
		d->left -= (uint32_t)k;
		if (d->left == 0) {
			d->hdr_have = 0;
			if (d->type == FRAME_EXIT || d->type == FRAME_ERROR)
				d->error = end_stream(d);
		}
	}
	return d->error;
}

int frames_finish(const struct frames_decoder *d)
{
	if (d->error)
		return d->error;
	if (d->docker)
		return d->hdr_have == 0 && d->left == 0 ? 0 : -EPROTO;
	return d->done ? 0 : -EPROTO;
}
