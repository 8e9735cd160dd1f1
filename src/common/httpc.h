/* Small HTTP client over libcurl: TCP or a unix socket (Docker). */
#ifndef TESSERA_COMMON_HTTPC_H
#define TESSERA_COMMON_HTTPC_H

#include <stdatomic.h>
#include <stddef.h>

#include "common/err.h"

struct httpc_request {
	const char *method;          /* "GET", "POST", ... */
	const char *url;             /* full URL; host part ignored on a unix socket */
	const char *unix_socket;     /* NULL for TCP */
	const char *const *headers;  /* NULL-terminated "Name: value" list, may be NULL */
	const void *body;            /* may be NULL */
	size_t body_len;
	/* A body read as it is sent (an upload of any size) instead of body:
	 * read_body fills up to max bytes and returns how many (0 at the end,
	 * -1 to abort the transfer); read_body_len is the Content-Length. */
	long (*read_body)(char *buf, size_t max, void *ud);
	long long read_body_len;
	/* Send "Expect: 100-continue" and the body only once the server says
	 * so: a server that refuses the request from its headers alone (a
	 * 409, a 413 on Content-Length) answers before any body byte, instead
	 * of closing the connection while the body is being sent, which
	 * libcurl would report as a send failure in place of the answer. */
	int expect_continue;
	long timeout_ms;             /* whole transfer; 0 = none */
	/* Streaming: when set, received body bytes go here instead of being
	 * collected; return non-zero to stop the transfer (the call then
	 * returns 0 with whatever status came). */
	int (*on_data)(const char *data, size_t len, void *ud);
	/* Streaming too: called once with the final status as soon as the
	 * response's headers are in, before any body byte reaches on_data
	 * (so a long-lived stream with no output yet is known to be open).
	 * Non-zero stops the transfer as on_data does. May be NULL. */
	int (*on_status)(long status, const char *content_type, void *ud);
	void *ud;
	/* Checked about once a second and on each chunk; true aborts. Set
	 * from another thread (atomic_store), while this one is in httpc_do;
	 * read with a relaxed load: the flag carries no data, it only asks
	 * the transfer to end. May be NULL. */
	const atomic_bool *cancel;
};

struct httpc_response {
	long status;
	char *body;        /* NUL-terminated, owned; NULL when streamed */
	size_t len;
	char content_type[128];
	/* The answer's Content-Length, -1 when it has none (chunked). Known
	 * by the time on_status is called, so a relay can pass it on. */
	long long content_length;
};

/* Performs the request. A transport failure (refused, timeout) returns
 * -ECONNREFUSED / -ETIMEDOUT / -EIO with curl's message; any HTTP status is
 * a success here (the caller reads resp->status). resp must be freed with
 * httpc_response_free. Thread-safe (one easy handle per call). */
int httpc_do(const struct httpc_request *req, struct httpc_response *resp,
	     struct terr *err);
void httpc_response_free(struct httpc_response *resp);

/* curl_global_init once per process; call from main before threads. */
void httpc_global_init(void);

#endif
