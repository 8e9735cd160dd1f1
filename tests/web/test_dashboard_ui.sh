#!/usr/bin/env bash
# Browser test of the dashboard (docs/user-guide.md) in Debian's Chromium,
# driven by playwright-core: the resource panel changes when sessions
# start; the launch dialog's estimate says the third 1-fGPU session would
# wait; a PENDING row says Cancel (and its dialog what that does); the
# list's filters live in the URL; a session's page shows its status
# history, its log (followed, searchable) and its live usage plot; the
# Nodes page drains and undrains a node (its sessions keep running); the
# settings refuse a bad value in the server's words; at 400 pixels no
# page scrolls sideways. Screenshots, light and dark, wide and narrow, go
# to SCREENSHOT_DIR (docs/images when refreshing the user guide's).
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

# A session that writes a line a second, for the log and the plot.
"$TESSERA" session create "$TEST_IMAGE" --name logger --cpu 0.25 --mem 64m \
	--startup-command 'i=0; while true; do i=$((i+1)); echo "tick $i marker-LOGLINE"; sleep 1; done' >/dev/null
check "the logger session runs" wait_status logger RUNNING

WEB_URL=$web_url ADMIN_EMAIL=admin@tessera.local ADMIN_PASSWORD=$password IMAGE=$TEST_IMAGE \
	NODE_ID=$E2E_AGENT_ID PROFILE_DIR=$E2E_DIR/chromium SHOTS=${SCREENSHOT_DIR:-$E2E_DIR/shots} UI_SRC=$UI_SRC \
	node "$(dirname "$0")/dashboard.test.mjs" 2>&1 | tee "$E2E_DIR/browser.log"
while read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	esac
done < "$E2E_DIR/browser.log"
check "the browser test ran to its end" grep -q '^# done' "$E2E_DIR/browser.log"
check "the node is schedulable again at the end" bash -c '"$1" node ls --json | grep -q "\"schedulable\": *true"' _ "$TESSERA"
e2e_done
