/* Session and node tables (cli/views.h). */
#include "cli/views.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/client.h"
#include "common/units.h"

#define CLI_INFO_MAX 60

/* Whether the list holds sessions of more than one owner, and any batch
 * session: the columns OWNER and TYPE are shown only then, so that a
 * user's own list of interactive sessions stays as narrow as it was. */
static void session_columns(json_t *sessions, bool *owners, bool *types)
{
	const char *first = NULL;
	size_t i;
	json_t *s;
	*owners = *types = false;
	json_array_foreach(sessions, i, s) {
		const char *o = cli_json_str(s, "owner", "");
		if (!first)
			first = o;
		else if (strcmp(first, o))
			*owners = true;
		if (!strcmp(cli_json_str(s, "type", ""), "batch"))
			*types = true;
	}
}

struct cli_table *cli_session_table(json_t *sessions, time_t now)
{
	bool owners, types;
	session_columns(sessions, &owners, &types);
	const char *hdr[11];
	size_t nc = 0;
	hdr[nc++] = "name";
	if (owners)
		hdr[nc++] = "owner";
	hdr[nc++] = "status";
	if (types)
		hdr[nc++] = "type";
	static const char *const rest[] = {"image", "cpu", "mem", "fgpu", "node", "age", "info"};
	for (size_t k = 0; k < sizeof(rest) / sizeof(rest[0]); k++)
		hdr[nc++] = rest[k];
	struct cli_table *t = cli_table_new(nc, hdr);
	if (!t)
		return NULL;
	size_t i;
	json_t *s;
	json_array_foreach(sessions, i, s) {
		json_t *res = json_object_get(s, "resources");
		char cpu[32], mem[32], fgpu[48], age[32] = "-", info[CLI_INFO_MAX * 4 + 4];
		units_format_milli(cli_json_milli(json_object_get(res, "cpu")), cpu, sizeof(cpu));
		units_format_size(cli_json_int(json_object_get(res, "mem")), mem, sizeof(mem));
		cli_format_fgpu(cli_json_milli(json_object_get(res, "fgpu")), fgpu, sizeof(fgpu));
		time_t created;
		if (cli_parse_time(cli_json_str(s, "created_at", NULL), &created) == 0)
			cli_format_age((int64_t)(now - created), age, sizeof(age));
		cli_shorten(cli_json_str(s, "status_info", ""), CLI_INFO_MAX, info, sizeof(info));
		const char *row[11];
		size_t c = 0;
		row[c++] = cli_json_str(s, "name", NULL);
		if (owners)
			row[c++] = cli_json_str(s, "owner", NULL);
		row[c++] = cli_json_str(s, "status", NULL);
		if (types)
			row[c++] = cli_json_str(s, "type", "interactive");
		row[c++] = cli_json_str(s, "image", NULL);
		row[c++] = cpu;
		row[c++] = mem;
		row[c++] = fgpu;
		row[c++] = cli_json_str(s, "agent", NULL);
		row[c++] = age;
		row[c++] = info[0] ? info : NULL;
		if (cli_table_add(t, row) < 0) {
			cli_table_free(t);
			return NULL;
		}
	}
	return t;
}

struct cli_table *cli_node_table(json_t *nodes)
{
	static const char *const hdr[] = {"id", "status", "cpu", "mem", "fgpu", "sessions", "gpus", "cpu use",
					  "mem use"};
	struct cli_table *t = cli_table_new(9, hdr);
	if (!t)
		return NULL;
	size_t i;
	json_t *n;
	json_array_foreach(nodes, i, n) {
		json_t *cap = json_object_get(n, "capacity"), *used = json_object_get(n, "used");
		char a[32], b[32], cpu[72], mem[72], fgpu[72], sess[32];
		units_format_milli(cli_json_milli(json_object_get(used, "cpu")), a, sizeof(a));
		units_format_milli(cli_json_milli(json_object_get(cap, "cpu")), b, sizeof(b));
		snprintf(cpu, sizeof(cpu), "%s/%s", a, b);
		units_format_size(cli_json_int(json_object_get(used, "mem")), a, sizeof(a));
		units_format_size(cli_json_int(json_object_get(cap, "mem")), b, sizeof(b));
		snprintf(mem, sizeof(mem), "%s/%s", a, b);
		units_format_milli(cli_json_milli(json_object_get(used, "fgpu")), a, sizeof(a));
		units_format_milli(cli_json_milli(json_object_get(cap, "fgpu")), b, sizeof(b));
		snprintf(fgpu, sizeof(fgpu), "%s/%s", a, b);
		snprintf(sess, sizeof(sess), "%" PRId64, cli_json_int(json_object_get(n, "sessions")));
		/* Per-device fGPU use: "0:2/2 1:0.5/2", "-" without GPUs. */
		char gpus[512] = "";
		size_t gi;
		json_t *g;
		json_array_foreach(json_object_get(n, "gpus"), gi, g) {
			char item[96];
			units_format_milli(cli_json_milli(json_object_get(g, "fgpu_used")), a, sizeof(a));
			units_format_milli(cli_json_milli(json_object_get(g, "fgpu_capacity")), b, sizeof(b));
			snprintf(item, sizeof(item), "%s%zu:%s/%s", gi ? " " : "", gi, a, b);
			strncat(gpus, item, sizeof(gpus) - strlen(gpus) - 1);
		}
		/* What the sessions use now (usage.c), "-" before the first
		 * sample. */
		json_t *usage = json_object_get(n, "usage");
		char cuse[32] = "-", muse[32] = "-";
		if (json_is_object(usage)) {
			json_t *cores = json_object_get(usage, "cpu_cores");
			snprintf(cuse, sizeof(cuse), "%.2f", json_is_number(cores) ? json_number_value(cores) : 0.0);
			units_format_size(cli_json_int(json_object_get(usage, "mem_bytes")), muse, sizeof(muse));
		}
		/* A drained node (PATCH /v1/nodes/{id}) says so beside its status. */
		char status[48];
		snprintf(status, sizeof(status), "%s%s", cli_json_str(n, "status", ""),
			 json_is_false(json_object_get(n, "schedulable")) ? ",drained" : "");
		const char *row[] = {cli_json_str(n, "id", NULL), status,
				     cpu, mem, fgpu, sess, gpus[0] ? gpus : "-", cuse, muse};
		if (cli_table_add(t, row) < 0) {
			cli_table_free(t);
			return NULL;
		}
	}
	return t;
}

struct cli_table *cli_gpu_table(json_t *gpus)
{
	static const char *const hdr[] = {"index", "uuid", "name", "fgpu", "util", "mem used"};
	struct cli_table *t = cli_table_new(6, hdr);
	if (!t)
		return NULL;
	size_t i;
	json_t *g;
	json_array_foreach(gpus, i, g) {
		char idx[16], a[32], b[32], fgpu[72], util[32] = "-", mem[80];
		snprintf(idx, sizeof(idx), "%" PRId64, cli_json_int(json_object_get(g, "index")));
		units_format_milli(cli_json_milli(json_object_get(g, "fgpu_used")), a, sizeof(a));
		units_format_milli(cli_json_milli(json_object_get(g, "fgpu_capacity")), b, sizeof(b));
		snprintf(fgpu, sizeof(fgpu), "%s/%s", a, b);
		json_t *u = json_object_get(g, "util_pct");
		if (json_is_number(u))
			snprintf(util, sizeof(util), "%.1f%%", json_number_value(u));
		units_format_size(cli_json_int(json_object_get(g, "memory")), b, sizeof(b));
		json_t *mu = json_object_get(g, "mem_used_bytes");
		if (json_is_integer(mu)) {
			units_format_size(json_integer_value(mu), a, sizeof(a));
			snprintf(mem, sizeof(mem), "%s/%s", a, b);
		} else {
			snprintf(mem, sizeof(mem), "-/%s", b);
		}
		const char *row[] = {idx, cli_json_str(g, "uuid", NULL), cli_json_str(g, "name", NULL), fgpu, util, mem};
		if (cli_table_add(t, row) < 0) {
			cli_table_free(t);
			return NULL;
		}
	}
	return t;
}
