/* store/sqlite.c: file mode and WAL, round-trips of every record type,
 * replacement, seq order, transactions, persistence across reopen; files
 * made by older versions open and read as before; the column tables of
 * store/columns.h agree with the records. */
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

static struct store *open_db(void)
{
	struct store *s = NULL;
	struct terr err = {0};
	int rc = ops->open(&s, dbpath, &err);
	if (rc < 0)
		FAILF("open %s: %s", dbpath, err.msg);
	return s;
}

/* Collected sessions (deep copies). */
struct sessions {
	struct session_rec r[16];
	size_t n;
};

static int collect_session(void *ud, const struct session_rec *r)
{
	struct sessions *c = ud;
	if (c->n >= 16)
		return -ENOSPC;
	return session_rec_copy(&c->r[c->n++], r);
}

static void sessions_free(struct sessions *c)
{
	for (size_t i = 0; i < c->n; i++)
		session_rec_clear(&c->r[i]);
	c->n = 0;
}

struct users {
	struct user_rec u[8];
	size_t n;
};

static int collect_user(void *ud, const struct user_rec *u)
{
	struct users *c = ud;
	if (c->n >= 8)
		return -ENOSPC;
	c->u[c->n++] = *u;
	return 0;
}

struct agents {
	struct agent_rec a[8];
	size_t n;
};

static int collect_agent(void *ud, const struct agent_rec *a)
{
	struct agents *c = ud;
	if (c->n >= 8)
		return -ENOSPC;
	c->a[c->n++] = *a;
	return 0;
}

static int stop_cb(void *ud, const struct session_rec *r)
{
	(void)ud;
	(void)r;
	return -ECANCELED;
}

static struct session_rec make_session(const char *id, int64_t seq, const char *name)
{
	struct session_rec r = {0};
	snprintf(r.id, sizeof(r.id), "%s", id);
	r.seq = seq;
	snprintf(r.name, sizeof(r.name), "%s", name);
	snprintf(r.owner_id, sizeof(r.owner_id), "owner1");
	snprintf(r.image, sizeof(r.image), "busybox:1.36");
	r.status = SS_PENDING;
	snprintf(r.status_info, sizeof(r.status_info), "waiting");
	r.req.cpu_m = 500;
	r.req.mem = 256LL << 20;
	r.req.fgpu_m = 0;
	r.created_ms = 1000 + seq;
	return r;
}

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

TEST(users_round_trip)
{
	struct store *s = open_db();
	if (!s)
		return;
	struct terr err = {0};
	struct user_rec a = {.id = "u1", .email = "a@x", .is_admin = true, .disabled = false,
			     .access_key = "AK1", .secret_key = "SK1", .password_hash = "$argon2id$h",
			     .created_ms = 10};
	struct user_rec b = {.id = "u2", .email = "b@x", .is_admin = false, .disabled = true,
			     .access_key = "AK2", .secret_key = "SK2", .password_hash = "",
			     .created_ms = 20};
	CHECK_INT(ops->user_put(s, &b, &err), 0);
	CHECK_INT(ops->user_put(s, &a, &err), 0);
	struct users c = {0};
	CHECK_INT(ops->user_load_all(s, collect_user, &c, &err), 0);
	CHECK_INT(c.n, 2);
	if (c.n == 2) {
		/* ordered by created_ms */
		CHECK_STR(c.u[0].id, "u1");
		CHECK_STR(c.u[0].email, "a@x");
		CHECK(c.u[0].is_admin);
		CHECK(!c.u[0].disabled);
		CHECK_STR(c.u[0].access_key, "AK1");
		CHECK_STR(c.u[0].secret_key, "SK1");
		CHECK_STR(c.u[0].password_hash, "$argon2id$h");
		CHECK_INT(c.u[0].created_ms, 10);
		CHECK_STR(c.u[1].id, "u2");
		CHECK(!c.u[1].is_admin);
		CHECK(c.u[1].disabled);
		CHECK_STR(c.u[1].password_hash, "");
		CHECK_INT(c.u[1].created_ms, 20);
	}
	/* put replaces */
	b.disabled = false;
	CHECK_INT(ops->user_put(s, &b, &err), 0);
	c.n = 0;
	CHECK_INT(ops->user_load_all(s, collect_user, &c, &err), 0);
	CHECK_INT(c.n, 2);
	if (c.n == 2)
		CHECK(!c.u[1].disabled);
	ops->close(s);
}

TEST(sessions_round_trip)
{
	struct store *s = open_db();
	if (!s)
		return;
	struct terr err = {0};
	struct session_rec a = make_session("s-a", 1, "alpha");
	a.env_json = strdup("{\"K\":\"V\",\"X\":\"y z\"}");
	a.startup_command = strdup("python3 train.py");
	a.has_exit_code = true;
	a.exit_code = 137;
	a.status = SS_ERROR;
	snprintf(a.agent_id, sizeof(a.agent_id), "node1");
	snprintf(a.container_id, sizeof(a.container_id), "c0ffee");
	a.req.fgpu_m = 400;
	a.started_ms = 2000;
	a.terminated_ms = 3000;
	snprintf(a.type, sizeof(a.type), STORE_TYPE_BATCH);
	a.oom_kills = 2;
	a.removed = true;
	struct session_rec b = make_session("s-b", 2, "beta");  /* NULL env, NULL command, no exit code */
	struct session_rec z = make_session("s-z", 3, "zero-exit");
	z.has_exit_code = true;
	z.exit_code = 0;  /* present and 0 must differ from absent */
	z.status = SS_TERMINATED;

	CHECK_INT(ops->session_put(s, &z, &err), 0);
	CHECK_INT(ops->session_put(s, &b, &err), 0);
	CHECK_INT(ops->session_put(s, &a, &err), 0);

	struct sessions c = {0};
	CHECK_INT(ops->session_load_all(s, collect_session, &c, &err), 0);
	CHECK_INT(c.n, 3);
	if (c.n == 3) {
		/* seq order, not insertion order */
		CHECK_STR(c.r[0].id, "s-a");
		CHECK_STR(c.r[1].id, "s-b");
		CHECK_STR(c.r[2].id, "s-z");
		const struct session_rec *r = &c.r[0];
		CHECK_INT(r->seq, 1);
		CHECK_STR(r->name, "alpha");
		CHECK_STR(r->owner_id, "owner1");
		CHECK_STR(r->image, "busybox:1.36");
		CHECK_INT(r->status, SS_ERROR);
		CHECK_STR(r->status_info, "waiting");
		CHECK_STR(r->agent_id, "node1");
		CHECK_STR(r->container_id, "c0ffee");
		CHECK_INT(r->req.cpu_m, 500);
		CHECK_INT(r->req.mem, 256LL << 20);
		CHECK_INT(r->req.fgpu_m, 400);
		CHECK_STR(r->env_json, "{\"K\":\"V\",\"X\":\"y z\"}");
		CHECK_STR(r->startup_command, "python3 train.py");
		CHECK(r->has_exit_code);
		CHECK_INT(r->exit_code, 137);
		CHECK_INT(r->created_ms, 1001);
		CHECK_INT(r->started_ms, 2000);
		CHECK_INT(r->terminated_ms, 3000);
		CHECK_STR(r->type, STORE_TYPE_BATCH);
		CHECK_INT(r->oom_kills, 2);
		CHECK(r->removed);

		r = &c.r[1];
		CHECK(r->env_json == NULL);
		CHECK_INT(r->oom_kills, 0);
		CHECK(!r->removed);
		CHECK(r->startup_command == NULL);
		CHECK(!r->has_exit_code);
		CHECK_INT(r->status, SS_PENDING);
		CHECK_STR(r->agent_id, "");

		r = &c.r[2];
		CHECK(r->has_exit_code);
		CHECK_INT(r->exit_code, 0);
		CHECK_INT(r->status, SS_TERMINATED);
	}
	sessions_free(&c);

	int64_t max = -1;
	CHECK_INT(ops->session_max_seq(s, &max, &err), 0);
	CHECK_INT(max, 3);

	/* session_put replaces the whole row: exit code and command cleared */
	free(a.startup_command);
	a.startup_command = NULL;
	a.has_exit_code = false;
	a.status = SS_RUNNING;
	snprintf(a.status_info, sizeof(a.status_info), "running on node1");
	CHECK_INT(ops->session_put(s, &a, &err), 0);
	CHECK_INT(ops->session_load_all(s, collect_session, &c, &err), 0);
	CHECK_INT(c.n, 3);
	if (c.n == 3) {
		CHECK_STR(c.r[0].id, "s-a");
		CHECK_INT(c.r[0].status, SS_RUNNING);
		CHECK_STR(c.r[0].status_info, "running on node1");
		CHECK(c.r[0].startup_command == NULL);
		CHECK(!c.r[0].has_exit_code);
		CHECK_STR(c.r[0].env_json, "{\"K\":\"V\",\"X\":\"y z\"}");
	}
	sessions_free(&c);

	/* A callback error stops the load and is reported. */
	memset(&err, 0, sizeof(err));
	CHECK(ops->session_load_all(s, stop_cb, NULL, &err) < 0);
	CHECK_INT(err.code, ECANCELED);

	session_rec_clear(&a);
	session_rec_clear(&b);
	session_rec_clear(&z);
	ops->close(s);
}

TEST(max_seq_empty_is_zero)
{
	char p[160];
	snprintf(p, sizeof(p), "%s/empty.db", dir);
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	int64_t max = -1;
	CHECK_INT(ops->session_max_seq(s, &max, &err), 0);
	CHECK_INT(max, 0);
	struct sessions c = {0};
	CHECK_INT(ops->session_load_all(s, collect_session, &c, &err), 0);
	CHECK_INT(c.n, 0);
	ops->close(s);
}

TEST(history_and_agents_round_trip)
{
	struct store *s = open_db();
	if (!s)
		return;
	struct terr err = {0};
	struct history_rec h1 = {.status = SS_PENDING, .info = "waiting for a node", .at_ms = 5};
	struct history_rec h2 = {.status = SS_SCHEDULED, .info = "placed on node1", .at_ms = 6};
	struct history_rec h3 = {.status = SS_RUNNING, .info = "", .at_ms = 7};
	struct history_rec other = {.status = SS_CANCELLED, .info = "other", .at_ms = 1};
	CHECK_INT(ops->history_add(s, "s-a", &h1, &err), 0);
	CHECK_INT(ops->history_add(s, "s-other", &other, &err), 0);
	CHECK_INT(ops->history_add(s, "s-a", &h2, &err), 0);
	CHECK_INT(ops->history_add(s, "s-a", &h3, &err), 0);
	struct history_rec *arr = NULL;
	size_t n = 0;
	CHECK_INT(ops->history_get(s, "s-a", &arr, &n, &err), 0);
	CHECK_INT(n, 3);
	if (arr && n == 3) {
		CHECK_INT(arr[0].status, SS_PENDING);
		CHECK_STR(arr[0].info, "waiting for a node");
		CHECK_INT(arr[0].at_ms, 5);
		CHECK_INT(arr[1].status, SS_SCHEDULED);
		CHECK_STR(arr[1].info, "placed on node1");
		CHECK_INT(arr[2].status, SS_RUNNING);
		CHECK_STR(arr[2].info, "");
		CHECK_INT(arr[2].at_ms, 7);
	}
	free(arr);
	arr = NULL;
	CHECK_INT(ops->history_get(s, "nobody", &arr, &n, &err), 0);
	CHECK_INT(n, 0);
	free(arr);

	/* many entries (more than the initial array) */
	for (int i = 0; i < 40; i++) {
		struct history_rec h = {.status = SS_RUNNING, .at_ms = 100 + i};
		snprintf(h.info, sizeof(h.info), "step %d", i);
		CHECK_INT(ops->history_add(s, "s-many", &h, &err), 0);
	}
	arr = NULL;
	CHECK_INT(ops->history_get(s, "s-many", &arr, &n, &err), 0);
	CHECK_INT(n, 40);
	if (arr && n == 40) {
		CHECK_STR(arr[39].info, "step 39");
		CHECK_INT(arr[39].at_ms, 139);
	}
	free(arr);

	struct agent_rec a1 = {.id = "node2", .url = "http://10.0.0.2:6001",
			       .capacity = {.cpu_m = 8000, .mem = 32LL << 30, .fgpu_m = 2000},
			       .version = "0.1.0", .registered_ms = 11, .last_seen_ms = 12};
	struct agent_rec a0 = {.id = "node1", .url = "http://10.0.0.1:6001",
			       .capacity = {.cpu_m = 4000, .mem = 1LL << 44, .fgpu_m = 0},
			       .version = "0.1.0", .registered_ms = 1, .last_seen_ms = 2};
	CHECK_INT(ops->agent_put(s, &a1, &err), 0);
	CHECK_INT(ops->agent_put(s, &a0, &err), 0);
	a1.last_seen_ms = 99;
	CHECK_INT(ops->agent_put(s, &a1, &err), 0);  /* replaces */
	struct agents c = {0};
	CHECK_INT(ops->agent_load_all(s, collect_agent, &c, &err), 0);
	CHECK_INT(c.n, 2);
	if (c.n == 2) {
		CHECK_STR(c.a[0].id, "node1");
		CHECK_INT(c.a[0].capacity.mem, 1LL << 44);
		CHECK_INT(c.a[0].capacity.fgpu_m, 0);
		CHECK_STR(c.a[1].id, "node2");
		CHECK_STR(c.a[1].url, "http://10.0.0.2:6001");
		CHECK_INT(c.a[1].capacity.cpu_m, 8000);
		CHECK_INT(c.a[1].capacity.mem, 32LL << 30);
		CHECK_INT(c.a[1].capacity.fgpu_m, 2000);
		CHECK_STR(c.a[1].version, "0.1.0");
		CHECK_INT(c.a[1].registered_ms, 11);
		CHECK_INT(c.a[1].last_seen_ms, 99);
	}
	ops->close(s);
}

TEST(kv_round_trip_and_missing)
{
	struct store *s = open_db();
	if (!s)
		return;
	struct terr err = {0};
	char *v = NULL;
	int rc = ops->kv_get(s, "no.such.key", &v, &err);
	CHECK_INT(rc, -ENOENT);
	CHECK_INT(err.code, ENOENT);
	CHECK_CONTAINS(err.msg, "no.such.key");
	CHECK(v == NULL);

	CHECK_INT(ops->kv_set(s, "fgpu.per_gpu", "2", &err), 0);
	CHECK_INT(ops->kv_get(s, "fgpu.per_gpu", &v, &err), 0);
	CHECK_STR(v, "2");
	free(v);
	v = NULL;
	CHECK_INT(ops->kv_set(s, "fgpu.per_gpu", "{\"a\": [1, 2]}", &err), 0);
	CHECK_INT(ops->kv_get(s, "fgpu.per_gpu", &v, &err), 0);
	CHECK_STR(v, "{\"a\": [1, 2]}");
	free(v);
	v = NULL;
	CHECK_INT(ops->kv_set(s, "empty", "", &err), 0);
	CHECK_INT(ops->kv_get(s, "empty", &v, &err), 0);
	CHECK_STR(v, "");
	free(v);
	ops->close(s);
}

TEST(transactions_commit_and_rollback)
{
	struct store *s = open_db();
	if (!s)
		return;
	struct terr err = {0};
	CHECK_INT(ops->begin(s, &err), 0);
	struct session_rec r = make_session("s-tx1", 10, "tx-one");
	CHECK_INT(ops->session_put(s, &r, &err), 0);
	CHECK_INT(ops->kv_set(s, "tx.committed", "yes", &err), 0);
	CHECK_INT(ops->commit(s, &err), 0);

	CHECK_INT(ops->begin(s, &err), 0);
	struct session_rec r2 = make_session("s-tx2", 11, "tx-two");
	CHECK_INT(ops->session_put(s, &r2, &err), 0);
	CHECK_INT(ops->kv_set(s, "tx.rolled", "yes", &err), 0);
	struct history_rec h = {.status = SS_PENDING, .info = "rolled", .at_ms = 1};
	CHECK_INT(ops->history_add(s, "s-tx2", &h, &err), 0);
	ops->rollback(s);

	struct sessions c = {0};
	CHECK_INT(ops->session_load_all(s, collect_session, &c, &err), 0);
	int found1 = 0, found2 = 0;
	for (size_t i = 0; i < c.n; i++) {
		found1 |= !strcmp(c.r[i].id, "s-tx1");
		found2 |= !strcmp(c.r[i].id, "s-tx2");
	}
	sessions_free(&c);
	CHECK(found1);
	CHECK(!found2);
	char *v = NULL;
	CHECK_INT(ops->kv_get(s, "tx.committed", &v, &err), 0);
	CHECK_STR(v, "yes");
	free(v);
	v = NULL;
	CHECK_INT(ops->kv_get(s, "tx.rolled", &v, &err), -ENOENT);
	struct history_rec *arr = NULL;
	size_t n = 99;
	CHECK_INT(ops->history_get(s, "s-tx2", &arr, &n, &err), 0);
	CHECK_INT(n, 0);
	free(arr);
	int64_t max = 0;
	CHECK_INT(ops->session_max_seq(s, &max, &err), 0);
	CHECK_INT(max, 10);

	/* After a rollback, a new transaction works. */
	CHECK_INT(ops->begin(s, &err), 0);
	CHECK_INT(ops->kv_set(s, "tx.after", "1", &err), 0);
	CHECK_INT(ops->commit(s, &err), 0);
	ops->close(s);
}

/* Runs last: everything written by the tests above is there after reopen. */
TEST(reopen_finds_everything)
{
	struct store *s = open_db();
	if (!s)
		return;
	struct terr err = {0};
	struct users u = {0};
	CHECK_INT(ops->user_load_all(s, collect_user, &u, &err), 0);
	CHECK_INT(u.n, 2);
	struct sessions c = {0};
	CHECK_INT(ops->session_load_all(s, collect_session, &c, &err), 0);
	CHECK_INT(c.n, 4);
	if (c.n == 4) {
		CHECK_STR(c.r[0].id, "s-a");
		CHECK_STR(c.r[0].env_json, "{\"K\":\"V\",\"X\":\"y z\"}");
		CHECK_STR(c.r[1].id, "s-b");
		CHECK_STR(c.r[2].id, "s-z");
		CHECK(c.r[2].has_exit_code);
		CHECK_INT(c.r[2].exit_code, 0);
		CHECK_STR(c.r[3].id, "s-tx1");
	}
	sessions_free(&c);
	int64_t max = 0;
	CHECK_INT(ops->session_max_seq(s, &max, &err), 0);
	CHECK_INT(max, 10);
	struct history_rec *arr = NULL;
	size_t n = 0;
	CHECK_INT(ops->history_get(s, "s-a", &arr, &n, &err), 0);
	CHECK_INT(n, 3);
	free(arr);
	struct agents a = {0};
	CHECK_INT(ops->agent_load_all(s, collect_agent, &a, &err), 0);
	CHECK_INT(a.n, 2);
	char *v = NULL;
	CHECK_INT(ops->kv_get(s, "tx.after", &v, &err), 0);
	CHECK_STR(v, "1");
	free(v);
	ops->close(s);
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

TEST(record_copy_and_clear)
{
	struct session_rec a = make_session("s1", 1, "n");
	a.env_json = strdup("{}");
	a.startup_command = NULL;
	struct session_rec b;
	CHECK_INT(session_rec_copy(&b, &a), 0);
	CHECK(b.env_json != a.env_json);
	CHECK_STR(b.env_json, "{}");
	CHECK(b.startup_command == NULL);
	CHECK_STR(b.name, "n");
	session_rec_clear(&a);
	session_rec_clear(&b);
	CHECK(a.env_json == NULL);
	CHECK(b.env_json == NULL);
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
	int rc = testlib_done();
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return rc;
}
