#!/usr/bin/env bash
# A fork bomb in a session (issue 27, item 3: `b() { b | b & }; b` in a
# session of 0.5 CPU under a flat pids limit of 4096 pushed the host's load
# past 200; `docker kill` timed out and `session rm` left the session
# TERMINATING for 12 minutes). Here:
# - the server's --pids-limit (agent.conf pids_limit) is the session's, and
#   the bomb stops at it (64 here, so that this small host is never at
#   risk; the default is sized per session, tests/agent/test_agent.c);
# - its removal ends while Docker cannot stop the container, as under the
#   bomb: the container's containerd shim is stopped (SIGSTOP), so
#   Docker's kill through containerd hangs, and (cgroup v1) the container
#   is frozen in its freezer cgroup behind Docker's back, so that
#   Docker's last resort, a SIGKILL of the container's PID 1 straight from
#   dockerd after 10 s, stays pending too: nothing Docker does can end a
#   process now. The agent then kills the container's cgroups itself
#   (freeze, SIGKILL each, thaw), and the test sees every process gone
#   while the shim is still stopped, the agent's log line and its counter;
#   once the shim runs again, Docker removes the container and the
#   session is TERMINATED. (On a cgroup v2 host a frozen process takes a
#   SIGKILL, so there Docker's last resort could end them too: the log
#   line and the counter still tell that the agent did.)
# - a session whose processes pass its memory limit again and again (the
#   bomb's session wrote one history line per OOM kill, 185) has a few
#   history lines for its kills, which still add up to its oom_kills.
# Nothing here asserts on time: waits are bounded polls on the state.
. "$(dirname "$0")/lib.sh"
e2e_setup
T=$TESSERA

# The shim is continued whatever happens: a stopped one would keep its
# container (and Docker's calls on it) stuck after the test.
SHIM=
FROZE=
resume_shim() {
	[[ -n "$FROZE" ]] && echo THAWED >"$FROZE/freezer.state" 2>/dev/null
	[[ -n "$SHIM" ]] && kill -CONT "$SHIM" 2>/dev/null
	SHIM= FROZE=
}
trap 'resume_shim; e2e_teardown' EXIT

start_server --pids-limit 64 || { e2e_done; exit 1; }
EP=$(awk '$1 == "endpoint" {print $3}' "$TESSERA_CONFIG")

# until_ok S CMD...: polls CMD for up to S seconds; the state reached is
# what is checked, not how fast.
until_ok() {
	local end=$((SECONDS + $1)); shift
	while ((SECONDS < end)); do
		"$@" && return 0
		sleep 0.2
	done
	"$@"
}

# The directory of a container's cgroup in the pids hierarchy (v1 or v2).
pids_dir() {  # pids_dir HOSTPID
	local line
	line=$(grep -m1 ':pids:' "/proc/$1/cgroup") || line=$(grep -m1 '^0::' "/proc/$1/cgroup")
	case $line in
	*:pids:*) echo "/sys/fs/cgroup/pids${line#*:pids:}" ;;
	*) echo "/sys/fs/cgroup${line#0::}" ;;
	esac
}

# ---- the bomb, at its pids limit ------------------------------------------
check "a session running a fork bomb starts" \
	"$T" session create "$TEST_IMAGE" --name bomb --cpu 0.05 --mem 64m \
	--startup-command 'b() { b | b & }; b' --wait
cid=$(jget bomb container_id)
check "its pids limit is the server's --pids-limit" \
	[ "$(docker inspect -f '{{.HostConfig.PidsLimit}}' "$cid")" == 64 ]
init=$(docker inspect -f '{{.State.Pid}}' "$cid")
dir=$(pids_dir "$init")
e2e_log "container ${cid:0:12}, init $init, pids cgroup $dir"
full() { (($(cat "$dir/pids.current" 2>/dev/null || echo 0) >= 60)); }
check "the bomb fills its pids limit" until_ok 120 full
check "and holds there ($(cat "$dir/pids.current" 2>/dev/null) of $(cat "$dir/pids.max" 2>/dev/null))" \
	[ "$(cat "$dir/pids.current")" -le 64 ]

# ---- Docker cannot stop it: the agent kills the cgroup ---------------------
shim=$(ps -o ppid= -p "$init" | tr -d ' ')
check "the container's init is a child of its containerd shim" \
	contains "$(ps -o args= -p "$shim")" "containerd-shim"
SHIM=$shim
kill -STOP "$SHIM"
fz=$(grep -m1 ':freezer:' "/proc/$init/cgroup")
if [[ -n "$fz" && -f "/sys/fs/cgroup/freezer${fz#*:freezer:}/freezer.state" ]]; then
	FROZE=/sys/fs/cgroup/freezer${fz#*:freezer:}
	echo FROZEN >"$FROZE/freezer.state"
	frozen() { [ "$(cat "$FROZE/freezer.state")" == FROZEN ]; }
	check "the container is frozen behind Docker's back" until_ok 30 frozen
else
	e2e_log "no cgroup v1 freezer here: Docker's own last resort could end the processes too"
fi
check "session rm is accepted" "$T" session rm bomb
sid=$(jget bomb id)
killed_line() { grep -q "session $sid: Docker did not stop container ${cid:0:12} within .*killed its cgroup directly" \
	"$E2E_DIR/server.log"; }
check "the agent killed the container's cgroup itself (its log says so)" until_ok 60 killed_line
grep "killed its cgroup directly" "$E2E_DIR/server.log" | sed 's/^/# /'
empty() { [[ -z "$(cat "$dir/cgroup.procs" 2>/dev/null)" ]]; }
check "every process of the container is gone" until_ok 10 empty
check "while Docker's shim was still stopped" [ "$(ps -o stat= -p "$SHIM" | cut -c1)" == T ]
check "the session is still TERMINATING while Docker is stuck" [ "$(jget bomb status)" == TERMINATING ]
resume_shim
terminated() { [ "$(jget bomb status)" == TERMINATED ]; }
check "once Docker runs again the session is TERMINATED" until_ok 120 terminated
check "and its container is gone" [ -z "$(docker ps -aq --filter "id=$cid")" ]
curl -s "$EP/metrics" >"$E2E_DIR/metrics.txt"
check "the agent counted one cgroup kill" \
	grep -qx "tessera_agent_cgroup_kills_total{node=\"$E2E_AGENT_ID\"} 1" "$E2E_DIR/metrics.txt"
check "and no failed one" \
	grep -qx "tessera_agent_cgroup_kill_failures_total{node=\"$E2E_AGENT_ID\"} 0" "$E2E_DIR/metrics.txt"

# ---- a removal Docker does at once does not need it ------------------------
check "a plain session starts" "$T" session create "$TEST_IMAGE" --name plain --cpu 0.05 --mem 32m --wait
"$T" session rm plain >/dev/null
plain_done() { [ "$(jget plain status)" == TERMINATED ]; }
check "its removal ends" until_ok 60 plain_done
curl -s "$EP/metrics" >"$E2E_DIR/metrics.txt"
check "without a cgroup kill" \
	grep -qx "tessera_agent_cgroup_kills_total{node=\"$E2E_AGENT_ID\"} 1" "$E2E_DIR/metrics.txt"

# ---- OOM kills again and again: a bounded history -------------------------
# busybox dd with bs=100M fills a 100 MiB buffer from /dev/zero at once,
# past a 32 MiB limit in a fraction of a second even on a busy host; a kill
# every second or two, each seen by the agent's OOM count (read every
# second) on its own, so that one history line per count change, as
# before, would be 6 or more.
check "a session whose processes keep passing its memory limit starts" \
	"$T" session create "$TEST_IMAGE" --name hog --cpu 0.5 --mem 32m \
	--startup-command 'while :; do dd if=/dev/zero of=/dev/null bs=100M count=1; sleep 1; done' --wait
many() { (($(jget hog oom_kills 2>/dev/null || echo 0) >= 6)); }
check "its processes are killed again and again" until_ok 200 many
"$T" session rm hog >/dev/null
hog_done() { [ "$(jget hog status)" == TERMINATED ]; }
check "it is removed" until_ok 60 hog_done
"$T" session info hog --json >"$E2E_DIR/hog.json"
read -r kills lines told total < <(python3 - "$E2E_DIR/hog.json" <<'PY'
import json, re, sys
s = json.load(open(sys.argv[1]))
told = 0
lines = 0
for h in s["status_history"]:
    m = re.match(r"(a process was|(\d+) processes were) killed for exceeding", h["info"])
    if m:
        lines += 1
        told += int(m.group(2) or 1)
print(s["oom_kills"], lines, told, len(s["status_history"]))
PY
)
e2e_log "$kills OOM kills, $lines history lines for them, $total history entries"
check "a few history lines tell them ($lines for $kills kills)" [ "$lines" -ge 1 -a "$lines" -le 4 ]
check "and add up to all of them ($told of $kills)" [ "$told" == "$kills" ]
check "the whole history stays short ($total entries)" [ "$total" -le 14 ]

e2e_done
