"""Strict JSON readers and writers against a mount's `zarr/` view with `-o zarr_strict_json` or
without it (tests/it/zarr_readers/strict.rs; docs/ZARR.md, "Strict JSON"). Runs in .venv-zarr
(zarr-python 3.4, xarray, TensorStore).

    zarr_strict.py read MNT NAME          the 2-D float64 array NAME (6 x 10, item i holding i):
                                          how many of the view's zarr.json a strict JSON
                                          parser reads ("docs OK ALL"), then TensorStore's
                                          zarr3 driver (values and attributes, or "tensorstore
                                          refused ..."), zarr-python and xarray; one line each
    zarr_strict.py write MNT NAME UNITS   a strict JSON writer (as JavaScript's): reads NAME's
                                          zarr.json strictly, sets attribute "units", writes it
                                          back with allow_nan=False through a temp file renamed
                                          over it; prints "written"
"""

import json
import os
import sys

import numpy as np


def no_constants(token):
    """`parse_constant` of a strict JSON parser: NaN, Infinity and -Infinity are errors."""
    raise ValueError(f"not strict JSON: {token}")


def read(mnt, name):
    """Readers of array `name` (6 x 10 float64, item i holding i) whose attributes hold NaN
    and infinities: strict JSON parses of every zarr.json, then TensorStore, zarr-python and
    xarray. Prints one line each (attributes as sorted JSON: a float NaN as NaN, a string as
    "NaN")."""
    import tensorstore as ts
    import xarray as xr
    import zarr

    root = f"{mnt}/zarr"
    ref = np.arange(60, dtype="f8").reshape(6, 10)
    docs = ok = 0
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x != "c"]  # chunk trees
        if "zarr.json" in files:
            docs += 1
            try:
                json.loads(open(os.path.join(d, "zarr.json")).read(), parse_constant=no_constants)
                ok += 1
            except ValueError:
                pass
    print("docs", ok, docs)
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": f"{root}/{name}/"}}
    try:
        t = ts.open(spec, read=True).result()
        attrs = t.spec().to_json()["metadata"]["attributes"]
        same = bool((t.read().result() == ref).all())
        print("tensorstore", same, json.dumps(attrs, sort_keys=True))
    except Exception as e:  # noqa: BLE001
        print("tensorstore refused", "Invalid JSON" in str(e))
    z = zarr.open_array(f"{root}/{name}", mode="r")
    print("zarr", bool((z[...] == ref).all()), json.dumps(dict(z.attrs), sort_keys=True))
    v = xr.open_zarr(root)[name]
    print("xarray", bool((v.values == ref).all()), json.dumps(dict(v.attrs), sort_keys=True))


def write(mnt, name, units):
    """A strict JSON writer sets attribute "units" of array `name` through its zarr.json (a
    temp file renamed over it, as zarr-python writes metadata). Prints "written"."""
    path = f"{mnt}/zarr/{name}/zarr.json"
    doc = json.loads(open(path).read(), parse_constant=no_constants)
    doc["attributes"]["units"] = units
    tmp = f"{path}.strict.partial"
    with open(tmp, "w") as f:
        f.write(json.dumps(doc, allow_nan=False))
    os.replace(tmp, path)
    print("written")


def main():
    cmd = sys.argv[1]
    if cmd == "read":
        read(*sys.argv[2:4])
    elif cmd == "write":
        write(*sys.argv[2:5])
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
