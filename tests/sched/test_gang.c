/* sched/sched.c with gangs (cluster sessions): all members placed in one
 * pass or none, across agents or on one, the rollback of a gang that does
 * not fit (exact, down to the order the next requests are placed in), the
 * agents a waiting gang holds and the requests that pass it, one session
 * and gang x resources against policies and quotas, fGPU shares per
 * container, invariants over random worlds, sched_gang_satisfiable. */
#include "sched/sched.h"
#include "testlib.h"

#include <stdlib.h>

#define GiB (1LL << 30)
#define MAX_AG 6
#define MAX_RQ 8
#define MAX_OUT 32

struct fx {
	struct sched_agent ag[MAX_AG];
	struct sched_device dev[MAX_AG][SCHED_MAX_DEVICES];
	struct sched_user us[2];
	struct sched_project pj[1];
	struct sched_member mb[2];
	struct sched_request rq[MAX_RQ];
	struct sched_placement out[MAX_OUT];
	char reasons[MAX_RQ][SCHED_REASON_MAX];
	struct sched_world w;
	struct sched_result res;
	struct sched_params p;
	size_t nr;
};

/* n_agents agents of n_devs 1 fGPU devices each, 16 CPU and 64 GiB; one
 * project with two users. */
static void fx_init(struct fx *f, size_t n_agents, size_t n_devs)
{
	memset(f, 0, sizeof(*f));
	static const char *const ids[MAX_AG] = {"n0", "n1", "n2", "n3", "n4", "n5"};
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
	for (size_t u = 0; u < 2; u++) {
		f->us[u].id = u ? "u1" : "u0";
		f->mb[u] = (struct sched_member){.project = 0, .user = u, .weight = 1};
	}
	f->pj[0] = (struct sched_project){.id = "vision", .name = "vision", .weight = 1};
	f->w = (struct sched_world){.agents = f->ag, .n_agents = n_agents, .users = f->us, .n_users = 2,
				    .projects = f->pj, .n_projects = 1, .members = f->mb, .n_members = 2};
	f->res = (struct sched_result){.reasons = f->reasons};
	f->p = (struct sched_params){.selector = &sched_concentrated, .queue = &sched_fifo, .per_device_m = 1000};
}

/* Gives agent a's device d fgpu_m less free (something runs there). */
static void fx_use(struct fx *f, size_t a, size_t d, int64_t fgpu_m)
{
	f->dev[a][d].free_m -= fgpu_m;
	f->ag[a].free.fgpu_m -= fgpu_m;
	f->ag[a].free.cpu_m -= 1000;
	f->ag[a].free.mem -= 1 * GiB;
}

/* A request of user 0 for 1 CPU, 1 GiB and fgpu_m per container; gang 0
 * is an ordinary one. */
static struct sched_request *fx_req(struct fx *f, const char *name, int64_t fgpu_m, int gang, bool single)
{
	struct sched_request *r = &f->rq[f->nr];
	*r = (struct sched_request){.session_id = name, .name = name, .req = {1000, 1 * GiB, fgpu_m}, .user = 0,
				    .project = 0, .member = 0, .seq = (int64_t)f->nr + 1, .gang = gang,
				    .gang_single_node = single};
	f->nr++;
	return r;
}

static size_t fx_plan(struct fx *f)
{
	memset(f->reasons, 0, sizeof(f->reasons));
	return sched_plan(&f->p, &f->w, f->rq, f->nr, f->out, &f->res);
}

/* fGPU used on agent a (capacity minus free, by its devices). */
static int64_t dev_used(const struct fx *f, size_t a)
{
	int64_t used = 0;
	for (size_t d = 0; d < f->ag[a].n_devs; d++)
		used += 1000 - f->dev[a][d].free_m;
	return used;
}

TEST(multi_node_across_two_agents)
{
	struct fx f;
	fx_init(&f, 2, 2);
	fx_req(&f, "train", 1000, 3, false);
	CHECK_INT(fx_plan(&f), 3);
	bool on[2] = {false, false};
	for (int k = 0; k < 3; k++) {
		CHECK_INT(f.out[k].request, 0);
		CHECK_INT(f.out[k].member, k);
		CHECK_INT(f.out[k].n_shares, 1);
		CHECK_INT(f.out[k].shares[0].fgpu_m, 1000);
		on[f.out[k].agent] = true;
	}
	CHECK(on[0] && on[1]);   /* 2 + 1: two agents were needed */
	CHECK_INT(dev_used(&f, 0) + dev_used(&f, 1), 3000);
	CHECK_INT(f.ag[0].free.fgpu_m + f.ag[1].free.fgpu_m, 1000);
	CHECK_INT(f.ag[0].free.cpu_m + f.ag[1].free.cpu_m, 32000 - 3000);
	/* no device was given twice */
	for (size_t a = 0; a < 2; a++)
		for (size_t d = 0; d < 2; d++)
			CHECK(f.dev[a][d].free_m == 0 || f.dev[a][d].free_m == 1000);
	CHECK_STR(f.reasons[0], "");
	/* one session, three containers' resources */
	CHECK_INT(f.us[0].sessions, 1);
	CHECK_INT(f.us[0].used.fgpu_m, 3000);
	CHECK_INT(f.us[0].used.cpu_m, 3000);
	CHECK_INT(f.pj[0].sessions, 1);
	CHECK_INT(f.pj[0].used.mem, 3 * GiB);
	CHECK_INT(f.mb[0].used.fgpu_m, 3000);
}

TEST(single_node_picks_the_agent_that_holds_all)
{
	/* n0 is the tightest (best fit picks it for one container) but has
	 * room for 1; n1 for 2; n2 for all 3. */
	struct fx f;
	fx_init(&f, 3, 3);
	fx_use(&f, 0, 0, 1000);
	fx_use(&f, 0, 1, 1000);
	fx_use(&f, 1, 0, 1000);
	fx_req(&f, "train", 1000, 3, true);
	CHECK_INT(fx_plan(&f), 3);
	for (int k = 0; k < 3; k++) {
		CHECK_INT(f.out[k].agent, 2);
		CHECK_INT(f.out[k].member, k);
		CHECK_INT(f.out[k].shares[0].device, k);
	}
	CHECK_INT(f.ag[2].free.fgpu_m, 0);
	CHECK_INT(f.ag[0].free.fgpu_m, 1000);
	CHECK_INT(f.ag[1].free.fgpu_m, 2000);

	/* the same multi-node goes where the selector puts each member:
	 * best fit takes the tightest devices, n0's and n1's half ones */
	fx_init(&f, 3, 3);
	fx_use(&f, 0, 0, 500);
	fx_use(&f, 1, 0, 500);
	fx_req(&f, "train", 500, 3, false);
	CHECK_INT(fx_plan(&f), 3);
	CHECK_INT(f.out[0].agent + f.out[1].agent, 1);   /* n0 and n1 */
	CHECK_INT(f.dev[0][0].free_m + f.dev[1][0].free_m, 0);
	CHECK_INT(f.ag[0].free.fgpu_m + f.ag[1].free.fgpu_m + f.ag[2].free.fgpu_m, 9000 - 2500);

	/* dispersed takes the most free device first: n1's whole one, but
	 * n1 holds only 2 of the 3 halves; then n0's (0.9 free each) */
	fx_init(&f, 3, 4);
	for (size_t d = 0; d < 4; d++)
		fx_use(&f, 0, d, 100);
	for (size_t d = 1; d < 4; d++)
		fx_use(&f, 1, d, 1000);
	for (size_t d = 0; d < 4; d++)
		fx_use(&f, 2, d, 800);
	f.p.selector = &sched_dispersed;
	fx_req(&f, "train", 500, 3, true);
	CHECK_INT(fx_plan(&f), 3);
	for (int k = 0; k < 3; k++) {
		CHECK_INT(f.out[k].agent, 0);
		CHECK_INT(f.out[k].shares[0].device, k);   /* spread: the most free device each time */
	}
	CHECK_INT(f.dev[1][0].free_m, 1000);
}

/* The agents' free room and devices, to compare. */
struct snap {
	struct res free[MAX_AG];
	int64_t dev[MAX_AG][SCHED_MAX_DEVICES];
};

static void take_snap(const struct fx *f, struct snap *s)
{
	memset(s, 0, sizeof(*s));
	for (size_t a = 0; a < f->w.n_agents; a++) {
		s->free[a] = f->ag[a].free;
		for (size_t d = 0; d < f->ag[a].n_devs; d++)
			s->dev[a][d] = f->dev[a][d].free_m;
	}
}

static bool same_snap(const struct snap *x, const struct snap *y, size_t n)
{
	for (size_t a = 0; a < n; a++) {
		if (x->free[a].cpu_m != y->free[a].cpu_m || x->free[a].mem != y->free[a].mem ||
		    x->free[a].fgpu_m != y->free[a].fgpu_m)
			return false;
		for (size_t d = 0; d < SCHED_MAX_DEVICES; d++)
			if (x->dev[a][d] != y->dev[a][d])
				return false;
	}
	return true;
}

/* A world where agents and devices tie (the order within a bucket
 * decides among them): every agent as full in CPU and memory, only n0 with
 * a half free device, which a gang of halves takes first. */
static void tie_world(struct fx *f)
{
	fx_init(f, 3, 4);
	fx_use(f, 0, 1, 500);
	fx_use(f, 0, 0, 200);
	fx_use(f, 1, 2, 700);
	fx_use(f, 1, 0, 200);
	fx_use(f, 2, 3, 700);
	fx_use(f, 2, 0, 1000);
}

static void tie_requests(struct fx *f)
{
	static const int64_t sizes[7] = {0, 500, 300, 1000, 200, 1500, 500};
	static const char *const names[7] = {"cpu", "a", "b", "c", "d", "e", "f"};
	for (size_t i = 0; i < 7; i++)
		fx_req(f, names[i], sizes[i], 0, false);
}

TEST(partial_fit_rolls_back_exactly)
{
	for (int single = 0; single < 2; single++) {
		for (int sel = 0; sel < 2; sel++) {
			/* Without the gang: where a..f go. */
			struct fx base;
			tie_world(&base);
			base.p.selector = sel ? &sched_dispersed : &sched_concentrated;
			tie_requests(&base);
			size_t nb = fx_plan(&base);
			CHECK(nb >= 5);
			struct snap after_base;
			take_snap(&base, &after_base);

			/* The gang alone: some of its 40 halves fit now, but
			 * 40 never could (3 nodes x 4 devices x 2 halves), so
			 * it is tried, taken back, and holds nothing: everything
			 * is as before. */
			struct fx f;
			tie_world(&f);
			f.p.selector = base.p.selector;
			struct snap before, after;
			take_snap(&f, &before);
			fx_req(&f, "big", 500, 40, single);
			CHECK_INT(fx_plan(&f), 0);
			take_snap(&f, &after);
			CHECK(same_snap(&before, &after, 3));
			CHECK_INT(f.us[0].sessions, 0);
			CHECK_INT(f.us[0].used.fgpu_m, 0);
			CHECK_INT(f.pj[0].sessions, 0);
			CHECK_INT(f.pj[0].used.cpu_m, 0);
			CHECK_INT(f.mb[0].used.fgpu_m, 0);
			CHECK_CONTAINS(f.reasons[0], "waiting for room for all 40 containers");
			CHECK_CONTAINS(f.reasons[0], "even when empty");

			/* The gang first, then the others in the same pass: they
			 * land exactly where they did without it (re-filing the
			 * agents the gang touched instead of undoing each change
			 * moves n0 ahead of n2 among equals, and cpu lands on n0). */
			tie_world(&f);
			f.p.selector = base.p.selector;
			fx_req(&f, "big", 500, 40, single);
			tie_requests(&f);
			CHECK_INT(fx_plan(&f), nb);
			for (size_t k = 0; k < nb; k++) {
				CHECK_INT(f.out[k].request, base.out[k].request + 1);
				CHECK_INT(f.out[k].member, 0);
				CHECK_INT(f.out[k].agent, base.out[k].agent);
				CHECK_INT(f.out[k].n_shares, base.out[k].n_shares);
				for (size_t s = 0; s < f.out[k].n_shares; s++) {
					CHECK_INT(f.out[k].shares[s].device, base.out[k].shares[s].device);
					CHECK_INT(f.out[k].shares[s].fgpu_m, base.out[k].shares[s].fgpu_m);
				}
			}
			take_snap(&f, &after);
			CHECK(same_snap(&after_base, &after, 3));
		}
	}
}

TEST(waiting_gang_holds_nodes_and_others_pass)
{
	/* n0 and n1 have 2 devices, one busy each: room for 2 of the 3
	 * containers now. n2 has 1 device, half busy. */
	struct fx f;
	fx_init(&f, 3, 2);
	f.ag[2].n_devs = 1;
	f.ag[2].capacity.fgpu_m = f.ag[2].free.fgpu_m = 1000;
	fx_use(&f, 0, 0, 1000);
	fx_use(&f, 1, 0, 1000);
	fx_use(&f, 2, 0, 500);
	fx_req(&f, "train", 1000, 3, false);
	fx_req(&f, "small", 500, 0, false);
	fx_req(&f, "one", 1000, 0, false);
	CHECK_INT(fx_plan(&f), 1);
	/* the gang: nothing placed; it holds the two nodes whose capacity
	 * (2 each) holds its members, and does not block the queue */
	CHECK_STR(f.reasons[0], "waiting for room for all 3 containers (2 fit now): holding nodes n0, n1 for them");
	CHECK(f.res.blocked_head != 0);
	/* small fits on n2, which is not held */
	CHECK_INT(f.out[0].request, 1);
	CHECK_INT(f.out[0].agent, 2);
	CHECK_STR(f.reasons[1], "");
	/* one would fit on n0 or n1, but they are held: it waits */
	CHECK_STR(f.reasons[2], "waiting for a GPU: needs 1 fGPU on one device; the most free on one device of any "
		  "node is 0 fGPU");
	CHECK_INT(f.ag[0].free.fgpu_m, 1000);
	CHECK_INT(f.ag[1].free.fgpu_m, 1000);
	CHECK_INT(f.us[0].sessions, 1);

	/* without the gang, one goes on n0 or n1 */
	fx_init(&f, 3, 2);
	f.ag[2].n_devs = 1;
	f.ag[2].capacity.fgpu_m = f.ag[2].free.fgpu_m = 1000;
	fx_use(&f, 0, 0, 1000);
	fx_use(&f, 1, 0, 1000);
	fx_use(&f, 2, 0, 500);
	fx_req(&f, "one", 1000, 0, false);
	CHECK_INT(fx_plan(&f), 1);
	CHECK(f.out[0].agent < 2);

	/* sessions on n0 and n1 ended: the room is there, the gang starts
	 * whole (the requests behind it take what is left) */
	fx_init(&f, 3, 2);
	f.ag[2].n_devs = 1;
	f.ag[2].capacity.fgpu_m = f.ag[2].free.fgpu_m = 1000;
	fx_use(&f, 2, 0, 500);   /* small runs on n2 */
	fx_req(&f, "train", 1000, 3, false);
	fx_req(&f, "one", 1000, 0, false);
	CHECK_INT(fx_plan(&f), 4);
	for (int k = 0; k < 3; k++) {
		CHECK_INT(f.out[k].request, 0);
		CHECK_INT(f.out[k].member, k);
		CHECK(f.out[k].agent < 2);
	}
	CHECK_INT(f.out[3].request, 1);
	CHECK_STR(f.reasons[0], "");
	CHECK_INT(f.us[0].sessions, 2);
}

TEST(waiting_single_node_gang_holds_one_node)
{
	/* Each of n0, n1 has 1 of 2 devices free; the gang needs both
	 * devices of one node. It holds n0 (the first whose capacity holds
	 * it); a request behind it goes to n1. */
	struct fx f;
	fx_init(&f, 2, 2);
	fx_use(&f, 0, 0, 1000);
	fx_use(&f, 1, 0, 1000);
	fx_req(&f, "train", 1000, 2, true);
	fx_req(&f, "one", 1000, 0, false);
	CHECK_INT(fx_plan(&f), 1);
	CHECK_STR(f.reasons[0], "waiting for room for all 2 containers on one node (1 fit now): holding node n0 "
		  "for them");
	CHECK_INT(f.out[0].request, 1);
	CHECK_INT(f.out[0].agent, 1);

	/* a second gang finds nothing left to hold; a single-node gang no
	 * node could hold says so and holds nothing */
	fx_init(&f, 2, 2);
	fx_use(&f, 0, 0, 1000);
	fx_use(&f, 1, 0, 1000);
	fx_req(&f, "train", 1000, 2, true);
	fx_req(&f, "train2", 1000, 2, true);
	fx_req(&f, "huge", 1000, 3, true);
	fx_req(&f, "one", 1000, 0, false);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_CONTAINS(f.reasons[0], "holding node n0");
	CHECK_CONTAINS(f.reasons[1], "holding node n1");
	CHECK_STR(f.reasons[2], "waiting for room for all 3 containers on one node: no alive node could hold them "
		  "even when empty");
	CHECK_CONTAINS(f.reasons[3], "held for a waiting cluster session");

	/* fifo: an ordinary head that does not fit blocks its group, gangs
	 * behind it included */
	fx_init(&f, 2, 2);
	fx_use(&f, 0, 0, 1000);
	fx_use(&f, 1, 0, 1000);
	fx_req(&f, "two", 2000, 0, false);
	fx_req(&f, "train", 500, 2, false);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_INT(f.res.blocked_head, 0);
	CHECK_CONTAINS(f.reasons[1], "queued behind two");
	/* drf does not block: the gang passes it */
	f.p.queue = &sched_drf;
	CHECK_INT(fx_plan(&f), 2);
	CHECK_INT(f.out[0].request, 1);
	CHECK_INT(f.out[1].member, 1);
}

TEST(quota_counts_one_session_and_n_times_resources)
{
	/* one session allowed: a gang of 3 is one */
	struct fx f;
	fx_init(&f, 2, 4);
	f.us[0].max_sessions = 1;
	fx_req(&f, "train", 1000, 3, false);
	fx_req(&f, "more", 1000, 0, false);
	CHECK_INT(fx_plan(&f), 3);
	CHECK_INT(f.us[0].sessions, 1);
	CHECK_INT(f.us[0].used.fgpu_m, 3000);
	CHECK_STR(f.reasons[1], "waiting for the user's policy: at most 1 concurrent sessions (1 running)");

	/* but 3 x 1 fGPU against a user's 2 fGPU: waits, naming the limit */
	fx_init(&f, 2, 4);
	f.us[0].max.fgpu_m = 2000;
	fx_req(&f, "train", 1000, 3, false);
	fx_req(&f, "ok", 1000, 2, false);
	CHECK_INT(fx_plan(&f), 2);
	CHECK_STR(f.reasons[0], "waiting for the user's policy: at most 2 fGPU in total (0 fGPU in use)");
	CHECK_INT(f.out[0].request, 1);
	CHECK_INT(f.us[0].used.fgpu_m, 2000);

	/* the project's quotas: sessions, then CPU (3 x 1 CPU over 2) */
	fx_init(&f, 2, 4);
	f.pj[0].max_sessions = 1;
	f.pj[0].sessions = 1;
	fx_req(&f, "train", 1000, 2, false);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_STR(f.reasons[0], "waiting for project vision's session quota: 1 of 1 running");
	fx_init(&f, 2, 4);
	f.pj[0].max.cpu_m = 2000;
	fx_req(&f, "train", 0, 3, false);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_STR(f.reasons[0], "waiting for project vision's CPU quota: 0 of 2 in use");
	f.pj[0].max.cpu_m = 3000;
	CHECK_INT(fx_plan(&f), 3);
	CHECK_INT(f.pj[0].sessions, 1);
	CHECK_INT(f.pj[0].used.cpu_m, 3000);
	CHECK_INT(f.mb[0].used.cpu_m, 3000);
}

TEST(fgpu_shares_per_container)
{
	/* 1.5 fGPU each on a node of 4 devices: a whole device and half of
	 * another each, the two halves packed on one device */
	for (int single = 0; single < 2; single++) {
		struct fx f;
		fx_init(&f, 1, 4);
		fx_req(&f, "train", 1500, 2, single);
		CHECK_INT(fx_plan(&f), 2);
		for (int k = 0; k < 2; k++) {
			CHECK_INT(f.out[k].n_shares, 2);
			CHECK_INT(f.out[k].shares[0].fgpu_m, 1000);
			CHECK_INT(f.out[k].shares[1].fgpu_m, 500);
		}
		CHECK(f.out[0].shares[0].device != f.out[1].shares[0].device);
		CHECK_INT(f.out[0].shares[1].device, f.out[1].shares[1].device);
		CHECK_INT(f.ag[0].free.fgpu_m, 1000);
		int whole_free = 0;
		for (size_t d = 0; d < 4; d++)
			whole_free += f.dev[0][d].free_m == 1000;
		CHECK_INT(whole_free, 1);
	}
	/* 0.5 fGPU each: each on one device, three on two devices */
	struct fx f;
	fx_init(&f, 1, 2);
	fx_req(&f, "train", 500, 3, false);
	CHECK_INT(fx_plan(&f), 3);
	for (int k = 0; k < 3; k++)
		CHECK_INT(f.out[k].n_shares, 1);
	CHECK_INT(f.dev[0][0].free_m + f.dev[0][1].free_m, 500);
	/* 2 devices' worth no node has whole: the gang waits whole */
	fx_init(&f, 2, 2);
	fx_use(&f, 0, 0, 100);
	fx_use(&f, 1, 0, 100);
	fx_req(&f, "train", 2000, 2, false);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_STR(f.reasons[0], "waiting for room for all 2 containers (0 fit now): holding nodes n0, n1 for them");
}

TEST(groups_drained_and_lost)
{
	/* n0 group 0, n1 and n2 group 1 (n2 drained), n3 group 1 LOST */
	struct fx f;
	fx_init(&f, 4, 1);
	static const char *const names[2] = {"default", "a100"};
	f.w.group_names = names;
	f.w.n_groups = 2;
	for (size_t a = 1; a < 4; a++)
		f.ag[a].group = 1;
	f.ag[2].drained = true;
	f.ag[3].alive = false;
	fx_req(&f, "train", 1000, 2, false)->group = 1;
	fx_req(&f, "solo", 1000, 1, false)->group = 1;
	CHECK_INT(fx_plan(&f), 1);
	CHECK_STR(f.reasons[0], "waiting for room for all 2 containers: the alive nodes of group a100 could not "
		  "hold them even when empty");
	CHECK_INT(f.out[0].request, 1);
	CHECK_INT(f.out[0].agent, 1);
	f.ag[2].drained = false;
	f.ag[1].free = f.ag[1].capacity;
	f.dev[1][0].free_m = 1000;
	CHECK_INT(fx_plan(&f), 2);
	CHECK(f.out[0].agent == 1 || f.out[0].agent == 2);
	CHECK(f.out[1].agent == 1 || f.out[1].agent == 2);
	CHECK(f.out[0].agent != f.out[1].agent);
	CHECK_CONTAINS(f.reasons[1], "of group a100");
}

TEST(held_nodes_are_not_preempted_for)
{
	/* The gang holds n0; a higher-priority... no: a request behind it
	 * at its priority that fits nowhere must not choose victims on n0. */
	struct fx f;
	fx_init(&f, 2, 1);
	struct sched_running run[2] = {
		{.session_id = "r0", .name = "r0", .agent = 0, .req = {1000, 1 * GiB, 1000}, .n_shares = 1,
		 .shares = {{0, 1000}}, .preemptible = true, .priority = -1, .runtime_ms = 1000000},
		{.session_id = "r1", .name = "r1", .agent = 1, .req = {1000, 1 * GiB, 1000}, .n_shares = 1,
		 .shares = {{0, 1000}}, .preemptible = false, .priority = -1, .runtime_ms = 1000000},
	};
	fx_use(&f, 0, 0, 1000);
	fx_use(&f, 1, 0, 1000);
	f.w.running = run;
	f.w.n_running = 2;
	struct sched_eviction ev[2];
	f.res.evictions = ev;
	f.p.preempt = true;
	fx_req(&f, "train", 1000, 2, false);
	fx_req(&f, "one", 1000, 0, false);
	CHECK_INT(fx_plan(&f), 0);
	CHECK_CONTAINS(f.reasons[0], "holding nodes n0, n1");
	CHECK(!strstr(f.reasons[0], "preempt"));
	CHECK_INT(f.res.n_evictions, 0);
	/* without the gang, r0 (lower priority, preemptible) is its victim */
	f.rq[0] = f.rq[1];
	f.nr = 1;
	CHECK_INT(fx_plan(&f), 0);
	CHECK_INT(f.res.n_evictions, 1);
	CHECK_CONTAINS(f.reasons[0], "to end on node n0");
}

/* A random world: up to 6 agents of 1 to 4 devices, partly used. */
static void random_world(struct fx *f, unsigned *seed)
{
	size_t na = 2 + (size_t)(rand_r(seed) % 5), nd = 1 + (size_t)(rand_r(seed) % 4);
	fx_init(f, na, nd);
	for (size_t a = 0; a < na; a++)
		for (size_t d = 0; d < nd; d++)
			if (rand_r(seed) % 2)
				fx_use(f, a, d, 100 * (rand_r(seed) % 11));
}

static void random_request(struct fx *f, unsigned *seed, bool gangs)
{
	static const int64_t sizes[6] = {0, 300, 500, 1000, 1500, 2000};
	struct sched_request *r = fx_req(f, "r", sizes[rand_r(seed) % 6], 0, false);
	if (gangs && rand_r(seed) % 3 == 0) {
		r->gang = 2 + rand_r(seed) % 4;
		r->gang_single_node = rand_r(seed) % 2;
	}
}

TEST(random_worlds)
{
	unsigned seed = 33;
	for (int round = 0; round < 400; round++) {
		/* Every gang whole or not at all; nothing over-committed; the
		 * free room taken is what the placements hold. */
		struct fx f;
		random_world(&f, &seed);
		f.p.selector = round % 2 ? &sched_dispersed : &sched_concentrated;
		f.p.queue = round % 3 == 0 ? &sched_drf : round % 3 == 1 ? &sched_lifo : &sched_fifo;
		size_t nreq = 1 + (size_t)(rand_r(&seed) % 6);
		for (size_t i = 0; i < nreq; i++)
			random_request(&f, &seed, true);
		struct snap before;
		take_snap(&f, &before);
		size_t n = fx_plan(&f);
		CHECK(n <= MAX_OUT);
		int count[MAX_RQ] = {0};
		struct res taken[MAX_AG] = {{0}};
		for (size_t k = 0; k < n; k++) {
			const struct sched_placement *pl = &f.out[k];
			CHECK_INT(pl->member, count[pl->request]);
			count[pl->request]++;
			res_add(&taken[pl->agent], &f.rq[pl->request].req);
			if (f.rq[pl->request].gang_single_node)
				CHECK_INT(pl->agent, f.out[k - (size_t)pl->member].agent);
		}
		for (size_t i = 0; i < f.nr; i++) {
			int want = f.rq[i].gang > 1 ? f.rq[i].gang : 1;
			CHECK(count[i] == 0 || count[i] == want);
			CHECK(count[i] > 0 || f.reasons[i][0]);
		}
		for (size_t a = 0; a < f.w.n_agents; a++) {
			CHECK_INT(before.free[a].cpu_m - f.ag[a].free.cpu_m, taken[a].cpu_m);
			CHECK_INT(before.free[a].fgpu_m - f.ag[a].free.fgpu_m, taken[a].fgpu_m);
			int64_t dev_taken = 0;
			for (size_t d = 0; d < f.ag[a].n_devs; d++) {
				CHECK(f.dev[a][d].free_m >= 0);
				dev_taken += before.dev[a][d] - f.dev[a][d].free_m;
			}
			CHECK_INT(dev_taken, taken[a].fgpu_m);
		}

		/* A gang no node set could hold, tried first, changes nothing
		 * for the requests after it. */
		unsigned s2 = seed;
		struct fx base, with;
		random_world(&base, &s2);
		s2 = seed;
		random_world(&with, &s2);
		base.p.selector = with.p.selector = f.p.selector;
		fx_req(&with, "never", 1000, 100, round % 4 == 0);
		for (size_t i = 0; i < nreq; i++) {
			unsigned s3 = seed + (unsigned)i;
			random_request(&base, &s3, false);
			s3 = seed + (unsigned)i;
			random_request(&with, &s3, false);
		}
		seed = s2;
		size_t nb = fx_plan(&base);
		CHECK_INT(fx_plan(&with), nb);
		for (size_t k = 0; k < nb; k++) {
			CHECK_INT(with.out[k].request, base.out[k].request + 1);
			CHECK_INT(with.out[k].agent, base.out[k].agent);
			for (size_t q = 0; q < base.out[k].n_shares; q++)
				CHECK_INT(with.out[k].shares[q].device, base.out[k].shares[q].device);
		}
		CHECK_CONTAINS(with.reasons[0], "even when empty");
	}
}

TEST(gang_satisfiable)
{
	/* two agents of 2 devices, one of them LOST: still counted */
	struct fx f;
	fx_init(&f, 2, 2);
	f.ag[1].alive = false;
	fx_use(&f, 0, 0, 1000);
	struct res one = {1000, 1 * GiB, 1000}, big = {1000, 1 * GiB, 3000}, cpu = {9000, 1 * GiB, 0};
	CHECK(sched_gang_satisfiable(f.ag, 2, &one, 4, false, 1000));
	CHECK(!sched_gang_satisfiable(f.ag, 2, &one, 5, false, 1000));
	CHECK(sched_gang_satisfiable(f.ag, 2, &one, 2, true, 1000));
	CHECK(!sched_gang_satisfiable(f.ag, 2, &one, 3, true, 1000));
	CHECK(!sched_gang_satisfiable(f.ag, 2, &big, 1, false, 1000));
	CHECK(!sched_gang_satisfiable(f.ag, 2, &big, 2, false, 1000));
	/* 16 CPU each: one 9-CPU container per agent */
	CHECK(sched_gang_satisfiable(f.ag, 2, &cpu, 2, false, 1000));
	CHECK(!sched_gang_satisfiable(f.ag, 2, &cpu, 2, true, 1000));
	CHECK(sched_gang_satisfiable(f.ag, 2, &cpu, 0, true, 1000));
}

TEST(priorities_and_lifo)
{
	/* A higher priority comes first even when it came later: it takes
	 * room the gang would have used; a lower one does not pass the hold. */
	struct fx f;
	fx_init(&f, 3, 2);
	fx_use(&f, 0, 0, 1000);
	fx_use(&f, 1, 0, 1000);
	fx_use(&f, 2, 0, 1000);
	fx_req(&f, "train", 1000, 3, false);
	fx_req(&f, "urgent", 1000, 0, false)->priority = 5;
	fx_req(&f, "low", 1000, 0, false)->priority = -1;
	CHECK_INT(fx_plan(&f), 1);
	CHECK_INT(f.out[0].request, 1);
	/* the gang holds the two nodes urgent left a free device on, and
	 * low, with a device free on each, finds neither */
	CHECK_CONTAINS(f.reasons[0], "(2 fit now): holding nodes");
	for (size_t a = 0; a < 3; a++)
		if (a != f.out[0].agent)
			CHECK_CONTAINS(f.reasons[0], f.ag[a].id);
	CHECK_CONTAINS(f.reasons[2], "waiting for a GPU");

	/* lifo: the newest first; a gang that does not fit holds instead
	 * of blocking, so an older session that fits elsewhere still starts */
	fx_init(&f, 3, 2);
	f.p.queue = &sched_lifo;
	fx_use(&f, 0, 0, 1000);
	fx_use(&f, 1, 0, 1000);
	fx_use(&f, 2, 0, 1000);
	fx_use(&f, 2, 1, 500);
	fx_req(&f, "old", 500, 0, false);
	fx_req(&f, "train", 1000, 3, false);
	CHECK_INT(fx_plan(&f), 1);
	CHECK_STR(f.reasons[1], "waiting for room for all 3 containers (2 fit now): holding nodes n0, n1 for them");
	CHECK_INT(f.out[0].request, 0);
	CHECK_INT(f.out[0].agent, 2);
	CHECK_INT(f.res.blocked_head, -1);
}

int main(void)
{
	RUN(multi_node_across_two_agents);
	RUN(single_node_picks_the_agent_that_holds_all);
	RUN(partial_fit_rolls_back_exactly);
	RUN(waiting_gang_holds_nodes_and_others_pass);
	RUN(waiting_single_node_gang_holds_one_node);
	RUN(quota_counts_one_session_and_n_times_resources);
	RUN(fgpu_shares_per_container);
	RUN(groups_drained_and_lost);
	RUN(held_nodes_are_not_preempted_for);
	RUN(random_worlds);
	RUN(gang_satisfiable);
	RUN(priorities_and_lifo);
	return testlib_done();
}
