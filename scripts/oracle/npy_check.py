"""What the reference libraries read from a source, as the bytes b2fs's array.npy holds for it
(`np.save` with the data aligned to a page: npy_ref.py).

Usage:
  npy_check.py save SRC OUT.npy      np.save(OUT, blosc2.open(SRC)[...]) (bcolz: carray[:]), data
                                     aligned to a page
  npy_check.py gen2d OUT.b2nd        a 2-D float64 b2nd whose chunk and block shapes do not
                                     divide its shape (several chunks per slab)
  npy_check.py gen2dwide OUT.b2nd    the same with rows of 8,800 bytes (over a page, not a
                                     multiple of it) and blocks narrower than a chunk
  npy_check.py gen2dtall OUT.b2nd    256 x 1024 float64 (rows of two pages), chunks of 128
                                     rows, blocks of 16 rows and one page of a row
  npy_check.py gen2dscan OUT SEED    1024 x 2048 float64 (16 MiB; rows of 4 pages), chunks of
                                     256 x 512, blocks of 16 x 512: values from SEED
  npy_check.py gen3dbands OUT.b2nd   a 3-D int32 b2nd (37 x 90 x 130) whose chunk and block
                                     shapes divide none of its dimensions (edge chunks, short
                                     last blocks of a chunk)
  npy_check.py gen2dbigbands OUT     12 x 131072 float64 (rows of 1 MiB), chunks of 6 rows,
                                     blocks of 5: bands of 5 MiB and 1 MiB in turn
  npy_check.py sha SRC               the sha256 of the reference's array bytes (C order)
  npy_check.py genbcolz2d OUT        the gen2d values as a bcolz carray (chunks of 37 rows)
  npy_check.py mount MNT SRC         through a mounted SRC: np.load of MNT/array.npy equals
                                     the reference; 200 random windows of np.load(mmap_mode='r')
                                     equal the reference's; prints "ok N"
  npy_check.py edit MNT EXPECT.npy   edits MNT/array.npy with os.pwrite and with
                                     np.load(mmap_mode='r+') + flush, saves what the array
                                     should now be to EXPECT.npy
  npy_check.py mmapall MNT EXPECT.npy  np.load(mmap_mode='r+') of MNT/array.npy, every item
                                     replaced (-x - 0.25), flush; saves what the array should
                                     now be to EXPECT.npy; prints "ok PEAK SPILLS" (the mount
                                     root's user.b2fs.edit_peak_bytes and edit_spills)
  npy_check.py same SRC EXPECT.npy   prints "same" when the reference reads EXPECT from SRC
"""

import os
import sys

import numpy as np

import npy_ref


def read_ref(src):
    if os.path.isdir(src) and os.path.exists(os.path.join(src, "meta", "sizes")):
        import bcolz

        return bcolz.open(src, mode="r")[:]
    import blosc2

    return blosc2.open(src, mode="r")[...]


def main():
    cmd = sys.argv[1]
    if cmd == "save":
        npy_ref.save(sys.argv[3], read_ref(sys.argv[2]))
    elif cmd == "gen2d":
        import blosc2

        out = sys.argv[2]
        a = np.arange(230 * 170, dtype=np.float64).reshape(230, 170) * 0.5
        blosc2.asarray(a, urlpath=out, mode="w", chunks=(60, 50), blocks=(16, 24))
    elif cmd == "gen2dwide":
        import blosc2

        out = sys.argv[2]
        a = np.arange(300 * 1100, dtype=np.float64).reshape(300, 1100) * 0.25
        blosc2.asarray(a, urlpath=out, mode="w", chunks=(70, 300), blocks=(20, 120))
    elif cmd == "gen2dtall":
        import blosc2

        out = sys.argv[2]
        a = np.arange(256 * 1024, dtype=np.float64).reshape(256, 1024) * 0.5
        blosc2.asarray(a, urlpath=out, mode="w", chunks=(128, 1024), blocks=(16, 512))
    elif cmd == "gen2dscan":
        import blosc2

        out, seed = sys.argv[2], int(sys.argv[3])
        a = np.random.default_rng(seed).standard_normal((1024, 2048)).round(2)
        blosc2.asarray(a, urlpath=out, mode="w", chunks=(256, 512), blocks=(16, 512))
    elif cmd == "gen1dscan":
        import blosc2

        # The same 16 MiB as gen2dscan, one axis: chunks of 2 MiB, blocks of 128 KiB.
        out, seed = sys.argv[2], int(sys.argv[3])
        a = np.random.default_rng(seed).standard_normal(1024 * 2048).round(2)
        blosc2.asarray(a, urlpath=out, mode="w", chunks=(256 * 1024,), blocks=(16 * 1024,))
    elif cmd == "gen3dbands":
        import blosc2

        out = sys.argv[2]
        a = (np.arange(37 * 90 * 130, dtype=np.int32) * 7 - 1000).reshape(37, 90, 130)
        blosc2.asarray(a, urlpath=out, mode="w", chunks=(16, 40, 64), blocks=(5, 16, 32))
    elif cmd == "gen2dbigbands":
        import blosc2

        out = sys.argv[2]
        a = np.arange(12 * 131072, dtype=np.float64).reshape(12, 131072) * 0.5
        blosc2.asarray(a, urlpath=out, mode="w", chunks=(6, 65536), blocks=(5, 8192))
    elif cmd == "sha":
        import hashlib

        print(hashlib.sha256(np.ascontiguousarray(read_ref(sys.argv[2])).tobytes()).hexdigest())
    elif cmd == "genbcolz2d":
        import bcolz

        out = sys.argv[2]
        a = np.arange(230 * 170, dtype=np.float64).reshape(230, 170) * 0.5
        bcolz.carray(a, rootdir=out, mode="w", chunklen=37).flush()
    elif cmd == "mount":
        mnt, src = sys.argv[2], sys.argv[3]
        ref = read_ref(src)
        got = np.load(os.path.join(mnt, "array.npy"))
        assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
        assert got.shape == ref.shape, (got.shape, ref.shape)
        assert np.array_equal(got, ref), "np.load differs"
        m = np.load(os.path.join(mnt, "array.npy"), mmap_mode="r")
        rng = np.random.default_rng(7)
        n = 0
        for _ in range(200):
            sl = []
            for d in ref.shape:
                a = int(rng.integers(0, d))
                b = int(rng.integers(a, min(d, a + 64) + 1))
                sl.append(slice(a, b))
            sl = tuple(sl)
            assert np.array_equal(np.asarray(m[sl]), ref[sl]), f"window {sl} differs"
            n += 1
        print("ok", n)
    elif cmd == "edit":
        mnt, expect = sys.argv[2], sys.argv[3]
        path = os.path.join(mnt, "array.npy")
        cur = np.load(path)
        want = cur.copy()
        # 1. os.pwrite of a run of items across a chunk edge (rows 55..65 of column 3..120).
        m = np.load(path, mmap_mode="r")
        off = m.offset
        del m
        fd = os.open(path, os.O_RDWR)
        try:
            row = 58
            start = row * cur.shape[1] + 3
            vals = np.arange(117, dtype=cur.dtype) + 1000.25
            os.pwrite(fd, vals.tobytes(), off + start * cur.itemsize)
            want.reshape(-1)[start:start + vals.size] = vals
            os.fsync(fd)
        finally:
            os.close(fd)
        # 2. mmap r+: a block across four chunks, then flush.
        w = np.load(path, mmap_mode="r+")
        w[50:70, 40:60] = -7.0
        w.flush()
        del w
        want[50:70, 40:60] = -7.0
        np.save(expect, want)
        got = np.load(path)
        assert np.array_equal(got, want), "the mount does not show the edits"
        print("ok")
    elif cmd == "mmapall":
        mnt, expect = sys.argv[2], sys.argv[3]
        path = os.path.join(mnt, "array.npy")
        want = -np.load(path) - 0.25
        w = np.load(path, mmap_mode="r+")
        w[...] = -w - 0.25
        w.flush()
        del w
        np.save(expect, want)
        got = np.load(path)
        assert np.array_equal(got, want), "the mount does not show the edits"
        peak, spills = (
            int(os.getxattr(mnt, "user.b2fs." + k)) for k in ("edit_peak_bytes", "edit_spills")
        )
        print("ok", peak, spills)
    elif cmd == "same":
        ref = read_ref(sys.argv[2])
        want = np.load(sys.argv[3])
        print("same" if ref.dtype == want.dtype and np.array_equal(ref, want) else "differs")
    else:
        raise SystemExit(f"unknown command {cmd}")


main()
