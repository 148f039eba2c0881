#!/usr/bin/env python3
"""Same-run A/B of writing a whole array through array.npy of a read-write mount: the cost and
the daemon memory of pending edits, with and without spilling past edit_budget.

    .venv/bin/python scripts/bench_spill.py ROUNDS MIB CONFIG...
    CONFIG = LABEL=BINARY[:MOUNT_OPTS]   (MOUNT_OPTS comma-separated, added to `rw`)
    e.g. .venv/bin/python scripts/bench_spill.py 8 256 main=/tmp/b2fs-main22 \\
             mem=/tmp/b2fs-edits22-v1 spill=/tmp/b2fs-edits22-v1:edit_budget=32M

Generates once a float64 b2nd of MIB MiB (chunks of 4 MiB, ZSTD clevel 1 + SHUFFLE) in
bench-data/spill-MIB.b2nd. Each round copies it to a temp file (the commit rewrites it), and
for each config in turn (the order reversed every other round) mounts the copy read-write,
rewrites every byte of array.npy's data in 1 MiB os.pwrite calls (the `dd conv=notrunc`
pattern), fsyncs (one commit of every chunk), and records the write seconds, the fsync
seconds, the daemon's CPU and its peak RSS (VmHWM). Prints per-round lines and per-config
medians with min-max.
"""

import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import io  # noqa: E402

import numpy.lib.format as fmt  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench-data")


def gen(mib):
    import blosc2
    import numpy as np

    path = os.path.join(DATA, f"spill-{mib}.b2nd")
    if not os.path.exists(path):
        n = mib * (1 << 20) // 8
        rows = n // 1024
        a = np.cumsum(np.random.default_rng(0).normal(size=(rows, 1024)), axis=1)
        blosc2.asarray(a, urlpath=path, mode="w", chunks=(512, 1024), blocks=(32, 1024),
                       cparams={"codec": blosc2.Codec.ZSTD, "clevel": 1, "nthreads": 2})
    return path


def one(binary, opts, src):
    with benchlib.Mount(binary, src, opts=("rw",) + opts) as m:
        path = os.path.join(m.mp, "array.npy")
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            # The data starts where the npy header ends (b2fs aligns it to a page).
            f = io.BytesIO(os.pread(fd, 1 << 16, 0))
            fmt.read_magic(f)
            fmt.read_array_header_1_0(f)
            hlen = f.tell()
            buf = bytes(range(256)) * 4096  # 1 MiB
            cpu0 = m.cpu_seconds()
            t0 = time.perf_counter()
            at = hlen
            while at < size:
                n = min(len(buf), size - at)
                os.pwrite(fd, buf[:n], at)
                at += n
            t1 = time.perf_counter()
            os.fsync(fd)
            t2 = time.perf_counter()
            cpu = m.cpu_seconds() - cpu0
        finally:
            os.close(fd)
        return t1 - t0, t2 - t1, cpu, m.hwm_mib()


def main():
    rounds, mib, *configs = sys.argv[1:]
    cfg = []
    for c in configs:
        label, rest = c.split("=", 1)
        binary, _, opts = rest.partition(":")
        cfg.append((label, binary, tuple(o for o in opts.split(",") if o)))
    src = gen(int(mib))
    res = {label: [] for label, _, _ in cfg}
    tmp = tempfile.mkdtemp(dir=DATA)
    try:
        for i in range(int(rounds)):
            for label, binary, opts in cfg if i % 2 == 0 else cfg[::-1]:
                copy = os.path.join(tmp, "a.b2nd")
                shutil.copyfile(src, copy)
                res[label].append(one(binary, opts, copy))
                os.remove(copy)
            print(f"round {i + 1}: " + "; ".join(
                f"{k} write {v[-1][0]:.2f} s fsync {v[-1][1]:.2f} s cpu {v[-1][2]:.2f} s"
                f" rss {v[-1][3]} MiB" for k, v in res.items()), flush=True)
    finally:
        shutil.rmtree(tmp)
    for k, v in res.items():
        col = list(zip(*v))
        def fmt_(xs):
            return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"
        print(f"{k}: write s {fmt_(col[0])}, fsync s {fmt_(col[1])}, daemon cpu s {fmt_(col[2])},"
              f" peak RSS MiB {fmt_(col[3])}, MiB/s (write+fsync)"
              f" {statistics.median(int(mib) / (a + b) for a, b, _, _ in v):.0f}")


if __name__ == "__main__":
    main()
