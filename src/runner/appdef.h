/* How the runner knows a session's apps (docs/apps.md, "How an app is
 * declared"): the image's `ai.backend.service-ports` value, given as
 * `--apps SPEC`, and how to start each one, from the image's
 * /etc/backend.ai/service-defs/NAME.json or the built-in `jupyter`.
 *
 * Pure functions (no I/O but what the caller hands in), unit-tested in
 * tests/runner/test_appdef.c. */
#ifndef TESSERA_RUNNER_APPDEF_H
#define TESSERA_RUNNER_APPDEF_H

#include <stdbool.h>
#include <stddef.h>

#include "common/apphello.h"
#include "common/err.h"

#define APP_NAME_MAX APPHELLO_NAME_MAX        /* with the NUL */
#define APP_MAX 32                            /* declared apps per image */
#define APP_RUNNER_PORT APPHELLO_RUNNER_PORT  /* the runner's own port: no app may take it */

enum app_proto { APP_HTTP, APP_TCP, APP_PREOPEN };

struct app_decl {
	char name[APP_NAME_MAX];
	enum app_proto proto;
	int port;
};

/* Whether s is an app name: [A-Za-z0-9_.-], 1 to 63 characters, not
 * starting with '.' or '-' (apphello_valid_name: the rule the
 * TESSERA-APP/1 line's app:NAME is checked by). */
bool appdef_valid_name(const char *s, size_t len);

/* Parses `name:proto:port,...` (spaces around entries allowed; empty:
 * no apps) into out[0..max). Refused with -EINVAL and a message naming the
 * entry: a bad name, `terminal` (the runner's own), an unknown protocol, a
 * port outside 1-65535 or 7611, a name or port twice, more than max. */
int appdef_parse_spec(const char *spec, struct app_decl *out, size_t max, size_t *n,
		      struct terr *err);

const char *appdef_proto_name(enum app_proto p);

enum app_action_kind { APP_ACT_WRITE_FILE, APP_ACT_RUN };

struct app_action {
	enum app_action_kind kind;
	char *filename;      /* write_file */
	char *body;          /* write_file: the strings of `body` joined */
	unsigned mode;       /* write_file: 0644 unless given */
	bool append;         /* write_file */
	char **argv;         /* run_command, NULL-terminated */
};

/* A way to start an app; owns every string in it (appdef_service_free). */
struct app_service {
	char **argv;         /* NULL-terminated, placeholders substituted */
	char **env;          /* "KEY=VALUE", NULL-terminated */
	struct app_action *prestart;
	size_t n_prestart;
};

/* s with every `{ports[0]}` replaced by port, malloc'ed into *out.
 * -EINVAL for any other `{...}` placeholder (Backend.AI's {runtime_path}
 * and action refs are not known here: the definition says what it needs
 * by name then), -ENOMEM. */
int appdef_subst(const char *s, int port, char **out, struct terr *err);

/* Parses a Backend.AI service definition (JSON text) for an app on port:
 * `command` (array of strings, required), `prestart` (actions
 * `write_file` {filename, body (string or array of strings), mode (octal
 * string or number), append} and `run_command` {command: array}, their
 * arguments under "args" as Backend.AI writes them or beside "action"),
 * `env` (object of strings). Other keys are ignored. */
int appdef_parse_service(const char *json, size_t len, int port, struct app_service *out,
			 struct terr *err);

/* The built-in definition of `jupyter`: Jupyter Notebook on 127.0.0.1:port
 * with no token or password of its own; `jupyter notebook` when the image
 * has `jupyter` on its PATH (have_jupyter), else `python3 -m notebook`. */
int appdef_builtin_jupyter(bool have_jupyter, int port, struct app_service *out, struct terr *err);

/* The built-in definition of `sshd` (SSH into the session, docs/
 * user-guide.md): the image's sshd binary run in the foreground with the
 * configuration the runner wrote (src/runner/cluster.h), on port. */
int appdef_builtin_sshd(const char *sshd, const char *config, int port, struct app_service *out, struct terr *err);

void appdef_service_free(struct app_service *s);

#endif
