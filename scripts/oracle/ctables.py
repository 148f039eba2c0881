"""CTables written by python-blosc2, and the rows python-blosc2 reads back from them, for
tests/it/ctable.rs (b2fs's `table.npy` of a CTable group in a store).

    ctables.py gen DIR     write the CTables into DIR and DIR/manifest.json: for every store,
                           the group of the table ("" when the store is the table), the
                           valid-row count, whether rows were deleted, and DIR/<store>.npy: the
                           valid rows as python-blosc2 gives them (`np.asarray(table)`,
                           np.save). The stores:
                           plain.b2z / plain.b2d   the store is the table (CTable(urlpath=)),
                                                   no deletion; 10 columns (int8, uint16, int64,
                                                   float32, float64, complex128, bool,
                                                   string(6), bytes(3), ndarray (2, 3) float32),
                                                   5000 rows over several chunks (columns
                                                   chunked differently)
                           holes.b2z / holes.b2d   the same, reopened in mode 'a': scattered
                                                   rows and a range deleted, rows appended after
                                                   them (`_valid_rows` has holes)
                           nested.b2z / nested.b2d a TreeStore with /x (an array) and a CTable
                                                   at /g/tab, edited in mode 'a' (deletions,
                                                   one appended row)
                           noise.b2d               two float64 columns of noise, 4000 rows,
                                                   every third row deleted: one run per valid
                                                   stretch (1334 runs), for the run bound
    ctables.py bigmask PATH  a .b2d CTable of one int8 column, 2,100,002 rows, every other
                           row deleted: a mask of 1,050,001 runs of valid rows (more than
                           b2fs keeps: EFBIG)
    ctables.py zeromask PATH  a .b2d CTable of one int64 column, mask chunks of 1000 rows,
                           30,000 rows of which the first 20,000 are deleted: python-blosc2
                           stores those 20 mask chunks as special all-zero chunks (checked
                           here: 32-byte chunks whose special bits say zeros); prints the
                           number of mask chunks that are not special
    ctables.py scan PATH   a CTable of 400,000 rows (float64, int32, bool, int16, float32 and a
                           (2,) uint8 ndarray; chunks of 50,000 rows, blocks of 10,000) with 5%
                           of its rows deleted at random and the range 100,000-120,000, in a
                           .b2d or .b2z (by PATH's suffix); PATH.npy: np.asarray of it
    ctables.py mapcheck NPY STORE SEED
                           through np.load(NPY, mmap_mode='r') (a table.npy b2fs serves):
                           300 random slices of 1-300 rows, then every column summed (a mapped
                           scan), then the whole map, each equal to np.asarray of the root
                           CTable of STORE; prints "ok" or raises
    ctables.py edit STORE  reopen the root CTable of STORE in mode 'a', delete its logical rows
                           1, 2 and 10 and append 3 rows, close (another writer's change)
    ctables.py check NPY STORE GROUP
                           np.load(NPY, mmap_mode='r') (a table.npy b2fs served) equals
                           np.asarray of the CTable at GROUP of STORE ("" for the root): same
                           dtype (names, order, field dtypes) and same rows; prints "ok" or
                           raises
"""
import json
import os
import sys
from dataclasses import dataclass

import numpy as np


def row_type():
    import blosc2

    @dataclass
    class Row:
        i8: int = blosc2.field(blosc2.int8(), chunks=(700,), blocks=(100,))
        u16: int = blosc2.field(blosc2.uint16(), chunks=(1500,), blocks=(500,))
        i64: int = blosc2.field(blosc2.int64())
        f32: float = blosc2.field(blosc2.float32(), chunks=(1000,), blocks=(256,))
        f64: float = blosc2.field(blosc2.float64(), chunks=(2048,), blocks=(512,))
        c128: complex = blosc2.field(blosc2.complex128())
        ok: bool = blosc2.field(blosc2.bool(), chunks=(900,), blocks=(300,))
        s: str = blosc2.field(blosc2.string(max_length=6), chunks=(1200,), blocks=(400,))
        b: bytes = blosc2.field(blosc2.bytes(max_length=3))
        v: np.ndarray = blosc2.field(
            blosc2.ndarray(item_shape=(2, 3), dtype=np.float32), chunks=(800, 2, 3), blocks=(200, 2, 3)
        )

    return Row


def rows(start, n):
    return [
        (
            (i % 200) - 100,
            (i * 7) % 65536,
            i * 1_000_003 - 5,
            i / 4,
            i / 3,
            complex(i, -i / 2),
            i % 3 == 0,
            f"r{i % 997}",
            b"x%d" % (i % 100),
            np.full((2, 3), i, np.float32) + np.arange(6, dtype=np.float32).reshape(2, 3),
        )
        for i in range(start, start + n)
    ]


def open_table(store, group):
    import blosc2

    if group == "":
        return blosc2.CTable.open(store, mode="r"), None
    ts = blosc2.TreeStore(store, mode="r")
    return ts["/" + group], ts


def gen(d):
    import blosc2

    os.makedirs(d, exist_ok=True)
    Row = row_type()
    manifest = {}
    for ext in ("b2z", "b2d"):
        p = os.path.join(d, f"plain.{ext}")
        t = blosc2.CTable(Row, new_data=rows(0, 5000), urlpath=p, mode="w")
        t.close()
        manifest[f"plain.{ext}"] = {"group": "", "deleted": False}

        p = os.path.join(d, f"holes.{ext}")
        t = blosc2.CTable(Row, new_data=rows(0, 5000), urlpath=p, mode="w")
        t.close()
        t = blosc2.CTable.open(p, mode="a")
        t.delete([0, 3, 4, 5, 100, 699, 700, 2500])
        t.delete(list(range(3000, 3800)))
        t.extend(rows(9000, 1500))
        t.delete([4000, 4191, 5691])  # logical indices (of the live rows)
        t.close()
        manifest[f"holes.{ext}"] = {"group": "", "deleted": True}

        p = os.path.join(d, f"nested.{ext}")
        with blosc2.TreeStore(p, mode="w") as ts:
            ts["/x"] = np.arange(10, dtype=np.int32)
        with blosc2.TreeStore(p, mode="a") as ts:
            ts["/g/tab"] = blosc2.CTable(Row, new_data=rows(0, 3000))
        with blosc2.TreeStore(p, mode="a") as ts:
            t = ts["/g/tab"]
            t.delete([1, 2, 3, 1999])
            t.append(rows(7000, 1)[0])
        manifest[f"nested.{ext}"] = {"group": "g/tab", "deleted": True}

    @dataclass
    class Noise:
        a: float = blosc2.field(blosc2.float64(), chunks=(1000,), blocks=(250,))
        b: float = blosc2.field(blosc2.float64(), chunks=(1000,), blocks=(250,))

    rng = np.random.default_rng(22)
    p = os.path.join(d, "noise.b2d")
    t = blosc2.CTable(Noise, new_data=[tuple(r) for r in rng.random((4000, 2))], urlpath=p, mode="w")
    t.delete(list(range(0, 4000, 3)))
    t.close()
    manifest["noise.b2d"] = {"group": "", "deleted": True}

    for name, m in manifest.items():
        t, ts = open_table(os.path.join(d, name), m["group"])
        a = np.asarray(t)
        m["rows"] = int(a.shape[0])
        np.save(os.path.join(d, name + ".npy"), a)
        del t
        if ts is not None:
            ts.close()
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)


def bigmask(path):
    import blosc2

    @dataclass
    class One:
        a: int = blosc2.field(blosc2.int8())

    n = 2_100_002
    data = np.zeros(n, dtype=[("a", "i1")])
    t = blosc2.CTable(One, new_data=data, urlpath=path, mode="w")
    t.delete(np.arange(1, n, 2))
    t.close()


def zeromask(path):
    import blosc2

    @dataclass
    class One:
        a: int = blosc2.field(blosc2.int64())

    t = blosc2.CTable(One, urlpath=path, mode="w", expected_size=1000)
    t.extend([(i,) for i in range(30_000)])
    t.delete(list(range(20_000)))
    t.close()
    mask = blosc2.open(os.path.join(path, "_valid_rows.b2nd"))
    sc = mask.schunk  # (the array kept: its schunk is freed with it)
    chunks = [sc.get_chunk(i) for i in range(sc.nchunks)]
    zeros = sum(1 for c in chunks if len(c) == 32 and (c[31] >> 4) & 7 == 1)
    assert zeros == 20, f"{zeros} special zero mask chunks of {len(chunks)}"
    print(len(chunks) - zeros)


def scan(path):
    import blosc2

    @dataclass
    class Scan:
        a: float = blosc2.field(blosc2.float64(), chunks=(50_000,), blocks=(10_000,))
        b: int = blosc2.field(blosc2.int32(), chunks=(50_000,), blocks=(10_000,))
        c: bool = blosc2.field(blosc2.bool(), chunks=(50_000,), blocks=(10_000,))
        d: int = blosc2.field(blosc2.int16(), chunks=(50_000,), blocks=(10_000,))
        e: float = blosc2.field(blosc2.float32(), chunks=(50_000,), blocks=(10_000,))
        v: np.ndarray = blosc2.field(blosc2.ndarray(item_shape=(2,), dtype=np.uint8),
                                     chunks=(50_000, 2), blocks=(10_000, 2))

    n = 400_000
    rng = np.random.default_rng()
    data = np.zeros(n, dtype=[("a", "<f8"), ("b", "<i4"), ("c", "?"), ("d", "<i2"), ("e", "<f4"),
                              ("v", "u1", (2,))])
    data["a"] = rng.normal(size=n)
    data["b"] = np.arange(n)
    data["c"] = data["b"] % 3 == 0
    data["d"] = rng.integers(-30000, 30000, n)
    data["e"] = rng.random(n)
    data["v"] = rng.integers(0, 256, (n, 2))
    t = blosc2.CTable(Scan, new_data=data, urlpath=path, mode="w")
    t.close()
    t = blosc2.CTable.open(path, mode="a")
    t.delete(np.union1d(rng.choice(n, n // 20, replace=False), np.arange(100_000, 120_000)))
    t.close()
    t = blosc2.CTable.open(path, mode="r")
    np.save(path + ".npy", np.asarray(t))


def mapcheck(npy, store, seed):
    got = np.load(npy, mmap_mode="r")
    t, _ = open_table(store, "")
    want = np.asarray(t)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    rng = np.random.default_rng(int(seed))
    for _ in range(300):
        n = int(rng.integers(1, 301))
        s = int(rng.integers(0, want.shape[0] - n))
        assert np.array_equal(np.array(got[s:s + n]).view(np.uint8), want[s:s + n].view(np.uint8)), \
            f"rows {s}..{s + n}"
    for name in want.dtype.names:
        assert np.array_equal(got[name].sum(axis=0), want[name].sum(axis=0)), name
    assert np.array_equal(np.asarray(got).view(np.uint8), want.view(np.uint8)), "rows differ"
    print("ok")


def edit(store):
    import blosc2

    t = blosc2.CTable.open(store, mode="a")
    t.delete([1, 2, 10])
    t.extend(rows(20000, 3))
    t.close()


def check(npy, store, group):
    got = np.load(npy, mmap_mode="r")
    t, ts = open_table(store, group)
    want = np.asarray(t)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.array_equal(np.asarray(got).view(np.uint8), want.view(np.uint8)), "rows differ"
    del t
    if ts is not None:
        ts.close()
    print("ok")


def main():
    cmd = sys.argv[1]
    if cmd == "gen":
        gen(sys.argv[2])
    elif cmd == "bigmask":
        bigmask(sys.argv[2])
    elif cmd == "zeromask":
        zeromask(sys.argv[2])
    elif cmd == "edit":
        edit(sys.argv[2])
    elif cmd == "scan":
        scan(sys.argv[2])
    elif cmd == "mapcheck":
        mapcheck(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
