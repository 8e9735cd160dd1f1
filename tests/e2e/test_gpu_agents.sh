#!/usr/bin/env bash
# Placement and the queue across agents: a manager and two agent daemons,
# each with its own mock GPU; fGPU sessions spread over both, the one that
# fits nowhere waits, and starts on whichever agent frees room.
. "$(dirname "$0")/lib.sh"
e2e_setup
e2e_build_glibc_image
mport=$(free_port)
secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
e2e_manager_conf "$E2E_DIR/manager.conf" "$mport" "$secret" "$E2E_DIR/mdata" \
	heartbeat_interval_ms=300 fgpu_per_device=1
"$TESSERA" manager --config "$E2E_DIR/manager.conf" >>"$E2E_DIR/manager.log" 2>&1 &
E2E_PIDS+=("$!")
A1=$E2E_AGENT_ID-a
A2=$E2E_AGENT_ID-b
# Teardown removes the containers of both agents, whatever happens.
e2e_cleanup_containers() {
	local a ids
	for a in "$A1" "$A2"; do
		ids=$(docker ps -aq --filter "label=tessera.agent=$a")
		[[ -n "$ids" ]] && docker rm -f $ids >/dev/null 2>&1
	done
	return 0
}
for a in "$A1" "$A2"; do
	port=$(free_port)
	e2e_agent_conf "$E2E_DIR/$a.conf" "$a" "$mport" "$port" "$secret" "$E2E_DIR/$a" \
		mock_gpus=1x8GiB cpu=2 mem=2GiB
	"$TESSERA" agent --config "$E2E_DIR/$a.conf" >>"$E2E_DIR/$a.log" 2>&1 &
	E2E_PIDS+=("$!")
done
for _ in $(seq 1 100); do [[ -s $E2E_DIR/mdata/admin.conf ]] && break; sleep 0.1; done
export TESSERA_CONFIG=$E2E_DIR/mdata/admin.conf
alive() { "$TESSERA" node ls --json | python3 -c 'import json,sys; print(sum(1 for n in json.load(sys.stdin) if n["status"]=="ALIVE" and n["capacity"]["fgpu"]==1))'; }
for _ in $(seq 1 100); do [[ "$(alive)" == "2" ]] && break; sleep 0.1; done
check "two agents with one mock GPU each are ALIVE" [ "$(alive)" == "2" ]

"$TESSERA" session create "$GPU_TEST_IMAGE" --name x --count 3 --fgpu 1 --cpu 0.1 --mem 32m >/dev/null
check "x-1 RUNNING" wait_status x-1 RUNNING
check "x-2 RUNNING" wait_status x-2 RUNNING
check "x-3 PENDING: no GPU free on either agent" wait_status x-3 PENDING
n1=$(jget x-1 agent); n2=$(jget x-2 agent)
check "the two running sessions are on different agents ($n1, $n2)" [ "$n1" != "$n2" ]
info=$(jget x-3 status_info)
check "x-3 says why ($info)" contains "$info" "needs 1 fGPU on one device"
total=$("$TESSERA" session exec x-1 -- gpu-info --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["memory_total"])')
check "a whole fGPU on a remote agent sees the whole 8 GiB ($total)" [ "$total" == "$((8 << 30))" ]

"$TESSERA" session rm x-2 >/dev/null
check "x-3 starts once x-2 is gone" wait_status x-3 RUNNING
check "x-3 runs where x-2 was ($n2)" [ "$(jget x-3 agent)" == "$n2" ]
"$TESSERA" session rm x-1 x-3 >/dev/null
check "x-1 ended" wait_status x-1 TERMINATED
check "x-3 ended" wait_status x-3 TERMINATED
e2e_done
