#!/usr/bin/env bash
# One session more than the host's cores waits PENDING, says why, and starts
# by itself when another is removed.
. "$(dirname "$0")/lib.sh"
e2e_setup
cores=$(nproc)
start_server || { e2e_done; exit 1; }

"$TESSERA" session create "$TEST_IMAGE" --name q --count $((cores + 1)) --cpu 1 --mem 16m >/dev/null
rc=$?
check "creating $((cores + 1)) one-core sessions is accepted" [ $rc -eq 0 ]
for i in $(seq 1 "$cores"); do
	check "q-$i RUNNING" wait_status "q-$i" RUNNING
done
last=q-$((cores + 1))
check "$last stays PENDING" [ "$(jget "$last" status)" == "PENDING" ]
info=$(jget "$last" status_info)
check "PENDING says why ($info)" contains "$info" "needs 1 CPU"

"$TESSERA" session rm q-1 >/dev/null
check "after removing q-1, $last starts by itself" wait_status "$last" RUNNING
check "q-1 is TERMINATED" wait_status q-1 TERMINATED

# A request that no node could ever hold is refused at creation.
out=$("$TESSERA" session create "$TEST_IMAGE" --name huge --cpu $((cores * 100)) 2>&1)
rc=$?
check "an unsatisfiable request is refused" [ $rc -ne 0 ]
check "with a reason ($out)" contains "$out" "could ever hold"

# Removing a waiting session cancels it.
"$TESSERA" session create "$TEST_IMAGE" --name waiting --cpu "$cores" --mem 16m >/dev/null
check "a full-host session waits" wait_status waiting PENDING
# `create --wait` on one that cannot start yet says why while it waits,
# and at its timeout what to do.
out=$("$TESSERA" session create "$TEST_IMAGE" --name w2 --cpu "$cores" --mem 16m --wait --timeout 3 2>&1); rc=$?
check "create --wait of a session that cannot start gives up (exit $rc)" [ $rc -ne 0 ]
check "it says why the session waits ($out)" grep -q "^tessera: session w2 is PENDING: queued behind waiting" <<<"$out"
check "and at the end what to do ($out)" grep -q "still PENDING after 3 s: .*tessera session rm w2" <<<"$out"
"$TESSERA" session rm w2 >/dev/null
"$TESSERA" session rm waiting >/dev/null
check "removing it while waiting cancels it" wait_status waiting CANCELLED
e2e_done
