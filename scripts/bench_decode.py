#!/usr/bin/env python3
"""Chunk-decode benchmark, C side (C-Blosc2 through python-blosc2, nthreads=1).

Run everything (this script, then our decoder on the same files) with:

    cargo bench --bench decode

or this half alone with:

    .venv/bin/python scripts/bench_decode.py [--out bench-data] [--reps 20] [--retime]

Writes one 4 MiB chunk per (row, dataset) to `bench-data/decode/` (gitignored), made by
`blosc2.compress2` at clevel 5 with nthreads=1, then times `blosc2.decompress2` into a
preallocated buffer with nthreads=1 (best of --reps) and writes `bench-data/decode/c_results.json`:
a list of {row, dataset, file, typesize, nbytes, cbytes, sha256, c_best_s, c_codec_only_s}
(the last: the same chunk with its filter slots emptied, so the codec and block walk alone). `benches/decode.rs`
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


def best_time(chunk, dst, reps):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        blosc2.decompress2(chunk, dst=dst, nthreads=1)
        best = min(best, time.perf_counter() - t0)
    return best


def unfiltered(chunk):
    """The same chunk with its filter slots emptied: the codecs and block walk alone."""
    u = bytearray(chunk)
    u[0x10:0x16] = bytes(6)
    return bytes(u)


def retime(outdir, reps):
    """Times the chunks of an earlier run again, keeping the better of the old and new times
    (the caller alternates rounds of C and of us, so both see the same machine load)."""
    path = os.path.join(outdir, "c_results.json")
    with open(path) as fh:
        doc = json.load(fh)
    for r in doc["results"]:
        with open(os.path.join(outdir, r["file"]), "rb") as fh:
            chunk = fh.read()
        dst = bytearray(r["nbytes"])
        r["c_best_s"] = min(r["c_best_s"], best_time(chunk, dst, reps))
        r["c_codec_only_s"] = min(r["c_codec_only_s"], best_time(unfiltered(chunk), dst, reps))
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench-data")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument(
        "--retime",
        action="store_true",
        help="only time the chunks of an earlier run again (keep the best)",
    )
    args = ap.parse_args()
    outdir = os.path.join(args.out, "decode")
    os.makedirs(outdir, exist_ok=True)
    blosc2.set_nthreads(1)
    if args.retime:
        retime(outdir, args.reps)
        return

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
            best = best_time(chunk, dst, args.reps)
            sha = hashlib.sha256(dst).hexdigest()
            codec_only = best_time(unfiltered(chunk), dst, args.reps)
            results.append(
                {
                    "row": rname,
                    "dataset": dname,
                    "file": fname,
                    "typesize": ts,
                    "nbytes": len(src),
                    "cbytes": len(chunk),
                    "sha256": sha,
                    "c_best_s": best,
                    "c_codec_only_s": codec_only,
                }
            )
            print(
                f"C  {rname:24} {dname:17} ratio {len(src) / len(chunk):7.2f}"
                f"  {len(src) / best / 1e9:6.2f} GB/s"
                f"  (codec only {len(src) / codec_only / 1e9:6.2f} GB/s)"
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
