#!/usr/bin/env bash
# The seeds' fGPU scenarios on mock GPUs, end to end: the scheduler's queue
# on fGPU, and what a session sees and may allocate through the driver and
# the fGPU library (gpu-info goes through both, like user code).
. "$(dirname "$0")/lib.sh"
e2e_setup
e2e_build_glibc_image
start_server --mock-gpus 1x8GiB --fgpu-per-device 2 || { e2e_done; exit 1; }

node_json() { "$TESSERA" node ls --json | python3 -c "
import json, sys
n = [x for x in json.load(sys.stdin) if x['id'] == '$E2E_AGENT_ID'][0]
v = n
for k in sys.argv[1].split('.'):
    v = v[int(k)] if isinstance(v, list) else v.get(k)
print(v)" "$1"; }

check "an 8 GiB GPU at 2 fGPU per device offers 2 fGPU" [ "$(node_json capacity.fgpu)" == "2" ]
check "node ls shows the device" [ "$(node_json gpus.0.name)" == "Tessera Mock GPU 8 GiB" ]

# Seed scenario (a): three sessions of 1 fGPU on 2 fGPU.
"$TESSERA" session create "$GPU_TEST_IMAGE" --name seed --count 3 --fgpu 1 --cpu 0.1 --mem 32m >/dev/null
check "seed-1 RUNNING" wait_status seed-1 RUNNING
check "seed-2 RUNNING" wait_status seed-2 RUNNING
check "seed-3 PENDING" wait_status seed-3 PENDING
info=$(jget seed-3 status_info)
check "PENDING says it needs 1 fGPU on one device ($info)" contains "$info" "needs 1 fGPU on one device"
check "node ls shows 2 fGPU used" [ "$(node_json used.fgpu)" == "2" ]
check "session info shows the device share" [ "$(jget seed-1 gpus | python3 -c 'import ast,sys; print(ast.literal_eval(sys.stdin.read())[0]["fgpu"])')" == "1" ]
ls_out=$("$TESSERA" session ls)
check "session ls shows 1 fGPU" contains "$ls_out" "1 fGPU"

# Inside a 1 fGPU session (half of the 8 GiB device): about 4 GiB.
total=$("$TESSERA" session exec seed-1 -- gpu-info --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["memory_total"])')
check "1 fGPU at 2 per device sees 4 GiB ($total)" [ "$total" == "$((4 << 30))" ]

"$TESSERA" session rm seed-1 >/dev/null
check "removing one starts the PENDING one" wait_status seed-3 RUNNING
"$TESSERA" session rm seed-2 seed-3 >/dev/null
check "seed-2 ended" wait_status seed-2 TERMINATED
check "seed-3 ended" wait_status seed-3 TERMINATED

# Issue 4 scenario: 0.5 fGPU sees about 2 GiB, allocates 1 GiB, fails 3 GiB.
"$TESSERA" session create "$GPU_TEST_IMAGE" --name half --fgpu 0.5 --cpu 0.1 --mem 64m --wait >/dev/null
check "half RUNNING" wait_status half RUNNING
info_json=$("$TESSERA" session exec half -- gpu-info --json)
total=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["devices"][0]["memory_total"])' "$info_json")
count=$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["devices"]))' "$info_json")
check "0.5 fGPU sees about 2 GiB ($total)" [ "$total" == "$((2 << 30))" ]
check "it sees only its device ($count)" [ "$count" == "1" ]
"$TESSERA" session exec half -- gpu-info --alloc 1GiB >/dev/null 2>&1
check "allocating 1 GiB works" [ $? -eq 0 ]
out=$("$TESSERA" session exec half -- gpu-info --alloc 3GiB 2>&1)
rc=$?
check "allocating 3 GiB fails" [ $rc -ne 0 ]
check "with out of memory ($out)" contains "$out" "out of memory"
# Two processes together cannot pass the share.
out=$("$TESSERA" session exec half -- sh -c 'gpu-info --alloc 1536MiB --hold 5 & sleep 1; gpu-info --alloc 1GiB; r=$?; wait; exit $r' 2>&1)
rc=$?
check "a second process cannot pass the share ($rc)" [ $rc -ne 0 ]
check "it is told out of memory" contains "$out" "out of memory"
env_out=$("$TESSERA" session exec half -- env)
check "TESSERA_FGPU in the environment" has_line "$env_out" "TESSERA_FGPU=0.5"
check "the limits file is mounted read-only" [ "$("$TESSERA" session exec half -- sh -c 'echo x > /etc/tessera/fgpu.conf && echo writable || echo ro' 2>/dev/null)" == "ro" ]
# The node's GPU turns (fgpu/turn.h): the device's two files, read-only.
dev_uuid=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["devices"][0]["uuid"])' "$info_json")
turns=$("$TESSERA" session exec half -- ls /run/tessera-turns)
check "the GPU's turn files are there ($turns)" has_line "$turns" "$dev_uuid"
check "with the waiters' file" has_line "$turns" "$dev_uuid.wait"
check "the turn files are read-only" [ "$("$TESSERA" session exec half -- sh -c 'touch /run/tessera-turns/x 2>/dev/null && echo writable || echo ro')" == "ro" ]

# The allocation map survives a restart.
# (The agent comes back on a driver whose contexts take 256 MiB each, as a
# real one takes hundreds of MiB: it measures that at start.)
uuid_before=$(jget half gpus)
stop_server TERM
TESSERA_MOCK_CTX_OVERHEAD=268435456 start_server --mock-gpus 1x8GiB --fgpu-per-device 2 || { e2e_done; exit 1; }
check "half still RUNNING after restart" wait_status half RUNNING
check "same device share after restart" [ "$(jget half gpus)" == "$uuid_before" ]
check "node usage restored (0.5)" [ "$(node_json used.fgpu)" == "0.5" ]
"$TESSERA" session rm half >/dev/null
wait_status half TERMINATED

# A CUDA context's own memory counts in the share, per process.
check "the agent measured the context overhead" [ "$(node_json gpus.0.context_overhead)" == "268435456" ]
"$TESSERA" session create "$GPU_TEST_IMAGE" --name ctx --fgpu 0.5 --cpu 0.1 --mem 64m --wait >/dev/null
check "ctx RUNNING" wait_status ctx RUNNING
"$TESSERA" session exec ctx -- gpu-info --alloc 1700MiB >/dev/null 2>&1
check "2 GiB share less a 256 MiB context: 1700 MiB fits" [ $? -eq 0 ]
out=$("$TESSERA" session exec ctx -- gpu-info --alloc 1900MiB 2>&1)
check "1900 MiB does not fit next to the context ($out)" contains "$out" "out of memory"
out=$("$TESSERA" session exec ctx -- sh -c 'gpu-info --alloc 1GiB --hold 5 & sleep 1; gpu-info --alloc 600MiB; r=$?; wait; exit $r' 2>&1)
rc=$?
check "two processes pay for two contexts ($rc: $out)" [ $rc -ne 0 ]
"$TESSERA" session rm ctx >/dev/null
wait_status ctx TERMINATED

# Memory the driver takes with no allocation call (here a module's
# __device__ variables) is charged by the agent from the driver's
# per-process figure: a second process then cannot take the share twice.
"$TESSERA" session create "$GPU_TEST_IMAGE" --name mods --fgpu 0.5 --cpu 0.1 --mem 64m --wait >/dev/null
check "mods RUNNING" wait_status mods RUNNING
# Waits (by condition, at most 200 polls) until the share shows the
# module's 1 GiB (the session's usage is then what the driver holds, or
# what the library accounted where that is more: the bench's context),
# then asks for 1 GiB more in a second process, whose own context takes
# 256 MiB: without the agent's charge 256 + 256 + 1024 MiB would fit.
script='gpu-share-bench globals 1GiB --hold 120 >/tmp/g.out 2>&1 &
i=0
while [ $i -lt 200 ]; do
	u=$(gpu-info --json | grep -o "\"memory_used\":[0-9]*"); u=${u#*:}
	[ "${u:-0}" -ge 1073741824 ] && break
	sleep 0.2; i=$((i+1))
done
cat /tmp/g.out; echo "used $u"
gpu-info --alloc 1GiB; r=$?
kill %1; wait; exit $r'
out=$("$TESSERA" session exec mods -- sh -c "$script" 2>&1)
rc=$?
used=$(sed -n 's/^used \([0-9]*\)$/\1/p' <<<"$out")
check "the module's variables are charged to the share ($out)" [ "${used:-0}" -ge 1073741824 ]
check "so 1 GiB more is out of memory ($rc: $out)" contains "$out" "out of memory"
check "the module was loaded ($out)" has_prefix_line "$out" "ok free_drop"
out=$("$TESSERA" session exec mods -- gpu-info --alloc 1GiB 2>&1)
check "with the process gone its charge is gone ($out)" [ $? -eq 0 ]
"$TESSERA" session rm mods >/dev/null
wait_status mods TERMINATED

# Bad fGPU requests.
out=$("$TESSERA" session create "$GPU_TEST_IMAGE" --fgpu 3 2>&1)
check "more fGPU than any node holds is refused ($out)" contains "$out" "could ever hold"
out=$("$TESSERA" session create "$GPU_TEST_IMAGE" --fgpu 0.005 2>&1)
check "an amount off the quantum is refused ($out)" contains "$out" "quantum"

# Seed scenario (b): 1 fGPU per device, three sessions of 0.4.
"$TESSERA" config set fgpu_per_device 1 >/dev/null
check "config get shows the new setting" [ "$("$TESSERA" config get fgpu_per_device)" == "1" ]
check "capacity follows the setting" [ "$(node_json capacity.fgpu)" == "1" ]
"$TESSERA" session create "$GPU_TEST_IMAGE" --name p4 --count 3 --fgpu 0.4 --cpu 0.1 --mem 32m >/dev/null
check "p4-1 RUNNING" wait_status p4-1 RUNNING
check "p4-2 RUNNING" wait_status p4-2 RUNNING
check "p4-3 PENDING (0.4 x 3 > 1 exactly)" wait_status p4-3 PENDING
check "0.8 fGPU used, not 0.8000001" [ "$(node_json used.fgpu)" == "0.8" ]
out=$("$TESSERA" config set fgpu_per_device 0 2>&1)
check "a bad setting is refused ($out)" contains "$out" "fgpu_per_device"
"$TESSERA" session rm p4-1 p4-2 p4-3 >/dev/null
wait_status p4-1 TERMINATED

# The ratio changed under a running session (docs/scheduling.md, "Changing
# fgpu_per_device"): it keeps its physical half of the device, which the
# node counts in the new unit, and the other half is what is free.
mem_of() { "$TESSERA" session exec "$1" -- gpu-info --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["memory_total"])'; }
"$TESSERA" session create "$GPU_TEST_IMAGE" --name half --fgpu 0.5 --cpu 0.1 --mem 32m --wait >/dev/null
check "0.5 fGPU at 1 per device sees 4 GiB" [ "$(mem_of half)" == "$((4 << 30))" ]
"$TESSERA" config set fgpu_per_device 2 >/dev/null
check "at 2 per device the node offers 2 fGPU" [ "$(node_json capacity.fgpu)" == "2" ]
check "of which the running half holds 1 ($(node_json used.fgpu))" [ "$(node_json used.fgpu)" == "1" ]
check "its device says 1 of 2 used ($(node_json gpus.0.fgpu_used))" [ "$(node_json gpus.0.fgpu_used)" == "1" ]
check "the running session keeps its 4 GiB" [ "$(mem_of half)" == "$((4 << 30))" ]
"$TESSERA" session create "$GPU_TEST_IMAGE" --name other-half --fgpu 1 --cpu 0.1 --mem 32m --wait >/dev/null
check "1 new fGPU, the free half, starts" wait_status other-half RUNNING
check "and sees 4 GiB" [ "$(mem_of other-half)" == "$((4 << 30))" ]
"$TESSERA" session create "$GPU_TEST_IMAGE" --name no-room --fgpu 0.5 --cpu 0.1 --mem 32m >/dev/null
check "nothing is left for another" wait_status no-room PENDING
"$TESSERA" session rm half >/dev/null
check "the running half's end frees 1 new fGPU" wait_status no-room RUNNING
"$TESSERA" session rm other-half no-room >/dev/null
wait_status no-room TERMINATED
"$TESSERA" config set fgpu_per_device 1 >/dev/null

# A session over a whole device and half of another: the whole one is not
# throttled, the half is paced to 50% (each device its own SM limit).
stop_server TERM
start_server --mock-gpus 2x8GiB || { e2e_done; exit 1; }
"$TESSERA" session create "$GPU_TEST_IMAGE" --name wide --fgpu 1.5 --cpu 0.1 --mem 64m --wait >/dev/null
check "wide RUNNING" wait_status wide RUNNING
shares=$("$TESSERA" session exec wide -- gpu-info --json | python3 -c 'import json,sys; print(sorted(d["sm_limit_percent"] for d in json.load(sys.stdin)["devices"]))')
check "1.5 fGPU: one device at 100%, one at 50% ($shares)" [ "$shares" == "[50, 100]" ]
env_out=$("$TESSERA" session exec wide -- env)
check "the session-wide variable does not throttle the whole device" has_line "$env_out" "TESSERA_GPU_SM_LIMIT=100"
"$TESSERA" session rm wide >/dev/null
wait_status wide TERMINATED
e2e_done
