#!/usr/bin/env bash
# Data folders end to end (docs/folders.md) with tessera server and the
# real dockerd: the seeds' scenario (a .local folder keeps what pip would
# install: a module written by one session is imported by the next),
# files owned by the work user, a read-only share mounted read-only, a
# user without a share who can neither see nor mount the folder, folder
# rm refused while mounted (naming the session), --force, restore, and a
# committed session's image without the folder's files. A share taken
# away (or made read-only) while the user's session mounts the folder is
# refused, naming it, since the bind mount would outlive the share, and
# --force ends that session (issue 27).
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server || { e2e_done; exit 1; }

T() { "$TESSERA" "$@"; }
PY=tessera/python:3.11
ADMIN_CONF=$TESSERA_CONFIG
DATA=$E2E_DIR/data
IMAGES=()
trap 'e2e_teardown; for i in "${IMAGES[@]}"; do docker rmi -f "$i" >/dev/null 2>&1; done' EXIT

conf() { sed -n "s/^$1 *= *//p" "$ADMIN_CONF"; }
ENDPOINT=$(conf endpoint)
HOSTPORT=${ENDPOINT#*://}
HOSTPORT=${HOSTPORT%%/*}
hmac_hex() { printf '%s' "$2" | openssl dgst -sha256 -mac HMAC -macopt "$1" -r | cut -d' ' -f1; }
# api KEY SECRET METHOD PATH [BODY]: one signed request (docs/api.md).
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
# make_user EMAIL FILE: a user and a client config for them.
make_user() {
	local reply
	reply=$(api "$(conf access_key)" "$(conf secret_key)" POST /v1/users "{\"email\":\"$1\",\"password\":\"pw of $1\"}")
	printf 'endpoint = %s\naccess_key = %s\nsecret_key = %s\n' "$ENDPOINT" "$(pyget user.access_key <<<"$reply")" \
		"$(pyget secret_key <<<"$reply")" > "$2"
	[[ -s $2 ]] && grep -q '^access_key = .' "$2"
}
wait_gone() {  # until session $1 has ended (TERMINATED)
	local s
	for _ in $(seq 1 300); do
		s=$(jget "$1" status 2>/dev/null)
		[[ $s == TERMINATED || $s == CANCELLED || $s == ERROR ]] && return 0
		sleep 0.1
	done
	return 1
}
SITE=/home/work/.local/lib/python3.11/site-packages

# ---- folders ----
check "folder create .local" T folder create .local
check "folder create data --quota 1g" T folder create data --quota 1g
out=$(T folder create data 2>&1)
check "a second folder data is refused ($out)" contains "$out" "already have a folder data"
out=$(T folder create ../x 2>&1)
check "a name with '/' is refused in one line ($out)" [ "$(wc -l <<<"$out")" -eq 1 -a -n "$out" ]
check "... naming what is allowed" contains "$out" "may contain only letters"
out=$(T folder create .. 2>&1)
check "'..' is refused ($out)" contains "$out" "may not be '.' or '..'"
ls_json=$(T folder ls --json)
check "folder ls shows .local as automount" contains "$ls_json" '"automount": true'
check "folder info data shows its quota" contains "$(T folder info data)" "1 GiB"
LOCAL_ID=$(T folder info .local --json | pyget id)
check "the folder is a directory on the default host" [ -d "$DATA/folders/$LOCAL_ID" ]

# ---- the seeds' scenario: .local outlives its session ----
check "a python session starts" T session create "$PY" --name w1 --cpu 1 --mem 512m --mount data --wait
info=$(T session info w1)
check "session info shows the automounted .local ($info)" contains "$info" ".local at /home/work/.local (automount)"
check "... and data" contains "$info" "data at /home/work/data"
check "the session writes a module into ~/.local" \
	T session exec w1 -- sh -c "mkdir -p $SITE && printf 'ANSWER = 42\n' > $SITE/mymod.py && echo keep > ~/data/kept"
owner=$(stat -c %u:%g "$DATA/folders/$LOCAL_ID/lib/python3.11/site-packages/mymod.py" 2>&1)
check "the file on the host belongs to the work user ($owner)" [ "$owner" == "1000:1000" ]
check "the home stays the work user's" [ "$(T session exec w1 -- stat -c %u /home/work)" == "1000" ]

out=$(T folder rm .local 2>&1)
check "folder rm of a mounted folder is refused, naming the session ($out)" contains "$out" "w1"
check "... and the folder is still there" [ -d "$DATA/folders/$LOCAL_ID" ]

# A committed image does not carry the folders' contents.
out=$(T session commit w1 --tag f1 --wait 2>&1)
REF=$(sed -n 's/^\(.*\) is ready.*/\1/p' <<<"$out" | awk '{print $NF}')
if [[ -n $REF ]]; then
	IMAGES+=("$REF")
	got=$(docker run --rm --entrypoint /bin/sh "$REF" -c "ls $SITE/mymod.py /home/work/data/kept 2>&1; true")
	check "the committed image has neither folder's files ($got)" contains "$got" "No such file"
	check "... of either folder" [ "$(grep -c 'No such file' <<<"$got")" -eq 2 ]
else
	fail "session commit w1 --wait ($out)"
fi

T session rm w1 >/dev/null
check "the session ends" wait_gone w1
check "a new session of the image starts" T session create "$PY" --name w2 --cpu 1 --mem 512m --wait
check "it imports the module from ~/.local" [ "$(T session exec w2 -- python3 -c 'import mymod; print(mymod.ANSWER)')" == "42" ]
check "a busybox session sees the file too" T session create "$TEST_IMAGE" --name bb --cpu 0.1 --mem 16m --wait
check "... owned by uid 1000" [ "$(T session exec bb -- stat -c %u "$SITE/mymod.py")" == "1000" ]
T session rm w2 >/dev/null
T session rm bb >/dev/null

# ---- sharing ----
BOB=$E2E_DIR/bob.conf
CAROL=$E2E_DIR/carol.conf
check "bob is made" make_user bob@folders.test "$BOB"
check "carol is made" make_user carol@folders.test "$CAROL"
check "data is shared with bob read-only" T folder share data --with bob@folders.test --permission ro
bls=$(TESSERA_CONFIG=$BOB T folder ls --json)
check "bob lists data as ro" contains "$bls" '"permission": "ro"'
check "bob does not see the admin's .local" not contains "$bls" '".local"'
check "bob's session mounts data" env TESSERA_CONFIG="$BOB" "$TESSERA" session create "$TEST_IMAGE" --name bs \
	--cpu 0.1 --mem 16m --mount data --wait
check "bob reads the file" [ "$(TESSERA_CONFIG=$BOB T session exec bs -- cat /home/work/data/kept)" == "keep" ]
out=$(TESSERA_CONFIG=$BOB T session exec bs -- sh -c 'echo x > /home/work/data/new' 2>&1)
check "bob cannot write: Read-only file system ($out)" contains "$out" "Read-only file system"
check "... and nothing was written" [ ! -e "$DATA/folders/$(T folder info data --json | pyget id)/new" ]
out=$(TESSERA_CONFIG=$BOB T folder rm data 2>&1)
check "bob cannot remove the admin's folder ($out)" contains "$out" "only its owner"
TESSERA_CONFIG=$BOB T session rm bs >/dev/null

# carol: no share, no trace
cls=$(TESSERA_CONFIG=$CAROL T folder ls --json)
check "carol lists no folder" [ "$(tr -d ' \n' <<<"$cls")" == "[]" ]
seen=$(TESSERA_CONFIG=$CAROL T folder info data 2>&1)
missing=$(TESSERA_CONFIG=$CAROL T folder info nosuch 2>&1)
check "carol's folder info data reads as a missing folder ($seen)" [ "${seen//data/X}" == "${missing//nosuch/X}" ]
# Every folder route answers carol about the admin's folder exactly as
# about a missing one (status and body, the name aside).
CK=$(sed -n 's/^access_key *= *//p' "$CAROL")
CS=$(sed -n 's/^secret_key *= *//p' "$CAROL")
for route in "GET /v1/folders/{f}" "PATCH /v1/folders/{f} {\"name\":\"z\"}" "DELETE /v1/folders/{f}" \
	"DELETE /v1/folders/{f}?force=1" "POST /v1/folders/{f}/restore" \
	"POST /v1/folders/{f}/shares {\"email\":\"carol@folders.test\"}" \
	"DELETE /v1/folders/{f}/shares/bob@folders.test"; do
	read -r method path body <<<"$route"
	a=$(api "$CK" "$CS" "$method" "${path//\{f\}/data}" "${body-}")
	b=$(api "$CK" "$CS" "$method" "${path//\{f\}/nosuch}" "${body-}")
	check "carol: $method ${path//\{f\}/data} reads as a missing folder ($a)" [ "${a//data/X}" == "${b//nosuch/X}" ]
done
check "... and the folder is untouched" [ "$(T folder info data --json | pyget name)" == "data" ]
out=$(TESSERA_CONFIG=$CAROL T session create "$TEST_IMAGE" --name cs --cpu 0.1 --mem 16m --mount data 2>&1)
check "carol cannot mount it ($out)" contains "$out" "no folder data"
out=$(TESSERA_CONFIG=$CAROL T session create "$TEST_IMAGE" --name cs --cpu 0.1 --mem 16m --mount "data:/etc/x" 2>&1)
check "a system directory is refused as a mount path ($out)" contains "$out" "system directory"
check "unshare" T folder unshare data --with bob@folders.test
out=$(TESSERA_CONFIG=$BOB T session create "$TEST_IMAGE" --name bs2 --cpu 0.1 --mem 16m --mount data 2>&1)
check "after unshare bob cannot mount it ($out)" contains "$out" "no folder data"

# ---- a share taken away reaches running sessions (issue 27) ----
check "data is shared with bob read-write" T folder share data --with bob@folders.test --permission rw
check "bob's session mounts data writable" env TESSERA_CONFIG="$BOB" "$TESSERA" session create "$TEST_IMAGE" \
	--name bw --cpu 0.1 --mem 16m --mount data --wait
bob_writes() { TESSERA_CONFIG=$BOB T session exec bw -- sh -c "echo $1 > /home/work/data/$1" >/dev/null 2>&1; }
check "bob writes into it" bob_writes bw-1
out=$(T folder share data --with bob@folders.test --permission ro 2>&1)
check "making it read-only is refused while bob's session mounts it writable ($out)" \
	contains "$out" "folder data is mounted writable by session(s) bw of bob@folders.test"
out=$(T folder unshare data --with bob@folders.test 2>&1)
check "unshare is refused while bob's session mounts it, naming the session ($out)" \
	contains "$out" "folder data is mounted by session(s) bw of bob@folders.test"
check "... saying how to go on" contains "$out" "unshare it with force, which ends them"
check "... in one line" [ "$(wc -l <<<"$out")" -eq 1 ]
check "... and the share is still there" contains "$(T folder info data)" "bob@folders.test (rw)"
check "bob still writes" bob_writes bw-2
check "unshare --force" T folder unshare data --with bob@folders.test --force
bw_status() { TESSERA_CONFIG=$BOB T session info bw --json | pyget status; }
for _ in $(seq 1 300); do [[ $(bw_status) == TERMINATED ]] && break; sleep 0.1; done
check "... ended bob's session ($(bw_status))" [ "$(bw_status)" == TERMINATED ]
check "... on the owner's request, saying why" contains "$(TESSERA_CONFIG=$BOB T session info bw)" \
	"(folder data no longer shared)"
check "bob writes no more" not bob_writes bw-3
check "... and nothing came after the unshare" [ ! -e "$DATA/folders/$(T folder info data --json | pyget id)/bw-3" ]
check "the share is gone" not contains "$(T folder info data)" "bob@folders.test"

# ---- rm --force, trash, restore ----
check "a session mounts .local again" T session create "$TEST_IMAGE" --name holder --cpu 0.1 --mem 16m --wait
out=$(T folder rm .local 2>&1)
check "rm is refused while holder mounts it ($out)" contains "$out" "holder"
check "rm --force works" T folder rm .local --force
check "the directory is in the host's trash" [ -d "$DATA/folders/.trash/$LOCAL_ID" ]
check "folder ls --trash lists it" has_prefix_line "$(T folder ls --trash)" '\.local '
check "folder ls no longer lists it" not has_prefix_line "$(T folder ls)" '\.local '
check "folder restore brings it back" T folder restore .local
check "... with its files" [ -f "$DATA/folders/$LOCAL_ID/lib/python3.11/site-packages/mymod.py" ]
check "rename" T folder rename data data2
check "... the new name is listed" contains "$(T folder ls)" "data2"
T session rm holder >/dev/null

e2e_done
