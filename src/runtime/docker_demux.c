/* Docker stream demultiplexer: see docker_demux.h. */
#include "runtime/docker_demux.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void docker_demux_init(struct docker_demux *d, size_t cap, bool merge)
{
	memset(d, 0, sizeof(*d));
	d->cap = cap;
	d->merge = merge;
}

/* Appends up to the cap; the part past the cap is dropped (not an error:
 * callers ask for bounded output, and the stream must still be drained so
 * the process on the other side can finish). */
static int buf_append(struct docker_demux_buf *b, size_t cap,
		      const unsigned char *p, size_t n)
{
	size_t room = b->len < cap ? cap - b->len : 0;
	if (n > room) {
		b->truncated = true;
		n = room;
	}
	if (n == 0)
		return 0;
	if (b->len + n + 1 > b->alloc) {
		size_t want = b->alloc ? b->alloc : 256;
		while (want < b->len + n + 1)
			want = want > SIZE_MAX / 2 ? b->len + n + 1 : want * 2;
		char *nd = realloc(b->data, want);
		if (!nd)
			return -ENOMEM;
		b->data = nd;
		b->alloc = want;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int docker_demux_feed(struct docker_demux *d, const void *data, size_t len)
{
	const unsigned char *p = data;
	if (d->error)
		return d->error;
	while (len > 0) {
		if (d->left == 0) {
			/* Collecting a header, possibly across calls. */
			size_t n = sizeof(d->hdr) - d->hdr_have;
			if (n > len)
				n = len;
			memcpy(d->hdr + d->hdr_have, p, n);
			d->hdr_have += n;
			p += n;
			len -= n;
			if (d->hdr_have < sizeof(d->hdr))
				break;
			d->hdr_have = 0;
			if (d->hdr[0] > 2 || d->hdr[1] || d->hdr[2] || d->hdr[3])
				return d->error = -EPROTO;
			d->stream = d->hdr[0];
			d->left = (uint32_t)d->hdr[4] << 24 | (uint32_t)d->hdr[5] << 16 |
				  (uint32_t)d->hdr[6] << 8 | (uint32_t)d->hdr[7];
			continue;   /* zero-size frames are legal and skipped */
		}
		size_t n = d->left < len ? d->left : len;
		int i = (d->merge || d->stream != 2) ? 0 : 1;
		int r = buf_append(&d->out[i], d->cap, p, n);
		if (r < 0)
			return d->error = r;
		d->left -= (uint32_t)n;
		p += n;
		len -= n;
	}
	return 0;
}

int docker_demux_finish(const struct docker_demux *d)
{
	if (d->error)
		return d->error;
	if (d->left || d->hdr_have)
		return -EPROTO;
	return 0;
}

int docker_demux_take(struct docker_demux *d, int i, char **out, size_t *len)
{
	struct docker_demux_buf *b = &d->out[i ? 1 : 0];
	if (!b->data) {
		b->data = malloc(1);
		if (!b->data)
			return -ENOMEM;
		b->data[0] = '\0';
	}
	*out = b->data;
	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->alloc = 0;
	return 0;
}

void docker_demux_free(struct docker_demux *d)
{
	for (int i = 0; i < 2; i++) {
		free(d->out[i].data);
		d->out[i].data = NULL;
		d->out[i].len = d->out[i].alloc = 0;
	}
}
