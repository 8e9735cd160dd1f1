#!/usr/bin/env bash
# SSH into a session through the app proxy (issue 34, item 1; docs/
# user-guide.md, "Working from your own machine"), with OpenSSH's own
# clients: the user's key added with `tessera user keys add`, the Host
# block of `tessera session ssh-config` in a config file, then plain ssh,
# scp, sftp and rsync -e ssh; `tessera session ssh NAME -- CMD`. Refused:
# a wrong key, another user's session, a removed session, a CONNECT
# without the app's cookie. The host key the block pins is the one the
# session's sshd shows. Needs tessera/python:3.11 (sshd, rsync; built by
# test_images).
. "$(dirname "$0")/lib.sh"
PY=tessera/python:3.11
if ! docker image inspect "$PY" >/dev/null 2>&1 ||
	[[ $(docker image inspect -f '{{index .Config.Labels "ai.backend.service-ports"}}' "$PY") != *sshd:tcp:2200* ]]; then
	echo "$PY (with its sshd app) is not built; run 'meson test -C build test_images' (it builds it from images/python/3.11.recipe)"
	exit 77
fi
e2e_setup
start_server || { e2e_done; exit 1; }
T() { "$TESSERA" "$@"; }

# The user's keys: a good one, then what is refused.
ssh-keygen -q -t ed25519 -N '' -C 'e2e laptop' -f "$E2E_DIR/id_me"
ssh-keygen -q -t ed25519 -N '' -C 'not added' -f "$E2E_DIR/id_other"
out=$(T user keys add "$E2E_DIR/id_me.pub" 2>&1)
check "user keys add takes the public key ($out)" contains "$out" "added"
fp=$(ssh-keygen -lf "$E2E_DIR/id_me.pub" | awk '{print $2}')
out=$(T user keys ls 2>&1)
check "user keys ls shows it with ssh-keygen's fingerprint ($out)" contains "$out" "$fp"
out=$(T user keys add "$E2E_DIR/id_me.pub" 2>&1); rc=$?
check "the same key again is refused ($rc: $out)" eval '[[ $rc -ne 0 && $out == *"have that key already"* ]]'
out=$(T user keys add "$E2E_DIR/id_me" 2>&1); rc=$?
check "a private key is refused, saying so ($rc: $out)" eval '[[ $rc -ne 0 && $out == *"private key"* && $(wc -l <<<"$out") == 1 ]]'
out=$(echo 'ssh-ed25519 AAAA!!' | T user keys add - 2>&1); rc=$?
check "garbage is refused ($rc: $out)" eval '[[ $rc -ne 0 && $out == *"base64"* ]]'

T session create "$PY" --name s1 --cpu 1 --mem 256m --wait --timeout 120 >/dev/null 2>&1
check "a session of the image with sshd runs" wait_status s1 RUNNING
out=$(T session apps s1 2>&1)
check "its apps list sshd ($out)" contains "$out" "sshd"

# The Host block, in a config file of its own, with the test's key.
T session ssh-config s1 >"$E2E_DIR/ssh_config" 2>"$E2E_DIR/ssh_config.err"
check "ssh-config prints a Host block ($(head -c 300 "$E2E_DIR/ssh_config.err"))" grep -q '^Host tessera-s1$' "$E2E_DIR/ssh_config"
printf '    IdentityFile %s\n    IdentitiesOnly yes\n    BatchMode yes\n    ConnectTimeout 60\n' "$E2E_DIR/id_me" >>"$E2E_DIR/ssh_config"
SSH=(ssh -F "$E2E_DIR/ssh_config")

out=$("${SSH[@]}" tessera-s1 'id -un; hostname; cat /proc/1/comm' 2>&1); rc=$?
check "plain ssh logs in as the session's user ($rc: $out)" eval '[[ $rc == 0 && $out == work* && $out == *tessera-runner* ]]'
out=$("${SSH[@]}" tessera-s1 'exit 7' 2>&1); rc=$?
check "ssh carries the command's exit status ($rc)" [ "$rc" == 7 ]

# The pinned host key is the one sshd shows: ssh-keyscan through the
# same ProxyCommand would need a host; ask sshd's own file instead.
pinned=$(sed -n 's/^ *KnownHostsCommand \/bin\/echo [^ ]* \(ssh-ed25519 [^ ]*\).*/\1/p' "$E2E_DIR/ssh_config")
shown=$("${SSH[@]}" tessera-s1 'cut -d" " -f1,2 /run/tessera/ssh/id_ed25519.pub' 2>/dev/null)
check "the block pins the session's host key ($pinned)" eval '[[ -n $pinned && $pinned == "$shown" ]]'
# A block whose pinned key is another one: ssh refuses the host.
sed "s|$pinned|$(cut -d' ' -f1,2 "$E2E_DIR/id_other.pub")|" "$E2E_DIR/ssh_config" >"$E2E_DIR/ssh_config_badhost"
out=$(ssh -F "$E2E_DIR/ssh_config_badhost" tessera-s1 true 2>&1); rc=$?
check "a wrong pinned host key is refused ($rc)" eval '[[ $rc == 255 && $out == *"HOST IDENTIFICATION HAS CHANGED"* || $out == *"Host key verification failed"* ]]'

# scp, sftp and rsync over the same block.
head -c 300000 /dev/urandom >"$E2E_DIR/blob"
scp -q -F "$E2E_DIR/ssh_config" "$E2E_DIR/blob" tessera-s1:blob 2>"$E2E_DIR/scp.err"
scp -q -F "$E2E_DIR/ssh_config" tessera-s1:blob "$E2E_DIR/blob.back" 2>>"$E2E_DIR/scp.err"
check "scp copies a file there and back ($(head -c 200 "$E2E_DIR/scp.err"))" cmp -s "$E2E_DIR/blob" "$E2E_DIR/blob.back"
printf 'mkdir sdir\nput %s sdir/b2\nls sdir\nget sdir/b2 %s\n' "$E2E_DIR/blob" "$E2E_DIR/blob.sftp" >"$E2E_DIR/sftp.batch"
out=$(sftp -F "$E2E_DIR/ssh_config" -b "$E2E_DIR/sftp.batch" tessera-s1 2>&1); rc=$?
check "sftp puts and gets ($rc: $(tail -2 <<<"$out"))" eval '[[ $rc == 0 ]] && cmp -s "$E2E_DIR/blob" "$E2E_DIR/blob.sftp"'
mkdir -p "$E2E_DIR/tree/sub" && echo one >"$E2E_DIR/tree/a" && echo two >"$E2E_DIR/tree/sub/b"
out=$(rsync -a -e "ssh -F $E2E_DIR/ssh_config" "$E2E_DIR/tree/" tessera-s1:tree/ 2>&1); rc=$?
check "rsync -e ssh copies a tree there ($rc: $out)" eval '[[ $rc == 0 && $("${SSH[@]}" tessera-s1 cat tree/sub/b) == two ]]'

# tessera session ssh: the same, with ssh's own options made for it.
out=$(T session ssh s1 -i "$E2E_DIR/id_me" -- echo via-cli 2>&1); rc=$?
check "tessera session ssh NAME -- CMD runs it ($rc: $out)" eval '[[ $rc == 0 && $out == *via-cli* ]]'

# Refused: a key that is not the user's.
sed "s|IdentityFile $E2E_DIR/id_me|IdentityFile $E2E_DIR/id_other|" "$E2E_DIR/ssh_config" >"$E2E_DIR/ssh_config_other"
out=$(ssh -F "$E2E_DIR/ssh_config_other" tessera-s1 true 2>&1); rc=$?
check "a key the user did not add is refused ($rc: $out)" eval '[[ $rc == 255 && $out == *"Permission denied"* ]]'
out=$(T session ssh s1 -o Foo 2>&1); rc=$?
check "session ssh: an unknown option before -- is refused in one line ($rc: $out)" eval '[[ $rc == 2 && $(wc -l <<<"$out") == 1 ]]'

# A CONNECT to the app's port without the app's cookie: the proxy's 403.
url=$(T session app s1 sshd 2>/dev/null)
hostport=$(sed 's|http://\([^/]*\)/.*|\1|' <<<"$url")
ans=$(printf 'CONNECT sshd HTTP/1.1\r\nHost: %s\r\n\r\n' "$hostport" | timeout 10 nc -q 5 "${hostport%:*}" "${hostport##*:}" 2>&1 | head -1)
check "a CONNECT without the app's cookie gets 403 ($ans)" contains "$ans" " 403 "

# Another user: their own keys get them nowhere in this session, and
# its ssh-proxy is refused as a missing session.
T user create bob@ssh.test >"$E2E_DIR/bob.out" 2>&1
bob_conf=$E2E_DIR/bob.conf
printf 'endpoint = %s\naccess_key = %s\nsecret_key = %s\n' "$(sed -n 's/^endpoint = //p' "$TESSERA_CONFIG")" \
	"$(sed -n 's/^ *access key: *//p' "$E2E_DIR/bob.out")" "$(sed -n 's/^ *secret key: *\([^ ]*\).*/\1/p' "$E2E_DIR/bob.out")" >"$bob_conf"
out=$(TESSERA_CONFIG=$bob_conf T user keys add "$E2E_DIR/id_other.pub" 2>&1)
check "another user adds their own key ($out)" contains "$out" "added"
out=$(TESSERA_CONFIG=$bob_conf T session ssh-proxy s1 </dev/null 2>&1); rc=$?
check "their ssh-proxy to the session is refused ($rc: $out)" eval '[[ $rc -ne 0 && $out == *"no session"* ]]'
sid=$(jget s1 id)
out=$(TESSERA_CONFIG=$bob_conf T session ssh-proxy "$sid" </dev/null 2>&1); rc=$?
check "... by its id too ($rc: $out)" eval '[[ $rc -ne 0 && $out == *"no session"* ]]'

# A key added after the session started is not in it; a new session has it.
out=$(T user keys add "$E2E_DIR/id_other.pub" 2>&1)
check "the user adds a second key" contains "$out" "added"
out=$(ssh -F "$E2E_DIR/ssh_config_other" tessera-s1 true 2>&1); rc=$?
check "the running session keeps the keys it started with ($rc)" [ "$rc" == 255 ]

# A removed session: the block's ProxyCommand fails with a line that says why.
T session rm s1 >/dev/null 2>&1
for _ in $(seq 1 100); do [[ $(jget s1 status 2>/dev/null) == TERMINATED ]] && break; sleep 0.2; done
out=$("${SSH[@]}" tessera-s1 true 2>&1); rc=$?
check "ssh to a removed session fails, saying why ($rc: $out)" eval '[[ $rc == 255 && $out == *tessera:* ]]'

# The keys go as they came.
id=$(T user keys ls --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
out=$(T user keys rm "$id" 2>&1)
check "user keys rm removes one by id ($out)" contains "$out" "removed"
out=$(T user keys rm "$id" 2>&1); rc=$?
check "... once ($rc: $out)" eval '[[ $rc -ne 0 && $out == *"no SSH key"* ]]'
T user keys rm "$(T user keys ls --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')" >/dev/null
out=$(T session ssh s1 -- true 2>&1 </dev/null)
check "session ssh with no keys says how to add one ($(head -1 <<<"$out"))" contains "$out" "tessera user keys add"
e2e_done
