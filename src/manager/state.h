/* The manager's state: the one struct and the records it keeps, private to
 * the files that hold the state (manager.c, sessions.c, agents.c, users.c,
 * settings.c, scheduler.c, dispatch.c) and to white-box tests and the
 * scheduler benchmark. The HTTP layer (http/) does not include it: it goes
 * through core.h. Everything here is guarded by manager.mu, and
 * every function declared here is called with mu held unless it says
 * otherwise. */
#ifndef TESSERA_MANAGER_STATE_H
#define TESSERA_MANAGER_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "common/httpd.h"
#include "common/metrics.h"
#include "common/strmap.h"
#include "folders/fsquota.h"
#include "manager/core.h"
#include "images/labels.h"
#include "manager/approutes.h"
#include "manager/link.h"
#include "manager/qhist.h"
#include "manager/usage_store/usage_store.h"
#include "manager/manager.h"
#include "sched/sched.h"
#include "store/store.h"

#define MGR_MAX_GPUS 16

/* A session's share of one device. */
struct mshare {
	int index;              /* device index on its agent */
	char uuid[64];
	int64_t fgpu_m;         /* in the unit of its placement: */
	int64_t per_dev_m;      /* fgpu_per_device * 1000 then; 0: unknown
	                         * (saved by an earlier version): today's */
};

/* An immutable text shared between the kept JSON of a session and the
 * requests copying it: freed by the last mtext_unref. */
struct mtext {
	atomic_int refs;
	size_t len;
	char s[];
};

/* Takes text (malloc'd): a new mtext with one reference, or NULL (text
 * freed) on out of memory. */
static inline struct mtext *mtext_new(char *text)
{
	if (!text)
		return NULL;
	size_t len = strlen(text);
	struct mtext *t = malloc(sizeof(*t) + len + 1);
	if (t) {
		atomic_init(&t->refs, 1);
		t->len = len;
		memcpy(t->s, text, len + 1);
	}
	free(text);
	return t;
}

static inline struct mtext *mtext_ref(struct mtext *t)
{
	if (t)
		atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
	return t;
}

static inline void mtext_unref(struct mtext *t)
{
	if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
		free(t);
}

struct msession {
	struct session_rec rec;
	struct mshare shares[MGR_MAX_GPUS];   /* mirrors rec.alloc_json */
	int n_shares;
	int failed_passes;      /* scheduler passes it blocked the queue head */
	/* While PENDING (queue.c): its place among the sessions the last pass
	 * left waiting (1 = next to be tried; 0: no pass has looked at it
	 * yet), and why each pass did not start it (qhist.h; freed when it
	 * ends). */
	size_t queue_pos;
	struct qhist *qhist;
	bool start_inflight;    /* a dispatcher is creating its container */
	bool destroy_queued;    /* a destroy job is queued or running */
	/* Live usage (usage.c): the last sample's summary (usage_t 0: none
	 * while RUNNING), the idle clock (idle_since_ms 0: not idle), execs
	 * running and when the last ended, and why the manager itself ended
	 * it ("" when on request), for the final status_info. */
	int64_t usage_t;
	double usage_cpu_pct, usage_mem_pct, usage_gpu_pct;   /* gpu < 0: none */
	int64_t idle_since_ms;
	int execs_running;
	int64_t last_exec_ms;
	char end_reason[200];
	/* Its JSON as the API answers it, rendered once and kept until it
	 * changes (mgr_session_changed): json as in lists (mgr_session_json),
	 * json_full with its status history (GET /v1/sessions/{ref}) but
	 * without last_commit, which is added on each request. NULL until
	 * asked for. Rendering 1,000 sessions with jansson on every list
	 * request was what made the list slow; and a request takes a
	 * reference under the lock and copies the text after it, so the lock
	 * is held for a lookup, not for the copy. */
	struct mtext *json, *json_full;
	/* The list JSON dropped by the last change, until the next rendering:
	 * a rendering equal to it keeps it instead (the same text, the same
	 * pointer), so that event streams, which compare texts by pointer,
	 * see no change where the bytes did not change. */
	struct mtext *json_prev;
	/* "OWNER_ID\x1fNAME": its key in manager.session_by_name. */
	char name_key[STORE_ID_MAX + STORE_NAME_MAX + 2];
	/* Its history's lines without a change of status (mgr_session_note),
	 * -1 until counted (a session loaded at start); and the OOM kills
	 * those lines have told, and when the last such line was written
	 * (agents.c, session_oom). */
	int notes;
	int64_t oom_noted, oom_noted_ms;
	/* When it last became RUNNING (0: not since this manager started;
	 * started_ms is then the best known): preemption spares sessions
	 * younger than preemption_min_runtime_s. */
	int64_t running_since_ms;
	/* Its owner's, project's and membership's places in the manager's
	 * lists (index + 1, 0: none), as found when ix_gen was the
	 * manager's (scheduler.c): a pass over every session reuses them. */
	uint64_t ix_gen;
	size_t ix_user, ix_project, ix_member;
	/* A cluster session's records (clusters.c): every member points at
	 * the main's (the main at itself; NULL until linked, and for a sub
	 * whose main is not loaded); the main keeps its members in order,
	 * main1 first, then sub1... ([rec.cluster_size], NULL where one is
	 * missing). cl_error: why a member's failure ended the session, for
	 * the main's final ERROR; or why the manager ended a session as a
	 * failure (a batch timeout, mgr_batch_timeouts). */
	struct msession *cl_main;
	struct msession **cl_members;
	char cl_error[STORE_INFO_MAX];
};

/* s's own kept texts dropped (mgr_session_changed without its main). */
static inline void mgr_session_texts_drop(struct msession *s)
{
	if (s->json) {
		mtext_unref(s->json_prev);
		s->json_prev = s->json;
	}
	mtext_unref(s->json_full);
	s->json = s->json_full = NULL;
}

/* Drops s's rendered JSON: called wherever its record, shares or history
 * change (mgr_persist, which every stored change goes through, and the
 * scheduler's in-memory wait reasons). A request still copying an old
 * text keeps it until it lets go. */
static inline void mgr_session_changed(struct msession *s)
{
	mgr_session_texts_drop(s);
	/* A cluster session's JSON lists its containers: a member's change
	 * is its main's. */
	if (s->cl_main && s->cl_main != s)
		mgr_session_texts_drop(s->cl_main);
}

/* Every kept text of s dropped (s is being freed; its main may be gone
 * already). */
static inline void mgr_session_texts_free(struct msession *s)
{
	mgr_session_texts_drop(s);
	mtext_unref(s->json_prev);
	s->json_prev = NULL;
}

/* A data folder and its measured usage (folders.c). */
struct mfolder {
	struct folder_rec rec;
	int64_t usage_bytes;
	int64_t usage_at_mono;  /* when measured; 0: never */
	/* How the kernel caps writes inside sessions (its host's kind, the
	 * subvolume's qgroup or the directory's project id): read from the
	 * directory at load and set at create. */
	struct fsq_folder fsq;
	/* Bytes uploads in flight have reserved against the quota
	 * (mgr_folder_upload_begin/_grow/_end). */
	int64_t reserved_bytes;
};

struct mgpu {
	char uuid[64];
	char name[96];
	int64_t memory;
	int sms;
	int64_t context_overhead; /* bytes a CUDA context takes (agent's measure) */
	int64_t used_m;         /* milli-fGPU given out, in today's unit
	                         * (mgr_share_now_m of each share) */
	double util_pct;        /* live (usage.c); < 0: not measured */
	int64_t mem_used;       /* live, bytes */
};

struct magent {
	struct agent_rec rec;   /* rec.capacity.fgpu_m follows fgpu_per_device */
	bool alive;
	bool local;             /* in-process: never LOST */
	struct res used;
	int n_sessions;
	int64_t last_seen_mono; /* for LOST detection */
	/* Loaded from the store at start and not registered since: its
	 * RUNNING sessions become LOST if it stays away as long as a live
	 * agent's heartbeats may (last_seen_mono is then the start). */
	bool awaited;
	struct mgpu gpus[MGR_MAX_GPUS];
	int n_gpus;
	bool mock_gpus;
	const struct agent_link_ops *link;
	void *link_ctx;
	/* Its images as it last reported them (images.c): [{"id","tags",
	 * "size","labels"}]; NULL while unknown. */
	json_t *images;
	/* Live usage (usage.c): its last round's totals, when (0: none yet),
	 * and the period its agent samples at. */
	int64_t usage_t;
	double usage_cpu;
	int64_t usage_mem;
	int stats_period_ms;
};

/* Cluster settings (kept in the store's settings table). */
struct msettings {
	int64_t fgpu_per_device;       /* fGPU of one physical device */
	int64_t fgpu_quantum_m;        /* requests are multiples of this */
	const struct sched_queue_ops *queue;
	const struct sched_selector_ops *selector;
	int fifo_skip_after;
	int folder_trash_days;
	/* Fair share and preemption (docs/scheduling.md). */
	int64_t fairshare_half_life_s;  /* usage halves in this time; 0: never decays */
	bool preemption;                /* the scheduler may preempt */
	int64_t preemption_min_runtime_s;   /* no victim younger than this */
	char announcement[MGR_ANNOUNCEMENT_MAX + 1];   /* "": none */
	json_t *policies;              /* {"default": {...}, "user@x": {...}} */
	json_t *agent;                 /* agents' settings that are set: {"log_max_size": ...} */
	/* manager.conf's keys that are also cluster settings, those set:
	 * {"storage_hosts": "NAME:PATH,...", "registry_url": ..., "wsproxy_url":
	 * ..., "wsproxy_port_range": ..., "wsproxy_domain": ...}; an unset one
	 * is manager.conf's (mgr_conf_value). */
	json_t *conf;
};

/* A project (projects.c) and its fair-share usage (decayed; scheduler.c
 * charges it, fairshare.c keeps it in the store). */
struct mproject {
	struct project_rec rec;
	struct sched_usage usage;
};

/* A user's membership of a project, and their usage within it. */
struct mmember {
	struct member_rec rec;
	struct sched_usage usage;
};

/* What a user may do in a project (mgr_project_role). */
enum mgr_role { ROLE_NONE, ROLE_MEMBER, ROLE_MANAGER };

/* The resource group of a node no admin put in one, and of a session
 * that asks for none. */
#define MGR_DEFAULT_GROUP "default"

enum job_type { JOB_START, JOB_DESTROY, JOB_COMMIT, JOB_PULL };

struct job {
	enum job_type type;
	/* The session's id; a JOB_COMMIT's commit id, a JOB_PULL's pull id. */
	char session_id[STORE_ID_MAX];
	struct job *next;
};

/* A session committed into a private image (commits.c). */
enum commit_status { COMMIT_COMMITTING, COMMIT_READY, COMMIT_FAILED };

struct mcommit {
	char id[STORE_ID_MAX];
	char ref[256];                     /* "name:tag" as sessions name it */
	char owner_id[STORE_ID_MAX];       /* the session's owner: the image's */
	char session_id[STORE_ID_MAX];
	char session_name[STORE_NAME_MAX];
	char source_image[256];
	char agent_id[STORE_NAME_MAX];
	char by[256];                      /* email of who asked */
	enum commit_status status;
	char error[512];                   /* why it failed */
	bool pushed;                       /* to the cluster registry */
	char push_error[512];
	int64_t created_ms, finished_ms;
};

/* An image pull onto nodes (`tessera image pull`, commits.c), kept in
 * memory only: its progress is for the one who waits for it. */
struct mpull {
	char id[STORE_ID_MAX];
	char ref[256];
	char owner_id[STORE_ID_MAX];
	char node[STORE_NAME_MAX];         /* "": every alive node */
	bool done;
	json_t *nodes;                     /* [{"node","status","current","total","error"}] */
	int64_t created_ms;
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
	/* The nodes as event streams show them (mgr_nodes_kept): [0] the
	 * users' view, [1] the admins'; rendered at nodes_text_ver. */
	struct mtext *nodes_text[2];
	uint64_t nodes_text_ver;
	char data_dir[4096];
	char endpoint[256];
	/* This installation's identity, made at first start and kept in the
	 * store (key "cluster_id"): agents label containers with it, so that
	 * installations sharing a Docker tell theirs apart. */
	char cluster_id[40];
	const struct store_ops *so;
	struct store *store;
	char store_where[512];      /* how messages name it (store_open) */
	/* A store on a server (PostgreSQL) can be lost: while it is, or until
	 * the manager has written its state again after the reconnection
	 * (store_epoch behind the store's), state-changing API requests get
	 * 503 and nothing is placed (scheduler.c, mgr_store_check). fenced:
	 * another manager became the active one; this one must stop. */
	_Atomic bool store_ok;
	_Atomic bool store_fenced;
	uint64_t store_epoch;

	struct msession **sessions; /* in seq order */
	size_t n_sessions, cap_sessions;
	struct strmap session_by_id; /* keys: rec.id of each session */
	/* Keys: name_key of each session; the value is the newest session of
	 * that owner and name. Names are unique among an owner's active
	 * sessions and a session never becomes active again, so the newest
	 * is the active one when there is one: what a reference by name
	 * means (mgr_resolve_session), found without a walk of the list. */
	struct strmap session_by_name;
	struct strmap agent_by_id;   /* keys: rec.id of each agent */
	int64_t next_seq;
	struct magent **agents;
	size_t n_agents, cap_agents;
	struct user_rec *users;
	size_t n_users;
	/* Every user's API keys (users.c), oldest first. */
	struct keypair_rec *keys;
	size_t n_keys;
	/* Guards users, n_users, keys and n_keys for mgr_user_by_access_key alone, which
	 * every signed request calls: it takes this for reading instead of
	 * mu, so that authentication does not queue behind the manager's
	 * work. Every change to users holds mu and this for writing, so a
	 * holder of mu reads users without it. */
	pthread_rwlock_t users_mu;
	json_t *image_aliases;      /* {"alias": "image ref"}, stored (images.c) */
	json_t *drained_nodes;      /* ["node id"]: unschedulable, stored (nodes_admin.c) */
	/* Storage hosts (the storage_hosts setting, else cfg.storage_hosts;
	 * folders.c); the first is the default. Replaced under mu when the
	 * setting changes (mgr_folders_hosts_apply): pointers into it are
	 * used under mu only. */
	struct model_storage_host hosts[MGR_MAX_STORAGE_HOSTS];
	size_t n_hosts;
	/* What each host's filesystem enforces (fsquota.h), probed at open. */
	struct fsq_host host_quota[MGR_MAX_STORAGE_HOSTS];
	/* Grows whenever users, projects or memberships are added or
	 * removed (their indexes shift): a session's cached indexes
	 * (msession.ix_gen) are then looked up again. Starts at 1. */
	uint64_t ix_gen;
	/* Projects and memberships (projects.c), as stored. */
	struct mproject **projects;
	size_t n_projects;
	struct mmember **members;
	size_t n_members;
	/* Resource presets (presets.c), as stored: PRESETS_MAX slots. */
	struct preset_rec *presets;
	size_t n_presets;
	/* Nodes' resource groups (nodes_admin.c): {"node id": "group"}, kept
	 * in the store's settings table; a node not named is in
	 * MGR_DEFAULT_GROUP. */
	json_t *node_groups;
	/* Fair-share usage (fairshare.c): when it was last charged and last
	 * stored (monotonic ms; fs_saved_mono 0: not loaded). */
	int64_t fs_tick_mono, fs_saved_mono;
	/* Every folder, live and trashed (folders.c), as stored. */
	struct mfolder **folders;
	size_t n_folders, cap_folders;

	/* Execs running per user, for max_concurrent_execs: an entry while
	 * its count is above 0 (sessions.c). */
	struct mexec_count {
		char user_id[STORE_ID_MAX];
		int n;
		struct mexec_count *next;
	} *exec_counts;

	struct job *jobs_head, *jobs_tail;
	/* Private images made by session commit, kept in the store's
	 * settings table under "commits" (commits.c). */
	struct mcommit **commits;
	size_t n_commits, cap_commits;
	struct mpull **pulls;
	size_t n_pulls;
	/* The cluster registry (the registry_url setting, else
	 * cfg.registry_url): "host:port" as image names carry it, and its
	 * API's URL; both "" without one. Under reg_mu, taken alone (with or
	 * without mu, nothing else taken inside it): commits and pulls read
	 * them outside mu (mgr_registry_get). */
	pthread_mutex_t reg_mu;
	char registry_host[256];
	char registry_base[300];
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
	/* tessera server's in-process agent, given the agents' cluster
	 * settings as they change (settings.c); NULL for a manager. */
	struct agent *local_agent;
	/* Following etcd (cfg.etcd, settings.c): the revision the settings
	 * were read at, and the watch thread. */
	int64_t etcd_rev;
	pthread_t etcd_thread;
	atomic_bool etcd_cancel;
	bool etcd_started;
	struct msettings *etcd_resync;  /* the settings being read again after a compaction */
	struct httpd *http;
	/* Metrics (metrics.c): time spent PENDING before placement and the
	 * scheduling passes' time, under mu; the API's request counts and
	 * latency under their own api_mu, which requests take without mu
	 * (never both at once). */
	struct metrics_hist pending_hist;
	struct metrics_hist pass_hist;
	pthread_mutex_t api_mu;
	struct mroute_metrics {
		struct { int status; uint64_t n; } st[16];
		int n_st;
		struct metrics_hist latency;
	} *api_metrics;                 /* manager_n_routes + 1 (unmatched) */
	/* Sessions' usage history (usage.c, usage_store.h). */
	const struct usage_store_ops *usage_ops;
	struct usage_store *usage;
	/* cfg.redis_url's client, NULL without one; fixed at open. Heartbeats
	 * are written there (agents.c) and the login limits count there
	 * (api_users.c through mgr_login_limits). redis_down: the last
	 * call failed (for one log line per outage, not one per call). */
	struct redis_client *redis;
	atomic_bool redis_down;
	struct ratelimit *login_fail_pair, *login_fail_addr;
	/* Session apps (apps.c): the routes and tokens, and the proxy's
	 * public base as parsed from cfg at open. */
	struct approutes apps;
	char apps_scheme[8];
	char apps_host[256];
	int apps_base_port;             /* 0: none given */
	/* What the app proxy serves, as its last poll of the routes said
	 * (?ports=LO-HI or ?domain=D; proxy_lo 0 and proxy_domain "" when no
	 * proxy has said): wsproxy_port_range and wsproxy_domain settings it
	 * does not serve are refused (apps.c, mgr_apps_check). */
	int proxy_lo, proxy_hi;
	char proxy_domain[256];
	bool proxy_known;
	/* The About page (overview.c, GET /v1/about): when this manager
	 * opened; the app proxy's route polls in flight and when the last one
	 * began or ended; when a request last came through the webserver
	 * (its X-Tessera-Via header); whether etcd's watch is down. */
	int64_t opened_ms;
	atomic_int proxy_polls;
	_Atomic int64_t proxy_seen_ms, web_seen_ms;
	atomic_bool etcd_down;
	/* The admin's generated password, only between create_admin() and
	 * manager_serve() writing it to admin.conf on first start (and in
	 * admin.conf.pending meanwhile). */
	char first_password[32];
};

/* ---- sessions.c ---- */
struct msession *mgr_find_session(struct manager *m, const char *id);
/* By id (admins: anyone's session) or by name among the user's own
 * sessions (admins too: a name never reaches another user's session). */
struct msession *mgr_resolve_session(struct manager *m, const char *ref,
				     const struct user_rec *user);
/* ---- clusters.c: cluster sessions, a record per container ---- */
#define MGR_CLUSTER_MAX VALIDATE_MAX_CLUSTER
/* A sub of a cluster session: not a session of its own to users (lists,
 * names, counts), but a container of its main's. */
static inline bool mgr_session_is_sub(const struct msession *s)
{
	return !strcmp(s->rec.cluster_role, STORE_CLUSTER_SUB);
}
static inline bool mgr_session_is_cluster(const struct msession *s)
{
	return s->rec.cluster_size > 1;
}
/* Links s (just appended) with its cluster's other records. -ENOMEM. */
int mgr_cluster_link(struct manager *m, struct msession *s);
/* Member i (0: main1, 1: sub1...) of main's cluster; NULL when missing. */
struct msession *mgr_cluster_member(const struct msession *main, int64_t i);
/* "main1", "sub2": s's container name. */
void mgr_cluster_name(const struct msession *s, char *buf, size_t n);
/* The member of main's cluster named like "sub1" (NULL: main1 too);
 * NULL when none. */
struct msession *mgr_cluster_find(struct msession *main, const char *container);
/* After s moved from old to its status (mgr_set_status): one member
 * ending ends the others (docs/user-guide.md, "Distributed training"). */
void mgr_cluster_follow(struct manager *m, struct msession *s, enum session_status old);
/* A member's container started (run_start): the session is RUNNING once
 * every member's is; until then its members stay PREPARING. */
void mgr_cluster_started(struct manager *m, struct msession *s, const char *agent_name);
/* The "containers" array of a session's JSON (a new reference). */
json_t *mgr_cluster_containers_json(struct manager *m, const struct msession *s);
/* main1,sub1,...: the hosts of main's cluster, into buf. */
void mgr_cluster_hosts(const struct msession *main, char *buf, size_t n);
/* The session's SSH key pair from its seed (64 hex): the private key in
 * OpenSSH's format and the public key's authorized_keys line. -EINVAL on
 * a bad seed, -ENOMEM. */
int mgr_cluster_ssh_keys(const char *seed_hex, char *key, size_t key_n, char *pub, size_t pub_n);
/* A new session's SSH key: 32 random bytes as 64 hex. */
int mgr_cluster_new_seed(char out[65], struct terr *err);

static inline bool mgr_session_is_batch(const struct msession *s)
{
	return !strcmp(s->rec.type, STORE_TYPE_BATCH);
}
/* Sets status_info without a change of status (a process OOM-killed in a
 * RUNNING session) and appends it to the history, unless the session's
 * history has MGR_SESSION_NOTES_MAX such lines already (the last one
 * says so); persists, logs, wakes long polls and event streams. */
void mgr_session_note(struct manager *m, struct msession *s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define MGR_SESSION_NOTES_MAX 20
/* A line of s's history at a moment already past (at_ms, on the
 * manager's clock, not before the line before it), of its current
 * status; status_info is left as it is, and the line is not one of the
 * capped notes (a start writes at most four, once): where a stage of a
 * start began, the pull's (commits.c) and those the node timed
 * (dispatch.c). */
void mgr_session_note_past(struct manager *m, struct msession *s, int64_t at_ms, const char *info);
/* The PREPARING lines that split a start's container phase (written by
 * dispatch.c from the node's times, read by mgr_start_breakdown): what
 * follows the prefix names the node. */
#define MGR_LINE_CREATED "container created on node "
#define MGR_LINE_STARTED "container started on node "
/* OOM kills become history lines at most once per this window: the first
 * at once, those within the window after it as one line with their count
 * when the next kill comes after the window or the session ends
 * (mgr_oom_flush). A fork bomb under its memory limit wrote one line a
 * second before, 185 in one session (issue 27). */
#define MGR_OOM_NOTE_WINDOW_MS 60000
/* Writes the OOM kills no history line has told yet (called as a session
 * ends, by mgr_set_status). */
void mgr_oom_flush(struct manager *m, struct msession *s);
/* A session's container ended by itself (exit code, the runtime's OOM
 * flag, its words for why): an interactive session becomes ERROR; a
 * batch one TERMINATED when its command exited 0, else ERROR with the
 * code and the reason (agents.c). */
void mgr_session_ended(struct manager *m, struct msession *s, int exit_code, bool oom_killed,
		       const char *reason);
/* Appends a loaded or new session to the list and the id index; on
 * success the manager owns s. */
int mgr_session_append(struct manager *m, struct msession *s);
/* Adds sessions (already validated and placeable) as PENDING in one
 * transaction; on success the manager owns them (news itself stays the
 * caller's). On failure the caller frees those still in news: an entry
 * the manager kept is set to NULL. */
int mgr_add_sessions(struct manager *m, struct msession **news, size_t n, struct terr *err);
/* Deletes per the state machine (docs/api.md, DELETE). */
void mgr_delete_session(struct manager *m, struct msession *s, const char *by);
/* The API's view of a session, with its device shares (new reference). */
json_t *mgr_session_json(struct manager *m, const struct msession *s);
/* The sessions a user sees listed (admins: everyone's), new reference. */
json_t *mgr_sessions_visible_json(struct manager *m, const struct user_rec *u, bool all);
/* Where a start's time went, from a session's status history (in order):
 * {"total_ms", "phases": [{"phase", "ms"}]}, or null before it first ran
 * (docs/api.md, "start_breakdown"). */
json_t *mgr_start_breakdown(const struct history_rec *h, size_t n);
/* Renders the kept list JSON of the sessions with these ids (those not
 * rendered yet), taking the lock for them: a round of usage renders its
 * sessions MGR_RENDER_BATCH at a time, so that no request waits for all. */
#define MGR_RENDER_BATCH 32
void mgr_sessions_render(struct manager *m, const char (*ids)[64], size_t n);

/* ---- manager.c: state changes every file uses ---- */
/* {"cpu","mem","fgpu"}, a new reference (mgr_time_json: core.h). */
json_t *mgr_res_json(const struct res *r);
/* Changes status with words for status_info; persists, records history,
 * moves resources, wakes the scheduler and long polls. */
void mgr_set_status(struct manager *m, struct msession *s, enum session_status st,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void mgr_persist(struct manager *m, struct msession *s);
void mgr_wake_scheduler(struct manager *m);
/* Asks the store how it stands (reconnecting it when it was lost, at most
 * once a second) and, after a reconnection, writes the state again;
 * updates store_ok and store_fenced. Called with mu held, which it
 * releases while it talks to the database. True when the store is up. */
bool mgr_store_check(struct manager *m);
/* Per-device fGPU of the current setting, in milli. */
int64_t mgr_per_device_m(const struct manager *m);
/* Writes a session's shares to rec.alloc_json and back. */
void mgr_shares_to_json(struct msession *s);
void mgr_shares_from_json(struct msession *s);
/* A share in today's fGPU unit: the same physical part of its device,
 * rounded up to the milli-fGPU (docs/scheduling.md, "Changing
 * fgpu_per_device"). */
int64_t mgr_share_now_m(const struct manager *m, const struct mshare *sh);
/* The fGPU a session holds on its node, in today's unit. */
int64_t mgr_session_fgpu_now_m(const struct manager *m, const struct msession *s);
/* Adds (sign +1) or removes (-1) a session's shares on its agent's devices. */
void mgr_shares_move(const struct manager *m, struct magent *a, const struct msession *s, int sign);
/* What s holds moved onto (+1) or off (-1) its node: its CPU and memory
 * as asked, its fGPU in today's unit, its device shares. */
void mgr_held_move(const struct manager *m, struct magent *a, const struct msession *s, int sign);
/* Every node's used resources, session count and device shares counted
 * again from the sessions that hold them (at open; after a change of
 * fgpu_per_device). Under mu. */
void mgr_recount_held(struct manager *m);

/* ---- dispatch.c ---- */
void mgr_enqueue(struct manager *m, enum job_type type, const char *session_id);
/* Queues a destroy unless one is queued already. */
void mgr_enqueue_destroy(struct manager *m, struct msession *s);
/* Starts the dispatch workers (called WITHOUT mu, at open); on failure
 * those started are in m->n_workers. */
int mgr_dispatch_start(struct manager *m, struct terr *err);
/* Joins the workers once m->stopping is set and they were woken, and frees
 * the jobs left in the queue (WITHOUT mu, at close). */
void mgr_dispatch_join(struct manager *m);

/* ---- commits.c ---- */
/* Loads the commits (those interrupted by a stop become failed) and
 * parses the registry_url in force; at open, before the threads. */
int mgr_commits_load(struct manager *m, struct terr *err);
/* The registry_url in force parsed into registry_host and registry_base
 * (both "" when none); a bad one (only etcdctl can write one) is logged
 * and leaves them. Under mu. */
void mgr_registry_apply(struct manager *m);
/* Copies of registry_host and registry_base (hn, bn bytes; may be NULL).
 * Takes reg_mu: with or without mu. */
void mgr_registry_get(struct manager *m, char *host, size_t hn, char *base, size_t bn);
void mgr_commits_free(struct manager *m);
/* The dispatch workers' jobs (called WITHOUT mu). */
void mgr_run_commit(struct manager *m, const char *commit_id);
void mgr_run_pull(struct manager *m, const char *pull_id);
/* Whether ref is a private image u may not see: then it does not exist
 * for u ("no such image"). */
bool mgr_commit_hidden(struct manager *m, const struct user_rec *u, const char *ref);
/* The owner's user id of the private image ref that a commit made (one
 * not failed, under tessera-private/: an older commit's record of a
 * public name does not count), or NULL; valid while mu is held. */
const char *mgr_commit_owner(struct manager *m, const char *ref);
/* The session's last commit's JSON, or null (new reference). */
json_t *mgr_commit_last_json(struct manager *m, const char *session_id);
/* Before a start: pulls the session's image onto its node when the node
 * lacks it and the registry has it, with the progress in status_info.
 * Called WITHOUT mu, with the session PREPARING and start_inflight set;
 * 0 when the image is there (now), else the error to fail the start with. */
int mgr_pull_for_start(struct manager *m, const char *session_id, const struct agent_link_ops *link,
		       void *ctx, const char *agent_id, const char *image, struct terr *err);
/* Whether the cluster registry holds ref (WITHOUT mu: registry_base is
 * fixed at open); false without a registry or when it does not answer. */
bool mgr_registry_has(struct manager *m, const char *ref);
/* A progress event of a remote agent's pull (agents.c: mgr_agent_event). */
void mgr_pull_progress_event(struct manager *m, const char *agent_id, json_t *event);

/* ---- scheduler.c ---- */
/* Starts the scheduler thread (WITHOUT mu, at open); it ends once
 * m->stopping is set and it is woken; manager_close joins it. */
int mgr_scheduler_start(struct manager *m, struct terr *err);

/* ---- agents.c ---- */
struct magent *mgr_find_agent(struct manager *m, const char *id);
struct mgpu *mgr_agent_gpu(struct magent *a, const char *uuid);
/* Records a Redis call's outcome: a warning when Redis stops answering,
 * a note when it answers again (no lock needed). */
void mgr_redis_outcome(struct manager *m, int rc, const struct terr *err);
/* At open, with Redis: logs the agents whose heartbeat Redis still holds
 * (alive, expected to register again soon) and takes their last
 * heartbeat's time for the node list. */
void mgr_agents_heartbeats_from_redis(struct manager *m);
/* Loads an agent record at start (not alive until it registers again). */
int mgr_agent_load(struct manager *m, const struct agent_rec *r);
/* Recomputes every agent's fGPU capacity after fgpu_per_device changed. */
void mgr_apply_fgpu_setting(struct manager *m);
/* Marks agents whose heartbeats stopped LOST, and their RUNNING sessions
 * LOST with them; likewise the RUNNING sessions of agents loaded at start
 * that did not register within that time (the scheduler's safety pass;
 * m->mu held). With Redis, an agent whose heartbeat is in Redis (sent to
 * another manager on the same Redis) is not LOST; the lock is dropped
 * while Redis is asked. */
void mgr_mark_lost_agents(struct manager *m);
/* The API's view of every node (new reference). */
json_t *mgr_nodes_json(struct manager *m);
/* The nodes as an event stream shows them (m->mu held): kept as one text
 * per view, rendered again once per change of m->version and kept as it
 * was when the rendering is the same. admin: GET /v1/nodes's view; else
 * without the live figures (docs/api.md, "Events"). A new reference, NULL
 * when out of memory. */
struct mtext *mgr_nodes_kept(struct manager *m, bool admin);

/* ---- metrics.c ---- */
int mgr_metrics_open(struct manager *m, struct terr *err);   /* at open */
void mgr_metrics_close(struct manager *m);
/* httpd's observe hook (WITHOUT mu). */
void mgr_metrics_observe(void *ctx, const struct httpd_route *route, const char *method, int status,
			 double seconds);
/* A scheduling pass took seconds. */
void mgr_metrics_pass(struct manager *m, double seconds);

/* ---- usage.c ---- */
#define MGR_STATS_RETENTION_S 3600
#define MGR_IDLE_CPU_PCT 5
int mgr_usage_open(struct manager *m, struct terr *err);   /* at open */
void mgr_usage_close(struct manager *m);
int64_t mgr_usage_retention_s(const struct manager *m);
/* A round of an agent's samples ({"samples","node","period_ms"}; takes
 * mu itself). */
void mgr_usage_event(struct manager *m, const char *agent_id, json_t *ev);
/* The session left RUNNING (mgr_set_status). */
void mgr_usage_left_running(struct manager *m, struct msession *s);
/* Frees histories that aged out (the safety pass). */
void mgr_usage_sweep(struct manager *m);
/* An exec of the session started (+1) or ended (-1). */
void mgr_usage_exec(struct manager *m, const char *session_id, int delta);
/* Adds "usage" and "idle" to a session's JSON, "usage" and the GPUs'
 * live figures to a node's. */
void mgr_usage_session_json(struct manager *m, const struct msession *s, json_t *o);
void mgr_usage_node_json(struct manager *m, const struct magent *a, json_t *o);

/* ---- nodes_admin.c: drained nodes ---- */
/* Loads the drained set from the store (none when unset). */
int mgr_drain_load(struct manager *m, struct terr *err);
void mgr_drain_free(struct manager *m);
/* Whether the admin drained node id (nothing new is placed there). */
bool mgr_node_drained(const struct manager *m, const char *id);

/* ---- scheduler.c: the launch estimate ---- */
/* Whether the next scheduling pass would place count more sessions like
 * tmpl (its owner, resources, project, group and priority) at once, with
 * the queue and the nodes as they are now; when not, why in words into
 * why (n bytes). */
bool mgr_sched_estimate(struct manager *m, const struct session_rec *tmpl, int64_t count, char *why, size_t n);

/* ---- apps.c ---- */
/* Reads and checks the proxy's addresses (the wsproxy_* settings, else
 * cfg's; at open, after mgr_settings_load). */
int mgr_apps_open(struct manager *m, struct terr *err);
/* Whether url, range and domain (each NULL or "": the default) are
 * addresses the manager can make links on, together, and that the proxy
 * that last polled serves (its range holds range; the same mode and
 * domain). EINVAL with the key's name. Under mu. */
int mgr_apps_check(struct manager *m, const char *url, const char *range, const char *domain, struct terr *err);
/* Makes links on the current wsproxy_* values from now on; routes open
 * already stay as they are (docs/admin.md, "The app proxy"). Under mu. */
void mgr_apps_apply(struct manager *m);

void mgr_apps_free(struct manager *m);
/* The routes and tokens saved before a restart, for the sessions still
 * RUNNING or LOST (at open, after the sessions and the settings). */
void mgr_apps_load(struct manager *m);
/* A user was made, disabled or enabled: the proxy's long poll wakes and
 * gets the new lists of admins and disabled accounts. Under mu. */
void mgr_apps_users_changed(struct manager *m);
/* Records where the session's app port is (endpoint "HOST:PORT"; NULL or
 * "": none); a change of a session with routes bumps their generation. */
void mgr_apps_set_endpoint(struct manager *m, struct msession *s, const char *endpoint);
/* The session left RUNNING: its routes and its endpoint go. */
void mgr_apps_left_running(struct manager *m, struct msession *s);

/* ---- images.c ---- */
/* Loads the aliases at open. */
int mgr_images_load(struct manager *m, struct terr *err);
/* Frees the agents' lists and the aliases at close. */
void mgr_images_free(struct manager *m);
/* Replaces an agent's list with a copy of list (borrowed; not an array:
 * unknown). */
void mgr_agent_set_images(struct magent *a, json_t *list);
/* The service ports (ai.backend.service-ports) of image as the catalog of
 * the alive nodes has them, at most max into out; *n 0 when the image is
 * not in the catalog or declares none. */
void mgr_image_service_ports(struct manager *m, const char *image, struct img_service_port *out, size_t max,
			     size_t *n);

/* ---- users.c ---- */
const struct user_rec *mgr_find_user(struct manager *m, const char *id);
const struct user_rec *mgr_find_user_by_email(struct manager *m, const char *email);
const struct user_rec *mgr_find_user_by_key(struct manager *m, const char *access_key);
/* Appends a loaded user, a loaded key (copied). */
int mgr_user_load(struct manager *m, const struct user_rec *u);
int mgr_key_load(struct manager *m, const struct keypair_rec *k);
/* After loading: adds to the keys each user's main key that is not
 * among them (written to the store too). */
int mgr_keys_check_main(struct manager *m, struct terr *err);
/* First start: creates the admin user, its password into
 * m->first_password and DATA_DIR/admin.conf.pending (before the user is
 * stored). */
int mgr_create_admin(struct manager *m, struct terr *err);
/* Copies the first enabled admin into *out (takes mu); -ENOENT if none. */
int mgr_admin_user(struct manager *m, struct user_rec *out);
/* Writes admin.conf at path for the first enabled admin, with the
 * manager's endpoint and the password when it is known (made at this
 * start, or the one of the file replaced or of admin.conf.pending, if it
 * still opens the account); logs where to turn when it is not. Removes
 * admin.conf.pending once written. 0 when there is no admin. */
int mgr_admin_conf_update(struct manager *m, const char *path, struct terr *err);

/* ---- folders.c ---- */
int mgr_folders_load(struct manager *m, struct terr *err);
/* Whether spec (NULL or "": local:DATA_DIR/folders) can replace the
 * storage hosts: it parses, each new host's directory and trash can be
 * made (they are), and no folder, live or in the trash, lies on a host it
 * drops or moves (EINVAL naming them). Under mu. */
int mgr_folders_hosts_check(struct manager *m, const char *spec, struct terr *err);
/* Replaces the storage hosts by the current storage_hosts value (hosts
 * kept keep their probe; new ones are made and probed), and hands them to
 * tessera server's agent. Under mu. */
void mgr_folders_hosts_apply(struct manager *m);
void mgr_folders_free(struct manager *m);
/* Purges trashed folders older than folder_trash_days (the scheduler's
 * safety pass). */
void mgr_folders_purge_trash(struct manager *m);
/* The folders a new session of owner mounts: cr's (resolved as
 * mgr_folder_resolve does; read-only when asked or shared ro) and the
 * owner's automounted dot-folders, as the JSON text of
 * session_rec.mounts_json into *out (malloc'd; NULL when none). ENOENT
 * "no folder NAME" for a folder owner may not use. */
#define MGR_MAX_SESSION_MOUNTS 16
int mgr_folders_mounts_json(struct manager *m, const struct user_rec *owner, const struct create_request *cr,
			    char **out, struct terr *err);

/* ---- settings.c ---- */
int mgr_settings_load(struct manager *m, struct terr *err);
/* The keys of manager.conf that are cluster settings too. */
#define MGR_CONF_KEYS "storage_hosts, registry_url, wsproxy_url, wsproxy_port_range, wsproxy_domain"
bool mgr_conf_key(const char *key);
/* The value in force of such a key: the setting when set, else
 * manager.conf's (may be NULL). Borrowed, valid under mu until the next
 * change. */
const char *mgr_conf_value(struct manager *m, const char *key);
/* {"fgpu_per_device": 2, ...} (new ref). */
json_t *mgr_settings_json(struct manager *m);
/* Validates and stores one setting (in etcd with cfg.etcd, else in the
 * store) and applies it. */
int mgr_settings_set(struct manager *m, const char *key, json_t *value, struct terr *err);
/* The settings as one flat object {"fgpu_per_device": 1, ...,
 * "policy.default": {...}} (new ref), the form of put-json's files. */
json_t *mgr_settings_flat(struct manager *m);
/* With cfg.etcd: starts the thread that applies changes made in etcd
 * (after mgr_settings_load); unfollow stops and joins it. No-ops without. */
int mgr_settings_follow(struct manager *m, struct terr *err);
void mgr_settings_unfollow(struct manager *m);
/* tessera server: a (the agent) gets the agents' cluster settings now and
 * at every change. Takes the lock. */
void mgr_settings_attach_local(struct manager *m, struct agent *a);
/* The policy of a user (by email): limits, 0 = none. */
void mgr_user_policy(struct manager *m, const char *email, int64_t *max_sessions, struct res *max);
/* Whether the user's policy (policy.<email>, else policy.default) lets
 * their sessions run as root: "allow_root", false when unset. */
bool mgr_user_allow_root(struct manager *m, const char *email);
/* A boolean key of the user's policy (their own where set, else the
 * default policy's), def when neither sets it. */
bool mgr_user_policy_bool(struct manager *m, const char *email, const char *key, bool def);
/* "requeue" or "end": what becomes of the user's preempted sessions. */
const char *mgr_user_on_preempt(struct manager *m, const char *email);
/* Session priorities are 0..MGR_MAX_PRIORITY; a user's policy bounds
 * theirs with max_priority (default 0). */
#define MGR_MAX_PRIORITY 100
/* The user's max_private_images (default MGR_DEFAULT_MAX_PRIVATE_IMAGES;
 * 0: no limit). */
#define MGR_DEFAULT_MAX_PRIVATE_IMAGES 10
int64_t mgr_user_max_private_images(struct manager *m, const char *email);
/* A numeric limit of the user's policy (an integer or a size such as
 * "10g"), the default policy's where the user's lacks it, else def. */
int64_t mgr_user_policy_limit(struct manager *m, const char *email, const char *key, int64_t def);
#define MGR_DEFAULT_MAX_FOLDERS 20
#define MGR_DEFAULT_FOLDER_TRASH_DAYS 7
void mgr_settings_free(struct manager *m);
/* How many execs a user (by email) may run at once: max_concurrent_execs
 * of their policy, MGR_DEFAULT_MAX_EXECS when it has none, 0 = no limit. */
int64_t mgr_user_max_execs(struct manager *m, const char *email);

/* ---- preemption (sessions.c) ---- */
/* Ends s's container to make room (why: for its history); s becomes
 * PREEMPTED until the container is gone. */
void mgr_session_preempt(struct manager *m, struct msession *s, const char *why);
/* s's container is gone: PENDING again or TERMINATED, as its owner's
 * policy's on_preempt says. */
void mgr_session_preempt_done(struct manager *m, struct msession *s);

/* ---- projects.c ---- */
struct mproject *mgr_find_project(struct manager *m, const char *id);
struct mproject *mgr_find_project_by_name(struct manager *m, const char *name);
struct mmember *mgr_find_member(struct manager *m, const char *project_id, const char *user_id);
/* The user's role in p (admins: ROLE_MANAGER of every project). */
enum mgr_role mgr_project_role(struct manager *m, const struct mproject *p, const struct user_rec *u);
/* Whether u may see (and act on) s: its owner, an admin, or a manager of
 * its project. */
bool mgr_session_visible(struct manager *m, const struct user_rec *u, const struct msession *s);
/* Whether u manages a team project (whose members' sessions they see). */
bool mgr_manages_a_project(struct manager *m, const struct user_rec *u);
/* Whether u may enter s (exec, apps, commit): its owner or an admin; a
 * project's manager sees and ends its members' sessions, not more. */
bool mgr_session_enterable(const struct user_rec *u, const struct msession *s);
/* EPERM saying so. */
int mgr_not_enterable(const struct msession *s, struct terr *err);
/* The user's personal project, NULL if none (a removed user). */
struct mproject *mgr_personal_project(struct manager *m, const char *user_id);
/* Makes u's personal project when missing (stored). */
int mgr_personal_project_ensure(struct manager *m, const struct user_rec *u, struct terr *err);
/* Drops a removed user's memberships. */
void mgr_project_user_removed(struct manager *m, const char *user_id);
/* Loads projects and members, makes missing personal projects and gives
 * sessions stored before projects their owner's. After users, sessions
 * and folders are loaded. */
int mgr_projects_load(struct manager *m, struct terr *err);
void mgr_projects_free(struct manager *m);
/* The project a new session of u goes to: the one named (u must be in
 * it; admins may name any team project), else u's one team project, else
 * their personal one; *out borrowed. Errors say what to do. */
int mgr_project_choose(struct manager *m, const struct user_rec *u, const char *name, struct mproject **out,
		       struct terr *err);
bool mgr_project_allows_group(const struct mproject *p, const char *group);
json_t *mgr_project_json(struct manager *m, const struct mproject *p, const struct user_rec *viewer);

/* Ends every RUNNING batch session that has run past its batch_timeout_s
 * (sessions.c): TERMINATING, then ERROR saying so. mu held; called by
 * the scheduler's safety pass, once a second. */
void mgr_batch_timeouts(struct manager *m);

/* ---- presets.c ---- */
int mgr_presets_load(struct manager *m, struct terr *err);
void mgr_presets_free(struct manager *m);

/* ---- fairshare.c ---- */
/* Reads the stored usage (decayed by the time since it was stored). */
void mgr_fairshare_load(struct manager *m);
/* Charges what is held since the last tick (the scheduler's safety pass,
 * once a second); stores the usage once a minute. */
void mgr_fairshare_tick(struct manager *m);
void mgr_fairshare_save(struct manager *m);

/* ---- nodes_admin.c ---- */
/* The resource group of node id (MGR_DEFAULT_GROUP when none set). */
const char *mgr_node_group(const struct manager *m, const char *id);
int mgr_node_groups_load(struct manager *m, struct terr *err);
void mgr_node_groups_free(struct manager *m);

#endif
