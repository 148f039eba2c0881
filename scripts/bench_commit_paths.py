#!/usr/bin/env python3
"""Same-run A/B of the commits of session 28's hot paths (BENCHMARKS.md, "Session 28: commit
hot paths"): the time of one commit through a read-write mount, per binary, the order
swapped every round.

    .venv/bin/python scripts/bench_commit_paths.py ROUNDS KIND BINARY_A BINARY_B...
    e.g. /work/bin/quietlong .venv/bin/python scripts/bench_commit_paths.py 6 b2nd-resize \
             /tmp/b2fs-main28 target/release/b2fs

KIND:
  b2nd-resize    a 1-D float64 b2nd of python-blosc2 (16 chunks of 1,024 items) grown by
                 4,000 chunks through its Zarr view (a `zarr.json` with the new shape renamed
                 over the old one, as zarr-python's `resize` does): the rename's time, which
                 is the commit (4,000 chunks of zeros encoded, special entries written)
  bcolz-resize   a bcolz carray (float64, chunklen 1,024, 16 chunks) grown by 500 chunks the
                 same way: 500 chunk files of zeros, each encoded, staged in a temp file,
                 fsynced and renamed in
  sparse-update  a sparse frame of python-blosc2 (20,000 chunks of 1,000 float64) whose chunk
                 0 is rewritten through the mount: write + fsync (the commit) + close

Sources are made once in bench-data/ (gitignored); each round mounts a fresh copy
(`-o rw`). Prints each round's seconds, then per binary the median [min-max].
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import numpy as np  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench-data")
CHUNK = 1024
START = 16


def make(kind):
    """The source of KIND in bench-data/, made once; its path."""
    os.makedirs(DATA, exist_ok=True)
    if kind == "b2nd-resize":
        p = os.path.join(DATA, "commit-resize.b2nd")
        if not os.path.exists(p):
            import blosc2
            blosc2.asarray(np.arange(START * CHUNK, dtype=np.float64), chunks=(CHUNK,),
                           blocks=(256,), urlpath=p, mode="w")
        return p
    if kind == "bcolz-resize":
        p = os.path.join(DATA, "commit-resize.bcolz")
        if not os.path.exists(p):
            import bcolz
            bcolz.carray(np.arange(START * CHUNK, dtype=np.float64), chunklen=CHUNK,
                         rootdir=p, mode="w").flush()
        return p
    if kind == "sparse-update":
        p = os.path.join(DATA, "commit-sparse-20k.b2frame")
        if not os.path.exists(p):
            import blosc2
            s = blosc2.SChunk(chunksize=8000, urlpath=p + ".tmp", contiguous=False, mode="w",
                              cparams={"typesize": 8})
            for i in range(20_000):
                s.append_data(np.arange(i, i + 1000, dtype=np.float64))
            del s
            os.rename(p + ".tmp", p)
        return p
    raise SystemExit(f"unknown KIND {kind}")


def copy(src, dst):
    """SRC (file or directory) copied to DST and flushed to disk, so that no commit pays for
    writing the copy."""
    if os.path.isdir(src):
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)
    subprocess.run(["sync", "-f", dst], check=True)


def resize(mp, chunks):
    """Grows the mounted 1-D array by CHUNKS chunks through its Zarr view; the rename's
    seconds."""
    zdir = os.path.join(mp, "zarr")
    names = [n for n in os.listdir(zdir) if os.path.isdir(os.path.join(zdir, n))]
    arr = os.path.join(zdir, names[0]) if len(names) == 1 else zdir
    with open(os.path.join(arr, "zarr.json"), "rb") as f:
        doc = json.load(f)
    want = doc["shape"][0] + chunks * CHUNK
    doc["shape"] = [want]
    tmp = os.path.join(arr, "zarr.bench.partial")
    with open(tmp, "w") as f:
        json.dump(doc, f)
    t = time.perf_counter()
    os.rename(tmp, os.path.join(arr, "zarr.json"))
    took = time.perf_counter() - t
    with open(os.path.join(arr, "zarr.json"), "rb") as f:
        got = json.load(f)["shape"][0]
    assert got == want, (got, want)
    return took


def update0(mp):
    """Rewrites chunk 0 of the mounted frame (write + fsync + close); the seconds."""
    p = os.path.join(mp, "data", "00000000.bin")
    data = np.arange(1000, dtype=np.float64)[::-1].tobytes()
    t = time.perf_counter()
    fd = os.open(p, os.O_WRONLY)
    os.pwrite(fd, data, 0)
    os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - t


def one(binary, kind, src0):
    work = tempfile.mkdtemp(prefix="b2fs-commitpaths-", dir="/var/tmp")
    src = os.path.join(work, os.path.basename(src0))
    mp = os.path.join(work, "mnt")
    os.mkdir(mp)
    copy(src0, src)
    with benchlib.Mount(binary, src, mp, opts=("rw",)):
        if kind == "b2nd-resize":
            took = resize(mp, 4000)
        elif kind == "bcolz-resize":
            took = resize(mp, 500)
        else:
            took = update0(mp)
    shutil.rmtree(work)
    return took


def main():
    rounds, kind, *bins = sys.argv[1:]
    src0 = make(kind)
    res = {b: [] for b in bins}
    for r in range(int(rounds)):
        for b in bins if r % 2 == 0 else bins[::-1]:
            res[b].append(one(b, kind, src0))
            print(f"round {r + 1} {b}: {res[b][-1] * 1e3:.1f} ms", flush=True)
    for b, v in res.items():
        print(f"{kind} {b}: {statistics.median(v) * 1e3:.1f} ms "
              f"[{min(v) * 1e3:.1f}-{max(v) * 1e3:.1f}] over {len(v)} rounds")


if __name__ == "__main__":
    main()
