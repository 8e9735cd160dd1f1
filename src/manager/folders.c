/* Users' data folders (docs/folders.md): records in the store's folders
 * table, kept in memory as m->folders; each is the directory HOSTPATH/ID
 * on its storage host (m->hosts), or HOSTPATH/.trash/ID once removed.
 * Directories are made for the sessions' work user (uid/gid 1000,
 * docs/security.md) so that what a session writes there is its own.
 *
 * Quotas: what the kernel can enforce on each host is probed at open
 * (folders/fsquota.h): on btrfs with quotas each folder is a subvolume
 * with a qgroup limit, on XFS/ext4 with project quotas a project id with
 * a limit; elsewhere only the API's checks hold. Uploads reserve their
 * size against the free quota under the lock (mgr_folder_upload_begin),
 * so uploads side by side cannot pass it together.
 *
 * Who sees a folder: its owner, the users it is shared with and admins.
 * Anyone else gets the same ENOENT as for a missing folder, so names of
 * other users' folders never leak. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/util.h"
#include "manager/state.h"

/* The sessions' work user (docs/security.md). */
#define WORK_UID 1000
#define WORK_GID 1000
/* Usage is measured by walking the tree: at most this often per folder. */
#define USAGE_TTL_MS 5000

/* ---------- pure checks ---------- */

int mgr_folder_name_check(const char *name, struct terr *err)
{
	return model_validate_folder_name(name, err);
}

/* ---------- state ---------- */

static const struct model_storage_host *find_host(struct manager *m, const char *name)
{
	for (size_t i = 0; i < m->n_hosts; i++)
		if (!strcmp(m->hosts[i].name, name))
			return &m->hosts[i];
	return NULL;
}

/* What the kernel enforces on f's host (an uncapped host when it is no
 * longer declared). */
static const struct fsq_host *host_quota(struct manager *m, const struct folder_rec *f)
{
	static const struct fsq_host none = {.kind = FSQ_API_ONLY};
	const struct model_storage_host *h = find_host(m, f->host);
	return h ? &m->host_quota[h - m->hosts] : &none;
}

/* The folder's directory (live, or in its host's trash). */
static int folder_dir(struct manager *m, const struct folder_rec *f, bool trash, char *out, size_t n,
		      struct terr *err)
{
	const struct model_storage_host *h = find_host(m, f->host);
	if (!h)
		return terr_set(err, EIO, "folder %s lies on storage host %s, which is no longer declared", f->name, f->host);
	if ((size_t)snprintf(out, n, "%s/%s%s", h->path, trash ? ".trash/" : "", f->id) >= n)
		return terr_set(err, ENAMETOOLONG, "folder path too long");
	return 0;
}

static int append_folder(struct manager *m, struct mfolder *f)
{
	if (m->n_folders == m->cap_folders) {
		size_t cap = m->cap_folders ? m->cap_folders * 2 : 16;
		struct mfolder **n = realloc(m->folders, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		m->folders = n;
		m->cap_folders = cap;
	}
	m->folders[m->n_folders++] = f;
	return 0;
}

static int load_one(void *ud, const struct folder_rec *r)
{
	struct mfolder *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->rec = *r;
	if (!f->rec.shares[0])
		util_strlcpy(f->rec.shares, "[]", sizeof(f->rec.shares));
	if (append_folder(ud, f) < 0) {
		free(f);
		return -ENOMEM;
	}
	return 0;
}

/* Gives f's directory (dir) a project id of its own on a project-quota
 * host: one no other folder of that host has. */
static int assign_project(struct manager *m, struct mfolder *f, const char *dir, struct terr *err)
{
	uint32_t *used = calloc(m->n_folders + 1, sizeof(*used));
	size_t n = 0;
	if (!used)
		return terr_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < m->n_folders; i++) {
		const struct mfolder *o = m->folders[i];
		if (o != f && o->fsq.kind == FSQ_PROJECT && !strcmp(o->rec.host, f->rec.host))
			used[n++] = (uint32_t)o->fsq.id;
	}
	uint32_t id = fsq_projid_pick(f->rec.id, used, n);
	free(used);
	if (!id)
		return terr_set(err, ENOSPC, "no project id is left on storage host %s", f->rec.host);
	int rc = fsq_set_project(dir, id, err);
	if (rc == 0)
		rc = fsq_folder_probe(host_quota(m, &f->rec), dir, &f->fsq, err);
	return rc;
}

/* At start: reads how f is capped and makes the kernel's limit its
 * quota, so that a quota changed while the host's quotas were off, or a
 * folder made before they were turned on, is capped from now on. A
 * folder of a project-quota host without a project id gets one (what it
 * holds already keeps project 0 and is not charged: docs/admin.md).
 * Failures are logged: the folder stays usable, uncapped. */
static void sync_quota(struct manager *m, struct mfolder *f)
{
	const struct fsq_host *q = host_quota(m, &f->rec);
	char dir[1200];
	struct terr e = {0};
	if (q->kind == FSQ_API_ONLY || folder_dir(m, &f->rec, f->rec.trashed_ms != 0, dir, sizeof(dir), &e) < 0)
		return;
	if (fsq_folder_probe(q, dir, &f->fsq, &e) < 0) {
		log_warn("manager", "folder %s (%s): %s", f->rec.name, f->rec.id, e.msg);
		return;
	}
	if (q->kind == FSQ_PROJECT && f->fsq.kind == FSQ_API_ONLY && assign_project(m, f, dir, &e) < 0) {
		log_warn("manager", "folder %s (%s): %s; its quota is not enforced in sessions", f->rec.name,
			 f->rec.id, e.msg);
		return;
	}
	if (f->fsq.kind == FSQ_API_ONLY)
		log_warn("manager", "folder %s (%s) on %s is not a subvolume (made before it was btrfs?): its quota "
			 "is not enforced in sessions", f->rec.name, f->rec.id, f->rec.host);
	else if (fsq_set_limit(q, &f->fsq, dir, f->rec.quota_bytes, &e) < 0)
		log_warn("manager", "folder %s (%s): %s", f->rec.name, f->rec.id, e.msg);
}

/* spec, or the default host when NULL or "", into hosts. */
static int parse_hosts(struct manager *m, const char *spec, struct model_storage_host *hosts, size_t *n,
		       struct terr *err)
{
	char def[sizeof(m->data_dir) + 16];
	if (!spec || !*spec) {
		snprintf(def, sizeof(def), "local:%s/folders", m->data_dir);
		spec = def;
	}
	return model_storage_hosts_parse(spec, hosts, MGR_MAX_STORAGE_HOSTS, n, err);
}

/* Makes a host's directory and its trash, as at start. */
static int make_host_dirs(const struct model_storage_host *h, struct terr *err)
{
	/* 0755: the agent and the containers' work user must reach the
	 * folders below it; each folder's own mode keeps others' data apart
	 * from the host's other users. */
	if (util_mkdir_p(h->path, 0755, err) < 0)
		return terr_prefix(err, "storage host %s", h->name);
	char trash[1100];
	snprintf(trash, sizeof(trash), "%s/.trash", h->path);
	if (util_mkdir_p(trash, 0700, err) < 0)
		return terr_prefix(err, "storage host %s", h->name);
	return 0;
}

static void probe_host(const struct model_storage_host *h, struct fsq_host *q)
{
	fsq_probe(h->path, q);
	if (q->kind == FSQ_API_ONLY)
		log_warn("manager", "storage host %s: %s", h->name, q->why);
	else
		log_info("manager", "storage host %s: %s", h->name, q->why);
}

static const struct model_storage_host *host_in(const struct model_storage_host *hosts, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(hosts[i].name, name))
			return &hosts[i];
	return NULL;
}

int mgr_folders_hosts_check(struct manager *m, const char *spec, struct terr *err)
{
	struct model_storage_host hosts[MGR_MAX_STORAGE_HOSTS];
	size_t n = 0;
	if (parse_hosts(m, spec, hosts, &n, err) < 0)
		return -EINVAL;
	/* Every folder stays where it is: a host that holds one (live or in
	 * its trash) keeps its name and path. */
	char names[400] = "";
	size_t len = 0, count = 0;
	const char *first_host = NULL;
	for (size_t i = 0; i < m->n_folders; i++) {
		const struct folder_rec *f = &m->folders[i]->rec;
		const struct model_storage_host *now = find_host(m, f->host), *then = host_in(hosts, n, f->host);
		if (!now || (then && !strcmp(then->path, now->path)))
			continue;   /* undeclared already, or kept */
		if (!first_host)
			first_host = now->name;
		if (count++ < 8 && len < sizeof(names) - 1) {
			int w = snprintf(names + len, sizeof(names) - len, "%s%s%s", len ? ", " : "", f->name,
					 f->trashed_ms ? " (in the trash)" : "");
			if (w > 0)
				len += (size_t)w;
		}
	}
	if (count)
		return terr_set(err, EINVAL, "storage_hosts: storage host %s holds %zu folder%s (%s%s); it cannot be "
				"removed or moved while it does: remove them first (tessera folder rm, then purge or "
				"wait folder_trash_days)", first_host, count, count == 1 ? "" : "s", names,
				count > 8 ? ", ..." : "");
	for (size_t i = 0; i < n; i++) {
		const struct model_storage_host *now = find_host(m, hosts[i].name);
		if ((!now || strcmp(now->path, hosts[i].path)) && make_host_dirs(&hosts[i], err) < 0) {
			terr_prefix(err, "storage_hosts");
			if (err)
				err->code = EINVAL;   /* a bad value (400), whatever mkdir said */
			return -EINVAL;
		}
	}
	return 0;
}

void mgr_folders_hosts_apply(struct manager *m)
{
	struct model_storage_host hosts[MGR_MAX_STORAGE_HOSTS];
	struct fsq_host quota[MGR_MAX_STORAGE_HOSTS];
	size_t n = 0;
	struct terr e = {0};
	if (parse_hosts(m, mgr_conf_value(m, "storage_hosts"), hosts, &n, &e) < 0) {
		log_warn("manager", "storage hosts stay as they are: %s", e.msg);
		return;
	}
	bool same = n == m->n_hosts;
	for (size_t i = 0; i < n; i++) {
		const struct model_storage_host *now = find_host(m, hosts[i].name);
		same = same && !strcmp(m->hosts[i].name, hosts[i].name) && !strcmp(m->hosts[i].path, hosts[i].path);
		if (now && !strcmp(now->path, hosts[i].path)) {
			quota[i] = m->host_quota[now - m->hosts];   /* probed already */
			continue;
		}
		if (make_host_dirs(&hosts[i], &e) < 0)
			log_warn("manager", "%s; its folders cannot be made", e.msg);
		probe_host(&hosts[i], &quota[i]);
	}
	if (!same) {
		memcpy(m->hosts, hosts, n * sizeof(*hosts));
		memcpy(m->host_quota, quota, n * sizeof(*quota));
		m->n_hosts = n;
		for (size_t i = 0; i < m->n_folders; i++)
			if (!find_host(m, m->folders[i]->rec.host))
				log_warn("manager", "folder %s (%s) lies on storage host %s, which is no longer declared",
					 m->folders[i]->rec.name, m->folders[i]->rec.id, m->folders[i]->rec.host);
		log_info("manager", "storage hosts from now on: %zu, %s the default", n, n ? hosts[0].name : "none");
	}
	if (m->local_agent)
		agent_set_storage_hosts(m->local_agent, m->hosts, m->n_hosts);
}

int mgr_folders_load(struct manager *m, struct terr *err)
{
	int rc = parse_hosts(m, mgr_conf_value(m, "storage_hosts"), m->hosts, &m->n_hosts, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < m->n_hosts; i++) {
		if ((rc = make_host_dirs(&m->hosts[i], err)) < 0)
			return rc;
		probe_host(&m->hosts[i], &m->host_quota[i]);
	}
	if ((rc = m->so->folder_load_all(m->store, load_one, m, err)) < 0)
		return rc;
	for (size_t i = 0; i < m->n_folders; i++)
		sync_quota(m, m->folders[i]);
	return 0;
}

void mgr_folders_free(struct manager *m)
{
	for (size_t i = 0; i < m->n_folders; i++)
		free(m->folders[i]);
	free(m->folders);
	m->folders = NULL;
	m->n_folders = m->cap_folders = 0;
}

/* Whether share entry x is u's: {"user_id"} names a user; {"email"} is a
 * share with an email that had no account when it was made (set_share),
 * which is the account's that has that email now, if any. Emails are
 * kept lower-cased, users' and shares' alike. */
static bool share_is(json_t *x, const char *user_id, const char *email)
{
	const char *id = json_string_value(json_object_get(x, "user_id"));
	const char *em = json_string_value(json_object_get(x, "email"));
	return id ? user_id && !strcmp(id, user_id) : em && email && !strcmp(em, email);
}

/* "ro", "rw" or NULL: what the folder's shares give u, or its project
 * (docs/folders.md, "Project folders"): its managers "rw", its members
 * the folder's project_permission. */
static const char *share_of(struct manager *m, const struct mfolder *f, const struct user_rec *u)
{
	static const char *const perms[] = {"ro", "rw"};
	const char *res = NULL;
	if (f->rec.project_id[0]) {
		const struct mproject *p = mgr_find_project(m, f->rec.project_id);
		const struct mmember *mb = p && !p->rec.personal ? mgr_find_member(m, p->rec.id, u->id) : NULL;
		if (mb && !strcmp(mb->rec.role, STORE_ROLE_MANAGER))
			return perms[1];
		if (mb)
			res = strcmp(f->rec.project_permission, "ro") ? perms[1] : perms[0];
	}
	json_t *arr = json_loads(f->rec.shares, 0, NULL);
	size_t i;
	json_t *x;
	json_array_foreach(arr, i, x) {
		const char *p = json_string_value(json_object_get(x, "permission"));
		/* A share given to a member too adds to the project's "ro". */
		if (p && share_is(x, u->id, u->email) && res != perms[1])
			res = !strcmp(p, "rw") ? perms[1] : perms[0];
	}
	json_decref(arr);
	return res;
}

/* "owner", "rw", "ro" or NULL (may not see it). Admins see everything as
 * owners do. */
static const char *permission_of(struct manager *m, const struct mfolder *f, const struct user_rec *u)
{
	if (!strcmp(f->rec.owner_id, u->id) || u->is_admin)
		return "owner";
	return share_of(m, f, u);
}

/* The folder u names: an own folder by name, else one shared with u by
 * name, else by id (any visible). Live ones unless trash. */
static struct mfolder *resolve(struct manager *m, const struct user_rec *u, const char *name, bool trash)
{
	struct mfolder *shared = NULL;
	for (size_t i = 0; i < m->n_folders; i++) {
		struct mfolder *f = m->folders[i];
		if ((f->rec.trashed_ms != 0) != trash || strcmp(f->rec.name, name))
			continue;
		if (!strcmp(f->rec.owner_id, u->id))
			return f;
		if (!shared && share_of(m, f, u))
			shared = f;
	}
	if (shared)
		return shared;
	for (size_t i = 0; i < m->n_folders; i++) {
		struct mfolder *f = m->folders[i];
		if ((f->rec.trashed_ms != 0) == trash && !strcmp(f->rec.id, name) && permission_of(m, f, u))
			return f;
	}
	return NULL;
}

static int not_found(struct terr *err, const char *name)
{
	return terr_set(err, ENOENT, "no folder %s", name);
}

static int nftw_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw);
static __thread int64_t walk_total;
static int nftw_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	(void)flag;
	(void)ftw;
	walk_total += (int64_t)st->st_blocks * 512;
	return 0;
}

static int64_t usage_of(struct manager *m, struct mfolder *f)
{
	int64_t now = util_mono_ms();
	/* The kernel's count costs one ioctl: never cached. A walk is. */
	if (f->fsq.kind == FSQ_API_ONLY && f->usage_at_mono && now - f->usage_at_mono < USAGE_TTL_MS)
		return f->usage_bytes;
	char dir[1200];
	struct terr e = {0};
	if (folder_dir(m, &f->rec, f->rec.trashed_ms != 0, dir, sizeof(dir), &e) < 0)
		return f->usage_bytes;
	int64_t counted = 0;
	/* The kernel's own count where it keeps one (O(1), and what it
	 * enforces); else a walk. */
	if (f->fsq.kind != FSQ_API_ONLY && fsq_usage(host_quota(m, &f->rec), &f->fsq, dir, &counted, &e) == 0) {
		f->usage_bytes = counted;
	} else {
		walk_total = 0;
		/* FTW_PHYS: a session's symlinks are never followed. */
		nftw(dir, nftw_cb, 16, FTW_PHYS | FTW_MOUNT);
		f->usage_bytes = walk_total;
	}
	f->usage_at_mono = now;
	return f->usage_bytes;
}

/* Sessions not yet ended that mount folder id: the names of those u may
 * see (their own; an admin, or u NULL, all of them) as "a, b" into out (n bytes; may
 * be cut) and, when names is not NULL, appended to that JSON array; how
 * many others (other users' sessions, whose names are theirs: a folder's
 * owner learns only their number) into *others; their number in all. */
static int mounting_sessions(struct manager *m, const char *id, const struct user_rec *u, char *out, size_t n,
			     json_t *names, int *others)
{
	int count = 0, named = 0;
	char needle[64];
	snprintf(needle, sizeof(needle), "\"folder_id\":\"%s\"", id);
	out[0] = '\0';
	*others = 0;
	for (size_t i = 0; i < m->n_sessions; i++) {
		const struct session_rec *r = &m->sessions[i]->rec;
		if (session_status_final(r->status) || !r->mounts_json || !strstr(r->mounts_json, needle) ||
		    mgr_session_is_sub(m->sessions[i]))
			continue;
		count++;
		if (u && !u->is_admin && strcmp(r->owner_id, u->id)) {
			(*others)++;
			continue;
		}
		size_t l = strlen(out);
		snprintf(out + l, n - l, "%s%s", named++ ? ", " : "", r->name);
		if (names)
			json_array_append_new(names, json_string(r->name));
	}
	return count;
}

/* The folder's team project's name (null for a folder of its owner's). */
static json_t *project_name(struct manager *m, const struct mfolder *f)
{
	const struct mproject *p = f->rec.project_id[0] ? mgr_find_project(m, f->rec.project_id) : NULL;
	return p && !p->rec.personal ? json_string(p->rec.name) : json_null();
}

static json_t *folder_json(struct manager *m, struct mfolder *f, const struct user_rec *u)
{
	const struct user_rec *owner = mgr_find_user(m, f->rec.owner_id);
	json_t *shared = json_array();
	json_t *arr = json_loads(f->rec.shares, 0, NULL);
	size_t i;
	json_t *x;
	json_array_foreach(arr, i, x) {
		/* A share with an email that has no account reads as any other. */
		const char *id = json_string_value(json_object_get(x, "user_id"));
		const struct user_rec *su = id ? mgr_find_user(m, id) : NULL;
		const char *email = su ? su->email : id ? NULL : json_string_value(json_object_get(x, "email"));
		if (email)
			json_array_append_new(shared, json_pack("{s:s,s:O}", "email", email, "permission",
								 json_object_get(x, "permission")));
	}
	json_decref(arr);
	const char *perm = permission_of(m, f, u);
	/* The sessions that mount it, live or trashed: u's own by name (an
	 * admin's: all), other users' as a number. */
	char who[1024];
	int others = 0;
	json_t *mounted = json_array();
	mounting_sessions(m, f->rec.id, u, who, sizeof(who), mounted, &others);
	return json_pack("{s:s,s:s,s:s,s:s,s:I,s:I,s:s,s:s,s:o,s:b,s:o,s:o,s:o,s:i,s:o}",
			 "id", f->rec.id, "name", f->rec.name, "host", f->rec.host,
			 "owner", owner ? owner->email : "",
			 "quota_bytes", (json_int_t)f->rec.quota_bytes,
			 "usage_bytes", (json_int_t)usage_of(m, f),
			 "quota_enforced", fsq_kind_name(f->fsq.kind),
			 "permission", perm ? perm : "ro", "shared_with", shared,
			 "automount", f->rec.name[0] == '.',
			 "created_at", mgr_time_json(f->rec.created_ms),
			 "trashed_at", mgr_time_json(f->rec.trashed_ms), "mounted_by", mounted,
			 "mounted_by_others", others, "project", project_name(m, f));
}

static int persist(struct manager *m, struct mfolder *f, struct terr *err)
{
	return m->so->folder_put(m->store, &f->rec, err);
}

/* ---------- the core's calls ---------- */

int mgr_folder_quota_check(int64_t quota, int64_t max_bytes, int64_t *effective, struct terr *err)
{
	if (quota < 0)
		quota = max_bytes > 0 ? max_bytes : 0;
	if (max_bytes > 0 && (quota == 0 || quota > max_bytes))
		return terr_set(err, EPERM, "a folder's quota may be at most %lld bytes (your policy's max_folder_bytes)",
				(long long)max_bytes);
	*effective = quota;
	return 0;
}

int mgr_folder_create(struct manager *m, const struct user_rec *u, const char *name, const char *host,
		      int64_t quota, json_t **out, struct terr *err)
{
	return mgr_folder_create_in(m, u, name, host, quota, NULL, NULL, out, err);
}

int mgr_folder_create_in(struct manager *m, const struct user_rec *u, const char *name, const char *host,
			 int64_t quota, const char *project, const char *member_perm, json_t **out, struct terr *err)
{
	int rc = mgr_folder_name_check(name, err);
	if (rc < 0)
		return rc;
	if (member_perm && strcmp(member_perm, "rw") && strcmp(member_perm, "ro"))
		return terr_set(err, EINVAL, "members must be \"rw\" or \"ro\": what the project's members may do "
				"in the folder (its managers may always write)");
	pthread_mutex_lock(&m->mu);
	const struct mproject *proj = project ? mgr_find_project_by_name(m, project) : NULL;
	if (project && (!proj || mgr_project_role(m, proj, u) == ROLE_NONE)) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "no project named '%s' (tessera project ls lists yours)", project);
	}
	/* A member may read a manager's project folders but only its
	 * managers (and admins) make them: the folder is the team's. */
	if (proj && (proj->rec.personal || mgr_project_role(m, proj, u) != ROLE_MANAGER)) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, EPERM, proj->rec.personal ? "%s is a personal project: a folder there is "
				"simply yours (leave out --project)" : "only project %s's managers and admins make its "
				"folders", proj->rec.name);
	}
	const struct model_storage_host *h = host ? find_host(m, host) : &m->hosts[0];
	int64_t max_folders = mgr_user_policy_limit(m, u->email, "max_folders", MGR_DEFAULT_MAX_FOLDERS);
	int64_t max_bytes = mgr_user_policy_limit(m, u->email, "max_folder_bytes", 0);
	size_t owned = 0;
	struct mfolder *f = NULL;
	const struct fsq_host *q = NULL;
	char dir[1200];
	if (!h) {
		rc = terr_set(err, ENOENT, "no storage host %s", host);
		goto out;
	}
	for (size_t i = 0; i < m->n_folders; i++) {
		struct mfolder *o = m->folders[i];
		if (strcmp(o->rec.owner_id, u->id) || o->rec.trashed_ms)
			continue;
		owned++;
		if (!strcmp(o->rec.name, name)) {
			rc = terr_set(err, EEXIST, "you already have a folder %s", name);
			goto out;
		}
	}
	if (max_folders > 0 && (int64_t)owned >= max_folders) {
		rc = terr_set(err, EPERM, "you have %zu folders, the most your policy's max_folders allows; "
			      "remove one first (tessera folder rm NAME)", owned);
		goto out;
	}
	if ((rc = mgr_folder_quota_check(quota, max_bytes, &quota, err)) < 0)
		goto out;
	if (!(f = calloc(1, sizeof(*f)))) {
		rc = terr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = util_new_id(f->rec.id, err)) < 0)
		goto out;
	util_strlcpy(f->rec.name, name, sizeof(f->rec.name));
	util_strlcpy(f->rec.owner_id, u->id, sizeof(f->rec.owner_id));
	util_strlcpy(f->rec.host, h->name, sizeof(f->rec.host));
	util_strlcpy(f->rec.shares, "[]", sizeof(f->rec.shares));
	if (proj) {
		util_strlcpy(f->rec.project_id, proj->rec.id, sizeof(f->rec.project_id));
		util_strlcpy(f->rec.project_permission, member_perm ? member_perm : "rw",
			     sizeof(f->rec.project_permission));
	}
	f->rec.quota_bytes = quota;
	f->rec.created_ms = util_now_ms();
	if ((rc = folder_dir(m, &f->rec, false, dir, sizeof(dir), err)) < 0)
		goto out;
	q = &m->host_quota[h - m->hosts];
	if ((rc = fsq_make_dir(q, dir, err)) < 0)
		goto out;
	/* Owned by the sessions' work user, so a session writes there
	 * without root. Without privileges (tests as a plain user) the
	 * directory stays the manager's. */
	if (geteuid() == 0 && chown(dir, WORK_UID, WORK_GID) < 0) {
		rc = terr_set(err, errno, "cannot give %s to the work user: %s", dir, strerror(errno));
		goto undo;
	}
	/* The kernel's cap: on a host that has one, a folder it cannot cap
	 * is refused rather than made uncapped without a word. */
	if ((rc = fsq_folder_probe(q, dir, &f->fsq, err)) < 0)
		goto undo;
	if (q->kind == FSQ_PROJECT && (rc = assign_project(m, f, dir, err)) < 0)
		goto undo;
	if (f->fsq.kind == FSQ_API_ONLY && q->kind != FSQ_API_ONLY)
		log_warn("manager", "folder %s on %s: the kernel did not make it a subvolume; its quota is not "
			 "enforced in sessions", name, h->name);
	if ((rc = fsq_set_limit(q, &f->fsq, dir, quota, err)) < 0)
		goto undo;
	if ((rc = persist(m, f, err)) < 0 || (rc = append_folder(m, f)) < 0) {
		if (rc == -ENOMEM)
			terr_set(err, ENOMEM, "out of memory");
		goto undo;
	}
	log_info("manager", "folder %s (%s) of %s created on %s (quota %s)", f->rec.name, f->rec.id, u->email,
		 h->name, fsq_kind_name(f->fsq.kind));
	*out = folder_json(m, f, u);
	f = NULL;
	goto out;
undo:
	{
		struct terr e2 = {0};
		if (fsq_remove_dir(q, dir, &e2) < 0)
			log_warn("manager", "folder %s: removing %s after a failed create: %s", name, dir, e2.msg);
	}
out:
	free(f);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

json_t *mgr_folders_list(struct manager *m, const struct user_rec *u, bool all, bool trash)
{
	json_t *arr = json_array();
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n_folders; i++) {
		struct mfolder *f = m->folders[i];
		if ((f->rec.trashed_ms != 0) != trash)
			continue;
		bool mine = !strcmp(f->rec.owner_id, u->id);
		/* Trash: one's own only; admins every one with all. */
		bool visible = mine || (all && u->is_admin) || (!trash && share_of(m, f, u));
		if (visible)
			json_array_append_new(arr, folder_json(m, f, u));
	}
	pthread_mutex_unlock(&m->mu);
	return arr;
}

int mgr_folder_get(struct manager *m, const struct user_rec *u, const char *name, json_t **out,
		   struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	struct mfolder *f = resolve(m, u, name, false);
	int rc = f ? 0 : not_found(err, name);
	if (f)
		*out = folder_json(m, f, u);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* The folder name of u that u may manage (owner or admin). */
static struct mfolder *managed(struct manager *m, const struct user_rec *u, const char *name, bool trash,
			       struct terr *err)
{
	struct mfolder *f = resolve(m, u, name, trash);
	if (!f) {
		not_found(err, name);
		return NULL;
	}
	if (strcmp(f->rec.owner_id, u->id) && !u->is_admin) {
		terr_set(err, EPERM, "folder %s is shared with you; only its owner may change it", name);
		return NULL;
	}
	return f;
}

int mgr_folder_rename(struct manager *m, const struct user_rec *u, const char *name, const char *new_name,
		      json_t **out, struct terr *err)
{
	int rc = mgr_folder_name_check(new_name, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->mu);
	struct mfolder *f = managed(m, u, name, false, err);
	if (!f) {
		rc = -err->code;
		goto out;
	}
	for (size_t i = 0; i < m->n_folders; i++) {
		struct mfolder *o = m->folders[i];
		if (o != f && !o->rec.trashed_ms && !strcmp(o->rec.owner_id, f->rec.owner_id) &&
		    !strcmp(o->rec.name, new_name)) {
			rc = terr_set(err, EEXIST, "a folder %s exists already", new_name);
			goto out;
		}
	}
	char old[STORE_NAME_MAX];
	util_strlcpy(old, f->rec.name, sizeof(old));
	util_strlcpy(f->rec.name, new_name, sizeof(f->rec.name));
	if ((rc = persist(m, f, err)) < 0) {
		util_strlcpy(f->rec.name, old, sizeof(f->rec.name));
		goto out;
	}
	*out = folder_json(m, f, u);
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int mgr_folder_set_quota(struct manager *m, const struct user_rec *u, const char *name, int64_t quota,
			 json_t **out, struct terr *err)
{
	if (quota < 0)
		return terr_set(err, EINVAL, "quota must be a size of 0 (none) or more");
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	struct mfolder *f = managed(m, u, name, false, err);
	char dir[1200];
	if (!f) {
		rc = -err->code;
		goto out;
	}
	/* The owner's policy, whoever asks: an admin changes the policy. */
	const struct user_rec *owner = mgr_find_user(m, f->rec.owner_id);
	int64_t max_bytes = owner ? mgr_user_policy_limit(m, owner->email, "max_folder_bytes", 0) : 0;
	if ((rc = mgr_folder_quota_check(quota, max_bytes, &quota, err)) < 0 ||
	    (rc = folder_dir(m, &f->rec, false, dir, sizeof(dir), err)) < 0)
		goto out;
	const struct fsq_host *q = host_quota(m, &f->rec);
	int64_t old = f->rec.quota_bytes;
	if ((rc = fsq_set_limit(q, &f->fsq, dir, quota, err)) < 0)
		goto out;
	f->rec.quota_bytes = quota;
	if ((rc = persist(m, f, err)) < 0) {
		struct terr e = {0};
		f->rec.quota_bytes = old;
		fsq_set_limit(q, &f->fsq, dir, old, &e);
		goto out;
	}
	log_info("manager", "folder %s (%s): quota %lld bytes, set by %s", f->rec.name, f->rec.id, (long long)quota,
		 u->email);
	*out = folder_json(m, f, u);
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int mgr_folder_delete(struct manager *m, const struct user_rec *u, const char *name, bool force,
		      struct terr *err)
{
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	struct mfolder *f = managed(m, u, name, false, err);
	char who[1024], from[1200], to[1200];
	if (!f) {
		rc = -err->code;
		goto out;
	}
	int others = 0;
	if (mounting_sessions(m, f->rec.id, u, who, sizeof(who), NULL, &others) > 0 && !force) {
		char theirs[96] = "";
		if (others)
			snprintf(theirs, sizeof(theirs), "%s%d session(s) of other users", who[0] ? " and " : "", others);
		rc = terr_set(err, EBUSY, "folder %s is mounted by %s%s%s; remove them first or force", name,
			      who[0] ? "session(s) " : "", who, theirs);
		goto out;
	}
	if ((rc = folder_dir(m, &f->rec, false, from, sizeof(from), err)) < 0 ||
	    (rc = folder_dir(m, &f->rec, true, to, sizeof(to), err)) < 0)
		goto out;
	if (rename(from, to) < 0 && errno != ENOENT) {
		rc = terr_set(err, errno, "cannot move %s to the trash: %s", name, strerror(errno));
		goto out;
	}
	f->rec.trashed_ms = util_now_ms();
	if ((rc = persist(m, f, err)) < 0) {
		f->rec.trashed_ms = 0;
		rename(to, from);
		goto out;
	}
	log_info("manager", "folder %s (%s) moved to the trash by %s", f->rec.name, f->rec.id, u->email);
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int mgr_folder_restore(struct manager *m, const struct user_rec *u, const char *name, json_t **out,
		       struct terr *err)
{
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	struct mfolder *f = managed(m, u, name, true, err);
	char from[1200], to[1200];
	if (!f) {
		rc = -err->code;
		goto out;
	}
	for (size_t i = 0; i < m->n_folders; i++) {
		struct mfolder *o = m->folders[i];
		if (!o->rec.trashed_ms && !strcmp(o->rec.owner_id, f->rec.owner_id) && !strcmp(o->rec.name, f->rec.name)) {
			rc = terr_set(err, EEXIST, "a folder %s exists already: rename it first", f->rec.name);
			goto out;
		}
	}
	if ((rc = folder_dir(m, &f->rec, true, from, sizeof(from), err)) < 0 ||
	    (rc = folder_dir(m, &f->rec, false, to, sizeof(to), err)) < 0)
		goto out;
	if (rename(from, to) < 0) {
		rc = terr_set(err, errno, "cannot restore %s: %s", name, strerror(errno));
		goto out;
	}
	f->rec.trashed_ms = 0;
	if ((rc = persist(m, f, err)) < 0)
		goto out;
	*out = folder_json(m, f, u);
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* The sessions of user_id, not yet ended, that mount folder f in a way
 * a share of perm no longer allows (perm NULL: no share, every mount;
 * "ro": the writable ones; "rw": none). Up to max of them into list;
 * their number, and their names as "a, b" into names (n bytes; may be
 * cut). A mount is a bind mount made at the session's start: taking the
 * share away does not reach it, so the caller refuses or ends them. */
static int sessions_losing(struct manager *m, const struct mfolder *f, const char *user_id, const char *perm,
			   struct msession **list, size_t max, char *names, size_t n)
{
	int count = 0;
	char needle[64];
	snprintf(needle, sizeof(needle), "\"folder_id\":\"%s\"", f->rec.id);
	names[0] = '\0';
	if (perm && !strcmp(perm, "rw"))
		return 0;
	for (size_t i = 0; i < m->n_sessions; i++) {
		struct msession *s = m->sessions[i];
		const struct session_rec *r = &s->rec;
		if (session_status_final(r->status) || strcmp(r->owner_id, user_id) || !r->mounts_json ||
		    !strstr(r->mounts_json, needle))
			continue;
		json_t *mounts = json_loads(r->mounts_json, 0, NULL);
		bool loses = false;
		size_t k;
		json_t *x;
		json_array_foreach(mounts, k, x) {
			if (strcmp(json_string_value(json_object_get(x, "folder_id")) ?: "", f->rec.id))
				continue;
			/* A mount that cannot be read counts as writable. */
			loses = loses || !perm || !json_is_true(json_object_get(x, "ro"));
		}
		json_decref(mounts);
		if (!loses)
			continue;
		if ((size_t)count < max)
			list[count] = s;
		size_t l = strlen(names);
		snprintf(names + l, n - l, "%s%s", count ? ", " : "", r->name);
		count++;
	}
	return count;
}

/* At most this many sessions are ended by one forced share change (more
 * are refused: a user does not run that many mounting one folder). */
#define SHARE_FORCE_MAX 256

static int set_share(struct manager *m, const struct user_rec *u, const char *name, const char *email,
		     const char *perm, bool force, json_t **out, struct terr *err)
{
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	struct mfolder *f = managed(m, u, name, false, err);
	json_t *arr = NULL;
	struct msession **losing = NULL;
	int n_losing = 0;
	if (!f) {
		rc = -err->code;
		goto out;
	}
	/* An email without an account is answered as one with: the share is
	 * kept under the email (it is that account's if one is made with it)
	 * and listed the same, so the answer does not tell the owner whether
	 * the address has an account (docs/security.md). */
	const struct user_rec *to = mgr_find_user_by_email(m, email);
	if (to && !strcmp(to->id, f->rec.owner_id)) {
		rc = terr_set(err, EINVAL, "%s owns folder %s", email, name);
		goto out;
	}
	/* Unsharing (or making read-only) while the user's sessions mount it
	 * (writable): refused, naming them, as folder rm is, unless force,
	 * which ends them (docs/folders.md, "Sharing"). Their names only to
	 * an admin: the owner sees their number (docs/security.md). */
	const char *had = to ? share_of(m, f, to) : NULL;
	if (had && (!perm || (!strcmp(perm, "ro") && !strcmp(had, "rw")))) {
		char who[1024];
		losing = calloc(SHARE_FORCE_MAX, sizeof(*losing));
		if (!losing) {
			rc = terr_set(err, ENOMEM, "out of memory");
			goto out;
		}
		n_losing = sessions_losing(m, f, to->id, perm, losing, SHARE_FORCE_MAX, who, sizeof(who));
		char whose[1200];
		if (u->is_admin)
			snprintf(whose, sizeof(whose), "session(s) %s of %s", who, email);
		else
			snprintf(whose, sizeof(whose), "%d session(s) of %s", n_losing, email);
		if (n_losing > SHARE_FORCE_MAX) {
			rc = terr_set(err, EBUSY, "folder %s is mounted by %s; end some of them first", name, whose);
			goto out;
		}
		if (n_losing && !force) {
			rc = terr_set(err, EBUSY,
				      "folder %s is mounted %sby %s, and a share taken away does not reach a running "
				      "session; end them first, or %s with force, which ends them", name,
				      perm ? "writable " : "", whose, perm ? "share it read-only" : "unshare it");
			goto out;
		}
	}
	arr = json_loads(f->rec.shares, 0, NULL);
	if (!json_is_array(arr)) {
		json_decref(arr);
		arr = json_array();
	}
	size_t i;
	json_t *x;
	bool found = false;
	for (i = 0; i < json_array_size(arr);) {
		x = json_array_get(arr, i);
		if (share_is(x, to ? to->id : NULL, email)) {
			found = true;
			json_array_remove(arr, i);
		} else {
			i++;
		}
	}
	if (!perm && !found) {
		rc = terr_set(err, ENOENT, "folder %s is not shared with %s", name, email);
		goto out;
	}
	if (perm)
		json_array_append_new(arr, json_pack("{s:s,s:s}", to ? "user_id" : "email", to ? to->id : email,
						     "permission", perm));
	char *text = json_dumps(arr, JSON_COMPACT);
	if (!text || strlen(text) >= sizeof(f->rec.shares)) {
		free(text);
		rc = terr_set(err, E2BIG, "folder %s is shared with too many users", name);
		goto out;
	}
	char old[sizeof(f->rec.shares)];
	util_strlcpy(old, f->rec.shares, sizeof(old));
	util_strlcpy(f->rec.shares, text, sizeof(f->rec.shares));
	free(text);
	if ((rc = persist(m, f, err)) < 0) {
		util_strlcpy(f->rec.shares, old, sizeof(f->rec.shares));
		goto out;
	}
	if (n_losing) {
		char by[400];
		snprintf(by, sizeof(by), "%s (folder %s %s)", u->email, name,
			 perm ? "now shared read-only" : "no longer shared");
		for (int i = 0; i < n_losing; i++)
			mgr_delete_session(m, losing[i], by);
		log_info("manager", "folder %s (%s): %s by %s, which ended %d session(s) of %s that mounted it",
			 f->rec.name, f->rec.id, perm ? "shared read-only" : "unshared", u->email, n_losing, email);
	}
	*out = folder_json(m, f, u);
out:
	free(losing);
	json_decref(arr);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int mgr_folder_share(struct manager *m, const struct user_rec *u, const char *name, const char *email,
		     const char *perm, bool force, json_t **out, struct terr *err)
{
	if (!perm || (strcmp(perm, "ro") && strcmp(perm, "rw")))
		return terr_set(err, EINVAL, "permission must be ro or rw");
	return set_share(m, u, name, email, perm, force, out, err);
}

int mgr_folder_unshare(struct manager *m, const struct user_rec *u, const char *name, const char *email,
		       bool force, json_t **out, struct terr *err)
{
	return set_share(m, u, name, email, NULL, force, out, err);
}

int mgr_folder_resolve(struct manager *m, const struct user_rec *u, const char *name, bool want_write,
		       char *path_out, size_t n, int64_t *quota, struct terr *err)
{
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	struct mfolder *f = resolve(m, u, name, false);
	const char *perm = f ? permission_of(m, f, u) : NULL;
	if (!f || !perm)
		rc = not_found(err, name);
	else if (want_write && !strcmp(perm, "ro"))
		rc = terr_set(err, EPERM, "folder %s is shared with you read-only", name);
	else if ((rc = folder_dir(m, &f->rec, false, path_out, n, err)) == 0 && quota)
		*quota = f->rec.quota_bytes;
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* Uploads take a step more than they need when they grow, so that an
 * upload of unknown size takes the lock once per step, not per piece. */
#define UPLOAD_HOLD_STEP (8LL << 20)

static struct mfolder *folder_by_id(struct manager *m, const char *id)
{
	for (size_t i = 0; i < m->n_folders; i++)
		if (!strcmp(m->folders[i]->rec.id, id))
			return m->folders[i];
	return NULL;
}

int mgr_folder_upload_begin(struct manager *m, const struct user_rec *u, const char *name, int64_t declared,
			    char *dir, size_t n, struct mgr_upload_hold *hold, struct terr *err)
{
	int rc = 0;
	memset(hold, 0, sizeof(*hold));
	pthread_mutex_lock(&m->mu);
	struct mfolder *f = resolve(m, u, name, false);
	const char *perm = f ? permission_of(m, f, u) : NULL;
	if (!f || !perm)
		rc = not_found(err, name);
	else if (!strcmp(perm, "ro"))
		rc = terr_set(err, EPERM, "folder %s is shared with you read-only", name);
	else
		rc = folder_dir(m, &f->rec, false, dir, n, err);
	if (rc < 0 || f->rec.quota_bytes <= 0)
		goto out;
	util_strlcpy(hold->folder_id, f->rec.id, sizeof(hold->folder_id));
	hold->quota = f->rec.quota_bytes;
	if (declared <= 0)
		goto out;
	int64_t usage = usage_of(m, f);
	int64_t free_bytes = fsq_free_bytes(f->rec.quota_bytes, usage, f->reserved_bytes);
	if (declared > free_bytes) {
		hold->folder_id[0] = '\0';
		hold->quota = 0;
		rc = terr_set(err, EDQUOT, "%lld bytes would pass folder %s's quota: %lld of %lld bytes are free "
			      "(%lld used, %lld held by uploads in progress); remove files or ask for a larger quota",
			      (long long)declared, name, (long long)free_bytes, (long long)f->rec.quota_bytes,
			      (long long)usage, (long long)f->reserved_bytes);
		goto out;
	}
	f->reserved_bytes += declared;
	hold->bytes = declared;
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int mgr_folder_upload_grow(struct manager *m, struct mgr_upload_hold *hold, int64_t total, struct terr *err)
{
	if (hold->quota <= 0 || total <= hold->bytes)
		return 0;
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	struct mfolder *f = folder_by_id(m, hold->folder_id);
	if (!f) {
		rc = terr_set(err, ENOENT, "the folder was purged during the upload");
		goto out;
	}
	/* What is free to this upload: the quota less the usage and what the
	 * other uploads hold. */
	int64_t others = f->reserved_bytes - hold->bytes;
	int64_t usage = usage_of(m, f);
	int64_t room = fsq_free_bytes(f->rec.quota_bytes, usage, others);
	if (room < 0) {
		/* The quota was taken away meanwhile: nothing to hold. */
		f->reserved_bytes = others > 0 ? others : 0;
		hold->bytes = 0;
		hold->quota = 0;
		goto out;
	}
	if (room < total) {
		rc = terr_set(err, EDQUOT, "the upload passes folder %s's quota of %lld bytes (%lld used, %lld held by "
			      "other uploads); remove files or ask for a larger quota", f->rec.name,
			      (long long)f->rec.quota_bytes, (long long)usage, (long long)others);
		goto out;
	}
	int64_t want = total > room - UPLOAD_HOLD_STEP ? room : total + UPLOAD_HOLD_STEP;
	f->reserved_bytes = others + want;
	hold->bytes = want;
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

void mgr_folder_upload_end(struct manager *m, struct mgr_upload_hold *hold)
{
	if (!hold->folder_id[0])
		return;
	pthread_mutex_lock(&m->mu);
	struct mfolder *f = folder_by_id(m, hold->folder_id);
	if (f) {
		f->reserved_bytes -= hold->bytes;
		if (f->reserved_bytes < 0)
			f->reserved_bytes = 0;
		/* What was written now counts in the usage: measure again
		 * rather than trust the cache. */
		f->usage_at_mono = 0;
	}
	pthread_mutex_unlock(&m->mu);
	hold->folder_id[0] = '\0';
	hold->bytes = 0;
}

void mgr_folders_purge_trash(struct manager *m)
{
	int64_t keep_ms = (int64_t)m->settings.folder_trash_days * 86400 * 1000;
	int64_t now = util_now_ms();
	for (size_t i = 0; i < m->n_folders;) {
		struct mfolder *f = m->folders[i];
		char who[1024];
		int others;
		/* A folder removed with --force while sessions mount it stays
		 * until they have ended: they keep writing to it meanwhile. */
		if (!f->rec.trashed_ms || now - f->rec.trashed_ms < keep_ms ||
		    mounting_sessions(m, f->rec.id, NULL, who, sizeof(who), NULL, &others) > 0) {
			i++;
			continue;
		}
		struct terr e = {0};
		char dir[1200];
		if (m->so->folder_delete(m->store, f->rec.id, &e) < 0) {
			log_warn("manager", "purging folder %s: %s", f->rec.id, e.msg);
			i++;
			continue;
		}
		if (folder_dir(m, &f->rec, true, dir, sizeof(dir), &e) == 0 &&
		    fsq_remove_dir(host_quota(m, &f->rec), dir, &e) < 0)
			log_warn("manager", "purging folder %s: %s (remove it by hand)", f->rec.id, e.msg);
		log_info("manager", "folder %s (%s) purged from the trash", f->rec.name, f->rec.id);
		free(f);
		memmove(&m->folders[i], &m->folders[i + 1], (m->n_folders - i - 1) * sizeof(*m->folders));
		m->n_folders--;
	}
}

int mgr_folders_mounts_json(struct manager *m, const struct user_rec *owner, const struct create_request *cr,
			    char **out, struct terr *err)
{
	*out = NULL;
	json_t *arr = json_array();
	char dir[1200];
	int rc = 0;
	for (size_t i = 0; i < cr->n_mounts; i++) {
		const struct model_mount *mm = &cr->mounts[i];
		struct mfolder *f = resolve(m, owner, mm->name, false);
		const char *perm = f ? permission_of(m, f, owner) : NULL;
		if (!perm) {
			rc = not_found(err, mm->name);
			goto out;
		}
		for (size_t j = 0; j < json_array_size(arr); j++)
			if (!strcmp(json_string_value(json_object_get(json_array_get(arr, j), "folder_id")), f->rec.id)) {
				rc = terr_set(err, EINVAL, "mounts: folder %s is asked for twice", mm->name);
				goto out;
			}
		if ((rc = folder_dir(m, &f->rec, false, dir, sizeof(dir), err)) < 0)
			goto out;
		json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s,s:b,s:b}", "folder_id", f->rec.id, "name",
						     f->rec.name, "source", dir, "target", mm->target, "ro",
						     mm->ro || !strcmp(perm, "ro"), "auto", false));
	}
	/* Automount: every live folder of the owner whose name starts with
	 * '.', at /home/work/NAME, unless asked for explicitly (that mount
	 * wins) or its place is taken by an explicit one. */
	for (size_t i = 0; i < m->n_folders; i++) {
		struct mfolder *f = m->folders[i];
		if (f->rec.trashed_ms || f->rec.name[0] != '.' || strcmp(f->rec.owner_id, owner->id))
			continue;
		char target[MODEL_MOUNT_TARGET_MAX];
		model_default_mount_target(f->rec.name, target, sizeof(target));
		bool taken = false;
		for (size_t j = 0; j < json_array_size(arr) && !taken; j++) {
			json_t *x = json_array_get(arr, j);
			taken = !strcmp(json_string_value(json_object_get(x, "folder_id")), f->rec.id) ||
				!strcmp(json_string_value(json_object_get(x, "target")), target);
		}
		if (taken || folder_dir(m, &f->rec, false, dir, sizeof(dir), err) < 0)
			continue;
		json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s,s:b,s:b}", "folder_id", f->rec.id, "name",
						     f->rec.name, "source", dir, "target", target, "ro", false,
						     "auto", true));
	}
	if (json_array_size(arr) > MGR_MAX_SESSION_MOUNTS) {
		rc = terr_set(err, EINVAL, "a session may mount at most %d folders (automounted ones included)",
			      MGR_MAX_SESSION_MOUNTS);
		goto out;
	}
	if (json_array_size(arr) && !(*out = json_dumps(arr, JSON_COMPACT)))
		rc = terr_set(err, ENOMEM, "out of memory");
out:
	json_decref(arr);
	return rc;
}
