//! The filters against real bytes: python-blosc2 and python-blosc 1.x compress inputs (zlib,
//! never split), and the filtered blocks C wrote, read back out of their chunks, must be what
//! our forward pipeline makes, and our backward pipeline must undo them.

use super::*;

/// Python that compresses inputs with python-blosc2 (zlib, never split) and python-blosc 1.x
/// (zlib), walks each chunk's blocks and streams (zlib payloads inflated with Python's zlib, raw
/// and run streams expanded) and prints, per case, the pipeline, the blocksize, the input, the
/// concatenated filtered blocks as C wrote them, and C's own decompression of the chunk.
const PY_FILTERED: &str = r#"
import sys, zlib, struct, numpy as np, blosc2, blosc
rng = np.random.default_rng(1234)

def filtered_blocks(c):
    """Concatenated filtered blocks of a regular chunk (zlib or raw streams, runs)."""
    version, _, flags, ts = c[0], c[1], c[2], c[3]
    nbytes, bs, cbytes = struct.unpack_from("<iii", c, 4)
    assert flags & 0x02 == 0, "memcpyed"
    ext = flags & 0x05 == 0x05
    hlen = 32 if ext else 16
    if ext:
        filters, meta = list(c[16:22]), list(c[24:30])
    else:
        filters = [0, 0, 0, 0, 0, 1 if flags & 1 else (2 if flags & 4 else 0)]
        meta = [0] * 6
    nblocks = (nbytes + bs - 1) // bs
    out = b""
    for j in range(nblocks):
        bsize = min(bs, nbytes - j * bs)
        leftover = bsize < bs
        split = not (flags & 0x10) and not leftover
        nstreams = ts if split else 1
        neb = bsize // nstreams
        pos = struct.unpack_from("<i", c, hlen + 4 * j)[0]
        for s in range(nstreams):
            csize = struct.unpack_from("<i", c, pos)[0]
            pos += 4
            if csize == 0:
                out += bytes(neb)
            elif csize < 0:
                out += bytes([(-csize) & 0xFF]) * neb
                pos += 1
            elif csize == neb:
                out += c[pos:pos + neb]
                pos += csize
            else:
                d = zlib.decompress(c[pos:pos + csize])
                assert len(d) == neb
                out += d
                pos += csize
    return version, ts, filters, meta, bs, out

def data(n):
    x = (np.cumsum(rng.integers(-3, 4, n)) % 256).astype(np.uint8)
    x[::37] = rng.integers(0, 256, len(x[::37]))
    return x.tobytes()

F = blosc2.Filter
cases = [
    # name, typesize, filters, meta, nbytes, forced blocksize (0 = auto)
    ("shuffle", 4, [F.SHUFFLE], [0], 4000, 0),
    ("shuffle8_meta4", 8, [F.SHUFFLE], [4], 4000, 0),
    ("bitshuffle", 4, [F.BITSHUFFLE], [0], 4012, 0),
    ("bitshuffle2", 2, [F.BITSHUFFLE], [0], 4006, 0),
    ("bytedelta", 4, [F.SHUFFLE, F.BYTEDELTA], [0, 0], 4000, 0),
    ("bytedelta_meta2", 8, [F.SHUFFLE, F.BYTEDELTA], [0, 2], 4000, 0),
    ("delta", 4, [F.DELTA], [0], 8000, 4096),
    ("delta_shuffle", 8, [F.DELTA, F.SHUFFLE], [0, 0], 20000, 8192),
    ("delta_bitshuffle", 2, [F.DELTA, F.BITSHUFFLE], [0, 0], 9000, 4096),
    ("trunc_prec_shuffle", 4, [F.TRUNC_PREC, F.SHUFFLE], [10, 0], 4000, 0),
    ("trunc_prec_neg", 8, [F.TRUNC_PREC, F.SHUFFLE], [-5, 0], 8000, 0),
]
for name, ts, filters, meta, n, bsz in cases:
    d = data(n)
    kw = dict(blocksize=bsz) if bsz else {}
    c = blosc2.compress2(d, typesize=ts, clevel=5, codec=blosc2.Codec.ZLIB, filters=filters,
                         filters_meta=meta, splitmode=blosc2.SplitMode.NEVER_SPLIT, **kw)
    version, ts2, f6, m6, bs, filt = filtered_blocks(c)
    print(name, ts2, version, *f6, *m6, bs, d.hex(), filt.hex(), blosc2.decompress2(c).hex())
# C-Blosc 1.x (version 2 chunks): bitshuffle with a leftover block of 12 elements (v2 rule:
# copied whole) and shuffle with a partial element in the leftover block.
for name, ts, shuf, n in [("v2_bitshuffle", 4, blosc.BITSHUFFLE, 70000 * 4 + 48),
                          ("v2_bitshuffle_ok", 4, blosc.BITSHUFFLE, 70000 * 4 + 64),
                          ("v2_shuffle", 4, blosc.SHUFFLE, 70000 * 4 + 48),
                          ("v2_bitshuffle8", 8, blosc.BITSHUFFLE, 40000 * 8 + 8 * 7)]:
    d = data(n)
    c = blosc.compress(d, typesize=ts, clevel=5, shuffle=shuf, cname="zlib")
    version, ts2, f6, m6, bs, filt = filtered_blocks(c)
    print(name, ts2, version, *f6, *m6, bs, d.hex(), filt.hex(), blosc.decompress(c).hex())
"#;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

#[test]
fn filters_match_python_blosc2_bytes() {
    let py = or_skip!(support::python("filters_match_python_blosc2_bytes"));
    let out = support::run_python(&py, &["-c", PY_FILTERED]);
    let out = String::from_utf8(out).unwrap();
    let mut seen = 0;
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(w.len(), 19, "{line}");
        let name = w[0];
        let ts: usize = w[1].parse().unwrap();
        let version: u8 = w[2].parse().unwrap();
        let filters: [u8; 6] = std::array::from_fn(|i| w[3 + i].parse().unwrap());
        let meta: [u8; 6] = std::array::from_fn(|i| w[9 + i].parse().unwrap());
        let bs: usize = w[15].parse().unwrap();
        let data = unhex(w[16]);
        let filtered = unhex(w[17]);
        let c_decoded = unhex(w[18]);
        assert_eq!(data.len(), filtered.len(), "{name}");
        assert_eq!(data.len(), c_decoded.len(), "{name}");
        let p = Pipeline::new(filters, meta, ts, version).unwrap();
        let mut block0: Vec<u8> = Vec::new();
        let blocks = data
            .chunks(bs)
            .zip(filtered.chunks(bs))
            .zip(c_decoded.chunks(bs));
        for (i, ((block, want), c_block)) in blocks.enumerate() {
            let mut dst = vec![0; block.len()];
            let mut scratch = vec![0; block.len()];
            p.forward(block, &mut dst, &mut scratch, &data, i == 0)
                .unwrap();
            let first_diff = dst.iter().zip(want).position(|(a, b)| a != b);
            assert_eq!(
                first_diff, None,
                "{name} block {i}: our forward != C's filtered block"
            );
            let mut src = want.to_vec();
            let reference = if i == 0 { None } else { Some(&block0[..]) };
            p.backward(&mut src, &mut dst, reference).unwrap();
            assert!(
                dst == c_block,
                "{name} block {i}: backward != C's decompression"
            );
            if !filters.contains(&TRUNC_PREC) {
                assert!(dst == block, "{name} block {i}: backward != input");
            }
            if i == 0 {
                block0 = dst;
            }
        }
        seen += 1;
    }
    assert_eq!(seen, 15);
}
