#!/usr/bin/env python3
"""Every read pattern of issue 25 through a b2fs mount against python-blosc2 in-process,
alternating in every round, each side in a fresh process (cold caches on both sides; the
source files stay in the page cache).

    .venv/bin/python scripts/bench_mount.py ROUNDS BINARY [--write BENCHMARKS.md] [--chart PNG]
                                          [--only KEY,KEY...] [--ab OTHER_BINARY]
    e.g. .venv/bin/python scripts/bench_mount.py 3 target/release/b2fs \\
             --write BENCHMARKS.md --chart docs/bench.png

Sources (made once in bench-data/issue25/ by python-blosc2, float64, noisy values):
    seq.b2nd    256 MiB 1-D, chunks of 8 MiB, ZSTD clevel 5 + SHUFFLE
    win.b2nd    256 MiB 2-D (4096, 8192), chunks (1024, 1024), python-blosc2's defaults
                (ZSTD clevel 5 + SHUFFLE, blocks (16, 1024))
    multi/      a directory of 4 sources of 64 MiB (1-D, as seq.b2nd)

Each pattern prints b2fs / python (or b2fs / its own reference: tmpfs, one reader) per round;
the summary is the median of the per-round ratios, with the best round. With --write the
summary and the per-round detail replace the block between the `bench_mount` markers of the
given markdown file; with --chart a bar chart of the medians against their targets is saved
(matplotlib). --ab also mounts OTHER_BINARY in every round of the patterns seq, load, win,
win-kc, strips, mmsum, rand1d and many and prints this binary's rate over it (a same-run A/B
against, say, main's build; load-pt and win-pt too, the other binary's first open on its own
fresh mount); the other binary reads first in odd rounds, second in even ones.

Two patterns are not the issue's own but the same kind of read, with its targets: `strips`
(tall 4096x64 column strips through a map: the windows' faults at full height) and `mmsum`
(a reduction over a map of the whole array: every page faulted in file order).

"warm" 4 KiB reads (plain4k) read a 16 MiB region of the file once, then time a second pass
over it (a region b2fs's default 256 MiB cache holds; the same offsets on a tmpfs copy).
plain4k-kc and dd-kc are plain4k and dd on a `-o keep_cache` mount: the issue asks for these
targets on every mount mode, and the default mount's direct I/O puts them below its floor
(BENCHMARKS.md, "Session 11: small reads" and "Session 15: direct I/O or the page cache").

The -pt patterns mount with `-o ro,passthrough` (root, Linux 6.9+): b2fs fills a memory file
with the whole decoded `array.npy`, which the kernel then reads without b2fs. Since session 18
the first open returns at once and is served by b2fs the ordinary way while the file fills in
the background; opens after the fill (once the first is closed) pass through (before, the first
open waited for the fill). load-pt and win-pt time the first open with the rest (win-pt from
before `np.load(mmap_mode='r')`, unlike win), and with --ab the other binary's too; plain4k-pt
and dd-pt wait for the fill (`user.b2fs.backing_fills`; a binary without it filled at the open)
and time passes after it.

The parts: this file holds the command line, the rounds and the report (the markdown block,
--write, --chart); bench_mount_child.py the sources and the children (one measurement each,
`bench_mount.py child KIND PATH ARG`); bench_mount_patterns.py the patterns and PATTERNS.
"""

import os
import statistics
import subprocess
import sys
import time

import bench_mount_patterns as patterns
import benchlib  # noqa: F401 (scripts that import this one use bm.benchlib)
# The names the scripts that import this one use (bm.SEQ, bm.run, bm.Mounted, ...) besides
# its own.
from bench_mount_child import (  # noqa: F401
    DATA, NRAND, NSTRIPS, NWIN, ROOT, SEQ, WIN, WSHAPE, child, gen, rand_offsets, run,
    warm_sources, windows)
from bench_mount_patterns import PATTERNS, Mounted, rate, run_mounted  # noqa: F401

MARK_BEGIN = "<!-- bench_mount: begin (scripts/bench_mount.py writes this block) -->"
MARK_END = "<!-- bench_mount: end -->"


def load_avg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    if sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    rounds, binary = int(sys.argv[1]), os.path.realpath(sys.argv[2])
    args = sys.argv[3:]
    write = args[args.index("--write") + 1] if "--write" in args else None
    chart = args[args.index("--chart") + 1] if "--chart" in args else None
    only = args[args.index("--only") + 1].split(",") if "--only" in args else None
    patterns.AB = os.path.realpath(args[args.index("--ab") + 1]) if "--ab" in args else None
    pats = [p for p in PATTERNS if only is None or p[0] in only]
    gen()
    warm_sources()
    results, loads = measure(pats, rounds, binary)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True).stdout.strip()
    block, summary = report(pats, results, loads, rev)
    print(block)
    if write:
        write_block(write, block)
    if chart:
        save_chart(chart, summary, rev)


def measure(pats, rounds, binary):
    """Every pattern of `pats` once a round, printing each result as it comes: the (ratio,
    detail) of each round by key, and the load average before each measurement."""
    results = {k: [] for k, *_ in pats}
    loads = []
    for r in range(1, rounds + 1):
        patterns.ROUND = r
        for key, desc, target, f in pats:
            loads.append(float(load_avg()))
            ratio, detail = f(binary)
            results[key].append((ratio, detail))
            print(f"round {r} {key}: {ratio:.2f}x (target {target}x) {detail}", flush=True)
    return results, loads


def report(pats, results, loads, rev):
    """The markdown block between the markers (the command, the summary table, every round's
    detail) and the summary (key, median, best, target) of each pattern."""
    head = (f"`{' '.join(['.venv/bin/python', 'scripts/bench_mount.py', *sys.argv[1:]])}` on "
            f"`{rev}`, {os.cpu_count()} vCPUs, load average {min(loads):.1f}-{max(loads):.1f}"
            f" during the run, {time.strftime('%Y-%m-%d %H:%M')}")
    lines = [MARK_BEGIN, "", head, "",
             "| pattern | target | median | best | met |", "| --- | --- | --- | --- | --- |"]
    summary = []
    for key, desc, target, _ in pats:
        ratios = [x for x, _ in results[key]]
        med, best = statistics.median(ratios), max(ratios)
        summary.append((key, med, best, target))
        lines.append(f"| {desc} | >= {target} | **{med:.2f}x** | {best:.2f}x |"
                     f" {'yes' if med >= target else 'no'} |")
    lines += ["", "Per round:", ""]
    for key, desc, target, _ in pats:
        for i, (ratio, detail) in enumerate(results[key], 1):
            lines.append(f"- {key}, round {i}: {ratio:.2f}x ({detail})")
    lines += ["", MARK_END]
    return "\n".join(lines), summary


def write_block(path, block):
    """Replaces the block between the markers of the markdown file `path` (appends it when the
    file has none)."""
    text = open(path).read()
    if MARK_BEGIN in text and MARK_END in text:
        pre, rest = text.split(MARK_BEGIN, 1)
        post = rest.split(MARK_END, 1)[1]
        text = pre + block + post
    else:
        text = text + "\n" + block + "\n"
    with open(path, "w") as f:
        f.write(text)


def save_chart(path, summary, rev):
    """A bar chart of the medians against their targets (matplotlib), saved as `path`."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    xs = range(len(summary))
    ax.bar(xs, [s[1] for s in summary], color=["tab:green" if s[1] >= s[3] else "tab:red"
                                               for s in summary], label="median ratio")
    ax.scatter(xs, [s[2] for s in summary], color="black", marker="_", s=200, label="best round")
    ax.scatter(xs, [s[3] for s in summary], color="tab:blue", marker="D", label="target")
    ax.set_xticks(list(xs), [s[0] for s in summary], rotation=30)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.1fx"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_yticks([0.1, 0.2, 0.5, 1, 2, 5, 10])
    ax.set_ylabel("b2fs / reference (higher is better)")
    ax.set_title(f"b2fs against its references (issue 25), {rev}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
