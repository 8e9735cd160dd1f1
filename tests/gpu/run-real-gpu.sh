#!/usr/bin/env bash
# Checks libtessera-fgpu.so on a real NVIDIA machine and measures what
# docs/fgpu.md needs. No Docker, no CUDA toolkit, no framework needed: the
# measurements use gpu-share-bench (PTX kernels through the driver API).
# PyTorch checks run in addition when python3 has a CUDA-enabled torch.
# Not run in CI. Builds nothing: pass the build directory.
#
#   tests/gpu/run-real-gpu.sh [BUILD_DIR]        (default: build)
#
# Environment: SECS (seconds per throughput run, default 10), GPU (index,
# default 0). Exit status: 1 when a memory check fails; the compute
# figures are reported, with the goals next to them, not judged.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-$here/../../build}
LIB=$(readlink -f "$BUILD/src/fgpu/libtessera-fgpu.so")
BENCH=$(readlink -f "$BUILD/tests/gpu/gpu-share-bench")
GPUINFO=$(readlink -f "$BUILD/src/gpu/gpu-info")
PROBE=$(readlink -f "$BUILD/src/gpu/tessera-gpu-probe")
SECS=${SECS:-10}
export CUDA_VISIBLE_DEVICES=${GPU:-0}
for f in "$LIB" "$BENCH" "$GPUINFO" "$PROBE"; do
	[[ -f $f ]] || { echo "not built: $f (pass the build directory)"; exit 2; }
done
command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found"; exit 2; }

WORK=$(mktemp -d)
COMP=
cleanup() {
	[[ -n $COMP ]] && kill "$COMP" 2>/dev/null
	[[ -n ${MPS_PIPE:-} ]] && echo quit | CUDA_MPS_PIPE_DIRECTORY=$MPS_PIPE nvidia-cuda-mps-control 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
fail=0
check() { # description, condition
	if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi
}
field() { # key, "key value ..." line
	awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' <<<"$2"
}
mib() { echo $(( ${1:-0} >> 20 )); }
pct_of() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", 100 * a / b }'; }

read -r NAME SMS TOTAL < <("$BENCH" info | awk '{ print $2, $4, $6 }')
[[ -n ${TOTAL:-} ]] || { echo "gpu-share-bench info failed"; exit 2; }
SHARE=$((TOTAL / 4 / 1048576 * 1048576))
echo "== GPU $CUDA_VISIBLE_DEVICES: $NAME, $SMS SMs, $((TOTAL >> 20)) MiB; memory share under test: $((SHARE >> 20)) MiB"
nvidia-smi --query-gpu=driver_version,compute_mode --format=csv,noheader -i "$CUDA_VISIBLE_DEVICES"
# What a bare CUDA context takes, as the agent measures it at start.
CTX=$("$PROBE" | awk 'NR == 1 { print $2 }')
CTX=${CTX:-0}
echo "a CUDA context takes $((CTX >> 20)) MiB (tessera-gpu-probe)"

# Limits through a conf file and a region in a temp dir, as the agent's
# /etc/tessera/fgpu.conf would give them (that file wins if it exists).
# GPU turns (src/fgpu/turn.h): the agent's directory of turn files, one
# per GPU named by its UUID; TURNS= (empty) runs without them.
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i "$CUDA_VISIBLE_DEVICES")
mkdir -p "$WORK/turns" "$WORK/no-turns"
: > "$WORK/turns/$UUID"; : > "$WORK/turns/$UUID.wait"
TURNS=${TURNS-$WORK/turns}
shim() { # sm percent, command...
	local pct=$1; shift
	printf 'memory_limit = %d\nsm_limit_percent = %d\ncontext_overhead = %d\n' \
		"$SHARE" "$pct" "$CTX" > "$WORK/fgpu.conf"
	rm -f "$WORK/fgpu.region"
	env LD_PRELOAD="$LIB" TESSERA_FGPU_CONF="$WORK/fgpu.conf" \
		TESSERA_FGPU_REGION="$WORK/fgpu.region" TESSERA_FGPU_TURN_DIR="${TURNS:-$WORK/no-turns}" "$@"
}

echo "== memory"
out=$(shim 100 "$BENCH" info)
check "cuMemGetInfo total is the share ($out)" '[[ $(field memory_total "$out") == "$SHARE" ]]'
check "allocating half the share succeeds" '[[ $(shim 100 "$BENCH" alloc $((SHARE / 2))) == ok ]]'
check "allocating 110% of the share is out of memory" \
	'[[ $(shim 100 "$BENCH" alloc $((SHARE / 10 * 11))) == "out of memory" ]]'
# Memory pools (cuMemAllocAsync) and CUDA graphs' memory nodes are charged
# through the driver's own reserve figures: check them on the real driver.
for how in async graph; do
	check "$how: allocating half the share succeeds" \
		'[[ $(shim 100 "$BENCH" alloc $((SHARE / 2)) --how $how) == ok ]]'
	check "$how: allocating 110% of the share is out of memory" \
		'[[ $(shim 100 "$BENCH" alloc $((SHARE / 10 * 11)) --how $how) == "out of memory" ]]'
done
check "the context counts: share - context - 64 MiB fits" \
	'[[ $(shim 100 "$BENCH" alloc $((SHARE - CTX - (64 << 20)))) == ok ]]'
(( CTX > (64 << 20) )) && check "the context counts: share - context + 64 MiB does not" \
	'[[ $(shim 100 "$BENCH" alloc $((SHARE - CTX + (64 << 20)))) == "out of memory" ]]'
json=$(shim 100 "$GPUINFO" --json)
check "gpu-info --json shows the share" '[[ $json == *"\"memory_total\":$SHARE"* || $json == *"\"memory_total\": $SHARE"* ]]'
smi=$(shim 100 nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader,nounits -i 0)
check "nvidia-smi under the shim shows the share ($smi MiB)" '[[ ${smi%%,*} == "$((SHARE >> 20))" ]]'
# Context limits size memory the driver reserves (the stack for every
# resident thread, the malloc heap): the shim charges them when raised.
# How much the driver takes at once for them is measured without the shim.
heap=$("$BENCH" limit heap 1GiB)
stack=$("$BENCH" limit stack 16384)
echo "without the library: 1 GiB heap: $heap; 16 KiB stack: $stack"
per_byte=$(( $(field charged "$stack") / (16384 - 1024) ))
over=$(( (1024 + SHARE / 10 * 11 / (per_byte > 0 ? per_byte : 1) + 15) / 16 * 16 ))
if (( per_byte > 0 && over <= 512 * 1024 )); then
	check "a stack of $over bytes a thread, past the share, is out of memory" \
		'[[ $(shim 100 "$BENCH" limit stack $over) == "out of memory" ]]'
fi
check "a malloc heap of 110% of the share is out of memory" \
	'[[ $(shim 100 "$BENCH" limit heap $((SHARE / 10 * 11))) == "out of memory" ]]'
# The driver grows the stack by itself for a kernel that needs more local
# memory. The shim charges the launch its estimate first (the kernel's
# local size for every resident thread), then what cuCtxGetLimit reads
# after a sync. Under the shim free_drop is what the shim charged.
deep=$("$BENCH" deep-launch)
deep_shim=$(shim 100 "$BENCH" deep-launch)
echo "a kernel with 32 KiB of local memory a thread, without the library: $deep; with it: $deep_shim"
(( $(field value "$deep") > 16384 )) ||
	echo "note: the driver does not report the grown stack through cuCtxGetLimit; only the launch's estimate is charged"
deep_drop=$(field free_drop "$deep")
deep_drop=${deep_drop:-0}
if (( deep_drop > 0 && deep_drop + CTX < SHARE )); then
	# the driver's own free figure moves in 2 MiB pages
	check "the stack the driver grew for a kernel is charged ($(field free_drop "$deep_shim") of $deep_drop bytes)" \
		'[[ $deep_shim == ok* ]] && (( $(field free_drop "$deep_shim") + (2 << 20) >= deep_drop ))'
fi
(( deep_drop > 0 )) && check "a launch that would grow the stack past the share is out of memory" \
	'[[ $(SHARE=$((deep_drop / 2 / 1048576 * 1048576)) shim 100 "$BENCH" deep-launch) == "out of memory" ]]'
check "after a device reset half the share can be allocated again" \
	'[[ $(shim 100 "$BENCH" alloc $((SHARE / 2)) --how reset) == ok ]]'
# Memory the driver places with no allocation call (a module's __device__
# variables) is not seen by the library; the agent charges it from the
# driver's per-process figure, read with tessera-gpu-probe --processes.
glob=$("$BENCH" globals 256MiB)
echo "a module with 256 MiB of __device__ variables, without the library: $glob"
shim 100 "$BENCH" globals 256MiB --hold 5 > "$WORK/globals.out" &
for _ in $(seq 100); do [[ -s $WORK/globals.out ]] && break; sleep 0.1; done
held=$("$PROBE" --processes | awk '$3 > m { m = $3 } END { print m + 0 }')
wait
check "the driver's per-process figure has the module's variables ($((held >> 20)) MiB)" \
	'(( held >= (256 << 20) ))'
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	shim 100 python3 - "$SHARE" <<'PY' || fail=1
import sys, torch
share = int(sys.argv[1])
free, total = torch.cuda.mem_get_info(0)
print(f"torch: total {total >> 20} MiB, free {free >> 20} MiB")
ok = total == share
try:
    torch.empty(int(share * 1.1), dtype=torch.uint8, device="cuda")
    print("FAIL torch: allocating 110% of the share succeeded"); ok = False
except torch.cuda.OutOfMemoryError:
    print("ok   torch: allocating past the share raises OutOfMemoryError")
x = torch.empty(int(share * 0.5), dtype=torch.uint8, device="cuda")
print("ok   torch: allocating half the share" if ok else "FAIL torch: total is not the share")
sys.exit(0 if ok else 1)
PY
else
	echo "skip torch checks: python3 has no CUDA-enabled torch"
fi
# A program built against the CUDA runtime 12 (cudart12-probe: cudaMemGetInfo,
# cudaMalloc up to the share and past it), with the system's libcudart.so.12
# or Debian's, fetched by tests/fgpu/cudart12.sh fetch into the build.
CUDART_PROBE=$BUILD/tests/fgpu/cudart12-probe
CUDART_DIR=$BUILD/tests/fgpu/cudart12/root/usr/lib/x86_64-linux-gnu
if [[ -x $CUDART_PROBE ]] &&
	{ [[ -e $CUDART_DIR/libcudart.so.12 ]] || ldconfig -p | grep -q 'libcudart\.so\.12 '; }; then
	out=$(shim 100 env LD_LIBRARY_PATH="$CUDART_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		"$CUDART_PROBE" "$SHARE")
	sed 's/^/     /' <<<"$out"
	check "CUDA runtime 12: cudaMemGetInfo shows the share, cudaMalloc fits it and fails past it" \
		'[[ $(tail -1 <<<"$out") == "all checks passed" ]]'
else
	echo "skip CUDA runtime checks: no libcudart.so.12 (tests/fgpu/cudart12.sh fetch gets Debian's)"
fi

tp() { field kernels_per_s "$("$@")"; }
ms_per() { awk -v k="$1" 'BEGIN { printf "%.3f", 1000 / k }'; }
echo "== compute throughput (kernels/s over ${SECS}s; share = fraction of the GPU alone)"
BASE=$(tp "$BENCH" throughput "$SECS")
# Kernels 16 times longer: a kernel that runs across the GPU's switch to
# another process's time slice has that slice inside its measured time,
# which pacing charges; long kernels show how much that costs.
LONG=65536
BASE_LONG=$(tp "$BENCH" throughput "$SECS" --iters $LONG)
FULL=$(tp shim 100 "$BENCH" throughput "$SECS")
echo "alone, no library: $BASE   library at share 1.0: $FULL   ratio $(awk -v a="$FULL" -v b="$BASE" 'BEGIN { printf "%.3f", a / b }') (goal >= 0.99)"
declare -A R
# Each figure is printed as it is taken, so a run cut short still tells.
measure() { # key, baseline kernels/s, command...
	local key=$1 base=$2
	shift 2
	R[$key]=$(pct_of "$(tp "$@")" "$base")
	echo "$key: ${R[$key]}"
}
for pct in 25 50; do
	measure pacing_alone_$pct "$BASE" shim $pct "$BENCH" throughput "$SECS"
done

start_competitor() { "$@" "$BENCH" throughput 100000 >/dev/null 2>&1 & COMP=$!; sleep 3; }
for pct in 25 50; do
	printf 'memory_limit = %d\nsm_limit_percent = %d\ncontext_overhead = %d\n' \
		"$SHARE" $((100 - pct)) "$CTX" > "$WORK/fgpu-other-$pct.conf"
done
stop_competitor() { kill "$COMP" 2>/dev/null; wait "$COMP" 2>/dev/null; COMP=; }

echo "-- launch pacing, with a competing tenant (no library) keeping the GPU busy"
start_competitor env
measure unlimited_busy "$BASE" "$BENCH" throughput "$SECS"
for pct in 25 50; do
	measure pacing_busy_$pct "$BASE" shim $pct "$BENCH" throughput "$SECS"
done
measure unlimited_busy_long "$BASE_LONG" "$BENCH" throughput "$SECS" --iters $LONG
for pct in 25 50; do
	measure pacing_busy_long_$pct "$BASE_LONG" shim $pct "$BENCH" throughput "$SECS" --iters $LONG
done
stop_competitor
# As on a Tessera node: the other tenant is paced too, to the rest of the
# GPU (its own conf and region, as another container would have), and
# both take turns at the GPU; then the same without turns.
paced_competitor() { # our share, turn dir
	start_competitor env LD_PRELOAD="$LIB" TESSERA_FGPU_CONF="$WORK/fgpu-other-$1.conf" \
		TESSERA_FGPU_REGION="$WORK/fgpu-other-$1.region" TESSERA_FGPU_TURN_DIR="$2"
}
echo "-- launch pacing, with a competing tenant paced to the rest of the GPU"
for pct in 25 50; do
	paced_competitor $pct "${TURNS:-$WORK/no-turns}"
	measure pacing_paced_$pct "$BASE" shim $pct "$BENCH" throughput "$SECS"
	measure pacing_paced_long_$pct "$BASE_LONG" shim $pct "$BENCH" throughput "$SECS" --iters $LONG
	stop_competitor
done
noturn_shim() { TURNS= shim "$@"; }
if [[ -n $TURNS ]]; then
	echo "-- the same without GPU turns"
	for pct in 25 50; do
		paced_competitor $pct "$WORK/no-turns"
		measure noturn_paced_$pct "$BASE" noturn_shim $pct "$BENCH" throughput "$SECS"
		stop_competitor
	done
fi

echo "-- CUDA green contexts (share of the SMs)"
if "$BENCH" throughput 1 --green-sms 8 >/dev/null 2>"$WORK/green.err"; then
	for pct in 25 50; do
		sms=$(( (SMS * pct + 50) / 100 ))
		measure green_alone_$pct "$BASE" "$BENCH" throughput "$SECS" --green-sms $sms
	done
	start_competitor env
	for pct in 25 50; do
		sms=$(( (SMS * pct + 50) / 100 ))
		measure green_busy_$pct "$BASE" "$BENCH" throughput "$SECS" --green-sms $sms
	done
	stop_competitor
else
	echo "skip: $(cat "$WORK/green.err")"
fi

echo "-- MPS active thread percentage"
if command -v nvidia-cuda-mps-control >/dev/null; then
	MPS_PIPE=$WORK/mps-pipe
	mkdir -p "$MPS_PIPE" "$WORK/mps-log"
	export CUDA_MPS_PIPE_DIRECTORY=$MPS_PIPE CUDA_MPS_LOG_DIRECTORY=$WORK/mps-log
	if nvidia-cuda-mps-control -d; then
		sleep 1
		for pct in 25 50; do
			measure mps_alone_$pct "$BASE" env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$pct "$BENCH" throughput "$SECS"
		done
		start_competitor env
		for pct in 25 50; do
			measure mps_busy_$pct "$BASE" env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$pct "$BENCH" throughput "$SECS"
		done
		stop_competitor
		echo "MPS servers: $(echo get_server_list | nvidia-cuda-mps-control)"
		tail -n 5 "$WORK/mps-log/control.log" "$WORK/mps-log/server.log" 2>/dev/null
		echo quit | nvidia-cuda-mps-control
	else
		echo "skip: the MPS daemon did not start"
	fi
	MPS_PIPE=
	unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
else
	echo "skip: nvidia-cuda-mps-control not found"
fi

# A framework's own kernels (cuBLAS through the CUDA runtime, which
# launches CUkernel handles) under the library, alone.
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	torch_tp() {
		"$@" python3 - "$SECS" <<'PY'
import sys, time, torch
secs = float(sys.argv[1])
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(20):
    c = a @ b
torch.cuda.synchronize()
n, t0 = 0, time.monotonic()
while time.monotonic() - t0 < secs:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    n += 20
print(f"kernels_per_s {n / (time.monotonic() - t0):.1f}")
PY
	}
	TORCH_BASE=$(tp torch_tp env)
	echo "torch bf16 4096^3 matmuls/s, no library: $TORCH_BASE"
	measure torch_full "$TORCH_BASE" torch_tp shim 100
	measure torch_pacing_50 "$TORCH_BASE" torch_tp shim 50
	measure torch_pacing_25 "$TORCH_BASE" torch_tp shim 25
fi

echo "== overhead"
lo0=$(field ns_per_launch "$("$BENCH" launch-overhead 200000)")
lo1=$(field ns_per_launch "$(shim 100 "$BENCH" launch-overhead 200000)")
lo2=$(field ns_per_launch "$(shim 50 "$BENCH" launch-overhead 200000)")
ao0=$(field ns_per_alloc_free "$("$BENCH" alloc-overhead 5000)")
ao1=$(field ns_per_alloc_free "$(shim 100 "$BENCH" alloc-overhead 5000)")

echo
echo "== summary (Markdown, for docs/fgpu.md)"
echo
echo "GPU: $NAME ($SMS SMs, $((TOTAL >> 20)) MiB), driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0); a bare CUDA context takes $((CTX >> 20)) MiB."
echo
echo "| Achieved share of the GPU alone (%) | target 25 | target 50 |"
echo "|---|---|---|"
echo "| launch pacing, alone | ${R[pacing_alone_25]} | ${R[pacing_alone_50]} |"
echo "| launch pacing, with a busy competitor | ${R[pacing_busy_25]} | ${R[pacing_busy_50]} |"
echo "| launch pacing, with a busy competitor, 16x longer kernels | ${R[pacing_busy_long_25]} | ${R[pacing_busy_long_50]} |"
echo "| launch pacing${TURNS:+ and GPU turns}, with a competitor paced to the rest | ${R[pacing_paced_25]} | ${R[pacing_paced_50]} |"
echo "| the same, 16x longer kernels | ${R[pacing_paced_long_25]} | ${R[pacing_paced_long_50]} |"
[[ -n $TURNS ]] && echo "| launch pacing without GPU turns, with a competitor paced to the rest | ${R[noturn_paced_25]} | ${R[noturn_paced_50]} |"
echo "| green context, alone | ${R[green_alone_25]:-n/a} | ${R[green_alone_50]:-n/a} |"
echo "| green context, with a busy competitor | ${R[green_busy_25]:-n/a} | ${R[green_busy_50]:-n/a} |"
echo "| MPS thread percentage, alone | ${R[mps_alone_25]:-n/a} | ${R[mps_alone_50]:-n/a} |"
echo "| MPS thread percentage, with a busy competitor | ${R[mps_busy_25]:-n/a} | ${R[mps_busy_50]:-n/a} |"
[[ -n ${R[torch_full]:-} ]] && echo "| PyTorch bf16 matmuls, launch pacing, alone | ${R[torch_pacing_25]} | ${R[torch_pacing_50]} |"
echo
echo "An unlimited tenant next to the same competitor gets ${R[unlimited_busy]}% (${R[unlimited_busy_long]}% with the longer kernels)."
echo "A kernel takes $(ms_per "$BASE") ms alone ($(ms_per "$BASE_LONG") ms for the longer ones)."
echo "Context limits, without the library: a 1 GiB malloc heap took $(mib "$(field free_drop "$heap")") MiB of free memory at once, a 16 KiB stack $(mib "$(field free_drop "$stack")") MiB; the library charges $(mib "$(field charged "$heap")") and $(mib "$(field charged "$stack")") MiB."
echo "A kernel with 32 KiB of local memory a thread, without the library: the stack limit read $(field value "$deep") after it and free memory dropped $(mib "$(field free_drop "$deep")") MiB; with it, $(mib "$(field charged "$deep_shim")") MiB charged."
echo "Throughput at share 1.0 with the library: $(awk -v a="$FULL" -v b="$BASE" 'BEGIN { printf "%.3f", a / b }') of without (goal >= 0.99)${R[torch_full]:+; PyTorch bf16 matmuls: ${R[torch_full]} % of without}."
echo
echo "| Overhead | bare | library | library, pacing 50% |"
echo "|---|---|---|---|"
echo "| ns per cuLaunchKernel (empty kernel) | $lo0 | $lo1 | $lo2 |"
echo "| ns per cuMemAlloc+cuMemFree (64 MiB) | $ao0 | $ao1 | |"
echo
[[ $fail == 0 ]] && echo "memory checks: ok" || echo "memory checks: FAILED"
exit $fail
