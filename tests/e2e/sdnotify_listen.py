#!/usr/bin/env python3
"""systemd's side of sd_notify, for tests/e2e/test_systemd.sh.

sdnotify_listen.py SOCKET OUT HOST:PORT...

Binds a unix datagram socket at SOCKET (what NOTIFY_SOCKET names) and
writes every message it receives to OUT, one field a line ("MSG READY=1").
On READY=1 it at once tries a TCP connection to each HOST:PORT and writes
"PROBE HOST:PORT ok" or "PROBE HOST:PORT refused": a daemon that says it
is ready before its ports listen makes a refused line. It exits after
STOPPING=1, or after 120 s without one.
"""
import os
import socket
import sys
import time

path, out_path, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
if os.path.exists(path):
    os.unlink(path)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.settimeout(1.0)
deadline = time.monotonic() + 120
with open(out_path, "a", buffering=1) as out:
    while time.monotonic() < deadline:
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        fields = data.decode("utf-8", "replace").split("\n")
        for f in fields:
            if f:
                out.write(f"MSG {f}\n")
        if "READY=1" in fields:
            for t in targets:
                host, port = t.rsplit(":", 1)
                try:
                    socket.create_connection((host, int(port)), timeout=5).close()
                    out.write(f"PROBE {t} ok\n")
                except OSError:
                    out.write(f"PROBE {t} refused\n")
            out.write("PROBED\n")
        if "STOPPING=1" in fields:
            break
s.close()
os.unlink(path)
