/* HTTP client over libcurl (common/httpc.h). One easy handle per call keeps
 * calls independent across threads; connection reuse is not worth the
 * shared state at the request rates of a control plane. */
#include "common/httpc.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t httpc_once = PTHREAD_ONCE_INIT;

static void httpc_init_once(void)
{
	/* curl_global_init is not thread-safe on older libcurl; pthread_once
	 * makes a late first call from a thread harmless too. */
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

void httpc_global_init(void)
{
	pthread_once(&httpc_once, httpc_init_once);
}

struct httpc_xfer {
	const struct httpc_request *req;
	struct httpc_response *resp;
	CURL *h;
	int status_told;  /* on_status was called */
	char *buf;
	size_t len, cap;
	int stopped;    /* on_data asked to stop: not an error */
	int cancelled;  /* *cancel was set: an error */
	int nomem;
};

static int httpc_cancel_requested(const struct httpc_request *req)
{
	/* Relaxed: nothing written before the flag is read after it here. */
	return req->cancel && atomic_load_explicit(req->cancel, memory_order_relaxed);
}

static size_t httpc_write_cb(char *data, size_t size, size_t nmemb, void *ud)
{
	struct httpc_xfer *x = ud;
	size_t n = size * nmemb;

	if (httpc_cancel_requested(x->req)) {
		x->cancelled = 1;
		return 0;  /* makes curl abort with CURLE_WRITE_ERROR */
	}
	if (x->req->on_data) {
		if (n && x->req->on_data(data, n, x->req->ud)) {
			x->stopped = 1;
			return 0;
		}
		return n;
	}
	if (x->len + n + 1 > x->cap) {
		size_t cap = x->cap ? x->cap : 4096;
		while (cap < x->len + n + 1)
			cap *= 2;
		char *nb = realloc(x->buf, cap);
		if (!nb) {
			x->nomem = 1;
			return 0;
		}
		x->buf = nb;
		x->cap = cap;
	}
	memcpy(x->buf + x->len, data, n);
	x->len += n;
	x->buf[x->len] = '\0';
	return n;
}

/* The blank line after the headers of a final (non-1xx) response is
 * where on_status learns the status. */
static size_t httpc_header_cb(char *data, size_t size, size_t nmemb, void *ud)
{
	struct httpc_xfer *x = ud;
	size_t n = size * nmemb;
	bool blank = (n == 2 && data[0] == '\r' && data[1] == '\n') || (n == 1 && data[0] == '\n');
	if (!blank || x->status_told)
		return n;
	long status = 0;
	char *ct = NULL;
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
	if (status < 200)
		return n;   /* an interim response; the final one follows */
	curl_easy_getinfo(x->h, CURLINFO_CONTENT_TYPE, &ct);
	curl_off_t cl = -1;
	if (curl_easy_getinfo(x->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) == CURLE_OK)
		x->resp->content_length = cl;
	x->status_told = 1;
	if (x->req->on_status(status, ct ? ct : "", x->req->ud)) {
		x->stopped = 1;
		return 0;
	}
	return n;
}

static int httpc_xferinfo_cb(void *ud, curl_off_t dltotal, curl_off_t dlnow,
			     curl_off_t ultotal, curl_off_t ulnow)
{
	(void)dltotal; (void)dlnow; (void)ultotal; (void)ulnow;
	struct httpc_xfer *x = ud;
	if (httpc_cancel_requested(x->req)) {
		x->cancelled = 1;
		return 1;
	}
	return 0;
}

static int httpc_map_error(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return ECONNREFUSED;
	case CURLE_OPERATION_TIMEDOUT:
		return ETIMEDOUT;
	default:
		return EIO;
	}
}

/* curl asks for the next piece of a streamed request body. */
static size_t httpc_read_cb(char *buf, size_t size, size_t nitems, void *ud)
{
	const struct httpc_request *req = ud;
	long n = req->read_body(buf, size * nitems, req->ud);
	return n < 0 ? CURL_READFUNC_ABORT : (size_t)n;
}

int httpc_do(const struct httpc_request *req, struct httpc_response *resp,
	     struct terr *err)
{
	struct httpc_xfer x = {.req = req, .resp = resp};
	struct curl_slist *hdrs = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	int ret = 0;

	memset(resp, 0, sizeof(*resp));
	resp->content_length = -1;
	if (!req->method || !req->url)
		return terr_set(err, EINVAL, "httpc: method and url are required");
	httpc_global_init();

	CURL *h = curl_easy_init();
	if (!h)
		return terr_set(err, ENOMEM, "httpc: cannot create a curl handle");
	x.h = h;

	for (const char *const *p = req->headers; p && *p; p++) {
		struct curl_slist *n = curl_slist_append(hdrs, *p);
		if (!n) {
			ret = terr_set(err, ENOMEM, "httpc: out of memory");
			goto out;
		}
		hdrs = n;
	}
	/* Without this curl waits up to a second for "100 Continue" before
	 * sending bodies over 1 KiB; our servers need the handshake only where
	 * the caller asks for it (expect_continue: they answer it at once). */
	struct curl_slist *n = curl_slist_append(hdrs, req->expect_continue ? "Expect: 100-continue" : "Expect:");
	if (!n) {
		ret = terr_set(err, ENOMEM, "httpc: out of memory");
		goto out;
	}
	hdrs = n;

	curl_easy_setopt(h, CURLOPT_URL, req->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  /* no SIGALRM in threads */
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, httpc_write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
	if (req->on_status) {
		curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, httpc_header_cb);
		curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
	}
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (req->unix_socket) {
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, req->unix_socket);
		/* A proxy from the environment must never swallow a local
		 * socket request. */
		curl_easy_setopt(h, CURLOPT_PROXY, "");
	}
	if (req->timeout_ms > 0)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, req->timeout_ms);
	if (req->cancel) {
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, httpc_xferinfo_cb);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
	}

	if (req->read_body) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, httpc_read_cb);
		curl_easy_setopt(h, CURLOPT_READDATA, (void *)req);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->read_body_len);
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
	} else if (!strcmp(req->method, "GET") && !req->body) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else if (!strcmp(req->method, "HEAD")) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else {
		if (req->body || !strcmp(req->method, "POST") ||
		    !strcmp(req->method, "PUT")) {
			/* POST/PUT always carry a Content-Length, even 0:
			 * some servers (Docker) answer 411 otherwise. */
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
					 (curl_off_t)(req->body ? req->body_len : 0));
			curl_easy_setopt(h, CURLOPT_POSTFIELDS,
					 req->body ? req->body : "");
		}
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
	}

	CURLcode rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
	char *ct = NULL;
	curl_off_t clen = -1;
	if (curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &clen) == CURLE_OK)
		resp->content_length = clen;
	if (curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
		snprintf(resp->content_type, sizeof(resp->content_type), "%s", ct);

	if (x.cancelled) {
		ret = terr_set(err, ECANCELED, "request to %s cancelled", req->url);
		goto out;
	}
	if (x.nomem) {
		ret = terr_set(err, ENOMEM, "out of memory reading the response of %s",
			       req->url);
		goto out;
	}
	if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && x.stopped)) {
		ret = terr_set(err, httpc_map_error(rc), "%s",
			       errbuf[0] ? errbuf : curl_easy_strerror(rc));
		goto out;
	}
	if (!req->on_data) {
		if (!x.buf) {
			x.buf = malloc(1);
			if (!x.buf) {
				ret = terr_set(err, ENOMEM, "out of memory");
				goto out;
			}
			x.buf[0] = '\0';
		}
		resp->body = x.buf;
		resp->len = x.len;
		x.buf = NULL;
	}
out:
	free(x.buf);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	return ret;
}

void httpc_response_free(struct httpc_response *resp)
{
	if (!resp)
		return;
	free(resp->body);
	resp->body = NULL;
	resp->len = 0;
}
