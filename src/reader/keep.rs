//! The copies of the 4 KiB pages small reads keep (`small.rs`), made by a thread of their
//! own (`b2fs-pages`) after the read has its bytes, not on the read's path.
//!
//! Why: each kept page is a fresh 4 KiB allocation. Until the page cache is full (16 MiB),
//! every one of them grows the heap (an `mprotect`) and faults in a page the kernel must
//! zero first, slow on the target VMs ([`crate::mem`]): about 15% of a cold 4 KiB read of a
//! chunk file (BENCHMARKS.md, session 13). The read answers from its decoded block, which
//! the block cache holds anyway; the copies are only for re-reads after that block is gone.
//!
//! A small read of a block whose only filter is a byte shuffle unshuffles only its own bytes
//! (`small.rs`): the job then also unshuffles the whole block into the block cache (for
//! re-reads near it), and until it has, reads of that block take their bytes from the
//! shuffled block ([`Filtered`]). That takes the unshuffle of 128 KiB and the block cache's
//! fresh buffers off the read's path: ~20% of a cold 4 KiB read (BENCHMARKS.md, session 15).
//!
//! The queue is short ([`QUEUE`] jobs, each holding a block alive): when it is full, or the
//! thread cannot be started, the reader runs the job itself, as before. The thread is woken
//! for each job: collecting them every millisecond instead (no wake-up on the read's path)
//! measured slower (session 15). A job keeps the
//! generation its read saw: pages of a block a commit replaced in the meantime are not kept
//! (`Core::keep_pages`). Tests that look for kept pages wait for them
//! ([`ChunkReader::pages_settled`]).

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::{Condvar, Mutex};

use super::{BlockKey, Bytes, ChunkKey, ChunkReader, Core};

/// Most jobs waiting for the thread (each holds one decoded block alive).
const QUEUE: usize = 16;

/// What a job does.
enum Work {
    /// Keep pages cut from a decoded block.
    Pages(Bytes),
    /// Unshuffle a block decoded up to its shuffle (`small.rs`) into a block-cache buffer,
    /// cache it, then keep the pages from it.
    Filtered {
        block: usize,
        filtered: Arc<Vec<u8>>,
        typesize: usize,
    },
}

/// Pages of one block to keep.
struct Job {
    core: Weak<Core>,
    id: ChunkKey,
    work: Work,
    /// Where the block starts in its chunk, and the chunk's size.
    start: usize,
    nbytes: usize,
    /// The pages the read asked for (only those wholly inside the block are kept).
    pages: RangeInclusive<usize>,
    /// The page generation the read saw before it got the block.
    generation: u64,
}

impl Job {
    fn run(self) {
        let Some(core) = self.core.upgrade() else {
            return;
        };
        let block = match self.work {
            Work::Pages(block) => block,
            Work::Filtered {
                block,
                filtered,
                typesize,
            } => {
                let key = (self.id, block);
                let unshuffled = core.blocks.get_or_load(key, || {
                    let mut buf = core.blocks.buffer(filtered.len());
                    crate::codec::filter::shuffle::unshuffle(typesize, &filtered, &mut buf)
                        .map(|()| buf)
                });
                // As for pages: a block a commit replaced since the read must not stay.
                if core.page_gen.load(Ordering::SeqCst) != self.generation {
                    core.blocks.remove(&key);
                }
                core.filtered.done(key, filtered);
                match unshuffled {
                    Ok(bytes) => bytes,
                    Err(_) => {
                        core.pages_done.fetch_add(1, Ordering::AcqRel);
                        return;
                    }
                }
            }
        };
        core.keep_pages(
            self.id,
            &block,
            self.start,
            self.nbytes,
            self.pages,
            self.generation,
        );
        core.pages_done.fetch_add(1, Ordering::AcqRel);
    }
}

/// A block decoded up to its shuffle, the shuffle's group size, and the page generation
/// its read saw.
pub(super) type Shuffled = (Arc<Vec<u8>>, usize, u64);

/// Blocks decoded up to their shuffle whose job has not run yet, by block: a read of one
/// of them meanwhile unshuffles its bytes from there instead of decoding the block again.
/// Also the pool of their buffers.
#[derive(Debug, Default)]
pub(super) struct Filtered {
    pub(super) pending: Mutex<HashMap<BlockKey, Shuffled>>,
    pub(super) pool: Mutex<Vec<Vec<u8>>>,
}

/// Bytes of buffers the pool keeps (beyond them the jobs' buffers are freed).
const POOL_BYTES: usize = 4 << 20;

/// Largest block small reads decode up to its shuffle (larger ones take the block way): the
/// pending blocks take at most [`QUEUE`] + 1 of these.
pub(super) const FILTERED_MAX: usize = 1 << 20;

impl Filtered {
    /// The pending filtered block `key` and its shuffle's group size.
    pub(super) fn get(&self, key: &BlockKey) -> Option<Shuffled> {
        self.pending.lock().get(key).cloned()
    }

    /// A buffer of `len` bytes (contents unspecified), from the pool when it has one.
    pub(super) fn buffer(&self, len: usize) -> Vec<u8> {
        let mut buf = self.pool.lock().pop().unwrap_or_default();
        crate::mem::grow_discarding(&mut buf, len);
        buf.truncate(len);
        buf
    }

    /// Returns a buffer to the pool (or frees it when the pool holds enough).
    pub(super) fn recycle(&self, buf: Vec<u8>) {
        let mut pool = self.pool.lock();
        let held: usize = pool.iter().map(Vec::capacity).sum();
        if held + buf.capacity() <= POOL_BYTES {
            pool.push(buf);
        }
    }

    /// Pending block `key` unshuffled into the block cache now (for a caller that takes
    /// only cached blocks, such as the pages a fault offers), or the block cached already.
    pub(super) fn cache_now(core: &Core, key: BlockKey) -> Option<Bytes> {
        let (filtered, typesize, generation) = core.filtered.get(&key)?;
        let got = core.blocks.get_or_load(key, || {
            let mut buf = core.blocks.buffer(filtered.len());
            crate::codec::filter::shuffle::unshuffle(typesize, &filtered, &mut buf).map(|()| buf)
        });
        if core.page_gen.load(Ordering::SeqCst) != generation {
            core.blocks.remove(&key);
            return None;
        }
        got.ok()
    }

    /// Drops the pending blocks of the chunks `which` selects.
    pub(super) fn forget(&self, which: impl Fn(&ChunkKey) -> bool) {
        self.pending.lock().retain(|(k, _), _| !which(k));
    }

    fn done(&self, key: BlockKey, filtered: Arc<Vec<u8>>) {
        {
            let mut pending = self.pending.lock();
            if pending
                .get(&key)
                .is_some_and(|(f, ..)| Arc::ptr_eq(f, &filtered))
            {
                pending.remove(&key);
            }
        }
        if let Ok(buf) = Arc::try_unwrap(filtered) {
            self.recycle(buf);
        }
    }
}

/// The pages thread's mailbox.
struct Queue {
    state: Mutex<State>,
    wake: Condvar,
}

struct State {
    jobs: Vec<Job>,
    /// The thread sleeps on `wake` (a reader that queues a job wakes it).
    parked: bool,
}

fn queue() -> Option<&'static Queue> {
    static Q: OnceLock<Option<&'static Queue>> = OnceLock::new();
    *Q.get_or_init(|| {
        let q: &'static Queue = Box::leak(Box::new(Queue {
            state: Mutex::new(State {
                jobs: Vec::with_capacity(QUEUE),
                parked: false,
            }),
            wake: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("b2fs-pages".into())
            .spawn(move || q.serve())
            .ok()
            .map(|_| q)
    })
}

impl Queue {
    /// The pages thread: runs the queued jobs, sleeping while there are none.
    fn serve(&self) {
        let mut local = Vec::with_capacity(QUEUE);
        loop {
            {
                let mut s = self.state.lock();
                while s.jobs.is_empty() {
                    s.parked = true;
                    self.wake.wait(&mut s);
                    s.parked = false;
                }
                std::mem::swap(&mut s.jobs, &mut local);
            }
            local.drain(..).for_each(Job::run);
        }
    }

    /// Queues `job`, or gives it back when the queue is full.
    fn push(&self, job: Job) -> Option<Job> {
        let mut s = self.state.lock();
        if s.jobs.len() >= QUEUE {
            return Some(job);
        }
        s.jobs.push(job);
        let parked = s.parked;
        drop(s);
        if parked {
            self.wake.notify_one();
        }
        None
    }
}

fn submit(core: &Arc<Core>, job: Job) {
    core.pages_queued.fetch_add(1, Ordering::AcqRel);
    match queue() {
        Some(q) => {
            if let Some(job) = q.push(job) {
                job.run();
            }
        }
        None => job.run(),
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
    let job = Job {
        core: Arc::downgrade(core),
        id,
        work: Work::Pages(Arc::clone(block)),
        start,
        nbytes,
        pages,
        generation,
    };
    submit(core, job);
}

/// Hands block `block` of chunk `id` (at `start` of a chunk of `nbytes`), decoded up to a
/// shuffle of group size `typesize` into `filtered`, to the pages thread: it is pending
/// ([`Filtered::get`]) until the thread has unshuffled it into the block cache and kept the
/// pages `pages` from it (or this thread, when the queue is full). A read of a pending
/// block hands it again, for its own pages (its job finds the block cached by then).
#[allow(clippy::too_many_arguments)]
pub(super) fn keep_filtered_later(
    core: &Arc<Core>,
    (id, block): BlockKey,
    filtered: Arc<Vec<u8>>,
    typesize: usize,
    (start, nbytes): (usize, usize),
    pages: RangeInclusive<usize>,
    generation: u64,
) {
    core.filtered
        .pending
        .lock()
        .insert((id, block), (filtered.clone(), typesize, generation));
    let job = Job {
        core: Arc::downgrade(core),
        id,
        work: Work::Filtered {
            block,
            filtered,
            typesize,
        },
        start,
        nbytes,
        pages,
        generation,
    };
    submit(core, job);
}

impl ChunkReader {
    /// Whether every page copy small reads of this reader asked for so far has been made:
    /// the pages they keep are in the page cache only once this is true.
    pub fn pages_settled(&self) -> bool {
        let core = &self.core;
        core.pages_done.load(Ordering::Acquire) >= core.pages_queued.load(Ordering::Acquire)
    }
}
