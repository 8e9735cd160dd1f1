/* sched-bench: scheduler throughput on an in-process cluster.
 *
 *   sched-bench --agents N --gpus-per-agent G --sessions S [--store URI]
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

int main(int argc, char **argv)
{
	long agents = 100, gpus = 8, sessions = 2000;
	const char *store = NULL;
	static const struct option opts[] = {
		{"agents", required_argument, NULL, 'a'}, {"gpus-per-agent", required_argument, NULL, 'g'},
		{"sessions", required_argument, NULL, 's'}, {"store", required_argument, NULL, 'S'},
		{"help", no_argument, NULL, 'h'}, {0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'a': agents = strtol(optarg, NULL, 10); break;
		case 'g': gpus = strtol(optarg, NULL, 10); break;
		case 's': sessions = strtol(optarg, NULL, 10); break;
		case 'S': store = optarg; break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: sched-bench --agents N --gpus-per-agent G --sessions S [--store URI]\n");
			return c == 'h' ? 0 : 2;
		}
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
	pthread_mutex_unlock(&m->mu);
	for (long i = 0; i < sessions; i++) {
		struct msession *s = calloc(1, sizeof(*s));
		news[i] = s;
		util_new_id(s->rec.id, NULL);
		snprintf(s->rec.name, sizeof(s->rec.name), "b-%ld", i);
		util_strlcpy(s->rec.owner_id, owner, sizeof(s->rec.owner_id));
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
