/* `tessera queue`: the pending queue (GET /v1/queue), one session's
 * scheduling history (GET /v1/sessions/{ref}/scheduling), and an admin's
 * move (POST /v1/queue/{ref}/move) and cancel (DELETE /v1/sessions/{ref})
 * of a waiting session. docs/scheduling.md, "The queue and its history". */
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
#include "common/units.h"

#define QUEUE_USAGE \
	"usage: tessera queue ls [--json]\n" \
	"       tessera queue history SESSION [--owner EMAIL] [--json]\n" \
	"       tessera queue move SESSION (--priority N | --top) [--owner EMAIL]\n" \
	"       tessera queue cancel SESSION [--owner EMAIL]\n" \
	"\n" \
	"ls lists the PENDING sessions in the order the scheduler's last pass\n" \
	"tried them (POS 1 is tried first), with priority, how long each has\n" \
	"waited and why it has not started; admins see everyone's, others their\n" \
	"own. history shows each distinct reason the passes gave for not starting\n" \
	"SESSION, with when it was first and last given and by how many passes.\n" \
	"move (admins) sets a waiting session's priority (0..100, higher first),\n" \
	"or with --top one above every other waiting session's; cancel removes\n" \
	"it from the queue (as tessera session rm). SESSION is a name or an id;\n" \
	"another user's waiting session is found by name in the queue (--owner\n" \
	"when two users' sessions share it).\n" \
	"  --json   print JSON\n"

static int queue_fail_usage(const char *verb, const char *opt)
{
	return cli_usage_fail(verb, "option '%s' is unknown", opt);
}

/* Seconds since an RFC 3339 time, "-" when absent or unreadable. */
static void waited(json_t *o, const char *key, char *buf, size_t n)
{
	time_t t;
	const char *s = cli_json_str(o, key, "");
	if (!*s || cli_parse_time(s, &t) < 0) {
		snprintf(buf, n, "-");
		return;
	}
	cli_format_age((int64_t)(time(NULL) - t), buf, n);
}

static void res_words(json_t *r, char *buf, size_t n)
{
	char mem[32], fgpu[32];
	units_format_size(cli_json_int(json_object_get(r, "mem")), mem, sizeof(mem));
	cli_format_fgpu(cli_json_milli(json_object_get(r, "fgpu")), fgpu, sizeof(fgpu));
	double cpu = (double)cli_json_milli(json_object_get(r, "cpu")) / 1000.0;
	snprintf(buf, n, "%g CPU, %s%s%s", cpu, mem, strcmp(fgpu, "-") ? ", " : "", strcmp(fgpu, "-") ? fgpu : "");
}

static int queue_ls(int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	bool as_json = false;
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		if (c == 'h') {
			fputs(QUEUE_USAGE, stdout);
			return CLI_EXIT_OK;
		}
		if (c != 'j')
			return queue_fail_usage("queue ls", argv[optind - 1]);
		as_json = true;
	}
	if (optind != argc)
		return cli_usage_fail("queue ls", "unexpected argument '%s'", argv[optind]);
	json_t *reply = NULL;
	int rc = cli_call("GET", "/v1/queue", NULL, &reply);
	if (rc != CLI_EXIT_OK) {
		json_decref(reply);
		return rc;
	}
	json_t *list = json_object_get(reply, "sessions");
	if (as_json) {
		cli_print_json(reply);
	} else if (!json_is_array(list)) {
		rc = cli_fail("unexpected answer from the manager: no 'sessions' array");
	} else {
		static const char *const h[] = {"pos", "name", "owner", "priority", "waited", "resources", "reason"};
		struct cli_table *t = cli_table_new(7, h);
		size_t i;
		json_t *e;
		json_array_foreach(list, i, e) {
			char pos[24], prio[24], age[24], res[96], reason[160];
			json_t *p = json_object_get(e, "position");
			snprintf(pos, sizeof(pos), json_is_integer(p) ? "%" JSON_INTEGER_FORMAT : "-",
				 json_integer_value(p));
			snprintf(prio, sizeof(prio), "%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(e, "priority")));
			waited(e, "created_at", age, sizeof(age));
			res_words(json_object_get(e, "resources"), res, sizeof(res));
			cli_shorten(cli_json_str(e, "reason", ""), 90, reason, sizeof(reason));
			const char *cells[] = {pos, cli_json_str(e, "name", ""), cli_json_str(e, "owner", ""), prio, age, res,
					       reason};
			if (t)
				cli_table_add(t, cells);
		}
		if (!t) {
			rc = cli_fail("out of memory");
		} else if (json_array_size(list) == 0) {
			printf("no session is waiting (%s queue)\n", cli_json_str(reply, "queue_policy", "?"));
		} else {
			cli_table_print(t, stdout);
			json_int_t all = json_integer_value(json_object_get(reply, "pending"));
			if ((size_t)all > json_array_size(list))
				printf("\n%zu of the %" JSON_INTEGER_FORMAT " waiting sessions are yours\n",
				       json_array_size(list), all);
		}
		cli_table_free(t);
	}
	json_decref(reply);
	return rc;
}

/* SESSION as the API should get it: the id of the waiting session of that
 * name in the queue (of owner, when given), else SESSION itself (the
 * caller's own name, or an id). Into out; CLI_EXIT_OK or the exit code
 * after saying why. */
static int resolve(const char *verb, const char *ref, const char *owner, char *out, size_t n)
{
	json_t *reply = NULL;
	snprintf(out, n, "%s", ref);
	int rc = cli_call("GET", "/v1/queue", NULL, &reply);
	if (rc != CLI_EXIT_OK) {
		json_decref(reply);
		return rc;
	}
	size_t i, found = 0;
	json_t *e;
	char owners[256] = "";
	json_array_foreach(json_object_get(reply, "sessions"), i, e) {
		if (strcmp(cli_json_str(e, "name", ""), ref) || (owner && strcmp(cli_json_str(e, "owner", ""), owner)))
			continue;
		if (found++ == 0)
			snprintf(out, n, "%s", cli_json_str(e, "id", ref));
		size_t l = strlen(owners);
		snprintf(owners + l, sizeof(owners) - l, "%s%s", l ? ", " : "", cli_json_str(e, "owner", ""));
	}
	json_decref(reply);
	if (found > 1)
		return cli_usage_fail(verb, "more than one waiting session is named '%s' (owners %s): give --owner EMAIL",
				      ref, owners);
	if (!found && owner)
		return cli_fail("%s has no waiting session named '%s' (tessera queue ls lists the queue)", owner, ref);
	return CLI_EXIT_OK;
}

static int queue_history(int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{"owner", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	bool as_json = false;
	const char *owner = NULL;
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		if (c == 'h') {
			fputs(QUEUE_USAGE, stdout);
			return CLI_EXIT_OK;
		} else if (c == 'j') {
			as_json = true;
		} else if (c == 'o') {
			owner = optarg;
		} else {
			return c == ':' || (optind > 0 && optind <= argc && !strncmp(argv[optind - 1], "--owner", 7))
				       ? cli_usage_fail("queue history", "--owner needs an email")
				       : queue_fail_usage("queue history", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return cli_usage_fail("queue history", "which session? usage: tessera queue history SESSION");
	if (optind + 1 < argc)
		return cli_usage_fail("queue history", "unexpected argument '%s'", argv[optind + 1]);
	char ref[256];
	int rc = resolve("queue history", argv[optind], owner, ref, sizeof(ref));
	if (rc != CLI_EXIT_OK)
		return rc;
	char *path = cli_session_path(ref, NULL, "/scheduling");
	json_t *reply = NULL;
	rc = cli_call("GET", path, NULL, &reply);
	free(path);
	if (rc != CLI_EXIT_OK) {
		json_decref(reply);
		return rc;
	}
	if (as_json) {
		cli_print_json(reply);
		json_decref(reply);
		return CLI_EXIT_OK;
	}
	json_t *pos = json_object_get(reply, "position");
	printf("session %s (%s): %s, priority %" JSON_INTEGER_FORMAT, cli_json_str(reply, "name", ""),
	       cli_json_str(reply, "owner", ""), cli_json_str(reply, "status", ""),
	       json_integer_value(json_object_get(reply, "priority")));
	if (json_is_integer(pos))
		printf(", position %" JSON_INTEGER_FORMAT " in the queue", json_integer_value(pos));
	printf("; %" JSON_INTEGER_FORMAT " scheduling passes looked at it\n",
	       json_integer_value(json_object_get(reply, "passes")));
	json_t *hist = json_object_get(reply, "history");
	if (!json_array_size(hist)) {
		printf("no pass has looked at it since the manager started\n");
		json_decref(reply);
		return CLI_EXIT_OK;
	}
	printf("\n");
	static const char *const h[] = {"first", "last", "passes", "reason"};
	struct cli_table *t = cli_table_new(4, h);
	size_t i;
	json_t *e;
	json_array_foreach(hist, i, e) {
		char passes[24], first[24], last[24];
		snprintf(passes, sizeof(passes), "%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(e, "passes")));
		waited(e, "first", first, sizeof(first));
		waited(e, "last", last, sizeof(last));
		strncat(first, " ago", sizeof(first) - strlen(first) - 1);
		strncat(last, " ago", sizeof(last) - strlen(last) - 1);
		const char *cells[] = {first, last, passes, cli_json_str(e, "reason", "")};
		if (t)
			cli_table_add(t, cells);
	}
	if (t)
		cli_table_print(t, stdout);
	else
		rc = cli_fail("out of memory");
	cli_table_free(t);
	json_decref(reply);
	return rc;
}

/* move and cancel: SESSION [--owner EMAIL], move with --priority N | --top. */
static int queue_change(int argc, char **argv, bool move)
{
	const char *verb = move ? "queue move" : "queue cancel";
	static const struct option opts[] = {
		{"priority", required_argument, NULL, 'p'},
		{"top", no_argument, NULL, 't'},
		{"owner", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *owner = NULL;
	long priority = -1;
	bool top = false;
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, ":h", opts, NULL)) != -1;) {
		if (c == 'h') {
			fputs(QUEUE_USAGE, stdout);
			return CLI_EXIT_OK;
		} else if (c == 'o') {
			owner = optarg;
		} else if (c == 'p' && move) {
			char *end = NULL;
			priority = strtol(optarg, &end, 10);
			if (!*optarg || *end || priority < 0 || priority > 100)
				return cli_usage_fail(verb, "--priority must be a whole number from 0 to 100, not '%s'",
						      optarg);
		} else if (c == 't' && move) {
			top = true;
		} else if (c == ':') {
			return cli_usage_fail(verb, "%s needs a value", argv[optind - 1]);
		} else {
			return queue_fail_usage(verb, argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return cli_usage_fail(verb, "which session? usage: tessera %s SESSION%s", verb,
				      move ? " (--priority N | --top)" : "");
	if (optind + 1 < argc)
		return cli_usage_fail(verb, "unexpected argument '%s'", argv[optind + 1]);
	if (move && top == (priority >= 0))
		return cli_usage_fail(verb, "give one of --priority N (0..100, higher first) or --top");
	char ref[256];
	int rc = resolve(verb, argv[optind], owner, ref, sizeof(ref));
	if (rc != CLI_EXIT_OK)
		return rc;
	json_t *reply = NULL;
	if (move) {
		char *esc = api_escape(ref), path[600];
		if (!esc)
			return cli_fail("out of memory");
		snprintf(path, sizeof(path), "/v1/queue/%s/move", esc);
		free(esc);
		json_t *body = top ? json_pack("{s:b}", "top", 1) : json_pack("{s:I}", "priority", (json_int_t)priority);
		rc = cli_call("POST", path, body, &reply);
		json_decref(body);
		if (rc == CLI_EXIT_OK)
			printf("session %s: priority %" JSON_INTEGER_FORMAT " (was %" JSON_INTEGER_FORMAT ")\n",
			       cli_json_str(reply, "name", ref), json_integer_value(json_object_get(reply, "priority")),
			       json_integer_value(json_object_get(reply, "previous_priority")));
	} else {
		char *path = cli_session_path(ref, NULL, "");
		rc = cli_call("DELETE", path, NULL, &reply);
		free(path);
		if (rc == CLI_EXIT_OK)
			printf("session %s: %s\n", cli_json_str(reply, "name", ref), cli_json_str(reply, "status", ""));
	}
	json_decref(reply);
	return rc;
}

static int queue_move(int argc, char **argv)
{
	return queue_change(argc, argv, true);
}

static int queue_cancel(int argc, char **argv)
{
	return queue_change(argc, argv, false);
}

static const struct cli_verb queue_verbs[] = {
	{"ls", queue_ls, NULL, NULL,   /* QUEUE_USAGE describes them */
	 "--json", ""},
	{"history", queue_history, NULL, NULL,
	 "--owner=EMAIL --json", "SESSION"},
	{"move", queue_move, NULL, NULL,
	 "--priority=N --top --owner=EMAIL", "SESSION"},
	{"cancel", queue_cancel, NULL, NULL,
	 "--owner=EMAIL", "SESSION"},
};

const struct cli_noun cli_queue_noun = {
	.name = "queue",
	.verbs = queue_verbs,
	.n_verbs = CLI_NVERBS(queue_verbs),
	.usage = QUEUE_USAGE,
	.missing = "missing command (try 'tessera queue ls')",
	.help_verb = true,
};

int cmd_queue(int argc, char **argv)
{
	return cli_dispatch(&cli_queue_noun, argc, argv);
}
