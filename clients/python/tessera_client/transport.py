"""Signed HTTP requests to the manager (docs/api.md, "Authentication").

Every request carries ``Date`` and ``Authorization: TESSERA-HMAC-SHA256
Credential=<access key>, Signature=<hex>`` where

    signing_key = HMAC-SHA256(secret_key, "YYYYMMDD" of the Date header)
    signature   = hex(HMAC-SHA256(signing_key, METHOD "\\n" PATH_WITH_QUERY "\\n"
                                  DATE "\\n" HOST "\\n" hex(SHA256(body))))

PATH_WITH_QUERY is the request target exactly as sent (the endpoint's own
path prefix included) and HOST the ``Host`` header, the endpoint's
``host[:port]`` as written. A streamed upload is signed over the body's
hash computed before sending, which also goes in ``X-Tessera-Content-SHA256``.
"""
import hashlib
import hmac
import http.client
import io
import json
import select
import socket
import ssl
import time
import urllib.parse

from .errors import ConfigError, TesseraError

SCHEME = "TESSERA-HMAC-SHA256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# How long an upload waits for the manager's "100 Continue" before it sends
# the body anyway (as curl does, for servers that never send one).
CONTINUE_WAIT_S = 3.0
# What a network failure raises (socket timeouts and TLS errors are
# OSErrors): turned into a TesseraError naming the endpoint. Anything else
# (a KeyboardInterrupt, an exception of a progress callback) goes through
# as it is.
NET_ERRORS = (OSError, http.client.HTTPException)
# timeout=DEFAULT: the transport's own; None: no limit (a followed log).
DEFAULT = object()


def http_date(t=None):
    """The IMF-fixdate of time T (now): ``Sun, 22 Nov 2026 08:40:00 GMT``.
    Spelled out here because strftime's day and month names follow the
    locale, and the manager reads English ones only."""
    g = time.gmtime(time.time() if t is None else t)
    return "%s, %02d %s %04d %02d:%02d:%02d GMT" % (
        _DAYS[g.tm_wday], g.tm_mday, _MONTHS[g.tm_mon - 1], g.tm_year, g.tm_hour, g.tm_min, g.tm_sec)


def signature(secret_key, method, path_query, date, host, body_sha256):
    """The hex signature of one request (see the module's text)."""
    # The day comes from the Date header itself, as the manager reads it
    # (by hand: strptime's month names follow the locale).
    try:
        _, mday, mon, year = date.split()[:4]
        day = "%04d%02d%02d" % (int(year), _MONTHS.index(mon) + 1, int(mday))
    except ValueError:
        raise ValueError("invalid Date %r: expected an IMF-fixdate like "
                         "'Sun, 22 Nov 2026 08:40:00 GMT'" % date) from None
    key = hmac.new(secret_key.encode("utf-8"), day.encode("ascii"), hashlib.sha256).digest()
    msg = "\n".join([method.upper(), path_query, date, host, body_sha256]).encode("utf-8")
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def authorization(access_key, secret_key, method, path_query, date, host, body_sha256):
    if not access_key or any(c in access_key for c in " ,\t\r\n"):
        raise ConfigError("access key %r is empty or contains spaces or commas" % access_key)
    return "%s Credential=%s, Signature=%s" % (
        SCHEME, access_key, signature(secret_key, method, path_query, date, host, body_sha256))


def quote(segment):
    """A path segment or query value percent-encoded as the CLI does: all but
    letters, digits and ``-._~``."""
    return urllib.parse.quote(str(segment), safe="")


def query_string(params):
    """``?a=1&b=x`` of the items of PARAMS whose value is not None (``""``
    when none); True/False become 1/0."""
    parts = []
    for k, v in (params or {}).items():
        if v is None:
            continue
        if v is True or v is False:
            v = int(v)
        parts.append("%s=%s" % (quote(k), quote(v)))
    return "?" + "&".join(parts) if parts else ""


def error_from_answer(status, body, method, target, endpoint):
    """A TesseraError for an answer that is not 2xx: the API's own message
    when it is one of ours, else the start of what came, so that a person
    can tell what answered (a proxy, a crash)."""
    err = None
    try:
        doc = json.loads(body.decode("utf-8")) if body else None
        err = doc.get("error") if isinstance(doc, dict) else None
    except ValueError:
        pass
    if isinstance(err, dict) and isinstance(err.get("message"), str) and err["message"]:
        return TesseraError(err["message"], status=status, code=err.get("code"), body=err)
    if isinstance(err, str) and err:
        return TesseraError(err, status=status, body=err)
    text = body[:200].decode("utf-8", errors="replace").rstrip("\r\n")
    return TesseraError("the manager at %s answered HTTP %d to %s %s%s" % (
        endpoint, status, method, target, ": " + text if text else ""), status=status)


class _Replay(io.RawIOBase):
    """A socket's bytes with some already read put back in front: lets
    http.client parse an answer whose first line was read by hand."""

    def __init__(self, head, sock):
        self._head, self._sock = head, sock

    def readable(self):
        return True

    def readinto(self, b):
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._sock.recv_into(b)


class _ReplaySocket:
    def __init__(self, head, sock):
        self._raw = _Replay(head, sock)

    def makefile(self, mode, *args, **kwargs):
        return io.BufferedReader(self._raw)


class Transport:
    """Signed requests to one endpoint with one keypair. A connection per
    request: calls are seconds apart in a notebook, and a fresh connection
    never meets one the manager closed meanwhile."""

    def __init__(self, config, timeout=60.0):
        self.config = config
        self.timeout = timeout
        ep = config.endpoint
        u = urllib.parse.urlsplit(ep)
        if u.scheme not in ("http", "https") or "://" not in ep:
            raise ConfigError("invalid endpoint '%s': expected http://HOST:PORT" % ep[:200])
        # The Host header, and the signed host, is the endpoint's host part
        # as written (what the CLI sends).
        self.host = u.netloc.rsplit("@", 1)[-1]
        if not self.host:
            raise ConfigError("invalid endpoint '%s': no host" % ep[:200])
        try:
            self._hostname, self._port = u.hostname, u.port
        except ValueError as e:
            raise ConfigError("invalid endpoint '%s': %s" % (ep[:200], e)) from None
        self.prefix = u.path.rstrip("/")
        self.https = u.scheme == "https"
        self.endpoint = ep

    # ---- plumbing ----

    def _connect(self, timeout):
        if self.https:
            return http.client.HTTPSConnection(self._hostname, self._port, timeout=timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self._hostname, self._port, timeout=timeout)

    def _headers(self, method, target, body_sha256, extra=None):
        date = http_date()
        h = {"Host": self.host, "Date": date,
             "Authorization": authorization(self.config.access_key, self.config.secret_key, method,
                                            target, date, self.host, body_sha256)}
        h.update(extra or {})
        return h

    def _transport_error(self, e, timeout):
        if isinstance(e, TesseraError):
            return e
        if isinstance(e, socket.timeout):
            return TesseraError("no answer from the manager at %s within %s s" % (self.endpoint, timeout))
        if isinstance(e, ConnectionRefusedError):
            return TesseraError("cannot reach the manager at %s: connection refused (is it running, "
                                "and is the endpoint right?)" % self.endpoint)
        if isinstance(e, http.client.HTTPException):
            return TesseraError("the answer of the manager at %s was cut short (%s)" % (
                self.endpoint, type(e).__name__))
        if isinstance(e, ssl.SSLError):
            return TesseraError("TLS with the manager at %s failed: %s" % (self.endpoint, e))
        return TesseraError("cannot reach the manager at %s: %s" % (self.endpoint, getattr(e, "strerror", None) or e))

    def target(self, path, params=None):
        return self.prefix + path + query_string(params)

    def _send(self, method, path, params, body, content_type, timeout, extra_headers=None):
        """Sends one request; (connection, response) with the response's head read."""
        target = self.target(path, params)
        headers = self._headers(method, target, hashlib.sha256(body).hexdigest(), extra_headers)
        if body or method in ("POST", "PUT", "PATCH"):
            headers["Content-Type"] = content_type
            headers["Content-Length"] = str(len(body))
        conn = self._connect(timeout)
        try:
            conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for k, v in headers.items():
                conn.putheader(k, v)
            conn.endheaders(body or None)
            return conn, conn.getresponse(), target
        except NET_ERRORS as e:
            conn.close()
            raise self._transport_error(e, timeout) from None
        except BaseException:
            conn.close()
            raise

    # ---- calls ----

    def call(self, method, path, params=None, body=None, timeout=DEFAULT):
        """A signed request with a JSON body (or none); the answer's JSON
        (None when empty). TesseraError for any answer that is not 2xx."""
        timeout = self.timeout if timeout is DEFAULT else timeout
        data = b"" if body is None else json.dumps(body).encode("utf-8")
        conn, resp, target = self._send(method, path, params, data, "application/json", timeout,
                                        {"Accept": "application/json"})
        try:
            raw = resp.read()
        except NET_ERRORS as e:
            raise self._transport_error(e, timeout) from None
        finally:
            conn.close()
        if not 200 <= resp.status < 300:
            raise error_from_answer(resp.status, raw, method, target, self.endpoint)
        if not raw:
            return None
        try:
            return json.loads(raw.decode("utf-8"))
        except ValueError:
            raise TesseraError("the manager at %s answered %s %s with invalid JSON" % (
                self.endpoint, method, target), status=resp.status) from None

    def stream(self, method, path, params=None, body=None, timeout=DEFAULT, accept="*/*"):
        """A signed request whose answer is read as it comes: a Stream
        (iterate it for chunks of bytes; close it, or use ``with``).
        TesseraError when the answer is not 2xx. TIMEOUT bounds each wait
        for more (None: no bound)."""
        timeout = self.timeout if timeout is DEFAULT else timeout
        data = b"" if body is None else json.dumps(body).encode("utf-8")
        conn, resp, target = self._send(method, path, params, data, "application/json", timeout,
                                        {"Accept": accept})
        if not 200 <= resp.status < 300:
            try:
                raw = resp.read(16384)
            except NET_ERRORS:
                raw = b""
            conn.close()
            raise error_from_answer(resp.status, raw, method, target, self.endpoint)
        return Stream(self, conn, resp, timeout)

    def upload(self, path, params, source, length, sha256, progress=None, timeout=DEFAULT, chunk=1 << 20):
        """PUT of LENGTH bytes read from SOURCE (a binary file object) as the
        body, signed over SHA256 (their hex hash, computed beforehand);
        PROGRESS(done, total) after each piece sent. The answer's JSON."""
        timeout = self.timeout if timeout is DEFAULT else timeout
        target = self.target(path, params)
        headers = self._headers("PUT", target, sha256, {
            "X-Tessera-Content-SHA256": sha256,
            "Content-Type": "application/octet-stream",
            "Content-Length": str(length),
            "Accept": "application/json",
            # The manager refuses an upload it can tell is wrong from its
            # headers alone (the file exists, over the quota) before the
            # body; with 100-continue that answer comes instead of a body
            # sent for nothing and a broken pipe.
            "Expect": "100-continue",
        })
        conn = self._connect(timeout)
        try:
            conn.putrequest("PUT", target, skip_host=True, skip_accept_encoding=True)
            for k, v in headers.items():
                conn.putheader(k, v)
            conn.endheaders()
            resp = self._await_continue(conn)
            if resp is None:
                done = 0
                if progress:
                    progress(0, length)
                try:
                    while done < length:
                        piece = source.read(min(chunk, length - done))
                        if not piece:
                            raise TesseraError("the file being uploaded ended after %d of its %d bytes "
                                               "(did it change meanwhile?)" % (done, length))
                        conn.send(piece)
                        done += len(piece)
                        if progress:
                            progress(done, length)
                except (BrokenPipeError, ConnectionResetError):
                    # The manager answered before it took the whole body
                    # and closed: its answer is there to read.
                    pass
                resp = conn.getresponse()
            raw = resp.read()
        except NET_ERRORS as e:
            conn.close()
            raise self._transport_error(e, timeout) from None
        except BaseException:
            conn.close()
            raise
        conn.close()
        if not 200 <= resp.status < 300:
            raise error_from_answer(resp.status, raw, "PUT", target, self.endpoint)
        try:
            return json.loads(raw.decode("utf-8")) if raw else None
        except ValueError:
            return None

    def _await_continue(self, conn):
        """After an upload's head: None when the body should be sent (the
        manager said 100 Continue, or said nothing within CONTINUE_WAIT_S),
        else the manager's final answer (an HTTPResponse, its head read)."""
        sock = conn.sock
        pending = getattr(sock, "pending", lambda: 0)()
        if not pending:
            readable, _, _ = select.select([sock], [], [], CONTINUE_WAIT_S)
            if not readable:
                return None
        line = b""
        while not line.endswith(b"\n"):
            c = sock.recv(1)
            if not c:
                raise http.client.RemoteDisconnected("closed before answering")
            line += c
            if len(line) > 8192:
                raise http.client.LineTooLong("status line")
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[1][:1] == b"1":
            # An interim answer: skip its header lines up to the blank one.
            while line not in (b"\r\n", b"\n"):
                line = b""
                while not line.endswith(b"\n"):
                    c = sock.recv(1)
                    if not c:
                        raise http.client.RemoteDisconnected("closed after 100 Continue")
                    line += c
            return None
        resp = http.client.HTTPResponse(_ReplaySocket(line, sock), method="PUT")
        resp.begin()
        return resp


class Stream:
    """A streamed answer: iterate it for its body in chunks of bytes, as the
    manager sends them. A body that ends before its proper end (the manager
    went away, the stream was cut) raises TesseraError."""

    def __init__(self, transport, conn, resp, timeout):
        self._t, self._conn, self.response, self._timeout = transport, conn, resp, timeout
        self.content_type = resp.getheader("Content-Type", "")
        self.length = resp.getheader("Content-Length")
        self.length = int(self.length) if self.length and self.length.isdigit() else None

    def __iter__(self):
        try:
            while True:
                try:
                    data = self.response.read1(1 << 16)
                except http.client.IncompleteRead:
                    raise TesseraError("the stream from the manager at %s was cut short" % self._t.endpoint) from None
                except NET_ERRORS as e:
                    raise self._t._transport_error(e, self._timeout) from None
                if not data:
                    break
                yield data
            # A body with a Content-Length that ended early reads as an
            # end: what is left of the length tells.
            if self.response.length:
                raise TesseraError("the stream from the manager at %s was cut short" % self._t.endpoint)
        finally:
            self.close()

    def close(self):
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
