#!/usr/bin/env bash
# The pending queue as the API and `tessera queue` show it: a waiting
# session's position, priority and reason; its scheduling history (the
# passes that looked at it and why it did not start); an admin's move
# (priority, --top) and cancel; a user sees only their own entries and may
# not move them. docs/scheduling.md, "The queue and its history".
. "$(dirname "$0")/lib.sh"
e2e_setup
cores=$(nproc)
start_server || { e2e_done; exit 1; }
# api METHOD PATH [JSON]: one signed request as the admin; its JSON body
# (an error's too) on stdout.
api() {
	PYTHONPATH=$(dirname "$0") python3 - "$TESSERA_CONFIG" "$@" <<'PY'
import json, sys
from signed import Api, load_conf
c = load_conf(sys.argv[1])
st, o = Api(c["endpoint"], c["access_key"], c["secret_key"]).call(
    sys.argv[2], sys.argv[3], json.loads(sys.argv[4]) if len(sys.argv) > 4 else None)
print(json.dumps(o))
PY
}
conf_value() { sed -n "s/^$2 *= *//p" "$1"; }
as() { local c=$1; shift; TESSERA_CONFIG=$c "$TESSERA" "$@"; }
# fails_with RC OUTPUT WORDS: a non-zero exit that says WORDS.
fails_with() { [ "$1" -ne 0 ] && contains "$2" "$3"; }

# The host full: one session holds every core, two more wait.
"$TESSERA" session create "$TEST_IMAGE" --name hog --cpu "$cores" --mem 16m >/dev/null
check "hog RUNNING" wait_status hog RUNNING
"$TESSERA" session create "$TEST_IMAGE" --name first --cpu 1 --mem 16m >/dev/null
"$TESSERA" session create "$TEST_IMAGE" --name second --cpu 1 --mem 16m >/dev/null
check "first waits" wait_status first PENDING
check "second waits" wait_status second PENDING

# Positions come from a pass: wait until one has looked at both.
for _ in $(seq 1 100); do
	out=$("$TESSERA" queue ls --json)
	python3 -c 'import json,sys; q=json.load(sys.stdin)["sessions"]; sys.exit(0 if len(q)==2 and all(e["position"] for e in q) else 1)' <<<"$out" && break
	sleep 0.1
done
check "queue ls --json lists the two, first at position 1 ($out)" python3 -c '
import json, sys
q = json.load(sys.stdin)
s = q["sessions"]
assert q["pending"] == 2 and q["queue_policy"], q
assert [e["name"] for e in s] == ["first", "second"], s
assert [e["position"] for e in s] == [1, 2], s
assert all(e["priority"] == 0 and e["reason"] for e in s), s
assert "queued behind first" in s[1]["reason"], s[1]
assert s[0]["owner"] == "admin@tessera.local", s[0]
' <<<"$out"
out=$("$TESSERA" queue ls)
check "queue ls prints a table with POS and REASON ($out)" has_prefix_line "$out" "POS  *NAME  *OWNER  *PRIORITY"
check "second's line says it is queued behind first" grep -q "^2 *second .*queued behind first" <<<"$out"

# History: passes that looked at it, with the reason of each.
for _ in $(seq 1 100); do
	h=$(api GET /v1/sessions/second/scheduling)
	python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["passes"] >= 2 else 1)' <<<"$h" && break
	sleep 0.1
done
check "GET /v1/sessions/second/scheduling has its history ($h)" python3 -c '
import json, sys
h = json.load(sys.stdin)
assert h["status"] == "PENDING" and h["position"] == 2 and h["passes"] >= 2, h
r = [e["reason"] for e in h["history"]]
assert any("queued behind first" in x for x in r), r
e = h["history"][-1]
assert e["passes"] >= 1 and e["first"] <= e["last"], e
assert sum(e["passes"] for e in h["history"]) == h["passes"], h
' <<<"$h"
out=$("$TESSERA" queue history second)
check "queue history prints the passes and reasons ($out)" contains "$out" "queued behind first"
check "with a PASSES column" has_prefix_line "$out" "FIRST  *LAST  *PASSES  *REASON"

# The admin moves second ahead: --top makes its priority one above first's.
out=$("$TESSERA" queue move second --top)
check "queue move --top ($out)" contains "$out" "priority 1 (was 0)"
for _ in $(seq 1 100); do
	[[ "$(api GET /v1/sessions/second/scheduling | python3 -c 'import json,sys; print(json.load(sys.stdin)["position"])')" == 1 ]] && break
	sleep 0.1
done
check "second is at position 1 now" [ "$(api GET /v1/sessions/second/scheduling | python3 -c 'import json,sys; print(json.load(sys.stdin)["position"])')" == 1 ]
check "its status history says who moved it" contains "$("$TESSERA" session info second --json)" "priority changed from 0 to 1 by"
out=$("$TESSERA" queue move first --priority 7)
check "queue move --priority 7 ($out)" contains "$out" "priority 7 (was 0)"
check "the priority is stored on the session" [ "$(jget first priority)" == 7 ]

# Bad input: one line, non-zero, a clear reason.
out=$("$TESSERA" queue move first 2>&1); rc=$?
check "move without --priority or --top fails ($out)" fails_with "$rc" "$out" "--priority N"
out=$("$TESSERA" queue move first --priority 101 2>&1); rc=$?
check "priority 101 is refused ($out)" fails_with "$rc" "$out" "0 to 100"
out=$("$TESSERA" queue move hog --top 2>&1); rc=$?
check "a RUNNING session cannot be moved ($out)" fails_with "$rc" "$out" "not waiting in the queue"
out=$(api POST /v1/queue/first/move '{"priority": 3, "top": true}' 2>&1)
check "the API wants one of priority or top ($out)" contains "$out" "give one of priority"
out=$(api POST /v1/queue/first/move '{"prio": 3}' 2>&1)
check "unknown fields are refused ($out)" contains "$out" "prio"
out=$(api POST /v1/queue/nosuch/move '{"top": true}' 2>&1)
check "an unknown session is named ($out)" contains "$out" "no session named or with id 'nosuch'"

# A user sees their own entries only, and may not move them.
out=$("$TESSERA" user create bob@example.org)
bob_ak=$(sed -n 's/.*access key: //p' <<<"$out")
bob_sk=$(sed -n 's/.*secret key: \([0-9a-f]*\).*/\1/p' <<<"$out")
printf 'endpoint = %s\naccess_key = %s\nsecret_key = %s\n' "$(conf_value "$TESSERA_CONFIG" endpoint)" "$bob_ak" \
	"$bob_sk" >"$E2E_DIR/bob.conf"
as "$E2E_DIR/bob.conf" session create "$TEST_IMAGE" --name bobs --cpu 1 --mem 16m >/dev/null
for _ in $(seq 1 100); do
	[[ "$(as "$E2E_DIR/bob.conf" session info bobs --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')" == PENDING ]] && break
	sleep 0.1
done
out=$(as "$E2E_DIR/bob.conf" queue ls --json)
check "bob's queue lists only his session, of 3 waiting ($out)" python3 -c '
import json, sys
q = json.load(sys.stdin)
assert [e["name"] for e in q["sessions"]] == ["bobs"] and q["pending"] == 3, q
' <<<"$out"
out=$(as "$E2E_DIR/bob.conf" queue move bobs --top 2>&1); rc=$?
check "bob may not move his session ($out)" fails_with "$rc" "$out" "only an admin"
out=$(as "$E2E_DIR/bob.conf" queue history first 2>&1); rc=$?
check "nor see the history of the admin's ($out)" [ $rc -ne 0 ]
out=$("$TESSERA" queue history bobs)
check "the admin finds bob's by name in the queue ($out)" contains "$out" "session bobs (bob@example.org)"

# The admin cancels a waiting session from the queue.
out=$("$TESSERA" queue cancel bobs)
check "queue cancel ($out)" contains "$out" "CANCELLED"
out=$("$TESSERA" queue ls --json)
check "it left the queue" python3 -c '
import json, sys
assert "bobs" not in [e["name"] for e in json.load(sys.stdin)["sessions"]]' <<<"$out"

# When room comes free, the one moved ahead starts first.
"$TESSERA" session rm hog >/dev/null
check "first (priority 7) starts" wait_status first RUNNING
h=$(api GET /v1/sessions/first/scheduling)
check "its history ends with where it was placed ($h)" python3 -c '
import json, sys
h = json.load(sys.stdin)
assert h["position"] is None and h["reason"] is None, h
assert h["history"][-1]["reason"].startswith("placed on node"), h
' <<<"$h"
"$TESSERA" session rm first second >/dev/null 2>&1
e2e_done
