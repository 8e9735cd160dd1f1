#!/usr/bin/env bash
# Backups on SQLite (single-node mode): `tessera config get --prefix ''` /
# `put-json` round-trip the settings and a bad file changes nothing;
# `tessera admin backup` while the server runs, the database destroyed,
# `tessera admin restore` (refused while the server runs, and for a bad
# backup), the server started again: every user, session, image record and
# folder is back, and the running session is re-adopted with its container.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server --cpu 2 || { e2e_done; exit 1; }
DATA=$E2E_DIR/data

# api METHOD PATH [JSON]: a signed call as the admin; prints the status
# and the body on one line.
api() {
	PYTHONPATH=$(dirname "$0") python3 - "$TESSERA_CONFIG" "$@" <<'PY'
import json, sys
from signed import Api, load_conf
conf = load_conf(sys.argv[1])
a = Api(conf["endpoint"], conf["access_key"], conf["secret_key"])
body = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
st, r = a.call(sys.argv[2], sys.argv[3], body)
print(st, json.dumps(r, sort_keys=True))
PY
}

# refused RC OUT WORD: a command failed (RC non-zero) with one line of
# output naming WORD.
refused() { [ "$1" -ne 0 ] && [ "$(wc -l <<<"$2")" -eq 1 ] && contains "$2" "$3"; }

# ---- the settings as a file ----
"$TESSERA" config set queue_policy lifo >/dev/null
"$TESSERA" config set policy.carol@example.com '{"max_sessions": 2}' >/dev/null
"$TESSERA" config set log_max_files 4 >/dev/null
"$TESSERA" config get --prefix '' >"$E2E_DIR/settings.json"
check "config get --prefix '' prints the settings flat" \
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["queue_policy"]=="lifo" and d["policy.carol@example.com"]=={"max_sessions":2} and d["log_max_files"]==4' "$E2E_DIR/settings.json"
"$TESSERA" config set queue_policy drf >/dev/null
"$TESSERA" config set log_max_files null >/dev/null
check "put-json '' takes the file back" "$TESSERA" config put-json '' "$E2E_DIR/settings.json"
check "queue_policy is lifo again" [ "$("$TESSERA" config get queue_policy)" == lifo ]
"$TESSERA" config get --prefix '' >"$E2E_DIR/settings2.json"
check "get after put-json prints the same file" cmp -s "$E2E_DIR/settings.json" "$E2E_DIR/settings2.json"

printf '{"queue_policy": "fifo", "policy.default": {"max_sessions": 1}, "fgpu_per_device": 0}\n' >"$E2E_DIR/bad.json"
out=$("$TESSERA" config put-json '' "$E2E_DIR/bad.json" 2>&1); rc=$?
check "a bad file is refused in one line naming the bad key (exit $rc): $out" refused $rc "$out" fgpu_per_device
check "and nothing of it was set" [ "$("$TESSERA" config get queue_policy)" == lifo ]
check "not even its valid keys" not contains "$("$TESSERA" config get --prefix policy.)" '"default"'
printf '{"queue_policy": "fifo", "no_such_setting": 1}\n' >"$E2E_DIR/bad2.json"
out=$("$TESSERA" config put-json '' "$E2E_DIR/bad2.json" 2>&1)
check "an unknown key is named: $out" contains "$out" "unknown setting 'no_such_setting'"
printf '{"queue_policy": \n' >"$E2E_DIR/bad3.json"
out=$("$TESSERA" config put-json '' "$E2E_DIR/bad3.json" 2>&1)
check "a file that is not JSON names its line: $out" contains "$out" "line "
check "still lifo" [ "$("$TESSERA" config get queue_policy)" == lifo ]

# ---- state to back up ----
check "a user is made" contains "$(api POST /v1/users '{"email": "carol@example.com", "password": "pw of carol"}')" "201 "
"$TESSERA" session create "$TEST_IMAGE" --name keep --cpu 0.5 --mem 16m --wait >/dev/null
check "keep RUNNING" wait_status keep RUNNING
keep_cid=$(jget keep container_id)
check "an image alias is made" "$TESSERA" image alias bk-alias "$TEST_IMAGE"
check "a folder is made" "$TESSERA" folder create bkdata
folder_id=$("$TESSERA" folder info bkdata --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')

check "admin backup while the server runs" "$TESSERA" admin backup "$E2E_DIR/bk" --data-dir "$DATA"
check "the backup has its manifest" \
	python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["format"]=="tessera-backup" and m["database"]["kind"]=="sqlite" and m["config"]["from"]=="database"' "$E2E_DIR/bk/manifest.json"
check "and the settings as put-json takes them" \
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["queue_policy"]=="lifo"' "$E2E_DIR/bk/config.json"
out=$("$TESSERA" admin backup "$E2E_DIR/bk" --data-dir "$DATA" 2>&1)
check "a second backup into the same directory is refused" contains "$out" "not empty"

out=$("$TESSERA" admin restore "$E2E_DIR/bk" --data-dir "$DATA" 2>&1); rc=$?
check "restore refuses while the server runs (exit $rc): $out" refused $rc "$out" "stop it first"

# ---- the database is lost ----
stop_server TERM
check "keep's container survives the server" [ "$(docker inspect -f '{{.State.Running}}' "$keep_cid")" == "true" ]
rm -f "$DATA"/tessera.db "$DATA"/tessera.db-wal "$DATA"/tessera.db-shm

cp -r "$E2E_DIR/bk" "$E2E_DIR/bk-bad"
printf '{"fgpu_per_device": 0}\n' >"$E2E_DIR/bk-bad/config.json"
out=$("$TESSERA" admin restore "$E2E_DIR/bk-bad" --data-dir "$DATA" 2>&1); rc=$?
check "a backup with a bad config.json is refused (exit $rc): $out" refused $rc "$out" fgpu_per_device
check "and changes nothing" [ ! -e "$DATA/tessera.db" ]
cp -r "$E2E_DIR/bk" "$E2E_DIR/bk-bad2"
head -c 4096 "$E2E_DIR/bk/tessera.db" >"$E2E_DIR/bk-bad2/tessera.db"
out=$("$TESSERA" admin restore "$E2E_DIR/bk-bad2" --data-dir "$DATA" 2>&1); rc=$?
check "a truncated database is refused (exit $rc): $out" refused $rc "$out" tessera.db
check "and changes nothing" [ ! -e "$DATA/tessera.db" ]
out=$("$TESSERA" admin restore "$E2E_DIR/nothing-here" --data-dir "$DATA" 2>&1); rc=$?
check "a directory without a manifest is refused: $out" refused $rc "$out" manifest.json

out=$("$TESSERA" admin restore "$E2E_DIR/bk" --data-dir "$DATA" 2>&1); rc=$?
check "admin restore (exit $rc): $out" [ $rc -eq 0 ]
# The date it prints is the manifest's, read before the manifest is freed.
made=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["created"])' "$E2E_DIR/bk/manifest.json")
check "restore says when the backup was made ($made): $out" contains "$out" "(made $made)"
start_server --cpu 2 || { e2e_done; exit 1; }
check "keep is RUNNING again" wait_status keep RUNNING
check "with the same container" [ "$(jget keep container_id)" == "$keep_cid" ]
"$TESSERA" session exec keep -- true
check "exec works in the re-adopted session" [ $? -eq 0 ]
check "the user is back" contains "$(api GET /v1/users)" '"carol@example.com"'
check "the image alias is back" contains "$(api GET /v1/images/aliases)" '"bk-alias"'
check "the folder is back, the same one" [ "$("$TESSERA" folder info bkdata --json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')" == "$folder_id" ]
check "the settings are back" [ "$("$TESSERA" config get queue_policy)" == lifo ]
check "the policy is back" contains "$("$TESSERA" config get --prefix policy.)" carol@example.com
"$TESSERA" session rm keep >/dev/null
e2e_done
