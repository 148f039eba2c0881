//! Bytedelta (id 35) and the old bytedelta (id 34) (section 3.5b).
//!
//! A block is `t` streams of `s = len / t` bytes back to back (what SHUFFLE produces) plus
//! `len % t` tail bytes, always copied unchanged. Encode: wrapping difference of consecutive
//! bytes in each stream (the first byte kept). Decode: wrapping running sum per stream.
//! Id 34 decodes with C-Blosc2's SIMD restart quirk: the running sum restarts at 0 after the
//! stream's last whole 16-byte group ([`decode_buggy`]); it is never written. [`scalar`] is the
//! safe twin of the SIMD decoder.

#![forbid(unsafe_code)]

use super::{SimdLevel, check_len};
use crate::codec::CodecError;

/// Stream length for a block of `len` bytes and group size `t` (0 treated as 1).
fn stream_len(t: usize, len: usize) -> usize {
    len / t.max(1)
}

/// Bytedelta-encodes `src` into `dst` (same length) with `typesize` streams.
pub fn encode(typesize: usize, src: &[u8], dst: &mut [u8]) -> Result<(), CodecError> {
    check_len(src.len(), dst.len())?;
    let s = stream_len(typesize, src.len());
    if s > 0 {
        let body = s * typesize.max(1);
        for (out, inp) in dst[..body].chunks_exact_mut(s).zip(src.chunks_exact(s)) {
            let mut prev = 0u8;
            for (o, &i) in out.iter_mut().zip(inp) {
                *o = i.wrapping_sub(prev);
                prev = i;
            }
        }
        dst[body..].copy_from_slice(&src[body..]);
    } else {
        dst.copy_from_slice(src);
    }
    Ok(())
}

/// Decodes bytedelta (id 35) from `src` into `dst` (same length).
pub fn decode(typesize: usize, src: &[u8], dst: &mut [u8]) -> Result<(), CodecError> {
    decode_with(SimdLevel::detect(), typesize, src, dst)
}

/// [`decode`] in place.
pub fn decode_in_place(typesize: usize, buf: &mut [u8]) {
    decode_in_place_with(SimdLevel::detect(), typesize, buf)
}

/// [`decode`] with an explicit instruction set; a level the CPU lacks falls back to scalar.
pub fn decode_with(
    level: SimdLevel,
    typesize: usize,
    src: &[u8],
    dst: &mut [u8],
) -> Result<(), CodecError> {
    check_len(src.len(), dst.len())?;
    dst.copy_from_slice(src);
    decode_in_place_with(level, typesize, dst);
    Ok(())
}

/// [`decode_in_place`] with an explicit instruction set.
pub fn decode_in_place_with(level: SimdLevel, typesize: usize, buf: &mut [u8]) {
    let s = stream_len(typesize, buf.len());
    if s == 0 {
        return;
    }
    let body = s * typesize.max(1);
    for stream in buf[..body].chunks_exact_mut(s) {
        #[cfg(target_arch = "x86_64")]
        if super::bytedelta_simd::prefix_sum(level, stream) {
            continue;
        }
        let _ = level;
        scalar::prefix_sum(stream, 0);
    }
}

/// Decodes the old bytedelta (id 34) from `src` into `dst`, reproducing C-Blosc2's x86 output:
/// in each stream the running sum covers the whole 16-byte groups, then restarts at 0 for the
/// remaining `s % 16` bytes. Tail bytes (which C leaves unwritten) are copied unchanged.
pub fn decode_buggy(typesize: usize, src: &[u8], dst: &mut [u8]) -> Result<(), CodecError> {
    check_len(src.len(), dst.len())?;
    dst.copy_from_slice(src);
    decode_buggy_in_place(typesize, dst);
    Ok(())
}

/// [`decode_buggy`] in place.
pub fn decode_buggy_in_place(typesize: usize, buf: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    let level = SimdLevel::detect();
    let s = stream_len(typesize, buf.len());
    if s == 0 {
        return;
    }
    let body = s * typesize.max(1);
    for stream in buf[..body].chunks_exact_mut(s) {
        let split = s - s % 16;
        let (groups, rest) = stream.split_at_mut(split);
        #[cfg(target_arch = "x86_64")]
        let done = super::bytedelta_simd::prefix_sum(level, groups);
        #[cfg(not(target_arch = "x86_64"))]
        let done = false;
        if !done {
            scalar::prefix_sum(groups, 0);
        }
        scalar::prefix_sum(rest, 0);
    }
}

/// The portable, safe twin of the SIMD decoder.
pub mod scalar {
    use super::{check_len, stream_len};
    use crate::codec::CodecError;

    /// Scalar bytedelta (id 35) decode; same contract as [`super::decode`].
    pub fn decode(typesize: usize, src: &[u8], dst: &mut [u8]) -> Result<(), CodecError> {
        check_len(src.len(), dst.len())?;
        dst.copy_from_slice(src);
        let s = stream_len(typesize, dst.len());
        if s > 0 {
            let body = s * typesize.max(1);
            for stream in dst[..body].chunks_exact_mut(s) {
                prefix_sum(stream, 0);
            }
        }
        Ok(())
    }

    /// Wrapping running byte sum of `buf` in place, starting from `start`; returns the last
    /// value.
    pub fn prefix_sum(buf: &mut [u8], start: u8) -> u8 {
        let mut acc = start;
        for b in buf.iter_mut() {
            acc = acc.wrapping_add(*b);
            *b = acc;
        }
        acc
    }
}
