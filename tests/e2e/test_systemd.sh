#!/usr/bin/env bash
# The systemd side of the daemons (configs/systemd/, src/common/sdnotify.c):
# every unit passes `systemd-analyze verify` with no complaint, is
# Type=notify with Restart=on-failure and logs to the journal, and the
# network daemons' units keep their sandbox (`systemd-analyze security
# --offline`); each daemon, run with NOTIFY_SOCKET as systemd would, sends
# READY=1 only once its ports answer, a STATUS= line, and STOPPING=1 on
# SIGTERM. systemd need not be PID 1: verify and security read unit files.
. "$(dirname "$0")/lib.sh"
e2e_setup
UNITS=$(cd "$(dirname "$0")/../../configs/systemd" && pwd)
here=$(cd "$(dirname "$0")" && pwd)

# The units as installed name /usr/local/bin/tessera; verify wants an
# executable there, so they are checked with ExecStart on the built binary.
mkdir -p "$E2E_DIR/units"
for u in tessera-manager tessera-agent tessera-webserver tessera-wsproxy tessera-server; do
	check "$u.service exists" test -f "$UNITS/$u.service"
	sed "s#/usr/local/bin/tessera #$TESSERA #" "$UNITS/$u.service" >"$E2E_DIR/units/$u.service"
done
# verify exits 0 on a misspelt key or value (it only warns, as systemd
# ignores such lines when it loads a unit): any output at all is a failure.
verify_clean() {  # verify_clean UNIT_FILE
	local out rc
	out=$(cd "$(dirname "$1")" && systemd-analyze verify "./$(basename "$1")" 2>&1); rc=$?
	[[ $rc -eq 0 && -z $out ]] || { echo "rc=$rc: $out"; return 1; }
}
for f in "$E2E_DIR"/units/*.service; do
	u=$(basename "$f")
	check "systemd-analyze verify $u: no complaint" verify_clean "$f"
	check "$u is Type=notify" grep -qx 'Type=notify' "$f"
	check "$u restarts on failure" grep -qx 'Restart=on-failure' "$f"
	check "$u logs to the journal" grep -qx 'StandardError=journal' "$f"
	check "$u runs the tessera binary" grep -q "^ExecStart=$TESSERA " "$f"
done
# The check itself catches a misspelt line.
sed 's/^ProtectSystem=strict/ProtectSytem=strict/' "$E2E_DIR/units/tessera-manager.service" \
	>"$E2E_DIR/units/typo.service.bad"
mkdir -p "$E2E_DIR/typo" && mv "$E2E_DIR/units/typo.service.bad" "$E2E_DIR/typo/tessera-manager.service"
check "a misspelt directive is caught" not verify_clean "$E2E_DIR/typo/tessera-manager.service"

# systemd's own exposure score (0 sandboxed .. 10 exposed) of the daemons
# that need no root: a unit that loses its hardening fails here.
exposure() {  # exposure UNIT_FILE MAX
	local out score
	out=$(cd "$(dirname "$1")" && systemd-analyze security --offline=yes --no-pager "./$(basename "$1")" 2>&1)
	score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")
	[[ -n $score ]] && python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' \
		"$score" "$2" || { echo "score '$score' > $2"; return 1; }
}
check "tessera-manager is sandboxed (exposure <= 3)" exposure "$E2E_DIR/units/tessera-manager.service" 3
check "tessera-webserver is sandboxed (exposure <= 2)" exposure "$E2E_DIR/units/tessera-webserver.service" 2
check "tessera-wsproxy is sandboxed (exposure <= 2)" exposure "$E2E_DIR/units/tessera-wsproxy.service" 2
for u in tessera-manager tessera-webserver tessera-wsproxy; do
	check "$u has ProtectSystem=strict and PrivateTmp" \
		bash -c 'grep -qx ProtectSystem=strict "$1" && grep -qx PrivateTmp=yes "$1" && grep -qx NoNewPrivileges=yes "$1"' \
		_ "$E2E_DIR/units/$u.service"
done

# Readiness. notify_run NAME "HOST:PORT..." COMMAND...: runs the daemon
# with NOTIFY_SOCKET on a listener (sdnotify_listen.py), waits for READY=1,
# stops it with SIGTERM, and leaves what arrived in $E2E_DIR/NAME.notify.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
notify_run() {
	local name=$1 targets=$2; shift 2
	local sock=$E2E_DIR/$name.sock out=$E2E_DIR/$name.notify
	python3 "$here/sdnotify_listen.py" "$sock" "$out" $targets &
	local lpid=$!
	E2E_PIDS+=("$lpid")
	for _ in $(seq 1 100); do [[ -S $sock ]] && break; sleep 0.05; done
	NOTIFY_SOCKET=$sock "$@" >>"$E2E_DIR/$name.log" 2>&1 &
	local dpid=$!
	E2E_PIDS+=("$dpid")
	for _ in $(seq 1 600); do
		grep -q '^PROBED$' "$out" 2>/dev/null && break
		kill -0 "$dpid" 2>/dev/null || break
		sleep 0.05
	done
	kill -TERM "$dpid" 2>/dev/null
	wait "$dpid" 2>/dev/null
	wait "$lpid" 2>/dev/null
	touch "$out"
}
notified() {  # notified NAME: READY=1, every port answering then, STATUS=, STOPPING=1
	local out=$E2E_DIR/$1.notify
	grep -qx 'MSG READY=1' "$out" && grep -q '^MSG STATUS=.' "$out" && grep -qx 'MSG STOPPING=1' "$out" &&
		grep -q '^PROBE ' "$out" && ! grep -q '^PROBE .* refused$' "$out" || { cat "$out"; return 1; }
}
secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')

mport=$(free_port)
printf '%s\n' "listen = 127.0.0.1:$mport" "data_dir = $E2E_DIR/mdata" "cluster_secret = $secret" \
	>"$E2E_DIR/manager.conf"
notify_run manager "127.0.0.1:$mport" "$TESSERA" manager --config "$E2E_DIR/manager.conf"
check "manager: READY=1 once its API answers, STATUS, STOPPING=1" notified manager

aport=$(free_port)
printf '%s\n' "id = $E2E_AGENT_ID" "manager = http://127.0.0.1:$mport" "cluster_secret = $secret" \
	"listen = 127.0.0.1:$aport" "advertise_url = http://127.0.0.1:$aport" "data_dir = $E2E_DIR/adata" \
	"cpu = 1" "mem = 256MiB" >"$E2E_DIR/agent.conf"
# No manager runs now: the agent is ready once it serves RPC, registering later.
notify_run agent "127.0.0.1:$aport" "$TESSERA" agent --config "$E2E_DIR/agent.conf"
check "agent: READY=1 once its RPC server answers, STATUS, STOPPING=1" notified agent

wport=$(free_port)
printf '%s\n' "listen = 127.0.0.1:$wport" "manager = http://127.0.0.1:$mport" "web_secret = $secret" \
	>"$E2E_DIR/webserver.conf"
notify_run webserver "127.0.0.1:$wport" "$TESSERA" webserver --config "$E2E_DIR/webserver.conf"
check "webserver: READY=1 once the web UI answers, STATUS, STOPPING=1" notified webserver

range=$(e2e_free_port_range 3) || exit 1
lo=${range%-*}
printf '%s\n' "manager = http://127.0.0.1:$mport" "cluster_secret = $secret" "port_range = $range" \
	"bind = 127.0.0.1" >"$E2E_DIR/wsproxy.conf"
notify_run wsproxy "127.0.0.1:$lo 127.0.0.1:$((lo + 2))" "$TESSERA" wsproxy --config "$E2E_DIR/wsproxy.conf"
check "wsproxy: READY=1 once its ports answer, STATUS, STOPPING=1" notified wsproxy

sport=$(free_port); swport=$(free_port)
range=$(e2e_free_port_range 2) || exit 1
notify_run server "127.0.0.1:$sport 127.0.0.1:$swport 127.0.0.1:${range%-*}" \
	"$TESSERA" server --data-dir "$E2E_DIR/sdata" --port "$sport" --web-port "$swport" --app-ports "$range" \
	--registry none --node-id "$E2E_AGENT_ID"
check "server: READY=1 once API, web UI and app proxy answer, STATUS, STOPPING=1" notified server

# Without NOTIFY_SOCKET nothing is sent and nothing fails: every other test
# runs the daemons so; here one more, with the variable naming no socket.
NOTIFY_SOCKET=$E2E_DIR/nobody.sock "$TESSERA" manager --config "$E2E_DIR/manager.conf" >>"$E2E_DIR/manager2.log" 2>&1 &
m2=$!
E2E_PIDS+=("$m2")
for _ in $(seq 1 200); do curl -s -o /dev/null "http://127.0.0.1:$mport/" && break; sleep 0.05; done
check "a socket nobody listens on does not stop the manager" kill -0 "$m2"
kill -TERM "$m2"; wait "$m2"
check "and it stops cleanly ($?)" test $? -eq 0
e2e_done
