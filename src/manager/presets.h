/* Resource presets (docs/admin.md, "Resource presets"): named amounts of
 * CPU, memory and fGPU that the launcher offers, each for every resource
 * group or for one. Admins make, change and remove them
 * (/v1/presets, `tessera preset`); everyone reads them. The checks and
 * the JSON here are pure (no manager state), unit-tested in
 * tests/manager/test_presets.c; presets.c's mgr_preset_* keep them in
 * the manager and the store. */
#ifndef TESSERA_MANAGER_PRESETS_H
#define TESSERA_MANAGER_PRESETS_H

#include <jansson.h>
#include <stdbool.h>

#include "common/err.h"
#include "store/store.h"

/* Enough for any cluster's menu; more would be a list no one reads. */
#define PRESETS_MAX 64

/* A preset's name: 1 to 63 characters, letters, digits, spaces, '.',
 * '_' and '-', starting with a letter or digit and not ending in a space
 * (the defaults are "Small", "Medium", "One GPU"). */
int preset_name_check(const char *name, struct terr *err);

/* Reads a POST /v1/presets body (create: name and resources required)
 * or a PATCH body (create false: any of resources, group) into r, whose
 * other fields stay. Unknown fields are refused, each value checked as a
 * session's resources are (cpu 0.01 to 1024, mem 6 MiB to 16 TiB, fgpu
 * 0 to 1024); "group": a resource group's name, or null or "" for every
 * group. */
int preset_parse(json_t *body, bool create, struct preset_rec *r, struct terr *err);

/* {"name","resources":{"cpu","mem","fgpu"},"group": null|"G","created_at"}. */
json_t *preset_json(const struct preset_rec *p);

#endif
