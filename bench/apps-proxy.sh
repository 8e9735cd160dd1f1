#!/usr/bin/env bash
# Session apps through the app proxy (issue 19; docs/apps.md, "Benchmark"):
#  1. throughput of a large HTTP response and of a WebSocket echo stream,
#  2. the latency of small keep-alive requests,
# each on four paths to the same app (bench/apps_backend.py, run inside a
# tessera/python:3.11 session and listening on the container's address):
#    direct   client -> the container's address (the bridge), no proxy
#    runner   client -> the runner's app port at the container's address
#             (the TESSERA-APP/1 line first) -> the app on 127.0.0.1 in
#             the container: the hop the proxy makes on one host
#    published the same through the port Docker published (its userland
#             docker-proxy): the hop across hosts, and the fallback
#    wsproxy  client -> tessera's app proxy (a route opened with `tessera
#             session app --port`, its cookie) -> the app at its own port
#             at the container's address: the real chain a browser uses
#             (the app listens on all the container's addresses, so the
#             proxy skips the runner: docs/apps.md, "A port app at its
#             own port"; an app on the container's loopback only takes
#             the runner row's hop after the proxy)
#    nginx    client -> Debian's nginx (reverse proxy, HTTP/1.1, Upgrade
#             headers, no buffering, 1 worker) -> the container's address
#  Both proxies go to the same app at the same address: what the proxy
#  itself adds is wsproxy minus direct; what nginx adds, nginx minus
#  direct.
#  3. the proxy's memory per idle WebSocket at 10,000 connections
#     (build/bench/proxy-idle: the proxy's code with a stand-in runner),
#  4. the time a user waits from `session create` to the first answer
#     through the proxy: a shell prompt in terminal (busybox test image),
#     against `docker run -d` of the same image; Jupyter's /api/status in
#     tessera/python:3.11.
#
#   bench/apps-proxy.sh [BUILD_DIR]
#   BENCH_ROUNDS=5         rounds of 1 and 2 (interleaved, order alternated)
#   BENCH_START_ROUNDS=5   rounds of 4 (terminal), Jupyter: 3
#   BENCH_BIG_MIB=256      the large response; BENCH_WS_MIB=64 the echo stream
#   BENCH_IDLE_CONNS=10000
#   BENCH_PARTS="1 3 4"    which parts to run (1 is 1 and 2)
#   BENCH_NGINX_TUNING     the nginx location's buffer lines (default below)
#
# Runs its own `tessera server --app-ports ... --app-publish yes` (the
# published path needs a published port; the proxy still goes to the
# container's address) (temporary data dir) and nginx
# (config in a temp dir, foreground, a free port) and removes them and
# every container it made on exit. nginx: `scripts/bootstrap --bench`.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BUILD=${1:-build}
[[ $BUILD == /* ]] || BUILD=$root/$BUILD
ROUNDS=${BENCH_ROUNDS:-5}
SROUNDS=${BENCH_START_ROUNDS:-5}
BIG_MIB=${BENCH_BIG_MIB:-256}
WS_MIB=${BENCH_WS_MIB:-64}
IDLE=${BENCH_IDLE_CONNS:-10000}
PARTS=" ${BENCH_PARTS:-1 3 4} "
# nginx reads as the proxy does, 64 KiB at a time (its default is one
# memory page, which halves its throughput here), buffering responses as
# it does by default; upgraded connections use proxy_buffer_size.
NGINX_TUNING=${BENCH_NGINX_TUNING:-proxy_buffer_size 64k; proxy_buffers 8 64k; proxy_busy_buffers_size 128k; proxy_max_temp_file_size 0;}
PY_IMAGE=tessera/python:3.11

for v in ROUNDS SROUNDS BIG_MIB WS_MIB IDLE; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "apps-proxy: $v must be a positive whole number" >&2; exit 2; }
done
if [[ ! -x $BUILD/tessera || ! -x $BUILD/tessera-runner ]]; then
	echo "apps-proxy: $BUILD/tessera or tessera-runner not built (run make build)" >&2
	exit 2
fi
if ! docker info >/dev/null 2>&1; then
	echo "apps-proxy: no Docker daemon answers (scripts/bootstrap starts one)" >&2
	exit 2
fi

TESSERA_BIN=$BUILD/tessera
. "$root/tests/e2e/lib.sh"
set +e
IMAGE=$TEST_IMAGE
e2e_build_image || { echo "apps-proxy: cannot build $IMAGE" >&2; exit 1; }
HAVE_PY=0
docker image inspect "$PY_IMAGE" >/dev/null 2>&1 && HAVE_PY=1
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $NGINX ]] || NGINX=""

WORK=$(mktemp -d /tmp/tessera-bench-apps.XXXXXX)
mkdir -p "$WORK/bin"
cp "$BUILD/tessera" "$BUILD/tessera-runner" "$WORK/bin/" || { rm -rf "$WORK"; exit 1; }
TESSERA=$WORK/bin/tessera
RUN=$(tr 'A-Z' 'a-z' <<<"${WORK##*.}")
NODE=bench-$RUN
SERVER_PID=""
NGINX_PID=""

cleanup() {
	trap - EXIT INT TERM
	[[ -n $NGINX_PID ]] && { kill "$NGINX_PID" 2>/dev/null; wait "$NGINX_PID" 2>/dev/null; }
	[[ -n $SERVER_PID ]] && { kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; }
	local ids nets
	ids=$(docker ps -aq --filter "label=tessera.agent=$NODE" 2>/dev/null)
	nets=""
	[[ -n $ids ]] && nets=$(docker inspect -f '{{.HostConfig.NetworkMode}}' $ids 2>/dev/null | grep '^tessera-u-' | sort -u)
	ids+=" $(docker ps -aq --filter "label=tessera.bench=$RUN" 2>/dev/null)"
	[[ -n ${ids// /} ]] && docker rm -f $ids >/dev/null 2>&1
	# The users' networks, which the agent keeps after their sessions:
	# those of this run's sessions (rm_session notes them).
	[[ -s $WORK/networks ]] && nets+=" $(sort -u "$WORK/networks")"
	[[ -n ${nets// /} ]] && docker network rm $nets >/dev/null 2>&1
	if [[ ${BENCH_KEEP:-0} == 1 ]]; then echo "apps-proxy: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'echo "apps-proxy: interrupted" >&2; exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
APP_LO=$(python3 -c 'import random; print(random.randrange(20000, 50000))')
"$TESSERA" server --data-dir "$WORK/data" --port 0 --web-port 0 --node-id "$NODE" --registry none \
	--app-ports "$APP_LO-$((APP_LO + 15))" --app-publish yes >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 300); do
	[[ -s $WORK/data/admin.conf ]] && grep -q 'serving apps' "$WORK/server.log" && break
	kill -0 "$SERVER_PID" 2>/dev/null || break
	sleep 0.05
done
if ! grep -q 'serving apps' "$WORK/server.log"; then
	echo "apps-proxy: the server did not start:" >&2
	tail -20 "$WORK/server.log" >&2
	exit 1
fi
export TESSERA_CONFIG=$WORK/data/admin.conf
LOAD=(python3 "$here/apps_load.py")

echo "session apps through the proxy: $(nproc) CPUs, docker $(docker version --format '{{.Server.Version}}' 2>/dev/null), ${NGINX:+$("$NGINX" -v 2>&1 | sed 's/.*: //')}${NGINX:-no nginx}"

# ---- 1 and 2: throughput and latency on four paths ------------------------
# After each start the agent makes the user's next spare sandbox in the
# background (docs/architecture.md, "Sandboxes"), which the next start of
# the user joins: wait, untimed, until there are as many spares made as
# sessions started, so that the making slows no `docker run` measured.
# Gives up once after 30 s (sandboxes off) and waits no more.
SPARES_SEEN=1
wait_spares() {
	((SPARES_SEEN)) || return 0
	local started
	started=$(grep -c 'session [0-9a-f]* started in ' "$WORK/server.log")
	for _ in $(seq 1 600); do
		(($(grep -c 'sandbox [0-9a-f]* ready on ' "$WORK/server.log") >= started)) && return 0
		sleep 0.05
	done
	echo "apps-proxy: no spare sandbox came after $started starts; going on without waiting" >&2
	SPARES_SEEN=0
}
MATRIX=""
if [[ $PARTS != *" 1 "* ]]; then
	:
elif ((HAVE_PY)); then
	"$TESSERA" session create "$PY_IMAGE" --name be --cpu 1 --mem 1g --wait >/dev/null || exit 1
	wait_spares
	CID=$("$TESSERA" session info be --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["container_id"])')
	docker cp "$here/apps_backend.py" "$CID:/tmp/apps_backend.py" >/dev/null || exit 1
	docker exec -d "$CID" python3 /tmp/apps_backend.py 0.0.0.0 8000 "$BIG_MIB"
	IP=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$CID")
	for _ in $(seq 1 600); do
		curl -fsS -o /dev/null "http://$IP:8000/small" 2>/dev/null && break
		sleep 0.1
	done
	EP=$(docker port "$CID" 7611/tcp | head -1)
	SECRET=$(cat "$(docker inspect -f '{{range .Mounts}}{{if eq .Destination "/run/tessera/app-secret"}}{{.Source}}{{end}}{{end}}' "$CID")")
	URL=$("$TESSERA" session app be --port 8000) || exit 1
	COOKIE=$("${LOAD[@]}" cookie "$URL") || exit 1
	PPORT=$(sed -E 's|^http://[^:/]+:([0-9]+)/.*|\1|' <<<"$URL")
	# The proxy serves apps on an address of its own (127.0.0.2 on one
	# machine: another origin than the UI's), the one the link names.
	PHOST=$(sed -E 's|^http://([^:/]+):.*|\1|' <<<"$URL")
	PATHS=$(python3 -c '
import json, sys
ip, ep, secret, pport, cookie, phost = sys.argv[1:7]
h, p = ep.rsplit(":", 1)
print(json.dumps({
  "direct": {"host": ip, "port": 8000},
  "runner": {"host": ip, "port": 7611, "line": "TESSERA-APP/1 %s port:8000" % secret},
  "published": {"host": h, "port": int(p), "line": "TESSERA-APP/1 %s port:8000" % secret},
  "wsproxy": {"host": phost, "port": int(pport), "cookie": cookie}}))' "$IP" "$EP" "$SECRET" "$PPORT" "$COOKIE" "$PHOST")
	if [[ -n $NGINX ]]; then
		NPORT=$(free_port)
		mkdir -p "$WORK/nginx/logs" "$WORK/nginx/tmp"
		chmod 777 "$WORK/nginx/tmp"
		cat >"$WORK/nginx/nginx.conf" <<-EOF
		worker_processes 1;
		pid $WORK/nginx/nginx.pid;
		error_log $WORK/nginx/logs/error.log warn;
		events { worker_connections 4096; }
		http {
		  access_log off;
		  keepalive_requests 1000000;
		  client_body_temp_path $WORK/nginx/tmp/body;
		  proxy_temp_path $WORK/nginx/tmp/proxy;
		  map \$http_upgrade \$connection_upgrade { default upgrade; '' ''; }
		  upstream app { server $IP:8000; keepalive 16; keepalive_requests 1000000; }
		  server {
		    listen 127.0.0.1:$NPORT;
		    location / {
		      proxy_pass http://app;
		      proxy_http_version 1.1;
		      proxy_set_header Host \$host;
		      proxy_set_header Upgrade \$http_upgrade;
		      proxy_set_header Connection \$connection_upgrade;
		      $NGINX_TUNING
		      proxy_read_timeout 3600s;
		    }
		  }
		}
		EOF
		"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' 2>>"$WORK/nginx/logs/error.log" &
		NGINX_PID=$!
		for _ in $(seq 1 100); do curl -fsS -o /dev/null "http://127.0.0.1:$NPORT/small" 2>/dev/null && break; sleep 0.05; done
		PATHS=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["nginx"]={"host":"127.0.0.1","port":int(sys.argv[2])}; print(json.dumps(d))' "$PATHS" "$NPORT")
	else
		echo "nginx: not installed (scripts/bootstrap --bench): its rows are skipped"
	fi
	echo "1-2: $ROUNDS rounds on each path (interleaved): 2000 keep-alive GETs of 13 bytes (paths in turn), one GET of $BIG_MIB MiB, $WS_MIB MiB echoed over a WebSocket"
	MATRIX=$("${LOAD[@]}" matrix "$PATHS" "$ROUNDS" "$BIG_MIB" "$WS_MIB") || { echo "apps-proxy: the matrix failed" >&2; exit 1; }
	docker inspect -f '{{.HostConfig.NetworkMode}}' "$("$TESSERA" session info be --json 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["container_id"])' 2>/dev/null)" 2>/dev/null |
		grep '^tessera-u-' >>"$WORK/networks"
	"$TESSERA" session rm be >/dev/null 2>&1
else
	echo "1-2: skipped: $PY_IMAGE is not built (images/, make images)"
fi

# ---- 3: memory per idle WebSocket --------------------------------------
IDLE_OUT=""
if [[ $PARTS != *" 3 "* ]]; then
	:
elif [[ -x $BUILD/bench/proxy-idle ]]; then
	echo "3: $IDLE idle upgraded connections through the proxy (build/bench/proxy-idle)"
	IDLE_OUT=$("$BUILD/bench/proxy-idle" "$IDLE" 2>"$WORK/idle.err")
	grep -v ' INFO ' "$WORK/idle.err" >&2
else
	echo "3: skipped: $BUILD/bench/proxy-idle is not built"
fi

# ---- 4: the time a user waits -----------------------------------------
elapsed_ms() {
	local a=${1/[.,]/} b=${2/[.,]/}
	local us=$((10#$b - 10#$a))
	printf '%d.%03d' $((us / 1000)) $((us % 1000))
}
time_docker() {  # IMAGE NAME
	local t0 t1
	t0=$EPOCHREALTIME
	docker run -d --name "$2" --label "tessera.bench=$RUN" --cpus 1 -m 512m --pids-limit 4096 \
		--security-opt no-new-privileges "$1" sleep 100000 >/dev/null 2>&1 || return 1
	t1=$EPOCHREALTIME
	elapsed_ms "$t0" "$t1"
	docker rm -f "$2" >/dev/null 2>&1
}
rm_session() {
	local id
	id=$("$TESSERA" session info "$1" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' 2>/dev/null)
	[[ -n $id ]] && docker inspect -f '{{.HostConfig.NetworkMode}}' \
		$(docker ps -aq --filter "label=tessera.session=$id") 2>/dev/null | grep '^tessera-u-' >>"$WORK/networks"
	"$TESSERA" session rm "$1" >/dev/null 2>&1
	for _ in $(seq 1 200); do
		[[ -z $id || -z $(docker ps -aq --filter "label=tessera.session=$id") ]] && break
		sleep 0.05
	done
	# And until the manager has let its resources go (TERMINATED): on a
	# 2-core machine the next round's session (1 CPU) beside the kept
	# one of part 4's second half would otherwise queue for them.
	for _ in $(seq 1 200); do
		"$TESSERA" session info "$1" --json 2>/dev/null | grep -q '"status": *"TERMINATED"' && break
		"$TESSERA" session info "$1" >/dev/null 2>&1 || break
		sleep 0.05
	done
}
TERM_RES=()
DOCK_RES=()
TERM2_RES=()
DOCK2_RES=()
JUP_RES=()
PYD_RES=()
# rounds PREFIX TERMVAR DOCKVAR: SROUNDS rounds, tessera and docker
# alternated (who goes first too); removals outside the timed part.
rounds() {
	local -n tr=$2 dr=$3
	local i
	for ((i = 1; i <= SROUNDS; i++)); do
		if ((i % 2)); then
			tr+=("$("${LOAD[@]}" wait-app "$TESSERA" "$IMAGE" "$1$i" terminal 1 512m)") || return 1
			rm_session "$1$i"
			wait_spares
			dr+=("$(time_docker "$IMAGE" "bench-$RUN-$1$i")") || return 1
		else
			dr+=("$(time_docker "$IMAGE" "bench-$RUN-$1$i")") || return 1
			tr+=("$("${LOAD[@]}" wait-app "$TESSERA" "$IMAGE" "$1$i" terminal 1 512m)") || return 1
			rm_session "$1$i"
			wait_spares
		fi
	done
}
[[ $PARTS == *" 4 "* ]] || SROUNDS=0
if ((SROUNDS)); then
	"${LOAD[@]}" wait-app "$TESSERA" "$IMAGE" tw terminal 1 512m >/dev/null || { echo "apps-proxy: terminal warm-up failed" >&2; exit 1; }
	rm_session tw
	wait_spares
	time_docker "$IMAGE" "bench-$RUN-w" >/dev/null
	# A user's sessions share a Docker network made with their first on
	# the node and kept (docs/architecture.md, "Users' networks"): made
	# by the warm-up here. Measured alone, and while the user has
	# another session running.
	echo "4: $SROUNDS rounds: session create -> terminal prompt through the proxy ($IMAGE) vs docker run -d (alternated, +1 warm-up), the user's only session"
	rounds t TERM_RES DOCK_RES || { echo "apps-proxy: a terminal round failed" >&2; exit 1; }
	echo "4: $SROUNDS rounds: the same while the user has another session (its network exists)"
	"$TESSERA" session create "$IMAGE" --name keep --cpu 0.1 --mem 32m --wait >/dev/null || exit 1
	wait_spares
	rounds u TERM2_RES DOCK2_RES || { echo "apps-proxy: a terminal round failed" >&2; exit 1; }
	rm_session keep
fi
if ((HAVE_PY && SROUNDS)); then
	echo "4: 3 rounds: session create -> Jupyter /api/status 200 through the proxy ($PY_IMAGE); docker run -d of it for reference"
	for i in 1 2 3; do
		JUP_RES+=("$("${LOAD[@]}" wait-app "$TESSERA" "$PY_IMAGE" "j$i" jupyter 1 1g)") || exit 1
		rm_session "j$i"
		wait_spares
		PYD_RES+=("$(time_docker "$PY_IMAGE" "bench-$RUN-p$i")") || exit 1
	done
fi

# ---- the table and the verdicts -----------------------------------------
python3 - "$MATRIX" "$IDLE_OUT" "$(printf '%s\n' "${TERM_RES[@]}")" "${DOCK_RES[*]}" \
	"$(printf '%s\n' "${JUP_RES[@]}")" "${PYD_RES[*]}" \
	"$(printf '%s\n' "${TERM2_RES[@]}")" "${DOCK2_RES[*]}" <<'PY'
import json, statistics, sys
med = statistics.median
matrix = json.loads(sys.argv[1]) if sys.argv[1] else {}
idle = dict(l.split(" ", 1) for l in sys.argv[2].splitlines() if " " in l)
term = [json.loads(l) for l in sys.argv[3].splitlines() if l.strip()]
dock = [float(x) for x in sys.argv[4].split()]
jup = [json.loads(l) for l in sys.argv[5].splitlines() if l.strip()]
pyd = [float(x) for x in sys.argv[6].split()]
term2 = [json.loads(l) for l in sys.argv[7].splitlines() if l.strip()]
dock2 = [float(x) for x in sys.argv[8].split()]
verdicts = []
def verdict(ok, text):
    verdicts.append("verdict: %s %s" % ("MEETS" if ok else "MISSES", text))

if matrix:
    n = len(next(iter(matrix.values()))["lat_us"])
    print()
    print("%-9s %16s %16s %16s   (medians of %d rounds)" % ("path", "GET p50 (us)", "HTTP big (MB/s)", "WS echo (MB/s)", n))
    for k, v in matrix.items():
        print("%-9s %16.1f %16.0f %16.0f" % (k, med(v["lat_us"]), med(v["http_mbs"]), med(v["ws_mbs"])))
    m = {k: {x: med(y) for x, y in v.items()} for k, v in matrix.items()}
    added = m["wsproxy"]["lat_us"] - m["direct"]["lat_us"]
    print("added per request: wsproxy - direct %.1f us (the proxy); runner - direct %.1f us (the runner's hop, "
          "for an app on the container's loopback)" % (added, m["runner"]["lat_us"] - m["direct"]["lat_us"]))
    if "nginx" in m:
        print("added per request: nginx - direct %.1f us" % (m["nginx"]["lat_us"] - m["direct"]["lat_us"]))
        for kind, name in (("http_mbs", "large HTTP response"), ("ws_mbs", "WebSocket echo")):
            r = m["wsproxy"][kind] / m["nginx"][kind]
            # What each proxy adds per MB over the path behind it (the
            # same for both: the app at the container's address): the
            # proxy's own cost.
            own = max(0.0, 1e3 / m["wsproxy"][kind] - 1e3 / m["direct"][kind])
            ngx = max(0.0, 1e3 / m["nginx"][kind] - 1e3 / m["direct"][kind])
            print("%s: wsproxy / nginx %.2f, wsproxy / runner %.2f, nginx / direct %.2f; added per MB: "
                  "wsproxy %.3f ms, nginx %.3f ms"
                  % (name, r, m["wsproxy"][kind] / m["runner"][kind], m["nginx"][kind] / m["direct"][kind], own, ngx))
            verdict(r >= 1.0, "the goal wsproxy >= nginx for the %s, whole chains: %.0f vs %.0f MB/s (ratio %.2f)"
                    % (name, m["wsproxy"][kind], m["nginx"][kind], r))
            verdict(own <= ngx, "the goal wsproxy >= nginx for the %s, each proxy's own cost: %.3f vs %.3f ms per MB"
                    % (name, own, ngx))
    verdict(added <= 300, "the goal <= 0.3 ms added per request: %.3f ms (wsproxy - direct p50)" % (added / 1000))
if idle:
    b = float(idle.get("bytes_per_conn", "nan"))
    print()
    print("idle WebSockets through the proxy: %s of %s asked (open files limit %s); proxy RSS %s -> %s KiB: %.0f bytes each"
          % (idle.get("connections"), idle.get("asked"), idle.get("open_files_limit"), idle.get("rss_before_kib"),
             idle.get("rss_after_kib"), b))
    verdict(b <= 20000, "the goal <= 20 KB per idle connection: %.1f KB at %s connections" % (b / 1000, idle.get("connections")))
def steps(rows):
    for k in ("create_ms", "link_ms", "cookie_ms", "answer_ms"):
        xs = [x[k] for x in rows]
        print("%-44s %10.1f" % ("  of which " + k[:-3], med(xs)))
if term or jup:
    print()
    print("%-44s %10s %10s %10s   (ms)" % ("time a user waits", "median", "min", "max"))
for rows, dk, what in ((term, dock, "the user's only session"), (term2, dock2, "the user has another session")):
    if not rows:
        continue
    t = [x["total_ms"] for x in rows]
    print("%s:" % what)
    print("%-44s %10.1f %10.1f %10.1f" % ("create -> terminal prompt via proxy", med(t), min(t), max(t)))
    steps(rows)
    print("%-44s %10.1f %10.1f %10.1f" % ("docker run -d (same image)", med(dk), min(dk), max(dk)))
    r = med(t) / med(dk)
    verdict(r <= 1.5, "the goal terminal prompt <= 1.5 x docker run -d, %s: %.1f vs %.1f ms (ratio %.2f)"
            % (what, med(t), med(dk), r))
if jup:
    j = [x["total_ms"] for x in jup]
    print("Jupyter (tessera/python:3.11), the user's only session:")
    print("%-44s %10.1f %10.1f %10.1f" % ("create -> Jupyter /api/status 200 via proxy", med(j), min(j), max(j)))
    steps(jup)
    if pyd:
        print("%-44s %10.1f %10.1f %10.1f" % ("docker run -d (tessera/python:3.11)", med(pyd), min(pyd), max(pyd)))
    verdict(med(j) <= 3000, "the goal Jupyter answers <= 3 s after create: %.2f s" % (med(j) / 1000))
print()
print("\n".join(verdicts))
PY
