/* agent/agent_firewall.c: the bridges read back from the rules iptables
 * lists, as the sweep sees them: each bridge once, by its RETURN rule;
 * other lines (the chain's own, another chain's, a rule of a name too
 * long for a device) name none. */
#include "agent/agent_firewall.h"
#include "testlib.h"

#include <string.h>

TEST(bridges_are_read_from_their_return_rules)
{
	const char *text =
		"-N TESSERA-ISOLATION\n"
		"-A TESSERA-ISOLATION -i br-26bd2392bdd5 -o br-26bd2392bdd5 -j RETURN\n"
		"-A TESSERA-ISOLATION -i br-26bd2392bdd5 -o br-+ -j DROP\n"
		"-A TESSERA-ISOLATION -i br-26bd2392bdd5 -o docker0 -j DROP\n"
		"-A TESSERA-ISOLATION -i br-+ -o br-26bd2392bdd5 -j DROP\n"
		"-A TESSERA-ISOLATION -i docker0 -o br-26bd2392bdd5 -j DROP\n"
		"-A TESSERA-ISOLATION -i br-66d0bfe21eff -o br-66d0bfe21eff -j RETURN\n"
		"-A TESSERA-ISOLATION -i br-26bd2392bdd5 -o br-26bd2392bdd5 -j RETURN\n"
		"-A OTHER -i br-aaaaaaaaaaaa -o br-aaaaaaaaaaaa -j RETURN\n"
		"-A TESSERA-ISOLATION -i mybridge -o other -j RETURN\n"
		"-A TESSERA-ISOLATION -i a-name-far-too-long -o a-name-far-too-long -j RETURN\n"
		"-A TESSERA-ISOLATION -i own0 -o own0 -j RETURN";   /* no newline at the end */
	char out[8][AGENT_FW_BRIDGE_MAX];
	size_t n = agent_firewall_bridges(text, out, 8);
	CHECK_INT(n, 3);
	CHECK_STR(out[0], "br-26bd2392bdd5");
	CHECK_STR(out[1], "br-66d0bfe21eff");
	CHECK_STR(out[2], "own0");
	CHECK_INT(agent_firewall_bridges(text, out, 1), 1);
	CHECK_INT(agent_firewall_bridges("", out, 8), 0);
	CHECK_INT(agent_firewall_bridges(NULL, out, 8), 0);
}

/* What may go into a rule's -i/-o: Docker's names and plain device
 * names; never an option, a space, a slash or a name too long. */
TEST(bridge_names_that_may_go_in_a_rule)
{
	CHECK(agent_firewall_bridge_ok("br-26bd2392bdd5"));
	CHECK(agent_firewall_bridge_ok("docker_gwbridge"));
	CHECK(agent_firewall_bridge_ok("own0"));
	CHECK(agent_firewall_bridge_ok("a.b-c_d"));
	CHECK(!agent_firewall_bridge_ok(""));
	CHECK(!agent_firewall_bridge_ok("-j"));
	CHECK(!agent_firewall_bridge_ok("--flush"));
	CHECK(!agent_firewall_bridge_ok("br x"));
	CHECK(!agent_firewall_bridge_ok("br/x"));
	CHECK(!agent_firewall_bridge_ok("br-+"));
	CHECK(!agent_firewall_bridge_ok("a-name-far-too-long"));
	CHECK(!agent_firewall_bridge_ok("br\n-A"));
}

int main(void)
{
	RUN(bridges_are_read_from_their_return_rules);
	RUN(bridge_names_that_may_go_in_a_rule);
	return testlib_done();
}
