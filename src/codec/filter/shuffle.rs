//! Byte shuffle and unshuffle (section 3.2), SIMD where the CPU has it, scalar otherwise.
//!
//! For `m = len / t` whole elements of `t` bytes, shuffle writes byte `j` of element `e` to
//! `out[j*m + e]`; the last `len % t` bytes are copied unchanged. `t <= 1` is the identity.
//! The public functions pick the best [`SimdLevel`] at run time; [`scalar`] is the safe twin
//! that the differential tests compare against.

#![forbid(unsafe_code)]

use super::{SimdLevel, check_len};
use crate::codec::CodecError;

/// Shuffles `src` into `dst` (same length) with group size `typesize`.
pub fn shuffle(typesize: usize, src: &[u8], dst: &mut [u8]) -> Result<(), CodecError> {
    shuffle_with(SimdLevel::detect(), typesize, src, dst)
}

/// Unshuffles `src` into `dst` (same length) with group size `typesize`.
pub fn unshuffle(typesize: usize, src: &[u8], dst: &mut [u8]) -> Result<(), CodecError> {
    unshuffle_with(SimdLevel::detect(), typesize, src, dst)
}

/// [`shuffle`] with an explicit instruction set; a level the CPU lacks falls back to scalar.
pub fn shuffle_with(
    level: SimdLevel,
    typesize: usize,
    src: &[u8],
    dst: &mut [u8],
) -> Result<(), CodecError> {
    check_len(src.len(), dst.len())?;
    #[cfg(target_arch = "x86_64")]
    if super::shuffle_simd::shuffle(level, typesize, src, dst) {
        return Ok(());
    }
    let _ = level;
    scalar::shuffle_unchecked(typesize, src, dst);
    Ok(())
}

/// [`unshuffle`] with an explicit instruction set; a level the CPU lacks falls back to scalar.
pub fn unshuffle_with(
    level: SimdLevel,
    typesize: usize,
    src: &[u8],
    dst: &mut [u8],
) -> Result<(), CodecError> {
    check_len(src.len(), dst.len())?;
    #[cfg(target_arch = "x86_64")]
    if super::shuffle_simd::unshuffle(level, typesize, src, dst) {
        return Ok(());
    }
    let _ = level;
    scalar::unshuffle_unchecked(typesize, src, dst);
    Ok(())
}

/// Bytes `range` of the unshuffle of `src` (a whole shuffled block) into `dst` (exactly
/// `range.len()` bytes): what [`unshuffle`] would write there, reading only the bytes they
/// come from. Byte `k` of element `e` of the block is at `k * m + e` of `src`, where `m` is
/// its number of whole elements, and the last `src.len() % typesize` bytes are stored as
/// they are: a small read of a block needs only its own bytes unshuffled, not the block.
///
/// # Errors
/// `OutputSize` when `dst` is not `range.len()` bytes or `range` is not inside `src`.
pub fn unshuffle_range(
    typesize: usize,
    src: &[u8],
    range: std::ops::Range<usize>,
    dst: &mut [u8],
) -> Result<(), CodecError> {
    check_len(range.len(), dst.len())?;
    check_len(src.len(), src.len().max(range.end))?;
    let t = typesize;
    let m = if t > 1 { src.len() / t } else { 0 };
    let body = m * t;
    if m == 0 {
        dst.copy_from_slice(&src[range]);
        return Ok(());
    }
    // Whole elements in the middle through the kernel, the bytes around them one by one.
    let first = range.start.div_ceil(t).min(m);
    let last = (range.end.min(body) / t).max(first);
    let mut at = range.start;
    let mut out = 0;
    let byte = |i: usize| {
        if i < body {
            src[(i % t) * m + i / t]
        } else {
            src[i]
        }
    };
    while at < range.end && at < first * t {
        dst[out] = byte(at);
        (at, out) = (at + 1, out + 1);
    }
    if last > first && at == first * t {
        let n = (last - first) * t;
        let part = &mut dst[out..out + n];
        #[cfg(target_arch = "x86_64")]
        let done = super::shuffle_simd::unshuffle_from_rows(
            SimdLevel::detect(),
            t,
            &src[..body],
            m,
            first,
            part,
        );
        #[cfg(not(target_arch = "x86_64"))]
        let done = false;
        if !done {
            scalar::unshuffle_rows(t, &src[..body], m, part, first);
        }
        (at, out) = (at + n, out + n);
    }
    while at < range.end {
        dst[out] = byte(at);
        (at, out) = (at + 1, out + 1);
    }
    Ok(())
}

/// Writes the `src.len() / t` elements of `src` as `t` rows of `m` bytes in `dst` (row matrix
/// of a tile), with SIMD when available.
pub(crate) fn shuffle_rows_with(level: SimdLevel, t: usize, src: &[u8], dst: &mut [u8], m: usize) {
    #[cfg(target_arch = "x86_64")]
    if super::shuffle_simd::shuffle_to_rows(level, t, src, dst, m, 0) {
        return;
    }
    let _ = level;
    scalar::shuffle_rows(t, src, dst, m, 0);
}

/// Reads `dst.len() / t` elements from `t` rows of `m` bytes in `src` and writes them
/// interleaved to `dst`, with SIMD when available.
pub(crate) fn unshuffle_rows_with(
    level: SimdLevel,
    t: usize,
    src: &[u8],
    m: usize,
    dst: &mut [u8],
) {
    #[cfg(target_arch = "x86_64")]
    if super::shuffle_simd::unshuffle_from_rows(level, t, src, m, 0, dst) {
        return;
    }
    let _ = level;
    scalar::unshuffle_rows(t, src, m, dst, 0);
}

/// The portable, safe twin of the SIMD kernels.
pub mod scalar {
    use super::check_len;
    use crate::codec::CodecError;

    /// Scalar shuffle; same contract as [`super::shuffle`].
    pub fn shuffle(typesize: usize, src: &[u8], dst: &mut [u8]) -> Result<(), CodecError> {
        check_len(src.len(), dst.len())?;
        shuffle_unchecked(typesize, src, dst);
        Ok(())
    }

    /// Scalar unshuffle; same contract as [`super::unshuffle`].
    pub fn unshuffle(typesize: usize, src: &[u8], dst: &mut [u8]) -> Result<(), CodecError> {
        check_len(src.len(), dst.len())?;
        unshuffle_unchecked(typesize, src, dst);
        Ok(())
    }

    /// Shuffle, `src.len() == dst.len()` already checked.
    pub(crate) fn shuffle_unchecked(t: usize, src: &[u8], dst: &mut [u8]) {
        let len = src.len().min(dst.len());
        let m = if t > 1 { len / t } else { 0 };
        let body = m * t;
        match t {
            _ if m == 0 => {}
            2 => shuffle_const::<2>(&src[..body], &mut dst[..body], m),
            4 => shuffle_const::<4>(&src[..body], &mut dst[..body], m),
            8 => shuffle_const::<8>(&src[..body], &mut dst[..body], m),
            _ => shuffle_rows(t, &src[..body], &mut dst[..body], m, 0),
        }
        dst[body..len].copy_from_slice(&src[body..len]);
    }

    /// Unshuffle, `src.len() == dst.len()` already checked.
    pub(crate) fn unshuffle_unchecked(t: usize, src: &[u8], dst: &mut [u8]) {
        let len = src.len().min(dst.len());
        let m = if t > 1 { len / t } else { 0 };
        let body = m * t;
        match t {
            _ if m == 0 => {}
            2 => unshuffle_const::<2>(&src[..body], &mut dst[..body], m),
            4 => unshuffle_const::<4>(&src[..body], &mut dst[..body], m),
            8 => unshuffle_const::<8>(&src[..body], &mut dst[..body], m),
            _ => unshuffle_rows(t, &src[..body], m, &mut dst[..body], 0),
        }
        dst[body..len].copy_from_slice(&src[body..len]);
    }

    fn shuffle_const<const T: usize>(src: &[u8], dst: &mut [u8], m: usize) {
        let mut it = dst.chunks_exact_mut(m);
        let mut rows: [&mut [u8]; T] = std::array::from_fn(|_| it.next().unwrap_or_default());
        for (e, elem) in src.chunks_exact(T).enumerate() {
            for (row, &b) in rows.iter_mut().zip(elem) {
                row[e] = b;
            }
        }
    }

    fn unshuffle_const<const T: usize>(src: &[u8], dst: &mut [u8], m: usize) {
        let rows: [&[u8]; T] = std::array::from_fn(|j| &src[j * m..(j + 1) * m]);
        for (e, elem) in dst.chunks_exact_mut(T).enumerate() {
            for (b, row) in elem.iter_mut().zip(rows.iter()) {
                *b = row[e];
            }
        }
    }

    /// Elements per cache block of the generic kernels: about 16 KiB of elements, so the
    /// strided side stays in L1 while each row is read or written sequentially.
    fn block_elems(t: usize) -> usize {
        (16384 / t).max(16)
    }

    /// Writes the `src.len() / t` elements of `src` as `t` rows of a matrix whose rows are
    /// `stride` bytes apart in `dst`, starting at column `col`.
    pub(crate) fn shuffle_rows(t: usize, src: &[u8], dst: &mut [u8], stride: usize, col: usize) {
        let n = src.len() / t;
        let eb = block_elems(t);
        let mut e0 = 0;
        while e0 < n {
            let len = eb.min(n - e0);
            let part = &src[e0 * t..(e0 + len) * t];
            for j in 0..t {
                let start = j * stride + col + e0;
                let row = &mut dst[start..start + len];
                for (o, &b) in row.iter_mut().zip(part[j..].iter().step_by(t)) {
                    *o = b;
                }
            }
            e0 += len;
        }
    }

    /// Reads `dst.len() / t` elements from `t` rows of `src` that are `stride` bytes apart,
    /// starting at column `col`, and writes them interleaved to `dst`.
    pub(crate) fn unshuffle_rows(t: usize, src: &[u8], stride: usize, dst: &mut [u8], col: usize) {
        let n = dst.len() / t;
        let eb = block_elems(t);
        let mut e0 = 0;
        while e0 < n {
            let len = eb.min(n - e0);
            let part = &mut dst[e0 * t..(e0 + len) * t];
            for j in 0..t {
                let start = j * stride + col + e0;
                let row = &src[start..start + len];
                for (o, &b) in part[j..].iter_mut().step_by(t).zip(row) {
                    *o = b;
                }
            }
            e0 += len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every range of blocks of every typesize (with leftover bytes) equals that range of the
    /// whole unshuffle (the best SIMD level here; whole elements go through its kernels).
    #[test]
    fn unshuffle_range_matches_the_whole_unshuffle() {
        for t in [1usize, 2, 3, 4, 7, 8, 12, 16, 23] {
            for len in [0usize, 5, 100, 1000, 4096 + 3, 16384 + 11] {
                let src: Vec<u8> = (0..len).map(|i| (i * 31 + i / 7) as u8).collect();
                let mut whole = vec![0u8; len];
                unshuffle(t, &src, &mut whole).unwrap();
                let ranges = [
                    (0, len),
                    (1, len / 2),
                    (len / 3, len),
                    (len / 2, len / 2 + 7),
                ];
                let more = (0..len.min(40)).map(|a| (a, len - a / 2));
                for (lo, hi) in ranges.into_iter().chain(more) {
                    let (lo, hi) = (lo.min(len), hi.min(len).max(lo.min(len)));
                    let mut got = vec![0u8; hi - lo];
                    unshuffle_range(t, &src, lo..hi, &mut got).unwrap();
                    assert_eq!(got, whole[lo..hi], "t {t} len {len} {lo}..{hi}");
                }
            }
        }
        let mut out = [0u8; 4];
        assert!(unshuffle_range(4, &[0; 8], 6..10, &mut out).is_err());
        assert!(unshuffle_range(4, &[0; 8], 0..3, &mut out).is_err());
    }
}
