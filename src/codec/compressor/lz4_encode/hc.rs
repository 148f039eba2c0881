//! The LZ4HC block encoders behind [`super::Lz4Encoder`]: LZ4 1.10's "mid" compressor
//! (levels 1-2) and the hash-chain search with overlap resolution (levels 3-9, with the
//! repeated-byte pattern analysis at level 9). The fast compressor, the block writer and the
//! match-length helpers they share live in the parent module.

use super::{
    HC_CHAIN_SIZE, HC_HASHLOG, LASTLITERALS, MAX_DISTANCE, MFLIMIT, MIN_LENGTH, MINMATCH, ML_MASK,
    OPTIMAL_ML, Writer, count, count_back, read_u32, read_u64, run_len,
};

/// LZ4MID hash tables: 2^14 entries each for 4-byte and 8-byte (7 significant bytes) hashes.
pub(super) const MID_HASHLOG: u32 = 14;
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
pub(super) fn mid(src: &[u8], dst: &mut [u8], tables: &mut [u32]) -> Option<usize> {
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
pub(super) struct Hc<'a, const PATTERN: bool> {
    src: &'a [u8],
    hash: &'a mut [u32; 1 << HC_HASHLOG],
    chain: &'a mut [u16; HC_CHAIN_SIZE],
    next_to_update: usize,
    attempts: usize,
}

impl<'a, const PATTERN: bool> Hc<'a, PATTERN> {
    /// A search over `src` with empty tables, following chains `attempts` deep.
    pub(super) fn new(
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

    pub(super) fn compress(&mut self, dst: &mut [u8]) -> Option<usize> {
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
