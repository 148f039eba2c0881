#!/usr/bin/env python3
"""How fast can `xr.open_zarr(...).values` be at all? The floor of the Zarr view's load target.

    .venv-zarr/bin/python scripts/bench_zarr_floor.py ROUNDS BINARY
    (run after scripts/bench_zarr.py, which makes bench-data/npy2d.b2nd)

Alternating in every round, each in a fresh process, the 1 GiB 2-D bench array read whole by:
- python-blosc2 `arr[...]` (nthreads=2), the target's reference;
- `xr.open_zarr(RAW)["data"].values` where RAW is an uncompressed Zarr v3 copy (same chunks)
  on tmpfs: no decompression and no FUSE, so nothing a store or filesystem can do is faster:
  the floor of xarray's default (Dask) path;
- zarr-python `zarr.open_array(RAW/data)[...]` on the same copy;
- through a fresh `-o ro` b2fs mount of the source: `xr.open_zarr(MNT/zarr)` (default, Dask),
  `xr.open_zarr(MNT/zarr, chunks=None)` (no Dask) and zarr-python `zarr.open_array(...)[...]`.
Prints each round and the fastest and median of each.
"""

import json
import os
import statistics
import sys
import tempfile
import time

import benchlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "bench-data", "npy2d.b2nd")
RAW = "/dev/shm/b2fs-bench-npy2d-raw.zarr"


def child(kind, path, name):
    t = time.perf_counter()
    if kind == "py":
        import blosc2

        blosc2.set_nthreads(2)
        a = blosc2.open(path, mode="r")[...]
    elif kind in ("xr", "xr-nodask"):
        import xarray as xr

        chunks = {} if kind == "xr" else None
        kw = {} if kind == "xr" else {"chunks": chunks}
        a = xr.open_zarr(path, consolidated=True, **kw)[name].values
    else:
        import zarr

        a = zarr.open_array(path, mode="r")[...]
    print(json.dumps({"s": time.perf_counter() - t, "c": float(a[::4096].sum())}))


def run(kind, path, name=""):
    return benchlib.child_json(__file__, "child", kind, path, name, flags=("-W", "ignore"))


def make_raw():
    if os.path.exists(os.path.join(RAW, "zarr.json")):
        return
    import blosc2
    import zarr

    src = blosc2.open(SRC, mode="r")
    g = zarr.open_group(RAW, mode="w")
    z = g.create_array("data", shape=src.shape, chunks=src.chunks, dtype=src.dtype,
                       compressors=None, dimension_names=["y", "x"])
    for r in range(0, src.shape[0], src.chunks[0]):
        z[r:r + src.chunks[0], :] = src[r:r + src.chunks[0], :]
    zarr.consolidate_metadata(RAW)


def mounted_run(binary, mp, kind, path, name=""):
    with benchlib.Mount(binary, SRC, mp):
        return run(kind, path, name)


def main():
    if sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    rounds, binary = int(sys.argv[1]), os.path.abspath(sys.argv[2])
    make_raw()
    mp = os.path.realpath(tempfile.mkdtemp())
    res = {}
    try:
        for r in range(1, rounds + 1):
            row = {
                "python-blosc2 arr[...]": run("py", SRC),
                "xarray, uncompressed Zarr on tmpfs (floor)": run("xr", RAW, "data"),
                "zarr-python, uncompressed Zarr on tmpfs": run("zarr", os.path.join(RAW, "data")),
                "xarray, b2fs zarr/": mounted_run(binary, mp, "xr", mp + "/zarr", "npy2d"),
                "xarray chunks=None, b2fs zarr/": mounted_run(binary, mp, "xr-nodask",
                                                              mp + "/zarr", "npy2d"),
                "zarr-python, b2fs zarr/": mounted_run(binary, mp, "zarr", mp + "/zarr/npy2d"),
            }
            assert len({round(v["c"], 3) for v in row.values()}) == 1, "the reads differ"
            print(f"round {r}: " + ", ".join(f"{k} {v['s']:.2f} s" for k, v in row.items()),
                  flush=True)
            for k, v in row.items():
                res.setdefault(k, []).append(v["s"])
    finally:
        os.rmdir(mp)
    py = statistics.median(res["python-blosc2 arr[...]"])
    print("\nseconds: fastest, median; python-blosc2's median / this median")
    for k, v in res.items():
        print(f"  {k}: {min(v):.3f}, {statistics.median(v):.3f}; "
              f"{py / statistics.median(v):.2f}x")


if __name__ == "__main__":
    main()
