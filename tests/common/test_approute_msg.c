/* common/approute_msg.c: the app route format as the manager writes it
 * (approute_msg_to_json, approute_list_to_json) reads back as the proxy
 * reads it. What the reader refuses, and the endpoints' resolution, is
 * tests/proxy/test_routes.c. */
#include <string.h>

#include "common/approute_msg.h"
#include "testlib.h"

static struct approute_msg sample(int port, const char *host)
{
	struct approute_msg m = {.port = port};
	strcpy(m.user, "U1");
	strcpy(m.owner, "U1");
	strcpy(m.session_id, "0123456789abcdef0123456789abcdef");
	strcpy(m.app, "jupyter");
	strcpy(m.target, "app:jupyter");
	strcpy(m.endpoint, "10.0.0.5:32768,172.18.0.5:7611@0123456789abcdef");
	memset(m.secret, 'a', 64);
	strcpy(m.host, host);
	return m;
}

static void check_same(const struct approute_msg *a, const struct approute_msg *b)
{
	CHECK_STR(a->user, b->user);
	CHECK_STR(a->owner, b->owner);
	CHECK_STR(a->session_id, b->session_id);
	CHECK_STR(a->app, b->app);
	CHECK_STR(a->target, b->target);
	CHECK_STR(a->endpoint, b->endpoint);
	CHECK_STR(a->secret, b->secret);
	CHECK_INT(a->port, b->port);
	CHECK_STR(a->host, b->host);
}

TEST(route_round_trips_in_port_and_host_mode)
{
	struct approute_msg ms[2] = {sample(10205, ""), sample(0, "jupyter.01234567.apps.example.org")};
	for (size_t i = 0; i < 2; i++) {
		json_t *o = approute_msg_to_json(&ms[i]);
		CHECK(o != NULL);
		/* One of the two, never both. */
		CHECK((json_object_get(o, "port") != NULL) != (json_object_get(o, "host") != NULL));
		CHECK(json_object_get(o, "user") == NULL && json_object_get(o, "session") == NULL);
		struct approute_msg back;
		struct terr err = {0};
		CHECK_INT(approute_msg_from_json(o, false, &back, &err), 0);
		check_same(&ms[i], &back);
		json_decref(o);
	}
}

/* A redeem answer: the route for the link's user, with their email and
 * the session's name for people reading it; the proxy takes the id. */
TEST(redeem_answer_round_trips)
{
	struct approute_msg m = sample(10206, "");
	strcpy(m.user, "U7");
	m.email = "ann@example.org";
	m.session_name = "my session";
	json_t *o = approute_msg_to_json(&m);
	CHECK_STR(json_string_value(json_object_get(o, "user")), "ann@example.org");
	CHECK_STR(json_string_value(json_object_get(o, "user_id")), "U7");
	CHECK_STR(json_string_value(json_object_get(o, "owner_id")), "U1");
	CHECK_STR(json_string_value(json_object_get(o, "session")), "my session");
	struct approute_msg back;
	struct terr err = {0};
	CHECK_INT(approute_msg_from_json(o, true, &back, &err), 0);
	check_same(&m, &back);
	CHECK(back.email == NULL && back.session_name == NULL);
	json_decref(o);
}

TEST(list_round_trips)
{
	struct approute_msg r[2] = {sample(10205, ""), sample(10207, "")};
	strcpy(r[1].target, "port:8888");
	strcpy(r[1].app, "port-8888");
	strcpy(r[1].owner, "U2");
	strcpy(r[1].user, "U2");
	char *admins[] = {"A1"}, *disabled[] = {"D1", "D2"};
	struct approute_list l = {.generation = 42, .r = r, .n = 2, .admins = admins, .n_admins = 1,
				  .disabled = disabled, .n_disabled = 2};
	json_t *doc = approute_list_to_json(&l);
	CHECK(doc != NULL);
	struct approute_list back;
	struct terr err = {0};
	CHECK_INT(approute_list_from_json(doc, &back, &err), 0);
	CHECK_INT(back.generation, 42);
	CHECK_INT(back.n, 2);
	for (size_t i = 0; i < 2 && i < back.n; i++)
		check_same(&r[i], &back.r[i]);
	CHECK_INT(back.n_admins, 1);
	CHECK_STR(back.admins[0], "A1");
	CHECK_INT(back.n_disabled, 2);
	CHECK_STR(back.disabled[1], "D2");
	approute_list_free(&back);
	json_decref(doc);
	/* An empty list: no routes, nobody listed. */
	struct approute_list none = {.generation = 0};
	doc = approute_list_to_json(&none);
	CHECK_INT(approute_list_from_json(doc, &back, &err), 0);
	CHECK_INT(back.n, 0);
	CHECK_INT(back.n_admins + back.n_disabled, 0);
	approute_list_free(&back);
	json_decref(doc);
}

TEST(reader_refuses_with_the_field)
{
	struct approute_msg m = sample(10205, "");
	json_t *o = approute_msg_to_json(&m);
	json_object_set_new(o, "target", json_string("x"));
	struct approute_msg back;
	struct terr err = {0};
	CHECK_INT(approute_msg_from_json(o, false, &back, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "neither app:NAME nor port:N");
	json_decref(o);
	json_t *doc = json_pack("{s:I,s:[{}]}", "generation", (json_int_t)1, "routes");
	struct approute_list l;
	CHECK_INT(approute_list_from_json(doc, &l, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "routes[0]");
	json_decref(doc);
}

int main(void)
{
	RUN(route_round_trips_in_port_and_host_mode);
	RUN(redeem_answer_round_trips);
	RUN(list_round_trips);
	RUN(reader_refuses_with_the_field);
	return testlib_done();
}
