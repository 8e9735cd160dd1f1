/* manager: projects through the core interface (core.h) on a real manager
 * on a temporary data dir: each user's personal project, creation and its
 * checks (admins only, names, quota fields), members and roles (a member
 * may not change members, a manager may), who sees a project (the same
 * ENOENT as a missing one), removal's refusals, node groups, the
 * resources' project bars, the fair-share figures, and persistence of
 * all of it across a reopen. The scheduler's use of projects is tested in
 * tests/sched/test_projects.c and, end to end, in test_projects.sh. */
#include "manager/core.h"
#include "testlib.h"

#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/log.h"
#include "manager/manager.h"

static char data_dir[] = "/tmp/tessera-projects-XXXXXX";
static struct manager *mgr;
static struct user_rec admin, alice, bob;

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

/* The user of an email, looked up by their key (the way requests are). */
static void user_of(const char *email, struct user_rec *out)
{
	json_t *users = mgr_users_list(mgr);
	size_t i;
	json_t *u;
	json_array_foreach(users, i, u)
		if (!strcmp(str(u, "email"), email))
			CHECK_INT(mgr_user_by_access_key(mgr, str(u, "access_key"), out), 0);
	json_decref(users);
}

static json_t *body(const char *text)
{
	json_t *b = json_loads(text, 0, NULL);
	if (!b)
		FAILF("bad JSON in the test: %s", text);
	return b;
}

/* The project of that name in list, or NULL (borrowed). */
static json_t *named(json_t *list, const char *name)
{
	size_t i;
	json_t *p;
	json_array_foreach(list, i, p)
		if (!strcmp(str(p, "name"), name))
			return p;
	return NULL;
}

TEST(personal_projects)
{
	json_t *reply = NULL;
	struct terr err = {0};
	user_of("admin@tessera.local", &admin);
	CHECK_INT(mgr_user_create(mgr, "alice@example.org", "pw-alice-1", false, admin.email, &reply, &err), 0);
	json_decref(reply);
	CHECK_INT(mgr_user_create(mgr, "bob@example.org", "pw-bob-12", false, admin.email, &reply, &err), 0);
	json_decref(reply);
	user_of("alice@example.org", &alice);
	user_of("bob@example.org", &bob);
	json_t *mine = mgr_projects_list(mgr, &alice, false);
	CHECK_INT(json_array_size(mine), 1);
	json_t *p = named(mine, "alice@example.org");
	CHECK(p != NULL);
	CHECK(json_is_true(json_object_get(p, "personal")));
	CHECK_STR(str(p, "my_role"), "manager");
	json_decref(mine);
	/* An admin's list: team projects; with all, everyone's own too. */
	json_t *all = mgr_projects_list(mgr, &admin, true), *teams = mgr_projects_list(mgr, &admin, false);
	CHECK(named(all, "bob@example.org") != NULL);
	CHECK(named(teams, "bob@example.org") == NULL);
	CHECK(named(teams, "admin@tessera.local") != NULL);   /* the admin's own */
	json_decref(all);
	json_decref(teams);
}

TEST(create_and_checks)
{
	json_t *out = NULL;
	struct terr err = {0};
	json_t *b = body("{\"name\": \"vision\", \"weight\": 2, \"quota\": {\"fgpu\": 2, \"mem\": \"64g\"}, "
			 "\"groups\": [\"h100\"]}");
	CHECK_INT(mgr_project_create(mgr, &alice, b, &out, &err), -EPERM);
	CHECK_CONTAINS(err.msg, "only an admin");
	CHECK_INT(mgr_project_create(mgr, &admin, b, &out, &err), 0);
	CHECK_STR(str(out, "name"), "vision");
	json_t *q = json_object_get(out, "quota");
	CHECK_INT(json_integer_value(json_object_get(q, "fgpu")), 2);
	CHECK_INT(json_integer_value(json_object_get(q, "mem")), 64LL << 30);
	CHECK(json_is_null(json_object_get(q, "cpu")));
	CHECK_STR(json_string_value(json_array_get(json_object_get(out, "groups"), 0)), "h100");
	json_decref(out);
	CHECK_INT(mgr_project_create(mgr, &admin, b, &out, &err), -EEXIST);
	json_decref(b);
	static const char *const bad[] = {
		"{\"name\": \"a b\"}", "{\"name\": \"-x\"}", "{}", "{\"name\": \"w\", \"weight\": 0}",
		"{\"name\": \"q\", \"quota\": {\"gpus\": 1}}", "{\"name\": \"q\", \"quota\": {\"fgpu\": -1}}",
		"{\"name\": \"g\", \"groups\": [\"no good\"]}", "{\"name\": \"g\", \"groups\": \"h100\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b = body(bad[i]);
		out = NULL;
		CHECK_INT(mgr_project_create(mgr, &admin, b, &out, &err), -EINVAL);
		CHECK(err.msg[0] != '\0');
		json_decref(b);
	}
}

TEST(members_and_roles)
{
	json_t *out = NULL;
	struct terr err = {0};
	/* Bob sees nothing of vision yet: the words of a missing project. */
	CHECK_INT(mgr_project_get(mgr, &bob, "vision", &out, &err), -ENOENT);
	char hidden[sizeof(err.msg)];
	snprintf(hidden, sizeof(hidden), "%s", err.msg);
	CHECK_INT(mgr_project_get(mgr, &bob, "nothing", &out, &err), -ENOENT);
	CHECK(strstr(hidden, "vision") && strstr(err.msg, "nothing"));
	CHECK_INT(mgr_project_member_set(mgr, &admin, "vision", "alice@example.org", "member", 0, &out, &err), 0);
	json_decref(out);
	/* A member may not add members; once a manager, she may. */
	CHECK_INT(mgr_project_member_set(mgr, &alice, "vision", "bob@example.org", NULL, 0, &out, &err), -EPERM);
	CHECK_INT(mgr_project_member_set(mgr, &admin, "vision", "alice@example.org", "manager", 0, &out, &err), 0);
	json_decref(out);
	CHECK_INT(mgr_project_member_set(mgr, &alice, "vision", "bob@example.org", NULL, 3000, &out, &err), 0);
	json_t *members = json_object_get(out, "members");
	CHECK_INT(json_array_size(members), 2);
	json_decref(out);
	CHECK_INT(mgr_project_member_set(mgr, &alice, "vision", "nobody@example.org", NULL, 0, &out, &err), -ENOENT);
	CHECK_INT(mgr_project_member_set(mgr, &alice, "vision", "bob@example.org", "owner", 0, &out, &err), -EINVAL);
	CHECK_INT(mgr_project_member_set(mgr, &admin, "alice@example.org", "bob@example.org", NULL, 0, &out, &err),
		  -EINVAL);   /* a personal project has no other members */
	CHECK_INT(mgr_project_get(mgr, &bob, "vision", &out, &err), 0);
	CHECK_STR(str(out, "my_role"), "member");
	json_decref(out);
	/* Only admins change the settings. */
	json_t *b = body("{\"weight\": 5}");
	CHECK_INT(mgr_project_update(mgr, &alice, "vision", b, &out, &err), -EPERM);
	CHECK_INT(mgr_project_update(mgr, &admin, "vision", b, &out, &err), 0);
	CHECK_INT(json_integer_value(json_object_get(out, "weight")), 5);
	json_decref(out);
	json_decref(b);
}

TEST(resources_and_fairshare)
{
	json_t *r = mgr_resources(mgr, &bob);
	json_t *p = named(json_object_get(r, "projects"), "vision");
	CHECK(p != NULL);
	CHECK_INT(json_integer_value(json_object_get(json_object_get(p, "quota"), "fgpu")), 2);
	CHECK(named(json_object_get(r, "projects"), "bob@example.org") != NULL);
	json_decref(r);
	json_t *fs = mgr_fairshare_json(mgr, &bob);
	CHECK(fs != NULL);
	json_t *v = named(json_object_get(fs, "projects"), "vision");
	CHECK(v != NULL);
	CHECK_INT(json_array_size(json_object_get(v, "users")), 2);
	CHECK(named(json_object_get(fs, "projects"), "alice@example.org") == NULL);   /* not bob's */
	json_decref(fs);
	fs = mgr_fairshare_json(mgr, &admin);
	CHECK(named(json_object_get(fs, "projects"), "alice@example.org") != NULL);
	json_decref(fs);
}

TEST(removal)
{
	json_t *out = NULL;
	struct terr err = {0};
	CHECK_INT(mgr_project_delete(mgr, &admin, "alice@example.org", &err), -EBUSY);   /* personal */
	CHECK_CONTAINS(err.msg, "personal project");
	CHECK_INT(mgr_project_delete(mgr, &alice, "vision", &err), -EPERM);
	CHECK_INT(mgr_folder_create_in(mgr, &bob, "team", NULL, -1, "vision", NULL, &out, &err), -EPERM);
	CHECK_INT(mgr_folder_create_in(mgr, &alice, "team", NULL, -1, "vision", "ro", &out, &err), 0);
	json_decref(out);
	CHECK_INT(mgr_folder_get(mgr, &bob, "team", &out, &err), 0);
	CHECK_STR(str(out, "permission"), "ro");
	CHECK_STR(str(out, "project"), "vision");
	json_decref(out);
	CHECK_INT(mgr_project_delete(mgr, &admin, "vision", &err), -EBUSY);
	CHECK_CONTAINS(err.msg, "1 folder");
	CHECK_INT(mgr_project_member_remove(mgr, &alice, "vision", "bob@example.org", &out, &err), 0);
	json_decref(out);
	CHECK_INT(mgr_folder_get(mgr, &bob, "team", &out, &err), -ENOENT);
}

TEST(persistence)
{
	manager_close(mgr);
	mgr = open_manager();
	json_t *out = NULL;
	struct terr err = {0};
	CHECK_INT(mgr_project_get(mgr, &alice, "vision", &out, &err), 0);
	CHECK_INT(json_integer_value(json_object_get(out, "weight")), 5);
	CHECK_INT(json_array_size(json_object_get(out, "members")), 1);
	CHECK_STR(str(out, "my_role"), "manager");
	json_decref(out);
	CHECK_INT(mgr_project_get(mgr, &bob, "vision", &out, &err), -ENOENT);
	/* One personal project each, not a second one at the reopen. */
	json_t *all = mgr_projects_list(mgr, &admin, true);
	size_t n_alice = 0, i;
	json_t *p;
	json_array_foreach(all, i, p)
		n_alice += !strcmp(str(p, "name"), "alice@example.org");
	CHECK_INT(n_alice, 1);
	json_decref(all);
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
	RUN(personal_projects);
	RUN(create_and_checks);
	RUN(members_and_roles);
	RUN(resources_and_fairshare);
	RUN(removal);
	RUN(persistence);
	manager_close(mgr);
	remove_tree(data_dir);
	return testlib_done();
}
