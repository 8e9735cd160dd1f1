#!/usr/bin/env bash
# One daemon per port and one server per data dir: a second `tessera
# server`, `tessera manager` or `tessera agent` whose API, web or RPC port
# is taken, or whose data dir is in use, exits non-zero with a line that
# says so, and the first one keeps serving alone. A crashed server's data
# dir is free again.
. "$(dirname "$0")/lib.sh"
e2e_setup
conf_value() { sed -n "s/^$2 = //p" "$1"; }

start_server || { e2e_done; exit 1; }
first_pid=$SERVER_PID
data=$E2E_DIR/data
api_port=$(conf_value "$data/admin.conf" endpoint | sed 's/.*://')
web_port=$(conf_value "$data/admin.conf" web_url | sed 's|.*:\([0-9]*\)/.*|\1|')
check "the first server serves the API and the web UI ($api_port, $web_port)" [ -n "$api_port" ] && [ -n "$web_port" ]

# second SERVER_ARGS...: runs a second `tessera server` to its end (or 30 s)
# and sets out and rc.
second() {
	out=$(timeout 30 "$TESSERA" server --node-id "$E2E_AGENT_ID-2" "$@" 2>&1)
	rc=$?
}
refused() {  # refused TEXT: exited by itself, non-zero, saying TEXT, never ready
	[ $rc -ne 0 ] && [ $rc -ne 124 ] && contains "$out" "$1" && not contains "$out" "Tessera is ready"
}

# The same data dir: refused before it touches the database, naming the
# process that holds it, in one line.
second --data-dir "$data" --port 0 --web-port 0
check "a second server on the data dir is refused ($rc: $out)" refused "data dir $data is in use by process $first_pid"
check "... in one line" [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ]

# The first server must outlive that refusal. Once, under a loaded run of
# the whole suite, it was gone by here and every later check failed with
# no word of why: say how it ended and what it logged last.
first_state() {
	if kill -0 "$first_pid" 2>/dev/null; then echo "running"; return; fi
	echo "gone; its log ends: $(tail -5 "$E2E_DIR/server.log" | tr '\n' '|')"
}
check "the first server outlives that ($(first_state))" kill -0 "$first_pid"

# The API port of the first one.
second --data-dir "$E2E_DIR/data2" --port "$api_port" --web-port 0
check "a second server on the API port is refused ($rc: $out)" refused "port $api_port on 127.0.0.1 is in use by another process"

# The web port of the first one: before, both listened on it and the
# kernel split the browsers' connections between them.
second --data-dir "$E2E_DIR/data3" --port 0 --web-port "$web_port"
check "a second server on the web port is refused ($rc: $out)" refused "port $web_port on 127.0.0.1 is in use by another process"

# Its app proxy's ports: the second manager would hand out links to them.
second --data-dir "$E2E_DIR/data4" --port 0 --web-port 0 --app-ports "$E2E_APP_PORTS"
check "a second server on the app ports is refused ($rc: $out)" refused "port ${E2E_APP_PORTS%-*} on 127.0.0.2 is in use by another process"

check "the first server still runs ($(first_state))" kill -0 "$first_pid"
check "its API still answers" "$TESSERA" session ls
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$web_port/")
check "its web UI still answers ($code)" [ "$code" == "200" ]

# A crash leaves the lock file, but not the lock: the kernel drops it.
stop_server KILL
start_server || { e2e_done; exit 1; }
check "a server starts on the data dir of a crashed one" kill -0 "$SERVER_PID"
check "the lock file names it" [ "$(cat "$data/tessera.lock")" == "$SERVER_PID" ]
stop_server TERM

# The cluster daemons: a manager's data dir and API port, an agent's RPC port.
mport=$(free_port); aport=$(free_port)
secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
e2e_manager_conf "$E2E_DIR/manager.conf" "$mport" "$secret" "$E2E_DIR/mdata"
"$TESSERA" manager --config "$E2E_DIR/manager.conf" >>"$E2E_DIR/manager.log" 2>&1 &
MPID=$!; E2E_PIDS+=("$MPID")
for _ in $(seq 1 100); do [[ -s $E2E_DIR/mdata/admin.conf ]] && break; sleep 0.1; done
check "the manager is up" [ -s "$E2E_DIR/mdata/admin.conf" ]

e2e_manager_conf "$E2E_DIR/manager-same-dir.conf" "$(free_port)" "$secret" "$E2E_DIR/mdata"
out=$(timeout 30 "$TESSERA" manager --config "$E2E_DIR/manager-same-dir.conf" 2>&1); rc=$?
check "a second manager on the data dir is refused ($rc: $out)" refused "data dir $E2E_DIR/mdata is in use by process $MPID"
e2e_manager_conf "$E2E_DIR/manager-same-port.conf" "$mport" "$secret" "$E2E_DIR/mdata2"
out=$(timeout 30 "$TESSERA" manager --config "$E2E_DIR/manager-same-port.conf" 2>&1); rc=$?
check "a second manager on the API port is refused ($rc: $out)" refused "port $mport on 127.0.0.1 is in use by another process"

agent_conf() {  # agent_conf FILE ID [PORT]
	e2e_agent_conf "$1" "$2" "$mport" "${3:-$aport}" "$secret" "$E2E_DIR/agent-$2" cpu=1 mem=256MiB
}
agent_conf "$E2E_DIR/agent.conf" "$E2E_AGENT_ID"
"$TESSERA" agent --config "$E2E_DIR/agent.conf" >>"$E2E_DIR/agent.log" 2>&1 &
APID=$!; E2E_PIDS+=("$APID")
export TESSERA_CONFIG=$E2E_DIR/mdata/admin.conf
node_alive() {
	"$TESSERA" node ls --json 2>/dev/null | python3 -c '
import json, sys
sys.exit(0 if any(n["id"] == sys.argv[1] and n["status"] == "ALIVE" for n in json.load(sys.stdin)) else 1)' "$E2E_AGENT_ID"
}
for _ in $(seq 1 100); do node_alive && break; sleep 0.1; done
check "the agent registers" node_alive
agent_conf "$E2E_DIR/agent2.conf" "$E2E_AGENT_ID-2"
out=$(timeout 30 "$TESSERA" agent --config "$E2E_DIR/agent2.conf" 2>&1); rc=$?
check "a second agent on the RPC port is refused ($rc: $out)" refused "port $aport on 127.0.0.1 is in use by another process"
# One data dir, one agent: its sessions' fGPU files and turn files are there.
agent_conf "$E2E_DIR/agent3.conf" "$E2E_AGENT_ID" "$(free_port)"
out=$(timeout 30 "$TESSERA" agent --config "$E2E_DIR/agent3.conf" 2>&1); rc=$?
check "a second agent on the first one's data dir is refused ($rc: $out)" refused "data dir $E2E_DIR/agent-$E2E_AGENT_ID is in use by process $APID"
check "the first agent still runs" kill -0 "$APID"
check "the first manager still runs" kill -0 "$MPID"
e2e_done
