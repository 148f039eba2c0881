//! LZ4 block decoder (section 4.2): raw LZ4 blocks as `LZ4_compress_fast`/`LZ4_compress_HC`
//! write them, decoded to exactly the output's length, with an optional external dictionary
//! (the bytes that logically precede the output, as `LZ4_decompress_safe_usingDict` takes them).
//!
//! Safe Rust, in two loops. The fast loop runs while 32 input and 64 output bytes of slack
//! remain from the sequence start: literal runs < 15 are one 16-byte move, matches of at
//! most 18 bytes are 8 + 8 + 2-byte moves (distance ≥ 8) or four stores of an 8-byte
//! pattern built with a mask and a multiply (distance < 8), longer ones are 32/16/8-byte
//! move loops or one exact copy; the bytes written past a sequence's end are rewritten by the
//! next ones. Near the ends of the buffers the exact loop copies every byte with bounds
//! checks. A hostile block is an error, never a panic.

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

/// Input bytes the fast loop needs from a token on: token, up to 14 literals read as 16, offset.
const FAST_IN: usize = 32;
/// Output bytes the fast loop needs from the sequence start on.
const FAST_OUT: usize = 64;

/// `PATTERN_MASK[d]` keeps the low `d` bytes of a little-endian u64 (all 8 for `d` = 8).
const PATTERN_MASK: [u64; 9] = {
    let mut t = [u64::MAX; 9];
    let mut d = 1;
    while d < 8 {
        t[d] = (1u64 << (8 * d)) - 1;
        d += 1;
    }
    t
};

/// `PATTERN_REP[d]`: a 1 in the low byte of every `d`-byte period of a u64, so that
/// `(x & PATTERN_MASK[d]) * PATTERN_REP[d]` repeats the low `d` bytes of `x` (the products'
/// terms do not overlap, so there is no carry). `PATTERN_REP[8]` = 1.
const PATTERN_REP: [u64; 9] = {
    let mut t = [0u64; 9];
    t[8] = 1;
    let mut d = 1;
    while d < 8 {
        let mut sh = 0;
        while sh < 64 {
            t[d] |= 1u64 << sh;
            sh += 8 * d;
        }
        d += 1;
    }
    t
};

/// `PATTERN_STEP[d]`: the largest multiple of `d` that is at most 8.
const PATTERN_STEP: [usize; 9] = [8, 8, 8, 6, 8, 5, 6, 7, 8];

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

/// Little-endian u64 of the 8 bytes at `at` in `s`.
#[inline(always)]
fn load8(s: &[u8], at: usize) -> [u8; 8] {
    let mut a = [0u8; 8];
    a.copy_from_slice(&s[at..at + 8]);
    a
}

/// A match the fast loop does not copy itself (it reaches into the dictionary, is corrupt, or
/// ends too near the output's end for over-wide moves), copied exactly. Returns the output
/// position after it.
#[cold]
#[inline(never)]
fn exact_match(
    out: &mut [u8],
    dict: &[u8],
    mut op: usize,
    dist: usize,
    mlen: usize,
) -> Result<usize, Lz4ErrorKind> {
    if mlen > out.len() - op {
        return Err(Lz4ErrorKind::OutputOverflow);
    }
    if dist == 0 {
        return Err(Lz4ErrorKind::BadOffset);
    }
    if dist > op {
        // Part of the match lies in the dictionary.
        let back = dist - op;
        if back > dict.len() {
            return Err(Lz4ErrorKind::BadOffset);
        }
        let from_dict = back.min(mlen);
        let start = dict.len() - back;
        out[op..op + from_dict].copy_from_slice(&dict[start..start + from_dict]);
        op += from_dict;
        let rest = mlen - from_dict;
        if rest > 0 {
            // The match continues from the start of the output (now op == dist).
            copy_match(out, op, dist, rest);
        }
        return Ok(op + rest);
    }
    copy_match(out, op, dist, mlen);
    Ok(op + mlen)
}

/// A literal run of 15 or more bytes from the token at `ip`, copied in 32-byte moves when
/// the slack allows it. Returns the input position after the literals (the match offset) and
/// the output position after them, or `None` (nothing written) when the run does not fit.
#[inline(never)]
fn long_literals(input: &[u8], out: &mut [u8], ip: usize, op: usize) -> Option<(usize, usize)> {
    let mut lp = ip + 1;
    let lit = 15 + read_ext(input, &mut lp)?;
    if lp + lit + FAST_IN > input.len() || op + lit + FAST_OUT > out.len() {
        return None;
    }
    if lit <= 64 {
        let mut k = 0;
        while k < lit {
            out[op + k..op + k + 32].copy_from_slice(&input[lp + k..lp + k + 32]);
            k += 32;
        }
    } else {
        // Long runs: one exact copy (memcpy) beats a loop of fixed-size moves.
        out[op..op + lit].copy_from_slice(&input[lp..lp + lit]);
    }
    Some((lp + lit, op + lit))
}

/// A match of at most 18 bytes at `op` from `dist` back (1 ≤ `dist` ≤ `op`, 32 bytes of slack
/// after `op`), with no branch on the length or the distance: four 8-byte moves. The first
/// is 8 bytes of the match built in a register (the `dist`-byte pattern repeated when
/// `dist` < 8); each later one, `stride` further, copies 8 bytes already final: from `dist`
/// back when `dist` ≥ 8, else from the previous move (`stride` is a multiple of `dist`).
#[inline(always)]
fn short_match(out: &mut [u8], op: usize, dist: usize) {
    let src = op - dist;
    let win = &mut out[src..op + 32];
    if dist >= 8 {
        // 8 + 8 + 2 bytes, each move reading bytes already final because dist ≥ 8.
        // The last is 2 bytes wide, not 8: a load inside one earlier store forwards;
        // a wider one spanning two fresh stores stalls.
        let a = load8(win, 0);
        win[dist..dist + 8].copy_from_slice(&a);
        let b = load8(win, 8);
        win[dist + 8..dist + 16].copy_from_slice(&b);
        let c = [win[16], win[17]];
        win[dist + 16..dist + 18].copy_from_slice(&c);
    } else {
        // 1 ≤ dist < 8: the match repeats a `dist`-byte pattern; build 8 bytes of it
        // in a register and store them four times, `step` apart (≥ 20 bytes).
        let x = u64::from_le_bytes(load8(win, 0)) & PATTERN_MASK[dist];
        let w = x.wrapping_mul(PATTERN_REP[dist]).to_le_bytes();
        // `min` tells the compiler step ≤ 8, so the stores need no bounds checks.
        let step = PATTERN_STEP[dist].min(8);
        if let Some(dst) = win.get_mut(dist..).and_then(<[u8]>::first_chunk_mut::<32>) {
            for k in 0..4 {
                dst[k * step..k * step + 8].copy_from_slice(&w);
            }
        }
    }
}

/// Any match but a short one (`ml` < 15 and 1 ≤ `dist` ≤ `op`): reads the length extension
/// from `ip`, copies long matches in 16- or 8-byte moves while the slack allows, and hands the
/// rest to [`exact_match`]. Returns the input and output positions after the match.
#[inline(always)]
fn long_match(
    input: &[u8],
    out: &mut [u8],
    dict: &[u8],
    mut ip: usize,
    op: usize,
    dist: usize,
    ml: usize,
) -> Result<(usize, usize), Lz4ErrorKind> {
    let mut mlen = ml;
    if mlen == 15 {
        mlen += read_ext(input, &mut ip).ok_or(Lz4ErrorKind::Truncated)?;
    }
    mlen += 4;
    if dist <= op && dist != 0 && mlen <= 64 && mlen + 16 <= out.len() - op {
        let src = op - dist;
        if dist >= 16 {
            let mut k = 0;
            while k < mlen {
                let mut t = [0u8; 16];
                t.copy_from_slice(&out[src + k..src + k + 16]);
                out[op + k..op + k + 16].copy_from_slice(&t);
                k += 16;
            }
        } else if dist >= 8 {
            let mut k = 0;
            while k < mlen {
                let t = load8(out, src + k);
                out[op + k..op + k + 8].copy_from_slice(&t);
                k += 8;
            }
        } else {
            let x = u64::from_le_bytes(load8(out, src)) & PATTERN_MASK[dist];
            let w = x.wrapping_mul(PATTERN_REP[dist]).to_le_bytes();
            let step = PATTERN_STEP[dist];
            let mut k = 0;
            while k < mlen {
                out[op + k..op + k + 8].copy_from_slice(&w);
                k += step;
            }
        }
        return Ok((ip, op + mlen));
    }
    if dist <= op && dist != 0 && mlen <= out.len() - op {
        // Long (memmove / memset / doubling copies), or near the end: exact.
        copy_match(out, op, dist, mlen);
        return Ok((ip, op + mlen));
    }
    Ok((ip, exact_match(out, dict, op, dist, mlen)?))
}

/// Decodes the LZ4 block `input` into `out`, which it must fill exactly. `dict` holds the bytes
/// that precede the output (empty for none); matches may reach into it.
pub fn decompress(input: &[u8], out: &mut [u8], dict: &[u8]) -> Result<(), Lz4Error> {
    let in_len = input.len();
    let out_len = out.len();
    let mut ip = 0usize;
    let mut op = 0usize;

    // Fast loop: while FAST_IN input bytes and FAST_OUT output bytes remain from the sequence
    // start, literals and matches are copied with fixed-size moves that may run past their
    // end (the next sequences rewrite those bytes). A sequence whose literal run does not fit
    // that slack ends the loop before anything of it is written.
    while let Some(inp) = input.get(ip..).and_then(<[u8]>::first_chunk::<FAST_IN>) {
        if op + FAST_OUT > out_len {
            break;
        }
        let token = inp[0];
        let lit = usize::from(token >> 4);
        let lend;
        let dist;
        if lit < 15 {
            // 16 literal bytes (from the token's next one) cover any run < 15.
            out[op..op + 16].copy_from_slice(&inp[1..17]);
            dist = usize::from(u16::from_le_bytes([inp[1 + lit], inp[2 + lit]]));
            lend = ip + 1 + lit;
            op += lit;
        } else {
            let Some((l, o)) = long_literals(input, out, ip, op) else {
                break;
            };
            lend = l;
            op = o;
            dist = usize::from(u16::from_le_bytes([input[lend], input[lend + 1]]));
        }
        // Here op + 50 <= out_len: at least FAST_OUT - 14 bytes of slack remain.
        ip = lend + 2;
        let ml = usize::from(token & 15);
        if ml < 15 && dist.wrapping_sub(1) < op {
            short_match(out, op, dist);
            op += ml + 4;
            continue;
        }
        (ip, op) = long_match(input, out, dict, ip, op, dist, ml).map_err(|kind| Lz4Error {
            offset: lend,
            out_pos: op,
            kind,
        })?;
    }

    // Exact loop, near the ends of the buffers: every copy is bounds-checked.
    loop {
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
        if lit == 15 {
            lit += read_ext(input, &mut ip).ok_or(err(Lz4ErrorKind::Truncated, op))?;
        }
        let src = input
            .get(ip..ip.saturating_add(lit))
            .ok_or(err(Lz4ErrorKind::Truncated, op))?;
        out.get_mut(op..op.saturating_add(lit))
            .ok_or(err(Lz4ErrorKind::OutputOverflow, op))?
            .copy_from_slice(src);
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
        op = exact_match(out, dict, op, dist, mlen).map_err(|kind| err(kind, op))?;
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

    /// Writes an LZ4 length: the 4-bit token field, then extension bytes.
    fn push_len(block: &mut Vec<u8>, n: usize) {
        if n >= 15 {
            let mut r = n - 15;
            while r >= 255 {
                block.push(255);
                r -= 255;
            }
            block.push(r as u8);
        }
    }

    /// Random sequences of every shape (literal runs 0..100, distances 1..=op, matches up to
    /// 300 bytes, short distances often) written token by token, against a byte-by-byte
    /// reference: exercises every fast-loop branch and the switch to the exact loop.
    #[test]
    fn generated_sequences_match_reference() {
        let mut x = 0x9E37_79B9u32;
        let mut rnd = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as usize % n
        };
        for _ in 0..300 {
            let mut block = Vec::new();
            let mut want: Vec<u8> = Vec::new();
            let nseq = 1 + rnd(60);
            for i in 0..=nseq {
                let lit = match rnd(4) {
                    0 => rnd(100),
                    1 => 15 + rnd(60),
                    _ => rnd(15),
                };
                let last = i == nseq;
                let lit = if want.is_empty() || last {
                    lit.max(1)
                } else {
                    lit
                };
                let mlen = match rnd(3) {
                    0 => 4 + rnd(300),
                    _ => 4 + rnd(15),
                };
                let lits: Vec<u8> = (0..lit).map(|_| rnd(256) as u8).collect();
                let ml_field = if last { 0 } else { (mlen - 4).min(15) };
                block.push(((lit.min(15) as u8) << 4) | ml_field as u8);
                push_len(&mut block, lit);
                block.extend_from_slice(&lits);
                want.extend_from_slice(&lits);
                if last {
                    break;
                }
                let op = want.len();
                let dist = match rnd(3) {
                    0 => 1 + rnd(op.min(7)),
                    1 => 1 + rnd(op.min(20)),
                    _ => 1 + rnd(op.min(65535)),
                };
                block.extend_from_slice(&(dist as u16).to_le_bytes());
                push_len(&mut block, mlen - 4);
                for _ in 0..mlen {
                    let b = want[want.len() - dist];
                    want.push(b);
                }
            }
            let mut out = vec![0x55u8; want.len()];
            decompress(&block, &mut out, &[]).unwrap();
            assert_eq!(out, want);
            let mut longer = vec![0u8; want.len() + 1];
            assert!(decompress(&block, &mut longer, &[]).is_err());
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
