/* httpc_do against libmicrohttpd on TCP and on a unix socket: bodies,
 * headers, streaming with abort, cancel, timeout, refused. */
#include "common/httpc.h"
#include "testlib.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define BIG_LEN (1 << 20)

struct req_ctx {
	size_t len;
	int seen;
};

static ssize_t big_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)cls;
	if (pos >= BIG_LEN)
		return MHD_CONTENT_READER_END_OF_STREAM;
	size_t n = BIG_LEN - pos < max ? BIG_LEN - pos : max;
	memset(buf, 'x', n);
	return (ssize_t)n;
}

static enum MHD_Result send_text(struct MHD_Connection *con, unsigned status,
				 const char *text)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
	MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
	enum MHD_Result ret = MHD_queue_response(con, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *con, const char *url,
			       const char *method, const char *version,
			       const char *upload, size_t *upload_size, void **con_cls)
{
	(void)cls; (void)version; (void)upload;
	struct req_ctx *rc = *con_cls;
	if (!rc) {
		*con_cls = rc = calloc(1, sizeof(*rc));
		return MHD_YES;
	}
	if (*upload_size) {
		rc->len += *upload_size;
		*upload_size = 0;
		return MHD_YES;
	}
	if (!strcmp(url, "/hello"))
		return send_text(con, 200, "hello");
	if (!strcmp(url, "/echo")) {
		const char *cl = MHD_lookup_connection_value(con, MHD_HEADER_KIND,
							     "Content-Length");
		const char *xt = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "X-Test");
		char out[256];
		snprintf(out, sizeof(out), "%s len=%zu cl=%s x=%s", method, rc->len,
			 cl ? cl : "none", xt ? xt : "none");
		return send_text(con, 201, out);
	}
	if (!strcmp(url, "/big")) {
		struct MHD_Response *r = MHD_create_response_from_callback(
			MHD_SIZE_UNKNOWN, 16384, big_reader, NULL, NULL);
		enum MHD_Result ret = MHD_queue_response(con, 200, r);
		MHD_destroy_response(r);
		return ret;
	}
	if (!strcmp(url, "/slow")) {
		sleep(2);
		return send_text(con, 200, "late");
	}
	return send_text(con, 404, "no");
}

static void completed(void *cls, struct MHD_Connection *con, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	(void)cls; (void)con; (void)toe;
	free(*con_cls);
	*con_cls = NULL;
}

static struct MHD_Daemon *start(int listen_fd, struct sockaddr_in *sa)
{
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION;
	if (listen_fd >= 0)
		return MHD_start_daemon(flags, 0, NULL, NULL, handler, NULL,
					MHD_OPTION_LISTEN_SOCKET, listen_fd,
					MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
					MHD_OPTION_END);
	return MHD_start_daemon(flags, 0, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR,
				(struct sockaddr *)sa, MHD_OPTION_NOTIFY_COMPLETED, completed,
				NULL, MHD_OPTION_END);
}

static char base[64];
static char sock_path[108];

TEST(tcp_get_and_content_type)
{
	char url[128];
	snprintf(url, sizeof(url), "%s/hello", base);
	struct httpc_request req = {.method = "GET", .url = url, .timeout_ms = 5000};
	struct httpc_response resp;
	struct terr err = {0};
	CHECK_INT(httpc_do(&req, &resp, &err), 0);
	CHECK_INT(resp.status, 200);
	CHECK_STR(resp.body, "hello");
	CHECK_INT(resp.len, 5);
	CHECK_STR(resp.content_type, "text/plain; charset=utf-8");
	httpc_response_free(&resp);

	snprintf(url, sizeof(url), "%s/missing", base);
	CHECK_INT(httpc_do(&req, &resp, &err), 0);  /* any status is a success here */
	CHECK_INT(resp.status, 404);
	httpc_response_free(&resp);
}

TEST(bodies_and_headers)
{
	char url[128];
	snprintf(url, sizeof(url), "%s/echo", base);
	const char *const hdrs[] = {"X-Test: yes", NULL};
	char body[3000];
	memset(body, 'b', sizeof(body));
	struct httpc_request req = {.method = "POST", .url = url, .headers = hdrs,
				    .body = body, .body_len = sizeof(body)};
	struct httpc_response resp;
	struct terr err = {0};
	CHECK_INT(httpc_do(&req, &resp, &err), 0);
	CHECK_INT(resp.status, 201);
	CHECK_STR(resp.body, "POST len=3000 cl=3000 x=yes");
	httpc_response_free(&resp);

	/* POST without a body still says Content-Length: 0 (Docker needs it). */
	struct httpc_request empty = {.method = "POST", .url = url};
	CHECK_INT(httpc_do(&empty, &resp, &err), 0);
	CHECK_STR(resp.body, "POST len=0 cl=0 x=none");
	httpc_response_free(&resp);

	struct httpc_request del = {.method = "DELETE", .url = url};
	CHECK_INT(httpc_do(&del, &resp, &err), 0);
	CHECK_CONTAINS(resp.body, "DELETE len=0");
	httpc_response_free(&resp);
}

TEST(unix_socket)
{
	struct httpc_request req = {.method = "GET", .url = "http://docker/v1.43/hello",
				    .unix_socket = sock_path};
	struct httpc_response resp;
	struct terr err = {0};
	/* The path differs so the server says 404: what matters is it answered. */
	CHECK_INT(httpc_do(&req, &resp, &err), 0);
	CHECK_INT(resp.status, 404);
	httpc_response_free(&resp);
	req.url = "http://docker/hello";
	CHECK_INT(httpc_do(&req, &resp, &err), 0);
	CHECK_STR(resp.body, "hello");
	httpc_response_free(&resp);

	req.unix_socket = "/nonexistent/docker.sock";
	CHECK_INT(httpc_do(&req, &resp, &err), -ECONNREFUSED);
	CHECK(err.msg[0] != '\0');
	CHECK(resp.body == NULL);
}

struct sink {
	size_t got;
	int calls;
	int stop_after;
};

static int on_data(const char *data, size_t len, void *ud)
{
	struct sink *s = ud;
	(void)data;
	s->got += len;
	s->calls++;
	return s->stop_after && s->calls >= s->stop_after;
}

TEST(streaming_and_abort)
{
	char url[128];
	snprintf(url, sizeof(url), "%s/big", base);
	struct sink s = {0};
	struct httpc_request req = {.method = "GET", .url = url, .on_data = on_data, .ud = &s};
	struct httpc_response resp;
	struct terr err = {0};
	CHECK_INT(httpc_do(&req, &resp, &err), 0);
	CHECK_INT(resp.status, 200);
	CHECK_INT(s.got, BIG_LEN);
	CHECK(resp.body == NULL);
	httpc_response_free(&resp);

	struct sink stop = {.stop_after = 1};
	req.ud = &stop;
	CHECK_INT(httpc_do(&req, &resp, &err), 0);
	CHECK_INT(resp.status, 200);
	CHECK_INT(stop.calls, 1);
	CHECK(stop.got < BIG_LEN);
	httpc_response_free(&resp);
}

static void *set_later(void *p)
{
	usleep(200 * 1000);
	atomic_store_explicit((atomic_bool *)p, true, memory_order_relaxed);
	return NULL;
}

TEST(cancel_and_timeout)
{
	char url[128];
	snprintf(url, sizeof(url), "%s/slow", base);
	atomic_bool cancel = false;
	struct httpc_request req = {.method = "GET", .url = url, .cancel = &cancel};
	struct httpc_response resp;
	struct terr err = {0};
	pthread_t th;
	pthread_create(&th, NULL, set_later, (void *)&cancel);
	CHECK_INT(httpc_do(&req, &resp, &err), -ECANCELED);
	CHECK_CONTAINS(err.msg, "cancelled");
	pthread_join(th, NULL);

	struct httpc_request slow = {.method = "GET", .url = url, .timeout_ms = 200};
	CHECK_INT(httpc_do(&slow, &resp, &err), -ETIMEDOUT);
	CHECK_CONTAINS(err.msg, "imed out");
}

int main(void)
{
	httpc_global_init();
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct MHD_Daemon *tcp = start(-1, &sa);
	if (!tcp)
		return 1;
	snprintf(base, sizeof(base), "http://127.0.0.1:%u",
		 (unsigned)MHD_get_daemon_info(tcp, MHD_DAEMON_INFO_BIND_PORT)->port);

	char dir[] = "/tmp/test_httpc.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	snprintf(sock_path, sizeof(sock_path), "%s/s.sock", dir);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un su = {.sun_family = AF_UNIX};
	memcpy(su.sun_path, sock_path, strlen(sock_path) + 1);
	if (bind(fd, (struct sockaddr *)&su, sizeof(su)) < 0 || listen(fd, 16) < 0)
		return 1;
	struct MHD_Daemon *ux = start(fd, NULL);
	if (!ux)
		return 1;

	RUN(tcp_get_and_content_type);
	RUN(bodies_and_headers);
	RUN(unix_socket);
	RUN(streaming_and_abort);
	RUN(cancel_and_timeout);
	MHD_stop_daemon(ux);
	MHD_stop_daemon(tcp);
	unlink(sock_path);
	rmdir(dir);
	return testlib_done();
}
