"""Writes 2012 `blsk` carray roots as docs/BLSK.md defines them, with Blosc1 chunks made by
python-blosc (no library ever wrote this layout; this script is its reference writer).

    gen_blsk.py DIR     write DIR/flat (float64, 2-D rows, 3 superchunks, free space after
                        chunks, attributes), DIR/nested (two columns) and
                        DIR/manifest.json (sha256 of every chunk's decompressed bytes, and of
                        the rows)
"""
import hashlib
import json
import os
import struct
import sys

import numpy as np


def sha(b):
    return hashlib.sha256(bytes(b)).hexdigest()


def write_column(data_dir, arr, chunklen, superchunksize, pad):
    """Writes arr (rows along axis 0) as superchunk files; returns the chunks' shas."""
    import blosc
    os.makedirs(data_dir, exist_ok=True)
    rows = arr.shape[0]
    chunks = []
    for start in range(0, rows, chunklen):
        part = np.ascontiguousarray(arr[start:start + chunklen])
        c = blosc.compress(part.tobytes(), typesize=arr.dtype.itemsize, clevel=5,
                           shuffle=blosc.SHUFFLE, cname="blosclz")
        chunks.append((c, sha(blosc.decompress(c))))
    for n, first in enumerate(range(0, len(chunks), superchunksize), start=1):
        group = chunks[first:first + superchunksize]
        head = b"blsk" + bytes([1, 0, 0, 0]) + struct.pack("<II", arr.dtype.itemsize,
                                                             len(group))
        offset = len(head) + 8 * len(group)
        offsets, body = [], b""
        for c, _ in group:
            offsets.append(offset + len(body))
            body += c + b"\0" * pad  # free space after each chunk (the note's provision)
        with open(os.path.join(data_dir, f"__{n}__.bin"), "wb") as f:
            f.write(head + struct.pack(f"<{len(group)}Q", *offsets) + body)
    return [s for _, s in chunks]


def gen(d):
    out = {}
    flat = os.path.join(d, "flat")
    os.makedirs(os.path.join(flat, "meta"), exist_ok=True)
    arr = (np.arange(1000 * 3, dtype=np.float64) * 0.5).reshape(1000, 3)
    out["flat"] = {
        "chunks": write_column(os.path.join(flat, "data"), arr, 128, 3, pad=16),
        "data": sha(arr.tobytes()),
        "shape": list(arr.shape),
    }
    with open(os.path.join(flat, "meta", "nrows"), "w") as f:
        f.write("1000\n")
    with open(os.path.join(flat, "meta", "storage"), "w") as f:
        f.write("dtype: float64\nshape: (1000, 3)\nchunkshape: (128, 3)\n"
                "superchunksize: 3  # max. number of chunks in a single file\n"
                "endianness: little\norder: C\n"
                "compression:\n  library: blosclz\n  level: 5\n  filters: [shuffle]\n")
    with open(os.path.join(flat, "meta", "attributes"), "w") as f:
        f.write("temperature:\n  value: 23.5\n  type: scalar\n  dtype: float32\n"
                "ids:\n  value: [1,3,6,10]\n  type: array\n  dtype: int32\n")
    nested = os.path.join(d, "nested")
    os.makedirs(os.path.join(nested, "meta"), exist_ok=True)
    a = np.arange(500, dtype=np.int8)
    b = np.arange(500, dtype=np.float32) / 3
    out["nested"] = {
        "col1": {"chunks": write_column(os.path.join(nested, "data", "col1"), a, 100, 2, 0),
                 "data": sha(a.tobytes())},
        "col2": {"chunks": write_column(os.path.join(nested, "data", "col2"), b, 100, 2, 0),
                 "data": sha(b.tobytes())},
    }
    with open(os.path.join(nested, "meta", "nrows"), "w") as f:
        f.write("500\n")
    with open(os.path.join(nested, "meta", "storage"), "w") as f:
        f.write("dtype:\n  col1: int8\n  col2: float32\nchunkshape: [100]\n"
                "superchunksize: 2\n")
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    gen(sys.argv[1])
