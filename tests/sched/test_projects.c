/* sched/sched.c with projects: priorities, project quotas and their
 * reasons, resource groups, the fairshare queue policy with its figures
 * (sched_fairshare_projects/_members) and usage decay, and preemption
 * (victims: fewest, cheapest, run long enough, preemptible only, the
 * fair-share reclaim rule, exact device fit, the room held). */
#include "sched/sched.h"
#include "testlib.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define GiB (1LL << 30)

/* A small world: agents with 1 fGPU devices, users, projects, members
 * (member i = user i), running sessions. */
struct fx {
	struct sched_agent ag[8];
	struct sched_device dev[8][SCHED_MAX_DEVICES];
	struct sched_user us[8];
	struct sched_project pj[4];
	struct sched_member mb[8];
	struct sched_running run[16];
	struct sched_request rq[16];
	struct sched_placement out[16];
	char reasons[16][SCHED_REASON_MAX];
	struct sched_eviction ev[16];
	struct sched_world w;
	struct sched_result res;
	struct sched_params p;
	size_t nr;
};

static void fx_init(struct fx *f, size_t n_agents, size_t n_devs, size_t n_users, size_t n_projects)
{
	memset(f, 0, sizeof(*f));
	static const char *const ids[8] = {"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"};
	static const char *const pnames[4] = {"vision", "speech", "robots", "misc"};
	for (size_t i = 0; i < n_agents; i++) {
		struct sched_agent *a = &f->ag[i];
		a->id = ids[i];
		a->alive = true;
		a->capacity = (struct res){16000, 64 * GiB, (int64_t)n_devs * 1000};
		a->free = a->capacity;
		a->devs = f->dev[i];
		a->n_devs = n_devs;
		for (size_t d = 0; d < n_devs; d++)
			f->dev[i][d].free_m = 1000;
	}
	for (size_t u = 0; u < n_users; u++) {
		f->us[u].id = "u";
		f->mb[u] = (struct sched_member){.project = n_projects ? u % n_projects : 0, .user = u, .weight = 1};
	}
	for (size_t p = 0; p < n_projects; p++)
		f->pj[p] = (struct sched_project){.id = pnames[p], .name = pnames[p], .weight = 1};
	f->w = (struct sched_world){.agents = f->ag, .n_agents = n_agents, .users = f->us, .n_users = n_users,
				    .projects = f->pj, .n_projects = n_projects, .members = f->mb,
				    .n_members = n_projects ? n_users : 0, .running = f->run};
	f->res = (struct sched_result){.reasons = f->reasons, .evictions = f->ev};
	f->p = (struct sched_params){.selector = &sched_concentrated, .queue = &sched_fifo, .per_device_m = 1000};
}

/* A request of user u (project: the user's member's), fgpu milli. */
static struct sched_request *fx_req(struct fx *f, const char *name, size_t u, int64_t fgpu_m, int prio)
{
	struct sched_request *r = &f->rq[f->nr];
	*r = (struct sched_request){.session_id = name, .name = name, .req = {1000, 1 * GiB, fgpu_m}, .user = u,
				    .project = f->mb[u].project, .member = u, .priority = prio,
				    .seq = (int64_t)f->nr + 1};
	f->nr++;
	return r;
}

/* A session running on agent a, device d (fgpu_m there), of user u. */
static struct sched_running *fx_run(struct fx *f, const char *name, size_t a, size_t d, int64_t fgpu_m, size_t u,
				    int prio, int64_t runtime_ms)
{
	struct sched_running *rn = &f->run[f->w.n_running++];
	*rn = (struct sched_running){.session_id = name, .name = name, .agent = a, .req = {1000, 1 * GiB, fgpu_m},
				     .n_shares = fgpu_m ? 1 : 0, .user = u, .project = f->mb[u].project, .member = u,
				     .priority = prio, .preemptible = true, .runtime_ms = runtime_ms};
	rn->shares[0] = (struct sched_gpu_share){d, fgpu_m};
	struct sched_agent *ag = &f->ag[a];
	res_sub(&ag->free, &rn->req);
	ag->devs[d].free_m -= fgpu_m;
	res_add(&f->us[u].used, &rn->req);
	f->us[u].sessions++;
	if (f->w.n_projects) {
		res_add(&f->pj[rn->project].used, &rn->req);
		f->pj[rn->project].sessions++;
		res_add(&f->mb[u].used, &rn->req);
	}
	return rn;
}

static size_t fx_plan(struct fx *f)
{
	memset(f->reasons, 0, sizeof(f->reasons));
	return sched_plan(&f->p, &f->w, f->rq, f->nr, f->out, &f->res);
}

static bool placed(const struct fx *f, size_t n, size_t request)
{
	for (size_t i = 0; i < n; i++)
		if (f->out[i].request == request)
			return true;
	return false;
}

/* ---------- priorities ---------- */

TEST(priority_goes_first)
{
	struct fx f;
	fx_init(&f, 1, 1, 2, 0);
	fx_req(&f, "old", 0, 1000, 0);
	fx_req(&f, "urgent", 1, 1000, 10);
	CHECK_INT(fx_plan(&f), 1);
	CHECK_INT(f.out[0].request, 1);
	/* The older one waits, for the GPU (not behind anything). */
	CHECK_CONTAINS(f.reasons[0], "waiting for a GPU");
	/* Within a level the policy's order holds: lifo takes the newest of
	 * the higher level first. */
	fx_init(&f, 1, 1, 1, 0);
	fx_req(&f, "a", 0, 1000, 5);
	fx_req(&f, "b", 0, 1000, 5);
	fx_req(&f, "c", 0, 1000, 0);
	f.p.queue = &sched_lifo;
	CHECK_INT(fx_plan(&f), 1);
	CHECK_INT(f.out[0].request, 1);
	CHECK_INT(f.res.blocked_head, 0);
	CHECK_STR(f.reasons[2], "queued behind a (last in, first out)");
}

TEST(priority_head_blocks_lower_levels)
{
	struct fx f;
	fx_init(&f, 1, 2, 1, 0);
	fx_req(&f, "small", 0, 1000, 0);
	fx_req(&f, "big", 0, 2000, 1);
	f.ag[0].devs[0].free_m = 500;   /* something else holds half a device */
	f.ag[0].free.fgpu_m = 1500;
	CHECK_INT(fx_plan(&f), 0);
	CHECK_INT(f.res.blocked_head, 1);
	CHECK_STR(f.reasons[0], "queued behind big (first in, first out)");
}

/* ---------- project quotas ---------- */

TEST(quota_reasons_name_the_project)
{
	struct fx f;
	fx_init(&f, 2, 4, 2, 2);      /* user 0 in vision, user 1 in speech */
	f.pj[0].max.fgpu_m = 2000;
	fx_run(&f, "r1", 0, 0, 1000, 0, 0, 0);
	fx_run(&f, "r2", 0, 1, 1000, 0, 0, 0);
	fx_req(&f, "v", 0, 500, 0);
	fx_req(&f, "s", 1, 500, 0);
	CHECK_INT(fx_plan(&f), 1);
	CHECK_INT(f.out[0].request, 1);   /* a quota wait does not block the queue */
	CHECK_STR(f.reasons[0], "waiting for project vision's fGPU quota: 2 of 2 in use");
	CHECK_INT(f.res.blocked_head, -1);

	fx_init(&f, 1, 4, 1, 1);
	f.pj[0].max.cpu_m = 2000;
	fx_run(&f, "r1", 0, 0, 0, 0, 0, 0);
	fx_req(&f, "x", 0, 0, 0)->req.cpu_m = 1500;
	CHECK_INT(fx_plan(&f), 0);
	CHECK_STR(f.reasons[0], "waiting for project vision's CPU quota: 1 of 2 in use");

	fx_init(&f, 1, 4, 1, 1);
	f.pj[0].max.mem = 2 * GiB;
	fx_run(&f, "r1", 0, 0, 0, 0, 0, 0);
	fx_req(&f, "x", 0, 0, 0)->req.mem = 2 * GiB;
	CHECK_INT(fx_plan(&f), 0);
	CHECK_STR(f.reasons[0], "waiting for project vision's memory quota: 1 GiB of 2 GiB in use");
}

TEST(quota_counts_this_pass_placements)
{
	struct fx f;
	fx_init(&f, 1, 4, 2, 1);   /* both users in vision */
	f.pj[0].max_sessions = 1;
	fx_req(&f, "a", 0, 1000, 0);
	fx_req(&f, "b", 1, 1000, 0);
	CHECK_INT(fx_plan(&f), 1);
	CHECK_STR(f.reasons[1], "waiting for project vision's session quota: 1 of 1 running");
	CHECK_INT(f.pj[0].sessions, 1);
	CHECK_INT(f.pj[0].used.fgpu_m, 1000);
	CHECK_INT(f.mb[0].used.fgpu_m, 1000);
}

TEST(user_policy_words_unchanged_beside_quota)
{
	struct fx f;
	fx_init(&f, 1, 4, 1, 1);
	f.us[0].max_sessions = 1;
	f.pj[0].max_sessions = 1;
	fx_run(&f, "r", 0, 0, 0, 0, 0, 0);
	fx_req(&f, "a", 0, 0, 0);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_STR(f.reasons[0], "waiting for the user's policy: at most 1 concurrent sessions (1 running)");
}

/* The words of a wait follow what the pass has placed before it (what
 * a group offers is remembered between waiting requests only until an
 * agent changes). */
TEST(wait_words_follow_placements)
{
	struct fx f;
	fx_init(&f, 1, 2, 1, 0);
	f.ag[0].devs[0].free_m = 800;
	f.ag[0].devs[1].free_m = 600;
	f.ag[0].free.fgpu_m = 1400;
	f.p.queue = &sched_drf;
	fx_req(&f, "r1", 0, 1000, 0);
	fx_req(&f, "r2", 0, 700, 0);
	fx_req(&f, "r3", 0, 1000, 0);
	CHECK_INT(fx_plan(&f), 1);
	CHECK_INT(f.out[0].request, 1);
	CHECK_STR(f.reasons[0], "waiting for a GPU: needs 1 fGPU on one device; the most free on one device of any "
		  "node is 0.8 fGPU");
	CHECK_STR(f.reasons[2], "waiting for a GPU: needs 1 fGPU on one device; the most free on one device of any "
		  "node is 0.6 fGPU");
}

/* ---------- resource groups ---------- */

TEST(groups_place_only_on_their_agents)
{
	static const char *const names[2] = {"default", "a100"};
	struct fx f;
	fx_init(&f, 3, 2, 1, 1);
	f.ag[0].group = 0;
	f.ag[1].group = 1;
	f.ag[2].group = 1;
	f.ag[1].devs[0].free_m = 300;   /* the fullest device that fits is n1's */
	f.w.group_names = names;
	f.w.n_groups = 2;
	fx_req(&f, "g1", 0, 300, 0)->group = 1;
	fx_req(&f, "g0", 0, 1000, 0)->group = 0;
	fx_req(&f, "g0b", 0, 1000, 0)->group = 0;
	fx_req(&f, "g0c", 0, 1000, 0)->group = 0;
	f.p.queue = &sched_drf;
	CHECK_INT(fx_plan(&f), 3);
	CHECK_INT(f.out[0].agent, 1);
	CHECK_INT(f.out[1].agent, 0);
	CHECK_INT(f.out[2].agent, 0);
	/* Group 1 had room (n2 is empty), but the request is of group 0. */
	CHECK_STR(f.reasons[3], "waiting for a GPU: needs 1 fGPU on one device; the most free on one device of any "
		  "node of group default is 0 fGPU");
}

/* Under fifo a head waiting for room holds up its own group only: the
 * request of group 1 behind it is placed, the smaller one of group 0 that
 * would fit is not. */
TEST(groups_block_their_own_queue_only)
{
	static const char *const names[2] = {"default", "a100"};
	struct fx f;
	fx_init(&f, 2, 1, 1, 1);
	f.ag[1].group = 1;
	f.ag[0].devs[0].free_m = 500;   /* something else holds half of n0's device */
	f.ag[0].free.fgpu_m = 500;
	f.w.group_names = names;
	f.w.n_groups = 2;
	fx_req(&f, "head0", 0, 1000, 0)->group = 0;
	fx_req(&f, "small0", 0, 500, 0)->group = 0;
	fx_req(&f, "b1", 0, 1000, 0)->group = 1;
	CHECK_INT(fx_plan(&f), 1);
	CHECK_INT(f.out[0].request, 2);
	CHECK_INT(f.out[0].agent, 1);
	CHECK_INT(f.res.blocked_head, 0);
	CHECK_STR(f.reasons[1], "queued behind head0 (first in, first out)");
	CHECK_STR(f.reasons[2], "");
}

TEST(groups_reasons_name_the_group)
{
	static const char *const names[2] = {"default", "big"};
	struct fx f;
	fx_init(&f, 2, 1, 1, 1);
	f.ag[1].group = 1;
	f.ag[1].alive = false;
	f.w.group_names = names;
	f.w.n_groups = 2;
	fx_req(&f, "x", 0, 1000, 0)->group = 1;
	fx_req(&f, "y", 0, 1000, 0)->group = 0;
	f.p.queue = &sched_drf;
	CHECK_INT(fx_plan(&f), 1);
	CHECK_STR(f.reasons[0], "waiting for a node of group big: no node of group big is alive");
	/* The project may not use the group: it waits, saying so. */
	f.ag[0].free = f.ag[0].capacity;
	f.ag[0].devs[0].free_m = 1000;
	f.pj[0].groups = 1;   /* default only */
	f.ag[1].alive = true;
	CHECK_INT(fx_plan(&f), 1);
	CHECK_STR(f.reasons[0], "waiting: project vision may not use resource group big");
	/* Blocking queue: a head no alive node of its group could hold does
	 * not block, and says which group. */
	fx_init(&f, 2, 1, 1, 0);
	f.ag[1].group = 1;
	f.ag[1].n_devs = 2;
	f.ag[1].alive = false;
	f.w.group_names = names;
	f.w.n_groups = 2;
	fx_req(&f, "two", 0, 2000, 0)->group = 1;
	CHECK_INT(fx_plan(&f), 0);
	CHECK_INT(f.res.blocked_head, -1);
	CHECK_STR(f.reasons[0], "waiting for node n1 to return: no alive node of group big is large enough");
}

/* An agent the caller could give no group (past the world's groups) gets
 * nothing, and does not upset the others. */
TEST(groups_agent_in_no_group)
{
	static const char *const names[1] = {"default"};
	struct fx f;
	fx_init(&f, 2, 1, 1, 0);
	f.ag[0].group = SIZE_MAX;
	f.w.group_names = names;
	f.w.n_groups = 1;
	fx_req(&f, "a", 0, 1000, 0);
	fx_req(&f, "b", 0, 1000, 0);
	f.p.queue = &sched_drf;
	CHECK_INT(fx_plan(&f), 1);
	CHECK_INT(f.out[0].agent, 1);
	CHECK_STR(f.reasons[1], "waiting for a GPU: needs 1 fGPU on one device; the most free on one device of any "
		  "node is 0 fGPU");
}

/* ---------- fair share ---------- */

TEST(fairshare_follows_weights_within_a_pass)
{
	struct fx f;
	fx_init(&f, 1, 4, 2, 2);   /* user 0: vision, user 1: speech */
	f.pj[1].weight = 3;
	for (int i = 0; i < 4; i++)
		fx_req(&f, "v", 0, 1000, 0);
	for (int i = 0; i < 4; i++)
		fx_req(&f, "s", 1, 1000, 0);
	f.p.queue = &sched_fairshare;
	CHECK_INT(fx_plan(&f), 4);
	size_t vision = 0;
	for (size_t i = 0; i < 4; i++)
		vision += f.out[i].request < 4;
	CHECK_INT(vision, 1);   /* 1 of 4 GPUs: its weight 1 of 4 */
	CHECK(!sched_fairshare.blocking);
	CHECK(sched_queue_find("fairshare") == &sched_fairshare);
}

TEST(fairshare_usage_comes_first_then_members)
{
	struct fx f;
	fx_init(&f, 1, 2, 4, 2);   /* users 0, 2: vision; 1, 3: speech */
	f.pj[0].usage.fgpu_s = 9000;   /* vision ran a lot lately */
	f.pj[1].usage.fgpu_s = 1000;
	f.mb[0].usage.fgpu_s = 8000;   /* and user 0 most of it */
	f.mb[2].usage.fgpu_s = 1000;
	fx_req(&f, "v0", 0, 1000, 0);
	fx_req(&f, "v2", 2, 1000, 0);
	fx_req(&f, "s1", 1, 1000, 0);
	f.p.queue = &sched_fairshare;
	CHECK_INT(fx_plan(&f), 2);
	CHECK_INT(f.out[0].request, 2);   /* speech first */
	CHECK_INT(f.out[1].request, 1);   /* then vision's lighter user, though newer */
	CHECK_CONTAINS(f.reasons[0], "waiting for a GPU");
}

/* The fair-share order, straight from the formula (docs/scheduling.md),
 * to check the policy's heap against. */
static double t_dom_res(const struct res *u, const struct res *t)
{
	double d = 0;
	const int64_t uu[3] = {u->cpu_m, u->mem, u->fgpu_m}, tt[3] = {t->cpu_m, t->mem, t->fgpu_m};
	for (int i = 0; i < 3; i++)
		if (tt[i] > 0 && (double)uu[i] / (double)tt[i] > d)
			d = (double)uu[i] / (double)tt[i];
	return d;
}

static double t_dom_usage(const struct sched_usage *u, const struct sched_usage *t)
{
	double d = 0;
	const double uu[3] = {u->cpu_s, u->mem_s, u->fgpu_s}, tt[3] = {t->cpu_s, t->mem_s, t->fgpu_s};
	for (int i = 0; i < 3; i++)
		if (tt[i] > 0 && uu[i] / tt[i] > d)
			d = uu[i] / tt[i];
	return d;
}

static ssize_t naive_fairshare(const struct sched_world *w, const struct sched_request *rq, size_t n,
			       const bool *tried)
{
	struct res total = {0};
	struct sched_usage ptot = {0};
	double wsum = 0;
	for (size_t i = 0; i < w->n_agents; i++)
		res_add(&total, &w->agents[i].capacity);
	for (size_t p = 0; p < w->n_projects; p++) {
		ptot.cpu_s += w->projects[p].usage.cpu_s;
		ptot.mem_s += w->projects[p].usage.mem_s;
		ptot.fgpu_s += w->projects[p].usage.fgpu_s;
		wsum += w->projects[p].weight;
	}
	ssize_t bp = -1;
	double bk = 0;
	int64_t bs = 0;
	for (size_t p = 0; p < w->n_projects; p++) {
		int64_t oldest = INT64_MAX;
		for (size_t i = 0; i < n; i++)
			if (!tried[i] && rq[i].project == p && rq[i].seq < oldest)
				oldest = rq[i].seq;
		if (oldest == INT64_MAX)
			continue;
		double k = (t_dom_usage(&w->projects[p].usage, &ptot) + t_dom_res(&w->projects[p].used, &total)) / 2 /
			   (w->projects[p].weight / wsum);
		if (bp < 0 || k < bk || (k == bk && oldest < bs)) {
			bp = (ssize_t)p;
			bk = k;
			bs = oldest;
		}
	}
	if (bp < 0)
		return -1;
	struct sched_usage mtot = {0};
	double mw = 0;
	for (size_t m = 0; m < w->n_members; m++) {
		if (w->members[m].project != (size_t)bp)
			continue;
		mtot.cpu_s += w->members[m].usage.cpu_s;
		mtot.mem_s += w->members[m].usage.mem_s;
		mtot.fgpu_s += w->members[m].usage.fgpu_s;
		mw += w->members[m].weight;
	}
	ssize_t best = -1;
	for (size_t i = 0; i < n; i++) {
		if (tried[i] || rq[i].project != (size_t)bp)
			continue;
		const struct sched_member *mb = &w->members[rq[i].member];
		double k = (t_dom_usage(&mb->usage, &mtot) + t_dom_res(&mb->used, &w->projects[bp].used)) / 2 /
			   (mb->weight / mw);
		if (best < 0 || k < bk || (k == bk && rq[i].seq < bs)) {
			best = (ssize_t)i;
			bk = k;
			bs = rq[i].seq;
		}
	}
	return best;
}

TEST(fairshare_order_matches_the_formula)
{
	static struct fx f;
	fx_init(&f, 4, 8, 8, 4);   /* members 0..7: project u % 4 */
	srand(11);
	for (size_t p = 0; p < 4; p++) {
		f.pj[p].weight = 1 + rand() % 4;
		f.pj[p].usage = (struct sched_usage){rand() % 1000, rand() % 1000, rand() % 1000};
		f.pj[p].used = (struct res){1000 * (rand() % 8), (rand() % 16) * GiB, 1000 * (rand() % 8)};
	}
	for (size_t m = 0; m < 8; m++) {
		f.mb[m].weight = 1 + rand() % 3;
		f.mb[m].usage = (struct sched_usage){rand() % 100, rand() % 100, rand() % 100};
		f.mb[m].used = (struct res){500 * (rand() % 4), (rand() % 4) * GiB, 500 * (rand() % 4)};
	}
	struct sched_request rq[64];
	for (size_t i = 0; i < 64; i++) {
		size_t u = (size_t)(rand() % 8);
		rq[i] = (struct sched_request){.name = "r", .req = {1000, GiB, 500 * (1 + rand() % 4)}, .user = u,
					       .project = f.mb[u].project, .member = u, .seq = (int64_t)i + 1};
	}
	bool tried[64] = {0};
	void *st = sched_fairshare.start(rq, 64, &f.w);
	CHECK(st != NULL);
	size_t agree = 0;
	for (size_t call = 0; call < 64; call++) {
		ssize_t want = naive_fairshare(&f.w, rq, 64, tried);
		ssize_t got = sched_fairshare.next(rq, 64, tried, &f.w, st);
		CHECK_INT(got, want);
		if (got < 0 || got != want)
			break;
		agree++;
		tried[got] = true;
		/* Every other one is placed, as sched_plan would record it. */
		if (call % 2 == 0) {
			res_add(&f.pj[rq[got].project].used, &rq[got].req);
			res_add(&f.mb[rq[got].member].used, &rq[got].req);
		}
	}
	CHECK_INT(agree, 64);
	CHECK_INT(sched_fairshare.next(rq, 64, tried, &f.w, st), -1);
	sched_fairshare.stop(st);
}

TEST(fairshare_figures)
{
	struct fx f;
	fx_init(&f, 2, 4, 4, 2);   /* 8 GPUs, 32 CPU, 128 GiB */
	f.pj[1].weight = 3;
	f.pj[0].usage = (struct sched_usage){100, 100, 300};
	f.pj[1].usage = (struct sched_usage){300, 100, 100};
	fx_run(&f, "a", 0, 0, 1000, 0, 0, 0);   /* vision: 1 GPU (12.5%) */
	fx_run(&f, "b", 0, 1, 1000, 1, 0, 0);   /* speech: 3 GPUs */
	fx_run(&f, "c", 0, 2, 1000, 1, 0, 0);
	fx_run(&f, "d", 0, 3, 1000, 3, 0, 0);
	struct sched_share sh[2];
	sched_fairshare_projects(&f.w, sh);
	CHECK(fabs(sh[0].target - 0.25) < 1e-9);
	CHECK(fabs(sh[1].target - 0.75) < 1e-9);
	/* Dominant: vision's fGPU usage 300 of 400, speech's CPU 300 of 400. */
	CHECK(fabs(sh[0].usage_share - 0.75) < 1e-9);
	CHECK(fabs(sh[1].usage_share - 0.75) < 1e-9);
	CHECK(fabs(sh[0].current_share - 0.125) < 1e-9);
	CHECK(fabs(sh[1].current_share - 0.375) < 1e-9);
	/* Keys: vision (0.75 + 0.125) / 2 / 0.25 = 1.75; speech
	 * (0.75 + 0.375) / 2 / 0.75 = 0.75: speech is served first. */
	CHECK_INT(sh[0].rank, 2);
	CHECK_INT(sh[1].rank, 1);
	/* Speech's members 1 and 3: user 1 holds 2 of its 3 GPUs. */
	struct sched_share ms[4];
	memset(ms, 0, sizeof(ms));
	f.mb[1].usage.fgpu_s = 10;
	f.mb[3].usage.fgpu_s = 30;
	sched_fairshare_members(&f.w, 1, ms);
	CHECK(fabs(ms[1].target - 0.5) < 1e-9);
	CHECK(fabs(ms[1].usage_share - 0.25) < 1e-9);
	CHECK(fabs(ms[3].usage_share - 0.75) < 1e-9);
	CHECK(fabs(ms[1].current_share - 2.0 / 3) < 1e-9);
	CHECK(fabs(ms[3].current_share - 1.0 / 3) < 1e-9);
	/* 1: (0.25 + 0.667) / 2 / 0.5 = 0.917; 3: (0.75 + 0.333) / 2 / 0.5 = 1.083. */
	CHECK_INT(ms[1].rank, 1);
	CHECK_INT(ms[3].rank, 2);
	CHECK_INT(ms[0].rank, 0);   /* other projects' members untouched */
}

TEST(usage_charge_and_decay)
{
	struct sched_usage u = {0};
	struct res one = {2000, 4 * GiB, 1000};
	sched_usage_charge(&u, &one, 100, 0);   /* no decay */
	CHECK(fabs(u.cpu_s - 200) < 1e-9);
	CHECK(fabs(u.mem_s - 400) < 1e-9);
	CHECK(fabs(u.fgpu_s - 100) < 1e-9);
	sched_usage_charge(&u, NULL, 3600, 3600);   /* nothing held for a half-life */
	CHECK(fabs(u.fgpu_s - 50) < 1e-9);
	/* Charging in small steps or one large one comes to the same. */
	struct sched_usage a = {0, 0, 10}, b = {0, 0, 10};
	sched_usage_charge(&a, &one, 600, 300);
	for (int i = 0; i < 60; i++)
		sched_usage_charge(&b, &one, 10, 300);
	CHECK(fabs(a.fgpu_s - b.fgpu_s) < 1e-6);
	/* 10 decayed over two half-lives, plus 300 / ln 2 * (1 - 1/4). */
	CHECK(fabs(a.fgpu_s - (2.5 + 300 / log(2) * 0.75)) < 1e-6);
	/* Held for ever, it tends to rate x half-life / ln 2. */
	struct sched_usage c = {0};
	sched_usage_charge(&c, &one, 1e6, 60);
	CHECK(fabs(c.fgpu_s - 60 / log(2)) < 1e-6);
}

/* ---------- preemption ---------- */

TEST(preempt_fewest_victims_then_cheapest)
{
	struct fx f;
	fx_init(&f, 2, 1, 4, 0);
	f.p.preempt = true;
	/* n0: two halves (two victims needed); n1: one whole (one victim). */
	fx_run(&f, "h1", 0, 0, 500, 0, 0, 1000);
	fx_run(&f, "h2", 0, 0, 500, 0, 0, 1000);
	fx_run(&f, "w", 1, 0, 1000, 1, 3, 99999);
	fx_req(&f, "urgent", 2, 1000, 5);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_INT(f.res.n_evictions, 1);
	CHECK_INT(f.ev[0].running, 2);
	CHECK_INT(f.ev[0].request, 0);
	CHECK_STR(f.ev[0].why, "preempted by session urgent (priority 5 over 3)");
	CHECK_STR(f.reasons[0], "waiting for 1 preempted session to end on node n1");

	/* One victim each: the lowest priority, then the shortest run, then
	 * the smallest. */
	fx_init(&f, 3, 1, 4, 0);
	f.p.preempt = true;
	fx_run(&f, "p2", 0, 0, 1000, 0, 2, 10);
	fx_run(&f, "p1long", 1, 0, 1000, 0, 1, 50000);
	fx_run(&f, "p1short", 2, 0, 1000, 0, 1, 20000);
	fx_req(&f, "urgent", 3, 1000, 5);
	fx_plan(&f);
	CHECK_INT(f.res.n_evictions, 1);
	CHECK_INT(f.ev[0].running, 2);
}

/* A session over several devices of agent a (devices first..first+n-1). */
static void fx_run_multi(struct fx *f, const char *name, size_t a, size_t first, size_t n, size_t u,
			 int64_t runtime_ms)
{
	struct sched_running *rn = fx_run(f, name, a, first, 1000, u, 0, runtime_ms);
	for (size_t d = 1; d < n; d++) {
		rn->shares[rn->n_shares++] = (struct sched_gpu_share){first + d, 1000};
		f->ag[a].devs[first + d].free_m -= 1000;
	}
	rn->req.fgpu_m = (int64_t)n * 1000;
	f->ag[a].free.fgpu_m -= (int64_t)(n - 1) * 1000;
}

/* The cheapest single victim, when one suffices, even where neither the
 * cheapest-first nor the largest-first order would find it. */
TEST(preempt_cheapest_single_victim)
{
	struct fx f;
	fx_init(&f, 1, 8, 2, 0);
	f.p.preempt = true;
	fx_run(&f, "x", 0, 0, 1000, 0, 0, 10);
	fx_run(&f, "y", 0, 1, 1000, 0, 0, 20);
	fx_run_multi(&f, "z", 0, 2, 2, 0, 30);
	fx_run_multi(&f, "large", 0, 4, 4, 0, 1000);
	fx_req(&f, "urgent", 1, 2000, 5);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_INT(f.res.n_evictions, 1);
	CHECK_INT(f.ev[0].running, 2);
}

TEST(preempt_respects_runtime_and_preemptible)
{
	struct fx f;
	fx_init(&f, 2, 1, 4, 0);
	f.p.preempt = true;
	f.p.preempt_min_runtime_ms = 60000;
	fx_run(&f, "young", 0, 0, 1000, 0, 0, 59999);
	fx_run(&f, "pinned", 1, 0, 1000, 0, 0, 600000)->preemptible = false;
	fx_req(&f, "urgent", 1, 1000, 5);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_INT(f.res.n_evictions, 0);
	CHECK_CONTAINS(f.reasons[0], "waiting for a GPU");
	/* Equal priority without projects: nobody may be preempted. */
	f.run[0].runtime_ms = 60000;
	f.rq[0].priority = 0;
	fx_plan(&f);
	CHECK_INT(f.res.n_evictions, 0);
	/* Old enough and of lower priority: preempted. */
	f.rq[0].priority = 1;
	fx_plan(&f);
	CHECK_INT(f.res.n_evictions, 1);
	CHECK_INT(f.ev[0].running, 0);
	/* Without params.preempt, never. */
	f.p.preempt = false;
	fx_plan(&f);
	CHECK_INT(f.res.n_evictions, 0);
}

TEST(preempt_not_for_policy_or_quota_waits)
{
	struct fx f;
	fx_init(&f, 1, 1, 2, 2);
	f.p.preempt = true;
	fx_run(&f, "low", 0, 0, 1000, 1, 0, 100000);
	f.us[0].max_sessions = 1;
	f.us[0].sessions = 1;   /* holds one elsewhere */
	fx_req(&f, "urgent", 0, 1000, 9);
	fx_plan(&f);
	CHECK_INT(f.res.n_evictions, 0);
	CHECK_CONTAINS(f.reasons[0], "user's policy");
	f.us[0].max_sessions = 0;
	f.pj[0].max_sessions = 1;
	f.pj[0].sessions = 1;
	fx_plan(&f);
	CHECK_INT(f.res.n_evictions, 0);
	CHECK_CONTAINS(f.reasons[0], "session quota");
}

TEST(preempt_fair_share_reclaim)
{
	struct fx f;
	fx_init(&f, 2, 1, 2, 2);   /* user 0: vision, user 1: speech; equal weights */
	f.p.preempt = true;
	f.p.queue = &sched_fairshare;
	fx_run(&f, "s-old", 0, 0, 1000, 1, 0, 90000);
	fx_run(&f, "s-new", 1, 0, 1000, 1, 0, 30000);
	fx_req(&f, "v1", 0, 1000, 0);
	fx_req(&f, "v2", 0, 1000, 0);
	CHECK_INT(fx_plan(&f), 0);
	/* Vision at 0% of 50%: one session of speech (100% of 50%) goes,
	 * the shorter-running one; a second would take vision over its
	 * share, so v2 waits without a victim. */
	CHECK_INT(f.res.n_evictions, 1);
	CHECK_INT(f.ev[0].running, 1);
	CHECK_STR(f.ev[0].why, "preempted by session v1: project vision is under its fair share (0% of 50%) and "
		  "project speech over it (100% of 50%)");
	CHECK_STR(f.reasons[0], "waiting for 1 preempted session to end on node n1");
	CHECK_CONTAINS(f.reasons[1], "waiting for a GPU");
	/* A project at its share takes nothing from another at its share. */
	fx_init(&f, 2, 1, 2, 2);
	f.p.preempt = true;
	fx_run(&f, "v", 0, 0, 1000, 0, 0, 90000);
	fx_run(&f, "s", 1, 0, 1000, 1, 0, 90000);
	fx_req(&f, "v2", 0, 1000, 0);
	fx_plan(&f);
	CHECK_INT(f.res.n_evictions, 0);
}

/* Reclaim never ends a session of a higher priority than the request's:
 * the same setting as preempt_fair_share_reclaim's, with speech's sessions
 * at priority 5 and vision's request at 0. */
TEST(preempt_reclaim_spares_higher_priorities)
{
	struct fx f;
	fx_init(&f, 2, 1, 2, 2);
	f.p.preempt = true;
	f.p.queue = &sched_fairshare;
	fx_run(&f, "s-old", 0, 0, 1000, 1, 5, 90000);
	fx_run(&f, "s-new", 1, 0, 1000, 1, 5, 30000);
	fx_req(&f, "v1", 0, 1000, 0);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_INT(f.res.n_evictions, 0);
	CHECK_CONTAINS(f.reasons[0], "waiting for a GPU");
}

/* The reclaim rule's targets are among the projects that hold or ask for
 * something: an idle project (most personal ones) lends its share. */
TEST(preempt_reclaim_targets_among_busy_projects)
{
	struct fx f;
	fx_init(&f, 5, 2, 3, 3);   /* users 0, 1, 2: vision, speech, robots */
	f.p.preempt = true;
	f.pj[2].weight = 2;        /* idle */
	for (size_t i = 0; i < 4; i++)
		fx_run(&f, "v", i / 2, i % 2, 1000, 0, 0, 100000);
	for (size_t i = 0; i < 6; i++)
		fx_run(&f, "s", 2 + i / 2, i % 2, 1000, 1, 0, 100000 + (int64_t)i);
	fx_req(&f, "v5", 0, 1000, 0);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_INT(f.res.n_evictions, 1);
	CHECK_INT(f.run[f.ev[0].running].project, 1);
	CHECK_INT(f.ev[0].running, 4);   /* speech's shortest-running */
	CHECK_STR(f.ev[0].why, "preempted by session v5: project vision is under its fair share (40% of 50%) and "
		  "project speech over it (60% of 50%)");
	/* The figures of sshare keep every project's weight. */
	struct sched_share sh[3];
	sched_fairshare_projects(&f.w, sh);
	CHECK(fabs(sh[0].target - 0.25) < 1e-9);
}

TEST(preempt_exact_device_fit)
{
	struct fx f;
	fx_init(&f, 1, 2, 4, 0);
	f.p.preempt = true;
	/* Device 0: a cheap victim beside a session that may not be
	 * preempted; device 1: two dearer ones. Freeing the cheap one leaves
	 * no whole device, so both of device 1 go. */
	fx_run(&f, "cheap", 0, 0, 500, 0, 0, 1000);
	fx_run(&f, "pinned", 0, 0, 500, 1, 0, 1000)->preemptible = false;
	fx_run(&f, "d1a", 0, 1, 500, 2, 1, 5000);
	fx_run(&f, "d1b", 0, 1, 500, 2, 1, 5000);
	fx_req(&f, "urgent", 3, 1000, 5);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_INT(f.res.n_evictions, 2);
	CHECK_INT(f.ev[0].running + f.ev[1].running, 2 + 3);
	CHECK_STR(f.reasons[0], "waiting for 2 preempted sessions to end on node n0");
}

TEST(preempt_holds_the_room)
{
	struct fx f;
	fx_init(&f, 1, 2, 4, 0);
	f.p.preempt = true;
	f.p.queue = &sched_drf;
	/* Device 0 half free; device 1 held by a low-priority session. */
	fx_run(&f, "half", 0, 0, 500, 0, 5, 1000)->preemptible = false;
	fx_run(&f, "low", 0, 1, 1000, 0, 0, 1000);
	fx_req(&f, "urgent", 1, 1000, 5);
	fx_req(&f, "urgent2", 2, 1000, 5);
	fx_req(&f, "small", 3, 500, 0);
	size_t n = fx_plan(&f);
	/* urgent's victim is chosen once; urgent2 finds none. The room is
	 * urgent's: nothing is placed in it, and urgent waits for it. The
	 * half device still free takes the small one. */
	CHECK_INT(f.res.n_evictions, 1);
	CHECK_INT(f.ev[0].running, 1);
	CHECK(!placed(&f, n, 0));
	CHECK(!placed(&f, n, 1));
	CHECK_STR(f.reasons[0], "waiting for 1 preempted session to end on node n0");
	CHECK_CONTAINS(f.reasons[1], "waiting for a GPU");
	CHECK_INT(n, 1);
	CHECK(placed(&f, n, 2));
	CHECK_INT(f.out[0].shares[0].device, 0);
	/* Next pass: the victim is ending (the manager is ending it), so the
	 * room stays urgent's and no one else is chosen. */
	fx_init(&f, 1, 2, 4, 0);
	f.p.preempt = true;
	fx_run(&f, "half", 0, 0, 500, 0, 5, 1000)->preemptible = false;
	fx_run(&f, "low", 0, 1, 1000, 0, 0, 1000)->ending = true;
	fx_req(&f, "urgent", 1, 1000, 5);
	fx_req(&f, "other", 2, 1000, 0);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_INT(f.res.n_evictions, 0);
	CHECK_STR(f.reasons[0], "waiting for 1 session to end on node n0");
}

/* With sessions already ending: no new victim when they make the room;
 * else one, with them, and only the new one reported. */
TEST(preempt_with_sessions_ending)
{
	struct fx f;
	fx_init(&f, 2, 1, 3, 0);
	f.p.preempt = true;
	f.p.queue = &sched_drf;
	fx_run(&f, "e", 0, 0, 500, 0, 0, 1000)->ending = true;
	fx_run(&f, "v", 0, 0, 500, 0, 0, 1000);
	fx_run(&f, "w", 1, 0, 1000, 0, 0, 500);   /* cheaper alone, but a new victim too */
	fx_req(&f, "urgent", 1, 1000, 5);
	fx_req(&f, "half", 2, 500, 5);
	CHECK_INT(fx_plan(&f), 0);
	/* urgent: one new victim either way; w runs shorter, so w. */
	CHECK_INT(f.res.n_evictions, 1);
	CHECK_INT(f.ev[0].running, 2);
	CHECK_INT(f.ev[0].request, 0);
	CHECK_STR(f.reasons[0], "waiting for 1 preempted session to end on node n1");
	/* half: e's room alone will do, and no one new goes for it. */
	CHECK_STR(f.reasons[1], "waiting for 1 session to end on node n0");

	/* On n0 alone: e and v must both end, v the only new victim. */
	fx_init(&f, 1, 1, 2, 0);
	f.p.preempt = true;
	fx_run(&f, "e", 0, 0, 500, 0, 0, 1000)->ending = true;
	fx_run(&f, "v", 0, 0, 500, 0, 0, 1000);
	fx_req(&f, "urgent", 1, 1000, 5);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_INT(f.res.n_evictions, 1);
	CHECK_INT(f.ev[0].running, 1);
	CHECK_STR(f.reasons[0], "waiting for 2 sessions to end on node n0");
}

int main(void)
{
	RUN(priority_goes_first);
	RUN(priority_head_blocks_lower_levels);
	RUN(quota_reasons_name_the_project);
	RUN(quota_counts_this_pass_placements);
	RUN(user_policy_words_unchanged_beside_quota);
	RUN(wait_words_follow_placements);
	RUN(groups_place_only_on_their_agents);
	RUN(groups_block_their_own_queue_only);
	RUN(groups_reasons_name_the_group);
	RUN(groups_agent_in_no_group);
	RUN(fairshare_follows_weights_within_a_pass);
	RUN(fairshare_usage_comes_first_then_members);
	RUN(fairshare_order_matches_the_formula);
	RUN(fairshare_figures);
	RUN(usage_charge_and_decay);
	RUN(preempt_fewest_victims_then_cheapest);
	RUN(preempt_cheapest_single_victim);
	RUN(preempt_respects_runtime_and_preemptible);
	RUN(preempt_not_for_policy_or_quota_waits);
	RUN(preempt_fair_share_reclaim);
	RUN(preempt_reclaim_spares_higher_priorities);
	RUN(preempt_reclaim_targets_among_busy_projects);
	RUN(preempt_exact_device_fit);
	RUN(preempt_holds_the_room);
	RUN(preempt_with_sessions_ending);
	return testlib_done();
}
