#!/usr/bin/env bash
# Connection floods (issue 18, item 7): 2,000 connections that never finish
# their request head, first from 127.0.0.1 and then spread over
# 127.0.0.2..127.0.0.50, against the manager's API and the web UI at once.
# While they are held open, a signed API call (the CLI) and a logged-in
# web request (/api/v1/sessions with the login cookie) must be served
# (within a generous deadline: no timing is asserted), and afterwards the
# servers must have closed every flood connection themselves (the header
# timeout) and keep serving.
. "$(dirname "$0")/lib.sh"
e2e_setup
conf_value() { sed -n "s/^$2 = //p" "$1"; }

start_server || { e2e_done; exit 1; }
conf=$E2E_DIR/data/admin.conf
api_port=$(conf_value "$conf" endpoint | sed 's/.*://')
web_port=$(conf_value "$conf" web_url | sed 's|.*:\([0-9]*\)/.*|\1|')
check "the server serves the API and the web UI ($api_port, $web_port)" [ -n "$api_port" ] && [ -n "$web_port" ]

out=$(python3 - "$api_port" "$web_port" "$(conf_value "$conf" email)" "$(conf_value "$conf" password)" "$TESSERA" <<'PY'
import json, resource, socket, subprocess, sys, time, urllib.request

api, web, email, password, tessera = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
N = 2000

def half_request(port, src):
    s = socket.socket()
    s.settimeout(10)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        s.send(b"GET /v1/sessions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        return s
    except OSError:
        s.close()
        return None

def flood(port, spread):
    socks = []
    for i in range(N):
        s = half_request(port, "127.0.0.%d" % (2 + i % 49) if spread else "127.0.0.1")
        if s:
            socks.append(s)
    return socks

def deadline(what, fn, secs=90):
    end = time.time() + secs
    last = None
    while time.time() < end:
        try:
            r = fn()
            if r:
                print("ok   %s" % what)
                return True
        except Exception as e:
            last = e
        time.sleep(1)
    print("FAIL %s (%s)" % (what, last))
    return False

def api_ok():
    r = subprocess.run([tessera, "session", "ls"], capture_output=True, timeout=30)
    return r.returncode == 0

cookie = None
def web_ok():
    global cookie
    if cookie is None:
        req = urllib.request.Request("http://127.0.0.1:%d/auth/login" % web, method="POST",
                                     data=json.dumps({"email": email, "password": password}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=20) as r:
            c = r.headers.get("Set-Cookie", "")
        cookie = c.split(";")[0]
    req = urllib.request.Request("http://127.0.0.1:%d/api/v1/sessions" % web, headers={"Cookie": cookie})
    with urllib.request.urlopen(req, timeout=20) as r:
        return r.status == 200 and "sessions" in json.loads(r.read())

def all_closed(socks):
    def check():
        for s in list(socks):
            s.settimeout(0)
            try:
                if s.recv(4096) == b"":
                    socks.remove(s); s.close()
            except BlockingIOError:
                pass
            except OSError:
                socks.remove(s); s.close()
        return not socks
    return check

for spread in (False, True):
    where = "127.0.0.2..50" if spread else "127.0.0.1"
    a, w = flood(api, spread), flood(web, spread)
    print("# %d + %d unfinished requests connected from %s" % (len(a), len(w), where))
    deadline("the API serves a signed request under a flood from %s" % where, api_ok)
    deadline("the web UI serves a logged-in request under a flood from %s" % where, web_ok)
    deadline("the flood's connections from %s are closed by the servers" % where, all_closed(a + w), 180)
deadline("the API serves after the floods", api_ok)
deadline("the web UI serves after the floods", web_ok)
PY
)
echo "$out"
while IFS= read -r line; do
	case $line in
	"ok   "*) ok "${line#ok   }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	esac
done <<<"$out"
check "the flood ran to its end" contains "$out" "after the floods"
check "the server is still running" kill -0 "$SERVER_PID"
e2e_done
