/* Validation of user input to the API; each check fills err with a message
 * naming the field and the rule. */
#ifndef TESSERA_MANAGER_VALIDATE_H
#define TESSERA_MANAGER_VALIDATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/model.h"
#include "store/store.h"

#define VALIDATE_MAX_COUNT 100
/* Containers of one cluster session (SESSION_SPEC_CLUSTER_MAX on agents). */
#define VALIDATE_MAX_CLUSTER 16
#define VALIDATE_MAX_CPU_M (1024 * 1000)
/* The kernel's smallest CFS quota is 1 ms per 100 ms period: 0.01 CPU. */
#define VALIDATE_MIN_CPU_M 10
#define VALIDATE_MIN_MEM (6LL << 20)       /* Docker's own minimum */
#define VALIDATE_MAX_MEM (16LL << 40)
#define VALIDATE_MAX_ENV 128
#define VALIDATE_MAX_ENV_VALUE 4096
#define VALIDATE_MAX_COMMAND 4096
#define VALIDATE_MAX_EXEC_ARGS 256

/* Docker reference: [host[:port]/]path[:tag][@sha256:hex], lower-case path
 * components of [a-z0-9._-], tag [A-Za-z0-9_.-]{1,128}, 255 chars at most. */
int validate_image_ref(const char *ref, struct terr *err);
/* Object of string values, keys ^[A-Za-z_][A-Za-z0-9_]*$, no TESSERA_ prefix. */
int validate_env(json_t *env, struct terr *err);

/* An email address: 3 to 254 characters, one '@' with something on both
 * sides, no spaces, quotes, commas or control characters. Writes it
 * lower-cased to out (n bytes); NULL is refused like a bad address. */
int validate_email(const char *email, char *out, size_t n, struct terr *err);
/* The <who> of a policy.<who> setting: "default", or the email of the
 * user it limits (validate_email, so it is valid UTF-8 and lower-cased as
 * users' emails are). Writes the key to use to out (n bytes). */
int validate_policy_key(const char *key, char *out, size_t n, struct terr *err);

/* GET /v1/sessions' query (docs/api.md, "List sessions"), parsed.
 * status_mask: bit (1 << status) of each status asked for, 0 for the
 * default set (active ones, or every one with all); owner_email: "" for
 * every owner the caller may see; limit: 0 for no limit (the whole list
 * at once, as before pagination), else 1..VALIDATE_MAX_LIST_LIMIT;
 * after_seq: the continue token's position (0: from the start);
 * newest: newest first (order=newest), the token's position then the
 * last session shown, the page going on below it. */
#define VALIDATE_MAX_LIST_LIMIT 1000
struct session_query {
	bool all;
	unsigned status_mask;
	char owner_email[256];
	char project[64];        /* "": every project the caller sees */
	long limit;
	int64_t after_seq;
	bool newest;
};
/* The raw query values (NULL: absent). */
struct session_query_in {
	const char *all, *status, *owner, *limit, *cont, *project, *order;
};
/* Validates and parses in (each error names the parameter and the rule;
 * a continue token made for another filter is refused). */
int validate_session_query(const struct session_query_in *in, struct session_query *out, struct terr *err);
/* The continue token of a page that ended at the session with sequence
 * number last_seq, for the same filters as q: opaque to clients, NUL-
 * terminated into out (VALIDATE_TOKEN_MAX bytes). */
#define VALIDATE_TOKEN_MAX 48
void validate_session_token(const struct session_query *q, int64_t last_seq, char out[VALIDATE_TOKEN_MAX]);

#define VALIDATE_MAX_MOUNTS 16
/* The full launcher's limits (docs/api.md, "POST /v1/sessions"). */
#define VALIDATE_MAX_PREOPEN 8
#define VALIDATE_MAX_BATCH_TIMEOUT_S (30LL * 24 * 3600)
#define VALIDATE_MAX_STARTS_AHEAD_MS (366LL * 24 * 3600 * 1000)

/* An RFC 3339 time ("2026-11-29T07:00:00Z", "2026-11-29T08:00:00.5+01:00"):
 * a date, 'T' (or 't', or one space), a time with seconds optional and at
 * most 3 decimals, and 'Z' or an offset. *ms: milliseconds since the
 * epoch. EINVAL naming what for anything else (a date that does not
 * exist, as 31 Feb, included). */
int validate_time(const char *text, const char *what, int64_t *ms, struct terr *err);

/* A validated create request. */
struct create_request {
	const char *image;       /* borrowed from the body */
	const char *name;        /* NULL: generated */
	int64_t count;
	struct res req;
	json_t *env;             /* borrowed, may be NULL */
	const char *startup_command;
	bool batch;              /* "type": "batch": ends with its command */
	bool root;               /* run as root: the owner's policy must allow it */
	bool dry_run;            /* ?dry_run=1: validate and estimate, create nothing */
	/* "mounts": ["NAME[:PATH][:ro]", ...], parsed; targets unique. */
	struct model_mount mounts[VALIDATE_MAX_MOUNTS];
	size_t n_mounts;
	/* docs/scheduling.md: the project (NULL: the user's default), the
	 * resource group (NULL: "default"), the priority (0..100, bounded
	 * later by the owner's policy) and whether it may be preempted
	 * (VALIDATE_PREEMPT_DEFAULT: as the owner's policy says for its
	 * type). */
	const char *project;
	const char *group;
	int64_t priority;
	enum { VALIDATE_PREEMPT_DEFAULT, VALIDATE_PREEMPT_YES, VALIDATE_PREEMPT_NO } preemptible;
	/* Containers of each session (1..MGR_CLUSTER_MAX) and where they may
	 * go: STORE_CLUSTER_SINGLE_NODE or _MULTI_NODE. */
	int64_t cluster_size;
	const char *cluster_mode;
	/* "starts_at": not started before (ms; 0: as soon as it fits; at
	 * most a year ahead); "batch_timeout": seconds a batch session may
	 * run (0: no limit); "preopen_ports": [PORT, ...] listed as its apps
	 * from the start, kept as "8080,8888" (unique, 1..65535, not the
	 * runner's 7611). */
	int64_t starts_at_ms;
	int64_t batch_timeout_s;
	char preopen_ports[128];
};

/* Parses and validates a POST /v1/sessions body; strings borrow from body. */
int validate_create_request(json_t *body, struct create_request *out, struct terr *err);

#endif
