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

mod access;
pub mod append;
mod decode;
pub mod gather;
mod keep;
pub mod live;
mod partial;
mod pieces;
mod plan;
mod prefetch;
mod prints;
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
pub use live::{Change, LiveArray};
pub use pieces::Pieces;
pub use plan::Plan;
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

/// One chunk of one version of a store, as the decoders take it.
#[derive(Clone, Copy)]
struct At<'a> {
    store: &'a dyn ChunkStore,
    key: ChunkKey,
}

impl<'a> At<'a> {
    fn new(store: &'a dyn ChunkStore, id: ChunkId) -> At<'a> {
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
type BlockKey = (ChunkKey, usize);

/// Largest read served by a range decode. Kernel readahead of a sequential scan arrives as
/// 128 KiB+ requests, possibly out of order across worker threads; only small reads are
/// treated as random access.
pub const RANGE_READ_MAX: usize = 64 * 1024;

/// A chunk streamed and evicted during this many of the latest loads of whole chunks is not
/// decoded ahead again ([`ChunkCache::streamed_lately`]): a scan has just read it.
const LATELY: u64 = 4;

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

/// The state prefetch threads share with readers.
#[derive(Debug)]
struct Core {
    /// Per array; arrays are added while mounted (a collection leaf opened on first access).
    stores: AppendVec<Arc<dyn ChunkStore>>,
    /// Decompressed chunks.
    cache: ChunkCache<ChunkKey>,
    /// Compressed chunks kept for range decodes: a random small read must not re-read a
    /// whole compressed chunk from the source each time.
    compressed: ChunkCache<ChunkKey>,
    /// Decoded blocks of chunks read at random in small pieces.
    blocks: ChunkCache<BlockKey>,
    /// The 4 KiB pages small random reads asked for, cut from the blocks decoded for them.
    pages: ChunkCache<BlockKey>,
    /// Bumped by every invalidation before it drops pages (see `small.rs`).
    page_gen: AtomicU64,
    /// Page copies handed to the pages thread, and made (`keep.rs`).
    pages_queued: AtomicU64,
    pages_done: AtomicU64,
    /// Block sizes of the chunks `blocks` has seen (0: not worth caching by block).
    block_sizes: Mutex<HashMap<ChunkKey, usize>>,
    /// Headers and block-start tables of the chunks small reads read in part.
    layouts: partial::Layouts,
    /// Blocks small reads decoded up to their shuffle, until the pages thread caches them.
    filtered: keep::Filtered,
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

    /// The version of `array` reads start from now ([`ChunkStore::pin`]).
    fn pinned(&self, array: ArrayId) -> Arc<dyn ChunkStore> {
        let Some(store) = self.stores.get(array.index()) else {
            panic!("reader: no array {}", array.0);
        };
        store.pin().unwrap_or_else(|| store.clone())
    }

    /// The key of chunk `id` as its store is now.
    fn current_key(&self, id: ChunkId) -> ChunkKey {
        ChunkKey {
            id,
            stamp: self.store(id.array).stamp(id.index),
        }
    }

    /// The whole decompressed chunk, from the cache or decoded once. `split`: decode a large
    /// chunk on several threads (a reader waits for it); prefetch threads decode alone.
    fn chunk(&self, at: &At<'_>, split: bool) -> Result<Bytes, ContainerError> {
        self.cache.get_or_load(at.key, || self.decode(at, split))
    }

    /// A prefetch of a whole chunk of the store as it is now, kept ahead of its reader
    /// ([`ChunkCache::load_ahead`]).
    fn chunk_ahead(&self, id: ChunkId) -> Result<Bytes, ContainerError> {
        let store = self.pinned(id.array);
        let at = At::new(store.as_ref(), id);
        if self.cache.contains_or_loading(&at.key) || self.cache.streamed_lately(&at.key, LATELY) {
            return Ok(Bytes::default());
        }
        self.cache.load_ahead(at.key, || self.decode(&at, false))
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

    /// Asks the prefetch threads to decode, beside the caller, the blocks of version `store`
    /// that the byte positions `wants` (chunk, offset in it) fall in: at most `max` blocks
    /// that are neither cached nor loading, never the block of `own` (when given: the one the
    /// caller decodes itself). What a page fault asks for the pages it will offer next, so that
    /// their blocks decode on the other core while the fault's own block decodes on its
    /// thread. Nothing without prefetch threads. Returns whether every want was looked at
    /// and its block asked for (`false`: `max` blocks were asked for before the last, or the
    /// prefetch queue was full and dropped one), so that a caller remembering what it asked
    /// asks again for a range that was not taken whole.
    pub fn prefetch_blocks(
        &self,
        store: &Arc<dyn ChunkStore>,
        own: Option<(ChunkId, usize)>,
        wants: impl IntoIterator<Item = (ChunkId, usize)>,
        max: usize,
    ) -> bool {
        let Some(p) = &self.prefetch else {
            return true;
        };
        let core = &self.core;
        // A chunk's key, block size and size, looked up once for the wants in a row that lie
        // in it (a mapped scan's come a page at a time: thousands per fault).
        type Geometry = (ChunkKey, usize, usize);
        let mut chunk: Option<(ChunkId, Option<Geometry>)> = None;
        let mut block = |(id, offset): (ChunkId, usize)| -> Option<(ChunkKey, usize)> {
            let (key, bs, nbytes) = match chunk {
                Some((c, geometry)) if c == id => geometry,
                _ => {
                    let at = At::new(store.as_ref(), id);
                    let geometry = store
                        .chunk_nbytes(id.index)
                        .ok()
                        .map(|n| (at.key, core.block_size_for_cache(&at, n), n));
                    chunk = Some((id, geometry));
                    geometry
                }
            }?;
            (bs > 0 && offset < nbytes).then(|| (key, offset / bs))
        };
        let own = own.and_then(&mut block);
        let mut asked: Vec<(ChunkKey, usize)> = Vec::new();
        let mut latest = None;
        let mut whole = true;
        for (id, offset) in wants {
            if asked.len() >= max {
                return false;
            }
            let Some(b) = block((id, offset)) else {
                continue;
            };
            // Wants in a row in one block: looked at once.
            if latest.replace(b) == Some(b) {
                continue;
            }
            if Some(b) == own
                || asked.contains(&b)
                || core.cache.contains_or_loading(&b.0)
                || core.blocks.contains_or_loading(&b)
            {
                continue;
            }
            asked.push(b);
            if !p.request_block(store.clone(), id, offset, b) {
                // Dropped (the queue is full): this range was not asked for whole.
                whole = false;
            }
        }
        whole
    }

    /// Asks the prefetch threads for the chunks after `id` (whose size is `nbytes`), or
    /// before it when the reads of its array go down, or none when they jump around: the
    /// policy of chunk files, read one after the other. `starts`: this read is the first of
    /// the chunk (a step of the scan).
    pub fn prefetch_after(&self, id: ChunkId, nbytes: usize, starts: bool) {
        let depth = self.prefetch_depth(nbytes);
        if depth == 0 {
            return;
        }
        let at = |index| ChunkId::new(id.array, index);
        let index = id.index;
        match self.scans.way(id, starts) {
            None => {}
            Some(true) => self.prefetch((index.saturating_sub(depth)..index).rev().map(at)),
            Some(false) => {
                let end = (index + 1 + depth).min(self.nchunks(id.array));
                self.prefetch((index + 1..end).map(at));
            }
        }
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
            let key = self.core.current_key(id);
            let cache = &self.core.cache;
            if !cache.contains_or_loading(&key) && !cache.streamed_lately(&key, LATELY) {
                p.request(id);
            }
        }
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
