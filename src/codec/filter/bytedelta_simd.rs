//! SSE2/AVX2 bytedelta decode (running byte sum), the unsafe twin of `bytedelta.rs`.

#![allow(unsafe_code)]

use super::SimdLevel;

/// Replaces `buf` by its wrapping running byte sum (starting at 0) with SIMD at `level` if the
/// CPU has it; returns whether it did.
pub(super) fn prefix_sum(level: SimdLevel, buf: &mut [u8]) -> bool {
    let _ = (level, buf);
    false
}
