#!/usr/bin/env bash
# The app-link attack of issue 27, played in Debian's Chromium
# (docs/security.md, "App links and the login cookie"): a user (mallory)
# runs a bare listener in a session (`nc -ll -p 8000`, answering each
# request after printing it to the session's log) and opens port 8000 as
# an app, which gives a one-time link; the admin, logged in to the web UI,
# opens that link. The listener must receive the admin's request without
# any cookie of Tessera's: with the default `tessera server`, apps are
# served on an address of their own (127.0.0.2), so the browser does not
# even send the web UI's login there, and the proxy strips Tessera's
# cookies from whatever reaches it (checked by planting the login cookie
# on the apps' address, as a server that shared one address would have
# it). The webserver refuses logins on the apps' address, and its login
# cookie is HttpOnly and SameSite=Strict. Then the same user is disabled:
# her open terminal ends and her app cookie opens nothing more.
. "$(dirname "$0")/../e2e/lib.sh"
UI_SRC=${UI_SRC:?UI_SRC must point at the ui/ source dir (its node_modules has playwright-core)}
if [[ ! -x /usr/bin/chromium ]]; then
	echo "chromium is not installed (/usr/bin/chromium); run 'make setup'"
	exit 1
fi
e2e_setup
e2e_build_image

start_server || { e2e_done; exit 1; }
web_url=$(sed -n 's/^web_url *= *//p' "$TESSERA_CONFIG")
password=$(sed -n 's/^password *= *//p' "$TESSERA_CONFIG")
web_port=${web_url##*:}
web_port=${web_port%%/*}

# mallory, her listener session, and the link she sends.
out=$(PYTHONPATH=$(dirname "$0")/../e2e python3 - "$TESSERA_CONFIG" "$TEST_IMAGE" "$E2E_DIR/mallory.conf" <<'PY'
import sys, time
from signed import Api, load_conf
conf = load_conf(sys.argv[1])
admin = Api(conf["endpoint"], conf["access_key"], conf["secret_key"])
st, r = admin.call("POST", "/v1/users", {"email": "mallory@cookie.test", "password": "pw-mallory-123"})
print("user %d" % st)
m = Api(conf["endpoint"], r["user"]["access_key"], r["secret_key"])
with open(sys.argv[3], "w") as f:
    f.write("endpoint = %s\naccess_key = %s\nsecret_key = %s\n" % (conf["endpoint"], r["user"]["access_key"], r["secret_key"]))
# Each request printed to the log between markers, answered with a page
# once its head is read (an answer sent before the request would race it:
# the listener's close could reset the connection with the answer unread),
# by a listener that keeps listening (-ll), so no request finds the port
# closed between two.
serve = r"""while read -r line; do
	line=${line%$(printf '\r')}
	echo "$line" >&2
	[ -z "$line" ] && break
done
echo '== end of request' >&2
printf 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 9\r\nConnection: close\r\n\r\nlistened\n'
"""
listen = "cat >/tmp/serve.sh <<'EOF'\n" + serve + "EOF\nexec nc -ll -p 8000 -e sh /tmp/serve.sh"
st, r = m.call("POST", "/v1/sessions", {"image": sys.argv[2], "name": "trap",
                                        "resources": {"cpu": 0.2, "mem": "32m"}, "startup_command": listen})
print("session %d" % st)
for _ in range(300):
    st, r = m.call("GET", "/v1/sessions/trap")
    if r.get("status") == "RUNNING":
        break
    time.sleep(0.1)
print("status %s" % r.get("status"))
PY
)
check "mallory is made ($out)" contains "$out" "user 201"
check "her listener session runs ($out)" contains "$out" "status RUNNING"
link=$(TESSERA_CONFIG=$E2E_DIR/mallory.conf "$TESSERA" session app trap --port 8000 2>&1)
check "mallory gets a link to port 8000 ($link)" contains "$link" "/__tessera/setup?token="
check "the link is on the apps' own address, not the web UI's ($link vs $web_url)" \
	bash -c '[[ $1 == http://127.0.0.2:* && $2 == http://127.0.0.1:* ]]' _ "$link" "$web_url"

# The webserver refuses a login on the apps' address (a browser would
# keep the cookie for that host and send it to every app).
code=$(curl -s -o "$E2E_DIR/misdirected.json" -w '%{http_code}' -H "Host: 127.0.0.2:$web_port" \
	-H 'Content-Type: application/json' -d "{\"email\":\"admin@tessera.local\",\"password\":\"$password\"}" \
	"${web_url%/}/auth/login")
check "a login on the apps' address is refused with 421 ($code: $(cat "$E2E_DIR/misdirected.json"))" \
	bash -c '[[ $1 == 421 ]] && grep -q "where session apps are served" "$2"' _ "$code" "$E2E_DIR/misdirected.json"

WEB_URL=$web_url APP_LINK=$link ADMIN_EMAIL=admin@tessera.local ADMIN_PASSWORD=$password \
	PROFILE_DIR=$E2E_DIR/chromium UI_SRC=$UI_SRC \
	node "$(dirname "$0")/app_cookie.test.mjs" 2>&1 | tee "$E2E_DIR/browser.log"
while read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	esac
done < "$E2E_DIR/browser.log"
check "the browser test ran to its end" grep -q '^# done' "$E2E_DIR/browser.log"

# What the listener received: the requests the browser sent it.
TESSERA_CONFIG=$E2E_DIR/mallory.conf "$TESSERA" session logs trap >"$E2E_DIR/trap.log" 2>&1
login=$(sed -n 's/^# login cookie: //p' "$E2E_DIR/browser.log")
check "the listener received the admin's requests" grep -q '^GET / HTTP/1.1' "$E2E_DIR/trap.log"
check "one of them carried the planted cookies the proxy let through (theme=dark)" grep -q 'theme=dark' "$E2E_DIR/trap.log"
check "the browser had a login cookie to leak" [ -n "$login" ]
check "no request reached the listener with the admin's login" not grep -qF -- "${login:-none}" "$E2E_DIR/trap.log"
check "no cookie of Tessera's reached the listener" not grep -qiE 'tessera_(session|app)' "$E2E_DIR/trap.log"
if grep -qiE 'tessera_(session|app)' "$E2E_DIR/trap.log"; then sed -n '1,40p' "$E2E_DIR/trap.log"; fi

# A disabled account keeps no app: mallory's open terminal ends when an
# admin disables her, and her app cookie (good for 12 hours) opens nothing.
tlink=$(TESSERA_CONFIG=$E2E_DIR/mallory.conf "$TESSERA" session app trap terminal 2>&1)
out=$(PYTHONPATH=$(dirname "$0")/../e2e python3 - "$TESSERA_CONFIG" "$tlink" <<'PY'
import http.client, sys, time, urllib.parse
from signed import Api, load_conf
from wsclient import AppConn, Closed, Timeout
conf = load_conf(sys.argv[1])
admin = Api(conf["endpoint"], conf["access_key"], conf["secret_key"])
u = urllib.parse.urlsplit(sys.argv[2])
origin = "%s://%s" % (u.scheme, u.netloc)
c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
c.request("GET", u.path + "?" + u.query)
r = c.getresponse()
cookie = (r.getheader("Set-Cookie") or "").split(";")[0]
print("redeemed %d %s" % (r.status, cookie.split("=")[0]))
ws = AppConn(u.hostname, u.port, line=False, timeout=30)
st = ws.ws_connect("/ws?term=main&cols=80&rows=24", ["Cookie: " + cookie, "Origin: " + origin])
print("terminal %d" % st)
ws.send_text("echo still-$((6*7))\n")
ws.read_until(r"still-42")
print("typed")
st, _ = admin.call("PATCH", "/v1/users/mallory@cookie.test", {"disabled": True})
print("disabled %d" % st)
closed = False
deadline = time.monotonic() + 30
try:
    while time.monotonic() < deadline and not ws.close_info:
        ws.read_frame(deadline)
    closed = ws.close_info is not None
except Closed:
    closed = True
except Timeout:
    pass
print("terminal closed" if closed else "terminal still open")
st, _, body = AppConn(u.hostname, u.port, line=False, timeout=30).http_get("/", ["Cookie: " + cookie])
print("again %d %s" % (st, "disabled" in body.decode("utf-8", "replace")))
PY
)
check "mallory opens her terminal with a cookie ($out)" contains "$out" "terminal 101"
check "the admin disables her ($out)" contains "$out" "disabled 200"
check "her open terminal is closed ($out)" contains "$out" "terminal closed"
check "her cookie opens nothing after, saying why ($out)" contains "$out" "again 403 True"
e2e_done
