/* The agent's drop rules between users' bridges (agent_firewall.c): the
 * parts that need no agent, for its tests. */
#ifndef TESSERA_AGENT_FIREWALL_H
#define TESSERA_AGENT_FIREWALL_H

#include <stdbool.h>
#include <stddef.h>

/* The chain, in iptables' mangle table, jumped to from its FORWARD. */
#define AGENT_FW_CHAIN "TESSERA-ISOLATION"
#define AGENT_FW_BRIDGE_MAX 16   /* IFNAMSIZ */

/* The bridges that have rules in `iptables -t mangle -S AGENT_FW_CHAIN`'s
 * text, each once, in order; at most max. A bridge counts by its own
 * RETURN rule (-i X -o X -j RETURN). */
size_t agent_firewall_bridges(const char *rules_text, char (*out)[AGENT_FW_BRIDGE_MAX], size_t max);

/* Whether name may be put in a rule: a device name of 1 to 15 letters,
 * digits, '_', '.' or '-', not starting with '-' (which iptables would
 * read as an option). Docker's own are "br-" and hex; a network's
 * options may name its bridge, and anyone who may use Docker may make
 * one. */
bool agent_firewall_bridge_ok(const char *name);

#endif
