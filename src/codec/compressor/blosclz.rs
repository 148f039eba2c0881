//! BloscLZ stream decoder (section 4.5).
//!
//! One stream decodes into a caller-given slice that must come out exactly full. Literal runs
//! are slice copies; matches are `copy_within` when source and destination do not overlap, and
//! a doubling copy (period `distance`) when they do, so long runs cost a few `memmove`s. Every
//! read and write is bounds-checked; a hostile stream is an error, never a panic.

use std::fmt;

use super::copy_match;

/// Why a BloscLZ stream could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BloscLzError {
    /// Offset in the compressed stream of the instruction that failed.
    pub offset: usize,
    /// Output position reached when it failed.
    pub out_pos: usize,
    /// What went wrong.
    pub kind: BloscLzErrorKind,
}

/// The ways a BloscLZ stream can be corrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BloscLzErrorKind {
    /// The stream is empty.
    Empty,
    /// An instruction (or its literal bytes) runs past the end of the stream.
    TruncatedInstruction,
    /// A literal run or match would write past the end of the output.
    OutputOverflow,
    /// A match refers to bytes before the start of the output.
    MatchBeforeStart,
    /// The stream ended before the output was full.
    OutputShort,
}

impl fmt::Display for BloscLzError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            BloscLzErrorKind::Empty => "empty stream",
            BloscLzErrorKind::TruncatedInstruction => "truncated instruction",
            BloscLzErrorKind::OutputOverflow => "output overflow",
            BloscLzErrorKind::MatchBeforeStart => "match reaches before the start of the output",
            BloscLzErrorKind::OutputShort => "stream ends before the output is full",
        };
        write!(
            f,
            "blosclz: {what} at stream offset {} (output {})",
            self.offset, self.out_pos
        )
    }
}

impl std::error::Error for BloscLzError {}

/// Far-match marker: `hi == 31` and `lo == 255`.
const FAR_MARKER: usize = (31 << 8) + 255;
/// Added to the two big-endian bytes of a far match (the decoder's distance is this + 1).
const FAR_BASE: usize = 8191;

/// Decodes the BloscLZ stream `input` into `out`, which it must fill exactly.
pub fn decompress(input: &[u8], out: &mut [u8]) -> Result<(), BloscLzError> {
    let err = |offset: usize, out_pos: usize, kind| BloscLzError {
        offset,
        out_pos,
        kind,
    };
    let Some(&first) = input.first() else {
        return Err(err(0, 0, BloscLzErrorKind::Empty));
    };
    let in_len = input.len();
    let out_len = out.len();
    let mut ctrl = usize::from(first & 31);
    let mut ip = 1usize;
    let mut op = 0usize;
    let mut inst = 0usize;
    loop {
        if ctrl < 32 {
            // Literal run of ctrl + 1 bytes.
            let run = ctrl + 1;
            if ip + 32 <= in_len && op + 32 <= out_len {
                // Fixed-size copy: one wide move; the bytes past `run` are rewritten later.
                out[op..op + 32].copy_from_slice(&input[ip..ip + 32]);
            } else {
                let src = input.get(ip..ip + run).ok_or(err(
                    inst,
                    op,
                    BloscLzErrorKind::TruncatedInstruction,
                ))?;
                out.get_mut(op..op + run)
                    .ok_or(err(inst, op, BloscLzErrorKind::OutputOverflow))?
                    .copy_from_slice(src);
            }
            ip += run;
            op += run;
        } else {
            let mut len = (ctrl >> 5) - 1;
            let mut ofs = (ctrl & 31) << 8;
            if len == 6 {
                loop {
                    let code = *input.get(ip).ok_or(err(
                        inst,
                        op,
                        BloscLzErrorKind::TruncatedInstruction,
                    ))?;
                    ip += 1;
                    len += usize::from(code);
                    if code != 255 {
                        break;
                    }
                }
            }
            let code =
                *input
                    .get(ip)
                    .ok_or(err(inst, op, BloscLzErrorKind::TruncatedInstruction))?;
            ip += 1;
            len += 3;
            ofs += usize::from(code);
            if ofs == FAR_MARKER {
                let far = input.get(ip..ip + 2).ok_or(err(
                    inst,
                    op,
                    BloscLzErrorKind::TruncatedInstruction,
                ))?;
                ofs = (usize::from(far[0]) << 8) + usize::from(far[1]) + FAR_BASE;
                ip += 2;
            }
            let dist = ofs + 1;
            if dist > op {
                return Err(err(inst, op, BloscLzErrorKind::MatchBeforeStart));
            }
            if len > out_len - op {
                return Err(err(inst, op, BloscLzErrorKind::OutputOverflow));
            }
            copy_match(out, op, dist, len);
            op += len;
        }
        if ip >= in_len {
            break;
        }
        inst = ip;
        ctrl = usize::from(input[ip]);
        ip += 1;
    }
    if op != out_len {
        return Err(err(in_len, op, BloscLzErrorKind::OutputShort));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(input: &[u8], n: usize) -> Result<Vec<u8>, BloscLzError> {
        let mut out = vec![0u8; n];
        decompress(input, &mut out).map(|()| out)
    }

    #[test]
    fn worked_trace_section_4_5() {
        let mut s = Vec::new();
        s.push(0x3f);
        s.extend_from_slice(b"Blosc is a blocking, shuffling a");
        s.push(0x1f);
        s.extend_from_slice(b"nd lossless compression library.");
        s.push(0x00);
        s.extend_from_slice(b" ");
        s.extend_from_slice(&[0xc0, 0x40]);
        s.push(0x04);
        s.extend_from_slice(b" fast");
        s.extend_from_slice(&[0xe0, 0x01, 0x0e]);
        s.push(0x05);
        s.extend_from_slice(b" small");
        s.extend_from_slice(&[0xe0, 0x01, 0x0f]);
        s.extend_from_slice(&[0xe0, 0xae, 0x5f]);
        s.push(0x01);
        s.extend_from_slice(b" z");
        s.extend_from_slice(&[0xe0, 0x51, 0x00]);
        s.push(0x03);
        s.extend_from_slice(b"zend");
        assert_eq!(s.len(), 103);
        let out = decode(&s, 383).unwrap();
        assert_eq!(&out[..32], b"Blosc is a blocking, shuffling a");
        assert!(out.ends_with(&[b'z'; 92].iter().chain(b"end").copied().collect::<Vec<_>>()));
        assert_eq!(&out[..96], &out[96..192]);
        assert_eq!(&out[..96], &out[192..288]);
    }

    #[test]
    fn blosc1_run_example() {
        // Section 4.6: 128 x 'x'.
        let s = [
            0x23, 0x78, 0x78, 0x78, 0x78, 0xe0, 0x71, 0x03, 0x01, 0x78, 0x78,
        ];
        assert_eq!(decode(&s, 128).unwrap(), vec![b'x'; 128]);
    }

    #[test]
    fn far_match() {
        // 9000 literal bytes then a far match of length 597 at distance 9000.
        let mut s = Vec::new();
        let data: Vec<u8> = (0..9000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for c in data.chunks(32) {
            s.push((c.len() - 1) as u8);
            s.extend_from_slice(c);
        }
        s.extend_from_slice(&[0xff, 0xff, 0xff, 0x4e, 0xff, 0x03, 0x28]);
        let out = decode(&s, 9000 + 597).unwrap();
        assert_eq!(&out[..9000], &data[..]);
        assert_eq!(&out[9000..], &data[..597]);
    }

    #[test]
    fn overlapping_periods() {
        for dist in 1..=20usize {
            for len in 3..=70usize {
                // Literal `dist` bytes then a match (len, dist).
                let mut s = vec![(dist - 1) as u8];
                let lit: Vec<u8> = (0..dist as u8).map(|i| i.wrapping_mul(37) ^ 5).collect();
                s.extend_from_slice(&lit);
                let l = len - 2;
                let ofs = dist - 1;
                if l < 7 {
                    s.push(((l << 5) | (ofs >> 8)) as u8);
                } else {
                    s.push((7 << 5 | (ofs >> 8)) as u8);
                    let mut r = l - 7;
                    while r >= 255 {
                        s.push(255);
                        r -= 255;
                    }
                    s.push(r as u8);
                }
                s.push((ofs & 255) as u8);
                let out = decode(&s, dist + len).unwrap();
                for i in 0..dist + len {
                    assert_eq!(out[i], lit[i % dist], "dist {dist} len {len} at {i}");
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 3000,
            failure_persistence: None,
            ..Default::default()
        })]

        /// Random streams never panic, whatever the output size.
        #[test]
        fn random_streams_never_panic(
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
            n in 0usize..2000,
        ) {
            let mut out = vec![0u8; n];
            let _ = decompress(&junk, &mut out);
        }
    }

    #[test]
    fn hostile_streams() {
        use BloscLzErrorKind::*;
        let kind = |s: &[u8], n| decode(s, n).unwrap_err().kind;
        assert_eq!(kind(&[], 4), Empty);
        assert_eq!(kind(&[0x03, 1, 2], 4), TruncatedInstruction);
        assert_eq!(kind(&[0x03, 1, 2, 3, 4], 3), OutputOverflow);
        assert_eq!(kind(&[0x00, 1, 0x20, 0x05], 10), MatchBeforeStart);
        assert_eq!(kind(&[0x00, 1, 0xe0], 10), TruncatedInstruction);
        assert_eq!(kind(&[0x00, 1, 0xe0, 0xff], 10), TruncatedInstruction);
        assert_eq!(kind(&[0x00, 1, 0x3f, 0xff, 0x00], 10), TruncatedInstruction);
        assert_eq!(kind(&[0x00, 1, 0x20, 0x00], 10), OutputShort);
        assert_eq!(kind(&[0x00, 1, 0x20, 0x00], 3), OutputOverflow);
        assert_eq!(decode(&[0x00, 1, 0x20, 0x00], 4).unwrap(), vec![1; 4]);
    }
}
