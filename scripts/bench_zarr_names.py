#!/usr/bin/env python3
"""Same-run A/B of two b2fs builds on the Zarr view of a directory of 2,000 small b2nd
sources (the names of a directory of sources, `src/tree/zarr/hierarchy.rs`): the first read
of the root `zarr.json` (the consolidated metadata), then every array's own `zarr.json` (a
lookup and an open of each name), then all of them again in the same mount, alternating
fresh read-only mounts.

    /work/bin/quietlong .venv/bin/python scripts/bench_zarr_names.py ROUNDS BINARY_A BINARY_B

Makes its sources in /tmp/b2fs-zarr-names/src (python-blosc2) on the first run; prints each
build's median times.
"""

import os
import statistics
import subprocess
import sys
import time

ROOT = "/tmp/b2fs-zarr-names"
SRC, MNT = f"{ROOT}/src", f"{ROOT}/mnt"
N = 2000


def gen():
    if os.path.isdir(SRC) and len(os.listdir(SRC)) == N:
        return
    import blosc2
    import numpy as np

    os.makedirs(SRC, exist_ok=True)
    for i in range(N):
        blosc2.asarray(np.arange(100, dtype="f4") + i, urlpath=f"{SRC}/v{i:04d}.b2nd", mode="w")


def one(b):
    subprocess.run([b, "mount", "-o", "ro", SRC, MNT], check=True)
    try:
        t0 = time.perf_counter()
        with open(f"{MNT}/zarr/zarr.json", "rb") as f:
            f.read()
        times = [time.perf_counter() - t0]
        names = [n for n in os.listdir(f"{MNT}/zarr") if n != "zarr.json"]
        for _ in range(2):
            t0 = time.perf_counter()
            for n in names:
                with open(f"{MNT}/zarr/{n}/zarr.json", "rb") as f:
                    f.read()
            times.append(time.perf_counter() - t0)
        return times
    finally:
        subprocess.run([b, "umount", MNT], check=True)


def main():
    rounds, a, b = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    gen()
    os.makedirs(MNT, exist_ok=True)
    res = {a: [], b: []}
    for r in range(rounds):
        for x in (a, b) if r % 2 == 0 else (b, a):
            res[x].append(one(x))
    for x, v in res.items():
        med = [statistics.median(t[i] for t in v) for i in range(3)]
        print(
            f"{os.path.basename(x)}: root zarr.json median {med[0]:.3f} s, every array's "
            f"zarr.json median {med[1]:.3f} s, the same again {med[2]:.3f} s"
        )


if __name__ == "__main__":
    main()
