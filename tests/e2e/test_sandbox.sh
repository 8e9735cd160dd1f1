#!/usr/bin/env bash
# Sandboxes (docs/architecture.md, "Sandboxes"; issue 30, item 1): after a
# user's first start the agent keeps a spare container on the user's
# network, and the user's next session joins its network namespace, so
# its start sets up no network. What it must keep: the session's own host
# name (for its own commands from the first, and in its /etc/hostname and
# /etc/hosts), its apps through the proxy, the isolation between users,
# the sandbox's removal with the session (by the agent, or when the
# container is removed by hand), a start that still works when the spare
# was removed under the agent, the spares' removal when the server stops
# and what a restart finds, a published app port (the sandbox's), and
# `--sandboxes no`.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server || { e2e_done; exit 1; }
T() { "$TESSERA" "$@"; }
LOG=$E2E_DIR/server.log

# The agent's spares: running, on no session's container yet, on network
# $NET when it is set (the first user's).
NET=""
spares() {
	local id used
	used=$(docker ps -aq --no-trunc --filter "label=tessera.agent=$E2E_AGENT_ID" --filter label=tessera.sandbox |
		xargs -r docker inspect -f '{{index .Config.Labels "tessera.sandbox"}}' 2>/dev/null)
	for id in $(docker ps -q --no-trunc --filter "label=tessera.agent=$E2E_AGENT_ID" \
		--filter label=tessera.role=sandbox --filter status=running); do
		grep -qx "$id" <<<"$used" && continue
		[[ -n $NET && $(docker inspect -f '{{.HostConfig.NetworkMode}}' "$id" 2>/dev/null) != "$NET" ]] && continue
		echo "$id"
	done
}
wait_spare() {  # wait_spare [NOT_ID]: one spare (other than NOT_ID) runs
	for _ in $(seq 1 300); do
		[[ -n $(spares | grep -vx "${1:-none}") ]] && return 0
		sleep 0.1
	done
	return 1
}
cid_of() { jget "$1" container_id; }
mode_of() { docker inspect -f '{{.HostConfig.NetworkMode}}' "$(cid_of "$1")" 2>/dev/null; }

# Each session writes the host name it saw first, then serves a file.
serve() {  # serve NAME TEXT
	T session create "$TEST_IMAGE" --name "$1" --cpu 0.1 --mem 32m \
		--startup-command "uname -n > first.host; mkdir -p www; echo $2 > www/f; httpd -f -p 8080 -h www" \
		--wait --timeout 120 >/dev/null 2>&1
}

serve s1 from-s1
check "the user's first session runs" wait_status s1 RUNNING
check "it is on the user's network, not in a sandbox ($(mode_of s1))" eval '[[ $(mode_of s1) == tessera-u-* ]]'
NET=$(mode_of s1)
check "a spare sandbox is made after it" wait_spare
SPARE=$(spares | head -1)
check "the spare is on the same network" \
	[ "$(docker inspect -f '{{.HostConfig.NetworkMode}}' "$SPARE" 2>/dev/null)" == "$(mode_of s1)" ]
check "the sandbox image is not in the catalog" not contains "$(T image ls 2>&1)" tessera-sandbox

serve s2 from-s2
check "the user's next session runs" wait_status s2 RUNNING
S2=$(cid_of s2)
check "it joined the spare ($(mode_of s2))" [ "$(mode_of s2)" == "container:$SPARE" ]
check "its labels name the sandbox" \
	[ "$(docker inspect -f '{{index .Config.Labels "tessera.sandbox"}}' "$S2")" == "$SPARE" ]
check "the agent says the start joined a sandbox" \
	grep -q "session $(jget s2 id) started in [0-9]* ms: .*network 0 ms (sandbox)" "$LOG"
out=$(T session exec s2 -- cat /proc/sys/kernel/hostname 2>&1)
check "its host name is its own ($out)" [ "$out" == s2 ]
check "its startup command saw it from the first" [ "$(T session exec s2 -- cat first.host)" == s2 ]
check "/etc/hostname says it" [ "$(T session exec s2 -- cat /etc/hostname)" == s2 ]
SBX_IP=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$SPARE")
check "/etc/hosts names it at the sandbox's address ($SBX_IP)" \
	contains "$(T session exec s2 -- cat /etc/hosts)" "$SBX_IP	s2"
check "its address is the sandbox's" contains "$(T session exec s2 -- ip addr 2>/dev/null)" "inet $SBX_IP/"
out=$(printf 'uname -n\necho "shell-$((6 * 7))"\nexit\n' | T session shell s2 2>&1)
check "its terminal answers through the proxy, with its name ($(head -c 300 <<<"$out"))" \
	eval '[[ $out == *shell-42* && $out == *s2* ]]'
check "a new spare is made after it" wait_spare "$SPARE"
EP=$(sed -n 's/^endpoint *= *//p' "$TESSERA_CONFIG")
metrics=$(curl -s "$EP/metrics")
check "/metrics counts the start that joined a sandbox" \
	grep -qx "tessera_agent_sandbox_starts_total{node=\"$E2E_AGENT_ID\"} 1" <<<"$metrics"
check "/metrics counts the spare ready" grep -qx "tessera_agent_sandbox_spares{node=\"$E2E_AGENT_ID\"} 1" <<<"$metrics"

# Another user's session cannot reach it; the user's own can.
reply=$(T user create bob@example.org --json 2>/dev/null)
python3 -c '
import json, sys
r = json.loads(sys.argv[1])
print("endpoint = " + sys.argv[2])
print("access_key = " + r["user"]["access_key"])
print("secret_key = " + r["secret_key"])' "$reply" "$(sed -n 's/^endpoint *= *//p' "$TESSERA_CONFIG")" \
	>"$E2E_DIR/bob.conf" 2>/dev/null
TESSERA_CONFIG=$E2E_DIR/bob.conf T session create "$TEST_IMAGE" --name b1 --cpu 0.1 --mem 32m \
	--wait --timeout 120 >/dev/null 2>&1
check "bob's session runs" [ "$(TESSERA_CONFIG=$E2E_DIR/bob.conf jget b1 status)" == RUNNING ]
fetch() {  # fetch CONFIG FROM: what FROM gets of s2's file
	TESSERA_CONFIG=$1 T session exec "$2" --timeout 20 -- \
		sh -c "printf 'GET /f HTTP/1.0\r\n\r\n' | nc -w 3 $SBX_IP 8080" 2>/dev/null
}
kept_apart() {
	contains "$(fetch "$TESSERA_CONFIG" s1)" from-s2 && not contains "$(fetch "$E2E_DIR/bob.conf" b1)" from-s2
}
check "s1 reaches s2 in its sandbox, bob's b1 does not" kept_apart

# The session's removal removes its sandbox.
T session rm s2 >/dev/null 2>&1
check "s2 ends" wait_status s2 TERMINATED
gone() {
	for _ in $(seq 1 100); do
		[[ -z $(docker ps -aq --filter "id=$1") ]] && return 0
		sleep 0.1
	done
	return 1
}
check "its sandbox is removed with it" gone "$SPARE"

# A session container removed by hand: its sandbox goes too.
SPARE=$(spares | head -1)
serve s3 from-s3
check "s3 runs in the next spare" eval '[[ $(wait_status s3 RUNNING; mode_of s3) == "container:$SPARE" ]]'
docker rm -f "$(cid_of s3)" >/dev/null
check "its sandbox goes when its container is removed by hand" gone "$SPARE"

# The spare removed under the agent: the next start still runs, on the
# user's network, with its name.
check "a spare is there again" wait_spare
for id in $(spares); do docker rm -f "$id" >/dev/null; done
serve s4 from-s4
check "a start after the spare was removed by hand runs" wait_status s4 RUNNING
check "on the user's network ($(mode_of s4))" eval '[[ $(mode_of s4) == tessera-u-* || $(mode_of s4) == container:* ]]'
out=$(T session exec s4 -- cat /proc/sys/kernel/hostname 2>&1)
check "with its name ($out)" [ "$out" == s4 ]

# The server's end removes the spares; sandboxes of running sessions stay.
check "a spare is made again" wait_spare
SPARE=$(spares | head -1)
serve s5 from-s5
check "s5 runs in it" eval '[[ $(wait_status s5 RUNNING; mode_of s5) == "container:$SPARE" ]]'
check "and a new spare comes" wait_spare "$SPARE"
stop_server
NET=""
check "no spare is left when the server stops" [ -z "$(spares)" ]
check "s5's sandbox stays for it" [ -n "$(docker ps -q --filter "id=$SPARE" --filter status=running)" ]
start_server || { e2e_done; exit 1; }
check "after a restart s5 still runs" wait_status s5 RUNNING
check "in its sandbox, with its name" [ "$(T session exec s5 -- cat /proc/sys/kernel/hostname)" == s5 ]
check "a left spare would be swept, s5's sandbox is not" [ -n "$(docker ps -q --filter "id=$SPARE")" ]

# --app-publish yes (a proxy on another host): the app port is the
# sandbox's, published, and the session's endpoint names it; after a
# restart the agent's list gives it back.
stop_server
start_server --app-publish yes || { e2e_done; exit 1; }
T session rm s5 >/dev/null 2>&1
serve s7 from-s7
check "with --app-publish yes a session runs" wait_status s7 RUNNING
NET=$(e2e_net_of_container "$(cid_of s7)")
check "a spare is made, its app port published" wait_spare
SPARE=$(spares | head -1)
PUB=$(docker port "$SPARE" 7611/tcp 2>/dev/null | head -1)
check "the spare's app port is published ($PUB)" eval '[[ $PUB == 127.0.0.1:* ]]'
serve s8 from-s8
check "the next session runs in it" eval '[[ $(wait_status s8 RUNNING; mode_of s8) == "container:$SPARE" ]]'
endpoint() { python3 -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT app_endpoint FROM sessions WHERE name = ?", (sys.argv[2],)).fetchone()[0])' \
	"$E2E_DIR/data/tessera.db" "$1" 2>/dev/null; }
check "its app endpoint is the sandbox's published port ($(endpoint s8))" eval '[[ $(endpoint s8) == "$PUB,"* ]]'
out=$(printf 'echo "shell-$((6 * 7))"\nexit\n' | T session shell s8 2>&1)
check "its terminal answers through the proxy" contains "$out" shell-42
stop_server
start_server --app-publish yes || { e2e_done; exit 1; }
python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("UPDATE sessions SET app_endpoint = \x27\x27"); c.commit()' \
	"$E2E_DIR/data/tessera.db"
stop_server
start_server --app-publish yes || { e2e_done; exit 1; }
given_back() {
	for _ in $(seq 1 100); do
		[[ $(endpoint s8) == "$PUB,"* ]] && return 0
		sleep 0.1
	done
	return 1
}
check "after a restart the agent's list gives the endpoint back" given_back
T session rm s7 s8 >/dev/null 2>&1

# --sandboxes no: every start sets up its own network, and no spare.
stop_server
start_server --sandboxes no || { e2e_done; exit 1; }
serve s6 from-s6
check "with --sandboxes no a session runs" wait_status s6 RUNNING
check "on the user's network ($(mode_of s6))" eval '[[ $(mode_of s6) == tessera-u-* ]]'
sleep 2
check "and no spare is made" [ -z "$(spares)" ]

e2e_done
