#!/usr/bin/env python3
"""Who holds a GPU turn over time (src/fgpu/turn.h), read from /proc/locks.

  turn_trace.py TURN_FILE PID_A PID_B SECONDS

Samples /proc/locks about every 0.3 ms for SECONDS: which process holds the
exclusive flock() on TURN_FILE, and how many wait (shared locks on
TURN_FILE.wait). Prints the share of time each of the two processes held
the turn, the length of their turns, and where each process was (its
current system call, from /proc/PID/syscall) while the other held it.
Used on a GPU machine next to run-real-gpu.sh; docs/fgpu.md has a trace."""
import os, sys, time
path, a, b, dur = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
ino = os.stat(path).st_ino
wino = os.stat(path + '.wait').st_ino if os.path.exists(path + '.wait') else -1
rows = []
states = []
t0 = time.monotonic()
while time.monotonic() - t0 < dur:
    holder, waiters = 0, 0
    with open('/proc/locks') as f:
        for line in f:
            p = line.split()
            if len(p) < 6 or p[1] == '->':
                continue
            try:
                i = int(p[5].split(':')[2])
            except (ValueError, IndexError):
                continue
            if i == wino and p[1] == 'FLOCK' and p[3] == 'READ':
                waiters += 1
            if i != ino:
                continue
            if p[1] == 'FLOCK':
                holder = int(p[4])
            elif p[1] == 'OFDLCK' and p[3] == 'READ':
                waiters += 1
    def sc(pid):
        try:
            with open(f'/proc/{pid}/syscall') as f:
                return f.read().split()[0]
        except OSError:
            return 'gone'
    st = (sc(a), sc(b))
    rows.append((time.monotonic(), holder, waiters))
    states.append((holder, waiters, st))
    time.sleep(0.0002)
n = len(rows)
def frac(c): return 100.0 * sum(1 for r in rows if c(r)) / n
print(f"samples {n} ({1000 * dur / n:.2f} ms apart): A holds {frac(lambda r: r[1] == a):.1f}%, B holds {frac(lambda r: r[1] == b):.1f}%, "
      f"other {frac(lambda r: r[1] not in (0, a, b)):.1f}%, free {frac(lambda r: r[1] == 0):.1f}%; "
      f"someone waits while A holds {frac(lambda r: r[1] == a and r[2] > 0):.1f}%, while B holds {frac(lambda r: r[1] == b and r[2] > 0):.1f}%, while free {frac(lambda r: r[1] == 0 and r[2] > 0):.1f}%")
segs = []
cur, start = None, None
for t, h, w in rows:
    if h != cur:
        if cur is not None:
            segs.append((cur, t - start))
        cur, start = h, t
for who, name in ((a, 'A'), (b, 'B'), (0, 'free')):
    d = [s for h, s in segs if h == who]
    if d:
        d.sort()
        print(f"  {name}: {len(d)} periods, mean {1000 * sum(d) / len(d):.2f} ms, median {1000 * d[len(d) // 2]:.2f} ms, max {1000 * d[-1]:.2f} ms")

from collections import Counter
for label, cond in (("B holds, A waits", lambda h, w: h == b and w > 0), ("B holds, nobody waits", lambda h, w: h == b and w == 0), ("A holds", lambda h, w: h == a)):
    ca = Counter(s[0] for h, w, s in states if cond(h, w)); cb = Counter(s[1] for h, w, s in states if cond(h, w))
    print(f"  {label}: A in {ca.most_common(4)}; B in {cb.most_common(4)}")
