"""Reads b2fs's Zarr view of one source with numpy only (no zarr library), as a Zarr reader
would: the root zarr.json and its consolidated metadata, the array's zarr.json, and every
chunk object (each read whole, as zarr-python's LocalStore does); compares the array they make
to what the reference library reads from the source (python-blosc2, or bcolz for a directory).
For tests/it/zarr.rs.

    zarr_check.py ZARRDIR SRC          prints "ok", or raises
    zarr_check.py --write ZARRDIR SRC  (a read-write mount) writes chunk (0, ...) the way
                                       zarr-python does (temp file + rename) and the last chunk
                                       in place (open "wb"); prints the sha256 of the array
                                       python-blosc2 must read after the unmount
    zarr_check.py gen SRC              a 2048x2048 float64 b2nd whose chunks are its two
                                       halves (16 MiB each), for the SIGKILL test
    zarr_check.py raw SRC OUT          writes the bytes python-blosc2 reads from SRC to OUT
"""
import hashlib
import json
import os
import sys
import uuid

import numpy as np


def reference(src):
    if os.path.isdir(src):
        import bcolz
        return bcolz.open(src, mode="r")[:]
    import blosc2
    return blosc2.open(src)[...]


def numpy_dtype(meta):
    dt = meta["data_type"]
    codec = meta["codecs"][0]
    order = {"little": "<", "big": ">"}.get(codec.get("configuration", {}).get("endian"), "|")
    if isinstance(dt, dict):
        conf = dt["configuration"]
        if dt["name"] in ("numpy.datetime64", "numpy.timedelta64"):
            kind = "M8" if dt["name"] == "numpy.datetime64" else "m8"
            scale = conf["scale_factor"]
            unit = ("" if scale == 1 else str(scale)) + conf["unit"]
            return np.dtype(f"{order}{kind}[{unit}]")
        if dt["name"] == "fixed_length_utf32":
            return np.dtype(f"{order}U{conf['length_bytes'] // 4}")
        raise ValueError(dt)
    names = {"bool": "?", "complex64": "c8", "complex128": "c16"}
    return np.dtype(names.get(dt, dt)).newbyteorder(order if order != "|" else "=")


def read_view(zdir):
    root = json.load(open(os.path.join(zdir, "zarr.json")))
    assert root["node_type"] == "group", root
    cm = root["consolidated_metadata"]
    assert cm["kind"] == "inline" and cm["must_understand"] is False, cm
    (name, meta), = cm["metadata"].items()
    own = json.load(open(os.path.join(zdir, name, "zarr.json")))
    assert own == meta, (own, meta)
    assert meta["chunk_key_encoding"]["name"] == "default"
    assert len(meta["dimension_names"]) == len(meta["shape"])
    dt = numpy_dtype(meta)
    shape = tuple(meta["shape"])
    chunks = tuple(meta["chunk_grid"]["configuration"]["chunk_shape"])
    grid = tuple(-(-s // c) for s, c in zip(shape, chunks))
    out = np.zeros(shape, dtype=dt)
    for idx in np.ndindex(*grid):
        path = os.path.join(zdir, name, "c", *map(str, idx))
        with open(path, "rb") as f:
            raw = f.read()
        assert len(raw) == os.stat(path).st_size == int(np.prod(chunks)) * dt.itemsize, path
        block = np.frombuffer(raw, dtype=dt).reshape(chunks)
        region = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, shape))
        out[region] = block[tuple(slice(0, r.stop - r.start) for r in region)]
    for probe in (".zarray", ".zattrs", ".zgroup", ".zmetadata"):
        assert not os.path.exists(os.path.join(zdir, name, probe)), probe
    return name, meta, dt, chunks, grid, out


def main():
    if sys.argv[1] == "gen":
        import blosc2
        a = np.arange(2048 * 2048, dtype="<f8").reshape(2048, 2048)
        blosc2.asarray(a, chunks=(1024, 2048), urlpath=sys.argv[2], mode="w")
        return
    if sys.argv[1] == "raw":
        with open(sys.argv[3], "wb") as f:
            f.write(np.ascontiguousarray(reference(sys.argv[2])).tobytes())
        return
    write = sys.argv[1] == "--write"
    zdir, src = sys.argv[-2], sys.argv[-1]
    name, meta, dt, chunks, grid, got = read_view(zdir)
    want = reference(src)
    want = np.ascontiguousarray(want)
    assert got.tobytes() == want.tobytes(), name
    if not write:
        print("ok")
        return
    rng = np.random.default_rng(5)
    shape = got.shape
    first = tuple(0 for _ in grid)
    last = tuple(g - 1 for g in grid)
    for idx, how in ((first, "rename"), (last, "inplace")):
        block = rng.standard_normal(chunks).astype(dt) if dt.kind == "f" else \
            rng.integers(0, 100, chunks).astype(dt)
        path = os.path.join(zdir, name, "c", *map(str, idx))
        if how == "rename":
            tmp = path + "." + uuid.uuid4().hex + ".partial"
            with open(tmp, "wb") as f:
                f.write(block.tobytes())
            os.replace(tmp, path)
        else:
            with open(path, "wb") as f:
                f.write(block.tobytes())
        region = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, shape))
        want[region] = block[tuple(slice(0, r.stop - r.start) for r in region)]
        with open(path, "rb") as f:
            assert f.read() == block.tobytes(), how
    print(hashlib.sha256(want.tobytes()).hexdigest())


main()
