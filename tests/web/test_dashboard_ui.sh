#!/usr/bin/env bash
# Browser test of the dashboard (docs/user-guide.md) in Debian's Chromium,
# driven by playwright-core: the resource panel changes when sessions
# start; the launch dialog's estimate says the third 1-fGPU session would
# wait; reopened, it asks for 1 session, keeps Launch in sight at
# 1280x800, starts the GPU at the image's minimum, turns Launch off with
# the reason for a request below it, names no missing image, and launches
# batch sessions, as root where the policy allows it (a 403 shown by
# Launch where not); a PENDING row says Cancel (and its dialog what that
# does); the list's filters live in the URL; a session's page shows its
# status history and where its start's time went, its log (followed, searchable) and its live usage plot,
# the memory chart's y-axis labels whole; a long email breaks at its '@'
# only; the Nodes page drains and undrains a node (its sessions keep
# running); the settings refuse a bad value in the server's words; at 400 pixels no
# page scrolls sideways. And the rough edges of issue 35: the tiles count
# what holds (PENDING apart; an admin's everyone's; no red no-limit bar),
# the estimate says Checking while it re-checks, an empty catalog says what
# to do, badges differ, rows keep their buttons on one line, legends have
# no empty time row, GPUs are numbered from 0, node bars are readable, the
# Admin page's cells, selects, in-force values and policy removal, the
# Data page's address, image names break between tokens, the icon, the
# app launcher's focus and the terminal's title. Screenshots, light and
# dark, wide and narrow, go to SCREENSHOT_DIR (docs/images when refreshing
# the user guide's).
. "$(dirname "$0")/../e2e/lib.sh"
UI_SRC=${UI_SRC:?UI_SRC must point at the ui/ source dir (its node_modules has playwright-core)}
if [[ ! -x /usr/bin/chromium ]]; then
	echo "chromium is not installed (/usr/bin/chromium); run 'make setup'"
	exit 1
fi
e2e_setup

# Two environments for the launch dialog's checks: one whose image needs
# half a GPU (its fGPU must start there), one that needs none. Labelled as
# the recipes label theirs (docs/images.md, "Labels") on the tests' busybox
# file system, as test_ui.sh makes its own; removed at the end, so that
# they show in no other test's launch dialog (nor its screenshots).
GPU_DEMO=tessera-ui-demo/gpu-min:1 CPU_DEMO=tessera-ui-demo/cpu-min:1
ui_demo_image() {  # ui_demo_image REF LABEL...
	local ref=$1; shift
	docker image inspect "$ref" >/dev/null 2>&1 && return 0
	local changes=(-c 'ENV PATH=/bin' -c 'CMD ["/bin/sh"]') l
	for l in "$@"; do changes+=(-c "LABEL $l"); done
	docker save "$TEST_IMAGE" | tar -xO --wildcards '*/layer.tar' | docker import "${changes[@]}" - "$ref" >/dev/null
}
ui_demo_image "$GPU_DEMO" ai.backend.kernelspec=1 ai.backend.base-distro=debian12 \
	ai.backend.resource.min.cpu=0.5 ai.backend.resource.min.mem=256m ai.backend.resource.min.cuda.shares=0.5 \
	tessera.family=ui-demo-gpu-min 'tessera.title="GPU minimum"' 'tessera.frameworks="python=3.11.2,cuda=12.2"'
ui_demo_image "$CPU_DEMO" ai.backend.kernelspec=1 ai.backend.base-distro=debian12 \
	ai.backend.resource.min.cpu=0.25 ai.backend.resource.min.mem=64m \
	tessera.family=ui-demo-cpu-min 'tessera.title="CPU only"' 'tessera.frameworks="python=3.11.2"'
check "the demo images are there" docker image inspect -f . "$GPU_DEMO" "$CPU_DEMO" >/dev/null

# App ports: the terminal is opened once, for its tab's title.
start_server --mock-gpus 1x8GiB --fgpu-per-device 2 --app-ports "$(e2e_free_port_range 8)" || { e2e_done; exit 1; }
web_url=$(sed -n 's/^web_url *= *//p' "$TESSERA_CONFIG")
password=$(sed -n 's/^password *= *//p' "$TESSERA_CONFIG")
check "admin.conf has web_url ($web_url)" [ -n "$web_url" ]

# A session that writes a line a second, for the log and the plot; its
# 256 MiB limit gives the memory chart three-digit labels ("250 MiB").
"$TESSERA" session create "$TEST_IMAGE" --name logger --cpu 0.25 --mem 256m \
	--startup-command 'i=0; while true; do i=$((i+1)); echo "tick $i marker-LOGLINE"; sleep 1; done' >/dev/null
check "the logger session runs" wait_status logger RUNNING

WEB_URL=$web_url ADMIN_EMAIL=admin@tessera.local ADMIN_PASSWORD=$password IMAGE=$TEST_IMAGE \
	GPU_DEMO=$GPU_DEMO CPU_DEMO=$CPU_DEMO \
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
check "the demo images are removed" docker rmi "$GPU_DEMO" "$CPU_DEMO" >/dev/null
e2e_done
