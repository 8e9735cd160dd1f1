#!/usr/bin/env bash
# Session apps end to end (docs/apps.md) through a real `tessera server`
# and its proxy, with a session of tessera/python:3.11 relabelled to
# declare, beside Jupyter, a preopen app `stand-in` on port 5000 (the
# image itself declares only the apps it has, and a stand-in server is
# no MLflow):
# - its apps are exactly the terminal and what its label declares;
# - Jupyter: `session app S jupyter` gives a one-time URL; its setup sets
#   the cookie; /api/status answers 503 "starting" pages (never 502) until
#   Jupyter answers 200; a kernel made with POST /api/kernels runs
#   print(6*7) over its WebSocket channels and prints 42;
# - a preopen app (the MLflow flow, a stand-in server): a 503 page
#   while nothing listens on port 5000, the directory listing once
#   `python3 -m http.server 5000` runs, started in the web terminal
#   through the proxy; `session app S --port 8888` likewise;
# - refusals: another user gets the same 404 as for a missing session,
#   and their own app's cookie is refused on S's app port (403); a setup
#   URL used twice, or no cookie: 403;
# - after `session rm S`: the app port answers 403 (session ended) and the
#   terminal's open WebSocket is closed.
# - the recipes' MLflow UI service definition (images/python-pytorch), as
#   the recipe writes it, in an image with a stand-in mlflow: the runner
#   starts it on first use and it opens through the proxy.
. "$(dirname "$0")/lib.sh"
PY_IMAGE=tessera/python:3.11
HERE=$(cd "$(dirname "$0")" && pwd)
if ! docker image inspect "$PY_IMAGE" >/dev/null 2>&1; then
	echo "$PY_IMAGE is not built; run 'meson test -C build test_images' (it builds it from images/python/3.11.recipe)"
	exit 1
fi
e2e_setup
# The image with the test's preopen app: a label over tessera/python:3.11,
# removed when the test ends (after its sessions).
R=${E2E_RUN,,}
APPS_IMAGE=tessera-e2e-apps/${R//./-}:py
E2E_IMAGES+=("$APPS_IMAGE")
printf 'FROM %s\nLABEL ai.backend.service-ports="jupyter:http:8081,stand-in:preopen:5000"\n' "$PY_IMAGE" |
	docker build -q -t "$APPS_IMAGE" - >/dev/null 2>&1
check "$APPS_IMAGE is made from $PY_IMAGE with a preopen app" docker image inspect -f . "$APPS_IMAGE"
start_server --app-ports "$(e2e_free_port_range 8)" --registry none || { e2e_done; exit 1; }

"$TESSERA" session create "$APPS_IMAGE" --name s --cpu 1 --mem 1g --wait >/dev/null 2>&1
check "a $APPS_IMAGE session runs" wait_status s RUNNING
apps=$("$TESSERA" session apps s --json 2>&1)
names=$(python3 -c 'import json, sys; print(" ".join("%s:%s:%s" % (a["name"], a["protocol"], a.get("port")) for a in json.load(sys.stdin)))' <<<"$apps" 2>&1)
check "its apps are the terminal and those its label declares, no other ($names)" \
	[ "$names" == "terminal:pty:None jupyter:http:8081 stand-in:preopen:5000" ]

# ---- Jupyter ----
open_app s jupyter
check "session app s jupyter prints a setup URL ($URL)" \
	bash -c '[[ "$1" =~ ^http://[^/[:space:]]+/__tessera/setup\?token=[0-9a-f]{64}$ ]]' _ "$URL"
check "its setup redirects ($SETUP) and sets the cookie (${COOKIE%%=*})" bash -c '[ "$1" == 302 ] && [ -n "$2" ]' _ "$SETUP" "$COOKIE"
J_ORIGIN=$ORIGIN J_COOKIE=$COOKIE J_URL=$URL
poll "$J_ORIGIN" /api/status "$J_COOKIE"
check "Jupyter's /api/status answers 200 once it started (seen:$SEEN)" [ $? -eq 0 ]
check "with Jupyter's status" grep -q '"started"' "$E2E_DIR/body"
check "before that, only 503 starting pages, never 502 (seen:$SEEN)" bash -c '[[ "${1// 200/}" =~ ^( 503)?$ ]]' _ "$SEEN"

out=$(PYTHONPATH=$HERE timeout 180 python3 - "$J_ORIGIN" "$J_COOKIE" <<'PY' 2>&1
# A kernel through the proxy: POST /api/kernels (with Jupyter's XSRF
# token, which it checks on POSTs made with cookies), its channels'
# WebSocket, an execute_request (messaging protocol 5.3) and its stream.
import datetime, http.client, json, re, sys, time, uuid
from wsclient import AppConn

origin, cookie = sys.argv[1], sys.argv[2]
host, port = origin[len("http://"):].rsplit(":", 1)
port = int(port)


def req(method, path, body=None, headers=None):
    c = http.client.HTTPConnection(host, port, timeout=60)
    h = {"Cookie": cookie}
    h.update(headers or {})
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, r.headers, data


st, hdrs, _ = req("GET", "/tree")
xsrf = ""
for v in hdrs.get_all("Set-Cookie") or []:
    m = re.match(r"_xsrf=([^;]+)", v)
    if m:
        xsrf = m.group(1)
print("TREE %d xsrf=%s" % (st, "yes" if xsrf else "no"))
st, _, body = req("POST", "/api/kernels", b"{}", {
    "Content-Type": "application/json", "X-XSRFToken": xsrf, "Cookie": "%s; _xsrf=%s" % (cookie, xsrf)})
print("KERNELS %d" % st)
kid = json.loads(body)["id"]
c = AppConn(host, port, line=False, timeout=120)
print("WS %d" % c.ws_connect("/api/kernels/%s/channels" % kid, ["Cookie: " + cookie]))
msg_id = uuid.uuid4().hex
c.send_text(json.dumps({
    "header": {"msg_id": msg_id, "username": "e2e", "session": uuid.uuid4().hex,
               "msg_type": "execute_request", "version": "5.3",
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat()},
    "parent_header": {}, "metadata": {},
    "content": {"code": "print(6*7)", "silent": False, "store_history": True,
                "user_expressions": {}, "allow_stdin": False},
    "channel": "shell"}))
deadline = time.monotonic() + 120
while True:
    op, payload = c.read_frame(deadline)
    if op != 1:
        continue
    m = json.loads(payload)
    if (m.get("channel") == "iopub" and m["header"]["msg_type"] == "stream"
            and m["parent_header"].get("msg_id") == msg_id):
        print("STREAM %s" % m["content"]["text"].strip())
        break
PY
)
flat=$(tr '\n' '|' <<<"$out" | tail -c 400)
check "Jupyter's tree page sets its XSRF cookie through the proxy ($flat)" contains "$out" "TREE 200 xsrf=yes"
check "POST /api/kernels makes a kernel" contains "$out" "KERNELS 201"
check "the kernel's channels upgrade to a WebSocket through the proxy" contains "$out" "WS 101"
check "execute_request print(6*7) streams 42 on iopub" has_line "$out" "STREAM 42"

# ---- the terminal, left open until the session is removed ----
open_app s terminal
check "the terminal's setup sets its cookie ($SETUP)" bash -c '[ "$1" == 302 ] && [ -n "$2" ]' _ "$SETUP" "$COOKIE"
mkfifo "$E2E_DIR/term.in"
# Types each line written to term.in into the shell; writes the output to
# term.out and the upgrade's status and the close to term.status.
PYTHONPATH=$HERE python3 - "$ORIGIN" "$COOKIE" "$E2E_DIR" <<'PY' >/dev/null 2>"$E2E_DIR/term.err" &
import sys, threading, time
from wsclient import AppConn, Closed, Timeout

origin, cookie, d = sys.argv[1:4]
host, port = origin[len("http://"):].rsplit(":", 1)
status = open(d + "/term.status", "a", buffering=1)
out = open(d + "/term.out", "ab", buffering=0)
c = AppConn(host, int(port), line=False, timeout=60)
st = c.ws_connect("/ws?term=main&cols=200&rows=50", ["Cookie: " + cookie, "Origin: " + origin])
status.write("WS %d\n" % st)
if st != 101:
    sys.exit(1)


def typing():
    for line in open(d + "/term.in"):
        c.send_text(line)


threading.Thread(target=typing, daemon=True).start()
deadline = time.monotonic() + 1200
try:
    while not c.close_info:
        op, payload = c.read_frame(deadline)
        if op in (0x1, 0x2):
            out.write(payload)
except (Closed, Timeout):
    pass
status.write("CLOSE %d %s\n" % (c.close_info or (1006, "")))
PY
TERM_PID=$!
E2E_PIDS+=("$TERM_PID")
# Read and write: opening never waits for the reader.
exec 4<>"$E2E_DIR/term.in"
# wait_term REGEX: up to 2 minutes for REGEX in the terminal's output.
wait_term() {
	for _ in $(seq 1 1200); do
		tr -d '\r' <"$E2E_DIR/term.out" 2>/dev/null | grep -qE "$1" && return 0
		kill -0 "$TERM_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
echo 'echo term-$((6*7))' >&4
check "the terminal upgrades through the proxy and runs what is typed" wait_term 'term-42'

# ---- a preopen app: nothing listens, then a server started in the terminal ----
open_app s stand-in
check "session app s stand-in: its setup sets the cookie ($SETUP)" bash -c '[ "$1" == 302 ] && [ -n "$2" ]' _ "$SETUP" "$COOKIE"
c=$(code "$ORIGIN" / "$COOKIE")
check "before its server runs: 503 ($c)" [ "$c" == 503 ]
check "with a page saying nothing listens on port 5000 yet" grep -q "nothing listens on port 5000 yet" "$E2E_DIR/body"
echo 'python3 -m http.server 5000 >/dev/null 2>&1 &' >&4
poll "$ORIGIN" / "$COOKIE"
check "once python3 -m http.server 5000 runs: 200 (seen:$SEEN)" [ $? -eq 0 ]
check "with its directory listing" grep -q "Directory listing for /" "$E2E_DIR/body"
check "meanwhile only 503 pages, never 502 (seen:$SEEN)" bash -c '[[ "${1// 200/}" =~ ^( 503)?$ ]]' _ "$SEEN"

# ---- a port by number ----
open_app s --port 8888
check "session app s --port 8888: its setup sets the cookie ($SETUP)" bash -c '[ "$1" == 302 ] && [ -n "$2" ]' _ "$SETUP" "$COOKIE"
P_ORIGIN=$ORIGIN P_COOKIE=$COOKIE
c=$(code "$P_ORIGIN" / "$P_COOKIE")
check "before a server listens on 8888: 503 ($c)" [ "$c" == 503 ]
check "saying nothing listens on port 8888 yet" grep -q "nothing listens on port 8888 yet" "$E2E_DIR/body"
echo 'mkdir -p /tmp/p8888 && echo port-8888-page >/tmp/p8888/hello.txt && (cd /tmp/p8888 && python3 -m http.server 8888 >/dev/null 2>&1 &)' >&4
poll "$P_ORIGIN" /hello.txt "$P_COOKIE"
check "once a server listens on 8888: 200 (seen:$SEEN)" [ $? -eq 0 ]
check "and its file is served" grep -q port-8888-page "$E2E_DIR/body"

# Which way a port app is reached (docs/apps.md, "The direct path"): one
# that listens on all the container's addresses straight at its port,
# from the node (its address on the user's bridge, in the app's log); one
# on the container's loopback only through the runner (127.0.0.1 there).
echo 'mkdir -p /tmp/pw && echo wide-page >/tmp/pw/w.txt && (cd /tmp/pw && python3 -m http.server 8890 --bind 0.0.0.0 >/tmp/pw/log 2>&1 &)' >&4
echo 'mkdir -p /tmp/pl && echo loop-page >/tmp/pl/l.txt && (cd /tmp/pl && python3 -m http.server 8891 --bind 127.0.0.1 >/tmp/pl/log 2>&1 &)' >&4
open_app s --port 8890
poll "$ORIGIN" /w.txt "$COOKIE"
check "an app on all the container's addresses is served (seen:$SEEN)" grep -q wide-page "$E2E_DIR/body"
for _ in 1 2 3 4 5 6; do code "$ORIGIN" /w.txt "$COOKIE" >/dev/null; done   # past the refusals' 5 s
sleep 5; code "$ORIGIN" /w.txt "$COOKIE" >/dev/null
wide_log=$("$TESSERA" session exec s -- cat /tmp/pw/log 2>&1)
last_from() { grep "GET /$1 " <<<"$2" | tail -n 1 | cut -d' ' -f1; }
direct_from=$(last_from w.txt "$wide_log")
check "it was reached at its own port from the node, no runner between ($direct_from)" \
	bash -c '[[ -n $1 && $1 != 127.0.0.1 ]]' _ "$direct_from"
open_app s --port 8891
poll "$ORIGIN" /l.txt "$COOKIE"
check "an app on the container's loopback only is served too (seen:$SEEN)" grep -q loop-page "$E2E_DIR/body"
loop_from=$(last_from l.txt "$("$TESSERA" session exec s -- cat /tmp/pl/log 2>&1)")
check "through the runner ($loop_from)" [ "$loop_from" == 127.0.0.1 ]

# ---- refusals ----
c=$(code "$J_ORIGIN" /api/status)
check "no cookie: 403 ($c)" [ "$c" == 403 ]
check "with a page saying how to open the app" grep -q "session list" "$E2E_DIR/body"
c=$(curl -s -o "$E2E_DIR/body" -w '%{http_code}' "$J_URL")
check "the setup URL used twice: 403 ($c)" [ "$c" == 403 ]

bob=$(PYTHONPATH=$HERE python3 - "$TESSERA_CONFIG" <<'PY'
import sys
from signed import Api, load_conf
c = load_conf(sys.argv[1])
st, r = Api(c["endpoint"], c["access_key"], c["secret_key"]).call(
    "POST", "/v1/users", {"email": "bob@apps.test", "password": "bob password 1"})
assert st == 201, st
print("endpoint = %s\naccess_key = %s\nsecret_key = %s" % (c["endpoint"], r["user"]["access_key"], r["secret_key"]))
PY
)
BOB_CONF=$E2E_DIR/bob.conf
printf '%s\n' "$bob" >"$BOB_CONF"
check "a second user is made" grep -q '^access_key = ' "$BOB_CONF"
sid=$(jget s id)
out=$(PYTHONPATH=$HERE python3 - "$BOB_CONF" "$sid" <<'PY' 2>&1
# Bob's answers for S's apps, by name and by id, and for a missing
# session: the same 404, S only named back.
import sys
from signed import Api, load_conf
c = load_conf(sys.argv[1])
api = Api(c["endpoint"], c["access_key"], c["secret_key"])
for ref in ("s", sys.argv[2], "no-such-session"):
    for method, path in (("GET", "/v1/sessions/%s/apps"), ("POST", "/v1/sessions/%s/apps/jupyter"),
                         ("POST", "/v1/sessions/%s/apps/terminal"), ("POST", "/v1/sessions/%s/apps/8888")):
        st, r = api.call(method, path % ref, {} if method == "POST" else None)
        e = (r or {}).get("error", {})
        print("%s %s %d %s %s" % (method, path % "REF", st, e.get("code"), e.get("message", "").replace("'%s'" % ref, "'REF'")))
PY
)
n_s=$(sed -n 1,4p <<<"$out")
n_id=$(sed -n 5,8p <<<"$out")
n_none=$(sed -n 9,12p <<<"$out")
check "another user: 404 for S's apps ($(tr '\n' '|' <<<"$n_s"))" \
	bash -c '[ "$(grep -c " 404 " <<<"$1")" -eq 4 ]' _ "$n_s"
check "the same answers as for a missing session ($(tr '\n' '|' <<<"$n_none"))" [ "$n_s" == "$n_none" ]
check "and by S's id" [ "$n_id" == "$n_none" ]
err=$(TESSERA_CONFIG=$BOB_CONF "$TESSERA" session app s jupyter 2>&1)
check "bob's session app s jupyter: no session, no URL ($err)" bash -c '[[ "$1" == *"no session"* && "$1" != *http://* ]]' _ "$err"

TESSERA_CONFIG=$BOB_CONF "$TESSERA" session create "$TEST_IMAGE" --name bs --cpu 0.5 --mem 64m --wait >/dev/null 2>&1
check "bob's own session runs" bash -c '[ "$(TESSERA_CONFIG=$1 "$2" session info bs --json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"status\"])")" == RUNNING ]' _ "$BOB_CONF" "$TESSERA"
TESSERA_CONFIG=$BOB_CONF open_app bs terminal
check "bob opens his terminal ($SETUP, ${COOKIE%%=*})" bash -c '[ "$1" == 302 ] && [ -n "$2" ]' _ "$SETUP" "$COOKIE"
check "on another port than S's Jupyter ($ORIGIN)" [ "$ORIGIN" != "$J_ORIGIN" ]
c=$(code "$ORIGIN" / "$COOKIE")
check "bob's cookie opens his own terminal ($c)" [ "$c" == 200 ]
c=$(code "$J_ORIGIN" /api/status "$COOKIE")
check "bob's cookie on S's Jupyter port: 403 ($c)" [ "$c" == 403 ]
jname=${J_COOKIE%%=*}
c=$(code "$J_ORIGIN" /api/status "$jname=${COOKIE#*=}")
check "under the name of S's cookie too: 403 ($c)" [ "$c" == 403 ]
check "as another app's access" grep -q "another app" "$E2E_DIR/body"
c=$(code "$J_ORIGIN" /api/status "$J_COOKIE")
check "S's own cookie still passes ($c)" [ "$c" == 200 ]

# ---- the session removed ----
check "the terminal is still open" bash -c '! grep -q CLOSE "$1"' _ "$E2E_DIR/term.status"
"$TESSERA" session rm s >/dev/null
for _ in $(seq 1 1200); do grep -q CLOSE "$E2E_DIR/term.status" && break; sleep 0.1; done
check "removing the session closes the terminal's WebSocket ($(grep CLOSE "$E2E_DIR/term.status"))" \
	grep -q CLOSE "$E2E_DIR/term.status"
c=""
for _ in $(seq 1 300); do
	c=$(code "$J_ORIGIN" /api/status "$J_COOKIE")
	[[ $c == 403 ]] && break
	sleep 0.1
done
check "Jupyter's port answers 403 to S's cookie ($c)" [ "$c" == 403 ]
check "saying the session ended" grep -q "Session ended" "$E2E_DIR/body"
c=$(code "$P_ORIGIN" /hello.txt "$P_COOKIE")
check "so does port 8888's ($c)" [ "$c" == 403 ]
exec 4>&-
wait "$TERM_PID" 2>/dev/null

TESSERA_CONFIG=$BOB_CONF "$TESSERA" session rm bs >/dev/null

# ---- the recipes' MLflow UI app: their service definition, as written ----
# images/python-pytorch's run step writes it (images/python-tensorflow's
# is the same line); MLflow itself is not here (no index), so a stand-in
# `mlflow` on PATH serves a page saying how it was started. What is
# checked is the definition: valid JSON the runner takes, its command,
# the variable it sets, and the address it binds being one the runner
# reaches.
RECIPE=$HERE/../../images/python-pytorch/3.13-torch2.6-cuda12.4.recipe
def=$(sed -n "s|^ *printf '%s\\\\n' '\(.*\)' >/etc/backend.ai/service-defs/mlflow-ui.json\$|\1|p" "$RECIPE")
check "the recipe's mlflow-ui service definition is JSON with a command ($def)" \
	python3 -c 'import json, sys; d = json.loads(sys.argv[1]); assert d["command"][:2] == ["mlflow", "ui"]' "$def"
ctx=$E2E_DIR/mlflow-image
mkdir -p "$ctx"
printf '%s\n' "$def" >"$ctx/mlflow-ui.json"
cat >"$ctx/mlflow" <<'STANDIN'
#!/usr/bin/env python3
# The test's stand-in for `mlflow ui --host H --port P`.
import http.server, os, sys
a = sys.argv[1:]
host, port = a[a.index("--host") + 1], int(a[a.index("--port") + 1])
body = ("stand-in mlflow %s on %s:%d middleware-off=%s cwd=%s" % (
    a[0], host, port, os.environ.get("MLFLOW_SERVER_DISABLE_SECURITY_MIDDLEWARE"), os.getcwd())).encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer((host, port), H).serve_forever()
STANDIN
chmod 755 "$ctx/mlflow"
printf 'FROM %s\nCOPY mlflow /usr/local/bin/mlflow\nCOPY mlflow-ui.json /etc/backend.ai/service-defs/mlflow-ui.json\nLABEL ai.backend.service-ports="jupyter:http:8081,mlflow-ui:http:5000"\n' \
	"$PY_IMAGE" >"$ctx/Dockerfile"
MLFLOW_IMAGE=tessera-e2e-apps/${R//./-}:mlflow
E2E_IMAGES+=("$MLFLOW_IMAGE")
docker build -q -t "$MLFLOW_IMAGE" "$ctx" >/dev/null 2>&1
check "$MLFLOW_IMAGE: the definition and a stand-in mlflow over $PY_IMAGE" docker image inspect -f . "$MLFLOW_IMAGE"
"$TESSERA" session create "$MLFLOW_IMAGE" --name m --cpu 1 --mem 1g --wait >/dev/null 2>&1
check "a $MLFLOW_IMAGE session runs" wait_status m RUNNING
open_app m mlflow-ui
check "session app m mlflow-ui: its setup sets the cookie ($SETUP)" bash -c '[ "$1" == 302 ] && [ -n "$2" ]' _ "$SETUP" "$COOKIE"
poll "$ORIGIN" / "$COOKIE"
check "the runner starts it from the definition on first use: 200 (seen:$SEEN)" [ $? -eq 0 ]
check "as mlflow ui on 127.0.0.1:5000, MLflow's middleware off, in /home/work ($(cat "$E2E_DIR/body"))" \
	grep -qx "stand-in mlflow ui on 127.0.0.1:5000 middleware-off=true cwd=/home/work" "$E2E_DIR/body"
"$TESSERA" session rm m >/dev/null
e2e_done
