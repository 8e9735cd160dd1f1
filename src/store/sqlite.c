/* SQLite backend of struct store_ops: one connection, WAL mode, prepared
 * statements kept for the life of the store. */
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "store/columns.h"
#include "store/migrate.h"
#include "store/sqlgen.h"
#include "store/store.h"

/* The schema's version is kept in the table schema_version and moved
 * by the numbered migrations of migrate.c. PRAGMA user_version, which
 * versions before that table kept (1: no sessions.alloc_json, 2: the
 * rest), stays 2 so that such a version still opens the file. */
#define LEGACY_USER_VERSION 2

/* One list of statements; the enum and the SQL derive from it. The SQL is
 * a template over a table of columns.h, expanded at open
 * (store_sql_expand, sqlgen.h, which lists the % escapes).
 * Users and agents are replaced whole (INSERT OR REPLACE also drops a row
 * that collides on another UNIQUE column, as a user's email). */
#define STORE_STATEMENTS(X) \
	X(USER_PUT, &store_users_table, "INSERT OR REPLACE INTO %T(%C) VALUES(%P)") \
	X(USER_ALL, &store_users_table, "SELECT %R FROM %T ORDER BY created_ms") \
	X(USER_DEL, NULL, "DELETE FROM users WHERE id=?") \
	X(USER_KEYS_DEL, NULL, "DELETE FROM keypairs WHERE user_id=?") \
	X(KEY_PUT, &store_keypairs_table, "INSERT OR REPLACE INTO %T(%C) VALUES(%P)") \
	X(KEY_DEL, NULL, "DELETE FROM keypairs WHERE access_key=?") \
	X(KEY_ALL, &store_keypairs_table, "SELECT %R FROM %T ORDER BY created_ms, access_key") \
	/* An upsert: a status change updates the row in place instead of
	 * deleting and re-inserting it with its index entries. */ \
	X(SESSION_PUT, &store_sessions_table, "INSERT INTO %T(%C) VALUES(%P) ON CONFLICT(id) DO UPDATE SET %U") \
	X(SESSION_ALL, &store_sessions_table, "SELECT %R FROM %T ORDER BY seq") \
	X(SESSION_MAXSEQ, NULL, "SELECT COALESCE(MAX(seq),0) FROM sessions") \
	X(HISTORY_ADD, &store_history_table, "INSERT INTO %T(%C) VALUES(%P)") \
	X(HISTORY_GET, &store_history_table, "SELECT %R FROM %T WHERE session_id=? ORDER BY %O") \
	X(AGENT_PUT, &store_agents_table, "INSERT OR REPLACE INTO %T(%C) VALUES(%P)") \
	X(AGENT_ALL, &store_agents_table, "SELECT %R FROM %T ORDER BY id") \
	X(FOLDER_PUT, &store_folders_table, "INSERT OR REPLACE INTO %T(%C) VALUES(%P)") \
	X(FOLDER_DEL, NULL, "DELETE FROM folders WHERE id=?") \
	X(FOLDER_ALL, &store_folders_table, "SELECT %R FROM %T ORDER BY created_ms") \
	X(PROJECT_PUT, &store_projects_table, "INSERT OR REPLACE INTO %T(%C) VALUES(%P)") \
	X(PROJECT_DEL, NULL, "DELETE FROM projects WHERE id=?") \
	X(PROJECT_MEMBERS_DEL, NULL, "DELETE FROM project_members WHERE project_id=?") \
	X(PROJECT_ALL, &store_projects_table, "SELECT %R FROM %T ORDER BY created_ms, id") \
	X(MEMBER_PUT, &store_members_table, "INSERT OR REPLACE INTO %T(%C) VALUES(%P)") \
	X(MEMBER_DEL, NULL, "DELETE FROM project_members WHERE id=?") \
	X(MEMBER_ALL, &store_members_table, "SELECT %R FROM %T ORDER BY project_id, created_ms, id") \
	X(PRESET_PUT, &store_presets_table, "INSERT OR REPLACE INTO %T(%C) VALUES(%P)") \
	X(PRESET_DEL, NULL, "DELETE FROM presets WHERE name=?") \
	X(PRESET_ALL, &store_presets_table, "SELECT %R FROM %T ORDER BY created_ms, name") \
	X(LOG_PUT, &store_log_tails_table, "INSERT OR REPLACE INTO %T(%C) VALUES(%P)") \
	X(LOG_GET, &store_log_tails_table, "SELECT %R FROM %T WHERE session_id=?") \
	X(KV_GET, NULL, "SELECT value FROM settings WHERE key=?") \
	X(KV_SET, NULL, "INSERT OR REPLACE INTO settings(key,value) VALUES(?,?)")

#define STMT_ENUM(name, table, sql) ST_##name,
enum { STORE_STATEMENTS(STMT_ENUM) ST__COUNT };
#undef STMT_ENUM

static const struct {
	const struct store_table *table;
	const char *sql;
} stmt_def[] = {
#define STMT_DEF(name, table, sql) {table, sql},
	STORE_STATEMENTS(STMT_DEF)
#undef STMT_DEF
};

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

/* Binds the parent's id (when the table has one) and every column of rec,
 * from parameter 1 on, in the order of %C. */
static void bind_record(sqlite3_stmt *st, const struct store_table *t, const char *parent,
			const void *rec)
{
	int i = 1;
	if (t->parent)
		bind_text(st, i++, parent);
	for (size_t k = 0; k < t->ncols; k++, i++) {
		const struct store_column *c = &t->cols[k];
		const void *f = store_cfield(rec, c);
		switch (c->kind) {
		case STORE_COL_TEXT:
			bind_text(st, i, f);
			break;
		case STORE_COL_TEXT_PTR:
			bind_text(st, i, *(char *const *)f);
			break;
		case STORE_COL_BOOL:
			sqlite3_bind_int(st, i, *(const bool *)f);
			break;
		case STORE_COL_INT64:
			sqlite3_bind_int64(st, i, *(const int64_t *)f);
			break;
		case STORE_COL_STATUS:
			bind_text(st, i, session_status_name(*(const enum session_status *)f));
			break;
		case STORE_COL_INT_OPT:
			if (*(const bool *)((const char *)rec + c->flag_off))
				sqlite3_bind_int(st, i, *(const int *)f);
			else
				sqlite3_bind_null(st, i);
			break;
		}
	}
}

/* Fills rec (zeroed by the caller) from the current row of a %R select.
 * The record's TEXT_PTR fields are malloc'd: the caller frees them (for a
 * session, session_rec_clear), also when this fails with -ENOMEM. */
static int read_record(sqlite3_stmt *st, const struct store_table *t, void *rec)
{
	for (size_t k = 0; k < t->ncols; k++) {
		const struct store_column *c = &t->cols[k];
		void *f = store_field(rec, c);
		int i = (int)k;
		switch (c->kind) {
		case STORE_COL_TEXT:
			copy_col(st, i, f, c->size);
			break;
		case STORE_COL_TEXT_PTR:
			*(char **)f = dup_col(st, i);
			if (!*(char **)f && sqlite3_column_type(st, i) != SQLITE_NULL)
				return -ENOMEM;
			break;
		case STORE_COL_BOOL:
			*(bool *)f = sqlite3_column_int(st, i);
			break;
		case STORE_COL_INT64:
			*(int64_t *)f = sqlite3_column_int64(st, i);
			break;
		case STORE_COL_STATUS: {
			char name[32];
			copy_col(st, i, name, sizeof(name));
			int sv = session_status_parse(name);
			/* A name this version does not know: the session
			 * shows as failed instead of being dropped. */
			*(enum session_status *)f = sv < 0 ? SS_ERROR : (enum session_status)sv;
			break;
		}
		case STORE_COL_INT_OPT:
			*(bool *)((char *)rec + c->flag_off) = sqlite3_column_type(st, i) != SQLITE_NULL;
			*(int *)f = sqlite3_column_int(st, i);
			break;
		}
	}
	return 0;
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

static int mig_exec(void *ctx, const char *sql, struct terr *err)
{
	return exec_sql(ctx, sql, err);
}

static int mig_query_int(void *ctx, const char *sql, int64_t *out, struct terr *err)
{
	struct store *s = ctx;
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK)
		return db_error(s, err, "read the schema");
	int rc = sqlite3_step(q);
	*out = rc == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
	sqlite3_finalize(q);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_error(s, err, "read the schema");
	return 0;
}

/* Runs the migrations the file lacks (migrate.h); the data dir's lock
 * keeps other processes out meanwhile. */
static int make_schema(struct store *s, struct terr *err)
{
	struct store_mig_conn c = {.ctx = s, .d = &store_dialect_sqlite, .exec = mig_exec,
				   .query_int = mig_query_int};
	int rc = store_migrate(&c, NULL, err);
	if (rc < 0)
		return rc;
	char sv[40];
	snprintf(sv, sizeof(sv), "PRAGMA user_version=%d;", LEGACY_USER_VERSION);
	return exec_sql(s, sv, err);
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
	rc = exec_sql(s, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
		      "PRAGMA cache_size=-65536; PRAGMA mmap_size=268435456; PRAGMA temp_store=MEMORY;", err);
	if (rc == 0)
		rc = make_schema(s, err);
	if (rc < 0) {
		sqlite_close(s);
		return rc;
	}
	for (int i = 0; i < ST__COUNT; i++) {
		char *sql = store_sql_expand(&store_dialect_sqlite, stmt_def[i].table, stmt_def[i].sql);
		if (!sql) {
			terr_set(err, ENOMEM, "out of memory");
			sqlite_close(s);
			return -ENOMEM;
		}
		rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL);
		free(sql);
		if (rc != SQLITE_OK) {
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
	bind_record(st, &store_users_table, NULL, u);
	return step_done(s, st, err, "save user");
}

static int sqlite_user_load_all(struct store *s, store_user_cb cb, void *ud, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_USER_ALL);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct user_rec u = {0};
		int r = read_record(st, &store_users_table, &u);
		if (r == 0)
			r = cb(ud, &u);
		if (r < 0) {
			sqlite3_reset(st);
			return terr_set(err, -r, "loading users failed");
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : db_error(s, err, "load users");
}

/* Runs the deletion first and then that one by id in one transaction
 * (the caller's, or its own): a row and the rows that belong to it. */
static int delete_with(struct store *s, int first, int then, const char *id, const char *what_first,
		       const char *what, struct terr *err)
{
	bool own = sqlite3_get_autocommit(s->db);
	int rc = own ? sqlite_begin(s, err) : 0;
	sqlite3_stmt *st = rc == 0 ? stmt(s, first) : NULL;
	if (st) {
		bind_text(st, 1, id);
		rc = step_done(s, st, err, what_first);
	}
	if (rc == 0) {
		st = stmt(s, then);
		bind_text(st, 1, id);
		rc = step_done(s, st, err, what);
	}
	if (own && rc == 0)
		rc = sqlite_commit(s, err);
	if (own && rc < 0)
		sqlite_rollback(s);
	return rc;
}

static int sqlite_user_delete(struct store *s, const char *id, struct terr *err)
{
	return delete_with(s, ST_USER_KEYS_DEL, ST_USER_DEL, id, "delete the user's keys", "delete user", err);
}

static int sqlite_keypair_put(struct store *s, const struct keypair_rec *k, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_KEY_PUT);
	bind_record(st, &store_keypairs_table, NULL, k);
	return step_done(s, st, err, "save key");
}

static int sqlite_keypair_delete(struct store *s, const char *access_key, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_KEY_DEL);
	bind_text(st, 1, access_key);
	return step_done(s, st, err, "delete key");
}

static int sqlite_keypair_load_all(struct store *s, store_keypair_cb cb, void *ud, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_KEY_ALL);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct keypair_rec k = {0};
		int cr = read_record(st, &store_keypairs_table, &k);
		if (cr == 0)
			cr = cb(ud, &k);
		if (cr < 0) {
			sqlite3_reset(st);
			return terr_set(err, -cr, "loading keys failed");
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : db_error(s, err, "load keys");
}

static int sqlite_session_put(struct store *s, const struct session_rec *r, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_SESSION_PUT);
	bind_record(st, &store_sessions_table, NULL, r);
	return step_done(s, st, err, "save session");
}

static int sqlite_session_load_all(struct store *s, store_session_cb cb, void *ud, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_SESSION_ALL);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct session_rec r = {0};
		int cr = read_record(st, &store_sessions_table, &r);
		if (cr == 0)
			cr = cb(ud, &r);
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
	bind_record(st, &store_history_table, session_id, h);
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
		arr[cnt] = (struct history_rec){0};
		if (read_record(st, &store_history_table, &arr[cnt]) < 0) {
			free(arr);
			arr = NULL;
			break;
		}
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
	bind_record(st, &store_agents_table, NULL, a);
	return step_done(s, st, err, "save agent");
}

static int sqlite_agent_load_all(struct store *s, store_agent_cb cb, void *ud, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_AGENT_ALL);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct agent_rec a = {0};
		int cr = read_record(st, &store_agents_table, &a);
		if (cr == 0)
			cr = cb(ud, &a);
		if (cr < 0) {
			sqlite3_reset(st);
			return terr_set(err, -cr, "loading agents failed");
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : db_error(s, err, "load agents");
}

static int sqlite_folder_put(struct store *s, const struct folder_rec *f, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_FOLDER_PUT);
	bind_record(st, &store_folders_table, NULL, f);
	return step_done(s, st, err, "save folder");
}

static int sqlite_folder_delete(struct store *s, const char *id, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_FOLDER_DEL);
	bind_text(st, 1, id);
	return step_done(s, st, err, "delete folder");
}

static int sqlite_folder_load_all(struct store *s, store_folder_cb cb, void *ud, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_FOLDER_ALL);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct folder_rec f = {0};
		int cr = read_record(st, &store_folders_table, &f);
		if (cr == 0)
			cr = cb(ud, &f);
		if (cr < 0) {
			sqlite3_reset(st);
			return terr_set(err, -cr, "loading folders failed");
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : db_error(s, err, "load folders");
}

/* The row-by-row loading of one table, for the tables whose records own
 * no strings: each row read into a zeroed record of rec_size on the stack
 * of this function (at most 4 KiB) and given to cb. */
static int load_table(struct store *s, int which, const struct store_table *t,
		      int (*cb)(void *, const void *), void *ud, const char *what, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, which);
	_Alignas(max_align_t) char rec[4096];
	int rc;
	if (t->rec_size > sizeof(rec))
		return terr_set(err, EINVAL, "%s: record too large", what);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		memset(rec, 0, t->rec_size);
		int cr = read_record(st, t, rec);
		if (cr == 0)
			cr = cb(ud, rec);
		if (cr < 0) {
			sqlite3_reset(st);
			return terr_set(err, -cr, "loading %s failed", what);
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : db_error(s, err, what);
}

static int sqlite_project_put(struct store *s, const struct project_rec *p, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_PROJECT_PUT);
	bind_record(st, &store_projects_table, NULL, p);
	return step_done(s, st, err, "save project");
}

static int sqlite_project_delete(struct store *s, const char *id, struct terr *err)
{
	return delete_with(s, ST_PROJECT_MEMBERS_DEL, ST_PROJECT_DEL, id, "delete the project's members",
			   "delete project", err);
}

static int sqlite_project_load_all(struct store *s, store_project_cb cb, void *ud, struct terr *err)
{
	return load_table(s, ST_PROJECT_ALL, &store_projects_table, (int (*)(void *, const void *))cb, ud,
			  "load projects", err);
}

static int sqlite_preset_put(struct store *s, const struct preset_rec *p, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_PRESET_PUT);
	bind_record(st, &store_presets_table, NULL, p);
	return step_done(s, st, err, "save preset");
}

static int sqlite_preset_delete(struct store *s, const char *name, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_PRESET_DEL);
	bind_text(st, 1, name);
	return step_done(s, st, err, "delete preset");
}

static int sqlite_preset_load_all(struct store *s, store_preset_cb cb, void *ud, struct terr *err)
{
	return load_table(s, ST_PRESET_ALL, &store_presets_table, (int (*)(void *, const void *))cb, ud,
			  "load presets", err);
}

static int sqlite_member_put(struct store *s, const struct member_rec *m, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_MEMBER_PUT);
	bind_record(st, &store_members_table, NULL, m);
	return step_done(s, st, err, "save project member");
}

static int sqlite_member_delete(struct store *s, const char *id, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_MEMBER_DEL);
	bind_text(st, 1, id);
	return step_done(s, st, err, "delete project member");
}

static int sqlite_member_load_all(struct store *s, store_member_cb cb, void *ud, struct terr *err)
{
	return load_table(s, ST_MEMBER_ALL, &store_members_table, (int (*)(void *, const void *))cb, ud,
			  "load project members", err);
}

static int sqlite_log_tail_put(struct store *s, const struct log_tail_rec *l, struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_LOG_PUT);
	bind_record(st, &store_log_tails_table, NULL, l);
	return step_done(s, st, err, "save a session's log");
}

static int sqlite_log_tail_get(struct store *s, const char *session_id, struct log_tail_rec *l,
			       struct terr *err)
{
	sqlite3_stmt *st = stmt(s, ST_LOG_GET);
	bind_text(st, 1, session_id);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		sqlite3_reset(st);
		return terr_set(err, ENOENT, "no log is kept for session %s", session_id);
	}
	if (rc != SQLITE_ROW) {
		sqlite3_reset(st);
		return db_error(s, err, "read a session's log");
	}
	*l = (struct log_tail_rec){0};
	rc = read_record(st, &store_log_tails_table, l);
	sqlite3_reset(st);
	return store_log_tail_read(l, rc, err);
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
	.user_delete = sqlite_user_delete,
	.keypair_put = sqlite_keypair_put,
	.keypair_delete = sqlite_keypair_delete,
	.keypair_load_all = sqlite_keypair_load_all,
	.session_put = sqlite_session_put,
	.session_load_all = sqlite_session_load_all,
	.session_max_seq = sqlite_session_max_seq,
	.history_add = sqlite_history_add,
	.history_get = sqlite_history_get,
	.agent_put = sqlite_agent_put,
	.agent_load_all = sqlite_agent_load_all,
	.folder_put = sqlite_folder_put,
	.folder_delete = sqlite_folder_delete,
	.preset_put = sqlite_preset_put,
	.preset_delete = sqlite_preset_delete,
	.preset_load_all = sqlite_preset_load_all,
	.log_tail_put = sqlite_log_tail_put,
	.log_tail_get = sqlite_log_tail_get,
	.project_put = sqlite_project_put,
	.project_delete = sqlite_project_delete,
	.project_load_all = sqlite_project_load_all,
	.member_put = sqlite_member_put,
	.member_delete = sqlite_member_delete,
	.member_load_all = sqlite_member_load_all,
	.folder_load_all = sqlite_folder_load_all,
	.kv_get = sqlite_kv_get,
	.kv_set = sqlite_kv_set,
};

int store_sqlite_copy(const char *from, const char *to, struct terr *err)
{
	sqlite3 *src = NULL, *dst = NULL;
	int rc = sqlite3_open_v2(from, &src, SQLITE_OPEN_READONLY, NULL);
	if (rc != SQLITE_OK) {
		rc = terr_set(err, EIO, "cannot open database %s: %s", from, src ? sqlite3_errmsg(src) : "out of memory");
		goto out;
	}
	mode_t old = umask(077);   /* it holds every user's secret key */
	rc = sqlite3_open_v2(to, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	umask(old);
	if (rc != SQLITE_OK) {
		rc = terr_set(err, EIO, "cannot open database %s: %s", to, dst ? sqlite3_errmsg(dst) : "out of memory");
		goto out;
	}
	sqlite3_busy_timeout(src, 5000);
	sqlite3_busy_timeout(dst, 5000);
	sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
	if (!b) {
		rc = terr_set(err, EIO, "cannot copy %s to %s: %s", from, to, sqlite3_errmsg(dst));
		goto out;
	}
	/* In steps, so that a manager writing meanwhile is not held off for
	 * the whole copy; a write between steps restarts it, which the
	 * busy/locked retry below rides out. */
	int step;
	int tries = 0;
	while ((step = sqlite3_backup_step(b, 256)) == SQLITE_OK || step == SQLITE_BUSY || step == SQLITE_LOCKED) {
		if (step != SQLITE_OK && ++tries > 500)
			break;
		if (step != SQLITE_OK)
			sqlite3_sleep(10);
	}
	sqlite3_backup_finish(b);
	if (step != SQLITE_DONE) {
		rc = terr_set(err, EIO, "cannot copy %s to %s: %s", from, to, sqlite3_errstr(step));
		goto out;
	}
	rc = 0;
out:
	sqlite3_close(src);
	sqlite3_close(dst);
	return rc;
}

int store_sqlite_check(const char *path, struct terr *err)
{
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return terr_set(err, ENOENT, "%s: no database file", path);
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
	if (rc != SQLITE_OK) {
		rc = terr_set(err, EIO, "cannot open database %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
		goto out;
	}
	if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL) != SQLITE_OK ||
	    sqlite3_step(q) != SQLITE_ROW) {
		rc = terr_set(err, EIO, "%s is not an SQLite database: %s", path, sqlite3_errmsg(db));
		goto out;
	}
	const char *ok = (const char *)sqlite3_column_text(q, 0);
	if (!ok || strcmp(ok, "ok")) {
		rc = terr_set(err, EIO, "%s is damaged: integrity_check says %.200s", path, ok ? ok : "nothing");
		goto out;
	}
	sqlite3_finalize(q);
	q = NULL;
	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
			       "('settings', 'users', 'sessions')", -1, &q, NULL) != SQLITE_OK ||
	    sqlite3_step(q) != SQLITE_ROW || sqlite3_column_int(q, 0) != 3) {
		rc = terr_set(err, EINVAL, "%s is an SQLite database but not Tessera's (no users, sessions and settings tables)",
			      path);
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(q);
	sqlite3_close(db);
	return rc;
}
