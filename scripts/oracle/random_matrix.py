#!/usr/bin/env python3
"""Random chunk oracle: writes COUNT random chunks made by the reference libraries into OUT,
with OUT/MANIFEST.tsv in the same format as tests/data/chunks/MANIFEST.tsv (see
tests/data/README.md).

    .venv/bin/python scripts/oracle/random_matrix.py --seed N --count K --out DIR

Random: format (Blosc2 via blosc2.compress2, Blosc1 via blosc.compress), codec, filter
pipeline, typesize, clevel, splitmode, blocksize, data kind and size. Inputs that trip known
C-Blosc2 3.3.5 bugs (DELTA/TRUNC_PREC tails, forced blocksizes that are not a multiple of the
typesize) are adjusted; any case whose reference decode is still not exact is dropped and
replaced (reported on stderr), so every manifest row must decode to its sha256.

Reference libraries: python-blosc2 4.14.1 (C-Blosc2 3.3.5), python-blosc 1.11.4 (C-Blosc 1.21).
"""

import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import blosc  # noqa: E402
import blosc2  # noqa: E402

from common import (  # noqa: E402
    B1_CODECS,
    CODECS,
    fix_size_for_pipeline,
    make_b1_case,
    make_b2_case,
    write_manifest,
)

KINDS = ["arange", "floatnoise", "random", "zeros", "constant", "text"]
PIPES = ["none", "shuffle", "bitshuffle", "delta_shuffle", "truncprec_shuffle", "shuffle_bytedelta",
         "shuffle_meta", "delta"]


def rand_size(r, ts):
    u = r.random()
    if u < 0.05:
        return r.randrange(0, 32)
    if u < 0.10:
        return r.randrange(0, max(ts, 2))
    # log-uniform 32 .. ~60 KB, sometimes a multiple of typesize
    size = int(32 * (2000 ** r.random()))
    if r.random() < 0.5:
        size -= size % ts
    return size


def rand_typesize(r):
    return r.choice([1, 1, 2, 2, 3, 4, 4, 4, 8, 8, 8, 16, 17, r.randrange(1, 40)])


def one_b2(r, name, seed):
    ts = rand_typesize(r)
    pipes = [p for p in PIPES if p != "truncprec_shuffle" or ts in (4, 8)]
    pipe = r.choice(pipes)
    codec = r.choice(CODECS)
    clevel = r.randrange(0, 10)
    split = r.choice(["ALWAYS", "NEVER", "AUTO", "FORWARD_COMPAT"])
    kind = r.choice(KINDS)
    note = []
    size = fix_size_for_pipeline(pipe, ts, rand_size(r, ts), note)
    bs = 0
    if r.random() < 0.4 and size > 0:
        bs = r.randrange(1, 64) * max(ts, 1) * r.choice([1, 8, 32])
        bs -= bs % ts
        # the header keeps the forced value capped to nbytes: it must be a multiple too
        if bs >= size and size % ts:
            bs = 0
    nthreads = 2 if r.random() < 0.05 else 1
    return make_b2_case(name=name, codec=codec, clevel=clevel, pipe=pipe, ts=ts, split=split,
                        blocksize=bs, kind=kind, nbytes=size, seed=seed, nthreads=nthreads,
                        note=note)


def one_b1(r, name, seed):
    ts = rand_typesize(r)
    codec = r.choice(B1_CODECS)
    shuffle = r.choice([0, 1, 2])
    clevel = r.randrange(0, 10)
    kind = r.choice(KINDS)
    size = rand_size(r, ts)
    bs = 0
    if r.random() < 0.3:
        bs = r.choice([128, 999, 3000, 4096, 8192, 16384, r.randrange(1, 40000)])
    return make_b1_case(name=name, codec=codec, clevel=clevel, shuffle=shuffle, ts=ts, kind=kind,
                        nbytes=size, seed=seed, blocksize=bs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    print(f"random_matrix seed {args.seed} count {args.count}", flush=True)
    blosc2.set_nthreads(1)
    blosc.set_nthreads(1)
    r = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    dropped = 0
    i = 0
    while len(rows) < args.count:
        name = f"r{len(rows):04d}"
        seed = r.randrange(1 << 31)
        case = one_b1(r, name, seed) if r.random() < 0.2 else one_b2(r, name, seed)
        i += 1
        if case["check"] != "ok":
            dropped += 1
            print(f"dropped (reference not exact): {case['note']}", file=sys.stderr)
            if dropped > args.count:
                sys.exit("too many dropped cases")
            continue
        with open(os.path.join(args.out, name + ".chunk"), "wb") as f:
            f.write(case.pop("_chunk"))
        rows.append(case)
    write_manifest(os.path.join(args.out, "MANIFEST.tsv"), rows)
    print(f"wrote {len(rows)} chunks to {args.out} ({dropped} dropped)", flush=True)


if __name__ == "__main__":
    main()
