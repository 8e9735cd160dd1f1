#!/usr/bin/env bash
# Cluster settings in etcd (Debian's etcd-server, started here on free
# ports): two managers and two agents follow it. `tessera config set` on
# one manager lands in etcd (etcdctl shows it), the other manager applies
# it, and both agents apply theirs (the log cap of new containers) without
# a restart; put-json with a bad file writes nothing; etcd stopped and
# started again: every watcher resumes; admin backup / restore take the
# settings from and back into etcd.
. "$(dirname "$0")/lib.sh"
e2e_setup
cport=$(free_port); pport=$(free_port)
ETCD=http://127.0.0.1:$cport
export ETCDCTL_API=3
etcdctl_() { etcdctl --endpoints "$ETCD" "$@"; }
start_etcd() {
	etcd --name e2e --data-dir "$E2E_DIR/etcd" --listen-client-urls "$ETCD" --advertise-client-urls "$ETCD" \
		--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
		--initial-cluster "e2e=http://127.0.0.1:$pport" >>"$E2E_DIR/etcd.log" 2>&1 &
	EPID=$!; E2E_PIDS+=("$EPID")
	for _ in $(seq 1 300); do etcdctl_ endpoint health >/dev/null 2>&1 && return 0; sleep 0.1; done
	fail "etcd did not start"; tail -5 "$E2E_DIR/etcd.log"; return 1
}
start_etcd || { e2e_done; exit 1; }

secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
m1=$(free_port); m2=$(free_port); a1=$(free_port); a2=$(free_port)
for m in 1 2; do
	port=m$m
	e2e_manager_conf "$E2E_DIR/manager$m.conf" "${!port}" "$secret" "$E2E_DIR/mdata$m" \
		heartbeat_interval_ms=300 "etcd=$ETCD"
	"$TESSERA" manager --config "$E2E_DIR/manager$m.conf" >>"$E2E_DIR/manager$m.log" 2>&1 &
	E2E_PIDS+=("$!")
	[[ $m == 1 ]] && M1PID=$!
done
for a in 1 2; do
	port=a$a
	e2e_agent_conf "$E2E_DIR/agent$a.conf" "$E2E_AGENT_ID-$a" "$m1" "${!port}" "$secret" "$E2E_DIR/agent-data-$a" \
		cpu=1 mem=512MiB "etcd=$ETCD"
	"$TESSERA" agent --config "$E2E_DIR/agent$a.conf" >>"$E2E_DIR/agent$a.log" 2>&1 &
	E2E_PIDS+=("$!")
done
for _ in $(seq 1 100); do [[ -s $E2E_DIR/mdata1/admin.conf && -s $E2E_DIR/mdata2/admin.conf ]] && break; sleep 0.1; done
M1CONF=$E2E_DIR/mdata1/admin.conf M2CONF=$E2E_DIR/mdata2/admin.conf
export TESSERA_CONFIG=$M1CONF
on2() { TESSERA_CONFIG=$M2CONF "$TESSERA" "$@"; }
wait_for() {  # wait_for COMMAND...: until it succeeds (up to ~30 s)
	for _ in $(seq 1 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
nodes_alive() { [ "$("$TESSERA" node ls --json | python3 -c 'import json,sys; print(sum(n["status"]=="ALIVE" for n in json.load(sys.stdin)))')" == 2 ]; }
check "both agents register" wait_for nodes_alive
check "agent 1 watches etcd" wait_for grep -q "watching the cluster settings" "$E2E_DIR/agent1.log"
check "agent 2 watches etcd" wait_for grep -q "watching the cluster settings" "$E2E_DIR/agent2.log"

# ---- a change made with tessera config set ----
check "config set on manager 1" "$TESSERA" config set queue_policy drf
check "etcdctl get --prefix shows it" contains "$(etcdctl_ get --prefix /tessera/config/)" '"drf"'
setting_is() { [ "$(on2 config get "$1")" == "$2" ]; }
check "manager 2 applies it without a restart" wait_for setting_is queue_policy drf
on2 config set selector dispersed >/dev/null
check "and manager 1 what is set through manager 2" wait_for eval '[ "$("$TESSERA" config get selector)" == dispersed ]'

check "config set log_max_size for the agents" "$TESSERA" config set log_max_size 3MiB
"$TESSERA" config set log_max_files 3 >/dev/null
applied() { grep -q "cluster setting $1 applied" "$E2E_DIR/agent$2.log"; }
check "agent 1 applies log_max_size without a restart" wait_for applied log_max_size 1
check "agent 2 applies log_max_size without a restart" wait_for applied log_max_size 2
check "agent 1 applies log_max_files" wait_for applied log_max_files 1
check "agent 2 applies log_max_files" wait_for applied log_max_files 2
# Their new containers have the cluster's log cap: 3 files of 1 MiB.
"$TESSERA" session create "$TEST_IMAGE" --name s1 --cpu 1 --mem 16m >/dev/null
"$TESSERA" session create "$TEST_IMAGE" --name s2 --cpu 1 --mem 16m >/dev/null
check "s1 RUNNING" wait_status s1 RUNNING
check "s2 RUNNING" wait_status s2 RUNNING
check "one session on each agent" [ "$(jget s1 agent)" != "$(jget s2 agent)" ]
for s in s1 s2; do
	cid=$(jget $s container_id)
	cap=$(docker inspect -f '{{index .HostConfig.LogConfig.Config "max-size"}}/{{index .HostConfig.LogConfig.Config "max-file"}}' "$cid")
	check "$s (on $(jget $s agent)) has the cluster's log cap ($cap)" [ "$cap" == "1048576/3" ]
done

# ---- put-json with a bad file ----
rev() { etcdctl_ get --prefix /tessera/config/ -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])'; }
before=$(rev)
printf '{"queue_policy": "fifo", "log_max_files": 1}\n' >"$E2E_DIR/bad.json"
out=$("$TESSERA" config put-json '' "$E2E_DIR/bad.json" 2>&1); rc=$?
check "put-json with a bad file fails (exit $rc): $out" [ $rc -ne 0 ]
check "naming the bad key" contains "$out" log_max_files
check "and writes nothing to etcd" [ "$(rev)" == "$before" ]
check "queue_policy is still drf" [ "$("$TESSERA" config get queue_policy)" == drf ]

# ---- etcd stops and starts ----
kill "$EPID"; wait "$EPID" 2>/dev/null
check "the managers answer while etcd is down" "$TESSERA" config get queue_policy
out=$("$TESSERA" config set queue_policy lifo 2>&1); rc=$?
check "a change is refused while etcd is down (exit $rc): $out" [ $rc -ne 0 ]
start_etcd || { e2e_done; exit 1; }
check "manager 1 resumes its watch" wait_for eval '[ "$(grep -c "watching the cluster settings" "$E2E_DIR/manager1.log")" -ge 2 ]'
check "config set after the restart" "$TESSERA" config set queue_policy lifo
check "manager 2 resumed and applies it" wait_for setting_is queue_policy lifo
"$TESSERA" config set log_max_size null >/dev/null
check "agent 1 resumed and applies a removal" wait_for grep -q "agent.conf's value" "$E2E_DIR/agent1.log"
check "agent 2 resumed and applies a removal" wait_for grep -q "agent.conf's value" "$E2E_DIR/agent2.log"

# ---- backup and restore with etcd ----
check "admin backup takes the settings from etcd" "$TESSERA" admin backup "$E2E_DIR/bk" --config "$E2E_DIR/manager1.conf"
check "config.json has them" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["queue_policy"]=="lifo" and d["selector"]=="dispersed"' "$E2E_DIR/bk/config.json"
"$TESSERA" config set queue_policy fifo >/dev/null
etcdctl_ put /tessera/config/policy.extra@example.com '{"max_sessions": 1}' >/dev/null
kill "$M1PID"; wait "$M1PID" 2>/dev/null
check "admin restore puts them back into etcd" "$TESSERA" admin restore "$E2E_DIR/bk" --config "$E2E_DIR/manager1.conf"
check "etcd holds the backup's queue_policy" contains "$(etcdctl_ get /tessera/config/queue_policy --print-value-only)" lifo
check "and nothing the backup lacks" [ -z "$(etcdctl_ get /tessera/config/policy.extra@example.com)" ]
check "the running manager 2 applies the restore" wait_for setting_is queue_policy lifo
e2e_done
