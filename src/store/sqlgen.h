/* SQL text derived from the column lists of columns.h, for every backend:
 * a dialect says how its SQL differs (column types, parameter markers,
 * how a child table keeps insertion order), and the functions here write
 * the statements, the CREATE TABLEs and the ALTER TABLEs from it. Nothing
 * here talks to a database. */
#ifndef TESSERA_STORE_SQLGEN_H
#define TESSERA_STORE_SQLGEN_H

#include <stdbool.h>

#include "store/columns.h"

struct store_dialect {
	const char *name;                 /* "sqlite", "postgresql" */
	const char *(*col_type)(enum store_col_kind k);
	bool numbered_params;             /* $1, $2... (PostgreSQL) instead of ? */
	/* The definition of a column that a table with a parent gets to keep
	 * its rows' insertion order (history is read in the order written),
	 * or NULL where the database keeps one itself (SQLite's rowid). */
	const char *order_col_def;
	/* What orders such a table's rows by insertion: "rowid", "ord". */
	const char *order_col;
	/* A SELECT COUNT(*) that is 1 when table %s has column %s. */
	const char *has_column_sql;
};

extern const struct store_dialect store_dialect_sqlite;
extern const struct store_dialect store_dialect_postgresql;

/* Expands a statement template for table t (NULL: the SQL is taken as
 * written but for its parameter markers):
 *   %T  the table's name
 *   %C  its columns, the parent column first (session_history.session_id)
 *   %P  one parameter per column of %C
 *   %R  the record's columns: what store_sql read loops read, in order
 *   %U  "c=excluded.c" for every column of %C but the first (the key)
 *   %O  the column of insertion order (dialect's order_col)
 *   ?   one parameter, numbered in the dialects that number them
 * Returns a malloc'd string the caller frees, or NULL when out of memory. */
char *store_sql_expand(const struct store_dialect *d, const struct store_table *t, const char *tmpl);

/* CREATE TABLE IF NOT EXISTS for t with every column of columns.h.
 * Malloc'd, NULL when out of memory. */
char *store_sql_create_table(const struct store_dialect *d, const struct store_table *t);

/* ALTER TABLE t ADD COLUMN c. Malloc'd, NULL when out of memory. */
char *store_sql_add_column(const struct store_dialect *d, const struct store_table *t,
			   const struct store_column *c);

/* The k-th column of %C: the parent first, then the record's. */
const char *store_sql_insert_col(const struct store_table *t, size_t k);

#endif
