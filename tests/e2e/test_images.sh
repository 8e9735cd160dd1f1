#!/usr/bin/env bash
# Images from recipes (docs/images.md): `tessera image build` of
# tessera/python:3.11 from images/python/3.11.recipe (a second build is up
# to date), its labels, and a session of it: Python 3.11, Jupyter, the
# user work. The image is kept: later runs find it up to date by its
# recipe hash, and the first build's downloads stay in the cache.
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
RECIPE=$SRC/images/python/3.11.recipe
IMAGE=tessera/python:3.11

if [[ $(id -u) -ne 0 ]] || ! command -v debootstrap >/dev/null; then
	echo "skip: building images needs root and debootstrap (scripts/bootstrap installs it)"
	exit 77
fi
e2e_setup

# Bad recipes fail before anything is built, with the line that is wrong.
printf 'name = tessera/x\ntag = 1\nsuite = bookworm\npackages = python3\n    Bad_Name\n' >"$E2E_DIR/bad.recipe"
out=$("$TESSERA" image build "$E2E_DIR/bad.recipe" 2>&1)
rc=$?
check "a bad recipe fails ($rc)" [ $rc -eq 1 ]
check "naming its file and line ($out)" contains "$out" "$E2E_DIR/bad.recipe:5: 'Bad_Name' is not a Debian package name"
printf 'name = tessera/x\ntag = 1\nsuite = buster\npackages = python3\n' >"$E2E_DIR/bad.recipe"
out=$("$TESSERA" image build "$E2E_DIR/bad.recipe" 2>&1)
check "an unknown suite is named ($out)" contains "$out" "bad.recipe:3: unknown Debian suite 'buster'"
out=$("$TESSERA" image build 2>&1)
check "RECIPE is required ($out)" contains "$out" "missing RECIPE"

read -r ref hash state < <("$TESSERA" image build --check "$RECIPE")
check "--check names the image ($ref)" [ "$ref" == "$IMAGE" ]
check "--check prints the recipe hash ($hash)" [ ${#hash} -eq 64 ]
e2e_log "$IMAGE is $state"

out=$("$TESSERA" image build "$RECIPE" 2>"$E2E_DIR/build.err")
rc=$?
check "image build succeeds ($rc)" [ $rc -eq 0 ]
[[ $rc -eq 0 ]] || tail -20 "$E2E_DIR/build.err"
if contains "$out" "built in"; then
	err=$(cat "$E2E_DIR/build.err")
	check "progress names the bootstrap stage" has_line "$err" "$IMAGE: bootstrap"
	check "progress counts packages set up of those planned" \
		grep -qE "^$IMAGE: packages: [0-9]+ of [0-9]+ set up" "$E2E_DIR/build.err"
	check "progress counts the import" grep -qE "^$IMAGE: import: [0-9]+ of [0-9]+ MB" "$E2E_DIR/build.err"
	check "the result names the stages' times ($out)" contains "$out" "bootstrap "
else
	check "an image with the recipe's hash is up to date ($out)" contains "$out" "$IMAGE: up to date"
fi
check "the result shows the framework versions" contains "$out" "python=3.11"
out=$("$TESSERA" image build "$RECIPE" 2>&1)
check "a second build is up to date ($out)" contains "$out" "$IMAGE: up to date"
read -r _ _ state < <("$TESSERA" image build --check "$RECIPE")
check "--check says up to date too ($state)" [ "$state" == "up to date" ]

# The labels of the contract (docs/images.md, "Labels").
labels=$(docker image inspect --format '{{json .Config.Labels}}' "$IMAGE")
label() { python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$labels" "$1"; }
check "ai.backend.kernelspec is 1" [ "$(label ai.backend.kernelspec)" == "1" ]
check "ai.backend.base-distro is debian12" [ "$(label ai.backend.base-distro)" == "debian12" ]
check "ai.backend.runtime-type is python" [ "$(label ai.backend.runtime-type)" == "python" ]
check "ai.backend.runtime-path is /usr/bin/python3" [ "$(label ai.backend.runtime-path)" == "/usr/bin/python3" ]
check "ai.backend.service-ports declares Jupyter and sshd, the apps the image has" [ "$(label ai.backend.service-ports)" == "jupyter:http:8081,sshd:tcp:2200" ]
check "ai.backend.resource.min.cpu is set" [ "$(label ai.backend.resource.min.cpu)" == "1" ]
check "tessera.family is python" [ "$(label tessera.family)" == "python" ]
check "tessera.title is Python" [ "$(label tessera.title)" == "Python" ]
fw=$(label tessera.frameworks)
check "tessera.frameworks has python 3.11 first ($fw)" contains "$fw" "python=3.11."
check "and notebook 6.4 ($fw)" contains "$fw" ",notebook=6.4."
check "tessera.recipe.hash is the recipe's" [ "$(label tessera.recipe.hash)" == "$hash" ]
config=$(docker image inspect --format '{{json .Config.Env}} {{.Config.WorkingDir}}' "$IMAGE")
check "PATH has /usr/local/bin ($config)" contains "$config" "PATH=/usr/local/sbin:/usr/local/bin:"
check "the working directory is /home/work" contains "$config" " /home/work"

# A session of it.
start_server || { e2e_done; exit 1; }
out=$("$TESSERA" session create "$IMAGE" --name py --cpu 1 --mem 512m --wait 2>&1)
check "a session of $IMAGE starts ($out)" wait_status py RUNNING
ver=$("$TESSERA" session exec py -- python3 --version 2>&1)
check "python3 prints 3.11 ($ver)" contains "$ver" "Python 3.11"
ver=$("$TESSERA" session exec py -- python --version 2>&1)
check "python is python3, from /usr/local/bin ($ver)" contains "$ver" "Python 3.11"
ver=$("$TESSERA" session exec py -- jupyter notebook --version 2>&1)
check "Jupyter Notebook 6.4 is there ($ver)" contains "$ver" "6.4."
id=$("$TESSERA" session exec py -- id work 2>&1)
check "the user work has uid 1000 ($id)" contains "$id" "uid=1000(work) gid=1000(work)"
home=$("$TESSERA" session exec py -- stat -c '%u %n' /home/work 2>&1)
check "/home/work belongs to work ($home)" [ "$home" == "1000 /home/work" ]
left=$("$TESSERA" session exec py -- sh -c 'ls /var/lib/apt/lists /var/cache/apt/archives | grep -c "\.deb$\|_Packages"; ls /usr/sbin/policy-rc.d 2>&1' 2>&1)
check "apt's lists and downloads and the build's policy-rc.d are gone ($left)" contains "$left" "0"$'\n'"ls: "
"$TESSERA" session rm py >/dev/null
check "the session ends" wait_status py TERMINATED

e2e_done
