/* Fuzz target: a POST /v1/sessions body as the manager takes it, parsed
 * by jsonutil_parse_body as api_parse_body does and checked by
 * validate_create_request (image reference, name, count, resources, env,
 * startup command). Its seeds are the malformed-request corpus that
 * tests/e2e/test_fuzz_replay.sh also sends to a live server. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"
#include "manager/validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct terr err = {0};
	json_t *body = jsonutil_parse_body((const char *)data, size, JSONUTIL_BODY_MAX_DEPTH, &err);
	if (!body) {
		if (!err.msg[0])
			abort();   /* every refusal says why */
		return 0;
	}
	struct create_request cr;
	if (validate_create_request(body, &cr, &err) == 0) {
		/* What passed is within the documented bounds. */
		if (!cr.image || cr.count < 1 || cr.count > VALIDATE_MAX_COUNT ||
		    cr.req.cpu_m < VALIDATE_MIN_CPU_M || cr.req.cpu_m > VALIDATE_MAX_CPU_M ||
		    cr.req.mem < VALIDATE_MIN_MEM || cr.req.mem > VALIDATE_MAX_MEM)
			abort();
	} else if (!err.msg[0]) {
		abort();   /* every refusal says why */
	}
	json_decref(body);
	return 0;
}
