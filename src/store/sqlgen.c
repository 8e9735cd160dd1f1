/* SQL text from the column lists (sqlgen.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlgen.h"

static const char *sqlite_type(enum store_col_kind k)
{
	switch (k) {
	case STORE_COL_TEXT:
	case STORE_COL_TEXT_PTR:
	case STORE_COL_STATUS:
		return "TEXT";
	case STORE_COL_BOOL:
	case STORE_COL_INT64:
	case STORE_COL_INT_OPT:
		return "INTEGER";
	}
	return "TEXT";
}

/* Booleans are integers 0/1 in PostgreSQL too: columns.h's defaults are
 * written "DEFAULT 0", which a boolean column would refuse, and the
 * values travel as the same text either way. */
static const char *pg_type(enum store_col_kind k)
{
	switch (k) {
	case STORE_COL_TEXT:
	case STORE_COL_TEXT_PTR:
	case STORE_COL_STATUS:
		return "TEXT";
	case STORE_COL_BOOL:
	case STORE_COL_INT_OPT:
		return "INTEGER";
	case STORE_COL_INT64:
		return "BIGINT";
	}
	return "TEXT";
}

const struct store_dialect store_dialect_sqlite = {
	.name = "sqlite",
	.col_type = sqlite_type,
	.numbered_params = false,
	.order_col_def = NULL,
	.order_col = "rowid",
	.has_column_sql = "SELECT COUNT(*) FROM pragma_table_info('%s') WHERE name='%s'",
};

const struct store_dialect store_dialect_postgresql = {
	.name = "postgresql",
	.col_type = pg_type,
	.numbered_params = true,
	.order_col_def = "ord BIGSERIAL",
	.order_col = "ord",
	.has_column_sql = "SELECT COUNT(*) FROM information_schema.columns WHERE "
			  "table_schema=current_schema() AND table_name='%s' AND column_name='%s'",
};

const char *store_sql_insert_col(const struct store_table *t, size_t k)
{
	if (!t->parent)
		return t->cols[k].name;
	return k ? t->cols[k - 1].name : t->parent;
}

static void put_param(FILE *f, const struct store_dialect *d, int *n)
{
	++*n;
	if (d->numbered_params)
		fprintf(f, "$%d", *n);
	else
		fputc('?', f);
}

/* Closes the stream; *out is only final after fclose. */
static char *finish(FILE *f, char **out)
{
	if (fclose(f) != 0) {
		free(*out);
		return NULL;
	}
	return *out;
}

char *store_sql_expand(const struct store_dialect *d, const struct store_table *t, const char *tmpl)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	int nparam = 0;
	for (const char *p = tmpl; *p; p++) {
		if (*p == '?') {
			put_param(f, d, &nparam);
			continue;
		}
		if (*p != '%') {
			fputc(*p, f);
			continue;
		}
		char what = *++p;
		if (!what) {  /* a '%' that ends the template is itself */
			fputc('%', f);
			break;
		}
		size_t n = t ? t->ncols + (t->parent ? 1 : 0) : 0;
		switch (t || what == 'O' ? what : 0) {
		case 'T':
			fputs(t->name, f);
			break;
		case 'C':
			for (size_t k = 0; k < n; k++)
				fprintf(f, "%s%s", k ? "," : "", store_sql_insert_col(t, k));
			break;
		case 'U':
			for (size_t k = 1; k < n; k++)
				fprintf(f, "%s%s=excluded.%s", k > 1 ? "," : "", store_sql_insert_col(t, k),
					store_sql_insert_col(t, k));
			break;
		case 'P':
			for (size_t k = 0; k < n; k++) {
				if (k)
					fputc(',', f);
				put_param(f, d, &nparam);
			}
			break;
		case 'R':
			for (size_t k = 0; k < t->ncols; k++)
				fprintf(f, "%s%s", k ? "," : "", t->cols[k].name);
			break;
		case 'O':
			fputs(d->order_col, f);
			break;
		default:
			fputc('%', f);
			fputc(what, f);
		}
	}
	return finish(f, &out);
}

static void put_col_def(FILE *f, const struct store_dialect *d, const struct store_column *c)
{
	fprintf(f, "%s %s%s%s", c->name, d->col_type(c->kind), *c->constraint ? " " : "", c->constraint);
}

char *store_sql_create_table(const struct store_dialect *d, const struct store_table *t)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	fprintf(f, "CREATE TABLE IF NOT EXISTS %s(", t->name);
	if (t->parent)
		fprintf(f, "%s TEXT NOT NULL, ", t->parent);
	for (size_t k = 0; k < t->ncols; k++) {
		if (k)
			fputs(", ", f);
		put_col_def(f, d, &t->cols[k]);
	}
	if (t->parent && d->order_col_def)
		fprintf(f, ", %s", d->order_col_def);
	fputs(");", f);
	return finish(f, &out);
}

char *store_sql_add_column(const struct store_dialect *d, const struct store_table *t,
			   const struct store_column *c)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	fprintf(f, "ALTER TABLE %s ADD COLUMN ", t->name);
	put_col_def(f, d, c);
	fputc(';', f);
	return finish(f, &out);
}
