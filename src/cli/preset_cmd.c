/* `tessera preset ...`: the resource presets the launcher offers
 * (/v1/presets; docs/admin.md, "Resource presets"). Everyone lists them;
 * admins create, change and remove them. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/table.h"
#include "common/apiclient.h"
#include "common/units.h"

#define PRESET_USAGE \
	"usage: tessera preset COMMAND ...\n" \
	"\n" \
	"Resource presets: named amounts of CPU, memory and fGPU that the launcher\n" \
	"offers (Small, Medium, One GPU on a new install), for every resource group\n" \
	"or for one. Everyone lists them; admins create, change and remove them.\n" \
	"\n"
#define PRESET_USAGE_END \
	"\n" \
	"Options (create, set):\n" \
	"  --cpu X       CPU cores (0.01 to 1024; create needs it)\n" \
	"  --mem SIZE    memory, as 8g or 512m (create needs it)\n" \
	"  --fgpu X      fractional GPUs (default 0)\n" \
	"  --group G     offered for resource group G only; 'all' (set): every group\n"

struct presopts {
	bool json;
	const char *cpu, *mem, *fgpu, *group;
	const char *name;
};

enum { O_JSON = 1, O_CPU, O_MEM, O_FGPU, O_GROUP };
#define BIT(x) (1u << (x))
#define SETTINGS (BIT(O_CPU) | BIT(O_MEM) | BIT(O_FGPU) | BIT(O_GROUP))

static int parse(const char *verb, int argc, char **argv, unsigned allowed, bool named, const char *usage,
		 struct presopts *o, bool *done)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, O_JSON},
		{"cpu", required_argument, NULL, O_CPU},
		{"mem", required_argument, NULL, O_MEM},
		{"fgpu", required_argument, NULL, O_FGPU},
		{"group", required_argument, NULL, O_GROUP},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	*done = true;
	memset(o, 0, sizeof(*o));
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		if (c == 'h') {
			printf("usage: tessera preset %s\n%s", usage, allowed & SETTINGS ? PRESET_USAGE_END : "");
			return CLI_EXIT_OK;
		}
		if (c == '?' || c == ':' || !(allowed & (1u << c)))
			return cli_usage_fail("preset", "%s: option '%s' is unknown or needs a value", verb,
					      argv[optind - 1]);
		switch (c) {
		case O_JSON: o->json = true; break;
		case O_CPU: o->cpu = optarg; break;
		case O_MEM: o->mem = optarg; break;
		case O_FGPU: o->fgpu = optarg; break;
		case O_GROUP: o->group = optarg; break;
		}
	}
	if (argc - optind != (named ? 1 : 0))
		return cli_usage_fail("preset", "%s needs %s", verb, usage);
	o->name = named ? argv[optind] : NULL;
	*done = false;
	return CLI_EXIT_OK;
}

/* The options' settings into body, each amount checked here so that a
 * typo fails before any request. */
static int settings_body(const struct presopts *o, bool create, json_t *body)
{
	struct terr err = {0};
	int64_t v;
	char num[32];
	json_t *res = json_object();
	if (o->cpu) {
		if (units_parse_milli(o->cpu, &v, &err) < 0) {
			json_decref(res);
			return cli_usage_fail("preset", "--cpu: %s", err.msg);
		}
		units_format_milli(v, num, sizeof(num));
		json_object_set_new(res, "cpu", json_string(num));
	}
	if (o->mem) {
		if (units_parse_size(o->mem, &v, &err) < 0) {
			json_decref(res);
			return cli_usage_fail("preset", "--mem: %s", err.msg);
		}
		json_object_set_new(res, "mem", json_integer(v));
	}
	if (o->fgpu) {
		if (units_parse_milli(o->fgpu, &v, &err) < 0) {
			json_decref(res);
			return cli_usage_fail("preset", "--fgpu: %s", err.msg);
		}
		units_format_milli(v, num, sizeof(num));
		json_object_set_new(res, "fgpu", json_string(num));
	}
	if (json_object_size(res))
		json_object_set(body, "resources", res);
	json_decref(res);
	if (o->group)
		json_object_set_new(body, "group", !create && !strcmp(o->group, "all") ? json_null()
									     : json_string(o->group));
	return CLI_EXIT_OK;
}

static char *preset_path(const char *name)
{
	char *esc = api_escape(name), *path = NULL;
	if (esc && asprintf(&path, "/v1/presets/%s", esc) < 0)
		path = NULL;
	free(esc);
	return path;
}

static const char *str(json_t *o, const char *k)
{
	return cli_json_str(o, k, "");
}

/* "4", "8 GiB", "0.5", "all" for a preset's columns. */
static void columns(json_t *p, char cpu[32], char mem[32], char fgpu[32], const char **group)
{
	json_t *r = json_object_get(p, "resources");
	units_format_milli(cli_json_milli(json_object_get(r, "cpu")), cpu, 32);
	units_format_size(json_integer_value(json_object_get(r, "mem")), mem, 32);
	units_format_milli(cli_json_milli(json_object_get(r, "fgpu")), fgpu, 32);
	json_t *g = json_object_get(p, "group");
	*group = json_is_string(g) ? json_string_value(g) : "all";
}

static void print_preset(json_t *p)
{
	char cpu[32], mem[32], fgpu[32];
	const char *group;
	columns(p, cpu, mem, fgpu, &group);
	printf("preset %s: %s CPU, %s, %s fGPU, group %s\n", str(p, "name"), cpu, mem, fgpu, group);
}

static int preset_ls(int argc, char **argv)
{
	struct presopts o;
	bool done;
	int rc = parse("ls", argc, argv, BIT(O_JSON), false, "ls [--json]", &o, &done);
	if (done)
		return rc;
	json_t *reply = NULL;
	rc = cli_call("GET", "/v1/presets", NULL, &reply);
	json_t *presets = json_object_get(reply, "presets");
	if (rc == CLI_EXIT_OK && o.json) {
		cli_print_json(presets);
	} else if (rc == CLI_EXIT_OK) {
		static const char *const h[] = {"name", "cpu", "mem", "fgpu", "group"};
		struct cli_table *t = cli_table_new(5, h);
		size_t i;
		json_t *p;
		json_array_foreach(presets, i, p) {
			char cpu[32], mem[32], fgpu[32];
			const char *group;
			columns(p, cpu, mem, fgpu, &group);
			const char *row[] = {str(p, "name"), cpu, mem, fgpu, group};
			if (t && cli_table_add(t, row) < 0) {
				cli_table_free(t);
				t = NULL;
			}
		}
		if (!t)
			rc = cli_fail("out of memory");
		else
			cli_table_print(t, stdout);
		cli_table_free(t);
	}
	json_decref(reply);
	return rc;
}

/* create NAME and set NAME: the same options, POST or PATCH. */
static int preset_write(int argc, char **argv, bool create)
{
	struct presopts o;
	bool done;
	const char *verb = create ? "create" : "set";
	int rc = parse(verb, argc, argv, BIT(O_JSON) | SETTINGS, true,
		       create ? "create NAME --cpu X --mem SIZE [--fgpu X] [--group G] [--json]"
			      : "set NAME [--cpu X] [--mem SIZE] [--fgpu X] [--group G|all] [--json]",
		       &o, &done);
	if (done)
		return rc;
	if (create && (!o.cpu || !o.mem))
		return cli_usage_fail("preset", "create needs --cpu and --mem (e.g. tessera preset create Large "
				      "--cpu 8 --mem 32g)");
	json_t *body = json_object(), *reply = NULL;
	if (create)
		json_object_set_new(body, "name", json_string(o.name));
	rc = settings_body(&o, create, body);
	if (rc == CLI_EXIT_OK && !create && json_object_size(body) == 0)
		rc = cli_usage_fail("preset", "set: nothing to change (see 'tessera preset set --help')");
	char *path = create ? strdup("/v1/presets") : preset_path(o.name);
	if (rc == CLI_EXIT_OK)
		rc = cli_call(create ? "POST" : "PATCH", path, body, &reply);
	if (rc == CLI_EXIT_OK && o.json)
		cli_print_json(json_object_get(reply, "preset"));
	else if (rc == CLI_EXIT_OK)
		print_preset(json_object_get(reply, "preset"));
	free(path);
	json_decref(body);
	json_decref(reply);
	return rc;
}

static int preset_create(int argc, char **argv)
{
	return preset_write(argc, argv, true);
}

static int preset_set(int argc, char **argv)
{
	return preset_write(argc, argv, false);
}

static int preset_rm(int argc, char **argv)
{
	struct presopts o;
	bool done;
	int rc = parse("rm", argc, argv, 0, true, "rm NAME", &o, &done);
	if (done)
		return rc;
	char *path = preset_path(o.name);
	json_t *reply = NULL;
	rc = cli_call("DELETE", path, NULL, &reply);
	if (rc == CLI_EXIT_OK)
		printf("preset %s removed\n", o.name);
	free(path);
	json_decref(reply);
	return rc;
}

static const struct cli_verb preset_verbs[] = {
	{"ls", preset_ls, "ls [--json]", "the presets the launcher offers", "--json", ""},
	{"create", preset_create, "create NAME [options]",
	 "a new preset: --cpu and --mem, maybe --fgpu, --group (admins)",
	 "--cpu=X --mem=SIZE --fgpu=X --group=G --json", "NAME"},
	{"set", preset_set, "set NAME [options]", "change a preset's amounts or group (admins)",
	 "--cpu=X --mem=SIZE --fgpu=X --group=G --json", "NAME"},
	{"rm", preset_rm, "rm NAME", "remove a preset (admins)", "", "NAME"},
};

const struct cli_noun cli_preset_noun = {
	.name = "preset",
	.verbs = preset_verbs,
	.n_verbs = CLI_NVERBS(preset_verbs),
	.usage = PRESET_USAGE,
	.usage_end = PRESET_USAGE_END,
	.missing = "missing command (try 'tessera preset ls')",
	.help_verb = true,
};

int cmd_preset(int argc, char **argv)
{
	return cli_dispatch(&cli_preset_noun, argc, argv);
}
