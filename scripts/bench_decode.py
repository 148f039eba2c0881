#!/usr/bin/env python3
"""Chunk-decode benchmark, C side (C-Blosc2 through python-blosc2, nthreads=1).

Run everything (this script, then our decoder on the same files) with:

    cargo bench --bench decode

or this half alone with:

    .venv/bin/python scripts/bench_decode.py [--out bench-data] [--reps 20]

Writes one 4 MiB chunk per (row, dataset) to `bench-data/decode/` (gitignored), made by
`blosc2.compress2` at clevel 5 with nthreads=1, then times `blosc2.decompress2` into a
preallocated buffer with nthreads=1 (best of --reps) and writes `bench-data/decode/c_results.json`:
a list of {row, dataset, file, typesize, nbytes, cbytes, sha256, c_best_s}. `benches/decode.rs`
reads that file, times b2fs's Decoder on the same chunk files and prints both.
"""

import argparse
import hashlib
import json
import os
import time

import blosc2
import numpy as np

CHUNK = 4 * 1024 * 1024
CLEVEL = 5

F = blosc2.Filter
C = blosc2.Codec

# name, codec, filters (slot 0..), whether BYTEDELTA wants meta = typesize
ROWS = [
    ("ZSTD+SHUFFLE", C.ZSTD, [F.SHUFFLE]),
    ("LZ4+SHUFFLE", C.LZ4, [F.SHUFFLE]),
    ("BLOSCLZ+SHUFFLE", C.BLOSCLZ, [F.SHUFFLE]),
    ("LZ4+BITSHUFFLE", C.LZ4, [F.BITSHUFFLE]),
    ("ZSTD+SHUFFLE+BYTEDELTA", C.ZSTD, [F.SHUFFLE, F.BYTEDELTA]),
]


def datasets():
    rng = np.random.default_rng(20261121)
    n4 = CHUNK // 4
    n8 = CHUNK // 8
    arange = np.arange(n4, dtype=np.int32)
    noise = np.linspace(0.0, 1000.0, n8) + rng.normal(0.0, 0.01, n8)
    walk = np.cumsum(rng.integers(-100, 101, n4)).astype(np.int32)
    return [
        ("int32-arange", arange),
        ("float64-noise", noise.astype(np.float64)),
        ("int32-randomwalk", walk),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench-data")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    outdir = os.path.join(args.out, "decode")
    os.makedirs(outdir, exist_ok=True)
    blosc2.set_nthreads(1)

    results = []
    for dname, arr in datasets():
        src = arr.tobytes()
        assert len(src) == CHUNK
        ts = arr.dtype.itemsize
        for rname, codec, filters in ROWS:
            meta = [ts if f == F.BYTEDELTA else 0 for f in filters]
            chunk = blosc2.compress2(
                src,
                codec=codec,
                clevel=CLEVEL,
                typesize=ts,
                filters=filters,
                filters_meta=meta,
                nthreads=1,
            )
            fname = f"{rname.replace('+', '_').lower()}__{dname}.chunk"
            with open(os.path.join(outdir, fname), "wb") as fh:
                fh.write(chunk)
            dst = bytearray(len(src))
            blosc2.decompress2(chunk, dst=dst, nthreads=1)
            assert bytes(dst) == src, f"{rname} {dname}: C round trip differs"
            best = float("inf")
            for _ in range(args.reps):
                t0 = time.perf_counter()
                blosc2.decompress2(chunk, dst=dst, nthreads=1)
                best = min(best, time.perf_counter() - t0)
            results.append(
                {
                    "row": rname,
                    "dataset": dname,
                    "file": fname,
                    "typesize": ts,
                    "nbytes": len(src),
                    "cbytes": len(chunk),
                    "sha256": hashlib.sha256(dst).hexdigest(),
                    "c_best_s": best,
                }
            )
            print(
                f"C  {rname:24} {dname:17} ratio {len(src) / len(chunk):7.2f}"
                f"  {len(src) / best / 1e9:6.2f} GB/s"
            )
    with open(os.path.join(outdir, "c_results.json"), "w") as fh:
        json.dump(
            {
                "blosc2": blosc2.__version__,
                "c_blosc2": blosc2.blosclib_version,
                "clevel": CLEVEL,
                "reps": args.reps,
                "results": results,
            },
            fh,
            indent=1,
        )


if __name__ == "__main__":
    main()
