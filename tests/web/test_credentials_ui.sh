#!/usr/bin/env bash
# Browser test of the Credentials page (docs/user-guide.md, "API keys for
# the CLI") in Debian's Chromium (playwright-core): a user made by an
# admin, who had no way to get a key of their own, makes one, sees its
# secret once, downloads a client.conf the CLI signs with, revokes it (the
# CLI is then refused), and revokes the main key (signed out; a new login
# has a new main key). Without a browser, through the webserver: the secret
# of a key the user makes comes back to them, the one of a user an admin
# makes does not. Screenshots for the user guide go to SCREENSHOT_DIR
# (docs/images when refreshing them).
. "$(dirname "$0")/../e2e/lib.sh"
UI_SRC=${UI_SRC:?UI_SRC must point at the ui/ source dir (its node_modules has playwright-core)}
if [[ ! -x /usr/bin/chromium ]]; then
	echo "chromium is not installed (/usr/bin/chromium); run 'make setup'"
	exit 1
fi
e2e_setup

start_server || { e2e_done; exit 1; }
web_url=$(sed -n 's/^web_url *= *//p' "$TESSERA_CONFIG")
password=$(sed -n 's/^password *= *//p' "$TESSERA_CONFIG")
check "admin.conf has web_url ($web_url)" [ -n "$web_url" ]

# ---- through the webserver, with curl as the browser ----
jar=$E2E_DIR/cookies
csrf=$(curl -s -c "$jar" -H 'Content-Type: application/json' \
	-d "{\"email\":\"admin@tessera.local\",\"password\":\"$password\"}" "${web_url}auth/login" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["csrf_token"])')
check "the admin is logged in to the webserver" [ -n "$csrf" ]
out=$(curl -s -b "$jar" -H "X-CSRF-Token: $csrf" -H 'Content-Type: application/json' \
	-d '{"email":"dana@example.org","password":"danas password"}' "${web_url}api/v1/users")
check "a user made in the web UI: no secret reaches the browser" \
	python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["user"]["email"]=="dana@example.org" and "secret_key" not in r' "$out"
out=$(curl -s -b "$jar" -H "X-CSRF-Token: $csrf" -X POST "${web_url}api/v1/keypairs")
check "a key the admin makes for themselves: its secret comes back once" \
	python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert len(r["secret_key"])==40 and r["keypair"]["access_key"].startswith("TK")' "$out"
out=$(curl -s -b "$jar" "${web_url}api/v1/keypairs")
check "the key list through the webserver holds no secret" \
	python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert len(r["keypairs"])==2 and "secret" not in json.dumps(r)' "$out"
code=$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" -X POST "${web_url}api/v1/keypairs")
check "making a key without the CSRF token is refused (403)" [ "$code" = 403 ]

# ---- the browser, as dana ----
WEB_URL=$web_url USER_EMAIL=dana@example.org USER_PASSWORD='danas password' WORK_DIR=$E2E_DIR \
	ADMIN_ACCESS_KEY=$(sed -n 's/^access_key *= *//p' "$TESSERA_CONFIG") \
	PROFILE_DIR=$E2E_DIR/chromium SHOTS=${SCREENSHOT_DIR:-$E2E_DIR/shots} UI_SRC=$UI_SRC TESSERA_BIN=$TESSERA \
	node "$(dirname "$0")/credentials.test.mjs" 2>&1 | tee "$E2E_DIR/browser.log"
while read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	esac
done < "$E2E_DIR/browser.log"
check "the browser test ran to its end" grep -q '^# done' "$E2E_DIR/browser.log"
e2e_done
