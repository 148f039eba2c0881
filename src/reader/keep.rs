//! The copies of the 4 KiB pages small reads keep (`small.rs`), made by a thread of their
//! own (`b2fs-pages`) after the read has its bytes, not on the read's path.
//!
//! Why: each kept page is a fresh 4 KiB allocation. Until the page cache is full (16 MiB),
//! every one of them grows the heap (an `mprotect`) and faults in a page the kernel must
//! zero first, slow on the target VMs ([`crate::mem`]): about 15% of a cold 4 KiB read of a
//! chunk file (BENCHMARKS.md, session 13). The read answers from its decoded block, which
//! the block cache holds anyway; the copies are only for re-reads after that block is gone.
//!
//! The queue is short ([`QUEUE`] jobs, each holding a block alive): when it is full, or the
//! thread cannot be started, the reader keeps its pages itself, as before. A job keeps the
//! generation its read saw: pages of a block a commit replaced in the meantime are not kept
//! (`Core::keep_pages`). Tests that look for kept pages wait for them
//! ([`ChunkReader::pages_settled`]).

use std::ops::RangeInclusive;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, OnceLock, Weak};

use super::{Bytes, ChunkKey, ChunkReader, Core};

/// Most jobs waiting for the thread (each holds one decoded block alive).
const QUEUE: usize = 16;

/// Pages of one block to keep.
struct Job {
    core: Weak<Core>,
    id: ChunkKey,
    block: Bytes,
    /// Where `block` starts in its chunk, and the chunk's size.
    start: usize,
    nbytes: usize,
    /// The pages the read asked for (only those wholly inside `block` are kept).
    pages: RangeInclusive<usize>,
    /// The page generation the read saw before it got `block`.
    generation: u64,
}

impl Job {
    fn run(self) {
        if let Some(core) = self.core.upgrade() {
            core.keep_pages(
                self.id,
                &self.block,
                self.start,
                self.nbytes,
                self.pages,
                self.generation,
            );
            core.pages_done.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Keeps `core`'s pages `pages` cut from `block` (at `start` of a chunk of `nbytes`): hands
/// the copies to the pages thread (started on first use), or makes them here when its
/// queue is full or it cannot be started.
pub(super) fn keep_later(
    core: &Arc<Core>,
    id: ChunkKey,
    block: &Bytes,
    (start, nbytes): (usize, usize),
    pages: RangeInclusive<usize>,
    generation: u64,
) {
    static TX: OnceLock<Option<SyncSender<Job>>> = OnceLock::new();
    let tx = TX.get_or_init(|| {
        let (tx, rx) = sync_channel::<Job>(QUEUE);
        std::thread::Builder::new()
            .name("b2fs-pages".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job.run();
                }
            })
            .ok()
            .map(|_| tx)
    });
    core.pages_queued.fetch_add(1, Ordering::AcqRel);
    let job = Job {
        core: Arc::downgrade(core),
        id,
        block: Arc::clone(block),
        start,
        nbytes,
        pages,
        generation,
    };
    let Some(tx) = tx else {
        return job.run();
    };
    if let Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) = tx.try_send(job) {
        job.run();
    }
}

impl ChunkReader {
    /// Whether every page copy small reads of this reader asked for so far has been made:
    /// the pages they keep are in the page cache only once this is true.
    pub fn pages_settled(&self) -> bool {
        let core = &self.core;
        core.pages_done.load(Ordering::Acquire) >= core.pages_queued.load(Ordering::Acquire)
    }
}
