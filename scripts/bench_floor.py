#!/usr/bin/env python3
"""The CPU floor of mapped strips and windows: what python-blosc2 spends per operation
against what b2fs (the reader and the daemon) spends, and the least b2fs could spend.

    .venv/bin/python scripts/bench_floor.py ROUNDS BINARY
    e.g. /work/bin/quietlong .venv/bin/python scripts/bench_floor.py 5 target/release/b2fs

Patterns (scripts/bench_mount.py's data, win.b2nd: 4096 x 8192 float64, chunks 1024 x 1024,
blocks 16 x 1024, ZSTD+SHUFFLE): `strips`, 8 column strips `[:, c:c+64]`, and `win`, 300
windows `[r:r+64, c:c+64]`; python-blosc2 `arr[...]` (nthreads=2) against
`np.load(MNT/array.npy, mmap_mode='r')[...]`, each side in a fresh process, alternating,
checked equal. Per operation: wall time and the reader's CPU (`time.process_time()`, every
thread of the process) around the reads only, and the daemon's CPU over them (/proc).

Then the decode alone: the 4 chunks of one strip's column of chunks decompressed by
python-blosc2 (`decompress_chunk`) with 1 and 2 threads, best of 5 passes (warm buffers):
every block of those chunks holds 16 rows of a strip, so b2fs must decode them all too, at
C-Blosc2's cost per block or more. The floor of a strip through a map is that decode plus,
per row (a page 64 KiB from the next: one page fault each), one page store into the kernel's
page cache and one minor fault of the reader, whatever the design.
"""

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_mount as bm  # noqa: E402
import benchlib  # noqa: E402

import numpy as np  # noqa: E402


def ops(kind, seed):
    """The index tuples of pattern `kind` (`strips` or `win`) for round `seed`."""
    if kind == "strips":
        rng = np.random.default_rng(seed)
        cols = [int(rng.integers(0, bm.WSHAPE[1] - 64)) for _ in range(bm.NSTRIPS)]
        return [(slice(None), slice(c, c + 64)) for c in cols]
    return [(slice(r, r + 64), slice(c, c + 64)) for r, c in bm.windows(bm.NWIN, seed)]


def child(kind, path, seed):
    """One side of one round in this fresh process; prints JSON."""
    if kind.startswith("py-"):
        import blosc2

        blosc2.set_nthreads(2)
        arr = blosc2.open(path, mode="r")
    else:
        arr = np.load(path, mmap_mode="r")
    todo = ops(kind.split("-", 1)[1], int(seed))
    t, cpu = time.perf_counter(), time.process_time()
    check = sum(float(np.array(arr[o]).sum()) for o in todo)
    print(json.dumps({"seconds": time.perf_counter() - t, "cpu": time.process_time() - cpu,
                      "n": len(todo), "check": check}))


def decode_child(threads):
    """python-blosc2's decode of one column of 4 chunks (32 MiB), best of 5: wall, CPU (ms)."""
    import blosc2

    blosc2.set_nthreads(int(threads))
    arr = blosc2.open(bm.WIN, mode="r")  # kept: python-blosc2 crashes when its schunk outlives it
    schunk = arr.schunk
    per_row = bm.WSHAPE[1] // 1024
    passes = []
    for _ in range(5):
        t, cpu = time.perf_counter(), time.process_time()
        for r in range(bm.WSHAPE[0] // 1024):
            schunk.decompress_chunk(r * per_row + 3)
        passes.append(((time.perf_counter() - t) * 1e3, (time.process_time() - cpu) * 1e3))
    print(json.dumps(min(passes)))


def main():
    rounds, binary = int(sys.argv[1]), sys.argv[2]
    bm.gen()
    bm.warm_sources()
    for kind in ("strips", "win"):
        rows = []
        for i in range(rounds):
            py = benchlib.child_json(__file__, "child", "py-" + kind, bm.WIN, i)
            with bm.Mounted(binary, bm.WIN) as m:
                c0 = m.cpu_seconds()
                ours = benchlib.child_json(__file__, "child", "mnt-" + kind,
                                           os.path.join(m.mp, "array.npy"), i)
                daemon = m.cpu_seconds() - c0
            if abs(py["check"] - ours["check"]) > 1e-9 * max(1.0, abs(py["check"])):
                raise SystemExit(f"{kind}: b2fs read {ours['check']}, python {py['check']}")
            n = py["n"]
            row = {"python ms": py["seconds"] / n * 1e3, "python CPU ms": py["cpu"] / n * 1e3,
                   "b2fs ms": ours["seconds"] / n * 1e3,
                   "reader CPU ms": ours["cpu"] / n * 1e3, "daemon CPU ms": daemon / n * 1e3}
            rows.append(row)
            print(f"{kind} round {i + 1}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()),
                  flush=True)
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(f"{kind} median: " + ", ".join(f"{k} {v:.3f}" for k, v in med.items()), flush=True)
    for threads in (1, 2):
        wall, cpu = benchlib.child_json(__file__, "decode", threads)
        print(f"python-blosc2 decode of a strip's 4 chunks, {threads} thread(s): "
              f"{wall:.1f} ms wall, {cpu:.1f} ms CPU (best of 5)", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "child":
        child(*sys.argv[2:])
    elif sys.argv[1] == "decode":
        decode_child(sys.argv[2])
    else:
        main()
