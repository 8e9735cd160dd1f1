/* `tessera node drain ID` and `tessera node undrain ID` (PATCH
 * /v1/nodes/{id}, docs/api.md): a drained node gets no new sessions; the
 * ones running there keep running. node_cmd.c has the verb table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "common/apiclient.h"

static int set_schedulable(int argc, char **argv, bool schedulable)
{
	const char *verb = schedulable ? "node undrain" : "node drain";
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: tessera %s NODE\n\n%s\n", verb,
		       schedulable ? "Lets the scheduler place new sessions on NODE again."
				   : "Stops the scheduler from placing new sessions on NODE; its sessions keep running.");
		return CLI_EXIT_OK;
	}
	if (argc != 2)
		return cli_usage_fail(verb, argc < 2 ? "missing NODE (see 'tessera node ls')" : "unexpected argument '%s'",
				      argv[argc < 2 ? 0 : 2]);
	char *id = api_escape(argv[1]), *path = NULL;
	if (!id || asprintf(&path, "/v1/nodes/%s", id) < 0) {
		free(id);
		return cli_fail("out of memory");
	}
	free(id);
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *reply = NULL, *body = json_pack("{s:b}", "schedulable", schedulable);
	int rc = CLI_EXIT_OK;
	if (cli_connect(&cfg, &c, &err) < 0 || api_call(&c, "PATCH", path, body, 0, &reply, NULL, &err) < 0) {
		rc = cli_fail("%s", err.msg);
	} else {
		json_t *node = json_object_get(reply, "node");
		printf(schedulable ? "node %s: schedulable; new sessions may be placed on it\n"
				   : "node %s: drained; no new sessions are placed on it, its %lld sessions keep running\n",
		       argv[1], (long long)json_integer_value(json_object_get(node, "sessions")));
	}
	json_decref(body);
	json_decref(reply);
	free(path);
	cli_config_free(&cfg);
	return rc;
}

int cmd_node_drain(int argc, char **argv)
{
	return set_schedulable(argc, argv, false);
}

int cmd_node_undrain(int argc, char **argv)
{
	return set_schedulable(argc, argv, true);
}

/* `tessera node set-group NODE GROUP`: the node's resource group
 * (docs/scheduling.md, "Resource groups"); "default" puts it back. */
int cmd_node_set_group(int argc, char **argv)
{
	const char *verb = "node set-group";
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: tessera %s NODE GROUP\n\nPuts NODE in resource group GROUP: sessions that ask for "
		       "GROUP (--group) run only on its nodes. \"default\" is the group of every node not put in "
		       "another.\n", verb);
		return CLI_EXIT_OK;
	}
	if (argc != 3)
		return cli_usage_fail(verb, argc < 3 ? "needs NODE GROUP" : "unexpected argument '%s'", argv[argc < 3 ? 0 : 3]);
	char *id = api_escape(argv[1]), *path = NULL;
	if (!id || asprintf(&path, "/v1/nodes/%s", id) < 0) {
		free(id);
		return cli_fail("out of memory");
	}
	free(id);
	json_t *reply = NULL, *body = json_pack("{s:s}", "group", argv[2]);
	int rc = cli_call("PATCH", path, body, &reply);
	if (rc == CLI_EXIT_OK)
		printf("node %s: in resource group %s\n", argv[1],
		       cli_json_str(json_object_get(reply, "node"), "group", argv[2]));
	json_decref(body);
	json_decref(reply);
	free(path);
	return rc;
}
