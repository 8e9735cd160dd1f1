/* tessera config get [KEY] | set KEY VALUE: the cluster settings
 * (docs/api.md, "Settings"). VALUE is read as JSON when it parses as JSON
 * (2, 0.05, {"max_sessions": 2}, null), else as a string (fifo). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "common/jsonutil.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tessera config get [KEY]\n"
		"       tessera config set KEY VALUE\n"
		"Cluster settings (admins change them; everyone may read):\n"
		"  fgpu_per_device   fGPU one physical GPU counts as (1..100)\n"
		"  fgpu_quantum      smallest fGPU step of a request (e.g. 0.01)\n"
		"  queue_policy      fifo | lifo | drf\n"
		"  selector          concentrated | dispersed\n"
		"  fifo_skip_after   passes a blocked queue head waits before others may pass (0 = never)\n"
		"  policy.default    per-user limits, e.g. '{\"max_sessions\": 2, \"max_fgpu\": 1}'\n"
		"  policy.EMAIL      limits for one user (null removes them)\n");
}

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

int cmd_config(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
	}
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *out = NULL;
	int rc = CLI_EXIT_OK;
	if (!strcmp(argv[1], "get") && argc <= 3) {
		if (cli_connect(&cfg, &c, &err) < 0 || api_call(&c, "GET", "/v1/config", NULL, 0, &out, NULL, &err) < 0) {
			rc = cli_fail("%s", err.msg);
		} else if (argc == 3) {
			json_t *v = json_object_get(out, argv[2]);
			if (!v && !strncmp(argv[2], "policy.", 7))
				v = json_object_get(json_object_get(out, "policies"), argv[2] + 7);
			if (!v)
				rc = cli_fail("unknown setting '%s'; run 'tessera config get' to list them", argv[2]);
			else
				print_value(v);
		} else {
			cli_print_json(out);
		}
	} else if (!strcmp(argv[1], "set") && argc == 4) {
		json_t *value = json_loads(argv[3], JSON_DECODE_ANY, NULL);
		if (!value)
			value = json_string(argv[3]);
		/* null removes a key (policy.*); the API answers the new settings
		 * either way. */
		bool removes = json_is_null(value);
		json_t *body = json_pack("{s:o}", "value", value);
		char *key = api_escape(argv[2]);
		char path[512];
		snprintf(path, sizeof(path), "/v1/config/%s", key ? key : "");
		free(key);
		if (cli_connect(&cfg, &c, &err) < 0 || api_call(&c, "PUT", path, body, 0, &out, NULL, &err) < 0)
			rc = cli_fail("%s", err.msg);
		else
			printf("%s %s\n", argv[2], removes ? "removed" : "set");
		json_decref(body);
	} else {
		rc = cli_usage_fail("config", "expected 'get [KEY]' or 'set KEY VALUE'");
	}
	json_decref(out);
	cli_config_free(&cfg);
	return rc;
}
