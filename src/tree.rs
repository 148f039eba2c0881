//! The filesystem logic: the directory tree a mounted source shows, as an in-process API
//! (lookup, getattr, readdir, open, read, write, flush, release, statfs, ...) that tests drive without a kernel.
//!
//! This module knows nothing of fuser or the kernel protocol: it answers with b2fs-owned types
//! ([`Attr`], [`DirEntry`], [`StatFs`], [`TreeError`]) and [`crate::fuse`] translates. It does
//! not parse formats either: [`view`] asks [`crate::container`] for metadata and chunk bytes,
//! and the read path calls [`crate::codec`] to decode.
//!
//! What a mount looks like (see [`view`] for the rules):
//!
//! ```text
//! MOUNTPOINT/
//!   __attrs__             JSON: the frame's vlmeta / bcolz __attrs__
//!   meta/sizes            JSON: shape, nbytes, cbytes, nchunks
//!   meta/storage          JSON: dtype, chunkshape|chunklen, blockshape, typesize, chunksize, cparams
//!   meta/metalayers/NAME  JSON: one per fixed metalayer, decoded
//!   data/00000000.bin     chunk 0, decompressed
//! ```
//!
//! Subtleties and who handles them:
//! - **Stable inode numbers.** Assigned once by [`layout`]: root 1, fixed nodes next; chunk
//!   files are `base + index` per data directory, computed, never allocated.
//! - **readdir offsets.** Listings never change while mounted, so an entry's offset is its
//!   position (`.` is 0, `..` is 1, then children in order) and resuming at any offset a
//!   previous call returned is exact, whatever buffer size the caller had.
//! - **Reads at any offset and length** return exactly the reference bytes: whole-chunk decodes
//!   go through the shared [`ChunkCache`]; a small cold read inside a large chunk that is not
//!   part of a sequential scan decodes only the overlapping blocks (`decompress_range`).
//! - **Sequential scans** (a handle whose reads follow each other, or start at 0) prefetch the
//!   next chunks of the same data directory on background threads (`prefetch`).
//! - **A chunk that fails to decode** fails reads of that one file with
//!   [`TreeError::Container`] (EIO); nothing is cached for it and every other file keeps
//!   working.
//! - **Read-only or read-write** ([`TreeOptions::writable`]). Read-only: every change is
//!   [`TreeError::ReadOnly`] (EROFS). Read-write ([`mod@write`]): a chunk file or `__attrs__`
//!   opened for writing gets a buffer (the decompressed chunk, loaded on the first write);
//!   reads and sizes of that inode come from the buffer; fsync, every flush of a handle opened
//!   for writing, and its release commit it (compress with the chunks' own parameters,
//!   `container::write::commit`, reopen and swap the source, drop cached copies). Commits are
//!   serialised. Creating `data/<nchunks>.bin` appends, removing or truncating the last chunk
//!   to 0 removes it (1-D sources); everything else is refused with the errno of
//!   [`TreeError::errno`] (table: README, SEMANTICS).
//! - **ctables** ([`write::commit_table_chunk`]): a commit that changes a column's row count
//!   resizes every column; afterwards every column's source is reloaded. A writable tree with
//!   several data sets numbers each set's chunk files from its own base `SET_STRIDE` apart,
//!   so any column can gain chunk files. Opening a ctable read-write first trims columns
//!   longer than the first (a commit cut short by a crash).
//! - **Other writers**: a commit that finds the source changed on disk (ESTALE) reloads every
//!   source and drops cached chunks; the kernel keeps no cached pages from then on.
//! - **`> file` from a shell** opens with `O_TRUNC` (atomic, see the fuse adapter's init)
//!   and closes a duplicate descriptor before writing: a chunk emptied that way is not
//!   committed by a flush, only by fsync or the last close.

pub mod attr;
pub mod error;
pub mod events;
pub mod layout;
mod lazy;
mod names;
mod prefetch;
pub mod store;
pub mod view;
pub mod write;
pub mod xattr;

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::{Deref, Range};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::cache::{Bytes, CacheStats, ChunkCache};
use crate::codec::encode::Encoder;
use crate::codec::{self, CodecError};
use crate::container::ContainerError;
use write::{AttrsBuf, AttrsTarget, DirtyChunk, Pending, Source};

pub use attr::{Attr, DirEntry, EntryKind, StatFs};
pub use error::{TreeError, display_chain};
pub use layout::{Layout, Owner, ROOT_INO};
pub use store::ChunkStore;

use layout::{Node, NodeKind};

/// Preferred I/O size reported in `stat` (`st_blksize`): the largest FUSE request. `cat`,
/// `cp` and stdio size their buffers from it, and with direct I/O every `read()` is one round
/// trip to b2fs, so 1 MiB reads take an eighth of the round trips of 128 KiB ones.
const BLKSIZE: u32 = 1024 * 1024;
/// Longest name a lookup accepts.
const NAME_MAX: usize = 255;
/// Inode numbers of scratch files (editors' temp files in the mount root) start here, far
/// above any chunk file.
const SCRATCH_BASE: u64 = 1 << 62;
/// Chunk inode numbers a writable tree with several data sets (a ctable's columns) reserves
/// per set, so that every column can gain chunks without reaching the next one's numbers:
/// more than any source b2fs writes can hold (`MAX_NCHUNKS` of the container layer).
const SET_STRIDE: u64 = 1 << 32;

/// Tuning knobs of a [`Tree`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeOptions {
    /// Byte budget of the decompressed-chunk cache.
    pub cache_size: usize,
    /// How many chunks ahead a sequential scan prefetches (0 disables prefetching).
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
    /// Accept edits and commit them to the source (a read-write mount). When false every
    /// change is [`TreeError::ReadOnly`].
    pub writable: bool,
}

/// Largest read served by a range decode. Kernel readahead of a sequential scan arrives as
/// 128 KiB+ requests, possibly out of order across worker threads; only small reads are
/// treated as random access.
pub const RANGE_READ_MAX: usize = 64 * 1024;

impl Default for TreeOptions {
    fn default() -> Self {
        TreeOptions {
            cache_size: 256 << 20,
            prefetch_chunks: 4,
            prefetch_threads: 2,
            range_factor: 4,
            decode_threads: std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
            parallel_decode_min: 1 << 20,
            writable: false,
        }
    }
}

/// Bytes a read returns: a window of a cached chunk, of a metadata file, or freshly decoded.
#[derive(Debug)]
pub enum ReadData {
    /// A window of a cached decompressed chunk.
    Chunk(Bytes, Range<usize>),
    /// A window of a fixed file's content.
    Fixed(Arc<[u8]>, Range<usize>),
    /// Bytes decoded for this read only (range decode), or nothing (EOF).
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

/// One data directory's chunk files: inode range `base .. base + nchunks`.
#[derive(Debug)]
struct DataSet {
    store: Box<dyn ChunkStore>,
    base: u64,
}

/// Largest compressed-chunk buffer a thread keeps for the next chunk.
const KEEP_COMPRESSED: usize = 64 << 20;

thread_local! {
    /// Each decoding thread's buffer for the compressed bytes of the chunk it decodes.
    static COMPRESSED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Cache key: (data set, chunk index).
type Key = (usize, usize);

/// Block cache key: (data set, chunk index, block index).
type BlockKey = (usize, usize, usize);

/// Granule of [`Core`]'s page cache.
const PAGE: usize = 4096;

/// Most chunks whose block size [`Core::block_size_for_cache`] remembers.
const MAX_BLOCK_SIZES: usize = 1 << 20;

/// State shared with the prefetch threads.
#[derive(Debug)]
struct Core {
    sets: Vec<DataSet>,
    /// Decompressed chunks.
    cache: ChunkCache<Key>,
    /// Compressed chunks kept for range decodes: a random small read must not re-read a
    /// whole compressed chunk from the source each time.
    raw: ChunkCache<Key>,
    /// Decoded blocks of chunks read at random in small pieces: a re-read of the same
    /// neighbourhood costs a lookup instead of decoding the block again.
    blocks: ChunkCache<BlockKey>,
    /// The 4 KiB pages small random reads asked for, cut from the blocks decoded for them:
    /// many more re-read spots fit than whole blocks would (the kernel's page cache, which
    /// direct I/O bypasses, keeps exactly these).
    pages: ChunkCache<BlockKey>,
    /// Bumped by every invalidation before it drops pages: a reader that cut pages from a
    /// block it got before an invalidation sees the change and takes its pages back.
    page_gen: AtomicU64,
    /// Block sizes of the chunks `blocks` has seen (0: not worth caching by block).
    block_sizes: Mutex<HashMap<Key, usize>>,
    decode_threads: usize,
    parallel_decode_min: usize,
}

impl Core {
    /// The whole decompressed chunk, from the cache or decoded once.
    /// `split`: decode a large chunk on `decode_threads` threads (a reader waiting for it);
    /// prefetch threads decode whole chunks alone, since they already run side by side.
    fn chunk(&self, set: usize, index: usize, split: bool) -> Result<Bytes, ContainerError> {
        self.cache
            .get_or_load((set, index), || self.decode(set, index, split))
    }

    /// A prefetch of a whole chunk: decoded alone (prefetch threads run side by side) and kept
    /// ahead of its reader (see [`ChunkCache::load_ahead`]).
    fn chunk_ahead(&self, set: usize, index: usize) -> Result<Bytes, ContainerError> {
        self.cache
            .load_ahead((set, index), || self.decode(set, index, false))
    }

    fn decode(&self, set: usize, index: usize, split: bool) -> Result<Vec<u8>, ContainerError> {
        let store = &self.sets[set].store;
        let chunk_err = |source| ContainerError::Chunk {
            path: store.path().to_path_buf(),
            index,
            source,
        };
        let nbytes = store.chunk_nbytes(index)?;
        // Straight from the source's mapping when it has one: no copy of the compressed
        // bytes, and no buffer for them.
        let mut from_map = None;
        let mapped = store.with_mapped_chunk(index, false, &mut |chunk| {
            from_map = Some(self.decode_chunk(chunk, nbytes, split));
        });
        match (mapped, from_map) {
            (Ok(true), Some(res)) => return res.map_err(chunk_err),
            (Err(e), res) => {
                // The source shrank while it was decoded: what came out is not its chunk.
                if let Some(Ok(buf)) = res {
                    self.cache.recycle(buf);
                }
                return Err(e);
            }
            _ => {}
        }
        // Else the compressed bytes go into this thread's reused buffer: a fresh multi-MiB
        // allocation per chunk costs page faults and zeroing on every decode.
        let res = COMPRESSED.with(|cell| {
            let mut compressed = cell.borrow_mut();
            let clen = store.chunk_bytes_into(index, &mut compressed)?;
            let res = self.decode_chunk(&compressed[..clen], nbytes, split);
            if compressed.capacity() > KEEP_COMPRESSED {
                *compressed = Vec::new(); // an outsized chunk: do not keep its buffer
            }
            Ok(res)
        });
        res?.map_err(chunk_err)
    }

    /// Decodes the compressed chunk `chunk` into a cache buffer and keeps its first `nbytes`.
    /// The chunk may hold more than the file shows (a bcolz leftover chunk rewritten full):
    /// it is decoded whole.
    fn decode_chunk(
        &self,
        chunk: &[u8],
        nbytes: usize,
        split: bool,
    ) -> Result<Vec<u8>, CodecError> {
        let stored = codec::chunk_info(chunk)?.nbytes;
        if stored < nbytes {
            return Err(CodecError::OutputSize {
                expected: stored,
                actual: nbytes,
            });
        }
        let mut buf = self.cache.buffer(stored);
        match self.decode_into(chunk, &mut buf, split) {
            Ok(()) => {
                buf.truncate(nbytes);
                Ok(buf)
            }
            Err(e) => {
                self.cache.recycle(buf);
                Err(e)
            }
        }
    }

    /// Decodes a whole chunk into `out` (exactly its nbytes). A large chunk is cut at block
    /// boundaries and the parts are decoded on scoped threads with range decodes, so one cold
    /// chunk uses every core (C-Blosc2 does the same with its nthreads).
    fn decode_into(&self, chunk: &[u8], out: &mut [u8], split: bool) -> Result<(), CodecError> {
        let parts = if split { self.decode_threads.max(1) } else { 1 };
        let blocksize = match codec::chunk_info(chunk) {
            Ok(h) => h.blocksize,
            Err(e) => return Err(e),
        };
        let special_or_small = out.len() < self.parallel_decode_min || blocksize == 0;
        let nblocks = out.len().div_ceil(blocksize.max(1));
        if parts < 2 || special_or_small || nblocks < 2 {
            return guarded(|| codec::decompress_into(chunk, out)).map(|_| ());
        }
        let per = nblocks.div_ceil(parts) * blocksize;
        std::thread::scope(|scope| {
            let mut rest = &mut out[..];
            let mut offset = 0;
            let mut handles = Vec::new();
            while rest.len() > per {
                let (part, tail) = rest.split_at_mut(per);
                rest = tail;
                let at = offset;
                offset += per;
                handles.push(scope.spawn(move || range_exact(chunk, at, part)));
            }
            let first = range_exact(chunk, offset, rest);
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or(Err(CodecError::InvalidParams(
                        "decode thread panicked".into(),
                    )))
                })
                .fold(first, |acc, r| acc.and(r))
        })
    }

    /// The block size by which chunk `index` is worth caching: the header's, when the chunk
    /// has at least two blocks; 0 otherwise (or when the header cannot be read here: the
    /// decode path then reports any error). Reads only the header, once per chunk.
    fn block_size_for_cache(&self, set: usize, index: usize, nbytes: usize) -> usize {
        if let Some(&bs) = self.block_sizes.lock().get(&(set, index)) {
            return bs;
        }
        let bs = lazy::read_header(self.sets[set].store.as_ref(), index)
            .map(|h| (h.block_size(), h.nbytes))
            .filter(|&(b, n)| b > 0 && b.saturating_mul(2) <= nbytes && n == nbytes)
            .map_or(0, |(b, _)| b);
        let mut sizes = self.block_sizes.lock();
        if sizes.len() >= MAX_BLOCK_SIZES {
            sizes.clear();
        }
        sizes.insert((set, index), bs);
        bs
    }

    /// Window `r` of chunk `index` when every page `p0..=p1` it covers is in the page cache:
    /// zero-copy for one page, assembled for several.
    fn cached_pages(
        &self,
        set: usize,
        index: usize,
        p0: usize,
        p1: usize,
        r: Range<usize>,
    ) -> Option<ReadData> {
        if p0 == p1 {
            let page = self.pages.get(&(set, index, p0))?;
            let at = p0 * PAGE;
            return (page.len() >= r.end - at)
                .then(|| ReadData::Chunk(page, r.start - at..r.end - at));
        }
        let mut out = Vec::with_capacity(r.len());
        for p in p0..=p1 {
            let page = self.pages.get(&(set, index, p))?;
            let at = p * PAGE;
            let (from, to) = (
                r.start.max(at) - at,
                (r.end.min(at + PAGE) - at).min(page.len()),
            );
            out.extend_from_slice(page.get(from..to)?);
        }
        (out.len() == r.len()).then_some(ReadData::Owned(out))
    }

    /// Bytes `[offset, offset + len)` of a chunk, decoding only the blocks they overlap.
    fn decode_range(
        &self,
        set: usize,
        index: usize,
        offset: usize,
        len: usize,
    ) -> Result<Vec<u8>, ContainerError> {
        self.decode_range_into(set, index, offset, vec![0u8; len])
    }

    /// [`Core::decode_range`] into `out` (its length is the window's), truncated to what the
    /// chunk holds.
    fn decode_range_into(
        &self,
        set: usize,
        index: usize,
        offset: usize,
        mut out: Vec<u8>,
    ) -> Result<Vec<u8>, ContainerError> {
        let store = &self.sets[set].store;
        let len = out.len();
        let decode =
            |chunk: &[u8], out: &mut [u8]| guarded(|| codec::decompress_range(chunk, offset, out));
        // Straight from the source's mapping when it has one: the decode touches only the
        // pages of the header, the block-start table and the blocks it needs, with no read
        // call and no copy. Else a compressed chunk kept from earlier reads beats partial
        // reads from the source.
        let mut from_map = None;
        let mapped = store.with_mapped_chunk(index, true, &mut |c| {
            from_map = Some(decode(c, &mut out));
        })?;
        let lazy = if mapped {
            from_map
        } else if self.raw.contains_or_loading(&(set, index)) {
            None
        } else {
            lazy::with_sparse_chunk(store.as_ref(), index, offset, len, |c| decode(c, &mut out))?
        };
        let res = match lazy {
            Some(res) => res,
            None => {
                let chunk = self.raw.get_or_load((set, index), || {
                    store.chunk_bytes(index).map(Cow::into_owned)
                })?;
                decode(&chunk, &mut out)
            }
        };
        let n = res.map_err(|source| ContainerError::Chunk {
            path: store.path().to_path_buf(),
            index,
            source,
        })?;
        out.truncate(n);
        Ok(out)
    }
}

/// How a read continues the earlier reads of its handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pattern {
    /// The handle's first read, at offset 0.
    FirstAtZero,
    /// Where the previous read ended, or back at offset 0.
    Sequential,
    /// Anywhere else.
    Random,
}

/// Per-open-file state.
#[derive(Debug, Clone, Copy)]
struct Handle {
    ino: u64,
    /// Where a sequential scan's next read starts.
    next: u64,
    /// Every read so far continued the previous one, starting at offset 0: when such a run
    /// reaches the end of a chunk file, the chunk was streamed once (see
    /// [`ChunkCache::streamed`]).
    from_start: bool,
    /// Opened for writing: its flush and release commit the file's buffer.
    write: bool,
}

/// What an inode is, resolved.
#[derive(Debug, Clone, Copy)]
enum Resolved<'a> {
    Fixed(&'a Node),
    Chunk { set: usize, index: usize },
}

/// The virtual filesystem of one mounted source. `Sync`: FUSE worker threads share it.
#[derive(Debug)]
pub struct Tree {
    nodes: Vec<Node>,
    core: Arc<Core>,
    owner: Owner,
    total_bytes: u64,
    handles: Mutex<HashMap<u64, Handle>>,
    next_fh: AtomicU64,
    prefetch: Option<prefetch::Prefetcher>,
    options: TreeOptions,
    /// Per data set: the array edits are committed to (`None`: not writable).
    sources: Vec<Option<Arc<Source>>>,
    /// `__attrs__` files by inode.
    attrs_targets: HashMap<u64, AttrsTarget>,
    /// The `meta/sizes` file of each data set.
    sizes_files: HashMap<usize, u64>,
    /// Buffered edits.
    pending: Mutex<Pending>,
    /// Serialises commits; one encoder reused by all of them.
    committer: Mutex<Encoder>,
    /// Issue 15: recent refusals and errors, for `b2fs log` ([`events`]).
    events: events::EventLog,
}

/// What asks for a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Commit {
    /// A `close(2)` of one descriptor (others may still follow).
    Flush,
    /// fsync, the last close (release), a truncate without an open handle, a rename.
    Now,
}

/// What a write to an inode changes.
#[derive(Debug, Clone)]
enum WriteTarget {
    Scratch,
    Attrs,
    Chunk { set: usize, index: usize },
}

impl Tree {
    /// Opens the source at `path` and builds its tree.
    ///
    /// # Errors
    /// When the source cannot be opened or its metadata cannot be rendered.
    pub fn from_source(path: &Path, options: TreeOptions) -> Result<Tree, ContainerError> {
        let mut container = crate::container::open(path)?;
        if options.writable {
            if let crate::container::Container::Table(t) = &container {
                if repair_table(t) {
                    container = crate::container::open(path)?;
                }
            }
        }
        let layout = view::layout(container)?;
        Ok(Tree::new(layout, options))
    }

    /// Serves `layout`.
    pub fn new(layout: Layout, options: TreeOptions) -> Tree {
        let Layout {
            nodes,
            stores,
            sources,
            attrs,
            sizes,
            owner,
        } = layout;
        let mut next = nodes.len() as u64 + 1;
        let mut sets = Vec::with_capacity(stores.len());
        let mut total_bytes: u64 = nodes
            .iter()
            .map(|n| match &n.kind {
                NodeKind::File { content } => content.len() as u64,
                NodeKind::Dir { .. } => 0,
            })
            .sum();
        // A writable tree with several data sets leaves room after each (see SET_STRIDE),
        // when the numbers fit below the scratch files; else sets are packed (and only the
        // last can grow).
        let strided = options.writable
            && stores.len() > 1
            && stores.iter().all(|s| (s.nchunks() as u64) < SET_STRIDE)
            && (stores.len() as u64)
                .checked_mul(SET_STRIDE)
                .and_then(|n| n.checked_add(next))
                .is_some_and(|end| end < SCRATCH_BASE);
        for store in stores {
            let base = next;
            next = if strided {
                next.saturating_add(SET_STRIDE)
            } else {
                next.saturating_add(store.nchunks() as u64)
            };
            // Estimate: the last chunk may be short, but statfs needs no exactness.
            total_bytes = total_bytes.saturating_add(
                (store.nchunks() as u64).saturating_mul(store.chunk_nbytes(0).unwrap_or(0) as u64),
            );
            sets.push(DataSet { store, base });
        }
        // A quarter of the budget (at most 64 MiB) keeps compressed chunks for range decodes,
        // an eighth (at most 32 MiB) decoded blocks of random small reads.
        let raw_budget = (options.cache_size / 4).min(64 << 20);
        let block_budget = (options.cache_size / 8).min(32 << 20);
        let page_budget = (options.cache_size / 16).min(16 << 20);
        let core = Arc::new(Core {
            sets,
            cache: ChunkCache::new(options.cache_size - raw_budget - block_budget - page_budget),
            raw: ChunkCache::new(raw_budget),
            blocks: ChunkCache::new(block_budget),
            pages: ChunkCache::new(page_budget),
            page_gen: AtomicU64::new(0),
            block_sizes: Mutex::new(HashMap::new()),
            decode_threads: options.decode_threads,
            parallel_decode_min: options.parallel_decode_min,
        });
        let prefetch = (options.prefetch_chunks > 0 && options.prefetch_threads > 0)
            .then(|| prefetch::Prefetcher::start(core.clone(), options.prefetch_threads));
        Tree {
            nodes,
            core,
            owner,
            total_bytes,
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            prefetch,
            options,
            sources,
            attrs_targets: attrs.into_iter().collect(),
            sizes_files: sizes.into_iter().map(|(ino, set)| (set, ino)).collect(),
            pending: Mutex::new(Pending::default()),
            committer: Mutex::new(Encoder::new()),
            events: events::EventLog::default(),
        }
    }

    /// Whether this tree accepts edits (a read-write mount).
    pub fn is_writable(&self) -> bool {
        self.options.writable
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

    // ---- Issue 15 facade: extended attributes and the event log. Port these methods (and
    // the `events` field); the logic is in `xattr` and `events`, which need only these.

    /// The extended attribute `name` of `ino` ([`xattr`]); `Ok(None)`: no such attribute.
    ///
    /// # Errors
    /// [`TreeError::NotFound`] for unknown inodes.
    pub fn getxattr(&self, ino: u64, name: &str) -> Result<Option<Vec<u8>>, TreeError> {
        Ok(xattr::get(&self.xattr_target(ino)?, name))
    }

    /// The `\0`-terminated names of `ino`'s extended attributes ([`xattr`]).
    ///
    /// # Errors
    /// [`TreeError::NotFound`] for unknown inodes.
    pub fn listxattr(&self, ino: u64) -> Result<Vec<u8>, TreeError> {
        Ok(xattr::list(&self.xattr_target(ino)?))
    }

    /// `setxattr`/`removexattr` of `name` on `ino`: always refused ([`xattr::refusal`]).
    ///
    /// # Errors
    /// Always: [`TreeError::Unsupported`] (EOPNOTSUPP) for ACLs and scratch files, else as
    /// [`Tree::modify`].
    pub fn set_xattr(&self, ino: u64, name: &str) -> Result<(), TreeError> {
        self.getattr(ino)?;
        match xattr::refusal(name, ino >= SCRATCH_BASE) {
            Some(why) if self.options.writable => Err(TreeError::Unsupported(why)),
            _ => self.modify(ino, "setxattr/removexattr"),
        }
    }

    fn xattr_target(&self, ino: u64) -> Result<xattr::Target<'_>, TreeError> {
        self.getattr(ino)?;
        Ok(match self.resolve(ino) {
            Ok(Resolved::Chunk { set, index }) if index < self.core.sets[set].store.nchunks() => {
                let store = self.core.sets[set].store.as_ref();
                xattr::Target::Chunk { store, index }
            }
            Ok(_) if ino == ROOT_INO => self.xattr_root(),
            _ => xattr::Target::Other,
        })
    }

    fn xattr_root(&self) -> xattr::Target<'_> {
        let (budget, bytes, stats) = (
            self.options.cache_size,
            self.cache_bytes(),
            self.cache_stats(),
        );
        let cache = xattr::CacheView {
            budget,
            bytes,
            stats,
        };
        let first = self.core.sets.first().map(|s| s.store.as_ref());
        xattr::Target::root(
            self.table(),
            first,
            cache,
            self.options.writable,
            &self.events,
        )
    }

    /// Records a failed operation for `b2fs log` ([`events`]); name probes are not kept.
    pub fn note_error(&self, op: &str, ino: u64, e: &TreeError) {
        if events::worth_recording(op, e.errno()) {
            let path = self.path_of(ino);
            self.events.record(op, path, e.errno(), &display_chain(e));
        }
    }

    /// The path of `ino` from the mount root (`/data/00000001.bin`), for messages.
    pub fn path_of(&self, ino: u64) -> String {
        let (dir, leaf) = match self.resolve(ino) {
            Ok(Resolved::Fixed(_)) => (ino, None),
            Ok(Resolved::Chunk { set, index }) => (
                events::data_dir_of(&self.nodes, set),
                Some(chunk_name(index)),
            ),
            Err(_) => (ROOT_INO, Some(self.scratch_name(ino))),
        };
        events::node_path(&self.nodes, dir, leaf)
    }

    fn scratch_name(&self, ino: u64) -> String {
        let p = self.pending.lock();
        p.scratch
            .get(&ino)
            .map_or(format!("(inode {ino})"), |f| f.name.clone())
    }

    // ---- end of the issue 15 facade.

    fn resolve(&self, ino: u64) -> Result<Resolved<'_>, TreeError> {
        if ino == 0 {
            return Err(TreeError::NotFound);
        }
        let idx = (ino - 1) as usize;
        if let Some(node) = self.nodes.get(idx) {
            return Ok(Resolved::Fixed(node));
        }
        let sets = &self.core.sets;
        // Sets are in increasing base order; find the last with base <= ino.
        let set = sets.partition_point(|s| s.base <= ino).checked_sub(1);
        match set {
            Some(set) => {
                let index = (ino - sets[set].base) as usize;
                if index < sets[set].store.nchunks() || self.pending_append(ino) {
                    Ok(Resolved::Chunk { set, index })
                } else {
                    Err(TreeError::NotFound)
                }
            }
            None => Err(TreeError::NotFound),
        }
    }

    fn node(&self, ino: u64) -> Option<&Node> {
        self.nodes.get(usize::try_from(ino.checked_sub(1)?).ok()?)
    }

    fn chunk_ino(&self, set: usize, index: usize) -> u64 {
        self.core.sets[set].base + index as u64
    }

    /// The attributes of `ino`.
    ///
    /// # Errors
    /// [`TreeError::NotFound`] for unknown inodes; [`TreeError::Container`] when a chunk's
    /// size cannot be read.
    pub fn getattr(&self, ino: u64) -> Result<Attr, TreeError> {
        if ino >= SCRATCH_BASE {
            let len = self
                .pending
                .lock()
                .scratch
                .get(&ino)
                .map(|f| f.data.len())
                .ok_or(TreeError::NotFound)?;
            return Ok(self.attr(ino, EntryKind::File, len as u64, 1));
        }
        match self.resolve(ino)? {
            Resolved::Fixed(node) => Ok(match &node.kind {
                NodeKind::Dir { children, .. } => {
                    let subdirs = children
                        .iter()
                        .filter(|&&c| {
                            matches!(self.node(c).map(|n| &n.kind), Some(NodeKind::Dir { .. }))
                        })
                        .count();
                    self.attr(ino, EntryKind::Directory, 0, 2 + subdirs as u32)
                }
                NodeKind::File { content } => {
                    let len = self.pending_len(ino).unwrap_or(content.len());
                    self.attr(ino, EntryKind::File, len as u64, 1)
                }
            }),
            Resolved::Chunk { set, index } => {
                let size = match self.pending_len(ino) {
                    Some(n) => n,
                    None => self.core.sets[set]
                        .store
                        .chunk_nbytes(index)
                        .map_err(|source| TreeError::Container { ino, source })?,
                };
                Ok(self.attr(ino, EntryKind::File, size as u64, 1))
            }
        }
    }

    fn attr(&self, ino: u64, kind: EntryKind, size: u64, nlink: u32) -> Attr {
        Attr {
            ino,
            kind,
            size,
            blocks: size.div_ceil(512),
            perm: match (kind, self.writable_ino(ino)) {
                (EntryKind::Directory, false) => 0o555,
                (EntryKind::Directory, true) => 0o755,
                (EntryKind::File, false) => 0o444,
                (EntryKind::File, true) => 0o644,
            },
            nlink,
            uid: self.owner.uid,
            gid: self.owner.gid,
            mtime: self.owner.mtime,
            blksize: BLKSIZE,
        }
    }

    /// The entry `name` in directory `parent`, with its attributes.
    ///
    /// # Errors
    /// [`TreeError::NotFound`], [`TreeError::NotADirectory`], [`TreeError::NameTooLong`], or
    /// [`TreeError::Container`] when the entry's size cannot be read.
    pub fn lookup(&self, parent: u64, name: &str) -> Result<Attr, TreeError> {
        if name.len() > NAME_MAX {
            return Err(TreeError::NameTooLong);
        }
        let node = match self.resolve(parent)? {
            Resolved::Fixed(node) => node,
            Resolved::Chunk { .. } => return Err(TreeError::NotADirectory(parent)),
        };
        let NodeKind::Dir { children, data } = &node.kind else {
            return Err(TreeError::NotADirectory(parent));
        };
        match name {
            "." => return self.getattr(parent),
            ".." => return self.getattr(node.parent),
            _ => {}
        }
        if let Some(set) = *data {
            let index = parse_chunk_name(name).ok_or(TreeError::NotFound)?;
            if index >= self.core.sets[set].store.nchunks()
                && !self.pending_append(self.chunk_ino(set, index))
            {
                return Err(TreeError::NotFound);
            }
            return self.getattr(self.chunk_ino(set, index));
        }
        let child = children
            .iter()
            .copied()
            .find(|&c| self.node(c).is_some_and(|n| n.name == name));
        match child {
            Some(child) => self.getattr(child),
            None if parent == ROOT_INO => {
                let ino = self.scratch_ino(name).ok_or(TreeError::NotFound)?;
                self.getattr(ino)
            }
            None => Err(TreeError::NotFound),
        }
    }

    /// The inode of scratch file `name` of the root, if there is one.
    fn scratch_ino(&self, name: &str) -> Option<u64> {
        let p = self.pending.lock();
        p.scratch
            .iter()
            .find(|(_, f)| f.name == name)
            .map(|(&ino, _)| ino)
    }

    /// The entries of directory `ino` from position `offset` on (0 = the start; otherwise an
    /// entry's `next_offset` from an earlier call). The iterator is lazy: a data directory
    /// with a million chunks costs only the entries actually taken.
    ///
    /// # Errors
    /// [`TreeError::NotFound`] or [`TreeError::NotADirectory`].
    pub fn readdir(&self, ino: u64, offset: u64) -> Result<ReadDir<'_>, TreeError> {
        let node = match self.resolve(ino)? {
            Resolved::Fixed(node) => node,
            Resolved::Chunk { .. } => return Err(TreeError::NotADirectory(ino)),
        };
        let NodeKind::Dir { children, data } = &node.kind else {
            return Err(TreeError::NotADirectory(ino));
        };
        let len = 2 + match data {
            Some(set) => {
                let n = self.core.sets[*set].store.nchunks();
                n as u64 + u64::from(self.pending_append(self.chunk_ino(*set, n)))
            }
            None => children.len() as u64,
        };
        Ok(ReadDir {
            tree: self,
            ino,
            parent: node.parent,
            children,
            data: *data,
            pos: offset,
            len,
        })
    }

    /// Opens file `ino`; `flags` are the `open(2)` flags. Returns a handle for
    /// [`Tree::read`] and [`Tree::release`].
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`] for any access mode but read-only or for `O_TRUNC`;
    /// [`TreeError::IsADirectory`]; [`TreeError::NotFound`].
    pub fn open(&self, ino: u64, flags: i32) -> Result<u64, TreeError> {
        let write = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        if write {
            self.write_target(ino)?;
        }
        if ino >= SCRATCH_BASE {
            self.getattr(ino)?;
        } else {
            match self.resolve(ino)? {
                Resolved::Fixed(Node {
                    kind: NodeKind::Dir { .. },
                    ..
                }) => return Err(TreeError::IsADirectory(ino)),
                Resolved::Fixed(_) | Resolved::Chunk { .. } => {}
            }
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().insert(
            fh,
            Handle {
                ino,
                next: 0,
                from_start: true,
                write,
            },
        );
        if write && flags & libc::O_TRUNC != 0 {
            if let Err(e) = self.set_size(ino, 0) {
                self.handles.lock().remove(&fh);
                return Err(e);
            }
            if let Some(c) = self.pending.lock().chunks.get_mut(&ino) {
                c.open_trunc = true;
            }
        }
        Ok(fh)
    }

    /// Forgets handle `fh`; a handle opened for writing first commits its file's buffer (a
    /// buffer that cannot be committed is dropped, and the error returned).
    ///
    /// # Errors
    /// [`TreeError::BadHandle`] when `fh` is not open; commit errors as [`Tree::flush`].
    pub fn release(&self, fh: u64) -> Result<(), TreeError> {
        let h = self
            .handles
            .lock()
            .remove(&fh)
            .ok_or(TreeError::BadHandle(fh))?;
        if !h.write {
            return Ok(());
        }
        let res = self.commit(h.ino, Commit::Now);
        let still_open = self
            .handles
            .lock()
            .values()
            .any(|o| o.ino == h.ino && o.write);
        if !still_open {
            let mut p = self.pending.lock();
            // A created chunk file closed empty: nothing is appended.
            if p.chunks
                .get(&h.ino)
                .is_some_and(|c| c.append && c.data.is_empty())
            {
                p.chunks.remove(&h.ino);
            }
        }
        if res.is_err() && !still_open {
            self.drop_pending(h.ino);
        }
        res
    }

    /// Number of open handles (for tests).
    pub fn open_handles(&self) -> usize {
        self.handles.lock().len()
    }

    /// Up to `size` bytes of file `ino` from `offset` (fewer only at the end of the file).
    ///
    /// # Errors
    /// [`TreeError::BadHandle`] when `fh` was not opened for `ino`; [`TreeError::IsADirectory`];
    /// [`TreeError::Container`] when the chunk cannot be read or decoded.
    pub fn read(&self, ino: u64, fh: u64, offset: u64, size: u32) -> Result<ReadData, TreeError> {
        let (sequential, streaming) = {
            let mut handles = self.handles.lock();
            let h = handles
                .get_mut(&fh)
                .filter(|h| h.ino == ino)
                .ok_or(TreeError::BadHandle(fh))?;
            let seq = if offset == 0 && h.next == 0 {
                Pattern::FirstAtZero
            } else if offset == 0 || offset == h.next {
                Pattern::Sequential
            } else {
                Pattern::Random
            };
            h.from_start &= offset == h.next;
            h.next = offset.saturating_add(u64::from(size));
            (seq, h.from_start)
        };
        if self.options.writable {
            let p = self.pending.lock();
            let data = match (p.chunks.get(&ino), p.attrs.get(&ino)) {
                (Some(c), _) => Some(&c.data),
                (None, Some(a)) => Some(&a.data),
                (None, None) => p
                    .scratch
                    .get(&ino)
                    .map(|f| &f.data)
                    .or_else(|| p.rendered.get(&ino)),
            };
            if let Some(d) = data {
                let r = window(d.len(), offset, size);
                return Ok(ReadData::Owned(d[r].to_vec()));
            }
        }
        match self.resolve(ino)? {
            Resolved::Fixed(node) => match &node.kind {
                NodeKind::File { content } => {
                    let r = window(content.len(), offset, size);
                    Ok(ReadData::Fixed(content.clone(), r))
                }
                NodeKind::Dir { .. } => Err(TreeError::IsADirectory(ino)),
            },
            Resolved::Chunk { set, index } => self
                .read_chunk(set, index, offset, size, sequential, streaming)
                .map_err(|source| TreeError::Container { ino, source }),
        }
    }

    fn read_chunk(
        &self,
        set: usize,
        index: usize,
        offset: u64,
        size: u32,
        pattern: Pattern,
        streaming: bool,
    ) -> Result<ReadData, ContainerError> {
        let core = &self.core;
        let nbytes = core.sets[set].store.chunk_nbytes(index)?;
        let r = window(nbytes, offset, size);
        if r.is_empty() {
            return Ok(ReadData::Owned(Vec::new()));
        }
        // A first read at offset 0 starts a scan when it is large or takes the whole chunk:
        // `head -c`, `dd bs=4k` and magic-number sniffers read a few KiB from the start of a
        // file and must not decode the whole chunk and prefetch the next ones. Their next
        // read, if any, continues where this one ended and is sequential.
        let sequential = match pattern {
            Pattern::Sequential => true,
            Pattern::Random => false,
            Pattern::FirstAtZero => r.end == nbytes || r.len() > RANGE_READ_MAX,
        };
        let key = (set, index);
        // Streamed once, unless another open handle of the file may still read it.
        let streamed_to_end = streaming && r.end == nbytes && {
            let ino = self.chunk_ino(set, index);
            self.handles
                .lock()
                .values()
                .filter(|h| h.ino == ino)
                .count()
                == 1
        };
        if let Some(bytes) = core.cache.get(&key) {
            if sequential {
                self.prefetch_after(set, index, nbytes);
            }
            if streamed_to_end {
                core.cache.streamed(&key);
            }
            return Ok(ReadData::Chunk(bytes, r));
        }
        let small =
            r.len() <= RANGE_READ_MAX && nbytes / self.options.range_factor.max(1) > r.len();
        if !sequential && small && !core.cache.contains_or_loading(&key) {
            let (p0, p1) = (r.start / PAGE, (r.end - 1) / PAGE);
            if let Some(hit) = core.cached_pages(set, index, p0, p1, r.clone()) {
                return Ok(hit);
            }
            // Within one block: decode (or find) that whole block and keep it, and the pages
            // this read wanted.
            let bs = core.block_size_for_cache(set, index, nbytes);
            if bs > 0 && r.start / bs == (r.end - 1) / bs {
                let b = r.start / bs;
                let start = b * bs;
                let len = bs.min(nbytes - start);
                // Into a recycled block buffer: a fresh 256 KiB allocation per read costs
                // more page faults than the decode.
                let generation = core.page_gen.load(Ordering::SeqCst);
                let block = core.blocks.get_or_load((set, index, b), || {
                    core.decode_range_into(set, index, start, core.blocks.buffer(len))
                })?;
                if block.len() == len {
                    // Only pages wholly inside this block (blocks need not be page-aligned);
                    // the chunk's last page may be short.
                    let pages = (p0..=p1).filter(|&p| {
                        p * PAGE >= start && ((p + 1) * PAGE).min(nbytes) <= start + len
                    });
                    for p in pages.clone() {
                        let (lo, hi) = (p * PAGE, ((p + 1) * PAGE).min(nbytes));
                        let page = block[lo - start..hi - start].to_vec();
                        core.pages.insert((set, index, p), Arc::new(page));
                    }
                    if core.page_gen.load(Ordering::SeqCst) != generation {
                        // The block may predate a commit: its pages must not outlive it.
                        pages.for_each(|p| core.pages.remove(&(set, index, p)));
                    }
                    return Ok(ReadData::Chunk(block, r.start - start..r.end - start));
                }
            }
            let out = core.decode_range(set, index, r.start, r.len())?;
            return Ok(ReadData::Owned(out));
        }
        // Prefetch only once this chunk is decoded: the reader is waiting for it, and
        // prefetches started earlier would take cores from its decode.
        let bytes = core.chunk(set, index, true)?;
        if sequential {
            self.prefetch_after(set, index, nbytes);
        }
        if streamed_to_end {
            core.cache.streamed(&key);
        }
        Ok(ReadData::Chunk(bytes, r))
    }

    /// Asks the prefetch threads for the chunks after `index` (whose size is `nbytes`).
    fn prefetch_after(&self, set: usize, index: usize, nbytes: usize) {
        let Some(p) = &self.prefetch else { return };
        let nchunks = self.core.sets[set].store.nchunks();
        // No deeper than the cache holds next to the chunk being read: a prefetched chunk
        // evicted before its read is decoded twice (with `cache_size=64M` and 8 MiB chunks,
        // 116 of 512 chunks of a scan were). None when it holds only that chunk.
        let fits = (self.core.cache.budget() / nbytes.max(1)).saturating_sub(1);
        let depth = self.options.prefetch_chunks.min(fits);
        for next in index + 1..(index + 1 + depth).min(nchunks) {
            if !self.core.cache.contains_or_loading(&(set, next)) {
                p.request(set, next);
            }
        }
    }

    /// A change the tree never supports (`op`: mkdir, rename, symlink, link, mknod, rmdir,
    /// extended attributes, chmod/chown) on or under `ino`.
    ///
    /// # Errors
    /// Always: [`TreeError::NotFound`] when `ino` does not exist, [`TreeError::ReadOnly`] on a
    /// read-only tree, else [`TreeError::NotPermitted`].
    pub fn modify(&self, ino: u64, op: &str) -> Result<(), TreeError> {
        self.resolve(ino)?;
        if !self.options.writable {
            return Err(TreeError::ReadOnly);
        }
        Err(TreeError::NotPermitted(format!(
            "{op} is not supported by b2fs"
        )))
    }

    /// `access(2)`: `mask` is a combination of `R_OK`, `W_OK`, `X_OK` (or `F_OK`).
    ///
    /// # Errors
    /// [`TreeError::NotFound`]; [`TreeError::ReadOnly`] when `W_OK` is asked;
    /// [`TreeError::PermissionDenied`] for `X_OK` on a file.
    pub fn access(&self, ino: u64, mask: i32) -> Result<(), TreeError> {
        let attr = self.getattr(ino)?;
        if mask & libc::W_OK != 0 && !self.writable_ino(ino) {
            return Err(TreeError::ReadOnly);
        }
        if mask & libc::X_OK != 0 && attr.kind == EntryKind::File {
            return Err(TreeError::PermissionDenied);
        }
        Ok(())
    }

    /// Whether a chunk file is being created at `ino` (a pending append).
    fn pending_append(&self, ino: u64) -> bool {
        self.options.writable
            && self
                .pending
                .lock()
                .chunks
                .get(&ino)
                .is_some_and(|c| c.append)
    }

    /// The size of the buffered content of `ino`, if it has one.
    fn pending_len(&self, ino: u64) -> Option<usize> {
        if !self.options.writable {
            return None;
        }
        let p = self.pending.lock();
        p.chunks
            .get(&ino)
            .map(|c| c.data.len())
            .or_else(|| p.attrs.get(&ino).map(|a| a.data.len()))
            .or_else(|| p.rendered.get(&ino).map(Vec::len))
    }

    /// Whether `ino` shows write permission: a writable tree's directories, chunk files and
    /// `__attrs__` files.
    fn writable_ino(&self, ino: u64) -> bool {
        if !self.options.writable {
            return false;
        }
        if ino >= SCRATCH_BASE {
            return true;
        }
        match self.resolve(ino) {
            Ok(Resolved::Fixed(n)) => {
                matches!(n.kind, NodeKind::Dir { .. }) || self.attrs_targets.contains_key(&ino)
            }
            Ok(Resolved::Chunk { .. }) => true,
            Err(_) => false,
        }
    }

    /// The writable array of data set `set`, or [`TreeError::ReadOnly`] (logged with the
    /// reason) when the source cannot be written.
    fn source(&self, set: usize) -> Result<&Arc<Source>, TreeError> {
        let src = self
            .sources
            .get(set)
            .and_then(Option::as_ref)
            .ok_or(TreeError::ReadOnly)?;
        if let Some(why) = crate::container::write::check_writable(&src.get()) {
            log::info!("not writable: {}", display_chain(&why));
            return Err(TreeError::ReadOnly);
        }
        Ok(src)
    }

    /// What writing to `ino` changes, after checking that it may be written.
    fn write_target(&self, ino: u64) -> Result<WriteTarget, TreeError> {
        if !self.options.writable {
            return Err(TreeError::ReadOnly);
        }
        if ino >= SCRATCH_BASE {
            self.getattr(ino)?;
            return Ok(WriteTarget::Scratch);
        }
        match self.resolve(ino)? {
            Resolved::Fixed(Node {
                kind: NodeKind::Dir { .. },
                ..
            }) => Err(TreeError::IsADirectory(ino)),
            Resolved::Fixed(_) => match self.attrs_targets.get(&ino) {
                Some(AttrsTarget::Set(set)) => {
                    self.source(*set)?;
                    Ok(WriteTarget::Attrs)
                }
                Some(AttrsTarget::Table(path)) => {
                    let ro = std::fs::metadata(path).map_or(true, |m| m.permissions().readonly());
                    if ro {
                        return Err(TreeError::ReadOnly);
                    }
                    Ok(WriteTarget::Attrs)
                }
                None => Err(TreeError::MetadataFile),
            },
            Resolved::Chunk { set, index } => {
                self.source(set)?;
                Ok(WriteTarget::Chunk { set, index })
            }
        }
    }

    /// The ctable directory when the tree is a ctable (its data sets are its columns, which
    /// change their row count together: [`write::commit_table_chunk`]).
    fn table(&self) -> Option<&Path> {
        self.attrs_targets.values().find_map(|t| match t {
            AttrsTarget::Table(p) => Some(p.as_path()),
            AttrsTarget::Set(_) => None,
        })
    }

    /// How many chunk files data set `set` can have: the inode numbers up to the next set
    /// (or the scratch files).
    fn chunk_capacity(&self, set: usize) -> u64 {
        let sets = &self.core.sets;
        let end = sets.get(set + 1).map_or(SCRATCH_BASE, |s| s.base);
        sets.get(set).map_or(0, |s| end.saturating_sub(s.base))
    }

    /// The most bytes chunk file `index` of `set` may hold: its chunk size for the last (or
    /// a new) chunk of a 1-D source (ctable columns included), else its stored size.
    fn chunk_limit(&self, set: usize, index: usize) -> Result<usize, TreeError> {
        let src = self.source(set)?;
        let array = src.get();
        let stored = if index < array.nchunks() {
            array
                .chunk_nbytes(index)
                .map_err(|source| TreeError::Container {
                    ino: self.chunk_ino(set, index),
                    source,
                })?
        } else {
            0
        };
        if index + 1 >= array.nchunks() && src.one_d() {
            Ok(array.chunksize().max(stored))
        } else {
            Ok(stored)
        }
    }

    /// Runs `f` on the buffer of `ino` (created from its current content on first use).
    fn with_buffer<T>(
        &self,
        ino: u64,
        target: &WriteTarget,
        f: impl FnOnce(&mut Vec<u8>, usize) -> Result<T, TreeError>,
    ) -> Result<T, TreeError> {
        match target {
            WriteTarget::Scratch => {
                let mut p = self.pending.lock();
                let f2 = p.scratch.get_mut(&ino).ok_or(TreeError::NotFound)?;
                f(&mut f2.data, usize::MAX)
            }
            WriteTarget::Attrs => {
                let mut p = self.pending.lock();
                let a = p.attrs.entry(ino).or_insert_with(|| {
                    let content = match self.node(ino).map(|n| &n.kind) {
                        Some(NodeKind::File { content }) => content.to_vec(),
                        _ => Vec::new(),
                    };
                    AttrsBuf {
                        data: content.clone(),
                        stored: content,
                        dirty: false,
                        version: 0,
                    }
                });
                let out = f(&mut a.data, usize::MAX)?;
                a.dirty = true;
                a.version += 1;
                Ok(out)
            }
            WriteTarget::Chunk { set, index } => {
                let (set, index) = (*set, *index);
                let loaded = {
                    let p = self.pending.lock();
                    p.chunks.contains_key(&ino)
                };
                if !loaded {
                    // Decode outside the lock; the first writer's copy wins.
                    let bytes = self
                        .core
                        .chunk(set, index, true)
                        .map_err(|source| TreeError::Container { ino, source })?;
                    let mut p = self.pending.lock();
                    p.chunks.entry(ino).or_insert_with(|| DirtyChunk {
                        set,
                        index,
                        data: bytes.to_vec(),
                        append: false,
                        version: 0,
                        dirty: false,
                        open_trunc: false,
                    });
                }
                let limit = self.chunk_limit(set, index)?;
                let mut p = self.pending.lock();
                let Some(c) = p.chunks.get_mut(&ino) else {
                    return Err(TreeError::NotFound);
                };
                let out = f(&mut c.data, limit)?;
                c.dirty = true;
                c.version += 1;
                c.open_trunc = false;
                Ok(out)
            }
        }
    }

    /// Writes `data` at `offset` of file `ino` through handle `fh`: patches the file's buffer
    /// (committed on [`Tree::fsync`], [`Tree::flush`] or [`Tree::release`]). Returns the
    /// number of bytes written.
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`] (read-only tree or source), [`TreeError::MetadataFile`],
    /// [`TreeError::TooBig`] past what the chunk may hold, [`TreeError::BadHandle`].
    pub fn write(&self, ino: u64, fh: u64, offset: u64, data: &[u8]) -> Result<u32, TreeError> {
        let ok = self
            .handles
            .lock()
            .get(&fh)
            .is_some_and(|h| h.ino == ino && h.write);
        if !ok {
            return Err(TreeError::BadHandle(fh));
        }
        let target = self.write_target(ino)?;
        let start = usize::try_from(offset).map_err(|_| TreeError::TooBig("offset".into()))?;
        let end = start
            .checked_add(data.len())
            .ok_or_else(|| TreeError::TooBig("offset".into()))?;
        self.with_buffer(ino, &target, |buf, limit| {
            if end > limit {
                return Err(TreeError::TooBig(format!(
                    "writing up to byte {end}: this chunk holds at most {limit} bytes"
                )));
            }
            if buf.len() < end {
                buf.resize(end, 0);
            }
            buf[start..end].copy_from_slice(data);
            Ok(data.len() as u32)
        })
    }

    /// Sets the size of file `ino` (`truncate(2)`, `ftruncate(2)`, `O_TRUNC`). `__attrs__`:
    /// any size. A chunk file may grow (zero-filled) up to its chunk size when it is the last
    /// chunk of a 1-D source, and may be shrunk to be rewritten; at commit a chunk must have
    /// the size its slot needs (only the last chunk of a 1-D source may change size, and size
    /// 0 removes it). Without a handle open for writing (`truncate(2)`) the change is
    /// committed at once.
    ///
    /// # Errors
    /// As [`Tree::write`]; commit errors as [`Tree::flush`] (the buffer is then dropped).
    pub fn set_size(&self, ino: u64, size: u64) -> Result<(), TreeError> {
        let target = self.write_target(ino)?;
        let size = usize::try_from(size).map_err(|_| TreeError::TooBig("size".into()))?;
        self.with_buffer(ino, &target, |buf, limit| {
            if size > limit {
                return Err(TreeError::TooBig(format!(
                    "size {size}: this file holds at most {limit} bytes"
                )));
            }
            buf.resize(size, 0);
            Ok(())
        })?;
        let open_for_write = self
            .handles
            .lock()
            .values()
            .any(|h| h.ino == ino && h.write);
        if open_for_write {
            return Ok(());
        }
        let res = self.commit(ino, Commit::Now);
        if res.is_err() {
            let mut p = self.pending.lock();
            if p.chunks.remove(&ino).is_some() {
                p.stale.insert(ino);
            }
        }
        res
    }

    /// Creates `name` in directory `parent` and opens it for writing: only the next chunk
    /// file (`data/<nchunks>.bin`) of a 1-D source (ctable columns included: the append
    /// grows every column), which becomes an append when committed (nothing is appended if
    /// it stays empty). Returns its attributes and a handle.
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`]; [`TreeError::NotPermitted`] for any other name or place;
    /// [`TreeError::Refused`] for an N-dim array.
    pub fn create(&self, parent: u64, name: &str) -> Result<(Attr, u64), TreeError> {
        if name.len() > NAME_MAX {
            return Err(TreeError::NameTooLong);
        }
        let node = match self.resolve(parent)? {
            Resolved::Fixed(node) => node,
            Resolved::Chunk { .. } => return Err(TreeError::NotADirectory(parent)),
        };
        let NodeKind::Dir { data, .. } = &node.kind else {
            return Err(TreeError::NotADirectory(parent));
        };
        if !self.options.writable {
            return Err(TreeError::ReadOnly);
        }
        let Some(set) = *data else {
            if parent == ROOT_INO {
                return self.create_scratch(name);
            }
            return Err(TreeError::NotPermitted(format!(
                "creating {name:?}: only data/<nchunks>.bin and scratch files in the root \
                 can be created"
            )));
        };
        let src = self.source(set)?;
        let n = src.get().nchunks();
        if parse_chunk_name(name) != Some(n) {
            return Err(TreeError::NotPermitted(format!(
                "creating {name:?}: the only new name is {}",
                chunk_name(n)
            )));
        }
        if !src.one_d() {
            return Err(TreeError::Refused(
                "appending a chunk to an N-dim array (only 1-D sources can grow)".into(),
            ));
        }
        if n as u64 >= self.chunk_capacity(set) {
            return Err(TreeError::NotPermitted(format!(
                "creating {name:?}: no inode numbers left for more chunks of this data set"
            )));
        }
        let ino = self.chunk_ino(set, n);
        self.pending.lock().chunks.entry(ino).or_insert(DirtyChunk {
            set,
            index: n,
            data: Vec::new(),
            append: true,
            version: 0,
            dirty: true,
            open_trunc: false,
        });
        let fh = self.open(ino, libc::O_WRONLY)?;
        Ok((self.getattr(ino)?, fh))
    }

    /// Removes `name` from `parent`: only the last chunk file of a 1-D source (committed at
    /// once as a truncation) or a chunk file still being created.
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`]; [`TreeError::NotFound`]; [`TreeError::NotPermitted`] for
    /// anything else; commit errors as [`Tree::flush`].
    pub fn unlink(&self, parent: u64, name: &str) -> Result<(), TreeError> {
        let attr = self.lookup(parent, name)?;
        if !self.options.writable {
            return Err(TreeError::ReadOnly);
        }
        let ino = attr.ino;
        if ino >= SCRATCH_BASE {
            self.pending.lock().scratch.remove(&ino);
            return Ok(());
        }
        let Ok(Resolved::Chunk { set, index }) = self.resolve(ino) else {
            return Err(TreeError::NotPermitted(format!(
                "removing {name:?}: only the last chunk file can be removed"
            )));
        };
        let src = self.source(set)?;
        {
            let mut p = self.pending.lock();
            if p.chunks.get(&ino).is_some_and(|c| c.append) {
                p.chunks.remove(&ino);
                return Ok(());
            }
        }
        if index + 1 != src.get().nchunks() || !src.one_d() {
            return Err(TreeError::NotPermitted(format!(
                "removing {name:?}: only the last chunk of a 1-D source can be removed"
            )));
        }
        let gone = DirtyChunk {
            set,
            index,
            data: Vec::new(),
            append: false,
            version: 0,
            dirty: true,
            open_trunc: false,
        };
        let mut enc = self.committer.lock();
        self.commit_chunk_buffer(ino, &gone, &mut enc)?;
        self.pending.lock().chunks.remove(&ino);
        Ok(())
    }

    /// Commits chunk buffer `c` (of inode `ino`), then shows the result: the sources
    /// reloaded, cached copies of changed chunks dropped, `meta/sizes` re-rendered. A ctable
    /// column goes through [`write::commit_table_chunk`] (a row-count change resizes every
    /// column) and every column is reloaded. When the source changed on disk (another
    /// writer), the tree reloads it and drops its cached chunks, so later edits apply to
    /// what is stored now; the edit itself fails with ESTALE.
    fn commit_chunk_buffer(
        &self,
        ino: u64,
        c: &DirtyChunk,
        enc: &mut Encoder,
    ) -> Result<(), TreeError> {
        let src = self.source(c.set)?;
        if self.table().is_some() {
            // A row-count change writes every column: each must be writable (else EROFS, as
            // for the edited one).
            for set in 0..self.sources.len() {
                self.source(set)?;
            }
        }
        let res = match self.table() {
            Some(table) => write::commit_table_chunk(table, src, c, enc),
            None => write::commit_chunk(src, c, enc),
        };
        let stale = matches!(res, Err(ContainerError::Changed { .. }));
        if stale || (res.is_ok() && self.table().is_some()) {
            // Every column (a table commit may resize them all; a stale view may be
            // anywhere).
            self.refresh(stale)
                .map_err(|source| TreeError::Commit { ino, source })?;
        } else if res.is_ok() {
            // `commit_chunk` reloaded the one source.
            self.rerender_sizes(c.set, src);
        }
        if res.is_ok() {
            self.invalidate(c.set, c.index);
        }
        res.map_err(|source| TreeError::Commit { ino, source })
    }

    /// Reloads the source of every data set and drops cached copies of the chunks that may
    /// differ: with `all`, every chunk; else those from the last chunk both versions have
    /// on.
    fn refresh(&self, all: bool) -> Result<(), ContainerError> {
        if all {
            self.pending.lock().foreign = true;
        }
        for set in 0..self.sources.len() {
            let Some(src) = self.sources.get(set).and_then(Option::as_ref) else {
                continue;
            };
            let old_n = src.get().nchunks();
            src.reload()?;
            let new_n = src.get().nchunks();
            if all {
                self.invalidate_set(set);
            } else {
                for index in old_n.min(new_n).saturating_sub(1)..old_n {
                    self.invalidate(set, index);
                }
            }
            self.rerender_sizes(set, src);
        }
        Ok(())
    }

    /// Creates the in-memory scratch file `name` in the root (an editor's temp file): never
    /// stored, gone at unmount; renaming it over `__attrs__` commits its content.
    fn create_scratch(&self, name: &str) -> Result<(Attr, u64), TreeError> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(TreeError::InvalidArgument("name"));
        }
        if self.lookup(ROOT_INO, name).is_ok() {
            return Err(TreeError::NotPermitted(format!(
                "creating {name:?}: it exists"
            )));
        }
        let ino = {
            let mut p = self.pending.lock();
            p.next_scratch += 1;
            let ino = SCRATCH_BASE + p.next_scratch;
            p.scratch.insert(
                ino,
                write::Scratch {
                    name: name.to_owned(),
                    data: Vec::new(),
                },
            );
            ino
        };
        let fh = self.open(ino, libc::O_WRONLY)?;
        Ok((self.getattr(ino)?, fh))
    }

    /// `chmod`/`chown` of `ino`: accepted (and ignored) for scratch files, whose editors copy
    /// the original's mode; refused for everything else.
    ///
    /// # Errors
    /// As [`Tree::modify`].
    pub fn set_mode_owner(&self, ino: u64) -> Result<(), TreeError> {
        if self.options.writable && ino >= SCRATCH_BASE {
            return self.getattr(ino).map(|_| ());
        }
        self.modify(ino, "chmod/chown")
    }

    /// `rename(2)`: only a scratch file of the root, to another free name of the root or over
    /// an `__attrs__` file of the root, which commits the scratch content as the attributes
    /// (refused content: EINVAL, the scratch file stays).
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`]; [`TreeError::NotPermitted`] for any other rename; commit
    /// errors as [`Tree::flush`].
    pub fn rename(
        &self,
        parent: u64,
        name: &str,
        newparent: u64,
        newname: &str,
    ) -> Result<(), TreeError> {
        let from = self.lookup(parent, name)?.ino;
        if !self.options.writable {
            return Err(TreeError::ReadOnly);
        }
        if from < SCRATCH_BASE || newparent != ROOT_INO {
            return Err(TreeError::NotPermitted(format!(
                "renaming {name:?}: only scratch files of the root can be renamed"
            )));
        }
        let target = self.lookup(ROOT_INO, newname).ok().map(|a| a.ino);
        match target {
            None => {
                if let Some(f) = self.pending.lock().scratch.get_mut(&from) {
                    f.name = newname.to_owned();
                }
                Ok(())
            }
            Some(t) if t >= SCRATCH_BASE => {
                let mut p = self.pending.lock();
                p.scratch.remove(&t);
                if let Some(f) = p.scratch.get_mut(&from) {
                    f.name = newname.to_owned();
                }
                Ok(())
            }
            Some(t) if self.attrs_targets.contains_key(&t) => {
                self.write_target(t)?;
                let data = self
                    .pending
                    .lock()
                    .scratch
                    .get(&from)
                    .map(|f| f.data.clone())
                    .unwrap_or_default();
                self.with_buffer(t, &WriteTarget::Attrs, |buf, _| {
                    *buf = data;
                    Ok(())
                })?;
                let res = self.commit(t, Commit::Now);
                let mut p = self.pending.lock();
                match res {
                    Ok(()) => {
                        p.scratch.remove(&from);
                        Ok(())
                    }
                    Err(e) => {
                        if let Some(a) = p.attrs.get_mut(&t) {
                            a.data = a.stored.clone();
                            a.dirty = false;
                        }
                        Err(e)
                    }
                }
            }
            Some(_) => Err(TreeError::NotPermitted(format!(
                "renaming over {newname:?}: only __attrs__ can be replaced"
            ))),
        }
    }

    /// `fsync(2)` of file `ino`: commits its buffer; durable when this returns `Ok`.
    ///
    /// # Errors
    /// As [`Tree::flush`].
    pub fn fsync(&self, ino: u64, fh: u64) -> Result<(), TreeError> {
        let write = self.handles.lock().get(&fh).is_some_and(|h| h.write);
        if write {
            self.commit(ino, Commit::Now)
        } else {
            Ok(())
        }
    }

    /// `close(2)` of a descriptor of file `ino` (may come several times): when `fh` was opened
    /// for writing, commits the file's buffer if it has changes.
    ///
    /// # Errors
    /// [`TreeError::Refused`] for `__attrs__` content that is not a JSON object (the stored
    /// attributes are kept and the file shows them again); [`TreeError::Commit`] when the
    /// container layer refuses the edit (EINVAL) or fails (errno of [`TreeError::errno`]). A
    /// chunk file emptied by an `O_TRUNC` open and not written since is committed by fsync or
    /// the last close only (shells close a duplicate descriptor before writing).
    ///
    /// A refused edit (EINVAL, EFBIG, EOPNOTSUPP) of a file that no other handle is writing is
    /// dropped here, as the release would drop it: the kernel sends the release after
    /// `close(2)` has returned, and a program that looks again right after a refused close
    /// must see the stored file. (A descriptor `dup`ed from the same open that keeps writing
    /// starts again from what is stored.)
    pub fn flush(&self, ino: u64, fh: u64) -> Result<(), TreeError> {
        let write = self.handles.lock().get(&fh).is_some_and(|h| h.write);
        if !write {
            return Ok(());
        }
        let res = self.commit(ino, Commit::Flush);
        if let Err(e) = &res {
            let refused = matches!(e.errno(), libc::EINVAL | libc::EFBIG | libc::EOPNOTSUPP);
            let other_writer = self
                .handles
                .lock()
                .iter()
                .any(|(&other, o)| other != fh && o.ino == ino && o.write);
            if refused && !other_writer {
                self.drop_pending(ino);
            }
        }
        res
    }

    /// Forgets the buffered edit of `ino` after a failed or refused commit: a chunk's buffer
    /// is dropped (the kernel's pages of it are stale from now on), an `__attrs__` buffer
    /// shows the stored attributes again.
    fn drop_pending(&self, ino: u64) {
        let mut p = self.pending.lock();
        if p.chunks.remove(&ino).is_some() {
            p.stale.insert(ino);
        }
        if let Some(a) = p.attrs.get_mut(&ino) {
            a.data = a.stored.clone();
            a.dirty = false;
        }
    }

    /// Drops cached copies of a chunk after its source was swapped. A load that started
    /// before the swap may still be in flight and would cache the old chunk: wait for it
    /// (a `get_or_load` whose loader refuses), then drop again. Loads starting after the swap
    /// read the new source.
    fn invalidate(&self, set: usize, index: usize) {
        self.forget_chunks(|s, i| (s, i) == (set, index));
    }

    /// Drops cached copies of every chunk of data set `set` (as [`Tree::invalidate`]).
    fn invalidate_set(&self, set: usize) {
        self.forget_chunks(|s, _| s == set);
    }

    /// Drops everything cached of the chunks `(set, index)` that `which` selects, joining
    /// loads in flight (see [`ChunkCache::purge_where`]). Loads that start later read the
    /// swapped-in source, since loaders fetch it inside their closures. Pages are dropped
    /// after the blocks they are cut from, behind a generation bump (see the read path).
    fn forget_chunks(&self, which: impl Fn(usize, usize) -> bool) {
        let core = &self.core;
        core.block_sizes.lock().retain(|&(s, i), _| !which(s, i));
        core.blocks.purge_where(|&(s, i, _)| which(s, i));
        core.page_gen.fetch_add(1, Ordering::SeqCst);
        core.pages.purge_where(|&(s, i, _)| which(s, i));
        for cache in [&core.cache, &core.raw] {
            cache.purge_where(|&(s, i)| which(s, i));
        }
    }

    /// Renders `meta/sizes` of data set `set` again from its (just reopened) source.
    fn rerender_sizes(&self, set: usize, src: &Source) {
        let Some(&ino) = self.sizes_files.get(&set) else {
            return;
        };
        match view::sizes(&src.get()) {
            Ok(v) => {
                self.pending
                    .lock()
                    .rendered
                    .insert(ino, view::json_file(&v));
            }
            Err(e) => log::warn!("meta/sizes not updated: {}", display_chain(&e)),
        }
    }

    /// Whether the kernel may keep its cached pages of `ino` when it is opened: yes on a
    /// read-only tree; on a read-write one not for `__attrs__` files (a refused edit restores
    /// the stored content) nor for a chunk file whose buffered edit was dropped since the last
    /// open (the kernel's pages hold bytes that were never stored).
    pub fn keep_cache(&self, ino: u64) -> bool {
        if !self.options.writable {
            return true;
        }
        if self.attrs_targets.contains_key(&ino) {
            return false;
        }
        let mut p = self.pending.lock();
        !p.foreign && !p.rendered.contains_key(&ino) && !p.stale.remove(&ino)
    }

    /// Commits the buffer of `ino` if it has changes (`at`: what asks).
    fn commit(&self, ino: u64, at: Commit) -> Result<(), TreeError> {
        if !self.options.writable {
            return Ok(());
        }
        let mut enc = self.committer.lock();
        let (chunk, attrs) = {
            let p = self.pending.lock();
            (
                p.chunks.get(&ino).filter(|c| c.dirty).cloned(),
                p.attrs.get(&ino).filter(|a| a.dirty).cloned(),
            )
        };
        if let Some(c) = chunk {
            if c.data.is_empty() && (c.append || (c.open_trunc && at == Commit::Flush)) {
                // Still empty (a shell's `>` closes a duplicate first): wait for the data.
                return Ok(());
            }
            let res = self.commit_chunk_buffer(ino, &c, &mut enc);
            if let Err(e) = &res {
                if e.errno() == libc::ESTALE {
                    // Made against content another writer has replaced: dropped.
                    let mut p = self.pending.lock();
                    if p.chunks.remove(&ino).is_some() {
                        p.stale.insert(ino);
                    }
                }
            }
            res?;
            let mut p = self.pending.lock();
            if p.chunks
                .get(&ino)
                .is_some_and(|now| now.version == c.version)
            {
                p.chunks.remove(&ino);
            } else if let Some(now) = p.chunks.get_mut(&ino) {
                now.append = false;
            }
            return Ok(());
        }
        let Some(a) = attrs else { return Ok(()) };
        if a.data.is_empty() && at == Commit::Flush {
            // Issue 15: still empty (a shell's `>` closes a duplicate first): wait for the
            // data, as for chunks; refusing here dropped the buffer, and the data then landed
            // over the stored attributes (`echo '{...}' > __attrs__` never committed).
            return Ok(());
        }
        // A refused buffer stays as written until the last handle is released (a shell's `>`
        // flushes a duplicate descriptor before writing); release then restores the stored
        // content.
        let revert = |why: String| {
            log::warn!("inode {ino}: __attrs__ not saved, the stored attributes are kept: {why}");
            TreeError::Refused(format!("__attrs__: {why}"))
        };
        let value = write::parse_attrs(&a.data).map_err(revert)?;
        let res = match self.attrs_targets.get(&ino) {
            Some(AttrsTarget::Set(set)) => {
                let src = self.source(*set)?;
                let edit = crate::container::write::Edit {
                    attrs: Some(value),
                    ..Default::default()
                };
                crate::container::write::commit(&src.get(), &edit).and_then(|()| src.reload())
            }
            Some(AttrsTarget::Table(path)) => match crate::container::open(path) {
                Ok(crate::container::Container::Table(t)) => {
                    crate::container::write::commit_table_attrs(&t, &value)
                }
                Ok(_) => Err(ContainerError::Changed {
                    path: path.clone(),
                    why: "it no longer opens as a ctable".into(),
                }),
                Err(e) => Err(e),
            },
            None => return Err(TreeError::MetadataFile),
        };
        if let Err(source) = res {
            let e = TreeError::Commit { ino, source };
            if e.errno() == libc::EINVAL {
                return Err(revert(display_chain(&e)));
            }
            if e.errno() == libc::ESTALE {
                // Another writer changed the source: show what is stored now; the edit is
                // dropped (it would silently replace that writer's attributes).
                log::warn!("inode {ino}: __attrs__ not saved: {}", display_chain(&e));
                if self.refresh(true).is_ok() {
                    if let Some(AttrsTarget::Set(set)) = self.attrs_targets.get(&ino) {
                        if let Some(src) = self.sources.get(*set).and_then(Option::as_ref) {
                            let fresh = view::json_file(src.get().attrs());
                            let mut p = self.pending.lock();
                            if let Some(now) = p.attrs.get_mut(&ino) {
                                now.data = fresh.clone();
                                now.stored = fresh;
                                now.dirty = false;
                            }
                        }
                    }
                }
            }
            return Err(e);
        }
        let mut p = self.pending.lock();
        if let Some(now) = p.attrs.get_mut(&ino) {
            now.stored = a.data.clone();
            if now.version == a.version {
                now.dirty = false;
            }
        }
        Ok(())
    }

    /// Filesystem statistics.
    pub fn statfs(&self) -> StatFs {
        const BSIZE: u32 = 4096;
        StatFs {
            blocks: self.total_bytes.div_ceil(u64::from(BSIZE)),
            bfree: 0,
            bavail: 0,
            files: self.nodes.len() as u64
                + self
                    .core
                    .sets
                    .iter()
                    .map(|s| s.store.nchunks() as u64)
                    .sum::<u64>(),
            ffree: 0,
            bsize: BSIZE,
            namelen: NAME_MAX as u32,
            frsize: BSIZE,
        }
    }
}

/// Trims the columns of ctable `t` that are longer than its first (what a commit cut short
/// by a crash leaves, see [`crate::container::write::repair_table`]) before a read-write tree
/// serves it; logs what it did. Returns whether anything changed on disk.
fn repair_table(t: &crate::container::Table) -> bool {
    match crate::container::write::repair_table(t) {
        Ok(r) => {
            for (name, from, to) in &r.trimmed {
                log::warn!(
                    "{}: column {name:?} trimmed from {from} to {to} rows (rows of an \
                     interrupted commit; the first column says the table has {to})",
                    t.path.display()
                );
            }
            for (name, rows) in &r.short {
                log::warn!(
                    "{}: column {name:?} has {rows} rows, fewer than the first column: the \
                     table's row count cannot be changed through the mount",
                    t.path.display()
                );
            }
            !r.trimmed.is_empty()
        }
        Err(e) => {
            log::warn!("{}: not repaired: {}", t.path.display(), display_chain(&e));
            false
        }
    }
}

/// Runs a decoder call, turning a panic into an error: a decoder bug on hostile input must
/// cost one file an EIO, not a FUSE worker thread (and with it the mount).
fn guarded<T>(f: impl FnOnce() -> Result<T, CodecError>) -> Result<T, CodecError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(CodecError::Corrupt {
            block: 0,
            stream: 0,
            reason: "the decoder panicked on this chunk (a b2fs bug; treated as corrupt)".into(),
        })
    })
}

/// Range-decodes exactly `out.len()` bytes at `offset`.
fn range_exact(chunk: &[u8], offset: usize, out: &mut [u8]) -> Result<(), CodecError> {
    let n = guarded(|| codec::decompress_range(chunk, offset, out))?;
    if n == out.len() {
        Ok(())
    } else {
        Err(CodecError::OutputSize {
            expected: offset + n,
            actual: offset + out.len(),
        })
    }
}

/// The intersection of `[offset, offset + size)` and `[0, len)` as a range of `usize`.
fn window(len: usize, offset: u64, size: u32) -> Range<usize> {
    let start = usize::try_from(offset).unwrap_or(usize::MAX).min(len);
    let end = start.saturating_add(size as usize).min(len);
    start..end
}

/// The file name of chunk `index`: 8-digit zero-padded decimal plus `.bin`.
pub fn chunk_name(index: usize) -> String {
    format!("{index:08}.bin")
}

/// The chunk index a file name stands for, accepting only the canonical spelling.
fn parse_chunk_name(name: &str) -> Option<usize> {
    let digits = name.strip_suffix(".bin")?;
    if digits.len() < 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let index: usize = digits.parse().ok()?;
    (chunk_name(index) == name).then_some(index)
}

/// A lazy directory listing; see [`Tree::readdir`].
#[derive(Debug)]
pub struct ReadDir<'a> {
    tree: &'a Tree,
    ino: u64,
    parent: u64,
    children: &'a [u64],
    data: Option<usize>,
    pos: u64,
    len: u64,
}

impl Iterator for ReadDir<'_> {
    type Item = DirEntry;

    fn next(&mut self) -> Option<DirEntry> {
        if self.pos >= self.len {
            return None;
        }
        let pos = self.pos;
        self.pos += 1;
        let (ino, kind, name) = match pos {
            0 => (self.ino, EntryKind::Directory, ".".to_owned()),
            1 => (self.parent, EntryKind::Directory, "..".to_owned()),
            _ => {
                let k = (pos - 2) as usize;
                match self.data {
                    Some(set) => (self.tree.chunk_ino(set, k), EntryKind::File, chunk_name(k)),
                    None => {
                        let child = self.children[k];
                        let node = self.tree.node(child)?;
                        let kind = match node.kind {
                            NodeKind::Dir { .. } => EntryKind::Directory,
                            NodeKind::File { .. } => EntryKind::File,
                        };
                        (child, kind, node.name.clone())
                    }
                }
            }
        };
        Some(DirEntry {
            ino,
            next_offset: pos + 1,
            kind,
            name,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.len.saturating_sub(self.pos)).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for ReadDir<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_names_round_trip_and_reject_aliases() {
        assert_eq!(chunk_name(0), "00000000.bin");
        assert_eq!(chunk_name(123_456_789), "123456789.bin");
        assert_eq!(parse_chunk_name("00000017.bin"), Some(17));
        assert_eq!(parse_chunk_name("123456789.bin"), Some(123_456_789));
        for bad in [
            "17.bin",
            "000000017.bin",
            "0000001a.bin",
            "00000017",
            "+0000017.bin",
        ] {
            assert_eq!(parse_chunk_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn window_clamps_to_file_end() {
        assert_eq!(window(10, 0, 4), 0..4);
        assert_eq!(window(10, 8, 4), 8..10);
        assert_eq!(window(10, 12, 4), 10..10);
        assert_eq!(window(10, u64::MAX, u32::MAX), 10..10);
    }
}
