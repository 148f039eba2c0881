//! XOR delta against block 0 (section 3.4).
//!
//! Words of `u` bytes ([`unit`]): block 0 is a running XOR of consecutive words, every other
//! block is XOR-ed with a reference (encode: the start of the original chunk input; decode: the
//! fully decoded block 0). XOR is byte-wise, so words are handled as bytes `u` apart. The last
//! `len % u` bytes of a block are copied unchanged both ways (C leaves them uninitialised on
//! encode and passes them through on decode).

#![forbid(unsafe_code)]

use super::check_len;
use crate::codec::CodecError;

/// The delta word size for a typesize: the typesize if it is 1, 2, 4 or 8; otherwise 8 when
/// the typesize is a multiple of 8, else 1.
pub fn unit(typesize: usize) -> usize {
    match typesize {
        1 | 2 | 4 | 8 => typesize,
        t if t % 8 == 0 => 8,
        _ => 1,
    }
}

fn reference_too_short(needed: usize, got: usize) -> CodecError {
    CodecError::InvalidParams(format!(
        "delta reference has {got} bytes, the block needs {needed}"
    ))
}

/// Encodes one block. `reference` is `None` for block 0 (running XOR), otherwise the first
/// bytes of the original chunk input (at least the block's whole words).
pub fn encode(
    typesize: usize,
    src: &[u8],
    dst: &mut [u8],
    reference: Option<&[u8]>,
) -> Result<(), CodecError> {
    check_len(src.len(), dst.len())?;
    let u = unit(typesize);
    let body = src.len() - src.len() % u;
    match reference {
        None => {
            let head = u.min(body);
            dst[..head].copy_from_slice(&src[..head]);
            for ((d, &a), &b) in dst[head..body]
                .iter_mut()
                .zip(&src[head..body])
                .zip(&src[..body - head])
            {
                *d = a ^ b;
            }
        }
        Some(r) => {
            let r = r.get(..body).ok_or(reference_too_short(body, r.len()))?;
            xor_into(&src[..body], r, &mut dst[..body]);
        }
    }
    dst[body..].copy_from_slice(&src[body..]);
    Ok(())
}

/// Decodes one block from `src` into `dst`. `block0` is `None` for block 0, otherwise the
/// fully decoded block 0 (at least this block's whole words).
pub fn decode(
    typesize: usize,
    src: &[u8],
    dst: &mut [u8],
    block0: Option<&[u8]>,
) -> Result<(), CodecError> {
    check_len(src.len(), dst.len())?;
    let u = unit(typesize);
    let body = src.len() - src.len() % u;
    match block0 {
        None => {
            dst.copy_from_slice(src);
            running_xor(u, &mut dst[..body]);
        }
        Some(r) => {
            let r = r.get(..body).ok_or(reference_too_short(body, r.len()))?;
            xor_into(&src[..body], r, &mut dst[..body]);
            dst[body..].copy_from_slice(&src[body..]);
        }
    }
    Ok(())
}

/// [`decode`] in place.
pub fn decode_in_place(
    typesize: usize,
    buf: &mut [u8],
    block0: Option<&[u8]>,
) -> Result<(), CodecError> {
    let u = unit(typesize);
    let body = buf.len() - buf.len() % u;
    match block0 {
        None => running_xor(u, &mut buf[..body]),
        Some(r) => {
            let r = r.get(..body).ok_or(reference_too_short(body, r.len()))?;
            for (d, &b) in buf[..body].iter_mut().zip(r) {
                *d ^= b;
            }
        }
    }
    Ok(())
}

/// `x[i] ^= x[i - u]` for ascending `i` (the inverse of block 0's encoding).
fn running_xor(u: usize, buf: &mut [u8]) {
    match u {
        8 => running_xor_words::<8>(buf),
        4 => running_xor_words::<4>(buf),
        2 => running_xor_words::<2>(buf),
        _ => {
            let mut acc = 0u8;
            for b in buf.iter_mut() {
                acc ^= *b;
                *b = acc;
            }
        }
    }
}

fn running_xor_words<const U: usize>(buf: &mut [u8]) {
    let mut acc = [0u8; U];
    for w in buf.chunks_exact_mut(U) {
        for (a, b) in acc.iter_mut().zip(w.iter_mut()) {
            *a ^= *b;
            *b = *a;
        }
    }
}

fn xor_into(a: &[u8], b: &[u8], out: &mut [u8]) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = x ^ y;
    }
}
