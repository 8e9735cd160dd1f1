#!/usr/bin/env bash
# Session start: `tessera session create IMAGE --wait` (returns once the
# session is RUNNING) against `docker run -d` of the same image with the same
# limits (returns once the container is started), alternated in one run on
# the same dockerd, so both see the same machine. Prints median/min/p90 in ms,
# the ratio of medians and a verdict against the goal.
#
#   bench/session-start.sh [BUILD_DIR]      (default: build)
#   BENCH_ROUNDS=15   measured rounds (one unmeasured warm-up round first)
#   BENCH_GOAL=1.15   the ratio to meet
#   BENCH_KEEP=1      keep the server's data dir and log
#
# A third row, for where the time goes: `docker run -d` of the same on a
# bridge network of its own, as a session's container of `tessera server`
# is (its user's network; the runner's app port is not published there:
# app_publish = no), alternated with the other two.
#
# After each start the agent makes the user's next spare sandbox in the
# background (docs/architecture.md, "Sandboxes"): every start after the
# warm-up joins one. The script waits, untimed, for each spare before the
# next row, so that its making slows no measured start, and prints what
# it took.
#
# Starts its own `tessera server` (temporary data dir, free port, node id
# bench-<random>) and removes it, its containers and the baseline containers
# on exit, Ctrl-C included. Removals happen outside the timed part.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BUILD=${1:-build}
[[ $BUILD == /* ]] || BUILD=$root/$BUILD
ROUNDS=${BENCH_ROUNDS:-15}
GOAL=${BENCH_GOAL:-1.15}
CPU=0.1
MEM=32m

if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
	echo "session-start: BENCH_ROUNDS must be a positive whole number" >&2
	exit 2
fi
if [[ ! -x $BUILD/tessera || ! -x $BUILD/tessera-runner ]]; then
	echo "session-start: $BUILD/tessera or tessera-runner not built (run make build)" >&2
	exit 2
fi
if ! docker info >/dev/null 2>&1; then
	echo "session-start: no Docker daemon answers (scripts/bootstrap starts one)" >&2
	exit 2
fi

# The image: the end-to-end tests' busybox image, built with `docker import`
# from Debian's static busybox when absent (tests/e2e/lib.sh).
TESSERA_BIN=$BUILD/tessera
. "$root/tests/e2e/lib.sh"
set +e
IMAGE=$TEST_IMAGE
e2e_build_image || { echo "session-start: cannot build $IMAGE" >&2; exit 1; }

WORK=$(mktemp -d /tmp/tessera-bench.XXXXXX)
# A private copy of the binaries (the runner must sit beside tessera), so a
# rebuild running meanwhile cannot swap or truncate them under the bench.
mkdir -p "$WORK/bin"
cp "$BUILD/tessera" "$BUILD/tessera-runner" "$WORK/bin/" || { rm -rf "$WORK"; exit 1; }
TESSERA=$WORK/bin/tessera
if ! "$TESSERA" --version >/dev/null 2>&1; then
	echo "session-start: $BUILD/tessera does not run (being rebuilt?)" >&2
	rm -rf "$WORK"
	exit 1
fi
RUN=$(tr 'A-Z' 'a-z' <<<"${WORK##*.}")
NODE=bench-$RUN
SERVER_PID=""

cleanup() {
	trap - EXIT INT TERM
	if [[ -n $SERVER_PID ]]; then
		kill "$SERVER_PID" 2>/dev/null
		wait "$SERVER_PID" 2>/dev/null
	fi
	# Sessions carry the node id as a label; the baseline ours.
	local ids
	ids=$(docker ps -aq --filter "label=tessera.agent=$NODE" 2>/dev/null)
	ids+=" $(docker ps -aq --filter "label=tessera.bench=$RUN" 2>/dev/null)"
	[[ -n ${ids// /} ]] && docker rm -f $ids >/dev/null 2>&1
	# The user's network, which the agent keeps after each session
	# (docs/architecture.md, "Users' networks"): this run's only.
	[[ -s $WORK/networks ]] && docker network rm $(sort -u "$WORK/networks") >/dev/null 2>&1
	docker network rm "bench-$RUN" >/dev/null 2>&1
	if [[ ${BENCH_KEEP:-0} == 1 ]]; then
		echo "session-start: kept $WORK (server.log, data/)" >&2
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'echo "session-start: interrupted" >&2; exit 130' INT TERM

APP_PORTS=$(e2e_free_port_range 8) || { echo "session-start: no free app port range" >&2; rm -rf "$WORK"; exit 1; }
"$TESSERA" server --data-dir "$WORK/data" --port 0 --web-port 0 --app-ports "$APP_PORTS" --node-id "$NODE" \
	>"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 200); do
	[[ -s $WORK/data/admin.conf ]] && break
	kill -0 "$SERVER_PID" 2>/dev/null || break
	sleep 0.05
done
if [[ ! -s $WORK/data/admin.conf ]]; then
	echo "session-start: the server did not start:" >&2
	tail -20 "$WORK/server.log" >&2
	exit 1
fi
export TESSERA_CONFIG=$WORK/data/admin.conf

# Milliseconds (3 decimals) between two $EPOCHREALTIME readings. Bash reads
# the clock itself, with no process start, so the timer adds microseconds.
elapsed_ms() {
	local a=${1/[.,]/} b=${2/[.,]/}
	local us=$((10#$b - 10#$a))
	printf '%d.%03d' $((us / 1000)) $((us % 1000))
}

# One timed tessera start; prints ms. Waits for removal afterwards.
time_tessera() {  # time_tessera NAME
	local t0 t1 rc
	t0=$EPOCHREALTIME
	"$TESSERA" session create "$IMAGE" --name "$1" --cpu "$CPU" --mem "$MEM" --wait >"$WORK/create.out" 2>&1
	rc=$?
	t1=$EPOCHREALTIME
	if ((rc != 0)); then
		echo "session-start: tessera session create failed:" >&2
		cat "$WORK/create.out" >&2
		return 1
	fi
	elapsed_ms "$t0" "$t1"
}

untimed_tessera_rm() {  # NAME: removes and waits until the container is gone
	"$TESSERA" session info "$1" --json >"$WORK/info-$1.json" 2>/dev/null
	local id
	id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$WORK/info-$1.json" 2>/dev/null)
	[[ -n $id ]] && docker inspect -f '{{.HostConfig.NetworkMode}}' \
		$(docker ps -aq --filter "label=tessera.session=$id") 2>/dev/null | grep '^tessera-u-' >>"$WORK/networks"
	"$TESSERA" session rm "$1" >/dev/null 2>&1
	for _ in $(seq 1 200); do
		[[ -z $(docker ps -aq --filter "label=tessera.session=$id") ]] && break
		sleep 0.05
	done
}

time_docker() {  # time_docker NAME
	local t0 t1 rc
	t0=$EPOCHREALTIME
	docker run -d --name "$1" --label "tessera.bench=$RUN" --cpus "$CPU" -m "$MEM" \
		--pids-limit 256 --security-opt no-new-privileges "$IMAGE" sleep 100000 >"$WORK/docker.out" 2>&1
	rc=$?
	t1=$EPOCHREALTIME
	if ((rc != 0)); then
		echo "session-start: docker run failed:" >&2
		cat "$WORK/docker.out" >&2
		return 1
	fi
	elapsed_ms "$t0" "$t1"
}

untimed_docker_rm() { docker rm -f "$1" >/dev/null 2>&1; }

# After each start the agent makes the user's next spare sandbox in the
# background (docs/architecture.md, "Sandboxes"): wait, untimed, until
# the N-th is ready, so that it neither slows the next `docker run`
# measured nor is missing at the next start. One line per spare made:
# "sandbox ID ready on NETWORK in N ms". With sandboxes off, none come:
# gives up after 30 s once.
SPARES_SEEN=1
wait_spare() {  # wait_spare N
	((SPARES_SEEN)) || return 0
	for _ in $(seq 1 600); do
		(($(grep -c 'sandbox [0-9a-f]* ready on ' "$WORK/server.log") >= $1)) && return 0
		sleep 0.05
	done
	echo "session-start: no spare sandbox came after start $1; going on without waiting" >&2
	SPARES_SEEN=0
}

# The same on a network like a user's (made once, untimed, as the agent
# keeps its users').
time_docker_net() {  # time_docker_net NAME
	local t0 t1 rc
	t0=$EPOCHREALTIME
	docker run -d --name "$1" --label "tessera.bench=$RUN" --cpus "$CPU" -m "$MEM" \
		--pids-limit 256 --security-opt no-new-privileges --network "bench-$RUN" \
		"$IMAGE" sleep 100000 >"$WORK/docker.out" 2>&1
	rc=$?
	t1=$EPOCHREALTIME
	if ((rc != 0)); then
		echo "session-start: docker run on a network failed:" >&2
		cat "$WORK/docker.out" >&2
		return 1
	fi
	elapsed_ms "$t0" "$t1"
}
docker network create --label "tessera.bench=$RUN" -o com.docker.network.bridge.enable_icc=true "bench-$RUN" >/dev/null ||
	{ echo "session-start: cannot make the network bench-$RUN" >&2; exit 1; }

echo "session start: $IMAGE, --cpu $CPU --mem $MEM, $ROUNDS rounds alternated (+1 warm-up), $(nproc) CPUs, docker $(docker version --format '{{.Server.Version}}' 2>/dev/null)"

# Warm-up, not counted: first container of the image, first API calls.
time_tessera "w-t" >/dev/null || exit 1
untimed_tessera_rm "w-t"
wait_spare 1
rm -f "$WORK/info-w-t.json"
time_docker "bench-$RUN-w" >/dev/null || exit 1
untimed_docker_rm "bench-$RUN-w"
time_docker_net "bench-$RUN-nw" >/dev/null || exit 1
untimed_docker_rm "bench-$RUN-nw"

T=()
D=()
N=()
for ((i = 1; i <= ROUNDS; i++)); do
	# Alternate who goes first so drift on the machine hits both alike.
	if ((i % 2)); then
		t=$(time_tessera "r$i") || exit 1
		untimed_tessera_rm "r$i"
		wait_spare $((i + 1))
		d=$(time_docker "bench-$RUN-$i") || exit 1
		untimed_docker_rm "bench-$RUN-$i"
	else
		d=$(time_docker "bench-$RUN-$i") || exit 1
		untimed_docker_rm "bench-$RUN-$i"
		t=$(time_tessera "r$i") || exit 1
		untimed_tessera_rm "r$i"
		wait_spare $((i + 1))
	fi
	n=$(time_docker_net "bench-$RUN-n$i") || exit 1
	untimed_docker_rm "bench-$RUN-n$i"
	T+=("$t")
	D+=("$d")
	N+=("$n")
	printf '  round %2d/%d: tessera %8s ms   docker run -d %8s ms   on a network %8s ms\n' "$i" "$ROUNDS" "$t" "$d" "$n"
done

# The table, and where tessera's time goes (from each session's history:
# created -> SCHEDULED -> PREPARING -> RUNNING, server timestamps).
python3 - "$GOAL" "$WORK" "${T[*]}" "${D[*]}" "${N[*]}" <<'PY'
import glob, json, re, statistics, sys
from datetime import datetime

goal = float(sys.argv[1])
work = sys.argv[2]
t = [float(x) for x in sys.argv[3].split()]
d = [float(x) for x in sys.argv[4].split()]
nd = [float(x) for x in sys.argv[5].split()]

def p90(xs):
    s = sorted(xs)
    # nearest rank
    k = max(0, min(len(s) - 1, -(-9 * len(s) // 10) - 1))
    return s[k]

rows = [("tessera", t), ("docker run -d", d), ("  own network", nd)]
print()
print(f"{'':16}{'median':>10}{'min':>10}{'p90':>10}   (ms, n={len(t)})")
for name, xs in rows:
    print(f"{name:16}{statistics.median(xs):10.1f}{min(xs):10.1f}{p90(xs):10.1f}")
ratio = statistics.median(t) / statistics.median(d)
print(f"ratio of medians tessera / docker run -d: {ratio:.2f}")
verdict = "MEETS" if ratio <= goal else "MISSES"
print(f"verdict: {verdict} the goal ratio <= {goal:.2f}")
print(f"(docker run -d on a network of its own / on the default bridge: "
      f"{statistics.median(nd) / statistics.median(d):.2f}; tessera / that: {statistics.median(t) / statistics.median(nd):.2f})")

def at(s):
    return datetime.strptime(s.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000

# The agent's own line per start: "session ID started in N ms: image N ms
# (kept|looked at), network N ms (kept|asked Docker|none), create N ms,
# start N ms, app port N ms" (monotonic clock, ms).
agent = {}
spare_ms = []
spare_re = re.compile(r"sandbox [0-9a-f]+ ready on \S+ in (\d+) ms")
line_re = re.compile(r"session (\S+) started in (\d+) ms: image (\d+) ms \(([^)]*)\), network (\d+) ms "
                     r"\(([^)]*)\), create (\d+) ms, start (\d+) ms, app port (\d+) ms")
try:
    for line in open(work + "/server.log", errors="replace"):
        m = line_re.search(line)
        if m:
            agent[m.group(1)] = m
        m = spare_re.search(line)
        if m:
            spare_ms.append(int(m.group(1)))
except OSError:
    pass
steps = {"image": [], "network": [], "create": [], "start": [], "app port": [], "other": []}
seen = {"image": [], "network": []}
phases = {"created -> SCHEDULED": [], "SCHEDULED -> PREPARING": [],
          "PREPARING -> RUNNING": [], "server total": [], "client + HTTP": []}
for f in sorted(glob.glob(work + "/info-r*.json")):
    try:
        info = json.load(open(f))
        h = info["status_history"]
        first = {}
        for e in h:
            first.setdefault(e["status"], at(e["at"]))
        c, s, p, r = (first[k] for k in ("PENDING", "SCHEDULED", "PREPARING", "RUNNING"))
    except Exception:
        continue
    phases["created -> SCHEDULED"].append(s - c)
    phases["SCHEDULED -> PREPARING"].append(p - s)
    phases["PREPARING -> RUNNING"].append(r - p)
    phases["server total"].append(r - c)
    n = int(f.rsplit("-r", 1)[1].split(".")[0])
    phases["client + HTTP"].append(t[n - 1] - (r - c))
    m = agent.get(info.get("id"))
    if m:
        total, im, nw, cr, st, ap = (int(m.group(k)) for k in (2, 3, 5, 7, 8, 9))
        for k, v in (("image", im), ("network", nw), ("create", cr), ("start", st), ("app port", ap)):
            steps[k].append(v)
        steps["other"].append(total - (im + nw + cr + st + ap))
        seen["image"].append(m.group(4))
        seen["network"].append(m.group(6))
if phases["server total"]:
    print()
    print("where tessera's time goes (medians, ms; server timestamps have ms resolution):")
    for k, xs in phases.items():
        print(f"  {k:24}{statistics.median(xs):8.1f}")
        if k == "PREPARING -> RUNNING" and steps["create"]:
            # Inside it, the agent's steps (its log); each a median of
            # its own, so they need not add up to the line above.
            for s, ys in steps.items():
                note = ""
                if s in seen:
                    note = "   (" + ", ".join(f"{w}: {seen[s].count(w)}" for w in sorted(set(seen[s]))) + ")"
                print(f"    agent: {s:16}{statistics.median(ys):8.1f}{note}")
if spare_ms:
    print(f"  the next spare sandbox, made after each start in the background (not timed above): "
          f"median {statistics.median(spare_ms):.1f} ms, n={len(spare_ms)}")
PY
