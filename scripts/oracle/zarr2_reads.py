"""The Zarr v2 view (`zarr2/`, docs/ZARR.md "Zarr v2 view") of real mounts read by the users'
v2 readers (tests/it/zarr_readers/v2.rs), against the reference .npy files python-blosc2 and
bcolz read (every case of zarr_cases.py gen). Runs in .venv-zarr2 (Python 3.10: zarr-python
2.18, xarray 2025.6 on it) or .venv-zarr (zarr-python 3.4 and xarray told `zarr_format=2`).

    zarr2_reads.py read CASES.json READERS   every case (with "mnt" added: where its source is
                                             mounted) through the readers (comma-separated:
                                             zarr, xarray); prints one JSON summary; exit 1 on
                                             a problem
    zarr2_reads.py readonly MNT NAME         zarr-python's writes to MNT/zarr2/NAME (a chunk,
                                             the whole array, an attribute) on a read-write
                                             mount fail with EROFS and change nothing; prints
                                             "refused N"

zarr: the layout as stored (`.zmetadata`, `.zarray` members, chunk objects of the full chunk
size), `zarr.open_consolidated` of the root and of every group by its own path,
`zarr.open_group` without consolidated metadata, `zarr.open_array` of each array's directory:
shapes, chunks, values (whole and windows), attributes, `_ARRAY_DIMENSIONS`. xarray:
`open_zarr(..., consolidated=True)` of every group (by `group=` and by its path, with a
RuntimeWarning an error: no fallback to listing), values, dims, attributes, preferred chunks.
"""

import errno
import json
import os
import sys

import numpy as np

from zarr_reads import ViewChecker, check_cases, corner_chunks, load_ref, same_values, without_dims


def zarr_major():
    import zarr

    return int(zarr.__version__.split(".")[0])


def v2_kw():
    """What zarr-python 3 and xarray on it need to read v2 (nothing under zarr-python 2)."""
    return {"zarr_format": 2} if zarr_major() >= 3 else {}


class Checker(ViewChecker):
    """The checks of the v2 view `zarr2/` (xarray's are `ViewChecker.xarray`, told
    `zarr_format=2` under zarr-python 3)."""

    view = "zarr2"

    def open_kw(self):
        return v2_kw()

    # -- the hierarchy's JSON as stored --------------------------------------------------------

    def layout(self, case):
        root = self.root(case)
        if os.path.exists(os.path.join(root, "zarr.json")):
            self.bad(case, "zarr2/zarr.json exists (a v3 document in the v2 view)")
        try:
            with open(os.path.join(root, ".zmetadata")) as f:
                cm = json.load(f)
        except Exception as e:  # noqa: BLE001
            self.bad(case, f"root .zmetadata: {e}")
            return False
        if cm.get("zarr_consolidated_format") != 1:
            self.bad(case, f".zmetadata format {cm.get('zarr_consolidated_format')}")
        md = cm.get("metadata") or {}
        if md.get(".zgroup") != {"zarr_format": 2}:
            self.bad(case, f".zmetadata .zgroup {md.get('.zgroup')}")
        for path, a in case["arrays"].items():
            z = md.get(f"{path}/.zarray")
            if z is None:
                if a["portable"]:
                    self.bad(case, f"{path}/.zarray missing from .zmetadata")
                continue
            ref = np.load(a["npy"], mmap_mode="r")
            want = {"zarr_format": 2, "compressor": None, "filters": None, "fill_value": None,
                    "order": "C", "dimension_separator": ".", "chunks": a["chunks"]}
            for k, v in want.items():
                if z.get(k) != v:
                    self.bad(case, f"{path}/.zarray {k} {z.get(k)!r} != {v!r}")
            if not a["raw"] and z.get("dtype") != ref.dtype.str:
                self.bad(case, f"{path}/.zarray dtype {z.get('dtype')} != {ref.dtype.str}")
            attrs = md.get(f"{path}/.zattrs") or {}
            dims = attrs.get("_ARRAY_DIMENSIONS")
            if not isinstance(dims, list) or (not a["raw"] and len(dims) != ref.ndim):
                self.bad(case, f"{path}: _ARRAY_DIMENSIONS {dims}")
            elif a["dims"] is not None and dims != a["dims"]:
                self.bad(case, f"{path}: _ARRAY_DIMENSIONS {dims} != {a['dims']}")
            # Every chunk object padded to the full chunk shape, its size exact in stat; keys
            # with "." ("0" for a 0-d array).
            item = ref.dtype.itemsize if not a["raw"] else 1
            full = int(np.prod(z["chunks"])) * item
            keys = corner_chunks(z["shape"], z["chunks"])
            names = [".".join(map(str, key)) or "0" for key in keys]
            self.chunk_sizes(case, path, [(n, os.path.join(root, path, n)) for n in names], full)
        for gp in case["groups"]:
            if gp and md.get(f"{gp}/.zgroup") != {"zarr_format": 2}:
                self.bad(case, f"group {gp} missing from .zmetadata")
        return True

    # -- zarr-python ---------------------------------------------------------------------------

    def zarr(self, case):
        import zarr

        root = self.root(case)
        kw = v2_kw()
        g = zarr.open_consolidated(root, mode="r", **kw)
        plain = zarr.open_group(root, mode="r", **kw)
        for gp, attrs in case["groups"].items():
            grp = g[gp] if gp else g
            if dict(grp.attrs) != attrs:
                self.bad(case, f"group {gp!r} attrs {dict(grp.attrs)} != {attrs}")
            if gp:
                # Every group has a .zmetadata of what is below it, keyed from it.
                own = zarr.open_consolidated(os.path.join(root, gp), mode="r", **kw)
                if sorted(own.array_keys()) != sorted(grp.array_keys()):
                    self.bad(case, f"group {gp!r} by its path: arrays {sorted(own.array_keys())}"
                                   f" != {sorted(grp.array_keys())}")
        for path, a in case["arrays"].items():
            z = self.member(case, g, path, a)
            if z is None:
                continue
            ref = load_ref(a)
            # Without consolidated metadata: each .zarray read on its own.
            own = zarr.open_array(os.path.join(root, path), mode="r", **kw)
            for zz, how in ((z, "consolidated"), (plain[path], "open_group"), (own, "open_array")):
                if tuple(zz.shape) != ref.shape and not a["raw"]:
                    self.bad(case, f"zarr {how}: {path} shape {zz.shape} != {ref.shape}")
                if list(zz.chunks) != a["chunks"]:
                    self.bad(case, f"zarr {how}: {path} chunks {zz.chunks} != {a['chunks']}")
                if zz.fill_value is not None:
                    self.bad(case, f"zarr {how}: {path} fill_value {zz.fill_value!r}")
            got = own[...]
            if not same_values(got, ref, a["raw"]) or not same_values(z[...], ref, a["raw"]):
                self.bad(case, f"zarr: {path} values differ ({got.dtype} vs {ref.dtype})")
                continue
            if not a["raw"]:
                self.same_windows(case, path, z, ref)
            attrs = dict(z.attrs)
            if without_dims(attrs) != without_dims(a["attrs"]):
                self.bad(case, f"zarr: {path} attrs {attrs} != {a['attrs']}")
            self.count("zarr")


def read(cases_path, readers):
    def versions():
        import xarray
        import zarr

        return {"zarr": zarr.__version__, "xarray": xarray.__version__}

    check_cases(Checker(), cases_path, readers, versions)


def is_erofs(e):
    while e is not None:
        if isinstance(e, OSError) and e.errno == errno.EROFS:
            return True
        e = e.__cause__ or e.__context__
    return False


def readonly(mnt, name):
    import zarr

    path = os.path.join(mnt, "zarr2", name)
    kw = v2_kw()
    z = zarr.open_array(path, mode="r+", **kw)
    before = z[...]
    writes = [
        lambda: z.__setitem__(tuple(slice(0, 1) for _ in z.shape), 7),
        lambda: z.__setitem__(Ellipsis, 7),
        lambda: z.attrs.__setitem__("x", 1),
    ]
    refused = 0
    for w in writes:
        try:
            w()
        except Exception as e:  # noqa: BLE001
            if not is_erofs(e):
                raise
            refused += 1
    after = zarr.open_array(path, mode="r", **kw)
    assert np.array_equal(after[...], before), "the array changed"
    assert "x" not in after.attrs, "the attributes changed"
    print("refused", refused)


def main():
    cmd = sys.argv[1]
    if cmd == "read":
        read(sys.argv[2], sys.argv[3].split(","))
    elif cmd == "readonly":
        readonly(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
