#!/usr/bin/env python3
"""The app that bench/apps-proxy.sh serves from inside a session (stdlib only).

    apps_backend.py HOST PORT BIG_MIB

GET /small  -> 200 with a 13-byte body (keep-alive)
GET /big    -> 200 with BIG_MIB MiB, sent with sendfile from a file in /tmp
GET /ws     -> a WebSocket echo: every frame's payload comes back in a
               binary frame (unmasked, as a server sends)

One asyncio loop, so that thousands of connections cost no threads.
"""
import asyncio
import base64
import hashlib
import os
import struct
import sys

HOST, PORT, BIG_MIB = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
BIG = "/tmp/bench-big"
with open(BIG, "wb") as f:
    chunk = os.urandom(1 << 20)
    for _ in range(BIG_MIB):
        f.write(chunk)
BIG_LEN = BIG_MIB << 20
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC11B85"


async def ws_echo(reader, writer):
    while True:
        h = await reader.readexactly(2)
        op, ln = h[0] & 0x0F, h[1] & 0x7F
        if ln == 126:
            ln = struct.unpack("!H", await reader.readexactly(2))[0]
        elif ln == 127:
            ln = struct.unpack("!Q", await reader.readexactly(8))[0]
        mask = await reader.readexactly(4) if h[1] & 0x80 else None
        data = await reader.readexactly(ln)
        if mask and mask != b"\0\0\0\0":
            m = (mask * (ln // 4 + 1))[:ln]
            data = (int.from_bytes(data, "little") ^ int.from_bytes(m, "little")).to_bytes(ln, "little")
        if op == 8:
            writer.write(b"\x88\x00")
            await writer.drain()
            return
        if ln < 126:
            hdr = struct.pack("!BB", 0x82, ln)
        elif ln < 65536:
            hdr = struct.pack("!BBH", 0x82, 126, ln)
        else:
            hdr = struct.pack("!BBQ", 0x82, 127, ln)
        writer.write(hdr + data)
        await writer.drain()


async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            line, *hdrs = head.decode("latin-1").split("\r\n")
            path = line.split(" ")[1]
            h = {}
            for x in hdrs:
                if ":" in x:
                    k, v = x.split(":", 1)
                    h[k.strip().lower()] = v.strip()
            if path.startswith("/ws") and h.get("upgrade", "").lower() == "websocket":
                acc = base64.b64encode(hashlib.sha1(h["sec-websocket-key"].encode() + GUID).digest())
                writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                             b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + acc + b"\r\n\r\n")
                await writer.drain()
                await ws_echo(reader, writer)
                return
            if path.startswith("/big"):
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                             b"Content-Length: %d\r\n\r\n" % BIG_LEN)
                with open(BIG, "rb") as f:
                    await asyncio.get_running_loop().sendfile(writer.transport, f)
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                             b"Content-Length: 13\r\n\r\nhello, bench\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    except Exception as e:  # said, so that a failing bench shows why
        print("apps_backend: %r" % e, file=sys.stderr, flush=True)
    finally:
        writer.close()


async def main():
    srv = await asyncio.start_server(serve, HOST, PORT, backlog=4096)
    print("ready", flush=True)
    await srv.serve_forever()


asyncio.run(main())
