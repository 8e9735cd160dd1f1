#!/usr/bin/env bash
# manager.conf's keys that are cluster settings (storage_hosts,
# registry_url, wsproxy_*) in etcd (Debian's etcd-server, started here on
# free ports), followed by two managers: a storage host added through
# manager 1 takes a folder on manager 2 without a restart; a bad value is
# refused and writes nothing to etcd; one written past the API with
# etcdctl is ignored; manager 2 refuses to drop the host its folder lies
# on; a deleted key gives manager.conf's value back; the backup form
# carries the keys.
. "$(dirname "$0")/lib.sh"
e2e_setup
cport=$(free_port); pport=$(free_port)
ETCD=http://127.0.0.1:$cport
export ETCDCTL_API=3
etcdctl_() { etcdctl --endpoints "$ETCD" "$@"; }
etcd --name e2e --data-dir "$E2E_DIR/etcd" --listen-client-urls "$ETCD" --advertise-client-urls "$ETCD" \
	--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
	--initial-cluster "e2e=http://127.0.0.1:$pport" >>"$E2E_DIR/etcd.log" 2>&1 &
E2E_PIDS+=("$!")
for _ in $(seq 1 300); do etcdctl_ endpoint health >/dev/null 2>&1 && break; sleep 0.1; done
etcdctl_ endpoint health >/dev/null 2>&1 || { fail "etcd did not start"; e2e_done; exit 1; }

secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
m1=$(free_port); m2=$(free_port)
for m in 1 2; do
	port=m$m
	e2e_manager_conf "$E2E_DIR/manager$m.conf" "${!port}" "$secret" "$E2E_DIR/mdata$m" \
		"etcd=$ETCD" "storage_hosts=local:$E2E_DIR/shared/folders" registry_url=http://127.0.0.1:5000
	"$TESSERA" manager --config "$E2E_DIR/manager$m.conf" >>"$E2E_DIR/manager$m.log" 2>&1 &
	E2E_PIDS+=("$!")
done
for _ in $(seq 1 100); do [[ -s $E2E_DIR/mdata1/admin.conf && -s $E2E_DIR/mdata2/admin.conf ]] && break; sleep 0.1; done
export TESSERA_CONFIG=$E2E_DIR/mdata1/admin.conf
on2() { TESSERA_CONFIG=$E2E_DIR/mdata2/admin.conf "$TESSERA" "$@"; }
wait_for() {  # wait_for COMMAND...: until it succeeds (up to ~30 s)
	for _ in $(seq 1 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
in_force2() { on2 config get 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["in_force"][sys.argv[1]] or "")' "$1"; }
check "manager 2 watches etcd" wait_for grep -q "watching the cluster settings" "$E2E_DIR/manager2.log"
check "manager 2 starts on manager.conf's registry" [ "$(in_force2 registry_url)" == http://127.0.0.1:5000 ]

# ---- a new storage host, set through manager 1 ----
out=$(on2 folder create f0 --host new 2>&1); rc=$?
check "manager 2 has no host new yet (exit $rc): $out" [ $rc -ne 0 ]
hosts="local:$E2E_DIR/shared/folders,new:$E2E_DIR/shared/new"
check "config set storage_hosts on manager 1" "$TESSERA" config set storage_hosts "$hosts"
check "etcd holds it" contains "$(etcdctl_ get /tessera/config/storage_hosts --print-value-only)" "new:$E2E_DIR/shared/new"
check "manager 2 applies it without a restart" wait_for eval '[ "$(in_force2 storage_hosts)" == "$hosts" ]'
check "folder create --host new on manager 2" on2 folder create f1 --host new
check "config set registry_url on manager 1" "$TESSERA" config set registry_url http://127.0.0.1:5999
check "manager 2 uses it" wait_for eval '[ "$(in_force2 registry_url)" == http://127.0.0.1:5999 ]'

# ---- refusals ----
rev() { etcdctl_ get --prefix /tessera/config/ -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])'; }
before=$(rev)
out=$("$TESSERA" config set storage_hosts "new:relative" 2>&1); rc=$?
check "a bad storage_hosts is refused (exit $rc): $out" [ $rc -ne 0 ]
out=$("$TESSERA" config set wsproxy_url "ftp://x" 2>&1); rc=$?
check "a bad wsproxy_url is refused (exit $rc): $out" [ $rc -ne 0 ]
check "and nothing is written to etcd" [ "$(rev)" == "$before" ]
out=$(on2 config set storage_hosts "local:$E2E_DIR/shared/folders" 2>&1); rc=$?
check "manager 2 refuses to drop the host of its folder (exit $rc): $out" [ $rc -ne 0 ]
check "naming the folder" contains "$out" f1
check "and etcd is unchanged" [ "$(rev)" == "$before" ]
etcdctl_ put /tessera/config/wsproxy_port_range '"9-3"' >/dev/null
check "a bad value written with etcdctl is ignored by manager 2" \
	wait_for grep -q "etcd key /tessera/config/wsproxy_port_range .* ignored" "$E2E_DIR/manager2.log"
check "which keeps its range" [ "$(in_force2 wsproxy_port_range)" == 10205-10300 ]
etcdctl_ del /tessera/config/wsproxy_port_range >/dev/null

# ---- deleted: manager.conf's again; the backup form ----
etcdctl_ del /tessera/config/registry_url >/dev/null
check "a deleted registry_url gives manager.conf's back" \
	wait_for eval '[ "$(in_force2 registry_url)" == http://127.0.0.1:5000 ]'
flat=$(on2 config get --prefix '')
check "config get --prefix '' has storage_hosts" contains "$flat" "\"storage_hosts\": \"$hosts\""
check "and registry_url (unset: null)" contains "$flat" '"registry_url": null'
e2e_done
