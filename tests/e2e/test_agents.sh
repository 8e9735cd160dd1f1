#!/usr/bin/env bash
# Manager and agent as separate daemons: registration with the cluster
# secret, placement on the agent, LOST after missed heartbeats, ALIVE again
# with its sessions LOST meanwhile and re-adopted.
. "$(dirname "$0")/lib.sh"
e2e_setup
mport=$(free_port); aport=$(free_port)
secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
e2e_manager_conf "$E2E_DIR/manager.conf" "$mport" "$secret" "$E2E_DIR/mdata" \
	heartbeat_interval_ms=300 lost_after_heartbeats=3
e2e_agent_conf "$E2E_DIR/agent.conf" "$E2E_AGENT_ID" "$mport" "$aport" "$secret" "$E2E_DIR/agent-data" \
	cpu=2 mem=1GiB
# Another installation's container with this agent's id (tessera.cluster
# tells them apart): the agent, registering the first time, lists it before
# it knows its cluster; the manager must leave it out.
docker run -d --name "tessera-foreign-$E2E_RUN" --label "tessera.session=foreign-$E2E_RUN" \
	--label "tessera.agent=$E2E_AGENT_ID" --label tessera.cluster=another-installation \
	"$TEST_IMAGE" sleep 600 >/dev/null
"$TESSERA" manager --config "$E2E_DIR/manager.conf" >>"$E2E_DIR/manager.log" 2>&1 &
MPID=$!; E2E_PIDS+=("$MPID")
start_agent() {
	"$TESSERA" agent --config "$E2E_DIR/agent.conf" >>"$E2E_DIR/agent.log" 2>&1 &
	APID=$!; E2E_PIDS+=("$APID")
}
start_agent
for _ in $(seq 1 100); do [[ -s $E2E_DIR/mdata/admin.conf ]] && break; sleep 0.1; done
export TESSERA_CONFIG=$E2E_DIR/mdata/admin.conf

node_field() {  # node_field FIELD
	"$TESSERA" node ls --json | python3 -c '
import json, sys
n = [x for x in json.load(sys.stdin) if x["id"] == sys.argv[2]]
v = n[0] if n else {}
for k in sys.argv[1].split("."):
    v = v.get(k, "") if isinstance(v, dict) else ""
print(v)' "$1" "$E2E_AGENT_ID"
}
wait_node() {
	for _ in $(seq 1 100); do [[ "$(node_field status)" == "$1" ]] && return 0; sleep 0.1; done
	return 1
}
check "agent registers and is ALIVE" wait_node ALIVE
check "node ls shows its capacity" [ "$(node_field capacity.cpu)" == "2" ]

# Its main process writes a line to the log when an exec asks for it (an
# exec runs as the work user and cannot write to PID 1's output itself).
"$TESSERA" session create "$TEST_IMAGE" --name remote --cpu 1 --mem 32m \
	--startup-command 'while [ ! -e /tmp/say ]; do sleep 0.1; done; echo from-remote; sleep 100000' --wait >/dev/null
check "a session runs on the remote agent" wait_status remote RUNNING
check "placed on that agent" [ "$(jget remote agent)" == "$E2E_AGENT_ID" ]
remote_cluster=$(docker inspect -f '{{index .Config.Labels "tessera.cluster"}}' "$(jget remote container_id)")
check "the agent labels it with the manager's cluster id ($remote_cluster)" \
	grep -q "serving cluster ${remote_cluster:-(none)}\$" "$E2E_DIR/agent.log"
check "another installation's container is left out" not grep -q "foreign-$E2E_RUN" "$E2E_DIR/manager.log"
check "node ls shows it used" [ "$(node_field used.cpu)" == "1" ]
out=$("$TESSERA" session exec remote -- echo via-agent)
check "exec goes through the agent" [ "$out" == "via-agent" ]
out=$("$TESSERA" session exec remote --timeout 1 -- sleep 60 2>&1)
rc=$?
check "the agent stops a command past its timeout ($rc: $out)" [ $rc -eq 124 ]
sum_in=$("$TESSERA" session exec remote -- sh -c 'head -c 300000 /dev/urandom > /tmp/b; busybox sha256sum < /tmp/b' | cut -d' ' -f1)
sum_out=$("$TESSERA" session exec remote -- cat /tmp/b | sha256sum | cut -d' ' -f1)
check "binary exec output comes through the agent unchanged" [ -n "$sum_in" -a "$sum_in" == "$sum_out" ]
out=$("$TESSERA" session exec remote -- touch /tmp/say)
for _ in $(seq 1 300); do
	logs=$("$TESSERA" session logs remote --tail 1)
	[ "$logs" == from-remote ] && break
	sleep 0.1
done
check "logs --tail come through the agent ($logs)" [ "$logs" == from-remote ]
out=$("$TESSERA" session logs nope-remote 2>&1)
check "logs of an unknown session are refused ($out)" contains "$out" "no session"

# A forged agent (wrong secret) is refused.
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Date: x' -H 'Authorization: TESSERA-HMAC-SHA256 Credential=agent:evil, Signature=00' "http://127.0.0.1:$mport/v1/agents/register")
check "registration without the secret is refused ($code)" [ "$code" == "401" ]

kill -STOP "$APID"
check "a silent agent becomes LOST" wait_node LOST
kill -CONT "$APID"; kill "$APID"; wait "$APID" 2>/dev/null
check "its session is LOST with it, its container left alone" wait_status remote LOST
check "and says why" contains "$(jget remote status_info)" "lost: no heartbeat for"
# A manager restarted while no agent is alive takes new sessions as
# PENDING (they used to be refused until an agent registered again).
kill "$MPID"; wait "$MPID" 2>/dev/null
"$TESSERA" manager --config "$E2E_DIR/manager.conf" >>"$E2E_DIR/manager.log" 2>&1 &
MPID=$!; E2E_PIDS+=("$MPID")
for _ in $(seq 1 100); do "$TESSERA" session ls >/dev/null 2>&1 && break; sleep 0.1; done
out=$("$TESSERA" session create "$TEST_IMAGE" --name queued --cpu 1 --mem 32m 2>&1); rc=$?
check "with no node alive after a manager restart, a create is accepted (exit $rc): $out" [ $rc -eq 0 ]
check "as PENDING, waiting for a node ($(jget queued status): $(jget queued status_info))" \
	bash -c '[[ $1 == PENDING && $2 == *"no node is alive"* ]]' _ "$(jget queued status)" "$(jget queued status_info)"
start_agent
check "the restarted agent is ALIVE again" wait_node ALIVE
check "its session is re-adopted RUNNING" wait_status remote RUNNING
check "the queued one starts on it" wait_status queued RUNNING
"$TESSERA" session rm queued >/dev/null
"$TESSERA" session rm remote >/dev/null
check "remove through the restarted agent" wait_status remote TERMINATED

# A setting out of range stops the agent with one line naming it.
{ cat "$E2E_DIR/agent.conf"; echo "gpu_usage_interval_ms = 5"; } >"$E2E_DIR/bad-agent.conf"
out=$(timeout 10 "$TESSERA" agent --config "$E2E_DIR/bad-agent.conf" 2>&1)
rc=$?
refused_in_one_line() {
	[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] &&
		[[ "$out" == *"gpu_usage_interval_ms must be an integer from 100 to 60000"* ]]
}
check "an out-of-range gpu_usage_interval_ms is refused ($rc: $out)" refused_in_one_line
e2e_done
