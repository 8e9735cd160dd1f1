#!/usr/bin/env bash
# Sessions converted into private images, and the cluster registry
# (docs/images.md): a session writes a file under /usr/local, `session
# commit --wait` makes a private image of it, a new session of that image
# finds the file; another user can neither launch it nor tell it from a
# missing image; the per-user limit refuses more; the image was pushed to
# the registry that `tessera server` runs, so once removed from Docker a new
# session pulls it back ("pulling" in its history), as does `tessera image
# pull`; a pull the registry cannot serve puts the session in ERROR with
# the registry's message; the registry is restarted when it dies; `image
# rm` of a private image gives its place under the limit back. A commit
# never takes a name it did not make (issue 27): private images live under
# their owner's name space, tessera-private/<local part>-<12 hex of the
# id>/; a user who asks for a public image's name gets it under theirs,
# one who asks for another user's private name is refused, and the public
# image keeps its id and its sessions.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server || { e2e_done; exit 1; }
T() { "$TESSERA" "$@"; }
DATA=$E2E_DIR/data
ADMIN_CONF=$TESSERA_CONFIG
IMAGES=()   # the images this test made, removed at the end
cleanup_images() {
	local i
	for i in "${IMAGES[@]}"; do docker rmi -f "$i" >/dev/null 2>&1; done
	return 0
}

conf() { sed -n "s/^$1 *= *//p" "$ADMIN_CONF"; }
ENDPOINT=$(conf endpoint)
HOSTPORT=${ENDPOINT#*://}
HOSTPORT=${HOSTPORT%%/*}
hmac_hex() { printf '%s' "$2" | openssl dgst -sha256 -mac HMAC -macopt "$1" -r | cut -d' ' -f1; }
# api KEY SECRET METHOD PATH [BODY]: one request signed as docs/api.md says;
# the body on stdout.
api() {
	local ak=$1 sk=$2 method=$3 path=$4 body=${5-}
	local date day body_hash key sig
	date=$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S GMT')
	day=$(date -u '+%Y%m%d')
	body_hash=$(printf '%s' "$body" | openssl dgst -sha256 -r | cut -d' ' -f1)
	key=$(hmac_hex "key:$sk" "$day")
	sig=$(hmac_hex "hexkey:$key" "$(printf '%s\n%s\n%s\n%s\n%s' "$method" "$path" "$date" "$HOSTPORT" "$body_hash")")
	local args=(-s -X "$method" -H "Host: $HOSTPORT" -H "Date: $date"
		-H "Authorization: TESSERA-HMAC-SHA256 Credential=$ak, Signature=$sig")
	[[ -n $body ]] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
	curl "${args[@]}" "$ENDPOINT$path"
}
pyget() { python3 -c 'import json,sys
v=json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[int(k)] if isinstance(v, list) else (v.get(k) if isinstance(v, dict) else None)
print("" if v is None else v)' "$1"; }
has_image() { docker image inspect "$1" >/dev/null 2>&1; }
matches() { [[ $1 =~ $2 ]]; }
history_of() { T session info "$1" --json | python3 -c 'import json,sys
for h in json.load(sys.stdin)["status_history"]: print(h["status"], h["info"])'; }

IMG=$TEST_IMAGE
ADMIN_ID=$(api "$(conf access_key)" "$(conf secret_key)" GET /v1/auth/whoami | pyget user.id)
ADMIN_NS=tessera-private/admin-${ADMIN_ID:0:12}
REGISTRY=$(sed -n 's/^ *addr: *//p' "$DATA/registry/config.yml")
check "tessera server runs a registry on a loopback port ($REGISTRY)" contains "$REGISTRY" "127.0.0.1:"
check "the registry answers" curl -fsS "http://$REGISTRY/v2/" -o /dev/null

# ---- commit ----
# Writing under /usr/local takes root: sessions run as the work user
# unless the owner's policy allows root (docs/admin.md, "Session isolation").
T config set policy.admin@tessera.local '{"allow_root": true}' >/dev/null
T session create "$IMG" --name src --wait --root \
	--startup-command 'mkdir -p /usr/local/share/t && echo committed-file > /usr/local/share/t/f && exec sleep 1000' \
	>/dev/null
check "source session RUNNING" wait_status src RUNNING
for _ in $(seq 1 100); do T session exec src -- cat /usr/local/share/t/f >/dev/null 2>&1 && break; sleep 0.1; done
out=$(T session commit src --tag v1 --wait 2>&1)
REF=$ADMIN_NS/src:v1
IMAGES+=("$REF")
check "session commit --wait: ready ($out)" contains "$out" "$REF is ready"
check "... and pushed to the cluster registry" contains "$out" "pushed to the cluster registry"
check "the image is in Docker" has_image "$REF"
labels=$(docker image inspect "$REF" --format '{{json .Config.Labels}}')
check "labelled with the owner's id" contains "$labels" "\"tessera.owner\":\"$ADMIN_ID\""
check "labelled with the source image" contains "$labels" "\"tessera.source.image\":\"$IMG\""
check "labelled with the source session" contains "$labels" "\"tessera.source.session\":\"$(jget src id)\""
check "labelled private" contains "$labels" "\"ai.backend.features\":\"private\""
check "session info shows the last commit" contains "$(T session info src)" "Last commit:     $REF ready"
tags=$(curl -fsS "http://$REGISTRY/v2/$ADMIN_NS/src/tags/list")
check "the registry lists it ($tags)" contains "$tags" '"v1"'

T session create "$REF" --name fromimg --wait >/dev/null
check "a session of the private image RUNNING" wait_status fromimg RUNNING
check "it finds the committed file" [ "$(T session exec fromimg -- cat /usr/local/share/t/f)" == "committed-file" ]
# The default name: the owner's name space and the session, tag the time.
out=$(T session commit src --json --wait)
DEF_REF=$(pyget ref <<<"$out")
IMAGES+=("$DEF_REF")
check "default name ($DEF_REF)" matches "$DEF_REF" "^$ADMIN_NS/src:[0-9]{8}-[0-9]{6}\$"

# ---- another user ----
reply=$(api "$(conf access_key)" "$(conf secret_key)" POST /v1/users '{"email":"bob@example.com","password":"bob password 1"}')
BOB_CONF=$E2E_DIR/bob.conf
printf 'endpoint = %s\naccess_key = %s\nsecret_key = %s\n' "$ENDPOINT" "$(pyget user.access_key <<<"$reply")" \
	"$(pyget secret_key <<<"$reply")" > "$BOB_CONF"
private_err=$(TESSERA_CONFIG=$BOB_CONF T session create "$REF" --name peek 2>&1)
missing_err=$(TESSERA_CONFIG=$BOB_CONF T session create $ADMIN_NS/nosuch:v1 --name peek 2>&1)
check "another user cannot launch it ($private_err)" contains "$private_err" "image $REF is not present on any node"
check "... in the words of a missing image" \
	[ "${private_err//$REF/X}" == "${missing_err//$ADMIN_NS\/nosuch:v1/X}" ]
check "another user cannot commit the admin's session" not env TESSERA_CONFIG="$BOB_CONF" "$TESSERA" session commit src
bob_images=$(api "$(pyget user.access_key <<<"$reply")" "$(pyget secret_key <<<"$reply")" GET /v1/images)
# Listing: the catalog's visibility filter (tessera.owner) hides it. Where
# the catalog is not built in (no "visibility" in the list's entries), the
# list is every node's images, and this check waits for it.
if contains "$bob_images" '"visibility"'; then
	check "another user does not list it" not contains "$bob_images" "\"$REF\""
else
	e2e_log "GET /v1/images has no visibility filter in this build: listing check skipped"
fi

# ---- the limit ----
T config set policy.default '{"max_private_images": 2}' >/dev/null
out=$(T session commit src --tag v3 2>&1)
check "the limit refuses a third private image ($out)" contains "$out" "max_private_images"
# `image rm` of one gives its place back (its copy in the registry stays).
out=$(T image rm "$DEF_REF" 2>&1)
check "image rm of a private image ($out)" contains "$out" "$DEF_REF removed from 1 node(s)"
check "image rm took it from Docker" not has_image "$DEF_REF"
out=$(T session commit src --tag v3 --wait 2>&1)
IMAGES+=("$ADMIN_NS/src:v3")
check "... and the limit takes a new one ($out)" contains "$out" "$ADMIN_NS/src:v3 is ready"
T config set policy.default '{"max_private_images": 10}' >/dev/null

# ---- the registry: pull back what Docker lost ----
T session rm fromimg >/dev/null
wait_status fromimg TERMINATED
docker rmi "$REF" >/dev/null
check "image removed from Docker" not has_image "$REF"
T session create "$REF" --name pulled --wait >/dev/null
check "a session of the removed image RUNNING (pulled from the registry)" wait_status pulled RUNNING
hist=$(history_of pulled)
check "'pulling' in its status history" contains "$hist" "PREPARING pulling $REF from the registry"
check "the pulled image has the file" [ "$(T session exec pulled -- cat /usr/local/share/t/f)" == "committed-file" ]
check "the registry's own name is not left in Docker" not has_image "$REGISTRY/$REF"

# tessera image pull (not a terminal: a line per change); image rm above
# took DEF_REF from Docker, the registry still has it.
out=$(T image pull "$DEF_REF" --node "$E2E_AGENT_ID" 2>&1)
check "image pull succeeds ($out)" contains "$out" "$E2E_AGENT_ID: done"
check "... and the image is back" has_image "$DEF_REF"
out=$(T image pull $ADMIN_NS/nosuch:v1 2>&1)
check "image pull of a missing image fails ($out)" contains "$out" "not in the cluster registry"

T session rm pulled >/dev/null   # its CPU, on a small machine
wait_status pulled TERMINATED

# ---- an admin converts a user's session (the seeds' way) ----
BOB_KEY=$(pyget user.access_key <<<"$reply")
BOB_SECRET=$(pyget secret_key <<<"$reply")
BOB_ID=$(api "$BOB_KEY" "$BOB_SECRET" GET /v1/auth/whoami | pyget user.id)
BOB_NS=tessera-private/bob-${BOB_ID:0:12}
BOB_REF=$BOB_NS/bobs:a1
IMAGES+=("$BOB_REF")
TESSERA_CONFIG=$BOB_CONF T session create "$IMG" --name bobs --cpu 0.5 --wait >/dev/null
out=$(T session commit bobs --owner bob@example.com --tag a1 --wait 2>&1)
check "an admin commits bob's session ($out)" contains "$out" "$BOB_REF is ready"
check "the image is bob's" contains "$(docker image inspect "$BOB_REF" --format '{{json .Config.Labels}}')" \
	"\"tessera.owner\":\"$(api "$(pyget user.access_key <<<"$reply")" "$(pyget secret_key <<<"$reply")" GET /v1/auth/whoami | pyget user.id)\""
TESSERA_CONFIG=$BOB_CONF T session rm bobs >/dev/null
TESSERA_CONFIG=$BOB_CONF T session create "$BOB_REF" --name bobs2 --cpu 0.5 --wait >/dev/null
check "bob launches it" env TESSERA_CONFIG="$BOB_CONF" "$TESSERA" session exec bobs2 -- true
TESSERA_CONFIG=$BOB_CONF T session rm bobs2 >/dev/null

# ---- a commit never takes a name it did not make (issue 27) ----
# A public image of its own (the shared test image's tag must never move,
# even when this test fails): bob asks for its name and tag, and for the
# name of the admin's private image, with its tag and with a new one.
PUB=tessera-e2e-pub-$$
docker tag "$IMG" "$PUB:1"
IMAGES+=("$PUB:1")
PUB_ID=$(docker image inspect -f '{{.Id}}' "$PUB:1")
REF_ID=$(docker image inspect -f '{{.Id}}' "$REF")
T image rescan >/dev/null
TESSERA_CONFIG=$BOB_CONF T session create "$IMG" --name probe --cpu 0.5 --wait >/dev/null
check "bob's session RUNNING" env TESSERA_CONFIG="$BOB_CONF" "$TESSERA" session exec probe -- true
reply=$(api "$BOB_KEY" "$BOB_SECRET" POST /v1/sessions/probe/commit "{\"name\":\"$PUB\",\"tag\":\"1\"}")
HIJACK=$(pyget commit.ref <<<"$reply")
IMAGES+=("$BOB_NS/$PUB:1")
check "a public name goes under bob's name space ($reply)" [ "$HIJACK" == "$BOB_NS/$PUB:1" ]
done_commit=$(api "$BOB_KEY" "$BOB_SECRET" GET "/v1/commits/$(pyget commit.id <<<"$reply")?wait=1&timeout_s=120")
check "... ready ($done_commit)" [ "$(pyget commit.status <<<"$done_commit")" == ready ]
out=$(TESSERA_CONFIG=$BOB_CONF T session commit probe --name "$ADMIN_NS/src" --tag v1 2>&1)
check "bob may not commit onto the admin's private image ($out)" contains "$out" "is not among the private images of bob@example.com"
out=$(TESSERA_CONFIG=$BOB_CONF T session commit probe --name "$ADMIN_NS/src" --tag v7 2>&1)
check "... nor into the admin's name space ($out)" contains "$out" "is not among the private images of bob@example.com"
IMAGES+=("$ADMIN_NS/src:v7")
check "no image was made there" not has_image "$ADMIN_NS/src:v7"
# An admin converting bob's session onto the public name: bob's too.
out=$(T session commit probe --owner bob@example.com --name "$PUB" --tag 2 --wait 2>&1)
IMAGES+=("$BOB_NS/$PUB:2")
check "an admin's commit onto a public name goes under bob's name space ($out)" contains "$out" "$BOB_NS/$PUB:2 is ready"
check "the public image keeps its id" [ "$(docker image inspect -f '{{.Id}}' "$PUB:1")" == "$PUB_ID" ]
check "the admin's private image keeps its id" [ "$(docker image inspect -f '{{.Id}}' "$REF")" == "$REF_ID" ]
T image rescan >/dev/null
pub_entry=$(api "$BOB_KEY" "$BOB_SECRET" GET /v1/images | python3 -c 'import json,sys
for e in json.load(sys.stdin)["images"]:
    if e["ref"] == sys.argv[1]: print(e["visibility"], e["owner"])' "$PUB:1")
check "the catalog lists it public, no one's, after a rescan ($pub_entry)" [ "$pub_entry" == "public None" ]
TESSERA_CONFIG=$BOB_CONF T session rm probe >/dev/null
# Someone else, neither bob nor an admin, still starts sessions of it.
reply=$(api "$(conf access_key)" "$(conf secret_key)" POST /v1/users '{"email":"carol@example.com","password":"carol password 1"}')
CAROL_CONF=$E2E_DIR/carol.conf
printf 'endpoint = %s\naccess_key = %s\nsecret_key = %s\n' "$ENDPOINT" "$(pyget user.access_key <<<"$reply")" \
	"$(pyget secret_key <<<"$reply")" > "$CAROL_CONF"
out=$(TESSERA_CONFIG=$CAROL_CONF T session create "$PUB:1" --name frompub --cpu 0.5 --wait 2>&1)
check "another user still starts a session of the public image ($out)" \
	env TESSERA_CONFIG="$CAROL_CONF" "$TESSERA" session exec frompub -- true
TESSERA_CONFIG=$CAROL_CONF T session rm frompub >/dev/null 2>&1

# ---- a pull the registry cannot serve ----
out=$(T session commit src --tag gone --wait 2>&1)
GONE=$ADMIN_NS/src:gone
IMAGES+=("$GONE")
check "committed $GONE" contains "$out" "is ready"
docker rmi "$GONE" >/dev/null
# The tag stays listed but its content is gone from the registry's storage.
rm -rf "$DATA/registry/storage/docker/registry/v2/blobs"
T session create "$GONE" --name nopull >/dev/null 2>&1
check "a session whose pull fails goes to ERROR" wait_status nopull ERROR
info=$(jget nopull status_info)
check "... with the registry's message ($info)" contains "$info" "could not pull $GONE from the registry"
check "... naming what it lacks" grep -qiE "unknown|not found" <<<"$info"

# ---- supervision ----
rpid=$(pgrep -f "docker-registry serve $DATA/registry/config.yml" | head -1)
check "the registry runs as a child ($rpid)" [ -n "$rpid" ]
kill "$rpid"
new=""
for _ in $(seq 1 100); do
	new=$(pgrep -f "docker-registry serve $DATA/registry/config.yml" | head -1)
	[[ -n $new && $new != "$rpid" ]] && curl -fsS "http://$REGISTRY/v2/" -o /dev/null 2>&1 && break
	sleep 0.1
done
check "a registry that dies is started again ($rpid -> $new)" [ -n "$new" -a "$new" != "$rpid" ]
check "... on the same port" curl -fsS "http://$REGISTRY/v2/" -o /dev/null

T session rm src nopull >/dev/null 2>&1
stop_server
check "the registry stops with the server" not pgrep -f "docker-registry serve $DATA/registry/config.yml"
E2E_IMAGES+=("${IMAGES[@]}")   # removed after the sessions' containers (e2e_teardown)
e2e_done
