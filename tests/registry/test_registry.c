/* src/registry: the registry's address as configured, its tags list
 * (against a small HTTP server here), and the supervised child process
 * (with fake-registry.sh standing in for docker-registry): started on a
 * free loopback port, started again when it dies, stopped with it. */
#include "registry/registry.h"
#include "testlib.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/httpc.h"
#include "common/httpd.h"
#include "common/log.h"
#include "common/util.h"

TEST(parses_registry_addresses)
{
	char host[64], base[80];
	struct terr err;
	CHECK_INT(registry_parse_url("http://reg.example:5000", host, sizeof(host), base, sizeof(base), &err), 0);
	CHECK_STR(host, "reg.example:5000");
	CHECK_STR(base, "http://reg.example:5000");
	CHECK_INT(registry_parse_url("https://reg.example/", host, sizeof(host), base, sizeof(base), &err), 0);
	CHECK_STR(host, "reg.example");
	CHECK_STR(base, "https://reg.example");
	CHECK_INT(registry_parse_url("127.0.0.1:5000", host, sizeof(host), base, sizeof(base), &err), 0);
	CHECK_STR(host, "127.0.0.1:5000");
	CHECK_STR(base, "http://127.0.0.1:5000");
	CHECK_INT(registry_parse_url("", host, sizeof(host), base, sizeof(base), &err), -EINVAL);
	CHECK_INT(registry_parse_url("http://", host, sizeof(host), base, sizeof(base), &err), -EINVAL);
	CHECK_INT(registry_parse_url("http://reg/v2/x", host, sizeof(host), base, sizeof(base), &err), -EINVAL);
	CHECK_INT(registry_parse_url("reg example", host, sizeof(host), base, sizeof(base), &err), -EINVAL);
	CHECK_INT(registry_parse_url(NULL, host, sizeof(host), base, sizeof(base), &err), -EINVAL);
	char small[8];
	CHECK_INT(registry_parse_url("reg.example:5000", small, sizeof(small), base, sizeof(base), &err),
		  -ENAMETOOLONG);
}

static void tags(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	(void)ctx;
	if (!strcmp(req->params[0], "python"))
		httpd_json(resp, 200, json_pack("{s:s,s:[s,s]}", "name", "python", "tags", "3.11", "latest"));
	else if (!strcmp(req->params[0], "broken"))
		httpd_error(resp, 500, "internal", "storage driver failed");
	else
		httpd_error(resp, 404, "NAME_UNKNOWN", "repository name not known to registry");
}

TEST(asks_the_tags_list)
{
	static const struct httpd_route routes[] = {{"GET", "/v2/{name}/tags/list", tags, 0}};
	struct httpd_config hc = {.listen = "127.0.0.1:0", .routes = routes, .n_routes = 1};
	struct httpd *h = NULL;
	struct terr err = {0};
	if (httpd_start(&hc, &h, &err) < 0) {
		FAILF("httpd_start: %s", err.msg);
		return;
	}
	char base[64];
	snprintf(base, sizeof(base), "http://127.0.0.1:%d", httpd_port(h));
	bool has = false;
	CHECK_INT(registry_has_image(base, "python:3.11", &has, &err), 0);
	CHECK(has);
	CHECK_INT(registry_has_image(base, "python", &has, &err), 0);   /* latest */
	CHECK(has);
	CHECK_INT(registry_has_image(base, "python:3.13", &has, &err), 0);
	CHECK(!has);
	CHECK_INT(registry_has_image(base, "nosuch:1", &has, &err), 0);
	CHECK(!has);
	CHECK_INT(registry_has_image(base, "broken:1", &has, &err), -EIO);
	CHECK_CONTAINS(err.msg, "HTTP 500");
	httpd_stop(h);
	/* nobody there */
	CHECK(registry_has_image(base, "python:3.11", &has, &err) < 0);
	CHECK_CONTAINS(err.msg, "registry http://127.0.0.1:");
}

static bool answers(const char *host)
{
	char url[128];
	snprintf(url, sizeof(url), "http://%s/v2/", host);
	struct httpc_request req = {.method = "GET", .url = url, .timeout_ms = 2000};
	struct httpc_response resp;
	struct terr err = {0};
	if (httpc_do(&req, &resp, &err) < 0)
		return false;
	bool ok = resp.status == 200;
	httpc_response_free(&resp);
	return ok;
}

/* The last pid the fake wrote into DIR/pids. */
static int last_pid(const char *dir)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/pids", dir);
	FILE *f = fopen(path, "r");
	int pid = 0, p;
	while (f && fscanf(f, "%d", &p) == 1)
		pid = p;
	if (f)
		fclose(f);
	return pid;
}

TEST(supervises_the_child)
{
	char dir[] = "/tmp/tessera-registry-XXXXXX";
	if (!mkdtemp(dir)) {
		FAILF("mkdtemp");
		return;
	}
	char sub[600], fake[600];
	snprintf(sub, sizeof(sub), "%s/registry", dir);
	snprintf(fake, sizeof(fake), "%s/fake-registry.sh", getenv("TESSERA_TEST_SRC_DIR") ?: ".");
	struct registry_proc *p = NULL;
	struct terr err = {0};
	CHECK_INT(registry_proc_start(sub, "/nonexistent/docker-registry", &p, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "docker-registry");
	if (registry_proc_start(sub, fake, &p, &err) < 0) {
		FAILF("registry_proc_start: %s", err.msg);
		util_remove_tree(dir);
		return;
	}
	char host[64];   /* registry_proc_host's goes with p */
	snprintf(host, sizeof(host), "%s", registry_proc_host(p));
	CHECK(!strncmp(host, "127.0.0.1:", 10));
	CHECK(answers(host));
	int first = last_pid(sub);
	CHECK(first > 0);
	/* Dies: started again, on the same port. */
	kill(first, SIGKILL);
	bool back = false;
	for (int i = 0; i < 300 && !back; i++) {
		back = last_pid(sub) != first && answers(host);
		if (!back)
			usleep(100 * 1000);
	}
	CHECK(back);
	int second = last_pid(sub);
	registry_proc_stop(p);
	/* Stopped and reaped: no such process any more. */
	CHECK(kill(second, 0) < 0 && errno == ESRCH);
	CHECK(!answers(host));
	util_remove_tree(dir);
}

int main(void)
{
	log_set_level(LOG_ERROR);
	httpc_global_init();
	RUN(parses_registry_addresses);
	RUN(asks_the_tags_list);
	RUN(supervises_the_child);
	return testlib_done();
}
