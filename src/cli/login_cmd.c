/* `tessera login`: verify a keypair against an endpoint and store it in
 * ~/.config/tessera/client.conf. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "common/conf.h"

#define LOGIN_USAGE \
	"usage: tessera login --endpoint URL --access-key AK --secret-key SK\n" \
	"\n" \
	"Checks the keypair with the manager and stores it in\n" \
	"~/.config/tessera/client.conf (mode 0600). Each option may instead come\n" \
	"from TESSERA_ENDPOINT, TESSERA_ACCESS_KEY, TESSERA_SECRET_KEY.\n"

/* mkdir -p for the directories above path, new ones with mode 0700. */
static int login_make_parents(const char *path, struct terr *err)
{
	char *dir = strdup(path);
	if (!dir)
		return terr_set(err, ENOMEM, "out of memory");
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			int e = errno;
			terr_set(err, e, "cannot create %s: %s", dir, strerror(e));
			free(dir);
			return -e;
		}
		*p = '/';
	}
	free(dir);
	return 0;
}

int cmd_login(int argc, char **argv)
{
	static const struct option opts[] = {
		{"endpoint", required_argument, NULL, 'e'},
		{"access-key", required_argument, NULL, 'a'},
		{"secret-key", required_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *endpoint = getenv("TESSERA_ENDPOINT");
	const char *ak = getenv("TESSERA_ACCESS_KEY");
	const char *sk = getenv("TESSERA_SECRET_KEY");
	optind = 0;
	opterr = 0;
	for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		switch (o) {
		case 'h':
			fputs(LOGIN_USAGE, stdout);
			return CLI_EXIT_OK;
		case 'e': endpoint = optarg; break;
		case 'a': ak = optarg; break;
		case 's': sk = optarg; break;
		default:
			return cli_usage_fail("login", "option '%s' is unknown or needs a value",
					      argv[optind - 1]);
		}
	}
	if (optind < argc)
		return cli_usage_fail("login", "unexpected argument '%s'", argv[optind]);
	if (!endpoint || !*endpoint)
		return cli_usage_fail("login", "no endpoint: give --endpoint URL or set TESSERA_ENDPOINT");
	if (!ak || !*ak)
		return cli_usage_fail("login", "no access key: give --access-key or set TESSERA_ACCESS_KEY");
	if (!sk || !*sk)
		return cli_usage_fail("login", "no secret key: give --secret-key or set TESSERA_SECRET_KEY");

	struct api_client c = {.endpoint = endpoint, .access_key = ak, .secret_key = sk};
	struct terr err = {0};
	json_t *who = NULL;
	if (api_call(&c, "GET", "/v1/auth/whoami", NULL, 0, &who, NULL, &err) < 0)
		return cli_fail("login failed: %s", err.msg);
	const char *email = cli_json_str(json_object_get(who, "user"), "email", NULL);
	if (!email) {
		json_decref(who);
		return cli_fail("login failed: %s did not say who this key belongs to", endpoint);
	}

	int rc = CLI_EXIT_OK;
	char *path = cli_client_conf_path();
	static const char *const keys[] = {"endpoint", "access_key", "secret_key"};
	const char *values[] = {endpoint, ak, sk};
	if (!path)
		rc = cli_fail("cannot tell where the home directory is; set HOME");
	else if (login_make_parents(path, &err) < 0 ||
		 conf_write(path, 0600, keys, values, 3, &err) < 0)
		rc = cli_fail("%s", err.msg);
	else
		printf("logged in to %s as %s\n", endpoint, email);
	free(path);
	json_decref(who);
	return rc;
}
