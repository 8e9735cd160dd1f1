/* sched-bench: scheduler throughput on an in-process cluster.
 *
 *   sched-bench --agents N --gpus-per-agent G --sessions S [--store URI]
 *   sched-bench --fairshare-trace [--agents N]
 *   sched-bench --gangs [--agents N] [--gpus-per-agent G] [--sessions S]
 *
 * A real manager (store, scheduler thread, dispatchers) on a temporary
 * SQLite store, or on the PostgreSQL database URI names (empty: the
 * schema is made there; bench/run-all starts a throwaway cluster); N mock agents registered through an agent link whose
 * starts succeed at once; S sessions of mixed sizes queued in one request:
 * CPU-only, 0.1 to 1 fGPU, and multi-GPU. The scheduler runs until nothing
 * more fits. Then one placed session is removed and the time until the
 * waiting head of the queue is SCHEDULED is measured. The last line is a
 * JSON object: placements_per_s, sessions_placed, wall_s, peak_rss_mb,
 * successor_ms. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/util.h"
#include "manager/state.h"
#include "sched/sched.h"
#include "mock_link.h"   /* mock agents: containers that start and stop at once */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits until the scheduler has nothing left to do. */
static void wait_idle(struct manager *m)
{
	for (;;) {
		pthread_mutex_lock(&m->mu);
		bool idle = !m->sched_dirty && !m->in_pass;
		pthread_mutex_unlock(&m->mu);
		if (idle)
			return;
		usleep(1000);
	}
}

static int fail(const struct terr *err)
{
	fprintf(stderr, "sched-bench: %s\n", err->msg);
	return 1;
}

/* ---------- --fairshare-trace: the planner alone on a simulated hour ----------
 *
 * No manager: a world of 500 agents (--agents N) x 8 GPUs kept here,
 * sched_plan called directly every SIM_STEP_S simulated seconds with the
 * fairshare policy and preemption on. Three projects of weights 1:1:2, four users each, submit
 * GPU sessions (0.5 to 8 GPUs, 4 CPU and 32 GiB per GPU, 5 to 25 simulated
 * minutes) at twice what the cluster can run, each a third of the load.
 * Usage is charged on the simulated clock (sched_usage_charge, half-life
 * 15 min). Every 30 s from minute 10 a priority-10 request of a whole
 * node (8 GPUs) arrives: it needs preemption, and the CPU time of the pass
 * that chose its victims plus the pass that placed it (its victims gone in
 * between) is its scheduler time. Printed: each project's GPU share over
 * the last half hour against its target, and those times. */

#define SIM_AGENTS 500   /* by default; --agents N changes it */
#define SIM_GPUS 8
#define SIM_USERS_PER_PROJECT 4
#define SIM_STEP_S 5
#define SIM_HOUR_S 3600
#define SIM_HALF_LIFE_S 900.0

struct sim_run {
	int64_t end_s, start_s;
	size_t request_seq;
};

struct sim {
	size_t n_agents;
	struct sched_agent *agents;
	struct sched_device (*devs)[SIM_GPUS];
	struct sched_user users[3 * SIM_USERS_PER_PROJECT];
	struct sched_member members[3 * SIM_USERS_PER_PROJECT];
	struct sched_project projects[3];
	struct sched_running *running;
	struct sim_run *rinfo;
	size_t n_running, cap_running;
	struct sched_request *pending;
	int64_t *pending_dur;
	size_t n_pending, cap_pending;
	int64_t seq;
};

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_size_desc(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return x > y ? -1 : x < y;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void sim_hold(struct sim *s, const struct res *r, size_t user, int sign)
{
	struct res d = *r;
	if (sign < 0)
		d = (struct res){-d.cpu_m, -d.mem, -d.fgpu_m};
	size_t p = user / SIM_USERS_PER_PROJECT;
	res_add(&s->users[user].used, &d);
	s->users[user].sessions += sign;
	res_add(&s->members[user].used, &d);
	res_add(&s->projects[p].used, &d);
	s->projects[p].sessions += sign;
}

/* Ends running session k: frees its room and drops it (swap with last). */
static void sim_end(struct sim *s, size_t k)
{
	struct sched_running *rn = &s->running[k];
	struct sched_agent *a = &s->agents[rn->agent];
	res_add(&a->free, &rn->req);
	for (size_t i = 0; i < rn->n_shares; i++)
		a->devs[rn->shares[i].device].free_m += rn->shares[i].fgpu_m;
	sim_hold(s, &rn->req, rn->user, -1);
	s->n_running--;
	s->running[k] = s->running[s->n_running];
	s->rinfo[k] = s->rinfo[s->n_running];
}

static void sim_submit(struct sim *s, size_t user, int64_t fgpu_m, int64_t dur_s, int priority, const char *name)
{
	if (s->n_pending == s->cap_pending) {
		s->cap_pending = s->cap_pending ? 2 * s->cap_pending : 1024;
		s->pending = realloc(s->pending, s->cap_pending * sizeof(*s->pending));
		s->pending_dur = realloc(s->pending_dur, s->cap_pending * sizeof(*s->pending_dur));
		if (!s->pending || !s->pending_dur)
			abort();
	}
	int64_t gpus = fgpu_m < 1000 ? 1 : fgpu_m / 1000;
	struct sched_request *r = &s->pending[s->n_pending];
	*r = (struct sched_request){.session_id = name, .name = name,
				    .req = {4000 * gpus, (int64_t)32 * gpus << 30, fgpu_m},
				    .user = user, .project = user / SIM_USERS_PER_PROJECT, .member = user,
				    .priority = priority, .seq = ++s->seq};
	s->pending_dur[s->n_pending++] = dur_s;
}

static int run_fairshare_trace(size_t n_agents)
{
	static struct sim S;
	struct sim *s = &S;
	s->n_agents = n_agents;
	s->agents = calloc(n_agents, sizeof(*s->agents));
	s->devs = calloc(n_agents, sizeof(*s->devs));
	char (*ids)[32] = calloc(n_agents, sizeof(*ids));
	struct sched_agent *ag_copy = calloc(n_agents, sizeof(*ag_copy));
	struct sched_device (*dev_copy)[SIM_GPUS] = calloc(n_agents, sizeof(*dev_copy));
	if (!s->agents || !s->devs || !ids || !ag_copy || !dev_copy)
		return 1;
	static const char *const names[3] = {"alpha", "beta", "gamma"};
	static const double weights[3] = {1, 1, 2};
	for (size_t i = 0; i < n_agents; i++) {
		struct sched_agent *a = &s->agents[i];
		snprintf(ids[i], sizeof(ids[i]), "node-%03zu", i);
		*a = (struct sched_agent){.id = ids[i], .alive = true,
					  .capacity = {128000, 1LL << 40, SIM_GPUS * 1000},
					  .devs = s->devs[i], .n_devs = SIM_GPUS};
		a->free = a->capacity;
		for (size_t d = 0; d < SIM_GPUS; d++)
			s->devs[i][d].free_m = 1000;
	}
	for (size_t p = 0; p < 3; p++)
		s->projects[p] = (struct sched_project){.id = names[p], .name = names[p], .weight = weights[p]};
	for (size_t u = 0; u < 3 * SIM_USERS_PER_PROJECT; u++) {
		s->users[u] = (struct sched_user){.id = "user"};
		s->members[u] = (struct sched_member){.project = u / SIM_USERS_PER_PROJECT, .user = u, .weight = 1};
	}
	s->cap_running = 8 * n_agents * SIM_GPUS;
	s->running = calloc(s->cap_running, sizeof(*s->running));
	s->rinfo = calloc(s->cap_running, sizeof(*s->rinfo));
	if (!s->running || !s->rinfo)
		return 1;
	/* Twice the capacity in GPU-seconds: mean request 1.975 GPU, mean
	 * duration 900 s. */
	const double mean_gpu = 0.15 * 0.5 + 0.40 * 1 + 0.25 * 2 + 0.15 * 4 + 0.05 * 8;
	const double rate = 2.0 * (double)n_agents * SIM_GPUS / (mean_gpu * 900.0);   /* sessions per second */
	srand(7);
	struct sched_params params = {.selector = &sched_concentrated, .queue = &sched_fairshare,
				      .per_device_m = 1000, .quantum_m = 10, .preempt = true,
				      .preempt_min_runtime_ms = 120000};
	double gpu_s[3] = {0}, pass_cpu_total = 0, pass_cpu_max = 0;
	double lat[64];
	size_t n_lat = 0, passes = 0, evicted = 0, by_priority = 0, started = 0, hp_sent = 0, hp_direct = 0;
	int64_t hp_seq_waiting = -1;
	double hp_first_cpu = 0;
	double carry = 0;
	struct sched_placement *out = NULL;
	char (*reasons)[SCHED_REASON_MAX] = NULL;
	struct sched_eviction *ev = NULL;
	size_t cap_out = 0, cap_ev = 0;
	for (int64_t now = 0; now < SIM_HOUR_S; now += SIM_STEP_S) {
		/* Ends, then usage for the step just gone by. */
		for (size_t k = s->n_running; k-- > 0;)
			if (s->rinfo[k].end_s <= now)
				sim_end(s, k);
		/* Arrivals: a third of the load each, users at random. */
		carry += rate * SIM_STEP_S;
		for (; carry >= 1; carry -= 1) {
			size_t user = (size_t)(rand() % (3 * SIM_USERS_PER_PROJECT));
			int k = rand() % 100;
			int64_t fgpu = k < 15 ? 500 : k < 55 ? 1000 : k < 80 ? 2000 : k < 95 ? 4000 : 8000;
			sim_submit(s, user, fgpu, 300 + rand() % 1201, 0, "batch");
		}
		if (now >= 600 && now % 30 == 0 && hp_seq_waiting < 0) {
			sim_submit(s, (size_t)(hp_sent % 3) * SIM_USERS_PER_PROJECT, 8000, 600, 10, "urgent");
			hp_seq_waiting = s->seq;
			hp_first_cpu = 0;
			hp_sent++;
		}
		for (size_t k = 0; k < s->n_running; k++)
			s->running[k].runtime_ms = (now - s->rinfo[k].start_s) * 1000;
		if (cap_out < s->n_pending || !out) {
			cap_out = s->n_pending * 2 + 16;
			out = realloc(out, cap_out * sizeof(*out));
			reasons = realloc(reasons, cap_out * sizeof(*reasons));
		}
		if (cap_ev < s->n_running + 1) {
			cap_ev = s->cap_running;
			ev = realloc(ev, cap_ev * sizeof(*ev));
		}
		if (!out || !reasons || !ev)
			return 1;
		struct sched_world w = {.agents = s->agents, .n_agents = n_agents, .users = s->users,
					.n_users = 3 * SIM_USERS_PER_PROJECT, .projects = s->projects, .n_projects = 3,
					.members = s->members, .n_members = 3 * SIM_USERS_PER_PROJECT,
					.running = s->running, .n_running = s->n_running};
		struct sched_result res = {.reasons = reasons, .evictions = ev};
		/* sched_plan updates the world as it plans; the simulation keeps
		 * its own accounting, so it plans on copies of what it changes. */
		struct sched_user us_copy[3 * SIM_USERS_PER_PROJECT];
		struct sched_member mb_copy[3 * SIM_USERS_PER_PROJECT];
		struct sched_project pj_copy[3];
		memcpy(ag_copy, s->agents, n_agents * sizeof(*ag_copy));
		memcpy(dev_copy, s->devs, n_agents * sizeof(*dev_copy));
		for (size_t i = 0; i < n_agents; i++)
			ag_copy[i].devs = dev_copy[i];
		memcpy(us_copy, s->users, sizeof(us_copy));
		memcpy(mb_copy, s->members, sizeof(mb_copy));
		memcpy(pj_copy, s->projects, sizeof(pj_copy));
		w.agents = ag_copy;
		w.users = us_copy;
		w.members = mb_copy;
		w.projects = pj_copy;
		double c0 = cpu_now();
		size_t placed = sched_plan(&params, &w, s->pending, s->n_pending, out, &res);
		double c1 = cpu_now() - c0;
		passes++;
		pass_cpu_total += c1;
		if (c1 > pass_cpu_max)
			pass_cpu_max = c1;
		/* The urgent request: its victims chosen in this pass, or placed. */
		bool hp_placed = false, hp_evicting = false;
		for (size_t i = 0; i < placed; i++)
			hp_placed |= s->pending[out[i].request].seq == hp_seq_waiting;
		for (size_t i = 0; i < res.n_evictions; i++)
			hp_evicting |= s->pending[ev[i].request].seq == hp_seq_waiting;
		if (hp_seq_waiting >= 0) {
			if (hp_evicting)
				hp_first_cpu += c1;
			if (hp_placed) {
				if (hp_first_cpu > 0 && n_lat < sizeof(lat) / sizeof(lat[0]))
					lat[n_lat++] = hp_first_cpu + c1;
				else if (hp_first_cpu == 0)
					hp_direct++;
				hp_seq_waiting = -1;
			}
		}
		/* Apply: placements (on the real world), then the victims end
		 * before the next pass. */
		bool *gone = calloc(s->n_pending ? s->n_pending : 1, sizeof(bool));
		if (!gone)
			return 1;
		for (size_t i = 0; i < placed; i++) {
			const struct sched_placement *pl = &out[i];
			const struct sched_request *r = &s->pending[pl->request];
			struct sched_agent *a = &s->agents[pl->agent];
			res_sub(&a->free, &r->req);
			for (size_t d = 0; d < pl->n_shares; d++)
				a->devs[pl->shares[d].device].free_m -= pl->shares[d].fgpu_m;
			sim_hold(s, &r->req, r->user, +1);
			struct sched_running *rn = &s->running[s->n_running];
			*rn = (struct sched_running){.session_id = r->session_id, .name = r->name, .agent = pl->agent,
						     .req = r->req, .n_shares = pl->n_shares, .user = r->user,
						     .project = r->project, .member = r->member, .priority = r->priority,
						     .preemptible = true};
			memcpy(rn->shares, pl->shares, sizeof(rn->shares));
			s->rinfo[s->n_running] = (struct sim_run){now + s->pending_dur[pl->request], now, 0};
			s->n_running++;
			gone[pl->request] = true;
			started++;
		}
		/* Victims: highest index first, as sim_end moves the last one. */
		size_t *vic = malloc((res.n_evictions + 1) * sizeof(size_t));
		if (!vic)
			return 1;
		for (size_t i = 0; i < res.n_evictions; i++)
			vic[i] = ev[i].running;
		qsort(vic, res.n_evictions, sizeof(size_t), cmp_size_desc);
		for (size_t i = 0; i < res.n_evictions; i++)
			sim_end(s, vic[i]);
		evicted += res.n_evictions;
		for (size_t i = 0; i < res.n_evictions; i++)
			by_priority += strstr(ev[i].why, "(priority ") != NULL;
		free(vic);
		size_t k = 0;
		for (size_t i = 0; i < s->n_pending; i++) {
			if (gone[i])
				continue;
			s->pending[k] = s->pending[i];
			s->pending_dur[k++] = s->pending_dur[i];
		}
		s->n_pending = k;
		free(gone);
		/* Usage over the next step, on the simulated clock. */
		for (size_t p = 0; p < 3; p++) {
			sched_usage_charge(&s->projects[p].usage, &s->projects[p].used, SIM_STEP_S, SIM_HALF_LIFE_S);
			if (now >= SIM_HOUR_S / 2)
				gpu_s[p] += (double)s->projects[p].used.fgpu_m / 1000.0 * SIM_STEP_S;
		}
		for (size_t u = 0; u < 3 * SIM_USERS_PER_PROJECT; u++)
			sched_usage_charge(&s->members[u].usage, &s->members[u].used, SIM_STEP_S, SIM_HALF_LIFE_S);
	}
	double cap_s = (double)n_agents * SIM_GPUS * (SIM_HOUR_S / 2);
	double total = gpu_s[0] + gpu_s[1] + gpu_s[2];
	printf("fair-share trace: %zu agents x %d GPUs, projects alpha:beta:gamma weights 1:1:2, load 2x capacity, "
	       "a simulated hour in %zu passes (%d s apart)\n", n_agents, SIM_GPUS, passes, SIM_STEP_S);
	printf("  %zu sessions started; %zu preempted: %zu for a higher priority, %zu by the fair-share reclaim rule\n",
	       started, evicted, by_priority, evicted - by_priority);
	double worst = 0;
	for (size_t p = 0; p < 3; p++) {
		double share = total > 0 ? gpu_s[p] / total : 0, target = weights[p] / 4;
		if (fabs(share - target) > worst)
			worst = fabs(share - target);
		printf("  project %-5s GPU share over the last half hour: %5.1f%% (target %4.1f%%)\n", names[p],
		       share * 100, target * 100);
	}
	printf("  GPUs in use over the last half hour: %.1f%%; queue at the end: %zu\n", total / cap_s * 100,
	       s->n_pending);
	double lat_med = 0, lat_max = 0;
	if (n_lat) {
		qsort(lat, n_lat, sizeof(double), cmp_double);
		lat_med = lat[n_lat / 2];
		lat_max = lat[n_lat - 1];
	}
	printf("  urgent whole-node requests: %zu sent, %zu placed after preemption: scheduler CPU time of the two "
	       "passes median %.1f ms, max %.1f ms (%zu placed without preemption)\n",
	       hp_sent, n_lat, lat_med * 1000, lat_max * 1000, hp_direct);
	printf("  sched_plan CPU time per pass: mean %.1f ms, max %.1f ms\n", pass_cpu_total / (double)passes * 1000,
	       pass_cpu_max * 1000);
	printf("  goals: shares within 5 points of their targets: %s (worst %.1f); urgent placement <= 100 ms: %s\n",
	       worst <= 0.05 ? "met" : "MISSED", worst * 100,
	       !n_lat ? "not measured (no urgent request needed preemption)" : lat_max <= 0.1 ? "met" : "MISSED");
	printf("{\"fairshare_worst_points\": %.2f, \"share_alpha\": %.2f, \"share_beta\": %.2f, \"share_gamma\": %.2f, "
	       "\"preempt_to_place_ms_median\": %.2f, \"preempt_to_place_ms_max\": %.2f, \"pass_ms_mean\": %.2f}\n",
	       worst * 100, total > 0 ? gpu_s[0] / total * 100 : 0, total > 0 ? gpu_s[1] / total * 100 : 0,
	       total > 0 ? gpu_s[2] / total * 100 : 0, lat_med * 1000, lat_max * 1000,
	       pass_cpu_total / (double)passes * 1000);
	free(s->running);
	free(s->rinfo);
	free(s->pending);
	free(s->pending_dur);
	free(out);
	free(reasons);
	free(ev);
	free(s->agents);
	free(s->devs);
	free(ids);
	free(ag_copy);
	free(dev_copy);
	return 0;
}

/* ---------- --gangs: cluster sessions among ordinary requests ----------
 *
 * The planner alone (the manager's passes do not take gangs yet): a world
 * of N agents (--agents, default 1,000) x G GPUs (--gpus-per-agent, 8) kept
 * here, and S requests (--sessions, default 20,000) of the main run's mix,
 * of which one in ten is a gang of 2 to 8 containers (one gang in four
 * single-node), each container of the request's size. The baseline, in
 * the same run: the same containers, every gang's split into that many
 * one-container requests in its place in the queue. For each, the CPU time
 * of sched_plan on the empty cluster (placements/s: containers placed over
 * it) and of a second pass over the full cluster with what still waits
 * (where waiting gangs try, roll back and hold nodes). fifo, concentrated;
 * the best of three alternated runs of each. */

#define GANG_AGENTS 1000
#define GANG_SESSIONS 20000

struct gang_bench {
	size_t n_agents;
	long gpus;
	struct sched_agent *agents;
	struct sched_device *devs;    /* [n_agents * gpus] */
	char (*ids)[32];
	struct sched_user user;
};

static void gang_world_reset(struct gang_bench *b)
{
	for (size_t i = 0; i < b->n_agents; i++) {
		struct sched_agent *a = &b->agents[i];
		*a = (struct sched_agent){.id = b->ids[i], .alive = true,
					  .capacity = {128000, 1LL << 40, b->gpus * 1000},
					  .devs = b->gpus ? &b->devs[i * (size_t)b->gpus] : NULL, .n_devs = (size_t)b->gpus};
		a->free = a->capacity;
		for (long d = 0; d < b->gpus; d++)
			a->devs[d].free_m = 1000;
	}
	b->user = (struct sched_user){.id = "user"};
}

struct gang_run {
	double first_s, full_s;       /* CPU time of the two passes */
	size_t placed, waiting;       /* containers placed by the first; requests left for the second */
};

/* The arrays of a run, made and touched once before any is timed: a
 * first touch of fresh pages inside one scenario's timing and not the
 * other's cost more than the planning itself at this size. */
struct gang_bufs {
	struct sched_placement *out;
	char (*reasons)[SCHED_REASON_MAX];
	struct sched_request *left;
	bool *placed;
};

/* Two passes over reqs: on the empty cluster, then with what waits. */
static void gang_run(struct gang_bench *b, const struct sched_request *reqs, size_t n, struct gang_bufs *bu,
		     struct gang_run *r)
{
	struct sched_params params = {.selector = &sched_concentrated, .queue = &sched_fifo, .per_device_m = 1000,
				      .quantum_m = 10};
	struct sched_placement *out = bu->out;
	char (*reasons)[SCHED_REASON_MAX] = bu->reasons;
	struct sched_request *left = bu->left;
	bool *placed = bu->placed;
	memset(placed, 0, n * sizeof(bool));
	gang_world_reset(b);
	struct sched_world w = {.agents = b->agents, .n_agents = b->n_agents, .users = &b->user, .n_users = 1};
	struct sched_result res = {.reasons = reasons};
	double t0 = cpu_now();
	r->placed = sched_plan(&params, &w, reqs, n, out, &res);
	r->first_s = cpu_now() - t0;
	for (size_t k = 0; k < r->placed; k++)
		placed[out[k].request] = true;
	r->waiting = 0;
	for (size_t i = 0; i < n; i++)
		if (!placed[i])
			left[r->waiting++] = reqs[i];
	t0 = cpu_now();
	sched_plan(&params, &w, left, r->waiting, out, &res);
	r->full_s = cpu_now() - t0;
}

static int run_gangs(size_t n_agents, long gpus, size_t n_reqs)
{
	struct gang_bench b = {.n_agents = n_agents, .gpus = gpus};
	b.agents = calloc(n_agents, sizeof(*b.agents));
	b.devs = calloc(n_agents * (size_t)(gpus ? gpus : 1), sizeof(*b.devs));
	b.ids = calloc(n_agents, sizeof(*b.ids));
	struct sched_request *reqs = calloc(n_reqs, sizeof(*reqs));
	if (!b.agents || !b.devs || !b.ids || !reqs)
		return 1;
	for (size_t i = 0; i < n_agents; i++)
		snprintf(b.ids[i], sizeof(b.ids[i]), "node-%05zu", i);
	/* The queue: the main run's mix, one request in ten a gang. */
	srand(42);
	size_t containers = 0, gangs = 0, singles = 0;
	for (size_t i = 0; i < n_reqs; i++) {
		struct sched_request *r = &reqs[i];
		*r = (struct sched_request){.session_id = "s", .name = "s", .seq = (int64_t)i + 1};
		int kind = rand() % 100;
		r->req.cpu_m = 1000 * (1 + rand() % 4);
		r->req.mem = (int64_t)(4 + rand() % 13) << 30;
		if (kind < 20)
			r->req.fgpu_m = 0;
		else if (kind < 80)
			r->req.fgpu_m = 100 * (1 + rand() % 10);
		else if (gpus >= 2)
			r->req.fgpu_m = 1000 * (2 + rand() % (gpus >= 4 ? 3 : 1));
		else
			r->req.fgpu_m = gpus ? 1000 : 0;
		if (rand() % 10 == 0) {
			r->gang = 2 + rand() % 7;
			r->gang_single_node = rand() % 4 == 0;
			gangs++;
			singles += r->gang_single_node;
		}
		containers += r->gang > 1 ? (size_t)r->gang : 1;
	}
	/* The baseline: every gang's containers as one-container requests. */
	struct sched_request *split = calloc(containers, sizeof(*split));
	if (!split)
		return 1;
	size_t ns = 0;
	for (size_t i = 0; i < n_reqs; i++) {
		for (int k = 0; k < (reqs[i].gang > 1 ? reqs[i].gang : 1); k++) {
			split[ns] = reqs[i];
			split[ns].gang = 0;
			split[ns].gang_single_node = false;
			split[ns].seq = (int64_t)ns + 1;
			ns++;
		}
	}
	struct gang_bufs bu = {calloc(ns, sizeof(*bu.out)), calloc(ns, sizeof(*bu.reasons)), calloc(ns, sizeof(*bu.left)),
			       calloc(ns, sizeof(bool))};
	if (!bu.out || !bu.reasons || !bu.left || !bu.placed)
		return 1;
	memset(bu.out, 1, ns * sizeof(*bu.out));
	memset(bu.reasons, 1, ns * sizeof(*bu.reasons));
	memset(bu.left, 1, ns * sizeof(*bu.left));
	struct gang_run best_g = {0}, best_b = {0};
	for (int run = 0; run < 3; run++) {
		struct gang_run g, o;
		gang_run(&b, reqs, n_reqs, &bu, &g);
		gang_run(&b, split, ns, &bu, &o);
		if (!run || g.first_s < best_g.first_s)
			best_g.first_s = g.first_s, best_g.placed = g.placed, best_g.waiting = g.waiting;
		if (!run || g.full_s < best_g.full_s)
			best_g.full_s = g.full_s;
		if (!run || o.first_s < best_b.first_s)
			best_b.first_s = o.first_s, best_b.placed = o.placed, best_b.waiting = o.waiting;
		if (!run || o.full_s < best_b.full_s)
			best_b.full_s = o.full_s;
	}
	double rate_g = best_g.first_s > 0 ? (double)best_g.placed / best_g.first_s : 0;
	double rate_b = best_b.first_s > 0 ? (double)best_b.placed / best_b.first_s : 0;
	printf("gangs: %zu agents x %ld GPUs, %zu requests (%zu gangs of 2 to 8 containers, %zu of them single-node; "
	       "%zu containers), fifo, concentrated, the planner alone, best of 3\n",
	       n_agents, gpus, n_reqs, gangs, singles, containers);
	printf("  empty cluster: with gangs %.0f placements/s (%zu containers placed, %.1f ms); the same containers as "
	       "one-container requests %.0f placements/s (%zu placed, %.1f ms); %.2fx\n",
	       rate_g, best_g.placed, best_g.first_s * 1000, rate_b, best_b.placed, best_b.first_s * 1000,
	       rate_b > 0 ? rate_g / rate_b : 0);
	printf("  full cluster, a pass over what waits: with gangs %.1f ms (%zu requests), one-container %.1f ms "
	       "(%zu requests)\n", best_g.full_s * 1000, best_g.waiting, best_b.full_s * 1000, best_b.waiting);
	printf("{\"gang_placements_per_s\": %.0f, \"baseline_placements_per_s\": %.0f, \"ratio\": %.3f, "
	       "\"gang_containers_placed\": %zu, \"baseline_placed\": %zu, \"gang_full_pass_ms\": %.2f, "
	       "\"baseline_full_pass_ms\": %.2f}\n",
	       rate_g, rate_b, rate_b > 0 ? rate_g / rate_b : 0, best_g.placed, best_b.placed, best_g.full_s * 1000,
	       best_b.full_s * 1000);
	free(bu.out);
	free(bu.reasons);
	free(bu.left);
	free(bu.placed);
	free(split);
	free(reqs);
	free(b.agents);
	free(b.devs);
	free(b.ids);
	return 0;
}

int main(int argc, char **argv)
{
	long agents = 100, gpus = 8, sessions = 2000;
	bool trace = false, agents_given = false, gangs = false, sessions_given = false;
	const char *store = NULL;
	static const struct option opts[] = {
		{"agents", required_argument, NULL, 'a'}, {"gpus-per-agent", required_argument, NULL, 'g'},
		{"sessions", required_argument, NULL, 's'}, {"store", required_argument, NULL, 'S'},
		{"fairshare-trace", no_argument, NULL, 'F'}, {"gangs", no_argument, NULL, 'G'},
		{"help", no_argument, NULL, 'h'}, {0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'a': agents = strtol(optarg, NULL, 10); agents_given = true; break;
		case 'g': gpus = strtol(optarg, NULL, 10); break;
		case 's': sessions = strtol(optarg, NULL, 10); sessions_given = true; break;
		case 'S': store = optarg; break;
		case 'F': trace = true; break;
		case 'G': gangs = true; break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: sched-bench --agents N --gpus-per-agent G --sessions S [--store URI]\n"
				"       sched-bench --fairshare-trace [--agents N (default 500)]\n"
				"       sched-bench --gangs [--agents N (default 1000)] [--gpus-per-agent G] [--sessions S "
				"(default 20000)]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (trace) {
		if (agents < 1) {
			fprintf(stderr, "sched-bench: need agents >= 1\n");
			return 2;
		}
		return run_fairshare_trace(agents_given ? (size_t)agents : SIM_AGENTS);
	}
	if (gangs) {
		if (agents < 1 || gpus < 0 || gpus > SCHED_MAX_DEVICES || sessions < 1) {
			fprintf(stderr, "sched-bench: need agents >= 1, 0 <= gpus-per-agent <= %d, sessions >= 1\n",
				SCHED_MAX_DEVICES);
			return 2;
		}
		return run_gangs(agents_given ? (size_t)agents : GANG_AGENTS, gpus,
				 sessions_given ? (size_t)sessions : GANG_SESSIONS);
	}
	if (agents < 1 || gpus < 0 || gpus > MGR_MAX_GPUS || sessions < 1) {
		fprintf(stderr, "sched-bench: need agents >= 1, 0 <= gpus-per-agent <= %d, sessions >= 1\n", MGR_MAX_GPUS);
		return 2;
	}
	log_set_level(LOG_WARN);
	char dir[] = "/tmp/tessera-sched-bench.XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	struct manager_config cfg = {.data_dir = dir, .listen = "127.0.0.1:0", .dispatch_workers = 4, .store = store};
	struct manager *m = NULL;
	struct terr err = {0};
	if (manager_open(&m, &cfg, &err) < 0)
		return fail(&err);

	/* The cluster: big nodes with G 80 GiB GPUs each. */
	for (long i = 0; i < agents; i++) {
		json_t *gl = json_array();
		for (long g = 0; g < gpus; g++) {
			char uuid[64];
			snprintf(uuid, sizeof(uuid), "GPU-bench-%06ld-%02ld", i, g);
			json_array_append_new(gl, json_pack("{s:i,s:s,s:s,s:I,s:i}", "index", (int)g, "uuid", uuid,
							    "name", "Bench GPU 80 GiB", "memory", (json_int_t)(80LL << 30), "sms", 132));
		}
		char id[32];
		snprintf(id, sizeof(id), "node-%05ld", i);
		json_t *desc = json_pack("{s:s,s:s,s:{s:I,s:I,s:I},s:[],s:o,s:b}", "id", id, "version", "bench",
					 "capacity", "cpu_milli", (json_int_t)128000, "mem", (json_int_t)(1LL << 40),
					 "fgpu_milli", (json_int_t)0, "containers", "gpus", gl, "mock_gpus", true);
		int rc = mgr_agent_register(m, desc, &mock_link, NULL, true, NULL, &err);
		json_decref(desc);
		if (rc < 0)
			return fail(&err);
	}
	wait_idle(m);

	/* The queue: mixed sizes, deterministic. */
	struct msession **news = calloc((size_t)sessions, sizeof(*news));
	srand(42);
	pthread_mutex_lock(&m->mu);
	const char *owner = m->users[0].id;
	/* Every session belongs to a project: the owner's personal one, as a
	 * session created without --project by a user in no team. */
	struct mproject *pp = mgr_personal_project(m, owner);
	char project_id[sizeof(pp->rec.id)] = "";
	if (pp)
		util_strlcpy(project_id, pp->rec.id, sizeof(project_id));
	pthread_mutex_unlock(&m->mu);
	if (!project_id[0]) {
		fprintf(stderr, "sched-bench: the first user has no personal project\n");
		return 1;
	}
	for (long i = 0; i < sessions; i++) {
		struct msession *s = calloc(1, sizeof(*s));
		news[i] = s;
		util_new_id(s->rec.id, NULL);
		snprintf(s->rec.name, sizeof(s->rec.name), "b-%ld", i);
		util_strlcpy(s->rec.owner_id, owner, sizeof(s->rec.owner_id));
		util_strlcpy(s->rec.project_id, project_id, sizeof(s->rec.project_id));
		util_strlcpy(s->rec.image, "bench:latest", sizeof(s->rec.image));
		int kind = rand() % 100;
		s->rec.req.cpu_m = 1000 * (1 + rand() % 4);
		s->rec.req.mem = (int64_t)(4 + rand() % 13) << 30;
		if (kind < 20)
			s->rec.req.fgpu_m = 0;                          /* CPU only */
		else if (kind < 80)
			s->rec.req.fgpu_m = 100 * (1 + rand() % 10);    /* 0.1 .. 1 fGPU */
		else if (gpus >= 2)
			s->rec.req.fgpu_m = 1000 * (2 + rand() % (gpus >= 4 ? 3 : 1)); /* 2..4 GPUs */
		else
			s->rec.req.fgpu_m = 1000;
	}
	/* Queue everything while holding the lock, so the scheduler's first
	 * pass sees the whole queue; the clock starts when it is released. */
	pthread_mutex_lock(&m->mu);
	uint64_t placed_before = m->placements;
	double tq = now_s();
	int rc = mgr_add_sessions(m, news, (size_t)sessions, &err);
	double queued = now_s() - tq;
	double t0 = now_s();
	pthread_mutex_unlock(&m->mu);
	if (rc < 0)
		return fail(&err);
	wait_idle(m);
	double wall = now_s() - t0;
	printf("queueing %ld sessions (one transaction): %.3f s; scheduling: %.3f s (last placing pass %lld ms)\n",
	       sessions, queued, wall, (long long)m->last_pass_ms);
	pthread_mutex_lock(&m->mu);
	uint64_t placed = m->placements - placed_before;
	/* The successor: remove a placed session, time until the queue head
	 * (the first PENDING) is SCHEDULED. Driven by the release event. */
	struct msession *victim = NULL, *head = NULL;
	for (size_t i = 0; i < m->n_sessions && !head; i++)
		if (m->sessions[i]->rec.status == SS_PENDING)
			head = m->sessions[i];
	/* A placed session whose removal frees room the head fits in: at
	 * least its CPU, memory and fGPU, with a device share as big as the
	 * head's when the head wants one device, or as many whole devices. */
	for (size_t i = 0; head && i < m->n_sessions && !victim; i++) {
		struct msession *s = m->sessions[i];
		const struct res *h = &head->rec.req;
		if (!session_status_holds(s->rec.status) || s->rec.status == SS_TERMINATING ||
		    s->rec.req.cpu_m < h->cpu_m || s->rec.req.mem < h->mem || s->rec.req.fgpu_m < h->fgpu_m)
			continue;
		bool ok = h->fgpu_m == 0;
		for (int k = 0; k < s->n_shares && !ok; k++)
			ok = h->fgpu_m <= 1000 ? s->shares[k].fgpu_m >= h->fgpu_m : s->n_shares * 1000 >= h->fgpu_m;
		if (ok)
			victim = s;
	}
	pthread_mutex_unlock(&m->mu);
	double successor_ms = -1;
	if (victim && head) {
		/* Let the dispatchers catch up so only the removal is measured. */
		for (;;) {
			pthread_mutex_lock(&m->mu);
			bool busy = m->jobs_head != NULL;
			pthread_mutex_unlock(&m->mu);
			if (!busy)
				break;
			usleep(1000);
		}
		pthread_mutex_lock(&m->mu);
		/* Make room for the head for sure: its size on the victim's node. */
		double t1 = now_s();
		mgr_delete_session(m, victim, "sched-bench");
		while (head->rec.status == SS_PENDING && victim->rec.status != SS_TERMINATED) {
			struct timespec dl;
			clock_gettime(CLOCK_MONOTONIC, &dl);
			dl.tv_sec += 5;
			if (pthread_cond_timedwait(&m->changed, &m->mu, &dl) != 0)
				break;
		}
		/* The head may still not fit in the freed room: then report the
		 * time to the removal's release, and say so. */
		while (head->rec.status == SS_PENDING) {
			struct timespec dl;
			clock_gettime(CLOCK_MONOTONIC, &dl);
			dl.tv_sec += 1;
			if (pthread_cond_timedwait(&m->changed, &m->mu, &dl) != 0)
				break;
		}
		bool started = head->rec.status != SS_PENDING;
		successor_ms = (now_s() - t1) * 1000;
		pthread_mutex_unlock(&m->mu);
		if (!started)
			successor_ms = -1;
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("%s: agents %ld x %ld GPUs, %ld sessions: %llu placed in %.3f s\n",
	       store && *store ? "PostgreSQL" : "SQLite", agents, gpus, sessions, (unsigned long long)placed, wall);
	if (successor_ms >= 0)
		printf("removal -> waiting successor SCHEDULED: %.2f ms\n", successor_ms);
	else
		printf("removal -> successor: the queue head did not fit in the freed room\n");
	printf("{\"placements_per_s\": %.0f, \"sessions_placed\": %llu, \"wall_s\": %.3f, \"peak_rss_mb\": %.1f, "
	       "\"successor_ms\": %.2f}\n",
	       wall > 0 ? (double)placed / wall : 0, (unsigned long long)placed, wall, (double)ru.ru_maxrss / 1024.0,
	       successor_ms);
	manager_close(m);
	free(news);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "sched-bench: could not remove %s\n", dir);
	return 0;
}
