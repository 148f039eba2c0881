#!/usr/bin/env python3
"""Same-run A/B of two b2fs builds walking the Zarr view of a directory of 300 small b2nd
sources (every zarr.json and chunk object read once: lookups, listings and metadata of the
view), alternating fresh read-only mounts.

    /work/bin/quietlong .venv/bin/python scripts/bench_zarr_walk.py ROUNDS BINARY_A BINARY_B [MODE]

MODE `walk` (the default) is the walk above; MODE `root` times the mount root instead, on a
read-write mount (whose kernel caches no entry, attribute or listing: every call reaches the
daemon): 200 times a listing of the root, an `lstat` of each of its ~300 entries, and a
lookup of a name that is not there (also the daemon's CPU time, from /proc); MODE `v2` walks the Zarr v2 view `zarr2/` (both builds
must have it).

Makes its sources in /tmp/b2fs-zarr-walk/src (python-blosc2) on the first run; prints each
build's median wall time and the per-round time ratios A / B with their median.
"""

import os
import statistics
import subprocess
import sys
import time

ROOT = "/tmp/b2fs-zarr-walk"
SRC, MNT = f"{ROOT}/src", f"{ROOT}/mnt"


def gen():
    if os.path.isdir(SRC) and len(os.listdir(SRC)) == 300:
        return
    import blosc2
    import numpy as np

    os.makedirs(SRC, exist_ok=True)
    os.makedirs(MNT, exist_ok=True)
    for i in range(300):
        a = np.arange(4000, dtype=np.float64).reshape(40, 100) + i
        blosc2.asarray(a, chunks=(10, 50), urlpath=f"{SRC}/a{i:03d}.b2nd", mode="w")


def daemon_cpu():
    """CPU seconds (user + system) of the daemon serving MNT so far."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            if MNT.encode() not in cmd or b"mount" not in cmd:
                continue
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return float("nan")


CPU = {}


def once_root(binary):
    subprocess.run([binary, "mount", SRC, MNT], check=True)
    c = daemon_cpu()
    t = time.perf_counter()
    for k in range(200):
        for name in os.listdir(MNT):
            os.lstat(os.path.join(MNT, name))
        assert not os.path.exists(os.path.join(MNT, f"missing{k}"))
    dt = time.perf_counter() - t
    CPU.setdefault(binary, []).append(daemon_cpu() - c)
    subprocess.run(["fusermount", "-u", MNT], check=True)
    time.sleep(0.3)
    return dt


def once(binary, view="zarr"):
    subprocess.run([binary, "mount", "-o", "ro", SRC, MNT], check=True)
    t = time.perf_counter()
    n = 0
    for r, _, files in os.walk(f"{MNT}/{view}"):
        for f in files:
            with open(os.path.join(r, f), "rb") as fh:
                n += len(fh.read())
    dt = time.perf_counter() - t
    subprocess.run(["fusermount", "-u", MNT], check=True)
    time.sleep(0.3)
    return dt


def main():
    rounds, a, b = sys.argv[1:4]
    mode = sys.argv[4] if len(sys.argv) > 4 else "walk"
    run = {"walk": once, "root": once_root, "v2": lambda x: once(x, "zarr2")}[mode]
    gen()
    res = {a: [], b: []}
    for i in range(int(rounds)):
        for x in (a, b) if i % 2 == 0 else (b, a):
            res[x].append(run(x))
    for x in (a, b):
        print(os.path.basename(x), "median s", round(statistics.median(res[x]), 3))
    r = [x / y for x, y in zip(res[a], res[b])]
    print("time A / B per round", [round(x, 2) for x in r], "median", round(statistics.median(r), 2))
    if CPU:
        # The daemon's own CPU time: what the daemon does per call, less sensitive to load.
        for x in (a, b):
            print(os.path.basename(x), "daemon CPU-s median", round(statistics.median(CPU[x]), 3))
        r = [x / y for x, y in zip(CPU[a], CPU[b])]
        print("daemon CPU A / B per round", [round(x, 2) for x in r], "median",
              round(statistics.median(r), 2))


if __name__ == "__main__":
    main()
