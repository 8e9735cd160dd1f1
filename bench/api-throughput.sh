#!/usr/bin/env bash
# API throughput (issue 21, item 7): with 1,000 sessions in the manager,
# 32 connections of `wrk` (Debian's package) ask for
#   - one session:            GET /v1/sessions/{name}
#   - a page of 100:          GET /v1/sessions?limit=100
#   - a filtered page:        GET /v1/sessions?status=PENDING&limit=100
#   - the whole list:         GET /v1/sessions (all 1,000)
# and the table gives requests per second, p50 and p99 latency against
# the goal of each, for every store the manager has (today SQLite; a row
# per store, the SQLite one the baseline of the same run).
#
#   bench/api-throughput.sh [BUILD_DIR]     (default: build)
#   BENCH_SECONDS=10   seconds per measurement
#   BENCH_CONNS=32     connections
#   BENCH_KEEP=1       keep the server's data dir and log
#   BENCH_BASELINE=DIR another build (e.g. of an older commit) measured the
#                      same way in the same run, as the row "base", for a
#                      before/after comparison
#
# The sessions stay PENDING (a per-user limit of 0.01 CPU keeps every one
# of them queued), so no container is started: what is measured is the
# API. Requests are signed once each (a signature holds for 15 minutes,
# docs/api.md) and wrk sends the same bytes again and again over
# keep-alive connections; each measurement follows an unmeasured 2 s
# warm-up. The server runs from a private copy of the
# binary, on a free port, in a temporary directory removed on exit.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BUILD=${1:-build}
[[ $BUILD == /* ]] || BUILD=$root/$BUILD
SECONDS_EACH=${BENCH_SECONDS:-10}
CONNS=${BENCH_CONNS:-32}
N=1000

if ! command -v wrk >/dev/null; then
	echo "api-throughput: wrk is not installed (scripts/bootstrap --bench installs it)" >&2
	exit 2
fi
if [[ ! -x $BUILD/tessera ]]; then
	echo "api-throughput: $BUILD/tessera is not built (run make build)" >&2
	exit 2
fi
if ! docker info >/dev/null 2>&1; then
	echo "api-throughput: no Docker daemon answers (the server's local agent needs one)" >&2
	exit 2
fi

WORK=$(mktemp -d /tmp/tessera-bench-api.XXXXXX)
mkdir -p "$WORK/bin"
cp "$BUILD/tessera" "$WORK/bin/" || { rm -rf "$WORK"; exit 1; }
[[ -x $BUILD/tessera-runner ]] && cp "$BUILD/tessera-runner" "$WORK/bin/"
TESSERA=$WORK/bin/tessera
if [[ -n ${BENCH_BASELINE:-} ]]; then
	mkdir -p "$WORK/base"
	cp "$BENCH_BASELINE/tessera" "$BENCH_BASELINE/tessera-runner" "$WORK/base/" ||
		{ echo "api-throughput: BENCH_BASELINE=$BENCH_BASELINE has no tessera and tessera-runner" >&2; exit 2; }
fi
SERVER_PID=""
cleanup() {
	trap - EXIT INT TERM
	if [[ -n $SERVER_PID ]]; then
		kill "$SERVER_PID" 2>/dev/null
		wait "$SERVER_PID" 2>/dev/null
	fi
	if [[ ${BENCH_KEEP:-0} == 1 ]]; then
		echo "api-throughput: kept $WORK" >&2
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_store STORE: a server on that store with N queued sessions;
# exports TESSERA_CONFIG.
start_store() {
	local store=$1 port bin=$TESSERA
	port=$(free_port)
	case $store in
	sqlite|base)
		[[ $store == base ]] && bin=$WORK/base/tessera
		"$bin" server --data-dir "$WORK/data-$store" --port "$port" --web-port 0 --registry none \
			--node-id "bench-api-$RANDOM" --app-ports "$(python3 -c 'import random; lo=random.randrange(20000,32000); print(f"{lo}-{lo+3}")')" \
			>>"$WORK/server-$store.log" 2>&1 &
		SERVER_PID=$! ;;
	*)
		echo "api-throughput: unknown store $store" >&2
		return 1 ;;
	esac
	export TESSERA_CONFIG=$WORK/data-$store/admin.conf
	for _ in $(seq 1 300); do
		grep -q '^web_url' "$TESSERA_CONFIG" 2>/dev/null && break
		kill -0 "$SERVER_PID" 2>/dev/null || { echo "api-throughput: the server exited (log: $WORK/server-$store.log)" >&2; return 1; }
		sleep 0.1
	done
	"$TESSERA" config set policy.default '{"max_cpu": 0.01}' >/dev/null || return 1
	local image
	image=$(docker image ls --format '{{.Repository}}:{{.Tag}}' | grep -m1 -E '^(tessera-test:|busybox:)')
	if [[ -z $image ]]; then
		TESSERA_BIN=$TESSERA . "$root/tests/e2e/lib.sh"
		set +e
		e2e_build_image
		image=$TEST_IMAGE
	fi
	for i in $(seq 1 $((N / 100))); do
		"$TESSERA" session create "$image" --name "b$i" --count 100 --cpu 0.1 --mem 16m >/dev/null ||
			{ echo "api-throughput: cannot create sessions (log: $WORK/server-$store.log)" >&2; return 1; }
	done
}

stop_store() {
	kill "$SERVER_PID" 2>/dev/null
	wait "$SERVER_PID" 2>/dev/null
	SERVER_PID=""
}

# measure PATH: "RPS P50_MS P99_MS BYTES" from wrk, signed for PATH.
measure() {
	local path=$1 hdrs
	mapfile -t hdrs < <(python3 -c '
import sys
sys.path.insert(0, sys.argv[3])
from signed import Api, load_conf
c = load_conf(sys.argv[1])
api = Api(c["endpoint"], c["access_key"], c["secret_key"])
for k, v in api.sign("GET", sys.argv[2]).items():
    print("%s: %s" % (k, v))
' "$TESSERA_CONFIG" "$path" "$root/tests/e2e")
	local endpoint args=()
	endpoint=$(sed -n 's/^endpoint *= *//p' "$TESSERA_CONFIG")
	for h in "${hdrs[@]}"; do args+=(-H "$h"); done
	local bytes
	bytes=$(curl -s "${args[@]}" "$endpoint$path" | wc -c)
	# An unmeasured warm-up first, as bench/session-start.sh does: the
	# connections open, the kept JSON is rendered, the scheduler's passes
	# after the creates are over.
	wrk -t2 -c"$CONNS" -d2s "${args[@]}" "$endpoint$path" >/dev/null 2>&1
	wrk -t2 -c"$CONNS" -d"${SECONDS_EACH}s" --latency "${args[@]}" "$endpoint$path" >"$WORK/wrk.out" 2>&1
	python3 - "$WORK/wrk.out" "$bytes" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
def ms(v, unit):
    return float(v) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
rps = re.search(r"Requests/sec:\s+([\d.]+)", t)
p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)\b", t)
p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", t)
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
if not (rps and p50 and p99) or non2xx:
    print("0 0 0 0 %s" % ("non-2xx" if non2xx else "wrk-failed"))
else:
    print("%.0f %.2f %.2f %s ok" % (float(rps.group(1)), ms(*p50.groups()), ms(*p99.groups()), sys.argv[2]))
PY
}

# The goals of issue 21: requests/s at least, p99 at most (0: none).
declare -A GOAL_RPS=([one]=20000 [page]=5000 [filtered]=5000 [all]=1000)
declare -A GOAL_P99=([one]=5 [page]=0 [filtered]=0 [all]=0)
declare -A PATHS=([one]="/v1/sessions/b1-1" [page]="/v1/sessions?limit=100" \
	[filtered]="/v1/sessions?status=PENDING&limit=100" [all]="/v1/sessions")
ORDER=(one page filtered all)
STORES=(${BENCH_STORES:-sqlite})
[[ -n ${BENCH_BASELINE:-} ]] && STORES+=(base)

declare -A RESULT
for store in "${STORES[@]}"; do
	echo "api-throughput: $store: starting a server with $N queued sessions..."
	start_store "$store" || exit 1
	for k in "${ORDER[@]}"; do
		RESULT[$store,$k]=$(measure "${PATHS[$k]}")
	done
	stop_store
done

printf '\n%d sessions, %d connections, wrk -t2, %ss each, %s\n' "$N" "$CONNS" "$SECONDS_EACH" "$(nproc) CPUs"
printf '%-8s %-40s %9s %8s %8s %9s %-22s %s\n' store request req/s p50_ms p99_ms bytes goal verdict
for store in "${STORES[@]}"; do
	for k in "${ORDER[@]}"; do
		read -r rps p50 p99 bytes status <<<"${RESULT[$store,$k]}"
		goal=">= ${GOAL_RPS[$k]}/s"
		((GOAL_P99[$k])) && goal+=", p99 <= ${GOAL_P99[$k]} ms"
		verdict=met
		if [[ $status != ok ]]; then
			verdict="not measured ($status)"
		elif ((rps < GOAL_RPS[$k])); then
			verdict=missed
		elif ((GOAL_P99[$k])) && python3 -c "import sys; sys.exit(0 if $p99 > ${GOAL_P99[$k]} else 1)"; then
			verdict="missed (p99)"
		fi
		base=""
		if [[ $store == base && -n ${RESULT[sqlite,$k]:-} ]]; then
			base=$(python3 -c "print(' (this build: %.1fx the baseline)' % (${RESULT[sqlite,$k]%% *} / max(1, $rps)))")
		elif [[ $store != sqlite && -n ${RESULT[sqlite,$k]:-} ]]; then
			base=$(python3 -c "print(' (%.2fx SQLite)' % ($rps / max(1, ${RESULT[sqlite,$k]%% *})))")
		fi
		printf '%-8s %-40s %9s %8s %8s %9s %-22s %s%s\n' "$store" "GET ${PATHS[$k]}" "$rps" "$p50" "$p99" "$bytes" \
			"$goal" "$verdict" "$base"
	done
done
