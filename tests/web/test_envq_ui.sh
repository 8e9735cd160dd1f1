#!/usr/bin/env bash
# Browser test of the Environments and Queue pages (issue 35, items 2 and
# 5; docs/user-guide.md, "Environments" and "The queue") in Debian's
# Chromium (playwright-core), against a real `tessera server`:
#  - an admin's catalog lists the test image with its node and size, an
#    alias is set (and seen by the CLI) and removed, Rescan answers, and a
#    throwaway tag is removed after its confirmation;
#  - a user's My environments shows the image their session was converted
#    into; Launch opens the launcher with it and starts a session from it;
#  - the Queue page shows a waiting session's position and reason, its
#    history lists the passes, and the admin moves one to the front and
#    cancels it.
# Screenshots for the user guide go to SCREENSHOT_DIR (docs/images when
# refreshing them).
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

# A throwaway tag of the test image, for the removal (a tag only: the
# image itself stays for the other tests).
RM_TAG=tessera-test-envq-rm:$$
docker tag "$TEST_IMAGE" "$RM_TAG"
E2E_IMAGES+=("$RM_TAG")

# dana, a user, with a session converted into a private image.
out=$("$TESSERA" user create dana@example.org --password-stdin --json <<<'danas password')
dana_ak=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(r["user"]["access_key"])' "$out")
dana_sk=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["secret_key"])' "$out")
printf 'endpoint = %s\naccess_key = %s\nsecret_key = %s\n' "$endpoint" "$dana_ak" "$dana_sk" >"$E2E_DIR/dana.conf"
D() { TESSERA_CONFIG=$E2E_DIR/dana.conf "$TESSERA" "$@"; }
out=$(D session create "$TEST_IMAGE" --name work --cpu 0.5 --mem 16m --wait 2>&1) || e2e_log "$out"
check "dana's session is RUNNING" [ "$(D session info work --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')" == RUNNING ]
ref=$(D session commit work --tag v1 --json --wait | python3 -c 'import json,sys; print(json.load(sys.stdin)["ref"])')
check "dana's session is converted into a private image ($ref)" contains "$ref" "tessera-private/dana-"
E2E_IMAGES+=("$ref")
D session rm work >/dev/null

WEB_URL=$web_url ADMIN_PASSWORD=$password USER_EMAIL=dana@example.org USER_PASSWORD='danas password' \
	TEST_IMAGE=$TEST_IMAGE RM_TAG=$RM_TAG PRIVATE_REF=$ref NODE=$E2E_AGENT_ID CORES=$(nproc) WORK_DIR=$E2E_DIR \
	SHOTS=${SCREENSHOT_DIR:-$E2E_DIR/shots} UI_SRC=$UI_SRC TESSERA_BIN=$TESSERA ADMIN_CONF=$TESSERA_CONFIG \
	USER_CONF=$E2E_DIR/dana.conf node "$(dirname "$0")/envq.test.mjs" 2>&1 | tee "$E2E_DIR/browser.log"
while read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	esac
done < "$E2E_DIR/browser.log"
check "the browser test ran to its end" grep -q '^# done' "$E2E_DIR/browser.log"
check "the removed tag is gone from Docker" not docker image inspect "$RM_TAG" >/dev/null 2>&1
"$TESSERA" session rm p1 p2 hog >/dev/null 2>&1
D session rm from-env >/dev/null 2>&1
e2e_done
