//! [`Prints`]: fingerprints of the compressed bytes of the chunks a live array's versions read
//! whole, so that when another writer changes the source only the chunks whose bytes changed
//! get new stamps; the others keep their stamps, and with them their cached decoded copies.
//!
//! Subtleties:
//! - **Why bytes and not offsets.** python-blosc2 (4.14.1) `update_chunk` rewrites a
//!   contiguous frame in place from the updated chunk on: an unchanged offset does not prove
//!   unchanged bytes, and an updated chunk may keep its offset and size. A fingerprint covers
//!   every byte of the compressed chunk (its header holds its cbytes); special chunks held in
//!   the index (zeros, NaN, uninitialised, a repeated value) hash their synthesised 32-byte
//!   chunk, which encodes the index entry.
//! - **By block** ([`print_with`]). A chunk of blocks is cut at its bstarts (sorted: C-Blosc2
//!   writes blocks in completion order), and its print is the xxh3-128 of the xxh3-128s of
//!   the head (header, bstarts, dictionary) and of each block's bytes, in file order; any
//!   other chunk (special, memcpyed, lazy, bstarts that do not cut it cleanly, a slice longer
//!   than its cbytes) is hashed whole. It is a function of the bytes alone, so a whole-chunk
//!   decode hashes each block on its decoding thread right after reading its streams, while
//!   they are in the CPU's cache (session 13 in BENCHMARKS.md: xxh3 read them again from
//!   memory at a third of its speed), and a reader that does not decode ([`print_of`], the
//!   check after another writer's change) computes the same print from the bytes.
//! - **When.** A print is taken where a reader already holds the whole compressed chunk
//!   (whole-chunk decodes, the compressed-chunk cache), once per chunk and stamp, and only
//!   after the read was checked to be of its version. Range decodes of a few blocks read no
//!   whole chunk: such chunks have no print and get new stamps after another writer's change
//!   (their cached blocks are dropped).
//! - **Bounded.** At most [`MAX_PRINTS`] per array, least recently decoded first out.
//! - **What a kept stamp keeps.** Whole chunks (decoded, compressed) are cached by reads of
//!   whole chunks, which take the print when it is missing: bytes that changed under one
//!   stamp afterwards show as a print that no longer matches. Blocks and pages of small
//!   reads may be older than the print on sources whose reads are not checked (sparse frames,
//!   bcolz: a chunk file rewritten in the second before the mount noticed): the tree drops
//!   them after every change by another writer ([`super::ChunkReader::forget_parts`]).

use std::ops::Range;
use std::sync::Arc;

use lru::LruCache;
use parking_lot::Mutex;

use crate::codec::{self, SpecialKind};

/// A fingerprint of a whole compressed chunk (see the module doc).
pub(crate) type Print = u128;

/// Most prints kept per array (about 80 bytes each).
const MAX_PRINTS: usize = 1 << 14;

/// The print of `bytes`, a whole compressed chunk.
pub(crate) fn print_of(bytes: &[u8]) -> Print {
    print_with(bytes, &[])
}

/// The hash of one piece of a chunk.
fn hash(piece: &[u8]) -> u128 {
    twox_hash::XxHash3_128::oneshot(piece)
}

/// A block's bytes as a decode saw them and their hash: what [`print_with`] takes.
pub(crate) type SeenBlock = (Range<usize>, u128);

/// The [`SeenBlock`] of the bytes `range` of `chunk` (a block's streams, as the codec's
/// `decompress_range_seen` reports them); `None` for a range outside the chunk.
pub(crate) fn seen_block(chunk: &[u8], range: Range<usize>) -> Option<SeenBlock> {
    let h = hash(chunk.get(range.clone())?);
    Some((range, h))
}

/// The print of `bytes`, a whole compressed chunk, taking the hash of each block from `seen`
/// where a decode took it already (a range that is not exactly one of the print's pieces
/// is ignored), and hashing the rest here. Equal to [`print_of`] whatever `seen` holds,
/// provided each entry's hash is of its range of `bytes`.
pub(crate) fn print_with(bytes: &[u8], seen: &[SeenBlock]) -> Print {
    let Some(cuts) = cuts(bytes) else {
        return hash(bytes);
    };
    let n = cuts.len() - 1;
    let mut took: Vec<Option<u128>> = vec![None; n];
    for (range, h) in seen {
        if let Ok(k) = cuts[..n].binary_search(&range.start)
            && cuts[k + 1] == range.end
        {
            took[k] = Some(*h);
        }
    }
    let mut hashes = Vec::with_capacity(16 * (n + 1));
    hashes.extend_from_slice(&hash(&bytes[..cuts[0]]).to_le_bytes());
    for (k, h) in took.into_iter().enumerate() {
        let h = h.unwrap_or_else(|| hash(&bytes[cuts[k]..cuts[k + 1]]));
        hashes.extend_from_slice(&h.to_le_bytes());
    }
    hash(&hashes)
}

/// Where the print of `bytes` cuts it: the bstarts of a chunk of blocks, sorted, then its
/// end; `None` (hashed whole) for special, memcpyed and lazy chunks, a slice that is not
/// exactly the chunk's cbytes, and bstarts that point into the head, past the end, or twice
/// at one place.
fn cuts(bytes: &[u8]) -> Option<Vec<usize>> {
    let hdr = codec::chunk_info(bytes).ok()?;
    if hdr.special() != SpecialKind::None
        || hdr.memcpyed()
        || hdr.is_lazy()
        || hdr.nbytes == 0
        || hdr.cbytes != bytes.len()
    {
        return None;
    }
    let n = hdr.nblocks();
    let at = hdr.header_len();
    // Bounded by the chunk: no allocation for blocks a header merely claims.
    let head = n
        .checked_mul(4)
        .and_then(|b| b.checked_add(at))
        .filter(|&e| n > 0 && e <= bytes.len())?;
    let mut cuts = Vec::with_capacity(n + 1);
    for raw in bytes[at..head].chunks_exact(4) {
        let s = i32::from_le_bytes(raw.try_into().ok()?);
        let s = usize::try_from(s)
            .ok()
            .filter(|&s| s >= head && s < bytes.len())?;
        cuts.push(s);
    }
    cuts.sort_unstable();
    if cuts.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    cuts.push(bytes.len());
    Some(cuts)
}

/// The prints of one live array's chunks: for each chunk index, the newest stamp a print was
/// taken under and the print.
#[derive(Debug)]
pub(crate) struct Prints(Mutex<LruCache<usize, (u64, Print)>>);

impl Prints {
    /// No prints yet.
    pub(crate) fn new() -> Arc<Prints> {
        Arc::new(Prints(Mutex::new(LruCache::unbounded())))
    }

    /// Whether chunk `index` under `stamp` (or a newer stamp) has a print; marks it recently
    /// used (the chunk is being decoded again).
    pub(crate) fn knows(&self, index: usize, stamp: u64) -> bool {
        self.0.lock().get(&index).is_some_and(|&(s, _)| s >= stamp)
    }

    /// Records `print` for chunk `index` under `stamp`; an older stamp (a descriptor reading
    /// an older version) does not replace a newer one.
    pub(crate) fn record(&self, index: usize, stamp: u64, print: Print) {
        let mut p = self.0.lock();
        if p.peek(&index).is_some_and(|&(s, _)| s >= stamp) {
            return;
        }
        p.put(index, (stamp, print));
        while p.len() > MAX_PRINTS {
            p.pop_lru();
        }
    }

    /// The prints taken under the stamp `stamp_of` gives each chunk now, of chunks below
    /// `nchunks`.
    pub(crate) fn current(
        &self,
        nchunks: usize,
        stamp_of: impl Fn(usize) -> u64,
    ) -> Vec<(usize, Print)> {
        self.0
            .lock()
            .iter()
            .filter(|&(&i, &(s, _))| i < nchunks && stamp_of(i) == s)
            .map(|(&i, &(_, p))| (i, p))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_stamps_win_and_only_current_prints_count() {
        let p = Prints::new();
        p.record(1, 5, 11);
        p.record(1, 3, 99); // an older version's descriptor: ignored
        p.record(2, 5, 22);
        p.record(7, 5, 77);
        assert!(p.knows(1, 5) && p.knows(1, 4) && !p.knows(1, 6));
        let mut now = p.current(5, |i| if i == 2 { 6 } else { 5 });
        now.sort_unstable();
        assert_eq!(now, vec![(1, 11)]);
        assert_ne!(print_of(b"abc"), print_of(b"abd"));
    }

    /// A chunk of 8 blocks of 4 KiB (ZSTD + SHUFFLE, compressible with some noise).
    fn chunk() -> Vec<u8> {
        let data: Vec<u8> = (0..4096u64)
            .flat_map(|i| ((i as f64 * 0.01).sin() * 1e3 + (i % 7) as f64).to_le_bytes())
            .collect();
        let params = codec::CParams {
            clevel: 5,
            blocksize: codec::Blocksize::Explicit(4096),
            ..Default::default()
        };
        codec::compress(&data, &params).unwrap()
    }

    /// The blocks' hashes a whole-chunk decode takes (`decode.rs`).
    fn decoded(chunk: &[u8]) -> Vec<SeenBlock> {
        let mut out = vec![0u8; codec::chunk_info(chunk).unwrap().nbytes];
        let mut seen = Vec::new();
        let mut note = |_, r| seen.extend(seen_block(chunk, r));
        codec::decompress_range_seen(chunk, 0, &mut out, &mut note).unwrap();
        seen
    }

    /// `chunk` with its blocks stored in the reverse order (C-Blosc2 stores them in the order
    /// its threads finish them): the same blocks, other bstarts.
    fn reversed(chunk: &[u8]) -> Vec<u8> {
        let cuts = cuts(chunk).unwrap();
        let hdr = codec::chunk_info(chunk).unwrap();
        let (at, n) = (hdr.header_len(), cuts.len() - 1);
        let mut out = chunk[..cuts[0]].to_vec();
        for j in (0..n).rev() {
            let start = out.len() as i32;
            out[at + 4 * j..at + 4 * j + 4].copy_from_slice(&start.to_le_bytes());
            out.extend_from_slice(&chunk[cuts[j]..cuts[j + 1]]);
        }
        out
    }

    #[test]
    fn a_decode_hashes_every_block_and_gives_the_print_of_the_bytes() {
        let plain = chunk();
        let backwards = reversed(&plain);
        let (a, b) = (codec::decompress(&plain), codec::decompress(&backwards));
        assert_eq!(a.unwrap(), b.unwrap(), "the same blocks in another order");
        for c in [&plain, &backwards] {
            let n = cuts(c).unwrap().len() - 1;
            assert_eq!(n, 8);
            let seen = decoded(c);
            assert_eq!(seen.len(), n);
            // Every block seen is one of the print's pieces: none is hashed again.
            let pieces = cuts(c).unwrap();
            for (r, _) in &seen {
                let k = pieces.binary_search(&r.start).unwrap();
                assert_eq!(pieces[k + 1], r.end);
            }
            assert_eq!(print_with(c, &seen), print_of(c));
            assert_eq!(print_with(c, &seen[..3]), print_of(c));
            // A hash of a range that is no piece is ignored.
            let stray = (pieces[0]..pieces[2], 5);
            assert_eq!(print_with(c, &[stray]), print_of(c));
        }
        assert_ne!(print_of(&plain), print_of(&backwards));
    }

    #[test]
    fn any_changed_byte_changes_the_print() {
        let c = chunk();
        let p = print_of(&c);
        let pieces = cuts(&c).unwrap();
        // A byte of the header (not cbytes: a changed cbytes hashes whole), of the bstarts,
        // and the first and last byte of every block.
        let mut at = vec![2, cuts(&c).unwrap()[0] - 1];
        for w in pieces.windows(2) {
            at.extend([w[0], w[1] - 1]);
        }
        for i in at {
            let mut d = c.clone();
            d[i] ^= 1;
            assert_ne!(print_of(&d), p, "byte {i}");
            assert_ne!(print_with(&d, &decoded_or_none(&d)), p, "byte {i}, decoded");
        }
        // Chunks the print does not cut hash whole: a longer slice, a memcpyed chunk.
        let mut longer = c.clone();
        longer.push(0);
        assert!(cuts(&longer).is_none());
        assert_eq!(print_of(&longer), hash(&longer));
        let raw = codec::compress(
            &[7u8; 1000],
            &codec::CParams {
                clevel: 0,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(cuts(&raw).is_none());
    }

    /// The blocks' hashes of a decode of `chunk`, none when it does not decode.
    fn decoded_or_none(chunk: &[u8]) -> Vec<SeenBlock> {
        let Ok(hdr) = codec::chunk_info(chunk) else {
            return Vec::new();
        };
        let mut out = vec![0u8; hdr.nbytes.min(1 << 20)];
        let mut seen = Vec::new();
        let mut note = |_, r| seen.extend(seen_block(chunk, r));
        match codec::decompress_range_seen(chunk, 0, &mut out, &mut note) {
            Ok(_) => seen,
            Err(_) => Vec::new(),
        }
    }

    #[test]
    fn bounded() {
        let p = Prints::new();
        for i in 0..MAX_PRINTS + 10 {
            p.record(i, 1, i as Print);
        }
        assert_eq!(p.current(usize::MAX, |_| 1).len(), MAX_PRINTS);
        assert!(!p.knows(0, 1) && p.knows(MAX_PRINTS + 9, 1));
    }
}
