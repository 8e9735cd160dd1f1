#!/usr/bin/env bash
# The malformed-request corpus against a live server: every seed of the
# create_body fuzz target (tests/fuzz/seeds/create_body: bad JSON, wrong
# types, huge numbers, invalid UTF-8, duplicate keys, deep nesting...) as
# the body of a correctly signed POST /v1/sessions, then path tricks and bad
# signatures. Each must get a 4xx with a JSON error body ({"error":
# {"code", "message"}}), and the server must keep serving. Requests are
# signed here as docs/api.md ("Authentication") says.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server || { e2e_done; exit 1; }
seeds=$(dirname "$0")/../fuzz/seeds/create_body

out=$(PYTHONPATH=$(dirname "$0") python3 - "$TESSERA_CONFIG" "$seeds" <<'PY'
import json, os, sys
from signed import Api, load_conf

conf = load_conf(sys.argv[1])
seeds = sys.argv[2]
api = Api(conf["endpoint"], conf["access_key"], conf["secret_key"])
sign, send = api.sign, api.send

def expect_4xx(what, method, path, body=b"", **kw):
    try:
        headers = kw.pop("headers", None) or sign(method, path, body, **kw)
        st, ct, data = send(method, path, body, headers)
        e = json.loads(data)["error"]
        good = 400 <= st < 500 and ct.startswith("application/json") and e["code"] and e["message"]
        print("%s %s: %d %s" % ("ok  " if good else "FAIL", what, st, e["message"][:100]))
    except Exception as ex:
        print("FAIL %s: %r" % (what, ex))

for name in sorted(os.listdir(seeds)):
    body = open(os.path.join(seeds, name), "rb").read()
    expect_4xx("seed create_body/%s" % name, "POST", "/v1/sessions", body)

# Path tricks (signed: the signature covers the path exactly as sent).
for path in ["/v1/sessions/..%2f..%2fetc%2fpasswd", "/v1/sessions/%2e%2e", "/v1/sessions/..",
             "/v1/sessions/%00", "/v1/sessions/a%2Fb", "/v1//sessions/x", "/v1/sessions/x/../../users",
             "/v1/sessions/" + "a" * 4000, "/v1/sessions/%", "/v1/sessions/%zz", "/v1/../v1/users",
             "/v1/config/..%2fadmin", "/v1/users/%2e%2e%2f", "/v1/sessions/x/exec/../logs",
             "/v1/sessions/no-such/logs", "/v1/sessions/no-such/exec", "/v1/sessions/%ff",
             "/v1/sessions/%c3%28/logs", "/v1/sessions/x?owner=%ff", "/v1/sessions/x?owner=not-an-email"]:
    method = "POST" if path.endswith("/exec") else "GET"
    expect_4xx("path %s %s" % (method, path[:60]), method, path, b'{"command":["true"]}' if method == "POST" else b"")
expect_4xx("DELETE of a path trick", "DELETE", "/v1/sessions/..%2f..")
expect_4xx("a policy key that is no email", "PUT", "/v1/config/policy.%ff", b'{"value":{"max_sessions":1}}')
expect_4xx("a PATCH of a user named in bad UTF-8", "PATCH", "/v1/users/%ff%fe", b'{"disabled":true}')

# Bad signatures.
expect_4xx("signed with another secret", "GET", "/v1/sessions", secret="not-the-secret")
expect_4xx("unknown access key", "GET", "/v1/sessions", key="AKNOSUCHKEY0000000000")
expect_4xx("date an hour late", "GET", "/v1/sessions", shift=3600)
expect_4xx("date a day early", "GET", "/v1/sessions", shift=-86400)
expect_4xx("body differs from the one signed", "POST", "/v1/sessions", b'{"image":"busybox"}',
           signed_body=b'{"image":"alpine"}')
expect_4xx("signature of another path", "GET", "/v1/sessions",
           headers=sign("GET", "/v1/whoami", b""))
good = sign("GET", "/v1/sessions", b"")
for what, auth in [("no Authorization", None), ("garbage Authorization", "garbage"),
                   ("no Signature", "TESSERA-HMAC-SHA256 Credential=%s" % conf["access_key"]),
                   ("short signature", "TESSERA-HMAC-SHA256 Credential=%s, Signature=abc" % conf["access_key"]),
                   ("other scheme", good["Authorization"].replace("TESSERA-HMAC-SHA256", "AWS4-HMAC-SHA256")),
                   ("huge credential", "TESSERA-HMAC-SHA256 Credential=%s, Signature=%s" % ("A" * 5000, "0" * 64))]:
    h = dict(good)
    if auth is None:
        del h["Authorization"]
    else:
        h["Authorization"] = auth
    expect_4xx(what, "GET", "/v1/sessions", headers=h)
h = dict(good); h["Date"] = "Mon, 32 Foo 2024 99:99:99 GMT"
expect_4xx("malformed Date", "GET", "/v1/sessions", headers=h)
h = dict(good); del h["Date"]
expect_4xx("no Date", "GET", "/v1/sessions", headers=h)

st, _, _ = send("GET", "/v1/sessions", b"", sign("GET", "/v1/sessions", b""))
print("%s the server still serves a good request: %d" % ("ok  " if st == 200 else "FAIL", st))
PY
)
while IFS= read -r line; do
	case $line in
	"ok   "*) ok "${line#ok   }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	*) echo "$line" ;;
	esac
done <<<"$out"
check "the replay ran to its end" contains "$out" "still serves a good request"
check "the server process is alive" kill -0 "$SERVER_PID"
check "no container was made" [ -z "$(docker ps -aq --filter "label=tessera.agent=$E2E_AGENT_ID")" ]
e2e_done
