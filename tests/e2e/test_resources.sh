#!/usr/bin/env bash
# The routes behind the web UI's resource panel, launch estimate and nodes
# page (docs/api.md): GET /v1/resources (policy, use, cluster capacity and
# free), POST /v1/sessions?dry_run=1 (validated like a create, nothing
# created, fits_now with the reason a PENDING session would show), and
# draining a node (PATCH /v1/nodes/{id}, `tessera node drain/undrain`):
# nothing new is placed there, its sessions keep running, undrain lets the
# waiting one start; the drain survives a restart. With one mock 8 GiB GPU
# at 2 fGPU per GPU.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server --mock-gpus 1x8GiB --fgpu-per-device 2 || { e2e_done; exit 1; }

pyrun() {  # pyrun PHASE: the Python checks below for one phase
	PYTHONPATH=$(dirname "$0") python3 - "$TESSERA_CONFIG" "$TEST_IMAGE" "$E2E_AGENT_ID" "$1" <<'PY'
import json, sys, time
from signed import Api, load_conf

conf = load_conf(sys.argv[1])
image, node, phase = sys.argv[2], sys.argv[3], sys.argv[4]
admin = Api(conf["endpoint"], conf["access_key"], conf["secret_key"])

def say(good, what):
    print("%s %s" % ("ok  " if good else "FAIL", what))

def wait_status(api, ref, want):
    st = ""
    for _ in range(600):
        _, r = api.call("GET", "/v1/sessions/" + ref)
        st = (r or {}).get("status", "")
        if st == want:
            return r
        time.sleep(0.1)
    return {"status": st}

def sessions(api):
    return {s["name"]: s for s in api.call("GET", "/v1/sessions")[1]["sessions"]}

small = {"cpu": 0.1, "mem": "16m"}
if phase == "one":
    st, r = admin.call("POST", "/v1/users", {"email": "rita@res.test", "password": "pw-rita-123"})
    say(st == 201, "admin creates rita (%d)" % st)
    rita = Api(conf["endpoint"], r["user"]["access_key"], r["secret_key"])
    st, _ = admin.call("PUT", "/v1/config/policy.rita@res.test",
                       {"value": {"max_sessions": 3, "max_cpu": 2, "max_mem": "1g"}})
    say(st == 200, "admin sets rita's policy (%d)" % st)

    st, r = rita.call("GET", "/v1/resources")
    say(st == 200, "GET /v1/resources answers 200 (%d)" % st)
    say(r["policy"] == {"max_sessions": 3, "max_cpu": 2, "max_mem": 1 << 30, "max_fgpu": None, "allow_root": False},
        "its policy: the limits, null where none, no root (%s)" % r["policy"])
    # allow_root is what the launch dialog reads to offer root or say why not.
    st, _ = admin.call("PUT", "/v1/config/policy.rita@res.test",
                       {"value": {"max_sessions": 3, "max_cpu": 2, "max_mem": "1g", "allow_root": True}})
    st2, r2 = rita.call("GET", "/v1/resources")
    say(st == 200 and st2 == 200 and r2["policy"].get("allow_root") is True,
        "a policy with allow_root says so in GET /v1/resources (%d, %s)" % (st, r2.get("policy")))
    say(r["used"] == {"sessions": 0, "cpu": 0, "mem": 0, "fgpu": 0}, "nothing used yet (%s)" % r["used"])
    cl = r["cluster"]
    say(cl["capacity"]["fgpu"] == 2 and cl["free"]["fgpu"] == 2 and cl["largest_fgpu_free_on_one_device"] == 2,
        "the cluster: 2 fGPU, all free, 2 on one device (%s)" % cl)
    cap_cpu = cl["capacity"]["cpu"]

    # dry_run: nothing created, fits now.
    before = len(rita.call("GET", "/v1/sessions?all=1")[1]["sessions"])
    st, r = rita.call("POST", "/v1/sessions?dry_run=1", {"image": image, "name": "est", "resources": small})
    say(st == 200 and r == {"fits_now": True, "reason": None}, "a dry run that fits: 200 fits_now true (%d %s)" % (st, r))
    after = len(rita.call("GET", "/v1/sessions?all=1")[1]["sessions"])
    say(before == after == 0, "a dry run creates nothing (%d then %d sessions)" % (before, after))
    # Validated like a create.
    st, r = rita.call("POST", "/v1/sessions?dry_run=1", {"image": image, "resources": {"cpu": -1}})
    say(st == 400 and "cpu" in json.dumps(r), "a dry run with a bad cpu: 400 naming it (%d %s)" % (st, r))
    st, r = rita.call("POST", "/v1/sessions?dry_run=1", {"image": "no/such-image:1", "resources": small})
    say(st == 400 and "not present" in json.dumps(r), "a dry run of a missing image: 400 (%d)" % st)
    st, r = rita.call("POST", "/v1/sessions?dry_run=1", {"image": image, "resources": {"cpu": cap_cpu * 100}})
    say(st == 422, "a dry run no node could hold: 422 (%d)" % st)
    st, r = rita.call("POST", "/v1/sessions?dry_run=maybe", {"image": image, "resources": small})
    say(st == 400 and "dry_run" in json.dumps(r), "dry_run=maybe: 400 naming dry_run (%d)" % st)
    # Over the policy: would wait, and says why.
    st, r = rita.call("POST", "/v1/sessions?dry_run=1", {"image": image, "resources": {"cpu": 0.1, "mem": "2g"}})
    say(st == 200 and r["fits_now"] is False and "policy" in (r["reason"] or ""),
        "a dry run over the policy: fits_now false, the policy named (%s)" % r)

    # A running session shows in the resources.
    st, r = rita.call("POST", "/v1/sessions", {"image": image, "name": "g1",
                                               "resources": {"cpu": 0.1, "mem": "16m", "fgpu": 1}})
    say(st == 201, "rita starts g1 with 1 fGPU (%d)" % st)
    wait_status(rita, "g1", "RUNNING")
    st, r = rita.call("GET", "/v1/resources")
    say(r["used"]["sessions"] == 1 and r["used"]["fgpu"] == 1 and r["used"]["mem"] == 16 << 20,
        "resources count g1 (%s)" % r["used"])
    say(r["cluster"]["free"]["fgpu"] == 1 and r["cluster"]["largest_fgpu_free_on_one_device"] == 1,
        "the cluster has 1 fGPU free (%s)" % r["cluster"])
    st, r = rita.call("POST", "/v1/sessions?dry_run=1", {"image": image, "count": 2,
                                                        "resources": {"cpu": 0.1, "mem": "16m", "fgpu": 1}})
    say(st == 200 and r["fits_now"] is False and "1 of the 2" in (r["reason"] or "") and "GPU" in r["reason"],
        "two more 1-fGPU sessions: one would start, the other waits for a GPU (%s)" % r)

    # Drain: validation first.
    st, r = rita.call("PATCH", "/v1/nodes/" + node, {"schedulable": False})
    say(st == 403, "a user may not drain a node (%d)" % st)
    for body in ({}, {"schedulable": "no"}, {"schedulable": False, "x": 1}, {"schedulable": None}):
        st, r = admin.call("PATCH", "/v1/nodes/" + node, body)
        say(st == 400 and "schedulable" in json.dumps(r), "drain body %s: 400 naming schedulable (%d)" % (json.dumps(body), st))
    st, r = admin.call("PATCH", "/v1/nodes/no-such-node", {"schedulable": False})
    say(st == 404, "draining an unknown node: 404 (%d)" % st)
    st, r = admin.call("GET", "/v1/nodes")
    say(r["nodes"][0].get("schedulable") is True, "GET /v1/nodes: schedulable true before a drain")
    print("# phase one done")
PY
}

pyrun one > "$E2E_DIR/one.log" 2>&1
while read -r line; do
	case $line in
	"ok   "*) ok "${line#ok   }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	*) echo "$line" ;;
	esac
done < "$E2E_DIR/one.log"
check "the API checks ran to their end" grep -q "^# phase one done" "$E2E_DIR/one.log"

# Drain through the CLI: g1 keeps running, a new session waits and says why.
out=$("$TESSERA" node drain "$E2E_AGENT_ID" 2>&1)
check "tessera node drain $E2E_AGENT_ID succeeds ($out)" contains "$out" "drained"
check "node ls says it is drained" bash -c '"$1" node ls | grep -q "ALIVE,drained"' _ "$TESSERA"
check "node ls --json shows it unschedulable" bash -c '"$1" node ls --json | grep -q "\"schedulable\": *false"' _ "$TESSERA"
"$TESSERA" session create "$TEST_IMAGE" --name after --cpu 0.1 --mem 16m >/dev/null 2>&1
check "a session made after the drain is accepted and waits" wait_status after PENDING
info=$(jget after status_info)
check "it says the node is drained ($info)" contains "$info" "drained"
check "g1 keeps running on the drained node" bash -c '[ "$("$1" session ls --all --json 2>/dev/null | python3 -c "import json,sys; print([s[\"status\"] for s in json.load(sys.stdin) if s[\"name\"]==\"g1\"][0])")" == RUNNING ]' _ "$TESSERA"
out=$("$TESSERA" node drain 2>&1)
check "node drain without a node is a usage error ($out)" contains "$out" "missing NODE"

# The drain is stored: it survives a restart.
stop_server
start_server --mock-gpus 1x8GiB --fgpu-per-device 2 || { e2e_done; exit 1; }
check "after a restart the node is still drained" bash -c '"$1" node ls --json | grep -q "\"schedulable\": *false"' _ "$TESSERA"
check "and the session still waits" wait_status after PENDING
out=$("$TESSERA" node undrain "$E2E_AGENT_ID" 2>&1)
check "tessera node undrain succeeds ($out)" contains "$out" "schedulable"
check "the waiting session starts once the node is undrained" wait_status after RUNNING
e2e_done
