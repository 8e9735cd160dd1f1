/* manager: users through the core interface (core.h) on a real manager on
 * a temporary data dir: the first admin, creation (with a given or a
 * generated password), a taken email, password checks, disabling and
 * password resets, the refusals with their codes, and persistence across
 * a reopen. */
#include "manager/core.h"
#include "testlib.h"

#include <jansson.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/util.h"

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
	CHECK_INT(mgr_user_update(mgr, "ALICE@example.org", 1, NULL, &admin, &u, &err), 0);
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
	CHECK_INT(mgr_user_update(mgr, alice_id ?: "", 0, "new password", &admin, &u, &err), 0);
	CHECK(json_is_false(json_object_get(u, "disabled")));
	json_decref(u);
	json_decref(users);
	CHECK_INT(login("alice@example.org", "alice's password", &err), -EACCES);
	CHECK_INT(login("alice@example.org", "new password", &err), 0);
	/* only the password: the flag stays as it is */
	u = NULL;
	CHECK_INT(mgr_user_update(mgr, "bob@example.org", -1, "bob's own", &admin, &u, &err), 0);
	CHECK(json_is_false(json_object_get(u, "disabled")));
	json_decref(u);

	/* refusals */
	u = NULL;
	CHECK_INT(mgr_user_update(mgr, "nobody@example.org", 1, NULL, &admin, &u, &err), -ENOENT);
	CHECK_STR(err.msg, "no user with id or email 'nobody@example.org'");
	CHECK_INT(mgr_user_update(mgr, admin.id, 1, NULL, &admin, &u, &err), -EBUSY);
	CHECK_STR(err.msg, "you cannot disable your own account");
	CHECK(u == NULL);
	/* enabling oneself, or one's own new password, is fine */
	CHECK_INT(mgr_user_update(mgr, admin.email, 0, NULL, &admin, &u, &err), 0);
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
	manager_close(mgr);
	remove_tree(data_dir);
	return testlib_done();
}
