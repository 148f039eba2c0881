//! The state every reader and the prefetch threads share ([`Core`]): the arrays' stores, the
//! caches (decoded chunks, compressed chunks for range decodes, decoded blocks, 4 KiB pages)
//! and their bookkeeping, and the load of a whole chunk through the cache; and the keys the
//! decoders take ([`At`]: one chunk of one version of a store; [`BlockKey`]: one block of
//! it). The decoders, small reads and prefetches add their own `impl Core` blocks
//! (`decode.rs`, `small.rs`, `prefetch.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use parking_lot::Mutex;

use super::{AppendVec, ArrayId, ChunkId, ChunkKey, ChunkStore, keep, partial};
use crate::cache::{Bytes, ChunkCache};
use crate::container::ContainerError;

/// One chunk of one version of a store, as the decoders take it.
#[derive(Clone, Copy)]
pub(super) struct At<'a> {
    pub(super) store: &'a dyn ChunkStore,
    pub(super) key: ChunkKey,
}

impl<'a> At<'a> {
    pub(super) fn new(store: &'a dyn ChunkStore, id: ChunkId) -> At<'a> {
        At {
            store,
            key: ChunkKey {
                id,
                stamp: store.stamp(id.index),
            },
        }
    }
}

/// One block of one chunk (the key of the block and page caches: a block or page number).
pub(super) type BlockKey = (ChunkKey, usize);

/// The state prefetch threads share with readers.
#[derive(Debug)]
pub(super) struct Core {
    /// Per array; arrays are added while mounted (a collection leaf opened on first access).
    pub(super) stores: AppendVec<Arc<dyn ChunkStore>>,
    /// Decompressed chunks.
    pub(super) cache: ChunkCache<ChunkKey>,
    /// Compressed chunks kept for range decodes: a random small read must not re-read a
    /// whole compressed chunk from the source each time.
    pub(super) compressed: ChunkCache<ChunkKey>,
    /// Decoded blocks of chunks read at random in small pieces.
    pub(super) blocks: ChunkCache<BlockKey>,
    /// The 4 KiB pages small random reads asked for, cut from the blocks decoded for them.
    pub(super) pages: ChunkCache<BlockKey>,
    /// Bumped by every invalidation before it drops pages (see `small.rs`).
    pub(super) page_gen: AtomicU64,
    /// Page copies handed to the pages thread, and made (`keep.rs`).
    pub(super) pages_queued: AtomicU64,
    pub(super) pages_done: AtomicU64,
    /// Bands of assembled files decoded so far, by readers and prefetch threads (`bands.rs`).
    pub(super) bands_decoded: AtomicU64,
    /// Block sizes of the chunks `blocks` has seen (0: not worth caching by block).
    pub(super) block_sizes: Mutex<HashMap<ChunkKey, usize>>,
    /// Headers and block-start tables of the chunks small reads read in part.
    pub(super) layouts: partial::Layouts,
    /// Blocks small reads decoded up to their shuffle, until the pages thread caches them.
    pub(super) filtered: keep::Filtered,
    pub(super) decode_threads: usize,
    pub(super) parallel_decode_min: usize,
}

impl Core {
    /// # Panics
    /// For an id this reader did not hand out (a programming error of the tree).
    pub(super) fn store(&self, array: ArrayId) -> &dyn ChunkStore {
        match self.stores.get(array.index()) {
            Some(s) => s.as_ref(),
            None => panic!("reader: no array {}", array.0),
        }
    }

    /// The version of `array` reads start from now ([`ChunkStore::pin`]).
    pub(super) fn pinned(&self, array: ArrayId) -> Arc<dyn ChunkStore> {
        let Some(store) = self.stores.get(array.index()) else {
            panic!("reader: no array {}", array.0);
        };
        store.pin().unwrap_or_else(|| store.clone())
    }

    /// The key of chunk `id` as its store is now.
    pub(super) fn current_key(&self, id: ChunkId) -> ChunkKey {
        ChunkKey {
            id,
            stamp: self.store(id.array).stamp(id.index),
        }
    }

    /// The whole decompressed chunk, from the cache or decoded once. `split`: decode a large
    /// chunk on several threads (a reader waits for it); prefetch threads decode alone.
    pub(super) fn chunk(&self, at: &At<'_>, split: bool) -> Result<Bytes, ContainerError> {
        self.cache.get_or_load(at.key, || self.decode(at, split))
    }
}
