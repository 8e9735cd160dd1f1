/* The folders' file routes (docs/api.md, "Folder files"): list, download,
 * upload, mkdir, move and remove inside a folder's directory, every path
 * resolved beneath it by folders/fspath. The folder and the caller's right
 * to it come from mgr_folder_resolve; no manager state is held here. */
#include <fcntl.h>
#include <ftw.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/jsonutil.h"
#include "folders/fspath.h"
#include "manager/http/internal.h"

/* The sessions' work user: files made through the API are theirs. */
static const struct fsp_owner work_owner = {1000, 1000};

static bool query_flag(struct httpd_req *req, const char *name)
{
	const char *v = httpd_query(req, name);
	return v && (!strcmp(v, "1") || !strcmp(v, "true"));
}

/* The answer for a failed file operation: links out of the folder are
 * forbidden, a passed quota is 413, what is in the way a conflict. */
static void file_error(struct httpd_resp *resp, const struct terr *err)
{
	const char *msg = err->msg[0] ? err->msg : "internal error";
	switch (err->code) {
	case EXDEV: case ELOOP:
		httpd_error(resp, 403, "outside_folder", "%s", msg);
		break;
	case EACCES: case EPERM:
		/* A read-only share: the caller is known, the write is not theirs. */
		httpd_error(resp, 403, "forbidden", "%s", msg);
		break;
	case EDQUOT:
		httpd_error(resp, 413, "quota_exceeded", "%s", msg);
		break;
	case ENOTEMPTY: case EISDIR: case ENOTDIR:
		httpd_error(resp, 409, "conflict", "%s", msg);
		break;
	default:
		httpd_error_terr(resp, err);
	}
}

/* Opens the folder's directory for the caller (write: a write is asked).
 * RET: its fd, or a negative errno with err filled. */
static int open_folder(struct manager *m, struct httpd_req *req, bool write, int64_t *quota, struct terr *err)
{
	char dir[1200];
	int rc = mgr_folder_resolve(m, caller(req), req->params[0], write, dir, sizeof(dir), quota, err);
	if (rc < 0)
		return rc;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return terr_set(err, errno == ENOENT ? ENOENT : EIO,
				"folder %s: its directory %s cannot be opened: %s", req->params[0], dir, strerror(errno));
	return fd;
}

/* A path from the query: required unless root_ok (then "" is the root). */
static int query_path(struct httpd_req *req, bool root_ok, const char **out, struct terr *err)
{
	const char *p = httpd_query(req, "path");
	if (!p)
		p = "";
	if (!*p && !root_ok)
		return terr_set(err, EINVAL, "path is required (?path=DIR/FILE inside the folder)");
	*out = p;
	return fsp_path_check(p, strlen(p), root_ok, err);
}

static json_t *entry_json(const struct fsp_entry *e)
{
	return json_pack("{s:s,s:s,s:I,s:o,s:i}", "name", e->name, "type", fsp_type_name(e->type),
			 "size", (json_int_t)e->size, "mtime", mgr_time_json(e->mtime * 1000),
			 "mode", (int)e->mode);
}

/* The ?path= of a file route and the folder's directory, opened for a read
 * or a write (empty_ok: the folder's root may be meant). RET: the folder's
 * directory fd, or -1 once resp has the error. */
static int open_path_in_folder(struct manager *m, struct httpd_req *req, struct httpd_resp *resp,
			       bool empty_ok, bool write, const char **path)
{
	struct terr err = {0};
	int root = query_path(req, empty_ok, path, &err) < 0 ? -1 : open_folder(m, req, write, NULL, &err);
	if (root < 0)
		file_error(resp, &err);
	return root;
}

void api_folder_files(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	const char *path;
	int root = open_path_in_folder(ctx, req, resp, true, false, &path);
	if (root < 0)
		return;
	struct fsp_entry *ents = NULL;
	size_t n = 0;
	int rc = fsp_list(root, path, &ents, &n, &err);
	close(root);
	if (rc < 0)
		{
		file_error(resp, &err);
		return;
	}
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, entry_json(&ents[i]));
	free(ents);
	httpd_json(resp, 200, json_pack("{s:s,s:o}", "path", path, "entries", arr));
}

struct download {
	int fd;
};

static long download_read(void *cls, char *buf, size_t max)
{
	struct download *d = cls;
	for (;;) {
		ssize_t n = read(d->fd, buf, max);
		if (n > 0)
			return n;
		if (n == 0)
			return HTTPD_STREAM_END;
		if (errno != EINTR)
			return HTTPD_STREAM_ERROR;
	}
}

static void download_free(void *cls)
{
	struct download *d = cls;
	close(d->fd);
	free(d);
}

void api_folder_download(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	const char *path;
	int root = open_path_in_folder(ctx, req, resp, false, false, &path);
	if (root < 0)
		return;
	int64_t size = 0;
	int fd = fsp_open_read(root, path, &size, &err);
	close(root);
	if (fd < 0)
		{
		file_error(resp, &err);
		return;
	}
	struct download *d = malloc(sizeof(*d));
	if (!d) {
		close(fd);
		{
		httpd_error(resp, 500, "internal", "out of memory");
		return;
	}
	}
	d->fd = fd;
	resp->status = 200;
	resp->stream = download_read;
	resp->stream_cls = d;
	resp->stream_free = download_free;
	resp->stream_type = "application/octet-stream";
	/* The size when opened: a file a session grows meanwhile is cut there,
	 * one it shrinks ends early and the client sees it incomplete. */
	resp->stream_sized = 1;
	resp->stream_size = (unsigned long long)size;
}

struct upload {
	struct manager *m;
	struct mgr_upload_hold hold;   /* its bytes reserved against the quota */
	struct fsp_upload up;
	EVP_MD_CTX *md;
	char want_hash[65];
	char path[FSP_PATH_MAX];
};

static void upload_free(struct upload *u)
{
	fsp_upload_abort(&u->up);
	mgr_folder_upload_end(u->m, &u->hold);
	EVP_MD_CTX_free(u->md);
	free(u);
}

/* XFS reports a project quota's end as ENOSPC: with a quota, that may be
 * the folder's quota as well as a full host, and the answer says both. */
static void upload_error(const struct upload *u, struct httpd_resp *resp, struct terr *err)
{
	if (err->code == ENOSPC && u->hold.quota > 0)
		terr_set(err, EDQUOT, "upload '%.200s': the folder's quota is used up, or its storage host is full",
			 u->path);
	file_error(resp, err);
}

static int upload_write(void *cls, const char *data, size_t len, struct httpd_resp *resp)
{
	struct upload *u = cls;
	struct terr err = {0};
	/* An upload of unknown size holds more of the quota as it grows. */
	if (u->hold.quota > 0 && u->up.written + (int64_t)len > u->hold.bytes) {
		if (mgr_folder_upload_grow(u->m, &u->hold, u->up.written + (int64_t)len, &err) < 0) {
			file_error(resp, &err);
			return -1;
		}
		u->up.budget = u->hold.quota > 0 ? u->hold.bytes : -1;
	}
	if (fsp_upload_write(&u->up, data, len, &err) < 0) {
		upload_error(u, resp, &err);
		return -1;
	}
	EVP_DigestUpdate(u->md, data, len);
	return 0;
}

static void upload_end(void *cls, int complete, struct httpd_resp *resp)
{
	struct upload *u = cls;
	if (!complete) {
		upload_free(u);
		return;
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	char hex[65] = "";
	EVP_DigestFinal_ex(u->md, md, &mdlen);
	for (unsigned i = 0; i < mdlen && i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	if (strcasecmp(hex, u->want_hash) != 0) {
		httpd_error(resp, 400, "invalid_argument",
			    "the body's SHA-256 is %s, not the %s the request was signed with: the upload was "
			    "changed or cut in transit; nothing was written", hex, u->want_hash);
		upload_free(u);
		return;
	}
	struct terr err = {0};
	int64_t written = u->up.written;
	if (fsp_upload_commit(&u->up, &err) < 0)
		upload_error(u, resp, &err);
	else
		httpd_json(resp, 201, json_pack("{s:s,s:I,s:s}", "path", u->path, "size", (json_int_t)written,
						"sha256", hex));
	upload_free(u);
}

void api_folder_upload(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	const char *path;
	if (query_path(req, false, &path, &err) < 0)
		{
		file_error(resp, &err);
		return;
	}
	/* The declared size is reserved against the folder's free quota now,
	 * under the manager's lock: uploads side by side cannot pass the quota
	 * together. Without a Content-Length the hold grows as data comes. */
	const char *len = httpd_header(req, "Content-Length");
	int64_t declared = -1;
	if (len) {
		char *end = NULL;
		errno = 0;
		long long v = strtoll(len, &end, 10);
		if (errno || end == len || *end || v < 0) {
			httpd_error(resp, 400, "invalid_argument", "Content-Length '%.40s' is not a size", len);
			return;
		}
		declared = v;
	}
	struct upload *u = calloc(1, sizeof(*u));
	if (!u || !(u->md = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(u->md, EVP_sha256(), NULL)) {
		if (u)
			EVP_MD_CTX_free(u->md);
		free(u);
		httpd_error(resp, 500, "internal", "out of memory");
		return;
	}
	u->m = ctx;
	u->up.dirfd = u->up.fd = -1;
	char dir[1200];
	int root = -1;
	if (mgr_folder_upload_begin(ctx, caller(req), req->params[0], declared, dir, sizeof(dir), &u->hold, &err) == 0 &&
	    (root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		terr_set(&err, errno == ENOENT ? ENOENT : EIO, "folder %s: its directory %s cannot be opened: %s",
			 req->params[0], dir, strerror(errno));
	if (root < 0) {
		mgr_folder_upload_end(ctx, &u->hold);
		EVP_MD_CTX_free(u->md);
		free(u);
		file_error(resp, &err);
		return;
	}
	int64_t budget = u->hold.quota > 0 ? u->hold.bytes : -1;
	snprintf(u->want_hash, sizeof(u->want_hash), "%s", httpd_header(req, "X-Tessera-Content-SHA256"));
	snprintf(u->path, sizeof(u->path), "%s", path);
	int rc = fsp_upload_begin(&u->up, root, path, query_flag(req, "overwrite"), budget, work_owner, &err);
	close(root);
	if (rc < 0) {
		mgr_folder_upload_end(ctx, &u->hold);
		EVP_MD_CTX_free(u->md);
		free(u);
		file_error(resp, &err);
		return;
	}
	httpd_req_sink(req, upload_write, upload_end, u);
}

static int body_path(json_t *body, const char *field, const char **out, struct terr *err)
{
	bool has = false;
	int rc = jsonutil_get_string(body, field, field, out, &has, err);
	if (rc == 0 && !has)
		rc = terr_set(err, EINVAL, "%s is required (a path inside the folder)", field);
	if (rc == 0)
		rc = fsp_path_check(*out, strlen(*out), 0, err);
	return rc;
}

static int body_bool(json_t *body, const char *field, bool *out, struct terr *err)
{
	json_t *v = json_object_get(body, field);
	*out = false;
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return terr_set(err, EINVAL, "%s must be true or false", field);
	*out = json_is_true(v);
	return 0;
}

void api_folder_mkdir(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	static const char *const known[] = {"path", "parents", NULL};
	struct terr err = {0};
	const char *path = NULL;
	bool parents = false;
	int rc = api_check_fields(body, known, "path, parents", &err);
	if (rc == 0)
		rc = body_path(body, "path", &path, &err);
	if (rc == 0)
		rc = body_bool(body, "parents", &parents, &err);
	int root = rc == 0 ? open_folder(ctx, req, true, NULL, &err) : -1;
	if (root >= 0) {
		rc = fsp_mkdir(root, path, parents, work_owner, &err);
		close(root);
	}
	if (rc < 0 || root < 0)
		file_error(resp, &err);
	else
		httpd_json(resp, 201, json_pack("{s:s}", "path", path));
	json_decref(body);
}

void api_folder_move(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	json_t *body = api_parse_body(req, resp);
	if (!body)
		return;
	static const char *const known[] = {"from", "to", "overwrite", NULL};
	struct terr err = {0};
	const char *from = NULL, *to = NULL;
	bool overwrite = false;
	int rc = api_check_fields(body, known, "from, to, overwrite", &err);
	if (rc == 0)
		rc = body_path(body, "from", &from, &err);
	if (rc == 0)
		rc = body_path(body, "to", &to, &err);
	if (rc == 0)
		rc = body_bool(body, "overwrite", &overwrite, &err);
	int root = rc == 0 ? open_folder(ctx, req, true, NULL, &err) : -1;
	if (root >= 0) {
		rc = fsp_rename(root, from, to, overwrite, &err);
		close(root);
	}
	if (rc < 0 || root < 0)
		file_error(resp, &err);
	else
		httpd_json(resp, 200, json_pack("{s:s,s:s}", "from", from, "to", to));
	json_decref(body);
}

void api_folder_file_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp)
{
	struct terr err = {0};
	const char *path;
	int root = open_path_in_folder(ctx, req, resp, false, true, &path);
	if (root < 0)
		return;
	int rc = fsp_remove(root, path, query_flag(req, "recursive"), &err);
	close(root);
	if (rc < 0)
		{
		file_error(resp, &err);
		return;
	}
	httpd_json(resp, 200, json_pack("{s:s}", "path", path));
}
