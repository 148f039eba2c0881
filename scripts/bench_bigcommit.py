#!/usr/bin/env python3
"""Same-run A/B of one big commit of incompressible data: the daemon's peak memory and the
fsync time when the compressed chunks of one commit are several times the commit's memory
bound (docs/SEMANTICS.md, "Memory: commits").

    .venv/bin/python scripts/bench_bigcommit.py ROUNDS BINARY_A BINARY_B...
    e.g. .venv/bin/python scripts/bench_bigcommit.py 8 /tmp/b2fs-main24 /tmp/b2fs-commit24-v1

Uses bench-data/spill-256.b2nd (made by scripts/bench_spill.py: 256 MiB float64 in 4 MiB
chunks). Per round and binary (the order swapped every round): a fresh copy mounted `rw,
edit_budget=32M,spill_dir=/var/tmp`, every data byte of array.npy rewritten with random
int64 bit patterns (1 MiB os.pwrite calls: 256 MiB that do not compress), one fsync (one
commit of all 64 chunks). Prints the fsync seconds, the daemon's peak RSS (VmHWM) and, when
the mount has it, `user.b2fs.commit_peak_bytes`; then per binary the median [min-max].
"""

import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import numpy as np  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench-data")
MIB = 1 << 20


def one(binary, src0, noise):
    work = tempfile.mkdtemp(prefix="b2fs-bigcommit-")
    src = os.path.join(work, "a.b2nd")
    mp = os.path.join(work, "mnt")
    os.mkdir(mp)
    shutil.copyfile(src0, src)
    opts = ("rw", "edit_budget=32M", "spill_dir=/var/tmp")
    with benchlib.Mount(binary, src, mp, opts=opts) as m:
        p = os.path.join(mp, "array.npy")
        size = os.path.getsize(p)
        fd = os.open(p, os.O_RDWR)
        at = size - 256 * MIB
        for k in range(256):
            os.pwrite(fd, noise[k % 7:] + noise[:k % 7], at + k * MIB)
        t = time.perf_counter()
        os.fsync(fd)
        fsync = time.perf_counter() - t
        os.close(fd)
        try:
            peak = int(os.getxattr(mp, "user.b2fs.commit_peak_bytes"))
        except OSError:
            peak = None
        hwm = m.hwm_mib()
    shutil.rmtree(work)
    return fsync, hwm, peak


def main():
    rounds, *bins = sys.argv[1:]
    src0 = os.path.join(DATA, "spill-256.b2nd")
    if not os.path.exists(src0):
        raise SystemExit(f"{src0}: run scripts/bench_spill.py 1 256 ... once to make it")
    noise = np.random.default_rng(1).integers(0, 2**63, size=MIB // 8, dtype=np.int64).tobytes()
    res = {b: [] for b in bins}
    for r in range(int(rounds)):
        for b in bins if r % 2 == 0 else bins[::-1]:
            res[b].append(one(b, src0, noise))
            f, h, p = res[b][-1]
            print(f"round {r + 1} {os.path.basename(b)}: fsync {f:.2f} s, peak RSS {h} MiB, "
                  f"commit_peak_bytes {p}", flush=True)
    for b, v in res.items():
        def med(xs):
            return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"
        print(f"{os.path.basename(b)}: fsync s {med([x[0] for x in v])}, "
              f"peak RSS MiB {med([x[1] for x in v])}")


if __name__ == "__main__":
    main()
