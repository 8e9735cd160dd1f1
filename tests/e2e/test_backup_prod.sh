#!/usr/bin/env bash
# Backups in production configuration: a manager on PostgreSQL (the test
# cluster of tests/pg/pgcluster.sh, lib.sh) with its settings in etcd
# (started here on free ports), an agent. Users, a running session, an
# image alias, a folder and settings; `tessera admin backup` while the
# manager runs; the manager stopped, the database dropped and etcd's keys
# deleted; `tessera admin restore`; the manager started again: everything
# is back and the running session is re-adopted in the same container.
TESSERA_TEST_STORE=postgresql
. "$(dirname "$0")/lib.sh"
e2e_setup
PSQL=${PGBIN:-/usr/lib/postgresql/15/bin}/psql
DBNAME=backup_$$
"$PSQL" -qAtX -d "$TESSERA_TEST_PG/postgres" -c "CREATE DATABASE $DBNAME" >/dev/null ||
	{ fail "cannot create database $DBNAME"; e2e_done; exit 1; }
DB=$TESSERA_TEST_PG/$DBNAME
db_exists() { [ "$("$PSQL" -qAtX -d "$TESSERA_TEST_PG/postgres" -c "SELECT count(*) FROM pg_database WHERE datname = '$DBNAME'")" == 1 ]; }

cport=$(free_port); pport=$(free_port)
ETCD=http://127.0.0.1:$cport
etcdctl_() { ETCDCTL_API=3 etcdctl --endpoints "$ETCD" "$@"; }
etcd --name bk --data-dir "$E2E_DIR/etcd" --listen-client-urls "$ETCD" --advertise-client-urls "$ETCD" \
	--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
	--initial-cluster "bk=http://127.0.0.1:$pport" >>"$E2E_DIR/etcd.log" 2>&1 &
E2E_PIDS+=("$!")
for _ in $(seq 1 300); do etcdctl_ endpoint health >/dev/null 2>&1 && break; sleep 0.1; done
check "etcd is up" etcdctl_ endpoint health

secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
mport=$(free_port); aport=$(free_port)
e2e_manager_conf "$E2E_DIR/manager.conf" "$mport" "$secret" "$E2E_DIR/mdata" \
	heartbeat_interval_ms=300 "store=$DB" "etcd=$ETCD"
e2e_agent_conf "$E2E_DIR/agent.conf" "$E2E_AGENT_ID" "$mport" "$aport" "$secret" "$E2E_DIR/agent-data" \
	cpu=2 mem=1GiB "etcd=$ETCD"
start_manager() {
	"$TESSERA" manager --config "$E2E_DIR/manager.conf" >>"$E2E_DIR/manager.log" 2>&1 &
	MPID=$!
	E2E_PIDS+=("$MPID")
	for _ in $(seq 1 300); do
		curl -s -o /dev/null "http://127.0.0.1:$mport/" && [[ -s $E2E_DIR/mdata/admin.conf ]] && return 0
		sleep 0.1
	done
	return 1
}
check "the manager starts on PostgreSQL" start_manager
check "its state is in PostgreSQL" grep -q "PostgreSQL at" "$E2E_DIR/manager.log"
"$TESSERA" agent --config "$E2E_DIR/agent.conf" >>"$E2E_DIR/agent.log" 2>&1 &
E2E_PIDS+=("$!")
export TESSERA_CONFIG=$E2E_DIR/mdata/admin.conf
alive() { "$TESSERA" node ls --json 2>/dev/null | python3 -c 'import json,sys; sys.exit(0 if any(n["status"]=="ALIVE" for n in json.load(sys.stdin)) else 1)'; }
for _ in $(seq 1 300); do alive && break; sleep 0.1; done
check "the agent registers" alive

api() {  # api METHOD PATH [JSON]: a signed call as the admin; status and body
	PYTHONPATH=$(dirname "$0") python3 - "$TESSERA_CONFIG" "$@" <<'PY'
import json, sys
from signed import Api, load_conf
conf = load_conf(sys.argv[1])
a = Api(conf["endpoint"], conf["access_key"], conf["secret_key"])
body = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
st, r = a.call(sys.argv[2], sys.argv[3], body)
print(st, json.dumps(r, sort_keys=True))
PY
}

# ---- state to back up ----
check "a user is made" contains "$(api POST /v1/users '{"email": "carol@example.com", "password": "pw of carol"}')" "201 "
"$TESSERA" config set queue_policy lifo >/dev/null
"$TESSERA" config set policy.carol@example.com '{"max_sessions": 2}' >/dev/null
check "the settings are in etcd" contains "$(etcdctl_ get /tessera/config/queue_policy)" lifo
"$TESSERA" session create "$TEST_IMAGE" --name keep --cpu 0.5 --mem 16m --startup-command 'sleep 100000' >/dev/null
check "keep RUNNING" wait_status keep RUNNING
keep_cid=$(jget keep container_id)
check "an image alias is made" "$TESSERA" image alias bk-alias "$TEST_IMAGE"
check "a folder is made" "$TESSERA" folder create bkdata
folder_id=$("$TESSERA" folder info bkdata --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')

check "admin backup while the manager runs" "$TESSERA" admin backup "$E2E_DIR/bk" --config "$E2E_DIR/manager.conf"
check "the manifest says postgresql, settings from etcd" \
	python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["database"]["kind"]=="postgresql" and m["config"]["from"]=="etcd"' "$E2E_DIR/bk/manifest.json"
check "the dump is complete" grep -q "PostgreSQL database dump complete" "$E2E_DIR/bk/database.sql"
check "config.json has the settings" \
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["queue_policy"]=="lifo"' "$E2E_DIR/bk/config.json"

# ---- the database and the settings are lost ----
kill -TERM "$MPID"; wait "$MPID" 2>/dev/null
check "keep's container survives the manager" [ "$(docker inspect -f '{{.State.Running}}' "$keep_cid")" == "true" ]
"$PSQL" -qAtX -d "$TESSERA_TEST_PG/postgres" -c "DROP DATABASE $DBNAME WITH (FORCE)" >/dev/null
check "the database is gone" not db_exists
etcdctl_ del --prefix /tessera/config/ >/dev/null
check "etcd's settings are gone" [ -z "$(etcdctl_ get --prefix /tessera/config/)" ]

check "admin restore" "$TESSERA" admin restore "$E2E_DIR/bk" --config "$E2E_DIR/manager.conf"
check "the database is there again" db_exists
check "the settings are in etcd again" contains "$(etcdctl_ get /tessera/config/queue_policy)" lifo
check "the manager starts again" start_manager
for _ in $(seq 1 300); do alive && break; sleep 0.1; done
check "the agent registers again" alive
check "keep is RUNNING again" wait_status keep RUNNING
check "with the same container" [ "$(jget keep container_id)" == "$keep_cid" ]
out=$("$TESSERA" session exec keep -- echo back 2>&1)
check "exec works in the re-adopted session ($out)" [ "$out" == back ]
check "the user is back" contains "$(api GET /v1/users)" '"carol@example.com"'
check "the image alias is back" contains "$(api GET /v1/images/aliases)" '"bk-alias"'
check "the folder is back, the same one" [ "$("$TESSERA" folder info bkdata --json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')" == "$folder_id" ]
check "the settings are back" [ "$("$TESSERA" config get queue_policy)" == lifo ]
check "the policy is back" contains "$("$TESSERA" config get --prefix policy.)" carol@example.com
"$TESSERA" session rm keep >/dev/null
check "keep ends" wait_status keep TERMINATED
"$PSQL" -qAtX -d "$TESSERA_TEST_PG/postgres" -c "DROP DATABASE IF EXISTS $DBNAME WITH (FORCE)" >/dev/null 2>&1
e2e_done
