#!/bin/sh
# A throwaway PostgreSQL cluster for the tests, from Debian's binaries
# (postgresql-15): initdb into a temporary directory, the unix socket in
# that directory, a free TCP port on 127.0.0.1, trust authentication for
# the superuser "tessera". PostgreSQL refuses to run as root, so when run
# as root the cluster belongs to "nobody" (runuser).
#
#   pgcluster.sh start DIR     initdb (when DIR has no cluster) and start;
#                              prints the base URI postgresql://tessera@127.0.0.1:PORT
#                              and keeps it in DIR/uri
#   pgcluster.sh stop DIR      fast shutdown (the cluster stays in DIR)
#   pgcluster.sh restart DIR   start again on the same port
#   pgcluster.sh createdb DIR NAME   a new empty database; prints its URI
#   pgcluster.sh destroy DIR   stop and remove DIR
#   pgcluster.sh run CMD...    start a cluster in a temporary directory,
#                              run CMD with TESSERA_TEST_PG set to its base
#                              URI, stop and remove it (trap), exit with CMD's status
set -eu

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}

as_owner() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u nobody -- "$@"
	else
		"$@"
	fi
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start() {
	dir=$1
	if [ ! -x "$PGBIN/initdb" ]; then
		echo "pgcluster: $PGBIN/initdb not found: install postgresql-15 (scripts/bootstrap)" >&2
		exit 1
	fi
	mkdir -p "$dir"
	if [ "$(id -u)" = 0 ]; then
		chown nobody "$dir"
	fi
	chmod 0700 "$dir"
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		as_owner "$PGBIN/initdb" -D "$dir/data" -U tessera --auth=trust -E UTF8 --locale=C.UTF-8 \
			>"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
	fi
	if [ -f "$dir/port" ]; then port=$(cat "$dir/port"); else port=$(free_port); fi
	echo "$port" >"$dir/port.tmp" && mv "$dir/port.tmp" "$dir/port"
	as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
		-o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" \
		start >/dev/null || { tail -20 "$dir/postgres.log" >&2; exit 1; }
	echo "postgresql://tessera@127.0.0.1:$port" >"$dir/uri"
	cat "$dir/uri"
}

stop() {
	dir=$1
	[ -f "$dir/data/postmaster.pid" ] || return 0
	as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
}

case "${1:-}" in
start) start "$2" ;;
stop) stop "$2" ;;
restart) stop "$2"; start "$2" >/dev/null ;;
createdb)
	base=$(cat "$2/uri")
	"$PGBIN/psql" -qAt -d "$base/postgres" -c "CREATE DATABASE \"$3\"" >/dev/null
	echo "$base/$3"
	;;
destroy) stop "$2"; rm -rf "$2" ;;
run)
	shift
	dir=$(mktemp -d /tmp/tessera-pg.XXXXXX)
	trap 'stop "$dir"; rm -rf "$dir"' EXIT INT TERM
	TESSERA_TEST_PG=$(start "$dir")
	TESSERA_TEST_PG_DIR=$dir
	export TESSERA_TEST_PG TESSERA_TEST_PG_DIR
	set +e
	"$@"
	rc=$?
	set -e
	exit $rc
	;;
*) echo "usage: pgcluster.sh start|stop|restart|createdb|destroy DIR [NAME] | run CMD..." >&2; exit 2 ;;
esac
