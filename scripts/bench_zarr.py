#!/usr/bin/env python3
"""The Zarr view against python-blosc2 and a native Zarr copy, alternating in every round.

    .venv-zarr/bin/python scripts/bench_zarr.py ROUNDS BINARY [WINDOWS [windows]]
    e.g. .venv-zarr/bin/python scripts/bench_zarr.py 3 target/release/b2fs 200
    (bash scripts/bench.sh zarr runs it with these arguments after a release build)

Sources (made once, in bench-data/):
- npy2d.b2nd: the 1 GiB array of scripts/bench_npy.py (float64 (16384, 8192), chunks (1024,
  1024) = 8 MiB, python-blosc2's blocks, ZSTD clevel 1 + SHUFFLE, noisy values);
- npy2d.zarr: a native Zarr v3 copy written by zarr-python (same chunks, zstd level 1);
- many10000.b2z: a TreeStore of 10,000 small leaves (scripts/oracle/stores.py many).

Each round, each measurement in a fresh process (cold process caches; the source files stay in
the page cache, read once before the first round), b2fs through a fresh `-o ro` mount:
- load: `xr.open_zarr(MNT/zarr)["npy2d"].values` against python-blosc2 `arr[...]`
  (nthreads=2), zarr-python `z[...]` of the native copy, and `xr.open_zarr` of the native copy;
- metadata: time from a fresh mount of many10000.b2z to the first read of its root zarr.json
  (open + read + json.loads of the 6.7 MB document: what b2fs spends building the consolidated
  metadata), then `zarr.open_consolidated(MNT/zarr)` returning with its 10,000 arrays listed,
  in another process (most of it is zarr-python building 10,000 array objects), twice;
- windows: WINDOWS random 64x64 windows through zarr-python `z[window]` of MNT/zarr/npy2d,
  the same on a `-o ro,zarr_shards` mount (shards = chunks, inner chunks = blocks: only the
  blocks a window touches are read), TensorStore's `zarr3` driver on both views,
  python-blosc2 `arr[window]`, and zarr-python on the native copy (same windows everywhere).
A last argument `windows` runs only the windows. Prints each round, then for every measurement the fastest and the median, and the ratios of
python-blosc2's and the native copy's median time to b2fs's (above 1: b2fs is faster).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import benchlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "bench-data")
SRC = os.path.join(DATA, "npy2d.b2nd")
NATIVE = os.path.join(DATA, "npy2d.zarr")
MANY = os.path.join(DATA, "many10000.b2z")
SHAPE = (16384, 8192)
REFPY = os.path.join(ROOT, ".venv", "bin", "python")


def gen():
    if not os.path.exists(SRC):
        # The same array as bench_npy.py (its generator, run by the reference venv).
        subprocess.run([REFPY, "-c", "import runpy, sys; sys.argv=['x']; "
                        "sys.path.insert(0, 'scripts'); "
                        "m = runpy.run_path('scripts/bench_npy.py'); m['gen']()"],
                       check=True, cwd=ROOT)
    if not os.path.exists(os.path.join(NATIVE, "zarr.json")):
        import blosc2
        import zarr
        from zarr.codecs import ZstdCodec

        tmp = NATIVE + ".tmp"
        src = blosc2.open(SRC, mode="r")
        z = zarr.create_array(tmp, shape=SHAPE, chunks=(1024, 1024), dtype="f8",
                              compressors=ZstdCodec(level=1), dimension_names=["y", "x"],
                              overwrite=True)
        for r in range(0, SHAPE[0], 1024):
            z[r:r + 1024, :] = src[r:r + 1024, :]
        os.replace(tmp, NATIVE)
    if not os.path.exists(MANY):
        subprocess.run([REFPY, "scripts/oracle/stores.py", "many", MANY + ".tmp", "10000"],
                       check=True, cwd=ROOT)
        os.replace(MANY + ".tmp", MANY)


def warm(path):
    paths = [path] if os.path.isfile(path) else [os.path.join(d, f) for d, _, fs in os.walk(path)
                                                 for f in fs]
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def windows(n):
    rng = np.random.default_rng(11)
    return [(int(rng.integers(0, SHAPE[0] - 64)), int(rng.integers(0, SHAPE[1] - 64)))
            for _ in range(n)]


def child(kind, path, n):
    """One measurement in this (fresh) process; prints JSON {seconds, check}."""
    if kind == "py-load":
        import blosc2

        blosc2.set_nthreads(2)
        t = time.perf_counter()
        a = blosc2.open(path, mode="r")[...]
    elif kind in ("xr-load", "xr-native"):
        import xarray as xr

        t = time.perf_counter()
        a = xr.open_zarr(path, consolidated=True)["npy2d" if kind == "xr-load" else "data"].values
    elif kind == "zarr-native":
        import zarr

        t = time.perf_counter()
        a = zarr.open_array(path, mode="r")[...]
    elif kind == "meta-raw":
        t = time.perf_counter()
        with open(os.path.join(path, "zarr.json"), "rb") as f:
            doc = json.loads(f.read())
        a = np.array([len(doc["consolidated_metadata"]["metadata"])])
    elif kind == "meta":
        import zarr

        t = time.perf_counter()
        g = zarr.open_consolidated(path, mode="r")
        a = np.array([sum(1 for _ in g.arrays()) + sum(1 for _ in g.members(max_depth=None))])
    elif kind in ("py-win", "zarr-win", "ts-win"):
        if kind == "py-win":
            import blosc2

            blosc2.set_nthreads(2)
            arr = blosc2.open(path, mode="r")
        elif kind == "zarr-win":
            import zarr

            arr = zarr.open_array(path, mode="r")
        else:
            import tensorstore as ts

            store = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path + "/"}},
                            read=True).result()

            class TsWindows:
                def __getitem__(self, sl):
                    return store[sl].read().result()

            arr = TsWindows()
        t = time.perf_counter()
        s = 0.0
        for r, c in windows(n):
            s += float(arr[r:r + 64, c:c + 64].sum())
        a = np.array([s])
    else:
        raise SystemExit(kind)
    secs = time.perf_counter() - t
    check = float(a[::4096].sum()) if a.dtype.kind == "f" else int(a.sum())
    print(json.dumps({"seconds": secs, "check": check}))


def run(kind, path, n=0):
    return benchlib.child_json(__file__, "child", kind, path, n)


def main():
    if sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    rounds, binary = int(sys.argv[1]), os.path.abspath(sys.argv[2])
    nwin = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    windows_only = sys.argv[4:5] == ["windows"]
    gen()
    for p in (SRC, NATIVE, MANY):
        warm(p)
    mp = os.path.realpath(tempfile.mkdtemp())
    res = {}

    def note(key, secs):
        res.setdefault(key, []).append(secs)

    # The native copy's array is "data" in a group, so xr.open_zarr opens it the same way.
    native_group = NATIVE + ".group"
    if not os.path.exists(os.path.join(native_group, "zarr.json")):
        import zarr

        os.makedirs(native_group, exist_ok=True)
        os.symlink(NATIVE, os.path.join(native_group, "data"))
        zarr.open_group(native_group, mode="a")
        zarr.consolidate_metadata(native_group)
    try:
        for r in range(1, rounds + 1):
            if not windows_only:
                py = run("py-load", SRC)
                with benchlib.Mount(binary, SRC, mp):
                    ours = run("xr-load", os.path.join(mp, "zarr"))
                nat = run("zarr-native", NATIVE)
                natx = run("xr-native", native_group)
                assert py["check"] == ours["check"] == nat["check"] == natx["check"], "loads differ"
                for k, v in (("load python-blosc2", py), ("load b2fs xarray", ours),
                             ("load native zarr-python", nat), ("load native xarray", natx)):
                    note(k, v["seconds"])
                gib = SHAPE[0] * SHAPE[1] * 8 / 2**30
                print(f"round {r}: 1 GiB load  python-blosc2 {gib / py['seconds']:.2f} GiB/s"
                      f" | b2fs+xarray {gib / ours['seconds']:.2f} GiB/s"
                      f" | native zarr-python {gib / nat['seconds']:.2f} GiB/s"
                      f" | native xarray {gib / natx['seconds']:.2f} GiB/s", flush=True)
                t0 = time.perf_counter()
                with benchlib.Mount(binary, MANY, mp) as m:
                    raw = run("meta-raw", os.path.join(mp, "zarr"))
                    first = run("meta", os.path.join(mp, "zarr"))
                    mount_to_open = time.perf_counter() - t0
                    second = run("meta", os.path.join(mp, "zarr"))
                    mount_s = m.mount_seconds
                note("10,000-member .b2z: mount", mount_s)
                note("10,000-member .b2z: first read of zarr/zarr.json", raw["seconds"])
                note("10,000-member .b2z: first open_consolidated", first["seconds"])
                note("10,000-member .b2z: second open_consolidated", second["seconds"])
                print(f"round {r}: 10,000-member .b2z  mount {mount_s:.3f} s, first read of zarr.json "
                      f"{raw['seconds']:.3f} s, open_consolidated "
                      f"{first['seconds']:.3f} s (mount to opened {mount_to_open:.2f} s with imports), "
                      f"again {second['seconds']:.3f} s, {first['check']} nodes", flush=True)
            pyw = run("py-win", SRC, nwin)
            with benchlib.Mount(binary, SRC, mp):
                ourw = run("zarr-win", os.path.join(mp, "zarr", "npy2d"), nwin)
            with benchlib.Mount(binary, SRC, mp, opts=("ro", "zarr_shards")):
                shw = run("zarr-win", os.path.join(mp, "zarr", "npy2d"), nwin)
            with benchlib.Mount(binary, SRC, mp):
                tsw = run("ts-win", os.path.join(mp, "zarr", "npy2d"), nwin)
            with benchlib.Mount(binary, SRC, mp, opts=("ro", "zarr_shards")):
                tsshw = run("ts-win", os.path.join(mp, "zarr", "npy2d"), nwin)
            natw = run("zarr-win", NATIVE, nwin)
            assert (pyw["check"] == ourw["check"] == shw["check"] == natw["check"] == tsw["check"]
                    == tsshw["check"]), "the windows differ"
            note("windows python-blosc2", pyw["seconds"])
            note("windows b2fs zarr-python", ourw["seconds"])
            note("windows b2fs zarr_shards zarr-python", shw["seconds"])
            note("windows b2fs TensorStore", tsw["seconds"])
            note("windows b2fs zarr_shards TensorStore", tsshw["seconds"])
            note("windows native zarr-python", natw["seconds"])
            print(f"round {r}: {nwin} windows 64x64  python-blosc2 {nwin / pyw['seconds']:.0f}/s"
                  f" | b2fs+zarr-python {nwin / ourw['seconds']:.0f}/s"
                  f" | b2fs zarr_shards {nwin / shw['seconds']:.0f}/s"
                  f" | b2fs+TensorStore {nwin / tsw['seconds']:.0f}/s"
                  f" | b2fs zarr_shards+TensorStore {nwin / tsshw['seconds']:.0f}/s"
                  f" | native zarr-python {nwin / natw['seconds']:.0f}/s", flush=True)
    finally:
        os.rmdir(mp)
    print("\nseconds: fastest, median")
    for k, v in res.items():
        print(f"  {k}: {min(v):.3f}, {statistics.median(v):.3f}")
    med = {k: statistics.median(v) for k, v in res.items()}
    print("ratios of medians (other / b2fs; above 1: b2fs faster):")
    if not windows_only:
        print(f"  load: python-blosc2 {med['load python-blosc2'] / med['load b2fs xarray']:.2f}x, "
              f"native zarr-python {med['load native zarr-python'] / med['load b2fs xarray']:.2f}x, "
              f"native xarray {med['load native xarray'] / med['load b2fs xarray']:.2f}x")
    print(f"  windows: python-blosc2 "
          f"{med['windows python-blosc2'] / med['windows b2fs zarr-python']:.2f}x, "
          f"native zarr-python "
          f"{med['windows native zarr-python'] / med['windows b2fs zarr-python']:.2f}x")
    sh = med["windows b2fs zarr_shards zarr-python"]
    print(f"  windows, -o zarr_shards: python-blosc2 {med['windows python-blosc2'] / sh:.2f}x, "
          f"native zarr-python {med['windows native zarr-python'] / sh:.2f}x, "
          f"the plain view {med['windows b2fs zarr-python'] / sh:.2f}x")
    tsh = med["windows b2fs zarr_shards TensorStore"]
    print(f"  windows, TensorStore, -o zarr_shards: python-blosc2 "
          f"{med['windows python-blosc2'] / tsh:.2f}x, "
          f"the plain view {med['windows b2fs TensorStore'] / tsh:.2f}x")


if __name__ == "__main__":
    main()
