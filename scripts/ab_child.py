#!/usr/bin/env python3
"""Alternating A/B of one read pattern of scripts/bench_mount.py over several configurations
(a binary, variables in the daemon's environment, mount options), each round on a fresh
mount of each, the order reversed every other round.

    .venv/bin/python scripts/ab_child.py ROUNDS KIND SOURCE REL LABEL=BINARY[:ENV=V+ENV=V[:OPTS]]...
    e.g. .venv/bin/python scripts/ab_child.py 10 mnt-rand1d seq - main=/tmp/b2fs-base11 \\
             new=target/release/b2fs small=target/release/b2fs::cache_size=32M

KIND is a child of bench_mount.py (mnt-rand1d, mnt-rand2d, mnt-win, plain-4k, dd, ...),
SOURCE `seq` or `win` (bench_mount.py's seq.b2nd or win.b2nd), REL the file under the mount
point the child reads (`-` for the mount point itself, `array.npy`). Printed per
configuration: the median rate (per second; MiB/s for dd, whose block size is 4k), the
median of its per-round ratios to the first configuration, and every round's rate. On a
machine whose second vCPU comes and goes, only the per-round ratios mean anything, and a
difference under 10% needs many rounds.
"""

import json
import os
import statistics
import subprocess
import sys

import benchlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_mount as bm  # noqa: E402


def parse(spec):
    label, _, rest = spec.partition("=")
    binary, _, rest = rest.partition(":")
    env, _, opts = rest.partition(":")
    env = dict(kv.split("=", 1) for kv in env.split("+") if kv)
    return label, binary, env, ["ro"] + [o for o in opts.split(",") if o]


def main():
    if len(sys.argv) < 6:
        raise SystemExit(__doc__)
    rounds, kind, source, rel = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    src = {"seq": bm.SEQ, "win": bm.WIN}[source]
    cfgs = [parse(s) for s in sys.argv[5:]]
    bm.gen()
    bm.warm_sources()
    rates = {c[0]: [] for c in cfgs}
    saved = dict(os.environ)
    for r in range(rounds):
        for label, binary, env, opts in (cfgs if r % 2 == 0 else cfgs[::-1]):
            os.environ.update(env)
            try:
                with benchlib.Mount(binary, src, opts=tuple(opts)) as m:
                    path = m.mp if rel == "-" else os.path.join(m.mp, rel)
                    out = subprocess.run([sys.executable, bm.__file__, "child", kind, path,
                                          "4k" if kind == "dd" else "0"],
                                         check=True, capture_output=True, text=True).stdout
            finally:
                os.environ.clear()
                os.environ.update(saved)
            d = json.loads(out)
            rates[label].append(d["n"] / d["seconds"] / (2**20 if kind == "dd" else 1))
    first = rates[cfgs[0][0]]
    for label, v in rates.items():
        ratio = statistics.median(a / b for a, b in zip(v, first))
        print(f"{label:16s} median {statistics.median(v):9.0f}  / {cfgs[0][0]}: {ratio:.2f}x  "
              "rounds " + " ".join(f"{x:.0f}" for x in v))


if __name__ == "__main__":
    main()
