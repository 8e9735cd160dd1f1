#!/usr/bin/env bash
# docs/folders.md and docs/images.md run as written: every ```sh block,
# in order, by bash -e (each command must exit 0), with `tessera` on PATH
# as this build's, against a `tessera server` that has what the pages'
# reader has: the storage hosts they name (the default one and `nfs`, both
# on this machine) and the image they use, tessera/python:3.11 (built by
# test_images, which runs before). folders.md's blocks run in a directory
# of the test's, where the files they read (./train.csv) are made first;
# images.md's in the source tree, with `build/` the build tree (as
# test_readme substitutes it). Nothing else is substituted. Left out: the
# block of images.md that builds every image (`make images`, `make
# images-test`), which takes the ML images' many minutes: `make
# images-test` is that test.
. "$(dirname "$0")/lib.sh"
PY_IMAGE=tessera/python:3.11
if ! docker image inspect "$PY_IMAGE" >/dev/null 2>&1; then
	echo "$PY_IMAGE is not built; run 'meson test -C build test_images' (it builds it from images/python/3.11.recipe)"
	exit 1
fi
e2e_setup
doc=$(dirname "$0")/../../docs/folders.md
mkdir -p "$E2E_DIR/bin" "$E2E_DIR/cwd" "$E2E_DIR/blocks" "$E2E_DIR/local" "$E2E_DIR/nfs"
ln -s "$TESSERA" "$E2E_DIR/bin/tessera"
start_server --storage-hosts "local:$E2E_DIR/local,nfs:$E2E_DIR/nfs" || { e2e_done; exit 1; }

src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$(dirname "$TESSERA")" && pwd)
# The ```sh blocks of a page as PREFIX-NN.sh.
blocks_of() {  # blocks_of PAGE PREFIX
	python3 - "$1" "$E2E_DIR/blocks/$2" <<'PY' || fail "$1 has sh blocks"
import re, sys
n = 0
for body in re.findall(r"^```sh[^\n]*\n(.*?)^```", open(sys.argv[1]).read(), re.M | re.S):
    n += 1
    open(f"{sys.argv[2]}-{n:02d}.sh", "w").write(body)
sys.exit(0 if n else 1)
PY
}
run_block() {  # run_block PAGE BLOCK DIR
	local name out rc
	name=$(basename "$2")
	out=$(cd "$3" && PATH=$E2E_DIR/bin:$PATH bash -e -o pipefail -c \
		'trap '\''echo "command failed ($?): $BASH_COMMAND" >&2'\'' ERR
		. "$1"' bash "$2" 2>&1)
	rc=$?
	printf '%s\n' "$out" >"$E2E_DIR/$name.out"
	check "$1 block $name runs, every command exit 0 ($(grep 'command failed' <<<"$out"))" [ $rc -eq 0 ]
	case $(cat "$2") in
	*"import mine"*) check "the .local example prints what the first session left (kept)" has_line "$out" "kept" ;;
	esac
}

blocks_of "$doc" folders
printf 'x,y\n1,2\n' >"$E2E_DIR/cwd/train.csv"
for block in "$E2E_DIR"/blocks/folders-*.sh; do
	run_block docs/folders.md "$block" "$E2E_DIR/cwd"
done
check "the download is the upload" cmp "$E2E_DIR/cwd/train.csv" "$E2E_DIR/cwd/copy.csv"

blocks_of "$src/docs/images.md" images
for block in "$E2E_DIR"/blocks/images-*.sh; do
	if grep -qE '^make images' "$block"; then
		e2e_log "$(basename "$block"): every image, left to make images-test"
		continue
	fi
	sed -i "s#\(^\|[[:space:]]\)build/#\1$build/#g" "$block"
	run_block docs/images.md "$block" "$src"
done
"$TESSERA" session ls --json | python3 -c 'import json,sys; [print(s["name"]) for s in json.load(sys.stdin)]' |
	xargs -r "$TESSERA" session rm >/dev/null 2>&1
e2e_done
