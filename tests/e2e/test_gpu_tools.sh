#!/usr/bin/env bash
# nvidia-smi and gpu-info in GPU sessions on mock GPUs (issue 29, item 6):
# the mock driver's nvidia-smi shows the session's share of the device
# (0.5 fGPU at 2 per 8 GiB device: 2048 MiB) and says it is the mock's; in
# a tessera/python:3.11 session both are on PATH in login shells, whose
# /etc/profile sets PATH anew (`session exec -- bash -lc`, and the
# terminal through `session shell`), as in a plain exec; a CPU session has
# gpu-info and no nvidia-smi; in a busybox image without /etc/profile or
# /etc/profile.d the login shell still starts and finds both.
. "$(dirname "$0")/lib.sh"
PY_IMAGE=tessera/python:3.11
if ! docker image inspect "$PY_IMAGE" >/dev/null 2>&1; then
	echo "$PY_IMAGE is not built; run 'meson test -C build test_images' (it builds it from images/python/3.11.recipe)"
	exit 1
fi
e2e_setup
e2e_build_glibc_image
start_server --mock-gpus 1x8GiB --fgpu-per-device 2 --app-ports "$(e2e_free_port_range 8)" \
	|| { e2e_done; exit 1; }
T() { "$TESSERA" "$@"; }
# sh_run INPUT SESSION: `session shell SESSION` with INPUT piped in; OUT
# gets what it printed (CRs dropped), RC its status (test_shell.sh).
sh_run() {
	printf '%s' "$1" | timeout 120 "$TESSERA" session shell "$2" >"$E2E_DIR/sh.out" 2>&1
	RC=$?
	OUT=$(tr -d '\r' <"$E2E_DIR/sh.out")
}
flat() { tr '\n' '|' <<<"$1" | tail -c 400; }

if ! T session create "$PY_IMAGE" --name py --fgpu 0.5 --cpu 1 --mem 256m --wait >/dev/null; then
	fail "a tessera/python:3.11 session with 0.5 fGPU runs"
	e2e_done
	exit 1
fi
check "a tessera/python:3.11 session with 0.5 fGPU runs" wait_status py RUNNING

# ---- a login shell, through exec ----
out=$(T session exec py -- bash -lc 'nvidia-smi; command -v gpu-info; command -v nvidia-smi' 2>&1)
rc=$?
check "bash -lc 'nvidia-smi; command -v gpu-info' succeeds ($rc)" [ $rc -eq 0 ]
check "nvidia-smi's table says it is the mock driver's: $(grep -m1 NVIDIA-SMI <<<"$out")" \
	contains "$out" "| NVIDIA-SMI 550.54.15 (Tessera mock driver) Driver Version: 550.54.15 CUDA Version: 12.4 |"
check "the session's one GPU: $(grep -m1 'Mock GPU' <<<"$out")" contains "$out" "|   0  Tessera Mock GPU "
check "with the share's memory, 2048 MiB of the 8 GiB device: $(grep -m1 MiB <<<"$out")" \
	contains "$out" "|       0MiB /   2048MiB |"
check "not the device's 8192 MiB" not contains "$out" "8192MiB"
check "the processes table" contains "$out" "No running processes found"
check "the login shell finds gpu-info" has_line "$out" /opt/tessera/bin/gpu-info
check "and nvidia-smi, both in /opt/tessera/bin" has_line "$out" /opt/tessera/bin/nvidia-smi
path=$(T session exec py -- bash -lc 'echo "$PATH"' 2>&1)
check "the login shell's PATH ends with /opt/tessera/bin once ($path)" \
	[ "$(tr ':' '\n' <<<"$path" | grep -c '^/opt/tessera/bin$')" -eq 1 -a "${path##*:}" == /opt/tessera/bin ]
check "/etc/profile set it ($path): Debian's PATH for a user" contains "$path" "/usr/local/games"
out=$(T session exec py -- nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader 2>&1)
check "a plain exec runs nvidia-smi too: $out" has_line "$out" "Tessera Mock GPU, 2048 MiB, 0 MiB"
check "nvidia-smi is mounted read-only" \
	[ "$(T session exec py -- sh -c 'echo x > /opt/tessera/bin/nvidia-smi && echo writable || echo ro' 2>/dev/null)" == ro ]
check "so is the profile script" \
	[ "$(T session exec py -- sh -c 'echo x > /etc/profile.d/tessera.sh && echo writable || echo ro' 2>/dev/null)" == ro ]

# A process holding memory shows in both tables.
out=$(T session exec py -- bash -lc 'gpu-info --alloc 512MiB --hold 30 >/dev/null & sleep 2; nvidia-smi; kill %1' 2>&1)
check "memory held by a process counts: $(grep -m1 '2048MiB' <<<"$out")" contains "$out" "|     512MiB /   2048MiB |"
row=$(grep -m1 '^|    0   N/A  N/A  *[0-9][0-9]*      C   gpu-info  *512MiB |$' <<<"$out")
check "and the process is listed with it: $(grep -m1 'C   ' <<<"$out")" [ -n "$row" ]

# ---- the terminal: session shell ----
sh_run $'nvidia-smi -L\ncommand -v gpu-info\ngpu-info | head -n 3\nexit\n' py
check "session shell ends well ($RC)" [ $RC -eq 0 ]
check "its shell runs nvidia-smi: $(flat "$OUT")" contains "$OUT" "GPU 0: Tessera Mock GPU (UUID: GPU-"
# (The terminal's own codes surround the lines: the path is only in the
# output, not in the echoed input.)
check "and finds gpu-info" contains "$OUT" /opt/tessera/bin/gpu-info
check "which shows the session's fGPU" has_line "$OUT" "fGPU: 0.5"

T session rm py >/dev/null

# ---- a CPU session: gpu-info, no nvidia-smi ----
check "a CPU session runs" T session create "$PY_IMAGE" --name cpu --cpu 1 --mem 256m --wait
out=$(T session exec cpu -- bash -lc 'command -v gpu-info; command -v nvidia-smi || echo no-nvidia-smi' 2>&1)
check "its login shell finds gpu-info too ($(flat "$out"))" has_line "$out" /opt/tessera/bin/gpu-info
check "and no nvidia-smi, having no GPU" has_line "$out" no-nvidia-smi
T session rm cpu >/dev/null

# ---- busybox without /etc/profile or /etc/profile.d ----
check "a busybox GPU session runs" T session create "$GPU_TEST_IMAGE" --name bb --fgpu 0.5 --cpu 0.1 --mem 64m --wait
out=$(T session exec bb -- sh -lc 'command -v gpu-info; nvidia-smi --query-gpu=memory.total --format=csv,noheader' 2>&1)
rc=$?
check "its login shell starts ($rc: $(flat "$out"))" [ $rc -eq 0 ]
check "and finds gpu-info" has_line "$out" /opt/tessera/bin/gpu-info
check "and nvidia-smi, with the share" has_line "$out" "2048 MiB"
# The script alone, after a PATH reset as /etc/profile does it: appends
# once, and leaves a PATH that has it alone.
out=$(T session exec bb -- env PATH=/bin sh -c '. /etc/profile.d/tessera.sh; . /etc/profile.d/tessera.sh; echo "$PATH"' 2>&1)
check "the script appends /opt/tessera/bin once ($out)" [ "$out" == /bin:/opt/tessera/bin ]
out=$(T session exec bb -- env PATH=/opt/tessera/bin:/bin sh -c '. /etc/profile.d/tessera.sh; echo "$PATH"' 2>&1)
check "and keeps a PATH that has it ($out)" [ "$out" == /opt/tessera/bin:/bin ]
sh_run $'command -v nvidia-smi\nexit\n' bb
check "the busybox terminal finds nvidia-smi ($RC: $(flat "$OUT"))" has_line "$OUT" /opt/tessera/bin/nvidia-smi

T session rm bb >/dev/null
e2e_done
