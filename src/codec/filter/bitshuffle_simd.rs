//! SSE2/AVX2 bit shuffle and unshuffle kernels, the unsafe twin of `bitshuffle.rs`.

#![allow(unsafe_code)]

use super::SimdLevel;

/// Runs the core bit transpose with SIMD at `level` if possible; returns whether it did.
pub(super) fn bitshuffle(level: SimdLevel, t: usize, src: &[u8], dst: &mut [u8]) -> bool {
    let _ = (level, t, src, dst);
    false
}

/// Runs the inverse core bit transpose with SIMD; see [`bitshuffle`].
pub(super) fn bitunshuffle(level: SimdLevel, t: usize, src: &[u8], dst: &mut [u8]) -> bool {
    let _ = (level, t, src, dst);
    false
}
