/* PostgreSQL backend of struct store_ops, on libpq (docs/architecture.md,
 * "The store").
 *
 * Connections: a small pool. Connection 0, the leader, carries every
 * write and every transaction, and holds the advisory lock that makes
 * one manager the active one (lead): the lock and the writes share one
 * session, so when that session is lost the lock goes with it and no
 * write can be made without it. The readers (POOL_SIZE - 1) answer the
 * reads made outside a transaction, so that a long read (a session's
 * history) does not queue behind the leader; inside a transaction reads
 * go to the leader, to see what the transaction wrote. Each connection
 * has its mutex.
 *
 * Loss: a statement that fails because its connection is gone is tried
 * once more on a new connection (a server restarted meanwhile is then
 * not noticed at all) unless it was inside a transaction; when that
 * fails too, the store is DOWN: one line is logged, every op fails at
 * once with -EAGAIN and "the database is unavailable" (the API's 503),
 * and health() reconnects once a second. History rows written while down
 * outside a transaction are kept and written at reconnection; the
 * manager writes its sessions and agents again when it sees the epoch
 * grow (manager.c, store_resync). A leader that reconnects takes its
 * lock again; if another manager took it meanwhile the store is FENCED
 * and this manager stops. */
#include <libpq-fe.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "store/columns.h"
#include "store/migrate.h"
#include "store/sqlgen.h"
#include "store/store.h"

#define POOL_SIZE 3
/* Advisory lock keys, per database (PostgreSQL scopes them so): the
 * active manager's and the migrations': the bytes "tessera" then 1 or 2,
 * read as a big-endian 64-bit integer. */
#define LEADER_KEY "8387236820507844865"
#define MIGRATE_KEY "8387236820507844866"
#define RETRY_MS 1000
#define MAX_PARAMS 48
#define MAX_PENDING 10000
/* Writes inside a transaction are pipelined (libpq's pipeline mode: sent
 * without waiting for each answer; a scheduler pass writes thousands of
 * rows, and a round trip each bounded its rate); their results are read,
 * and the first error reported, at the latest after this many. */
#define PIPE_MAX 1024

/* One list of statements; the enum and the SQL derive from it. The SQL is
 * a template over a table of columns.h (sqlgen.h). Users are replaced
 * whole, as SQLite's INSERT OR REPLACE does: a row that collides on
 * another UNIQUE column (email, access key) goes first (USER_DEL_OTHERS),
 * then the upsert on the key. */
#define PG_STATEMENTS(X) \
	X(USER_DEL_OTHERS, NULL, "DELETE FROM users WHERE id<>? AND (email=? OR access_key=?)") \
	X(USER_PUT, &store_users_table, "INSERT INTO %T(%C) VALUES(%P) ON CONFLICT(id) DO UPDATE SET %U") \
	X(USER_ALL, &store_users_table, "SELECT %R FROM %T ORDER BY created_ms, id") \
	X(USER_DEL, NULL, "DELETE FROM users WHERE id=?") \
	X(USER_KEYS_DEL, NULL, "DELETE FROM keypairs WHERE user_id=?") \
	X(KEY_PUT, &store_keypairs_table, "INSERT INTO %T(%C) VALUES(%P) ON CONFLICT(access_key) DO UPDATE SET %U") \
	X(KEY_DEL, NULL, "DELETE FROM keypairs WHERE access_key=?") \
	X(KEY_ALL, &store_keypairs_table, "SELECT %R FROM %T ORDER BY created_ms, access_key") \
	X(SESSION_PUT, &store_sessions_table, "INSERT INTO %T(%C) VALUES(%P) ON CONFLICT(id) DO UPDATE SET %U") \
	X(SESSION_ALL, &store_sessions_table, "SELECT %R FROM %T ORDER BY seq") \
	X(SESSION_MAXSEQ, NULL, "SELECT COALESCE(MAX(seq),0) FROM sessions") \
	X(HISTORY_ADD, &store_history_table, "INSERT INTO %T(%C) VALUES(%P)") \
	X(HISTORY_GET, &store_history_table, "SELECT %R FROM %T WHERE session_id=? ORDER BY %O") \
	X(AGENT_PUT, &store_agents_table, "INSERT INTO %T(%C) VALUES(%P) ON CONFLICT(id) DO UPDATE SET %U") \
	X(AGENT_ALL, &store_agents_table, "SELECT %R FROM %T ORDER BY id") \
	X(FOLDER_PUT, &store_folders_table, "INSERT INTO %T(%C) VALUES(%P) ON CONFLICT(id) DO UPDATE SET %U") \
	X(FOLDER_DEL, NULL, "DELETE FROM folders WHERE id=?") \
	X(FOLDER_ALL, &store_folders_table, "SELECT %R FROM %T ORDER BY created_ms, id") \
	X(PROJECT_PUT, &store_projects_table, "INSERT INTO %T(%C) VALUES(%P) ON CONFLICT(id) DO UPDATE SET %U") \
	X(PROJECT_DEL, NULL, "DELETE FROM projects WHERE id=?") \
	X(PROJECT_MEMBERS_DEL, NULL, "DELETE FROM project_members WHERE project_id=?") \
	X(PROJECT_ALL, &store_projects_table, "SELECT %R FROM %T ORDER BY created_ms, id") \
	X(MEMBER_PUT, &store_members_table, "INSERT INTO %T(%C) VALUES(%P) ON CONFLICT(id) DO UPDATE SET %U") \
	X(MEMBER_DEL, NULL, "DELETE FROM project_members WHERE id=?") \
	X(MEMBER_ALL, &store_members_table, "SELECT %R FROM %T ORDER BY project_id, created_ms, id") \
	X(PRESET_PUT, &store_presets_table, "INSERT INTO %T(%C) VALUES(%P) ON CONFLICT(name) DO UPDATE SET %U") \
	X(PRESET_DEL, NULL, "DELETE FROM presets WHERE name=?") \
	X(PRESET_ALL, &store_presets_table, "SELECT %R FROM %T ORDER BY created_ms, name") \
	X(LOG_PUT, &store_log_tails_table, "INSERT INTO %T(%C) VALUES(%P) ON CONFLICT(session_id) DO UPDATE SET %U") \
	X(LOG_GET, &store_log_tails_table, "SELECT %R FROM %T WHERE session_id=?") \
	X(KV_GET, NULL, "SELECT value FROM settings WHERE key=?") \
	X(KV_SET, NULL, "INSERT INTO settings(key,value) VALUES(?,?) ON CONFLICT(key) DO UPDATE SET value=excluded.value")

#define STMT_ENUM(name, table, sql) ST_##name,
enum { PG_STATEMENTS(STMT_ENUM) ST__COUNT };
#undef STMT_ENUM

static const struct {
	const char *name;
	const struct store_table *table;
	const char *sql;
} stmt_def[] = {
#define STMT_DEF(name, table, sql) {#name, table, sql},
	PG_STATEMENTS(STMT_DEF)
#undef STMT_DEF
};

struct pgconn {
	pthread_mutex_t mu;
	PGconn *c;
	bool ready;  /* connected and its statements prepared */
};

struct pending_history {
	struct pending_history *next;
	char session_id[STORE_ID_MAX];
	struct history_rec h;
};

struct store {
	char uri[2048];
	char where[400];
	char *sql[ST__COUNT];
	struct pgconn conn[POOL_SIZE];
	_Atomic int state;          /* enum store_health */
	_Atomic uint64_t epoch;
	/* Under conn[0].mu: */
	bool leading;               /* holds LEADER_KEY (lead succeeded) */
	bool in_txn;
	bool piped;                 /* conn[0] in pipeline mode (in_txn) */
	int n_piped;                /* writes sent whose results are unread */
	struct pending_history *pend, **pend_tail;
	size_t n_pend;
	/* Under state_mu: */
	pthread_mutex_t state_mu;
	int64_t next_try_ms, next_ping_ms;
};

static const char *pg_where(struct store *s)
{
	return s->where;
}

/* "PostgreSQL at HOST:PORT/DB", read from the setting without connecting
 * (and without its password). */
static void describe(struct store *s)
{
	char *msg = NULL;
	PQconninfoOption *opts = PQconninfoParse(s->uri, &msg);
	const char *host = NULL, *port = NULL, *db = NULL, *hostaddr = NULL;
	for (PQconninfoOption *o = opts; o && o->keyword; o++) {
		if (!o->val || !*o->val)
			continue;
		if (!strcmp(o->keyword, "host"))
			host = o->val;
		else if (!strcmp(o->keyword, "hostaddr"))
			hostaddr = o->val;
		else if (!strcmp(o->keyword, "port"))
			port = o->val;
		else if (!strcmp(o->keyword, "dbname"))
			db = o->val;
	}
	snprintf(s->where, sizeof(s->where), "PostgreSQL at %s:%s/%s", host ? host : hostaddr ? hostaddr : "localhost",
		 port ? port : "5432", db ? db : "(default database)");
	PQconninfoFree(opts);
	PQfreemem(msg);
}

static int unavailable(struct store *s, struct terr *err)
{
	return terr_set(err, EAGAIN, "the database is unavailable (%s unreachable); try again when it is back",
			s->where);
}

/* The store is lost: one line when it was up. Returns -EAGAIN. */
static int went_down(struct store *s, const char *why, struct terr *err)
{
	int up = STORE_UP;
	if (atomic_compare_exchange_strong(&s->state, &up, STORE_DOWN)) {
		char line[300];
		util_strlcpy(line, why && *why ? why : "connection lost", sizeof(line));
		line[strcspn(line, "\n")] = '\0';
		log_warn("store", "%s unreachable: %s; retrying", s->where, line);
		pthread_mutex_lock(&s->state_mu);
		s->next_try_ms = util_now_ms() + RETRY_MS;
		pthread_mutex_unlock(&s->state_mu);
	}
	return unavailable(s, err);
}

/* Notices ("relation already exists, skipping") are not for the
 * manager's log. */
static void no_notices(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

static PGconn *connect_one(struct store *s)
{
	/* Keywords before dbname are defaults the URI may override. A
	 * server that vanishes without closing the connection (a host down,
	 * a network cut) is noticed by TCP keepalives and the user timeout in
	 * about ten seconds, instead of the kernel's minutes during which a
	 * write would hold the manager. */
	const char *const keys[] = {"connect_timeout", "application_name", "keepalives_idle", "keepalives_interval",
				    "keepalives_count", "tcp_user_timeout", "dbname", NULL};
	const char *const vals[] = {"3", "tessera", "5", "2", "3", "10000", s->uri, NULL};
	return PQconnectdbParams(keys, vals, 1);
}

/* libpq's messages span lines ("...refused\n\tIs the server running"):
 * one line, as every message of the project is. Returns rc. */
static int flat(struct terr *err, int rc)
{
	if (!err)
		return rc;
	char *w = err->msg;
	for (const char *r = err->msg; *r; r++) {
		char ch = *r == '\n' || *r == '\t' ? ' ' : *r;
		if (ch == ' ' && (w == err->msg || w[-1] == ' '))
			continue;
		*w++ = ch;
	}
	while (w > err->msg && w[-1] == ' ')
		w--;
	*w = '\0';
	return rc;
}

/* A statement on c without parameters; its result is discarded. 0, -EIO
 * (an SQL error) or -EAGAIN (the connection is gone). */
static int exec_on(struct store *s, PGconn *c, const char *sql, struct terr *err)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType es = PQresultStatus(r);
	int rc = 0;
	if (es != PGRES_COMMAND_OK && es != PGRES_TUPLES_OK && es != PGRES_EMPTY_QUERY) {
		if (PQstatus(c) == CONNECTION_BAD)
			rc = flat(err, terr_set(err, EAGAIN, "%s: %s", s->where, PQerrorMessage(c)));
		else
			rc = flat(err, terr_set(err, EIO, "%s: %s", s->where, PQresultErrorMessage(r)));
	}
	PQclear(r);
	return rc;
}

/* The first column of the first row of sql, as an integer or a boolean. */
static int query_int_on(struct store *s, PGconn *c, const char *sql, int64_t *out, struct terr *err)
{
	PGresult *r = PQexec(c, sql);
	int rc = 0;
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = flat(err, terr_set(err, PQstatus(c) == CONNECTION_BAD ? EAGAIN : EIO, "%s: %s", s->where,
			      PQresultErrorMessage(r)));
	} else if (PQntuples(r) == 0 || PQgetisnull(r, 0, 0)) {
		*out = 0;
	} else {
		const char *v = PQgetvalue(r, 0, 0);
		*out = !strcmp(v, "t") ? 1 : !strcmp(v, "f") ? 0 : strtoll(v, NULL, 10);
	}
	PQclear(r);
	return rc;
}

static int write_pending(struct store *s, struct terr *err);


/* (Re)connects pc: a new session, its statements prepared; the leader
 * takes its lock again when it held it, and writes the history kept
 * while down. Called with pc->mu held. */
static int conn_up(struct store *s, struct pgconn *pc, struct terr *err)
{
	if (pc->c)
		PQfinish(pc->c);
	pc->ready = false;
	pc->c = connect_one(s);
	if (!pc->c)
		return terr_set(err, ENOMEM, "out of memory");
	if (PQstatus(pc->c) != CONNECTION_OK)
		return flat(err, terr_set(err, EAGAIN, "%s", PQerrorMessage(pc->c)));
	PQsetNoticeProcessor(pc->c, no_notices, NULL);
	for (int i = 0; i < ST__COUNT; i++) {
		PGresult *r = PQprepare(pc->c, stmt_def[i].name, s->sql[i], 0, NULL);
		bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
		if (!ok)
			flat(err, terr_set(err, PQstatus(pc->c) == CONNECTION_BAD ? EAGAIN : EIO, "%s: prepare %s: %s", s->where,
				 stmt_def[i].name, PQresultErrorMessage(r)));
		PQclear(r);
		if (!ok)
			return -err->code;
	}
	if (pc == &s->conn[0]) {
		s->in_txn = false;
		s->piped = false;
		s->n_piped = 0;
		if (s->leading) {
			int64_t got = 0;
			int rc = query_int_on(s, pc->c, "SELECT pg_try_advisory_lock(" LEADER_KEY ")", &got, err);
			if (rc < 0)
				return rc;
			if (!got) {
				atomic_store(&s->state, STORE_FENCED);
				log_error("store", "%s: another manager became the active one while the database was "
					  "unreachable; this one must stop", s->where);
				return terr_set(err, EAGAIN, "the database is held by another manager: this one is stopping");
			}
		}
		int rc = write_pending(s, err);
		if (rc < 0)
			return rc;
		atomic_fetch_add(&s->epoch, 1);
	}
	pc->ready = true;
	return 0;
}

static bool is_up(struct store *s)
{
	return atomic_load(&s->state) == STORE_UP;
}

/* Reads the results of the pipelined writes (after a sync point, which
 * inside BEGIN ... COMMIT commits nothing) and leaves pipeline mode, so
 * that conn[0] takes ordinary calls again (conn[0].mu held). 0, or the
 * first write's error: -EIO (SQL: the transaction is then aborted, which
 * the caller's rollback ends), -EAGAIN (the connection is gone). */
static int pipe_finish(struct store *s, struct terr *err)
{
	struct pgconn *l = &s->conn[0];
	if (!s->piped)
		return 0;
	int rc = 0;
	if (PQpipelineSync(l->c) != 1) {
		rc = flat(err, terr_set(err, EAGAIN, "%s: %s", s->where, PQerrorMessage(l->c)));
	} else {
		for (;;) {
			PGresult *r = PQgetResult(l->c);
			if (!r) {
				/* Between two statements' results. */
				if (PQstatus(l->c) == CONNECTION_BAD) {
					if (rc == 0 || err->code != EAGAIN)
						rc = flat(err, terr_set(err, EAGAIN, "%s: %s", s->where, PQerrorMessage(l->c)));
					break;
				}
				continue;
			}
			ExecStatusType es = PQresultStatus(r);
			if (es == PGRES_PIPELINE_SYNC) {
				PQclear(r);
				break;
			}
			if (es != PGRES_COMMAND_OK && es != PGRES_TUPLES_OK && es != PGRES_PIPELINE_ABORTED && rc == 0)
				rc = flat(err, terr_set(err, PQstatus(l->c) == CONNECTION_BAD ? EAGAIN : EIO, "%s: %s",
							s->where, PQresultErrorMessage(r)));
			PQclear(r);
			if (PQstatus(l->c) == CONNECTION_BAD) {
				if (rc == 0)
					rc = flat(err, terr_set(err, EAGAIN, "%s: %s", s->where, PQerrorMessage(l->c)));
				break;
			}
		}
	}
	if (PQstatus(l->c) != CONNECTION_BAD)
		PQexitPipelineMode(l->c);
	s->piped = false;
	s->n_piped = 0;
	return rc;
}

/* Runs statement st with vals on pc (pc->mu held), trying once more on a
 * new connection when the old one is gone and no transaction was open on
 * it. *out: the result, the caller PQclear()s it. */
static int run(struct store *s, struct pgconn *pc, int st, const char *const *vals, int nvals, PGresult **out,
	       struct terr *err)
{
	if (!is_up(s))
		return unavailable(s, err);
	if (pc == &s->conn[0] && s->piped) {
		/* A read or an unpipelined write after pipelined ones: their
		 * results first (read your writes, errors in order). */
		int rc = pipe_finish(s, err);
		if (rc == -EAGAIN) {
			pc->ready = false;
			s->in_txn = false;
			return went_down(s, err->msg, err);
		}
		if (rc < 0)
			return rc;
	}
	for (int attempt = 0;; attempt++) {
		if (!pc->ready) {
			struct terr e = {0};
			int rc = conn_up(s, pc, &e);
			if (rc < 0) {
				if (!is_up(s) || rc == -EAGAIN)
					return atomic_load(&s->state) == STORE_FENCED ? terr_set(err, EAGAIN, "%s", e.msg)
										       : went_down(s, e.msg, err);
				*err = e;
				return rc;
			}
		}
		PGresult *r = PQexecPrepared(pc->c, stmt_def[st].name, nvals, vals, NULL, NULL, 0);
		ExecStatusType es = PQresultStatus(r);
		if (es == PGRES_COMMAND_OK || es == PGRES_TUPLES_OK) {
			*out = r;
			return 0;
		}
		if (PQstatus(pc->c) != CONNECTION_BAD) {
			int rc = flat(err, terr_set(err, EIO, "%s: %s", s->where, PQresultErrorMessage(r)));
			PQclear(r);
			return rc;
		}
		char why[300];
		util_strlcpy(why, PQerrorMessage(pc->c), sizeof(why));
		PQclear(r);
		pc->ready = false;
		bool in_txn = pc == &s->conn[0] && s->in_txn;
		if (attempt > 0 || in_txn) {
			if (in_txn)
				s->in_txn = false;
			return went_down(s, why, err);
		}
	}
}

/* A reader for a read outside a transaction: the first free one, else
 * the first. Returned locked. */
static struct pgconn *reader(struct store *s)
{
	for (int i = 1; i < POOL_SIZE; i++)
		if (pthread_mutex_trylock(&s->conn[i].mu) == 0)
			return &s->conn[i];
	pthread_mutex_lock(&s->conn[1].mu);
	return &s->conn[1];
}

/* The connection for a read: the leader inside a transaction (read your
 * writes), else a reader. Returned locked. */
static struct pgconn *read_conn(struct store *s)
{
	struct pgconn *l = &s->conn[0];
	pthread_mutex_lock(&l->mu);
	if (s->in_txn)
		return l;
	pthread_mutex_unlock(&l->mu);
	return reader(s);
}

/* ---------- records <-> parameters and rows ---------- */

struct params {
	const char *v[MAX_PARAMS];
	char num[MAX_PARAMS][24];
	int n;
};

static void param_text(struct params *p, const char *v)
{
	p->v[p->n++] = v;
}

static void param_int(struct params *p, long long v)
{
	snprintf(p->num[p->n], sizeof(p->num[0]), "%lld", v);
	p->v[p->n] = p->num[p->n];
	p->n++;
}

/* The parent's id (when the table has one) and every column of rec, in
 * the order of %C. The texts are borrowed from rec. */
static void bind_record(struct params *p, const struct store_table *t, const char *parent, const void *rec)
{
	p->n = 0;
	if (t->parent)
		param_text(p, parent);
	for (size_t k = 0; k < t->ncols; k++) {
		const struct store_column *c = &t->cols[k];
		const void *f = store_cfield(rec, c);
		switch (c->kind) {
		case STORE_COL_TEXT:
			param_text(p, f);
			break;
		case STORE_COL_TEXT_PTR:
			param_text(p, *(char *const *)f);
			break;
		case STORE_COL_BOOL:
			param_int(p, *(const bool *)f);
			break;
		case STORE_COL_INT64:
			param_int(p, *(const int64_t *)f);
			break;
		case STORE_COL_STATUS:
			param_text(p, session_status_name(*(const enum session_status *)f));
			break;
		case STORE_COL_INT_OPT:
			if (*(const bool *)((const char *)rec + c->flag_off))
				param_int(p, *(const int *)f);
			else
				param_text(p, NULL);
			break;
		}
	}
}

/* Fills rec (zeroed by the caller) from row i of a %R select. TEXT_PTR
 * fields are malloc'd: the caller frees them, also on -ENOMEM. */
static int read_record(PGresult *r, int row, const struct store_table *t, void *rec)
{
	for (size_t k = 0; k < t->ncols; k++) {
		const struct store_column *c = &t->cols[k];
		void *f = store_field(rec, c);
		int i = (int)k;
		bool null = PQgetisnull(r, row, i);
		const char *v = null ? "" : PQgetvalue(r, row, i);
		switch (c->kind) {
		case STORE_COL_TEXT:
			util_strlcpy(f, v, c->size);
			break;
		case STORE_COL_TEXT_PTR:
			*(char **)f = null ? NULL : strdup(v);
			if (!null && !*(char **)f)
				return -ENOMEM;
			break;
		case STORE_COL_BOOL:
			*(bool *)f = strtoll(v, NULL, 10) != 0;
			break;
		case STORE_COL_INT64:
			*(int64_t *)f = strtoll(v, NULL, 10);
			break;
		case STORE_COL_STATUS: {
			int sv = session_status_parse(v);
			/* A name this version does not know: the session shows
			 * as failed instead of being dropped. */
			*(enum session_status *)f = sv < 0 ? SS_ERROR : (enum session_status)sv;
			break;
		}
		case STORE_COL_INT_OPT:
			*(bool *)((char *)rec + c->flag_off) = !null;
			*(int *)f = (int)strtol(v, NULL, 10);
			break;
		}
	}
	return 0;
}

/* ---------- open, close ---------- */

static void pg_close(struct store *s)
{
	if (!s)
		return;
	for (int i = 0; i < POOL_SIZE; i++) {
		/* Closing the leader's session releases its advisory lock. */
		if (s->conn[i].c)
			PQfinish(s->conn[i].c);
		pthread_mutex_destroy(&s->conn[i].mu);
	}
	for (int i = 0; i < ST__COUNT; i++)
		free(s->sql[i]);
	while (s->pend) {
		struct pending_history *p = s->pend;
		s->pend = p->next;
		free(p);
	}
	pthread_mutex_destroy(&s->state_mu);
	free(s);
}

struct mig_ctx {
	struct store *s;
	PGconn *c;
};

static int mig_exec(void *ctx, const char *sql, struct terr *err)
{
	struct mig_ctx *m = ctx;
	return exec_on(m->s, m->c, sql, err);
}

static int mig_query_int(void *ctx, const char *sql, int64_t *out, struct terr *err)
{
	struct mig_ctx *m = ctx;
	return query_int_on(m->s, m->c, sql, out, err);
}

/* The migrations, under an advisory lock of their own so that managers
 * starting together migrate one after the other (the second finds
 * nothing to do). The lock is a session lock: released here, or by the
 * server if this process dies meanwhile. */
static int migrate(struct store *s, PGconn *c, struct terr *err)
{
	int rc = exec_on(s, c, "SELECT pg_advisory_lock(" MIGRATE_KEY ")", err);
	if (rc < 0)
		return rc;
	struct mig_ctx m = {s, c};
	struct store_mig_conn mc = {.ctx = &m, .d = &store_dialect_postgresql, .exec = mig_exec,
				    .query_int = mig_query_int};
	int from = 0;
	rc = store_migrate(&mc, &from, err);
	struct terr ignored = {0};
	exec_on(s, c, "SELECT pg_advisory_unlock(" MIGRATE_KEY ")", &ignored);
	if (rc == 0 && from != store_schema_latest())
		log_info("store", "%s: schema migrated from version %d to %d", s->where, from, store_schema_latest());
	return rc;
}

static int pg_open(struct store **out, const char *uri, struct terr *err)
{
	if (strlen(uri) >= sizeof(((struct store *)0)->uri))
		return terr_set(err, ENAMETOOLONG, "the store setting is too long");
	char *msg = NULL;
	PQconninfoOption *check = PQconninfoParse(uri, &msg);
	if (!check) {
		/* Not echoed: it may hold a password. */
		int rc = terr_set(err, EINVAL, "the store setting is not a PostgreSQL connection URI: %s",
				  msg ? msg : "out of memory");
		PQfreemem(msg);
		return rc;
	}
	PQconninfoFree(check);
	/* struct params holds MAX_PARAMS values: a table that outgrew it is
	 * refused here, not overrun at its first write. */
	for (const struct store_table *const *t = store_tables; *t; t++)
		if ((*t)->ncols + 1 > MAX_PARAMS)
			return terr_set(err, EINVAL, "table %s has more than %d columns: raise MAX_PARAMS", (*t)->name,
					MAX_PARAMS - 1);
	struct store *s = calloc(1, sizeof(*s));
	if (!s)
		return terr_set(err, ENOMEM, "out of memory");
	util_strlcpy(s->uri, uri, sizeof(s->uri));
	describe(s);
	pthread_mutex_init(&s->state_mu, NULL);
	for (int i = 0; i < POOL_SIZE; i++)
		pthread_mutex_init(&s->conn[i].mu, NULL);
	s->pend_tail = &s->pend;
	atomic_store(&s->state, STORE_UP);
	for (int i = 0; i < ST__COUNT; i++) {
		if (!(s->sql[i] = store_sql_expand(&store_dialect_postgresql, stmt_def[i].table, stmt_def[i].sql))) {
			pg_close(s);
			return terr_set(err, ENOMEM, "out of memory");
		}
	}
	/* The schema first, on a session of its own: the statements are
	 * prepared against the migrated tables. */
	PGconn *c = connect_one(s);
	int rc = 0;
	if (!c)
		rc = terr_set(err, ENOMEM, "out of memory");
	else if (PQstatus(c) != CONNECTION_OK)
		rc = flat(err, terr_set(err, ECONNREFUSED, "cannot connect to %s: %s", s->where, PQerrorMessage(c)));
	else {
		PQsetNoticeProcessor(c, no_notices, NULL);
		rc = migrate(s, c, err);
	}
	if (c)
		PQfinish(c);
	for (int i = 0; rc == 0 && i < POOL_SIZE; i++) {
		if ((rc = conn_up(s, &s->conn[i], err)) < 0)
			terr_prefix(err, "cannot connect to %s", s->where);
	}
	if (rc < 0) {
		pg_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

/* ---------- leadership and health ---------- */

static int pg_lead(struct store *s, store_wait_fn wait, void *ud, struct terr *err)
{
	bool said_standby = false, said_down = false;
	struct pgconn *l = &s->conn[0];
	for (;;) {
		struct terr e = {0};
		int64_t got = 0;
		pthread_mutex_lock(&l->mu);
		int rc = l->ready ? 0 : conn_up(s, l, &e);
		if (rc == 0)
			rc = query_int_on(s, l->c, "SELECT pg_try_advisory_lock(" LEADER_KEY ")", &got, &e);
		if (rc == -EAGAIN)
			l->ready = false;
		if (got)
			s->leading = true;
		pthread_mutex_unlock(&l->mu);
		if (got) {
			atomic_store(&s->state, STORE_UP);
			if (said_standby)
				log_info("store", "%s: the active manager is gone; this one is active now", s->where);
			return 0;
		}
		if (rc < 0 && rc != -EAGAIN)
			return terr_set(err, -rc, "%s", e.msg);
		if (rc < 0 && !said_down) {
			log_warn("store", "%s unreachable: %s; retrying", s->where, e.msg);
			said_down = true;
		} else if (rc == 0 && !said_standby) {
			if (!wait)
				return terr_set(err, EBUSY, "another manager is active on %s", s->where);
			log_info("store", "another manager is active on %s: this one waits as a standby and takes "
				 "over when it stops", s->where);
			said_standby = true;
		}
		if (!wait)
			return terr_set(err, EAGAIN, "%s unreachable: %s", s->where, e.msg);
		if (wait(ud, rc == 0 ? s->where : NULL))
			return terr_set(err, ECANCELED, "stopped while waiting as a standby");
	}
}

static enum store_health pg_health(struct store *s, bool reconnect, uint64_t *epoch)
{
	int state = atomic_load(&s->state);
	if (state != STORE_FENCED && reconnect) {
		int64_t now = util_now_ms();
		pthread_mutex_lock(&s->state_mu);
		bool due = state == STORE_DOWN ? now >= s->next_try_ms : now >= s->next_ping_ms;
		if (due) {
			s->next_try_ms = now + RETRY_MS;
			s->next_ping_ms = now + RETRY_MS;
		}
		pthread_mutex_unlock(&s->state_mu);
		struct pgconn *l = &s->conn[0];
		if (due && state == STORE_DOWN) {
			struct terr e = {0};
			pthread_mutex_lock(&l->mu);
			int rc = conn_up(s, l, &e);
			pthread_mutex_unlock(&l->mu);
			if (rc == 0) {
				/* The readers reconnect when next used. */
				for (int i = 1; i < POOL_SIZE; i++) {
					pthread_mutex_lock(&s->conn[i].mu);
					s->conn[i].ready = false;
					pthread_mutex_unlock(&s->conn[i].mu);
				}
				int down = STORE_DOWN;
				if (atomic_compare_exchange_strong(&s->state, &down, STORE_UP))
					log_info("store", "%s reconnected", s->where);
			}
		} else if (due && state == STORE_UP && pthread_mutex_trylock(&l->mu) == 0) {
			/* A connection that is idle learns of a server's restart
			 * only when used: the check says so within a second. */
			struct terr e = {0};
			if (l->ready && !s->in_txn && exec_on(s, l->c, "", &e) == -EAGAIN) {
				l->ready = false;
				went_down(s, e.msg, &e);
			}
			pthread_mutex_unlock(&l->mu);
		}
	}
	if (epoch)
		*epoch = atomic_load(&s->epoch);
	return (enum store_health)atomic_load(&s->state);
}

/* ---------- transactions ---------- */

static int pg_begin(struct store *s, struct terr *err)
{
	struct pgconn *l = &s->conn[0];
	pthread_mutex_lock(&l->mu);
	int rc;
	if (!is_up(s))
		rc = unavailable(s, err);
	else if (s->in_txn)
		rc = terr_set(err, EBUSY, "a transaction is already open");
	else {
		if (!l->ready && (rc = conn_up(s, l, err)) < 0) {
			pthread_mutex_unlock(&l->mu);
			return rc == -EAGAIN ? went_down(s, err->msg, err) : rc;
		}
		rc = exec_on(s, l->c, "BEGIN", err);
		if (rc == -EAGAIN) {
			/* Gone since its last use: once more on a new one. */
			l->ready = false;
			struct terr e = {0};
			rc = conn_up(s, l, &e);
			if (rc == 0)
				rc = exec_on(s, l->c, "BEGIN", err);
			if (rc == -EAGAIN) {
				l->ready = false;
				rc = went_down(s, e.msg[0] ? e.msg : err->msg, err);
			} else if (rc < 0) {
				*err = e;
			}
		}
		if (rc == 0)
			s->in_txn = true;
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

static int pg_commit(struct store *s, struct terr *err)
{
	struct pgconn *l = &s->conn[0];
	pthread_mutex_lock(&l->mu);
	int rc;
	if (!s->in_txn)
		rc = is_up(s) ? terr_set(err, EINVAL, "no transaction is open") : unavailable(s, err);
	else {
		s->in_txn = false;
		rc = pipe_finish(s, err);
		if (rc == -EIO) {
			/* A pipelined write failed: the transaction is aborted. */
			struct terr ignored = {0};
			if (exec_on(s, l->c, "ROLLBACK", &ignored) == -EAGAIN)
				l->ready = false;
		} else if (rc == 0) {
			rc = exec_on(s, l->c, "COMMIT", err);
		}
		if (rc == -EAGAIN) {
			l->ready = false;
			rc = went_down(s, err->msg, err);
		}
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

static void pg_rollback(struct store *s)
{
	struct pgconn *l = &s->conn[0];
	pthread_mutex_lock(&l->mu);
	if (s->in_txn) {
		s->in_txn = false;
		struct terr e = {0};
		if (pipe_finish(s, &e) == -EAGAIN)
			l->ready = false;
		if (l->ready && exec_on(s, l->c, "ROLLBACK", &e) == -EAGAIN)
			l->ready = false;
	}
	pthread_mutex_unlock(&l->mu);
}

/* ---------- writes (the leader) ---------- */

/* A write inside a transaction, pipelined (PIPE_MAX; conn[0].mu held,
 * in_txn, the connection ready). Its error, if any, comes at the next
 * pipe_finish: from a later write, a read, or the commit. */
static int pipe_write(struct store *s, int st, const struct params *p, struct terr *err)
{
	struct pgconn *l = &s->conn[0];
	if (!is_up(s))
		return unavailable(s, err);
	if (!s->piped) {
		if (PQenterPipelineMode(l->c) != 1)
			return flat(err, terr_set(err, EIO, "%s: cannot pipeline: %s", s->where, PQerrorMessage(l->c)));
		s->piped = true;
	}
	if (PQsendQueryPrepared(l->c, stmt_def[st].name, p->n, p->v, NULL, NULL, 0) != 1) {
		char why[300];
		util_strlcpy(why, PQerrorMessage(l->c), sizeof(why));
		bool bad = PQstatus(l->c) == CONNECTION_BAD;
		struct terr ignored = {0};
		pipe_finish(s, &ignored);
		if (!bad)
			return flat(err, terr_set(err, EIO, "%s: %s", s->where, why));
		l->ready = false;
		s->in_txn = false;
		return went_down(s, why, err);
	}
	if (++s->n_piped < PIPE_MAX)
		return 0;
	int rc = pipe_finish(s, err);
	if (rc == -EAGAIN) {
		l->ready = false;
		s->in_txn = false;
		return went_down(s, err->msg, err);
	}
	return rc;
}

static int write_stmt(struct store *s, int st, const struct params *p, struct terr *err)
{
	struct pgconn *l = &s->conn[0];
	pthread_mutex_lock(&l->mu);
	int rc;
	if (s->in_txn && l->ready) {
		rc = pipe_write(s, st, p, err);
	} else {
		PGresult *r = NULL;
		rc = run(s, l, st, p->v, p->n, &r, err);
		PQclear(r);
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

static int pg_user_put(struct store *s, const struct user_rec *u, struct terr *err)
{
	struct params p = {0};
	struct pgconn *l = &s->conn[0];
	/* Both statements or neither: a transaction of its own unless the
	 * caller's is open. */
	pthread_mutex_lock(&l->mu);
	bool own = !s->in_txn;
	pthread_mutex_unlock(&l->mu);
	int rc = own ? pg_begin(s, err) : 0;
	if (rc < 0)
		return rc;
	param_text(&p, u->id);
	param_text(&p, u->email);
	param_text(&p, u->access_key);
	rc = write_stmt(s, ST_USER_DEL_OTHERS, &p, err);
	if (rc == 0) {
		bind_record(&p, &store_users_table, NULL, u);
		rc = write_stmt(s, ST_USER_PUT, &p, err);
	}
	if (own) {
		if (rc == 0)
			rc = pg_commit(s, err);
		else
			pg_rollback(s);
	}
	return rc;
}

/* Runs the deletions first and then by id in one transaction (the
 * caller's, or its own): a row and the rows that belong to it. */
static int delete_with(struct store *s, int first, int then, const char *id, struct terr *err)
{
	struct params p = {0};
	struct pgconn *l = &s->conn[0];
	pthread_mutex_lock(&l->mu);
	bool own = !s->in_txn;
	pthread_mutex_unlock(&l->mu);
	int rc = own ? pg_begin(s, err) : 0;
	if (rc < 0)
		return rc;
	param_text(&p, id);
	rc = write_stmt(s, first, &p, err);
	if (rc == 0)
		rc = write_stmt(s, then, &p, err);
	if (own) {
		if (rc == 0)
			rc = pg_commit(s, err);
		else
			pg_rollback(s);
	}
	return rc;
}

static int pg_user_delete(struct store *s, const char *id, struct terr *err)
{
	return delete_with(s, ST_USER_KEYS_DEL, ST_USER_DEL, id, err);
}

static int pg_keypair_put(struct store *s, const struct keypair_rec *k, struct terr *err)
{
	struct params p;
	bind_record(&p, &store_keypairs_table, NULL, k);
	return write_stmt(s, ST_KEY_PUT, &p, err);
}

static int pg_keypair_delete(struct store *s, const char *access_key, struct terr *err)
{
	struct params p = {0};
	param_text(&p, access_key);
	return write_stmt(s, ST_KEY_DEL, &p, err);
}

static int pg_session_put(struct store *s, const struct session_rec *r, struct terr *err)
{
	struct params p;
	bind_record(&p, &store_sessions_table, NULL, r);
	return write_stmt(s, ST_SESSION_PUT, &p, err);
}

static int pg_agent_put(struct store *s, const struct agent_rec *a, struct terr *err)
{
	struct params p;
	bind_record(&p, &store_agents_table, NULL, a);
	return write_stmt(s, ST_AGENT_PUT, &p, err);
}

static int pg_folder_put(struct store *s, const struct folder_rec *f, struct terr *err)
{
	struct params p;
	bind_record(&p, &store_folders_table, NULL, f);
	return write_stmt(s, ST_FOLDER_PUT, &p, err);
}

static int pg_folder_delete(struct store *s, const char *id, struct terr *err)
{
	struct params p = {0};
	param_text(&p, id);
	return write_stmt(s, ST_FOLDER_DEL, &p, err);
}

static int pg_project_put(struct store *s, const struct project_rec *pr, struct terr *err)
{
	struct params p;
	bind_record(&p, &store_projects_table, NULL, pr);
	return write_stmt(s, ST_PROJECT_PUT, &p, err);
}

static int pg_project_delete(struct store *s, const char *id, struct terr *err)
{
	return delete_with(s, ST_PROJECT_MEMBERS_DEL, ST_PROJECT_DEL, id, err);
}

static int pg_preset_put(struct store *s, const struct preset_rec *pr, struct terr *err)
{
	struct params p;
	bind_record(&p, &store_presets_table, NULL, pr);
	return write_stmt(s, ST_PRESET_PUT, &p, err);
}

static int pg_preset_delete(struct store *s, const char *name, struct terr *err)
{
	struct params p = {0};
	param_text(&p, name);
	return write_stmt(s, ST_PRESET_DEL, &p, err);
}

static int pg_member_put(struct store *s, const struct member_rec *m, struct terr *err)
{
	struct params p;
	bind_record(&p, &store_members_table, NULL, m);
	return write_stmt(s, ST_MEMBER_PUT, &p, err);
}

static int pg_member_delete(struct store *s, const char *id, struct terr *err)
{
	struct params p = {0};
	param_text(&p, id);
	return write_stmt(s, ST_MEMBER_DEL, &p, err);
}

static int pg_kv_set(struct store *s, const char *key, const char *value, struct terr *err)
{
	struct params p = {0};
	param_text(&p, key);
	param_text(&p, value);
	return write_stmt(s, ST_KV_SET, &p, err);
}

/* Writes the history rows kept while the database was unreachable, in
 * their order, in one transaction (conn[0].mu held, connection fresh). */
static int write_pending(struct store *s, struct terr *err)
{
	if (!s->pend)
		return 0;
	struct pgconn *l = &s->conn[0];
	int rc = exec_on(s, l->c, "BEGIN", err);
	for (struct pending_history *p = s->pend; rc == 0 && p; p = p->next) {
		struct params pr;
		bind_record(&pr, &store_history_table, p->session_id, &p->h);
		PGresult *r = PQexecPrepared(l->c, stmt_def[ST_HISTORY_ADD].name, pr.n, pr.v, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			rc = flat(err, terr_set(err, PQstatus(l->c) == CONNECTION_BAD ? EAGAIN : EIO, "%s: %s", s->where,
				      PQresultErrorMessage(r)));
		PQclear(r);
	}
	if (rc == 0)
		rc = exec_on(s, l->c, "COMMIT", err);
	if (rc < 0) {
		struct terr ignored = {0};
		exec_on(s, l->c, "ROLLBACK", &ignored);
		return rc;
	}
	log_info("store", "%s: wrote %zu history records kept while it was unreachable", s->where, s->n_pend);
	while (s->pend) {
		struct pending_history *p = s->pend;
		s->pend = p->next;
		free(p);
	}
	s->pend_tail = &s->pend;
	s->n_pend = 0;
	return 0;
}

static int pg_history_add(struct store *s, const char *session_id, const struct history_rec *h,
			  struct terr *err)
{
	struct params p;
	bind_record(&p, &store_history_table, session_id, h);
	struct pgconn *l = &s->conn[0];
	pthread_mutex_lock(&l->mu);
	PGresult *r = NULL;
	bool in_txn = s->in_txn;
	int rc;
	if (in_txn && l->ready) {
		rc = pipe_write(s, ST_HISTORY_ADD, &p, err);
	} else {
		rc = run(s, l, ST_HISTORY_ADD, p.v, p.n, &r, err);
		PQclear(r);
	}
	/* Outside a transaction a history line is a fact that already
	 * happened (a status change in memory): kept for the reconnection.
	 * Inside one it belongs to what the caller rolls back. */
	if (rc == -EAGAIN && !in_txn && s->n_pend < MAX_PENDING && atomic_load(&s->state) == STORE_DOWN) {
		struct pending_history *ph = calloc(1, sizeof(*ph));
		if (ph) {
			util_strlcpy(ph->session_id, session_id, sizeof(ph->session_id));
			ph->h = *h;
			*s->pend_tail = ph;
			s->pend_tail = &ph->next;
			s->n_pend++;
			terr_set(err, EAGAIN, "%s unreachable: kept to be written at reconnection", s->where);
		}
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

/* ---------- reads ---------- */

/* Runs a read statement and hands each row to row_cb. */
static int read_rows(struct store *s, int st, const struct params *p, int (*row_cb)(void *, PGresult *, int),
		     void *ud, const char *what, struct terr *err)
{
	struct pgconn *c = read_conn(s);
	PGresult *r = NULL;
	int rc = run(s, c, st, p ? p->v : NULL, p ? p->n : 0, &r, err);
	pthread_mutex_unlock(&c->mu);
	if (rc < 0)
		return rc;
	int n = PQntuples(r);
	for (int i = 0; i < n && rc == 0; i++) {
		int cr = row_cb(ud, r, i);
		if (cr < 0)
			rc = terr_set(err, -cr, "loading %s failed", what);
	}
	PQclear(r);
	return rc;
}

struct load_ctx {
	void *cb;
	void *ud;
};

static int user_row(void *ud, PGresult *r, int i)
{
	struct load_ctx *l = ud;
	struct user_rec u = {0};
	int rc = read_record(r, i, &store_users_table, &u);
	return rc < 0 ? rc : ((store_user_cb)l->cb)(l->ud, &u);
}

static int pg_user_load_all(struct store *s, store_user_cb cb, void *ud, struct terr *err)
{
	struct load_ctx l = {(void *)cb, ud};
	return read_rows(s, ST_USER_ALL, NULL, user_row, &l, "users", err);
}

static int keypair_row(void *ud, PGresult *r, int i)
{
	struct load_ctx *l = ud;
	struct keypair_rec k = {0};
	int rc = read_record(r, i, &store_keypairs_table, &k);
	return rc < 0 ? rc : ((store_keypair_cb)l->cb)(l->ud, &k);
}

static int pg_keypair_load_all(struct store *s, store_keypair_cb cb, void *ud, struct terr *err)
{
	struct load_ctx l = {(void *)cb, ud};
	return read_rows(s, ST_KEY_ALL, NULL, keypair_row, &l, "keys", err);
}

static int session_row(void *ud, PGresult *r, int i)
{
	struct load_ctx *l = ud;
	struct session_rec rec = {0};
	int rc = read_record(r, i, &store_sessions_table, &rec);
	if (rc == 0)
		rc = ((store_session_cb)l->cb)(l->ud, &rec);
	session_rec_clear(&rec);
	return rc;
}

static int pg_session_load_all(struct store *s, store_session_cb cb, void *ud, struct terr *err)
{
	struct load_ctx l = {(void *)cb, ud};
	return read_rows(s, ST_SESSION_ALL, NULL, session_row, &l, "sessions", err);
}

static int agent_row(void *ud, PGresult *r, int i)
{
	struct load_ctx *l = ud;
	struct agent_rec a = {0};
	int rc = read_record(r, i, &store_agents_table, &a);
	return rc < 0 ? rc : ((store_agent_cb)l->cb)(l->ud, &a);
}

static int pg_agent_load_all(struct store *s, store_agent_cb cb, void *ud, struct terr *err)
{
	struct load_ctx l = {(void *)cb, ud};
	return read_rows(s, ST_AGENT_ALL, NULL, agent_row, &l, "agents", err);
}

static int folder_row(void *ud, PGresult *r, int i)
{
	struct load_ctx *l = ud;
	struct folder_rec f = {0};
	int rc = read_record(r, i, &store_folders_table, &f);
	return rc < 0 ? rc : ((store_folder_cb)l->cb)(l->ud, &f);
}

/* Rows of the tables whose records own no strings: each read into a
 * zeroed record on the stack (at most 4 KiB) and given to the callback. */
struct table_load_ctx {
	const struct store_table *t;
	int (*cb)(void *, const void *);
	void *ud;
};

static int table_row(void *ud, PGresult *r, int i)
{
	struct table_load_ctx *l = ud;
	_Alignas(max_align_t) char rec[4096];
	if (l->t->rec_size > sizeof(rec))
		return -EINVAL;
	memset(rec, 0, l->t->rec_size);
	int rc = read_record(r, i, l->t, rec);
	return rc < 0 ? rc : l->cb(l->ud, rec);
}

static int pg_project_load_all(struct store *s, store_project_cb cb, void *ud, struct terr *err)
{
	struct table_load_ctx l = {&store_projects_table, (int (*)(void *, const void *))cb, ud};
	return read_rows(s, ST_PROJECT_ALL, NULL, table_row, &l, "projects", err);
}

static int pg_preset_load_all(struct store *s, store_preset_cb cb, void *ud, struct terr *err)
{
	struct table_load_ctx l = {&store_presets_table, (int (*)(void *, const void *))cb, ud};
	return read_rows(s, ST_PRESET_ALL, NULL, table_row, &l, "presets", err);
}

static int pg_member_load_all(struct store *s, store_member_cb cb, void *ud, struct terr *err)
{
	struct table_load_ctx l = {&store_members_table, (int (*)(void *, const void *))cb, ud};
	return read_rows(s, ST_MEMBER_ALL, NULL, table_row, &l, "project members", err);
}

static int pg_folder_load_all(struct store *s, store_folder_cb cb, void *ud, struct terr *err)
{
	struct load_ctx l = {(void *)cb, ud};
	return read_rows(s, ST_FOLDER_ALL, NULL, folder_row, &l, "folders", err);
}

static int int_row(void *ud, PGresult *r, int i)
{
	*(int64_t *)ud = strtoll(PQgetvalue(r, i, 0), NULL, 10);
	return 0;
}

static int pg_session_max_seq(struct store *s, int64_t *out, struct terr *err)
{
	*out = 0;
	return read_rows(s, ST_SESSION_MAXSEQ, NULL, int_row, out, "max seq", err);
}

struct hist_ctx {
	struct history_rec *arr;
	size_t n;
};

static int hist_row(void *ud, PGresult *r, int i)
{
	struct hist_ctx *h = ud;
	h->arr[h->n] = (struct history_rec){0};
	int rc = read_record(r, i, &store_history_table, &h->arr[h->n]);
	if (rc == 0)
		h->n++;
	return rc;
}

static int pg_history_get(struct store *s, const char *session_id, struct history_rec **out, size_t *n,
			  struct terr *err)
{
	struct params p = {0};
	param_text(&p, session_id);
	struct pgconn *c = read_conn(s);
	PGresult *r = NULL;
	int rc = run(s, c, ST_HISTORY_GET, p.v, p.n, &r, err);
	pthread_mutex_unlock(&c->mu);
	if (rc < 0)
		return rc;
	int rows = PQntuples(r);
	struct hist_ctx h = {malloc(((size_t)rows + 1) * sizeof(struct history_rec)), 0};
	if (!h.arr) {
		PQclear(r);
		return terr_set(err, ENOMEM, "out of memory");
	}
	for (int i = 0; i < rows; i++)
		hist_row(&h, r, i);
	PQclear(r);
	*out = h.arr;
	*n = h.n;
	return 0;
}

static int pg_log_tail_put(struct store *s, const struct log_tail_rec *l, struct terr *err)
{
	struct params p;
	bind_record(&p, &store_log_tails_table, NULL, l);
	return write_stmt(s, ST_LOG_PUT, &p, err);
}

static int pg_log_tail_get(struct store *s, const char *session_id, struct log_tail_rec *l, struct terr *err)
{
	struct params p = {0};
	param_text(&p, session_id);
	struct pgconn *c = read_conn(s);
	PGresult *r = NULL;
	int rc = run(s, c, ST_LOG_GET, p.v, p.n, &r, err);
	pthread_mutex_unlock(&c->mu);
	if (rc < 0)
		return rc;
	if (PQntuples(r) == 0) {
		PQclear(r);
		return terr_set(err, ENOENT, "no log is kept for session %s", session_id);
	}
	*l = (struct log_tail_rec){0};
	rc = read_record(r, 0, &store_log_tails_table, l);
	PQclear(r);
	return store_log_tail_read(l, rc, err);
}

static int pg_kv_get(struct store *s, const char *key, char **value, struct terr *err)
{
	struct params p = {0};
	param_text(&p, key);
	struct pgconn *c = read_conn(s);
	PGresult *r = NULL;
	int rc = run(s, c, ST_KV_GET, p.v, p.n, &r, err);
	pthread_mutex_unlock(&c->mu);
	if (rc < 0)
		return rc;
	if (PQntuples(r) == 0) {
		PQclear(r);
		return terr_set(err, ENOENT, "setting %s is not set", key);
	}
	*value = strdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	return *value ? 0 : terr_set(err, ENOMEM, "out of memory");
}

const struct store_ops store_pg_ops = {
	.name = "postgresql",
	.open = pg_open,
	.close = pg_close,
	.begin = pg_begin,
	.commit = pg_commit,
	.rollback = pg_rollback,
	.user_put = pg_user_put,
	.user_load_all = pg_user_load_all,
	.user_delete = pg_user_delete,
	.keypair_put = pg_keypair_put,
	.keypair_delete = pg_keypair_delete,
	.keypair_load_all = pg_keypair_load_all,
	.session_put = pg_session_put,
	.session_load_all = pg_session_load_all,
	.session_max_seq = pg_session_max_seq,
	.history_add = pg_history_add,
	.history_get = pg_history_get,
	.agent_put = pg_agent_put,
	.agent_load_all = pg_agent_load_all,
	.folder_put = pg_folder_put,
	.folder_delete = pg_folder_delete,
	.preset_put = pg_preset_put,
	.preset_delete = pg_preset_delete,
	.preset_load_all = pg_preset_load_all,
	.log_tail_put = pg_log_tail_put,
	.log_tail_get = pg_log_tail_get,
	.project_put = pg_project_put,
	.project_delete = pg_project_delete,
	.project_load_all = pg_project_load_all,
	.member_put = pg_member_put,
	.member_delete = pg_member_delete,
	.member_load_all = pg_member_load_all,
	.folder_load_all = pg_folder_load_all,
	.kv_get = pg_kv_get,
	.kv_set = pg_kv_set,
	.lead = pg_lead,
	.health = pg_health,
	.where = pg_where,
};
