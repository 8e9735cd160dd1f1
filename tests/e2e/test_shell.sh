#!/usr/bin/env bash
# The CLI's side of session apps (docs/apps.md): `session apps` lists the
# terminal of a busybox session; `session shell` types into it through the
# proxy (input from a pipe, output, the shell's exit status, the work
# user, the session's environment, a shell ended by a signal, much output,
# the end of the input); `session app` prints a one-time URL whose setup
# sets a cookie once and refuses a second use; another user reaches
# nothing; an admin reaches a user's session with --owner; bad arguments
# fail with one line; a shell whose session is removed ends with an error.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server --app-ports "$(e2e_free_port_range 8)" || { e2e_done; exit 1; }

# sh_run INPUT [ARGS...]: `session shell ARGS` with INPUT piped in. Sets
# RC (its exit status) and OUT (stdout and stderr, CRs dropped: a
# terminal's lines end in CRLF). A shell can outlive a broken proxy:
# never wait on one forever.
sh_run() {
	local input=$1
	shift
	printf '%s' "$input" | timeout 120 "$TESSERA" session shell "$@" >"$E2E_DIR/sh.out" 2>&1
	RC=$?
	OUT=$(tr -d '\r' <"$E2E_DIR/sh.out")
}
# The output on one line, for check's descriptions.
flat() { tr '\n' '|' <<<"$OUT" | tail -c 300; }
crlf() { tr -d '\r'; }

"$TESSERA" session create "$TEST_IMAGE" --name s --cpu 0.5 --mem 64m --wait >/dev/null 2>&1
check "a busybox session runs" wait_status s RUNNING

# ---- apps ----
out=$("$TESSERA" session apps s 2>&1)
rc=$?
check "session apps lists the sessions's apps ($rc)" [ $rc -eq 0 ]
check "with a header" has_prefix_line "$out" "NAME  *PROTOCOL  *PORT"
check "and the terminal, protocol pty, no port: $(grep terminal <<<"$out")" has_prefix_line "$out" "terminal  *pty  *-$"
json=$("$TESSERA" session apps s --json)
check "session apps --json: the terminal first" \
	python3 -c 'import json,sys; a=json.loads(sys.argv[1]); assert a[0]["name"]=="terminal" and a[0]["protocol"]=="pty"' "$json" 2>/dev/null

# ---- shell: input from a pipe ----
sh_run $'echo hello-$((6*7))\nexit 3\n' s
check "session shell runs what it is given: hello-42 in $(flat)" contains "$OUT" hello-42
check "and exits with the shell's status ($RC)" [ $RC -eq 3 ]

sh_run $'echo "u=$(id -u)="\necho "d=$(pwd)="\necho "n=$TESSERA_SESSION_NAME="\nexit\n' s
# The terminal echoes the input too: look for what only the output has.
check "the shell runs as the work user, uid 1000: $(grep -o 'u=[0-9][^=]*=' <<<"$OUT" | head -n 1)" contains "$OUT" "u=1000="
check "in /home/work: $(grep -o 'd=/[^=]*=' <<<"$OUT" | head -n 1)" contains "$OUT" "d=/home/work="
check "with the session's environment: $(grep -o 'n=[^$=]*=' <<<"$OUT" | head -n 1)" contains "$OUT" "n=s="
check "exit with no status exits 0 ($RC)" [ $RC -eq 0 ]

# No `exit`: the end of the input ends the shell, as Ctrl-D typed at its
# prompt would.
sh_run $'echo no-exit-$((1+1))\n' s
check "the end of piped input ends the shell ($RC)" [ $RC -eq 0 ]
check "after its output: $(flat)" contains "$OUT" no-exit-2

sh_run $'kill -9 $$\n' s
check "a shell killed by a signal: 128 + the signal ($RC)" [ $RC -eq 137 ]

# Much output, in as many frames as the runner makes of it.
sh_run $'i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done\nexit\n' s
n=$(grep -o 'line-[0-9][0-9]*' <<<"$OUT" | sort -u | wc -l)
check "3000 lines of output come back whole ($n, $RC)" [ "$n" -eq 3000 -a $RC -eq 0 ]

# ---- app: one-time URLs ----
url=$("$TESSERA" session app s terminal 2>"$E2E_DIR/app.err")
rc=$?
check "session app prints a URL ($rc: $url)" [ $rc -eq 0 ]
check "one line, the proxy's setup with a token" \
	bash -c '[[ "$1" =~ ^http://[^/[:space:]]+/__tessera/setup\?token=[0-9a-f]{64}$ ]]' _ "$url"
check "nothing on stderr when it is not a terminal" [ ! -s "$E2E_DIR/app.err" ]
origin=${url%%/__tessera/*}
code=$(curl -s -o /dev/null -D "$E2E_DIR/setup.h" -w '%{http_code}' "$url")
check "the URL's setup redirects ($code)" [ "$code" == 302 ]
cookie=$(sed -n 's/^[Ss]et-[Cc]ookie: *\(tessera_app[^;]*\).*/\1/p' "$E2E_DIR/setup.h" | tr -d '\r' | head -n 1)
check "and sets the app's cookie (${cookie%%=*})" [ -n "$cookie" ]
check "HttpOnly" grep -qi '^set-cookie: tessera_app.*httponly' "$E2E_DIR/setup.h"
code=$(curl -s -o /dev/null -w '%{http_code}' -b "$cookie" "$origin/")
check "the cookie opens the terminal's page ($code)" [ "$code" == 200 ]
code=$(curl -s -o /dev/null -w '%{http_code}' "$origin/")
check "without it: 403 ($code)" [ "$code" == 403 ]
code=$(curl -s -o "$E2E_DIR/replay.html" -w '%{http_code}' "$url")
check "the URL's second use is refused ($code)" [ "$code" == 403 ]
check "by a page saying why" [ -s "$E2E_DIR/replay.html" ]

url=$("$TESSERA" session app s --port 5000)
rc=$?
check "session app --port prints a URL ($rc: $url)" \
	bash -c '[ "$2" -eq 0 ] && [[ "$1" =~ ^http://[^/[:space:]]+/__tessera/setup\?token=[0-9a-f]{64}$ ]]' _ "$url" "$rc"
json=$("$TESSERA" session app s terminal --json)
check "session app --json: the URL and how long it lasts" \
	python3 -c 'import json,sys; a=json.loads(sys.argv[1]); assert a["app"]=="terminal" and a["url"].startswith("http://") and a["expires_in"]==60' "$json" 2>/dev/null

# ---- bad arguments: one line, non-zero ----
for args in "app s --port 0" "app s --port 65536" "app s --port x" "app s" "app s terminal --port 8888" \
	"app s no-such-app" "app no-such-session terminal" "apps no-such-session" "shell no-such-session" \
	"shell" "apps" "shell s extra"; do
	# shellcheck disable=SC2086
	err=$("$TESSERA" session $args 2>&1 >/dev/null </dev/null)
	rc=$?
	check "session $args fails with one line ($rc: $err)" bash -c '[ "$1" -ne 0 ] && [ -n "$2" ] && [ "$(printf "%s" "$2" | wc -l)" -eq 0 ]' _ "$rc" "$err"
done
err=$("$TESSERA" session shell no-such-session 2>&1 </dev/null)
check "a missing session is named as such ($err)" contains "$err" "no session"

# ---- another user ----
bob=$(PYTHONPATH=$(dirname "$0") python3 - "$TESSERA_CONFIG" <<'PY'
import sys
from signed import Api, load_conf
c = load_conf(sys.argv[1])
st, r = Api(c["endpoint"], c["access_key"], c["secret_key"]).call(
    "POST", "/v1/users", {"email": "bob@shell.test", "password": "bob password 1"})
assert st == 201, st
print("endpoint = %s\naccess_key = %s\nsecret_key = %s" % (c["endpoint"], r["user"]["access_key"], r["secret_key"]))
PY
)
BOB_CONF=$E2E_DIR/bob.conf
printf '%s\n' "$bob" >"$BOB_CONF"
check "a second user is made" grep -q '^access_key = ' "$BOB_CONF"
sid=$(jget s id)
for ref in s "$sid"; do
	TESSERA_CONFIG=$BOB_CONF sh_run $'echo bob-was-$((1+1))\nexit\n' "$ref"
	check "another user's session shell $ref fails ($RC)" [ $RC -ne 0 ]
	check "saying there is no such session ($OUT)" contains "$OUT" "no session"
	check "in one line, without reaching the shell" bash -c '[ "$(printf "%s" "$1" | wc -l)" -eq 0 ] && [[ "$1" != *bob-was-2* ]]' _ "$OUT"
	err=$(TESSERA_CONFIG=$BOB_CONF "$TESSERA" session app "$ref" terminal 2>&1)
	check "nor an app URL of it ($err)" bash -c '[[ "$1" == *"no session"* && "$1" != *http://* ]]' _ "$err"
	err=$(TESSERA_CONFIG=$BOB_CONF "$TESSERA" session apps "$ref" 2>&1)
	check "nor its list of apps ($err)" contains "$err" "no session"
done

# Bob's own session, which the admin reaches with --owner.
TESSERA_CONFIG=$BOB_CONF "$TESSERA" session create "$TEST_IMAGE" --name bs --cpu 0.5 --mem 64m --wait >/dev/null 2>&1
st=$(TESSERA_CONFIG=$BOB_CONF jget bs status)
check "bob's session runs ($st)" [ "$st" == RUNNING ]
TESSERA_CONFIG=$BOB_CONF sh_run $'echo bob-$((2*4))\nexit 5\n' bs
check "bob opens a shell in his session ($RC): $(flat)" bash -c '[ "$1" -eq 5 ] && [[ "$2" == *bob-8* ]]' _ "$RC" "$OUT"
sh_run $'echo admin-$((3*3))\nexit\n' bs --owner bob@shell.test
check "an admin opens it with --owner ($RC): $(flat)" bash -c '[ "$1" -eq 0 ] && [[ "$2" == *admin-9* ]]' _ "$RC" "$OUT"
sh_run '' bs
check "and without --owner, bs is the admin's own name: none ($OUT)" contains "$OUT" "no session"

# ---- a shell whose session ends ----
fifo=$E2E_DIR/in.fifo
mkfifo "$fifo"
"$TESSERA" session shell s <"$fifo" >"$E2E_DIR/live.out" 2>"$E2E_DIR/live.err" &
live=$!
exec 3>"$fifo"
# In a subshell: a shell that ended already must not take this script
# down with SIGPIPE.
(echo 'echo ready-$((5+5))' >&3) 2>/dev/null
for _ in $(seq 1 600); do
	crlf <"$E2E_DIR/live.out" | grep -q ready-10 && break
	kill -0 "$live" 2>/dev/null || break
	sleep 0.1
done
check "a shell left open answers" bash -c "tr -d '\r' <'$E2E_DIR/live.out' | grep -q ready-10"
"$TESSERA" session rm s >/dev/null
for _ in $(seq 1 600); do kill -0 "$live" 2>/dev/null || break; sleep 0.1; done
check "it ends when its session is removed" not kill -0 "$live" 2>/dev/null
kill "$live" 2>/dev/null
wait "$live"
rc=$?
exec 3>&-
check "with a non-zero status ($rc)" [ $rc -ne 0 ]
check "and at most one line on stderr ($(cat "$E2E_DIR/live.err"))" [ "$(wc -l <"$E2E_DIR/live.err")" -le 1 ]
err=$("$TESSERA" session shell s </dev/null 2>&1)
rc=$?
check "a removed session has no shell ($rc: $err)" bash -c '[ "$1" -ne 0 ] && [ "$(printf "%s" "$2" | wc -l)" -eq 0 ]' _ "$rc" "$err"

TESSERA_CONFIG=$BOB_CONF "$TESSERA" session rm bs >/dev/null

# A shell opened the moment a session is RUNNING, over and over, with the
# app proxy's ports reused: its runner may not listen yet (Docker's proxy
# then accepts and closes), which the app proxy waits out (issue 28).
bad=0
for i in $(seq 1 15); do
	"$TESSERA" session create "$TEST_IMAGE" --name loop$i --cpu 0.2 --mem 32m --wait >/dev/null 2>&1
	out=$(printf 'echo loop-$((40 + 2))\n' | timeout 60 "$TESSERA" session shell loop$i 2>&1)
	[[ $out == *loop-42* ]] || { bad=$((bad + 1)); e2e_log "loop $i: $(tail -2 <<<"$out")"; }
	"$TESSERA" session rm loop$i >/dev/null
done
check "15 shells each opened right after create --wait all answer ($bad failed)" [ $bad -eq 0 ]
e2e_done
