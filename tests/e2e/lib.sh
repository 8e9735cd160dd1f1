# Shared helpers for the end-to-end tests: real binaries, real dockerd.
# Each test sources this, calls e2e_setup, and uses check/ok/fail.
set -uo pipefail

TESSERA=${TESSERA_BIN:?TESSERA_BIN must point at the built tessera binary}
# Bump the tag when the image contents change, so a stale one is never reused.
TEST_IMAGE=tessera-test:e2e-2
E2E_FAILS=0
E2E_CHECKS=0
E2E_PIDS=()
# Images a test made (commits, builds), removed when it ends, after its
# containers: an image a container still uses would only lose its tag.
E2E_IMAGES=()

e2e_log() { printf '# %s\n' "$*"; }
ok()   { E2E_CHECKS=$((E2E_CHECKS + 1)); printf 'ok   %s\n' "$*"; }
fail() { E2E_CHECKS=$((E2E_CHECKS + 1)); E2E_FAILS=$((E2E_FAILS + 1)); printf 'FAIL %s\n' "$*"; }
check() {  # check "description" command...
	local what=$1; shift
	if "$@"; then ok "$what"; else fail "$what"; fi
}

# A tiny image built here, from Debian's static busybox: no registry needed.
e2e_build_image() {
	if docker image inspect "$TEST_IMAGE" >/dev/null 2>&1; then return 0; fi
	local root; root=$(mktemp -d)
	mkdir -p "$root/bin" "$root/tmp" "$root/etc"
	# /tmp as in any distribution: sessions run as the work user.
	chmod 1777 "$root/tmp"
	cp /bin/busybox "$root/bin/busybox"
	# nc, httpd, wget, ip: what the network isolation test serves and fetches with.
	for c in sh ls cat echo sleep true false head tail wc grep env id ps kill mkdir rm dd touch stat \
		nc httpd wget ip; do
		ln -s busybox "$root/bin/$c"
	done
	echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
	tar -C "$root" -c . | docker import -c 'ENV PATH=/bin' -c 'CMD ["/bin/sh"]' - "$TEST_IMAGE" >/dev/null
	rm -rf "$root"
}

# Removes every container a test run left (by our agent label), and the
# users' networks they were on (the agent keeps a user's network after
# their sessions; e2e_teardown also removes the empty ones this test made).
e2e_cleanup_containers() {
	local ids nets
	# Sessions are labelled by agent id; each test's agents are
	# $E2E_AGENT_ID or $E2E_AGENT_ID-SOMETHING (tests with several).
	ids=$(docker ps -a --filter label=tessera.agent --format '{{.ID}} {{.Label "tessera.agent"}}' 2>/dev/null |
		awk -v a="$E2E_AGENT_ID" '$2 == a || index($2, a "-") == 1 { print $1 }')
	[[ -z "$ids" ]] && return 0
	nets=$(docker inspect -f '{{.HostConfig.NetworkMode}}' $ids 2>/dev/null | grep '^tessera-u-' | sort -u)
	docker rm -f $ids >/dev/null 2>&1
	# In use by another test's containers (two servers of one test share
	# none): docker refuses, and that is fine.
	[[ -n "$nets" ]] && docker network rm $nets >/dev/null 2>&1
	return 0
}

# A session container's network and its address there: its sandbox's
# when it joined one (NetworkMode "container:ID"; docs/architecture.md,
# "Sandboxes").
e2e_net_of_container() {  # e2e_net_of_container CID
	local mode
	mode=$(docker inspect -f '{{.HostConfig.NetworkMode}}' "$1" 2>/dev/null)
	[[ $mode == container:* ]] && mode=$(docker inspect -f '{{.HostConfig.NetworkMode}}' "${mode#container:}" 2>/dev/null)
	echo "$mode"
}
e2e_ip_of_container() {  # e2e_ip_of_container CID
	local c=$1 mode
	mode=$(docker inspect -f '{{.HostConfig.NetworkMode}}' "$c" 2>/dev/null)
	[[ $mode == container:* ]] && c=${mode#container:}
	docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$c" 2>/dev/null
}

# TESSERA_TEST_STORE=postgresql: every `tessera server` and `tessera
# manager` the test starts keeps its state in PostgreSQL, one database per
# data dir (a restart finds its state; two servers have theirs), in the
# cluster TESSERA_TEST_PG names (tests/pg/pgcluster.sh run starts one for
# a whole suite) or else in one started for this test. $TESSERA becomes a
# wrapper that adds `--store URI` to `server` and a `store = URI` line to
# a manager's config that has none; TESSERA_REAL is the binary.
E2E_PGCLUSTER=$(cd "$(dirname "${BASH_SOURCE[0]}")/../pg" && pwd)/pgcluster.sh
E2E_PG_OWN_DIR=
TESSERA_REAL=$TESSERA
e2e_pg_setup() {
	[[ "${TESSERA_TEST_STORE:-sqlite}" == postgresql ]] || return 0
	if [[ -z "${TESSERA_TEST_PG:-}" ]]; then
		E2E_PG_OWN_DIR=$(mktemp -d /tmp/tessera-e2e-pg.XXXXXX)
		TESSERA_TEST_PG=$("$E2E_PGCLUSTER" start "$E2E_PG_OWN_DIR") || {
			fail "cannot start a PostgreSQL test cluster"
			exit 1
		}
		TESSERA_TEST_PG_DIR=$E2E_PG_OWN_DIR
		export TESSERA_TEST_PG TESSERA_TEST_PG_DIR
	fi
	cat >"$E2E_DIR/tessera-pg" <<WRAP
#!/usr/bin/env bash
# tessera with its state in the test cluster, one database per data dir.
real='$TESSERA_REAL'
base='$TESSERA_TEST_PG'
psql=\${PGBIN:-/usr/lib/postgresql/15/bin}/psql
db_for() { echo "t_\$(printf %s "\$1" | md5sum | head -c 24)"; }
ensure_db() {
	"\$psql" -qAtX -d "\$base/postgres" -c "SELECT 1 FROM pg_database WHERE datname='\$1'" | grep -q 1 ||
		"\$psql" -qAtX -d "\$base/postgres" -c "CREATE DATABASE \$1" >/dev/null 2>&1 || true
}
case "\${1:-}" in
server)
	dd=default prev=
	for a in "\$@"; do
		case "\$a" in --store|--store=*|--help|-h) exec "\$real" "\$@" ;; esac
		[[ \$prev == --data-dir ]] && dd=\$(realpath -m "\$a")
		[[ \$a == --data-dir=* ]] && dd=\$(realpath -m "\${a#--data-dir=}")
		prev=\$a
	done
	db=\$(db_for "\$dd"); ensure_db "\$db"
	shift
	exec "\$real" server --store "\$base/\$db" "\$@" ;;
manager)
	conf= prev=
	for a in "\$@"; do [[ \$prev == --config ]] && conf=\$a; [[ \$a == --config=* ]] && conf=\${a#--config=}; prev=\$a; done
	if [[ -n \$conf && -f \$conf ]] && ! grep -q '^[[:space:]]*store[[:space:]]*=' "\$conf"; then
		dd=\$(sed -n 's/^[[:space:]]*data_dir[[:space:]]*=[[:space:]]*//p' "\$conf" | tail -1)
		dd=\$(realpath -m "\${dd:-/var/lib/tessera}")
		db=\$(db_for "\$dd"); ensure_db "\$db"
		printf '\nstore = %s/%s\n' "\$base" "\$db" >>"\$conf"
	fi
	exec "\$real" "\$@" ;;
*) exec "\$real" "\$@" ;;
esac
WRAP
	chmod +x "$E2E_DIR/tessera-pg"
	TESSERA=$E2E_DIR/tessera-pg
	e2e_log "state in PostgreSQL: $TESSERA_TEST_PG (one database per data dir)"
}

# Users' networks that earlier runs left behind (a test killed with
# SIGKILL runs no trap): empty ones made over 15 minutes ago by a test
# cluster are removed, since Docker has about 30 address pools and a new
# user's network fails once they are taken. Younger ones may belong to a
# test still starting its session.
e2e_sweep_networks() {
	local n created now; now=$(date +%s)
	for n in $(docker network ls -q --filter name=tessera-u- --filter label=tessera.cluster 2>/dev/null); do
		[[ $(docker network inspect -f '{{len .Containers}}' "$n" 2>/dev/null) == 0 ]] || continue
		created=$(date -d "$(docker network inspect -f '{{.Created}}' "$n" 2>/dev/null | cut -d. -f1)" +%s 2>/dev/null) || continue
		((now - created > 900)) && docker network rm "$n" >/dev/null 2>&1
	done
	return 0
}

e2e_setup() {
	E2E_DIR=$(mktemp -d /tmp/tessera-e2e.XXXXXX)
	E2E_RUN=$(basename "$E2E_DIR")
	E2E_AGENT_ID=n-$E2E_RUN
	e2e_sweep_networks
	# The users' networks there before: any other one left empty at the
	# end is removed by e2e_teardown. It may be the network of a test
	# running beside this one, between its sessions: that test's agent
	# makes it again at its next start, as it would for an admin who
	# pruned Docker's networks (tests/e2e/meson.build).
	E2E_NETS_BEFORE=$(docker network ls -q --no-trunc --filter name=tessera-u- 2>/dev/null)
	e2e_build_image
	e2e_pg_setup
	trap e2e_teardown EXIT
	# A test runner's timeout sends SIGTERM: exit through the EXIT trap so
	# servers and containers are cleaned up then too.
	trap 'exit 143' TERM
	trap 'exit 130' INT
}

e2e_teardown() {
	for p in "${E2E_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${E2E_PIDS[@]}"; do wait "$p" 2>/dev/null; done
	e2e_cleanup_containers
	local img net
	for img in "${E2E_IMAGES[@]}"; do docker rmi -f "$img" >/dev/null 2>&1; done
	# Users' networks this test's agents made and left empty (two agents on
	# one Docker each leave the other's).
	for net in $(docker network ls -q --no-trunc --filter name=tessera-u- 2>/dev/null); do
		grep -qxF "$net" <<<"$E2E_NETS_BEFORE" && continue
		[[ $(docker network inspect -f '{{len .Containers}}' "$net" 2>/dev/null) == 0 ]] &&
			docker network rm "$net" >/dev/null 2>&1
	done
	if [[ -n "$E2E_PG_OWN_DIR" ]]; then
		"$E2E_PGCLUSTER" stop "$E2E_PG_OWN_DIR"
		((E2E_FAILS)) && cp "$E2E_PG_OWN_DIR/postgres.log" "$E2E_DIR/postgres.log" 2>/dev/null
		rm -rf "$E2E_PG_OWN_DIR"
	fi
	if ((E2E_FAILS)); then
		e2e_log "logs kept in $E2E_DIR"
		for f in "$E2E_DIR"/*.log; do [[ -f $f ]] && { echo "---- $f"; tail -40 "$f"; }; done
	else
		rm -rf "$E2E_DIR"
	fi
}

# N consecutive free TCP ports on 127.0.0.1, as "FIRST-LAST": the app
# proxy's range of a test's server. Taken below Linux's ephemeral range
# (32768 and up), where no outgoing connection's source port can land
# between this check and the server's bind.
e2e_free_port_range() {  # e2e_free_port_range N
	python3 - "$1" <<'PY'
import random, socket, sys
n = int(sys.argv[1])
for _ in range(200):
    lo = random.randrange(20000, 32768 - n)
    socks = []
    try:
        # Free on the API's address and on the apps' own (tessera
        # server's app proxy listens on 127.0.0.2).
        for p in range(lo, lo + n):
            for addr in ("127.0.0.1", "127.0.0.2"):
                s = socket.socket()
                socks.append(s)
                s.bind((addr, p))
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(f"{lo}-{lo + n - 1}")
    sys.exit(0)
sys.exit("no free port range")
PY
}

# A free TCP port on ADDRESS (127.0.0.1 unless given).
free_port() {  # free_port [ADDRESS]
	python3 -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])' "${1:-127.0.0.1}"
}

# Config files of a manager and agents started as separate daemons
# (e2e_manager_conf, e2e_agent_conf): the lines every such test writes,
# then the test's own settings, each KEY=VALUE argument as a "KEY = VALUE"
# line (the value may hold '=' and spaces), in the order given.
e2e_conf_lines() {  # e2e_conf_lines KEY=VALUE...
	local kv
	for kv in "$@"; do
		[[ $kv == *=* ]] || { echo "e2e_conf_lines: '$kv' is not KEY=VALUE" >&2; return 1; }
		printf '%s = %s\n' "${kv%%=*}" "${kv#*=}"
	done
}
# A manager listening on 127.0.0.1:PORT, its data in DATA_DIR.
e2e_manager_conf() {  # e2e_manager_conf FILE PORT SECRET DATA_DIR [KEY=VALUE...]
	local file=$1 port=$2 secret=$3 data=$4
	shift 4
	e2e_conf_lines "listen=127.0.0.1:$port" "data_dir=$data" "cluster_secret=$secret" "$@" >"$file"
}
# Agent ID listening and advertised on 127.0.0.1:PORT, registering with
# the manager on 127.0.0.1:MANAGER_PORT, its data in DATA_DIR.
e2e_agent_conf() {  # e2e_agent_conf FILE ID MANAGER_PORT PORT SECRET DATA_DIR [KEY=VALUE...]
	local file=$1 id=$2 mport=$3 port=$4 secret=$5 data=$6
	shift 6
	e2e_conf_lines "id=$id" "manager=http://127.0.0.1:$mport" "cluster_secret=$secret" \
		"listen=127.0.0.1:$port" "advertise_url=http://127.0.0.1:$port" "data_dir=$data" "$@" >"$file"
}

# Starts `tessera server` on a free port; waits for admin.conf (with web_url).
# Unless the arguments name --app-ports, its app proxy gets 8 free ports
# (e2e_free_port_range): parallel tests must not all ask for the default
# range, and E2E_APP_PORTS says which it got.
# Sets SERVER_PID and exports TESSERA_CONFIG. With E2E_SERVER=NAME set, a
# second server of that name: its own data dir (data-NAME) and log
# (server-NAME.log), the same node id.
start_server() {  # start_server [extra args]
	local data=$E2E_DIR/data${E2E_SERVER:+-$E2E_SERVER}

	local apps=()
	if [[ " $* " != *" --app-ports "* ]]; then
		E2E_APP_PORTS=$(e2e_free_port_range 8) || { fail "no free app port range"; return 1; }
		apps=(--app-ports "$E2E_APP_PORTS")
	fi

	rm -f "$data/admin.conf"
	"$TESSERA" server --data-dir "$data" --port 0 --web-port 0 --node-id "$E2E_AGENT_ID" "${apps[@]}" "$@" \
		>>"$E2E_DIR/server${E2E_SERVER:+-$E2E_SERVER}.log" 2>&1 &
	SERVER_PID=$!
	E2E_PIDS+=("$SERVER_PID")
	# Ready once admin.conf names the web UI too: the server writes the
	# file first with the API's credentials and adds web_url when the web
	# UI serves, so a test reading it earlier could miss web_url.
	for _ in $(seq 1 600); do
		grep -q '^web_url' "$data/admin.conf" 2>/dev/null && break
		kill -0 "$SERVER_PID" 2>/dev/null || {
			fail "server exited at start"
			tail -20 "$E2E_DIR/server${E2E_SERVER:+-$E2E_SERVER}.log"
			return 1
		}
		sleep 0.05
	done
	export TESSERA_CONFIG=$data/admin.conf
	grep -q '^web_url' "$data/admin.conf" 2>/dev/null
}

stop_server() {  # stop_server [signal]
	kill -"${1:-TERM}" "$SERVER_PID" 2>/dev/null
	wait "$SERVER_PID" 2>/dev/null
	return 0
}

# JSON field of a session: jget NAME FIELD (dotted path allowed)
jget() {
	"$TESSERA" session info "$1" --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v.get(k) if isinstance(v, dict) else None
print("" if v is None else v)' "$2"
}

# Waits until session NAME has STATUS (up to ~30 s); the test asserts on the
# state reached, never on how fast.
wait_status() {  # wait_status NAME STATUS
	local s=""
	for _ in $(seq 1 300); do
		s=$(jget "$1" status 2>/dev/null)
		[[ "$s" == "$2" ]] && return 0
		sleep 0.1
	done
	e2e_log "session $1 is '$s', expected $2 (status_info: $(jget "$1" status_info 2>&1 | head -c 400); agent: $(jget "$1" agent 2>&1))"
	return 1
}

e2e_done() {
	echo "$((E2E_CHECKS - E2E_FAILS)) passed, $E2E_FAILS failed"
	((E2E_FAILS == 0))
}

# contains HAYSTACK NEEDLE: substring test that is safe for any quoting.
contains() { [[ "$1" == *"$2"* ]]; }
# has_line TEXT LINE: TEXT has exactly LINE as one of its lines.
has_line() { grep -qxF -- "$2" <<<"$1"; }
# has_prefix_line TEXT PREFIX: some line of TEXT starts with PREFIX.
has_prefix_line() { grep -q "^$2" <<<"$1"; }
# not CMD...: succeeds when CMD fails (for check).
not() { ! "$@"; }

# An image with the C library (busybox + the host's glibc), for what is
# dynamically linked: gpu-info, the fGPU library and the mock driver; and
# gpu-share-bench (TESSERA_GPU_SHARE_BENCH), a CUDA program as user code
# is. The tag follows the bench's build, so a rebuilt bench makes a new
# image and the old ones are removed.
GPU_TEST_IMAGE=tessera-test-glibc:e2e-3
if [[ -n "${TESSERA_GPU_SHARE_BENCH:-}" && -f "$TESSERA_GPU_SHARE_BENCH" ]]; then
	GPU_TEST_IMAGE+="-$(sha256sum "$TESSERA_GPU_SHARE_BENCH" | head -c 12)"
fi
e2e_build_glibc_image() {
	if docker image inspect "$GPU_TEST_IMAGE" >/dev/null 2>&1; then return 0; fi
	local old
	for old in $(docker images --format '{{.Repository}}:{{.Tag}}' tessera-test-glibc); do
		docker rmi "$old" >/dev/null 2>&1 || true
	done
	local root; root=$(mktemp -d)
	mkdir -p "$root/bin" "$root/tmp" "$root/etc" "$root/lib64" "$root/lib/x86_64-linux-gnu"
	chmod 1777 "$root/tmp"
	cp /bin/busybox "$root/bin/busybox"
	for c in sh ls cat echo sleep true false head tail wc grep env id ps kill mkdir rm dd; do
		ln -s busybox "$root/bin/$c"
	done
	echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
	for l in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
		cp -L "/lib/x86_64-linux-gnu/$l" "$root/lib/x86_64-linux-gnu/$l"
	done
	cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
	if [[ -n "${TESSERA_GPU_SHARE_BENCH:-}" ]]; then
		cp "$TESSERA_GPU_SHARE_BENCH" "$root/bin/gpu-share-bench"
	fi
	tar -C "$root" -c . | docker import -c 'ENV PATH=/bin' -c 'CMD ["/bin/sh"]' - "$GPU_TEST_IMAGE" >/dev/null
	rm -rf "$root"
}

# ---- session apps through the proxy (test_apps, test_image_pip, test_ml_images) ----
# open_app ARGS...: `tessera session app ARGS`, then the URL's setup.
# Sets URL, ORIGIN (http://HOST:PORT), SETUP (the setup's status) and
# COOKIE (NAME=VALUE of its Set-Cookie, or "").
open_app() {
	URL=$("$TESSERA" session app "$@" 2>"$E2E_DIR/app.err")
	ORIGIN=${URL%%/__tessera/*}
	SETUP=$(curl -s -o /dev/null -D "$E2E_DIR/setup.h" -w '%{http_code}' "$URL")
	COOKIE=$(sed -n 's/^[Ss]et-[Cc]ookie: *\(tessera_app[^;]*\).*/\1/p' "$E2E_DIR/setup.h" | tr -d '\r' | head -n 1)
}
# code ORIGIN PATH [COOKIE]: the status of a GET, its body in $E2E_DIR/body.
code() {
	curl -s -o "$E2E_DIR/body" -w '%{http_code}' ${3:+-b "$3"} "$1$2"
}
# poll ORIGIN PATH COOKIE: GETs until 200 (up to 5 minutes: Jupyter's
# first start is slow on a loaded machine). Sets SEEN, the distinct
# statuses answered meanwhile; succeeds on 200.
poll() {
	local c
	SEEN=""
	for _ in $(seq 1 300); do
		c=$(code "$1" "$2" "$3")
		[[ " $SEEN " == *" $c "* ]] || SEEN="$SEEN $c"
		[[ $c == 200 ]] && return 0
		sleep 1
	done
	return 1
}
