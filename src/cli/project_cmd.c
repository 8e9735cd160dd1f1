/* `tessera project ...` (projects over /v1/projects: admins make and
 * change them, a project's managers change its members) and `tessera
 * fairshare` (GET /v1/fairshare, like Slurm's sshare); docs/scheduling.md. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/table.h"
#include "common/apiclient.h"
#include "common/units.h"

#define PROJECT_USAGE \
	"usage: tessera project COMMAND ...\n" \
	"\n" \
	"Projects (teams): every session and folder belongs to one. A project has a\n" \
	"quota beside each user's policy, a fair-share weight, and the resource groups\n" \
	"its sessions may use. Every user has a personal project named after them.\n" \
	"\n"
#define PROJECT_USAGE_END \
	"\n" \
	"Quota and weight options (create, set):\n" \
	"  --max-cpu X  --max-mem SIZE  --max-fgpu X  --max-sessions N\n" \
	"               the project's limits together (none: no limit)\n" \
	"  --weight W   its fair-share weight (default 1)\n" \
	"  --groups G,H the resource groups its sessions may use (all: every group)\n" \
	"  --description TEXT\n"

struct popts {
	bool json, all;
	const char *description, *role, *groups;
	json_t *quota;              /* {"cpu": ...} as given; NULL: none given */
	const char *weight;
	int nargs;
	char *args[2];
};

enum { O_JSON = 1, O_ALL, O_DESC, O_ROLE, O_GROUPS, O_WEIGHT, O_MAX_CPU, O_MAX_MEM, O_MAX_FGPU, O_MAX_SESSIONS };
#define BIT(x) (1u << (x))
#define SETTINGS (BIT(O_DESC) | BIT(O_GROUPS) | BIT(O_WEIGHT) | BIT(O_MAX_CPU) | BIT(O_MAX_MEM) | \
		  BIT(O_MAX_FGPU) | BIT(O_MAX_SESSIONS))

/* A quota option's value: "none" is no limit (JSON null); amounts are
 * checked here so that a typo fails before any request. */
static int quota_value(const char *opt, const char *v, int kind, json_t **out)
{
	struct terr err = {0};
	int64_t x;
	if (!strcmp(v, "none")) {
		*out = json_null();
		return CLI_EXIT_OK;
	}
	if (kind == 0 && units_parse_milli(v, &x, &err) < 0)
		return cli_usage_fail("project", "--%s: %s (or none)", opt, err.msg);
	if (kind == 1 && units_parse_size(v, &x, &err) < 0)
		return cli_usage_fail("project", "--%s: %s (or none)", opt, err.msg);
	if (kind == 2) {
		char *end;
		long n = strtol(v, &end, 10);
		if (*v < '0' || *v > '9' || *end || n < 0)
			return cli_usage_fail("project", "--%s must be a whole number or none, not '%s'", opt, v);
		x = n;
	}
	if (kind == 0) {
		char num[32];
		units_format_milli(x, num, sizeof(num));
		*out = json_string(num);
	} else {
		*out = json_integer(x);
	}
	return CLI_EXIT_OK;
}

static int parse(const char *verb, int argc, char **argv, unsigned allowed, int nargs, const char *usage,
		 struct popts *o, bool *done)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, O_JSON},
		{"all", no_argument, NULL, O_ALL},
		{"description", required_argument, NULL, O_DESC},
		{"role", required_argument, NULL, O_ROLE},
		{"groups", required_argument, NULL, O_GROUPS},
		{"weight", required_argument, NULL, O_WEIGHT},
		{"max-cpu", required_argument, NULL, O_MAX_CPU},
		{"max-mem", required_argument, NULL, O_MAX_MEM},
		{"max-fgpu", required_argument, NULL, O_MAX_FGPU},
		{"max-sessions", required_argument, NULL, O_MAX_SESSIONS},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	*done = true;
	memset(o, 0, sizeof(*o));
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		if (c == 'h') {
			printf("usage: tessera project %s\n%s", usage, allowed & SETTINGS ? PROJECT_USAGE_END : "");
			return CLI_EXIT_OK;
		}
		if (c == '?' || c == ':' || !(allowed & (1u << c)))
			return cli_usage_fail("project", "%s: option '%s' is unknown or needs a value", verb,
					      argv[optind - 1]);
		json_t *v = NULL;
		int rc = CLI_EXIT_OK;
		switch (c) {
		case O_JSON: o->json = true; break;
		case O_ALL: o->all = true; break;
		case O_DESC: o->description = optarg; break;
		case O_ROLE: o->role = optarg; break;
		case O_GROUPS: o->groups = optarg; break;
		case O_WEIGHT: o->weight = optarg; break;
		case O_MAX_CPU: rc = quota_value("max-cpu", optarg, 0, &v); break;
		case O_MAX_MEM: rc = quota_value("max-mem", optarg, 1, &v); break;
		case O_MAX_FGPU: rc = quota_value("max-fgpu", optarg, 0, &v); break;
		case O_MAX_SESSIONS: rc = quota_value("max-sessions", optarg, 2, &v); break;
		}
		if (rc != CLI_EXIT_OK) {
			json_decref(o->quota);
			return rc;
		}
		if (v) {
			static const char *const keys[] = {[O_MAX_CPU] = "cpu", [O_MAX_MEM] = "mem",
							   [O_MAX_FGPU] = "fgpu", [O_MAX_SESSIONS] = "sessions"};
			if (!o->quota)
				o->quota = json_object();
			json_object_set_new(o->quota, keys[c], v);
		}
	}
	if (argc - optind != nargs) {
		json_decref(o->quota);
		return cli_usage_fail("project", "%s needs %s", verb, usage);
	}
	for (int i = 0; i < nargs; i++)
		o->args[i] = argv[optind + i];
	*done = false;
	return CLI_EXIT_OK;
}

/* The settings the options gave, into body. */
static int settings_body(const struct popts *o, json_t *body)
{
	if (o->description)
		json_object_set_new(body, "description", json_string(o->description));
	if (o->weight) {
		int64_t w;
		struct terr err = {0};
		if (units_parse_milli(o->weight, &w, &err) < 0 || w <= 0)
			return cli_usage_fail("project", "--weight must be a number above 0, not '%s'", o->weight);
		char num[32];
		units_format_milli(w, num, sizeof(num));
		json_object_set_new(body, "weight", json_string(num));
	}
	if (o->quota)
		json_object_set(body, "quota", o->quota);
	if (o->groups) {
		json_t *g = json_array();
		if (strcmp(o->groups, "all")) {
			char *copy = strdup(o->groups), *save = NULL;
			for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
				json_array_append_new(g, json_string(t));
			free(copy);
		}
		json_object_set_new(body, "groups", g);
	}
	return CLI_EXIT_OK;
}

static char *project_path(const char *name, const char *member)
{
	char *esc = api_escape(name), *mesc = member ? api_escape(member) : NULL, *path = NULL;
	if (esc && (!member || mesc) &&
	    asprintf(&path, "/v1/projects/%s%s%s", esc, member ? "/members/" : "", member ? mesc : "") < 0)
		path = NULL;
	free(esc);
	free(mesc);
	return path;
}

static const char *str(json_t *o, const char *k)
{
	return cli_json_str(o, k, "");
}

/* "4 CPU" / "no limit" for a quota entry. */
static void limit_text(json_t *quota, const char *k, char *buf, size_t n)
{
	json_t *v = json_object_get(quota, k);
	if (!v || json_is_null(v)) {
		snprintf(buf, n, "-");
		return;
	}
	if (!strcmp(k, "mem"))
		units_format_size(json_integer_value(v), buf, n);
	else if (!strcmp(k, "sessions"))
		snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else
		units_format_milli(cli_json_milli(v), buf, n);
}

/* "used / quota" of one resource. */
static void use_text(json_t *p, const char *k, char *buf, size_t n)
{
	char used[32], lim[32];
	json_t *u = json_object_get(json_object_get(p, "used"), k);
	if (!strcmp(k, "mem"))
		units_format_size(json_integer_value(u), used, sizeof(used));
	else if (!strcmp(k, "sessions"))
		snprintf(used, sizeof(used), "%" JSON_INTEGER_FORMAT, json_integer_value(u));
	else
		units_format_milli(cli_json_milli(u), used, sizeof(used));
	limit_text(json_object_get(p, "quota"), k, lim, sizeof(lim));
	snprintf(buf, n, "%s/%s", used, lim);
}

static int project_ls(int argc, char **argv)
{
	struct popts o;
	bool done;
	int rc = parse("ls", argc, argv, BIT(O_JSON) | BIT(O_ALL), 0, "ls [--all] [--json]", &o, &done);
	if (done)
		return rc;
	json_t *reply = NULL;
	rc = cli_call("GET", o.all ? "/v1/projects?all=1" : "/v1/projects", NULL, &reply);
	json_t *projects = json_object_get(reply, "projects");
	if (rc == CLI_EXIT_OK && o.json) {
		cli_print_json(projects);
	} else if (rc == CLI_EXIT_OK) {
		static const char *const h[] = {"name", "role", "members", "sessions", "cpu", "mem", "fgpu", "weight",
						"groups"};
		struct cli_table *t = cli_table_new(9, h);
		size_t i;
		json_t *p;
		json_array_foreach(projects, i, p) {
			char members[16], sess[48], cpu[48], mem[48], fgpu[48], weight[32], groups[256] = "";
			snprintf(members, sizeof(members), "%zu", json_array_size(json_object_get(p, "members")));
			use_text(p, "sessions", sess, sizeof(sess));
			use_text(p, "cpu", cpu, sizeof(cpu));
			use_text(p, "mem", mem, sizeof(mem));
			use_text(p, "fgpu", fgpu, sizeof(fgpu));
			units_format_milli(cli_json_milli(json_object_get(p, "weight")), weight, sizeof(weight));
			size_t k, len = 0;
			json_t *g;
			json_array_foreach(json_object_get(p, "groups"), k, g)
				len += (size_t)snprintf(groups + len, len < sizeof(groups) ? sizeof(groups) - len : 0, "%s%s",
							k ? "," : "", json_string_value(g));
			const char *row[] = {str(p, "name"), json_is_true(json_object_get(p, "personal")) ? "personal"
				: str(p, "my_role"), members, sess, cpu, mem, fgpu, weight, groups[0] ? groups : "all"};
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

static void print_project(json_t *p)
{
	char buf[64], lim[64];
	printf("name:        %s%s\n", str(p, "name"), json_is_true(json_object_get(p, "personal")) ? " (personal)" : "");
	printf("description: %s\n", str(p, "description")[0] ? str(p, "description") : "-");
	units_format_milli(cli_json_milli(json_object_get(p, "weight")), buf, sizeof(buf));
	printf("weight:      %s\n", buf);
	static const char *const kinds[] = {"cpu", "mem", "fgpu", "sessions"};
	printf("quota:      ");
	for (size_t i = 0; i < 4; i++) {
		limit_text(json_object_get(p, "quota"), kinds[i], lim, sizeof(lim));
		printf(" %s %s", kinds[i], !strcmp(lim, "-") ? "no limit" : lim);
		printf(i < 3 ? "," : "\n");
	}
	printf("in use:     ");
	for (size_t i = 0; i < 4; i++) {
		use_text(p, kinds[i], buf, sizeof(buf));
		printf(" %s %s%s", kinds[i], buf, i < 3 ? "," : "\n");
	}
	printf("groups:      ");
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(p, "groups"), i, x)
		printf("%s%s", i ? ", " : "", json_string_value(x));
	printf("%s\nmembers:\n", json_array_size(json_object_get(p, "groups")) ? "" : "all");
	json_array_foreach(json_object_get(p, "members"), i, x) {
		units_format_milli(cli_json_milli(json_object_get(x, "weight")), buf, sizeof(buf));
		printf("  %s (%s, weight %s)\n", str(x, "email"), str(x, "role"), buf);
	}
}

static int project_info(int argc, char **argv)
{
	struct popts o;
	bool done;
	int rc = parse("info", argc, argv, BIT(O_JSON), 1, "info NAME [--json]", &o, &done);
	if (done)
		return rc;
	char *path = project_path(o.args[0], NULL);
	json_t *reply = NULL;
	rc = cli_call("GET", path, NULL, &reply);
	free(path);
	if (rc == CLI_EXIT_OK && o.json)
		cli_print_json(json_object_get(reply, "project"));
	else if (rc == CLI_EXIT_OK)
		print_project(json_object_get(reply, "project"));
	json_decref(reply);
	return rc;
}

/* create NAME and set NAME: the same options, POST or PATCH. */
static int project_write(int argc, char **argv, bool create)
{
	struct popts o;
	bool done;
	const char *verb = create ? "create" : "set";
	int rc = parse(verb, argc, argv, BIT(O_JSON) | SETTINGS, 1,
		       create ? "create NAME [--max-cpu X] [--max-mem SIZE] [--max-fgpu X] [--max-sessions N] "
			        "[--weight W] [--groups G,...] [--description TEXT] [--json]"
		              : "set NAME [--max-cpu X|none] [--max-mem SIZE|none] [--max-fgpu X|none] "
			        "[--max-sessions N|none] [--weight W] [--groups G,...|all] [--description TEXT] [--json]",
		       &o, &done);
	if (done)
		return rc;
	json_t *body = json_object(), *reply = NULL;
	if (create)
		json_object_set_new(body, "name", json_string(o.args[0]));
	rc = settings_body(&o, body);
	if (rc == CLI_EXIT_OK && !create && json_object_size(body) == 0)
		rc = cli_usage_fail("project", "set: nothing to change (see 'tessera project set --help')");
	char *path = create ? strdup("/v1/projects") : project_path(o.args[0], NULL);
	if (rc == CLI_EXIT_OK)
		rc = cli_call(create ? "POST" : "PATCH", path, body, &reply);
	if (rc == CLI_EXIT_OK && o.json)
		cli_print_json(json_object_get(reply, "project"));
	else if (rc == CLI_EXIT_OK)
		print_project(json_object_get(reply, "project"));
	free(path);
	json_decref(o.quota);
	json_decref(body);
	json_decref(reply);
	return rc;
}

static int project_create(int argc, char **argv)
{
	return project_write(argc, argv, true);
}

static int project_set(int argc, char **argv)
{
	return project_write(argc, argv, false);
}

static int project_rm(int argc, char **argv)
{
	struct popts o;
	bool done;
	int rc = parse("rm", argc, argv, 0, 1, "rm NAME", &o, &done);
	if (done)
		return rc;
	char *path = project_path(o.args[0], NULL);
	json_t *reply = NULL;
	rc = cli_call("DELETE", path, NULL, &reply);
	if (rc == CLI_EXIT_OK)
		printf("project %s removed\n", o.args[0]);
	free(path);
	json_decref(reply);
	return rc;
}

static int project_add_member(int argc, char **argv)
{
	struct popts o;
	bool done;
	int rc = parse("add-member", argc, argv, BIT(O_ROLE) | BIT(O_WEIGHT) | BIT(O_JSON), 2,
		       "add-member NAME EMAIL [--role member|manager] [--weight W]", &o, &done);
	if (done)
		return rc;
	json_t *body = json_object(), *reply = NULL;
	if (o.role)
		json_object_set_new(body, "role", json_string(o.role));
	rc = settings_body(&o, body);   /* --weight only: the others are not allowed here */
	char *path = project_path(o.args[0], o.args[1]);
	if (rc == CLI_EXIT_OK)
		rc = cli_call("PUT", path, body, &reply);
	if (rc == CLI_EXIT_OK && o.json) {
		cli_print_json(json_object_get(reply, "project"));
	} else if (rc == CLI_EXIT_OK) {
		size_t i;
		json_t *x;
		json_array_foreach(json_object_get(json_object_get(reply, "project"), "members"), i, x)
			if (!strcmp(str(x, "email"), o.args[1]))
				printf("%s is a %s of project %s\n", o.args[1], str(x, "role"), o.args[0]);
	}
	free(path);
	json_decref(body);
	json_decref(reply);
	return rc;
}

static int project_remove_member(int argc, char **argv)
{
	struct popts o;
	bool done;
	int rc = parse("remove-member", argc, argv, 0, 2, "remove-member NAME EMAIL", &o, &done);
	if (done)
		return rc;
	char *path = project_path(o.args[0], o.args[1]);
	json_t *reply = NULL;
	rc = cli_call("DELETE", path, NULL, &reply);
	if (rc == CLI_EXIT_OK)
		printf("%s is no longer a member of project %s\n", o.args[1], o.args[0]);
	free(path);
	json_decref(reply);
	return rc;
}

static const struct cli_verb project_verbs[] = {
	{"ls", project_ls, "ls [--all] [--json]", "your projects (admins: every team project; --all: personal ones too)",
	 "--all --json", ""},
	{"info", project_info, "info NAME [--json]", "a project: quota, use, groups, members",
	 "--json", "PROJECT"},
	{"create", project_create, "create NAME [options]", "a new project (admins)",
	 "--max-cpu=X --max-mem=SIZE --max-fgpu=X --max-sessions=N --weight=W --groups=G,H --description=TEXT "
	 "--json", "NAME"},
	{"set", project_set, "set NAME [options]", "change a project's quota, weight, groups (admins)",
	 "--max-cpu=X --max-mem=SIZE --max-fgpu=X --max-sessions=N --weight=W --groups=G,H --description=TEXT "
	 "--json", "PROJECT"},
	{"rm", project_rm, "rm NAME", "remove a project with no sessions or folders left (admins)",
	 "", "PROJECT"},
	{"add-member", project_add_member, "add-member NAME EMAIL [--role member|manager] [--weight W]",
	 "add a user, or change their role (admins and the project's managers)",
	 "--role=member|manager --weight=W", "PROJECT EMAIL"},
	{"remove-member", project_remove_member, "remove-member NAME EMAIL", "take a user out of the project",
	 "", "PROJECT EMAIL"},
};

const struct cli_noun cli_project_noun = {
	.name = "project",
	.verbs = project_verbs,
	.n_verbs = CLI_NVERBS(project_verbs),
	.usage = PROJECT_USAGE,
	.usage_end = PROJECT_USAGE_END,
	.missing = "missing command (try 'tessera project ls')",
	.help_verb = true,
};

int cmd_project(int argc, char **argv)
{
	return cli_dispatch(&cli_project_noun, argc, argv);
}

/* ---------- tessera fairshare ---------- */

static void pct(double v, char *buf, size_t n)
{
	snprintf(buf, n, "%.1f%%", v * 100.0);
}

/* One line of the table: a project, or (indented) one of its users. */
static int share_row(struct cli_table *t, const char *name, json_t *x)
{
	char weight[32], target[16], usage[16], current[16], rank[16], fgpu_h[32];
	snprintf(weight, sizeof(weight), "%g", json_number_value(json_object_get(x, "weight")));
	pct(json_number_value(json_object_get(x, "target")), target, sizeof(target));
	pct(json_number_value(json_object_get(x, "usage_share")), usage, sizeof(usage));
	pct(json_number_value(json_object_get(x, "current_share")), current, sizeof(current));
	snprintf(rank, sizeof(rank), "%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(x, "rank")));
	snprintf(fgpu_h, sizeof(fgpu_h), "%.2f",
		 json_number_value(json_object_get(json_object_get(x, "usage"), "fgpu_s")) / 3600.0);
	const char *row[] = {name, weight, target, usage, current, fgpu_h, rank};
	return cli_table_add(t, row);
}

int cmd_fairshare(int argc, char **argv)
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
			printf("usage: tessera fairshare [--json]\n\nEach project's (and, below it, each user's) "
			       "fair-share weight, target share, share of the decayed usage, share of what is held "
			       "now, decayed fGPU-hours, and rank in the queue's order (1: served next). Admins see "
			       "every project; others their own.\n");
			return CLI_EXIT_OK;
		}
		if (c == 'j')
			as_json = true;
		else
			return cli_usage_fail("fairshare", "option '%s' is unknown", argv[optind - 1]);
	}
	if (optind != argc)
		return cli_usage_fail("fairshare", "unexpected argument '%s'", argv[optind]);
	json_t *reply = NULL;
	int rc = cli_call("GET", "/v1/fairshare", NULL, &reply);
	if (rc != CLI_EXIT_OK) {
		json_decref(reply);
		return rc;
	}
	if (as_json) {
		cli_print_json(reply);
		json_decref(reply);
		return CLI_EXIT_OK;
	}
	printf("queue policy %s; usage half-life %" JSON_INTEGER_FORMAT " s; preemption %s\n\n",
	       str(reply, "queue_policy"), json_integer_value(json_object_get(reply, "half_life_s")),
	       json_is_true(json_object_get(reply, "preemption")) ? "on" : "off");
	static const char *const h[] = {"project / user", "weight", "target", "usage", "current", "fGPU-h", "rank"};
	struct cli_table *t = cli_table_new(7, h);
	size_t i, k;
	json_t *p, *u;
	json_array_foreach(json_object_get(reply, "projects"), i, p) {
		if (t && share_row(t, str(p, "name"), p) < 0) {
			cli_table_free(t);
			t = NULL;
		}
		json_array_foreach(json_object_get(p, "users"), k, u) {
			char name[300];
			snprintf(name, sizeof(name), "  %s", str(u, "email"));
			if (t && share_row(t, name, u) < 0) {
				cli_table_free(t);
				t = NULL;
			}
		}
	}
	if (!t)
		rc = cli_fail("out of memory");
	else
		cli_table_print(t, stdout);
	cli_table_free(t);
	json_decref(reply);
	return rc;
}
