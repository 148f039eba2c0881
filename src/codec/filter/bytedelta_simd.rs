//! SSE2/AVX2 bytedelta decode (running byte sum), the unsafe twin of `bytedelta.rs`.
//!
//! Each 16-byte vector gets its in-register prefix sum with four shift-and-add steps
//! (`slli_si128` by 1, 2, 4, 8 bytes); AVX2 does the same inside each 128-bit lane and then adds
//! lane 0's total to lane 1. The running value from earlier vectors is a broadcast vector, so
//! the only loop-carried dependency is one `add_epi8` per vector. Bytes after the last whole
//! vector use the scalar loop, continuing from the carried value.

#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m128i, _mm_add_epi8, _mm_cvtsi128_si32, _mm_loadu_si128, _mm_setzero_si128,
    _mm_shuffle_epi32, _mm_slli_si128, _mm_storeu_si128, _mm_unpackhi_epi8, _mm_unpackhi_epi16,
    _mm256_add_epi8, _mm256_castsi256_si128, _mm256_loadu_si256, _mm256_permute2x128_si256,
    _mm256_set1_epi8, _mm256_setzero_si256, _mm256_shuffle_epi8, _mm256_slli_si256,
    _mm256_storeu_si256,
};

use super::SimdLevel;
use super::bytedelta::scalar;
use super::shuffle_simd::usable;

/// Replaces `buf` by its wrapping running byte sum (starting at 0) with SIMD at `level` if the
/// CPU has it; returns whether it did.
pub(super) fn prefix_sum(level: SimdLevel, buf: &mut [u8]) -> bool {
    let (done, carry) = match usable(level) {
        SimdLevel::Avx2 => {
            let chunks = buf.len() / 32;
            // SAFETY: AVX2 is available (checked by `usable`); the kernel reads and writes
            // `32 * chunks <= buf.len()` bytes of `buf`.
            let carry = unsafe { avx2_prefix(buf.as_mut_ptr(), chunks) };
            (chunks * 32, carry)
        }
        SimdLevel::Sse2 => {
            let chunks = buf.len() / 16;
            // SAFETY: SSE2 is available; reads and writes `16 * chunks <= buf.len()` bytes.
            let carry = unsafe { sse2_prefix(buf.as_mut_ptr(), chunks) };
            (chunks * 16, carry)
        }
        SimdLevel::Scalar => return false,
    };
    scalar::prefix_sum(&mut buf[done..], carry);
    true
}

/// Broadcasts byte 15 of `x` to all 16 bytes.
#[inline]
#[target_feature(enable = "sse2")]
fn broadcast_last(x: __m128i) -> __m128i {
    let v = _mm_unpackhi_epi8(x, x);
    let v = _mm_unpackhi_epi16(v, v);
    _mm_shuffle_epi32::<0xFF>(v)
}

/// # Safety
/// SSE2 available; `buf + [0, 16*chunks)` readable and writable. Returns the last sum.
#[target_feature(enable = "sse2")]
unsafe fn sse2_prefix(buf: *mut u8, chunks: usize) -> u8 {
    let mut carry = _mm_setzero_si128();
    for i in 0..chunks {
        // SAFETY: bytes 16i .. 16i + 16, in bounds by the contract.
        let p = unsafe { buf.add(16 * i) };
        // SAFETY: as above.
        let mut x = unsafe { _mm_loadu_si128(p.cast()) };
        x = _mm_add_epi8(x, _mm_slli_si128::<1>(x));
        x = _mm_add_epi8(x, _mm_slli_si128::<2>(x));
        x = _mm_add_epi8(x, _mm_slli_si128::<4>(x));
        x = _mm_add_epi8(x, _mm_slli_si128::<8>(x));
        let total = broadcast_last(x);
        // SAFETY: as above.
        unsafe { _mm_storeu_si128(p.cast(), _mm_add_epi8(x, carry)) };
        carry = _mm_add_epi8(carry, total);
    }
    _mm_cvtsi128_si32(carry) as u8
}

/// # Safety
/// AVX2 available; `buf + [0, 32*chunks)` readable and writable. Returns the last sum.
#[target_feature(enable = "avx2")]
unsafe fn avx2_prefix(buf: *mut u8, chunks: usize) -> u8 {
    let mut carry = _mm256_setzero_si256();
    let last = _mm256_set1_epi8(15);
    for i in 0..chunks {
        // SAFETY: bytes 32i .. 32i + 32, in bounds by the contract.
        let p = unsafe { buf.add(32 * i) };
        // SAFETY: as above.
        let mut x = unsafe { _mm256_loadu_si256(p.cast()) };
        x = _mm256_add_epi8(x, _mm256_slli_si256::<1>(x));
        x = _mm256_add_epi8(x, _mm256_slli_si256::<2>(x));
        x = _mm256_add_epi8(x, _mm256_slli_si256::<4>(x));
        x = _mm256_add_epi8(x, _mm256_slli_si256::<8>(x));
        // Per-lane totals, broadcast inside each lane.
        let b = _mm256_shuffle_epi8(x, last);
        // Lane 1 also gets lane 0's total.
        x = _mm256_add_epi8(x, _mm256_permute2x128_si256::<0x08>(b, b));
        let total = _mm256_add_epi8(b, _mm256_permute2x128_si256::<0x01>(b, b));
        // SAFETY: as above.
        unsafe { _mm256_storeu_si256(p.cast(), _mm256_add_epi8(x, carry)) };
        carry = _mm256_add_epi8(carry, total);
    }
    _mm_cvtsi128_si32(_mm256_castsi256_si128(carry)) as u8
}
