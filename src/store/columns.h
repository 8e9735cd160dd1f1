/* The store's tables, described once for every backend (store.h's ops
 * tables): for each table its name and columns, for each column its name,
 * kind, SQL constraint and where its value lives in the record. A backend
 * derives its schema, its statements' column and parameter lists and its
 * binding and reading loops from these tables (the SQL text through
 * store/sqlgen.h), so a new column costs one line here (the field in
 * store.h, a migration), and both backends, SQLite and PostgreSQL, read
 * the same list. Nothing here depends on either.
 *
 * The order of the columns is the order of the table in the database
 * (the schema a backend creates, the columns it adds to an older one):
 * append new columns at the end of a table. A column added later must be
 * NULL-able or have a DEFAULT, since a migration adds it to existing
 * tables with ALTER TABLE ... ADD COLUMN: append a MIG_ADD_COLUMNS step
 * to the list in store/migrate.c with it. */
#ifndef TESSERA_STORE_COLUMNS_H
#define TESSERA_STORE_COLUMNS_H

#include <stddef.h>

#include "store/store.h"

/* How a field of a record is kept. A backend maps each kind to an SQL type
 * of its own (SQLite: TEXT or INTEGER) and to its bind and read calls. */
enum store_col_kind {
	STORE_COL_TEXT,       /* char array; never NULL (an SQL NULL reads as "") */
	STORE_COL_TEXT_PTR,   /* owned char *; NULL <-> SQL NULL (session_rec_clear frees it) */
	STORE_COL_BOOL,       /* bool, as an integer 0/1 */
	STORE_COL_INT64,      /* int64_t */
	STORE_COL_STATUS,     /* enum session_status, as its name (text) */
	STORE_COL_INT_OPT,    /* int, SQL NULL when the bool at flag_off is false */
};

struct store_column {
	const char *name;
	enum store_col_kind kind;
	/* What follows the type in the column's definition, in SQL that
	 * SQLite and PostgreSQL both read ("PRIMARY KEY", "NOT NULL UNIQUE",
	 * "NOT NULL DEFAULT 0", "" for a NULL-able column). */
	const char *constraint;
	size_t off;       /* offset of the field in the record */
	size_t size;      /* size of the field (a char array's capacity) */
	size_t flag_off;  /* STORE_COL_INT_OPT: offset of its "has value" bool */
};

struct store_table {
	const char *name;
	/* A column before the record's own that names the owner of the row
	 * and is not a field of the record (session_history.session_id: the
	 * history of one session is asked for by its id), or NULL. It is
	 * TEXT NOT NULL. */
	const char *parent;
	const struct store_column *cols;
	size_t ncols;
	size_t rec_size;  /* sizeof the record the offsets point into */
};

/* The column list of every table but `settings` (two columns, key and
 * value, with no record behind them: its backends write it by hand). */
extern const struct store_table store_users_table;     /* struct user_rec */
extern const struct store_table store_sessions_table;  /* struct session_rec */
extern const struct store_table store_history_table;   /* struct history_rec */
extern const struct store_table store_agents_table;    /* struct agent_rec */
extern const struct store_table store_folders_table;   /* struct folder_rec */
extern const struct store_table store_keypairs_table;  /* struct keypair_rec */
extern const struct store_table store_projects_table;  /* struct project_rec */
extern const struct store_table store_members_table;   /* struct member_rec */
extern const struct store_table store_presets_table;   /* struct preset_rec */
extern const struct store_table store_log_tails_table; /* struct log_tail_rec */

/* Every described table, in schema order; NULL-terminated. */
extern const struct store_table *const store_tables[];

/* The field of column c in record rec (borrowed, points into rec). */
static inline void *store_field(void *rec, const struct store_column *c)
{
	return (char *)rec + c->off;
}

static inline const void *store_cfield(const void *rec, const struct store_column *c)
{
	return (const char *)rec + c->off;
}

/* 0 when every column's size agrees with its kind and lies inside the
 * record; else -EINVAL with the table and column named in err. Run by the
 * store's unit test: it catches a column whose kind does not match the
 * type of its field. */
int store_tables_check(struct terr *err);

#endif
