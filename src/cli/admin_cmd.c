/* tessera admin backup DIR | restore DIR: the manager's database and the
 * cluster configuration, with a manifest (docs/admin.md, "Backups");
 * tessera admin reset-admin: a lost admin password set again straight in
 * the store, admin.conf written (docs/admin.md, "A lost admin password").
 *
 * These run on the manager's host, next to its data directory, not
 * through the API: a restore must work when no manager runs (it refuses
 * to run while one does), and a backup of SQLite is a copy of its file.
 *
 *   DIR/manifest.json  what the backup holds, written last: a directory
 *                      without it is not a backup
 *   DIR/tessera.db     SQLite: an online-backup copy of DATA_DIR/tessera.db
 *   DIR/database.sql   PostgreSQL: pg_dump of the store's database
 *   DIR/config.json    the cluster settings, flat {KEY: value} as
 *                      `tessera config get --prefix ''` prints them (from
 *                      etcd when manager.conf names one, else from the
 *                      database copy) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "common/conf.h"
#include "common/etcd.h"
#include "common/httpd.h"
#include "common/jsonutil.h"
#include "common/pidlock.h"
#include "common/util.h"
#include "manager/manager.h"
#include "store/store.h"

#define ADMIN_USAGE \
	"usage: tessera admin backup DIR [--config FILE | --data-dir DIR [--store URI] [--etcd URL]]\n" \
	"       tessera admin restore DIR [--config FILE | --data-dir DIR [--store URI] [--etcd URL]]\n" \
	"       tessera admin reset-admin [--config FILE | --data-dir DIR [--store URI]]\n" \
	"                                 [--email EMAIL] [--password-stdin] [--new-key]\n" \
	"backup and restore: the manager's database and the cluster settings, with a\n" \
	"manifest. reset-admin: sets a new web password for the admin (admin@tessera.local,\n" \
	"or --email) straight in the database, enables the account, and writes\n" \
	"DATA_DIR/admin.conf with it; the password is generated and printed once, or read\n" \
	"from stdin (--password-stdin). --new-key also replaces the admin's API keys with\n" \
	"a new one (the old ones are revoked). The manager must be stopped.\n" \
	"  --config FILE    the manager's manager.conf (its data_dir, store and etcd)\n" \
	"  --data-dir DIR   a data directory of tessera server (default as tessera server's)\n" \
	"  --store URI      with --data-dir: its postgresql:// store (tessera server --store)\n" \
	"  --etcd URL       with --data-dir: the etcd its settings are in\n" \
	"  --email EMAIL    reset-admin: this user (made an administrator) instead of admin@tessera.local\n" \
	"  --password-stdin reset-admin: the new password, one line on stdin\n" \
	"  --new-key        reset-admin: a new key for admin.conf; the admin's others revoked\n" \
	"backup copies while the manager runs; restore and reset-admin refuse to run\n" \
	"while a manager runs on that data directory (stop it first); restore checks\n" \
	"the whole backup before it changes anything.\n"
#define ADMIN_EXPECTED "expected 'backup DIR', 'restore DIR' or 'reset-admin'"
#define BACKUP_FORMAT "tessera-backup"
#define BACKUP_FORMAT_VERSION 1

/* Where the manager keeps its state. */
struct target {
	char data_dir[PATH_MAX];
	char store[1024];      /* "" : SQLite in data_dir; else a postgresql:// URI */
	char etcd[256];        /* "" : settings in the database */
	char db[PATH_MAX + 16];
	char lock[PATH_MAX + 16];
	char endpoint[300];    /* the API as manager.conf's listen says; "" when not from one */
};

/* reset-admin's own options. */
struct reset_opts {
	const char *email;
	bool password_stdin, new_key;
};

/* reset (reset-admin) NULL: backup or restore, which take DIR. */
static int parse_target(int argc, char **argv, struct target *t, const char **dir, struct reset_opts *reset)
{
	memset(t, 0, sizeof(*t));
	const char *config = NULL, *data_dir = NULL, *store = NULL, *etcd = NULL, *email = NULL;
	*dir = NULL;
	for (int i = 1; i < argc; i++) {
		const char **opt = !strcmp(argv[i], "--config") ? &config : !strcmp(argv[i], "--data-dir") ? &data_dir
				   : !strcmp(argv[i], "--store") ? &store : !strcmp(argv[i], "--etcd") ? &etcd
				   : reset && !strcmp(argv[i], "--email") ? &email : NULL;
		if (opt && i + 1 < argc) {
			*opt = argv[++i];
		} else if (opt) {
			return cli_usage_fail("admin", "%s needs a value", argv[i]);
		} else if (reset && !strcmp(argv[i], "--password-stdin")) {
			reset->password_stdin = true;
		} else if (reset && !strcmp(argv[i], "--new-key")) {
			reset->new_key = true;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return cli_usage_fail("admin", "unknown option '%s'", argv[i]);
		} else if (!*dir && !reset) {
			*dir = argv[i];
		} else {
			return reset ? cli_usage_fail("admin", "reset-admin takes no argument ('%s')", argv[i])
				     : cli_usage_fail("admin", "%s", ADMIN_EXPECTED);
		}
	}
	if (reset) {
		reset->email = email;
		if (etcd)
			return cli_usage_fail("admin", "reset-admin needs no --etcd: users are in the database");
	} else if (!*dir || !**dir) {
		return cli_usage_fail("admin", "%s", ADMIN_EXPECTED);
	}
	if (config && (data_dir || store || etcd))
		return cli_usage_fail("admin", "give --config, or --data-dir with --store and --etcd, not both");
	if (config) {
		struct conf c = {0};
		struct terr err = {0};
		if (conf_load(config, &c, &err) < 0)
			return cli_fail("%s", err.msg);
		const char *d = conf_get(&c, "data_dir"), *s = conf_get(&c, "store"), *e = conf_get(&c, "etcd");
		snprintf(t->data_dir, sizeof(t->data_dir), "%s", d ? d : "/var/lib/tessera");
		/* As the manager names its API (manager_serve): 0.0.0.0 is
		 * reached on 127.0.0.1. */
		char host[256] = "0.0.0.0";
		int port = 8090;
		if (conf_get(&c, "listen"))
			httpd_parse_listen(conf_get(&c, "listen"), host, sizeof(host), &port, NULL);
		snprintf(t->endpoint, sizeof(t->endpoint), "http://%s:%d", strcmp(host, "0.0.0.0") ? host : "127.0.0.1",
			 port);
		if (s && strncmp(s, "sqlite", 6))
			snprintf(t->store, sizeof(t->store), "%s", s);
		if (e)
			snprintf(t->etcd, sizeof(t->etcd), "%s", e);
		conf_free(&c);
		if (t->store[0] && strncmp(t->store, "postgresql://", 13) && strncmp(t->store, "postgres://", 11))
			return cli_fail("%s: store must be postgresql://USER@HOST:PORT/DB (or absent for SQLite)", config);
		if (t->etcd[0] && etcd_check_endpoint(t->etcd, &err) < 0)
			return cli_fail("%s: %s", config, err.msg);
	} else if (data_dir) {
		snprintf(t->data_dir, sizeof(t->data_dir), "%s", data_dir);
		struct terr err = {0};
		if (store && strncmp(store, "sqlite", 6)) {
			if (strncmp(store, "postgresql://", 13) && strncmp(store, "postgres://", 11))
				return cli_fail("--store must be postgresql://USER@HOST:PORT/DB");
			snprintf(t->store, sizeof(t->store), "%s", store);
		}
		if (etcd) {
			if (etcd_check_endpoint(etcd, &err) < 0)
				return cli_fail("--etcd: %s", err.msg);
			snprintf(t->etcd, sizeof(t->etcd), "%s", etcd);
		}
	} else if (store || etcd) {
		return cli_usage_fail("admin", "--store and --etcd go with --data-dir");
	} else {
		/* tessera server's default */
		const char *home = getenv("HOME");
		if (home && *home && strcmp(home, "/"))
			snprintf(t->data_dir, sizeof(t->data_dir), "%s/.local/share/tessera", home);
		else
			snprintf(t->data_dir, sizeof(t->data_dir), "/var/lib/tessera");
	}
	snprintf(t->db, sizeof(t->db), "%s/tessera.db", t->data_dir);
	snprintf(t->lock, sizeof(t->lock), "%s/tessera.lock", t->data_dir);
	return 0;
}

/* Writes text to dir/name, 0600, replacing it. */
static int write_file(const char *dir, const char *name, const char *text, struct terr *err)
{
	char path[PATH_MAX + 64], tmp[PATH_MAX + 80];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return terr_set(err, errno, "cannot write %s: %s", tmp, strerror(errno));
	size_t len = strlen(text), off = 0;
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0) {
			int e = errno;
			close(fd);
			unlink(tmp);
			return terr_set(err, e, "cannot write %s: %s", tmp, strerror(e));
		}
		off += (size_t)w;
	}
	if (fsync(fd) < 0 || close(fd) < 0 || rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return terr_set(err, e, "cannot write %s: %s", path, strerror(e));
	}
	return 0;
}

/* Runs argv (no shell), its output going to out_path when given (0600)
 * and its stdin from in_path when given. 0, or an error naming it. */
static int run(char *const argv[], const char *in_path, const char *out_path, struct terr *err)
{
	pid_t pid = fork();
	if (pid < 0)
		return terr_set(err, errno, "cannot run %s: %s", argv[0], strerror(errno));
	if (pid == 0) {
		if (out_path) {
			int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (fd < 0 || dup2(fd, 1) < 0)
				_exit(126);
		}
		if (in_path) {
			int fd = open(in_path, O_RDONLY);
			if (fd < 0 || dup2(fd, 0) < 0)
				_exit(126);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return terr_set(err, errno, "waiting for %s: %s", argv[0], strerror(errno));
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
		return terr_set(err, ENOENT, "%s not found: install Debian's postgresql-client", argv[0]);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return terr_set(err, EIO, "%s failed (exit status %d; its message is above)", argv[0],
				WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return 0;
}

/* The settings under ETCD_CONFIG_PREFIX, flat (*out new ref). */
static int etcd_export(const char *endpoint, json_t **out, struct terr *err)
{
	struct etcd_kv *kvs;
	size_t n;
	int rc = etcd_range(endpoint, ETCD_CONFIG_PREFIX, true, &kvs, &n, NULL, err);
	if (rc < 0)
		return rc;
	json_t *flat = json_object();
	for (size_t i = 0; flat && i < n && rc == 0; i++) {
		json_t *v = json_loadb(kvs[i].value, kvs[i].value_len, JSON_DECODE_ANY, NULL);
		if (!v)
			rc = terr_set(err, EINVAL, "etcd key %s is not JSON: fix or delete it (etcdctl) and back up again",
				      kvs[i].key);
		else
			json_object_set_new(flat, kvs[i].key + strlen(ETCD_CONFIG_PREFIX), v);
	}
	etcd_kvs_free(kvs, n);
	if (!flat)
		return terr_set(err, ENOMEM, "out of memory");
	if (rc < 0) {
		json_decref(flat);
		return rc;
	}
	*out = flat;
	return 0;
}

/* The database part of a PostgreSQL URI ("postgresql://u@h:p/db?x" ->
 * "db") into db, and the URI with the maintenance database "postgres"
 * in its place into admin. */
static int pg_split(const char *uri, char *db, size_t dn, char *admin, size_t an, struct terr *err)
{
	const char *p = strstr(uri, "://");
	const char *slash = p ? strchr(p + 3, '/') : NULL;
	if (!slash || !slash[1])
		return terr_set(err, EINVAL, "store URI %s names no database", uri);
	size_t len = strcspn(slash + 1, "?");
	if (!len || len >= dn)
		return terr_set(err, EINVAL, "store URI %s: bad database name", uri);
	memcpy(db, slash + 1, len);
	db[len] = '\0';
	for (size_t i = 0; i < len; i++)
		if (!((db[i] >= 'a' && db[i] <= 'z') || (db[i] >= 'A' && db[i] <= 'Z') ||
		      (db[i] >= '0' && db[i] <= '9') || db[i] == '_' || db[i] == '-'))
			return terr_set(err, EINVAL, "store URI %s: database name must be letters, digits, '_' and '-'", uri);
	snprintf(admin, an, "%.*spostgres%s", (int)(slash + 1 - uri), uri, slash + 1 + len);
	return 0;
}

static bool dir_empty_or_absent(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT;
	struct dirent *e;
	bool empty = true;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = false;
	closedir(d);
	return empty;
}

static int admin_backup(int argc, char **argv)
{
	struct target t;
	const char *dir;
	int rc = parse_target(argc, argv, &t, &dir, NULL);
	if (rc)
		return rc;
	struct terr err = {0};
	if (!dir_empty_or_absent(dir))
		return cli_fail("%s is not empty: back up into a new directory", dir);
	if (util_mkdir_p(dir, 0700, &err) < 0)
		return cli_fail("%s", err.msg);
	char path[PATH_MAX + 64];
	json_t *flat = NULL, *db = NULL;
	const char *config_from = NULL;
	if (!t.store[0]) {
		if (access(t.db, F_OK) < 0)
			return cli_fail("no database at %s (is the data directory right? --config, --data-dir)", t.db);
		snprintf(path, sizeof(path), "%s/tessera.db", dir);
		if (store_sqlite_copy(t.db, path, &err) < 0 || store_sqlite_check(path, &err) < 0)
			return cli_fail("%s", err.msg);
		struct stat st;
		db = json_pack("{s:s,s:s,s:s,s:I}", "kind", "sqlite", "file", "tessera.db", "source", t.db, "bytes",
			       (json_int_t)(stat(path, &st) == 0 ? st.st_size : 0));
		if (!t.etcd[0]) {
			struct store *s = NULL;
			if (store_sqlite_ops.open(&s, path, &err) < 0 ||
			    mgr_settings_export_store(&store_sqlite_ops, s, &flat, &err) < 0) {
				if (s)
					store_sqlite_ops.close(s);
				return cli_fail("%s", err.msg);
			}
			store_sqlite_ops.close(s);
			config_from = "database";
		}
	} else {
		snprintf(path, sizeof(path), "%s/database.sql", dir);
		char dbname[128], admin[1100];
		if (pg_split(t.store, dbname, sizeof(dbname), admin, sizeof(admin), &err) < 0)
			return cli_fail("%s", err.msg);
		char dbarg[1100];
		snprintf(dbarg, sizeof(dbarg), "--dbname=%s", t.store);
		char *const pg_argv[] = {"pg_dump", dbarg, "--format=plain", "--no-owner", "--no-privileges", NULL};
		if (run(pg_argv, NULL, path, &err) < 0)
			return cli_fail("%s", err.msg);
		db = json_pack("{s:s,s:s,s:s}", "kind", "postgresql", "file", "database.sql", "database", dbname);
	}
	if (t.etcd[0]) {
		if (etcd_export(t.etcd, &flat, &err) < 0) {
			json_decref(db);
			return cli_fail("%s", err.msg);
		}
		config_from = "etcd";
	}
	json_t *config = json_null();
	if (flat) {
		char *text = json_dumps(flat, JSON_INDENT(2) | JSON_SORT_KEYS);
		rc = text ? write_file(dir, "config.json", text, &err) : terr_set(&err, ENOMEM, "out of memory");
		free(text);
		if (rc < 0) {
			json_decref(flat);
			json_decref(db);
			return cli_fail("%s", err.msg);
		}
		config = json_pack("{s:s,s:s,s:I}", "file", "config.json", "from", config_from, "keys",
				   (json_int_t)json_object_size(flat));
		if (t.etcd[0])
			json_object_set_new(config, "etcd", json_string(t.etcd));
	}
	char when[32];
	time_t now = time(NULL);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	json_t *manifest = json_pack("{s:s,s:i,s:s,s:s,s:s,s:s,s:o,s:o,s:[sss]}", "format", BACKUP_FORMAT,
		"format_version", BACKUP_FORMAT_VERSION, "tessera_version", TESSERA_VERSION, "created", when,
		"host", host, "data_dir", t.data_dir, "database", db, "config", config, "not_included",
		"admin.conf (the admin's web password)", "the folders' directories on the storage hosts",
		"Docker's images and containers");
	char *text = manifest ? json_dumps(manifest, JSON_INDENT(2)) : NULL;
	/* Last: a directory without a manifest is an unfinished backup. */
	rc = text ? write_file(dir, "manifest.json", text, &err) : terr_set(&err, ENOMEM, "out of memory");
	free(text);
	json_decref(manifest);
	size_t nkeys = flat ? json_object_size(flat) : 0;
	json_decref(flat);
	if (rc < 0)
		return cli_fail("%s", err.msg);
	printf("backed up %s to %s: the database (%s)", t.store[0] ? "the store" : t.db, dir,
	       t.store[0] ? "pg_dump" : "SQLite online backup");
	if (config_from)
		printf(", %zu settings (from %s)", nkeys, config_from);
	printf(", manifest.json\n");
	return CLI_EXIT_OK;
}

/* The backup in dir, checked whole before anything is touched. */
struct backup {
	json_t *manifest;
	json_t *config;       /* flat settings, or NULL */
	const char *kind;     /* "sqlite" or "postgresql" */
	char db_path[PATH_MAX + 64];
};

static int load_backup(const char *dir, const struct target *t, struct backup *b, struct terr *err)
{
	memset(b, 0, sizeof(*b));
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	json_error_t je;
	b->manifest = json_load_file(path, 0, &je);
	if (!b->manifest)
		return terr_set(err, EINVAL, "%s: %s (is %s a backup made by 'tessera admin backup'?)", path, je.text,
				dir);
	const char *format = json_string_value(json_object_get(b->manifest, "format"));
	json_int_t version = json_integer_value(json_object_get(b->manifest, "format_version"));
	if (!format || strcmp(format, BACKUP_FORMAT))
		return terr_set(err, EINVAL, "%s: not a Tessera backup manifest (format is not \"" BACKUP_FORMAT "\")", path);
	if (version < 1 || version > BACKUP_FORMAT_VERSION)
		return terr_set(err, EINVAL, "%s: format_version %lld is not one this tessera reads (1 to %d)", path,
				(long long)version, BACKUP_FORMAT_VERSION);
	json_t *db = json_object_get(b->manifest, "database");
	b->kind = json_string_value(json_object_get(db, "kind"));
	const char *file = json_string_value(json_object_get(db, "file"));
	if (!b->kind || !file || strchr(file, '/') || !strcmp(file, "..") || !strcmp(file, "."))
		return terr_set(err, EINVAL, "%s: database.kind and database.file (a file name) are required", path);
	snprintf(b->db_path, sizeof(b->db_path), "%s/%s", dir, file);
	if (!strcmp(b->kind, "sqlite")) {
		if (t->store[0])
			return terr_set(err, EINVAL, "%s holds an SQLite database; this manager's store is PostgreSQL", dir);
		if (store_sqlite_check(b->db_path, err) < 0)
			return -EINVAL;
	} else if (!strcmp(b->kind, "postgresql")) {
		if (!t->store[0])
			return terr_set(err, EINVAL, "%s holds a PostgreSQL dump; this manager's store is SQLite "
					"(give its manager.conf with --config)", dir);
		char *text = NULL;
		size_t len = 0;
		if (util_read_file(b->db_path, &text, &len, err) < 0)
			return -EIO;
		bool ok = len > 0 && strstr(text, "PostgreSQL database dump complete");
		free(text);
		if (!ok)
			return terr_set(err, EINVAL, "%s is not a complete pg_dump output", b->db_path);
	} else {
		return terr_set(err, EINVAL, "%s: unknown database kind '%s'", path, b->kind);
	}
	json_t *config = json_object_get(b->manifest, "config");
	const char *cfile = json_string_value(json_object_get(config, "file"));
	if (cfile) {
		if (strchr(cfile, '/'))
			return terr_set(err, EINVAL, "%s: config.file must be a file name", path);
		snprintf(path, sizeof(path), "%s/%s", dir, cfile);
		b->config = json_load_file(path, 0, &je);
		if (!b->config)
			return terr_set(err, EINVAL, "%s: line %d: %s", path, je.line, je.text);
		if (mgr_settings_check_flat(b->config, err) < 0)
			return terr_prefix(err, "%s", path);
	} else if (t->etcd[0]) {
		return terr_set(err, EINVAL, "%s has no cluster settings (config.json) to put into etcd", dir);
	}
	return 0;
}

/* The seeds' restore of PostgreSQL: end the database's connections, drop
 * it, create it again, and feed the dump to psql. */
static int restore_pg(const struct target *t, const char *dump, struct terr *err)
{
	char dbname[128], admin[1100];
	int rc = pg_split(t->store, dbname, sizeof(dbname), admin, sizeof(admin), err);
	if (rc < 0)
		return rc;
	char sql[3][400];
	snprintf(sql[0], sizeof(sql[0]),
		 "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s' AND pid <> pg_backend_pid()",
		 dbname);
	snprintf(sql[1], sizeof(sql[1]), "DROP DATABASE IF EXISTS \"%s\"", dbname);
	snprintf(sql[2], sizeof(sql[2]), "CREATE DATABASE \"%s\"", dbname);
	char dbarg[1120];
	snprintf(dbarg, sizeof(dbarg), "--dbname=%s", admin);
	for (int i = 0; i < 3; i++) {
		char *const argv[] = {"psql", "--quiet", "--no-psqlrc", "-v", "ON_ERROR_STOP=1", dbarg, "-c", sql[i], NULL};
		if ((rc = run(argv, NULL, "/dev/null", err)) < 0)
			return rc;
	}
	snprintf(dbarg, sizeof(dbarg), "--dbname=%s", t->store);
	char file[PATH_MAX + 80];
	snprintf(file, sizeof(file), "--file=%s", dump);
	char *const argv[] = {"psql", "--quiet", "--no-psqlrc", "-v", "ON_ERROR_STOP=1", dbarg, file, NULL};
	return run(argv, NULL, "/dev/null", err);
}

/* Puts the settings into etcd: the prefix then holds exactly them. */
static int restore_etcd(const char *endpoint, json_t *flat, struct terr *err)
{
	size_t n = json_object_size(flat), i = 0;
	const char **keys = calloc(n + 1, sizeof(*keys)), **values = calloc(n + 1, sizeof(*values));
	char **owned = calloc(n + 1, sizeof(*owned));
	int rc = 0;
	const char *k;
	json_t *v;
	if (!keys || !values || !owned) {
		rc = terr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	json_object_foreach(flat, k, v) {
		if (json_is_null(v))
			continue;   /* unset: absent from etcd */
		size_t kl = strlen(ETCD_CONFIG_PREFIX) + strlen(k) + 1;
		owned[i] = malloc(kl);
		char *text = json_dumps(v, JSONUTIL_DUMP_FLAGS | JSON_ENCODE_ANY);
		if (!owned[i] || !text) {
			free(text);
			rc = terr_set(err, ENOMEM, "out of memory");
			goto out;
		}
		snprintf(owned[i], kl, "%s%s", ETCD_CONFIG_PREFIX, k);
		keys[i] = owned[i];
		values[i++] = text;
	}
	rc = etcd_txn(endpoint, ETCD_CONFIG_PREFIX, keys, values, i, err);
out:
	for (size_t j = 0; j < n && owned; j++) {
		free(owned[j]);
		free((char *)(values ? values[j] : NULL));
	}
	free(owned);
	free(keys);
	free(values);
	return rc;
}

static int admin_restore(int argc, char **argv)
{
	struct target t;
	const char *dir;
	int rc = parse_target(argc, argv, &t, &dir, NULL);
	if (rc)
		return rc;
	struct terr err = {0};
	struct backup b;
	if (load_backup(dir, &t, &b, &err) < 0) {
		json_decref(b.manifest);
		json_decref(b.config);
		return cli_fail("%s; nothing was changed", err.msg);
	}
	/* Held until the end: no manager starts on a half-restored state. */
	long holder = 0;
	int lock = -1;
	if (util_mkdir_p(t.data_dir, 0700, &err) < 0 || (lock = pidlock_acquire(t.lock, &holder, &err)) < 0) {
		json_decref(b.manifest);
		json_decref(b.config);
		if (lock == -EBUSY)
			return cli_fail("a manager (pid %ld) runs on %s: stop it first (systemctl stop tessera-manager, "
					"or tessera-server); nothing was changed", holder, t.data_dir);
		return cli_fail("%s; nothing was changed", err.msg);
	}
	if (!strcmp(b.kind, "sqlite")) {
		/* A database file that was removed may have left its journal:
		 * it belongs to no database now. */
		if (access(t.db, F_OK) < 0) {
			char p[PATH_MAX + 32];
			snprintf(p, sizeof(p), "%s-wal", t.db);
			unlink(p);
			snprintf(p, sizeof(p), "%s-shm", t.db);
			unlink(p);
		}
		rc = store_sqlite_copy(b.db_path, t.db, &err);
	} else {
		rc = restore_pg(&t, b.db_path, &err);
	}
	if (rc == 0 && t.etcd[0] && b.config)
		rc = restore_etcd(t.etcd, b.config, &err);
	pidlock_release(lock);
	/* Copied: the manifest, which holds the string, goes first. */
	char created[64];
	util_strlcpy(created, json_string_value(json_object_get(b.manifest, "created")) ?
				      json_string_value(json_object_get(b.manifest, "created")) : "?",
		     sizeof(created));
	size_t nkeys = b.config ? json_object_size(b.config) : 0;
	json_decref(b.manifest);
	json_decref(b.config);
	if (rc < 0)
		return cli_fail("%s", err.msg);
	printf("restored %s from %s (made %s)", t.store[0] ? "the store" : t.db, dir, created);
	if (t.etcd[0])
		printf(" and %zu settings into etcd at %s", nkeys, t.etcd);
	printf("; start the manager now\n");
	return CLI_EXIT_OK;
}

/* Reads the new password, one line, from stdin. */
static int read_stdin_password(char *out, size_t n)
{
	if (!fgets(out, (int)n, stdin))
		return cli_fail("--password-stdin: no password on stdin; nothing was changed");
	size_t len = strcspn(out, "\r\n");
	if (out[len] == '\0' && !feof(stdin))
		return cli_fail("--password-stdin: the password is longer than %zu characters; nothing was changed", n - 2);
	out[len] = '\0';
	if (!len)
		return cli_fail("--password-stdin: the line on stdin is empty; nothing was changed");
	return CLI_EXIT_OK;
}

static int admin_reset_admin(int argc, char **argv)
{
	struct target t;
	const char *dir;
	struct reset_opts ro = {0};
	int rc = parse_target(argc, argv, &t, &dir, &ro);
	if (rc)
		return rc;
	char password[300] = "";
	if (ro.password_stdin && (rc = read_stdin_password(password, sizeof(password))) != CLI_EXIT_OK)
		return rc;
	struct terr err = {0};
	if (!t.store[0] && access(t.db, F_OK) < 0)
		return cli_fail("no database at %s (is the data directory right? --config, --data-dir); nothing was "
				"changed", t.db);
	/* Held until admin.conf is written: no manager starts meanwhile
	 * (nor runs: it keeps the users in memory and would never see the
	 * new password). */
	long holder = 0;
	int lock = -1;
	if (util_mkdir_p(t.data_dir, 0700, &err) < 0 || (lock = pidlock_acquire(t.lock, &holder, &err)) < 0) {
		if (lock == -EBUSY)
			return cli_fail("a manager (pid %ld) runs on %s: stop it first (systemctl stop tessera-manager, "
					"or tessera-server); nothing was changed", holder, t.data_dir);
		return cli_fail("%s; nothing was changed", err.msg);
	}
	struct manager_config mc = {.data_dir = t.data_dir, .store = t.store[0] ? t.store : NULL};
	struct reset_admin ra = {.email = ro.email, .password = ro.password_stdin ? password : NULL,
				 .new_key = ro.new_key};
	struct reset_admin_result res;
	if ((rc = manager_reset_admin(&mc, &ra, &res, &err)) < 0) {
		pidlock_release(lock);
		explicit_bzero(password, sizeof(password));
		return cli_fail("%s", err.msg);
	}
	const char *pw = ro.password_stdin ? password : res.generated_password;
	/* The endpoint of the admin.conf replaced, else manager.conf's
	 * listen, else tessera server's default: the manager writes its own
	 * at its next start anyway. */
	char conf_path[PATH_MAX + 32], endpoint[300];
	snprintf(conf_path, sizeof(conf_path), "%s/admin.conf", t.data_dir);
	struct conf old = {0};
	if (conf_load(conf_path, &old, NULL) == 0 && conf_get(&old, "endpoint"))
		util_strlcpy(endpoint, conf_get(&old, "endpoint"), sizeof(endpoint));
	else
		util_strlcpy(endpoint, t.endpoint[0] ? t.endpoint : "http://127.0.0.1:8090", sizeof(endpoint));
	conf_free(&old);
	rc = mgr_admin_conf_write(conf_path, endpoint, &res.user, pw, &err);
	pidlock_release(lock);
	if (rc < 0) {
		/* The store has the new password already: say it, once. */
		fprintf(stderr, "tessera: %s; the new password of %s is set in the store%s%s\n", err.msg, res.user.email,
			res.generated_password[0] ? ": " : "", res.generated_password);
		explicit_bzero(password, sizeof(password));
		return CLI_EXIT_FAIL;
	}
	printf("%s: %s of %s%s; %s written\n", res.where,
	       res.created ? "made the admin (there was none), with a new password" : "new password", res.user.email,
	       ro.new_key ? (res.revoked_keys ? ", a new API key (its other keys revoked)" : ", a new API key") : "",
	       conf_path);
	if (res.generated_password[0])
		printf("password: %s (generated; also in %s)\n", res.generated_password, conf_path);
	explicit_bzero(password, sizeof(password));
	return CLI_EXIT_OK;
}

static const struct cli_verb admin_verbs[] = {
	{"backup", admin_backup, NULL, NULL,   /* ADMIN_USAGE describes them */
	 "--config=FILE --data-dir=DIR --store=URI --etcd=URL", "DIR"},
	{"restore", admin_restore, NULL, NULL,
	 "--config=FILE --data-dir=DIR --store=URI --etcd=URL", "DIR"},
	{"reset-admin", admin_reset_admin, NULL, NULL,
	 "--config=FILE --data-dir=DIR --store=URI --email=EMAIL --password-stdin --new-key", ""},
};

const struct cli_noun cli_admin_noun = {
	.name = "admin",
	.verbs = admin_verbs,
	.n_verbs = CLI_NVERBS(admin_verbs),
	.usage = ADMIN_USAGE,
	.unknown = ADMIN_EXPECTED,
};

int cmd_admin(int argc, char **argv)
{
	return cli_dispatch(&cli_admin_noun, argc, argv);
}
