/* sched/sched.c: FIFO planning with head-of-line blocking, wait reasons,
 * exact fixed-point capacity (CPU and fGPU devices), the two agent
 * selectors, and satisfiability. */
#include "sched/sched.h"
#include "testlib.h"

#include <stdlib.h>

#define MiB (1LL << 20)
#define GiB (1LL << 30)
#define PER_DEV 1000   /* 1 GPU = 1 fGPU unless a test says otherwise */

static struct sched_agent agent(const char *id, bool alive, int64_t cpu_m, int64_t mem)
{
	struct sched_agent a = {.id = id, .alive = alive,
				.capacity = {cpu_m, mem, 0}, .free = {cpu_m, mem, 0}};
	return a;
}

/* An agent with n devices of per_dev milli-fGPU each (devs provided). */
static struct sched_agent gpu_agent(const char *id, bool alive, int64_t cpu_m, int64_t mem,
				    struct sched_device *devs, size_t n, int64_t per_dev)
{
	struct sched_agent a = agent(id, alive, cpu_m, mem);
	for (size_t i = 0; i < n; i++)
		devs[i].free_m = per_dev;
	a.devs = devs;
	a.n_devs = n;
	a.capacity.fgpu_m = a.free.fgpu_m = (int64_t)n * per_dev;
	return a;
}

static struct sched_request request(const char *name, int64_t cpu_m, int64_t mem, int64_t fgpu_m)
{
	static int64_t seq;
	struct sched_request r = {.session_id = name, .name = name, .req = {cpu_m, mem, fgpu_m},
				  .user = 0, .seq = ++seq};
	return r;
}

/* One FIFO pass for a single user without limits. */
static size_t plan(const struct sched_selector_ops *sel, int64_t per_dev,
		   struct sched_agent *agents, size_t n_agents,
		   const struct sched_request *reqs, size_t n_reqs, struct sched_placement *out,
		   char (*reasons)[SCHED_REASON_MAX], ssize_t *blocked)
{
	struct sched_user users[1] = {{.id = "u"}};
	struct sched_params p = {.selector = sel, .queue = &sched_fifo, .per_device_m = per_dev};
	struct sched_world w = {.agents = agents, .n_agents = n_agents, .users = users, .n_users = 1};
	struct sched_result res = {.reasons = reasons};
	size_t n = sched_plan(&p, &w, reqs, n_reqs, out, &res);
	if (blocked)
		*blocked = res.blocked_head;
	return n;
}

TEST(fifo_places_in_order)
{
	struct sched_agent ag[1] = {agent("n1", true, 4000, 8 * GiB)};
	struct sched_request rq[3] = {request("a", 1000, 256 * MiB, 0),
				      request("b", 2000, 256 * MiB, 0),
				      request("c", 1000, 256 * MiB, 0)};
	struct sched_placement out[3];
	char reasons[3][SCHED_REASON_MAX];
	memset(reasons, 'x', sizeof(reasons));
	ssize_t blocked = 99;
	CHECK_INT(plan(&sched_concentrated, PER_DEV, ag, 1, rq, 3, out, reasons, &blocked), 3);
	CHECK_INT(blocked, -1);
	for (size_t i = 0; i < 3; i++) {
		CHECK_INT(out[i].request, i);
		CHECK_INT(out[i].agent, 0);
		CHECK_INT(out[i].n_shares, 0);
		CHECK_STR(reasons[i], "");
	}
	CHECK_INT(ag[0].free.cpu_m, 0);
	CHECK_INT(ag[0].free.mem, 8 * GiB - 768 * MiB);
	CHECK_INT(ag[0].capacity.cpu_m, 4000);
}

TEST(fifo_head_of_line_blocks)
{
	/* a (1 CPU) fits, big-b (4) does not, c (0.5) and d would fit but
	 * must not pass big-b. */
	struct sched_agent ag[2] = {agent("n1", true, 2000, 4 * GiB),
				    agent("n2", true, 1500, 2 * GiB)};
	/* n1 has 4 CPU, 2 of them in use: big-b fits there once they are
	 * free (a head no node could ever hold does not block) */
	ag[0].capacity.cpu_m = 4000;
	struct sched_request rq[4] = {request("a", 1000, 256 * MiB, 0),
				      request("big-b", 4000, 256 * MiB, 0),
				      request("c", 500, 256 * MiB, 0),
				      request("d", 100, 10 * MiB, 0)};
	struct sched_placement out[4];
	char reasons[4][SCHED_REASON_MAX];
	ssize_t blocked = -1;
	size_t n = plan(&sched_concentrated, PER_DEV, ag, 2, rq, 4, out, reasons, &blocked);
	CHECK_INT(n, 1);
	CHECK_INT(out[0].request, 0);
	CHECK_INT(blocked, 1);
	CHECK_STR(reasons[0], "");
	CHECK_CONTAINS(reasons[1], "needs 4 CPU, 256 MiB");
	CHECK_CONTAINS(reasons[1], "most free");
	/* one of the two agents is untouched: its CPU is the most free */
	int free_n1 = ag[0].free.cpu_m == 2000, free_n2 = ag[1].free.cpu_m == 1500;
	CHECK(free_n1 != free_n2);
	CHECK_CONTAINS(reasons[1], free_n1 ? "2 CPU" : "1.5 CPU");
	CHECK_CONTAINS(reasons[2], "queued behind big-b");
	CHECK_CONTAINS(reasons[3], "queued behind big-b");
	/* c and d took nothing */
	CHECK_INT(ag[0].free.cpu_m + ag[1].free.cpu_m, 2500);

	/* the same with the dispersed selector and without reasons */
	struct sched_agent ag2[2] = {agent("n1", true, 2000, 4 * GiB),
				     agent("n2", true, 1500, 2 * GiB)};
	ag2[0].capacity.cpu_m = 4000;
	CHECK_INT(plan(&sched_dispersed, PER_DEV, ag2, 2, rq, 4, out, NULL, NULL), 1);
	CHECK_INT(ag2[0].free.cpu_m + ag2[1].free.cpu_m, 2500);
}

TEST(fifo_no_alive_node)
{
	struct sched_agent ag[2] = {agent("n1", false, 8000, 16 * GiB),
				    agent("n2", false, 8000, 16 * GiB)};
	struct sched_request rq[2] = {request("a", 1000, 256 * MiB, 0),
				      request("b", 1000, 256 * MiB, 0)};
	struct sched_placement out[2];
	char reasons[2][SCHED_REASON_MAX];
	CHECK_INT(plan(&sched_concentrated, PER_DEV, ag, 2, rq, 2, out, reasons, NULL), 0);
	CHECK_CONTAINS(reasons[0], "no node is alive");
	CHECK_CONTAINS(reasons[1], "queued behind a");
	CHECK_INT(ag[0].free.cpu_m, 8000);

	/* no agents at all */
	CHECK_INT(plan(&sched_dispersed, PER_DEV, NULL, 0, rq, 2, out, reasons, NULL), 0);
	CHECK_CONTAINS(reasons[0], "no node is alive");

	/* no requests */
	CHECK_INT(plan(&sched_dispersed, PER_DEV, ag, 2, NULL, 0, out, NULL, NULL), 0);
}

TEST(fixed_point_fgpu)
{
	/* three of 0.4 fGPU on one device of 1.0: exactly two */
	struct sched_device d1[1];
	struct sched_agent ag[1] = {gpu_agent("g", true, 8000, 16 * GiB, d1, 1, 1000)};
	struct sched_request rq[3] = {request("a", 100, 16 * MiB, 400),
				      request("b", 100, 16 * MiB, 400),
				      request("c", 100, 16 * MiB, 400)};
	struct sched_placement out[3];
	char reasons[3][SCHED_REASON_MAX];
	CHECK_INT(plan(&sched_concentrated, 1000, ag, 1, rq, 3, out, reasons, NULL), 2);
	CHECK_INT(ag[0].free.fgpu_m, 200);
	CHECK_INT(d1[0].free_m, 200);
	CHECK_INT(out[0].n_shares, 1);
	CHECK_INT(out[0].shares[0].device, 0);
	CHECK_INT(out[0].shares[0].fgpu_m, 400);
	CHECK_CONTAINS(reasons[2], "needs");
	CHECK_CONTAINS(reasons[2], "0.4 fGPU");
	CHECK_CONTAINS(reasons[2], "0.2 fGPU");

	/* 1 GPU = 2 fGPU: one device of 2000, three of 1 fGPU -> two */
	struct sched_device d2[1];
	struct sched_agent ag2[1] = {gpu_agent("g", true, 8000, 16 * GiB, d2, 1, 2000)};
	struct sched_request rq2[3] = {request("a", 100, 16 * MiB, 1000),
				       request("b", 100, 16 * MiB, 1000),
				       request("c", 100, 16 * MiB, 1000)};
	CHECK_INT(plan(&sched_dispersed, 2000, ag2, 1, rq2, 3, out, NULL, NULL), 2);
	CHECK_INT(ag2[0].free.fgpu_m, 0);
	CHECK_INT(d2[0].free_m, 0);

	/* a request of 1.5 fGPU on two devices of 1: one whole + 0.5 */
	struct sched_device d3[2];
	struct sched_agent ag3[1] = {gpu_agent("g", true, 8000, 16 * GiB, d3, 2, 1000)};
	struct sched_request rq3[2] = {request("x", 100, 16 * MiB, 1500),
				       request("y", 100, 16 * MiB, 600)};
	CHECK_INT(plan(&sched_concentrated, 1000, ag3, 1, rq3, 2, out, reasons, NULL), 1);
	CHECK_INT(out[0].n_shares, 2);
	CHECK_INT(out[0].shares[0].fgpu_m + out[0].shares[1].fgpu_m, 1500);
	CHECK_INT(d3[0].free_m + d3[1].free_m, 500);
	CHECK_INT(ag3[0].free.fgpu_m, 500);
	/* 0.6 does not fit on the 0.5 left on one device */
	CHECK_CONTAINS(reasons[1], "0.6 fGPU");
}

TEST(fixed_point_cpu)
{
	struct sched_agent ag[1] = {agent("n", true, 1000, 16 * GiB)};
	struct sched_request rq[3] = {request("a", 334, 16 * MiB, 0),
				      request("b", 334, 16 * MiB, 0),
				      request("c", 334, 16 * MiB, 0)};
	struct sched_placement out[3];
	CHECK_INT(plan(&sched_concentrated, PER_DEV, ag, 1, rq, 3, out, NULL, NULL), 2);
	CHECK_INT(ag[0].free.cpu_m, 332);

	/* 1000 x 0.001 fill 1.0 exactly; the 1001st waits */
	struct sched_request *many = calloc(1001, sizeof(*many));
	struct sched_placement *out2 = calloc(1001, sizeof(*out2));
	char (*reasons)[SCHED_REASON_MAX] = calloc(1001, sizeof(*reasons));
	for (int i = 0; i < 1001; i++)
		many[i] = request(i == 1000 ? "last" : "tiny", 1, 0, 0);
	struct sched_agent ag2[1] = {agent("n", true, 1000, 16 * GiB)};
	CHECK_INT(plan(&sched_concentrated, PER_DEV, ag2, 1, many, 1000, out2, reasons, NULL), 1000);
	CHECK_INT(ag2[0].free.cpu_m, 0);
	CHECK_INT(ag2[0].free.mem, 16 * GiB);
	struct sched_agent ag3[1] = {agent("n", true, 1000, 16 * GiB)};
	CHECK_INT(plan(&sched_dispersed, PER_DEV, ag3, 1, many, 1001, out2, reasons, NULL), 1000);
	CHECK_INT(ag3[0].free.cpu_m, 0);
	CHECK_CONTAINS(reasons[1000], "needs 0.001 CPU");
	CHECK_CONTAINS(reasons[1000], "0 CPU");
	free(many);
	free(out2);
	free(reasons);
}

/* The agent a selector picks for one request (agents are not changed):
 * one placement of a one-request plan. */
static ssize_t pick(const struct sched_selector_ops *sel, const struct sched_agent *ag, size_t n,
		    const struct res *req)
{
	struct sched_agent copy[8];
	struct sched_device devs[8][SCHED_MAX_DEVICES];
	for (size_t i = 0; i < n; i++) {
		copy[i] = ag[i];
		if (ag[i].n_devs) {
			memcpy(devs[i], ag[i].devs, ag[i].n_devs * sizeof(struct sched_device));
			copy[i].devs = devs[i];
		}
	}
	struct sched_request r = {.session_id = "x", .name = "x", .req = *req};
	struct sched_placement out[1];
	return plan(sel, PER_DEV, copy, n, &r, 1, out, NULL, NULL) == 1 ? (ssize_t)out[0].agent : -1;
}

TEST(selectors)
{
	/* n-half is half used, n-empty is empty, n-dead is the fullest but dead */
	struct sched_agent ag[3] = {agent("n-empty", true, 8000, 16 * GiB),
				    agent("n-half", true, 8000, 16 * GiB),
				    agent("n-dead", false, 8000, 16 * GiB)};
	ag[1].free = (struct res){4000, 8 * GiB, 0};
	ag[2].free = (struct res){1000, 2 * GiB, 0};
	struct res req = {1000, 1 * GiB, 0};
	CHECK_INT(pick(&sched_concentrated, ag, 3, &req), 1);
	CHECK_INT(pick(&sched_dispersed, ag, 3, &req), 0);

	/* the fuller one cannot hold it: both pick the one that fits */
	struct res big = {6000, 1 * GiB, 0};
	CHECK_INT(pick(&sched_concentrated, ag, 3, &big), 0);
	CHECK_INT(pick(&sched_dispersed, ag, 3, &big), 0);

	/* nothing fits */
	struct res huge = {9000, 1 * GiB, 0};
	CHECK_INT(pick(&sched_concentrated, ag, 3, &huge), -1);
	CHECK_INT(pick(&sched_dispersed, ag, 3, &huge), -1);

	/* the scarcest dimension decides: n-a has CPU left but little memory */
	struct sched_agent ag2[2] = {agent("n-a", true, 8000, 16 * GiB),
				     agent("n-b", true, 8000, 16 * GiB)};
	ag2[0].free = (struct res){7000, 3 * GiB, 0};
	ag2[1].free = (struct res){3000, 12 * GiB, 0};
	struct res r2 = {500, 1 * GiB, 0};
	CHECK_INT(pick(&sched_concentrated, ag2, 2, &r2), 0);
	CHECK_INT(pick(&sched_dispersed, ag2, 2, &r2), 1);

	/* a dead agent is never chosen, even when it is the only fit */
	struct sched_device dd[8];
	struct sched_agent ag3[2] = {gpu_agent("dead", false, 64000, 256 * GiB, dd, 8, PER_DEV),
				     agent("small", true, 1000, 1 * GiB)};
	struct res gpu = {1000, 1 * GiB, 1000};
	CHECK_INT(pick(&sched_concentrated, ag3, 2, &gpu), -1);
	CHECK_INT(pick(&sched_dispersed, ag3, 2, &gpu), -1);
	struct res cpu = {500, 256 * MiB, 0};
	CHECK_INT(pick(&sched_concentrated, ag3, 2, &cpu), 1);
	CHECK_INT(pick(&sched_dispersed, ag3, 2, &cpu), 1);

	/* planning packs with concentrated, spreads with dispersed */
	struct sched_agent p1[2] = {agent("x", true, 4000, 8 * GiB), agent("y", true, 4000, 8 * GiB)};
	struct sched_request rq[2] = {request("a", 1000, 1 * GiB, 0), request("b", 1000, 1 * GiB, 0)};
	struct sched_placement out[2];
	CHECK_INT(plan(&sched_concentrated, PER_DEV, p1, 2, rq, 2, out, NULL, NULL), 2);
	CHECK_INT(out[0].agent, out[1].agent);
	struct sched_agent p2[2] = {agent("x", true, 4000, 8 * GiB), agent("y", true, 4000, 8 * GiB)};
	CHECK_INT(plan(&sched_dispersed, PER_DEV, p2, 2, rq, 2, out, NULL, NULL), 2);
	CHECK(out[0].agent != out[1].agent);
}

TEST(selector_find)
{
	CHECK(sched_selector_find("concentrated") == &sched_concentrated);
	CHECK(sched_selector_find("dispersed") == &sched_dispersed);
	CHECK(sched_selector_find("nope") == NULL);
	CHECK(sched_selector_find("") == NULL);
	CHECK(sched_selector_find("Concentrated") == NULL);
	CHECK_STR(sched_concentrated.name, "concentrated");
	CHECK_STR(sched_dispersed.name, "dispersed");
	CHECK(sched_queue_find("fifo") == &sched_fifo);
	CHECK(sched_queue_find("nope") == NULL);
}

TEST(satisfiable)
{
	struct sched_device dd[1];
	struct sched_agent ag[2] = {agent("small", true, 2000, 4 * GiB),
				    gpu_agent("gpu-dead", false, 8000, 32 * GiB, dd, 1, 2000)};
	/* everything used up: satisfiable looks at capacity, not free */
	ag[0].free = (struct res){0, 0, 0};
	dd[0].free_m = 0;
	ag[1].free = (struct res){0, 0, 0};
	struct res a = {2000, 4 * GiB, 0};
	CHECK(sched_satisfiable(ag, 2, &a, 2000));
	struct res g = {1000, 1 * GiB, 2000};   /* only the dead node could */
	CHECK(sched_satisfiable(ag, 2, &g, 2000));
	struct res g2 = {1000, 1 * GiB, 2001};
	CHECK(!sched_satisfiable(ag, 2, &g2, 2000));
	struct res c = {8001, 1 * GiB, 0};
	CHECK(!sched_satisfiable(ag, 2, &c, 2000));
	/* no single node has both the CPU of one and the memory of the other */
	struct res mix = {8000, 33 * GiB, 0};
	CHECK(!sched_satisfiable(ag, 2, &mix, 2000));
	CHECK(!sched_satisfiable(NULL, 0, &a, 2000));
}

/* The positions a pass reports (the queue view's "position"): higher
 * priority first, creation order within a level, and every request has
 * one, placed, blocked or queued behind the blocker alike. */
TEST(queue_order_positions)
{
	struct sched_agent ag[1] = {agent("n1", true, 2000, 4 * GiB)};
	struct sched_request rq[4] = {request("a", 1000, 256 * MiB, 0),
				      request("big", 3000, 256 * MiB, 0),
				      request("urgent", 1000, 256 * MiB, 0),
				      request("c", 500, 256 * MiB, 0)};
	ag[0].capacity.cpu_m = 4000;   /* big fits once the node is empty */
	rq[2].priority = 5;
	struct sched_user users[1] = {{.id = "u"}};
	struct sched_params p = {.selector = &sched_concentrated, .queue = &sched_fifo, .per_device_m = PER_DEV};
	struct sched_world w = {.agents = ag, .n_agents = 1, .users = users, .n_users = 1};
	struct sched_placement out[4];
	char reasons[4][SCHED_REASON_MAX];
	size_t order[4] = {9, 9, 9, 9};
	struct sched_result res = {.reasons = reasons, .order = order};
	CHECK_INT(sched_plan(&p, &w, rq, 4, out, &res), 2);
	CHECK_INT(order[2], 1);   /* urgent: the highest priority */
	CHECK_INT(order[0], 2);
	CHECK_INT(order[1], 3);   /* big blocks the head of its level */
	CHECK_INT(order[3], 4);   /* c waits behind it, still with a place */
	CHECK_CONTAINS(reasons[3], "queued behind big");
	/* Without order the pass is the same (NULL is allowed). */
	struct sched_agent ag2[1] = {agent("n1", true, 2000, 4 * GiB)};
	ag2[0].capacity.cpu_m = 4000;
	w.agents = ag2;
	struct sched_result res2 = {.reasons = reasons};
	CHECK_INT(sched_plan(&p, &w, rq, 4, out, &res2), 2);
	/* One level only (no priorities): positions are creation order. */
	struct sched_agent ag3[1] = {agent("n1", true, 8000, 4 * GiB)};
	w.agents = ag3;
	rq[2].priority = 0;
	CHECK_INT(sched_plan(&p, &w, rq, 4, out, &res), 4);
	for (size_t i = 0; i < 4; i++)
		CHECK_INT(order[i], i + 1);
}

int main(void)
{
	RUN(queue_order_positions);
	RUN(fifo_places_in_order);
	RUN(fifo_head_of_line_blocks);
	RUN(fifo_no_alive_node);
	RUN(fixed_point_fgpu);
	RUN(fixed_point_cpu);
	RUN(selectors);
	RUN(selector_find);
	RUN(satisfiable);
	return testlib_done();
}
