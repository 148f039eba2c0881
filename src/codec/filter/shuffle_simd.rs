//! SSE2/AVX2 byte shuffle and unshuffle kernels, the unsafe twin of `shuffle.rs`.
//!
//! Group sizes 2, 4, 8 and 16 have dedicated kernels; any other size goes through 16x16 byte
//! transposes (AVX2 from 3 bytes, SSE2 from 6; smaller ones use the scalar twin). They work on
//! a "row matrix": `t` rows that are `stride` bytes apart, starting at column `col`, so the bit
//! shuffle can reuse them on cache-sized tiles.
//!
//! - Unshuffle (rows -> elements) loads 16 (SSE2) or 32 (AVX2) bytes from every row and
//!   interleaves them with `log2 t` rounds of unpacklo/unpackhi at widths 8, 16, 32, 64 bits.
//!   AVX2 unpacks work inside 128-bit lanes, so the outputs are regrouped with
//!   `permute2x128` before storing.
//! - Shuffle (elements -> rows) de-interleaves even and odd bytes with `packus_epi16`
//!   `log2 t` times; AVX2 restores the quarter order with `permute4x64` after each pack.
//! - Other sizes: byte rows are taken 16 at a time (the last group padded with zeros) and
//!   transposed with the `t = 16` interleave, 16 (SSE2) or 32 (AVX2) elements per block;
//!   unshuffle stores 16 bytes per element and group, partial group first, so the bytes a
//!   store writes past an element are rewritten by a later store (the last block of a buffer
//!   is left to the scalar twin when that overrun would leave the buffer).
//!
//! Elements left over after the last whole vector go through the scalar twin.

#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m128i, __m256i, _mm_and_si128, _mm_loadu_si128, _mm_packus_epi16, _mm_set1_epi16,
    _mm_setzero_si128, _mm_srli_epi16, _mm_storeu_si128, _mm_unpackhi_epi8, _mm_unpackhi_epi16,
    _mm_unpackhi_epi32, _mm_unpackhi_epi64, _mm_unpacklo_epi8, _mm_unpacklo_epi16,
    _mm_unpacklo_epi32, _mm_unpacklo_epi64, _mm256_and_si256, _mm256_castsi128_si256,
    _mm256_castsi256_si128, _mm256_extracti128_si256, _mm256_inserti128_si256, _mm256_loadu_si256,
    _mm256_packus_epi16, _mm256_permute2x128_si256, _mm256_permute4x64_epi64, _mm256_set1_epi16,
    _mm256_setzero_si256, _mm256_srli_epi16, _mm256_storeu_si256, _mm256_unpackhi_epi8,
    _mm256_unpackhi_epi16, _mm256_unpackhi_epi32, _mm256_unpackhi_epi64, _mm256_unpacklo_epi8,
    _mm256_unpacklo_epi16, _mm256_unpacklo_epi32, _mm256_unpacklo_epi64,
};

use super::SimdLevel;
use super::shuffle::scalar::{shuffle_rows, unshuffle_rows};

/// The level a kernel may actually use: `level` capped by what the CPU has.
pub(super) fn usable(level: SimdLevel) -> SimdLevel {
    match level {
        SimdLevel::Avx2 if SimdLevel::Avx2.cpu_has() => SimdLevel::Avx2,
        SimdLevel::Avx2 | SimdLevel::Sse2 if SimdLevel::Sse2.cpu_has() => SimdLevel::Sse2,
        _ => SimdLevel::Scalar,
    }
}

/// Shuffles with SIMD at `level` if the CPU has it and the typesize has a kernel; returns
/// whether it did (otherwise the caller runs the scalar twin). `src.len() == dst.len()`.
pub(super) fn shuffle(level: SimdLevel, t: usize, src: &[u8], dst: &mut [u8]) -> bool {
    if t < 2 || src.len() != dst.len() {
        return false;
    }
    let m = src.len() / t;
    let body = m * t;
    if !shuffle_to_rows(level, t, &src[..body], &mut dst[..body], m, 0) {
        return false;
    }
    dst[body..].copy_from_slice(&src[body..]);
    true
}

/// Unshuffles with SIMD; see [`shuffle`].
pub(super) fn unshuffle(level: SimdLevel, t: usize, src: &[u8], dst: &mut [u8]) -> bool {
    if t < 2 || src.len() != dst.len() {
        return false;
    }
    let m = src.len() / t;
    let body = m * t;
    if !unshuffle_from_rows(level, t, &src[..body], m, 0, &mut dst[..body]) {
        return false;
    }
    dst[body..].copy_from_slice(&src[body..]);
    true
}

/// Whether a row matrix of `t` rows, `n` columns from `col`, `stride` apart fits in `len`.
fn rows_fit(t: usize, n: usize, stride: usize, col: usize, len: usize) -> bool {
    (t - 1)
        .checked_mul(stride)
        .and_then(|x| x.checked_add(col))
        .and_then(|x| x.checked_add(n))
        .is_some_and(|end| end <= len)
}

/// SIMD blocks (of `per` elements) a generic-typesize kernel may run over `n` elements: its
/// 16-byte accesses at the last element's last byte group reach up to 15 bytes past the
/// block, which must stay inside `len` (the interleaved side).
fn generic_blocks(t: usize, n: usize, per: usize, len: usize) -> usize {
    let mut blocks = n / per;
    while blocks > 0 && blocks * per * t + 15 > len {
        blocks -= 1;
    }
    blocks
}

/// Writes the `src.len() / t` elements of `src` as `t` rows of `dst` (`stride` apart, from
/// column `col`). Returns false (nothing written) when `level` is not available, `t < 2`, or
/// the rows do not fit in `dst`. Typesizes 2, 4, 8, 16 have dedicated kernels; the others go
/// through 16x16 byte transposes.
pub(super) fn shuffle_to_rows(
    level: SimdLevel,
    t: usize,
    src: &[u8],
    dst: &mut [u8],
    stride: usize,
    col: usize,
) -> bool {
    if t < 2 {
        return false;
    }
    let n = src.len() / t;
    if !rows_fit(t, n, stride, col, dst.len()) {
        return false;
    }
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    let done = match usable(level) {
        SimdLevel::Avx2 => {
            let blocks = match t {
                2 | 4 | 8 | 16 => n / 32,
                _ => generic_blocks(t, n, 32, src.len()),
            };
            // SAFETY: AVX2 is available (checked by `usable`). The power-of-two kernels read
            // `blocks * 32 * t <= src.len()` bytes of `src`; the generic one reads at most 15
            // bytes more, which `generic_blocks` keeps inside `src`. All write columns
            // `col .. col + blocks * 32 <= col + n` of rows that `rows_fit` checked lie in `dst`.
            unsafe {
                match t {
                    2 => avx2::shuffle::<2>(s, d, stride, col, blocks),
                    4 => avx2::shuffle::<4>(s, d, stride, col, blocks),
                    8 => avx2::shuffle::<8>(s, d, stride, col, blocks),
                    16 => avx2::shuffle::<16>(s, d, stride, col, blocks),
                    _ => avx2::shuffle_any(s, d, stride, col, t, blocks),
                }
            }
            blocks * 32
        }
        SimdLevel::Sse2 => {
            let blocks = match t {
                2 | 4 | 8 | 16 => n / 16,
                // Below 6 bytes the padded 16x16 transposes lose to the scalar loop.
                _ if t < 6 => return false,
                _ => generic_blocks(t, n, 16, src.len()),
            };
            // SAFETY: SSE2 is available; same bounds argument as the AVX2 branch with 16
            // elements per block.
            unsafe {
                match t {
                    2 => sse2::shuffle::<2>(s, d, stride, col, blocks),
                    4 => sse2::shuffle::<4>(s, d, stride, col, blocks),
                    8 => sse2::shuffle::<8>(s, d, stride, col, blocks),
                    16 => sse2::shuffle::<16>(s, d, stride, col, blocks),
                    _ => sse2::shuffle_any(s, d, stride, col, t, blocks),
                }
            }
            blocks * 16
        }
        SimdLevel::Scalar => return false,
    };
    shuffle_rows(t, &src[done * t..n * t], dst, stride, col + done);
    true
}

/// Reads `dst.len() / t` elements from `t` rows of `src` (`stride` apart, from column `col`)
/// and writes them interleaved to `dst`. Returns false (nothing written) when `level` is not
/// available, `t < 2`, or the rows do not fit in `src`.
pub(super) fn unshuffle_from_rows(
    level: SimdLevel,
    t: usize,
    src: &[u8],
    stride: usize,
    col: usize,
    dst: &mut [u8],
) -> bool {
    if t < 2 {
        return false;
    }
    let n = dst.len() / t;
    if !rows_fit(t, n, stride, col, src.len()) {
        return false;
    }
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    let done = match usable(level) {
        SimdLevel::Avx2 => {
            let blocks = match t {
                2 | 4 | 8 | 16 => n / 32,
                _ => generic_blocks(t, n, 32, dst.len()),
            };
            // SAFETY: AVX2 is available; the kernels read columns `col .. col + blocks * 32`
            // of rows that `rows_fit` checked lie in `src`. The power-of-two kernels write
            // `blocks * 32 * t <= dst.len()` bytes of `dst`; the generic one at most 15 bytes
            // more, which `generic_blocks` keeps inside `dst`.
            unsafe {
                match t {
                    2 => avx2::unshuffle::<2>(s, stride, col, d, blocks),
                    4 => avx2::unshuffle::<4>(s, stride, col, d, blocks),
                    8 => avx2::unshuffle::<8>(s, stride, col, d, blocks),
                    16 => avx2::unshuffle::<16>(s, stride, col, d, blocks),
                    _ => avx2::unshuffle_any(s, stride, col, d, t, blocks),
                }
            }
            blocks * 32
        }
        SimdLevel::Sse2 => {
            let blocks = match t {
                2 | 4 | 8 | 16 => n / 16,
                _ if t < 6 => return false,
                _ => generic_blocks(t, n, 16, dst.len()),
            };
            // SAFETY: SSE2 is available; same bounds argument with 16 elements per block.
            unsafe {
                match t {
                    2 => sse2::unshuffle::<2>(s, stride, col, d, blocks),
                    4 => sse2::unshuffle::<4>(s, stride, col, d, blocks),
                    8 => sse2::unshuffle::<8>(s, stride, col, d, blocks),
                    16 => sse2::unshuffle::<16>(s, stride, col, d, blocks),
                    _ => sse2::unshuffle_any(s, stride, col, d, t, blocks),
                }
            }
            blocks * 16
        }
        SimdLevel::Scalar => return false,
    };
    unshuffle_rows(t, src, stride, &mut dst[done * t..n * t], col + done);
    true
}

/// SSE2 kernels (16 elements per block).
pub(super) mod sse2 {
    use super::*;

    /// One interleave round: pairs `(v[base + j], v[base + j + D])` unpacked at width `8 << S`
    /// bits.
    #[inline]
    #[target_feature(enable = "sse2")]
    fn round<const T: usize, const D: usize, const S: u8>(v: [__m128i; T]) -> [__m128i; T] {
        let mut w = v;
        for base in (0..T).step_by(2 * D) {
            for j in 0..D {
                let (a, b) = (v[base + j], v[base + j + D]);
                let (lo, hi) = match S {
                    0 => (_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b)),
                    1 => (_mm_unpacklo_epi16(a, b), _mm_unpackhi_epi16(a, b)),
                    2 => (_mm_unpacklo_epi32(a, b), _mm_unpackhi_epi32(a, b)),
                    _ => (_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b)),
                };
                w[base + 2 * j] = lo;
                w[base + 2 * j + 1] = hi;
            }
        }
        w
    }

    /// Interleaves `T` row vectors into `T` vectors of whole elements (`T` in 2, 4, 8, 16).
    #[inline]
    #[target_feature(enable = "sse2")]
    pub(in super::super) fn interleave<const T: usize>(v: [__m128i; T]) -> [__m128i; T] {
        let v = round::<T, 1, 0>(v);
        let v = if T > 2 { round::<T, 2, 1>(v) } else { v };
        let v = if T > 4 { round::<T, 4, 2>(v) } else { v };
        if T > 8 { round::<T, 8, 3>(v) } else { v }
    }

    /// Splits `T` vectors of whole elements (16 elements in all) into `T` row vectors.
    #[inline]
    #[target_feature(enable = "sse2")]
    fn deinterleave<const T: usize>(v: [__m128i; T]) -> [__m128i; T] {
        let mask = _mm_set1_epi16(0x00ff);
        let round = |l: [__m128i; T]| {
            let mut w = l;
            for i in 0..T / 2 {
                let (a, b) = (l[2 * i], l[2 * i + 1]);
                w[i] = _mm_packus_epi16(_mm_and_si128(a, mask), _mm_and_si128(b, mask));
                w[T / 2 + i] = _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8));
            }
            w
        };
        let v = round(v);
        let v = if T > 2 { round(v) } else { v };
        let v = if T > 4 { round(v) } else { v };
        if T > 8 { round(v) } else { v }
    }

    /// Unshuffles `blocks` blocks of 16 elements.
    ///
    /// # Safety
    /// SSE2 must be available; `src + j*stride + col + [0, 16*blocks)` must be readable for
    /// every row `j < T`, and `dst + [0, 16*T*blocks)` writable.
    #[target_feature(enable = "sse2")]
    pub(in super::super) unsafe fn unshuffle<const T: usize>(
        src: *const u8,
        stride: usize,
        col: usize,
        dst: *mut u8,
        blocks: usize,
    ) {
        for i in 0..blocks {
            let mut v: [__m128i; T] = [_mm_setzero_si128(); T];
            for (j, x) in v.iter_mut().enumerate() {
                // SAFETY: row j, columns col + 16i .. col + 16i + 16: in bounds by the contract.
                *x = unsafe { _mm_loadu_si128(src.add(j * stride + col + 16 * i).cast()) };
            }
            let out = interleave::<T>(v);
            for (j, o) in out.iter().enumerate() {
                // SAFETY: bytes 16*T*i + 16*j .. + 16 < 16*T*blocks: in bounds by the contract.
                unsafe { _mm_storeu_si128(dst.add(16 * T * i + 16 * j).cast(), *o) };
            }
        }
    }

    /// Shuffles `blocks` blocks of 16 elements.
    ///
    /// # Safety
    /// SSE2 must be available; `src + [0, 16*T*blocks)` readable and
    /// `dst + j*stride + col + [0, 16*blocks)` writable for every row `j < T`.
    #[target_feature(enable = "sse2")]
    pub(in super::super) unsafe fn shuffle<const T: usize>(
        src: *const u8,
        dst: *mut u8,
        stride: usize,
        col: usize,
        blocks: usize,
    ) {
        for i in 0..blocks {
            let mut v: [__m128i; T] = [_mm_setzero_si128(); T];
            for (j, x) in v.iter_mut().enumerate() {
                // SAFETY: bytes 16*T*i + 16*j .. + 16 of src: in bounds by the contract.
                *x = unsafe { _mm_loadu_si128(src.add(16 * T * i + 16 * j).cast()) };
            }
            let rows = deinterleave::<T>(v);
            for (j, r) in rows.iter().enumerate() {
                // SAFETY: row j, columns col + 16i .. + 16: in bounds by the contract.
                unsafe { _mm_storeu_si128(dst.add(j * stride + col + 16 * i).cast(), *r) };
            }
        }
    }

    /// Unshuffles `blocks` blocks of 16 elements of any typesize `t`: for each group of 16
    /// byte rows (last, partial group first, missing rows as zeros), a 16x16 byte transpose
    /// gives 16 bytes per element, stored at the element's offset. The bytes a partial group
    /// stores past an element's end belong to the next element's first group, which is
    /// stored afterwards.
    ///
    /// # Safety
    /// SSE2 must be available; `src + j*stride + col + [0, 16*blocks)` readable for every row
    /// `j < t`; `dst + [0, 16*t*blocks + 15)` writable.
    #[target_feature(enable = "sse2")]
    pub(in super::super) unsafe fn unshuffle_any(
        src: *const u8,
        stride: usize,
        col: usize,
        dst: *mut u8,
        t: usize,
        blocks: usize,
    ) {
        let groups = t.div_ceil(16);
        for i in 0..blocks {
            for g in (0..groups).rev() {
                let j0 = 16 * g;
                let rows = (t - j0).min(16);
                let mut v = [_mm_setzero_si128(); 16];
                for (r, x) in v.iter_mut().enumerate().take(rows) {
                    // SAFETY: row j0 + r < t, columns col + 16i .. + 16: in bounds by the
                    // contract.
                    *x = unsafe {
                        _mm_loadu_si128(src.add((j0 + r) * stride + col + 16 * i).cast())
                    };
                }
                let out = interleave::<16>(v);
                for (k, o) in out.iter().enumerate() {
                    // SAFETY: ends at (16i + k)*t + j0 + 16 <= 16*t*(i+1) + 15 (j0 + 16 <= t + 15,
                    // k <= 15): in bounds by the contract.
                    unsafe { _mm_storeu_si128(dst.add((16 * i + k) * t + j0).cast(), *o) };
                }
            }
        }
    }

    /// Shuffles `blocks` blocks of 16 elements of any typesize `t` with 16x16 byte transposes
    /// (16 bytes loaded per element and byte group; only the `t` real rows are stored).
    ///
    /// # Safety
    /// SSE2 must be available; `src + [0, 16*t*blocks + 15)` readable and
    /// `dst + j*stride + col + [0, 16*blocks)` writable for every row `j < t`.
    #[target_feature(enable = "sse2")]
    pub(in super::super) unsafe fn shuffle_any(
        src: *const u8,
        dst: *mut u8,
        stride: usize,
        col: usize,
        t: usize,
        blocks: usize,
    ) {
        let groups = t.div_ceil(16);
        for i in 0..blocks {
            for g in 0..groups {
                let j0 = 16 * g;
                let rows = (t - j0).min(16);
                let mut v = [_mm_setzero_si128(); 16];
                for (k, x) in v.iter_mut().enumerate() {
                    // SAFETY: ends at (16i + k)*t + j0 + 16 <= 16*t*(i+1) + 15: in bounds by
                    // the contract.
                    *x = unsafe { _mm_loadu_si128(src.add((16 * i + k) * t + j0).cast()) };
                }
                let out = interleave::<16>(v);
                for (r, o) in out.iter().enumerate().take(rows) {
                    // SAFETY: row j0 + r < t, columns col + 16i .. + 16: in bounds by the
                    // contract.
                    unsafe {
                        _mm_storeu_si128(dst.add((j0 + r) * stride + col + 16 * i).cast(), *o)
                    };
                }
            }
        }
    }
}

/// AVX2 kernels (32 elements per block).
pub(super) mod avx2 {
    use super::*;

    /// One interleave round: pairs `(v[base + j], v[base + j + D])` unpacked at width `8 << S`
    /// bits.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn round<const T: usize, const D: usize, const S: u8>(v: [__m256i; T]) -> [__m256i; T] {
        let mut w = v;
        for base in (0..T).step_by(2 * D) {
            for j in 0..D {
                let (a, b) = (v[base + j], v[base + j + D]);
                let (lo, hi) = match S {
                    0 => (_mm256_unpacklo_epi8(a, b), _mm256_unpackhi_epi8(a, b)),
                    1 => (_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b)),
                    2 => (_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b)),
                    _ => (_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b)),
                };
                w[base + 2 * j] = lo;
                w[base + 2 * j + 1] = hi;
            }
        }
        w
    }

    /// In-lane interleave of `T` row vectors: lane 0 of the outputs holds what the SSE2
    /// interleave gives for elements 0..16, lane 1 for elements 16..32 (`T` in 2, 4, 8, 16).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(in super::super) fn interleave<const T: usize>(v: [__m256i; T]) -> [__m256i; T] {
        let v = round::<T, 1, 0>(v);
        let v = if T > 2 { round::<T, 2, 1>(v) } else { v };
        let v = if T > 4 { round::<T, 4, 2>(v) } else { v };
        if T > 8 { round::<T, 8, 3>(v) } else { v }
    }

    /// Stores the output of [`interleave`] as `32*T` contiguous bytes.
    ///
    /// # Safety
    /// AVX2 must be available and `dst + [0, 32*T)` writable.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(in super::super) unsafe fn store_interleaved<const T: usize>(
        out: &[__m256i; T],
        dst: *mut u8,
    ) {
        for j in 0..T / 2 {
            let lo = _mm256_permute2x128_si256::<0x20>(out[2 * j], out[2 * j + 1]);
            let hi = _mm256_permute2x128_si256::<0x31>(out[2 * j], out[2 * j + 1]);
            // SAFETY: 32*j + 32 <= 16*T and 16*T + 32*j + 32 <= 32*T: in bounds by the contract.
            unsafe {
                _mm256_storeu_si256(dst.add(32 * j).cast(), lo);
                _mm256_storeu_si256(dst.add(16 * T + 32 * j).cast(), hi);
            }
        }
    }

    /// Splits `T` vectors of whole elements (32 elements in all) into `T` row vectors.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn deinterleave<const T: usize>(v: [__m256i; T]) -> [__m256i; T] {
        let mask = _mm256_set1_epi16(0x00ff);
        let round = |l: [__m256i; T]| {
            let mut w = l;
            for i in 0..T / 2 {
                let (a, b) = (l[2 * i], l[2 * i + 1]);
                let even =
                    _mm256_packus_epi16(_mm256_and_si256(a, mask), _mm256_and_si256(b, mask));
                let odd = _mm256_packus_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
                w[i] = _mm256_permute4x64_epi64::<0xD8>(even);
                w[T / 2 + i] = _mm256_permute4x64_epi64::<0xD8>(odd);
            }
            w
        };
        let v = round(v);
        let v = if T > 2 { round(v) } else { v };
        let v = if T > 4 { round(v) } else { v };
        if T > 8 { round(v) } else { v }
    }

    /// Unshuffles `blocks` blocks of 32 elements.
    ///
    /// # Safety
    /// AVX2 must be available; `src + j*stride + col + [0, 32*blocks)` must be readable for
    /// every row `j < T`, and `dst + [0, 32*T*blocks)` writable.
    #[target_feature(enable = "avx2")]
    pub(in super::super) unsafe fn unshuffle<const T: usize>(
        src: *const u8,
        stride: usize,
        col: usize,
        dst: *mut u8,
        blocks: usize,
    ) {
        for i in 0..blocks {
            let mut v: [__m256i; T] = [_mm256_setzero_si256(); T];
            for (j, x) in v.iter_mut().enumerate() {
                // SAFETY: row j, columns col + 32i .. + 32: in bounds by the contract.
                *x = unsafe { _mm256_loadu_si256(src.add(j * stride + col + 32 * i).cast()) };
            }
            let out = interleave::<T>(v);
            // SAFETY: bytes 32*T*i .. 32*T*(i+1) of dst: in bounds by the contract.
            unsafe { store_interleaved::<T>(&out, dst.add(32 * T * i)) };
        }
    }

    /// Shuffles `blocks` blocks of 32 elements.
    ///
    /// # Safety
    /// AVX2 must be available; `src + [0, 32*T*blocks)` readable and
    /// `dst + j*stride + col + [0, 32*blocks)` writable for every row `j < T`.
    #[target_feature(enable = "avx2")]
    pub(in super::super) unsafe fn shuffle<const T: usize>(
        src: *const u8,
        dst: *mut u8,
        stride: usize,
        col: usize,
        blocks: usize,
    ) {
        for i in 0..blocks {
            let mut v: [__m256i; T] = [_mm256_setzero_si256(); T];
            for (j, x) in v.iter_mut().enumerate() {
                // SAFETY: bytes 32*T*i + 32*j .. + 32 of src: in bounds by the contract.
                *x = unsafe { _mm256_loadu_si256(src.add(32 * T * i + 32 * j).cast()) };
            }
            let rows = deinterleave::<T>(v);
            for (j, r) in rows.iter().enumerate() {
                // SAFETY: row j, columns col + 32i .. + 32: in bounds by the contract.
                unsafe { _mm256_storeu_si256(dst.add(j * stride + col + 32 * i).cast(), *r) };
            }
        }
    }

    /// AVX2 version of `sse2::unshuffle_any` (32 elements per block: lane 0 of each
    /// transposed vector is element `k`, lane 1 element `16 + k`).
    ///
    /// # Safety
    /// AVX2 must be available; `src + j*stride + col + [0, 32*blocks)` readable for every row
    /// `j < t`; `dst + [0, 32*t*blocks + 15)` writable.
    #[target_feature(enable = "avx2")]
    pub(in super::super) unsafe fn unshuffle_any(
        src: *const u8,
        stride: usize,
        col: usize,
        dst: *mut u8,
        t: usize,
        blocks: usize,
    ) {
        let groups = t.div_ceil(16);
        for i in 0..blocks {
            for g in (0..groups).rev() {
                let j0 = 16 * g;
                let rows = (t - j0).min(16);
                let mut v = [_mm256_setzero_si256(); 16];
                for (r, x) in v.iter_mut().enumerate().take(rows) {
                    // SAFETY: row j0 + r < t, columns col + 32i .. + 32: in bounds by the
                    // contract.
                    *x = unsafe {
                        _mm256_loadu_si256(src.add((j0 + r) * stride + col + 32 * i).cast())
                    };
                }
                let out = interleave::<16>(v);
                for (k, o) in out.iter().enumerate() {
                    // SAFETY: element 32i + k and 32i + 16 + k, bytes j0 .. j0 + 16: the
                    // furthest ends at (32i + 31)*t + j0 + 16 <= 32*t*(i+1) + 15, in bounds by
                    // the contract.
                    unsafe {
                        _mm_storeu_si128(
                            dst.add((32 * i + k) * t + j0).cast(),
                            _mm256_castsi256_si128(*o),
                        );
                    }
                }
                for (k, o) in out.iter().enumerate() {
                    // SAFETY: as above.
                    unsafe {
                        _mm_storeu_si128(
                            dst.add((32 * i + 16 + k) * t + j0).cast(),
                            _mm256_extracti128_si256::<1>(*o),
                        );
                    }
                }
            }
        }
    }

    /// AVX2 version of `sse2::shuffle_any` (32 elements per block).
    ///
    /// # Safety
    /// AVX2 must be available; `src + [0, 32*t*blocks + 15)` readable and
    /// `dst + j*stride + col + [0, 32*blocks)` writable for every row `j < t`.
    #[target_feature(enable = "avx2")]
    pub(in super::super) unsafe fn shuffle_any(
        src: *const u8,
        dst: *mut u8,
        stride: usize,
        col: usize,
        t: usize,
        blocks: usize,
    ) {
        let groups = t.div_ceil(16);
        for i in 0..blocks {
            for g in 0..groups {
                let j0 = 16 * g;
                let rows = (t - j0).min(16);
                let mut v = [_mm256_setzero_si256(); 16];
                for (k, x) in v.iter_mut().enumerate() {
                    // SAFETY: elements 32i + k and 32i + 16 + k, bytes j0 .. j0 + 16; the
                    // furthest ends at (32i + 31)*t + j0 + 16 <= 32*t*(i+1) + 15: in bounds by
                    // the contract.
                    let (lo, hi) = unsafe {
                        (
                            _mm_loadu_si128(src.add((32 * i + k) * t + j0).cast()),
                            _mm_loadu_si128(src.add((32 * i + 16 + k) * t + j0).cast()),
                        )
                    };
                    *x = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), hi);
                }
                let out = interleave::<16>(v);
                for (r, o) in out.iter().enumerate().take(rows) {
                    // SAFETY: row j0 + r < t, columns col + 32i .. + 32: in bounds by the
                    // contract.
                    unsafe {
                        _mm256_storeu_si256(dst.add((j0 + r) * stride + col + 32 * i).cast(), *o)
                    };
                }
            }
        }
    }
}
