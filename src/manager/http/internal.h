/* The manager's HTTP layer, shared by api.c (the route table,
 * authentication, sessions, nodes, settings, events, agents),
 * api_users.c (password login, users), api_folders.c and api_files.c
 * (folders and their files), and given to manager_serve. The
 * handlers only translate: parse and validate the request, call the core
 * (core.h), answer its JSON or its error. They never see struct manager's
 * fields nor take its lock. */
#ifndef TESSERA_MANAGER_HTTP_INTERNAL_H
#define TESSERA_MANAGER_HTTP_INTERNAL_H

#include <stdbool.h>

#include "common/httpd.h"
#include "manager/core.h"

/* What the authenticate hook leaves in req->auth. */
struct auth_info {
	bool cluster;                 /* an agent, via the cluster secret */
	char agent_id[STORE_NAME_MAX];
	struct user_rec user;         /* copy; valid when !cluster */
};

/* The authenticated user of a request from a user (not an agent). */
static inline const struct user_rec *caller(struct httpd_req *req)
{
	return &((struct auth_info *)req->auth)->user;
}

/* ---- api.c ---- */
extern const struct httpd_route manager_routes[];
extern const size_t manager_n_routes;
/* The httpd authenticate hook; ctx is the struct manager. */
int api_authenticate(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
/* The request's body (jsonutil_parse_body), new reference; NULL after
 * answering 400. */
json_t *api_parse_body(struct httpd_req *req, struct httpd_resp *resp);
/* EINVAL unless body is a JSON object whose every field is one of known
 * (NULL-terminated); list names them for the error. */
int api_check_fields(json_t *body, const char *const *known, const char *list, struct terr *err);
/* Answers a call that gave o (taken) with status, or, rc < 0, err. */
void api_answer(struct httpd_resp *resp, int rc, int status, json_t *o, const struct terr *err);
/* ?name=1|true|0|false into *out (absent: false); false after answering
 * 400 for another value. */
bool api_query_flag(struct httpd_req *req, struct httpd_resp *resp, const char *name, bool *out);

/* ---- api_presets.c: resource presets (docs/api.md, "Resource presets") ---- */
void api_preset_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_preset_create(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_preset_update(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_preset_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp);

/* ---- api_projects.c: projects and fair share (docs/api.md, "Projects") ---- */
void api_project_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_project_create(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_project_get(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_project_update(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_project_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_project_member_put(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_project_member_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_fairshare(void *ctx, struct httpd_req *req, struct httpd_resp *resp);

/* ---- api_users.c: password login and users admin (docs/api.md) ---- */
void api_auth_login(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_user_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_user_create(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_user_update(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_user_get(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_user_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_user_password(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_key_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_key_create(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_key_revoke(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_sshkey_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_sshkey_add(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_sshkey_remove(void *ctx, struct httpd_req *req, struct httpd_resp *resp);

/* ---- api_queue.c: the pending queue (docs/api.md, "The queue") ---- */
void api_queue_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_session_scheduling(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_queue_move(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
/* ---- api_dash.c: dashboard, about, key rotation (docs/api.md) ---- */
void api_dashboard(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_about(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_key_rotate(void *ctx, struct httpd_req *req, struct httpd_resp *resp);

/* ---- api_folders.c: folders (docs/api.md, "Folders") ---- */
void api_folder_create(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_folder_list(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_folder_get(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_folder_update(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_folder_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_folder_restore(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_folder_share(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_folder_unshare(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
/* ---- api_files.c: files in folders (docs/api.md, "Folder files") ---- */
void api_folder_files(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_folder_download(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_folder_upload(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_folder_mkdir(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_folder_move(void *ctx, struct httpd_req *req, struct httpd_resp *resp);
void api_folder_file_delete(void *ctx, struct httpd_req *req, struct httpd_resp *resp);

/* ---- api_usage.c: usage over time (docs/api.md, "Usage summary") ---- */
void api_usage_summary(void *ctx, struct httpd_req *req, struct httpd_resp *resp);

#endif
