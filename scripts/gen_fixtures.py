#!/usr/bin/env python3
"""Regenerates every reference-made fixture under tests/data/ (and examples/sample.b2nd).

Run from the repository root:

    .venv/bin/python scripts/gen_fixtures.py

Pinned reference libraries (the venv made by scripts/setup.sh):
    python-blosc2 4.14.1 (C-Blosc2 3.3.5), python-blosc 1.11.4 (C-Blosc 1.21.x),
    bcolz-zipline 1.13.0 (C-Blosc 1.21.x), caterva 0.7.3, numpy 2.x, msgpack.

Deterministic: every input comes from fixed seeds. The *compressed* bytes of the few chunks
written with nthreads=2 depend on thread timing (block order), but what they decompress to
does not. Everything under tests/data/ except README.md and the *-regressions directories is
deleted first.

See tests/data/README.md for the layout, the manifest columns and the sidecar JSON schema.
"""

import base64
import hashlib
import json
import math
import os
import shutil
import struct
import sys

import numpy as np

import blosc2
import blosc2.blosc2_ext as b2ext
import blosc
import bcolz
import msgpack

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
EXAMPLES = os.path.join(ROOT, "examples")

sys.path.insert(0, os.path.join(ROOT, "scripts", "oracle"))
import common  # noqa: E402  (scripts/oracle/common.py: shared chunk-making helpers)

from common import (  # noqa: E402
    CODECS,
    CODEC_ENUM,
    B1_CODECS,
    MANIFEST_COLUMNS,
    SPLITMODES,
    filter_pipeline,
    make_data,
    make_b2_case,
    make_b1_case,
    sha256,
    write_manifest,
)

blosc2.set_nthreads(1)
blosc.set_nthreads(1)


def versions():
    return {
        "blosc2": blosc2.__version__,
        "c_blosc2": blosc2.blosclib_version.split()[0],
        "blosc": blosc.__version__,
        "c_blosc": blosc.blosclib_version.split()[0] if hasattr(blosc, "blosclib_version") else "?",
        "bcolz": bcolz.__version__,
        "numpy": np.__version__,
    }


def clean_output():
    os.makedirs(DATA, exist_ok=True)
    for entry in os.listdir(DATA):
        # Kept: the README and inputs recorded by fuzzing and property tests.
        if entry == "README.md" or entry.endswith("-regressions"):
            continue
        p = os.path.join(DATA, entry)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.remove(p)


# --------------------------------------------------------------------------------------------
# a) chunk matrix
# --------------------------------------------------------------------------------------------

TYPESIZES = [1, 2, 3, 4, 8, 16, 17]
CLEVELS = [0, 1, 5, 9]
DATAKINDS = ["arange", "floatnoise", "random", "zeros", "constant", "text"]
BLOCKSIZES = ["auto", "3000", "4096+ts", "999"]
PIPELINES = ["none", "shuffle", "bitshuffle", "delta_shuffle", "truncprec_shuffle",
             "shuffle_bytedelta", "shuffle_meta"]
SIZES = [777, 4099, 12345, 30000, 40001, 65536, 100003]


THREAD_LOG = []


class Cycler:
    """Hands out the values of a list in a seeded shuffled order, reshuffling after each pass,
    so every value appears (almost) equally often across the matrix."""

    def __init__(self, values, rng):
        self.values = list(values)
        self.rng = rng
        self.pending = []

    def next(self):
        if not self.pending:
            self.pending = list(self.values)
            self.rng.shuffle(self.pending)
        return self.pending.pop()


def gen_chunk_matrix():
    out = os.path.join(DATA, "chunks")
    quirks = os.path.join(out, "quirks")
    os.makedirs(quirks)
    rng = np.random.default_rng(20260101)
    cyc = {
        "split": Cycler(SPLITMODES, rng),
        "clevel": Cycler(CLEVELS, rng),
        "kind": Cycler(DATAKINDS, rng),
        "bs": Cycler(BLOCKSIZES, rng),
        "size": Cycler(SIZES, rng),
    }
    rows, quirk_rows = [], []
    n = 0

    def add(case, dest_rows, dest_dir):
        with open(os.path.join(dest_dir, case["name"] + ".chunk"), "wb") as f:
            f.write(case.pop("_chunk"))
        dest_rows.append(case)

    # 1. covering design: every codec x pipeline x typesize cell at least once (twice for the
    #    cells that are most interesting to a decoder); other dimensions cycle.
    for codec in CODECS:
        for pipe in PIPELINES:
            for ts in TYPESIZES:
                if pipe == "truncprec_shuffle" and ts not in (4, 8):
                    continue
                reps = 2 if (pipe in ("shuffle", "bitshuffle") and ts in (4, 8)) else 1
                for _ in range(reps):
                    kind = cyc["kind"].next()
                    size = cyc["size"].next()
                    clevel = cyc["clevel"].next()
                    if kind == "random" or clevel == 0:
                        size = min(size, 20000)
                    bsreq = cyc["bs"].next()
                    bs = {"auto": 0, "3000": 3000, "4096+ts": 4096 + ts, "999": 999}[bsreq]
                    note = []
                    if bs % ts:
                        # C-Blosc2 3.3.5 writes broken chunks when a forced blocksize is not a
                        # multiple of typesize (docs/format/CHUNK.md 6.2); round it down.
                        note.append(f"blocksize {bs} rounded down to a multiple of {ts}")
                        bs -= bs % ts
                    size = common.fix_size_for_pipeline(pipe, ts, size, note)
                    case = make_b2_case(
                        name=f"m{n:03d}_{codec}_{pipe}_t{ts}",
                        codec=codec, clevel=clevel, pipe=pipe, ts=ts,
                        split=cyc["split"].next(), blocksize=bs, kind=kind, nbytes=size,
                        seed=1000 + n, nthreads=1, note=note,
                    )
                    n += 1
                    if case["check"] != "ok":
                        # keep the failing input as a quirk and redo the cell with an automatic
                        # blocksize so that every cell has a good chunk in the main manifest
                        add(case, quirk_rows, quirks)
                        case = make_b2_case(
                            name=f"m{n:03d}_{codec}_{pipe}_t{ts}",
                            codec=codec, clevel=clevel, pipe=pipe, ts=ts, split=case["splitmode"],
                            blocksize=0, kind=kind, nbytes=size, seed=1000 + n, nthreads=1,
                            note=[f"redo of the quirk before it with blocksize 0"],
                        )
                        n += 1
                    assert case["check"] == "ok", case["name"]
                    add(case, rows, out)

    # 2. edge sizes: 0, < typesize, < 32, not a multiple of typesize, short last blocks
    edge = [
        # (codec, pipe, ts, split, clevel, bs, kind, nbytes)
        ("blosclz", "shuffle", 1, "AUTO", 5, 0, "text", 0),
        ("zstd", "shuffle", 4, "AUTO", 5, 0, "arange", 0),
        ("lz4", "none", 8, "NEVER", 9, 0, "random", 0),
        ("lz4", "shuffle", 8, "AUTO", 5, 0, "arange", 5),
        ("zstd", "bitshuffle", 16, "AUTO", 5, 0, "arange", 15),
        ("zlib", "shuffle", 17, "ALWAYS", 1, 0, "random", 3),
        ("blosclz", "shuffle", 4, "AUTO", 5, 0, "arange", 1),
        ("blosclz", "shuffle", 4, "AUTO", 5, 0, "arange", 31),
        ("lz4", "bitshuffle", 4, "AUTO", 9, 0, "text", 31),
        ("zstd", "none", 1, "AUTO", 5, 0, "text", 32),
        ("zstd", "shuffle", 4, "ALWAYS", 5, 0, "arange", 33),
        ("lz4", "shuffle", 4, "ALWAYS", 5, 0, "arange", 34),
        ("blosclz", "bitshuffle", 4, "AUTO", 5, 0, "arange", 35),
        ("lz4hc", "shuffle", 8, "AUTO", 5, 0, "floatnoise", 63),
        ("zlib", "bitshuffle", 2, "AUTO", 5, 0, "arange", 127),
        ("blosclz", "shuffle", 4, "ALWAYS", 5, 4096, "arange", 4096 * 5 + 100),
        ("lz4", "shuffle", 4, "ALWAYS", 5, 4096, "arange", 4096 * 5 + 3),
        ("lz4", "bitshuffle", 4, "AUTO", 5, 4096, "arange", 4096 * 5 + 7),
        ("zstd", "bitshuffle", 8, "AUTO", 5, 4096, "floatnoise", 4096 * 3 + 40),
        ("blosclz", "bitshuffle", 4, "AUTO", 5, 4096, "arange", 4096 * 3 + 33),
        ("zstd", "shuffle", 8, "ALWAYS", 5, 8192, "floatnoise", 8192 * 4 + 8),
        ("zlib", "delta_shuffle", 4, "AUTO", 5, 4096, "arange", 4096 * 6 + 64),
        ("lz4hc", "delta_shuffle", 8, "ALWAYS", 9, 2048, "arange", 2048 * 9 + 8),
        ("blosclz", "delta_shuffle", 2, "NEVER", 5, 1000, "arange", 1000 * 7 + 2),
        ("zstd", "shuffle_bytedelta", 4, "AUTO", 5, 4096, "floatnoise", 4096 * 5 + 6),
        ("lz4", "shuffle_bytedelta", 8, "ALWAYS", 5, 4096, "floatnoise", 4096 * 2 + 13),
        ("blosclz", "shuffle_meta", 8, "ALWAYS", 5, 4096, "arange", 4096 * 3 + 20),
        ("blosclz", "none", 1, "AUTO", 9, 0, "constant", 1000),
        ("blosclz", "shuffle", 4, "ALWAYS", 5, 0, "constant", 40000),
        ("zstd", "shuffle", 4, "AUTO", 5, 0, "zeros", 40000),
        ("lz4", "shuffle", 8, "ALWAYS", 1, 0, "zeros", 80000),
        ("zstd", "shuffle", 8, "AUTO", 9, 0, "arange", 1 << 20),
        ("blosclz", "shuffle", 4, "AUTO", 9, 0, "floatnoise", 150000),
        ("lz4", "bitshuffle", 1, "AUTO", 5, 0, "text", 20001),
        ("zstd", "shuffle", 300, "AUTO", 5, 0, "arange", 300 * 133),
        ("lz4", "shuffle", 255, "ALWAYS", 5, 0, "arange", 255 * 200 + 7),
        ("zstd", "truncprec_neg_shuffle", 4, "AUTO", 5, 0, "floatnoise", 40000),
        ("lz4", "truncprec_neg_shuffle", 8, "ALWAYS", 5, 4096, "floatnoise", 4096 * 4),
        ("blosclz", "delta", 4, "AUTO", 5, 4096, "arange", 4096 * 5 + 8),
        ("zstd", "delta", 8, "NEVER", 5, 0, "floatnoise", 30000),
        ("lz4", "delta_bitshuffle", 4, "AUTO", 5, 4096, "arange", 4096 * 4 + 12),
        ("blosclz", "shuffle_delta", 4, "ALWAYS", 5, 4096, "arange", 4096 * 4),
        ("zlib", "bitshuffle_shuffle", 4, "AUTO", 5, 0, "floatnoise", 20000),
        ("lz4", "none", 4, "ALWAYS", 5, 0, "random", 40000),
        ("blosclz", "shuffle", 4, "AUTO", 9, 0, "random", 5000),
        ("zstd", "shuffle", 2, "FORWARD_COMPAT", 5, 0, "arange", 70000),
        ("lz4", "bitshuffle", 8, "FORWARD_COMPAT", 3, 0, "floatnoise", 50000),
    ]
    for codec, pipe, ts, split, clevel, bs, kind, size in edge:
        note = []
        size = common.fix_size_for_pipeline(pipe, ts, size, note)
        case = make_b2_case(
            name=f"e{n:03d}_{codec}_{pipe}_t{ts}_n{size}",
            codec=codec, clevel=clevel, pipe=pipe, ts=ts, split=split, blocksize=bs,
            kind=kind, nbytes=size, seed=1000 + n, nthreads=1, note=note,
        )
        n += 1
        add(case, rows if case["check"] == "ok" else quirk_rows, out if case["check"] == "ok" else quirks)

    # 2b. BLOSC_BLOSC1_COMPAT chunks: C-Blosc2 writing a 16-byte header with version 5
    for codec, filt, ts, kind, size in [
        ("lz4", 1, 4, "arange", 40000), ("blosclz", 2, 8, "floatnoise", 30000),
        ("zstd", 0, 1, "text", 20000), ("zlib", 1, 2, "arange", 9998), ("lz4hc", 3, 4, "arange", 16000),
        ("blosclz", 1, 4, "arange", 100),
    ]:
        case = common.make_b1compat_case(
            name=f"c{n:03d}_{codec}_b1compat_f{filt}_t{ts}", codec=codec, clevel=5, filt=filt, ts=ts,
            kind=kind, nbytes=size, seed=1000 + n)
        n += 1
        add(case, rows if case["check"] == "ok" else quirk_rows, out if case["check"] == "ok" else quirks)

    # 3. nthreads=2 on multi-block inputs: block order in the body is completion order
    for i, (codec, pipe, ts, kind, size, bs) in enumerate([
        ("lz4", "shuffle", 4, "arange", 1 << 20, 4096),
        ("blosclz", "shuffle", 4, "arange", 1 << 20, 4096),
        ("zstd", "bitshuffle", 8, "arange", 400000, 4096),
        ("zlib", "none", 1, "text", 200000, 4096),
        ("lz4hc", "shuffle", 8, "arange", 1 << 20, 8192),
        ("zstd", "delta_shuffle", 4, "arange", 1 << 20, 4096),
    ]):
        # the block order depends on thread timing: retry a few times to catch a
        # non-monotonic bstarts table, and say in the note what happened
        for attempt in range(1, 41):
            note = []
            case = make_b2_case(
                name=f"t{n:03d}_{codec}_{pipe}_t{ts}_nthreads2",
                codec=codec, clevel=5, pipe=pipe, ts=ts, split="AUTO", blocksize=bs, kind=kind,
                nbytes=size, seed=1000 + n, nthreads=2, note=note,
            )
            if case["bstarts_order"] == "NON-MONOTONIC":
                break
        case["note"] += f"; nthreads=2 attempt {attempt}: bstarts {case['bstarts_order']}"
        THREAD_LOG.append((case["name"], attempt, case["bstarts_order"]))
        n += 1
        add(case, rows if case["check"] == "ok" else quirk_rows, out if case["check"] == "ok" else quirks)

    # 4. special-value chunks read back raw out of super-chunks
    for case in common.special_cases(start=n):
        n += 1
        add(case, rows, out)

    # 5. dictionary chunks
    for codec in ["zstd", "lz4", "lz4hc"]:
        for size, bs in [(200000, 16384)] + ([(700000, 0)] if codec == "zstd" else [(120000, 0)]):
            note = []
            case = make_b2_case(
                name=f"d{n:03d}_{codec}_dict_n{size}",
                codec=codec, clevel=5, pipe="none" if codec != "lz4" else "shuffle", ts=1,
                split="AUTO", blocksize=bs, kind="text", nbytes=size, seed=1000 + n,
                nthreads=1, note=note, use_dict=True,
            )
            n += 1
            add(case, rows if case["check"] == "ok" else quirk_rows, out if case["check"] == "ok" else quirks)

    # 6. VL-block chunks (python-blosc2 4.14 exposes blosc2_ext.vlcompress)
    for case in common.vl_cases(start=n):
        n += 1
        add(case, rows if case["check"] == "ok" else quirk_rows, out if case["check"] == "ok" else quirks)

    # 7. Blosc1 chunks from python-blosc 1.11
    for case in blosc1_cases(start=n):
        n += 1
        add(case, rows if case["check"] == "ok" else quirk_rows, out if case["check"] == "ok" else quirks)

    # 7b. Blosc1 chunks written by bcolz (the .blp files minus their 16-byte prefix)
    for case in bcolz_chunk_cases(start=n):
        n += 1
        add(case, rows, out)

    # 8. quirks: inputs the C library itself gets wrong (not in the main manifest)
    for case in common.quirk_cases(start=n):
        n += 1
        add(case, quirk_rows, quirks)

    write_manifest(os.path.join(out, "MANIFEST.tsv"), rows)
    write_manifest(os.path.join(quirks, "MANIFEST.tsv"), quirk_rows)
    return rows, quirk_rows


def bcolz_chunk_cases(start):
    import tempfile
    n = start
    with tempfile.TemporaryDirectory() as tmp:
        for cname in ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]:
            for shuffle in (0, 1, 2):
                dt = ["<f8", "<i4", "<i2"][shuffle]
                npa = (np.arange(700 + 3 * n) * 1.5).astype(dt)
                root = os.path.join(tmp, f"{cname}{shuffle}")
                ca = bcolz.carray(npa, rootdir=root, mode="w", chunklen=256,
                                  cparams=bcolz.cparams(clevel=[9, 5, 1][shuffle], shuffle=shuffle, cname=cname))
                ca.flush()
                del ca
                files = sorted(os.listdir(os.path.join(root, "data")), key=lambda s: int(s[2:].split(".")[0]))
                # the first full chunk and the leftover chunk
                for fname in (files[0], files[-1]):
                    with open(os.path.join(root, "data", fname), "rb") as f:
                        chunk = f.read()[16:]
                    expected = blosc.decompress(chunk)
                    row = common._row(
                        f"z{n:03d}_bcolz_{cname}_s{shuffle}_{fname.split('.')[0].strip('_')}", "blosc1", cname,
                        [9, 5, 1][shuffle], np.dtype(dt).itemsize, "-", 0, "bcolz", 1, expected, chunk,
                        expected, "yes", [f"bcolz-zipline 1.13 data/{fname} without the blpk prefix"])
                    n += 1
                    yield row


def blosc1_cases(start):
    n = start
    kinds = ["arange", "floatnoise", "text", "random", "constant", "zeros"]
    k = 0
    # every 1.x codec x shuffle mode, a few typesizes and sizes
    for codec in B1_CODECS:
        for shuf in (0, 1, 2):
            for ts, size in [(4, 40000), (8, 65536 + 24), (1, 9999), (2, 300001 if shuf == 1 else 30001)]:
                kind = kinds[k % len(kinds)]
                k += 1
                if kind == "random":
                    size = min(size, 20000)
                clevel = [5, 1, 9, 0][k % 4]
                yield make_b1_case(
                    name=f"b{n:03d}_{codec}_s{shuf}_t{ts}", codec=codec, clevel=clevel, shuffle=shuf,
                    ts=ts, kind=kind, nbytes=size, seed=5000 + n, blocksize=0,
                )
                n += 1
    # bitshuffle with leftover blocks of 1-3 bytes (C-Blosc2 decodes those tails wrongly)
    for codec in B1_CODECS:
        for size in (40033, 12321, 12291, 1048609 if codec in ("lz4", "blosclz") else 70001):
            yield make_b1_case(
                name=f"b{n:03d}_{codec}_bitshuffle_tail_n{size}", codec=codec, clevel=5, shuffle=2,
                ts=4, kind="arange", nbytes=size, seed=5000 + n, blocksize=0,
                note=["bitshuffle v2 leftover tail"],
            )
            n += 1
    # blosc.set_blocksize variations
    for codec, shuf, ts, size, bs in [
        ("lz4", 2, 4, 12321, 4096),
        ("blosclz", 1, 4, 40033, 4096),
        ("zstd", 1, 8, 100000, 8192),
        ("zlib", 0, 1, 50000, 3000),
        ("lz4hc", 2, 8, 70000, 16384),
        ("blosclz", 2, 4, 20000, 999),
        ("lz4", 1, 16, 65536, 200),
        ("zstd", 2, 2, 33335, 128),
    ]:
        yield make_b1_case(
            name=f"b{n:03d}_{codec}_s{shuf}_t{ts}_bs{bs}", codec=codec, clevel=5, shuffle=shuf, ts=ts,
            kind="arange" if n % 2 else "floatnoise", nbytes=size, seed=5000 + n, blocksize=bs,
        )
        n += 1
    # tiny and empty inputs, typesize > 16 (no split in 1.x)
    for codec, shuf, ts, size in [
        ("blosclz", 1, 4, 0), ("lz4", 0, 1, 5), ("zstd", 2, 8, 127), ("zlib", 1, 4, 128),
        ("lz4hc", 1, 17, 17 * 300), ("blosclz", 1, 32, 32 * 500), ("lz4", 2, 3, 3 * 1000 + 1),
    ]:
        yield make_b1_case(
            name=f"b{n:03d}_{codec}_s{shuf}_t{ts}_n{size}", codec=codec, clevel=5, shuffle=shuf, ts=ts,
            kind="arange", nbytes=size, seed=5000 + n, blocksize=0,
        )
        n += 1
    # nthreads=2 (1.x also appends blocks in completion order)
    for codec in ("lz4", "blosclz"):
        for attempt in range(1, 41):
            case = make_b1_case(
                name=f"b{n:03d}_{codec}_nthreads2", codec=codec, clevel=5, shuffle=1, ts=4,
                kind="arange", nbytes=1 << 20, seed=5000 + n, blocksize=8192, nthreads=2,
            )
            if case["bstarts_order"] == "NON-MONOTONIC":
                break
        case["note"] += f"; nthreads=2 attempt {attempt}: bstarts {case['bstarts_order']}"
        THREAD_LOG.append((case["name"], attempt, case["bstarts_order"]))
        yield case
        n += 1


# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# JSON encoding of msgpack values (metalayers, vlmeta/attrs)
#
#   bytes/bin            -> {"__bytes__": "<base64>"}
#   tuple                -> {"__tuple__": [...]}   (python-blosc2 stores a list whose first
#                                                   element is the string "__tuple__")
#   ext 44 (complex)     -> {"__complex__": [re, im]}
#   ext 45 (set)         -> {"__set__": [...]}      (the stored list, in stored order)
#   ext 46 (numpy array) -> {"__ndarray__": <the decoded inner map>}
#   other ext            -> {"__ext__": code, "data": "<base64>"}
#   non-finite float     -> {"__float__": "nan" | "inf" | "-inf"}
#   map with a non-str key -> {"__map__": [[key, value], ...]}


class _Ext:
    def __init__(self, code, data):
        self.code, self.data = code, data


def _unpack(raw):
    return msgpack.unpackb(raw, raw=False, strict_map_key=False, use_list=True,
                           ext_hook=lambda code, data: _Ext(code, data))


def jsonable(v):
    if isinstance(v, _Ext):
        if v.code == 44:
            re_, im = struct.unpack(">dd", v.data)
            return {"__complex__": [jsonable(re_), jsonable(im)]}
        if v.code == 45:
            return {"__set__": jsonable(_unpack(v.data))}
        if v.code == 46:
            return {"__ndarray__": jsonable(_unpack(v.data))}
        return {"__ext__": v.code, "data": base64.b64encode(v.data).decode()}
    if isinstance(v, (bytes, bytearray)):
        return {"__bytes__": base64.b64encode(bytes(v)).decode()}
    if isinstance(v, list):
        if v and isinstance(v[0], str) and v[0] == "__tuple__":
            return {"__tuple__": [jsonable(x) for x in v[1:]]}
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v):
            return {k: jsonable(x) for k, x in v.items()}
        return {"__map__": [[jsonable(k), jsonable(x)] for k, x in v.items()]}
    if isinstance(v, float) and not math.isfinite(v):
        return {"__float__": "nan" if v != v else ("inf" if v > 0 else "-inf")}
    return v


def b64(b):
    return base64.b64encode(bytes(b)).decode()


# --------------------------------------------------------------------------------------------
# frame sidecars


def _special_name(chunk):
    if len(chunk) >= 32 and (chunk[2] & 0x05) == 0x05:
        return {0: None, 1: "zeros", 2: "nan", 3: "value", 4: "uninit"}.get((chunk[31] >> 4) & 7)
    return None


def parse_frame_file(path):
    """Reads the raw frame layout (docs/format/CONTAINERS.md 1.2-1.6) for the sidecar's 'layout' block."""
    with open(path, "rb") as f:
        buf = f.read()
    header_len = struct.unpack_from(">i", buf, 11)[0]
    frame_len = struct.unpack_from(">Q", buf, 16)[0]
    nbytes = struct.unpack_from(">q", buf, 30)[0]
    cbytes = struct.unpack_from(">q", buf, 39)[0]
    chunksize = struct.unpack_from(">i", buf, 58)[0]
    trailer_len = struct.unpack_from(">I", buf, frame_len - 22)[0]
    sparse = buf[26] == 1
    layout = {
        "file_len": len(buf), "header_len": header_len, "frame_len": frame_len,
        "trailer_len": trailer_len, "general_flags": buf[25], "frame_type": buf[26],
        "codec_flags": buf[27], "other_flags": buf[28], "header_nbytes": nbytes,
        "header_cbytes": cbytes, "header_chunksize": chunksize,
        "header_typesize": struct.unpack_from(">i", buf, 48)[0],
        "header_blocksize": struct.unpack_from(">i", buf, 53)[0],
        "header_filters": list(buf[71:77]), "header_udcodec": buf[77],
        "header_filters_meta": list(buf[79:85]), "has_vlmeta": buf[68] == 0xC3,
        "index_entries": [],
    }
    if nbytes > 0:
        istart = header_len if sparse else header_len + cbytes
        iend = frame_len - trailer_len
        idx = blosc2.decompress2(buf[istart:iend])
        layout["index_pos"] = istart
        layout["index_chunk_cbytes"] = struct.unpack_from("<i", buf, istart + 12)[0]
        layout["index_chunk_flags"] = buf[istart + 2]
        layout["index_chunk_special"] = _special_name(buf[istart:iend])
        layout["index_entries"] = list(struct.unpack(f"<{len(idx) // 8}q", idx))
    return layout


def schunk_sidecar(name, source, sc, kind, made_by, arr=None, extra=None, notes=None):
    path = os.path.join(DATA, "frames", source) if not source.startswith("/") else source
    chunks = []
    whole = hashlib.sha256()
    for i in range(sc.nchunks):
        raw = sc.get_chunk(i)
        special = _special_name(raw)
        data = bytes(sc.decompress_chunk(i))
        if special == "uninit":
            data = bytes(len(data))
        whole.update(data)
        chunks.append({
            "index": i, "nbytes": len(data), "cbytes": struct.unpack_from("<i", raw, 12)[0],
            "sha256": sha256(data), "special": special,
        })
    metalayers, metalayers_raw = {}, {}
    for key in sc.meta.keys():
        raw = b2ext.meta__getitem__(sc, key)
        metalayers_raw[key] = b64(raw)
        metalayers[key] = jsonable(_unpack(raw))
    vlmeta, vlmeta_raw = {}, {}
    for key in list(sc.vlmeta):
        raw = sc.vlmeta.get_vlmeta(key)
        vlmeta_raw[key] = b64(raw)
        vlmeta[key] = jsonable(_unpack(raw))
    car = {
        "name": name,
        "source": source,
        "kind": kind,
        "made_by": made_by,
        "python_type": type(arr).__name__ if arr is not None else "SChunk",
        "nchunks": sc.nchunks,
        "typesize": sc.typesize,
        "chunksize": sc.chunksize,
        "blocksize": sc.blocksize,
        "nbytes": sc.nbytes,
        "cbytes": sc.cbytes,
        "cparams": {
            "codec": sc.cparams.codec.name, "clevel": sc.cparams.clevel,
            "filters": [int(getattr(x, "value", x)) for x in sc.cparams.filters],
            "filters_meta": [int(x) for x in sc.cparams.filters_meta],
            "splitmode": sc.cparams.splitmode.name,
        },
        "shape": list(arr.shape) if arr is not None else None,
        "chunks": list(arr.chunks) if arr is not None else None,
        "blocks": list(arr.blocks) if arr is not None else None,
        "dtype": str(arr.dtype) if arr is not None else None,
        "dtype_b2nd": None,
        "metalayers": metalayers,
        "metalayers_msgpack_b64": metalayers_raw,
        "vlmeta": vlmeta,
        "vlmeta_msgpack_b64": vlmeta_raw,
        "chunk_list": chunks,
        "chunks_sha256": whole.hexdigest(),
        "array_sha256": None,
        "layout": None,
        "notes": notes or [],
    }
    if "b2nd" in metalayers:
        car["dtype_b2nd"] = metalayers["b2nd"][6]
    if arr is not None:
        car["array_sha256"] = sha256(np.ascontiguousarray(arr[...]).tobytes())
    if kind == "cframe":
        car["layout"] = parse_frame_file(path)
    elif kind == "sframe":
        car["layout"] = parse_frame_file(os.path.join(path, "chunks.b2frame"))
        car["layout"]["chunk_files"] = sorted(os.listdir(path))
    if extra:
        car.update(extra)
    return car


def write_sidecar(dirpath, name, car):
    with open(os.path.join(dirpath, name + ".json"), "w") as f:
        json.dump(car, f, indent=1)
        f.write("\n")


def append_all(sc, data, chunksize):
    for i in range(0, len(data), chunksize):
        sc.append_data(data[i:i + chunksize])


def gen_frames():
    fdir = os.path.join(DATA, "frames")
    os.makedirs(fdir)
    count = 0

    def p(fname):
        return os.path.join(fdir, fname)

    def done(name, source, obj, kind="cframe", arr=None, made_by="python-blosc2 4.14.1", **kw):
        nonlocal count
        sc = obj if arr is None else arr.schunk
        write_sidecar(fdir, name, schunk_sidecar(name, source, sc, kind, made_by, arr=arr, **kw))
        count += 1

    # SChunk cframes, one per codec (fixed chunksize, last chunk partial)
    specs = [
        ("blosclz", 4, [blosc2.Filter.SHUFFLE], "arange", 10000 * 4 * 3 + 400),
        ("lz4", 8, [blosc2.Filter.BITSHUFFLE], "floatnoise", 8000 * 8 * 2 + 800),
        ("lz4hc", 2, [blosc2.Filter.DELTA, blosc2.Filter.SHUFFLE], "arange", 20000 * 2 * 2),
        ("zlib", 1, [], "text", 30000 * 3 + 77),
        ("zstd", 4, [blosc2.Filter.SHUFFLE, blosc2.Filter.BYTEDELTA], "floatnoise", 16384 * 4 * 2 + 100),
    ]
    for codec, ts, filters, dkind, total in specs:
        name = f"schunk_{codec}"
        chunk_items = {1: 30000, 2: 20000, 4: 10000, 8: 8000}[ts]
        if codec == "zstd":
            chunk_items = 16384
        data = make_data(dkind, total, ts, 42 + len(codec))
        src = name + ".b2frame"
        sc = blosc2.SChunk(
            chunksize=chunk_items * ts, urlpath=p(src), mode="w",
            cparams={"codec": CODEC_ENUM[codec], "clevel": 5, "typesize": ts, "filters": filters,
                     "filters_meta": [0] * len(filters), "nthreads": 1},
        )
        append_all(sc, data, chunk_items * ts)
        sc.vlmeta["made_by"] = "b2fs gen_fixtures"
        extra = {"input_sha256": sha256(data)}
        if codec == "lz4":
            # the in-memory lazy form of chunk 1 (docs/format/CHUNK.md 5.3), for chunk_info tests
            extra["lazy_chunk_1_b64"] = b64(sc.get_lazychunk(1))
        done(name, src, sc, extra=extra)

    # b2nd arrays: geometry and dtypes
    rng = np.random.default_rng(7)
    nd_specs = [
        ("b2nd_1d_f8", np.linspace(0, 1, 1000), dict(chunks=(300,), blocks=(64,))),
        ("b2nd_2d_i4_odd", np.arange(70, dtype="<i4").reshape(10, 7), dict(chunks=(4, 4), blocks=(2, 2))),
        ("b2nd_3d_f4_pad", rng.normal(size=(7, 11, 5)).astype("<f4"), dict(chunks=(5, 4, 3), blocks=(2, 3, 2))),
        ("b2nd_u1", (np.arange(3000) % 251).astype("u1"), dict(chunks=(1000,), blocks=(128,))),
        ("b2nd_bool", (np.arange(999) % 3 == 0), dict(chunks=(400,), blocks=(100,))),
        ("b2nd_S3", np.array([b"abc", b"de", b"", b"xyz"] * 50, dtype="S3"), dict(chunks=(64,), blocks=(16,))),
        ("b2nd_U3", np.array(["abc", "\u00e9t\u00e9", "", "xy"] * 50, dtype="<U3"), dict(chunks=(64,), blocks=(16,))),
        ("b2nd_struct", np.array([(i, b"s%d" % (i % 10), (i * 0.5, -i)) for i in range(100)],
                                 dtype=[("a", "<i4"), ("b", "S3"), ("c", "<f8", (2,))]),
         dict(chunks=(30,), blocks=(8,))),
        ("b2nd_2d_i8_zstd9", np.arange(120 * 33, dtype="<i8").reshape(120, 33),
         dict(chunks=(50, 20), blocks=(10, 20), cparams={"codec": blosc2.Codec.ZSTD, "clevel": 9})),
        ("b2nd_2d_f8_lz4", rng.normal(size=(64, 40)), dict(chunks=(32, 40), blocks=(8, 40),
                                                           cparams={"codec": blosc2.Codec.LZ4, "clevel": 1})),
        ("b2nd_0d_f8", np.array(3.25), dict()),
    ]
    for name, npa, kw in nd_specs:
        src = name + ".b2nd"
        kw = dict(kw)
        cp = kw.pop("cparams", {})
        cp.setdefault("nthreads", 1)
        arr = blosc2.asarray(npa, urlpath=p(src), mode="w", cparams=cp, **kw)
        notes = []
        if not isinstance(arr, blosc2.NDArray):
            notes.append(f"blosc2.asarray returned {type(arr).__name__}")
        arr = blosc2.open(p(src))
        done(name, src, None, arr=arr, notes=notes, extra={"numpy_sha256": sha256(np.ascontiguousarray(npa).tobytes())})

    # attrs / vlmeta with every value kind
    arr = blosc2.asarray(np.arange(100, dtype="<i2"), urlpath=p("b2nd_attrs.b2nd"), mode="w",
                         chunks=(40,), blocks=(10,))
    attrs = {
        "str": "K\u00e9lvin", "int": 42, "neg": -7, "big": 2**40, "float": 2.5, "bool": True,
        "none": None, "list": [1, "a", 2.0], "dict": {"x": 1, "y": [True, None]},
        "bytes": b"\x00\x01\xffraw", "tuple": (1, 2, "three"), "complex": 1.5 - 2j,
        "set": {3, 1, 2}, "ndarray": np.arange(3, dtype=np.int16),
        "ndarray2d": np.array([[1.0, 2.0], [3.0, 4.0]], dtype=">f4"),
    }
    for k, v in attrs.items():
        arr.attrs[k] = v
    arr = blosc2.open(p("b2nd_attrs.b2nd"))
    done("b2nd_attrs", "b2nd_attrs.b2nd", None, arr=arr,
         notes=["attrs written through NDArray.attrs (same storage as vlmeta)"])

    # user fixed metalayers
    arr = blosc2.asarray(np.arange(50, dtype="<f8"), urlpath=p("b2nd_usermeta.b2nd"), mode="w",
                         chunks=(20,), blocks=(5,),
                         meta={"k": [1, 2], "info": {"units": "m", "scale": 0.5}, "blob": b"\x01\x02"})
    arr = blosc2.open(p("b2nd_usermeta.b2nd"))
    done("b2nd_usermeta", "b2nd_usermeta.b2nd", None, arr=arr)
    sc = blosc2.SChunk(chunksize=4000, urlpath=p("schunk_usermeta.b2frame"), mode="w",
                       meta={"m1": 1, "m2": "two", "m3": [3.0, None]}, cparams={"typesize": 4, "nthreads": 1})
    append_all(sc, make_data("arange", 10000, 4, 3), 4000)
    done("schunk_usermeta", "schunk_usermeta.b2frame", sc)

    # sparse frames (directories)
    arr = blosc2.asarray(np.arange(1000, dtype="<i4").reshape(25, 40), urlpath=p("b2nd_sparse.b2nd"),
                         mode="w", contiguous=False, chunks=(10, 16), blocks=(5, 8))
    arr.attrs["sparse"] = True
    arr = blosc2.open(p("b2nd_sparse.b2nd"))
    done("b2nd_sparse", "b2nd_sparse.b2nd", None, arr=arr, kind="sframe")
    sc = blosc2.SChunk(chunksize=4000, urlpath=p("schunk_sparse.b2frame"), mode="w", contiguous=False,
                       cparams={"typesize": 4, "nthreads": 1})
    append_all(sc, make_data("arange", 4000 * 3 + 1000, 4, 5), 4000)
    done("schunk_sparse", "schunk_sparse.b2frame", sc, kind="sframe")

    # special arrays
    for name, fn in [
        ("b2nd_zeros", lambda u: blosc2.zeros((100, 30), dtype=np.float64, chunks=(40, 30), blocks=(10, 30), urlpath=u, mode="w")),
        ("b2nd_empty", lambda u: blosc2.empty((100, 30), dtype=np.float64, chunks=(40, 30), blocks=(10, 30), urlpath=u, mode="w")),
        ("b2nd_full_nan", lambda u: blosc2.full((100, 30), np.nan, dtype=np.float64, chunks=(40, 30), blocks=(10, 30), urlpath=u, mode="w")),
        ("b2nd_full_nan_f4", lambda u: blosc2.full((1000,), np.nan, dtype=np.float32, chunks=(300,), blocks=(100,), urlpath=u, mode="w")),
    ]:
        fn(p(name + ".b2nd"))
        arr = blosc2.open(p(name + ".b2nd"))
        done(name, name + ".b2nd", None, arr=arr)
    # a partly written zeros array: some chunks real, some still special
    arr = blosc2.zeros((100, 30), dtype=np.int32, chunks=(40, 30), blocks=(10, 30), urlpath=p("b2nd_zeros_partial.b2nd"), mode="w")
    arr[40:80, :] = np.arange(40 * 30, dtype=np.int32).reshape(40, 30)
    arr = blosc2.open(p("b2nd_zeros_partial.b2nd"))
    done("b2nd_zeros_partial", "b2nd_zeros_partial.b2nd", None, arr=arr)
    sc = blosc2.SChunk(chunksize=8000, urlpath=p("schunk_fill_special.b2frame"), mode="w", cparams={"typesize": 8, "nthreads": 1})
    sc.fill_special(2500, blosc2.SpecialValue.ZERO)
    done("schunk_fill_special", "schunk_fill_special.b2frame", sc, notes=["fill_special: repeated-value index chunk, partial last chunk"])
    for label, kind, ts in [("nan", blosc2.SpecialValue.NAN, 8), ("uninit", blosc2.SpecialValue.UNINIT, 4)]:
        src = f"schunk_fill_{label}.b2frame"
        sc = blosc2.SChunk(chunksize=1000 * ts, urlpath=p(src), mode="w", cparams={"typesize": ts, "nthreads": 1})
        sc.fill_special(3500, kind)
        notes = [f"fill_special(3500, {kind.name}) with 1000 items per chunk"]
        if label == "uninit":
            notes.append("uninit chunks: the sha256 values assume zero-filled output (C leaves it untouched)")
        done(f"schunk_fill_{label}", src, sc, notes=notes)

    # a frame with 0 chunks
    sc = blosc2.SChunk(chunksize=256, urlpath=p("schunk_empty.b2frame"), mode="w", cparams={"typesize": 4, "nthreads": 1})
    done("schunk_empty", "schunk_empty.b2frame", sc)
    arr = blosc2.zeros((0,), dtype=np.float64, urlpath=p("b2nd_len0.b2nd"), mode="w")
    arr = blosc2.open(p("b2nd_len0.b2nd"))
    done("b2nd_len0", "b2nd_len0.b2nd", None, arr=arr)

    # variable chunk sizes: append a partial chunk, then another chunk
    sc = blosc2.SChunk(chunksize=4000, urlpath=p("schunk_varlen.b2frame"), mode="w", cparams={"typesize": 4, "nthreads": 1})
    sc.append_data(make_data("arange", 4000, 4, 11))
    sc.append_data(make_data("arange", 1000, 4, 12))
    c3 = blosc2.compress2(make_data("arange", 4000, 4, 13), typesize=4, nthreads=1)
    sc.append_chunk(c3)
    c4 = blosc2.compress2(make_data("text", 2222, 1, 14), typesize=1, nthreads=1, codec=blosc2.Codec.LZ4)
    sc.append_chunk(c4)
    done("schunk_varlen", "schunk_varlen.b2frame", sc, notes=["variable chunk sizes: 4000, 1000, 4000, 2222 (chunksize 0)"])

    # dead space and non-monotonic offsets: update with a bigger chunk, delete, insert
    sc = blosc2.SChunk(chunksize=4000, urlpath=p("schunk_deadspace.b2frame"), mode="w", cparams={"typesize": 4, "nthreads": 1})
    for i in range(5):
        sc.append_data(make_data("arange", 4000, 4, 20 + i))
    big = blosc2.compress2(make_data("random", 4000, 4, 30), typesize=4, nthreads=1)
    sc.update_chunk(1, big)
    sc.delete_chunk(3)
    sc.insert_chunk(1, blosc2.compress2(make_data("floatnoise", 4000, 4, 31), typesize=4, nthreads=1))
    sc.insert_chunk(0, blosc2.compress2(make_data("text", 4000, 4, 32), typesize=4, nthreads=1, codec=blosc2.Codec.ZLIB))
    done("schunk_deadspace", "schunk_deadspace.b2frame", sc,
         notes=["update_chunk(1, bigger) then delete_chunk(3), insert_chunk(1), insert_chunk(0): "
                "dead bytes in the chunk area, offsets not increasing"])

    # 100 junk bytes past frame_len
    sc = blosc2.SChunk(chunksize=4000, urlpath=p("schunk_junk_tail.b2frame"), mode="w", cparams={"typesize": 4, "nthreads": 1})
    append_all(sc, make_data("arange", 12000, 4, 40), 4000)
    sc.vlmeta["k"] = "v"
    del sc
    with open(p("schunk_junk_tail.b2frame"), "ab") as f:
        f.write(bytes((i * 37 + 11) & 0xFF for i in range(100)))
    sc = blosc2.open(p("schunk_junk_tail.b2frame"))
    done("schunk_junk_tail", "schunk_junk_tail.b2frame", sc, notes=["100 junk bytes appended after frame_len"])

    # a Blosc1 chunk (16-byte header) appended to a frame: python-blosc2 accepts and reads it
    sc = blosc2.SChunk(chunksize=4000, urlpath=p("schunk_blosc1_chunk.b2frame"), mode="w", cparams={"typesize": 4, "nthreads": 1})
    sc.append_data(make_data("arange", 4000, 4, 60))
    sc.append_chunk(blosc.compress(make_data("arange", 4000, 4, 61), typesize=4, clevel=5, shuffle=1, cname="lz4"))
    done("schunk_blosc1_chunk", "schunk_blosc1_chunk.b2frame", sc,
         notes=["append_chunk() was given a Blosc1 chunk (python-blosc 1.11 lz4+shuffle, 16-byte header). "
                "C-Blosc2 3.3.5 read byte 31 of it (0x20, part of the LZ4 stream) as blosc2_flags and "
                "stored chunk 1 as a NaN special offset (0x82...): the data is lost, the frame is valid "
                "and reads back as 1000 float32 NaNs."])

    # 16 vlmetalayers (the most C-Blosc2 will write)
    sc = blosc2.SChunk(chunksize=4000, urlpath=p("schunk_vlmeta16.b2frame"), mode="w", cparams={"typesize": 4, "nthreads": 1})
    append_all(sc, make_data("arange", 8000, 4, 50), 4000)
    for i in range(16):
        sc.vlmeta[f"key{i:02d}"] = [i, "v" * i] if i % 2 else {"i": i}
    done("schunk_vlmeta16", "schunk_vlmeta16.b2frame", sc)

    # caterva 0.7.3 (legacy 'caterva' metalayer), contiguous and sparse
    import caterva
    for name, contiguous in [("caterva_cframe", True), ("caterva_sframe", False)]:
        npa = np.arange(10 * 7, dtype="<f8").reshape(10, 7)
        src = name + (".caterva" if contiguous else ".cat")
        caterva.asarray(npa, chunks=(4, 4), blocks=(2, 2), urlpath=p(src), contiguous=contiguous)
        sc = blosc2.open(p(src))
        done(name, src, sc, kind="cframe" if contiguous else "sframe", made_by="caterva 0.7.3",
             extra={"numpy_sha256": sha256(npa.tobytes()), "numpy_dtype": "<f8",
                    "numpy_shape": [10, 7], "numpy_chunks": [4, 4], "numpy_blocks": [2, 2]},
             notes=["legacy caterva metalayer: no dtype; python-blosc2 4.14 opens it as a plain SChunk"])

    return count


# --------------------------------------------------------------------------------------------
# d) bcolz


def _read_json(path):
    with open(path) as f:
        return json.load(f)


def bcolz_carray_facts(root):
    """What a carray directory holds, as bcolz wrote it, plus per-chunk-file decode facts."""
    facts = {
        "sizes": _read_json(os.path.join(root, "meta", "sizes")),
        "storage": _read_json(os.path.join(root, "meta", "storage")),
        "attrs": _read_json(os.path.join(root, "__attrs__")),
        "chunk_files": [],
    }
    ddir = os.path.join(root, "data")
    files = sorted(os.listdir(ddir), key=lambda s: int(s[2:].split(".")[0]))
    for fname in files:
        with open(os.path.join(ddir, fname), "rb") as f:
            raw = f.read()
        chunk = raw[16:]
        dec = blosc.decompress(chunk)
        nbytes, bsize, cbytes = struct.unpack_from("<iii", chunk, 4)
        facts["chunk_files"].append({
            "file": "data/" + fname, "file_len": len(raw), "blpk_prefix_hex": raw[:16].hex(),
            "nbytes": len(dec), "cbytes": cbytes, "blocksize": bsize, "flags": chunk[2],
            "typesize": chunk[3], "sha256": sha256(dec),
        })
    return facts


def gen_bcolz():
    bdir = os.path.join(DATA, "bcolz")
    os.makedirs(bdir)
    count = 0
    rng = np.random.default_rng(99)

    def carray_case(name, npa, chunklen, clevel=5, shuffle=1, cname="lz4", attrs=None, notes=None,
                    appends=()):
        nonlocal count
        root = os.path.join(bdir, name)
        ca = bcolz.carray(npa, rootdir=root, mode="w", chunklen=chunklen,
                          cparams=bcolz.cparams(clevel=clevel, shuffle=shuffle, cname=cname))
        for extra in appends:
            ca.append(extra)
        for k, v in (attrs or {}).items():
            ca.attrs[k] = v
        ca.flush()
        del ca
        ca = bcolz.open(root, mode="r")
        full = ca[:]
        car = {
            "name": name, "kind": "carray", "made_by": "bcolz-zipline 1.13.0",
            "len": len(ca), "shape": list(ca.shape), "dtype": str(ca.dtype), "chunklen": ca.chunklen,
            "nchunks_full": len(ca) // ca.chunklen, "leftover_items": len(ca) % ca.chunklen,
            "cparams": {"clevel": ca.cparams.clevel, "shuffle": int(ca.cparams.shuffle), "cname": ca.cparams.cname},
            "array_sha256": sha256(np.ascontiguousarray(full).tobytes()),
            "notes": notes or [],
        }
        car.update(bcolz_carray_facts(root))
        write_sidecar(bdir, name, car)
        count += 1

    carray_case("carray_i4_leftover", np.arange(25, dtype=np.int32), 10,
                notes=["25 items, chunklen 10: __0, __1 full, __2 leftover (5 items)"])
    carray_case("carray_i4_exact", np.arange(40, dtype=np.int32), 10, notes=["exact multiple: no leftover file"])
    carray_case("carray_f8", np.linspace(-5, 5, 20000), 4096, cname="zstd", shuffle=1,
                attrs={"units": "K", "scale": 0.5, "tags": ["a", "b"]})
    carray_case("carray_2d_f8", rng.normal(size=(1000, 3)), 300, cname="blosclz", shuffle=2,
                attrs={"columns": ["x", "y", "z"]})
    for i, cname in enumerate(["blosclz", "lz4", "lz4hc", "zlib", "zstd"]):
        for shuffle in (0, 1, 2):
            dt = ["<i4", "<f8", "<i2"][shuffle]
            npa = (np.arange(3000 + 7 * i) * (3 if shuffle else 1)).astype(dt)
            carray_case(f"carray_{cname}_s{shuffle}", npa, 1024, clevel=[5, 9, 1][shuffle], shuffle=shuffle,
                        cname=cname)
    carray_case("carray_empty", np.zeros(0, dtype=np.float64), 1024, notes=["len 0: no chunk files at all"])
    carray_case("carray_S5", np.array([b"hello", b"hi", b"", b"world"] * 100, dtype="S5"), 64,
                notes=["S dtype: chunk typesize 1"])
    carray_case("carray_appended", np.arange(100, dtype=np.int64), 32,
                appends=[np.arange(100, 150, dtype=np.int64)], attrs={"appended": True},
                notes=["created with 100 items then append(50) + flush"])
    carray_case("carray_clevel0", np.arange(5000, dtype=np.int32), 2048, clevel=0,
                notes=["clevel 0: memcpyed Blosc1 chunks"])

    # ctables
    def ctable_case(name, n, chunklen, attrs=None, notes=None):
        nonlocal count
        root = os.path.join(bdir, name)
        ids = np.arange(n, dtype=np.int32)
        vals = np.linspace(0, 1, n)
        names = np.array([b"n%04d" % (i % 997) for i in range(n)], dtype="S5")
        ct = bcolz.ctable(columns=[ids, vals, names], names=["id", "val", "name"], rootdir=root,
                          mode="w", chunklen=chunklen, cparams=bcolz.cparams(clevel=5, shuffle=1, cname="lz4"))
        for k, v in (attrs or {}).items():
            ct.attrs[k] = v
        ct.flush()
        del ct
        ct = bcolz.open(root, mode="r")
        car = {
            "name": name, "kind": "ctable", "made_by": "bcolz-zipline 1.13.0", "len": len(ct),
            "names": list(ct.names), "dtype": str(ct.dtype),
            "rootdirs": _read_json(os.path.join(root, "__rootdirs__")),
            "attrs": _read_json(os.path.join(root, "__attrs__")),
            "table_sha256": sha256(ct[:].tobytes()),
            "columns": {}, "notes": notes or [],
        }
        for col in ct.names:
            cr = ct.cols[col]
            cf = {"len": len(cr), "dtype": str(cr.dtype), "chunklen": cr.chunklen,
                  "array_sha256": sha256(np.ascontiguousarray(cr[:]).tobytes())}
            cf.update(bcolz_carray_facts(os.path.join(root, col)))
            car["columns"][col] = cf
        write_sidecar(bdir, name, car)
        count += 1

    ctable_case("ctable_3cols", 2500, 1000, attrs={"title": "b2fs test table", "rows": 2500},
                notes=["3 columns int32/float64/S5, leftover 500 rows"])
    ctable_case("ctable_exact", 2048, 512)
    return count


# --------------------------------------------------------------------------------------------
# e) layouts to refuse


def gen_refuse():
    rdir = os.path.join(DATA, "refuse")
    root = os.path.join(rdir, "blsk_2012")
    os.makedirs(os.path.join(root, "data"))
    os.makedirs(os.path.join(root, "meta"))
    nrows = 0
    for sc_no in (1, 2):
        chunks = []
        for k in range(3):
            data = np.arange(nrows, nrows + 500, dtype=np.int32).tobytes()
            nrows += 500
            chunks.append(blosc.compress(data, typesize=4, clevel=5, shuffle=1, cname="blosclz"))
        # 'blsk' | version u8 | 3 reserved | typesize u32 | nchunks u32, then u64 offsets, chunks
        hdr = b"blsk" + bytes([1, 0, 0, 0]) + struct.pack("<II", 4, len(chunks))
        pos = len(hdr) + 8 * len(chunks)
        offs = []
        for c in chunks:
            offs.append(pos)
            pos += len(c)
        with open(os.path.join(root, "data", f"__{sc_no}__.bin"), "wb") as f:
            f.write(hdr + struct.pack(f"<{len(offs)}Q", *offs) + b"".join(chunks))
    with open(os.path.join(root, "meta", "nrows"), "w") as f:
        f.write(f"{nrows}\n")
    with open(os.path.join(root, "meta", "storage"), "w") as f:
        f.write("dtype: int32\nshape: (%d,)\nchunkshape: (500,)\nsuperchunksize: 3\n"
                "endianness: little\norder: C\ncompression:\n  library: blosclz\n  level: 5\n"
                "  filters: [shuffle]\n" % nrows)
    with open(os.path.join(root, "meta", "attributes"), "w") as f:
        f.write("temperature:\n  value: 23.5\n  type: scalar\n  dtype: float32\n")
    car = {"name": "blsk_2012", "kind": "refuse",
           "why": "2012 carray persistence proposal (seed 004): 'blsk' superchunks, __N__.bin, YAML meta; "
                  "never shipped; b2fs must recognise and refuse it with a clear message",
           "nrows": nrows}
    write_sidecar(rdir, "blsk_2012", car)
    count = 1

    # damaged frames: what python-blosc2 4.14 does with them is recorded in the sidecar
    def base_frame(path):
        sc = blosc2.SChunk(chunksize=4000, urlpath=path, mode="w", cparams={"typesize": 4, "nthreads": 1})
        append_all(sc, make_data("arange", 10000, 4, 77), 4000)
        sc.vlmeta["k"] = "v"
        del sc
        with open(path, "rb") as f:
            return bytearray(f.read())

    def reference_open(path):
        try:
            sc = blosc2.open(path, mode="r")
            for i in range(sc.nchunks):
                sc.decompress_chunk(i)
            return f"opens, {sc.nchunks} chunks readable"
        except Exception as ex:
            return f"fails: {type(ex).__name__}: {ex}".replace(ROOT + "/", "")

    damaged = []
    tmp = os.path.join(rdir, "_base.b2frame")
    good = base_frame(tmp)
    os.remove(tmp)
    header_len = struct.unpack_from(">i", good, 11)[0]
    frame_len = struct.unpack_from(">Q", good, 16)[0]
    cbytes = struct.unpack_from(">q", good, 39)[0]

    def variant(name, why, mutate):
        b = bytearray(good)
        b = mutate(b) or b
        path = os.path.join(rdir, name + ".b2frame")
        with open(path, "wb") as f:
            f.write(b)
        damaged.append((name, why, path))

    variant("frame_truncated_1", "file one byte shorter than frame_len", lambda b: b[:-1])
    variant("frame_truncated_half", "file cut in the middle of the chunk area", lambda b: b[: header_len + cbytes // 2])
    variant("frame_bad_magic", "magic 'b2frame\\0' changed to 'b2frXme\\0'", lambda b: b.__setitem__(6, ord("X")))
    variant("frame_version4", "general_flags version nibble 4 (readers accept <= 3)",
            lambda b: b.__setitem__(25, (b[25] & 0xF0) | 4))
    variant("frame_cbytes_minus1", "header cbytes one less than the chunk area (index misplaced)",
            lambda b: b.__setitem__(slice(39, 47), struct.pack(">q", cbytes - 1)))
    variant("frame_len_too_big", "frame_len larger than the file",
            lambda b: b.__setitem__(slice(16, 24), struct.pack(">Q", frame_len + 1000)))
    variant("frame_bad_trailer_marker", "byte at frame_len - 23 is not 0xce",
            lambda b: b.__setitem__(frame_len - 23, 0x00))
    variant("frame_offset_out_of_range", "index entry 1 points past the chunk area",
            lambda b: patch_index(b, header_len, cbytes, frame_len, 1, cbytes + 4096))
    for name, why, path in damaged:
        car = {"name": name, "kind": "damaged-cframe", "why": why, "source": os.path.basename(path),
               "reference_behaviour": reference_open(path)}
        write_sidecar(rdir, name, car)
        count += 1

    # a bcolz carray whose chunk file holds a Blosc2 chunk (bcolz cannot read it)
    root = os.path.join(rdir, "bcolz_blosc2_chunk")
    bcolz.carray(np.arange(25, dtype=np.int32), rootdir=root, mode="w", chunklen=10).flush()
    chunk = blosc2.compress2(np.arange(10, dtype=np.int32).tobytes(), typesize=4, clevel=0, nthreads=1)
    with open(os.path.join(root, "data", "__0.blp"), "rb") as f:
        prefix = f.read(16)
    with open(os.path.join(root, "data", "__0.blp"), "wb") as f:
        f.write(prefix + chunk)
    try:
        bcolz.open(root, mode="r")[:]
        beh = "reads"
    except Exception as ex:
        beh = f"fails: {type(ex).__name__}: {ex}".replace(ROOT + "/", "")
    write_sidecar(rdir, "bcolz_blosc2_chunk", {
        "name": "bcolz_blosc2_chunk", "kind": "bad-bcolz", "reference_behaviour": beh,
        "why": "data/__0.blp holds a Blosc2 (32-byte header, version 5) chunk; bcolz needs Blosc1"})
    count += 1

    # a bcolz carray without __attrs__ (bcolz-zipline cannot open it)
    root = os.path.join(rdir, "bcolz_no_attrs")
    bcolz.carray(np.arange(25, dtype=np.int32), rootdir=root, mode="w", chunklen=10).flush()
    os.remove(os.path.join(root, "__attrs__"))
    try:
        bcolz.open(root, mode="r")[:]
        beh = "reads"
    except Exception as ex:
        beh = f"fails: {type(ex).__name__}: {ex}".replace(ROOT + "/", "")
    write_sidecar(rdir, "bcolz_no_attrs", {
        "name": "bcolz_no_attrs", "kind": "odd-bcolz", "reference_behaviour": beh,
        "why": "__attrs__ missing: bcolz-zipline 1.13 fails to open; b2fs may read it but must not "
               "write such a directory"})
    count += 1
    return count


def patch_index(b, header_len, cbytes, frame_len, entry, value):
    """Rewrites the index chunk as a memcpyed Blosc2 chunk with one entry changed (same size
    as the original only if the original was memcpyed, which it is for few chunks)."""
    trailer_len = struct.unpack_from(">I", b, frame_len - 22)[0]
    start, end = header_len + cbytes, frame_len - trailer_len
    idx = bytearray(blosc2.decompress2(bytes(b[start:end])))
    struct.pack_into("<q", idx, 8 * entry, value)
    assert b[start + 2] & 0x02, "index chunk is expected to be memcpyed"
    b[start + 32:start + 32 + len(idx)] = idx
    return b


# --------------------------------------------------------------------------------------------
# f) examples/sample.b2nd


def gen_sample():
    os.makedirs(EXAMPLES, exist_ok=True)
    path = os.path.join(EXAMPLES, "sample.b2nd")
    if os.path.exists(path):
        os.remove(path)
    t = np.linspace(0, 4 * np.pi, 400)
    npa = np.stack([273.15 + 20 * np.sin(t), 273.15 + 15 * np.cos(t), 273.15 + t], axis=1)
    arr = blosc2.asarray(npa, urlpath=path, mode="w", chunks=(110, 3), blocks=(57, 3),
                         cparams={"codec": blosc2.Codec.ZSTD, "clevel": 5,
                                  "filters": [blosc2.Filter.SHUFFLE], "nthreads": 1})
    arr.attrs["units"] = "K"
    arr.attrs["source"] = "b2fs sample"
    arr = blosc2.open(path)
    car = schunk_sidecar("sample", path, arr.schunk, "cframe", "python-blosc2 4.14.1", arr=arr,
                         extra={"numpy_sha256": sha256(npa.tobytes())})
    car["source"] = "sample.b2nd"
    write_sidecar(EXAMPLES, "sample", car)
    return os.path.getsize(path)


def gen_containers():
    return {
        "frames": gen_frames(),
        "bcolz": gen_bcolz(),
        "refuse": gen_refuse(),
        "sample_bytes": gen_sample(),
    }


def main():
    clean_output()
    info = {"versions": versions()}
    rows, quirks = gen_chunk_matrix()
    info["chunks"] = len(rows)
    info["chunk_quirks"] = len(quirks)
    info["nthreads2_bstarts"] = THREAD_LOG
    info.update(gen_containers())
    with open(os.path.join(DATA, "GENERATED.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(info, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
