#!/usr/bin/env python3
"""The client side of bench/apps-proxy.sh (stdlib only).

    apps_load.py cookie URL
        GET the proxy's one-time link URL; prints the cookie it sets
        ("name=value").
    apps_load.py matrix PATHS_JSON ROUNDS BIG_MIB WS_MIB
        PATHS_JSON: {"name": {"host", "port", "line"?, "cookie"?}, ...}, in
        the order to print. Measures on every path, rounds interleaved:
        the p50 of 2000 sequential keep-alive GETs of a 13-byte body (one
        connection per path, one request per path in turn), the
        throughput of one GET of BIG_MIB MiB, and of WS_MIB MiB echoed
        over one WebSocket (64 KiB frames, sent while the echo is read).
        Prints one JSON object: {"name": {"lat_us": [...], "http_mbs":
        [...], "ws_mbs": [...]}}.
    apps_load.py wait-app TESSERA IMAGE NAME APP CPU MEM
        The time a user waits: runs `TESSERA session create IMAGE --name
        NAME --wait`, `TESSERA session app NAME APP`, redeems the link
        and waits for the first answer: for terminal, a WebSocket on
        /ws?term=new and the shell's prompt; for jupyter, GET /api/status
        until 200 (the proxy answers 503 while the app starts). Prints
        JSON: total and per-step milliseconds.

A path's "line" is sent first (TESSERA-APP/1 SECRET TARGET, for a runner
reached directly; its OK answer is read), its "cookie" goes in every
request. The clock is time.perf_counter().
"""
import base64
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse


class Conn:
    def __init__(self, p, timeout=60):
        self.s = socket.create_connection((p["host"], p["port"]), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = "%s:%d" % (p["host"], p["port"])
        self.cookie = p.get("cookie")
        self.buf = bytearray()
        if p.get("line"):
            self.s.sendall(p["line"].encode() + b"\r\n")
            ans = self.until(b"\r\n")
            if not ans.startswith(b"OK"):
                raise RuntimeError("runner answered %r" % ans)

    def fill(self):
        d = self.s.recv(262144)
        if not d:
            raise ConnectionError("closed")
        self.buf += d

    def until(self, end):
        while end not in self.buf:
            self.fill()
        i = self.buf.index(end) + len(end)
        out = bytes(self.buf[:i])
        del self.buf[:i]
        return out

    def request(self, path, extra=""):
        c = "Cookie: %s\r\n" % self.cookie if self.cookie else ""
        self.s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n%s%s\r\n" % (path, self.host, c, extra)).encode())

    def get(self, path):
        """One keep-alive GET; returns (status, body length)."""
        self.request(path)
        head = self.until(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
        n = int(m.group(1)) if m else 0
        left = n - len(self.buf)
        if left <= 0:
            del self.buf[:n]
            return status, n
        self.buf.clear()
        mv = memoryview(bytearray(1 << 20))
        while left > 0:
            r = self.s.recv_into(mv, min(left, len(mv)))
            if r == 0:
                raise ConnectionError("closed in a body")
            left -= r
        return status, n


def lat_all(paths, n):
    """p50 of n keep-alive GETs on each path, one request per path in
    turn, so that whatever else loads the machine hits every path alike."""
    conns = {}
    for k, p in paths.items():
        try:
            conns[k] = Conn(p)
        except OSError as e:
            raise RuntimeError("%s path (%s:%d): %s" % (k, p["host"], p["port"], e))
    xs = {k: [] for k in paths}
    for i in range(n + 50):  # 50 warm-up requests each
        for k, c in conns.items():
            t0 = time.perf_counter()
            st, _ = c.get("/small")
            dt = time.perf_counter() - t0
            if st != 200:
                raise RuntimeError("%s: status %d" % (k, st))
            if i >= 50:
                xs[k].append(dt)
    for c in conns.values():
        c.s.close()
    return {k: statistics.median(v) * 1e6 for k, v in xs.items()}


def big(p):
    c = Conn(p)
    t0 = time.perf_counter()
    st, n = c.get("/big")
    dt = time.perf_counter() - t0
    c.s.close()
    if st != 200:
        raise RuntimeError("status %d" % st)
    return n / dt / 1e6


def ws(p, mib):
    c = Conn(p)
    key = base64.b64encode(os.urandom(16)).decode()
    c.request("/ws", "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
              "Sec-WebSocket-Version: 13\r\n" % key)
    head = c.until(b"\r\n\r\n")
    if b" 101 " not in head.split(b"\r\n")[0] + b" ":
        raise RuntimeError("no upgrade: %r" % head[:200])
    frame = 65536
    payload = os.urandom(frame)
    # A client frame, masked with a zero key (the payload goes as it is).
    out = bytes([0x82, 0x80 | 127]) + frame.to_bytes(8, "big") + b"\0\0\0\0" + payload
    count = (mib << 20) // frame
    want = count * (frame + 10)  # the server's frames: 10-byte header
    t0 = time.perf_counter()

    def sender():
        for _ in range(count):
            c.s.sendall(out)

    th = threading.Thread(target=sender)
    th.start()
    got = len(c.buf)
    mv = memoryview(bytearray(1 << 20))
    while got < want:
        r = c.s.recv_into(mv)
        if r == 0:
            raise ConnectionError("closed in the echo")
        got += r
    dt = time.perf_counter() - t0
    th.join()
    c.s.close()
    return count * frame / dt / 1e6


def matrix(paths, rounds, big_mib, ws_mib):
    res = {k: {"lat_us": [], "http_mbs": [], "ws_mbs": []} for k in paths}

    def one(k, what, f, *a):
        try:
            res[k][what].append(f(paths[k], *a))
        except Exception as e:
            sys.exit("apps_load: %s on the %s path: %s" % (what, k, e))

    for r in range(rounds):
        order = list(paths) if r % 2 == 0 else list(reversed(paths))
        try:
            for k, v in lat_all({k: paths[k] for k in order}, 2000).items():
                res[k]["lat_us"].append(v)
        except Exception as e:
            sys.exit("apps_load: the latency: %s" % e)
        for k in order:
            one(k, "http_mbs", big)
        for k in order:
            one(k, "ws_mbs", ws, ws_mib)
        print("  round %d/%d done" % (r + 1, rounds), file=sys.stderr, flush=True)
    print(json.dumps(res))


def cookie_of(url):
    u = urllib.parse.urlsplit(url)
    s = socket.create_connection((u.hostname, u.port or 80), timeout=30)
    s.sendall(("GET %s?%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (u.path, u.query, u.netloc)).encode())
    data = b""
    while b"\r\n\r\n" not in data:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    m = re.search(rb"(?i)\r\nset-cookie: *([^;\r\n]+)", data)
    if not m:
        raise RuntimeError("no cookie from %s: %r" % (url, data[:300]))
    return m.group(1).decode()


def wait_app(tessera, image, name, app, cpu, mem):
    t = {}
    t0 = time.perf_counter()
    subprocess.run([tessera, "session", "create", image, "--name", name, "--cpu", cpu, "--mem", mem, "--wait"],
                   check=True, stdout=subprocess.DEVNULL)
    t["create"] = time.perf_counter()
    url = subprocess.run([tessera, "session", "app", name, app], check=True, capture_output=True,
                         text=True).stdout.strip()
    t["link"] = time.perf_counter()
    u = urllib.parse.urlsplit(url)
    p = {"host": u.hostname, "port": u.port, "cookie": cookie_of(url)}
    t["cookie"] = time.perf_counter()
    if app == "terminal":
        c = Conn(p)
        key = base64.b64encode(os.urandom(16)).decode()
        c.request("/ws?term=new&cols=80&rows=24", "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nOrigin: http://%s\r\n" % (key, u.netloc))
        head = c.until(b"\r\n\r\n")
        if b" 101 " not in head:
            raise RuntimeError("no upgrade: %r" % head[:300])
        # The prompt: output that ends in "$ " or "# ", maybe followed by
        # escape sequences (busybox's ash asks where the cursor is). Frames'
        # payloads are searched as they come, headers included.
        c.s.settimeout(30)
        while not re.search(rb"[$#] (\x1b\[[0-9;?]*[A-Za-z])*$", bytes(c.buf[-64:])):
            try:
                c.fill()
            except (OSError, ConnectionError) as e:
                raise RuntimeError("no prompt (%s); the terminal sent %r" % (e, bytes(c.buf[-300:])))
        c.s.close()
    else:
        while True:
            c = Conn(p)
            st, _ = c.get("/api/status")
            c.s.close()
            if st == 200:
                break
            time.sleep(0.05)
    t["answer"] = time.perf_counter()
    ms = lambda a, b: round((b - a) * 1000, 1)
    print(json.dumps({"total_ms": ms(t0, t["answer"]), "create_ms": ms(t0, t["create"]),
                      "link_ms": ms(t["create"], t["link"]), "cookie_ms": ms(t["link"], t["cookie"]),
                      "answer_ms": ms(t["cookie"], t["answer"])}))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "cookie":
        print(cookie_of(sys.argv[2]))
    elif cmd == "matrix":
        matrix(json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif cmd == "wait-app":
        wait_app(*sys.argv[2:8])
    else:
        sys.exit("usage: see the docstring")
