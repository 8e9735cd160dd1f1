#!/usr/bin/env bash
# The PostgreSQL path of `tessera admin backup` / `restore` against a
# throwaway cluster started here (Debian's postgresql-15, initdb into a
# temporary directory, a free port, run as the postgres user since the
# server refuses root): backup with pg_dump of the store URI; restore with
# the seeds' steps (connections terminated, database dropped and created,
# the dump fed to psql) brings the database back as it was, even with a
# client connected; a bad or mismatched backup changes nothing.
# It checks the database as a whole, with a table of its own: the
# manager's PostgreSQL store is not part of this test.
. "$(dirname "$0")/lib.sh"
e2e_setup
PGBIN=/usr/lib/postgresql/15/bin
if [[ ! -x $PGBIN/initdb ]] || ! id postgres >/dev/null 2>&1; then
	echo "SKIP: Debian's postgresql-15 (and its postgres user) is not installed"
	exit 77
fi
PGPORT=$(free_port)
PGDIR=$E2E_DIR/pg
mkdir -p "$PGDIR"
chown postgres: "$PGDIR"
chmod 755 "$E2E_DIR"
as_pg() { runuser -u postgres -- "$@"; }
as_pg "$PGBIN/initdb" -D "$PGDIR/data" --auth=trust -U postgres >"$E2E_DIR/initdb.log" 2>&1 ||
	{ fail "initdb"; tail -5 "$E2E_DIR/initdb.log"; e2e_done; exit 1; }
as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w \
	-o "-p $PGPORT -k $PGDIR -c listen_addresses=127.0.0.1" start >/dev/null ||
	{ fail "postgres did not start"; tail -5 "$PGDIR/log"; e2e_done; exit 1; }
stop_pg() { as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -m immediate stop >/dev/null 2>&1; }
trap 'stop_pg; e2e_teardown' EXIT

URI=postgresql://postgres@127.0.0.1:$PGPORT/tessera
q() { psql -X -q -t -A -v ON_ERROR_STOP=1 "$1" -c "$2"; }
q "postgresql://postgres@127.0.0.1:$PGPORT/postgres" "CREATE DATABASE tessera"
q "$URI" "CREATE TABLE users(id text PRIMARY KEY, email text); INSERT INTO users VALUES ('u1', 'ann@example.com'), ('u2', 'bob@example.com')"

cat >"$E2E_DIR/manager.conf" <<CONF
data_dir = $E2E_DIR/mdata
cluster_secret = 0123456789abcdef0123
store = $URI
CONF
check "admin backup runs pg_dump of the store" "$TESSERA" admin backup "$E2E_DIR/bk" --config "$E2E_DIR/manager.conf"
check "the dump is complete" grep -q "PostgreSQL database dump complete" "$E2E_DIR/bk/database.sql"
check "the manifest says postgresql" \
	python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["database"]["kind"]=="postgresql" and m["database"]["file"]=="database.sql"' "$E2E_DIR/bk/manifest.json"

# The database changes after the backup, and a client stays connected.
q "$URI" "INSERT INTO users VALUES ('u3', 'late@example.com'); DELETE FROM users WHERE id = 'u1'"
psql -X -q "$URI" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
SLEEPER=$!; E2E_PIDS+=("$SLEEPER")
for _ in $(seq 1 100); do
	[ "$(q "$URI" "SELECT count(*) FROM pg_stat_activity WHERE datname = 'tessera' AND query LIKE '%pg_sleep%' AND pid <> pg_backend_pid()")" == 1 ] && break
	sleep 0.1
done

# Bad backups change nothing.
cp -r "$E2E_DIR/bk" "$E2E_DIR/bk-cut"
head -c 200 "$E2E_DIR/bk/database.sql" >"$E2E_DIR/bk-cut/database.sql"
out=$("$TESSERA" admin restore "$E2E_DIR/bk-cut" --config "$E2E_DIR/manager.conf" 2>&1); rc=$?
check "a cut dump is refused (exit $rc): $out" [ $rc -ne 0 ]
check "and the database is untouched" [ "$(q "$URI" "SELECT string_agg(id, ',' ORDER BY id) FROM users")" == "u2,u3" ]
mkdir -p "$E2E_DIR/sq"
cat >"$E2E_DIR/sqlite.conf" <<CONF
data_dir = $E2E_DIR/sq
CONF
out=$("$TESSERA" admin restore "$E2E_DIR/bk" --config "$E2E_DIR/sqlite.conf" 2>&1); rc=$?
check "a PostgreSQL dump is not restored into an SQLite manager (exit $rc): $out" [ $rc -ne 0 ]

check "admin restore" "$TESSERA" admin restore "$E2E_DIR/bk" --config "$E2E_DIR/manager.conf"
check "the database is as backed up" [ "$(q "$URI" "SELECT string_agg(id || '=' || email, ',' ORDER BY id) FROM users")" == "u1=ann@example.com,u2=bob@example.com" ]
wait "$SLEEPER" 2>/dev/null
check "the connected client was disconnected" [ "$(q "$URI" "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()")" == 0 ]
e2e_done
