/* api_call against a real HTTP server (libmicrohttpd, in this process, on
 * 127.0.0.1 at an ephemeral port) that recomputes every signature with
 * sign_verify, as the manager will. */
#include "common/apiclient.h"
#include "common/httpc.h"
#include "common/sign.h"
#include "testlib.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define AK "AKTEST"
#define SK "secret-key-for-tests"

struct req_ctx {
	char *uri;   /* request target exactly as sent, from the URI log hook */
	char *body;
	size_t len;
};

static void *uri_logger(void *cls, const char *uri, struct MHD_Connection *con)
{
	(void)cls; (void)con;
	struct req_ctx *rc = calloc(1, sizeof(*rc));
	rc->uri = strdup(uri);
	return rc;
}

static void completed(void *cls, struct MHD_Connection *con, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	(void)cls; (void)con; (void)toe;
	struct req_ctx *rc = *con_cls;
	if (rc) {
		free(rc->uri);
		free(rc->body);
		free(rc);
	}
	*con_cls = NULL;
}

static enum MHD_Result reply(struct MHD_Connection *con, unsigned status, json_t *doc)
{
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : strdup("");
	json_decref(doc);
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text,
								 MHD_RESPMEM_MUST_FREE);
	if (*text)
		MHD_add_response_header(r, "Content-Type", "application/json");
	enum MHD_Result ret = MHD_queue_response(con, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply_error(struct MHD_Connection *con, unsigned status,
				   const char *code, const char *msg)
{
	return reply(con, status, json_pack("{s:{s:s,s:s}}", "error", "code", code,
					    "message", msg));
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *con, const char *url,
			       const char *method, const char *version,
			       const char *upload, size_t *upload_size, void **con_cls)
{
	(void)cls; (void)version;
	struct req_ctx *rc = *con_cls;
	if (*upload_size) {
		rc->body = realloc(rc->body, rc->len + *upload_size + 1);
		memcpy(rc->body + rc->len, upload, *upload_size);
		rc->len += *upload_size;
		rc->body[rc->len] = '\0';
		*upload_size = 0;
		return MHD_YES;
	}
	/* First call without body data comes before the body: wait for the
	 * final one (MHD calls again with size 0 at the end). */
	if (!rc->body && !strcmp(method, "POST")) {
		const char *cl = MHD_lookup_connection_value(con, MHD_HEADER_KIND,
							     "Content-Length");
		if (cl && atoi(cl) > 0)
			return MHD_YES;
	}

	const char *date = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Date");
	const char *host = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Host");
	const char *auth = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Authorization");
	const char *ctype = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Type");
	char ak[128], sig[SIGN_HEX_LEN + 1];
	struct terr err = {0};
	if (sign_parse_authorization(auth, ak, sizeof(ak), sig, &err) < 0)
		return reply_error(con, 401, "unauthenticated", err.msg);
	if (strcmp(ak, AK))
		return reply_error(con, 401, "unauthenticated", "unknown access key");
	if (sign_verify(SK, sig, method, rc->uri, date, host ? host : "", rc->body, rc->len,
			time(NULL), &err) < 0)
		return reply_error(con, 401, "unauthenticated", err.msg);
	if (!ctype || strcmp(ctype, "application/json"))
		return reply_error(con, 400, "invalid_argument", "Content-Type must be JSON");

	if (!strcmp(url, "/v1/auth/whoami"))
		return reply(con, 200, json_pack("{s:{s:s}}", "user", "email", "admin@t"));
	if (!strcmp(url, "/v1/echo")) {
		json_t *got = rc->body ? json_loads(rc->body, 0, NULL) : json_null();
		return reply(con, 200, json_pack("{s:o,s:s,s:s,s:s}", "got", got, "uri", rc->uri,
						 "method", method, "host", host));
	}
	if (!strcmp(url, "/v1/empty"))
		return reply(con, 204, NULL);
	if (!strcmp(url, "/v1/notjson"))
		return reply(con, 200, NULL) == MHD_YES ? MHD_YES : MHD_NO;
	if (!strncmp(url, "/v1/status/", 11)) {
		char msg[64];
		snprintf(msg, sizeof(msg), "you asked for %s", url + 11);
		return reply_error(con, (unsigned)atoi(url + 11), "x", msg);
	}
	if (!strcmp(url, "/v1/plain")) {
		static char text[] = "<html>Bad Gateway</html>\n";
		struct MHD_Response *r = MHD_create_response_from_buffer(
			strlen(text), text, MHD_RESPMEM_PERSISTENT);
		enum MHD_Result ret = MHD_queue_response(con, 502, r);
		MHD_destroy_response(r);
		return ret;
	}
	if (!strcmp(url, "/v1/slow")) {
		sleep(2);
		return reply(con, 200, json_object());
	}
	return reply_error(con, 404, "not_found", "no such route");
}

static struct MHD_Daemon *daemon_;
static char endpoint[64];

static void start_server(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	daemon_ = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
			MHD_USE_ERROR_LOG,
		0, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
		MHD_OPTION_URI_LOG_CALLBACK, uri_logger, NULL,
		MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_END);
	if (!daemon_) {
		fprintf(stderr, "cannot start libmicrohttpd\n");
		exit(1);
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon_,
							       MHD_DAEMON_INFO_BIND_PORT);
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%u", (unsigned)info->port);
}

TEST(signed_get_and_post)
{
	struct api_client c = {.endpoint = endpoint, .access_key = AK, .secret_key = SK};
	struct terr err = {0};
	json_t *out = NULL;
	long status = -1;
	CHECK_INT(api_call(&c, "GET", "/v1/auth/whoami", NULL, 0, &out, &status, &err), 0);
	CHECK_INT(status, 200);
	if (!out) {
		FAILF("no body: %s", err.msg);
		return;
	}
	CHECK_STR(json_string_value(json_object_get(json_object_get(out, "user"), "email")),
		  "admin@t");
	json_decref(out);

	json_t *body = json_pack("{s:s,s:i,s:{s:s}}", "image", "img:1", "count", 3,
				 "resources", "cpu", "0.5");
	CHECK_INT(api_call(&c, "POST", "/v1/echo?x=a%20b&all=1", body, 5000, &out, &status,
			   &err), 0);
	CHECK(json_equal(json_object_get(out, "got"), body));
	CHECK_STR(json_string_value(json_object_get(out, "uri")), "/v1/echo?x=a%20b&all=1");
	CHECK_STR(json_string_value(json_object_get(out, "host")), endpoint + 7);
	json_decref(out);

	/* A big body (over curl's Expect: 100-continue threshold). */
	json_object_set_new(body, "startup_command", json_string(
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"));
	for (int i = 0; i < 40; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%d", i);
		json_object_set_new(body, k, json_string("vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"));
	}
	CHECK_INT(api_call(&c, "POST", "/v1/echo", body, 0, &out, NULL, &err), 0);
	CHECK(json_equal(json_object_get(out, "got"), body));
	json_decref(out);
	json_decref(body);

	/* Trailing slash in the endpoint is fine; out may be NULL. */
	char ep2[80];
	snprintf(ep2, sizeof(ep2), "%s/", endpoint);
	struct api_client c2 = {.endpoint = ep2, .access_key = AK, .secret_key = SK};
	CHECK_INT(api_call(&c2, "GET", "/v1/auth/whoami", NULL, 0, NULL, &status, &err), 0);

	CHECK_INT(api_call(&c, "DELETE", "/v1/empty", NULL, 0, &out, &status, &err), 0);
	CHECK_INT(status, 204);
	CHECK(out == NULL);
}

TEST(error_bodies_and_status_mapping)
{
	struct api_client c = {.endpoint = endpoint, .access_key = AK, .secret_key = SK};
	static const struct { int status, ret; } map[] = {
		{400, -EINVAL}, {401, -EACCES}, {403, -EACCES}, {404, -ENOENT},
		{409, -EEXIST}, {413, -E2BIG}, {503, -EAGAIN}, {422, -EIO}, {500, -EIO},
		{405, -EIO},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		char path[64], want[64];
		snprintf(path, sizeof(path), "/v1/status/%d", map[i].status);
		snprintf(want, sizeof(want), "you asked for %d", map[i].status);
		struct terr err = {0};
		long status = 0;
		json_t *out = (json_t *)1;
		CHECK_INT(api_call(&c, "GET", path, NULL, 0, &out, &status, &err), map[i].ret);
		CHECK_INT(status, map[i].status);
		CHECK_INT(err.code, -map[i].ret);
		CHECK_STR(err.msg, want);
		CHECK(out == NULL);
	}
	struct terr err = {0};
	long status;
	CHECK_INT(api_call(&c, "GET", "/v1/nope", NULL, 0, NULL, &status, &err), -ENOENT);
	CHECK_STR(err.msg, "no such route");

	/* Not our error shape: say who answered what. */
	CHECK_INT(api_call(&c, "GET", "/v1/plain", NULL, 0, NULL, &status, &err), -EIO);
	CHECK_INT(status, 502);
	CHECK_CONTAINS(err.msg, "answered HTTP 502 to GET /v1/plain: <html>Bad Gateway</html>");
}

TEST(signature_checked_by_server)
{
	struct terr err = {0};
	long status;
	struct api_client bad = {.endpoint = endpoint, .access_key = AK, .secret_key = "wrong"};
	CHECK_INT(api_call(&bad, "GET", "/v1/auth/whoami", NULL, 0, NULL, &status, &err),
		  -EACCES);
	CHECK_INT(status, 401);
	CHECK_CONTAINS(err.msg, "signature does not match");
	struct api_client unknown = {.endpoint = endpoint, .access_key = "OTHER",
				     .secret_key = SK};
	CHECK_INT(api_call(&unknown, "GET", "/v1/auth/whoami", NULL, 0, NULL, &status, &err),
		  -EACCES);
	CHECK_STR(err.msg, "unknown access key");
}

TEST(transport_errors)
{
	/* A port nobody listens on: bind, read the port, close. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	CHECK_INT(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CHECK_INT(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	char ep[64], want[128];
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
	struct api_client c = {.endpoint = ep, .access_key = AK, .secret_key = SK};
	struct terr err = {0};
	long status = -1;
	CHECK_INT(api_call(&c, "GET", "/v1/auth/whoami", NULL, 0, NULL, &status, &err),
		  -ECONNREFUSED);
	CHECK_INT(status, 0);
	snprintf(want, sizeof(want), "cannot reach the manager at %s: Connection refused", ep);
	CHECK_STR(err.msg, want);
	CHECK_INT(api_call(&c, "POST", "/rpc/v1/sessions", NULL, 0, NULL, &status, &err),
		  -ECONNREFUSED);
	CHECK_CONTAINS(err.msg, "cannot reach the agent at");

	struct api_client slow = {.endpoint = endpoint, .access_key = AK, .secret_key = SK};
	CHECK_INT(api_call(&slow, "GET", "/v1/slow", NULL, 300, NULL, &status, &err),
		  -ETIMEDOUT);
	CHECK_CONTAINS(err.msg, "no answer from the manager");

	struct api_client none = {.endpoint = "", .access_key = AK, .secret_key = SK};
	CHECK_INT(api_call(&none, "GET", "/v1/x", NULL, 0, NULL, NULL, &err), -EINVAL);
	struct api_client junk = {.endpoint = "127.0.0.1:1", .access_key = AK, .secret_key = SK};
	CHECK_INT(api_call(&junk, "GET", "/v1/x", NULL, 0, NULL, NULL, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "expected http://HOST:PORT");

	CHECK_INT(api_call(&slow, "GET", "/v1/notjson", NULL, 0, NULL, NULL, &err), 0);
}

TEST(escape)
{
	char *s = api_escape("job-1_a.b~c");
	CHECK_STR(s, "job-1_a.b~c");
	free(s);
	s = api_escape("a b/c?d&e%f#ü");
	CHECK_STR(s, "a%20b%2Fc%3Fd%26e%25f%23%C3%BC");
	free(s);
	s = api_escape("");
	CHECK_STR(s, "");
	free(s);
}

int main(void)
{
	httpc_global_init();
	start_server();
	RUN(signed_get_and_post);
	RUN(error_bodies_and_status_mapping);
	RUN(signature_checked_by_server);
	RUN(transport_errors);
	RUN(escape);
	MHD_stop_daemon(daemon_);
	return testlib_done();
}
