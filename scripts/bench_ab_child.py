#!/usr/bin/env python3
"""Same-run A/B of two b2fs builds on one read pattern, alternating fresh mounts.

    .venv/bin/python scripts/bench_ab_child.py KIND SOURCE REL ROUNDS BINARY_A BINARY_B [--opts O]
    e.g. .venv/bin/python scripts/bench_ab_child.py mnt-load win array.npy 8 NEW OLD
         .venv/bin/python scripts/bench_ab_child.py mnt-win win array.npy 8 NEW OLD --opts keep_cache

KIND is a mount child of scripts/bench_mount.py (mnt-seq, mnt-load, mnt-win, mnt-rand1d,
mnt-rand2d), SOURCE `win` or `seq` (its data), REL the path the child reads inside the mount
(`-` for the mount itself). Each round mounts each build in turn (the order swapped every
round), runs the child and records its rate, the daemon's CPU time over the run (from
/proc/PID/stat) and its peak RSS; prints the per-round rate ratios A / B, their median and
each build's median daemon CPU. The same binary given twice is a control of the pattern's
noise (kept apart by position). --opts adds mount options to `ro` (e.g. keep_cache). Run it on
an idle machine.
"""

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_mount as bm  # noqa: E402


def main():
    args = sys.argv[1:]
    opts = ()
    if "--opts" in args:
        i = args.index("--opts")
        opts = tuple(args[i + 1].split(","))
        del args[i:i + 2]
    kind, source, rel, rounds, *bins = args
    src = {"win": bm.WIN, "seq": bm.SEQ}[source]
    bm.gen()
    bm.warm_sources()
    # Byte rates for the scans, operations per second for the others.
    unit, scale = ("MiB/s", 2**20) if kind in ("mnt-seq", "mnt-load", "mnt-mmsum") else ("/s", 1)
    # By position, not by path: one binary given twice is a control (A against itself).
    res = [[], []]
    for i in range(int(rounds)):
        for j in (0, 1) if i % 2 == 0 else (1, 0):
            got, daemon, hwm = bm.run_mounted(bins[j], src, kind, "" if rel == "-" else rel,
                                             opts, arg="1")
            res[j].append((bm.rate(got), daemon, hwm))
        print(f"round {i + 1}: " + "; ".join(
            f"{name} {os.path.basename(bins[j])} {res[j][-1][0] / scale:.0f} {unit}, daemon CPU"
            f" {res[j][-1][1]:.2f} s, peak RSS {res[j][-1][2]} MiB"
            for j, name in enumerate(("A", "B"))), flush=True)
    ratios = [x[0] / y[0] for x, y in zip(*res)]
    print("rate A / B per round", [round(r, 2) for r in ratios], "median",
          round(statistics.median(ratios), 2))
    print("median daemon CPU (s):", {f"{name} {os.path.basename(bins[j])}":
                                     round(statistics.median(v[1] for v in res[j]), 3)
                                     for j, name in enumerate(("A", "B"))})


if __name__ == "__main__":
    main()
