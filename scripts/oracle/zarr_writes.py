"""The chunk writes of scripts/oracle/zarr_readers.py through a mount's `zarr/` view:
zarr-python's `z[region] = v` and xarray's `to_zarr(region=...)` (`write`), TensorStore's
(`tswrite`), the same refused with EROFS on a read-only mount (`readonly`), and a whole-array
write to be killed midway (`crashwrite`). Each checks what it wrote reads back and, where a
test compares the source afterwards, saves what the array must now be.
"""

import errno
import os

import numpy as np


def write(mnt, name, expect):
    import zarr

    try:
        import xarray as xr
    except ImportError:  # the zarr 3.1 venv: zarr-python's writes only
        xr = None

    z = zarr.open_array(os.path.join(mnt, "zarr", name), mode="r+")
    want = z[...]
    assert want.ndim == 2, "the write test uses a 2-D array"
    # Regions by shard when the view shows the array sharded (`-o zarr_shards`).
    c0, c1 = z.shards or z.chunks
    step = 0

    def put(region, vals):
        nonlocal step
        step += 1
        z[region] = vals
        want[region] = vals
        got = zarr.open_array(os.path.join(mnt, "zarr", name), mode="r")[...]
        assert np.array_equal(got, want), f"write {step} ({region}) does not read back"

    n0, n1 = want.shape
    # A whole chunk (an inner one where there is one), part of chunk (0,0), a region across
    # chunks (four where the grid has two columns), the padded edge chunk.
    i, j = (1 if n0 >= 2 * c0 else 0), (1 if n1 >= 2 * c1 else 0)
    put((slice(i * c0, (i + 1) * c0), slice(j * c1, (j + 1) * c1)), np.full((c0, c1), 7, want.dtype))
    put((slice(1, 3), slice(2, 5)), np.arange(6, dtype=want.dtype).reshape(2, 3) - 100)
    r = (slice(c0 // 2, min(n0, c0 // 2 + c0 + 3)), slice(c1 // 2, min(n1, c1 // 2 + c1 + 5)))
    shape = (r[0].stop - r[0].start, r[1].stop - r[1].start)
    put(r, (np.arange(shape[0] * shape[1]) * 0.25).astype(want.dtype).reshape(shape))
    put((slice(n0 - 2, n0), slice(n1 - 3, n1)), np.full((2, 3), -1, want.dtype))
    if xr is None:
        np.save(expect, want)
        print("ok", step, *(["sharded"] if z.shards else []))
        return
    # xarray: a region of whole chunks along the first axis, part of a chunk along the second.
    ds = xr.open_zarr(os.path.join(mnt, "zarr"), consolidated=True)
    dims = ds[name].dims
    rows, cols = slice(0, c0), slice(1, min(n1, c1 + 4))
    vals = (np.arange(c0 * (cols.stop - 1)) + 0.5).astype(want.dtype).reshape(c0, -1)
    upd = xr.Dataset({name: (dims, vals)})
    upd.to_zarr(os.path.join(mnt, "zarr"), region={dims[0]: rows, dims[1]: cols}, mode="r+")
    want[rows, cols] = vals
    got = xr.open_zarr(os.path.join(mnt, "zarr"), consolidated=True)[name].values
    assert np.array_equal(got, want), "xarray region write does not read back"
    np.save(expect, want)
    print("ok", step + 1, *(["sharded"] if z.shards else []))


def tswrite(mnt, name, expect):
    """TensorStore writes through its file kvstore: a temp file (`KEY.__lock`, locked, written,
    fsynced) renamed over the object, its descriptor closed after the rename."""
    import tensorstore as ts

    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": os.path.join(mnt, "zarr", name) + "/"}}
    t = ts.open(spec, open=True).result()
    want = t[...].read().result()
    assert want.ndim == 2, "the write test uses a 2-D array"
    chunk = t.chunk_layout.write_chunk.shape
    n0, n1 = want.shape
    region = (slice(3, min(n0, chunk[0] + 9)), slice(2, min(n1, chunk[1] + 7)))
    shape = (region[0].stop - region[0].start, region[1].stop - region[1].start)
    vals = (np.arange(shape[0] * shape[1]) + 0.5).astype(want.dtype).reshape(shape)
    t[region].write(vals).result()
    want[region] = vals
    rows = slice(chunk[0], min(n0, 2 * chunk[0]))
    t[rows, :].write(np.zeros((rows.stop - rows.start, n1), want.dtype)).result()
    want[rows, :] = 0
    got = ts.open(spec, open=True).result()[...].read().result()
    assert np.array_equal(got, want), "TensorStore's writes do not read back"
    np.save(expect, want)
    print("ok")


def has_erofs(e):
    while e is not None:
        if isinstance(e, OSError) and e.errno == errno.EROFS:
            return True
        for sub in getattr(e, "exceptions", ()):
            if has_erofs(sub):
                return True
        e = e.__cause__ or e.__context__
    return False


def readonly(mnt, name):
    import xarray as xr
    import zarr

    path = os.path.join(mnt, "zarr", name)
    z = zarr.open_array(path, mode="r+")
    before = z[...]
    refused = 0
    try:
        z[0:2, 0:2] = 5
    except Exception as e:  # noqa: BLE001
        assert has_erofs(e), f"zarr write failed, but not with EROFS: {e!r}"
        refused += 1
    ds = xr.open_zarr(os.path.join(mnt, "zarr"), consolidated=True)
    dims = ds[name].dims
    upd = xr.Dataset({name: (dims, np.zeros((2, 2), before.dtype))})
    try:
        upd.to_zarr(os.path.join(mnt, "zarr"), region={dims[0]: slice(0, 2), dims[1]: slice(0, 2)},
                    mode="r+")
    except Exception as e:  # noqa: BLE001
        assert has_erofs(e), f"xarray write failed, but not with EROFS: {e!r}"
        refused += 1
    chunk = os.path.join(path, "c", "0", "0")
    try:
        os.open(chunk, os.O_WRONLY)
    except OSError as e:
        assert e.errno == errno.EROFS, e
        refused += 1
    after = zarr.open_array(path, mode="r")[...]
    assert np.array_equal(before, after), "a read-only mount changed"
    print("refused", refused)


def crashwrite(mnt, name, new):
    import zarr

    z = zarr.open_array(os.path.join(mnt, "zarr", name), mode="r+")
    new = np.load(new)
    print("ready", flush=True)
    z[...] = new
    print("done", flush=True)

