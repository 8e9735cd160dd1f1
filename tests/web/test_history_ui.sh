#!/usr/bin/env bash
# History and statistics (issue 35 item 1; docs/user-guide.md, "Finished
# sessions" and "Usage statistics"). Through the API and the CLI: GET
# /v1/sessions?order=newest pages ended sessions newest first, GET
# /v1/usage/summary and `tessera usage summary` refuse bad values with
# words naming them, count allocated hours, keep a user to their own, and
# give CSV. In Debian's Chromium (history.test.mjs): the Sessions list's
# Finished switch shows a terminated session and a failed batch one, its
# pages, columns and view kept in the URL over a reload; a finished
# session's page with its exit code, status history and the last of its
# log kept when its container was removed (also through the CLI); the Statistics page with a row of nonzero hours and
# its CSV download; and a user who sees only their own. Screenshots go to
# SCREENSHOT_DIR (docs/images when refreshing the user guide's).
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
endpoint=$(sed -n 's/^endpoint *= *//p' "$TESSERA_CONFIG")
check "admin.conf has web_url ($web_url)" [ -n "$web_url" ]

# ---- a user of their own, with a session that ran and was ended ----
PAT_CONF=$E2E_DIR/pat.conf
echo 'pats password 1' | "$TESSERA" user create pat@example.org --password-stdin --json |
	python3 -c 'import json,sys; r=json.load(sys.stdin); print("endpoint = %s\naccess_key = %s\nsecret_key = %s" % (sys.argv[1], r["user"]["access_key"], r["secret_key"]))' \
	"$endpoint" >"$PAT_CONF"
check "pat is made, with a key" grep -q '^access_key = TK' "$PAT_CONF"
pat() { TESSERA_CONFIG=$PAT_CONF "$TESSERA" "$@"; }
pat session create "$TEST_IMAGE" --name patwork --cpu 0.5 --mem 128m --wait >/dev/null
check "pat's session runs" bash -c '[[ $(TESSERA_CONFIG=$1 "$2" session info patwork --json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"status\"])") == RUNNING ]]' _ "$PAT_CONF" "$TESSERA"

# ---- the admin's: one interactive session ended on request, one batch
# session that fails with exit code 3, and twelve cancelled while waiting
# (the node drained), for the Finished list's pages ----
"$TESSERA" session create "$TEST_IMAGE" --name done --cpu 1 --mem 256m --startup-command 'echo done-LOGLINE' \
	--wait >/dev/null
check "done runs" wait_status done RUNNING
"$TESSERA" session create "$TEST_IMAGE" --name job --batch --cpu 0.25 --mem 64m \
	--startup-command 'echo hist-LOGLINE; exit 3' >/dev/null
check "job fails with its exit code" wait_status job ERROR
check "job's exit code is 3" [ "$(jget job exit_code)" = 3 ]
"$TESSERA" node drain "$E2E_AGENT_ID" >/dev/null
"$TESSERA" session create "$TEST_IMAGE" --name wait --count 12 --cpu 0.1 --mem 16m >/dev/null
check "the twelve wait" wait_status wait-12 PENDING
"$TESSERA" session rm $(printf 'wait-%d ' $(seq 1 12)) >/dev/null
check "the twelve are cancelled" wait_status wait-12 CANCELLED
"$TESSERA" node undrain "$E2E_AGENT_ID" >/dev/null
"$TESSERA" session rm done >/dev/null
check "done is terminated" wait_status done TERMINATED
# Its container is gone; the last of its log was kept before it went.
out=$("$TESSERA" session logs done 2>&1)
check "done's log, kept when its container was removed, has its line" has_line "$out" "done-LOGLINE"
out=$("$TESSERA" session logs done --tail 1 2>&1)
check "--tail 1 of the kept log is its last line only ($out)" [ "$(wc -l <<<"$out")" = 1 ]
pat session rm patwork >/dev/null
check "patwork is terminated" bash -c 'for _ in $(seq 300); do [[ $(TESSERA_CONFIG=$1 "$2" session info patwork --json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"status\"])") == TERMINATED ]] && exit 0; sleep 0.1; done; exit 1' _ "$PAT_CONF" "$TESSERA"

# ---- GET /v1/sessions?order=newest, two at a time ----
out=$(python3 - "$TESSERA_CONFIG" "$(dirname "$0")/../e2e" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from signed import Api, load_conf
c = load_conf(sys.argv[1])
api = Api(c["endpoint"], c["access_key"], c["secret_key"])
names, tok = [], None
q = "/v1/sessions?status=TERMINATED,CANCELLED,ERROR&all=1&order=newest&limit=2"
while True:
    st, r = api.call("GET", q + ("&continue=" + tok if tok else ""))
    assert st == 200, (st, r)
    names += [s["name"] for s in r["sessions"]]
    tok = r.get("continue")
    if not tok:
        break
st, r = api.call("GET", "/v1/sessions?order=sideways")
print(" ".join(names))
print(st, r["error"]["message"])
PY
)
first=$(head -1 <<<"$out")
check "newest first, every finished session once: wait-12 ... wait-1 job done patwork ($first)" \
	[ "$first" = "$(printf 'wait-%d ' $(seq 12 -1 1))job done patwork" ]
check "order=sideways is refused in words naming it" has_line "$out" "400 order must be oldest or newest (got 'sideways')"

# ---- tessera session ls --finished: the Finished view from the CLI ----
out=$("$TESSERA" session ls --finished --json | python3 -c 'import json,sys; print(" ".join(s["name"] for s in json.load(sys.stdin)))')
check "session ls --finished: every ended session an admin sees, newest first ($out)" \
	[ "$out" = "$(printf 'wait-%d ' $(seq 12 -1 1))job done patwork" ]
out=$(pat session ls --finished)
check "pat's --finished table has their one ended session" bash -c '[[ $(grep -c patwork <<<"$1") == 1 && $(grep -c wait- <<<"$1") == 0 ]]' _ "$out"
err=$("$TESSERA" session ls --finished --all 2>&1); rc=$?
check "--finished with --all: refused in one line ($rc: $err)" \
	bash -c '[[ $1 == 2 && $(wc -l <<<"$2") == 1 && $2 == *"--all and --finished do not go together"* ]]' _ "$rc" "$err"

# ---- GET /v1/usage/summary and tessera usage summary ----
today=$(date -u +%F)
out=$("$TESSERA" usage summary --json)
# The admin's sessions that ran: done, and job if it was seen RUNNING
# before its command ended (started_at); the cancelled never ran.
ran=$("$TESSERA" session ls --all --json | python3 -c '
import json, sys
print(sum(1 for s in json.load(sys.stdin) if s["owner"] == "admin@tessera.local" and s.get("started_at")))')
check "the admin's summary counts both users, with hours ($ran of the admin's sessions ran)" python3 -c '
import json, sys
r = json.loads(sys.argv[1])
users = {t["user"]: t for t in r["totals"]}
assert set(users) == {"admin@tessera.local", "pat@example.org"}, users
assert users["pat@example.org"]["cpu_hours"] > 0 and users["pat@example.org"]["sessions_started"] == 1, users
assert users["admin@tessera.local"]["cpu_hours"] > 0, users
assert users["admin@tessera.local"]["sessions_started"] == int(sys.argv[3]) >= 1, users
assert r["to"] == sys.argv[2] and r["rows"][0]["day"] == sys.argv[2], r' "$out" "$today" "$ran"
out=$("$TESSERA" usage summary)
check "the table has a row per user and day, and totals" has_prefix_line "$out" "$today  pat@example.org"
out=$("$TESSERA" usage summary --csv --by project)
check "--csv: the header" has_line "$out" $'day,project,cpu_hours,mem_gib_hours,fgpu_hours,sessions_started\r'
check "--csv: a row of pat's personal project" has_prefix_line "$out" "$today,pat@example.org,"
out=$(pat usage summary --json)
check "pat sees only their own" python3 -c '
import json, sys
r = json.loads(sys.argv[1])
assert [t["user"] for t in r["totals"]] == ["pat@example.org"], r["totals"]' "$out"
err=$(pat usage summary --user admin@tessera.local 2>&1); rc=$?
check "pat asking for the admin's usage: refused, one line ($rc: $err)" \
	bash -c '[[ $1 != 0 && $(wc -l <<<"$2") == 1 && $2 == *"only an admin may see another user"* ]]' _ "$rc" "$err"
for bad in "--from yesterday|from: 'yesterday' is not a date" "--to 2026-02-30|to: '2026-02-30' is not a date of the calendar" \
	"--by day|by must be user or project" "--from 2020-01-01 --to 2026-01-01|longer than 366 days" \
	"--from 2026-11-05 --to 2026-11-01|from (2026-11-05) is after to (2026-11-01)" "--color|option '--color' is unknown"; do
	args=${bad%%|*} words=${bad#*|}
	# shellcheck disable=SC2086
	err=$("$TESSERA" usage summary $args 2>&1); rc=$?
	check "usage summary $args: exit 2, one line saying \"$words\"" \
		bash -c '[[ $1 == 2 && $(wc -l <<<"$2") == 1 && $2 == *"$3"* ]]' _ "$rc" "$err" "$words"
done
out=$(python3 - "$TESSERA_CONFIG" "$(dirname "$0")/../e2e" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from signed import Api, load_conf
c = load_conf(sys.argv[1])
api = Api(c["endpoint"], c["access_key"], c["secret_key"])
for q in ("format=xml", "by=day", "from=2026-1-1", "colour=red", "user=nobody@example.org", "project=nope"):
    st, r = api.call("GET", "/v1/usage/summary?" + q)
    print(q, st, r["error"]["message"])
PY
)
check "format=xml: 400 naming format" has_prefix_line "$out" "format=xml 400 format must be json or csv"
check "by=day: 400 naming by" has_prefix_line "$out" "by=day 400 by must be user or project"
check "from=2026-1-1: 400 naming from" has_prefix_line "$out" "from=2026-1-1 400 from: '2026-1-1' is not a date: give YYYY-MM-DD"
check "an unknown parameter: 400 naming it" has_prefix_line "$out" "colour=red 400 unknown query parameter 'colour'"
check "an unknown user: 404" has_prefix_line "$out" "user=nobody@example.org 404 no user with email nobody@example.org"
check "an unknown project: 404" has_prefix_line "$out" "project=nope 404 no project named 'nope'"

# ---- the browser ----
WEB_URL=$web_url ADMIN_EMAIL=admin@tessera.local ADMIN_PASSWORD=$password \
	USER_EMAIL=pat@example.org USER_PASSWORD='pats password 1' \
	PROFILE_DIR=$E2E_DIR/chromium SHOTS=${SCREENSHOT_DIR:-$E2E_DIR/shots} UI_SRC=$UI_SRC WORK_DIR=$E2E_DIR \
	node "$(dirname "$0")/history.test.mjs" 2>&1 | tee "$E2E_DIR/browser.log"
while read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	esac
done < "$E2E_DIR/browser.log"
check "the browser test ran to its end" grep -q '^# done' "$E2E_DIR/browser.log"
"$TESSERA" session rm job >/dev/null
e2e_done
