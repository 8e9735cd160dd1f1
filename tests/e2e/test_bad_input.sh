#!/usr/bin/env bash
# Bad input gets a clear one-line error and a non-zero exit; the server keeps
# serving.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server || { e2e_done; exit 1; }

expect_error() {  # expect_error "what" "needle" command...
	local what=$1 needle=$2; shift 2
	local out rc
	out=$("$@" 2>&1 >/dev/null); rc=$?
	if ((rc != 0)) && [[ $(wc -l <<<"$out") -eq 1 ]] && [[ "$out" == *"$needle"* ]]; then
		ok "$what: $out"
	else
		fail "$what (rc=$rc): $out"
	fi
}
expect_error "negative CPU" "cpu" "$TESSERA" session create "$TEST_IMAGE" --cpu -1
expect_error "zero CPU" "cpu" "$TESSERA" session create "$TEST_IMAGE" --cpu 0
expect_error "bad memory size" "mem" "$TESSERA" session create "$TEST_IMAGE" --mem 12x
expect_error "missing image" "not present" "$TESSERA" session create no-such-image:404
expect_error "malformed image" "image" "$TESSERA" session create 'UPPER/Case:tag'
expect_error "bad name" "name" "$TESSERA" session create "$TEST_IMAGE" --name '-bad'
expect_error "name too long" "name" "$TESSERA" session create "$TEST_IMAGE" --name "$(printf 'a%.0s' $(seq 1 70))"
expect_error "reserved env" "TESSERA_" "$TESSERA" session create "$TEST_IMAGE" --env TESSERA_X=1
expect_error "unknown session" "no session" "$TESSERA" session info nope
expect_error "exec on unknown session" "no session" "$TESSERA" session exec nope -- true

# Raw API: unsigned, malformed, oversized.
endpoint=$(sed -n 's/^endpoint *= *//p' "$TESSERA_CONFIG")
code=$(curl -s -o "$E2E_DIR/r" -w '%{http_code}' "$endpoint/v1/sessions")
check "unsigned request is 401 ($code)" [ "$code" == "401" ]
check "error body is JSON with a message" python3 -c "import json; e=json.load(open('$E2E_DIR/r'))['error']; assert e['code'] and e['message']"
code=$(head -c 2000000 /dev/zero | tr '\0' a | curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary @- "$endpoint/v1/sessions")
check "oversized body is 413 ($code)" [ "$code" == "413" ]

"$TESSERA" session create "$TEST_IMAGE" --name dup --cpu 0.1 --mem 16m >/dev/null
expect_error "duplicate active name" "already" "$TESSERA" session create "$TEST_IMAGE" --name dup --cpu 0.1 --mem 16m

"$TESSERA" session ls >/dev/null
check "the server still serves" [ $? -eq 0 ]
check "the server process is alive" kill -0 "$SERVER_PID"
e2e_done
