#include "sched/sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/units.h"

/* ---------- devices ---------- */

bool sched_gpu_fit(const struct sched_device *devs, size_t n, int64_t want_m,
		   int64_t per_device_m, bool pack, struct sched_gpu_share *shares,
		   size_t *n_shares)
{
	size_t k = 0;
	if (want_m <= 0) {
		if (n_shares)
			*n_shares = 0;
		return true;
	}
	if (per_device_m <= 0 || n == 0)
		return false;
	int64_t whole = want_m / per_device_m, part = want_m % per_device_m;
	if (want_m <= per_device_m) {
		whole = 0;
		part = want_m;
	}
	if (whole > (int64_t)SCHED_MAX_DEVICES || (size_t)whole > n)
		return false;
	bool used[SCHED_MAX_DEVICES] = {0};
	if (n > SCHED_MAX_DEVICES)
		n = SCHED_MAX_DEVICES;
	/* Whole devices: only ones nobody uses, lowest index first. */
	for (size_t i = 0; i < n && (int64_t)k < whole; i++) {
		if (devs[i].free_m == per_device_m) {
			used[i] = true;
			if (shares) {
				shares[k].device = i;
				shares[k].fgpu_m = per_device_m;
			}
			k++;
		}
	}
	if ((int64_t)k < whole)
		return false;
	if (part > 0) {
		ssize_t best = -1;
		for (size_t i = 0; i < n; i++) {
			if (used[i] || devs[i].free_m < part)
				continue;
			if (best < 0 || (pack ? devs[i].free_m < devs[best].free_m
					      : devs[i].free_m > devs[best].free_m))
				best = (ssize_t)i;
		}
		if (best < 0)
			return false;
		if (shares) {
			shares[k].device = (size_t)best;
			shares[k].fgpu_m = part;
		}
		k++;
	}
	if (n_shares)
		*n_shares = k;
	return true;
}

/* ---------- the index ---------- */

/* Intrusive doubly linked bucket lists over int32 ids (-1 = none). */
struct buckets {
	int32_t *head;        /* [levels] */
	int32_t *next, *prev; /* [ids] */
	int32_t *level;       /* [ids]; -1 = not listed */
	int32_t levels;
};

static int buckets_init(struct buckets *b, int32_t levels, size_t ids)
{
	b->levels = levels;
	b->head = malloc((size_t)levels * sizeof(int32_t));
	b->next = malloc((ids ? ids : 1) * sizeof(int32_t));
	b->prev = malloc((ids ? ids : 1) * sizeof(int32_t));
	b->level = malloc((ids ? ids : 1) * sizeof(int32_t));
	if (!b->head || !b->next || !b->prev || !b->level)
		return -1;
	for (int32_t i = 0; i < levels; i++)
		b->head[i] = -1;
	for (size_t i = 0; i < ids; i++)
		b->level[i] = -1;
	return 0;
}

static void buckets_free(struct buckets *b)
{
	free(b->head);
	free(b->next);
	free(b->prev);
	free(b->level);
}

static void buckets_remove(struct buckets *b, int32_t id)
{
	int32_t l = b->level[id];
	if (l < 0)
		return;
	if (b->prev[id] >= 0)
		b->next[b->prev[id]] = b->next[id];
	else
		b->head[l] = b->next[id];
	if (b->next[id] >= 0)
		b->prev[b->next[id]] = b->prev[id];
	b->level[id] = -1;
}

static void buckets_set(struct buckets *b, int32_t id, int32_t level)
{
	if (level < 0)
		level = 0;
	if (level >= b->levels)
		level = b->levels - 1;
	if (b->level[id] == level)
		return;
	buckets_remove(b, id);
	b->level[id] = level;
	b->prev[id] = -1;
	b->next[id] = b->head[level];
	if (b->head[level] >= 0)
		b->prev[b->head[level]] = id;
	b->head[level] = id;
}

#define HOST_LEVELS 1000   /* host fullness buckets: 0.1% wide */

struct sched_index {
	struct sched_agent *agents;
	size_t n;
	int64_t per_device_m, quantum_m;
	struct buckets devs;   /* id = agent * SCHED_MAX_DEVICES + device; level = free / quantum */
	struct buckets whole;  /* id = agent; level = fully free devices */
	/* id = agent; level = its scarcest free fraction of CPU and memory, so
	 * best fit follows the dominant dimension for CPU-only requests. */
	struct buckets host;
};

/* Whether new sessions may go to the agent: alive and not drained. */
static bool usable(const struct sched_agent *a)
{
	return a->alive && !a->drained;
}

static size_t agent_devs(const struct sched_agent *a)
{
	return a->n_devs > SCHED_MAX_DEVICES ? SCHED_MAX_DEVICES : a->n_devs;
}

/* Re-files one agent and its devices after its free amounts changed. */
static void index_update(struct sched_index *ix, size_t i)
{
	const struct sched_agent *a = &ix->agents[i];
	if (!usable(a))
		return;
	int32_t whole = 0;
	for (size_t d = 0; d < agent_devs(a); d++) {
		int64_t f = a->devs[d].free_m;
		buckets_set(&ix->devs, (int32_t)(i * SCHED_MAX_DEVICES + d), (int32_t)(f / ix->quantum_m));
		whole += f == ix->per_device_m;
	}
	buckets_set(&ix->whole, (int32_t)i, whole);
	int64_t frac = HOST_LEVELS;
	if (a->capacity.cpu_m > 0)
		frac = a->free.cpu_m * HOST_LEVELS / a->capacity.cpu_m;
	if (a->capacity.mem > 0) {
		int64_t m = (int64_t)((__int128)a->free.mem * HOST_LEVELS / a->capacity.mem);
		if (m < frac)
			frac = m;
	}
	buckets_set(&ix->host, (int32_t)i, (int32_t)frac);
}

static void index_free(struct sched_index *ix)
{
	buckets_free(&ix->devs);
	buckets_free(&ix->whole);
	buckets_free(&ix->host);
	free(ix);
}

static struct sched_index *index_build(struct sched_agent *agents, size_t n, int64_t per_device_m,
				       int64_t quantum_m)
{
	struct sched_index *ix = calloc(1, sizeof(*ix));
	if (!ix)
		return NULL;
	ix->agents = agents;
	ix->n = n;
	ix->per_device_m = per_device_m > 0 ? per_device_m : 1000;
	ix->quantum_m = quantum_m > 0 ? quantum_m : 10;
	if (buckets_init(&ix->devs, (int32_t)(ix->per_device_m / ix->quantum_m + 1), n * SCHED_MAX_DEVICES) < 0 ||
	    buckets_init(&ix->whole, SCHED_MAX_DEVICES + 1, n) < 0 ||
	    buckets_init(&ix->host, HOST_LEVELS + 1, n) < 0) {
		index_free(ix);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		index_update(ix, i);
	return ix;
}

static bool host_fits(const struct sched_agent *a, const struct res *req)
{
	return usable(a) && req->cpu_m <= a->free.cpu_m && req->mem <= a->free.mem &&
	       req->fgpu_m <= a->free.fgpu_m;
}

/* Walks levels [from, to] in the given direction; returns the first id
 * for which accept() holds, or -1. */
static int32_t walk(const struct buckets *b, int32_t from, int32_t to, bool up,
		    bool (*accept)(struct sched_index *, int32_t, const struct res *, void *),
		    struct sched_index *ix, const struct res *req, void *ud)
{
	if (from < 0)
		from = 0;
	if (to >= b->levels)
		to = b->levels - 1;
	for (int32_t l = up ? from : to; up ? l <= to : l >= from; l += up ? 1 : -1)
		for (int32_t id = b->head[l]; id >= 0; id = b->next[id])
			if (accept(ix, id, req, ud))
				return id;
	return -1;
}

static bool accept_device(struct sched_index *ix, int32_t id, const struct res *req, void *ud)
{
	(void)ud;
	const struct sched_agent *a = &ix->agents[id / SCHED_MAX_DEVICES];
	return a->devs[id % SCHED_MAX_DEVICES].free_m >= req->fgpu_m && host_fits(a, req);
}

struct multi_ctx { bool pack; struct sched_gpu_share *shares; size_t *n_shares; };

static bool accept_multi(struct sched_index *ix, int32_t id, const struct res *req, void *ud)
{
	struct multi_ctx *mc = ud;
	const struct sched_agent *a = &ix->agents[id];
	return host_fits(a, req) &&
	       sched_gpu_fit(a->devs, agent_devs(a), req->fgpu_m, ix->per_device_m, mc->pack, mc->shares,
			     mc->n_shares);
}

static bool accept_host(struct sched_index *ix, int32_t id, const struct res *req, void *ud)
{
	(void)ud;
	return host_fits(&ix->agents[id], req);
}

static ssize_t index_select(struct sched_index *ix, const struct res *req, bool pack,
			    struct sched_gpu_share *shares, size_t *n_shares)
{
	*n_shares = 0;
	if (req->fgpu_m > 0 && req->fgpu_m <= ix->per_device_m) {
		/* One device: the best (or most free) device of any node. */
		int32_t lo = (int32_t)((req->fgpu_m + ix->quantum_m - 1) / ix->quantum_m);
		int32_t id = walk(&ix->devs, lo - 1, ix->devs.levels - 1, pack, accept_device, ix, req, NULL);
		if (id < 0)
			return -1;
		shares[0].device = (size_t)(id % SCHED_MAX_DEVICES);
		shares[0].fgpu_m = req->fgpu_m;
		*n_shares = 1;
		return id / SCHED_MAX_DEVICES;
	}
	if (req->fgpu_m > 0) {
		/* Whole devices: the node with the fewest (or most) fully free
		 * devices that still has enough. */
		struct multi_ctx mc = {pack, shares, n_shares};
		int32_t k = (int32_t)(req->fgpu_m / ix->per_device_m);
		return walk(&ix->whole, k, ix->whole.levels - 1, pack, accept_multi, ix, req, &mc);
	}
	/* CPU only: by how full the node is in its scarcest dimension. */
	return walk(&ix->host, 0, ix->host.levels - 1, pack, accept_host, ix, req, NULL);
}

static ssize_t select_concentrated(struct sched_index *ix, const struct res *req,
				   struct sched_gpu_share *shares, size_t *n_shares)
{
	return index_select(ix, req, true, shares, n_shares);
}

static ssize_t select_dispersed(struct sched_index *ix, const struct res *req,
				struct sched_gpu_share *shares, size_t *n_shares)
{
	return index_select(ix, req, false, shares, n_shares);
}

const struct sched_selector_ops sched_concentrated = {"concentrated", select_concentrated};
const struct sched_selector_ops sched_dispersed = {"dispersed", select_dispersed};

/* ---------- queue policies ---------- */

static ssize_t next_fifo(const struct sched_request *reqs, size_t n, const bool *tried,
			 const struct sched_world *w)
{
	(void)reqs; (void)w;
	for (size_t i = 0; i < n; i++)
		if (!tried[i])
			return (ssize_t)i;
	return -1;
}

static ssize_t next_lifo(const struct sched_request *reqs, size_t n, const bool *tried,
			 const struct sched_world *w)
{
	(void)reqs; (void)w;
	for (size_t i = n; i-- > 0;)
		if (!tried[i])
			return (ssize_t)i;
	return -1;
}

/* Dominant share of a user in parts per million of the alive cluster. */
static int64_t dominant_ppm(const struct res *used, const struct res *total)
{
	int64_t d = 0;
	const int64_t u[3] = {used->cpu_m, used->mem, used->fgpu_m};
	const int64_t t[3] = {total->cpu_m, total->mem, total->fgpu_m};
	for (int i = 0; i < 3; i++) {
		if (t[i] <= 0)
			continue;
		int64_t ppm = (int64_t)((__int128)u[i] * 1000000 / t[i]);
		if (ppm > d)
			d = ppm;
	}
	return d;
}

/* Dominant-resource fairness: the oldest request of the user whose
 * dominant share is smallest goes next. */
static ssize_t next_drf(const struct sched_request *reqs, size_t n, const bool *tried,
			const struct sched_world *w)
{
	struct res total = {0};
	for (size_t i = 0; i < w->n_agents; i++)
		if (w->agents[i].alive)
			res_add(&total, &w->agents[i].capacity);
	const struct sched_user *users = w->users;
	ssize_t best = -1;
	int64_t best_share = 0;
	for (size_t i = 0; i < n; i++) {
		if (tried[i])
			continue;
		int64_t share = dominant_ppm(&users[reqs[i].user].used, &total);
		if (best < 0 || share < best_share) {
			best = (ssize_t)i;
			best_share = share;
		}
	}
	return best;
}

const struct sched_queue_ops sched_fifo = {"fifo", true, next_fifo};
const struct sched_queue_ops sched_lifo = {"lifo", true, next_lifo};
const struct sched_queue_ops sched_drf = {"drf", false, next_drf};
const struct sched_queue_ops sched_fairshare = {"fairshare", false, next_drf};

const struct sched_selector_ops *sched_selector_find(const char *name)
{
	static const struct sched_selector_ops *const all[] = {&sched_concentrated, &sched_dispersed};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

const struct sched_queue_ops *sched_queue_find(const char *name)
{
	static const struct sched_queue_ops *const all[] = {&sched_fifo, &sched_lifo, &sched_drf};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

/* ---------- explanations ---------- */

static void fmt_fgpu(int64_t m, char *buf, size_t n)
{
	char num[32];
	units_format_milli(m, num, sizeof(num));
	snprintf(buf, n, "%s fGPU", num);
}

/* Why a request that passed the user policy fits nowhere, in words. */
static void explain_wait(const struct sched_agent *agents, size_t n, const struct res *req,
			 int64_t per_device_m, char *buf, size_t len)
{
	char need[96];
	struct res host_req = *req;
	host_req.fgpu_m = 0;
	res_describe(&host_req, need, sizeof(need));
	size_t alive = 0, host_fit = 0, drained = 0;
	struct res best = {0};
	int64_t best_dev = 0, most_whole = 0;
	for (size_t i = 0; i < n; i++) {
		const struct sched_agent *a = &agents[i];
		if (!a->alive)
			continue;
		if (a->drained) {
			drained++;
			continue;
		}
		alive++;
		if (a->free.cpu_m > best.cpu_m) best.cpu_m = a->free.cpu_m;
		if (a->free.mem > best.mem) best.mem = a->free.mem;
		if (req->cpu_m > a->free.cpu_m || req->mem > a->free.mem)
			continue;
		host_fit++;
		int64_t whole = 0;
		for (size_t d = 0; d < a->n_devs; d++) {
			if (a->devs[d].free_m > best_dev)
				best_dev = a->devs[d].free_m;
			whole += a->devs[d].free_m == per_device_m;
		}
		if (whole > most_whole)
			most_whole = whole;
	}
	if (alive == 0) {
		snprintf(buf, len, drained ? "waiting for a node: every alive node is drained (an admin stopped new "
			 "sessions there)" : "waiting for a node: no node is alive");
		return;
	}
	if (host_fit == 0 || req->fgpu_m == 0) {
		char most[96];
		res_describe(&best, most, sizeof(most));
		snprintf(buf, len, "waiting for resources: needs %s; the most free on any node is %s", need, most);
		return;
	}
	char want[48], have[48];
	fmt_fgpu(req->fgpu_m, want, sizeof(want));
	fmt_fgpu(best_dev, have, sizeof(have));
	if (req->fgpu_m <= per_device_m) {
		snprintf(buf, len, "waiting for a GPU: needs %s on one device; the most free on one device of any node is %s",
			 want, have);
	} else {
		char part[48];
		fmt_fgpu(req->fgpu_m % per_device_m, part, sizeof(part));
		snprintf(buf, len, "waiting for GPUs: needs %s = %lld whole free devices%s%s on one node; "
			 "the most whole free devices on a node is %lld",
			 want, (long long)(req->fgpu_m / per_device_m),
			 req->fgpu_m % per_device_m ? " + " : "", req->fgpu_m % per_device_m ? part : "",
			 (long long)most_whole);
	}
}

/* Whether the user's policy allows one more; the reason when not. */
static bool policy_allows(const struct sched_user *u, const struct res *req, char *why, size_t n)
{
	char lim[48], use[48];
	if (u->max_sessions > 0 && u->sessions + 1 > u->max_sessions) {
		snprintf(why, n, "waiting for the user's policy: at most %lld concurrent sessions (%lld running)",
			 (long long)u->max_sessions, (long long)u->sessions);
		return false;
	}
	if (u->max.cpu_m > 0 && u->used.cpu_m + req->cpu_m > u->max.cpu_m) {
		units_format_milli(u->max.cpu_m, lim, sizeof(lim));
		units_format_milli(u->used.cpu_m, use, sizeof(use));
		snprintf(why, n, "waiting for the user's policy: at most %s CPU in total (%s in use)", lim, use);
		return false;
	}
	if (u->max.mem > 0 && u->used.mem + req->mem > u->max.mem) {
		units_format_size(u->max.mem, lim, sizeof(lim));
		units_format_size(u->used.mem, use, sizeof(use));
		snprintf(why, n, "waiting for the user's policy: at most %s of memory in total (%s in use)", lim, use);
		return false;
	}
	if (u->max.fgpu_m > 0 && u->used.fgpu_m + req->fgpu_m > u->max.fgpu_m) {
		fmt_fgpu(u->max.fgpu_m, lim, sizeof(lim));
		fmt_fgpu(u->used.fgpu_m, use, sizeof(use));
		snprintf(why, n, "waiting for the user's policy: at most %s in total (%s in use)", lim, use);
		return false;
	}
	return true;
}

/* ---------- the pass ---------- */

/* Index of an agent that could hold req with nothing running on it (only
 * alive ones when asked), or -1. */
static ssize_t could_ever_hold(const struct sched_agent *agents, size_t n, const struct res *req,
			       int64_t per_device_m, bool alive_only)
{
	struct sched_device all_free[SCHED_MAX_DEVICES];
	for (size_t i = 0; i < n; i++) {
		const struct sched_agent *a = &agents[i];
		if ((alive_only && !usable(a)) || req->cpu_m > a->capacity.cpu_m ||
		    req->mem > a->capacity.mem)
			continue;
		size_t nd = a->n_devs > SCHED_MAX_DEVICES ? SCHED_MAX_DEVICES : a->n_devs;
		for (size_t d = 0; d < nd; d++)
			all_free[d].free_m = per_device_m;
		if (sched_gpu_fit(all_free, nd, req->fgpu_m, per_device_m, true, NULL, NULL))
			return (ssize_t)i;
	}
	return -1;
}

static bool any_alive(const struct sched_agent *agents, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (usable(&agents[i]))
			return true;
	return false;
}

static void apply(struct sched_agent *a, struct sched_user *u, const struct res *req,
		  const struct sched_gpu_share *shares, size_t n_shares)
{
	res_sub(&a->free, req);
	for (size_t s = 0; s < n_shares; s++)
		a->devs[shares[s].device].free_m -= shares[s].fgpu_m;
	res_add(&u->used, req);
	u->sessions++;
}

size_t sched_plan(const struct sched_params *p, struct sched_world *w,
		  const struct sched_request *reqs, size_t n_reqs,
		  struct sched_placement *out, struct sched_result *res)
{
	struct sched_agent *agents = w->agents;
	size_t n_agents = w->n_agents;
	struct sched_user *users = w->users;
	char (*reasons)[SCHED_REASON_MAX] = res ? res->reasons : NULL;
	ssize_t *blocked_head = res ? &res->blocked_head : NULL;
	if (res)
		res->n_evictions = 0;
	size_t placed = 0;
	bool *tried = calloc(n_reqs ? n_reqs : 1, sizeof(bool));
	if (blocked_head)
		*blocked_head = -1;
	if (!tried)
		return 0;
	ssize_t blocker = -1;
	struct sched_index *ix = index_build(agents, n_agents, p->per_device_m, p->quantum_m);
	if (!ix) {
		free(tried);
		return 0;
	}
	for (;;) {
		ssize_t i = p->queue->next(reqs, n_reqs, tried, w);
		if (i < 0)
			break;
		tried[i] = true;
		const struct sched_request *r = &reqs[i];
		struct sched_user *u = &users[r->user];
		char *why = reasons ? reasons[i] : NULL;
		char scratch[SCHED_REASON_MAX];
		if (!why)
			why = scratch;
		why[0] = '\0';
		/* A user over their policy waits without holding up others. */
		if (!policy_allows(u, &r->req, why, SCHED_REASON_MAX))
			continue;
		struct sched_placement *pl = &out[placed];
		ssize_t a = p->selector->select(ix, &r->req, pl->shares, &pl->n_shares);
		if (a >= 0) {
			pl->request = (size_t)i;
			pl->agent = (size_t)a;
			apply(&agents[a], u, &r->req, pl->shares, pl->n_shares);
			index_update(ix, (size_t)a);
			placed++;
			continue;
		}
		explain_wait(agents, n_agents, &r->req, p->per_device_m, why, SCHED_REASON_MAX);
		if (!p->queue->blocking)
			continue;
		/* No alive node could hold it even empty: it waits for a LOST
		 * node to come back (or a larger node to register) without
		 * holding the queue meanwhile, since the alive nodes can serve
		 * the sessions behind it. */
		if (any_alive(agents, n_agents) &&
		    could_ever_hold(agents, n_agents, &r->req, p->per_device_m, true) < 0) {
			ssize_t lost = could_ever_hold(agents, n_agents, &r->req, p->per_device_m, false);
			if (lost >= 0 && agents[lost].alive && agents[lost].drained)
				snprintf(why, SCHED_REASON_MAX,
					 "waiting for node %s: it is drained (an admin stopped new sessions there) and no "
					 "other node is large enough", agents[lost].id);
			else if (lost >= 0)
				snprintf(why, SCHED_REASON_MAX,
					 "waiting for node %s to return: no alive node is large enough",
					 agents[lost].id);
			else
				snprintf(why, SCHED_REASON_MAX,
					 "waiting for a larger node: no node could hold it even when empty");
			continue;
		}
		if (p->fifo_skip_after > 0 && r->failed_passes >= p->fifo_skip_after)
			continue;   /* waited long enough at the head: let others pass */
		blocker = i;
		break;
	}
	if (blocker >= 0) {
		for (size_t k = 0; k < n_reqs; k++) {
			if (tried[k] || !reasons)
				continue;
			snprintf(reasons[k], SCHED_REASON_MAX, "queued behind %s (%s)", reqs[blocker].name,
				 p->queue == &sched_lifo ? "last in, first out" : "first in, first out");
		}
	}
	if (blocked_head)
		*blocked_head = blocker;
	index_free(ix);
	free(tried);
	return placed;
}

bool sched_satisfiable(const struct sched_agent *agents, size_t n, const struct res *req,
		       int64_t per_device_m)
{
	return could_ever_hold(agents, n, req, per_device_m, false) >= 0;
}

void sched_usage_charge(struct sched_usage *u, const struct res *req, double dt_s, double half_life_s)
{
	(void)u; (void)req; (void)dt_s; (void)half_life_s;
}

void sched_fairshare_projects(const struct sched_world *w, struct sched_share *out)
{
	(void)w; (void)out;
}

void sched_fairshare_members(const struct sched_world *w, size_t project, struct sched_share *out)
{
	(void)w; (void)project; (void)out;
}
