/* Helpers on the store's records, shared by every backend. The owned
 * strings of a session are its TEXT_PTR columns (columns.h), so a new one
 * is cleared and copied without a line here. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/columns.h"
#include "store/store.h"

void session_rec_clear(struct session_rec *r)
{
	const struct store_table *t = &store_sessions_table;
	for (size_t k = 0; k < t->ncols; k++) {
		if (t->cols[k].kind != STORE_COL_TEXT_PTR)
			continue;
		char **f = store_field(r, &t->cols[k]);
		free(*f);
		*f = NULL;
	}
}

int session_rec_copy(struct session_rec *dst, const struct session_rec *src)
{
	const struct store_table *t = &store_sessions_table;
	*dst = *src;
	/* First no string is shared, so that a failure can clear dst. */
	for (size_t k = 0; k < t->ncols; k++)
		if (t->cols[k].kind == STORE_COL_TEXT_PTR)
			*(char **)store_field(dst, &t->cols[k]) = NULL;
	for (size_t k = 0; k < t->ncols; k++) {
		if (t->cols[k].kind != STORE_COL_TEXT_PTR)
			continue;
		const char *from = *(char *const *)store_cfield(src, &t->cols[k]);
		char **to = store_field(dst, &t->cols[k]);
		if (from && !(*to = strdup(from))) {
			session_rec_clear(dst);
			return -ENOMEM;
		}
	}
	return 0;
}

int store_log_tail_read(struct log_tail_rec *l, int read_rc, struct terr *err)
{
	/* A NULL text (none was written) reads as an empty log. */
	if (read_rc == 0 && !l->text)
		l->text = strdup("");
	if (read_rc < 0 || !l->text) {
		free(l->text);
		l->text = NULL;
		return terr_set(err, ENOMEM, "out of memory");
	}
	return 0;
}
