#!/usr/bin/env python3
"""Same-run A/B of b2fs binaries on commits: rounds alternate the binaries, each on a fresh
copy of one python-blosc2 contiguous frame mounted read-write.

    .venv/bin/python scripts/bench_ab.py [--rounds N] [--chunks K] [--mib M] BINARY_A BINARY_B...
    e.g. .venv/bin/python scripts/bench_ab.py --rounds 5 /tmp/b2fs-old target/release/b2fs

The source (float64, 1 MiB chunks, ZSTD clevel 1 + SHUFFLE, M MiB; default 64) is made once
into bench-data/ab-commit.b2nd. Per round and binary: a copy of it is mounted (`-o rw`,
foreground), the mount time is taken (process start to the mount point answering), then K
chunk files (default 16, spread over the frame) are each opened, rewritten whole with new
bytes and closed (the close commits), one at a time; then the mount is unmounted and the
copy checked by python-blosc2 (every rewritten chunk holds what was written). Printed per
binary: median mount ms, median ms per commit and commits/s, and the ratio of each binary's
median to the first one's. Only ratios of one run mean anything on a shared machine.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import blosc2
import numpy as np

import benchlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHUNK = 1 << 20


def make_source(path, mib):
    if os.path.exists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    n = mib * CHUNK // 8
    a = np.cumsum(np.random.default_rng(0).normal(size=n))
    tmp = path + ".tmp"
    blosc2.asarray(a, urlpath=tmp, mode="w", chunks=(CHUNK // 8,), blocks=(CHUNK // 64,),
                   cparams={"codec": blosc2.Codec.ZSTD, "clevel": 1, "nthreads": 2})
    os.rename(tmp, path)


def one_round(binary, pristine, chunks, seed):
    """Mount time (s) and per-commit times (s) of `binary` on a fresh copy of `pristine`."""
    work = tempfile.mkdtemp(prefix="b2fs-ab-")
    src = os.path.join(work, "a.b2nd")
    mp = os.path.join(work, "mnt")
    os.mkdir(mp)
    shutil.copyfile(pristine, src)
    with benchlib.Mount(binary, src, mp, opts=("rw",)) as m:
        os.listdir(mp)
        mount_s = time.perf_counter() - m.t0
        data = os.path.join(mp, "data")
        names = sorted(os.listdir(data))
        picks = np.linspace(0, len(names) - 1, num=min(chunks, len(names))).astype(int)
        rng = np.random.default_rng(seed)
        written = {}
        times = []
        for i in picks:
            size = os.path.getsize(os.path.join(data, names[i]))
            new = np.cumsum(rng.normal(size=size // 8)).tobytes()
            t = time.perf_counter()
            fd = os.open(os.path.join(data, names[i]), os.O_WRONLY)
            os.write(fd, new)
            os.close(fd)
            times.append(time.perf_counter() - t)
            written[int(i)] = new
    a = blosc2.open(src)
    for i, new in written.items():
        got = a.schunk.decompress_chunk(i)
        if got != new:
            raise SystemExit(f"{binary}: chunk {i} does not hold what was written")
    shutil.rmtree(work)
    return mount_s, times


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("binaries", nargs="+")
    args = ap.parse_args()
    pristine = os.path.join(ROOT, "bench-data", f"ab-commit-{args.mib}m.b2nd")
    make_source(pristine, args.mib)
    ids = range(len(args.binaries))  # by position: the same binary may be given twice
    mounts = {b: [] for b in ids}
    commits = {b: [] for b in ids}
    for r in range(args.rounds):
        for b in (ids if r % 2 == 0 else reversed(ids)):
            m, ts = one_round(args.binaries[b], pristine, args.chunks, seed=r)
            mounts[b].append(m)
            commits[b].extend(ts)
    first = 0
    base_m = statistics.median(mounts[first])
    base_c = statistics.median(commits[first])
    print(f"{args.rounds} rounds, {args.chunks} commits of 1 MiB chunks per round, "
          f"{args.mib} MiB frame")
    print(f"{'binary':40} {'mount ms':>9} {'x':>6} {'commit ms':>10} {'x':>6} {'commits/s':>10}")
    for b in ids:
        m, c = statistics.median(mounts[b]), statistics.median(commits[b])
        print(f"{args.binaries[b]:40} {m * 1e3:9.1f} {m / base_m:6.2f} {c * 1e3:10.2f} {c / base_c:6.2f} "
              f"{1 / c:10.1f}")


if __name__ == "__main__":
    sys.exit(main())
