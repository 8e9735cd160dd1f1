/* `tessera usage summary`: allocated CPU-, memory- and fGPU-hours and
 * sessions started per day and per user or project, from GET
 * /v1/usage/summary (docs/user-guide.md, "Usage statistics"); the same
 * figures the web UI's Statistics page shows. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/table.h"
#include "common/apiclient.h"
#include "manager/usage_summary.h"

#define USAGE_USAGE \
	"usage: tessera usage summary [--from DATE] [--to DATE] [--by user|project]\n" \
	"                             [--user EMAIL] [--project NAME] [--csv|--json]\n" \
	"\n" \
	"summary lists, per day (UTC) and per user or project, the CPU-hours,\n" \
	"memory-GiB-hours and fGPU-hours the sessions held, and the sessions\n" \
	"started. Hours are allocated, not measured: a session holds what it asked\n" \
	"for from its first start until it ends, busy or idle. Admins see everyone's\n" \
	"(--user and --project narrow it); others their own.\n" \
	"  --from DATE   first day, YYYY-MM-DD (default: 29 days before --to)\n" \
	"  --to DATE     last day, YYYY-MM-DD (default: today)\n" \
	"  --by KEY      user (default) or project\n" \
	"  --user EMAIL  only this user's sessions (admins)\n" \
	"  --project NAME  only this project's sessions\n" \
	"  --csv         print CSV (a header line, then a line per row)\n" \
	"  --json        print the API's JSON\n"

/* Appends "&name=escaped value" to the path in *p (realloc'd); -1 when
 * out of memory. */
static int add_param(char **p, const char *name, const char *value)
{
	if (!value)
		return 0;
	char *esc = api_escape(value);
	if (!esc)
		return -1;
	size_t len = strlen(*p) + strlen(name) + strlen(esc) + 3;
	char *np = realloc(*p, len);
	if (!np) {
		free(esc);
		return -1;
	}
	strcat(np, strchr(np, '?') ? "&" : "?");
	strcat(np, name);
	strcat(np, "=");
	strcat(np, esc);
	free(esc);
	*p = np;
	return 0;
}

/* The answer's rows back into usum_rows, so that --csv prints what the
 * API's format=csv gives (usum_csv), byte for byte. */
static int print_csv(json_t *reply)
{
	struct usum_query q = {.by = strcmp(cli_json_str(reply, "by", "user"), "project") ? USUM_BY_USER
											   : USUM_BY_PROJECT};
	const char *kn = q.by == USUM_BY_USER ? "user" : "project";
	json_t *arr = json_object_get(reply, "rows");
	size_t n = json_array_size(arr);
	struct usum_row *rows = calloc(n ? n : 1, sizeof(*rows));
	if (!rows)
		return cli_fail("out of memory");
	size_t i;
	json_t *x;
	json_array_foreach(arr, i, x) {
		struct terr err = {0};
		if (usum_parse_day(cli_json_str(x, "day", ""), &rows[i].day_ms, &err) < 0) {
			free(rows);
			return cli_fail("the server's answer has a row without a day: %s", err.msg);
		}
		snprintf(rows[i].key, sizeof(rows[i].key), "%s", cli_json_str(x, kn, ""));
		rows[i].cpu_h = json_number_value(json_object_get(x, "cpu_hours"));
		rows[i].mem_gib_h = json_number_value(json_object_get(x, "mem_gib_hours"));
		rows[i].fgpu_h = json_number_value(json_object_get(x, "fgpu_hours"));
		rows[i].started = cli_json_int(json_object_get(x, "sessions_started"));
	}
	char *csv = usum_csv(&q, rows, n);
	free(rows);
	if (!csv)
		return cli_fail("out of memory");
	fputs(csv, stdout);
	free(csv);
	return CLI_EXIT_OK;
}

static int add_figures(struct cli_table *t, const char *day, const char *key, json_t *x)
{
	char cpu[32], mem[32], fgpu[32], started[32];
	snprintf(cpu, sizeof(cpu), "%.2f", json_number_value(json_object_get(x, "cpu_hours")));
	snprintf(mem, sizeof(mem), "%.2f", json_number_value(json_object_get(x, "mem_gib_hours")));
	snprintf(fgpu, sizeof(fgpu), "%.2f", json_number_value(json_object_get(x, "fgpu_hours")));
	snprintf(started, sizeof(started), "%lld", (long long)cli_json_int(json_object_get(x, "sessions_started")));
	const char *row[] = {day, key, cpu, mem, fgpu, started};
	return cli_table_add(t, row);
}

static int usage_summary(int argc, char **argv)
{
	static const struct option opts[] = {
		{"from", required_argument, NULL, 'f'},
		{"to", required_argument, NULL, 't'},
		{"by", required_argument, NULL, 'b'},
		{"user", required_argument, NULL, 'u'},
		{"project", required_argument, NULL, 'p'},
		{"csv", no_argument, NULL, 'c'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *from = NULL, *to = NULL, *by = NULL, *user = NULL, *project = NULL;
	bool csv = false, as_json = false;
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		switch (c) {
		case 'h':
			fputs(USAGE_USAGE, stdout);
			return CLI_EXIT_OK;
		case 'f': from = optarg; break;
		case 't': to = optarg; break;
		case 'b': by = optarg; break;
		case 'u': user = optarg; break;
		case 'p': project = optarg; break;
		case 'c': csv = true; break;
		case 'j': as_json = true; break;
		default:
			return optopt ? cli_usage_fail("usage summary", "option '%s' needs a value", argv[optind - 1])
				      : cli_usage_fail("usage summary", "option '%s' is unknown", argv[optind - 1]);
		}
	}
	if (optind != argc)
		return cli_usage_fail("usage summary", "unexpected argument '%s'", argv[optind]);
	if (csv && as_json)
		return cli_usage_fail("usage summary", "give --csv or --json, not both");
	/* The dates and --by are checked here too, so that a typo gets the
	 * same words without a round trip (the server checks them again). */
	struct usum_query_in in = {.from = from, .to = to, .by = by, .user = user, .project = project};
	struct usum_query q;
	struct terr err = {0};
	if (usum_query_parse(&in, (int64_t)time(NULL) * 1000, &q, &err) < 0)
		return cli_usage_fail("usage summary", "%s", err.msg);
	char *path = strdup("/v1/usage/summary");
	if (!path || add_param(&path, "from", from) < 0 || add_param(&path, "to", to) < 0 ||
	    add_param(&path, "by", by) < 0 || add_param(&path, "user", user) < 0 ||
	    add_param(&path, "project", project) < 0) {
		free(path);
		return cli_fail("out of memory");
	}
	json_t *reply = NULL;
	int rc = cli_call("GET", path, NULL, &reply);
	free(path);
	if (rc != CLI_EXIT_OK) {
		json_decref(reply);
		return rc;
	}
	if (as_json) {
		cli_print_json(reply);
	} else if (csv) {
		rc = print_csv(reply);
	} else {
		const char *kn = q.by == USUM_BY_USER ? "user" : "project";
		static const char *const hu[] = {"day", "user", "cpu-h", "mem-GiB-h", "fGPU-h", "started"};
		static const char *const hp[] = {"day", "project", "cpu-h", "mem-GiB-h", "fGPU-h", "started"};
		struct cli_table *t = cli_table_new(6, q.by == USUM_BY_USER ? hu : hp);
		size_t i;
		json_t *x;
		json_array_foreach(json_object_get(reply, "rows"), i, x)
			if (t && add_figures(t, cli_json_str(x, "day", ""), cli_json_str(x, kn, ""), x) < 0) {
				cli_table_free(t);
				t = NULL;
			}
		json_array_foreach(json_object_get(reply, "totals"), i, x)
			if (t && add_figures(t, "total", cli_json_str(x, kn, ""), x) < 0) {
				cli_table_free(t);
				t = NULL;
			}
		if (!t) {
			rc = cli_fail("out of memory");
		} else {
			printf("%s to %s (UTC days; allocated hours)\n", cli_json_str(reply, "from", ""),
			       cli_json_str(reply, "to", ""));
			if (!json_array_size(json_object_get(reply, "rows")))
				printf("no session held resources in this window\n");
			else
				cli_table_print(t, stdout);
		}
		cli_table_free(t);
	}
	json_decref(reply);
	return rc;
}

static const struct cli_verb usage_verbs[] = {
	{"summary", usage_summary, NULL, NULL,   /* USAGE_USAGE describes it */
	 "--from=DATE --to=DATE --by=user|project --user=EMAIL --project=NAME --csv --json", ""},
};

const struct cli_noun cli_usage_noun = {
	.name = "usage",
	.verbs = usage_verbs,
	.n_verbs = CLI_NVERBS(usage_verbs),
	.usage = USAGE_USAGE,
	.missing = "missing command (try 'tessera usage summary')",
	.help_verb = true,
};

int cmd_usage(int argc, char **argv)
{
	return cli_dispatch(&cli_usage_noun, argc, argv);
}
