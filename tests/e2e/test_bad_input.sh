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

# Two Content-Length headers that differ (RFC 9112, 6.3: where the body
# ends is ambiguous): 400 from the API and the web UI's relay alike,
# before the signature or login is looked at (it was 401), and the
# connection is closed.
web_url=$(sed -n 's/^web_url *= *//p' "$TESSERA_CONFIG")
two_lengths() {  # two_lengths BASE_URL PATH: the status line's code
	python3 - "$1" "$2" <<'PY'
import socket, sys
hostport = sys.argv[1].split("://", 1)[1].rstrip("/")
host, port = hostport.rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=30)
s.sendall(("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
           "Content-Length: 2\r\nContent-Length: 40\r\n\r\n{}" % (sys.argv[2], hostport)).encode())
data = b""
while True:  # read to the end: the server closes the connection
    b = s.recv(65536)
    if not b:
        break
    data += b
print(data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/1.1 ") else "none")
PY
}
code=$(two_lengths "$endpoint" /v1/sessions)
check "two differing Content-Lengths to the API: 400 ($code)" [ "$code" == "400" ]
check "web_url is in the config" [ -n "$web_url" ]
code=$(two_lengths "$web_url" /api/v1/sessions)
check "two differing Content-Lengths to the web UI: 400 ($code)" [ "$code" == "400" ]

"$TESSERA" session create "$TEST_IMAGE" --name dup --cpu 0.1 --mem 16m >/dev/null
expect_error "duplicate active name" "already" "$TESSERA" session create "$TEST_IMAGE" --name dup --cpu 0.1 --mem 16m

"$TESSERA" session ls >/dev/null
check "the server still serves" [ $? -eq 0 ]
check "the server process is alive" kill -0 "$SERVER_PID"
e2e_done
