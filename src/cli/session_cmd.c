/* `tessera session ...`: create, ls, info, rm, logs, exec, commit (the
 * apps' verbs, apps, app and shell, are in session_apps.c). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "common/model.h"
#include "common/util.h"
#include "cli/views.h"
#include "cli/table.h"
#include "common/frames.h"
#include "common/units.h"

#define CREATE_USAGE \
	"usage: tessera session create IMAGE [options]\n" \
	"\n" \
	"  --name N                session name; with --count K: N-1 .. N-K\n" \
	"  --cpu X                 CPU cores, up to 3 decimals (default 1)\n" \
	"  --mem SIZE              memory: 256m, 1g, 512MiB, 1.5GiB or bytes (default 256m)\n" \
	"  --fgpu X                fractional GPUs, up to 3 decimals (default 0)\n" \
	"  --count K               create K sessions (1..100)\n" \
	"  --env K=V               environment variable (repeatable)\n" \
	"  --startup-command CMD   run with /bin/sh -c once the container starts\n" \
	"  --batch                 a batch session: it ends when the startup command does,\n" \
	"                          TERMINATED with exit code 0, else ERROR with the code\n" \
	"  --starts-at TIME        not started before TIME (RFC 3339, e.g.\n" \
	"                          2026-11-29T07:00:00Z); it waits PENDING until then\n" \
	"  --batch-timeout SECONDS with --batch: ended (ERROR) once it has run this long\n" \
	"  --preopen PORT          list PORT as one of its apps from the start, opened\n" \
	"                          like any app (repeatable, up to 8)\n" \
	"  --root                  run as root, not as the image's work user (uid 1000);\n" \
	"                          only where your policy allows it (allow_root)\n" \
	"  --mount NAME[:PATH][:ro] mount a data folder (repeatable; default PATH\n" \
	"                          /home/work/NAME); folders named .NAME are mounted\n" \
	"                          at /home/work/.NAME without asking\n" \
	"  --project NAME          the project it belongs to (default: your one team\n" \
	"                          project, else your personal one)\n" \
	"  --group NAME            the resource group of nodes it may run on (default\n" \
	"                          \"default\")\n" \
	"  --priority N            0..100, higher starts first and may preempt lower\n" \
	"                          preemptible sessions (your policy's max_priority)\n" \
	"  --preemptible, --no-preemptible\n" \
	"                          whether it may be ended to make room (default:\n" \
	"                          batch sessions yes, interactive ones no)\n" \
	"  --cluster-size N        N containers (2..16) for distributed work: main1,\n" \
	"                          sub1..., each with the resources above, started\n" \
	"                          together, on a network of their own, with SSH\n" \
	"                          between them (docs/user-guide.md)\n" \
	"  --cluster-mode MODE     single-node (default: all on one node) or multi-node\n" \
	"  --wait                  wait until every session is RUNNING; a batch session:\n" \
	"                          until it has ended, exiting with its command's code\n" \
	"  --timeout SECONDS       with --wait: give up after this long (default 300)\n" \
	"  --json                  print JSON instead of a table\n"

#define LS_USAGE \
	"usage: tessera session ls [--all | --finished] [--json]\n" \
	"\n" \
	"  --all        include TERMINATED and CANCELLED sessions\n" \
	"  --finished   only ended sessions (TERMINATED, CANCELLED, ERROR), newest first\n" \
	"  --json       print a JSON array\n"

#define OWNER_USAGE \
	"  --owner EMAIL   NAME is a session of this user (admins): a name is\n" \
	"                  otherwise one of your own sessions; an id is anyone's\n"
#define CONTAINER_USAGE \
	"  --container C   one container of a cluster session: main1 (the default),\n" \
	"                  sub1, ... (NAME/C says the same)\n"
#define INFO_USAGE "usage: tessera session info NAME [--owner EMAIL] [--json]\n\n" OWNER_USAGE
#define RM_USAGE "usage: tessera session rm NAME... [--owner EMAIL]\n\n" OWNER_USAGE
#define LOGS_USAGE \
	"usage: tessera session logs NAME [--tail N] [--follow] [--owner EMAIL] [--container C]\n" \
	"\n" \
	"  --tail N        only the last N lines\n" \
	"  -f, --follow    keep printing what the session writes until it ends\n" \
	"                  (or Ctrl-C)\n" OWNER_USAGE CONTAINER_USAGE
#define EXEC_USAGE \
	"usage: tessera session exec NAME [--timeout SECONDS] [--owner EMAIL] [--container C] -- CMD [ARG...]\n" \
	"\n" \
	"Runs CMD in the session's container, prints its output and exits with\n" \
	"its exit code. --timeout stops it after that many seconds (default 600;\n" \
	"exit code 124).\n" OWNER_USAGE CONTAINER_USAGE

#define COMMIT_USAGE \
	"usage: tessera session commit NAME [--owner EMAIL] [--name IMAGE_NAME] [--tag TAG] [--wait] [--json]\n" \
	"\n" \
	"Commits the running session's container (not its mounted folders) into a\n" \
	"private image of the session's owner, listed and launchable by the owner\n" \
	"and admins only (docs/images.md, \"Private images\").\n" \
	"\n" \
	"Private images live under the owner's own name space,\n" \
	"tessera-private/<owner's email up to the @>-<12 characters of the\n" \
	"owner's id>/; a commit writes nowhere else.\n" \
	"\n" \
	"  --name IMAGE_NAME   name under the owner's name space (default the\n" \
	"                      session's name); a full tessera-private/ name must\n" \
	"                      be in that name space\n" \
	"  --tag TAG           tag (default the UTC time, YYYYMMDD-HHMMSS)\n" \
	"  --wait              wait until the image is ready (or the commit failed)\n" \
	"  --timeout SECONDS   with --wait: give up after this long (default 1800)\n" \
	"  --json              print the commit as JSON\n" \
	OWNER_USAGE

/* getopt_long over argv of a sub-command (argv[0] is its name). */
static void session_reset_getopt(void)
{
	optind = 0;  /* glibc: full re-initialization */
	opterr = 0;  /* we print our own one-line messages */
}

static int session_bad_option(const char *sub, char **argv)
{
	const char *arg = argv[optind - 1];
	if (optopt && optopt != '?')
		return cli_usage_fail(sub, "option '-%c' is unknown or needs a value", optopt);
	return cli_usage_fail(sub, "option '%s' is unknown or needs a value", arg);
}

/* The --owner of the verbs that name one session (NULL: none given). */
static const char *session_owner;

const char *cli_session_container;

char *cli_session_path(const char *ref, const char *owner, const char *suffix)
{
	/* NAME/CONTAINER, or --container: one container of a cluster
	 * session (main1, sub1...), as ?container= (names have no '/'). */
	char name[256];
	const char *container = cli_session_container, *slash = strchr(ref, '/');
	if (slash && (size_t)(slash - ref) < sizeof(name)) {
		memcpy(name, ref, (size_t)(slash - ref));
		name[slash - ref] = '\0';
		ref = name;
		container = slash + 1;
	}
	char *esc = api_escape(ref), *path = NULL;
	if (!esc)
		return NULL;
	/* "." and ".." are left alone by the escape, and an HTTP client
	 * resolves them as dot segments ("/v1/sessions/.." is "/v1/"):
	 * escaped, they reach the server as the name they are. */
	if (!strcmp(esc, ".") || !strcmp(esc, "..")) {
		free(esc);
		esc = strdup(ref[1] ? "%2E%2E" : "%2E");
		if (!esc)
			return NULL;
	}
	char *owner_esc = owner ? api_escape(owner) : NULL;
	if (owner && !owner_esc) {
		free(esc);
		return NULL;
	}
	char *container_esc = container && *container ? api_escape(container) : NULL;
	if (container && *container && !container_esc) {
		free(esc);
		free(owner_esc);
		return NULL;
	}
	suffix = suffix ? suffix : "";
	bool query = strchr(suffix, '?') != NULL;
	if (asprintf(&path, "/v1/sessions/%s%s%s%s%s%s", esc, suffix,
		     owner_esc ? (query ? "&owner=" : "?owner=") : "", owner_esc ? owner_esc : "",
		     container_esc ? (query || owner_esc ? "&container=" : "?container=") : "",
		     container_esc ? container_esc : "") < 0)
		path = NULL;
	free(esc);
	free(owner_esc);
	free(container_esc);
	return path;
}

/* The path with the --owner given to the verb. */
static char *session_path(const char *ref, const char *suffix)
{
	return cli_session_path(ref, session_owner, suffix);
}

static int session_print_list(json_t *sessions, int as_json)
{
	if (as_json) {
		cli_print_json(sessions);
		return CLI_EXIT_OK;
	}
	struct cli_table *t = cli_session_table(sessions, time(NULL));
	if (!t)
		return cli_fail("out of memory");
	cli_table_print(t, stdout);
	cli_table_free(t);
	return CLI_EXIT_OK;
}

/* ---- create ---------------------------------------------------------- */

static int session_env_key_ok(const char *k, size_t len)
{
	if (!len || !((k[0] >= 'A' && k[0] <= 'Z') || (k[0] >= 'a' && k[0] <= 'z') ||
		      k[0] == '_'))
		return 0;
	for (size_t i = 1; i < len; i++)
		if (!((k[i] >= 'A' && k[i] <= 'Z') || (k[i] >= 'a' && k[i] <= 'z') ||
		      (k[i] >= '0' && k[i] <= '9') || k[i] == '_'))
			return 0;
	return 1;
}

static int session_is_waiting(const char *status)
{
	return !strcmp(status, "PENDING") || !strcmp(status, "SCHEDULED") ||
	       !strcmp(status, "PREPARING");
}

static int session_is_batch(json_t *sess)
{
	return !strcmp(cli_json_str(sess, "type", ""), "batch");
}

/* Waits until the session is RUNNING, or for a batch session until it
 * has ended. Replaces *sess (owned) with the latest copy. Returns 0 when
 * RUNNING or, for a batch session, ended (the caller says how), 1 when
 * it ended otherwise or the deadline passed (after printing why), -errno
 * on API failure (err set). */
static int session_wait_one(const struct api_client *c, json_t **sess, time_t deadline,
			    long total_s, struct terr *err)
{
	int batch = session_is_batch(*sess);
	char said[1024] = "";   /* the waiting reason last printed */
	bool first = true;      /* *sess is create's answer, not yet waited on */
	for (;;) {
		const char *status = cli_json_str(*sess, "status", "?");
		const char *name = cli_json_str(*sess, "name", "?");
		/* Why it waits, when the scheduler says and each time that
		 * changes, on stderr (stdout keeps the list or the JSON): a
		 * silent wait of minutes looks like a hang. */
		const char *info = cli_json_str(*sess, "status_info", "");
		if (!first && !strcmp(status, "PENDING") && *info) {
			char line[1024];
			snprintf(line, sizeof(line), "%s: %s", status, info);
			if (strcmp(line, said)) {
				fprintf(stderr, "tessera: session %s is %s\n", name, line);
				util_strlcpy(said, line, sizeof(said));
			}
		}
		int ended = !strcmp(status, "TERMINATED") || !strcmp(status, "ERROR") || !strcmp(status, "CANCELLED");
		if (batch ? ended : !strcmp(status, "RUNNING"))
			return 0;
		if (!batch && !session_is_waiting(status)) {
			cli_fail("session %s is %s: %s", name, status,
				 cli_json_str(*sess, "status_info", "no details"));
			return 1;
		}
		time_t now = time(NULL);
		if (now >= deadline) {
			if (!strcmp(status, "PENDING"))
				cli_fail("session %s is still PENDING after %ld s: %s; it stays queued and starts by itself "
					 "when it can: follow it with `tessera session ls`, or cancel it with "
					 "`tessera session rm %s`", name, total_s, cli_json_str(*sess, "status_info", "no details"),
					 name);
			else
				cli_fail("session %s is still %s after %ld s: %s", name, status, total_s,
					 cli_json_str(*sess, "status_info", "no details"));
			return 1;
		}
		long slice = (long)(deadline - now);
		if (slice > 30)
			slice = 30;
		char suffix[64];
		snprintf(suffix, sizeof(suffix), "?wait=1&timeout_s=%ld", slice);
		char *path = session_path(cli_json_str(*sess, "id", name), suffix);
		if (!path)
			return terr_set(err, ENOMEM, "out of memory");
		json_t *next = NULL;
		time_t asked = time(NULL);
		/* The server holds the call up to `slice` seconds: leave it room. */
		int r = api_call(c, "GET", path, NULL, (slice + 15) * 1000L, &next, NULL, err);
		free(path);
		if (r < 0)
			return r;
		if (!json_is_object(next)) {
			json_decref(next);
			return terr_set(err, EIO, "unexpected answer while waiting for %s", name);
		}
		json_decref(*sess);
		*sess = next;
		first = false;
		/* A server that answers at once without waiting must not turn
		 * this into a busy loop (nor one that has not learnt to wait
		 * for a batch session's end). */
		if (time(NULL) == asked && (batch || session_is_waiting(cli_json_str(next, "status", ""))))
			sleep(1);
	}
}

/* A batch session waited for has ended: one line saying how (on stderr
 * with --json, so that stdout stays JSON); returns its command's exit
 * code (1 when it ended without one, e.g. it could not start). */
static int session_batch_ended(json_t *s, int as_json)
{
	const char *status = cli_json_str(s, "status", "?");
	json_t *code = json_object_get(s, "exit_code");
	FILE *out = as_json ? stderr : stdout;
	if (!strcmp(status, "TERMINATED"))
		fprintf(out, "session %s ended TERMINATED: %s\n", cli_json_str(s, "name", "?"),
			cli_json_str(s, "status_info", "exit code 0"));
	else
		fprintf(out, "session %s ended %s: %s\n", cli_json_str(s, "name", "?"), status,
			cli_json_str(s, "status_info", "no details"));
	fflush(out);
	if (!json_is_integer(code))
		return !strcmp(status, "TERMINATED") ? CLI_EXIT_OK : CLI_EXIT_FAIL;
	json_int_t v = json_integer_value(code);
	if (v == 0 && strcmp(status, "TERMINATED"))
		return CLI_EXIT_FAIL;
	return v < 0 || v > 255 ? CLI_EXIT_FAIL : (int)v;
}

static int session_create(int argc, char **argv)
{
	static const struct option opts[] = {
		{"name", required_argument, NULL, 'n'},
		{"cpu", required_argument, NULL, 'c'},
		{"mem", required_argument, NULL, 'm'},
		{"fgpu", required_argument, NULL, 'g'},
		{"count", required_argument, NULL, 'k'},
		{"env", required_argument, NULL, 'e'},
		{"startup-command", required_argument, NULL, 's'},
		{"batch", no_argument, NULL, 'b'},
		{"root", no_argument, NULL, 'r'},
		{"starts-at", required_argument, NULL, 'S'},
		{"batch-timeout", required_argument, NULL, 'T'},
		{"preopen", required_argument, NULL, 'O'},
		{"mount", required_argument, NULL, 'M'},
		{"cluster-size", required_argument, NULL, 'Z'},
		{"cluster-mode", required_argument, NULL, 'X'},
		{"wait", no_argument, NULL, 'w'},
		{"timeout", required_argument, NULL, 't'},
		{"json", no_argument, NULL, 'j'},
		{"project", required_argument, NULL, 'P'},
		{"group", required_argument, NULL, 'G'},
		{"priority", required_argument, NULL, 'p'},
		{"preemptible", no_argument, NULL, 'E'},
		{"no-preemptible", no_argument, NULL, 'N'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *sub = "session create";
	json_t *body = json_object(), *res = json_object(), *env = json_object();
	int as_json = 0, wait = 0, rc = CLI_EXIT_USAGE;
	long timeout_s = 300;
	struct terr err = {0};
	json_t *reply = NULL;
	struct cli_config cfg = {0};

	if (!body || !res || !env) {
		rc = cli_fail("out of memory");
		goto out;
	}
	session_reset_getopt();
	for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		int64_t v;
		char num[32];
		switch (o) {
		case 'h':
			fputs(CREATE_USAGE, stdout);
			rc = CLI_EXIT_OK;
			goto out;
		case 'n':
			json_object_set_new(body, "name", json_string(optarg));
			break;
		case 'c':
		case 'g':
			if (units_parse_milli(optarg, &v, &err) < 0) {
				rc = cli_usage_fail(sub, "--%s: %s", o == 'c' ? "cpu" : "fgpu", err.msg);
				goto out;
			}
			if (o == 'c' && v == 0) {
				rc = cli_usage_fail(sub, "--cpu must be more than 0");
				goto out;
			}
			/* As a string: a JSON real could not say 0.1 exactly. */
			units_format_milli(v, num, sizeof(num));
			json_object_set_new(res, o == 'c' ? "cpu" : "fgpu", json_string(num));
			break;
		case 'm':
			if (units_parse_size(optarg, &v, &err) < 0) {
				rc = cli_usage_fail(sub, "--mem: %s", err.msg);
				goto out;
			}
			json_object_set_new(res, "mem", json_integer(v));
			break;
		case 'k': {
			char *end;
			long k = strtol(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || k < 1 || k > 100) {
				rc = cli_usage_fail(sub, "--count must be a whole number from 1 to 100, not '%s'",
						    optarg);
				goto out;
			}
			json_object_set_new(body, "count", json_integer(k));
			break;
		}
		case 'e': {
			const char *eq = strchr(optarg, '=');
			if (!eq || !session_env_key_ok(optarg, (size_t)(eq - optarg))) {
				rc = cli_usage_fail(sub, "--env expects KEY=VALUE with KEY made of letters, digits and '_', not '%s'",
						    optarg);
				goto out;
			}
			char *key = strndup(optarg, (size_t)(eq - optarg));
			if (!key) {
				rc = cli_fail("out of memory");
				goto out;
			}
			if (json_object_get(env, key)) {
				rc = cli_usage_fail(sub, "--env %s given twice", key);
				free(key);
				goto out;
			}
			json_object_set_new(env, key, json_string(eq + 1));
			free(key);
			break;
		}
		case 's':
			json_object_set_new(body, "startup_command", json_string(optarg));
			break;
		case 'b':
			json_object_set_new(body, "type", json_string("batch"));
			break;
		case 'P':
			json_object_set_new(body, "project", json_string(optarg));
			break;
		case 'G':
			json_object_set_new(body, "group", json_string(optarg));
			break;
		case 'p': {
			char *end;
			long p = strtol(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || p > 100) {
				rc = cli_usage_fail(sub, "--priority must be a whole number from 0 to 100, not '%s'", optarg);
				goto out;
			}
			json_object_set_new(body, "priority", json_integer(p));
			break;
		}
		case 'Z': {
			char *end;
			long n = strtol(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || n < 1 || n > 16) {
				rc = cli_usage_fail(sub, "--cluster-size must be a number of containers from 1 to 16, "
						    "not '%s'", optarg);
				goto out;
			}
			json_object_set_new(body, "cluster_size", json_integer(n));
			break;
		}
		case 'X':
			/* Checked by the manager, which says what it takes. */
			json_object_set_new(body, "cluster_mode", json_string(optarg));
			break;
		case 'E':
		case 'N':
			json_object_set_new(body, "preemptible", json_boolean(o == 'E'));
			break;
		case 'r':
			json_object_set_new(body, "root", json_true());
			break;
		case 'S':
			/* Checked by the manager, which says what it takes. */
			json_object_set_new(body, "starts_at", json_string(optarg));
			break;
		case 'T':
		case 'O': {
			char *end;
			long n = strtol(optarg, &end, 10);
			long max = o == 'T' ? 30L * 24 * 3600 : 65535;
			if (*optarg < '0' || *optarg > '9' || *end || n < 1 || n > max) {
				rc = cli_usage_fail(sub, o == 'T' ? "--batch-timeout must be whole seconds from 1 to %ld "
						    "(30 days), not '%s'" : "--preopen must be a port from 1 to %ld, not '%s'",
						    max, optarg);
				goto out;
			}
			if (o == 'T') {
				json_object_set_new(body, "batch_timeout", json_integer(n));
				break;
			}
			json_t *ports = json_object_get(body, "preopen_ports");
			if (!ports) {
				ports = json_array();
				json_object_set_new(body, "preopen_ports", ports);
			}
			json_array_append_new(ports, json_integer(n));
			break;
		}
		case 'M': {
			struct model_mount mm;
			if (model_parse_mount_spec(optarg, &mm, &err) < 0) {
				rc = cli_usage_fail(sub, "--mount: %s", err.msg);
				goto out;
			}
			json_t *mounts = json_object_get(body, "mounts");
			if (!mounts) {
				mounts = json_array();
				json_object_set_new(body, "mounts", mounts);
			}
			json_array_append_new(mounts, json_string(optarg));
			break;
		}
		case 'w':
			wait = 1;
			break;
		case 't': {
			char *end;
			timeout_s = strtol(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || timeout_s < 1 ||
			    timeout_s > 86400) {
				rc = cli_usage_fail(sub, "--timeout must be a number of seconds (1..86400), not '%s'",
						    optarg);
				goto out;
			}
			break;
		}
		case 'j':
			as_json = 1;
			break;
		default:
			rc = session_bad_option(sub, argv);
			goto out;
		}
	}
	if (optind >= argc) {
		rc = cli_usage_fail(sub, "which image? usage: tessera session create IMAGE [options]");
		goto out;
	}
	if (optind + 1 < argc) {
		rc = cli_usage_fail(sub, "unexpected argument '%s' after the image", argv[optind + 1]);
		goto out;
	}
	json_object_set_new(body, "image", json_string(argv[optind]));
	if (json_object_size(res))
		json_object_set(body, "resources", res);
	if (json_object_size(env))
		json_object_set(body, "env", env);

	struct api_client c;
	if (cli_connect(&cfg, &c, &err) < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	if (api_call(&c, "POST", "/v1/sessions", body, 0, &reply, NULL, &err) < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	json_t *sessions = json_object_get(reply, "sessions");
	if (!json_is_array(sessions)) {
		rc = cli_fail("unexpected answer from the manager: no 'sessions' array");
		goto out;
	}
	rc = CLI_EXIT_OK;
	int batch_ended = 0;
	if (wait) {
		time_t deadline = time(NULL) + timeout_s;
		size_t i;
		json_t *s;
		json_array_foreach(sessions, i, s) {
			json_t *cur = json_incref(s);
			int r = session_wait_one(&c, &cur, deadline, timeout_s, &err);
			json_array_set(sessions, i, cur);
			if (r == 0 && session_is_batch(cur)) {
				/* The command's own code, as `session exec` gives it;
				 * the first that failed wins. */
				int code = session_batch_ended(cur, as_json);
				if (rc == CLI_EXIT_OK)
					rc = code;
				batch_ended = 1;
			}
			json_decref(cur);
			if (r < 0) {
				rc = cli_fail("%s", err.msg);
				goto out;
			}
			if (r > 0)
				rc = CLI_EXIT_FAIL;
		}
	}
	if (!batch_ended || as_json)
		session_print_list(sessions, as_json);
out:
	json_decref(reply);
	json_decref(body);
	json_decref(res);
	json_decref(env);
	cli_config_free(&cfg);
	return rc;
}

/* ---- ls / info -------------------------------------------------------- */

/* Parses the options shared by ls and info (--json, --all for ls). */
static int session_simple_opts(const char *sub, const char *usage, int allow_all,
			       int argc, char **argv, int *as_json, int *all)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{"all", no_argument, NULL, 'a'},
		{"finished", no_argument, NULL, 'f'},
		{"owner", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	session_reset_getopt();
	for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		if (o == 'h') {
			fputs(usage, stdout);
			return CLI_EXIT_OK;
		} else if (o == 'j') {
			*as_json = 1;
		} else if (o == 'o' && !allow_all) {
			session_owner = optarg;
		} else if ((o == 'a' || o == 'f') && allow_all) {
			/* 1: --all; 2: --finished (the Sessions page's Finished
			 * view); both: one line saying so. */
			int want = o == 'a' ? 1 : 2;
			if (*all && *all != want)
				return cli_usage_fail(sub, "--all and --finished do not go together");
			*all = want;
		} else {
			return session_bad_option(sub, argv);
		}
	}
	return -1;
}

static int session_ls(int argc, char **argv)
{
	int as_json = 0, all = 0;
	int rc = session_simple_opts("session ls", LS_USAGE, 1, argc, argv, &as_json, &all);
	if (rc >= 0)
		return rc;
	if (optind < argc)
		return cli_usage_fail("session ls", "unexpected argument '%s'", argv[optind]);
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *reply = NULL;
	if (cli_connect(&cfg, &c, &err) < 0 ||
	    api_call(&c, "GET",
		     all == 2 ? "/v1/sessions?all=1&status=TERMINATED,CANCELLED,ERROR&order=newest"
		     : all ? "/v1/sessions?all=1" : "/v1/sessions", NULL, 0, &reply,
		     NULL, &err) < 0) {
		cli_config_free(&cfg);
		return cli_fail("%s", err.msg);
	}
	json_t *sessions = json_object_get(reply, "sessions");
	if (!json_is_array(sessions))
		rc = cli_fail("unexpected answer from the manager: no 'sessions' array");
	else
		rc = session_print_list(sessions, as_json);
	json_decref(reply);
	cli_config_free(&cfg);
	return rc;
}

static void session_info_line(const char *key, const char *value)
{
	printf("%-16s %s\n", key, value && *value ? value : "-");
}

static void session_print_info(json_t *s)
{
	json_t *res = json_object_get(s, "resources");
	char buf[64];
	session_info_line("ID:", cli_json_str(s, "id", NULL));
	session_info_line("Name:", cli_json_str(s, "name", NULL));
	session_info_line("Owner:", cli_json_str(s, "owner", NULL));
	session_info_line("Image:", cli_json_str(s, "image", NULL));
	session_info_line("Status:", cli_json_str(s, "status", NULL));
	session_info_line("Type:", cli_json_str(s, "type", "interactive"));
	session_info_line("Status info:", cli_json_str(s, "status_info", NULL));
	session_info_line("Project:", cli_json_str(s, "project", NULL));
	session_info_line("Group:", cli_json_str(s, "group", NULL));
	/* Priority and preemption (docs/scheduling.md). */
	char prio[96], times[48] = "";
	json_int_t n_pre = json_integer_value(json_object_get(s, "preemptions"));
	if (n_pre)
		snprintf(times, sizeof(times), " (preempted %" JSON_INTEGER_FORMAT " time%s)", n_pre, n_pre == 1 ? "" : "s");
	snprintf(prio, sizeof(prio), "%" JSON_INTEGER_FORMAT ", %s%s", json_integer_value(json_object_get(s, "priority")),
		 json_is_true(json_object_get(s, "preemptible")) ? "preemptible" : "not preemptible", times);
	session_info_line("Priority:", prio);
	session_info_line("Node:", cli_json_str(s, "agent", NULL));
	session_info_line("Container:", cli_json_str(s, "container_id", NULL));
	units_format_milli(cli_json_milli(json_object_get(res, "cpu")), buf, sizeof(buf));
	session_info_line("CPU:", buf);
	units_format_size(cli_json_int(json_object_get(res, "mem")), buf, sizeof(buf));
	session_info_line("Memory:", buf);
	cli_format_fgpu(cli_json_milli(json_object_get(res, "fgpu")), buf, sizeof(buf));
	session_info_line("fGPU:", buf);
	/* The allocation map: "#0 GPU-1a2b... 2 fGPU, #1 GPU-3c4d... 0.5 fGPU". */
	json_t *gpus = json_object_get(s, "gpus");
	if (json_array_size(gpus) > 0) {
		char devs[1024] = "";
		size_t gi;
		json_t *g;
		json_array_foreach(gpus, gi, g) {
			char amount[48], item[160];
			cli_format_fgpu(cli_json_milli(json_object_get(g, "fgpu")), amount, sizeof(amount));
			snprintf(item, sizeof(item), "%s#%" JSON_INTEGER_FORMAT " %s %s", gi ? ", " : "",
				 json_integer_value(json_object_get(g, "index")), cli_json_str(g, "uuid", "?"), amount);
			strncat(devs, item, sizeof(devs) - strlen(devs) - 1);
		}
		session_info_line("GPUs:", devs);
	}
	/* A cluster session's containers, each with its node and status. */
	json_t *containers = json_object_get(s, "containers");
	if (json_integer_value(json_object_get(s, "cluster_size")) > 1 && json_array_size(containers)) {
		char what[96];
		snprintf(what, sizeof(what), "%zu containers, %s (CPU, memory and fGPU above are each's)",
			 json_array_size(containers), cli_json_str(s, "cluster_mode", "single-node"));
		session_info_line("Cluster:", what);
		size_t ci;
		json_t *cx;
		json_array_foreach(containers, ci, cx)
			printf("  %-6s %-10s on %-16s %s\n", cli_json_str(cx, "name", "?"), cli_json_str(cx, "status", "?"),
			       cli_json_str(cx, "agent", "-"), cli_json_str(cx, "status_info", ""));
	}
	session_info_line("Startup command:", cli_json_str(s, "startup_command", NULL));
	session_info_line("Runs as:", json_is_true(json_object_get(s, "root")) ? "root" : "work (uid 1000)");
	if (json_is_string(json_object_get(s, "starts_at")))
		session_info_line("Starts at:", cli_json_str(s, "starts_at", NULL));
	if (json_is_integer(json_object_get(s, "batch_timeout"))) {
		snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT " s", json_integer_value(json_object_get(s, "batch_timeout")));
		session_info_line("Batch timeout:", buf);
	}
	if (json_array_size(json_object_get(s, "preopen_ports"))) {
		size_t pi, len = 0;
		json_t *px;
		buf[0] = '\0';
		json_array_foreach(json_object_get(s, "preopen_ports"), pi, px)
			len += (size_t)snprintf(buf + len, len < sizeof(buf) ? sizeof(buf) - len : 0, "%s%" JSON_INTEGER_FORMAT,
						pi ? ", " : "", json_integer_value(px));
		session_info_line("Preopen ports:", buf);
	}
	json_t *mounts = json_object_get(s, "mounts");
	if (json_array_size(mounts)) {
		printf("Mounts:\n");
		size_t mi;
		json_t *mx;
		json_array_foreach(mounts, mi, mx)
			printf("  %s at %s%s%s\n", cli_json_str(mx, "folder", "?"), cli_json_str(mx, "path", "?"),
			       json_is_true(json_object_get(mx, "ro")) ? " (read-only)" : "",
			       json_is_true(json_object_get(mx, "automount")) ? " (automount)" : "");
	}
	json_t *code = json_object_get(s, "exit_code");
	if (json_is_integer(code)) {
		snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(code));
		session_info_line("Exit code:", buf);
	} else {
		session_info_line("Exit code:", NULL);
	}
	int64_t kills = cli_json_int(json_object_get(s, "oom_kills"));
	if (kills > 0) {
		/* Processes the kernel killed for passing the session's memory
		 * limit; the status history says when. */
		units_format_size(cli_json_int(json_object_get(res, "mem")), buf, sizeof(buf));
		char line[160];
		snprintf(line, sizeof(line), "%" PRId64 " process%s killed for exceeding the %s memory limit", kills,
			 kills == 1 ? "" : "es", buf);
		session_info_line("OOM kills:", line);
	}
	session_info_line("Created:", cli_json_str(s, "created_at", NULL));
	session_info_line("Started:", cli_json_str(s, "started_at", NULL));
	/* Where the start's time went (docs/api.md, "start_breakdown"):
	 * "0.54 s: queue 0.01 s, dispatch 0.00 s, create 0.03 s, start 0.50 s,
	 * app port 0.00 s". */
	json_t *sb = json_object_get(s, "start_breakdown");
	if (json_is_object(sb)) {
		char line[512];
		int w = snprintf(line, sizeof(line), "%.2f s:", (double)cli_json_int(json_object_get(sb, "total_ms")) / 1000);
		size_t pi;
		json_t *ph;
		json_array_foreach(json_object_get(sb, "phases"), pi, ph)
			if (w > 0 && (size_t)w < sizeof(line))
				w += snprintf(line + w, sizeof(line) - (size_t)w, "%s %s %.2f s", pi ? "," : "",
					      cli_json_str(ph, "phase", "?"),
					      (double)cli_json_int(json_object_get(ph, "ms")) / 1000);
		session_info_line("Start took:", line);
	}
	session_info_line("Terminated:", cli_json_str(s, "terminated_at", NULL));
	json_t *env = json_object_get(s, "env");
	if (json_object_size(env)) {
		printf("Environment:\n");
		const char *k;
		json_t *v;
		json_object_foreach(env, k, v)
			printf("  %s=%s\n", k, json_string_value(v) ? json_string_value(v) : "");
	}
	json_t *lc = json_object_get(s, "last_commit");
	if (json_is_object(lc)) {
		char line[1024];
		const char *st = cli_json_str(lc, "status", "?");
		snprintf(line, sizeof(line), "%s %s%s%s", cli_json_str(lc, "ref", "?"), st,
			 !strcmp(st, "failed") ? ": " : "", !strcmp(st, "failed") ? cli_json_str(lc, "error", "") : "");
		session_info_line("Last commit:", line);
	}
	json_t *hist = json_object_get(s, "status_history");
	if (json_array_size(hist)) {
		printf("Status history:\n");
		static const char *const hdr[] = {"at", "status", "info"};
		struct cli_table *t = cli_table_new(3, hdr);
		size_t i;
		json_t *h;
		json_array_foreach(hist, i, h) {
			const char *row[] = {cli_json_str(h, "at", NULL), cli_json_str(h, "status", NULL),
					     cli_json_str(h, "info", NULL)};
			if (t)
				cli_table_add(t, row);
		}
		if (t) {
			/* Indent the history under its heading. */
			char *text = NULL;
			size_t len = 0;
			FILE *mem = open_memstream(&text, &len);
			if (mem) {
				cli_table_print(t, mem);
				fclose(mem);
				for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
					printf("  %s\n", line);
				free(text);
			}
			cli_table_free(t);
		}
	}
}

static int session_info(int argc, char **argv)
{
	int as_json = 0, all = 0;
	int rc = session_simple_opts("session info", INFO_USAGE, 0, argc, argv, &as_json, &all);
	if (rc >= 0)
		return rc;
	if (optind >= argc)
		return cli_usage_fail("session info", "which session? usage: tessera session info NAME");
	if (optind + 1 < argc)
		return cli_usage_fail("session info", "unexpected argument '%s'", argv[optind + 1]);
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *s = NULL;
	char *path = session_path(argv[optind], NULL);
	if (!path)
		return cli_fail("out of memory");
	if (cli_connect(&cfg, &c, &err) < 0 ||
	    api_call(&c, "GET", path, NULL, 0, &s, NULL, &err) < 0) {
		free(path);
		cli_config_free(&cfg);
		return cli_fail("%s", err.msg);
	}
	free(path);
	if (as_json)
		cli_print_json(s);
	else
		session_print_info(s);
	json_decref(s);
	cli_config_free(&cfg);
	return CLI_EXIT_OK;
}

/* ---- rm / logs / exec ------------------------------------------------ */

static int session_rm(int argc, char **argv)
{
	int as_json = 0, all = 0;
	int rc = session_simple_opts("session rm", RM_USAGE, 0, argc, argv, &as_json, &all);
	if (rc >= 0)
		return rc;
	if (as_json)
		return cli_usage_fail("session rm", "option '--json' is not supported here");
	if (optind >= argc)
		return cli_usage_fail("session rm", "which session? usage: tessera session rm NAME...");
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	if (cli_connect(&cfg, &c, &err) < 0) {
		cli_config_free(&cfg);
		return cli_fail("%s", err.msg);
	}
	rc = CLI_EXIT_OK;
	for (int i = optind; i < argc; i++) {
		char *path = session_path(argv[i], NULL);
		if (!path) {
			rc = cli_fail("out of memory");
			break;
		}
		if (api_call(&c, "DELETE", path, NULL, 0, NULL, NULL, &err) < 0)
			rc = cli_fail("cannot remove %s: %s", argv[i], err.msg);
		else
			printf("%s\n", argv[i]);
		fflush(stdout);
		free(path);
	}
	cli_config_free(&cfg);
	return rc;
}

/* Bytes of a stream go out as they come. */
static int session_write_out(const char *data, size_t len, void *ud)
{
	FILE *out = ud;
	if (fwrite(data, 1, len, out) != len)
		return 1;
	fflush(out);
	return 0;
}

static int session_logs(int argc, char **argv)
{
	static const struct option opts[] = {
		{"tail", required_argument, NULL, 't'},
		{"follow", no_argument, NULL, 'f'},
		{"owner", required_argument, NULL, 'o'},
		{"container", required_argument, NULL, 'C'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	long tail = -1;
	int follow = 0;
	session_reset_getopt();
	for (int o; (o = getopt_long(argc, argv, "hf", opts, NULL)) != -1;) {
		if (o == 'h') {
			fputs(LOGS_USAGE, stdout);
			return CLI_EXIT_OK;
		} else if (o == 'f') {
			follow = 1;
		} else if (o == 'C') {
			cli_session_container = optarg;
		} else if (o == 'o') {
			session_owner = optarg;
		} else if (o == 't') {
			char *end;
			tail = strtol(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || tail > 1000000)
				return cli_usage_fail("session logs", "--tail needs a number of lines up to 1000000, not '%s'",
						      optarg);
		} else {
			return session_bad_option("session logs", argv);
		}
	}
	if (optind >= argc)
		return cli_usage_fail("session logs", "which session? usage: tessera session logs NAME");
	if (optind + 1 < argc)
		return cli_usage_fail("session logs", "unexpected argument '%s'", argv[optind + 1]);
	char suffix[64] = "/logs";
	if (tail >= 0)
		snprintf(suffix, sizeof(suffix), "/logs?tail=%ld%s", tail, follow ? "&follow=1" : "");
	else if (follow)
		snprintf(suffix, sizeof(suffix), "/logs?follow=1");
	char *path = session_path(argv[optind], suffix);
	if (!path)
		return cli_fail("out of memory");
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	int rc = CLI_EXIT_OK;
	/* No time limit: a log may be long, a followed one has no end. */
	if (cli_connect(&cfg, &c, &err) < 0 ||
	    api_stream(&c, "GET", path, NULL, 0, "text/plain", NULL, session_write_out, stdout, NULL, NULL,
		       &err) < 0)
		rc = cli_fail("%s", err.msg);
	free(path);
	cli_config_free(&cfg);
	return rc;
}

/* The exec stream's frames to stdout and stderr, byte for byte. */
struct exec_out {
	struct frames_decoder dec;
	bool wrong_type;
	bool ended, exited;
	int32_t code;
	char error[512];
	bool write_failed;
};

static int exec_on_data(void *ud, enum frame_type type, const char *data, size_t len)
{
	struct exec_out *eo = ud;
	if (session_write_out(data, len, type == FRAME_STDERR ? stderr : stdout)) {
		eo->write_failed = true;
		return 1;
	}
	return 0;
}

static int exec_on_end(void *ud, bool exited, int32_t code, const char *error)
{
	struct exec_out *eo = ud;
	eo->ended = true;
	eo->exited = exited;
	eo->code = code;
	if (error)
		snprintf(eo->error, sizeof(eo->error), "%s", error);
	return 0;
}

static int exec_on_open(const char *content_type, void *ud)
{
	struct exec_out *eo = ud;
	/* Anything but frames (a manager from before streaming) is refused
	 * rather than printed as garbage. */
	eo->wrong_type = strncmp(content_type, FRAMES_CONTENT_TYPE, strlen(FRAMES_CONTENT_TYPE)) != 0;
	return eo->wrong_type;
}

static int exec_on_bytes(const char *data, size_t len, void *ud)
{
	struct exec_out *eo = ud;
	return frames_feed(&eo->dec, data, len) < 0;
}

/* Options of `session exec`, before or after NAME; stops at the first
 * non-option or after "--" (getopt's '+'), so the command's own options
 * stay its own. Returns -1 to go on, else the exit code. */
static int session_exec_opts(int argc, char **argv, long *timeout_s)
{
	static const struct option opts[] = {
		{"timeout", required_argument, NULL, 't'},
		{"owner", required_argument, NULL, 'o'},
		{"container", required_argument, NULL, 'C'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *sub = "session exec";
	for (int o; (o = getopt_long(argc, argv, "+h", opts, NULL)) != -1;) {
		if (o == 'h') {
			fputs(EXEC_USAGE, stdout);
			return CLI_EXIT_OK;
		} else if (o == 'C') {
			cli_session_container = optarg;
		} else if (o == 'o') {
			session_owner = optarg;
		} else if (o == 't') {
			char *end;
			*timeout_s = strtol(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || *timeout_s < 1 ||
			    *timeout_s > 3600)
				return cli_usage_fail(sub, "--timeout must be 1..3600 seconds, not '%s'",
						      optarg);
		} else {
			return session_bad_option(sub, argv);
		}
	}
	return -1;
}

static int session_exec(int argc, char **argv)
{
	const char *sub = "session exec";
	long timeout_s = 0;
	session_reset_getopt();
	int orc = session_exec_opts(argc, argv, &timeout_s);
	if (orc >= 0)
		return orc;
	int i = optind;
	if (i < argc && !strcmp(argv[i], "--"))
		i++;  /* "exec -- NAME -- CMD" is odd but harmless */
	if (i >= argc)
		return cli_usage_fail(sub, "which session? usage: tessera session exec NAME -- CMD...");
	const char *name = argv[i++];
	/* Options may also follow NAME, as the usage line shows them. The
	 * argument vector from NAME on looks like a fresh one to getopt. */
	if (i < argc && argv[i][0] == '-' && strcmp(argv[i], "--") != 0) {
		session_reset_getopt();
		int sub_argc = argc - (i - 1);
		orc = session_exec_opts(sub_argc, argv + (i - 1), &timeout_s);
		if (orc >= 0)
			return orc;
		i = (i - 1) + optind;
	} else if (i < argc && !strcmp(argv[i], "--")) {
		i++;
	}
	if (i >= argc)
		return cli_usage_fail(sub, "no command given; usage: tessera session exec NAME -- CMD...");

	json_t *cmd = json_array();
	for (; i < argc; i++)
		json_array_append_new(cmd, json_string(argv[i]));
	json_t *body = json_pack("{s:o}", "command", cmd);
	if (timeout_s)
		json_object_set_new(body, "timeout_s", json_integer(timeout_s));
	char *path = session_path(name, "/exec");
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	struct exec_out eo = {0};
	frames_decoder_init(&eo.dec, &(struct frames_sink){.on_data = exec_on_data, .on_end = exec_on_end, .ud = &eo});
	int rc;
	/* No time limit on the transfer: the server stops the command at
	 * timeout_s (default 600 s), and output may take long to read. */
	if (!path || !body) {
		rc = cli_fail("out of memory");
	} else if (cli_connect(&cfg, &c, &err) < 0 ||
		   api_stream(&c, "POST", path, body, 0, FRAMES_CONTENT_TYPE, exec_on_open, exec_on_bytes, &eo, NULL,
			      NULL, &err) < 0) {
		rc = cli_fail("%s", err.msg);
	} else if (eo.write_failed) {
		rc = cli_fail("cannot write the command's output");
	} else if (eo.wrong_type) {
		rc = cli_fail("the manager answered something other than the command's output stream (an older version?)");
	} else if (frames_finish(&eo.dec) < 0) {
		rc = cli_fail("the command's output stream was cut short or is not Tessera's frames");
	} else if (!eo.exited) {
		rc = cli_fail("%s", eo.error[0] ? eo.error : "the command's outcome is unknown");
	} else {
		rc = eo.code < 0 || eo.code > 255 ? CLI_EXIT_FAIL : (int)eo.code;
	}
	json_decref(body);
	free(path);
	cli_config_free(&cfg);
	return rc;
}

/* ---- commit ---------------------------------------------------------- */

static void session_print_commit(json_t *commit)
{
	const char *st = cli_json_str(commit, "status", "?");
	if (!strcmp(st, "committing")) {
		printf("committing %s into %s\n", cli_json_str(commit, "source_session", "?"), cli_json_str(commit, "ref", "?"));
	} else if (!strcmp(st, "ready")) {
		printf("%s is ready%s\n", cli_json_str(commit, "ref", "?"),
		       json_is_true(json_object_get(commit, "in_registry")) ? " (pushed to the cluster registry)" : "");
		const char *pe = cli_json_str(commit, "push_error", NULL);
		if (pe)
			fprintf(stderr, "tessera: warning: the image stays on its node: %s\n", pe);
	}
}

static int session_commit(int argc, char **argv)
{
	static const struct option opts[] = {
		{"name", required_argument, NULL, 'n'},
		{"tag", required_argument, NULL, 'T'},
		{"owner", required_argument, NULL, 'o'},
		{"wait", no_argument, NULL, 'w'},
		{"timeout", required_argument, NULL, 't'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	const char *name = NULL, *tag = NULL;
	int wait = 0, as_json = 0, c;
	long timeout_s = 1800;
	session_owner = NULL;
	session_reset_getopt();
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': name = optarg; break;
		case 'T': tag = optarg; break;
		case 'o': session_owner = optarg; break;
		case 'w': wait = 1; break;
		case 'j': as_json = 1; break;
		case 't': {
			char *end;
			timeout_s = strtol(optarg, &end, 10);
			if (*end || timeout_s < 1 || timeout_s > 86400)
				return cli_usage_fail("session commit", "--timeout must be 1 to 86400 seconds");
			break;
		}
		case 'h': fputs(COMMIT_USAGE, stdout); return CLI_EXIT_OK;
		default: return session_bad_option("session commit", argv);
		}
	}
	if (optind >= argc)
		return cli_usage_fail("session commit", "which session? usage: tessera session commit NAME");
	if (optind + 1 < argc)
		return cli_usage_fail("session commit", "unexpected argument '%s'", argv[optind + 1]);
	struct cli_config cfg = {0};
	struct api_client api;
	struct terr err = {0};
	json_t *resp = NULL;
	json_t *body = json_object();
	if (name)
		json_object_set_new(body, "name", json_string(name));
	if (tag)
		json_object_set_new(body, "tag", json_string(tag));
	char *path = session_path(argv[optind], "/commit");
	int rc = CLI_EXIT_OK;
	if (!path || !body) {
		rc = cli_fail("out of memory");
		goto out;
	}
	if (cli_connect(&cfg, &api, &err) < 0 || api_call(&api, "POST", path, body, 0, &resp, NULL, &err) < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	json_t *commit = json_incref(json_object_get(resp, "commit"));
	if (!as_json || !wait)
		session_print_commit(commit);
	/* The commit runs in the manager; waiting is a long poll on it. */
	time_t deadline = time(NULL) + timeout_s;
	while (wait && !strcmp(cli_json_str(commit, "status", ""), "committing")) {
		long left = (long)(deadline - time(NULL));
		if (left <= 0) {
			rc = cli_fail("still committing after %ld s; see 'tessera image ls'", timeout_s);
			break;
		}
		char *esc = api_escape(cli_json_str(commit, "id", ""));
		char *cpath = NULL;
		if (!esc || asprintf(&cpath, "/v1/commits/%s?wait=1&timeout_s=%ld", esc, left > 60 ? 60 : left) < 0)
			cpath = NULL;
		free(esc);
		json_t *r = NULL;
		if (!cpath || api_call(&api, "GET", cpath, NULL, 90000, &r, NULL, &err) < 0) {
			free(cpath);
			rc = cli_fail("%s", cpath ? err.msg : "out of memory");
			break;
		}
		free(cpath);
		json_decref(commit);
		commit = json_incref(json_object_get(r, "commit"));
		json_decref(r);
	}
	if (rc == CLI_EXIT_OK) {
		if (as_json)
			cli_print_json(commit);
		else if (wait)
			session_print_commit(commit);
		if (!strcmp(cli_json_str(commit, "status", ""), "failed"))
			rc = cli_fail("the commit into %s failed: %s", cli_json_str(commit, "ref", "?"),
				      cli_json_str(commit, "error", "?"));
	}
	json_decref(commit);
out:
	json_decref(resp);
	json_decref(body);
	free(path);
	cli_config_free(&cfg);
	return rc;
}

/* One list of verbs; the usage text and the dispatch come from it. */
static const struct cli_verb session_verbs[] = {
	{"create", session_create, "create IMAGE [options]", "create one or more sessions",
	 "--name=NAME --cpu=X --mem=SIZE --fgpu=X --count=K --env=K=V --startup-command=CMD --batch --root "
	 "--starts-at=TIME --batch-timeout=SECONDS --preopen=PORT "
	 "--mount=FOLDER --project=PROJECT --group=GROUP --priority=N --preemptible --no-preemptible "
	 "--cluster-size=N --cluster-mode=single-node|multi-node --wait --timeout=SECONDS --json",
	 "IMAGE"},
	{"ls", session_ls, "ls [--all | --finished] [--json]",
	 "list sessions (without --all: not yet ended; --finished: only ended, newest first)",
	 "--all --finished --json", ""},
	{"info", session_info, "info NAME [--owner EMAIL] [--json]", "show one session with its status history",
	 "--owner=EMAIL --json", "SESSION"},
	{"rm", session_rm, "rm NAME... [--owner EMAIL]", "remove sessions",
	 "--owner=EMAIL", "SESSION..."},
	{"logs", session_logs, "logs NAME [--tail N] [--follow]", "print a session's container output",
	 "--tail=N -f --follow --owner=EMAIL --container=C", "SESSION"},
	{"exec", session_exec, "exec NAME -- CMD...", "run a command in a running session",
	 "--timeout=SECONDS --owner=EMAIL --container=C", "SESSION"},
	{"commit", session_commit, "commit NAME [--name IMAGE] [--tag TAG] [--wait]",
	 "convert a running session into a private image",
	 "--owner=EMAIL --name=IMAGE_NAME --tag=TAG --wait --timeout=SECONDS --json", "SESSION"},
	{"apps", cmd_session_apps, "apps NAME [--json]", "list a session's apps (terminal, jupyter...)",
	 "--owner=EMAIL --container=C --json", "SESSION"},
	{"app", cmd_session_app, "app NAME APP|--port N", "open an app: print a one-time URL for a browser",
	 "--port=N --owner=EMAIL --container=C --json", "SESSION APP"},
	{"shell", cmd_session_shell, "shell NAME", "an interactive shell in a running session",
	 "--owner=EMAIL --container=C", "SESSION"},
	{"ssh", cmd_session_ssh, "ssh NAME [-- CMD...]", "log in with OpenSSH's ssh (your keys: tessera user keys)",
	 "--owner=EMAIL --container=C -i=FILE --identity=FILE", "SESSION"},
	{"ssh-config", cmd_session_ssh_config, "ssh-config NAME",
	 "an OpenSSH Host block: ssh, scp, sftp, rsync and VS Code reach the session",
	 "--owner=EMAIL --container=C", "SESSION"},
	{"ssh-proxy", cmd_session_ssh_proxy, "ssh-proxy NAME", "the ProxyCommand of that block (stdin/stdout to sshd)",
	 "--owner=EMAIL --container=C", "SESSION"},
	{"stats", cmd_session_stats, "stats NAME [--watch] [--json]",
	 "live CPU, memory, GPU, network and block I/O use of a session",
	 "--watch --json --owner=EMAIL", "SESSION"},
};

const struct cli_noun cli_session_noun = {
	.name = "session",
	.verbs = session_verbs,
	.n_verbs = CLI_NVERBS(session_verbs),
	.usage = "usage: tessera session <command> [options]\n\ncommands:\n",
	.usage_end = "\nNAME is a session name or id. Run 'tessera session <command> --help'.\n",
	.missing = "missing command",
	.help_verb = true,
};

int cmd_session(int argc, char **argv)
{
	return cli_dispatch(&cli_session_noun, argc, argv);
}
