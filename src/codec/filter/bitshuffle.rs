//! Bit shuffle and unshuffle (section 3.3), with the Blosc1 and Blosc2 block rules.
//!
//! The core transform takes `m` elements of `t` bytes (`m % 8 == 0`) to `8·t` bit-planes of
//! `m/8` bytes: plane `8·j + b`, byte `k`, bit `q` is bit `b` of byte `j` of element `8·k + q`.
//! Equivalently: a byte shuffle, then an 8×8 bit transpose (LSB first) of every group of 8 bytes
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
    /// `typesize` bytes (0 is treated as 1). Always a multiple of `8·typesize`.
    pub fn transformed_len(self, typesize: usize, len: usize) -> usize {
        let t = typesize.max(1);
        let m = len / t;
        match self {
            BitshuffleRule::Blosc1 if m % 8 != 0 => 0,
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
    #[cfg(target_arch = "x86_64")]
    if super::bitshuffle_simd::bitshuffle(level, t, &src[..n], body) {
        return Ok(());
    }
    let _ = level;
    scalar::trans_bit_elem(t, &src[..n], body);
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
    #[cfg(target_arch = "x86_64")]
    if super::bitshuffle_simd::bitunshuffle(level, t, &src[..n], body) {
        return Ok(());
    }
    let _ = level;
    scalar::untrans_bit_elem(t, &src[..n], body);
    Ok(())
}

/// Transposes the 8×8 bit matrix held in `x` (row `r` = byte `r`, column `c` = bit `c`):
/// bit `8·r + c` moves to bit `8·c + r`. Its own inverse.
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

/// The portable, safe twin of the SIMD kernels.
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
