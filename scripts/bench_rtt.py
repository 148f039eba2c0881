#!/usr/bin/env python3
"""The cost of one FUSE round trip for small reads: warm random 4 KiB `pread`s of `array.npy`
(bench_mount.py's win.b2nd) through a fresh mount of each BINARY, the daemon's CPU time per
read (utime + stime of the daemon over the reader's run), and the same reads of a tmpfs copy.

    .venv/bin/python scripts/bench_rtt.py ROUNDS BINARY [BINARY...] [--pin] [--reads N]
    e.g. .venv/bin/python scripts/bench_rtt.py 2 target/release/b2fs --pin

--pin also runs each binary with the reader and every daemon thread on vCPU 0 (`taskset`):
the round trip without a wake-up of the other vCPU. A BINARY written NAME=VALUE@PATH runs
PATH with NAME=VALUE in the daemon's environment (for a build with an experiment behind a
variable). The reader warms 10,000 random aligned pages of the first 16 MiB, then times N
reads (100,000 by default) of those pages in a loop, as bench_mount.py's plain4k does for
2 x 10,000. Run it on an idle machine (`quietlong`): the numbers are per-read latencies.
"""

import os
import shutil
import subprocess
import sys
import tempfile

import benchlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_mount as bm  # noqa: E402

READER = r"""
import os, random, sys, time
path, n = sys.argv[1], int(sys.argv[2])
size = min(os.path.getsize(path), 16 << 20)
rng = random.Random(3)
offs = [rng.randrange(0, (size - 4096) // 4096) * 4096 for _ in range(10000)]
fd = os.open(path, os.O_RDONLY)
for o in offs:
    os.pread(fd, 4096, o)
t = time.perf_counter()
for i in range(n):
    os.pread(fd, 4096, offs[i % 10000])
print(n / (time.perf_counter() - t))
"""


def reader(path, n, pin):
    cmd = [sys.executable, "-c", READER, path, str(n)]
    if pin:
        cmd = ["taskset", "-c", "0", *cmd]
    return float(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def one(spec, n, pin):
    """Reads/s and daemon CPU microseconds per read of one fresh mount of SPEC."""
    env, _, binary = spec.rpartition("@")
    saved = dict(os.environ)
    if env:
        name, value = env.split("=", 1)
        os.environ[name] = value
    try:
        with benchlib.Mount(binary, bm.WIN) as m:
            if pin:
                for tid in os.listdir(f"/proc/{m.pid}/task"):
                    subprocess.run(["taskset", "-p", "-c", "0", tid], check=True,
                                   capture_output=True)
            before = m.cpu_seconds()
            rate = reader(os.path.join(m.mp, "array.npy"), n, pin)
            used = m.cpu_seconds() - before
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return rate, used / (n + 10000) * 1e6


def main():
    args = sys.argv[1:]
    pin = "--pin" in args
    n = int(args[args.index("--reads") + 1]) if "--reads" in args else 100_000
    rest = [a for i, a in enumerate(args)
            if a != "--pin" and a != "--reads" and (i == 0 or args[i - 1] != "--reads")]
    if len(rest) < 2:
        raise SystemExit(__doc__)
    rounds, specs = int(rest[0]), rest[1:]
    bm.gen()
    bm.warm_sources()
    shm = tempfile.mkdtemp(dir="/dev/shm")
    try:
        with benchlib.Mount(specs[0].rpartition("@")[2], bm.WIN) as m:
            shutil.copy(os.path.join(m.mp, "array.npy"), os.path.join(shm, "array.npy"))
        for r in range(rounds):
            tmpfs = reader(os.path.join(shm, "array.npy"), n, False)
            print(f"round {r + 1}: tmpfs {tmpfs:.0f}/s", flush=True)
            for spec in specs:
                for pinned in ([False, True] if pin else [False]):
                    rate, us = one(spec, n, pinned)
                    print(f"  {os.path.basename(spec)}{' pinned' if pinned else ''}: "
                          f"{rate:.0f}/s ({rate / tmpfs:.3f}x tmpfs), daemon CPU {us:.1f} us"
                          " per read", flush=True)
    finally:
        shutil.rmtree(shm)


if __name__ == "__main__":
    main()
