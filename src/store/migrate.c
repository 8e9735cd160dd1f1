/* The numbered migrations (migrate.h). A migration is one of:
 *   MIG_CREATE: every table of columns.h (with all its columns as this
 *     binary has them), the settings table and the history's index, each
 *     created when missing;
 *   MIG_ADD_COLUMNS: every column of columns.h that a table lacks, added
 *     with its default (a new column is its line in columns.c plus one
 *     such migration);
 *   MIG_SQL: SQL written for each dialect, for what adding columns cannot
 *     express.
 * A MIG_CREATE or MIG_ADD_COLUMNS step may carry SQL too, run after it
 * (a new table filled from an old one).
 * Since MIG_CREATE makes the newest tables, a new database passes through
 * the later MIG_ADD_COLUMNS steps with nothing to add: the list is what
 * an old database needs, and a new one ends at the same schema. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/migrate.h"

enum mig_kind { MIG_CREATE, MIG_ADD_COLUMNS, MIG_SQL };

struct migration {
	int version;
	const char *description;
	enum mig_kind kind;
	const char *sqlite_sql, *pg_sql;  /* MIG_SQL; after the others when not NULL */
};

/* Each user's one key (users.access_key) becomes their first API key. */
#define COPY_USER_KEYS \
	"INSERT INTO keypairs(access_key,user_id,secret_key,label,created_ms) " \
	"SELECT access_key,id,secret_key,'',created_ms FROM users " \
	"WHERE access_key NOT IN (SELECT access_key FROM keypairs)"

/* The launcher's presets before they were the admins' (Small, Medium,
 * One GPU), so that a database, new or older, starts with them. Its
 * created_ms orders them as they were shown; one of the same name (a
 * database whose version was set back) is kept as it is. */
#define DEFAULT_PRESETS \
	"INSERT INTO presets(name,cpu_m,mem,fgpu_m,resource_group,created_ms) VALUES " \
	"('Small',1000,2147483648,0,'',1),('Medium',4000,8589934592,0,'',2)," \
	"('One GPU',2000,8589934592,1000,'',3) ON CONFLICT(name) DO NOTHING"

/* Append only; versions are 1, 2, 3... in order. */
static const struct migration migrations[] = {
	{1, "tables users, sessions, session_history, agents, folders and settings", MIG_CREATE, NULL, NULL},
	/* SQLite files made before schema_version existed (PRAGMA
	 * user_version 0 to 2) lack some of the columns added since. */
	{2, "columns added before schema_version existed (sessions.alloc_json to mounts_json)",
	 MIG_ADD_COLUMNS, NULL, NULL},
	/* Several API keys per user, each revocable (docs/api.md, "API keys"). */
	{3, "table keypairs, each user's key its first", MIG_CREATE, COPY_USER_KEYS, COPY_USER_KEYS},
	/* Projects (docs/scheduling.md). Each user's personal project is
	 * made by the manager at its next start, and the sessions and
	 * folders stored before (project_id "") are given theirs then. */
	{4, "tables projects and project_members", MIG_CREATE, NULL, NULL},
	{5, "sessions' project, resource group, priority and preemptibility; folders' project",
	 MIG_ADD_COLUMNS, NULL, NULL},
	/* Cluster sessions: a record per container (store.h). */
	{6, "sessions' cluster size, mode, role, index, main and SSH key", MIG_ADD_COLUMNS, NULL, NULL},
	/* SSH into sessions: each user's public keys (docs/user-guide.md). */
	{7, "users' SSH public keys", MIG_ADD_COLUMNS, NULL, NULL},
	/* Resource presets (docs/admin.md, "Resource presets"). */
	{8, "table presets, with the launcher's three", MIG_CREATE, DEFAULT_PRESETS, DEFAULT_PRESETS},
	/* The full launcher (docs/api.md, "POST /v1/sessions"). */
	{9, "sessions' start time, batch timeout and preopen ports", MIG_ADD_COLUMNS, NULL, NULL},
	/* The last of an ended session's log (docs/api.md, the logs route). */
	{10, "table session_logs: the last of each ended session's log", MIG_CREATE, NULL, NULL},
};

#define N_MIGRATIONS (sizeof(migrations) / sizeof(migrations[0]))

int store_schema_latest(void)
{
	return migrations[N_MIGRATIONS - 1].version;
}

static const char settings_sql[] =
	"CREATE TABLE IF NOT EXISTS settings(key TEXT PRIMARY KEY, value TEXT NOT NULL);";
static const char index_sql[] =
	"CREATE INDEX IF NOT EXISTS session_history_by_session ON session_history(session_id);";
static const char version_table_sql[] =
	"CREATE TABLE IF NOT EXISTS schema_version(version INTEGER PRIMARY KEY, "
	"description TEXT NOT NULL, applied_ms BIGINT NOT NULL);";

static int exec_owned(const struct store_mig_conn *c, char *sql, struct terr *err)
{
	if (!sql)
		return terr_set(err, ENOMEM, "out of memory");
	int rc = c->exec(c->ctx, sql, err);
	free(sql);
	return rc;
}

static int add_missing_columns(const struct store_mig_conn *c, struct terr *err)
{
	for (const struct store_table *const *t = store_tables; *t; t++) {
		for (size_t k = 0; k < (*t)->ncols; k++) {
			char q[512];
			snprintf(q, sizeof(q), c->d->has_column_sql, (*t)->name, (*t)->cols[k].name);
			int64_t have = 0;
			int rc = c->query_int(c->ctx, q, &have, err);
			if (rc < 0)
				return rc;
			if (!have && (rc = exec_owned(c, store_sql_add_column(c->d, *t, &(*t)->cols[k]), err)) < 0)
				return rc;
		}
	}
	return 0;
}

/* fresh: the database had no table when this run began, so migration
 * 1 made every table as this binary has it and a MIG_ADD_COLUMNS step
 * has nothing to add: its check (a query per column, ten milliseconds
 * each on PostgreSQL, hundreds of them) is skipped. */
static int apply(const struct store_mig_conn *c, const struct migration *m, bool fresh, struct terr *err)
{
	int rc = 0;
	switch (m->kind) {
	case MIG_CREATE:
		rc = c->exec(c->ctx, settings_sql, err);
		for (const struct store_table *const *t = store_tables; rc == 0 && *t; t++)
			rc = exec_owned(c, store_sql_create_table(c->d, *t), err);
		if (rc == 0)
			rc = c->exec(c->ctx, index_sql, err);
		break;
	case MIG_ADD_COLUMNS:
		rc = fresh ? 0 : add_missing_columns(c, err);
		break;
	case MIG_SQL:
		break;
	}
	const char *sql = c->d == &store_dialect_postgresql ? m->pg_sql : m->sqlite_sql;
	if (rc == 0 && sql)
		rc = c->exec(c->ctx, sql, err);
	return rc;
}

int store_schema_version(const struct store_mig_conn *c, int *out, struct terr *err)
{
	int rc = c->exec(c->ctx, version_table_sql, err);
	int64_t v = 0;
	if (rc == 0)
		rc = c->query_int(c->ctx, "SELECT COALESCE(MAX(version),0) FROM schema_version", &v, err);
	if (rc < 0)
		return rc;
	*out = (int)v;
	return 0;
}

int store_migrate(const struct store_mig_conn *c, int *from, struct terr *err)
{
	int cur = 0;
	int rc = store_schema_version(c, &cur, err);
	if (rc < 0)
		return rc;
	if (from)
		*from = cur;
	if (cur > store_schema_latest())
		return terr_set(err, EPROTO,
				"the database schema is version %d, newer than this tessera knows (%d): run the "
				"tessera that migrated it, or a newer one (docs/admin.md, \"Migrations\")",
				cur, store_schema_latest());
	/* Version 0 is a new database, or a SQLite file from before
	 * schema_version (migration 2), which has the users table. */
	bool fresh = false;
	if (cur == 0) {
		char q[512];
		int64_t have = 0;
		snprintf(q, sizeof(q), c->d->has_column_sql, "users", "id");
		if ((rc = c->query_int(c->ctx, q, &have, err)) < 0)
			return rc;
		fresh = have == 0;
	}
	for (size_t i = 0; i < N_MIGRATIONS; i++) {
		const struct migration *m = &migrations[i];
		if (m->version <= cur)
			continue;
		if ((rc = c->exec(c->ctx, "BEGIN", err)) < 0)
			return rc;
		/* The description as an SQL literal: its quotes doubled. */
		char desc[256], row[600];
		size_t k = 0;
		for (const char *p = m->description; *p && k + 2 < sizeof(desc); p++) {
			if (*p == '\'')
				desc[k++] = '\'';
			desc[k++] = *p;
		}
		desc[k] = '\0';
		snprintf(row, sizeof(row), "INSERT INTO schema_version(version,description,applied_ms) "
			 "VALUES(%d,'%s',%lld)", m->version, desc, (long long)util_now_ms());
		if ((rc = apply(c, m, fresh, err)) < 0 || (rc = c->exec(c->ctx, row, err)) < 0 ||
		    (rc = c->exec(c->ctx, "COMMIT", err)) < 0) {
			struct terr ignored = {0};
			c->exec(c->ctx, "ROLLBACK", &ignored);
			return terr_prefix(err, "migration %d (%s) failed", m->version, m->description);
		}
	}
	return 0;
}
