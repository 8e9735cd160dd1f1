#!/usr/bin/env bash
# Stopping and starting `tessera server` keeps running containers, keeps the
# queue, and reports a container that vanished meanwhile.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server --cpu 1 || { e2e_done; exit 1; }

"$TESSERA" session create "$TEST_IMAGE" --name keep --cpu 0.9 --mem 16m --wait >/dev/null
"$TESSERA" session create "$TEST_IMAGE" --name lost --cpu 0.05 --mem 16m >/dev/null
"$TESSERA" session create "$TEST_IMAGE" --name queued --cpu 1 --mem 16m >/dev/null
check "keep RUNNING" wait_status keep RUNNING
check "queued PENDING" wait_status queued PENDING
check "lost RUNNING" wait_status lost RUNNING
keep_cid=$(jget keep container_id)
lost_cid=$(jget lost container_id)

stop_server TERM
check "keep's container survives the server" [ "$(docker inspect -f '{{.State.Running}}' "$keep_cid")" == "true" ]
docker rm -f "$lost_cid" >/dev/null   # vanishes while the server is down

start_server --cpu 1 || { e2e_done; exit 1; }
check "keep is RUNNING again" wait_status keep RUNNING
check "keep has the same container" [ "$(jget keep container_id)" == "$keep_cid" ]
check "queued is still PENDING" [ "$(jget queued status)" == "PENDING" ]
check "lost is ERROR" wait_status lost ERROR
check "lost says it vanished" contains "$(jget lost status_info)" "vanished"
"$TESSERA" session exec keep -- true
check "exec works after the restart" [ $? -eq 0 ]
count=$("$TESSERA" session ls --all --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
check "nothing lost or duplicated (3 sessions, got $count)" [ "$count" == "3" ]

# Now a hard kill: no chance to clean up anything.
stop_server KILL
start_server --cpu 1 || { e2e_done; exit 1; }
check "keep survives a SIGKILL of the server" wait_status keep RUNNING
"$TESSERA" session rm keep >/dev/null
check "queued starts once keep is removed" wait_status queued RUNNING
e2e_done
