"""Sources for the Zarr view tests (tests/it/zarr_readers.rs) and what the reference libraries
read from them. Runs in the reference venv (.venv: python-blosc2 4.14.1, bcolz-zipline 1.13).

Usage:
    zarr_cases.py gen OUTDIR         the sources below and their references; prints the cases
    zarr_cases.py slab2d OUT.b2nd    a 2-D float64 b2nd with slab blocks, chunks not dividing
                                     the shape (the write tests; npy_check.py gen2d has blocks
                                     that are not slabs)
    zarr_cases.py tiled2d OUT.b2nd   a 2-D float64 b2nd whose (16, 20) blocks tile its (64, 40)
                                     chunks, which do not divide its (150, 70) shape
    zarr_cases.py crashgen DIR       DIR/src.b2nd (float64 (600, 500), 60 chunks of (100, 50))
                                     and DIR/old.npy, DIR/new.npy: its values and the ones the
                                     crash test's writer puts in every chunk
    zarr_cases.py crashcheck SRC DIR python-blosc2 reads SRC; every chunk holds DIR/old.npy's
                                     values or DIR/new.npy's; prints "old N new M"

`gen` writes into OUTDIR the sources (python-blosc2 b2nd arrays of 1-4 dims and many dtypes, with
slab blocks and blocks that are not slabs, chunk shapes that do not divide the shape; a plain
frame without a dtype; bcolz carrays and a ctable whose columns have different chunklens; a
TreeStore as `.b2z` and as `.b2d` with groups and attributes), one reference `.npy` per array
(what python-blosc2 `arr[...]` / bcolz `carray[:]` read) and prints one JSON list of cases:

    {"name", "source", "kind": "single" | "ctable" | "store",
     "arrays": {ZARR_PATH: {"npy", "chunks", "attrs", "dims", "portable", "raw"}},
     "groups": {GROUP_PATH: attrs}, "shared_dims": bool}

ZARR_PATH is where the array must be in MNT/zarr (the documented layout: a single source is
one array named after the file stem, a ctable's columns sit in MNT/zarr, a store's leaves at
their paths). `dims` is the expected `dimension_names` when the attributes give a valid list,
else null (then any unique names of the right length). `portable: false` marks dtypes with no
portable Zarr type (bytes strings, no dtype): the view may leave them out, and when it shows
them they must read back byte for byte (`raw`: compare `tobytes()`).
"""

import json
import os
import shutil
import sys

import numpy as np

import blosc2

OUT = None
RNG = np.random.default_rng(2020)
CASES = []


def values(shape, dtype):
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "b":
        a = RNG.integers(0, 2, n).astype(dt)
    elif dt.kind == "f":
        a = RNG.standard_normal(n).astype(dt)
    elif dt.kind == "c":
        a = (RNG.standard_normal(n) + 1j * RNG.standard_normal(n)).astype(dt)
    elif dt.kind in "Mm":
        # No NaT (a fill value some readers treat specially): values within +-2**40.
        a = RNG.integers(-(2**40), 2**40, n).astype("<i8").view(dt.newbyteorder("<"))
        a = a.astype(dt)
    elif dt.kind == "S":
        a = np.array([bytes(RNG.integers(97, 123, RNG.integers(0, dt.itemsize + 1)).astype(np.uint8))
                      for _ in range(n)], dtype=dt)
    else:
        info = np.iinfo(dt)
        a = RNG.integers(info.min, info.max, n, endpoint=True, dtype=dt.newbyteorder("="))
        a = a.astype(dt)
    return a.reshape(shape)


def save(name, arr):
    path = os.path.join(OUT, "ref", name + ".npy")
    np.save(path, arr)
    return path


def jsonable(d):
    return json.loads(json.dumps(d, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


def dims_of(attrs, ndim):
    for key in ("_ARRAY_DIMENSIONS", "dimension_names"):
        v = attrs.get(key)
        if isinstance(v, list) and len(v) == ndim and all(isinstance(x, str) for x in v):
            return v
    return None


def entry(name, arr, chunks, attrs, portable=True, raw=False):
    attrs = jsonable(attrs)
    return {"npy": save(name, arr), "chunks": list(chunks), "attrs": attrs,
            "dims": dims_of(attrs, arr.ndim), "portable": portable, "raw": raw}


# (name, shape, chunks, blocks, dtype, attrs). Slab blocks: blocks[1:] == chunks[1:].
B2ND = [
    ("f4_1d", (1001,), (300,), (64,), "<f4", {"_ARRAY_DIMENSIONS": ["x"], "title": "one"}),
    ("f8_2d_slab", (230, 170), (60, 50), (16, 50), "<f8",
     {"_ARRAY_DIMENSIONS": ["lat", "lon"], "note": "slab blocks", "n": 3, "scale": 0.5}),
    ("f8_2d_blocks", (230, 170), (60, 50), (16, 24), "<f8", {}),
    ("f2_1d", (301,), (70,), (16,), "<f2", {"dimension_names": ["h"]}),
    ("i1_1d", (1000,), (300,), (70,), "|i1", {}),
    ("u1_3d_slab", (9, 11, 7), (4, 5, 3), (2, 5, 3), "|u1", {"nested": {"a": [1, 2], "b": None}}),
    ("i2_4d", (5, 6, 7, 4), (2, 4, 3, 3), (1, 3, 2, 2), "<i2", {"_ARRAY_DIMENSIONS": ["a", "b"]}),
    ("u2_1d", (517,), (100,), (33,), "<u2", {}),
    ("i4_2d", (31, 17), (8, 8), (3, 5), "<i4", {}),
    ("u4_4d_slab", (3, 4, 5, 6), (2, 3, 4, 5), (1, 3, 4, 5), "<u4", {}),
    ("i8_3d", (7, 6, 5), (3, 4, 5), (3, 4, 5), "<i8", {}),
    ("u8_2d", (13, 11), (13, 4), (6, 4), "<u8", {}),
    ("be_i4_2d", (12, 10), (5, 5), (2, 3), ">i4", {}),
    ("bool_3d", (6, 9, 10), (4, 4, 4), (2, 3, 3), "|b1", {"_ARRAY_DIMENSIONS": ["p", "q", "r"]}),
    ("c8_2d", (15, 14), (6, 6), (4, 5), "<c8", {}),
    ("c16_1d", (100,), (30,), (7,), "<c16", {}),
    ("M8ns_1d", (77,), (20,), (9,), "<M8[ns]", {}),
    ("M8s_2d", (9, 9), (4, 4), (3, 3), "<M8[s]", {"_ARRAY_DIMENSIONS": ["t0", "t1"]}),
    ("m8ms_3d", (4, 5, 6), (3, 3, 3), (2, 2, 2), "<m8[ms]", {}),
]


def b2nd_cases():
    for name, shape, chunks, blocks, dtype, attrs in B2ND:
        src = os.path.join(OUT, name + ".b2nd")
        data = values(shape, dtype)
        a = blosc2.asarray(data, chunks=chunks, blocks=blocks, urlpath=src, mode="w",
                           cparams={"nthreads": 1})
        for k, v in attrs.items():
            a.vlmeta[k] = v
        del a
        a = blosc2.open(src, mode="r")
        got = a[...]
        assert got.tobytes() == data.tobytes() and a.chunks == chunks and a.blocks == blocks, name
        CASES.append({"name": name, "source": src, "kind": "single", "shared_dims": False,
                      "groups": {"": {}},
                      "arrays": {name: entry(name, got, a.chunks, dict(a.vlmeta[:]))}})
    # A plain frame (no N-dim layer, typesize 1): optional (no dtype), items of one byte.
    src = os.path.join(OUT, "plain_ts1.b2frame")
    raw = RNG.integers(0, 256, 9000, dtype=np.uint8).tobytes()
    blosc2.SChunk(chunksize=4000, data=raw, urlpath=src, mode="w", cparams={"typesize": 1})
    assert blosc2.open(src)[:] == raw
    CASES.append({"name": "plain_ts1", "source": src, "kind": "single", "shared_dims": False,
                  "groups": {"": {}},
                  "arrays": {"plain_ts1": entry("plain_ts1", np.frombuffer(raw, np.uint8), [4000],
                                                {}, portable=False, raw=True)}})


def bcolz_cases():
    import bcolz

    cp = bcolz.cparams(clevel=5, shuffle=1, cname="lz4")
    carrays = [
        ("carray_i4", np.arange(25, dtype="<i4") * 7, 10, {"_ARRAY_DIMENSIONS": ["row"]}),
        ("carray_f8_2d", values((23, 3), "<f8"), 5, {"kind": "matrix"}),
        ("carray_bool", values((30,), "|b1"), 8, {}),
        ("carray_M8ns", values((19,), "<M8[ns]"), 7, {}),
        ("carray_exact", np.arange(20, dtype="<i8"), 10, {}),
    ]
    for name, data, chunklen, attrs in carrays:
        root = os.path.join(OUT, name)
        c = bcolz.carray(data, rootdir=root, mode="w", chunklen=chunklen, cparams=cp)
        for k, v in attrs.items():
            c.attrs[k] = v
        c.flush()
        del c
        c = bcolz.open(root, mode="r")
        got = c[:]
        assert got.tobytes() == data.tobytes(), name
        CASES.append({"name": name, "source": root, "kind": "single", "shared_dims": False,
                      "groups": {"": {}},
                      "arrays": {name: entry(name, got, [c.chunklen, *got.shape[1:]],
                                             dict(c.attrs))}})
    # A ctable whose columns have different chunklens (each column rewritten as a carray).
    n = 47
    data = {"id": np.arange(n, dtype="<i4"), "val": values((n,), "<f8"),
            "flag": values((n,), "|b1"), "when": values((n,), "<M8[ns]"),
            "name": values((n,), "|S5")}
    root = os.path.join(OUT, "ctable_cols")
    ct = bcolz.ctable(columns=list(data.values()), names=list(data), rootdir=root, mode="w",
                      chunklen=10, cparams=cp)
    ct.attrs["table"] = "readings"
    ct.flush()
    del ct
    for col, chunklen in [("val", 16), ("flag", 9), ("name", 7)]:
        shutil.rmtree(os.path.join(root, col))
        c = bcolz.carray(data[col], rootdir=os.path.join(root, col), mode="w",
                         chunklen=chunklen, cparams=cp)
        c.flush()
        del c
    ct = bcolz.open(root, mode="r")
    arrays = {}
    for col in ct.names:
        c = ct.cols[col]
        got = c[:]
        assert got.tobytes() == data[col].tobytes(), col
        arrays[col] = entry("ctable_cols." + col, got, [c.chunklen], dict(c.attrs),
                            portable=got.dtype.kind != "S", raw=got.dtype.kind == "S")
    CASES.append({"name": "ctable_cols", "source": root, "kind": "ctable", "shared_dims": True,
                  "groups": {"": jsonable(dict(ct.attrs))}, "arrays": arrays})


def fill_store(ts):
    a = blosc2.asarray(np.linspace(0, 1, 1000), chunks=(250,), blocks=(50,))
    a.vlmeta["_ARRAY_DIMENSIONS"] = ["time"]
    a.vlmeta["long_name"] = "temperature"
    ts["/temps"] = a
    f = blosc2.asarray(values((40, 30), "<f4"), chunks=(16, 13), blocks=(8, 5))
    f.vlmeta["_ARRAY_DIMENSIONS"] = ["y", "x"]
    ts["/grid/field"] = f
    m = blosc2.asarray(values((40, 30), "|b1"), chunks=(40, 30), blocks=(10, 30))
    m.vlmeta["_ARRAY_DIMENSIONS"] = ["y", "x"]
    ts["/grid/mask"] = m
    ts["/grid/sub/tiny"] = blosc2.asarray(np.arange(5, dtype=np.int16) - 2)
    ts["/grid/sub/when"] = blosc2.asarray(values((12, 3), "<M8[D]"), chunks=(5, 3), blocks=(2, 3))
    ts.vlmeta["title"] = "zarr test store"
    ts.vlmeta["n"] = 3
    ts["/grid"].vlmeta["units"] = "m"
    ts["/grid"].vlmeta["levels"] = [1, 2, 3]


def store_cases():
    for name in ("store.b2z", "store.b2d"):
        path = os.path.join(OUT, name)
        with blosc2.TreeStore(path, mode="w") as ts:
            fill_store(ts)
        arrays, groups = {}, {}
        with blosc2.TreeStore(path, mode="r") as ts:
            groups[""] = dict(ts.vlmeta[:])
            for key in sorted(ts.keys()):
                v = ts[key]
                if not isinstance(v, blosc2.NDArray):
                    groups[key.strip("/")] = dict(v.vlmeta[:])
                    continue
                zpath = key.strip("/")
                got = v[...]
                arrays[zpath] = entry(name + "." + zpath.replace("/", "."), got, v.chunks,
                                      dict(v.vlmeta[:]))
        CASES.append({"name": name, "source": path, "kind": "store", "shared_dims": True,
                      "groups": jsonable(groups), "arrays": arrays})


CRASH_CHUNKS = (100, 50)


def crashgen(d):
    os.makedirs(d, exist_ok=True)
    old = np.arange(600 * 500, dtype=np.float64).reshape(600, 500)
    blosc2.asarray(old, chunks=CRASH_CHUNKS, blocks=(25, 50), urlpath=os.path.join(d, "src.b2nd"),
                   mode="w")
    np.save(os.path.join(d, "old.npy"), old)
    np.save(os.path.join(d, "new.npy"), old * -0.5 - 1)


def crashcheck(src, d):
    got = blosc2.open(src, mode="r")[...]
    old, new = np.load(os.path.join(d, "old.npy")), np.load(os.path.join(d, "new.npy"))
    assert got.shape == old.shape and got.dtype == old.dtype, (got.shape, got.dtype)
    counts = {"old": 0, "new": 0}
    c0, c1 = CRASH_CHUNKS
    for i in range(0, old.shape[0], c0):
        for j in range(0, old.shape[1], c1):
            sl = (slice(i, i + c0), slice(j, j + c1))
            if np.array_equal(got[sl], old[sl]):
                counts["old"] += 1
            elif np.array_equal(got[sl], new[sl]):
                counts["new"] += 1
            else:
                raise SystemExit(f"chunk at {i},{j} is neither old nor new")
    print("old", counts["old"], "new", counts["new"])


def attrgen(out):
    """A `.b2z` for attribute edits through the view: the store and group /ocean have
    attributes (their `__vlmeta__` carriers), /ocean/sst too; /atm has none (no carrier)."""
    with blosc2.TreeStore(out, mode="w") as ts:
        sst = blosc2.asarray(np.arange(60, dtype="f8").reshape(6, 10), chunks=(3, 10))
        sst.vlmeta["units"] = "K"
        ts["/ocean/sst"] = sst
        ts["/atm/wind"] = np.ones((4, 5), dtype="i2")
        ts.vlmeta["title"] = "demo"
        ts.get_subtree("/ocean").vlmeta["source"] = "model"


def attrcheck(src):
    """Prints, as JSON, the attributes python-blosc2 reads back from `src`."""
    with blosc2.TreeStore(src, mode="r") as ts:
        # Each array held while its vlmeta is read (a temporary's vlmeta outlives it).
        sst, wind = ts["/ocean/sst"], ts["/atm/wind"]
        print(json.dumps({
            "/": dict(ts.vlmeta),
            "/ocean": dict(ts.get_subtree("/ocean").vlmeta),
            "/atm": dict(ts.get_subtree("/atm").vlmeta),
            "/ocean/sst": dict(sst.vlmeta),
            "/atm/wind": dict(wind.vlmeta),
            "shape": list(sst.shape),
        }, sort_keys=True))


def main():
    global OUT
    cmd = sys.argv[1]
    if cmd == "gen":
        OUT = sys.argv[2]
        os.makedirs(os.path.join(OUT, "ref"), exist_ok=True)
        b2nd_cases()
        bcolz_cases()
        store_cases()
        json.dump(CASES, sys.stdout)
    elif cmd == "slab2d":
        a = (np.arange(200 * 150, dtype=np.float64) * 0.25).reshape(200, 150)
        blosc2.asarray(a, chunks=(64, 50), blocks=(16, 50), urlpath=sys.argv[2], mode="w")
    elif cmd == "tiled2d":
        a = (np.arange(150 * 70, dtype=np.float64) * 0.5 - 3).reshape(150, 70)
        blosc2.asarray(a, chunks=(64, 40), blocks=(16, 20), urlpath=sys.argv[2], mode="w")
    elif cmd == "attrgen":
        attrgen(sys.argv[2])
    elif cmd == "attrcheck":
        attrcheck(sys.argv[2])
    elif cmd == "crashgen":
        crashgen(sys.argv[2])
    elif cmd == "crashcheck":
        crashcheck(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
