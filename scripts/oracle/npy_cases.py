"""Sources and their reference NPY files, for tests/it/npy.rs.

Usage: npy_cases.py OUTDIR

Writes into OUTDIR, for each case NAME, a source made by the reference library (python-blosc2
4.14 b2nd arrays and plain frames, caterva 0.7.3 arrays, bcolz-zipline 1.13 carrays and
ctables) and NAME.npy = what `np.save` writes for its data as the reference reads it, the data
aligned to a page as in b2fs's array.npy (npy_ref.py):
`blosc2.open(src)[...]` (b2nd), `carray[:]`, `ctable[:]` (table.npy of a ctable), and for
sources without a dtype the documented stand-in (`|V<typesize>` items, `|u1` for typesize 1).
Prints one JSON list of {"name", "source", "npy", "kind"} (kind: array | table) to stdout.

Shapes, chunks and blocks are chosen not to divide each other, so edge chunks and edge blocks
are padded. Small sizes keep the whole run to a second or two.
"""

import io
import json
import os
import sys

import numpy as np

import blosc2
import npy_ref

OUT = sys.argv[1]
CASES = []
RNG = np.random.default_rng(1234)


def save(name, arr):
    buf = io.BytesIO()
    npy_ref.save(buf, arr)
    path = os.path.join(OUT, name + ".npy")
    with open(path, "wb") as f:
        f.write(buf.getvalue())
    return path


def values(shape, dtype):
    """Non-trivial content for any dtype (random bytes made valid where needed)."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) if shape else 1
    if dt.kind == "b":
        a = RNG.integers(0, 2, n).astype(dt)
    elif dt.kind == "U":
        chars = np.array(list("abcdefxyz\u00e9\u65e5"))
        a = np.array(["".join(RNG.choice(chars, RNG.integers(0, dt.itemsize // 4 + 1))) for _ in range(n)], dtype=dt)
    elif dt.kind == "S":
        a = np.array([bytes(RNG.integers(1, 256, RNG.integers(0, dt.itemsize + 1)).astype(np.uint8)) for _ in range(n)], dtype=dt)
    elif dt.kind == "f":
        a = RNG.standard_normal(n).astype(dt)
    elif dt.kind == "c":
        a = (RNG.standard_normal(n) + 1j * RNG.standard_normal(n)).astype(dt)
    else:
        raw = RNG.integers(0, 256, n * dt.itemsize, dtype=np.uint8)
        a = raw.view(dt) if dt.fields is None else np.frombuffer(raw.tobytes(), dtype=dt)
        if dt.fields is not None:
            a = a.copy()
            # Make string and float fields well formed (not needed for the bytes, but keeps
            # the arrays printable when a test fails).
            for name in dt.names:
                sub = dt.fields[name][0]
                if sub.kind == "U":
                    a[name] = "u"
    return a.reshape(shape)


def b2nd(name, shape, chunks, blocks, dtype):
    src = os.path.join(OUT, name + ".b2nd")
    dt = np.dtype(dtype)
    if dt.subdtype is not None:
        # A subarray dtype: numpy expands it into dimensions, so create then fill.
        arr = blosc2.zeros(shape, dtype=dt, chunks=chunks, blocks=blocks, urlpath=src, mode="w",
                           cparams={"nthreads": 1})
        arr[...] = values(shape + dt.shape, dt.base)
        data = None
    else:
        data = values(shape, dtype)
        blosc2.asarray(data, chunks=chunks, blocks=blocks, urlpath=src, mode="w",
                       cparams={"nthreads": 1})
    arr = blosc2.open(src)
    got = arr[...]
    assert data is None or got.tobytes() == data.tobytes(), name
    CASES.append({"name": name, "source": src, "npy": save(name, got), "kind": "array"})


def main():
    os.makedirs(OUT, exist_ok=True)
    struct = [("a", "<i4"), ("b", "S3"), ("c", "<f8", (2,))]
    nested = [("p", [("x", "<i2"), ("y", "<f4")]), ("q", "u1")]
    padded = np.dtype({"names": ["x", "y"], "formats": ["<i2", "<f4"], "offsets": [0, 4], "itemsize": 12})
    aligned = np.dtype([("x", "u1"), ("y", "<f8")], align=True)
    titled = [(("T1", "a"), "<i4"), ("b", "S2")]
    subfield = [("m", "<U2", (2, 3)), ("n", "?")]
    specs = [
        ("f4_2d", (37, 23), (10, 7), (4, 3), "<f4"),
        ("f8_3d", (9, 11, 7), (4, 5, 3), (2, 2, 2), "<f8"),
        ("f2_1d", (301,), (70,), (16,), "<f2"),
        ("i1_1d", (1000,), (300,), (70,), "|i1"),
        ("i2_4d", (5, 6, 7, 4), (2, 4, 3, 3), (1, 3, 2, 2), "<i2"),
        ("i4_2d", (31, 17), (8, 8), (3, 5), "<i4"),
        ("i8_3d", (7, 6, 5), (3, 4, 5), (3, 4, 5), "<i8"),
        ("u1_2d", (41, 29), (16, 13), (5, 6), "|u1"),
        ("u2_1d", (517,), (100,), (33,), "<u2"),
        ("u4_4d", (3, 4, 5, 6), (2, 3, 4, 5), (2, 2, 3, 2), "<u4"),
        ("u8_2d", (13, 11), (13, 4), (6, 4), "<u8"),
        ("be_i4_2d", (12, 10), (5, 5), (2, 3), ">i4"),
        ("bool_3d", (6, 9, 10), (4, 4, 4), (2, 3, 3), "|b1"),
        ("c8_2d", (15, 14), (6, 6), (4, 5), "<c8"),
        ("c16_1d", (100,), (30,), (7,), "<c16"),
        # Blocks that tile their chunks (the sharded Zarr view): re-laid-out and slab blocks.
        ("f8_2d_tiled", (40, 30), (16, 10), (4, 5), "<f8"),
        ("u2_3d_tiled", (9, 8, 6), (4, 4, 6), (2, 2, 3), "<u2"),
        ("f4_2d_slabs", (50, 12), (20, 12), (5, 12), "<f4"),
        ("f8_2d_tiled_64k", (300, 512), (128, 512), (16, 512), "<f8"),
        ("struct_2d", (11, 9), (4, 4), (3, 2), struct),
        ("nested_1d", (53,), (20,), (6,), nested),
        ("padded_2d", (10, 7), (4, 4), (2, 3), padded),
        ("aligned_1d", (40,), (15,), (4,), aligned),
        ("titled_1d", (30,), (8,), (3,), titled),
        ("subfield_2d", (7, 5), (3, 3), (2, 2), subfield),
        ("S5_2d", (19, 7), (6, 4), (4, 3), "|S5"),
        ("U3_2d", (13, 8), (5, 3), (2, 2), "<U3"),
        ("M8ns_1d", (77,), (20,), (9,), "<M8[ns]"),
        ("M8D_2d", (9, 9), (4, 4), (3, 3), "<M8[D]"),
        ("m8s_3d", (4, 5, 6), (3, 3, 3), (2, 2, 2), "<m8[s]"),
        ("subarray_1d", (21,), (8,), (3,), np.dtype(("<i4", (2,)))),
        ("S300_1d", (20,), (7,), (3,), "|S300"),
        ("f16_2d", (5, 6), (2, 4), (2, 3), "<f16"),
        ("c32_1d", (9,), (4,), (3,), "<c32"),
        ("M8generic_1d", (11,), (4,), (3,), "<M8"),
        ("be_M8ns_1d", (11,), (4,), (3,), ">M8[ns]"),
        ("be_U2_2d", (6, 5), (4, 2), (3, 2), ">U2"),
        ("scalar_0d", (), (), (), "<f8"),
        ("f8_empty", (0, 5), (0, 5), (0, 5), "<f8"),
    ]
    for name, shape, chunks, blocks, dtype in specs:
        if shape == () or 0 in shape:
            src = os.path.join(OUT, name + ".b2nd")
            data = values(shape, dtype)
            blosc2.asarray(data, urlpath=src, mode="w")
            CASES.append({"name": name, "source": src, "npy": save(name, blosc2.open(src)[...]), "kind": "array"})
            continue
        b2nd(name, shape, chunks, blocks, dtype)

    # A plain frame (no N-dim metalayer): |V<typesize> items; typesize 1: |u1; a last short chunk.
    for name, ts, nbytes in [("schunk_ts4", 4, 4000 * 2 + 1200), ("schunk_ts1", 1, 3001)]:
        src = os.path.join(OUT, name + ".b2frame")
        raw = RNG.integers(0, 256, nbytes, dtype=np.uint8).tobytes()
        blosc2.SChunk(chunksize=4000, data=raw, urlpath=src, mode="w",
                      cparams={"typesize": ts, "nthreads": 1})
        got = blosc2.open(src)[:]
        assert got == raw
        view = np.frombuffer(raw, dtype="V%d" % ts if ts > 1 else "u1")
        CASES.append({"name": name, "source": src, "npy": save(name, view), "kind": "array"})

    # caterva 0.7.3: no dtype either.
    import caterva
    npa = values((10, 7), "<f8")
    src = os.path.join(OUT, "caterva_2d.caterva")
    caterva.asarray(npa, chunks=(4, 4), blocks=(2, 3), urlpath=src, contiguous=True)
    view = np.ascontiguousarray(npa).view("V8").reshape(10, 7)
    CASES.append({"name": "caterva_2d", "source": src, "npy": save("caterva_2d", view), "kind": "array"})

    # bcolz carrays and a ctable.
    import bcolz
    cp = bcolz.cparams(clevel=5, shuffle=1, cname="lz4")
    carrays = [
        ("carray_i4", np.arange(25, dtype="<i4") * 7, 10),
        ("carray_f8_2d", values((23, 3), "<f8"), 5),
        ("carray_u1_3d", values((11, 2, 3), "|u1"), 4),
        ("carray_S3", values((17,), "|S3"), 6),
        ("carray_U2", values((13,), "<U2"), 5),
        ("carray_bool", values((30,), "|b1"), 8),
        ("carray_M8ns", values((19,), "<M8[ns]"), 7),
        ("carray_exact", np.arange(20, dtype="<i8"), 10),
    ]
    for name, data, chunklen in carrays:
        root = os.path.join(OUT, name)
        c = bcolz.carray(data, rootdir=root, mode="w", chunklen=chunklen, cparams=cp)
        c.flush()
        del c
        got = bcolz.open(root, mode="r")[:]
        assert got.tobytes() == data.tobytes(), name
        CASES.append({"name": name, "source": root, "npy": save(name, got), "kind": "array"})

    # A ctable whose columns have different chunklens (bcolz opens each column on its own:
    # columns rewritten as carrays of another chunklen read back the same).
    n = 47
    data = {
        "id": np.arange(n, dtype="<i4"),
        "val": values((n,), "<f8"),
        "name": values((n,), "|S5"),
        "flag": values((n,), "|b1"),
    }
    root = os.path.join(OUT, "ctable_4cols")
    ct = bcolz.ctable(columns=list(data.values()), names=list(data), rootdir=root, mode="w",
                      chunklen=10, cparams=cp)
    ct.flush()
    del ct
    import shutil
    for colname, chunklen in [("val", 16), ("name", 7), ("flag", 9)]:
        shutil.rmtree(os.path.join(root, colname))
        c = bcolz.carray(data[colname], rootdir=os.path.join(root, colname), mode="w",
                         chunklen=chunklen, cparams=cp)
        c.flush()
        del c
    ct = bcolz.open(root, mode="r")
    for colname in data:
        assert ct.cols[colname][:].tobytes() == data[colname].tobytes(), colname
    CASES.append({"name": "ctable_4cols", "source": root, "npy": save("ctable_4cols", ct[:]), "kind": "table"})
    for i, colname in enumerate(ct.names):
        CASES.append({"name": "ctable_4cols." + colname, "source": os.path.join(root, colname),
                      "npy": save("ctable_4cols." + colname, ct.cols[colname][:]), "kind": "column"})

    json.dump(CASES, sys.stdout)


main()
