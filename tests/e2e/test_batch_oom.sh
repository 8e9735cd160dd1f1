#!/usr/bin/env bash
# Batch sessions end with their command (TERMINATED on 0, ERROR with the
# code otherwise, and `create --wait` exits with it); a process killed for
# passing a session's memory limit is reported while an interactive
# session stays RUNNING, and ends a batch one as ERROR saying so; an
# admin's session name is the admin's own (another user's is reached by id
# or --owner); `rm ..` is "no session"; a removed ERROR session leaves the
# list; a login lock holds one address, not the account.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server || { e2e_done; exit 1; }
T=$TESSERA
IMG=$TEST_IMAGE
ADMIN_CONF=$TESSERA_CONFIG
matches() { [[ "$1" =~ $2 ]]; }

# ---- batch sessions ---------------------------------------------------
out=$("$T" session create "$IMG" --name b-fail --batch --startup-command 'echo working; exit 3' \
	--cpu 0.1 --mem 32m --wait --timeout 120 2>&1)
rc=$?
check "--wait on a batch session that exits 3 exits 3 (rc $rc)" [ "$rc" == 3 ]
check "it says how the session ended ($out)" contains "$out" "session b-fail ended ERROR: batch command failed with exit code 3"
check "the batch session is ERROR" [ "$(jget b-fail status)" == ERROR ]
check "with exit code 3" [ "$(jget b-fail exit_code)" == 3 ]
check "its type is batch" [ "$(jget b-fail type)" == batch ]
check "its output is kept for session logs" contains "$("$T" session logs b-fail)" working

out=$("$T" session create "$IMG" --name b-ok --batch --startup-command true --cpu 0.1 --mem 32m \
	--wait --timeout 120 2>&1)
rc=$?
check "--wait on a batch session that exits 0 exits 0 (rc $rc)" [ "$rc" == 0 ]
check "it says TERMINATED ($out)" contains "$out" "session b-ok ended TERMINATED"
check "the batch session is TERMINATED" [ "$(jget b-ok status)" == TERMINATED ]
check "with exit code 0" [ "$(jget b-ok exit_code)" == 0 ]
check "ls --all shows the TYPE column" has_prefix_line "$("$T" session ls --all)" "NAME  *STATUS  *TYPE"

check "an interactive session with a command that ends stays RUNNING" \
	"$T" session create "$IMG" --name inter --startup-command true --cpu 0.1 --mem 32m --wait
sleep 1
check "... and is RUNNING after its command ended" [ "$(jget inter status)" == RUNNING ]
check "... and is interactive" [ "$(jget inter type)" == interactive ]

check "the API refuses a batch session without a command" not "$T" session create "$IMG" --batch

# ---- OOM kills --------------------------------------------------------
# busybox tail keeps a line whole in memory: 100 MiB without a newline
# passes a 32 MiB limit (swap is as large as the limit: none).
HOG='head -c 100m /dev/zero | tail'
check "an interactive session that will pass its memory limit starts" \
	"$T" session create "$IMG" --name hog --startup-command "sleep 1; $HOG; sleep 100000" --cpu 0.1 --mem 32m --wait
kills=0
for _ in $(seq 1 300); do
	kills=$(jget hog oom_kills)
	[[ "$kills" =~ ^[1-9] ]] && break
	sleep 0.1
done
check "the kill is counted (oom_kills $kills)" matches "$kills" '^[1-9]' 
info=$("$T" session info hog)
# The kernel may kill more than one process of the pipeline in one go:
# the words follow the count.
check "session info says a process was killed for the 32 MiB limit" \
	matches "$info" "(a process was|[0-9]+ processes were) killed for exceeding the 32 MiB memory limit"
check "session info has an OOM kills line" \
	matches "$info" $'(^|\n)OOM kills: *[1-9][0-9]* process(es)? killed for exceeding the 32 MiB memory limit'

check "the interactive session stays RUNNING" [ "$(jget hog status)" == RUNNING ]
check "the history has the kill under RUNNING" bash -c "'$T' session info hog --json | python3 -c '
import json, sys
h = json.load(sys.stdin)[\"status_history\"]
sys.exit(0 if any(e[\"status\"] == \"RUNNING\" and \"killed for exceeding\" in e[\"info\"] for e in h) else 1)'"
# A second kill, through exec: counted too.
"$T" session exec hog -- sh -c "$HOG" >/dev/null 2>&1
for _ in $(seq 1 300); do
	kills=$(jget hog oom_kills)
	[[ "$kills" =~ ^[2-9] ]] && break
	sleep 0.1
done
check "a second kill is counted (oom_kills $kills)" matches "$kills" '^[2-9]' 
check "still RUNNING" [ "$(jget hog status)" == RUNNING ]

out=$("$T" session create "$IMG" --name b-oom --batch --startup-command "$HOG" --cpu 0.1 --mem 32m \
	--wait --timeout 120 2>&1)
rc=$?
check "--wait on an OOM-killed batch command exits 137 (rc $rc)" [ "$rc" == 137 ]
check "the batch session is ERROR" [ "$(jget b-oom status)" == ERROR ]
check "saying it was OOM-killed ($(jget b-oom status_info))" contains "$(jget b-oom status_info)" "OOM-killed"
check "and naming the limit" contains "$(jget b-oom status_info)" "32 MiB memory limit"

# ---- an admin's names, --owner, rm .. ---------------------------------
conf() { sed -n "s/^$1 *= *//p" "$ADMIN_CONF"; }
ENDPOINT=$(conf endpoint)
HOSTPORT=${ENDPOINT#*://}
hmac_hex() { printf '%s' "$2" | openssl dgst -sha256 -mac HMAC -macopt "$1" -r | cut -d' ' -f1; }
# api_admin METHOD PATH [BODY]: one request signed as the admin (docs/api.md).
api_admin() {
	local method=$1 path=$2 body=${3-} date day key sig
	date=$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S GMT')
	day=$(date -u '+%Y%m%d')
	key=$(hmac_hex "key:$(conf secret_key)" "$day")
	sig=$(hmac_hex "hexkey:$key" "$(printf '%s\n%s\n%s\n%s\n%s' "$method" "$path" "$date" "$HOSTPORT" \
		"$(printf '%s' "$body" | openssl dgst -sha256 -r | cut -d' ' -f1)")")
	curl -s -X "$method" -H "Host: $HOSTPORT" -H "Date: $date" -H 'Content-Type: application/json' \
		-H "Authorization: TESSERA-HMAC-SHA256 Credential=$(conf access_key), Signature=$sig" \
		--data-binary "$body" "$ENDPOINT$path"
}
reply=$(api_admin POST /v1/users '{"email":"bob@example.org","password":"bob-pass-1"}')
BOB_CONF=$E2E_DIR/bob.conf
python3 -c '
import json, sys
r = json.loads(sys.argv[1])
print("endpoint = " + sys.argv[2]); print("access_key = " + r["user"]["access_key"]); print("secret_key = " + r["secret_key"])' \
	"$reply" "$ENDPOINT" > "$BOB_CONF"
check "a second user is made" [ -s "$BOB_CONF" ]

check "the admin's 'shared' starts" "$T" session create "$IMG" --name shared --cpu 0.1 --mem 32m --wait
check "bob's 'shared' starts (the newer one)" \
	env TESSERA_CONFIG="$BOB_CONF" "$T" session create "$IMG" --name shared --cpu 0.1 --mem 32m --wait
bob_id=$(TESSERA_CONFIG=$BOB_CONF jget shared id)
admin_id=$(jget shared id)
check "the admin's name is the admin's own session" test -n "$admin_id" -a "$admin_id" != "$bob_id"
ls_out=$("$T" session ls)
check "the admin's ls has an OWNER column" has_prefix_line "$ls_out" "NAME  *OWNER  *STATUS"
check "... with bob's session in it" grep -q "^shared  *bob@example.org  *RUNNING" <<<"$ls_out"
check "the admin's rm of 'shared' works" "$T" session rm shared
check "... and removed the admin's own" wait_status "$admin_id" TERMINATED
check "bob's 'shared' is still RUNNING" [ "$(TESSERA_CONFIG=$BOB_CONF jget shared status)" == RUNNING ]
check "the admin reaches bob's by --owner" contains "$("$T" session info shared --owner bob@example.org)" "$bob_id"
check "the admin reaches bob's by id" contains "$("$T" session info "$bob_id")" "bob@example.org"
out=$(TESSERA_CONFIG=$BOB_CONF "$T" session info shared --owner admin@tessera.local 2>&1)
check "bob may not use --owner for another user ($out)" contains "$out" "only an admin"
check "the admin removes bob's with --owner" "$T" session rm shared --owner bob@example.org
check "... bob's is TERMINATED" wait_status "$bob_id" TERMINATED

out=$("$T" session rm .. 2>&1)
check "'rm ..' says no such session ($out)" contains "$out" "no session named or with id '..'"
out=$("$T" session info . 2>&1)
check "'info .' says no such session ($out)" contains "$out" "no session named or with id '.'"

# ---- a removed ERROR session leaves the list --------------------------
check "the ERROR batch session is listed before it is removed" has_prefix_line "$("$T" session ls)" "b-fail "
check "rm of an ERROR session" "$T" session rm b-fail
check "... leaves ls" not has_prefix_line "$("$T" session ls)" "b-fail "
check "... stays in ls --all" has_prefix_line "$("$T" session ls --all)" "b-fail "
check "... and its container goes" bash -c "for _ in \$(seq 1 300); do
	[ -z \"\$(docker ps -aq --filter label=tessera.session=$(jget b-fail id))\" ] && exit 0; sleep 0.1; done; exit 1"

# ---- a login lock holds one address, not the account ------------------
WEB=$(sed -n 's/^web_url = //p' "$ADMIN_CONF")
WEB=${WEB%/}
PASS=$(conf password)
web_login() {  # web_login SOURCE_ADDR PASSWORD: the HTTP status
	curl -s -o /dev/null -w '%{http_code}' --interface "$1" -H 'Content-Type: application/json' \
		--data-binary "{\"email\":\"bob@example.org\",\"password\":\"$2\"}" "$WEB/auth/login"
}
if [[ -n "$WEB" ]] && [[ "$(web_login 127.0.0.2 bob-pass-1)" == 200 ]]; then
	for _ in 1 2 3 4 5; do web_login 127.0.0.2 wrong >/dev/null; done
	check "after 5 failures from one address, that address is locked" [ "$(web_login 127.0.0.2 bob-pass-1)" == 429 ]
	check "the owner from another address still gets in" [ "$(web_login 127.0.0.1 bob-pass-1)" == 200 ]
else
	fail "web login from 127.0.0.2 at '$WEB' did not work (admin password ${PASS:+set})"
fi

e2e_done
