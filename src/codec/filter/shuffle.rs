//! Byte shuffle and unshuffle (section 3.2), SIMD where the CPU has it, scalar otherwise.
