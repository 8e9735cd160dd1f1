/* Drop rules between users' networks, kept by the agent itself.
 *
 * Docker's own isolation chains keep bridge networks apart, but Docker
 * 20.10 deletes and inserts again the FORWARD rule that jumps to them
 * each time any network is made (libnetwork's EnsureJumpRule), and a
 * connection opened between two networks in that moment stays open, as
 * conntrack lets its later packets through. So the agent keeps rules of
 * its own that no dockerd action removes even for a moment: a chain,
 * AGENT_FW_CHAIN, in the mangle table's FORWARD hook, which dockerd never
 * touches and which runs before the filter table's FORWARD (where
 * Docker's rules and its conntrack accept are). Per user's bridge X:
 *
 *   -i X -o X        RETURN   (a user's sessions reach each other)
 *   -i X -o br-+     DROP     (nor any other bridge network,
 *   -i X -o docker0  DROP      nor Docker's default bridge,
 *   -i br-+ -o X     DROP      in either direction)
 *   -i docker0 -o X  DROP
 *
 * Traffic between X and the node's other interfaces (the outside through
 * NAT, published ports) is not matched. Rules are added when the agent
 * makes or first finds a user's network and, at the agent's start, for
 * every user's network on the node; those of bridges that no longer
 * exist are swept then and when Docker says a network was removed.
 * Needs root and Debian's iptables (which docker.io depends on); without
 * either the agent says so once and leaves the isolation to Docker's
 * chains alone. */
#include "agent/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

extern char **environ;

#define FW_RULES_PER_BRIDGE 5

/* Runs iptables with args (NULL-terminated, after "iptables -w 5 -t
 * mangle"); its stdout into *out when out is not NULL (malloc'd, the
 * caller frees). Its exit status, or -1 when it could not run. */
static int iptables(const char *const *args, char **out)
{
	const char *argv[24] = {"iptables", "-w", "5", "-t", "mangle"};
	size_t n = 5;
	for (size_t i = 0; args[i] && n < sizeof(argv) / sizeof(argv[0]) - 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	int pipefd[2] = {-1, -1};
	if (out && pipe2(pipefd, O_CLOEXEC) < 0)
		return -1;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (out)
		posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	else
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int rc = posix_spawnp(&pid, "iptables", &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (out) {
		close(pipefd[1]);
		size_t len = 0, cap = 0;
		char *buf = NULL;
		for (;;) {
			if (len + 4096 + 1 > cap) {
				char *grown = realloc(buf, cap = cap ? cap * 2 : 8192);
				if (!grown)
					break;
				buf = grown;
			}
			ssize_t r = rc == 0 ? read(pipefd[0], buf + len, cap - len - 1) : 0;
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			len += (size_t)r;
		}
		close(pipefd[0]);
		if (buf)
			buf[len] = '\0';
		*out = buf;
	}
	if (rc != 0)
		return -1;
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The five rules of bridge br, as iptables arguments after -A/-C/-D CHAIN. */
static void bridge_rules(const char *br, const char *rules[FW_RULES_PER_BRIDGE][6])
{
	const char *r[FW_RULES_PER_BRIDGE][6] = {
		{"-i", br, "-o", br, "-j", "RETURN"},
		{"-i", br, "-o", "br-+", "-j", "DROP"},
		{"-i", br, "-o", "docker0", "-j", "DROP"},
		{"-i", "br-+", "-o", br, "-j", "DROP"},
		{"-i", "docker0", "-o", br, "-j", "DROP"},
	};
	memcpy(rules, r, sizeof(r));
}

static int rule_op(const char *op, const char *const rule[6])
{
	const char *args[] = {op, AGENT_FW_CHAIN, rule[0], rule[1], rule[2], rule[3], rule[4], rule[5], NULL};
	return iptables(args, NULL);
}

/* The chain and FORWARD's jump to it, made unless they exist. */
static int chain_ensure(void)
{
	const char *jump_check[] = {"-C", "FORWARD", "-j", AGENT_FW_CHAIN, NULL};
	if (iptables(jump_check, NULL) == 0)
		return 0;
	const char *make[] = {"-N", AGENT_FW_CHAIN, NULL};
	iptables(make, NULL);   /* fails when it exists: fine */
	const char *jump[] = {"-I", "FORWARD", "1", "-j", AGENT_FW_CHAIN, NULL};
	/* Another agent on this node may have made it meanwhile. */
	return iptables(jump, NULL) == 0 || iptables(jump_check, NULL) == 0 ? 0 : -1;
}

/* Whether iptables can be run here, with the rights to change rules:
 * asked once at the agent's start. */
static bool firewall_possible(void)
{
	if (geteuid() != 0)
		return false;
	const char *list[] = {"-S", "FORWARD", NULL};
	return iptables(list, NULL) == 0;
}

void agent_firewall_init(struct agent *a)
{
	a->fw_on = firewall_possible();
	if (!a->fw_on)
		log_info("agent", "the agent keeps no drop rules between users' networks (%s): their isolation rests "
			 "on Docker's own chains alone (docs/admin.md, \"Session isolation\")",
			 geteuid() != 0 ? "it does not run as root" : "iptables cannot be run");
}

bool agent_firewall_bridge_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n >= AGENT_FW_BRIDGE_MAX || name[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '.' || c == '-'))
			return false;
	}
	return true;
}

int agent_firewall_isolate(struct agent *a, const char *bridge)
{
	if (!a->fw_on || !bridge[0])
		return 0;
	if (!agent_firewall_bridge_ok(bridge)) {
		log_warn("agent", "a user's network has a bridge named '%.40s', which no rule is written for: its "
			 "isolation rests on Docker's chains alone", bridge);
		return -1;
	}
	pthread_mutex_lock(&a->fw_mu);
	int rc = chain_ensure();
	const char *rules[FW_RULES_PER_BRIDGE][6];
	bridge_rules(bridge, rules);
	for (int i = 0; i < FW_RULES_PER_BRIDGE && rc == 0; i++)
		if (rule_op("-C", rules[i]) != 0 && rule_op("-A", rules[i]) != 0)
			rc = -1;
	pthread_mutex_unlock(&a->fw_mu);
	if (rc < 0)
		log_warn("agent", "cannot add the drop rules of bridge %s to iptables' mangle table (chain %s): its "
			 "isolation rests on Docker's chains alone", bridge, AGENT_FW_CHAIN);
	return rc;
}

int agent_firewall_isolate_network(struct agent *a, const char *network)
{
	if (!a->fw_on)
		return 0;
	char bridge[AGENT_FW_BRIDGE_MAX];
	struct terr err = {0};
	if (a->rt_ops->network_bridge(a->rt, network, bridge, sizeof(bridge), &err) < 0) {
		log_warn("agent", "cannot add the drop rules of network %s: %s", network, err.msg);
		return -1;
	}
	return agent_firewall_isolate(a, bridge);
}

size_t agent_firewall_bridges(const char *rules_text, char (*out)[AGENT_FW_BRIDGE_MAX], size_t max)
{
	size_t n = 0;
	const char *prefix = "-A " AGENT_FW_CHAIN " -i ";
	for (const char *line = rules_text; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		size_t plen = strlen(prefix);
		if (len > plen && !strncmp(line, prefix, plen)) {
			const char *name = line + plen;
			size_t nlen = strcspn(name, " \n");
			/* Only a bridge's own RETURN rule names it: -i X -o X. */
			char want[AGENT_FW_BRIDGE_MAX + 32];
			int wlen = nlen > 0 && nlen < AGENT_FW_BRIDGE_MAX
				   ? snprintf(want, sizeof(want), " -o %.*s -j RETURN", (int)nlen, name) : -1;
			if (wlen > 0 && (size_t)wlen < sizeof(want) && len - plen - nlen == (size_t)wlen &&
			    !strncmp(name + nlen, want, (size_t)wlen)) {
				bool seen = false;
				for (size_t k = 0; k < n && !seen; k++)
					seen = strlen(out[k]) == nlen && !strncmp(out[k], name, nlen);
				if (!seen && n < max) {
					memcpy(out[n], name, nlen);
					out[n][nlen] = '\0';
					n++;
				}
			}
		}
		line = end ? end + 1 : NULL;
	}
	return n;
}

/* Removes the rules of bridges that no longer exist; the bridges whose
 * rules remain into *kept (malloc'd, *n_kept of them) when kept is not
 * NULL. */
static void sweep(struct agent *a, char (**kept)[AGENT_FW_BRIDGE_MAX], size_t *n_kept)
{
	enum { MAX = 1024 };
	pthread_mutex_lock(&a->fw_mu);
	char *text = NULL;
	char (*bridges)[AGENT_FW_BRIDGE_MAX] = NULL;
	size_t n = 0, k = 0;
	const char *list[] = {"-S", AGENT_FW_CHAIN, NULL};
	if (iptables(list, &text) == 0 && text && (bridges = calloc(MAX, AGENT_FW_BRIDGE_MAX)))
		n = agent_firewall_bridges(text, bridges, MAX);
	int gone = 0;
	for (size_t i = 0; i < n; i++) {
		char path[64 + AGENT_FW_BRIDGE_MAX];
		struct stat st;
		snprintf(path, sizeof(path), "/sys/class/net/%s", bridges[i]);
		if (stat(path, &st) == 0 || errno != ENOENT) {
			if (k != i)
				memcpy(bridges[k], bridges[i], AGENT_FW_BRIDGE_MAX);
			k++;
			continue;
		}
		const char *rules[FW_RULES_PER_BRIDGE][6];
		bridge_rules(bridges[i], rules);
		for (int r = 0; r < FW_RULES_PER_BRIDGE; r++)
			while (rule_op("-D", rules[r]) == 0)
				;   /* every copy (two agents may have added one each) */
		gone++;
	}
	pthread_mutex_unlock(&a->fw_mu);
	if (gone)
		log_info("agent", "removed the drop rules of %d bridge%s that no longer exist", gone,
			 gone == 1 ? "" : "s");
	free(text);
	if (kept) {
		*kept = bridges;
		*n_kept = k;
	} else {
		free(bridges);
	}
}

void agent_firewall_sweep(struct agent *a)
{
	if (a->fw_on)
		sweep(a, NULL, NULL);
}

void agent_firewall_sweep_all(struct agent *a)
{
	if (!a->fw_on)
		return;
	char (*kept)[AGENT_FW_BRIDGE_MAX] = NULL;
	size_t n_kept = 0;
	sweep(a, &kept, &n_kept);
	/* Users' networks made before this agent ran (by an older one, or
	 * before a reboot emptied iptables) whose owners start nothing new:
	 * their running sessions get the rules now, not at a next start.
	 * A bridge listed with its rules is left as it is (one `iptables -S`
	 * for all, not a check per rule: many agents may share a node). */
	char **names = NULL;
	size_t n = 0;
	struct terr err = {0};
	if (a->rt_ops->network_list && a->rt_ops->network_list(a->rt, AGENT_LABEL_OWNER_ID, NULL, &names, &n, &err) == 0) {
		for (size_t i = 0; i < n; i++) {
			char bridge[AGENT_FW_BRIDGE_MAX];
			bool listed = false;
			if (!agent_stopping(a) &&
			    a->rt_ops->network_bridge(a->rt, names[i], bridge, sizeof(bridge), &err) == 0) {
				for (size_t k = 0; k < n_kept && !listed; k++)
					listed = !strcmp(kept[k], bridge);
				if (!listed)
					agent_firewall_isolate(a, bridge);   /* "" (not a bridge): nothing */
			}
			free(names[i]);
		}
		free(names);
	}
	free(kept);
}
