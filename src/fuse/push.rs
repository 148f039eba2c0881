//! Pages offered to the kernel's page cache (`FUSE_NOTIFY_STORE`) from threads of their own,
//! before the read that made them cheap is answered.
//!
//! Why threads: storing a page locks it in the kernel, and a page being read by a request
//! that a FUSE worker has not answered yet stays locked until that answer. A worker that
//! stored pages itself could wait on a request only it would serve (two workers storing the
//! pages the other one is serving would wait forever); a storing thread serves no request, so
//! whatever it waits for is answered. Workers hand pages over with a bounded queue per
//! thread, a fault's pages split in as many batches as there are threads ([`THREADS`]: each
//! store is a system call of about 4 us per page, and one thread storing a fault's 32 pages
//! left the other core idle while the reader waited), then wait for the threads a short,
//! bounded time before they answer their own read: the pages are then in the cache before the reader runs on and faults on the
//! next row (measured: stored after the answer, the reader outran the thread and most pages
//! were asked for anyway). When the queue is full the pages are dropped (they are advice;
//! the kernel asks for them again when it needs them).
//!
//! Each page is queued once: a page already waiting in the queue is not handed over again,
//! and a page that a fault asks for is taken out of the queue (the fault's answer fills it;
//! storing it would wait for that answer). A worker waits until everything queued before its
//! answer is stored, the pages of earlier faults included (batches are numbered; a batch
//! counts as stored once it and every batch before it are): when the threads fall behind (a
//! busy machine), a reader that outran it faults on a page still queued, and answering that
//! fault at once would let it outrun the thread on every row of its window, each fault
//! queueing the same rows again (measured: 13 faults per 64-row window instead of 2). A fault
//! takes its pages out of the queue when its request arrives; if the thread is storing one of
//! them already (queued by another reader's fault, locked by the kernel for this one), that
//! store waits for this answer, so the worker answers without waiting for the threads.

use std::collections::{BTreeSet, HashSet};
use std::ops::Range;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use fuser::{INodeNo, Notifier};

/// Batches of pages waiting for each thread.
const QUEUE: usize = 64;

/// Threads storing pages: a fault's pages are split between them (measured on 2 cores: a
/// fault's 32 pages took 125 us on one thread, and the second core idled meanwhile).
const THREADS: usize = 2;

/// Longest a worker waits for the pages queued before its answer to be stored.
const WAIT: Duration = Duration::from_millis(2);

/// One file's ranges of pages (`(offset, bytes)`: one page, or many in a row) and the batch's
/// ticket.
type Batch = (u64, Vec<(u64, Vec<u8>)>, u64);

/// What the workers and the thread share.
#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    stored: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Pages `(inode, offset)` queued and not stored yet, page by page (a range offered
    /// covers many).
    queued: HashSet<(u64, u64)>,
    /// Tickets of the latest batch handed over, and of the latest one stored with every
    /// batch before it.
    handed: u64,
    done: u64,
    /// Tickets stored while an earlier one was still being stored (by another thread).
    finished: BTreeSet<u64>,
    /// The pages `(inode, range)` each thread is storing now.
    storing: Vec<Option<(u64, Range<u64>)>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The offsets of the pages of `len` bytes at `offset` (page-aligned; the last may be short).
fn page_offsets(offset: u64, len: usize) -> impl Iterator<Item = u64> {
    (0..len.div_ceil(PAGE as usize) as u64).map(move |k| offset + k * PAGE)
}

impl State {
    /// Records batch `ticket` as stored and moves `done` past every ticket stored in a row.
    fn finish(&mut self, ticket: u64) {
        self.finished.insert(ticket);
        while self.finished.remove(&(self.done + 1)) {
            self.done += 1;
        }
    }

    /// Whether a thread is storing a page of `reading` of inode `ino`.
    fn storing_any(&self, ino: u64, reading: &Range<u64>) -> bool {
        self.storing
            .iter()
            .flatten()
            .any(|(i, at)| *i == ino && at.start < reading.end && reading.start < at.end)
    }

    /// Takes pages `pages` (indices from the range's first) of the range at `offset` of inode
    /// `ino` out of the queue while they are queued, from `*k` on: the run of them that is,
    /// after skipping those that are not (stored by an earlier range, read by a fault).
    fn take_run(
        &mut self,
        ino: u64,
        offset: u64,
        pages: usize,
        k: &mut usize,
    ) -> Option<Range<usize>> {
        let mut taken = |k: usize| self.queued.remove(&(ino, offset + k as u64 * PAGE));
        while *k < pages && !taken(*k) {
            *k += 1;
        }
        if *k == pages {
            return None;
        }
        let start = *k;
        *k += 1;
        while *k < pages && taken(*k) {
            *k += 1;
        }
        Some(start..*k)
    }

    /// Takes the pages of `reading` of inode `ino` out of the queue.
    fn cancel(&mut self, ino: u64, reading: std::ops::Range<u64>) {
        if self.queued.is_empty() {
            return;
        }
        let start = reading.start / PAGE * PAGE;
        let len = usize::try_from(reading.end.saturating_sub(start)).unwrap_or(usize::MAX);
        for at in page_offsets(start, len) {
            self.queued.remove(&(ino, at));
        }
    }
}

/// The storing threads' queues; the threads end when this is dropped.
#[derive(Debug)]
pub(crate) struct Pusher {
    queues: Vec<SyncSender<Batch>>,
    shared: Arc<Shared>,
    /// Longest a worker waits ([`WAIT`]; longer in tests).
    wait: Duration,
    /// Threads storing pages (a fault's pages are split between them).
    threads: usize,
}

impl Pusher {
    /// Starts the threads that store pages through `notifier`.
    pub(crate) fn start(notifier: Notifier) -> std::io::Result<Pusher> {
        Pusher::start_with(WAIT, THREADS, move |ino, offset, bytes| {
            notifier.store(INodeNo(ino), offset, bytes)
        })
    }

    /// Starts `threads` threads that store each page with `store(inode, offset, bytes)`;
    /// workers wait at most `wait` for them.
    fn start_with(
        wait: Duration,
        threads: usize,
        store: impl Fn(u64, u64, &[u8]) -> std::io::Result<()> + Send + Sync + 'static,
    ) -> std::io::Result<Pusher> {
        let threads = threads.max(1);
        let shared = Arc::new(Shared::default());
        shared.lock().storing = vec![None; threads];
        let store = Arc::new(store);
        let mut queues = Vec::new();
        for n in 0..threads {
            let (queue, batches) = sync_channel::<Batch>(QUEUE);
            queues.push(queue);
            let (theirs, store) = (shared.clone(), store.clone());
            std::thread::Builder::new()
                .name("b2fs-push".into())
                .spawn(move || store_batches(n, &theirs, &batches, &*store))?;
        }
        Ok(Pusher {
            queues,
            shared,
            wait,
            threads,
        })
    }

    /// Before a page fault of inode `ino` that reads the pages of `reading` is served: takes
    /// them out of the queue (the answer fills them; a store of one would wait for it).
    pub(crate) fn reading(&self, ino: u64, reading: std::ops::Range<u64>) {
        let mut state = self.shared.lock();
        state.cancel(ino, reading);
    }

    /// After a page fault of inode `ino` that reads the pages of `reading` (which the answer
    /// fills: they are taken out of the queue): hands the ranges of `pages` with a page not
    /// queued yet to the threads, split between them (or drops a batch when its thread's queue
    /// is full; the threads store only the pages nobody stored or read meanwhile), then waits
    /// at most [`WAIT`] until every page queued so far is stored; not at all when a thread is
    /// storing one of the fault's own pages (queued before the fault came: that store waits
    /// for this answer).
    pub(crate) fn offer(
        &self,
        ino: u64,
        reading: std::ops::Range<u64>,
        mut pages: Vec<(u64, Vec<u8>)>,
    ) {
        let (target, blocked) = {
            let mut state = self.shared.lock();
            state.cancel(ino, reading.clone());
            let mut blocked = state.storing_any(ino, &reading);
            pages.retain(|(offset, bytes)| {
                // Every page is queued (no short-circuit); the range goes when one is new.
                page_offsets(*offset, bytes.len())
                    .fold(false, |new, at| state.queued.insert((ino, at)) | new)
            });
            for (n, batch) in split(pages, self.threads).into_iter().enumerate() {
                let ticket = state.handed + 1;
                match self.queues[n].try_send((ino, batch, ticket)) {
                    Ok(()) => state.handed = ticket,
                    Err(e) => {
                        // Not stored: no page of these ranges stays queued (some may have been
                        // queued by an earlier batch, which then skips them: pages are advice).
                        let (full, (_, ranges, _)) = match e {
                            TrySendError::Full(batch) => (true, batch),
                            TrySendError::Disconnected(batch) => (false, batch),
                        };
                        for (offset, bytes) in ranges {
                            for at in page_offsets(offset, bytes.len()) {
                                state.queued.remove(&(ino, at));
                            }
                        }
                        if full {
                            log::trace!("page store queue full: pages of inode {ino} dropped");
                        } else {
                            // The thread is gone: nothing will be stored, nothing to wait for.
                            blocked = true;
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

/// Splits the ranges `pages` into at most `n` batches of about as many pages each, in order.
fn split(pages: Vec<(u64, Vec<u8>)>, n: usize) -> Vec<Vec<(u64, Vec<u8>)>> {
    let total: usize = pages
        .iter()
        .map(|(_, b)| b.len().div_ceil(PAGE as usize))
        .sum();
    if pages.is_empty() {
        return Vec::new();
    }
    let per = total.div_ceil(n.max(1)).max(1);
    let mut out: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new()];
    let mut in_last = 0;
    for range in pages {
        if in_last >= per {
            out.push(Vec::new());
            in_last = 0;
        }
        in_last += range.1.len().div_ceil(PAGE as usize);
        out.last_mut().expect("one batch at least").push(range);
    }
    out
}

/// One storing thread (number `n`): stores the batches it takes from `batches` with `store`.
fn store_batches(
    n: usize,
    theirs: &Shared,
    batches: &Receiver<Batch>,
    store: &(impl Fn(u64, u64, &[u8]) -> std::io::Result<()> + ?Sized),
) {
    loop {
        let next = batches.recv();
        let Ok((ino, ranges, ticket)) = next else {
            return;
        };
        let mut failed = false;
        for (offset, bytes) in ranges {
            // The runs of the range's pages still queued: the others were taken out by a
            // fault that reads them or stored by an earlier range. After a failed store of
            // this file, taken out and not stored.
            let pages = bytes.len().div_ceil(PAGE as usize);
            let mut k = 0;
            loop {
                let (run, at) = {
                    let mut state = theirs.lock();
                    let Some(run) = state.take_run(ino, offset, pages, &mut k) else {
                        break;
                    };
                    let at = offset + run.start as u64 * PAGE;
                    if !failed {
                        let end = offset + run.end as u64 * PAGE;
                        state.storing[n] = Some((ino, at..end));
                    }
                    (run, at)
                };
                if failed {
                    continue;
                }
                let piece =
                    &bytes[run.start * PAGE as usize..(run.end * PAGE as usize).min(bytes.len())];
                if let Err(e) = store(ino, at, piece) {
                    // The file was forgotten or the mount is going away.
                    log::debug!("store of inode {ino} at {at}: {e}");
                    failed = true;
                }
                theirs.lock().storing[n] = None;
            }
        }
        theirs.lock().finish(ticket);
        theirs.stored.notify_all();
    }
}

/// The kernel's page ([`crate::tree::PAGE`]), as a file offset.
const PAGE: u64 = crate::tree::PAGE as u64;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::mpsc::{Receiver, Sender, channel};

    fn page(b: u8) -> Vec<u8> {
        vec![b; PAGE as usize]
    }

    /// What the test thread reports of each store: `(inode, offset, bytes)`.
    type Stored = Receiver<(u64, u64, Vec<u8>)>;

    /// A pusher of one thread (workers wait at most `wait`) that reports each store as
    /// `(inode, offset, bytes)` and is held up on the store of offset 0 until the gate is
    /// sent to.
    fn gated(wait: Duration) -> (Pusher, Stored, Sender<()>) {
        gated_threads(wait, 1)
    }

    /// [`gated`] with `threads` storing threads.
    fn gated_threads(wait: Duration, threads: usize) -> (Pusher, Stored, Sender<()>) {
        let (tx, rx) = channel();
        let (gate_tx, gate) = channel::<()>();
        let gate = Mutex::new(gate);
        let pusher = Pusher::start_with(wait, threads, move |ino, offset, bytes| {
            if offset == 0 {
                let _ = gate.lock().unwrap().recv();
            }
            tx.send((ino, offset, bytes.to_vec())).unwrap();
            Ok(())
        })
        .unwrap();
        (pusher, rx, gate_tx)
    }

    /// Waits (polling, 10 s at most) until the thread is storing something.
    fn until_storing(pusher: &Pusher) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while pusher.shared.lock().storing.iter().all(Option::is_none) && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The next `n` stores, mapped by `f`.
    fn stores<T>(rx: &Stored, n: usize, f: impl Fn((u64, u64, Vec<u8>)) -> T) -> Vec<T> {
        (0..n)
            .map(|_| f(rx.recv_timeout(Duration::from_secs(10)).expect("a store")))
            .collect()
    }

    #[test]
    fn each_page_is_stored_once_and_a_faulted_page_not_at_all() {
        let (pusher, rx, gate) = gated(WAIT);
        // A batch the thread is held up on, then two faults outrunning it: the second
        // offers pages the first queued, and reads one of them.
        std::thread::scope(|s| {
            s.spawn(|| pusher.offer(7, 1 << 20..(1 << 20) + PAGE, vec![(0, page(1))]));
            until_storing(&pusher);
            let p = |o: u64, b| (o * PAGE, page(b));
            pusher.offer(7, 10 * PAGE..11 * PAGE, vec![p(11, 2), p(12, 2), p(13, 2)]);
            pusher.offer(7, 11 * PAGE..12 * PAGE, vec![p(12, 3), p(13, 3), p(14, 3)]);
            pusher.offer(8, 0..PAGE, vec![p(12, 4)]);
            gate.send(()).unwrap();
        });
        // Stored in order, each page once: the batch of inode 8 is the last one.
        let got = stores(&rx, 5, |(ino, offset, bytes)| (ino, offset, bytes[0]));
        let want = vec![
            (7, 0, 1),
            (7, 12 * PAGE, 2),
            (7, 13 * PAGE, 2),
            (7, 14 * PAGE, 3),
            (8, 12 * PAGE, 4),
        ];
        assert_eq!(got, want);
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    }

    #[test]
    fn a_range_of_pages_is_stored_by_runs_without_its_faulted_or_already_queued_pages() {
        let (pusher, rx, gate) = gated(WAIT);
        let range = |first: u64, n: u64| (first * PAGE, vec![5u8; (n * PAGE) as usize]);
        std::thread::scope(|s| {
            // The thread is held up on page 0 while: a fault offers pages 12-15 as one range
            // (the pages after a fault, `FORWARD_MAX`), a fault reads page 14 from the queue,
            // and a fault offers pages 15-17 (15 already queued).
            s.spawn(|| pusher.offer(7, 1 << 20..(1 << 20) + PAGE, vec![(0, page(1))]));
            until_storing(&pusher);
            pusher.offer(7, 11 * PAGE..12 * PAGE, vec![range(12, 4)]);
            pusher.reading(7, 14 * PAGE..15 * PAGE);
            pusher.offer(7, 14 * PAGE..15 * PAGE, vec![range(15, 3)]);
            gate.send(()).unwrap();
        });
        // (inode, first page, pages): each page once, page 14 not at all.
        let got = stores(&rx, 4, |(ino, offset, bytes)| {
            (ino, offset / PAGE, bytes.len() as u64 / PAGE)
        });
        assert_eq!(got, vec![(7, 0, 1), (7, 12, 2), (7, 15, 1), (7, 16, 2)]);
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    }

    #[test]
    fn a_fault_whose_own_page_is_being_stored_does_not_wait_for_the_thread() {
        // A worker that waited would wait a minute.
        let (pusher, rx, gate) = gated(Duration::from_secs(60));
        std::thread::scope(|s| {
            s.spawn(|| pusher.offer(7, PAGE * 100..PAGE * 101, vec![(0, page(1))]));
            // The thread is storing page 0 (held up): a fault reading page 0 comes.
            until_storing(&pusher);
            assert_eq!(pusher.shared.lock().storing[0], Some((7, 0..PAGE)));
            pusher.reading(7, 0..PAGE);
            let t = Instant::now();
            pusher.offer(7, 0..PAGE, vec![(PAGE, page(2))]);
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "waited {:?}",
                t.elapsed()
            );
            gate.send(()).unwrap();
        });
        // Its pages were still handed over.
        let got = stores(&rx, 2, |(ino, offset, _)| (ino, offset));
        assert_eq!(got, vec![(7, 0), (7, PAGE)]);
    }

    #[test]
    fn a_faults_pages_are_stored_by_both_threads_and_the_worker_waits_for_both() {
        // Workers would wait a minute: the gate, not the bound, must end the wait.
        let (pusher, rx, gate) = gated_threads(Duration::from_secs(60), 2);
        let answered = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                // Two batches: page 0 (its thread held up) and page 5.
                pusher.offer(
                    7,
                    100 * PAGE..101 * PAGE,
                    vec![(0, page(1)), (5 * PAGE, page(2))],
                );
                answered.store(true, Ordering::SeqCst);
            });
            // Page 5 is stored while the other thread is held up on page 0...
            assert_eq!(
                stores(&rx, 1, |(ino, offset, _)| (ino, offset)),
                vec![(7, 5 * PAGE)]
            );
            // ...and the worker still waits for page 0, queued before its answer.
            assert!(
                !answered.load(Ordering::SeqCst),
                "answered before page 0 was stored"
            );
            gate.send(()).unwrap();
        });
        assert!(answered.load(Ordering::SeqCst));
        assert_eq!(
            stores(&rx, 1, |(ino, offset, _)| (ino, offset)),
            vec![(7, 0)]
        );
    }

    #[test]
    fn batches_count_as_stored_once_every_earlier_one_is() {
        let mut state = State::default();
        state.finish(2);
        state.finish(3);
        assert_eq!(state.done, 0, "batch 1 is still being stored");
        state.finish(1);
        assert_eq!(state.done, 3);
        state.finish(5);
        assert_eq!(state.done, 3);
        assert!(state.finished.contains(&5));
    }

    #[test]
    fn split_cuts_between_ranges_into_batches_of_about_as_many_pages() {
        let r = |first: u64, n: u64| (first * PAGE, vec![0u8; (n * PAGE) as usize]);
        let firsts = |batches: Vec<Vec<(u64, Vec<u8>)>>| -> Vec<Vec<u64>> {
            batches
                .into_iter()
                .map(|b| b.into_iter().map(|(o, _)| o / PAGE).collect())
                .collect()
        };
        assert!(split(Vec::new(), 2).is_empty());
        assert_eq!(firsts(split(vec![r(0, 1)], 2)), vec![vec![0]]);
        let below: Vec<_> = (1..=4).map(|k| r(k * 16, 1)).collect();
        assert_eq!(
            firsts(split(below.clone(), 2)),
            vec![vec![16, 32], vec![48, 64]]
        );
        assert_eq!(firsts(split(below, 1)), vec![vec![16, 32, 48, 64]]);
        // A forward range of 3 pages, then 3 single pages: 6 pages, 3 a batch.
        let mixed = vec![r(1, 3), r(16, 1), r(32, 1), r(48, 1)];
        assert_eq!(firsts(split(mixed, 2)), vec![vec![1], vec![16, 32, 48]]);
    }

    #[test]
    fn a_worker_waits_at_most_the_bound_for_a_thread_that_is_held_up() {
        let (gate_tx, gate) = channel::<()>();
        let gate = Mutex::new(gate);
        let pusher = Pusher::start_with(WAIT, THREADS, move |_, _, _| {
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
