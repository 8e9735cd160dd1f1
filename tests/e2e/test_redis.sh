#!/usr/bin/env bash
# Redis for what can be rebuilt (docs/admin.md, "Production: Redis"): a
# manager, an agent and two webservers on one Redis (Debian's
# redis-server, started here on a free port, nothing saved). Two
# webservers share a login and a logout; the failed-login limit is shared
# and outlives a manager restart; the agent's heartbeats are in Redis.
# Redis stopped: logins are answered 503 with the store's words, the
# running session keeps running and its node stays ALIVE. Redis started
# again: logins work again without restarting anything. A session's usage
# history is in Redis: it outlives a manager restart, `session stats`
# answers while Redis is stopped (from the samples kept in memory
# meanwhile), and those samples reach Redis once it is back. Heartbeats
# that another manager wrote to Redis keep an agent ALIVE. `tessera
# server --redis URL` keeps its usage history there too, across its
# restart; a bad URL is one line and a non-zero exit.
. "$(dirname "$0")/lib.sh"
REDIS_SERVER=$(command -v redis-server || true)
REDIS_CLI=$(command -v redis-cli || true)
if [[ -z $REDIS_SERVER || -z $REDIS_CLI ]]; then
	echo "redis-server is not installed (scripts/bootstrap installs it)"
	exit 77
fi
e2e_setup
rport=$(free_port); mport=$(free_port); aport=$(free_port); w1port=$(free_port); w2port=$(free_port)
secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
redis_url=redis://127.0.0.1:$rport/3
mkdir -p "$E2E_DIR/redis"

start_redis() {
	"$REDIS_SERVER" --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$E2E_DIR/redis" \
		--daemonize no >>"$E2E_DIR/redis.log" 2>&1 &
	RPID=$!; E2E_PIDS+=("$RPID")
	for _ in $(seq 1 100); do
		"$REDIS_CLI" -p "$rport" ping 2>/dev/null | grep -q PONG && return 0
		sleep 0.1
	done
	return 1
}
stop_redis() { kill "$RPID" 2>/dev/null; wait "$RPID" 2>/dev/null; return 0; }
rcli() { "$REDIS_CLI" -p "$rport" -n 3 "$@"; }

e2e_manager_conf "$E2E_DIR/manager.conf" "$mport" "$secret" "$E2E_DIR/mdata" \
	heartbeat_interval_ms=300 lost_after_heartbeats=3 "redis=$redis_url"
e2e_agent_conf "$E2E_DIR/agent.conf" "$E2E_AGENT_ID" "$mport" "$aport" "$secret" "$E2E_DIR/agent-data" \
	cpu=2 mem=1GiB stats_interval_ms=500
for n in 1 2; do
	port=w${n}port
	cat >"$E2E_DIR/web$n.conf" <<CONF
listen = 127.0.0.1:${!port}
manager = http://127.0.0.1:$mport
cluster_secret = $secret
redis = $redis_url
CONF
done

check "redis-server starts on a free port" start_redis
start_manager() {
	rm -f "$E2E_DIR/mdata/admin.conf"
	"$TESSERA" manager --config "$E2E_DIR/manager.conf" >>"$E2E_DIR/manager.log" 2>&1 &
	MPID=$!; E2E_PIDS+=("$MPID")
	for _ in $(seq 1 100); do [[ -s $E2E_DIR/mdata/admin.conf ]] && return 0; sleep 0.1; done
	return 1
}
check "manager starts with redis = $redis_url" start_manager
export TESSERA_CONFIG=$E2E_DIR/mdata/admin.conf
"$TESSERA" agent --config "$E2E_DIR/agent.conf" >>"$E2E_DIR/agent.log" 2>&1 &
APID=$!; E2E_PIDS+=("$APID")
for n in 1 2; do
	"$TESSERA" webserver --config "$E2E_DIR/web$n.conf" >>"$E2E_DIR/web$n.log" 2>&1 &
	E2E_PIDS+=("$!")
done
W1=http://127.0.0.1:$w1port
W2=http://127.0.0.1:$w2port
wait_http() { for _ in $(seq 1 100); do curl -s -o /dev/null "$1/auth/me" && return 0; sleep 0.1; done; return 1; }
check "both webservers serve" eval 'wait_http "$W1" && wait_http "$W2"'

node_status() {
	"$TESSERA" node ls --json 2>/dev/null | python3 -c '
import json, sys
n = [x for x in json.load(sys.stdin) if x["id"] == sys.argv[1]]
print(n[0]["status"] if n else "")' "$E2E_AGENT_ID"
}
wait_node() { for _ in $(seq 1 100); do [[ "$(node_status)" == "$1" ]] && return 0; sleep 0.1; done; return 1; }
check "the agent registers and is ALIVE" wait_node ALIVE
hb=$(rcli GET "tessera:agent:$E2E_AGENT_ID:heartbeat")
ttl=$(rcli PTTL "tessera:agent:$E2E_AGENT_ID:heartbeat")
check "the agent's heartbeat is in Redis ($hb), expiring with the LOST limit (${ttl} ms left of 900)" \
	eval '[[ $hb =~ ^[0-9]{13}$ && $ttl -gt 0 && $ttl -le 900 ]]'

# The first admin's password, written by the manager into admin.conf.
password=$(sed -n 's/^password *= *//p' "$TESSERA_CONFIG")
login() {  # login BASE JAR [EMAIL] [PASSWORD]: prints "STATUS BODY"
	curl -s -c "$2" -o "$E2E_DIR/login.out" -w '%{http_code}' -H 'Content-Type: application/json' \
		-d "{\"email\":\"${3:-admin@tessera.local}\",\"password\":\"${4:-$password}\"}" "$1/auth/login"
	printf ' %s' "$(cat "$E2E_DIR/login.out")"
}
me() { curl -s -b "$2" -o /dev/null -w '%{http_code}' "$1/auth/me"; }

# ---- one login, two webservers ----
out=$(login "$W1" "$E2E_DIR/jar")
check "login on webserver 1 (${out:0:3})" [ "${out:0:3}" == 200 ]
csrf=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["csrf_token"])' "${out:4}" 2>/dev/null)
check "webserver 2 knows the login made on webserver 1" [ "$(me "$W2" "$E2E_DIR/jar")" == 200 ]
sessions=$(curl -s -b "$E2E_DIR/jar" -o /dev/null -w '%{http_code}' "$W2/api/v1/sessions")
check "webserver 2 relays the API for that login ($sessions)" [ "$sessions" == 200 ]
cookie=$(awk '/tessera_session/ {print $7}' "$E2E_DIR/jar")
lkey=$(rcli --scan --pattern 'tessera:login:*' | head -1)
record=$(rcli GET "$lkey")
check "the login is kept in Redis under the cookie's SHA-256 ($lkey)" \
	[ "$lkey" == "tessera:login:$(printf '%s' "$cookie" | sha256sum | cut -d' ' -f1)" ]
check "... sealed: no keypair, no CSRF token, no email in clear (${record:0:40}...)" \
	eval '[[ $record == v1.* && $record != *secret_key* && $record != *"$csrf"* && $record != *admin@* ]]'
flip=0; [[ ${record:40:1} == 0 ]] && flip=1   # one hex digit of the ciphertext, changed
rcli SET "$lkey" "${record:0:40}$flip${record:41}" KEEPTTL >/dev/null
check "a record changed in Redis is no login" [ "$(me "$W1" "$E2E_DIR/jar")" == 401 ]
rcli SET "$lkey" "$record" KEEPTTL >/dev/null
check "... and the record as sealed is one again" [ "$(me "$W1" "$E2E_DIR/jar")" == 200 ]
lo=$(curl -s -b "$E2E_DIR/jar" -H "X-CSRF-Token: $csrf" -X POST -o /dev/null -w '%{http_code}' "$W2/auth/logout")
check "logout on webserver 2 ($lo)" [ "$lo" == 200 ]
check "... ends the login on webserver 1 too" [ "$(me "$W1" "$E2E_DIR/jar")" == 401 ]

# ---- the failed-login limit, shared and kept across a manager restart ----
codes=""
for i in 1 2 3 4 5; do
	base=$W1; ((i % 2)) || base=$W2
	out=$(login "$base" "$E2E_DIR/jar-bad" admin@tessera.local wrong-password-$i)
	codes+="${out:0:3} "
done
check "five wrong passwords through both webservers are refused ($codes)" [ "$codes" == "401 401 401 401 401 " ]
out=$(login "$W2" "$E2E_DIR/jar-bad")
check "the sixth try is rate limited, even with the right password (${out:0:3})" [ "${out:0:3}" == 429 ]
check "the counts are in Redis" eval '[[ $(rcli --scan --pattern "tessera:ratelimit:*" | wc -l) -ge 2 ]]'
kill "$MPID"; wait "$MPID" 2>/dev/null
check "the manager restarts" start_manager
out=$(login "$W1" "$E2E_DIR/jar-bad")
check "the limit outlives the manager's restart (${out:0:3} ${out:4:60})" [ "${out:0:3}" == 429 ]
rcli --scan --pattern 'tessera:ratelimit:*' | xargs -r "$REDIS_CLI" -p "$rport" -n 3 DEL >/dev/null
out=$(login "$W1" "$E2E_DIR/jar")
check "with the counts gone, the right password logs in (${out:0:3})" [ "${out:0:3}" == 200 ]
check "the agent is ALIVE after the manager's restart" wait_node ALIVE

# ---- Redis down ----
"$TESSERA" session create "$TEST_IMAGE" --name keeps --cpu 0.1 --mem 32m >"$E2E_DIR/create.out" 2>&1
check "a session runs" wait_status keeps RUNNING
stop_redis
out=$(login "$W1" "$E2E_DIR/jar2")
check "Redis stopped: a login is answered 503 (${out:0:3})" [ "${out:0:3}" == 503 ]
check "... with the store's words (${out:4})" contains "$out" "login store (Redis at 127.0.0.1:$rport) unavailable; try again shortly"
check "... an existing login's requests too" [ "$(me "$W2" "$E2E_DIR/jar")" == 503 ]
sleep 3   # ten heartbeat periods: long past the LOST limit
check "the running session keeps running" [ "$(jget keeps status)" == RUNNING ]
check "its node stays ALIVE (heartbeats fall back to the manager's memory)" [ "$(node_status)" == ALIVE ]
check "the manager said so once in its log" eval '[[ $(grep -c "heartbeats, login limits and usage samples are kept in this manager.s memory" "$E2E_DIR/manager.log") -eq 1 ]]'

# ---- Redis back: everything recovers by itself ----
check "redis-server starts again (empty: nothing was saved)" start_redis
relogin() { for _ in $(seq 1 50); do out=$(login "$W2" "$E2E_DIR/jar3"); [[ ${out:0:3} == 200 ]] && return 0; sleep 0.2; done; return 1; }
check "logins work again without restarting anything" relogin
check "... and that login is shared again" [ "$(me "$W1" "$E2E_DIR/jar3")" == 200 ]
hbback() { for _ in $(seq 1 50); do [[ -n $(rcli GET "tessera:agent:$E2E_AGENT_ID:heartbeat") ]] && return 0; sleep 0.1; done; return 1; }
check "heartbeats are written to Redis again" hbback
check "the node is still ALIVE" [ "$(node_status)" == ALIVE ]
check "the session still runs" [ "$(jget keeps status)" == RUNNING ]

# ---- the usage history in Redis ----
# stats NAME PYTHON-EXPR: the expression over `session stats --json` (d).
stats() {
	"$TESSERA" session stats "$1" --json 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
print($2)"
}
# api_status PATH: the status of a signed GET (within 20 s: it must not hang).
api_status() {
	PYTHONPATH=$(dirname "$0") timeout 20 python3 - "$1" <<'PY'
import os, sys
from signed import Api, load_conf
c = load_conf(os.environ["TESSERA_CONFIG"])
st, body = Api(c["endpoint"], c["access_key"], c["secret_key"]).call("GET", sys.argv[1])
print(st)
PY
}
wait_stats() { for _ in $(seq 1 150); do [[ "$(stats "$1" "$2" 2>/dev/null)" == True ]] && return 0; sleep 0.2; done; return 1; }
sid=$(jget keeps id)
ukey=tessera:usage:$sid
check "the session's samples arrive (4 or more in its history)" wait_stats keeps 'len(d["history"]) >= 4'
check "... kept in Redis under $ukey" eval '[[ $(rcli LLEN "$ukey") -ge 4 ]]'
uttl=$(rcli PTTL "$ukey")
check "... expiring with the retention (${uttl} ms left of 3600000)" eval '[[ $uttl -gt 0 && $uttl -le 3600000 ]]'
first=$(stats keeps 'd["history"][0]["t"]')
kill "$MPID"; wait "$MPID" 2>/dev/null
check "the manager restarts" start_manager
after=$(stats keeps 'd["history"][0]["t"] if d["history"] else None')
check "the history outlives the manager's restart (first sample $first, after the restart $after)" \
	[ "$after" == "$first" ]
check "the session's samples come again after the restart" \
	wait_stats keeps 'd["current"] is not None and d["history"][-1]["t"] > '"$first"
before=$(stats keeps 'd["history"][-1]["t"]')
stop_redis
code=$(api_status "/v1/sessions/keeps/stats")
check "Redis stopped: GET /v1/sessions/keeps/stats answers ($code)" [ "$code" == 200 ]
# Redis holds the history: while it is stopped the answer has the samples
# taken since (what this manager has), not the hour before.
check "... with the samples kept in memory meanwhile" wait_stats keeps 'len(d["history"]) >= 2 and d["history"][-1]["t"] > '"$before"
down_t=$(stats keeps 'd["history"][-1]["t"]')
check "the manager said so once for this outage" eval '[[ $(grep -c "usage samples are kept in this manager.s memory" "$E2E_DIR/manager.log") -eq 2 ]]'
check "redis-server starts again (empty)" start_redis
flushed() { for _ in $(seq 1 100); do [[ $(rcli LRANGE "$ukey" 0 -1 | grep -c "^$down_t ") -eq 1 ]] && return 0; sleep 0.1; done; return 1; }
check "the samples kept meanwhile are written to Redis once it is back" flushed
check "... and the history reads them from there, in order" \
	wait_stats keeps 'all(a["t"] < b["t"] for a, b in zip(d["history"], d["history"][1:])) and '"$down_t"' in [x["t"] for x in d["history"]]'

# ---- a heartbeat another manager heard counts ----
# The agent stops; heartbeats for it appear in Redis as another manager
# on this Redis would write them: the node stays ALIVE while they come,
# and is LOST once they stop.
kill -9 "$APID"; wait "$APID" 2>/dev/null
other_manager() {
	while :; do
		rcli SET "tessera:agent:$E2E_AGENT_ID:heartbeat" "$(date +%s%3N)" PX 900 >/dev/null
		sleep 0.2
	done
}
other_manager &
OPID=$!; E2E_PIDS+=("$OPID")
sleep 3   # ten heartbeat periods without one from the agent itself
check "the node stays ALIVE on heartbeats another manager wrote to Redis" [ "$(node_status)" == ALIVE ]
kill "$OPID"; wait "$OPID" 2>/dev/null
check "... and is LOST once they stop" wait_node LOST
"$TESSERA" session rm keeps >/dev/null 2>&1

# ---- tessera server --redis ----
out=$("$TESSERA" server --data-dir "$E2E_DIR/bad" --redis http://127.0.0.1:1 2>&1); rc=$?
check "tessera server --redis with a bad URL: one line, non-zero exit ($rc: $out)" \
	eval '[[ $rc -ne 0 && $(wc -l <<<"$out") -eq 1 && $out == *"--redis"*"redis://"* ]]'
kill "$MPID"; wait "$MPID" 2>/dev/null
srv_url=redis://127.0.0.1:$rport/4
check "tessera server --redis $srv_url starts" start_server --redis "$srv_url" --stats-interval-ms 500
"$TESSERA" session create "$TEST_IMAGE" --name srv --cpu 0.1 --mem 32m >"$E2E_DIR/create.out" 2>&1
check "a session runs on it" wait_status srv RUNNING
check "its samples arrive" wait_stats srv 'len(d["history"]) >= 3'
skey=tessera:usage:$(jget srv id)
check "... kept in Redis ($skey in database 4)" eval '[[ $("$REDIS_CLI" -p "$rport" -n 4 LLEN "$skey") -ge 3 ]]'
check "the server says where the usage history is kept" \
	grep -q "Redis at 127.0.0.1:$rport: heartbeats, login limits and usage history are kept there" "$E2E_DIR/server.log"
first=$(stats srv 'd["history"][0]["t"]')
stop_server
check "the server restarts with --redis" start_server --redis "$srv_url" --stats-interval-ms 500
after=$(stats srv 'd["history"][0]["t"] if d["history"] else None')
check "the history outlives the server's restart ($first, $after)" [ "$after" == "$first" ]
"$TESSERA" session rm srv >/dev/null 2>&1
stop_server
e2e_done
