/* Recipes (imagebuild/recipe.h): the format, its errors with their lines, the
 * defaults, the hash; the labels and mirrors of imagebuild/build.h. The
 * recipes of images/ are read too, so a broken one fails here first. */
#include <glob.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "imagebuild/build.h"
#include "images/labels.h"
#include "imagebuild/recipe.h"
#include "testlib.h"

#ifndef SOURCE_ROOT
#error SOURCE_ROOT must name the source tree
#endif

static const char minimal[] =
	"name = tessera/python\n"
	"tag = 3.11\n"
	"suite = bookworm\n"
	"packages = python3\n";

/* Parses text; returns the error message ("" when it parsed). */
static const char *parse_err(const char *text)
{
	static struct terr err;
	struct recipe r;
	memset(&err, 0, sizeof(err));
	if (recipe_parse(text, strlen(text), "t.recipe", &r, &err) == 0) {
		recipe_free(&r);
		return "";
	}
	return err.msg;
}

static void hash_of(const char *text, char out[RECIPE_HASH_HEX + 1])
{
	struct recipe r;
	struct terr err = {0};
	out[0] = '\0';
	if (recipe_parse(text, strlen(text), "t.recipe", &r, &err) < 0) {
		FAILF("parse failed: %s", err.msg);
		return;
	}
	strcpy(out, r.hash);
	recipe_free(&r);
}

TEST(minimal_recipe_and_defaults)
{
	struct recipe r;
	struct terr err = {0};
	CHECK_INT(recipe_parse(minimal, strlen(minimal), "t.recipe", &r, &err), 0);
	CHECK_STR(r.name, "tessera/python");
	CHECK_STR(r.tag, "3.11");
	CHECK_STR(r.suite, "bookworm");
	CHECK_STR(r.family, "python");     /* the name's last part */
	CHECK_STR(r.title, "python");
	CHECK_STR(r.distro, "debian12");   /* from the suite */
	CHECK_STR(r.cmd, "/bin/bash");
	CHECK_INT(r.n_packages, 1);
	CHECK_STR(r.packages[0], "python3");
	CHECK(r.runtime_type == NULL);
	CHECK(r.service_ports == NULL);
	CHECK_INT(strlen(r.hash), RECIPE_HASH_HEX);
	char ref[64];
	CHECK_INT(recipe_ref(&r, ref, sizeof(ref)), 0);
	CHECK_STR(ref, "tessera/python:3.11");
	CHECK_INT(recipe_ref(&r, ref, 8), -ENAMETOOLONG);
	recipe_free(&r);
}

TEST(every_key_and_continuations)
{
	static const char text[] =
		"# a comment\n"
		"name     = tessera/python-ml\n"
		"tag      = 3.13-torch2.6\n"
		"title    = Python ML\n"
		"family   = python-ml\n"
		"suite    = trixie\n"
		"\n"
		"packages =\n"
		"    python3 python3-torch\n"
		"    # a comment inside the list\n"
		"\tpython3-notebook  jupyter-notebook=6.4.13-5\n"
		"frameworks = python=python3\n"
		"    torch=python3-torch\n"
		"runtime-type = python\n"
		"runtime-path = /usr/bin/python3\n"
		"min.cpu = 1\n"
		"min.mem = 1g\n"
		"min.cuda.shares = 0.5\n"
		"service-ports = jupyter:http:8081,mlflow-ui:preopen:5000,vsc:http:[8180,8181]\n"
		"cmd = /bin/sh -l\n"
		"env.LANG = C.UTF-8\n"
		"env.PYTHONUNBUFFERED = 1\n"
		"label.ai.backend.features = uid-match\n"
		"run = ln -s /usr/bin/python3 /usr/local/bin/python\n"
		"run = echo one\n"
		"    echo two\n";
	struct recipe r;
	struct terr err = {0};
	CHECK_INT(recipe_parse(text, strlen(text), "t.recipe", &r, &err), 0);
	if (err.msg[0])
		FAILF("%s", err.msg);
	CHECK_STR(r.title, "Python ML");
	CHECK_STR(r.distro, "debian13");
	CHECK_INT(r.n_packages, 4);
	CHECK_STR(r.packages[2], "python3-notebook");
	CHECK_STR(r.packages[3], "jupyter-notebook=6.4.13-5");
	CHECK_INT(r.n_frameworks, 2);
	CHECK_STR(r.frameworks[1].key, "torch");
	CHECK_STR(r.frameworks[1].value, "python3-torch");
	CHECK_INT(r.frameworks[1].line, 13);
	CHECK_STR(r.min_cuda_shares, "0.5");
	CHECK_STR(r.cmd, "/bin/sh -l");
	CHECK_INT(r.n_env, 2);
	CHECK_STR(r.env[1].key, "PYTHONUNBUFFERED");
	CHECK_INT(r.n_labels, 1);
	CHECK_STR(r.labels[0].key, "ai.backend.features");
	CHECK_STR(r.labels[0].value, "uid-match");
	CHECK_INT(r.n_run, 2);
	CHECK_STR(r.run[1].value, "echo one\necho two");
	CHECK_INT(r.run[1].line, 25);
	recipe_free(&r);
}

/* Each bad recipe fails naming the file and the line that is wrong. */
TEST(errors_name_the_line)
{
	static const struct {
		const char *text;
		const char *msg;
	} cases[] = {
		{"name = a\ntag = 1\npakages = x\n", "t.recipe:3: unknown key 'pakages'"},
		{"name = a\nname = b\n", "t.recipe:2: name is set twice (first on line 1)"},
		{"name = Tessera/Python\n", "t.recipe:1: name 'Tessera/Python' is not a Docker repository name"},
		{"name = a//b\n", "t.recipe:1: name 'a//b'"},
		{"name = a/\n", "t.recipe:1: name 'a/'"},
		{"tag = -x\n", "t.recipe:1: tag '-x' is not a Docker tag"},
		{"tag = a:b\n", "t.recipe:1: tag 'a:b'"},
		{"\n\nsuite = buster\n", "t.recipe:3: unknown Debian suite 'buster' (known: bullseye, bookworm, trixie"},
		{"packages = python3\n    Python3\n", "t.recipe:2: 'Python3' is not a Debian package name"},
		{"packages =\n  a1\n# c\n\n  b1 a1\n", "t.recipe:5: package 'a1' is listed twice"},
		{"packages = a1 a1\n", "t.recipe:1: package 'a1' is listed twice"},
		{"packages = ab=\n", "t.recipe:1: 'ab=': a pinned version is PACKAGE=VERSION"},
		{"packages = ab=x1\n", "t.recipe:1: 'ab=x1': a pinned version"},
		{"  python3\n", "t.recipe:1: an indented line continues the value above it, but no key comes before it"},
		{"name\n", "t.recipe:1: expected 'key = value'"},
		{"= x\n", "t.recipe:1: expected 'key = value'"},
		{"name =\n", "t.recipe:1: name has no value"},
		{"name = a\n    b\n", "t.recipe:1: name takes one line"},
		{"# c\nmin.cpu = 0\n", "t.recipe:2: min.cpu '0' is not a positive number of cores"},
		{"min.mem = lots\n", "t.recipe:1: min.mem 'lots' is not a size"},
		{"min.cuda.shares = -1\n", "t.recipe:1: min.cuda.shares '-1'"},
		{"service-ports = jupyter:http\n", "t.recipe:1: service-ports entry 'jupyter:http': expected name:protocol:port"},
		{"service-ports = j:udp:1\n", "the protocol is one of http, tcp, preopen, pty"},
		{"service-ports = j:http:70000\n", "a port is a number from 1 to 65535"},
		{"service-ports = j:http:[]\n", "an empty port list"},
		{"service-ports = j:http:[1,x]\n", "a port is a number"},
		{"service-ports = a:http:1,\n", "service-ports entry ''"},
		{"runtime-path = python3\n", "t.recipe:1: runtime-path must be an absolute path"},
		{"frameworks = torch\n", "t.recipe:1: frameworks entry 'torch': expected NAME=PACKAGE"},
		{"frameworks = a=b1\n  a=c1\n", "t.recipe:2: framework 'a' is listed twice"},
		{"label.tessera.owner = x\n", "t.recipe:1: labels tessera.* are written by the builder"},
		{"label.ai.backend.service-ports = x\n", "set ai.backend.service-ports with 'service-ports'"},
		{"label.ai.backend.kernelspec = 2\n", "ai.backend.kernelspec is written by the builder"},
		{"label.a = 1\nlabel.a = 2\n", "t.recipe:2: label a is set twice (first on line 1)"},
		{"label.A = 1\n", "t.recipe:1: label key 'A'"},
		{"env.1X = 1\n", "t.recipe:1: environment variable name '1X'"},
		{"env.X = 1\nenv.X = 2\n", "t.recipe:2: env.X is set twice"},
		{"title = a\x01\n", "t.recipe:1: unexpected control character 0x01"},
		{"name = tessera/python\ntag = 1\nsuite = bookworm\n", "t.recipe: no 'packages'"},
		{"tag = 1\nsuite = bookworm\npackages = a1\n", "t.recipe: no 'name'"},
		{"", "t.recipe: no 'name'"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_CONTAINS(parse_err(cases[i].text), cases[i].msg);
	/* A NUL byte, which strlen-based helpers above cannot carry. */
	struct recipe r;
	struct terr err = {0};
	CHECK(recipe_parse("name = a\n\0x\n", 12, "t.recipe", &r, &err) < 0);
	CHECK_CONTAINS(err.msg, "t.recipe:2: unexpected NUL byte");
}

TEST(hash_follows_content_not_layout)
{
	char a[RECIPE_HASH_HEX + 1], b[RECIPE_HASH_HEX + 1];
	hash_of(minimal, a);
	/* Comments, blank lines, spacing and continuation lines are layout. */
	hash_of("# python\n\nname=tessera/python\ntag =   3.11\nsuite\t= bookworm\npackages =\n  python3\n", b);
	CHECK_STR(a, b);
	/* The order of env and labels does not change the image... */
	char c[RECIPE_HASH_HEX + 1], d[RECIPE_HASH_HEX + 1];
	char t1[512], t2[512];
	snprintf(t1, sizeof(t1), "%senv.A = 1\nenv.B = 2\nlabel.x = 1\nlabel.y = 2\n", minimal);
	snprintf(t2, sizeof(t2), "%slabel.y = 2\nenv.B = 2\nlabel.x = 1\nenv.A = 1\n", minimal);
	hash_of(t1, c);
	hash_of(t2, d);
	CHECK_STR(c, d);
	/* ...but any value does. */
	static const char *const changed[] = {
		"name = tessera/python\ntag = 3.11\nsuite = bookworm\npackages = python3 less\n",
		"name = tessera/python\ntag = 3.12\nsuite = bookworm\npackages = python3\n",
		"name = tessera/python\ntag = 3.11\nsuite = trixie\npackages = python3\n",
		"name = tessera/python\ntag = 3.11\nsuite = bookworm\npackages = python3\nrun = true\n",
		"name = tessera/python\ntag = 3.11\nsuite = bookworm\npackages = python3\nenv.A = 1\n",
		"name = tessera/python\ntag = 3.11\nsuite = bookworm\npackages = python3\nmin.mem = 1g\n",
		"name = tessera/python\ntag = 3.11\nsuite = bookworm\npackages = python3\ntitle = Py\n",
	};
	for (size_t i = 0; i < sizeof(changed) / sizeof(changed[0]); i++) {
		hash_of(changed[i], b);
		if (!strcmp(a, b))
			FAILF("hash unchanged by: %s", changed[i]);
	}
	/* Two run steps are not one step of two lines. */
	char e[RECIPE_HASH_HEX + 1], f[RECIPE_HASH_HEX + 1];
	snprintf(t1, sizeof(t1), "%srun = a\nrun = b\n", minimal);
	snprintf(t2, sizeof(t2), "%srun = a\n  b\n", minimal);
	hash_of(t1, e);
	hash_of(t2, f);
	CHECK(strcmp(e, f) != 0);
	/* Lower-case hex. */
	for (const char *h = a; *h; h++)
		CHECK(strchr("0123456789abcdef", *h) != NULL);
}

TEST(canonical_form)
{
	struct recipe r;
	struct terr err = {0};
	static const char text[] = "name = a/b\ntag = 1\nsuite = sid\npackages = p1 p2\nrun = x\n  y\\z\n";
	CHECK_INT(recipe_parse(text, strlen(text), "t", &r, &err), 0);
	char *c = recipe_canonical(&r);
	CHECK_CONTAINS(c, "name=a/b\ntag=1\n");
	/* The builder's format version leads: a change of the builder rebuilds. */
	char head[64];
	snprintf(head, sizeof(head), "tessera-recipe=%d\n", RECIPE_BUILD_VERSION);
	CHECK(strncmp(c, head, strlen(head)) == 0);
	CHECK_CONTAINS(c, "distro=debiansid\n");
	CHECK_CONTAINS(c, "package=p1\npackage=p2\n");
	CHECK_CONTAINS(c, "run=x\\ny\\\\z\n");
	free(c);
	recipe_free(&r);
}

TEST(upstream_versions)
{
	static const char *const cases[][2] = {
		{"3.11.2-1+b1", "3.11.2"},
		{"1.13.1+dfsg-4", "1.13.1"},
		{"2.6.0+dfsg-7", "2.6.0"},
		{"1:1.24.2-1+deb12u1", "1.24.2"},
		{"6.4.12-2.2", "6.4.12"},
		{"1:2.2.4+ds-1", "2.2.4"},
		{"3.10.1+dfsg1-4", "3.10.1"},
		{"1.0~rc1-2", "1.0"},
		{"2.0", "2.0"},
		{"", ""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[32];
		recipe_upstream_version(cases[i][0], buf, sizeof(buf));
		CHECK_STR(buf, cases[i][1]);
	}
	char small[4];
	recipe_upstream_version("12345-1", small, sizeof(small));
	CHECK_STR(small, "123");
	CHECK_STR(recipe_suite_version("bookworm"), "12");
	CHECK_STR(recipe_suite_version("trixie"), "13");
	CHECK(recipe_suite_version("buster") == NULL);
}

static const char *label(const struct recipe_pair *l, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(l[i].key, key))
			return l[i].value;
	return NULL;
}

/* The recipes of images/ parse, and carry the labels of the contract. */
TEST(shipped_recipes)
{
	static const struct {
		const char *path, *ref, *distro, *ports, *family, *cuda;
	} cases[] = {
		{"images/python/3.11.recipe", "tessera/python:3.11", "debian12", "jupyter:http:8081,sshd:tcp:2200", "python", NULL},
		{"images/python-ml/3.11-torch1.13.recipe", "tessera/python-ml:3.11-torch1.13", "debian12",
		 "jupyter:http:8081,sshd:tcp:2200", "python-ml", NULL},
		{"images/python-ml/3.13-torch2.6.recipe", "tessera/python-ml:3.13-torch2.6", "debian13",
		 "jupyter:http:8081,sshd:tcp:2200", "python-ml", NULL},
		{"images/python-ml/3.13-torch2.6-cuda12.4.recipe", "tessera/python-ml:3.13-torch2.6-cuda12.4", "debian13",
		 "jupyter:http:8081,sshd:tcp:2200", "python-ml", "12.4"},
		{"images/python-pytorch/3.13-torch2.6-cuda12.4.recipe", "tessera/python-pytorch:3.13-torch2.6-cuda12.4",
		 "debian13", "jupyter:http:8081,mlflow-ui:http:5000,sshd:tcp:2200", "python-pytorch", "12.4"},
		{"images/python-tensorflow/3.13-tf2.20.recipe", "tessera/python-tensorflow:3.13-tf2.20", "debian13",
		 "jupyter:http:8081,mlflow-ui:http:5000,sshd:tcp:2200", "python-tensorflow", "12.5"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char path[512], ref[256];
		snprintf(path, sizeof(path), "%s/%s", SOURCE_ROOT, cases[i].path);
		struct recipe r;
		struct terr err = {0};
		if (recipe_load(path, &r, &err) < 0) {
			FAILF("%s", err.msg);
			continue;
		}
		recipe_ref(&r, ref, sizeof(ref));
		CHECK_STR(ref, cases[i].ref);
		struct recipe_pair *l = NULL;
		size_t n = 0;
		CHECK_INT(img_recipe_labels(&r, "python=3.11.2,torch=1.13.1", &l, &n, &err), 0);
		CHECK_STR(label(l, n, "ai.backend.kernelspec"), "1");
		CHECK_STR(label(l, n, "ai.backend.base-distro"), cases[i].distro);
		CHECK_STR(label(l, n, "ai.backend.runtime-type"), "python");
		CHECK_STR(label(l, n, "ai.backend.runtime-path"), "/usr/bin/python3");
		CHECK_STR(label(l, n, "ai.backend.resource.min.cpu"), "1");
		CHECK(label(l, n, "ai.backend.resource.min.mem") != NULL);
		CHECK_STR(label(l, n, "ai.backend.resource.min.cuda.shares"), "0");
		CHECK_STR(label(l, n, "ai.backend.service-ports"), cases[i].ports);
		CHECK_STR(label(l, n, "tessera.family"), cases[i].family);
		CHECK_STR(label(l, n, "tessera.frameworks"), "python=3.11.2,torch=1.13.1");
		CHECK_STR(label(l, n, "tessera.recipe.hash"), r.hash);
		CHECK(label(l, n, "tessera.title") != NULL);
		/* A CUDA build says which CUDA (the launcher's mark); a CPU
		 * image has no such label. */
		if (cases[i].cuda)
			CHECK_STR(label(l, n, "tessera.cuda") ? label(l, n, "tessera.cuda") : "(none)", cases[i].cuda);
		else
			CHECK(label(l, n, "tessera.cuda") == NULL);
		for (size_t j = 0; j < n; j++) {
			free(l[j].key);
			free(l[j].value);
		}
		free(l);
		/* No frameworks yet: no such label. */
		CHECK_INT(img_recipe_labels(&r, "", &l, &n, &err), 0);
		CHECK(label(l, n, "tessera.frameworks") == NULL);
		for (size_t j = 0; j < n; j++) {
			free(l[j].key);
			free(l[j].value);
		}
		free(l);
		recipe_free(&r);
	}
	struct recipe r;
	struct terr err = {0};
	CHECK(recipe_load("/nonexistent/x.recipe", &r, &err) < 0);
	CHECK_CONTAINS(err.msg, "cannot read /nonexistent/x.recipe");
}

/* What the CUDA recipes ask of the builder: Debian's route takes contrib
 * and non-free, leaves the driver to the node, declines nvidia-cudnn's
 * download and names NVIDIA's archive; the index's route needs pip. */
TEST(cuda_recipes_needs)
{
	char path[512];
	struct recipe r;
	struct terr err = {0};
	snprintf(path, sizeof(path), "%s/images/python-ml/3.13-torch2.6-cuda12.4.recipe", SOURCE_ROOT);
	if (recipe_load(path, &r, &err) < 0) {
		FAILF("%s", err.msg);
		return;
	}
	CHECK_INT(r.n_components, 3);
	if (r.n_components == 3) {
		CHECK_STR(r.components[1], "contrib");
		CHECK_STR(r.components[2], "non-free");
	}
	const char *provided[] = {"libcuda1", "libcuda.so.1", "libnvidia-ml.so.1"};
	for (size_t k = 0; k < sizeof(provided) / sizeof(provided[0]); k++) {
		bool found = false;
		for (size_t i = 0; i < r.n_host_provides; i++)
			found |= !strcmp(r.host_provides[i].key, provided[k]);
		if (!found)
			FAILF("host-provides lacks %s", provided[k]);
		testlib_checks++;
	}
	CHECK_INT(r.n_debconf, 1);
	if (r.n_debconf == 1)
		CHECK_STR(r.debconf[0].value, "nvidia-cudnn nvidia-cudnn/question select I Decline");
	CHECK_INT(r.n_site_files, 1);
	if (r.n_site_files == 1)
		CHECK_STR(r.site_files[0].key, "cudnn-linux-x86_64-9.0.0.312_cuda12-archive.tar.xz");
	CHECK_INT(r.n_pip, 0);
	bool installs = false;
	for (size_t i = 0; i < r.n_run; i++)
		installs |= strstr(r.run[i].value, "update-nvidia-cudnn --update --tmpdir /tmp/tessera-site") != NULL;
	CHECK(installs);
	recipe_free(&r);

	static const char *const pip_recipes[] = {"images/python-pytorch/3.13-torch2.6-cuda12.4.recipe",
						  "images/python-tensorflow/3.13-tf2.20.recipe"};
	for (size_t k = 0; k < sizeof(pip_recipes) / sizeof(pip_recipes[0]); k++) {
		snprintf(path, sizeof(path), "%s/%s", SOURCE_ROOT, pip_recipes[k]);
		if (recipe_load(path, &r, &err) < 0) {
			FAILF("%s", err.msg);
			continue;
		}
		CHECK(r.n_pip > 0);
		bool has_pip = false;
		for (size_t i = 0; i < r.n_packages; i++)
			has_pip |= !strcmp(r.packages[i], "python3-pip");
		CHECK(has_pip);   /* the pip stage runs python3 -m pip */
		bool mlflow = false;
		for (size_t i = 0; i < r.n_pip; i++)
			mlflow |= !strncmp(r.pip[i], "mlflow", 6);
		CHECK(mlflow);
		recipe_free(&r);
	}
}

/* The first app r declares that the runner could not start: an http or
 * tcp app other than jupyter (the runner's built-in) whose service
 * definition no run step writes (docs/apps.md: without one it "cannot be
 * started"). A preopen app is the user's to start, so it is one too
 * unless a run step writes a definition for it: an image declares an app
 * only when the program is in it. NULL when every app is startable. */
static const char *unstartable_app(const struct recipe *r, char *buf, size_t n)
{
	struct img_service_port ports[IMG_MAX_SERVICE_PORTS];
	size_t np = 0;
	struct terr err = {0};
	if (!r->service_ports ||
	    img_service_ports_parse(r->service_ports, ports, IMG_MAX_SERVICE_PORTS, &np, &err) < 0)
		return NULL;
	for (size_t i = 0; i < np; i++) {
		if (!img_service_port_is_app(&ports[i]) || !strcmp(ports[i].name, "jupyter"))
			continue;
		/* sshd: the runner's built-in definition runs the image's
		 * /usr/sbin/sshd, which Debian's openssh-server brings. */
		bool has_sshd = false;
		for (size_t k = 0; k < r->n_packages; k++)
			has_sshd |= !strcmp(r->packages[k], "openssh-server");
		if (!strcmp(ports[i].name, "sshd") && has_sshd)
			continue;
		char def[2048];
		snprintf(def, sizeof(def), "/etc/backend.ai/service-defs/%.1900s.json", ports[i].name);
		bool written = false;
		for (size_t k = 0; k < r->n_run; k++)
			written |= strstr(r->run[k].value, def) && strstr(r->run[k].value, "\"command\"");
		if (!written) {
			snprintf(buf, n, "%.*s", (int)(n ? n - 1 : 0), ports[i].name);
			return buf;
		}
	}
	return NULL;
}

/* Apps an image does not have are not offered: every recipe under
 * images/ that declares an app other than jupyter (and sshd with
 * openssh-server) writes its service definition. */
TEST(shipped_apps_have_service_defs)
{
	char pattern[512], buf[64];
	snprintf(pattern, sizeof(pattern), "%s/images/*/*.recipe", SOURCE_ROOT);
	glob_t g;
	CHECK_INT(glob(pattern, 0, NULL, &g), 0);
	CHECK(g.gl_pathc >= 6);
	size_t with_apps = 0;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		struct recipe r;
		struct terr err = {0};
		if (recipe_load(g.gl_pathv[i], &r, &err) < 0) {
			FAILF("%s", err.msg);
			continue;
		}
		const char *app = unstartable_app(&r, buf, sizeof(buf));
		testlib_checks++;
		if (app)
			FAILF("%s declares the app %s but no run step writes /etc/backend.ai/service-defs/%s.json",
			      g.gl_pathv[i], app, app);
		with_apps += r.service_ports && strstr(r.service_ports, "mlflow-ui") != NULL;
		recipe_free(&r);
	}
	globfree(&g);
	CHECK(with_apps >= 2);   /* the check saw the MLflow images */

	/* The check itself: an app without its definition, a preopen one, a
	 * definition of another app; jupyter needs none. */
	static const char *const bad[] = {
		"service-ports = jupyter:http:8081,mlflow-ui:preopen:5000\n",
		"service-ports = jupyter:http:8081,mlflow-ui:http:5000\n",
		"service-ports = mlflow-ui:http:5000\nrun = mkdir -p /etc/backend.ai/service-defs\n"
		"    echo '{\"command\": [\"tb\"]}' >/etc/backend.ai/service-defs/tensorboard.json\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[512];
		snprintf(text, sizeof(text), "%s%s", minimal, bad[i]);
		struct recipe r;
		struct terr err = {0};
		if (recipe_parse(text, strlen(text), "t.recipe", &r, &err) < 0) {
			FAILF("%s", err.msg);
			continue;
		}
		const char *app = unstartable_app(&r, buf, sizeof(buf));
		CHECK_STR(app ? app : "(none)", "mlflow-ui");
		recipe_free(&r);
	}
	static const char good[] = "service-ports = jupyter:http:8081,mlflow-ui:http:5000\n"
				   "run = echo '{\"command\": [\"mlflow\", \"ui\"]}' >/etc/backend.ai/service-defs/mlflow-ui.json\n";
	char text[512];
	snprintf(text, sizeof(text), "%s%s", minimal, good);
	struct recipe r;
	struct terr err = {0};
	CHECK_INT(recipe_parse(text, strlen(text), "t.recipe", &r, &err), 0);
	CHECK(unstartable_app(&r, buf, sizeof(buf)) == NULL);
	recipe_free(&r);
}

TEST(labels_of_the_recipe)
{
	static const char text[] = "name = a/b\ntag = 1\nsuite = bookworm\npackages = p1\n"
				   "label.ai.backend.features = private uid-match\n";
	struct recipe r;
	struct terr err = {0};
	CHECK_INT(recipe_parse(text, strlen(text), "t", &r, &err), 0);
	struct recipe_pair *l = NULL;
	size_t n = 0;
	CHECK_INT(img_recipe_labels(&r, NULL, &l, &n, &err), 0);
	CHECK_STR(label(l, n, "ai.backend.features"), "private uid-match");
	CHECK_STR(label(l, n, "tessera.family"), "b");
	/* Keys the recipe leaves out are not labels at all. */
	CHECK(label(l, n, "ai.backend.service-ports") == NULL);
	CHECK(label(l, n, "ai.backend.resource.min.mem") == NULL);
	for (size_t j = 0; j < n; j++) {
		free(l[j].key);
		free(l[j].value);
	}
	free(l);
	recipe_free(&r);
}

TEST(mirrors_from_apt_sources)
{
	char m[256], s[256];
	static const char deb822[] =
		"Types: deb\n"
		"# http://snapshot.debian.org/archive/debian/20250520T000000Z\n"
		"URIs: http://deb.debian.org/debian/\n"
		"Suites: bookworm bookworm-updates\n"
		"Components: main\n"
		"Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
		"\n"
		"Types: deb\n"
		"URIs: http://deb.debian.org/debian-security\n"
		"Suites: bookworm-security\n"
		"Components: main\n";
	img_mirrors_from_sources(deb822, true, m, sizeof(m), s, sizeof(s));
	CHECK_STR(m, "http://deb.debian.org/debian");
	CHECK_STR(s, "http://deb.debian.org/debian-security");

	static const char disabled[] =
		"Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n"
		"Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n\n"
		"Types: deb\nURIs: http://nodistro.example/node\nSuites: nodistro\n\n"
		"Types: deb\nURIs: http://mirror.example/debian\nSuites: trixie";
	img_mirrors_from_sources(disabled, true, m, sizeof(m), s, sizeof(s));
	CHECK_STR(m, "http://mirror.example/debian");
	CHECK_STR(s, "");

	static const char oneline[] =
		"# deb http://commented.example/debian bookworm main\n"
		"deb-src http://src.example/debian bookworm main\n"
		"deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n"
		"deb [arch=amd64 signed-by=/k.gpg] http://ftp.example.org/debian bookworm main contrib\n"
		"deb http://security.example.org/debian-security bookworm-security main\n";
	img_mirrors_from_sources(oneline, false, m, sizeof(m), s, sizeof(s));
	CHECK_STR(m, "http://ftp.example.org/debian");
	CHECK_STR(s, "http://security.example.org/debian-security");

	img_mirrors_from_sources("", false, m, sizeof(m), s, sizeof(s));
	CHECK_STR(m, "");
	img_mirrors_from_sources("deb\ndeb [x\nTypes: deb\nURIs:\n", false, m, sizeof(m), s, sizeof(s));
	CHECK_STR(m, "");
}

/* The progress of the packages stage, from apt-get's own lines. */
TEST(apt_progress)
{
	struct img_progress plan = {0};
	char what[64] = "";
	static const char *const simulated[] = {
		"NOTE: This is only a simulation!",
		"Inst libssl3 (3.0.20-1~deb12u2 Debian:12.12/stable [amd64])",
		"Inst python3.11-minimal (3.11.2-6+deb12u8 Debian-Security:12/stable-security [amd64])",
		"Inst python3 (3.11.2-1+b1 Debian:12.12/stable [amd64])",
		"Conf libssl3 (3.0.20-1~deb12u2 Debian:12.12/stable [amd64])",
	};
	for (size_t i = 0; i < sizeof(simulated) / sizeof(simulated[0]); i++)
		img_apt_progress(&plan, simulated[i], what, sizeof(what));
	CHECK_INT(plan.total, 3);

	struct img_progress p = {.stage = IMG_STAGE_PACKAGES, .total = plan.total};
	CHECK(!img_apt_progress(&p, "0 upgraded, 3 newly installed, 0 to remove and 0 not upgraded.", what, sizeof(what)));
	CHECK(!img_apt_progress(&p, "Need to get 6,107 kB/8.2 MB of archives.", what, sizeof(what)));
	CHECK_INT(p.to_fetch, 6107);
	CHECK(img_apt_progress(&p, "Get:1 http://deb.debian.org/debian bookworm/main amd64 libssl3 amd64 3.0.20-1~deb12u2 [2,029 kB]",
			       what, sizeof(what)));
	CHECK_INT(p.fetched, 2029);
	CHECK_STR(what, "libssl3");
	CHECK(img_apt_progress(&p, "Get:2 http://deb.debian.org/debian bookworm/main amd64 python3 amd64 3.11.2-1+b1 [26.3 MB]",
			       what, sizeof(what)));
	CHECK_INT(p.fetched, 6107);   /* never past what apt said it needs */
	CHECK(img_apt_progress(&p, "Unpacking python3.11-minimal (3.11.2-6+deb12u8) ...", what, sizeof(what)));
	CHECK_STR(what, "python3.11-minimal");
	CHECK_INT(p.done, 0);
	CHECK(img_apt_progress(&p, "Setting up libssl3:amd64 (3.0.20-1~deb12u2) ...", what, sizeof(what)));
	CHECK_STR(what, "libssl3");
	CHECK(img_apt_progress(&p, "Setting up python3.11-minimal (3.11.2-6+deb12u8) ...", what, sizeof(what)));
	CHECK(img_apt_progress(&p, "Setting up python3 (3.11.2-1+b1) ...", what, sizeof(what)));
	CHECK_INT(p.done, 3);
	/* A package set up beyond the plan (a trigger's) does not overrun it. */
	CHECK(img_apt_progress(&p, "Setting up extra (1) ...", what, sizeof(what)));
	CHECK_INT(p.done, 3);
	CHECK(!img_apt_progress(&p, "Processing triggers for libc-bin (2.36-9+deb12u10) ...", what, sizeof(what)));
	CHECK(!img_apt_progress(&p, "Get:3 without a size", what, sizeof(what)));

	struct img_progress q = {0};
	img_apt_progress(&q, "Need to get 0 B/512 MB of archives.", what, sizeof(what));
	CHECK_INT(q.to_fetch, 0);
	img_apt_progress(&q, "Need to get 1.5 GB of archives.", what, sizeof(what));
	CHECK_INT(q.to_fetch, 1500000);
}

TEST(stage_names)
{
	CHECK_STR(img_stage_name(IMG_STAGE_BOOTSTRAP), "bootstrap");
	CHECK_STR(img_stage_name(IMG_STAGE_PACKAGES), "packages");
	CHECK_STR(img_stage_name(IMG_STAGE_IMPORT), "import");
	CHECK_STR(img_stage_name(IMG_STAGE_COUNT), "?");
}

/* The keys of CUDA and pip images (docs/images.md, "Recipes"). */
TEST(cuda_and_pip_keys)
{
	static const char text[] =
		"name = tessera/python-cuda\n"
		"tag = 3.13-torch2.6\n"
		"suite = trixie\n"
		"packages = python3 python3-pip\n"
		"components = non-free main\n"
		"    contrib\n"
		"debconf = nvidia-cudnn nvidia-cudnn/question select I Decline\n"
		"debconf = nvidia-cudnn  nvidia-cudnn/license-preseed\tboolean true\n"
		"debconf = tzdata tzdata/Areas select Etc\n"
		"host-provides = libcuda1=550 libcuda.so.1=550.54.14-1\n"
		"site-file = cudnn-linux-x86_64-9.0.0.312_cuda12-archive.tar.xz "
		"sha256=ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789\n"
		"site-file = extra_1.0+x.tar.gz\n"
		"pip = tensorflow==2.20.* mlflow\n"
		"    torch[opt,cuda]>=2.6,<2.7 Jinja2~=3.1 a===1.0 b!=2.0.post1\n"
		"cuda = 12.4\n";
	struct recipe r;
	struct terr err = {0};
	CHECK_INT(recipe_parse(text, strlen(text), "t.recipe", &r, &err), 0);
	if (err.msg[0])
		FAILF("%s", err.msg);
	/* In Debian's order, whatever the recipe's. */
	CHECK_INT(r.n_components, 3);
	CHECK_STR(r.components[0], "main");
	CHECK_STR(r.components[1], "contrib");
	CHECK_STR(r.components[2], "non-free");
	CHECK_INT(r.n_debconf, 3);
	CHECK_STR(r.debconf[0].value, "nvidia-cudnn nvidia-cudnn/question select I Decline");
	CHECK_STR(r.debconf[1].value, "nvidia-cudnn nvidia-cudnn/license-preseed boolean true");
	CHECK_STR(r.debconf[1].key, "nvidia-cudnn nvidia-cudnn/license-preseed");
	CHECK_INT(r.debconf[2].line, 9);
	CHECK_INT(r.n_host_provides, 2);
	CHECK_STR(r.host_provides[0].key, "libcuda1");
	CHECK_STR(r.host_provides[0].value, "550");
	CHECK_STR(r.host_provides[1].key, "libcuda.so.1");
	CHECK_STR(r.host_provides[1].value, "550.54.14-1");
	CHECK_INT(r.n_site_files, 2);
	CHECK_STR(r.site_files[0].key, "cudnn-linux-x86_64-9.0.0.312_cuda12-archive.tar.xz");
	CHECK_STR(r.site_files[0].value, "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
	CHECK_STR(r.site_files[1].key, "extra_1.0+x.tar.gz");
	CHECK(r.site_files[1].value == NULL);
	CHECK_INT(r.n_pip, 6);
	CHECK_STR(r.pip[0], "tensorflow==2.20.*");
	CHECK_STR(r.pip[1], "mlflow");
	CHECK_STR(r.pip[2], "torch[opt,cuda]>=2.6,<2.7");
	CHECK_STR(r.cuda, "12.4");
	struct recipe_pair *l = NULL;
	size_t n = 0;
	CHECK_INT(img_recipe_labels(&r, NULL, &l, &n, &err), 0);
	CHECK_STR(label(l, n, "tessera.cuda"), "12.4");
	for (size_t j = 0; j < n; j++) {
		free(l[j].key);
		free(l[j].value);
	}
	free(l);
	recipe_free(&r);

	/* Without them: main only, no CUDA label. */
	CHECK_INT(recipe_parse(minimal, strlen(minimal), "t.recipe", &r, &err), 0);
	CHECK_INT(r.n_components, 1);
	CHECK_STR(r.components[0], "main");
	CHECK(r.cuda == NULL && r.n_pip == 0 && r.n_site_files == 0 && r.n_debconf == 0 && r.n_host_provides == 0);
	CHECK_INT(img_recipe_labels(&r, NULL, &l, &n, &err), 0);
	CHECK(label(l, n, "tessera.cuda") == NULL);
	for (size_t j = 0; j < n; j++) {
		free(l[j].key);
		free(l[j].value);
	}
	free(l);
	recipe_free(&r);
}

TEST(cuda_and_pip_errors)
{
	static const struct {
		const char *text;
		const char *msg;
	} cases[] = {
		{"components = main universe\n", "t.recipe:1: unknown archive component 'universe' (known: main, contrib, non-free, non-free-firmware)"},
		{"components = main\n  contrib main\n", "t.recipe:2: component 'main' is listed twice"},
		{"components = contrib non-free\n", "t.recipe:1: components must include main"},
		{"components = main\ncomponents = main\n", "t.recipe:2: components is set twice (first on line 1)"},
		{"debconf = a1 a1/q select\n", "t.recipe:1: debconf select a1/q has no value"},
		{"debconf = a1 a1/q\n", "t.recipe:1: debconf 'a1 a1/q': expected OWNER QUESTION TYPE VALUE"},
		{"debconf = a1 question select x\n", "t.recipe:1: debconf question 'question' is not a debconf question name"},
		{"debconf = A1 a1/q select x\n", "t.recipe:1: debconf owner 'A1' is not a Debian package name"},
		{"debconf = a1 a1/q choice x\n", "t.recipe:1: debconf type 'choice' is not one of select"},
		{"debconf = a1 a1/q boolean yes\n", "t.recipe:1: debconf boolean a1/q: the value is true or false"},
		{"debconf = a1 a1/q string x\n  y\n", "t.recipe:1: debconf takes one line"},
		{"# c\ndebconf = a1 a1/q string x\ndebconf = a1 a1/q string y\n",
		 "t.recipe:3: debconf a1 a1/q is set twice (first on line 2)"},
		{"host-provides = libcuda1\n", "t.recipe:1: host-provides entry 'libcuda1': expected NAME=VERSION"},
		{"host-provides = libcuda1=\n", "t.recipe:1: host-provides entry 'libcuda1=': expected NAME=VERSION"},
		{"host-provides = LibCuda=1\n", "t.recipe:1: host-provides entry 'LibCuda=1'"},
		{"host-provides = libcuda1=x5\n", "t.recipe:1: host-provides entry 'libcuda1=x5': 'x5' is not a Debian version"},
		{"host-provides = a1=1\n  a1=2\n", "t.recipe:2: host-provides: 'a1' is listed twice"},
		{"host-provides = tessera-host-driver=1\n", "t.recipe:1: host-provides: tessera-host-driver is the package"},
		{"site-file = ../etc/passwd\n", "t.recipe:1: site-file '../etc/passwd' is not a file name"},
		{"site-file = a/b.tar\n", "t.recipe:1: site-file 'a/b.tar' is not a file name"},
		{"site-file = .hidden\n", "t.recipe:1: site-file '.hidden'"},
		{"site-file = a.tar md5=00\n", "t.recipe:1: site-file a.tar: after the name comes sha256=HEX"},
		{"site-file = a.tar sha256=abc\n", "t.recipe:1: site-file a.tar: after the name comes sha256=HEX"},
		{"site-file = a.tar sha256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg\n",
		 "t.recipe:1: site-file a.tar: after the name"},
		{"site-file = a.tar sha256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef x\n",
		 "t.recipe:1: site-file a.tar: after the name"},
		{"\nsite-file = a.tar\nsite-file = a.tar\n", "t.recipe:3: site file a.tar is listed twice (first on line 2)"},
		{"pip = mlflow\n  --index-url=http://x\n", "t.recipe:2: pip requirement '--index-url=http://x' is not NAME[EXTRAS][VERSIONS]"},
		{"pip = torch@https://x/torch.whl\n", "t.recipe:1: pip requirement 'torch@https://x/torch.whl'"},
		{"pip = a==\n", "t.recipe:1: pip requirement 'a=='"},
		{"pip = a==1,\n", "t.recipe:1: pip requirement 'a==1,'"},
		{"pip = a[]\n", "t.recipe:1: pip requirement 'a[]'"},
		{"pip = a;python_version<'3.12'\n", "t.recipe:1: pip requirement"},
		{"pip = ./dist/a.whl\n", "t.recipe:1: pip requirement './dist/a.whl'"},
		{"pip = a- \n", "t.recipe:1: pip requirement 'a-'"},
		{"pip = Foo_Bar==1 foo.bar\n", "t.recipe:1: pip: 'foo.bar' is listed twice"},
		{"cuda = 12\n", "t.recipe:1: cuda '12' is not a CUDA version MAJOR.MINOR (e.g. 12.4)"},
		{"cuda = 12.4.1\n", "t.recipe:1: cuda '12.4.1' is not a CUDA version"},
		{"cuda = v12.4\n", "t.recipe:1: cuda 'v12.4'"},
		{"cuda = 12.x\n", "t.recipe:1: cuda '12.x'"},
		{"cuda = 12.4\ncuda = 12.6\n", "t.recipe:2: cuda is set twice (first on line 1)"},
		{"label.tessera.cuda = 12.4\n", "t.recipe:1: labels tessera.* are written by the builder"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_CONTAINS(parse_err(cases[i].text), cases[i].msg);
}

TEST(pip_names)
{
	char buf[64];
	recipe_pip_name("Foo_Bar[x]>=1", buf, sizeof(buf));
	CHECK_STR(buf, "foo-bar");
	recipe_pip_name("tensorflow==2.20.*", buf, sizeof(buf));
	CHECK_STR(buf, "tensorflow");
	recipe_pip_name("a..b__c", buf, sizeof(buf));
	CHECK_STR(buf, "a-b-c");
	recipe_pip_name("--index-url", buf, sizeof(buf));
	CHECK_STR(buf, "");
	recipe_pip_name("mlflow", buf, 4);
	CHECK_STR(buf, "mlf");
}

TEST(pip_trusted_host)
{
	char h[64];
	CHECK(img_pip_trusted_host("http://127.0.0.1:8080/simple", h, sizeof(h)));
	CHECK_STR(h, "127.0.0.1:8080");
	CHECK(img_pip_trusted_host("http://u:p@pypi.example.org/simple/", h, sizeof(h)));
	CHECK_STR(h, "pypi.example.org");
	CHECK(!img_pip_trusted_host("https://pypi.example.org/simple", h, sizeof(h)));
	CHECK_STR(h, "");
	CHECK(!img_pip_trusted_host("http:///simple", h, sizeof(h)));
	CHECK(!img_pip_trusted_host("http://a-very-long-host-name.example.org/simple", h, 8));
}

/* What a recipe needs before it can be built: a pip index, its site files
 * in the cache (with their sha256). */
TEST(recipe_needs)
{
	char dir[] = "/tmp/test-recipe-needs.XXXXXX";
	if (!mkdtemp(dir)) {
		FAILF("mkdtemp failed");
		return;
	}
	/* sha256 of "x\n" */
	static const char x_sha[] = "73cb3858a687a8494ca3323053016282f3dad39d42cf62ca4e79dda2aac7d9ac";
	char text[1024];
	snprintf(text, sizeof(text),
		 "name = a/b\ntag = 1\nsuite = bookworm\npackages = python3\n"
		 "pip = tensorflow==2.20.* mlflow\n"
		 "site-file = plain.tar\n"
		 "site-file = checked.tar sha256=%s\n", x_sha);
	struct recipe r;
	struct terr err = {0};
	CHECK_INT(recipe_parse(text, strlen(text), "t", &r, &err), 0);
	struct img_build_opts o = {.cache_dir = dir, .config_path = "/etc/x/images.conf"};
	char needs[2048];
	CHECK_INT(img_recipe_needs(&r, &o, needs, sizeof(needs)), 3);
	CHECK_STR(needs,
		  "needs a pip index for tensorflow==2.20.* mlflow: --pip-index URL or pip_index in /etc/x/images.conf\n"
		  "needs site file plain.tar: tessera image build --site-file PATH\n"
		  "needs site file checked.tar: tessera image build --site-file PATH");
	o.pip_index = "http://127.0.0.1:1/simple";
	/* Kept through img_site_file_add: its sha256, and a wrong one refused. */
	char src[256], dest[512], hex[RECIPE_HASH_HEX + 1];
	snprintf(src, sizeof(src), "%s/plain.tar", dir);
	FILE *f = fopen(src, "w");
	fputs("x\n", f);
	fclose(f);
	CHECK_INT(img_site_file_add(&o, src, NULL, dest, sizeof(dest), hex, &err), 0);
	CHECK_STR(hex, "73cb3858a687a8494ca3323053016282f3dad39d42cf62ca4e79dda2aac7d9ac");
	char want_dest[512];
	snprintf(want_dest, sizeof(want_dest), "%s/site/plain.tar", dir);
	CHECK_STR(dest, want_dest);
	snprintf(src, sizeof(src), "%s/checked.tar", dir);
	f = fopen(src, "w");
	fputs("not x\n", f);
	fclose(f);
	CHECK(img_site_file_add(&o, src, x_sha, dest, sizeof(dest), hex, &err) < 0);
	CHECK_CONTAINS(err.msg, "not the 73cb3858");
	CHECK_INT(img_recipe_needs(&r, &o, needs, sizeof(needs)), 1);
	CHECK_STR(needs, "needs site file checked.tar: tessera image build --site-file PATH");
	/* A kept file without the recipe's sha256 is not it. */
	char kept[512];
	snprintf(kept, sizeof(kept), "%s/site/checked.tar", dir);
	rename(src, kept);
	CHECK_INT(img_recipe_needs(&r, &o, needs, sizeof(needs)), 1);
	CHECK_CONTAINS(needs, "needs site file checked.tar: the one in ");
	CHECK_CONTAINS(needs, ", not 73cb3858");
	f = fopen(kept, "w");
	fputs("x\n", f);
	fclose(f);
	CHECK_INT(img_recipe_needs(&r, &o, needs, sizeof(needs)), 0);
	CHECK_STR(needs, "");
	/* A name no recipe can have is not kept. */
	snprintf(src, sizeof(src), "%s/.hidden", dir);
	f = fopen(src, "w");
	fclose(f);
	CHECK(img_site_file_add(&o, src, NULL, dest, sizeof(dest), hex, &err) < 0);
	CHECK_CONTAINS(err.msg, "a recipe cannot name '.hidden'");
	recipe_free(&r);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_INT(system(cmd), 0);
}

/* Each new key enters the hash; recipes without them keep theirs. */
TEST(cuda_and_pip_keys_hash)
{
	char a[RECIPE_HASH_HEX + 1], b[RECIPE_HASH_HEX + 1], t[512];
	hash_of(minimal, a);
	/* The default, written out, is the default. */
	snprintf(t, sizeof(t), "%scomponents = main\n", minimal);
	hash_of(t, b);
	CHECK_STR(a, b);
	/* A recipe without the new keys hashes as it did before them: the
	 * canonical form has none of their items. */
	struct recipe r;
	struct terr err = {0};
	CHECK_INT(recipe_parse(minimal, strlen(minimal), "t", &r, &err), 0);
	char *c = recipe_canonical(&r);
	CHECK(c && !strstr(c, "component") && !strstr(c, "pip") && !strstr(c, "cuda"));
	free(c);
	recipe_free(&r);
	static const char *const added[] = {
		"components = main contrib\n",
		"components = main non-free\n",
		"debconf = a1 a1/q select x\n",
		"debconf = a1 a1/q select y\n",
		"host-provides = libcuda1=550\n",
		"host-provides = libcuda1=535\n",
		"site-file = a.tar\n",
		"site-file = b.tar\n",
		"site-file = a.tar sha256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
		"pip = mlflow\n",
		"pip = mlflow==2.0\n",
		"cuda = 12.4\n",
		"cuda = 12.6\n",
	};
	char seen[sizeof(added) / sizeof(added[0])][RECIPE_HASH_HEX + 1];
	for (size_t i = 0; i < sizeof(added) / sizeof(added[0]); i++) {
		snprintf(t, sizeof(t), "%s%s", minimal, added[i]);
		hash_of(t, seen[i]);
		if (!strcmp(a, seen[i]))
			FAILF("hash unchanged by: %s", added[i]);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(seen[j], seen[i]))
				FAILF("same hash for '%s' and '%s'", added[j], added[i]);
	}
	/* Spacing inside a debconf line and the order of components are layout. */
	snprintf(t, sizeof(t), "%sdebconf = a1   a1/q\tselect x y\ncomponents = contrib main\n", minimal);
	hash_of(t, a);
	snprintf(t, sizeof(t), "%scomponents = main contrib\ndebconf = a1 a1/q select x y\n", minimal);
	hash_of(t, b);
	CHECK_STR(a, b);
}

int main(void)
{
	RUN(minimal_recipe_and_defaults);
	RUN(every_key_and_continuations);
	RUN(errors_name_the_line);
	RUN(hash_follows_content_not_layout);
	RUN(canonical_form);
	RUN(upstream_versions);
	RUN(shipped_recipes);
	RUN(cuda_recipes_needs);
	RUN(shipped_apps_have_service_defs);
	RUN(labels_of_the_recipe);
	RUN(mirrors_from_apt_sources);
	RUN(apt_progress);
	RUN(stage_names);
	RUN(cuda_and_pip_keys);
	RUN(cuda_and_pip_errors);
	RUN(cuda_and_pip_keys_hash);
	RUN(pip_names);
	RUN(pip_trusted_host);
	RUN(recipe_needs);
	return testlib_done();
}
