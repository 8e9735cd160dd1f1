#!/usr/bin/env bash
# Files in folders through the API and the CLI (docs/folders.md, "Files"):
# a 200 MB file goes up and comes back unchanged; an upload cut mid-way
# leaves nothing under its name; links a session could make in the folder
# (to /etc, to a directory beside the folder) are refused for reading,
# listing, writing and removing, and nothing outside changes; '..' and
# absolute paths are refused by every route; a passed quota is 413 with
# nothing written; a read-only share can list and download only.
# Destructive checks aim at a decoy directory beside the folder, never at
# the machine's own files: a regression must not be able to harm the host.
. "$(dirname "$0")/lib.sh"
e2e_setup
start_server || { e2e_done; exit 1; }

T() { "$TESSERA" "$@"; }
data=$E2E_DIR/data
outside=$E2E_DIR/outside
mkdir -p "$outside"
echo secret >"$outside/secret"

check "folder create" T folder create files >/dev/null
check "folder create with a 1 MiB quota" T folder create small --quota 1m >/dev/null
fid=$(T folder info files --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("id") or d["folder"]["id"])')
dir=$data/folders/$fid
check "the folder's directory is on the storage host" test -d "$dir"

# ---- 200 MB up and down ----
head -c 200M /dev/urandom >"$E2E_DIR/big"
want=$(sha256sum <"$E2E_DIR/big" | cut -d' ' -f1)
out=$(T folder upload files "$E2E_DIR/big" sub/big.bin 2>&1)
check "upload into a missing directory is refused clearly" contains "$out" "no such file or directory"
check "mkdir" T folder mkdir files sub >/dev/null
check "upload 200 MB" T folder upload files "$E2E_DIR/big" sub/big.bin >/dev/null
check "the uploaded file belongs to the work user (1000)" test "$(stat -c %u:%g "$dir/sub/big.bin")" = 1000:1000
check "download 200 MB" T folder download files sub/big.bin "$E2E_DIR/back" >/dev/null
check "the download is the upload, byte for byte (sha256)" test "$(sha256sum <"$E2E_DIR/back" | cut -d' ' -f1)" = "$want"
check "no partial download file is left" not test -e "$E2E_DIR/back.tessera-part"
out=$(T folder upload files "$E2E_DIR/big" sub/big.bin 2>&1)
check "upload over an existing file needs --overwrite" contains "$out" "already exists"
listing=$(T folder files files sub)
check "files lists the upload with its size" contains "$listing" "big.bin"
check "mv" T folder mv files sub/big.bin sub/moved.bin >/dev/null
check "mv moved it" test -f "$dir/sub/moved.bin"
rm -f "$E2E_DIR/back"
# On a terminal, a progress line (script(1) gives the command one).
if command -v script >/dev/null; then
	out=$(TESSERA_CONFIG=$TESSERA_CONFIG script -qec "'$TESSERA' folder download files sub/moved.bin '$E2E_DIR/tty'" /dev/null 2>&1)
	check "a download on a terminal shows its progress" contains "$out" "100%"
	rm -f "$E2E_DIR/tty"
fi

# ---- hostile links, made directly in the folder as a session could ----
ln -s /etc "$dir/etc"
ln -s /etc/passwd "$dir/passwd"
ln -s "$outside" "$dir/decoy"
ln -s ../../../outside/secret "$dir/up"
for p in etc/passwd passwd up decoy/secret; do
	out=$(T folder download files "$p" "$E2E_DIR/x" 2>&1)
	check "download $p is refused as outside the folder" contains "$out" "outside the folder"
	check "download $p wrote nothing" not test -e "$E2E_DIR/x"
done
for p in etc decoy; do
	out=$(T folder files files "$p" 2>&1)
	check "listing $p is refused as outside the folder" contains "$out" "outside the folder"
done
listing=$(T folder files files)
check "the root's listing shows links as links" contains "$listing" "(link, not followed)"
echo small >"$E2E_DIR/small"
out=$(T folder upload files "$E2E_DIR/small" decoy/new 2>&1)
check "upload through a link is refused" contains "$out" "outside the folder"
check "nothing was written outside" not test -e "$outside/new"
out=$(T folder mkdir files decoy/newdir 2>&1)
check "mkdir through a link is refused" contains "$out" "outside the folder"
out=$(T folder mv files sub/moved.bin decoy/moved.bin 2>&1)
check "mv through a link is refused" contains "$out" "outside the folder"
out=$(T folder rm-file files decoy/secret 2>&1)
check "rm-file through a link is refused" contains "$out" "outside the folder"
check "the file outside is still there" test -f "$outside/secret"
out=$(T folder upload files "$E2E_DIR/small" decoy 2>&1)
check "upload onto a link's name needs --overwrite" contains "$out" "already exists"
check "rm-file --recursive of a link removes the link only" T folder rm-file files decoy --recursive >/dev/null
check "the link is gone" not test -L "$dir/decoy"
check "what it pointed at is intact" test -f "$outside/secret"

# ---- the API: '..', absolute paths, a cut upload, quota, a read-only share ----
PYTHONPATH=$(dirname "$0") python3 - "$TESSERA_CONFIG" "$dir" <<'PY' >"$E2E_DIR/api.out" 2>&1
import hashlib, json, os, socket, sys, time
from signed import Api, load_conf

conf = load_conf(sys.argv[1])
folder_dir = sys.argv[2]
a = Api(conf["endpoint"], conf["access_key"], conf["secret_key"])

def say(good, what):
    print("%s %s" % ("ok  " if good else "FAIL", what))

def upload(api, name, path, body, extra=""):
    q = "/v1/folders/%s/upload?path=%s%s" % (name, path, extra)
    h = api.sign("PUT", q, body)
    h["X-Tessera-Content-SHA256"] = hashlib.sha256(body).hexdigest()
    st, _, data = api.send("PUT", q, body, h)
    try:
        return st, json.loads(data)
    except ValueError:
        return st, None

def msg(r):
    return (r or {}).get("error", {}).get("message", "") if isinstance((r or {}).get("error"), dict) \
        else str((r or {}).get("message", r))

bad_paths = ["..", "../x", "sub/../../x", "%2E%2E%2Fx", "/etc/passwd", "sub//x"]
for p in bad_paths:
    st, r = a.call("GET", "/v1/folders/files/files?path=" + p)
    say(st == 400, "list %s: 400 (%d %s)" % (p, st, msg(r)))
    st, r = a.call("GET", "/v1/folders/files/download?path=" + p)
    say(st == 400, "download %s: 400 (%d)" % (p, st))
    st, r = upload(a, "files", p, b"x")
    say(st == 400, "upload %s: 400 (%d)" % (p, st))
    st, r = a.call("DELETE", "/v1/folders/files/files?path=" + p)
    say(st == 400, "delete %s: 400 (%d)" % (p, st))
for p in ["..", "../x", "/etc/x", "a/../b"]:
    st, r = a.call("POST", "/v1/folders/files/mkdir", {"path": p})
    say(st == 400, "mkdir %s: 400 (%d)" % (p, st))
    st, r = a.call("POST", "/v1/folders/files/mv", {"from": "sub/moved.bin", "to": p})
    say(st == 400, "mv to %s: 400 (%d)" % (p, st))
    st, r = a.call("POST", "/v1/folders/files/mv", {"from": p, "to": "sub/y"})
    say(st == 400, "mv from %s: 400 (%d)" % (p, st))
st, r = a.call("GET", "/v1/folders/files/files?path=..")
say("'..'" in msg(r), "the refusal says why: %s" % msg(r))
say(os.path.exists(os.path.join(folder_dir, "sub/moved.bin")), "nothing moved")

# A NUL byte from %00 would end the path early (issue 27): the server
# removed the whole keep/ for "keep%00.tmp" and listed real/ for
# "real%00.txt". Every route refuses it with 400, before touching anything.
for d in ("keep", "real"):
    st, r = a.call("POST", "/v1/folders/files/mkdir", {"path": d})
    say(st in (200, 201), "mkdir %s (%d %s)" % (d, st, msg(r)))
    st, r = upload(a, "files", d + "/inside.txt", b"still here")
    say(st == 201, "upload %s/inside.txt (%d %s)" % (d, st, msg(r)))
st, r = a.call("DELETE", "/v1/folders/files/files?path=keep%00.tmp&recursive=1")
say(st == 400 and "NUL" in msg(r), "delete keep%%00.tmp: 400 (%d %s)" % (st, msg(r)))
say(os.path.isfile(os.path.join(folder_dir, "keep/inside.txt")), "keep/ and its file are still there")
st, r = a.call("GET", "/v1/folders/files/files?path=real%00.txt")
say(st == 400 and "NUL" in msg(r), "list real%%00.txt: 400, not real/'s listing (%d %s)" % (st, msg(r)))
for q in ["/v1/folders/files/download?path=real/inside.txt%00x", "/v1/folders/files%00x/files",
          "/v1/folders/files/files?path%00=real"]:
    st, r = a.call("GET", q)
    say(st == 400 and "NUL" in msg(r), "GET %s: 400 (%d %s)" % (q, st, msg(r)))
st, r = upload(a, "files", "real/new%00.txt", b"x")
say(st == 400, "upload real/new%%00.txt: 400 (%d)" % st)
st, r = a.call("POST", "/v1/folders/files/mkdir?x=%00", {"path": "made"})
say(st == 400 and not os.path.exists(os.path.join(folder_dir, "made")), "mkdir with a %%00 argument: 400, nothing made (%d)" % st)
say(sorted(os.listdir(os.path.join(folder_dir, "real"))) == ["inside.txt"], "nothing was written into real/")
# Before authentication too: unsigned, the answer is the same 400.
st, _, data = a.send("DELETE", "/v1/folders/files/files?path=keep%00.tmp&recursive=1")
say(st == 400, "unsigned, %%00 is 400 before the signature is checked (%d)" % st)
# The web UI's relay answers the same before its login check.
web = conf.get("web_url", "").rstrip("/")
if web:
    import urllib.request, urllib.error
    try:
        urllib.request.urlopen(web + "/api/v1/folders/files/files?path=real%00.txt", timeout=30)
        st = 200
    except urllib.error.HTTPError as e:
        st = e.code
    say(st == 400, "the web UI's /api relay: 400 for %%00 (%d)" % st)
else:
    say(False, "admin.conf names the web UI (web_url)")

# A body that does not match the hash it was signed with is refused whole.
q = "/v1/folders/files/upload?path=forged.bin"
h = a.sign("PUT", q, b"good")
h["X-Tessera-Content-SHA256"] = hashlib.sha256(b"good").hexdigest()
st, _, _ = a.send("PUT", q, b"evil", h)
say(st in (400, 401), "a body other than the signed one is refused (%d)" % st)
say(not os.path.exists(os.path.join(folder_dir, "forged.bin")), "and nothing was written")

# An upload cut mid-way: 1 MiB of 8 MiB sent, then the connection closed.
body = os.urandom(8 << 20)
q = "/v1/folders/files/upload?path=cut.bin"
h = a.sign("PUT", q, body)
h["X-Tessera-Content-SHA256"] = hashlib.sha256(body).hexdigest()
s = socket.create_connection((a.host, int(a.port)))
head = "PUT %s HTTP/1.1\r\n" % q + "".join("%s: %s\r\n" % kv for kv in h.items()) + \
       "Content-Length: %d\r\n\r\n" % len(body)
s.sendall(head.encode() + body[:1 << 20])
time.sleep(0.5)
s.close()
left = []
for _ in range(50):
    # The server notices the cut when it reads again; what matters is the
    # state after, never how fast.
    st, r = a.call("GET", "/v1/folders/files/files")
    left = [e["name"] for e in r["entries"] if e["name"] == "cut.bin" or e["name"].startswith(".tessera-upload-")]
    if left:
        break
    time.sleep(0.1)
say(not left, "a cut upload leaves no file under its name nor a hidden one (%s)" % left)
say(not os.path.exists(os.path.join(folder_dir, "cut.bin")), "cut.bin is not on the storage host")

# Quota: 2 MiB into a 1 MiB folder.
st, r = upload(a, "small", "two.bin", os.urandom(2 << 20))
say(st == 413 and "quota" in msg(r), "an upload past the quota: 413 (%d %s)" % (st, msg(r)))
st, r = a.call("GET", "/v1/folders/small/files")
say(st == 200 and not r["entries"], "and nothing was written (%s)" % (r or {}).get("entries"))
# Without a Content-Length (chunked), the quota stops the body as it streams.
import http.client
body = os.urandom(2 << 20)
q = "/v1/folders/small/upload?path=chunked.bin"
h = a.sign("PUT", q, body)
h["X-Tessera-Content-SHA256"] = hashlib.sha256(body).hexdigest()
c = http.client.HTTPConnection(a.host, int(a.port), timeout=60)
c.putrequest("PUT", q, skip_host=True, skip_accept_encoding=True)
for k, v in h.items():
    c.putheader(k, v)
c.putheader("Transfer-Encoding", "chunked")
c.endheaders()
for i in range(0, len(body), 65536):
    piece = body[i:i + 65536]
    c.send(b"%x\r\n" % len(piece) + piece + b"\r\n")
c.send(b"0\r\n\r\n")
resp = c.getresponse()
data = resp.read()
c.close()
say(resp.status == 413 and b"quota" in data, "a chunked upload past the quota: 413 (%d %s)" % (resp.status, data[:200]))
st, r = a.call("GET", "/v1/folders/small/files")
say(st == 200 and not r["entries"], "and nothing was written (%s)" % (r or {}).get("entries"))
st, r = upload(a, "small", "ok.bin", b"fits")
say(st == 201, "an upload within the quota: 201 (%d)" % st)

# A read-only share: list and download only.
st, r = a.call("POST", "/v1/users", {"email": "bob@files.test", "password": "pw-bob-files"})
say(st == 201, "admin creates bob (%d)" % st)
b = Api(conf["endpoint"], r["user"]["access_key"], r["secret_key"])
st, r = a.call("POST", "/v1/folders/files/shares", {"email": "bob@files.test", "permission": "ro"})
say(st == 200, "share ro with bob (%d %s)" % (st, msg(r)))
st, r = b.call("GET", "/v1/folders/files/files?path=sub")
say(st == 200, "bob lists the share (%d)" % st)
st, _, data = b.send("GET", "/v1/folders/files/download?path=sub/moved.bin", b"",
                     b.sign("GET", "/v1/folders/files/download?path=sub/moved.bin"), timeout=120)
say(st == 200 and len(data) == 200 << 20, "bob downloads from the share (%d, %d bytes)" % (st, len(data)))
st, r = upload(b, "files", "bob.bin", b"bob")
say(st == 403, "bob cannot upload to a read-only share (%d %s)" % (st, msg(r)))
st, r = b.call("POST", "/v1/folders/files/mkdir", {"path": "bobdir"})
say(st == 403, "bob cannot mkdir in it (%d)" % st)
st, r = b.call("POST", "/v1/folders/files/mv", {"from": "sub/moved.bin", "to": "bob.bin"})
say(st == 403, "bob cannot move in it (%d)" % st)
st, r = b.call("DELETE", "/v1/folders/files/files?path=sub/moved.bin")
say(st == 403, "bob cannot remove in it (%d)" % st)
say(not os.path.exists(os.path.join(folder_dir, "bob.bin")), "nothing of bob's was written")
PY
while IFS= read -r line; do
	case "$line" in
	"ok  "*) ok "${line#ok  }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	*) e2e_log "$line" ;;
	esac
done <"$E2E_DIR/api.out"
check "the API checks ran" grep -q "bob cannot remove" "$E2E_DIR/api.out"
rm -f "$E2E_DIR/big"
e2e_done
