#!/usr/bin/env bash
# Session logs and exec output as streams: a session's log is capped (and
# says so when its start was dropped), `logs --tail` and `--follow` stream,
# exec returns bytes unchanged (NUL bytes, binary data) with bounded memory
# in the server, and a user's concurrent execs are limited.
. "$(dirname "$0")/lib.sh"
e2e_setup
# A small cap, so a test fills and rotates it quickly: 4 MiB in 2 files.
start_server --log-max-size 4MiB --log-max-files 2 || { e2e_done; exit 1; }

container_of() { docker ps -aq --filter "label=tessera.agent=$E2E_AGENT_ID" --filter "label=tessera.name=$1"; }

# ---- the log cap ----
# 20 MB of output in 1 KB lines, five times the cap.
line=$(head -c 1000 /dev/zero | tr '\0' x)
"$TESSERA" session create "$TEST_IMAGE" --name chatty --cpu 0.5 --mem 64m \
	--startup-command "busybox yes $line | head -n 20000; echo chatty-done; sleep 100000" --wait >/dev/null 2>&1
check "a session writing 20 MB runs" wait_status chatty RUNNING
cid=$(container_of chatty)
for _ in $(seq 1 600); do
	"$TESSERA" session logs chatty --tail 1 2>/dev/null | grep -q chatty-done && break
	sleep 0.1
done
check "its output reached the end" bash -c "'$TESSERA' session logs chatty --tail 1 | grep -q chatty-done"
logpath=$(docker inspect -f '{{.LogPath}}' "$cid")
opts=$(docker inspect -f '{{json .HostConfig.LogConfig}}' "$cid")
check "the container's log is json-file with a size and file cap ($opts)" \
	python3 -c 'import json,sys; c=json.loads(sys.argv[1]); assert c["Type"]=="json-file" and c["Config"]["max-file"]=="2" and int(c["Config"]["max-size"])==2*1024*1024' "$opts"
total=$(cat "$logpath"* 2>/dev/null | wc -c)
check "its log on disk stays under the cap: $total bytes for 4 MiB (20 MB written)" \
	[ "$total" -gt 0 -a "$total" -le $((4 * 1024 * 1024 + 64 * 1024)) ]
first=$("$TESSERA" session logs chatty | head -n 1)
check "the whole log starts by saying that its start was dropped ($first)" \
	contains "$first" "[tessera] earlier output was dropped: this session's log is capped at 4"
tail5=$("$TESSERA" session logs chatty --tail 5)
check "logs --tail 5 gives 5 lines ($(wc -l <<<"$tail5"))" [ "$(wc -l <<<"$tail5")" -eq 5 ]
check "and they are the last ones" [ "$(tail -n 1 <<<"$tail5")" == chatty-done ]
check "logs --tail 5 has no dropped notice" not contains "$tail5" "[tessera]"

# A session that wrote little has its whole log and no notice.
"$TESSERA" session create "$TEST_IMAGE" --name quiet --cpu 0.1 --mem 16m \
	--startup-command 'echo quiet-ready; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo after-follow-started; sleep 100000' \
	--wait >/dev/null 2>&1
check "a quiet session runs" wait_status quiet RUNNING
for _ in $(seq 1 100); do
	"$TESSERA" session logs quiet | grep -q quiet-ready && break
	sleep 0.1
done
check "its log is whole, without a notice" [ "$("$TESSERA" session logs quiet)" == quiet-ready ]

# ---- logs --follow ----
"$TESSERA" session logs quiet --follow >"$E2E_DIR/follow.out" 2>"$E2E_DIR/follow.err" &
follower=$!
for _ in $(seq 1 300); do grep -q quiet-ready "$E2E_DIR/follow.out" && break; sleep 0.1; done
check "logs --follow prints what was there" grep -q quiet-ready "$E2E_DIR/follow.out"
"$TESSERA" session exec quiet -- busybox touch /tmp/go
for _ in $(seq 1 300); do grep -q after-follow-started "$E2E_DIR/follow.out" && break; sleep 0.1; done
check "logs --follow prints a line written after it started" grep -q after-follow-started "$E2E_DIR/follow.out"
check "and is still following" kill -0 "$follower"
"$TESSERA" session rm quiet >/dev/null
for _ in $(seq 1 600); do kill -0 "$follower" 2>/dev/null || break; sleep 0.1; done
check "logs --follow ends when the session is removed" bash -c "! kill -0 $follower 2>/dev/null"
wait "$follower"
rc=$?
check "and exits 0 ($rc: $(cat "$E2E_DIR/follow.err"))" [ $rc -eq 0 ]

# ---- exec: bytes as they are ----
"$TESSERA" session create "$TEST_IMAGE" --name bin --cpu 0.5 --mem 64m --wait >/dev/null 2>&1
check "a session for exec runs" wait_status bin RUNNING
inside=$("$TESSERA" session exec bin -- sh -c 'head -c 1000000 /dev/urandom > /tmp/blob; busybox sha256sum < /tmp/blob' | cut -d' ' -f1)
outside=$("$TESSERA" session exec bin -- cat /tmp/blob | sha256sum | cut -d' ' -f1)
check "1 MB of random bytes come back unchanged on stdout ($inside, $outside)" \
	[ -n "$inside" -a "$inside" == "$outside" ]
outside=$("$TESSERA" session exec bin -- sh -c 'cat /tmp/blob >&2' 2>&1 >/dev/null | sha256sum | cut -d' ' -f1)
check "and on stderr" [ "$inside" == "$outside" ]
nuls=$("$TESSERA" session exec bin -- head -c 100000 /dev/zero | wc -c)
check "NUL bytes come back as NUL bytes ($nuls)" [ "$nuls" -eq 100000 ]
check "and nothing else" [ "$("$TESSERA" session exec bin -- head -c 100000 /dev/zero | tr -d '\0' | wc -c)" -eq 0 ]
"$TESSERA" session exec bin -- sh -c 'printf "a\0b"; printf "e\0r" >&2; exit 7' >"$E2E_DIR/o" 2>"$E2E_DIR/e"
rc=$?
check "exec exits with the command's code ($rc)" [ $rc -eq 7 ]
check "stdout and stderr stay apart, bytes intact" \
	bash -c "[ \"\$(od -An -c '$E2E_DIR/o' | tr -d ' ')\" == 'a\\0b' ] && [ \"\$(od -An -c '$E2E_DIR/e' | tr -d ' ')\" == 'e\\0r' ]"

# ---- through the webserver: the same bytes, framed ----
web_url=$(sed -n 's/^web_url *= *//p' "$TESSERA_CONFIG")
web_url=${web_url%/}
password=$(sed -n 's/^password *= *//p' "$TESSERA_CONFIG")
csrf=$(curl -s -c "$E2E_DIR/jar" -H 'Content-Type: application/json' \
	-d "{\"email\":\"admin@tessera.local\",\"password\":\"$password\"}" "$web_url/auth/login" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["csrf_token"])')
# Decodes the exec output stream (docs/api.md): "SHA256-of-stdout exit-code".
decode='import hashlib, struct, sys
d = sys.stdin.buffer.read(); h = hashlib.sha256(); code = "none"
while len(d) >= 8:
    t, n = d[0], struct.unpack(">I", d[4:8])[0]; p = d[8:8 + n]; d = d[8 + n:]
    if t == 1: h.update(p)
    elif t == 3: code = struct.unpack(">i", p)[0]
print(h.hexdigest(), code)'
via_web=$(curl -s -b "$E2E_DIR/jar" -H 'Content-Type: application/json' -H "X-CSRF-Token: $csrf" -H "Origin: $web_url" \
	-d '{"command":["sh","-c","cat /tmp/blob; exit 4"]}' "$web_url/api/v1/sessions/bin/exec" | python3 -c "$decode")
check "exec through the webserver streams the same bytes and the exit code ($via_web)" [ "$via_web" == "$inside 4" ]
web_logs=$(curl -s -b "$E2E_DIR/jar" "$web_url/api/v1/sessions/chatty/logs?tail=2")
check "logs through the webserver ($(tail -n 1 <<<"$web_logs"))" [ "$(tail -n 1 <<<"$web_logs")" == chatty-done ]

# ---- bounded memory: 20 execs of 20 MB each at once ----
"$TESSERA" config set policy.default '{"max_concurrent_execs": 25}' >/dev/null
pids=()
for i in $(seq 1 20); do
	( "$TESSERA" session exec bin -- head -c 20000000 /dev/zero | wc -c >"$E2E_DIR/big.$i" ) &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
all=1
for i in $(seq 1 20); do [ "$(cat "$E2E_DIR/big.$i")" == 20000000 ] || all=0; done
check "20 concurrent execs each got their 20 MB" [ $all -eq 1 ]
hwm_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$SERVER_PID/status")
check "the server's memory stayed bounded: peak RSS ${hwm_kb} kB, at most 200 MB" [ "$hwm_kb" -le 204800 ]

# ---- concurrent execs per user ----
"$TESSERA" config set policy.default '{"max_concurrent_execs": 2}' >/dev/null
"$TESSERA" session exec bin -- sleep 300 >/dev/null 2>&1 &
e1=$!
"$TESSERA" session exec bin -- sleep 300 >/dev/null 2>&1 &
e2=$!
for _ in $(seq 1 300); do
	n=$(docker top "$(container_of bin)" 2>/dev/null | grep -c "sleep 300")
	[ "$n" -ge 2 ] && break
	sleep 0.1
done
out=$("$TESSERA" session exec bin -- true 2>&1)
rc=$?
check "a third concurrent exec is refused ($rc: $out)" [ $rc -ne 0 ]
check "saying why" contains "$out" "max_concurrent_execs"
kill "$e1" "$e2" 2>/dev/null
wait "$e1" "$e2" 2>/dev/null
freed=0
for _ in $(seq 1 300); do
	if "$TESSERA" session exec bin -- true >/dev/null 2>&1; then freed=1; break; fi
	sleep 0.2
done
check "execs whose clients left give their places back" [ $freed -eq 1 ]
"$TESSERA" config set policy.default null >/dev/null

"$TESSERA" session rm chatty bin >/dev/null
e2e_done
