/* Manager internals shared by manager.c (state, scheduler, dispatch) and
 * api.c (HTTP routes). Everything here is guarded by manager.mu. */
#ifndef TESSERA_MANAGER_INTERNAL_H
#define TESSERA_MANAGER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "common/httpd.h"
#include "manager/link.h"
#include "manager/manager.h"
#include "sched/sched.h"
#include "store/store.h"

struct msession {
	struct session_rec rec;
	bool start_inflight;    /* a dispatcher is creating its container */
	bool destroy_queued;    /* a destroy job is queued or running */
};

struct magent {
	struct agent_rec rec;
	bool alive;
	bool local;             /* in-process: never LOST */
	struct res used;
	int n_sessions;
	int64_t last_seen_mono; /* for LOST detection */
	const struct agent_link_ops *link;
	void *link_ctx;
};

enum job_type { JOB_START, JOB_DESTROY };

struct job {
	enum job_type type;
	char session_id[STORE_ID_MAX];
	struct job *next;
};

struct manager {
	pthread_mutex_t mu;
	pthread_cond_t changed;     /* any session changed (long polls) */
	pthread_cond_t wake;        /* scheduler */
	pthread_cond_t jobs_cv;     /* dispatchers */
	bool sched_dirty;
	bool stopping;

	struct manager_config cfg;
	char data_dir[4096];
	char endpoint[256];
	const struct store_ops *so;
	struct store *store;
	const struct sched_selector_ops *selector;

	struct msession **sessions; /* in seq order */
	size_t n_sessions, cap_sessions;
	int64_t next_seq;
	struct magent **agents;
	size_t n_agents, cap_agents;
	struct user_rec *users;
	size_t n_users;

	struct job *jobs_head, *jobs_tail;
	pthread_t sched_thread;
	pthread_t *workers;
	int n_workers;
	bool threads_started;
	struct httpd *http;
};

/* What the authenticate hook leaves in req->auth. */
struct auth_info {
	bool cluster;                 /* an agent, via the cluster secret */
	char agent_id[STORE_NAME_MAX];
	struct user_rec user;         /* copy; valid when !cluster */
};

/* ---- manager.c, called with mu held ---- */
struct msession *mgr_find_session(struct manager *m, const char *id);
/* By id or name among the user's sessions (admins: everyone's). */
struct msession *mgr_resolve_session(struct manager *m, const char *ref,
				     const struct user_rec *user);
struct magent *mgr_find_agent(struct manager *m, const char *id);
const struct user_rec *mgr_find_user(struct manager *m, const char *id);
const struct user_rec *mgr_find_user_by_key(struct manager *m, const char *access_key);
/* Changes status with words for status_info; persists, records history,
 * moves resources, wakes the scheduler and long polls. */
void mgr_set_status(struct manager *m, struct msession *s, enum session_status st,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void mgr_persist(struct manager *m, struct msession *s);
void mgr_enqueue(struct manager *m, enum job_type type, const char *session_id);
void mgr_wake_scheduler(struct manager *m);
/* Adds sessions (already validated) as PENDING in one transaction. */
int mgr_add_sessions(struct manager *m, struct msession **news, size_t n, struct terr *err);
/* Deletes per the state machine (docs/api.md, DELETE). */
void mgr_delete_session(struct manager *m, struct msession *s, const char *by);

/* Agent registry (register/heartbeat/events), called WITHOUT mu. */
int mgr_agent_register(struct manager *m, json_t *desc, const struct agent_link_ops *link,
		       void *link_ctx, bool local, json_t **reply, struct terr *err);
int mgr_agent_heartbeat(struct manager *m, const char *agent_id, json_t *body,
			json_t **reply, struct terr *err);
void mgr_agent_event(struct manager *m, const char *agent_id, json_t *event);

/* ---- api.c ---- */
extern const struct httpd_route manager_routes[];
extern const size_t manager_n_routes;
int api_authenticate(void *ctx, struct httpd_req *req, struct httpd_resp *resp);

#endif
