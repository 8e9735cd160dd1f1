/* Users: the list in memory (few, found by a scan), written through to the
 * store's users table; the admin made on first start; password checks,
 * creation, changes and removal. Passwords are kept as argon2id hashes
 * only, and hashing runs outside the lock (it takes tens of milliseconds).
 *
 * API keys (docs/api.md, "API keys"): every user has one or more, kept in
 * memory beside the users and written through to the keypairs table; a
 * signed request finds its user by any of them. One is the user's main
 * key (user_rec.access_key): the key the webserver signs with for the
 * user's browsers, and admin.conf's for the admin. Revoking it makes a
 * new main key in its place, so a user always has one.
 *
 * admin.conf: the admin's endpoint, keypair, email and web password,
 * written whole by conf_write (a temp file, fsync, rename). The plain
 * password exists nowhere else, so the one made at first start goes to
 * admin.conf.pending before the admin is stored: a first start that dies
 * before it serves (a port in use) leaves it there, and the next start
 * puts it into admin.conf. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/sign.h"
#include "common/util.h"
#include "manager/sshkeys.h"
#include "manager/state.h"
#include "auth/pwhash.h"

#define ADMIN_EMAIL "admin@tessera.local"

/* ---------- the list ---------- */

const struct user_rec *mgr_find_user(struct manager *m, const char *id)
{
	for (size_t i = 0; i < m->n_users; i++)
		if (!strcmp(m->users[i].id, id))
			return &m->users[i];
	return NULL;
}

static struct keypair_rec *find_key(struct manager *m, const char *access_key)
{
	for (size_t i = 0; i < m->n_keys; i++)
		if (!strcmp(m->keys[i].access_key, access_key))
			return &m->keys[i];
	return NULL;
}

const struct user_rec *mgr_find_user_by_key(struct manager *m, const char *access_key)
{
	const struct keypair_rec *k = find_key(m, access_key);
	return k ? mgr_find_user(m, k->user_id) : NULL;
}

static struct user_rec *find_by_email(struct manager *m, const char *email)
{
	for (size_t i = 0; i < m->n_users; i++)
		if (!strcasecmp(m->users[i].email, email))
			return &m->users[i];
	return NULL;
}

const struct user_rec *mgr_find_user_by_email(struct manager *m, const char *email)
{
	return find_by_email(m, email);
}

int mgr_user_load(struct manager *m, const struct user_rec *u)
{
	pthread_rwlock_wrlock(&m->users_mu);
	struct user_rec *n = realloc(m->users, (m->n_users + 1) * sizeof(*n));
	if (n) {
		m->users = n;
		m->users[m->n_users++] = *u;
		m->ix_gen++;
	}
	pthread_rwlock_unlock(&m->users_mu);
	return n ? 0 : -ENOMEM;
}

/* Appends a key to the list (users_mu held for writing, or before any
 * thread runs). */
static int keys_append(struct manager *m, const struct keypair_rec *k)
{
	struct keypair_rec *n = realloc(m->keys, (m->n_keys + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	m->keys = n;
	m->keys[m->n_keys++] = *k;
	return 0;
}

static void keys_remove_at(struct manager *m, size_t i)
{
	explicit_bzero(m->keys[i].secret_key, sizeof(m->keys[i].secret_key));
	memmove(&m->keys[i], &m->keys[i + 1], (m->n_keys - i - 1) * sizeof(*m->keys));
	m->n_keys--;
}

int mgr_key_load(struct manager *m, const struct keypair_rec *k)
{
	pthread_rwlock_wrlock(&m->users_mu);
	int rc = keys_append(m, k);
	pthread_rwlock_unlock(&m->users_mu);
	return rc;
}

/* Fresh access key ("TK" + 18 upper-case hex) and secret key into k. */
static int new_key(struct keypair_rec *k, const char *user_id, const char *label, struct terr *err)
{
	char ak[24];
	int rc;
	memset(k, 0, sizeof(*k));
	if ((rc = sign_random_hex(9, ak, sizeof(ak), err)) < 0 ||
	    (rc = sign_random_hex(20, k->secret_key, sizeof(k->secret_key), err)) < 0)
		return rc;
	for (char *p = ak; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	snprintf(k->access_key, sizeof(k->access_key), "TK%s", ak);
	util_strlcpy(k->user_id, user_id, sizeof(k->user_id));
	util_strlcpy(k->label, label ? label : "", sizeof(k->label));
	k->created_ms = util_now_ms();
	return 0;
}

/* The user's main key becomes k. */
static void set_main(struct user_rec *u, const struct keypair_rec *k)
{
	util_strlcpy(u->access_key, k->access_key, sizeof(u->access_key));
	util_strlcpy(u->secret_key, k->secret_key, sizeof(u->secret_key));
}

/* The key a user row names as its main one, as a key record. */
static struct keypair_rec main_key_of(const struct user_rec *u)
{
	struct keypair_rec k = {0};
	util_strlcpy(k.access_key, u->access_key, sizeof(k.access_key));
	util_strlcpy(k.user_id, u->id, sizeof(k.user_id));
	util_strlcpy(k.secret_key, u->secret_key, sizeof(k.secret_key));
	k.created_ms = u->created_ms;
	return k;
}

/* A user and their main key in one transaction. */
static int put_user_and_key(const struct store_ops *so, struct store *st, const struct user_rec *u,
			    const struct keypair_rec *k, struct terr *err)
{
	int rc = so->begin(st, err);
	if (rc < 0)
		return rc;
	if ((rc = so->user_put(st, u, err)) < 0 || (k && (rc = so->keypair_put(st, k, err)) < 0)) {
		so->rollback(st);
		return rc;
	}
	return so->commit(st, err);
}

int mgr_keys_check_main(struct manager *m, struct terr *err)
{
	/* Every user's main key is one of their keys. A database migrated
	 * while an older manager ran on it may have users whose key that
	 * one made after the migration copied the keys: added here. */
	for (size_t i = 0; i < m->n_users; i++) {
		const struct keypair_rec *k = find_key(m, m->users[i].access_key);
		if (k && !strcmp(k->user_id, m->users[i].id))
			continue;
		struct keypair_rec mk = main_key_of(&m->users[i]);
		int rc = m->so->keypair_put(m->store, &mk, err);
		if (rc < 0 || (rc = mgr_key_load(m, &mk)) < 0)
			return rc < 0 ? rc : terr_set(err, ENOMEM, "out of memory");
		log_info("manager", "user %s: main key %s added to the keys", m->users[i].email, mk.access_key);
	}
	return 0;
}

/* The admin.conf.pending beside path ("DIR/admin.conf"). */
static void pending_path(const char *admin_conf, char *out, size_t n)
{
	snprintf(out, n, "%s.pending", admin_conf);
}

int mgr_create_admin(struct manager *m, struct terr *err)
{
	struct user_rec u = {0};
	struct keypair_rec k;
	int rc;
	if ((rc = util_new_id(u.id, err)) < 0 || (rc = new_key(&k, u.id, "", err)) < 0)
		return rc;
	set_main(&u, &k);
	util_strlcpy(u.email, ADMIN_EMAIL, sizeof(u.email));
	u.is_admin = true;
	u.created_ms = k.created_ms;
	/* A generated web password: only its argon2id hash is stored; the
	 * plain one goes to admin.conf (manager_serve), and before the admin
	 * is stored to admin.conf.pending, so that a start that fails before
	 * it serves does not lose it. */
	if ((rc = pwhash_generate(m->first_password, sizeof(m->first_password), err)) < 0 ||
	    (rc = pwhash_hash(m->first_password, u.password_hash, sizeof(u.password_hash), err)) < 0)
		return rc;
	char conf[4200], pending[4300];
	snprintf(conf, sizeof(conf), "%s/admin.conf", m->data_dir);
	pending_path(conf, pending, sizeof(pending));
	const char *keys[] = {"email", "password"}, *vals[] = {u.email, m->first_password};
	if ((rc = conf_write(pending, 0600, keys, vals, 2, err)) < 0)
		return terr_prefix(err, "cannot keep the new admin's password");
	if ((rc = put_user_and_key(m->so, m->store, &u, &k, err)) < 0)
		return rc;
	log_info("manager", "first start: created admin user %s with access key %s", u.email, u.access_key);
	if ((rc = mgr_user_load(m, &u)) < 0 || (rc = mgr_key_load(m, &k)) < 0)
		return terr_set(err, -rc, "out of memory");
	return 0;
}

/* Reads the password of email from a conf file when it is the password
 * whose hash is given (a stale one is no password). */
static bool password_from(const char *path, const char *email, const char *hash, char *out, size_t n)
{
	struct conf c = {0};
	bool ok = false;
	if (conf_load(path, &c, NULL) == 0) {
		const char *e = conf_get(&c, "email"), *p = conf_get(&c, "password");
		ok = e && p && !strcasecmp(e, email) && hash[0] && pwhash_verify(hash, p) &&
		     util_strlcpy(out, p, n) == 0;
	}
	conf_free(&c);
	if (!ok && n)
		out[0] = '\0';
	return ok;
}

int mgr_admin_conf_write(const char *path, const char *endpoint, const struct user_rec *admin,
			 const char *password, struct terr *err)
{
	/* No web_url: tessera server adds it once its web UI serves, and
	 * what waits for the server reads it as "the web UI is up". */
	const char *keys[] = {"endpoint", "access_key", "secret_key", "email", "password"};
	const char *vals[] = {endpoint, admin->access_key, admin->secret_key, admin->email, password};
	return conf_write(path, 0600, keys, vals, password ? 5 : 4, err);
}

int mgr_admin_conf_update(struct manager *m, const char *path, struct terr *err)
{
	/* The admin the file names (reset-admin --email may have chosen one),
	 * while an enabled admin; else the first one. */
	struct user_rec admin;
	struct conf old = {0};
	bool named = false;
	if (conf_load(path, &old, NULL) == 0 && conf_get(&old, "email")) {
		pthread_mutex_lock(&m->mu);
		const struct user_rec *u = find_by_email(m, conf_get(&old, "email"));
		if ((named = u && u->is_admin && !u->disabled))
			admin = *u;
		pthread_mutex_unlock(&m->mu);
	}
	conf_free(&old);
	if (!named && mgr_admin_user(m, &admin) < 0)
		return 0;
	char password[PWHASH_MAX_LEN + 1] = "", pending[4300];
	pending_path(path, pending, sizeof(pending));
	/* The password is known when it was made now, or is the one in the
	 * admin.conf being replaced or in admin.conf.pending (a first start
	 * that stopped before it served) and still opens the account. */
	if (m->first_password[0] && !strcmp(admin.email, ADMIN_EMAIL))
		util_strlcpy(password, m->first_password, sizeof(password));
	else if (!password_from(path, admin.email, admin.password_hash, password, sizeof(password)))
		password_from(pending, admin.email, admin.password_hash, password, sizeof(password));
	int rc = mgr_admin_conf_write(path, m->endpoint, &admin, password[0] ? password : NULL, err);
	if (rc == 0) {
		unlink(pending);
		explicit_bzero(m->first_password, sizeof(m->first_password));
	}
	if (rc == 0 && !password[0])
		log_warn("manager", "%s has no password line: the web password of %s is not known here (set on "
			 "another host, changed, or lost); tessera admin reset-admin sets a new one (stop the manager, "
			 "then run it on this host with --config MANAGER.CONF or --data-dir %s; docs/admin.md, "
			 "\"A lost admin password\")", path, admin.email, m->data_dir);
	explicit_bzero(password, sizeof(password));
	return rc;
}

int mgr_admin_user(struct manager *m, struct user_rec *out)
{
	int rc = -ENOENT;
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n_users && rc < 0; i++)
		if (m->users[i].is_admin && !m->users[i].disabled) {
			*out = m->users[i];
			rc = 0;
		}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* ---------- the interface (core.h) ---------- */

json_t *mgr_user_json(const struct user_rec *u)
{
	char at[40] = "";
	if (u->created_ms)
		util_format_time_ms(u->created_ms, at, sizeof(at));
	return json_pack("{s:s,s:s,s:b,s:b,s:s,s:s}", "id", u->id, "email", u->email, "is_admin", u->is_admin,
			 "disabled", u->disabled, "access_key", u->access_key, "created_at", at);
}

int mgr_user_by_access_key(struct manager *m, const char *access_key, struct user_rec *out)
{
	/* users_mu, not mu: state.h says why. */
	pthread_rwlock_rdlock(&m->users_mu);
	const struct keypair_rec *k = find_key(m, access_key);
	const struct user_rec *u = k ? mgr_find_user(m, k->user_id) : NULL;
	if (u) {
		*out = *u;
		set_main(out, k);   /* the key this request is signed with */
	}
	pthread_rwlock_unlock(&m->users_mu);
	return u ? 0 : -ENOENT;
}

int mgr_user_login(struct manager *m, const char *email, const char *password, struct user_rec *out,
		   struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	const struct user_rec *found = find_by_email(m, email);
	struct user_rec u = found ? *found : (struct user_rec){0};
	pthread_mutex_unlock(&m->mu);
	/* Verify outside the lock (argon2id takes tens of milliseconds). */
	if (!found || !u.password_hash[0] || !pwhash_verify(u.password_hash, password))
		return terr_set(err, EACCES, "wrong email or password");
	if (u.disabled)
		return terr_set(err, EPERM, "the account %s is disabled; ask an administrator", u.email);
	*out = u;
	return 0;
}

json_t *mgr_users_list(struct manager *m)
{
	json_t *arr = json_array();
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n_users; i++)
		json_array_append_new(arr, mgr_user_json(&m->users[i]));
	pthread_mutex_unlock(&m->mu);
	return arr;
}

int mgr_user_create(struct manager *m, const char *email, const char *password, bool is_admin, const char *by,
		    json_t **reply, struct terr *err)
{
	struct user_rec u = {0};
	struct keypair_rec k;
	char generated[32] = "";
	int rc;
	util_strlcpy(u.email, email, sizeof(u.email));
	if (!password) {
		if ((rc = pwhash_generate(generated, sizeof(generated), err)) < 0)
			return rc;
		password = generated;
	}
	u.is_admin = is_admin;
	if ((rc = pwhash_hash(password, u.password_hash, sizeof(u.password_hash), err)) < 0 ||
	    (rc = util_new_id(u.id, err)) < 0 || (rc = new_key(&k, u.id, "", err)) < 0)
		return rc;
	set_main(&u, &k);
	u.created_ms = k.created_ms;
	pthread_mutex_lock(&m->mu);
	if (find_by_email(m, u.email)) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, EEXIST, "a user with email %s already exists", u.email);
	}
	pthread_rwlock_wrlock(&m->users_mu);
	struct user_rec *grown = realloc(m->users, (m->n_users + 1) * sizeof(*grown));
	if (grown)
		m->users = grown;
	struct keypair_rec *kgrown = grown ? realloc(m->keys, (m->n_keys + 1) * sizeof(*kgrown)) : NULL;
	if (kgrown)
		m->keys = kgrown;
	pthread_rwlock_unlock(&m->users_mu);
	if (!grown || !kgrown) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOMEM, "out of memory");
	}
	if ((rc = put_user_and_key(m->so, m->store, &u, &k, err)) < 0) {
		pthread_mutex_unlock(&m->mu);
		return rc;
	}
	pthread_rwlock_wrlock(&m->users_mu);
	m->users[m->n_users++] = u;
	m->keys[m->n_keys++] = k;
	pthread_rwlock_unlock(&m->users_mu);
	m->ix_gen++;
	/* Their personal project (projects.c): a failure to store it leaves
	 * the account usable, and the next start makes the project. */
	struct terr perr = {0};
	if (mgr_personal_project_ensure(m, &u, &perr) < 0)
		log_warn("manager", "cannot make %s's personal project now (made at the next start): %s", u.email,
			 perr.msg);
	if (u.is_admin)
		mgr_apps_users_changed(m);   /* the proxy learns of the new admin */
	pthread_mutex_unlock(&m->mu);
	log_info("manager", "%s created user %s%s", by, u.email, u.is_admin ? " (admin)" : "");
	*reply = json_pack("{s:o,s:s}", "user", mgr_user_json(&u), "secret_key", u.secret_key);
	if (generated[0])
		json_object_set_new(*reply, "password", json_string(generated));
	return 0;
}

/* The user with this id or email (mu held). */
static struct user_rec *find_ref(struct manager *m, const char *ref)
{
	for (size_t i = 0; i < m->n_users; i++)
		if (!strcmp(m->users[i].id, ref) || !strcasecmp(m->users[i].email, ref))
			return &m->users[i];
	return NULL;
}

int mgr_user_update(struct manager *m, const char *ref, int disabled, int is_admin, const char *password,
		    const struct user_rec *by, json_t **user, struct terr *err)
{
	char hash[PWHASH_ENCODED_MAX] = "";
	int rc;
	if (password && (rc = pwhash_hash(password, hash, sizeof(hash), err)) < 0)
		return rc;
	pthread_mutex_lock(&m->mu);
	struct user_rec *u = find_ref(m, ref);
	if (!u) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "no user with id or email '%s'", ref);
	}
	if (disabled > 0 && !strcmp(u->id, by->id)) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, EBUSY, "you cannot disable your own account");
	}
	/* An admin who could take their own role would leave the cluster
	 * with none when they are the last one. */
	if (is_admin == 0 && u->is_admin && !strcmp(u->id, by->id)) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, EBUSY, "you cannot take away your own administrator role; another administrator can");
	}
	struct user_rec next = *u;
	if (disabled >= 0)
		next.disabled = disabled > 0;
	if (is_admin >= 0)
		next.is_admin = is_admin > 0;
	if (password)
		util_strlcpy(next.password_hash, hash, sizeof(next.password_hash));
	if ((rc = m->so->user_put(m->store, &next, err)) < 0) {
		pthread_mutex_unlock(&m->mu);
		return rc;
	}
	pthread_rwlock_wrlock(&m->users_mu);
	bool access_changed = u->disabled != next.disabled || u->is_admin != next.is_admin;
	*u = next;
	pthread_rwlock_unlock(&m->users_mu);
	if (access_changed)
		mgr_apps_users_changed(m);   /* the proxy ends a disabled user's app connections */
	json_t *uj = mgr_user_json(u);
	pthread_mutex_unlock(&m->mu);
	log_info("manager", "%s updated user %s%s%s%s", by->email, next.email,
		 disabled >= 0 ? (next.disabled ? " (disabled)" : " (enabled)") : "",
		 is_admin >= 0 ? (next.is_admin ? " (administrator)" : " (user)") : "",
		 password ? " (password reset)" : "");
	*user = uj;
	return 0;
}

int mgr_user_set_password(struct manager *m, const char *ref, const char *password, const struct user_rec *by,
			  json_t **reply, struct terr *err)
{
	char generated[32] = "";
	int rc;
	if (!password) {
		if ((rc = pwhash_generate(generated, sizeof(generated), err)) < 0)
			return rc;
		password = generated;
	}
	json_t *user = NULL;
	if ((rc = mgr_user_update(m, ref, -1, -1, password, by, &user, err)) < 0)
		return rc;
	*reply = json_pack("{s:o}", "user", user);
	if (generated[0])
		json_object_set_new(*reply, "password", json_string(generated));
	explicit_bzero(generated, sizeof(generated));
	return 0;
}

int mgr_user_change_own_password(struct manager *m, const struct user_rec *by, const char *old_password,
				 const char *password, json_t **reply, struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	const struct user_rec *me = mgr_find_user(m, by->id);
	char hash[PWHASH_ENCODED_MAX] = "";
	if (me)
		util_strlcpy(hash, me->password_hash, sizeof(hash));
	pthread_mutex_unlock(&m->mu);
	if (!me)
		return terr_set(err, ENOENT, "your account was removed");
	/* Outside the lock, as a login (argon2id takes tens of ms). A
	 * browser left logged in must not be enough to take the account:
	 * the current password is asked for. */
	if (!hash[0] || !pwhash_verify(hash, old_password))
		return terr_set(err, EPERM, "your current password is wrong");
	if (!strcmp(old_password, password))
		return terr_set(err, EINVAL, "the new password is the same as the current one; choose another");
	json_t *user = NULL;
	int rc = mgr_user_update(m, by->id, -1, -1, password, by, &user, err);
	if (rc < 0)
		return rc;
	*reply = json_pack("{s:o}", "user", user);
	return 0;
}

/* ---------- API keys ---------- */

static json_t *key_json(const struct keypair_rec *k, const struct user_rec *owner, const char *current)
{
	char at[40] = "";
	if (k->created_ms)
		util_format_time_ms(k->created_ms, at, sizeof(at));
	return json_pack("{s:s,s:s,s:s,s:b,s:b}", "access_key", k->access_key, "label", k->label, "created_at", at,
			 "main", owner && !strcmp(owner->access_key, k->access_key),
			 "current", current && !strcmp(current, k->access_key));
}

/* The keys of user id, oldest first (mu held). */
static json_t *keys_of(struct manager *m, const struct user_rec *u, const char *current)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < m->n_keys; i++)
		if (!strcmp(m->keys[i].user_id, u->id))
			json_array_append_new(arr, key_json(&m->keys[i], u, current));
	return arr;
}

json_t *mgr_keys_list(struct manager *m, const struct user_rec *u)
{
	pthread_mutex_lock(&m->mu);
	const struct user_rec *me = mgr_find_user(m, u->id);
	/* u's access_key is the key its request was signed with. */
	json_t *arr = me ? keys_of(m, me, u->access_key) : json_array();
	json_t *reply = json_pack("{s:o,s:s,s:i}", "keypairs", arr, "endpoint", m->endpoint, "max", MGR_MAX_KEYS);
	pthread_mutex_unlock(&m->mu);
	return reply;
}

int mgr_key_create(struct manager *m, const struct user_rec *u, const char *label, json_t **reply,
		   struct terr *err)
{
	struct keypair_rec k;
	int rc = new_key(&k, u->id, label, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->mu);
	const struct user_rec *me = mgr_find_user(m, u->id);
	size_t mine = 0;
	for (size_t i = 0; i < m->n_keys; i++)
		mine += !strcmp(m->keys[i].user_id, u->id);
	if (!me)
		rc = terr_set(err, ENOENT, "your account was removed");
	else if (mine >= MGR_MAX_KEYS)
		rc = terr_set(err, EBUSY, "you have %zu API keys, the most a user may have: revoke one first", mine);
	else if ((rc = m->so->keypair_put(m->store, &k, err)) == 0) {
		pthread_rwlock_wrlock(&m->users_mu);
		rc = keys_append(m, &k);
		pthread_rwlock_unlock(&m->users_mu);
		if (rc < 0) {
			struct terr ignored = {0};
			m->so->keypair_delete(m->store, k.access_key, &ignored);
			rc = terr_set(err, ENOMEM, "out of memory");
		}
	}
	if (rc == 0)
		*reply = json_pack("{s:o,s:s,s:s}", "keypair", key_json(&k, me, NULL), "secret_key", k.secret_key,
				   "endpoint", m->endpoint);
	pthread_mutex_unlock(&m->mu);
	if (rc == 0)
		log_info("manager", "%s made API key %s%s%s", u->email, k.access_key, k.label[0] ? " " : "", k.label);
	explicit_bzero(k.secret_key, sizeof(k.secret_key));
	return rc;
}

int mgr_key_revoke(struct manager *m, const struct user_rec *by, const char *access_key, json_t **reply,
		   struct terr *err)
{
	struct keypair_rec fresh;
	int rc = new_key(&fresh, "", "", err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->mu);
	struct keypair_rec *k = find_key(m, access_key);
	struct user_rec *owner = k ? (struct user_rec *)mgr_find_user(m, k->user_id) : NULL;
	/* Someone else's key reads as no key at all (admins: every key). */
	if (!k || !owner || (strcmp(owner->id, by->id) && !by->is_admin)) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "no API key %s of yours", access_key);
	}
	bool main = !strcmp(owner->access_key, k->access_key);
	struct user_rec next = *owner;
	if (main) {
		/* A user always has a main key: the webserver signs with it. */
		util_strlcpy(fresh.user_id, owner->id, sizeof(fresh.user_id));
		util_strlcpy(fresh.label, "", sizeof(fresh.label));
		set_main(&next, &fresh);
	}
	const struct store_ops *so = m->so;
	if ((rc = so->begin(m->store, err)) == 0) {
		if ((main && ((rc = so->keypair_put(m->store, &fresh, err)) < 0 ||
			      (rc = so->user_put(m->store, &next, err)) < 0)) ||
		    (rc = so->keypair_delete(m->store, access_key, err)) < 0)
			so->rollback(m->store);
		else
			rc = so->commit(m->store, err);
	}
	if (rc == 0) {
		pthread_rwlock_wrlock(&m->users_mu);
		keys_remove_at(m, (size_t)(k - m->keys));
		if (main) {
			*owner = next;
			if (keys_append(m, &fresh) < 0)
				log_error("manager", "out of memory: %s's new main key is in the store only until a restart",
					  owner->email);
		}
		pthread_rwlock_unlock(&m->users_mu);
		*reply = json_pack("{s:s,s:b}", "revoked", access_key, "main_replaced", main);
		log_info("manager", "%s revoked API key %s of %s%s", by->email, access_key, owner->email,
			 main ? " (its main key: a new one replaces it; its web logins end)" : "");
	}
	pthread_mutex_unlock(&m->mu);
	explicit_bzero(fresh.secret_key, sizeof(fresh.secret_key));
	return rc;
}

int mgr_key_rotate(struct manager *m, const struct user_rec *by, const char *access_key, json_t **reply,
		   struct terr *err)
{
	struct keypair_rec fresh;
	int rc = new_key(&fresh, by->id, "", err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->mu);
	struct keypair_rec *k = find_key(m, access_key);
	const struct user_rec *me = mgr_find_user(m, by->id);
	/* Only one's own: the answer holds the new secret, which no one
	 * else may read (an admin revokes another's key instead). */
	if (!k || !me || strcmp(k->user_id, by->id)) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "no API key %s of yours", access_key);
	}
	if (!strcmp(me->access_key, k->access_key)) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, EBUSY, "%s is your main key, the one the web UI signs with: revoke it to replace it "
				"(that signs you out of the web UI)", access_key);
	}
	util_strlcpy(fresh.label, k->label, sizeof(fresh.label));
	const struct store_ops *so = m->so;
	if ((rc = so->begin(m->store, err)) == 0) {
		if ((rc = so->keypair_put(m->store, &fresh, err)) < 0 ||
		    (rc = so->keypair_delete(m->store, access_key, err)) < 0)
			so->rollback(m->store);
		else
			rc = so->commit(m->store, err);
	}
	if (rc == 0) {
		/* In place: no allocation that could fail half-way. */
		pthread_rwlock_wrlock(&m->users_mu);
		explicit_bzero(k->secret_key, sizeof(k->secret_key));
		*k = fresh;
		pthread_rwlock_unlock(&m->users_mu);
		*reply = json_pack("{s:o,s:s,s:s,s:s}", "keypair", key_json(&fresh, me, NULL), "secret_key",
				   fresh.secret_key, "endpoint", m->endpoint, "revoked", access_key);
		log_info("manager", "%s rotated API key %s: %s replaces it", by->email, access_key, fresh.access_key);
	}
	pthread_mutex_unlock(&m->mu);
	explicit_bzero(fresh.secret_key, sizeof(fresh.secret_key));
	return rc;
}

/* ---------- one user, and removing one ---------- */

/* The sessions of user id not yet ended (names into names, at most
 * max listed) and the live folders they own; counts returned. */
static void holdings(struct manager *m, const char *id, json_t *sessions, json_t *folders, size_t *n_sessions,
		     size_t *n_folders)
{
	*n_sessions = *n_folders = 0;
	for (size_t i = 0; i < m->n_sessions; i++) {
		const struct msession *s = m->sessions[i];
		if (strcmp(s->rec.owner_id, id) || session_status_final(s->rec.status) || mgr_session_is_sub(s))
			continue;
		(*n_sessions)++;
		if (sessions)
			json_array_append_new(sessions, json_pack("{s:s,s:s,s:s}", "name", s->rec.name, "id", s->rec.id,
								  "status", session_status_name(s->rec.status)));
	}
	for (size_t i = 0; i < m->n_folders; i++) {
		const struct mfolder *f = m->folders[i];
		if (strcmp(f->rec.owner_id, id) || f->rec.trashed_ms)
			continue;
		(*n_folders)++;
		if (folders)
			json_array_append_new(folders, json_pack("{s:s,s:s}", "name", f->rec.name, "id", f->rec.id));
	}
}

int mgr_user_get(struct manager *m, const char *ref, json_t **out, struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	const struct user_rec *u = find_ref(m, ref);
	if (!u) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "no user with id or email '%s'", ref);
	}
	json_t *sessions = json_array(), *folders = json_array();
	size_t ns, nf;
	holdings(m, u->id, sessions, folders, &ns, &nf);
	*out = json_pack("{s:o,s:o,s:o,s:o}", "user", mgr_user_json(u), "keypairs", keys_of(m, u, NULL),
			 "sessions", sessions, "folders", folders);
	pthread_mutex_unlock(&m->mu);
	return 0;
}

/* "a, b, c and 2 more" from the "name" of each object of arr. */
static void names_text(json_t *arr, char *out, size_t n)
{
	size_t len = 0, i;
	json_t *x;
	out[0] = '\0';
	json_array_foreach(arr, i, x) {
		if (i == 5) {
			snprintf(out + len, n - len, " and %zu more", json_array_size(arr) - 5);
			return;
		}
		len += (size_t)snprintf(out + len, n - len, "%s%s", i ? ", " : "",
					json_string_value(json_object_get(x, "name")) ?: "");
		if (len >= n)
			return;
	}
}

int mgr_user_remove(struct manager *m, const char *ref, const struct user_rec *by, json_t **reply,
		    struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	struct user_rec *u = find_ref(m, ref);
	int rc = 0;
	json_t *sessions = json_array(), *folders = json_array();
	char names[512];
	size_t ns = 0, nf = 0, nkeys = 0, ended = 0;
	if (!u) {
		rc = terr_set(err, ENOENT, "no user with id or email '%s'", ref);
		goto out;
	}
	if (!strcmp(u->id, by->id)) {
		rc = terr_set(err, EBUSY, "you cannot remove your own account; another administrator can");
		goto out;
	}
	/* What the user still runs or keeps data in is theirs to end or
	 * move first: removing them would leave it without an owner. */
	holdings(m, u->id, sessions, folders, &ns, &nf);
	if (ns) {
		names_text(sessions, names, sizeof(names));
		rc = terr_set(err, EBUSY, "%s has %zu session%s not ended (%s): remove them first (tessera session rm "
			      "NAME --owner %s) or disable the account instead (tessera user set %s --disabled)",
			      u->email, ns, ns == 1 ? "" : "s", names, u->email, u->email);
		goto out;
	}
	if (nf) {
		names_text(folders, names, sizeof(names));
		rc = terr_set(err, EBUSY, "%s owns %zu folder%s (%s): move them to the trash first (tessera folder rm "
			      "ID; tessera user info %s lists their ids) or disable the account instead",
			      u->email, nf, nf == 1 ? "" : "s", names, u->email);
		goto out;
	}
	for (size_t i = 0; i < m->n_keys; i++)
		nkeys += !strcmp(m->keys[i].user_id, u->id);
	for (size_t i = 0; i < m->n_sessions; i++)
		ended += !strcmp(m->sessions[i]->rec.owner_id, u->id);
	if ((rc = m->so->user_delete(m->store, u->id, err)) < 0)
		goto out;
	struct user_rec gone = *u;
	pthread_rwlock_wrlock(&m->users_mu);
	for (size_t i = m->n_keys; i-- > 0;)
		if (!strcmp(m->keys[i].user_id, gone.id))
			keys_remove_at(m, i);
	size_t at = (size_t)(u - m->users);
	memmove(&m->users[at], &m->users[at + 1], (m->n_users - at - 1) * sizeof(*m->users));
	m->n_users--;
	m->ix_gen++;
	pthread_rwlock_unlock(&m->users_mu);
	mgr_apps_users_changed(m);   /* the proxy forgets them */
	mgr_project_user_removed(m, gone.id);
	*reply = json_pack("{s:o,s:I,s:I}", "removed", mgr_user_json(&gone), "revoked_keys", (json_int_t)nkeys,
			   "ended_sessions_kept", (json_int_t)ended);
	log_info("manager", "%s removed user %s (%zu API keys revoked; %zu ended sessions kept in the history)",
		 by->email, gone.email, nkeys, ended);
	explicit_bzero(gone.secret_key, sizeof(gone.secret_key));
out:
	pthread_mutex_unlock(&m->mu);
	json_decref(sessions);
	json_decref(folders);
	return rc;
}

/* ---------- tessera admin reset-admin (no manager running) ---------- */

struct offline {
	struct user_rec *users;
	size_t n_users;
	struct keypair_rec *keys;
	size_t n_keys;
};

static int offline_user(void *ud, const struct user_rec *u)
{
	struct offline *o = ud;
	struct user_rec *n = realloc(o->users, (o->n_users + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	o->users = n;
	o->users[o->n_users++] = *u;
	return 0;
}

static int offline_key(void *ud, const struct keypair_rec *k)
{
	struct offline *o = ud;
	struct keypair_rec *n = realloc(o->keys, (o->n_keys + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	o->keys = n;
	o->keys[o->n_keys++] = *k;
	return 0;
}

/* The admin reset-admin works on: the one with email, else
 * admin@tessera.local, else the first admin made. */
static struct user_rec *offline_target(struct offline *o, const char *email)
{
	for (size_t i = 0; email && i < o->n_users; i++)
		if (!strcasecmp(o->users[i].email, email))
			return &o->users[i];
	if (email)
		return NULL;
	for (size_t i = 0; i < o->n_users; i++)
		if (o->users[i].is_admin && !strcasecmp(o->users[i].email, ADMIN_EMAIL))
			return &o->users[i];
	for (size_t i = 0; i < o->n_users; i++)
		if (o->users[i].is_admin)
			return &o->users[i];
	return NULL;
}

/* The transaction of reset-admin: the admin's row, its new main key and
 * the revocation of the others when asked, its main key when missing. */
static int offline_write(const struct store_ops *so, struct store *st, const struct offline *o,
			 const struct user_rec *u, const struct keypair_rec *fresh, bool had_main, size_t *revoked,
			 struct terr *err)
{
	int rc = so->begin(st, err);
	if (rc < 0)
		return rc;
	struct keypair_rec mk = main_key_of(u);
	if ((rc = so->user_put(st, u, err)) < 0 || (fresh && (rc = so->keypair_put(st, fresh, err)) < 0) ||
	    (!fresh && !had_main && (rc = so->keypair_put(st, &mk, err)) < 0))
		goto fail;
	for (size_t i = 0; fresh && i < o->n_keys; i++) {
		if (strcmp(o->keys[i].user_id, u->id))
			continue;
		if ((rc = so->keypair_delete(st, o->keys[i].access_key, err)) < 0)
			goto fail;
		(*revoked)++;
	}
	return so->commit(st, err);
fail:
	so->rollback(st);
	return rc;
}

int manager_reset_admin(const struct manager_config *cfg, const struct reset_admin *ra,
			struct reset_admin_result *res, struct terr *err)
{
	const struct store_ops *so = NULL;
	struct store *st = NULL;
	struct offline o = {0};
	char where[512], generated[32] = "", hash[PWHASH_ENCODED_MAX];
	const char *password = ra->password;
	memset(res, 0, sizeof(*res));
	int rc = util_mkdir_p(cfg->data_dir, 0700, err);
	if (rc < 0 || (rc = store_open(cfg->store, cfg->data_dir, &so, &st, where, sizeof(where), err)) < 0)
		return rc;
	/* A manager keeps the users in its memory and would never see the
	 * change (and could write over it): none may be active. */
	if (so->lead && (rc = so->lead(st, NULL, NULL, err)) < 0) {
		if (rc == -EBUSY)
			terr_set(err, EBUSY, "a manager is active on %s: stop it (and its standbys) first; nothing was "
				 "changed", where);
		goto out;
	}
	if ((rc = so->user_load_all(st, offline_user, &o, err)) < 0 ||
	    (rc = so->keypair_load_all(st, offline_key, &o, err)) < 0)
		goto out;
	struct user_rec *u = offline_target(&o, ra->email);
	if (!u && ra->email) {
		rc = terr_set(err, ENOENT, "%s: no user %s (tessera admin reset-admin without --email picks the admin)",
			      where, ra->email);
		goto out;
	}
	if (!password) {
		if ((rc = pwhash_generate(generated, sizeof(generated), err)) < 0)
			goto out;
		password = generated;
	}
	if ((rc = pwhash_hash(password, hash, sizeof(hash), err)) < 0)
		goto out;
	struct user_rec made = {0};
	struct keypair_rec fresh;
	bool new_user = !u;
	if (new_user) {
		/* No admin at all (a database emptied by hand): one as the
		 * first start makes it. */
		if ((rc = util_new_id(made.id, err)) < 0)
			goto out;
		util_strlcpy(made.email, ADMIN_EMAIL, sizeof(made.email));
		made.created_ms = util_now_ms();
		u = &made;
	}
	bool want_key = ra->new_key || new_user;
	if (want_key && (rc = new_key(&fresh, u->id, "", err)) < 0)
		goto out;
	bool had_main = false;
	for (size_t i = 0; i < o.n_keys; i++)
		had_main = had_main || (!strcmp(o.keys[i].access_key, u->access_key) && !strcmp(o.keys[i].user_id, u->id));
	u->is_admin = true;
	u->disabled = false;
	util_strlcpy(u->password_hash, hash, sizeof(u->password_hash));
	if (want_key)
		set_main(u, &fresh);
	size_t revoked = 0;
	if ((rc = offline_write(so, st, &o, u, want_key ? &fresh : NULL, had_main, &revoked, err)) < 0)
		goto out;
	res->user = *u;
	res->revoked_keys = revoked;
	res->created = new_user;
	util_strlcpy(res->where, where, sizeof(res->where));
	if (generated[0])
		util_strlcpy(res->generated_password, generated, sizeof(res->generated_password));
	if (want_key)
		explicit_bzero(fresh.secret_key, sizeof(fresh.secret_key));
	log_info("admin", "%s: reset the password of %s%s", where, u->email,
		 ra->new_key ? " and replaced its keys with a new one" : "");
out:
	if (st)
		so->close(st);
	for (size_t i = 0; i < o.n_keys; i++)
		explicit_bzero(o.keys[i].secret_key, sizeof(o.keys[i].secret_key));
	free(o.keys);
	free(o.users);
	explicit_bzero(generated, sizeof(generated));
	return rc;
}

/* ---------- SSH public keys (every user, their own) ---------- */

json_t *mgr_sshkeys_list(struct manager *m, const struct user_rec *u)
{
	pthread_mutex_lock(&m->mu);
	const struct user_rec *me = mgr_find_user(m, u->id);
	json_t *reply = json_pack("{s:o,s:i}", "keys", sshkeys_json(me ? me->ssh_keys : ""), "max", SSHKEYS_MAX);
	pthread_mutex_unlock(&m->mu);
	return reply;
}

/* Adds (text) or removes (ref) one of u's SSH keys: the store first,
 * then memory, as every change of a user. */
static int sshkeys_change(struct manager *m, const struct user_rec *u, const char *text, const char *ref,
			  json_t **reply, struct terr *err)
{
	struct sshkey_info k;
	pthread_mutex_lock(&m->mu);
	struct user_rec *me = (struct user_rec *)mgr_find_user(m, u->id);
	if (!me) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "your account was removed");
	}
	struct user_rec *next = malloc(sizeof(*next));   /* 16 KB of keys: off the stack */
	if (!next) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOMEM, "out of memory");
	}
	*next = *me;
	int rc = text ? sshkeys_add(next->ssh_keys, sizeof(next->ssh_keys), text, &k, err)
		      : sshkeys_remove(next->ssh_keys, ref, &k, err);
	if (rc == 0)
		rc = m->so->user_put(m->store, next, err);
	if (rc == 0) {
		pthread_rwlock_wrlock(&m->users_mu);
		memcpy(me->ssh_keys, next->ssh_keys, sizeof(me->ssh_keys));
		pthread_rwlock_unlock(&m->users_mu);
		*reply = json_pack("{s:s,s:s,s:s,s:s}", "id", k.id, "type", k.type, "fingerprint", k.fingerprint,
				   "comment", k.comment);
	}
	pthread_mutex_unlock(&m->mu);
	free(next);
	if (rc == 0)
		log_info("manager", "%s %s SSH key %s%s%s", u->email, text ? "added" : "removed", k.fingerprint,
			 k.comment[0] ? " " : "", k.comment);
	return rc;
}

int mgr_sshkey_add(struct manager *m, const struct user_rec *u, const char *text, json_t **reply, struct terr *err)
{
	return sshkeys_change(m, u, text ? text : "", NULL, reply, err);
}

int mgr_sshkey_remove(struct manager *m, const struct user_rec *u, const char *ref, json_t **reply,
		      struct terr *err)
{
	return sshkeys_change(m, u, NULL, ref ? ref : "", reply, err);
}
