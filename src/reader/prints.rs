//! [`Prints`]: fingerprints of the compressed bytes of the chunks a live array's versions read
//! whole, so that when another writer changes the source only the chunks whose bytes changed
//! get new stamps; the others keep their stamps, and with them their cached decoded copies.
//!
//! Subtleties:
//! - **Why bytes and not offsets.** python-blosc2 (4.14.1) `update_chunk` rewrites a
//!   contiguous frame in place from the updated chunk on: an unchanged offset does not prove
//!   unchanged bytes, and an updated chunk may keep its offset and size. A fingerprint is the
//!   xxh3-128 hash of the whole compressed chunk (its header holds its cbytes); special chunks
//!   held in the index (zeros, NaN, uninitialised, a repeated value) hash their synthesised
//!   32-byte chunk, which encodes the index entry.
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

use std::sync::Arc;

use lru::LruCache;
use parking_lot::Mutex;

/// A fingerprint: xxh3-128 of a whole compressed chunk.
pub(crate) type Print = u128;

/// Most prints kept per array (about 80 bytes each).
const MAX_PRINTS: usize = 1 << 14;

/// The print of `bytes`, a whole compressed chunk.
pub(crate) fn print_of(bytes: &[u8]) -> Print {
    twox_hash::XxHash3_128::oneshot(bytes)
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
