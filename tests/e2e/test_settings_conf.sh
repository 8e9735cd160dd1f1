#!/usr/bin/env bash
# manager.conf's keys that are cluster settings too (storage_hosts,
# registry_url, wsproxy_*), on one `tessera server` without a restart: a
# storage host added with `tessera config set` takes a folder at once and
# a session mounts it (the server's agent follows); dropping it while it
# holds a folder is refused, naming it; a bad value is refused and changes
# nothing; the proxy's range bounds wsproxy_port_range; new app links use
# the new wsproxy_url and range; registry_url "" means no registry at
# once; `config get --prefix ''` carries the keys and put-json restores
# them.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server || { e2e_done; exit 1; }
data=$E2E_DIR/data
wait_for() {  # wait_for COMMAND...: until it succeeds (up to ~30 s)
	for _ in $(seq 1 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
flat() { "$TESSERA" config get --prefix ''; }
key_of() { python3 -c 'import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print("null" if v is None else v)' "$1"; }
in_force() { "$TESSERA" config get 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["in_force"][sys.argv[1]] or "")' "$1"; }

# ---- the keys are settings ----
f0=$(flat)
for k in storage_hosts registry_url wsproxy_url wsproxy_port_range wsproxy_domain; do
	check "config get --prefix '' has $k (unset: null)" [ "$(key_of $k <<<"$f0")" == null ]
done
check "storage_hosts in force is the server's own ($(in_force storage_hosts))" \
	[ "$(in_force storage_hosts)" == "local:$data/folders" ]

# ---- a new storage host, at once ----
out=$("$TESSERA" folder create f0 --host new 2>&1); rc=$?
check "no host new yet (exit $rc): $out" [ $rc -ne 0 ]
check "config set storage_hosts adds one" "$TESSERA" config set storage_hosts "local:$data/folders,new:$E2E_DIR/newhost"
check "its directory is made" [ -d "$E2E_DIR/newhost/.trash" ]
check "folder create --host new works at once" "$TESSERA" folder create f1 --host new
fid=$("$TESSERA" folder info f1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
check "f1 lies on the new host" [ -d "$E2E_DIR/newhost/$fid" ]
check "a session mounting f1 starts (the agent binds from the new host)" \
	"$TESSERA" session create "$TEST_IMAGE" --name s1 --cpu 0.1 --mem 16m --mount f1 --wait
"$TESSERA" session exec s1 -- sh -c 'echo hello > /home/work/f1/written' >/dev/null 2>&1
check "what the session writes lands there" grep -qx hello "$E2E_DIR/newhost/$fid/written"

# ---- refusals change nothing ----
before=$(flat)
out=$("$TESSERA" config set storage_hosts "local:$data/folders" 2>&1); rc=$?
check "dropping the host of f1 is refused (exit $rc): $out" [ $rc -ne 0 ]
check "naming the folder" contains "$out" f1
out=$("$TESSERA" config set storage_hosts "nopath" 2>&1); rc=$?
check "a bad storage_hosts is refused (exit $rc): $out" [ $rc -ne 0 ]
check "naming the key" contains "$out" storage_hosts
: >"$E2E_DIR/a-file"
out=$("$TESSERA" config set storage_hosts "local:$data/folders,new:$E2E_DIR/newhost,x:$E2E_DIR/a-file/x" 2>&1); rc=$?
check "a host whose directory cannot be made is refused (exit $rc): $out" [ $rc -ne 0 ]
check "naming it" contains "$out" "storage host x"
out=$("$TESSERA" config set wsproxy_port_range 9-3 2>&1); rc=$?
check "a bad wsproxy_port_range is refused (exit $rc): $out" [ $rc -ne 0 ]
out=$("$TESSERA" config set registry_url 'http://bad host' 2>&1); rc=$?
check "a bad registry_url is refused (exit $rc): $out" [ $rc -ne 0 ]
check "nothing changed" [ "$(flat)" == "$before" ]
check "folder create --host new still works" "$TESSERA" folder create f2 --host new

# ---- the proxy's addresses ----
lo=${E2E_APP_PORTS%-*}; hi=${E2E_APP_PORTS#*-}
check "the manager knows the proxy's ports" wait_for grep -q "the app proxy serves ports $lo-$hi" "$E2E_DIR/server.log"
out=$("$TESSERA" config set wsproxy_port_range "$((hi + 1))-$((hi + 5))" 2>&1); rc=$?
check "a range the proxy does not serve is refused (exit $rc): $out" [ $rc -ne 0 ]
check "naming the proxy's range" contains "$out" "$lo-$hi"
out=$("$TESSERA" config set wsproxy_domain apps.example.org 2>&1); rc=$?
check "host mode is refused while the proxy serves ports (exit $rc): $out" [ $rc -ne 0 ]
url1=$("$TESSERA" session app s1 terminal 2>&1)
check "an app link on the old address ($url1)" contains "$url1" "http://127.0.0.2:$lo/"
check "config set wsproxy_url" "$TESSERA" config set wsproxy_url http://localhost
check "config set wsproxy_port_range within the proxy's" "$TESSERA" config set wsproxy_port_range "$hi-$hi"
url2=$("$TESSERA" session app s1 --port 8002 2>&1)
check "the next link is on the new address and range ($url2)" contains "$url2" "http://localhost:$hi/"
apps=$("$TESSERA" session apps s1 --json 2>&1)
check "the open terminal keeps its port, listed on the new address ($apps)" contains "$apps" "http://localhost:$lo/"

# ---- the registry ----
reg=$(in_force registry_url)
check "config set registry_url '' (no registry)" "$TESSERA" config set registry_url ''
out=$("$TESSERA" image pull "$TEST_IMAGE" 2>&1); rc=$?
check "a pull is refused at once (exit $rc): $out" [ $rc -ne 0 ]
check "saying there is no registry" contains "$out" "no registry"
check "config set registry_url null" "$TESSERA" config set registry_url null
check "the server's registry is in force again ($reg)" [ "$(in_force registry_url)" == "$reg" ]

# ---- backup and restore of the settings ----
"$TESSERA" config get --prefix '' >"$E2E_DIR/settings.json"
check "the backup has the new host" contains "$(cat "$E2E_DIR/settings.json")" "new:$E2E_DIR/newhost"
"$TESSERA" config set wsproxy_url http://other.example >/dev/null
"$TESSERA" config set registry_url '' >/dev/null
python3 - "$E2E_DIR/settings.json" "$E2E_DIR/bad.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["storage_hosts"] = "x:relative"; json.dump(d, open(sys.argv[2], "w"))
PY
mid=$(flat)
out=$("$TESSERA" config put-json '' "$E2E_DIR/bad.json" 2>&1); rc=$?
check "put-json with a bad storage_hosts fails (exit $rc): $out" [ $rc -ne 0 ]
check "and changes nothing" [ "$(flat)" == "$mid" ]
check "put-json restores the backup" "$TESSERA" config put-json '' "$E2E_DIR/settings.json"
check "config get --prefix '' is the backup again" [ "$(flat)" == "$(cat "$E2E_DIR/settings.json")" ]
check "wsproxy_url is back" [ "$(in_force wsproxy_url)" == http://localhost ]

# A prefix that names the first part of keys: `--prefix policy` gives
# {"default": ...}, never a key with a leading dot, and put-json takes it back.
"$TESSERA" config set policy.default '{"max_sessions": 7}' >/dev/null
pol=$("$TESSERA" config get --prefix policy)
check "config get --prefix policy has no key with a leading dot ($pol)" \
	python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d and not any(k.startswith(".") for k in d) and "default" in d else 1)' "$pol"
"$TESSERA" config set policy.default '{"max_sessions": 3}' >/dev/null
printf '%s' "$pol" >"$E2E_DIR/policy.json"
check "put-json policy takes it back" "$TESSERA" config put-json policy "$E2E_DIR/policy.json"
check "as policy.default" python3 -c 'import json,sys; sys.exit(0 if json.loads(sys.argv[1])["policy.default"]["max_sessions"] == 7 else 1)' "$("$TESSERA" config get --prefix '')"

"$TESSERA" session rm s1 >/dev/null 2>&1
e2e_done
