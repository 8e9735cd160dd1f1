/* Signed JSON API calls (common/apiclient.h) over httpc + sign. */
#include "common/apiclient.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/httpc.h"
#include "common/sign.h"

#define API_DEFAULT_TIMEOUT_MS 30000L
/* How much of an error answer to a stream is kept for its message. */
#define API_STREAM_ERRBODY 16384

/* Splits "http://host:port/prefix" into the Host header value and the path
 * prefix (without trailing slash); both malloc'd. */
static int api_split_endpoint(const char *endpoint, char **host, char **prefix,
			      struct terr *err)
{
	const char *p = strstr(endpoint, "://");
	if (!p || (strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8)))
		return terr_set(err, EINVAL,
				"invalid endpoint '%.200s': expected http://HOST:PORT", endpoint);
	p += 3;
	size_t hlen = strcspn(p, "/?#");
	if (hlen == 0)
		return terr_set(err, EINVAL, "invalid endpoint '%.200s': no host", endpoint);
	const char *rest = p + hlen;
	size_t plen = strcspn(rest, "?#");
	while (plen && rest[plen - 1] == '/')
		plen--;
	*host = strndup(p, hlen);
	*prefix = strndup(rest, plen);
	if (!*host || !*prefix) {
		free(*host);
		free(*prefix);
		return terr_set(err, ENOMEM, "out of memory");
	}
	return 0;
}

static int api_status_errno(long status)
{
	switch (status) {
	case 400: return EINVAL;
	case 401: case 403: return EACCES;
	case 404: return ENOENT;
	case 409: return EEXIST;
	case 413: return E2BIG;
	case 429: return EUSERS;
	case 503: return EAGAIN;
	default: return EIO;
	}
}

/* Whom we are talking to, for messages: the routes say it. */
static const char *api_peer(const char *path_query)
{
	if (!strncmp(path_query, "/rpc/", 5))
		return "the agent";
	return "the manager";
}

/* What every signed request needs, built once for api_call and api_stream. */
struct api_req {
	char *host, *prefix, *full_path, *url;
	char h_date[96], h_host[300], h_auth[560];
};

static void api_req_free(struct api_req *r)
{
	free(r->host);
	free(r->prefix);
	free(r->full_path);
	free(r->url);
}

static int api_prepare_hashed(const struct api_client *c, const char *method, const char *path_query,
			      const char *payload, size_t body_len, const char *body_hash, struct api_req *r,
			      struct terr *err);

static int api_prepare(const struct api_client *c, const char *method, const char *path_query,
		       const char *payload, size_t body_len, struct api_req *r, struct terr *err)
{
	return api_prepare_hashed(c, method, path_query, payload, body_len, NULL, r, err);
}

/* body_hash: the body's hex SHA-256 when the body is streamed (payload
 * unused then); NULL: payload's. */
static int api_prepare_hashed(const struct api_client *c, const char *method, const char *path_query,
			      const char *payload, size_t body_len, const char *body_hash, struct api_req *r,
			      struct terr *err)
{
	memset(r, 0, sizeof(*r));
	if (!c || !c->endpoint || !c->endpoint[0])
		return terr_set(err, EINVAL, "no API endpoint configured");
	int rc = api_split_endpoint(c->endpoint, &r->host, &r->prefix, err);
	if (rc < 0)
		return rc;
	size_t ulen = strlen(r->prefix) + strlen(path_query) + 1;
	r->full_path = malloc(ulen);
	if (!r->full_path)
		return terr_set(err, ENOMEM, "out of memory");
	snprintf(r->full_path, ulen, "%s%s", r->prefix, path_query);
	const char *scheme_end = strstr(c->endpoint, "://") + 3;
	size_t base = (size_t)(scheme_end - c->endpoint) + strlen(r->host);
	ulen = base + strlen(r->full_path) + 1;
	r->url = malloc(ulen);
	if (!r->url)
		return terr_set(err, ENOMEM, "out of memory");
	memcpy(r->url, c->endpoint, base);
	memcpy(r->url + base, r->full_path, strlen(r->full_path) + 1);

	char date[64];
	sign_format_date(time(NULL), date, sizeof(date));
	char auth[512];
	if (body_hash)
		rc = sign_authorization_hashed(c->access_key ? c->access_key : "",
					       c->secret_key ? c->secret_key : "", method, r->full_path, date,
					       r->host, body_hash, auth, sizeof(auth), err);
	else
		rc = sign_authorization(c->access_key ? c->access_key : "", c->secret_key ? c->secret_key : "",
					method, r->full_path, date, r->host, payload, body_len, auth, sizeof(auth),
					err);
	if (rc < 0)
		return rc;
	snprintf(r->h_date, sizeof(r->h_date), "Date: %s", date);
	if (snprintf(r->h_host, sizeof(r->h_host), "Host: %s", r->host) >= (int)sizeof(r->h_host))
		return terr_set(err, EINVAL, "endpoint host name too long");
	snprintf(r->h_auth, sizeof(r->h_auth), "Authorization: %s", auth);
	return 0;
}

/* api_prepare for a JSON body (NULL for none): *payload is its text, which
 * the caller frees (also on failure), *body_len its length. */
static int api_prepare_json(const struct api_client *c, const char *method, const char *path_query,
			    json_t *body, char **payload, size_t *body_len, struct api_req *r,
			    struct terr *err)
{
	*payload = NULL;
	*body_len = 0;
	if (body) {
		*payload = json_dumps(body, JSON_COMPACT);
		if (!*payload)
			return terr_set(err, ENOMEM, "cannot serialize the request body");
		*body_len = strlen(*payload);
	}
	return api_prepare(c, method, path_query, *payload, *body_len, r, err);
}

static int api_transport_error(int r, const struct api_client *c, const char *path_query, long timeout_ms,
			       const struct terr *terr_http, struct terr *err)
{
	if (r == -ECONNREFUSED)
		return terr_set(err, ECONNREFUSED, "cannot reach %s at %s: %s", api_peer(path_query), c->endpoint,
				strerror(ECONNREFUSED));
	if (r == -ETIMEDOUT)
		return terr_set(err, ETIMEDOUT, "no answer from %s at %s within %ld ms (%s)", api_peer(path_query),
				c->endpoint, timeout_ms, terr_http->msg);
	return terr_set(err, -r, "cannot reach %s at %s: %s", api_peer(path_query), c->endpoint, terr_http->msg);
}

/* An answer that is not 2xx: our API's {"error":{"message"}} when it is
 * one, else the start of what came. Returns the negative errno. */
static int api_error_reply(const struct api_client *c, const char *method, const char *path_query, long status,
			   const char *body, size_t len, struct terr *err)
{
	json_t *doc = len ? json_loadb(body, len, 0, NULL) : NULL;
	const char *msg = NULL;
	json_t *e = json_object_get(doc, "error");
	if (json_is_object(e))
		msg = json_string_value(json_object_get(e, "message"));
	else if (json_is_string(e))
		msg = json_string_value(e);
	int r;
	if (msg && *msg) {
		r = terr_set(err, api_status_errno(status), "%s", msg);
	} else {
		/* Not our API's error shape (a proxy, a crash): show the start
		 * of what came so the person can tell what answered. */
		int n = (int)(len > 200 ? 200 : len);
		while (n > 0 && (body[n - 1] == '\n' || body[n - 1] == '\r'))
			n--;
		r = terr_set(err, api_status_errno(status), "%s at %s answered HTTP %ld to %s %s%s%.*s",
			     api_peer(path_query), c->endpoint, status, method, path_query, n ? ": " : "", n,
			     body ? body : "");
	}
	json_decref(doc);
	return r;
}

int api_call(const struct api_client *c, const char *method,
	     const char *path_query, json_t *body, long timeout_ms,
	     json_t **out, long *status, struct terr *err)
{
	char *payload = NULL;
	struct httpc_response resp = {0};
	struct api_req ar = {0};
	int r;

	if (out)
		*out = NULL;
	if (status)
		*status = 0;
	size_t body_len = 0;
	r = api_prepare_json(c, method, path_query, body, &payload, &body_len, &ar, err);
	if (r < 0)
		goto out;
	const char *headers[] = {ar.h_date, ar.h_host, ar.h_auth, "Content-Type: application/json",
				 "Accept: application/json", NULL};
	struct httpc_request req = {
		.method = method,
		.url = ar.url,
		.headers = headers,
		.body = payload,
		.body_len = body_len,
		.timeout_ms = timeout_ms > 0 ? timeout_ms : API_DEFAULT_TIMEOUT_MS,
	};
	struct terr terr_http = {0};
	r = httpc_do(&req, &resp, &terr_http);
	if (r < 0) {
		r = api_transport_error(r, c, path_query, req.timeout_ms, &terr_http, err);
		goto out;
	}
	if (status)
		*status = resp.status;

	if (resp.status >= 200 && resp.status < 300) {
		json_t *doc = NULL;
		if (resp.len) {
			json_error_t jerr;
			doc = json_loadb(resp.body, resp.len, 0, &jerr);
		}
		if (resp.len && !doc) {
			r = terr_set(err, EIO, "%s at %s answered %s %s with invalid JSON",
				     api_peer(path_query), c->endpoint, method, path_query);
			goto out;
		}
		if (out)
			*out = doc;
		else
			json_decref(doc);
		r = 0;
		goto out;
	}
	r = api_error_reply(c, method, path_query, resp.status, resp.body, resp.len, err);
out:
	httpc_response_free(&resp);
	api_req_free(&ar);
	free(payload);
	return r;
}

/* api_stream's transfer: the status decides where the body goes. */
struct api_stream_xfer {
	int (*on_open)(const char *content_type, void *ud);
	int (*on_data)(const char *data, size_t len, void *ud);
	void *ud;
	long status;
	char errbody[API_STREAM_ERRBODY];
	size_t errlen;
};

static int api_stream_status(long status, const char *content_type, void *ud)
{
	struct api_stream_xfer *x = ud;
	x->status = status;
	if (status >= 200 && status < 300 && x->on_open)
		return x->on_open(content_type, x->ud);
	return 0;
}

static int api_stream_data(const char *data, size_t len, void *ud)
{
	struct api_stream_xfer *x = ud;
	if (x->status >= 200 && x->status < 300)
		return x->on_data ? x->on_data(data, len, x->ud) : 0;
	size_t k = sizeof(x->errbody) - 1 - x->errlen;
	if (k > len)
		k = len;
	memcpy(x->errbody + x->errlen, data, k);
	x->errlen += k;
	return 0;
}

int api_stream(const struct api_client *c, const char *method, const char *path_query, json_t *body,
	       long timeout_ms, const char *accept, int (*on_open)(const char *content_type, void *ud),
	       int (*on_data)(const char *data, size_t len, void *ud), void *ud, const atomic_bool *cancel,
	       long *status, struct terr *err)
{
	char *payload = NULL;
	struct api_req ar = {0};
	struct api_stream_xfer *x = calloc(1, sizeof(*x));
	int r;
	if (status)
		*status = 0;
	if (!x)
		return terr_set(err, ENOMEM, "out of memory");
	size_t body_len = 0;
	r = api_prepare_json(c, method, path_query, body, &payload, &body_len, &ar, err);
	if (r < 0)
		goto out;
	char h_accept[128];
	snprintf(h_accept, sizeof(h_accept), "Accept: %s", accept ? accept : "*/*");
	const char *headers[] = {ar.h_date, ar.h_host, ar.h_auth, "Content-Type: application/json", h_accept,
				 NULL};
	x->on_open = on_open;
	x->on_data = on_data;
	x->ud = ud;
	struct httpc_request req = {
		.method = method,
		.url = ar.url,
		.headers = headers,
		.body = payload,
		.body_len = body_len,
		.timeout_ms = timeout_ms,
		.on_data = api_stream_data,
		.on_status = api_stream_status,
		.ud = x,
		.cancel = cancel,
	};
	struct httpc_response resp = {0};
	struct terr terr_http = {0};
	r = httpc_do(&req, &resp, &terr_http);
	httpc_response_free(&resp);
	if (r < 0) {
		if (r == -ECANCELED)
			r = terr_set(err, ECANCELED, "%s", terr_http.msg);
		else if (x->status >= 200 && x->status < 300)
			r = terr_set(err, EIO, "the stream from %s at %s was cut short: %s", api_peer(path_query),
				     c->endpoint, terr_http.msg);
		else
			r = api_transport_error(r, c, path_query, timeout_ms, &terr_http, err);
		goto out;
	}
	if (status)
		*status = resp.status;
	if (resp.status < 200 || resp.status >= 300)
		r = api_error_reply(c, method, path_query, resp.status, x->errbody, x->errlen, err);
out:
	api_req_free(&ar);
	free(payload);
	free(x);
	return r;
}

int api_upload(const struct api_client *c, const char *method, const char *path_query,
	       long (*read_body)(char *buf, size_t max, void *ud), void *ud, long long len,
	       const char *body_sha256, json_t **out, struct terr *err)
{
	struct httpc_response resp = {0};
	struct api_req ar = {0};
	if (out)
		*out = NULL;
	int r = api_prepare_hashed(c, method, path_query, NULL, 0, body_sha256, &ar, err);
	if (r < 0)
		goto out;
	char h_sha[128];
	snprintf(h_sha, sizeof(h_sha), "X-Tessera-Content-SHA256: %s", body_sha256);
	const char *headers[] = {ar.h_date, ar.h_host, ar.h_auth, h_sha, "Content-Type: application/octet-stream",
				 "Accept: application/json", NULL};
	struct httpc_request req = {
		.method = method,
		.url = ar.url,
		.headers = headers,
		.read_body = read_body,
		.read_body_len = len,
		.ud = ud,
		/* A manager that refuses the upload from its headers (exists,
		 * over quota) answers before reading the body and closes; with
		 * 100-continue that answer arrives instead of a broken pipe. */
		.expect_continue = 1,
	};
	struct terr terr_http = {0};
	r = httpc_do(&req, &resp, &terr_http);
	if (r < 0) {
		r = api_transport_error(r, c, path_query, 0, &terr_http, err);
		goto out;
	}
	if (resp.status >= 200 && resp.status < 300) {
		json_t *doc = resp.len ? json_loadb(resp.body, resp.len, 0, NULL) : NULL;
		if (out)
			*out = doc;
		else
			json_decref(doc);
		r = 0;
		goto out;
	}
	r = api_error_reply(c, method, path_query, resp.status, resp.body, resp.len, err);
out:
	httpc_response_free(&resp);
	api_req_free(&ar);
	return r;
}

char *api_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t len = strlen(s);
	char *out = malloc(3 * len + 1), *o = out;
	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' ||
		    *p == '~') {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}
