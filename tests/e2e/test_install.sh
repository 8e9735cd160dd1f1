#!/usr/bin/env bash
# `make install` (scripts/install) into a temporary prefix: the installed
# binary finds its companion files (runner, fGPU library, mock driver,
# gpu-info, gpu-probe) and the UI from there, and its start banner prints
# a command that works as printed: the bare name when PATH finds that
# binary, else its absolute path. The shell completion and the manual page
# installed with it work.
. "$(dirname "$0")/lib.sh"
e2e_setup
e2e_build_glibc_image
build=$(dirname "$TESSERA")
prefix=$E2E_DIR/prefix
"$(dirname "$0")/../../scripts/install" "$build" "$prefix" >"$E2E_DIR/install.log" 2>&1
check "scripts/install succeeds" [ $? -eq 0 ]
TESSERA=$prefix/bin/tessera

# Shell completion and tessera(1), from the installed binary's tables.
bashc=$prefix/share/bash-completion/completions/tessera
verbs=$(bash -c 'source "$1"; COMP_WORDS=(tessera session ""); COMP_CWORD=2; _tessera; echo "${COMPREPLY[*]}"' \
	_ "$bashc" 2>&1)
check "the installed bash completion completes session's verbs ($verbs)" contains " $verbs " " create "
check "the installed zsh completion is a #compdef file" \
	[ "$(head -n1 "$prefix/share/zsh/site-functions/_tessera" 2>&1)" == "#compdef tessera" ]
if command -v zsh >/dev/null; then
	check "zsh reads it" zsh -n "$prefix/share/zsh/site-functions/_tessera"
fi
check "man finds tessera(1) under the prefix" \
	[ "$(MANPATH=$prefix/share/man man -w tessera 2>&1)" == "$prefix/share/man/man1/tessera.1.gz" ]
warn=$(MANWIDTH=80 man --warnings -l "$prefix/share/man/man1/tessera.1.gz" 2>&1 >/dev/null)
check "it renders without warnings ($warn)" [ -z "$warn" ]
check "it documents tessera session create" \
	bash -c 'man -l "$1" 2>/dev/null | grep -q "tessera session create"' _ "$prefix/share/man/man1/tessera.1.gz"
# banner_try N: the Try line of the Nth server's banner, which may reach
# the log a moment after admin.conf (what start_server waits for).
banner_try() {
	for _ in $(seq 1 100); do
		(($(grep -c '^  Try:' "$E2E_DIR/server.log") >= $1)) && break
		sleep 0.1
	done
	grep '^  Try:' "$E2E_DIR/server.log" | sed -n "$1s/^  Try: *//p"
}

start_server --mock-gpus 1x8GiB --fgpu-per-device 2 || { e2e_done; exit 1; }
try=$(banner_try 1)
check "the banner names the installed binary by its path ($try)" \
	[ "$try" == "TESSERA_CONFIG=$TESSERA_CONFIG $TESSERA session ls" ]
check "the command works as printed" bash -c "$try >/dev/null"
check "the agent finds every file it mounts and runs" not grep -q "not found" "$E2E_DIR/server.log"
"$TESSERA" session create "$GPU_TEST_IMAGE" --name inst --fgpu 0.5 --cpu 0.1 --mem 64m --wait >/dev/null
check "a GPU session runs from the installed files" wait_status inst RUNNING
mounts=$(docker inspect -f '{{range .Mounts}}{{.Source}} {{end}}' "$(jget inst container_id)")
for f in tessera-runner libtessera-fgpu.so gpu-info libcuda.so.1 libnvidia-ml.so.1 tessera-mock-nvidia-smi; do
	check "$f is mounted from the prefix" contains "$mounts" "$prefix/lib/tessera/$f"
done
out=$("$TESSERA" session exec inst -- gpu-info 2>&1)
check "gpu-info runs in it, through the installed driver and fGPU library ($out)" \
	has_line "$out" "fGPU: 0.5"
"$TESSERA" session exec inst -- cat /proc/1/cmdline | tr '\0' ' ' | grep -q tessera-runner
check "the installed runner is PID 1" [ $? -eq 0 ]
web=$(sed -n 's/^web_url = //p' "$TESSERA_CONFIG")
page=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' "$web" 2>&1)
check "the web UI is served from the installed files" contains "$page" "<div id=\"app\""
"$TESSERA" session rm inst >/dev/null
check "inst removed" wait_status inst TERMINATED
stop_server TERM

# With the prefix on PATH, the banner says just `tessera`.
PATH=$prefix/bin:$PATH start_server || { e2e_done; exit 1; }
try=$(banner_try 2)
check "the banner names it tessera when PATH finds it ($try)" \
	[ "$try" == "TESSERA_CONFIG=$TESSERA_CONFIG tessera session ls" ]
check "that command works as printed" env PATH="$prefix/bin:$PATH" bash -c "$try >/dev/null"
e2e_done
