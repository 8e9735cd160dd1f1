/* Password hashing (argon2id, PHC strings, generated passwords, the
 * policy) and the failed-login limiter, on their own: the manager's login
 * route that uses them is tested through the webserver (tests/web). */
#include <errno.h>
#include <string.h>

#include "auth/pwhash.h"
#include "auth/ratelimit.h"
#include "testlib.h"

TEST(pwhash_hashes_verifies_and_checks_the_policy)
{
	char h[PWHASH_ENCODED_MAX], p[32];
	struct terr err = {0};
	CHECK_INT(pwhash_generate(p, sizeof(p), &err), 0);
	CHECK_INT(strlen(p), 20);
	CHECK_INT(pwhash_hash(p, h, sizeof(h), &err), 0);
	CHECK(!strncmp(h, "$argon2id$", 10));
	CHECK(pwhash_verify(h, p));
	CHECK(!pwhash_verify(h, "something-else"));
	CHECK(!pwhash_verify("plain-text", "plain-text"));
	CHECK_INT(pwhash_hash("short", h, sizeof(h), &err), -EINVAL);
	CHECK_INT(pwhash_check_policy("tab\there-x", &err), -EINVAL);
}

TEST(ratelimit_counts_failures_in_a_window)
{
	struct ratelimit *rl = ratelimit_new(2, 1000);
	CHECK_INT(ratelimit_check(rl, "k", 0), 0);
	ratelimit_fail(rl, "k", 0);
	ratelimit_fail(rl, "k", 10);
	CHECK_INT(ratelimit_check(rl, "k", 100), 900);
	CHECK_INT(ratelimit_check(rl, "other", 100), 0);
	CHECK_INT(ratelimit_check(rl, "k", 1000), 0);   /* window over */
	ratelimit_fail(rl, "j", 0);
	ratelimit_fail(rl, "j", 0);
	ratelimit_reset(rl, "j");
	CHECK_INT(ratelimit_check(rl, "j", 1), 0);
	ratelimit_free(rl);
}

/* An account and an address together: an attacker's failures lock
 * their own address for that account, never the account itself. */
TEST(ratelimit_by_pair)
{
	struct ratelimit *rl = ratelimit_new(2, 1000);
	ratelimit_fail_pair(rl, "alice@x.org", "10.0.0.66", 0);
	ratelimit_fail_pair(rl, "alice@x.org", "10.0.0.66", 10);
	CHECK_INT(ratelimit_check_pair(rl, "alice@x.org", "10.0.0.66", 100), 900);
	/* the owner from their usual address, the attacker for another account */
	CHECK_INT(ratelimit_check_pair(rl, "alice@x.org", "192.168.1.5", 100), 0);
	CHECK_INT(ratelimit_check_pair(rl, "bob@x.org", "10.0.0.66", 100), 0);
	/* the parts stay apart: "a" + "bc" is not "ab" + "c" */
	ratelimit_fail_pair(rl, "a", "bc", 0);
	ratelimit_fail_pair(rl, "a", "bc", 0);
	CHECK_INT(ratelimit_check_pair(rl, "ab", "c", 1), 0);
	CHECK(ratelimit_check_pair(rl, "a", "bc", 1) > 0);
	/* long parts are told apart by their ends too (up to the part limit) */
	char l1[300], l2[300];
	memset(l1, 'x', sizeof(l1));
	memcpy(l1 + 240, "@one.org", 9);
	memcpy(l2, l1, sizeof(l2));
	memcpy(l2 + 240, "@two.org", 9);
	ratelimit_fail_pair(rl, l1, "10.0.0.66", 0);
	ratelimit_fail_pair(rl, l1, "10.0.0.66", 0);
	CHECK(ratelimit_check_pair(rl, l1, "10.0.0.66", 1) > 0);
	CHECK_INT(ratelimit_check_pair(rl, l2, "10.0.0.66", 1), 0);
	ratelimit_reset_pair(rl, "alice@x.org", "10.0.0.66");
	CHECK_INT(ratelimit_check_pair(rl, "alice@x.org", "10.0.0.66", 101), 0);
	ratelimit_free(rl);
}

int main(void)
{
	RUN(pwhash_hashes_verifies_and_checks_the_policy);
	RUN(ratelimit_counts_failures_in_a_window);
	RUN(ratelimit_by_pair);
	return testlib_done();
}
