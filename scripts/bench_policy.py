#!/usr/bin/env python3
"""Direct I/O (the default) against the page cache (`-o keep_cache`) for cold reads, with
python-blosc2 in the same rounds.

    .venv/bin/python scripts/bench_policy.py [ROUNDS] BINARY

For each round and each pattern (every chunk file of seq.b2nd read in 1 MiB reads;
`np.load` of win.b2nd's array.npy), one python-blosc2 run, then one run on a fresh mount of
each policy; prints each rate, its ratio to python's, and the CPU per MiB of the daemon and
of the reader (over the timed part). The data are scripts/bench_mount.py's (made when
missing). Run it on an idle machine.
"""

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_mount as bm  # noqa: E402

PATTERNS = [("seq", bm.SEQ, ""), ("load", bm.WIN, "array.npy")]
POLICIES = [("direct_io", ()), ("keep_cache", ("keep_cache",))]


def main():
    args = sys.argv[1:]
    rounds = int(args.pop(0)) if len(args) > 1 else 3
    binary = args[0]
    bm.gen()
    bm.warm_sources()
    ratios = {}
    for i in range(rounds):
        for kind, src, rel in PATTERNS:
            py = bm.run("py-" + kind, src)
            line = [f"round {i + 1} {kind}: python {bm.rate(py) / 2**20:.0f} MiB/s"]
            for name, opts in POLICIES:
                ours, daemon, _ = bm.run_mounted(binary, src, "mnt-" + kind, rel, opts)
                mib = ours["n"] / 2**20
                r = bm.rate(ours) / bm.rate(py)
                ratios.setdefault((kind, name), []).append(r)
                line.append(f"{name} {bm.rate(ours) / 2**20:.0f} MiB/s ({r:.2f}x python;"
                            f" daemon {daemon / mib * 1e3:.2f}, reader"
                            f" {ours['cpu'] / mib * 1e3:.2f} ms CPU per MiB)")
            print("; ".join(line), flush=True)
    for (kind, name), v in ratios.items():
        print(f"{kind} {name}: median {statistics.median(v):.2f}x python")


if __name__ == "__main__":
    main()
