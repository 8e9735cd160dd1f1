#include "sched/sched.h"

#include <stdio.h>
#include <string.h>

/* Share of an agent's capacity left free after placing req, in parts per
 * million of the dominant (scarcest) dimension. Integer math only. */
static int64_t leftover_ppm(const struct sched_agent *a, const struct res *req)
{
	int64_t worst = 1000000;
	const int64_t cap[3] = {a->capacity.cpu_m, a->capacity.mem, a->capacity.fgpu_m};
	const int64_t left[3] = {a->free.cpu_m - req->cpu_m, a->free.mem - req->mem,
				 a->free.fgpu_m - req->fgpu_m};
	const int64_t want[3] = {req->cpu_m, req->mem, req->fgpu_m};
	for (int i = 0; i < 3; i++) {
		if (cap[i] <= 0 || want[i] == 0)
			continue;
		/* left/cap without overflow: mem can be ~2^44, so scale down. */
		int64_t ppm = (int64_t)((__int128)left[i] * 1000000 / cap[i]);
		if (ppm < worst)
			worst = ppm;
	}
	return worst;
}

static bool usable(const struct sched_agent *a, const struct res *req)
{
	return a->alive && res_fits(req, &a->free);
}

static ssize_t select_concentrated(const struct sched_agent *agents, size_t n,
				   const struct res *req)
{
	ssize_t best = -1;
	int64_t best_left = 0;
	for (size_t i = 0; i < n; i++) {
		if (!usable(&agents[i], req))
			continue;
		int64_t left = leftover_ppm(&agents[i], req);
		if (best < 0 || left < best_left) {
			best = (ssize_t)i;
			best_left = left;
		}
	}
	return best;
}

static ssize_t select_dispersed(const struct sched_agent *agents, size_t n,
				const struct res *req)
{
	ssize_t best = -1;
	int64_t best_left = 0;
	for (size_t i = 0; i < n; i++) {
		if (!usable(&agents[i], req))
			continue;
		int64_t left = leftover_ppm(&agents[i], req);
		if (best < 0 || left > best_left) {
			best = (ssize_t)i;
			best_left = left;
		}
	}
	return best;
}

const struct sched_selector_ops sched_concentrated = {"concentrated", select_concentrated};
const struct sched_selector_ops sched_dispersed = {"dispersed", select_dispersed};

const struct sched_selector_ops *sched_selector_find(const char *name)
{
	static const struct sched_selector_ops *const all[] = {&sched_concentrated, &sched_dispersed};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

/* "needs 2 CPU, 256 MiB; the most free on any alive node is 1 CPU, 20 GiB" */
static void explain_wait(const struct sched_agent *agents, size_t n,
			 const struct res *req, char *buf, size_t len)
{
	char need[96], most[96];
	res_describe(req, need, sizeof(need));
	struct res best = {0};
	size_t alive = 0;
	for (size_t i = 0; i < n; i++) {
		if (!agents[i].alive)
			continue;
		alive++;
		if (agents[i].free.cpu_m > best.cpu_m) best.cpu_m = agents[i].free.cpu_m;
		if (agents[i].free.mem > best.mem) best.mem = agents[i].free.mem;
		if (agents[i].free.fgpu_m > best.fgpu_m) best.fgpu_m = agents[i].free.fgpu_m;
	}
	if (alive == 0) {
		snprintf(buf, len, "waiting for a node: needs %s and no node is alive", need);
		return;
	}
	if (req->fgpu_m == 0)
		best.fgpu_m = 0;
	res_describe(&best, most, sizeof(most));
	snprintf(buf, len, "waiting for resources: needs %s; the most free on any node is %s",
		 need, most);
}

size_t sched_plan_fifo(const struct sched_selector_ops *sel,
		       struct sched_agent *agents, size_t n_agents,
		       const struct sched_request *reqs, size_t n_reqs,
		       struct sched_placement *out,
		       char (*reasons)[SCHED_REASON_MAX])
{
	size_t placed = 0;
	size_t i = 0;
	for (; i < n_reqs; i++) {
		ssize_t a = sel->select(agents, n_agents, &reqs[i].req);
		if (a < 0)
			break;
		res_sub(&agents[a].free, &reqs[i].req);
		out[placed].request = i;
		out[placed].agent = (size_t)a;
		placed++;
		if (reasons)
			reasons[i][0] = '\0';
	}
	if (i < n_reqs && reasons) {
		explain_wait(agents, n_agents, &reqs[i].req, reasons[i], SCHED_REASON_MAX);
		for (size_t k = i + 1; k < n_reqs; k++)
			snprintf(reasons[k], SCHED_REASON_MAX,
				 "queued behind %s (first in, first out)", reqs[i].name);
	}
	return placed;
}

bool sched_satisfiable(const struct sched_agent *agents, size_t n, const struct res *req)
{
	for (size_t i = 0; i < n; i++)
		if (res_fits(req, &agents[i].capacity))
			return true;
	return false;
}
