"""Reference-library checks for tests/it/writer.rs (python-blosc2, caterva, bcolz).

Usage: writer_check.py MODE ARGS... ; prints OK, raises on any mismatch.

  frame PATH EXPDIR [mutate]     python-blosc2 reads the chunks EXPDIR/{i}.bin (and attrs,
                                 logical array, caterva view); with `mutate`, python-blosc2
                                 then updates, appends and sets vlmeta and everything is
                                 re-checked after reopening.
  crash LISTFILE                 every line `PATH OLDDIR NEWDIR`: the frame opens and is
                                 entirely the old or entirely the new content.
  bcolz PATH EXP.bin ATTRS|- [mutate]
                                 bcolz reads exactly EXP.bin (and attrs); with `mutate` bcolz
                                 appends, updates, flushes and everything is re-checked.
  bcolzcrash LISTFILE            every line `PATH OLD.bin NEW.bin CHUNKBYTES`: each chunk of
                                 the carray equals the old or the new content.
  ctable PATH COL=EXP.bin... [mutate]
                                 the ctable opens and each column COL reads EXP.bin; with
                                 `mutate` bcolz appends rows, flushes and re-checks.
"""

import json
import os
import sys

import numpy as np


def chunks_in(d):
    n = 0
    while os.path.exists(os.path.join(d, "%d.bin" % n)):
        n += 1
    return [open(os.path.join(d, "%d.bin" % i), "rb").read() for i in range(n)]


def deblock(chunks, shape, cs, bs, dtype):
    """The logical array of a b2nd/caterva frame from its decompressed chunks."""
    nd = len(shape)
    ext = [-(-c // b) * b for c, b in zip(cs, bs)]
    grid = [-(-s // c) if c else 0 for s, c in zip(shape, cs)]
    out = np.zeros(shape, dtype=dtype)
    for k, raw in enumerate(chunks):
        arr = np.frombuffer(raw, dtype=dtype)
        nb = [e // b for e, b in zip(ext, bs)]
        blk = arr.reshape(tuple(nb) + tuple(bs))
        perm = [x for d in range(nd) for x in (d, nd + d)]
        full = blk.transpose(perm).reshape(ext)
        idx = np.unravel_index(k, grid)
        sl_out, sl_in = [], []
        for d in range(nd):
            o = idx[d] * cs[d]
            n = min(cs[d], shape[d] - o)
            sl_out.append(slice(o, o + n))
            sl_in.append(slice(0, n))
        out[tuple(sl_out)] = full[tuple(sl_in)]
    return out


def check_frame(path, chunks, attrs, views=True):
    import blosc2

    o = blosc2.open(path, mode="r")
    s = o.schunk if hasattr(o, "schunk") else o
    assert s.nchunks == len(chunks), (s.nchunks, len(chunks))
    for i, want in enumerate(chunks):
        got = s.decompress_chunk(i)
        assert got == want, "chunk %d differs (%d vs %d bytes)" % (i, len(got), len(want))
    if attrs is not None:
        keys = list(s.vlmeta.keys())
        assert keys == attrs["keys"], (keys, attrs["keys"])
        for k, v in attrs["values"].items():
            assert s.vlmeta[k] == v, (k, s.vlmeta[k], v)
    if isinstance(o, blosc2.NDArray):
        want = deblock(chunks, o.shape, o.chunks, o.blocks, o.dtype)
        assert np.array_equal(o[...], want, equal_nan=o.dtype.kind == "f"), "array differs"
    meta = s.meta
    if views and "caterva" in meta and "b2nd" not in meta:
        import caterva

        c = caterva.open(path)
        _, _, shape, cs, bs = meta["caterva"]
        dt = np.dtype((np.void, c.itemsize))
        want = deblock(chunks, tuple(shape), cs, bs, dt)
        assert np.asarray(c[...]).tobytes() == want.tobytes(), "caterva view differs"
    return o


def mutate_frame(path, chunks, attrs):
    import blosc2

    o = blosc2.open(path, mode="a")
    if isinstance(o, blosc2.NDArray):
        before = o[...].copy()
        first = (0,) * o.ndim
        o[first] = 42
        before[first] = 42
        if o.ndim == 1:
            old = o.shape[0]
            o.resize((old + 7,))
            o[old:] = np.arange(7).astype(o.dtype)
            before = np.concatenate([before, np.arange(7).astype(o.dtype)])
        o.vlmeta["py"] = "yes"
        del o
        a = blosc2.open(path, mode="r")
        assert np.array_equal(a[...], before), "array after python mutation differs"
        keys = list(a.schunk.vlmeta.keys())
        assert keys == attrs["keys"] + ["py"], keys
        return
    s = o
    # Never all zeros: C-Blosc2 would store a zero chunk as a special offset, which it cannot
    # read back in a variable-size frame (docs/format/CONTAINERS.md 1.5, "Hazard").
    new0 = bytes((b + 1) % 256 or 1 for b in reversed(chunks[0]))
    s.update_data(0, new0, copy=True)
    extra = np.arange(100, dtype=np.uint8).tobytes() * s.typesize
    s.append_data(extra)
    s.vlmeta["py"] = "yes"
    del s, o
    want = [new0] + chunks[1:] + [extra]
    # An SChunk-level append makes a caterva view inconsistent: check the chunks only.
    check_frame(path, want, None, views=False)
    import blosc2 as b

    s = b.open(path, mode="r")
    s = s.schunk if hasattr(s, "schunk") else s
    if attrs is not None:
        assert list(s.vlmeta.keys()) == attrs["keys"] + ["py"]


def frame_mode(args):
    path, expdir = args[0], args[1]
    chunks = chunks_in(expdir)
    ap = os.path.join(expdir, "attrs.json")
    attrs = json.load(open(ap)) if os.path.exists(ap) else None
    check_frame(path, chunks, attrs)
    if "mutate" in args[2:]:
        if attrs is None:
            import blosc2

            o = blosc2.open(path, mode="r")
            s = o.schunk if hasattr(o, "schunk") else o
            attrs = {"keys": list(s.vlmeta.keys()), "values": {}}
        mutate_frame(path, chunks, attrs)


def crash_mode(args):
    import blosc2

    for line in open(args[0]):
        path, olddir, newdir = line.split()
        old, new = chunks_in(olddir), chunks_in(newdir)
        o = blosc2.open(path, mode="r")
        s = o.schunk if hasattr(o, "schunk") else o
        got = [s.decompress_chunk(i) for i in range(s.nchunks)]
        assert got == old or got == new, "%s: neither old nor new (%d chunks)" % (path, len(got))


def bcolz_mode(args):
    import bcolz

    path, exp, attrs = args[0], args[1], args[2]
    want = open(exp, "rb").read()
    c = bcolz.open(path, mode="r")
    got = c[:].tobytes()
    assert got == want, "carray differs (%d vs %d bytes)" % (len(got), len(want))
    if attrs != "-":
        wa = json.load(open(attrs))
        assert dict(c.attrs) == wa, (dict(c.attrs), wa)
    if "mutate" in args[3:]:
        dt = c.dtype
        arr = c[:].copy()
        del c
        c = bcolz.open(path, mode="a")
        add = np.arange(13).astype(dt)
        c.append(add)
        c[0] = 99
        c.flush()
        del c
        arr = np.concatenate([arr, add])
        arr[0] = 99
        c = bcolz.open(path, mode="r")
        assert c[:].tobytes() == arr.tobytes(), "carray after bcolz mutation differs"


def bcolzcrash_mode(args):
    import bcolz

    for line in open(args[0]):
        path, oldf, newf, cb = line.split()
        cb = int(cb)
        old, new = open(oldf, "rb").read(), open(newf, "rb").read()
        got = bcolz.open(path, mode="r")[:].tobytes()
        assert len(got) in (len(old), len(new)), (path, len(got))
        for k in range(0, len(got), cb):
            seg = got[k : k + cb]
            ok = seg in (old[k : k + len(seg)], new[k : k + len(seg)])
            assert ok, "%s: chunk at byte %d is neither old nor new" % (path, k)


def ctable_mode(args):
    import bcolz

    path, cols = args[0], [a for a in args[1:] if "=" in a]
    t = bcolz.open(path, mode="r")
    for c in cols:
        col, exp = c.split("=", 1)
        assert t[col][:].tobytes() == open(exp, "rb").read(), "column %s differs" % col
    rows = t[:]
    assert len(rows) == len(t), "table rows"
    if "mutate" in args:
        del t
        t = bcolz.open(path, mode="a")
        t.append(rows[:5])
        t.flush()
        del t
        t = bcolz.open(path, mode="r")
        assert len(t) == len(rows) + 5, (len(t), len(rows))
        assert t[:].tobytes() == rows.tobytes() + rows[:5].tobytes(), "table after append"


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    {
        "frame": frame_mode,
        "crash": crash_mode,
        "bcolz": bcolz_mode,
        "bcolzcrash": bcolzcrash_mode,
        "ctable": ctable_mode,
    }[mode](args)
    print("OK")


main()
