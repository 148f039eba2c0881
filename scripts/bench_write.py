"""Helpers of benches/write.rs.

    bench_write.py gen PATH MIB        a contiguous frame of MIB MiB (float64, 8 MiB chunks,
                                       ZSTD clevel 1 + SHUFFLE)
    bench_write.py update PATH         seconds python-blosc2's update_data(0) takes on PATH
"""
import sys
import time

import blosc2
import numpy as np

CHUNK = 8 << 20


def gen(path, mib):
    n = CHUNK // 8
    s = blosc2.SChunk(chunksize=CHUNK, urlpath=path, contiguous=True, mode="w",
                      cparams={"codec": blosc2.Codec.ZSTD, "clevel": 1, "typesize": 8,
                               "nthreads": 2})
    rng = np.random.default_rng(0)
    for i in range(int(mib) * (1 << 20) // CHUNK):
        s.append_data(np.cumsum(rng.normal(size=n)) + i)


def update(path):
    s = blosc2.open(path, mode="a")
    data = np.full(CHUNK // 8, 1.5)
    t = time.perf_counter()
    s.update_data(0, data, copy=True)
    del s
    print(time.perf_counter() - t)


if __name__ == "__main__":
    {"gen": lambda: gen(sys.argv[2], sys.argv[3]), "update": lambda: update(sys.argv[2])}[sys.argv[1]]()
