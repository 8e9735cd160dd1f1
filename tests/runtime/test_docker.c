/* The Docker runtime against a fake Docker daemon on a unix socket.
 *
 * The fake is a small threaded HTTP/1.1 server written here rather than
 * libmicrohttpd: the tests need byte-level control of what goes on the
 * wire (frames written in tiny pieces, a hijacked exec stream ended by
 * closing the connection, a chunked event stream held open until the
 * client leaves), which is what Docker itself does. It records every
 * request so the tests can assert on paths and bodies. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/httpc.h"
#include "runtime/runtime.h"
#include "runtime/docker_seccomp.h"
#include "testlib.h"

/* ---- fake daemon ------------------------------------------------------- */

#define FAKE_MAX_REQS 256

struct fake_req {
	char method[16];
	char path[2048];     /* as sent, percent-encoded, with query */
	char *body;
};

static struct {
	char dir[48];
	char sock[80];
	int lfd;
	pthread_t thr;
	atomic_bool quit;           /* set by fake_stop, read by the threads */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int active;                 /* connection threads running */
	struct fake_req reqs[FAKE_MAX_REQS];
	int n_reqs;
	char api[16];               /* what GET /version reports */
	int exec_inspects;          /* GET /exec/<id>/json calls so far */
	char rotated_json[1024];    /* what GET /containers/rotated/json answers */
	int dup_inspects;           /* GET /networks/net-dup calls so far */
	int twin_inspects[3];       /* the same of net-twin, net-twin-busy, net-twin-gone */
} fake = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static void msleep(int ms)
{
	nanosleep(&(struct timespec){ .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L }, NULL);
}

static bool write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w <= 0)
			return false;
		c += w;
		n -= (size_t)w;
	}
	return true;
}

static void reply(int fd, int status, const char *body)
{
	char head[256];
	const char *reason = status < 300 ? "OK" : status == 404 ? "Not Found" :
			     status == 409 ? "Conflict" : "Error";
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, reason, body ? strlen(body) : 0);
	write_all(fd, head, (size_t)n);
	if (body)
		write_all(fd, body, strlen(body));
}

static void reply_message(int fd, int status, const char *msg)
{
	json_t *j = json_pack("{s:s}", "message", msg);
	char *s = json_dumps(j, JSON_COMPACT);
	reply(fd, status, s);
	free(s);
	json_decref(j);
}

/* One frame of Docker's multiplexed format, written a few bytes at a time
 * with pauses so the client sees it cut across reads. */
static void frame_slowly(int fd, int stream, const char *s, bool chunked)
{
	size_t n = strlen(s);
	unsigned char buf[512];
	unsigned char h[8] = { (unsigned char)stream, 0, 0, 0, (unsigned char)(n >> 24),
			       (unsigned char)(n >> 16), (unsigned char)(n >> 8), (unsigned char)n };
	memcpy(buf, h, 8);
	memcpy(buf + 8, s, n);
	for (size_t off = 0; off < n + 8; off += 3) {
		size_t k = n + 8 - off < 3 ? n + 8 - off : 3;
		if (chunked) {
			char ch[16];
			int m = snprintf(ch, sizeof(ch), "%zx\r\n", k);
			write_all(fd, ch, (size_t)m);
		}
		write_all(fd, buf + off, k);
		if (chunked)
			write_all(fd, "\r\n", 2);
		msleep(1);
	}
}

static void chunk(int fd, const char *s)
{
	char ch[16];
	int m = snprintf(ch, sizeof(ch), "%zx\r\n", strlen(s));
	write_all(fd, ch, (size_t)m);
	write_all(fd, s, strlen(s));
	write_all(fd, "\r\n", 2);
}

/* Waits until the client closes (or the fake shuts down). */
static void hold_open(int fd)
{
	while (!fake.quit) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 50) > 0) {
			char b[256];
			if (recv(fd, b, sizeof(b), 0) <= 0)
				return;
		}
	}
}

static void route(int fd, const char *method, const char *full, const char *body)
{
	const char *path = full;
	/* Strip the version prefix; /version itself comes unversioned. */
	if (strncmp(path, "/v1.", 4) == 0)
		path = strchr(path + 1, '/');
	if (!path)
		path = "";

	if (!strcmp(method, "GET") && !strcmp(path, "/version")) {
		char b[256];
		snprintf(b, sizeof(b), "{\"Version\":\"20.10.24+dfsg1\",\"ApiVersion\":\"%s\","
			 "\"MinAPIVersion\":\"1.12\",\"Os\":\"linux\"}", fake.api);
		reply(fd, 200, b);
	} else if (!strcmp(method, "POST") && !strncmp(path, "/containers/create", 18)) {
		json_t *j = json_loads(body ? body : "", 0, NULL);
		const char *img = json_string_value(json_object_get(j, "Image"));
		if (img && !strcmp(img, "nosuch:latest"))
			reply_message(fd, 404, "No such image: nosuch:latest");
		else if (strstr(path, "name=taken"))
			reply_message(fd, 409, "Conflict. The container name \"/taken\" is already in use");
		else if (!img)
			reply_message(fd, 400, "config cannot be empty in order to create a container");
		else
			reply(fd, 201, "{\"Id\":\"c0ffee0123456789\",\"Warnings\":[]}");
		json_decref(j);
	} else if (strstr(path, "/containers/gone")) {
		reply_message(fd, 404, "No such container: gone");
	} else if (!strcmp(method, "POST") && !strcmp(path, "/containers/c0ffee/start")) {
		reply(fd, 204, NULL);
	} else if (!strcmp(method, "POST") && !strcmp(path, "/containers/running1/start")) {
		reply(fd, 304, NULL);
	} else if (!strcmp(method, "DELETE") && !strncmp(path, "/containers/c0ffee?", 19)) {
		reply(fd, 204, NULL);
	} else if (!strcmp(method, "POST") && !strcmp(path, "/containers/c0ffee/kill?signal=KILL")) {
		reply(fd, 204, NULL);
	} else if (!strcmp(method, "POST") && !strcmp(path, "/containers/stopped1/kill?signal=KILL")) {
		reply_message(fd, 409, "Cannot kill container: stopped1: Container stopped1 is not running");
	} else if (!strcmp(method, "POST") && !strcmp(path, "/containers/stuck1/kill?signal=KILL")) {
		/* A Docker whose kill does not end (its shim stuck): answered
		 * long after the caller gave up. */
		sleep(2);
		reply(fd, 204, NULL);
	} else if (!strcmp(method, "GET") && !strcmp(path, "/containers/c0ffee/json")) {
		reply(fd, 200,
		      "{\"Id\":\"c0ffee\",\"Name\":\"/sess-1\",\"Image\":\"sha256:abc\","
		      "\"State\":{\"Status\":\"exited\",\"Running\":false,\"OOMKilled\":true,"
		      "\"ExitCode\":137,\"Pid\":0,\"Error\":\"\"},"
		      "\"HostConfig\":{\"NetworkMode\":\"tessera-u-1\"},"
		      "\"Config\":{\"Image\":\"busybox:latest\",\"Labels\":"
		      "{\"tessera.session\":\"s1\",\"tessera.agent\":\"a1\",\"tessera.run_as\":\"1000:1000\"}}}");
	} else if (!strcmp(method, "GET") && !strcmp(path, "/containers/joined1/json")) {
		/* A container in a sandbox's namespace: Docker reports no
		 * network of its own; its labels carry the sandbox's. */
		reply(fd, 200,
		      "{\"Id\":\"joined1\",\"Name\":\"/sess-j\",\"Image\":\"sha256:abc\","
		      "\"State\":{\"Status\":\"running\",\"Running\":true,\"Pid\":4242},"
		      "\"HostConfig\":{\"NetworkMode\":\"container:sbx1\"},"
		      "\"NetworkSettings\":{\"Networks\":{}},"
		      "\"Config\":{\"Image\":\"busybox:latest\",\"Labels\":"
		      "{\"tessera.session\":\"sj\",\"tessera.sandbox\":\"sbx1\",\"tessera.sandbox_ip\":\"172.30.0.7\","
		      "\"tessera.sandbox_published\":\"7611=127.0.0.1:40123\"}}}");
	} else if (!strcmp(method, "GET") && !strncmp(path, "/containers/json?", 17)) {
		reply(fd, 200,
		      "[{\"Id\":\"aaa\",\"Names\":[\"/sess-a\"],\"Image\":\"busybox:latest\","
		      "\"State\":\"running\",\"Status\":\"Up 2 minutes\","
		      "\"Labels\":{\"tessera.session\":\"sa\",\"tessera.agent\":\"a1\","
		      "\"tessera.cluster\":\"k1\"}},"
		      "{\"Id\":\"bbb\",\"Names\":[\"/sess-b\"],\"Image\":\"debian:12\","
		      "\"State\":\"exited\",\"Status\":\"Exited (3) 5 seconds ago\","
		      "\"Labels\":{\"tessera.session\":\"sb\",\"tessera.agent\":\"a1\"}}]");
	} else if (!strcmp(method, "GET") && !strcmp(path, "/images/busybox:latest/json")) {
		reply(fd, 200, "{\"Id\":\"sha256:abc\",\"RepoTags\":[\"busybox:latest\"]}");
	} else if (!strcmp(method, "GET") && !strcmp(path, "/images/cfg:1/json")) {
		reply(fd, 200, "{\"Id\":\"sha256:c0f\",\"Config\":{\"Env\":[\"PATH=/opt/x:/bin\",\"LANG=C\"],"
			       "\"Labels\":{\"ai.backend.service-ports\":\"jupyter:http:8888\",\"n\":1}}}");
	} else if (!strcmp(method, "GET") && !strcmp(path, "/images/json")) {
		reply(fd, 200,
		      "[{\"Id\":\"1\",\"RepoTags\":[\"busybox:latest\",\"busybox:1.36\"]},"
		      "{\"Id\":\"2\",\"RepoTags\":null},"
		      "{\"Id\":\"3\",\"RepoTags\":[\"<none>:<none>\"]},"
		      "{\"Id\":\"4\",\"RepoTags\":[\"me/private:v1\"],\"Size\":5000,"
		      "\"Labels\":{\"tessera.owner\":\"u1\",\"n\":1}},"
		      "{\"Id\":\"5\",\"RepoTags\":[\"tessera-sandbox:1\"],\"Labels\":{\"tessera.role\":\"sandbox\"}}]");
	} else if (!strcmp(method, "GET") && !strncmp(path, "/images/", 8)) {
		reply_message(fd, 404, "No such image");
	} else if (!strcmp(method, "POST") && !strncmp(path, "/images/create?", 15)) {
		const char *h = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				"Transfer-Encoding: chunked\r\n\r\n";
		if (strstr(path, "fromSrc=-&repo=refused")) {
			write_all(fd, h, strlen(h));
			chunk(fd, "{\"errorDetail\":{\"message\":\"unexpected EOF\"},\"error\":\"unexpected EOF\"}\r\n");
			chunk(fd, "");
		} else if (strstr(path, "fromSrc=-")) {
			write_all(fd, h, strlen(h));
			chunk(fd, "{\"status\":\"sha256:9a71a259e4d5\"}\r\n");
			chunk(fd, "");
		} else if (strstr(path, "fromImage=reg%3A5000%2Fgone")) {
			reply_message(fd, 404, "manifest for reg:5000/gone:1 not found: manifest unknown: manifest unknown");
		} else if (strstr(path, "fromImage=reg%3A5000%2Fbroken")) {
			/* Older daemons: 200, then the failure as a line. */
			write_all(fd, h, strlen(h));
			chunk(fd, "{\"status\":\"Pulling from broken\",\"id\":\"1\"}\r\n");
			chunk(fd, "{\"errorDetail\":{\"message\":\"unauthorized: authentication required\"},"
				  "\"error\":\"unauthorized: authentication required\"}\r\n");
			chunk(fd, "");
		} else {
			write_all(fd, h, strlen(h));
			chunk(fd, "{\"status\":\"Pulling fs layer\",\"progressDetail\":{},\"id\":\"a\"}\r\n{\"stat");
			chunk(fd, "us\":\"Downloading\",\"progressDetail\":{\"current\":412,\"total\":980},\"id\":\"a\"}\r\n");
			chunk(fd, "{\"status\":\"Pull complete\",\"progressDetail\":{},\"id\":\"a\"}\r\n");
			chunk(fd, "{\"status\":\"Status: Downloaded newer image for reg:5000/x:1\"}\r\n");
			chunk(fd, "");
		}
	} else if (!strcmp(method, "POST") && !strncmp(path, "/images/reg:5000/x/push?", 24)) {
		const char *h = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				"Transfer-Encoding: chunked\r\n\r\n";
		write_all(fd, h, strlen(h));
		chunk(fd, "{\"status\":\"Pushing\",\"progressDetail\":{\"current\":5,\"total\":10},\"id\":\"l\"}\n");
		chunk(fd, "{\"status\":\"Pushed\",\"progressDetail\":{},\"id\":\"l\"}\n");
		chunk(fd, "");
	} else if (!strcmp(method, "POST") && !strncmp(path, "/images/", 8) && strstr(path, "/tag?")) {
		reply(fd, 201, NULL);
	} else if (!strcmp(method, "DELETE") && !strncmp(path, "/images/", 8)) {
		reply(fd, 200, "[{\"Untagged\":\"reg:5000/x:1\"}]");
	} else if (!strcmp(method, "POST") && !strncmp(path, "/commit?", 8)) {
		reply(fd, 201, "{\"Id\":\"sha256:def\"}");
	} else if (!strcmp(method, "GET") && !strcmp(path, "/containers/rotated/json")) {
		pthread_mutex_lock(&fake.mu);
		char b[sizeof(fake.rotated_json)];
		memcpy(b, fake.rotated_json, sizeof(b));
		pthread_mutex_unlock(&fake.mu);
		reply(fd, 200, b);
	} else if (!strcmp(method, "GET") && (!strncmp(path, "/containers/c0ffee/logs?", 24) ||
					       !strncmp(path, "/containers/rotated/logs?", 25))) {
		const char *h = "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.docker.multiplexed-stream\r\n"
				"Transfer-Encoding: chunked\r\n\r\n";
		write_all(fd, h, strlen(h));
		frame_slowly(fd, 1, "a\n", true);
		frame_slowly(fd, 2, "b\n", true);
		frame_slowly(fd, 1, "c\n", true);
		chunk(fd, "");
	} else if (!strcmp(method, "POST") && !strcmp(path, "/containers/c0ffee/exec")) {
		reply(fd, 201, "{\"Id\":\"exec1\"}");
	} else if (!strcmp(method, "POST") && !strcmp(path, "/containers/stopped/exec")) {
		reply_message(fd, 409, "Container stopped is not running");
	} else if (!strcmp(method, "POST") && !strcmp(path, "/exec/exec1/start")) {
		/* Docker hijacks the connection: no length, ends with close. */
		const char *h = "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.docker.raw-stream\r\n\r\n";
		write_all(fd, h, strlen(h));
		frame_slowly(fd, 1, "line1\n", false);
		frame_slowly(fd, 2, "warn\n", false);
		frame_slowly(fd, 1, "line2\n", false);
	} else if (!strcmp(method, "GET") && !strcmp(path, "/exec/exec1/json")) {
		/* The first inspect races the process's exit, as on a real
		 * daemon: still running, no exit code yet. */
		pthread_mutex_lock(&fake.mu);
		int n = fake.exec_inspects++;
		pthread_mutex_unlock(&fake.mu);
		reply(fd, 200, n % 2 == 0 ? "{\"ID\":\"exec1\",\"Running\":true,\"ExitCode\":null}"
					  : "{\"ID\":\"exec1\",\"Running\":false,\"ExitCode\":3}");
	} else if (!strcmp(method, "GET") && !strcmp(path, "/networks/br-plain")) {
		reply(fd, 200, "{\"Name\":\"br-plain\",\"Id\":\"26bd2392bdd5f00d1234\",\"Driver\":\"bridge\","
			       "\"Options\":{\"com.docker.network.bridge.enable_icc\":\"true\"}}");
	} else if (!strcmp(method, "GET") && !strcmp(path, "/networks/br-named")) {
		reply(fd, 200, "{\"Name\":\"br-named\",\"Id\":\"77aa\",\"Driver\":\"bridge\","
			       "\"Options\":{\"com.docker.network.bridge.name\":\"own0\"}}");
	} else if (!strcmp(method, "GET") && !strcmp(path, "/networks/ov-net")) {
		reply(fd, 200, "{\"Name\":\"ov-net\",\"Id\":\"abcdefabcdef0000\",\"Driver\":\"overlay\"}");
	} else if (!strcmp(method, "GET") && !strcmp(path, "/networks/net-ours")) {
		reply(fd, 200, "{\"Name\":\"net-ours\",\"Id\":\"n1\",\"Labels\":{\"tessera.cluster\":\"k1\","
			       "\"tessera.user\":\"u1\"}}");
	} else if (!strcmp(method, "GET") && !strcmp(path, "/networks/net-theirs")) {
		reply(fd, 200, "{\"Name\":\"net-theirs\",\"Id\":\"n2\",\"Labels\":{\"tessera.cluster\":\"k2\"}}");
	} else if (!strcmp(method, "GET") && !strcmp(path, "/networks/net-dup")) {
		/* Two of that name until the newer one is removed. */
		pthread_mutex_lock(&fake.mu);
		int n = fake.dup_inspects++;
		pthread_mutex_unlock(&fake.mu);
		if (n == 0)
			reply_message(fd, 400, "network net-dup is ambiguous (2 matches found based on name)");
		else
			reply(fd, 200, "{\"Name\":\"net-dup\",\"Id\":\"old1\",\"Labels\":{\"tessera.cluster\":\"k1\","
				       "\"tessera.user\":\"u1\"}}");
	} else if (!strcmp(method, "GET") && (!strcmp(path, "/networks/net-twin") || !strcmp(path, "/networks/net-twin-busy") ||
						!strcmp(path, "/networks/net-twin-gone"))) {
		/* Twins: ambiguous once, then the one left. */
		int k = !strcmp(path, "/networks/net-twin") ? 0 : !strcmp(path, "/networks/net-twin-busy") ? 1 : 2;
		pthread_mutex_lock(&fake.mu);
		int n = fake.twin_inspects[k]++;
		pthread_mutex_unlock(&fake.mu);
		char body[256];
		snprintf(body, sizeof(body), "{\"Name\":\"%s\",\"Id\":\"x\",\"Labels\":{\"tessera.cluster\":\"k1\","
			 "\"tessera.user\":\"u1\"}}", path + 10);
		if (n == 0)
			reply_message(fd, 400, "network is ambiguous (2 matches found based on name)");
		else
			reply(fd, 200, body);
	} else if (!strcmp(method, "GET") && !strncmp(path, "/networks?", 10) && strstr(path, "net-twin-busy")) {
		/* The newer has a container on it: the older goes instead. */
		reply(fd, 200, "[{\"Name\":\"net-twin-busy\",\"Id\":\"b-old\",\"Created\":\"2026-01-01T00:00:00Z\"},"
			       "{\"Name\":\"net-twin-busy\",\"Id\":\"b-new\",\"Created\":\"2026-01-01T00:00:01Z\"}]");
	} else if (!strcmp(method, "GET") && !strncmp(path, "/networks?", 10) && strstr(path, "net-twin-gone")) {
		reply(fd, 200, "[{\"Name\":\"net-twin-gone\",\"Id\":\"g-old\",\"Created\":\"2026-01-01T00:00:00Z\"},"
			       "{\"Name\":\"net-twin-gone\",\"Id\":\"g-new\",\"Created\":\"2026-01-01T00:00:01Z\"}]");
	} else if (!strcmp(method, "GET") && !strncmp(path, "/networks?", 10) && strstr(path, "net-twin")) {
		/* Go trims the fraction's zeros: as text, the older sorts last. */
		reply(fd, 200, "[{\"Name\":\"net-twin\",\"Id\":\"t-old\",\"Created\":\"2026-01-01T00:00:00.1234567Z\"},"
			       "{\"Name\":\"net-twin\",\"Id\":\"t-new\",\"Created\":\"2026-01-01T00:00:00.12345678Z\"}]");
	} else if (!strcmp(method, "DELETE") && (!strcmp(path, "/networks/t-new") || !strcmp(path, "/networks/b-old"))) {
		reply(fd, 204, NULL);
	} else if (!strcmp(method, "DELETE") && !strcmp(path, "/networks/b-new")) {
		reply_message(fd, 403, "error while removing network: network net-twin-busy id b-new has active endpoints");
	} else if (!strcmp(method, "GET") && !strncmp(path, "/networks?", 10)) {
		reply(fd, 200, "[{\"Name\":\"net-dup\",\"Id\":\"new2\",\"Created\":\"2026-01-02T00:00:00Z\"},"
			       "{\"Name\":\"net-dup-x\",\"Id\":\"other\",\"Created\":\"2025-01-01T00:00:00Z\"},"
			       "{\"Name\":\"net-dup\",\"Id\":\"old1\",\"Created\":\"2026-01-01T00:00:00Z\"}]");
	} else if (!strcmp(method, "DELETE") && !strcmp(path, "/networks/new2")) {
		reply(fd, 204, NULL);
	} else if (!strcmp(method, "GET") && !strncmp(path, "/networks/", 10)) {
		reply_message(fd, 404, "network not found");
	} else if (!strcmp(method, "POST") && !strcmp(path, "/networks/create")) {
		reply(fd, 201, "{\"Id\":\"n3\",\"Warning\":\"\"}");
	} else if (!strcmp(method, "DELETE") && !strcmp(path, "/networks/net-ours")) {
		reply(fd, 204, NULL);
	} else if (!strcmp(method, "DELETE") && !strcmp(path, "/networks/net-busy")) {
		reply_message(fd, 403, "error while removing network: network net-busy id n4 has active endpoints");
	} else if (!strcmp(method, "DELETE") && !strncmp(path, "/networks/", 10)) {
		reply_message(fd, 404, "network not found");
	} else if (!strcmp(method, "GET") && !strncmp(path, "/events?", 8) && strstr(path, "network")) {
		/* The images' and networks' stream: one of each, then the end. */
		const char *h = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				"Transfer-Encoding: chunked\r\n\r\n";
		write_all(fd, h, strlen(h));
		chunk(fd, "{\"Type\":\"image\",\"Action\":\"tag\",\"Actor\":{\"ID\":\"sha256:c0f\","
			  "\"Attributes\":{\"name\":\"cfg:1\"}}}\n");
		chunk(fd, "{\"Type\":\"network\",\"Action\":\"destroy\",\"Actor\":{\"ID\":\"n9\","
			  "\"Attributes\":{\"name\":\"tessera-u-x\",\"type\":\"bridge\"}}}\n");
		chunk(fd, "");
	} else if (!strcmp(method, "GET") && !strncmp(path, "/events?", 8)) {
		const char *h = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				"Transfer-Encoding: chunked\r\n\r\n";
		write_all(fd, h, strlen(h));
		chunk(fd, "{\"status\":\"start\",\"id\":\"aaa\",\"Type\":\"container\",\"Action\":\"start\","
			  "\"Actor\":{\"ID\":\"aaa\",\"Attributes\":{\"image\":\"busybox\","
			  "\"tessera.session\":\"sa\"}},\"time\":1}\n");
		msleep(5);
		/* One event cut across two chunks. */
		chunk(fd, "{\"status\":\"die\",\"id\":\"bbb\",\"Type\":\"container\",\"Action\":\"die\",\"Actor\":{\"ID\":\"bbb\",");
		msleep(5);
		chunk(fd, "\"Attributes\":{\"exitCode\":\"137\",\"tessera.session\":\"sb\","
			  "\"tessera.cluster\":\"k1\"}},\"time\":2}\n");
		chunk(fd, "{\"Type\":\"container\",\"Action\":\"oom\",\"Actor\":{\"ID\":\"bbb\","
			  "\"Attributes\":{\"tessera.session\":\"sb\"}}}\n");
		if (strstr(full, "close"))
			chunk(fd, "");   /* the daemon going away */
		else
			hold_open(fd);
	} else {
		reply_message(fd, 404, "page not found");
	}
}

static void *conn_thread(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[65536];
	size_t len = 0;
	char *end = NULL;
	while (len < sizeof(buf) - 1) {
		ssize_t r = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
		if (r <= 0)
			goto out;
		len += (size_t)r;
		buf[len] = '\0';
		if ((end = strstr(buf, "\r\n\r\n")))
			break;
	}
	if (!end)
		goto out;
	size_t head = (size_t)(end - buf) + 4;
	size_t clen = 0;
	const char *cl = strcasestr(buf, "\r\nContent-Length:");
	if (cl && cl < end)
		clen = strtoul(cl + 17, NULL, 10);
	while (len < head + clen && len < sizeof(buf) - 1) {
		ssize_t r = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
	char method[16] = "", path[2048] = "";
	sscanf(buf, "%15s %2047s", method, path);
	const char *body = clen ? buf + head : NULL;

	pthread_mutex_lock(&fake.mu);
	if (fake.n_reqs < FAKE_MAX_REQS) {
		struct fake_req *q = &fake.reqs[fake.n_reqs++];
		snprintf(q->method, sizeof(q->method), "%s", method);
		snprintf(q->path, sizeof(q->path), "%s", path);
		q->body = body ? strdup(body) : NULL;
	}
	pthread_mutex_unlock(&fake.mu);

	route(fd, method, path, body);
out:
	close(fd);
	pthread_mutex_lock(&fake.mu);
	fake.active--;
	pthread_cond_broadcast(&fake.cv);
	pthread_mutex_unlock(&fake.mu);
	return NULL;
}

static void *accept_thread(void *arg)
{
	(void)arg;
	while (!fake.quit) {
		struct pollfd p = { .fd = fake.lfd, .events = POLLIN };
		if (poll(&p, 1, 50) <= 0)
			continue;
		int fd = accept(fake.lfd, NULL, NULL);
		if (fd < 0)
			continue;
		pthread_mutex_lock(&fake.mu);
		fake.active++;
		pthread_mutex_unlock(&fake.mu);
		pthread_t t;
		if (pthread_create(&t, NULL, conn_thread, (void *)(intptr_t)fd) == 0) {
			pthread_detach(t);
		} else {
			close(fd);
			pthread_mutex_lock(&fake.mu);
			fake.active--;
			pthread_mutex_unlock(&fake.mu);
		}
	}
	return NULL;
}

static bool fake_start(void)
{
	snprintf(fake.dir, sizeof(fake.dir), "/tmp/tessera-fakedocker-XXXXXX");
	if (!mkdtemp(fake.dir))
		return false;
	snprintf(fake.sock, sizeof(fake.sock), "%s/docker.sock", fake.dir);
	fake.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", fake.sock);
	if (fake.lfd < 0 || bind(fake.lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fake.lfd, 64) < 0)
		return false;
	snprintf(fake.api, sizeof(fake.api), "1.41");
	return pthread_create(&fake.thr, NULL, accept_thread, NULL) == 0;
}

static void fake_stop(void)
{
	fake.quit = 1;
	pthread_join(fake.thr, NULL);
	pthread_mutex_lock(&fake.mu);
	while (fake.active > 0)
		pthread_cond_wait(&fake.cv, &fake.mu);
	pthread_mutex_unlock(&fake.mu);
	close(fake.lfd);
	unlink(fake.sock);
	rmdir(fake.dir);
	for (int i = 0; i < fake.n_reqs; i++)
		free(fake.reqs[i].body);
}

static void fake_clear(void)
{
	pthread_mutex_lock(&fake.mu);
	for (int i = 0; i < fake.n_reqs; i++)
		free(fake.reqs[i].body);
	fake.n_reqs = 0;
	pthread_mutex_unlock(&fake.mu);
}

/* Last recorded request whose method matches and whose path contains
 * `part`; copied out so the caller owns it (body: free). */
static bool fake_find(const char *method, const char *part, struct fake_req *out)
{
	bool found = false;
	pthread_mutex_lock(&fake.mu);
	for (int i = fake.n_reqs - 1; i >= 0 && !found; i--) {
		struct fake_req *q = &fake.reqs[i];
		if (!strcmp(q->method, method) && strstr(q->path, part)) {
			*out = *q;
			out->body = q->body ? strdup(q->body) : NULL;
			found = true;
		}
	}
	pthread_mutex_unlock(&fake.mu);
	return found;
}

static void url_decode(const char *in, char *out, size_t n)
{
	size_t k = 0;
	for (; *in && k + 1 < n; in++) {
		unsigned v;
		if (*in == '%' && sscanf(in + 1, "%2x", &v) == 1) {
			out[k++] = (char)v;
			in += 2;
		} else {
			out[k++] = *in == '+' ? ' ' : *in;
		}
	}
	out[k] = '\0';
}

/* Value of query parameter `name` in a recorded path, decoded. */
static bool query_param(const char *path, const char *name, char *out, size_t n)
{
	const char *q = strchr(path, '?');
	size_t nl = strlen(name);
	while (q) {
		q++;
		if (!strncmp(q, name, nl) && q[nl] == '=') {
			char raw[2048];
			size_t m = strcspn(q + nl + 1, "&");
			snprintf(raw, sizeof(raw), "%.*s", (int)m, q + nl + 1);
			url_decode(raw, out, n);
			return true;
		}
		q = strchr(q, '&');
	}
	return false;
}

static char endpoint[200];
static const struct runtime_ops *ops = &runtime_docker_ops;

static struct runtime *open_rt(void)
{
	struct runtime *rt = NULL;
	struct terr err;
	terr_clear(&err);
	int r = ops->open(&rt, endpoint, &err);
	if (r != 0)
		FAILF("open: %d %s", r, err.msg);
	return rt;
}

/* ---- tests ------------------------------------------------------------- */

/* An exec run through its stream and collected, as callers that want the
 * output whole do (rt_exec_collect). */
static int exec_collected(struct runtime *rt, const char *id, const char *const *argv,
			  const char *const *env, const char *user, const char *workdir, size_t max,
			  struct rt_exec_result *res, struct terr *err)
{
	struct pump *p = NULL;
	memset(res, 0, sizeof(*res));
	int r = ops->exec_stream(rt, id, argv, env, user, workdir, &p, err);
	if (r == 0) {
		r = rt_exec_collect(p, max, res, err);
		pump_close(p);
	}
	return r;
}

/* A log stream read to its end into *out (malloc'd, NUL-terminated). */
static int logs_collected(struct runtime *rt, const char *id, int tail, char **out, size_t *len,
			  struct terr *err)
{
	struct pump *p = NULL;
	*out = NULL;
	*len = 0;
	int r = ops->logs_stream(rt, id, tail, false, &p, err);
	if (r < 0)
		return r;
	size_t cap = 1024;
	char *buf = malloc(cap);
	for (long n; buf;) {
		if (*len + 512 + 1 > cap && !(buf = realloc(buf, cap *= 2)))
			break;
		n = pump_read(p, buf + *len, 512, -1);
		if (n <= 0) {
			if (n < 0)
				r = terr_set(err, pump_error(p)->code, "%s", pump_error(p)->msg);
			break;
		}
		*len += (size_t)n;
	}
	pump_close(p);
	if (!buf)
		return terr_set(err, ENOMEM, "out of memory");
	buf[*len] = '\0';
	*out = buf;
	return r;
}

TEST(negotiates_server_version)
{
	fake_clear();
	snprintf(fake.api, sizeof(fake.api), "1.41");
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	char api[16], server[64];
	struct terr err;
	CHECK_INT(ops->version(rt, api, sizeof(api), server, sizeof(server), &err), 0);
	CHECK_STR(api, "1.41");
	CHECK_STR(server, "20.10.24+dfsg1");
	struct fake_req q;
	CHECK(fake_find("GET", "/version", &q));
	CHECK_STR(q.path, "/version");   /* negotiation itself is unversioned */
	bool exists = false;
	CHECK_INT(ops->image_exists(rt, "busybox:latest", &exists, &err), 0);
	CHECK(exists);
	CHECK(fake_find("GET", "/images/", &q));
	CHECK_STR(q.path, "/v1.41/images/busybox:latest/json");
	ops->close(rt);
}

TEST(caps_newer_servers_at_1_45)
{
	snprintf(fake.api, sizeof(fake.api), "1.47");
	struct runtime *rt = open_rt();
	snprintf(fake.api, sizeof(fake.api), "1.41");
	if (!rt)
		return;
	char api[16];
	CHECK_INT(ops->version(rt, api, sizeof(api), NULL, 0, NULL), 0);
	CHECK_STR(api, "1.45");
	fake_clear();
	bool exists = true;
	struct terr err;
	CHECK_INT(ops->image_exists(rt, "nosuch:1", &exists, &err), 0);
	CHECK(!exists);
	struct fake_req q;
	CHECK(fake_find("GET", "/images/", &q));
	CHECK_STR(q.path, "/v1.45/images/nosuch:1/json");
	ops->close(rt);
}

TEST(refuses_old_servers)
{
	snprintf(fake.api, sizeof(fake.api), "1.30");
	struct runtime *rt = (struct runtime *)1;
	struct terr err;
	terr_clear(&err);
	int r = ops->open(&rt, endpoint, &err);
	snprintf(fake.api, sizeof(fake.api), "1.41");
	CHECK(r < 0);
	CHECK(rt == NULL);
	CHECK_INT(err.code, -r);
	CHECK_CONTAINS(err.msg, "1.30");
	CHECK_CONTAINS(err.msg, "1.40");
}

TEST(unreachable_daemon_says_where)
{
	char ep[256];
	snprintf(ep, sizeof(ep), "unix://%s/nothing.sock", fake.dir);
	struct runtime *rt = NULL;
	struct terr err;
	terr_clear(&err);
	CHECK(ops->open(&rt, ep, &err) < 0);
	CHECK(rt == NULL);
	CHECK_CONTAINS(err.msg, "nothing.sock");
	CHECK_CONTAINS(err.msg, "is dockerd running");
	printf("  (unreachable: %s)\n", err.msg);
	CHECK(ops->open(&rt, "http:/bad", &err) == -EINVAL);
	CHECK(ops->open(&rt, "unix://relative.sock", &err) == -EINVAL);
}

static const char *const test_entry[] = { "/.tessera/runner", NULL };
static const char *const test_env[] = { "A=1", "HOME=/root", NULL };
static const char *const test_devs[] = { "/dev/null", NULL };
static const struct rt_label test_labels[] = {
	{ "tessera.session", "s1" }, { "tessera.agent", "a1" },
};
static const struct rt_mount test_mounts[] = {
	{ "/srv/tessera/runner", "/.tessera/runner", true },
	{ "/srv/home/u1", "/home/work", false },
};

static struct rt_container_spec test_spec(void)
{
	return (struct rt_container_spec){
		.name = "sess-1", .image = "busybox:latest", .entrypoint = test_entry,
		.env = test_env, .labels = test_labels, .n_labels = 2,
		.mounts = test_mounts, .n_mounts = 2, .devices = test_devs,
		.hostname = "s1", .nano_cpus = 1500000000LL,
		.memory_bytes = 512LL << 20, .pids_limit = 1024,
		.log_max_size = 100LL << 20, .log_max_files = 5,
		.network = "tessera-u-1",
	};
}

static bool array_has(json_t *arr, const char *s)
{
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
		if (json_is_string(v) && !strcmp(json_string_value(v), s))
			return true;
	return false;
}

TEST(create_sends_the_full_spec)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	fake_clear();
	struct rt_container_spec spec = test_spec();
	char id[RT_ID_MAX];
	struct terr err;
	terr_clear(&err);
	CHECK_INT(ops->create(rt, &spec, id, &err), 0);
	CHECK_STR(id, "c0ffee0123456789");
	struct fake_req q;
	CHECK(fake_find("POST", "/containers/create", &q));
	CHECK_STR(q.path, "/v1.41/containers/create?name=sess-1");
	json_t *b = json_loads(q.body ? q.body : "", 0, NULL);
	CHECK(b != NULL);
	free(q.body);
	if (!b)
		goto out;
	CHECK_STR(json_string_value(json_object_get(b, "Image")), "busybox:latest");
	json_t *ep = json_object_get(b, "Entrypoint");
	CHECK_INT(json_array_size(ep), 1);
	CHECK_STR(json_string_value(json_array_get(ep, 0)), "/.tessera/runner");
	json_t *cmd = json_object_get(b, "Cmd");
	CHECK(json_is_array(cmd));   /* present and empty: no image CMD appended */
	CHECK_INT(json_array_size(cmd), 0);
	CHECK(array_has(json_object_get(b, "Env"), "A=1"));
	CHECK(array_has(json_object_get(b, "Env"), "HOME=/root"));
	json_t *labels = json_object_get(b, "Labels");
	CHECK_STR(json_string_value(json_object_get(labels, "tessera.session")), "s1");
	CHECK_STR(json_string_value(json_object_get(labels, "tessera.agent")), "a1");
	CHECK_STR(json_string_value(json_object_get(b, "Hostname")), "s1");

	json_t *hc = json_object_get(b, "HostConfig");
	CHECK_INT(json_integer_value(json_object_get(hc, "NanoCpus")), 1500000000LL);
	CHECK_INT(json_integer_value(json_object_get(hc, "Memory")), 512LL << 20);
	CHECK_INT(json_integer_value(json_object_get(hc, "MemorySwap")), 512LL << 20);
	CHECK_INT(json_integer_value(json_object_get(hc, "PidsLimit")), 1024);
	json_t *mounts = json_object_get(hc, "Mounts");
	CHECK_INT(json_array_size(mounts), 2);
	json_t *m0 = json_array_get(mounts, 0), *m1 = json_array_get(mounts, 1);
	CHECK_STR(json_string_value(json_object_get(m0, "Type")), "bind");
	CHECK_STR(json_string_value(json_object_get(m0, "Source")), "/srv/tessera/runner");
	CHECK_STR(json_string_value(json_object_get(m0, "Target")), "/.tessera/runner");
	CHECK(json_is_true(json_object_get(m0, "ReadOnly")));
	CHECK_STR(json_string_value(json_object_get(m1, "Target")), "/home/work");
	CHECK(json_is_false(json_object_get(m1, "ReadOnly")));
	json_t *dev = json_array_get(json_object_get(hc, "Devices"), 0);
	CHECK_STR(json_string_value(json_object_get(dev, "PathOnHost")), "/dev/null");
	CHECK_STR(json_string_value(json_object_get(dev, "PathInContainer")), "/dev/null");
	CHECK_STR(json_string_value(json_object_get(dev, "CgroupPermissions")), "rwm");
	CHECK(array_has(json_object_get(hc, "SecurityOpt"), "no-new-privileges"));
	/* Tessera's seccomp profile, whole, as the runtime built it. */
	json_t *so = json_object_get(hc, "SecurityOpt");
	CHECK_INT(json_array_size(so), 2);
	const char *sc = json_string_value(json_array_get(so, 1));
	CHECK(sc && !strncmp(sc, "seccomp=", 8));
	json_t *prof = sc ? json_loads(sc + 8, 0, NULL) : NULL;
	json_t *want = docker_seccomp_profile();
	CHECK(prof && want && json_equal(prof, want));
	json_decref(prof);
	json_decref(want);
	json_t *drop = json_object_get(hc, "CapDrop");
	const char *caps[] = { "NET_RAW", "MKNOD", "AUDIT_WRITE", "SYS_CHROOT", "SETFCAP", "SETPCAP" };
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		CHECK(array_has(drop, caps[i]));
	CHECK(!array_has(drop, "CHOWN"));
	CHECK(json_is_false(json_object_get(hc, "Init")));
	CHECK(json_is_false(json_object_get(hc, "AutoRemove")));
	CHECK_STR(json_string_value(json_object_get(json_object_get(hc, "RestartPolicy"), "Name")), "no");
	/* The log is capped: json-file, max-size per file, in bytes. */
	json_t *lc = json_object_get(hc, "LogConfig");
	CHECK_STR(json_string_value(json_object_get(lc, "Type")), "json-file");
	CHECK_STR(json_string_value(json_object_get(json_object_get(lc, "Config"), "max-size")), "20971520");
	CHECK_STR(json_string_value(json_object_get(json_object_get(lc, "Config"), "max-file")), "5");
	CHECK_STR(json_string_value(json_object_get(hc, "NetworkMode")), "tessera-u-1");
	json_decref(b);

	/* A given Cmd is passed as is; limits of 0 are left out. */
	static const char *const cmd2[] = { "sleep", "1", NULL };
	spec.cmd = cmd2;
	spec.memory_bytes = spec.pids_limit = spec.nano_cpus = 0;
	spec.name = "sess 2/x";
	CHECK_INT(ops->create(rt, &spec, id, &err), 0);
	CHECK(fake_find("POST", "/containers/create", &q));
	CHECK_STR(q.path, "/v1.41/containers/create?name=sess%202%2Fx");
	b = json_loads(q.body ? q.body : "", 0, NULL);
	free(q.body);
	cmd = json_object_get(b, "Cmd");
	CHECK_INT(json_array_size(cmd), 2);
	CHECK_STR(json_string_value(json_array_get(cmd, 1)), "1");
	hc = json_object_get(b, "HostConfig");
	CHECK(json_object_get(hc, "Memory") == NULL);
	CHECK(json_object_get(hc, "PidsLimit") == NULL);
	json_decref(b);
	/* No cap: Docker's own log settings. */
	spec.log_max_size = 0;
	CHECK_INT(ops->create(rt, &spec, id, &err), 0);
	CHECK(fake_find("POST", "/containers/create", &q));
	b = json_loads(q.body ? q.body : "", 0, NULL);
	free(q.body);
	CHECK(json_object_get(json_object_get(b, "HostConfig"), "LogConfig") == NULL);
	json_decref(b);
	/* seccomp = default: Docker's own profile, so no seccomp entry. */
	spec.seccomp_default = true;
	CHECK_INT(ops->create(rt, &spec, id, &err), 0);
	CHECK(fake_find("POST", "/containers/create", &q));
	b = json_loads(q.body ? q.body : "", 0, NULL);
	free(q.body);
	json_t *so2 = json_object_get(json_object_get(b, "HostConfig"), "SecurityOpt");
	CHECK_INT(json_array_size(so2), 1);
	CHECK(array_has(so2, "no-new-privileges"));
	json_decref(b);
	/* Joining a sandbox's namespace: NetworkMode container:ID, and no
	 * host name, alias or published port, which Docker would refuse. */
	spec.netns_of = "sbx1";
	spec.network_alias = "main1";
	spec.publish_port = 7611;
	CHECK_INT(ops->create(rt, &spec, id, &err), 0);
	CHECK(fake_find("POST", "/containers/create", &q));
	b = json_loads(q.body ? q.body : "", 0, NULL);
	free(q.body);
	hc = json_object_get(b, "HostConfig");
	CHECK_STR(json_string_value(json_object_get(hc, "NetworkMode")), "container:sbx1");
	CHECK(json_object_get(b, "Hostname") == NULL);
	CHECK(json_object_get(b, "NetworkingConfig") == NULL);
	CHECK(json_object_get(b, "ExposedPorts") == NULL);
	CHECK(json_object_get(hc, "PortBindings") == NULL);
	json_decref(b);
out:
	ops->close(rt);
}

TEST(errors_carry_dockers_message)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	struct rt_container_spec spec = test_spec();
	char id[RT_ID_MAX];
	struct terr err;

	spec.image = "nosuch:latest";
	terr_clear(&err);
	CHECK_INT(ops->create(rt, &spec, id, &err), -ENOENT);
	CHECK_INT(err.code, ENOENT);
	CHECK_STR(err.msg, "create container: No such image: nosuch:latest");

	spec.image = "busybox:latest";
	spec.name = "taken";
	CHECK_INT(ops->create(rt, &spec, id, &err), -EEXIST);
	CHECK_CONTAINS(err.msg, "is already in use");

	CHECK_INT(ops->start(rt, "gone", &err), -ENOENT);
	CHECK_STR(err.msg, "start container: No such container: gone");
	CHECK_INT(ops->remove(rt, "gone", &err), -ENOENT);
	CHECK_STR(err.msg, "remove container: No such container: gone");
	struct rt_container_info info;
	CHECK_INT(ops->inspect(rt, "gone", &info, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "inspect container: No such container");

	struct rt_exec_result res;
	static const char *const argv[] = { "true", NULL };
	CHECK(exec_collected(rt, "stopped", argv, NULL, NULL, NULL, 100, &res, &err) < 0);
	CHECK_CONTAINS(err.msg, "is not running");
	CHECK(res.out == NULL && res.err == NULL);
	ops->close(rt);
}

TEST(start_remove_inspect)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	fake_clear();
	struct terr err;
	CHECK_INT(ops->start(rt, "c0ffee", &err), 0);
	CHECK_INT(ops->start(rt, "running1", &err), 0);   /* 304: already running */
	CHECK_INT(ops->remove(rt, "c0ffee", &err), 0);
	struct fake_req q;
	CHECK(fake_find("DELETE", "/containers/", &q));
	CHECK_STR(q.path, "/v1.41/containers/c0ffee?force=1&v=1");
	/* kill: SIGKILL, waited for within the caller's time; not running
	 * is what was wanted; past the time, -ETIMEDOUT. */
	CHECK_INT(ops->kill(rt, "c0ffee", 5000, &err), 0);
	CHECK(fake_find("POST", "/v1.41/containers/c0ffee/kill?signal=KILL", &q));
	CHECK_INT(ops->kill(rt, "stopped1", 5000, &err), 0);
	CHECK_INT(ops->kill(rt, "gone", 5000, &err), -ENOENT);
	CHECK_INT(ops->kill(rt, "stuck1", 200, &err), -ETIMEDOUT);
	CHECK_CONTAINS(err.msg, "kill container");

	struct rt_container_info info;
	CHECK_INT(ops->inspect(rt, "c0ffee", &info, &err), 0);
	CHECK_STR(info.id, "c0ffee");
	CHECK_STR(info.name, "sess-1");
	CHECK_STR(info.image, "busybox:latest");
	CHECK_STR(info.state, "exited");
	CHECK(!info.running);
	CHECK(info.oom_killed);
	CHECK_INT(info.exit_code, 137);
	CHECK_INT(info.pid, 0);
	CHECK_STR(info.session_id, "s1");
	CHECK_STR(info.agent_id, "a1");
	CHECK_STR(info.run_as, "1000:1000");
	CHECK_STR(info.network, "tessera-u-1");
	CHECK_STR(info.sandbox, "");
	/* In a sandbox's namespace: the sandbox and its address, from the
	 * labels. */
	CHECK_INT(ops->inspect(rt, "joined1", &info, &err), 0);
	CHECK(info.running);
	CHECK_INT(info.pid, 4242);
	CHECK_STR(info.network, "container:sbx1");
	CHECK_STR(info.sandbox, "sbx1");
	CHECK_STR(info.ip, "172.30.0.7");
	CHECK_INT(info.published_private, 7611);
	CHECK_STR(info.published_host, "127.0.0.1");
	CHECK_INT(info.published_port, 40123);
	ops->close(rt);
}

TEST(import_makes_an_image_from_a_tar)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	fake_clear();
	struct terr err;
	terr_clear(&err);
	static const char tar[1536] = "opt/";
	struct rt_label label = {"tessera.role", "sandbox"};
	CHECK_INT(ops->image_import(rt, "tessera-sandbox:1", &label, tar, sizeof(tar), &err), 0);
	struct fake_req q;
	char v[256];
	CHECK(fake_find("POST", "/images/create?", &q));
	free(q.body);
	CHECK(query_param(q.path, "fromSrc", v, sizeof(v)));
	CHECK_STR(v, "-");
	CHECK(query_param(q.path, "repo", v, sizeof(v)));
	CHECK_STR(v, "tessera-sandbox");
	CHECK(query_param(q.path, "tag", v, sizeof(v)));
	CHECK_STR(v, "1");
	CHECK(query_param(q.path, "changes", v, sizeof(v)));
	CHECK_STR(v, "LABEL tessera.role=sandbox");
	/* Refused inside a 200 stream, and a reference without a tag. */
	CHECK_INT(ops->image_import(rt, "refused:1", NULL, tar, sizeof(tar), &err), -EPROTO);
	CHECK_CONTAINS(err.msg, "unexpected EOF");
	CHECK_INT(ops->image_import(rt, "notag", NULL, tar, sizeof(tar), &err), -EINVAL);
	ops->close(rt);
}

TEST(list_filters_by_label)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	fake_clear();
	struct terr err;
	struct rt_container_info *v = NULL;
	size_t n = 0;
	CHECK_INT(ops->list(rt, "tessera.agent", "a1", &v, &n, &err), 0);
	CHECK_INT(n, 2);
	if (n == 2) {
		CHECK_STR(v[0].id, "aaa");
		CHECK_STR(v[0].name, "sess-a");
		CHECK(v[0].running);
		CHECK_STR(v[0].session_id, "sa");
		CHECK_STR(v[0].cluster_id, "k1");
		CHECK_STR(v[1].cluster_id, "");   /* made before containers carried it */
		CHECK_STR(v[1].state, "exited");
		CHECK(!v[1].running);
		CHECK_INT(v[1].exit_code, 3);
		CHECK_STR(v[1].agent_id, "a1");
	}
	free(v);
	struct fake_req q;
	CHECK(fake_find("GET", "/containers/json", &q));
	CHECK_CONTAINS(q.path, "all=1");
	char filters[512] = "";
	CHECK(query_param(q.path, "filters", filters, sizeof(filters)));
	CHECK_STR(filters, "{\"label\":[\"tessera.agent=a1\"]}");
	ops->close(rt);
}

TEST(images_and_commit)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	fake_clear();
	struct terr err;
	json_t *images = NULL;
	CHECK_INT(ops->image_list(rt, &images, &err), 0);
	/* Images without a reference are left out, and the platform's own
	 * (the sandboxes', label tessera.role); the others keep theirs, with
	 * their size and labels. */
	CHECK_INT(json_array_size(images), 2);
	if (json_array_size(images) == 2) {
		json_t *tags0 = json_object_get(json_array_get(images, 0), "tags");
		json_t *tags1 = json_object_get(json_array_get(images, 1), "tags");
		CHECK_INT(json_array_size(tags0), 2);
		CHECK_STR(json_string_value(json_array_get(tags0, 0)), "busybox:latest");
		CHECK_STR(json_string_value(json_array_get(tags0, 1)), "busybox:1.36");
		CHECK_STR(json_string_value(json_array_get(tags1, 0)), "me/private:v1");
		CHECK_STR(json_string_value(json_object_get(json_array_get(images, 0), "id")), "1");
		CHECK_INT(json_integer_value(json_object_get(json_array_get(images, 1), "size")), 5000);
		CHECK_STR(json_string_value(json_object_get(json_object_get(json_array_get(images, 1), "labels"),
							    "tessera.owner")), "u1");
	}
	json_decref(images);

	struct fake_req q;
	char v[256];
	CHECK_INT(ops->commit(rt, "c0ffee", "me/private:v1", NULL, 0, NULL, &err), 0);
	CHECK(fake_find("POST", "/commit", &q));
	CHECK(query_param(q.path, "container", v, sizeof(v)));
	CHECK_STR(v, "c0ffee");
	CHECK(query_param(q.path, "repo", v, sizeof(v)));
	CHECK_STR(v, "me/private");
	CHECK(query_param(q.path, "tag", v, sizeof(v)));
	CHECK_STR(v, "v1");

	/* A registry port is not a tag. */
	CHECK_INT(ops->commit(rt, "c0ffee", "reg:5000/team/img", NULL, 0, NULL, &err), 0);
	CHECK(fake_find("POST", "/commit", &q));
	CHECK(query_param(q.path, "repo", v, sizeof(v)));
	CHECK_STR(v, "reg:5000/team/img");
	CHECK(query_param(q.path, "tag", v, sizeof(v)));
	CHECK_STR(v, "latest");

	/* Labels and variables go in the body, a config Docker merges. */
	const struct rt_label labels[] = {{"tessera.owner", "u1"}, {"ai.backend.features", "private"}};
	const char *const env[] = {"PATH=/bin", NULL};
	CHECK_INT(ops->commit(rt, "c0ffee", "me/private:v2", labels, 2, env, &err), 0);
	CHECK(fake_find("POST", "/commit", &q));
	json_t *body = json_loads(q.body ? q.body : "", 0, NULL);
	CHECK_STR(json_string_value(json_object_get(json_object_get(body, "Labels"), "tessera.owner")), "u1");
	CHECK_STR(json_string_value(json_object_get(json_object_get(body, "Labels"), "ai.backend.features")),
		  "private");
	CHECK_STR(json_string_value(json_array_get(json_object_get(body, "Env"), 0)), "PATH=/bin");
	json_decref(body);
	free(q.body);

	CHECK_INT(ops->commit(rt, "c0ffee", "img@sha256:abc", NULL, 0, NULL, &err), -EINVAL);
	CHECK_INT(ops->commit(rt, "c0ffee", "img:", NULL, 0, NULL, &err), -EINVAL);
	ops->close(rt);
}

static struct {
	int calls;
	int64_t cur, total;
} seen;

static void on_progress(void *ud, int64_t cur, int64_t total)
{
	(void)ud;
	seen.calls++;
	seen.cur = cur;
	seen.total = total;
}

TEST(tag_push_pull_and_remove)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	fake_clear();
	struct terr err;
	struct fake_req q;
	char v[256];
	CHECK_INT(ops->tag(rt, "tp/x:1", "reg:5000/x:1", &err), 0);
	CHECK(fake_find("POST", "/images/tp/x:1/tag?", &q));
	CHECK(query_param(q.path, "repo", v, sizeof(v)));
	CHECK_STR(v, "reg:5000/x");
	CHECK(query_param(q.path, "tag", v, sizeof(v)));
	CHECK_STR(v, "1");

	memset(&seen, 0, sizeof(seen));
	CHECK_INT(ops->push(rt, "reg:5000/x:1", on_progress, NULL, &err), 0);
	CHECK(fake_find("POST", "/images/reg:5000/x/push?tag=1", &q));
	CHECK(seen.calls >= 2);
	CHECK_INT(seen.cur, 10);
	CHECK_INT(seen.total, 10);

	memset(&seen, 0, sizeof(seen));
	CHECK_INT(ops->pull(rt, "reg:5000/x:1", on_progress, NULL, &err), 0);
	CHECK(fake_find("POST", "/images/create?", &q));
	CHECK(query_param(q.path, "fromImage", v, sizeof(v)));
	CHECK_STR(v, "reg:5000/x");
	CHECK(query_param(q.path, "tag", v, sizeof(v)));
	CHECK_STR(v, "1");
	CHECK(seen.calls >= 2);
	CHECK_INT(seen.cur, 980);
	CHECK_INT(seen.total, 980);

	/* A registry without the image: the daemon's 404 and message. */
	CHECK_INT(ops->pull(rt, "reg:5000/gone:1", NULL, NULL, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "pull image reg:5000/gone:1: manifest for reg:5000/gone:1 not found");
	/* A failure reported inside a 200 stream. */
	CHECK_INT(ops->pull(rt, "reg:5000/broken:1", NULL, NULL, &err), -EIO);
	CHECK_CONTAINS(err.msg, "pull image reg:5000/broken:1: unauthorized: authentication required");
	CHECK_INT(ops->pull(rt, "x@sha256:00", NULL, NULL, &err), -EINVAL);

	CHECK_INT(ops->image_remove(rt, "reg:5000/x:1", &err), 0);
	CHECK(fake_find("DELETE", "/images/reg:5000/x:1", &q));
	ops->close(rt);
}

TEST(exec_demultiplexes_with_exit_code)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	fake_clear();
	struct terr err;
	terr_clear(&err);
	static const char *const argv[] = { "sh", "-c", "echo line1; echo warn >&2; echo line2; exit 3", NULL };
	static const char *const env[] = { "X=1", NULL };
	struct rt_exec_result res;
	int r = exec_collected(rt, "c0ffee", argv, env, "1000:1000", "/home/work", 1 << 16, &res, &err);
	CHECK_INT(r, 0);
	if (r == 0) {
		CHECK_INT(res.exit_code, 3);
		CHECK_STR(res.out, "line1\nline2\n");
		CHECK_INT(res.out_len, 12);
		CHECK_STR(res.err, "warn\n");
		CHECK_INT(res.err_len, 5);
		rt_exec_result_free(&res);
	} else {
		FAILF("exec: %s", err.msg);
	}
	struct fake_req q;
	CHECK(fake_find("POST", "/containers/c0ffee/exec", &q));
	json_t *b = json_loads(q.body ? q.body : "", 0, NULL);
	free(q.body);
	CHECK(json_is_true(json_object_get(b, "AttachStdout")));
	CHECK(json_is_true(json_object_get(b, "AttachStderr")));
	CHECK_STR(json_string_value(json_array_get(json_object_get(b, "Cmd"), 0)), "sh");
	CHECK_STR(json_string_value(json_array_get(json_object_get(b, "Env"), 0)), "X=1");
	/* The session's user and home, as its PID 1 runs them. */
	CHECK_STR(json_string_value(json_object_get(b, "User")), "1000:1000");
	CHECK_STR(json_string_value(json_object_get(b, "WorkingDir")), "/home/work");
	json_decref(b);
	CHECK(fake_find("POST", "/exec/exec1/start", &q));
	b = json_loads(q.body ? q.body : "", 0, NULL);
	free(q.body);
	CHECK(json_is_false(json_object_get(b, "Detach")));
	CHECK(json_is_false(json_object_get(b, "Tty")));
	json_decref(b);

	/* Output past max_output is cut, per stream. No user: the
	 * container's own, so neither field is sent. */
	r = exec_collected(rt, "c0ffee", argv, NULL, NULL, NULL, 4, &res, &err);
	CHECK(fake_find("POST", "/containers/c0ffee/exec", &q));
	b = json_loads(q.body ? q.body : "", 0, NULL);
	free(q.body);
	CHECK(json_object_get(b, "User") == NULL);
	CHECK(json_object_get(b, "WorkingDir") == NULL);
	json_decref(b);
	CHECK_INT(r, 0);
	if (r == 0) {
		CHECK_STR(res.out, "line");
		CHECK_STR(res.err, "warn");
		CHECK_INT(res.exit_code, 3);
		rt_exec_result_free(&res);
	}
	ops->close(rt);
}

TEST(logs_interleaved_with_tail)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	fake_clear();
	struct terr err;
	char *out = NULL;
	size_t len = 0;
	CHECK_INT(logs_collected(rt, "c0ffee", 50, &out, &len, &err), 0);
	CHECK_STR(out, "a\nb\nc\n");
	CHECK_INT(len, 6);
	free(out);
	struct fake_req q;
	CHECK(fake_find("GET", "/logs", &q));
	CHECK_CONTAINS(q.path, "stdout=1");
	CHECK_CONTAINS(q.path, "stderr=1");
	CHECK_CONTAINS(q.path, "tail=50");
	CHECK_INT(logs_collected(rt, "c0ffee", 0, &out, &len, &err), 0);
	free(out);
	CHECK(fake_find("GET", "/logs", &q));
	CHECK_CONTAINS(q.path, "tail=all");
	CHECK_INT(logs_collected(rt, "gone", 0, &out, &len, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "No such container: gone");
	/* follow is passed on; a streamed log is followed until it ends. */
	struct pump *p = NULL;
	fake_clear();
	CHECK_INT(ops->logs_stream(rt, "c0ffee", 2, true, &p, &err), 0);
	char buf[64];
	while (p && pump_read(p, buf, sizeof(buf), -1) > 0)
		;
	pump_close(p);
	CHECK(fake_find("GET", "/logs", &q));
	CHECK_CONTAINS(q.path, "follow=1");
	CHECK_CONTAINS(q.path, "tail=2");
	ops->close(rt);
}

/* Sets what the fake says of container "rotated": its log at log_path,
 * json-file with 3 files, started at `started`. */
static void fake_rotated(const char *log_path, const char *started)
{
	pthread_mutex_lock(&fake.mu);
	snprintf(fake.rotated_json, sizeof(fake.rotated_json),
		 "{\"Id\":\"rotated\",\"LogPath\":\"%s\",\"State\":{\"StartedAt\":\"%s\"},"
		 "\"HostConfig\":{\"LogConfig\":{\"Type\":\"json-file\","
		 "\"Config\":{\"max-file\":\"3\",\"max-size\":\"1048576\"}}}}",
		 log_path, started);
	pthread_mutex_unlock(&fake.mu);
}

static void touch(const char *path)
{
	FILE *f = fopen(path, "w");
	if (f)
		fclose(f);
}

TEST(logs_say_when_rotation_dropped_their_start)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	char dir[] = "/tmp/tessera-logs-XXXXXX";
	if (!mkdtemp(dir)) {
		FAILF("mkdtemp: %s", strerror(errno));
		ops->close(rt);
		return;
	}
	char log_path[128], oldest[160];
	snprintf(log_path, sizeof(log_path), "%s/c-json.log", dir);
	snprintf(oldest, sizeof(oldest), "%s.2", log_path);
	touch(log_path);
	struct terr err;
	char *out = NULL;
	size_t len = 0;

	/* Not rotated that far: nothing was dropped. */
	fake_rotated(log_path, "2020-01-01T00:00:00.5Z");
	CHECK_INT(logs_collected(rt, "rotated", 0, &out, &len, &err), 0);
	CHECK_STR(out, "a\nb\nc\n");
	free(out);

	/* The oldest file there can be exists, born after the start: its
	 * predecessors are gone. */
	touch(oldest);
	CHECK_INT(logs_collected(rt, "rotated", 0, &out, &len, &err), 0);
	struct statx stx;
	bool btime = statx(AT_FDCWD, oldest, 0, STATX_BTIME, &stx) == 0 && (stx.stx_mask & STATX_BTIME);
	CHECK_CONTAINS(out, btime ? RT_LOGS_DROPPED ": this session's log is capped at 3 MiB (3 files of 1 MiB)"
				  : "[tessera] earlier output may have been dropped: this session's log is capped at 3 MiB");
	CHECK_CONTAINS(out, "dropped\na\nb\nc\n");
	free(out);
	/* Not asked for with a tail: the start was not asked for. */
	CHECK_INT(logs_collected(rt, "rotated", 5, &out, &len, &err), 0);
	CHECK_STR(out, "a\nb\nc\n");
	free(out);

	/* Born before the container started: it is the first file, whole. */
	if (btime) {
		fake_rotated(log_path, "2999-01-01T00:00:00Z");
		CHECK_INT(logs_collected(rt, "rotated", 0, &out, &len, &err), 0);
		CHECK_STR(out, "a\nb\nc\n");
		free(out);
	}
	unlink(oldest);
	unlink(log_path);
	rmdir(dir);
	ops->close(rt);
}

struct ev_log {
	struct rt_event ev[8];
	int n;
	int stop_after;          /* cb returns 1 at this count, 0 = never */
	atomic_bool *stop;       /* set when all 3 arrived, if non-NULL */
};

static int on_event(const struct rt_event *ev, void *ud)
{
	struct ev_log *l = ud;
	if (l->n < 8)
		l->ev[l->n++] = *ev;
	if (l->stop && l->n == 3)
		atomic_store_explicit(l->stop, true, memory_order_relaxed);
	return l->stop_after && l->n >= l->stop_after;
}

static void check_events(struct ev_log *l)
{
	CHECK_INT(l->n, 3);
	if (l->n < 3)
		return;
	CHECK_STR(l->ev[0].action, "start");
	CHECK_STR(l->ev[0].container_id, "aaa");
	CHECK_STR(l->ev[0].session_id, "sa");
	CHECK_INT(l->ev[0].exit_code, -1);
	CHECK_STR(l->ev[1].action, "die");
	CHECK_STR(l->ev[1].container_id, "bbb");
	CHECK_STR(l->ev[1].session_id, "sb");
	CHECK_STR(l->ev[1].cluster_id, "k1");
	CHECK_STR(l->ev[0].cluster_id, "");
	CHECK_INT(l->ev[1].exit_code, 137);
	CHECK_STR(l->ev[2].action, "oom");
}

TEST(watch_delivers_events_and_stops)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	fake_clear();
	struct terr err;
	terr_clear(&err);

	/* The callback stops it. */
	struct ev_log l = { .stop_after = 3 };
	atomic_bool stop = false;
	CHECK_INT(ops->watch(rt, "tessera.agent", "a1", on_event, &l, &stop, &err), 0);
	check_events(&l);
	struct fake_req q;
	CHECK(fake_find("GET", "/events", &q));
	CHECK_CONTAINS(q.path, "/v1.41/events?");
	char filters[512] = "";
	CHECK(query_param(q.path, "filters", filters, sizeof(filters)));
	json_t *f = json_loads(filters, 0, NULL);
	CHECK(f != NULL);
	CHECK(array_has(json_object_get(f, "type"), "container"));
	CHECK(array_has(json_object_get(f, "label"), "tessera.agent=a1"));
	json_t *evs = json_object_get(f, "event");
	CHECK(array_has(evs, "die") && array_has(evs, "oom") &&
	      array_has(evs, "start") && array_has(evs, "destroy"));
	json_decref(f);

	/* *stop stops it, while the daemon keeps the stream open. */
	struct ev_log l2 = { .stop = &stop };
	atomic_store(&stop, false);
	CHECK_INT(ops->watch(rt, "tessera.agent", "a1", on_event, &l2, &stop, &err), 0);
	check_events(&l2);

	/* The daemon ending the stream is an error the caller must see. */
	struct ev_log l3 = { 0 };
	atomic_store(&stop, false);
	int r = ops->watch(rt, "tessera.agent", "close", on_event, &l3, &stop, &err);
	CHECK_INT(r, -EIO);
	CHECK_CONTAINS(err.msg, "closed the event stream");
	check_events(&l3);
	ops->close(rt);
}

/* The images' stream also says which network was removed: what the
 * agent's kept networks must forget. */
TEST(watch_images_reports_images_and_removed_networks)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	fake_clear();
	struct terr err;
	terr_clear(&err);
	struct ev_log l = { 0 };
	atomic_bool stop = false;
	CHECK_INT(ops->watch_images(rt, on_event, &l, &stop, &err), -EIO);
	CHECK_INT(l.n, 2);
	CHECK(l.ev[0].image && !l.ev[0].network);
	CHECK_STR(l.ev[0].action, "tag");
	CHECK(l.ev[1].network && !l.ev[1].image);
	CHECK_STR(l.ev[1].action, "destroy");
	CHECK_STR(l.ev[1].network_name, "tessera-u-x");
	struct fake_req q;
	CHECK(fake_find("GET", "/events", &q));
	char filters[512] = "";
	CHECK(query_param(q.path, "filters", filters, sizeof(filters)));
	json_t *f = json_loads(filters, 0, NULL);
	CHECK(f != NULL);
	CHECK(array_has(json_object_get(f, "type"), "image") && array_has(json_object_get(f, "type"), "network"));
	CHECK(array_has(json_object_get(f, "event"), "tag") && array_has(json_object_get(f, "event"), "destroy"));
	json_decref(f);
	ops->close(rt);
}

/* A start's look at its image: id, environment and labels, in one call. */
TEST(image_config_reads_id_env_and_labels_at_once)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	fake_clear();
	struct terr err;
	struct rt_image_config c;
	CHECK_INT(ops->image_config(rt, "cfg:1", &c, &err), 0);
	CHECK_STR(c.id, "sha256:c0f");
	CHECK_INT((int)c.n_env, 2);
	if (c.n_env == 2) {
		CHECK_STR(c.env[0], "PATH=/opt/x:/bin");
		CHECK_STR(c.env[1], "LANG=C");
	}
	/* Labels that are not strings are left out. */
	CHECK_INT((int)c.n_labels, 1);
	if (c.n_labels == 1)
		CHECK_STR(c.labels[0], "ai.backend.service-ports=jupyter:http:8888");
	rt_image_config_free(&c);
	CHECK_INT(ops->image_config(rt, "nosuch:1", &c, &err), -ENOENT);
	ops->close(rt);
}

struct par_arg {
	struct runtime *rt;
	int failures;
};

static void *par_worker(void *p)
{
	struct par_arg *a = p;
	for (int i = 0; i < 10; i++) {
		struct rt_container_info info;
		struct terr err;
		if (runtime_docker_ops.inspect(a->rt, "c0ffee", &info, &err) != 0 ||
		    strcmp(info.session_id, "s1") != 0)
			a->failures++;
	}
	return NULL;
}

TEST(ops_from_several_threads)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	pthread_t t[4];
	struct par_arg a[4];
	for (int i = 0; i < 4; i++) {
		a[i] = (struct par_arg){ .rt = rt };
		pthread_create(&t[i], NULL, par_worker, &a[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK_INT(a[i].failures, 0);
	}
	ops->close(rt);
}

TEST(networks_made_once_and_removed)
{
	struct runtime *rt = open_rt();
	if (!rt)
		return;
	struct terr err;
	struct fake_req q;
	const struct rt_label labels[] = { { "tessera.cluster", "k1" }, { "tessera.user", "u1" } };
	struct rt_network_spec ns = { .name = "net-ours", .labels = labels, .n_labels = 2 };

	/* Present with our labels: nothing is created. */
	fake_clear();
	terr_clear(&err);
	CHECK_INT(ops->network_ensure(rt, &ns, &err), 0);
	CHECK(!fake_find("POST", "/networks/create", &q));

	/* Absent: created as a bridge with ICC on, labelled, not internal. */
	ns.name = "net-new";
	CHECK_INT(ops->network_ensure(rt, &ns, &err), 0);
	CHECK(fake_find("POST", "/networks/create", &q));
	json_t *b = json_loads(q.body ? q.body : "", 0, NULL);
	free(q.body);
	CHECK_STR(json_string_value(json_object_get(b, "Name")), "net-new");
	CHECK_STR(json_string_value(json_object_get(b, "Driver")), "bridge");
	CHECK(json_is_true(json_object_get(b, "CheckDuplicate")));
	CHECK(json_is_false(json_object_get(b, "Internal")));
	CHECK_STR(json_string_value(json_object_get(json_object_get(b, "Options"),
						    "com.docker.network.bridge.enable_icc")), "true");
	CHECK_STR(json_string_value(json_object_get(json_object_get(b, "Labels"), "tessera.user")), "u1");
	json_decref(b);

	/* A network of that name with other labels is not taken over. */
	ns.name = "net-theirs";
	CHECK_INT(ops->network_ensure(rt, &ns, &err), -EEXIST);
	CHECK_CONTAINS(err.msg, "net-theirs");

	/* Two of one name (made at once): the newer goes, the older is used. */
	fake_clear();
	ns.name = "net-dup";
	CHECK_INT(ops->network_ensure(rt, &ns, &err), 0);
	CHECK(fake_find("DELETE", "/networks/new2", &q));
	CHECK(!fake_find("DELETE", "/networks/old1", &q));
	CHECK(!fake_find("DELETE", "/networks/other", &q));
	CHECK(!fake_find("POST", "/networks/create", &q));

	/* The older by time, not by text: ".1234567Z" is before ".12345678Z". */
	fake_clear();
	ns.name = "net-twin";
	CHECK_INT(ops->network_ensure(rt, &ns, &err), 0);
	CHECK(fake_find("DELETE", "/networks/t-new", &q));
	CHECK(!fake_find("DELETE", "/networks/t-old", &q));
	/* The newer has a container (it cannot go): the older goes instead. */
	fake_clear();
	ns.name = "net-twin-busy";
	CHECK_INT(ops->network_ensure(rt, &ns, &err), 0);
	CHECK(fake_find("DELETE", "/networks/b-new", &q));
	CHECK(fake_find("DELETE", "/networks/b-old", &q));
	/* The newer is gone already (the other agent removed it): one is
	 * left, which stays. */
	fake_clear();
	ns.name = "net-twin-gone";
	CHECK_INT(ops->network_ensure(rt, &ns, &err), 0);
	CHECK(fake_find("DELETE", "/networks/g-new", &q));
	CHECK(!fake_find("DELETE", "/networks/g-old", &q));
	CHECK(!fake_find("POST", "/networks/create", &q));

	CHECK_INT(ops->network_remove(rt, "net-ours", &err), 0);
	CHECK_INT(ops->network_remove(rt, "net-busy", &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "active endpoints");
	CHECK_INT(ops->network_remove(rt, "net-gone", &err), -ENOENT);
	ops->close(rt);
}

/* A bridge network's device: "br-" and 12 characters of its id, or the
 * name its options give; none for another driver; a missing network is
 * -ENOENT. */
TEST(network_bridge_names_the_device)
{
	struct runtime *rt = NULL;
	struct terr err = {0};
	const struct runtime_ops *ops = &runtime_docker_ops;
	CHECK_INT(ops->open(&rt, endpoint, &err), 0);
	char br[16] = "x";
	CHECK_INT(ops->network_bridge(rt, "br-plain", br, sizeof(br), &err), 0);
	CHECK_STR(br, "br-26bd2392bdd5");
	CHECK_INT(ops->network_bridge(rt, "br-named", br, sizeof(br), &err), 0);
	CHECK_STR(br, "own0");
	CHECK_INT(ops->network_bridge(rt, "ov-net", br, sizeof(br), &err), 0);
	CHECK_STR(br, "");
	CHECK_INT(ops->network_bridge(rt, "net-gone", br, sizeof(br), &err), -ENOENT);
	ops->close(rt);
}

int main(void)
{
	httpc_global_init();
	if (!fake_start()) {
		fprintf(stderr, "cannot start the fake Docker daemon\n");
		return 1;
	}
	snprintf(endpoint, sizeof(endpoint), "unix://%s", fake.sock);
	RUN(negotiates_server_version);
	RUN(caps_newer_servers_at_1_45);
	RUN(refuses_old_servers);
	RUN(unreachable_daemon_says_where);
	RUN(create_sends_the_full_spec);
	RUN(errors_carry_dockers_message);
	RUN(start_remove_inspect);
	RUN(list_filters_by_label);
	RUN(images_and_commit);
	RUN(tag_push_pull_and_remove);
	RUN(exec_demultiplexes_with_exit_code);
	RUN(networks_made_once_and_removed);
	RUN(network_bridge_names_the_device);
	RUN(logs_interleaved_with_tail);
	RUN(logs_say_when_rotation_dropped_their_start);
	RUN(watch_delivers_events_and_stops);
	RUN(watch_images_reports_images_and_removed_networks);
	RUN(image_config_reads_id_env_and_labels_at_once);
	RUN(import_makes_an_image_from_a_tar);
	RUN(ops_from_several_threads);
	fake_stop();
	return testlib_done();
}
