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
//! Each page is queued once: a page already waiting in the queue is not handed over again,
//! and a page that a fault asks for is taken out of the queue (the fault's answer fills it;
//! storing it would wait for that answer). A worker waits until everything queued before its
//! answer is stored, the pages of earlier faults included: when the thread falls behind (a
//! busy machine), a reader that outran it faults on a page still queued, and answering that
//! fault at once would let it outrun the thread on every row of its window, each fault
//! queueing the same rows again (measured: 13 faults per 64-row window instead of 2). A fault
//! takes its pages out of the queue when its request arrives; if the thread is storing one of
//! them already (queued by another reader's fault, locked by the kernel for this one), that
//! store waits for this answer, so the worker answers without waiting for the thread.

use std::collections::HashSet;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use fuser::{INodeNo, Notifier};

/// Batches of pages waiting for the thread.
const QUEUE: usize = 64;

/// Longest a worker waits for the pages queued before its answer to be stored.
const WAIT: Duration = Duration::from_millis(2);

/// One file's pages (`(offset, bytes)`) and the batch's ticket.
type Batch = (u64, Vec<(u64, Vec<u8>)>, u64);

/// What the workers and the thread share.
#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    stored: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Pages `(inode, offset)` queued and not stored yet.
    queued: HashSet<(u64, u64)>,
    /// Tickets of the latest batch handed over, and of the latest one stored.
    handed: u64,
    done: u64,
    /// The page `(inode, offset)` being stored now.
    storing: Option<(u64, u64)>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    /// Takes the pages of `reading` of inode `ino` out of the queue.
    fn cancel(&mut self, ino: u64, reading: std::ops::Range<u64>) {
        if self.queued.is_empty() {
            return;
        }
        let mut at = reading.start / PAGE * PAGE;
        while at < reading.end {
            self.queued.remove(&(ino, at));
            at += PAGE;
        }
    }
}

/// The storing thread's queue; the thread ends when this is dropped.
#[derive(Debug)]
pub(crate) struct Pusher {
    queue: SyncSender<Batch>,
    shared: Arc<Shared>,
    /// Longest a worker waits ([`WAIT`]; longer in tests).
    wait: Duration,
}

impl Pusher {
    /// Starts the thread that stores pages through `notifier`.
    pub(crate) fn start(notifier: Notifier) -> std::io::Result<Pusher> {
        Pusher::start_with(WAIT, move |ino, offset, bytes| {
            notifier.store(INodeNo(ino), offset, bytes)
        })
    }

    /// Starts the thread that stores each page with `store(inode, offset, bytes)`; workers
    /// wait at most `wait` for it.
    fn start_with(
        wait: Duration,
        mut store: impl FnMut(u64, u64, &[u8]) -> std::io::Result<()> + Send + 'static,
    ) -> std::io::Result<Pusher> {
        let (queue, batches) = sync_channel::<Batch>(QUEUE);
        let shared = Arc::new(Shared::default());
        let theirs = shared.clone();
        std::thread::Builder::new()
            .name("b2fs-push".into())
            .spawn(move || {
                for (ino, pages, ticket) in batches {
                    let mut failed = false;
                    for (offset, bytes) in pages {
                        // Taken out of the queue by a fault that reads it, or not wanted any
                        // more after a failed store of this file.
                        {
                            let mut state = theirs.lock();
                            if !state.queued.remove(&(ino, offset)) || failed {
                                continue;
                            }
                            state.storing = Some((ino, offset));
                        }
                        if let Err(e) = store(ino, offset, &bytes) {
                            // The file was forgotten or the mount is going away.
                            log::debug!("store of inode {ino} at {offset}: {e}");
                            failed = true;
                        }
                        theirs.lock().storing = None;
                    }
                    theirs.lock().done = ticket;
                    theirs.stored.notify_all();
                }
            })?;
        Ok(Pusher {
            queue,
            shared,
            wait,
        })
    }

    /// Before a page fault of inode `ino` that reads the pages of `reading` is served: takes
    /// them out of the queue (the answer fills them; a store of one would wait for it).
    pub(crate) fn reading(&self, ino: u64, reading: std::ops::Range<u64>) {
        let mut state = self.shared.lock();
        state.cancel(ino, reading);
    }

    /// After a page fault of inode `ino` that reads the pages of `reading` (which the answer
    /// fills: they are taken out of the queue): hands those of `pages` that are not queued yet
    /// to the thread (or drops them when its queue is full), then waits at most [`WAIT`] until
    /// every page queued so far is stored; not at all when the thread is storing one of the
    /// fault's own pages (queued before the fault came: that store waits for this answer).
    pub(crate) fn offer(
        &self,
        ino: u64,
        reading: std::ops::Range<u64>,
        mut pages: Vec<(u64, Vec<u8>)>,
    ) {
        let (target, blocked) = {
            let mut state = self.shared.lock();
            state.cancel(ino, reading.clone());
            let blocked = state
                .storing
                .is_some_and(|(i, at)| i == ino && reading.contains(&at));
            pages.retain(|(offset, _)| state.queued.insert((ino, *offset)));
            if !pages.is_empty() {
                let ticket = state.handed + 1;
                let offsets: Vec<u64> = pages.iter().map(|(o, _)| *o).collect();
                match self.queue.try_send((ino, pages, ticket)) {
                    Ok(()) => state.handed = ticket,
                    Err(e) => {
                        for o in offsets {
                            state.queued.remove(&(ino, o));
                        }
                        if let TrySendError::Full(_) = e {
                            log::trace!("page store queue full: pages of inode {ino} dropped");
                        }
                    }
                }
            }
            (state.handed, blocked)
        };
        if blocked {
            return;
        }
        let deadline = Instant::now() + self.wait;
        let mut state = self.shared.lock();
        while state.done < target {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            state = match self.shared.stored.wait_timeout(state, left) {
                Ok((s, _)) => s,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

/// Size of the kernel's page-cache pages.
const PAGE: u64 = 4096;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    fn page(b: u8) -> Vec<u8> {
        vec![b; PAGE as usize]
    }

    #[test]
    fn each_page_is_stored_once_and_a_faulted_page_not_at_all() {
        let (tx, rx) = channel();
        let (gate_tx, gate) = channel::<()>();
        let gate = Mutex::new(gate);
        let pusher = Pusher::start_with(WAIT, move |ino, offset, bytes| {
            // The first store waits for the test: the queue fills behind it.
            if offset == 0 {
                let _ = gate.lock().unwrap().recv();
            }
            tx.send((ino, offset, bytes[0])).unwrap();
            Ok(())
        })
        .unwrap();
        // A batch the thread is held up on, then two faults outrunning it: the second
        // offers pages the first queued, and reads one of them.
        std::thread::scope(|s| {
            s.spawn(|| pusher.offer(7, 1 << 20..(1 << 20) + PAGE, vec![(0, page(1))]));
            std::thread::sleep(Duration::from_millis(20));
            let p = |o: u64, b| (o * PAGE, page(b));
            pusher.offer(7, 10 * PAGE..11 * PAGE, vec![p(11, 2), p(12, 2), p(13, 2)]);
            pusher.offer(7, 11 * PAGE..12 * PAGE, vec![p(12, 3), p(13, 3), p(14, 3)]);
            pusher.offer(8, 0..PAGE, vec![p(12, 4)]);
            gate_tx.send(()).unwrap();
        });
        // Stored in order, each page once: the batch of inode 8 is the last one.
        let mut got = Vec::new();
        while got.last().is_none_or(|&(ino, _, _)| ino != 8) {
            got.push(rx.recv_timeout(Duration::from_secs(10)).expect("a store"));
        }
        let want = vec![
            (7, 0, 1),
            (7, 12 * PAGE, 2),
            (7, 13 * PAGE, 2),
            (7, 14 * PAGE, 3),
            (8, 12 * PAGE, 4),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_fault_whose_own_page_is_being_stored_does_not_wait_for_the_thread() {
        let (tx, rx) = channel();
        let (gate_tx, gate) = channel::<()>();
        let gate = Mutex::new(gate);
        // A worker that waited would wait a minute.
        let pusher = Pusher::start_with(Duration::from_secs(60), move |ino, offset, _| {
            if offset == 0 {
                let _ = gate.lock().unwrap().recv();
            }
            tx.send((ino, offset)).unwrap();
            Ok(())
        })
        .unwrap();
        std::thread::scope(|s| {
            s.spawn(|| pusher.offer(7, PAGE * 100..PAGE * 101, vec![(0, page(1))]));
            // The thread is storing page 0 (held up): a fault reading page 0 comes.
            let deadline = Instant::now() + Duration::from_secs(10);
            while pusher.shared.lock().storing.is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(pusher.shared.lock().storing, Some((7, 0)));
            pusher.reading(7, 0..PAGE);
            let t = Instant::now();
            pusher.offer(7, 0..PAGE, vec![(PAGE, page(2))]);
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "waited {:?}",
                t.elapsed()
            );
            gate_tx.send(()).unwrap();
        });
        // Its pages were still handed over.
        let got: Vec<(u64, u64)> = (0..2)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).expect("a store"))
            .collect();
        assert_eq!(got, vec![(7, 0), (7, PAGE)]);
    }

    #[test]
    fn a_worker_waits_at_most_the_bound_for_a_thread_that_is_held_up() {
        let (gate_tx, gate) = channel::<()>();
        let gate = Mutex::new(gate);
        let pusher = Pusher::start_with(WAIT, move |_, _, _| {
            let _ = gate.lock().unwrap().recv();
            Ok(())
        })
        .unwrap();
        let t = Instant::now();
        pusher.offer(1, 0..PAGE, vec![(PAGE, page(1))]);
        let waited = t.elapsed();
        assert!(waited >= WAIT, "{waited:?}");
        assert!(waited < Duration::from_secs(1), "{waited:?}");
        gate_tx.send(()).unwrap();
    }
}
