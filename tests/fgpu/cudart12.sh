#!/usr/bin/env bash
# Debian's CUDA runtime 12.4 (libcudart12, non-free) on the mock driver
# with the fGPU library in between, as a program built against it runs in
# a mock-GPU session (docs/fgpu.md, "The CUDA runtime on the mock").
#
#   cudart12.sh test       the test (meson: cudart12_mock): skipped (77)
#                          unless the runtime was fetched, or
#                          TESSERA_CUDART12_FETCH=1 fetches it;
#                          TESSERA_CUDART12_REQUIRED=1 makes "cannot
#                          fetch" a failure (make images-test sets both)
#   cudart12.sh fetch      fetches libcudart12 into the cache only
#   cudart12.sh generate   rewrites tests/fgpu/cudart12_entry_points.txt:
#                          what the runtime asks for, resolved by Debian's
#                          driver (libcuda1, fetched too; it answers
#                          lookups without a GPU)
#
# Paths come from the environment (meson sets them) or from BUILD (default
# build): FGPU_LIB, MOCK_LIB_DIR, CUDART12_PROBE, PROC_RESOLVE, CUDART12_DIR
# (the cache: the .deb files and what they hold), CUDART12_LIST.
# TESSERA_DEBIAN_MIRROR changes the archive (default deb.debian.org).
#
# `make test` does not download: the runtime is non-free, and a download
# is no part of the project's build. What runs in `make test` without it
# is test_fgpu_cudart12, from the list this script generates.
set -uo pipefail
mode=${1:-test}
src=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$src/build}
FGPU_LIB=${FGPU_LIB:-$BUILD/src/fgpu/libtessera-fgpu.so}
MOCK_LIB_DIR=${MOCK_LIB_DIR:-$BUILD/src/gpu}
CUDART12_PROBE=${CUDART12_PROBE:-$BUILD/tests/fgpu/cudart12-probe}
PROC_RESOLVE=${PROC_RESOLVE:-$BUILD/tests/fgpu/proc-resolve}
CUDART12_DIR=${CUDART12_DIR:-$BUILD/tests/fgpu/cudart12}
CUDART12_LIST=${CUDART12_LIST:-$src/tests/fgpu/cudart12_entry_points.txt}
MIRROR=${TESSERA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie
SHARE=$((2 * 1024 * 1024 * 1024))   # of a mock 8 GiB GPU
RT_LIB_DIR=$CUDART12_DIR/root/usr/lib/x86_64-linux-gnu
DRV_LIB_DIR=$CUDART12_DIR/root/usr/lib/x86_64-linux-gnu/nvidia/current

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

# fetch PACKAGE...: downloads the packages from Debian's non-free with
# apt and a sources list of its own (no root, the system's apt state is
# not touched) and unpacks them under $CUDART12_DIR/root. Prints why not
# and returns 1 when it cannot.
fetch() {
	command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
		{ echo "apt-get and dpkg-deb are needed to fetch $*"; return 1; }
	local a=$CUDART12_DIR/apt
	mkdir -p "$a/lists/partial" "$a/archives/partial" "$CUDART12_DIR/root" || return 1
	echo "deb $MIRROR $SUITE non-free" >"$a/sources.list"
	local o=(-o "Dir::Etc::sourcelist=$a/sources.list" -o Dir::Etc::sourceparts=-
		-o "Dir::State::Lists=$a/lists" -o Dir::State::status=/dev/null
		-o "Dir::Cache::archives=$a/archives" -o Debug::NoLocking=1
		-o APT::Sandbox::User="$(id -un)")
	# apt-get update succeeds when it cannot reach the archive (it warns)
	if ! apt-get "${o[@]}" -qq update >"$a/update.log" 2>&1 ||
		grep -q '^[WE]:.*\(Failed to fetch\|Could not\|Unable\)' "$a/update.log"; then
		echo "cannot read $MIRROR $SUITE non-free: $(grep -m1 '^[WE]:' "$a/update.log")"
		return 1
	fi
	(cd "$CUDART12_DIR" && apt-get "${o[@]}" -qq download "$@") >"$a/download.log" 2>&1 ||
		{ echo "cannot download $*: $(tail -1 "$a/download.log")"; return 1; }
	local p deb
	for p in "$@"; do
		deb=$(ls "$CUDART12_DIR/${p}"_*.deb 2>/dev/null | tail -1)
		[[ -n $deb ]] || { echo "no .deb of $p after download"; return 1; }
		dpkg-deb -x "$deb" "$CUDART12_DIR/root" || { echo "cannot unpack $deb"; return 1; }
		echo "$p $(dpkg-deb -f "$deb" Version)" >"$CUDART12_DIR/$p.version"
	done
}

have_runtime() { [[ -e $RT_LIB_DIR/libcudart.so.12 ]]; }

# run_probe LOG: the probe under the fGPU library on a mock 8 GiB GPU with
# a 2 GiB share; its output on stdout, its status returned; every lookup
# the runtime makes is logged to LOG.
run_probe() {
	local t rc
	t=$(mktemp -d) || return 1
	printf 'memory_limit = 2GiB\n' >"$t/fgpu.conf"
	: >"$1"
	TESSERA_FGPU_CONF=$t/fgpu.conf TESSERA_FGPU_REGION=$t/fgpu.region \
		TESSERA_MOCK_GPUS=1x8GiB TESSERA_MOCK_PROC_LOG=$1 \
		LD_PRELOAD=$FGPU_LIB LD_LIBRARY_PATH=$MOCK_LIB_DIR:$RT_LIB_DIR \
		"$CUDART12_PROBE" "$SHARE"
	rc=$?
	rm -rf "$t"
	return $rc
}

requests() { grep -v '^#' "$1" | awk '{print $1, $2, $3}'; }

case $mode in
fetch)
	why=$(fetch libcudart12) || die "$why"
	echo "fetched $(cat "$CUDART12_DIR/libcudart12.version") into $CUDART12_DIR"
	;;
generate)
	why=$(fetch libcudart12 libcuda1) || die "$why"
	log=$(mktemp)
	run_probe "$log" >/dev/null
	[[ -s $log ]] || die "the runtime asked the mock for nothing"
	resolved=$(awk '{print $1, $2, $3}' "$log" |
		"$PROC_RESOLVE" "$DRV_LIB_DIR/libcuda.so.1") || die "proc-resolve failed"
	{
		echo "# The driver entry points Debian's CUDA runtime asks cuGetProcAddress_v2 for"
		echo "# when it initialises, in its order: NAME VERSION FLAGS (\"\" is the empty"
		echo "# name, its first lookup; flags 2 is the per-thread default stream), then"
		echo "# what Debian's driver hands out for each: its exported name, - for nothing."
		echo "#   runtime: $(cat "$CUDART12_DIR/libcudart12.version")"
		echo "#   driver:  $(cat "$CUDART12_DIR/libcuda1.version") (asked without a GPU)"
		echo "# Made by tests/fgpu/cudart12.sh generate. test_fgpu_cudart12 checks each"
		echo "# line against the fGPU library and the mock driver; cudart12_mock checks"
		echo "# that the runtime still asks for exactly these (docs/fgpu.md)."
		echo "$resolved"
	} >"$CUDART12_LIST"
	rm -f "$log"
	echo "wrote $CUDART12_LIST: $(echo "$resolved" | wc -l) lookups"
	;;
test)
	if ! have_runtime; then
		[[ ${TESSERA_CUDART12_FETCH:-0} == 1 ]] ||
			skip "Debian's libcudart12 (non-free) is not fetched; make images-test fetches it" \
				"(or tests/fgpu/cudart12.sh fetch)"
		if ! why=$(fetch libcudart12); then
			[[ ${TESSERA_CUDART12_REQUIRED:-0} == 1 ]] && die "$why"
			skip "$why"
		fi
	fi
	for f in "$FGPU_LIB" "$CUDART12_PROBE" "$MOCK_LIB_DIR/libcuda.so.1" "$CUDART12_LIST"; do
		[[ -e $f ]] || die "$f is missing"
	done
	echo "runtime: $(cat "$CUDART12_DIR/libcudart12.version" 2>/dev/null || echo '?')"
	log=$(mktemp)
	out=$(run_probe "$log")
	rc=$?
	echo "$out" | sed 's/^/  probe: /'
	fail=0
	check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
	check "the runtime reports its version, 12.4" \
		'grep -qx "runtime version 12040" <<<"$out"'
	check "the runtime reports the mock driver's version, 12.4" \
		'grep -qx "driver version 12040" <<<"$out"'
	# Where it stops today: the runtime's private tables (cuGetExportTable),
	# which the mock does not have. If this changes, the runtime got further
	# on the mock: the share checks the probe makes then apply, and the
	# docs must say so.
	check "the runtime stops at cudaGetDeviceCount with cudaErrorCallRequiresNewerDriver (36): no cuGetExportTable" \
		'[[ $rc == 3 ]] && [[ $(tail -1 <<<"$out") == "stopped at cudaGetDeviceCount: 36 cudaErrorCallRequiresNewerDriver "* ]]'
	check "every lookup reached the mock through the fGPU library" \
		'[[ -s $log ]] && ! awk '"'"'$4 != "libtessera-fgpu.so"'"'"' "$log" | grep -q .'
	check "it asked for cuGetExportTable" 'grep -q "^cuGetExportTable " "$log"'
	# Names the library holds that it did not ask for are variant names
	# (_v2, _ptsz, _ptds): it asks for every base name it knows at once.
	unasked=$(strings -n 3 "$RT_LIB_DIR/libcudart.so.12" | grep -E '^cu[A-Z][A-Za-z0-9_]*$' |
		sort -u | comm -23 - <(awk '{print $1}' "$log" | sort -u) |
		grep -Ev '_(v[0-9]+|ptsz|ptds)$' | tr '\n' ' ')
	check "every cu* name in the library was asked for, or is a variant's${unasked:+ (not: $unasked)}" \
		'[[ -z $unasked ]]'
	if ! diff <(requests "$CUDART12_LIST") <(awk '{print $1, $2, $3}' "$log") >"$log.diff"; then
		echo "FAIL the runtime's lookups differ from $CUDART12_LIST (- the list, + now);"
		echo "     tests/fgpu/cudart12.sh generate makes it anew:"
		head -20 "$log.diff" | sed 's/^/     /'
		fail=1
	else
		echo "ok   the runtime's $(wc -l <"$log") lookups are those of $(basename "$CUDART12_LIST")"
	fi
	rm -f "$log" "$log.diff"
	exit $fail
	;;
*)
	echo "usage: cudart12.sh test|fetch|generate" >&2
	exit 2
	;;
esac
