/* A pump as a streamed HTTP response (common/pump.h, pump_respond). */
#include <microhttpd.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/httpd.h"
#include "common/pump.h"

struct pump_resp {
	struct pump *p;
	int fd;                      /* the client's socket, -1 when unknown */
	void (*on_close)(void *);
	void *close_ud;
};

/* Whether the client hung up: its socket reports the hang-up while the
 * response is still being written. */
static bool client_gone(int fd)
{
	if (fd < 0)
		return false;
	struct pollfd pfd = {.fd = fd, .events = POLLRDHUP};
	return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static long pump_resp_read(void *cls, char *buf, size_t max)
{
	struct pump_resp *r = cls;
	for (;;) {
		long n = pump_read(r->p, buf, max, 1000);
		if (n > 0)
			return n;
		if (n == 0)
			return HTTPD_STREAM_END;
		if (n != -ETIMEDOUT)
			return HTTPD_STREAM_ERROR;
		if (client_gone(r->fd))
			return HTTPD_STREAM_ERROR;
	}
}

static void pump_resp_free(void *cls)
{
	struct pump_resp *r = cls;
	pump_close(r->p);
	if (r->on_close)
		r->on_close(r->close_ud);
	free(r);
}

void pump_respond(struct pump *p, struct httpd_req *req, struct httpd_resp *resp, int status,
		  const char *ctype, void (*on_close)(void *close_ud), void *close_ud)
{
	struct pump_resp *r = calloc(1, sizeof(*r));
	if (!r) {
		pump_close(p);
		if (on_close)
			on_close(close_ud);
		httpd_error(resp, 500, "internal", "out of memory");
		return;
	}
	r->p = p;
	r->fd = -1;
	r->on_close = on_close;
	r->close_ud = close_ud;
	const union MHD_ConnectionInfo *ci =
		req->conn ? MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD) : NULL;
	if (ci)
		r->fd = ci->connect_fd;
	resp->status = status;
	resp->stream = pump_resp_read;
	resp->stream_cls = r;
	resp->stream_free = pump_resp_free;
	resp->stream_type = ctype;
	/* Proxies in front (nginx) pass the bytes on as they come. */
	httpd_resp_header(resp, "X-Accel-Buffering", "no");
}
