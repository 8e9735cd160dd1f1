#!/usr/bin/env bash
# Two managers on one PostgreSQL database (docs/architecture.md, "The
# store"): the second waits as a standby, saying so (in its log, and to
# systemd: READY=1 with a standby STATUS=, heard on a NOTIFY_SOCKET
# listener, so a Type=notify unit is not killed for not starting), and
# does not serve;
# when the active one is killed with SIGKILL it takes over on the same
# address, the agent registers with it, and every session is there once:
# no placement made twice, no container started twice.
TESSERA_TEST_STORE=postgresql
. "$(dirname "$0")/lib.sh"
e2e_setup
mport=$(free_port); aport=$(free_port)
secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
PSQL=${PGBIN:-/usr/lib/postgresql/15/bin}/psql
"$PSQL" -qAtX -d "$TESSERA_TEST_PG/postgres" -c "CREATE DATABASE standby_$$" >/dev/null
DB=$TESSERA_TEST_PG/standby_$$
for m in a b; do
	e2e_manager_conf "$E2E_DIR/manager-$m.conf" "$mport" "$secret" "$E2E_DIR/mdata-$m" \
		heartbeat_interval_ms=300 lost_after_heartbeats=3 "store=$DB"
done
e2e_agent_conf "$E2E_DIR/agent.conf" "$E2E_AGENT_ID" "$mport" "$aport" "$secret" "$E2E_DIR/agent-data" \
	cpu=2 mem=1GiB

check "--migrate-only migrates the empty database and exits 0" \
	"$TESSERA" manager --config "$E2E_DIR/manager-a.conf" --migrate-only
check "the schema is recorded" [ "$("$PSQL" -qAtX -d "$DB" -c 'SELECT MAX(version) FROM schema_version')" -ge 2 ]

"$TESSERA" manager --config "$E2E_DIR/manager-a.conf" >>"$E2E_DIR/manager-a.log" 2>&1 &
APID=$!; E2E_PIDS+=("$APID")
for _ in $(seq 1 100); do [[ -s $E2E_DIR/mdata-a/admin.conf ]] && break; sleep 0.1; done
check "manager a is active" [ -s "$E2E_DIR/mdata-a/admin.conf" ]
python3 "$(dirname "$0")/sdnotify_listen.py" "$E2E_DIR/notify-b.sock" "$E2E_DIR/notify-b.out" &
E2E_PIDS+=("$!")
for _ in $(seq 1 100); do [[ -S $E2E_DIR/notify-b.sock ]] && break; sleep 0.05; done
NOTIFY_SOCKET=$E2E_DIR/notify-b.sock "$TESSERA" manager --config "$E2E_DIR/manager-b.conf" >>"$E2E_DIR/manager-b.log" 2>&1 &
BPID=$!; E2E_PIDS+=("$BPID")
for _ in $(seq 1 100); do grep -q "waits as a standby" "$E2E_DIR/manager-b.log" && break; sleep 0.1; done
check "manager b says it waits as a standby" grep -q "another manager is active on PostgreSQL at .*: this one waits as a standby" \
	"$E2E_DIR/manager-b.log"
check "the standby does not serve" [ ! -e "$E2E_DIR/mdata-b/admin.conf" ]
for _ in $(seq 1 100); do grep -q "MSG READY=1" "$E2E_DIR/notify-b.out" 2>/dev/null && break; sleep 0.1; done
check "the standby tells systemd READY=1" grep -q "^MSG READY=1" "$E2E_DIR/notify-b.out"
check "with STATUS=standby: waiting for the active manager on the database" \
	grep -q "^MSG STATUS=standby: waiting for the active manager on PostgreSQL at 127.0.0.1:[0-9]*/standby_" "$E2E_DIR/notify-b.out"
"$TESSERA" agent --config "$E2E_DIR/agent.conf" >>"$E2E_DIR/agent.log" 2>&1 &
E2E_PIDS+=($!)
export TESSERA_CONFIG=$E2E_DIR/mdata-a/admin.conf
for _ in $(seq 1 100); do "$TESSERA" node ls 2>/dev/null | grep -q ALIVE && break; sleep 0.1; done

# Two fit (2 CPUs), the third waits.
"$TESSERA" session create "$TEST_IMAGE" --name s --count 3 --cpu 1 --mem 32m --startup-command 'sleep 100000' >/dev/null
check "s-1 RUNNING" wait_status s-1 RUNNING
check "s-2 RUNNING" wait_status s-2 RUNNING
check "s-3 PENDING" wait_status s-3 PENDING
c1=$(jget s-1 container_id); c2=$(jget s-2 container_id)

kill -9 "$APID"
wait "$APID" 2>/dev/null
for _ in $(seq 1 300); do [[ -s $E2E_DIR/mdata-b/admin.conf ]] && break; sleep 0.1; done
check "manager b takes over when a is killed" grep -q "the active manager is gone; this one is active now" \
	"$E2E_DIR/manager-b.log"
check "and serves on the same address" [ -s "$E2E_DIR/mdata-b/admin.conf" ]
for _ in $(seq 1 100); do grep -q "MSG STATUS=serving the API" "$E2E_DIR/notify-b.out" && break; sleep 0.1; done
check "its STATUS= says it serves now" grep -q "^MSG STATUS=serving the API on 127.0.0.1:$mport" "$E2E_DIR/notify-b.out"
check "it loaded the three sessions" grep -q "state loaded from PostgreSQL at .*: 3 sessions" "$E2E_DIR/manager-b.log"
for _ in $(seq 1 100); do "$TESSERA" node ls 2>/dev/null | grep -q ALIVE && break; sleep 0.1; done
check "the agent registers with it" bash -c "'$TESSERA' node ls | grep -q ALIVE"
check "s-1 still RUNNING, same container" [ "$(jget s-1 status)/$(jget s-1 container_id)" == "RUNNING/$c1" ]
check "s-2 still RUNNING, same container" [ "$(jget s-2 status)/$(jget s-2 container_id)" == "RUNNING/$c2" ]
check "s-3 still PENDING" [ "$(jget s-3 status)" == PENDING ]
running=$(docker ps -q --filter "label=tessera.agent=$E2E_AGENT_ID" --filter label=tessera.session | wc -l)
check "two containers, none started twice ($running)" [ "$running" -eq 2 ]

"$TESSERA" session rm s-1 >/dev/null
check "s-3 starts once s-1 is removed" wait_status s-3 RUNNING
for _ in $(seq 1 100); do
	[[ $(docker ps -q --filter "label=tessera.agent=$E2E_AGENT_ID" --filter label=tessera.session | wc -l) -eq 2 ]] && break
	sleep 0.1
done
running=$(docker ps -q --filter "label=tessera.agent=$E2E_AGENT_ID" --filter label=tessera.session | wc -l)
check "still two containers ($running)" [ "$running" -eq 2 ]
n=$("$PSQL" -qAtX -d "$DB" -c "SELECT COUNT(*) FROM sessions")
check "three sessions in the database ($n)" [ "$n" -eq 3 ]
placed=$("$PSQL" -qAtX -d "$DB" -c "SELECT COUNT(*) FROM session_history WHERE status='SCHEDULED'")
check "three placements recorded, one each ($placed)" [ "$placed" -eq 3 ]
dup=$("$PSQL" -qAtX -d "$DB" -c "SELECT COUNT(*) FROM (SELECT session_id FROM session_history WHERE status='SCHEDULED' GROUP BY session_id HAVING COUNT(*) > 1) d")
check "no session placed twice" [ "$dup" -eq 0 ]

# Fencing: the active manager (b) is frozen while the database restarts,
# and another (a again, on another port) takes the lock meanwhile. When b
# runs again it finds its connection gone, reconnects, cannot take the
# lock back, and stops (exit 1) instead of writing stale state.
mport2=$(free_port)
sed "s/^listen = .*/listen = 127.0.0.1:$mport2/" "$E2E_DIR/manager-a.conf" >"$E2E_DIR/manager-a2.conf"
: >"$E2E_DIR/manager-a2.log"
"$TESSERA" manager --config "$E2E_DIR/manager-a2.conf" >>"$E2E_DIR/manager-a2.log" 2>&1 &
A2PID=$!; E2E_PIDS+=("$A2PID")
for _ in $(seq 1 100); do grep -q "waits as a standby" "$E2E_DIR/manager-a2.log" && break; sleep 0.1; done
check "a waits as a standby behind b" grep -q "waits as a standby" "$E2E_DIR/manager-a2.log"
kill -STOP "$BPID"
"$E2E_PGCLUSTER" restart "$TESSERA_TEST_PG_DIR"
for _ in $(seq 1 300); do grep -q "this one is active now" "$E2E_DIR/manager-a2.log" && break; sleep 0.1; done
check "a takes the lock while b is frozen" grep -q "this one is active now" "$E2E_DIR/manager-a2.log"
kill -CONT "$BPID"
rc=
for _ in $(seq 1 300); do
	if ! kill -0 "$BPID" 2>/dev/null; then wait "$BPID"; rc=$?; break; fi
	sleep 0.1
done
check "b stops with exit 1 ($rc)" [ "$rc" == 1 ]
check "saying another manager became the active one" \
	grep -q "another manager became the active one" "$E2E_DIR/manager-b.log"
export TESSERA_CONFIG=$E2E_DIR/mdata-a/admin.conf
sed -i "s|^endpoint = .*|endpoint = http://127.0.0.1:$mport2|" "$TESSERA_CONFIG"
check "a serves the three sessions" [ "$("$TESSERA" session ls --all --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" == 3 ]

# A manager whose binary is older than the schema refuses to start.
"$PSQL" -qAtX -d "$DB" -c "INSERT INTO schema_version VALUES(999,'from the future',0)" >/dev/null
out=$(timeout 30 "$TESSERA" manager --config "$E2E_DIR/manager-a.conf" --migrate-only 2>&1); rc=$?
check "a newer schema is refused ($rc: $out)" [ $rc -ne 0 ]
check "saying so" contains "$out" "newer than this tessera knows"
e2e_done
