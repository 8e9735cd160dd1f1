/* `tessera node ls` and `tessera node info NODE`. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/views.h"

#define NODE_USAGE \
	"usage: tessera node ls [--json]\n" \
	"       tessera node info NODE [--json]\n" \
	"       tessera node drain NODE\n" \
	"       tessera node undrain NODE\n" \
	"       tessera node set-group NODE GROUP\n" \
	"\n" \
	"ls lists the nodes (agents) with their capacity, what is allocated and\n" \
	"what the sessions use now (CPU USE in cores, MEM USE); info shows one\n" \
	"node with each GPU's allocation and live utilisation and memory.\n" \
	"drain stops new sessions from being placed on NODE (its sessions keep\n" \
	"running); undrain lets them be placed there again. set-group puts NODE\n" \
	"in a resource group (sessions asking for it with --group run only on its\n" \
	"nodes; \"default\" otherwise).\n" \
	"  --json   print JSON\n"

/* node ls and node info NODE: info has one argument, the node's id. */
static int node_show(int argc, char **argv, bool info)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	int as_json = 0;
	optind = 0;
	opterr = 0;
	for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		if (o == 'h') {
			fputs(NODE_USAGE, stdout);
			return CLI_EXIT_OK;
		} else if (o == 'j') {
			as_json = 1;
		} else {
			return cli_usage_fail(info ? "node info" : "node ls", "option '%s' is unknown", argv[optind - 1]);
		}
	}
	const char *want = NULL;
	if (info) {
		if (optind >= argc)
			return cli_usage_fail("node info", "which node? usage: tessera node info NODE");
		want = argv[optind++];
	}
	if (optind < argc)
		return cli_usage_fail(info ? "node info" : "node ls", "unexpected argument '%s'", argv[optind]);

	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *reply = NULL;
	int rc = CLI_EXIT_OK;
	if (cli_connect(&cfg, &c, &err) < 0 ||
	    api_call(&c, "GET", "/v1/nodes", NULL, 0, &reply, NULL, &err) < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	json_t *nodes = json_object_get(reply, "nodes");
	if (!json_is_array(nodes)) {
		rc = cli_fail("unexpected answer from the manager: no 'nodes' array");
		goto out;
	}
	if (info) {
		json_t *node = NULL, *n;
		size_t i;
		json_array_foreach(nodes, i, n)
			if (!strcmp(cli_json_str(n, "id", ""), want))
				node = n;
		if (!node) {
			rc = cli_fail("no node '%s' (tessera node ls lists them)", want);
		} else if (as_json) {
			cli_print_json(node);
		} else {
			json_t *one = json_array();
			json_array_append(one, node);
			struct cli_table *t = cli_node_table(one), *g = cli_gpu_table(json_object_get(node, "gpus"));
			json_decref(one);
			if (!t || !g) {
				rc = cli_fail("out of memory");
			} else {
				cli_table_print(t, stdout);
				if (json_array_size(json_object_get(node, "gpus"))) {
					printf("\nGPUs:\n");
					cli_table_print(g, stdout);
				}
			}
			cli_table_free(t);
			cli_table_free(g);
		}
	} else if (as_json) {
		cli_print_json(nodes);
	} else {
		struct cli_table *t = cli_node_table(nodes);
		if (!t) {
			rc = cli_fail("out of memory");
			goto out;
		}
		cli_table_print(t, stdout);
		cli_table_free(t);
	}
out:
	json_decref(reply);
	cli_config_free(&cfg);
	return rc;
}

static int node_ls(int argc, char **argv)
{
	return node_show(argc, argv, false);
}

static int node_info(int argc, char **argv)
{
	return node_show(argc, argv, true);
}

static const struct cli_verb node_verbs[] = {
	{"ls", node_ls, NULL, NULL,   /* NODE_USAGE describes them */
	 "--json", ""},
	{"info", node_info, NULL, NULL,
	 "--json", "NODE"},
	{"drain", cmd_node_drain, NULL, NULL,
	 "", "NODE"},
	{"undrain", cmd_node_undrain, NULL, NULL,
	 "", "NODE"},
	{"set-group", cmd_node_set_group, NULL, NULL,
	 "", "NODE GROUP"},
};

const struct cli_noun cli_node_noun = {
	.name = "node",
	.verbs = node_verbs,
	.n_verbs = CLI_NVERBS(node_verbs),
	.usage = NODE_USAGE,
	.missing = "missing command (try 'tessera node ls')",
	.help_verb = true,
};

int cmd_node(int argc, char **argv)
{
	return cli_dispatch(&cli_node_noun, argc, argv);
}
