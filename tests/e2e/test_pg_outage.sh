#!/usr/bin/env bash
# PostgreSQL stopped and started again under a running manager: the
# manager logs that it is unreachable and that it reconnected; meanwhile
# reads are answered, changes get 503 with a message that says the
# database is unavailable, and what happened meanwhile (a session's
# container died: acknowledged to its agent) is in the database once it is
# back; after a restart of the manager nothing is missing.
TESSERA_TEST_STORE=postgresql
. "$(dirname "$0")/lib.sh"
e2e_setup
mport=$(free_port); aport=$(free_port)
secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
PSQL=${PGBIN:-/usr/lib/postgresql/15/bin}/psql
e2e_manager_conf "$E2E_DIR/manager.conf" "$mport" "$secret" "$E2E_DIR/mdata" \
	heartbeat_interval_ms=300 lost_after_heartbeats=10
e2e_agent_conf "$E2E_DIR/agent.conf" "$E2E_AGENT_ID" "$mport" "$aport" "$secret" "$E2E_DIR/agent-data" \
	cpu=2 mem=1GiB
start_manager() {
	rm -f "$E2E_DIR/mdata/admin.conf"
	"$TESSERA" manager --config "$E2E_DIR/manager.conf" >>"$E2E_DIR/manager.log" 2>&1 &
	MPID=$!; E2E_PIDS+=("$MPID")
	for _ in $(seq 1 100); do [[ -s $E2E_DIR/mdata/admin.conf ]] && break; sleep 0.1; done
}
start_manager
# The wrapper (lib.sh) added the store line: the database is this one.
DB=$(sed -n 's/^store = //p' "$E2E_DIR/manager.conf")
check "the manager runs on PostgreSQL" grep -q "state loaded from PostgreSQL at 127.0.0.1" "$E2E_DIR/manager.log"
"$TESSERA" agent --config "$E2E_DIR/agent.conf" >>"$E2E_DIR/agent.log" 2>&1 &
E2E_PIDS+=($!)
export TESSERA_CONFIG=$E2E_DIR/mdata/admin.conf
for _ in $(seq 1 100); do "$TESSERA" node ls 2>/dev/null | grep -q ALIVE && break; sleep 0.1; done

"$TESSERA" session create "$TEST_IMAGE" --name dies --cpu 1 --mem 32m --startup-command 'sleep 100000' >/dev/null
"$TESSERA" session create "$TEST_IMAGE" --name stays --cpu 1 --mem 32m --startup-command 'sleep 100000' >/dev/null
check "dies RUNNING" wait_status dies RUNNING
check "stays RUNNING" wait_status stays RUNNING

"$E2E_PGCLUSTER" stop "$TESSERA_TEST_PG_DIR"
for _ in $(seq 1 100); do grep -q "unreachable: .*; retrying" "$E2E_DIR/manager.log" && break; sleep 0.1; done
check "the manager logs that PostgreSQL is unreachable" \
	grep -q "store: PostgreSQL at 127.0.0.1:[0-9]*/[a-z0-9_]* unreachable: .*; retrying" "$E2E_DIR/manager.log"
out=$("$TESSERA" session ls 2>&1); rc=$?
check "reads are answered meanwhile ($rc)" [ $rc -eq 0 ]
check "and show the sessions" contains "$out" stays
out=$("$TESSERA" session create "$TEST_IMAGE" --name refused --cpu 1 --mem 32m 2>&1); rc=$?
check "a create is refused ($rc)" [ $rc -ne 0 ]
check "saying the database is unavailable ($out)" contains "$out" "the database is unavailable"
check "in one line" [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ]
code=$(PYTHONPATH="$(dirname "$0")" python3 - "$TESSERA_CONFIG" "$TEST_IMAGE" <<'PY'
import sys
from signed import Api, load_conf
c = load_conf(sys.argv[1])
st, body = Api(c["endpoint"], c["access_key"], c["secret_key"]).call(
    "POST", "/v1/sessions", {"image": sys.argv[2], "name": "raw", "cpu": 1, "mem": "32m"})
e = (body or {}).get("error") or {}
print(st, e.get("code"), "the database is unavailable" in (e.get("message") or ""))
PY
)
check "the API answers 503 JSON ($code)" [ "$code" == "503 unavailable True" ]
out=$("$TESSERA" session rm stays 2>&1); rc=$?
check "a removal is refused too ($rc: $out)" [ $rc -ne 0 ]

# Something that happens meanwhile and is acknowledged: the container of
# "dies" ends; its agent reports it and the manager takes the event.
docker kill "$(jget dies container_id)" >/dev/null
check "dies is ERROR in the manager" wait_status dies ERROR

"$E2E_PGCLUSTER" restart "$TESSERA_TEST_PG_DIR"
for _ in $(seq 1 100); do grep -q "reconnected" "$E2E_DIR/manager.log" && break; sleep 0.1; done
check "the manager logs that it reconnected" grep -q "store: PostgreSQL at 127.0.0.1:[0-9]*/[a-z0-9_]* reconnected" \
	"$E2E_DIR/manager.log"
for _ in $(seq 1 100); do grep -q "state written again" "$E2E_DIR/manager.log" && break; sleep 0.1; done
st=$("$PSQL" -qAtX -d "$DB" -c "SELECT status FROM sessions WHERE name='dies'")
check "what happened meanwhile is in the database ($st)" [ "$st" == ERROR ]
h=$("$PSQL" -qAtX -d "$DB" -c "SELECT COUNT(*) FROM session_history h JOIN sessions s ON s.id=h.session_id WHERE s.name='dies' AND h.status='ERROR'")
check "with its history line ($h)" [ "$h" -eq 1 ]
n=$("$PSQL" -qAtX -d "$DB" -c "SELECT COUNT(*) FROM sessions WHERE name IN ('refused','raw')")
check "nothing refused was stored ($n)" [ "$n" -eq 0 ]

ok=0
for _ in $(seq 1 50); do
	"$TESSERA" session create "$TEST_IMAGE" --name after --cpu 1 --mem 32m --startup-command 'sleep 100000' \
		>/dev/null 2>&1 && { ok=1; break; }
	sleep 0.2
done
check "creates work again" [ $ok -eq 1 ]
check "after RUNNING" wait_status after RUNNING

kill "$MPID"; wait "$MPID" 2>/dev/null
start_manager
check "after a manager restart: dies ERROR" [ "$(jget dies status)" == ERROR ]
check "stays RUNNING" [ "$(jget stays status)" == RUNNING ]
check "after RUNNING" wait_status after RUNNING
n=$("$TESSERA" session ls --all --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
check "three sessions ($n)" [ "$n" -eq 3 ]
e2e_done
