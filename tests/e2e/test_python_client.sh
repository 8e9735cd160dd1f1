#!/usr/bin/env bash
# The Python client, clients/python (issue 34, item 3): `pip install
# ./clients/python` into a fresh venv with no package index allowed (the
# offline install the docs promise), then its suite with the installed
# package: the offline tests (signing against the C signer's known answers,
# the configuration, the exec stream) and the live ones against this
# `tessera server` (create and wait, exec, logs, list, info, an app link,
# folder upload and download with progress, images, stats, errors, batch
# sessions, remove).
. "$(dirname "$0")/lib.sh"
e2e_setup
# Samples every 500 ms: the stats test waits for a first one.
start_server --stats-interval-ms 500 || { e2e_done; exit 1; }

SRC=$(cd "$(dirname "$0")/../../clients/python" && pwd)
VENV=$E2E_DIR/venv
# Nothing may write into the source tree (the build backend's bytecode).
export PYTHONDONTWRITEBYTECODE=1

# The venv of the user guide's Debian recipe: Debian's packages (pip among
# them) seen from it, so no pip is copied in (ensurepip's copy is most of
# a venv's making time on a busy machine); pip installs into the venv.
check "a venv is made with Debian's python3" /usr/bin/python3 -m venv --system-site-packages --without-pip "$VENV"
# PIP_NO_INDEX: pip may consult no index at all, and no configured
# directory of wheels (PIP_FIND_LINKS, a pip.conf) either, so an install
# that needs something fetched (setuptools as the build backend, which
# pip installs into its isolated build environment) fails here even on a
# machine that could reach PyPI.
env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
	"$VENV/bin/python" -m pip install "$SRC" >"$E2E_DIR/pip.log" 2>&1
rc=$?
check "pip install ./clients/python installs with no index ($rc: $(tail -n 1 "$E2E_DIR/pip.log"))" [ $rc -eq 0 ]
where=$(cd "$E2E_DIR" && "$VENV/bin/python" -c 'import tessera_client; print(tessera_client.__file__)' 2>&1)
check "tessera_client imports from the venv ($where)" contains "$where" "$VENV/lib/"

# From a directory of its own, with the tests' directory as the top: the
# source tree's package is not on sys.path, the installed one is tested.
(cd "$E2E_DIR" && TESSERA_TEST_IMAGE=$TEST_IMAGE timeout 240 "$VENV/bin/python" -m unittest discover \
	-s "$SRC/tests" -t "$SRC/tests" -v) >"$E2E_DIR/unittest.log" 2>&1
rc=$?
sed 's/^/  /' "$E2E_DIR/unittest.log"
check "the client's suite passes ($rc)" [ $rc -eq 0 ]
check "and skipped none of it" not grep -q 'skipped' "$E2E_DIR/unittest.log"
ran=$(sed -n 's/^Ran \([0-9]*\) tests.*/\1/p' "$E2E_DIR/unittest.log")
check "the live tests ran too (${ran:-0} tests)" grep -q '^test_z_remove (test_live.Live' "$E2E_DIR/unittest.log"

# What the suite made is gone: its session removed, its folder trashed.
left=$("$TESSERA" session ls --json 2>&1)
check "no session of the suite is left ($left)" [ "$left" == "[]" ]
e2e_done
