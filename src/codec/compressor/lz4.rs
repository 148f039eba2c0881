//! LZ4 block decoder (section 4.2): raw LZ4 blocks as `LZ4_compress_fast`/`LZ4_compress_HC`
//! write them, decoded to exactly the output's length, with an optional external dictionary
//! (the bytes that logically precede the output, as `LZ4_decompress_safe_usingDict` takes them).
//!
//! Safe Rust. The common short sequences (literal run < 15, match from 16+ bytes back) are
//! copied with fixed-size 16/32-byte moves while both buffers have that much slack; the bytes
//! written past a sequence's end are rewritten by the next ones. Near the ends of the buffers
//! every copy is exact and bounds-checked. A hostile block is an error, never a panic.

use std::fmt;

use super::copy_match;

/// Why an LZ4 block could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lz4Error {
    /// Offset in the compressed block of the sequence that failed.
    pub offset: usize,
    /// Output position reached when it failed.
    pub out_pos: usize,
    /// What went wrong.
    pub kind: Lz4ErrorKind,
}

/// The ways an LZ4 block can be corrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lz4ErrorKind {
    /// A sequence (token, length bytes, literals or offset) runs past the end of the block.
    Truncated,
    /// Literals or a match would write past the end of the output.
    OutputOverflow,
    /// A match offset of 0, or one reaching before the output (and dictionary) start.
    BadOffset,
    /// The block ended before the output was full.
    OutputShort,
}

impl fmt::Display for Lz4Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            Lz4ErrorKind::Truncated => "truncated sequence",
            Lz4ErrorKind::OutputOverflow => "output overflow",
            Lz4ErrorKind::BadOffset => "match offset 0 or before the start of the output",
            Lz4ErrorKind::OutputShort => "block ends before the output is full",
        };
        write!(
            f,
            "lz4: {what} at block offset {} (output {})",
            self.offset, self.out_pos
        )
    }
}

impl std::error::Error for Lz4Error {}

/// `PATTERN_INDEX[d][k] = k % d`: which byte of a `d`-byte period lands at position `k`.
const PATTERN_INDEX: [[u8; 8]; 8] = {
    let mut t = [[0u8; 8]; 8];
    let mut d = 1;
    while d < 8 {
        let mut k = 0;
        while k < 8 {
            t[d][k] = (k % d) as u8;
            k += 1;
        }
        d += 1;
    }
    t
};

/// `PATTERN_STEP[d]`: the largest multiple of `d` that is at most 8.
const PATTERN_STEP: [usize; 8] = [8, 8, 8, 6, 8, 5, 6, 7];

/// Reads an LZ4 length extension (bytes added until one is not 255) starting at `*ip`.
#[inline(always)]
fn read_ext(input: &[u8], ip: &mut usize) -> Option<usize> {
    let mut len = 0usize;
    loop {
        let b = *input.get(*ip)?;
        *ip += 1;
        len += usize::from(b);
        if b != 255 {
            return Some(len);
        }
    }
}

/// Decodes the LZ4 block `input` into `out`, which it must fill exactly. `dict` holds the bytes
/// that precede the output (empty for none); matches may reach into it.
pub fn decompress(input: &[u8], out: &mut [u8], dict: &[u8]) -> Result<(), Lz4Error> {
    let in_len = input.len();
    let out_len = out.len();
    let mut ip = 0usize;
    let mut op = 0usize;
    loop {
        // Fast path: a short sequence (literal run < 15, match < 19 bytes) far from both ends,
        // copied with fixed-size moves that may run past the sequence (later ones rewrite it).
        if ip + 32 <= in_len && op + 48 <= out_len {
            let inp: &[u8; 32] = input[ip..ip + 32].try_into().unwrap_or(&[0; 32]);
            let token = inp[0];
            let lit = usize::from(token >> 4);
            let ml = usize::from(token & 15);
            if lit < 15 && ml < 15 {
                let dist = usize::from(u16::from_le_bytes([inp[1 + lit], inp[2 + lit]]));
                let mop = op + lit;
                if dist >= 8 && dist <= mop {
                    // Literals: one 16-byte move. Match (≤ 18 bytes): 8 + 8 + 2-byte moves, each
                    // reading bytes already final because dist ≥ 8; no branch on the length.
                    out[op..op + 16].copy_from_slice(&inp[1..17]);
                    let src = mop - dist;
                    out.copy_within(src..src + 8, mop);
                    out.copy_within(src + 8..src + 16, mop + 8);
                    // 2 bytes, not 8: a load inside one earlier store forwards; a wider one
                    // spanning two fresh stores stalls.
                    out.copy_within(src + 16..src + 18, mop + 16);
                    ip += 3 + lit;
                    op = mop + ml + 4;
                    continue;
                }
                if dist != 0 && dist <= mop {
                    // 1 ≤ dist < 8: the match repeats a `dist`-byte pattern. Build 8 bytes of
                    // it (byte loads through a table, no division, no branch) and store them
                    // four times, `step` apart (the largest multiple of dist ≤ 8): ≥ 20 bytes.
                    out[op..op + 16].copy_from_slice(&inp[1..17]);
                    let src = mop - dist;
                    let idx = &PATTERN_INDEX[dist];
                    let w: [u8; 8] = std::array::from_fn(|k| out[src + usize::from(idx[k])]);
                    let step = PATTERN_STEP[dist];
                    for k in 0..4 {
                        out[mop + k * step..mop + k * step + 8].copy_from_slice(&w);
                    }
                    ip += 3 + lit;
                    op = mop + ml + 4;
                    continue;
                }
            }
        }

        let seq = ip;
        let err = |kind, op| Lz4Error {
            offset: seq,
            out_pos: op,
            kind,
        };
        let token = *input.get(ip).ok_or(err(Lz4ErrorKind::Truncated, op))?;
        ip += 1;

        // Literals.
        let mut lit = usize::from(token >> 4);
        if lit != 15 && ip + 16 <= in_len && op + 16 <= out_len {
            out[op..op + 16].copy_from_slice(&input[ip..ip + 16]);
        } else {
            if lit == 15 {
                lit += read_ext(input, &mut ip).ok_or(err(Lz4ErrorKind::Truncated, op))?;
            }
            let src = input
                .get(ip..ip.saturating_add(lit))
                .ok_or(err(Lz4ErrorKind::Truncated, op))?;
            out.get_mut(op..op + lit)
                .ok_or(err(Lz4ErrorKind::OutputOverflow, op))?
                .copy_from_slice(src);
        }
        ip += lit;
        op += lit;
        if ip >= in_len {
            // The last sequence has literals only.
            break;
        }

        // Match.
        let off = input
            .get(ip..ip + 2)
            .ok_or(err(Lz4ErrorKind::Truncated, op))?;
        let dist = usize::from(u16::from_le_bytes([off[0], off[1]]));
        ip += 2;
        let mut mlen = usize::from(token & 15);
        if mlen == 15 {
            mlen += read_ext(input, &mut ip).ok_or(err(Lz4ErrorKind::Truncated, op))?;
        }
        mlen += 4;
        if mlen > out_len - op {
            return Err(err(Lz4ErrorKind::OutputOverflow, op));
        }
        if dist == 0 {
            return Err(err(Lz4ErrorKind::BadOffset, op));
        }
        if dist > op {
            // Part of the match lies in the dictionary.
            let back = dist - op;
            if back > dict.len() {
                return Err(err(Lz4ErrorKind::BadOffset, op));
            }
            let from_dict = back.min(mlen);
            let start = dict.len() - back;
            out[op..op + from_dict].copy_from_slice(&dict[start..start + from_dict]);
            op += from_dict;
            let rest = mlen - from_dict;
            if rest > 0 {
                // The match continues from the start of the output (now op == dist).
                copy_match(out, op, dist, rest);
                op += rest;
            }
            continue;
        }
        copy_match(out, op, dist, mlen);
        op += mlen;
    }
    if op != out_len {
        return Err(Lz4Error {
            offset: in_len,
            out_pos: op,
            kind: Lz4ErrorKind::OutputShort,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        let mut x = 12345u32;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for n in [0usize, 1, 5, 15, 16, 17, 31, 100, 1000, 65536, 200_000] {
            v.push((0..n).map(|i| (i % 7) as u8).collect());
            v.push((0..n).map(|_| rnd() as u8).collect());
            v.push((0..n).map(|_| (rnd() % 4) as u8).collect());
            v.push(
                (0..n)
                    .map(|i| {
                        if (i / 37) % 3 == 0 {
                            rnd() as u8
                        } else {
                            (i / 5) as u8
                        }
                    })
                    .collect(),
            );
        }
        v
    }

    #[test]
    fn matches_lz4_flex_round_trips() {
        for s in samples() {
            let c = lz4_flex::block::compress(&s);
            let mut out = vec![0xAAu8; s.len()];
            decompress(&c, &mut out, &[]).unwrap();
            assert_eq!(out, s);
            // One byte more or less of output is an error.
            let mut longer = vec![0u8; s.len() + 1];
            assert!(decompress(&c, &mut longer, &[]).is_err());
            if !s.is_empty() {
                let mut shorter = vec![0u8; s.len() - 1];
                assert!(decompress(&c, &mut shorter, &[]).is_err());
            }
        }
    }

    #[test]
    fn dictionary_round_trips() {
        let dict: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
        for s in samples() {
            let mut s = s;
            s.extend_from_slice(&dict[100..900]);
            let c = lz4_flex::block::compress_with_dict(&s, &dict);
            let mut out = vec![0u8; s.len()];
            decompress(&c, &mut out, &dict).unwrap();
            assert_eq!(out, s);
        }
    }

    #[test]
    fn match_spanning_dictionary_and_output() {
        // 2 literals, then a 20-byte match at distance 3: 1 byte from the dictionary, then
        // 19 bytes continuing (overlapping) from the output start.
        let block = [0x2f, b'a', b'b', 3, 0, 1, 0x00];
        let mut out = [0u8; 22];
        decompress(&block, &mut out, b"xyz").unwrap();
        let mut want = vec![b'a', b'b'];
        let mut src = vec![b'z', b'a', b'b'];
        for i in 0..20 {
            let v = src[i];
            want.push(v);
            src.push(v);
        }
        assert_eq!(&out[..], &want[..]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 3000,
            failure_persistence: None,
            ..Default::default()
        })]

        /// Random bytes, and mutated real blocks, never panic; Ok means the output is full
        /// (and, for an unmutated block, right).
        #[test]
        fn random_and_mutated_blocks_never_panic(
            data in proptest::collection::vec(0u8..4, 0..3000),
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            flips in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 0..4),
            extra in 0usize..40,
            dict_len in 0usize..64,
        ) {
            let dict: Vec<u8> = (0..dict_len as u8).collect();
            let mut out = vec![0u8; extra * 7];
            let _ = decompress(&junk, &mut out, &dict);
            let mut block = lz4_flex::block::compress(&data);
            let mut out = vec![0u8; data.len()];
            decompress(&block, &mut out, &[]).unwrap();
            proptest::prop_assert_eq!(&out, &data);
            for (pos, v) in flips {
                if !block.is_empty() {
                    let n = block.len();
                    block[pos % n] = v;
                }
            }
            let mut out = vec![0u8; data.len() + extra % 3];
            let _ = decompress(&block, &mut out, &dict);
        }
    }

    #[test]
    fn hostile_blocks() {
        use Lz4ErrorKind::*;
        let kind = |s: &[u8], n: usize| decompress(s, &mut vec![0u8; n], &[]).unwrap_err().kind;
        assert_eq!(kind(&[], 1), Truncated);
        assert_eq!(kind(&[0x40, 1, 2], 4), Truncated);
        assert_eq!(kind(&[0x40, 1, 2, 3, 4], 3), OutputOverflow);
        assert_eq!(kind(&[0x10, 1, 0, 0], 10), BadOffset);
        assert_eq!(kind(&[0x10, 1, 2, 0], 10), BadOffset);
        assert_eq!(kind(&[0x10, 1, 1], 10), Truncated);
        assert_eq!(kind(&[0x1f, 1, 1, 0], 100), Truncated);
        assert_eq!(kind(&[0x10, 1, 1, 0, 0x00], 10), OutputShort);
        assert_eq!(kind(&[0xf0], 100), Truncated);
        let ok = [0x10, 7, 1, 0, 0x10, 9];
        let mut out = [0u8; 6];
        decompress(&ok, &mut out, &[]).unwrap();
        assert_eq!(out, [7, 7, 7, 7, 7, 9]);
    }
}
