/* Users: the list in memory (few, found by a scan), written through to the
 * store's users table; the admin made on first start; password checks,
 * creation and changes. Passwords are kept as argon2id hashes only, and
 * hashing runs outside the lock (it takes tens of milliseconds). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/sign.h"
#include "common/util.h"
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

const struct user_rec *mgr_find_user_by_key(struct manager *m, const char *access_key)
{
	for (size_t i = 0; i < m->n_users; i++)
		if (!strcmp(m->users[i].access_key, access_key))
			return &m->users[i];
	return NULL;
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
	}
	pthread_rwlock_unlock(&m->users_mu);
	return n ? 0 : -ENOMEM;
}

/* Fresh access key ("TK" + 18 upper-case hex) and secret key into u. */
static int new_keypair(struct user_rec *u, struct terr *err)
{
	char ak[24];
	int rc;
	if ((rc = sign_random_hex(9, ak, sizeof(ak), err)) < 0 ||
	    (rc = sign_random_hex(20, u->secret_key, sizeof(u->secret_key), err)) < 0)
		return rc;
	for (char *p = ak; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	snprintf(u->access_key, sizeof(u->access_key), "TK%s", ak);
	return 0;
}

int mgr_create_admin(struct manager *m, struct terr *err)
{
	struct user_rec u = {0};
	int rc;
	if ((rc = util_new_id(u.id, err)) < 0 || (rc = new_keypair(&u, err)) < 0)
		return rc;
	util_strlcpy(u.email, ADMIN_EMAIL, sizeof(u.email));
	u.is_admin = true;
	u.created_ms = util_now_ms();
	/* A generated web password: only its argon2id hash is stored; the plain
	 * one goes to admin.conf once (manager_serve). */
	if ((rc = pwhash_generate(m->first_password, sizeof(m->first_password), err)) < 0 ||
	    (rc = pwhash_hash(m->first_password, u.password_hash, sizeof(u.password_hash), err)) < 0)
		return rc;
	if ((rc = m->so->user_put(m->store, &u, err)) < 0)
		return rc;
	log_info("manager", "first start: created admin user %s with access key %s", u.email, u.access_key);
	return mgr_user_load(m, &u);
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
	const struct user_rec *u = mgr_find_user_by_key(m, access_key);
	if (u)
		*out = *u;
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
	char generated[32] = "";
	int rc;
	util_strlcpy(u.email, email, sizeof(u.email));
	if (!password) {
		if ((rc = pwhash_generate(generated, sizeof(generated), err)) < 0)
			return rc;
		password = generated;
	}
	u.is_admin = is_admin;
	u.created_ms = util_now_ms();
	if ((rc = pwhash_hash(password, u.password_hash, sizeof(u.password_hash), err)) < 0 ||
	    (rc = util_new_id(u.id, err)) < 0 || (rc = new_keypair(&u, err)) < 0)
		return rc;
	pthread_mutex_lock(&m->mu);
	if (find_by_email(m, u.email)) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, EEXIST, "a user with email %s already exists", u.email);
	}
	pthread_rwlock_wrlock(&m->users_mu);
	struct user_rec *grown = realloc(m->users, (m->n_users + 1) * sizeof(*grown));
	if (grown)
		m->users = grown;
	pthread_rwlock_unlock(&m->users_mu);
	if (!grown) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOMEM, "out of memory");
	}
	if ((rc = m->so->user_put(m->store, &u, err)) < 0) {
		pthread_mutex_unlock(&m->mu);
		return rc;
	}
	pthread_rwlock_wrlock(&m->users_mu);
	m->users[m->n_users++] = u;
	pthread_rwlock_unlock(&m->users_mu);
	if (u.is_admin)
		mgr_apps_users_changed(m);   /* the proxy learns of the new admin */
	pthread_mutex_unlock(&m->mu);
	log_info("manager", "%s created user %s%s", by, u.email, u.is_admin ? " (admin)" : "");
	*reply = json_pack("{s:o,s:s}", "user", mgr_user_json(&u), "secret_key", u.secret_key);
	if (generated[0])
		json_object_set_new(*reply, "password", json_string(generated));
	return 0;
}

int mgr_user_update(struct manager *m, const char *ref, int disabled, const char *password,
		    const struct user_rec *by, json_t **user, struct terr *err)
{
	char hash[PWHASH_ENCODED_MAX] = "";
	int rc;
	if (password && (rc = pwhash_hash(password, hash, sizeof(hash), err)) < 0)
		return rc;
	pthread_mutex_lock(&m->mu);
	struct user_rec *u = NULL;
	for (size_t i = 0; i < m->n_users && !u; i++)
		if (!strcmp(m->users[i].id, ref) || !strcasecmp(m->users[i].email, ref))
			u = &m->users[i];
	if (!u) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "no user with id or email '%s'", ref);
	}
	if (disabled > 0 && !strcmp(u->id, by->id)) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, EBUSY, "you cannot disable your own account");
	}
	struct user_rec next = *u;
	if (disabled >= 0)
		next.disabled = disabled > 0;
	if (password)
		util_strlcpy(next.password_hash, hash, sizeof(next.password_hash));
	if ((rc = m->so->user_put(m->store, &next, err)) < 0) {
		pthread_mutex_unlock(&m->mu);
		return rc;
	}
	pthread_rwlock_wrlock(&m->users_mu);
	bool access_changed = u->disabled != next.disabled;
	*u = next;
	pthread_rwlock_unlock(&m->users_mu);
	if (access_changed)
		mgr_apps_users_changed(m);   /* the proxy ends a disabled user's app connections */
	json_t *uj = mgr_user_json(u);
	pthread_mutex_unlock(&m->mu);
	log_info("manager", "%s updated user %s%s%s", by->email, next.email,
		 disabled >= 0 ? (next.disabled ? " (disabled)" : " (enabled)") : "", password ? " (password reset)" : "");
	*user = uj;
	return 0;
}
