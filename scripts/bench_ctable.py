#!/usr/bin/env python3
"""Measurements of `table.npy` of python-blosc2 CTables in stores (BENCHMARKS.md, "Session 22").

    .venv/bin/python scripts/bench_ctable.py gen DIR
        DIR/plain.b2d, DIR/holes.b2d: CTables of 4,000,000 rows (float64, int32, bool, float32;
        python-blosc2's default chunks), holes.b2d with 10% of the rows deleted at random
        (about 360,000 runs of valid rows); DIR/many.b2z: a TreeStore of 10,000 leaves
        (scripts/oracle/stores.py many)
    .venv/bin/python scripts/bench_ctable.py mount-ab SOURCE ROUNDS A B
        same-run A/B of `b2fs mount -o ro SOURCE` until it returns, binaries alternating
        (order swapped every round): per-round time ratios A / B, median, range
    .venv/bin/python scripts/bench_ctable.py read-ab SOURCE ROUNDS A B
        same-run A/B of whole reads (np.load) of table.npy: both binaries mounted at once, the
        reads alternating (order swapped every round); per-round time ratios A / B
    .venv/bin/python scripts/bench_ctable.py read SOURCE BINARY ROUNDS
        np.load(MOUNT/table.npy) (a whole read) against numpy.asarray(CTable.open(SOURCE)) in
        python-blosc2, alternating in each round (rows checked equal once)

Run under /work/bin/quietlong (or on an idle machine).
"""
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def gen(d):
    import blosc2

    @dataclass
    class R:
        a: float = blosc2.field(blosc2.float64())
        b: int = blosc2.field(blosc2.int32())
        c: bool = blosc2.field(blosc2.bool())
        d: float = blosc2.field(blosc2.float32())

    os.makedirs(d, exist_ok=True)
    n = 4_000_000
    rng = np.random.default_rng(1)
    data = np.zeros(n, dtype=[("a", "<f8"), ("b", "<i4"), ("c", "?"), ("d", "<f4")])
    data["a"] = rng.random(n)
    data["b"] = np.arange(n)
    data["c"] = data["b"] % 3 == 0
    data["d"] = data["a"]
    for name in ("plain", "holes"):
        t = blosc2.CTable(R, new_data=data, urlpath=os.path.join(d, f"{name}.b2d"), mode="w")
        if name == "holes":
            t.delete(np.sort(rng.choice(n, n // 10, replace=False)))
        t.close()
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts/oracle/stores.py"), "many",
                    os.path.join(d, "many.b2z"), "10000"], check=True)


def mount_ab(src, rounds, a, b):
    mp = f"/tmp/b2fs-bench-ctable-{os.getpid()}"
    os.makedirs(mp, exist_ok=True)
    res = {a: [], b: []}
    for i in range(rounds):
        for x in (a, b) if i % 2 == 0 else (b, a):
            t0 = time.perf_counter()
            subprocess.run([x, "mount", "-o", "ro", src, mp], check=True)
            res[x].append(time.perf_counter() - t0)
            os.listdir(mp)
            subprocess.run([x, "umount", mp], check=True)
        print(f"round {i + 1}: A {res[a][-1] * 1e3:.1f} ms, B {res[b][-1] * 1e3:.1f} ms", flush=True)
    r = [x / y for x, y in zip(res[a], res[b])]
    print("A/B time per round", [round(v, 2) for v in r], "median", round(statistics.median(r), 3),
          "min", round(min(r), 2), "max", round(max(r), 2))
    print("median ms: A", round(statistics.median(res[a]) * 1e3, 1),
          "B", round(statistics.median(res[b]) * 1e3, 1))


def read_ab(src, rounds, a, b):
    mps = {a: f"/tmp/b2fs-bench-ctable-{os.getpid()}-a", b: f"/tmp/b2fs-bench-ctable-{os.getpid()}-b"}
    for x, mp in mps.items():
        os.makedirs(mp, exist_ok=True)
        subprocess.run([x, "mount", "-o", "ro", src, mp], check=True)
    try:
        res = {a: [], b: []}
        for i in range(rounds):
            for x in (a, b) if i % 2 == 0 else (b, a):
                t0 = time.perf_counter()
                np.load(os.path.join(mps[x], "table.npy"))
                res[x].append(time.perf_counter() - t0)
        got = [np.load(os.path.join(mp, "table.npy")) for mp in mps.values()]
        assert np.array_equal(got[0], got[1])
        r = [x / y for x, y in zip(res[a], res[b])]
        print(src, "time A/B per round", [round(v, 2) for v in r], "median",
              round(statistics.median(r), 3), "median ms A", round(statistics.median(res[a]) * 1e3),
              "B", round(statistics.median(res[b]) * 1e3))
    finally:
        for x, mp in mps.items():
            subprocess.run([x, "umount", mp], check=True)


def read(src, binary, rounds):
    import blosc2

    mp = f"/tmp/b2fs-bench-ctable-{os.getpid()}"
    os.makedirs(mp, exist_ok=True)
    subprocess.run([binary, "mount", "-o", "ro", src, mp], check=True)
    try:
        fs, b2 = [], []
        for i in range(rounds):
            for which in ("fs", "b2") if i % 2 == 0 else ("b2", "fs"):
                t0 = time.perf_counter()
                if which == "fs":
                    a = np.load(os.path.join(mp, "table.npy"))
                else:
                    a = np.asarray(blosc2.CTable.open(src, mode="r"))
                (fs if which == "fs" else b2).append(time.perf_counter() - t0)
            if i == 0:
                want = np.asarray(blosc2.CTable.open(src, mode="r"))
                got = np.load(os.path.join(mp, "table.npy"))
                assert got.dtype == want.dtype and np.array_equal(got, want)
        mib = a.nbytes / 2**20
        m = statistics.median
        print(f"{src}: {a.shape[0]} rows, {mib:.0f} MiB; np.load(table.npy) median {m(fs) * 1e3:.0f} ms"
              f" ({mib / m(fs):.0f} MiB/s, {min(fs) * 1e3:.0f}-{max(fs) * 1e3:.0f});"
              f" np.asarray(CTable) median {m(b2) * 1e3:.0f} ms ({min(b2) * 1e3:.0f}-{max(b2) * 1e3:.0f});"
              f" b2fs / python-blosc2 per round {[round(x / y, 2) for x, y in zip(fs, b2)]}")
    finally:
        subprocess.run([binary, "umount", mp], check=True)


def main():
    cmd = sys.argv[1]
    if cmd == "gen":
        gen(sys.argv[2])
    elif cmd == "mount-ab":
        mount_ab(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif cmd == "read-ab":
        read_ab(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif cmd == "read":
        read(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
