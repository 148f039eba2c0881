#!/usr/bin/env python3
"""array.npy against python-blosc2 on a 1 GiB 2-D b2nd, alternating in every round.

    .venv/bin/python scripts/bench_npy.py ROUNDS BINARY [WINDOWS]
    e.g. .venv/bin/python scripts/bench_npy.py 3 target/release/b2fs 1000

Source: bench-data/npy2d.b2nd, float64 (16384, 8192) = 1 GiB, chunks (1024, 1024) (8 MiB),
blocks chosen by python-blosc2, ZSTD clevel 1 + SHUFFLE (python-blosc2's defaults), noisy
values (made once). Each round, for each side, in a fresh process (cold caches on both
sides; the source file itself stays in the page cache):
- load: python-blosc2 `arr[...]` (nthreads=2) vs `np.load(MNT/array.npy)` of a fresh default
  mount (`-o ro`, direct I/O);
- windows: WINDOWS random 64x64 windows: python-blosc2 `arr[window]` vs
  `np.load(MNT/array.npy, mmap_mode='r')[window]` (copied out), same windows both sides.
Printed: seconds, MiB/s (load) or windows/s, and b2fs over python in the same round.
"""

import json
import os
import sys
import tempfile
import time

import numpy as np

import benchlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "bench-data", "npy2d.b2nd")
SHAPE = (16384, 8192)


def gen():
    import blosc2

    os.makedirs(os.path.dirname(SRC), exist_ok=True)
    tmp = SRC + ".tmp"
    arr = blosc2.empty(SHAPE, dtype=np.float64, chunks=(1024, 1024), urlpath=tmp, mode="w")
    rng = np.random.default_rng(42)
    for r in range(0, SHAPE[0], 1024):
        x = np.linspace(r, r + 1024, 1024 * SHAPE[1], endpoint=False).reshape(1024, SHAPE[1])
        arr[r:r + 1024, :] = np.round(np.sin(x * 1e-3) * 1000 + rng.normal(0, 1, x.shape), 3)
    del arr
    os.replace(tmp, SRC)


def windows(n):
    rng = np.random.default_rng(11)
    return [(int(rng.integers(0, SHAPE[0] - 64)), int(rng.integers(0, SHAPE[1] - 64))) for _ in range(n)]


def child(kind, path, n):
    """One measurement in this (fresh) process; prints JSON."""
    t = time.perf_counter()
    if kind == "py-load":
        import blosc2

        blosc2.set_nthreads(2)
        a = blosc2.open(path, mode="r")[...]
        nbytes = a.nbytes
    elif kind == "npy-load":
        a = np.load(path)
        nbytes = a.nbytes
    elif kind == "py-win":
        import blosc2

        blosc2.set_nthreads(2)
        arr = blosc2.open(path, mode="r")
        t = time.perf_counter()
        s = 0.0
        for r, c in windows(n):
            s += float(arr[r:r + 64, c:c + 64][0, 0])
        nbytes = s
    elif kind == "npy-win":
        m = np.load(path, mmap_mode="r")
        t = time.perf_counter()
        s = 0.0
        for r, c in windows(n):
            s += float(np.array(m[r:r + 64, c:c + 64])[0, 0])
        nbytes = s
    else:
        raise SystemExit(kind)
    print(json.dumps({"seconds": time.perf_counter() - t, "bytes": nbytes}))


def run(kind, path, n=0):
    return benchlib.child_json(__file__, "child", kind, path, n)


def mounted(binary, mp, fn):
    with benchlib.Mount(binary, SRC, mp):
        return fn(os.path.join(mp, "array.npy"))


def main():
    if sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    rounds, binary = int(sys.argv[1]), sys.argv[2]
    nwin = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    if not os.path.exists(SRC):
        gen()
    with open(SRC, "rb") as f:
        while f.read(1 << 24):
            pass
    mp = os.path.realpath(tempfile.mkdtemp())
    try:
        for r in range(1, rounds + 1):
            py = run("py-load", SRC)
            ours = mounted(binary, mp, lambda p: run("npy-load", p))
            mib = py["bytes"] / 2**20
            print(f"round {r}: load  python {mib / py['seconds']:.0f} MiB/s"
                  f" | b2fs {mib / ours['seconds']:.0f} MiB/s"
                  f" | {py['seconds'] / ours['seconds']:.2f}x", flush=True)
            pyw = run("py-win", SRC, nwin)
            ourw = mounted(binary, mp, lambda p: run("npy-win", p, nwin))
            assert pyw["bytes"] == ourw["bytes"], "the windows differ"
            print(f"round {r}: {nwin} windows  python {nwin / pyw['seconds']:.0f}/s"
                  f" | b2fs {nwin / ourw['seconds']:.0f}/s"
                  f" | {pyw['seconds'] / ourw['seconds']:.2f}x", flush=True)
    finally:
        os.rmdir(mp)


if __name__ == "__main__":
    main()
