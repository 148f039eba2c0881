//! SSE2/AVX2 bit shuffle and unshuffle kernels, the unsafe twin of `bitshuffle.rs`.
//!
//! The tiling (byte rows of a cache-sized tile of elements) is done by the safe driver in
//! `bitshuffle.rs`; these kernels bit-transpose one byte row:
//!
//! - bit shuffle: take 16/32 bytes at a time and peel bit planes 7..0 off with
//!   `movemask_epi8`, doubling the bytes (`add_epi8(x, x)`) between planes; each mask is 2/4
//!   bytes of one plane.
//! - bit unshuffle: for each row, load 16/32 bytes from each of its 8 planes, transpose the
//!   8x8 bit matrices across the 8 vectors (three rounds of masked shift/XOR swaps at distances
//!   1, 2, 4), interleave the 8 vectors bytewise (the unshuffle kernel for `t = 8`), which gives
//!   the row's bytes in order.
//!
//! Groups of 8 bytes left over at the end of a row are left to the scalar 8x8 transpose.

#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m128i, __m256i, _mm_add_epi8, _mm_and_si128, _mm_loadu_si128, _mm_movemask_epi8,
    _mm_set1_epi8, _mm_setzero_si128, _mm_slli_epi16, _mm_srli_epi16, _mm_xor_si128,
    _mm256_add_epi8, _mm256_and_si256, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_set1_epi8,
    _mm256_setzero_si256, _mm256_slli_epi16, _mm256_srli_epi16, _mm256_xor_si256,
};

use super::SimdLevel;
use super::shuffle_simd::{avx2, sse2, usable};

/// Bit-transposes the first whole vectors of byte row `row` (see `bitshuffle::bits_to_planes`)
/// into `dst`, where plane `b` starts at `b * planes` and the row's first group goes to byte
/// `kcol` of each plane. Returns how many 8-byte groups it did (0 if `level` is not available).
pub(super) fn bits_to_planes(
    level: SimdLevel,
    row: &[u8],
    dst: &mut [u8],
    planes: usize,
    kcol: usize,
) -> usize {
    let groups = row.len() / 8;
    if kcol.checked_add(groups).is_none_or(|end| end > planes)
        || 8usize.checked_mul(planes).is_none_or(|end| end > dst.len())
    {
        return 0;
    }
    match usable(level) {
        SimdLevel::Avx2 => {
            let chunks = row.len() / 32;
            // SAFETY: AVX2 is available (checked by `usable`); reads `32 * chunks <= row.len()`
            // bytes of `row`; writes bytes `kcol + b*planes + [0, 4*chunks)` for b < 8, which
            // end before `8 * planes <= dst.len()` since `kcol + 4*chunks <= kcol + groups <=
            // planes`.
            unsafe {
                avx2_bits_to_planes(row.as_ptr(), chunks, dst.as_mut_ptr().add(kcol), planes)
            };
            chunks * 4
        }
        SimdLevel::Sse2 => {
            let chunks = row.len() / 16;
            // SAFETY: SSE2 is available; same argument with 16-byte chunks and 2-byte writes.
            unsafe {
                sse2_bits_to_planes(row.as_ptr(), chunks, dst.as_mut_ptr().add(kcol), planes)
            };
            chunks * 2
        }
        SimdLevel::Scalar => 0,
    }
}

/// The inverse of [`bits_to_planes`]: rebuilds the first whole vectors of `row` from bytes
/// `kcol ..` of the 8 planes of `src` (plane `b` at `b * planes`). Returns how many 8-byte
/// groups it did.
pub(super) fn planes_to_bits(
    level: SimdLevel,
    src: &[u8],
    planes: usize,
    kcol: usize,
    row: &mut [u8],
) -> usize {
    let groups = row.len() / 8;
    if kcol.checked_add(groups).is_none_or(|end| end > planes)
        || 8usize.checked_mul(planes).is_none_or(|end| end > src.len())
    {
        return 0;
    }
    match usable(level) {
        SimdLevel::Avx2 => {
            let chunks = groups / 32;
            // SAFETY: AVX2 is available; reads bytes `kcol + b*planes + [0, 32*chunks)` for
            // b < 8, which end before `8 * planes <= src.len()` because
            // `kcol + 32*chunks <= kcol + groups <= planes`; writes `256 * chunks <= row.len()`
            // bytes of `row`.
            unsafe {
                avx2_planes_to_bits(src.as_ptr().add(kcol), planes, chunks, row.as_mut_ptr())
            };
            chunks * 32
        }
        SimdLevel::Sse2 => {
            let chunks = groups / 16;
            // SAFETY: SSE2 is available; same argument with 16 groups per chunk.
            unsafe {
                sse2_planes_to_bits(src.as_ptr().add(kcol), planes, chunks, row.as_mut_ptr())
            };
            chunks * 16
        }
        SimdLevel::Scalar => 0,
    }
}

/// # Safety
/// SSE2 available; `row + [0, 16*chunks)` readable; `dst + b*planes + [0, 2*chunks)` writable
/// for b < 8.
#[target_feature(enable = "sse2")]
unsafe fn sse2_bits_to_planes(row: *const u8, chunks: usize, dst: *mut u8, planes: usize) {
    for i in 0..chunks {
        // SAFETY: bytes 16i .. 16i + 16 of the row, in bounds by the contract.
        let mut x = unsafe { _mm_loadu_si128(row.add(16 * i).cast()) };
        for b in (0..8).rev() {
            let mask = (_mm_movemask_epi8(x) as u16).to_le_bytes();
            // SAFETY: plane b, bytes 2i .. 2i + 2, in bounds by the contract.
            unsafe { std::ptr::copy_nonoverlapping(mask.as_ptr(), dst.add(b * planes + 2 * i), 2) };
            x = _mm_add_epi8(x, x);
        }
    }
}

/// # Safety
/// AVX2 available; `row + [0, 32*chunks)` readable; `dst + b*planes + [0, 4*chunks)` writable
/// for b < 8.
#[target_feature(enable = "avx2")]
unsafe fn avx2_bits_to_planes(row: *const u8, chunks: usize, dst: *mut u8, planes: usize) {
    for i in 0..chunks {
        // SAFETY: bytes 32i .. 32i + 32 of the row, in bounds by the contract.
        let mut x = unsafe { _mm256_loadu_si256(row.add(32 * i).cast()) };
        for b in (0..8).rev() {
            let mask = (_mm256_movemask_epi8(x) as u32).to_le_bytes();
            // SAFETY: plane b, bytes 4i .. 4i + 4, in bounds by the contract.
            unsafe { std::ptr::copy_nonoverlapping(mask.as_ptr(), dst.add(b * planes + 4 * i), 4) };
            x = _mm256_add_epi8(x, x);
        }
    }
}

/// Transposes, for every byte position, the 8x8 bit matrix whose row `r` is byte of `x[r]`
/// (bit `c` = column `c`): afterwards bit `r` of byte of `x[c]` is the old bit `c` of `x[r]`.
#[inline]
#[target_feature(enable = "sse2")]
fn sse2_transpose_bits(x: &mut [__m128i; 8]) {
    let m1 = _mm_set1_epi8(0x55);
    let m2 = _mm_set1_epi8(0x33);
    let m4 = _mm_set1_epi8(0x0f);
    for (a, c) in [(0, 1), (2, 3), (4, 5), (6, 7)] {
        let t = _mm_and_si128(_mm_xor_si128(_mm_srli_epi16(x[a], 1), x[c]), m1);
        x[c] = _mm_xor_si128(x[c], t);
        x[a] = _mm_xor_si128(x[a], _mm_slli_epi16(t, 1));
    }
    for (a, c) in [(0, 2), (1, 3), (4, 6), (5, 7)] {
        let t = _mm_and_si128(_mm_xor_si128(_mm_srli_epi16(x[a], 2), x[c]), m2);
        x[c] = _mm_xor_si128(x[c], t);
        x[a] = _mm_xor_si128(x[a], _mm_slli_epi16(t, 2));
    }
    for (a, c) in [(0, 4), (1, 5), (2, 6), (3, 7)] {
        let t = _mm_and_si128(_mm_xor_si128(_mm_srli_epi16(x[a], 4), x[c]), m4);
        x[c] = _mm_xor_si128(x[c], t);
        x[a] = _mm_xor_si128(x[a], _mm_slli_epi16(t, 4));
    }
}

/// AVX2 version of [`sse2_transpose_bits`].
#[inline]
#[target_feature(enable = "avx2")]
fn avx2_transpose_bits(x: &mut [__m256i; 8]) {
    let m1 = _mm256_set1_epi8(0x55);
    let m2 = _mm256_set1_epi8(0x33);
    let m4 = _mm256_set1_epi8(0x0f);
    for (a, c) in [(0, 1), (2, 3), (4, 5), (6, 7)] {
        let t = _mm256_and_si256(_mm256_xor_si256(_mm256_srli_epi16(x[a], 1), x[c]), m1);
        x[c] = _mm256_xor_si256(x[c], t);
        x[a] = _mm256_xor_si256(x[a], _mm256_slli_epi16(t, 1));
    }
    for (a, c) in [(0, 2), (1, 3), (4, 6), (5, 7)] {
        let t = _mm256_and_si256(_mm256_xor_si256(_mm256_srli_epi16(x[a], 2), x[c]), m2);
        x[c] = _mm256_xor_si256(x[c], t);
        x[a] = _mm256_xor_si256(x[a], _mm256_slli_epi16(t, 2));
    }
    for (a, c) in [(0, 4), (1, 5), (2, 6), (3, 7)] {
        let t = _mm256_and_si256(_mm256_xor_si256(_mm256_srli_epi16(x[a], 4), x[c]), m4);
        x[c] = _mm256_xor_si256(x[c], t);
        x[a] = _mm256_xor_si256(x[a], _mm256_slli_epi16(t, 4));
    }
}

/// # Safety
/// SSE2 available; `src + b*planes + [0, 16*chunks)` readable for b < 8;
/// `row + [0, 128*chunks)` writable.
#[target_feature(enable = "sse2")]
unsafe fn sse2_planes_to_bits(src: *const u8, planes: usize, chunks: usize, row: *mut u8) {
    for i in 0..chunks {
        let mut x = [_mm_setzero_si128(); 8];
        for (b, v) in x.iter_mut().enumerate() {
            // SAFETY: plane b, bytes 16i .. 16i + 16, in bounds by the contract.
            *v = unsafe { _mm_loadu_si128(src.add(b * planes + 16 * i).cast()) };
        }
        sse2_transpose_bits(&mut x);
        let out = sse2::interleave::<8>(x);
        for (r, o) in out.iter().enumerate() {
            // SAFETY: row bytes 128i + 16r .. + 16 < 128*chunks, in bounds by the contract.
            unsafe { std::arch::x86_64::_mm_storeu_si128(row.add(128 * i + 16 * r).cast(), *o) };
        }
    }
}

/// # Safety
/// AVX2 available; `src + b*planes + [0, 32*chunks)` readable for b < 8;
/// `row + [0, 256*chunks)` writable.
#[target_feature(enable = "avx2")]
unsafe fn avx2_planes_to_bits(src: *const u8, planes: usize, chunks: usize, row: *mut u8) {
    for i in 0..chunks {
        let mut x = [_mm256_setzero_si256(); 8];
        for (b, v) in x.iter_mut().enumerate() {
            // SAFETY: plane b, bytes 32i .. 32i + 32, in bounds by the contract.
            *v = unsafe { _mm256_loadu_si256(src.add(b * planes + 32 * i).cast()) };
        }
        avx2_transpose_bits(&mut x);
        let out = avx2::interleave::<8>(x);
        // SAFETY: row bytes 256i .. 256i + 256, in bounds by the contract.
        unsafe { avx2::store_interleaved::<8>(&out, row.add(256 * i)) };
    }
}
