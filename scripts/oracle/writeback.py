"""Fixtures and reference checks for the write-back tests (tests/it/writeback.rs, writer.rs,
crash.rs).

    writeback.py gen DIR         make the sources in DIR
    writeback.py check DIR       check DIR/<case> against DIR/expected/<case>/ with the
                                 reference libraries, then modify each source with them and
                                 re-read it
    writeback.py ctable PATH     make the 6-column ctable "ct2" at PATH (columns with different
                                 chunklens, dtypes and dflt values)
    writeback.py ctable_ops SPEC check ctables edited by b2fs against bcolz doing the same
                                 row-level operations (SPEC: see ctable_ops)
    writeback.py ctable_crash SPEC
                                 check ctables left by interrupted commits (SPEC: see
                                 ctable_crash)
"""
import json
import os
import sys

import numpy as np


def gen(d):
    import blosc2
    import bcolz

    data = np.arange(10000, dtype=np.int32)
    cp = {"codec": blosc2.Codec.ZSTD, "clevel": 5}
    for name, contiguous in (("cframe.b2frame", True), ("sframe.b2frame", False)):
        s = blosc2.SChunk(chunksize=4000 * 4, urlpath=os.path.join(d, name),
                          contiguous=contiguous, cparams=cp, mode="w")
        s.append_data(data[:4000])
        s.append_data(data[4000:8000])
        s.append_data(data[8000:])
        s.vlmeta["orig"] = 1
    a = blosc2.asarray(np.arange(10000, dtype=np.int64), chunks=(4000,), blocks=(1000,),
                       urlpath=os.path.join(d, "b1.b2nd"), mode="w")
    a.schunk.vlmeta["orig"] = 1
    b = blosc2.asarray(np.arange(10000, dtype=np.int32).reshape(100, 100), chunks=(50, 50),
                       blocks=(10, 10), urlpath=os.path.join(d, "b2.b2nd"), mode="w")
    b.schunk.vlmeta["orig"] = 1
    c = bcolz.carray(data, chunklen=4000, rootdir=os.path.join(d, "carr"), mode="w")
    c.attrs["orig"] = 1
    c.flush()
    t = bcolz.ctable(columns=[data, data.astype(np.float64)], names=["a", "b"],
                     rootdir=os.path.join(d, "ct"), mode="w", chunklen=4000)
    t.attrs["orig"] = 1
    t.flush()
    make_ctable(os.path.join(d, "ct2"))


def make_ctable(path):
    """2500 rows; columns (name, dtype, chunklen, dflt): a int32 1000 -1, b float64 300 2.5,
    s |S2 700 "zz", be >i2 600 7, u <U2 900 "\u00fc!", f bool 4000 true."""
    import bcolz

    n = 2500
    t = bcolz.ctable(columns=[np.arange(n, dtype=np.int32)], names=["a"], rootdir=path,
                     mode="w", chunklen=1000, dflt=-1)
    t.addcol(np.arange(n) * 0.5, name="b", chunklen=300, dflt=2.5)
    t.addcol(np.array([b"xy", b"q"] * (n // 2), dtype="S2"), name="s", chunklen=700, dflt=b"zz")
    t.addcol((np.arange(n) * 3).astype(">i2"), name="be", chunklen=600, dflt=7)
    t.addcol(np.array(["\u00e9", "ab"] * (n // 2), dtype="U2"), name="u", chunklen=900,
             dflt="\u00fc!")
    t.addcol(np.arange(n) % 3 == 0, name="f", chunklen=4000, dflt=True)
    t.attrs["orig"] = 1
    t.flush()


def apply_ops(path, ops):
    """Row-level operations done by bcolz itself: {"resize": n} (ctable.resize: new rows get
    each column's dflt) or {"set": col, "start": row, "file": raw bytes of whole rows}."""
    import bcolz

    t = bcolz.open(path, mode="a")
    for op in ops:
        if "resize" in op:
            t.resize(op["resize"])
        else:
            col = t[op["set"]]
            vals = np.frombuffer(open(op["file"], "rb").read(), dtype=col.dtype)
            col[op["start"]:op["start"] + len(vals)] = vals
    t.flush()


def same_table(got, want, where):
    import bcolz

    g, w = bcolz.open(got, mode="r"), bcolz.open(want, mode="r")
    assert g.names == w.names, (where, g.names, w.names)
    assert len(g) == len(w), (where, "len", len(g), len(w))
    for c in w.names:
        assert len(g[c]) == len(w[c]), (where, c, len(g[c]), len(w[c]))
        assert g[c][:].tobytes() == w[c][:].tobytes(), (where, "column", c)
    assert g[:].tobytes() == w[:].tobytes(), (where, "rows")
    assert dict(g.attrs) == dict(w.attrs), (where, dict(g.attrs), dict(w.attrs))


def ctable_ops(spec):
    """SPEC (JSON): {"pristine": dir, "work": dir, "steps": [{"path": dir, "ops": [...]}],
    "mutate": bool}. For each step, a copy of the pristine ctable gets the ops of every step
    up to it applied by bcolz and must equal the step's table (every column, len, rows,
    attrs); with mutate, bcolz then appends rows to the last one and reads them back."""
    import shutil

    import bcolz

    s = json.load(open(spec))
    ops = []
    for k, step in enumerate(s["steps"]):
        ops += step["ops"]
        want = os.path.join(s["work"], "want%d" % k)
        shutil.copytree(s["pristine"], want)
        apply_ops(want, ops)
        same_table(step["path"], want, step["path"])
    if s.get("mutate"):
        p = s["steps"][-1]["path"]
        rows = bcolz.open(p, mode="r")[:]
        t = bcolz.open(p, mode="a")
        t.append(rows[:7])
        t.flush()
        t = bcolz.open(p, mode="r")
        assert len(t) == len(rows) + 7, (len(t), len(rows))
        assert t[:].tobytes() == rows.tobytes() + rows[:7].tobytes(), "table after append"
        for c in t.names:
            assert len(t[c]) == len(t), (c, len(t[c]), len(t))
    print(json.dumps(len(s["steps"])))


def ctable_crash(spec):
    """SPEC (JSON): {"old": dir, "new": dir, "runs": [{"path": dir, "repaired": dir}]}: every
    run's table opens, has the old or the new length, its rows are entirely the old or the new
    ones and no column is shorter than the table; its repaired copy is the same table with
    every column exactly the table's length."""
    import bcolz

    s = json.load(open(spec))
    old, new = bcolz.open(s["old"], mode="r"), bcolz.open(s["new"], mode="r")
    rows = {len(old): old[:].tobytes(), len(new): new[:].tobytes()}
    assert len(rows) == 2, "old and new must differ in length"
    for r in s["runs"]:
        for path, exact in ((r["path"], False), (r["repaired"], True)):
            t = bcolz.open(path, mode="r")
            assert len(t) in rows, (path, len(t))
            assert t[:].tobytes() == rows[len(t)], (path, "rows neither old nor new")
            for c in t.names:
                n = len(t[c])
                assert n == len(t) if exact else n >= len(t), (path, c, n, len(t))
    print(json.dumps(len(s["runs"])))


def expected(d, case):
    e = os.path.join(d, "expected", case)
    names = sorted(n for n in os.listdir(e) if n.endswith(".bin"))
    chunks = [open(os.path.join(e, n), "rb").read() for n in names]
    attrs = json.load(open(os.path.join(e, "attrs.json")))
    return chunks, attrs


def check(d):
    import blosc2
    import bcolz

    out = []
    for case in sorted(os.listdir(os.path.join(d, "expected"))):
        chunks, attrs = expected(d, case)
        p = os.path.join(d, case)
        if case.startswith(("cframe", "sframe", "b1", "b2")):
            obj = blosc2.open(p)
            sc = obj.schunk if hasattr(obj, "schunk") else obj
            assert sc.nchunks == len(chunks), (case, sc.nchunks, len(chunks))
            for i, want in enumerate(chunks):
                got = sc.decompress_chunk(i)
                assert got == want, (case, i, len(got), len(want))
            got_attrs = {k: sc.vlmeta[k] for k in sc.vlmeta.keys()}
            assert got_attrs == attrs, (case, got_attrs, attrs)
            if case.startswith("b1"):
                assert obj.shape == (len(chunks) * 4000,), (case, obj.shape)
                # python-blosc2 updates and grows the edited array
                a = blosc2.open(p, mode="a")
                a[:5] = -1
                a.resize((len(chunks) * 4000 + 10,))
                a[-10:] = 7
                a = blosc2.open(p)
                assert list(a[:6]) == [-1] * 5 + [int(np.frombuffer(chunks[0], np.int64)[5])]
                assert list(a[-10:]) == [7] * 10
            if case.startswith(("cframe", "sframe")):
                # python-blosc2 keeps working on the edited frame
                n = sc.nchunks
                sc = blosc2.open(p, mode="a")
                # (no update_data: C-Blosc2 3.3.5's update_chunk corrupts any frame whose
                # last chunk is partial, its own frames included)
                sc.append_data(np.arange(1000, dtype=np.int32))
                sc.vlmeta["after"] = 2
                sc = blosc2.open(p)
                assert sc.nchunks == n + 1
                assert sc.decompress_chunk(n) == np.arange(1000, dtype=np.int32).tobytes()
                assert sc.vlmeta["after"] == 2
        elif case == "carr":
            c = bcolz.open(p, mode="r")
            want = b"".join(chunks)
            assert c[:].tobytes() == want, (case, len(c), len(want))
            assert dict(c.attrs) == attrs, (case, dict(c.attrs), attrs)
            n = len(c)
            c = bcolz.open(p, mode="a")
            c.append(np.arange(5, dtype=np.int32))
            c.flush()
            c = bcolz.open(p, mode="r")
            assert len(c) == n + 5 and list(c[-5:]) == [0, 1, 2, 3, 4]
        elif case == "ct":
            t = bcolz.open(p, mode="r")
            want = b"".join(chunks)
            assert t["a"][:].tobytes() == want, case
            assert len(t["b"]) == len(t["a"]) == len(t)
            # rows added through column a: b holds its dflt (0.0) there, its own rows before
            assert list(t["b"][:10000]) == list(np.arange(10000, dtype=np.float64)), case
            assert not t["b"][10000:].any(), case
            assert dict(t.attrs) == attrs, (case, dict(t.attrs), attrs)
            rows = t[:]
            assert len(rows) == len(t)
            t = bcolz.open(p, mode="a")
            t.append(rows[:3])
            t.flush()
            t = bcolz.open(p, mode="r")
            assert t[:].tobytes() == rows.tobytes() + rows[:3].tobytes(), case
        out.append(case)
    print(json.dumps(out))


if __name__ == "__main__":
    {"gen": gen, "check": check, "ctable": make_ctable, "ctable_ops": ctable_ops,
     "ctable_crash": ctable_crash}[sys.argv[1]](sys.argv[2])
