#!/usr/bin/env bash
# The image builder's pip stage and CUDA recipe keys end to end
# (docs/images.md, "pip", "Site files", "images.conf"), with stand-ins the
# test makes, since this machine reaches neither PyPI nor NVIDIA:
# - wheels built here (a module with a console script, a stand-in `mlflow`
#   whose `mlflow ui --host H --port P` serves a page saying so, and a
#   dependency only it names), served as a PEP 503 simple index on
#   loopback; a stand-in site archive;
# - a recipe of the test's own (tessera-e2e/pip:1, Debian 12) with
#   components, debconf, host-provides, site-file, pip and cuda;
# - `--check` says exactly what it needs (a pip index, the site file)
#   before, and nothing after; building it unready fails with that line,
#   and --skip-unready skips it with exit 0; a site file whose sha256 is
#   not the recipe's is refused;
# - the build (a pip stage in its progress and times), its labels
#   (tessera.cuda, the pip-installed mlflow's version in
#   tessera.frameworks), and its base: extracted from the cache and
#   upgraded when a build of bookworm kept one (test_images' in `make
#   test`), else bootstrapped and kept (checked whichever it is: the test
#   looks at the cache before the build); bad --base-max-age and
#   base_max_age values are refused; a session of it: the package imports, the
#   console script runs, the site archive's content is in the image and
#   the site file is not, the image's sources.list and pip.conf, the
#   debconf answer, a package depending on libcuda1 installed against
#   tessera-host-driver; the MLflow UI app opens through the proxy and
#   answers with the stand-in's page.
# The image is removed at the end. Needs root, debootstrap and Docker, as
# test_images; the download cache (/var/cache/tessera/images) is shared.
. "$(dirname "$0")/lib.sh"
IMAGE=tessera-e2e/pip:1
CACHE=/var/cache/tessera/images
SITE_NAME=tessera-e2e-site-1.0.tar.gz

if [[ $(id -u) -ne 0 ]] || ! command -v debootstrap >/dev/null; then
	echo "skip: building images needs root and debootstrap (scripts/bootstrap installs it)"
	exit 77
fi
e2e_setup
# The site file this test puts into the shared cache goes with it, so
# that the next run's first --check finds it missing again.
trap 'rm -f "$CACHE/site/$SITE_NAME"; e2e_teardown' EXIT
rm -f "$CACHE/site/$SITE_NAME"
docker rmi -f "$IMAGE" >/dev/null 2>&1
E2E_IMAGES+=("$IMAGE")

# ---- the stand-ins: wheels, a simple index, a site archive ----
mkdir -p "$E2E_DIR/index" "$E2E_DIR/wrong"
python3 - "$E2E_DIR/index" <<'PY' || fail "the test's wheels and index are made"
# Wheels by hand (PEP 427: a zip with NAME-VER.dist-info/{METADATA,WHEEL,
# entry_points.txt,RECORD}) and a PEP 503 simple index of them.
import base64, hashlib, os, sys, zipfile

root = sys.argv[1]
os.makedirs(os.path.join(root, "files"), exist_ok=True)

MLFLOW_CLI = '''"""The test's stand-in for MLflow: `mlflow ui --host H --port P` serves
one page that says what it is."""
import argparse, http.server


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"<html><body>tessera e2e stand-in for mlflow ui</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    p = argparse.ArgumentParser(prog="mlflow")
    sub = p.add_subparsers(dest="cmd", required=True)
    ui = sub.add_parser("ui")
    ui.add_argument("--host", default="127.0.0.1")
    ui.add_argument("--port", type=int, default=5000)
    a = p.parse_args()
    http.server.ThreadingHTTPServer((a.host, a.port), Page).serve_forever()
'''


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def wheel(dist, version, files, requires=(), scripts=None):
    norm = dist.replace("-", "_")
    info = f"{norm}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\nSummary: tessera e2e stand-in\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    content = dict(files)
    content[f"{info}/METADATA"] = meta
    content[f"{info}/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: tessera-e2e\n"
                                "Root-Is-Purelib: true\nTag: py3-none-any\n")
    if scripts:
        content[f"{info}/entry_points.txt"] = "[console_scripts]\n" + "".join(
            f"{k} = {v}\n" for k, v in scripts.items())
    record = "".join(record_line(n, d.encode()) for n, d in content.items())
    record += f"{info}/RECORD,,\n"
    content[f"{info}/RECORD"] = record
    fname = f"{norm}-{version}-py3-none-any.whl"
    path = os.path.join(root, "files", fname)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in content.items():
            z.writestr(n, d)
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    project = dist.lower().replace("_", "-").replace(".", "-")
    os.makedirs(os.path.join(root, "simple", project), exist_ok=True)
    with open(os.path.join(root, "simple", project, "index.html"), "w") as f:
        f.write(f'<!DOCTYPE html><html><body><a href="../../files/{fname}#sha256={sha}">{fname}</a></body></html>\n')
    return project


projects = [
    wheel("tessera-e2e-hello", "1.0",
          {"tessera_e2e_hello/__init__.py":
           'GREETING = "hello from the e2e index"\n\ndef main():\n    print(GREETING)\n'},
          scripts={"tessera-e2e-hello": "tessera_e2e_hello:main"}),
    wheel("tessera-e2e-dep", "2.0", {"tessera_e2e_dep.py": "VALUE = 42\n"}),
    wheel("mlflow", "0.0.1",
          {"mlflow/__init__.py": '__version__ = "0.0.1"\n', "mlflow/cli.py": MLFLOW_CLI},
          requires=["tessera-e2e-dep>=2"], scripts={"mlflow": "mlflow.cli:main"}),
]
with open(os.path.join(root, "simple", "index.html"), "w") as f:
    f.write("<!DOCTYPE html><html><body>" + "".join(f'<a href="{p}/">{p}</a>' for p in projects) + "</body></html>\n")
PY
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 --directory "$E2E_DIR/index" "$PORT" >"$E2E_DIR/index.log" 2>&1 &
E2E_PIDS+=($!)
INDEX=http://127.0.0.1:$PORT/simple
for _ in $(seq 1 100); do curl -sf "$INDEX/mlflow/" >/dev/null && break; sleep 0.1; done
check "the simple index serves the stand-in mlflow" bash -c 'curl -sf "$1/mlflow/" | grep -q "mlflow-0.0.1-py3-none-any.whl#sha256="' _ "$INDEX"

mkdir -p "$E2E_DIR/site/site-payload"
echo "tessera e2e site payload" >"$E2E_DIR/site/site-payload/README"
tar -C "$E2E_DIR/site" -czf "$E2E_DIR/$SITE_NAME" site-payload
SITE_SHA=$(sha256sum "$E2E_DIR/$SITE_NAME" | cut -d' ' -f1)
echo "not the archive" >"$E2E_DIR/wrong/$SITE_NAME"

# ---- the recipe ----
RECIPE=$E2E_DIR/pip.recipe
cat >"$RECIPE" <<EOF
# The test's own recipe (tests/e2e/test_image_pip.sh).
name  = tessera-e2e/pip
tag   = 1
title = Tessera e2e pip
suite = bookworm
components = main contrib
packages = python3 python3-pip
frameworks = python=python3 mlflow=mlflow
pip = tessera-e2e-hello==1.0
    mlflow
site-file = $SITE_NAME sha256=$SITE_SHA
cuda = 12.4
debconf = debconf debconf/priority select critical
host-provides = libcuda1=550 libcuda.so.1=550
runtime-type  = python
runtime-path  = /usr/bin/python3
service-ports = mlflow-ui:http:5000

run = mkdir -p /opt/e2e-site && tar -xzf /tmp/tessera-site/$SITE_NAME -C /opt/e2e-site
# The site file is read-only in the build.
run = test -r /tmp/tessera-site/$SITE_NAME && ! (echo x >>/tmp/tessera-site/$SITE_NAME) 2>/dev/null
run = mkdir -p /etc/backend.ai/service-defs
    printf '%s\n' '{"command": ["mlflow", "ui", "--host", "0.0.0.0", "--port", "{ports[0]}"]}' >/etc/backend.ai/service-defs/mlflow-ui.json
# A package that depends on the driver's libcuda1 installs against the
# builder's tessera-host-driver.
run = mkdir -p /tmp/needs-cuda/DEBIAN
    printf 'Package: e2e-needs-libcuda\nVersion: 1\nArchitecture: all\nMaintainer: e2e <e2e@localhost>\nDepends: libcuda1 (>= 525), libcuda.so.1 (>= 525)\nDescription: e2e\n needs the driver\n' >/tmp/needs-cuda/DEBIAN/control
    dpkg-deb --build /tmp/needs-cuda /tmp/needs-cuda.deb && dpkg -i /tmp/needs-cuda.deb
EOF
printf '# no pip_index here\n' >"$E2E_DIR/empty.conf"
printf 'pip_index = %s\n' "$INDEX" >"$E2E_DIR/index.conf"
printf 'pip_index = http://127.0.0.1:1/nothing-here\n' >"$E2E_DIR/wrong.conf"

# ---- readiness ----
out=$("$TESSERA" image build --check --config "$E2E_DIR/empty.conf" "$RECIPE" 2>&1)
check "--check names the image and its state ($(head -1 <<<"$out"))" has_prefix_line "$out" "$IMAGE [0-9a-f]\{64\} not built"
check "--check: it needs a pip index, naming the config ($out)" has_line "$out" \
	"$IMAGE: needs a pip index for tessera-e2e-hello==1.0 mlflow: --pip-index URL or pip_index in $E2E_DIR/empty.conf"
check "--check: it needs the site file" has_line "$out" \
	"$IMAGE: needs site file $SITE_NAME: tessera image build --site-file PATH"
out=$("$TESSERA" image build --config "$E2E_DIR/empty.conf" "$RECIPE" 2>&1)
rc=$?
check "building it unready fails ($rc)" [ $rc -eq 1 ]
check "with what it needs ($out)" has_line "$out" \
	"tessera: $IMAGE: needs site file $SITE_NAME: tessera image build --site-file PATH"
check "and builds nothing" not docker image inspect "$IMAGE"
out=$("$TESSERA" image build --skip-unready --config "$E2E_DIR/empty.conf" "$RECIPE" 2>&1)
rc=$?
check "--skip-unready skips it, exit 0 ($rc)" [ $rc -eq 0 ]
check "saying what it needs ($out)" has_line "$out" \
	"$IMAGE: skipped, needs site file $SITE_NAME: tessera image build --site-file PATH"
out=$("$TESSERA" image build --site-file "$E2E_DIR/wrong/$SITE_NAME" --check --config "$E2E_DIR/index.conf" "$RECIPE" 2>&1)
rc=$?
check "a site file whose sha256 is not the recipe's is refused ($rc)" [ $rc -eq 1 ]
check "naming both hashes ($(head -1 <<<"$out"))" contains "$out" "not the $SITE_SHA its recipe names"
check "and is not kept" not test -e "$CACHE/site/$SITE_NAME"
out=$("$TESSERA" image build --site-file "$E2E_DIR/$SITE_NAME" 2>&1)
check "--site-file keeps the archive in the cache ($out)" has_line "$out" \
	"site file $SITE_NAME: kept as $CACHE/site/$SITE_NAME (sha256 $SITE_SHA)"
out=$("$TESSERA" image build --check --config "$E2E_DIR/index.conf" "$RECIPE" 2>&1)
check "with pip_index in the config and the site file kept, --check says it needs nothing ($out)" \
	bash -c '[[ $(wc -l <<<"$1") -eq 1 && "$1" != *needs* ]]' _ "$out"

# ---- the age limit of the kept base: bad values are refused ----
out=$("$TESSERA" image build --check --base-max-age 0 "$RECIPE" 2>&1)
rc=$?
check "--base-max-age 0 is refused ($rc: $out)" bash -c '[ $1 -eq 2 ] && [[ "$2" == *"--base-max-age '\''0'\'' is not a number of days from 1 to 3650"* ]]' _ $rc "$out"
printf 'base_max_age = 7d\n' >"$E2E_DIR/age.conf"
out=$("$TESSERA" image build --check --config "$E2E_DIR/age.conf" "$RECIPE" 2>&1)
rc=$?
check "base_max_age = 7d is refused ($rc: $out)" bash -c '[ $1 -eq 1 ] && [[ "$2" == *"base_max_age '\''7d'\'' is not a number of days"* ]]' _ $rc "$out"

# ---- the build: the flag's index wins over the config's ----
# Its base comes from the cache when a build of bookworm kept one in the
# last 7 days (in `make test`, test_images' build of tessera/python:3.11);
# else it is bootstrapped and kept. Which kept bases are there (name and
# age) is looked at before the build; the build's log names the archive
# of its key.
BASES=$CACHE/bookworm/base
LOG=$CACHE/logs/tessera-e2e_pip_1.log
fresh_before=$(find "$BASES" -maxdepth 1 -name 'minbase-*.tar.zst' -mmin -$((7 * 24 * 60)) -printf '%f\n' 2>/dev/null)
out=$("$TESSERA" image build --config "$E2E_DIR/wrong.conf" --pip-index "$INDEX" "$RECIPE" 2>"$E2E_DIR/build.err")
rc=$?
check "the image builds ($rc)" [ $rc -eq 0 ]
[[ $rc -eq 0 ]] || tail -20 "$E2E_DIR/build.err"
archive=$(sed -n 's/^# the kept base of this key: //p' "$LOG" | head -1)
check "the log names its key's archive ($archive)" bash -c '[[ "$1" == "$2"/minbase-*-????????????.tar.zst ]]' _ "$archive" "$BASES"
if grep -qxF "$(basename "$archive")" <<<"$fresh_before"; then
	echo "# the base of bookworm was kept before this build: it is used"
	check "its times say the base was kept ($out)" grep -qE "^$IMAGE: built in .*\(bootstrap [0-9ms]+ \(kept base of [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2} UTC\)," <<<"$out"
	check "so does its progress" grep -qE "^$IMAGE: bootstrap: kept base of " "$E2E_DIR/build.err"
	check "debootstrap did not run" not grep -q '^\$ debootstrap ' "$LOG"
else
	echo "# no base of bookworm was kept before this build: it is bootstrapped and kept"
	check "its times say the base was bootstrapped and kept ($out)" grep -qE "^$IMAGE: built in .*\(bootstrap [0-9ms]+ \(bootstrapped, kept\)," <<<"$out"
	check "so does its progress" grep -qE "^$IMAGE: bootstrap: kept for later builds of bookworm as $archive$" "$E2E_DIR/build.err"
	check "debootstrap ran, with main alone" grep -q '^\$ debootstrap --variant=minbase --components=main ' "$LOG"
fi
check "the base was upgraded (apt-get dist-upgrade right after apt-get update), kept or new" \
	bash -c 'grep "^\$ (chroot) apt-get" "$1" | grep -A1 -x "\$ (chroot) apt-get update" | grep -q " dist-upgrade$"' _ "$LOG"
check "the key's archive is kept now" test -s "$archive"
check "beside its key" grep -qx "suite bookworm" "${archive%.tar.zst}.key"
check "and no half-written archive is left" bash -c '! ls -A "$1" | grep -q "\.part$"' _ "$BASES"
check "its times name the pip stage ($out)" contains "$out" ", pip "
check "progress names the pip stage" grep -q "^$IMAGE: pip" "$E2E_DIR/build.err"
check "the frameworks line has Debian's python and pip's mlflow" grep -qE "^$IMAGE: python=3\.11\.[0-9]+,mlflow=0\.0\.1$" <<<"$out"
labels=$(docker image inspect --format '{{json .Config.Labels}}' "$IMAGE" 2>&1)
label() { python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$labels" "$1"; }
check "tessera.cuda is 12.4" [ "$(label tessera.cuda)" == "12.4" ]
check "tessera.frameworks has mlflow=0.0.1 ($(label tessera.frameworks))" contains "$(label tessera.frameworks)" "mlflow=0.0.1"
check "ai.backend.service-ports is mlflow-ui:http:5000" [ "$(label ai.backend.service-ports)" == "mlflow-ui:http:5000" ]
out=$("$TESSERA" image build --config "$E2E_DIR/index.conf" "$RECIPE" 2>&1)
check "a second build is up to date ($out)" contains "$out" "$IMAGE: up to date"

# ---- a session of it ----
start_server --app-ports "$(e2e_free_port_range 8)" --registry none || { e2e_done; exit 1; }
"$TESSERA" session create "$IMAGE" --name p --cpu 1 --mem 512m --wait >/dev/null 2>&1
check "a session of $IMAGE runs" wait_status p RUNNING
sx() { "$TESSERA" session exec p -- "$@" 2>&1; }
out=$(sx python3 -c 'import tessera_e2e_hello, tessera_e2e_dep; print(tessera_e2e_hello.GREETING, tessera_e2e_dep.VALUE)')
check "the pip package and mlflow's dependency import in the session ($out)" has_line "$out" "hello from the e2e index 42"
out=$(sx tessera-e2e-hello)
check "its console script is on PATH ($out)" has_line "$out" "hello from the e2e index"
out=$(sx sh -c 'python3 -c "import mlflow, os; print(os.path.dirname(mlflow.__file__))"; stat -c %u /usr/local/lib/python3.11/dist-packages/mlflow /usr/local/bin/mlflow')
check "pip installed into /usr/local, which the session user owns ($(tr '\n' ' ' <<<"$out"))" \
	bash -c '[[ "$1" == "/usr/local/lib/python3.11/dist-packages/mlflow"$'\''\n'\''"1000"$'\''\n'\''"1000" ]]' _ "$out"
out=$(sx cat /etc/pip.conf)
check "the image's pip.conf keeps the index ($(tr '\n' ' ' <<<"$out"))" has_line "$out" "index-url = $INDEX"
check "and trusts its http host" has_line "$out" "trusted-host = 127.0.0.1:$PORT"
check "and lets pip install beside Debian's packages" has_line "$out" "break-system-packages = true"
out=$(sx cat /opt/e2e-site/site-payload/README)
check "the run step's extract of the site archive is in the image ($out)" has_line "$out" "tessera e2e site payload"
out=$(sx sh -c 'if test -e /tmp/tessera-site; then echo present; else echo absent; fi')
check "the site file is not ($out)" [ "$out" == "absent" ]
out=$(sx cat /etc/apt/sources.list)
check "sources.list has the recipe's components ($(head -1 <<<"$out"))" grep -q ' bookworm main contrib$' <<<"$out"
check "for -updates too" grep -q ' bookworm-updates main contrib$' <<<"$out"
out=$(sx dpkg-query -W -f '${Status}|${Provides}\n' tessera-host-driver e2e-needs-libcuda)
check "tessera-host-driver provides the recipe's host-provides ($(tr '\n' ' ' <<<"$out"))" has_line "$out" \
	"install ok installed|libcuda1 (= 550), libcuda.so.1 (= 550)"
check "and a package depending on libcuda1 is installed" has_line "$out" "install ok installed|"
out=$(sx sh -c "grep -A3 '^Name: debconf/priority' /var/cache/debconf/config.dat")
check "the recipe's debconf answer is in debconf's database ($(tr '\n' ' ' <<<"$out"))" has_line "$out" "Value: critical"

# ---- the MLflow UI app through the proxy ----
apps=$("$TESSERA" session apps p 2>&1)
check "its apps have mlflow-ui ($(tr '\n' '|' <<<"$apps"))" contains "$apps" "mlflow-ui"
open_app p mlflow-ui
check "session app p mlflow-ui gives a setup URL that sets the cookie ($SETUP)" \
	bash -c '[ "$1" == 302 ] && [ -n "$2" ]' _ "$SETUP" "$COOKIE"
poll "$ORIGIN" / "$COOKIE"
check "the MLflow UI app answers 200 once started (seen:$SEEN)" [ $? -eq 0 ]
check "with the stand-in's page, started from its service definition" grep -q "tessera e2e stand-in for mlflow ui" "$E2E_DIR/body"

"$TESSERA" session rm p >/dev/null 2>&1
check "the session ends" wait_status p TERMINATED
e2e_done
