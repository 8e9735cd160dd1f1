#!/usr/bin/env bash
# The multi-host test (`make test-cluster`, also part of `make test`): a
# cluster as production runs it, on this one machine. A manager, a
# webserver and a wsproxy in the root network namespace; two agents, each
# in a network namespace of its own (the project's own test hosts: `ip
# netns`, a veth pair to a bridge, addresses on a private /24), each with
# its own mock GPU. The agents reach the manager only over that network;
# they drive the host's dockerd through its unix socket, which a network
# namespace does not isolate. Scenario:
#   - both agents register from their own addresses; sessions are placed
#     on both; the seeds' queue scenario across them (three 1-fGPU
#     sessions on two 1-fGPU nodes: two RUNNING, one PENDING that starts
#     by itself when one ends); the webserver lists both agents' sessions
#     and the wsproxy opens an app of a session on an agent's host;
#   - an agent's namespace cut off (its veth down) and restored: its node
#     is LOST and its session with it (still holding its share; its exec
#     answers so), then it registers again and the session is re-adopted
#     RUNNING in the same container;
#   - the manager killed with SIGKILL in the middle of 50 creates and
#     removals, and restarted: every acknowledged create exists, every
#     acknowledged removal is gone, nothing is duplicated, and no container
#     is left without a session;
#   - a multi-node cluster session of two 1-fGPU containers, one on each
#     agent, over an overlay network of Docker's swarm mode (the test puts
#     this Docker in swarm mode when it is not, and leaves it at the end):
#     first refused naming swarm without it, then main1 reaches sub1 by
#     name;
#   - `tessera config set fgpu_per_device 2` applied by both agents without
#     a restart: each node offers 2 fGPU and a 1-fGPU session on each sees
#     half of its GPU's memory; with etcd the setting is there, and an
#     agents' setting (log_max_size) reaches both agents from etcd.
# Run on SQLite (test_cluster) and in production configuration, on
# PostgreSQL with etcd (test_cluster_prod): backends_start below.
# Namespaces, veths, the bridge, daemons and containers are removed by the
# EXIT trap, whatever happens. Needs root (ip netns).
. "$(dirname "$0")/lib.sh"

# ---- The production components: which store, Redis and etcd ----
# SQLite (in the manager's data_dir), heartbeats and logins in the
# manager's memory and settings in its store, unless these say otherwise
# (meson's test_cluster_prod: PostgreSQL and etcd). Each case of
# backends_start starts its component from Debian's binaries on a free
# port, adds its line to manager.conf (MANAGER_EXTRA), webserver.conf
# (WEB_EXTRA) and the agents' confs (AGENT_EXTRA), and registers its stop
# command with backend_on_exit. Components the agents use listen on the
# manager's host address ($MIP): the agents' namespaces reach nothing else.
TESSERA_TEST_STORE=${TESSERA_TEST_STORE:-sqlite}  # sqlite | postgresql
TESSERA_TEST_REDIS=${TESSERA_TEST_REDIS:-none}    # none (process memory) | redis
TESSERA_TEST_ETCD=${TESSERA_TEST_ETCD:-none}      # none (settings in the store) | etcd

if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null; then
	echo "test_cluster: needs root and iproute2 (ip netns)"
	exit 77
fi

# With TESSERA_TEST_STORE=postgresql, e2e_setup (lib.sh) starts the
# throwaway PostgreSQL cluster (tests/pg/pgcluster.sh), or takes the one
# TESSERA_TEST_PG names, and e2e_teardown stops it.
e2e_setup
e2e_build_glibc_image
secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')

MANAGER_EXTRA=()
WEB_EXTRA=()
AGENT_EXTRA=()
BACKEND_STOPS=()
ETCD_URL=
backend_on_exit() { BACKEND_STOPS+=("$*"); }
etcdctl_() { ETCDCTL_API=3 etcdctl --endpoints "$ETCD_URL" "$@"; }
backends_start() {
	case $TESSERA_TEST_STORE in
	sqlite) ;;  # DATA_DIR/tessera.db, the manager's default
	postgresql)
		# A database of its own in the test cluster, named in
		# manager.conf as production does (lib.sh's wrapper then adds
		# nothing). The manager reaches it on 127.0.0.1 of its host.
		local pgdb=tessera_cluster_$SUF
		"${PGBIN:-/usr/lib/postgresql/15/bin}/psql" -qAtX -d "$TESSERA_TEST_PG/postgres" \
			-c "CREATE DATABASE $pgdb" >/dev/null || { fail "cannot create database $pgdb in $TESSERA_TEST_PG"; return 1; }
		backend_on_exit "'${PGBIN:-/usr/lib/postgresql/15/bin}/psql' -qAtX -d '$TESSERA_TEST_PG/postgres' -c 'DROP DATABASE IF EXISTS $pgdb WITH (FORCE)'"
		MANAGER_EXTRA+=("store = $TESSERA_TEST_PG/$pgdb")
		;;
	*) fail "TESSERA_TEST_STORE=$TESSERA_TEST_STORE: sqlite or postgresql"; return 1 ;;
	esac
	case $TESSERA_TEST_REDIS in
	none) ;;
	redis)  # Debian's redis-server on a free port, nothing saved; heartbeats, logins, limits, usage history
		command -v redis-server >/dev/null || { fail "TESSERA_TEST_REDIS=redis: redis-server is not installed"; return 1; }
		local rport rpid
		rport=$(free_port)
		mkdir -p "$E2E_DIR/redis"
		redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$E2E_DIR/redis" \
			--daemonize no >>"$E2E_DIR/redis.log" 2>&1 &
		rpid=$!
		backend_on_exit "kill $rpid; wait $rpid"
		for _ in $(seq 1 600); do redis-cli -p "$rport" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
		redis-cli -p "$rport" ping 2>/dev/null | grep -q PONG || { fail "redis-server did not start (redis.log)"; return 1; }
		MANAGER_EXTRA+=("redis = redis://127.0.0.1:$rport/0")
		WEB_EXTRA+=("redis = redis://127.0.0.1:$rport/0")
		;;
	*) fail "TESSERA_TEST_REDIS=$TESSERA_TEST_REDIS: this tree has none and redis"; return 1 ;;
	esac
	case $TESSERA_TEST_ETCD in
	none) ;;
	etcd)
		# One member in $E2E_DIR on free ports of the manager's host
		# address, where the agents' namespaces reach it.
		local cport pport
		cport=$(free_port "$MIP"); pport=$(free_port "$MIP")
		ETCD_URL=http://$MIP:$cport
		etcd --name cluster --data-dir "$E2E_DIR/etcd" --listen-client-urls "$ETCD_URL" \
			--advertise-client-urls "$ETCD_URL" --listen-peer-urls "http://$MIP:$pport" \
			--initial-advertise-peer-urls "http://$MIP:$pport" --initial-cluster "cluster=http://$MIP:$pport" \
			>>"$E2E_DIR/etcd.log" 2>&1 &
		local epid=$!
		backend_on_exit "kill $epid; wait $epid"
		local up=0
		for _ in $(seq 1 300); do etcdctl_ endpoint health >/dev/null 2>&1 && { up=1; break; }; sleep 0.1; done
		((up)) || { fail "etcd did not start"; tail -5 "$E2E_DIR/etcd.log"; return 1; }
		MANAGER_EXTRA+=("etcd = $ETCD_URL")
		AGENT_EXTRA+=("etcd = $ETCD_URL")
		;;
	*) fail "TESSERA_TEST_ETCD=$TESSERA_TEST_ETCD: none or etcd"; return 1 ;;
	esac
	e2e_log "store $TESSERA_TEST_STORE, redis $TESSERA_TEST_REDIS, etcd $TESSERA_TEST_ETCD"
}

# ---- The test hosts' network ----
# Names carry a random suffix (interface names are at most 15 characters)
# so that a run never touches another's; the /24 is one no interface has.
SUF=$(head -c 3 /dev/urandom | od -An -tx1 | tr -d ' \n')
BR=tsbr$SUF
NS_A=tessera-$SUF-a NS_B=tessera-$SUF-b
VETH_A=tsv${SUF}a VETH_B=tsv${SUF}b
NET=""
for _ in $(seq 1 50); do
	n=$((RANDOM % 200 + 20))
	if ! ip -4 addr | grep -q " 10\.231\.$n\." && ! ip -4 route | grep -q "^10\.231\.$n\."; then
		NET=10.231.$n
		break
	fi
done
APPS_IP=127.0.0.2           # the app proxy's own address (the browser is on this host)
MIP=$NET.1                  # the manager's host (root namespace, on the bridge)
AIP_A=$NET.2 AIP_B=$NET.3   # the agents' hosts
# Where dockerd publishes each agent's session app ports. Docker runs in
# the root namespace, so a port it publishes is there, not in the agent's
# namespace: each agent gets an address of its own on the bridge for them
# (app_host), as a real node publishes on its own address.
APP_A=$NET.12 APP_B=$NET.13

net_teardown() {
	ip netns del "$NS_A" 2>/dev/null
	ip netns del "$NS_B" 2>/dev/null
	# Deleting a namespace deletes its veth end and so the pair.
	ip link del "$VETH_A" 2>/dev/null
	ip link del "$VETH_B" 2>/dev/null
	ip link del "$BR" 2>/dev/null
	return 0
}
cluster_teardown() {
	local rc=$? p s
	# The daemons first (e2e_teardown would too), then their backends,
	# then the rest: containers, the PostgreSQL cluster, the logs.
	for p in "${E2E_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${E2E_PIDS[@]}"; do wait "$p" 2>/dev/null; done
	for s in "${BACKEND_STOPS[@]}"; do eval "$s" >/dev/null 2>&1; done
	e2e_teardown
	net_teardown
	exit $rc
}
trap cluster_teardown EXIT

host_up() {  # host_up NS VETH IP
	ip netns add "$1" &&
		ip link add "$2" type veth peer name eth0 netns "$1" &&
		ip link set "$2" master "$BR" up &&
		ip -n "$1" addr add "$3/24" dev eth0 &&
		ip -n "$1" link set eth0 up &&
		ip -n "$1" link set lo up
}
net_up() {
	[[ -n $NET ]] || { echo "no free 10.231.X.0/24"; return 1; }
	ip link add "$BR" type bridge &&
		ip addr add "$MIP/24" dev "$BR" &&
		ip addr add "$APP_A/24" dev "$BR" &&
		ip addr add "$APP_B/24" dev "$BR" &&
		ip link set "$BR" up &&
		host_up "$NS_A" "$VETH_A" "$AIP_A" &&
		host_up "$NS_B" "$VETH_B" "$AIP_B"
}
check "the test hosts' network is up ($NET.0/24, $NS_A, $NS_B)" net_up || exit 1
backends_start || exit 1

A1=$E2E_AGENT_ID-a
A2=$E2E_AGENT_ID-b
# Teardown removes both agents' containers and their users' networks.
e2e_cleanup_containers() {
	local a ids nets
	for a in "$A1" "$A2"; do
		ids=$(docker ps -aq --filter "label=tessera.agent=$a")
		[[ -z $ids ]] && continue
		nets=$(docker inspect -f '{{.HostConfig.NetworkMode}}' $ids 2>/dev/null | grep '^tessera-u-' | sort -u)
		docker rm -f $ids >/dev/null 2>&1
		[[ -n $nets ]] && docker network rm $nets >/dev/null 2>&1
	done
	return 0
}

# ---- The daemons ----
mport=$(free_port "$MIP")
wport=$(free_port "$MIP")
app_range=$(e2e_free_port_range 4) || exit 1
{
	echo "listen = $MIP:$mport"
	echo "data_dir = $E2E_DIR/mdata"
	echo "cluster_secret = $secret"
	echo "heartbeat_interval_ms = 300"
	echo "lost_after_heartbeats = 3"
	# Apps on an address of their own, never the web UI's (docs/security.md).
	echo "wsproxy_url = http://$APPS_IP"
	echo "wsproxy_port_range = $app_range"
	for l in "${MANAGER_EXTRA[@]}"; do echo "$l"; done
} >"$E2E_DIR/manager.conf"
start_manager() {
	"$TESSERA" manager --config "$E2E_DIR/manager.conf" >>"$E2E_DIR/manager.log" 2>&1 &
	MPID=$!
	E2E_PIDS+=("$MPID")
}
start_manager
for _ in $(seq 1 600); do [[ -s $E2E_DIR/mdata/admin.conf ]] && break; sleep 0.1; done
export TESSERA_CONFIG=$E2E_DIR/mdata/admin.conf

{
	echo "listen = $MIP:$wport"
	echo "manager = http://$MIP:$mport"
	echo "web_secret = $secret"
	for l in "${WEB_EXTRA[@]}"; do echo "$l"; done
} >"$E2E_DIR/webserver.conf"
"$TESSERA" webserver --config "$E2E_DIR/webserver.conf" >>"$E2E_DIR/webserver.log" 2>&1 &
E2E_PIDS+=("$!")
printf '%s\n' "manager = http://$MIP:$mport" "cluster_secret = $secret" "port_range = $app_range" "bind = $APPS_IP" \
	>"$E2E_DIR/wsproxy.conf"
"$TESSERA" wsproxy --config "$E2E_DIR/wsproxy.conf" >>"$E2E_DIR/wsproxy.log" 2>&1 &
E2E_PIDS+=("$!")

# Each agent in its namespace, on the port agents use by default: every
# test host has its own ports. `ip netns exec` execs the command, so the
# pid is the agent's.
declare -A APID
start_agent() {  # start_agent ID NS IP APP_IP
	cat >"$E2E_DIR/$1.conf" <<CONF
id = $1
manager = http://$MIP:$mport
cluster_secret = $secret
listen = $3:8091
advertise_url = http://$3:8091
app_host = $4
data_dir = $E2E_DIR/$1
mock_gpus = 1x8GiB
cpu = 4
mem = 4GiB
CONF
	for l in "${AGENT_EXTRA[@]}"; do echo "$l"; done >>"$E2E_DIR/$1.conf"
	ip netns exec "$2" "$TESSERA" agent --config "$E2E_DIR/$1.conf" >>"$E2E_DIR/$1.log" 2>&1 &
	APID[$1]=$!
	E2E_PIDS+=("$!")
}
start_agent "$A1" "$NS_A" "$AIP_A" "$APP_A"
start_agent "$A2" "$NS_B" "$AIP_B" "$APP_B"

node_field() {  # node_field ID FIELD (dotted)
	"$TESSERA" node ls --json 2>/dev/null | python3 -c '
import json, sys
n = [x for x in json.load(sys.stdin) if x["id"] == sys.argv[1]]
v = n[0] if n else {}
for k in sys.argv[2].split("."):
    v = v.get(k, "") if isinstance(v, dict) else ""
print(v)' "$1" "$2"
}
wait_node() {  # wait_node ID STATUS
	for _ in $(seq 1 300); do [[ $(node_field "$1" status) == "$2" ]] && return 0; sleep 0.1; done
	e2e_log "node $1 is '$(node_field "$1" status)', expected $2"
	return 1
}
check "agent $A1 registers from its namespace and is ALIVE" wait_node "$A1" ALIVE
check "agent $A2 registers from its namespace and is ALIVE" wait_node "$A2" ALIVE
check "$A1 runs in $NS_A" [ "$(ip netns identify "${APID[$A1]}")" == "$NS_A" ]
check "$A2 runs in $NS_B" [ "$(ip netns identify "${APID[$A2]}")" == "$NS_B" ]
check "the manager reaches $A1 at its host's address" [ "$(node_field "$A1" url)" == "http://$AIP_A:8091" ]
check "the manager reaches $A2 at its host's address" [ "$(node_field "$A2" url)" == "http://$AIP_B:8091" ]
check "each node offers its one mock GPU as 1 fGPU" \
	[ "$(node_field "$A1" capacity.fgpu)/$(node_field "$A2" capacity.fgpu)" == "1/1" ]
# The agent's RPC port is on its host only: the root namespace has no such address.
check "the agents' RPC servers are not on the manager's host" not curl -s -o /dev/null --max-time 2 "http://$MIP:8091/"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$MIP:$wport/")
check "the webserver serves the UI ($code)" [ "$code" == 200 ]
for _ in $(seq 1 600); do grep -q 'serving apps' "$E2E_DIR/wsproxy.log" && break; sleep 0.1; done
check "the wsproxy serves its ports" grep -q "serving apps on 4 ports of $app_range" "$E2E_DIR/wsproxy.log"

# ---- Placement on both agents and the seeds' queue scenario ----
"$TESSERA" session create "$GPU_TEST_IMAGE" --name q --count 3 --fgpu 1 --cpu 0.1 --mem 32m >/dev/null
check "q-1 RUNNING" wait_status q-1 RUNNING
check "q-2 RUNNING" wait_status q-2 RUNNING
check "q-3 PENDING: no GPU free on either agent" wait_status q-3 PENDING
n1=$(jget q-1 agent); n2=$(jget q-2 agent)
check "the two running sessions are on both agents ($n1, $n2)" [ "$(printf '%s\n' "$n1" "$n2" | sort | tr '\n' ' ')" == "$A1 $A2 " ]
app_ip() { [[ $1 == "$A1" ]] && echo "$APP_A" || echo "$APP_B"; }
for s in q-1 q-2; do
	cid=$(jget "$s" container_id)
	label=$(docker inspect -f '{{index .Config.Labels "tessera.agent"}}' "$cid")
	check "$s's container is labelled with its agent ($label)" [ "$label" == "$(jget "$s" agent)" ]
	host=$(docker inspect -f '{{with index .NetworkSettings.Ports "7611/tcp"}}{{(index . 0).HostIp}}{{end}}' "$cid")
	check "$s's app port is published on its agent's app address ($host)" [ "$host" == "$(app_ip "$(jget "$s" agent)")" ]
done
out=$("$TESSERA" session exec q-1 -- echo through-the-namespace)
check "exec reaches a session through its agent's namespace ($out)" [ "$out" == through-the-namespace ]
# An app of a session on an agent's host, through the wsproxy: a web
# server in q-1 on port 8000, opened with a one-time link; the proxy
# reaches the session's runner where dockerd published it for that agent.
"$TESSERA" session exec q-1 -- sh -c 'mkdir -p /tmp/www && echo "app of $(hostname)" >/tmp/www/index.html && httpd -p 8000 -h /tmp/www' >/dev/null
url=$("$TESSERA" session app q-1 --port 8000 2>&1)
page=$(curl -sL --max-time 20 -c "$E2E_DIR/appjar" -b "$E2E_DIR/appjar" "$url")
check "an app of a session in an agent's namespace opens through the wsproxy ($url: $page)" contains "$page" "app of "
# The web UI's view: a login through the webserver, and the sessions of
# both agents in its list.
password=$(sed -n 's/^password *= *//p' "$TESSERA_CONFIG")
curl -s -c "$E2E_DIR/jar" -H 'Content-Type: application/json' \
	-d "{\"email\":\"admin@tessera.local\",\"password\":\"$password\"}" "http://$MIP:$wport/auth/login" >/dev/null
web_nodes=$(curl -s -b "$E2E_DIR/jar" "http://$MIP:$wport/api/v1/sessions" | python3 -c '
import json, sys
d = json.load(sys.stdin)
d = d.get("sessions", d) if isinstance(d, dict) else d
print(" ".join(sorted({s.get("agent") or "-" for s in d if s["name"] in ("q-1", "q-2")})))')
check "the webserver lists the sessions of both agents ($web_nodes)" [ "$web_nodes" == "$(printf '%s\n' "$A1" "$A2" | sort | tr '\n' ' ' | sed 's/ $//')" ]
"$TESSERA" session rm q-2 >/dev/null
check "q-3 starts by itself once q-2 is gone" wait_status q-3 RUNNING
check "q-3 runs where q-2 was ($n2)" [ "$(jget q-3 agent)" == "$n2" ]

# ---- An agent's host cut off, then back ----
# q-1 on n1: its host's link goes down. The agent keeps running and keeps
# its containers; the manager hears nothing from it.
cut=$n1
cut_veth=$([[ $cut == "$A1" ]] && echo "$VETH_A" || echo "$VETH_B")
cid_before=$(jget q-1 container_id)
ip link set "$cut_veth" down
check "the cut-off node $cut becomes LOST" wait_node "$cut" LOST
check "the other node stays ALIVE" [ "$(node_field "$([[ $cut == "$A1" ]] && echo "$A2" || echo "$A1")" status)" == ALIVE ]
check "its session q-1 is LOST" wait_status q-1 LOST
info=$(jget q-1 status_info)
check "q-1 says why ($info)" contains "$info" "node $cut lost: no heartbeat for"
check "session ls lists it LOST" has_line "$("$TESSERA" session ls --json | python3 -c '
import json, sys
for s in json.load(sys.stdin): print(s["name"], s["status"])')" "q-1 LOST"
used=$(node_field "$cut" used.fgpu)
check "it keeps its share of the node ($used fGPU; docs/architecture.md)" [ "${used%.0}" == 1 ]
out=$("$TESSERA" session exec q-1 -- true 2>&1)
check "its exec says it is LOST ($out)" contains "$out" "is LOST"
check "the agent itself kept running" kill -0 "${APID[$cut]}"
ip link set "$cut_veth" up
check "restored: $cut registers again and is ALIVE" wait_node "$cut" ALIVE
check "q-1 is re-adopted RUNNING" wait_status q-1 RUNNING
check "in the same container" [ "$(jget q-1 container_id)" == "$cid_before" ]
hist=$("$TESSERA" session info q-1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["status_history"][-1]["info"])')
check "its history says it was re-adopted ($hist)" contains "$hist" "re-adopted"
check "the manager logged the agent's return" grep -q "agent $cut" "$E2E_DIR/manager.log"
out=$("$TESSERA" session exec q-1 -- echo back)
check "exec works again ($out)" [ "$out" == back ]
"$TESSERA" session rm q-1 q-3 >/dev/null
check "q-1 ended" wait_status q-1 TERMINATED
check "q-3 ended" wait_status q-3 TERMINATED

# ---- SIGKILL in the middle of 50 creates and removals ----
# Two clients, each 17 creates and 8 removals interleaved (50 in all).
# An operation the manager accepted is acknowledged (written to $ACKS).
# One that could not reach it (killed, not yet back) or that it answered
# with 503 (restarted, no agent registered again yet) is tried again until
# answered, as a client would; a create whose earlier try was committed
# just before the kill is then refused as a name in use, which
# acknowledges it too ($ACKS.retried). Any other refusal is written to
# $ACKS.refused. The manager is killed once 15 operations are acknowledged
# and restarted at once, while the clients go on.
ACKS=$E2E_DIR/acks
: >"$ACKS"
churn_op() {  # churn_op WORKER create|rm NAME
	local out rc
	for _ in $(seq 1 300); do
		out=$(if [[ $2 == create ]]; then
			"$TESSERA" session create "$TEST_IMAGE" --name "$3" --cpu 0.05 --mem 16m
		else
			"$TESSERA" session rm "$3"
		fi 2>&1)
		rc=$?
		echo "$2 $3 rc=$rc $out" >>"$E2E_DIR/churn-$1.log"
		if ((rc == 0)); then
			echo "$2 $3" >>"$ACKS"
			return 0
		fi
		if [[ $out == *"cannot reach"* || $out == *"no node is alive"* ]]; then
			echo "$2 $3" >>"$ACKS.tried"
			sleep 0.05
			continue
		fi
		if [[ $2 == create && $out == *"already have an active session named"* ]]; then
			echo "$2 $3" >>"$ACKS.retried"
		else
			echo "$2 $3: $out" >>"$ACKS.refused"
		fi
		return 0
	done
	echo "$2 $3: never answered" >>"$ACKS.refused"
	return 1
}
churn() {  # churn WORKER
	local w=$1 i
	for i in $(seq 1 17); do
		churn_op "$w" create "c$w-$i"
		if ((i % 2 == 0)); then
			churn_op "$w" rm "c$w-$((i - 1))"
		fi
	done
}
churn 1 &
W1=$!
churn 2 &
W2=$!
E2E_PIDS+=("$W1" "$W2")
for _ in $(seq 1 600); do (($(wc -l <"$ACKS") >= 15)) && break; sleep 0.05; done
kill -KILL "$MPID"
wait "$MPID" 2>/dev/null
acked_at_kill=$(wc -l <"$ACKS")
# Restarted once a client has met the dead manager (a fast restart could
# otherwise come before any client's next call).
for _ in $(seq 1 200); do [[ -s $ACKS.tried ]] && break; sleep 0.05; done
start_manager
wait "$W1" "$W2"
answered=$(cat "$ACKS" "$ACKS.retried" "$ACKS.refused" 2>/dev/null | wc -l)
check "50 operations were answered ($answered), $acked_at_kill before the kill" [ "$answered" -eq 50 ]
check "some were answered after the restart" [ "$(wc -l <"$ACKS")" -gt "$acked_at_kill" ]
check "some could not reach the killed manager and were tried again" [ -s "$ACKS.tried" ]
check "none was refused ($(cat "$ACKS.refused" 2>/dev/null | tr '\n' ';'))" [ ! -s "$ACKS.refused" ]
both_alive() { wait_node "$A1" ALIVE && wait_node "$A2" ALIVE; }
check "the restarted manager sees both agents again" both_alive

# Settled: nothing on its way (PENDING, SCHEDULED, PREPARING, TERMINATING).
sessions_json() { "$TESSERA" session ls --all --json; }
settled() {
	sessions_json | python3 -c '
import json, sys
busy = [s["name"] for s in json.load(sys.stdin) if s["name"].startswith("c")
        and s["status"] in ("PENDING", "SCHEDULED", "PREPARING", "TERMINATING")]
sys.exit(1 if busy else 0)'
}
for _ in $(seq 1 600); do settled && break; sleep 0.1; done
check "every churned session has settled" settled
sessions_json >"$E2E_DIR/sessions.json"
docker ps -a --filter "label=tessera.agent=$A1" --filter label=tessera.session --format '{{.ID}} {{.Label "tessera.session"}} {{.State}}' >"$E2E_DIR/containers.txt"
docker ps -a --filter "label=tessera.agent=$A2" --filter label=tessera.session --format '{{.ID}} {{.Label "tessera.session"}} {{.State}}' >>"$E2E_DIR/containers.txt"
python3 - "$ACKS" "$ACKS.retried" "$E2E_DIR/sessions.json" "$E2E_DIR/containers.txt" <<'PY' >"$E2E_DIR/churn.out"
import json, os, sys
acks, retried_path, sessions_path, containers_path = sys.argv[1:5]
def ops(path):
    if not os.path.exists(path):
        return set()
    return {tuple(l.split()) for l in open(path) if l.strip()}
# Every operation was answered: acknowledged, or answered on a retry.
acked = ops(acks) | ops(retried_path)
sessions = [s for s in json.load(open(sessions_path)) if s["name"].startswith("c")]
by_name = {}
for s in sessions:
    by_name.setdefault(s["name"], []).append(s)
containers = [l.split() for l in open(containers_path) if l.strip()]
def say(good, what):
    print(("ok   " if good else "FAIL ") + what)

created = {n for op, n in acked if op == "create"}
removed = {n for op, n in acked if op == "rm"}
missing = sorted(n for n in created if n not in by_name)
say(not missing, "every acknowledged create exists (%d; missing %s)" % (len(created), missing))
# TERMINATED, or CANCELLED when it was removed while still waiting (a
# create accepted while the restarted manager had no node alive yet).
still = sorted(n for n in removed if any(s["status"] not in ("TERMINATED", "CANCELLED") for s in by_name.get(n, [])))
say(not still, "every acknowledged removal is TERMINATED or CANCELLED (%d; not: %s)" % (len(removed), still))
not_running = sorted(n for n in created - removed
                     if [s["status"] for s in by_name.get(n, [])] != ["RUNNING"])
say(not not_running, "every acknowledged create not removed is RUNNING (not: %s)" % not_running)
dups = sorted(n for n, l in by_name.items() if len(l) > 1)
say(not dups, "no session is duplicated (%s)" % dups)
errors = sorted(s["name"] for s in sessions if s["status"] == "ERROR")
say(not errors, "no session ended in ERROR (%s)" % errors)
live = {s["id"]: s for s in sessions if s["status"] == "RUNNING"}
ids = [c[1] for c in containers]
orphans = sorted(c[1] for c in containers if c[1] not in live)
say(not orphans, "no container is left without a RUNNING session (%d containers; orphans %s)" % (len(containers), orphans))
twice = sorted({i for i in ids if ids.count(i) > 1})
say(not twice, "no session has two containers (%s)" % twice)
absent = sorted(s["name"] for i, s in live.items() if i not in ids)
say(not absent, "every RUNNING session has its container (%s)" % absent)
stopped = sorted(c[1] for c in containers if c[2] != "running")
say(not stopped, "every container runs (%s)" % stopped)
removed_ids = {s["id"] for n in removed for s in by_name.get(n, [])}
gone = sorted(i for i in ids if i in removed_ids)
say(not gone, "no acknowledged removal left a container (%s)" % gone)
PY
while read -r verdict what; do
	if [[ $verdict == ok ]]; then ok "$what"; else fail "$what"; fi
done <"$E2E_DIR/churn.out"
check "the churn's checks ran" [ "$(wc -l <"$E2E_DIR/churn.out")" -eq 10 ]
live=$(python3 -c 'import json,sys; print(" ".join(s["name"] for s in json.load(open(sys.argv[1])) if s["name"].startswith("c") and s["status"] == "RUNNING"))' "$E2E_DIR/sessions.json")
[[ -n $live ]] && "$TESSERA" session rm $live >/dev/null

# ---- A multi-node cluster session across both agents ----
# Each node has its one GPU as 1 fGPU here (before fgpu_per_device 2
# below): a 2-container session whose containers each need 1 fGPU can
# only start with one container on each agent. Its network is an overlay
# of Docker's swarm mode (docs/admin.md, "Cluster sessions"). What one
# shared Docker leaves unproven: both agents drive the same dockerd, so
# the overlay here spans a single engine and no VXLAN packet leaves this
# host; a real overlay between two hosts' engines (the other host
# joined to the swarm, VXLAN on 4789/udp, gossip on 7946, firewalls
# between them) is not exercised, nor an agent making the network on one
# engine and the other attaching to it from another.
mn_create() {  # mn_create NAME [ARGS...]: a multi-node session of 2 containers, 1 fGPU each
	local name=$1; shift
	"$TESSERA" session create "$GPU_TEST_IMAGE" --name "$name" --cluster-size 2 --cluster-mode multi-node \
		--fgpu 1 --cpu 0.1 --mem 32m "$@" 2>&1
}
ended() {  # ended NAME: it has ended (any final status); prints it
	local s
	for _ in $(seq 1 300); do
		s=$(jget "$1" status 2>/dev/null)
		case $s in ERROR | TERMINATED | CANCELLED) echo "$s"; return 0 ;; "") break ;; esac
		sleep 0.1
	done
	echo "$s"
	return 1
}
swarm=$(docker info --format '{{.Swarm.LocalNodeState}}' 2>/dev/null)
if [[ $swarm == inactive ]]; then
	# Without swarm mode first: the start fails, saying what is missing.
	out=$(mn_create mn0)
	e2e_log "session create mn0: $(tr '\n' '|' <<<"$out")"
	st=$(ended mn0)
	info=$(jget mn0 status_info)
	check "without swarm mode a multi-node session fails ($st: $info)" [ "$st" == ERROR ]
	check "  naming swarm and docs/admin.md" eval 'contains "$info" swarm && contains "$info" docs/admin.md'
	"$TESSERA" session rm mn0 >/dev/null 2>&1
	# This one Docker in swarm mode for the rest, left again at the end
	# (before the EXIT trap's own teardown, which it runs).
	# Swarm mode makes the bridge docker_gwbridge, which leaving it
	# keeps: removed too when this test made it.
	gwbridge_before=$(docker network ls -q --filter name=^docker_gwbridge$)
	if docker swarm init --advertise-addr 127.0.0.1 >>"$E2E_DIR/swarm.log" 2>&1; then
		trap 'rc=$?; docker swarm leave --force >>"$E2E_DIR/swarm.log" 2>&1
			[[ -z $gwbridge_before ]] && docker network rm docker_gwbridge >>"$E2E_DIR/swarm.log" 2>&1
			(exit $rc); cluster_teardown' EXIT
		swarm=active
	fi
else
	e2e_log "Docker's swarm mode is '$swarm' already: the check of a start without it is skipped"
fi
check "Docker is in swarm mode ($swarm)" [ "$swarm" == active ]
# sub1 listens on 5000 (over and over, what it gets appended to a file);
# main1 then sends it a line by name. The listener's stdin is a pipe that
# stays open: at the end of its stdin (the startup command's /dev/null)
# busybox nc may close the connection before reading what came.
out=$(mn_create mn --startup-command \
	'if [ "$TESSERA_CLUSTER_ROLE" = sub ]; then while true; do sleep 600 | busybox nc -l -p 5000 >>/tmp/got; done; fi')
e2e_log "session create mn: $(tr '\n' '|' <<<"$out")"
check "a multi-node session of 2 x 1 fGPU starts" wait_status mn RUNNING
mn_agents=$("$TESSERA" session info mn --json | python3 -c '
import json, sys
print(" ".join(sorted(c.get("agent") or "-" for c in json.load(sys.stdin).get("containers") or [])))')
check "its containers are on both agents ($mn_agents)" [ "$mn_agents" == "$(printf '%s\n' "$A1" "$A2" | sort | tr '\n' ' ' | sed 's/ $//')" ]
mn_cid=$(jget mn id)
mn_net=$(docker network ls --format '{{.Name}} {{.Driver}}' --filter "name=tessera-c-${mn_cid:0:16}")
check "on an overlay network of its own ($mn_net)" [ "${mn_net##* }" == overlay ]
out=$("$TESSERA" session exec mn --timeout 60 -- sh -c \
	'i=0; while [ $i -lt 30 ]; do echo "hi from $(cat /etc/hostname)" | busybox nc -w 2 sub1 5000 && exit 0; i=$((i + 1)); sleep 1; done; exit 1' 2>&1)
rc=$?
check "main1 reaches sub1 by name over it (exit $rc${out:+: $out})" [ $rc -eq 0 ]
got=
for _ in $(seq 1 50); do
	got=$("$TESSERA" session exec mn --container sub1 -- cat /tmp/got 2>/dev/null)
	[[ -n $got ]] && break
	sleep 0.2
done
check "sub1 got main1's line ($got)" [ "$got" == "hi from main1" ]
"$TESSERA" session rm mn >/dev/null
check "mn ends" wait_status mn TERMINATED
mn_net_gone() {
	for _ in $(seq 1 300); do [[ -z $(docker network ls -q --filter "name=tessera-c-${mn_cid:0:16}") ]] && return 0; sleep 0.1; done
	return 1
}
check "  and its overlay network goes with it" mn_net_gone

# ---- A setting changed at run time, applied by both agents ----
out=$("$TESSERA" config set fgpu_per_device 2 2>&1)
check "tessera config set fgpu_per_device 2 ($out)" [ $? -eq 0 ]
if [[ -n $ETCD_URL ]]; then
	check "the setting is in etcd" contains "$(etcdctl_ get /tessera/config/fgpu_per_device)" 2
fi
fgpu_both() { [[ "$(node_field "$A1" capacity.fgpu)/$(node_field "$A2" capacity.fgpu)" == "2/2" ]]; }
for _ in $(seq 1 600); do fgpu_both && break; sleep 0.1; done
check "both nodes now offer 2 fGPU on their one GPU" fgpu_both
"$TESSERA" session create "$GPU_TEST_IMAGE" --name g --count 4 --fgpu 1 --cpu 0.1 --mem 32m >/dev/null
declare -A per_agent=()
for i in 1 2 3 4; do
	check "g-$i RUNNING" wait_status "g-$i" RUNNING
	a=$(jget "g-$i" agent)
	per_agent[$a]=$((${per_agent[$a]:-0} + 1))
	total=$("$TESSERA" session exec "g-$i" -- gpu-info --json |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["memory_total"])')
	check "g-$i on $a sees half of the 8 GiB GPU ($total)" [ "$total" == "$((4 << 30))" ]
done
check "four 1-fGPU sessions fit, two on each agent" [ "${per_agent[$A1]:-0}/${per_agent[$A2]:-0}" == "2/2" ]
if [[ -n $ETCD_URL ]]; then
	# The agents' own settings come from etcd itself (agent.conf's etcd),
	# not through the manager.
	check "$A1 watches the cluster settings in etcd" grep -q "watching the cluster settings" "$E2E_DIR/$A1.log"
	check "$A2 watches the cluster settings in etcd" grep -q "watching the cluster settings" "$E2E_DIR/$A2.log"
	out=$("$TESSERA" config set log_max_size 3MiB 2>&1)
	check "tessera config set log_max_size 3MiB ($out)" [ $? -eq 0 ]
	applied_both() { grep -q "cluster setting log_max_size applied" "$E2E_DIR/$A1.log" &&
		grep -q "cluster setting log_max_size applied" "$E2E_DIR/$A2.log"; }
	for _ in $(seq 1 600); do applied_both && break; sleep 0.1; done
	check "both agents apply it from etcd without a restart" applied_both
fi
started_once() { kill -0 "${APID[$1]}" && [ "$(grep -c 'serving RPC' "$E2E_DIR/$1.log")" -eq 1 ]; }
check "neither agent was restarted" eval 'started_once "$A1" && started_once "$A2"'
"$TESSERA" session rm g-1 g-2 g-3 g-4 >/dev/null
for i in 1 2 3 4; do check "g-$i ended" wait_status "g-$i" TERMINATED; done
e2e_done
