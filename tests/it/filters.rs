//! Filters: known vectors from the notes' definitions (section 3), SIMD vs scalar twins,
//! forward/backward round trips of whole pipelines, the Blosc1/Blosc2 bitshuffle rules, the
//! bytedelta 34 restart quirk, and real bytes from python-blosc2 as a cross-check
//! (`filters/reference.rs`; property tests: `filters/props.rs`).

use b2fs::codec::CodecError;
use b2fs::codec::filter::{
    BitshuffleRule, Pipeline, SimdLevel, bitshuffle, bytedelta, delta, shuffle, truncprec,
};
use b2fs::codec::filter_id::{
    BITSHUFFLE, BYTEDELTA, BYTEDELTA_BUGGY, DELTA, NOFILTER, SHUFFLE, TRUNC_PREC,
};

use crate::support;

/// Deterministic pseudo-random bytes (xorshift), mixed with runs so deltas are not all noise.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if (x >> 60) < 4 {
                (i / 7) as u8
            } else {
                x as u8
            }
        })
        .collect()
}

// ---------- naive definitions, written straight from section 3 ----------

fn naive_shuffle(t: usize, src: &[u8]) -> Vec<u8> {
    let mut out = src.to_vec();
    if t <= 1 {
        return out;
    }
    let m = src.len() / t;
    for j in 0..t {
        for e in 0..m {
            out[j * m + e] = src[e * t + j];
        }
    }
    out
}

fn bit(x: u8, b: usize) -> u8 {
    (x >> b) & 1
}

/// Plane `8j + b`, byte `k`, bit `q` = bit `b` of byte `j` of element `8k + q`, on the first
/// `n` bytes; the rest copied.
fn naive_bitshuffle(t: usize, src: &[u8], n: usize) -> Vec<u8> {
    let mut out = src.to_vec();
    let m = n / t;
    let planes = m / 8;
    for j in 0..t {
        for b in 0..8 {
            for k in 0..planes {
                let mut v = 0u8;
                for q in 0..8 {
                    v |= bit(src[(8 * k + q) * t + j], b) << q;
                }
                out[(8 * j + b) * planes + k] = v;
            }
        }
    }
    out
}

fn naive_bytedelta_decode(t: usize, src: &[u8]) -> Vec<u8> {
    let mut out = src.to_vec();
    let s = src.len() / t;
    for i in 0..t {
        let mut acc = 0u8;
        for k in 0..s {
            acc = acc.wrapping_add(src[i * s + k]);
            out[i * s + k] = acc;
        }
    }
    out
}

fn levels() -> Vec<SimdLevel> {
    SimdLevel::available()
}

const TYPESIZES: [usize; 20] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 32, 255, 24,
];

fn lengths() -> impl Iterator<Item = usize> {
    (0..600).chain([
        1023,
        4096,
        4099,
        32768,
        32768 + 17,
        65536 + 255,
        131072 + 8 * 17 + 3,
    ])
}

// ---------- known vectors ----------

#[test]
fn shuffle_known_vector() {
    let src: Vec<u8> = (0u8..10).collect();
    let mut dst = vec![0; 10];
    shuffle::shuffle(4, &src, &mut dst).unwrap();
    assert_eq!(dst, [0, 4, 1, 5, 2, 6, 3, 7, 8, 9]);
    let mut back = vec![0; 10];
    shuffle::unshuffle(4, &dst, &mut back).unwrap();
    assert_eq!(back, src);
    // typesize 1 is the identity.
    shuffle::shuffle(1, &src, &mut dst).unwrap();
    assert_eq!(dst, src);
}

#[test]
fn bitshuffle_known_vectors() {
    // typesize 1, 8 elements: element q has only bit q set -> plane b byte 0 = bit b of each
    // element gathered LSB-first = 1 << b.
    let src: Vec<u8> = (0..8).map(|q| 1u8 << q).collect();
    let mut dst = vec![0; 8];
    bitshuffle::bitshuffle(1, &src, &mut dst, BitshuffleRule::Blosc2).unwrap();
    assert_eq!(dst, [1, 2, 4, 8, 16, 32, 64, 128]);
    // typesize 2, 8 elements all 0x0001: plane 0 (bit 0 of byte 0) is 0xff, the rest 0.
    let src = [1u8, 0].repeat(8);
    let mut dst = vec![0; 16];
    bitshuffle::bitshuffle(2, &src, &mut dst, BitshuffleRule::Blosc2).unwrap();
    let mut want = vec![0u8; 16];
    want[0] = 0xff;
    assert_eq!(dst, want);
    // element 3 = 0x8000: bit 7 of byte 1 -> plane 15, byte 0, bit 3.
    let mut src = vec![0u8; 16];
    src[3 * 2 + 1] = 0x80;
    bitshuffle::bitshuffle(2, &src, &mut dst, BitshuffleRule::Blosc2).unwrap();
    let mut want = vec![0u8; 16];
    want[15] = 1 << 3;
    assert_eq!(dst, want);
    // 16 elements of typesize 1: two bytes per plane.
    let src: Vec<u8> = (0..16).map(|i| if i == 9 { 0x04 } else { 0 }).collect();
    let mut dst = vec![0; 16];
    bitshuffle::bitshuffle(1, &src, &mut dst, BitshuffleRule::Blosc2).unwrap();
    let mut want = vec![0u8; 16];
    want[2 * 2 + 1] = 1 << 1; // plane 2, byte 1, bit 1
    assert_eq!(dst, want);
}

#[test]
fn transpose8x8_matches_definition() {
    for seed in 0..200u64 {
        let x = u64::from_le_bytes(bytes(8, seed).try_into().unwrap());
        let y = bitshuffle::transpose8x8(x);
        for r in 0..8 {
            for c in 0..8 {
                assert_eq!((x >> (8 * r + c)) & 1, (y >> (8 * c + r)) & 1);
            }
        }
        assert_eq!(bitshuffle::transpose8x8(y), x);
    }
}

#[test]
fn bitshuffle_matches_definition() {
    for &t in &TYPESIZES {
        for len in (0..400).chain([4096 + 5]) {
            let src = bytes(len, (t * 1000 + len) as u64);
            for rule in [BitshuffleRule::Blosc1, BitshuffleRule::Blosc2] {
                let n = rule.transformed_len(t, len);
                let want = naive_bitshuffle(t, &src, n);
                let mut got = vec![0; len];
                bitshuffle::scalar::bitshuffle(t, &src, &mut got, rule).unwrap();
                assert_eq!(got, want, "scalar t={t} len={len} {rule:?}");
                bitshuffle::bitshuffle(t, &src, &mut got, rule).unwrap();
                assert_eq!(got, want, "dispatch t={t} len={len} {rule:?}");
            }
        }
    }
}

#[test]
fn bitshuffle_rules_version2_vs_version3() {
    // typesize 4, 12 elements + 2 bytes: Blosc2 transforms 8 elements and copies 4 elements +
    // the 2 tail bytes; Blosc1 (m = 12, not a multiple of 8) copies the whole block.
    let t = 4;
    let src = bytes(50, 7);
    assert_eq!(BitshuffleRule::Blosc2.transformed_len(t, 50), 32);
    assert_eq!(BitshuffleRule::Blosc1.transformed_len(t, 50), 0);
    let mut v5 = vec![0; 50];
    bitshuffle::bitshuffle(t, &src, &mut v5, BitshuffleRule::Blosc2).unwrap();
    assert_eq!(v5, naive_bitshuffle(t, &src, 32));
    assert_eq!(v5[32..], src[32..]);
    let mut v2 = vec![0; 50];
    bitshuffle::bitshuffle(t, &src, &mut v2, BitshuffleRule::Blosc1).unwrap();
    assert_eq!(v2, src);
    // 16 elements + 1 byte: both transform 64 bytes and copy the 1-byte tail.
    let src = bytes(65, 8);
    for rule in [BitshuffleRule::Blosc1, BitshuffleRule::Blosc2] {
        assert_eq!(rule.transformed_len(t, 65), 64);
        let mut out = vec![0; 65];
        bitshuffle::bitshuffle(t, &src, &mut out, rule).unwrap();
        assert_eq!(out, naive_bitshuffle(t, &src, 64));
        assert_eq!(out[64], src[64]);
        let mut back = vec![0; 65];
        bitshuffle::bitunshuffle(t, &out, &mut back, rule).unwrap();
        assert_eq!(back, src);
    }
    // Leftover block smaller than the typesize: copied by both.
    let src = bytes(3, 9);
    for rule in [BitshuffleRule::Blosc1, BitshuffleRule::Blosc2] {
        let mut out = vec![0; 3];
        bitshuffle::bitunshuffle(t, &src, &mut out, rule).unwrap();
        assert_eq!(out, src);
    }
    // Pipeline picks the rule from the version byte.
    let p2 = Pipeline::new([0, 0, 0, 0, 0, BITSHUFFLE], [0; 6], 4, 2).unwrap();
    let p5 = Pipeline::new([0, 0, 0, 0, 0, BITSHUFFLE], [0; 6], 4, 5).unwrap();
    assert_eq!(p2.bitshuffle_rule(), BitshuffleRule::Blosc1);
    assert_eq!(p5.bitshuffle_rule(), BitshuffleRule::Blosc2);
    let src = bytes(50, 7);
    let mut a = src.clone();
    let mut out = vec![0; 50];
    p2.backward(&mut a, &mut out, None).unwrap();
    assert_eq!(out, src);
}

#[test]
fn shuffle_matches_definition() {
    for &t in &TYPESIZES {
        for len in (0..300).chain([4099]) {
            let src = bytes(len, (t * 7 + len) as u64);
            let want = naive_shuffle(t, &src);
            let mut got = vec![0; len];
            shuffle::scalar::shuffle(t, &src, &mut got).unwrap();
            assert_eq!(got, want, "scalar t={t} len={len}");
            let mut back = vec![0; len];
            shuffle::scalar::unshuffle(t, &want, &mut back).unwrap();
            assert_eq!(back, src, "scalar unshuffle t={t} len={len}");
        }
    }
}

// ---------- SIMD vs scalar ----------

#[test]
fn simd_shuffle_matches_scalar() {
    for level in levels() {
        for &t in &TYPESIZES {
            for len in lengths() {
                let src = bytes(len, (t * 31 + len) as u64);
                let mut want = vec![0; len];
                let mut got = vec![0xAA; len];
                shuffle::scalar::shuffle(t, &src, &mut want).unwrap();
                shuffle::shuffle_with(level, t, &src, &mut got).unwrap();
                assert_eq!(got, want, "shuffle {level:?} t={t} len={len}");
                shuffle::scalar::unshuffle(t, &src, &mut want).unwrap();
                shuffle::unshuffle_with(level, t, &src, &mut got).unwrap();
                assert_eq!(got, want, "unshuffle {level:?} t={t} len={len}");
            }
        }
    }
}

#[test]
fn simd_bitshuffle_matches_scalar() {
    for level in levels() {
        for &t in &TYPESIZES {
            for len in lengths() {
                let src = bytes(len, (t * 131 + len) as u64);
                for rule in [BitshuffleRule::Blosc1, BitshuffleRule::Blosc2] {
                    let mut want = vec![0; len];
                    let mut got = vec![0x55; len];
                    bitshuffle::scalar::bitshuffle(t, &src, &mut want, rule).unwrap();
                    bitshuffle::bitshuffle_with(level, t, &src, &mut got, rule).unwrap();
                    assert_eq!(got, want, "bitshuffle {level:?} t={t} len={len} {rule:?}");
                    bitshuffle::scalar::bitunshuffle(t, &src, &mut want, rule).unwrap();
                    bitshuffle::bitunshuffle_with(level, t, &src, &mut got, rule).unwrap();
                    assert_eq!(got, want, "bitunshuffle {level:?} t={t} len={len} {rule:?}");
                }
            }
        }
    }
}

#[test]
fn simd_bytedelta_matches_scalar() {
    for level in levels() {
        for &t in &TYPESIZES {
            for len in lengths() {
                let src = bytes(len, (t * 17 + len) as u64);
                let want = naive_bytedelta_decode(t, &src);
                let mut got = vec![0; len];
                bytedelta::scalar::decode(t, &src, &mut got).unwrap();
                assert_eq!(got, want, "scalar t={t} len={len}");
                bytedelta::decode_with(level, t, &src, &mut got).unwrap();
                assert_eq!(got, want, "{level:?} t={t} len={len}");
                let mut enc = vec![0; len];
                bytedelta::encode(t, &want, &mut enc).unwrap();
                assert_eq!(enc, src, "encode t={t} len={len}");
            }
        }
    }
}

// ---------- bytedelta 34 ----------

#[test]
fn bytedelta_buggy_restarts_after_whole_groups() {
    // Section 3.5b: per stream, the running sum covers k < floor(s/16)*16 and restarts at 0
    // for the remaining bytes; tail bytes are copied here.
    for &(t, len) in &[
        (1, 40),
        (4, 4 * 37 + 3),
        (2, 2 * 15),
        (3, 3 * 16),
        (8, 8 * 100 + 7),
    ] {
        let src = bytes(len, len as u64);
        let s = len / t;
        let mut want = src.clone();
        for i in 0..t {
            let g = s / 16 * 16;
            let mut acc = 0u8;
            for k in 0..s {
                if k == g {
                    acc = 0;
                }
                acc = acc.wrapping_add(src[i * s + k]);
                want[i * s + k] = acc;
            }
        }
        let mut got = vec![0; len];
        bytedelta::decode_buggy(t, &src, &mut got).unwrap();
        assert_eq!(got, want, "t={t} len={len}");
        // The quirk only shows when a stream has both whole groups and a remainder.
        let mut fixed = vec![0; len];
        bytedelta::decode(t, &src, &mut fixed).unwrap();
        if s % 16 == 0 || s < 16 {
            assert_eq!(fixed, want);
        }
        // Through the pipeline, id 34 in slot 1 (meta 0 -> typesize).
        let p = Pipeline::new([0, BYTEDELTA_BUGGY, 0, 0, 0, 0], [0; 6], t, 5).unwrap();
        let mut a = src.clone();
        p.backward(&mut a, &mut got, None).unwrap();
        assert_eq!(got, want);
        // Never written.
        let mut scratch = vec![0; len];
        assert!(matches!(
            p.forward(&want, &mut got, &mut scratch, &want, true),
            Err(CodecError::UnsupportedFilter {
                id: 34,
                slot: 1,
                ..
            })
        ));
    }
}

// ---------- delta and trunc_prec ----------

#[test]
fn delta_definition_and_tail() {
    assert_eq!(
        (1..=17).map(delta::unit).collect::<Vec<_>>(),
        [1, 2, 1, 4, 1, 1, 1, 8, 1, 1, 1, 1, 1, 1, 1, 8, 1]
    );
    assert_eq!(delta::unit(24), 8);
    assert_eq!(delta::unit(32), 8);
    // 10 bytes typesize 4: 2 words XOR-ed, 2 tail bytes copied.
    let src: Vec<u8> = (1..=10).collect();
    let mut enc = vec![0; 10];
    delta::encode(4, &src, &mut enc, None).unwrap();
    assert_eq!(enc, [1, 2, 3, 4, 5 ^ 1, 6 ^ 2, 7 ^ 3, 8 ^ 4, 9, 10]);
    let r = [0xffu8; 8];
    delta::encode(4, &src, &mut enc, Some(&r)).unwrap();
    assert_eq!(enc, [!1, !2, !3, !4, !5, !6, !7, !8, 9, 10]);
    let mut dec = vec![0; 10];
    delta::decode(4, &enc, &mut dec, Some(&r)).unwrap();
    assert_eq!(dec, src);
    // Block 0 decode against the definition (x[i] ^= x[i - u] over whole words, tail kept).
    for t in [1usize, 2, 3, 4, 8, 12, 16, 24] {
        let u = delta::unit(t);
        for len in (0..80).chain([1001, 4096 + 7]) {
            let enc = bytes(len, (len * t) as u64);
            let body = len - len % u;
            let mut want = enc.clone();
            for i in u..body {
                want[i] ^= want[i - u];
            }
            let mut got = vec![0; len];
            delta::decode(t, &enc, &mut got, None).unwrap();
            assert_eq!(got, want, "t={t} len={len}");
            let mut inplace = enc.clone();
            delta::decode_in_place(t, &mut inplace, None).unwrap();
            assert_eq!(inplace, want, "in place t={t} len={len}");
            delta::encode(t, &want, &mut got, None).unwrap();
            assert_eq!(got, enc, "encode t={t} len={len}");
        }
    }
    // Reference too short is an error, not a panic.
    assert!(delta::encode(4, &src, &mut enc, Some(&r[..4])).is_err());
    assert!(delta::decode(4, &src, &mut enc, Some(&r[..4])).is_err());
}

#[test]
fn trunc_prec_rules() {
    assert_eq!(truncprec::zeroed_bits(4, 10).unwrap(), 13);
    assert_eq!(truncprec::zeroed_bits(4, 0xfb).unwrap(), 5);
    assert_eq!(truncprec::zeroed_bits(8, 20).unwrap(), 32);
    assert!(truncprec::zeroed_bits(4, 0).is_err());
    assert!(truncprec::zeroed_bits(4, 24).is_err());
    assert!(truncprec::zeroed_bits(4, (-23i8) as u8).is_err());
    assert!(truncprec::zeroed_bits(2, 5).is_err());
    let x: Vec<u8> = [1.2345678f32, -3.0e7, 0.1]
        .iter()
        .flat_map(|f| f.to_le_bytes())
        .chain([0xAB])
        .collect();
    let mut out = vec![0; x.len()];
    truncprec::trunc_prec(4, 10, &x, &mut out).unwrap();
    for i in 0..3 {
        let a = u32::from_le_bytes(x[4 * i..4 * i + 4].try_into().unwrap());
        let b = u32::from_le_bytes(out[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!(b, a & !((1 << 13) - 1));
    }
    assert_eq!(out[12], 0xAB);
}

// ---------- pipeline ----------

#[test]
fn pipeline_validation() {
    let cases: [(u8, &str); 7] = [
        (5, "reserved"),
        (31, "reserved"),
        (32, "ndcell"),
        (33, "ndmean"),
        (36, "int_trunc"),
        (100, "registered plugin"),
        (200, "user"),
    ];
    for (id, name) in cases {
        let mut f = [0u8; 6];
        f[2] = id;
        assert_eq!(
            Pipeline::new(f, [0; 6], 4, 5),
            Err(CodecError::UnsupportedFilter { id, name, slot: 2 })
        );
    }
    // Version 3 ignores slot 5 (and its meta), even an unknown id.
    let p = Pipeline::new([0, 0, 0, 0, 0, 200], [0, 0, 0, 0, 0, 9], 4, 3).unwrap();
    assert_eq!(p.filters, [0; 6]);
    assert_eq!(p.filters_meta, [0; 6]);
    assert!(p.is_noop_backward());
    assert!(Pipeline::new([0; 6], [0; 6], 0, 5).is_err());
    let noop =
        |f: [u8; 6], m: [u8; 6], t: usize| Pipeline::new(f, m, t, 5).unwrap().is_noop_backward();
    assert!(noop([0; 6], [0; 6], 4));
    assert!(noop([0, 0, 0, 0, 0, SHUFFLE], [0; 6], 1));
    assert!(!noop([0, 0, 0, 0, 0, SHUFFLE], [0; 6], 4));
    assert!(noop([0, 0, 0, 0, 0, SHUFFLE], [0, 0, 0, 0, 0, 1], 4));
    assert!(noop([TRUNC_PREC, 0, 0, 0, 0, 0], [10, 0, 0, 0, 0, 0], 4));
    assert!(!noop([0, 0, 0, 0, 0, BITSHUFFLE], [0; 6], 1));
    assert!(!noop([BYTEDELTA, 0, 0, 0, 0, 0], [0; 6], 1));
    assert!(
        Pipeline::new([0, 0, 0, 0, DELTA, SHUFFLE], [0; 6], 4, 2)
            .unwrap()
            .has_delta()
    );
    assert!(
        !Pipeline::new([0, 0, 0, 0, 0, SHUFFLE], [0; 6], 4, 2)
            .unwrap()
            .has_delta()
    );
    // Mismatched buffers are errors.
    let p = Pipeline::new([0, 0, 0, 0, 0, SHUFFLE], [0; 6], 4, 5).unwrap();
    let mut a = vec![0; 10];
    let mut b = vec![0; 9];
    assert!(p.backward(&mut a, &mut b, None).is_err());
    let mut s = vec![0; 5];
    let mut d = vec![0; 10];
    assert!(p.forward(&a, &mut d, &mut s, &a, true).is_err());
}

/// Encodes a whole "chunk" block by block with `forward` and decodes it with `backward`
/// (block 0 first, then the others with the decoded block 0), as the encoder and decoder do.
fn chunk_round_trip(p: &Pipeline, input: &[u8], blocksize: usize) -> Vec<u8> {
    let blocks: Vec<&[u8]> = input.chunks(blocksize.max(1)).collect();
    let mut filtered = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        let mut dst = vec![0; b.len()];
        let mut scratch = vec![0; b.len() + 3];
        p.forward(b, &mut dst, &mut scratch, input, i == 0).unwrap();
        filtered.push(dst);
    }
    let mut out: Vec<Vec<u8>> = Vec::new();
    for (i, f) in filtered.iter_mut().enumerate() {
        let mut dst = vec![0; f.len()];
        let block0 = if i == 0 { None } else { Some(&out[0][..]) };
        p.backward(f, &mut dst, block0).unwrap();
        out.push(dst);
    }
    out.concat()
}

#[test]
fn pipeline_round_trips() {
    let pipelines: &[([u8; 6], [u8; 6])] = &[
        ([0; 6], [0; 6]),
        ([0, 0, 0, 0, 0, SHUFFLE], [0; 6]),
        ([0, 0, 0, 0, 0, BITSHUFFLE], [0; 6]),
        ([DELTA, 0, 0, 0, 0, 0], [0; 6]),
        ([BYTEDELTA, 0, 0, 0, 0, 0], [0; 6]),
        ([0, 0, 0, 0, DELTA, SHUFFLE], [0; 6]),
        ([0, 0, 0, 0, DELTA, BITSHUFFLE], [0; 6]),
        ([DELTA, SHUFFLE, 0, 0, 0, 0], [0; 6]),
        ([SHUFFLE, BYTEDELTA, 0, 0, 0, 0], [0; 6]),
        ([SHUFFLE, BYTEDELTA, 0, 0, 0, 0], [2, 2, 0, 0, 0, 0]),
        ([SHUFFLE, 0, 0, 0, 0, 0], [4, 0, 0, 0, 0, 0]),
        ([DELTA, SHUFFLE, BYTEDELTA, 0, 0, 0], [0, 3, 3, 0, 0, 0]),
        ([SHUFFLE, BITSHUFFLE, 0, 0, 0, 0], [0; 6]),
        ([DELTA, BITSHUFFLE, SHUFFLE, BYTEDELTA, DELTA, 0], [0; 6]),
        (
            [NOFILTER, DELTA, NOFILTER, SHUFFLE, NOFILTER, BYTEDELTA],
            [0, 0, 0, 5, 0, 0],
        ),
    ];
    for (f, m) in pipelines {
        for &t in &[1usize, 2, 3, 4, 7, 8, 12, 16, 17] {
            for version in [2u8, 5] {
                let p = Pipeline::new(*f, *m, t, version).unwrap();
                for &(len, bs) in &[
                    (0, 64),
                    (5, 64),
                    (1001, 256),
                    (4000, 4000),
                    (10000, 4096),
                    (999, 1),
                ] {
                    let bs = if bs > t { bs - bs % t } else { bs };
                    let input = bytes(len, (len + t) as u64);
                    // With DELTA the blocks > 0 XOR the original input while decode XORs the
                    // decoded block 0: they agree when DELTA runs before any other filter,
                    // the only placement writers use.
                    let delta_first = f.iter().find(|&&x| x != 0) == Some(&DELTA)
                        && f.iter().filter(|&&x| x == DELTA).count() == 1;
                    if p.has_delta() && !delta_first {
                        continue;
                    }
                    let got = chunk_round_trip(&p, &input, bs);
                    assert_eq!(
                        got, input,
                        "filters {f:?} meta {m:?} t={t} v{version} len={len} bs={bs}"
                    );
                }
            }
        }
    }
}

#[test]
fn pipeline_forward_matches_filters_in_order() {
    // [DELTA, SHUFFLE] on block 1 = shuffle(delta against the original input).
    let t = 4;
    let input = bytes(8192, 3);
    let p = Pipeline::new([DELTA, SHUFFLE, 0, 0, 0, 0], [0; 6], t, 5).unwrap();
    let block = &input[4096..];
    let mut dst = vec![0; 4096];
    let mut scratch = vec![0; 4096];
    p.forward(block, &mut dst, &mut scratch, &input, false)
        .unwrap();
    let mut d = vec![0; 4096];
    delta::encode(t, block, &mut d, Some(&input)).unwrap();
    let mut want = vec![0; 4096];
    shuffle::shuffle(t, &d, &mut want).unwrap();
    assert_eq!(dst, want);
    // TRUNC_PREC then SHUFFLE.
    let p = Pipeline::new([TRUNC_PREC, SHUFFLE, 0, 0, 0, 0], [12, 0, 0, 0, 0, 0], t, 5).unwrap();
    p.forward(block, &mut dst, &mut scratch, &input, true)
        .unwrap();
    truncprec::trunc_prec(t, 12, block, &mut d).unwrap();
    shuffle::shuffle(t, &d, &mut want).unwrap();
    assert_eq!(dst, want);
    // TRUNC_PREC on typesize 2 cannot be written.
    let p = Pipeline::new([TRUNC_PREC, 0, 0, 0, 0, 0], [12, 0, 0, 0, 0, 0], 2, 5).unwrap();
    assert!(
        p.forward(block, &mut dst, &mut scratch, &input, true)
            .is_err()
    );
}

mod props;
mod reference;
