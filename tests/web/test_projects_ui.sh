#!/usr/bin/env bash
# Browser test of projects, quotas, fair share and preemption in the web UI
# (issue 32, docs/scheduling.md) in Debian's Chromium, driven by
# playwright-core. One mock GPU of 1 fGPU. With the CLI: a project
# "vision" with an fGPU quota of 1 and bob as its member; bob's
# preemptible low-priority batch session holds the GPU. In the browser, as
# the admin: the project switcher ("All projects" and the projects) filters
# the list and lives in the URL, the project's quota shows beside the
# admin's own resources and the launch dialog starts in it; a session of
# priority 50 launched from the dialog preempts bob's: its row goes
# PREEMPTED (when the page is quick enough to show it) and PENDING
# "requeued after preemption", its page's history says by what, and it
# runs again once the urgent one ends. The Admin page lists the project,
# makes another with its members, and shows the fair share; the Nodes page
# sets the node's group. As bob: the switcher offers his projects and the
# list holds his sessions only. Waits are on states reached, never on how
# fast. Screenshots go to SCREENSHOT_DIR.
. "$(dirname "$0")/../e2e/lib.sh"
UI_SRC=${UI_SRC:?UI_SRC must point at the ui/ source dir (its node_modules has playwright-core)}
if [[ ! -x /usr/bin/chromium ]]; then
	echo "chromium is not installed (/usr/bin/chromium); run 'make setup'"
	exit 1
fi
e2e_setup

start_server --mock-gpus 1x8GiB --fgpu-per-device 1 || { e2e_done; exit 1; }
web_url=$(sed -n 's/^web_url *= *//p' "$TESSERA_CONFIG")
password=$(sed -n 's/^password *= *//p' "$TESSERA_CONFIG")
check "admin.conf has web_url ($web_url)" [ -n "$web_url" ]
T() { "$TESSERA" "$@"; }

# bob, with a keypair for the CLI and a password for the browser.
BOB=bob@example.org BOB_PASSWORD='bobs password 1'
out=$(echo "$BOB_PASSWORD" | T user create "$BOB" --password-stdin 2>&1)
check "bob is made ($(head -1 <<<"$out"))" contains "$out" "access key: TK"
printf 'endpoint = %s\naccess_key = %s\nsecret_key = %s\n' "$(sed -n 's/^endpoint *= *//p' "$TESSERA_CONFIG")" \
	"$(sed -n 's/.*access key: *//p' <<<"$out")" "$(sed -n 's/.*secret key: *\([0-9a-f]*\).*/\1/p' <<<"$out")" >"$E2E_DIR/bob.conf"
chmod 600 "$E2E_DIR/bob.conf"
BOBT() { TESSERA_CONFIG=$E2E_DIR/bob.conf "$TESSERA" "$@"; }

out=$(T project create vision --description "Vision team" --max-fgpu 1 2>&1)
check "project create vision --max-fgpu 1 ($out)" T project info vision
out=$(T project add-member vision "$BOB" 2>&1)
check "bob is a member of vision ($out)" bash -c '"$1" project info vision | grep -q "$2"' _ "$TESSERA" "$BOB"
# A session is preempted once it is no younger than this: at once here.
check "preemption_min_runtime_s 0" T config set preemption_min_runtime_s 0

# The admin's own session (their personal project), on the CPU only.
T session create "$TEST_IMAGE" --name adminbox --cpu 0.25 --mem 64m --startup-command 'sleep 3600' >/dev/null
check "the admin's session runs" wait_status adminbox RUNNING
# bob's, in vision: batch, preemptible, priority 0, on the only GPU.
out=$(BOBT session create "$TEST_IMAGE" --name lowjob --cpu 0.25 --mem 64m --fgpu 1 --batch --project vision \
	--priority 0 --preemptible --startup-command 'sleep 3600' 2>&1)
rc=$?
check "bob's batch session is created ($out)" [ "$rc" -eq 0 ]
check "bob's session runs on the GPU" bash -c 'for _ in $(seq 1 300); do
	[[ $(TESSERA_CONFIG=$1 "$2" session info lowjob --json 2>/dev/null | grep -c "\"status\": *\"RUNNING\"") -ge 1 ]] && exit 0
	sleep 0.1; done; exit 1' _ "$E2E_DIR/bob.conf" "$TESSERA"

WEB_URL=$web_url ADMIN_EMAIL=admin@tessera.local ADMIN_PASSWORD=$password BOB_EMAIL=$BOB BOB_PASSWORD=$BOB_PASSWORD \
	IMAGE=$TEST_IMAGE NODE_ID=$E2E_AGENT_ID PROFILE_DIR=$E2E_DIR/chromium SHOTS=${SCREENSHOT_DIR:-$E2E_DIR/shots} \
	UI_SRC=$UI_SRC node "$(dirname "$0")/projects.test.mjs" 2>&1 | tee "$E2E_DIR/browser.log"
while read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	esac
done < "$E2E_DIR/browser.log"
check "the browser test ran to its end" grep -q '^# done' "$E2E_DIR/browser.log"
out=$(BOBT session info lowjob --json 2>&1)
check "bob's session was preempted once, and runs again" python3 -c '
import json, sys
s = json.loads(sys.argv[1])
assert s["preemptions"] >= 1 and s["status"] == "RUNNING", (s["status"], s["preemptions"])' "$out"
check "the node is in group default again" bash -c '"$1" node ls --json | grep -q "\"group\": *\"default\""' _ "$TESSERA"
e2e_done
