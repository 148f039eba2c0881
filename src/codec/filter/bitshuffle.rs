//! Bit shuffle and unshuffle (section 3.3), with the Blosc1 and Blosc2 block rules.
//!
//! The core transform takes `m` elements of `t` bytes (`m % 8 == 0`) to `8*t` bit-planes of
//! `m/8` bytes: plane `8*j + b`, byte `k`, bit `q` is bit `b` of byte `j` of element `8*k + q`.
//! Equivalently: a byte shuffle, then an 8x8 bit transpose (LSB first) of every group of 8 bytes
//! in each byte row. Which part of a block is transformed depends on the chunk version
//! ([`BitshuffleRule`]); the rest is copied unchanged. [`scalar`] is the safe twin of the SIMD
//! kernels.

#![forbid(unsafe_code)]

use super::{SimdLevel, check_len};
use crate::codec::CodecError;

/// Which part of a block the bit transpose covers (section 3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BitshuffleRule {
    /// Version 2 chunks (C-Blosc 1.x): with `m = len / t`, transform all `m` elements when
    /// `m % 8 == 0` (copy the `len % t` tail), otherwise copy the whole block unchanged.
    Blosc1,
    /// Version 3 and later (C-Blosc2): transform the first `m` elements rounded down to a
    /// multiple of 8, copy the rest.
    Blosc2,
}

impl BitshuffleRule {
    /// The rule a chunk of this version byte follows: `Blosc1` up to version 2.
    pub fn for_version(version: u8) -> BitshuffleRule {
        if version <= 2 {
            BitshuffleRule::Blosc1
        } else {
            BitshuffleRule::Blosc2
        }
    }

    /// How many leading bytes of a `len`-byte block the bit transpose covers, for elements of
    /// `typesize` bytes (0 is treated as 1). Always a multiple of `8*typesize`.
    pub fn transformed_len(self, typesize: usize, len: usize) -> usize {
        let t = typesize.max(1);
        let m = len / t;
        match self {
            BitshuffleRule::Blosc1 if !m.is_multiple_of(8) => 0,
            BitshuffleRule::Blosc1 => m * t,
            BitshuffleRule::Blosc2 => (m - m % 8) * t,
        }
    }
}

/// Bit-shuffles `src` into `dst` (same length) for elements of `typesize` bytes.
pub fn bitshuffle(
    typesize: usize,
    src: &[u8],
    dst: &mut [u8],
    rule: BitshuffleRule,
) -> Result<(), CodecError> {
    bitshuffle_with(SimdLevel::detect(), typesize, src, dst, rule)
}

/// Undoes [`bitshuffle`].
pub fn bitunshuffle(
    typesize: usize,
    src: &[u8],
    dst: &mut [u8],
    rule: BitshuffleRule,
) -> Result<(), CodecError> {
    bitunshuffle_with(SimdLevel::detect(), typesize, src, dst, rule)
}

/// [`bitshuffle`] with an explicit instruction set; a level the CPU lacks falls back to scalar.
pub fn bitshuffle_with(
    level: SimdLevel,
    typesize: usize,
    src: &[u8],
    dst: &mut [u8],
    rule: BitshuffleRule,
) -> Result<(), CodecError> {
    check_len(src.len(), dst.len())?;
    let t = typesize.max(1);
    let n = rule.transformed_len(t, src.len());
    let (body, tail) = dst.split_at_mut(n);
    tail.copy_from_slice(&src[n..]);
    if !tiled::trans_bit_elem(level, t, &src[..n], body) {
        scalar::trans_bit_elem(t, &src[..n], body);
    }
    Ok(())
}

/// [`bitunshuffle`] with an explicit instruction set; a level the CPU lacks falls back to scalar.
pub fn bitunshuffle_with(
    level: SimdLevel,
    typesize: usize,
    src: &[u8],
    dst: &mut [u8],
    rule: BitshuffleRule,
) -> Result<(), CodecError> {
    check_len(src.len(), dst.len())?;
    let t = typesize.max(1);
    let n = rule.transformed_len(t, src.len());
    let (body, tail) = dst.split_at_mut(n);
    tail.copy_from_slice(&src[n..]);
    if !tiled::untrans_bit_elem(level, t, &src[..n], body) {
        scalar::untrans_bit_elem(t, &src[..n], body);
    }
    Ok(())
}

/// Transposes the 8x8 bit matrix held in `x` (row `r` = byte `r`, column `c` = bit `c`):
/// bit `8*r + c` moves to bit `8*c + r`. Its own inverse.
#[inline]
pub fn transpose8x8(mut x: u64) -> u64 {
    let t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x ^= t ^ (t << 7);
    let t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x ^= t ^ (t << 14);
    let t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^= t ^ (t << 28);
    x
}

/// The fast path of the core transform at any level: tiles of whole elements (at most
/// [`TILE`](tiled::TILE) bytes) are byte-shuffled into rows that stay in L1, and each row is
/// bit-transposed into / out of its 8 planes (SIMD row kernels where available, the 8x8 word
/// transpose for the rest).
mod tiled {
    use super::super::SimdLevel;
    use super::super::shuffle::{shuffle_rows_with, unshuffle_rows_with};
    use super::transpose8x8;

    /// Bytes of elements per tile.
    pub(super) const TILE: usize = 16384;

    /// Elements per tile for typesize `t`, or `None` when `t` is too large. A multiple of 256
    /// when possible (each byte row is then whole 32-group AVX2 chunks), else of 32.
    fn tile_elems(t: usize) -> Option<usize> {
        let e = TILE / t;
        let e = if e >= 256 { e / 256 * 256 } else { e / 32 * 32 };
        (e > 0).then_some(e)
    }

    /// The core transform; returns false (nothing written) when the sizes do not suit tiling.
    pub(super) fn trans_bit_elem(level: SimdLevel, t: usize, src: &[u8], dst: &mut [u8]) -> bool {
        let n = src.len();
        let m = n / t;
        let Some(tile) = tile_elems(t) else {
            return false;
        };
        if dst.len() != n || m * t != n || !m.is_multiple_of(8) {
            return false;
        }
        let planes = m / 8;
        let mut tmp = vec![0u8; tile.min(m) * t];
        let mut e0 = 0;
        while e0 < m {
            let me = tile.min(m - e0);
            let part = &src[e0 * t..(e0 + me) * t];
            let rows: &[u8] = if t == 1 {
                part
            } else {
                shuffle_rows_with(level, t, part, &mut tmp[..me * t], me);
                &tmp[..me * t]
            };
            for (j, planes_j) in dst.chunks_exact_mut(8 * planes).enumerate() {
                bits_to_planes(level, &rows[j * me..(j + 1) * me], planes_j, planes, e0 / 8);
            }
            e0 += me;
        }
        true
    }

    /// The inverse core transform; returns false (nothing written) when the sizes do not suit
    /// tiling.
    pub(super) fn untrans_bit_elem(level: SimdLevel, t: usize, src: &[u8], dst: &mut [u8]) -> bool {
        let n = src.len();
        let m = n / t;
        let Some(tile) = tile_elems(t) else {
            return false;
        };
        if dst.len() != n || m * t != n || !m.is_multiple_of(8) {
            return false;
        }
        let planes = m / 8;
        let mut tmp = vec![0u8; tile.min(m) * t];
        let mut e0 = 0;
        while e0 < m {
            let me = tile.min(m - e0);
            let out = &mut dst[e0 * t..(e0 + me) * t];
            if t == 1 {
                planes_to_bits(level, src, planes, e0 / 8, out);
            } else {
                let rows = &mut tmp[..me * t];
                for (row, planes_j) in rows.chunks_exact_mut(me).zip(src.chunks_exact(8 * planes)) {
                    planes_to_bits(level, planes_j, planes, e0 / 8, row);
                }
                unshuffle_rows_with(level, t, rows, me, out);
            }
            e0 += me;
        }
        true
    }

    /// Bit-transposes byte row `row` (length a multiple of 8) into the 8 planes of `dst`
    /// (plane `b` at `b * planes`): group `g` of the row goes to byte `kcol + g` of each plane.
    fn bits_to_planes(level: SimdLevel, row: &[u8], dst: &mut [u8], planes: usize, kcol: usize) {
        #[cfg(target_arch = "x86_64")]
        let done = super::super::bitshuffle_simd::bits_to_planes(level, row, dst, planes, kcol);
        #[cfg(not(target_arch = "x86_64"))]
        let done = {
            let _ = level;
            0
        };
        for (g, x) in row.chunks_exact(8).enumerate().skip(done) {
            let x = [x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]];
            let y = transpose8x8(u64::from_le_bytes(x)).to_le_bytes();
            for (b, &v) in y.iter().enumerate() {
                dst[b * planes + kcol + g] = v;
            }
        }
    }

    /// The inverse of [`bits_to_planes`].
    fn planes_to_bits(level: SimdLevel, src: &[u8], planes: usize, kcol: usize, row: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        let done = super::super::bitshuffle_simd::planes_to_bits(level, src, planes, kcol, row);
        #[cfg(not(target_arch = "x86_64"))]
        let done = {
            let _ = level;
            0
        };
        for (g, x) in row.chunks_exact_mut(8).enumerate().skip(done) {
            let mut y = [0u8; 8];
            for (b, v) in y.iter_mut().enumerate() {
                *v = src[b * planes + kcol + g];
            }
            x.copy_from_slice(&transpose8x8(u64::from_le_bytes(y)).to_le_bytes());
        }
    }
}

/// The portable, safe twin of the SIMD kernels: the direct definition, element group by
/// element group (the differential tests' reference).
pub mod scalar {
    use super::{BitshuffleRule, check_len, transpose8x8};
    use crate::codec::CodecError;

    /// Scalar bit shuffle; same contract as [`super::bitshuffle`].
    pub fn bitshuffle(
        typesize: usize,
        src: &[u8],
        dst: &mut [u8],
        rule: BitshuffleRule,
    ) -> Result<(), CodecError> {
        check_len(src.len(), dst.len())?;
        let t = typesize.max(1);
        let n = rule.transformed_len(t, src.len());
        trans_bit_elem(t, &src[..n], &mut dst[..n]);
        dst[n..].copy_from_slice(&src[n..]);
        Ok(())
    }

    /// Scalar bit unshuffle; same contract as [`super::bitunshuffle`].
    pub fn bitunshuffle(
        typesize: usize,
        src: &[u8],
        dst: &mut [u8],
        rule: BitshuffleRule,
    ) -> Result<(), CodecError> {
        check_len(src.len(), dst.len())?;
        let t = typesize.max(1);
        let n = rule.transformed_len(t, src.len());
        untrans_bit_elem(t, &src[..n], &mut dst[..n]);
        dst[n..].copy_from_slice(&src[n..]);
        Ok(())
    }

    /// The core transform on `src.len() / t` elements (a multiple of 8 by construction).
    pub(crate) fn trans_bit_elem(t: usize, src: &[u8], dst: &mut [u8]) {
        let planes = src.len() / t / 8;
        if planes == 0 {
            return;
        }
        for (k, group) in src.chunks_exact(8 * t).enumerate() {
            for j in 0..t {
                let mut x = 0u64;
                for q in 0..8 {
                    x |= u64::from(group[q * t + j]) << (8 * q);
                }
                let y = transpose8x8(x).to_le_bytes();
                for (b, &v) in y.iter().enumerate() {
                    dst[(8 * j + b) * planes + k] = v;
                }
            }
        }
    }

    /// The inverse of [`trans_bit_elem`].
    pub(crate) fn untrans_bit_elem(t: usize, src: &[u8], dst: &mut [u8]) {
        let planes = src.len() / t / 8;
        if planes == 0 {
            return;
        }
        for (k, group) in dst.chunks_exact_mut(8 * t).enumerate() {
            for j in 0..t {
                let mut y = [0u8; 8];
                for (b, v) in y.iter_mut().enumerate() {
                    *v = src[(8 * j + b) * planes + k];
                }
                let x = transpose8x8(u64::from_le_bytes(y));
                for q in 0..8 {
                    group[q * t + j] = (x >> (8 * q)) as u8;
                }
            }
        }
    }
}
