/* `tessera image pull IMAGE [--node NODE]`: asks the manager to pull an
 * image from the cluster registry onto every alive node (or one), then
 * follows the pull: a progress bar per node on a terminal, a line per
 * change otherwise. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/image_cmd.h"

#define PULL_USAGE \
	"usage: tessera image pull IMAGE [--node NODE] [--json]\n" \
	"\n" \
	"Pulls IMAGE from the cluster registry (docs/images.md) onto every alive\n" \
	"node, or onto NODE only, and shows its progress.\n" \
	"\n" \
	"  --node NODE   the node to pull onto\n" \
	"  --json        print the finished pull as JSON\n"

#define PULL_BAR 30

/* "412 of 980 MB", or what the node is doing when no size is known. */
static void pull_words(json_t *n, char *buf, size_t size)
{
	long long cur = (long long)cli_json_int(json_object_get(n, "current"));
	long long total = (long long)cli_json_int(json_object_get(n, "total"));
	const char *st = cli_json_str(n, "status", "?");
	if (!strcmp(st, "failed"))
		snprintf(buf, size, "failed: %s", cli_json_str(n, "error", "?"));
	else if (total > 0 && total < 1000000)
		snprintf(buf, size, "%s %lld of %lld kB", st, (cur + 500) / 1000, (total + 500) / 1000);
	else if (total > 0)
		snprintf(buf, size, "%s %lld of %lld MB", st, (cur + 500000) / 1000000, (total + 500000) / 1000000);
	else
		snprintf(buf, size, "%s", st);
}

static void draw_bars(json_t *nodes, size_t drawn)
{
	/* Back over the bars drawn last time, then draw them again. */
	if (drawn)
		printf("\033[%zuA", drawn);
	size_t i;
	json_t *n;
	json_array_foreach(nodes, i, n) {
		long long cur = (long long)cli_json_int(json_object_get(n, "current"));
		long long total = (long long)cli_json_int(json_object_get(n, "total"));
		const char *st = cli_json_str(n, "status", "");
		int fill = !strcmp(st, "done") ? PULL_BAR : total > 0 ? (int)(cur * PULL_BAR / total) : 0;
		char bar[PULL_BAR + 1], words[600];
		for (int k = 0; k < PULL_BAR; k++)
			bar[k] = k < fill ? '#' : '.';
		bar[PULL_BAR] = '\0';
		pull_words(n, words, sizeof(words));
		printf("\r\033[K%-16s [%s] %s\n", cli_json_str(n, "node", "?"), bar, words);
	}
	fflush(stdout);
}

int cli_image_pull(int argc, char **argv)
{
	static const struct option opts[] = {
		{"node", required_argument, NULL, 'n'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	const char *node = NULL;
	int as_json = 0, c;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': node = optarg; break;
		case 'j': as_json = 1; break;
		case 'h': fputs(PULL_USAGE, stdout); return CLI_EXIT_OK;
		default: return cli_usage_fail("image pull", "option '%s' is unknown or needs a value", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return cli_usage_fail("image pull", "which image? usage: tessera image pull IMAGE");
	if (optind + 1 < argc)
		return cli_usage_fail("image pull", "unexpected argument '%s'", argv[optind + 1]);
	struct cli_config cfg = {0};
	struct api_client api;
	struct terr err = {0};
	json_t *resp = NULL, *pull = NULL;
	json_t *body = json_pack("{s:s}", "image", argv[optind]);
	if (node)
		json_object_set_new(body, "node", json_string(node));
	int rc = CLI_EXIT_OK;
	if (cli_connect(&cfg, &api, &err) < 0 || api_call(&api, "POST", "/v1/images/pull", body, 0, &resp, NULL, &err) < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	pull = json_incref(json_object_get(resp, "pull"));
	char path[128];
	snprintf(path, sizeof(path), "/v1/images/pulls/%s", cli_json_str(pull, "id", ""));
	bool tty = !as_json && isatty(STDOUT_FILENO);
	size_t drawn = 0;
	char *last = NULL;   /* plain output: the last lines printed */
	for (;;) {
		json_t *nodes = json_object_get(pull, "nodes");
		if (tty) {
			draw_bars(nodes, drawn);
			drawn = json_array_size(nodes);
		} else if (!as_json) {
			/* A line per node whose words changed: few lines in a log. */
			char *now = NULL;
			size_t len = 0;
			FILE *mem = open_memstream(&now, &len);
			size_t i;
			json_t *n;
			json_array_foreach(nodes, i, n) {
				char words[600];
				pull_words(n, words, sizeof(words));
				if (mem)
					fprintf(mem, "%s: %s\n", cli_json_str(n, "node", "?"), words);
			}
			if (mem)
				fclose(mem);
			if (now && (!last || strcmp(now, last))) {
				/* Only the lines that differ from last time. */
				char *save_a = NULL, *save_b = NULL;
				char *a = strdup(now), *b = last ? strdup(last) : NULL;
				char *la = a ? strtok_r(a, "\n", &save_a) : NULL;
				char *lb = b ? strtok_r(b, "\n", &save_b) : NULL;
				for (; la; la = strtok_r(NULL, "\n", &save_a), lb = lb ? strtok_r(NULL, "\n", &save_b) : NULL)
					if (!lb || strcmp(la, lb))
						printf("%s\n", la);
				free(a);
				free(b);
				fflush(stdout);
			}
			free(last);
			last = now;
		}
		if (json_is_true(json_object_get(pull, "done")))
			break;
		struct timespec ts = {0, 500 * 1000000L};
		nanosleep(&ts, NULL);
		json_t *r = NULL;
		if (api_call(&api, "GET", path, NULL, 30000, &r, NULL, &err) < 0) {
			rc = cli_fail("%s", err.msg);
			break;
		}
		json_decref(pull);
		pull = json_incref(json_object_get(r, "pull"));
		json_decref(r);
	}
	free(last);
	if (rc == CLI_EXIT_OK) {
		if (as_json)
			cli_print_json(pull);
		size_t i;
		json_t *n;
		json_array_foreach(json_object_get(pull, "nodes"), i, n)
			if (strcmp(cli_json_str(n, "status", ""), "done"))
				rc = CLI_EXIT_FAIL;
		if (rc != CLI_EXIT_OK)
			fprintf(stderr, "tessera: the pull of %s failed on some nodes\n", argv[optind]);
	}
out:
	json_decref(pull);
	json_decref(resp);
	json_decref(body);
	cli_config_free(&cfg);
	return rc;
}
