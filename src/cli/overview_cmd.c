/* tessera dashboard [--json]: the admin dashboard (GET /v1/dashboard),
 * what the web UI's Dashboard page shows; tessera about [--json]: the
 * version and the components' health (GET /v1/about), the About page's. */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/table.h"
#include "common/units.h"

/* --json and --help only: true to go on, *rc the exit code otherwise. */
static bool only_json(const char *cmd, const char *help, int argc, char **argv, bool *as_json, int *rc)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		if (c == 'h') {
			fputs(help, stdout);
			*rc = CLI_EXIT_OK;
			return false;
		}
		if (c != 'j') {
			*rc = cli_usage_fail(cmd, "option '%s' is unknown", argv[optind - 1]);
			return false;
		}
		*as_json = true;
	}
	if (optind != argc) {
		*rc = cli_usage_fail(cmd, "unexpected argument '%s'", argv[optind]);
		return false;
	}
	return true;
}

/* "used/capacity" of one resource of two {"cpu","mem","fgpu"} objects. */
static void pair(json_t *used, json_t *cap, const char *key, char *out, size_t n)
{
	char a[32], b[32];
	if (!strcmp(key, "mem")) {
		units_format_size(cli_json_int(json_object_get(used, key)), a, sizeof(a));
		units_format_size(cli_json_int(json_object_get(cap, key)), b, sizeof(b));
	} else {
		units_format_milli(cli_json_milli(json_object_get(used, key)), a, sizeof(a));
		units_format_milli(cli_json_milli(json_object_get(cap, key)), b, sizeof(b));
	}
	snprintf(out, n, "%s/%s", a, b);
}

static int print_table(struct cli_table *t, bool *oom)
{
	if (!t) {
		*oom = true;
		return -1;
	}
	cli_table_print(t, stdout);
	cli_table_free(t);
	return 0;
}

#define ADD(t, row) do { if ((t) && cli_table_add((t), (row)) < 0) { cli_table_free(t); (t) = NULL; } } while (0)

static void print_dashboard(json_t *d, bool *oom)
{
	json_t *tot = json_object_get(d, "totals");
	char cpu[72], mem[72], fgpu[72], a[32], b[32], c[32];
	pair(json_object_get(tot, "used"), json_object_get(tot, "capacity"), "cpu", cpu, sizeof(cpu));
	pair(json_object_get(tot, "used"), json_object_get(tot, "capacity"), "mem", mem, sizeof(mem));
	pair(json_object_get(tot, "used"), json_object_get(tot, "capacity"), "fgpu", fgpu, sizeof(fgpu));
	json_t *fr = json_object_get(tot, "free");
	units_format_milli(cli_json_milli(json_object_get(fr, "cpu")), a, sizeof(a));
	units_format_size(cli_json_int(json_object_get(fr, "mem")), b, sizeof(b));
	units_format_milli(cli_json_milli(json_object_get(fr, "fgpu")), c, sizeof(c));
	printf("nodes %" PRId64 " of %" PRId64 " alive; allocated cpu %s, mem %s, fgpu %s; free for new sessions: "
	       "cpu %s, mem %s, fgpu %s\n\n",
	       cli_json_int(json_object_get(tot, "nodes_alive")), cli_json_int(json_object_get(tot, "nodes")), cpu, mem,
	       fgpu, a, b, c);

	size_t i;
	json_t *x;
	printf("GPU models\n");
	static const char *const gh[] = {"model", "memory", "devices", "nodes", "fgpu used", "fgpu free"};
	struct cli_table *t = cli_table_new(6, gh);
	json_array_foreach(json_object_get(d, "gpu_models"), i, x) {
		char memory[32], devs[16], nodes[16], used[72], free_[32];
		units_format_size(cli_json_int(json_object_get(x, "memory")), memory, sizeof(memory));
		snprintf(devs, sizeof(devs), "%" PRId64, cli_json_int(json_object_get(x, "devices")));
		snprintf(nodes, sizeof(nodes), "%" PRId64, cli_json_int(json_object_get(x, "nodes")));
		units_format_milli(cli_json_milli(json_object_get(x, "fgpu_used")), a, sizeof(a));
		units_format_milli(cli_json_milli(json_object_get(x, "fgpu_capacity")), b, sizeof(b));
		snprintf(used, sizeof(used), "%s/%s", a, b);
		units_format_milli(cli_json_milli(json_object_get(x, "fgpu_free")), free_, sizeof(free_));
		const char *row[] = {cli_json_str(x, "model", "?"), memory, devs, nodes, used, free_};
		ADD(t, row);
	}
	if (json_array_size(json_object_get(d, "gpu_models")) == 0) {
		cli_table_free(t);
		printf("  (no GPU on an alive node)\n");
	} else if (print_table(t, oom) < 0) {
		return;
	}

	printf("\nnodes\n");
	static const char *const nh[] = {"id", "status", "group", "cpu", "mem", "fgpu", "sessions"};
	t = cli_table_new(7, nh);
	json_array_foreach(json_object_get(d, "nodes"), i, x) {
		json_t *u = json_object_get(x, "used"), *cp = json_object_get(x, "capacity");
		char st[48], sess[16];
		pair(u, cp, "cpu", cpu, sizeof(cpu));
		pair(u, cp, "mem", mem, sizeof(mem));
		pair(u, cp, "fgpu", fgpu, sizeof(fgpu));
		snprintf(st, sizeof(st), "%s%s", cli_json_str(x, "status", "?"),
			 json_is_false(json_object_get(x, "schedulable")) ? " (drained)" : "");
		snprintf(sess, sizeof(sess), "%" PRId64, cli_json_int(json_object_get(x, "sessions")));
		const char *row[] = {cli_json_str(x, "id", "?"), st, cli_json_str(x, "group", "-"), cpu, mem, fgpu, sess};
		ADD(t, row);
	}
	if (print_table(t, oom) < 0)
		return;

	printf("\nsessions by status (ended ones: the last %" PRId64 " h)\n ",
	       cli_json_int(json_object_get(d, "window_s")) / 3600);
	const char *k;
	json_object_foreach(json_object_get(json_object_get(d, "sessions"), "by_status"), k, x)
		printf(" %s %" PRId64, k, cli_json_int(x));
	printf("\n");

	printf("\nbusiest users (allocated now)\n");
	json_t *users = json_object_get(d, "top_users");
	if (json_array_size(users) == 0) {
		printf("  (no one holds anything)\n");
	} else {
		static const char *const uh[] = {"user", "sessions", "cpu", "mem", "fgpu"};
		t = cli_table_new(5, uh);
		json_array_foreach(users, i, x) {
			json_t *h = json_object_get(x, "held");
			char sess[16];
			snprintf(sess, sizeof(sess), "%" PRId64, cli_json_int(json_object_get(x, "sessions")));
			units_format_milli(cli_json_milli(json_object_get(h, "cpu")), a, sizeof(a));
			units_format_size(cli_json_int(json_object_get(h, "mem")), b, sizeof(b));
			units_format_milli(cli_json_milli(json_object_get(h, "fgpu")), c, sizeof(c));
			const char *row[] = {cli_json_str(x, "email", "?"), sess, a, b, c};
			ADD(t, row);
		}
		if (print_table(t, oom) < 0)
			return;
	}

	printf("\nrecent failures\n");
	json_t *fails = json_object_get(d, "failures");
	if (json_array_size(fails) == 0) {
		printf("  (none)\n");
		return;
	}
	static const char *const fh[] = {"session", "owner", "status", "at", "why"};
	t = cli_table_new(5, fh);
	json_array_foreach(fails, i, x) {
		char why[200];
		cli_shorten(cli_json_str(x, "status_info", ""), 80, why, sizeof(why));
		const char *row[] = {cli_json_str(x, "name", "?"), cli_json_str(x, "owner", "?"), cli_json_str(x, "status", "?"),
				     cli_json_str(x, "at", "now"), why};
		ADD(t, row);
	}
	print_table(t, oom);
}

int cmd_dashboard(int argc, char **argv)
{
	bool as_json = false;
	int rc = CLI_EXIT_OK;
	if (!only_json("dashboard",
		       "usage: tessera dashboard [--json]\n\nThe cluster at a glance (administrators): capacity and "
		       "allocation per GPU model and per node, sessions by status, the users who hold the most now, "
		       "and the sessions that failed in the last day (ERROR, or LOST with their node) with why. The "
		       "web UI's Dashboard page shows the same.\n",
		       argc, argv, &as_json, &rc))
		return rc;
	json_t *reply = NULL;
	if ((rc = cli_call("GET", "/v1/dashboard", NULL, &reply)) != CLI_EXIT_OK) {
		json_decref(reply);
		return rc;
	}
	bool oom = false;
	if (as_json)
		cli_print_json(reply);
	else
		print_dashboard(reply, &oom);
	json_decref(reply);
	return oom ? cli_fail("out of memory") : CLI_EXIT_OK;
}

int cmd_about(int argc, char **argv)
{
	bool as_json = false;
	int rc = CLI_EXIT_OK;
	if (!only_json("about",
		       "usage: tessera about [--json]\n\nThis client's version, the manager's, and the health of the "
		       "cluster's components (manager, store, Redis and etcd where configured, agents, app proxy, "
		       "webserver), as the web UI's About page shows them. Exits 0 whatever their health; --json "
		       "for scripts.\n",
		       argc, argv, &as_json, &rc))
		return rc;
	json_t *reply = NULL;
	if ((rc = cli_call("GET", "/v1/about", NULL, &reply)) != CLI_EXIT_OK) {
		json_decref(reply);
		return rc;
	}
	if (as_json) {
		cli_print_json(reply);
		json_decref(reply);
		return CLI_EXIT_OK;
	}
	char up[32];
	cli_format_age(cli_json_int(json_object_get(reply, "uptime_s")), up, sizeof(up));
	printf("tessera %s (this client); manager %s, up %s; status %s\n\n", TESSERA_VERSION,
	       cli_json_str(reply, "version", "?"), up, cli_json_str(reply, "status", "?"));
	static const char *const h[] = {"component", "status", "detail"};
	struct cli_table *t = cli_table_new(3, h);
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(reply, "components"), i, x) {
		const char *row[] = {cli_json_str(x, "name", "?"), cli_json_str(x, "status", "?"),
				     cli_json_str(x, "detail", "")};
		ADD(t, row);
	}
	bool oom = false;
	print_table(t, &oom);
	json_decref(reply);
	return oom ? cli_fail("out of memory") : CLI_EXIT_OK;
}
