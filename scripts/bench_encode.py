#!/usr/bin/env python3
"""C-Blosc2 side of the encode benchmark (benches/encode.rs runs it in the same process run).

Usage: bench_encode.py OUTDIR [--clevel N] [--repeat R]

Writes the datasets (4 MiB each) as OUTDIR/<dataset>.bin, then times python-blosc2's
compress2 (C-Blosc2, nthreads=1) for every row on every dataset and writes
OUTDIR/c_encode.json:
  {"clevel": N, "datasets": {name: typesize}, "rows": [{"dataset", "row", "codec", "filters",
   "nbytes", "cbytes", "seconds"}]}
`seconds` is the best of R timed runs (after one warm-up run).
"""
import argparse
import json
import os
import time

import blosc2
import numpy as np

MIB = 1024 * 1024

# (row name, codec, filters)
ROWS = [
    ("ZSTD+SHUFFLE", blosc2.Codec.ZSTD, [blosc2.Filter.SHUFFLE]),
    ("LZ4+SHUFFLE", blosc2.Codec.LZ4, [blosc2.Filter.SHUFFLE]),
    ("BLOSCLZ+SHUFFLE", blosc2.Codec.BLOSCLZ, [blosc2.Filter.SHUFFLE]),
    ("LZ4+BITSHUFFLE", blosc2.Codec.LZ4, [blosc2.Filter.BITSHUFFLE]),
    ("ZSTD+SHUFFLE+BYTEDELTA", blosc2.Codec.ZSTD, [blosc2.Filter.SHUFFLE, blosc2.Filter.BYTEDELTA]),
    ("LZ4HC+SHUFFLE", blosc2.Codec.LZ4HC, [blosc2.Filter.SHUFFLE]),
    ("ZLIB+SHUFFLE", blosc2.Codec.ZLIB, [blosc2.Filter.SHUFFLE]),
]


def datasets():
    rng = np.random.default_rng(1234)
    n8 = 4 * MIB // 8
    n4 = 4 * MIB // 4
    return {
        "int_arange": np.arange(n8, dtype=np.int64),
        "float_noise": np.linspace(0, 100, n8) + rng.normal(0, 1e-3, n8),
        "int_random_walk": np.cumsum(rng.integers(-100, 101, n4)).astype(np.int32),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--clevel", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    result = {"clevel": args.clevel, "c_version": blosc2.blosclib_version.split()[0], "datasets": {}, "rows": []}
    for name, arr in datasets().items():
        data = arr.tobytes()
        with open(os.path.join(args.outdir, name + ".bin"), "wb") as f:
            f.write(data)
        ts = arr.dtype.itemsize
        result["datasets"][name] = ts
        for row, codec, filters in ROWS:
            kw = dict(typesize=ts, clevel=args.clevel, codec=codec, filters=filters,
                      filters_meta=[0] * len(filters), nthreads=1)
            c = blosc2.compress2(data, **kw)
            best = float("inf")
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                c = blosc2.compress2(data, **kw)
                best = min(best, time.perf_counter() - t0)
            result["rows"].append({
                "dataset": name, "row": row, "codec": codec.value,
                "filters": [f.value for f in filters], "nbytes": len(data),
                "cbytes": len(c), "seconds": best,
            })
    with open(os.path.join(args.outdir, "c_encode.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
