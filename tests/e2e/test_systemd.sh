#!/usr/bin/env bash
# The systemd side of the daemons (configs/systemd/, src/common/sdnotify.c):
# every unit passes `systemd-analyze verify` with no complaint, is
# Type=notify with Restart=on-failure and logs to the journal, and the
# network daemons' units keep their sandbox (`systemd-analyze security
# --offline`); each daemon, run with NOTIFY_SOCKET as systemd would, sends
# READY=1 only once its ports answer, a STATUS= line, and STOPPING=1 on
# SIGTERM. systemd need not be PID 1: verify and security read unit files.
# Last, the units run under a real systemd, PID 1 of a container made
# from this host's /usr: every daemon starts in its sandbox, serves, logs
# to the journal, comes back after a crash and stops cleanly; skipped, with
# a line saying so, where Docker cannot run systemd.
. "$(dirname "$0")/lib.sh"
e2e_setup
UNITS=$(cd "$(dirname "$0")/../../configs/systemd" && pwd)
here=$(cd "$(dirname "$0")" && pwd)

# The units as installed name /usr/local/bin/tessera; verify wants an
# executable there, so they are checked with ExecStart on the built binary.
# Not at its own path, though: the manager's, webserver's and wsproxy's
# PrivateTmp= gives them a /tmp of their own, which hides a build directory
# under /tmp (a clone made there). The build directory is bind-mounted
# outside /tmp for them, at the same path on this host and in the systemd
# container below (the agent gives dockerd paths beside its binary).
BUILD_DIR=$(cd "$(dirname "$TESSERA")" && pwd)
UNIT_BUILD=/opt/tessera-test-$E2E_RUN/build
UNIT_TESSERA=$UNIT_BUILD/$(basename "$TESSERA")
SD_CT=tessera-sd-$E2E_RUN
SD_AGENT=$E2E_AGENT_ID-sd
e2e_cleanup_containers() {
	docker rm -f "$SD_CT" >/dev/null 2>&1
	local ids
	ids=$(docker ps -aq --filter "label=tessera.agent=$SD_AGENT")
	[[ -n $ids ]] && docker rm -f $ids >/dev/null 2>&1
	umount "$UNIT_BUILD" 2>/dev/null && rmdir "$UNIT_BUILD" "$(dirname "$UNIT_BUILD")" 2>/dev/null
	return 0
}
mkdir -p "$UNIT_BUILD" && mount --bind "$BUILD_DIR" "$UNIT_BUILD" ||
	fail "the build directory bind-mounted at $UNIT_BUILD"
mkdir -p "$E2E_DIR/units"
for u in tessera-manager tessera-agent tessera-webserver tessera-wsproxy tessera-server; do
	check "$u.service exists" test -f "$UNITS/$u.service"
	sed "s#/usr/local/bin/tessera #$UNIT_TESSERA #" "$UNITS/$u.service" >"$E2E_DIR/units/$u.service"
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
	check "$u runs the tessera binary" grep -q "^ExecStart=$UNIT_TESSERA " "$f"
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
e2e_manager_conf "$E2E_DIR/manager.conf" "$mport" "$secret" "$E2E_DIR/mdata"
notify_run manager "127.0.0.1:$mport" "$TESSERA" manager --config "$E2E_DIR/manager.conf"
check "manager: READY=1 once its API answers, STATUS, STOPPING=1" notified manager

aport=$(free_port)
e2e_agent_conf "$E2E_DIR/agent.conf" "$E2E_AGENT_ID" "$mport" "$aport" "$secret" "$E2E_DIR/adata" cpu=1 mem=256MiB
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
notify_run server "127.0.0.1:$sport 127.0.0.1:$swport 127.0.0.2:${range%-*}" \
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

# ---- The units under a real systemd ----
# A container whose /usr is this host's (read-only) and whose /etc holds
# only what systemd and the daemons read, with the units installed as an
# administrator would (ExecStart on the built binary), boots systemd as
# its PID 1. The build directory is mounted at UNIT_BUILD (the daemons
# find their files beside the binary); Docker's socket at /dockersock (the
# agent's docker_socket), since systemd mounts its own /run; the agent's
# data_dir at its own path too, as the paths it gives dockerd are the
# host's, and made writable with the drop-in docs/admin.md describes.
SD_IMAGE=tessera-test-sdroot:e2e-1
sd_image() {
	docker image inspect "$SD_IMAGE" >/dev/null 2>&1 && return 0
	local root=$E2E_DIR/sdroot
	mkdir -p "$root"/{etc,var/lib,var/log,run,tmp,proc,sys,dev,root,usr,dockersock}
	ln -s usr/bin "$root/bin"; ln -s usr/lib "$root/lib"; ln -s usr/lib64 "$root/lib64"; ln -s usr/sbin "$root/sbin"
	ln -s ../run "$root/var/run"
	chmod 1777 "$root/tmp"
	tar -C "$root" -c . | docker import - "$SD_IMAGE" >/dev/null
}
sd_etc() {
	local etc=$E2E_DIR/sdetc f
	mkdir -p "$etc/systemd/system" "$etc/tessera"
	for f in passwd group nsswitch.conf ld.so.cache ld.so.conf hostname login.defs; do
		[[ -e /etc/$f ]] && cp -a "/etc/$f" "$etc/"
	done
	[[ -d /etc/ld.so.conf.d ]] && cp -a /etc/ld.so.conf.d "$etc/"
	ln -s ../usr/lib/os-release "$etc/os-release"
	: >"$etc/machine-id"
	# Boots to a target of its own: nothing of the host's is enabled here.
	printf '[Unit]\nDescription=the test target\nRequires=basic.target\nAfter=basic.target\nAllowIsolate=yes\n' \
		>"$etc/systemd/system/tessera-test.target"
	ln -s tessera-test.target "$etc/systemd/system/default.target"
	# The agent's unit requires docker.service; dockerd is the host's.
	printf '[Unit]\nDescription=the host dockerd, through /dockersock\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n' \
		>"$etc/systemd/system/docker.service"
	for u in "$E2E_DIR"/units/tessera-*.service; do cp "$u" "$etc/systemd/system/"; done
	mkdir -p "$etc/systemd/system/tessera-agent.service.d" "$E2E_DIR/sd-agent"
	printf '[Service]\nReadWritePaths=%s\n' "$E2E_DIR/sd-agent" \
		>"$etc/systemd/system/tessera-agent.service.d/data-dir.conf"
	printf '%s\n' "listen = 127.0.0.1:8090" "cluster_secret = $secret" \
		"storage_hosts = local:/var/lib/tessera/folders" >"$etc/tessera/manager.conf"
	printf '%s\n' "listen = 127.0.0.1:8080" "manager = http://127.0.0.1:8090" "web_secret = $secret" \
		>"$etc/tessera/webserver.conf"
	printf '%s\n' "manager = http://127.0.0.1:8090" "cluster_secret = $secret" "port_range = 10205-10207" \
		"bind = 127.0.0.1" >"$etc/tessera/wsproxy.conf"
	printf '%s\n' "id = $SD_AGENT" "manager = http://127.0.0.1:8090" "cluster_secret = $secret" \
		"listen = 127.0.0.1:8091" "advertise_url = http://127.0.0.1:8091" \
		"docker_socket = unix:///dockersock/docker.sock" "data_dir = $E2E_DIR/sd-agent" \
		"cpu = 1" "mem = 512MiB" >"$etc/tessera/agent.conf"
	chmod 600 "$etc"/tessera/*.conf
	# tessera-server as installed, but for Docker's socket.
	mkdir -p "$etc/systemd/system/tessera-server.service.d"
	printf '[Service]\nExecStart=\nExecStart=%s server --data-dir /var/lib/tessera --port 8090 --node-id %s --docker-socket unix:///dockersock/docker.sock\n' \
		"$UNIT_TESSERA" "$SD_AGENT" >"$etc/systemd/system/tessera-server.service.d/docker.conf"
}
sd() { docker exec "$SD_CT" "$@"; }
sd_cli() { docker exec -e TESSERA_CONFIG=/var/lib/tessera/admin.conf "$SD_CT" "$UNIT_TESSERA" "$@"; }
sd_boot() {
	sd_image && sd_etc || return 1
	# SYS_ADMIN: systemd mounts (its /run, the units' sandboxes);
	# seccomp and AppArmor off: systemd sets up its own per unit.
	docker run -d --name "$SD_CT" --cap-add SYS_ADMIN --security-opt seccomp=unconfined \
		--security-opt apparmor=unconfined -e container=docker --tmpfs /run --tmpfs /run/lock --tmpfs /tmp \
		-v /usr:/usr:ro -v "$E2E_DIR/sdetc:/etc" -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
		-v "$UNIT_BUILD:$UNIT_BUILD:ro" -v /var/run/docker.sock:/dockersock/docker.sock \
		-v "$E2E_DIR/sd-agent:$E2E_DIR/sd-agent" "$SD_IMAGE" /lib/systemd/systemd >/dev/null 2>&1 || return 1
	local st=""
	for _ in $(seq 1 300); do
		st=$(sd systemctl is-system-running 2>/dev/null)
		[[ $st == running || $st == degraded ]] && break
		sleep 0.1
	done
	[[ $st == running || $st == degraded ]] || return 1
	# systemd leaves mount propagation private in a container (on a host it
	# makes / shared), and the units' credentials (LoadCredential=) are
	# mounted from a namespace of their own: shared, as on a host.
	sd mount --make-rshared /
}
if ! sd_boot; then
	e2e_log "SKIP the units under a real systemd: Docker here cannot run systemd as a container's PID 1"
	docker logs "$SD_CT" 2>&1 | tail -5
	docker rm -f "$SD_CT" >/dev/null 2>&1
	e2e_done
	exit $?
fi
active() {  # active UNIT: active, with the STATUS= line its daemon sent
	local st text
	st=$(sd systemctl is-active "$1"); text=$(sd systemctl show -p StatusText --value "$1")
	[[ $st == active && -n $text ]] || { echo "$1: $st, status '$text'"; sd journalctl -u "$1" --no-pager | tail -5; return 1; }
}
out=$(sd systemctl start tessera-manager tessera-agent tessera-webserver tessera-wsproxy 2>&1)
check "systemctl start: the four cluster units start ($out)" [ -z "$out" ]
for u in tessera-manager tessera-agent tessera-webserver tessera-wsproxy; do
	check "$u is active in its sandbox, with its status line" active "$u"
done
check "the manager logs to the journal" bash -c "docker exec $SD_CT journalctl -u tessera-manager --no-pager | grep -q 'serving the API on 127.0.0.1:8090'"
check "the webserver, as a user of its own, answers" [ "$(sd curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/)" == 200 ]
check "and runs as no root" bash -c "[ \"\$(docker exec $SD_CT ps -o user= -C tessera | grep -vc root)\" -ge 2 ]"
password=$(sd sed -n 's/^password *= *//p' /var/lib/tessera/admin.conf)
login=$(sd curl -s -H 'Content-Type: application/json' -d "{\"email\":\"admin@tessera.local\",\"password\":\"$password\"}" \
	http://127.0.0.1:8080/auth/login)
check "a login through the sandboxed webserver and manager (argon2)" contains "$login" csrf_token
check "the wsproxy answers on its ports" [ "$(sd curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:10205/)" == 403 ]
sd_alive() { sd_cli node ls --json 2>/dev/null | grep -q '"ALIVE"'; }
for _ in $(seq 1 100); do sd_alive && break; sleep 0.1; done
check "the agent registers with the manager" sd_alive
out=$(sd_cli session create "$TEST_IMAGE" --name sd --cpu 0.1 --mem 16m --wait 2>&1)
check "a session starts through the sandboxed agent and Docker's socket ($out)" contains "$out" RUNNING
check "and runs a command" [ "$(sd_cli session exec sd -- echo sandboxed 2>&1)" == sandboxed ]
out=$(sd_cli folder create sdf 2>&1)
owner=$(sd sh -c 'stat -c %u /var/lib/tessera/folders/*/' 2>&1)
check "the manager makes a folder owned by the sessions' user ($out; $owner)" [ "$owner" == 1000 ]
sd_cli session rm sd >/dev/null 2>&1
sd systemctl kill -s KILL tessera-manager
restarted() { [[ $(sd systemctl show -p NRestarts --value tessera-manager) -ge 1 ]] && active tessera-manager; }
for _ in $(seq 1 100); do restarted >/dev/null && break; sleep 0.1; done
check "a killed manager is restarted (Restart=on-failure)" restarted
out=$(sd systemctl stop tessera-manager tessera-agent tessera-webserver tessera-wsproxy 2>&1)
check "systemctl stop ($out)" [ -z "$out" ]
for u in tessera-manager tessera-agent tessera-webserver tessera-wsproxy; do
	check "$u stopped cleanly" [ "$(sd systemctl show -p Result --value "$u")/$(sd systemctl is-active "$u")" == success/inactive ]
done
# tessera-server: the API, web UI, app proxy and registry in one process,
# on the manager's data dir (the two are never on one host) emptied.
sd rm -rf /var/lib/tessera
out=$(sd systemctl start tessera-server 2>&1)
check "tessera-server starts ($out)" [ -z "$out" ]
check "tessera-server is active in its sandbox, with its status line" active tessera-server
check "its API answers" sd curl -s -o /dev/null http://127.0.0.1:8090/
sd systemctl stop tessera-server
check "tessera-server stopped cleanly" [ "$(sd systemctl show -p Result --value tessera-server)" == success ]
e2e_done
