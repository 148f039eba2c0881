//! Pages offered to the kernel's page cache (`FUSE_NOTIFY_STORE`) from a thread of their own,
//! after the read that made them cheap has been answered.
//!
//! Why a thread: storing a page locks it in the kernel, and a page being read by a request
//! that a FUSE worker has not answered yet stays locked until that answer. A worker that
//! stored pages itself could wait on a request only it would serve (two workers storing the
//! pages the other one is serving would wait forever). Workers hand pages over with a
//! bounded queue, then wait for the thread a short, bounded time before they answer their
//! own read: the pages are then in the cache before the reader runs on and faults on the
//! next row (measured: stored after the answer, the reader outran the thread and most pages
//! were asked for anyway). When the queue is full the pages are dropped (they are advice;
//! the kernel asks for them again when it needs them).
//!
//! A worker waits only when the thread had nothing else to store: with several mmap readers
//! faulting on the same rows, the thread may be blocked on a page another fault holds
//! locked until its answer, and a worker waiting for the thread then holds up that answer
//! (both workers waiting made every fault cost the whole wait).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use fuser::{INodeNo, Notifier};

/// Batches of pages waiting for the thread.
const QUEUE: usize = 64;

/// Longest a worker waits for its pages to be stored before it answers its read.
const WAIT: Duration = Duration::from_millis(2);

/// One file's pages (`(offset, bytes)`), and who waits for them to be stored.
type Batch = (u64, Vec<(u64, Vec<u8>)>, SyncSender<()>);

/// The storing thread's queue; the thread ends when this is dropped.
#[derive(Debug)]
pub(crate) struct Pusher {
    queue: SyncSender<Batch>,
    /// Batches handed over and not stored yet.
    pending: Arc<AtomicUsize>,
}

impl Pusher {
    /// Starts the thread that stores pages through `notifier`.
    pub(crate) fn start(notifier: Notifier) -> std::io::Result<Pusher> {
        let (queue, batches) = sync_channel::<Batch>(QUEUE);
        let pending = Arc::new(AtomicUsize::new(0));
        let left = pending.clone();
        std::thread::Builder::new()
            .name("b2fs-push".into())
            .spawn(move || {
                for (ino, pages, done) in batches {
                    for (offset, bytes) in pages {
                        if let Err(e) = notifier.store(INodeNo(ino), offset, &bytes) {
                            // The file was forgotten or the mount is going away.
                            log::debug!("store of inode {ino} at {offset}: {e}");
                            break;
                        }
                    }
                    left.fetch_sub(1, Ordering::AcqRel);
                    // The worker may have stopped waiting.
                    let _ = done.try_send(());
                }
            })?;
        Ok(Pusher { queue, pending })
    }

    /// Hands `pages` of inode `ino` to the thread (or drops them when its queue is full)
    /// and, when the thread had nothing else to store, waits at most [`WAIT`] for them to
    /// be stored.
    pub(crate) fn offer(&self, ino: u64, pages: Vec<(u64, Vec<u8>)>) {
        if pages.is_empty() {
            return;
        }
        let (done, stored) = sync_channel(1);
        let before = self.pending.fetch_add(1, Ordering::AcqRel);
        match self.queue.try_send((ino, pages, done)) {
            Ok(()) => {
                if before == 0 {
                    let _ = stored.recv_timeout(WAIT);
                }
            }
            Err(TrySendError::Full(_)) => {
                self.pending.fetch_sub(1, Ordering::AcqRel);
                log::trace!("page store queue full: pages of inode {ino} dropped");
            }
            Err(TrySendError::Disconnected(_)) => {
                self.pending.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}
