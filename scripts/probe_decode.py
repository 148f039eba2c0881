#!/usr/bin/env python3
"""Where one cold block decode spends its time: uprobe timings (entry to return) of b2fs's
decode functions in a daemon during `bench_mount.py`'s mnt-rand1d child, or in
`b2fs verify` of the same array, or of python-blosc2's zstd streams during py-rand1d.

    .venv/bin/python scripts/probe_decode.py BINARY rand1d [FUNCS] [--env B2FS_X=...]
    .venv/bin/python scripts/probe_decode.py BINARY verify [FUNCS]
    .venv/bin/python scripts/probe_decode.py - python

FUNCS: comma list of fread (the FUSE read), small (small_read), coredr (the reader's range
decode, with the source mapping), codecdr (the codec's range decode), rstreams
(read_streams: a block's streams, on one or two threads), backward (the filter pipeline:
unshuffle into the block), zstd (ZSTD_decompressDCtx, one per stream). Default:
zstd,rstreams,backward,codecdr. Prints per function: count, mean, p10/p50/p90 in us; with
rstreams, zstd and codecdr it also splits each block decode into phases (read_streams entry
to the first stream, the streams' span on both threads, the wait for the helper's last
stream, the unshuffle) and counts the streams the helper thread took. EXTRA=ev1,ev2 adds
kernel tracepoints (e.g. exceptions:page_fault_user) to the raw event list kept in
/tmp/b2fs-probe.txt. Each probe hit costs about 2 us here: compare phases, not totals with
unprobed runs. Needs root (perf, uprobes); run it on an idle machine.
"""

import collections
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_mount as bm  # noqa: E402

# Substrings of the mangled symbol names (unique in a release build).
FUNCS = {
    "fread": "FuseAdapter$u20$as$u20$fuser..Filesystem$GT$4read17h",
    "small": "ChunkReader$GT$10small_read17h",
    "coredr": "reader..Core$GT$12decode_range17h",
    "codecdr": "7Decoder12decode_range17h",
    "rstreams": "6decode12read_streams17h",
    "backward": "8Pipeline8backward17h",
    "zstd": " ZSTD_decompressDCtx",
}
DATA = "/tmp/b2fs-probe.data"
RAW = "/tmp/b2fs-probe.txt"


def file_offset(lib, symbol_line_pred, dynamic=False):
    """The file offset of the one symbol of LIB whose `nm` line matches."""
    out = subprocess.run(["nm", "-D", lib] if dynamic else ["nm", lib], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    hits = [x for x in out if symbol_line_pred(x)]
    if len(hits) != 1:
        raise SystemExit(f"{lib}: {len(hits)} symbols match: {hits[:3]}")
    addr = int(hits[0].split()[0], 16)
    # uprobes take file offsets: the text segment's offset differs from its address.
    seg = subprocess.run(["readelf", "-lW", lib], capture_output=True, text=True).stdout
    load = [x.split() for x in seg.splitlines() if x.strip().startswith("LOAD")]
    off, vaddr = next((int(s[1], 16), int(s[2], 16)) for s in load if "E" in s[-2])
    return addr - vaddr + off


def add_probes(lib, names, dynamic=False):
    subprocess.run(["perf", "probe", "-q", "-d", "b2fsprobe:*"], capture_output=True)
    events = []
    for n in names:
        pat = FUNCS[n]
        at = file_offset(lib, lambda x, pat=pat: x.endswith(pat) if n == "zstd" else pat in x,
                         dynamic)
        for ev, suffix in ((n, ""), (f"{n}_ret", "%return")):
            subprocess.run(["perf", "probe", "-q", "-x", lib, "-a",
                            f"b2fsprobe:{ev}={at:#x}{suffix}"], check=True)
        events += [f"b2fsprobe:{n}", f"b2fsprobe:{n}_ret__return"]
    extra = [e for e in os.environ.get("EXTRA", "").split(",") if e]
    return ",".join(events + extra)


def parse():
    out = subprocess.run(["perf", "script", "-i", DATA, "-F", "tid,time,event"],
                         capture_output=True, text=True).stdout
    with open(RAW, "w") as f:
        f.write(out)
    ev = []
    for line in out.splitlines():
        p = line.split()
        if len(p) >= 3:
            ev.append((int(p[0]), float(p[1].rstrip(":")) * 1e6, p[2].rstrip(":").split(":")[-1]))
    return ev


def show(name, v):
    if not v:
        return
    v = sorted(v)
    q = lambda f: v[int(f * (len(v) - 1))]  # noqa: E731
    print(f"  {name:28s} n={len(v):6d} mean {statistics.mean(v):7.1f}  p10 {q(.1):6.1f}"
          f"  p50 {q(.5):6.1f}  p90 {q(.9):6.1f} us")


def durations(ev, names):
    open_, d = collections.defaultdict(list), collections.defaultdict(list)
    callers = {t for t, _, e in ev if e == "rstreams"}
    for tid, t, e in ev:
        if e.endswith("_ret__return"):
            n = e[:-len("_ret__return")]
            if open_[(tid, n)]:
                t0 = open_[(tid, n)].pop()
                d[n].append(t - t0)
                if n == "zstd" and callers:
                    d["zstd on " + ("a caller" if tid in callers else "the helper")].append(t - t0)
        elif e in FUNCS:
            open_[(tid, e)].append(t)
    for n in names + ["zstd on a caller", "zstd on the helper"]:
        show(n, d.get(n))


def phases(ev):
    """Each codec range decode that holds one read_streams and one unshuffle."""
    ph, helper, start = collections.defaultdict(list), collections.Counter(), {}
    for k, (tid, t, e) in enumerate(ev):
        if e == "codecdr":
            start[tid] = k
        elif e == "codecdr_ret__return" and tid in start:
            seg = ev[start.pop(tid):k + 1]
            mine = {e2: t2 for tid2, t2, e2 in seg if tid2 == tid}
            need = ("rstreams", "rstreams_ret__return", "backward", "backward_ret__return")
            if not all(n in mine for n in need):
                continue
            rs, rsr = mine["rstreams"], mine["rstreams_ret__return"]
            z = [x for x in seg if x[2].startswith("zstd") and rs <= x[1] <= rsr]
            zs = [x for x in z if x[2] == "zstd"]
            if not zs:
                continue
            other = [x for x in zs if x[0] != tid]
            helper[len(other)] += 1
            ph["read_streams to 1st stream"].append(zs[0][1] - rs)
            ph["streams (both threads)"].append(max(x[1] for x in z) - zs[0][1])
            ph["last stream to return"].append(rsr - max(x[1] for x in z))
            ph["unshuffle (backward)"].append(mine["backward_ret__return"] - mine["backward"])
            if other:
                ph["helper's 1st stream starts"].append(other[0][1] - rs)
    if ph:
        print("phases of a block decode (us from read_streams entry):")
        for n, v in ph.items():
            show(n, v)
        print("  streams the helper took per block:", dict(helper.most_common()))


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in ("rand1d", "verify", "python"):
        raise SystemExit(__doc__)
    mode = sys.argv[2]
    names = (sys.argv[3].split(",") if len(sys.argv) > 3 and not sys.argv[3].startswith("--")
             else ["zstd", "rstreams", "backward", "codecdr"])
    if "--env" in sys.argv:
        k, v = sys.argv[sys.argv.index("--env") + 1].split("=", 1)
        os.environ[k] = v
    bm.gen()
    bm.warm_sources()
    if mode == "python":
        import blosc2
        ext = os.path.join(os.path.dirname(blosc2.__file__), "blosc2_ext.abi3.so")
        names = ["zstd"]
        ev = add_probes(ext, names, dynamic=True)
        t = time.perf_counter()
        subprocess.run(["perf", "record", "-q", "-e", ev, "-o", DATA, "--", sys.executable,
                        bm.__file__, "child", "py-rand1d", bm.SEQ, "0"], check=True,
                       stdout=subprocess.DEVNULL)
        print(f"py-rand1d under probes: {time.perf_counter() - t:.2f} s with start-up")
    else:
        binary = os.path.realpath(sys.argv[1])
        ev = add_probes(binary, names)
        if mode == "rand1d":
            with bm.Mounted(binary, bm.SEQ) as m:
                p = subprocess.Popen(["perf", "record", "-q", "-e", ev, "-p", str(m.proc.pid),
                                      "-o", DATA], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
                time.sleep(0.7)
                res = bm.run("mnt-rand1d", m.mp, "0")
                p.send_signal(2)
                p.wait()
            print(f"mnt-rand1d under probes: {bm.rate(res):.0f}/s")
        else:
            t = time.perf_counter()
            subprocess.run(["perf", "record", "-q", "-e", ev, "-o", DATA, "--", binary,
                            "verify", bm.SEQ], check=True, stdout=subprocess.DEVNULL)
            print(f"verify under probes: {time.perf_counter() - t:.2f} s")
    events = parse()
    subprocess.run(["perf", "probe", "-q", "-d", "b2fsprobe:*"], capture_output=True)
    durations(events, names)
    phases(events)


if __name__ == "__main__":
    main()
