/* The manager's core, as its HTTP layer (api.c, api_users.c) and its unit
 * tests see it: every state change and query of the manager, taking plain
 * values or JSON and answering JSON or a record, with errors in a struct
 * terr whose errno-style code httpd_error_terr turns into the HTTP status
 * (docs/architecture.md, "Errors"). Input has been parsed and validated
 * already (validate.h); the core checks what needs its state.
 *
 * Each function takes the manager's lock itself, for memory work and store
 * writes only, and never holds it across a call to an agent. The struct
 * manager stays private (state.h).
 *
 * JSON returned through `json_t **` or as the return value is a new
 * reference the caller owns; `const struct user_rec *` arguments are the
 * caller's (the authenticated user, copied at authentication). */
#ifndef TESSERA_MANAGER_CORE_H
#define TESSERA_MANAGER_CORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "manager/link.h"
#include "manager/manager.h"
#include "manager/validate.h"
#include "store/store.h"

/* ---- configuration, fixed at manager_open (no lock) ---- */

/* The secret shared with agents and the webserver; NULL or "" when the
 * manager has none (then both are refused). Borrowed from the config. */
const char *mgr_cluster_secret(const struct manager *m);
/* manager.conf metrics_token; NULL or "": /metrics is open. */
const char *mgr_metrics_token(const struct manager *m);

/* ---- the store ---- */

/* False while the database is unreachable or the state is being written
 * again after it came back: the API answers 503 to what would change
 * the state. No lock. */
bool mgr_store_available(struct manager *m);
/* How messages name the database ("PostgreSQL at HOST:PORT/DB"). */
const char *mgr_store_where(const struct manager *m);

/* The failed-login limiters of POST /v1/auth/login (auth/ratelimit.h):
 * per account and address, and per address. In Redis when the manager
 * has one (shared by every manager on it), else in memory. The
 * manager's; they live until manager_close. */
struct ratelimit;
void mgr_login_limits(struct manager *m, struct ratelimit **pair, struct ratelimit **addr);

/* ---- sessions (sessions.c) ---- */

/* Creates cr->count sessions of owner as PENDING, after the checks that
 * need the cluster: the request is a multiple of the fGPU quantum (EINVAL),
 * some node has registered (EAGAIN), some registered node could ever hold
 * it (EDOM), some node is alive (EAGAIN) and has the image (EINVAL; EAGAIN
 * when no node could be asked), no active session of owner has one of the
 * names (EEXIST). *sessions: their JSON array; with cr->dry_run, nothing
 * is created and *sessions is {"fits_now": bool, "reason": words|null}. */
int mgr_sessions_create(struct manager *m, const struct user_rec *owner,
			const struct create_request *cr, json_t **sessions, struct terr *err);
/* Finds the session named ref (or with id ref) among the sessions of the
 * user with email owner_email, for requests with ?owner=: its id into id.
 * EPERM when u is not an admin and owner_email is not u's own; ENOENT
 * when there is no such user or session. Session references elsewhere
 * are ids (anyone's, for an admin) or names among u's own sessions. */
int mgr_session_lookup(struct manager *m, const struct user_rec *u, const char *ref, const char *owner_email,
		       char id[STORE_ID_MAX], struct terr *err);
/* The sessions u sees (admins: everyone's): active ones, or all when
 * `all`. A JSON array. */
json_t *mgr_sessions_list(struct manager *m, const struct user_rec *u, bool all);
/* GET /v1/sessions: the sessions u sees (admins: everyone's, or those of
 * q->owner_email; others: their own only, EPERM for another owner's;
 * ENOENT for an unknown owner), filtered and paged by q (validate.h), as
 * the answer's body: {"sessions": [...], "continue": TOKEN} and a
 * newline, "continue" only when more sessions follow. *body is malloc'd,
 * the caller's. Each session's JSON is rendered once and kept until the
 * session changes, so a list costs copies, not JSON building. */
int mgr_sessions_page(struct manager *m, const struct user_rec *u, const struct session_query *q, char **body,
		      size_t *len, struct terr *err);
/* mgr_session_get's answer as text (from the same kept rendering, with
 * last_commit added), for the API: *body malloc'd, the caller's. */
int mgr_session_get_text(struct manager *m, const struct user_rec *u, const char *ref, int wait_s, char **body,
			 size_t *len, struct terr *err);
/* One session, by id or name, with its status history. With wait_s >= 0,
 * first waits up to wait_s seconds (a long poll, without holding the lock)
 * until it is no longer PENDING, SCHEDULED or PREPARING. ENOENT when u
 * has none by that reference. */
int mgr_session_get(struct manager *m, const struct user_rec *u, const char *ref, int wait_s,
		    json_t **session, struct terr *err);
/* ---- queue.c: the pending queue (docs/scheduling.md, "The queue and its
 * history") ---- */
/* GET /v1/queue: {"queue_policy","pending": how many wait in all,
 * "sessions": the PENDING sessions u sees, by their place in the last
 * pass's order}. */
json_t *mgr_queue_json(struct manager *m, const struct user_rec *u);
/* GET /v1/sessions/{ref}/scheduling: its queue entry with "history", the
 * distinct reasons the passes gave, oldest first. ENOENT. */
int mgr_session_scheduling(struct manager *m, const struct user_rec *u, const char *ref, json_t **out,
			   struct terr *err);
/* An admin's move of a PENDING session: its priority set to priority, or
 * with top to one above every other waiting session's. EPERM for a
 * non-admin, ENOENT, EBUSY when it is not PENDING, ERANGE when others
 * already wait at the highest priority, EINVAL for a priority out of
 * 0..100. *out: its queue entry with "previous_priority". */
int mgr_queue_move(struct manager *m, const struct user_rec *u, const char *ref, int priority, bool top,
		   json_t **out, struct terr *err);
/* Deletes per the state machine (docs/api.md, DELETE) on request of u;
 * *session: its JSON after the change. ENOENT as above. */
int mgr_session_delete(struct manager *m, const struct user_rec *u, const char *ref,
		       json_t **session, struct terr *err);
/* The session's log as a byte stream: the last `tail` lines (0: all),
 * and with follow what comes until the container ends. *out: the caller
 * pump_closes it. An ended session whose container was removed answers
 * instead with the last of its log kept then (manager/logtail.h): *out
 * NULL and *kept that text's last `tail` lines (malloc'd, the caller
 * frees it). ENOENT; EBUSY when it has no container (and none was
 * kept); EAGAIN when its node is LOST; the agent's own errors. */
int mgr_session_logs(struct manager *m, const struct user_rec *u, const char *ref, int tail, bool follow,
		     struct pump **out, char **kept, struct terr *err);

/* A running exec's place in its user's max_concurrent_execs. */
struct mgr_exec_slot;
/* Starts command (a validated array of strings, borrowed) in the running
 * session's container; *out streams its output in the frames of
 * common/frames.h. The exec holds one of u's max_concurrent_execs
 * (policy, default MGR_DEFAULT_MAX_EXECS) until *slot is given to
 * mgr_exec_release, after the stream is closed: EUSERS when u holds
 * them all. Errors as mgr_session_logs, EBUSY also when it is not
 * RUNNING. */
int mgr_session_exec(struct manager *m, const struct user_rec *u, const char *ref, json_t *command,
		     int timeout_s, struct pump **out, struct mgr_exec_slot **slot, struct terr *err);
/* Gives the slot back (a void * for pump_respond's on_close). */
void mgr_exec_release(void *slot);

#define MGR_DEFAULT_MAX_EXECS 4

/* ---- session apps (apps.c, docs/apps.md) ---- */

/* The proxy's poll said what it serves: ports lo..hi (port mode) or
 * domain (host mode; NULL: port mode). Takes mu. */
void mgr_apps_proxy_serves(struct manager *m, int lo, int hi, const char *domain);
/* The apps of session ref (u: its owner or an admin, resolved as
 * mgr_session_get): [{"name","protocol","port","url"?}], `terminal`
 * first, then its image's service ports; "url" (no token) while the
 * app's route is open. ENOENT. */
int mgr_session_apps(struct manager *m, const struct user_rec *u, const char *ref, json_t **apps,
		     struct terr *err);
/* Opens app (as approutes_parse_app reads it: a listed name or a port)
 * of session ref for u: its route, and a one-time token bound to u.
 * *reply {"app","url","expires_in"}. ENOENT no such session; EINVAL not
 * one of its apps; EBUSY not RUNNING, no app port, or every proxy port
 * in use; EAGAIN too many links made lately. */
int mgr_session_app_open(struct manager *m, const struct user_rec *u, const char *ref, const char *app,
			 json_t **reply, struct terr *err);
/* Where browsers reach session apps, for the webserver's check that it
 * is not served there itself (docs/security.md, "App links and the login
 * cookie"): {"host": H} in port mode (wsproxy_url's host, every app on a
 * port of it), {"domain": "apps.DOMAIN"} in host mode. New reference. */
json_t *mgr_apps_origin(struct manager *m);
/* The proxy redeems a token: *reply the route it opens (docs/api.md,
 * POST /v1/proxy/redeem); EACCES with why (unknown, used, expired, the
 * session no longer running). */
int mgr_proxy_redeem(struct manager *m, const char *token, json_t **reply, struct terr *err);
/* Every live route once the generation differs from since (at once when
 * since < 0), waiting up to wait_s seconds: {"generation","routes"}.
 * -ECANCELED once the manager is closing. */
int mgr_proxy_routes(struct manager *m, int64_t since, int wait_s, json_t **reply);

/* ---- folders (folders.c, docs/folders.md) ---- */

#define MGR_MAX_STORAGE_HOSTS MODEL_MAX_STORAGE_HOSTS
/* Storage hosts are parsed by model_storage_hosts_parse (common/model.h). */
/* A folder name: 1-63 of [A-Za-z0-9._-], may start with '.', not "." nor
 * "..". EINVAL with why. */
int mgr_folder_name_check(const char *name, struct terr *err);

/* Creates folder name of u on host (NULL: the default host) with quota
 * bytes (-1: the policy's max_folder_bytes; 0: none). EEXIST a live
 * folder of u has the name; EPERM past max_folders or a quota above
 * max_folder_bytes; ENOENT no such host. *out: its JSON. */
/* The same in a team project (NULL: the caller's own folder): the
 * project's managers and admins make its folders; member_perm (NULL:
 * "rw") is what its members may do there. */
int mgr_folder_create_in(struct manager *m, const struct user_rec *u, const char *name, const char *host,
			 int64_t quota, const char *project, const char *member_perm, json_t **out, struct terr *err);
int mgr_folder_create(struct manager *m, const struct user_rec *u, const char *name, const char *host,
		      int64_t quota, json_t **out, struct terr *err);
/* u's folders and those shared with u (admins with all: everyone's);
 * trashed ones instead of live ones with trash. A JSON array. */
json_t *mgr_folders_list(struct manager *m, const struct user_rec *u, bool all, bool trash);
/* One folder u may use, by name (u's own first, then one shared with u)
 * or id. ENOENT for a folder u may not see, as for a missing one. */
int mgr_folder_get(struct manager *m, const struct user_rec *u, const char *name, json_t **out,
		   struct terr *err);
/* Owner or admin only (EPERM for a sharee; ENOENT unseen). */
int mgr_folder_rename(struct manager *m, const struct user_rec *u, const char *name, const char *new_name,
		      json_t **out, struct terr *err);
/* Moves the directory to HOSTPATH/.trash/ID. EBUSY naming the sessions
 * that mount it, unless force. */
int mgr_folder_delete(struct manager *m, const struct user_rec *u, const char *name, bool force,
		      struct terr *err);
/* Brings a trashed folder of u back (EEXIST when a live one has its name). */
int mgr_folder_restore(struct manager *m, const struct user_rec *u, const char *name, json_t **out,
		       struct terr *err);
/* Shares with the user of email (perm "ro" or "rw"; again: changes it),
 * or takes the share away. Taking it away (or rw to ro) while sessions of
 * that user mount it (writable) is EBUSY, naming them to an admin and
 * counting them to anyone else, unless force: then those sessions are
 * ended (a bind mount outlives the share). */
int mgr_folder_share(struct manager *m, const struct user_rec *u, const char *name, const char *email,
		     const char *perm, bool force, json_t **out, struct terr *err);
int mgr_folder_unshare(struct manager *m, const struct user_rec *u, const char *name, const char *email,
		       bool force, json_t **out, struct terr *err);
/* The quota policy (pure): quota as asked (-1: the default) against the
 * policy's max_folder_bytes (0: none) into *effective. -1 gives
 * max_bytes; with a max, 0 (no quota) and more than the max are EPERM. */
int mgr_folder_quota_check(int64_t quota, int64_t max_bytes, int64_t *effective, struct terr *err);
/* Changes the quota of folder name (owner or admin): bytes, 0 for none,
 * checked as at create against the owner's policy. The kernel's limit
 * (btrfs qgroup, project quota) follows. *out: its JSON. */
int mgr_folder_set_quota(struct manager *m, const struct user_rec *u, const char *name, int64_t quota,
			 json_t **out, struct terr *err);

/* An upload's hold on its folder's quota (mgr_folder_upload_begin). */
/* An RFC 3339 time of ms since the epoch (null for 0), a new reference:
 * how every answer writes a moment (manager.c). */
json_t *mgr_time_json(int64_t ms);

struct mgr_upload_hold {
	char folder_id[STORE_ID_MAX];
	int64_t quota;      /* the folder's quota at the start; 0: none, nothing held */
	int64_t bytes;      /* reserved so far */
};
/* Starts an upload into folder name for u, who must be allowed to write
 * (as mgr_folder_resolve): its directory into dir (n bytes); with a quota,
 * declared bytes (the Content-Length; <0: unknown, then nothing yet) are
 * reserved, under the lock, against the free bytes: the quota less the
 * usage and what other uploads in flight hold. EDQUOT when they do not
 * fit, so that uploads side by side never pass the quota together. */
int mgr_folder_upload_begin(struct manager *m, const struct user_rec *u, const char *name, int64_t declared,
			    char *dir, size_t n, struct mgr_upload_hold *hold, struct terr *err);
/* Grows hold to at least total bytes (an upload of unknown size, as it
 * streams; a step more when there is room). EDQUOT when there is none. */
int mgr_folder_upload_grow(struct manager *m, struct mgr_upload_hold *hold, int64_t total, struct terr *err);
/* Gives the hold back once the upload ended, written or not; the usage is
 * measured afresh next time. */
void mgr_folder_upload_end(struct manager *m, struct mgr_upload_hold *hold);

/* The file routes' and the mounts' check: the live folder name (as
 * mgr_folder_get resolves it) that u may read, or write with want_write,
 * into path_out (its directory, HOSTPATH/ID) and its quota into *quota
 * (may be NULL; 0: none). ENOENT "no folder NAME" unseen or missing
 * (the same words); EPERM a write to a read-only share. Takes the lock;
 * the path is a copy, valid after the folder is renamed (it names the
 * id), not after it is trashed. */
int mgr_folder_resolve(struct manager *m, const struct user_rec *u, const char *name, bool want_write,
		       char *path_out, size_t n, int64_t *quota, struct terr *err);

/* ---- nodes and images (agents.c) ---- */

/* Every node with capacity, use, devices and liveness. A JSON array. */
json_t *mgr_nodes_list(struct manager *m);

/* ---- drain and resources (nodes_admin.c) ---- */

/* Marks node id schedulable or not (drained: nothing new is placed on it,
 * its sessions keep running), stored. *node: the node's JSON afterwards
 * (new reference). ENOENT for an unknown node. */
int mgr_node_set_schedulable(struct manager *m, const char *id, bool schedulable, json_t **node,
			     struct terr *err);
/* What u uses against their policy and the cluster's capacity and free
 * resources (GET /v1/resources). New reference. */
json_t *mgr_resources(struct manager *m, const struct user_rec *u);
/* Puts node id in resource group (admins; checked by the caller with
 * mgr_group_name_check); *node: the node as listed. */
int mgr_node_set_group(struct manager *m, const char *id, const char *group, json_t **node, struct terr *err);

/* ---- resource presets (presets.c; docs/admin.md, "Resource presets") ---- */
/* Every preset, oldest first (everyone may read them). New reference. */
json_t *mgr_presets_list(struct manager *m);
/* Admins only (EPERM); bodies as presets.h's preset_parse reads them;
 * EEXIST a name taken, ENOENT no such preset. *out: the preset's JSON. */
int mgr_preset_create(struct manager *m, const struct user_rec *by, json_t *body, json_t **out, struct terr *err);
int mgr_preset_update(struct manager *m, const struct user_rec *by, const char *name, json_t *body, json_t **out,
		      struct terr *err);
int mgr_preset_delete(struct manager *m, const struct user_rec *by, const char *name, struct terr *err);

/* ---- projects (projects.c; docs/scheduling.md) ---- */
/* GET /v1/fairshare: each project's (u's, or all for admins) and its
 * users' weight, target, decayed usage, usage share, current share and
 * rank (scheduler.c). NULL on no memory. */
json_t *mgr_fairshare_json(struct manager *m, const struct user_rec *u);
int mgr_project_name_check(const char *name, struct terr *err);
int mgr_group_name_check(const char *name, struct terr *err);
/* The projects u is in (admins: every team project; with all, the
 * personal ones too). New reference. */
json_t *mgr_projects_list(struct manager *m, const struct user_rec *u, bool all);
/* ENOENT for a project u is not in, as for a missing one. */
int mgr_project_get(struct manager *m, const struct user_rec *u, const char *name, json_t **out, struct terr *err);
/* body: {"name", "description", "weight", "quota": {"cpu","mem","fgpu",
 * "sessions"}, "groups": [...]} (fields checked by the caller). Admins. */
int mgr_project_create(struct manager *m, const struct user_rec *by, json_t *body, json_t **out, struct terr *err);
int mgr_project_update(struct manager *m, const struct user_rec *by, const char *name, json_t *body, json_t **out,
		       struct terr *err);
int mgr_project_delete(struct manager *m, const struct user_rec *by, const char *name, struct terr *err);
/* Adds or changes a member (role NULL / weight 0: kept, or member / 1
 * for a new one). The project's managers and admins. */
int mgr_project_member_set(struct manager *m, const struct user_rec *by, const char *name, const char *email,
			   const char *role, int64_t weight_milli, json_t **out, struct terr *err);
int mgr_project_member_remove(struct manager *m, const struct user_rec *by, const char *name, const char *email,
			      json_t **out, struct terr *err);

/* ---- images (images.c) ---- */

/* The catalog of the alive nodes' images that u may launch, one entry
 * per reference (docs/api.md, GET /v1/images): images of other users
 * (tessera.owner) left out, those ai.backend.features calls private too
 * unless u is an admin asking for all. A JSON array. */
json_t *mgr_images_list(struct manager *m, const struct user_rec *u, bool all);
/* Asks every alive node for its images again; *reply {"nodes",
 * "nodes_alive","images"}. EAGAIN when none answered. */
int mgr_images_rescan(struct manager *m, json_t **reply, struct terr *err);
/* {"alias": "image", ...} (new reference). */
json_t *mgr_image_aliases(struct manager *m);
/* Sets (replaces) or removes an alias, kept in the store. EINVAL for a
 * name that is not a reference; ENOENT when dealiasing an unknown one. */
int mgr_image_alias(struct manager *m, const char *alias, const char *image, struct terr *err);
int mgr_image_dealias(struct manager *m, const char *alias, struct terr *err);
/* Removes the image ref from every node that holds it, on request of u:
 * an admin, or the owner of a private image (EPERM otherwise). ENOENT
 * when u sees no such image; EBUSY while a session that has not ended
 * uses it. *reply {"ref","nodes"}. */
int mgr_image_remove(struct manager *m, const struct user_rec *u, const char *ref, json_t **reply,
		     struct terr *err);
/* The create check of an image (without the lock held): resolves an
 * alias into resolved (n bytes; else the typed name), finds the image
 * among what u may launch (asking the nodes again when it is not listed):
 * EINVAL "not present on any node" when not, for an image u may not see
 * exactly as for one that does not exist; EINVAL naming both when req is
 * below the image's minimum; EAGAIN when no node could be asked. */
int mgr_image_check(struct manager *m, const struct user_rec *u, const char *typed, const struct res *req,
		    char *resolved, size_t n, struct terr *err);

/* ---- private images and the cluster registry (commits.c) ---- */

/* Commits the RUNNING session ref (u: its owner or an admin) into a
 * private image of the session's owner, as a background job, always
 * under the owner's namespace tessera-private/<local part>-<12 hex of
 * the owner's id>/: name (NULL: the session's name) goes under it, or
 * names it already; tag (NULL: the UTC time, YYYYMMDD-HHMMSS). *commit:
 * the commit's JSON, status "committing". ENOENT no such session; EBUSY
 * not RUNNING; EAGAIN node LOST; EINVAL bad name or tag, or a name under
 * tessera-private/ outside the owner's namespace; EEXIST the image
 * exists; EPERM the owner has max_private_images already. */
int mgr_session_commit(struct manager *m, const struct user_rec *u, const char *ref, const char *name,
		       const char *tag, json_t **commit, struct terr *err);
/* One commit by id (u: its owner or an admin); with wait_s >= 0, first
 * waits up to wait_s seconds until it is no longer committing. ENOENT. */
int mgr_commit_get(struct manager *m, const struct user_rec *u, const char *id, int wait_s, json_t **commit,
		   struct terr *err);
/* The commits u may see that are not ready images yet (committing) or
 * failed, as entries of GET /v1/images (docs/api.md). A JSON array. */
json_t *mgr_commits_json(struct manager *m, const struct user_rec *caller);
/* Fills the entries of images (the catalog's, mgr_images_list) that are
 * ready commits with what the commit knows: in_registry, push_error,
 * source_session, source_image, committed_by. */
void mgr_commits_annotate(struct manager *m, json_t *images);
/* Forgets the commit of ref (its image was removed), so that it counts
 * no more against max_private_images. 0, or -ENOENT when none. */
int mgr_commit_forget(struct manager *m, const char *ref);
/* Pulls image from the cluster registry onto node (NULL: every alive
 * node) as a background job; *pull {"id","image","nodes":[...],"done"}.
 * ENOENT no such node or a private image u may not see; EAGAIN no node
 * alive; EINVAL no registry. */
int mgr_image_pull(struct manager *m, const struct user_rec *u, const char *image, const char *node,
		   json_t **pull, struct terr *err);
/* A pull's progress, as mgr_image_pull answers (u: who started it or an
 * admin). ENOENT. */
int mgr_image_pull_get(struct manager *m, const struct user_rec *u, const char *id, json_t **pull,
		       struct terr *err);

/* ---- agents (agents.c) ---- */

/* Registers an agent (or re-registers it) from its description
 * {"id","url","version","capacity","gpus","containers","mock_gpus",
 * "images"} and
 * reconciles its containers with the sessions. On success the manager
 * owns link_ctx (released at close); on failure the caller keeps it.
 * local: an in-process agent, never LOST. *reply (may be NULL):
 * {"heartbeat_interval_ms"}. */
int mgr_agent_register(struct manager *m, json_t *desc, const struct agent_link_ops *link,
		       void *link_ctx, bool local, json_t **reply, struct terr *err);
/* The same for a remote agent: desc's "url" must be http://; the manager
 * reaches it there, signing with the cluster secret. */
int mgr_agent_register_remote(struct manager *m, json_t *desc, json_t **reply, struct terr *err);
/* The usage of session ref (resolved as mgr_session_get does) with t >
 * since_ms (docs/api.md, GET /v1/sessions/{ref}/stats), new reference. */
int mgr_session_stats(struct manager *m, const struct user_rec *u, const char *ref, int64_t since_ms,
		      json_t **out, struct terr *err);
/* The manager's metrics in the Prometheus text format (metrics.c),
 * malloc'd. */
char *mgr_metrics_text(struct manager *m);
/* A heartbeat, with a round of usage (stats, may be NULL: usage.c);
 * ENOENT when the agent must register (again). */
int mgr_agent_heartbeat(struct manager *m, const char *agent_id, json_t *stats, json_t **reply, struct terr *err);
/* An event from agent_id (borrowed): a container died
 * {"session_id","container_id","event":"died","exit_code","oom_killed",
 * "reason"} (an interactive session becomes ERROR, a batch one
 * TERMINATED or ERROR by its exit code), or the count of processes killed
 * in it for passing its memory limit grew {"session_id","container_id",
 * "event":"oom","oom_kills": total} (a history line; the status stays).
 * Sessions of other agents are left alone. Or the agent's images after a
 * change {"event":"images","images":[...]}, which replace its list in the
 * catalog ("images" null: unknown, asked of the agent when the catalog is
 * next read). */
void mgr_agent_event(struct manager *m, const char *agent_id, json_t *event);

/* ---- settings (settings.c) ---- */

/* The longest announcement (the setting "announcement"), in bytes: a
 * line or two of a banner, not a page. */
#define MGR_ANNOUNCEMENT_MAX 500

/* {"fgpu_per_device", "fgpu_quantum", ..., "policies"}. */
json_t *mgr_config_get(struct manager *m);
/* Validates, applies and stores one setting (value borrowed); *settings
 * (may be NULL): all of them afterwards. ENOENT for an unknown key. */
int mgr_config_set(struct manager *m, const char *key, json_t *value, json_t **settings,
		   struct terr *err);

/* The settings as a flat object (mgr_settings_flat), new ref. */
json_t *mgr_config_flat(struct manager *m);
/* put-json: sets every key of flat {KEY: value} (borrowed) as PUT
 * /v1/config/{key} would, after checking all of them: a bad key or value
 * changes nothing (EINVAL, or ENOENT for an unknown key, naming it). With
 * etcd it is one transaction. */
int mgr_config_put(struct manager *m, json_t *flat, struct terr *err);

/* ---- users (users.c) ---- */

/* Copies the user with this access key (any of their live keys) into
 * *out, its access_key and secret_key those of that key; -ENOENT when
 * none. */
int mgr_user_by_access_key(struct manager *m, const char *access_key, struct user_rec *out);
/* Checks a password (argon2id, outside the lock); the user into *out.
 * EACCES "wrong email or password" for an unknown email or a wrong
 * password; EPERM when the account is disabled. email: as validate_email
 * leaves it. */
int mgr_user_login(struct manager *m, const char *email, const char *password,
		   struct user_rec *out, struct terr *err);
/* Every user's public fields. A JSON array. */
json_t *mgr_users_list(struct manager *m);
/* Creates a user (email: as validate_email leaves it; password NULL: one
 * is generated) on request of the admin `by` (for the log).
 * *reply {"user", "secret_key", "password" when generated}. EEXIST when
 * the email is taken. */
int mgr_user_create(struct manager *m, const char *email, const char *password, bool is_admin,
		    const char *by, json_t **reply, struct terr *err);
/* Changes the user with this id or email: disabled and is_admin (< 0:
 * unchanged) and/or the password (NULL: unchanged). ENOENT when none;
 * EBUSY when `by` would disable their own account or take their own
 * administrator role. *user: its public fields after. */
int mgr_user_update(struct manager *m, const char *ref, int disabled, int is_admin, const char *password,
		    const struct user_rec *by, json_t **user, struct terr *err);
/* Sets the password of the user with this id or email (NULL: one is
 * generated). *reply {"user", "password" when generated}. */
int mgr_user_set_password(struct manager *m, const char *ref, const char *password, const struct user_rec *by,
			  json_t **reply, struct terr *err);
/* A user's change of their own password: old_password must be their
 * current one (EPERM "your current password is wrong"), password a new
 * one (pwhash_check_policy; EINVAL when the same). *reply {"user"}. Keys
 * and logins stay valid. */
int mgr_user_change_own_password(struct manager *m, const struct user_rec *by, const char *old_password,
				 const char *password, json_t **reply, struct terr *err);
/* {"user", "keypairs" (no secrets), "sessions" not ended and "folders"
 * not trashed it owns ([{"name", "id", ...}])}. ENOENT when none. */
int mgr_user_get(struct manager *m, const char *ref, json_t **out, struct terr *err);
/* Removes a user and revokes their keys. EBUSY, naming them, while they
 * have sessions not ended or own folders not in the trash, and when `by`
 * is the user. Their ended sessions stay in the history; *reply
 * {"removed": <user>, "revoked_keys", "ended_sessions_kept"}. */
int mgr_user_remove(struct manager *m, const char *ref, const struct user_rec *by, json_t **reply,
		    struct terr *err);

/* ---- API keys (users.c; docs/api.md, "API keys") ---- */

/* The most keys one user may have. */
#define MGR_MAX_KEYS 20
/* The caller's keys: {"keypairs": [{"access_key", "label", "created_at",
 * "main", "current"}], "endpoint", "max"}; u->access_key is the key the
 * request was signed with ("current"). */
json_t *mgr_keys_list(struct manager *m, const struct user_rec *u);
/* A new key of u's: *reply {"keypair", "secret_key", "endpoint"}, the
 * secret this once. EBUSY past MGR_MAX_KEYS. */
int mgr_key_create(struct manager *m, const struct user_rec *u, const char *label, json_t **reply,
		   struct terr *err);
/* Revokes a key of by's (admins: anyone's; another's is ENOENT as a
 * missing one). The user's main key is replaced by a new one.
 * *reply {"revoked", "main_replaced"}. */
int mgr_key_revoke(struct manager *m, const struct user_rec *by, const char *access_key, json_t **reply,
		   struct terr *err);
/* Rotates a key of by's own: a new key with its label replaces it (the
 * old one refused from then on), one store transaction. *reply
 * {"keypair", "secret_key", "endpoint", "revoked"}, the secret this
 * once. ENOENT for a key not by's; EBUSY for the main key (the web UI's:
 * revoking replaces it). */
int mgr_key_rotate(struct manager *m, const struct user_rec *by, const char *access_key, json_t **reply,
		   struct terr *err);
/* ---- SSH public keys (users.c, manager/sshkeys.h; docs/api.md, "SSH keys") ---- */

/* The caller's keys: {"keys": [{"id","type","fingerprint","comment"}], "max"}. */
json_t *mgr_sshkeys_list(struct manager *m, const struct user_rec *u);
/* Adds the public key line text to u's: *reply the key's object.
 * EINVAL (not a public key), EEXIST, EBUSY (SSHKEYS_MAX). Sessions
 * started from then on have it. */
int mgr_sshkey_add(struct manager *m, const struct user_rec *u, const char *text, json_t **reply, struct terr *err);
/* Removes u's key whose id or fingerprint is ref (ENOENT when none). */
int mgr_sshkey_remove(struct manager *m, const struct user_rec *u, const char *ref, json_t **reply,
		      struct terr *err);

/* A user's public fields (no secret, no hash). */
json_t *mgr_user_json(const struct user_rec *u);

/* ---- overviews (overview.c; docs/api.md, "Dashboard" and "About") ---- */

/* The admin dashboard (dashboard.h, dash_aggregate); NULL: out of memory. */
json_t *mgr_dashboard(struct manager *m);
/* {"version", "status": "ok"|"degraded", "started_at", "uptime_s",
 * "components": [{"name", "status": "up"|"down"|"degraded"|"unknown",
 * "detail"}]}: the manager, store, Redis and etcd where configured, the
 * usage history, agents, app proxy and webserver. admin: details name
 * addresses; via_webserver: the request came through the webserver. */
json_t *mgr_about(struct manager *m, bool admin, bool via_webserver);
/* The app proxy's route poll begins or ends (for About). */
void mgr_proxy_poll(struct manager *m, bool begins);
/* A request came through the webserver (for About). */
void mgr_webserver_seen(struct manager *m);

/* ---- changes: the event stream (sessions.c) ---- */

/* Starts a stream's seen: the first call answers at once. */
#define MGR_STATE_UNSEEN UINT64_MAX

struct mtext;

/* One event stream's place (GET /v1/events): the manager's version it
 * last looked at and the texts it last sent, each a reference to a kept
 * text (the session's list JSON, the nodes' view), compared by pointer:
 * a change no one of them shows costs a pass over the sessions, not a
 * rendering. Zero it, with seen = MGR_STATE_UNSEEN; mgr_stream_free. */
struct mgr_stream {
	uint64_t seen;
	struct mtext **sent;
	size_t n_sent;
	struct mtext *nodes;
};

/* The next state message of u's stream: waits up to wait_s seconds
 * (without holding the lock) for a change that u sees, then *body (malloc'd,
 * *len bytes) is {"sessions": [...], "nodes": [...]} with only the parts
 * that changed since the last one (both the first time); *body NULL: no
 * change in that time. Sessions as the list API gives them (the kept
 * texts), without the ended and removed ones; nodes without their live
 * figures unless u is an admin (docs/api.md, "Events"). -ECANCELED once
 * the manager is closing, -ENOMEM. */
int mgr_stream_next(struct manager *m, const struct user_rec *u, struct mgr_stream *st, int wait_s, char **body,
		    size_t *len);
void mgr_stream_free(struct mgr_stream *st);

/* ---- usage over time (usage_report.c, docs/api.md "Usage summary") ---- */

struct usum_query;
struct usum_row;
/* The allocated hours and sessions started per day and per q->by of the
 * sessions u may count (usage_summary.h): an admin everyone's, others
 * their own (EPERM for q->user another's); q->user and q->project filter
 * (ENOENT for an unknown user, or a project u is not in). *rows malloc'd,
 * the caller's. */
int mgr_usage_summary(struct manager *m, const struct user_rec *u, const struct usum_query *q,
		      struct usum_row **rows, size_t *n_rows, struct terr *err);

#endif
