#!/usr/bin/env bash
# Users, API keys and a lost admin password (docs/admin.md, "Users" and
# "A lost admin password"; docs/api.md, "API keys"):
#  - a first start that dies on a port in use after it made the admin
#    does not lose the admin's password: the next start writes admin.conf
#    whole, with its password line, and the password logs in;
#  - tessera user create/ls/info/set/reset-password/rm as an admin, their
#    refusals in one line (another user, one's own account, a user with a
#    session or a folder, named);
#  - tessera key create/ls/rm as a user: a new key signs, a revoked one is
#    refused, the main key revoked is replaced;
#  - tessera admin reset-admin on the data dir: refused while the server
#    runs; then a new password (generated, or from stdin) and with
#    --new-key a new key, in admin.conf, which a restart keeps; a restart
#    that cannot know the password says so and names reset-admin.
# With TESSERA_TEST_STORE=postgresql (pg_test_users) the same on
# PostgreSQL, and reset-admin is refused while a manager is active on the
# database even from another data dir.
. "$(dirname "$0")/lib.sh"
e2e_setup
DATA=$E2E_DIR/data
T() { "$TESSERA" "$@"; }

# The store reset-admin is pointed at: the server's database under
# PostgreSQL (as the lib.sh wrapper names it), else none (SQLite).
STORE_ARGS=()
if [[ "${TESSERA_TEST_STORE:-sqlite}" == postgresql ]]; then
	STORE_ARGS=(--store "$TESSERA_TEST_PG/t_$(printf %s "$(realpath -m "$DATA")" | md5sum | head -c 24)")
fi

# refused RC OUT WORD: a command failed (RC non-zero) with one line of
# output naming WORD.
refused() { [ "$1" -ne 0 ] && [ "$(wc -l <<<"$2")" -eq 1 ] && contains "$2" "$3"; }
conf_value() { sed -n "s/^$2 *= *//p" "$1"; }
# web_login EMAIL PASSWORD: the webserver's answer code.
web_login() {
	curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
		-d "$(python3 -c 'import json,sys; print(json.dumps({"email": sys.argv[1], "password": sys.argv[2]}))' "$1" "$2")" \
		"$(conf_value "$TESSERA_CONFIG" web_url)auth/login"
}
# as CONF CMD...: tessera with another client.conf.
as() { local c=$1; shift; TESSERA_CONFIG=$c "$TESSERA" "$@"; }
# A client.conf from the lines `key create` prints (or any key = value).
client_conf() { grep -E '^(endpoint|access_key|secret_key) = ' >"$1"; chmod 600 "$1"; }

# Starts the server again on DATA without removing admin.conf (start_server
# does): what the manager writes there from what it finds is the point.
# Ready once the server adds web_url to the admin.conf it wrote.
restart_keeping_conf() {
	local apps
	apps=$(e2e_free_port_range 8) || { fail "no free app port range"; return 1; }
	sed -i '/^web_url/d' "$DATA/admin.conf"
	"$TESSERA" server --data-dir "$DATA" --port 0 --web-port 0 --node-id "$E2E_AGENT_ID" --app-ports "$apps" \
		>>"$E2E_DIR/server.log" 2>&1 &
	SERVER_PID=$!
	E2E_PIDS+=("$SERVER_PID")
	for _ in $(seq 1 600); do
		grep -q '^web_url' "$DATA/admin.conf" 2>/dev/null && return 0
		kill -0 "$SERVER_PID" 2>/dev/null || { fail "server exited at start"; tail -20 "$E2E_DIR/server.log"; return 1; }
		sleep 0.05
	done
	fail "the server wrote no web_url into admin.conf"
	return 1
}

# ---- a first start that dies before it serves ----
busy=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(1); time.sleep(120)' "$busy" &
holder=$!
E2E_PIDS+=("$holder")
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$busy") 2>/dev/null && break; sleep 0.05; done
out=$(T server --data-dir "$DATA" --port "$busy" --web-port 0 --node-id "$E2E_AGENT_ID" \
	--app-ports "$(e2e_free_port_range 8)" 2>&1)
rc=$?
kill "$holder" 2>/dev/null
check "a first start on a port in use fails ($rc: $(tail -1 <<<"$out"))" [ "$rc" -ne 0 ]
check "it made the admin, whose password waits in admin.conf.pending" grep -q '^password = ' "$DATA/admin.conf.pending"
first=$(conf_value "$DATA/admin.conf.pending" password)
start_server || { e2e_done; exit 1; }
check "the next start writes admin.conf with its password line" grep -q '^password = ' "$TESSERA_CONFIG"
check "that is the first start's password" [ "$(conf_value "$TESSERA_CONFIG" password)" = "$first" ]
check "admin.conf.pending is gone once admin.conf has the password" [ ! -e "$DATA/admin.conf.pending" ]
check "admin.conf is 0600" [ "$(stat -c %a "$TESSERA_CONFIG")" = 600 ]
check "no temporary file is left beside admin.conf" [ -z "$(ls "$DATA" | grep 'admin.conf.tmp')" ]
check "the admin logs in to the web UI with that password" [ "$(web_login admin@tessera.local "$first")" = 200 ]

# ---- tessera user ----
out=$(T user create bob@example.org)
check "user create prints the new user's keypair and generated password" \
	[ "$(grep -cE 'access key: TK|secret key: [0-9a-f]{40}|password: ' <<<"$out")" = 3 ]
bob_ak=$(sed -n 's/.*access key: //p' <<<"$out")
bob_sk=$(sed -n 's/.*secret key: \([0-9a-f]*\).*/\1/p' <<<"$out")
bob_pw=$(sed -n 's/.*password: *\([^ ]*\).*/\1/p' <<<"$out")
printf 'endpoint = %s\naccess_key = %s\nsecret_key = %s\n' "$(conf_value "$TESSERA_CONFIG" endpoint)" "$bob_ak" \
	"$bob_sk" | client_conf "$E2E_DIR/bob.conf"
check "bob's keypair works" as "$E2E_DIR/bob.conf" session ls
check "bob logs in to the web UI with the generated password" [ "$(web_login bob@example.org "$bob_pw")" = 200 ]
out=$(echo 'carols password' | T user create carol@example.org --admin --password-stdin --json)
check "user create --admin --password-stdin --json" python3 -c '
import json,sys; r=json.loads(sys.argv[1]); assert r["user"]["is_admin"] and "password" not in r and r["secret_key"]' "$out"
check "carol logs in with the password given on stdin" [ "$(web_login carol@example.org 'carols password')" = 200 ]
out=$(T user create bob@example.org 2>&1); rc=$?
check "a second bob is refused in one line ($out)" refused "$rc" "$out" "already exists"
out=$(T user ls)
check "user ls lists admin, bob and carol with their roles" \
	bash -c '[[ $(grep -cE "^(admin@tessera.local +admin|bob@example.org +user|carol@example.org +admin) +active +TK" <<<"$1") == 3 ]]' _ "$out"
check "user ls --json" python3 -c 'import json,sys; assert len(json.loads(sys.argv[1])) == 3' "$(T user ls --json)"
out=$(as "$E2E_DIR/bob.conf" user ls 2>&1); rc=$?
check "bob may not list users ($out)" refused "$rc" "$out" "only administrators"
out=$(T user set bob@example.org --admin)
check "user set --admin ($out)" contains "$out" "administrator"
out=$(T user set bob@example.org --no-admin --disabled)
check "user set --no-admin --disabled ($out)" contains "$out" "bob@example.org: user, disabled"
out=$(as "$E2E_DIR/bob.conf" session ls 2>&1); rc=$?
check "a disabled user's key is refused ($out)" refused "$rc" "$out" "disabled"
T user set bob@example.org --enabled >/dev/null
check "enabled again, bob's key works" as "$E2E_DIR/bob.conf" session ls
out=$(T user set admin@tessera.local --no-admin 2>&1); rc=$?
check "an admin cannot take their own role ($out)" refused "$rc" "$out" "your own administrator role"
out=$(T user set bob@example.org 2>&1); rc=$?
check "user set with nothing to change is a usage error" [ "$rc" = 2 ]
out=$(T user reset-password bob@example.org)
new_pw=$(sed -n 's/.* is now \([^ ]*\) .*/\1/p' <<<"$out")
check "reset-password prints a generated password once ($out)" [ -n "$new_pw" ]
check "bob logs in with it" [ "$(web_login bob@example.org "$new_pw")" = 200 ]
check "and not with the old one" [ "$(web_login bob@example.org "$bob_pw")" = 401 ]
echo 'bobs chosen one' | T user reset-password bob@example.org --password-stdin >/dev/null
check "reset-password --password-stdin sets the line read" [ "$(web_login bob@example.org 'bobs chosen one')" = 200 ]
out=$(echo short | T user reset-password bob@example.org --password-stdin 2>&1); rc=$?
check "a password too short is refused in one line ($out)" refused "$rc" "$out" "8"
out=$(T user reset-password nobody@example.org 2>&1); rc=$?
check "reset-password of no one ($out)" refused "$rc" "$out" "no user"

# ---- tessera key (bob's own) ----
out=$(as "$E2E_DIR/bob.conf" key create --label laptop)
check "key create prints client.conf lines with the secret" \
	[ "$(grep -cE '^(endpoint = http|access_key = TK|secret_key = [0-9a-f]{40}$)' <<<"$out")" = 3 ]
client_conf "$E2E_DIR/laptop.conf" <<<"$out"
laptop=$(conf_value "$E2E_DIR/laptop.conf" access_key)
check "the new key signs as bob" bash -c '[[ $(TESSERA_CONFIG=$1 "$2" session ls 2>&1) != *tessera:* ]]' _ \
	"$E2E_DIR/laptop.conf" "$TESSERA_REAL"
out=$(as "$E2E_DIR/laptop.conf" key ls)
check "key ls: two keys, the main one, the laptop key used now" \
	bash -c 'grep -qE "^$2 +- +.* +yes *$" <<<"$1" && grep -qE "^$3 +laptop +.* no +yes$" <<<"$1"' _ "$out" "$bob_ak" "$laptop"
check "key ls --json has no secret" bash -c '! grep -q secret <<<"$1"' _ "$(as "$E2E_DIR/laptop.conf" key ls --json)"
out=$(T key rm "$laptop" 2>&1)
check "an admin may revoke bob's key ($out)" contains "$out" "revoked"
out=$(as "$E2E_DIR/laptop.conf" session ls 2>&1); rc=$?
check "a revoked key is refused ($out)" refused "$rc" "$out" "unknown access key"
as "$E2E_DIR/bob.conf" key create --label spare | client_conf "$E2E_DIR/spare.conf"
out=$(as "$E2E_DIR/spare.conf" key rm "$bob_ak")
check "revoking the main key makes a new one ($out)" contains "$out" "new main key"
out=$(as "$E2E_DIR/bob.conf" session ls 2>&1); rc=$?
check "the old main key is refused" refused "$rc" "$out" "unknown access key"
check "the new main key is bob's access key in user ls" \
	bash -c '! grep -q "$2" <<<"$1" && grep -q "^bob@example.org .* TK" <<<"$1"' _ "$(T user ls)" "$bob_ak"
out=$(as "$E2E_DIR/spare.conf" key rm TKNOSUCHKEY000000000 2>&1); rc=$?
check "revoking a key that is not yours ($out)" refused "$rc" "$out" "of yours"

# ---- user info, user rm ----
as "$E2E_DIR/spare.conf" session create "$TEST_IMAGE" --name job --cpu 0.1 --mem 32m --wait >/dev/null
as "$E2E_DIR/spare.conf" folder create results >/dev/null
out=$(T user info bob@example.org)
check "user info names bob's session, folder and keys" \
	bash -c 'grep -q "^sessions: job (RUNNING)" <<<"$1" && grep -q "^folders:  results" <<<"$1" && grep -q spare <<<"$1"' _ "$out"
out=$(T user rm bob@example.org 2>&1); rc=$?
check "user rm is refused while bob's session runs, naming it ($out)" refused "$rc" "$out" "(job)"
as "$E2E_DIR/spare.conf" session rm job >/dev/null
# Removed, it ends a moment later (TERMINATING, then TERMINATED).
for _ in $(seq 1 300); do
	as "$E2E_DIR/spare.conf" session info job --json 2>/dev/null | grep -q '"status": "TERMINATED"' && break
	sleep 0.1
done
out=$(T user rm bob@example.org 2>&1); rc=$?
check "then while bob owns a folder, naming it ($out)" refused "$rc" "$out" "(results)"
as "$E2E_DIR/spare.conf" folder rm results >/dev/null
out=$(T user rm admin@tessera.local 2>&1); rc=$?
check "an admin cannot remove themselves ($out)" refused "$rc" "$out" "your own account"
out=$(T user rm bob@example.org)
check "user rm says what it did ($out)" contains "$out" "2 API keys revoked; 1 ended session kept"
out=$(as "$E2E_DIR/spare.conf" session ls 2>&1); rc=$?
check "a removed user's keys are refused" refused "$rc" "$out" "unknown access key"
check "a removed user cannot log in" [ "$(web_login bob@example.org 'bobs chosen one')" = 401 ]
check "the removed user's ended session stays in the history" \
	bash -c 'grep -q "^job " <<<"$1" || grep -q " job " <<<"$1"' _ "$(T session ls --all)"

# ---- tessera admin reset-admin ----
conf_before=$(cat "$TESSERA_CONFIG")
out=$(T admin reset-admin --data-dir "$DATA" "${STORE_ARGS[@]}" 2>&1); rc=$?
check "reset-admin is refused while the server runs ($out)" refused "$rc" "$out" "runs on"
check "and changed nothing" [ "$(cat "$TESSERA_CONFIG")" = "$conf_before" ]
if [[ ${#STORE_ARGS[@]} -gt 0 ]]; then
	out=$(T admin reset-admin --data-dir "$E2E_DIR/elsewhere" "${STORE_ARGS[@]}" 2>&1); rc=$?
	check "on PostgreSQL, from another data dir too: a manager is active ($out)" refused "$rc" "$out" "is active"
fi
stop_server
# The lost password: admin.conf as a start that could not know it wrote it.
grep -v '^password' "$TESSERA_CONFIG" >"$E2E_DIR/nopw" && cat "$E2E_DIR/nopw" >"$TESSERA_CONFIG"
restart_keeping_conf || { e2e_done; exit 1; }
check "a start that cannot know the password leaves it out" not grep -q '^password' "$TESSERA_CONFIG"
check "and says so, naming tessera admin reset-admin" grep -q "password of admin@tessera.local is not known.*tessera admin reset-admin" "$E2E_DIR/server.log"
stop_server
old_ak=$(conf_value "$TESSERA_CONFIG" access_key)
out=$(T admin reset-admin --data-dir "$DATA" "${STORE_ARGS[@]}")
check "reset-admin prints a new password ($(head -1 <<<"$out"))" grep -q '^password: ' <<<"$out"
reset_pw=$(sed -n 's/^password: \([^ ]*\).*/\1/p' <<<"$out")
check "admin.conf has it" [ "$(conf_value "$TESSERA_CONFIG" password)" = "$reset_pw" ]
check "admin.conf keeps the admin's key" [ "$(conf_value "$TESSERA_CONFIG" access_key)" = "$old_ak" ]
restart_keeping_conf || { e2e_done; exit 1; }
check "the restarted server keeps the password in admin.conf" [ "$(conf_value "$TESSERA_CONFIG" password)" = "$reset_pw" ]
check "the admin logs in with it" [ "$(web_login admin@tessera.local "$reset_pw")" = 200 ]
check "the admin's key works" T session ls
stop_server
out=$(echo 'my own admin password' | T admin reset-admin --data-dir "$DATA" "${STORE_ARGS[@]}" --password-stdin --new-key)
check "reset-admin --password-stdin --new-key ($out)" contains "$out" "a new API key (its other keys revoked)"
check "admin.conf has the password given and a new key" \
	bash -c '[[ $(sed -n "s/^password = //p" "$1") == "my own admin password" && $(sed -n "s/^access_key = //p" "$1") != "$2" ]]' \
	_ "$TESSERA_CONFIG" "$old_ak"
restart_keeping_conf || { e2e_done; exit 1; }
check "the admin logs in with the password given" [ "$(web_login admin@tessera.local 'my own admin password')" = 200 ]
check "the new key works" T session ls
printf 'endpoint = %s\naccess_key = %s\nsecret_key = x\n' "$(conf_value "$TESSERA_CONFIG" endpoint)" "$old_ak" \
	>"$E2E_DIR/old-admin.conf"
out=$(as "$E2E_DIR/old-admin.conf" session ls 2>&1); rc=$?
check "the admin's old key is revoked ($out)" refused "$rc" "$out" "unknown access key"
stop_server
out=$(T admin reset-admin --data-dir "$DATA" "${STORE_ARGS[@]}" --email nobody@example.org 2>&1); rc=$?
check "reset-admin of no such user changes nothing ($out)" refused "$rc" "$out" "no user nobody@example.org"
out=$(T admin reset-admin --data-dir "$E2E_DIR/empty" 2>&1); rc=$?
check "reset-admin where there is no database ($out)" refused "$rc" "$out" "no database"
e2e_done
