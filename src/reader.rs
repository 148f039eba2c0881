//! The chunk reader: decoded bytes of any window of any chunk of the mounted arrays, through
//! one set of caches shared by every file that shows those chunks (`data/N.bin`,
//! `array.npy`). It knows nothing of inodes, handles or files: it works on [`ChunkId`]s.
//!
//! ```text
//! ChunkReader::read(ChunkId, window, ReadHint)
//!   -> plan::plan()          which path: cached chunk, pages, block, range decode, whole chunk
//!   -> small::*              decoded blocks and 4 KiB pages of small random reads
//!   -> decode::*             whole-chunk decodes (split over threads), range decodes
//!   -> partial::*            only the compressed bytes a range decode needs
//!   -> prefetch::Prefetcher  whole chunks decoded ahead of a scan
//! ```
//!
//! Subtleties and who handles them:
//! - **One decode per chunk.** Every cache is single-flight ([`ChunkCache`]); a reader that
//!   arrives while its chunk is being prefetched waits for that decode.
//! - **Invalidation races.** [`ChunkReader::forget`] drops blocks, then bumps a generation
//!   counter, then drops pages and whole chunks, joining loads in flight; a small read that
//!   cut pages from a block it got before the bump takes them back (`small.rs`).
//! - **Scans.** A chunk one reader streamed from start to end is recycled first
//!   ([`ChunkCache::streamed`]); prefetch goes no deeper than the cache holds beside the chunk
//!   being read. What to prefetch is the caller's choice ([`ChunkReader::prefetch`]): chunk
//!   files ask for the next chunks, `array.npy` for the next slab.
//! - **Errors** name the source and the chunk; nothing is cached for a chunk that fails, and a
//!   decoder panic is an error for that chunk only.
//!
//! Memory: the decoded-chunk cache takes 9/16 of `cache_size`; compressed chunks kept for range
//! decodes a quarter (at most 64 MiB), decoded blocks an eighth (at most 32 MiB), 4 KiB pages
//! a sixteenth (at most 16 MiB).

pub mod append;
mod decode;
pub mod live;
mod partial;
mod plan;
mod prefetch;
mod small;
pub mod store;

use std::collections::HashMap;
use std::ops::{Deref, Range};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use parking_lot::Mutex;

use crate::cache::ChunkCache;
pub use crate::cache::{Bytes, CacheStats};
use crate::container::ContainerError;

pub use append::AppendVec;
pub use live::{ChunkEdit, Committer, LiveArray};
pub use plan::{Pattern, Plan};
pub use store::ChunkStore;

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

/// One block of one chunk (the key of the block and page caches: a block or page number).
type BlockKey = (ChunkId, usize);

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
}

impl Deref for ReadData {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            ReadData::Chunk(b, r) => &b[r.clone()],
            ReadData::Fixed(b, r) => &b[r.clone()],
            ReadData::Owned(v) => v,
        }
    }
}

/// What the caller knows of the access a read belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadHint {
    /// How the read continues the earlier reads of its handle.
    pub pattern: Pattern,
    /// Every read of the handle so far continued the previous one from offset 0: reaching the
    /// chunk's end streams it once (when the caller also confirms it is the sole reader).
    pub streaming: bool,
    /// Bytes of the handle's current stream, this read included: reads that continue one
    /// another (requests of one large read served out of order count) and cover their span
    /// about once. A scan grows it without end; an mmap reader's page faults and the
    /// readahead around them start a new stream at every jump.
    pub stream: u64,
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

/// The state prefetch threads share with readers.
#[derive(Debug)]
struct Core {
    /// Per array; arrays are added while mounted (a collection leaf opened on first access).
    stores: AppendVec<Arc<dyn ChunkStore>>,
    /// Decompressed chunks.
    cache: ChunkCache<ChunkId>,
    /// Compressed chunks kept for range decodes: a random small read must not re-read a
    /// whole compressed chunk from the source each time.
    compressed: ChunkCache<ChunkId>,
    /// Decoded blocks of chunks read at random in small pieces.
    blocks: ChunkCache<BlockKey>,
    /// The 4 KiB pages small random reads asked for, cut from the blocks decoded for them.
    pages: ChunkCache<BlockKey>,
    /// Bumped by every invalidation before it drops pages (see `small.rs`).
    page_gen: AtomicU64,
    /// Block sizes of the chunks `blocks` has seen (0: not worth caching by block).
    block_sizes: Mutex<HashMap<ChunkId, usize>>,
    decode_threads: usize,
    parallel_decode_min: usize,
}

impl Core {
    /// # Panics
    /// For an id this reader did not hand out (a programming error of the tree).
    fn store(&self, array: ArrayId) -> &dyn ChunkStore {
        match self.stores.get(array.index()) {
            Some(s) => s.as_ref(),
            None => panic!("reader: no array {}", array.0),
        }
    }

    /// The whole decompressed chunk, from the cache or decoded once. `split`: decode a large
    /// chunk on several threads (a reader waits for it); prefetch threads decode alone.
    fn chunk(&self, id: ChunkId, split: bool) -> Result<Bytes, ContainerError> {
        self.cache.get_or_load(id, || self.decode(id, split))
    }

    /// A prefetch of a whole chunk, kept ahead of its reader ([`ChunkCache::load_ahead`]).
    fn chunk_ahead(&self, id: ChunkId) -> Result<Bytes, ContainerError> {
        self.cache.load_ahead(id, || self.decode(id, false))
    }
}

/// Decoded chunk bytes for the tree: caches, prefetch threads and the read policy.
#[derive(Debug)]
pub struct ChunkReader {
    core: Arc<Core>,
    prefetch: Option<prefetch::Prefetcher>,
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
            block_sizes: Mutex::new(HashMap::new()),
            decode_threads: options.decode_threads,
            parallel_decode_min: options.parallel_decode_min,
        });
        let prefetch = (options.prefetch_chunks > 0 && options.prefetch_threads > 0)
            .then(|| prefetch::Prefetcher::start(core.clone(), options.prefetch_threads));
        ChunkReader {
            core,
            prefetch,
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

    /// The whole decoded chunk `id` (cached; a large one decoded on several threads).
    ///
    /// # Errors
    /// When the chunk cannot be read or decoded.
    pub fn chunk(&self, id: ChunkId) -> Result<Bytes, ContainerError> {
        self.core.chunk(id, true)
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
        let core = &self.core;
        let nbytes = self.chunk_nbytes(id)?;
        let r = window(nbytes, offset, size);
        if r.is_empty() {
            return Ok(ReadData::Owned(Vec::new()));
        }
        let cached = core.cache.get(&id);
        let plan = plan::plan(
            hint.pattern,
            r.clone(),
            nbytes,
            self.options.range_factor,
            cached.is_some() || core.cache.contains_or_loading(&id),
        );
        match plan {
            Plan::Small => {
                if let Some(hit) = self.small_read(id, nbytes, r.clone())? {
                    return Ok(hit);
                }
                let out = core.decode_range(id, r.start, vec![0u8; r.len()])?;
                Ok(ReadData::Owned(out))
            }
            Plan::Whole | Plan::WholeNoPrefetch => {
                // Prefetch only once this chunk is decoded: the reader is waiting for it, and
                // prefetches started earlier would take cores from its decode.
                let bytes = match cached {
                    Some(b) => b,
                    None => core.chunk(id, true)?,
                };
                if plan == Plan::Whole {
                    self.prefetch_after(id, nbytes);
                }
                if hint.streaming && r.end == nbytes && sole_reader() {
                    core.cache.streamed(&id);
                }
                Ok(ReadData::Chunk(bytes, r))
            }
        }
    }

    /// Decoded bytes of chunk `id` around byte `offset`, and where they start in the chunk:
    /// the whole chunk when it is cached or being loaded; else the block `offset` falls in
    /// (decoded once into the block cache) when the chunk has two blocks or more; else the
    /// whole chunk. What a scattered read of many small runs (an `array.npy` window) takes
    /// for each run, so that it decodes only the blocks it touches.
    ///
    /// # Errors
    /// When the chunk cannot be read or decoded.
    pub fn covering(&self, id: ChunkId, offset: usize) -> Result<(Bytes, usize), ContainerError> {
        let core = &self.core;
        if let Some(bytes) = core.cache.get(&id) {
            return Ok((bytes, 0));
        }
        if !core.cache.contains_or_loading(&id) {
            let nbytes = self.chunk_nbytes(id)?;
            let bs = core.block_size_for_cache(id, nbytes);
            if bs > 0 && offset < nbytes {
                let start = offset / bs * bs;
                let len = bs.min(nbytes - start);
                let block = core.blocks.get_or_load((id, offset / bs), || {
                    core.decode_range(id, start, core.blocks.buffer(len))
                })?;
                if block.len() == len {
                    return Ok((block, start));
                }
            }
        }
        Ok((core.chunk(id, true)?, 0))
    }

    /// As [`ChunkReader::covering`], but only what is cached already (the whole chunk, or the
    /// decoded block `offset` falls in): `None` rather than a decode.
    pub fn covering_cached(&self, id: ChunkId, offset: usize) -> Option<(Bytes, usize)> {
        let core = &self.core;
        if let Some(bytes) = core.cache.get(&id) {
            return Some((bytes, 0));
        }
        let bs = *core.block_sizes.lock().get(&id)?;
        let block = core.blocks.get(&(id, offset.checked_div(bs)?))?;
        Some((block, offset / bs * bs))
    }

    /// Asks the prefetch threads for the chunks after `id` (whose size is `nbytes`): the
    /// policy of chunk files, read one after the other.
    pub fn prefetch_after(&self, id: ChunkId, nbytes: usize) {
        let nchunks = self.nchunks(id.array);
        let depth = self.prefetch_depth(nbytes);
        let next = id.index + 1..(id.index + 1 + depth).min(nchunks);
        self.prefetch(next.map(|index| ChunkId::new(id.array, index)));
    }

    /// How many chunks of `nbytes` a prefetch may ask for: no deeper than the cache holds next
    /// to the chunk being read (a prefetched chunk evicted before its read is decoded twice),
    /// none when it holds only that chunk, at most `prefetch_chunks`.
    pub fn prefetch_depth(&self, nbytes: usize) -> usize {
        if self.prefetch.is_none() {
            return 0;
        }
        let fits = (self.core.cache.budget() / nbytes.max(1)).saturating_sub(1);
        self.options.prefetch_chunks.min(fits)
    }

    /// Asks the prefetch threads to decode `ids` into the cache soon (advice: a full queue
    /// drops requests; chunks cached or loading are skipped).
    pub fn prefetch(&self, ids: impl IntoIterator<Item = ChunkId>) {
        let Some(p) = &self.prefetch else { return };
        for id in ids {
            if !self.core.cache.contains_or_loading(&id) {
                p.request(id);
            }
        }
    }

    /// Drops everything cached of the chunks `which` selects, joining loads in flight (see
    /// [`ChunkCache::purge_where`]). Loads that start later read the swapped-in source, since
    /// loaders fetch it inside their closures. Pages are dropped after the blocks they are cut
    /// from, behind a generation bump (see `small.rs`).
    pub fn forget(&self, which: impl Fn(ChunkId) -> bool) {
        let core = &self.core;
        core.block_sizes.lock().retain(|&id, _| !which(id));
        core.blocks.purge_where(|&(id, _)| which(id));
        core.page_gen
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        core.pages.purge_where(|&(id, _)| which(id));
        for cache in [&core.cache, &core.compressed] {
            cache.purge_where(|&id| which(id));
        }
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
