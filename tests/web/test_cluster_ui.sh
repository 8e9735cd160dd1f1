#!/usr/bin/env bash
# Browser test of cluster sessions in the web UI (issue 33,
# docs/user-guide.md, "Cluster sessions") in Debian's Chromium, driven by
# playwright-core. One node with one mock GPU of 2 fGPU. In the browser, as
# the admin: the launch dialog's Containers field is 1 at first and takes
# 1 to 16; with 2, Placement is offered and the resources say they are per
# container; a size the node could never hold (2 containers of 2 fGPU on a
# 2-fGPU node) is refused under the field, single-node and multi-node
# alike; a 2-container single-node session launched from the dialog is
# sent with cluster_size and cluster_mode, its row says x2, and its page
# shows it RUNNING with main1 and sub1 listed on the node, RUNNING too;
# the log and the app launcher offer a container picker that names sub1
# in ?container=. The CLI then reads the same session with its two
# containers. Waits are on states reached, never on how fast. Screenshots
# go to SCREENSHOT_DIR.
. "$(dirname "$0")/../e2e/lib.sh"
UI_SRC=${UI_SRC:?UI_SRC must point at the ui/ source dir (its node_modules has playwright-core)}
if [[ ! -x /usr/bin/chromium ]]; then
	echo "chromium is not installed (/usr/bin/chromium); run 'make setup'"
	exit 1
fi
e2e_setup

start_server --mock-gpus 1x8GiB --fgpu-per-device 2 || { e2e_done; exit 1; }
web_url=$(sed -n 's/^web_url *= *//p' "$TESSERA_CONFIG")
password=$(sed -n 's/^password *= *//p' "$TESSERA_CONFIG")
check "admin.conf has web_url ($web_url)" [ -n "$web_url" ]

WEB_URL=$web_url ADMIN_EMAIL=admin@tessera.local ADMIN_PASSWORD=$password IMAGE=$TEST_IMAGE \
	NODE_ID=$E2E_AGENT_ID PROFILE_DIR=$E2E_DIR/chromium SHOTS=${SCREENSHOT_DIR:-$E2E_DIR/shots} UI_SRC=$UI_SRC \
	node "$(dirname "$0")/cluster.test.mjs" 2>&1 | tee "$E2E_DIR/browser.log"
while read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	esac
done < "$E2E_DIR/browser.log"
check "the browser test ran to its end" grep -q '^# done' "$E2E_DIR/browser.log"

# What the browser launched, as the API has it: one session, two containers.
out=$("$TESSERA" session info gang --json 2>&1)
check "the API has gang as a single-node session of 2 containers, main1 and sub1" python3 -c '
import json, sys
s = json.loads(sys.argv[1])
names = sorted(c["name"] for c in s["containers"])
assert s["cluster_size"] == 2 and s["cluster_mode"] == "single-node" and names == ["main1", "sub1"], (s["cluster_size"], s["cluster_mode"], names)' "$out"
# Terminated from its page: nothing of it is left running.
check "gang ends TERMINATED" wait_status gang TERMINATED
e2e_done
