/* runner/cluster.h's pure parts: the client configuration and the known
 * hosts line for a cluster session's hosts, and their refusals when the
 * text does not fit. The SSH logins themselves: tests/e2e
 * test_cluster_sessions.sh, with the image's real sshd and ssh. */
#include <string.h>

#include "runner/cluster.h"
#include "testlib.h"

TEST(client_config)
{
	char buf[1024];
	CHECK_INT(cluster_ssh_client_config("main1,sub1,sub2", "/k", "/kh", buf, sizeof(buf)), 0);
	CHECK_CONTAINS(buf, "\nHost main1 sub1 sub2\n");
	CHECK_CONTAINS(buf, "    Port 2200\n");
	CHECK_CONTAINS(buf, "    IdentityFile /k\n");
	CHECK_CONTAINS(buf, "    UserKnownHostsFile /kh\n");
	CHECK_CONTAINS(buf, "    StrictHostKeyChecking yes\n");
	CHECK_INT(cluster_ssh_client_config("main1,sub1", "/k", "/kh", buf, 40), -1);
}

TEST(known_hosts)
{
	char buf[256];
	CHECK_INT(cluster_ssh_known_hosts("main1,sub1", "ssh-ed25519 AAAA c", buf, sizeof(buf)), 0);
	CHECK_STR(buf, "[main1]:2200,[sub1]:2200 ssh-ed25519 AAAA c\n");
	CHECK_INT(cluster_ssh_known_hosts("", "ssh-ed25519 AAAA c", buf, sizeof(buf)), -1);
	CHECK_INT(cluster_ssh_known_hosts("main1,sub1", "ssh-ed25519 AAAA c", buf, 20), -1);
}

int main(void)
{
	RUN(client_config);
	RUN(known_hosts);
	return testlib_done();
}
