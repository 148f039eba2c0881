//! Background decoding of the chunks a sequential scan will read next, and of the blocks a
//! page fault's neighbours need (decoded beside the fault's own block, on the other core).
//!
//! A bounded queue feeds a few threads; each request decodes one chunk (or block) into the
//! shared cache through the same single-flight path readers use, so a reader that arrives
//! while its chunk is being prefetched waits for that decode instead of starting another. A
//! full queue drops requests (prefetching is advice), and a failed prefetch is only logged at
//! debug level: the reader that needs the chunk reports the error.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

use parking_lot::Mutex;

use super::{ChunkId, ChunkStore, Core};

/// One request: a whole chunk of the array as it is now, or the block of a chunk of one
/// version that a byte falls in.
pub(crate) enum Job {
    Chunk(ChunkId),
    Block(Arc<dyn ChunkStore>, ChunkId, usize),
}

/// Queue length: a few chunks per thread are enough to keep them busy.
const QUEUE: usize = 8;

#[derive(Debug)]
pub(crate) struct Prefetcher {
    tx: Option<SyncSender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl Prefetcher {
    pub(crate) fn start(core: Arc<Core>, nthreads: usize) -> Prefetcher {
        let (tx, rx) = sync_channel::<Job>(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..nthreads)
            .filter_map(|i| {
                let (core, rx) = (core.clone(), rx.clone());
                std::thread::Builder::new()
                    .name(format!("b2fs-prefetch-{i}"))
                    .spawn(move || run(&core, &rx))
                    .map_err(|e| log::warn!("cannot start prefetch thread: {e}"))
                    .ok()
            })
            .collect();
        Prefetcher {
            tx: Some(tx),
            threads,
        }
    }

    /// Asks for chunk `id` to be decoded into the cache soon.
    pub(crate) fn request(&self, id: ChunkId) {
        self.send(Job::Chunk(id));
    }

    /// Asks for the block of chunk `id` of `store` holding byte `offset` to be decoded into
    /// the block cache soon.
    pub(crate) fn request_block(&self, store: Arc<dyn ChunkStore>, id: ChunkId, offset: usize) {
        self.send(Job::Block(store, id, offset));
    }

    fn send(&self, job: Job) {
        if let Some(tx) = &self.tx {
            match tx.try_send(job) {
                Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
            }
        }
    }
}

fn run(core: &Core, rx: &Mutex<Receiver<Job>>) {
    loop {
        let next = rx.lock().recv();
        let Ok(job) = next else { return };
        let (id, res) = match job {
            Job::Chunk(id) => (id, core.chunk_ahead(id).map(drop)),
            Job::Block(store, id, offset) => (id, core.block_ahead(store.as_ref(), id, offset)),
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
