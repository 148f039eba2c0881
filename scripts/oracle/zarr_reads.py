"""The reading side of scripts/oracle/zarr_readers.py: the `Checker` that reads every case of
zarr_cases.py (its source mounted at "mnt") through zarr-python, xarray, dask and TensorStore
and compares with the reference .npy files and the documented layout (`read`); the same
layout written by zarr-python without b2fs (`fake`, for checking the checks); dask.distributed
over a mount (`distributed`). Runs in the Zarr venvs (zarr_readers.py says which).
`ViewChecker` and `check_cases` are what this `Checker` shares with zarr2_reads.py's of the
v2 view.
"""

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


def corner_chunks(shape, chunks):
    """The first and the last chunk's indices of an array (one index when they are the same)."""
    last = [max(0, -(-s // c) - 1) for s, c in zip(shape, chunks)]
    return {tuple(0 for _ in last), tuple(last)}


class ViewChecker:
    """What the checks of both views share (this file's `Checker` of `zarr/`, zarr2_reads.py's
    of `zarr2/`): the problems, notes and counts, the chunk objects' sizes, zarr-python's
    look-up and windows, and the xarray reads of every group. A view's class names its
    directory (`view`) and says what else it needs (`open_kw`, `preferred_chunks`)."""

    view = "zarr"

    def __init__(self):
        self.problems = []
        self.notes = []
        self.checked = {}

    def bad(self, case, what):
        self.problems.append(f"{case['name']}: {what}")

    def count(self, reader):
        self.checked[reader] = self.checked.get(reader, 0) + 1

    def root(self, case):
        return os.path.join(case["mnt"], self.view)

    def open_kw(self):
        """What zarr-python and xarray are told to open this view (nothing by default)."""
        return {}

    def preferred_chunks(self, case, path, a):
        """The chunk shapes xarray may prefer for array `path` (the source's by default)."""
        return [a["chunks"]]

    def chunk_sizes(self, case, path, objects, full):
        """Every chunk object of `objects` ((label, file) pairs) has `full` bytes in stat."""
        for label, p in objects:
            try:
                st = os.stat(p)
            except OSError as e:
                self.bad(case, f"{path}: chunk {label}: {e}")
                continue
            if st.st_size != full:
                self.bad(case, f"{path}: chunk {label} has {st.st_size} bytes, not {full}")

    def member(self, case, g, path, a):
        """Array `path` of zarr-python's group `g`, or None (a problem where the case says it
        is portable, else a note)."""
        try:
            return g[path]
        except KeyError:
            if a["portable"]:
                self.bad(case, f"zarr: {path} missing")
            else:
                self.notes.append(f"{case['name']}/{path}: not shown (no portable type)")
            return None

    def same_windows(self, case, path, z, ref):
        """zarr-python's reads of a few windows of `z` equal the reference's."""
        for sl in windows(ref.shape, 12, len(path)):
            if not same_values(z[sl], ref[sl], False):
                self.bad(case, f"zarr: {path} window {sl} differs")
                break

    # -- xarray --------------------------------------------------------------------------------

    def xarray(self, case):
        import xarray as xr

        root = self.root(case)
        kw = self.open_kw()
        by_group = {}
        for path, a in case["arrays"].items():
            by_group.setdefault(group_of(path), []).append((path, a))
        for gp, arrs in by_group.items():
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                ds = xr.open_zarr(root, group=gp or None, consolidated=True, **kw)
                # The same group by its own path (as users point xarray at a directory):
                # consolidated too, and the same Dataset.
                if gp:
                    own = xr.open_zarr(os.path.join(root, gp), consolidated=True, **kw)
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
                ok = [dict(zip(v.dims, c)) for c in self.preferred_chunks(case, path, a)]
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


def check_cases(checker, cases_path, readers, versions):
    """Checks every case of CASES through `readers` (methods of `checker`, after its `layout`);
    prints the JSON summary (`versions()` first: the readers' versions) and exits 1 on a
    problem."""
    with open(cases_path) as f:
        cases = json.load(f)
    for case in cases:
        if not checker.layout(case):
            continue
        for r in readers:
            try:
                getattr(checker, r)(case)
            except Exception as e:  # noqa: BLE001
                checker.bad(case, f"{r}: {type(e).__name__}: {e}")
    print(json.dumps({**versions(), "python": sys.version.split()[0], "cases": len(cases),
                      "checked": checker.checked, "notes": checker.notes,
                      "problems": checker.problems}, indent=1))
    sys.exit(1 if checker.problems else 0)


class Checker(ViewChecker):
    """The checks of the v3 view `zarr/`."""

    def preferred_chunks(self, case, path, a):
        # xarray prefers a sharded array's inner chunks (xarray #11460) or its shards.
        inner = inner_chunks(array_meta(case, path))
        return [c for c in (a["chunks"], inner) if c]

    # -- the hierarchy's JSON as stored --------------------------------------------------------

    def layout(self, case):
        root = self.root(case)
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
            keys = corner_chunks(ref.shape, a["chunks"]) if ref.size else set()
            objects = [(key, os.path.join(root, path, "c", *map(str, key))) for key in keys]
            self.chunk_sizes(case, path, objects, full)
        for gp in case["groups"]:
            if gp and (members.get(gp) or {}).get("node_type") != "group":
                self.bad(case, f"group {gp} missing from the consolidated metadata")
        return True

    # -- zarr-python ---------------------------------------------------------------------------

    def zarr(self, case):
        import zarr

        root = self.root(case)
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
            z = self.member(case, g, path, a)
            if z is None:
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
                self.same_windows(case, path, z, ref)
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

    # -- dask ----------------------------------------------------------------------------------

    def dask(self, case):
        import dask.array as da

        root = self.root(case)
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

        root = self.root(case)
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
    def versions():
        import zarr

        return {"zarr": zarr.__version__}

    check_cases(Checker(), cases_path, readers, versions)


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
