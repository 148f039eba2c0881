//! BloscLZ stream encoder, byte-exact with C-Blosc2 3.3.x ("BloscLZ 2.5.3") and C-Blosc 1.21
//! (section 4.6).
//!
//! The encoder first probes the end of the buffer with a dry run of the match finder and gives
//! up (returns 0, so Blosc stores the stream raw) when the estimated ratio is below a per-level
//! threshold. Otherwise it runs a greedy LZ77 over a single-entry hash table and writes the
//! FastLZ-like format of section 4.5. Every decision (hash, table size, match rules, output
//! limit checks) follows the C encoder, so the same input gives the same bytes.

/// Longest literal run of one instruction.
const MAX_COPY: usize = 32;
/// Largest biased distance of a near match.
const MAX_DISTANCE: usize = 8191;
/// Distances from here on are never used (65535 + 8191 - 1).
const MAX_FARDISTANCE: usize = 65535 + MAX_DISTANCE - 1;
/// Largest hash table (2^14 entries).
const MAX_HASHLOG: u32 = 14;

/// Probe thresholds by clevel: below this estimated ratio the stream is stored raw.
const RATIO_THRESHOLD: [f64; 10] = [0.0, 2.0, 1.5, 1.2, 1.2, 1.2, 1.2, 1.15, 1.1, 1.0];

/// Which C encoder to reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// C-Blosc2 3.3.x (BloscLZ 2.5.3): minimum match 4.
    Blosc2,
    /// C-Blosc 1.21: minimum match 3 unless the chunk is split and the probe ratio is >= 4.
    Blosc1 {
        /// Whether the chunk's blocks are split into streams (header dont-split bit clear).
        split: bool,
    },
}

/// A BloscLZ encoder holding its hash table between calls (64 KiB).
#[derive(Debug, Clone)]
pub struct BloscLzEncoder {
    htab: Vec<u32>,
}

impl Default for BloscLzEncoder {
    fn default() -> Self {
        Self::new()
    }
}

/// The hash of section 4.6: Knuth's multiplicative hash of 4 bytes, top `hashlog` bits.
#[inline(always)]
fn hash(seq: u32, hashlog: u32) -> usize {
    (seq.wrapping_mul(2_654_435_761) >> (32 - hashlog)) as usize
}

/// The 4 bytes at `pos` as a little-endian u32 (the x86 reading of C's native load).
#[inline(always)]
fn read_u32(buf: &[u8], pos: usize) -> u32 {
    match buf.get(pos..pos + 4) {
        Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        None => 0,
    }
}

/// End of a match (section 4.6): `p` = first index `>= start` with `buf[p] != buf[p - d]`,
/// searching below `bound` (`p = bound` when none), then `min(p + 1, bound)`.
#[inline(always)]
fn match_end(buf: &[u8], start: usize, d: usize, bound: usize) -> usize {
    let mut p = start;
    // Eight bytes at a time while both windows stay inside `bound`.
    while p + 8 <= bound {
        let (Some(a), Some(b)) = (buf.get(p..p + 8), buf.get(p - d..p - d + 8)) else {
            break;
        };
        let a = u64::from_le_bytes(a.try_into().unwrap_or([0; 8]));
        let b = u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
        let x = a ^ b;
        if x != 0 {
            p += (x.trailing_zeros() / 8) as usize;
            return (p + 1).min(bound);
        }
        p += 8;
    }
    while p < bound && buf.get(p) == buf.get(p - d) {
        p += 1;
    }
    (p + 1).min(bound)
}

/// Output bytes of a match's length extension (`len >= 7`).
#[inline(always)]
fn long_len_bytes(len: usize) -> usize {
    if len >= 7 { (len - 7) / 255 + 1 } else { 0 }
}

impl BloscLzEncoder {
    /// A new encoder.
    pub fn new() -> Self {
        BloscLzEncoder {
            htab: vec![0; 1 << MAX_HASHLOG],
        }
    }

    /// The entropy probe (section 4.6 step A): a dry run of the match finder over the `limit`
    /// bytes starting at `base`, returning consumed bytes / estimated output bytes.
    fn probe(
        &mut self,
        input: &[u8],
        base: usize,
        maxlen: usize,
        shift: usize,
        hashlog: u32,
    ) -> f64 {
        let hashlen = 1usize << hashlog;
        let limit = maxlen.min(hashlen);
        let region = match input.get(base..base + limit) {
            Some(r) => r,
            None => return 0.0,
        };
        let htab = &mut self.htab[..hashlen];
        htab.fill(0);
        if limit <= 12 {
            return 0.0;
        }
        let ip_bound = limit - 1;
        let ip_limit = limit - 12;
        let mut ip = 0usize;
        let mut oc: i64 = 5;
        let mut copy = 4usize;
        while ip < ip_limit {
            let anchor = ip;
            let seq = read_u32(region, ip);
            let h = hash(seq, hashlog);
            let refp = htab[h] as usize;
            htab[h] = anchor as u32;
            let dist = anchor.wrapping_sub(refp);
            let mut literal = dist == 0 || dist >= MAX_FARDISTANCE || refp > anchor;
            let mut len = 0;
            let mut dist_b = 0;
            if !literal {
                if read_u32(region, refp) != seq {
                    literal = true;
                } else {
                    dist_b = dist - 1;
                    let end = match_end(region, anchor + 4, dist, ip_bound);
                    len = end - shift - anchor;
                    if end < shift + anchor || len < shift {
                        literal = true;
                    }
                }
            }
            if literal {
                oc += 1;
                ip = anchor + 1;
                copy += 1;
                if copy == MAX_COPY {
                    copy = 0;
                    oc += 1;
                }
                continue;
            }
            if copy == 0 {
                oc -= 1;
            }
            copy = 0;
            oc += long_len_bytes(len) as i64;
            oc += if dist_b < MAX_DISTANCE { 2 } else { 4 };
            ip = anchor + len;
            let h = hash(read_u32(region, ip), hashlog);
            htab[h] = ip as u32;
            ip += 2;
            oc += 1;
        }
        ip as f64 / oc as f64
    }

    /// Compresses `input` into `out` (at most `out.len()` bytes, C's `maxout`). Returns the
    /// stream size, or 0 when the data should be stored raw (probe refused, input shorter
    /// than 16 bytes, `out` shorter than 66 bytes, or the output would not fit).
    ///
    /// `clevel` is 1..=9 (0 and larger values are clamped into that range).
    pub fn compress(
        &mut self,
        clevel: u8,
        input: &[u8],
        out: &mut [u8],
        variant: Variant,
    ) -> usize {
        let clevel = clevel.clamp(1, 9) as usize;
        let length = input.len();
        let maxout = out.len();
        let hashlog: u32 = match clevel {
            1 => 12,
            2 => 13,
            _ => 14,
        };
        let (minlen, ipshift) = match variant {
            Variant::Blosc2 => {
                let maxlen = match clevel {
                    0..=1 => length / 8,
                    2..=3 => length / 4,
                    4..=6 => length / 2,
                    _ => length,
                };
                let ratio = self.probe(input, length - maxlen, maxlen, 4, hashlog);
                if ratio < RATIO_THRESHOLD[clevel] {
                    return 0;
                }
                (4, 4)
            }
            Variant::Blosc1 { split } => {
                let maxlen = length / 4;
                let ratio = self.probe(input, length - maxlen, maxlen, 3, 12);
                if ratio < RATIO_THRESHOLD[clevel] {
                    return 0;
                }
                if !split || ratio < 4.0 {
                    (3, 3)
                } else {
                    (4, 4)
                }
            }
        };
        if length < 16 || maxout < 66 {
            return 0;
        }
        self.compress_main(clevel, input, out, hashlog, minlen, ipshift)
            .unwrap_or(0)
    }

    /// Section 4.6 step C. `None` when the output limit is hit.
    fn compress_main(
        &mut self,
        clevel: usize,
        input: &[u8],
        out: &mut [u8],
        hashlog: u32,
        minlen: usize,
        ipshift: usize,
    ) -> Option<usize> {
        let length = input.len();
        let maxout = out.len();
        let htab = &mut self.htab[..1usize << hashlog];
        htab.fill(0);
        let ip_bound = length - 1;
        let ip_limit = length - 12;

        // Placeholder, then the first 4 bytes as literals.
        out[0] = (MAX_COPY - 1) as u8;
        out[1..5].copy_from_slice(&input[..4]);
        let mut op = 5usize;
        let mut copy = 4usize;
        let mut ip = 4usize;

        while ip < ip_limit {
            let anchor = ip;
            let seq = read_u32(input, ip);
            let h = hash(seq, hashlog);
            let refp = htab[h] as usize;
            htab[h] = anchor as u32;
            let dist = anchor.wrapping_sub(refp);

            let mut is_match = false;
            let mut len = 0usize;
            let mut dist_b = 0usize;
            if dist != 0 && dist < MAX_FARDISTANCE && refp < anchor && read_u32(input, refp) == seq
            {
                dist_b = dist - 1;
                let end = match_end(input, anchor + 4, dist, ip_bound);
                if end >= anchor + ipshift {
                    len = end - ipshift - anchor;
                    is_match = len >= minlen && !(len <= 5 && dist_b >= MAX_DISTANCE);
                }
            }

            if !is_match {
                // Literal.
                if op + 2 > maxout {
                    return None;
                }
                out[op] = input[anchor];
                op += 1;
                ip = anchor + 1;
                copy += 1;
                if copy == MAX_COPY {
                    copy = 0;
                    out[op] = (MAX_COPY - 1) as u8;
                    op += 1;
                }
                continue;
            }

            // Close the pending literal run, or drop its unused placeholder.
            if copy > 0 {
                out[op - copy - 1] = (copy - 1) as u8;
            } else {
                op -= 1;
            }
            copy = 0;

            ip = anchor + len;
            op = emit_match(out, op, len, dist_b)?;

            // Update the hash at the match boundary.
            let seq = read_u32(input, ip);
            htab[hash(seq, hashlog)] = ip as u32;
            if clevel == 9 {
                htab[hash(seq >> 8, hashlog)] = (ip + 1) as u32;
            }
            ip += 2;
            if op + 1 > maxout {
                return None;
            }
            out[op] = (MAX_COPY - 1) as u8;
            op += 1;
        }

        // Tail: the rest as literals.
        while ip <= ip_bound {
            if op + 2 > maxout {
                return None;
            }
            out[op] = input[ip];
            op += 1;
            ip += 1;
            copy += 1;
            if copy == MAX_COPY {
                copy = 0;
                out[op] = (MAX_COPY - 1) as u8;
                op += 1;
            }
        }
        if copy > 0 {
            out[op - copy - 1] = (copy - 1) as u8;
        } else {
            op -= 1;
        }
        out[0] |= 1 << 5;
        Some(op)
    }
}

/// Writes one match instruction at `op` (encoded length `len`, biased distance `dist`),
/// checking the output limit as the C encoder does. Returns the new output position.
#[inline(always)]
fn emit_match(out: &mut [u8], mut op: usize, mut len: usize, dist: usize) -> Option<usize> {
    let maxout = out.len();
    if dist < MAX_DISTANCE {
        if len < 7 {
            if op + 2 > maxout {
                return None;
            }
            out[op] = ((len << 5) + (dist >> 8)) as u8;
            out[op + 1] = (dist & 255) as u8;
            return Some(op + 2);
        }
        if op + 1 > maxout {
            return None;
        }
        out[op] = ((7 << 5) + (dist >> 8)) as u8;
        op += 1;
        len -= 7;
        while len >= 255 {
            if op + 1 > maxout {
                return None;
            }
            out[op] = 255;
            op += 1;
            len -= 255;
        }
        if op + 2 > maxout {
            return None;
        }
        out[op] = len as u8;
        out[op + 1] = (dist & 255) as u8;
        Some(op + 2)
    } else {
        let dist = dist - MAX_DISTANCE;
        if len < 7 {
            if op + 4 > maxout {
                return None;
            }
            out[op] = ((len << 5) + 31) as u8;
            out[op + 1] = 255;
            out[op + 2] = (dist >> 8) as u8;
            out[op + 3] = (dist & 255) as u8;
            return Some(op + 4);
        }
        if op + 1 > maxout {
            return None;
        }
        out[op] = (7 << 5) + 31;
        op += 1;
        len -= 7;
        while len >= 255 {
            if op + 1 > maxout {
                return None;
            }
            out[op] = 255;
            op += 1;
            len -= 255;
        }
        if op + 4 > maxout {
            return None;
        }
        out[op] = len as u8;
        out[op + 1] = 255;
        out[op + 2] = (dist >> 8) as u8;
        out[op + 3] = (dist & 255) as u8;
        Some(op + 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Minimal reference decoder of section 4.5 for the unit tests.
    fn decode(src: &[u8], n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        let mut i = 0;
        let mut first = true;
        while i < src.len() {
            let mut ctrl = src[i] as usize;
            if first {
                ctrl &= 31;
                first = false;
            }
            i += 1;
            if ctrl < 32 {
                out.extend_from_slice(&src[i..i + ctrl + 1]);
                i += ctrl + 1;
                continue;
            }
            let l = ctrl >> 5;
            let hi = ctrl & 31;
            let mut len = if l == 7 {
                let mut s = 6;
                loop {
                    let b = src[i] as usize;
                    i += 1;
                    s += b;
                    if b != 255 {
                        break;
                    }
                }
                s
            } else {
                l - 1
            };
            let lo = src[i] as usize;
            i += 1;
            len += 3;
            let mut d = hi * 256 + lo + 1;
            if lo == 255 && hi == 31 {
                d = (src[i] as usize) * 256 + src[i + 1] as usize + 8192;
                i += 2;
            }
            let start = out.len() - d;
            for k in 0..len {
                out.push(out[start + k]);
            }
        }
        out
    }

    #[test]
    fn blosc1_example_128_x() {
        let input = vec![b'x'; 128];
        let mut out = vec![0u8; 128];
        let n =
            BloscLzEncoder::new().compress(5, &input, &mut out, Variant::Blosc1 { split: true });
        assert_eq!(
            &out[..n],
            &[
                0x23, 0x78, 0x78, 0x78, 0x78, 0xe0, 0x71, 0x03, 0x01, 0x78, 0x78
            ]
        );
    }

    #[test]
    fn round_trips() {
        let mut enc = BloscLzEncoder::new();
        let mut seed = 1u64;
        for len in [16usize, 100, 1000, 5000, 70000, 200_000] {
            for kind in 0..3 {
                let input: Vec<u8> = (0..len)
                    .map(|i| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                        match kind {
                            0 => (i / 7) as u8,
                            1 => ((seed >> 60) as u8) & 3,
                            _ => (i % 251) as u8 ^ ((i / 9000) as u8),
                        }
                    })
                    .collect();
                for clevel in [1u8, 5, 9] {
                    for v in [Variant::Blosc2, Variant::Blosc1 { split: false }] {
                        let mut out = vec![0u8; len];
                        let n = enc.compress(clevel, &input, &mut out, v);
                        if n > 0 {
                            assert_eq!(decode(&out[..n], len), input, "len {len} kind {kind}");
                        }
                    }
                }
            }
        }
    }
}
