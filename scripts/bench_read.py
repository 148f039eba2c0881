#!/usr/bin/env python3
"""The python-blosc2 side of `cargo bench --bench read` (benches/read.rs).

    bench_read.py gen DIR              make the benchmark sources in DIR (skips existing ones)
    bench_read.py seq PATH             decompress every chunk (nthreads=2); JSON timing
    bench_read.py read-mount MP PID    read every chunk file of the mount at MP (b2fs pid PID)
                                       in 1 MiB reads; JSON timing and CPU times (ab_read.sh)
    bench_read.py rand PATH OFFSETS    4 KiB get_slice at each byte offset listed in OFFSETS
                                       (one per line), twice (cold: fresh open; warm: again)

Sources (ZSTD clevel 5 + SHUFFLE, float64, 8 MiB chunks, made by python-blosc2 4.14.1):
    f1g.b2nd   1 GiB of noisy float data (the read benchmarks)
    f4g.b2nd   4 GiB of smooth float data (peak RSS while streaming)
    m1m.b2frame  a plain SChunk with 1,000,000 zero chunks of 64 bytes (mount time)
"""

import glob
import json
import os
import sys
import time

import blosc2
import numpy as np

import benchlib

CHUNK_ITEMS = 1 << 20  # 8 MiB of float64


def cparams():
    return blosc2.CParams(
        codec=blosc2.Codec.ZSTD,
        clevel=5,
        filters=[blosc2.Filter.SHUFFLE],
        nthreads=2,
    )


def make_array(path, nitems, noisy):
    tmp = path + ".tmp"
    arr = blosc2.empty(
        (nitems,),
        dtype=np.float64,
        chunks=(CHUNK_ITEMS,),
        urlpath=tmp,
        mode="w",
        cparams=cparams(),
    )
    rng = np.random.default_rng(42)
    for start in range(0, nitems, CHUNK_ITEMS):
        stop = min(start + CHUNK_ITEMS, nitems)
        x = np.linspace(start, stop, stop - start, endpoint=False) * 1e-3
        if noisy:
            x = np.round(np.sin(x) * 1000 + rng.normal(0, 1, stop - start), 3)
        arr[start:stop] = x
    del arr
    os.replace(tmp, path)


def make_many_chunks(path, nchunks, chunk_bytes):
    # fill_special writes the whole index at once (one repeated-value index chunk); appending
    # a million real chunks through python-blosc2 takes tens of minutes on the bench machine
    # (the index is rewritten on each append), so the chunks here are special zero chunks.
    tmp = path + ".tmp"
    schunk = blosc2.SChunk(
        chunksize=chunk_bytes,
        urlpath=tmp,
        contiguous=True,
        mode="w",
        cparams=blosc2.CParams(typesize=8, codec=blosc2.Codec.LZ4, clevel=1, nthreads=2),
    )
    schunk.fill_special(nchunks * chunk_bytes // 8, blosc2.SpecialValue.ZERO)
    assert schunk.nchunks == nchunks, schunk.nchunks
    del schunk
    os.replace(tmp, path)


def gen(d):
    os.makedirs(d, exist_ok=True)
    jobs = [
        ("f1g.b2nd", lambda p: make_array(p, (1 << 30) // 8, True)),
        ("f4g.b2nd", lambda p: make_array(p, (4 << 30) // 8, False)),
        ("m1m.b2frame", lambda p: make_many_chunks(p, 1_000_000, 64)),
    ]
    for name, make in jobs:
        p = os.path.join(d, name)
        if os.path.exists(p):
            continue
        t = time.perf_counter()
        make(p)
        print(f"gen: {name} in {time.perf_counter() - t:.1f}s", file=sys.stderr)


def seq(path):
    blosc2.set_nthreads(2)
    arr = blosc2.open(path, mode="r")
    schunk = arr.schunk if hasattr(arr, "schunk") else arr
    t = time.perf_counter()
    c = os.times()
    total = 0
    for i in range(schunk.nchunks):
        total += len(schunk.decompress_chunk(i))
    secs = time.perf_counter() - t
    e = os.times()
    cpu = (e.user - c.user) + (e.system - c.system)
    print(json.dumps({"seconds": secs, "bytes": total, "cpu_seconds": cpu}))


def read_mount(mountpoint, pid):
    """Reads every data/*.bin of a mount in 1 MiB reads (like `dd bs=1M`); JSON timing with
    the CPU time of the reader and of the b2fs process `pid` during the pass."""
    def daemon_cpu():
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    files = sorted(glob.glob(os.path.join(mountpoint, "data", "*.bin")))
    d0, c0, t0 = daemon_cpu(), os.times(), time.perf_counter()
    total = benchlib.read_files(files)
    secs = time.perf_counter() - t0
    c1, d1 = os.times(), daemon_cpu()
    reader = (c1.user - c0.user) + (c1.system - c0.system)
    print(json.dumps({"seconds": secs, "bytes": total, "daemon_cpu_seconds": d1 - d0,
                      "reader_cpu_seconds": reader}))


def rand(path, offsets_file):
    blosc2.set_nthreads(2)
    with open(offsets_file) as f:
        offsets = [int(line) for line in f if line.strip()]
    out = {}
    for label in ("cold", "warm"):
        if label == "cold":
            arr = blosc2.open(path, mode="r")
            schunk = arr.schunk if hasattr(arr, "schunk") else arr
        ts = schunk.typesize
        t = time.perf_counter()
        n = 0
        for off in offsets:
            n += len(schunk.get_slice(off // ts, (off + 4096) // ts))
        out[label] = {"seconds": time.perf_counter() - t, "reads": len(offsets), "bytes": n}
    print(json.dumps(out))


def main():
    cmd = sys.argv[1]
    if cmd == "gen":
        gen(sys.argv[2])
    elif cmd == "seq":
        seq(sys.argv[2])
    elif cmd == "read-mount":
        read_mount(sys.argv[2], int(sys.argv[3]))
    elif cmd == "rand":
        rand(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
