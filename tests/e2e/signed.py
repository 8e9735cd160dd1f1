"""Signed raw requests to the manager's API for the end-to-end tests, signed
as docs/api.md ("Authentication") says; the negative cases can sign with
another secret or key, another body, or a shifted Date."""
import hashlib
import hmac
import http.client
import json
import time
from email.utils import formatdate


def load_conf(path):
    """The key = value lines of an admin.conf / client.conf."""
    return dict(l.split(" = ", 1) for l in open(path).read().splitlines() if " = " in l)


class Api:
    def __init__(self, endpoint, access_key, secret_key):
        self.hostport = endpoint.split("://", 1)[1].rstrip("/")
        self.host, self.port = self.hostport.rsplit(":", 1)
        self.access_key, self.secret_key = access_key, secret_key

    def sign(self, method, path, body=b"", secret=None, key=None, shift=0, signed_body=None):
        now = time.time() + shift
        date = formatdate(now, usegmt=True)
        day = time.strftime("%Y%m%d", time.gmtime(now))
        bh = hashlib.sha256(body if signed_body is None else signed_body).hexdigest()
        k = hmac.new((secret or self.secret_key).encode(), day.encode(), hashlib.sha256).hexdigest()
        msg = "\n".join([method, path, date, self.hostport, bh]).encode()
        sig = hmac.new(bytes.fromhex(k), msg, hashlib.sha256).hexdigest()
        return {"Host": self.hostport, "Date": date,
                "Authorization": "TESSERA-HMAC-SHA256 Credential=%s, Signature=%s"
                % (key or self.access_key, sig)}

    def send(self, method, path, body=b"", headers=None, timeout=60):
        """One request as given (path as is); (status, content type, body bytes)."""
        c = http.client.HTTPConnection(self.host, int(self.port), timeout=timeout)
        c.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in (headers or {}).items():
            c.putheader(k, v)
        if body or method in ("POST", "PUT", "PATCH"):
            c.putheader("Content-Type", "application/json")
            c.putheader("Content-Length", str(len(body)))
        try:
            c.endheaders(body)
        except (BrokenPipeError, ConnectionResetError):
            # The server answered before it took the whole body (a 413
            # for an upload past a folder's quota) and closed: its answer
            # is there to read all the same, as curl reads it.
            pass
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, r.getheader("Content-Type", ""), data

    def call(self, method, path, obj=None, timeout=60):
        """A signed request with a JSON body (or none); (status, parsed JSON or None)."""
        body = b"" if obj is None else json.dumps(obj).encode()
        st, _, data = self.send(method, path, body, self.sign(method, path, body), timeout)
        try:
            return st, json.loads(data)
        except ValueError:
            return st, None
