/* Where the CLI's endpoint and keys come from: client.conf in a temporary
 * HOME, TESSERA_CONFIG, and the TESSERA_* variables, in that order. */
#include "cli/client.h"
#include "testlib.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char home[64];
static char client_conf[256];
static char admin_conf[256];

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

static void clear_env(void)
{
	unsetenv("TESSERA_CONFIG");
	unsetenv("TESSERA_ENDPOINT");
	unsetenv("TESSERA_ACCESS_KEY");
	unsetenv("TESSERA_SECRET_KEY");
}

TEST(nothing_configured)
{
	clear_env();
	unlink(client_conf);
	struct cli_config cfg;
	struct api_client c;
	struct terr err = {0};
	CHECK_INT(cli_config_load(&cfg, &err), 0);
	CHECK(cfg.endpoint == NULL && cfg.access_key == NULL && cfg.file == NULL);
	cli_config_free(&cfg);
	CHECK_INT(cli_connect(&cfg, &c, &err), -EINVAL);
	CHECK_STR(err.msg, "no endpoint configured; run 'tessera login' or set TESSERA_CONFIG");
	cli_config_free(&cfg);
}

TEST(client_conf_in_home)
{
	clear_env();
	write_file(client_conf, "endpoint = http://client:1\naccess_key = CAK\nsecret_key = CSK\n");
	char *path = cli_client_conf_path();
	CHECK_STR(path, client_conf);
	free(path);
	struct cli_config cfg;
	struct api_client c;
	struct terr err = {0};
	CHECK_INT(cli_connect(&cfg, &c, &err), 0);
	CHECK_STR(c.endpoint, "http://client:1");
	CHECK_STR(c.access_key, "CAK");
	CHECK_STR(c.secret_key, "CSK");
	CHECK_STR(cfg.file, client_conf);
	cli_config_free(&cfg);
}

TEST(tessera_config_beats_client_conf)
{
	clear_env();
	write_file(client_conf, "endpoint = http://client:1\naccess_key = CAK\nsecret_key = CSK\n");
	write_file(admin_conf, "# written by tessera server\nendpoint = http://admin:2\n"
			       "access_key = AAK\nsecret_key = ASK\ndata_dir = /x\n");
	setenv("TESSERA_CONFIG", admin_conf, 1);
	struct cli_config cfg;
	struct api_client c;
	struct terr err = {0};
	CHECK_INT(cli_connect(&cfg, &c, &err), 0);
	CHECK_STR(c.endpoint, "http://admin:2");
	CHECK_STR(c.access_key, "AAK");
	CHECK_STR(c.secret_key, "ASK");
	CHECK_STR(cfg.file, admin_conf);
	cli_config_free(&cfg);

	/* A TESSERA_CONFIG that is missing or broken is an error, not a
	 * silent fallback to client.conf. */
	setenv("TESSERA_CONFIG", "/nonexistent/admin.conf", 1);
	CHECK_INT(cli_config_load(&cfg, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "TESSERA_CONFIG: cannot read /nonexistent/admin.conf");
	write_file(admin_conf, "endpoint http://admin:2\n");
	setenv("TESSERA_CONFIG", admin_conf, 1);
	CHECK_INT(cli_config_load(&cfg, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "line 1: expected 'key = value'");
}

TEST(variables_override_files)
{
	clear_env();
	write_file(client_conf, "endpoint = http://client:1\naccess_key = CAK\nsecret_key = CSK\n");
	write_file(admin_conf, "endpoint = http://admin:2\naccess_key = AAK\nsecret_key = ASK\n");
	setenv("TESSERA_ENDPOINT", "http://env:3", 1);
	struct cli_config cfg;
	struct api_client c;
	struct terr err = {0};
	CHECK_INT(cli_connect(&cfg, &c, &err), 0);
	CHECK_STR(c.endpoint, "http://env:3");
	CHECK_STR(c.access_key, "CAK");  /* per key: the rest still from the file */
	cli_config_free(&cfg);

	setenv("TESSERA_CONFIG", admin_conf, 1);
	setenv("TESSERA_SECRET_KEY", "ESK", 1);
	setenv("TESSERA_ACCESS_KEY", "", 1);  /* empty counts as unset */
	CHECK_INT(cli_connect(&cfg, &c, &err), 0);
	CHECK_STR(c.endpoint, "http://env:3");
	CHECK_STR(c.access_key, "AAK");
	CHECK_STR(c.secret_key, "ESK");
	cli_config_free(&cfg);

	/* Variables alone are enough. */
	unlink(client_conf);
	unsetenv("TESSERA_CONFIG");
	setenv("TESSERA_ACCESS_KEY", "EAK", 1);
	CHECK_INT(cli_connect(&cfg, &c, &err), 0);
	CHECK_STR(c.access_key, "EAK");
	CHECK(cfg.file == NULL);
	cli_config_free(&cfg);

	unsetenv("TESSERA_SECRET_KEY");
	CHECK_INT(cli_connect(&cfg, &c, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "no secret_key in the environment");
	cli_config_free(&cfg);
}

int main(void)
{
	snprintf(home, sizeof(home), "/tmp/test_cli_home.XXXXXX");
	if (!mkdtemp(home))
		return 1;
	setenv("HOME", home, 1);
	char dir[128];
	snprintf(dir, sizeof(dir), "%s/.config", home);
	mkdir(dir, 0700);
	snprintf(dir, sizeof(dir), "%s/.config/tessera", home);
	mkdir(dir, 0700);
	snprintf(client_conf, sizeof(client_conf), "%s/client.conf", dir);
	snprintf(admin_conf, sizeof(admin_conf), "%s/admin.conf", home);

	RUN(nothing_configured);
	RUN(client_conf_in_home);
	RUN(tessera_config_beats_client_conf);
	RUN(variables_override_files);

	unlink(client_conf);
	unlink(admin_conf);
	rmdir(dir);
	snprintf(dir, sizeof(dir), "%s/.config", home);
	rmdir(dir);
	rmdir(home);
	return testlib_done();
}
