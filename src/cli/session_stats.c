/* `tessera session stats NAME [--watch] [--json]`: a session's live usage
 * (GET /v1/sessions/{ref}/stats), once or refreshed like `docker stats`. */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/table.h"
#include "cli/views.h"
#include "common/units.h"

#define STATS_USAGE \
	"usage: tessera session stats NAME [--watch] [--json] [--owner EMAIL]\n" \
	"\n" \
	"Shows the session's live usage, sampled by its node every few seconds:\n" \
	"CPU (cores, and percent of its CPU allocation), memory against its\n" \
	"limit, each GPU's utilisation and memory (its share of the device),\n" \
	"network received/sent and block I/O read/written since it started.\n" \
	"\n" \
	"  --watch         refresh at every new sample until Ctrl-C\n" \
	"  --json          print the answer as JSON (with --watch: one line per sample)\n" \
	"  --owner EMAIL   NAME is a session of this user (admins)\n"

static double num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : 0;
}

/* "RX / TX" of two byte counts. */
static void pair_sizes(json_t *o, const char *a, const char *b, char *buf, size_t n)
{
	char x[32], y[32];
	units_format_size(cli_json_int(json_object_get(o, a)), x, sizeof(x));
	units_format_size(cli_json_int(json_object_get(o, b)), y, sizeof(y));
	snprintf(buf, n, "%s / %s", x, y);
}

struct cli_table *cli_stats_table(const char *name, json_t *cur)
{
	static const char *const hdr[] = {"name", "cpu", "cpu %", "mem / limit", "mem %", "gpu", "net rx / tx",
					  "block r / w"};
	struct cli_table *t = cli_table_new(8, hdr);
	if (!t)
		return NULL;
	if (!json_is_object(cur)) {
		const char *row[] = {name, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
		if (cli_table_add(t, row) < 0) {
			cli_table_free(t);
			return NULL;
		}
		return t;
	}
	char cores[32], pct[32], mem[80], mpct[32], gpu[512] = "", net[80], blk[80], a[32], b[32];
	snprintf(cores, sizeof(cores), "%.2f", num(cur, "cpu_cores"));
	snprintf(pct, sizeof(pct), "%.1f%%", num(cur, "cpu_pct"));
	int64_t mb = cli_json_int(json_object_get(cur, "mem_bytes")), ml = cli_json_int(json_object_get(cur, "mem_limit_bytes"));
	units_format_size(mb, a, sizeof(a));
	units_format_size(ml, b, sizeof(b));
	snprintf(mem, sizeof(mem), "%s / %s", a, ml > 0 ? b : "-");
	if (ml > 0)
		snprintf(mpct, sizeof(mpct), "%.1f%%", (double)mb * 100.0 / (double)ml);
	else
		snprintf(mpct, sizeof(mpct), "-");
	/* Per device: "0: 25.0% 1 GiB/4 GiB"; utilisation "?" where the
	 * node does not measure it. */
	size_t i;
	json_t *g;
	json_array_foreach(json_object_get(cur, "gpus"), i, g) {
		char item[160], util[16];
		json_t *u = json_object_get(g, "util_pct");
		if (json_is_number(u))
			snprintf(util, sizeof(util), "%.1f%%", json_number_value(u));
		else
			snprintf(util, sizeof(util), "?");
		units_format_size(cli_json_int(json_object_get(g, "mem_bytes")), a, sizeof(a));
		units_format_size(cli_json_int(json_object_get(g, "mem_limit_bytes")), b, sizeof(b));
		snprintf(item, sizeof(item), "%s%" PRId64 ": %s %s/%s", i ? ", " : "",
			 cli_json_int(json_object_get(g, "index")), util, a, b);
		strncat(gpu, item, sizeof(gpu) - strlen(gpu) - 1);
	}
	pair_sizes(cur, "net_rx_bytes", "net_tx_bytes", net, sizeof(net));
	pair_sizes(cur, "blk_read_bytes", "blk_write_bytes", blk, sizeof(blk));
	const char *row[] = {name, cores, pct, mem, mpct, gpu[0] ? gpu : "-", net, blk};
	if (cli_table_add(t, row) < 0) {
		cli_table_free(t);
		return NULL;
	}
	return t;
}

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* Sleeps ms in steps, false once Ctrl-C was pressed. */
static bool nap(int ms)
{
	for (; ms > 0 && !interrupted; ms -= 100)
		usleep((useconds_t)(ms < 100 ? ms : 100) * 1000);
	return !interrupted;
}

int cmd_session_stats(int argc, char **argv)
{
	static const struct option opts[] = {
		{"watch", no_argument, NULL, 'w'},
		{"json", no_argument, NULL, 'j'},
		{"owner", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	int watch = 0, as_json = 0;
	const char *owner = NULL;
	optind = 0;
	opterr = 0;
	for (int o; (o = getopt_long(argc, argv, "hwj", opts, NULL)) != -1;) {
		if (o == 'h') {
			fputs(STATS_USAGE, stdout);
			return CLI_EXIT_OK;
		} else if (o == 'w') {
			watch = 1;
		} else if (o == 'j') {
			as_json = 1;
		} else if (o == 'o') {
			owner = optarg;
		} else {
			return cli_usage_fail("session stats", "option '%s' is unknown or lacks its value",
					      argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return cli_usage_fail("session stats", "which session? usage: tessera session stats NAME");
	if (optind + 1 < argc)
		return cli_usage_fail("session stats", "unexpected argument '%s'", argv[optind + 1]);
	const char *ref = argv[optind];
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	int rc = CLI_EXIT_OK;
	if (cli_connect(&cfg, &c, &err) < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	if (watch) {
		struct sigaction sa = {.sa_handler = on_sigint};
		sigaction(SIGINT, &sa, NULL);
	}
	/* Without --watch, one answer with the whole history; with it, each
	 * refresh asks only for what is newer than the last sample shown. */
	int64_t last_t = -1;
	for (bool first = true; first || watch; first = false) {
		char suffix[64];
		snprintf(suffix, sizeof(suffix), "/stats?since=%" PRId64, watch ? (last_t < 0 ? INT64_C(0) : last_t) : INT64_C(0));
		char *path = cli_session_path(ref, owner, suffix);
		json_t *reply = NULL;
		if (!path) {
			rc = cli_fail("out of memory");
			break;
		}
		int call = api_call(&c, "GET", path, NULL, 15000, &reply, NULL, &err);
		free(path);
		if (call < 0) {
			if (interrupted)
				break;
			rc = cli_fail("%s", err.msg);
			break;
		}
		json_t *cur = json_object_get(reply, "current");
		int period = (int)cli_json_int(json_object_get(reply, "period_ms"));
		if (period <= 0)
			period = 5000;
		int64_t t = json_is_object(cur) ? cli_json_int(json_object_get(cur, "t")) : -1;
		if (!watch && as_json) {
			cli_print_json(reply);
		} else if (watch && as_json) {
			if (t > last_t) {
				char *line = json_dumps(cur, JSON_COMPACT);
				if (line)
					printf("%s\n", line);
				free(line);
				fflush(stdout);
			}
		} else if (!watch || t != last_t || first) {
			struct cli_table *tb = cli_stats_table(cli_json_str(reply, "session", ref), cur);
			if (!tb) {
				json_decref(reply);
				rc = cli_fail("out of memory");
				break;
			}
			if (watch && isatty(STDOUT_FILENO))
				fputs("\033[H\033[2J", stdout);   /* clear, as docker stats does */
			cli_table_print(tb, stdout);
			cli_table_free(tb);
			if (!json_is_object(cur) && !watch)
				fprintf(stderr, "tessera: no sample yet (the session is not RUNNING, or its node "
					"samples every %d s)\n", (period + 999) / 1000);
			fflush(stdout);
		}
		if (t > last_t)
			last_t = t;
		json_decref(reply);
		if (watch && !nap(period / 2 > 500 ? period / 2 : 500))
			break;
	}
out:
	cli_config_free(&cfg);
	return rc;
}
