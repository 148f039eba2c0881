#!/usr/bin/env python3
"""Same-run A/B of b2fs builds on the Zarr view's metadata: the first read of a store's root
`zarr.json` (the consolidated metadata of every leaf, built and rendered by the daemon).

    .venv/bin/python scripts/bench_zarr_json_ab.py SOURCE ROUNDS BIN[:OPTS] BIN[:OPTS]...
    e.g. .venv/bin/python scripts/bench_zarr_json_ab.py /tmp/many10000.b2z 8 NEW OLD \
             NEW:zarr_strict_json
    (SOURCE from `.venv/bin/python scripts/oracle/stores.py many /tmp/many10000.b2z 10000`)

Each round mounts each build in turn (`-o ro`, plus OPTS; the order reversed every other
round), reads MNT/zarr/zarr.json whole once and records the wall time of that read and the
daemon's CPU time over it. Prints each round, then per build the median wall and CPU time and
the document's size. Run it on an idle machine (`/work/bin/quietlong`).
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def once(binary, opts, source):
    """(wall seconds, daemon CPU seconds, bytes) of the first read of the root zarr.json."""
    with benchlib.Mount(binary, source, opts=("ro", *opts)) as m:
        cpu0 = m.cpu_seconds()
        t0 = time.perf_counter()
        n = benchlib.read_files([os.path.join(m.mp, "zarr", "zarr.json")])
        wall = time.perf_counter() - t0
        return wall, m.cpu_seconds() - cpu0, n


def main():
    source, rounds, *builds = sys.argv[1:]
    runs = []
    for b in builds:
        binary, _, opts = b.partition(":")
        runs.append((binary, tuple(o for o in opts.split(",") if o)))
    res = {b: [] for b in builds}
    for r in range(int(rounds)):
        order = list(zip(builds, runs))
        for name, (binary, opts) in (order if r % 2 == 0 else order[::-1]):
            wall, cpu, n = once(binary, opts, source)
            res[name].append((wall, cpu, n))
            print(f"round {r}: {name}: {wall:.3f} s wall, {cpu:.2f} s daemon CPU, {n} bytes",
                  flush=True)
    for name, v in res.items():
        print(f"{name}: median {statistics.median(x[0] for x in v):.3f} s wall, "
              f"{statistics.median(x[1] for x in v):.2f} s daemon CPU, {v[0][2]} bytes")


if __name__ == "__main__":
    main()
