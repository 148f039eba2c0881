"""The read patterns of scripts/bench_mount.py: each `p_*` measures one pattern through fresh
mounts of a binary against its reference (python-blosc2 in-process, tmpfs, one reader) and
returns (ratio, detail); `PATTERNS` lists them with their keys, descriptions and targets.
With --ab (`AB`), `with_other` runs the same child on the other binary's mount in the same
round, first in odd rounds (`ROUND`), second in even ones.

The measurements themselves run in children (`bench_mount_child.run`); the mounts are
`benchlib.Mount`s.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

import benchlib
from bench_mount_child import MULTI, NWIN, SEQ, WIN, WSHAPE, run


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
    in odd rounds, after it in even ones (every child waits for freed memory to settle,
    `benchlib.settle`; the alternation evens out whatever else the first one leaves behind). Returns what `measure` returned and
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


def mounted_readers(b, nproc, opener=False):
    """`many_readers` on `array.npy` of a fresh mount of win.b2nd by the binary `b`."""
    with Mounted(b, WIN) as m:
        return many_readers(os.path.join(m.mp, "array.npy"), nproc, opener)


def p_many(b):
    alone = mounted_readers(b, 1)[0]
    four = mounted_readers(b, 4)
    other = ""
    if AB is not None:
        theirs = mounted_readers(AB, 4)
        other = (f"; {os.path.basename(AB)} 4 readers " + "/".join(f"{r:.0f}" for r in theirs)
                 + f" per s, slowest this / it {min(four) / min(theirs):.2f}x")
    return min(four) / alone, (f"alone {alone:.0f}/s, 4 readers "
                               + "/".join(f"{r:.0f}" for r in four) + " per s" + other)


def p_opener(b):
    alone = mounted_readers(b, 1)[0]
    busy = mounted_readers(b, 1, opener=True)[0]
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
