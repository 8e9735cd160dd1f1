/* Fuzz target: the app route format (src/common/approute_msg.h), what the
 * proxy reads from the manager. The first byte picks the list or one
 * route (a redeem answer); whatever the bytes, what the reader accepts
 * must hold what its header promises, and written back and read again it
 * must come out the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/approute_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct approute_msg *m)
{
	if (!m->session_id[0] || !m->endpoint[0] || !m->secret[0] || (m->user[0] && !m->owner[0]) ||
	    (strncmp(m->target, "app:", 4) && strncmp(m->target, "port:", 5)) || m->port < 0 || m->port > 65535 ||
	    (!m->port && !m->host[0]) || m->email || m->session_name)
		abort();
	for (const char *c = m->host; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			abort();
}

/* What the manager writes always has a user and an app; the reader
 * takes routes without (and "user_id": "" it refuses). */
static bool writable(const struct approute_msg *m)
{
	return m->user[0] && m->app[0];
}

/* Written and read back: the same route. */
static void round_trip(const struct approute_msg *m, bool with_user)
{
	if (!writable(m))
		return;
	json_t *o = approute_msg_to_json(m);
	struct approute_msg back;
	struct terr err = {0};
	if (!o)
		return;
	if (approute_msg_from_json(o, with_user, &back, &err) < 0)
		abort();
	/* One of port and host is written: a route that had both keeps the port. */
	if (m->port) {
		if (back.port != m->port || back.host[0])
			abort();
	} else if (strcmp(back.host, m->host)) {
		abort();
	}
	if (strcmp(back.user, m->user) || strcmp(back.owner, m->owner) || strcmp(back.session_id, m->session_id) ||
	    strcmp(back.app, m->app) || strcmp(back.target, m->target) || strcmp(back.endpoint, m->endpoint) ||
	    strcmp(back.secret, m->secret))
		abort();
	json_decref(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t which = data[0] % 2;
	json_error_t je;
	json_t *doc = json_loadb((const char *)data + 1, size - 1, 0, &je);
	if (!doc)
		return 0;
	struct terr err = {0};
	if (which == 0) {
		struct approute_list l;
		if (approute_list_from_json(doc, &l, &err) == 0) {
			bool all = true;
			for (size_t i = 0; i < l.n; i++) {
				check(&l.r[i]);
				round_trip(&l.r[i], false);
				all &= writable(&l.r[i]);
			}
			for (size_t i = 0; i < l.n_admins; i++)
				if (!l.admins[i][0])
					abort();
			json_t *again = all ? approute_list_to_json(&l) : NULL;
			struct approute_list l2;
			if (again && (approute_list_from_json(again, &l2, &err) < 0 || l2.n != l.n ||
				      l2.generation != l.generation || l2.n_admins != l.n_admins ||
				      l2.n_disabled != l.n_disabled))
				abort();
			if (again)
				approute_list_free(&l2);
			json_decref(again);
			approute_list_free(&l);
		} else if (!err.msg[0]) {
			abort();
		}
	} else {
		struct approute_msg m;
		if (approute_msg_from_json(doc, true, &m, &err) == 0) {
			check(&m);
			if (!m.user[0])
				abort();
			round_trip(&m, true);
		} else if (!err.msg[0]) {
			abort();
		}
	}
	json_decref(doc);
	return 0;
}
