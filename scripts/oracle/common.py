"""Shared helpers for the fixture generator (scripts/gen_fixtures.py) and the random oracle
(scripts/oracle/random_matrix.py): input data kinds, filter pipelines, making one Blosc2 or
Blosc1 chunk with the reference libraries, header inspection and the MANIFEST.tsv format.

Reference libraries: python-blosc2 4.14.1 (C-Blosc2 3.3.5), python-blosc 1.11.4 (C-Blosc 1.21).
"""

import hashlib
import math
import os
import struct

import numpy as np

import blosc2
import blosc2.blosc2_ext as b2ext
import blosc

CODECS = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]
B1_CODECS = [c for c in ["blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd"] if c in blosc.compressor_list()]
CODEC_ENUM = {
    "blosclz": blosc2.Codec.BLOSCLZ,
    "lz4": blosc2.Codec.LZ4,
    "lz4hc": blosc2.Codec.LZ4HC,
    "zlib": blosc2.Codec.ZLIB,
    "zstd": blosc2.Codec.ZSTD,
}
SPLITMODES = ["ALWAYS", "NEVER", "AUTO"]
SPLIT_ENUM = {
    "ALWAYS": blosc2.SplitMode.ALWAYS_SPLIT,
    "NEVER": blosc2.SplitMode.NEVER_SPLIT,
    "AUTO": blosc2.SplitMode.AUTO_SPLIT,
    "FORWARD_COMPAT": blosc2.SplitMode.FORWARD_COMPAT_SPLIT,
}
F = blosc2.Filter
SHUFFLE_META = {1: 2, 2: 4, 3: 2, 4: 2, 8: 4, 16: 8, 17: 4}

MANIFEST_COLUMNS = [
    "name", "format", "codec", "clevel", "filters", "filters_meta", "typesize", "splitmode",
    "blocksize", "datakind", "nthreads", "nbytes", "cbytes", "hdr_version", "hdr_flags",
    "hdr_blocksize", "nblocks", "bstarts_order", "special", "dict", "lossless", "sha256",
    "input_sha256", "check", "note",
]

WORDS = (
    "blosc chunk frame block stream shuffle bitshuffle delta codec zstd lz4 zlib blosclz "
    "the of and to in is that for it as with was on be by this are from at or an which but "
    "not have has had were their one all there been if more when will would who so no can "
    "array dimension metalayer trailer header offset index padding compression ratio fast "
    "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt"
).split()


def sha256(b):
    return hashlib.sha256(bytes(b)).hexdigest()


# --------------------------------------------------------------------------------------------
# inputs


def make_data(kind, nbytes, ts, seed):
    """Deterministic input bytes of one of the data kinds."""
    rng = np.random.default_rng(seed)
    if nbytes == 0:
        return b""
    nel = -(-nbytes // max(ts, 1))
    if kind == "arange":
        start = int(rng.integers(0, 1000))
        idx = np.arange(start, start + nel, dtype="<u8").view(np.uint8).reshape(nel, 8)
        arr = np.zeros((nel, ts), dtype=np.uint8)
        k = min(ts, 8)
        arr[:, :k] = idx[:, :k]
        raw = arr.tobytes()
    elif kind == "floatnoise":
        dt = {2: "<f2", 4: "<f4"}.get(ts, "<f8")
        isz = np.dtype(dt).itemsize
        cnt = -(-nbytes // isz)
        walk = 100.0 + np.cumsum(rng.normal(0.0, 0.01, cnt))
        raw = walk.astype(dt).tobytes()
    elif kind == "random":
        raw = rng.integers(0, 256, nbytes, dtype=np.uint8).tobytes()
    elif kind == "zeros":
        raw = bytes(nbytes)
    elif kind == "constant":
        elem = rng.integers(1, 256, max(ts, 1), dtype=np.uint8).tobytes()
        raw = elem * nel
    elif kind == "text":
        parts = []
        total = 0
        words = rng.integers(0, len(WORDS), nbytes // 3 + 16)
        i = 0
        while total < nbytes:
            w = WORDS[words[i % len(words)]]
            i += 1
            if i % 17 == 0:
                w += ".\n"
            else:
                w += " "
            parts.append(w)
            total += len(w)
        raw = "".join(parts).encode()
    else:
        raise ValueError(kind)
    return raw[:nbytes]


def filter_pipeline(pipe, ts):
    """(filters, filters_meta) as passed to compress2 (slot 0 first)."""
    if pipe == "none":
        return [], []
    if pipe == "shuffle":
        return [F.SHUFFLE], [0]
    if pipe == "bitshuffle":
        return [F.BITSHUFFLE], [0]
    if pipe == "delta":
        return [F.DELTA], [0]
    if pipe == "delta_shuffle":
        return [F.DELTA, F.SHUFFLE], [0, 0]
    if pipe == "truncprec_shuffle":
        return [F.TRUNC_PREC, F.SHUFFLE], [10 if ts == 4 else 20, 0]
    if pipe == "shuffle_bytedelta":
        return [F.SHUFFLE, F.BYTEDELTA], [0, ts & 0xFF]
    if pipe == "truncprec_neg_shuffle":
        return [F.TRUNC_PREC, F.SHUFFLE], [-5 if ts == 4 else -12, 0]
    if pipe == "delta_bitshuffle":
        return [F.DELTA, F.BITSHUFFLE], [0, 0]
    if pipe == "shuffle_delta":
        return [F.SHUFFLE, F.DELTA], [0, 0]
    if pipe == "bitshuffle_shuffle":
        return [F.BITSHUFFLE, F.SHUFFLE], [0, 0]
    if pipe == "shuffle_meta":
        return [F.SHUFFLE], [SHUFFLE_META.get(ts, 2)]
    raise ValueError(pipe)


def delta_unit(ts):
    if ts in (1, 2, 4, 8):
        return ts
    return 8 if ts % 8 == 0 else 1


def fix_size_for_pipeline(pipe, ts, size, note):
    """C-Blosc2 3.3.5 leaves the tail bytes uninitialised for DELTA when nbytes is not a
    multiple of the delta unit, and for TRUNC_PREC when nbytes is not a multiple of typesize
    (docs/format/CHUNK.md 3.4/3.5): round such sizes down so the reference output is exact."""
    unit = 1
    if "delta" in pipe and "bytedelta" not in pipe:
        unit = delta_unit(ts)
    if "truncprec" in pipe:
        unit = ts
    if size % unit:
        note.append(f"nbytes {size} rounded down to a multiple of {unit} (C {pipe} tail bug)")
        size -= size % unit
    return size


# --------------------------------------------------------------------------------------------
# header inspection


def header_facts(chunk):
    """Facts read from a chunk's header: version, flags, blocksize field, nblocks, bstarts
    order, special kind, dict flag, the filters actually recorded."""
    version, _vlz, flags, ts = chunk[0], chunk[1], chunk[2], chunk[3]
    nbytes, bsize, cbytes = struct.unpack_from("<iii", chunk, 4)
    ext = (flags & 0x05) == 0x05
    facts = {
        "hdr_version": version,
        "hdr_flags": f"0x{flags:02x}",
        "hdr_blocksize": bsize,
        "cbytes": cbytes,
        "special": "-",
        "dict": 0,
        "nblocks": 0,
        "bstarts_order": "-",
    }
    if ext:
        facts["filters"] = list(chunk[16:22])
        facts["filters_meta"] = list(chunk[24:30])
        flags2, b2flags = chunk[30], chunk[31]
        sp = (b2flags >> 4) & 7
        facts["special"] = {0: "-", 1: "zeros", 2: "nan", 3: "value", 4: "uninit"}.get(sp, str(sp))
        facts["dict"] = b2flags & 1
        if sp:
            return facts
        hlen = 32
        vl = flags2 & 1
    else:
        shuf = 1 if flags & 0x01 else (2 if flags & 0x04 else 0)
        facts["filters"] = [0, 0, 0, 0, 0, shuf]
        facts["filters_meta"] = [0] * 6
        hlen = 16
        vl = 0
    if nbytes == 0 or flags & 0x02:
        return facts
    if vl:
        nblocks = bsize
    else:
        bs = min(bsize, nbytes)
        nblocks = -(-nbytes // bs)
    facts["nblocks"] = nblocks
    bstarts = struct.unpack_from(f"<{nblocks}i", chunk, hlen)
    if nblocks > 1:
        mono = all(bstarts[i] < bstarts[i + 1] for i in range(nblocks - 1))
        facts["bstarts_order"] = "increasing" if mono else "NON-MONOTONIC"
    else:
        facts["bstarts_order"] = "single"
    return facts


# --------------------------------------------------------------------------------------------
# cases


def make_b1compat_case(name, codec, clevel, filt, ts, kind, nbytes, seed):
    """A 16-byte-header chunk written by C-Blosc2 in BLOSC_BLOSC1_COMPAT mode (version byte 5;
    C-Blosc 1.x refuses it). Expected bytes from blosc2.decompress2."""
    data = make_data(kind, nbytes, ts, seed)
    fenum = {0: F.NOFILTER, 1: F.SHUFFLE, 2: F.BITSHUFFLE, 3: F.DELTA}[filt]
    os.environ["BLOSC_BLOSC1_COMPAT"] = "1"
    try:
        chunk = blosc2.compress(data, typesize=ts, clevel=clevel, filter=fenum, codec=CODEC_ENUM[codec])
    finally:
        del os.environ["BLOSC_BLOSC1_COMPAT"]
    expected = b2_decompress(chunk, len(data))
    lossless = "yes" if expected == data else "NO"
    note = [f"BLOSC_BLOSC1_COMPAT: 16-byte header, version {chunk[0]}, blosc2.compress(filter={fenum.name})"]
    if filt == 3 and not chunk[2] & 0x08:
        note.append("DELTA requested but the header has no delta bit: the blosc1-style API ignored it")
    try:
        blosc.decompress(chunk)
        note.append("C-Blosc 1.x decodes it too")
    except Exception:
        note.append("C-Blosc 1.x refuses it")
    return _row(name, "blosc2", codec, clevel, ts, "-", 0, kind, 1, data, chunk, expected, lossless,
                note, "ok" if lossless == "yes" else "c-mismatch")


def b2_decompress(chunk, nbytes):
    """The reference decode, into a zeroed destination (so 'uninit' chunks come out as zeros)."""
    dst = bytearray(nbytes)
    if nbytes == 0:
        out = blosc2.decompress2(chunk)
        return bytes(out)
    res = blosc2.decompress2(chunk, dst=dst, nthreads=1)
    if isinstance(res, (bytes, bytearray)) and len(res) == nbytes:
        return bytes(res)
    return bytes(dst)


def _row(name, fmt, codec, clevel, ts, split, blocksize, kind, nthreads, data, chunk, expected,
         lossless, note, check="ok"):
    facts = header_facts(chunk)
    row = {
        "name": name,
        "format": fmt,
        "codec": codec,
        "clevel": clevel,
        "filters": ",".join(str(int(x)) for x in facts.pop("filters")),
        "filters_meta": ",".join(str(int(x)) for x in facts.pop("filters_meta")),
        "typesize": ts,
        "splitmode": split,
        "blocksize": blocksize,
        "datakind": kind,
        "nthreads": nthreads,
        "nbytes": len(data) if expected is None else len(expected),
        "sha256": sha256(expected) if expected is not None else "-",
        "input_sha256": sha256(data),
        "lossless": lossless,
        "note": "; ".join(note) if note else "",
        "check": check,
        "_chunk": bytes(chunk),
    }
    row.update(facts)
    if row["bstarts_order"] == "NON-MONOTONIC":
        row["note"] = (row["note"] + "; " if row["note"] else "") + "bstarts non-monotonic (threads)"
    return row


def make_b2_case(name, codec, clevel, pipe, ts, split, blocksize, kind, nbytes, seed, nthreads,
                 note, use_dict=False):
    data = make_data(kind, nbytes, ts, seed)
    filters, fmeta = filter_pipeline(pipe, ts)
    kw = dict(
        codec=CODEC_ENUM[codec], clevel=clevel, typesize=ts, nthreads=nthreads,
        splitmode=SPLIT_ENUM[split], blocksize=blocksize, filters=filters, filters_meta=fmeta,
    )
    if use_dict:
        kw["use_dict"] = True
    if blocksize and min(blocksize, nbytes) % ts and nbytes >= ts:
        note = note + [f"forced blocksize {blocksize} -> {min(blocksize, nbytes)} (capped to nbytes) "
                       f"is not a multiple of typesize {ts}: C-Blosc2 writes the unrounded value"]
    chunk = blosc2.compress2(data, **kw)
    check = "ok"
    try:
        expected = b2_decompress(chunk, len(data))
    except Exception as ex:  # the reference cannot read its own chunk
        expected = None
        check = "c-error"
        note = note + [f"C-Blosc2 fails to decode its own chunk: {ex}"]
    lossy = "truncprec" in pipe
    if expected is None:
        lossless = "-"
    elif lossy:
        lossless = "lossy"
    else:
        lossless = "yes" if expected == data else "NO"
        if lossless == "NO":
            check = "c-mismatch"
            note = note + ["C-Blosc2 round trip differs from the input (uninitialised bytes, "
                           "varies between runs: sha256 not recorded)"]
            expected = None
    if use_dict and not (chunk[2] & 0x05 == 0x05 and chunk[31] & 1):
        note = note + ["use_dict requested but no dictionary was stored"]
    note = [f"pipeline {pipe}"] + note
    return _row(name, "blosc2", codec, clevel, ts, split, blocksize, kind, nthreads, data, chunk,
                expected, lossless, note, check)


def make_b1_case(name, codec, clevel, shuffle, ts, kind, nbytes, seed, blocksize=0, nthreads=1,
                 note=None):
    note = list(note or [])
    data = make_data(kind, nbytes, ts, seed)
    blosc.set_nthreads(nthreads)
    blosc.set_blocksize(blocksize)
    try:
        chunk = blosc.compress(data, typesize=ts, clevel=clevel, shuffle=shuffle, cname=codec)
    finally:
        blosc.set_blocksize(0)
        blosc.set_nthreads(1)
    expected = blosc.decompress(chunk)
    lossless = "yes" if expected == data else "NO"
    check = "ok" if lossless == "yes" else "c-mismatch"
    # How C-Blosc2 3.3.5 reads the same Blosc1 chunk. Its bitshuffle tail bug (docs/format/CHUNK.md
    # 3.3) returns uninitialised bytes, so the note follows the rule, not the (varying) result.
    c_nbytes, c_bs = struct.unpack_from("<ii", chunk, 4)
    tail_bug = False
    if chunk[2] & 0x04 and not chunk[2] & 0x02 and c_nbytes > 0:
        left = c_nbytes % c_bs
        tail_bug = left > 0 and left % ts != 0 and (left // ts) % 8 == 0
    if tail_bug:
        note.append("bitshuffle v2 leftover block with a partial element: C-Blosc2 3.3.5 decodes the "
                    "tail wrongly; expected is C-Blosc 1.x")
    else:
        try:
            other = blosc2.decompress2(chunk, nthreads=1)
            if bytes(other) != expected:
                note.append("C-Blosc2 3.3.5 decodes this chunk DIFFERENTLY (expected is C-Blosc 1.x)")
        except Exception as ex:
            note.append(f"C-Blosc2 3.3.5 cannot decode it: {ex}")
    return _row(name, "blosc1", codec, clevel, ts, "-", blocksize, kind, nthreads, data, chunk,
                expected, lossless, note, check)


def special_cases(start):
    """Special-value chunks as C-Blosc2 writes them into super-chunks (read back raw)."""
    n = start
    SV = blosc2.SpecialValue
    specs = [
        # (label, typesize, nitems, chunk items, kind, value)
        ("zeros", 8, 1000, 1000, SV.ZERO, None),
        ("zeros", 4, 2500, 1000, SV.ZERO, None),
        ("nan", 8, 1000, 1000, SV.NAN, None),
        ("nan", 4, 3000, 1000, SV.NAN, None),
        ("uninit", 8, 1000, 1000, SV.UNINIT, None),
        ("value", 8, 1000, 1000, SV.VALUE, math.pi),
        ("value", 4, 1000, 1000, SV.VALUE, 7),
        ("value", 1, 5000, 5000, SV.VALUE, 0x41),
        ("value", 16, 300, 300, SV.VALUE, bytes(range(1, 17))),
    ]
    for label, ts, nitems, citems, kind, value in specs:
        sc = blosc2.SChunk(chunksize=citems * ts, cparams={"typesize": ts, "nthreads": 1})
        if value is None:
            sc.fill_special(nitems, kind)
        else:
            sc.fill_special(nitems, kind, value=value)
        # the last chunk (partial when nitems is not a multiple of citems)
        idx = sc.nchunks - 1
        chunk = sc.get_chunk(idx)
        nbytes = struct.unpack_from("<i", chunk, 4)[0]
        expected = b2_decompress(chunk, nbytes)
        note = [f"SChunk.fill_special({nitems}, {kind.name}) chunk {idx}"]
        if label == "uninit":
            note.append("uninit: C leaves the output untouched; expected = zero-filled destination")
        if label == "value":
            ref = sc.decompress_chunk(idx)
            assert bytes(ref) == expected
        yield _row(f"s{n:03d}_special_{label}_t{ts}_n{nbytes}", "blosc2", "-", 0, ts, "-", 0,
                   label, 1, expected if label != "uninit" else bytes(nbytes), chunk, expected,
                   "yes", note)
        n += 1
    # b2nd constructors
    for label, arr in [
        ("b2nd_zeros_f8", blosc2.zeros((1000,), dtype=np.float64, chunks=(500,), blocks=(100,))),
        ("b2nd_full_nan_f8", blosc2.full((1000,), np.nan, dtype=np.float64, chunks=(500,), blocks=(100,))),
        ("b2nd_full_nan_f4", blosc2.full((1000,), np.nan, dtype=np.float32, chunks=(500,), blocks=(100,))),
        ("b2nd_full_3_i2", blosc2.full((1000,), 3, dtype=np.int16, chunks=(500,), blocks=(100,))),
        ("b2nd_empty_f8", blosc2.empty((1000,), dtype=np.float64, chunks=(500,), blocks=(100,))),
    ]:
        chunk = arr.schunk.get_chunk(0)
        nbytes = struct.unpack_from("<i", chunk, 4)[0]
        expected = b2_decompress(chunk, nbytes)
        note = [f"{label}: ndarray.schunk.get_chunk(0)"]
        if "empty" in label:
            note.append("uninit: expected = zero-filled destination")
        yield _row(f"s{n:03d}_special_{label}", "blosc2", "-", 0, arr.dtype.itemsize, "-", 0,
                   label, 1, expected, chunk, expected, "yes", note)
        n += 1


def vl_cases(start):
    n = start
    specs = [
        ("blosclz", [], [], 1, [250, 1200, 1024, 1]),
        ("zstd", [F.SHUFFLE], [0], 4, [4000, 40, 4, 8000, 12]),
        ("lz4", [F.BITSHUFFLE], [0], 1, [3000, 77, 5000]),
        ("zlib", [], [], 1, [10, 20000, 300]),
        ("lz4hc", [F.SHUFFLE], [0], 8, [800, 16000, 8]),
    ]
    for codec, filters, fmeta, ts, sizes in specs:
        blocks = []
        for i, s in enumerate(sizes):
            kind = ["text", "arange", "floatnoise", "constant"][i % 4]
            blocks.append(make_data(kind, s, ts, 7000 + n * 10 + i))
        chunk = b2ext.vlcompress(
            blocks, codec=CODEC_ENUM[codec], clevel=5, typesize=ts, nthreads=1,
            splitmode=blosc2.SplitMode.AUTO_SPLIT, filters=filters, filters_meta=fmeta,
        )
        data = b"".join(blocks)
        expected = bytes(blosc2.decompress2(chunk, nthreads=1))
        parts = b2ext.vldecompress(chunk)
        assert b"".join(bytes(p) for p in parts) == expected
        lossless = "yes" if expected == data else "NO"
        note = [f"VL-block chunk (blosc2_ext.vlcompress) block sizes {sizes}"]
        yield _row(f"v{n:03d}_vl_{codec}_t{ts}", "blosc2", codec, 5, ts, "AUTO", 0, "vlblocks", 1,
                   data, chunk, expected, lossless, note, "ok" if lossless == "yes" else "c-mismatch")
        n += 1


def quirk_cases(start):
    """Inputs the C library itself mishandles. Kept apart (chunks/quirks/) so that the main
    manifest only holds chunks whose reference decode is exact."""
    n = start
    specs = [
        # DELTA with nbytes not a multiple of the delta unit: uninitialised tail bytes
        ("zstd", "delta_shuffle", 4, "AUTO", 5, 0, "arange", 1001, "DELTA tail: nbytes % 4 != 0"),
        ("blosclz", "delta_shuffle", 8, "ALWAYS", 5, 4096, "arange", 4096 * 3 + 13, "DELTA tail: nbytes % 8 != 0"),
        # TRUNC_PREC with a partial trailing element
        ("lz4", "truncprec_shuffle", 4, "AUTO", 5, 0, "floatnoise", 4003, "TRUNC_PREC tail: nbytes % 4 != 0"),
        # forced blocksize not a multiple of typesize
        ("blosclz", "shuffle", 3, "ALWAYS", 5, 8192, "arange", 30000, "forced blocksize 8192 % typesize 3 != 0"),
        ("lz4", "shuffle", 12, "AUTO", 5, 8192, "arange", 48000, "forced blocksize 8192 % typesize 12 != 0"),
        ("zstd", "none", 17, "NEVER", 5, 4113 + 1, "random", 20000, "forced blocksize 4114 % typesize 17 != 0"),
    ]
    for codec, pipe, ts, split, clevel, bs, kind, size, why in specs:
        case = make_b2_case(
            name=f"q{n:03d}_{codec}_{pipe}_t{ts}_n{size}", codec=codec, clevel=clevel, pipe=pipe,
            ts=ts, split=split, blocksize=bs, kind=kind, nbytes=size, seed=9000 + n, nthreads=1,
            note=[why],
        )
        n += 1
        yield case


def write_manifest(path, rows):
    with open(path, "w") as f:
        f.write("\t".join(MANIFEST_COLUMNS) + "\n")
        for r in rows:
            vals = []
            for c in MANIFEST_COLUMNS:
                v = str(r.get(c, ""))
                vals.append(v.replace("\t", " ").replace("\n", " "))
            f.write("\t".join(vals) + "\n")
