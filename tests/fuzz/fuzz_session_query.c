/* Fuzz target: GET /v1/sessions' query as validate_session_query takes it
 * (all, status, owner, limit, continue, project, order). The input is the values,
 * one per line; a line that is exactly "-" is an absent parameter. What
 * passes is within the documented bounds, every refusal says why, and a
 * token made for the filters that passed is taken back at its position. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manager/validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	const char *field[7] = {NULL};
	char *p = text;
	for (int i = 0; i < 7 && p; i++) {
		char *nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		field[i] = strcmp(p, "-") ? p : NULL;
		p = nl ? nl + 1 : NULL;
	}
	struct session_query_in in = {field[0], field[1], field[2], field[3], field[4], field[5], field[6]};
	struct session_query q;
	struct terr err = {0};
	if (validate_session_query(&in, &q, &err) < 0) {
		if (!err.msg[0])
			abort();   /* every refusal says why */
		free(text);
		return 0;
	}
	if (q.limit < 0 || q.limit > VALIDATE_MAX_LIST_LIMIT || q.after_seq < 0 || (q.newest && !field[6]) ||
	    q.status_mask >= (1u << SS__COUNT) || (field[1] && !q.status_mask))
		abort();
	/* A token for these filters comes back as its position. */
	char tok[VALIDATE_TOKEN_MAX];
	validate_session_token(&q, q.after_seq + 1, tok);
	in.cont = tok;
	struct session_query again;
	if (validate_session_query(&in, &again, &err) < 0 || again.after_seq != q.after_seq + 1)
		abort();
	free(text);
	return 0;
}
