"""Fixtures and reference checks for the bounded commits test (tests/it/commit_spool.rs).

    commit_spool.py gen DIR                make DIR/c.b2nd (contiguous frame), DIR/s.b2nd
                                           (sparse frame) and DIR/carr (bcolz carray): each
                                           24 chunks of 4000 int32 (arange)
    commit_spool.py check KIND PATH RAW    "same" when python-blosc2 (KIND b2nd) or bcolz
                                           (KIND bcolz) reads from PATH exactly the int32
                                           items of the file RAW, else what differs
"""
import os
import sys

import numpy as np

ITEMS = 4000
CHUNKS = 24


def gen(d):
    import bcolz
    import blosc2

    data = np.arange(ITEMS * CHUNKS, dtype=np.int32)
    for name, contiguous in (("c.b2nd", True), ("s.b2nd", False)):
        blosc2.asarray(data, chunks=(ITEMS,), blocks=(1000,), contiguous=contiguous,
                       urlpath=os.path.join(d, name), mode="w")
    c = bcolz.carray(data, chunklen=ITEMS, rootdir=os.path.join(d, "carr"), mode="w")
    c.flush()


def check(kind, path, raw):
    want = np.fromfile(raw, dtype=np.int32)
    if kind == "bcolz":
        import bcolz

        got = bcolz.open(path, mode="r")[:]
    else:
        import blosc2

        got = blosc2.open(path, mode="r")[:]
    if got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want):
        print("same")
    else:
        bad = np.flatnonzero(got != want) if got.shape == want.shape else []
        print(f"differ: {got.dtype} {got.shape} vs {want.shape}, first bad {bad[:4]}")


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        check(*sys.argv[2:5])
