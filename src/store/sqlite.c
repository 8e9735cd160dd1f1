/* SQLite backend of struct store_ops: one connection, WAL mode, prepared
 * statements kept for the life of the store. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "store/store.h"

#define SCHEMA_VERSION 2

/* One list of statements; the enum and the SQL array derive from it. */
#define STORE_STATEMENTS(X) \
	X(USER_PUT, "INSERT OR REPLACE INTO users(id,email,is_admin,disabled,access_key,secret_key,password_hash,created_ms) VALUES(?,?,?,?,?,?,?,?)") \
	X(USER_ALL, "SELECT id,email,is_admin,disabled,access_key,secret_key,password_hash,created_ms FROM users ORDER BY created_ms") \
	/* An upsert: a status change updates the row in place instead of
	 * deleting and re-inserting it with its index entries. */ \
	X(SESSION_PUT, "INSERT INTO sessions(id,seq,name,owner_id,image,status,status_info,agent_id,container_id,cpu_m,mem,fgpu_m,env_json,startup_command,exit_code,created_ms,started_ms,terminated_ms,alloc_json) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) " \
		"ON CONFLICT(id) DO UPDATE SET seq=excluded.seq,name=excluded.name,owner_id=excluded.owner_id," \
		"image=excluded.image,status=excluded.status,status_info=excluded.status_info,agent_id=excluded.agent_id," \
		"container_id=excluded.container_id,cpu_m=excluded.cpu_m,mem=excluded.mem,fgpu_m=excluded.fgpu_m," \
		"env_json=excluded.env_json,startup_command=excluded.startup_command,exit_code=excluded.exit_code," \
		"created_ms=excluded.created_ms,started_ms=excluded.started_ms,terminated_ms=excluded.terminated_ms," \
		"alloc_json=excluded.alloc_json") \
	X(SESSION_ALL, "SELECT id,seq,name,owner_id,image,status,status_info,agent_id,container_id,cpu_m,mem,fgpu_m,env_json,startup_command,exit_code,created_ms,started_ms,terminated_ms,alloc_json FROM sessions ORDER BY seq") \
	X(SESSION_MAXSEQ, "SELECT COALESCE(MAX(seq),0) FROM sessions") \
	X(HISTORY_ADD, "INSERT INTO session_history(session_id,status,info,at_ms) VALUES(?,?,?,?)") \
	X(HISTORY_GET, "SELECT status,info,at_ms FROM session_history WHERE session_id=? ORDER BY rowid") \
	X(AGENT_PUT, "INSERT OR REPLACE INTO agents(id,url,cpu_m,mem,fgpu_m,version,registered_ms,last_seen_ms) VALUES(?,?,?,?,?,?,?,?)") \
	X(AGENT_ALL, "SELECT id,url,cpu_m,mem,fgpu_m,version,registered_ms,last_seen_ms FROM agents ORDER BY id") \
	X(KV_GET, "SELECT value FROM settings WHERE key=?") \
	X(KV_SET, "INSERT OR REPLACE INTO settings(key,value) VALUES(?,?)")

#define STMT_ENUM(name, sql) ST_##name,
enum { STORE_STATEMENTS(STMT_ENUM) ST__COUNT };
#undef STMT_ENUM
#define STMT_SQL(name, sql) sql,
static const char *const stmt_sql[] = {STORE_STATEMENTS(STMT_SQL)};
#undef STMT_SQL

static const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS settings(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS users("
	" id TEXT PRIMARY KEY, email TEXT NOT NULL UNIQUE, is_admin INTEGER NOT NULL,"
	" disabled INTEGER NOT NULL DEFAULT 0, access_key TEXT NOT NULL UNIQUE,"
	" secret_key TEXT NOT NULL, password_hash TEXT NOT NULL DEFAULT '', created_ms INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS sessions("
	" id TEXT PRIMARY KEY, seq INTEGER NOT NULL UNIQUE, name TEXT NOT NULL, owner_id TEXT NOT NULL,"
	" image TEXT NOT NULL, status TEXT NOT NULL, status_info TEXT NOT NULL, agent_id TEXT NOT NULL,"
	" container_id TEXT NOT NULL, cpu_m INTEGER NOT NULL, mem INTEGER NOT NULL, fgpu_m INTEGER NOT NULL,"
	" env_json TEXT, startup_command TEXT, exit_code INTEGER,"
	" created_ms INTEGER NOT NULL, started_ms INTEGER NOT NULL, terminated_ms INTEGER NOT NULL,"
	" alloc_json TEXT);"
	"CREATE TABLE IF NOT EXISTS session_history("
	" session_id TEXT NOT NULL, status TEXT NOT NULL, info TEXT NOT NULL, at_ms INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS session_history_by_session ON session_history(session_id);"
	"CREATE TABLE IF NOT EXISTS agents("
	" id TEXT PRIMARY KEY, url TEXT NOT NULL, cpu_m INTEGER NOT NULL, mem INTEGER NOT NULL,"
	" fgpu_m INTEGER NOT NULL, version TEXT NOT NULL, registered_ms INTEGER NOT NULL,"
	" last_seen_ms INTEGER NOT NULL);";

struct store {
	sqlite3 *db;
	sqlite3_stmt *st[ST__COUNT];
	char path[4096];
};

static int db_error(struct store *s, struct terr *err, const char *what)
{
	return terr_set(err, EIO, "database %s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

/* Resets a cached statement for its next use. */
static sqlite3_stmt *stmt(struct store *s, int which)
{
	sqlite3_stmt *st = s->st[which];
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return st;
}

static int step_done(struct store *s, sqlite3_stmt *st, struct terr *err, const char *what)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return db_error(s, err, what);
	return 0;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

static void copy_col(sqlite3_stmt *st, int i, char *dst, size_t n)
{
	const unsigned char *v = sqlite3_column_text(st, i);
	util_strlcpy(dst, v ? (const char *)v : "", n);
}

static char *dup_col(sqlite3_stmt *st, int i)
{
	const unsigned char *v = sqlite3_column_text(st, i);
	return v ? strdup((const char *)v) : NULL;
}

static void sqlite_close(struct store *s)
{
	if (!s)
		return;
	for (int i = 0; i < ST__COUNT; i++)
		sqlite3_finalize(s->st[i]);
	sqlite3_close(s->db);
	free(s);
}

static int exec_sql(struct store *s, const char *sql, struct terr *err)
{
	char *msg = NULL;
	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		terr_set(err, EIO, "database %s: %s", s->path, msg ? msg : "error");
		sqlite3_free(msg);
		return -EIO;
	}
	return 0;
}

static int sqlite_open(struct store **out, const char *uri, struct terr *err)
{
	struct store *s = calloc(1, sizeof(*s));
	if (!s)
		return terr_set(err, ENOMEM, "out of memory");
	util_strlcpy(s->path, uri, sizeof(s->path));
	/* The file holds HMAC secrets: create it private. */
	mode_t old = umask(077);
	int rc = sqlite3_open_v2(uri, &s->db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
	umask(old);
	if (rc != SQLITE_OK) {
		terr_set(err, EIO, "cannot open database %s: %s", uri,
			 s->db ? sqlite3_errmsg(s->db) : "out of memory");
		sqlite_close(s);
		return -EIO;
	}
	sqlite3_busy_timeout(s->db, 5000);
	/* WAL + NORMAL: durable across process crashes (the failure the
	 * daemons must survive) at one fsync per checkpoint, not per write. */
	/* A 64 MiB page cache and memory-mapped reads keep a large session
	 * table out of pread(). */
	if (exec_sql(s, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
			"PRAGMA cache_size=-65536; PRAGMA mmap_size=268435456; PRAGMA temp_store=MEMORY;", err) < 0 ||
	    exec_sql(s, schema_sql, err) < 0) {
		sqlite_close(s);
		return -EIO;
	}
	/* Migrations: version 1 lacked sessions.alloc_json. A new file has
	 * version 0 and every column already. */
	sqlite3_stmt *uv;
	int version = 0;
	if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &uv, NULL) == SQLITE_OK) {
		if (sqlite3_step(uv) == SQLITE_ROW)
			version = sqlite3_column_int(uv, 0);
		sqlite3_finalize(uv);
	}
	if (version == 1 && exec_sql(s, "ALTER TABLE sessions ADD COLUMN alloc_json TEXT;", err) < 0) {
		sqlite_close(s);
		return -EIO;
	}
	char sv[32];
	snprintf(sv, sizeof(sv), "PRAGMA user_version=%d;", SCHEMA_VERSION);
	if (exec_sql(s, sv, err) < 0) {
		sqlite_close(s);
		return -EIO;
	}
	for (int i = 0; i < ST__COUNT; i++) {
		if (sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL) != SQLITE_OK) {
			db_error(s, err, "prepare");
			sqlite_close(s);
			return -EIO;
		}
	}
	*out = s;
	return 0;
}

static int sqlite_begin(struct store *s, struct terr *err)
{
	return exec_sql(s, "BEGIN IMMEDIATE", err);
}

static int sqlite_commit(struct store *s, struct terr *err)
{
	return exec_sql(s, "COMMIT", err);
}

static void sqlite_rollback(struct store *s)
{
	exec_sql(s, "ROLLBACK", NULL);
}

static int sqlite_user_put(struct store *s, const struct user_rec *u, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_USER_PUT);
	bind_text(st, 1, u->id);
	bind_text(st, 2, u->email);
	sqlite3_bind_int(st, 3, u->is_admin);
	sqlite3_bind_int(st, 4, u->disabled);
	bind_text(st, 5, u->access_key);
	bind_text(st, 6, u->secret_key);
	bind_text(st, 7, u->password_hash);
	sqlite3_bind_int64(st, 8, u->created_ms);
	return step_done(s, st, err, "save user");
}

static int sqlite_user_load_all(struct store *s, store_user_cb cb, void *ud, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_USER_ALL);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct user_rec u = {0};
		copy_col(st, 0, u.id, sizeof(u.id));
		copy_col(st, 1, u.email, sizeof(u.email));
		u.is_admin = sqlite3_column_int(st, 2);
		u.disabled = sqlite3_column_int(st, 3);
		copy_col(st, 4, u.access_key, sizeof(u.access_key));
		copy_col(st, 5, u.secret_key, sizeof(u.secret_key));
		copy_col(st, 6, u.password_hash, sizeof(u.password_hash));
		u.created_ms = sqlite3_column_int64(st, 7);
		int r = cb(ud, &u);
		if (r < 0) {
			sqlite3_reset(st);
			return terr_set(err, -r, "loading users failed");
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : db_error(s, err, "load users");
}

static int sqlite_session_put(struct store *s, const struct session_rec *r, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_SESSION_PUT);
	bind_text(st, 1, r->id);
	sqlite3_bind_int64(st, 2, r->seq);
	bind_text(st, 3, r->name);
	bind_text(st, 4, r->owner_id);
	bind_text(st, 5, r->image);
	bind_text(st, 6, session_status_name(r->status));
	bind_text(st, 7, r->status_info);
	bind_text(st, 8, r->agent_id);
	bind_text(st, 9, r->container_id);
	sqlite3_bind_int64(st, 10, r->req.cpu_m);
	sqlite3_bind_int64(st, 11, r->req.mem);
	sqlite3_bind_int64(st, 12, r->req.fgpu_m);
	bind_text(st, 13, r->env_json);
	bind_text(st, 14, r->startup_command);
	if (r->has_exit_code)
		sqlite3_bind_int(st, 15, r->exit_code);
	else
		sqlite3_bind_null(st, 15);
	sqlite3_bind_int64(st, 16, r->created_ms);
	sqlite3_bind_int64(st, 17, r->started_ms);
	sqlite3_bind_int64(st, 18, r->terminated_ms);
	bind_text(st, 19, r->alloc_json);
	return step_done(s, st, err, "save session");
}

static int sqlite_session_load_all(struct store *s, store_session_cb cb, void *ud, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_SESSION_ALL);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct session_rec r = {0};
		char status[32];
		copy_col(st, 0, r.id, sizeof(r.id));
		r.seq = sqlite3_column_int64(st, 1);
		copy_col(st, 2, r.name, sizeof(r.name));
		copy_col(st, 3, r.owner_id, sizeof(r.owner_id));
		copy_col(st, 4, r.image, sizeof(r.image));
		copy_col(st, 5, status, sizeof(status));
		int sv = session_status_parse(status);
		r.status = sv < 0 ? SS_ERROR : (enum session_status)sv;
		copy_col(st, 6, r.status_info, sizeof(r.status_info));
		copy_col(st, 7, r.agent_id, sizeof(r.agent_id));
		copy_col(st, 8, r.container_id, sizeof(r.container_id));
		r.req.cpu_m = sqlite3_column_int64(st, 9);
		r.req.mem = sqlite3_column_int64(st, 10);
		r.req.fgpu_m = sqlite3_column_int64(st, 11);
		r.env_json = dup_col(st, 12);
		r.startup_command = dup_col(st, 13);
		r.has_exit_code = sqlite3_column_type(st, 14) != SQLITE_NULL;
		r.exit_code = sqlite3_column_int(st, 14);
		r.created_ms = sqlite3_column_int64(st, 15);
		r.started_ms = sqlite3_column_int64(st, 16);
		r.terminated_ms = sqlite3_column_int64(st, 17);
		r.alloc_json = dup_col(st, 18);
		int cr = cb(ud, &r);
		session_rec_clear(&r);
		if (cr < 0) {
			sqlite3_reset(st);
			return terr_set(err, -cr, "loading sessions failed");
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : db_error(s, err, "load sessions");
}

static int sqlite_session_max_seq(struct store *s, int64_t *out, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_SESSION_MAXSEQ);
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_reset(st);
		return db_error(s, err, "read max seq");
	}
	*out = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return 0;
}

static int sqlite_history_add(struct store *s, const char *session_id,
			      const struct history_rec *h, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_HISTORY_ADD);
	bind_text(st, 1, session_id);
	bind_text(st, 2, session_status_name(h->status));
	bind_text(st, 3, h->info);
	sqlite3_bind_int64(st, 4, h->at_ms);
	return step_done(s, st, err, "save session history");
}

static int sqlite_history_get(struct store *s, const char *session_id,
			      struct history_rec **out, size_t *n, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_HISTORY_GET);
	bind_text(st, 1, session_id);
	size_t cap = 8, cnt = 0;
	struct history_rec *arr = malloc(cap * sizeof(*arr));
	int rc;
	while (arr && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (cnt == cap) {
			struct history_rec *na = realloc(arr, cap * 2 * sizeof(*arr));
			if (!na) {
				free(arr);
				arr = NULL;
				break;
			}
			arr = na;
			cap *= 2;
		}
		char status[32];
		copy_col(st, 0, status, sizeof(status));
		int sv = session_status_parse(status);
		arr[cnt].status = sv < 0 ? SS_ERROR : (enum session_status)sv;
		copy_col(st, 1, arr[cnt].info, sizeof(arr[cnt].info));
		arr[cnt].at_ms = sqlite3_column_int64(st, 2);
		cnt++;
	}
	sqlite3_reset(st);
	if (!arr)
		return terr_set(err, ENOMEM, "out of memory");
	if (rc != SQLITE_DONE) {
		free(arr);
		return db_error(s, err, "load session history");
	}
	*out = arr;
	*n = cnt;
	return 0;
}

static int sqlite_agent_put(struct store *s, const struct agent_rec *a, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_AGENT_PUT);
	bind_text(st, 1, a->id);
	bind_text(st, 2, a->url);
	sqlite3_bind_int64(st, 3, a->capacity.cpu_m);
	sqlite3_bind_int64(st, 4, a->capacity.mem);
	sqlite3_bind_int64(st, 5, a->capacity.fgpu_m);
	bind_text(st, 6, a->version);
	sqlite3_bind_int64(st, 7, a->registered_ms);
	sqlite3_bind_int64(st, 8, a->last_seen_ms);
	return step_done(s, st, err, "save agent");
}

static int sqlite_agent_load_all(struct store *s, store_agent_cb cb, void *ud, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_AGENT_ALL);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct agent_rec a = {0};
		copy_col(st, 0, a.id, sizeof(a.id));
		copy_col(st, 1, a.url, sizeof(a.url));
		a.capacity.cpu_m = sqlite3_column_int64(st, 2);
		a.capacity.mem = sqlite3_column_int64(st, 3);
		a.capacity.fgpu_m = sqlite3_column_int64(st, 4);
		copy_col(st, 5, a.version, sizeof(a.version));
		a.registered_ms = sqlite3_column_int64(st, 6);
		a.last_seen_ms = sqlite3_column_int64(st, 7);
		int cr = cb(ud, &a);
		if (cr < 0) {
			sqlite3_reset(st);
			return terr_set(err, -cr, "loading agents failed");
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : db_error(s, err, "load agents");
}

static int sqlite_kv_get(struct store *s, const char *key, char **value, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_KV_GET);
	bind_text(st, 1, key);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		sqlite3_reset(st);
		return terr_set(err, ENOENT, "setting %s is not set", key);
	}
	if (rc != SQLITE_ROW) {
		sqlite3_reset(st);
		return db_error(s, err, "read setting");
	}
	*value = dup_col(st, 0);
	sqlite3_reset(st);
	return *value ? 0 : terr_set(err, ENOMEM, "out of memory");
}

static int sqlite_kv_set(struct store *s, const char *key, const char *value, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_KV_SET);
	bind_text(st, 1, key);
	bind_text(st, 2, value);
	return step_done(s, st, err, "save setting");
}

const struct store_ops store_sqlite_ops = {
	.name = "sqlite",
	.open = sqlite_open,
	.close = sqlite_close,
	.begin = sqlite_begin,
	.commit = sqlite_commit,
	.rollback = sqlite_rollback,
	.user_put = sqlite_user_put,
	.user_load_all = sqlite_user_load_all,
	.session_put = sqlite_session_put,
	.session_load_all = sqlite_session_load_all,
	.session_max_seq = sqlite_session_max_seq,
	.history_add = sqlite_history_add,
	.history_get = sqlite_history_get,
	.agent_put = sqlite_agent_put,
	.agent_load_all = sqlite_agent_load_all,
	.kv_get = sqlite_kv_get,
	.kv_set = sqlite_kv_set,
};
