#!/usr/bin/env bash
# Session apps, the manager's and the agent's part (docs/apps.md): a
# manager and an agent daemon sharing a cluster secret. A session's
# container has only the runner's app port published, on 127.0.0.1, and
# its app secret mounted read-only; its apps are listed (terminal, and an
# image's service ports); opening one gives a one-time link on a port of
# the range; the proxy (credential wsproxy, cluster secret) redeems it
# once, for the user who opened it; other users get the answer of a
# missing session; bad apps get 400; the proxy's route list follows the
# session's end; a restarted manager still knows where the app port is,
# and keeps the open routes and the links not yet used.
. "$(dirname "$0")/lib.sh"
e2e_setup
mport=$(free_port); aport=$(free_port)
secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
APPS_IMAGE=tessera-test-apps:e2e-2
if ! docker image inspect "$APPS_IMAGE" >/dev/null 2>&1; then
	# A label as Backend.AI's images have them: a pty entry and a port
	# list, which are not apps the runner serves.
	printf 'FROM %s\nLABEL ai.backend.service-ports="ipython:pty:3000,jupyter:http:8081,vscode:http:[8180,8181],mlflow-ui:preopen:5000"\n' "$TEST_IMAGE" |
		docker build -q -t "$APPS_IMAGE" - >/dev/null 2>&1
fi
e2e_manager_conf "$E2E_DIR/manager.conf" "$mport" "$secret" "$E2E_DIR/mdata" \
	heartbeat_interval_ms=300 wsproxy_url=http://127.0.0.1 wsproxy_port_range=10205-10206
e2e_agent_conf "$E2E_DIR/agent.conf" "$E2E_AGENT_ID" "$mport" "$aport" "$secret" "$E2E_DIR/adata" \
	cpu=2 mem=1GiB
start_manager() {
	"$TESSERA" manager --config "$E2E_DIR/manager.conf" >>"$E2E_DIR/manager.log" 2>&1 &
	MPID=$!; E2E_PIDS+=("$MPID")
}
start_manager
"$TESSERA" agent --config "$E2E_DIR/agent.conf" >>"$E2E_DIR/agent.log" 2>&1 &
E2E_PIDS+=("$!")
for _ in $(seq 1 100); do [[ -s $E2E_DIR/mdata/admin.conf ]] && break; sleep 0.1; done
export TESSERA_CONFIG=$E2E_DIR/mdata/admin.conf
wait_alive() {
	for _ in $(seq 1 150); do
		"$TESSERA" node ls --json 2>/dev/null | grep -q '"ALIVE"' && return 0
		sleep 0.1
	done
	return 1
}
check "the agent registers" wait_alive

# A bad setting stops the manager at start, saying which.
sed 's/^wsproxy_port_range = .*/wsproxy_port_range = 10300-10205/' "$E2E_DIR/manager.conf" >"$E2E_DIR/bad.conf"
sed -i "s|^data_dir = .*|data_dir = $E2E_DIR/bad-data|" "$E2E_DIR/bad.conf"
out=$(timeout 10 "$TESSERA" manager --config "$E2E_DIR/bad.conf" 2>&1)
check "a bad wsproxy_port_range stops the manager with a message ($out)" contains "$out" "wsproxy_port_range"
out=$(timeout 10 "$TESSERA" server --app-ports 5-1 2>&1)
check "tessera server --app-ports is checked ($out)" contains "$out" "--app-ports"

py() {  # py PHASE: the API checks of one phase, as ok/FAIL lines
	PYTHONPATH=$(dirname "$0") python3 - "$1" "$TESSERA_CONFIG" "$TEST_IMAGE" "$APPS_IMAGE" "$secret" \
		"$E2E_DIR" <<'PY'
import json, os, stat, subprocess, sys, threading, time
from signed import Api, load_conf

phase, conf_path, image, apps_image, cluster_secret, e2e_dir = sys.argv[1:7]
conf = load_conf(conf_path)
ep = conf["endpoint"]
admin = Api(ep, conf["access_key"], conf["secret_key"])
proxy = Api(ep, "wsproxy", cluster_secret)
state_path = os.path.join(e2e_dir, "apps-state.json")

def say(good, what):
    print("%s %s" % ("ok  " if good else "FAIL", what))

def err_of(r):
    return (r or {}).get("error", {}).get("message", "")

def wait_running(api, sid):
    status = ""
    for _ in range(300):
        st, r = api.call("GET", "/v1/sessions/" + sid)
        status = (r or {}).get("status", "")
        if status not in ("PENDING", "SCHEDULED", "PREPARING"):
            break
        time.sleep(0.1)
    return status

def inspect(cid):
    return json.loads(subprocess.check_output(["docker", "inspect", cid]))[0]

def netns_key():
    # util_netns_key: FNV-1a of "BOOT_ID\n|DEV|INO" (boot id as read,
    # newline included; /proc/self/ns/net's device and inode): this host
    # and network namespace, which the test shares with the agent.
    st = os.stat("/proc/self/ns/net")
    h = 1469598103934665603
    for c in ("%s|%d|%d" % (open("/proc/sys/kernel/random/boot_id").read(), st.st_dev, st.st_ino)).encode():
        h = ((h ^ c) * 1099511628211) % (1 << 64)
    return "%016x" % h

def docker_endpoint(cid):
    # The published port, then the direct path (docs/apps.md): the
    # container's address on its network, tagged with this host's key.
    c = inspect(cid)
    b = c["NetworkSettings"]["Ports"]["7611/tcp"][0]
    ip = c["NetworkSettings"]["Networks"][c["HostConfig"]["NetworkMode"]]["IPAddress"]
    return "%s:%s,%s:7611@%s" % (b["HostIp"], b["HostPort"], ip, netns_key())

if phase == "first":
    def make_user(email):
        st, r = admin.call("POST", "/v1/users", {"email": email, "password": "pw-" + email})
        say(st == 201, "admin creates %s (%d)" % (email, st))
        return r["user"], Api(ep, r["user"]["access_key"], r["secret_key"])
    ua, a = make_user("alice@apps.test")
    ub, b = make_user("bob@apps.test")

    st, r = a.call("POST", "/v1/sessions", {"image": image, "name": "box", "resources": {"cpu": 0.1, "mem": "16m"}})
    say(st == 201, "A creates a busybox session (%d %s)" % (st, err_of(r)))
    if st != 201:
        sys.exit(0)
    sess = r["sessions"][0]
    say("app_secret" not in json.dumps(r), "the create answer shows no app secret")
    status = wait_running(a, sess["id"])
    say(status == "RUNNING", "it runs (%s)" % status)
    st, r = a.call("GET", "/v1/sessions/box")
    cid = r["container_id"]
    say("app_secret" not in json.dumps(r) and "secret" not in json.dumps(r), "the session's JSON shows no secret")

    # The container: only 7611/tcp published, only on 127.0.0.1; the
    # secret read-only at /run/tessera/app-secret.
    info = inspect(cid)
    pb = info["HostConfig"]["PortBindings"] or {}
    say(list(pb.keys()) == ["7611/tcp"] and [x["HostIp"] for x in pb["7611/tcp"]] == ["127.0.0.1"],
        "only 7611/tcp is published, on 127.0.0.1 (%s)" % json.dumps(pb))
    ports = info["NetworkSettings"]["Ports"] or {}
    pub = {k: v for k, v in ports.items() if v}
    say(list(pub.keys()) == ["7611/tcp"] and all(x["HostIp"] == "127.0.0.1" for x in pub["7611/tcp"]),
        "docker publishes it on 127.0.0.1 only (%s)" % json.dumps(pub))
    mounts = [m for m in info["Mounts"] if m["Destination"] == "/run/tessera/app-secret"]
    say(len(mounts) == 1 and mounts[0]["RW"] is False, "the app secret is mounted read-only (%s)" % mounts)
    sfile = mounts[0]["Source"] if mounts else ""
    mode = stat.S_IMODE(os.stat(sfile).st_mode) if sfile else 0
    say(mode == 0o400 and os.stat(sfile).st_uid == 0, "its file is 0400 and root's (%o)" % mode)
    file_secret = open(sfile).read().strip() if sfile else ""
    say(len(file_secret) == 64 and all(c in "0123456789abcdef" for c in file_secret), "it holds 64 hex characters")

    st, r = a.call("GET", "/v1/sessions/box/apps")
    say(st == 200 and r == {"apps": [{"name": "terminal", "protocol": "pty", "port": None}]},
        "a busybox session lists the terminal only (%d %s)" % (st, json.dumps(r)))

    # An image with service ports lists its apps after the terminal: not
    # its pty entry, and the first port of a list.
    st, r = a.call("POST", "/v1/sessions", {"image": apps_image, "name": "withapps",
                                            "resources": {"cpu": 0.1, "mem": "16m"}})
    say(st == 201, "A creates a session of an image with service ports (%d %s)" % (st, err_of(r)))
    wsess = r["sessions"][0]
    wait_running(a, wsess["id"])
    st, r = a.call("GET", "/v1/sessions/withapps")
    say(r.get("status") == "RUNNING", "it runs: the runner takes what it is given (%s)" % r.get("status"))
    st, r = a.call("GET", "/v1/sessions/withapps/apps")
    names = [(x["name"], x["protocol"], x["port"]) for x in (r or {}).get("apps", [])]
    say(names == [("terminal", "pty", None), ("jupyter", "http", 8081), ("vscode", "http", 8180),
                  ("mlflow-ui", "preopen", 5000)],
        "its apps: terminal, jupyter, vscode, mlflow-ui (%s)" % names)
    st, r = a.call("GET", "/v1/sessions/withapps")
    wcid = r.get("container_id")
    if wcid:
        args = inspect(wcid)["Args"]
        say("--apps" in args and args[args.index("--apps") + 1] == "jupyter:http:8081,vscode:http:8180,mlflow-ui:preopen:5000",
            "the runner is given the image's service ports (%s)" % args)
    else:
        say(False, "the session of the image with apps has a container")
    st, r = admin.call("DELETE", "/v1/sessions/%s" % wsess["id"])
    say(st == 200, "it is removed (%d)" % st)

    # Opening the terminal: a one-time link on a port of the range.
    st, r = a.call("POST", "/v1/sessions/box/apps/terminal")
    url = (r or {}).get("url", "")
    say(st == 200 and r.get("app") == "terminal" and r.get("expires_in") == 60 and
        url.startswith("http://127.0.0.1:10205/__tessera/setup?token="), "A opens the terminal (%d %s)" % (st, r))
    token = url.split("token=", 1)[-1]
    say(len(token) == 64, "the token is 64 hex characters")

    # The proxy redeems it once.
    st, r = proxy.call("POST", "/v1/proxy/redeem", {"token": token})
    want = {"user": ua["email"], "user_id": ua["id"], "session_id": sess["id"], "session": "box",
            "app": "terminal", "target": "app:terminal", "port": 10205,
            "endpoint": docker_endpoint(cid), "secret": file_secret}
    say(st == 200 and all(r.get(k) == v for k, v in want.items()) and "host" not in r,
        "the proxy redeems it: A's route, endpoint and secret (%d %s)" % (st, {k: v for k, v in (r or {}).items() if k != "secret"}))
    st, r = proxy.call("POST", "/v1/proxy/redeem", {"token": token})
    say(st == 403 and "already used" in err_of(r), "a second redeem is refused (%d %s)" % (st, err_of(r)))
    st, r = proxy.call("POST", "/v1/proxy/redeem", {"token": "ab" * 32})
    say(st == 403 and "not valid" in err_of(r), "an unknown token is refused (%d %s)" % (st, err_of(r)))
    st, r = proxy.call("POST", "/v1/proxy/redeem", {"token": 5})
    say(st == 400, "a token that is not a string is 400 (%d)" % st)

    # The same app again: the same port; the admin's link is the admin's.
    st, r = admin.call("POST", "/v1/sessions/box/apps/terminal?owner=alice@apps.test")
    url2 = (r or {}).get("url", "")
    say(st == 200 and ":10205/" in url2, "the admin opens A's terminal on the same port (%d %s)" % (st, url2))
    st, r = proxy.call("POST", "/v1/proxy/redeem", {"token": url2.split("token=", 1)[-1]})
    say(st == 200 and r.get("user") not in (None, ua["email"]) and r.get("user_id") not in (None, ua["id"]),
        "the admin's token is bound to the admin, not A (%s)" % (r or {}).get("user"))

    # Only the proxy may redeem: unsigned, a user's key, an agent's.
    body = json.dumps({"token": token}).encode()
    st, _, _ = a.send("POST", "/v1/proxy/redeem", body, {})
    say(st == 401, "an unsigned redeem is refused (%d)" % st)
    st, r = a.call("POST", "/v1/proxy/redeem", {"token": token})
    say(st in (401, 403), "a user-signed redeem is refused (%d %s)" % (st, err_of(r)))
    st, r = admin.call("GET", "/v1/proxy/routes")
    say(st in (401, 403), "an admin may not read the routes (%d)" % st)
    agent = Api(ep, "agent:x", cluster_secret)
    st, r = agent.call("POST", "/v1/proxy/redeem", {"token": token})
    say(st == 403, "an agent's credential is refused (%d)" % st)
    st, r = Api(ep, "wsproxy", "wrong-secret-0123456789").call("GET", "/v1/proxy/routes")
    say(st == 401, "the proxy's credential with another secret is refused (%d)" % st)

    # Another user: A's session does not exist for B.
    for ref in (sess["id"], "box"):
        st1, r1 = b.call("POST", "/v1/sessions/%s/apps/terminal" % ref)
        st2, r2 = b.call("POST", "/v1/sessions/no-such-session/apps/terminal")
        same = st1 == st2 == 404 and err_of(r1).replace(ref, "no-such-session") == err_of(r2)
        say(same, "B opening A's app by %s gets the answer of a missing session (%d %s)" %
            ("id" if ref != "box" else "name", st1, err_of(r1)))
        st1, r1 = b.call("GET", "/v1/sessions/%s/apps" % ref)
        say(st1 == 404, "B cannot list A's apps (%d)" % st1)

    # Bad apps: 400 with a message.
    for app, words in (("nosuch", "has no app 'nosuch'"), ("a%20b", "app must be"), ("0", "port must be"),
                       ("7611", "port must be"), ("70000", "port must be"), ("-1", "has no app")):
        st, r = a.call("POST", "/v1/sessions/box/apps/%s" % app)
        say(st == 400 and words in err_of(r), "app %s is 400 (%d %s)" % (app, st, err_of(r)))

    # A port: its own route; the range (two ports) is then full.
    st, r = a.call("POST", "/v1/sessions/box/apps/8888")
    say(st == 200 and r.get("app") == "port-8888" and ":10206/" in r.get("url", ""),
        "port 8888 opens on the range's other port (%d %s)" % (st, r))
    st, r = proxy.call("POST", "/v1/proxy/redeem", {"token": r["url"].split("token=", 1)[-1]})
    say(st == 200 and r.get("target") == "port:8888" and r.get("port") == 10206, "its route targets port:8888")
    st, r = a.call("POST", "/v1/sessions/box/apps/9999")
    say(st == 409 and "all 2 app ports are in use; close sessions or widen wsproxy port range" in err_of(r),
        "a third app finds the range full (%d %s)" % (st, err_of(r)))

    # The routes the proxy serves.
    st, r = proxy.call("GET", "/v1/proxy/routes")
    routes = sorted((x["port"], x["target"], x["session_id"], x["endpoint"], x["user_id"]) for x in r["routes"])
    say(st == 200 and routes == [(10205, "app:terminal", sess["id"], docker_endpoint(cid), ua["id"]),
                                 (10206, "port:8888", sess["id"], docker_endpoint(cid), ua["id"])],
        "the routes list both (%s)" % routes)
    say(all(x["secret"] == file_secret and x["app"] for x in r["routes"]), "with the session's secret")
    for q in ("?since=x", "?since=-1", "?timeout_s=61", "?timeout_s=a"):
        st, _ = proxy.call("GET", "/v1/proxy/routes" + q)
        say(st == 400, "routes%s is 400 (%d)" % (q, st))
    st, r = a.call("GET", "/v1/sessions/box/apps")
    say(st == 200 and r["apps"][0].get("url") == "http://127.0.0.1:10205/", "the open terminal lists its URL")
    # A link made just before the manager restarts is redeemed after it.
    st, r = a.call("POST", "/v1/sessions/box/apps/8888")
    pending = (r or {}).get("url", "").split("token=", 1)[-1]
    json.dump({"sid": sess["id"], "cid": cid, "alice": ua, "a_secret": a.secret_key,
               "a_key": a.access_key, "secret": file_secret, "pending": pending}, open(state_path, "w"))

elif phase == "after_restart":
    if not os.path.exists(state_path):
        say(False, "the first phase got through")
        sys.exit(0)
    s = json.load(open(state_path))
    a = Api(ep, s["a_key"], s["a_secret"])
    # The manager restarted; the agent came back: the routes and tokens
    # were kept in the store, the endpoint given back by the agent.
    status = wait_running(a, s["sid"])
    routes = []
    for _ in range(100):
        st, r = proxy.call("GET", "/v1/proxy/routes")
        routes = sorted((x["port"], x["target"]) for x in (r or {}).get("routes", []))
        if len(routes) == 2:
            break
        time.sleep(0.1)
    say(routes == [(10205, "app:terminal"), (10206, "port:8888")],
        "the open apps' routes outlived the manager's restart, on their ports (%s)" % routes)
    st, r = proxy.call("POST", "/v1/proxy/redeem", {"token": s["pending"]})
    say(st == 200 and r.get("port") == 10206, "a link made before the restart is redeemed after it (%d %s)" % (st, r))
    st, r = a.call("POST", "/v1/sessions/box/apps/terminal")
    say(st == 200, "after a manager restart A opens the terminal again (%d %s)" % (st, err_of(r)))
    st, r = proxy.call("POST", "/v1/proxy/redeem", {"token": (r or {}).get("url", "").split("token=", 1)[-1]})
    say(st == 200 and r.get("endpoint") == docker_endpoint(s["cid"]) and r.get("secret") == s["secret"],
        "the agent reported the app endpoint again and the secret survived (%d %s)" % (st, (r or {}).get("endpoint")))
    st, r = proxy.call("GET", "/v1/proxy/routes")
    gen = r["generation"]
    say(st == 200 and {x["session_id"] for x in r["routes"]} == {s["sid"]}, "its routes are listed (gen %d)" % gen)

    # A long poll returns once the session is removed, without its route.
    got = {}
    def poll():
        got["st"], got["r"] = proxy.call("GET", "/v1/proxy/routes?since=%d&timeout_s=60" % gen, timeout=90)
    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.5)
    st, r = a.call("DELETE", "/v1/sessions/box")
    say(st == 200, "A removes the session (%d)" % st)
    t.join()
    r = got.get("r") or {}
    say(got.get("st") == 200 and r.get("generation") != gen and r.get("routes") == [],
        "the routes long poll returns without its route (%s %s)" % (got.get("st"), r))
    st, r = a.call("POST", "/v1/sessions/box/apps/terminal")
    say(st == 409 and "RUNNING" in err_of(r), "an app of a session that is not running is 409 (%d %s)" % (st, err_of(r)))
PY
}
run_phase() {
	local out line
	out=$(py "$1")
	while IFS= read -r line; do
		case $line in
		"ok   "*) ok "${line#ok   }" ;;
		"FAIL "*) fail "${line#FAIL }" ;;
		*) echo "$line" ;;
		esac
	done <<<"$out"
}
run_phase first
kill "$MPID"; wait "$MPID" 2>/dev/null
# Forget the endpoint in the store: the agent's container list, at its
# registration with the restarted manager, must give it back.
python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("UPDATE sessions SET app_endpoint = \x27\x27"); c.commit()' \
	"$E2E_DIR/mdata/tessera.db"
start_manager
# The agent registers again once its heartbeat is refused.
check "the agent registers with the restarted manager" wait_alive
run_phase after_restart
e2e_done
