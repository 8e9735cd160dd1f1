/* Signed JSON API calls (common/apiclient.h) over httpc + sign. */
#include "common/apiclient.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/httpc.h"
#include "common/sign.h"

#define API_DEFAULT_TIMEOUT_MS 30000L

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

int api_call(const struct api_client *c, const char *method,
	     const char *path_query, json_t *body, long timeout_ms,
	     json_t **out, long *status, struct terr *err)
{
	char *host = NULL, *prefix = NULL, *payload = NULL, *url = NULL,
	     *full_path = NULL;
	struct httpc_response resp = {0};
	int r;

	if (out)
		*out = NULL;
	if (status)
		*status = 0;
	if (!c || !c->endpoint || !c->endpoint[0])
		return terr_set(err, EINVAL, "no API endpoint configured");
	r = api_split_endpoint(c->endpoint, &host, &prefix, err);
	if (r < 0)
		return r;

	size_t ulen = strlen(prefix) + strlen(path_query) + 1;
	full_path = malloc(ulen);
	if (!full_path) {
		r = terr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	snprintf(full_path, ulen, "%s%s", prefix, path_query);
	const char *scheme_end = strstr(c->endpoint, "://") + 3;
	size_t base = (size_t)(scheme_end - c->endpoint) + strlen(host);
	ulen = base + strlen(full_path) + 1;
	url = malloc(ulen);
	if (!url) {
		r = terr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	memcpy(url, c->endpoint, base);
	memcpy(url + base, full_path, strlen(full_path) + 1);

	size_t body_len = 0;
	if (body) {
		payload = json_dumps(body, JSON_COMPACT);
		if (!payload) {
			r = terr_set(err, ENOMEM, "cannot serialize the request body");
			goto out;
		}
		body_len = strlen(payload);
	}

	char date[64];
	sign_format_date(time(NULL), date, sizeof(date));
	char auth[512];
	r = sign_authorization(c->access_key ? c->access_key : "",
			       c->secret_key ? c->secret_key : "", method, full_path,
			       date, host, payload, body_len, auth, sizeof(auth), err);
	if (r < 0)
		goto out;

	char h_date[96], h_host[300], h_auth[560];
	snprintf(h_date, sizeof(h_date), "Date: %s", date);
	if (snprintf(h_host, sizeof(h_host), "Host: %s", host) >= (int)sizeof(h_host)) {
		r = terr_set(err, EINVAL, "endpoint host name too long");
		goto out;
	}
	snprintf(h_auth, sizeof(h_auth), "Authorization: %s", auth);
	const char *headers[] = {h_date, h_host, h_auth, "Content-Type: application/json",
				 "Accept: application/json", NULL};
	struct httpc_request req = {
		.method = method,
		.url = url,
		.headers = headers,
		.body = payload,
		.body_len = body_len,
		.timeout_ms = timeout_ms > 0 ? timeout_ms : API_DEFAULT_TIMEOUT_MS,
	};
	struct terr terr_http = {0};
	r = httpc_do(&req, &resp, &terr_http);
	if (r < 0) {
		if (r == -ECONNREFUSED)
			r = terr_set(err, ECONNREFUSED, "cannot reach %s at %s: %s",
				     api_peer(path_query), c->endpoint, strerror(ECONNREFUSED));
		else if (r == -ETIMEDOUT)
			r = terr_set(err, ETIMEDOUT, "no answer from %s at %s within %ld ms (%s)",
				     api_peer(path_query), c->endpoint, req.timeout_ms,
				     terr_http.msg);
		else
			r = terr_set(err, r, "cannot reach %s at %s: %s", api_peer(path_query),
				     c->endpoint, terr_http.msg);
		goto out;
	}
	if (status)
		*status = resp.status;

	json_t *doc = NULL;
	if (resp.len) {
		json_error_t jerr;
		doc = json_loadb(resp.body, resp.len, 0, &jerr);
	}
	if (resp.status >= 200 && resp.status < 300) {
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

	const char *msg = NULL;
	json_t *e = json_object_get(doc, "error");
	if (json_is_object(e))
		msg = json_string_value(json_object_get(e, "message"));
	else if (json_is_string(e))
		msg = json_string_value(e);
	if (msg && *msg) {
		r = terr_set(err, api_status_errno(resp.status), "%s", msg);
	} else {
		/* Not our API's error shape (a proxy, a crash): show the start
		 * of what came so the person can tell what answered. */
		int n = (int)(resp.len > 200 ? 200 : resp.len);
		while (n > 0 && (resp.body[n - 1] == '\n' || resp.body[n - 1] == '\r'))
			n--;
		r = terr_set(err, api_status_errno(resp.status),
			     "%s at %s answered HTTP %ld to %s %s%s%.*s",
			     api_peer(path_query), c->endpoint, resp.status, method,
			     path_query, n ? ": " : "", n, resp.body ? resp.body : "");
	}
	json_decref(doc);
out:
	httpc_response_free(&resp);
	free(host);
	free(prefix);
	free(full_path);
	free(url);
	free(payload);
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
