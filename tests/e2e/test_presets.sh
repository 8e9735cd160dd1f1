#!/usr/bin/env bash
# Resource presets and the full launcher's session fields, through the
# CLI and the raw API as admins and users use them (docs/admin.md,
# "Resource presets"; docs/api.md, "POST /v1/sessions"):
# - a new install lists Small, Medium and One GPU; every user reads them,
#   only admins create, change and remove them, each value checked with a
#   one-line error; a restart finds what was changed;
# - a batch session with starts_at waits PENDING saying for what and is
#   never started before that time; a batch_timeout ends a command that
#   runs past it as ERROR saying so; preopen_ports are listed as apps.
# With TESSERA_TEST_STORE=postgresql the same runs on PostgreSQL.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server || { e2e_done; exit 1; }
ADMIN_CONFIG=$TESSERA_CONFIG
conf() { sed -n "s/^$1 *= *//p" "$ADMIN_CONFIG"; }
ENDPOINT=$(conf endpoint)
HOSTPORT=${ENDPOINT#*://}
HOSTPORT=${HOSTPORT%%/*}

hmac_hex() {  # hmac_hex KEYOPT DATA
	printf '%s' "$2" | openssl dgst -sha256 -mac HMAC -macopt "$1" -r | cut -d' ' -f1
}
# api_raw METHOD PATH [BODY]: one request signed as the admin (docs/api.md,
# "Authentication"). Sets RESP_CODE and RESP_BODY.
api_raw() {
	local method=$1 path=$2 body=${3-} has_body=$(( $# >= 3 ))
	local now date day body_hash key sig
	now=$(date +%s)
	date=$(LC_ALL=C date -u -d "@$now" '+%a, %d %b %Y %H:%M:%S GMT')
	day=$(date -u -d "@$now" '+%Y%m%d')
	body_hash=$(printf '%s' "$body" | openssl dgst -sha256 -r | cut -d' ' -f1)
	key=$(hmac_hex "key:$(conf secret_key)" "$day")
	sig=$(hmac_hex "hexkey:$key" "$(printf '%s\n%s\n%s\n%s\n%s' "$method" "$path" "$date" "$HOSTPORT" "$body_hash")")
	local args=(-s --path-as-is -o "$E2E_DIR/resp" -w '%{http_code}' -X "$method"
		-H "Host: $HOSTPORT" -H "Date: $date"
		-H "Authorization: TESSERA-HMAC-SHA256 Credential=$(conf access_key), Signature=$sig")
	if ((has_body)); then
		printf '%s' "$body" >"$E2E_DIR/body"
		args+=(-H 'Content-Type: application/json' --data-binary "@$E2E_DIR/body")
	fi
	RESP_CODE=$(curl "${args[@]}" "$ENDPOINT$path")
	RESP_BODY=$(cat "$E2E_DIR/resp" 2>/dev/null)
}

USER_CONF=$E2E_DIR/user.conf
out=$("$TESSERA" user create ann@presets.test --json) || fail "user create"
python3 -c '
import json, sys
r = json.load(sys.stdin)
print("endpoint = %s\naccess_key = %s\nsecret_key = %s" % (sys.argv[1], r["user"]["access_key"], r["secret_key"]))
' "$ENDPOINT" <<<"$out" >"$USER_CONF"
as_user() { TESSERA_CONFIG=$USER_CONF "$TESSERA" "$@"; }

# ---- the defaults, and who may change them ----
out=$(as_user preset ls 2>&1)
check "a user lists the default presets ($out)" has_prefix_line "$out" "Small  *1  *2 GiB  *0  *all"
check "  Medium" has_prefix_line "$out" "Medium  *4  *8 GiB  *0  *all"
check "  One GPU" has_prefix_line "$out" "One GPU  *2  *8 GiB  *1  *all"
out=$(as_user preset create Mine --cpu 1 --mem 1g 2>&1); rc=$?
check "a user cannot create a preset (exit $rc)" [ $rc -ne 0 ]
check "  and is told who can ($out)" contains "$out" "only an admin may create presets"
out=$(as_user preset rm Small 2>&1); rc=$?
check "a user cannot remove one (exit $rc: $out)" [ $rc -ne 0 ]

out=$("$TESSERA" preset create Large --cpu 8 --mem 32g --fgpu 0.5 --group h100 2>&1)
check "an admin creates Large ($out)" contains "$out" "preset Large: 8 CPU, 32 GiB, 0.5 fGPU, group h100"
out=$(as_user preset ls --json)
check "users see it, with its group" python3 -c '
import json, sys
p = {x["name"]: x for x in json.loads(sys.argv[1])}
assert p["Large"]["group"] == "h100", p
assert p["Large"]["resources"] == {"cpu": 8, "mem": 32 << 30, "fgpu": 0.5}, p
assert list(p)[:3] == ["Small", "Medium", "One GPU"], list(p)
' "$out"
out=$("$TESSERA" preset create Large --cpu 1 --mem 1g 2>&1); rc=$?
check "a name taken is refused (exit $rc: $out)" [ $rc -ne 0 ]
check "  saying so" contains "$out" "a preset named Large exists"
check "  in one line" [ "$(wc -l <<<"$out")" -eq 1 ]
out=$("$TESSERA" preset create Zero --cpu 0 --mem 1g 2>&1); rc=$?
check "cpu 0 is refused (exit $rc: $out)" contains "$out" "resources.cpu must be 0.01 to 1024"
out=$("$TESSERA" preset create Tiny --cpu 1 --mem 1k 2>&1); rc=$?
check "1 KiB of memory is refused (exit $rc: $out)" contains "$out" "resources.mem must be 6 MiB to 16 TiB"
out=$("$TESSERA" preset create Odd --cpu lots --mem 1g 2>&1); rc=$?
check "a CPU that is no number fails before any request (exit $rc: $out)" [ $rc -eq 2 ]
out=$("$TESSERA" preset create NoMem --cpu 1 2>&1); rc=$?
check "create without --mem is a usage error (exit $rc: $out)" contains "$out" "create needs --cpu and --mem"
out=$("$TESSERA" preset create 'a/b' --cpu 1 --mem 1g 2>&1); rc=$?
check "a name with a slash is refused (exit $rc: $out)" contains "$out" "preset name"
out=$("$TESSERA" preset create Grp --cpu 1 --mem 1g --group 'x y' 2>&1); rc=$?
check "a bad group name is refused (exit $rc: $out)" contains "$out" "group"
api_raw POST /v1/presets '{"name":"X","resources":{"cpu":1,"mem":"1g"},"colour":"red"}'
check "the API refuses an unknown field ($RESP_CODE $RESP_BODY)" [ "$RESP_CODE" = 400 ]
check "  naming it" contains "$RESP_BODY" "unknown field 'colour'"
api_raw PATCH /v1/presets/Large '{"name":"Larger"}'
check "a rename is refused ($RESP_CODE $RESP_BODY)" contains "$RESP_BODY" "cannot be changed"
api_raw GET '/v1/presets?x=1'
check "an unknown query parameter is refused ($RESP_CODE)" [ "$RESP_CODE" = 400 ]

out=$("$TESSERA" preset set Large --fgpu 1 --group all 2>&1)
check "set changes what is given ($out)" contains "$out" "preset Large: 8 CPU, 32 GiB, 1 fGPU, group all"
out=$("$TESSERA" preset set Large 2>&1); rc=$?
check "set with nothing to change is a usage error (exit $rc: $out)" contains "$out" "nothing to change"
out=$("$TESSERA" preset set Huge --cpu 2 2>&1); rc=$?
check "set of a missing preset fails (exit $rc: $out)" contains "$out" "no preset named 'Huge'"
out=$("$TESSERA" preset set 'One GPU' --cpu 4 2>&1)
check "a name with a space works through the CLI ($out)" contains "$out" "preset One GPU: 4 CPU"
check "Medium is removed" "$TESSERA" preset rm Medium
out=$("$TESSERA" preset rm Medium 2>&1); rc=$?
check "removing it again fails (exit $rc: $out)" contains "$out" "no preset named 'Medium'"

# A restart finds the presets as they were left.
stop_server
start_server || { e2e_done; exit 1; }
out=$("$TESSERA" preset ls 2>&1)
check "after a restart: Large as changed ($out)" has_prefix_line "$out" "Large  *8  *32 GiB  *1  *all"
check "  One GPU as changed" has_prefix_line "$out" "One GPU  *4  *8 GiB"
check "  Medium still gone" not contains "$out" "Medium"

# ---- the full launcher's fields ----
later=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
out=$("$TESSERA" session create "$TEST_IMAGE" --name later --batch --startup-command 'echo hi' --cpu 0.1 --mem 32m \
	--starts-at "$later" 2>&1)
check "a batch session for an hour ahead is created ($out)" contains "$out" "later"
check "  it waits PENDING" wait_status later PENDING
check "  saying for its start time" contains "$(jget later status_info)" "waiting for its start time"
check "  its starts_at is kept" contains "$(jget later starts_at)" "${later%Z}"
"$TESSERA" session rm later >/dev/null 2>&1
check "  and it is cancelled on request" wait_status later CANCELLED

soon=$(date -u -d '+3 seconds' +%Y-%m-%dT%H:%M:%SZ)
"$TESSERA" session create "$TEST_IMAGE" --name soon --batch --startup-command 'echo ran' --cpu 0.1 --mem 32m \
	--starts-at "$soon" >/dev/null
check "a batch session starting in 3 s runs to its end" wait_status soon TERMINATED
# Placed (SCHEDULED, in its status history) no sooner than its start time:
# a command this short may end before RUNNING is ever reported.
check "  not placed before its start time" python3 -c '
import json, sys
from datetime import datetime
s = json.loads(sys.argv[1])
f = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))
placed = [h["at"] for h in s["status_history"] if h["status"] == "SCHEDULED"]
assert placed and f(placed[0]) >= f(s["starts_at"]), (placed, s["starts_at"])
' "$("$TESSERA" session info soon --json)"

"$TESSERA" session create "$TEST_IMAGE" --name slow --batch --startup-command 'sleep 600' --cpu 0.1 --mem 32m \
	--batch-timeout 2 >/dev/null
check "a batch command past its batch_timeout is ended as ERROR" wait_status slow ERROR
check "  saying why ($(jget slow status_info))" contains "$(jget slow status_info)" "batch timeout"
out=$("$TESSERA" session create "$TEST_IMAGE" --name nob --batch-timeout 5 2>&1); rc=$?
check "batch_timeout on an interactive session is refused (exit $rc: $out)" contains "$out" "batch_timeout is for batch sessions"
out=$("$TESSERA" session create "$TEST_IMAGE" --name bad --starts-at tomorrow 2>&1); rc=$?
check "a start time that is no time is refused (exit $rc: $out)" contains "$out" "starts_at must be a time like"
out=$("$TESSERA" session create "$TEST_IMAGE" --name bad --preopen 7611 2>&1); rc=$?
check "the runner's port cannot be preopened (exit $rc: $out)" contains "$out" "runner's own"

"$TESSERA" session create "$TEST_IMAGE" --name ports --cpu 0.1 --mem 32m --preopen 8080 --preopen 6006 >/dev/null
check "a session with preopen ports runs" wait_status ports RUNNING
out=$("$TESSERA" session apps ports --json 2>&1)
check "its preopen ports are listed as apps ($out)" python3 -c '
import json, sys
apps = {a["name"]: a for a in json.loads(sys.argv[1])}
assert apps["port-8080"]["port"] == 8080 and apps["port-8080"]["preopen"] is True, apps
assert apps["port-6006"]["port"] == 6006, apps
' "$out"
out=$("$TESSERA" session info ports 2>&1)
check "session info names them ($out)" contains "$out" "8080, 6006"
"$TESSERA" session rm ports >/dev/null 2>&1

e2e_done
