/* Aligned tables (cli/table.h). */
#include "cli/table.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/units.h"

struct cli_table {
	size_t ncols, nrows;
	char **cells;  /* (nrows + 1) * ncols; row 0 is the header */
};

struct cli_table *cli_table_new(size_t ncols, const char *const *headers)
{
	struct cli_table *t = calloc(1, sizeof(*t));
	if (!t || !ncols)
		goto fail;
	t->ncols = ncols;
	t->cells = calloc(ncols, sizeof(char *));
	if (!t->cells)
		goto fail;
	for (size_t i = 0; i < ncols; i++) {
		t->cells[i] = strdup(headers[i] ? headers[i] : "");
		if (!t->cells[i])
			goto fail;
		for (char *p = t->cells[i]; *p; p++)
			*p = (char)toupper((unsigned char)*p);
	}
	return t;
fail:
	cli_table_free(t);
	return NULL;
}

int cli_table_add(struct cli_table *t, const char *const *cells)
{
	size_t rows = t->nrows + 2;
	char **nc = realloc(t->cells, rows * t->ncols * sizeof(char *));
	if (!nc)
		return -ENOMEM;
	t->cells = nc;
	char **row = nc + (t->nrows + 1) * t->ncols;
	for (size_t i = 0; i < t->ncols; i++) {
		row[i] = strdup(cells[i] ? cells[i] : "-");
		if (!row[i]) {
			while (i--)
				free(row[i]);
			return -ENOMEM;
		}
	}
	t->nrows++;
	return 0;
}

/* Display width: UTF-8 continuation bytes take no column. */
static size_t cli_width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xC0) != 0x80)
			w++;
	return w;
}

void cli_table_print(const struct cli_table *t, FILE *out)
{
	size_t *width = calloc(t->ncols, sizeof(size_t));
	if (!width)
		return;
	for (size_t r = 0; r <= t->nrows; r++)
		for (size_t c = 0; c < t->ncols; c++) {
			size_t w = cli_width(t->cells[r * t->ncols + c]);
			if (w > width[c])
				width[c] = w;
		}
	for (size_t r = 0; r <= t->nrows; r++) {
		for (size_t c = 0; c < t->ncols; c++) {
			const char *cell = t->cells[r * t->ncols + c];
			fputs(cell, out);
			if (c + 1 < t->ncols)
				fprintf(out, "%*s", (int)(width[c] - cli_width(cell) + 2), "");
		}
		fputc('\n', out);
	}
	free(width);
}

void cli_table_free(struct cli_table *t)
{
	if (!t)
		return;
	if (t->cells)
		for (size_t i = 0; i < (t->nrows + 1) * t->ncols; i++)
			free(t->cells[i]);
	free(t->cells);
	free(t);
}

void cli_format_age(int64_t seconds, char *buf, size_t n)
{
	if (seconds < 0)
		seconds = 0;
	if (seconds < 60)
		snprintf(buf, n, "%" PRId64 "s", seconds);
	else if (seconds < 3600)
		snprintf(buf, n, "%" PRId64 "m", seconds / 60);
	else if (seconds < 86400)
		snprintf(buf, n, "%" PRId64 "h", seconds / 3600);
	else
		snprintf(buf, n, "%" PRId64 "d", seconds / 86400);
}

void cli_format_fgpu(int64_t milli, char *buf, size_t n)
{
	if (milli == 0) {
		snprintf(buf, n, "-");
		return;
	}
	char num[32];
	units_format_milli(milli, num, sizeof(num));
	snprintf(buf, n, "%s fGPU", num);
}

void cli_shorten(const char *s, size_t max, char *buf, size_t n)
{
	if (!n)
		return;
	if (!s)
		s = "";
	size_t chars = 0, o = 0, total = cli_width(s);
	size_t keep = total > max ? (max > 3 ? max - 3 : 0) : total;
	for (const char *p = s; *p; p++) {
		int lead = ((unsigned char)*p & 0xC0) != 0x80;
		if (lead && chars == keep)
			break;
		if (o + 1 >= n)
			break;
		chars += lead;
		buf[o++] = (*p == '\n' || *p == '\r' || *p == '\t') ? ' ' : *p;
	}
	if (total > max)
		for (int i = 0; i < 3 && o + 1 < n; i++)
			buf[o++] = '.';
	buf[o] = '\0';
}
