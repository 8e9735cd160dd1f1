#!/usr/bin/env bash
# Cluster sessions (issue 33; docs/user-guide.md, "Distributed training")
# on one server with a mock GPU, through the CLI and the API:
# - a 2-container session of tessera/python:3.11 RUNNING, listed once with
#   its containers main1 and sub1, each with its node and status;
# - each container under its host name, the others found by name, the
#   TESSERA_CLUSTER_* and torch.distributed variables in each;
# - an MPI-style round over the session's SSH: main1 asks every host of
#   $TESSERA_CLUSTER_HOSTS for its $RANK and sums them; sub1 reaches main1;
# - exec and logs of sub1 (--container sub1, NAME/sub1), a bad container
#   refused by name;
# - the cluster's network reached by nothing else: neither another user's
#   session nor a second one of the same user reaches main1 or resolves
#   sub1;
# - commit refused; the API's validation of cluster_size, cluster_mode and
#   preemptible; a single-node session no node could hold refused;
# - sub1's container killed under the session: ERROR naming sub1; removal
#   leaves no container and no tessera-c-* network;
# - a 3-container gang on a node with room for 2 waits PENDING whole (no
#   container made) with its reason, starts whole once room frees, and
#   keeps its containers over a restart of the server.
. "$(dirname "$0")/lib.sh"
PY=tessera/python:3.11
if ! docker image inspect "$PY" >/dev/null 2>&1; then
	echo "$PY is not built; run 'meson test -C build test_images' (it builds it from images/python/3.11.recipe)"
	exit 1
fi
e2e_setup
# 4 GiB of memory: the gang below is sized against it (CPUs are not:
# Docker refuses a container more than the machine has).
SERVER_ARGS=(--cpu 8 --mem 4GiB --mock-gpus 1x8GiB --fgpu-per-device 2)
start_server "${SERVER_ARGS[@]}" || { e2e_done; exit 1; }
ADMIN_CONF=$TESSERA_CONFIG
T() { "$TESSERA" "$@"; }
flat() { tr '\n' '|' <<<"$1" | tail -c 600; }

# cx NAME CONTAINER FIELD: a field of one container of a cluster session
# (its "containers" list in session info --json).
cx() {
	T session info "$1" --json | python3 -c '
import json, sys
for c in json.load(sys.stdin).get("containers") or []:
    if c.get("name") == sys.argv[1]:
        v = c.get(sys.argv[2])
        print("" if v is None else v)' "$2" "$3"
}
# The record ids of a cluster session's containers (main1's is the
# session's), one a line; the agent labels each Docker container with its
# record's id.
member_ids() {
	T session info "$1" --json | python3 -c '
import json, sys
for c in json.load(sys.stdin).get("containers") or []:
    print(c["id"])'
}
containers_of() {  # containers_of ID...: their Docker containers, one a line
	local id
	for id in "$@"; do docker ps -aq --filter "label=tessera.session=$id"; done
}
cluster_nets() { docker network ls --format '{{.Name}}' --filter "name=tessera-c-$1"; }

# ---- a 2-container session ----
out=$(T session create "$PY" --name c --cluster-size 2 --cpu 1 --mem 512m --fgpu 0.5 \
	--startup-command 'echo "started on $(hostname)"' --wait --timeout 300 2>&1)
if wait_status c RUNNING; then ok "a 2-container session of $PY starts"; else
	fail "a 2-container session of $PY starts ($(flat "$out"))"
	e2e_done
	exit 1
fi
C_ID=$(jget c id)
C_MEMBERS=$(member_ids c)
check "it has 2 container records, main1's the session's id" \
	[ "$(wc -l <<<"$C_MEMBERS")/$(head -1 <<<"$C_MEMBERS")" == "2/$C_ID" ]
check "  with a Docker container each" [ "$(containers_of $C_MEMBERS | wc -l)" == 2 ]
json=$(T session info c --json)
check "its JSON says cluster_size 2, single-node" \
	[ "$(jget c cluster_size)/$(jget c cluster_mode)" == "2/single-node" ]
listed=$(python3 -c '
import json, sys
for c in json.loads(sys.argv[1]).get("containers") or []:
    print(c.get("name"), c.get("role"), c.get("agent"), c.get("status"), "id" if c.get("container_id") else "-")' "$json")
check "the JSON lists main1 and sub1 on the node, RUNNING, each with a container ($(flat "$listed"))" \
	[ "$listed" == "main1 main $E2E_AGENT_ID RUNNING id"$'\n'"sub1 sub $E2E_AGENT_ID RUNNING id" ]
M1_CID=$(cx c main1 container_id) S1_CID=$(cx c sub1 container_id)
check "main1's and sub1's containers differ and both run" \
	[ "$M1_CID" != "$S1_CID" -a "$(docker inspect -f '{{.State.Running}}' "$M1_CID" "$S1_CID" 2>/dev/null | tr '\n' ' ')" == "true true " ]
info=$(T session info c)
check "session info has a Cluster: line" has_prefix_line "$info" "Cluster:"
check "  and a line for main1 and one for sub1, with the node ($(flat "$(grep -E 'main1|sub1' <<<"$info")"))" \
	eval '[ "$(grep -c "main1.*$E2E_AGENT_ID" <<<"$info")" -ge 1 ] && [ "$(grep -c "sub1.*$E2E_AGENT_ID" <<<"$info")" -ge 1 ]'
n=$(T session ls --json | python3 -c 'import json,sys; print(sum(s["name"] == "c" for s in json.load(sys.stdin)))')
check "session ls --json lists it once ($n)" [ "$n" == 1 ]
n=$(T session ls | grep -c '^c ')
check "session ls lists it once ($n)" [ "$n" == 1 ]
check "its containers are together on a network of the session's own" \
	[ "$(docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}' "$M1_CID" | grep -c "tessera-c-${C_ID:0:16}")" == 1 ]

# ---- host names, names resolved, variables ----
check "main1's host name" [ "$(T session exec c -- hostname)" == main1 ]
check "sub1's host name" [ "$(T session exec c --container sub1 -- hostname)" == sub1 ]
S1_IP=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$S1_CID" | awk '{print $1}')
M1_IP=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$M1_CID" | awk '{print $1}')
out=$(T session exec c -- getent hosts sub1)
check "main1 resolves sub1 to sub1's address ($out; $S1_IP)" [ "$(awk '{print $1}' <<<"$out")" == "$S1_IP" ]
out=$(T session exec c --container sub1 -- getent hosts main1)
check "sub1 resolves main1 to main1's address ($out; $M1_IP)" [ "$(awk '{print $1}' <<<"$out")" == "$M1_IP" ]
VARS='TESSERA_CLUSTER_SIZE TESSERA_CLUSTER_MODE TESSERA_CLUSTER_ROLE TESSERA_CLUSTER_IDX TESSERA_CLUSTER_HOST TESSERA_CLUSTER_HOSTS TESSERA_CLUSTER_RANK MASTER_ADDR MASTER_PORT WORLD_SIZE RANK LOCAL_RANK'
envof() {  # envof CONTAINER: the cluster variables, one VAR=VALUE a line, in the order of $VARS
	T session exec c --container "$1" -- env | python3 -c '
import sys
env = dict(l.rstrip("\n").split("=", 1) for l in sys.stdin if "=" in l)
for v in sys.argv[1].split():
    print("%s=%s" % (v, env.get(v, "<unset>")))' "$VARS"
}
expected_env() {  # expected_env ROLE IDX HOST RANK
	printf '%s\n' TESSERA_CLUSTER_SIZE=2 TESSERA_CLUSTER_MODE=single-node "TESSERA_CLUSTER_ROLE=$1" \
		"TESSERA_CLUSTER_IDX=$2" "TESSERA_CLUSTER_HOST=$3" TESSERA_CLUSTER_HOSTS=main1,sub1 \
		"TESSERA_CLUSTER_RANK=$4" MASTER_ADDR=main1 MASTER_PORT=29500 WORLD_SIZE=2 "RANK=$4" LOCAL_RANK=0
}
got=$(envof main1)
check "main1's variables: role main, rank 0, world size 2 ($(flat "$got"))" [ "$got" == "$(expected_env main 1 main1 0)" ]
got=$(envof sub1)
check "sub1's variables: role sub, rank 1, world size 2 ($(flat "$got"))" [ "$got" == "$(expected_env sub 1 sub1 1)" ]

# ---- MPI-style: over the session's SSH from main1 to every host ----
# sshd starts with the container, as the runner brings it up: the round
# is tried until every host answers (up to 60 s), as a launcher would.
round='for _ in $(seq 60); do
	sum=0 out= ok=1
	for h in ${TESSERA_CLUSTER_HOSTS//,/ }; do
		r=$(ssh -o BatchMode=yes -o ConnectTimeout=5 "$h" "echo \$RANK" 2>/dev/null) || { ok=0; break; }
		out="$out$h=$r "; sum=$((sum + r))
	done
	((ok)) && { echo "${out}sum=$sum"; exit 0; }
	sleep 1
done
exit 1'
out=$(T session exec c --timeout 120 -- bash -c "$round" 2>&1)
check "ssh from main1 to every host: each answers its own rank, the sum is 1 ($(flat "$out"))" \
	[ "$out" == "main1=0 sub1=1 sum=1" ]
out=$(T session exec c --container sub1 --timeout 60 -- ssh -o BatchMode=yes main1 'echo "$(hostname) rank $RANK"' 2>&1)
check "ssh from sub1 to main1 ($(flat "$out"))" [ "$out" == "main1 rank 0" ]

# ---- exec and logs of one container ----
check "exec c/sub1 runs in sub1" [ "$(T session exec c/sub1 -- hostname)" == sub1 ]
check "exec --container main1 runs in main1" [ "$(T session exec c --container main1 -- hostname)" == main1 ]
logs_has() {  # logs_has TEXT ARGS...: the logs contain TEXT (the startup command's line shows up once it ran)
	local want=$1; shift
	for _ in $(seq 1 100); do contains "$(T session logs "$@" 2>&1)" "$want" && return 0; sleep 0.1; done
	return 1
}
check "logs --container sub1 are sub1's" logs_has "started on sub1" c --container sub1
check "logs c/sub1 are sub1's" logs_has "started on sub1" c/sub1
check "logs of c are main1's" logs_has "started on main1" c
check "  and not sub1's" not contains "$(T session logs c 2>&1)" "started on sub1"
out=$(T session exec c --container sub7 -- true 2>&1); rc=$?
check "exec in a container the session lacks fails (exit $rc: $(flat "$out"))" [ $rc -ne 0 ]
check "  naming it" contains "$out" sub7
out=$(T session logs c/nope 2>&1); rc=$?
check "logs of c/nope fail naming it (exit $rc: $(flat "$out"))" eval '[ $rc -ne 0 ] && contains "$out" nope'

# ---- isolation: nothing else reaches the cluster's network ----
# reach ADDR PORT (in python3): "open" when a TCP connection is made,
# else the error; sshd listens on 2200 in each container.
reach='import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close(); print("open")
except Exception as e:
    print("closed", type(e).__name__)'
resolve='import socket, sys
try:
    print(socket.gethostbyname(sys.argv[1]))
except Exception as e:
    print("unresolved", type(e).__name__)'
check "main1 reaches sub1 on its sshd port (the check's own control)" \
	[ "$(T session exec c -- python3 -c "$reach" sub1 2200)" == open ]
endpoint=$(sed -n 's/^endpoint *= *//p' "$ADMIN_CONF")
BOB_CONF=$E2E_DIR/bob.conf
T user create bob@cluster.test --json 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("endpoint = %s\naccess_key = %s\nsecret_key = %s" % (sys.argv[1], r["user"]["access_key"], r["secret_key"]))' \
	"$endpoint" >"$BOB_CONF"
as_bob() { TESSERA_CONFIG=$BOB_CONF "$@"; }
as_bob "$TESSERA" session create "$PY" --name b1 --cpu 1 --mem 256m --wait --timeout 300 >/dev/null 2>&1
check "bob's session b1 runs" eval '[ "$(TESSERA_CONFIG=$BOB_CONF jget b1 status)" == RUNNING ]'
T session create "$PY" --name a1 --cpu 1 --mem 256m --wait --timeout 300 >/dev/null 2>&1
check "a second session of the same user, a1, runs" wait_status a1 RUNNING
out=$(as_bob "$TESSERA" session exec b1 -- python3 -c "$reach" "$M1_IP" 2200 2>&1)
check "bob's session cannot reach main1's address ($M1_IP: $out)" [ "${out%% *}" == closed ]
out=$(as_bob "$TESSERA" session exec b1 -- python3 -c "$resolve" sub1 2>&1)
check "bob's session cannot resolve sub1 ($out)" [ "${out%% *}" == unresolved ]
out=$(T session exec a1 -- python3 -c "$reach" "$M1_IP" 2200 2>&1)
check "the same user's a1 cannot reach main1's address ($M1_IP: $out)" [ "${out%% *}" == closed ]
out=$(T session exec a1 -- python3 -c "$reach" "$S1_IP" 2200 2>&1)
A1_CID=$(jget a1 container_id)
check "nor sub1's ($S1_IP: $out; a1 at $(e2e_ip_of_container "$A1_CID") on $(e2e_net_of_container "$A1_CID"), sub1 on $(docker inspect -f '{{.HostConfig.NetworkMode}}' "$S1_CID" 2>&1))" \
	[ "${out%% *}" == closed ]
out=$(T session exec a1 -- python3 -c "$resolve" sub1 2>&1)
check "a1 cannot resolve sub1 ($out)" [ "${out%% *}" == unresolved ]
as_bob "$TESSERA" session rm b1 >/dev/null
T session rm a1 >/dev/null

# ---- refusals ----
out=$(T session commit c 2>&1); rc=$?
check "commit of a cluster session is refused (exit $rc: $(flat "$out"))" \
	eval '[ $rc -ne 0 ] && contains "$out" "cannot be committed"'
out=$(T session create "$TEST_IMAGE" --name huge --cluster-size 3 --cpu 0.1 --mem 2g 2>&1); rc=$?
check "a single-node session of 3 x 2 GiB on a 4 GiB node is refused at create (exit $rc: $(flat "$out"))" \
	eval '[ $rc -ne 0 ] && contains "$out" "no node could ever hold"'
no_session() { ! T session info "$1" >/dev/null 2>&1; }
check "  and no session is made" no_session huge

# The API itself: raw requests signed as docs/api.md says.
ENDPOINT=$endpoint HOSTPORT=${endpoint#*://}
HOSTPORT=${HOSTPORT%%/*}
conf() { sed -n "s/^$1 *= *//p" "$ADMIN_CONF"; }
hmac_hex() { printf '%s' "$2" | openssl dgst -sha256 -mac HMAC -macopt "$1" -r | cut -d' ' -f1; }
api_post() {  # api_post PATH BODY: sets RESP_CODE and RESP_BODY
	local date day key sig
	date=$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S GMT')
	day=$(date -u '+%Y%m%d')
	key=$(hmac_hex "key:$(conf secret_key)" "$day")
	sig=$(hmac_hex "hexkey:$key" "$(printf '%s\n%s\n%s\n%s\n%s' POST "$1" "$date" "$HOSTPORT" \
		"$(printf '%s' "$2" | openssl dgst -sha256 -r | cut -d' ' -f1)")")
	RESP_CODE=$(curl -s -o "$E2E_DIR/resp" -w '%{http_code}' -X POST -H "Host: $HOSTPORT" -H "Date: $date" \
		-H 'Content-Type: application/json' \
		-H "Authorization: TESSERA-HMAC-SHA256 Credential=$(conf access_key), Signature=$sig" \
		--data-binary "$2" "$ENDPOINT$1")
	RESP_BODY=$(cat "$E2E_DIR/resp" 2>/dev/null)
}
refused() {  # refused NEEDLE FIELDS: a create with FIELDS (JSON members) is a 400 whose message has NEEDLE
	api_post /v1/sessions "{\"image\":\"$TEST_IMAGE\",\"name\":\"bad\",\"resources\":{\"cpu\":0.1,\"mem\":\"16m\"},$2}"
	local msg
	msg=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["error"]["message"])' "$RESP_BODY" 2>/dev/null)
	if [[ $RESP_CODE == 400 ]] && contains "$msg" "$1"; then
		ok "API: {$2} is refused: $RESP_CODE $msg"
	else
		fail "API: {$2}: got $RESP_CODE $RESP_BODY (expected 400 naming '$1')"
	fi
}
refused cluster_size '"cluster_size":0'
refused cluster_size '"cluster_size":17'
refused cluster_size '"cluster_size":"x"'
refused cluster_mode '"cluster_size":2,"cluster_mode":"both"'
refused preemptible '"cluster_size":2,"preemptible":true'
check "no session 'bad' was made" no_session bad

# ---- one container ends: the session ends ----
docker kill "$S1_CID" >/dev/null
check "sub1's container killed: the session is ERROR" wait_status c ERROR
info=$(jget c status_info)
check "  naming sub1 ($info)" contains "$info" "container sub1"
gone() { for _ in $(seq 1 300); do ! docker inspect "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
check "main1's container is removed" gone "$M1_CID"
check "sub1's is kept for its logs" eval 'docker inspect -f . "$S1_CID" >/dev/null'
T session rm c >/dev/null
check "session rm removes it" gone "$S1_CID"
check "  no container of the session is left" [ -z "$(containers_of $C_MEMBERS)" ]
nets_gone() { for _ in $(seq 1 100); do [[ -z $(cluster_nets "${C_ID:0:16}") ]] && return 0; sleep 0.1; done; return 1; }
check "  nor its tessera-c-* network ($(cluster_nets "${C_ID:0:16}"))" nets_gone
check "b1 and a1 ended" eval 'wait_status a1 TERMINATED && TESSERA_CONFIG=$BOB_CONF wait_status b1 TERMINATED'

# ---- a gang waits whole, and starts whole ----
# The node has 4 GiB; the blocker takes 1.5, leaving room for 2 of the
# gang's 3 containers of 1 GiB.
T session create "$TEST_IMAGE" --name blocker --cpu 0.1 --mem 1536m --wait --timeout 120 >/dev/null 2>&1
check "the blocker runs" wait_status blocker RUNNING
out=$(T session create "$TEST_IMAGE" --name g --cluster-size 3 --cpu 0.1 --mem 1g 2>&1)
check "a 3-container gang is accepted ($(flat "$out"))" wait_status g PENDING
G_ID=$(jget g id)
G_MEMBERS=$(member_ids g)
check "  with 3 container records" [ "$(wc -l <<<"$G_MEMBERS")" == 3 ]
sleep 3  # a pass or more of the scheduler: nothing of it starts meanwhile
check "it is still PENDING after a while" [ "$(jget g status)" == PENDING ]
info=$(jget g status_info)
check "  waiting for room for all 3 containers ($info)" contains "$info" "all 3 containers"
check "  no container of it is made" [ -z "$(containers_of $G_MEMBERS)" ]
n=$(T session info g --json | python3 -c '
import json, sys
print(sum(1 for c in json.load(sys.stdin).get("containers") or [] if c.get("container_id")))')
check "  none of its containers has a container id ($n)" [ "$n" == 0 ]
T session rm blocker >/dev/null
check "the blocker removed, the gang starts" wait_status g RUNNING
st=$(for k in main1 sub1 sub2; do echo "$k $(cx g "$k" status) $(docker inspect -f '{{.State.Running}}' "$(cx g "$k" container_id)" 2>/dev/null)"; done)
check "  whole: main1, sub1 and sub2 run ($(flat "$st"))" [ "$st" == $'main1 RUNNING true\nsub1 RUNNING true\nsub2 RUNNING true' ]
check "  3 containers of it on Docker" [ "$(containers_of $G_MEMBERS | wc -l)" == 3 ]

# ---- the server restarted: the gang is adopted whole ----
ids_before=$(for k in main1 sub1 sub2; do cx g "$k" container_id; done)
stop_server TERM
check "the gang's containers outlive the server" \
	[ "$(docker inspect -f '{{.State.Running}}' $ids_before | sort -u)" == true ]
start_server "${SERVER_ARGS[@]}" || { e2e_done; exit 1; }
check "after the restart the gang is RUNNING" wait_status g RUNNING
ids_after=$(for k in main1 sub1 sub2; do cx g "$k" container_id; done)
check "  with the same three containers" [ "$ids_after" == "$ids_before" ]
st=$(for k in main1 sub1 sub2; do cx g "$k" status; done | sort -u)
check "  each RUNNING ($(flat "$st"))" [ "$st" == RUNNING ]
check "  exec reaches g/sub2" [ "$(T session exec g/sub2 -- cat /etc/hostname)" == sub2 ]
T session rm g >/dev/null
check "g ends" wait_status g TERMINATED
g_gone() { for _ in $(seq 1 300); do [[ -z $(containers_of $G_MEMBERS) ]] && return 0; sleep 0.1; done; return 1; }
check "  with no container left" g_gone
check "  nor its network" eval '[ -z "$(cluster_nets "${G_ID:0:16}")" ]'
e2e_done
