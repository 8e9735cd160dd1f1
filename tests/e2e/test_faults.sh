#!/usr/bin/env bash
# Fault injection: `tessera server` is SIGKILLed at random moments while
# three clients make 200 creates and removals between them (each retrying a
# request that the kill cut off until it gets an answer), and restarted
# each time. Afterwards nothing is lost (every session whose creation was
# acknowledged, and not removed, is RUNNING in its own container), nothing
# is duplicated (one live session per name, one container per session),
# nothing is leaked (every container labelled with this test's agent
# belongs to a live session; after removing everything, none is left).
# The randomness (operations and kill moments) comes from one seed, printed;
# FAULT_SEED=N replays its choices (not the threads' interleaving).
. "$(dirname "$0")/lib.sh"
e2e_setup
SEED=${FAULT_SEED:-$(( (RANDOM << 15) | RANDOM ))}
e2e_log "seed $SEED (replay: FAULT_SEED=$SEED)"
RANDOM=$SEED
OPS=${FAULT_OPS:-200}
KILLS=${FAULT_KILLS:-6}

start_server || { e2e_done; exit 1; }

cat > "$E2E_DIR/faults.py" <<'PY'
import json, os, random, subprocess, sys, threading, time
sys.path.insert(0, os.environ["E2E_LIB"])
from signed import Api, load_conf

mode, conf_path, state_path = sys.argv[1], sys.argv[2], sys.argv[3]
image, agent, seed = os.environ["TEST_IMAGE"], os.environ["E2E_AGENT_ID"], int(os.environ["SEED"])

def api():
    """A client for the server as it is now (its port changes on restart)."""
    while True:
        try:
            c = load_conf(conf_path)
            return Api(c["endpoint"], c["access_key"], c["secret_key"])
        except (OSError, KeyError):
            time.sleep(0.1)

def call(method, path, obj=None, deadline=180):
    """Retries a request the server's death cut off until it is answered."""
    end = time.time() + deadline
    while True:
        try:
            return api().call(method, path, obj, timeout=30)
        except (OSError, ValueError, Exception) as e:
            if time.time() > end:
                raise RuntimeError("%s %s: no answer in %d s (%s)" % (method, path, deadline, e))
            time.sleep(0.2)

def listed(role):
    out = subprocess.run(["docker", "ps", "-a", "--filter", "label=tessera.agent=" + agent,
                          "--format", '{{.Label "tessera.role"}}|{{.ID}} {{.Label "tessera.session"}} {{.State}}'],
                         capture_output=True, text=True, check=True).stdout
    rows = [l.split("|", 1) for l in out.splitlines() if "|" in l]
    return [rest.split() for r, rest in rows if (r == "sandbox") == (role == "sandbox")]

# The sessions' containers; the spare sandboxes (docs/architecture.md,
# "Sandboxes") carry no session label.
def containers():
    return listed("session")

if mode == "work":
    lock = threading.Lock()
    alive, removed, created, errors = {}, set(), 0, []
    counter = iter(range(1, 1000000))

    done = [0]
    def progress():
        with lock:
            done[0] += 1
            with open(state_path + ".progress.tmp", "w") as f:
                f.write("%d\n" % done[0])
            os.replace(state_path + ".progress.tmp", state_path + ".progress")

    def worker(idx, nops):
        global created
        rng = random.Random(seed * 10 + idx)
        for _ in range(nops):
            progress()
            with lock:
                mine = [n for n in alive if n.startswith("w%d-" % idx)]
            if len(mine) < 2 or rng.random() < 0.5:
                with lock:
                    name = "w%d-%d" % (idx, next(counter))
                st, r = call("POST", "/v1/sessions", {"image": image, "name": name,
                                                       "resources": {"cpu": 0.01, "mem": "16m"}})
                if st == 201:
                    with lock:
                        alive[name] = r["sessions"][0]["id"]
                        created += 1
                    # Until it has started (or failed): so that the kills
                    # also find containers being made.
                    call("GET", "/v1/sessions/%s?wait=1&timeout_s=30" % alive[name])
                elif st == 409:   # an earlier try got in before the kill
                    st, r = call("GET", "/v1/sessions/" + name)
                    with lock:
                        alive[name] = r["id"]
                        created += 1
                else:
                    errors.append("create %s: %d %s" % (name, st, r))
            else:
                name = rng.choice(sorted(mine))
                st, r = call("DELETE", "/v1/sessions/" + alive[name])
                # 404: an earlier try removed it and it is gone already.
                if st in (200, 404):
                    with lock:
                        removed.add(alive.pop(name))
                else:
                    errors.append("remove %s: %d %s" % (name, st, r))

    total = int(os.environ["OPS"])
    ts = [threading.Thread(target=worker, args=(i, total // 3 + (i < total % 3))) for i in range(3)]
    for t in ts: t.start()
    for t in ts: t.join()
    json.dump({"alive": alive, "removed": sorted(removed), "errors": errors}, open(state_path, "w"))
    print("# %d operations: %d creates acknowledged, %d removals, %d alive" %
          (total, created, len(removed), len(alive)))
    sys.exit(0)

# mode == "check": the server is up and stays up.
st_ = json.load(open(state_path))
alive, removed = st_["alive"], set(st_["removed"])
def say(good, what):
    print("%s %s" % ("ok  " if good else "FAIL", what))
say(not st_["errors"], "every request was answered as expected %s" % st_["errors"][:3])

def sessions():
    st, r = call("GET", "/v1/sessions?all=1")
    return r["sessions"]

# Let what was in flight settle (a generous deadline; no timing asserted).
end = time.time() + 180
while True:
    ss = sessions()
    moving = [s for s in ss if s["status"] in ("PENDING", "SCHEDULED", "PREPARING", "TERMINATING")]
    if not moving or time.time() > end:
        break
    time.sleep(1)
say(not moving, "every session settled (%d still moving)" % len(moving))
by_id = {s["id"]: s for s in ss}
live = [s for s in ss if s["status"] not in ("TERMINATED", "CANCELLED", "ERROR")]

lost = [n for n, i in alive.items() if by_id.get(i, {}).get("status") != "RUNNING"]
say(not lost, "nothing lost: all %d acknowledged sessions are RUNNING %s" %
    (len(alive), [(n, by_id.get(alive[n], {}).get("status"), by_id.get(alive[n], {}).get("status_info")) for n in lost[:5]]))
back = [i for i in removed if by_id.get(i, {}).get("status") not in (None, "TERMINATED", "CANCELLED")]
say(not back, "removed sessions stay removed %s" % back[:5])
names = {}
for s in live:
    names.setdefault(s["name"], []).append(s["id"])
dups = {n: ids for n, ids in names.items() if len(ids) > 1}
say(not dups, "no name has two live sessions %s" % dups)
unknown = [s["name"] for s in live if s["name"] not in alive]
say(not unknown, "no live session that no client holds %s" % unknown[:5])

cs = containers()
per = {}
for cid, sid, state in cs:
    per.setdefault(sid, []).append((cid, state))
two = {sid: c for sid, c in per.items() if len(c) > 1}
say(not two, "no session has two containers %s" % two)
leaked = [(cid, sid) for cid, sid, state in cs if by_id.get(sid, {}).get("status") != "RUNNING"]
say(not leaked, "no container without a live session %s" % leaked[:5])
missing = [n for n, i in alive.items() if not any(st == "running" for _, st in per.get(i, []))]
say(not missing, "every live session has its running container %s" % missing[:5])

for s in ss:
    if s["status"] not in ("TERMINATED", "CANCELLED"):
        call("DELETE", "/v1/sessions/" + s["id"])
end = time.time() + 180
while containers() and time.time() < end:
    time.sleep(1)
left = containers()
say(not left, "after removing everything no container is left %s" % left[:5])
# The user's spare may stay (one per network), made again after the
# kills; sandboxes of sessions went with them, those of the killed
# servers' runs were swept at the next start.
end = time.time() + 60
while len(listed("sandbox")) > 1 and time.time() < end:
    time.sleep(1)
sbx = listed("sandbox")
say(len(sbx) <= 1, "no sandbox is left but the user's one spare %s" % sbx[:5])
print("# check done")
PY

export E2E_LIB=$(cd "$(dirname "$0")" && pwd) TEST_IMAGE E2E_AGENT_ID SEED OPS
python3 "$E2E_DIR/faults.py" work "$TESSERA_CONFIG" "$E2E_DIR/state.json" > "$E2E_DIR/work.out" 2>&1 &
work=$!
# The kills come when the clients have started a number of operations
# drawn from the seed, each after a further random pause of up to 0.3 s.
mapfile -t at < <(for _ in $(seq "$KILLS"); do echo $((RANDOM % OPS)); done | sort -n)
kills=0
while ((kills < KILLS)) && kill -0 "$work" 2>/dev/null; do
	n=$(cat "$E2E_DIR/state.json.progress" 2>/dev/null || echo 0)
	if ((n < at[kills])); then sleep 0.02; continue; fi
	sleep "0.$((RANDOM % 4))$((RANDOM % 10))"
	stop_server KILL
	kills=$((kills + 1))
	e2e_log "SIGKILL $kills at operation $n"
	start_server || break
done
wait "$work"
rc=$?
cat "$E2E_DIR/work.out"
check "the clients finished their $OPS operations (rc $rc)" [ "$rc" -eq 0 ]
check "the server was killed and restarted $kills times" [ "$kills" -ge $((KILLS / 2)) ]
kill -0 "$SERVER_PID" 2>/dev/null || start_server

out=$(python3 "$E2E_DIR/faults.py" check "$TESSERA_CONFIG" "$E2E_DIR/state.json" 2>&1)
while IFS= read -r line; do
	case $line in
	"ok   "*) ok "${line#ok   }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	*) echo "$line" ;;
	esac
done <<<"$out"
check "the check ran to its end" contains "$out" "# check done"
e2e_done
