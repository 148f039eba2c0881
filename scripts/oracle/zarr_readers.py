"""The users' Zarr tools against a mount's `zarr/` view (tests/it/zarr_readers.rs). Runs in the
Zarr venvs: .venv-zarr (Python 3.12: zarr-python 3.4, xarray, dask[distributed], tensorstore,
python-blosc2) or .venv-zarr311 (Python 3.11: zarr-python 3.1 only).

    zarr_readers.py read CASES.json READERS      every case of zarr_cases.py (with "mnt" added:
                                                 where its source is mounted) through the readers
                                                 (comma-separated: zarr, xarray, dask,
                                                 tensorstore) against the reference .npy files;
                                                 prints one JSON summary; exit 1 on a problem
    zarr_readers.py fake CASES.json OUTDIR       a Zarr v3 hierarchy in the documented layout
                                                 written by zarr-python (for checking this
                                                 script without b2fs; prints CASES with "mnt")
    zarr_readers.py distributed MNT NAME SRC     dask.distributed, LocalCluster of 2 worker
                                                 processes, over MNT/zarr/NAME equal to
                                                 python-blosc2's read of SRC; prints "ok PIDS"
    zarr_readers.py write MNT NAME EXPECT.npy    zarr-python `z[region] = v` (a whole chunk, part
                                                 of a chunk, a region across chunks) and
                                                 xarray `to_zarr(region=...)` on a read-write
                                                 mount; saves what the array must now be;
                                                 prints "ok N", "ok N sharded" when the view
                                                 shows it sharded (regions then by shard);
                                                 zarr-python's writes only without xarray
    zarr_readers.py tswrite MNT NAME EXPECT.npy  TensorStore's writes (a region across chunks or
                                                 shards; a row of them made zeros) on a read-write
                                                 mount; saves what the array must now be;
                                                 prints "ok"
    zarr_readers.py readonly MNT NAME            the same writes on a read-only mount fail with
                                                 EROFS and change nothing; prints "refused N"
    zarr_readers.py crashwrite MNT NAME NEW.npy  prints "ready" once the array is open, then
                                                 `z[...] = new` (every chunk), prints "done"
    zarr_readers.py append MNT NAME              on the 1-D float64 array NAME (item i holding
                                                 i, dimension "time"): zarr-python `append`,
                                                 xarray `to_zarr(append_dim="time")`, a
                                                 shrinking `resize`; prints one line each
    zarr_readers.py append3d MNT NAME            xarray `to_zarr(append_dim="time")` of 7 steps
                                                 to the 3-D float32 array NAME (time, y, x;
                                                 item i holding i); prints "xarray N True"
    zarr_readers.py attrs MNT                    attribute edits of zarr-python and xarray
                                                 (attrgen's store); one line per outcome
    zarr_readers.py nanattrs MNT NAME            NaN and infinite attributes of array NAME set
                                                 with zarr-python, read back by a fresh reader;
                                                 prints "view True inf -inf UNITS"
"""

import errno
import json
import os
import sys
import warnings

import numpy as np

DIM_KEYS = ("_ARRAY_DIMENSIONS", "dimension_names")


def load_ref(a):
    return np.load(a["npy"])


def inner_chunks(meta):
    """The inner chunk shape of a sharded array's metadata (`-o zarr_shards`), else None."""
    codecs = meta.get("codecs") or [{}]
    if codecs[0].get("name") != "sharding_indexed":
        return None
    return list(codecs[0]["configuration"]["chunk_shape"])


def array_meta(case, path):
    with open(os.path.join(case["mnt"], "zarr", path, "zarr.json")) as f:
        return json.load(f)


def same_values(got, ref, raw):
    got = np.asarray(got)
    if raw:
        return got.tobytes() == np.ascontiguousarray(ref).tobytes()
    if got.shape != ref.shape:
        return False
    if ref.dtype.kind in "Mm":
        return got.dtype.kind == ref.dtype.kind and np.array_equal(got.astype(ref.dtype), ref)
    if got.dtype.newbyteorder("=") != ref.dtype.newbyteorder("="):
        return False
    return np.array_equal(got, ref)


def windows(shape, n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        sl = []
        for d in shape:
            a = int(rng.integers(0, d))
            b = int(rng.integers(a, min(d, a + 9) + 1))
            sl.append(slice(a, b))
        out.append(tuple(sl))
    return out


def without_dims(attrs):
    return {k: v for k, v in (attrs or {}).items() if k not in DIM_KEYS}


def group_of(path):
    return path.rsplit("/", 1)[0] if "/" in path else ""


def leaf_of(path):
    return path.rsplit("/", 1)[-1]


class Checker:
    def __init__(self):
        self.problems = []
        self.notes = []
        self.checked = {}

    def bad(self, case, what):
        self.problems.append(f"{case['name']}: {what}")

    def count(self, reader):
        self.checked[reader] = self.checked.get(reader, 0) + 1

    # -- the hierarchy's JSON as stored --------------------------------------------------------

    def layout(self, case):
        root = os.path.join(case["mnt"], "zarr")
        try:
            with open(os.path.join(root, "zarr.json")) as f:
                meta = json.load(f)
        except Exception as e:  # noqa: BLE001
            self.bad(case, f"root zarr.json: {e}")
            return False
        if meta.get("zarr_format") != 3 or meta.get("node_type") != "group":
            self.bad(case, f"root zarr.json is not a v3 group: {meta}")
        cm = meta.get("consolidated_metadata") or {}
        if cm.get("kind") != "inline":
            self.bad(case, "root zarr.json has no inline consolidated_metadata")
            return True
        members = cm.get("metadata") or {}
        for path, a in case["arrays"].items():
            m = members.get(path)
            if m is None:
                if a["portable"]:
                    self.bad(case, f"{path} missing from the consolidated metadata")
                continue
            if m.get("node_type") != "array":
                self.bad(case, f"{path}: consolidated node_type {m.get('node_type')}")
                continue
            if [c for c in m["chunk_grid"]["configuration"]["chunk_shape"]] != a["chunks"]:
                self.bad(case, f"{path}: consolidated chunk_shape {m['chunk_grid']}")
            codecs = [c["name"] for c in m.get("codecs", [])]
            inner = inner_chunks(m)
            index = 0
            if inner is not None:
                # A shard per chunk, an inner chunk per block (`-o zarr_shards` only); its
                # index of (offset, nbytes) per block at the end, no checksum.
                cfg = m["codecs"][0]["configuration"]
                if not case.get("sharded"):
                    self.bad(case, f"{path}: sharded without -o zarr_shards")
                if [c["name"] for c in cfg["codecs"]] != ["bytes"] or cfg["index_location"] != "end":
                    self.bad(case, f"{path}: shard codecs {cfg}")
                if len(inner) != len(a["chunks"]) or any(c % i for c, i in zip(a["chunks"], inner)):
                    self.bad(case, f"{path}: inner chunks {inner} do not tile {a['chunks']}")
                index = 16 * int(np.prod([c // i for c, i in zip(a["chunks"], inner)]))
                self.count("sharded")
            elif codecs != ["bytes"]:
                self.bad(case, f"{path}: codecs {codecs}, expected uncompressed ['bytes']")
            if m.get("chunk_key_encoding", {}).get("name") != "default":
                self.bad(case, f"{path}: chunk_key_encoding {m.get('chunk_key_encoding')}")
            # Every chunk object padded to the full chunk shape, its size exact in stat.
            ref = np.load(a["npy"], mmap_mode="r")
            item = ref.dtype.itemsize if not a["raw"] else 1
            full = int(np.prod(a["chunks"])) * item + index
            last = [max(0, -(-s // c) - 1) for s, c in zip(ref.shape, a["chunks"])]
            for key in ({tuple(0 for _ in last), tuple(last)} if ref.size else set()):
                p = os.path.join(root, path, "c", *map(str, key))
                try:
                    st = os.stat(p)
                except OSError as e:
                    self.bad(case, f"{path}: chunk {key}: {e}")
                    continue
                if st.st_size != full:
                    self.bad(case, f"{path}: chunk {key} has {st.st_size} bytes, not {full}")
        for gp in case["groups"]:
            if gp and (members.get(gp) or {}).get("node_type") != "group":
                self.bad(case, f"group {gp} missing from the consolidated metadata")
        return True

    # -- zarr-python ---------------------------------------------------------------------------

    def zarr(self, case):
        import zarr

        root = os.path.join(case["mnt"], "zarr")
        g = zarr.open_group(root, mode="r")
        if g.metadata.consolidated_metadata is None:
            self.bad(case, "zarr.open_group: no consolidated metadata")
        for gp, attrs in case["groups"].items():
            grp = g[gp] if gp else g
            if dict(grp.attrs) != attrs:
                self.bad(case, f"group {gp!r} attrs {dict(grp.attrs)} != {attrs}")
            if gp:
                # Opened by its own path, a group reads one file too: its zarr.json carries
                # the consolidated metadata of what is below it.
                own = zarr.open_group(os.path.join(root, gp), mode="r")
                cm = own.metadata.consolidated_metadata
                if cm is None:
                    self.bad(case, f"group {gp!r} opened by its path: no consolidated metadata")
                elif sorted(own.array_keys()) != sorted(grp.array_keys()):
                    self.bad(case, f"group {gp!r} by its path: arrays {sorted(own.array_keys())} "
                                   f"!= {sorted(grp.array_keys())}")
        names_by_group = {}
        for path, a in case["arrays"].items():
            try:
                z = g[path]
            except KeyError:
                if a["portable"]:
                    self.bad(case, f"zarr: {path} missing")
                else:
                    self.notes.append(f"{case['name']}/{path}: not shown (no portable type)")
                continue
            ref = load_ref(a)
            # The same array through its own zarr.json (no consolidated metadata).
            z2 = zarr.open_array(os.path.join(root, path), mode="r")
            inner = inner_chunks(array_meta(case, path))
            for zz, how in ((z, "consolidated"), (z2, "zarr.json")):
                if tuple(zz.shape) != ref.shape and not a["raw"]:
                    self.bad(case, f"zarr {how}: {path} shape {zz.shape} != {ref.shape}")
                shards = getattr(zz, "shards", None)
                got = (list(shards), list(zz.chunks)) if shards else (list(zz.chunks), None)
                if got != (a["chunks"], inner):
                    self.bad(case, f"zarr {how}: {path} shards, chunks {got} != "
                                   f"{a['chunks']}, {inner}")
            got = z[...]
            if not same_values(got, ref, a["raw"]):
                self.bad(case, f"zarr: {path} values differ ({got.dtype} vs {ref.dtype})")
                continue
            if not a["raw"]:
                for sl in windows(ref.shape, 12, len(path)):
                    if not same_values(z[sl], ref[sl], False):
                        self.bad(case, f"zarr: {path} window {sl} differs")
                        break
            if dict(z.attrs) != a["attrs"]:
                self.bad(case, f"zarr: {path} attrs {dict(z.attrs)} != {a['attrs']}")
            dims = z.metadata.dimension_names
            if dims is None or len(dims) != ref.ndim or not all(isinstance(d, str) for d in dims):
                self.bad(case, f"zarr: {path} dimension_names {dims}")
                continue
            if a["dims"] is not None and list(dims) != a["dims"]:
                self.bad(case, f"zarr: {path} dimension_names {dims} != {a['dims']}")
            names_by_group.setdefault(group_of(path), []).append((path, list(dims), a, ref.shape))
            self.count("zarr")
        for gp, arrs in names_by_group.items():
            self.dims_consistent(case, gp, arrs)

    def dims_consistent(self, case, gp, arrs):
        """Dimension names in one group: equal names have equal lengths (xarray refuses a group
        otherwise); made-up names are not shared; a ctable's columns share their one name."""
        size = {}
        for path, dims, a, shape in arrs:
            for d, n in zip(dims, shape):
                if size.setdefault(d, n) != n:
                    self.bad(case, f"group {gp!r}: dimension {d} has lengths {size[d]} and {n}")
        if case["kind"] == "ctable":
            firsts = {dims[0] for _, dims, _, _ in arrs}
            if len(firsts) != 1:
                self.bad(case, f"ctable columns do not share their row dimension: {firsts}")
            return
        given = {d for _, dims, a, _ in arrs if a["dims"] is not None for d in dims}
        seen = {}
        for path, dims, a, _ in arrs:
            if a["dims"] is not None:
                continue
            if len(set(dims)) != len(dims):
                self.bad(case, f"{path}: made-up dimension names repeat: {dims}")
            for d in dims:
                if d in given or d in seen:
                    self.bad(case, f"{path}: made-up dimension name {d} also names another "
                                   f"array's dimension ({seen.get(d, 'given')})")
                seen[d] = path

    # -- xarray --------------------------------------------------------------------------------

    def xarray(self, case):
        import xarray as xr

        root = os.path.join(case["mnt"], "zarr")
        by_group = {}
        for path, a in case["arrays"].items():
            by_group.setdefault(group_of(path), []).append((path, a))
        for gp, arrs in by_group.items():
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                ds = xr.open_zarr(root, group=gp or None, consolidated=True)
                # The same group by its own path (as users point xarray at a directory):
                # consolidated too, and the same Dataset.
                if gp:
                    own = xr.open_zarr(os.path.join(root, gp), consolidated=True)
                    if not own.identical(ds):
                        self.bad(case, f"xarray: group {gp!r} by its path differs from group=")
            for path, a in arrs:
                name = leaf_of(path)
                if name not in ds.variables:
                    if a["portable"]:
                        self.bad(case, f"xarray: {path} missing from the Dataset")
                    continue
                v = ds[name]
                ref = load_ref(a)
                if a["dims"] is not None and list(v.dims) != a["dims"]:
                    self.bad(case, f"xarray: {path} dims {v.dims} != {a['dims']}")
                pc = v.encoding.get("preferred_chunks")
                inner = inner_chunks(array_meta(case, path))
                # xarray prefers a sharded array's inner chunks (xarray #11460) or its shards.
                ok = [dict(zip(v.dims, c)) for c in (a["chunks"], inner) if c]
                if pc not in ok:
                    self.bad(case, f"xarray: {path} preferred_chunks {pc} != {a['chunks']}")
                if not same_values(v.values, ref, a["raw"]):
                    self.bad(case, f"xarray: {path} values differ ({v.dtype} vs {ref.dtype})")
                if without_dims(v.attrs) != without_dims(a["attrs"]):
                    self.bad(case, f"xarray: {path} attrs {v.attrs} != {a['attrs']}")
                self.count("xarray")
            want = case["groups"].get(gp, {})
            if dict(ds.attrs) != want:
                self.bad(case, f"xarray: group {gp!r} attrs {ds.attrs} != {want}")

    # -- dask ----------------------------------------------------------------------------------

    def dask(self, case):
        import dask.array as da

        root = os.path.join(case["mnt"], "zarr")
        for path, a in case["arrays"].items():
            if not os.path.exists(os.path.join(root, path, "zarr.json")):
                continue  # reported by the zarr reader (when it must be there)
            ref = load_ref(a)
            x = da.from_zarr(root, component=path)
            want = [tuple(min(c, s) for c, s in zip(ch, x.shape))
                    for ch in (a["chunks"], inner_chunks(array_meta(case, path))) if ch]
            if x.chunksize not in want:
                self.bad(case, f"dask: {path} chunksize {x.chunksize} != {want}")
            if not same_values(x.compute(), ref, a["raw"]):
                self.bad(case, f"dask: {path} values differ")
            self.count("dask")

    # -- TensorStore ---------------------------------------------------------------------------

    def tensorstore(self, case):
        import tensorstore as ts

        root = os.path.join(case["mnt"], "zarr")
        for path, a in case["arrays"].items():
            if not os.path.exists(os.path.join(root, path, "zarr.json")):
                continue
            ref = load_ref(a)
            spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": os.path.join(root, path) + "/"}}
            try:
                t = ts.open(spec, read=True).result()
            except Exception as e:  # noqa: BLE001
                if (ref.dtype.kind in "Mm" or not a["portable"]) and "data type" in str(e):
                    # TensorStore has no numpy.datetime64/timedelta64 (extension data types).
                    self.notes.append(f"tensorstore: {case['name']}/{path} ({ref.dtype}) "
                                      f"not opened: {str(e).splitlines()[0][:120]}")
                    continue
                self.bad(case, f"tensorstore: {path}: {e}")
                continue
            want = inner_chunks(array_meta(case, path)) or a["chunks"]
            if list(t.chunk_layout.read_chunk.shape) != want:
                self.bad(case, f"tensorstore: {path} read chunk {t.chunk_layout.read_chunk.shape}")
            labels = list(t.domain.labels)
            if a["dims"] is not None and labels != a["dims"]:
                self.bad(case, f"tensorstore: {path} labels {labels} != {a['dims']}")
            if not same_values(t.read().result(), ref, a["raw"]):
                self.bad(case, f"tensorstore: {path} values differ")
            self.count("tensorstore")


def read(cases_path, readers):
    cases = json.load(open(cases_path))
    c = Checker()
    for case in cases:
        if not c.layout(case):
            continue
        for r in readers:
            try:
                getattr(c, r)(case)
            except Exception as e:  # noqa: BLE001
                c.bad(case, f"{r}: {type(e).__name__}: {e}")
    import zarr

    print(json.dumps({"zarr": zarr.__version__, "python": sys.version.split()[0],
                      "cases": len(cases), "checked": c.checked, "notes": c.notes,
                      "problems": c.problems}, indent=1))
    sys.exit(1 if c.problems else 0)


def fake(cases_path, out):
    """The documented layout, written by zarr-python: uncompressed, the source's chunks,
    dimension names (given or made up), consolidated."""
    import zarr
    from zarr.codecs import BytesCodec

    cases = json.load(open(cases_path))
    for case in cases:
        mnt = os.path.join(out, case["name"])
        root = zarr.open_group(os.path.join(mnt, "zarr"), mode="w",
                               attributes=case["groups"].get("", {}))
        for gp, attrs in case["groups"].items():
            if gp:
                root.require_group(gp).attrs.update(attrs)
        for path, a in case["arrays"].items():
            ref = load_ref(a)
            if a["dims"] is not None:
                dims = a["dims"]
            elif case["kind"] == "ctable":
                dims = ["row"]
            else:
                dims = [f"{leaf_of(path)}_dim{k}" for k in range(ref.ndim)]
            if ref.dtype.kind == "S":
                continue
            z = root.create_array(path, shape=ref.shape, chunks=a["chunks"], dtype=ref.dtype,
                                  compressors=None, serializer=BytesCodec(), fill_value=0,
                                  dimension_names=dims, attributes=a["attrs"],
                                  config={"write_empty_chunks": True})
            z[...] = ref
        zarr.consolidate_metadata(os.path.join(mnt, "zarr"))
        case["mnt"] = mnt
    json.dump(cases, sys.stdout)


def distributed(mnt, name, src):
    import blosc2
    import dask.array as da
    from dask.distributed import Client, LocalCluster

    ref = blosc2.open(src, mode="r")[...]
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster) as client:
        workers = set(client.run(os.getpid).values())
        assert len(workers) == 2 and os.getpid() not in workers, workers
        x = da.from_zarr(os.path.join(mnt, "zarr", name))
        pids = x.map_blocks(lambda b: np.full((1,) * b.ndim, os.getpid()), dtype=np.int64,
                            chunks=(1,) * x.ndim).compute()
        used = set(int(p) for p in np.unique(pids))
        assert used <= workers, (used, workers)
        got = x.compute()
        assert got.dtype == ref.dtype and np.array_equal(got, ref), "values differ"
        total = float(x.sum().compute())
        assert np.isclose(total, float(ref.sum())), (total, float(ref.sum()))
    print("ok", len(used), x.npartitions)


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


def main():
    cmd = sys.argv[1]
    if cmd == "read":
        read(sys.argv[2], sys.argv[3].split(","))
    elif cmd == "fake":
        fake(sys.argv[2], sys.argv[3])
    elif cmd == "distributed":
        distributed(*sys.argv[2:5])
    elif cmd == "write":
        write(*sys.argv[2:5])
    elif cmd == "tswrite":
        tswrite(*sys.argv[2:5])
    elif cmd == "readonly":
        readonly(*sys.argv[2:4])
    elif cmd == "attrs":
        attrs(sys.argv[2])
    elif cmd == "append":
        append(*sys.argv[2:4])
    elif cmd == "append3d":
        append3d(*sys.argv[2:4])
    elif cmd == "nanattrs":
        nanattrs(sys.argv[2], sys.argv[3])
    elif cmd == "crashwrite":
        crashwrite(*sys.argv[2:5])
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
