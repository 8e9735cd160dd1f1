/* images/labels.c: Backend.AI's and Tessera's labels, service ports in
 * both of Backend.AI's forms and its rules, bad labels (a warning, no
 * minimum, never a crash), and image references with their canonical
 * form. */
#include <stdlib.h>

#include "images/labels.h"
#include "testlib.h"

#include <string.h>

#define L(k, v) {(k), (v)}
#define N(a) (sizeof(a) / sizeof((a)[0]))

TEST(backend_ai_labels)
{
	struct img_label l[] = {
		L("ai.backend.kernelspec", "1"),
		L("ai.backend.features", "batch query uid-match user-input"),
		L("ai.backend.base-distro", "ubuntu22.04"),
		L("ai.backend.runtime-type", "python"),
		L("ai.backend.runtime-path", "/usr/bin/python3"),
		L("ai.backend.resource.min.cpu", "1"),
		L("ai.backend.resource.min.mem", "1g"),
		L("ai.backend.resource.min.cuda.shares", "0.1"),
		L("ai.backend.service-ports", "ipython:pty:3000,jupyter:http:8081,tensorboard:http:6006,vscode:http:[8180,8181]"),
		L("maintainer", "someone"),
	};
	struct img_meta m;
	img_labels_parse(l, N(l), &m);
	CHECK(m.kernelspec);
	CHECK(!m.hidden);
	CHECK_STR(m.base_distro, "ubuntu22.04");
	CHECK_STR(m.runtime_type, "python");
	CHECK_STR(m.runtime_path, "/usr/bin/python3");
	CHECK(m.has_min);
	CHECK_INT(m.min_cpu_m, 1000);
	CHECK_INT(m.min_mem, 1LL << 30);
	CHECK_INT(m.min_fgpu_m, 100);
	CHECK_INT(m.n_ports, 4);
	CHECK_STR(m.ports[0].name, "ipython");
	CHECK_STR(m.ports[0].protocol, "pty");
	CHECK_INT(m.ports[0].ports[0], 3000);
	CHECK_STR(m.ports[3].name, "vscode");
	CHECK_INT(m.ports[3].n_ports, 2);
	CHECK_INT(m.ports[3].ports[1], 8181);
	CHECK_STR(m.warning, "");
	CHECK_STR(m.family, "");
	CHECK_STR(m.cuda, "");   /* Backend.AI's images carry no tessera.cuda */
	CHECK_STR(m.owner, "");
}

/* tessera.cuda is MAJOR.MINOR or nothing: what the launcher shows as
 * "CUDA 12.4" must be a version. A bad one is a warning and no CUDA mark;
 * the rest of the image (its minimum) is read as ever. */
TEST(cuda_label)
{
	static const char *const good[] = {"12.4", "11.8", "9.0", "12.10", "100.999"};
	for (size_t i = 0; i < N(good); i++) {
		struct img_label l[] = {L("tessera.cuda", good[i])};
		struct img_meta m;
		img_labels_parse(l, 1, &m);
		CHECK_STR(m.cuda, good[i]);
		CHECK_STR(m.warning, "");
	}
	static const char *const bad[] = {"", "12", "12.", ".4", "12.4.1", "v12.4", "012.4", "1234.1", "12.4 ",
					  " 12.4", "12.x", "12,4", "12.\x01", "12.1234", "cuda12.4"};
	for (size_t i = 0; i < N(bad); i++) {
		struct img_label l[] = {L("ai.backend.resource.min.cpu", "1"), L("tessera.cuda", bad[i])};
		struct img_meta m;
		img_labels_parse(l, N(l), &m);
		CHECK_STR(m.cuda, "");
		CHECK_CONTAINS(m.warning, "tessera.cuda");
		CHECK_CONTAINS(m.warning, "is not a CUDA version such as 12.4");
		CHECK(m.has_min);
		CHECK_INT(m.min_cpu_m, 1000);
	}
}

TEST(memory_units)
{
	static const struct { const char *v; long long bytes; } cases[] = {
		{"256m", 256LL << 20}, {"512M", 512LL << 20}, {"1g", 1LL << 30}, {"1.5g", 3LL << 29},
		{"1073741824", 1LL << 30}, {"64MiB", 64LL << 20},
	};
	for (size_t i = 0; i < N(cases); i++) {
		struct img_label l[] = {L("ai.backend.resource.min.mem", cases[i].v)};
		struct img_meta m;
		img_labels_parse(l, 1, &m);
		CHECK_INT(m.min_mem, cases[i].bytes);
		CHECK(m.has_min);
	}
}

TEST(tessera_labels)
{
	struct img_label l[] = {
		L("tessera.family", "python-ml"),
		L("tessera.title", "Python ML"),
		L("tessera.frameworks", "python=3.11.2, torch=1.13.1,scikit-learn=1.2.1,numpy=1.24.2,notebook=6.4.12"),
		L("tessera.recipe.hash", "ab12"),
		L("tessera.cuda", "12.4"),
		L("tessera.owner", "u-123"),
		L("tessera.source.session", "s-1"),
		L("tessera.source.image", "tessera/python:3.11"),
		L("tessera.committed", "2026-11-24T10:00:00Z"),
		L("ai.backend.features", "private,batch"),
	};
	struct img_meta m;
	img_labels_parse(l, N(l), &m);
	CHECK_STR(m.family, "python-ml");
	CHECK_STR(m.title, "Python ML");
	CHECK_INT(m.n_frameworks, 5);
	CHECK_STR(m.frameworks[1].name, "torch");
	CHECK_STR(m.frameworks[1].version, "1.13.1");
	CHECK_STR(m.frameworks[4].name, "notebook");
	CHECK_STR(m.cuda, "12.4");
	CHECK_STR(m.owner, "u-123");
	CHECK_STR(m.source_image, "tessera/python:3.11");
	CHECK(m.hidden);
	CHECK(!m.has_min);
	CHECK_STR(m.warning, "");
}

TEST(bad_labels)
{
	struct img_label l[] = {
		L("ai.backend.resource.min.cpu", "2"),
		L("ai.backend.resource.min.mem", "a lot"),
		L("ai.backend.service-ports", "jupyter:http:8081,ssh:tcp:22"),
		L("tessera.title", "bad\x01title"),
		L("tessera.frameworks", "=1,torch"),
		L(NULL, "x"),
		L("tessera.family", NULL),
	};
	struct img_meta m;
	img_labels_parse(l, N(l), &m);
	/* a minimum read in part is no minimum */
	CHECK(!m.has_min);
	CHECK_INT(m.min_cpu_m, 0);
	CHECK_CONTAINS(m.warning, "ai.backend.resource.min.mem 'a lot'");
	CHECK_CONTAINS(m.warning, "service port 22 is outside 1025-65535");
	CHECK_CONTAINS(m.warning, "tessera.title");
	CHECK_CONTAINS(m.warning, "tessera.frameworks");
	CHECK_INT(m.n_ports, 0);
	CHECK_STR(m.title, "");
	/* an unreadable owner keeps the image private, to nobody */
	struct img_label o[] = {L("tessera.owner", "")};
	img_labels_parse(o, 1, &m);
	CHECK_STR(m.owner, "?");
}

static void ports_bad(const char *v, const char *says, int line)
{
	struct img_service_port p[8];
	size_t n = 99;
	struct terr err = {0};
	int rc = img_service_ports_parse(v, p, 8, &n, &err);
	testlib_checks++;
	if (rc != -EINVAL || n != 0 || !strstr(err.msg, says))
		FAILF("line %d: '%s' gave %d (%zu ports) '%s', expected EINVAL saying '%s'", line, v, rc, n, err.msg, says);
}
#define PORTS_BAD(v, says) ports_bad((v), (says), __LINE__)

TEST(service_port_rules)
{
	struct img_service_port p[8];
	size_t n = 0;
	struct terr err = {0};
	CHECK_INT(img_service_ports_parse("jupyter:http:8081,mlflow-ui:preopen:5000", p, 8, &n, &err), 0);
	CHECK_INT(n, 2);
	CHECK_STR(p[1].name, "mlflow-ui");
	CHECK_STR(p[1].protocol, "preopen");
	CHECK_INT(img_service_ports_parse("", p, 8, &n, &err), 0);
	CHECK_INT(n, 0);
	PORTS_BAD("jupyter:http:80", "outside 1025-65535");
	PORTS_BAD("jupyter:http:1024", "outside");
	PORTS_BAD("jupyter:http:65536", "outside");
	PORTS_BAD("repl:tcp:2000", "reserved");
	/* 2200 is the sshd app's (the runner's sshd), no other app's. */
	PORTS_BAD("ssh:tcp:2200", "reserved");
	CHECK_INT(img_service_ports_parse("jupyter:http:8081,sshd:tcp:2200", p, 8, &n, &err), 0);
	CHECK_INT(n, 2);
	CHECK_STR(p[1].name, "sshd");
	CHECK_INT(p[1].ports[0], 2200);
	PORTS_BAD("ttyd:http:7681", "reserved");
	PORTS_BAD("a:http:8080,a:http:8081", "name 'a' is used twice");
	PORTS_BAD("a:http:8080,b:tcp:8080", "port 8080 is used twice");
	PORTS_BAD("a:http:[8080,8080]", "port 8080 is used twice");
	PORTS_BAD("a:udp:8080", "protocol 'udp'");
	PORTS_BAD("a:http", "name:protocol:port");
	PORTS_BAD("a:http:[8080,8081", "no ']'");
	PORTS_BAD("a:http:[8080]x", "text after");
	PORTS_BAD("a:http:80a0", "not a number");
	PORTS_BAD("a b:http:8080", "letters, digits");
	PORTS_BAD(":http:8080", "1 to");
	PORTS_BAD("a:http:[]", "not a number");
}

static void ref_is(const char *in, const char *registry, const char *path, const char *tag, const char *canon,
		   int line)
{
	struct img_ref r;
	struct terr err = {0};
	char buf[320];
	testlib_checks++;
	if (img_ref_parse(in, &r, &err) < 0) {
		FAILF("line %d: '%s' refused: %s", line, in, err.msg);
		return;
	}
	img_ref_format(&r, buf, sizeof(buf));
	if (strcmp(r.registry, registry) || strcmp(r.path, path) || strcmp(r.tag, tag) || strcmp(buf, canon))
		FAILF("line %d: '%s' gave registry '%s' path '%s' tag '%s' canonical '%s'", line, in, r.registry, r.path,
		      r.tag, buf);
}
#define REF_IS(in, reg, path, tag, canon) ref_is((in), (reg), (path), (tag), (canon), __LINE__)

TEST(references)
{
	REF_IS("busybox", "", "busybox", "", "busybox:latest");
	REF_IS("busybox:1.36", "", "busybox", "1.36", "busybox:1.36");
	REF_IS("docker.io/library/busybox:latest", "", "busybox", "latest", "busybox:latest");
	REF_IS("library/busybox", "", "busybox", "", "busybox:latest");
	REF_IS("tessera/python-ml:3.11-torch1.13", "", "tessera/python-ml", "3.11-torch1.13",
	       "tessera/python-ml:3.11-torch1.13");
	REF_IS("localhost:5000/tessera/python:3.11", "localhost:5000", "tessera/python", "3.11",
	       "localhost:5000/tessera/python:3.11");
	REF_IS("cr.backend.ai/stable/python:3.9-ubuntu20.04", "cr.backend.ai", "stable/python", "3.9-ubuntu20.04",
	       "cr.backend.ai/stable/python:3.9-ubuntu20.04");
	REF_IS("localhost/img", "localhost", "img", "", "localhost/img:latest");
	/* Docker Hub's name stays where the path would read as a registry */
	REF_IS("docker.io/a.b/c", "docker.io", "a.b/c", "", "docker.io/a.b/c:latest");
	REF_IS("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io", "nvidia/pytorch", "24.01-py3",
	       "nvcr.io/nvidia/pytorch:24.01-py3");
	const char *d = "busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	struct img_ref r;
	struct terr err = {0};
	char buf[320];
	CHECK_INT(img_ref_parse(d, &r, &err), 0);
	CHECK_STR(r.tag, "");
	CHECK_CONTAINS(r.digest, "sha256:0123");
	img_ref_format(&r, buf, sizeof(buf));
	CHECK_STR(buf, d);
	img_ref_name(&r, buf, sizeof(buf));
	CHECK_STR(buf, "busybox");
	CHECK_INT(img_ref_canonical("Busybox", buf, sizeof(buf), &err), -EINVAL);
	CHECK_INT(img_ref_canonical("reg:/x", buf, sizeof(buf), &err), -EINVAL);
	CHECK_INT(img_ref_canonical("reg:5000x/x", buf, sizeof(buf), &err), -EINVAL);
	CHECK_INT(img_ref_canonical("a//b", buf, sizeof(buf), &err), -EINVAL);
	CHECK_INT(img_ref_canonical("a:", buf, sizeof(buf), &err), -EINVAL);
	CHECK_INT(img_ref_canonical("", buf, sizeof(buf), &err), -EINVAL);
}

/* What the runner is given (and the manager lists) of a Backend.AI image's
 * ports: the apps, each with its first port; pty and internal entries are
 * not apps. Before, the whole label went to the runner, which refuses
 * what it does not serve, and the session could not start. */
TEST(runner_spec_keeps_the_apps)
{
	struct img_service_port p[8];
	size_t n = 0;
	struct terr err = {0};
	CHECK_INT(img_service_ports_parse("ipython:pty:3000,jupyter:http:8081,vscode:http:[8180,8181],"
					  "sftp:internal:9000,mlflow-ui:preopen:5000,db:tcp:5432", p, 8, &n, &err), 0);
	CHECK_INT(n, 6);
	CHECK(!img_service_port_is_app(&p[0]));
	CHECK(img_service_port_is_app(&p[1]));
	CHECK(!img_service_port_is_app(&p[3]));
	char *spec = NULL;
	CHECK_INT(img_service_ports_runner_spec(p, n, &spec, &err), 0);
	CHECK_STR(spec ? spec : "(null)", "jupyter:http:8081,vscode:http:8180,mlflow-ui:preopen:5000,db:tcp:5432");
	free(spec);
	CHECK_INT(img_service_ports_parse("ipython:pty:3000", p, 8, &n, &err), 0);
	spec = (char *)"not set";
	CHECK_INT(img_service_ports_runner_spec(p, n, &spec, &err), 0);
	CHECK(spec == NULL);
}

int main(void)
{
	RUN(backend_ai_labels);
	RUN(runner_spec_keeps_the_apps);
	RUN(memory_units);
	RUN(tessera_labels);
	RUN(cuda_label);
	RUN(bad_labels);
	RUN(service_port_rules);
	RUN(references);
	return testlib_done();
}
