/* Shared pieces of the client verbs: where the endpoint and keypair come
 * from, turning them into an api_client, printing errors and JSON. */
#ifndef TESSERA_CLI_CLIENT_H
#define TESSERA_CLI_CLIENT_H

#include <jansson.h>
#include <stdint.h>
#include <time.h>

#include "common/apiclient.h"
#include "common/err.h"

/* Exit codes of every verb. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

struct cli_config {
	char *endpoint;    /* owned; NULL when nowhere set */
	char *access_key;  /* owned */
	char *secret_key;  /* owned */
	char *file;        /* owned; the config file that was read, or NULL */
};

/* Resolves the configuration. Sources, lowest precedence first:
 *   ~/.config/tessera/client.conf  (skipped when TESSERA_CONFIG is set)
 *   the file named by TESSERA_CONFIG (e.g. DATA_DIR/admin.conf; must exist)
 *   TESSERA_ENDPOINT, TESSERA_ACCESS_KEY, TESSERA_SECRET_KEY (per key)
 * A missing client.conf is not an error; an unreadable or malformed file
 * is. Unknown keys in the files are ignored (admin.conf has more). Fills
 * cfg (release with cli_config_free); fields may stay NULL. */
int cli_config_load(struct cli_config *cfg, struct terr *err);
void cli_config_free(struct cli_config *cfg);

/* Path of the per-user client.conf ($HOME/.config/tessera/client.conf);
 * malloc'd, caller frees; NULL when no home directory is known. */
char *cli_client_conf_path(void);

/* Loads the configuration and checks it is complete; c borrows from cfg.
 * "no endpoint configured; run 'tessera login' or set TESSERA_CONFIG". */
int cli_connect(struct cli_config *cfg, struct api_client *c, struct terr *err);

/* One signed API call with the configuration loaded anew: CLI_EXIT_OK,
 * or CLI_EXIT_FAIL after printing why (path NULL: out of memory). *reply
 * the answer (new reference, may be NULL) when reply is not NULL. path
 * and body are borrowed. */
int cli_call(const char *method, const char *path, json_t *body, json_t **reply);

/* Prints "tessera: <message>" on stderr; returns CLI_EXIT_FAIL. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Same for usage errors, adding a hint to run `tessera VERB --help`;
 * returns CLI_EXIT_USAGE. */
int cli_usage_fail(const char *verb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Pretty-prints a JSON value on stdout with a final newline. */
void cli_print_json(json_t *v);

/* Amount fields as the API returns them (number with up to 3 decimals, or
 * a string): milli-units; 0 when absent or unreadable. */
int64_t cli_json_milli(json_t *v);
/* Integer (bytes, counts); 0 when absent. */
int64_t cli_json_int(json_t *v);
/* String member of obj, or dflt when absent/null. Borrowed. */
const char *cli_json_str(json_t *obj, const char *key, const char *dflt);

/* Parses an RFC 3339 UTC time ("2026-11-22T08:40:00.123Z"). */
int cli_parse_time(const char *s, time_t *out);

#endif
