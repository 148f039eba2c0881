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
"""

import glob
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import benchlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "bench-data", "issue25")
SEQ = os.path.join(DATA, "seq.b2nd")
WIN = os.path.join(DATA, "win.b2nd")
MULTI = os.path.join(DATA, "multi256")  # four 256 MiB leaves (64 MiB read in ~70 ms: noise)
WSHAPE = (4096, 8192)
NWIN = 300
NRAND = 2000
NSTRIPS = 8
MARK_BEGIN = "<!-- bench_mount: begin (scripts/bench_mount.py writes this block) -->"
MARK_END = "<!-- bench_mount: end -->"


# ---------------------------------------------------------------- sources


def gen():
    import blosc2

    os.makedirs(MULTI, exist_ok=True)

    def one_d(path, nitems, clevel):
        if os.path.exists(path):
            return
        tmp = path + ".tmp"
        cp = blosc2.CParams(codec=blosc2.Codec.ZSTD, clevel=clevel,
                            filters=[blosc2.Filter.SHUFFLE], nthreads=2)
        arr = blosc2.empty((nitems,), dtype=np.float64, chunks=(1 << 20,), urlpath=tmp,
                           mode="w", cparams=cp)
        rng = np.random.default_rng(len(path))
        for s in range(0, nitems, 1 << 20):
            e = min(s + (1 << 20), nitems)
            x = np.linspace(s, e, e - s, endpoint=False) * 1e-3
            arr[s:e] = np.round(np.sin(x) * 1000 + rng.normal(0, 1, e - s), 3)
        del arr
        os.replace(tmp, path)

    one_d(SEQ, (256 << 20) // 8, 5)
    for i in range(4):
        one_d(os.path.join(MULTI, f"a{i}.b2nd"), (256 << 20) // 8, 5)
    if not os.path.exists(WIN):
        tmp = WIN + ".tmp"
        arr = blosc2.empty(WSHAPE, dtype=np.float64, chunks=(1024, 1024), urlpath=tmp,
                           mode="w")
        rng = np.random.default_rng(42)
        for r in range(0, WSHAPE[0], 1024):
            x = np.linspace(r, r + 1024, 1024 * WSHAPE[1], endpoint=False)
            x = x.reshape(1024, WSHAPE[1])
            arr[r:r + 1024, :] = np.round(np.sin(x * 1e-3) * 1000 + rng.normal(0, 1, x.shape), 3)
        del arr
        os.replace(tmp, WIN)


def warm_sources():
    for p in [SEQ, WIN, *glob.glob(os.path.join(MULTI, "*"))]:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


# ---------------------------------------------------------------- children (one measurement)


def read_windows(arr, ws, t, out):
    """Reads the 64x64 windows `ws` of `arr` twice into `out`: "seconds" from `t` to the end
    of the first pass, "again" the second pass (page-cache speed), "n" and a "check" sum."""
    s = 0.0
    for r, c in ws:
        s += float(np.array(arr[r:r + 64, c:c + 64])[0, 0])
    out["seconds"] = time.perf_counter() - t
    t2 = time.perf_counter()
    for r, c in ws:
        s += float(np.array(arr[r:r + 64, c:c + 64])[0, 0])
    out["again"] = time.perf_counter() - t2
    out["n"], out["check"] = len(ws), s


def windows(n, seed):
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(0, WSHAPE[0] - 64)), int(rng.integers(0, WSHAPE[1] - 64)))
            for _ in range(n)]


def rand_offsets(n, size, seed, align):
    rng = random.Random(seed)
    return [rng.randrange(0, (size - 4096) // align) * align for _ in range(n)]


def child(kind, path, arg):
    """Runs one measurement in this (fresh) process; prints JSON {seconds, n, check}."""
    out = {}
    if kind.startswith("py-"):
        import blosc2

        blosc2.set_nthreads(2)
    t = time.perf_counter()
    cpu = time.process_time()  # every thread of this process (python-blosc2's decoders too)
    if kind == "py-seq":
        # Keep the array: python-blosc2 crashes when its schunk outlives it.
        arr = blosc2.open(path, mode="r")
        schunk = arr.schunk
        out["n"] = sum(len(schunk.decompress_chunk(i)) for i in range(schunk.nchunks))
    elif kind == "mnt-seq":
        files = sorted(glob.glob(os.path.join(path, "data", "*.bin")))
        out["n"] = benchlib.read_files(files, 1 << 20)
    elif kind == "py-load":
        out["n"] = blosc2.open(path, mode="r")[...].nbytes
    elif kind == "mnt-load":
        out["n"] = np.load(path).nbytes
    elif kind in ("py-win", "mnt-win"):
        arr = (blosc2.open(path, mode="r") if kind == "py-win"
               else np.load(path, mmap_mode="r"))
        read_windows(arr, windows(NWIN, int(arg)), time.perf_counter(), out)
    elif kind == "mnt-win-open":
        # The windows of mnt-win timed from before `np.load(..., mmap_mode='r')`: with
        # passthrough the open decodes the whole file, and mnt-win's clock starts after it.
        ws = windows(NWIN, int(arg))
        t = time.perf_counter()
        arr = np.load(path, mmap_mode="r")
        out["open"] = time.perf_counter() - t
        # Whether any fault reached b2fs: its chunk cache counters (every read through b2fs
        # looks there) do not move when the kernel serves the map from passthrough's file.
        root = os.path.dirname(path)
        counters = lambda: [os.getxattr(root, "user.b2fs." + k) for k in ("cache_hits",
                                                                          "cache_loads")]
        before = counters()
        read_windows(arr, ws, t, out)
        out["bypassed"] = counters() == before
    elif kind == "open":
        # One open and close of the file (with passthrough, the first one fills its backing).
        os.close(os.open(path, os.O_RDONLY))
        out["n"] = 1
    elif kind in ("py-strips", "mnt-strips"):
        # Tall column strips (every row, 64 columns) at random columns: a model's feature
        # columns, a time series per pixel; through a map, 4096 faults of one page per strip.
        arr = (blosc2.open(path, mode="r") if kind == "py-strips"
               else np.load(path, mmap_mode="r"))
        rng = np.random.default_rng(int(arg))
        cols = [int(rng.integers(0, WSHAPE[1] - 64)) for _ in range(NSTRIPS)]
        t = time.perf_counter()
        out["check"] = sum(float(np.array(arr[:, c:c + 64]).sum()) for c in cols)
        out["n"] = NSTRIPS
    elif kind in ("py-mmsum", "mnt-mmsum"):
        # A reduction over the whole array: through a map, every page faulted in file order.
        if kind == "py-mmsum":
            out["check"] = float(blosc2.open(path, mode="r")[...].sum())
        else:
            out["check"] = float(np.load(path, mmap_mode="r").sum())
        out["n"] = WSHAPE[0] * WSHAPE[1] * 8
    elif kind == "py-rand1d":
        arr = blosc2.open(path, mode="r")
        schunk = arr.schunk
        offs = rand_offsets(NRAND, schunk.nbytes, 5, 8)
        t = time.perf_counter()
        out["check"] = sum(schunk.get_slice(o // 8, o // 8 + 512)[0] for o in offs)
        out["n"] = NRAND
    elif kind == "mnt-rand1d":
        chunk = 8 << 20
        files = sorted(glob.glob(os.path.join(path, "data", "*.bin")))
        offs = rand_offsets(NRAND, len(files) * chunk, 5, 8)
        fds = [os.open(f, os.O_RDONLY) for f in files]
        t = time.perf_counter()
        out["check"] = sum(os.pread(fds[o // chunk], 4096, o % chunk)[0] for o in offs)
        out["n"] = NRAND
    elif kind == "py-rand2d":
        arr = blosc2.open(path, mode="r")
        rng = np.random.default_rng(9)
        rcs = [(int(rng.integers(0, WSHAPE[0])), int(rng.integers(0, WSHAPE[1] - 512)))
               for _ in range(NRAND)]
        t = time.perf_counter()
        out["check"] = float(sum(arr[r, c:c + 512][0] for r, c in rcs))
        out["n"] = NRAND
    elif kind == "mnt-rand2d":
        rng = np.random.default_rng(9)
        rcs = [(int(rng.integers(0, WSHAPE[0])), int(rng.integers(0, WSHAPE[1] - 512)))
               for _ in range(NRAND)]
        fd = os.open(path, os.O_RDONLY)
        hlen = 10 + int.from_bytes(os.pread(fd, 10, 0)[8:10], "little")  # NPY 1.0 header
        t = time.perf_counter()
        s = 0.0
        for r, c in rcs:
            b = os.pread(fd, 4096, hlen + (r * WSHAPE[1] + c) * 8)
            s += float(np.frombuffer(b, np.float64, 1)[0])
        out["check"], out["n"] = s, NRAND
    elif kind == "plain-4k":
        # Warm 4 KiB random preads of aligned pages (fio psync randread's pattern): one pass
        # to warm, one timed.
        files = path.split(",")
        size = min([os.path.getsize(f) for f in files] + [16 << 20])
        offs = rand_offsets(NRAND * 5, size, 3, 4096)
        fds = [os.open(f, os.O_RDONLY) for f in files]
        for i, o in enumerate(offs):
            os.pread(fds[i % len(fds)], 4096, o)
        t = time.perf_counter()
        for i, o in enumerate(offs):
            os.pread(fds[i % len(fds)], 4096, o)
        out["n"] = len(offs)
    elif kind == "dd":
        subprocess.run(["dd", f"if={path}", "of=/dev/null", f"bs={arg}"], check=True,
                       capture_output=True)
        out["n"] = os.path.getsize(path)
    elif kind == "mnt-seq-on-go":
        # One reader of "stream-leaves": started (interpreter, imports) before the clock, it
        # says "ready" and reads when told "go"; its own start and end in wall-clock time.
        files = sorted(glob.glob(os.path.join(path, "data", "*.bin")))
        print("ready", flush=True)
        sys.stdin.readline()
        out["t0"] = time.time()
        out["n"] = benchlib.read_files(files, 1 << 20)
        out["t1"] = time.time()
    elif kind == "stream-leaves":
        # Readers of one leaf each, in their own processes, all started and ready before any
        # reads (the interpreters' start-up, ~0.3 s of CPU each, is not what is measured:
        # a 64 MiB leaf reads in well under that); the aggregate rate is all their bytes over
        # the span from the first start to the last end.
        leaves = path.split(",")
        procs = [subprocess.Popen([sys.executable, __file__, "child", "mnt-seq-on-go", leaf,
                                   "0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True) for leaf in leaves]
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        got = [json.loads(p.communicate()[0]) for p in procs]
        out["n"] = sum(g["n"] for g in got)
        out["seconds"] = max(g["t1"] for g in got) - min(g["t0"] for g in got)
    else:
        raise SystemExit(f"unknown child {kind}")
    out.setdefault("seconds", time.perf_counter() - t)
    out.setdefault("cpu", time.process_time() - cpu)
    print(json.dumps(out), flush=True)


def run(kind, path, arg="0"):
    return benchlib.child_json(__file__, "child", kind, path, arg)


def wait_backed(mp, fills, timeout=300.0):
    """Waits until the passthrough mount at `mp` has filled `fills` backing files (its root's
    `user.b2fs.backing_fills`); at once for a binary without that attribute (it filled each
    file at its first open). The seconds waited."""
    t = time.perf_counter()
    while True:
        try:
            done = int(os.getxattr(mp, "user.b2fs.backing_fills"))
        except OSError:
            return 0.0
        if done >= fills:
            return time.perf_counter() - t
        if time.perf_counter() - t > timeout:
            raise SystemExit(f"{mp}: {done} of {fills} backing files filled after {timeout} s")
        time.sleep(0.01)


def Mounted(binary, source, opts=()):
    """A fresh foreground mount of SOURCE (read-only, extra options) at a temp mount point."""
    return benchlib.Mount(binary, source, opts=("ro", *opts))


def run_mounted(binary, source, kind, rel="", opts=(), arg="0"):
    """Child `kind` reading `rel` (the mount itself when empty) of a fresh mount of `source`
    by `binary`: its result, the daemon's CPU seconds over the run and its peak RSS (MiB)."""
    with Mounted(binary, source, opts) as m:
        c0 = m.cpu_seconds()
        got = run(kind, os.path.join(m.mp, rel) if rel else m.mp, arg)
        return got, m.cpu_seconds() - c0, m.hwm_mib()


# ---------------------------------------------------------------- patterns


def rate(d):
    return d["n"] / d["seconds"]


# A binary to compare with in the same rounds (--ab): seq, load, win, win-kc, strips, mmsum,
# rand1d, many, load-pt, win-pt.
AB = None
# The round being run (1, 2, ...): with --ab, the other binary runs first in odd rounds.
ROUND = 1


def with_other(measure, kind, src, rel, arg="0", opts=(), per_s=False):
    """Runs `measure()` (this binary's side, a child result or a tuple starting with one) and,
    with --ab, the same child `kind` on a mount of `src` by the other binary: before `measure`
    in odd rounds, after it in even ones, since the second reader of a round can find the
    memory the first freed already backed by the host. Returns what `measure` returned and
    the detail's `; other X MiB/s, this / it R` (X per s with `per_s`), empty without --ab."""
    if AB is None:
        return measure(), ""

    def other():
        with Mounted(AB, src, opts) as m:
            return run(kind, os.path.join(m.mp, rel) if rel else m.mp, arg)

    if ROUND % 2:
        theirs = other()
        got = measure()
    else:
        got = measure()
        theirs = other()
    ours = got[0] if isinstance(got, tuple) else got
    shown = f"{rate(theirs):.0f}/s" if per_s else f"{rate(theirs) / 2**20:.0f} MiB/s"
    return got, f"; {os.path.basename(AB)} {shown}, this / it {rate(ours) / rate(theirs):.2f}x"


def cpu_per_mib(py, ours, daemon):
    """`; CPU per MiB ...`: python-blosc2's process (all its threads) against b2fs's reader
    plus daemon, over the timed part. When both sides keep the machine's cores busy, the rate
    ratio cannot exceed the inverse ratio of these."""
    mib = py["n"] / 2**20
    mine = (ours["cpu"] + daemon) / mib * 1e3
    theirs = py["cpu"] / mib * 1e3
    return (f"; CPU per MiB python {theirs:.2f} ms, b2fs {mine:.2f} ms (reader"
            f" {ours['cpu'] / mib * 1e3:.2f} + daemon {daemon / mib * 1e3:.2f}),"
            f" python / b2fs {theirs / mine:.2f}")


def p_seq_chunks(b):
    py = run("py-seq", SEQ)
    (ours, daemon, _), vs = with_other(lambda: run_mounted(b, SEQ, "mnt-seq"), "mnt-seq", SEQ, "")
    assert py["n"] == ours["n"], (py, ours)
    return rate(ours) / rate(py), (f"python {rate(py) / 2**20:.0f} MiB/s, b2fs {rate(ours) / 2**20:.0f} MiB/s"
                                   + cpu_per_mib(py, ours, daemon) + vs)


def p_load(b):
    py = run("py-load", WIN)
    (ours, daemon, _), vs = with_other(lambda: run_mounted(b, WIN, "mnt-load", "array.npy"),
                                       "mnt-load", WIN, "array.npy")
    return rate(ours) / rate(py), (f"python {rate(py) / 2**20:.0f} MiB/s, b2fs {rate(ours) / 2**20:.0f} MiB/s"
                                   + cpu_per_mib(py, ours, daemon) + vs)


def p_windows(opts):
    def f(b, seed=[0]):
        seed[0] += 1
        py = run("py-win", WIN, seed[0])
        ours, vs = with_other(lambda: run_mounted(b, WIN, "mnt-win", "array.npy", opts,
                                                  seed[0])[0],
                              "mnt-win", WIN, "array.npy", seed[0], opts, per_s=True)
        assert py["check"] == ours["check"], "the windows differ"
        again = (ours["n"] / ours["again"]) / rate(py)
        return rate(ours) / rate(py), (f"python {rate(py):.0f}/s, b2fs {rate(ours):.0f}/s, "
                                       f"b2fs again {ours['n'] / ours['again']:.0f}/s ({again:.0f}x)"
                                       + vs)
    return f


def p_strips(b, seed=[0]):
    seed[0] += 1
    py = run("py-strips", WIN, seed[0])
    ours, vs = with_other(lambda: run_mounted(b, WIN, "mnt-strips", "array.npy", (), seed[0])[0],
                          "mnt-strips", WIN, "array.npy", seed[0], per_s=True)
    assert abs(py["check"] - ours["check"]) <= 1e-9 * abs(py["check"]), "the strips differ"
    return rate(ours) / rate(py), f"python {rate(py):.1f}/s, b2fs {rate(ours):.1f}/s" + vs


def p_mmsum(b):
    py = run("py-mmsum", WIN)
    ours, vs = with_other(lambda: run_mounted(b, WIN, "mnt-mmsum", "array.npy")[0],
                          "mnt-mmsum", WIN, "array.npy")
    assert abs(py["check"] - ours["check"]) <= 1e-9 * abs(py["check"]), "the sums differ"
    return rate(ours) / rate(py), (f"python {rate(py) / 2**20:.0f} MiB/s,"
                                   f" b2fs {rate(ours) / 2**20:.0f} MiB/s" + vs)


def p_rand1d(b):
    py = run("py-rand1d", SEQ)
    ours, vs = with_other(lambda: run_mounted(b, SEQ, "mnt-rand1d")[0], "mnt-rand1d", SEQ, "",
                          per_s=True)
    return rate(ours) / rate(py), f"python {rate(py):.0f}/s, b2fs {rate(ours):.0f}/s" + vs


def p_rand2d(b):
    py = run("py-rand2d", WIN)
    with Mounted(b, WIN) as m:
        ours = run("mnt-rand2d", os.path.join(m.mp, "array.npy"))
    assert abs(py["check"] - ours["check"]) < 1e-6 * abs(py["check"]) + 1e-6
    return rate(ours) / rate(py), f"python {rate(py):.0f}/s, b2fs {rate(ours):.0f}/s"


def p_plain4k(opts):
    """Warm 4 KiB reads on a mount with `opts` against a tmpfs copy; on a passthrough mount the
    first open (its whole decode) is timed before."""
    def f(b):
        shm = tempfile.mkdtemp(dir="/dev/shm")
        try:
            with Mounted(b, WIN, opts) as m:
                npy = os.path.join(m.mp, "array.npy")
                chunks = sorted(glob.glob(os.path.join(m.mp, "data", "*.bin")))[:2]
                first = run("open", npy) if "passthrough" in opts else None
                if first:
                    for c in chunks:
                        run("open", c)
                    first["fill"] = wait_backed(m.mp, 3)
                ours = run("plain-4k", npy)
                shutil.copy(npy, os.path.join(shm, "array.npy"))
                onchunks = run("plain-4k", ",".join(chunks))
            tmpfs = run("plain-4k", os.path.join(shm, "array.npy"))
        finally:
            shutil.rmtree(shm)
        opened = (f" (warm passes); the first open of array.npy took {first['seconds']:.3f} s,"
                  f" then {first['fill']:.2f} s until its and the chunk files' fills were"
                  f" done" if first else "")
        return rate(ours) / rate(tmpfs), (f"tmpfs {rate(tmpfs):.0f}/s, b2fs array.npy"
                                          f" {rate(ours):.0f}/s, b2fs chunk files"
                                          f" {rate(onchunks):.0f}/s" + opened)
    return f


def p_dd(opts):
    def f(b):
        with Mounted(b, WIN, opts) as m:
            small = run("dd", os.path.join(m.mp, "array.npy"), "4k")
        with Mounted(b, WIN, opts) as m:
            big = run("dd", os.path.join(m.mp, "array.npy"), "1M")
        return rate(small) / rate(big), (f"bs=1M {rate(big) / 2**20:.0f} MiB/s,"
                                         f" bs=4k {rate(small) / 2**20:.0f} MiB/s")
    return f


def p_dd_pt(b):
    """dd on a `-o passthrough` mount: the first dd (its rate shown) starts the fill; the
    ratio is of the dd's after the fill (same mount, the backing file kept)."""
    shm = tempfile.mkdtemp(dir="/dev/shm")
    try:
        with Mounted(b, WIN, ("passthrough",)) as m:
            npy = os.path.join(m.mp, "array.npy")
            first = run("dd", npy, "1M")
            fill = wait_backed(m.mp, 1)
            big = run("dd", npy, "1M")
            small = run("dd", npy, "4k")
            shutil.copy(npy, os.path.join(shm, "array.npy"))
        tbig = run("dd", os.path.join(shm, "array.npy"), "1M")
        tsmall = run("dd", os.path.join(shm, "array.npy"), "4k")
    finally:
        shutil.rmtree(shm)
    return rate(small) / rate(big), (f"first dd bs=1M {rate(first) / 2**20:.0f} MiB/s,"
                                     f" {fill:.2f} s more until the fill was done, then bs=1M"
                                     f" {rate(big) / 2**20:.0f} MiB/s, bs=4k"
                                     f" {rate(small) / 2**20:.0f} MiB/s; the same file on tmpfs:"
                                     f" bs=1M {rate(tbig) / 2**20:.0f} MiB/s, bs=4k"
                                     f" {rate(tsmall) / 2**20:.0f} MiB/s"
                                     f" ({rate(tsmall) / rate(tbig):.2f}x)")


def p_load_pt(b):
    """np.load on a fresh `-o passthrough` mount (its first open: before session 18 it waited
    for the whole file's decode), then again on the same mount once the fill is done (the
    backing file kept)."""
    py = run("py-load", WIN)

    def measure():
        with Mounted(b, WIN, ("passthrough",)) as m:
            npy = os.path.join(m.mp, "array.npy")
            c0 = m.cpu_seconds()
            ours = run("mnt-load", npy)
            daemon = m.cpu_seconds() - c0
            wait_backed(m.mp, 1)
            again = run("mnt-load", npy)
        return ours, daemon, again

    (ours, daemon, again), vs = with_other(measure, "mnt-load", WIN, "array.npy",
                                           opts=("passthrough",))
    return rate(ours) / rate(py), (f"python {rate(py) / 2**20:.0f} MiB/s, b2fs {rate(ours) / 2**20:.0f}"
                                   f" MiB/s (first open), again after the fill"
                                   f" {rate(again) / 2**20:.0f} MiB/s"
                                   + cpu_per_mib(py, ours, daemon) + vs)


def p_windows_pt(b, seed=[0]):
    """The windows on a fresh `-o passthrough` mount, timed from before the map's open (before
    session 18 that open decoded the whole file); the second pass and a second process (after
    the fill: its map passes through) are shown too."""
    seed[0] += 1
    py = run("py-win", WIN, seed[0])

    def measure():
        with Mounted(b, WIN, ("passthrough",)) as m:
            npy = os.path.join(m.mp, "array.npy")
            ours = run("mnt-win-open", npy, seed[0])
            fill = wait_backed(m.mp, 1)
            c0 = m.cpu_seconds()
            second = run("mnt-win-open", npy, seed[0])
            second["daemon"] = m.cpu_seconds() - c0
        return ours, second, fill

    (ours, second, fill), vs = with_other(measure, "mnt-win-open", WIN, "array.npy", seed[0],
                                          opts=("passthrough",), per_s=True)
    assert py["check"] == ours["check"] == second["check"], "the windows differ"
    assert second["bypassed"], "faults of array.npy reached b2fs after its fill"
    return rate(ours) / rate(py), (f"python {rate(py):.0f}/s, b2fs {rate(ours):.0f}/s"
                                   f" (open {ours['open'] * 1e3:.1f} ms included), again in that"
                                   f" map {ours['n'] / ours['again']:.0f}/s; a second process"
                                   f" ({fill:.2f} s after the first, until the fill was done):"
                                   f" open {second['open'] * 1e3:.1f} ms,"
                                   f" {rate(second):.0f}/s with it (daemon CPU meanwhile"
                                   f" {second['daemon']:.2f} s)" + vs)


def many_readers(npy, nproc, opener=False):
    """`nproc` processes each mapping `npy` once and reading the same windows twice (two
    epochs, each in its own order); with `opener`, another process opens and closes the
    file in a loop meanwhile. Returns each reader's windows/s."""
    code = (
        "import sys, time, numpy as np, random\n"
        "m = np.load(sys.argv[1], mmap_mode='r')\n"
        "rng = np.random.default_rng(3)\n"
        f"ws = [(int(rng.integers(0, {WSHAPE[0] - 64})), int(rng.integers(0, {WSHAPE[1] - 64})))"
        f" for _ in range({NWIN})]\n"
        "s = 0.0\n"
        "t = time.perf_counter()\n"
        "for e in range(2):\n"
        "    random.Random(int(sys.argv[2]) * 10 + e).shuffle(ws)\n"
        "    for r, c in ws:\n"
        "        s += float(np.array(m[r:r + 64, c:c + 64])[0, 0])\n"
        "print(2 * len(ws) / (time.perf_counter() - t))\n"
    )
    op = None
    if opener:
        op = subprocess.Popen([sys.executable, "-c",
                               "import os, sys\nwhile True:\n"
                               "    fd = os.open(sys.argv[1], os.O_RDONLY); os.read(fd, 128); os.close(fd)\n",
                               npy])
    procs = [subprocess.Popen([sys.executable, "-c", code, npy, str(i)], stdout=subprocess.PIPE,
                              text=True) for i in range(nproc)]
    rates = [float(p.communicate()[0]) for p in procs]
    if op:
        op.kill()
        op.wait()
    return rates


def p_many(b):
    with Mounted(b, WIN) as m:
        alone = many_readers(os.path.join(m.mp, "array.npy"), 1)[0]
    with Mounted(b, WIN) as m:
        four = many_readers(os.path.join(m.mp, "array.npy"), 4)
    other = ""
    if AB is not None:
        with Mounted(AB, WIN) as m:
            theirs = many_readers(os.path.join(m.mp, "array.npy"), 4)
        other = (f"; {os.path.basename(AB)} 4 readers " + "/".join(f"{r:.0f}" for r in theirs)
                 + f" per s, slowest this / it {min(four) / min(theirs):.2f}x")
    return min(four) / alone, (f"alone {alone:.0f}/s, 4 readers "
                               + "/".join(f"{r:.0f}" for r in four) + " per s" + other)


def p_opener(b):
    with Mounted(b, WIN) as m:
        alone = many_readers(os.path.join(m.mp, "array.npy"), 1)[0]
    with Mounted(b, WIN) as m:
        busy = many_readers(os.path.join(m.mp, "array.npy"), 1, opener=True)[0]
    return busy / alone, f"alone {alone:.0f}/s, while another process opens the file {busy:.0f}/s"


def p_scaling(b):
    leaves = [os.path.join("{mp}", f"a{i}.b2nd") for i in range(4)]
    with Mounted(b, MULTI) as m:
        one = run("stream-leaves", leaves[0].format(mp=m.mp))
    with Mounted(b, MULTI) as m:
        four = run("stream-leaves", ",".join(x.format(mp=m.mp) for x in leaves))
        hwm = m.hwm_mib()
    return rate(four) / rate(one), (f"1 reader {rate(one) / 2**20:.0f} MiB/s, 4 readers"
                                    f" {rate(four) / 2**20:.0f} MiB/s, daemon peak RSS {hwm} MiB"
                                    " (cache_size 256 MiB)")


PATTERNS = [
    # (key, description, target, function)
    ("seq", "cold sequential read of every chunk file (1 MiB reads) / `decompress_chunk`", 1.2, p_seq_chunks),
    ("load", "cold `np.load(array.npy)` / `arr[...]` (2-D)", 1.2, p_load),
    ("win", "300 random 64x64 windows, `mmap_mode='r'` / `arr[w]`, default mount", 1.0, p_windows(())),
    ("win-kc", "300 random 64x64 windows, `mmap_mode='r'` / `arr[w]`, `-o keep_cache`", 1.0,
     p_windows(("keep_cache",))),
    ("strips", "8 random column strips (4096x64), `mmap_mode='r'` / `arr[:, c:c+64]`", 1.0,
     p_strips),
    ("mmsum", "`np.load(array.npy, mmap_mode='r').sum()` / `arr[...].sum()`", 1.0, p_mmsum),
    ("rand1d", "2000 cold 4 KiB `pread`s of chunk files / `get_slice`", 1.0, p_rand1d),
    ("rand2d", "2000 cold 4 KiB `pread`s of `array.npy` / `arr[r, c:c+512]`", 1.0, p_rand2d),
    ("plain4k", "warm 4 KiB random `pread`s of `array.npy` / the same file on tmpfs", 0.2,
     p_plain4k(())),
    ("plain4k-kc", "the same, `-o keep_cache`", 0.2, p_plain4k(("keep_cache",))),
    ("dd", "`dd bs=4k` / `dd bs=1M` of `array.npy`", 0.5, p_dd(())),
    ("dd-kc", "the same, `-o keep_cache`", 0.5, p_dd(("keep_cache",))),
    ("load-pt", "cold `np.load(array.npy)` / `arr[...]`, `-o ro,passthrough` (the first open"
     " of a fresh mount)", 1.2, p_load_pt),
    ("win-pt", "300 random 64x64 windows / `arr[w]`, `-o ro,passthrough`, timed from the first"
     " open of a fresh mount", 1.0, p_windows_pt),
    ("plain4k-pt", "warm 4 KiB random `pread`s of `array.npy` / tmpfs, `-o ro,passthrough`",
     0.2, p_plain4k(("passthrough",))),
    ("dd-pt", "`dd bs=4k` / `dd bs=1M` of `array.npy`, `-o ro,passthrough` (after a first dd"
     " and its fill)",
     0.5, p_dd_pt),
    ("many", "4 processes mapping `array.npy`: slowest / one alone", 0.5, p_many),
    ("opener", "a mapped reader while another process opens the file / alone", 0.5, p_opener),
    ("scale", "4 readers streaming 4 arrays / 1 reader (aggregate)", 1.6, p_scaling),
]


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
    global AB
    AB = os.path.realpath(args[args.index("--ab") + 1]) if "--ab" in args else None
    pats = [p for p in PATTERNS if only is None or p[0] in only]
    gen()
    warm_sources()
    results = {k: [] for k, *_ in pats}
    loads = []
    global ROUND
    for r in range(1, rounds + 1):
        ROUND = r
        for key, desc, target, f in pats:
            loads.append(float(load_avg()))
            ratio, detail = f(binary)
            results[key].append((ratio, detail))
            print(f"round {r} {key}: {ratio:.2f}x (target {target}x) {detail}", flush=True)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True).stdout.strip()
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
    block = "\n".join(lines)
    print(block)
    if write:
        text = open(write).read()
        if MARK_BEGIN in text and MARK_END in text:
            pre, rest = text.split(MARK_BEGIN, 1)
            post = rest.split(MARK_END, 1)[1]
            text = pre + block + post
        else:
            text = text + "\n" + block + "\n"
        with open(write, "w") as f:
            f.write(text)
    if chart:
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
        fig.savefig(chart, dpi=100)


if __name__ == "__main__":
    main()
