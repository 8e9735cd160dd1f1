/* store/postgres.c on a real PostgreSQL 15: the cases of every backend
 * (store_cases.h), then what only a server has: one active manager per
 * database (the advisory lock), the loss and return of the server while
 * the store is open (503-style errors, history kept, reconnection, the
 * epoch), a leader fenced when another took the lock meanwhile, and a
 * database dumped with pg_dumpall and restored the seeds' way.
 *
 * Run by tests/pg/pgcluster.sh run (meson: store_postgres), which starts
 * a throwaway cluster and sets TESSERA_TEST_PG (its base URI) and
 * TESSERA_TEST_PG_DIR; TESSERA_PGCLUSTER names the script, to stop and
 * start the cluster mid-test. */
#include "store/columns.h"
#include "store/store.h"
#include "testlib.h"

#include <libpq-fe.h>
#include <stdlib.h>
#include <unistd.h>

static const struct store_ops *ops = &store_pg_ops;
static char dir[64];  /* unused by the shared cases; kept for their names */
static char dbpath[512];
static const char *base;  /* postgresql://tessera@127.0.0.1:PORT */

static void quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

static int admin_exec(const char *db, const char *sql)
{
	char uri[512];
	snprintf(uri, sizeof(uri), "%s/%s", base, db);
	PGconn *c = PQconnectdb(uri);
	PQsetNoticeProcessor(c, quiet, NULL);
	int rc = -1;
	if (PQstatus(c) == CONNECTION_OK) {
		PGresult *r = PQexec(c, sql);
		rc = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK ? 0 : -1;
		if (rc < 0)
			fprintf(stderr, "%s: %s", sql, PQresultErrorMessage(r));
		PQclear(r);
	} else {
		fprintf(stderr, "connect %s: %s", uri, PQerrorMessage(c));
	}
	PQfinish(c);
	return rc;
}

/* A new empty database named store_NAME. */
static void fresh_uri(const char *name, char *out, size_t n)
{
	char sql[200];
	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS store_%s WITH (FORCE)", name);
	admin_exec("postgres", sql);
	snprintf(sql, sizeof(sql), "CREATE DATABASE store_%s", name);
	if (admin_exec("postgres", sql) < 0)
		FAILF("cannot create database store_%s", name);
	snprintf(out, n, "%s/store_%s", base, name);
}

static int raw_exec(const char *uri, const char *sql)
{
	PGconn *c = PQconnectdb(uri);
	PQsetNoticeProcessor(c, quiet, NULL);
	int rc = -1;
	if (PQstatus(c) == CONNECTION_OK) {
		PGresult *r = PQexec(c, sql);
		rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -1;
		PQclear(r);
	}
	PQfinish(c);
	return rc;
}

static long long raw_int(const char *uri, const char *sql)
{
	PGconn *c = PQconnectdb(uri);
	PQsetNoticeProcessor(c, quiet, NULL);
	long long v = -1;
	if (PQstatus(c) == CONNECTION_OK) {
		PGresult *r = PQexec(c, sql);
		if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
			v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
		PQclear(r);
	}
	PQfinish(c);
	return v;
}

#include "store_cases.h"

static int cluster(const char *verb)
{
	const char *script = getenv("TESSERA_PGCLUSTER");
	const char *pgdir = getenv("TESSERA_TEST_PG_DIR");
	if (!script || !pgdir)
		return -1;
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "'%s' %s '%s'", script, verb, pgdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Asks health to reconnect until it is up; bounded (the server is back
 * once pgcluster.sh returns). */
static enum store_health until_up(struct store *s, uint64_t *epoch)
{
	enum store_health h = STORE_DOWN;
	for (int i = 0; i < 100 && (h = ops->health(s, true, epoch)) == STORE_DOWN; i++)
		usleep(100 * 1000);
	return h;
}

/* Writes inside a transaction are pipelined (postgres.c, PIPE_MAX): more
 * than one batch of them, read back inside the transaction (read your
 * writes) and after the commit; a write that fails is reported by the
 * commit, which then rolls everything back, and the next transaction
 * works. */
TEST(pipelined_writes_in_a_transaction)
{
	char p[512];
	fresh_uri("pipeline", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	CHECK_INT(ops->begin(s, &err), 0);
	int rc = 0;
	for (int i = 1; i <= 2500 && rc == 0; i++) {
		char id[32], name[32];
		snprintf(id, sizeof(id), "s-pipe-%d", i);
		snprintf(name, sizeof(name), "pipe-%d", i);
		struct session_rec r = make_session(id, i, name);
		rc = ops->session_put(s, &r, &err);
		struct history_rec h = {.status = SS_PENDING, .info = "created", .at_ms = i};
		if (rc == 0)
			rc = ops->history_add(s, id, &h, &err);
	}
	CHECK_INT(rc, 0);
	int64_t max = 0;
	CHECK_INT(ops->session_max_seq(s, &max, &err), 0);
	CHECK_INT(max, 2500);
	CHECK_INT(ops->kv_set(s, "pipe.after-read", "1", &err), 0);
	CHECK_INT(ops->commit(s, &err), 0);
	CHECK_INT(raw_int(p, "SELECT count(*) FROM sessions"), 2500);
	CHECK_INT(raw_int(p, "SELECT count(*) FROM session_history"), 2500);
	CHECK_INT(raw_int(p, "SELECT count(*) FROM settings WHERE key = 'pipe.after-read'"), 1);

	/* A write the database refuses, in the middle of a transaction. */
	CHECK_INT(raw_exec(p, "ALTER TABLE settings ADD CONSTRAINT no_bad CHECK (key <> 'pipe.bad')"), 0);
	CHECK_INT(ops->begin(s, &err), 0);
	CHECK_INT(ops->kv_set(s, "pipe.before", "1", &err), 0);
	ops->kv_set(s, "pipe.bad", "1", &err);   /* pipelined: its error may come later */
	ops->kv_set(s, "pipe.after", "1", &err);
	memset(&err, 0, sizeof(err));
	CHECK_INT(ops->commit(s, &err), -EIO);
	CHECK_CONTAINS(err.msg, "no_bad");
	CHECK_INT(raw_int(p, "SELECT count(*) FROM settings WHERE key LIKE 'pipe.b%' OR key = 'pipe.after'"), 0);
	CHECK_INT(ops->health(s, false, NULL), STORE_UP);
	/* the connection is usable: a new transaction, and a write outside one */
	CHECK_INT(ops->begin(s, &err), 0);
	CHECK_INT(ops->kv_set(s, "pipe.next", "1", &err), 0);
	CHECK_INT(ops->commit(s, &err), 0);
	CHECK_INT(ops->kv_set(s, "pipe.bad", "1", &err), -EIO);
	CHECK_INT(raw_int(p, "SELECT count(*) FROM settings WHERE key = 'pipe.next'"), 1);
	ops->close(s);
}

TEST(one_leader_per_database)
{
	char p[512];
	fresh_uri("lead", p, sizeof(p));
	struct store *a = NULL, *b = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&a, p, &err), 0);
	CHECK_INT(ops->open(&b, p, &err), 0);
	if (!a || !b)
		return;
	CHECK_INT(ops->lead(a, NULL, NULL, &err), 0);
	memset(&err, 0, sizeof(err));
	CHECK_INT(ops->lead(b, NULL, NULL, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "another manager is active");
	/* Once the first is gone (its session closed: a crash does the
	 * same), the standby takes over. */
	ops->close(a);
	/* The server ends a's session a moment after the close. */
	int rc = -EBUSY;
	for (int i = 0; i < 200 && rc == -EBUSY; i++) {
		rc = ops->lead(b, NULL, NULL, &err);
		if (rc == -EBUSY)
			usleep(20 * 1000);
	}
	CHECK_INT(rc, 0);
	ops->close(b);
}

static int waits;
static struct store *holder;

/* Stands for the daemon's one-second wait for a signal. */
static bool close_holder_on_third_wait(void *ud, const char *standby_on)
{
	(void)ud;
	/* the holder is alive: a standby, told where */
	CHECK(standby_on != NULL && strstr(standby_on, "standby") != NULL);
	usleep(20 * 1000);
	if (++waits == 3) {
		ops->close(holder);
		holder = NULL;
	}
	return false;
}

static bool give_up(void *ud, const char *standby_on)
{
	(void)ud;
	(void)standby_on;
	return true;
}

TEST(standby_waits_then_takes_over)
{
	char p[512];
	fresh_uri("standby", p, sizeof(p));
	struct store *b = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&holder, p, &err), 0);
	CHECK_INT(ops->open(&b, p, &err), 0);
	if (!holder || !b)
		return;
	CHECK_INT(ops->lead(holder, NULL, NULL, &err), 0);
	CHECK_INT(ops->lead(b, give_up, NULL, &err), -ECANCELED);
	waits = 0;
	CHECK_INT(ops->lead(b, close_holder_on_third_wait, NULL, &err), 0);
	/* It waited while the holder lived; the server releases the lock
	 * when the holder's session has ended, a moment after its close. */
	CHECK(waits >= 3);
	ops->close(b);
	if (holder)
		ops->close(holder);
}

TEST(server_restart_while_open)
{
	char p[512];
	fresh_uri("restart", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	CHECK_INT(ops->lead(s, NULL, NULL, &err), 0);
	uint64_t e0 = 0, e1 = 0;
	CHECK_INT(ops->health(s, false, &e0), STORE_UP);
	struct session_rec r = make_session("s-r", 1, "restart");
	CHECK_INT(ops->session_put(s, &r, &err), 0);
	struct history_rec h1 = {.status = SS_PENDING, .info = "before", .at_ms = 1};
	CHECK_INT(ops->history_add(s, "s-r", &h1, &err), 0);

	CHECK_INT(cluster("stop"), 0);
	memset(&err, 0, sizeof(err));
	r.status = SS_RUNNING;
	CHECK_INT(ops->session_put(s, &r, &err), -EAGAIN);
	CHECK_CONTAINS(err.msg, "the database is unavailable");
	CHECK_CONTAINS(err.msg, "127.0.0.1");
	CHECK_INT(ops->health(s, false, NULL), STORE_DOWN);
	/* Fails at once while down, and a transaction cannot start. */
	CHECK_INT(ops->kv_set(s, "k", "v", &err), -EAGAIN);
	CHECK_INT(ops->begin(s, &err), -EAGAIN);
	/* A history line outside a transaction is kept for later. */
	struct history_rec h2 = {.status = SS_RUNNING, .info = "while down", .at_ms = 2};
	CHECK_INT(ops->history_add(s, "s-r", &h2, &err), -EAGAIN);
	CHECK_CONTAINS(err.msg, "kept");
	/* Still down: reconnecting fails and says so. */
	CHECK_INT(ops->health(s, true, NULL), STORE_DOWN);

	CHECK_INT(cluster("restart"), 0);
	CHECK_INT(until_up(s, &e1), STORE_UP);
	CHECK(e1 > e0);
	struct history_rec *arr = NULL;
	size_t n = 0;
	CHECK_INT(ops->history_get(s, "s-r", &arr, &n, &err), 0);
	CHECK_INT(n, 2);
	if (arr && n == 2) {
		CHECK_STR(arr[0].info, "before");
		CHECK_STR(arr[1].info, "while down");
	}
	free(arr);
	/* Readers reconnect on their own; writes go on. */
	CHECK_INT(ops->session_put(s, &r, &err), 0);
	struct sessions c = {0};
	CHECK_INT(ops->session_load_all(s, collect_session, &c, &err), 0);
	CHECK_INT(c.n, 1);
	if (c.n == 1)
		CHECK_INT(c.r[0].status, SS_RUNNING);
	sessions_free(&c);
	/* It still holds the lock: another cannot lead. */
	struct store *o = NULL;
	CHECK_INT(ops->open(&o, p, &err), 0);
	if (o) {
		CHECK_INT(ops->lead(o, NULL, NULL, &err), -EBUSY);
		ops->close(o);
	}
	session_rec_clear(&r);
	ops->close(s);
}

/* A server restart noticed by nobody for a while (an idle manager): the
 * next statement reconnects by itself and is not lost. */
TEST(idle_connection_survives_a_restart)
{
	char p[512];
	fresh_uri("idle", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	CHECK_INT(ops->lead(s, NULL, NULL, &err), 0);
	CHECK_INT(cluster("restart"), 0);
	CHECK_INT(ops->kv_set(s, "after", "1", &err), 0);
	char *v = NULL;
	CHECK_INT(ops->kv_get(s, "after", &v, &err), 0);
	CHECK_STR(v, "1");
	free(v);
	CHECK_INT(ops->health(s, false, NULL), STORE_UP);
	ops->close(s);
}

TEST(leader_fenced_when_another_took_over)
{
	char p[512];
	fresh_uri("fence", p, sizeof(p));
	struct store *a = NULL, *b = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&a, p, &err), 0);
	if (!a)
		return;
	CHECK_INT(ops->lead(a, NULL, NULL, &err), 0);
	CHECK_INT(cluster("restart"), 0);
	/* Another manager connects first after the restart and leads. */
	CHECK_INT(ops->open(&b, p, &err), 0);
	if (b)
		CHECK_INT(ops->lead(b, NULL, NULL, &err), 0);
	memset(&err, 0, sizeof(err));
	CHECK(ops->kv_set(a, "stale", "1", &err) < 0);
	CHECK_INT(ops->health(a, true, NULL), STORE_FENCED);
	CHECK(ops->kv_set(a, "stale", "1", &err) < 0);
	CHECK_INT(raw_int(p, "SELECT COUNT(*) FROM settings WHERE key='stale'"), 0);
	ops->close(a);
	if (b)
		ops->close(b);
}

/* The seeds' backup and restore: pg_dumpall, then terminate the
 * connections, drop the database and feed the dump to psql. The store
 * opens the restored database with its rows, its schema version, and its
 * history's order going on from where it was. */
TEST(restores_from_pg_dumpall)
{
	char p[512];
	fresh_uri("dump", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	struct session_rec r = make_session("s-d", 7, "dumped");
	r.env_json = strdup("{\"A\":\"it's\"}");
	CHECK_INT(ops->session_put(s, &r, &err), 0);
	for (int i = 0; i < 3; i++) {
		struct history_rec h = {.status = SS_PENDING, .at_ms = i};
		snprintf(h.info, sizeof(h.info), "step %d", i);
		CHECK_INT(ops->history_add(s, "s-d", &h, &err), 0);
	}
	struct user_rec u = {.id = "u1", .email = "a@x", .access_key = "AK", .secret_key = "SK", .created_ms = 1};
	CHECK_INT(ops->user_put(s, &u, &err), 0);
	CHECK_INT(ops->kv_set(s, "cluster_id", "\"c1\"", &err), 0);
	ops->close(s);

	const char *pgbin = getenv("PGBIN") ? getenv("PGBIN") : "/usr/lib/postgresql/15/bin";
	char dump[128], cmd[2048];
	snprintf(dump, sizeof(dump), "/tmp/tessera-pgdump.%d.sql", (int)getpid());
	snprintf(cmd, sizeof(cmd), "'%s/pg_dumpall' -d '%s/postgres' -f '%s'", pgbin, base, dump);
	CHECK_INT(system(cmd), 0);
	CHECK_INT(admin_exec("postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
			     "WHERE datname='store_dump' AND pid<>pg_backend_pid()"), 0);
	CHECK_INT(admin_exec("postgres", "DROP DATABASE store_dump"), 0);
	snprintf(cmd, sizeof(cmd), "'%s/psql' -q -X -d '%s/postgres' -f '%s' >/dev/null 2>&1", pgbin, base, dump);
	/* psql goes on past "role tessera already exists"; the rest must
	 * apply. */
	if (system(cmd) != 0)
		FAILF("psql -f %s failed", dump);
	unlink(dump);

	s = NULL;
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	CHECK_INT(raw_int(p, "SELECT MAX(version) FROM schema_version"), store_schema_latest());
	struct history_rec h = {.status = SS_RUNNING, .info = "after restore", .at_ms = 0};
	CHECK_INT(ops->history_add(s, "s-d", &h, &err), 0);
	struct history_rec *arr = NULL;
	size_t n = 0;
	CHECK_INT(ops->history_get(s, "s-d", &arr, &n, &err), 0);
	CHECK_INT(n, 4);
	if (arr && n == 4) {
		CHECK_STR(arr[0].info, "step 0");
		CHECK_STR(arr[3].info, "after restore");
	}
	free(arr);
	struct sessions c = {0};
	CHECK_INT(ops->session_load_all(s, collect_session, &c, &err), 0);
	CHECK_INT(c.n, 1);
	if (c.n == 1)
		CHECK_STR(c.r[0].env_json, "{\"A\":\"it's\"}");
	sessions_free(&c);
	struct users us = {0};
	CHECK_INT(ops->user_load_all(s, collect_user, &us, &err), 0);
	CHECK_INT(us.n, 1);
	char *v = NULL;
	CHECK_INT(ops->kv_get(s, "cluster_id", &v, &err), 0);
	CHECK_STR(v, "\"c1\"");
	free(v);
	session_rec_clear(&r);
	ops->close(s);
}

/* A database at version 1 whose tables lack later columns (as if made
 * before them): migration 2 adds them, with their defaults, and the rows
 * read as before. */
TEST(migrates_an_older_database)
{
	char p[512];
	fresh_uri("older", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	struct session_rec r = make_session("s-o", 1, "older");
	CHECK_INT(ops->session_put(s, &r, &err), 0);
	ops->close(s);
	CHECK_INT(raw_exec(p, "ALTER TABLE sessions DROP COLUMN mounts_json"), 0);
	CHECK_INT(raw_exec(p, "ALTER TABLE sessions DROP COLUMN app_endpoint"), 0);
	CHECK_INT(raw_exec(p, "DELETE FROM schema_version WHERE version > 1"), 0);
	s = NULL;
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	CHECK_INT(raw_int(p, "SELECT COUNT(*) FROM information_schema.columns WHERE table_name='sessions' "
			  "AND column_name IN ('mounts_json','app_endpoint')"), 2);
	CHECK_INT(raw_int(p, "SELECT MAX(version) FROM schema_version"), store_schema_latest());
	struct sessions c = {0};
	CHECK_INT(ops->session_load_all(s, collect_session, &c, &err), 0);
	CHECK_INT(c.n, 1);
	if (c.n == 1) {
		CHECK_STR(c.r[0].name, "older");
		CHECK_STR(c.r[0].app_endpoint, "");
		CHECK(c.r[0].mounts_json == NULL);
	}
	sessions_free(&c);
	ops->close(s);
}

/* The other forms libpq reads: the unix socket in the cluster's
 * directory, as a URI with ?host= and as keywords. */
TEST(socket_uri_and_keyword_forms)
{
	const char *pgdir = getenv("TESSERA_TEST_PG_DIR");
	const char *colon = strrchr(base, ':');
	if (!pgdir || !colon) {
		FAILF("TESSERA_TEST_PG_DIR is not set");
		return;
	}
	int port = atoi(colon + 1);
	char uri[600];
	struct store *s = NULL;
	struct terr err = {0};
	const struct store_ops *so = NULL;
	char where[512];
	snprintf(uri, sizeof(uri), "postgresql:///store_main?host=%s&port=%d&user=tessera", pgdir, port);
	CHECK_INT(store_open(uri, "/tmp", &so, &s, where, sizeof(where), &err), 0);
	CHECK(so == &store_pg_ops);
	CHECK_CONTAINS(where, pgdir);
	if (s) {
		char *v = NULL;
		CHECK_INT(ops->kv_get(s, "tx.after", &v, &err), 0);
		CHECK_STR(v, "1");
		free(v);
		ops->close(s);
	}
	s = NULL;
	snprintf(uri, sizeof(uri), "host=%s port=%d user=tessera dbname=store_main", pgdir, port);
	CHECK_INT(store_open(uri, "/tmp", &so, &s, where, sizeof(where), &err), 0);
	CHECK(so == &store_pg_ops);
	CHECK_CONTAINS(where, "/store_main");
	if (s)
		ops->close(s);
}

TEST(bad_uri_and_unreachable_server)
{
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, "postgresql://tessera@127.0.0.1:1/nowhere", &err), -ECONNREFUSED);
	CHECK(s == NULL);
	CHECK_CONTAINS(err.msg, "PostgreSQL at 127.0.0.1:1/nowhere");
	memset(&err, 0, sizeof(err));
	CHECK(ops->open(&s, "postgresql://[bad", &err) < 0);
	CHECK(s == NULL);
	CHECK(err.msg[0] != '\0');
	/* store_open: the setting picks the backend. */
	const struct store_ops *so = NULL;
	char where[256];
	CHECK_INT(store_open("mysql://x", "/tmp", &so, &s, where, sizeof(where), &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "postgresql://USER@HOST:PORT/DB");
	CHECK_INT(store_open(dbpath, "/tmp", &so, &s, where, sizeof(where), &err), 0);
	CHECK(so == &store_pg_ops);
	CHECK_CONTAINS(where, "PostgreSQL at 127.0.0.1:");
	if (s)
		so->close(s);
}

int main(void)
{
	base = getenv("TESSERA_TEST_PG");
	if (!base || !*base) {
		fprintf(stderr, "TESSERA_TEST_PG is not set: run through tests/pg/pgcluster.sh run\n");
		return 1;
	}
	snprintf(dir, sizeof(dir), "unused");
	fresh_uri("main", dbpath, sizeof(dbpath));
	RUN(users_round_trip);
	RUN(sessions_round_trip);
	RUN(max_seq_empty_is_zero);
	RUN(history_and_agents_round_trip);
	RUN(kv_round_trip_and_missing);
	RUN(transactions_commit_and_rollback);
	RUN(reopen_finds_everything);
	RUN(record_copy_and_clear);
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
	RUN(socket_uri_and_keyword_forms);
	RUN(migrates_an_older_database);
	RUN(pipelined_writes_in_a_transaction);
	RUN(one_leader_per_database);
	RUN(standby_waits_then_takes_over);
	RUN(bad_uri_and_unreachable_server);
	RUN(restores_from_pg_dumpall);
	RUN(idle_connection_survives_a_restart);
	RUN(server_restart_while_open);
	RUN(leader_fenced_when_another_took_over);
	return testlib_done();
}
