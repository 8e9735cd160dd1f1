#!/usr/bin/env bash
# Tenants kept apart (docs/admin.md, "Session isolation"): each user's
# sessions on a Docker network of their own, so that no session reaches
# another user's, in either direction, while both still reach the host;
# session processes and `session exec` run as the work user (uid 1000),
# made at start in an image without one; root only where the owner's
# policy allows it.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server || { e2e_done; exit 1; }
ADMIN_CONF=$TESSERA_CONFIG

conf() { sed -n "s/^$1 *= *//p" "$ADMIN_CONF"; }
ENDPOINT=$(conf endpoint)
HOSTPORT=${ENDPOINT#*://}
HOSTPORT=${HOSTPORT%%/*}

hmac_hex() {  # hmac_hex KEYOPT DATA
	printf '%s' "$2" | openssl dgst -sha256 -mac HMAC -macopt "$1" -r | cut -d' ' -f1
}

# admin_post PATH BODY: a request signed with the admin's keypair, as
# docs/api.md ("Authentication") says; prints the reply body.
admin_post() {
	local path=$1 body=$2 date day key sig
	date=$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S GMT')
	day=$(date -u '+%Y%m%d')
	key=$(hmac_hex "key:$(conf secret_key)" "$day")
	sig=$(hmac_hex "hexkey:$key" "$(printf '%s\n%s\n%s\n%s\n%s' POST "$path" "$date" "$HOSTPORT" \
		"$(printf '%s' "$body" | openssl dgst -sha256 -r | cut -d' ' -f1)")")
	curl -s -X POST -H "Host: $HOSTPORT" -H "Date: $date" -H 'Content-Type: application/json' \
		-H "Authorization: TESSERA-HMAC-SHA256 Credential=$(conf access_key), Signature=$sig" \
		--data-binary "$body" "$ENDPOINT$path"
}

# A second user, bob, with a client config of his own.
reply=$(admin_post /v1/users '{"email":"bob@example.org"}')
BOB_CONF=$E2E_DIR/bob.conf
python3 -c '
import json, sys
r = json.loads(sys.argv[1])
print("endpoint = " + sys.argv[2])
print("access_key = " + r["user"]["access_key"])
print("secret_key = " + r["secret_key"])' "$reply" "$ENDPOINT" > "$BOB_CONF" 2>/dev/null
BOB_ID=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["user"]["id"])' "$reply" 2>/dev/null)
check "a second user is made" [ -n "$BOB_ID" ]
as_bob() { TESSERA_CONFIG=$BOB_CONF "$@"; }

# Each session serves a file of its own on port 8080 from its home.
serve() {  # serve NAME TEXT [CONFIG]
	TESSERA_CONFIG=${3:-$ADMIN_CONF} "$TESSERA" session create "$TEST_IMAGE" --name "$1" --cpu 0.1 --mem 32m \
		--startup-command "id -u > startup.uid; mkdir -p www; echo $2 > www/f; httpd -f -p 8080 -h www" \
		--wait --timeout 120 >/dev/null 2>&1
}
serve a1 from-a1
serve a2 from-a2
serve b1 from-b1 "$BOB_CONF"
all_running() {
	[ "$(jget a1 status)" == RUNNING ] && [ "$(jget a2 status)" == RUNNING ] &&
		[ "$(TESSERA_CONFIG=$BOB_CONF jget b1 status)" == RUNNING ]
}
check "the sessions run" all_running

# (A user's second session may have joined a spare sandbox on the
# user's network: its sandbox's then.)
ip_of() {  # ip_of NAME [CONFIG]: the session's address on its network
	local cid; cid=$(TESSERA_CONFIG=${2:-$ADMIN_CONF} jget "$1" container_id)
	e2e_ip_of_container "$cid"
}
net_of() {
	local cid; cid=$(TESSERA_CONFIG=${2:-$ADMIN_CONF} jget "$1" container_id)
	e2e_net_of_container "$cid"
}
A1=$(ip_of a1)
B1=$(ip_of b1 "$BOB_CONF")
e2e_log "a1 at $A1 on $(net_of a1), b1 at $B1 on $(net_of b1 "$BOB_CONF")"
own_networks() {
	local a1 a2 b1
	a1=$(net_of a1) a2=$(net_of a2) b1=$(net_of b1 "$BOB_CONF")
	[[ $a1 == tessera-u-* && $a1 == "$a2" && $b1 == tessera-u-* && $a1 != "$b1" ]]
}
check "each user has a network of their own" own_networks

# fetch [CONFIG] FROM ADDR PORT: the reply of an HTTP GET of /f made in
# session FROM; empty when it could not connect (nc gives up after 3 s).
fetch() {
	local cfg=$ADMIN_CONF
	if [[ $1 == *.conf ]]; then cfg=$1; shift; fi
	TESSERA_CONFIG=$cfg "$TESSERA" session exec "$1" --timeout 20 -- \
		sh -c "printf 'GET /f HTTP/1.0\r\n\r\n' | nc -w 3 $2 $3" 2>/dev/null
}
# Each refusal beside a fetch that works, so that "cannot reach" is not
# a listener that never listened.
a_apart_from_b() {
	contains "$(fetch a2 "$A1" 8080)" from-a1 && not contains "$(fetch "$BOB_CONF" b1 "$A1" 8080)" from-a1
}
b_apart_from_a() {
	contains "$(fetch "$BOB_CONF" b1 "$B1" 8080)" from-b1 && not contains "$(fetch a1 "$B1" 8080)" from-b1
}
check "bob's session cannot reach alice's (b1 -> a1), alice's own can (a2 -> a1)" a_apart_from_b
check "alice's session cannot reach bob's (a1 -> b1), bob's own can (b1 -> b1)" b_apart_from_a

# The agent's own drop rules between users' bridges (docs/admin.md,
# "Session isolation"), in the mangle table, which Docker never edits and
# which runs before Docker's isolation chains: a connection from bob's
# bridge to alice's is dropped there, its counter says so.
bridge_of() { echo "br-$(docker network inspect -f '{{.Id}}' "$1" | cut -c1-12)"; }
BR_A=$(bridge_of "$(net_of a1)")
BR_B=$(bridge_of "$(net_of b1 "$BOB_CONF")")
fw_rules() { iptables -w 5 -t mangle -S TESSERA-ISOLATION 2>/dev/null; }
has_rules() {  # has_rules BRIDGE: its five rules
	local r; r=$(fw_rules)
	contains "$r" "-A TESSERA-ISOLATION -i $1 -o $1 -j RETURN" &&
		contains "$r" "-A TESSERA-ISOLATION -i $1 -o br-+ -j DROP" &&
		contains "$r" "-A TESSERA-ISOLATION -i br-+ -o $1 -j DROP" &&
		contains "$r" "-A TESSERA-ISOLATION -i $1 -o docker0 -j DROP" &&
		contains "$r" "-A TESSERA-ISOLATION -i docker0 -o $1 -j DROP"
}
check "the agent keeps drop rules for alice's bridge ($BR_A)" has_rules "$BR_A"
check "and for bob's ($BR_B)" has_rules "$BR_B"
check "FORWARD of the mangle table jumps to them" contains "$(iptables -w 5 -t mangle -S FORWARD)" \
	"-A FORWARD -j TESSERA-ISOLATION"
dropped_between() {  # dropped_between FROM TO: packets the rules of either bridge dropped
	iptables -w 5 -t mangle -L TESSERA-ISOLATION -v -x -n 2>/dev/null |
		awk -v a="$1" -v b="$2" '$3 == "DROP" && ($6 == a || $7 == b) { n += $1 } END { print n + 0 }'
}
before=$(dropped_between "$BR_B" "$BR_A")
fetch "$BOB_CONF" b1 "$A1" 8080 >/dev/null
after=$(dropped_between "$BR_B" "$BR_A")
counted() { [[ -n $before && -n $after ]] && ((after > before)); }
check "bob's connection to alice's session is dropped by the agent's rule ($before -> $after packets)" counted

# The host, at its address on each user's bridge.
mkdir -p "$E2E_DIR/www" && echo from-host > "$E2E_DIR/www/f"
python3 - "$E2E_DIR/www" "$E2E_DIR/host.port" >/dev/null 2>&1 <<'EOF' &
import functools, http.server, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
srv = http.server.ThreadingHTTPServer(("0.0.0.0", 0), handler)
open(sys.argv[2], "w").write(str(srv.server_address[1]))
srv.serve_forever()
EOF
E2E_PIDS+=($!)
for _ in $(seq 1 100); do [[ -s $E2E_DIR/host.port ]] && break; sleep 0.1; done
HOST_PORT=$(cat "$E2E_DIR/host.port" 2>/dev/null)
gw_of() { docker network inspect -f '{{range .IPAM.Config}}{{.Gateway}}{{end}}' "$1"; }
check "alice's session reaches the host" contains "$(fetch a1 "$(gw_of "$(net_of a1)")" "$HOST_PORT")" from-host
check "bob's session reaches the host" \
	contains "$(fetch "$BOB_CONF" b1 "$(gw_of "$(net_of b1 "$BOB_CONF")")" "$HOST_PORT")" from-host

# Who the processes are: the work user, in an image without one too.
check "the startup command runs as uid 1000" [ "$("$TESSERA" session exec a1 -- cat startup.uid)" == 1000 ]
check "session exec runs as uid 1000" [ "$("$TESSERA" session exec a1 -- id -u)" == 1000 ]
check "exec runs in /home/work with HOME set" \
	[ "$("$TESSERA" session exec a1 -- sh -c 'pwd; echo $HOME')" == $'/home/work\n/home/work' ]
check "exec with a timeout runs as uid 1000 too" [ "$("$TESSERA" session exec a1 --timeout 30 -- id -u)" == 1000 ]
check "the image got a work user" contains "$("$TESSERA" session exec a1 -- cat /etc/passwd)" \
	"work:x:1000:1000::/home/work:/bin/sh"
check "the work user cannot write the image's system files" \
	[ "$("$TESSERA" session exec a1 -- sh -c 'echo x >> /etc/passwd && echo wrote || echo refused' 2>/dev/null)" == refused ]

# An image that has a work user of its own keeps it and its home.
WORK_IMAGE=tessera-test-work:e2e-1
if ! docker image inspect "$WORK_IMAGE" >/dev/null 2>&1; then
	root=$(mktemp -d)
	cid=$(docker create "$TEST_IMAGE" true)
	docker export "$cid" | tar -C "$root" -x
	docker rm "$cid" >/dev/null
	printf 'root:x:0:0:root:/root:/bin/sh\nwork:x:1000:1000:Work:/home/work:/bin/sh\n' > "$root/etc/passwd"
	printf 'root:x:0:\nwork:x:1000:\n' > "$root/etc/group"
	mkdir -p "$root/home/work" && echo image-home > "$root/home/work/marker" && chown -R 1000:1000 "$root/home/work"
	tar -C "$root" -c . | docker import -c 'ENV PATH=/bin' - "$WORK_IMAGE" >/dev/null
	rm -rf "$root"
fi
"$TESSERA" session create "$WORK_IMAGE" --name w1 --cpu 0.1 --mem 32m --wait --timeout 120 >/dev/null 2>&1
check "in an image with a work user, exec runs as 1000 in its home, its accounts as they were" \
	[ "$("$TESSERA" session exec w1 -- sh -c 'id -u; cat marker; grep -c work /etc/passwd')" == $'1000\nimage-home\n1' ]

# Root only by policy.
out=$("$TESSERA" session create "$TEST_IMAGE" --name r1 --root 2>&1)
refused_root() {
	contains "$out" "does not allow sessions that run as root" && not "$TESSERA" session info r1 >/dev/null 2>&1
}
check "--root is refused by default, and no session is made" refused_root
"$TESSERA" config set policy.admin@tessera.local '{"allow_root": true}' >/dev/null
"$TESSERA" session create "$TEST_IMAGE" --name r1 --root --cpu 0.1 --mem 32m --wait --timeout 120 >/dev/null 2>&1
check "--root is allowed by the policy" [ "$("$TESSERA" session exec r1 -- id -u)" == 0 ]
check "session info says who it runs as" contains "$("$TESSERA" session info r1)" "root"
out=$(as_bob "$TESSERA" session create "$TEST_IMAGE" --name r2 --root 2>&1)
check "another user's policy still refuses it" contains "$out" "does not allow sessions that run as root"

# A user's network stays after their last session on the node: their
# next session starts on it, with nothing made.
bob_net() { docker network ls -q --filter "label=tessera.owner_id=$BOB_ID"; }
had_net=$(bob_net)
as_bob "$TESSERA" session rm b1 >/dev/null
for _ in $(seq 1 300); do
	[[ $(TESSERA_CONFIG=$BOB_CONF jget b1 status) == TERMINATED ]] && break
	sleep 0.1
done
check "bob's network stays after his last session" [ -n "$had_net" -a "$(bob_net)" == "$had_net" ]

# Removed under the agent (`docker network rm`, after bob's spare
# sandbox on it, which Docker would refuse it for): bob's next session
# makes it again, and is kept apart from alice's as before.
spares=$(docker ps -aq --filter label=tessera.role=sandbox --filter "label=tessera.owner_id=$BOB_ID")
[[ -n $spares ]] && docker rm -f $spares >/dev/null
docker network rm "$had_net" >/dev/null
serve b2 from-b2 "$BOB_CONF"
check "bob's next session runs after his network was removed" \
	[ "$(TESSERA_CONFIG=$BOB_CONF jget b2 status)" == RUNNING ]
A2=$(ip_of a2)
B2=$(ip_of b2 "$BOB_CONF")
remade_net() {
	local b2 a2
	b2=$(net_of b2 "$BOB_CONF") a2=$(net_of a2)
	[[ $b2 == tessera-u-* && $b2 != "$a2" && -n $(bob_net) && $(bob_net) != "$had_net" ]]
}
check "it is on a new network of bob's own" remade_net
old_rules_gone() {  # Docker's event of the removal reaches the agent's watcher
	for _ in $(seq 1 100); do
		contains "$(fw_rules)" " $BR_B " || return 0
		sleep 0.1
	done
	return 1
}
check "the drop rules of bob's removed bridge are gone" old_rules_gone
check "his new bridge has its own" has_rules "$(bridge_of "$(net_of b2 "$BOB_CONF")")"
b2_apart() {
	contains "$(fetch "$BOB_CONF" b2 "$B2" 8080)" from-b2 && not contains "$(fetch a2 "$B2" 8080)" from-b2 &&
		contains "$(fetch a1 "$A2" 8080)" from-a2 && not contains "$(fetch "$BOB_CONF" b2 "$A2" 8080)" from-a2
}
check "b2 and alice's a2 cannot reach each other, each user's own still can" b2_apart

"$TESSERA" session rm a1 >/dev/null
wait_status a1 TERMINATED
check "alice's network stays" [ "$(docker network inspect -f '{{.Name}}' "$(net_of a2)")" == "$(net_of a2)" ]

e2e_done
