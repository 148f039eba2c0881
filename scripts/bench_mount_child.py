"""The sources scripts/bench_mount.py reads and its children: each child is one measurement in a
fresh process (`bench_mount.py child KIND PATH ARG`, what `run` starts), printing JSON
{seconds, n, check, cpu, ...} (`child`).

Sources (made once in bench-data/issue25/ by python-blosc2 by `gen`, float64, noisy values):
seq.b2nd (1-D), win.b2nd (2-D, WSHAPE) and multi256/ (four 1-D leaves); `warm_sources` reads
them once so that they stay in the page cache. The window, offset and strip choices are
seeded, so both sides of a pattern read the same places.
"""

import glob
import json
import os
import random
import subprocess
import sys
import time

import numpy as np

import benchlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The script whose `child` command runs one measurement (this module's `child`).
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_mount.py")
DATA = os.path.join(ROOT, "bench-data", "issue25")
SEQ = os.path.join(DATA, "seq.b2nd")
WIN = os.path.join(DATA, "win.b2nd")
MULTI = os.path.join(DATA, "multi256")  # four 256 MiB leaves (64 MiB read in ~70 ms: noise)
WSHAPE = (4096, 8192)
NWIN = 300
NRAND = 2000
NSTRIPS = 8



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
        procs = [subprocess.Popen([sys.executable, SCRIPT, "child", "mnt-seq-on-go", leaf,
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
    return benchlib.child_json(SCRIPT, "child", kind, path, arg)
