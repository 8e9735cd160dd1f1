/* The store's versioned schema, one list of numbered migrations for every
 * backend (docs/architecture.md, "The store"). A database records the
 * migrations it has had in its table schema_version (version,
 * description, applied_ms); store_migrate applies those it lacks, each in
 * a transaction of its own with its row, and refuses a database whose
 * version is newer than the last one this binary knows. */
#ifndef TESSERA_STORE_MIGRATE_H
#define TESSERA_STORE_MIGRATE_H

#include <stdint.h>

#include "common/err.h"
#include "store/sqlgen.h"

/* What a backend lends the migrations: its dialect and two calls on its
 * one connection. exec runs SQL without results; query_int reads the
 * first column of the first row as an integer (0 when no row). */
struct store_mig_conn {
	void *ctx;
	const struct store_dialect *d;
	int (*exec)(void *ctx, const char *sql, struct terr *err);
	int (*query_int)(void *ctx, const char *sql, int64_t *out, struct terr *err);
};

/* The last version this binary knows. */
int store_schema_latest(void);

/* Brings the database to store_schema_latest(). *from (may be NULL) gets
 * the version found. A newer database: -EPROTO, "the database schema is
 * version N, newer than this tessera knows (M) ...". The caller keeps
 * other processes out meanwhile (SQLite: the data dir's lock; PostgreSQL:
 * an advisory lock). */
int store_migrate(const struct store_mig_conn *c, int *from, struct terr *err);

/* The version recorded in the database (0: none yet). */
int store_schema_version(const struct store_mig_conn *c, int *out, struct terr *err);

#endif
