#!/usr/bin/env python3
"""Where a b2fs daemon's time goes during one read pattern of scripts/bench_mount.py.

    .venv/bin/python scripts/profile_mount.py BINARY KIND [--opts ro,keep_cache] [--zstd]
    e.g. .venv/bin/python scripts/profile_mount.py target/release/b2fs mnt-win

KIND is a child of bench_mount.py that reads through a mount: mnt-win (300 random 64x64
windows of win.b2nd's array.npy through np.load(mmap_mode='r')), mnt-rand1d (2000 cold 4 KiB
preads of seq.b2nd's chunk files), mnt-rand2d, mnt-seq, mnt-load, mnt-strips, mnt-mmsum.
ct-load, ct-mmsum, ct-mmall, ct-slices: the `table.npy` patterns of scripts/bench_ctable.py
(`vs`) on bench-data/ctable24/t24.b2d (`bench_ctable.py gen24 bench-data/ctable24`).
It mounts the pattern's source with BINARY, runs `perf record -F 4999 -g -p DAEMON` while the child runs, and prints
the daemon's samples by category (decode, with the page faults inside it; FUSE replies and
page stores; waits; ...) and by thread. The perf data is kept in /tmp/b2fs-profile.data for
`perf report -i`. --zstd also counts the daemon's calls of ZSTD_decompressDCtx (one per
zstd stream: 8 per block of the float64 arrays python-blosc2 writes by default, whose blocks
are split in one stream per byte) with a uprobe, i.e. how many blocks the pattern decoded.
Run it on an idle machine (other builds stopped); it needs root (perf, uprobes, FUSE).
"""

import collections
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_mount as bm  # noqa: E402

DATA = "/tmp/b2fs-profile.data"
SOURCES = {"mnt-win": (bm.WIN, "array.npy", "1"), "mnt-rand1d": (bm.SEQ, "", "0"),
           "mnt-rand2d": (bm.WIN, "array.npy", "0"), "mnt-seq": (bm.SEQ, "", "0"),
           "mnt-load": (bm.WIN, "array.npy", "0"), "mnt-strips": (bm.WIN, "array.npy", "1"),
           "mnt-mmsum": (bm.WIN, "array.npy", "0")}
CT24 = os.path.join(os.path.dirname(bm.DATA), "ctable24", "t24.b2d")
SOURCES.update({f"ct-{p}": (CT24, "table.npy", "1000") for p in ("load", "mmsum", "mmall",
                                                                    "slices")})

# First match wins; the decoder's frames (libzstd's Huffman loop is hand-written assembly
# without unwind info: its samples have no caller and no symbol) before everything else.
CATEGORIES = [
    ("decode: page faults inside it", r"(ZSTD|HUF_|FSE_|unshuffle|read_streams|StreamDecoders)"
                                      r".*exc_page_fault|exc_page_fault.*(ZSTD|HUF_|unshuffle)"),
    ("decode", r"ZSTD|HUF_|FSE_|unshuffle|read_streams|StreamDecoders|^\[unknown\]$"),
    ("drop of mapped pages (madvise)", r"madvise"),
    ("FUSE replies and page stores (writev)", r"writev"),
    ("waiting for requests (read /dev/fuse)", r"fuse_dev_do_read|ksys_read"),
    ("heap growth (mprotect, sysmalloc)", r"mprotect|sysmalloc"),
    ("other page faults", r"exc_page_fault"),
    ("waits, wake-ups, scheduling", r"futex|sched_yield|schedule"),
    ("memcpy / memset", r"memmove|memcpy|memset"),
    ("statx (source checks)", r"statx"),
    ("pread", r"pread"),
]


def categorize(path):
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,ip,sym"],
                         capture_output=True, text=True, check=True).stdout
    cats, threads, total = collections.Counter(), collections.Counter(), 0
    for sample in out.split("\n\n"):
        lines = [x.strip() for x in sample.strip().split("\n") if x.strip()]
        if len(lines) < 2:
            continue
        frames = [" ".join(x.split()[1:]) for x in lines[1:]]
        # Leaf first; a stack of nothing but unresolved frames is the assembly Huffman loop.
        stack = "[unknown]" if set(frames) == {"[unknown]"} else " ".join(frames)
        name = next((n for n, pat in CATEGORIES if re.search(pat, stack)), "other")
        cats[name] += 1
        threads[re.sub(r"-\d+$", "-N", lines[0].split()[0])] += 1
        total += 1
    return total, cats, threads


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in SOURCES:
        raise SystemExit(__doc__)
    binary, kind = os.path.realpath(sys.argv[1]), sys.argv[2]
    args = sys.argv[3:]
    opts = args[args.index("--opts") + 1].split(",") if "--opts" in args else []
    src, rel, arg = SOURCES[kind]
    bm.gen()
    bm.warm_sources()
    probe = None
    if "--zstd" in args:
        nm = subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout
        addr = next(int(x.split()[0], 16) for x in nm.splitlines()
                    if x.endswith(" ZSTD_decompressDCtx"))
        # uprobes take file offsets: the text segment's offset differs from its address.
        seg = subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True).stdout
        load = [x.split() for x in seg.splitlines() if x.strip().startswith("LOAD")]
        off, vaddr = next((int(s[1], 16), int(s[2], 16)) for s in load if "E" in s[-2])
        subprocess.run(["perf", "probe", "-q", "-d", "probe_b2fs:*"], capture_output=True)
        subprocess.run(["perf", "probe", "-q", "-x", binary, "-a",
                        f"zstd_stream={addr - vaddr + off:#x}"], check=True)
        probe = "probe_b2fs:zstd_stream"
    with bm.Mounted(binary, src, [o for o in opts if o != "ro"]) as m:
        pid = str(m.proc.pid)
        perfs = [subprocess.Popen(["perf", "record", "-q", "-F", "4999", "-g", "-p", pid,
                                   "-o", DATA], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)]
        if probe:
            perfs.append(subprocess.Popen(["perf", "stat", "-x,", "-e", probe, "-p", pid,
                                           "-o", DATA + ".count"]))
        time.sleep(0.5)
        if kind.startswith("ct-"):
            res = bm.benchlib.child_json(os.path.join(os.path.dirname(__file__), "bench_ctable.py"),
                                         "child", f"fs-{kind[3:]}", os.path.join(m.mp, rel), arg)
        else:
            res = bm.run(kind, os.path.join(m.mp, rel) if rel else m.mp, arg)
        for p in perfs:
            p.send_signal(2)
            p.wait()
    print(f"{kind}: {res['n']} in {res['seconds']:.3f} s ({bm.rate(res):.0f}/s)")
    if probe:
        with open(DATA + ".count") as f:
            calls = next(int(x.split(",")[0]) for x in f if probe in x)
        print(f"ZSTD_decompressDCtx calls: {calls} ({calls / res['n']:.2f} per unit)")
        subprocess.run(["perf", "probe", "-q", "-d", "probe_b2fs:*"], capture_output=True)
    total, cats, threads = categorize(DATA)
    print(f"daemon samples: {total} ({total / 4999 * 1e3 / res['n']:.3f} ms of CPU per unit)")
    for name, n in cats.most_common():
        print(f"  {100 * n / total:5.1f}%  {name}")
    print("by thread:", ", ".join(f"{t} {100 * n / total:.1f}%" for t, n in threads.most_common()))


if __name__ == "__main__":
    main()
