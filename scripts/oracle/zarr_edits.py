"""The metadata edits of scripts/oracle/zarr_readers.py through a mount's `zarr/` view:
attributes of arrays and groups set by zarr-python and xarray (`attrs`, NaN and infinities:
`nanattrs`) and resizes along the first dimension (zarr-python's `append` and `resize`,
xarray's `append_dim`: `append`, `append3d`), each read back by a fresh reader.
"""

import json

import numpy as np


def attrs(mnt):
    """Attribute edits of zarr-python and xarray through the view of `attrgen`'s store:
    an array's, a group's (one without attributes before too) and the root group's
    attributes change; a resize of an axis but the first is refused and changes nothing. Prints one line per
    outcome."""
    import xarray as xr
    import zarr

    root = f"{mnt}/zarr"
    g = zarr.open_group(root, mode="r+")
    g.attrs["title"] = "edited"
    g["ocean/sst"].attrs.update({"units": "degC", "scale": [1, 2.5]})
    print("array ok")
    ds = xr.open_zarr(f"{root}/ocean")
    ds.attrs["history"] = "xarray"
    ds.to_zarr(f"{root}/ocean", mode="a")
    print("xarray ok", json.dumps(xr.open_zarr(f"{root}/ocean").attrs, sort_keys=True))
    try:
        zarr.open_array(f"{root}/ocean/sst", mode="r+").resize((6, 12))
        print("resize accepted")
    except PermissionError:
        print("resize refused")
    # A group that never had attributes (no carrier in the store): python-blosc2's way,
    # a carrier made for it.
    zarr.open_group(f"{root}/atm", mode="r+").attrs["x"] = 1
    print("no carrier ok")
    # A rewrite of the consolidated metadata (the view makes its own): accepted, no change.
    zarr.consolidate_metadata(root)
    # What a fresh reader of the view sees.
    again = zarr.open_group(root, mode="r")
    print("view", json.dumps({"/": dict(again.attrs), "/ocean/sst": dict(again["ocean/sst"].attrs)},
                             sort_keys=True))


def append(mnt, name):
    """Resizes through the view of a 1-D array whose item i holds i: zarr-python's `append`
    (300 items, across chunks), xarray's `append_dim` (50 more), then `resize` to 1,200; a
    fresh reader of each sees the new length and values. Prints one line per step."""
    import xarray as xr
    import zarr

    root = f"{mnt}/zarr"
    z = zarr.open_array(f"{root}/{name}", mode="r+")
    n = z.shape[0]
    z.append(np.arange(n, n + 300, dtype=np.float64))
    again = zarr.open_array(f"{root}/{name}", mode="r")
    print("append", again.shape[0], bool((again[...] == np.arange(n + 300)).all()))
    n += 300
    new = xr.Dataset({name: ("time", np.arange(n, n + 50, dtype=np.float64))})
    new.to_zarr(root, append_dim="time")
    ds = xr.open_zarr(root)
    print("xarray", ds[name].shape[0], bool((ds[name].values == np.arange(n + 50)).all()))
    zarr.open_array(f"{root}/{name}", mode="r+").resize((1200,))
    again = zarr.open_array(f"{root}/{name}", mode="r")
    print("resize", again.shape[0], bool((again[...] == np.arange(1200)).all()))


def nanattrs(mnt, name):
    """NaN and infinite attributes set with zarr-python through the view of array `name`
    (zarr-python writes them bare: NaN, Infinity, -Infinity), read back by a fresh reader.
    Prints what it reads."""
    import math

    import zarr

    z = zarr.open_array(f"{mnt}/zarr/{name}", mode="r+")
    z.attrs["x"] = float("nan")
    z.attrs.update({"hot": float("inf"), "cold": float("-inf")})
    a = dict(zarr.open_array(f"{mnt}/zarr/{name}", mode="r").attrs)
    print("view", math.isnan(a["x"]), a["hot"], a["cold"], a["units"])


def append3d(mnt, name):
    """xarray appends 7 steps along `time` to the 3-D array NAME whose item i holds i (in C
    order); a fresh reader sees every step. Prints "xarray N True"."""
    import xarray as xr

    root = f"{mnt}/zarr"
    old = xr.open_zarr(root)[name]
    n, ny, nx = old.shape
    start = n * ny * nx
    new = np.arange(start, start + 7 * ny * nx, dtype=np.float32).reshape(7, ny, nx)
    xr.Dataset({name: (("time", "y", "x"), new)}).to_zarr(root, append_dim="time")
    got = xr.open_zarr(root)[name].values
    ref = np.arange((n + 7) * ny * nx, dtype=np.float32).reshape(n + 7, ny, nx)
    print("xarray", got.shape[0], bool((got == ref).all()))

