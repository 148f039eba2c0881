"""The reference side of `b2fs verify` / `b2fs salvage` (tests/it/verify.rs): sources written
by python-blosc2 and bcolz, and what those libraries can read back from a (damaged) copy,
chunk by chunk.

    verify_check.py gen DIR          write frame.b2frame, sframe/ (sparse frame), arr.b2nd,
                                     carray/ and ctable/ (bcolz), store.b2z and store.b2d
    verify_check.py read KIND PATH   print JSON {"chunks": {LABEL: [[sha256, zeros] | null, ...]},
                                     "errors": {LABEL: why}, "salvage": {LABEL: attr}}: the
                                     sha256 of each chunk the reference reads back whole and
                                     whether it is all zeros (null:
                                     it cannot, or not at the size its slot holds), and the
                                     b2fs_salvage attribute where there is one. LABEL is ""
                                     for a single array, the column name of a ctable, the key
                                     of a store leaf. KIND: frame | carray | ctable | store
    verify_check.py frame PATH N     a 1-D float64 frame of about N MiB of compressible data
                                     (lz4, shuffle, 4 MiB chunks) for the benchmark
    verify_check.py bench PATH R     decompress every chunk of PATH with nthreads=2, R times;
                                     print the best wall time in seconds
"""
import hashlib
import json
import os
import sys
import time

import numpy as np


def sha(b):
    return hashlib.sha256(bytes(b)).hexdigest()


def gen(d):
    import blosc2
    import bcolz

    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(3)
    data = (rng.standard_normal(8 * 8192 + 1000) * 100).round(1)
    cp = {"codec": blosc2.Codec.LZ4, "clevel": 5, "typesize": 8}
    s = blosc2.SChunk(chunksize=8192 * 8, data=data, urlpath=os.path.join(d, "frame.b2frame"),
                      contiguous=True, mode="w", cparams=cp)
    s.vlmeta["note"] = "written by python-blosc2"
    del s
    s = blosc2.SChunk(chunksize=8192 * 8, data=data, urlpath=os.path.join(d, "sframe"),
                      contiguous=False, mode="w", cparams=cp)
    s.vlmeta["note"] = "written by python-blosc2"
    del s
    a = (rng.standard_normal((100, 90)) * 100).round(2)
    blosc2.asarray(a, chunks=(40, 30), blocks=(20, 10), urlpath=os.path.join(d, "arr.b2nd"),
                   mode="w", cparams={"codec": blosc2.Codec.ZSTD, "clevel": 3})
    c = bcolz.carray(np.arange(10000, dtype=np.int64) * 3, chunklen=1024,
                     rootdir=os.path.join(d, "carray"), mode="w",
                     cparams=bcolz.cparams(clevel=5, cname="lz4"))
    c.attrs["unit"] = "m"
    c.flush()
    t = bcolz.ctable(columns=[np.arange(5000, dtype=np.int32),
                              np.linspace(0, 1, 5000)],
                     names=["x", "y"], rootdir=os.path.join(d, "ctable"), mode="w",
                     chunklen=512)
    t.flush()
    for name in ("store.b2z", "store.b2d"):
        with blosc2.TreeStore(os.path.join(d, name), mode="w", threshold=1024) as ts:
            ts["/a"] = blosc2.asarray(np.arange(40000, dtype=np.int64), chunks=(5000,))
            ts["/g/b"] = blosc2.asarray(np.linspace(0, 1, 30000), chunks=(10000,))
            ts["/tiny"] = np.arange(10, dtype=np.int16)
            ts["/g"].vlmeta["kind"] = "group"


def digest(b):
    """[sha256, all zeros] of a chunk's bytes."""
    b = bytes(b)
    return [sha(b), b.count(0) == len(b)]


def frame_chunks(s):
    """Chunk digests of an SChunk, null where decompress_chunk fails or gives the wrong size."""
    n = s.nchunks
    cs = s.chunksize
    out = []
    for i in range(n):
        want = cs if (i < n - 1 or cs == 0) else s.nbytes - (n - 1) * cs
        try:
            b = s.decompress_chunk(i)
        except Exception:
            out.append(None)
            continue
        if cs != 0 and len(b) != want:
            out.append(None)
        else:
            out.append(digest(b))
    return out


def salvage_attr(vlmeta):
    try:
        return vlmeta["b2fs_salvage"]
    except Exception:
        return None


def read_frame(path, res, label=""):
    import blosc2
    try:
        v = blosc2.open(path, mode="r")
    except Exception as e:
        res["errors"][label] = repr(e)
        return
    s = v.schunk if hasattr(v, "schunk") else v
    res["chunks"][label] = frame_chunks(s)
    res["salvage"][label] = salvage_attr(s.vlmeta)


def carray_chunks(c):
    """Chunk digests of a bcolz carray: the full chunks, then the leftover rows."""
    out = []
    nfull = len(c.chunks)
    for i in range(nfull):
        try:
            out.append(digest(np.ascontiguousarray(c.chunks[i][:]).tobytes()))
        except Exception:
            out.append(None)
    start = nfull * c.chunklen
    if len(c) > start:
        try:
            out.append(digest(np.ascontiguousarray(c[start:]).tobytes()))
        except Exception:
            out.append(None)
    return out


def read_carray(path, res):
    import bcolz
    try:
        c = bcolz.open(path, mode="r")
    except Exception as e:
        res["errors"][""] = repr(e)
        return
    res["chunks"][""] = carray_chunks(c)
    res["salvage"][""] = c.attrs.attrs.get("b2fs_salvage") if hasattr(c.attrs, "attrs") else None


def read_ctable(path, res):
    import bcolz
    try:
        t = bcolz.open(path, mode="r")
    except Exception as e:
        res["errors"][""] = repr(e)
        return
    for name in t.names:
        res["chunks"][name] = carray_chunks(t.cols[name])
    res["salvage"][""] = t.attrs.attrs.get("b2fs_salvage") if hasattr(t.attrs, "attrs") else None


def read_store(path, res):
    import blosc2
    try:
        ts = blosc2.TreeStore(path, mode="r")
    except Exception as e:
        res["errors"][""] = repr(e)
        return
    with ts:
        for k in sorted(ts.keys()):
            try:
                v = ts[k]
            except Exception as e:
                res["errors"][k] = repr(e)
                continue
            if not hasattr(v, "schunk") and not isinstance(v, blosc2.SChunk):
                continue
            s = v.schunk if hasattr(v, "schunk") else v
            res["chunks"][k] = frame_chunks(s)
            res["salvage"][k] = salvage_attr(s.vlmeta)


def read(kind, path):
    res = {"chunks": {}, "errors": {}, "salvage": {}}
    {"frame": read_frame, "carray": read_carray, "ctable": read_ctable,
     "store": read_store}[kind](path, res)
    return res


def bench_frame(path, mib):
    import blosc2
    n = mib * (1 << 20) // 8
    # Compressible: a slow random walk rounded to 2 decimals.
    x = np.cumsum(np.random.default_rng(1).standard_normal(n)).round(2)
    blosc2.asarray(x, chunks=(1 << 19,), urlpath=path, mode="w",
                   cparams={"codec": blosc2.Codec.LZ4, "clevel": 5})


def bench(path, reps):
    import blosc2
    blosc2.set_nthreads(2)
    v = blosc2.open(path, mode="r")
    s = v.schunk if hasattr(v, "schunk") else v
    s.dparams = blosc2.DParams(nthreads=2)
    # Its fastest way: every chunk into one reused buffer (no fresh allocation per chunk).
    dst = np.empty(s.chunksize, dtype=np.uint8)
    best = None
    for _ in range(reps):
        t = time.perf_counter()
        for i in range(s.nchunks):
            s.decompress_chunk(i, dst)
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    print(f"{best:.4f}")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "gen":
        gen(sys.argv[2])
    elif cmd == "read":
        print(json.dumps(read(sys.argv[2], sys.argv[3])))
    elif cmd == "frame":
        bench_frame(sys.argv[2], int(sys.argv[3]))
    elif cmd == "bench":
        bench(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(f"unknown command {cmd}")
