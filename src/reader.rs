//! The chunk reader: decoded bytes of any window of any chunk of the mounted arrays, through
//! one set of caches shared by every file that shows those chunks (`data/N.bin`,
//! `array.npy`). It knows nothing of inodes, handles or files: it works on [`ChunkId`]s.
//!
//! ```text
//! ChunkReader::read(ChunkId, window, ReadHint)   (the hint: access::Access, one per handle)
//!   -> plan::plan()          which path: cached chunk, pages, block, range decode, whole chunk
//!   -> small::*              decoded blocks and 4 KiB pages of small random reads
//!   -> keep::*               those pages copied into the page cache off the read's path,
//!                            and blocks small reads decoded up to their shuffle unshuffled
//!                            into the block cache there
//!   -> decode::*             whole-chunk decodes (split over threads), range decodes
//!   -> partial::*            only the compressed bytes a range decode needs (read first by
//!                            small reads, with each chunk's header and block-start table kept;
//!                            window faults take them from the source's mapping)
//!   -> prefetch::Prefetcher  whole chunks decoded ahead of a scan
//! ChunkReader::band_read(stream, window)       (a read-only descriptor's scan of an N-dim
//!   -> bands::*              `array.npy`: a row of blocks at a time, decoded ahead)
//! ```
//!
//! Subtleties and who handles them:
//! - **One decode per chunk.** Every cache is single-flight ([`ChunkCache`]); a reader that
//!   arrives while its chunk is being prefetched waits for that decode.
//! - **Versions.** Every cache is keyed by [`ChunkKey`]: the chunk and its stamp in the store
//!   version read ([`ChunkStore::stamp`]). A descriptor reads through the version it pinned
//!   ([`ChunkReader::read_in`], [`Snapshot`], `version.rs`), so a commit or another writer
//!   never gives it bytes of another version, and changed chunks never hit old copies. After
//!   another writer's change a chunk keeps its stamp only when its compressed bytes still
//!   hash to the fingerprint taken when it was read whole (`prints.rs`).
//! - **Invalidation races.** [`ChunkReader::forget`] drops blocks, then bumps a generation
//!   counter, then drops pages and whole chunks, joining loads in flight; a small read that
//!   cut pages from a block it got before the bump takes them back, and the pages thread
//!   keeps none for a read that saw an older generation (`small.rs`, `keep.rs`). Dropping is
//!   for memory only: correctness comes from the stamps.
//! - **Scans.** A chunk one reader streamed from start to end is recycled first
//!   ([`ChunkCache::streamed`]); prefetch goes no deeper than the cache holds beside the chunk
//!   being read. What to prefetch is the caller's choice ([`ChunkReader::prefetch`]): chunk
//!   files ask for the next chunks, `array.npy` for the next slab.
//! - **Errors** name the source and the chunk; nothing is cached for a chunk that fails, and a
//!   decoder panic is an error for that chunk only.
//!
//! Memory: the decoded-chunk cache takes 9/16 of `cache_size`; compressed chunks kept for range
//! decodes a quarter (at most 64 MiB), decoded blocks an eighth (at most 32 MiB), 4 KiB pages
//! a sixteenth (at most 16 MiB); chunk headers and block-start tables at most 4 MiB; blocks
//! decoded up to their shuffle waiting for the pages thread at most 17 of 1 MiB, and 4 MiB of
//! their spare buffers.
//!
//! The parts: this file holds the ids and keys ([`ArrayId`], [`ChunkId`], [`ChunkKey`]), the
//! options, and the [`ChunkReader`]: its reads, what they find cached, and invalidation;
//! `shared.rs` the state readers and prefetch threads share (`Core`: the stores, the caches);
//! `prefetch.rs` the prefetch threads and what readers ask of them (chunks ahead of a scan,
//! blocks beside a page fault, bands of a scan); the read paths are those of the diagram
//! above; `gather.rs` and `pieces.rs` assemble a file from many chunks, `bands.rs` a scan of
//! one a band at a time; `store.rs` the stores, `version.rs` and
//! `prints.rs` their versions, `live.rs` and `swap.rs` live arrays and the swappable cell,
//! `append.rs` the vector arrays are added to while mounted.

mod access;
pub mod append;
mod bands;
mod decode;
pub mod gather;
mod keep;
pub mod live;
mod partial;
mod pieces;
mod plan;
mod prefetch;
mod prints;
mod shared;
mod small;
pub mod store;
mod swap;
mod version;

use std::collections::HashMap;
use std::ops::{Deref, Range};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use parking_lot::Mutex;

use crate::cache::ChunkCache;
pub use crate::cache::{Bytes, CacheStats};
use crate::container::ContainerError;
pub use crate::mem::{PAGE, Reused};

pub use access::{Access, Pattern, ReadHint};
pub use append::AppendVec;
pub use bands::BandStream;
pub use live::{Change, LiveArray};
pub use pieces::Pieces;
pub use plan::Plan;
use shared::{At, BlockKey, Core};
pub use store::ChunkStore;
pub use swap::Swap;
pub use version::Snapshot;

/// One array of a mount (a frame, a carray, a ctable column): an index into the reader's
/// stores, stable for the life of the mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArrayId(pub u32);

impl ArrayId {
    /// The id as an index into per-array vectors.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One chunk of one array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkId {
    /// The array.
    pub array: ArrayId,
    /// The chunk's position in the array.
    pub index: usize,
}

impl ChunkId {
    /// Chunk `index` of `array`.
    pub fn new(array: ArrayId, index: usize) -> ChunkId {
        ChunkId { array, index }
    }
}

/// One version of one chunk: the key of every cache. `stamp` is the store's
/// [`ChunkStore::stamp`]: equal stamps of one chunk mean equal bytes, so a commit or a change
/// by another writer gives the changed chunks new stamps and leaves the others' cached copies
/// in use, and a descriptor that pinned an older version keeps hitting that version's copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkKey {
    /// The chunk.
    pub id: ChunkId,
    /// Its version.
    pub stamp: u64,
}

/// Largest read served by a range decode. Kernel readahead of a sequential scan arrives as
/// 128 KiB+ requests, possibly out of order across worker threads; only small reads are
/// treated as random access.
pub const RANGE_READ_MAX: usize = 64 * 1024;

/// Bytes a read returns: a window of a cached chunk, of a generated file, or bytes made for
/// this read only.
#[derive(Debug)]
pub enum ReadData {
    /// A window of a cached decompressed chunk (or block, or page).
    Chunk(Bytes, Range<usize>),
    /// A window of a generated file's content.
    Fixed(Arc<[u8]>, Range<usize>),
    /// Bytes made for this read only (range decode, assembled windows), or nothing (EOF).
    Owned(Vec<u8>),
    /// Bytes assembled for this read in a pooled buffer ([`Reused`]).
    Reused(Reused),
}

impl Deref for ReadData {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            ReadData::Chunk(b, r) => &b[r.clone()],
            ReadData::Fixed(b, r) => &b[r.clone()],
            ReadData::Owned(v) => v,
            ReadData::Reused(v) => v,
        }
    }
}

/// Tuning knobs of a [`ChunkReader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderOptions {
    /// Total byte budget of the caches (split as the module doc says).
    pub cache_size: usize,
    /// How many chunks ahead a sequential scan of a chunk file prefetches (0: none).
    pub prefetch_chunks: usize,
    /// Background threads that run prefetches.
    pub prefetch_threads: usize,
    /// A cold read decodes only the blocks it overlaps when the chunk is more than this many
    /// times larger than the read, the read is at most [`RANGE_READ_MAX`] bytes, and it is
    /// not part of a sequential scan.
    pub range_factor: usize,
    /// Threads that decode the blocks of one large chunk in parallel (1 = no splitting).
    pub decode_threads: usize,
    /// Chunks of at least this many bytes are decoded by `decode_threads` threads.
    pub parallel_decode_min: usize,
}

impl Default for ReaderOptions {
    /// A mount's: a 256 MiB budget (`cache_size=`, the one knob the command line sets), four
    /// chunks prefetched on two threads, range reads of chunks 4 times the read, up to 4
    /// threads (at most the cores) decoding chunks of 1 MiB or more.
    fn default() -> Self {
        ReaderOptions {
            cache_size: 256 << 20,
            prefetch_chunks: 4,
            prefetch_threads: 2,
            range_factor: 4,
            decode_threads: std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
            parallel_decode_min: 1 << 20,
        }
    }
}

/// Decoded chunk bytes for the tree: caches, prefetch threads and the read policy.
#[derive(Debug)]
pub struct ChunkReader {
    core: Arc<Core>,
    prefetch: Option<prefetch::Prefetcher>,
    /// Whether and which way each array's chunk files are being scanned.
    scans: prefetch::Scans,
    options: ReaderOptions,
}

impl ChunkReader {
    /// A reader over `stores` (the array with id `i` is `stores[i]`).
    pub fn new(stores: Vec<Arc<dyn ChunkStore>>, options: ReaderOptions) -> ChunkReader {
        let compressed_budget = (options.cache_size / 4).min(64 << 20);
        let block_budget = (options.cache_size / 8).min(32 << 20);
        let page_budget = (options.cache_size / 16).min(16 << 20);
        let core = Arc::new(Core {
            stores: stores.into_iter().collect(),
            cache: ChunkCache::new(
                options.cache_size - compressed_budget - block_budget - page_budget,
            ),
            compressed: ChunkCache::new(compressed_budget),
            blocks: ChunkCache::new(block_budget),
            pages: ChunkCache::new(page_budget),
            page_gen: AtomicU64::new(0),
            pages_queued: AtomicU64::new(0),
            pages_done: AtomicU64::new(0),
            bands_decoded: AtomicU64::new(0),
            block_sizes: Mutex::new(HashMap::new()),
            layouts: partial::Layouts::default(),
            filtered: keep::Filtered::default(),
            decode_threads: options.decode_threads,
            parallel_decode_min: options.parallel_decode_min,
        });
        let prefetch = (options.prefetch_chunks > 0 && options.prefetch_threads > 0)
            .then(|| prefetch::Prefetcher::start(core.clone(), options.prefetch_threads));
        ChunkReader {
            core,
            prefetch,
            scans: Default::default(),
            options,
        }
    }

    /// Number of arrays.
    pub fn arrays(&self) -> usize {
        self.core.stores.len()
    }

    /// Adds an array (a collection leaf opened while mounted); returns its id, the next
    /// after every existing one.
    pub fn add(&self, store: Arc<dyn ChunkStore>) -> ArrayId {
        ArrayId(u32::try_from(self.core.stores.push(store)).unwrap_or(u32::MAX))
    }

    /// The store of `array`.
    pub fn store(&self, array: ArrayId) -> &dyn ChunkStore {
        self.core.store(array)
    }

    /// The version of `array` as it is now, fixed: reads through it see that version only
    /// (what a descriptor pins at open, see [`ChunkStore::pin`]).
    pub fn pinned(&self, array: ArrayId) -> Arc<dyn ChunkStore> {
        self.core.pinned(array)
    }

    /// Number of chunks of `array` now.
    pub fn nchunks(&self, array: ArrayId) -> usize {
        self.core.store(array).nchunks()
    }

    /// Uncompressed size of chunk `id`.
    ///
    /// # Errors
    /// When the size cannot be read.
    pub fn chunk_nbytes(&self, id: ChunkId) -> Result<usize, ContainerError> {
        self.core.store(id.array).chunk_nbytes(id.index)
    }

    /// Whether a chunk of `nbytes` decodes to more than the decoded-chunk cache holds. Such a
    /// chunk (a 2 GiB chunk of zeros takes 32 bytes in a frame) is never decoded whole by a
    /// read: [`ChunkReader::read`] decodes only the blocks each read overlaps, so a mount's
    /// memory stays within its cache budget whatever sizes a source declares.
    pub fn over_budget(&self, nbytes: usize) -> bool {
        nbytes > self.core.cache.budget()
    }

    /// The whole decoded chunk `id` (cached; a large one decoded on several threads). Callers
    /// that only read must check [`ChunkReader::over_budget`] first.
    ///
    /// # Errors
    /// When the chunk cannot be read or decoded.
    pub fn chunk(&self, id: ChunkId) -> Result<Bytes, ContainerError> {
        self.chunk_in(self.core.pinned(id.array).as_ref(), id)
    }

    /// The whole decoded chunk `id` of `store`, a version of its array ([`ChunkReader::pinned`]).
    ///
    /// # Errors
    /// When the chunk cannot be read or decoded.
    pub fn chunk_in(&self, store: &dyn ChunkStore, id: ChunkId) -> Result<Bytes, ContainerError> {
        self.core.chunk(&At::new(store, id), true)
    }

    /// Bytes `[offset, offset + size)` of chunk `id` (fewer only at its end). `sole_reader`
    /// is asked only when a streaming read reaches the chunk's end: whether no other handle
    /// may still read it (then the chunk is recycled first).
    ///
    /// # Errors
    /// When the chunk cannot be read or decoded.
    pub fn read(
        &self,
        id: ChunkId,
        offset: u64,
        size: u32,
        hint: ReadHint,
        sole_reader: impl FnOnce() -> bool,
    ) -> Result<ReadData, ContainerError> {
        let store = self.core.pinned(id.array);
        self.read_in(store.as_ref(), id, offset, size, hint, sole_reader)
    }

    /// [`ChunkReader::read`] of the version `store` of the array ([`ChunkReader::pinned`]):
    /// the bytes that version holds, or an error, never another version's.
    ///
    /// # Errors
    /// When the chunk cannot be read or decoded.
    pub fn read_in(
        &self,
        store: &dyn ChunkStore,
        id: ChunkId,
        offset: u64,
        size: u32,
        hint: ReadHint,
        sole_reader: impl FnOnce() -> bool,
    ) -> Result<ReadData, ContainerError> {
        let core = &self.core;
        let at = At::new(store, id);
        let key = at.key;
        let nbytes = store.chunk_nbytes(id.index)?;
        let r = window(nbytes, offset, size);
        if r.is_empty() {
            return Ok(ReadData::Owned(Vec::new()));
        }
        let cached = core.cache.get(&key);
        let plan = if self.over_budget(nbytes) {
            Plan::Small
        } else {
            plan::plan(
                hint.pattern,
                r.clone(),
                nbytes,
                self.options.range_factor,
                cached.is_some() || core.cache.contains_or_loading(&key),
            )
        };
        match plan {
            Plan::Small => {
                if let Some(hit) = self.small_read(&at, nbytes, r.clone())? {
                    return Ok(hit);
                }
                let out = core.decode_range(&at, r.start, vec![0u8; r.len()], true)?;
                Ok(ReadData::Owned(out))
            }
            Plan::Whole | Plan::WholeNoPrefetch => {
                // Prefetch only once this chunk is decoded: the reader is waiting for it, and
                // prefetches started earlier would take cores from its decode.
                let bytes = match cached {
                    Some(b) => b,
                    None => core.chunk(&at, true)?,
                };
                if plan == Plan::Whole {
                    self.prefetch_after(id, nbytes, r.start == 0);
                }
                if hint.streaming && r.end == nbytes && sole_reader() {
                    core.cache.streamed(&key);
                }
                // A size read from a header another writer changed must not cut past the
                // bytes decoded (a read then fails its version check, or is short).
                let r = r.start.min(bytes.len())..r.end.min(bytes.len());
                Ok(ReadData::Chunk(bytes, r))
            }
        }
    }

    /// Decoded bytes of chunk `id` of version `store` around byte `offset`, and where they
    /// start in the chunk:
    /// the whole chunk when it is cached or being loaded; else the block `offset` falls in
    /// (decoded once into the block cache) when the chunk has two blocks or more; else the
    /// whole chunk. What a scattered read of many small runs (an `array.npy` window) takes
    /// for each run, so that it decodes only the blocks it touches.
    ///
    /// # Errors
    /// When the chunk cannot be read or decoded.
    pub fn covering(
        &self,
        store: &dyn ChunkStore,
        id: ChunkId,
        offset: usize,
    ) -> Result<(Bytes, usize), ContainerError> {
        let core = &self.core;
        let at = At::new(store, id);
        let key = at.key;
        if let Some(bytes) = core.cache.get(&key) {
            return Ok((bytes, 0));
        }
        if !core.cache.contains_or_loading(&key) {
            let nbytes = store.chunk_nbytes(id.index)?;
            if self.over_budget(nbytes) {
                // Never the whole chunk: the bytes from `offset`, as a small read takes them.
                let len = nbytes.saturating_sub(offset).min(RANGE_READ_MAX);
                let got = self.read_in(
                    store,
                    id,
                    offset as u64,
                    len as u32,
                    ReadHint::RANDOM,
                    || false,
                )?;
                return Ok((Arc::new(got.to_vec()), offset));
            }
            if let Some(piece) = core.block_of(&at, nbytes, offset, false)? {
                return Ok(piece);
            }
        }
        Ok((core.chunk(&at, true)?, 0))
    }

    /// As [`ChunkReader::covering`], but only what is cached already (the whole chunk, or the
    /// decoded block `offset` falls in): `None` rather than a decode.
    pub fn covering_cached(
        &self,
        store: &dyn ChunkStore,
        id: ChunkId,
        offset: usize,
    ) -> Option<(Bytes, usize)> {
        let core = &self.core;
        let key = At::new(store, id).key;
        if let Some(bytes) = core.cache.get(&key) {
            return Some((bytes, 0));
        }
        let bs = *core.block_sizes.lock().get(&key)?;
        let j = offset.checked_div(bs)?;
        // A block a small read decoded up to its shuffle counts as cached (`keep.rs`).
        let block = core
            .blocks
            .get(&(key, j))
            .or_else(|| keep::Filtered::cache_now(core, (key, j)))?;
        Some((block, offset / bs * bs))
    }

    /// Drops every cached version of the chunks `which` selects, joining loads in flight (see
    /// [`ChunkCache::purge_where`]): memory no current reader will ask for. Correctness does
    /// not depend on it: versions are keyed by stamp ([`ChunkKey`]), so a changed chunk is
    /// never served from a copy of its old bytes. Pages are dropped after the blocks they are
    /// cut from, behind a generation bump (see `small.rs`).
    pub fn forget(&self, which: impl Fn(ChunkId) -> bool) {
        self.forget_parts(&which);
        for cache in [&self.core.cache, &self.core.compressed] {
            cache.purge_where(|k| which(k.id));
        }
    }

    /// Drops the decoded blocks and pages (small reads' caches) of the chunks `which`
    /// selects, keeping whole chunks: after another writer's change, the parts of a chunk
    /// whose stamp was kept (`prints.rs`) may come from reads older than its fingerprint on a
    /// source whose reads are not checked (sparse frames, bcolz).
    pub fn forget_parts(&self, which: impl Fn(ChunkId) -> bool) {
        let core = &self.core;
        core.block_sizes.lock().retain(|k, _| !which(k.id));
        core.layouts.forget(&which);
        core.blocks.purge_where(|(k, _)| which(k.id));
        core.page_gen
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // Blocks the pages thread cached between the first purge and the bump.
        core.blocks.purge_where(|(k, _)| which(k.id));
        core.filtered.forget(|k| which(k.id));
        core.pages.purge_where(|(k, _)| which(k.id));
    }

    /// Counters of the chunk cache.
    pub fn cache_stats(&self) -> CacheStats {
        self.core.cache.stats()
    }

    /// Counters of the cache of decoded blocks (random small reads).
    pub fn block_cache_stats(&self) -> CacheStats {
        self.core.blocks.stats()
    }

    /// Counters of the cache of 4 KiB pages (random small reads).
    pub fn page_cache_stats(&self) -> CacheStats {
        self.core.pages.stats()
    }

    /// Bands of assembled files (`array.npy` scans) decoded so far, by readers and the
    /// prefetch threads: each band of a scan read in order is decoded once.
    pub fn bands_decoded(&self) -> u64 {
        self.core
            .bands_decoded
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes held by the chunk cache now.
    pub fn cache_bytes(&self) -> usize {
        self.core.cache.bytes()
    }

    /// Byte budget of the decoded-chunk cache.
    pub fn cache_budget(&self) -> usize {
        self.core.cache.budget()
    }
}

/// The intersection of `[offset, offset + size)` and `[0, len)` as a range of `usize`.
pub fn window(len: usize, offset: u64, size: u32) -> Range<usize> {
    let start = usize::try_from(offset).unwrap_or(usize::MAX).min(len);
    let end = start.saturating_add(size as usize).min(len);
    start..end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_clamps_to_file_end() {
        assert_eq!(window(10, 0, 4), 0..4);
        assert_eq!(window(10, 8, 4), 8..10);
        assert_eq!(window(10, 12, 4), 10..10);
        assert_eq!(window(10, u64::MAX, u32::MAX), 10..10);
    }
}
