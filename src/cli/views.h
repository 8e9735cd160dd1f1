/* Tables of API objects as people see them (sessions, nodes). */
#ifndef TESSERA_CLI_VIEWS_H
#define TESSERA_CLI_VIEWS_H

#include <jansson.h>
#include <time.h>

#include "cli/table.h"

/* NAME, STATUS, IMAGE, CPU, MEM, FGPU, NODE, AGE, INFO for an array of
 * session objects, with OWNER after NAME when they are of more than one
 * owner (an admin's list) and TYPE after STATUS when any is a batch
 * session; ages relative to now. New table (caller frees with
 * cli_table_free) or NULL on allocation failure. */
struct cli_table *cli_session_table(json_t *sessions, time_t now);

/* ID, STATUS, CPU, MEM, FGPU (each used/capacity), SESSIONS for an array
 * of node objects. New table or NULL. */
struct cli_table *cli_node_table(json_t *nodes);

/* NAME, CPU, CPU %, MEM / LIMIT, MEM %, GPU, NET RX / TX, BLOCK R / W of
 * one usage sample (GET /v1/sessions/{ref}/stats' "current"; not an
 * object: a row of "-"). New table or NULL (session_stats.c). */
struct cli_table *cli_stats_table(const char *name, json_t *sample);

/* INDEX, UUID, NAME, FGPU, UTIL, MEM USED / MEM of a node's "gpus"
 * (live figures "-" where not measured). New table or NULL. */
struct cli_table *cli_gpu_table(json_t *gpus);

#endif
