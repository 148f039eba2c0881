//! Background decoding of the chunks a sequential scan will read next, and of the blocks a
//! page fault's neighbours need (decoded beside the fault's own block, on the other core).
//!
//! A bounded queue feeds a few threads; each request decodes one chunk (or block) into the
//! shared cache through the same single-flight path readers use, so a reader that arrives
//! while its chunk is being prefetched waits for that decode instead of starting another. A
//! full queue drops requests (prefetching is advice), and a failed prefetch is only logged at
//! debug level: the reader that needs the chunk reports the error.
//!
//! A chunk or block is queued once however many readers ask for it ([`Prefetcher::request`],
//! [`Prefetcher::request_block`]). At most [`CHUNKS_QUEUED`] chunks wait in the queue, and
//! at most [`BLOCKS_QUEUED`] blocks: a mapped scan asks for the blocks of the next megabytes
//! at each fault, so that both cores decode ahead of it (BENCHMARKS.md, "Session 23: mapped
//! scans"). Chunk files are prefetched only along a scan ([`Scans`]): in the direction it
//! goes (Dask computes an array's chunks from the last one down, so prefetching the chunks
//! after the one being read would decode again the chunks just read), and not at all for
//! reads that jump from chunk to chunk (zarr-python reading windows reads whole chunk
//! objects at random).
//!
//! What readers ask for is here too, as [`ChunkReader`]'s prefetch methods: the chunks after
//! (or before) a chunk file's read along a scan ([`ChunkReader::prefetch_after`]), no deeper
//! than the cache holds beside it ([`ChunkReader::prefetch_depth`]); the blocks of the pages
//! a page fault offers next ([`ChunkReader::prefetch_blocks`]); and chunks a caller names
//! ([`ChunkReader::prefetch`], the next slab of `array.npy`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

use parking_lot::Mutex;

use super::{
    ArrayId, At, BlockKey, Bytes, ChunkId, ChunkKey, ChunkReader, ChunkStore, ContainerError, Core,
};

/// One request: a whole chunk of the array as it is now, or the block of a chunk of one
/// version that a byte falls in.
pub(crate) enum Job {
    Chunk(ChunkId),
    Block(Arc<dyn ChunkStore>, ChunkId, usize, BlockKey),
    /// A band of a scan of an assembled file (`bands.rs`), decoded ahead of its reader.
    Band(Arc<super::bands::Band>, super::bands::Source),
}

/// Most chunks waiting in the queue: a few per thread are enough to keep them busy.
const CHUNKS_QUEUED: usize = 8;

/// Most blocks waiting in the queue: 8 MiB of python-blosc2's 128 KiB blocks, the blocks a
/// mapped scan asks for ahead of it (`tree/npy/mapped.rs`; measured: with 8 jobs in all, the
/// prefetch threads ran dry between its faults and the cores idled 25% of a scan).
const BLOCKS_QUEUED: usize = 64;

/// Most bands of scans waiting in the queue (a band no thread takes is decoded by its
/// reader): the chunks' and blocks' room stays theirs.
const BANDS_QUEUED: usize = 8;

/// A chunk streamed and evicted during this many of the latest loads of whole chunks is not
/// decoded ahead again ([`crate::cache::ChunkCache::streamed_lately`]): a scan has just read it.
const LATELY: u64 = 4;

/// How far the direction vote of a scan goes either way: a few steps the other way (readers
/// working side by side start their chunks a little out of order) do not turn it.
const VOTES: i8 = 4;

/// The largest step between chunk starts that continues a scan (readers side by side, each
/// on its own chunk, start theirs a few chunks apart).
const NEAR: usize = 8;

#[derive(Debug)]
pub(crate) struct Prefetcher {
    tx: Option<SyncSender<Job>>,
    threads: Vec<JoinHandle<()>>,
    /// Chunks and blocks queued and not yet taken by a thread.
    queued: Arc<Mutex<Queued>>,
}

/// What waits in the queue of a [`Prefetcher`].
#[derive(Debug, Default)]
struct Queued {
    chunks: HashSet<ChunkId>,
    blocks: HashSet<BlockKey>,
    /// Bands of scans (`bands.rs`) waiting.
    bands: usize,
}

impl Queued {
    /// Whether chunk `id` may be queued (and notes it queued): it is not queued yet and
    /// fewer than [`CHUNKS_QUEUED`] chunks are.
    fn admit_chunk(&mut self, id: ChunkId) -> bool {
        self.chunks.len() < CHUNKS_QUEUED && self.chunks.insert(id)
    }

    /// The same for block `key`, up to [`BLOCKS_QUEUED`] blocks.
    fn admit_block(&mut self, key: BlockKey) -> bool {
        self.blocks.len() < BLOCKS_QUEUED && self.blocks.insert(key)
    }
}

/// Whether the chunk reads of each array are a scan, and which way it goes, from the steps
/// between the chunks reads start on.
#[derive(Debug, Default)]
pub(crate) struct Scans {
    arrays: Mutex<HashMap<ArrayId, Scan>>,
}

/// The chunk reads of one array.
#[derive(Debug, Clone, Copy)]
struct Scan {
    /// The chunk the latest read that started a chunk was of.
    last: usize,
    /// The direction vote: +1 for each step up, -1 down, within `-VOTES..=VOTES`.
    vote: i8,
    /// How many of the latest steps (up to 2) were at most [`NEAR`] chunks.
    near: u8,
}

impl Scans {
    /// Whether the reads of `id`'s array scan it, and if so whether downwards, after noting
    /// that a read of chunk `id` starts when `starts` (its first bytes). The first read of an
    /// array and a read of its first chunk count as (re)starting a scan up (`cat data/*`);
    /// other reads as a scan when the last two steps were near.
    pub(crate) fn way(&self, id: ChunkId, starts: bool) -> Option<bool> {
        let mut arrays = self.arrays.lock();
        let scan = arrays.entry(id.array).or_insert(Scan {
            last: id.index,
            vote: 0,
            near: 2,
        });
        if starts && id.index != scan.last {
            let up = id.index > scan.last;
            let near = id.index.abs_diff(scan.last) <= NEAR;
            scan.vote = (scan.vote + if up { 1 } else { -1 }).clamp(-VOTES, VOTES);
            scan.near = match (id.index, near) {
                (0, _) => 2,
                (_, true) => (scan.near + 1).min(2),
                (_, false) => 0,
            };
            scan.last = id.index;
        }
        (scan.near == 2).then_some(scan.vote < 0)
    }
}

impl Prefetcher {
    pub(crate) fn start(core: Arc<Core>, nthreads: usize) -> Prefetcher {
        let (tx, rx) = sync_channel::<Job>(CHUNKS_QUEUED + BLOCKS_QUEUED);
        let rx = Arc::new(Mutex::new(rx));
        let queued = Arc::new(Mutex::new(Queued::default()));
        let threads = (0..nthreads)
            .filter_map(|i| {
                let (core, rx, queued) = (core.clone(), rx.clone(), queued.clone());
                std::thread::Builder::new()
                    .name(format!("b2fs-prefetch-{i}"))
                    .spawn(move || run(&core, &rx, &queued))
                    .map_err(|e| log::warn!("cannot start prefetch thread: {e}"))
                    .ok()
            })
            .collect();
        Prefetcher {
            tx: Some(tx),
            threads,
            queued,
        }
    }

    /// Asks for chunk `id` to be decoded into the cache soon, unless it is queued already
    /// (or [`CHUNKS_QUEUED`] chunks are).
    pub(crate) fn request(&self, id: ChunkId) {
        if !self.queued.lock().admit_chunk(id) {
            return;
        }
        if !self.send(Job::Chunk(id)) {
            self.queued.lock().chunks.remove(&id);
        }
    }

    /// Asks for the block of chunk `id` of `store` holding byte `offset` (block `key`) to be
    /// decoded into the block cache soon, unless it is queued already (or [`BLOCKS_QUEUED`]
    /// blocks are).
    ///
    /// False when the block was dropped (the queue full): not queued now, nor before.
    pub(crate) fn request_block(
        &self,
        store: Arc<dyn ChunkStore>,
        id: ChunkId,
        offset: usize,
        key: BlockKey,
    ) -> bool {
        {
            let mut q = self.queued.lock();
            if q.blocks.contains(&key) {
                return true;
            }
            if !q.admit_block(key) {
                return false;
            }
        }
        if !self.send(Job::Block(store, id, offset, key)) {
            self.queued.lock().blocks.remove(&key);
            return false;
        }
        true
    }

    /// Asks for `band` of `source` to be decoded ahead of its reader; dropped when the queue
    /// is full (its reader then decodes it).
    pub(crate) fn request_band(&self, band: Arc<super::bands::Band>, source: super::bands::Source) {
        {
            let mut q = self.queued.lock();
            if q.bands >= BANDS_QUEUED {
                return;
            }
            q.bands += 1;
        }
        if !self.send(Job::Band(band, source)) {
            self.queued.lock().bands -= 1;
        }
    }

    /// Queues `job`; false when the queue is full (the job is dropped).
    fn send(&self, job: Job) -> bool {
        let Some(tx) = &self.tx else { return false };
        match tx.try_send(job) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

impl Core {
    /// A prefetch of a whole chunk of the store as it is now, kept ahead of its reader
    /// ([`crate::cache::ChunkCache::load_ahead`]).
    fn chunk_ahead(&self, id: ChunkId) -> Result<Bytes, ContainerError> {
        let store = self.pinned(id.array);
        let at = At::new(store.as_ref(), id);
        if self.cache.contains_or_loading(&at.key) || self.cache.streamed_lately(&at.key, LATELY) {
            return Ok(Bytes::default());
        }
        self.cache.load_ahead(at.key, || self.decode(&at, false))
    }
}

impl ChunkReader {
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
}

fn run(core: &Core, rx: &Mutex<Receiver<Job>>, queued: &Mutex<Queued>) {
    loop {
        let next = rx.lock().recv();
        let Ok(job) = next else { return };
        let (id, res) = match job {
            Job::Chunk(id) => {
                queued.lock().chunks.remove(&id);
                (id, core.chunk_ahead(id).map(drop))
            }
            Job::Block(store, id, offset, key) => {
                queued.lock().blocks.remove(&key);
                (id, core.block_ahead(store.as_ref(), id, offset))
            }
            Job::Band(band, source) => {
                queued.lock().bands -= 1;
                band.run_ahead(core, &source);
                continue;
            }
        };
        if let Err(e) = res {
            log::debug!(
                "prefetch of chunk {} failed: {}",
                id.index,
                crate::error::display_chain(&e)
            );
        }
    }
}

impl Drop for Prefetcher {
    fn drop(&mut self) {
        self.tx.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_follow_the_steps_between_chunk_starts() {
        let s = Scans::default();
        let at = |i| ChunkId::new(ArrayId(0), i);
        let (up, down) = (Some(false), Some(true));
        assert_eq!(s.way(at(90), true), up, "no step yet: a scan up");
        assert_eq!(s.way(at(89), true), down);
        // Later reads of the same chunk, and reads that do not start one, are no steps.
        assert_eq!(s.way(at(89), true), down);
        assert_eq!(s.way(at(20), false), down);
        for i in (80..89).rev() {
            assert_eq!(s.way(at(i), true), down);
        }
        // Readers side by side start their chunks a little out of order: one step up does
        // not turn a scan that goes down.
        assert_eq!(s.way(at(83), true), down);
        assert_eq!(s.way(at(82), true), down);
        // A run of steps up does; another array has its own scan.
        for i in 83..88 {
            s.way(at(i), true);
        }
        assert_eq!(s.way(at(88), true), up);
        assert_eq!(s.way(ChunkId::new(ArrayId(1), 5), true), up);
        // Reads that jump around are no scan, even when two follow each other; two near
        // steps in a row make one again.
        assert_eq!(s.way(at(10), true), None);
        assert_eq!(s.way(at(11), true), None);
        assert_eq!(s.way(at(60), true), None);
        assert_eq!(s.way(at(61), true), None);
        assert_eq!(s.way(at(62), true), up);
        // Back to the first chunk: a scan starting over.
        assert_eq!(s.way(at(0), true), up);
    }

    #[test]
    fn chunks_and_blocks_are_queued_once_and_each_up_to_its_bound() {
        let mut q = Queued::default();
        let chunk = |i| ChunkId::new(ArrayId(0), i);
        let block = |i| {
            let key = ChunkKey {
                id: chunk(i / 8),
                stamp: 1,
            };
            (key, i % 8)
        };
        assert!(q.admit_block(block(0)));
        assert!(
            !q.admit_block(block(0)),
            "a block waiting is not queued again"
        );
        assert!(q.admit_chunk(chunk(0)));
        assert!(!q.admit_chunk(chunk(0)));
        for i in 1..BLOCKS_QUEUED {
            assert!(q.admit_block(block(i)), "block {i}");
        }
        assert!(
            !q.admit_block(block(BLOCKS_QUEUED)),
            "past the bound of blocks"
        );
        // Blocks do not take the chunks' room, nor chunks the blocks'.
        for i in 1..CHUNKS_QUEUED {
            assert!(q.admit_chunk(chunk(i)), "chunk {i}");
        }
        assert!(!q.admit_chunk(chunk(CHUNKS_QUEUED)));
        // Taken by a thread: the same block may be queued again.
        q.blocks.remove(&block(0));
        assert!(q.admit_block(block(0)));
    }
}
