#!/usr/bin/env bash
# The cross-user matrix: user B tries every route that names one of user
# A's objects (session by id and by name: get, wait, delete, logs, exec;
# A's account: the admin-only user and config routes; A's API key) and must get exactly
# the answer a missing object gets (same status, code and message, the
# reference aside), so B cannot even learn that A's objects exist. B's list
# and event stream do not show A's session, and afterwards A's session is
# untouched; B's view of the settings has no policy of A's. A route that
# names a user's object is added to ROUTES or USER_ROUTES below (or to
# the commit and image checks). Nor do folders and settings leak names
# (issue 27): B's share of a folder with A's email and with an email
# without an account get one answer; a folder's owner reads another user's
# sessions that mount it as a number, not their names; a user who is not
# an admin reads only the settings the web UI needs, no storage paths.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server || { e2e_done; exit 1; }

out=$(PYTHONPATH=$(dirname "$0") python3 - "$TESSERA_CONFIG" "$TEST_IMAGE" <<'PY'
import json, sys, time
from signed import Api, load_conf

conf = load_conf(sys.argv[1])
image = sys.argv[2]
admin = Api(conf["endpoint"], conf["access_key"], conf["secret_key"])

def say(good, what):
    print("%s %s" % ("ok  " if good else "FAIL", what))

def make_user(email):
    st, r = admin.call("POST", "/v1/users", {"email": email, "password": "pw-" + email})
    say(st == 201, "admin creates %s (%d)" % (email, st))
    return r["user"], Api(conf["endpoint"], r["user"]["access_key"], r["secret_key"])

ua, a = make_user("alice@cross.test")
ub, b = make_user("bob@cross.test")

st, r = a.call("POST", "/v1/sessions", {"image": image, "name": "alice-box",
                                        "resources": {"cpu": 0.1, "mem": "16m"}})
say(st == 201, "A creates a session (%d)" % st)
sess = r["sessions"][0]
status = ""
for _ in range(300):
    st, r = a.call("GET", "/v1/sessions/" + sess["id"])
    status = (r or {}).get("status", "")
    if status == "RUNNING":
        break
    time.sleep(0.1)
say(status == "RUNNING", "A's session runs (%s)" % status)

# Every route that names a session, with {ref} for the reference.
ROUTES = [
    ("GET", "/v1/sessions/{ref}", None),
    ("GET", "/v1/sessions/{ref}?wait=1&timeout_s=1", None),
    ("GET", "/v1/sessions/{ref}/logs", None),
    ("GET", "/v1/sessions/{ref}/logs?tail=5", None),
    ("POST", "/v1/sessions/{ref}/exec", {"command": ["echo", "hello"]}),
    ("POST", "/v1/sessions/{ref}/commit", {"tag": "by-b"}),
    ("GET", "/v1/sessions/{ref}/apps", None),
    ("POST", "/v1/sessions/{ref}/apps/terminal", None),
    ("POST", "/v1/sessions/{ref}/apps/8888", None),
    ("DELETE", "/v1/sessions/{ref}", None),
]
# Every route that names a user (or a user's setting), with {user}.
USER_ROUTES = [
    ("PATCH", "/v1/users/{user}", {"disabled": True}),
    ("PATCH", "/v1/users/{user}", {"password": "taken-over-1"}),
    ("PATCH", "/v1/users/{user}", {"is_admin": True}),
    ("GET", "/v1/users/{user}", None),
    ("DELETE", "/v1/users/{user}", None),
    ("POST", "/v1/users/{user}/password", {"password": "taken-over-2"}),
    ("POST", "/v1/users/{user}/password", None),
    ("PUT", "/v1/config/policy.{user}", {"value": {"max_sessions": 0}}),
    ("PUT", "/v1/config", {"settings": {"policy.{user}": {"max_sessions": 0}}}),
]

def answer(api, method, path, body):
    st, r = api.call(method, path, body)
    return st, (r or {}).get("error", {}).get("code"), (r or {}).get("error", {}).get("message", "")

def fill(tmpl, subst):
    for k, v in subst.items():
        tmpl = tmpl.replace(k, v)
    return tmpl

def answer_filled(api, method, tmpl, body, subst):
    if body is not None:
        body = json.loads(fill(json.dumps(body), subst))
    return answer(api, method, fill(tmpl, subst), body)

def same_as_missing(routes, cases, missing):
    """cases: (what, {placeholder: value}); missing: the same placeholders
    naming nothing. B's answer on A's objects, with A's values put back to
    the missing ones, must be the answer on the missing ones."""
    for method, tmpl, body in routes:
        want = answer_filled(b, method, tmpl, body, missing)
        for what, subst in cases:
            got = answer_filled(b, method, tmpl, body, subst)
            msg = got[2]
            for k, v in subst.items():
                msg = msg.replace(v, missing[k])
            norm = (got[0], got[1], msg)
            say(norm == want and 400 <= got[0] < 500,
                "B: %s %s on A's %s is answered as a missing one: %d %s" %
                (method, tmpl, what, got[0], got[2][:80]))
            if norm != want:
                print("#   missing: %r\n#   A's:     %r" % (want, got))

same_as_missing(ROUTES, [("session id", {"{ref}": sess["id"]}), ("session name", {"{ref}": sess["name"]})],
                {"{ref}": "no-such-session"})
# With ?owner=: A's name under A's email, and under B's own email.
OWNER_ROUTES = [(m, t + ("&" if "?" in t else "?") + "owner={owner}", body) for m, t, body in ROUTES]
same_as_missing(OWNER_ROUTES, [("session name with owner=A", {"{ref}": sess["name"], "{owner}": ua["email"]})],
                {"{ref}": "no-such-session", "{owner}": "nobody@cross.test"})
same_as_missing(OWNER_ROUTES, [("session name with owner=B", {"{ref}": sess["name"], "{owner}": ub["email"]})],
                {"{ref}": "no-such-session", "{owner}": ub["email"]})
same_as_missing(USER_ROUTES, [("user id", {"{user}": ua["id"]}), ("email", {"{user}": ua["email"]})],
                {"{user}": "nobody@cross.test"})
# A's API key: B may not revoke it, and learns nothing of it.
same_as_missing([("DELETE", "/v1/keypairs/{key}", None)], [("API key", {"{key}": ua["access_key"]})],
                {"{key}": "TKNOSUCHKEY000000000"})
st, r = b.call("GET", "/v1/keypairs")
say(st == 200 and ua["access_key"] not in json.dumps(r), "B's key list does not show A's key")
# Policies are keyed by email: B sees the default and its own, in both
# forms of the settings, never A's.
st, _ = admin.call("PUT", "/v1/config", {"settings": {"policy.%s" % ua["email"]: {"max_sessions": 5},
                                                      "policy.%s" % ub["email"]: {"max_sessions": 6}}})
say(st == 200, "the admin sets A's and B's policies in one PUT /v1/config (%d)" % st)
st, r = b.call("GET", "/v1/config")
say(st == 200 and ua["email"] not in json.dumps(r) and ub["email"] in json.dumps(r),
    "B's GET /v1/config shows B's policy, not A's")
st, r = b.call("GET", "/v1/config?flat=1")
say(st == 200 and ua["email"] not in json.dumps(r) and ("policy.%s" % ub["email"]) in (r or {}),
    "B's GET /v1/config?flat=1 shows B's policy, not A's")
for who in (ua, ub):
    admin.call("PUT", "/v1/config/policy.%s" % who["email"], {"value": None})
# A's private image (a commit of A's session): B cannot see its commit,
# find it in the image list, or pull it; each answered as a missing one.
st, r = a.call("POST", "/v1/sessions/%s/commit" % sess["id"], {"tag": "cross"})
say(st == 202, "A commits the session (%d)" % st)
commit = (r or {}).get("commit", {})
if commit:
    st, r = a.call("GET", "/v1/commits/%s?wait=1&timeout_s=120" % commit["id"], timeout=180)
    commit = (r or {}).get("commit", commit)
    say(commit.get("status") == "ready", "A's commit is ready (%s %s)" % (commit.get("status"), commit.get("error", "")))
    same_as_missing([("GET", "/v1/commits/{commit}", None),
                     ("GET", "/v1/commits/{commit}?wait=1&timeout_s=1", None),
                     ("POST", "/v1/images/pull", {"image": "{image}"}),
                     ("POST", "/v1/sessions", {"image": "{image}", "resources": {"cpu": 0.1, "mem": "16m"}})],
                    [("commit and private image", {"{commit}": commit["id"], "{image}": commit["ref"]})],
                    {"{commit}": "0" * 32, "{image}": "tessera-private/nobody/none:v1"})
    st, r = b.call("GET", "/v1/images")
    say(st == 200 and commit["ref"] not in json.dumps(r) and commit["id"] not in json.dumps(r),
        "B's image list does not show A's private image")
    st, r = a.call("GET", "/v1/images")
    say(st == 200 and commit["name"] in json.dumps(r), "A's image list shows it")
    print("# private image %s" % commit["ref"])
st, _, _ = answer(b, "GET", "/v1/users", None)
say(st == 403, "B may not list users (%d)" % st)

for q in ("", "?all=1"):
    st, r = b.call("GET", "/v1/sessions" + q)
    ids = [s["id"] for s in (r or {}).get("sessions", [])]
    say(st == 200 and sess["id"] not in ids, "B's list%s does not show A's session" % q)

# B's event stream: its first state has no trace of A's session.
c_st, _, _ = None, None, None
import http.client
path = "/v1/events"
c = http.client.HTTPConnection(b.host, int(b.port), timeout=30)
c.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
for k, v in b.sign("GET", path).items():
    c.putheader(k, v)
c.endheaders()
resp = c.getresponse()
data = ""
while resp.status == 200:
    line = resp.fp.readline().decode()
    if not line:
        break
    if line.startswith("data:"):
        data = line
        break
c.close()
say(data and sess["id"] not in data and "alice-box" not in data,
    "B's event stream does not show A's session")

st, r = a.call("GET", "/v1/sessions/" + sess["id"])
say(st == 200 and r["status"] == "RUNNING", "A's session is untouched (%s)" % (r or {}).get("status"))
# The answer is the exec output stream (frames, not JSON): the bytes are in it.
path = "/v1/sessions/%s/exec" % sess["id"]
body = json.dumps({"command": ["echo", "still-mine"]}).encode()
st, _, data = a.send("POST", path, body, a.sign("POST", path, body))
say(st == 200 and b"still-mine" in data, "A still execs in it (%d)" % st)
st, r = admin.call("GET", "/v1/users")
ua_now = [u for u in r["users"] if u["id"] == ua["id"]]
say(ua_now and not ua_now[0]["disabled"], "A's account is untouched")
st, r = a.call("DELETE", "/v1/sessions/" + sess["id"])
say(st == 200, "A removes the session (%d)" % st)

# ---- folders and settings name no other account or session ----
st, _ = b.call("POST", "/v1/folders", {"name": "bshare"})
say(st == 201, "B creates a folder (%d)" % st)

def share_round(email):
    """B shares, reads, unshares and unshares again, with email put out of
    the answers: the same for an account's email and for one of nobody."""
    out = []
    for method, path, body in (("POST", "/v1/folders/bshare/shares", {"email": email, "permission": "ro"}),
                               ("GET", "/v1/folders/bshare", None),
                               ("DELETE", "/v1/folders/bshare/shares/" + email, None),
                               ("DELETE", "/v1/folders/bshare/shares/" + email, None)):
        st, r = b.call(method, path, body)
        out.append((method, st, json.dumps(r, sort_keys=True).replace(email, "EMAIL")))
    return out

known, unknown = share_round(ua["email"]), share_round("nobody@cross.test")
for k, u in zip(known, unknown):
    say(k == u, "B: %s on a share with A's email is answered as with an email of nobody: %d %s" %
        (k[0], k[1], k[2][:100]))
    if k != u:
        print("#   A's:    %r\n#   nobody: %r" % (k, u))

# A mounts B's folder: B reads that a session of another user does, not
# which; A reads its own by name; an admin reads every name.
st, _ = b.call("POST", "/v1/folders/bshare/shares", {"email": ua["email"], "permission": "rw"})
say(st == 200, "B shares the folder with A (%d)" % st)
st, r = a.call("POST", "/v1/sessions", {"image": image, "name": "alice-mounts", "mounts": ["bshare"],
                                        "resources": {"cpu": 0.1, "mem": "16m"}})
say(st == 201, "A starts a session that mounts it (%d)" % st)
msess = (r or {}).get("sessions", [{}])[0]
st, r = b.call("GET", "/v1/folders/bshare")
say(st == 200 and r.get("mounted_by") == [] and r.get("mounted_by_others") == 1 and
    "alice-mounts" not in json.dumps(r),
    "B's folder: mounted by one session of another user, unnamed (%s, %s)" %
    ((r or {}).get("mounted_by"), (r or {}).get("mounted_by_others")))
fid = (r or {}).get("id", "")
st, r = a.call("GET", "/v1/folders/bshare")
say(st == 200 and r.get("mounted_by") == ["alice-mounts"] and r.get("mounted_by_others") == 0,
    "A reads its own session by name (%s)" % (r or {}).get("mounted_by"))
st, r = admin.call("GET", "/v1/folders/" + fid)
say(st == 200 and r.get("mounted_by") == ["alice-mounts"], "an admin reads every name (%s)" % (r or {}).get("mounted_by"))
st, c, msg = answer(b, "DELETE", "/v1/folders/bshare", None)
say(st == 409 and "1 session(s) of other users" in msg and "alice-mounts" not in msg,
    "B's folder rm: refused, counting A's session without its name (%d %s)" % (st, msg))
st, c, msg = answer(b, "DELETE", "/v1/folders/bshare/shares/" + ua["email"], None)
say(st == 409 and "1 session(s) of %s" % ua["email"] in msg and "alice-mounts" not in msg,
    "B's unshare: refused while A's session mounts it, counted (%d %s)" % (st, msg))
st, r = b.call("DELETE", "/v1/folders/bshare/shares/%s?force=1" % ua["email"])
say(st == 200, "B's unshare with force (%d)" % st)
status = ""
for _ in range(300):
    st, r = a.call("GET", "/v1/sessions/" + msess.get("id", "none"))
    status = (r or {}).get("status", "")
    if status in ("TERMINATED", "CANCELLED"):
        break
    time.sleep(0.1)
say(status in ("TERMINATED", "CANCELLED"), "... which ended A's session (%s)" % status)

# Settings: B reads what the UI needs; the admin reads everything.
st, r = admin.call("GET", "/v1/config")
say(st == 200 and "in_force" in r and "storage_hosts" in r, "the admin reads every setting")
data_dir = json.dumps((r or {}).get("in_force", {}).get("storage_hosts", "")).strip('"').split(":", 1)[-1]
# announcement: the banner every logged-in user is shown (docs/admin.md).
allowed = {"fgpu_per_device", "fgpu_quantum", "folder_trash_days", "announcement", "policies"}
st, r = b.call("GET", "/v1/config")
say(st == 200 and set(r) == allowed and data_dir not in json.dumps(r),
    "B's GET /v1/config holds only %s, no storage path (%s)" % (sorted(allowed), sorted(r or {})))
st, r = b.call("GET", "/v1/config?flat=1")
say(st == 200 and set(k for k in r if not k.startswith("policy.")) == allowed - {"policies"} and
    data_dir not in json.dumps(r),
    "B's GET /v1/config?flat=1 too (%s)" % sorted(r or {}))
print("# matrix done")
PY
)
while IFS= read -r line; do
	case $line in
	"ok   "*) ok "${line#ok   }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	*) echo "$line" ;;
	esac
done <<<"$out"
check "the matrix ran to its end" contains "$out" "# matrix done"
private=$(sed -n 's/^# private image //p' <<<"$out")
[[ -n "$private" ]] && E2E_IMAGES+=("$private")   # removed after its sessions (e2e_teardown)
e2e_done
