/* Manager internals shared by manager.c (state, scheduler, dispatch) and
 * api.c (HTTP routes). Everything here is guarded by manager.mu. */
#ifndef TESSERA_MANAGER_INTERNAL_H
#define TESSERA_MANAGER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "common/httpd.h"
#include "common/strmap.h"
#include "manager/link.h"
#include "manager/manager.h"
#include "sched/sched.h"
#include "store/store.h"

#define MGR_MAX_GPUS 16

/* A session's share of one device. */
struct mshare {
	int index;              /* device index on its agent */
	char uuid[64];
	int64_t fgpu_m;
};

struct msession {
	struct session_rec rec;
	struct mshare shares[MGR_MAX_GPUS];   /* mirrors rec.alloc_json */
	int n_shares;
	int failed_passes;      /* scheduler passes it blocked the queue head */
	bool start_inflight;    /* a dispatcher is creating its container */
	bool destroy_queued;    /* a destroy job is queued or running */
};

struct mgpu {
	char uuid[64];
	char name[96];
	int64_t memory;
	int sms;
	int64_t context_overhead; /* bytes a CUDA context takes (agent's measure) */
	int64_t used_m;         /* milli-fGPU given out */
};

struct magent {
	struct agent_rec rec;   /* rec.capacity.fgpu_m follows fgpu_per_device */
	bool alive;
	bool local;             /* in-process: never LOST */
	struct res used;
	int n_sessions;
	int64_t last_seen_mono; /* for LOST detection */
	struct mgpu gpus[MGR_MAX_GPUS];
	int n_gpus;
	bool mock_gpus;
	const struct agent_link_ops *link;
	void *link_ctx;
};

/* Cluster settings (kept in the store's settings table). */
struct msettings {
	int64_t fgpu_per_device;       /* fGPU of one physical device */
	int64_t fgpu_quantum_m;        /* requests are multiples of this */
	const struct sched_queue_ops *queue;
	const struct sched_selector_ops *selector;
	int fifo_skip_after;
	json_t *policies;              /* {"default": {...}, "user@x": {...}} */
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
	struct msettings settings;
	uint64_t version;           /* bumped on every visible change (events) */
	char data_dir[4096];
	char endpoint[256];
	const struct store_ops *so;
	struct store *store;

	struct msession **sessions; /* in seq order */
	size_t n_sessions, cap_sessions;
	struct strmap session_by_id; /* keys: rec.id of each session */
	struct strmap agent_by_id;   /* keys: rec.id of each agent */
	int64_t next_seq;
	struct magent **agents;
	size_t n_agents, cap_agents;
	struct user_rec *users;
	size_t n_users;

	struct job *jobs_head, *jobs_tail;
	/* Links replaced by a re-registration: a dispatcher or handler may
	 * still be using one outside the lock, so they are freed at close. */
	struct retired_link {
		const struct agent_link_ops *ops;
		void *ctx;
		struct retired_link *next;
	} *retired;
	int64_t last_safety_mono;
	bool in_pass;               /* the scheduler is planning (bench, tests) */
	uint64_t placements;        /* sessions placed since start */
	int64_t last_pass_ms;       /* duration of the last pass that placed */
	uint64_t last_pass_placed;
	pthread_t sched_thread;
	pthread_t *workers;
	int n_workers;
	bool threads_started;
	struct httpd *http;
	/* The admin's generated password, only between create_admin() and
	 * manager_serve() writing it to admin.conf on first start. */
	char first_password[32];
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
/* Per-device fGPU of the current setting, in milli. */
int64_t mgr_per_device_m(const struct manager *m);
/* Writes a session's shares to rec.alloc_json and back. */
void mgr_shares_to_json(struct msession *s);
void mgr_shares_from_json(struct msession *s);
/* Recomputes every agent's fGPU capacity after fgpu_per_device changed. */
void mgr_apply_fgpu_setting(struct manager *m);

/* ---- settings.c ---- */
int mgr_settings_load(struct manager *m, struct terr *err);
/* {"fgpu_per_device": 2, ...} (new ref), under mu. */
json_t *mgr_settings_json(struct manager *m);
/* Validates and stores one setting; under mu. */
int mgr_settings_set(struct manager *m, const char *key, json_t *value, struct terr *err);
/* The policy of a user (by email): limits, 0 = none. */
void mgr_user_policy(struct manager *m, const char *email, int64_t *max_sessions, struct res *max);
void mgr_settings_free(struct manager *m);

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
/* The request's body (jsonutil_parse_body), new reference; NULL after
 * answering 400. */
json_t *api_parse_body(struct httpd_req *req, struct httpd_resp *resp);

/* ---- api_users.c: password login and users admin (docs/api.md) ---- */
void api_auth_login(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_user_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_user_create(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_user_update(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
/* A user's public fields (no secret, no hash); new reference. */
json_t *mgr_user_json(const struct user_rec *u);
/* Fresh access key ("TK" + 18 hex) and secret key into u. */
int mgr_new_keypair(struct user_rec *u, struct terr *err);

#endif
