/* `tessera folder ...`: users' data folders (docs/folders.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/folder_files.h"
#include "common/apiclient.h"
#include "common/units.h"

#define FOLDER_USAGE \
	"usage: tessera folder COMMAND ...\n" \
	"\n" \
	"Data folders: kept on a storage host, mounted into sessions (docs/folders.md).\n" \
	"Folders whose names start with '.' are mounted into every session of theirs.\n" \
	"\n"

/* Options every verb may take; each verb says which it accepts. */
struct fopts {
	const char *host, *quota, *with, *perm, *project, *members;
	bool json, trash, force, all;
	int nargs;
	char *args[2];
};

enum { O_HOST = 1, O_QUOTA, O_WITH, O_PERM, O_JSON, O_TRASH, O_FORCE, O_ALL, O_PROJECT, O_MEMBERS };

/* Parses argv (from the verb on) into o; allowed: the O_* bits accepted;
 * nargs the positional arguments wanted. CLI_EXIT_OK or a usage failure's
 * code (then *done). */
static int parse(const char *verb, int argc, char **argv, unsigned allowed, int nargs, const char *usage,
		 struct fopts *o, bool *done)
{
	static const struct option opts[] = {
		{"host", required_argument, NULL, O_HOST},
		{"quota", required_argument, NULL, O_QUOTA},
		{"with", required_argument, NULL, O_WITH},
		{"permission", required_argument, NULL, O_PERM},
		{"json", no_argument, NULL, O_JSON},
		{"trash", no_argument, NULL, O_TRASH},
		{"force", no_argument, NULL, O_FORCE},
		{"all", no_argument, NULL, O_ALL},
		{"project", required_argument, NULL, O_PROJECT},
		{"members", required_argument, NULL, O_MEMBERS},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	*done = true;
	memset(o, 0, sizeof(*o));
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		if (c == 'h') {
			printf("usage: tessera folder %s\n", usage);
			return CLI_EXIT_OK;
		}
		if (c == '?' || c == ':' || !(allowed & (1u << c)))
			return cli_usage_fail("folder", "%s: option '%s' is unknown or needs a value", verb,
					      argv[optind - 1]);
		switch (c) {
		case O_HOST: o->host = optarg; break;
		case O_QUOTA: o->quota = optarg; break;
		case O_WITH: o->with = optarg; break;
		case O_PERM: o->perm = optarg; break;
		case O_JSON: o->json = true; break;
		case O_TRASH: o->trash = true; break;
		case O_FORCE: o->force = true; break;
		case O_ALL: o->all = true; break;
		case O_PROJECT: o->project = optarg; break;
		case O_MEMBERS: o->members = optarg; break;
		}
	}
	if (argc - optind != nargs)
		return cli_usage_fail("folder", "%s needs %s", verb, usage);
	for (int i = 0; i < nargs; i++)
		o->args[i] = argv[optind + i];
	*done = false;
	return CLI_EXIT_OK;
}

#define BIT(x) (1u << (x))

/* "/v1/folders/<escaped name><suffix>", malloc'd. "." and ".." are
 * escaped so that no client resolves them as dot segments. */
static char *folder_path(const char *name, const char *suffix)
{
	char *esc = api_escape(name), *path = NULL;
	if (!esc)
		return NULL;
	if (!strcmp(esc, ".") || !strcmp(esc, "..")) {
		free(esc);
		esc = strdup(name[1] ? "%2E%2E" : "%2E");
		if (!esc)
			return NULL;
	}
	if (asprintf(&path, "/v1/folders/%s%s", esc, suffix ? suffix : "") < 0)
		path = NULL;
	free(esc);
	return path;
}


static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

static void size_text(json_t *o, const char *k, char *buf, size_t n)
{
	int64_t v = json_integer_value(json_object_get(o, k));
	if (v <= 0 && !strcmp(k, "quota_bytes"))
		snprintf(buf, n, "-");
	else
		units_format_size(v, buf, n);
}

static void print_table(json_t *folders)
{
	printf("%-24s %-8s %-28s %-6s %10s %10s %s\n", "NAME", "HOST", "OWNER", "PERM", "USAGE", "QUOTA", "AUTOMOUNT");
	size_t i;
	json_t *f;
	json_array_foreach(folders, i, f) {
		char use[32], quota[32];
		size_text(f, "usage_bytes", use, sizeof(use));
		size_text(f, "quota_bytes", quota, sizeof(quota));
		printf("%-24s %-8s %-28s %-6s %10s %10s %s\n", str(f, "name"), str(f, "host"), str(f, "owner"),
		       str(f, "permission"), use, quota, json_is_true(json_object_get(f, "automount")) ? "yes" : "no");
	}
}

static void print_info(json_t *f)
{
	char use[32], quota[32];
	size_text(f, "usage_bytes", use, sizeof(use));
	size_text(f, "quota_bytes", quota, sizeof(quota));
	const char *enf = str(f, "quota_enforced");
	const char *enf_text = !strcmp(enf, "btrfs-qgroup") ? "in sessions too (btrfs qgroup)"
			       : !strcmp(enf, "project-quota") ? "in sessions too (project quota)"
			       : "for uploads only: writes inside sessions are not capped on this host";
	printf("name:        %s\nid:          %s\nhost:        %s\nowner:       %s\npermission:  %s\n"
	       "usage:       %s\nquota:       %s\nenforced:    %s\nautomount:   %s\n",
	       str(f, "name"), str(f, "id"), str(f, "host"), str(f, "owner"), str(f, "permission"), use, quota,
	       enf_text,
	       json_is_true(json_object_get(f, "automount")) ? "yes (mounted at /home/work/NAME in every session)" : "no");
	if (json_is_string(json_object_get(f, "project")))
		printf("project:     %s (its members may use it)\n", str(f, "project"));
	/* Your sessions by name, other users' as a number (an admin's: all
	 * by name). */
	json_t *mb = json_object_get(f, "mounted_by");
	json_int_t others = json_integer_value(json_object_get(f, "mounted_by_others"));
	if (json_array_size(mb) || others > 0) {
		printf("mounted by:  ");
		for (size_t k = 0; k < json_array_size(mb); k++)
			printf("%s%s", k ? ", " : "", json_string_value(json_array_get(mb, k)) ?: "");
		if (others > 0)
			printf("%s%lld session(s) of other users", json_array_size(mb) ? " and " : "", (long long)others);
		printf("\n");
	}
	json_t *sh = json_object_get(f, "shared_with");
	size_t i;
	json_t *x;
	printf("shared with: %s\n", json_array_size(sh) ? "" : "nobody");
	json_array_foreach(sh, i, x)
		printf("  %s (%s)\n", str(x, "email"), str(x, "permission"));
}

static int folder_create(int argc, char **argv)
{
	struct fopts o;
	bool done;
	int rc = parse("create", argc, argv, BIT(O_HOST) | BIT(O_QUOTA) | BIT(O_JSON) | BIT(O_PROJECT) | BIT(O_MEMBERS),
		       1, "create NAME [--host H] [--quota SIZE] [--project P [--members rw|ro]]", &o, &done);
	if (done)
		return rc;
	json_t *body = json_pack("{s:s}", "name", o.args[0]);
	if (o.project)
		json_object_set_new(body, "project", json_string(o.project));
	if (o.members)
		json_object_set_new(body, "members", json_string(o.members));
	if (o.host)
		json_object_set_new(body, "host", json_string(o.host));
	if (o.quota) {
		int64_t q;
		struct terr err = {0};
		if (units_parse_size(o.quota, &q, &err) < 0) {
			json_decref(body);
			return cli_usage_fail("folder", "--quota: %s", err.msg);
		}
		json_object_set_new(body, "quota", json_integer(q));
	}
	json_t *reply = NULL;
	rc = cli_call("POST", "/v1/folders", body, &reply);
	if (rc == CLI_EXIT_OK) {
		if (o.json)
			cli_print_json(reply);
		else
			printf("folder %s created on %s\n", str(reply, "name"), str(reply, "host"));
	}
	json_decref(body);
	json_decref(reply);
	return rc;
}

static int folder_ls(int argc, char **argv)
{
	struct fopts o;
	bool done;
	int rc = parse("ls", argc, argv, BIT(O_JSON) | BIT(O_TRASH) | BIT(O_ALL), 0, "ls [--json] [--trash] [--all]",
		       &o, &done);
	if (done)
		return rc;
	char path[64];
	snprintf(path, sizeof(path), "/v1/folders?trash=%d&all=%d", o.trash, o.all);
	json_t *reply = NULL;
	rc = cli_call("GET", path, NULL, &reply);
	json_t *folders = json_object_get(reply, "folders");
	if (rc == CLI_EXIT_OK && !json_is_array(folders))
		rc = cli_fail("unexpected answer from the manager: no 'folders' array");
	else if (rc == CLI_EXIT_OK && o.json)
		cli_print_json(folders);
	else if (rc == CLI_EXIT_OK)
		print_table(folders);
	json_decref(reply);
	return rc;
}

static int folder_info(int argc, char **argv)
{
	struct fopts o;
	bool done;
	int rc = parse("info", argc, argv, BIT(O_JSON), 1, "info NAME [--json]", &o, &done);
	if (done)
		return rc;
	char *path = folder_path(o.args[0], NULL);
	json_t *reply = NULL;
	rc = cli_call("GET", path, NULL, &reply);
	if (rc == CLI_EXIT_OK) {
		if (o.json)
			cli_print_json(reply);
		else
			print_info(reply);
	}
	free(path);
	json_decref(reply);
	return rc;
}

static int folder_rm(int argc, char **argv)
{
	struct fopts o;
	bool done;
	int rc = parse("rm", argc, argv, BIT(O_FORCE), 1, "rm NAME [--force]", &o, &done);
	if (done)
		return rc;
	char *path = folder_path(o.args[0], o.force ? "?force=1" : NULL);
	rc = cli_call("DELETE", path, NULL, NULL);
	if (rc == CLI_EXIT_OK)
		printf("folder %s moved to the trash (tessera folder restore %s brings it back)\n", o.args[0], o.args[0]);
	free(path);
	return rc;
}

static int folder_restore(int argc, char **argv)
{
	struct fopts o;
	bool done;
	int rc = parse("restore", argc, argv, 0, 1, "restore NAME", &o, &done);
	if (done)
		return rc;
	char *path = folder_path(o.args[0], "/restore");
	rc = cli_call("POST", path, NULL, NULL);
	if (rc == CLI_EXIT_OK)
		printf("folder %s restored\n", o.args[0]);
	free(path);
	return rc;
}

static int folder_rename(int argc, char **argv)
{
	struct fopts o;
	bool done;
	int rc = parse("rename", argc, argv, 0, 2, "rename OLD NEW", &o, &done);
	if (done)
		return rc;
	char *path = folder_path(o.args[0], NULL);
	json_t *body = json_pack("{s:s}", "name", o.args[1]);
	rc = cli_call("PATCH", path, body, NULL);
	if (rc == CLI_EXIT_OK)
		printf("folder %s renamed to %s\n", o.args[0], o.args[1]);
	json_decref(body);
	free(path);
	return rc;
}

static int folder_set_quota(int argc, char **argv)
{
	struct fopts o;
	bool done;
	int rc = parse("set-quota", argc, argv, 0, 2, "set-quota NAME SIZE", &o, &done);
	if (done)
		return rc;
	int64_t q;
	struct terr err = {0};
	if (units_parse_size(o.args[1], &q, &err) < 0)
		return cli_usage_fail("folder", "set-quota: %s", err.msg);
	char *path = folder_path(o.args[0], NULL);
	json_t *body = json_pack("{s:I}", "quota", (json_int_t)q);
	json_t *reply = NULL;
	rc = cli_call("PATCH", path, body, &reply);
	if (rc == CLI_EXIT_OK) {
		char text[32];
		size_text(reply, "quota_bytes", text, sizeof(text));
		printf("folder %s: quota %s\n", o.args[0], !strcmp(text, "-") ? "none" : text);
	}
	json_decref(body);
	json_decref(reply);
	free(path);
	return rc;
}

static int folder_share(int argc, char **argv)
{
	struct fopts o;
	bool done;
	int rc = parse("share", argc, argv, BIT(O_WITH) | BIT(O_PERM) | BIT(O_FORCE), 1,
		       "share NAME --with EMAIL [--permission ro|rw] [--force]", &o, &done);
	if (done)
		return rc;
	if (!o.with)
		return cli_usage_fail("folder", "share needs --with EMAIL");
	const char *perm = o.perm ? o.perm : "ro";
	if (strcmp(perm, "ro") && strcmp(perm, "rw"))
		return cli_usage_fail("folder", "--permission must be ro or rw");
	char *path = folder_path(o.args[0], "/shares");
	json_t *body = json_pack("{s:s,s:s}", "email", o.with, "permission", perm);
	if (o.force)
		json_object_set_new(body, "force", json_true());
	rc = cli_call("POST", path, body, NULL);
	if (rc == CLI_EXIT_OK)
		printf("folder %s shared with %s (%s)\n", o.args[0], o.with, perm);
	json_decref(body);
	free(path);
	return rc;
}

static int folder_unshare(int argc, char **argv)
{
	struct fopts o;
	bool done;
	int rc = parse("unshare", argc, argv, BIT(O_WITH) | BIT(O_FORCE), 1, "unshare NAME --with EMAIL [--force]", &o,
		       &done);
	if (done)
		return rc;
	if (!o.with)
		return cli_usage_fail("folder", "unshare needs --with EMAIL");
	char *esc = api_escape(o.with), *suffix = NULL;
	if (!esc || asprintf(&suffix, "/shares/%s%s", esc, o.force ? "?force=1" : "") < 0)
		suffix = NULL;
	char *path = suffix ? folder_path(o.args[0], suffix) : NULL;
	rc = cli_call("DELETE", path, NULL, NULL);
	if (rc == CLI_EXIT_OK)
		printf("folder %s no longer shared with %s\n", o.args[0], o.with);
	free(esc);
	free(suffix);
	free(path);
	return rc;
}

static const struct cli_verb folder_verbs[] = {
	{"create", folder_create, "create NAME [--host H] [--quota SIZE]", "make a folder (default host: the first)",
	 "--host=HOST --quota=SIZE --project=PROJECT --members=rw|ro", "NAME"},
	{"ls", folder_ls, "ls [--json] [--trash] [--all]", "your folders and those shared with you",
	 "--json --trash --all", ""},
	{"info", folder_info, "info NAME [--json]", "a folder's usage, quota and shares",
	 "--json", "FOLDER"},
	{"rm", folder_rm, "rm NAME [--force]", "move a folder to the trash (--force: even while mounted)",
	 "--force", "FOLDER"},
	{"restore", folder_restore, "restore NAME", "bring a folder back from the trash",
	 "", "NAME"},
	{"rename", folder_rename, "rename OLD NEW", "rename a folder",
	 "", "FOLDER NEW"},
	{"set-quota", folder_set_quota, "set-quota NAME SIZE", "change a folder's quota (0: none)",
	 "", "FOLDER SIZE"},
	{"share", folder_share, "share NAME --with EMAIL [--permission ro|rw] [--force]",
	 "share a folder (default ro; --force: rw to ro even while mounted, ending those sessions)",
	 "--with=EMAIL --permission=ro|rw --force", "FOLDER"},
	{"unshare", folder_unshare, "unshare NAME --with EMAIL [--force]",
	 "take a share away (--force: even while mounted, ending those sessions)",
	 "--with=EMAIL --force", "FOLDER"},
	{"files", folder_files_cmd, "files NAME [PATH] [--json]", "list a directory of a folder",
	 "--json", "FOLDER PATH"},
	{"upload", folder_upload_cmd, "upload NAME LOCAL [REMOTE] [--overwrite]", "upload a file (any size)",
	 "--overwrite", "FOLDER FILE REMOTE"},
	{"download", folder_download_cmd, "download NAME REMOTE [LOCAL]", "download a file (any size)",
	 "", "FOLDER REMOTE FILE"},
	{"mkdir", folder_mkdir_cmd, "mkdir NAME PATH [--parents]", "make a directory in a folder",
	 "--parents", "FOLDER PATH"},
	{"mv", folder_mv_cmd, "mv NAME FROM TO [--overwrite]", "move or rename inside a folder",
	 "--overwrite", "FOLDER FROM TO"},
	{"rm-file", folder_rm_file_cmd, "rm-file NAME PATH [--recursive]", "remove a file or directory",
	 "--recursive", "FOLDER PATH"},
};

const struct cli_noun cli_folder_noun = {
	.name = "folder",
	.verbs = folder_verbs,
	.n_verbs = CLI_NVERBS(folder_verbs),
	.usage = FOLDER_USAGE,
	.help_verb = true,
};

int cmd_folder(int argc, char **argv)
{
	return cli_dispatch(&cli_folder_noun, argc, argv);
}
