/* Helpers on the store's records, shared by every backend. */
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

void session_rec_clear(struct session_rec *r)
{
	free(r->env_json);
	free(r->startup_command);
	free(r->alloc_json);
	r->env_json = NULL;
	r->startup_command = NULL;
	r->alloc_json = NULL;
}

int session_rec_copy(struct session_rec *dst, const struct session_rec *src)
{
	*dst = *src;
	dst->env_json = src->env_json ? strdup(src->env_json) : NULL;
	dst->startup_command = src->startup_command ? strdup(src->startup_command) : NULL;
	dst->alloc_json = src->alloc_json ? strdup(src->alloc_json) : NULL;
	if ((src->env_json && !dst->env_json) || (src->startup_command && !dst->startup_command) ||
	    (src->alloc_json && !dst->alloc_json)) {
		session_rec_clear(dst);
		return -ENOMEM;
	}
	return 0;
}
