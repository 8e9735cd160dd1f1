/* The runner's app definitions: the service-ports spec, Backend.AI
 * service definitions, {ports[0]}, the built-in jupyter. */
#include <stdlib.h>

#include "runner/appdef.h"
#include "testlib.h"

static int spec(const char *s, struct app_decl *d, size_t *n, struct terr *err)
{
	return appdef_parse_spec(s, d, APP_MAX, n, err);
}

TEST(spec_parses_entries)
{
	struct app_decl d[APP_MAX];
	size_t n = 99;
	struct terr err = {0};
	CHECK_INT(spec("jupyter:http:8081, mlflow-ui:preopen:5000 ,tb:tcp:6006", d, &n, &err), 0);
	CHECK_INT(n, 3);
	CHECK_STR(d[0].name, "jupyter");
	CHECK_INT(d[0].proto, APP_HTTP);
	CHECK_INT(d[0].port, 8081);
	CHECK_STR(d[1].name, "mlflow-ui");
	CHECK_INT(d[1].proto, APP_PREOPEN);
	CHECK_INT(d[1].port, 5000);
	CHECK_STR(d[2].name, "tb");
	CHECK_INT(d[2].proto, APP_TCP);
	CHECK_STR(appdef_proto_name(d[2].proto), "tcp");
	CHECK_INT(spec("", d, &n, &err), 0);
	CHECK_INT(n, 0);
	CHECK_INT(spec("  ", d, &n, &err), 0);
	CHECK_INT(n, 0);
	CHECK_INT(spec("a.b_c-1:http:1,z:http:65535", d, &n, &err), 0);
	CHECK_INT(n, 2);
}

TEST(spec_refuses_bad_entries)
{
	struct app_decl d[APP_MAX];
	size_t n;
	struct terr err = {0};
	static const struct { const char *spec, *msg; } bad[] = {
		{"jupyter", "is not name:protocol:port"},
		{"jupyter:http", "is not name:protocol:port"},
		{"jupyter:udp:8081", "the protocol must be http, tcp or preopen"},
		{"jupyter:HTTP:8081", "the protocol must be"},
		{"jupyter:http:0", "from 1 to 65535"},
		{"jupyter:http:65536", "from 1 to 65535"},
		{"jupyter:http:99999999999999999999", "from 1 to 65535"},
		{"jupyter:http:80a", "from 1 to 65535"},
		{"jupyter:http:", "from 1 to 65535"},
		{"jupyter:http:-1", "from 1 to 65535"},
		{"x:http:7611", "port 7611 is the runner's own"},
		{"terminal:http:8000", "terminal is the runner's own app"},
		{":http:8000", "the name must be"},
		{"-x:http:8000", "the name must be"},
		{"a b:http:8000", "the name must be"},
		{"a/b:http:8000", "the name must be"},
		{"a:http:1,a:tcp:2", "app a is declared twice"},
		{"a:http:1,b:tcp:1", "apps a and b both use port 1"},
		{"a:http:1,,b:http:2", "an empty entry"},
		{"a:http:1,", "an empty entry"},
		{"a:http:1:2", "from 1 to 65535"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err.msg[0] = '\0';
		int rc = spec(bad[i].spec, d, &n, &err);
		if (rc != -EINVAL)
			FAILF("\"%s\" was taken (rc %d)", bad[i].spec, rc);
		CHECK_CONTAINS(err.msg, bad[i].msg);
	}
	char name[100];
	memset(name, 'a', 64);
	strcpy(name + 64, ":http:1");
	CHECK_INT(spec(name, d, &n, &err), -EINVAL);
	/* More than max. */
	CHECK_INT(appdef_parse_spec("a:http:1,b:http:2,c:http:3", d, 2, &n, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "more than 2 apps");
}

TEST(subst_replaces_ports)
{
	char *out = NULL;
	struct terr err = {0};
	CHECK_INT(appdef_subst("--port={ports[0]}", 8081, &out, &err), 0);
	CHECK_STR(out, "--port=8081");
	free(out);
	CHECK_INT(appdef_subst("{ports[0]}{ports[0]}x", 5, &out, &err), 0);
	CHECK_STR(out, "55x");
	free(out);
	CHECK_INT(appdef_subst("plain", 5, &out, &err), 0);
	CHECK_STR(out, "plain");
	free(out);
	CHECK_INT(appdef_subst("", 5, &out, &err), 0);
	CHECK_STR(out, "");
	free(out);
	CHECK_INT(appdef_subst("{runtime_path} -m x", 5, &out, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "the placeholder {runtime_path} is not supported");
	CHECK_INT(appdef_subst("{ports[1]}", 5, &out, &err), -EINVAL);
	CHECK_INT(appdef_subst("a{", 5, &out, &err), -EINVAL);
}

TEST(service_parses_backendai_format)
{
	static const char json[] =
		"{\"prestart\": ["
		"  {\"action\": \"write_file\", \"args\": {\"filename\": \"/tmp/cfg-{ports[0]}\","
		"    \"body\": [\"port = {ports[0]}\\n\", \"x = 1\\n\"], \"mode\": \"0755\", \"append\": true}},"
		"  {\"action\": \"run_command\", \"args\": {\"command\": [\"mkdir\", \"-p\", \"d{ports[0]}\"]}},"
		"  {\"action\": \"write_file\", \"filename\": \"flat\", \"body\": \"b\", \"mode\": 384}"
		"],"
		" \"command\": [\"python3\", \"-m\", \"x\", \"--port\", \"{ports[0]}\"],"
		" \"env\": {\"A\": \"a-{ports[0]}\", \"B\": \"\"},"
		" \"url_template\": \"ignored\"}";
	struct app_service s;
	struct terr err = {0};
	CHECK_INT(appdef_parse_service(json, sizeof(json) - 1, 6006, &s, &err), 0);
	if (err.msg[0])
		FAILF("%s", err.msg);
	CHECK_STR(s.argv[0], "python3");
	CHECK_STR(s.argv[4], "6006");
	CHECK(s.argv[5] == NULL);
	CHECK_STR(s.env[0], "A=a-6006");
	CHECK_STR(s.env[1], "B=");
	CHECK(s.env[2] == NULL);
	CHECK_INT(s.n_prestart, 3);
	CHECK_INT(s.prestart[0].kind, APP_ACT_WRITE_FILE);
	CHECK_STR(s.prestart[0].filename, "/tmp/cfg-6006");
	CHECK_STR(s.prestart[0].body, "port = 6006\nx = 1\n");
	CHECK_INT(s.prestart[0].mode, 0755);
	CHECK(s.prestart[0].append);
	CHECK_INT(s.prestart[1].kind, APP_ACT_RUN);
	CHECK_STR(s.prestart[1].argv[2], "d6006");
	CHECK(s.prestart[1].argv[3] == NULL);
	CHECK_STR(s.prestart[2].filename, "flat");
	CHECK_STR(s.prestart[2].body, "b");
	CHECK_INT(s.prestart[2].mode, 0600);
	CHECK(!s.prestart[2].append);
	appdef_service_free(&s);

	static const char minimal[] = "{\"command\": [\"srv\"]}";
	CHECK_INT(appdef_parse_service(minimal, sizeof(minimal) - 1, 1, &s, &err), 0);
	CHECK_STR(s.argv[0], "srv");
	CHECK(s.env && s.env[0] == NULL);
	CHECK_INT(s.n_prestart, 0);
	appdef_service_free(&s);
}

TEST(service_refuses_bad_definitions)
{
	static const struct { const char *json, *msg; } bad[] = {
		{"", "not valid JSON"},
		{"{", "not valid JSON"},
		{"[]", "not a JSON object"},
		{"{}", "command must be a non-empty array of strings"},
		{"{\"command\": []}", "command must be a non-empty array"},
		{"{\"command\": \"srv\"}", "command must be a non-empty array"},
		{"{\"command\": [\"a\", 1]}", "command[1] is not a string"},
		{"{\"command\": [\"{runtime_path}\"]}", "{runtime_path} is not supported"},
		{"{\"command\": [\"a\"], \"env\": []}", "env must be an object"},
		{"{\"command\": [\"a\"], \"env\": {\"A\": 1}}", "env.A is not a string"},
		{"{\"command\": [\"a\"], \"env\": {\"A=B\": \"x\"}}", "bad name"},
		{"{\"command\": [\"a\"], \"prestart\": {}}", "prestart must be an array"},
		{"{\"command\": [\"a\"], \"prestart\": [1]}", "prestart[0] is not an object"},
		{"{\"command\": [\"a\"], \"prestart\": [{}]}", "prestart[0] has no \"action\""},
		{"{\"command\": [\"a\"], \"prestart\": [{\"action\": \"write_tempfile\"}]}",
		 "the action \"write_tempfile\" is not supported"},
		{"{\"command\": [\"a\"], \"prestart\": [{\"action\": \"write_file\", \"args\": {}}]}",
		 "write_file needs a \"filename\""},
		{"{\"command\": [\"a\"], \"prestart\": [{\"action\": \"write_file\", \"args\": "
		 "{\"filename\": \"f\", \"body\": 3}}]}", "body must be a string or an array"},
		{"{\"command\": [\"a\"], \"prestart\": [{\"action\": \"write_file\", \"args\": "
		 "{\"filename\": \"f\", \"body\": [\"a\", 2]}}]}", "prestart[0].body[1] is not a string"},
		{"{\"command\": [\"a\"], \"prestart\": [{\"action\": \"write_file\", \"args\": "
		 "{\"filename\": \"f\", \"mode\": \"rwx\"}}]}", "octal mode"},
		{"{\"command\": [\"a\"], \"prestart\": [{\"action\": \"write_file\", \"args\": "
		 "{\"filename\": \"f\", \"mode\": 99999}}]}", "file mode"},
		{"{\"command\": [\"a\"], \"prestart\": [{\"action\": \"run_command\", \"args\": {}}]}",
		 "prestart[0].command must be a non-empty array"},
		{"{\"command\": [\"a\"], \"command\": [\"b\"]}", "not valid JSON"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct app_service s;
		struct terr err = {0};
		int rc = appdef_parse_service(bad[i].json, strlen(bad[i].json), 80, &s, &err);
		if (rc != -EINVAL)
			FAILF("%s was taken (rc %d)", bad[i].json, rc);
		CHECK_CONTAINS(err.msg, bad[i].msg);
		CHECK(s.argv == NULL && s.env == NULL && s.prestart == NULL);
	}
}

TEST(builtin_jupyter)
{
	struct app_service s;
	struct terr err = {0};
	CHECK_INT(appdef_builtin_jupyter(true, 8081, &s, &err), 0);
	CHECK_STR(s.argv[0], "jupyter");
	CHECK_STR(s.argv[1], "notebook");
	bool port = false, ip = false, token = false, remote = false;
	size_t n = 0;
	for (; s.argv[n]; n++) {
		port |= !strcmp(s.argv[n], "--port=8081");
		ip |= !strcmp(s.argv[n], "--ip=127.0.0.1");
		token |= !strcmp(s.argv[n], "--NotebookApp.token=");
		remote |= !strcmp(s.argv[n], "--NotebookApp.allow_remote_access=True");
	}
	CHECK(port && ip && token && remote);
	CHECK(s.env && !s.env[0]);
	appdef_service_free(&s);
	CHECK_INT(appdef_builtin_jupyter(false, 9000, &s, &err), 0);
	CHECK_STR(s.argv[0], "python3");
	CHECK_STR(s.argv[1], "-m");
	CHECK_STR(s.argv[2], "notebook");
	CHECK_STR(s.argv[5], "--port=9000");
	appdef_service_free(&s);
}

int main(void)
{
	RUN(spec_parses_entries);
	RUN(spec_refuses_bad_entries);
	RUN(subst_replaces_ports);
	RUN(service_parses_backendai_format);
	RUN(service_refuses_bad_definitions);
	RUN(builtin_jupyter);
	return testlib_done();
}
