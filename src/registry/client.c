#include "registry/registry.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/httpc.h"

int registry_parse_url(const char *url, char *host, size_t host_n, char *base, size_t base_n,
		       struct terr *err)
{
	const char *scheme = "http";
	const char *p = url ? url : "";
	if (!strncmp(p, "http://", 7)) {
		p += 7;
	} else if (!strncmp(p, "https://", 8)) {
		scheme = "https";
		p += 8;
	}
	size_t n = strcspn(p, "/");
	/* Only a trailing slash may follow the host. */
	if (n == 0 || (p[n] && strcmp(p + n, "/")))
		return terr_set(err, EINVAL, "registry '%s' must be HOST[:PORT] or http(s)://HOST[:PORT]", url ? url : "");
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)p[i]) && !strchr(".-:[]", p[i]))
			return terr_set(err, EINVAL, "registry '%s': the host has a character that no host name has", url);
	if (n >= host_n || (size_t)snprintf(base, base_n, "%s://%.*s", scheme, (int)n, p) >= base_n)
		return terr_set(err, ENAMETOOLONG, "registry '%s' is too long", url);
	snprintf(host, host_n, "%.*s", (int)n, p);
	return 0;
}

int registry_has_image(const char *base, const char *ref, bool *has, struct terr *err)
{
	*has = false;
	/* The tag follows the last ':' after the last '/'. */
	const char *slash = strrchr(ref, '/'), *colon = strrchr(ref, ':');
	if (colon && slash && colon < slash)
		colon = NULL;
	const char *tag = colon ? colon + 1 : "latest";
	size_t repo_n = colon ? (size_t)(colon - ref) : strlen(ref);
	char url[1024];
	if ((size_t)snprintf(url, sizeof(url), "%s/v2/%.*s/tags/list", base, (int)repo_n, ref) >= sizeof(url))
		return terr_set(err, ENAMETOOLONG, "image name %s is too long", ref);
	struct httpc_request req = {.method = "GET", .url = url, .timeout_ms = 10000};
	struct httpc_response resp;
	int rc = httpc_do(&req, &resp, err);
	if (rc < 0)
		return terr_prefix(err, "registry %s", base);
	if (resp.status == 404) {
		/* NAME_UNKNOWN: no such repository. */
		httpc_response_free(&resp);
		return 0;
	}
	if (resp.status != 200) {
		rc = terr_set(err, EIO, "registry %s answered HTTP %ld for %s", base, resp.status, url);
		httpc_response_free(&resp);
		return rc;
	}
	json_t *j = resp.body ? json_loadb(resp.body, resp.len, 0, NULL) : NULL;
	httpc_response_free(&resp);
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(j, "tags"), i, t)
		if (json_is_string(t) && !strcmp(json_string_value(t), tag))
			*has = true;
	json_decref(j);
	return 0;
}
