#!/usr/bin/env bash
# Create, inspect, exec, logs, limits and removal of sessions through the CLI
# against `tessera server` and the real dockerd.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server || { e2e_done; exit 1; }

out=$("$TESSERA" session create "$TEST_IMAGE" --name web --cpu 0.5 --mem 64m \
	--env GREETING=hello --startup-command 'echo started-$GREETING; sleep 100000' --wait 2>&1)
check "session create --wait succeeds" [ $? -eq 0 ]
check "session reaches RUNNING" wait_status web RUNNING
check "status_info says where it runs" contains "$(jget web status_info)" "running"
check "info --json shows the image" [ "$(jget web image)" == "$TEST_IMAGE" ]
check "info --json shows cpu 0.5" [ "$(jget web resources.cpu)" == "0.5" ]
check "info --json shows mem in bytes" [ "$(jget web resources.mem)" == "67108864" ]
check "info --json names the agent" [ -n "$(jget web agent)" ]

"$TESSERA" session exec web -- sh -c 'echo to-out; echo to-err >&2; exit 3' >"$E2E_DIR/out" 2>"$E2E_DIR/err"
rc=$?
check "exec returns the command's exit code" [ $rc -eq 3 ]
check "exec keeps stdout apart" grep -qx to-out "$E2E_DIR/out"
check "exec keeps stderr apart" grep -qx to-err "$E2E_DIR/err"
check "stdout has no stderr" not grep -q to-err "$E2E_DIR/out"
out=$("$TESSERA" session exec web --timeout 1 -- sh -c 'echo started; sleep 60; echo never' 2>&1)
rc=$?
check "a command past its timeout is stopped: exit code 124 ($rc)" [ $rc -eq 124 ]
check "and is told so ($out)" contains "$out" "ran past its 1 s timeout"
check "its output so far is kept" contains "$out" "started"
check "it did not go on" not contains "$out" "never"
left=$("$TESSERA" session exec web -- sh -c 'for p in /proc/[0-9]*; do tr "\0" " " < $p/cmdline 2>/dev/null; echo; done | grep -c "^sleep 60"')
check "nothing of it is left running ($left)" [ "$left" == "0" ]

limit=$("$TESSERA" session exec web -- sh -c 'cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes')
check "memory limit visible in the container's cgroup ($limit)" [ "$limit" == "67108864" ]
quota=$("$TESSERA" session exec web -- sh -c 'cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo "$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"')
check "CPU quota is half a core ($quota)" [ "$quota" == "50000 100000" ]
pid1=$("$TESSERA" session exec web -- cat /proc/1/cmdline | tr '\0' ' ')
check "the runner is PID 1 ($pid1)" contains "$pid1" "tessera-runner"
env_out=$("$TESSERA" session exec web -- env)
check "--env reaches the container" has_line "$env_out" GREETING=hello

for _ in $(seq 1 50); do
	"$TESSERA" session logs web | grep -q started-hello && break
	sleep 0.1
done
check "logs show the startup command's output" bash -c "'$TESSERA' session logs web | grep -q started-hello"

ls_out=$("$TESSERA" session ls)
check "session ls has a header" has_prefix_line "$ls_out" NAME
check "session ls lists it" has_prefix_line "$ls_out" "web "
check "session ls --json is an array with the fields" bash -c "'$TESSERA' session ls --json | python3 -c '
import json,sys
a=json.load(sys.stdin); s=[x for x in a if x[\"name\"]==\"web\"][0]
assert all(k in s for k in (\"id\",\"name\",\"status\",\"status_info\",\"image\",\"agent\",\"resources\"))'"

# --count creates NAME-1..NAME-K.
"$TESSERA" session create "$TEST_IMAGE" --name batch --count 2 --cpu 0.1 --mem 16m --wait >/dev/null 2>&1
check "--count 2 creates batch-1" wait_status batch-1 RUNNING
check "--count 2 creates batch-2" wait_status batch-2 RUNNING

# pids_limit auto (docs/admin.md, "Session isolation"): 512 per CPU core
# of the session, at least 256.
check "a session of 0.1 CPU gets the floor of the pids limit" \
	[ "$(docker inspect -f '{{.HostConfig.PidsLimit}}' "$(jget batch-1 container_id)")" == 256 ]
check "one of 0.5 CPU too" [ "$(docker inspect -f '{{.HostConfig.PidsLimit}}' "$(jget web container_id)")" == 256 ]
# tessera server's own proxy reaches the container's address: nothing is
# published (app_publish = no; docs/admin.md).
pb=$(docker inspect -f '{{json .HostConfig.PortBindings}}' "$(jget web container_id)")
check "no port of a tessera server session is published ($pb)" [ "$pb" == "{}" -o "$pb" == null ]

# A container killed from outside becomes ERROR saying so, with the signal
# and the code (issue 27: it said "ended by itself").
cid=$(jget batch-1 container_id)
docker kill --signal KILL "$cid" >/dev/null
check "a container killed outside becomes ERROR" wait_status batch-1 ERROR
info=$(jget batch-1 status_info)
check "ERROR says it was killed, by which signal, from outside ($info)" \
	[ "$info" == "container was killed by SIGKILL from outside the session (docker kill or kill -9 on its node), exit code 137" ]
check "and not that it ended by itself" not contains "$info" "by itself"
check "its exit code is 137" [ "$(jget batch-1 exit_code)" == 137 ]

"$TESSERA" session rm web batch-2 >/dev/null
check "rm makes it TERMINATED" wait_status web TERMINATED
check "rm of batch-2" wait_status batch-2 TERMINATED
check "the container is gone" [ -z "$(docker ps -aq --filter label=tessera.session="$(jget web id)")" ]
check "ls without --all hides TERMINATED" not has_prefix_line "$("$TESSERA" session ls)" "web "
check "ls --all shows TERMINATED" has_prefix_line "$("$TESSERA" session ls --all)" "web "
hist=$("$TESSERA" session info web --json | python3 -c 'import json,sys; print(" ".join(h["status"] for h in json.load(sys.stdin)["status_history"]))')
# PREPARING three times: sent to the node, the container created, started
# (the node's own times; the start's breakdown below splits at them).
check "history walks the state machine ($hist)" [ "$hist" == "PENDING SCHEDULED PREPARING PREPARING PREPARING RUNNING TERMINATING TERMINATED" ]

# Where its start's time went (issue 30): the API's start_breakdown adds up
# to its total, with the node's part split where the node timed it
# (create, start, app port), and session info prints it.
sb=$("$TESSERA" session info web --json | python3 -c '
import json, sys
b = json.load(sys.stdin)["start_breakdown"]
print(" ".join(p["phase"] for p in b["phases"]), sum(p["ms"] for p in b["phases"]) == b["total_ms"] >= 0)')
check "start_breakdown has queue, dispatch, create, start, app port, adding up ($sb)" [ "$sb" == "queue dispatch create start app port True" ]
took=$("$TESSERA" session info web | grep '^Start took:')
check "session info prints it ($took)" \
	grep -qE '^Start took: +[0-9]+\.[0-9]{2} s: queue [0-9.]+ s, dispatch [0-9.]+ s, create [0-9.]+ s, start [0-9.]+ s, app port [0-9.]+ s$' <<<"$took"

e2e_done
