#!/usr/bin/env bash
# The README's "Quick start", "GPU quick start" and "Cluster settings"
# sections, run as written: their ```sh blocks are read from README.md
# itself (so the test follows the README), each run by bash with -e, so
# every command must exit 0; a ```text block after them is what the
# previous block prints, line for line. Substituted, and nothing else:
#   - `build/` (the build tree, wherever the README says it) -> this build;
#   - `~/.local/share/tessera` (the data dir)                -> a temporary one;
#   - image names `tessera-demo:...`                         -> `tessera-test-readme:...`,
#     so that the user's own images of that name are left alone;
#   - the server: `make run` before the first section, and a block that is
#     just `build/tessera server ARGS`, (re)start `tessera server ARGS` on
#     that data dir with free ports and this test's node id.
. "$(dirname "$0")/lib.sh"
e2e_setup
readme=$(dirname "$0")/../../README.md
build=$(cd "$(dirname "$TESSERA")" && pwd)
data=$E2E_DIR/data

# Writes the sections' blocks as $E2E_DIR/blocks/NN.sh and NN.text.
mkdir -p "$E2E_DIR/blocks"
python3 - "$readme" "$E2E_DIR/blocks" <<'PY' || fail "README.md has the sections and their blocks"
import re, sys
text = open(sys.argv[1]).read()
sections = ["## Quick start", "## GPU quick start", "## Cluster settings"]
n = 0
for title in sections:
    m = re.search(r"^" + re.escape(title) + r".*?$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not m:
        sys.exit(f"README.md has no section {title!r}")
    found = 0
    for info, body in re.findall(r"^```(\w*)[^\n]*\n(.*?)^```", m.group(1), re.M | re.S):
        if info not in ("sh", "text"):
            continue
        n += 1
        found += info == "sh"
        open(f"{sys.argv[2]}/{n:02d}.{info}", "w").write(body)
    if not found:
        sys.exit(f"README.md section {title!r} has no sh block")
PY

# The README's text with the substitutions above.
substitute() {
	sed -e "s#\(^\|[[:space:](\"']\)build/#\1$build/#g" \
	    -e "s#~/\.local/share/tessera#$data#g" \
	    -e 's#tessera-demo:#tessera-test-readme:#g' "$1"
}

# `make run`: tessera server on the data dir (its --port is a free one here).
start_server || { e2e_done; exit 1; }

out=""
for block in "$E2E_DIR"/blocks/*; do
	name=$(basename "$block")
	if [[ $block == *.text ]]; then
		# Every line shown is a line the previous block printed.
		while IFS= read -r line; do
			check "README output line printed: $line" has_line "$out" "$line"
		done <"$block"
		continue
	fi
	if grep -qE '^build/tessera server( |$)' "$block"; then
		args=$(sed -n 's#^build/tessera server##p' "$block")
		check "block $name starts the server and does nothing else" [ "$(grep -cvE '^\s*(#|$)' "$block")" == 1 ]
		stop_server TERM
		# shellcheck disable=SC2086  # the README's words, split as a shell would
		start_server $args || { e2e_done; exit 1; }
		continue
	fi
	substitute "$block" >"$E2E_DIR/$name"
	out=$(bash -e -o pipefail -c 'trap '\''echo "README command failed ($?): $BASH_COMMAND" >&2'\'' ERR
		. "$1"' bash "$E2E_DIR/$name" 2>&1)
	rc=$?
	printf '%s\n' "$out" >"$E2E_DIR/$name.out"
	check "README block $name runs, every command exit 0 ($(grep 'README command failed' <<<"$out"))" [ $rc -eq 0 ]
	# What the README's comments say a command shows.
	case $(cat "$block") in
	*'session logs hello'*)
		check "logs show \"hello from hello\"" has_line "$out" "hello from hello"
		check "the runner is PID 1" grep -qE '^ *1 .*tessera-runner' <<<"$out"
		;;
	*'exec gpu -- gpu-info'*)
		check "node ls shows FGPU 0.5/2" grep -qE "^$E2E_AGENT_ID +ALIVE .* 0\.5/2 " <<<"$out"
		;;
	*'config set policy.default null'*)
		check "config get fgpu_per_device says 2" has_line "$out" "2"
		check "config set says the key is set" has_line "$out" "queue_policy set"
		check "config set KEY null says the key is removed" has_line "$out" "policy.default removed"
		;;
	esac
done
no_containers() {
	for _ in $(seq 1 300); do
		[[ -z "$(docker ps -aq --filter "label=tessera.agent=$E2E_AGENT_ID" --filter label=tessera.session)" ]] && return 0
		sleep 0.1
	done
	return 1
}
check "the README's sessions leave no container" no_containers
e2e_done
