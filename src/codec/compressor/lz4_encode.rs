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

/// LZ4MID hash tables: 2^14 entries each for 4-byte and 8-byte (7 significant bytes) hashes.
const MID_HASHLOG: u32 = 14;
/// Positions are stored as `pos + MID_BASE` so that a zeroed table entry is never in range.
const MID_BASE: usize = 1 << 16;

#[inline(always)]
fn mid_hash4(src: &[u8], p: usize) -> usize {
    (read_u32(src, p).wrapping_mul(2_654_435_761) >> (32 - MID_HASHLOG)) as usize
}

#[inline(always)]
fn mid_hash8(src: &[u8], p: usize) -> usize {
    ((read_u64(src, p) << 8).wrapping_mul(58_295_818_150_454_627) >> (64 - MID_HASHLOG)) as usize
}

/// LZ4HC levels 1 and 2 (LZ4 1.10's "mid" compressor): one candidate from an 8-byte hash and
/// one from a 4-byte hash per position, a one-step lookahead for a longer match, and skipping
/// that speeds up over incompressible data. `tables` holds both hash tables, zeroed.
fn mid(src: &[u8], dst: &mut [u8], tables: &mut [u32]) -> Option<usize> {
    let (h4t, h8t) = tables.split_at_mut(1 << MID_HASHLOG);
    let mut w = Writer {
        out: dst,
        op: 0,
        hc: true,
    };
    let n = src.len();
    let mut anchor = 0usize;
    if n < MIN_LENGTH {
        return w.last_literals(src, anchor);
    }
    let mflimit = n - MFLIMIT;
    let matchlimit = n - LASTLITERALS;
    let ilimit = n - 8;
    let idx = |p: usize| (p + MID_BASE) as u32;
    let mut ip = 0usize;
    while ip <= mflimit {
        let ip_index = idx(ip) as usize;
        let mut found: Option<(usize, usize)> = None; // (length, distance)
        // Long match candidate.
        let h8 = mid_hash8(src, ip);
        let pos8 = h8t[h8] as usize;
        h8t[h8] = ip_index as u32;
        if ip_index - pos8 <= MAX_DISTANCE && pos8 >= MID_BASE {
            let m = pos8 - MID_BASE;
            let len = count(src, ip, m, matchlimit);
            if len >= MINMATCH {
                found = Some((len, ip_index - pos8));
            }
        }
        if found.is_none() {
            // Short match candidate, then a look at ip + 1 for a longer one.
            let h4 = mid_hash4(src, ip);
            let pos4 = h4t[h4] as usize;
            h4t[h4] = ip_index as u32;
            if ip_index - pos4 <= MAX_DISTANCE && pos4 >= MID_BASE {
                let m = pos4 - MID_BASE;
                let len = count(src, ip, m, matchlimit);
                if len >= MINMATCH {
                    let mut best = (len, ip_index - pos4);
                    let h8 = mid_hash8(src, ip + 1);
                    let pos8 = h8t[h8] as usize;
                    let d2 = ip_index + 1 - pos8;
                    if d2 <= MAX_DISTANCE && pos8 >= MID_BASE && ip < mflimit {
                        let len2 = count(src, ip + 1, pos8 - MID_BASE, matchlimit);
                        if len2 > len {
                            h8t[h8] = (ip_index + 1) as u32;
                            ip += 1;
                            best = (len2, d2);
                        }
                    }
                    found = Some(best);
                }
            }
        }
        let Some((mut len, dist)) = found else {
            ip += 1 + ((ip - anchor) >> 9);
            continue;
        };
        // Catch back.
        while ip > anchor && ip > dist && src[ip - 1] == src[ip - dist - 1] {
            ip -= 1;
            len += 1;
        }
        // Fill the tables with the start of the match (C pairs the current position's
        // neighbours with the loop-start index).
        h8t[mid_hash8(src, ip + 1)] = (ip_index + 1) as u32;
        h8t[mid_hash8(src, ip + 2)] = (ip_index + 2) as u32;
        h4t[mid_hash4(src, ip + 1)] = (ip_index + 1) as u32;
        w.sequence(src, anchor, ip, dist, len)?;
        ip += len;
        anchor = ip;
        // And with the end of the match.
        if ip - 2 < ilimit {
            let e = idx(ip) as usize;
            if ip > 5 {
                h8t[mid_hash8(src, ip - 5)] = (e - 5) as u32;
            }
            h8t[mid_hash8(src, ip - 3)] = (e - 3) as u32;
            h8t[mid_hash8(src, ip - 2)] = (e - 2) as u32;
            h4t[mid_hash4(src, ip - 2)] = (e - 2) as u32;
            h4t[mid_hash4(src, ip - 1)] = (e - 1) as u32;
        }
    }
    w.last_literals(src, anchor)
}

/// The hash-chain match finder. Positions are stored plus one so that 0 means "empty".
/// `PATTERN`: the repeated-byte analysis of LZ4HC level 9 (more than 128 attempts).
struct Hc<'a, const PATTERN: bool> {
    src: &'a [u8],
    hash: &'a mut [u32; 1 << HC_HASHLOG],
    chain: &'a mut [u16; HC_CHAIN_SIZE],
    next_to_update: usize,
    attempts: usize,
}

impl<'a, const PATTERN: bool> Hc<'a, PATTERN> {
    /// A search over `src` with empty tables, following chains `attempts` deep.
    fn new(
        src: &'a [u8],
        hash: &'a mut [u32; 1 << HC_HASHLOG],
        chain: &'a mut [u16; HC_CHAIN_SIZE],
        attempts: usize,
    ) -> Self {
        Hc {
            src,
            hash,
            chain,
            next_to_update: 0,
            attempts,
        }
    }

    #[inline(always)]
    fn hash_at(&self, p: usize) -> usize {
        (read_u32(self.src, p).wrapping_mul(2_654_435_761) >> (32 - HC_HASHLOG)) as usize
    }

    /// Inserts every position before `ip` into the chains.
    #[inline(always)]
    fn insert(&mut self, ip: usize) {
        let start = self.next_to_update;
        if start >= ip {
            return;
        }
        let (hash, chain) = (&mut *self.hash, &mut *self.chain);
        if let Some(window) = self.src.get(start..ip + 3) {
            for (k, w) in window.windows(4).enumerate() {
                let p = start + k;
                let v = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                let h = (v.wrapping_mul(2_654_435_761) >> (32 - HC_HASHLOG)) as usize;
                let Some(slot) = hash.get_mut(h) else {
                    continue;
                };
                let prev = *slot as usize; // position + 1, or 0
                let delta = if prev == 0 {
                    0xFFFF
                } else {
                    (p + 1 - prev).min(0xFFFF)
                };
                if let Some(c) = chain.get_mut(p & 0xFFFF) {
                    *c = delta as u16;
                }
                *slot = (p + 1) as u32;
            }
        } else {
            for p in start..ip {
                let h = (read_u32(self.src, p).wrapping_mul(2_654_435_761) >> (32 - HC_HASHLOG))
                    as usize;
                let prev = hash[h] as usize;
                let delta = if prev == 0 {
                    0xFFFF
                } else {
                    (p + 1 - prev).min(0xFFFF)
                };
                chain[p & 0xFFFF] = delta as u16;
                hash[h] = (p + 1) as u32;
            }
        }
        self.next_to_update = ip;
    }

    /// Longest match starting at `ip` (LZ4HC's `InsertAndFindBestMatch`), longer than 3:
    /// `(len, match_pos)`, `len == 3` when there is none. Called for nearly every position of
    /// poorly compressible data, so it is inlined into the main loop and has no look-back.
    #[inline(always)]
    fn best(&mut self, ip: usize, high: usize) -> (usize, usize) {
        let (len, pos, _) = self.search::<false>(ip, ip, high, MINMATCH - 1);
        (len, pos)
    }

    /// Longest match for a sequence that may start anywhere in `[low, ip]` and must cover
    /// `ip`, longer than `longest`. Returns `(len, match_pos, start)`; `len == longest` when
    /// nothing better was found.
    fn wider(
        &mut self,
        ip: usize,
        low: usize,
        high: usize,
        longest: usize,
    ) -> (usize, usize, usize) {
        self.search::<true>(ip, low, high, longest)
    }

    /// [`Self::wider`]; `LOOK_BACK == false` when `low == ip`.
    #[inline(always)]
    fn search<const LOOK_BACK: bool>(
        &mut self,
        ip: usize,
        low: usize,
        high: usize,
        mut longest: usize,
    ) -> (usize, usize, usize) {
        self.insert(ip);
        let src = self.src;
        let mut best = (longest, 0usize, ip);
        let first = self.hash[self.hash_at(ip)] as usize;
        if first == 0 {
            return best;
        }
        // Candidate positions may step below 0 or below the window: track them signed.
        let lowest = ip.saturating_sub(MAX_DISTANCE) as isize;
        let mut m = first as isize - 1;
        let mut tries = self.attempts;
        let look_back = if LOOK_BACK { ip - low } else { 0 };
        let pattern = read_u32(src, ip);
        // Repeated-byte analysis (level 9): None = untested, Some(0) = no, Some(len) = the
        // run length at ip.
        let mut src_run: Option<usize> = None;
        // Quick rejection (one 16-bit compare, as C): a match longer than `longest` agrees on
        // the two bytes that end it, seen from the lowest allowed start. `pair` reads them
        // (`u32::MAX` past the end of `src`, where no match that long can end and C never
        // reads); candidates whose pair is not inside `src` (`j >= pair_end`) are rejected.
        let pair_end = src.len().saturating_sub(1);
        let pair = |j: usize| {
            if j < pair_end {
                u32::from(src[j]) | u32::from(src[j + 1]) << 8
            } else {
                u32::MAX
            }
        };
        let mut end_pair = pair(low + longest - 1);
        while m >= lowest && tries > 0 {
            tries -= 1;
            let mu = m as usize;
            // A candidate closer to the start of `src` than the look-back wraps to a huge `j`.
            let j = (mu + longest - 1).wrapping_sub(look_back);
            let quick = j < pair_end && pair(j) == end_pair;
            if quick && read_u32(src, mu) == pattern {
                let mut len = MINMATCH + count(src, ip + MINMATCH, mu + MINMATCH, high);
                let back = if LOOK_BACK {
                    count_back(src, ip, mu, look_back.min(mu))
                } else {
                    0
                };
                len += back;
                if len > longest {
                    longest = len;
                    best = (len, mu - back, ip - back);
                    end_pair = pair(low + longest - 1);
                }
            }
            let d = self.chain[mu & 0xFFFF] as isize;
            if PATTERN && d == 1 {
                let b = pattern as u8;
                let run = *src_run.get_or_insert_with(|| {
                    if pattern == u32::from_ne_bytes([b; 4]) {
                        4 + run_len(src, ip + 4, high, b)
                    } else {
                        0
                    }
                });
                let cand = m - 1;
                if run > 0 && cand >= lowest && read_u32(src, cand as usize) == pattern {
                    let c = cand as usize;
                    let fwd = 4 + run_len(src, c + 4, high, b);
                    let mut back_len = 0usize;
                    while back_len < c && src[c - back_len - 1] == b {
                        back_len += 1;
                    }
                    let back_len = (cand - (cand - back_len as isize).max(lowest)) as usize;
                    let segment = back_len + fwd;
                    if segment >= run && fwd <= run {
                        m = cand + fwd as isize - run as isize;
                    } else {
                        let new = cand - back_len as isize;
                        m = new;
                        if look_back == 0 {
                            let max_ml = segment.min(run);
                            if longest < max_ml {
                                if ip as isize - new > MAX_DISTANCE as isize {
                                    break;
                                }
                                longest = max_ml;
                                best = (max_ml, new as usize, ip);
                                end_pair = pair(low + longest - 1);
                            }
                            let d2 = self.chain[new as usize & 0xFFFF] as isize;
                            m = new - d2;
                        }
                    }
                    continue;
                }
            }
            m -= d;
        }
        best
    }

    fn compress(&mut self, dst: &mut [u8]) -> Option<usize> {
        let src = self.src;
        let n = src.len();
        let mut w = Writer {
            out: dst,
            op: 0,
            hc: true,
        };
        let mut anchor = 0usize;
        if n < MIN_LENGTH {
            return w.last_literals(src, anchor);
        }
        let mflimit = n - MFLIMIT;
        let matchlimit = n - LASTLITERALS;
        let mut ip = 1usize;

        while ip <= mflimit {
            let (ml, r) = self.best(ip, matchlimit);
            if ml < MINMATCH {
                ip += 1;
                continue;
            }
            let (mut ip_, mut ref_, mut ml_) = (ip, r, ml);
            let (mut start0, mut ref0, mut ml0) = (ip_, ref_, ml_);

            // _Search2
            'search2: loop {
                let (mut ml2, mut ref2, mut start2) = if ip_ + ml_ <= mflimit {
                    self.wider(ip_ + ml_ - 2, ip_, matchlimit, ml_)
                } else {
                    (ml_, 0, 0)
                };
                if ml2 == ml_ {
                    w.sequence(src, anchor, ip_, ip_ - ref_, ml_)?;
                    ip = ip_ + ml_;
                    anchor = ip;
                    break 'search2;
                }
                if start0 < ip_ && start2 < ip_ + ml0 {
                    ip_ = start0;
                    ref_ = ref0;
                    ml_ = ml0;
                }
                if start2 - ip_ < 3 {
                    ml_ = ml2;
                    ip_ = start2;
                    ref_ = ref2;
                    continue 'search2;
                }
                // _Search3
                loop {
                    if start2 - ip_ < OPTIMAL_ML {
                        let mut new_ml = ml_.min(OPTIMAL_ML);
                        if ip_ + new_ml > start2 + ml2 - MINMATCH {
                            new_ml = start2 - ip_ + ml2 - MINMATCH;
                        }
                        let correction = new_ml as isize - (start2 - ip_) as isize;
                        if correction > 0 {
                            let c = correction as usize;
                            start2 += c;
                            ref2 += c;
                            ml2 -= c;
                        }
                    }
                    let (ml3, ref3, start3) = if start2 + ml2 <= mflimit {
                        self.wider(start2 + ml2 - 3, start2, matchlimit, ml2)
                    } else {
                        (ml2, 0, 0)
                    };
                    if ml3 == ml2 {
                        if start2 < ip_ + ml_ {
                            ml_ = start2 - ip_;
                        }
                        w.sequence(src, anchor, ip_, ip_ - ref_, ml_)?;
                        anchor = ip_ + ml_;
                        w.sequence(src, anchor, start2, start2 - ref2, ml2)?;
                        ip = start2 + ml2;
                        anchor = ip;
                        break 'search2;
                    }
                    if start3 < ip_ + ml_ + 3 {
                        if start3 >= ip_ + ml_ {
                            if start2 < ip_ + ml_ {
                                let c = ip_ + ml_ - start2;
                                start2 += c;
                                ref2 += c;
                                ml2 = ml2.saturating_sub(c);
                                if ml2 < MINMATCH {
                                    start2 = start3;
                                    ref2 = ref3;
                                    ml2 = ml3;
                                }
                            }
                            w.sequence(src, anchor, ip_, ip_ - ref_, ml_)?;
                            anchor = ip_ + ml_;
                            ip_ = start3;
                            ref_ = ref3;
                            ml_ = ml3;
                            start0 = start2;
                            ref0 = ref2;
                            ml0 = ml2;
                            continue 'search2;
                        }
                        start2 = start3;
                        ref2 = ref3;
                        ml2 = ml3;
                        continue;
                    }
                    if start2 < ip_ + ml_ {
                        if start2 - ip_ < ML_MASK {
                            ml_ = ml_.min(OPTIMAL_ML);
                            if ip_ + ml_ > start2 + ml2 - MINMATCH {
                                ml_ = start2 - ip_ + ml2 - MINMATCH;
                            }
                            let correction = ml_ as isize - (start2 - ip_) as isize;
                            if correction > 0 {
                                let c = correction as usize;
                                start2 += c;
                                ref2 += c;
                                ml2 -= c;
                            }
                        } else {
                            ml_ = start2 - ip_;
                        }
                    }
                    w.sequence(src, anchor, ip_, ip_ - ref_, ml_)?;
                    anchor = ip_ + ml_;
                    ip_ = start2;
                    ref_ = ref2;
                    ml_ = ml2;
                    start2 = start3;
                    ref2 = ref3;
                    ml2 = ml3;
                }
            }
        }
        w.last_literals(src, anchor)
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
