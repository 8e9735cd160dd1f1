#!/usr/bin/env bash
# Two `tessera server`s on one Docker, with local agents of the same id
# (as two users' servers on one machine are both "local"): each sees,
# adopts and removes only its own containers, told apart by the
# tessera.cluster label. A container made before containers carried that
# label is still adopted by its server.
. "$(dirname "$0")/lib.sh"
e2e_setup
cluster_of() { docker inspect -f '{{index .Config.Labels "tessera.cluster"}}' "$1"; }
running() { [ "$(docker inspect -f '{{.State.Running}}' "$1" 2>/dev/null)" == "true" ]; }
# The number of containers the last registration of the agent reported.
registered_with() { grep "agent $E2E_AGENT_ID registered" "$1" | tail -1 | grep -q "), $2 containers"; }

start_server || { e2e_done; exit 1; }
A_PID=$SERVER_PID A_CONF=$TESSERA_CONFIG
"$TESSERA" session create "$TEST_IMAGE" --name a1 --cpu 0.1 --mem 16m --wait >/dev/null
"$TESSERA" session create "$TEST_IMAGE" --name old --cpu 0.1 --mem 16m --wait >/dev/null
check "a1 RUNNING on server A" wait_status a1 RUNNING
check "old RUNNING on server A" wait_status old RUNNING
a1_cid=$(jget a1 container_id)
a_cluster=$(cluster_of "$a1_cid")
check "A's container carries A's cluster id ($a_cluster)" [ ${#a_cluster} -eq 32 ]

# A container from before the label: the same session and agent labels,
# no tessera.cluster. Its server adopts it after a restart.
old_id=$(jget old id)
old_cid=$(jget old container_id)
stop_server TERM
docker rm -f "$old_cid" >/dev/null
legacy_cid=$(docker run -d --name "tessera-legacy-$E2E_RUN" --label "tessera.session=$old_id" \
	--label "tessera.agent=$E2E_AGENT_ID" --label tessera.name=old "$TEST_IMAGE" sleep 600)
start_server || { e2e_done; exit 1; }
A_PID=$SERVER_PID
check "the unlabelled container is adopted" wait_status old RUNNING
check "with its container id" [ "$(jget old container_id)" == "$legacy_cid" ]
check "A keeps its cluster id across restarts" [ "$(cluster_of "$a1_cid")" == "$a_cluster" ]
"$TESSERA" session rm old >/dev/null
check "old removed" wait_status old TERMINATED

# Server B: its own data dir, the same node id, the same Docker.
E2E_SERVER=b start_server || { e2e_done; exit 1; }
B_PID=$SERVER_PID B_CONF=$TESSERA_CONFIG
check "B's agent registers with none of A's containers" registered_with "$E2E_DIR/server-b.log" 0
check "B logs nothing about A's containers" not grep -q "unknown session" "$E2E_DIR/server-b.log"
check "B lists no session" [ -z "$("$TESSERA" session ls --all --json | python3 -c 'import json,sys; print("".join(s["name"] for s in json.load(sys.stdin)))')" ]
"$TESSERA" session create "$TEST_IMAGE" --name b1 --cpu 0.1 --mem 16m --wait >/dev/null
check "b1 RUNNING on server B" wait_status b1 RUNNING
b1_cid=$(jget b1 container_id)
b_cluster=$(cluster_of "$b1_cid")
check "B's container carries another cluster id ($b_cluster)" [ ${#b_cluster} -eq 32 -a "$b_cluster" != "$a_cluster" ]
node_used=$("$TESSERA" node ls --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["sessions"])')
check "B's node counts one session ($node_used)" [ "$node_used" == "1" ]

# A restarts beside B: it adopts a1 and leaves b1 alone.
export TESSERA_CONFIG=$A_CONF SERVER_PID=$A_PID
stop_server TERM
start_server || { e2e_done; exit 1; }
A_PID=$SERVER_PID
check "a1 RUNNING after A's restart" wait_status a1 RUNNING
check "A's agent registers with its one container" registered_with "$E2E_DIR/server.log" 1
check "A logs nothing about B's containers" not grep -q "unknown session" "$E2E_DIR/server.log"
check "b1's container still runs" running "$b1_cid"

# Each removes its own only.
"$TESSERA" session rm a1 >/dev/null
check "a1 removed on A" wait_status a1 TERMINATED
check "b1's container still runs after A's removal" running "$b1_cid"
export TESSERA_CONFIG=$B_CONF
check "b1 still RUNNING on B" wait_status b1 RUNNING
"$TESSERA" session rm b1 >/dev/null
check "b1 removed on B" wait_status b1 TERMINATED
e2e_done
