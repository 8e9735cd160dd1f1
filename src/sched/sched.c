#include "sched/sched.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
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

/* What a change to a bucket list undoes to: the id's place before it.
 * A gang's members are placed one by one and taken back when the gang
 * does not fit whole; re-filing the agents by their restored free amounts
 * would put them back in the right buckets but not in the same place in
 * each list, and the order within a bucket decides among equals, so the
 * requests after the gang would land differently than had it never been
 * tried. */
struct bucket_undo {
	struct buckets *b;
	int32_t id, level, prev, next;
};

struct bucket_log {
	struct bucket_undo *e;
	size_t n, cap;
	bool on;              /* recording: only while a gang is tried */
};

/* Intrusive doubly linked bucket lists over int32 ids (-1 = none). */
struct buckets {
	int32_t *head;        /* [levels] */
	int32_t *next, *prev; /* [ids] */
	int32_t *level;       /* [ids]; -1 = not listed */
	int32_t levels;
	struct bucket_log *log;   /* the index's; NULL: never recorded */
};

/* Room for k more records, so that a change is never half recorded;
 * -1 on no memory. */
static int log_reserve(struct bucket_log *l, size_t k)
{
	if (l->n + k <= l->cap)
		return 0;
	size_t cap = l->cap ? l->cap * 2 : 64;
	while (cap < l->n + k)
		cap *= 2;
	struct bucket_undo *e = realloc(l->e, cap * sizeof(*e));
	if (!e)
		return -1;
	l->e = e;
	l->cap = cap;
	return 0;
}

/* Records id's place before a change (room reserved by log_reserve). */
static void bucket_note(struct buckets *b, int32_t id)
{
	struct bucket_log *l = b->log;
	if (!l || !l->on || l->n >= l->cap)
		return;
	l->e[l->n++] = (struct bucket_undo){b, id, b->level[id], b->prev[id], b->next[id]};
}

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

static void buckets_unlink(struct buckets *b, int32_t id)
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

static void buckets_remove(struct buckets *b, int32_t id)
{
	if (b->level[id] < 0)
		return;
	bucket_note(b, id);
	buckets_unlink(b, id);
}

static void buckets_set(struct buckets *b, int32_t id, int32_t level)
{
	if (level < 0)
		level = 0;
	if (level >= b->levels)
		level = b->levels - 1;
	if (b->level[id] == level)
		return;
	bucket_note(b, id);
	buckets_unlink(b, id);
	b->level[id] = level;
	b->prev[id] = -1;
	b->next[id] = b->head[level];
	if (b->head[level] >= 0)
		b->prev[b->head[level]] = id;
	b->head[level] = id;
}

/* Undoes the records past mark, newest first: each change is undone on
 * the lists as they were right after it, where the id's old neighbours
 * are neighbours again, so every id goes back to its old place. */
static void log_undo(struct bucket_log *l, size_t mark)
{
	while (l->n > mark) {
		struct bucket_undo *u = &l->e[--l->n];
		struct buckets *b = u->b;
		buckets_unlink(b, u->id);
		if (u->level < 0)
			continue;
		b->level[u->id] = u->level;
		b->prev[u->id] = u->prev;
		b->next[u->id] = u->next;
		if (u->prev >= 0)
			b->next[u->prev] = u->id;
		else
			b->head[u->level] = u->id;
		if (u->next >= 0)
			b->prev[u->next] = u->id;
	}
}

#define HOST_LEVELS 1000   /* host fullness buckets: 0.1% wide */

/* The index of one resource group: only its agents are filed, so a
 * request never walks nodes it may not use. Ids are positions among the
 * group's agents (ids[]), not the world's indexes. */
struct sched_index {
	struct sched_agent *agents;   /* the world's */
	const size_t *ids;            /* [n]: the world's index of each agent here */
	const int32_t *local;         /* [the world's n_agents]: position in its group */
	size_t n;
	int64_t per_device_m, quantum_m;
	struct buckets devs;   /* id = local * SCHED_MAX_DEVICES + device; level = free / quantum */
	struct buckets whole;  /* id = local; level = fully free devices */
	/* id = local; level = its scarcest free fraction of CPU and memory, so
	 * best fit follows the dominant dimension for CPU-only requests. */
	struct buckets host;
	const bool *held;             /* [the world's n_agents] or NULL: agents held
	                               * for a waiting gang, kept out of the buckets */
	struct bucket_log log;        /* while a gang is tried */
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

/* Re-files one agent (the world's index i) and its devices after its free
 * amounts changed. */
static void index_update(struct sched_index *ix, size_t i)
{
	const struct sched_agent *a = &ix->agents[i];
	if (!usable(a) || (ix->held && ix->held[i]))
		return;
	int32_t li = ix->local[i];
	int32_t whole = 0;
	for (size_t d = 0; d < agent_devs(a); d++) {
		int64_t f = a->devs[d].free_m;
		buckets_set(&ix->devs, (int32_t)(li * SCHED_MAX_DEVICES + (int32_t)d), (int32_t)(f / ix->quantum_m));
		whole += f == ix->per_device_m;
	}
	buckets_set(&ix->whole, li, whole);
	int64_t frac = HOST_LEVELS;
	if (a->capacity.cpu_m > 0)
		frac = a->free.cpu_m * HOST_LEVELS / a->capacity.cpu_m;
	if (a->capacity.mem > 0) {
		int64_t m = (int64_t)((__int128)a->free.mem * HOST_LEVELS / a->capacity.mem);
		if (m < frac)
			frac = m;
	}
	buckets_set(&ix->host, li, (int32_t)frac);
}

static void index_free(struct sched_index *ix)
{
	if (!ix)
		return;
	buckets_free(&ix->devs);
	buckets_free(&ix->whole);
	buckets_free(&ix->host);
	free(ix->log.e);
	free(ix);
}

/* Takes an agent out of every list (recorded when the log is on), so no
 * selector finds it: a gang trying its next candidate, or holding it. */
static void index_hide(struct sched_index *ix, size_t i)
{
	int32_t li = ix->local[i];
	if (li < 0)
		return;
	for (size_t d = 0; d < SCHED_MAX_DEVICES; d++)
		buckets_remove(&ix->devs, (int32_t)(li * SCHED_MAX_DEVICES + (int32_t)d));
	buckets_remove(&ix->whole, li);
	buckets_remove(&ix->host, li);
}

static struct sched_index *index_build(struct sched_agent *agents, const size_t *ids, size_t n,
				       const int32_t *local, const bool *held, int64_t per_device_m,
				       int64_t quantum_m)
{
	struct sched_index *ix = calloc(1, sizeof(*ix));
	if (!ix)
		return NULL;
	ix->agents = agents;
	ix->ids = ids;
	ix->local = local;
	ix->held = held;
	ix->n = n;
	ix->per_device_m = per_device_m > 0 ? per_device_m : 1000;
	ix->quantum_m = quantum_m > 0 ? quantum_m : 10;
	if (buckets_init(&ix->devs, (int32_t)(ix->per_device_m / ix->quantum_m + 1), n * SCHED_MAX_DEVICES) < 0 ||
	    buckets_init(&ix->whole, SCHED_MAX_DEVICES + 1, n) < 0 ||
	    buckets_init(&ix->host, HOST_LEVELS + 1, n) < 0) {
		index_free(ix);
		return NULL;
	}
	ix->devs.log = ix->whole.log = ix->host.log = &ix->log;
	for (size_t i = 0; i < n; i++)
		index_update(ix, ids[i]);
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
	const struct sched_agent *a = &ix->agents[ix->ids[id / SCHED_MAX_DEVICES]];
	return a->devs[id % SCHED_MAX_DEVICES].free_m >= req->fgpu_m && host_fits(a, req);
}

struct multi_ctx { bool pack; struct sched_gpu_share *shares; size_t *n_shares; };

static bool accept_multi(struct sched_index *ix, int32_t id, const struct res *req, void *ud)
{
	struct multi_ctx *mc = ud;
	const struct sched_agent *a = &ix->agents[ix->ids[id]];
	return host_fits(a, req) &&
	       sched_gpu_fit(a->devs, agent_devs(a), req->fgpu_m, ix->per_device_m, mc->pack, mc->shares,
			     mc->n_shares);
}

static bool accept_host(struct sched_index *ix, int32_t id, const struct res *req, void *ud)
{
	(void)ud;
	return host_fits(&ix->agents[ix->ids[id]], req);
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
		return (ssize_t)ix->ids[id / SCHED_MAX_DEVICES];
	}
	if (req->fgpu_m > 0) {
		/* Whole devices: the node with the fewest (or most) fully free
		 * devices that still has enough. */
		struct multi_ctx mc = {pack, shares, n_shares};
		int32_t k = (int32_t)(req->fgpu_m / ix->per_device_m);
		int32_t id = walk(&ix->whole, k, ix->whole.levels - 1, pack, accept_multi, ix, req, &mc);
		return id < 0 ? -1 : (ssize_t)ix->ids[id];
	}
	/* CPU only: by how full the node is in its scarcest dimension. */
	int32_t id = walk(&ix->host, 0, ix->host.levels - 1, pack, accept_host, ix, req, NULL);
	return id < 0 ? -1 : (ssize_t)ix->ids[id];
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

/* fifo and lifo keep where they are, so that a pass over a long queue
 * does not rescan the tried prefix at every call. */
struct cursor {
	size_t at;
};

static void *cursor_start(const struct sched_request *reqs, size_t n, const struct sched_world *w)
{
	(void)reqs; (void)n; (void)w;
	return calloc(1, sizeof(struct cursor));
}

static ssize_t next_fifo(const struct sched_request *reqs, size_t n, const bool *tried,
			 const struct sched_world *w, void *state)
{
	(void)reqs; (void)w;
	struct cursor *c = state;
	for (size_t i = c ? c->at : 0; i < n; i++) {
		if (tried[i])
			continue;
		if (c)
			c->at = i;
		return (ssize_t)i;
	}
	return -1;
}

static ssize_t next_lifo(const struct sched_request *reqs, size_t n, const bool *tried,
			 const struct sched_world *w, void *state)
{
	(void)reqs; (void)w;
	struct cursor *c = state;   /* at: how many from the end are done */
	for (size_t i = n - (c ? c->at : 0); i-- > 0;) {
		if (tried[i])
			continue;
		if (c)
			c->at = n - 1 - i;
		return (ssize_t)i;
	}
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

static struct res alive_capacity(const struct sched_world *w)
{
	struct res total = {0};
	for (size_t i = 0; i < w->n_agents; i++)
		if (w->agents[i].alive)
			res_add(&total, &w->agents[i].capacity);
	return total;
}

/* Dominant-resource fairness: the oldest request of the user whose
 * dominant share is smallest goes next. */
static ssize_t next_drf(const struct sched_request *reqs, size_t n, const bool *tried,
			const struct sched_world *w, void *state)
{
	(void)state;
	struct res total = alive_capacity(w);
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

/* ---------- fair share ----------
 *
 * The formula (docs/scheduling.md, "Fair share"). For a project p among
 * the world's projects:
 *
 *   target  t_p = weight_p / sum of all projects' weights
 *   usage   u_p = max over kinds k (CPU, memory, fGPU) of
 *                 usage_p[k] / sum over projects of usage[k]
 *                 (decayed resource-seconds: sched_usage_charge)
 *   current c_p = max over kinds k of used_p[k] / alive capacity[k]
 *   key     f_p = (u_p + c_p) / 2 / t_p
 *
 * The project with the smallest key is served next: the decayed usage
 * makes up for the past (a project that ran little lately comes first),
 * and the current share, which sched_plan updates as it places, lets the
 * order turn within one pass instead of giving every free slot to the
 * project that was behind when the pass began. Within the project its
 * members go the same way, among themselves: t_m = weight_m / sum of the
 * project's members' weights, u_m = dominant share of the project's
 * members' decayed usage, c_m = dominant share of what the project holds
 * now; then the member's oldest request. */

struct fs_world {
	struct res total;              /* alive capacity */
	struct sched_usage ptot;       /* sum of the projects' usage */
	double wsum;                   /* sum of the projects' weights */
	struct sched_usage *mtot;      /* [n_projects]: sum of its members' usage */
	double *mwsum;                 /* [n_projects]: sum of its members' weights */
};

static double dom_res(const struct res *u, const struct res *t)
{
	double d = 0;
	const int64_t uu[3] = {u->cpu_m, u->mem, u->fgpu_m};
	const int64_t tt[3] = {t->cpu_m, t->mem, t->fgpu_m};
	for (int i = 0; i < 3; i++)
		if (tt[i] > 0 && (double)uu[i] / (double)tt[i] > d)
			d = (double)uu[i] / (double)tt[i];
	return d;
}

static double dom_usage(const struct sched_usage *u, const struct sched_usage *t)
{
	double d = 0;
	const double uu[3] = {u->cpu_s, u->mem_s, u->fgpu_s};
	const double tt[3] = {t->cpu_s, t->mem_s, t->fgpu_s};
	for (int i = 0; i < 3; i++)
		if (tt[i] > 0 && uu[i] / tt[i] > d)
			d = uu[i] / tt[i];
	return d;
}

static void usage_add(struct sched_usage *a, const struct sched_usage *b)
{
	a->cpu_s += b->cpu_s;
	a->mem_s += b->mem_s;
	a->fgpu_s += b->fgpu_s;
}

static void fs_world_free(struct fs_world *f)
{
	free(f->mtot);
	free(f->mwsum);
}

static int fs_world_init(struct fs_world *f, const struct sched_world *w)
{
	memset(f, 0, sizeof(*f));
	f->total = alive_capacity(w);
	size_t np = w->n_projects;
	f->mtot = calloc(np ? np : 1, sizeof(*f->mtot));
	f->mwsum = calloc(np ? np : 1, sizeof(*f->mwsum));
	if (!f->mtot || !f->mwsum) {
		fs_world_free(f);
		return -1;
	}
	for (size_t p = 0; p < np; p++) {
		usage_add(&f->ptot, &w->projects[p].usage);
		if (w->projects[p].weight > 0)
			f->wsum += w->projects[p].weight;
	}
	for (size_t m = 0; m < w->n_members; m++) {
		const struct sched_member *mb = &w->members[m];
		if (mb->project >= np)
			continue;
		usage_add(&f->mtot[mb->project], &mb->usage);
		if (mb->weight > 0)
			f->mwsum[mb->project] += mb->weight;
	}
	return 0;
}

static double project_target(const struct sched_world *w, const struct fs_world *f, size_t p)
{
	double wt = w->projects[p].weight;
	return f->wsum > 0 && wt > 0 ? wt / f->wsum : 0;
}

static double project_current(const struct sched_world *w, const struct fs_world *f, size_t p)
{
	return dom_res(&w->projects[p].used, &f->total);
}

static double share_key(double usage, double current, double target)
{
	return target > 0 ? (usage + current) / 2 / target : HUGE_VAL;
}

static double project_key(const struct sched_world *w, const struct fs_world *f, size_t p)
{
	return share_key(dom_usage(&w->projects[p].usage, &f->ptot), project_current(w, f, p),
			 project_target(w, f, p));
}

static double member_target(const struct sched_world *w, const struct fs_world *f, size_t m)
{
	const struct sched_member *mb = &w->members[m];
	return mb->project < w->n_projects && f->mwsum[mb->project] > 0 && mb->weight > 0
		       ? mb->weight / f->mwsum[mb->project] : 0;
}

static double member_usage(const struct sched_world *w, const struct fs_world *f, size_t m)
{
	const struct sched_member *mb = &w->members[m];
	return mb->project < w->n_projects ? dom_usage(&mb->usage, &f->mtot[mb->project]) : 0;
}

static double member_current(const struct sched_world *w, size_t m)
{
	const struct sched_member *mb = &w->members[m];
	return mb->project < w->n_projects ? dom_res(&mb->used, &w->projects[mb->project].used) : 0;
}

static double member_key(const struct sched_world *w, const struct fs_world *f, size_t m)
{
	return share_key(member_usage(w, f, m), member_current(w, m), member_target(w, f, m));
}

/* Ranks by key, smallest first (ties: the lower index); rank[i] 1-based. */
static void rank_keys(const double *key, const size_t *which, size_t n, size_t *rank)
{
	for (size_t i = 0; i < n; i++) {
		size_t r = 1;
		for (size_t j = 0; j < n; j++)
			if (key[j] < key[i] || (key[j] == key[i] && which[j] < which[i]))
				r++;
		rank[i] = r;
	}
}

void sched_fairshare_projects(const struct sched_world *w, struct sched_share *out)
{
	struct fs_world f;
	size_t np = w->n_projects;
	double *key = calloc(np ? np : 1, sizeof(double));
	size_t *which = calloc(np ? np : 1, sizeof(size_t)), *rank = calloc(np ? np : 1, sizeof(size_t));
	if (!key || !which || !rank || fs_world_init(&f, w) < 0) {
		free(key), free(which), free(rank);
		memset(out, 0, np * sizeof(*out));
		return;
	}
	for (size_t p = 0; p < np; p++) {
		out[p].target = project_target(w, &f, p);
		out[p].usage_share = dom_usage(&w->projects[p].usage, &f.ptot);
		out[p].current_share = project_current(w, &f, p);
		key[p] = project_key(w, &f, p);
		which[p] = p;
	}
	rank_keys(key, which, np, rank);
	for (size_t p = 0; p < np; p++)
		out[p].rank = rank[p];
	fs_world_free(&f);
	free(key), free(which), free(rank);
}

void sched_fairshare_members(const struct sched_world *w, size_t project, struct sched_share *out)
{
	struct fs_world f;
	size_t nm = w->n_members, k = 0;
	double *key = calloc(nm ? nm : 1, sizeof(double));
	size_t *which = calloc(nm ? nm : 1, sizeof(size_t)), *rank = calloc(nm ? nm : 1, sizeof(size_t));
	if (!key || !which || !rank || fs_world_init(&f, w) < 0) {
		free(key), free(which), free(rank);
		return;
	}
	for (size_t m = 0; m < nm; m++) {
		if (w->members[m].project != project)
			continue;
		out[m].target = member_target(w, &f, m);
		out[m].usage_share = member_usage(w, &f, m);
		out[m].current_share = member_current(w, m);
		key[k] = member_key(w, &f, m);
		which[k++] = m;
	}
	rank_keys(key, which, k, rank);
	for (size_t i = 0; i < k; i++)
		out[which[i]].rank = rank[i];
	fs_world_free(&f);
	free(key), free(which), free(rank);
}

void sched_usage_charge(struct sched_usage *u, const struct res *req, double dt_s, double half_life_s)
{
	if (dt_s <= 0)
		return;
	/* Held at a constant rate r over dt and decayed continuously, the
	 * charge is the integral of r * 2^(-(dt - s) / h) for s in [0, dt],
	 * r * h / ln 2 * (1 - 2^(-dt / h)): the same whether the caller
	 * charges every second or once a minute. */
	double keep = 1, span = dt_s;
	if (half_life_s > 0) {
		keep = exp2(-dt_s / half_life_s);
		span = half_life_s / 0.69314718055994530942 * (1 - keep);   /* ln 2 */
	}
	u->cpu_s = u->cpu_s * keep + (req ? (double)req->cpu_m / 1000.0 * span : 0);
	u->mem_s = u->mem_s * keep + (req ? (double)req->mem / (double)(1LL << 30) * span : 0);
	u->fgpu_s = u->fgpu_s * keep + (req ? (double)req->fgpu_m / 1000.0 * span : 0);
}

/* The fair-share policy's state for one priority level: its requests
 * grouped by slot (a member of a project; a project's requests without a
 * member; with no projects, a user), each slot's untried ones oldest
 * first, and each project's slots that still have some, so that next
 * costs the projects and their live slots, not the queue. */
struct fs_state {
	const struct sched_request *reqs;
	struct fs_world f;
	size_t np;             /* projects + 1: the last holds requests without a valid one */
	size_t ns;
	size_t *order;         /* [n]: request positions by slot */
	size_t *cur, *end;     /* [ns]: each slot's range in order */
	size_t *slot_project;  /* [ns] */
	size_t *pslots;        /* [ns]: slots by project */
	size_t *pfirst, *plive;/* [np]: first in pslots, how many still have requests */
	/* Projects with requests left, in a heap by (key, oldest request,
	 * index). Between two calls only the project last served can have
	 * changed (its placement, or the request it no longer waits with), so
	 * a call re-files that one and takes the top: O(log projects), where
	 * every user having a personal project makes projects many. */
	size_t *heap, n_heap;  /* [np] */
	ssize_t *hpos;         /* [np]: position in heap, -1 when out */
	double *hkey;          /* [np] */
	int64_t *holdest;      /* [np] */
	ssize_t last;          /* the project last served, or -1 */
};

static size_t fs_project_of(const struct sched_world *w, const struct sched_request *r)
{
	return r->project < w->n_projects ? r->project : w->n_projects;
}

static size_t fs_slot_of(const struct sched_world *w, const struct sched_request *r)
{
	if (!w->n_projects)
		return r->user < w->n_users ? r->user : w->n_users;
	size_t p = fs_project_of(w, r);
	if (r->member < w->n_members && w->members[r->member].project == p)
		return r->member;
	return w->n_members + p;
}

static void fs_stop(void *state)
{
	struct fs_state *st = state;
	if (!st)
		return;
	fs_world_free(&st->f);
	free(st->order);
	free(st->cur);
	free(st->end);
	free(st->slot_project);
	free(st->pslots);
	free(st->pfirst);
	free(st->plive);
	free(st->heap);
	free(st->hpos);
	free(st->hkey);
	free(st->holdest);
	free(st);
}

static bool fs_before(const struct fs_state *st, size_t a, size_t b)
{
	if (st->hkey[a] != st->hkey[b])
		return st->hkey[a] < st->hkey[b];
	if (st->holdest[a] != st->holdest[b])
		return st->holdest[a] < st->holdest[b];
	return a < b;
}

static void fs_swap(struct fs_state *st, size_t i, size_t j)
{
	size_t a = st->heap[i], b = st->heap[j];
	st->heap[i] = b;
	st->heap[j] = a;
	st->hpos[b] = (ssize_t)i;
	st->hpos[a] = (ssize_t)j;
}

static void fs_sift(struct fs_state *st, size_t i)
{
	while (i > 0 && fs_before(st, st->heap[i], st->heap[(i - 1) / 2])) {
		fs_swap(st, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < st->n_heap && fs_before(st, st->heap[l], st->heap[m]))
			m = l;
		if (r < st->n_heap && fs_before(st, st->heap[r], st->heap[m]))
			m = r;
		if (m == i)
			return;
		fs_swap(st, i, m);
		i = m;
	}
}

/* Drops p's slots whose requests have all been tried (tried NULL: none
 * are), and files p again by its key and oldest request, or takes it out
 * when nothing of it is left. */
static void fs_refile(struct fs_state *st, const struct sched_world *w, size_t p, const bool *tried)
{
	size_t *sl = &st->pslots[st->pfirst[p]];
	int64_t oldest = INT64_MAX;
	for (size_t k = 0; k < st->plive[p];) {
		size_t s = sl[k];
		while (tried && st->cur[s] < st->end[s] && tried[st->order[st->cur[s]]])
			st->cur[s]++;
		if (st->cur[s] == st->end[s]) {
			sl[k] = sl[--st->plive[p]];
			continue;
		}
		if (st->reqs[st->order[st->cur[s]]].seq < oldest)
			oldest = st->reqs[st->order[st->cur[s]]].seq;
		k++;
	}
	ssize_t at = st->hpos[p];
	if (!st->plive[p]) {
		if (at >= 0) {
			size_t last = st->n_heap - 1;
			if ((size_t)at != last)
				fs_swap(st, (size_t)at, last);
			st->n_heap--;
			st->hpos[p] = -1;
			if ((size_t)at < st->n_heap)
				fs_sift(st, (size_t)at);
		}
		return;
	}
	st->hkey[p] = !w->n_projects ? 0 : p < w->n_projects ? project_key(w, &st->f, p) : HUGE_VAL;
	st->holdest[p] = oldest;
	if (at < 0) {
		at = (ssize_t)st->n_heap++;
		st->heap[at] = p;
		st->hpos[p] = at;
	}
	fs_sift(st, (size_t)at);
}

static void *fs_start(const struct sched_request *reqs, size_t n, const struct sched_world *w)
{
	struct fs_state *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->reqs = reqs;
	st->np = w->n_projects + 1;
	st->ns = w->n_projects ? w->n_members + st->np : w->n_users + 1;
	size_t ns = st->ns, np = st->np;
	st->order = calloc(n ? n : 1, sizeof(size_t));
	st->cur = calloc(ns, sizeof(size_t));
	st->end = calloc(ns, sizeof(size_t));
	st->slot_project = calloc(ns, sizeof(size_t));
	st->pslots = calloc(ns, sizeof(size_t));
	st->pfirst = calloc(np + 1, sizeof(size_t));
	st->plive = calloc(np, sizeof(size_t));
	st->heap = calloc(np, sizeof(size_t));
	st->hpos = calloc(np, sizeof(ssize_t));
	st->hkey = calloc(np, sizeof(double));
	st->holdest = calloc(np, sizeof(int64_t));
	if (fs_world_init(&st->f, w) < 0) {
		free(st->order);
		st->order = NULL;
	}
	if (!st->order || !st->cur || !st->end || !st->slot_project || !st->pslots || !st->pfirst || !st->plive ||
	    !st->heap || !st->hpos || !st->hkey || !st->holdest) {
		fs_stop(st);
		return NULL;
	}
	/* Counting sort of the requests by slot, keeping queue order. */
	for (size_t i = 0; i < n; i++) {
		size_t s = fs_slot_of(w, &reqs[i]);
		st->end[s]++;
		st->slot_project[s] = w->n_projects ? fs_project_of(w, &reqs[i]) : 0;
	}
	size_t at = 0;
	for (size_t s = 0; s < ns; s++) {
		size_t c = st->end[s];
		st->cur[s] = st->end[s] = at;
		at += c;
	}
	for (size_t i = 0; i < n; i++)
		st->order[st->end[fs_slot_of(w, &reqs[i])]++] = i;
	/* Each project's slots that have requests. */
	for (size_t s = 0; s < ns; s++)
		if (st->end[s] > st->cur[s])
			st->pfirst[st->slot_project[s] + 1]++;
	for (size_t p = 0; p < np; p++)
		st->pfirst[p + 1] += st->pfirst[p];
	for (size_t s = 0; s < ns; s++) {
		if (st->end[s] == st->cur[s])
			continue;
		size_t p = st->slot_project[s];
		st->pslots[st->pfirst[p] + st->plive[p]++] = s;
	}
	for (size_t p = 0; p < np; p++) {
		st->hpos[p] = -1;
		fs_refile(st, w, p, NULL);
	}
	st->last = -1;
	return st;
}

static double fs_slot_key(const struct sched_world *w, const struct fs_state *st, size_t s)
{
	if (!w->n_projects)
		return s < w->n_users ? dom_res(&w->users[s].used, &st->f.total) : HUGE_VAL;
	return s < w->n_members ? member_key(w, &st->f, s) : HUGE_VAL;
}

static ssize_t next_fairshare(const struct sched_request *reqs, size_t n, const bool *tried,
			      const struct sched_world *w, void *state)
{
	struct fs_state *st = state;
	if (!st)
		return next_fifo(reqs, n, tried, w, NULL);   /* no memory: oldest first */
	(void)n;
	/* Only the project last served can have changed since the last call
	 * (sched_plan tries nothing but what next returns): re-filed, the
	 * top of the heap is the next. */
	if (st->last >= 0)
		fs_refile(st, w, (size_t)st->last, tried);
	if (!st->n_heap)
		return -1;
	size_t best_p = st->heap[0];
	st->last = (ssize_t)best_p;
	double best_key = 0;
	int64_t best_seq = 0;
	size_t *sl = &st->pslots[st->pfirst[best_p]];
	ssize_t best_s = -1;
	for (size_t k = 0; k < st->plive[best_p]; k++) {
		size_t s = sl[k];
		double key = fs_slot_key(w, st, s);
		int64_t seq = reqs[st->order[st->cur[s]]].seq;
		if (best_s < 0 || key < best_key || (key == best_key && seq < best_seq)) {
			best_s = (ssize_t)s;
			best_key = key;
			best_seq = seq;
		}
	}
	return (ssize_t)st->order[st->cur[best_s]];
}

const struct sched_queue_ops sched_fifo = {"fifo", true, next_fifo, cursor_start, free};
const struct sched_queue_ops sched_lifo = {"lifo", true, next_lifo, cursor_start, free};
const struct sched_queue_ops sched_drf = {"drf", false, next_drf, NULL, NULL};
const struct sched_queue_ops sched_fairshare = {"fairshare", false, next_fairshare, fs_start, fs_stop};

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
	static const struct sched_queue_ops *const all[] = {&sched_fifo, &sched_lifo, &sched_drf, &sched_fairshare};
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

/* The agents of one resource group (the world's indexes). */
struct group_agents {
	const size_t *ids;
	size_t n;
};

/* What the agents of a group offer a request of this CPU and memory, for
 * the words of its wait. */
struct offer {
	size_t alive, host_fit, drained;
	size_t held;                /* alive agents held for a waiting gang (not in alive) */
	struct res best;            /* the most free CPU and memory on a node */
	int64_t best_dev;           /* the most free on one device of a node with the host room */
	int64_t most_whole;         /* the most whole free devices on such a node */
};

static struct offer group_offer(const struct sched_agent *agents, const bool *held, struct group_agents g,
				const struct res *req, int64_t per_device_m)
{
	struct offer o = {0};
	for (size_t k = 0; k < g.n; k++) {
		const struct sched_agent *a = &agents[g.ids[k]];
		if (!a->alive)
			continue;
		if (a->drained) {
			o.drained++;
			continue;
		}
		if (held && held[g.ids[k]]) {
			o.held++;   /* its room is not on offer: the words speak of the others */
			continue;
		}
		o.alive++;
		if (a->free.cpu_m > o.best.cpu_m) o.best.cpu_m = a->free.cpu_m;
		if (a->free.mem > o.best.mem) o.best.mem = a->free.mem;
		if (req->cpu_m > a->free.cpu_m || req->mem > a->free.mem)
			continue;
		o.host_fit++;
		int64_t whole = 0;
		for (size_t d = 0; d < a->n_devs; d++) {
			if (a->devs[d].free_m > o.best_dev)
				o.best_dev = a->devs[d].free_m;
			whole += a->devs[d].free_m == per_device_m;
		}
		if (whole > o.most_whole)
			o.most_whole = whole;
	}
	return o;
}

/* Words of a wait, cut at the buffer's end when a long group name makes
 * them longer than it (through vsnprintf, which the compiler does not flag
 * for a cut it cannot rule out once these are inlined into the pass). */
__attribute__((format(printf, 3, 4))) static void say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* Why a request that passed the user policy fits nowhere in its group, in
 * words. grp: "" or " of group NAME" (when the cluster has several). */
static void explain_wait(const struct offer *o, const char *grp, const struct res *req, int64_t per_device_m,
			 char *buf, size_t len)
{
	char need[96];
	struct res host_req = *req;
	host_req.fgpu_m = 0;
	res_describe(&host_req, need, sizeof(need));
	size_t alive = o->alive, host_fit = o->host_fit, drained = o->drained;
	struct res best = o->best;
	int64_t best_dev = o->best_dev, most_whole = o->most_whole;
	if (alive == 0) {
		if (o->held)
			say(buf, len, "waiting for a node%s: every alive node%s is held for a waiting cluster "
				 "session", grp, grp);
		else if (drained)
			say(buf, len, "waiting for a node%s: every alive node%s is drained (an admin stopped new "
				 "sessions there)", grp, grp);
		else
			say(buf, len, "waiting for a node%s: no node%s is alive", grp, grp);
		return;
	}
	if (host_fit == 0 || req->fgpu_m == 0) {
		char most[96];
		res_describe(&best, most, sizeof(most));
		say(buf, len, "waiting for resources: needs %s; the most free on any node%s is %s", need, grp,
			 most);
		return;
	}
	char want[48], have[48];
	fmt_fgpu(req->fgpu_m, want, sizeof(want));
	fmt_fgpu(best_dev, have, sizeof(have));
	if (req->fgpu_m <= per_device_m) {
		say(buf, len, "waiting for a GPU: needs %s on one device; the most free on one device of any "
			 "node%s is %s", want, grp, have);
	} else {
		char part[48];
		fmt_fgpu(req->fgpu_m % per_device_m, part, sizeof(part));
		say(buf, len, "waiting for GPUs: needs %s = %lld whole free devices%s%s on one node; "
			 "the most whole free devices on a node%s is %lld",
			 want, (long long)(req->fgpu_m / per_device_m),
			 req->fgpu_m % per_device_m ? " + " : "", req->fgpu_m % per_device_m ? part : "", grp,
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

/* Whether the project's quota allows one more; the reason when not. */
static bool quota_allows(const struct sched_project *p, const struct res *req, char *why, size_t n)
{
	char lim[48], use[48];
	const char *name = p->name ? p->name : p->id ? p->id : "?";
	if (p->max_sessions > 0 && p->sessions + 1 > p->max_sessions) {
		snprintf(why, n, "waiting for project %s's session quota: %lld of %lld running", name,
			 (long long)p->sessions, (long long)p->max_sessions);
		return false;
	}
	if (p->max.cpu_m > 0 && p->used.cpu_m + req->cpu_m > p->max.cpu_m) {
		units_format_milli(p->max.cpu_m, lim, sizeof(lim));
		units_format_milli(p->used.cpu_m, use, sizeof(use));
		snprintf(why, n, "waiting for project %s's CPU quota: %s of %s in use", name, use, lim);
		return false;
	}
	if (p->max.mem > 0 && p->used.mem + req->mem > p->max.mem) {
		units_format_size(p->max.mem, lim, sizeof(lim));
		units_format_size(p->used.mem, use, sizeof(use));
		snprintf(why, n, "waiting for project %s's memory quota: %s of %s in use", name, use, lim);
		return false;
	}
	if (p->max.fgpu_m > 0 && p->used.fgpu_m + req->fgpu_m > p->max.fgpu_m) {
		units_format_milli(p->max.fgpu_m, lim, sizeof(lim));
		units_format_milli(p->used.fgpu_m, use, sizeof(use));
		snprintf(why, n, "waiting for project %s's fGPU quota: %s of %s in use", name, use, lim);
		return false;
	}
	return true;
}

/* ---------- the pass ---------- */

/* Index of an agent of the group that could hold req with nothing running
 * on it (only usable ones when asked), or -1. */
static ssize_t could_ever_hold(const struct sched_agent *agents, struct group_agents g, const struct res *req,
			       int64_t per_device_m, bool alive_only)
{
	struct sched_device all_free[SCHED_MAX_DEVICES];
	for (size_t k = 0; k < g.n; k++) {
		size_t i = g.ids ? g.ids[k] : k;
		const struct sched_agent *a = &agents[i];
		if ((alive_only && !usable(a)) || req->cpu_m > a->capacity.cpu_m ||
		    req->mem > a->capacity.mem)
			continue;
		size_t nd = agent_devs(a);
		for (size_t d = 0; d < nd; d++)
			all_free[d].free_m = per_device_m;
		if (sched_gpu_fit(all_free, nd, req->fgpu_m, per_device_m, true, NULL, NULL))
			return (ssize_t)i;
	}
	return -1;
}

static bool any_alive(const struct sched_agent *agents, struct group_agents g)
{
	for (size_t k = 0; k < g.n; k++)
		if (usable(&agents[g.ids ? g.ids[k] : k]))
			return true;
	return false;
}

/* A request shape that found no victims in this pass: a later request of
 * the same group, of no higher priority and at least as large in every
 * kind, finds none either (the candidates only dwindle as the pass goes),
 * so it is not searched again. One the reclaim rule was open to (under)
 * speaks only for its own project; one it was not, for any request the
 * rule is not open to either. */
struct no_victims {
	size_t group, project;
	int priority;
	bool under;
	struct res req;
};
#define NO_VICTIMS_MAX 16
#define OFFER_MEMO_MAX 8

/* Everything one pass keeps besides the world. */
struct pass {
	const struct sched_params *p;
	struct sched_world *w;
	const struct sched_request *reqs;
	size_t n_reqs;
	double active_wsum;               /* weights of the projects holding or asking for something */
	size_t n_groups;                  /* groups the agents and requests name */
	size_t *gstart;                   /* [n_groups + 1]: ranges in gids */
	size_t *gids;                     /* [n_agents]: agents by group */
	int32_t *local;                   /* [n_agents]: position within its group */
	struct sched_index **ix;          /* [n_groups]: built on first use */
	bool *held;                       /* [n_agents]: held for a waiting gang for the rest of the pass */
	size_t *gcursor;                  /* [n_groups]: the group's agents before it are all held */
	struct gang_memo {                /* gang shapes that found nothing left to hold */
		size_t group;
		int n;
		bool single;
		struct res req;
	} gmemo[NO_VICTIMS_MAX];
	size_t n_gmemo;
	int64_t per_dev;
	/* Preemption: built on its first use. */
	bool pre_ready;
	struct fs_world f;
	size_t *rstart, *rids;            /* running sessions by agent: [n_agents + 1], [n_running] */
	bool *chosen;                     /* [n_running]: a victim (or counted on) this pass */
	struct res *leaving;              /* [n_projects]: what its chosen victims hold */
	size_t *buf[5];                   /* [n_running + 1] each: the search's scratch lists */
	int64_t *ending_fgpu;             /* [n_agents]: fGPU its ending sessions hold */
	size_t *ending_agents, n_ending_agents;   /* agents with sessions ending */
	size_t *by_cost, n_by_cost;       /* possible victims, cheapest first (made on first use) */
	bool by_cost_ready;
	int64_t single_room;              /* the most fGPU one victim could free with its node's */
	bool *over;                       /* [n_projects]: at or over its target */
	size_t n_over;
	uint64_t over_gen;                /* the gen over was computed at; 0: never */
	int min_victim_priority;          /* lowest priority of a possible victim */
	size_t n_ending;                  /* running sessions already ending */
	struct no_victims nov[NO_VICTIMS_MAX];
	size_t n_nov;
	/* What groups offer, by request CPU and memory, since the last change
	 * of any agent: a full cluster leaves most of a long queue waiting,
	 * and a scan of the group per waiting request would be most of the
	 * pass. */
	uint64_t gen;                     /* bumped at every change of an agent */
	struct offer_memo {
		uint64_t gen;             /* 0: empty */
		size_t group;
		int64_t cpu_m, mem;
		struct offer o;
	} memo[OFFER_MEMO_MAX];
	size_t memo_next;
	/* The words themselves, by whole request: formatting them is most
	 * of what a waiting request costs once the offer is known. */
	struct words_memo {
		uint64_t gen;
		size_t group;
		struct res req;
		char text[SCHED_REASON_MAX];
	} words[OFFER_MEMO_MAX];
	size_t words_next;
	struct sched_result *res;
};

static struct group_agents group_of(const struct pass *ps, size_t g)
{
	struct group_agents ga = {NULL, 0};
	if (g < ps->n_groups) {
		ga.ids = &ps->gids[ps->gstart[g]];
		ga.n = ps->gstart[g + 1] - ps->gstart[g];
	}
	return ga;
}

/* " of group NAME" when the cluster has several groups, else "". */
static const char *group_words(const struct pass *ps, size_t g, char *buf, size_t n)
{
	const struct sched_world *w = ps->w;
	if (w->n_groups <= 1 && ps->n_groups <= 1) {
		buf[0] = '\0';
		return buf;
	}
	if (g < w->n_groups && w->group_names && w->group_names[g])
		snprintf(buf, n, " of group %s", w->group_names[g]);
	else
		snprintf(buf, n, " of group #%zu", g);
	return buf;
}

static const char *group_name(const struct sched_world *w, size_t g, char *buf, size_t n)
{
	if (g < w->n_groups && w->group_names && w->group_names[g])
		return w->group_names[g];
	snprintf(buf, n, "#%zu", g);
	return buf;
}

static int pass_init(struct pass *ps, const struct sched_params *p, struct sched_world *w,
		     const struct sched_request *reqs, size_t n_reqs)
{
	memset(ps, 0, sizeof(*ps));
	ps->p = p;
	ps->w = w;
	ps->reqs = reqs;
	ps->n_reqs = n_reqs;
	ps->per_dev = p->per_device_m;
	ps->gen = 1;
	/* The world's groups (one when it names none); an agent of a group
	 * past them (a caller's "no group") is in none and gets nothing. */
	size_t g = w->n_groups ? w->n_groups : 1;
	ps->n_groups = g;
	size_t na = w->n_agents;
	ps->gstart = calloc(g + 1, sizeof(size_t));
	ps->gids = calloc(na ? na : 1, sizeof(size_t));
	ps->local = calloc(na ? na : 1, sizeof(int32_t));
	ps->ix = calloc(g, sizeof(*ps->ix));
	ps->held = calloc(na ? na : 1, sizeof(bool));
	ps->gcursor = calloc(g, sizeof(size_t));
	if (!ps->gstart || !ps->gids || !ps->local || !ps->ix || !ps->held || !ps->gcursor)
		return -1;
	for (size_t i = 0; i < na; i++)
		if (w->agents[i].group < g)
			ps->gstart[w->agents[i].group + 1]++;
	for (size_t k = 0; k < g; k++)
		ps->gstart[k + 1] += ps->gstart[k];
	size_t *fill = calloc(g, sizeof(size_t));
	if (!fill)
		return -1;
	for (size_t i = 0; i < na; i++) {
		size_t gi = w->agents[i].group;
		ps->local[i] = -1;
		if (gi >= g)
			continue;
		ps->local[i] = (int32_t)fill[gi];
		ps->gids[ps->gstart[gi] + fill[gi]++] = i;
	}
	free(fill);
	return 0;
}

static void pass_free(struct pass *ps)
{
	for (size_t g = 0; ps->ix && g < ps->n_groups; g++)
		index_free(ps->ix[g]);
	free(ps->ix);
	free(ps->gstart);
	free(ps->gids);
	free(ps->local);
	free(ps->held);
	free(ps->gcursor);
	if (ps->pre_ready)
		fs_world_free(&ps->f);
	free(ps->rstart);
	free(ps->rids);
	free(ps->chosen);
	free(ps->leaving);
	free(ps->over);
	free(ps->by_cost);
	for (size_t i = 0; i < 5; i++)
		free(ps->buf[i]);
	free(ps->ending_fgpu);
	free(ps->ending_agents);
}

/* The group's index, built on first use; NULL when the group has no agent
 * (or on no memory: then nothing is placed in it this pass). */
static struct sched_index *group_index(struct pass *ps, size_t g)
{
	if (g >= ps->n_groups || ps->gstart[g + 1] == ps->gstart[g])
		return NULL;
	if (!ps->ix[g])
		ps->ix[g] = index_build(ps->w->agents, &ps->gids[ps->gstart[g]], ps->gstart[g + 1] - ps->gstart[g],
					ps->local, ps->held, ps->p->per_device_m, ps->p->quantum_m);
	return ps->ix[g];
}

static struct offer memo_offer(struct pass *ps, size_t g, const struct res *req)
{
	for (size_t i = 0; i < OFFER_MEMO_MAX; i++) {
		struct offer_memo *m = &ps->memo[i];
		if (m->gen == ps->gen && m->group == g && m->cpu_m == req->cpu_m && m->mem == req->mem)
			return m->o;
	}
	struct offer_memo *m = &ps->memo[ps->memo_next++ % OFFER_MEMO_MAX];
	m->o = group_offer(ps->w->agents, ps->held, group_of(ps, g), req, ps->p->per_device_m);
	m->gen = ps->gen;
	m->group = g;
	m->cpu_m = req->cpu_m;
	m->mem = req->mem;
	return m->o;
}

/* The words of a wait in the group, from the memo when the same request
 * was explained since the last change of an agent. */
static void memo_words(struct pass *ps, size_t g, const char *gw, const struct res *req, char *why)
{
	for (size_t i = 0; i < OFFER_MEMO_MAX; i++) {
		struct words_memo *m = &ps->words[i];
		if (m->gen == ps->gen && m->group == g && m->req.cpu_m == req->cpu_m && m->req.mem == req->mem &&
		    m->req.fgpu_m == req->fgpu_m) {
			memcpy(why, m->text, SCHED_REASON_MAX);
			return;
		}
	}
	struct offer o = memo_offer(ps, g, req);
	explain_wait(&o, gw, req, ps->p->per_device_m, why, SCHED_REASON_MAX);
	struct words_memo *m = &ps->words[ps->words_next++ % OFFER_MEMO_MAX];
	m->gen = ps->gen;
	m->group = g;
	m->req = *req;
	memcpy(m->text, why, SCHED_REASON_MAX);
}

/* What a request holds in all: a gang holds every container's room,
 * though it counts as one session. */
static struct res request_need(const struct sched_request *r)
{
	int64_t n = r->gang > 1 ? r->gang : 1;
	return (struct res){r->req.cpu_m * n, r->req.mem * n, r->req.fgpu_m * n};
}

static void account(struct sched_world *w, const struct sched_request *r, int sign)
{
	struct res d = request_need(r);
	if (sign < 0)
		d = (struct res){-d.cpu_m, -d.mem, -d.fgpu_m};
	if (r->user < w->n_users) {
		res_add(&w->users[r->user].used, &d);
		w->users[r->user].sessions += sign;
	}
	if (r->project < w->n_projects) {
		res_add(&w->projects[r->project].used, &d);
		w->projects[r->project].sessions += sign;
		if (r->member < w->n_members && w->members[r->member].project == r->project)
			res_add(&w->members[r->member].used, &d);
	}
}


/* ---------- gangs ---------- */

/* How many of n containers of req fit in a's room: its free room, or its
 * capacity when empty. Each fills a device share the way the selector
 * would (packed or spread); out (may be NULL) gets their shares. */
static int members_fit(const struct pass *ps, const struct sched_agent *a, const struct res *req, int n,
		       bool empty, struct sched_placement *out)
{
	struct sched_device devs[SCHED_MAX_DEVICES];
	size_t nd = agent_devs(a);
	struct res room = empty ? a->capacity : a->free;
	for (size_t d = 0; d < nd; d++)
		devs[d].free_m = empty ? ps->per_dev : a->devs[d].free_m;
	bool pack = ps->p->selector != &sched_dispersed;
	int k = 0;
	for (; k < n; k++) {
		struct sched_gpu_share sh[SCHED_MAX_DEVICES];
		size_t ns = 0;
		if (req->cpu_m > room.cpu_m || req->mem > room.mem || req->fgpu_m > room.fgpu_m ||
		    !sched_gpu_fit(devs, nd, req->fgpu_m, ps->per_dev, pack, sh, &ns))
			break;
		for (size_t s = 0; s < ns; s++)
			devs[sh[s].device].free_m -= sh[s].fgpu_m;
		res_sub(&room, req);
		if (out) {
			memcpy(out[k].shares, sh, ns * sizeof(sh[0]));
			out[k].n_shares = ns;
		}
	}
	return k;
}

/* Takes (sign +1) or gives back (-1) one member's room on its agent. */
static void member_room(struct sched_agent *a, const struct res *req, const struct sched_placement *pl, int sign)
{
	if (sign > 0)
		res_sub(&a->free, req);
	else
		res_add(&a->free, req);
	for (size_t s = 0; s < pl->n_shares; s++)
		a->devs[pl->shares[s].device].free_m -= sign * pl->shares[s].fgpu_m;
}

/* Places gang ri whole: fills out[0 .. gang-1] and returns gang, having
 * taken their room and charged the gang as one session. Or returns 0 with
 * everything as before the try (agents' free room and devices, and the
 * index's lists in their order, so that the requests after it are placed
 * as if it had never been tried), and *fit_now says how many members fit:
 * in all for a multi-node gang, on the best node for a single-node one. */
static int gang_place(struct pass *ps, size_t ri, struct sched_placement *out, int *fit_now)
{
	const struct sched_request *r = &ps->reqs[ri];
	struct sched_agent *agents = ps->w->agents;
	struct sched_index *ix = group_index(ps, r->group);
	int n = r->gang;
	*fit_now = 0;
	if (!ix)
		return 0;
	struct bucket_log *log = &ix->log;
	size_t mark = log->n;
	log->on = true;
	bool whole = false;
	if (!r->gang_single_node) {
		/* Member by member, each where the selector puts it given the
		 * members before it: several may share an agent. */
		int k = 0;
		for (; k < n; k++) {
			struct sched_placement *pl = &out[k];
			if (log_reserve(log, SCHED_MAX_DEVICES + 2) < 0)
				break;
			ssize_t a = ps->p->selector->select(ix, &r->req, pl->shares, &pl->n_shares);
			if (a < 0)
				break;
			pl->request = ri;
			pl->member = k;
			pl->agent = (size_t)a;
			member_room(&agents[a], &r->req, pl, +1);
			index_update(ix, (size_t)a);
		}
		*fit_now = k;
		whole = k == n;
		if (!whole) {
			while (k-- > 0)
				member_room(&agents[out[k].agent], &r->req, &out[k], -1);
			log_undo(log, mark);
		}
	} else {
		/* How many the best agent holds now, and whether one holds
		 * them all: a scan of the group that tries the device fit
		 * only where the free amounts leave room for more than the
		 * best so far (in a full cluster, almost nowhere). The walk
		 * below, in the selector's order, is for when one does. */
		struct group_agents g = group_of(ps, r->group);
		for (size_t q = 0; q < g.n && *fit_now < n; q++) {
			const struct sched_agent *a = &agents[g.ids[q]];
			if (!usable(a) || ps->held[g.ids[q]])
				continue;
			int64_t most = n;
			if (r->req.cpu_m > 0 && a->free.cpu_m / r->req.cpu_m < most)
				most = a->free.cpu_m / r->req.cpu_m;
			if (r->req.mem > 0 && a->free.mem / r->req.mem < most)
				most = a->free.mem / r->req.mem;
			if (r->req.fgpu_m > 0 && a->free.fgpu_m / r->req.fgpu_m < most)
				most = a->free.fgpu_m / r->req.fgpu_m;
			if (most <= *fit_now)
				continue;
			int f = members_fit(ps, a, &r->req, n, false, NULL);
			if (f > *fit_now)
				*fit_now = f;
		}
		/* The agents in the selector's order: the one it would pick
		 * for one member, set aside (hidden) when it cannot hold them
		 * all, until one can. */
		ssize_t found = -1;
		struct sched_gpu_share one[SCHED_MAX_DEVICES];
		size_t n_one;
		while (*fit_now == n) {
			if (log_reserve(log, SCHED_MAX_DEVICES + 2) < 0)
				break;
			ssize_t a = ps->p->selector->select(ix, &r->req, one, &n_one);
			if (a < 0)
				break;
			if (members_fit(ps, &agents[a], &r->req, n, false, NULL) == n) {
				found = a;
				break;
			}
			index_hide(ix, (size_t)a);
		}
		log_undo(log, mark);   /* the candidates set aside come back */
		if (found >= 0) {
			struct sched_agent *ag = &agents[found];
			members_fit(ps, ag, &r->req, n, false, out);
			for (int k = 0; k < n; k++) {
				out[k].request = ri;
				out[k].member = k;
				out[k].agent = (size_t)found;
				member_room(ag, &r->req, &out[k], +1);
			}
			index_update(ix, (size_t)found);
			whole = true;
		}
	}
	log->on = false;
	log->n = mark;   /* a placed gang's changes stand */
	if (!whole)
		return 0;
	account(ps->w, r, +1);
	ps->gen++;
	return n;
}

/* Whether a gang of this shape already found nothing left to hold in its
 * group this pass: one at least as large finds nothing either, since the
 * agents held only grow and capacity does not change. */
static bool gang_nothing_known(const struct pass *ps, const struct sched_request *r)
{
	for (size_t i = 0; i < ps->n_gmemo; i++) {
		const struct gang_memo *m = &ps->gmemo[i];
		if (m->group == r->group && m->single == r->gang_single_node && r->gang >= m->n &&
		    r->req.cpu_m >= m->req.cpu_m && r->req.mem >= m->req.mem && r->req.fgpu_m >= m->req.fgpu_m)
			return true;
	}
	return false;
}

/* How many members an empty agent holds depends only on its capacity and
 * device count: agents of a group are mostly alike, so the last answer is
 * kept for the next agent of the same size. */
struct cap_memo {
	bool set;
	struct res capacity;
	size_t n_devs;
	int c;
};

static int members_fit_empty(const struct pass *ps, const struct sched_agent *a, const struct res *req, int n,
			     struct cap_memo *m)
{
	size_t nd = agent_devs(a);
	if (m->set && m->n_devs == nd && m->capacity.cpu_m == a->capacity.cpu_m && m->capacity.mem == a->capacity.mem &&
	    m->capacity.fgpu_m == a->capacity.fgpu_m)
		return m->c;
	*m = (struct cap_memo){true, a->capacity, nd, members_fit(ps, a, req, n, true, NULL)};
	return m->c;
}

#define GANG_LOOKAHEAD 64   /* open agents weighed for a hold beyond the first that add up */

/* A candidate for a hold: how many members its capacity holds. */
struct gang_cand {
	size_t agent;
	int cap;
};

/* Larger capacity first (fewest agents), then the group's order. */
static int gang_cand_cmp(const void *x, const void *y)
{
	const struct gang_cand *a = x, *b = y;
	if (a->cap != b->cap)
		return a->cap > b->cap ? -1 : 1;
	return a->agent < b->agent ? -1 : a->agent > b->agent;
}

/* A gang that does not fit now holds, for the rest of the pass, the
 * agents it would start on once they free up, so that the room it needs
 * builds up there as their sessions end instead of going to the requests
 * behind it, while those requests still use every other agent. The agents
 * are chosen by capacity (what each holds when empty), not by what is
 * free now, so the same ones are held pass after pass: one agent that
 * holds all members (a single-node gang needs one), else the fewest among
 * the first open agents of the group in its order. Writes the reason. */
static void gang_hold(struct pass *ps, const struct sched_request *r, int fit_now, char *why)
{
	struct sched_agent *agents = ps->w->agents;
	struct group_agents g = group_of(ps, r->group);
	int n = r->gang;
	bool single = r->gang_single_node;
	char gw[96];
	group_words(ps, r->group, gw, sizeof(gw));
	const char *where = single ? " on one node" : "";
	/* Could the group hold it at all, every alive agent empty? Stops
	 * as soon as it could: the common case looks at a few agents. */
	int total = 0;
	struct cap_memo memo = {0};
	for (size_t k = 0; k < g.n && total < n; k++) {
		const struct sched_agent *a = &agents[g.ids[k]];
		if (!usable(a))
			continue;
		int c = members_fit_empty(ps, a, &r->req, n, &memo);
		if (single)
			total = c == n ? n : 0;
		else
			total += c;
	}
	if (total < n) {
		if (single)
			snprintf(why, SCHED_REASON_MAX, "waiting for room for all %d containers on one node: no alive "
				 "node%s could hold them even when empty", n, gw);
		else
			snprintf(why, SCHED_REASON_MAX, "waiting for room for all %d containers: the alive nodes%s "
				 "could not hold them even when empty", n, gw);
		return;
	}
	/* The open agents from the group's first one not held: the first
	 * that holds all members, else the first GANG_LOOKAHEAD that can
	 * take one (more when they do not add up to the gang yet). */
	size_t max_c = (size_t)n + GANG_LOOKAHEAD;
	struct gang_cand *cand = malloc(max_c * sizeof(*cand));
	size_t nc = 0, *cur = &ps->gcursor[r->group];
	ssize_t one = -1;
	int sum = 0;
	if (cand && !gang_nothing_known(ps, r)) {
		while (*cur < g.n && ps->held[g.ids[*cur]])
			(*cur)++;
		for (size_t k = *cur; k < g.n; k++) {
			size_t ai = g.ids[k];
			if (ps->held[ai] || !usable(&agents[ai]))
				continue;
			int c = members_fit_empty(ps, &agents[ai], &r->req, n, &memo);
			if (c == n) {
				one = (ssize_t)ai;
				break;
			}
			if (single || c == 0)
				continue;
			cand[nc++] = (struct gang_cand){ai, c};
			sum += c;
			if ((sum >= n && nc >= GANG_LOOKAHEAD) || nc == max_c)
				break;
		}
	}
	size_t take = 0;
	if (one >= 0 && cand) {
		cand[0] = (struct gang_cand){(size_t)one, n};
		take = 1;
	} else if (!single && sum >= n) {
		qsort(cand, nc, sizeof(cand[0]), gang_cand_cmp);
		for (int got = 0; got < n; got += cand[take++].cap)
			;
	}
	if (!take) {
		if (cand && ps->n_gmemo < NO_VICTIMS_MAX)
			ps->gmemo[ps->n_gmemo++] = (struct gang_memo){r->group, n, single, r->req};
		snprintf(why, SCHED_REASON_MAX, "waiting for room for all %d containers%s (%d fit now): the nodes%s "
			 "that could hold them are held for cluster sessions ahead of it", n, where, fit_now, gw);
		free(cand);
		return;
	}
	struct sched_index *ix = group_index(ps, r->group);
	char names[160] = "";
	size_t len = 0;
	for (size_t i = 0; i < take; i++) {
		size_t ai = cand[i].agent;
		ps->held[ai] = true;
		if (ix)
			index_hide(ix, ai);
		if (i < 3 && len < sizeof(names))
			len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "", agents[ai].id);
	}
	if (take > 3 && len < sizeof(names))
		snprintf(names + len, sizeof(names) - len, " and %zu more", take - 3);
	ps->gen++;
	free(cand);
	snprintf(why, SCHED_REASON_MAX, "waiting for room for all %d containers%s (%d fit now): holding node%s %s "
		 "for them", n, where, fit_now, take > 1 ? "s" : "", names);
}

/* ---------- preemption ---------- */

static int pre_init(struct pass *ps)
{
	struct sched_world *w = ps->w;
	size_t na = w->n_agents, nr = w->n_running;
	if (fs_world_init(&ps->f, w) < 0)
		return -1;
	ps->pre_ready = true;
	ps->rstart = calloc(na + 1, sizeof(size_t));
	ps->rids = calloc(nr ? nr : 1, sizeof(size_t));
	ps->chosen = calloc(nr ? nr : 1, sizeof(bool));
	ps->leaving = calloc(w->n_projects ? w->n_projects : 1, sizeof(struct res));
	ps->over = calloc(w->n_projects ? w->n_projects : 1, sizeof(bool));
	ps->ending_fgpu = calloc(na ? na : 1, sizeof(int64_t));
	ps->ending_agents = calloc(na ? na : 1, sizeof(size_t));
	if (!ps->rstart || !ps->rids || !ps->chosen || !ps->leaving || !ps->over || !ps->ending_fgpu ||
	    !ps->ending_agents)
		return -1;
	for (size_t i = 0; i < 5; i++)
		if (!(ps->buf[i] = malloc((nr + 1) * sizeof(size_t))))
			return -1;
	/* The reclaim rule's targets are shares among the projects that hold
	 * or ask for something now: an idle project's share is lent to the
	 * others (with a personal project per user, most are idle, and
	 * counting them would make every busy project look over its share). */
	bool *active = ps->over;   /* free until other_over first fills it */
	for (size_t q = 0; q < w->n_projects; q++) {
		const struct res *u = &w->projects[q].used;
		active[q] = u->cpu_m > 0 || u->mem > 0 || u->fgpu_m > 0;
	}
	for (size_t i = 0; i < ps->n_reqs; i++)
		if (ps->reqs[i].project < w->n_projects)
			active[ps->reqs[i].project] = true;
	for (size_t q = 0; q < w->n_projects; q++)
		if (active[q] && w->projects[q].weight > 0)
			ps->active_wsum += w->projects[q].weight;
	ps->min_victim_priority = INT32_MAX;
	for (size_t k = 0; k < nr; k++) {
		const struct sched_running *rn = &w->running[k];
		if (rn->agent >= na)
			continue;
		ps->rstart[rn->agent + 1]++;
		ps->n_ending += rn->ending;
		if (rn->ending)
			ps->ending_fgpu[rn->agent] += rn->req.fgpu_m;
		if (rn->preemptible && !rn->ending && rn->runtime_ms >= ps->p->preempt_min_runtime_ms &&
		    rn->priority < ps->min_victim_priority)
			ps->min_victim_priority = rn->priority;
	}
	for (size_t i = 0; i < na; i++)
		ps->rstart[i + 1] += ps->rstart[i];
	size_t *fill = calloc(na ? na : 1, sizeof(size_t));
	if (!fill)
		return -1;
	for (size_t k = 0; k < nr; k++) {
		size_t a = w->running[k].agent;
		if (a < na)
			ps->rids[ps->rstart[a] + fill[a]++] = k;
	}
	free(fill);
	for (size_t i = 0; ps->n_ending && i < na; i++) {
		for (size_t k = ps->rstart[i]; k < ps->rstart[i + 1]; k++) {
			if (w->running[ps->rids[k]].ending) {
				ps->ending_agents[ps->n_ending_agents++] = i;
				break;
			}
		}
	}
	return 0;
}

/* A project's current dominant share with extra added (may be negative). */
static double share_with(const struct pass *ps, size_t p, const struct res *extra)
{
	struct res u = ps->w->projects[p].used;
	res_sub(&u, &ps->leaving[p]);
	if (extra)
		res_add(&u, extra);
	return dom_res(&u, &ps->f.total);
}

/* A project's fair-share target for the reclaim rule: its weight over
 * the weights of the projects holding or asking for something. */
static double reclaim_target(const struct pass *ps, size_t p)
{
	double wt = ps->w->projects[p].weight;
	return ps->active_wsum > 0 && wt > 0 ? wt / ps->active_wsum : 0;
}

/* Whether some project other than p is at or over its target: without
 * one the reclaim rule has no victim. Recomputed only when an agent has
 * changed since (placements and holds change what projects hold), so a
 * full cluster's long queue pays for it once. */
static bool other_over(struct pass *ps, size_t p)
{
	const struct sched_world *w = ps->w;
	if (ps->over_gen != ps->gen) {
		ps->n_over = 0;
		for (size_t q = 0; q < w->n_projects; q++) {
			ps->over[q] = share_with(ps, q, NULL) >= reclaim_target(ps, q);
			ps->n_over += ps->over[q];
		}
		ps->over_gen = ps->gen;
	}
	return ps->n_over > (p < w->n_projects && ps->over[p] ? 1u : 0u);
}

enum why_rule { RULE_NONE, RULE_ENDING, RULE_PRIORITY, RULE_RECLAIM };

/* Whether running session k may make room for request r, and by which
 * rule. under: r's project stays under its target with r placed. */
static enum why_rule victim_rule(const struct pass *ps, const struct sched_request *r, bool under, size_t k)
{
	const struct sched_running *rn = &ps->w->running[k];
	if (ps->chosen[k])
		return RULE_NONE;
	if (rn->ending)
		return RULE_ENDING;
	if (!rn->preemptible || rn->runtime_ms < ps->p->preempt_min_runtime_ms)
		return RULE_NONE;
	if (rn->priority < r->priority)
		return RULE_PRIORITY;
	/* Fair share reclaims from projects over their share, but never a
	 * session of a higher priority than the one it makes room for. */
	if (under && rn->priority <= r->priority && rn->project < ps->w->n_projects && rn->project != r->project) {
		struct res minus = {-rn->req.cpu_m, -rn->req.mem, -rn->req.fgpu_m};
		if (share_with(ps, rn->project, &minus) >= reclaim_target(ps, rn->project))
			return RULE_RECLAIM;
	}
	return RULE_NONE;
}

/* What a set of victims costs: fewer new victims first, then the lowest
 * highest priority among them, then the least run time lost, then the
 * smallest. Sessions already ending cost nothing. */
struct vcost {
	size_t n;
	int max_prio;
	int64_t runtime;
	int64_t fgpu, cpu;
};

static struct vcost set_cost(const struct sched_world *w, const size_t *set, size_t n)
{
	struct vcost c = {0, INT32_MIN, 0, 0, 0};
	for (size_t i = 0; i < n; i++) {
		const struct sched_running *rn = &w->running[set[i]];
		if (rn->ending)
			continue;
		c.n++;
		if (rn->priority > c.max_prio)
			c.max_prio = rn->priority;
		c.runtime += rn->runtime_ms;
		c.fgpu += rn->req.fgpu_m;
		c.cpu += rn->req.cpu_m;
	}
	return c;
}

static int cost_cmp(const struct vcost *a, const struct vcost *b)
{
	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	if (a->max_prio != b->max_prio)
		return a->max_prio < b->max_prio ? -1 : 1;
	if (a->runtime != b->runtime)
		return a->runtime < b->runtime ? -1 : 1;
	if (a->fgpu != b->fgpu)
		return a->fgpu < b->fgpu ? -1 : 1;
	if (a->cpu != b->cpu)
		return a->cpu < b->cpu ? -1 : 1;
	return 0;
}

/* Whether r fits on agent a once the sessions of set have ended: their
 * CPU and memory back, their shares back on their own devices, then the
 * exact device fit. shares (may be NULL) gets where r would go. */
static bool fits_without(const struct pass *ps, const struct sched_agent *a, const struct res *req,
			 const size_t *set, size_t n, struct sched_device *devs, struct sched_gpu_share *shares,
			 size_t *n_shares)
{
	struct res free_ = a->free;
	size_t nd = agent_devs(a);
	for (size_t d = 0; d < nd; d++)
		devs[d] = a->devs[d];
	for (size_t i = 0; i < n; i++) {
		const struct sched_running *rn = &ps->w->running[set[i]];
		res_add(&free_, &rn->req);
		for (size_t s = 0; s < rn->n_shares && s < SCHED_MAX_DEVICES; s++)
			if (rn->shares[s].device < nd)
				devs[rn->shares[s].device].free_m += rn->shares[s].fgpu_m;
	}
	if (req->cpu_m > free_.cpu_m || req->mem > free_.mem || req->fgpu_m > free_.fgpu_m)
		return false;
	return sched_gpu_fit(devs, nd, req->fgpu_m, ps->per_dev, true, shares, n_shares);
}

/* Candidates in the given order: adds until r fits, then drops those
 * not needed, the most costly first. Returns the set's size, 0 when even
 * all of them do not make room. */
static size_t greedy_set(const struct pass *ps, const struct sched_agent *a, const struct res *req,
			 const size_t *cand, size_t nc, size_t *set)
{
	struct sched_device devs[SCHED_MAX_DEVICES];
	size_t n = 0, nd = agent_devs(a);
	bool ok = false;
	/* Adding: what the set frees is kept as it grows, so the adding is
	 * linear in the candidates (a node may run many small sessions). */
	struct res free_ = a->free;
	for (size_t d = 0; d < nd; d++)
		devs[d] = a->devs[d];
	for (size_t i = 0; i < nc && !ok; i++) {
		const struct sched_running *rn = &ps->w->running[cand[i]];
		set[n++] = cand[i];
		res_add(&free_, &rn->req);
		for (size_t s = 0; s < rn->n_shares && s < SCHED_MAX_DEVICES; s++)
			if (rn->shares[s].device < nd)
				devs[rn->shares[s].device].free_m += rn->shares[s].fgpu_m;
		ok = req->cpu_m <= free_.cpu_m && req->mem <= free_.mem && req->fgpu_m <= free_.fgpu_m &&
		     sched_gpu_fit(devs, nd, req->fgpu_m, ps->per_dev, true, NULL, NULL);
	}
	if (!ok)
		return 0;
	/* Drop what is not needed, the most costly first (the candidates
	 * come cheapest first in every order but the size one, which is
	 * close enough: pruning there only keeps the set small). */
	for (size_t i = n; i-- > 0 && n > 1;) {
		size_t keep = set[i];
		set[i] = set[n - 1];
		n--;
		if (fits_without(ps, a, req, set, n, devs, NULL, NULL))
			continue;
		set[n++] = set[i];
		set[i] = keep;
	}
	return n;
}

/* Candidate orders. The sort takes its context as an argument (no
 * globals: the planner stays reentrant); a node's candidates are few, so
 * an insertion sort does. */
struct vorder {
	const struct sched_world *w;
	size_t dev;   /* SCHED_MAX_DEVICES: by the whole session */
	bool larger;  /* largest first, else cheapest first */
};

static int cheaper_first(const struct sched_running *a, const struct sched_running *b)
{
	if (a->ending != b->ending)
		return a->ending ? -1 : 1;
	if (a->priority != b->priority)
		return a->priority < b->priority ? -1 : 1;
	if (a->runtime_ms != b->runtime_ms)
		return a->runtime_ms < b->runtime_ms ? -1 : 1;
	if (a->req.fgpu_m != b->req.fgpu_m)
		return a->req.fgpu_m < b->req.fgpu_m ? -1 : 1;
	return a->req.cpu_m < b->req.cpu_m ? -1 : a->req.cpu_m > b->req.cpu_m;
}

static int64_t share_on(const struct sched_running *rn, size_t dev)
{
	int64_t t = 0;
	for (size_t s = 0; s < rn->n_shares && s < SCHED_MAX_DEVICES; s++)
		if (rn->shares[s].device == dev)
			t += rn->shares[s].fgpu_m;
	return t;
}

static int vorder_cmp(const struct vorder *o, size_t x, size_t y)
{
	const struct sched_running *a = &o->w->running[x], *b = &o->w->running[y];
	if (o->larger) {
		/* On the device when one is named, else in fGPU then CPU. */
		int64_t sa = o->dev < SCHED_MAX_DEVICES ? share_on(a, o->dev) : a->req.fgpu_m;
		int64_t sb = o->dev < SCHED_MAX_DEVICES ? share_on(b, o->dev) : b->req.fgpu_m;
		if (sa != sb)
			return sa > sb ? -1 : 1;
		if (o->dev >= SCHED_MAX_DEVICES && a->req.cpu_m != b->req.cpu_m)
			return a->req.cpu_m > b->req.cpu_m ? -1 : 1;
	}
	return cheaper_first(a, b);
}

static void vorder_sort(const struct vorder *o, size_t *v, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		size_t x = v[i], j = i;
		for (; j > 0 && vorder_cmp(o, x, v[j - 1]) < 0; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

/* The cheapest first, then by node and index: the order in which the
 * search over nodes would prefer one victim to another. */
static int by_cost_cmp(const void *x, const void *y, void *ctx)
{
	const struct sched_world *w = ctx;
	size_t i = *(const size_t *)x, j = *(const size_t *)y;
	const struct sched_running *a = &w->running[i], *b = &w->running[j];
	int c = cheaper_first(a, b);
	if (c)
		return c;
	if (a->agent != b->agent)
		return a->agent < b->agent ? -1 : 1;
	return i < j ? -1 : i > j;
}

/* Every session that could be a victim by itself (preemptible, run long
 * enough, not ending), cheapest first. */
static int by_cost_build(struct pass *ps)
{
	const struct sched_world *w = ps->w;
	ps->by_cost_ready = true;
	ps->by_cost = malloc((w->n_running ? w->n_running : 1) * sizeof(size_t));
	if (!ps->by_cost)
		return -1;
	for (size_t k = 0; k < w->n_running; k++) {
		const struct sched_running *rn = &w->running[k];
		if (rn->agent >= w->n_agents || !rn->preemptible || rn->ending ||
		    rn->runtime_ms < ps->p->preempt_min_runtime_ms)
			continue;
		ps->by_cost[ps->n_by_cost++] = k;
		int64_t room = rn->req.fgpu_m + w->agents[rn->agent].free.fgpu_m + ps->ending_fgpu[rn->agent];
		if (room > ps->single_room)
			ps->single_room = room;
	}
	qsort_r(ps->by_cost, ps->n_by_cost, sizeof(size_t), by_cost_cmp, (void *)w);
	return 0;
}

/* The unchosen sessions already ending on agent ai, into out. */
static size_t agent_ending(const struct pass *ps, size_t ai, size_t *out)
{
	size_t n = 0;
	for (size_t k = ps->rstart[ai]; k < ps->rstart[ai + 1]; k++) {
		size_t j = ps->rids[k];
		if (ps->w->running[j].ending && !ps->chosen[j])
			out[n++] = j;
	}
	return n;
}

/* The answer when it needs at most one new victim, found without the
 * search over every node: first room that sessions already ending make
 * by themselves (no victim at all), then the cheapest single victim with
 * what already ends on its node (fewest comes first, and among single
 * victims the cheapest is the first in by_cost that makes room). Fills
 * set and returns its size with the agent in *agent, or 0. */
static size_t few_victims(struct pass *ps, const struct sched_request *r, bool under, size_t *set, size_t *agent)
{
	const struct sched_world *w = ps->w;
	size_t *tmp = ps->buf[4];
	struct sched_device devs[SCHED_MAX_DEVICES];
	for (size_t i = 0; i < ps->n_ending_agents; i++) {
		size_t ai = ps->ending_agents[i];
		const struct sched_agent *a = &w->agents[ai];
		if (a->group != r->group || !usable(a) || ps->held[ai])
			continue;
		size_t ne = agent_ending(ps, ai, tmp);
		if (!ne || !fits_without(ps, a, &r->req, tmp, ne, devs, NULL, NULL))
			continue;
		*agent = ai;
		return greedy_set(ps, a, &r->req, tmp, ne, set);
	}
	if (!ps->by_cost_ready && by_cost_build(ps) < 0)
		return 0;
	if (r->req.fgpu_m > ps->single_room)
		return 0;   /* no one session frees that much, even with its node's room */
	for (size_t i = 0; i < ps->n_by_cost; i++) {
		size_t k = ps->by_cost[i];
		const struct sched_running *rn = &w->running[k];
		const struct sched_agent *a = &w->agents[rn->agent];
		if (ps->chosen[k] || a->group != r->group || !usable(a) || ps->held[rn->agent] ||
		    rn->req.fgpu_m + a->free.fgpu_m + ps->ending_fgpu[rn->agent] < r->req.fgpu_m)
			continue;
		if (victim_rule(ps, r, under, k) == RULE_NONE)
			continue;
		size_t n = ps->n_ending ? agent_ending(ps, rn->agent, tmp) : 0;
		tmp[n++] = k;   /* last: the prune below tries it first, and keeps it */
		if (!fits_without(ps, a, &r->req, tmp, n, devs, NULL, NULL))
			continue;
		*agent = rn->agent;
		return greedy_set(ps, a, &r->req, tmp, n, set);
	}
	return 0;
}

/* The fewest and cheapest victims on agent ai for r; n (0: none) into set. */
static size_t agent_victims(struct pass *ps, size_t ai, const struct sched_request *r, bool under, size_t *set,
			    size_t *cand, size_t *order, size_t *trial)
{
	const struct sched_world *w = ps->w;
	const struct sched_agent *a = &w->agents[ai];
	size_t nc = 0;
	for (size_t k = ps->rstart[ai]; k < ps->rstart[ai + 1]; k++)
		if (victim_rule(ps, r, under, ps->rids[k]) != RULE_NONE)
			cand[nc++] = ps->rids[k];
	if (!nc)
		return 0;
	struct sched_device devs[SCHED_MAX_DEVICES];
	if (!fits_without(ps, a, &r->req, cand, nc, devs, NULL, NULL))
		return 0;
	/* One victim that suffices, the cheapest: nothing beats it (sessions
	 * already ending aside, which cost nothing and are left to the
	 * orders below). */
	struct vorder cheap = {w, SCHED_MAX_DEVICES, false};
	memcpy(order, cand, nc * sizeof(size_t));
	vorder_sort(&cheap, order, nc);
	for (size_t i = 0; !ps->n_ending && i < nc; i++) {
		if (fits_without(ps, a, &r->req, &order[i], 1, devs, NULL, NULL)) {
			set[0] = order[i];
			return 1;
		}
	}
	/* The exact fewest-and-cheapest set is a knapsack; a few greedy
	 * orders, each pruned, find it in the cases that matter (the largest
	 * on one device, the cheapest) at a cost linear in the node's
	 * sessions. */
	size_t best_n = 0;
	struct vcost best_c = {0};
	size_t orders = 2 + (r->req.fgpu_m > 0 && r->req.fgpu_m <= ps->per_dev ? agent_devs(a) : 0);
	for (size_t o = 0; o < orders; o++) {
		struct vorder vo = {w, SCHED_MAX_DEVICES, o > 0};
		if (o >= 2) {
			vo.dev = o - 2;
			if (a->devs[vo.dev].free_m >= r->req.fgpu_m)
				continue;   /* the device already has room: the host lacks it */
		}
		memcpy(order, cand, nc * sizeof(size_t));
		vorder_sort(&vo, order, nc);
		size_t n = greedy_set(ps, a, &r->req, order, nc, trial);
		if (!n)
			continue;
		struct vcost c = set_cost(w, trial, n);
		if (!best_n || cost_cmp(&c, &best_c) < 0) {
			best_n = n;
			best_c = c;
			memcpy(set, trial, n * sizeof(size_t));
		}
	}
	return best_n;
}

static bool no_victims_known(const struct pass *ps, const struct sched_request *r, bool under)
{
	for (size_t i = 0; i < ps->n_nov; i++) {
		const struct no_victims *nv = &ps->nov[i];
		if (under && (!nv->under || nv->project != r->project))
			continue;
		if (nv->group == r->group && r->priority <= nv->priority && r->req.cpu_m >= nv->req.cpu_m &&
		    r->req.mem >= nv->req.mem && r->req.fgpu_m >= nv->req.fgpu_m)
			return true;
	}
	return false;
}

static void no_victims_note(struct pass *ps, const struct sched_request *r, bool under)
{
	struct no_victims nv = {r->group, r->project, r->priority, under, r->req};
	ps->nov[ps->n_nov < NO_VICTIMS_MAX ? ps->n_nov++ : (size_t)(r->seq % NO_VICTIMS_MAX)] = nv;
}

static void pct(double x, char *buf, size_t n)
{
	snprintf(buf, n, "%.0f%%", x * 100);
}

/* For a request that fits nowhere in its group: chooses victims on one
 * agent, reports them, holds the room they free for the request, and
 * says so in why. False when there are none to choose. */
static bool preempt_for(struct pass *ps, size_t ri, char *why)
{
	const struct sched_request *r = &ps->reqs[ri];
	struct sched_world *w = ps->w;
	struct sched_result *res = ps->res;
	if (!ps->pre_ready && pre_init(ps) < 0)
		return false;
	bool has_project = r->project < w->n_projects;
	bool under = has_project && share_with(ps, r->project, &r->req) <= reclaim_target(ps, r->project) &&
		     other_over(ps, r->project);
	/* Nothing to search when no session could be a victim: none of
	 * lower priority, the reclaim rule out, none already ending. */
	if (!under && r->priority <= ps->min_victim_priority && !ps->n_ending)
		return false;
	if (no_victims_known(ps, r, under))
		return false;
	struct group_agents g = group_of(ps, r->group);
	size_t *cand = ps->buf[0], *order = ps->buf[1], *trial = ps->buf[2], *set = ps->buf[3];
	size_t *best_set;
	ssize_t best_a = -1;
	size_t best_n = 0, one_agent = 0;
	struct vcost best_c = {0};
	best_n = few_victims(ps, r, under, set, &one_agent);
	bool search = !best_n;
	if (best_n) {
		best_a = (ssize_t)one_agent;
		best_set = set;
	} else {
		best_set = ps->buf[4];
	}
	for (size_t k = 0; search && k < g.n; k++) {
		size_t ai = g.ids[k];
		if (!usable(&w->agents[ai]) || ps->held[ai] || ps->rstart[ai] == ps->rstart[ai + 1])
			continue;
		size_t n = agent_victims(ps, ai, r, under, set, cand, order, trial);
		if (!n)
			continue;
		struct vcost c = set_cost(w, set, n);
		if (best_a < 0 || cost_cmp(&c, &best_c) < 0) {
			best_a = (ssize_t)ai;
			best_n = n;
			best_c = c;
			memcpy(best_set, set, n * sizeof(size_t));
		}
	}
	if (best_a < 0) {
		no_victims_note(ps, r, under);
		return false;
	}
	struct sched_agent *a = &w->agents[best_a];
	/* Hold the room: the request takes its place as if the victims were
	 * gone, but what is free now stays no freer than now (the victims
	 * hold their room until they end), so no other request is placed in
	 * it, nor in the victims' room beyond what the request takes. */
	struct sched_device devs[SCHED_MAX_DEVICES];
	struct sched_gpu_share shares[SCHED_MAX_DEVICES];
	size_t n_shares = 0;
	fits_without(ps, a, &r->req, best_set, best_n, devs, shares, &n_shares);
	struct res after = a->free;
	for (size_t i = 0; i < best_n; i++)
		res_add(&after, &w->running[best_set[i]].req);
	res_sub(&after, &r->req);
	if (after.cpu_m < a->free.cpu_m) a->free.cpu_m = after.cpu_m;
	if (after.mem < a->free.mem) a->free.mem = after.mem;
	if (after.fgpu_m < a->free.fgpu_m) a->free.fgpu_m = after.fgpu_m;
	for (size_t s = 0; s < n_shares; s++)
		devs[shares[s].device].free_m -= shares[s].fgpu_m;
	for (size_t d = 0; d < agent_devs(a); d++)
		if (devs[d].free_m < a->devs[d].free_m)
			a->devs[d].free_m = devs[d].free_m;
	if (ps->ix[r->group])
		index_update(ps->ix[r->group], (size_t)best_a);
	ps->gen++;
	account(w, r, +1);
	/* Each victim's rule as the search judged it, before any of them
	 * counts as leaving. */
	enum why_rule *rules = calloc(best_n, sizeof(*rules));
	for (size_t i = 0; rules && i < best_n; i++)
		rules[i] = victim_rule(ps, r, under, best_set[i]);
	size_t n_new = 0;
	for (size_t i = 0; i < best_n; i++) {
		size_t k = best_set[i];
		const struct sched_running *rn = &w->running[k];
		enum why_rule rule = rules ? rules[i] : victim_rule(ps, r, under, k);
		ps->chosen[k] = true;
		if (rule == RULE_ENDING)
			continue;
		n_new++;
		struct sched_eviction *ev = &res->evictions[res->n_evictions++];
		ev->running = k;
		ev->request = ri;
		if (rule == RULE_PRIORITY) {
			snprintf(ev->why, sizeof(ev->why), "preempted by session %s (priority %d over %d)", r->name,
				 r->priority, rn->priority);
		} else {
			const struct sched_project *rp = &w->projects[r->project], *vp = &w->projects[rn->project];
			char a1[16], a2[16], b1[16], b2[16];
			/* The figures before this request and this victim: the
			 * state the rule was judged against. */
			struct res minus = {-r->req.cpu_m, -r->req.mem, -r->req.fgpu_m};
			pct(share_with(ps, r->project, &minus), a1, sizeof(a1));
			pct(reclaim_target(ps, r->project), a2, sizeof(a2));
			pct(share_with(ps, rn->project, NULL), b1, sizeof(b1));
			pct(reclaim_target(ps, rn->project), b2, sizeof(b2));
			snprintf(ev->why, sizeof(ev->why),
				 "preempted by session %s: project %s is under its fair share (%s of %s) and project %s "
				 "over it (%s of %s)", r->name, rp->name ? rp->name : rp->id, a1, a2,
				 vp->name ? vp->name : vp->id, b1, b2);
		}
		if (rn->project < w->n_projects)
			res_add(&ps->leaving[rn->project], &rn->req);
	}
	snprintf(why, SCHED_REASON_MAX, "waiting for %zu %s%s to end on node %s", best_n,
		 n_new == best_n ? "preempted session" : "session", best_n == 1 ? "" : "s", a->id);
	free(rules);
	return true;
}

/* ---------- the plan ---------- */

static int by_priority(const void *x, const void *y)
{
	const struct sched_request *const *a = x, *const *b = y;
	if ((*a)->priority != (*b)->priority)
		return (*a)->priority > (*b)->priority ? -1 : 1;
	return *a < *b ? -1 : *a > *b;   /* stable: creation order within a level */
}

size_t sched_plan(const struct sched_params *p, struct sched_world *w,
		  const struct sched_request *reqs, size_t n_reqs,
		  struct sched_placement *out, struct sched_result *res)
{
	struct sched_agent *agents = w->agents;
	char (*reasons)[SCHED_REASON_MAX] = res ? res->reasons : NULL;
	if (res) {
		res->blocked_head = -1;
		res->n_evictions = 0;
		if (res->order)
			memset(res->order, 0, n_reqs * sizeof(*res->order));
	}
	size_t n_tried = 0;
	bool can_preempt = p->preempt && res && res->evictions && w->n_running > 0;
	size_t placed = 0;
	struct pass ps;
	memset(&ps, 0, sizeof(ps));
	bool *tried = calloc(n_reqs ? n_reqs : 1, sizeof(bool));
	/* Priority levels: requests by priority (higher first), creation
	 * order within a level; each level is handed to the queue policy on
	 * its own, so a policy orders only among equals. */
	const struct sched_request **byp = calloc(n_reqs ? n_reqs : 1, sizeof(*byp));
	struct sched_request *lv = NULL;
	size_t *lv_orig = NULL;
	bool *lv_tried = NULL;
	ssize_t *group_blocker = NULL;   /* per group: the head holding it up, or -1 */
	if (!tried || !byp || pass_init(&ps, p, w, reqs, n_reqs) < 0)
		goto out;
	ps.res = res;
	bool levels = false;
	for (size_t i = 0; i < n_reqs; i++) {
		byp[i] = &reqs[i];
		levels |= reqs[i].priority != reqs[0].priority;
	}
	if (levels) {
		qsort(byp, n_reqs, sizeof(*byp), by_priority);
		lv = malloc(n_reqs * sizeof(*lv));
		lv_orig = malloc(n_reqs * sizeof(*lv_orig));
		lv_tried = calloc(n_reqs, sizeof(bool));
		if (!lv || !lv_orig || !lv_tried)
			goto out;
		for (size_t i = 0; i < n_reqs; i++) {
			lv[i] = *byp[i];
			lv_orig[i] = (size_t)(byp[i] - reqs);
		}
	}
	/* Head-of-line blocking is per resource group: a head that waits
	 * for room in its group holds up the requests of that group behind
	 * it (of every lower priority too), not those of other groups, whose
	 * nodes it could not use anyway. blocker is the first such head. */
	ssize_t blocker = -1;
	size_t n_slots = w->n_groups + 1;
	group_blocker = malloc(n_slots * sizeof(*group_blocker));
	if (!group_blocker)
		goto out;
	for (size_t g = 0; g < n_slots; g++)
		group_blocker[g] = -1;
	for (size_t lo = 0; lo < n_reqs;) {
		size_t hi = n_reqs;
		const struct sched_request *lreqs = reqs;
		bool *ltried = tried;
		if (levels) {
			hi = lo + 1;
			while (hi < n_reqs && lv[hi].priority == lv[lo].priority)
				hi++;
			lreqs = &lv[lo];
			ltried = &lv_tried[lo];
		}
		void *qs = p->queue->start ? p->queue->start(lreqs, hi - lo, w) : NULL;
		for (;;) {
			ssize_t j = p->queue->next(lreqs, hi - lo, ltried, w, qs);
			if (j < 0)
				break;
			ltried[j] = true;
			size_t i = levels ? lv_orig[lo + (size_t)j] : (size_t)j;
			tried[i] = true;
			if (res && res->order)
				res->order[i] = ++n_tried;
			const struct sched_request *r = &reqs[i];
			size_t slot = r->group < w->n_groups ? r->group : w->n_groups;
			if (group_blocker[slot] >= 0) {
				if (reasons)
					snprintf(reasons[i], SCHED_REASON_MAX, "queued behind %s (%s)",
						 reqs[group_blocker[slot]].name,
						 p->queue == &sched_lifo ? "last in, first out" : "first in, first out");
				continue;
			}
			struct sched_user *u = &w->users[r->user];
			struct sched_project *proj = r->project < w->n_projects ? &w->projects[r->project] : NULL;
			char *why = reasons ? reasons[i] : NULL;
			char scratch[SCHED_REASON_MAX], gw[96], gn[32];
			if (!why)
				why = scratch;
			why[0] = '\0';
			/* Waits without holding up others: a group the project
			 * may not use, the user's policy, the project's quota. */
			if (proj && proj->groups && (r->group >= 64 || !(proj->groups & (1ULL << r->group)))) {
				snprintf(why, SCHED_REASON_MAX, "waiting: project %s may not use resource group %s",
					 proj->name ? proj->name : proj->id, group_name(w, r->group, gn, sizeof(gn)));
				continue;
			}
			/* A gang is one session holding every container's room. */
			struct res need = request_need(r);
			if (!policy_allows(u, &need, why, SCHED_REASON_MAX))
				continue;
			if (proj && !quota_allows(proj, &need, why, SCHED_REASON_MAX))
				continue;
			if (r->gang > 1) {
				/* All or none; one that does not fit holds the
				 * agents it needs instead of blocking its group
				 * (sessions that fit elsewhere pass it), and
				 * never preempts. */
				int fit_now = 0;
				int k = gang_place(&ps, i, &out[placed], &fit_now);
				if (k > 0)
					placed += (size_t)k;
				else
					gang_hold(&ps, r, fit_now, why);
				continue;
			}
			struct sched_placement *pl = &out[placed];
			struct sched_index *ix = group_index(&ps, r->group);
			ssize_t a = ix ? p->selector->select(ix, &r->req, pl->shares, &pl->n_shares) : -1;
			if (a >= 0) {
				pl->request = i;
				pl->member = 0;
				pl->agent = (size_t)a;
				struct sched_agent *ag = &agents[a];
				res_sub(&ag->free, &r->req);
				for (size_t s = 0; s < pl->n_shares; s++)
					ag->devs[pl->shares[s].device].free_m -= pl->shares[s].fgpu_m;
				account(w, r, +1);
				index_update(ix, (size_t)a);
				ps.gen++;
				placed++;
				continue;
			}
			/* It would wait: only now are victims looked for. */
			if (can_preempt && preempt_for(&ps, i, why))
				continue;
			struct group_agents g = group_of(&ps, r->group);
			group_words(&ps, r->group, gw, sizeof(gw));
			if (reasons)
				memo_words(&ps, r->group, gw, &r->req, why);
			if (!p->queue->blocking)
				continue;
			/* No alive node of its group could hold it even empty: it
			 * waits for a LOST node to come back (or a larger node to
			 * register) without holding the queue meanwhile, since the
			 * alive nodes (of any group) can serve the sessions behind
			 * it. */
			struct group_agents all = {NULL, w->n_agents};
			if (any_alive(agents, all) && could_ever_hold(agents, g, &r->req, p->per_device_m, true) < 0) {
				ssize_t lost = could_ever_hold(agents, g, &r->req, p->per_device_m, false);
				if (lost >= 0 && agents[lost].alive && agents[lost].drained)
					snprintf(why, SCHED_REASON_MAX,
						 "waiting for node %s: it is drained (an admin stopped new sessions there) and "
						 "no other node%s is large enough", agents[lost].id, gw);
				else if (lost >= 0)
					snprintf(why, SCHED_REASON_MAX,
						 "waiting for node %s to return: no alive node%s is large enough",
						 agents[lost].id, gw);
				else
					snprintf(why, SCHED_REASON_MAX,
						 "waiting for a larger node: no node%s could hold it even when empty", gw);
				continue;
			}
			if (p->fifo_skip_after > 0 && r->failed_passes >= p->fifo_skip_after)
				continue;   /* waited long enough at the head: let others pass */
			group_blocker[slot] = (ssize_t)i;
			if (blocker < 0)
				blocker = (ssize_t)i;
		}
		if (p->queue->stop)
			p->queue->stop(qs);
		lo = hi;
	}
	if (res)
		res->blocked_head = blocker;
out:
	free(group_blocker);
	pass_free(&ps);
	free(tried);
	free(byp);
	free(lv);
	free(lv_orig);
	free(lv_tried);
	return placed;
}

bool sched_satisfiable(const struct sched_agent *agents, size_t n, const struct res *req,
		       int64_t per_device_m)
{
	struct group_agents all = {NULL, n};
	return could_ever_hold(agents, all, req, per_device_m, false) >= 0;
}

bool sched_gang_satisfiable(const struct sched_agent *agents, size_t n_agents, const struct res *req, int n,
			    bool single_node, int64_t per_device_m)
{
	if (n <= 1)
		return sched_satisfiable(agents, n_agents, req, per_device_m);
	/* members_fit wants a pass only for these two. */
	struct sched_params p = {.selector = &sched_concentrated, .per_device_m = per_device_m};
	struct pass ps = {.p = &p, .per_dev = per_device_m};
	int total = 0;
	for (size_t i = 0; i < n_agents && total < n; i++) {
		int c = members_fit(&ps, &agents[i], req, n, true, NULL);
		total = single_node ? (c == n ? n : 0) : total + c;
	}
	return total >= n;
}
