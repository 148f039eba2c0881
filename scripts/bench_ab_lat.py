#!/usr/bin/env python3
"""Same-run A/B of b2fs builds on bench_mount.py's `rand1d` pattern, per read.

    .venv/bin/python scripts/bench_ab_lat.py ROUNDS BINARY_A BINARY_B

Each round mounts each build in turn (the order swapped every round) on seq.b2nd and times
each of the 2000 cold 4 KiB `pread`s of its chunk files (bench_mount.py's `mnt-rand1d`
offsets) in a fresh process. Prints per build the median over rounds of the per-round median
and mean read time (us), and the median of the per-round ratios of B's over A's median
read (A's speed-up, higher is better). The per-read median is less moved by other processes
on the machine than the total time (a few reads that wait for a core): compare both.
"""

import glob
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_mount as bm  # noqa: E402


def child(path):
    chunk = 8 << 20
    files = sorted(glob.glob(os.path.join(path, "data", "*.bin")))
    offs = bm.rand_offsets(bm.NRAND, len(files) * chunk, 5, 8)
    fds = [os.open(f, os.O_RDONLY) for f in files]
    times = []
    clock = time.perf_counter_ns
    for o in offs:
        t = clock()
        os.pread(fds[o // chunk], 4096, o % chunk)
        times.append(clock() - t)
    times.sort()
    print(json.dumps({"median": times[len(times) // 2] / 1e3, "mean": sum(times) / len(times) / 1e3,
                      "p90": times[len(times) * 9 // 10] / 1e3}))


def main():
    if sys.argv[1] == "child":
        return child(sys.argv[2])
    rounds, *bins = sys.argv[1:]
    bm.gen()
    bm.warm_sources()
    res = {b: [] for b in bins}
    for i in range(int(rounds)):
        for b in bins if i % 2 == 0 else bins[::-1]:
            with bm.Mounted(b, bm.SEQ) as m:
                out = subprocess.run([sys.executable, __file__, "child", m.mp], check=True,
                                     capture_output=True, text=True).stdout
                res[b].append(json.loads(out))
        print(f"round {i + 1}: " + "; ".join(
            f"{os.path.basename(b)} median {res[b][-1]['median']:.0f} us, mean"
            f" {res[b][-1]['mean']:.0f} us" for b in bins), flush=True)
    a, b = bins
    for k in bins:
        print(f"{os.path.basename(k)}: median read {statistics.median(r['median'] for r in res[k]):.1f} us,"
              f" mean read {statistics.median(r['mean'] for r in res[k]):.1f} us,"
              f" p90 {statistics.median(r['p90'] for r in res[k]):.1f} us (medians over rounds)")
    ratios = [y["median"] / x["median"] for x, y in zip(res[a], res[b])]
    means = [y["mean"] / x["mean"] for x, y in zip(res[a], res[b])]
    print(f"B / A median read per round {[round(r, 2) for r in ratios]}, median"
          f" {statistics.median(ratios):.3f}, above 1: {sum(r > 1 for r in ratios)}/{len(ratios)};"
          f" mean read: median {statistics.median(means):.3f}")


if __name__ == "__main__":
    main()
