"""New arrays through the Zarr view of a read-write mount of a directory of sources
(tests/it/zarr_readers/create.rs, docs/ZARR.md "New arrays"): zarr-python's create_array
and xarray's to_zarr(mode="a") with new variables write them, readers that open the view
afresh read them back; python-blosc2 (the reference venv) reads the new files.

    zarr_create.py gen DIR              python-blosc2: DIR/a.b2nd (int32 4x5)    [.venv]
    zarr_create.py zarr MNT OUT.npz     zarr-python: t2 made and written          [.venv-zarr]
    zarr_create.py xarray MNT OUT.npz   xarray: new variables v, w, read back     [.venv-zarr]
    zarr_create.py slow MNT             zarr-python: t3, one chunk at a time      [.venv-zarr]
    zarr_create.py nested MNT OUT.npz   nested new groups: create_array("n/b/c"),
                                        create_group("g").create_array("h"),
                                        xarray's to_zarr(group="x/y")            [.venv-zarr]
    zarr_create.py check DIR OUT.npz    python-blosc2 reads each new file as OUT  [.venv]
    zarr_create.py crashed DIR          what a crash left: none, or a whole t3    [.venv]
"""

import json
import os
import sys

import numpy as np


def gen(d):
    import blosc2

    blosc2.asarray(np.arange(20, dtype=np.int32).reshape(4, 5), urlpath=f"{d}/a.b2nd", mode="w")
    print("ok")


def with_zarr(mnt, out):
    import zarr

    g = zarr.open_group(f"{mnt}/zarr", mode="a")
    want = (np.arange(60, dtype=np.int32).reshape(10, 6) * 7) - 100
    a = g.create_array("t2", shape=(10, 6), chunks=(4, 3), dtype="int32", attributes={"units": "m"})
    a[:] = want
    a[0:4, 0:3] = 0  # all fill value: zarr-python removes the chunk object
    want[0:4, 0:3] = 0
    # A fresh handle reads the view's own metadata (bytes codec).
    b = zarr.open_array(f"{mnt}/zarr/t2", mode="r")
    assert np.array_equal(b[...], want), "zarr-python reads back other values"
    assert b.attrs["units"] == "m"
    # The other compressors decoded: blosc, gzip.
    from zarr.codecs import BloscCodec, GzipCodec

    more = {}
    for name, comp in [("bl", BloscCodec()), ("gz", GzipCodec())]:
        more[name] = np.arange(1000, dtype="float32").reshape(20, 50) / 7
        c = g.create_array(name, shape=(20, 50), chunks=(8, 16), dtype="float32", compressors=[comp])
        c[:] = more[name]
        back = zarr.open_array(f"{mnt}/zarr/{name}", mode="r")[...]
        assert np.array_equal(back, more[name]), name
    # A codec the view cannot keep (crc32c): refused (EPERM), nothing made in the source.
    from zarr.codecs import Crc32cCodec

    try:
        g.create_array("cr", shape=(4,), chunks=(2,), dtype="int8", compressors=[Crc32cCodec()])
        raise AssertionError("an array with crc32c was made")
    except PermissionError:
        pass
    np.savez(out, t2=want, **more)
    print("ok", len(b.metadata.codecs))


def with_xarray(mnt, out):
    import xarray as xr

    rng = np.random.default_rng(5)
    v = rng.random((10, 6))
    v[2, 3] = np.nan
    ds = xr.Dataset(
        {
            "v": (("x", "y"), v, {"units": "K"}),
            "w": (("x",), np.arange(10, dtype="int16")),
        }
    )
    ds = ds.chunk({"x": 5})
    ds.to_zarr(f"{mnt}/zarr", mode="a", zarr_format=3, consolidated=True)
    back = xr.open_zarr(f"{mnt}/zarr")
    assert np.array_equal(back["v"].values, v, equal_nan=True), "v differs"
    assert np.array_equal(back["w"].values, ds["w"].values), "w differs"
    assert back["v"].dims == ("x", "y"), back["v"].dims
    assert back["v"].attrs["units"] == "K"
    # A new group (a subdirectory) with a variable of its own.
    q = xr.Dataset({"q": (("t",), np.arange(4.0) / 3)})
    q.to_zarr(f"{mnt}/zarr", group="g2", mode="a", zarr_format=3, consolidated=True)
    got = xr.open_zarr(f"{mnt}/zarr", group="g2")["q"].values
    assert np.array_equal(got, q["q"].values), "g2/q differs"
    np.savez(out, v=v, w=ds["w"].values, **{"g2/q": q["q"].values})
    print("ok", back["v"].dims == ("x", "y"), back["w"].dims == ("x",))


def slow(mnt):
    import zarr

    g = zarr.open_group(f"{mnt}/zarr", mode="a")
    a = g.create_array("t3", shape=(64, 64), chunks=(8, 64), dtype="float64", fill_value=np.nan)
    print("created", flush=True)
    for i in range(8):
        a[i * 8 : (i + 1) * 8] = i + 1.0


def nested(mnt, out):
    import xarray as xr
    import zarr

    g = zarr.open_group(f"{mnt}/zarr", mode="a")
    want = np.arange(12, dtype="int32").reshape(3, 4) - 5
    # zarr-python makes n, n/b, n/b/c, then writes the zarr.json of the array and of its
    # parents concurrently (theirs by link, "set if not exists").
    a = g.create_array("n/b/c", shape=(3, 4), chunks=(2, 2), dtype="int32")
    a[:] = want
    h = g.create_group("g").create_array("h", shape=(5,), chunks=(5,), dtype="float32", fill_value=1.5)
    hv = np.full(5, 1.5, "float32")
    hv[1] = 7.0
    h[:] = hv  # whole chunks: this handle decodes with its own codecs (docs/ZARR.md)
    q = xr.Dataset({"q": (("t",), np.arange(4.0) / 3)})
    q.to_zarr(f"{mnt}/zarr", group="x/y", mode="a", zarr_format=3, consolidated=True)
    back = zarr.open_array(f"{mnt}/zarr/n/b/c", mode="r")[...]
    assert np.array_equal(back, want), "n/b/c differs"
    assert np.array_equal(zarr.open_array(f"{mnt}/zarr/g/h", mode="r")[...], hv), "g/h differs"
    got = xr.open_zarr(f"{mnt}/zarr", group="x/y")["q"].values
    assert np.array_equal(got, q["q"].values), "x/y/q differs"
    np.savez(out, **{"n/b/c": want, "g/h": hv, "x/y/q": q["q"].values})
    print("ok")


def check(d, out):
    import blosc2

    want = np.load(out)
    seen = {}
    for name in want.files:
        a = blosc2.open(f"{d}/{name}.b2nd")
        got = a[...]
        same = got.shape == want[name].shape and np.array_equal(got, want[name], equal_nan=True)
        seen[name] = [same, str(a.dtype), list(a.chunks), sorted(a.vlmeta.getall())]
    print(json.dumps(seen, sort_keys=True))


def crashed(d):
    import blosc2

    names = sorted(n for n in os.listdir(d) if not n.startswith(".b2fs-"))
    if "t3.b2nd" not in names:
        print("absent", names)
        return
    a = blosc2.open(f"{d}/t3.b2nd")
    v = a[...]
    assert a.shape == (64, 64) and a.chunks == (8, 64), (a.shape, a.chunks)
    # Every chunk is the fill value (NaN) or the whole row block its writer wrote.
    for i in range(8):
        block = v[i * 8 : (i + 1) * 8]
        assert np.isnan(block).all() or (block == i + 1.0).all(), i
    print("whole", names)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {
        "gen": gen,
        "zarr": with_zarr,
        "xarray": with_xarray,
        "slow": slow,
        "nested": nested,
        "check": check,
        "crashed": crashed,
    }[cmd](*args)


if __name__ == "__main__":
    main()
