#!/usr/bin/env bash
# Checks libtessera-fgpu.so on a real NVIDIA machine (no Docker needed).
# Not run in CI. Builds nothing: pass the built library.
#
#   tests/gpu/run-real-gpu.sh build/src/fgpu/libtessera-fgpu.so [python3]
#
# Needs: nvidia-smi, the NVIDIA driver, Python with PyTorch (CUDA build).
# Prints figures; exits non-zero if a memory check fails. The compute
# figures are reported, not judged: they are what docs/fgpu.md says must
# still be measured.
set -uo pipefail
LIB=$(readlink -f "${1:?usage: $0 path/to/libtessera-fgpu.so [python]}")
PY=${2:-python3}
[[ -f $LIB ]] || { echo "no such file: $LIB"; exit 2; }
command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found"; exit 2; }
$PY -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null ||
  { echo "$PY has no CUDA-enabled PyTorch"; exit 2; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"; kill $(jobs -p) 2>/dev/null' EXIT
TOTAL=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0)  # MiB
SHARE_MIB=$((TOTAL / 4))
fail=0

# Limits through a conf file + region in a temp dir (the agent's file at
# /etc/tessera/fgpu.conf would take precedence if it existed here).
mkconf() { # $1 = sm percent
  printf 'memory_limit = %dMiB\nsm_limit_percent = %d\n' "$SHARE_MIB" "$1" > "$WORK/fgpu.conf"
}
run() { # run with the shim
  env LD_PRELOAD="$LIB" TESSERA_FGPU_CONF="$WORK/fgpu.conf" \
      TESSERA_FGPU_REGION="$WORK/fgpu.region" "$@"
}

echo "== GPU 0: ${TOTAL} MiB; share under test: ${SHARE_MIB} MiB"
mkconf 100

echo "== torch.cuda.mem_get_info under the shim"
run $PY - "$SHARE_MIB" <<'PY' || fail=1
import sys, torch
share = int(sys.argv[1]) * 2**20
free, total = torch.cuda.mem_get_info(0)
print(f"total {total/2**20:.0f} MiB, free {free/2**20:.0f} MiB (expected total {share/2**20:.0f})")
assert total == share, "total is not the share"
try:
    x = torch.empty(int(share * 1.1), dtype=torch.uint8, device="cuda")
    print("FAIL: allocating 110% of the share succeeded"); sys.exit(1)
except torch.cuda.OutOfMemoryError as e:
    print("allocating past the share: OutOfMemoryError (ok)")
x = torch.empty(int(share * 0.5), dtype=torch.uint8, device="cuda")
print("allocating 50% of the share: ok")
PY

echo "== nvidia-smi under the shim"
run nvidia-smi --query-gpu=memory.total,memory.used --format=csv -i 0

cat > "$WORK/bench.py" <<'PY'
# Throughput of a compute-bound loop: matmuls per second over N seconds.
import sys, time, torch
secs = float(sys.argv[1])
a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
for _ in range(5): a @ b
torch.cuda.synchronize()
n, t0 = 0, time.time()
while time.time() - t0 < secs:
    for _ in range(10): a @ b
    torch.cuda.synchronize()
    n += 10
print(n / (time.time() - t0))
PY
cat > "$WORK/launch.py" <<'PY'
# Overhead per launch (tiny kernels) and per allocation.
import time, torch
x = torch.zeros(1, device="cuda")
torch.cuda.synchronize()
n = 20000
t0 = time.perf_counter()
for _ in range(n): x.add_(1)
torch.cuda.synchronize()
launch = (time.perf_counter() - t0) / n * 1e9
torch.cuda.set_per_process_memory_fraction(1.0)
t0 = time.perf_counter()
for _ in range(2000):
    y = torch.empty(64 << 20, dtype=torch.uint8, device="cuda"); del y
    torch.cuda.empty_cache()
alloc = (time.perf_counter() - t0) / 2000 * 1e9
print(f"{launch:.0f} {alloc:.0f}")
PY

SECS=10
echo "== throughput (matmuls/s over ${SECS}s)"
base=$($PY "$WORK/bench.py" $SECS)
mkconf 100; full=$(run $PY "$WORK/bench.py" $SECS)
echo "no library: $base   share 1.0 with library: $full   ratio $(echo "$full / $base" | bc -l | cut -c1-5)"

echo "== achieved share with a competing tenant (no library) keeping the GPU busy"
$PY "$WORK/bench.py" $((SECS * 4)) > "$WORK/competitor.out" &
comp=$!
sleep 3
alone_busy=$($PY "$WORK/bench.py" $SECS)   # an unlimited tenant next to the competitor
for pct in 25 50; do
  mkconf $pct
  got=$(run $PY "$WORK/bench.py" $SECS)
  echo "share ${pct}%: $got matmuls/s; alone on the GPU: $base; achieved $(echo "100 * $got / $base" | bc -l | cut -c1-5)% of the GPU (target ${pct} +- 5); an unlimited tenant in the same situation: $(echo "100 * $alone_busy / $base" | bc -l | cut -c1-5)%"
done
wait $comp

echo "== overhead per launch / per allocation (ns)"
read -r l0 a0 < <($PY "$WORK/launch.py")
mkconf 100; read -r l1 a1 < <(run $PY "$WORK/launch.py")
mkconf 50;  read -r l2 a2 < <(run $PY "$WORK/launch.py")
echo "launch: bare $l0, shim (no pacing) $l1, shim (pacing 50%) $l2"
echo "alloc+free: bare $a0, shim $a1"

[[ $fail == 0 ]] && echo "memory checks: ok" || echo "memory checks: FAILED"
exit $fail
