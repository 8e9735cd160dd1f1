/* `tessera user ...` (admins: the users over /v1/users) and `tessera key
 * ...` (everyone: their own API keys over /v1/keypairs); docs/admin.md,
 * "Users", and docs/user-guide.md, "API keys". */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/table.h"
#include "common/apiclient.h"

#define USER_USAGE \
	"usage: tessera user COMMAND ...\n" \
	"\n" \
	"The cluster's users (administrators only; keys and passwd: every user, their\n" \
	"own). EMAIL may also be a user's id.\n" \
	"\n"
#define USER_USAGE_END \
	"\n" \
	"create and reset-password print a generated password once; with\n" \
	"--password-stdin they read one line from stdin instead. A user's API keys:\n" \
	"tessera key (their own), or on the web UI's Credentials page.\n"

#define KEY_USAGE \
	"usage: tessera key COMMAND ...\n" \
	"\n" \
	"Your API keys: the access key and secret key the CLI signs with (a\n" \
	"client.conf holds one). The main key is the one the web UI signs with for\n" \
	"your browsers; revoking it ends your web logins and makes a new main key.\n" \
	"\n"

/* Options every verb may take; each says which it accepts. */
struct uopts {
	bool json, admin, no_admin, disabled, enabled, password_stdin;
	const char *label;
	int nargs;
	char *args[1];
};

enum { O_JSON = 1, O_ADMIN, O_NO_ADMIN, O_DISABLED, O_ENABLED, O_PW_STDIN, O_LABEL };
#define BIT(x) (1u << (x))

/* Parses argv (from the verb on) into o; allowed: the O_* bits accepted;
 * nargs the positional arguments wanted. CLI_EXIT_OK or a usage failure's
 * code (then *done). */
static int parse(const char *noun, const char *verb, int argc, char **argv, unsigned allowed, int nargs,
		 const char *usage, struct uopts *o, bool *done)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, O_JSON},
		{"admin", no_argument, NULL, O_ADMIN},
		{"no-admin", no_argument, NULL, O_NO_ADMIN},
		{"disabled", no_argument, NULL, O_DISABLED},
		{"enabled", no_argument, NULL, O_ENABLED},
		{"password-stdin", no_argument, NULL, O_PW_STDIN},
		{"label", required_argument, NULL, O_LABEL},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	*done = true;
	memset(o, 0, sizeof(*o));
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		if (c == 'h') {
			printf("usage: tessera %s %s\n", noun, usage);
			return CLI_EXIT_OK;
		}
		if (c == '?' || c == ':' || !(allowed & (1u << c)))
			return cli_usage_fail(noun, "%s: option '%s' is unknown or needs a value", verb, argv[optind - 1]);
		switch (c) {
		case O_JSON: o->json = true; break;
		case O_ADMIN: o->admin = true; break;
		case O_NO_ADMIN: o->no_admin = true; break;
		case O_DISABLED: o->disabled = true; break;
		case O_ENABLED: o->enabled = true; break;
		case O_PW_STDIN: o->password_stdin = true; break;
		case O_LABEL: o->label = optarg; break;
		}
	}
	if (argc - optind != nargs)
		return cli_usage_fail(noun, "%s needs %s", verb, usage);
	for (int i = 0; i < nargs; i++)
		o->args[i] = argv[optind + i];
	*done = false;
	return CLI_EXIT_OK;
}


/* "/v1/users/<escaped ref><suffix>", malloc'd. */
static char *user_path(const char *ref, const char *suffix)
{
	char *esc = api_escape(ref), *path = NULL;
	if (esc && asprintf(&path, "/v1/users/%s%s", esc, suffix ? suffix : "") < 0)
		path = NULL;
	free(esc);
	return path;
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

/* "2026-01-02T03:04:05.678Z" -> "2026-01-02 03:04" */
static void short_time(const char *iso, char *buf, size_t n)
{
	snprintf(buf, n, "%.10s %.5s", iso, strlen(iso) > 11 ? iso + 11 : "");
	if (!iso[0])
		snprintf(buf, n, "-");
}

/* Reads a password, one line, from stdin (without its newline). */
static int read_password(char *out, size_t n)
{
	if (!fgets(out, (int)n, stdin))
		return cli_fail("--password-stdin: no password on stdin");
	size_t len = strcspn(out, "\r\n");
	if (out[len] == '\0' && !feof(stdin))
		return cli_fail("--password-stdin: the password is longer than %zu characters", n - 2);
	out[len] = '\0';
	if (!len)
		return cli_fail("--password-stdin: the line on stdin is empty");
	return CLI_EXIT_OK;
}

/* ---------- tessera user ---------- */

static int user_ls(int argc, char **argv)
{
	struct uopts o;
	bool done;
	int rc = parse("user", "ls", argc, argv, BIT(O_JSON), 0, "ls [--json]", &o, &done);
	if (done)
		return rc;
	json_t *reply = NULL;
	rc = cli_call("GET", "/v1/users", NULL, &reply);
	json_t *users = json_object_get(reply, "users");
	if (rc == CLI_EXIT_OK && !json_is_array(users))
		rc = cli_fail("unexpected answer from the manager: no 'users' array");
	if (rc == CLI_EXIT_OK && o.json) {
		cli_print_json(users);
	} else if (rc == CLI_EXIT_OK) {
		static const char *const h[] = {"email", "role", "state", "access key", "created"};
		struct cli_table *t = cli_table_new(5, h);
		size_t i;
		json_t *u;
		json_array_foreach(users, i, u) {
			char at[40];
			short_time(str(u, "created_at"), at, sizeof(at));
			const char *row[] = {str(u, "email"), json_is_true(json_object_get(u, "is_admin")) ? "admin" : "user",
					     json_is_true(json_object_get(u, "disabled")) ? "disabled" : "active",
					     str(u, "access_key"), at};
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

/* The keys of a user or of the caller, as a table. */
static int print_keys(json_t *keys)
{
	static const char *const h[] = {"access key", "label", "created", "main", "used now"};
	struct cli_table *t = cli_table_new(5, h);
	size_t i;
	json_t *k;
	json_array_foreach(keys, i, k) {
		char at[40];
		short_time(str(k, "created_at"), at, sizeof(at));
		const char *row[] = {str(k, "access_key"), str(k, "label")[0] ? str(k, "label") : "-", at,
				     json_is_true(json_object_get(k, "main")) ? "yes" : "no",
				     json_is_true(json_object_get(k, "current")) ? "yes" : ""};
		if (t && cli_table_add(t, row) < 0) {
			cli_table_free(t);
			t = NULL;
		}
	}
	if (!t)
		return cli_fail("out of memory");
	cli_table_print(t, stdout);
	cli_table_free(t);
	return CLI_EXIT_OK;
}

static int user_info(int argc, char **argv)
{
	struct uopts o;
	bool done;
	int rc = parse("user", "info", argc, argv, BIT(O_JSON), 1, "info EMAIL [--json]", &o, &done);
	if (done)
		return rc;
	char *path = user_path(o.args[0], NULL);
	json_t *reply = NULL;
	rc = cli_call("GET", path, NULL, &reply);
	free(path);
	if (rc == CLI_EXIT_OK && o.json) {
		cli_print_json(reply);
	} else if (rc == CLI_EXIT_OK) {
		json_t *u = json_object_get(reply, "user");
		char at[40];
		short_time(str(u, "created_at"), at, sizeof(at));
		printf("email:    %s\nid:       %s\nrole:     %s\nstate:    %s\ncreated:  %s\n", str(u, "email"),
		       str(u, "id"), json_is_true(json_object_get(u, "is_admin")) ? "administrator" : "user",
		       json_is_true(json_object_get(u, "disabled")) ? "disabled" : "active", at);
		size_t i;
		json_t *x, *sessions = json_object_get(reply, "sessions"), *folders = json_object_get(reply, "folders");
		printf("sessions: %s", json_array_size(sessions) ? "" : "none not ended");
		json_array_foreach(sessions, i, x)
			printf("%s%s (%s)", i ? ", " : "", str(x, "name"), str(x, "status"));
		printf("\nfolders:  %s", json_array_size(folders) ? "" : "none");
		json_array_foreach(folders, i, x)
			printf("%s%s (id %s)", i ? ", " : "", str(x, "name"), str(x, "id"));
		printf("\n\nAPI keys:\n");
		rc = print_keys(json_object_get(reply, "keypairs"));
	}
	json_decref(reply);
	return rc;
}

static int user_create(int argc, char **argv)
{
	struct uopts o;
	bool done;
	int rc = parse("user", "create", argc, argv, BIT(O_JSON) | BIT(O_ADMIN) | BIT(O_PW_STDIN), 1,
		       "create EMAIL [--admin] [--password-stdin] [--json]", &o, &done);
	if (done)
		return rc;
	char pw[300];
	if (o.password_stdin && (rc = read_password(pw, sizeof(pw))) != CLI_EXIT_OK)
		return rc;
	json_t *body = json_pack("{s:s,s:b}", "email", o.args[0], "is_admin", o.admin);
	if (o.password_stdin)
		json_object_set_new(body, "password", json_string(pw));
	json_t *reply = NULL;
	rc = cli_call("POST", "/v1/users", body, &reply);
	if (rc == CLI_EXIT_OK && o.json) {
		cli_print_json(reply);
	} else if (rc == CLI_EXIT_OK) {
		json_t *u = json_object_get(reply, "user");
		printf("user %s created%s\n  access key: %s\n  secret key: %s (shown this once)\n", str(u, "email"),
		       json_is_true(json_object_get(u, "is_admin")) ? " (administrator)" : "", str(u, "access_key"),
		       str(reply, "secret_key"));
		if (json_object_get(reply, "password"))
			printf("  password:   %s (generated; shown this once)\n", str(reply, "password"));
	}
	json_decref(body);
	json_decref(reply);
	return rc;
}

static int user_set(int argc, char **argv)
{
	struct uopts o;
	bool done;
	int rc = parse("user", "set", argc, argv, BIT(O_JSON) | BIT(O_ADMIN) | BIT(O_NO_ADMIN) | BIT(O_DISABLED) |
		       BIT(O_ENABLED), 1, "set EMAIL [--disabled | --enabled] [--admin | --no-admin]", &o, &done);
	if (done)
		return rc;
	if ((o.admin && o.no_admin) || (o.disabled && o.enabled))
		return cli_usage_fail("user", "set: --admin and --no-admin, or --disabled and --enabled, together");
	if (!o.admin && !o.no_admin && !o.disabled && !o.enabled)
		return cli_usage_fail("user", "set: nothing to change: give --disabled, --enabled, --admin or --no-admin");
	json_t *body = json_object();
	if (o.admin || o.no_admin)
		json_object_set_new(body, "is_admin", json_boolean(o.admin));
	if (o.disabled || o.enabled)
		json_object_set_new(body, "disabled", json_boolean(o.disabled));
	char *path = user_path(o.args[0], NULL);
	json_t *reply = NULL;
	rc = cli_call("PATCH", path, body, &reply);
	free(path);
	json_t *u = json_object_get(reply, "user");
	if (rc == CLI_EXIT_OK && o.json)
		cli_print_json(u);
	else if (rc == CLI_EXIT_OK)
		printf("user %s: %s, %s\n", str(u, "email"),
		       json_is_true(json_object_get(u, "is_admin")) ? "administrator" : "user",
		       json_is_true(json_object_get(u, "disabled")) ? "disabled" : "active");
	json_decref(body);
	json_decref(reply);
	return rc;
}

static int user_rm(int argc, char **argv)
{
	struct uopts o;
	bool done;
	int rc = parse("user", "rm", argc, argv, BIT(O_JSON), 1, "rm EMAIL [--json]", &o, &done);
	if (done)
		return rc;
	char *path = user_path(o.args[0], NULL);
	json_t *reply = NULL;
	rc = cli_call("DELETE", path, NULL, &reply);
	free(path);
	if (rc == CLI_EXIT_OK && o.json)
		cli_print_json(reply);
	else if (rc == CLI_EXIT_OK)
		printf("user %s removed: %lld API key%s revoked; %lld ended session%s kept in the history\n",
		       str(json_object_get(reply, "removed"), "email"),
		       (long long)json_integer_value(json_object_get(reply, "revoked_keys")),
		       json_integer_value(json_object_get(reply, "revoked_keys")) == 1 ? "" : "s",
		       (long long)json_integer_value(json_object_get(reply, "ended_sessions_kept")),
		       json_integer_value(json_object_get(reply, "ended_sessions_kept")) == 1 ? "" : "s");
	json_decref(reply);
	return rc;
}

static int user_reset_password(int argc, char **argv)
{
	struct uopts o;
	bool done;
	int rc = parse("user", "reset-password", argc, argv, BIT(O_JSON) | BIT(O_PW_STDIN), 1,
		       "reset-password EMAIL [--password-stdin] [--json]", &o, &done);
	if (done)
		return rc;
	char pw[300];
	if (o.password_stdin && (rc = read_password(pw, sizeof(pw))) != CLI_EXIT_OK)
		return rc;
	json_t *body = json_object();
	if (o.password_stdin)
		json_object_set_new(body, "password", json_string(pw));
	char *path = user_path(o.args[0], "/password");
	json_t *reply = NULL;
	rc = cli_call("POST", path, body, &reply);
	free(path);
	if (rc == CLI_EXIT_OK && o.json)
		cli_print_json(reply);
	else if (rc == CLI_EXIT_OK && json_object_get(reply, "password"))
		printf("the password of %s is now %s (generated; shown this once)\n",
		       str(json_object_get(reply, "user"), "email"), str(reply, "password"));
	else if (rc == CLI_EXIT_OK)
		printf("the password of %s was changed\n", str(json_object_get(reply, "user"), "email"));
	json_decref(body);
	json_decref(reply);
	return rc;
}

/* One line from the terminal without echo (prompt on stderr), or from
 * stdin when it is no terminal or stdin_lines. */
static int read_secret(const char *prompt, bool stdin_lines, char *out, size_t n)
{
	bool tty = !stdin_lines && isatty(STDIN_FILENO);
	struct termios old, quiet;
	if (!tty)
		return read_password(out, n);
	fprintf(stderr, "%s", prompt);
	if (tcgetattr(STDIN_FILENO, &old) < 0)
		return cli_fail("cannot read the terminal's settings: %s", strerror(errno));
	quiet = old;
	quiet.c_lflag &= ~(tcflag_t)ECHO;
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
	int rc = read_password(out, n);
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
	fputc('\n', stderr);
	return rc;
}

/* tessera user passwd: the caller's own password, with the current one
 * (POST /v1/users/{id}/password {"old_password", "password"}). */
static int user_passwd(int argc, char **argv)
{
	struct uopts o;
	bool done;
	int rc = parse("user", "passwd", argc, argv, BIT(O_PW_STDIN), 0, "passwd [--password-stdin]", &o, &done);
	if (done)
		return rc;
	json_t *me = NULL;
	if ((rc = cli_call("GET", "/v1/auth/whoami", NULL, &me)) != CLI_EXIT_OK) {
		json_decref(me);
		return rc;
	}
	json_t *u = json_object_get(me, "user") ? json_object_get(me, "user") : me;
	char email[300];
	snprintf(email, sizeof(email), "%s", str(u, "email"));
	json_decref(me);
	if (!email[0])
		return cli_fail("unexpected answer from the manager: whoami names no email");
	char old[300], pw[300], again[300];
	if ((rc = read_secret("Current password: ", o.password_stdin, old, sizeof(old))) != CLI_EXIT_OK ||
	    (rc = read_secret("New password: ", o.password_stdin, pw, sizeof(pw))) != CLI_EXIT_OK)
		goto out;
	if (!o.password_stdin && isatty(STDIN_FILENO)) {
		if ((rc = read_secret("New password again: ", false, again, sizeof(again))) != CLI_EXIT_OK)
			goto out;
		if (strcmp(pw, again)) {
			rc = cli_fail("the two new passwords differ; nothing was changed");
			goto out;
		}
	}
	json_t *body = json_pack("{s:s,s:s}", "old_password", old, "password", pw);
	char *path = user_path(email, "/password");
	json_t *reply = NULL;
	rc = cli_call("POST", path, body, &reply);
	free(path);
	if (rc == CLI_EXIT_OK)
		printf("your password was changed (%s); your API keys and web logins stay valid\n", email);
	json_decref(body);
	json_decref(reply);
out:
	explicit_bzero(old, sizeof(old));
	explicit_bzero(pw, sizeof(pw));
	explicit_bzero(again, sizeof(again));
	return rc;
}

/* ---------- tessera user keys: the caller's SSH public keys ---------- */

static int ukeys_ls(int argc, char **argv)
{
	struct uopts o;
	bool done;
	int rc = parse("user keys", "ls", argc, argv, BIT(O_JSON), 0, "ls [--json]", &o, &done);
	if (done)
		return rc;
	json_t *reply = NULL;
	rc = cli_call("GET", "/v1/ssh-keys", NULL, &reply);
	json_t *keys = json_object_get(reply, "keys");
	if (rc == CLI_EXIT_OK && !json_is_array(keys)) {
		rc = cli_fail("unexpected answer from the manager: no 'keys' array");
	} else if (rc == CLI_EXIT_OK && o.json) {
		cli_print_json(keys);
	} else if (rc == CLI_EXIT_OK) {
		static const char *const h[] = {"id", "type", "fingerprint", "comment"};
		struct cli_table *t = cli_table_new(4, h);
		size_t i;
		json_t *k;
		json_array_foreach(keys, i, k) {
			const char *row[] = {str(k, "id"), str(k, "type"), str(k, "fingerprint"), str(k, "comment")};
			if (t && cli_table_add(t, row) < 0)
				break;
		}
		if (!t)
			rc = cli_fail("out of memory");
		else if (!json_array_size(keys))
			printf("no SSH keys: add one with 'tessera user keys add ~/.ssh/id_ed25519.pub'\n");
		else
			cli_table_print(t, stdout);
		cli_table_free(t);
	}
	json_decref(reply);
	return rc;
}

static int ukeys_add(int argc, char **argv)
{
	struct uopts o;
	bool done;
	int rc = parse("user keys", "add", argc, argv, 0, 1, "add FILE (a public key, e.g. ~/.ssh/id_ed25519.pub; - for stdin)",
		       &o, &done);
	if (done)
		return rc;
	FILE *f = strcmp(o.args[0], "-") ? fopen(o.args[0], "r") : stdin;
	if (!f)
		return cli_fail("cannot read %s: %s", o.args[0], strerror(errno));
	char text[8192];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	bool too_long = n == sizeof(text) - 1 && !feof(f);
	if (f != stdin)
		fclose(f);
	if (too_long)
		return cli_fail("%s is not a public key: it is over %zu bytes", o.args[0], sizeof(text) - 1);
	text[n] = '\0';
	json_t *body = json_pack("{s:s}", "key", text), *reply = NULL;
	rc = body ? cli_call("POST", "/v1/ssh-keys", body, &reply) : cli_fail("out of memory");
	if (rc == CLI_EXIT_OK)
		printf("SSH key %s added (id %s%s%s); sessions started from now on accept it\n",
		       str(reply, "fingerprint"), str(reply, "id"), str(reply, "comment")[0] ? ", " : "",
		       str(reply, "comment"));
	json_decref(body);
	json_decref(reply);
	return rc;
}

static int ukeys_rm(int argc, char **argv)
{
	struct uopts o;
	bool done;
	int rc = parse("user keys", "rm", argc, argv, 0, 1, "rm ID|FINGERPRINT", &o, &done);
	if (done)
		return rc;
	char *esc = api_escape(o.args[0]), *path = NULL;
	if (esc && asprintf(&path, "/v1/ssh-keys/%s", esc) < 0)
		path = NULL;
	free(esc);
	json_t *reply = NULL;
	rc = path ? cli_call("DELETE", path, NULL, &reply) : cli_fail("out of memory");
	free(path);
	if (rc == CLI_EXIT_OK)
		printf("SSH key %s removed; sessions started from now on refuse it (running ones keep it)\n",
		       str(json_object_get(reply, "removed"), "fingerprint"));
	json_decref(reply);
	return rc;
}

static const struct cli_verb ukeys_verbs[] = {
	{"ls", ukeys_ls, "ls [--json]", "your SSH public keys",
	 "--json", ""},
	{"add", ukeys_add, "add FILE", "add a public key (e.g. ~/.ssh/id_ed25519.pub)",
	 "", "FILE"},
	{"rm", ukeys_rm, "rm ID|FINGERPRINT", "remove one of your keys",
	 "", "KEY"},
};

const struct cli_noun cli_user_keys_noun = {
	.name = "user keys",
	.verbs = ukeys_verbs,
	.n_verbs = CLI_NVERBS(ukeys_verbs),
	.usage = "usage: tessera user keys <command> [options]\n\n"
		 "Your SSH public keys: your sessions' sshd accepts them (tessera session ssh).\n\ncommands:\n",
	.missing = "missing command: ls, add FILE or rm ID",
	.help_verb = true,
};

static int user_keys(int argc, char **argv)
{
	return cli_dispatch(&cli_user_keys_noun, argc, argv);
}

static const struct cli_verb user_verbs[] = {
	{"keys", user_keys, "keys ls|add FILE|rm ID", "your own SSH public keys (every user)",
	 "", ""},
	{"ls", user_ls, "ls [--json]", "every user: role, state, main access key",
	 "--json", ""},
	{"info", user_info, "info EMAIL [--json]", "a user, their API keys, sessions and folders",
	 "--json", "EMAIL"},
	{"create", user_create, "create EMAIL [--admin] [--password-stdin]", "make a user (and their first key)",
	 "--admin --password-stdin --json", "EMAIL"},
	{"set", user_set, "set EMAIL [--disabled|--enabled] [--admin|--no-admin]", "change state or role",
	 "--disabled --enabled --admin --no-admin", "EMAIL"},
	{"rm", user_rm, "rm EMAIL", "remove a user (refused while they have sessions or folders)",
	 "--json", "EMAIL"},
	{"reset-password", user_reset_password, "reset-password EMAIL [--password-stdin]", "set a new password",
	 "--password-stdin --json", "EMAIL"},
	{"passwd", user_passwd, "passwd [--password-stdin]",
	 "change your own password (every user; the current one first; stdin: two lines)",
	 "--password-stdin", ""},
};

const struct cli_noun cli_user_noun = {
	.name = "user",
	.verbs = user_verbs,
	.n_verbs = CLI_NVERBS(user_verbs),
	.usage = USER_USAGE,
	.usage_end = USER_USAGE_END,
	.help_verb = true,
};

int cmd_user(int argc, char **argv)
{
	return cli_dispatch(&cli_user_noun, argc, argv);
}

/* ---------- tessera key ---------- */

static int key_ls(int argc, char **argv)
{
	struct uopts o;
	bool done;
	int rc = parse("key", "ls", argc, argv, BIT(O_JSON), 0, "ls [--json]", &o, &done);
	if (done)
		return rc;
	json_t *reply = NULL;
	rc = cli_call("GET", "/v1/keypairs", NULL, &reply);
	json_t *keys = json_object_get(reply, "keypairs");
	if (rc == CLI_EXIT_OK && !json_is_array(keys))
		rc = cli_fail("unexpected answer from the manager: no 'keypairs' array");
	else if (rc == CLI_EXIT_OK && o.json)
		cli_print_json(keys);
	else if (rc == CLI_EXIT_OK)
		rc = print_keys(keys);
	json_decref(reply);
	return rc;
}

static int key_create(int argc, char **argv)
{
	struct uopts o;
	bool done;
	int rc = parse("key", "create", argc, argv, BIT(O_JSON) | BIT(O_LABEL), 0, "create [--label TEXT] [--json]",
		       &o, &done);
	if (done)
		return rc;
	json_t *body = json_object();
	if (o.label)
		json_object_set_new(body, "label", json_string(o.label));
	json_t *reply = NULL;
	rc = cli_call("POST", "/v1/keypairs", body, &reply);
	if (rc == CLI_EXIT_OK && o.json) {
		cli_print_json(reply);
	} else if (rc == CLI_EXIT_OK) {
		json_t *k = json_object_get(reply, "keypair");
		/* As client.conf holds it: the secret is shown this once. */
		printf("# API key %s%s%s: the secret key is shown this once\nendpoint = %s\naccess_key = %s\n"
		       "secret_key = %s\n", str(k, "access_key"), str(k, "label")[0] ? ", " : "", str(k, "label"),
		       str(reply, "endpoint"), str(k, "access_key"), str(reply, "secret_key"));
	}
	json_decref(body);
	json_decref(reply);
	return rc;
}

static int key_rm(int argc, char **argv)
{
	struct uopts o;
	bool done;
	int rc = parse("key", "rm", argc, argv, 0, 1, "rm ACCESS_KEY", &o, &done);
	if (done)
		return rc;
	char *esc = api_escape(o.args[0]), *path = NULL;
	if (esc && asprintf(&path, "/v1/keypairs/%s", esc) < 0)
		path = NULL;
	free(esc);
	json_t *reply = NULL;
	rc = cli_call("DELETE", path, NULL, &reply);
	free(path);
	if (rc == CLI_EXIT_OK)
		printf("API key %s revoked%s\n", o.args[0],
		       json_is_true(json_object_get(reply, "main_replaced"))
			       ? " (it was the main key: a new main key replaces it; web logins with it end)" : "");
	json_decref(reply);
	return rc;
}

static int key_rotate(int argc, char **argv)
{
	struct uopts o;
	bool done;
	int rc = parse("key", "rotate", argc, argv, BIT(O_JSON), 1, "rotate ACCESS_KEY [--json]", &o, &done);
	if (done)
		return rc;
	char *esc = api_escape(o.args[0]), *path = NULL;
	if (esc && asprintf(&path, "/v1/keypairs/%s/rotate", esc) < 0)
		path = NULL;
	free(esc);
	json_t *reply = NULL;
	rc = cli_call("POST", path, NULL, &reply);
	free(path);
	if (rc == CLI_EXIT_OK && o.json) {
		cli_print_json(reply);
	} else if (rc == CLI_EXIT_OK) {
		json_t *k = json_object_get(reply, "keypair");
		printf("# API key %s replaces %s (now revoked): the secret key is shown this once\nendpoint = %s\n"
		       "access_key = %s\nsecret_key = %s\n", str(k, "access_key"), str(reply, "revoked"),
		       str(reply, "endpoint"), str(k, "access_key"), str(reply, "secret_key"));
	}
	json_decref(reply);
	return rc;
}

static const struct cli_verb key_verbs[] = {
	{"ls", key_ls, "ls [--json]", "your API keys (never their secrets)",
	 "--json", ""},
	{"create", key_create, "create [--label TEXT] [--json]", "a new key; prints it as client.conf lines, once",
	 "--label=TEXT --json", ""},
	{"rm", key_rm, "rm ACCESS_KEY", "revoke one of your keys",
	 "", "ACCESS_KEY"},
	{"rotate", key_rotate, "rotate ACCESS_KEY [--json]",
	 "replace a key by a new one with its label (not the main key); prints it once", "--json", "ACCESS_KEY"},
};

const struct cli_noun cli_key_noun = {
	.name = "key",
	.verbs = key_verbs,
	.n_verbs = CLI_NVERBS(key_verbs),
	.usage = KEY_USAGE,
	.help_verb = true,
};

int cmd_key(int argc, char **argv)
{
	return cli_dispatch(&cli_key_noun, argc, argv);
}
