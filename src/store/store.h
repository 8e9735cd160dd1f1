/* Persistent state behind an ops table (docs/architecture.md, "The
 * store"): SQLite for the single machine (store/sqlite.c), PostgreSQL for
 * production (store/postgres.c), chosen by store_open from the `store`
 * setting. The manager holds the live state in memory and writes every
 * change through this interface inside its own lock, so a backend sees one
 * writer at a time; health may be called from another thread. */
#ifndef TESSERA_STORE_STORE_H
#define TESSERA_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/model.h"

#define STORE_ID_MAX 33
#define STORE_NAME_MAX 64
#define STORE_INFO_MAX 512
#define STORE_SSH_KEYS_MAX 16384

struct store;

/* The records. Their columns in a database are listed in store/columns.h:
 * a new field is stored once it has its line there. */
struct user_rec {
	char id[STORE_ID_MAX];
	char email[256];
	bool is_admin;
	bool disabled;
	char access_key[64];
	/* The HMAC secret must be recoverable to verify signatures, so it is
	 * kept as is; the database file is 0600 (docs/admin.md). Passwords are
	 * stored as argon2id hashes only. */
	char secret_key[128];
	char password_hash[256];
	int64_t created_ms;
	/* Their SSH public keys, one OpenSSH line each ("TYPE BASE64
	 * COMMENT\n"), as their sessions' sshd is given them (docs/
	 * user-guide.md, "Working from your own machine"); checked by
	 * manager/sshkeys.c before they get here. */
	char ssh_keys[STORE_SSH_KEYS_MAX];
};

/* One of a user's API keys (keypairs table): a user may have several,
 * each revoked on its own (a revoked key's row is deleted, its secret
 * with it). The key in the user's own access_key/secret_key (its "main"
 * key: the one the webserver signs with for the user's browsers, and
 * admin.conf holds for the admin) is one of them too. */
struct keypair_rec {
	char access_key[64];
	char user_id[STORE_ID_MAX];
	/* Kept as is, as users.secret_key is: a signature is checked with it. */
	char secret_key[128];
	char label[STORE_NAME_MAX];     /* the user's name for it ("laptop"); may be "" */
	int64_t created_ms;
};

struct session_rec {
	char id[STORE_ID_MAX];
	int64_t seq;                    /* creation order: the FIFO key */
	char name[STORE_NAME_MAX];
	char owner_id[STORE_ID_MAX];
	char image[256];
	enum session_status status;
	char status_info[STORE_INFO_MAX];
	char agent_id[STORE_NAME_MAX];
	char container_id[80];
	struct res req;
	char *env_json;                 /* owned JSON object text, NULL = {} */
	char *startup_command;          /* owned, may be NULL */
	/* Owned JSON array of device shares [{"index","uuid","fgpu_milli"}],
	 * NULL when no GPU: the per-device allocation map, kept so a restart
	 * restores exactly what each device has given out. */
	char *alloc_json;
	bool has_exit_code;
	int exit_code;
	int64_t created_ms, started_ms, terminated_ms;
	/* "interactive" (runs until removed) or "batch" (ends with its
	 * startup command); STORE_TYPE_* below. */
	char type[16];
	/* Processes of the session the kernel killed for passing its memory
	 * limit, as last counted by its agent (the cgroup's oom_kill). */
	int64_t oom_kills;
	/* An ended session was removed (`session rm`): hidden from the list
	 * without --all, as TERMINATED ones are. */
	bool removed;
	/* Its processes run as root (asked at create, allowed by the owner's
	 * policy); else as the image's work user. */
	bool run_as_root;
	/* The session's app secret (docs/apps.md): 64 hex characters made at
	 * create, given to its runner and to the proxy, never to users. */
	char app_secret[65];
	/* Where its runner's app port is published ("HOST:PORT"), as its
	 * agent reported it; "" when unknown or the container has none. */
	char app_endpoint[96];
	/* Owned JSON array of the folders it mounts, NULL when none:
	 * [{"folder_id","name","target","ro","auto"}] (docs/folders.md). */
	char *mounts_json;
	/* The project it belongs to (project_rec.id); "" only in a record
	 * stored before projects, read as the owner's personal project. */
	char project_id[STORE_ID_MAX];
	/* The resource group it may run in (docs/scheduling.md). */
	char resource_group[STORE_NAME_MAX];
	int64_t priority;               /* higher goes first; 0 by default */
	/* It may be ended (PREEMPTED) to make room for another; the times it
	 * was. */
	bool preemptible;
	int64_t preemptions;
	/* A cluster session (docs/user-guide.md, "Distributed training") is
	 * one record per container: main1 (role "main", idx 1), whose record
	 * is the session as users see it, and sub1, sub2... (role "sub", idx
	 * 1..), which name it in cluster_main. Every record of one session
	 * has its cluster_size and cluster_mode; a one-container session has
	 * size 1, role "main". cluster_ssh_seed: the session's SSH key (an
	 * Ed25519 seed, 64 hex) on the main's record, "" on the others. */
	int64_t cluster_size;
	char cluster_mode[16];
	char cluster_role[16];
	int64_t cluster_idx;
	char cluster_main[STORE_ID_MAX];
	char cluster_ssh_seed[65];
	/* The full launcher's (docs/api.md, "POST /v1/sessions"): not started
	 * before starts_at_ms (0: as soon as it fits); a batch session ended
	 * once it has run batch_timeout_s (0: no limit); the ports listed as
	 * its apps from the start, "8080,8888" ("": none). */
	int64_t starts_at_ms;
	int64_t batch_timeout_s;
	char preopen_ports[128];
};

#define STORE_CLUSTER_SINGLE_NODE "single-node"
#define STORE_CLUSTER_MULTI_NODE "multi-node"
#define STORE_CLUSTER_MAIN "main"
#define STORE_CLUSTER_SUB "sub"

#define STORE_TYPE_INTERACTIVE "interactive"
#define STORE_TYPE_BATCH "batch"

struct history_rec {
	enum session_status status;
	char info[STORE_INFO_MAX];
	int64_t at_ms;
};

/* The last of an ended session's log, read from its container just
 * before the container is removed (docs/api.md, "GET
 * /v1/sessions/{ref}/logs"), so that a finished session's page can still
 * show it. text is valid UTF-8 without NUL bytes, at most
 * STORE_LOG_TAIL_MAX bytes, ending at a line's end. */
struct log_tail_rec {
	char session_id[STORE_ID_MAX];
	char *text;                     /* owned */
	int64_t saved_ms;
};
#define STORE_LOG_TAIL_MAX (64 * 1024)

struct agent_rec {
	char id[STORE_NAME_MAX];
	char url[256];
	struct res capacity;
	char version[32];
	int64_t registered_ms;
	int64_t last_seen_ms;
};

/* A user's data folder (docs/folders.md): its directory is HOSTPATH/ID on
 * the storage host it names, or HOSTPATH/.trash/ID while trashed. */
struct folder_rec {
	char id[STORE_ID_MAX];
	char name[STORE_NAME_MAX];
	char owner_id[STORE_ID_MAX];
	char host[STORE_NAME_MAX];
	int64_t quota_bytes;            /* 0: no quota */
	int64_t created_ms;
	int64_t trashed_ms;             /* 0: live */
	/* JSON array [{"user_id","permission":"ro"|"rw"}]; "" reads as []. */
	char shares[2048];
	/* The team project it belongs to, shared with its members; "": the
	 * owner's own. Its managers may write; its members as
	 * project_permission says ("rw" or "ro"). */
	char project_id[STORE_ID_MAX];
	char project_permission[16];
};

/* A project (team): sessions and folders belong to one, its quota holds
 * beside its users' policies, and fair share is between projects first
 * (docs/scheduling.md). */
struct project_rec {
	char id[STORE_ID_MAX];
	char name[STORE_NAME_MAX];
	char description[256];
	/* Made for one user (their first project, named after them): its
	 * members are that user alone. */
	bool personal;
	int64_t weight_milli;           /* fair-share weight x 1000 */
	struct res max;                 /* quota; 0: no limit of that kind */
	int64_t max_sessions;           /* 0: no limit */
	char groups[512];               /* resource groups allowed, "a,b"; "": all */
	int64_t created_ms;
};

/* A user's membership of a project. */
struct member_rec {
	char id[2 * STORE_ID_MAX];      /* "PROJECT_ID:USER_ID" */
	char project_id[STORE_ID_MAX];
	char user_id[STORE_ID_MAX];
	char role[16];                  /* STORE_ROLE_* */
	int64_t weight_milli;           /* fair share within the project x 1000 */
	int64_t created_ms;
};
#define STORE_ROLE_MEMBER "member"
#define STORE_ROLE_MANAGER "manager"
/* A resource preset (docs/admin.md, "Resource presets"): a named
 * amount of CPU, memory and fGPU the launcher offers, made by admins;
 * for one resource group, or for every group when resource_group is "". */
struct preset_rec {
	char name[STORE_NAME_MAX];
	struct res res;
	char resource_group[STORE_NAME_MAX];
	int64_t created_ms;
};
typedef int (*store_preset_cb)(void *ud, const struct preset_rec *p);
typedef int (*store_project_cb)(void *ud, const struct project_rec *p);
typedef int (*store_member_cb)(void *ud, const struct member_rec *m);

typedef int (*store_folder_cb)(void *ud, const struct folder_rec *f);
typedef int (*store_user_cb)(void *ud, const struct user_rec *u);
typedef int (*store_keypair_cb)(void *ud, const struct keypair_rec *k);
typedef int (*store_session_cb)(void *ud, const struct session_rec *s);
typedef int (*store_agent_cb)(void *ud, const struct agent_rec *a);

/* A store on a server can be lost and come back (store_ops.health). */
enum store_health {
	STORE_UP,
	STORE_DOWN,    /* unreachable; the backend reconnects when asked */
	STORE_FENCED,  /* another manager became the active one meanwhile */
};

/* Called by lead between its tries; it may block about a second. true:
 * stop waiting. standby_on: where the store is (as its log lines name it,
 * without credentials) when another manager is active on it, so this one
 * is a standby; NULL when the database cannot be reached. */
typedef bool (*store_wait_fn)(void *ud, const char *standby_on);

struct store_ops {
	const char *name;
	/* uri: a file path for SQLite, a libpq URI or keyword string for
	 * PostgreSQL. Brings the schema to this binary's version first
	 * (store/migrate.h): a newer one is refused (-EPROTO). While the
	 * database is unreachable, ops fail with -EAGAIN and a message saying
	 * so (an API answers 503). */
	int (*open)(struct store **out, const char *uri, struct terr *err);
	void (*close)(struct store *s);
	/* Group writes into one transaction (one fsync). Not nested. */
	int (*begin)(struct store *s, struct terr *err);
	int (*commit)(struct store *s, struct terr *err);
	void (*rollback)(struct store *s);

	int (*user_put)(struct store *s, const struct user_rec *u, struct terr *err);
	int (*user_load_all)(struct store *s, store_user_cb cb, void *ud, struct terr *err);
	/* Deletes the user's row and every key of theirs (one transaction
	 * unless the caller's is open). */
	int (*user_delete)(struct store *s, const char *id, struct terr *err);

	/* API keys: insert or replace by access key; delete by access key
	 * (revocation); every key, oldest first. */
	int (*keypair_put)(struct store *s, const struct keypair_rec *k, struct terr *err);
	int (*keypair_delete)(struct store *s, const char *access_key, struct terr *err);
	int (*keypair_load_all)(struct store *s, store_keypair_cb cb, void *ud, struct terr *err);

	/* Insert or replace the whole row. */
	int (*session_put)(struct store *s, const struct session_rec *r, struct terr *err);
	/* Every session, in seq order. The callback's record is borrowed. */
	int (*session_load_all)(struct store *s, store_session_cb cb, void *ud, struct terr *err);
	/* Largest seq ever stored (0 when none). */
	int (*session_max_seq)(struct store *s, int64_t *out, struct terr *err);

	int (*history_add)(struct store *s, const char *session_id,
			   const struct history_rec *h, struct terr *err);
	/* *out is a malloc'd array in time order; caller frees. */
	int (*history_get)(struct store *s, const char *session_id,
			   struct history_rec **out, size_t *n, struct terr *err);

	int (*agent_put)(struct store *s, const struct agent_rec *a, struct terr *err);
	int (*agent_load_all)(struct store *s, store_agent_cb cb, void *ud, struct terr *err);

	/* Insert or replace; delete by id (a purged folder). */
	int (*folder_put)(struct store *s, const struct folder_rec *f, struct terr *err);
	int (*folder_delete)(struct store *s, const char *id, struct terr *err);
	int (*folder_load_all)(struct store *s, store_folder_cb cb, void *ud, struct terr *err);
	/* Projects and their members: insert or replace, delete by id, all
	 * (projects oldest first; members by project, oldest first).
	 * project_delete deletes its members too (one transaction unless
	 * the caller's is open). */
	int (*project_put)(struct store *s, const struct project_rec *p, struct terr *err);
	int (*project_delete)(struct store *s, const char *id, struct terr *err);
	int (*project_load_all)(struct store *s, store_project_cb cb, void *ud, struct terr *err);
	int (*member_put)(struct store *s, const struct member_rec *m, struct terr *err);
	int (*member_delete)(struct store *s, const char *id, struct terr *err);
	int (*member_load_all)(struct store *s, store_member_cb cb, void *ud, struct terr *err);

	/* Resource presets: insert or replace by name, delete by name,
	 * every one (oldest first). */
	int (*preset_put)(struct store *s, const struct preset_rec *p, struct terr *err);
	int (*preset_delete)(struct store *s, const char *name, struct terr *err);
	int (*preset_load_all)(struct store *s, store_preset_cb cb, void *ud, struct terr *err);

	/* The last of an ended session's log: insert or replace by session;
	 * log_tail_get fills *l (l->text malloc'd, the caller frees it) or
	 * returns -ENOENT when none was kept. */
	int (*log_tail_put)(struct store *s, const struct log_tail_rec *l, struct terr *err);
	int (*log_tail_get)(struct store *s, const char *session_id, struct log_tail_rec *l, struct terr *err);

	/* Cluster settings. kv_get: -ENOENT when unset; *value malloc'd. */
	int (*kv_get)(struct store *s, const char *key, char **value, struct terr *err);
	int (*kv_set)(struct store *s, const char *key, const char *value, struct terr *err);

	/* The rest is NULL in a backend that only one process opens (SQLite:
	 * the data dir's lock keeps others out) and that cannot be lost. */

	/* Makes this process the one active manager of the database (an
	 * advisory lock, held until close or until the connection is lost):
	 * returns 0 once it is. While another one is, it logs once that it
	 * waits as a standby and tries again after each wait(ud); wait NULL:
	 * -EBUSY at once; wait returning true: -ECANCELED. */
	int (*lead)(struct store *s, store_wait_fn wait, void *ud, struct terr *err);
	/* Where the store stands. reconnect: when down, try to connect again
	 * (at most once a second; never longer than the connect timeout), and
	 * when up, check the connection (at most once a second). *epoch (may
	 * be NULL) grows at each reconnection: writes made before it may
	 * have been lost, and the caller writes its state again. */
	enum store_health (*health)(struct store *s, bool reconnect, uint64_t *epoch);
	/* "PostgreSQL at HOST:PORT/DB": how messages name the database. */
	const char *(*where)(struct store *s);
};

extern const struct store_ops store_sqlite_ops;
extern const struct store_ops store_pg_ops;

/* Opens the store a `store` setting names: NULL or "" is SQLite in
 * DATA_DIR/tessera.db; "postgresql://..." or "postgres://..." (libpq
 * URIs, "?host=/socket/dir" allowed) or a libpq keyword string
 * ("host=... dbname=...") is PostgreSQL. *ops gets the backend, *where
 * how to name it in messages (the file, or the server without password). */
int store_open(const char *setting, const char *data_dir, const struct store_ops **ops,
	       struct store **out, char *where, size_t n, struct terr *err);

/* Whether a `store` setting names PostgreSQL (the check store_open uses). */
bool store_setting_is_pg(const char *setting);

/* Copies the SQLite database at from onto to (created 0600 when absent,
 * else replaced page by page) with SQLite's online backup API: a
 * consistent snapshot even while a manager writes to from (WAL mode), and
 * a replacement of to that goes through its journal, so readers of to
 * never see half of it. Used by `tessera admin backup` and `restore`. */
int store_sqlite_copy(const char *from, const char *to, struct terr *err);
/* Checks that path is a sound Tessera database without changing it:
 * PRAGMA integrity_check says ok and it has the settings table. */
int store_sqlite_check(const char *path, struct terr *err);

/* Frees the owned strings of a session record (not the record itself). */
void session_rec_clear(struct session_rec *r);
/* Deep copy: dst gets its own strings. */
int session_rec_copy(struct session_rec *dst, const struct session_rec *src);
/* For the backends' log_tail_get: the end of reading l's row, whose
 * read_record returned read_rc (l->text then "" for a NULL; -ENOMEM
 * with l->text freed on failure). */
int store_log_tail_read(struct log_tail_rec *l, int read_rc, struct terr *err);

#endif
