#!/usr/bin/env bash
# The image catalog end to end (docs/images.md, "The image catalog"):
# images imported into the real Docker with Backend.AI's labels and with
# none are listed (Docker's image events reach the manager), a private
# image (tessera.owner) is listed and launched by its owner only while
# another user gets the words of a missing image, a request below an
# image's minimum is refused, an alias launches its image, a tag made
# behind the manager's back shows after `image rescan`, and `image rm`.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server || { e2e_done; exit 1; }
ADMIN_CONF=$TESSERA_CONFIG

conf() { sed -n "s/^$1 *= *//p" "$ADMIN_CONF"; }
ENDPOINT=$(conf endpoint)
ACCESS_KEY=$(conf access_key)
SECRET_KEY=$(conf secret_key)
HOSTPORT=${ENDPOINT#*://}
HOSTPORT=${HOSTPORT%%/*}

# One request signed as docs/api.md says (as test_api_validation.sh does):
# the CLI has no verb for users yet. Sets RESP_BODY.
hmac_hex() { printf '%s' "$2" | openssl dgst -sha256 -mac HMAC -macopt "$1" -r | cut -d' ' -f1; }
api_raw() {  # api_raw METHOD PATH BODY
	local now date day body_hash key sig
	now=$(date +%s)
	date=$(LC_ALL=C date -u -d "@$now" '+%a, %d %b %Y %H:%M:%S GMT')
	day=$(date -u -d "@$now" '+%Y%m%d')
	body_hash=$(printf '%s' "$3" | openssl dgst -sha256 -r | cut -d' ' -f1)
	key=$(hmac_hex "key:$SECRET_KEY" "$day")
	sig=$(hmac_hex "hexkey:$key" "$(printf '%s\n%s\n%s\n%s\n%s' "$1" "$2" "$date" "$HOSTPORT" "$body_hash")")
	RESP_BODY=$(curl -s -X "$1" -H "Host: $HOSTPORT" -H "Date: $date" -H 'Content-Type: application/json' \
		-H "Authorization: TESSERA-HMAC-SHA256 Credential=$ACCESS_KEY, Signature=$sig" \
		--data-binary "$3" "$ENDPOINT$2")
}
json() { python3 -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v = v[int(k)] if isinstance(v, list) else v.get(k)
print("" if v is None else v)' "$1"; }

# Users A and B, each with a client config of their own.
make_user() {  # make_user NAME -> prints the user's id, writes $E2E_DIR/NAME.conf
	api_raw POST /v1/users "{\"email\":\"$1@example.org\",\"password\":\"a password\"}"
	local ak sk
	ak=$(json user.access_key <<<"$RESP_BODY")
	sk=$(json secret_key <<<"$RESP_BODY")
	printf 'endpoint = %s\naccess_key = %s\nsecret_key = %s\n' "$ENDPOINT" "$ak" "$sk" > "$E2E_DIR/$1.conf"
	json user.id <<<"$RESP_BODY"
}
A_ID=$(make_user usera)
make_user userb >/dev/null
as_a() { TESSERA_CONFIG=$E2E_DIR/usera.conf "$TESSERA" "$@"; }
as_b() { TESSERA_CONFIG=$E2E_DIR/userb.conf "$TESSERA" "$@"; }
check "users made" test -n "$A_ID" -a -s "$E2E_DIR/userb.conf"

# Images of this run only (names lower-cased from the run's directory).
R=${E2E_RUN,,}
R=${R//./-}
LAB=tessera-e2e-cat/$R-ml:3.11
PLAIN=tessera-e2e-cat/$R-plain:1
PRIV=tessera-e2e-cat/$R-priv:1
RETAG=tessera-e2e-cat/$R-retag:2
# A private image of another installation on the same Docker: its owner is
# no user here.
FOREIGN=tessera-private/someone-else/$R-foreign:1
cleanup_images() { docker rmi -f "$LAB" "$PLAIN" "$PRIV" "$RETAG" "$FOREIGN" >/dev/null 2>&1; return 0; }
trap 'e2e_teardown; cleanup_images' EXIT

ROOTFS=$E2E_DIR/rootfs.tar
docker save "$TEST_IMAGE" >/dev/null 2>&1  # warm: nothing to check
root=$(mktemp -d)
mkdir -p "$root/bin" "$root/tmp" "$root/etc"
cp /bin/busybox "$root/bin/busybox"
for c in sh ls cat echo sleep true; do ln -s busybox "$root/bin/$c"; done
tar -C "$root" -cf "$ROOTFS" .
rm -rf "$root"
import() {  # import REF [LABEL...]
	local ref=$1; shift
	local changes=(-c 'ENV PATH=/bin' -c 'CMD ["/bin/sh"]')
	for l in "$@"; do changes+=(-c "LABEL $l"); done
	docker import "${changes[@]}" "$ROOTFS" "$ref" >/dev/null
}
check "labelled image imported" import "$LAB" ai.backend.kernelspec=1 ai.backend.base-distro=debian12 \
	ai.backend.resource.min.cpu=0.5 ai.backend.resource.min.mem=64m \
	'ai.backend.service-ports="jupyter:http:8081,mlflow-ui:preopen:5000"' \
	tessera.family=e2e-ml 'tessera.title="E2E ML"' 'tessera.frameworks="python=3.11.2,torch=1.13.1"' \
	tessera.cuda=12.4
check "unlabelled image imported" import "$PLAIN"
check "private image imported" import "$PRIV" "tessera.owner=$A_ID"

# Docker's image events bring them into the catalog: wait for it.
listed() {  # listed CONFIG REF: REF is in that user's `image ls --json`
	TESSERA_CONFIG=$1 "$TESSERA" image ls --json | python3 -c '
import json, sys
sys.exit(0 if any(i["ref"] == sys.argv[1] for i in json.load(sys.stdin)) else 1)' "$2"
}
for _ in $(seq 1 300); do
	listed "$ADMIN_CONF" "$LAB" && listed "$ADMIN_CONF" "$PLAIN" && listed "$ADMIN_CONF" "$PRIV" && break
	sleep 0.1
done
check "the images reach the catalog through Docker's events" listed "$ADMIN_CONF" "$LAB"

LS=$("$TESSERA" image ls)
printf '# %s\n' "${LS//$'\n'/$'\n'# }"
matches() { [[ $1 =~ $2 ]]; }
row() { grep -E "^tessera-e2e-cat/$R-$1 " <<<"$LS"; }
col() { awk -v n="$2" '{print $n}' <<<"$1"; }
check "ls: tag and family" test "$(col "$(row ml)" 2) $(col "$(row ml)" 3)" = "3.11 e2e-ml"
check "ls: the framework versions" contains "$(row ml)" "python 3.11.2, torch 1.13.1"
check "ls: the minimum" contains "$(row ml)" "0.5 CPU, 64 MiB"
check "ls: the CUDA version after the frameworks" matches "$(row ml)" "torch 1\.13\.1 +12\.4 "
check "ls: '-' for an image without one" matches "$(row plain)" "^[^ ]+ +1 +[^ ]+ +- +- "
check "ls: an unlabelled image is its own family" test "$(col "$(row plain)" 3)" = "tessera-e2e-cat/$R-plain"
check "ls: the private image, its owner and visibility" matches "$(row priv)" "usera@example.org +private"
J=$("$TESSERA" image ls --json)
ml() { python3 -c 'import json,sys
e=[i for i in json.load(sys.stdin) if i["ref"]==sys.argv[1]][0]
print(e["title"], e["min"]["cpu"], e["min"]["mem"], e["service_ports"][1]["name"], e["base_distro"], e["cuda"], e["nodes"][0])' "$LAB" <<<"$J"; }
check "ls --json: title, minimum, service ports, distro, CUDA, node" test "$(ml)" = "E2E ML 0.5 67108864 mlflow-ui debian12 12.4 $E2E_AGENT_ID"

# The private image: its owner's and the admins', nobody else's.
check "the owner lists it" listed "$E2E_DIR/usera.conf" "$PRIV"
check "another user does not" not listed "$E2E_DIR/userb.conf" "$PRIV"
check "another user does not with --all" not listed "$E2E_DIR/userb.conf" "$PRIV"
B_PRIV=$(as_b session create "$PRIV" --name p --cpu 0.1 --mem 32m 2>&1)
check "another user cannot launch it" test $? -ne 0
B_NONE=$(as_b session create "tessera-e2e-cat/$R-nosuch:1" --name p --cpu 0.1 --mem 32m 2>&1)
e2e_log "$B_PRIV"
check "with the words of an image that does not exist" \
	test "${B_PRIV//$PRIV/X}" = "${B_NONE//tessera-e2e-cat\/$R-nosuch:1/X}"
B_RM=$(as_b image rm "$PRIV" 2>&1)
B_RM_NONE=$(as_b image rm "tessera-e2e-cat/$R-nosuch:1" 2>&1)
check "nor remove it, in the same words" test "${B_RM//$PRIV/X}" = "${B_RM_NONE//tessera-e2e-cat\/$R-nosuch:1/X}"
check "the owner launches it" as_a session create "$PRIV" --name mine --cpu 0.1 --mem 32m --wait --timeout 120
check "and it runs" test "$(TESSERA_CONFIG=$E2E_DIR/usera.conf jget mine status)" = RUNNING

# The minimum.
OUT=$("$TESSERA" session create "$LAB" --name small --cpu 0.1 --mem 32m 2>&1)
check "below the minimum: refused" test $? -ne 0
check "with both amounts named" contains "$OUT" "$LAB needs at least 0.5 CPU and 64 MiB memory; asked for 0.1 CPU and 32 MiB memory"

# An image without labels starts.
check "an unlabelled image starts" "$TESSERA" session create "$PLAIN" --name plain --cpu 0.1 --mem 32m --wait --timeout 120

# Aliases.
check "alias" "$TESSERA" image alias "$R-alias" "$LAB"
check "users may not alias" not as_b image alias "$R-other" "$LAB"
check "the alias launches its image" "$TESSERA" session create "$R-alias" --name aliased --cpu 0.5 --mem 64m --wait --timeout 120
check "the session runs the image" test "$(jget aliased image)" = "$LAB"
check "dealias" "$TESSERA" image dealias "$R-alias"
check "the alias is gone" not "$TESSERA" session create "$R-alias" --name aliased2 --cpu 0.5 --mem 64m

# A tag made behind the manager's back, found by rescan.
docker tag "$PLAIN" "$RETAG"
check "rescan" "$TESSERA" image rescan
check "the new tag is listed" listed "$ADMIN_CONF" "$RETAG"

# Another installation's private image is nobody's here: not listed, even
# to an admin (it showed with a bare user id as its owner), not launched.
printf 'FROM %s\nLABEL tessera.owner=0123456789abcdef0123456789abcdef\n' "$TEST_IMAGE" |
	docker build -q -t "$FOREIGN" - >/dev/null
check "rescan" "$TESSERA" image rescan
check "another installation's private image is not listed to an admin" not listed "$ADMIN_CONF" "$FOREIGN"
check "nor launched" not "$TESSERA" session create "$FOREIGN" --name foreign --cpu 0.5 --mem 64m

# Removal: admins; not while a session uses it.
check "users may not remove a public image" not as_b image rm "$RETAG"
OUT=$("$TESSERA" image rm "$PLAIN" 2>&1)
check "an image in use is not removed" contains "$OUT" "used by session plain"
check "rm" "$TESSERA" image rm "$RETAG"
check "gone from Docker" not docker image inspect "$RETAG"
check "gone from the catalog" not listed "$ADMIN_CONF" "$RETAG"
check "its other tag stays" docker image inspect "$PLAIN"

e2e_done
