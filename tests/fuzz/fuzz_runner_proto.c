/* Fuzz target: what the runner parses from its app port and its image
 * (src/runner/proto.h, appdef.h, and src/common/apphello.h, the codec
 * the proxy writes the line with): the TESSERA-APP/1 line, the terminal's
 * request head and query, the --apps spec, a service definition. The
 * first byte picks the parser; whatever the bytes, none may crash, and
 * what they accept must hold what their headers promise. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/apphello.h"
#include "runner/appdef.h"
#include "runner/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t which = data[0] % 5;
	const char *s = (const char *)data + 1;
	size_t n = size - 1;
	struct terr err = {0};
	switch (which) {
	case 0: {
		size_t len, used;
		int rc = proto_find_line(s, n, &len, &used);
		if (rc == 1 && (used > n || len > used || used > PROTO_LINE_MAX))
			abort();
		struct apphello h;
		if (rc == 1 && apphello_parse(s, len, &h, &err) == 0) {
			if (strlen(h.secret) != PROTO_SECRET_LEN)
				abort();
			if (h.is_port ? (h.port < 1 || h.port > 65535 || h.port == APP_RUNNER_PORT)
				      : !appdef_valid_name(h.app, strlen(h.app)))
				abort();
		}
		break;
	}
	case 1: {
		size_t used;
		struct proto_http_req r;
		if (proto_find_head(s, n, &used) == 1) {
			if (used > n)
				abort();
			if (proto_parse_http_head(s, used, &r, &err) == 0 &&
			    (strlen(r.path) >= sizeof(r.path) || strlen(r.ws_key) >= sizeof(r.ws_key)))
				abort();
		}
		break;
	}
	case 2: {
		char *q = malloc(n + 1);
		memcpy(q, s, n);
		q[n] = '\0';
		struct proto_term_query tq;
		if (proto_parse_term_query(q, &tq, &err) == 0 &&
		    (!tq.term[0] || tq.cols < 0 || tq.cols > 10000 || tq.rows < 0 || tq.rows > 10000))
			abort();
		free(q);
		break;
	}
	case 3: {
		char *spec = malloc(n + 1);
		memcpy(spec, s, n);
		spec[n] = '\0';
		struct app_decl d[APP_MAX];
		size_t nd = 0;
		if (appdef_parse_spec(spec, d, APP_MAX, &nd, &err) == 0) {
			for (size_t i = 0; i < nd; i++)
				if (d[i].port < 1 || d[i].port > 65535 || d[i].port == APP_RUNNER_PORT ||
				    !appdef_valid_name(d[i].name, strlen(d[i].name)))
					abort();
		}
		free(spec);
		break;
	}
	default: {
		struct app_service sv;
		if (appdef_parse_service(s, n, 8081, &sv, &err) == 0) {
			if (!sv.argv || !sv.argv[0] || !sv.env)
				abort();
			appdef_service_free(&sv);
		}
		break;
	}
	}
	return 0;
}
