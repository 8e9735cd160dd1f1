#!/usr/bin/env bash
# Browser test of the full launcher (docs/user-guide.md, "Launch
# sessions") in Debian's Chromium (playwright-core), as an admin: the
# presets come from the API (the defaults, then one made on the Admin
# page, for every group); a batch session with a command, environment
# variables, a timeout and a preopen port is reviewed (every value shown)
# and launched, runs, and its exit code shows on its page; re-launching it
# from the recent sessions fills the form; at 1280x800 with folders listed
# Launch is in sight on the review step too; the Sessions count is 1 after
# a launch. Screenshots for the user guide go to SCREENSHOT_DIR
# (docs/images when refreshing them).
. "$(dirname "$0")/../e2e/lib.sh"
UI_SRC=${UI_SRC:?UI_SRC must point at the ui/ source dir (its node_modules has playwright-core)}
if [[ ! -x /usr/bin/chromium ]]; then
	echo "chromium is not installed (/usr/bin/chromium); run 'make setup'"
	exit 1
fi
e2e_setup

# An environment for the pickers, labelled as the recipes label theirs
# (docs/images.md, "Labels") on the tests' busybox file system; removed
# when the test ends (e2e_teardown), after its sessions.
DEMO=tessera-ui-demo/launcher:1
if ! docker image inspect "$DEMO" >/dev/null 2>&1; then
	docker save "$TEST_IMAGE" | tar -xO --wildcards '*/layer.tar' | docker import -c 'ENV PATH=/bin' \
		-c 'CMD ["/bin/sh"]' -c 'LABEL ai.backend.kernelspec=1' -c 'LABEL ai.backend.base-distro=debian12' \
		-c 'LABEL ai.backend.resource.min.cpu=0.25' -c 'LABEL ai.backend.resource.min.mem=64m' \
		-c 'LABEL tessera.family=ui-demo-launcher' -c 'LABEL tessera.title="Launcher demo"' \
		-c 'LABEL tessera.frameworks="python=3.11.2"' - "$DEMO" >/dev/null
fi
E2E_IMAGES+=("$DEMO")
check "the demo image is there" docker image inspect -f . "$DEMO" >/dev/null

start_server --mock-gpus 1x8GiB --fgpu-per-device 1 || { e2e_done; exit 1; }
web_url=$(sed -n 's/^web_url *= *//p' "$TESSERA_CONFIG")
password=$(sed -n 's/^password *= *//p' "$TESSERA_CONFIG")
check "admin.conf has web_url ($web_url)" [ -n "$web_url" ]
for i in 1 2 3 4 5 6 7 8; do "$TESSERA" folder create "launcher-folder-$i" >/dev/null; done
check "folders for the picker are made" bash -c '"$1" folder ls | grep -q launcher-folder-8' _ "$TESSERA"

WEB_URL=$web_url ADMIN_EMAIL=admin@tessera.local ADMIN_PASSWORD=$password DEMO=$DEMO \
	PROFILE_DIR=$E2E_DIR/chromium SHOTS=${SCREENSHOT_DIR:-$E2E_DIR/shots} UI_SRC=$UI_SRC \
	node "$(dirname "$0")/launcher.test.mjs" 2>&1 | tee "$E2E_DIR/browser.log"
while read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	esac
done < "$E2E_DIR/browser.log"
check "the browser test ran to its end" grep -q '^# done' "$E2E_DIR/browser.log"
# What the browser made, seen from the CLI: the same preset, the same session.
out=$("$TESSERA" preset ls 2>&1)
check "the preset made in the browser is listed by the CLI ($out)" has_prefix_line "$out" "Browser big  *2  *1 GiB  *0"
check "the batch session ended with its command's exit code 3" [ "$(jget envjob exit_code)" = 3 ]
check "  its environment as asked" [ "$(jget envjob env.GREETING)" = hello-env ]
e2e_done
