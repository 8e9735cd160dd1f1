#!/usr/bin/env bash
# The event stream's cost (issue 30, item 4): a manager with 1,000 RUNNING
# sessions and a round of live usage for all of them every 5 s
# (build/bench/events-bench: the real manager and its HTTP API, a mock
# node whose rounds come in as a node's "stats" events do), and:
#   - idle:    no client (the baseline of the rows below)
#   - admin:   10 UI clients on GET /v1/events as the admin, who sees
#              every session: each round changes all that they see
#   - user:    10 UI clients of a user who owns none of the sessions:
#              the rounds change nothing they see
# For each, the manager's CPU use (% of one core, from /proc/PID/stat over
# the window) and the bytes each client received. Then the list API under
# the admin clients' load, loaded by wrk (Debian's package): a page of 100
# (GET /v1/sessions?limit=100) and the whole list (GET /v1/sessions,
# 1,000 sessions), requests/s and p99 against the same requests with no
# stream client (the ratio). Goals: <= 5 % of one core with 10 clients,
# >= 5,000 req/s with p99 <= 5 ms for the list API under that load.
#
#   bench/events.sh [BUILD_DIR]      (default: build)
#   BENCH_SECONDS=30   seconds per CPU window (6 rounds)
#   BENCH_WRK_SECONDS=10  seconds per wrk measurement
#   BENCH_CONNS=32     wrk connections
#   BENCH_BASELINE=DIR another build's build/ (with bench/events-bench)
#                      measured the same way in the same run, as "base"
#
# Needs no Docker. Clients are curl processes (-N, reading the stream into
# a file); requests are signed once each (a signature holds 15 minutes).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BUILD=${1:-build}
[[ $BUILD == /* ]] || BUILD=$root/$BUILD
WINDOW=${BENCH_SECONDS:-30}
WRK_S=${BENCH_WRK_SECONDS:-10}
CONNS=${BENCH_CONNS:-32}
CLIENTS=10
N=1000

for b in "$BUILD" ${BENCH_BASELINE:+"$BENCH_BASELINE"}; do
	[[ -x $b/bench/events-bench ]] || { echo "events: $b/bench/events-bench is not built" >&2; exit 2; }
done
command -v curl >/dev/null || { echo "events: curl is not installed" >&2; exit 2; }
HAVE_WRK=1
command -v wrk >/dev/null || HAVE_WRK=0

WORK=$(mktemp -d /tmp/tessera-bench-events.XXXXXX)
PID=""
CLIENT_PIDS=()
stop_clients() {
	for p in "${CLIENT_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${CLIENT_PIDS[@]}"; do wait "$p" 2>/dev/null; done
	CLIENT_PIDS=()
}
stop_server() {
	if [[ -n $PID ]]; then
		kill "$PID" 2>/dev/null
		wait "$PID" 2>/dev/null
	fi
	PID=""
}
cleanup() {
	trap - EXIT INT TERM
	stop_clients
	stop_server
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# headers CONF PATH: curl/wrk -H arguments, one per line, signed for GET PATH.
headers() {
	python3 -c '
import sys
sys.path.insert(0, sys.argv[3])
from signed import Api, load_conf
c = load_conf(sys.argv[1])
api = Api(c["endpoint"], c["access_key"], c["secret_key"])
for k, v in api.sign("GET", sys.argv[2]).items():
    print("%s: %s" % (k, v))
' "$1" "$2" "$root/tests/e2e"
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# cpu_window: the server's CPU use over WINDOW seconds, % of one core.
cpu_window() {
	local t0 c0 t1 c1
	t0=$(date +%s.%N); c0=$(cpu_ticks "$PID")
	sleep "$WINDOW"
	t1=$(date +%s.%N); c1=$(cpu_ticks "$PID")
	awk -v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" -v t0="$t0" -v t1="$t1" \
		'BEGIN { printf "%.2f", c / hz / (t1 - t0) * 100 }'
}

# clients CONF: CLIENTS streams of that user, each into $WORK/client-K.
clients() {
	local conf=$1 args=() endpoint
	mapfile -t hdrs < <(headers "$conf" /v1/events)
	for h in "${hdrs[@]}"; do args+=(-H "$h"); done
	endpoint=$(sed -n 's/^endpoint *= *//p' "$conf")
	for k in $(seq 1 "$CLIENTS"); do
		curl -sN "${args[@]}" "$endpoint/v1/events" -o "$WORK/client-$k" &
		CLIENT_PIDS+=($!)
	done
	sleep 2   # connected, first state read: not measured
	BYTES0=$(client_total)
}

client_total() {
	local total=0 k
	for k in $(seq 1 "$CLIENTS"); do total=$((total + $(stat -c %s "$WORK/client-$k" 2>/dev/null || echo 0))); done
	echo "$total"
}

# What each client received since clients() returned.
client_bytes() { echo $((($(client_total) - BYTES0) / CLIENTS)); }

# measure PATH: "RPS P99_MS" from wrk.
measure() {
	local path=$1 args=() endpoint
	mapfile -t hdrs < <(headers "$WORK/data/admin.conf" "$path")
	for h in "${hdrs[@]}"; do args+=(-H "$h"); done
	endpoint=$(sed -n 's/^endpoint *= *//p' "$WORK/data/admin.conf")
	wrk -t2 -c"$CONNS" -d2s "${args[@]}" "$endpoint$path" >/dev/null 2>&1
	wrk -t2 -c"$CONNS" -d"${WRK_S}s" --latency "${args[@]}" "$endpoint$path" >"$WORK/wrk.out" 2>&1
	python3 - "$WORK/wrk.out" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
def ms(v, unit):
    return float(v) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
rps = re.search(r"Requests/sec:\s+([\d.]+)", t)
p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", t)
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
print("0 0" if not (rps and p99) or bad else "%.0f %.2f" % (float(rps.group(1)), ms(*p99.groups())))
PY
}

declare -A R
run_build() {
	local name=$1 bin=$2/bench/events-bench
	rm -rf "$WORK/data"
	mkdir -p "$WORK/data"
	echo "events: $name: starting a manager with $N RUNNING sessions..."
	"$bin" --dir "$WORK/data" --sessions "$N" --period-ms 5000 >"$WORK/out" 2>"$WORK/err" &
	PID=$!
	for _ in $(seq 1 600); do
		grep -q '^ready' "$WORK/out" 2>/dev/null && break
		kill -0 "$PID" 2>/dev/null || { echo "events: events-bench exited: $(cat "$WORK/err")" >&2; return 1; }
		sleep 0.1
	done
	grep -q '^ready' "$WORK/out" || { echo "events: events-bench did not get ready" >&2; return 1; }
	sleep 6   # the first round rendered
	R[$name,idle]=$(cpu_window)
	if ((HAVE_WRK)); then
		R[$name,page0]=$(measure "/v1/sessions?limit=100")
		R[$name,all0]=$(measure "/v1/sessions")
	fi
	clients "$WORK/data/admin.conf"
	R[$name,admin]=$(cpu_window)
	R[$name,admin_bytes]=$(client_bytes)
	if ((HAVE_WRK)); then
		R[$name,page]=$(measure "/v1/sessions?limit=100")
		R[$name,all]=$(measure "/v1/sessions")
	fi
	stop_clients
	clients "$WORK/data/user.conf"
	R[$name,user]=$(cpu_window)
	R[$name,user_bytes]=$(client_bytes)
	stop_clients
	stop_server
}

BUILDS=(this)
run_build this "$BUILD" || exit 1
if [[ -n ${BENCH_BASELINE:-} ]]; then
	BUILDS+=(base)
	run_build base "$BENCH_BASELINE" || exit 1
fi

verdict() { python3 -c "import sys; sys.exit(0 if $1 else 1)" && echo met || echo MISSED; }
printf '\n%d RUNNING sessions, a usage round every 5 s, %d stream clients, %ss windows, %s CPUs\n' \
	"$N" "$CLIENTS" "$WINDOW" "$(nproc)"
printf '%-5s %-44s %8s %14s %s\n' build load "cpu_%" "bytes/client" "goal"
for b in "${BUILDS[@]}"; do
	printf '%-5s %-44s %8s %14s %s\n' "$b" "no client (baseline)" "${R[$b,idle]}" - -
	printf '%-5s %-44s %8s %14s %s\n' "$b" "$CLIENTS admin clients (every round changes all)" "${R[$b,admin]}" \
		"${R[$b,admin_bytes]}" "<= 5 %: $(verdict "${R[$b,admin]} <= 5")"
	printf '%-5s %-44s %8s %14s %s\n' "$b" "$CLIENTS clients of a user without sessions" "${R[$b,user]}" \
		"${R[$b,user_bytes]}" "<= 5 %: $(verdict "${R[$b,user]} <= 5")"
done
if [[ -n ${BENCH_BASELINE:-} ]]; then
	python3 -c "
t, b = ${R[this,admin]}, ${R[base,admin]}
print('CPU with $CLIENTS admin clients: this build %.2f %%, base %.2f %% (%.2fx the base)' % (t, b, t / b if b else 0))"
fi
if ((HAVE_WRK)); then
	printf '\nthe list API with the %d admin clients attached (wrk -t2 -c%d, %ss), against none attached\n' \
		"$CLIENTS" "$CONNS" "$WRK_S"
	printf '%-5s %-32s %9s %8s %-28s %s\n' build request "req/s" p99_ms "vs no client" goal
	for b in "${BUILDS[@]}"; do
		for k in page all; do
			path=$([[ $k == page ]] && echo "GET /v1/sessions?limit=100" || echo "GET /v1/sessions")
			read -r rps p99 <<<"${R[$b,$k]}"
			read -r rps0 p990 <<<"${R[$b,${k}0]}"
			ratio=$(python3 -c "print('%.2fx req/s, p99 %s ms' % ($rps / max(1, $rps0), '$p990'))")
			goal=-
			[[ $k == page ]] && goal=">= 5000/s, p99 <= 5 ms: $(verdict "$rps >= 5000 and $p99 <= 5")"
			printf '%-5s %-32s %9s %8s %-28s %s\n' "$b" "$path" "$rps" "$p99" "$ratio" "$goal"
		done
	done
else
	echo "the list API: not measured (wrk is not installed: scripts/bootstrap --bench)"
fi
