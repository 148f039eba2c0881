//! Pages offered to the kernel's page cache (`FUSE_NOTIFY_STORE`) from threads of their own,
//! before the read that made them cheap is answered; and that answer, sent by the thread
//! that stores the last of those pages.
//!
//! Why threads: storing a page locks it in the kernel, and a page being read by a request
//! that a FUSE worker has not answered yet stays locked until that answer. A worker that
//! stored pages itself could wait on a request only it would serve (two workers storing the
//! pages the other one is serving would wait forever); a storing thread serves no request, so
//! whatever it waits for is answered. Workers hand pages over with a bounded queue per
//! thread, a fault's pages split in as many batches as there are threads ([`THREADS`]: each
//! store is a system call of about 4 us per page, and one thread storing a fault's 32 pages
//! left the other core idle while the reader waited), together with the fault's answer,
//! which goes only once the pages are stored, or after a short bound ([`WAIT`]): the pages
//! are then in the cache before the reader runs on and faults on the next row (measured:
//! stored after the answer, the reader outran the thread and most pages were asked for
//! anyway). When the queue is full the pages are dropped (they are advice; the kernel asks
//! for them again when it needs them).
//!
//! Who answers: the storing thread that finishes the last batch the answer waits for sends
//! it (a write to the FUSE device), so the worker goes back to its requests at once, and
//! nobody sleeps on the answer or is woken for it (a worker that waited was woken across
//! vCPUs once per fault: BENCHMARKS.md, "Session 15: windows"). An answer whose bound has
//! passed is sent by a storing thread between two stores. The worker answers itself, at
//! once, when nothing is left to store or a thread is storing one of the fault's own pages
//! (below). A storing thread never waits for an answer it holds: a store waits only for the
//! page locks of faults whose own pages are not queued before their answer (see below), and
//! those are answered by their workers or by batches stored before.
//!
//! Each page is queued once: a page already waiting in the queue is not handed over again,
//! and a page that a fault asks for is taken out of the queue (the fault's answer fills it;
//! storing it would wait for that answer). An answer waits until everything queued before it
//! is stored, the pages of earlier faults included (batches are numbered; a batch counts as
//! stored once it and every batch before it are): when the threads fall behind (a busy
//! machine), a reader that outran it faults on a page still queued, and answering that
//! fault at once would let it outrun the thread on every row of its window, each fault
//! queueing the same rows again (measured: 13 faults per 64-row window instead of 2). A fault
//! takes its pages out of the queue when its request arrives; if the thread is storing one of
//! them already (queued by another reader's fault, locked by the kernel for this one), that
//! store waits for this answer, so the worker answers without waiting for the threads.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use fuser::{INodeNo, Notifier};

use crate::tree::ReadData;

/// Batches of pages waiting for each thread.
const QUEUE: usize = 64;

/// Threads storing pages: a fault's pages are split between them (measured on 2 cores: a
/// fault's 32 pages took 125 us on one thread, and the second core idled meanwhile).
const THREADS: usize = 2;

/// Longest an answer waits for the pages queued before it to be stored.
const WAIT: Duration = Duration::from_millis(2);

/// One file's ranges of pages (`(offset, bytes)`: one page, or many in a row) and the batch's
/// ticket.
type Batch = (u64, Vec<(u64, ReadData)>, u64);

/// A fault's answer (the reply to its FUSE request), sent once every page queued before it is
/// stored: by the storing thread that finishes the last of those batches.
pub(crate) type Answer = Box<dyn FnOnce() + Send>;

/// An answer waiting for the batches up to `target`, or for `deadline`.
struct Pending {
    target: u64,
    deadline: Instant,
    answer: Answer,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("target", &self.target)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// What the workers and the threads share.
#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Pages `(inode, offset)` queued and not stored yet, page by page (a range offered
    /// covers many), with the ticket of the batch that stores them: a batch stores only the
    /// pages queued by it, so a page taken out by a fault and queued again after the fault's
    /// answer is stored by the later batch, never by one that answer waits for.
    queued: HashMap<(u64, u64), u64>,
    /// Tickets of the latest batch handed over, and of the latest one stored with every
    /// batch before it.
    handed: u64,
    done: u64,
    /// Tickets stored while an earlier one was still being stored (by another thread).
    finished: BTreeSet<u64>,
    /// The pages `(inode, range)` each thread is storing now.
    storing: Vec<Option<(u64, Range<u64>)>>,
    /// Answers of faults waiting for their batches, oldest (lowest target) first.
    answers: std::collections::VecDeque<Pending>,
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

    /// Takes the answers whose batches are all stored, or whose wait is over at `now`.
    fn ready_answers(&mut self, now: Instant) -> Vec<Answer> {
        let mut ready = Vec::new();
        while let Some(p) = self.answers.front() {
            if p.target > self.done && p.deadline > now {
                break;
            }
            ready.extend(self.answers.pop_front().map(|p| p.answer));
        }
        ready
    }

    /// Whether a thread is storing a page of `reading` of inode `ino`.
    fn storing_any(&self, ino: u64, reading: &Range<u64>) -> bool {
        self.storing
            .iter()
            .flatten()
            .any(|(i, at)| *i == ino && at.start < reading.end && reading.start < at.end)
    }

    /// Takes pages `pages` (indices from the range's first) of the range at `offset` of inode
    /// `ino` out of the queue while they are queued by batch `ticket`, from `*k` on: the run
    /// of them that is, after skipping those that are not (stored by an earlier range, read
    /// by a fault, queued again by a later batch).
    fn take_run(
        &mut self,
        (ino, offset, ticket): (u64, u64, u64),
        pages: usize,
        k: &mut usize,
    ) -> Option<Range<usize>> {
        let mut taken = |k: usize| {
            let page = (ino, offset + k as u64 * PAGE);
            let ours = self.queued.get(&page) == Some(&ticket);
            ours && self.queued.remove(&page).is_some()
        };
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
    /// Longest an answer waits ([`WAIT`]; other bounds in tests).
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
    /// answers wait at most `wait` for them.
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
    /// is full; the threads store only the pages nobody stored or read meanwhile), and sends
    /// the fault's `answer` once every page queued so far is stored, or after at most
    /// [`WAIT`]: the storing thread that finishes the last of those batches sends it, so the
    /// worker neither sleeps nor is woken for it. The worker sends it itself, at once, when
    /// nothing is left to wait for, or when a thread is storing one of the fault's own pages
    /// (queued before the fault came: that store waits for this answer).
    pub(crate) fn offer(
        &self,
        ino: u64,
        reading: std::ops::Range<u64>,
        mut pages: Vec<(u64, ReadData)>,
        answer: Answer,
    ) {
        let mut state = self.shared.lock();
        state.cancel(ino, reading.clone());
        let mut blocked = state.storing_any(ino, &reading);
        pages.retain(|(offset, bytes)| {
            // A range goes when one of its pages is not queued yet.
            page_offsets(*offset, bytes.len()).any(|at| !state.queued.contains_key(&(ino, at)))
        });
        for (n, batch) in split(pages, self.threads).into_iter().enumerate() {
            let ticket = state.handed + 1;
            // The batch's pages not queued yet are its own (the others stay an earlier one's).
            for (offset, bytes) in &batch {
                for at in page_offsets(*offset, bytes.len()) {
                    state.queued.entry((ino, at)).or_insert(ticket);
                }
            }
            match self.queues[n].try_send((ino, batch, ticket)) {
                Ok(()) => state.handed = ticket,
                Err(e) => {
                    // Not stored: none of its own pages stays queued (and its ticket goes to
                    // the next batch).
                    let (full, (_, ranges, _)) = match e {
                        TrySendError::Full(batch) => (true, batch),
                        TrySendError::Disconnected(batch) => (false, batch),
                    };
                    for (offset, bytes) in ranges {
                        for at in page_offsets(offset, bytes.len()) {
                            if state.queued.get(&(ino, at)) == Some(&ticket) {
                                state.queued.remove(&(ino, at));
                            }
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
        let target = state.handed;
        if blocked || state.done >= target {
            drop(state);
            return answer();
        }
        let deadline = Instant::now() + self.wait;
        state.answers.push_back(Pending {
            target,
            deadline,
            answer,
        });
    }
}

/// Splits the ranges `pages` into at most `n` batches of about as many pages each, in order.
fn split(pages: Vec<(u64, ReadData)>, n: usize) -> Vec<Vec<(u64, ReadData)>> {
    let total: usize = pages
        .iter()
        .map(|(_, b)| b.len().div_ceil(PAGE as usize))
        .sum();
    if pages.is_empty() {
        return Vec::new();
    }
    let per = total.div_ceil(n.max(1)).max(1);
    let mut out: Vec<Vec<(u64, ReadData)>> = vec![Vec::new()];
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
    // Answers are sent with no lock held (each is a write to the FUSE device).
    let send = |answers: Vec<Answer>| answers.into_iter().for_each(|a| a());
    loop {
        let next = batches.recv();
        let Ok((ino, ranges, ticket)) = next else {
            // The mount is going away: whatever still waits is answered.
            let all = theirs.lock().ready_answers(far_future());
            return send(all);
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
                    let Some(run) = state.take_run((ino, offset, ticket), pages, &mut k) else {
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
                // Answers whose wait is over go now, between two stores.
                let late = {
                    let mut state = theirs.lock();
                    state.storing[n] = None;
                    match state.answers.front() {
                        Some(p) if p.deadline <= Instant::now() => {
                            state.ready_answers(Instant::now())
                        }
                        _ => Vec::new(),
                    }
                };
                send(late);
            }
        }
        let ready = {
            let mut state = theirs.lock();
            state.finish(ticket);
            state.ready_answers(Instant::now())
        };
        send(ready);
    }
}

/// An instant later than any deadline of a waiting answer.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

/// The kernel's page ([`crate::tree::PAGE`]), as a file offset.
const PAGE: u64 = crate::tree::PAGE as u64;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::{Receiver, Sender, channel};

    fn page(b: u8) -> ReadData {
        ReadData::Owned(vec![b; PAGE as usize])
    }

    /// What the test thread reports of each store: `(inode, offset, bytes)`.
    type Stored = Receiver<(u64, u64, Vec<u8>)>;

    /// A pusher of one thread (answers wait at most `wait`) that reports each store as
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

    /// An answer that does nothing.
    fn none() -> Answer {
        Box::new(|| {})
    }

    /// An answer that reports the name of the thread that sent it.
    fn reporting() -> (Answer, Receiver<Option<String>>) {
        let (tx, rx) = channel();
        let answer = Box::new(move || {
            let _ = tx.send(std::thread::current().name().map(str::to_owned));
        });
        (answer, rx)
    }

    #[test]
    fn each_page_is_stored_once_and_a_faulted_page_not_at_all() {
        let (pusher, rx, gate) = gated(WAIT);
        // A batch the thread is held up on, then two faults outrunning it: the second
        // offers pages the first queued, and reads one of them.
        pusher.offer(7, 1 << 20..(1 << 20) + PAGE, vec![(0, page(1))], none());
        until_storing(&pusher);
        let p = |o: u64, b| (o * PAGE, page(b));
        let offer = |reading, pages| pusher.offer(7, reading, pages, none());
        offer(10 * PAGE..11 * PAGE, vec![p(11, 2), p(12, 2), p(13, 2)]);
        offer(11 * PAGE..12 * PAGE, vec![p(12, 3), p(13, 3), p(14, 3)]);
        pusher.offer(8, 0..PAGE, vec![p(12, 4)], none());
        gate.send(()).unwrap();
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
        let range = |first: u64, n: u64| {
            (
                first * PAGE,
                ReadData::Owned(vec![5u8; (n * PAGE) as usize]),
            )
        };
        // The thread is held up on page 0 while: a fault offers pages 12-15 as one range
        // (the pages after a fault, `FORWARD_MAX`), a fault reads page 14 from the queue,
        // and a fault offers pages 15-17 (15 already queued).
        pusher.offer(7, 1 << 20..(1 << 20) + PAGE, vec![(0, page(1))], none());
        until_storing(&pusher);
        pusher.offer(7, 11 * PAGE..12 * PAGE, vec![range(12, 4)], none());
        pusher.reading(7, 14 * PAGE..15 * PAGE);
        pusher.offer(7, 14 * PAGE..15 * PAGE, vec![range(15, 3)], none());
        gate.send(()).unwrap();
        // (inode, first page, pages): each page once, page 14 not at all.
        let got = stores(&rx, 4, |(ino, offset, bytes)| {
            (ino, offset / PAGE, bytes.len() as u64 / PAGE)
        });
        assert_eq!(got, vec![(7, 0, 1), (7, 12, 2), (7, 15, 1), (7, 16, 2)]);
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    }

    #[test]
    fn a_page_a_fault_took_out_and_another_queued_again_is_stored_after_its_answer() {
        // One thread, held up on page 0 until told; the store of page 5 waits for the answer
        // of the fault that reads page 5, as the kernel's page lock makes it wait.
        let (tx, rx) = channel();
        let (gate_tx, gate) = channel::<()>();
        let (answer_tx, answer_rx) = channel::<()>();
        let (gate, answer_rx) = (Mutex::new(gate), Mutex::new(answer_rx));
        let pusher = Pusher::start_with(Duration::from_secs(60), 1, move |_, offset, _| {
            if offset == 0 {
                let _ = gate.lock().unwrap().recv();
            }
            if offset == 5 * PAGE {
                let answered = answer_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(10));
                assert!(
                    answered.is_ok(),
                    "the store of page 5 waited for its fault's answer"
                );
            }
            tx.send(offset / PAGE).unwrap();
            Ok(())
        })
        .unwrap();
        pusher.offer(7, 100 * PAGE..101 * PAGE, vec![(0, page(1))], none());
        until_storing(&pusher);
        // A fault queues page 5; a fault reading page 5 takes it out and offers page 20 (its
        // answer waits for that); another fault queues page 5 again.
        pusher.offer(7, 101 * PAGE..102 * PAGE, vec![(5 * PAGE, page(2))], none());
        pusher.reading(7, 5 * PAGE..6 * PAGE);
        let answer = Box::new(move || answer_tx.send(()).unwrap());
        pusher.offer(7, 5 * PAGE..6 * PAGE, vec![(20 * PAGE, page(3))], answer);
        pusher.offer(7, 102 * PAGE..103 * PAGE, vec![(5 * PAGE, page(4))], none());
        gate_tx.send(()).unwrap();
        let got: Vec<u64> = (0..3)
            .map(|_| rx.recv_timeout(Duration::from_secs(20)).expect("a store"))
            .collect();
        assert_eq!(got, vec![0, 20, 5]);
    }

    #[test]
    fn a_fault_whose_own_page_is_being_stored_is_answered_at_once_by_its_worker() {
        // An answer left to the threads would wait a minute.
        let (pusher, rx, gate) = gated(Duration::from_secs(60));
        pusher.offer(7, PAGE * 100..PAGE * 101, vec![(0, page(1))], none());
        // The thread is storing page 0 (held up): a fault reading page 0 comes.
        until_storing(&pusher);
        assert_eq!(pusher.shared.lock().storing[0], Some((7, 0..PAGE)));
        pusher.reading(7, 0..PAGE);
        let (answer, answered) = reporting();
        pusher.offer(7, 0..PAGE, vec![(PAGE, page(2))], answer);
        let by = answered.try_recv().expect("answered before offer returned");
        assert_eq!(by, std::thread::current().name().map(str::to_owned));
        gate.send(()).unwrap();
        // Its pages were still handed over.
        let got = stores(&rx, 2, |(ino, offset, _)| (ino, offset));
        assert_eq!(got, vec![(7, 0), (7, PAGE)]);
    }

    #[test]
    fn a_faults_answer_is_sent_by_the_thread_that_stores_its_last_batch() {
        // The bound would end the wait after a minute: the gate, not the bound, must end it.
        let (pusher, rx, gate) = gated_threads(Duration::from_secs(60), 2);
        // Two batches: page 0 (its thread held up) and page 5.
        let (answer, answered) = reporting();
        let pages = vec![(0, page(1)), (5 * PAGE, page(2))];
        pusher.offer(7, 100 * PAGE..101 * PAGE, pages, answer);
        // Page 5 is stored while the other thread is held up on page 0...
        assert_eq!(
            stores(&rx, 1, |(ino, offset, _)| (ino, offset)),
            vec![(7, 5 * PAGE)]
        );
        // ...and the answer still waits for page 0, queued before it.
        assert!(
            answered.recv_timeout(Duration::from_millis(50)).is_err(),
            "answered before page 0 was stored"
        );
        gate.send(()).unwrap();
        let by = answered
            .recv_timeout(Duration::from_secs(10))
            .expect("answered");
        assert_eq!(by.as_deref(), Some("b2fs-push"), "sent by a storing thread");
        assert_eq!(
            stores(&rx, 1, |(ino, offset, _)| (ino, offset)),
            vec![(7, 0)]
        );
    }

    #[test]
    fn a_fault_with_nothing_to_wait_for_is_answered_by_its_worker() {
        let (pusher, _rx, _gate) = gated(Duration::from_secs(60));
        let (answer, answered) = reporting();
        pusher.offer(7, 0..PAGE, Vec::new(), answer);
        let by = answered.try_recv().expect("answered before offer returned");
        assert_eq!(by, std::thread::current().name().map(str::to_owned));
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
        let r = |first: u64, n: u64| {
            (
                first * PAGE,
                ReadData::Owned(vec![0u8; (n * PAGE) as usize]),
            )
        };
        let firsts = |batches: Vec<Vec<(u64, ReadData)>>| -> Vec<Vec<u64>> {
            batches
                .into_iter()
                .map(|b| b.into_iter().map(|(o, _)| o / PAGE).collect())
                .collect()
        };
        assert!(split(Vec::new(), 2).is_empty());
        assert_eq!(firsts(split(vec![r(0, 1)], 2)), vec![vec![0]]);
        let below = || (1..=4).map(|k| r(k * 16, 1)).collect::<Vec<_>>();
        assert_eq!(firsts(split(below(), 2)), vec![vec![16, 32], vec![48, 64]]);
        assert_eq!(firsts(split(below(), 1)), vec![vec![16, 32, 48, 64]]);
        // A forward range of 3 pages, then 3 single pages: 6 pages, 3 a batch.
        let mixed = vec![r(1, 3), r(16, 1), r(32, 1), r(48, 1)];
        assert_eq!(firsts(split(mixed, 2)), vec![vec![1], vec![16, 32, 48]]);
    }

    #[test]
    fn an_answer_goes_between_two_stores_once_its_wait_is_over() {
        // One thread, held up on each page until told; answers wait at most 1 ms.
        let (tx, rx) = channel();
        let (gate_tx, gate) = channel::<()>();
        let gate = Mutex::new(gate);
        let wait = Duration::from_millis(1);
        let pusher = Pusher::start_with(wait, 1, move |_, offset, _| {
            let _ = gate.lock().unwrap().recv();
            tx.send(offset).unwrap();
            Ok(())
        })
        .unwrap();
        let (answer, answered) = reporting();
        let t = Instant::now();
        pusher.offer(
            1,
            0..PAGE,
            vec![(PAGE, page(1)), (2 * PAGE, page(2))],
            answer,
        );
        until_storing(&pusher);
        while t.elapsed() <= wait {
            std::thread::sleep(Duration::from_millis(1));
        }
        // The first store ends after the wait is over: the answer goes before the second.
        gate_tx.send(()).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(PAGE));
        let by = answered
            .recv_timeout(Duration::from_secs(10))
            .expect("answered");
        assert_eq!(by.as_deref(), Some("b2fs-push"));
        assert!(rx.try_recv().is_err(), "page 2 is still being stored");
        gate_tx.send(()).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(2 * PAGE));
    }
}
