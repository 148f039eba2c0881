#!/usr/bin/env python3
"""Where the time of the mmap windows of scripts/bench_mount.py goes, per window.

    .venv/bin/python scripts/win_accounting.py cpu BINARY [ROUNDS]
    .venv/bin/python scripts/win_accounting.py blocks [HEADER_BYTES]
    .venv/bin/python scripts/win_accounting.py faults [CACHED_BLOCKS] [ROWS DECODES]

`cpu`: alternating rounds of python-blosc2 `arr[w]` and BINARY's mount of win.b2nd
(`np.load(MNT/array.npy, mmap_mode='r')[w]`), the same 300 random 64x64 windows per round
(seed = round), each side in a fresh process (the mount fresh too). Per window: wall time, the
reader's CPU (its own user + system time), the daemon's CPU (utime + stime from /proc), and the
machine's idle CPU time over the loop (from /proc/stat; 2 vCPUs give up to 2 ms of CPU per
ms). The daemon's clock ticks are 10 ms: per-window figures are +-0.03 ms. Run it on an idle
machine (/work/bin/quietlong or equivalent); processes at a niceness other than 19 still count
as load.

`blocks`: how many blocks (16 rows x 1024 items of win.b2nd: one chunk row of one chunk's
band) the windows need, counted from the geometry alone: python-blosc2 needs the blocks the
window's items lie in; a mapped reader needs every byte of every 4 KiB page its rows touch, so
b2fs must decode the blocks of whole pages. With numpy's 128-byte header the data is 128 bytes
off the pages, so every other page of a row starts with the last 16 items of the previous
chunk (or of the previous row). HEADER_BYTES (default 128 and 4096) sets the header length.

`faults`: a model of what b2fs's page faults decode and store for the same windows (the
data on the page grid, as `array.npy` has it since session 11): a fault decodes its page's
block and stores the pages below it (the same columns of the next ROWS rows, default 64) as
far as DECODES more blocks (default 4) hold them, 32 rows and 2 blocks when the fault lies
less than a row after the one before (`src/tree/npy.rs`, a scan in file order), and the pages
after it in its row while their blocks are decoded; decoded blocks stay in an LRU of
CACHED_BLOCKS (default 256: the 32 MiB block cache). `faults 256 32 2` is the rule before
session 16. Per window:
blocks decoded, against the fewest that could be (the blocks the window's pages lie in and
the cache does not hold when it starts); faults; pages stored, against the pages the window
reads (each fault's own page comes with its answer).
"""

import collections
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_mount as bm  # noqa: E402

LOOP = r'''
import json, os, sys, time
import numpy as np
sys.path.insert(0, sys.argv[3])
import bench_mount as bm
if sys.argv[1] == "py":
    import blosc2
    blosc2.set_nthreads(2)
    arr = blosc2.open(bm.WIN, mode="r")
else:
    arr = np.load(sys.argv[1], mmap_mode="r")
ws = bm.windows(bm.NWIN, int(sys.argv[2]))
def idle():
    v = list(map(int, open("/proc/stat").readline().split()[1:]))
    return v[3] + v[4]
c0, i0, t0 = os.times(), idle(), time.perf_counter()
s = 0.0
for r, c in ws:
    s += float(np.array(arr[r:r + 64, c:c + 64])[0, 0])
wall, i1, c1 = time.perf_counter() - t0, idle(), os.times()
cpu = (c1.user - c0.user) + (c1.system - c0.system)
print(json.dumps({"n": len(ws), "wall": wall, "cpu": cpu, "idle": (i1 - i0) / 100, "check": s}))
'''


def loop(target, seed):
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", LOOP, target, str(seed), here],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def cpu(binary, rounds):
    bm.warm_sources()
    tick = os.sysconf("SC_CLK_TCK")
    for seed in range(1, rounds + 1):
        py = loop("py", seed)
        with bm.Mounted(binary, bm.WIN) as m:
            stat = f"/proc/{m.pid}/stat"

            def daemon():
                with open(stat) as f:
                    v = f.read().rsplit(")", 1)[1].split()
                return (int(v[11]) + int(v[12])) / tick

            d0 = daemon()
            ours = loop(os.path.join(m.mp, "array.npy"), seed)
            d1 = daemon()
        assert py["check"] == ours["check"], "the windows differ"
        n = ours["n"]
        ms = lambda x: f"{x / n * 1e3:.3f}"  # noqa: E731
        print(f"round {seed}: python {py['n'] / py['wall']:.0f}/s (wall {ms(py['wall'])} ms, "
              f"CPU {ms(py['cpu'])} ms, idle {ms(py['idle'])} ms per window); b2fs "
              f"{n / ours['wall']:.0f}/s (wall {ms(ours['wall'])} ms, reader CPU "
              f"{ms(ours['cpu'])} ms, daemon CPU {ms(d1 - d0)} ms, idle {ms(ours['idle'])} ms)")


def blocks(headers):
    rb = bm.WSHAPE[1] * 8
    ws = bm.windows(bm.NWIN, 1)
    py = sum(len({(row // 16, cc // 1024) for row in range(r, r + 64) for cc in (c, c + 63)})
             for r, c in ws)
    print(f"python-blosc2: {py / len(ws):.2f} blocks per window")
    for h in headers:
        need = 0
        for r, c in ws:
            got = set()
            for row in range(r, r + 64):
                s = h + row * rb + c * 8
                for page in range(s // 4096, (s + 511) // 4096 + 1):
                    for d in (max(page * 4096 - h, 0), page * 4096 + 4095 - h):
                        got.add((d // rb // 16, d % rb // 8 // 1024))
            need += len(got)
        print(f"pages of array.npy with a {h}-byte header: {need / len(ws):.2f} blocks per window")


def faults(cached, rows, decodes):
    """The `faults` model (see the module doc): src/tree/npy.rs's NEAR_PAGES and
    BELOW_DECODES (`rows`, `decodes`; SCAN_PAGES and SCAN_DECODES), src/fuse/push.rs's page
    stores."""
    row_pages = bm.WSHAPE[1] * 8 // 4096
    cache = collections.OrderedDict()
    tot = collections.Counter()

    def block(row, page):  # blocks of 16 rows x 1024 items: two pages of each row
        return row // 16, page // 2

    def have(b, decode):
        if b in cache:
            cache.move_to_end(b)
            return True
        if decode:
            tot["decoded"] += 1
            cache[b] = True
            if len(cache) > cached:
                cache.popitem(last=False)
        return decode

    ws = bm.windows(bm.NWIN, 1)
    latest = None
    for r, c in ws:
        pages = sorted({c * 8 // 4096, (c * 8 + 511) // 4096})
        want = {(row, p) for row in range(r, r + 64) for p in pages}
        tot["fewest"] += len({block(row, p) for row, p in want} - set(cache))
        tot["read"] += len(want)
        stored = set()
        for row, p in sorted(want):
            if (row, p) in stored:
                continue
            tot["faults"] += 1
            scan = latest is not None and 0 < (row * row_pages + p) - latest < row_pages
            latest = row * row_pages + p
            near, left = (32, 2) if scan and rows > 32 else (rows, decodes)
            have(block(row, p), True)
            stored.add((row, p))
            q = p + 1
            while q < row_pages and (row, q) not in stored and have(block(row, q), False):
                stored.add((row, q))
                tot["stored"] += 1
                q += 1
            for k in range(1, near + 1):
                below = row + k
                if below >= bm.WSHAPE[0]:
                    break
                b = block(below, p)
                if b not in cache:
                    if left == 0:
                        break
                    left -= 1
                have(b, True)
                if (below, p) not in stored:
                    stored.add((below, p))
                    tot["stored"] += 1
    n = len(ws)
    print(f"blocks decoded per window: {tot['decoded'] / n:.2f} (fewest with the same cache: "
          f"{tot['fewest'] / n:.2f}); faults {tot['faults'] / n:.2f}; pages stored "
          f"{tot['stored'] / n:.1f} + {tot['faults'] / n:.2f} answered, read {tot['read'] / n:.1f}")


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("cpu", "blocks", "faults"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "cpu":
        cpu(os.path.realpath(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 3)
    elif sys.argv[1] == "faults":
        args = [int(a) for a in sys.argv[2:5]]
        cached, rows, decodes = args + [256, 64, 4][len(args):]
        faults(cached, rows, decodes)
    else:
        blocks([int(sys.argv[2])] if len(sys.argv) > 2 else [128, 4096])


if __name__ == "__main__":
    main()
