#!/usr/bin/env bash
# The server itself (not only the CLI) refuses bad input with 400 and a
# message naming the field, and bad signatures with 401, on raw requests
# signed here with the openssl command line exactly as docs/api.md
# ("Authentication") says; it keeps serving afterwards.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server || { e2e_done; exit 1; }

conf() { sed -n "s/^$1 *= *//p" "$TESSERA_CONFIG"; }
ENDPOINT=$(conf endpoint)
ACCESS_KEY=$(conf access_key)
SECRET_KEY=$(conf secret_key)
HOSTPORT=${ENDPOINT#*://}
HOSTPORT=${HOSTPORT%%/*}

hmac_hex() {  # hmac_hex KEYOPT DATA: hex HMAC-SHA256 (KEYOPT key:... or hexkey:...)
	printf '%s' "$2" | openssl dgst -sha256 -mac HMAC -macopt "$1" -r | cut -d' ' -f1
}

# api_raw METHOD PATH [BODY]: one signed request. Sets RESP_CODE and
# RESP_BODY. Overrides for the negative cases: API_SECRET (sign with another
# secret), API_KEY (another access key), API_DATE_SHIFT (seconds added to
# the Date), API_SIGN_BODY (sign this body but send BODY).
api_raw() {
	local method=$1 path=$2 body=${3-} has_body=$(( $# >= 3 ))
	local now=$(( $(date +%s) + ${API_DATE_SHIFT:-0} ))
	local date day body_hash key sig
	date=$(LC_ALL=C date -u -d "@$now" '+%a, %d %b %Y %H:%M:%S GMT')
	day=$(date -u -d "@$now" '+%Y%m%d')
	body_hash=$(printf '%s' "${API_SIGN_BODY-$body}" | openssl dgst -sha256 -r | cut -d' ' -f1)
	key=$(hmac_hex "key:${API_SECRET:-$SECRET_KEY}" "$day")
	sig=$(hmac_hex "hexkey:$key" "$(printf '%s\n%s\n%s\n%s\n%s' "$method" "$path" "$date" "$HOSTPORT" "$body_hash")")
	local args=(-s --path-as-is -o "$E2E_DIR/resp" -w '%{http_code}' -X "$method"
		-H "Host: $HOSTPORT" -H "Date: $date"
		-H "Authorization: TESSERA-HMAC-SHA256 Credential=${API_KEY:-$ACCESS_KEY}, Signature=$sig")
	if ((has_body)); then
		printf '%s' "$body" > "$E2E_DIR/body"
		args+=(-H 'Content-Type: application/json' --data-binary "@$E2E_DIR/body")
	fi
	RESP_CODE=$(curl "${args[@]}" "$ENDPOINT$path")
	RESP_BODY=$(cat "$E2E_DIR/resp" 2>/dev/null)
}

# The error body's message (empty when the body is not {"error":{...}}).
err_message() {
	python3 -c '
import json, sys
try:
    e = json.loads(sys.argv[1])["error"]
    assert isinstance(e["code"], str) and e["code"]
    print(e["message"])
except Exception:
    pass' "$RESP_BODY"
}

# expect STATUS NEEDLE "what" METHOD PATH [BODY]
expect() {
	local status=$1 needle=$2 what=$3; shift 3
	api_raw "$@"
	local msg; msg=$(err_message)
	if [[ "$RESP_CODE" == "$status" ]] && [[ -n "$msg" ]] && contains "$msg" "$needle"; then
		ok "$what: $RESP_CODE $msg"
	else
		fail "$what: got $RESP_CODE $RESP_BODY (expected $status naming '$needle')"
	fi
}

IMG=$TEST_IMAGE
# A signed request that is fine, first: the signing here is right.
api_raw GET /v1/auth/whoami
check "signed whoami is 200 ($RESP_CODE)" [ "$RESP_CODE" == 200 ]
check "whoami names the admin" contains "$RESP_BODY" "admin@tessera.local"

# Create requests the server must refuse, each naming the field.
expect 400 resources.cpu "negative cpu" POST /v1/sessions "{\"image\":\"$IMG\",\"resources\":{\"cpu\":-1}}"
expect 400 resources.cpu "cpu 0" POST /v1/sessions "{\"image\":\"$IMG\",\"resources\":{\"cpu\":0}}"
expect 400 resources.cpu "cpu \"abc\"" POST /v1/sessions "{\"image\":\"$IMG\",\"resources\":{\"cpu\":\"abc\"}}"
expect 400 resources.mem "mem -5" POST /v1/sessions "{\"image\":\"$IMG\",\"resources\":{\"mem\":-5}}"
expect 400 resources.mem "mem \"12x\"" POST /v1/sessions "{\"image\":\"$IMG\",\"resources\":{\"mem\":\"12x\"}}"
# An amount is the amount alone (issue 27: "  1g" was taken as 1g).
expect 400 resources.mem "mem \"  1g\" (leading spaces)" POST /v1/sessions "{\"image\":\"$IMG\",\"resources\":{\"mem\":\"  1g\"}}"
expect 400 resources.mem "mem \"1g \" (a trailing space)" POST /v1/sessions "{\"image\":\"$IMG\",\"resources\":{\"mem\":\"1g \"}}"
expect 400 resources.cpu "cpu \" 1\"" POST /v1/sessions "{\"image\":\"$IMG\",\"resources\":{\"cpu\":\" 1\"}}"
expect 400 quota "folder quota \" 1g\"" POST /v1/folders '{"name":"spaced","quota":" 1g"}'
expect 400 max_mem "policy max_mem \" 1g\"" PUT /v1/config/policy.default '{"value":{"max_mem":" 1g"}}'
expect 400 image "image missing" POST /v1/sessions '{"resources":{"cpu":1}}'
expect 400 image "image 5" POST /v1/sessions '{"image":5}'
expect 400 name "bad name" POST /v1/sessions "{\"image\":\"$IMG\",\"name\":\"-bad\"}"
expect 400 count "count 0" POST /v1/sessions "{\"image\":\"$IMG\",\"count\":0}"
expect 400 bogus "unknown field" POST /v1/sessions "{\"image\":\"$IMG\",\"bogus\":1}"
expect 400 JSON "invalid JSON" POST /v1/sessions '{"image":'
expect 400 TESSERA_ "env with the TESSERA_ prefix" POST /v1/sessions "{\"image\":\"$IMG\",\"env\":{\"TESSERA_X\":\"1\"}}"
# exec bodies are checked before the session is looked up
expect 400 command "exec with an empty command" POST /v1/sessions/no-such/exec '{"command":[]}'
expect 400 "command[1]" "exec with a non-string argument" POST /v1/sessions/no-such/exec '{"command":["ls",5]}'
check "refusals carry the invalid_argument code" contains "$RESP_BODY" '"invalid_argument"'

# Authentication failures.
API_SECRET=0123456789abcdef0123456789abcdef01234567 expect 401 signature "wrong signature" GET /v1/sessions
API_DATE_SHIFT=-1200 expect 401 clock "Date 20 minutes old" GET /v1/sessions
API_KEY=TKNOSUCHKEY000000000 expect 401 "unknown access key" "unknown access key" GET /v1/sessions
API_SIGN_BODY='{"image":"other"}' expect 401 signature "body changed after signing" \
	POST /v1/sessions "{\"image\":\"$IMG\"}"
api_raw GET /v1/sessions
check "plain signed list is 200 ($RESP_CODE)" [ "$RESP_CODE" == 200 ]

# After all that, a valid create still works and the session is listed.
api_raw POST /v1/sessions "{\"image\":\"$IMG\",\"name\":\"apiv\",\"resources\":{\"cpu\":0.1,\"mem\":\"16m\"}}"
check "a valid create is accepted ($RESP_CODE)" [ "${RESP_CODE:0:1}" == 2 ]
api_raw GET /v1/sessions
check "the new session is listed" contains "$RESP_BODY" '"apiv"'
# ---- the session list: filters, pages and their continue tokens ----
# A per-user limit keeps the next five PENDING (apiv holds 0.1 CPU).
"$TESSERA" config set policy.default '{"max_cpu": 0.15}' >/dev/null
api_raw POST /v1/sessions "{\"image\":\"$IMG\",\"name\":\"pg\",\"count\":5,\"resources\":{\"cpu\":0.1,\"mem\":\"16m\"}}"
check "five more sessions are created ($RESP_CODE)" [ "$RESP_CODE" == 201 ]
wait_status apiv RUNNING >/dev/null
names() { python3 -c 'import json,sys; print(" ".join(s["name"] for s in json.loads(sys.argv[1])["sessions"]))' "$RESP_BODY"; }
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$RESP_BODY" "$1"; }
api_raw GET /v1/sessions
whole=$(names)
check "without limit: the whole list and no continue ($whole)" eval '[[ $(wc -w <<<"$whole") == 6 && -z $(field continue) ]]'
paged="" pages=0 path="/v1/sessions?limit=2"
while :; do
	api_raw GET "$path"
	[[ $RESP_CODE == 200 ]] || break
	paged+="$(names) "
	pages=$((pages + 1))
	tok=$(field continue)
	[[ -n $tok ]] || break
	path="/v1/sessions?limit=2&continue=$tok"
done
check "limit=2 gives 3 pages whose sessions are the whole list, in order ($pages: $paged)" \
	eval '[[ $pages == 3 && "${paged% }" == "$whole" ]]'
api_raw GET "/v1/sessions?limit=6"
check "a page that holds the rest has no continue" eval '[[ $(wc -w <<<"$(names)") == 6 && -z $(field continue) ]]'
api_raw GET "/v1/sessions?status=PENDING"
check "status=PENDING: the five queued ones ($(names))" [ "$(names)" == "pg-1 pg-2 pg-3 pg-4 pg-5" ]
api_raw GET "/v1/sessions?status=running"
check "status=running (any case): apiv ($(names))" [ "$(names)" == "apiv" ]
api_raw GET "/v1/sessions?status=PENDING,RUNNING&limit=4"
tok=$(field continue)
check "a filtered page of 4 ($(names))" [ "$(names)" == "apiv pg-1 pg-2 pg-3" ]
api_raw GET "/v1/sessions?status=PENDING,RUNNING&limit=4&continue=$tok"
check "... and its next page ($(names))" [ "$(names)" == "pg-4 pg-5" ]
api_raw GET "/v1/sessions?owner=admin@tessera.local&status=CANCELLED"
check "owner and a status no session has: an empty list ($RESP_CODE)" eval '[[ $RESP_CODE == 200 && -z $(names) ]]'
expect 400 limit "limit 0" GET "/v1/sessions?limit=0"
expect 400 limit "limit 1001" GET "/v1/sessions?limit=1001"
expect 400 limit "limit abc" GET "/v1/sessions?limit=abc"
# Whole numbers in a query are digits only (strtol took spaces and signs).
expect 400 limit "limit with a space before it" GET "/v1/sessions?limit=%205"
expect 400 limit "limit +5" GET "/v1/sessions?limit=%2B5"
expect 400 timeout_s "timeout_s with a space before it" GET "/v1/sessions/apiv?wait=1&timeout_s=%201"
expect 400 tail "tail +1" GET "/v1/sessions/apiv/logs?tail=%2B1"
expect 400 tail "tail empty" GET "/v1/sessions/apiv/logs?tail="
expect 400 since "stats since with a space" GET "/v1/sessions/apiv/stats?since=%200"
expect 400 status "unknown status" GET "/v1/sessions?status=SLEEPING"
expect 400 status "empty status in a list" GET "/v1/sessions?status=PENDING,,RUNNING"
expect 400 owner "owner not an email" GET "/v1/sessions?owner=nobody"
expect 404 nobody@example.org "unknown owner" GET "/v1/sessions?owner=nobody@example.org"
expect 400 continue "a made-up token" GET "/v1/sessions?limit=2&continue=abc"
expect 400 "other filters" "a token of another filter" GET "/v1/sessions?status=RUNNING&limit=2&continue=$tok"
expect 400 "unknown query parameter 'sort'" "an unknown parameter" GET "/v1/sessions?sort=name"
expect 400 all "all=maybe" GET "/v1/sessions?all=maybe"
# A user who is no admin sees their own sessions only.
api_raw POST /v1/users '{"email":"pager@example.org","password":"pager-password-1"}'
user_ak=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["user"]["access_key"])' "$RESP_BODY" 2>/dev/null)
user_sk=$(field secret_key)
API_KEY=$user_ak API_SECRET=$user_sk api_raw GET "/v1/sessions?limit=10"
check "another user's list is empty ($RESP_CODE $(names))" eval '[[ $RESP_CODE == 200 && -z $(names) ]]'
API_KEY=$user_ak API_SECRET=$user_sk expect 403 admin "a user asks for the admin's sessions" \
	GET "/v1/sessions?owner=admin@tessera.local"
API_KEY=$user_ak API_SECRET=$user_sk api_raw GET "/v1/sessions?owner=pager@example.org"
check "... and may name themself ($RESP_CODE)" [ "$RESP_CODE" == 200 ]

check "the server process is alive" kill -0 "$SERVER_PID"
e2e_done
