#!/usr/bin/env bash
# Projects, quotas, resource groups and preemption (docs/scheduling.md)
# with mock GPUs, through the CLI as admins and users use it:
# - a user in one team project needs no --project; a project's quota holds
#   a session PENDING with a reason naming the project and the limit;
# - a user of another project sees none of its sessions or the project
#   itself (the same "not found" as for a missing one); a project's
#   manager sees and ends its members' sessions;
# - a node put in a resource group takes only sessions that ask for it,
#   and a project may be kept out of a group;
# - a preemptible low-priority batch session is PREEMPTED by a
#   higher-priority one, its history says by what, it goes back to PENDING
#   and runs again once room frees; a non-preemptible one is left alone;
# - tessera fairshare lists the projects and their users.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server --mock-gpus 1x8GiB --fgpu-per-device 2 || { e2e_done; exit 1; }
ADMIN_CONFIG=$TESSERA_CONFIG
endpoint=$(sed -n 's/^endpoint *= *//p' "$ADMIN_CONFIG")

# A client.conf for a new user: user_conf EMAIL FILE.
user_conf() {
	local out
	out=$("$TESSERA" user create "$1" --json) || return 1
	python3 -c '
import json, sys
r = json.load(sys.stdin)
print("endpoint = %s\naccess_key = %s\nsecret_key = %s" % (sys.argv[1], r["user"]["access_key"], r["secret_key"]))
' "$endpoint" <<<"$out" >"$2"
}
as() {  # as CONF tessera-args...
	local conf=$1; shift
	TESSERA_CONFIG=$conf "$TESSERA" "$@"
}
jget_as() {  # jget_as CONF NAME FIELD
	TESSERA_CONFIG=$1 jget "$2" "$3"
}
wait_status_as() {  # wait_status_as CONF NAME STATUS
	TESSERA_CONFIG=$1 wait_status "$2" "$3"
}

ALICE=$E2E_DIR/alice.conf BOB=$E2E_DIR/bob.conf CAROL=$E2E_DIR/carol.conf
check "users alice, bob and carol are created" user_conf alice@proj.test "$ALICE"
user_conf bob@proj.test "$BOB"
user_conf carol@proj.test "$CAROL"

# ---- a project and its quota ----
out=$("$TESSERA" project create vision --max-fgpu 1 --weight 2 --description "the vision team" 2>&1)
check "an admin creates project vision ($out)" contains "$out" "name:        vision"
check "alice joins vision" "$TESSERA" project add-member vision alice@proj.test
out=$("$TESSERA" project add-member vision bob@proj.test --role manager 2>&1)
check "bob joins vision as its manager ($out)" contains "$out" "bob@proj.test is a manager of project vision"
out=$(as "$CAROL" project create rogue 2>&1); rc=$?
check "a user cannot create a project (exit $rc: $out)" [ $rc -ne 0 ]
check "  and is told who can" contains "$out" "only an admin may create projects"
out=$("$TESSERA" project create 'bad name' 2>&1); rc=$?
check "a bad project name is refused ($out)" [ $rc -ne 0 ]

as "$ALICE" session create "$TEST_IMAGE" --name a1 --cpu 0.1 --mem 32m --fgpu 0.5 >/dev/null
check "alice's session a1 runs" wait_status_as "$ALICE" a1 RUNNING
check "without --project it is in vision, her one team project" [ "$(jget_as "$ALICE" a1 project)" == vision ]
out=$(as "$ALICE" session info a1)
check "session info shows its project and priority" grep -q "^Project: *vision" <<<"$out"
check "  and that it is not preemptible (interactive)" grep -q "^Priority: *0, not preemptible" <<<"$out"
as "$ALICE" session create "$TEST_IMAGE" --name a2 --cpu 0.1 --mem 32m --fgpu 0.5 >/dev/null
check "a2 runs (vision holds 1 of 1 fGPU)" wait_status_as "$ALICE" a2 RUNNING
as "$ALICE" session create "$TEST_IMAGE" --name a3 --cpu 0.1 --mem 32m --fgpu 0.5 >/dev/null
check "a3 waits PENDING" wait_status_as "$ALICE" a3 PENDING
info=$(jget_as "$ALICE" a3 status_info)
check "  because of the project's quota ($info)" contains "$info" "project vision's fGPU quota"
out=$(as "$ALICE" session create "$TEST_IMAGE" --name a4 --project "alice@proj.test" --cpu 0.1 --mem 32m 2>&1)
check "alice may use her personal project by name ($out)" [ "$(jget_as "$ALICE" a4 project)" == alice@proj.test ]
out=$(as "$ALICE" project ls)
check "project ls lists her two projects" grep -q "^vision" <<<"$out"

# ---- isolation between projects ----
a1_id=$(jget_as "$ALICE" a1 id)
out=$(as "$CAROL" session ls)
check "carol's list has none of vision's sessions" not contains "$out" "a1"
out=$(as "$CAROL" session info "$a1_id" 2>&1); rc=$?
check "carol cannot read a1 by id (exit $rc)" [ $rc -ne 0 ]
check "  and gets 'no session' as for a missing one ($out)" contains "$out" "no session named or with id"
out=$(as "$CAROL" project info vision 2>&1); rc=$?
missing=$(as "$CAROL" project info no-such-project 2>&1)
check "carol cannot see project vision (exit $rc)" [ $rc -ne 0 ]
check "  with the answer a missing project gets ($out)" [ "${out//vision/X}" == "${missing//no-such-project/X}" ]
out=$(as "$CAROL" session create "$TEST_IMAGE" --name c1 --project vision --cpu 0.1 --mem 32m 2>&1); rc=$?
check "carol cannot start a session in vision (exit $rc: $out)" [ $rc -ne 0 ]
out=$(as "$CAROL" session rm "$a1_id" 2>&1); rc=$?
check "carol cannot remove a1 (exit $rc)" [ $rc -ne 0 ]
check "a1 still runs" [ "$(jget_as "$ALICE" a1 status)" == RUNNING ]

# ---- a project's manager ----
out=$(as "$BOB" session ls)
check "bob, vision's manager, sees alice's sessions there ($out)" contains "$out" "a1"
check "  but not her personal project's" not contains "$out" "a4"
out=$(as "$BOB" session exec "$a1_id" -- true 2>&1); rc=$?
check "bob may not run commands in alice's session (exit $rc: $out)" contains "$out" "only its owner may run commands"
check "bob ends alice's a2 by id" as "$BOB" session rm "$(jget_as "$ALICE" a2 id)"
check "a2 ends" wait_status_as "$ALICE" a2 TERMINATED
check "and a3 starts in the room it left" wait_status_as "$ALICE" a3 RUNNING
out=$(as "$ALICE" project add-member vision carol@proj.test 2>&1); rc=$?
check "a member cannot add members (exit $rc: $out)" contains "$out" "only the project's managers and admins"
# ---- project folders ----
out=$(as "$BOB" folder create team-data --project vision --members ro 2>&1)
check "bob, a manager, makes a folder of vision ($out)" contains "$out" "folder team-data created"
out=$(as "$ALICE" folder create alice-team --project vision 2>&1); rc=$?
check "a member cannot make one (exit $rc: $out)" contains "$out" "only project vision's managers"
out=$(as "$ALICE" folder info team-data 2>&1)
check "alice, a member, sees vision's folder ($out)" grep -q "^project: *vision" <<<"$out"
check "  read-only, as its members setting says" grep -q "^permission: *ro" <<<"$out"
out=$(as "$CAROL" folder info team-data 2>&1); rc=$?
missing=$(as "$CAROL" folder info no-such-folder 2>&1)
check "carol cannot see it (exit $rc)" [ $rc -ne 0 ]
check "  with the answer a missing folder gets ($out)" [ "${out//team-data/X}" == "${missing//no-such-folder/X}" ]

as "$ALICE" session rm a1 >/dev/null
as "$ALICE" session rm a3 >/dev/null
as "$ALICE" session rm a4 >/dev/null
check "alice's sessions end" wait_status_as "$ALICE" a3 TERMINATED

# ---- resource groups ----
out=$("$TESSERA" node set-group "$E2E_AGENT_ID" gpu-a 2>&1)
check "the node goes to resource group gpu-a ($out)" contains "$out" "in resource group gpu-a"
out=$("$TESSERA" node info "$E2E_AGENT_ID" --json)
check "the node list says its group" contains "$out" '"group": "gpu-a"'
as "$ALICE" session create "$TEST_IMAGE" --name g0 --cpu 0.1 --mem 32m >/dev/null
check "a session of the default group waits" wait_status_as "$ALICE" g0 PENDING
info=$(jget_as "$ALICE" g0 status_info)
check "  saying no node of its group is there ($info)" contains "$info" "default"
as "$ALICE" session create "$TEST_IMAGE" --name g1 --group gpu-a --cpu 0.1 --mem 32m >/dev/null
check "a session asking for gpu-a runs there" wait_status_as "$ALICE" g1 RUNNING
"$TESSERA" project set vision --groups inference >/dev/null
out=$(as "$ALICE" session create "$TEST_IMAGE" --name g2 --group gpu-a --cpu 0.1 --mem 32m 2>&1); rc=$?
check "a project kept out of gpu-a cannot use it (exit $rc)" [ $rc -ne 0 ]
check "  and is told which groups it may use ($out)" contains "$out" "may use: inference"
"$TESSERA" project set vision --groups all --max-fgpu none >/dev/null
as "$ALICE" session rm g0 >/dev/null
as "$ALICE" session rm g1 >/dev/null
"$TESSERA" node set-group "$E2E_AGENT_ID" default >/dev/null
check "g1 ends" wait_status_as "$ALICE" g1 TERMINATED

# ---- priorities and preemption ----
"$TESSERA" config set preemption_min_runtime_s 0 >/dev/null
out=$(as "$ALICE" session create "$TEST_IMAGE" --name hi --priority 5 --cpu 0.1 --mem 32m 2>&1); rc=$?
check "alice may not raise her priority (exit $rc: $out)" contains "$out" "allows priorities up to 0"
# Alice: an interactive session (not preemptible) and a preemptible batch
# job fill the node's 2 fGPU; the admin's priority 10 session needs 1.
as "$ALICE" session create "$TEST_IMAGE" --name keep --cpu 0.1 --mem 32m --fgpu 0.5 >/dev/null
as "$ALICE" session create "$TEST_IMAGE" --name job --batch --startup-command 'sleep 600' \
	--cpu 0.1 --mem 32m --fgpu 1.5 >/dev/null
check "the interactive session runs" wait_status_as "$ALICE" keep RUNNING
check "the batch job runs" wait_status_as "$ALICE" job RUNNING
check "the batch job is preemptible by default" [ "$(jget_as "$ALICE" job preemptible)" == True ]
"$TESSERA" session create "$TEST_IMAGE" --name urgent --priority 10 --cpu 0.1 --mem 32m --fgpu 1 >/dev/null
check "the admin's priority 10 session runs" wait_status urgent RUNNING
job_history=$(as "$ALICE" session info job --json | python3 -c '
import json, sys
for h in json.load(sys.stdin)["status_history"]:
    print(h["status"], h["info"])')
check "the batch job went through PREEMPTED ($job_history)" grep -q "^PREEMPTED preempted by session urgent" <<<"$job_history"
check "  and is PENDING again" wait_status_as "$ALICE" job PENDING
job_history=$(as "$ALICE" session info job --json | python3 -c '
import json, sys
for h in json.load(sys.stdin)["status_history"]:
    print(h["status"], h["info"])')
check "  its history saying it was requeued" grep -q "^PENDING requeued after preemption 1" <<<"$job_history"
check "  counted once" [ "$(jget_as "$ALICE" job preemptions)" == 1 ]
check "the non-preemptible session was left alone" [ "$(jget_as "$ALICE" keep status)" == RUNNING ]
check "  never preempted" [ "$(jget_as "$ALICE" keep preemptions)" == 0 ]
"$TESSERA" session rm urgent >/dev/null
check "once the urgent session ends, the batch job runs again" wait_status_as "$ALICE" job RUNNING

out=$("$TESSERA" fairshare)
check "tessera fairshare lists vision ($out)" grep -q "^vision " <<<"$out"
check "  and its users" grep -q "^  alice@proj.test " <<<"$out"
out=$(as "$CAROL" fairshare)
check "carol's fairshare has no vision" not grep -q "^vision " <<<"$out"
as "$ALICE" session rm job >/dev/null
as "$ALICE" session rm keep >/dev/null
ended() {  # ended CONF NAME: the session reached an end (TERMINATED, CANCELLED, ERROR)
	local s
	for _ in $(seq 1 300); do
		s=$(TESSERA_CONFIG=$1 jget "$2" status 2>/dev/null)
		[[ $s == TERMINATED || $s == CANCELLED || $s == ERROR ]] && return 0
		sleep 0.1
	done
	return 1
}
check "the last sessions end" eval 'ended "$ALICE" job && ended "$ALICE" keep'
out=$("$TESSERA" project rm vision 2>&1); rc=$?
check "vision is not removed while it has a folder (exit $rc: $out)" contains "$out" "1 folder"
as "$BOB" folder rm team-data >/dev/null
out=$("$TESSERA" project rm vision 2>&1)
check "vision is removed once its sessions ended and its folder is gone ($out)" contains "$out" "project vision removed"
e2e_done
