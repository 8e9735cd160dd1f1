/* manager: users through the core interface (core.h) on a real manager on
 * a temporary data dir: the first admin, creation (with a given or a
 * generated password), a taken email, password checks, disabling and
 * password resets, the refusals with their codes, and persistence across
 * a reopen; API keys, and self-service: one's own password changed with
 * the current one, a key rotated. */
#include "manager/core.h"
#include "testlib.h"

#include <jansson.h>
#include <stdlib.h>

#include <unistd.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/util.h"
#include "manager/manager.h"

static char data_dir[] = "/tmp/tessera-users-XXXXXX";
static struct manager *mgr;
static struct user_rec admin;

static struct manager *open_manager(void)
{
	struct manager_config cfg = {.data_dir = data_dir, .listen = "127.0.0.1:0", .dispatch_workers = 1};
	struct manager *m = NULL;
	struct terr err = {0};
	if (manager_open(&m, &cfg, &err) < 0)
		FAILF("manager_open(%s): %s", data_dir, err.msg);
	return m;
}

static const char *str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* Logs in; returns 0 or -code, with the message in err. */
static int login(const char *email, const char *password, struct terr *err)
{
	struct user_rec u;
	memset(err, 0, sizeof(*err));
	int rc = mgr_user_login(mgr, email, password, &u, err);
	if (rc == 0 && strcmp(u.email, email))
		FAILF("login as %s gave %s", email, u.email);
	return rc;
}

TEST(first_admin)
{
	json_t *users = mgr_users_list(mgr);
	CHECK_INT(json_array_size(users), 1);
	json_t *u = json_array_get(users, 0);
	CHECK_STR(str(u, "email"), "admin@tessera.local");
	CHECK(json_is_true(json_object_get(u, "is_admin")));
	/* public fields only */
	CHECK(json_object_get(u, "secret_key") == NULL);
	CHECK(json_object_get(u, "password_hash") == NULL);
	CHECK_INT(mgr_user_by_access_key(mgr, str(u, "access_key"), &admin), 0);
	CHECK_STR(admin.email, "admin@tessera.local");
	CHECK(admin.secret_key[0] != '\0');
	json_decref(users);
	struct user_rec none;
	CHECK_INT(mgr_user_by_access_key(mgr, "TKNOSUCHKEY", &none), -ENOENT);
}

static char generated[64];

TEST(create)
{
	json_t *reply = NULL;
	struct terr err = {0};
	CHECK_INT(mgr_user_create(mgr, "alice@example.org", "alice's password", false, admin.email, &reply, &err), 0);
	json_t *u = json_object_get(reply, "user");
	CHECK_STR(str(u, "email"), "alice@example.org");
	CHECK(json_is_false(json_object_get(u, "is_admin")));
	CHECK(json_is_false(json_object_get(u, "disabled")));
	CHECK(!strncmp(str(u, "access_key") ?: "", "TK", 2));
	CHECK_INT(strlen(str(u, "access_key") ?: ""), 20);
	CHECK_INT(strlen(str(reply, "secret_key") ?: ""), 40);
	CHECK(json_object_get(reply, "password") == NULL);   /* given, not generated */
	/* the keypair finds her */
	struct user_rec alice;
	CHECK_INT(mgr_user_by_access_key(mgr, str(u, "access_key"), &alice), 0);
	CHECK_STR(alice.secret_key, str(reply, "secret_key"));
	CHECK_STR(alice.email, "alice@example.org");
	json_decref(reply);

	/* no password: one is generated and given back once */
	reply = NULL;
	CHECK_INT(mgr_user_create(mgr, "bob@example.org", NULL, true, admin.email, &reply, &err), 0);
	CHECK(json_is_true(json_object_get(json_object_get(reply, "user"), "is_admin")));
	CHECK(str(reply, "password") != NULL);
	util_strlcpy(generated, str(reply, "password") ?: "", sizeof(generated));
	CHECK(strlen(generated) >= 12);
	json_decref(reply);

	/* an email is taken once */
	reply = NULL;
	CHECK_INT(mgr_user_create(mgr, "alice@example.org", "another password", false, admin.email, &reply, &err),
		  -EEXIST);
	CHECK_STR(err.msg, "a user with email alice@example.org already exists");
	CHECK(reply == NULL);
	json_t *users = mgr_users_list(mgr);
	CHECK_INT(json_array_size(users), 3);
	json_decref(users);
}

TEST(passwords)
{
	struct terr err;
	CHECK_INT(login("alice@example.org", "alice's password", &err), 0);
	CHECK_INT(login("bob@example.org", generated, &err), 0);
	/* a wrong password and an unknown email read the same */
	CHECK_INT(login("alice@example.org", "wrong password", &err), -EACCES);
	CHECK_STR(err.msg, "wrong email or password");
	CHECK_INT(login("nobody@example.org", "alice's password", &err), -EACCES);
	CHECK_STR(err.msg, "wrong email or password");
}

TEST(update)
{
	json_t *u = NULL;
	struct terr err = {0};
	/* by email, in any case */
	CHECK_INT(mgr_user_update(mgr, "ALICE@example.org", 1, -1, NULL, &admin, &u, &err), 0);
	CHECK(json_is_true(json_object_get(u, "disabled")));
	CHECK_STR(str(u, "email"), "alice@example.org");
	json_decref(u);
	/* a disabled account: the right password says so, a wrong one not */
	CHECK_INT(login("alice@example.org", "alice's password", &err), -EPERM);
	CHECK_CONTAINS(err.msg, "alice@example.org is disabled");
	CHECK_INT(login("alice@example.org", "wrong password", &err), -EACCES);
	/* enabled again, by id this time, with a new password */
	json_t *users = mgr_users_list(mgr);
	const char *alice_id = NULL;
	size_t i;
	json_t *x;
	json_array_foreach(users, i, x)
		if (!strcmp(str(x, "email"), "alice@example.org"))
			alice_id = str(x, "id");
	CHECK(alice_id != NULL);
	u = NULL;
	CHECK_INT(mgr_user_update(mgr, alice_id ?: "", 0, -1, "new password", &admin, &u, &err), 0);
	CHECK(json_is_false(json_object_get(u, "disabled")));
	json_decref(u);
	json_decref(users);
	CHECK_INT(login("alice@example.org", "alice's password", &err), -EACCES);
	CHECK_INT(login("alice@example.org", "new password", &err), 0);
	/* only the password: the flag stays as it is */
	u = NULL;
	CHECK_INT(mgr_user_update(mgr, "bob@example.org", -1, -1, "bob's own", &admin, &u, &err), 0);
	CHECK(json_is_false(json_object_get(u, "disabled")));
	json_decref(u);

	/* refusals */
	u = NULL;
	CHECK_INT(mgr_user_update(mgr, "nobody@example.org", 1, -1, NULL, &admin, &u, &err), -ENOENT);
	CHECK_STR(err.msg, "no user with id or email 'nobody@example.org'");
	CHECK_INT(mgr_user_update(mgr, admin.id, 1, -1, NULL, &admin, &u, &err), -EBUSY);
	CHECK_STR(err.msg, "you cannot disable your own account");
	CHECK(u == NULL);
	/* enabling oneself, or one's own new password, is fine */
	CHECK_INT(mgr_user_update(mgr, admin.email, 0, -1, NULL, &admin, &u, &err), 0);
	json_decref(u);
}

TEST(persistence)
{
	manager_close(mgr);
	mgr = open_manager();
	if (!mgr)
		return;
	json_t *users = mgr_users_list(mgr);
	CHECK_INT(json_array_size(users), 3);
	json_decref(users);
	struct terr err;
	CHECK_INT(login("alice@example.org", "new password", &err), 0);
	CHECK_INT(login("bob@example.org", "bob's own", &err), 0);
	CHECK_INT(login("bob@example.org", generated, &err), -EACCES);
	/* no second admin is made on a reopen */
	struct user_rec again;
	CHECK_INT(mgr_user_by_access_key(mgr, admin.access_key, &again), 0);
	CHECK_STR(again.id, admin.id);
}

/* The user a key signs as (the key and its secret in it), or a failed
 * check. */
static int as_key(const char *ak, struct user_rec *out)
{
	return mgr_user_by_access_key(mgr, ak ? ak : "", out);
}

static json_t *key_of(json_t *list, const char *ak)
{
	size_t i;
	json_t *k;
	json_array_foreach(json_object_get(list, "keypairs"), i, k)
		if (!strcmp(str(k, "access_key") ?: "", ak))
			return k;
	return NULL;
}

/* Self-service API keys: made, listed, revoked; a revoked key finds no
 * one; the main key, revoked, is replaced; another's key reads as none;
 * at most MGR_MAX_KEYS. */
TEST(api_keys)
{
	struct user_rec alice, bob, again;
	struct terr err = {0};
	CHECK_INT(mgr_user_login(mgr, "alice@example.org", "new password", &alice, &err), 0);
	CHECK_INT(mgr_user_login(mgr, "bob@example.org", "bob's own", &bob, &err), 0);
	char main_ak[64];
	util_strlcpy(main_ak, alice.access_key, sizeof(main_ak));

	json_t *list = mgr_keys_list(mgr, &alice);
	CHECK_INT(json_array_size(json_object_get(list, "keypairs")), 1);
	json_t *k = key_of(list, main_ak);
	CHECK(k && json_is_true(json_object_get(k, "main")) && json_is_true(json_object_get(k, "current")));
	json_decref(list);

	json_t *reply = NULL;
	CHECK_INT(mgr_key_create(mgr, &alice, "laptop", &reply, &err), 0);
	char laptop[64], secret[128];
	util_strlcpy(laptop, str(json_object_get(reply, "keypair"), "access_key") ?: "", sizeof(laptop));
	util_strlcpy(secret, str(reply, "secret_key") ?: "", sizeof(secret));
	CHECK_STR(str(json_object_get(reply, "keypair"), "label"), "laptop");
	CHECK(json_is_false(json_object_get(json_object_get(reply, "keypair"), "main")));
	CHECK_INT(strlen(secret), 40);
	json_decref(reply);
	/* the new key signs as alice, with its own secret */
	CHECK_INT(as_key(laptop, &again), 0);
	CHECK_STR(again.email, "alice@example.org");
	CHECK_STR(again.secret_key, secret);
	CHECK_STR(again.access_key, laptop);
	list = mgr_keys_list(mgr, &again);
	CHECK_INT(json_array_size(json_object_get(list, "keypairs")), 2);
	CHECK(json_is_true(json_object_get(key_of(list, laptop), "current")));
	CHECK(json_is_false(json_object_get(key_of(list, main_ak), "current")));
	CHECK(json_object_get(key_of(list, laptop), "secret_key") == NULL);
	json_decref(list);
	/* nobody else's: bob's list does not show it, nor may he revoke it */
	list = mgr_keys_list(mgr, &bob);
	CHECK(key_of(list, laptop) == NULL);
	json_decref(list);
	reply = NULL;
	bob.is_admin = false;
	CHECK_INT(mgr_key_revoke(mgr, &bob, laptop, &reply, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "of yours");
	CHECK_INT(as_key(laptop, &again), 0);

	/* revoked: it signs as no one */
	CHECK_INT(mgr_key_revoke(mgr, &alice, laptop, &reply, &err), 0);
	CHECK(json_is_false(json_object_get(reply, "main_replaced")));
	json_decref(reply);
	CHECK_INT(as_key(laptop, &again), -ENOENT);
	CHECK_INT(mgr_key_revoke(mgr, &alice, laptop, &reply, &err), -ENOENT);

	/* the main key revoked: a new main key, the old one refused */
	reply = NULL;
	CHECK_INT(mgr_key_revoke(mgr, &alice, main_ak, &reply, &err), 0);
	CHECK(json_is_true(json_object_get(reply, "main_replaced")));
	json_decref(reply);
	CHECK_INT(as_key(main_ak, &again), -ENOENT);
	CHECK_INT(mgr_user_login(mgr, "alice@example.org", "new password", &alice, &err), 0);
	CHECK(strcmp(alice.access_key, main_ak) != 0);
	CHECK_INT(as_key(alice.access_key, &again), 0);
	CHECK_STR(again.email, "alice@example.org");
	list = mgr_keys_list(mgr, &alice);
	CHECK_INT(json_array_size(json_object_get(list, "keypairs")), 1);
	CHECK(json_is_true(json_object_get(key_of(list, alice.access_key), "main")));
	json_decref(list);

	/* at most MGR_MAX_KEYS */
	int made = 0;
	for (int i = 0; i < MGR_MAX_KEYS + 1; i++) {
		reply = NULL;
		if (mgr_key_create(mgr, &bob, NULL, &reply, &err) < 0)
			break;
		made++;
		json_decref(reply);
	}
	CHECK_INT(made, MGR_MAX_KEYS - 1);   /* bob's main key is one of them */
	CHECK_INT(err.code, EBUSY);
	CHECK_CONTAINS(err.msg, "revoke one first");
}

/* Self-service (issue 35): one's own password changed with the current
 * one; a key rotated (with bob at MGR_MAX_KEYS keys: a rotation adds
 * none), the main key and another's refused. persistence_of_keys then
 * finds the rotated key after a reopen. */
TEST(self_service)
{
	struct user_rec bob, alice, again;
	struct terr err = {0};
	json_t *reply = NULL;
	CHECK_INT(mgr_user_login(mgr, "bob@example.org", "bob's own", &bob, &err), 0);
	CHECK_INT(mgr_user_change_own_password(mgr, &bob, "not bob's", "bob's second", &reply, &err), -EPERM);
	CHECK_STR(err.msg, "your current password is wrong");
	CHECK_INT(mgr_user_change_own_password(mgr, &bob, "bob's own", "bob's own", &reply, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "same as the current one");
	CHECK(mgr_user_change_own_password(mgr, &bob, "bob's own", "short", &reply, &err) < 0);
	CHECK_INT(login("bob@example.org", "bob's own", &err), 0);
	CHECK_INT(mgr_user_change_own_password(mgr, &bob, "bob's own", "bob's second", &reply, &err), 0);
	CHECK_STR(str(json_object_get(reply, "user"), "email"), "bob@example.org");
	json_decref(reply);
	CHECK_INT(login("bob@example.org", "bob's own", &err), -EACCES);
	CHECK_INT(login("bob@example.org", "bob's second", &err), 0);
	reply = NULL;
	CHECK_INT(mgr_user_change_own_password(mgr, &bob, "bob's second", "bob's own", &reply, &err), 0);
	json_decref(reply);

	json_t *list = mgr_keys_list(mgr, &bob);
	CHECK_INT(json_array_size(json_object_get(list, "keypairs")), MGR_MAX_KEYS);
	char old[64] = "";
	size_t i;
	json_t *k;
	json_array_foreach(json_object_get(list, "keypairs"), i, k)
		if (json_is_false(json_object_get(k, "main")) && !old[0])
			util_strlcpy(old, str(k, "access_key"), sizeof(old));
	json_decref(list);
	reply = NULL;
	CHECK_INT(mgr_key_rotate(mgr, &bob, old, &reply, &err), 0);
	CHECK_STR(str(reply, "revoked"), old);
	char fresh[64];
	util_strlcpy(fresh, str(json_object_get(reply, "keypair"), "access_key") ?: "", sizeof(fresh));
	CHECK(strcmp(fresh, old) != 0);
	CHECK_INT(strlen(str(reply, "secret_key") ?: ""), 40);
	CHECK_INT(as_key(fresh, &again), 0);
	CHECK_STR(again.email, "bob@example.org");
	CHECK_STR(again.secret_key, str(reply, "secret_key"));
	json_decref(reply);
	CHECK_INT(as_key(old, &again), -ENOENT);
	list = mgr_keys_list(mgr, &bob);
	CHECK_INT(json_array_size(json_object_get(list, "keypairs")), MGR_MAX_KEYS);
	json_decref(list);
	/* The main key: revoke it instead; a key gone or another's: none. */
	CHECK_INT(mgr_key_rotate(mgr, &bob, bob.access_key, &reply, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "main key");
	CHECK_INT(mgr_key_rotate(mgr, &bob, old, &reply, &err), -ENOENT);
	CHECK_INT(mgr_user_login(mgr, "alice@example.org", "new password", &alice, &err), 0);
	alice.is_admin = true;   /* an admin too gets no one else's secret */
	CHECK_INT(mgr_key_rotate(mgr, &alice, fresh, &reply, &err), -ENOENT);
	CHECK_INT(as_key(fresh, &again), 0);
}

/* Roles, one user's view, and removal with its refusals. */
TEST(roles_and_remove)
{
	json_t *u = NULL, *out = NULL;
	struct terr err = {0};
	CHECK_INT(mgr_user_update(mgr, admin.email, -1, 0, NULL, &admin, &u, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "your own administrator role");
	CHECK_INT(mgr_user_update(mgr, "alice@example.org", -1, 1, NULL, &admin, &u, &err), 0);
	CHECK(json_is_true(json_object_get(u, "is_admin")));
	json_decref(u);
	u = NULL;
	CHECK_INT(mgr_user_update(mgr, "alice@example.org", -1, 0, NULL, &admin, &u, &err), 0);
	CHECK(json_is_false(json_object_get(u, "is_admin")));
	json_decref(u);

	struct user_rec alice;
	CHECK_INT(mgr_user_login(mgr, "alice@example.org", "new password", &alice, &err), 0);
	CHECK_INT(mgr_folder_create(mgr, &alice, "results", NULL, -1, &out, &err), 0);
	json_decref(out);
	out = NULL;
	CHECK_INT(mgr_user_get(mgr, "alice@example.org", &out, &err), 0);
	CHECK_STR(str(json_object_get(out, "user"), "email"), "alice@example.org");
	CHECK_INT(json_array_size(json_object_get(out, "keypairs")), 1);
	CHECK_INT(json_array_size(json_object_get(out, "sessions")), 0);
	CHECK_INT(json_array_size(json_object_get(out, "folders")), 1);
	json_decref(out);
	CHECK_INT(mgr_user_get(mgr, "nobody@example.org", &out, &err), -ENOENT);

	out = NULL;
	CHECK_INT(mgr_user_remove(mgr, admin.email, &admin, &out, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "your own account");
	/* her folder first */
	CHECK_INT(mgr_user_remove(mgr, "alice@example.org", &admin, &out, &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "owns 1 folder (results)");
	CHECK(out == NULL);
	CHECK_INT(mgr_folder_delete(mgr, &alice, "results", false, &err), 0);
	out = NULL;
	CHECK_INT(mgr_user_remove(mgr, "alice@example.org", &admin, &out, &err), 0);
	CHECK_STR(str(json_object_get(out, "removed"), "email"), "alice@example.org");
	CHECK_INT(json_integer_value(json_object_get(out, "revoked_keys")), 1);
	json_decref(out);
	struct user_rec gone;
	CHECK_INT(as_key(alice.access_key, &gone), -ENOENT);
	CHECK_INT(mgr_user_login(mgr, "alice@example.org", "new password", &gone, &err), -EACCES);
	json_t *users = mgr_users_list(mgr);
	CHECK_INT(json_array_size(users), 2);
	json_decref(users);
	CHECK_INT(mgr_user_remove(mgr, "alice@example.org", &admin, &out, &err), -ENOENT);
}

/* Keys and removals outlive a restart: bob's keys all sign as him,
 * alice's are gone with her. */
TEST(persistence_of_keys)
{
	struct user_rec bob;
	struct terr err = {0};
	CHECK_INT(mgr_user_login(mgr, "bob@example.org", "bob's own", &bob, &err), 0);
	json_t *before = mgr_keys_list(mgr, &bob);
	manager_close(mgr);
	mgr = open_manager();
	if (!mgr) {
		json_decref(before);
		return;
	}
	json_t *after = mgr_keys_list(mgr, &bob);
	CHECK_INT(json_array_size(json_object_get(after, "keypairs")), MGR_MAX_KEYS);
	size_t i;
	json_t *k;
	/* the same keys (made in one millisecond, they may load in another order) */
	json_array_foreach(json_object_get(before, "keypairs"), i, k)
		CHECK(json_equal(k, key_of(after, str(k, "access_key"))));
	json_array_foreach(json_object_get(after, "keypairs"), i, k) {
		struct user_rec who;
		CHECK_INT(as_key(str(k, "access_key"), &who), 0);
		CHECK_STR(who.email, "bob@example.org");
	}
	json_decref(before);
	json_decref(after);
	struct user_rec gone;
	CHECK_INT(mgr_user_login(mgr, "alice@example.org", "new password", &gone, &err), -EACCES);
	json_t *users = mgr_users_list(mgr);
	CHECK_INT(json_array_size(users), 2);
	json_decref(users);
}

/* The admin's password of a first start that never served (a port in
 * use) is not lost: admin.conf.pending keeps it until a start that
 * serves writes it into admin.conf. */
TEST(first_password_survives_a_start_that_does_not_serve)
{
	char dir[] = "/tmp/tessera-users-first-XXXXXX";
	if (!mkdtemp(dir))
		FAILF("mkdtemp: %s", strerror(errno));
	struct manager_config cfg = {.data_dir = dir, .listen = "127.0.0.1:0", .dispatch_workers = 1};
	struct manager *m = NULL;
	struct terr err = {0};
	CHECK_INT(manager_open(&m, &cfg, &err), 0);
	manager_close(m);   /* as a start whose port was taken */
	m = NULL;
	char path[4200], pending[4300];
	snprintf(path, sizeof(path), "%s/admin.conf", dir);
	snprintf(pending, sizeof(pending), "%s/admin.conf.pending", dir);
	struct conf c = {0};
	CHECK_INT(conf_load(pending, &c, &err), 0);
	char first[64] = "";
	util_strlcpy(first, conf_get(&c, "password") ?: "", sizeof(first));
	conf_free(&c);
	CHECK(strlen(first) >= 12);
	CHECK_INT(manager_open(&m, &cfg, &err), 0);
	if (!m)
		return;
	char written[4200];
	CHECK_INT(manager_serve(m, written, sizeof(written), &err), 0);
	CHECK_STR(written, path);
	CHECK_INT(conf_load(path, &c, &err), 0);
	CHECK_STR(conf_get(&c, "password"), first);
	conf_free(&c);
	CHECK(access(pending, F_OK) != 0);
	struct user_rec u;
	CHECK_INT(mgr_user_login(m, "admin@tessera.local", first, &u, &err), 0);
	manager_close(m);
	/* a later start keeps it, and a password that no longer opens the
	 * account (changed through the API) is not written again */
	m = NULL;
	CHECK_INT(manager_open(&m, &cfg, &err), 0);
	if (!m)
		return;
	CHECK_INT(manager_serve(m, written, sizeof(written), &err), 0);
	CHECK_INT(conf_load(path, &c, &err), 0);
	CHECK_STR(conf_get(&c, "password"), first);
	conf_free(&c);
	json_t *j = NULL;
	CHECK_INT(mgr_user_update(m, "admin@tessera.local", -1, -1, "changed elsewhere", &u, &j, &err), 0);
	json_decref(j);
	manager_close(m);
	m = NULL;
	CHECK_INT(manager_open(&m, &cfg, &err), 0);
	if (!m)
		return;
	CHECK_INT(manager_serve(m, written, sizeof(written), &err), 0);
	CHECK_INT(conf_load(path, &c, &err), 0);
	CHECK(conf_get(&c, "password") == NULL);
	CHECK(conf_get(&c, "secret_key") != NULL);
	conf_free(&c);
	manager_close(m);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

static void remove_tree(const char *dir)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

int main(void)
{
	log_set_level(LOG_WARN);
	if (!mkdtemp(data_dir)) {
		perror("mkdtemp");
		return 1;
	}
	mgr = open_manager();
	if (!mgr)
		return testlib_done();
	RUN(first_admin);
	RUN(create);
	RUN(passwords);
	RUN(update);
	RUN(persistence);
	RUN(api_keys);
	RUN(self_service);
	RUN(roles_and_remove);
	RUN(persistence_of_keys);
	manager_close(mgr);
	RUN(first_password_survives_a_start_that_does_not_serve);
	remove_tree(data_dir);
	return testlib_done();
}
