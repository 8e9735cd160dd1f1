/* sched/sched.c: device-level fGPU allocation (sched_gpu_fit), exact
 * arithmetic across devices, the lifo and drf queue policies,
 * fifo_skip_after, per-user limits, selectors over GPU agents and
 * satisfiability with devices. FIFO basics live in test_sched.c. */
#include "sched/sched.h"
#include "testlib.h"

#include <stdlib.h>

#define MiB (1LL << 20)
#define GiB (1LL << 30)

/* ---------- helpers ---------- */

static struct sched_agent cpu_agent(const char *id, bool alive, int64_t cpu_m, int64_t mem)
{
	struct sched_agent a = {.id = id, .alive = alive,
				.capacity = {cpu_m, mem, 0}, .free = {cpu_m, mem, 0}};
	return a;
}

/* n devices of per_dev each, all free (devs is the caller's array). */
static struct sched_agent dev_agent(const char *id, bool alive, struct sched_device *devs, size_t n,
				    int64_t per_dev)
{
	struct sched_agent a = cpu_agent(id, alive, 16000, 64 * GiB);
	for (size_t i = 0; i < n; i++)
		devs[i].free_m = per_dev;
	a.devs = devs;
	a.n_devs = n;
	a.capacity.fgpu_m = a.free.fgpu_m = (int64_t)n * per_dev;
	return a;
}

/* Marks device d as having used_m given out (keeps the agent's total in step). */
static void use_dev(struct sched_agent *a, size_t d, int64_t used_m)
{
	a->devs[d].free_m -= used_m;
	a->free.fgpu_m -= used_m;
}

static struct sched_request req_of(const char *name, size_t user, int64_t cpu_m, int64_t mem,
				   int64_t fgpu_m)
{
	static int64_t seq;
	struct sched_request r = {.session_id = name, .name = name, .req = {cpu_m, mem, fgpu_m},
				  .user = user, .seq = ++seq};
	return r;
}

static struct sched_request gpu_req(const char *name, int64_t fgpu_m)
{
	return req_of(name, 0, 100, 16 * MiB, fgpu_m);
}

static size_t plan_with(const struct sched_selector_ops *sel, const struct sched_queue_ops *q,
			int64_t per_dev, int skip, struct sched_agent *ag, size_t na,
			struct sched_user *users, const struct sched_request *rq, size_t nr,
			struct sched_placement *out, char (*reasons)[SCHED_REASON_MAX], ssize_t *blocked)
{
	struct sched_params p = {.selector = sel, .queue = q, .per_device_m = per_dev,
				 .fifo_skip_after = skip};
	/* Users: as many as the requests name (the tests' arrays are that long). */
	size_t nu = 1;
	for (size_t i = 0; i < nr; i++)
		if (rq[i].user + 1 > nu)
			nu = rq[i].user + 1;
	struct sched_world w = {.agents = ag, .n_agents = na, .users = users, .n_users = nu};
	struct sched_result res = {.reasons = reasons};
	size_t n = sched_plan(&p, &w, rq, nr, out, &res);
	if (blocked)
		*blocked = res.blocked_head;
	return n;
}

static int64_t sum_shares(const struct sched_gpu_share *s, size_t n)
{
	int64_t t = 0;
	for (size_t i = 0; i < n; i++)
		t += s[i].fgpu_m;
	return t;
}

/* ---------- sched_gpu_fit ---------- */

TEST(fit_small_request_on_one_device)
{
	struct sched_device d[3] = {{1000}, {1000}, {1000}};
	struct sched_gpu_share sh[SCHED_MAX_DEVICES];
	size_t n = 99;
	CHECK(sched_gpu_fit(d, 3, 500, 1000, true, sh, &n));
	CHECK_INT(n, 1);
	CHECK_INT(sh[0].fgpu_m, 500);
	CHECK(sh[0].device < 3);
	n = 99;
	CHECK(sched_gpu_fit(d, 3, 500, 1000, false, sh, &n));
	CHECK_INT(n, 1);
	CHECK_INT(sh[0].fgpu_m, 500);
	/* exactly one device's worth is still one share */
	n = 99;
	CHECK(sched_gpu_fit(d, 3, 1000, 1000, true, sh, &n));
	CHECK_INT(n, 1);
	CHECK_INT(sh[0].fgpu_m, 1000);
	/* the devices themselves are not changed by a fit */
	CHECK_INT(d[0].free_m + d[1].free_m + d[2].free_m, 3000);
	/* fit test only: shares and n_shares may be NULL */
	CHECK(sched_gpu_fit(d, 3, 700, 1000, true, NULL, NULL));
	CHECK(!sched_gpu_fit(d, 3, 3001, 1000, true, NULL, NULL));
}

TEST(fit_concentrated_fullest_dispersed_emptiest)
{
	/* free: 1.0, 0.3 (too little), 0.7, 0.6 */
	struct sched_device d[4] = {{1000}, {300}, {700}, {600}};
	struct sched_gpu_share sh[SCHED_MAX_DEVICES];
	size_t n = 0;
	CHECK(sched_gpu_fit(d, 4, 500, 1000, true, sh, &n));
	CHECK_INT(n, 1);
	CHECK_INT(sh[0].device, 3);     /* fullest that fits: 0.6 free */
	CHECK_INT(sh[0].fgpu_m, 500);
	CHECK(sched_gpu_fit(d, 4, 500, 1000, false, sh, &n));
	CHECK_INT(n, 1);
	CHECK_INT(sh[0].device, 0);     /* emptiest */
	/* 0.65 skips 0.6 when packing */
	CHECK(sched_gpu_fit(d, 4, 650, 1000, true, sh, &n));
	CHECK_INT(sh[0].device, 2);
	/* 0.3 packs onto the device with exactly 0.3 left */
	CHECK(sched_gpu_fit(d, 4, 300, 1000, true, sh, &n));
	CHECK_INT(sh[0].device, 1);
	/* dispersed with the emptiest not first */
	struct sched_device e[3] = {{200}, {900}, {400}};
	CHECK(sched_gpu_fit(e, 3, 100, 1000, false, sh, &n));
	CHECK_INT(sh[0].device, 1);
	CHECK(sched_gpu_fit(e, 3, 100, 1000, true, sh, &n));
	CHECK_INT(sh[0].device, 0);
}

TEST(fit_fragmentation)
{
	/* 1.2 free in total, but no device has 1.0 */
	struct sched_device d[2] = {{600}, {600}};
	CHECK(!sched_gpu_fit(d, 2, 1000, 1000, true, NULL, NULL));
	CHECK(!sched_gpu_fit(d, 2, 1000, 1000, false, NULL, NULL));
	/* nor 1.2 (needs a whole free device + 0.2) */
	CHECK(!sched_gpu_fit(d, 2, 1200, 1000, true, NULL, NULL));
	CHECK(!sched_gpu_fit(d, 2, 700, 1000, true, NULL, NULL));
	CHECK(sched_gpu_fit(d, 2, 600, 1000, true, NULL, NULL));

	/* the same through the planner: the reason names the one-device need */
	struct sched_device dv[2];
	struct sched_agent ag[1] = {dev_agent("g", true, dv, 2, 1000)};
	use_dev(&ag[0], 0, 400);
	use_dev(&ag[0], 1, 400);
	struct sched_user users[1] = {{.id = "u"}};
	struct sched_request rq[1] = {gpu_req("one", 1000)};
	struct sched_placement out[1];
	char reasons[1][SCHED_REASON_MAX];
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag, 1, users, rq, 1, out,
			    reasons, NULL), 0);
	CHECK_CONTAINS(reasons[0], "needs 1 fGPU on one device");
	CHECK_CONTAINS(reasons[0], "0.6 fGPU");
	CHECK_INT(ag[0].free.fgpu_m, 1200);
}

TEST(fit_multi_device_takes_whole_free_devices)
{
	/* device 0 is partially used; 2.5 = two whole FREE devices + 0.5 */
	struct sched_device d[4] = {{900}, {1000}, {1000}, {1000}};
	struct sched_gpu_share sh[SCHED_MAX_DEVICES];
	size_t n = 0;
	for (int pack = 0; pack <= 1; pack++) {
		CHECK(sched_gpu_fit(d, 4, 2500, 1000, pack, sh, &n));
		CHECK_INT(n, 3);
		CHECK_INT(sum_shares(sh, n), 2500);
		int whole = 0, part = 0;
		bool seen[4] = {0};
		for (size_t i = 0; i < n; i++) {
			CHECK(sh[i].device < 4);
			if (sh[i].device >= 4)
				continue;
			CHECK(!seen[sh[i].device]);   /* distinct devices */
			seen[sh[i].device] = true;
			if (sh[i].fgpu_m == 1000) {
				whole++;
				/* never the partially used device as a whole one */
				CHECK_INT(d[sh[i].device].free_m, 1000);
				CHECK(sh[i].device != 0);
			} else {
				part++;
				CHECK_INT(sh[i].fgpu_m, 500);
				/* pack: the 0.9 device; disperse: a free one */
				CHECK_INT(sh[i].device, pack ? 0 : 3);
			}
		}
		CHECK_INT(whole, 2);
		CHECK_INT(part, 1);
	}

	/* only one whole free device: 2.5 and 2.0 do not fit */
	struct sched_device e[3] = {{900}, {1000}, {900}};
	CHECK(!sched_gpu_fit(e, 3, 2500, 1000, true, NULL, NULL));
	CHECK(!sched_gpu_fit(e, 3, 2000, 1000, false, NULL, NULL));
	/* 1.5 does: the whole free one + 0.5 on a partial one */
	CHECK(sched_gpu_fit(e, 3, 1500, 1000, true, sh, &n));
	CHECK_INT(n, 2);
	CHECK_INT(sh[0].device, 1);
	CHECK_INT(sh[0].fgpu_m, 1000);
	CHECK(sh[1].device == 0 || sh[1].device == 2);
	CHECK_INT(sh[1].fgpu_m, 500);

	/* the same through the planner: the reason counts whole free devices */
	struct sched_device dv[3];
	struct sched_agent ag[1] = {dev_agent("g", true, dv, 3, 1000)};
	use_dev(&ag[0], 0, 100);
	use_dev(&ag[0], 2, 100);
	struct sched_user users[1] = {{.id = "u"}};
	struct sched_request rq[2] = {gpu_req("two-and-a-half", 2500), gpu_req("one-and-a-half", 1500)};
	struct sched_placement out[2];
	char reasons[2][SCHED_REASON_MAX];
	CHECK_INT(plan_with(&sched_concentrated, &sched_drf, 1000, 0, ag, 1, users, rq, 2, out,
			    reasons, NULL), 1);
	CHECK_INT(out[0].request, 1);
	CHECK_INT(out[0].n_shares, 2);
	CHECK_INT(dv[1].free_m, 0);
	CHECK_INT(dv[0].free_m + dv[2].free_m, 1300);
	CHECK_CONTAINS(reasons[0], "needs 2.5 fGPU = 2 whole free devices + 0.5 fGPU on one node");
	CHECK_CONTAINS(reasons[0], "the most whole free devices on a node is 1");

	/* whole devices and nothing partial left: 2.5 on 2 free + nothing */
	struct sched_device f[2] = {{1000}, {1000}};
	CHECK(!sched_gpu_fit(f, 2, 2500, 1000, true, NULL, NULL));
	CHECK(sched_gpu_fit(f, 2, 2000, 1000, true, sh, &n));
	CHECK_INT(n, 2);
	CHECK_INT(sum_shares(sh, n), 2000);
	CHECK(sh[0].device != sh[1].device);
}

TEST(fit_three_devices_one_partial)
{
	struct sched_gpu_share sh[SCHED_MAX_DEVICES];
	size_t n = 0;
	/* two fully free: 2.0 fits on exactly those */
	struct sched_device d[3] = {{1000}, {999}, {1000}};
	CHECK(sched_gpu_fit(d, 3, 2000, 1000, true, sh, &n));
	CHECK_INT(n, 2);
	CHECK_INT(sh[0].device, 0);
	CHECK_INT(sh[1].device, 2);
	CHECK_INT(sh[0].fgpu_m, 1000);
	CHECK_INT(sh[1].fgpu_m, 1000);
	CHECK(sched_gpu_fit(d, 3, 2000, 1000, false, NULL, NULL));
	/* only one fully free: 2.0 does not fit although 2.998 is free */
	struct sched_device e[3] = {{1000}, {999}, {999}};
	CHECK(!sched_gpu_fit(e, 3, 2000, 1000, true, NULL, NULL));
	CHECK(!sched_gpu_fit(e, 3, 2000, 1000, false, NULL, NULL));
	/* a 0.001 used device is not whole */
	struct sched_device g[2] = {{1000}, {999}};
	CHECK(!sched_gpu_fit(g, 2, 2000, 1000, true, NULL, NULL));
}

TEST(fit_edge_counts)
{
	struct sched_device d[2] = {{1000}, {1000}};
	struct sched_gpu_share sh[SCHED_MAX_DEVICES];
	size_t n = 99;
	/* more whole devices than there are */
	CHECK(!sched_gpu_fit(d, 2, 3000, 1000, true, sh, &n));
	CHECK(!sched_gpu_fit(d, 2, 3000, 1000, false, NULL, NULL));
	CHECK(!sched_gpu_fit(d, 2, 17000, 1000, true, NULL, NULL));
	/* want 0: fits anywhere, no shares */
	n = 99;
	CHECK(sched_gpu_fit(d, 2, 0, 1000, true, sh, &n));
	CHECK_INT(n, 0);
	n = 99;
	CHECK(sched_gpu_fit(NULL, 0, 0, 1000, false, sh, &n));
	CHECK_INT(n, 0);
	/* no devices: any fGPU refused */
	CHECK(!sched_gpu_fit(NULL, 0, 1, 1000, true, NULL, NULL));
	/* no fGPU per device configured: refused rather than divided by 0 */
	CHECK(!sched_gpu_fit(d, 2, 500, 0, true, NULL, NULL));
}

TEST(fit_two_fgpu_per_device)
{
	/* 1 GPU = 2 fGPU: 1.0 fGPU is half a device */
	struct sched_device d[2] = {{2000}, {2000}};
	struct sched_gpu_share sh[SCHED_MAX_DEVICES];
	size_t n = 0;
	CHECK(sched_gpu_fit(d, 2, 1000, 2000, true, sh, &n));
	CHECK_INT(n, 1);
	CHECK_INT(sh[0].fgpu_m, 1000);
	/* 2.0 fGPU is one whole device, one share */
	CHECK(sched_gpu_fit(d, 2, 2000, 2000, true, sh, &n));
	CHECK_INT(n, 1);
	CHECK_INT(sh[0].fgpu_m, 2000);
	/* 3.0 fGPU: one whole device + half of the other */
	CHECK(sched_gpu_fit(d, 2, 3000, 2000, true, sh, &n));
	CHECK_INT(n, 2);
	CHECK_INT(sh[0].fgpu_m, 2000);
	CHECK_INT(sh[1].fgpu_m, 1000);
	CHECK(sh[0].device != sh[1].device);
	/* two halves used on one device: the other still takes 1.0 + 1.0 */
	struct sched_device e[2] = {{1000}, {2000}};
	CHECK(sched_gpu_fit(e, 2, 1000, 2000, true, sh, &n));
	CHECK_INT(sh[0].device, 0);
	/* 3.0: the free device whole + 1.0 on the half-used one */
	CHECK(sched_gpu_fit(e, 2, 3000, 2000, true, sh, &n));
	CHECK_INT(n, 2);
	CHECK_INT(sh[0].device, 1);
	CHECK_INT(sh[0].fgpu_m, 2000);
	CHECK_INT(sh[1].device, 0);
	CHECK_INT(sh[1].fgpu_m, 1000);
	/* 4.0 needs both devices whole */
	CHECK(!sched_gpu_fit(e, 2, 4000, 2000, true, NULL, NULL));
	CHECK(!sched_gpu_fit(e, 2, 3001, 2000, true, NULL, NULL));
}

/* ---------- exact arithmetic across devices ---------- */

TEST(exact_three_of_0_4_dispersed)
{
	struct sched_device dv[1];
	struct sched_agent ag[1] = {dev_agent("g", true, dv, 1, 1000)};
	struct sched_user users[1] = {{.id = "u"}};
	struct sched_request rq[3] = {gpu_req("a", 400), gpu_req("b", 400), gpu_req("c", 400)};
	struct sched_placement out[3];
	char reasons[3][SCHED_REASON_MAX];
	ssize_t blocked = 99;
	CHECK_INT(plan_with(&sched_dispersed, &sched_fifo, 1000, 0, ag, 1, users, rq, 3, out,
			    reasons, &blocked), 2);
	CHECK_INT(dv[0].free_m, 200);
	CHECK_INT(ag[0].free.fgpu_m, 200);
	CHECK_INT(blocked, 2);
	CHECK_CONTAINS(reasons[2], "needs 0.4 fGPU on one device");
	CHECK_CONTAINS(reasons[2], "0.2 fGPU");
	CHECK_INT(users[0].used.fgpu_m, 800);
	CHECK_INT(users[0].sessions, 2);
}

TEST(exact_ten_of_0_1)
{
	struct sched_device dv[1];
	struct sched_agent ag[1] = {dev_agent("g", true, dv, 1, 1000)};
	struct sched_user users[1] = {{.id = "u"}};
	struct sched_request rq[11];
	for (int i = 0; i < 11; i++)
		rq[i] = gpu_req(i == 10 ? "eleventh" : "tenth", 100);
	struct sched_placement out[11];
	char reasons[11][SCHED_REASON_MAX];
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag, 1, users, rq, 10, out,
			    reasons, NULL), 10);
	CHECK_INT(dv[0].free_m, 0);
	CHECK_INT(ag[0].free.fgpu_m, 0);
	for (int i = 0; i < 10; i++) {
		CHECK_INT(out[i].n_shares, 1);
		CHECK_INT(out[i].shares[0].fgpu_m, 100);
	}
	/* the 11th does not fit */
	struct sched_device dv2[1];
	struct sched_agent ag2[1] = {dev_agent("g", true, dv2, 1, 1000)};
	struct sched_user users2[1] = {{.id = "u"}};
	CHECK_INT(plan_with(&sched_dispersed, &sched_fifo, 1000, 0, ag2, 1, users2, rq, 11, out,
			    reasons, NULL), 10);
	CHECK_INT(dv2[0].free_m, 0);
	CHECK_CONTAINS(reasons[10], "needs 0.1 fGPU on one device");
	CHECK_CONTAINS(reasons[10], "is 0 fGPU");
}

TEST(exact_five_of_0_4_on_two_devices)
{
	for (int s = 0; s < 2; s++) {
		const struct sched_selector_ops *sel = s ? &sched_dispersed : &sched_concentrated;
		struct sched_device dv[2];
		struct sched_agent ag[1] = {dev_agent("g", true, dv, 2, 1000)};
		struct sched_user users[1] = {{.id = "u"}};
		struct sched_request rq[5];
		for (int i = 0; i < 5; i++)
			rq[i] = gpu_req(i == 4 ? "fifth" : "r", 400);
		struct sched_placement out[5];
		char reasons[5][SCHED_REASON_MAX];
		ssize_t blocked = -1;
		CHECK_INT(plan_with(sel, &sched_fifo, 1000, 0, ag, 1, users, rq, 5, out, reasons,
				    &blocked), 4);
		CHECK_INT(dv[0].free_m, 200);
		CHECK_INT(dv[1].free_m, 200);
		CHECK_INT(ag[0].free.fgpu_m, 400);
		int per_dev[2] = {0, 0};
		for (int i = 0; i < 4; i++) {
			CHECK_INT(out[i].n_shares, 1);
			CHECK_INT(out[i].shares[0].fgpu_m, 400);
			if (out[i].shares[0].device < 2)
				per_dev[out[i].shares[0].device]++;
		}
		CHECK_INT(per_dev[0], 2);
		CHECK_INT(per_dev[1], 2);
		CHECK_INT(blocked, 4);
		CHECK_CONTAINS(reasons[4], "needs 0.4 fGPU on one device");
		CHECK_CONTAINS(reasons[4], "0.2 fGPU");
	}
}

/* ---------- queue policies ---------- */

TEST(lifo_newest_first)
{
	struct sched_agent ag[1] = {cpu_agent("n", true, 2000, 8 * GiB)};
	struct sched_user users[1] = {{.id = "u"}};
	struct sched_request rq[3] = {req_of("old", 0, 1000, 1 * GiB, 0),
				      req_of("mid", 0, 1000, 1 * GiB, 0),
				      req_of("new", 0, 1000, 1 * GiB, 0)};
	struct sched_placement out[3];
	char reasons[3][SCHED_REASON_MAX];
	ssize_t blocked = 99;
	CHECK_INT(plan_with(&sched_concentrated, &sched_lifo, 1000, 0, ag, 1, users, rq, 3, out,
			    reasons, &blocked), 2);
	CHECK_INT(out[0].request, 2);
	CHECK_INT(out[1].request, 1);
	CHECK_INT(blocked, 0);
	CHECK_STR(reasons[2], "");
	CHECK_STR(reasons[1], "");
	CHECK_CONTAINS(reasons[0], "needs 1 CPU");
}

TEST(lifo_blocks_behind_newest)
{
	struct sched_agent ag[1] = {cpu_agent("n", true, 4000, 8 * GiB)};
	ag[0].capacity.cpu_m = 8000;   /* half in use: huge fits once it is free */
	struct sched_user users[1] = {{.id = "u"}};
	struct sched_request rq[3] = {req_of("a", 0, 1000, 1 * GiB, 0),
				      req_of("b", 0, 1000, 1 * GiB, 0),
				      req_of("huge", 0, 8000, 1 * GiB, 0)};
	struct sched_placement out[3];
	char reasons[3][SCHED_REASON_MAX];
	ssize_t blocked = -1;
	CHECK_INT(plan_with(&sched_concentrated, &sched_lifo, 1000, 0, ag, 1, users, rq, 3, out,
			    reasons, &blocked), 0);
	CHECK_INT(blocked, 2);
	CHECK_CONTAINS(reasons[2], "needs 8 CPU");
	CHECK_CONTAINS(reasons[0], "queued behind huge");
	CHECK_CONTAINS(reasons[0], "last in, first out");
	CHECK_CONTAINS(reasons[1], "queued behind huge");
	CHECK_INT(ag[0].free.cpu_m, 4000);
	CHECK(sched_lifo.blocking);
}

TEST(drf_smallest_dominant_share_first)
{
	/* cluster: 8 CPU; A holds 4 of them; 1 CPU left free */
	struct sched_agent ag[1] = {cpu_agent("n", true, 8000, 32 * GiB)};
	ag[0].free = (struct res){1000, 28 * GiB, 0};
	struct sched_user users[2] = {{.id = "A", .used = {4000, 1 * GiB, 0}, .sessions = 1},
				      {.id = "B", .used = {2000, 1 * GiB, 0}, .sessions = 1}};
	struct sched_request rq[2] = {req_of("a-older", 0, 1000, 1 * GiB, 0),
				      req_of("b-newer", 1, 1000, 1 * GiB, 0)};
	struct sched_placement out[2];
	char reasons[2][SCHED_REASON_MAX];
	ssize_t blocked = 99;
	CHECK_INT(plan_with(&sched_concentrated, &sched_drf, 1000, 0, ag, 1, users, rq, 2, out,
			    reasons, &blocked), 1);
	CHECK_INT(out[0].request, 1);
	CHECK_STR(reasons[1], "");
	CHECK_CONTAINS(reasons[0], "needs 1 CPU");
	CHECK_INT(blocked, -1);
	CHECK_INT(users[1].used.cpu_m, 3000);
	CHECK_INT(users[0].used.cpu_m, 4000);

	/* with room for both, B still goes first, then A */
	struct sched_agent ag2[1] = {cpu_agent("n", true, 8000, 32 * GiB)};
	ag2[0].free = (struct res){2000, 28 * GiB, 0};
	struct sched_user users2[2] = {{.id = "A", .used = {4000, 1 * GiB, 0}},
				       {.id = "B", .used = {2000, 1 * GiB, 0}}};
	CHECK_INT(plan_with(&sched_dispersed, &sched_drf, 1000, 0, ag2, 1, users2, rq, 2, out,
			    NULL, NULL), 2);
	CHECK_INT(out[0].request, 1);
	CHECK_INT(out[1].request, 0);

	/* the dominant share counts fGPU too: A holds 1 of 2 devices */
	struct sched_device dv[2];
	struct sched_agent ag3[1] = {dev_agent("g", true, dv, 2, 1000)};
	use_dev(&ag3[0], 0, 1000);
	use_dev(&ag3[0], 1, 500);
	struct sched_user users3[2] = {{.id = "A", .used = {100, 16 * MiB, 1000}},
				       {.id = "B", .used = {100, 16 * MiB, 0}}};
	struct sched_request rq3[2] = {req_of("a-gpu", 0, 100, 16 * MiB, 500),
				       req_of("b-gpu", 1, 100, 16 * MiB, 500)};
	CHECK_INT(plan_with(&sched_concentrated, &sched_drf, 1000, 0, ag3, 1, users3, rq3, 2, out,
			    reasons, NULL), 1);
	CHECK_INT(out[0].request, 1);
	CHECK_CONTAINS(reasons[0], "needs 0.5 fGPU on one device");
}

TEST(drf_does_not_block)
{
	CHECK(!sched_drf.blocking);
	struct sched_agent ag[1] = {cpu_agent("n", true, 2000, 8 * GiB)};
	struct sched_user users[1] = {{.id = "u"}};
	struct sched_request rq[3] = {req_of("big", 0, 4000, 1 * GiB, 0),
				      req_of("small", 0, 500, 1 * GiB, 0),
				      req_of("small2", 0, 500, 1 * GiB, 0)};
	struct sched_placement out[3];
	char reasons[3][SCHED_REASON_MAX];
	ssize_t blocked = 99;
	CHECK_INT(plan_with(&sched_concentrated, &sched_drf, 1000, 0, ag, 1, users, rq, 3, out,
			    reasons, &blocked), 2);
	CHECK_INT(out[0].request, 1);
	CHECK_INT(out[1].request, 2);
	CHECK_INT(blocked, -1);
	CHECK_CONTAINS(reasons[0], "needs 4 CPU");
	CHECK(strstr(reasons[0], "queued behind") == NULL);
	CHECK_STR(reasons[1], "");
	CHECK_INT(ag[0].free.cpu_m, 1000);
}

/* A head that only a LOST node could hold waits for that node without
 * holding up the queue; one an alive node could hold still blocks. */
TEST(fifo_head_only_a_lost_node_can_hold)
{
	struct sched_device big_devs[4], small_devs[1];
	struct sched_request rq[2] = {gpu_req("needs-four", 4000), gpu_req("small", 500)};
	struct sched_placement out[2];
	char reasons[2][SCHED_REASON_MAX];
	ssize_t blocked = 99;
	const struct sched_queue_ops *queues[] = {&sched_fifo, &sched_lifo};
	for (size_t q = 0; q < 2; q++) {
		struct sched_agent ag[2] = {dev_agent("big", false, big_devs, 4, 1000),
					    dev_agent("small", true, small_devs, 1, 1000)};
		struct sched_user users[1] = {{.id = "u"}};
		memset(reasons, 0, sizeof(reasons));
		CHECK_INT(plan_with(&sched_concentrated, queues[q], 1000, 0, ag, 2, users, rq, 2, out,
				    reasons, &blocked), 1);
		CHECK_INT(out[0].request, 1);
		CHECK_INT(blocked, -1);
		CHECK_CONTAINS(reasons[0], "waiting for node big to return");
		CHECK_STR(reasons[1], "");
	}

	/* the alive node is busy but could hold it when free: it blocks */
	struct sched_agent ag[2] = {dev_agent("big", false, big_devs, 4, 1000),
				    dev_agent("small", true, small_devs, 1, 1000)};
	use_dev(&ag[1], 0, 800);
	struct sched_request rq2[2] = {gpu_req("head", 500), gpu_req("tiny", 100)};
	struct sched_user users[1] = {{.id = "u"}};
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag, 2, users, rq2, 2, out,
			    reasons, &blocked), 0);
	CHECK_INT(blocked, 0);
	CHECK_CONTAINS(reasons[1], "queued behind head");

	/* no node at all could hold it (nodes came back smaller): it does not
	 * block either */
	struct sched_agent small_only[1] = {dev_agent("small", true, small_devs, 1, 1000)};
	struct sched_user users2[1] = {{.id = "u"}};
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, small_only, 1, users2, rq, 2,
			    out, reasons, &blocked), 1);
	CHECK_INT(blocked, -1);
	CHECK_CONTAINS(reasons[0], "waiting for a larger node");

	/* with no node alive at all the words stay those of an empty cluster */
	ag[1].alive = false;
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag, 2, users, rq, 2, out,
			    reasons, &blocked), 0);
	CHECK_CONTAINS(reasons[0], "no node is alive");
}

/* A drained node (sched_agent.drained) gets nothing new: the request goes
 * to another node, or waits saying the node is drained; a head only the
 * drained node could hold does not block the queue. */
TEST(drained_node_gets_nothing_new)
{
	struct sched_device big_devs[4], small_devs[1];
	struct sched_placement out[2];
	char reasons[2][SCHED_REASON_MAX];
	ssize_t blocked = 99;
	struct sched_agent ag[2] = {dev_agent("big", true, big_devs, 4, 1000),
				    dev_agent("small", true, small_devs, 1, 1000)};
	ag[0].drained = true;
	struct sched_user users[1] = {{.id = "u"}};
	struct sched_request one[1] = {gpu_req("one", 500)};
	memset(reasons, 0, sizeof(reasons));
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag, 2, users, one, 1, out, reasons,
			    &blocked), 1);
	CHECK_INT(out[0].agent, 1);   /* not the drained one, though it has more free */

	/* only the drained node could hold the head: it waits, saying so,
	 * and the small one behind it is placed */
	struct sched_device big2[4], small2[1];
	struct sched_agent ag2[2] = {dev_agent("big", true, big2, 4, 1000),
				     dev_agent("small", true, small2, 1, 1000)};
	ag2[0].drained = true;
	struct sched_user users2[1] = {{.id = "u"}};
	struct sched_request rq[2] = {gpu_req("needs-four", 4000), gpu_req("small", 500)};
	memset(reasons, 0, sizeof(reasons));
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag2, 2, users2, rq, 2, out, reasons,
			    &blocked), 1);
	CHECK_INT(out[0].request, 1);
	CHECK_INT(blocked, -1);
	CHECK_CONTAINS(reasons[0], "waiting for node big: it is drained");

	/* every alive node drained: the words say so */
	struct sched_device d3[1];
	struct sched_agent only[1] = {dev_agent("solo", true, d3, 1, 1000)};
	only[0].drained = true;
	struct sched_user users3[1] = {{.id = "u"}};
	memset(reasons, 0, sizeof(reasons));
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, only, 1, users3, one, 1, out, reasons,
			    &blocked), 0);
	CHECK_CONTAINS(reasons[0], "every alive node is drained");
}

TEST(fifo_skip_after)
{
	struct sched_request rq[2] = {req_of("big-head", 0, 4000, 1 * GiB, 0),
				      req_of("small", 0, 500, 1 * GiB, 0)};
	struct sched_placement out[2];
	char reasons[2][SCHED_REASON_MAX];
	ssize_t blocked;

	/* waited 2 passes, skip after 2: the small one passes */
	rq[0].failed_passes = 2;
	/* 4 CPU, 2 in use: the head fits once they are free */
	struct sched_agent ag[1] = {cpu_agent("n", true, 2000, 8 * GiB)};
	ag[0].capacity.cpu_m = 4000;
	struct sched_user users[1] = {{.id = "u"}};
	blocked = 99;
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 2, ag, 1, users, rq, 2, out,
			    reasons, &blocked), 1);
	CHECK_INT(out[0].request, 1);
	CHECK_INT(blocked, -1);
	CHECK_CONTAINS(reasons[0], "needs 4 CPU");
	CHECK_STR(reasons[1], "");

	/* waited 1 pass only: it still blocks */
	rq[0].failed_passes = 1;
	struct sched_agent ag2[1] = {cpu_agent("n", true, 2000, 8 * GiB)};
	ag2[0].capacity.cpu_m = 4000;
	struct sched_user users2[1] = {{.id = "u"}};
	blocked = -1;
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 2, ag2, 1, users2, rq, 2, out,
			    reasons, &blocked), 0);
	CHECK_INT(blocked, 0);
	CHECK_CONTAINS(reasons[1], "queued behind big-head");
	CHECK_CONTAINS(reasons[1], "first in, first out");

	/* skip 0 = never, however long it waited */
	rq[0].failed_passes = 1000;
	struct sched_agent ag3[1] = {cpu_agent("n", true, 2000, 8 * GiB)};
	ag3[0].capacity.cpu_m = 4000;
	struct sched_user users3[1] = {{.id = "u"}};
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag3, 1, users3, rq, 2, out,
			    reasons, &blocked), 0);
	CHECK_INT(blocked, 0);
}

/* ---------- per-user limits ---------- */

TEST(limit_max_sessions)
{
	struct sched_agent ag[1] = {cpu_agent("n", true, 8000, 16 * GiB)};
	struct sched_user users[2] = {{.id = "A", .sessions = 1, .used = {1000, 1 * GiB, 0},
				       .max_sessions = 1},
				      {.id = "B"}};
	struct sched_request rq[2] = {req_of("a2", 0, 1000, 1 * GiB, 0),
				      req_of("b1", 1, 1000, 1 * GiB, 0)};
	struct sched_placement out[2];
	char reasons[2][SCHED_REASON_MAX];
	ssize_t blocked = 99;
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag, 1, users, rq, 2, out,
			    reasons, &blocked), 1);
	CHECK_INT(out[0].request, 1);
	CHECK_INT(blocked, -1);
	CHECK_CONTAINS(reasons[0], "at most 1 concurrent");
	CHECK_STR(reasons[1], "");
	CHECK_INT(users[0].sessions, 1);
	CHECK_INT(users[1].sessions, 1);

	/* within one pass: the first of two is placed, the second waits */
	struct sched_agent ag2[1] = {cpu_agent("n", true, 8000, 16 * GiB)};
	struct sched_user users2[1] = {{.id = "A", .max_sessions = 1}};
	struct sched_request rq2[2] = {req_of("x", 0, 1000, 1 * GiB, 0),
				       req_of("y", 0, 1000, 1 * GiB, 0)};
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag2, 1, users2, rq2, 2, out,
			    reasons, &blocked), 1);
	CHECK_INT(out[0].request, 0);
	CHECK_CONTAINS(reasons[1], "at most 1 concurrent sessions (1 running)");
}

TEST(limit_resources)
{
	struct sched_placement out[2];
	char reasons[2][SCHED_REASON_MAX];
	ssize_t blocked;

	/* max_fgpu 1: 0.5 in use, 0.6 more is over; B is not held up */
	struct sched_device dv[2];
	struct sched_agent ag[1] = {dev_agent("g", true, dv, 2, 1000)};
	use_dev(&ag[0], 0, 500);
	struct sched_user users[2] = {{.id = "A", .used = {100, 16 * MiB, 500}, .sessions = 1,
				       .max = {0, 0, 1000}},
				      {.id = "B"}};
	struct sched_request rq[2] = {req_of("a-gpu", 0, 100, 16 * MiB, 600),
				      req_of("b-gpu", 1, 100, 16 * MiB, 600)};
	blocked = 99;
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag, 1, users, rq, 2, out,
			    reasons, &blocked), 1);
	CHECK_INT(out[0].request, 1);
	CHECK_INT(blocked, -1);
	CHECK_CONTAINS(reasons[0], "at most 1 fGPU in total");
	CHECK_CONTAINS(reasons[0], "0.5 fGPU in use");
	/* 0.5 more reaches the limit exactly: allowed */
	rq[0].req.fgpu_m = 500;
	struct sched_device dv1[2];
	struct sched_agent ag1[1] = {dev_agent("g", true, dv1, 2, 1000)};
	struct sched_user users1[2] = {{.id = "A", .used = {100, 16 * MiB, 500}, .max = {0, 0, 1000}},
				       {.id = "B"}};
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag1, 1, users1, rq, 1, out,
			    reasons, NULL), 1);
	CHECK_INT(users1[0].used.fgpu_m, 1000);

	/* max_cpu 2: 1.5 in use, 1 more is over */
	struct sched_agent ag2[1] = {cpu_agent("n", true, 8000, 16 * GiB)};
	struct sched_user users2[2] = {{.id = "A", .used = {1500, 1 * GiB, 0}, .max = {2000, 0, 0}},
				       {.id = "B"}};
	struct sched_request rq2[2] = {req_of("a-cpu", 0, 1000, 1 * GiB, 0),
				       req_of("b-cpu", 1, 1000, 1 * GiB, 0)};
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag2, 1, users2, rq2, 2, out,
			    reasons, &blocked), 1);
	CHECK_INT(out[0].request, 1);
	CHECK_INT(blocked, -1);
	CHECK_CONTAINS(reasons[0], "at most 2 CPU in total");
	CHECK_CONTAINS(reasons[0], "1.5 in use");
	CHECK_INT(users2[0].used.cpu_m, 1500);

	/* max_mem 4 GiB: 3 GiB in use, 2 GiB more is over */
	struct sched_agent ag3[1] = {cpu_agent("n", true, 8000, 16 * GiB)};
	struct sched_user users3[2] = {{.id = "A", .used = {0, 3 * GiB, 0}, .max = {0, 4 * GiB, 0}},
				       {.id = "B"}};
	struct sched_request rq3[2] = {req_of("a-mem", 0, 100, 2 * GiB, 0),
				       req_of("b-mem", 1, 100, 2 * GiB, 0)};
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag3, 1, users3, rq3, 2, out,
			    reasons, &blocked), 1);
	CHECK_INT(out[0].request, 1);
	CHECK_INT(blocked, -1);
	CHECK_CONTAINS(reasons[0], "at most 4 GiB of memory");
	CHECK_CONTAINS(reasons[0], "3 GiB in use");

	/* a limit of 0 means none */
	struct sched_agent ag4[1] = {cpu_agent("n", true, 8000, 16 * GiB)};
	struct sched_user users4[1] = {{.id = "A", .used = {7000, 15 * GiB, 0}, .sessions = 50}};
	ag4[0].free = (struct res){1000, 1 * GiB, 0};
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag4, 1, users4, rq3, 1, out,
			    reasons, NULL), 0);   /* 2 GiB do not fit the node... */
	CHECK_CONTAINS(reasons[0], "waiting for resources");   /* ...not a policy */
}

/* ---------- selectors across GPU agents ----------
 * Through sched_plan only: the selector ops' own signature is internal. */

TEST(selectors_gpu_agents)
{
	struct sched_user users[1] = {{.id = "u"}};
	struct sched_placement out[2];
	/* agent 0 has both devices partly used (0.5 and 0.8 free); agent 1 is empty */
	for (int s = 0; s < 2; s++) {
		struct sched_device d0[2], d1[2];
		struct sched_agent ag[2] = {dev_agent("fuller", true, d0, 2, 1000),
					    dev_agent("empty", true, d1, 2, 1000)};
		use_dev(&ag[0], 0, 500);
		use_dev(&ag[0], 1, 200);
		struct sched_request rq[1] = {gpu_req("h", 500)};
		CHECK_INT(plan_with(s ? &sched_dispersed : &sched_concentrated, &sched_fifo, 1000, 0,
				    ag, 2, users, rq, 1, out, NULL, NULL), 1);
		if (!s) {
			/* concentrated: the fuller agent, onto its fullest device that fits */
			CHECK_INT(out[0].agent, 0);
			CHECK_INT(out[0].n_shares, 1);
			CHECK_INT(out[0].shares[0].device, 0);
			CHECK_INT(d0[0].free_m, 0);
			CHECK_INT(ag[0].free.fgpu_m, 800);
			CHECK_INT(ag[1].free.fgpu_m, 2000);
		} else {
			/* dispersed: the empty agent */
			CHECK_INT(out[0].agent, 1);
			CHECK_INT(out[0].n_shares, 1);
			CHECK_INT(ag[1].free.fgpu_m, 1500);
			CHECK_INT(ag[0].free.fgpu_m, 1300);
		}
	}

	/* one device per agent: dispersed spreads two halves over both agents */
	struct sched_device e0[1], e1[1];
	struct sched_agent ag2[2] = {dev_agent("x", true, e0, 1, 1000),
				     dev_agent("y", true, e1, 1, 1000)};
	struct sched_request rq2[2] = {gpu_req("p", 500), gpu_req("q", 500)};
	struct sched_user users2[1] = {{.id = "u"}};
	CHECK_INT(plan_with(&sched_dispersed, &sched_fifo, 1000, 0, ag2, 2, users2, rq2, 2, out,
			    NULL, NULL), 2);
	CHECK(out[0].agent != out[1].agent);
	CHECK_INT(e0[0].free_m, 500);
	CHECK_INT(e1[0].free_m, 500);
	/* concentrated packs them onto one device */
	struct sched_device f0[1], f1[1];
	struct sched_agent ag3[2] = {dev_agent("x", true, f0, 1, 1000),
				     dev_agent("y", true, f1, 1, 1000)};
	struct sched_user users3[1] = {{.id = "u"}};
	CHECK_INT(plan_with(&sched_concentrated, &sched_fifo, 1000, 0, ag3, 2, users3, rq2, 2, out,
			    NULL, NULL), 2);
	CHECK_INT(out[0].agent, out[1].agent);
	CHECK_INT(out[0].shares[0].device, out[1].shares[0].device);
	CHECK_INT(f0[0].free_m + f1[0].free_m, 1000);
	/* a multi-device request goes where enough whole devices are free */
	struct sched_device g0[2], g1[3];
	struct sched_agent ag4[2] = {dev_agent("two", true, g0, 2, 1000),
				     dev_agent("three", true, g1, 3, 1000)};
	use_dev(&ag4[1], 0, 100);
	use_dev(&ag4[1], 1, 100);
	struct sched_request rq4[1] = {gpu_req("big", 2000)};
	struct sched_user users4[1] = {{.id = "u"}};
	CHECK_INT(plan_with(&sched_dispersed, &sched_fifo, 1000, 0, ag4, 2, users4, rq4, 1, out,
			    NULL, NULL), 1);
	CHECK_INT(out[0].agent, 0);
	CHECK_INT(out[0].n_shares, 2);
	CHECK_INT(g0[0].free_m + g0[1].free_m, 0);
}

TEST(selectors_skip_lost_agents)
{
	/* the LOST agent is empty and would be the best fit for both policies */
	for (int s = 0; s < 2; s++) {
		const struct sched_selector_ops *sel = s ? &sched_dispersed : &sched_concentrated;
		struct sched_device dl[4], da[1];
		struct sched_agent ag[2] = {dev_agent("lost", false, dl, 4, 1000),
					    dev_agent("alive", true, da, 1, 1000)};
		struct sched_user users[1] = {{.id = "u"}};
		struct sched_request rq[2] = {gpu_req("one", 1000), gpu_req("two", 2000)};
		struct sched_placement out[2];
		char reasons[2][SCHED_REASON_MAX];
		CHECK_INT(plan_with(sel, &sched_drf, 1000, 0, ag, 2, users, rq, 2, out, reasons, NULL), 1);
		CHECK_INT(out[0].agent, 1);
		CHECK_INT(out[0].request, 0);
		for (int i = 0; i < 4; i++)
			CHECK_INT(dl[i].free_m, 1000);
		CHECK_INT(ag[0].free.fgpu_m, 4000);
		CHECK_CONTAINS(reasons[1], "needs 2 fGPU = 2 whole free devices");
		/* the lost agent's four free devices are not counted */
		CHECK_CONTAINS(reasons[1], "the most whole free devices on a node is 0");

		/* a CPU-only request is not placed on a LOST node either */
		struct sched_agent ag2[2] = {cpu_agent("lost", false, 64000, 256 * GiB),
					     cpu_agent("alive", true, 2000, 4 * GiB)};
		ag2[1].free = (struct res){1000, 1 * GiB, 0};
		struct sched_request rq2[1] = {req_of("c", 0, 500, 512 * MiB, 0)};
		struct sched_user users2[1] = {{.id = "u"}};
		CHECK_INT(plan_with(sel, &sched_fifo, 1000, 0, ag2, 2, users2, rq2, 1, out, NULL, NULL), 1);
		CHECK_INT(out[0].agent, 1);
		CHECK_INT(ag2[0].free.cpu_m, 64000);

		/* only LOST agents */
		ag[1].alive = false;
		struct sched_request rq3[1] = {gpu_req("z", 100)};
		CHECK_INT(plan_with(sel, &sched_fifo, 1000, 0, ag, 2, users, rq3, 1, out, reasons, NULL), 0);
		CHECK_CONTAINS(reasons[0], "no node is alive");
	}
}

TEST(satisfiable_with_devices)
{
	struct sched_device d1[1], d2[2];
	struct sched_agent one[1] = {dev_agent("one", true, d1, 1, 1000)};
	struct sched_agent both[2] = {dev_agent("one", true, d1, 1, 1000),
				      dev_agent("two", true, d2, 2, 1000)};
	/* every device busy: satisfiable counts them as free */
	use_dev(&both[0], 0, 1000);
	use_dev(&both[1], 0, 700);
	use_dev(&both[1], 1, 300);
	struct res r2 = {100, 16 * MiB, 2000};
	struct res r15 = {100, 16 * MiB, 1500};
	struct res r1 = {100, 16 * MiB, 1000};
	struct res r3 = {100, 16 * MiB, 3000};
	CHECK(!sched_satisfiable(one, 1, &r2, 1000));
	CHECK(!sched_satisfiable(one, 1, &r15, 1000));
	CHECK(sched_satisfiable(one, 1, &r1, 1000));
	CHECK(sched_satisfiable(both, 2, &r2, 1000));
	CHECK(sched_satisfiable(both, 2, &r15, 1000));
	CHECK(!sched_satisfiable(both, 2, &r3, 1000));
	/* 1 GPU = 2 fGPU: 2.0 is one device */
	CHECK(sched_satisfiable(one, 1, &r2, 2000));
	CHECK(!sched_satisfiable(one, 1, &r3, 2000));
	/* the two-device agent lacks the CPU: nothing else can hold 2 devices */
	both[1].capacity.cpu_m = 50;
	CHECK(!sched_satisfiable(both, 2, &r2, 1000));
	/* CPU-only agents cannot hold any fGPU */
	struct sched_agent cpu[1] = {cpu_agent("cpu", true, 64000, 256 * GiB)};
	struct res tiny = {100, 16 * MiB, 1};
	CHECK(!sched_satisfiable(cpu, 1, &tiny, 1000));
	struct res none = {100, 16 * MiB, 0};
	CHECK(sched_satisfiable(cpu, 1, &none, 1000));
}

TEST(find_by_name)
{
	CHECK(sched_queue_find("fifo") == &sched_fifo);
	CHECK(sched_queue_find("lifo") == &sched_lifo);
	CHECK(sched_queue_find("drf") == &sched_drf);
	CHECK(sched_queue_find("DRF") == NULL);
	CHECK(sched_queue_find("") == NULL);
	CHECK(sched_queue_find("fifo ") == NULL);
	CHECK_STR(sched_fifo.name, "fifo");
	CHECK_STR(sched_lifo.name, "lifo");
	CHECK_STR(sched_drf.name, "drf");
	CHECK(sched_fifo.blocking);
	CHECK(sched_selector_find("concentrated") == &sched_concentrated);
	CHECK(sched_selector_find("dispersed") == &sched_dispersed);
	CHECK(sched_selector_find("fifo") == NULL);
	CHECK(sched_queue_find("dispersed") == NULL);
	CHECK_STR(sched_concentrated.name, "concentrated");
	CHECK_STR(sched_dispersed.name, "dispersed");
}

int main(void)
{
	RUN(fit_small_request_on_one_device);
	RUN(fit_concentrated_fullest_dispersed_emptiest);
	RUN(fit_fragmentation);
	RUN(fit_multi_device_takes_whole_free_devices);
	RUN(fit_three_devices_one_partial);
	RUN(fit_edge_counts);
	RUN(fit_two_fgpu_per_device);
	RUN(exact_three_of_0_4_dispersed);
	RUN(exact_ten_of_0_1);
	RUN(exact_five_of_0_4_on_two_devices);
	RUN(lifo_newest_first);
	RUN(lifo_blocks_behind_newest);
	RUN(drf_smallest_dominant_share_first);
	RUN(drf_does_not_block);
	RUN(fifo_skip_after);
	RUN(fifo_head_only_a_lost_node_can_hold);
	RUN(drained_node_gets_nothing_new);
	RUN(limit_max_sessions);
	RUN(limit_resources);
	RUN(selectors_gpu_agents);
	RUN(selectors_skip_lost_agents);
	RUN(satisfiable_with_devices);
	RUN(find_by_name);
	return testlib_done();
}
