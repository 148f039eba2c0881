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

The parts: this file holds the command line; zarr_reads.py the readers' checks (read, fake,
distributed); zarr_writes.py the chunk writes (write, tswrite, readonly, crashwrite);
zarr_edits.py the attribute edits and resizes (attrs, nanattrs, append, append3d).
"""

import sys

from zarr_edits import append, append3d, attrs, nanattrs
from zarr_reads import distributed, fake, read
from zarr_writes import crashwrite, readonly, tswrite, write


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
