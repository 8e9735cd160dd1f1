"""docs/openapi.yaml against a live manager (tests/e2e/test_openapi_live.sh).

Calls nearly every route of a manager with an agent, as an admin, a user,
an agent and the app proxy, and holds each answer to the document: its
status must be one the operation lists (a 2xx by its code; an error may
fall under `default`), its Content-Type one of that response's media
types, and a JSON body must validate against the response's schema, in
which an object that lists its properties has no others (a field the
server sends that the document does not name fails: the document would
be out of date). Prints one "ok"/"FAIL" line per call and the operations
it did not call.

Usage: openapi_live.py SPEC ADMIN_CONF CLUSTER_SECRET AGENT_ID IMAGE
IMAGE declares the sshd app (its apps' `ssh` object is then answered).
"""
import copy
import hashlib
import http.client
import base64
import json
import re
import struct
import sys
import urllib.parse

import jsonschema
import yaml

from signed import Api, load_conf

spec_path, conf_path, cluster_secret, agent_id, image = sys.argv[1:6]
with open(spec_path, encoding="utf-8") as f:
    SPEC = yaml.safe_load(f)
METHODS = ("get", "put", "post", "delete", "patch")
FAILS = 0
DONE = set()


def say(good, what):
    global FAILS
    FAILS += 0 if good else 1
    print("%s %s" % ("ok  " if good else "FAIL", what))
    sys.stdout.flush()


def resolve(ref):
    node = SPEC
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def deref(node):
    while isinstance(node, dict) and "$ref" in node:
        node = resolve(node["$ref"])
    return node


def to_jsonschema(s):
    """An OpenAPI 3.0 schema as JSON Schema draft 4, strict: an object
    schema that lists properties allows no others unless it says so."""
    s = copy.deepcopy(deref(s))
    if not isinstance(s, dict):
        return s
    nullable = s.pop("nullable", False)
    for k in ("example", "description", "format", "readOnly", "writeOnly", "deprecated"):
        s.pop(k, None)
    if "allOf" in s:
        # One object of the parts' properties together (strictness per
        # part would refuse the other parts' fields).
        merged = {"properties": {}, "required": []}
        for part in s.pop("allOf"):
            p = to_jsonschema(part)
            if "anyOf" in p and len(p["anyOf"]) == 2 and {"type": "null"} in p["anyOf"]:
                p = [x for x in p["anyOf"] if x != {"type": "null"}][0]
            merged["properties"].update(p.get("properties", {}))
            merged["required"] += p.get("required", [])
            for k, v in p.items():
                if k not in ("properties", "required"):
                    merged.setdefault(k, v)
        if not merged["required"]:
            del merged["required"]
        merged.update({k: v for k, v in s.items() if k not in ("properties", "required")})
        merged["properties"].update({k: to_jsonschema(v) for k, v in s.get("properties", {}).items()})
        s = merged
    else:
        if "properties" in s:
            s["properties"] = {k: to_jsonschema(v) for k, v in s["properties"].items()}
    if "properties" in s and "additionalProperties" not in s:
        s["additionalProperties"] = False
    if isinstance(s.get("additionalProperties"), dict):
        s["additionalProperties"] = to_jsonschema(s["additionalProperties"])
    if "items" in s:
        s["items"] = to_jsonschema(s["items"])
    for k in ("oneOf", "anyOf"):
        if k in s:
            s[k] = [to_jsonschema(x) for x in s[k]]
    if nullable:
        return {"anyOf": [s, {"type": "null"}]}
    return s


def find_op(method, path):
    """The operation whose template matches path, literal segments first."""
    best = None
    for tmpl, item in SPEC["paths"].items():
        if method.lower() not in item:
            continue
        rx = "^" + re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(tmpl)) + "$"
        if re.match(rx, path):
            literal = len([p for p in tmpl.split("/") if p and not p.startswith("{")])
            if best is None or literal > best[0]:
                best = (literal, tmpl, item[method.lower()])
    return (best[1], best[2]) if best else (None, None)


def media(ct):
    return ct.split(";")[0].strip().lower()


def conform(method, target, status, ctype, data, what):
    """Holds one answer to the document; returns the parsed JSON or None."""
    path = urllib.parse.urlsplit(target).path
    tmpl, op = find_op(method, path)
    label = "%s %s -> %d: %s" % (method, target, status, what)
    if not op:
        say(False, "%s: no operation of the document matches" % label)
        return None
    DONE.add((method, tmpl))
    responses = op["responses"]
    resp = responses.get(str(status))
    if resp is None and status >= 400:
        resp = responses.get("default")
    if resp is None:
        say(False, "%s: status %d is not one the document lists (%s)" % (label, status, ", ".join(responses)))
        return None
    resp = deref(resp)
    content = resp.get("content") or {}
    if not content:
        say(not data, "%s: no body, as documented" % label)
        return None
    types = {media(k): v for k, v in content.items()}
    if media(ctype) not in types:
        say(False, "%s: Content-Type %s is not one the document lists (%s)" % (label, ctype, ", ".join(content)))
        return None
    if media(ctype) != "application/json":
        say(True, "%s: %s, as documented" % (label, media(ctype)))
        return None
    try:
        body = json.loads(data)
    except ValueError as e:
        say(False, "%s: not JSON (%s)" % (label, e))
        return None
    schema = to_jsonschema(types[media(ctype)].get("schema", {}))
    errors = sorted(jsonschema.Draft4Validator(schema).iter_errors(body), key=lambda e: list(e.path))
    msgs = ["at %s: %s" % ("/".join(str(p) for p in e.path) or "(top)", e.message[:200]) for e in errors[:5]]
    say(not errors, "%s: the body matches the document%s" % (label, "".join("\n     " + m for m in msgs)))
    return body


conf = load_conf(conf_path)
ep = conf["endpoint"]
admin = Api(ep, conf["access_key"], conf["secret_key"])
proxy = Api(ep, "wsproxy", cluster_secret)
agent = Api(ep, "agent:" + agent_id, cluster_secret)


def call(method, target, obj=None, api=admin, what="", headers=None, raw=None, hashed=False):
    body = raw if raw is not None else (b"" if obj is None else json.dumps(obj).encode())
    h = {}
    if api is not None:
        h.update(api.sign(method, target, body))
    else:
        hp = ep.split("://", 1)[1].rstrip("/")
        h["Host"] = hp
    if hashed:
        h["X-Tessera-Content-SHA256"] = hashlib.sha256(body).hexdigest()
    h.update(headers or {})
    st, ct, data = (api or admin).send(method, target, body, h)
    return st, conform(method, target, st, ct, data, what), data


def fresh_api(user):
    return Api(ep, user["access_key"], user["secret_key"])


# ---- reads ----
for t in ("/v1/auth/whoami", "/v1/nodes", "/v1/resources", "/v1/projects", "/v1/projects?all=1",
          "/v1/fairshare", "/v1/images", "/v1/images?all=1", "/v1/images/aliases", "/v1/config",
          "/v1/config?flat=1", "/v1/users", "/v1/keypairs", "/v1/folders", "/v1/sessions", "/v1/dashboard",
          "/v1/about"):
    call("GET", t, what="a read")
call("GET", "/metrics", api=None, what="unsigned metrics")
call("GET", "/v1/sessions/no-such-session", what="a missing session (the error object)")
call("GET", "/v1/sessions?bogus=1", what="an unknown query parameter")
call("POST", "/v1/images/rescan", what="rescan")

# ---- settings, aliases, nodes ----
call("PUT", "/v1/config/fifo_skip_after", {"value": 0}, what="one setting")
call("PUT", "/v1/config", {"settings": {"fifo_skip_after": 0}}, what="settings at once")
call("PUT", "/v1/images/aliases/oa-alias", {"image": image}, what="an alias")
call("DELETE", "/v1/images/aliases/oa-alias", what="the alias removed")
call("DELETE", "/v1/images/aliases/oa-alias", what="a missing alias")
call("PATCH", "/v1/nodes/" + agent_id, {"schedulable": True}, what="undrain")
call("DELETE", "/v1/images/" + urllib.parse.quote("tessera-test/none:x", safe=""), what="a missing image")
call("POST", "/v1/images/pull", {"image": image}, what="a pull without a registry")
call("GET", "/v1/images/pulls/nope", what="a missing pull")
call("GET", "/v1/commits/nope", what="a missing commit")

# ---- users and keys ----
st, r, _ = call("POST", "/v1/users", {"email": "oa@openapi.test"}, what="a user")
user = None
if st == 201 and r:
    user = {"access_key": r["user"]["access_key"], "secret_key": r["secret_key"]}
    call("GET", "/v1/users/oa@openapi.test", what="the user")
    call("PATCH", "/v1/users/oa@openapi.test", {"disabled": False}, what="the user changed")
    call("POST", "/v1/users/oa@openapi.test/password", {}, what="a generated password")
    call("POST", "/v1/users/oa@openapi.test/password", {"password": "chosen-by-oa-1"}, what="a set password")
    u = fresh_api(user)
    call("POST", "/v1/users/oa@openapi.test/password", {"old_password": "wrong-one", "password": "x-new-pass-1"},
         api=u, what="one's own, a wrong current password")
    call("POST", "/v1/users/oa@openapi.test/password", {"old_password": "chosen-by-oa-1", "password": "x-new-pass-1"},
         api=u, what="one's own password changed")
    call("GET", "/v1/dashboard", api=u, what="the dashboard refused to a user")
st, r, _ = call("POST", "/v1/keypairs", {"label": "oa"}, what="a key")
if st == 201 and r:
    st2, r2, _ = call("POST", "/v1/keypairs/" + r["keypair"]["access_key"] + "/rotate", what="the key rotated")
    call("POST", "/v1/keypairs/" + r["keypair"]["access_key"] + "/rotate", what="a rotated key again")
    if st2 == 201 and r2:
        call("DELETE", "/v1/keypairs/" + r2["keypair"]["access_key"], what="the key revoked")
# An Ed25519 public key line, made up: the manager checks its form, not
# that a private key exists for it.
blob = b"\0\0\0\x0bssh-ed25519\0\0\0\x20" + hashlib.sha256(b"openapi").digest()
pub = "ssh-ed25519 %s oa@laptop" % base64.b64encode(blob).decode()
st, r, _ = call("POST", "/v1/ssh-keys", {"key": pub}, what="an SSH key")
call("POST", "/v1/ssh-keys", {"key": pub}, what="the same SSH key again")
call("POST", "/v1/ssh-keys", {"key": "not a key"}, what="not an SSH key")
call("GET", "/v1/ssh-keys", what="the SSH keys")
if st == 201 and r:
    call("DELETE", "/v1/ssh-keys/" + urllib.parse.quote(r["fingerprint"], safe=""), what="the key by fingerprint")
call("DELETE", "/v1/ssh-keys/nope", what="a missing SSH key")
call("POST", "/v1/auth/login", {"email": conf.get("email", ""), "password": conf.get("password", "")}, api=None,
     headers={"X-Tessera-Web-Secret": cluster_secret, "X-Tessera-Client-Addr": "127.0.0.1"}, what="a login")
call("POST", "/v1/auth/login", {"email": "x@openapi.test", "password": "wrong-password"}, api=None,
     headers={"X-Tessera-Web-Secret": cluster_secret}, what="a failed login")

# ---- projects ----
call("POST", "/v1/projects", {"name": "oa-proj", "quota": {"fgpu": 1}}, what="a project")
call("GET", "/v1/projects/oa-proj", what="the project")
call("PATCH", "/v1/projects/oa-proj", {"description": "openapi"}, what="the project changed")
if user:
    call("PUT", "/v1/projects/oa-proj/members/oa@openapi.test", {"role": "member"}, what="a member")
    call("DELETE", "/v1/projects/oa-proj/members/oa@openapi.test", what="the member out")
call("GET", "/v1/fairshare", what="fair share with a project")
call("DELETE", "/v1/projects/oa-proj", what="the project removed")

# ---- resource presets ----
call("GET", "/v1/presets", what="the presets")
call("POST", "/v1/presets", {"name": "OA preset", "resources": {"cpu": 2, "mem": "4g"}, "group": "h100"},
     what="a preset")
call("POST", "/v1/presets", {"name": "OA preset", "resources": {"cpu": 2, "mem": "4g"}}, what="a preset's name taken")
call("PATCH", "/v1/presets/" + urllib.parse.quote("OA preset"), {"resources": {"fgpu": 1}, "group": None},
     what="the preset changed")
call("DELETE", "/v1/presets/" + urllib.parse.quote("OA preset"), what="the preset removed")

# ---- sessions ----
spec_body = {"image": image, "name": "oa", "startup_command": "echo started; sleep 600"}
call("POST", "/v1/sessions?dry_run=1", spec_body, what="a dry run")
st, _, _ = call("POST", "/v1/sessions", spec_body, what="a session")
if st == 201:
    # Waits until it has started, however long a loaded machine takes
    # (each wait ends early once it has).
    for _ in range(4):
        _, r, _ = call("GET", "/v1/sessions/oa?wait=1&timeout_s=60", what="the session once started")
        if (r or {}).get("status") not in ("PENDING", "SCHEDULED", "PREPARING"):
            break
    call("GET", "/v1/sessions?all=1&limit=1", what="a page")
    call("GET", "/v1/sessions/oa/stats", what="its stats")
    _, r, _ = call("GET", "/v1/sessions/oa/apps", what="its apps")
    say(any(isinstance(a.get("ssh"), dict) for a in (r or {}).get("apps", [])),
        "its sshd app carries the ssh object (%s)" % r)
    call("GET", "/v1/sessions/oa/logs?tail=10", what="its log")
    st, _, data = call("POST", "/v1/sessions/oa/exec", {"command": ["sh", "-c", "echo hi; echo err >&2; exit 3"]},
                       what="an exec")
    frames = []
    while len(data) >= 8:
        n = struct.unpack(">I", data[4:8])[0]
        frames.append((data[0], data[8:8 + n]))
        data = data[8 + n:]
    say(st == 200 and frames and frames[-1] == (3, struct.pack(">i", 3)) and (1, b"hi\n") in frames,
        "the exec stream is frames as the document says, ending with exit 3 (%s)" % frames)
    call("POST", "/v1/sessions/oa/exec", {"command": []}, what="an empty command")
    st, r, _ = call("POST", "/v1/sessions/oa/apps/terminal", what="a link to the terminal")
    token = (r or {}).get("url", "").rpartition("token=")[2]
    if token:
        call("POST", "/v1/proxy/redeem", {"token": token}, api=proxy, what="the link redeemed")
        call("POST", "/v1/proxy/redeem", {"token": token}, api=proxy, what="the link again")
    call("GET", "/v1/proxy/routes", api=proxy, what="the routes")
    call("GET", "/v1/proxy/routes", api=admin, what="the routes as a user")
    call("POST", "/v1/sessions/no-such/commit", {}, what="a commit of a missing session")
    call("DELETE", "/v1/sessions/oa", what="the session ended")

# ---- folders and files ----
call("POST", "/v1/folders", {"name": "oa-data", "quota": "10m"}, what="a folder")
call("GET", "/v1/folders/oa-data", what="the folder")
call("PATCH", "/v1/folders/oa-data", {"quota": "20m"}, what="its quota")
if user:
    call("POST", "/v1/folders/oa-data/shares", {"email": "oa@openapi.test", "permission": "ro"}, what="a share")
    call("DELETE", "/v1/folders/oa-data/shares/oa@openapi.test", what="the share gone")
call("POST", "/v1/folders/oa-data/mkdir", {"path": "d"}, what="a directory")
payload = b"hello, openapi\n"
call("PUT", "/v1/folders/oa-data/upload?path=d/f.txt", raw=payload, hashed=True, what="an upload")
call("PUT", "/v1/folders/oa-data/upload?path=d/f.txt", raw=payload, hashed=True, what="an upload over a file")
call("GET", "/v1/folders/oa-data/files?path=d", what="a listing")
st, _, data = call("GET", "/v1/folders/oa-data/download?path=d/f.txt", what="a download")
say(data == payload, "the download is the bytes uploaded")
call("POST", "/v1/folders/oa-data/mv", {"from": "d/f.txt", "to": "g.txt"}, what="a move")
call("GET", "/v1/folders/oa-data/files?path=../x", what="a bad path")
call("DELETE", "/v1/folders/oa-data/files?path=d&recursive=1", what="a removal")
call("DELETE", "/v1/folders/oa-data", what="the folder trashed")
call("GET", "/v1/folders?trash=1", what="the trash")
call("POST", "/v1/folders/oa-data/restore", what="the folder back")
call("DELETE", "/v1/folders/oa-data?force=1", what="trashed again")

# ---- as a user who is not an admin ----
if user:
    u = fresh_api(user)
    call("GET", "/v1/config", api=u, what="settings as a user")
    call("GET", "/v1/users", api=u, what="users as a user")
    call("GET", "/v1/resources", api=u, what="resources as a user")
    call("DELETE", "/v1/users/oa@openapi.test", what="the user removed")

# ---- agents ----
call("POST", "/v1/agents/%s/heartbeat" % agent_id, {}, api=agent, what="a heartbeat")
call("POST", "/v1/agents/%s/events" % agent_id,
     {"event": "progress", "session_id": "pull:none", "ref": "x", "current": 0, "total": 0}, api=agent,
     what="a progress event")
call("POST", "/v1/agents/register", {"id": "someone-else"}, api=agent, what="a register for another id")

# ---- the event stream: its first event ----
target = "/v1/events"
c = http.client.HTTPConnection(admin.host, int(admin.port), timeout=30)
c.putrequest("GET", target, skip_host=True, skip_accept_encoding=True)
for k, v in admin.sign("GET", target).items():
    c.putheader(k, v)
c.endheaders()
r = c.getresponse()
first = b""
while r.status == 200 and not first.endswith(b"\n\n"):
    line = r.readline()   # through the chunked framing
    if not line:
        break
    first += line
c.close()
conform("GET", target, r.status, r.getheader("Content-Type", ""), b"", "the event stream")
say(first.startswith(b"event: state\ndata: {"), "the stream begins with a state event (%r)" % first[:60])

missed = sorted("%s %s" % (m.upper(), p) for p, item in SPEC["paths"].items() for m in METHODS
                if m in item and (m.upper(), p) not in DONE)
print("not called: %s" % (", ".join(missed) or "none"))
sys.exit(1 if FAILS else 0)
