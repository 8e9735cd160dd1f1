/* tessera config get [KEY] | set KEY VALUE: the cluster settings
 * (docs/api.md, "Settings"). VALUE is read as JSON when it parses as JSON
 * (2, 0.05, {"max_sessions": 2}, null), else as a string (fifo).
 * tessera config get --prefix P | put-json P FILE: the settings whose key
 * starts with P as one flat JSON object {KEY without P: value}, the
 * seeds' backup and restore of the cluster configuration ('' for all):
 * what get prints, put-json takes back. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "common/jsonutil.h"

#define CONFIG_USAGE \
	"usage: tessera config get [KEY]\n" \
	"       tessera config set KEY VALUE\n" \
	"       tessera config get --prefix PREFIX > FILE   (PREFIX '' for all: a backup)\n" \
	"       tessera config put-json PREFIX FILE         (a restore: every key checked first)\n" \
	"Cluster settings (admins read and change them all; other users read only\n" \
	"fgpu_per_device, fgpu_quantum, folder_trash_days, announcement and their own\n" \
	"policy):\n" \
	"  fgpu_per_device   fGPU one physical GPU counts as (1..100)\n" \
	"  fgpu_quantum      smallest fGPU step of a request (e.g. 0.01)\n" \
	"  queue_policy      fifo | lifo | drf\n" \
	"  selector          concentrated | dispersed\n" \
	"  fifo_skip_after   passes a blocked queue head waits before others may pass (0 = never)\n" \
	"  folder_trash_days days a removed folder stays in the trash\n" \
	"  announcement      a line every web UI user sees on every page until dismissed\n" \
	"                    (at most 500 bytes; null or '' takes it down)\n" \
	"  policy.default    per-user limits, e.g. '{\"max_sessions\": 2, \"max_fgpu\": 1}'\n" \
	"                    (also max_private_images, default 10)\n" \
	"  policy.EMAIL      limits for one user (null removes them)\n" \
	"  log_max_size, log_max_files  every agent's, in place of agent.conf's (null: agent.conf's)\n" \
	"  storage_hosts     NAME:PATH[,NAME:PATH...]: folders' storage hosts (null: manager.conf's)\n" \
	"  registry_url      the cluster registry, http://HOST:PORT ('': none; null: manager.conf's)\n" \
	"  wsproxy_url, wsproxy_port_range, wsproxy_domain  the app proxy's addresses for new app links\n" \
	"                    (null: manager.conf's)\n"
#define CONFIG_EXPECTED "expected 'get [KEY]', 'get --prefix PREFIX', 'set KEY VALUE' or 'put-json PREFIX FILE'"

static void print_value(json_t *v)
{
	if (json_is_string(v)) {
		printf("%s\n", json_string_value(v));
	} else {
		char *t = json_dumps(v, JSONUTIL_DUMP_FLAGS | JSON_ENCODE_ANY);
		printf("%s\n", t ? t : "");
		free(t);
	}
}

/* Where a prefix ends a key's first part: "policy" names the keys
 * "policy.NAME" as NAME, without a dot to begin with; "wsproxy_", "" and
 * "policy." are cut as they are. */
static bool prefix_takes_dot(const char *prefix)
{
	size_t pl = strlen(prefix);
	return pl && prefix[pl - 1] != '.' && prefix[pl - 1] != '_';
}

/* tessera config get --prefix P: the flat form, keys without P. */
static int config_get_prefix(const char *prefix)
{
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *out = NULL, *sel = json_object();
	int rc = CLI_EXIT_OK;
	if (!sel) {
		rc = cli_fail("out of memory");
	} else if (cli_connect(&cfg, &c, &err) < 0 ||
		   api_call(&c, "GET", "/v1/config?flat=1", NULL, 0, &out, NULL, &err) < 0) {
		rc = cli_fail("%s", err.msg);
	} else {
		const char *k;
		json_t *v;
		size_t pl = strlen(prefix);
		json_object_foreach(out, k, v) {
			if (strncmp(k, prefix, pl))
				continue;
			const char *rest = k + pl;
			if (prefix_takes_dot(prefix) && *rest == '.')
				rest++;
			json_object_set(sel, rest, v);
		}
		cli_print_json(sel);
	}
	json_decref(sel);
	json_decref(out);
	cli_config_free(&cfg);
	return rc;
}

/* tessera config put-json PREFIX FILE (argv[0] == "put-json") */
static int config_put_json(int argc, char **argv)
{
	if (argc != 3)
		return cli_usage_fail("config", CONFIG_EXPECTED);
	const char *prefix = argv[1], *file = argv[2];
	json_error_t je;
	json_t *in = !strcmp(file, "-") ? json_loadf(stdin, 0, &je) : json_load_file(file, 0, &je);
	if (!in) {
		/* jansson says line -1 when the file could not be read at all:
		 * then its own words name the cause. */
		if (je.line < 1)
			return cli_fail("%s: %s (nothing was changed)", file, je.text);
		return cli_fail("%s: line %d: %s (nothing was changed)", file, je.line, je.text);
	}
	if (!json_is_object(in)) {
		json_decref(in);
		return cli_fail("%s: must be a JSON object of setting -> value, as 'tessera config get --prefix' prints",
				file);
	}
	json_t *flat = json_object();
	const char *k;
	json_t *v;
	int rc = CLI_EXIT_OK;
	json_object_foreach(in, k, v) {
		char key[512];
		/* As get cut it: "policy" + "default" is "policy.default". */
		const char *dot = prefix_takes_dot(prefix) && *k != '.' && *k != '_' && *k ? "." : "";
		if ((size_t)snprintf(key, sizeof(key), "%s%s%s", prefix, dot, k) >= sizeof(key)) {
			rc = cli_fail("%s: key '%.60s...' is too long", file, k);
			break;
		}
		json_object_set(flat, key, v);
	}
	json_decref(in);
	if (rc != CLI_EXIT_OK) {
		json_decref(flat);
		return rc;
	}
	size_t n = json_object_size(flat);
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *out = NULL, *body = json_pack("{s:o}", "settings", flat);
	/* The manager checks every key before it writes any: on an error
	 * nothing changed. */
	if (cli_connect(&cfg, &c, &err) < 0 || api_call(&c, "PUT", "/v1/config", body, 0, &out, NULL, &err) < 0)
		rc = cli_fail("%s: %s%s", file, err.msg, err.code == EINVAL ? " (nothing was changed)" : "");
	else
		printf("%zu settings set from %s\n", n, file);
	json_decref(body);
	json_decref(out);
	cli_config_free(&cfg);
	return rc;
}

/* tessera config get [KEY] (argv[0] == "get") */
static int config_get(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--prefix") || !strncmp(argv[1], "--prefix=", 9))) {
		if (argv[1][8] == '=' && argc == 2)
			return config_get_prefix(argv[1] + 9);
		if (argc == 3 && argv[1][8] == '\0')
			return config_get_prefix(argv[2]);
		return cli_usage_fail("config", "expected 'get --prefix PREFIX' ('' for all)");
	}
	if (argc > 2)
		return cli_usage_fail("config", CONFIG_EXPECTED);
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *out = NULL;
	int rc = CLI_EXIT_OK;
	if (cli_connect(&cfg, &c, &err) < 0 || api_call(&c, "GET", "/v1/config", NULL, 0, &out, NULL, &err) < 0) {
		rc = cli_fail("%s", err.msg);
	} else if (argc == 2) {
		json_t *v = json_object_get(out, argv[1]);
		if (!v && !strncmp(argv[1], "policy.", 7))
			v = json_object_get(json_object_get(out, "policies"), argv[1] + 7);
		if (!v)
			rc = cli_fail("unknown setting '%s'; run 'tessera config get' to list them", argv[1]);
		else
			print_value(v);
	} else {
		cli_print_json(out);
	}
	json_decref(out);
	cli_config_free(&cfg);
	return rc;
}

/* tessera config set KEY VALUE (argv[0] == "set") */
static int config_set(int argc, char **argv)
{
	if (argc != 3)
		return cli_usage_fail("config", CONFIG_EXPECTED);
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *out = NULL;
	int rc = CLI_EXIT_OK;
	json_t *value = json_loads(argv[2], JSON_DECODE_ANY, NULL);
	if (!value)
		value = json_string(argv[2]);
	/* null removes a key (policy.*); the API answers the new settings
	 * either way. */
	bool removes = json_is_null(value);
	json_t *body = json_pack("{s:o}", "value", value);
	char *key = api_escape(argv[1]);
	char path[512];
	snprintf(path, sizeof(path), "/v1/config/%s", key ? key : "");
	free(key);
	if (cli_connect(&cfg, &c, &err) < 0 || api_call(&c, "PUT", path, body, 0, &out, NULL, &err) < 0)
		rc = cli_fail("%s", err.msg);
	else
		printf("%s %s\n", argv[1], removes ? "removed" : "set");
	json_decref(body);
	json_decref(out);
	cli_config_free(&cfg);
	return rc;
}

static const struct cli_verb config_verbs[] = {
	{"get", config_get, NULL, NULL,   /* CONFIG_USAGE describes them */
	 "--prefix=PREFIX", "KEY"},
	{"set", config_set, NULL, NULL,
	 "", "KEY VALUE"},
	{"put-json", config_put_json, NULL, NULL,
	 "", "PREFIX FILE"},
};

const struct cli_noun cli_config_noun = {
	.name = "config",
	.verbs = config_verbs,
	.n_verbs = CLI_NVERBS(config_verbs),
	.usage = CONFIG_USAGE,
	.unknown = CONFIG_EXPECTED,
};

int cmd_config(int argc, char **argv)
{
	return cli_dispatch(&cli_config_noun, argc, argv);
}
