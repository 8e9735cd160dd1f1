/* `tessera image`: the noun's verb table and the catalog's verbs (ls,
 * alias, dealias, rm, rescan). Other files add verbs by a line in
 * image_verbs (their functions are declared in image_cmd.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/image_cmd.h"
#include "cli/table.h"
#include "common/units.h"

/* Parses the verb's options: --json, --all (when all is not NULL) and
 * --help; the operands left are argv[optind...]. Returns -1 when the verb
 * is done (help printed, or a usage error: *rc set). */
static int image_opts(int argc, char **argv, const char *verb, const char *usage, int *as_json, int *all,
		      int n_operands, int *rc)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{"all", no_argument, NULL, 'a'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	optind = 0;
	opterr = 0;
	for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		if (o == 'h') {
			fputs(usage, stdout);
			*rc = CLI_EXIT_OK;
			return -1;
		} else if (o == 'j' && as_json) {
			*as_json = 1;
		} else if (o == 'a' && all) {
			*all = 1;
		} else {
			*rc = cli_usage_fail(verb, "option '%s' is unknown", argv[optind - 1]);
			return -1;
		}
	}
	if (argc - optind != n_operands) {
		*rc = argc - optind > n_operands ? cli_usage_fail(verb, "unexpected argument '%s'", argv[optind + n_operands])
						 : cli_usage_fail(verb, "missing argument (%s)", usage + strlen("usage: tessera "));
		return -1;
	}
	return 0;
}

/* One call to the manager; *reply (may be NULL) its answer. Prints the
 * error and returns CLI_EXIT_FAIL on failure. */
static int image_call(const char *method, const char *path, json_t *body, json_t **reply)
{
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *r = NULL;
	int rc = CLI_EXIT_OK;
	if (cli_connect(&cfg, &c, &err) < 0 || api_call(&c, method, path, body, 0, &r, NULL, &err) < 0)
		rc = cli_fail("%s", err.msg);
	cli_config_free(&cfg);
	if (reply && rc == CLI_EXIT_OK)
		*reply = r;
	else
		json_decref(r);
	return rc;
}

/* ---- ls ---- */

#define LS_USAGE \
	"usage: tessera image ls [--all] [--json]\n" \
	"\n" \
	"Lists the images you may launch: name, tag, environment (family),\n" \
	"framework versions, the CUDA version they were built for (tessera.cuda;\n" \
	"'-' for a CPU image), size, minimum resources, the nodes that hold it,\n" \
	"owner and visibility.\n" \
	"  --all    admins: also the images labelled hidden (ai.backend.features private)\n" \
	"  --json   print the API's JSON array\n"

static int cmp_image(const void *pa, const void *pb)
{
	json_t *a = *(json_t *const *)pa, *b = *(json_t *const *)pb;
	int c = strcmp(cli_json_str(a, "family", ""), cli_json_str(b, "family", ""));
	return c ? c : strcmp(cli_json_str(a, "ref", ""), cli_json_str(b, "ref", ""));
}

static void join_frameworks(json_t *fw, char *buf, size_t n)
{
	size_t len = 0;
	buf[0] = '\0';
	size_t i;
	json_t *f;
	json_array_foreach(fw, i, f) {
		int w = snprintf(buf + len, n - len, "%s%s %s", i ? ", " : "", cli_json_str(f, "name", "?"),
				 cli_json_str(f, "version", "?"));
		if (w < 0 || (size_t)w >= n - len)
			break;
		len += (size_t)w;
	}
}

static void format_min(json_t *min, char *buf, size_t n)
{
	int64_t cpu = cli_json_milli(json_object_get(min, "cpu")), mem = cli_json_int(json_object_get(min, "mem")),
		fgpu = cli_json_milli(json_object_get(min, "fgpu"));
	if (!cpu && !mem && !fgpu) {
		snprintf(buf, n, "-");
		return;
	}
	char c[32], m[32], g[32];
	units_format_milli(cpu, c, sizeof(c));
	units_format_size(mem, m, sizeof(m));
	units_format_milli(fgpu, g, sizeof(g));
	if (fgpu)
		snprintf(buf, n, "%s CPU, %s, %s fGPU", c, m, g);
	else
		snprintf(buf, n, "%s CPU, %s", c, m);
}

static int image_ls(int argc, char **argv)
{
	int as_json = 0, all = 0, rc;
	if (image_opts(argc, argv, "image ls", LS_USAGE, &as_json, &all, 0, &rc) < 0)
		return rc;
	json_t *reply = NULL;
	if ((rc = image_call("GET", all ? "/v1/images?all=1" : "/v1/images", NULL, &reply)) != CLI_EXIT_OK)
		return rc;
	json_t *images = json_object_get(reply, "images");
	if (!json_is_array(images)) {
		json_decref(reply);
		return cli_fail("unexpected answer from the manager: no 'images' array");
	}
	if (as_json) {
		cli_print_json(images);
		json_decref(reply);
		return CLI_EXIT_OK;
	}
	size_t n = json_array_size(images);
	json_t **sorted = calloc(n ? n : 1, sizeof(*sorted));
	static const char *const headers[] = {"name", "tag", "family", "frameworks", "cuda", "size", "minimum", "nodes",
					      "owner", "visibility"};
	struct cli_table *t = sorted ? cli_table_new(10, headers) : NULL;
	if (!t) {
		free(sorted);
		json_decref(reply);
		return cli_fail("out of memory");
	}
	for (size_t i = 0; i < n; i++)
		sorted[i] = json_array_get(images, i);
	qsort(sorted, n, sizeof(*sorted), cmp_image);
	for (size_t i = 0; i < n; i++) {
		json_t *e = sorted[i];
		char fw[512], fws[64], size[32], min[128], nodes[256] = "", nodess[48];
		join_frameworks(json_object_get(e, "frameworks"), fw, sizeof(fw));
		cli_shorten(fw, 48, fws, sizeof(fws));
		units_format_size(cli_json_int(json_object_get(e, "size")), size, sizeof(size));
		format_min(json_object_get(e, "min"), min, sizeof(min));
		size_t k, len = 0;
		json_t *nd;
		json_array_foreach(json_object_get(e, "nodes"), k, nd) {
			int w = snprintf(nodes + len, sizeof(nodes) - len, "%s%s", k ? "," : "", json_string_value(nd) ?: "?");
			if (w < 0 || (size_t)w >= sizeof(nodes) - len)
				break;
			len += (size_t)w;
		}
		cli_shorten(nodes, 32, nodess, sizeof(nodess));
		const char *tag = cli_json_str(e, "tag", "");
		const char *status = cli_json_str(e, "status", "ready");
		char vis[64];
		snprintf(vis, sizeof(vis), "%s%s%s", cli_json_str(e, "visibility", "public"), strcmp(status, "ready") ? " " : "",
			 strcmp(status, "ready") ? status : "");
		const char *cells[] = {cli_json_str(e, "name", "?"), *tag ? tag : NULL, cli_json_str(e, "family", NULL),
				       fw[0] ? fws : NULL, cli_json_str(e, "cuda", NULL), size, min, nodes[0] ? nodess : NULL,
				       cli_json_str(e, "owner", NULL), vis};
		cli_table_add(t, cells);
	}
	cli_table_print(t, stdout);
	cli_table_free(t);
	/* Labels that were not understood: the image is listed anyway, with
	 * no minimum; say why, apart from the table. */
	for (size_t i = 0; i < n; i++) {
		const char *w = cli_json_str(sorted[i], "warning", NULL);
		if (w)
			fprintf(stderr, "tessera: note: %s: labels not understood: %s\n", cli_json_str(sorted[i], "ref", "?"), w);
	}
	free(sorted);
	json_decref(reply);
	return CLI_EXIT_OK;
}

/* ---- alias, dealias ---- */

#define ALIAS_USAGE \
	"usage: tessera image alias ALIAS IMAGE\n" \
	"\n" \
	"Admins: makes ALIAS another name for IMAGE in 'session create' and the\n" \
	"launch dialog (replacing what ALIAS named before).\n"
#define DEALIAS_USAGE \
	"usage: tessera image dealias ALIAS\n" \
	"\n" \
	"Admins: removes the alias ALIAS (the image stays).\n"

static char *alias_path(const char *alias)
{
	char *esc = api_escape(alias), *path = NULL;
	if (esc && asprintf(&path, "/v1/images/aliases/%s", esc) < 0)
		path = NULL;
	free(esc);
	return path;
}

static int image_alias(int argc, char **argv)
{
	int rc;
	if (image_opts(argc, argv, "image alias", ALIAS_USAGE, NULL, NULL, 2, &rc) < 0)
		return rc;
	char *path = alias_path(argv[optind]);
	json_t *body = json_pack("{s:s}", "image", argv[optind + 1]);
	rc = path && body ? image_call("PUT", path, body, NULL) : cli_fail("out of memory");
	if (rc == CLI_EXIT_OK)
		printf("%s -> %s\n", argv[optind], argv[optind + 1]);
	json_decref(body);
	free(path);
	return rc;
}

static int image_dealias(int argc, char **argv)
{
	int rc;
	if (image_opts(argc, argv, "image dealias", DEALIAS_USAGE, NULL, NULL, 1, &rc) < 0)
		return rc;
	char *path = alias_path(argv[optind]);
	rc = path ? image_call("DELETE", path, NULL, NULL) : cli_fail("out of memory");
	if (rc == CLI_EXIT_OK)
		printf("alias %s removed\n", argv[optind]);
	free(path);
	return rc;
}

/* ---- rm, rescan ---- */

#define RM_USAGE \
	"usage: tessera image rm IMAGE\n" \
	"\n" \
	"Removes IMAGE from every node that holds it: admins, or the owner of a\n" \
	"private image. Refused while a session uses it.\n"
#define RESCAN_USAGE \
	"usage: tessera image rescan [--json]\n" \
	"\n" \
	"Admins: asks every node for its images again (they are also reported\n" \
	"at registration and whenever Docker's images change).\n"

static int image_rm(int argc, char **argv)
{
	int rc;
	if (image_opts(argc, argv, "image rm", RM_USAGE, NULL, NULL, 1, &rc) < 0)
		return rc;
	char *esc = api_escape(argv[optind]), *path = NULL;
	if (!esc || asprintf(&path, "/v1/images/%s", esc) < 0)
		path = NULL;
	free(esc);
	json_t *reply = NULL;
	rc = path ? image_call("DELETE", path, NULL, &reply) : cli_fail("out of memory");
	if (rc == CLI_EXIT_OK)
		printf("%s removed from %zu node(s)\n", cli_json_str(reply, "ref", argv[optind]),
		       json_array_size(json_object_get(reply, "nodes")));
	json_decref(reply);
	free(path);
	return rc;
}

static int image_rescan(int argc, char **argv)
{
	int as_json = 0, rc;
	if (image_opts(argc, argv, "image rescan", RESCAN_USAGE, &as_json, NULL, 0, &rc) < 0)
		return rc;
	json_t *reply = NULL;
	if ((rc = image_call("POST", "/v1/images/rescan", json_object(), &reply)) != CLI_EXIT_OK)
		return rc;
	if (as_json)
		cli_print_json(reply);
	else
		printf("%lld of %lld nodes answered; %lld images\n", (long long)cli_json_int(json_object_get(reply, "nodes")),
		       (long long)cli_json_int(json_object_get(reply, "nodes_alive")),
		       (long long)cli_json_int(json_object_get(reply, "images")));
	json_decref(reply);
	return CLI_EXIT_OK;
}

/* ---- the noun ---- */

/* One line per verb; verbs of other files are appended here. */
static const struct cli_verb image_verbs[] = {
	{"build", cmd_image_build, "build RECIPE...",
	 "build images from recipes on this machine (root; docs/images.md)",
	 "--force --check --skip-unready --pip-index=URL --npm-registry=URL --site-file=FILE --config=FILE --mirror=URL --security-mirror=URL --cache-dir=DIR --fresh-base --base-max-age=DAYS", "FILE..."},
	{"ls", image_ls, "ls [--all] [--json]", "list the images you may launch",
	 "--all --json", ""},
	{"alias", image_alias, "alias ALIAS IMAGE", "admins: another name for an image",
	 "", "ALIAS IMAGE"},
	{"dealias", image_dealias, "dealias ALIAS", "admins: remove an alias",
	 "", "ALIAS"},
	{"rm", image_rm, "rm IMAGE", "remove an image from every node (admins; owners of private images)",
	 "", "IMAGE"},
	{"rescan", image_rescan, "rescan [--json]", "admins: ask every node for its images again",
	 "--json", ""},
	{"pull", cli_image_pull, "pull IMAGE [--node NODE]", "pull an image from the cluster registry onto the nodes",
	 "--node=NODE --json", "IMAGE"},
};

const struct cli_noun cli_image_noun = {
	.name = "image",
	.verbs = image_verbs,
	.n_verbs = CLI_NVERBS(image_verbs),
	.usage = "usage: tessera image <command> [options]\n\ncommands:\n",
	.usage_end = "\nIMAGE is a reference such as tessera/python:3.11. Run 'tessera image <command> --help'.\n",
	.missing = "missing command",
	.help_verb = true,
};

int cmd_image(int argc, char **argv)
{
	return cli_dispatch(&cli_image_noun, argc, argv);
}
