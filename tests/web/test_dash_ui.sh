#!/usr/bin/env bash
# The admin dashboard and self-service of issue 35 (items 6 and 7), in
# Debian's Chromium (playwright-core) against a real `tessera server` with
# a mock GPU, and from the CLI:
#  - the Dashboard page (admins) shows the node's capacity and allocation,
#    the GPU model, and a failed session with its reason; `tessera
#    dashboard` prints the same, and a user is refused both;
#  - a user changes their password on the Credentials page (a wrong
#    current one refused), logs out and in with the new one; the API
#    refuses a wrong old password and another user's password, and
#    `tessera user passwd` changes one's own;
#  - an API key is rotated (the old one refused, the new one signs);
#  - the notifications tray says when one of the user's sessions starts;
#  - an admin posts an announcement (a bad one refused, from the CLI
#    too), a user sees it on every page and dismisses it;
#  - the About page shows the version and the components' health, and
#    `tessera about` the same.
# Screenshots for the user guide go to SCREENSHOT_DIR (docs/img when
# refreshing them).
. "$(dirname "$0")/../e2e/lib.sh"
UI_SRC=${UI_SRC:?UI_SRC must point at the ui/ source dir (its node_modules has playwright-core)}
if [[ ! -x /usr/bin/chromium ]]; then
	echo "chromium is not installed (/usr/bin/chromium); run 'make setup'"
	exit 1
fi
e2e_setup

start_server --mock-gpus 1x8GiB --fgpu-per-device 2 || { e2e_done; exit 1; }
web_url=$(sed -n 's/^web_url *= *//p' "$TESSERA_CONFIG")
endpoint=$(sed -n 's/^endpoint *= *//p' "$TESSERA_CONFIG")
password=$(sed -n 's/^password *= *//p' "$TESSERA_CONFIG")
admin_key=$(sed -n 's/^access_key *= *//p' "$TESSERA_CONFIG")
check "admin.conf has web_url ($web_url)" [ -n "$web_url" ]
T() { "$TESSERA" "$@"; }

# ---- a user, with a client.conf of their own ----
out=$(echo 'erins first password' | T user create erin@example.org --password-stdin --json)
erin_conf=$E2E_DIR/erin.conf
python3 - "$out" "$endpoint" "$erin_conf" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
open(sys.argv[3], "w").write("endpoint = %s\naccess_key = %s\nsecret_key = %s\n" %
                             (sys.argv[2], r["user"]["access_key"], r["secret_key"]))
PY
chmod 600 "$erin_conf"
E() { TESSERA_CONFIG=$erin_conf "$TESSERA" "$@"; }
check "erin's client.conf signs" E key ls

# ---- a failed session, for the dashboard's recent failures ----
T session create "$TEST_IMAGE" --name broken --batch --cpu 0.25 --mem 64m \
	--startup-command 'echo about to fail; exit 3' --wait >/dev/null 2>&1
check "the batch session that exits 3 ended ERROR" [ "$(jget broken status)" = ERROR ]
# One that runs, on the GPU, so that the node and the GPU show allocation.
check "a session on half a GPU runs" T session create "$TEST_IMAGE" --name holder --cpu 0.5 --mem 128m --fgpu 0.5 \
	--startup-command 'sleep infinity' --wait

# ---- the dashboard from the CLI ----
out=$(T dashboard 2>&1)
check "tessera dashboard names the node ($out)" contains "$out" "$E2E_AGENT_ID"
check "tessera dashboard names the GPU model" grep -qi 'mock' <<<"$out"
check "tessera dashboard lists the failure with why" grep -q 'broken.*exit code 3' <<<"$out"
out=$(T dashboard --json)
check "the dashboard's JSON: 0.5 of 2 fGPU allocated on the GPU model, 1.5 free; the failure's reason" python3 -c '
import json, sys
d = json.loads(sys.argv[1])
m = d["gpu_models"][0]
assert m["fgpu_capacity"] == 2 and m["fgpu_used"] == 0.5 and m["fgpu_free"] == 1.5, m
assert d["sessions"]["by_status"]["RUNNING"] == 1 and d["sessions"]["by_status"]["ERROR"] == 1, d["sessions"]
assert d["top_users"][0]["email"] == "admin@tessera.local", d["top_users"]
f = d["failures"][0]
assert f["name"] == "broken" and "exit code 3" in f["status_info"], f' "$out"
out=$(E dashboard 2>&1); rc=$?
check "a user is refused the dashboard ($out)" [ "$rc" -ne 0 ] && contains "$out" "only administrators"

# ---- About from the CLI ----
out=$(T about 2>&1)
check "tessera about prints the version ($out)" grep -q "^tessera $("$TESSERA" --version | awk '{print $2}')" <<<"$out"
check "tessera about: the store and the agents are up" python3 -c '
import json, sys
a = json.loads(sys.argv[1])
h = {c["name"]: c["status"] for c in a["components"]}
assert h["manager"] == "up" and h["store"] == "up" and h["agents"] == "up", h' "$(T about --json)"
check "a user reads About too, without the store's address" python3 -c '
import json, sys
a = json.loads(sys.argv[1])
s = [c for c in a["components"] if c["name"] == "store"][0]
assert s["status"] == "up" and "/" not in s["detail"], s' "$(E about --json)"

# ---- announcements: checked ----
out=$(T config set announcement "$(printf 'two\nlines')" 2>&1); rc=$?
check "an announcement of two lines is refused ($out)" [ "$rc" -ne 0 ] && contains "$out" "one line"
out=$(T config set announcement "$(head -c 501 /dev/zero | tr '\0' x)" 2>&1); rc=$?
check "an announcement of 501 bytes is refused ($out)" [ "$rc" -ne 0 ] && contains "$out" "at most 500"
out=$(E config set announcement 'hello' 2>&1); rc=$?
check "a user cannot post one ($out)" [ "$rc" -ne 0 ]

# ---- passwords through the API ----
out=$(E user passwd --password-stdin <<<$'not my password\nsomething new 1' 2>&1); rc=$?
check "a wrong current password is refused ($out)" [ "$rc" -ne 0 ] && contains "$out" "current password is wrong"
out=$(E user reset-password admin@tessera.local --password-stdin <<<'taken over 123' 2>&1); rc=$?
check "a user cannot set another's password ($out)" [ "$rc" -ne 0 ] && contains "$out" "only administrators"
out=$(T user reset-password erin@example.org --password-stdin <<<'set by the admin' 2>&1)
check "an admin still sets another's password without the old one ($out)" contains "$out" "was changed"
out=$(E user passwd --password-stdin <<<$'set by the admin\nerins first password' 2>&1)
check "tessera user passwd changes one's own ($out)" contains "$out" "your password was changed"
out=$(T user reset-password admin@tessera.local --password-stdin <<<'x-not-with-old-1' 2>&1); rc=$?
check "an admin's own password needs the current one too ($out)" [ "$rc" -ne 0 ] && contains "$out" "current one"

# ---- key rotation ----
made=$(E key create --label ci --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["keypair"]["access_key"])')
out=$(E key rotate "$made" --json)
new_key=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["revoked"]==sys.argv[2] and r["keypair"]["label"]=="ci"; print(r["keypair"]["access_key"])' "$out" "$made")
check "key rotate answers a new key with the label ($new_key)" [ -n "$new_key" ]
check "the rotated key is gone from the list" not grep -q "$made" <<<"$(E key ls)"
out=$(E key rotate "$(sed -n 's/^access_key *= *//p' "$erin_conf")" 2>&1); rc=$?
check "the main key is not rotated ($out)" [ "$rc" -ne 0 ] && contains "$out" "main key"
out=$(E key rotate "$admin_key" 2>&1); rc=$?
check "another's key is not rotated ($out)" [ "$rc" -ne 0 ] && contains "$out" "no API key"

# ---- the browser ----
WEB_URL=$web_url ADMIN_PASSWORD=$password USER_EMAIL=erin@example.org USER_PASSWORD='erins first password' \
	USER_CONF=$erin_conf TEST_IMAGE=$TEST_IMAGE NODE=$E2E_AGENT_ID VERSION="$("$TESSERA" --version | awk '{print $2}')" \
	PROFILE_DIR=$E2E_DIR/chromium SHOTS=${SCREENSHOT_DIR:-$E2E_DIR/shots} UI_SRC=$UI_SRC TESSERA_BIN=$TESSERA \
	node "$(dirname "$0")/dash.test.mjs" 2>&1 | tee "$E2E_DIR/browser.log"
while read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	esac
done < "$E2E_DIR/browser.log"
check "the browser test ran to its end" grep -q '^# done' "$E2E_DIR/browser.log"
e2e_done
