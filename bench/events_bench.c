/* events-bench: a manager with many RUNNING sessions and live usage
 * rounds, serving its HTTP API, for bench/events.sh (issue 30, item 4).
 *
 *   events-bench --dir DIR [--sessions N] [--period-ms P]
 *
 * A real manager (SQLite store in DIR, scheduler, dispatchers, the HTTP
 * API on a free port) with one mock node whose starts succeed at once: N
 * sessions of the admin are created and RUNNING before the API answers.
 * Then, every P ms, a round of live usage arrives for all of them, as a
 * node's "stats" event does (one sample per session, figures that change
 * each round, as real ones do), through mgr_agent_event, the path a
 * remote agent's POST /v1/agents/{id}/events takes after its body is
 * parsed. DIR/admin.conf holds the admin's endpoint and keys (as the
 * manager writes it) and DIR/user.conf those of a user who owns no
 * session. "ready" is printed to stdout when both are there; it runs
 * until SIGINT or SIGTERM. Its own CPU time is the manager's (what builds
 * the rounds is a few ms each, counted in with it: a remote agent's round
 * would be parsed from JSON at about that cost). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/util.h"
#include "manager/manager.h"
#include "manager/state.h"
#include "mock_link.h"


static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int fail(const char *what, const struct terr *err)
{
	fprintf(stderr, "events-bench: %s: %s\n", what, err->msg);
	return 1;
}

/* The number of the admin's sessions RUNNING. */
static long running(struct manager *m)
{
	long n = 0;
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n_sessions; i++)
		n += m->sessions[i]->rec.status == SS_RUNNING;
	pthread_mutex_unlock(&m->mu);
	return n;
}

/* One round of samples for every RUNNING session (round k: its figures). */
static json_t *stats_round(struct manager *m, long k)
{
	json_t *samples = json_array();
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n_sessions; i++) {
		const struct msession *s = m->sessions[i];
		if (s->rec.status != SS_RUNNING)
			continue;
		double pct = (double)((k * 7 + (long)i * 13) % 1000) / 10.0;
		json_array_append_new(samples, json_pack("{s:s,s:s,s:f,s:f,s:I,s:I,s:[],s:I,s:I,s:I,s:I,s:i}",
			"session_id", s->rec.id, "container_id", s->rec.container_id, "cpu_cores", pct / 1000.0,
			"cpu_pct", pct, "mem_bytes", (json_int_t)((8 + k % 8) << 20), "mem_limit_bytes",
			(json_int_t)(16 << 20), "gpus", "net_rx_bytes", (json_int_t)k, "net_tx_bytes", (json_int_t)k,
			"blk_read_bytes", (json_int_t)0, "blk_write_bytes", (json_int_t)0, "app_conns", 0));
	}
	pthread_mutex_unlock(&m->mu);
	return json_pack("{s:s,s:i,s:o,s:{s:f,s:I,s:[]}}", "event", "stats", "period_ms", 5000, "samples", samples,
			 "node", "cpu_cores", 1.0 + (double)(k % 10) / 10.0, "mem_bytes", (json_int_t)(1LL << 30),
			 "gpus");
}

int main(int argc, char **argv)
{
	long sessions = 1000, period_ms = 5000;
	const char *dir = NULL;
	static const struct option opts[] = {
		{"dir", required_argument, NULL, 'd'}, {"sessions", required_argument, NULL, 's'},
		{"period-ms", required_argument, NULL, 'p'}, {"help", no_argument, NULL, 'h'}, {0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 's': sessions = strtol(optarg, NULL, 10); break;
		case 'p': period_ms = strtol(optarg, NULL, 10); break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: events-bench --dir DIR [--sessions N] [--period-ms P]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (!dir || sessions < 1 || sessions > 100000 || period_ms < 100) {
		fprintf(stderr, "events-bench: need --dir, 1 <= sessions <= 100000, period-ms >= 100\n");
		return 2;
	}
	log_set_level(LOG_WARN);
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct manager_config cfg = {.data_dir = dir, .listen = "127.0.0.1:0", .dispatch_workers = 4};
	struct manager *m = NULL;
	struct terr err = {0};
	if (manager_open(&m, &cfg, &err) < 0)
		return fail("manager_open", &err);
	json_t *desc = json_pack("{s:s,s:s,s:{s:I,s:I,s:I},s:[],s:[],s:b}", "id", "bench-node", "version", "bench",
				 "capacity", "cpu_milli", (json_int_t)1000000, "mem", (json_int_t)(1LL << 40),
				 "fgpu_milli", (json_int_t)0, "containers", "gpus", "mock_gpus", true);
	int rc = mgr_agent_register(m, desc, &mock_link, NULL, true, NULL, &err);
	json_decref(desc);
	if (rc < 0)
		return fail("registering the mock node", &err);

	/* The admin's sessions, queued at once. */
	struct msession **news = calloc((size_t)sessions, sizeof(*news));
	if (!news)
		return 1;
	pthread_mutex_lock(&m->mu);
	char owner[STORE_ID_MAX];
	util_strlcpy(owner, m->users[0].id, sizeof(owner));
	pthread_mutex_unlock(&m->mu);
	for (long i = 0; i < sessions; i++) {
		struct msession *s = calloc(1, sizeof(*s));
		if (!s)
			return 1;
		news[i] = s;
		util_new_id(s->rec.id, NULL);
		snprintf(s->rec.name, sizeof(s->rec.name), "e%ld", i);
		util_strlcpy(s->rec.owner_id, owner, sizeof(s->rec.owner_id));
		util_strlcpy(s->rec.image, "bench:latest", sizeof(s->rec.image));
		s->rec.req.cpu_m = 100;
		s->rec.req.mem = 16LL << 20;
	}
	pthread_mutex_lock(&m->mu);
	rc = mgr_add_sessions(m, news, (size_t)sessions, &err);
	pthread_mutex_unlock(&m->mu);
	free(news);
	if (rc < 0)
		return fail("queueing the sessions", &err);
	for (int waited = 0; running(m) < sessions; waited++) {
		if (waited > 6000 || stop) {
			fprintf(stderr, "events-bench: only %ld of %ld sessions RUNNING after 60 s\n", running(m),
				sessions);
			return 1;
		}
		usleep(10000);
	}

	/* A user with no session: an idle client's view. */
	json_t *reply = NULL;
	if (mgr_user_create(m, "watcher@bench.local", NULL, false, "events-bench", &reply, &err) < 0)
		return fail("creating a user", &err);
	char conf[4096];
	if (manager_serve(m, conf, sizeof(conf), &err) < 0)
		return fail("serving", &err);
	char endpoint[300] = "", user_conf[4200];
	FILE *f = fopen(conf, "r");
	char line[1024];
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "endpoint = ", 11))
			util_strlcpy(endpoint, line + 11, sizeof(endpoint));
	if (f)
		fclose(f);
	endpoint[strcspn(endpoint, "\n")] = '\0';
	snprintf(user_conf, sizeof(user_conf), "%s/user.conf", dir);
	f = fopen(user_conf, "w");
	if (!f || !endpoint[0]) {
		fprintf(stderr, "events-bench: cannot write %s\n", user_conf);
		return 1;
	}
	fprintf(f, "endpoint = %s\naccess_key = %s\nsecret_key = %s\n", endpoint,
		json_string_value(json_object_get(json_object_get(reply, "user"), "access_key")),
		json_string_value(json_object_get(reply, "secret_key")));
	fclose(f);
	json_decref(reply);
	printf("ready %ld sessions RUNNING, rounds every %ld ms\n", sessions, period_ms);
	fflush(stdout);

	for (long k = 0; !stop; k++) {
		json_t *ev = stats_round(m, k);
		mgr_agent_event(m, "bench-node", ev);
		json_decref(ev);
		for (long slept = 0; slept < period_ms && !stop; slept += 50)
			usleep(50000);
	}
	manager_close(m);
	return 0;
}
