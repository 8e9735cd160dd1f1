#!/usr/bin/env bash
# Browser test of session apps (docs/apps.md), the seeds' terminal and
# Jupyter steps in Debian's Chromium (playwright-core): a session of
# tessera/python:3.11 shows its apps; the app launcher opens the web
# terminal in a new tab, where `echo hello-$TESSERA_SESSION_NAME` prints the
# session's name; it opens Jupyter Notebook, where a new Python 3 notebook
# runs `import sys; print(sys.version)` and prints 3.11. Everything goes
# through the manager's apps API and `tessera wsproxy` inside the server.
. "$(dirname "$0")/../e2e/lib.sh"
UI_SRC=${UI_SRC:?UI_SRC must point at the ui/ source dir (its node_modules has playwright-core)}
PY_IMAGE=tessera/python:3.11
if [[ ! -x /usr/bin/chromium ]]; then
	echo "chromium is not installed (/usr/bin/chromium); run 'make setup'"
	exit 1
fi
if ! docker image inspect "$PY_IMAGE" >/dev/null 2>&1; then
	echo "$PY_IMAGE is not built; run 'meson test -C build test_images' (it builds it from images/python/3.11.recipe)"
	exit 1
fi
e2e_setup

start_server --app-ports "$(e2e_free_port_range 8)" || { e2e_done; exit 1; }
web_url=$(sed -n 's/^web_url *= *//p' "$TESSERA_CONFIG")
password=$(sed -n 's/^password *= *//p' "$TESSERA_CONFIG")
check "admin.conf has web_url ($web_url)" [ -n "$web_url" ]
check "admin.conf has the admin password" [ -n "$password" ]

WEB_URL=$web_url ADMIN_EMAIL=admin@tessera.local ADMIN_PASSWORD=$password IMAGE=$PY_IMAGE \
	PROFILE_DIR=$E2E_DIR/chromium SHOTS=${SCREENSHOT_DIR:-$E2E_DIR/shots} UI_SRC=$UI_SRC \
	node "$(dirname "$0")/apps.test.mjs" 2>&1 | tee "$E2E_DIR/browser.log"
while read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	esac
done < "$E2E_DIR/browser.log"
check "the browser test ran to its end" grep -q '^# done' "$E2E_DIR/browser.log"
e2e_done
