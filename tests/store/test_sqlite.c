/* store/sqlite.c: the cases of every backend (store_cases.h); file mode
 * and WAL; files made by older versions (before schema_version) open,
 * migrate and read as before; the column tables of store/columns.h agree
 * with the records. */
#include "store/columns.h"
#include "store/store.h"
#include "testlib.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct store_ops *ops = &store_sqlite_ops;
static char dir[64];
static char dbpath[128];

static void fresh_uri(const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s/%s.db", dir, name);
}

static int raw_exec(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open(path, &db) == SQLITE_OK && sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
	sqlite3_close(db);
	return rc;
}

static long long query_int(const char *path, const char *sql);

static long long raw_int(const char *path, const char *sql)
{
	return query_int(path, sql);
}

#include "store_cases.h"

TEST(open_creates_private_wal_file)
{
	struct store *s = open_db();
	if (!s)
		return;
	struct stat st;
	CHECK_INT(stat(dbpath, &st), 0);
	CHECK_INT(st.st_mode & 0777, 0600);
	ops->close(s);

	sqlite3 *db = NULL;
	CHECK_INT(sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	sqlite3_stmt *q = NULL;
	CHECK_INT(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
	CHECK_INT(sqlite3_step(q), SQLITE_ROW);
	CHECK_STR((const char *)sqlite3_column_text(q, 0), "wal");
	sqlite3_finalize(q);
	sqlite3_close(db);
}

TEST(open_fails_with_message)
{
	struct store *s = NULL;
	struct terr err = {0};
	char p[160];
	snprintf(p, sizeof(p), "%s/no/such/dir/x.db", dir);
	CHECK(ops->open(&s, p, &err) < 0);
	CHECK(s == NULL);
	CHECK_CONTAINS(err.msg, "x.db");
}

/* The schema as the version before columns.h wrote it (schema version 2),
 * word for word: files made by it must open and read as they did. */
static const char old_schema_v2[] =
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

/* Rows as that version wrote them, by column name. */
static const char old_rows[] =
	"INSERT INTO settings(key,value) VALUES('policies','{\"queue\":\"fifo\"}');"
	"INSERT INTO users(id,email,is_admin,disabled,access_key,secret_key,password_hash,created_ms)"
	" VALUES('u1','old@x',1,0,'AKOLD','SKOLD','$argon2id$old',7);"
	"INSERT INTO sessions(id,seq,name,owner_id,image,status,status_info,agent_id,container_id,"
	"cpu_m,mem,fgpu_m,env_json,startup_command,exit_code,created_ms,started_ms,terminated_ms)"
	" VALUES('s-old',5,'old','u1','busybox:1.36','RUNNING','running on local','local','c0ffee',"
	"250,1048576,500,'{\"A\":\"1\"}','sleep 1',NULL,100,200,0);"
	"INSERT INTO sessions(id,seq,name,owner_id,image,status,status_info,agent_id,container_id,"
	"cpu_m,mem,fgpu_m,env_json,startup_command,exit_code,created_ms,started_ms,terminated_ms)"
	" VALUES('s-done',6,'done','u1','busybox:1.36','TERMINATED','','local','',"
	"100,1,0,NULL,NULL,3,101,201,301);"
	"INSERT INTO session_history(session_id,status,info,at_ms) VALUES('s-old','PENDING','queued',100);"
	"INSERT INTO session_history(session_id,status,info,at_ms) VALUES('s-old','RUNNING','',200);"
	"INSERT INTO agents(id,url,cpu_m,mem,fgpu_m,version,registered_ms,last_seen_ms)"
	" VALUES('local','local://',4000,8589934592,1000,'0.1.0',1,2);";

/* Makes a database at path as an older version did: the v2 schema, or
 * with v1 the same without sessions.alloc_json; then old_rows. */
static int make_old_db(const char *path, int version)
{
	sqlite3 *db = NULL;
	if (sqlite3_open(path, &db) != SQLITE_OK) {
		sqlite3_close(db);
		return -1;
	}
	char schema[sizeof(old_schema_v2)];
	snprintf(schema, sizeof(schema), "%s", old_schema_v2);
	if (version == 1) {
		char *cut = strstr(schema, ", alloc_json TEXT);");
		if (!cut) {
			sqlite3_close(db);
			return -1;
		}
		/* Drop the column, keep the rest. */
		memmove(cut, cut + strlen(", alloc_json TEXT"), strlen(cut + strlen(", alloc_json TEXT")) + 1);
	}
	char pragma[64];
	snprintf(pragma, sizeof(pragma), "PRAGMA journal_mode=WAL; PRAGMA user_version=%d;", version);
	char *msg = NULL;
	int rc = sqlite3_exec(db, pragma, NULL, NULL, &msg);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, schema, NULL, NULL, &msg);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, old_rows, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		FAILF("making the old database: %s", msg ? msg : "?");
	sqlite3_free(msg);
	sqlite3_close(db);
	return rc == SQLITE_OK ? 0 : -1;
}

/* One integer from an SQL query on the file at path (-1 on error). */
static long long query_int(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	long long v = -1;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
		v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return v;
}

/* Every table's columns as "name type notnull default pk;..." */
static void table_layout(const char *path, const char *table, char *out, size_t n)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	char sql[96];
	size_t len = 0;
	out[0] = '\0';
	snprintf(sql, sizeof(sql), "PRAGMA table_info(%s)", table);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK) {
		while (sqlite3_step(q) == SQLITE_ROW && len < n) {
			const unsigned char *dflt = sqlite3_column_text(q, 4);
			len += (size_t)snprintf(out + len, n - len, "%s %s %d %s %d;",
						(const char *)sqlite3_column_text(q, 1),
						(const char *)sqlite3_column_text(q, 2),
						sqlite3_column_int(q, 3), dflt ? (const char *)dflt : "-",
						sqlite3_column_int(q, 5));
		}
	}
	sqlite3_finalize(q);
	sqlite3_close(db);
}

/* What old_rows hold, read through the store; then a write of every
 * column, alloc_json included, read back. */
static void check_old_db(const char *path)
{
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, path, &err), 0);
	if (!s) {
		FAILF("open %s: %s", path, err.msg);
		return;
	}
	struct users u = {0};
	CHECK_INT(ops->user_load_all(s, collect_user, &u, &err), 0);
	CHECK_INT(u.n, 1);
	if (u.n == 1) {
		CHECK_STR(u.u[0].id, "u1");
		CHECK_STR(u.u[0].email, "old@x");
		CHECK(u.u[0].is_admin);
		CHECK(!u.u[0].disabled);
		CHECK_STR(u.u[0].access_key, "AKOLD");
		CHECK_STR(u.u[0].secret_key, "SKOLD");
		CHECK_STR(u.u[0].password_hash, "$argon2id$old");
		CHECK_INT(u.u[0].created_ms, 7);
	}
	/* The user's one key is now their first API key (migration 3). */
	CHECK_INT(query_int(path, "SELECT COUNT(*) FROM keypairs WHERE access_key='AKOLD' AND user_id='u1' "
			    "AND secret_key='SKOLD'"), 1);
	struct sessions c = {0};
	CHECK_INT(ops->session_load_all(s, collect_session, &c, &err), 0);
	CHECK_INT(c.n, 2);
	if (c.n == 2) {
		struct session_rec *r = &c.r[0];
		CHECK_STR(r->id, "s-old");
		CHECK_INT(r->seq, 5);
		CHECK_STR(r->name, "old");
		CHECK_STR(r->owner_id, "u1");
		CHECK_STR(r->image, "busybox:1.36");
		CHECK_INT(r->status, SS_RUNNING);
		CHECK_STR(r->status_info, "running on local");
		CHECK_STR(r->agent_id, "local");
		CHECK_STR(r->container_id, "c0ffee");
		CHECK_INT(r->req.cpu_m, 250);
		CHECK_INT(r->req.mem, 1048576);
		CHECK_INT(r->req.fgpu_m, 500);
		CHECK_STR(r->env_json, "{\"A\":\"1\"}");
		CHECK_STR(r->startup_command, "sleep 1");
		CHECK(!r->has_exit_code);
		CHECK_INT(r->created_ms, 100);
		CHECK_INT(r->started_ms, 200);
		CHECK_INT(r->terminated_ms, 0);
		CHECK(r->alloc_json == NULL);
		/* Columns added since: their defaults. */
		CHECK_STR(r->type, STORE_TYPE_INTERACTIVE);
		CHECK_INT(r->oom_kills, 0);
		CHECK(!r->removed);
		r = &c.r[1];
		CHECK_STR(r->id, "s-done");
		CHECK_INT(r->status, SS_TERMINATED);
		CHECK(r->env_json == NULL);
		CHECK(r->startup_command == NULL);
		CHECK(r->has_exit_code);
		CHECK_INT(r->exit_code, 3);
		CHECK_INT(r->terminated_ms, 301);
	}
	int64_t max = 0;
	CHECK_INT(ops->session_max_seq(s, &max, &err), 0);
	CHECK_INT(max, 6);
	struct history_rec *arr = NULL;
	size_t n = 0;
	CHECK_INT(ops->history_get(s, "s-old", &arr, &n, &err), 0);
	CHECK_INT(n, 2);
	if (arr && n == 2) {
		CHECK_INT(arr[0].status, SS_PENDING);
		CHECK_STR(arr[0].info, "queued");
		CHECK_INT(arr[0].at_ms, 100);
		CHECK_INT(arr[1].status, SS_RUNNING);
		CHECK_INT(arr[1].at_ms, 200);
	}
	free(arr);
	struct agents a = {0};
	CHECK_INT(ops->agent_load_all(s, collect_agent, &a, &err), 0);
	CHECK_INT(a.n, 1);
	if (a.n == 1) {
		CHECK_STR(a.a[0].id, "local");
		CHECK_STR(a.a[0].url, "local://");
		CHECK_INT(a.a[0].capacity.cpu_m, 4000);
		CHECK_INT(a.a[0].capacity.mem, 8589934592LL);
		CHECK_INT(a.a[0].capacity.fgpu_m, 1000);
		CHECK_STR(a.a[0].version, "0.1.0");
		CHECK_INT(a.a[0].registered_ms, 1);
		CHECK_INT(a.a[0].last_seen_ms, 2);
	}
	char *v = NULL;
	CHECK_INT(ops->kv_get(s, "policies", &v, &err), 0);
	CHECK_STR(v, "{\"queue\":\"fifo\"}");
	free(v);

	/* The old row updated in place, with the newest column. */
	if (c.n == 2) {
		c.r[0].status = SS_TERMINATED;
		c.r[0].has_exit_code = true;
		c.r[0].exit_code = 0;
		c.r[0].alloc_json = strdup("[{\"index\":0,\"uuid\":\"GPU-1\",\"fgpu_milli\":500}]");
		CHECK_INT(ops->session_put(s, &c.r[0], &err), 0);
	}
	sessions_free(&c);
	CHECK_INT(ops->session_load_all(s, collect_session, &c, &err), 0);
	CHECK_INT(c.n, 2);
	if (c.n == 2) {
		CHECK_STR(c.r[0].id, "s-old");
		CHECK_INT(c.r[0].status, SS_TERMINATED);
		CHECK(c.r[0].has_exit_code);
		CHECK_INT(c.r[0].exit_code, 0);
		CHECK_STR(c.r[0].alloc_json, "[{\"index\":0,\"uuid\":\"GPU-1\",\"fgpu_milli\":500}]");
		CHECK_STR(c.r[0].env_json, "{\"A\":\"1\"}");
	}
	sessions_free(&c);
	ops->close(s);
	CHECK_INT(query_int(path, "PRAGMA user_version"), 2);
	CHECK_INT(query_int(path, "SELECT COUNT(*) FROM sessions WHERE alloc_json IS NOT NULL"), 1);
}

TEST(opens_a_version_2_database)
{
	char p[160];
	snprintf(p, sizeof(p), "%s/old-v2.db", dir);
	if (make_old_db(p, 2) < 0)
		return;
	check_old_db(p);
}

TEST(opens_a_version_1_database_and_adds_alloc_json)
{
	char p[160];
	snprintf(p, sizeof(p), "%s/old-v1.db", dir);
	if (make_old_db(p, 1) < 0)
		return;
	CHECK_INT(query_int(p, "SELECT COUNT(*) FROM pragma_table_info('sessions') WHERE name='alloc_json'"), 0);
	check_old_db(p);
	CHECK_INT(query_int(p, "SELECT COUNT(*) FROM pragma_table_info('sessions') WHERE name='alloc_json'"), 1);
}

/* A new file gets the same tables, columns, types, constraints and
 * defaults as the old schema text, and the same index. */
TEST(new_schema_matches_the_old_one)
{
	char oldp[160], newp[160];
	snprintf(oldp, sizeof(oldp), "%s/layout-old.db", dir);
	snprintf(newp, sizeof(newp), "%s/layout-new.db", dir);
	if (make_old_db(oldp, 2) < 0)
		return;
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, newp, &err), 0);
	if (!s)
		return;
	ops->close(s);
	/* The old file gets the columns added since (type, oom_kills,
	 * removed) at its open: then both layouts agree column for column. */
	s = NULL;
	CHECK_INT(ops->open(&s, oldp, &err), 0);
	if (!s)
		return;
	ops->close(s);
	const char *tables[] = {"settings", "users", "sessions", "session_history", "agents"};
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		char a[2048], b[2048];
		table_layout(oldp, tables[i], a, sizeof(a));
		table_layout(newp, tables[i], b, sizeof(b));
		CHECK(a[0] != '\0');
		CHECK_STR(b, a);
	}
	CHECK_INT(query_int(newp, "SELECT COUNT(*) FROM sqlite_master WHERE type='index' "
			    "AND name='session_history_by_session'"), 1);
	/* Same UNIQUE constraints: their automatic indexes, by table. */
	CHECK_INT(query_int(newp, "SELECT COUNT(*) FROM sqlite_master WHERE type='index'"),
		  query_int(oldp, "SELECT COUNT(*) FROM sqlite_master WHERE type='index'"));
	CHECK_INT(query_int(newp, "PRAGMA user_version"), 2);
}

TEST(column_tables_match_their_records)
{
	struct terr err = {0};
	CHECK_INT(store_tables_check(&err), 0);
	CHECK_STR(err.msg, "");
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/tessera-store-test.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(dbpath, sizeof(dbpath), "%s/state.db", dir);
	RUN(open_creates_private_wal_file);
	RUN(users_round_trip);
	RUN(sessions_round_trip);
	RUN(max_seq_empty_is_zero);
	RUN(history_and_agents_round_trip);
	RUN(kv_round_trip_and_missing);
	RUN(transactions_commit_and_rollback);
	RUN(reopen_finds_everything);
	RUN(open_fails_with_message);
	RUN(record_copy_and_clear);
	RUN(opens_a_version_2_database);
	RUN(opens_a_version_1_database_and_adds_alloc_json);
	RUN(new_schema_matches_the_old_one);
	RUN(column_tables_match_their_records);
	RUN(schema_version_recorded);
	RUN(newer_schema_refused);
	RUN(folders_round_trip);
	RUN(projects_round_trip);
	RUN(user_put_replaces_a_colliding_email);
	RUN(keypairs_round_trip_and_user_delete);
	RUN(migration_3_makes_each_users_key_their_first);
	RUN(presets_default_then_round_trip);
	RUN(migrations_8_and_9_from_version_7);
	RUN(log_tail_round_trip_and_migration_10);
	int rc = testlib_done();
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return rc;
}
