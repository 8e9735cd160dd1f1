/* The store's cases that every backend passes (store.h's contract):
 * round trips of every record type, replacement, seq order,
 * transactions, persistence across reopen, the schema's version. Included
 * by test_sqlite.c and test_postgres.c, which define before it:
 *   ops          the backend
 *   dbpath       the main database's URI (a file, a libpq URI)
 *   fresh_uri    a new empty database's URI for a name
 *   raw_exec, raw_int   SQL on a database behind the store's back */
#ifndef TESSERA_TESTS_STORE_CASES_H
#define TESSERA_TESTS_STORE_CASES_H

#include <stdlib.h>

#include "store/migrate.h"

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


struct folders {
	struct folder_rec f[8];
	size_t n;
};

static int collect_folder(void *ud, const struct folder_rec *f)
{
	struct folders *c = ud;
	if (c->n >= 8)
		return -ENOSPC;
	c->f[c->n++] = *f;
	return 0;
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
	char p[512];
	fresh_uri("empty", p, sizeof(p));
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


/* A new database records every migration in schema_version. */
TEST(schema_version_recorded)
{
	char p[512];
	fresh_uri("versioned", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s) {
		FAILF("open: %s", err.msg);
		return;
	}
	ops->close(s);
	CHECK_INT(raw_int(p, "SELECT MAX(version) FROM schema_version"), store_schema_latest());
	CHECK_INT(raw_int(p, "SELECT COUNT(*) FROM schema_version"), store_schema_latest());
	/* A second open applies nothing again. */
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (s)
		ops->close(s);
	CHECK_INT(raw_int(p, "SELECT COUNT(*) FROM schema_version"), store_schema_latest());
}

/* A database migrated by a newer version is refused, saying so, and left
 * as it is. */
TEST(newer_schema_refused)
{
	char p[512];
	fresh_uri("newer", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	ops->close(s);
	char sql[200];
	snprintf(sql, sizeof(sql), "INSERT INTO schema_version(version,description,applied_ms) VALUES(%d,'future',1)",
		 store_schema_latest() + 1);
	CHECK_INT(raw_exec(p, sql), 0);
	s = NULL;
	CHECK_INT(ops->open(&s, p, &err), -EPROTO);
	CHECK(s == NULL);
	CHECK_CONTAINS(err.msg, "newer than this tessera knows");
	char want[64];
	snprintf(want, sizeof(want), "version %d", store_schema_latest() + 1);
	CHECK_CONTAINS(err.msg, want);
	CHECK_INT(raw_int(p, "SELECT MAX(version) FROM schema_version"), store_schema_latest() + 1);
}

/* Folders: insert, replace, delete, in created order. */
TEST(folders_round_trip)
{
	char p[512];
	fresh_uri("folders", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	struct folder_rec a = {.id = "f1", .name = "data", .owner_id = "u1", .host = "local",
			       .quota_bytes = 1 << 20, .created_ms = 5, .trashed_ms = 0,
			       .shares = "[{\"user_id\":\"u2\",\"permission\":\"ro\"}]"};
	struct folder_rec b = {.id = "f2", .name = ".auto", .owner_id = "u1", .host = "local",
			       .created_ms = 6, .shares = "[]"};
	CHECK_INT(ops->folder_put(s, &b, &err), 0);
	CHECK_INT(ops->folder_put(s, &a, &err), 0);
	a.trashed_ms = 77;
	CHECK_INT(ops->folder_put(s, &a, &err), 0);
	struct folders c = {0};
	CHECK_INT(ops->folder_load_all(s, collect_folder, &c, &err), 0);
	CHECK_INT(c.n, 2);
	if (c.n == 2) {
		CHECK_STR(c.f[0].id, "f1");
		CHECK_INT(c.f[0].trashed_ms, 77);
		CHECK_INT(c.f[0].quota_bytes, 1 << 20);
		CHECK_STR(c.f[0].shares, "[{\"user_id\":\"u2\",\"permission\":\"ro\"}]");
		CHECK_STR(c.f[1].name, ".auto");
	}
	CHECK_INT(ops->folder_delete(s, "f1", &err), 0);
	c.n = 0;
	CHECK_INT(ops->folder_load_all(s, collect_folder, &c, &err), 0);
	CHECK_INT(c.n, 1);
	ops->close(s);
}

struct projects {
	struct project_rec p[4];
	struct member_rec m[4];
	size_t np, nm;
};

static int collect_project(void *ud, const struct project_rec *r)
{
	struct projects *c = ud;
	if (c->np < 4)
		c->p[c->np++] = *r;
	return 0;
}

static int collect_member(void *ud, const struct member_rec *r)
{
	struct projects *c = ud;
	if (c->nm < 4)
		c->m[c->nm++] = *r;
	return 0;
}

/* Projects and members: insert, replace, and a project's removal taking
 * its members with it. */
TEST(projects_round_trip)
{
	char p[512];
	fresh_uri("projects", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	struct project_rec a = {.id = "p1", .name = "vision", .weight_milli = 2000, .max = {0, 1LL << 36, 4000},
				.max_sessions = 7, .groups = "h100,a100", .created_ms = 1};
	struct project_rec b = {.id = "p2", .name = "a@x", .personal = true, .weight_milli = 1000, .created_ms = 2};
	struct member_rec m1 = {.id = "p1:u1", .project_id = "p1", .user_id = "u1", .role = "manager",
				.weight_milli = 1000, .created_ms = 3};
	struct member_rec m2 = {.id = "p2:u1", .project_id = "p2", .user_id = "u1", .role = "manager",
				.weight_milli = 500, .created_ms = 4};
	CHECK_INT(ops->project_put(s, &a, &err), 0);
	CHECK_INT(ops->project_put(s, &b, &err), 0);
	CHECK_INT(ops->member_put(s, &m1, &err), 0);
	CHECK_INT(ops->member_put(s, &m2, &err), 0);
	a.weight_milli = 3000;
	CHECK_INT(ops->project_put(s, &a, &err), 0);
	struct projects c = {0};
	CHECK_INT(ops->project_load_all(s, collect_project, &c, &err), 0);
	CHECK_INT(ops->member_load_all(s, collect_member, &c, &err), 0);
	CHECK_INT(c.np, 2);
	CHECK_INT(c.nm, 2);
	if (c.np == 2) {
		CHECK_STR(c.p[0].name, "vision");
		CHECK_INT(c.p[0].weight_milli, 3000);
		CHECK_INT(c.p[0].max.mem, 1LL << 36);
		CHECK_INT(c.p[0].max.fgpu_m, 4000);
		CHECK_INT(c.p[0].max_sessions, 7);
		CHECK_STR(c.p[0].groups, "h100,a100");
		CHECK(c.p[1].personal);
	}
	if (c.nm == 2)
		CHECK_STR(c.m[0].role, "manager");
	CHECK_INT(ops->project_delete(s, "p1", &err), 0);
	memset(&c, 0, sizeof(c));
	CHECK_INT(ops->project_load_all(s, collect_project, &c, &err), 0);
	CHECK_INT(ops->member_load_all(s, collect_member, &c, &err), 0);
	CHECK_INT(c.np, 1);
	CHECK_INT(c.nm, 1);
	if (c.nm == 1)
		CHECK_STR(c.m[0].id, "p2:u1");
	ops->close(s);
}

/* A user that takes another's email replaces it, as one row. */
TEST(user_put_replaces_a_colliding_email)
{
	char p[512];
	fresh_uri("users2", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	struct user_rec a = {.id = "u1", .email = "a@x", .access_key = "AK1", .secret_key = "S", .created_ms = 1};
	struct user_rec b = {.id = "u2", .email = "a@x", .access_key = "AK2", .secret_key = "S", .created_ms = 2};
	CHECK_INT(ops->user_put(s, &a, &err), 0);
	CHECK_INT(ops->user_put(s, &b, &err), 0);
	struct users c = {0};
	CHECK_INT(ops->user_load_all(s, collect_user, &c, &err), 0);
	CHECK_INT(c.n, 1);
	if (c.n == 1)
		CHECK_STR(c.u[0].id, "u2");
	ops->close(s);
}

struct keys {
	struct keypair_rec k[8];
	size_t n;
};

static int collect_key(void *ud, const struct keypair_rec *k)
{
	struct keys *c = ud;
	if (c->n >= 8)
		return -ENOSPC;
	c->k[c->n++] = *k;
	return 0;
}

/* API keys: several per user, replaced by access key, revoked one by
 * one; removing a user removes their keys and no one else's. */
TEST(keypairs_round_trip_and_user_delete)
{
	char p[512];
	fresh_uri("keys", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	struct user_rec a = {.id = "u1", .email = "a@x", .access_key = "AK1", .secret_key = "S1", .created_ms = 1};
	struct user_rec b = {.id = "u2", .email = "b@x", .access_key = "AK3", .secret_key = "S3", .created_ms = 2};
	CHECK_INT(ops->user_put(s, &a, &err), 0);
	CHECK_INT(ops->user_put(s, &b, &err), 0);
	struct keypair_rec k1 = {.access_key = "AK1", .user_id = "u1", .secret_key = "S1", .created_ms = 1};
	struct keypair_rec k2 = {.access_key = "AK2", .user_id = "u1", .secret_key = "S2", .label = "laptop",
				 .created_ms = 5};
	struct keypair_rec k3 = {.access_key = "AK3", .user_id = "u2", .secret_key = "S3", .created_ms = 3};
	CHECK_INT(ops->keypair_put(s, &k2, &err), 0);
	CHECK_INT(ops->keypair_put(s, &k1, &err), 0);
	CHECK_INT(ops->keypair_put(s, &k3, &err), 0);
	snprintf(k2.label, sizeof(k2.label), "old laptop");
	CHECK_INT(ops->keypair_put(s, &k2, &err), 0);
	struct keys c = {0};
	CHECK_INT(ops->keypair_load_all(s, collect_key, &c, &err), 0);
	CHECK_INT(c.n, 3);
	if (c.n == 3) {
		/* oldest first */
		CHECK_STR(c.k[0].access_key, "AK1");
		CHECK_STR(c.k[0].user_id, "u1");
		CHECK_STR(c.k[0].secret_key, "S1");
		CHECK_STR(c.k[0].label, "");
		CHECK_STR(c.k[1].access_key, "AK3");
		CHECK_STR(c.k[2].access_key, "AK2");
		CHECK_STR(c.k[2].label, "old laptop");
		CHECK_INT(c.k[2].created_ms, 5);
	}
	CHECK_INT(ops->keypair_delete(s, "AK1", &err), 0);
	c.n = 0;
	CHECK_INT(ops->keypair_load_all(s, collect_key, &c, &err), 0);
	CHECK_INT(c.n, 2);
	CHECK_INT(ops->user_delete(s, "u1", &err), 0);
	c.n = 0;
	CHECK_INT(ops->keypair_load_all(s, collect_key, &c, &err), 0);
	CHECK_INT(c.n, 1);
	if (c.n == 1)
		CHECK_STR(c.k[0].access_key, "AK3");
	struct users u = {0};
	CHECK_INT(ops->user_load_all(s, collect_user, &u, &err), 0);
	CHECK_INT(u.n, 1);
	if (u.n == 1)
		CHECK_STR(u.u[0].id, "u2");
	ops->close(s);
}

/* A database from before schema version 3 (no keypairs table): each
 * user's one key becomes their first API key, secret and all. */
TEST(migration_3_makes_each_users_key_their_first)
{
	char p[512];
	fresh_uri("keys_mig", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	struct user_rec a = {.id = "u1", .email = "a@x", .access_key = "AKA", .secret_key = "SKA", .created_ms = 9};
	CHECK_INT(ops->user_put(s, &a, &err), 0);
	ops->close(s);
	CHECK_INT(raw_exec(p, "DROP TABLE keypairs"), 0);
	CHECK_INT(raw_exec(p, "DELETE FROM schema_version WHERE version > 2"), 0);
	s = NULL;
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	CHECK_INT(raw_int(p, "SELECT MAX(version) FROM schema_version"), store_schema_latest());
	struct keys c = {0};
	CHECK_INT(ops->keypair_load_all(s, collect_key, &c, &err), 0);
	CHECK_INT(c.n, 1);
	if (c.n == 1) {
		CHECK_STR(c.k[0].access_key, "AKA");
		CHECK_STR(c.k[0].user_id, "u1");
		CHECK_STR(c.k[0].secret_key, "SKA");
		CHECK_INT(c.k[0].created_ms, 9);
	}
	ops->close(s);
}

struct presets {
	struct preset_rec p[8];
	size_t n;
};

static int collect_preset(void *ud, const struct preset_rec *r)
{
	struct presets *c = ud;
	if (c->n >= 8)
		return -ENOSPC;
	c->p[c->n++] = *r;
	return 0;
}

/* A new database starts with the launcher's three presets (migration
 * 8); they are replaced by name and removed by name like any other. */
TEST(presets_default_then_round_trip)
{
	char p[512];
	fresh_uri("presets", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	struct presets c = {0};
	CHECK_INT(ops->preset_load_all(s, collect_preset, &c, &err), 0);
	CHECK_INT(c.n, 3);
	if (c.n == 3) {
		CHECK_STR(c.p[0].name, "Small");
		CHECK_INT(c.p[0].res.cpu_m, 1000);
		CHECK_INT(c.p[0].res.mem, 2LL << 30);
		CHECK_STR(c.p[1].name, "Medium");
		CHECK_STR(c.p[2].name, "One GPU");
		CHECK_INT(c.p[2].res.fgpu_m, 1000);
		CHECK_STR(c.p[2].resource_group, "");
	}
	struct preset_rec a = {.name = "h100-big", .res = {16000, 64LL << 30, 2500}, .resource_group = "h100",
			       .created_ms = 100};
	CHECK_INT(ops->preset_put(s, &a, &err), 0);
	a.res.cpu_m = 8000;
	CHECK_INT(ops->preset_put(s, &a, &err), 0);
	CHECK_INT(ops->preset_delete(s, "Medium", &err), 0);
	memset(&c, 0, sizeof(c));
	CHECK_INT(ops->preset_load_all(s, collect_preset, &c, &err), 0);
	CHECK_INT(c.n, 3);
	if (c.n == 3) {
		CHECK_STR(c.p[1].name, "One GPU");
		CHECK_STR(c.p[2].name, "h100-big");
		CHECK_INT(c.p[2].res.cpu_m, 8000);
		CHECK_INT(c.p[2].res.fgpu_m, 2500);
		CHECK_STR(c.p[2].resource_group, "h100");
	}
	ops->close(s);
}

/* A database of schema version 7 (no presets table, sessions without
 * the launcher's columns): migrations 8 and 9 add them, its sessions
 * read with no start time, no timeout and no preopen port, and it gets
 * the default presets. */
TEST(migrations_8_and_9_from_version_7)
{
	char p[512];
	fresh_uri("launch_mig", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	struct session_rec r = make_session("s-7", 1, "seven");
	CHECK_INT(ops->session_put(s, &r, &err), 0);
	session_rec_clear(&r);
	ops->close(s);
	CHECK_INT(raw_exec(p, "DROP TABLE presets"), 0);
	CHECK_INT(raw_exec(p, "ALTER TABLE sessions DROP COLUMN starts_at_ms"), 0);
	CHECK_INT(raw_exec(p, "ALTER TABLE sessions DROP COLUMN batch_timeout_s"), 0);
	CHECK_INT(raw_exec(p, "ALTER TABLE sessions DROP COLUMN preopen_ports"), 0);
	CHECK_INT(raw_exec(p, "DELETE FROM schema_version WHERE version > 7"), 0);
	s = NULL;
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	CHECK_INT(raw_int(p, "SELECT MAX(version) FROM schema_version"), store_schema_latest());
	CHECK_INT(raw_int(p, "SELECT COUNT(*) FROM presets"), 3);
	struct sessions c = {0};
	CHECK_INT(ops->session_load_all(s, collect_session, &c, &err), 0);
	CHECK_INT(c.n, 1);
	if (c.n == 1) {
		CHECK_STR(c.r[0].name, "seven");
		CHECK_INT(c.r[0].starts_at_ms, 0);
		CHECK_INT(c.r[0].batch_timeout_s, 0);
		CHECK_STR(c.r[0].preopen_ports, "");
	}
	sessions_free(&c);
	/* And the new columns keep what they are given. */
	struct session_rec n = make_session("s-9", 2, "nine");
	n.starts_at_ms = 1800000000000LL;
	n.batch_timeout_s = 3600;
	snprintf(n.preopen_ports, sizeof(n.preopen_ports), "8080,8888");
	CHECK_INT(ops->session_put(s, &n, &err), 0);
	session_rec_clear(&n);
	memset(&c, 0, sizeof(c));
	CHECK_INT(ops->session_load_all(s, collect_session, &c, &err), 0);
	CHECK_INT(c.n, 2);
	if (c.n == 2) {
		CHECK_INT(c.r[1].starts_at_ms, 1800000000000LL);
		CHECK_INT(c.r[1].batch_timeout_s, 3600);
		CHECK_STR(c.r[1].preopen_ports, "8080,8888");
	}
	sessions_free(&c);
	ops->close(s);
}

/* The last of an ended session's log (schema 10): none until one is
 * saved, replaced by session, several lines and non-ASCII text kept as
 * they are; a database of schema 9 gets the table by migration. */
TEST(log_tail_round_trip_and_migration_10)
{
	char p[512];
	fresh_uri("log_tail", p, sizeof(p));
	struct store *s = NULL;
	struct terr err = {0};
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	struct log_tail_rec got = {0};
	CHECK_INT(ops->log_tail_get(s, "s-1", &got, &err), -ENOENT);
	struct log_tail_rec a = {.session_id = "s-1", .text = "epoch 1 loss 0.9\nepoch 2 loss 0.5 \xc3\xa9\n",
				 .saved_ms = 1800000000000LL};
	CHECK_INT(ops->log_tail_put(s, &a, &err), 0);
	a.text = "replaced\n";
	a.saved_ms++;
	CHECK_INT(ops->log_tail_put(s, &a, &err), 0);
	struct log_tail_rec b = {.session_id = "s-2", .text = "", .saved_ms = 5};
	CHECK_INT(ops->log_tail_put(s, &b, &err), 0);
	CHECK_INT(ops->log_tail_get(s, "s-1", &got, &err), 0);
	CHECK_STR(got.text ? got.text : "(null)", "replaced\n");
	CHECK_INT(got.saved_ms, 1800000000001LL);
	free(got.text);
	CHECK_INT(ops->log_tail_get(s, "s-2", &got, &err), 0);
	CHECK_STR(got.text ? got.text : "(null)", "");
	free(got.text);
	ops->close(s);

	CHECK_INT(raw_exec(p, "DROP TABLE session_logs"), 0);
	CHECK_INT(raw_exec(p, "DELETE FROM schema_version WHERE version > 9"), 0);
	s = NULL;
	CHECK_INT(ops->open(&s, p, &err), 0);
	if (!s)
		return;
	CHECK_INT(raw_int(p, "SELECT MAX(version) FROM schema_version"), store_schema_latest());
	CHECK_INT(ops->log_tail_get(s, "s-1", &got, &err), -ENOENT);
	a.text = "after the migration \xe2\x9c\x93\n";
	CHECK_INT(ops->log_tail_put(s, &a, &err), 0);
	CHECK_INT(ops->log_tail_get(s, "s-1", &got, &err), 0);
	CHECK_STR(got.text ? got.text : "(null)", "after the migration \xe2\x9c\x93\n");
	free(got.text);
	ops->close(s);
}

#endif
