"""A directory of sources, one `.b2nd` file per variable, read and written by xarray through
the Zarr view (tests/it/zarr_readers/dirs.rs; docs/ZARR.md, "Layout").

    zarr_dirs.py gen DIR          (python-blosc2's venv) writes `temp.b2nd` (float32, time x
                                  lat x lon, "units": "K"), `precip.b2nd` (int64, same
                                  dimensions, other chunks) and `time.b2nd` (float64 days, CF
                                  "units"), each with xarray's `_ARRAY_DIMENSIONS`
    zarr_dirs.py read MNT [VIEW]  (a Zarr venv) `xr.open_zarr(MNT/zarr)`: prints the data
                                  variables, the coordinates with their dtype, and
                                  `temp.sum()`, `precip.sum()`, `time[3]` as xarray decodes it;
                                  VIEW `zarr2`: the Zarr v2 view (zarr-python 2.18's venv, or
                                  `zarr_format=2` with zarr-python 3)
    zarr_dirs.py write MNT        (a Zarr venv) adds 1 to `temp` for the first 30 times with
                                  `to_zarr(region=...)`
    zarr_dirs.py append MNT       (a Zarr venv) appends 10 days to the dataset with
                                  `to_zarr(append_dim="time")`: `temp` 7.0, `precip` 3 and the
                                  dates after the last one, in the coordinate's own encoding
    zarr_dirs.py check DIR        (python-blosc2's venv) prints `temp.sum()` as python-blosc2
                                  reads `DIR/temp.b2nd`, and its first item
    zarr_dirs.py shapes DIR       (python-blosc2's venv) prints each file's shape and last item
"""

import sys

import numpy as np

SHAPE = (120, 50, 40)
DIMS = ["time", "lat", "lon"]


def gen(d):
    import blosc2

    t = np.linspace(250, 300, np.prod(SHAPE)).reshape(SHAPE).astype("f4")
    a = blosc2.asarray(t, chunks=(30, 50, 40), urlpath=f"{d}/temp.b2nd", mode="w")
    a.vlmeta["units"] = "K"
    a.vlmeta["_ARRAY_DIMENSIONS"] = DIMS
    p = np.arange(np.prod(SHAPE), dtype="i8").reshape(SHAPE) % 1000
    p = blosc2.asarray(p, chunks=(60, 25, 40), urlpath=f"{d}/precip.b2nd", mode="w")
    p.vlmeta["_ARRAY_DIMENSIONS"] = DIMS
    tm = blosc2.asarray(np.arange(SHAPE[0], dtype="f8"), urlpath=f"{d}/time.b2nd", mode="w")
    tm.vlmeta["_ARRAY_DIMENSIONS"] = ["time"]
    tm.vlmeta["units"] = "days since 2000-01-01"


def read(mnt, view="zarr"):
    import xarray as xr
    import zarr

    kw = {}
    if view == "zarr2" and int(zarr.__version__.split(".")[0]) >= 3:
        kw["zarr_format"] = 2
    ds = xr.open_zarr(f"{mnt}/{view}", **kw)
    print("vars", sorted(ds.data_vars))
    print("coords", sorted(f"{k}:{v.dtype}" for k, v in ds.coords.items()))
    print("temp", float(ds.temp.astype("f8").sum()))
    print("precip", int(ds.precip.sum()))
    print("time3", str(ds.time.values[3])[:10])


def write(mnt):
    import xarray as xr

    ds = xr.open_zarr(f"{mnt}/zarr")
    sub = ds[["temp"]].isel(time=slice(0, 30)).drop_vars("time")
    sub["temp"] = sub.temp + 1
    sub.to_zarr(f"{mnt}/zarr", region={"time": slice(0, 30)}, mode="r+")


def append(mnt):
    import pandas as pd
    import xarray as xr

    ds = xr.open_zarr(f"{mnt}/zarr")
    n = 10
    more = xr.Dataset(
        {
            "temp": (DIMS, np.full((n,) + SHAPE[1:], 7, "f4")),
            "precip": (DIMS, np.full((n,) + SHAPE[1:], 3, "i8")),
        },
        coords={"time": pd.date_range(ds.time.values[-1], periods=n + 1)[1:]},
    )
    more.time.encoding = ds.time.encoding
    more.to_zarr(f"{mnt}/zarr", append_dim="time", mode="a")


def shapes(d):
    import blosc2

    for name in ("temp", "precip", "time"):
        a = blosc2.open(f"{d}/{name}.b2nd")
        last = a[-1] if a.ndim == 1 else a[-1, 0, 0]
        print(name, list(a.shape), float(last))


def check(d):
    import blosc2

    a = blosc2.open(f"{d}/temp.b2nd")[...]
    print(float(a.astype("f8").sum()), float(a[0, 0, 0]))


if __name__ == "__main__":
    cmds = {"gen": gen, "read": read, "write": write, "append": append, "check": check}
    cmds["shapes"] = shapes
    cmds[sys.argv[1]](*sys.argv[2:])
