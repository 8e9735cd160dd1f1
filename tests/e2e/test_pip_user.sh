#!/usr/bin/env bash
# pip for the session user, the seeds' way (issue 29, item 5), in
# tessera/python:3.11 sessions as the work user (uid 1000, no root, no
# sudo), with wheels the test builds (sessions reach no package index) in
# a folder the sessions mount:
# - `pip install --user` lands in the automounted .local folder
#   (docs/folders.md, "Automount") and a second session imports it;
# - plain `pip install` goes into the image's site-packages
#   (/usr/local/lib/python3.11/dist-packages), which another session of the
#   image does not have, but the session converted into an image
#   (`session commit --wait`) does: a session of the private image imports
#   it;
# - what the converted image keeps of /home/work (docs/images.md, "Private
#   images"): the home's own files, not the folders mounted into it; the
#   mount points Docker left in the home are the work user's in a session
#   of the image that does not mount them (pip install --user works there
#   without a .local folder).
# The private image is removed at the end (image rm).
. "$(dirname "$0")/lib.sh"
PY=tessera/python:3.11
if ! docker image inspect "$PY" >/dev/null 2>&1; then
	echo "$PY is not built; run 'meson test -C build test_images' (it builds it from images/python/3.11.recipe)"
	exit 1
fi
e2e_setup
start_server --registry none || { e2e_done; exit 1; }
T() { "$TESSERA" "$@"; }
REF=
trap 'e2e_teardown; [[ -n $REF ]] && docker rmi -f "$REF" >/dev/null 2>&1' EXIT
SYS=/usr/local/lib/python3.11/dist-packages
USERSITE=/home/work/.local/lib/python3.11/site-packages
flat() { tr '\n' '|' <<<"$1" | tail -c 400; }
wait_gone() {  # until session $1 has ended
	local s
	for _ in $(seq 1 300); do
		s=$(jget "$1" status 2>/dev/null)
		[[ $s == TERMINATED || $s == CANCELLED || $s == ERROR ]] && return 0
		sleep 0.1
	done
	return 1
}

# wheel NAME MODULE TEXT: a pure-Python wheel NAME-1.0 with MODULE.py
# holding TEXT, in $E2E_DIR/wheels (a wheel is a zip: the module, and
# NAME-1.0.dist-info/ with METADATA, WHEEL and RECORD).
mkdir -p "$E2E_DIR/wheels"
wheel() {
	python3 - "$E2E_DIR/wheels" "$1" "$2" "$3" <<'EOF'
import base64, hashlib, sys, zipfile
out, name, mod, text = sys.argv[1:]
dist = name.replace("-", "_")
info = f"{dist}-1.0.dist-info"
files = {
    f"{mod}.py": text + "\n",
    f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tessera-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for path, body in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(body.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{path},sha256={digest},{len(body.encode())}")
record.append(f"{info}/RECORD,,")
files[f"{info}/RECORD"] = "\n".join(record) + "\n"
with zipfile.ZipFile(f"{out}/{dist}-1.0-py3-none-any.whl", "w") as z:
    for path, body in files.items():
        z.writestr(path, body)
EOF
}
wheel tessera-pip-user tessera_pip_user 'WHERE = "user"'
wheel tessera-pip-image tessera_pip_image 'WHERE = "image"'
check "the test's wheels are made" [ -f "$E2E_DIR/wheels/tessera_pip_user-1.0-py3-none-any.whl" -a \
	-f "$E2E_DIR/wheels/tessera_pip_image-1.0-py3-none-any.whl" ]

check "folder create .local" T folder create .local
check "folder create wheels" T folder create wheels
for w in "$E2E_DIR"/wheels/*.whl; do
	check "upload $(basename "$w")" T folder upload wheels "$w"
done

check "a $PY session starts, mounting the wheels" T session create "$PY" --name p1 --cpu 1 --mem 512m --mount wheels --wait
check "it runs as the work user" [ "$(T session exec p1 -- id -u)" == 1000 ]

# ---- pip install --user: into the automounted .local ----
out=$(T session exec p1 -- pip install --user --no-index /home/work/wheels/tessera_pip_user-1.0-py3-none-any.whl 2>&1)
rc=$?
check "pip install --user works as the work user ($rc: $(flat "$out"))" [ $rc -eq 0 ]
check "without externally-managed-environment" not contains "$out" "externally-managed-environment"
where=$(T session exec p1 -- python3 -c 'import tessera_pip_user as m; print(m.__file__)' 2>&1)
check "it lands in ~/.local ($where)" [ "$where" == "$USERSITE/tessera_pip_user.py" ]
files=$(T folder files .local lib/python3.11/site-packages 2>&1)
check "which is the .local folder ($(flat "$files"))" contains "$files" "tessera_pip_user.py"

# ---- plain pip install: into the image's site-packages ----
out=$(T session exec p1 -- pip install --no-index /home/work/wheels/tessera_pip_image-1.0-py3-none-any.whl 2>&1)
rc=$?
check "plain pip install works as the work user, no root ($rc: $(flat "$out"))" [ $rc -eq 0 ]
check "not falling back to a user installation" not contains "$out" "Defaulting to user installation"
where=$(T session exec p1 -- python3 -c 'import tessera_pip_image as m; print(m.__file__)' 2>&1)
check "it lands in the image's site-packages ($where)" [ "$where" == "$SYS/tessera_pip_image.py" ]
check "not in .local" not contains "$(T folder files .local lib/python3.11/site-packages 2>&1)" "tessera_pip_image"
check "pip lists both" contains "$(T session exec p1 -- pip list 2>/dev/null)" "tessera-pip-image"
# For the home rule below: a file in the home itself, one in a mounted folder.
check "a file in the home" T session exec p1 -- sh -c 'echo home-kept > /home/work/note.txt'

# ---- a second session of the image: .local's package, not the other ----
check "a second session starts" T session create "$PY" --name p2 --cpu 1 --mem 512m --wait
out=$(T session exec p2 -- python3 -c 'import tessera_pip_user as m; print(m.WHERE)' 2>&1)
check "it imports the package pip put in .local ($out)" [ "$out" == user ]
out=$(T session exec p2 -- python3 -c 'import tessera_pip_image' 2>&1)
check "the image's site-packages of p1 are p1's alone ($(flat "$out"))" contains "$out" "No module named 'tessera_pip_image'"
T session rm p2 >/dev/null

# ---- convert p1 into an image: it keeps the package ----
out=$(T session commit p1 --wait 2>&1)
rc=$?
REF=$(sed -n 's/^\(.*\) is ready.*/\1/p' <<<"$out" | awk '{print $NF}')
check "session commit p1 --wait ($rc: $out)" [ $rc -eq 0 -a -n "$REF" ]
T session rm p1 >/dev/null
if [[ -n $REF ]]; then
	check "a session of the private image starts" T session create "$REF" --name p3 --cpu 1 --mem 512m --wait
	out=$(T session exec p3 -- python3 -c 'import tessera_pip_image as m; print(m.WHERE, m.__file__)' 2>&1)
	check "it imports what plain pip installed ($out)" [ "$out" == "image $SYS/tessera_pip_image.py" ]
	out=$(T session exec p3 -- python3 -c 'import tessera_pip_user as m; print(m.WHERE)' 2>&1)
	check "and .local's, from the folder ($out)" [ "$out" == user ]
	out=$(T session exec p3 -- cat /home/work/note.txt 2>&1)
	check "the image keeps the home's own files ($out)" [ "$out" == home-kept ]
	got=$(docker run --rm --entrypoint /bin/sh "$REF" -c "ls $USERSITE /home/work/wheels 2>&1; true")
	check "but not the mounted folders' ($(flat "$got"))" not contains "$got" ".whl"
	check "... nor .local's" not contains "$got" "tessera_pip_user"
	# Docker made the mount points of p1's folders in its home; the image
	# has them, empty and root's. The runner gives those not mounted now
	# to the work user.
	got=$(docker run --rm --entrypoint /bin/sh "$REF" -c 'stat -c "%U %n" /home/work/.local /home/work/wheels 2>&1; true')
	check "the image has p1's mount points, empty ($(flat "$got"))" has_line "$got" "root /home/work/wheels"
	out=$(T session exec p3 -- stat -c %U /home/work/wheels 2>&1)
	check "a session of the image, not mounting that folder, has it as the work user's ($out)" [ "$out" == work ]
	T session rm p3 >/dev/null
	check "p3 ends" wait_gone p3
	# Without a .local folder, pip install --user in a session of the
	# image goes to the home's own ~/.local, the image's mount point.
	check "folder rm .local" T folder rm .local
	check "a session of the image without .local starts" \
		T session create "$REF" --name p4 --cpu 1 --mem 512m --mount wheels --wait
	out=$(T session exec p4 -- pip install --user --no-index /home/work/wheels/tessera_pip_user-1.0-py3-none-any.whl 2>&1)
	rc=$?
	check "pip install --user works there too ($rc: $(flat "$out"))" [ $rc -eq 0 ]
	where=$(T session exec p4 -- python3 -c 'import tessera_pip_user as m; print(m.__file__)' 2>&1)
	check "into the home's ~/.local ($where)" [ "$where" == "$USERSITE/tessera_pip_user.py" ]
	T session rm p4 >/dev/null
	check "p4 ends" wait_gone p4
	out=$(T image rm "$REF" 2>&1)
	check "image rm of the private image ($out)" contains "$out" "removed from"
	check "it is gone from Docker" not docker image inspect "$REF"
fi
e2e_done
