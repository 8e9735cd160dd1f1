/* What session_apps.c shares with the other verbs that open a session's
 * app through the proxy (session_ssh.c). */
#ifndef TESSERA_CLI_SESSION_APPS_H
#define TESSERA_CLI_SESSION_APPS_H

#include <jansson.h>

#include "common/apiclient.h"
#include "common/err.h"
#include "common/wsconn.h"

/* POST /v1/sessions/{ref}/apps/{app}: the manager's answer (owned) with
 * its one-time `url` checked to be a string. */
int cli_apps_open(const struct api_client *c, const char *ref, const char *owner, const char *app, json_t **reply,
		  struct terr *err);

/* Redeems an app's one-time URL with the proxy: its cookie ("NAME=VALUE")
 * into *cookie (malloc'd). */
int cli_app_setup(const struct wsconn_url *u, char **cookie, struct terr *err);

#endif
