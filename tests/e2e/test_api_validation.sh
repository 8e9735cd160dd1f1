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
check "the server process is alive" kill -0 "$SERVER_PID"
e2e_done
