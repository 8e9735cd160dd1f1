/* The admin dashboard's aggregation (dashboard.h). */
#include "manager/dashboard.h"

#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"
#include "common/util.h"

static json_t *res_json(const struct res *r)
{
	return json_pack("{s:o,s:I,s:o}", "cpu", jsonutil_milli(r->cpu_m), "mem", (json_int_t)r->mem, "fgpu",
			 jsonutil_milli(r->fgpu_m));
}

/* What is left of cap after used, never below zero (a node's capacity
 * can shrink under what it holds: fgpu_per_device lowered). */
static struct res res_free(const struct res *cap, const struct res *used)
{
	struct res f = *cap;
	res_sub(&f, used);
	if (f.cpu_m < 0) f.cpu_m = 0;
	if (f.mem < 0) f.mem = 0;
	if (f.fgpu_m < 0) f.fgpu_m = 0;
	return f;
}

static json_t *time_json(int64_t ms)
{
	if (!ms)
		return json_null();
	char at[40];
	util_format_time_ms(ms, at, sizeof(at));
	return json_string(at);
}

/* ---- GPU models ---- */

struct model_acc {
	const char *model;
	int64_t memory;
	int devices;
	int nodes;
	const char *last_node;   /* the last node counted (nodes are walked in order) */
	int64_t cap_m, used_m;
};

static json_t *gpu_models(const struct dash_input *in)
{
	size_t cap = 0;
	for (size_t i = 0; i < in->n_nodes; i++)
		cap += (size_t)in->nodes[i].n_gpus;
	struct model_acc *acc = calloc(cap ? cap : 1, sizeof(*acc));
	json_t *arr = json_array();
	if (!acc || !arr) {
		free(acc);
		json_decref(arr);
		return NULL;
	}
	size_t n = 0;
	for (size_t i = 0; i < in->n_nodes; i++) {
		const struct dash_node *nd = &in->nodes[i];
		if (!nd->alive)
			continue;
		for (int g = 0; g < nd->n_gpus; g++) {
			const struct dash_gpu *d = &nd->gpus[g];
			const char *model = d->model && *d->model ? d->model : "unknown GPU";
			size_t k = 0;
			/* The same name with another memory size is another model
			 * (a 40 GB and an 80 GB A100 do not take the same work). */
			while (k < n && (strcmp(acc[k].model, model) || acc[k].memory != d->memory))
				k++;
			if (k == n) {
				acc[n].model = model;
				acc[n].memory = d->memory;
				n++;
			}
			acc[k].devices++;
			if (acc[k].last_node != nd->id) {
				acc[k].last_node = nd->id;
				acc[k].nodes++;
			}
			acc[k].cap_m += d->cap_m;
			acc[k].used_m += d->used_m;
		}
	}
	for (size_t k = 0; k < n; k++) {
		int64_t free_m = acc[k].cap_m - acc[k].used_m;
		json_array_append_new(arr, json_pack("{s:s,s:I,s:i,s:i,s:o,s:o,s:o}", "model", acc[k].model,
			"memory", (json_int_t)acc[k].memory, "devices", acc[k].devices, "nodes", acc[k].nodes,
			"fgpu_capacity", jsonutil_milli(acc[k].cap_m), "fgpu_used", jsonutil_milli(acc[k].used_m),
			"fgpu_free", jsonutil_milli(free_m > 0 ? free_m : 0)));
	}
	free(acc);
	return arr;
}

/* ---- nodes and totals ---- */

static json_t *nodes_json(const struct dash_input *in, json_t **totals)
{
	json_t *arr = json_array();
	struct res cap = {0}, used = {0}, avail = {0};
	int alive = 0;
	for (size_t i = 0; arr && i < in->n_nodes; i++) {
		const struct dash_node *nd = &in->nodes[i];
		struct res f = res_free(&nd->capacity, &nd->used);
		/* A GPU list by model: "2 x H100" reads faster than 2 rows. */
		json_t *gpus = json_array();
		for (int g = 0; g < nd->n_gpus; g++) {
			const char *model = nd->gpus[g].model && *nd->gpus[g].model ? nd->gpus[g].model : "unknown GPU";
			json_t *found = NULL, *e;
			size_t k;
			json_array_foreach(gpus, k, e) {
				if (!strcmp(json_string_value(json_object_get(e, "model")), model)) {
					found = e;
					break;
				}
			}
			if (found) {
				json_t *c = json_object_get(found, "count");
				json_integer_set(c, json_integer_value(c) + 1);
				json_t *fc = json_object_get(found, "fgpu_capacity_m"), *fu = json_object_get(found, "fgpu_used_m");
				json_integer_set(fc, json_integer_value(fc) + nd->gpus[g].cap_m);
				json_integer_set(fu, json_integer_value(fu) + nd->gpus[g].used_m);
			} else {
				json_array_append_new(gpus, json_pack("{s:s,s:i,s:I,s:I}", "model", model, "count", 1,
					"fgpu_capacity_m", (json_int_t)nd->gpus[g].cap_m,
					"fgpu_used_m", (json_int_t)nd->gpus[g].used_m));
			}
		}
		/* The sums were kept in milli to add exactly; shown as fGPU. */
		size_t k;
		json_t *e;
		json_array_foreach(gpus, k, e) {
			json_object_set_new(e, "fgpu_capacity",
					    jsonutil_milli(json_integer_value(json_object_get(e, "fgpu_capacity_m"))));
			json_object_set_new(e, "fgpu_used", jsonutil_milli(json_integer_value(json_object_get(e, "fgpu_used_m"))));
			json_object_del(e, "fgpu_capacity_m");
			json_object_del(e, "fgpu_used_m");
		}
		json_array_append_new(arr, json_pack("{s:s,s:s,s:b,s:s,s:o,s:o,s:o,s:i,s:o}", "id", nd->id,
			"status", nd->alive ? "ALIVE" : "LOST", "schedulable", !nd->drained, "group",
			nd->group ? nd->group : "default", "capacity", res_json(&nd->capacity), "used", res_json(&nd->used),
			"free", res_json(&f), "sessions", nd->sessions, "gpus", gpus));
		if (!nd->alive)
			continue;
		alive++;
		res_add(&cap, &nd->capacity);
		res_add(&used, &nd->used);
		if (!nd->drained)
			res_add(&avail, &f);
	}
	*totals = json_pack("{s:o,s:o,s:o,s:i,s:i}", "capacity", res_json(&cap), "used", res_json(&used), "free",
			    res_json(&avail), "nodes", (int)in->n_nodes, "nodes_alive", alive);
	return arr;
}

/* ---- sessions ---- */

static bool recent(const struct dash_input *in, const struct dash_session *s)
{
	return s->ended_ms && in->now_ms - s->ended_ms <= in->window_ms;
}

static json_t *by_status(const struct dash_input *in)
{
	int64_t count[SS__COUNT] = {0};
	for (size_t i = 0; i < in->n_sessions; i++) {
		const struct dash_session *s = &in->sessions[i];
		if (s->sub || (int)s->status < 0 || s->status >= SS__COUNT)
			continue;
		if (session_status_final(s->status) && !recent(in, s))
			continue;
		count[s->status]++;
	}
	json_t *o = json_object();
	for (int st = 0; o && st < SS__COUNT; st++)
		json_object_set_new(o, session_status_name((enum session_status)st), json_integer(count[st]));
	return o;
}

struct user_acc {
	const char *email;
	int sessions;
	struct res held;
};

static int user_cmp(const void *a, const void *b)
{
	const struct user_acc *x = a, *y = b;
	if (x->held.fgpu_m != y->held.fgpu_m)
		return x->held.fgpu_m > y->held.fgpu_m ? -1 : 1;
	if (x->held.cpu_m != y->held.cpu_m)
		return x->held.cpu_m > y->held.cpu_m ? -1 : 1;
	if (x->held.mem != y->held.mem)
		return x->held.mem > y->held.mem ? -1 : 1;
	return strcmp(x->email, y->email);   /* a stable order for ties */
}

static json_t *top_users(const struct dash_input *in)
{
	struct user_acc *acc = calloc(in->n_sessions ? in->n_sessions : 1, sizeof(*acc));
	json_t *arr = json_array();
	if (!acc || !arr) {
		free(acc);
		json_decref(arr);
		return NULL;
	}
	size_t n = 0;
	for (size_t i = 0; i < in->n_sessions; i++) {
		const struct dash_session *s = &in->sessions[i];
		/* Allocated now: placed and not yet released. PENDING holds
		 * nothing, however much it asks for. */
		if (!session_status_holds(s->status))
			continue;
		const char *who = s->owner && *s->owner ? s->owner : "(removed user)";
		size_t k = 0;
		while (k < n && strcmp(acc[k].email, who))
			k++;
		if (k == n)
			acc[n++].email = who;
		acc[k].sessions += !s->sub;
		res_add(&acc[k].held, &s->req);
	}
	qsort(acc, n, sizeof(*acc), user_cmp);
	for (size_t k = 0; k < n && k < in->top_users; k++)
		json_array_append_new(arr, json_pack("{s:s,s:i,s:o}", "email", acc[k].email, "sessions", acc[k].sessions,
						     "held", res_json(&acc[k].held)));
	free(acc);
	return arr;
}

static int failure_cmp(const void *a, const void *b)
{
	const struct dash_session *x = *(const struct dash_session *const *)a, *y = *(const struct dash_session *const *)b;
	/* LOST first: it is happening now, and may still come back. */
	if ((x->status == SS_LOST) != (y->status == SS_LOST))
		return x->status == SS_LOST ? -1 : 1;
	if (x->ended_ms != y->ended_ms)
		return x->ended_ms > y->ended_ms ? -1 : 1;
	return strcmp(x->id, y->id);
}

static json_t *failures(const struct dash_input *in)
{
	const struct dash_session **list = calloc(in->n_sessions ? in->n_sessions : 1, sizeof(*list));
	json_t *arr = json_array();
	if (!list || !arr) {
		free(list);
		json_decref(arr);
		return NULL;
	}
	size_t n = 0;
	for (size_t i = 0; i < in->n_sessions; i++) {
		const struct dash_session *s = &in->sessions[i];
		if (s->sub)
			continue;   /* a container's failure ends its main ERROR, naming it */
		if (s->status == SS_LOST || (s->status == SS_ERROR && recent(in, s)))
			list[n++] = s;
	}
	qsort(list, n, sizeof(*list), failure_cmp);
	for (size_t k = 0; k < n && k < in->max_failures; k++) {
		const struct dash_session *s = list[k];
		json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "id", s->id, "name", s->name, "owner",
			s->owner && *s->owner ? s->owner : "(removed user)", "status", session_status_name(s->status),
			"status_info", s->status_info ? s->status_info : "", "at", time_json(s->ended_ms)));
	}
	free(list);
	return arr;
}

json_t *dash_aggregate(const struct dash_input *in)
{
	json_t *totals = NULL;
	json_t *nodes = nodes_json(in, &totals);
	json_t *o = json_pack("{s:o,s:I,s:o,s:o,s:o,s:{s:o},s:o,s:o}", "generated_at", time_json(in->now_ms),
		"window_s", (json_int_t)(in->window_ms / 1000), "totals", totals, "gpu_models", gpu_models(in),
		"nodes", nodes, "sessions", "by_status", by_status(in), "top_users", top_users(in),
		"failures", failures(in));
	return o;
}
