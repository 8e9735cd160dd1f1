#!/usr/bin/env bash
# One folder seen from two nodes (docs/admin.md, "Storage"): a manager and
# two agent daemons whose storage host is one shared directory, standing in
# for an NFS export mounted at the same path on every node. A session on
# one agent writes into the folder, a session on the other reads it (and
# the other way round); the files are the work user's on the storage host.
. "$(dirname "$0")/lib.sh"
e2e_setup
mport=$(free_port)
secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
SHARED=$E2E_DIR/shared/folders
e2e_manager_conf "$E2E_DIR/manager.conf" "$mport" "$secret" "$E2E_DIR/mdata" \
	heartbeat_interval_ms=300 "storage_hosts=nfs:$SHARED"
"$TESSERA" manager --config "$E2E_DIR/manager.conf" >>"$E2E_DIR/manager.log" 2>&1 &
E2E_PIDS+=("$!")
A1=$E2E_AGENT_ID-a
A2=$E2E_AGENT_ID-b
e2e_cleanup_containers() {
	local a ids
	for a in "$A1" "$A2"; do
		ids=$(docker ps -aq --filter "label=tessera.agent=$a")
		[[ -n "$ids" ]] && docker rm -f $ids >/dev/null 2>&1
	done
	return 0
}
# One CPU each: two sessions of one CPU land on different agents.
for a in "$A1" "$A2"; do
	port=$(free_port)
	e2e_agent_conf "$E2E_DIR/$a.conf" "$a" "$mport" "$port" "$secret" "$E2E_DIR/$a" \
		cpu=1 mem=1GiB "storage_hosts=nfs:$SHARED"
	"$TESSERA" agent --config "$E2E_DIR/$a.conf" >>"$E2E_DIR/$a.log" 2>&1 &
	E2E_PIDS+=("$!")
done
for _ in $(seq 1 100); do [[ -s $E2E_DIR/mdata/admin.conf ]] && break; sleep 0.1; done
export TESSERA_CONFIG=$E2E_DIR/mdata/admin.conf
T() { "$TESSERA" "$@"; }
alive() { T node ls --json | python3 -c 'import json,sys; print(sum(1 for n in json.load(sys.stdin) if n["status"]=="ALIVE"))'; }
for _ in $(seq 1 100); do [[ "$(alive)" == "2" ]] && break; sleep 0.1; done
check "two agents are ALIVE" [ "$(alive)" == "2" ]

check "folder create on the shared host" T folder create results
FID=$(T folder info results --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
check "its directory is on the shared storage" [ -d "$SHARED/$FID" ]
check "a session on one agent mounts it" \
	T session create "$TEST_IMAGE" --name w --cpu 1 --mem 32m --mount results --wait
check "a second session mounts it too" \
	T session create "$TEST_IMAGE" --name r --cpu 1 --mem 32m --mount results --wait
nw=$(jget w agent); nr=$(jget r agent)
check "the two sessions run on different agents ($nw, $nr)" [ -n "$nw" -a -n "$nr" -a "$nw" != "$nr" ]

check "the session on $nw writes a file into the folder" \
	T session exec w -- sh -c "echo written-on-$nw > /home/work/results/hello"
got=$(T session exec r -- cat /home/work/results/hello 2>&1)
check "the session on $nr reads it ($got)" [ "$got" == "written-on-$nw" ]
check "and writes back" T session exec r -- sh -c "echo answer-from-$nr > /home/work/results/reply"
got=$(T session exec w -- cat /home/work/results/reply 2>&1)
check "which the session on $nw reads ($got)" [ "$got" == "answer-from-$nr" ]
check "both files are the work user's on the storage host" \
	[ "$(stat -c %u:%g "$SHARED/$FID/hello" "$SHARED/$FID/reply" | sort -u)" == 1000:1000 ]
got=$(T folder files results)
check "folder files lists what the sessions wrote" contains "$got" "reply"

e2e_done
