#!/usr/bin/env bash
# tessera wsproxy as a daemon: its config is validated like the other
# daemons' (one line, exit 1), it serves its port range and refuses a
# request without the app cookie with the page that says what to do, it
# stops on SIGTERM; and `tessera server` runs one on --app-ports.
# The proxy's relaying itself is tests/proxy/test_proxy.c; opening apps of
# real sessions is in the apps' end-to-end tests.
source "$(dirname "$0")/lib.sh"
e2e_setup

conf=$E2E_DIR/wsproxy.conf
bad_config() {  # bad_config "expected text" lines...
	local want=$1; shift
	printf '%s\n' "$@" > "$conf"
	local out rc
	out=$("$TESSERA" wsproxy --config "$conf" 2>&1); rc=$?
	[[ $rc -eq 1 && $(wc -l <<<"$out") -eq 1 && $out == *"$want"* ]] || { echo "rc=$rc: $out"; return 1; }
}
S='cluster_secret = 0123456789abcdef0123'
M='manager = http://127.0.0.1:1'
check "no manager is refused" bad_config "manager must be" "$S"
check "a short secret is refused" bad_config "cluster_secret must be" "$M" "cluster_secret = short"
check "an unknown key is refused" bad_config "port_rang" "$M" "$S" "port_rang = 1-2"
check "a bad range is refused" bad_config "port range" "$M" "$S" "port_range = 20-10"
check "listen without domain is refused" bad_config "listen is for host mode" "$M" "$S" "listen = 0.0.0.0:1"
check "port_range with domain is refused" bad_config "not port_range" "$M" "$S" "domain = example.org" \
	"port_range = 1-2"
check "a bad domain is refused" bad_config "not a DNS name" "$M" "$S" "domain = exa_mple/org"

# A range of free ports.
range=$(e2e_free_port_range 3) || exit 1
lo=${range%-*}
printf '%s\n' "$M" "$S" "port_range = $lo-$((lo + 2))" "bind = 127.0.0.2" > "$conf"
"$TESSERA" wsproxy --config "$conf" >>"$E2E_DIR/wsproxy.log" 2>&1 &
WSP=$!
E2E_PIDS+=("$WSP")
for _ in $(seq 1 200); do grep -q 'serving apps' "$E2E_DIR/wsproxy.log" && break; sleep 0.05; done
check "the daemon serves its range" grep -q "serving apps on 3 ports of $lo-$((lo + 2))" "$E2E_DIR/wsproxy.log"
page=$(curl -s -w '\n%{http_code}' "http://127.0.0.2:$((lo + 1))/")
check "no cookie: 403 saying how to open the app" \
	bash -c '[[ $(tail -1 <<<"$1") == 403 && $1 == *"session list"* ]]' _ "$page"
check "an unreachable manager is logged" grep -q 'cannot get the app routes' "$E2E_DIR/wsproxy.log"
# A server whose app ports another proxy holds does not start: its manager
# would hand out links to ports the other one serves.
out=$(timeout 20 "$TESSERA" server --data-dir "$E2E_DIR/data-busy" --port 0 --web-port 0 --registry none \
	--app-ports "$lo-$((lo + 1))" 2>&1)
rc=$?
check "a server whose app ports are taken does not start ($rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "it says which port and what to do ($(tail -1 <<<"$out"))" \
	bash -c '[[ $1 == *"port $2 on 127.0.0.2 is in use"* && $1 == *"--app-ports"* ]]' _ "$out" "$lo"
kill -TERM "$WSP"
wait "$WSP"
check "SIGTERM stops it cleanly" test $? -eq 0

# Inside tessera server.
start_server --app-ports "$lo-$((lo + 1))" --registry none || exit 1
check "tessera server runs the proxy on --app-ports" grep -q "serving apps on 2 ports of $lo-$((lo + 1))" \
	"$E2E_DIR/server.log"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.2:$lo/")
check "the server's proxy refuses a request without a cookie" test "$code" = 403
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.2:$lo/__tessera/setup?token=0123abcd")
check "an unknown link is refused" test "$code" = 403
stop_server

echo "$E2E_CHECKS checks, $E2E_FAILS failed"
exit $((E2E_FAILS > 0))
