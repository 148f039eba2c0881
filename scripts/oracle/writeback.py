"""Fixtures and reference checks for the write-back mount tests (tests/it/writeback.rs).

    writeback.py gen DIR      make the sources in DIR
    writeback.py check DIR    check DIR/<case> against DIR/expected/<case>/ with the reference
                              libraries, then modify each source with them and re-read it
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
            assert len(t["b"]) == len(t["a"])
            assert dict(t.attrs) == attrs, (case, dict(t.attrs), attrs)
        out.append(case)
    print(json.dumps(out))


if __name__ == "__main__":
    {"gen": gen, "check": check}[sys.argv[1]](sys.argv[2])
