//! Precision truncation (section 3.5): TRUNC_PREC, encode only (lossy, nothing to undo).
//!
//! `p = filters_meta as i8`; float32 (typesize 4, 23 mantissa bits) or float64 (typesize 8,
//! 52 bits). `z = M - p` bits are cleared when `p >= 0`, `-p` bits when `p < 0`. The trailing
//! partial element, if any, is copied unchanged (C leaves it uninitialised).

#![forbid(unsafe_code)]

use super::check_len;
use crate::codec::CodecError;

/// The number of low bits TRUNC_PREC clears for this typesize and meta byte, or an error for a
/// typesize other than 4 or 8, `|p| > M` or a result `>= M`.
pub fn zeroed_bits(typesize: usize, meta: u8) -> Result<u32, CodecError> {
    let mantissa: i32 = match typesize {
        4 => 23,
        8 => 52,
        _ => {
            return Err(CodecError::InvalidParams(format!(
                "trunc_prec needs typesize 4 or 8, not {typesize}"
            )));
        }
    };
    let p = i32::from(meta as i8);
    let z = if p >= 0 { mantissa - p } else { -p };
    if p.abs() > mantissa || z >= mantissa || z < 0 {
        return Err(CodecError::InvalidParams(format!(
            "trunc_prec precision {p} out of range for typesize {typesize}"
        )));
    }
    Ok(z as u32)
}

/// Truncates the precision of every whole element of `src` into `dst` (same length).
pub fn trunc_prec(typesize: usize, meta: u8, src: &[u8], dst: &mut [u8]) -> Result<(), CodecError> {
    check_len(src.len(), dst.len())?;
    let z = zeroed_bits(typesize, meta)?;
    let body = src.len() - src.len() % typesize;
    if typesize == 4 {
        let mask = !0u32 << z;
        for (d, s) in dst[..body].chunks_exact_mut(4).zip(src.chunks_exact(4)) {
            let v = u32::from_le_bytes([s[0], s[1], s[2], s[3]]) & mask;
            d.copy_from_slice(&v.to_le_bytes());
        }
    } else {
        let mask = !0u64 << z;
        for (d, s) in dst[..body].chunks_exact_mut(8).zip(src.chunks_exact(8)) {
            let mut w = [0u8; 8];
            w.copy_from_slice(s);
            d.copy_from_slice(&(u64::from_le_bytes(w) & mask).to_le_bytes());
        }
    }
    dst[body..].copy_from_slice(&src[body..]);
    Ok(())
}
