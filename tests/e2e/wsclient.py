#!/usr/bin/env python3
"""A client of a session's app port, for the tests (stdlib only).

It speaks what `tessera wsproxy` speaks to a runner (docs/apps.md): the
`TESSERA-APP/1 <secret> <target>` line, then, on `OK`, either an HTTP
request relayed to the app or the terminal's WebSocket (RFC 6455, client
frames masked) with its protocol: text frames and 0x00-prefixed binary
frames are input, 0x01 + cols + rows (16-bit big-endian) is a resize, the
server's binary frames are the terminal's output, its close frame says
`exit N` when the shell ended.

It can also be pointed at anything else that speaks HTTP or WebSocket
(`--no-line`: no TESSERA-APP line first, e.g. a wsproxy port with a cookie
given by --header).

As a module:

    c = AppConn("127.0.0.1", 32768, secret, "app:terminal")
    c.answer                      # "OK", "STARTING ..." or "ERROR ..."
    c.ws_connect("/ws?term=main&cols=80&rows=24")
    c.send_text("echo hi\\n")
    c.read_until(r"hi")           # all output so far, raises Timeout if not seen
    c.resize(100, 30)
    c.wait_close()                # (1000, "exit 0")
    status, headers, body = AppConn(...).http_get("/api/status")

As a command, the steps run in the order given; each prints one line:

    wsclient.py HOST:PORT --secret S --target app:terminal \\
        --ws '/ws?term=t1' --send 'echo hello-$((6*7))\\n' --expect 'hello-42' \\
        --resize 100x30 --send 'exit 3\\n' --wait-close

    ANSWER OK                       the runner's answer line (always first)
    HTTP 200 <body>                 --get PATH: the response status and body
    WS 101                          --ws PATH: the upgrade was answered
    MATCH <text>                    --expect REGEX: seen in the output
    CLOSE <code> <reason>           --wait-close / --close: the server's close

Escapes \\n \\r \\t \\xNN in --send/--send-binary are decoded. Exit status: 0
when every step passed, 1 when the answer was not OK (after printing it),
2 for usage errors, 3 when a step failed (an --expect not seen within
--timeout seconds, a refused upgrade, a connection that ended early).
--dump prints all terminal output received (after the steps) to stderr.
"""

import argparse
import base64
import os
import re
import socket
import struct
import sys
import time


class Timeout(Exception):
    pass


class Closed(Exception):
    pass


def decode_escapes(s):
    return s.encode("utf-8").decode("unicode_escape").encode("latin-1")


class AppConn:
    """One connection to an app port (or, line=False, any HTTP server)."""

    def __init__(self, host, port, secret=None, target=None, line=True, timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.timeout = timeout
        self.buf = bytearray()     # amortized appends: a large body stays linear
        self.output = bytearray()  # terminal output received
        self.close_info = None     # (code, reason) once the server closed
        self.answer = None
        if line:
            self.sock.sendall(b"TESSERA-APP/1 %s %s\r\n" % (secret.encode(), target.encode()))
            self.answer = self._read_line().decode("utf-8", "replace")

    # ---- bytes ----
    def _recv(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise Timeout()
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise Timeout()
        except ConnectionResetError:
            data = b""
        if not data:
            raise Closed()
        self.buf += data

    def _read_line(self):
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self.buf:
            self._recv(deadline)
        i = self.buf.index(b"\n")
        line = bytes(self.buf[:i])
        del self.buf[:i + 1]
        return line.rstrip(b"\r")

    def _read_exact(self, n, deadline):
        while len(self.buf) < n:
            self._recv(deadline)
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    # ---- HTTP ----
    def http_get(self, path, headers=()):
        """GET path (Connection: close); returns (status, headers dict, body bytes)."""
        req = "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" % path
        for h in headers:
            req += h + "\r\n"
        self.sock.sendall((req + "\r\n").encode())
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                self._recv(deadline)
        except Closed:
            pass
        head, _, body = bytes(self.buf).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
        hdrs = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        if hdrs.get("transfer-encoding", "").lower() == "chunked":
            body = self._dechunk(body)
        self.buf = bytearray()
        return status, hdrs, body

    @staticmethod
    def _dechunk(data):
        out = b""
        while data:
            size_line, _, data = data.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            out += data[:size]
            data = data[size + 2:]
        return out

    # ---- WebSocket ----
    def ws_connect(self, path, headers=()):
        """The upgrade; returns the status (101 when it worked)."""
        key = base64.b64encode(os.urandom(16)).decode()
        req = ("GET %s HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n" % (path, key))
        for h in headers:
            req += h + "\r\n"
        self.sock.sendall((req + "\r\n").encode())
        deadline = time.monotonic() + self.timeout
        while b"\r\n\r\n" not in self.buf:
            self._recv(deadline)
        i = self.buf.index(b"\r\n\r\n")
        head = bytes(self.buf[:i])
        del self.buf[:i + 4]
        status_line = head.split(b"\r\n")[0].decode("latin-1")
        status = int(status_line.split()[1])
        if status == 101:
            import hashlib
            want = base64.b64encode(hashlib.sha1(
                (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            if ("sec-websocket-accept: " + want.lower()) not in head.decode("latin-1").lower():
                raise ValueError("wrong Sec-WebSocket-Accept in: " + head.decode("latin-1"))
        return status

    def send_frame(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            hdr = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            hdr = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(hdr + mask + masked)

    def send_text(self, text):
        self.send_frame(0x1, text.encode("utf-8") if isinstance(text, str) else text)

    def send_input(self, data):
        """Input as a 0x00-prefixed binary frame."""
        self.send_frame(0x2, b"\x00" + (data.encode("utf-8") if isinstance(data, str) else data))

    def resize(self, cols, rows):
        self.send_frame(0x2, struct.pack("!BHH", 1, cols, rows))

    def ping(self, payload=b"p"):
        self.send_frame(0x9, payload)

    def read_frame(self, deadline):
        """The next frame from the server: (opcode, payload). Output and
        close frames are also kept (self.output, self.close_info)."""
        h = self._read_exact(2, deadline)
        op, n = h[0] & 0x0F, h[1] & 0x7F
        if h[1] & 0x80:
            raise ValueError("the server masked its frame")
        if n == 126:
            n = struct.unpack("!H", self._read_exact(2, deadline))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read_exact(8, deadline))[0]
        payload = self._read_exact(n, deadline)
        if op in (0x1, 0x2, 0x0):
            self.output += payload
        elif op == 0x8:
            code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
            self.close_info = (code, payload[2:].decode("utf-8", "replace"))
        return op, payload

    def read_until(self, pattern, timeout=None):
        """Reads output until the regex (str or bytes) matches it; returns the match."""
        rx = re.compile(pattern.encode() if isinstance(pattern, str) else pattern)
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            m = rx.search(self.output)
            if m:
                return m
            if self.close_info:
                raise Closed()
            self.read_frame(deadline)

    def wait_close(self, timeout=None):
        """Reads until the server's close frame (or the end); returns (code, reason)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        try:
            while not self.close_info:
                self.read_frame(deadline)
        except Closed:
            if not self.close_info:
                self.close_info = (1006, "")
        return self.close_info

    def close(self, code=1000):
        self.send_frame(0x8, struct.pack("!H", code))

    def disconnect(self):
        self.sock.close()


class _Step(argparse.Action):
    def __call__(self, parser, ns, values, option_string=None):
        steps = getattr(ns, "steps", None) or []
        steps.append((self.dest, values))
        ns.steps = steps


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("endpoint", help="HOST:PORT of the runner's app port (or of any HTTP server with --no-line)")
    p.add_argument("--secret", default="", help="the session's app secret (64 hex characters)")
    p.add_argument("--target", default="app:terminal", help="app:NAME or port:N (default app:terminal)")
    p.add_argument("--no-line", action="store_true", help="send no TESSERA-APP line (plain HTTP/WebSocket server)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds each step may wait (default 10)")
    p.add_argument("--header", action="append", default=[], help="an extra request header, 'Name: value'")
    p.add_argument("--dump", action="store_true", help="print the terminal output received to stderr at the end")
    for name, meta, hlp in [("get", "PATH", "GET PATH, print 'HTTP STATUS BODY'"),
                            ("ws", "PATH", "WebSocket upgrade on PATH (e.g. '/ws?term=main&cols=80&rows=24')"),
                            ("send", "TEXT", "a text frame of input (escapes decoded)"),
                            ("send_binary", "TEXT", "a 0x00-prefixed binary frame of input"),
                            ("resize", "COLSxROWS", "a resize frame"),
                            ("expect", "REGEX", "read the output until REGEX matches, print 'MATCH TEXT'"),
                            ("sleep", "SECONDS", "wait")]:
        p.add_argument("--" + name.replace("_", "-"), dest=name, metavar=meta, action=_Step, help=hlp)
    for name, hlp in [("ping", "a ping (its pong is read and dropped)"),
                      ("close", "send a close frame and wait for the server's"),
                      ("wait_close", "wait for the server's close frame, print 'CLOSE CODE REASON'"),
                      ("disconnect", "drop the connection without a close frame")]:
        p.add_argument("--" + name.replace("_", "-"), dest=name, action=_Step, nargs=0, help=hlp)
    a = p.parse_args(argv)
    host, _, port = a.endpoint.rpartition(":")
    if not host or not port.isdigit():
        p.error("endpoint must be HOST:PORT")
    try:
        c = AppConn(host, int(port), a.secret, a.target, line=not a.no_line, timeout=a.timeout)
    except OSError as e:
        print("CONNECT-FAILED %s" % e)
        return 3
    if c.answer is not None:
        print("ANSWER " + c.answer, flush=True)
        if c.answer != "OK":
            return 1
    rc = 0
    try:
        for step, val in getattr(a, "steps", None) or []:
            if step == "get":
                status, _, body = c.http_get(val, a.header)
                print("HTTP %d %s" % (status, body.decode("utf-8", "replace").replace("\n", " ")[:2000]), flush=True)
            elif step == "ws":
                status = c.ws_connect(val, a.header)
                print("WS %d" % status, flush=True)
                if status != 101:
                    rc = 3
                    break
            elif step == "send":
                c.send_text(decode_escapes(val))
            elif step == "send_binary":
                c.send_input(decode_escapes(val))
            elif step == "resize":
                cols, _, rows = val.partition("x")
                c.resize(int(cols), int(rows))
            elif step == "expect":
                m = c.read_until(val)
                print("MATCH " + m.group(0).decode("utf-8", "replace"), flush=True)
            elif step == "sleep":
                time.sleep(float(val))
            elif step == "ping":
                c.ping()
            elif step == "close":
                c.close()
                print("CLOSE %d %s" % c.wait_close(), flush=True)
            elif step == "wait_close":
                print("CLOSE %d %s" % c.wait_close(), flush=True)
            elif step == "disconnect":
                c.disconnect()
                break
    except Timeout:
        print("TIMEOUT in --%s %s" % (step.replace("_", "-"), val or ""), flush=True)
        rc = 3
    except Closed:
        print("CLOSED in --%s %s%s" % (step.replace("_", "-"), val or "",
                                       " (close %d %s)" % c.close_info if c.close_info else ""), flush=True)
        rc = 3
    if a.dump:
        sys.stderr.write(c.output.decode("utf-8", "replace") + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
