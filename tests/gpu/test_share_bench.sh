#!/usr/bin/env bash
# gpu-share-bench on the mock driver, under the shim: every command runs,
# the share is what the program is told, an allocation past it fails with
# "out of memory", and the pacing shows in the (simulated) throughput.
set -euo pipefail
BENCH=$1
work=$(mktemp -d /tmp/tessera-share-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
export TESSERA_MOCK_GPUS=1x8GiB:100
fail=0
check() { # description, condition
	if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi
}
shim() { # sm percent, command... (memory share: $MEM, default 2GiB)
	local pct=$1; shift
	printf 'memory_limit = %s\nsm_limit_percent = %d\n' "${MEM:-2GiB}" "$pct" > "$work/fgpu.conf"
	rm -f "$work/fgpu.region"
	env LD_PRELOAD="$FGPU_LIB" TESSERA_FGPU_CONF="$work/fgpu.conf" \
		TESSERA_FGPU_REGION="$work/fgpu.region" "$@"
}

bare=$("$BENCH" info)
check "info without the shim shows the device" '[[ $bare == *"memory_total 8589934592 "* && $bare == *"sms 100 "* ]]'
shared=$(shim 100 "$BENCH" info)
check "info under the shim shows the share" '[[ $shared == *"memory_total 2147483648 "* ]]'
check "alloc within the share" '[[ $(shim 100 "$BENCH" alloc 1GiB) == ok ]]'
set +e
out=$(shim 100 "$BENCH" alloc 3GiB); rc=$?
set -e
check "alloc past the share: out of memory, exit 1" '[[ $out == "out of memory" && $rc == 1 ]]'
for how in async graph; do
	check "$how alloc within the share" '[[ $(shim 100 "$BENCH" alloc 1GiB --how $how) == ok ]]'
	set +e
	out=$(shim 100 "$BENCH" alloc 3GiB --how $how); rc=$?
	set -e
	check "$how alloc past the share: out of memory, exit 1" '[[ $out == "out of memory" && $rc == 1 ]]'
	check "$how alloc without the shim: the whole device" '[[ $("$BENCH" alloc 3GiB --how $how) == ok ]]'
done
check "reset frees: the share can be allocated again" '[[ $(shim 100 "$BENCH" alloc 1536MiB --how reset) == ok ]]'
check "stack without the shim: the whole device" '[[ $("$BENCH" limit stack 16384) == "ok value 16384 "* ]]'
for what in "stack 16384" "heap 4GiB"; do
	set +e
	out=$(shim 100 "$BENCH" limit $what); rc=$?
	set -e
	check "limit $what past the share: out of memory, exit 1" '[[ $out == "out of memory" && $rc == 1 ]]'
done
out=$(shim 100 "$BENCH" limit heap 1GiB)
check "a heap within the share: charged, and free memory says so" '[[ $out =~ ^ok\ value\ 1073741824\ free_drop\ ([0-9]+)\ charged\ ([0-9]+)$ && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]]'
out=$("$BENCH" deep-launch)
check "a kernel with 32 KiB of local memory grows the stack" '[[ $out =~ ^ok\ value\ 32768\ free_drop\ ([0-9]+)\ charged\ ([0-9]+)\  && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]]'
set +e
out=$(shim 100 "$BENCH" deep-launch); rc=$?
set -e
# 32 KiB for each of 2048 x 100 resident threads is past the 2 GiB share:
# the launch is refused before the driver grows the stack
check "a launch that would grow the stack past the share: out of memory, exit 1" '[[ $out == "out of memory" && $rc == 1 ]]'
out=$(MEM=7GiB shim 100 "$BENCH" deep-launch)
check "within the share the grown stack is charged, as free memory says" '[[ $out =~ ^ok\ value\ 32768\ free_drop\ ([0-9]+)\ charged\ ([0-9]+)\  && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]]'
set +e
"$BENCH" alloc lots 2>/dev/null; rc=$?
"$BENCH" throughput 0 2>/dev/null; rc2=$?
"$BENCH" alloc 1GiB --how sideways 2>/dev/null; rc3=$?
set -e
check "bad arguments exit 2" '[[ $rc == 2 && $rc2 == 2 && $rc3 == 2 ]]'
tp=$("$BENCH" throughput 1 --iters 10)
check "throughput runs" '[[ $tp == kernels_per_s* ]]'
green=$(shim 100 "$BENCH" throughput 1 --iters 10 --green-sms 20 2>&1)
check "throughput in a green context, under the shim" '[[ $green == *"green context of 24 SMs (asked 20)"* && $green == *kernels_per_s* ]]'
lo=$(shim 50 "$BENCH" launch-overhead 1000)
check "launch overhead runs under pacing" '[[ $lo == ns_per_launch* ]]'
ao=$(shim 100 "$BENCH" alloc-overhead 100)
check "alloc overhead runs" '[[ $ao == ns_per_alloc_free* ]]'
exit $fail
