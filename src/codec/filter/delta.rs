//! XOR delta against block 0 (section 3.4).
//!
//! Words of `u` bytes ([`unit()`]): block 0 is a running XOR of consecutive words, every other
//! block is XOR-ed with a reference (encode: the start of the original chunk input; decode: the
//! fully decoded block 0). XOR is byte-wise, so words are handled as bytes `u` apart. The last
//! `len % u` bytes of a block are copied unchanged both ways (C leaves them uninitialised on
//! encode and passes them through on decode).

#![forbid(unsafe_code)]

use super::check_len;
use crate::codec::CodecError;

/// The delta word size for a typesize: the typesize if it is 1, 2, 4 or 8; otherwise 8 when
/// the typesize is a multiple of 8, else 1 (also for the invalid typesize 0).
pub fn unit(typesize: usize) -> usize {
    match typesize {
        1 | 2 | 4 | 8 => typesize,
        t if t > 0 && t % 8 == 0 => 8,
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
            running_xor_into(u, &src[..body], &mut dst[..body]);
            dst[body..].copy_from_slice(&src[body..]);
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

/// Shift amounts (bits) and unit broadcast multiplier of the word-wise running XOR.
fn unit_params(u: usize) -> (&'static [u32], u64, u32) {
    let (shifts, spread): (&[u32], u64) = match u {
        1 => (&[8, 16, 32], 0x0101_0101_0101_0101),
        2 => (&[16, 32], 0x0001_0001_0001_0001),
        4 => (&[32], 0x0000_0001_0000_0001),
        _ => (&[], 1),
    };
    (shifts, spread, 64 - 8 * u as u32)
}

/// One 8-byte step of the running XOR: prefix XOR of the units of `x` (little-endian word),
/// XOR-ed with `carry` (the previous unit broadcast); returns the output word and the new carry.
#[inline(always)]
fn step(x: u64, carry: u64, shifts: &[u32], spread: u64, top: u32) -> (u64, u64) {
    let mut x = x;
    for &s in shifts {
        x ^= x << s;
    }
    (x ^ carry, carry ^ ((x >> top) * spread))
}

/// Finishes a running XOR on the last `< 8` bytes (starting at a unit boundary), given the
/// carry of the word before them.
fn finish(u: usize, carry: u64, top: u32, rest: &mut [u8]) {
    let prev = (carry >> top).to_le_bytes();
    let mut unit = [0u8; 8];
    unit[..u].copy_from_slice(&prev[..u]);
    for (i, b) in rest.iter_mut().enumerate() {
        *b ^= unit[i % u];
        unit[i % u] = *b;
    }
}

fn word(b: &[u8]) -> u64 {
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// `x[i] ^= x[i - u]` for ascending `i` (the inverse of block 0's encoding), 8 bytes at a
/// time: a prefix XOR of the units inside a little-endian `u64` (shift-XOR steps of `u`, `2u`,
/// ... bytes), then XOR with the previous word's last unit broadcast to every unit.
fn running_xor(u: usize, buf: &mut [u8]) {
    let (shifts, spread, top) = unit_params(u);
    let mut carry = 0u64;
    let mut words = buf.chunks_exact_mut(8);
    for w in &mut words {
        let (y, c) = step(word(w), carry, shifts, spread, top);
        w.copy_from_slice(&y.to_le_bytes());
        carry = c;
    }
    finish(u, carry, top, words.into_remainder());
}

/// [`running_xor`] from `src` into `dst` (same length).
fn running_xor_into(u: usize, src: &[u8], dst: &mut [u8]) {
    let (shifts, spread, top) = unit_params(u);
    let mut carry = 0u64;
    let mut words = dst.chunks_exact_mut(8);
    for (w, s) in (&mut words).zip(src.chunks_exact(8)) {
        let (y, c) = step(word(s), carry, shifts, spread, top);
        w.copy_from_slice(&y.to_le_bytes());
        carry = c;
    }
    let rest = words.into_remainder();
    let n = rest.len();
    rest.copy_from_slice(&src[src.len() - n..]);
    finish(u, carry, top, rest);
}

fn xor_into(a: &[u8], b: &[u8], out: &mut [u8]) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = x ^ y;
    }
}
