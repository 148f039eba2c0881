"""Stores (TreeStore / DictStore / EmbedStore) written by python-blosc2, and what
python-blosc2 reads back from them, for tests/it/store.rs.

    stores.py gen DIR      write the stores into DIR and DIR/manifest.json: for every store,
                           every key's chunks (sha256 of decompress_chunk) and whether it is
                           embedded, and every group's attributes; and DIR/ctab/ctab.b2z (a
                           CTable) with DIR/ctab/manifest.json (every member's chunks)
    stores.py read PATH    print the same description of one store, read with mode='r', as
                           JSON; then open a copy with mode='a' (which extracts a .b2z and so
                           checks every member's CRC-32) and close it unchanged
    stores.py many PATH N  a .b2z TreeStore with N small external leaves (for the open-time
                           measurement)
    stores.py crashgen PATH  a TreeStore (.b2z, or .b2d) for the crash tests: /edit (float64, 4 chunks)
                           and /big (32 MiB of noise, so a commit copying it takes a while)
    stores.py embedgen PATH  a TreeStore (.b2z, or .b2d) with threshold=1024: /tiny and the
                           root __vlmeta__ carrier embedded in embed.b2e, /big a member
    stores.py fuzzseeds DIR  small .b2z stores (a few KiB each) as seeds of the store_open,
                           tree_walk and tree_edit fuzz targets (fuzz/seeds/, scripts/fuzz.sh)
    stores.py emptygen PATH  a .b2d TreeStore with threshold=0 (every leaf a file): /empty an
                           empty SChunk (empty.b2f, rewritten whole by an attribute commit),
                           /x an array (x.b2nd), /g/y
    stores.py keys PATH    the keys python-blosc2 finds in a store (any file of a .b2d that
                           reads as a frame is one) and every SChunk leaf's vlmeta, as JSON
    stores.py zipdates PATH  every member of a zip with its date_time (python's zipfile) and how
                           many seconds before now (local time) that is, as JSON
    stores.py digest PATH  sha256 of store[key][...] for every array key and the root
                           attributes, read with mode='r' and from a copy opened with mode='a'
                           (which extracts the .b2z and so checks every CRC-32), as JSON
"""
import hashlib
import json
import os
import shutil
import sys
import tempfile
import zipfile

import numpy as np


def sha(b):
    return hashlib.sha256(bytes(b)).hexdigest()


def schunk_of(v):
    import blosc2
    return v.schunk if isinstance(v, blosc2.NDArray) else v


def describe(path):
    import blosc2
    out = {"keys": {}, "attrs": {}}
    cls = blosc2.TreeStore
    with cls(path, mode="r") as ts:
        keys = sorted(ts.keys())
        for k in keys:
            v = ts[k]
            if not hasattr(v, "schunk") and not isinstance(v, blosc2.SChunk):
                # a group: its attributes
                try:
                    out["attrs"][k] = dict(v.vlmeta[:])
                except Exception:
                    out["attrs"][k] = {}
                continue
            s = schunk_of(v)
            win = None
            if hasattr(ts, "member_window"):
                try:
                    win = ts.member_window(k)
                except Exception:
                    win = None
            entry = {
                "nchunks": s.nchunks,
                "chunks": [sha(s.decompress_chunk(i)) for i in range(s.nchunks)],
                "window": list(win) if win else None,
                "vlmeta": {kk: vv for kk, vv in s.vlmeta[:].items()} if s.vlmeta else {},
            }
            if isinstance(v, blosc2.NDArray):
                entry["shape"] = list(v.shape)
                entry["dtype"] = str(v.dtype)
                entry["data"] = sha(np.ascontiguousarray(v[...]).tobytes())
            out["keys"][k] = entry
        try:
            out["attrs"]["/"] = dict(ts.vlmeta[:])
        except Exception:
            out["attrs"]["/"] = {}
    return out


def check_append(path):
    """Opens a copy in mode 'a' (a .b2z is extracted: CRC-32s checked) and closes it."""
    import blosc2
    d = tempfile.mkdtemp()
    try:
        cp = os.path.join(d, os.path.basename(path))
        if os.path.isdir(path):
            shutil.copytree(path, cp)
        else:
            shutil.copy(path, cp)
        with blosc2.TreeStore(cp, mode="a") as ts:
            n = len(list(ts.keys()))
        return n
    finally:
        shutil.rmtree(d)


def fill(ts, deep=True):
    import blosc2
    ts["/temps"] = blosc2.linspace(0, 1, 10000, dtype=np.float64, chunks=(2500,),
                                  blocks=(500,))
    ts["/group/counts"] = blosc2.arange(3000, dtype=np.int32, chunks=(1000,))
    ts["/group/sub/tiny"] = np.arange(5, dtype=np.int16)
    ts["/raw"] = blosc2.SChunk(chunksize=4000,
                               data=np.arange(3000, dtype=np.int32).tobytes())
    ts["/small"] = blosc2.SChunk(chunksize=64, data=np.arange(40, dtype=np.int8).tobytes())
    if deep:
        ts["/a/b/c/leaf"] = blosc2.asarray(np.arange(600, dtype=np.float32).reshape(20, 30),
                                           chunks=(10, 15), blocks=(5, 5))
    ts.vlmeta["title"] = "demo store"
    ts.vlmeta["n"] = 3
    ts["/group"].vlmeta["units"] = "counts"


def gen(d):
    import blosc2
    os.makedirs(d, exist_ok=True)
    with blosc2.TreeStore(os.path.join(d, "tree.b2z"), mode="w", threshold=1024) as ts:
        fill(ts)
    with blosc2.TreeStore(os.path.join(d, "tree.b2z"), mode="r") as ts:
        ts.to_b2d(os.path.join(d, "tree.b2d"))
    with blosc2.TreeStore(os.path.join(d, "deflt.b2z"), mode="w") as ts:
        fill(ts)
    with blosc2.TreeStore(os.path.join(d, "deflt.b2d"), mode="w") as ts:
        fill(ts, deep=False)
    with blosc2.DictStore(os.path.join(d, "dict.b2z"), mode="w", threshold=100) as ds:
        ds["/x"] = np.arange(1000, dtype=np.int64)
        ds["/y/z"] = np.arange(10, dtype=np.uint8)
    # ZIP64: lower the limit so that the largest member gets ZIP64 extra fields.
    old = zipfile.ZIP64_LIMIT
    zipfile.ZIP64_LIMIT = 1000
    try:
        with blosc2.TreeStore(os.path.join(d, "zip64.b2z"), mode="w") as ts:
            ts["/big"] = blosc2.arange(20000, dtype=np.int64, chunks=(5000,))
            ts["/little"] = np.arange(10, dtype=np.int8)
    finally:
        zipfile.ZIP64_LIMIT = old
    # A 4.0.0-style store: a DictStore whose embed.b2e carries the b2embed meta (what
    # python-blosc2 3.7.0-4.0.x wrote): a standalone EmbedStore file zipped with the leaves.
    od = os.path.join(d, "old_src")
    os.makedirs(od, exist_ok=True)
    es = blosc2.EmbedStore(os.path.join(od, "embed.b2e"), mode="w")
    es["/emb"] = np.arange(7, dtype=np.int32)
    blosc2.asarray(np.arange(5000, dtype=np.float64), chunks=(1000,),
                   urlpath=os.path.join(od, "ext.b2nd"), mode="w")
    del es
    with zipfile.ZipFile(os.path.join(d, "old.b2z"), "w", zipfile.ZIP_STORED) as zf:
        zf.write(os.path.join(od, "ext.b2nd"), "ext.b2nd")
        zf.write(os.path.join(od, "embed.b2e"), "embed.b2e")
    shutil.rmtree(od)
    manifest = {}
    for name in sorted(os.listdir(d)):
        if name.endswith((".b2z", ".b2d")):
            manifest[name] = describe(os.path.join(d, name))
    # A CTable inside a TreeStore (kept out of the loop above: b2fs shows its internal
    # subtree, so its description is every member's chunks, read from the extracted member).
    from dataclasses import dataclass

    @dataclass
    class Row:
        a: int
        b: float

    ctab = os.path.join(d, "ctab", "ctab.b2z")
    os.makedirs(os.path.dirname(ctab))
    with blosc2.TreeStore(ctab, mode="w") as ts:
        ts["/data/table"] = blosc2.CTable(Row, new_data=[(i, i / 2) for i in range(100)])
    members = {}
    x = os.path.join(d, "ctab", "x")
    with zipfile.ZipFile(ctab) as zf:
        for n in zf.namelist():
            if n == "embed.b2e":
                continue
            p = zf.extract(n, x)
            v = blosc2.open(p)  # kept alive: its .schunk does not hold it
            s = schunk_of(v)
            key = "/" + os.path.splitext(n)[0]
            members[key] = [sha(s.decompress_chunk(i)) for i in range(s.nchunks)]
            del s, v
    shutil.rmtree(x)
    with blosc2.TreeStore(ctab, mode="r") as ts:
        keys = sorted(ts.keys())
    with open(os.path.join(d, "ctab", "manifest.json"), "w") as f:
        json.dump({"members": members, "keys": keys}, f, indent=1, sort_keys=True)
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True, default=str)


def many(path, n):
    """n leaves written as python-blosc2 cframes straight into a stored zip (as to_b2z lays
    them out, embed.b2e last): a TreeStore writing them one by one takes minutes."""
    import blosc2
    d = tempfile.mkdtemp()
    try:
        with blosc2.TreeStore(os.path.join(d, "base.b2d"), mode="w") as ts:
            ts.vlmeta["n"] = n
        emb = os.path.join(d, "base.b2d", "embed.b2e")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
            # One array refilled per member: the same cframe as a new blosc2.asarray(base + i)
            # each time, in three quarters of the time.
            base = np.arange(4, dtype=np.int32)
            a = blosc2.asarray(base)
            for i in range(n):
                a[:] = base + i
                zf.writestr(f"g{i % 100}/a{i}.b2nd", a.to_cframe())
            zf.write(os.path.join(d, "base.b2d", "__vlmeta__.b2f"), "__vlmeta__.b2f")
            zf.write(emb, "embed.b2e")
    finally:
        shutil.rmtree(d)


def crashgen(path):
    import blosc2
    rng = np.random.default_rng(7)
    with blosc2.TreeStore(path, mode="w") as ts:
        ts["/edit"] = blosc2.asarray(np.arange(200_000, dtype=np.float64), chunks=(50_000,))
        ts["/big"] = blosc2.asarray(rng.integers(0, 2**63, 4 << 20, dtype=np.int64),
                                    chunks=(1 << 20,))
        ts.vlmeta["title"] = "crash"


def embedgen(path):
    import blosc2
    with blosc2.TreeStore(path, mode="w", threshold=1024) as ts:
        ts["/tiny"] = np.arange(5, dtype=np.int16)
        ts["/big"] = blosc2.arange(3000, dtype=np.int32, chunks=(1000,))
        ts.vlmeta["title"] = "embedded"


def emptygen(path):
    import blosc2
    with blosc2.TreeStore(path, mode="w", threshold=0) as ts:
        ts["/empty"] = blosc2.SChunk()
        ts["/x"] = blosc2.arange(3000, dtype=np.int32, chunks=(1000,))
        ts["/g/y"] = np.arange(5, dtype=np.int16)


def keys(path):
    import blosc2
    out = {"keys": [], "vlmeta": {}}
    with blosc2.TreeStore(path, mode="r") as ts:
        out["keys"] = sorted(ts.keys())
        for k in out["keys"]:
            v = ts[k]
            if isinstance(v, blosc2.SChunk):
                out["vlmeta"][k] = dict(v.vlmeta[:])
            del v
    return out


def fuzzseeds(d):
    """Small stores of every kind b2fs opens: TreeStore (members, embedded values, groups with
    attributes, an SChunk, a 2-D array), DictStore, a ZIP64 one, a CTable in a TreeStore."""
    import blosc2
    os.makedirs(d, exist_ok=True)
    with blosc2.TreeStore(os.path.join(d, "tree.b2z"), mode="w", threshold=64) as ts:
        ts["/a"] = blosc2.arange(64, dtype=np.int32, chunks=(16,), blocks=(8,))
        ts["/g/b"] = blosc2.asarray(np.arange(24, dtype=np.float32).reshape(4, 6),
                                    chunks=(2, 3), blocks=(1, 3))
        ts["/g/tiny"] = np.arange(3, dtype=np.int16)
        ts["/raw"] = blosc2.SChunk(chunksize=64, data=np.arange(40, dtype=np.int8).tobytes())
        ts.vlmeta["title"] = "seed"
        ts["/g"].vlmeta["units"] = [1, 2.5, "x"]
    with blosc2.TreeStore(os.path.join(d, "embedded.b2z"), mode="w", threshold=4096) as ts:
        ts["/e"] = np.arange(6, dtype=np.uint8)
        ts["/f/s"] = np.array([b"ab", b"c"], dtype="S2")
        ts.vlmeta["k"] = {"nested": True}
    with blosc2.DictStore(os.path.join(d, "dict.b2z"), mode="w", threshold=8) as ds:
        ds["/x"] = np.arange(20, dtype=np.int64)
        ds["/y/z"] = np.array([True, False, True])
    old = zipfile.ZIP64_LIMIT
    zipfile.ZIP64_LIMIT = 100
    try:
        with blosc2.TreeStore(os.path.join(d, "zip64.b2z"), mode="w") as ts:
            ts["/big"] = blosc2.arange(200, dtype=np.int16, chunks=(50,))
    finally:
        zipfile.ZIP64_LIMIT = old
    from dataclasses import dataclass

    @dataclass
    class Row:
        a: int
        b: float

    with blosc2.TreeStore(os.path.join(d, "ctab.b2z"), mode="w") as ts:
        ts["/t"] = blosc2.CTable(Row, new_data=[(i, i / 2) for i in range(8)])


def digest(path):
    import blosc2

    def one(ts):
        out = {k: sha(np.ascontiguousarray(ts[k][...]).tobytes()) for k in sorted(ts.keys())
               if isinstance(ts[k], blosc2.NDArray)}
        out["/__attrs__"] = dict(ts.vlmeta[:])
        return out
    with blosc2.TreeStore(path, mode="r") as ts:
        r = one(ts)
    d = tempfile.mkdtemp()
    try:
        cp = os.path.join(d, os.path.basename(path))
        if os.path.isdir(path):
            shutil.copytree(path, cp)
        else:
            shutil.copy(path, cp)
        with blosc2.TreeStore(cp, mode="a") as ts:
            a = one(ts)
    finally:
        shutil.rmtree(d)
    return {"r": r, "a": a}


def main():
    cmd = sys.argv[1]
    if cmd == "gen":
        gen(sys.argv[2])
    elif cmd == "read":
        out = describe(sys.argv[2])
        out["append_keys"] = check_append(sys.argv[2])
        print(json.dumps(out, sort_keys=True, default=str))
    elif cmd == "many":
        many(sys.argv[2], int(sys.argv[3]))
    elif cmd == "crashgen":
        crashgen(sys.argv[2])
    elif cmd == "embedgen":
        embedgen(sys.argv[2])
    elif cmd == "fuzzseeds":
        fuzzseeds(sys.argv[2])
    elif cmd == "emptygen":
        emptygen(sys.argv[2])
    elif cmd == "keys":
        print(json.dumps(keys(sys.argv[2]), sort_keys=True, default=str))
    elif cmd == "zipdates":
        import datetime
        now = datetime.datetime.now()
        with zipfile.ZipFile(sys.argv[2]) as zf:
            print(json.dumps({i.filename: {"date_time": list(i.date_time),
                                           "age": (now - datetime.datetime(*i.date_time))
                                           .total_seconds()} for i in zf.infolist()}))
    elif cmd == "digest":
        print(json.dumps(digest(sys.argv[2]), sort_keys=True, default=str))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
