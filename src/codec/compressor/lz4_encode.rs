//! LZ4 block encoders (section 4.2): the fast single-probe compressor with an acceleration
//! parameter (what `LZ4_compress_fast` does; Blosc uses acceleration `10 - clevel`) and the
//! high-compression encoders of LZ4HC (level = clevel): LZ4 1.10's "mid" compressor for
//! levels 1-2 and a hash-chain search with overlap resolution for levels 3-9 (with the
//! repeated-byte pattern analysis at level 9).
//!
//! Both write raw LZ4 blocks (no frame, no size prefix) and return 0 when the block does not
//! fit in the output slice, which is how Blosc learns that a stream must be stored raw. They
//! make the same decisions as LZ4 1.10 (hash functions and table sizes, skip acceleration,
//! search depths, end-of-block rules, output-limit margins), so C-Blosc2's LZ4 and LZ4HC
//! chunks are reproduced byte for byte (`tests/it/encoder.rs`), and so is the ratio.

mod hc;

use hc::{Hc, MID_HASHLOG, mid};

/// Minimum match length of the format.
const MINMATCH: usize = 4;
/// The last match must start at least this many bytes before the end.
const MFLIMIT: usize = 12;
/// The last bytes are always literals.
const LASTLITERALS: usize = 5;
/// Largest match offset.
const MAX_DISTANCE: usize = 65535;
/// Inputs shorter than this are emitted as literals only.
const MIN_LENGTH: usize = MFLIMIT + 1;
/// Inputs below this size use 16-bit positions and a 13-bit hash of 4 bytes.
const LIMIT_64K: usize = 65536 + MFLIMIT - 1;
/// How fast the fast compressor's step grows when it finds no match.
const SKIP_TRIGGER: u32 = 6;

/// Number of bytes equal to `b` from `p` on, not going past `limit`.
#[inline(always)]
fn run_len(src: &[u8], p: usize, limit: usize, b: u8) -> usize {
    src.get(p..limit)
        .map_or(0, |s| s.iter().position(|&x| x != b).unwrap_or(s.len()))
}

/// HC hash table size (log2) and chain window.
const HC_HASHLOG: u32 = 15;
const HC_CHAIN_SIZE: usize = 1 << 16;
/// HC: prefer matches up to this length when resolving overlaps.
const OPTIMAL_ML: usize = 18;
const ML_MASK: usize = 15;
const RUN_MASK: usize = 15;

#[inline(always)]
fn read_u32(buf: &[u8], pos: usize) -> u32 {
    match buf.get(pos..pos + 4) {
        Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        None => 0,
    }
}

#[inline(always)]
fn read_u64(buf: &[u8], pos: usize) -> u64 {
    match buf.get(pos..pos + 8) {
        Some(b) => u64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
        None => 0,
    }
}

/// A word from an 8-byte chunk.
#[inline(always)]
fn word(c: &[u8]) -> u64 {
    u64::from_le_bytes(<[u8; 8]>::try_from(c).unwrap_or([0; 8]))
}

/// Number of equal bytes at `a` and `b` (`b < a`), not going past `limit` for `a`.
#[inline(always)]
fn count(buf: &[u8], a: usize, b: usize, limit: usize) -> usize {
    let limit = limit.min(buf.len());
    let (Some(x), Some(y)) = (buf.get(a..limit), buf.get(b..limit)) else {
        return 0;
    };
    let mut n = 0usize;
    for (cx, cy) in x.chunks_exact(8).zip(y.chunks_exact(8)) {
        let d = word(cx) ^ word(cy);
        if d != 0 {
            return n + (d.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + x[n..]
        .iter()
        .zip(&y[n..])
        .take_while(|(p, q)| p == q)
        .count()
}

/// Number of equal bytes just before `a` and `b`, at most `max` (`max <= min(a, b)`).
#[inline(always)]
fn count_back(buf: &[u8], a: usize, b: usize, max: usize) -> usize {
    let (Some(x), Some(y)) = (buf.get(a - max..a), buf.get(b - max..b)) else {
        return 0;
    };
    let mut n = 0usize;
    for (cx, cy) in x.rchunks_exact(8).zip(y.rchunks_exact(8)) {
        let d = word(cx) ^ word(cy);
        if d != 0 {
            return n + (d.leading_zeros() / 8) as usize;
        }
        n += 8;
    }
    let (x, y) = (&x[..max - n], &y[..max - n]);
    n + x
        .iter()
        .rev()
        .zip(y.iter().rev())
        .take_while(|(p, q)| p == q)
        .count()
}

/// The sequence writer shared by both encoders.
struct Writer<'a> {
    out: &'a mut [u8],
    op: usize,
    /// Use LZ4HC's output-limit margin for matches (`len / 255`) instead of the fast
    /// compressor's (`(len + 240) / 255`).
    hc: bool,
}

impl Writer<'_> {
    /// Emits literals `src[anchor..ip]` and a match of `mlen` bytes at `offset`. `None` when
    /// the output would not fit (with C's margins).
    #[inline(always)]
    fn sequence(
        &mut self,
        src: &[u8],
        anchor: usize,
        ip: usize,
        offset: usize,
        mlen: usize,
    ) -> Option<()> {
        let lit = ip - anchor;
        let olimit = self.out.len();
        if offset == 0 || offset > MAX_DISTANCE || mlen < MINMATCH {
            return None;
        }
        if self.op + lit + (2 + 1 + LASTLITERALS) + lit / 255 > olimit {
            return None;
        }
        let token_pos = self.op;
        self.op += 1;
        let mut token = if lit >= RUN_MASK {
            let mut l = lit - RUN_MASK;
            while l >= 255 {
                self.out[self.op] = 255;
                self.op += 1;
                l -= 255;
            }
            self.out[self.op] = l as u8;
            self.op += 1;
            (RUN_MASK << 4) as u8
        } else {
            (lit << 4) as u8
        };
        self.out[self.op..self.op + lit].copy_from_slice(&src[anchor..ip]);
        self.op += lit;
        self.out[self.op..self.op + 2].copy_from_slice(&(offset as u16).to_le_bytes());
        self.op += 2;
        let mcode = mlen - MINMATCH;
        let margin = if self.hc {
            mcode / 255
        } else {
            (mcode + 240) / 255
        };
        if self.op + (1 + LASTLITERALS) + margin > olimit {
            return None;
        }
        if mcode >= ML_MASK {
            token |= ML_MASK as u8;
            let mut l = mcode - ML_MASK;
            while l >= 510 {
                self.out[self.op] = 255;
                self.out[self.op + 1] = 255;
                self.op += 2;
                l -= 510;
            }
            if l >= 255 {
                self.out[self.op] = 255;
                self.op += 1;
                l -= 255;
            }
            self.out[self.op] = l as u8;
            self.op += 1;
        } else {
            token |= mcode as u8;
        }
        self.out[token_pos] = token;
        Some(())
    }

    /// Emits the final literals `src[anchor..]`; returns the block size.
    fn last_literals(&mut self, src: &[u8], anchor: usize) -> Option<usize> {
        let run = src.len() - anchor;
        if self.op + run + 1 + (run + 255 - RUN_MASK) / 255 > self.out.len() {
            return None;
        }
        if run >= RUN_MASK {
            self.out[self.op] = (RUN_MASK << 4) as u8;
            self.op += 1;
            let mut l = run - RUN_MASK;
            while l >= 255 {
                self.out[self.op] = 255;
                self.op += 1;
                l -= 255;
            }
            self.out[self.op] = l as u8;
            self.op += 1;
        } else {
            self.out[self.op] = (run << 4) as u8;
            self.op += 1;
        }
        self.out[self.op..self.op + run].copy_from_slice(&src[anchor..]);
        self.op += run;
        Some(self.op)
    }
}

/// Reusable LZ4 / LZ4HC encoder state (hash tables and chains).
#[derive(Debug, Clone)]
pub struct Lz4Encoder {
    table: Vec<u32>,
    hc_hash: Vec<u32>,
    hc_chain: Vec<u16>,
}

impl Default for Lz4Encoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Lz4Encoder {
    /// A new encoder; tables are allocated on first use.
    pub fn new() -> Self {
        Lz4Encoder {
            table: Vec::new(),
            hc_hash: Vec::new(),
            hc_chain: Vec::new(),
        }
    }

    /// Compresses `src` into `dst` as one LZ4 block with the given acceleration (>= 1).
    /// Returns the block size, or 0 when it does not fit in `dst`.
    pub fn compress_fast(&mut self, src: &[u8], dst: &mut [u8], acceleration: u32) -> usize {
        let small = src.len() < LIMIT_64K;
        let hashlog = if small { 13 } else { 12 };
        self.table.clear();
        self.table.resize(1 << hashlog, 0);
        let acceleration = acceleration.max(1);
        if small {
            self.fast::<true>(src, dst, acceleration, hashlog)
        } else {
            self.fast::<false>(src, dst, acceleration, hashlog)
        }
        .unwrap_or(0)
    }

    /// The fast compressor; `SMALL` selects 16-bit-range positions and the 4-byte hash.
    fn fast<const SMALL: bool>(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
        acceleration: u32,
        hashlog: u32,
    ) -> Option<usize> {
        let mut w = Writer {
            out: dst,
            op: 0,
            hc: false,
        };
        let n = src.len();
        let mut anchor = 0usize;
        if n < MIN_LENGTH {
            return w.last_literals(src, anchor);
        }
        let table = &mut self.table[..];
        let hash = |p: usize| -> usize {
            if SMALL {
                (read_u32(src, p).wrapping_mul(2_654_435_761) >> (32 - hashlog)) as usize
            } else {
                ((read_u64(src, p) << 24).wrapping_mul(889_523_592_379) >> (64 - hashlog)) as usize
            }
        };
        let mflimit_plus_one = n - MFLIMIT + 1;
        let matchlimit = n - LASTLITERALS;

        let mut ip = 0usize;
        table[hash(ip)] = 0;
        ip += 1;
        let mut forward_h = hash(ip);

        'outer: loop {
            // Find a match.
            let mut mref;
            {
                let mut forward_ip = ip;
                let mut step = 1usize;
                let mut search_nb = acceleration << SKIP_TRIGGER;
                loop {
                    let h = forward_h;
                    ip = forward_ip;
                    forward_ip += step;
                    step = (search_nb >> SKIP_TRIGGER) as usize;
                    search_nb += 1;
                    if forward_ip > mflimit_plus_one {
                        break 'outer;
                    }
                    mref = table[h] as usize;
                    forward_h = hash(forward_ip);
                    table[h] = ip as u32;
                    if mref + MAX_DISTANCE < ip {
                        continue;
                    }
                    if read_u32(src, mref) == read_u32(src, ip) {
                        break;
                    }
                }
            }
            // Catch up.
            while ip > anchor && mref > 0 && src[ip - 1] == src[mref - 1] {
                ip -= 1;
                mref -= 1;
            }
            loop {
                // Encode the sequence.
                let mlen = MINMATCH + count(src, ip + MINMATCH, mref + MINMATCH, matchlimit);
                w.sequence(src, anchor, ip, ip - mref, mlen)?;
                ip += mlen;
                anchor = ip;
                if ip >= mflimit_plus_one {
                    break 'outer;
                }
                // Fill the table and test the next position.
                table[hash(ip - 2)] = (ip - 2) as u32;
                let h = hash(ip);
                mref = table[h] as usize;
                table[h] = ip as u32;
                if mref + MAX_DISTANCE >= ip
                    && mref < ip
                    && read_u32(src, mref) == read_u32(src, ip)
                {
                    continue;
                }
                break;
            }
            ip += 1;
            forward_h = hash(ip);
        }
        w.last_literals(src, anchor)
    }

    /// Compresses `src` into `dst` as one LZ4HC block: `level` 1-2 use the mid compressor,
    /// 3-9 a hash chain searched `2^(level-1)` deep. Returns the block size, or 0 when it does
    /// not fit in `dst`.
    pub fn compress_hc(&mut self, src: &[u8], dst: &mut [u8], level: u8) -> usize {
        if level <= 2 {
            self.hc_hash.clear();
            self.hc_hash.resize(2 << MID_HASHLOG, 0);
            return mid(src, dst, &mut self.hc_hash).unwrap_or(0);
        }
        let attempts = 1usize << (level - 1);
        self.hc_hash.clear();
        self.hc_hash.resize(1 << HC_HASHLOG, 0);
        self.hc_chain.clear();
        self.hc_chain.resize(HC_CHAIN_SIZE, 0xFFFF);
        // Fixed-size views: indices masked to the table sizes need no bound checks.
        let (Ok(hash), Ok(chain)) = (
            <&mut [u32; 1 << HC_HASHLOG]>::try_from(&mut self.hc_hash[..]),
            <&mut [u16; HC_CHAIN_SIZE]>::try_from(&mut self.hc_chain[..]),
        ) else {
            return 0;
        };
        // Level 9's repeated-byte analysis is a separate instantiation, so that the search
        // loop of the other levels carries no trace of it.
        let out = if attempts > 128 {
            Hc::<true>::new(src, hash, chain, attempts).compress(dst)
        } else {
            Hc::<false>::new(src, hash, chain, attempts).compress(dst)
        };
        out.unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize, kind: u32) -> Vec<u8> {
        let mut s = 0x1234_5678u32;
        (0..n)
            .map(|i| {
                s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
                match kind {
                    0 => (i / 3) as u8,
                    1 => ((s >> 28) & 3) as u8,
                    2 => (s >> 24) as u8,
                    _ => {
                        b"the quick brown fox jumps over the lazy dog "[i % 44] ^ ((i / 1000) as u8)
                    }
                }
            })
            .collect()
    }

    #[test]
    fn round_trip_fast_and_hc() {
        let mut enc = Lz4Encoder::new();
        for n in [0usize, 1, 12, 13, 100, 4096, 65535, 65547, 70000, 300_000] {
            for kind in 0..4 {
                let src = sample(n, kind);
                let mut dst = vec![0u8; n + n / 255 + 16];
                for accel in [1u32, 5, 9] {
                    let c = enc.compress_fast(&src, &mut dst, accel);
                    assert!(c > 0);
                    let back = lz4_flex::block::decompress(&dst[..c], n).unwrap();
                    assert_eq!(back, src, "fast n={n} kind={kind} accel={accel}");
                }
                for level in [1u8, 3, 6, 9] {
                    let c = enc.compress_hc(&src, &mut dst, level);
                    assert!(c > 0);
                    let back = lz4_flex::block::decompress(&dst[..c], n).unwrap();
                    assert_eq!(back, src, "hc n={n} kind={kind} level={level}");
                }
            }
        }
    }

    #[test]
    fn does_not_fit_returns_zero() {
        let src = sample(10000, 2);
        let mut dst = vec![0u8; 5000];
        let mut enc = Lz4Encoder::new();
        assert_eq!(enc.compress_fast(&src, &mut dst, 1), 0);
        assert_eq!(enc.compress_hc(&src, &mut dst, 9), 0);
    }
}
