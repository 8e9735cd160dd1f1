/* The store's column lists (columns.h), one line per column. */
#include <stdbool.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "store/columns.h"

#define FIELD_SIZE(rec, member) sizeof(((struct rec *)0)->member)
/* COL(record, column, kind, constraint, member) */
#define COL(rec, name, kind, constraint, member) \
	{#name, kind, constraint, offsetof(struct rec, member), FIELD_SIZE(rec, member), 0}
/* An integer that may be absent: its value and the bool that says so. */
#define COL_OPT(rec, name, constraint, member, flag) \
	{#name, STORE_COL_INT_OPT, constraint, offsetof(struct rec, member), \
	 FIELD_SIZE(rec, member), offsetof(struct rec, flag)}
#define TABLE(var, tname, parent_col, rec, cols) \
	const struct store_table var = {tname, parent_col, cols, \
					sizeof(cols) / sizeof(cols[0]), sizeof(struct rec)}

static const struct store_column user_cols[] = {
	COL(user_rec, id,            STORE_COL_TEXT,  "PRIMARY KEY",         id),
	COL(user_rec, email,         STORE_COL_TEXT,  "NOT NULL UNIQUE",     email),
	COL(user_rec, is_admin,      STORE_COL_BOOL,  "NOT NULL",            is_admin),
	COL(user_rec, disabled,      STORE_COL_BOOL,  "NOT NULL DEFAULT 0",  disabled),
	COL(user_rec, access_key,    STORE_COL_TEXT,  "NOT NULL UNIQUE",     access_key),
	COL(user_rec, secret_key,    STORE_COL_TEXT,  "NOT NULL",            secret_key),
	COL(user_rec, password_hash, STORE_COL_TEXT,  "NOT NULL DEFAULT ''", password_hash),
	COL(user_rec, created_ms,    STORE_COL_INT64, "NOT NULL",            created_ms),
	/* Added in schema version 7. */
	COL(user_rec, ssh_keys,      STORE_COL_TEXT,  "NOT NULL DEFAULT ''", ssh_keys),
};
TABLE(store_users_table, "users", NULL, user_rec, user_cols);

static const struct store_column session_cols[] = {
	COL(session_rec, id,              STORE_COL_TEXT,     "PRIMARY KEY",     id),
	COL(session_rec, seq,             STORE_COL_INT64,    "NOT NULL UNIQUE", seq),
	COL(session_rec, name,            STORE_COL_TEXT,     "NOT NULL",        name),
	COL(session_rec, owner_id,        STORE_COL_TEXT,     "NOT NULL",        owner_id),
	COL(session_rec, image,           STORE_COL_TEXT,     "NOT NULL",        image),
	COL(session_rec, status,          STORE_COL_STATUS,   "NOT NULL",        status),
	COL(session_rec, status_info,     STORE_COL_TEXT,     "NOT NULL",        status_info),
	COL(session_rec, agent_id,        STORE_COL_TEXT,     "NOT NULL",        agent_id),
	COL(session_rec, container_id,    STORE_COL_TEXT,     "NOT NULL",        container_id),
	COL(session_rec, cpu_m,           STORE_COL_INT64,    "NOT NULL",        req.cpu_m),
	COL(session_rec, mem,             STORE_COL_INT64,    "NOT NULL",        req.mem),
	COL(session_rec, fgpu_m,          STORE_COL_INT64,    "NOT NULL",        req.fgpu_m),
	COL(session_rec, env_json,        STORE_COL_TEXT_PTR, "",                env_json),
	COL(session_rec, startup_command, STORE_COL_TEXT_PTR, "",                startup_command),
	COL_OPT(session_rec, exit_code,                       "",                exit_code, has_exit_code),
	COL(session_rec, created_ms,      STORE_COL_INT64,    "NOT NULL",        created_ms),
	COL(session_rec, started_ms,      STORE_COL_INT64,    "NOT NULL",        started_ms),
	COL(session_rec, terminated_ms,   STORE_COL_INT64,    "NOT NULL",        terminated_ms),
	/* Added in schema version 2. */
	COL(session_rec, alloc_json,      STORE_COL_TEXT_PTR, "",                alloc_json),
	COL(session_rec, type,            STORE_COL_TEXT,     "NOT NULL DEFAULT 'interactive'", type),
	COL(session_rec, oom_kills,       STORE_COL_INT64,    "NOT NULL DEFAULT 0", oom_kills),
	COL(session_rec, removed,         STORE_COL_BOOL,     "NOT NULL DEFAULT 0", removed),
	COL(session_rec, run_as_root,     STORE_COL_BOOL,     "NOT NULL DEFAULT 0", run_as_root),
	COL(session_rec, app_secret,      STORE_COL_TEXT,     "NOT NULL DEFAULT ''", app_secret),
	COL(session_rec, app_endpoint,    STORE_COL_TEXT,     "NOT NULL DEFAULT ''", app_endpoint),
	COL(session_rec, mounts_json,     STORE_COL_TEXT_PTR, "",                mounts_json),
	/* Added in schema version 5 (projects). */
	COL(session_rec, project_id,      STORE_COL_TEXT,     "NOT NULL DEFAULT ''", project_id),
	COL(session_rec, resource_group,  STORE_COL_TEXT,     "NOT NULL DEFAULT 'default'", resource_group),
	COL(session_rec, priority,        STORE_COL_INT64,    "NOT NULL DEFAULT 0", priority),
	COL(session_rec, preemptible,     STORE_COL_BOOL,     "NOT NULL DEFAULT 0", preemptible),
	COL(session_rec, preemptions,     STORE_COL_INT64,    "NOT NULL DEFAULT 0", preemptions),
	/* Added in schema version 6 (cluster sessions). */
	COL(session_rec, cluster_size,     STORE_COL_INT64,   "NOT NULL DEFAULT 1", cluster_size),
	COL(session_rec, cluster_mode,     STORE_COL_TEXT,    "NOT NULL DEFAULT 'single-node'", cluster_mode),
	COL(session_rec, cluster_role,     STORE_COL_TEXT,    "NOT NULL DEFAULT 'main'", cluster_role),
	COL(session_rec, cluster_idx,      STORE_COL_INT64,   "NOT NULL DEFAULT 1", cluster_idx),
	COL(session_rec, cluster_main,     STORE_COL_TEXT,    "NOT NULL DEFAULT ''", cluster_main),
	COL(session_rec, cluster_ssh_seed, STORE_COL_TEXT,    "NOT NULL DEFAULT ''", cluster_ssh_seed),
	/* Added in schema version 9 (the full launcher). */
	COL(session_rec, starts_at_ms,     STORE_COL_INT64,   "NOT NULL DEFAULT 0", starts_at_ms),
	COL(session_rec, batch_timeout_s,  STORE_COL_INT64,   "NOT NULL DEFAULT 0", batch_timeout_s),
	COL(session_rec, preopen_ports,    STORE_COL_TEXT,    "NOT NULL DEFAULT ''", preopen_ports),
};
TABLE(store_sessions_table, "sessions", NULL, session_rec, session_cols);

static const struct store_column history_cols[] = {
	COL(history_rec, status, STORE_COL_STATUS, "NOT NULL", status),
	COL(history_rec, info,   STORE_COL_TEXT,   "NOT NULL", info),
	COL(history_rec, at_ms,  STORE_COL_INT64,  "NOT NULL", at_ms),
};
TABLE(store_history_table, "session_history", "session_id", history_rec, history_cols);

static const struct store_column agent_cols[] = {
	COL(agent_rec, id,            STORE_COL_TEXT,  "PRIMARY KEY", id),
	COL(agent_rec, url,           STORE_COL_TEXT,  "NOT NULL",    url),
	COL(agent_rec, cpu_m,         STORE_COL_INT64, "NOT NULL",    capacity.cpu_m),
	COL(agent_rec, mem,           STORE_COL_INT64, "NOT NULL",    capacity.mem),
	COL(agent_rec, fgpu_m,        STORE_COL_INT64, "NOT NULL",    capacity.fgpu_m),
	COL(agent_rec, version,       STORE_COL_TEXT,  "NOT NULL",    version),
	COL(agent_rec, registered_ms, STORE_COL_INT64, "NOT NULL",    registered_ms),
	COL(agent_rec, last_seen_ms,  STORE_COL_INT64, "NOT NULL",    last_seen_ms),
};
TABLE(store_agents_table, "agents", NULL, agent_rec, agent_cols);

static const struct store_column folder_cols[] = {
	COL(folder_rec, id,          STORE_COL_TEXT,  "PRIMARY KEY",         id),
	COL(folder_rec, name,        STORE_COL_TEXT,  "NOT NULL",            name),
	COL(folder_rec, owner_id,    STORE_COL_TEXT,  "NOT NULL",            owner_id),
	COL(folder_rec, host,        STORE_COL_TEXT,  "NOT NULL",            host),
	COL(folder_rec, quota_bytes, STORE_COL_INT64, "NOT NULL DEFAULT 0",  quota_bytes),
	COL(folder_rec, created_ms,  STORE_COL_INT64, "NOT NULL",            created_ms),
	COL(folder_rec, trashed_ms,  STORE_COL_INT64, "NOT NULL DEFAULT 0",  trashed_ms),
	COL(folder_rec, shares,      STORE_COL_TEXT,  "NOT NULL DEFAULT '[]'", shares),
	/* Added in schema version 5. */
	COL(folder_rec, project_id,  STORE_COL_TEXT,  "NOT NULL DEFAULT ''",  project_id),
	COL(folder_rec, project_permission, STORE_COL_TEXT, "NOT NULL DEFAULT 'rw'", project_permission),
};
TABLE(store_folders_table, "folders", NULL, folder_rec, folder_cols);

/* Added in schema version 3 (migrate.c copies each user's key into it). */
static const struct store_column keypair_cols[] = {
	COL(keypair_rec, access_key, STORE_COL_TEXT,  "PRIMARY KEY",         access_key),
	COL(keypair_rec, user_id,    STORE_COL_TEXT,  "NOT NULL",            user_id),
	COL(keypair_rec, secret_key, STORE_COL_TEXT,  "NOT NULL",            secret_key),
	COL(keypair_rec, label,      STORE_COL_TEXT,  "NOT NULL DEFAULT ''", label),
	COL(keypair_rec, created_ms, STORE_COL_INT64, "NOT NULL",            created_ms),
};
TABLE(store_keypairs_table, "keypairs", NULL, keypair_rec, keypair_cols);

/* Added in schema version 4. */
static const struct store_column project_cols[] = {
	COL(project_rec, id,           STORE_COL_TEXT,  "PRIMARY KEY",         id),
	COL(project_rec, name,         STORE_COL_TEXT,  "NOT NULL UNIQUE",     name),
	COL(project_rec, description,  STORE_COL_TEXT,  "NOT NULL DEFAULT ''", description),
	COL(project_rec, personal,     STORE_COL_BOOL,  "NOT NULL DEFAULT 0",  personal),
	COL(project_rec, weight_milli, STORE_COL_INT64, "NOT NULL DEFAULT 1000", weight_milli),
	COL(project_rec, max_cpu_m,    STORE_COL_INT64, "NOT NULL DEFAULT 0",  max.cpu_m),
	COL(project_rec, max_mem,      STORE_COL_INT64, "NOT NULL DEFAULT 0",  max.mem),
	COL(project_rec, max_fgpu_m,   STORE_COL_INT64, "NOT NULL DEFAULT 0",  max.fgpu_m),
	COL(project_rec, max_sessions, STORE_COL_INT64, "NOT NULL DEFAULT 0",  max_sessions),
	COL(project_rec, groups,       STORE_COL_TEXT,  "NOT NULL DEFAULT ''", groups),
	COL(project_rec, created_ms,   STORE_COL_INT64, "NOT NULL",            created_ms),
};
TABLE(store_projects_table, "projects", NULL, project_rec, project_cols);

static const struct store_column member_cols[] = {
	COL(member_rec, id,           STORE_COL_TEXT,  "PRIMARY KEY",         id),
	COL(member_rec, project_id,   STORE_COL_TEXT,  "NOT NULL",            project_id),
	COL(member_rec, user_id,      STORE_COL_TEXT,  "NOT NULL",            user_id),
	COL(member_rec, role,         STORE_COL_TEXT,  "NOT NULL DEFAULT 'member'", role),
	COL(member_rec, weight_milli, STORE_COL_INT64, "NOT NULL DEFAULT 1000", weight_milli),
	COL(member_rec, created_ms,   STORE_COL_INT64, "NOT NULL",            created_ms),
};
TABLE(store_members_table, "project_members", NULL, member_rec, member_cols);

/* Added in schema version 8 (migrate.c makes the default ones). */
static const struct store_column preset_cols[] = {
	COL(preset_rec, name,           STORE_COL_TEXT,  "PRIMARY KEY",         name),
	COL(preset_rec, cpu_m,          STORE_COL_INT64, "NOT NULL",            res.cpu_m),
	COL(preset_rec, mem,            STORE_COL_INT64, "NOT NULL",            res.mem),
	COL(preset_rec, fgpu_m,         STORE_COL_INT64, "NOT NULL DEFAULT 0",  res.fgpu_m),
	COL(preset_rec, resource_group, STORE_COL_TEXT,  "NOT NULL DEFAULT ''", resource_group),
	COL(preset_rec, created_ms,     STORE_COL_INT64, "NOT NULL",            created_ms),
};
TABLE(store_presets_table, "presets", NULL, preset_rec, preset_cols);

/* Added in schema version 10. */
static const struct store_column log_tail_cols[] = {
	COL(log_tail_rec, session_id, STORE_COL_TEXT,     "PRIMARY KEY",        session_id),
	COL(log_tail_rec, text,       STORE_COL_TEXT_PTR, "",                   text),
	COL(log_tail_rec, saved_ms,   STORE_COL_INT64,    "NOT NULL",           saved_ms),
};
TABLE(store_log_tails_table, "session_logs", NULL, log_tail_rec, log_tail_cols);

const struct store_table *const store_tables[] = {
	&store_users_table, &store_sessions_table, &store_history_table, &store_agents_table,
	&store_folders_table, &store_keypairs_table, &store_projects_table, &store_members_table,
	&store_presets_table, &store_log_tails_table, NULL,
};

int store_tables_check(struct terr *err)
{
	for (const struct store_table *const *t = store_tables; *t; t++) {
		for (size_t i = 0; i < (*t)->ncols; i++) {
			const struct store_column *c = &(*t)->cols[i];
			size_t want = 0;
			switch (c->kind) {
			case STORE_COL_TEXT:
				/* An array, not a pointer: the record's text
				 * arrays are all longer than a pointer. */
				want = c->size > sizeof(char *) ? c->size : 0;
				break;
			case STORE_COL_TEXT_PTR: want = sizeof(char *); break;
			case STORE_COL_BOOL: want = sizeof(bool); break;
			case STORE_COL_INT64: want = sizeof(int64_t); break;
			case STORE_COL_STATUS: want = sizeof(enum session_status); break;
			case STORE_COL_INT_OPT: want = sizeof(int); break;
			}
			bool flag_ok = c->kind != STORE_COL_INT_OPT ||
				       c->flag_off + sizeof(bool) <= (*t)->rec_size;
			if (want != c->size || c->off + c->size > (*t)->rec_size || !flag_ok)
				return terr_set(err, EINVAL, "store table %s: column %s does not match its field",
						(*t)->name, c->name);
		}
	}
	return 0;
}
