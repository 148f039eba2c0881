"""`_FillValue` attributes through the Zarr view, against xarray on a plain Zarr store
(tests/it/zarr_readers/fill.rs; docs/ZARR.md, "Attributes").

    zarr_fill.py gen OUT          (python-blosc2's venv) a `.b2z` whose arrays hold the CF
                                  `_FillValue` attribute in their vlmeta, as plain numbers
    zarr_fill.py read MNT SRC     (a Zarr venv with xarray and python-blosc2) xarray opens the
                                  view of the mount MNT of SRC, and a plain Zarr store written
                                  by xarray with the same data and attributes; prints one line
                                  per array: name, whether both mask the same items to NaN and
                                  agree with python-blosc2's values elsewhere, how many masked
    zarr_fill.py edit MNT         (a Zarr venv) rewrites `t`'s zarr.json unchanged (temp file +
                                  rename), then zarr-python sets a new `_FillValue` on `d` in
                                  xarray's spelling and a new "units" on `t`; prints what a
                                  fresh xarray reader sees
    zarr_fill.py check SRC [NAME...]  (python-blosc2's venv) prints the vlmeta as
                                  python-blosc2 reads it, as JSON (of `NAMES`, or the names)
    zarr_fill.py gen-odd OUT      (python-blosc2's venv) a `.b2z` whose float arrays hold a
                                  `_FillValue` xarray cannot read: a number-like string
                                  (`s`: "-9999"), a bool (`b`: true), another string (`x`)
    zarr_fill.py read-odd MNT SRC (a Zarr venv) for each odd value, whether xarray opens a
                                  plain Zarr store zarr-python wrote with that attribute; then
                                  xarray opens the view and prints per array: whether it
                                  masks what xarray masks on a plain store it wrote itself
                                  (`s`: the value -9999.0 in the encoding; `b`, `x`: none)
                                  with python-blosc2's values elsewhere, how many masked, and
                                  whether the view's zarr.json holds a `_FillValue`
    zarr_fill.py edit-odd MNT     (a Zarr venv) rewrites `s`'s zarr.json unchanged and sets a
                                  new "units" on `b` and `s` through zarr-python
"""

import json
import os
import sys
import tempfile

import numpy as np

NAMES = ("t", "d", "n", "h")


def data():
    """The arrays (6, 10): float32 with -9999 at every 7th item, float64 with -9999 at every
    5th, int16 with -1 at every 4th, float16 with -9999.9 (-10000 in float16) at every 6th;
    and the `_FillValue` each holds (float16's -9999.9, which float16 cannot hold: xarray's
    encoder rounds it to the data's type)."""
    base = np.arange(60).reshape(6, 10)
    t = base.astype("f4") + 0.5
    t.flat[::7] = -9999.0
    d = base.astype("f8") * 2
    d.flat[::5] = -9999.0
    n = base.astype("i2")
    n.flat[::4] = -1
    h = base.astype("f2") / 4
    h.flat[::6] = -9999.9
    # `d`'s is an integer: python-blosc2 users store them so too.
    return {"t": (t, -9999.0), "d": (d, -9999), "n": (n, -1), "h": (h, -9999.9)}


def gen(out):
    import blosc2

    with blosc2.TreeStore(out, mode="w") as ts:
        for name, (values, fill) in data().items():
            a = blosc2.asarray(values, chunks=(3, 10))
            a.vlmeta["_FillValue"] = fill
            a.vlmeta["_ARRAY_DIMENSIONS"] = ["y", "x"]
            a.vlmeta["units"] = "K"
            ts[f"/{name}"] = a


def check(src, names=NAMES):
    import blosc2

    with blosc2.TreeStore(src, mode="r") as ts:
        arrays = {name: ts[f"/{name}"] for name in names}
        print(json.dumps({name: dict(a.vlmeta) for name, a in arrays.items()}, sort_keys=True))


def read(mnt, src):
    import blosc2
    import xarray as xr

    view = xr.open_zarr(f"{mnt}/zarr")
    with blosc2.TreeStore(src, mode="r") as ts:
        # Each array held while its vlmeta is read (a temporary's vlmeta outlives it).
        arrays = {name: ts[f"/{name}"] for name in NAMES}
        raw = {name: a[...] for name, a in arrays.items()}
        fills = {name: a.vlmeta["_FillValue"] for name, a in arrays.items()}
    with tempfile.TemporaryDirectory() as tmp:
        ref_path = os.path.join(tmp, "ref.zarr")
        # `_FillValue` in the encoding, as xarray carries it for a dataset it read (from
        # netCDF, say) and writes again: its encoder casts the value to the data's type
        # (`dtype.type(v)`). Given in `attrs` instead it is written uncast, and xarray itself
        # then masks nothing when the type cannot hold it (float16's -9999.9).
        variables = {}
        for name in NAMES:
            variables[name] = xr.Variable(("y", "x"), raw[name], attrs={"units": "K"})
            variables[name].encoding["_FillValue"] = fills[name]
        ref = xr.Dataset(variables)
        ref.to_zarr(ref_path, zarr_format=3, mode="w")
        plain = xr.open_zarr(ref_path).load()
        for name in NAMES:
            got = view[name].values
            want = plain[name].values
            mask = raw[name] == np.asarray(fills[name]).astype(raw[name].dtype)
            same = (got.dtype == want.dtype and got.shape == want.shape
                    and bool(np.array_equal(np.isnan(got), np.isnan(want)))
                    and bool(np.array_equal(got[~mask], want[~mask]))
                    and bool(np.array_equal(got[~mask], raw[name][~mask]))
                    and bool(np.isnan(got[mask]).all()))
            enc = view[name].encoding.get("_FillValue", plain[name].encoding.get("_FillValue"))
            print(name, same, int(mask.sum()), enc == plain[name].encoding.get("_FillValue"))


def rewrite_unchanged(path):
    """A zarr.json read and written back as it is, the way Zarr writers replace it."""
    with open(path, "rb") as f:
        doc = f.read()
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(doc)
    os.replace(tmp, path)


def edit(mnt):
    import xarray as xr
    import zarr
    from xarray.backends.zarr import FillValueCoder

    root = f"{mnt}/zarr"
    rewrite_unchanged(f"{root}/t/zarr.json")
    # A new `_FillValue` in xarray's own spelling (its encoder), and a new "units" (the
    # document written back holds `_FillValue` as the view showed it).
    d = zarr.open_array(f"{root}/d", mode="r+")
    d.attrs["_FillValue"] = FillValueCoder.encode(-1.5, d.dtype)
    zarr.open_array(f"{root}/t", mode="r+").attrs["units"] = "degC"
    again = xr.open_zarr(root)
    print(json.dumps({name: [again[name].encoding.get("_FillValue"), again[name].attrs["units"],
                             int(np.isnan(again[name].values).sum())]
                      for name in ("d", "t")}, sort_keys=True))


ODD = {"s": ("f8", "-9999"), "b": ("f4", True), "x": ("f8", "missing")}


def odd_data():
    """The odd arrays (6, 10), -9999 at every 5th item, and the `_FillValue` each holds."""
    out = {}
    for name, (dtype, fill) in ODD.items():
        values = np.arange(60).reshape(6, 10).astype(dtype) * 2
        values.flat[::5] = -9999.0
        out[name] = (values, fill)
    return out


def gen_odd(out):
    import blosc2

    with blosc2.TreeStore(out, mode="w") as ts:
        for name, (values, fill) in odd_data().items():
            a = blosc2.asarray(values, chunks=(3, 10))
            a.vlmeta["_FillValue"] = fill
            a.vlmeta["_ARRAY_DIMENSIONS"] = ["y", "x"]
            a.vlmeta["units"] = "K"
            ts[f"/{name}"] = a


def read_odd(mnt, src):
    import blosc2
    import xarray as xr
    import zarr

    data = odd_data()
    with tempfile.TemporaryDirectory() as tmp:
        for name, (values, fill) in data.items():
            path = os.path.join(tmp, f"plain-{name}.zarr")
            g = zarr.open_group(path, mode="w", zarr_format=3)
            a = g.create_array(name, shape=values.shape, dtype=values.dtype,
                               dimension_names=["y", "x"])
            a[...] = values
            a.attrs["_FillValue"] = fill
            try:
                xr.open_zarr(path, consolidated=False)
                print("plain", name, "opens")
            except Exception as e:
                print("plain", name, "fails:", type(e).__name__, str(e)[:80].replace("\n", " "))
        view = xr.open_zarr(f"{mnt}/zarr")
        with blosc2.TreeStore(src, mode="r") as ts:
            raw = {name: ts[f"/{name}"][...] for name in ODD}
        ref_path = os.path.join(tmp, "ref.zarr")
        variables = {}
        for name in ODD:
            variables[name] = xr.Variable(("y", "x"), raw[name], attrs={"units": "K"})
        variables["s"].encoding["_FillValue"] = float(ODD["s"][1])
        xr.Dataset(variables).to_zarr(ref_path, zarr_format=3, mode="w")
        plain = xr.open_zarr(ref_path).load()
        for name in ODD:
            got = view[name].values
            want = plain[name].values
            nan = np.isnan(got)
            same = (got.dtype == want.dtype
                    and bool(np.array_equal(nan, np.isnan(want)))
                    and bool(np.array_equal(got[~nan], raw[name][~nan])))
            with open(f"{mnt}/zarr/{name}/zarr.json") as f:
                held = "_FillValue" in json.load(f)["attributes"]
            print(name, same, int(nan.sum()), held)


def edit_odd(mnt):
    import zarr

    root = f"{mnt}/zarr"
    rewrite_unchanged(f"{root}/s/zarr.json")
    for name in ("b", "s"):
        zarr.open_array(f"{root}/{name}", mode="r+").attrs["units"] = "degC"


def main():
    cmd = sys.argv[1]
    if cmd == "gen":
        gen(sys.argv[2])
    elif cmd == "check":
        check(sys.argv[2], tuple(sys.argv[3:]) or NAMES)
    elif cmd == "gen-odd":
        gen_odd(sys.argv[2])
    elif cmd == "read-odd":
        read_odd(sys.argv[2], sys.argv[3])
    elif cmd == "edit-odd":
        edit_odd(sys.argv[2])
    elif cmd == "read":
        read(sys.argv[2], sys.argv[3])
    elif cmd == "edit":
        edit(sys.argv[2])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
