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

    .venv/bin/python scripts/bench_ctable.py gen24 DIR
        DIR/t24.b2d, DIR/t24.b2z (BENCHMARKS.md, "Session 24"): one CTable of 6,000,000 rows,
        6 columns (float64, int32, bool, float32, int64, int16; python-blosc2's default chunks),
        5% of the rows deleted at random and the range 2,000,000-2,300,000
    .venv/bin/python scripts/bench_ctable.py vs SOURCE BINARY ROUNDS PATTERN[,PATTERN...]
        each PATTERN through a fresh mount of SOURCE by BINARY (`table.npy`) against
        python-blosc2 reading the same rows of SOURCE, each side in a fresh process, the order
        swapped every round; per-round time ratios b2fs / python-blosc2. Patterns:
        load     np.load(table.npy) / np.asarray(CTable.open(SOURCE))
        mmsum    np.load(table.npy, mmap_mode='r')['a'].sum() / CTable['a'][:].sum()
        mmall    every column summed through the map / every column read and summed
        slices   random slices of 100 rows, np.array(map[s:s + 100]) (1000 of them) /
                 np.asarray(CTable.slice(s, s + 100, copy=False)) (40: ~75 ms each)
        The ratios are of operations per second (a slice, or a whole pattern), b2fs over
        python-blosc2: above 1, b2fs is faster.
    .venv/bin/python scripts/bench_ctable.py ab SOURCE ROUNDS A B PATTERN[,PATTERN...]
        same-run A/B of two binaries on the table.npy side of those patterns (a fresh mount
        and a fresh process each, the order swapped every round): per-round rate ratios A / B

Run under /work/bin/quietlong (or on an idle machine).
"""
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import make_dataclass

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import benchlib  # noqa: E402

# Random slices per run through the map, and through python-blosc2 (each of its row slices of a
# table with deleted rows resolves the live positions of the whole table: ~75 ms a slice).
SLICES, SLICES_B2, SLICE_ROWS = 1000, 40, 100


def schema(cols):
    """The CTable row class of the columns `cols` ((name, numpy type string), in order) and their
    records' numpy dtype: what gen and gen24 write."""
    import blosc2

    kinds = {"<f8": (float, blosc2.float64), "<f4": (float, blosc2.float32),
             "<i8": (int, blosc2.int64), "<i4": (int, blosc2.int32), "<i2": (int, blosc2.int16),
             "?": (bool, blosc2.bool)}
    row = make_dataclass("R", [(name, kinds[t][0], blosc2.field(kinds[t][1]())) for name, t in cols])
    return row, np.dtype(cols)


def gen(d):
    import blosc2

    R, dtype = schema([("a", "<f8"), ("b", "<i4"), ("c", "?"), ("d", "<f4")])
    os.makedirs(d, exist_ok=True)
    n = 4_000_000
    rng = np.random.default_rng(1)
    data = np.zeros(n, dtype=dtype)
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


def gen24(d):
    import blosc2

    R, dtype = schema([("a", "<f8"), ("b", "<i4"), ("c", "?"), ("d", "<f4"), ("e", "<i8"),
                       ("f", "<i2")])
    os.makedirs(d, exist_ok=True)
    n = 6_000_000
    rng = np.random.default_rng(24)
    data = np.zeros(n, dtype=dtype)
    data["a"] = rng.normal(size=n)
    data["b"] = np.arange(n)
    data["c"] = data["b"] % 7 == 0
    data["d"] = rng.random(n).astype(np.float32)
    data["e"] = 1_700_000_000_000 + np.arange(n) * 1000 + rng.integers(0, 999, n)
    data["f"] = rng.integers(-1000, 1000, n).astype(np.int16)
    gone = np.union1d(rng.choice(n, n // 20, replace=False), np.arange(2_000_000, 2_300_000))
    for ext in ("b2d", "b2z"):
        t = blosc2.CTable(R, new_data=data, urlpath=os.path.join(d, f"t24.{ext}"), mode="w")
        t.close()
        t = blosc2.CTable.open(os.path.join(d, f"t24.{ext}"), mode="a")
        t.delete(gone)  # logical = physical indices: nothing was deleted before
        t.close()


def child(pattern, path, seed):
    """One measurement in this (fresh) process: PATTERN on `table.npy` at PATH (`fs-*`) or on the
    CTable at PATH (`b2-*`); prints {"seconds", "n" (bytes or operations), "check"}."""
    side, what = pattern.split("-", 1)
    if side == "b2":
        import blosc2
    t0 = time.perf_counter()
    if side == "fs":
        if what == "load":
            a = np.load(path)
            n, check = 1, float(a["a"].sum())
        else:
            m = np.load(path, mmap_mode="r")
    else:
        t = blosc2.CTable.open(path, mode="r")
        if what == "load":
            a = np.asarray(t)
            n, check = 1, float(a["a"].sum())
    names = ("a", "b", "c", "d", "e", "f")
    if what == "mmsum":
        check = float(m["a"].sum()) if side == "fs" else float(t["a"][:].sum())
        n = 1
    elif what == "mmall":
        if side == "fs":
            check = sum(float(m[c].sum()) for c in names)
        else:
            check = sum(float(t[c][:].sum()) for c in names)
        n = 1
    elif what == "slices":
        rows = m.shape[0] if side == "fs" else t.nrows
        n = SLICES if side == "fs" else SLICES_B2
        starts = np.random.default_rng(int(seed)).integers(0, rows - SLICE_ROWS, SLICES)[:n]
        check = 0.0
        for s in starts:
            s = int(s)
            if side == "fs":
                got = np.array(m[s:s + SLICE_ROWS])
            else:
                got = np.asarray(t.slice(s, s + SLICE_ROWS, copy=False))
            check += float(got["a"].sum()) + float(got["e"][-1])
            if s == int(starts[SLICES_B2 - 1]):
                # The checksum of the slices both sides read.
                out_check = check
        check = out_check
    out = {"seconds": time.perf_counter() - t0, "n": n, "check": check}
    print(json.dumps(out), flush=True)


def fs_round(binary, src, pattern, seed):
    """`fs-PATTERN` in a fresh process on a fresh mount of SRC by BINARY: (result, daemon CPU)."""
    with benchlib.Mount(binary, src) as m:
        c0 = m.cpu_seconds()
        got = benchlib.child_json(__file__, "child", f"fs-{pattern}",
                                  os.path.join(m.mp, "table.npy"), seed)
        return got, m.cpu_seconds() - c0


def vs(src, binary, rounds, patterns):
    for pattern in patterns:
        fs, b2 = [], []
        for i in range(rounds):
            seed = 1000 + i
            for side in ("fs", "b2") if i % 2 == 0 else ("b2", "fs"):
                if side == "fs":
                    got, cpu = fs_round(binary, src, pattern, seed)
                    fs.append(got)
                else:
                    got = benchlib.child_json(__file__, "child", f"b2-{pattern}", src, seed)
                    b2.append(got)
            assert abs(fs[-1]["check"] - b2[-1]["check"]) <= 1e-6 * max(1.0, abs(b2[-1]["check"])), \
                (pattern, fs[-1]["check"], b2[-1]["check"])
            print(f"{pattern} round {i + 1}: table.npy {fs[-1]['seconds'] * 1e3:.0f} ms for"
                  f" {fs[-1]['n']} (daemon CPU {cpu:.2f} s), python-blosc2"
                  f" {b2[-1]['seconds'] * 1e3:.0f} ms for {b2[-1]['n']}", flush=True)
        m = statistics.median

        def per(x):
            return x["seconds"] / x["n"] * 1e3

        r = [(x["n"] / x["seconds"]) / (y["n"] / y["seconds"]) for x, y in zip(fs, b2)]
        print(f"{os.path.basename(src)} {pattern} (ms per operation): table.npy median"
              f" {m(map(per, fs)):.3g} ({min(map(per, fs)):.3g}-{max(map(per, fs)):.3g}),"
              f" python-blosc2 {m(map(per, b2)):.3g} ({min(map(per, b2)):.3g}-{max(map(per, b2)):.3g});"
              f" rate b2fs / python-blosc2 per round {[round(v, 2) for v in r]} median {m(r):.2f}",
              flush=True)


def ab(src, rounds, a, b, patterns):
    for pattern in patterns:
        res = {a: [], b: []}
        for i in range(rounds):
            seed = 1000 + i
            for x in (a, b) if i % 2 == 0 else (b, a):
                got, cpu = fs_round(x, src, pattern, seed)
                res[x].append((got["n"] / got["seconds"], cpu, got["check"]))
            assert res[a][-1][2] == res[b][-1][2], (pattern, res[a][-1][2], res[b][-1][2])
            print(f"{pattern} round {i + 1}: A {res[a][-1][0]:.4g}/s (daemon CPU {res[a][-1][1]:.2f} s),"
                  f" B {res[b][-1][0]:.4g}/s ({res[b][-1][1]:.2f} s)", flush=True)
        r = [x[0] / y[0] for x, y in zip(res[a], res[b])]
        m = statistics.median
        print(f"{os.path.basename(src)} {pattern}: rate A / B per round {[round(v, 2) for v in r]}"
              f" median {m(r):.3f} (min {min(r):.2f}, max {max(r):.2f}); median daemon CPU A"
              f" {m(x[1] for x in res[a]):.3f} s, B {m(x[1] for x in res[b]):.3f} s", flush=True)


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
    elif cmd == "gen24":
        gen24(sys.argv[2])
    elif cmd == "child":
        child(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "vs":
        vs(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5].split(","))
    elif cmd == "ab":
        ab(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6].split(","))
    elif cmd == "read":
        read(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
