#!/usr/bin/env python3
"""Alternating A/B of b2fs binaries on the cold sequential read of bench-data/f1g.b2nd, with
python-blosc2 (nthreads=2) measured in every round.

    .venv/bin/python scripts/ab_read.py ROUNDS PAUSE_SECONDS BINARY...
    e.g. .venv/bin/python scripts/ab_read.py 5 2 /tmp/b2fs-old target/release/b2fs

Each round: python decompresses every chunk, then each binary mounts the source (`-o ro`)
and one pass reads every chunk file in 1 MiB reads (scripts/bench_read.py read-mount).
Printed per pass: MiB/s, CPU seconds per GiB (python: its process; b2fs: daemon + reader),
the daemon's peak RSS, and the rate over python's in the same round. On machines whose
second vCPU comes and goes only same-round ratios mean anything.
"""

import os
import subprocess
import sys
import tempfile
import time

import benchlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
SRC = os.path.join(ROOT, "bench-data", "f1g.b2nd")
BENCH = os.path.join(ROOT, "scripts", "bench_read.py")


def run_json(*args):
    return benchlib.child_json(BENCH, *args)


def b2fs_pass(binary, mp):
    with benchlib.Mount(binary, SRC, mp) as m:
        return run_json("read-mount", mp, m.pid), m.hwm_mib()


def main():
    rounds, pause, binaries = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
    if not os.path.exists(SRC):
        subprocess.run([PY, BENCH, "gen", os.path.dirname(SRC)], check=True)
    with open(SRC, "rb") as f:  # both sides read from the page cache
        while f.read(1 << 24):
            pass
    mp = os.path.realpath(tempfile.mkdtemp())
    try:
        for r in range(1, rounds + 1):
            time.sleep(pause)
            d = run_json("seq", SRC)
            gib = d["bytes"] / 2**30
            py_rate = d["bytes"] / d["seconds"] / 2**20
            line = f"round {r}: python {py_rate:.0f} MiB/s {d['cpu_seconds'] / gib:.2f} cpu-s/GiB"
            for binary in binaries:
                time.sleep(pause)
                d, hwm = b2fs_pass(binary, mp)
                gib = d["bytes"] / 2**30
                rate = d["bytes"] / d["seconds"] / 2**20
                cpu = (d["daemon_cpu_seconds"] + d["reader_cpu_seconds"]) / gib
                line += f" | {binary} {rate:.0f} MiB/s {cpu:.2f} cpu-s/GiB {hwm} MiB {rate / py_rate:.2f}x"
            print(line, flush=True)
    finally:
        os.rmdir(mp)


if __name__ == "__main__":
    main()
