#!/usr/bin/env bash
# Browser test: the seeds' GUI scenario in Debian's Chromium, driven by
# playwright-core (no browser download). A server with one mock 8 GiB GPU
# at 2 fGPU per GPU: three 1-fGPU sessions give 2 RUNNING + 1 PENDING;
# terminating one starts the PENDING one; "Convert to image" makes a
# private image of a RUNNING session and a session of it runs; a wrong
# password is refused; a second user sees none of the admin's sessions.
. "$(dirname "$0")/../e2e/lib.sh"
UI_SRC=${UI_SRC:?UI_SRC must point at the ui/ source dir (its node_modules has playwright-core)}
if [[ ! -x /usr/bin/chromium ]]; then
	echo "chromium is not installed (/usr/bin/chromium); run 'make setup'"
	exit 1
fi
e2e_setup

# An environment of two versions for the launch dialog's pickers, labelled as the
# recipes label theirs (docs/images.md, "Labels"), on the tests' busybox
# file system: small, made here and removed when the test ends (after its
# sessions, e2e_teardown), as make test's leftover check wants.
UI_ML=tessera-ui-demo/pytorch
ui_demo_image() {  # ui_demo_image REF LABEL...
	local ref=$1; shift
	docker image inspect "$ref" >/dev/null 2>&1 && return 0
	local changes=(-c 'ENV PATH=/bin' -c 'CMD ["/bin/sh"]') l
	for l in "$@"; do changes+=(-c "LABEL $l"); done
	docker save "$TEST_IMAGE" | tar -xO --wildcards '*/layer.tar' | docker import "${changes[@]}" - "$ref" >/dev/null
}
ML_LABELS=(ai.backend.kernelspec=1 ai.backend.base-distro=debian12 ai.backend.runtime-type=python
	ai.backend.runtime-path=/usr/bin/python3 ai.backend.resource.min.cpu=1 ai.backend.resource.min.mem=1g
	'ai.backend.service-ports="jupyter:http:8081,mlflow-ui:preopen:5000"' tessera.family=ui-demo-pytorch
	'tessera.title="PyTorch"')
ui_demo_image "$UI_ML:3.11-torch1.13" "${ML_LABELS[@]}" \
	'tessera.frameworks="python=3.11.2,torch=1.13.1,scikit-learn=1.2.1,numpy=1.24.2,notebook=6.4.12"'
ui_demo_image "$UI_ML:3.13-torch2.6" "${ML_LABELS[@]}" \
	'tessera.frameworks="python=3.13.5,torch=2.6.0,scikit-learn=1.4.2,numpy=2.2.4,notebook=6.4.12"'
# A CUDA build (tessera.cuda): the launcher marks its version "CUDA 12.4".
ui_demo_image "$UI_ML:3.13-torch2.6-cuda12.4" "${ML_LABELS[@]/,mlflow-ui:preopen:5000/}" tessera.cuda=12.4 \
	'tessera.frameworks="python=3.13.5,torch=2.6.0,scikit-learn=1.4.2,numpy=2.2.4,notebook=6.4.12"'
E2E_IMAGES+=("$UI_ML:3.11-torch1.13" "$UI_ML:3.13-torch2.6" "$UI_ML:3.13-torch2.6-cuda12.4")
check "the demo images are there" docker image inspect -f . "$UI_ML:3.11-torch1.13" "$UI_ML:3.13-torch2.6" \
	"$UI_ML:3.13-torch2.6-cuda12.4" >/dev/null

start_server --mock-gpus 1x8GiB --fgpu-per-device 2 --web-port 0 || { e2e_done; exit 1; }
# The server adds web_url to admin.conf once the web UI listens, a moment
# after it wrote the file: wait for that line.
for _ in $(seq 1 300); do
	web_url=$(sed -n 's/^web_url *= *//p' "$TESSERA_CONFIG")
	[[ -n $web_url ]] && break
	sleep 0.1
done
password=$(sed -n 's/^password *= *//p' "$TESSERA_CONFIG")
check "admin.conf has web_url ($web_url)" [ -n "$web_url" ]
check "admin.conf has the admin password" [ -n "$password" ]

WEB_URL=$web_url ADMIN_EMAIL=admin@tessera.local ADMIN_PASSWORD=$password IMAGE=$TEST_IMAGE ML_IMAGE=$UI_ML:3.11-torch1.13 \
	PROFILE_DIR=$E2E_DIR/chromium SHOTS=${SCREENSHOT_DIR:-$E2E_DIR/shots} UI_SRC=$UI_SRC \
	node "$(dirname "$0")/ui.test.mjs" 2>&1 | tee "$E2E_DIR/browser.log"
while read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	esac
done < "$E2E_DIR/browser.log"
check "the browser test ran to its end" grep -q '^# done' "$E2E_DIR/browser.log"
# The private image "Convert to image" made (the server's state goes with
# $E2E_DIR; the image is Docker's).
while read -r ref; do
	E2E_IMAGES+=("$ref")   # removed after the sessions that run it (e2e_teardown)
done < <(sed -n 's/^# image \(tessera-private\/.*\)$/\1/p' "$E2E_DIR/browser.log")
e2e_done
