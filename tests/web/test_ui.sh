#!/usr/bin/env bash
# Browser test: the seeds' GUI scenario in Debian's Chromium, driven by
# playwright-core (no browser download). A server with one mock 8 GiB GPU
# at 2 fGPU per GPU: three 1-fGPU sessions give 2 RUNNING + 1 PENDING;
# terminating one starts the PENDING one; a wrong password is refused; a
# second user sees none of the admin's sessions.
. "$(dirname "$0")/../e2e/lib.sh"
UI_SRC=${UI_SRC:?UI_SRC must point at the ui/ source dir (its node_modules has playwright-core)}
if [[ ! -x /usr/bin/chromium ]]; then
	echo "chromium is not installed (/usr/bin/chromium); run 'make setup'"
	exit 1
fi
e2e_setup
start_server --mock-gpus 1x8GiB --fgpu-per-device 2 --web-port 0 || { e2e_done; exit 1; }
web_url=$(sed -n 's/^web_url *= *//p' "$TESSERA_CONFIG")
password=$(sed -n 's/^password *= *//p' "$TESSERA_CONFIG")
check "admin.conf has web_url ($web_url)" [ -n "$web_url" ]
check "admin.conf has the admin password" [ -n "$password" ]

WEB_URL=$web_url ADMIN_EMAIL=admin@tessera.local ADMIN_PASSWORD=$password IMAGE=$TEST_IMAGE \
	PROFILE_DIR=$E2E_DIR/chromium SHOTS=${SCREENSHOT_DIR:-$E2E_DIR/shots} UI_SRC=$UI_SRC \
	node "$(dirname "$0")/ui.test.mjs" 2>&1 | tee "$E2E_DIR/browser.log"
while read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	esac
done < "$E2E_DIR/browser.log"
check "the browser test ran to its end" grep -q '^# done' "$E2E_DIR/browser.log"
e2e_done
