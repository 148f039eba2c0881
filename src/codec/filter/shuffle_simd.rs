//! SSE2/AVX2 byte shuffle and unshuffle kernels, the unsafe twin of `shuffle.rs`.

#![allow(unsafe_code)]

use super::SimdLevel;

/// Shuffles with SIMD at `level` if the CPU has it and the typesize has a kernel; returns
/// whether it did (otherwise the caller runs the scalar twin).
pub(super) fn shuffle(level: SimdLevel, t: usize, src: &[u8], dst: &mut [u8]) -> bool {
    let _ = (level, t, src, dst);
    false
}

/// Unshuffles with SIMD; see [`shuffle`].
pub(super) fn unshuffle(level: SimdLevel, t: usize, src: &[u8], dst: &mut [u8]) -> bool {
    let _ = (level, t, src, dst);
    false
}
