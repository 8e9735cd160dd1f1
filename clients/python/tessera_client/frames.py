"""The exec output stream (docs/api.md, "Exec output stream").

A sequence of frames, each an 8-byte header and a payload: byte 0 the
frame's type, bytes 1-3 zero, bytes 4-7 the payload's length (unsigned
32-bit big-endian). Types: 1 stdout bytes, 2 stderr bytes, 3 the exit code
(4 bytes, signed 32-bit big-endian), 4 an error (UTF-8 text saying why the
exit code cannot be known). The stream ends after exactly one frame of
type 3 or 4; one that ends before was cut short.
"""
import struct

STDOUT, STDERR, EXIT, ERROR = 1, 2, 3, 4
# The manager sends at most 1 MiB per output frame; a length far beyond is
# no frame of ours (a proxy's page, a corrupted stream), not a reason to
# buffer gigabytes.
MAX_PAYLOAD = 16 << 20


class FrameError(ValueError):
    """The bytes are not an exec output stream."""


class FrameDecoder:
    """Feed it the stream's bytes in pieces of any size; it gives back whole
    frames as (type, payload) pairs. ``ended`` is True once the exit or
    error frame has come."""

    def __init__(self):
        self._buf = bytearray()
        self.ended = False

    def feed(self, data):
        self._buf += data
        frames = []
        while len(self._buf) >= 8 and not self.ended:
            ftype = self._buf[0]
            (n,) = struct.unpack(">I", bytes(self._buf[4:8]))
            if ftype not in (STDOUT, STDERR, EXIT, ERROR) or self._buf[1:4] != b"\0\0\0":
                raise FrameError("not an exec output stream: a frame header of type %d" % ftype)
            if n > MAX_PAYLOAD or (ftype == EXIT and n != 4):
                raise FrameError("not an exec output stream: a type %d frame of %d bytes" % (ftype, n))
            if len(self._buf) < 8 + n:
                break
            payload = bytes(self._buf[8:8 + n])
            del self._buf[:8 + n]
            frames.append((ftype, payload))
            if ftype in (EXIT, ERROR):
                self.ended = True
        return frames

    @staticmethod
    def exit_code(payload):
        return struct.unpack(">i", payload)[0]
